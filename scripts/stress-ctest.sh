#!/usr/bin/env bash
# Runs ctest labels again and again on a loaded machine, to find tests that fail only now and then.
#
#   scripts/stress-ctest.sh <build-dir> <runs> <label regex> [busy loops, default 2]
#
# Starts the given number of busy loops (one core each) beside ctest with the slots scripts/test.sh
# gives it (two a core), runs the labels <runs> times in a row under the sanitizer options
# scripts/test.sh uses, prints one line per run and a closing count, and stops the loops. Exits non-zero when any run failed; the failing runs'
# logs stay in <build-dir>/stress-<n>.log.
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 <build-dir> <runs> <label regex> [busy loops]" >&2; exit 2; }
dir=$1
runs=$2
labels=$3
loops=${4:-2}

busy=()
stop_busy() { for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_busy EXIT
for _ in $(seq 1 "$loops"); do
  ( while :; do :; done ) &
  busy+=("$!")
done

failed=0
for run in $(seq 1 "$runs"); do
  log="$dir/stress-$run.log"
  start=$(date +%s)
  if IDEM_SOAK_SECONDS=6 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=0 \
     ctest --test-dir "$dir" --output-on-failure --timeout 300 -j "$((2 * $(nproc)))" -L "$labels" >"$log" 2>&1; then
    result=passed
  else
    result="FAILED ($log)"
    failed=$((failed + 1))
  fi
  summary=$(grep -E "tests passed|tests failed" "$log" || true)
  [[ $result != passed ]] || rm -f "$log"
  echo "stress: run $run of $runs, labels '$labels', $loops busy loops: $result in $(( $(date +%s) - start )) s ${summary}"
done
echo "stress: $((runs - failed)) passed, $failed failed"
[[ $failed -eq 0 ]]
