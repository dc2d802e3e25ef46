// Annotations that exist only under -D options given by target_compile_options and by
// CMAKE_CXX_FLAGS (tests/annotator/CMakeLists.txt): the generator must see what the compiler
// sees, or configured_test.cpp's idem::invoke finds no policy and does not compile.
#pragma once

inline int from_options_runs = 0;
inline int from_flags_runs = 0;

#ifdef IDEM_E2E_FROM_OPTIONS
[[idem::idempotent(key = "id")]] void from_options(int id);
#endif

#ifdef IDEM_E2E_FROM_FLAGS
[[idem::idempotent(key = "id")]] void from_flags(int id);
#endif
