# Installs the build BUILD into WORK/prefix, configures and builds tests/kit/example against it with
# compiler CXX, and runs the example's two contract executables: the store must pass every case (at
# least MIN_CASES of them), the unfenced store must fail, on a fencing case, with Catch's summary
# printed (a failed case, not a crash).
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_checked.cmake)

file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/kit/example -B ${WORK}/build -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
file(STRINGS ${WORK}/build/CMakeCache.txt idem_dir REGEX "^idem_DIR:")
if(NOT idem_dir MATCHES "=${prefix}/")
  message(FATAL_ERROR "the example found idem elsewhere than in the install tree ${prefix}: ${idem_dir}")
endif()
run(${CMAKE_COMMAND} --build ${WORK}/build -j 2)
if(output MATCHES "warning:")
  message(FATAL_ERROR "the example store warned when built against the installed kit:\n${output}")
endif()

# The store: every case passes.
execute_process(COMMAND ${WORK}/build/example_store_contract RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the example store failed the installed contract (${status}):\n${out}\n${err}")
endif()
if(NOT out MATCHES "All tests passed \\([0-9]+ assertions? in ([0-9]+) test cases?\\)")
  message(FATAL_ERROR "no Catch summary in the example store's run:\n${out}\n${err}")
endif()
set(cases ${CMAKE_MATCH_1})
if(cases LESS MIN_CASES)
  message(FATAL_ERROR "the installed contract ran ${cases} cases, fewer than ${MIN_CASES}:\n${out}")
endif()
message(STATUS "example store: all ${cases} contract cases passed")

# The unfenced store: the kit fails it on fencing, after running every case.
execute_process(COMMAND ${WORK}/build/unfenced_store_contract RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status EQUAL 0)
  message(FATAL_ERROR "the installed contract passed a store that ignores lease tokens:\n${out}\n${err}")
endif()
if(NOT out MATCHES "test cases: +([0-9]+) \\| +([0-9]+) passed \\| +([0-9]+) failed")
  message(FATAL_ERROR "the unfenced store's run ended without Catch's summary (status ${status}):\n${out}\n${err}")
endif()
set(summary "${CMAKE_MATCH_0}")
if(NOT CMAKE_MATCH_1 EQUAL cases)
  message(FATAL_ERROR "the unfenced store's run counted ${CMAKE_MATCH_1} cases, the store's ${cases}:\n${out}")
endif()
set(fencing_case "contract: an old owner cannot complete after its lease was stolen")
string(FIND "${out}" "${fencing_case}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the unfenced store failed, but not \"${fencing_case}\":\n${out}\n${err}")
endif()
message(STATUS "unfenced store: failed as it must (${summary}), \"${fencing_case}\" among the failures")
