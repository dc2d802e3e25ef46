# Generates HEADER into OUT and compares every output with the files in GOLDEN.
# To accept a deliberate change: run with -DUPDATE=ON.
get_filename_component(stem ${HEADER} NAME_WE)
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${TOOL} --include-as=${HEADER} --output-header=${OUT}/${stem}.idem.hpp
                        --output-source=${OUT}/${stem}.idem.cpp --manifest=${OUT}/${stem}.idem.json
                        ${HEADER} -- ${CONTEXT}
                RESULT_VARIABLE status ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "idem-annotate failed on ${HEADER}:\n${errors}")
endif()
foreach(suffix idem.hpp idem.cpp idem.json)
  set(file ${stem}.${suffix})
  if(UPDATE)
    file(COPY_FILE ${OUT}/${file} ${GOLDEN}/${file}.golden)
    continue()
  endif()
  file(READ ${OUT}/${file} actual)
  file(READ ${GOLDEN}/${file}.golden expected)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${file} differs from ${GOLDEN}/${file}.golden:\n${actual}")
  endif()
endforeach()
