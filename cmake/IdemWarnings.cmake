# idem_warnings(<target>): the warning set every target of idem's own code builds with.
function(idem_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Wnull-dereference)
  if(IDEM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
