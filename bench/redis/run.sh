#!/usr/bin/env bash
# bench/redis/run.sh — idem's Redis store, the raw hiredis floors and the npm peers, side by side, on
# one redis-server that this script starts (127.0.0.1, a free port, nothing persisted) and stops.
#
#   bench/redis/run.sh [build-dir]        (default: ./build; needs the idem_bench_redis target)
#   ROUNDS=5 CALLS=2000 THREADS=8 WAKE=300 PEERS=1 PIN=0 bench/redis/run.sh build
#
# PIN=1 runs redis-server and every client on CPU 0. On a small VM a request that has to wake the
# other, idle vCPU costs a multiple of one that stays on a busy core, and unpinned runs flip between
# the two at random; pinned, one call at a time is stable and compares CPU cost per call. (With
# PIN=1 the "threads" rows share that one core too.)
# Every implementation runs once per round, rounds interleave them (so a machine whose load drifts
# treats them alike), and each cell of the table is the median over the rounds. Prints every RESULT
# line, then the table. docs/bench-redis.md records figures and the command. A benchmark, not a
# test: nothing here fails on a number.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${ROUNDS:-5}
calls=${CALLS:-2000}
threads=${THREADS:-8}
wake=${WAKE:-300}
bench="$build/bench/redis/idem_bench_redis"
if [[ ! -x "$bench" ]]; then
  echo "run.sh: $bench not found; build it first: cmake --build $build --target idem_bench_redis" >&2
  exit 1
fi

state=$(mktemp -d /tmp/idem-bench-redis.XXXXXXXX)
cleanup() {
  bash "$root/tests/support/redis-server.sh" stop "$state" >/dev/null 2>&1 || true
  rm -f "$state/results.txt"
  rmdir "$state" 2>/dev/null || true
}
trap cleanup EXIT
bash "$root/tests/support/redis-server.sh" start "$state" >&2
address=$(cat "$state/address")
results="$state/results.txt"
run=()
if [[ "${PIN:-0}" == 1 ]]; then
  taskset -pc 0 "$(cat "$state/redis.pid")" >/dev/null
  run=(taskset -c 0)
fi
: >"$results"

echo "# $(uname -m), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(redis-server --version | cut -d' ' -f1-3)"
echo "# $rounds rounds x $calls calls per phase; C++ threads 1 and $threads, Node calls in flight 1 and 8; PIN=${PIN:-0}"
for round in $(seq 1 "$rounds"); do
  echo "# round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  "${run[@]}" "$bench" --address "$address" --calls "$calls" --repeats 1 --threads "$threads" --wake-samples 0 | tee -a "$results"
  if [[ "${PEERS:-1}" == 1 ]]; then
    "${run[@]}" bash "$root/bench/peers/run.sh" "$address" "$calls" 1 | tee -a "$results"
  fi
done
"${run[@]}" "$bench" --address "$address" --only wake --wake-samples "$wake" | tee -a "$results"
echo "# done; load average $(cut -d' ' -f1-3 /proc/loadavg)"

awk -v threads="$threads" '
  $1 == "RESULT" {
    k = $2 "|" $3 "|" $4
    n[k]++; ops[k, n[k]] = $5; p50[k, n[k]] = $6; p99[k, n[k]] = $7
  }
  function median(arr, k,   i, j, v, tmp, m) {
    m = n[k]
    for (i = 1; i <= m; i++) v[i] = arr[k, i] + 0
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }
  function mops(row, t, phase,   k) { k = row "|" t "|" phase; return (k in n) ? median(ops, k) : 0 }
  function cell(row, t, phase,   k) {
    k = row "|" t "|" phase
    if (!(k in n)) return sprintf("%-24s", "-")
    return sprintf("%-24s", sprintf("%d (%.0f/%.0f)", median(ops, k), median(p50, k), median(p99, k)))
  }
  function ratio(a, b) { return (b > 0 && a > 0) ? sprintf("%.2fx", a / b) : "-" }
  function best_peer(t, phase,   best, v) {
    best = mops("powertools", t, phase)
    v = mops("node-idempotency", t, phase); if (v > best) best = v
    if (phase == "first") { v = mops("powertools+cache", t, phase); if (v > best) best = v }
    return best
  }
  END {
    rows_n = split("raw raw-lua store engine engine+cache powertools powertools+cache node-idempotency", rows, " ")
    for (pass = 1; pass <= 2; pass++) {
      t = pass == 1 ? 1 : threads
      printf "\n## %s: calls/s (p50/p99 us), medians over the rounds\n", pass == 1 ? "one call at a time" : threads " C++ threads / " threads " Node calls in flight"
      printf "%-17s %-24s %-24s %-24s\n", "", "first call", "replay", "hot (one key)"
      for (i = 1; i <= rows_n; i++) printf "%-17s %s %s %s\n", rows[i], cell(rows[i], t, "first"), cell(rows[i], t, "replay"), cell(rows[i], t, "hot")
      printf "store  / raw:        first %s  replay %s\n", ratio(mops("store", t, "first"), mops("raw", t, "first")), ratio(mops("store", t, "replay"), mops("raw", t, "replay"))
      printf "store  / raw-lua:    first %s  replay %s\n", ratio(mops("store", t, "first"), mops("raw-lua", t, "first")), ratio(mops("store", t, "replay"), mops("raw-lua", t, "replay"))
      printf "engine / best peer:  first %s  replay %s  (peers without their local cache)\n", ratio(mops("engine", t, "first"), best_peer(t, "first")), ratio(mops("engine", t, "replay"), best_peer(t, "replay"))
      printf "engine+cache replay / best peer replay: %s; / powertools+cache replay: %s\n", ratio(mops("engine+cache", t, "replay"), best_peer(t, "replay")), ratio(mops("engine+cache", t, "replay"), mops("powertools+cache", t, "replay"))
    }
    printf "\n## wake-up of a waiting duplicate (holder calls complete() -> the waiter returns)\n"
    printf "p50 %.0f us, p99 %.0f us, max %.0f us\n", median(p50, "wake|1|wake"), median(p99, "wake|1|wake"), median(p50, "wake-max|1|wake")
  }' "$results"
