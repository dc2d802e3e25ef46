# tests/precompiled_headers.cmake, included by tests/CMakeLists.txt.
#
# Precompiled headers: each kind is compiled once per build, by a target of its own, and reused
# (REUSE_FROM) by every test executable of that kind, so that Catch2's single header, the standard
# library and idem's headers are parsed once per build instead of once per test file. The kinds:
# `tests` (support/precompiled/tests.hpp) and, for executables that link idem::asio or idem::beast,
# `asio_tests` (asio_tests.hpp). Reuse needs the same language flags in owner and user: both get
# the build's flags and nothing of their own that changes the language (definitions and warning
# flags may differ; GCC's -Winvalid-pch, which CMake adds, turns a mismatch into a warning and so
# an error under IDEM_WERROR). Off with IDEM_PRECOMPILE_HEADERS=OFF, to check that every test file
# includes what it uses.
option(IDEM_PRECOMPILE_HEADERS "Precompile the headers the test executables share" ON)

# idem_use_precompiled_headers(<target> <kind>): <target> compiles with the precompiled header
# <kind> (nothing without IDEM_PRECOMPILE_HEADERS).
function(idem_use_precompiled_headers target kind)
  if(NOT IDEM_PRECOMPILE_HEADERS)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM idem_pch_${kind})
  idem_precompiled_headers_flags(${target})
endfunction()

# What owner and users of a precompiled header share beyond the build's flags:
#  - _FILE_OFFSET_BITS=64, which hiredis's target defines for its users: glibc's headers read it,
#    so a PCH made without it is refused by the tests that link hiredis (and one made with it by
#    the others). A no-op on the 64-bit targets idem builds for;
#  - g++: -Wno-attributes=idem::, which idem_generate gives annotated code: the PCH records which
#    attribute namespaces are ignored, so the owner must ignore the one the users ignore;
#  - idem_precompiled_header_warnings (cmake/IdemWarnings.cmake).
function(idem_precompiled_headers_flags target)
  target_compile_definitions(${target} PRIVATE _FILE_OFFSET_BITS=64)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-attributes=idem::)
  endif()
  idem_precompiled_header_warnings(${target})
endfunction()

# The owners: one target a kind, whose only source is empty.
if(IDEM_PRECOMPILE_HEADERS)
  set(kinds tests)
  if(TARGET idem::asio)
    list(APPEND kinds asio_tests)
  endif()
  foreach(kind IN LISTS kinds)
    set(source "${CMAKE_CURRENT_BINARY_DIR}/idem_pch_${kind}.cpp")
    file(CONFIGURE OUTPUT "${source}" CONTENT "// The owner of the precompiled header ${kind}.hpp.\n")
    add_library(idem_pch_${kind} OBJECT "${source}")
    target_link_libraries(idem_pch_${kind} PRIVATE idem::runtime Catch2::Catch2)
    target_precompile_headers(idem_pch_${kind} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/support/precompiled/${kind}.hpp")
    idem_warnings(idem_pch_${kind})
    idem_precompiled_headers_flags(idem_pch_${kind})
    idem_test_optimization(idem_pch_${kind})
  endforeach()
  if(TARGET idem::asio)
    target_link_libraries(idem_pch_asio_tests PRIVATE idem::asio)
    idem_asio_warnings(idem_pch_asio_tests)
  endif()
endif()
