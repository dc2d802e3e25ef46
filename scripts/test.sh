#!/usr/bin/env bash
# The whole test suite, as CI runs it: install what is missing, then four builds, each tested by ctest.
# Every build is warning-free under -Werror (IDEM_WERROR, off for everyone who is not our CI).
#   1. g++-12 Release, every target (annotator, stores, samples, benchmarks), all tests, the soak
#      (label `soak`: 25 s of mixed traffic per store after a 4 s warm-up, docs/reliability.md) included,
#      and the tests that install this build (labels `kit`: a store built against the install tree
#      runs the contract kit; `package`: the Debian package and its CMake and pkg-config consumers),
#      which the sanitized builds do not register and build 4's labels leave out;
#   2. clang++-19 with AddressSanitizer + UndefinedBehaviorSanitizer: runtime, stores, fuzz targets; the
#      soak runs 6 s per store (IDEM_SOAK_SECONDS) and checks threads, fds and sockets, not the heap;
#   3. clang++-19 with ThreadSanitizer: the concurrency tests of the engine and the memory store, the
#      SQLite store's tests (threads and processes on one file) and the Redis store's (threads
#      pipelining on shared connections, the subscriber thread), plus labels `soak` (memory, SQLite,
#      Redis; 6 s each) and `privacy` (memory, SQLite, Redis). Not here: the HTTP tests (cpp-httplib
#      is Debian's uninstrumented shared library, whose locks TSan cannot see: it reports races in
#      its std::regex use) and crash/fault (built only with PostgreSQL, which this build leaves out);
#   4. clang++-19 Release: runtime, stores and samples, the unit and engine tests.
# The soak tests are RUN_SERIAL: ctest -j runs nothing beside them.
# PostgreSQL and redis-server are started by ctest fixtures on 127.0.0.1 in temporary directories
# and stopped at the end of each ctest run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

jobs=$(nproc)
run_ctest() {  # dir [ctest args...]
  local dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure --timeout 300 -j "$jobs" "$@"
}

echo "== 1/4 g++-12 Release: everything"
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER=g++-12 -DCMAKE_BUILD_TYPE=Release -DIDEM_WERROR=ON
cmake --build build -j "$jobs"
run_ctest build

echo "== 2/4 clang++-19: AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build-asan -G Ninja -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=Debug -DIDEM_WERROR=ON \
  -DIDEM_SANITIZE=address,undefined -DIDEM_BUILD_ANNOTATOR=OFF -DIDEM_BUILD_BENCH=OFF -DIDEM_BUILD_SAMPLES=OFF
cmake --build build-asan -j "$jobs"
IDEM_SOAK_SECONDS=6 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_ctest build-asan

echo "== 3/4 clang++-19: ThreadSanitizer (concurrency tests)"
cmake -S . -B build-tsan -G Ninja -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=Debug -DIDEM_WERROR=ON \
  -DIDEM_SANITIZE=thread -DIDEM_STORES="sqlite;redis;http" -DIDEM_BUILD_ANNOTATOR=OFF -DIDEM_BUILD_BENCH=OFF -DIDEM_BUILD_SAMPLES=OFF
cmake --build build-tsan -j "$jobs"
# tests/support/tsan.supp: races TSan reports inside Debian's prebuilt (uninstrumented) cpp-httplib.
IDEM_SOAK_SECONDS=6 TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/support/tsan.supp" \
  run_ctest build-tsan -L "concurrency|sqlite|soak|privacy"

echo "== 4/4 clang++-19 Release: runtime, stores, samples"
cmake -S . -B build-clang-release -G Ninja -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_BUILD_TYPE=Release -DIDEM_WERROR=ON \
  -DIDEM_BUILD_ANNOTATOR=OFF -DIDEM_BUILD_BENCH=OFF
cmake --build build-clang-release -j "$jobs"
run_ctest build-clang-release -L "unit|engine|memory"

echo "== all four builds passed"
