#!/usr/bin/env bash
# bench/redis/async_run.sh — asynchronous idem on Redis against the npm peers, driven with the same
# number of calls in flight, and against the store's own scripts pipelined through bare hiredis,
# on one redis-server that this script starts (127.0.0.1, a free port, nothing persisted) and stops.
#
#   bench/redis/async_run.sh [build-dir]     (default: ./build; needs idem_bench_async_redis)
#   ROUNDS=3 CALLS=4000 PIN=1 PEERS=1 IN_FLIGHT=1,8,64,256 bench/redis/async_run.sh build
#
# PIN=1: redis-server and every client on CPU 0 (one shared core: what a call costs in CPU);
# PIN=split: redis-server on CPU 1, the clients on CPU 0 (Redis on a core of its own). Rounds
# interleave the implementations; each cell is the median over the rounds. Every implementation
# makes CALLS calls per phase at each concurrency (a Node peer: CALLS / in-flight per lane). Prints
# the RESULT lines, then the table; docs/benchmarks.md ("Asynchronous calls") records figures.
# A benchmark, not a test: nothing here fails on a number.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${ROUNDS:-3}
calls=${CALLS:-4000}
in_flight=${IN_FLIGHT:-1,8,64,256}

source "$root/bench/redis/bench_server.sh"
bench_binary "$build" idem_bench_async_redis
bench_server_start "${PIN:-1}"
here="$root/bench/peers"
if [[ "${PEERS:-1}" == 1 && ( ! -d "$here/node_modules/@aws-lambda-powertools/idempotency" || ! -d "$here/node_modules/@node-idempotency/core" ) ]]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi

echo "# $(uname -m), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(redis-server --version | cut -d' ' -f1-3); node $(node --version 2>/dev/null || echo none)"
echo "# $rounds rounds x $calls calls per phase; in flight $in_flight; PIN=${PIN:-1}"
for round in $(seq 1 "$rounds"); do
  echo "# round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  "${run[@]}" "$bench" --address "$address" --calls "$calls" --in-flight "$in_flight" | tee -a "$results"
  if [[ "${PEERS:-1}" == 1 ]]; then
    for c in ${in_flight//,/ }; do
      for peer in powertools node-idempotency; do
        "${run[@]}" node "$here/bench.mjs" --peer "$peer" --address "$address" --calls $(( (calls + c - 1) / c )) \
          --repeats 1 --concurrency "$c" | grep -v ' hot ' | tee -a "$results"
      done
    done
  fi
done
echo "# done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v in_flight="$in_flight" -f "$root/bench/redis/async_summarize.awk" "$results"
