# runtime/redis/lua/expand.cmake — how a script is made from its file and the helpers of
# common.lua: every line `--@use <name>` of the script is replaced by the helper that common.lua
# defines after its line `--@helper <name>` (up to the next `--@helper` line or the file's end).
#
# Why not common.lua prepended whole: a local function is a new closure on every call of a script
# (Lua 5.1 keeps none), and the four helpers at the top of every script cost a replay ~2,000 of
# its ~25,000 instructions of Redis's time. A script names each helper where its path needs it: a
# replay makes none, a rarer path (a held record, a refusal) makes its own.
#
# Used by runtime/redis/CMakeLists.txt (include, then idem_lua_expand) and by
# bench/redis/script_instructions.sh (cmake -DSCRIPT=... -DLIBRARY=... -DOUTPUT=... -P expand.cmake).

# idem_lua_expand(<out-var> <script file> <library file>): the script's text, expanded. A helper's
# own `--@use` lines are expanded with it (not_held takes parse). A `--@use` of a helper the library
# does not define fails the configuration.
function(idem_lua_expand out script library)
  file(READ "${library}" library_text)
  file(READ "${script}" text)
  while(text MATCHES "--@use ([a-z_]+)\n")
    set(name "${CMAKE_MATCH_1}")
    set(marker "--@helper ${name}\n")
    string(FIND "${library_text}" "${marker}" begin)
    if(begin EQUAL -1)
      message(FATAL_ERROR "${script}: --@use ${name}: ${library} defines no helper '${name}'")
    endif()
    string(LENGTH "${marker}" marker_length)
    math(EXPR begin "${begin} + ${marker_length}")
    string(SUBSTRING "${library_text}" ${begin} -1 helper)
    string(FIND "${helper}" "--@helper " end)
    if(NOT end EQUAL -1)
      string(SUBSTRING "${helper}" 0 ${end} helper)
    endif()
    string(STRIP "${helper}" helper)
    string(REPLACE "--@use ${name}\n" "${helper}\n" text "${text}")
  endwhile()
  # A helper called and never taken would fail only when its path runs: fail the build instead.
  # (Where a path takes it is left to the store's tests: one that calls it before would fail them.)
  string(REGEX REPLACE "--[^\n]*" "" code "${text}")
  string(REGEX MATCHALL "--@helper [a-z_]+" helpers "${library_text}")
  foreach(helper_line IN LISTS helpers)
    string(REPLACE "--@helper " "" name "${helper_line}")
    if(code MATCHES "[^a-z_.]${name}\\(" AND NOT code MATCHES "local function ${name}\\(")
      message(FATAL_ERROR "${script}: calls the helper '${name}' without a line --@use ${name}")
    endif()
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  idem_lua_expand(expanded "${SCRIPT}" "${LIBRARY}")
  file(WRITE "${OUTPUT}" "${expanded}")
endif()
