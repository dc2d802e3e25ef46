// tests/http/http_servers.hpp — the servers a case table runs against: cpp-httplib, and Boost.Beast
// where idem::beast is built (IDEM_TEST_BEAST). Use as
// TEMPLATE_TEST_CASE("...", "[http]", IDEM_HTTP_SERVERS) with the names below in scope.
#pragma once

#include "http_test_support.hpp"
#ifdef IDEM_TEST_BEAST
#include "beast_test_server.hpp"
#define IDEM_HTTP_SERVERS httplib_test_server, beast_test_server
#else
#define IDEM_HTTP_SERVERS httplib_test_server
#endif
