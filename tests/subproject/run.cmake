# Configures, builds and runs tests/subproject/consumer against this source tree (Release).
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${status}): ${command}\n${out}\n${err}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/subproject/consumer -B ${WORK} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=Release -DIDEM_SOURCE=${SOURCE})
run(${CMAKE_COMMAND} --build ${WORK} -j 2)
if(output MATCHES "warning:")
  message(FATAL_ERROR "the Release build of idem as a subproject warned:\n${output}")
endif()
run(${WORK}/consumer)
message(STATUS "${output}")
