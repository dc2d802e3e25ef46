#!/usr/bin/env bash
# bench/redis/run.sh — idem's Redis store, the raw hiredis floors and the npm peers, side by side, on
# one redis-server that this script starts (127.0.0.1, a free port, nothing persisted) and stops.
#
#   bench/redis/run.sh [build-dir]        (default: ./build; needs the idem_bench_redis target)
#   ROUNDS=5 CALLS=2000 THREADS=8 WAKE=300 PEERS=1 PIN=0 bench/redis/run.sh build
#
# PIN=split runs redis-server on CPU 1 and every client on CPU 0: Redis has a core of its own, as
# on a real deployment, but on this VM every request then wakes an idle vCPU and runs are noisy.
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

source "$root/bench/redis/bench_server.sh"
bench_binary "$build" idem_bench_redis
bench_server_start "${PIN:-0}"

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
"${run[@]}" "$bench" --address "$address" --only server-cost --calls "$calls" | tee -a "$results"
echo "# done; load average $(cut -d' ' -f1-3 /proc/loadavg)"

awk -v threads="$threads" -f "$root/bench/redis/summarize.awk" "$results"
