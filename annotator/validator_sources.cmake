# The annotator's validator and its named rules: pure C++ (no Clang), one list for idem_annotate_core
# and for the fuzz target that compiles the validator without the annotator (tests/fuzz).
set(idem_validator_sources
  ${CMAKE_CURRENT_LIST_DIR}/src/validator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/function_rules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/argument_rules.cpp)
