#!/usr/bin/env bash
# The whole test suite, as CI runs it: install what is missing, then four builds, each tested by ctest,
# and a table of where the time went (configure, compile and ctest of each build; the slowest tests).
#   scripts/test.sh           the four builds below
#   scripts/test.sh --quick   one g++-12 Debug build of what the labels unit|engine|memory|annotator need,
#                             and those tests: a contributor's first answer (docs/development.md)
# Every build is warning-free under -Werror (IDEM_WERROR, off for everyone who is not our CI).
#   1. g++-12 Release, every target but the benchmarks (annotator, stores, samples), all tests, the soak
#      (label `soak`: 25 s of mixed traffic per store after a 4 s warm-up, docs/reliability.md) included,
#      and the tests that install this build (labels `kit`: a store built against the install tree
#      runs the contract kit; `package`: the Debian package and its CMake and pkg-config consumers),
#      which the sanitized builds do not register;
#   2. clang++-19 with AddressSanitizer + UndefinedBehaviorSanitizer: runtime, stores, fuzz targets; the
#      soak runs 6 s per store (IDEM_SOAK_SECONDS) and checks threads, fds and sockets, not the heap;
#   3. clang++-19 with ThreadSanitizer: the concurrency tests of the engine and the memory store, the
#      SQLite store's tests (threads and processes on one file) and the Redis store's (threads
#      pipelining on shared connections, the subscriber thread), plus labels `soak` (memory, SQLite,
#      Redis; 6 s each) and `privacy` (memory, SQLite, Redis). Not here: crash/fault (built only with
#      PostgreSQL, which this build leaves out). The HTTP tests run with tests/support/tsan.supp, for
#      races TSan reports inside Debian's uninstrumented cpp-httplib;
#   4. clang++-19 Release: runtime, stores and samples, every public header compiled on its own, the
#      unit, engine and memory tests, and idem embedded with add_subdirectory (label `subproject`).
# The sanitized builds and build 4 compile only the tests their ctest runs (IDEM_TEST_LABELS). The
# benchmarks are not built here: they are run by hand (docs/benchmarks.md), not by ctest.
#
# Builds 2-4 compile in the background, at the lowest priority (nice 19), while the ctest of the one
# before runs: most tests wait for servers, leases and timeouts, and the compiler takes the cycles
# they leave without taking them from a test that wants one.
#
# PostgreSQL and redis-server are started by ctest fixtures on 127.0.0.1 in temporary directories
# and stopped at the end of each ctest run.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

scripts/install-deps.sh
jobs=$(nproc)
# Two ctest slots a core: most tests wait (for a server, a lease, a timeout); the ones that keep a
# core busy say so (idem_test_keeps_cores_busy, tests/CMakeLists.txt).
ctest_slots=$((2 * jobs))
started=$EPOCHREALTIME

seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }'; }

# What each build took, for the table at the end (printed even when a stage fails).
declare -A configure_s=() compile_s=() ctest_s=() tests=()
names=()
slowest=()
current=""
background=""
report() {
  local status=$?
  [ -z "$background" ] || kill -- "-$background" 2>/dev/null || true
  echo
  echo "== where the time went (wall seconds; builds 2-4 compile while the ctest before them runs)"
  printf '%-30s %9s %8s %6s %6s\n' build configure compile ctest tests
  local name
  for name in "${names[@]}"; do
    printf '%-30s %9s %8s %6s %6s\n' "$name" "${configure_s[$name]:-}" "${compile_s[$name]:-}" \
      "${ctest_s[$name]:-}" "${tests[$name]:-}"
  done
  printf '%-30s %9s\n' "total, install-deps included" "$(seconds_since "$started")"
  local row
  for row in "${slowest[@]}"; do printf '%s\n' "$row"; done
  [ -z "$current" ] || echo "== FAILED: $current"
  exit "$status"
}
trap report EXIT

# The ten slowest tests of a ctest run, from its JUnit file.
slowest_tests() {  # <junit file>
  awk '/<testcase / {
         name = $0; sub(/.*<testcase name="/, "", name); sub(/" classname=.*/, "", name)
         gsub(/&quot;/, "\"", name); gsub(/&apos;/, "\047", name); gsub(/&lt;/, "<", name); gsub(/&gt;/, ">", name)
         gsub(/&amp;/, "\\&", name)
         time = $0; sub(/.* time="/, "", time); sub(/".*/, "", time)
         printf "%8.1f s  %s\n", time, substr(name, 1, 110)
       }' "$1" | sort -rn | awk 'NR <= 10'  # not head: with pipefail, sort's SIGPIPE would fail the run
}

# configure <name> <dir> <cmake options...>
declare -A dir_of=()
configure() {
  local name=$1 dir=$2
  shift 2
  names+=("$name")
  dir_of[$name]=$dir
  echo "== configure $name"
  current="configure of $name"
  local t=$EPOCHREALTIME
  cmake -S . -B "$dir" -G Ninja "$@"
  configure_s[$name]=$(seconds_since "$t")
  rm -f "$dir/compile.status"
  current=""
}

# compile <name> [nice]: builds into the build's compile.log, and writes its exit status to
# compile.status when done (what wait_compiled waits for).
compile() {
  local name=$1 dir=${dir_of[$1]} t=$EPOCHREALTIME status=0
  ${2:+nice -n 19} cmake --build "$dir" -j "$jobs" >"$dir/compile.log" 2>&1 || status=$?
  echo "$status $(seconds_since "$t")" >"$dir/compile.status.tmp"
  mv "$dir/compile.status.tmp" "$dir/compile.status"
  return "$status"
}

# wait_compiled <name>: waits for the build's compile, shows its output, fails if it failed.
wait_compiled() {
  local name=$1 dir=${dir_of[$1]}
  current="compile of $name"
  echo "== compile $name"
  until [ -e "$dir/compile.status" ]; do sleep 1; done
  local status seconds
  read -r status seconds <"$dir/compile.status"
  compile_s[$name]=$seconds
  if [ "$status" -ne 0 ]; then
    cat "$dir/compile.log"
    return "$status"
  fi
  grep -v '^\[[0-9]*/[0-9]*\] ' "$dir/compile.log" || true  # what the compiler said, if anything
  current=""
}

# run_ctest <name> <ctest options...>: the environment of ctest comes from the array ctest_env.
ctest_env=()
run_ctest() {
  local name=$1 dir=${dir_of[$1]}
  shift
  echo "== ctest $name"
  current="ctest of $name"
  local junit="$PWD/$dir/ctest-junit.xml" status=0 t=$EPOCHREALTIME
  rm -f "$junit"
  env "${ctest_env[@]}" ctest --test-dir "$dir" --output-on-failure --timeout 300 -j "$ctest_slots" \
    --output-junit "$junit" "$@" || status=$?
  ctest_s[$name]=$(seconds_since "$t")
  if [ -f "$junit" ]; then
    tests[$name]=$(grep -c '<testcase ' "$junit" || true)
    slowest+=("== slowest tests, $name" "$(slowest_tests "$junit")")
  fi
  [ "$status" -eq 0 ] || return "$status"
  current=""
}

if [ "$quick" -eq 1 ]; then
  configure "quick: g++-12 Debug" build-quick \
    -DCMAKE_CXX_COMPILER=g++-12 -DCMAKE_BUILD_TYPE=Debug -DIDEM_WERROR=ON \
    -DIDEM_TEST_LABELS="unit;engine;memory;annotator" -DIDEM_BUILD_BENCH=OFF -DIDEM_BUILD_SAMPLES=OFF
  compile "quick: g++-12 Debug" || true
  wait_compiled "quick: g++-12 Debug"
  run_ctest "quick: g++-12 Debug" -L "unit|engine|memory|annotator"
  echo "== the quick build passed"
  exit 0
fi

b1="1/4 g++-12 Release" b2="2/4 clang++-19 ASan+UBSan" b3="3/4 clang++-19 TSan" b4="4/4 clang++-19 Release"
configure "$b1" build -DCMAKE_CXX_COMPILER=g++-12 -DCMAKE_BUILD_TYPE=Release -DIDEM_WERROR=ON \
  -DIDEM_BUILD_BENCH=OFF -DIDEM_CHECK_HEADERS=OFF
configure "$b2" build-asan -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=Debug -DIDEM_WERROR=ON \
  -DIDEM_SANITIZE=address,undefined -DIDEM_BUILD_ANNOTATOR=OFF -DIDEM_BUILD_BENCH=OFF -DIDEM_BUILD_SAMPLES=OFF
configure "$b3" build-tsan -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=Debug -DIDEM_WERROR=ON \
  -DIDEM_SANITIZE=thread -DIDEM_STORES="sqlite;redis;http" -DIDEM_TEST_LABELS="concurrency;sqlite;soak;privacy" \
  -DIDEM_BUILD_ANNOTATOR=OFF -DIDEM_BUILD_BENCH=OFF -DIDEM_BUILD_SAMPLES=OFF
configure "$b4" build-clang-release -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=Release -DIDEM_WERROR=ON \
  -DIDEM_TEST_LABELS="unit;engine;memory;subproject" -DIDEM_BUILD_ANNOTATOR=OFF -DIDEM_BUILD_BENCH=OFF

compile "$b1" || true
wait_compiled "$b1"
# Builds 2-4, one after the other, in the background; each ctest below waits for its own.
# Its own process group (set -m), so that a failure here stops it whole.
set -m
( for name in "$b2" "$b3" "$b4"; do compile "$name" nice || exit; done ) &
background=$!
set +m

# Build 1 runs every test; idem embedded with add_subdirectory runs in build 4, with clang++ (here
# it compiled the same sources with the same compiler again).
run_ctest "$b1" -LE subproject

wait_compiled "$b2"
ctest_env=(IDEM_SOAK_SECONDS=6 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
run_ctest "$b2"

wait_compiled "$b3"
# tests/support/tsan.supp: races TSan reports inside Debian's prebuilt (uninstrumented) cpp-httplib.
# atexit_sleep_ms=0: TSan otherwise sleeps a second at the exit of every process with a thread still
# running, which idem's shared pool for blocking store calls keeps by design (blocking_pool.cpp):
# 1 s per test case of every executable that uses it, a third of this build's ctest time.
ctest_env=(IDEM_SOAK_SECONDS=6
           "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=0:suppressions=$PWD/tests/support/tsan.supp")
run_ctest "$b3" -L "concurrency|sqlite|soak|privacy"

wait_compiled "$b4"
ctest_env=()
run_ctest "$b4" -L "unit|engine|memory|subproject"
background=""

echo "== all four builds passed"
