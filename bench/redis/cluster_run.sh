#!/usr/bin/env bash
# bench/redis/cluster_run.sh — idem's Redis store on a Redis Cluster against the same store on one
# redis-server and against the store's own scripts sent with bare hiredis to the master of each key's
# slot, all in the same run. Starts a redis-server (tests/support/redis-server.sh) and a 3-master /
# 3-replica cluster (tests/support/redis-cluster.sh) in temporary directories, and stops them.
#
#   bench/redis/cluster_run.sh <build-dir> [rounds=3] [calls=1000]
#   REPEATS=5 THREADS=8 WARMUP=200 PIN=0 bench/redis/cluster_run.sh build 3 1000
#
# A round is one run of idem_bench_redis_cluster: it sets every row up, warms it up and takes
# REPEATS samples of each (`calls` calls per thread and phase), the rows in a rotating order. Each
# cell of the table is the median over every sample; each ratio is the median of the ratios of
# samples taken back to back, which cancels most of the drift of a shared machine's load. PIN=1 runs every server and the client on
# CPU 0 (see docs/bench-redis.md for why a 2-vCPU VM may want that); the default leaves them to the
# scheduler. Prints every RESULT and STATS line, then the table. A benchmark, not a test: nothing here
# fails on a number. docs/benchmarks.md records the figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${2:-3}
calls=${3:-1000}
repeats=${REPEATS:-5}
threads=${THREADS:-8}
warmup=${WARMUP:-200}
# shellcheck source=bench_server.sh
source "$root/bench/redis/bench_server.sh"  # for bench_binary only: this script starts its own servers
bench_binary "$build" idem_bench_redis_cluster

state=$(mktemp -d /tmp/idem-bench-cluster.XXXXXXXX)
cleanup() {
  bash "$root/tests/support/redis-cluster.sh" stop "$state/cluster" >/dev/null 2>&1 || true
  bash "$root/tests/support/redis-server.sh" stop "$state/single" >/dev/null 2>&1 || true
  rm -f "$state/results.txt"
  rmdir "$state" 2>/dev/null || true
}
trap cleanup EXIT
bash "$root/tests/support/redis-server.sh" start "$state/single" >&2
bash "$root/tests/support/redis-cluster.sh" start "$state/cluster" >&2
single=$(cat "$state/single/address")
seeds="$state/cluster/seeds"
run=()
if [[ "${PIN:-0}" == 1 ]]; then
  taskset -pc 0 "$(cat "$state/single/redis.pid")" >/dev/null
  for pidfile in "$state"/cluster/*/redis.pid; do taskset -apc 0 "$(cat "$pidfile")" >/dev/null; done
  run=(taskset -c 0)
fi
results="$state/results.txt"
: >"$results"

first=$(head -1 "$seeds")
echo "# $(uname -m), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(redis-server --version | cut -d' ' -f1-3)"
echo "# $rounds rounds x $repeats samples x $calls calls per thread and phase, $warmup warm-up calls; threads 1 and $threads; PIN=${PIN:-0}"
echo "# cluster (CLUSTER NODES of ${first}): masters and their slots, replicas and their master ids"
redis-cli -h "${first%:*}" -p "${first##*:}" cluster nodes | awk '$3 ~ /master/ { printf "#   master %s slots %s\n", $2, substr($0, index($0, $9)) } $3 ~ /slave/ { printf "#   replica %s of %s\n", $2, $4 }'
for round in $(seq 1 "$rounds"); do
  echo "# round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  "${run[@]}" "$bench" --cluster "$seeds" --single "$single" --calls "$calls" --repeats "$repeats" --threads "$threads" \
    --warmup "$warmup" | tee -a "$results"
done
echo "# done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v threads="$threads" -f "$root/bench/redis/cluster_summarize.awk" "$results"
