# idem_warnings(<target>): the warning set every target of idem's own code builds with. Private to
# each target: nothing reaches a project that builds or embeds idem. -Werror only with IDEM_WERROR
# (off by default; scripts/test.sh turns it on) and only when idem is the top-level project, so a
# new compiler's new warning never breaks someone else's build.
function(idem_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Wnull-dereference)
  # g++ 12 at -O3 (Release) reports std::string code of libstdc++ inlined into ours: -Wrestrict on
  # `"x" + std::string` (GCC PR105329) and -Wmaybe-uninitialized on aggregates holding strings
  # (documented by GCC as prone to false positives). Both are noise there; clang++ keeps checking.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-Wno-restrict -Wno-maybe-uninitialized>)
  endif()
  if(IDEM_WERROR AND idem_IS_TOP_LEVEL)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# idem_asio_warnings(<target>): after idem_warnings, for idem's own targets that use Boost.Asio. g++ 12 at -O2/-O3
# reports -Wnull-dereference inside Asio's any_executor comparison once it is inlined into our code
# (io_context.hpp, `a.target_ == b.target_`): a false positive in a system header's code, so the
# flag is dropped there for g++; clang++ keeps it.
function(idem_asio_warnings target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-null-dereference)
  endif()
endfunction()

# idem_precompiled_header_warnings(<target>): after idem_warnings, for idem's own targets that
# compile with a precompiled header. g++ 12 at -O3 then reports -Wstringop-overflow,
# -Wstringop-overread and -Warray-bounds inside libstdc++'s string code inlined into ours
# (`"x" + std::string`: the false positives of GCC PR105329, for which idem_warnings drops
# -Wrestrict); parsed as usual, the header's system-header status hides them. clang++ keeps them.
function(idem_precompiled_header_warnings target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:-Wno-stringop-overflow -Wno-stringop-overread
                                                                    -Wno-array-bounds>)
  endif()
endfunction()
