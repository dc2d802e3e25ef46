# Generates code for stale.hpp, then renames the member the key uses (as a later edit would) and
# compiles the generated source without regenerating: the error must name stale.hpp at the key's
# line and column, not the generated file.
file(REMOVE_RECURSE ${WORK})
file(COPY ${SOURCE}/stale.hpp DESTINATION ${WORK})
execute_process(COMMAND ${TOOL} --include-as=stale.hpp --output-header=stale.idem.hpp --output-source=stale.idem.cpp
                        stale.hpp -- ${CONTEXT}
                WORKING_DIRECTORY ${WORK} RESULT_VARIABLE status ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "generation failed:\n${errors}")
endif()
file(READ ${WORK}/stale.hpp text)
string(REPLACE "  long id;" "  long number;" text "${text}")
file(WRITE ${WORK}/stale.hpp "${text}")
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I. ${CONTEXT} stale.idem.cpp
                WORKING_DIRECTORY ${WORK} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status EQUAL 0)
  message(FATAL_ERROR "the generated code compiled although the key's member is gone")
endif()
# `[[idem::idempotent(key = "event.id")]]` on line 10: "id" starts at column 35.
if(NOT "${out}${err}" MATCHES "stale.hpp:10:35: error: [^\n]*id")
  message(FATAL_ERROR "the error does not point at the attribute's key:\n${out}${err}")
endif()
