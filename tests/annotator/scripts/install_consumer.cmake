# Installs idem's build tree into WORK/prefix, builds the consumer project in SOURCE against it
# with find_package(idem) (checking IDEM_INCLUDE_DIR and IDEM_ANNOTATE_INCLUDE_DIR), runs it, a
# shared library that links the static idem::runtime, and the idem::asio and idem::beast
# consumers, and checks idem_generate's incremental behaviour:
#   - a no-op rebuild runs no generator command;
#   - touching a header that one annotated header includes regenerates only that header's output.
include(${CMAKE_CURRENT_LIST_DIR}/../../support/run_checked.cmake)

file(REMOVE_RECURSE ${WORK})
file(COPY ${SOURCE}/ DESTINATION ${WORK}/source)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
run(${CMAKE_COMMAND} -S ${WORK}/source -B ${WORK}/build -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_PREFIX_PATH=${WORK}/prefix -DIDEM_EXPECTED_PREFIX=${WORK}/prefix -DCMAKE_BUILD_TYPE=Debug)
run(${CMAKE_COMMAND} --build ${WORK}/build -j 2)
if(NOT output MATCHES "idem-annotate billing.hpp" OR NOT output MATCHES "idem-annotate mailing.hpp")
  message(FATAL_ERROR "the first build did not run the generator for both headers:\n${output}")
endif()
run(${WORK}/build/consumer)
message(STATUS "consumer: ${output}")
run(${WORK}/build/consumer_shared)
message(STATUS "shared-library consumer: ${output}")
run(${WORK}/build/consumer_async)
if(NOT output MATCHES "async: 100 ran, 100 replayed on one thread")
  message(FATAL_ERROR "the idem::asio consumer did not run every key once:\n${output}")
endif()
message(STATUS "idem::asio consumer: ${output}")
run(${WORK}/build/consumer_beast)
if(NOT output MATCHES "beast: 1 ran, 1 replayed")
  message(FATAL_ERROR "the idem::beast consumer did not run its endpoint once and replay it:\n${output}")
endif()
message(STATUS "idem::beast consumer: ${output}")

run(${CMAKE_COMMAND} --build ${WORK}/build -j 2)
if(output MATCHES "idem-annotate")
  message(FATAL_ERROR "a no-op rebuild ran the generator:\n${output}")
endif()

file(TOUCH ${WORK}/source/billing_types.hpp)
run(${CMAKE_COMMAND} --build ${WORK}/build -j 2)
if(NOT output MATCHES "idem-annotate billing.hpp" OR output MATCHES "idem-annotate mailing.hpp")
  message(FATAL_ERROR "touching billing_types.hpp should regenerate billing.hpp's output only:\n${output}")
endif()
message(STATUS "install tree, find_package(idem), idem_generate and incremental rebuilds: ok")
