# idem_warnings(<target>): the warning set every target of idem's own code builds with. Private to
# each target: nothing reaches a project that builds or embeds idem. -Werror only with IDEM_WERROR
# (off by default; scripts/test.sh turns it on) and only when idem is the top-level project, so a
# new compiler's new warning never breaks someone else's build.
function(idem_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Wnull-dereference)
  if(IDEM_WERROR AND idem_IS_TOP_LEVEL)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
