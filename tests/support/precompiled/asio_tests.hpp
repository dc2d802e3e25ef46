// Precompiled once per build for the Catch2 test executables that use Boost.Asio (idem::asio or
// idem::beast): tests.hpp and the Asio headers they share. See tests.hpp.
#pragma once

#include "tests.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio.hpp>
