# Runs TOOL on HEADER (expected to fail) and compares its stderr with the file EXPECTED exactly.
execute_process(COMMAND ${TOOL} ${HEADER} -- ${CONTEXT}
                RESULT_VARIABLE status ERROR_VARIABLE output OUTPUT_VARIABLE ignored)
if(status EQUAL 0)
  message(FATAL_ERROR "${TOOL} accepted ${HEADER}; expected errors")
endif()
file(READ ${EXPECTED} expected)
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "output differs from ${EXPECTED}:\n--- actual ---\n${output}--- expected ---\n${expected}")
endif()
