// Precompiled once per build for every Catch2 test executable (idem_add_catch_test in
// tests/CMakeLists.txt): the headers most test files include, parsed once instead of in every file.
// Not a header to include: a test file still includes what it uses, and every public header is
// compiled on its own without it (tests/headers).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <idem/idem.hpp>
#include <idem/policy_registry.hpp>
