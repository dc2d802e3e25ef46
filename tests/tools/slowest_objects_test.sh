#!/usr/bin/env bash
# scripts/slowest-objects.sh on a .ninja_log whose answers are known: a step built twice counts
# its last run, the outputs of one command (a generator's three files, a program and the test list
# written beside it) are one step named by its main output, and the kinds add up.
set -euo pipefail
script=$1
fixture=$2
out=$("$script" "$fixture" 3)
printf '%s\n' "$out"
expect() {  # <what> <extended regex a line must match>
  grep -Eq -- "$2" <<<"$out" || { echo "FAIL: $1 (no line matches /$2/)"; exit 1; }
}
expect "five steps, 13 s in all" '^5 steps, 13 s of step time in all$'
expect "the generator's run, named by a relative output, is the slowest" '^ +8\.0 s  gen/x\.idem\.(cpp|hpp)$'
expect "a rebuilt object counts its last run (1.5 s, not 3 s)" '^ +2\.0 s  tests/CMakeFiles/p\.dir/cmake_pch\.hxx\.gch$'
expect "compiles: two objects, 2.5 s" '^ +2\.5 s +2  compiles$'
expect "links: the program, once" '^ +0\.5 s +1  links$'
expect "precompiled headers" '^ +2\.0 s +1  precompiled headers$'
expect "generator runs: one" '^ +8\.0 s +1  generator runs$'
expect "compiling by folder" '^ +4\.5 s  tests$'
if grep -q 'prog_tests-1.cmake\|/abs/' <<<"$out"; then echo "FAIL: a step was named by a secondary output"; exit 1; fi
if "$script" "$fixture/missing" >/dev/null 2>&1; then echo "FAIL: a folder without .ninja_log was accepted"; exit 1; fi
echo "slowest-objects: ok"
