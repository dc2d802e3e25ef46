#!/usr/bin/env bash
# tests/redis/lua_expand/expand_test.sh — one case of runtime/redis/lua/expand.cmake.
#
#   expand_test.sh CMAKE EXPAND LIBRARY SCRIPT OUTPUT refuses "MESSAGE"   the expansion fails, saying MESSAGE
#   expand_test.sh CMAKE EXPAND LIBRARY SCRIPT OUTPUT expands "REGEX"     it succeeds, the text matches REGEX (grep -Pz)
set -uo pipefail
cmake=$1 expand=$2 library=$3 script=$4 output=$5 expect=$6 what=$7
log=$("$cmake" -DSCRIPT="$script" -DLIBRARY="$library" -DOUTPUT="$output" -P "$expand" 2>&1)
status=$?
case $expect in
  refuses)
    [[ $status -ne 0 ]] || { echo "expand.cmake accepted $script"; exit 1; }
    # CMake wraps a message at spaces: compare with the line breaks undone.
    flat=$(tr '\n' ' ' <<<"$log" | tr -s ' ')
    [[ $flat == *"$what"* ]] || { echo "expand.cmake refused $script without saying: $what"; echo "$log"; exit 1; }
    ;;
  expands)
    [[ $status -eq 0 ]] || { echo "expand.cmake refused $script"; echo "$log"; exit 1; }
    grep -Pzq "$what" "$output" || { echo "the expansion of $script does not match: $what"; cat "$output"; exit 1; }
    ;;
  *) echo "expand_test.sh: unknown expectation $expect"; exit 2 ;;
esac
