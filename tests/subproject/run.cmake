# Configures, builds and runs tests/subproject/consumer against this source tree (Release).
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_checked.cmake)

file(REMOVE_RECURSE ${WORK})
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/subproject/consumer -B ${WORK} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=Release -DIDEM_SOURCE=${SOURCE})
run(${CMAKE_COMMAND} --build ${WORK} -j 2)
if(output MATCHES "warning:")
  message(FATAL_ERROR "the Release build of idem as a subproject warned:\n${output}")
endif()
run(${WORK}/consumer)
message(STATUS "${output}")
