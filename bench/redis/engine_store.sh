#!/usr/bin/env bash
# bench/redis/engine_store.sh — what the engine adds over its Redis store (engine / store
# must stay at or above 0.95x), measured in pairs so that this VM's drift cancels out.
#
#   bench/redis/engine_store.sh [build-dir]       (default: ./build; needs the idem_bench_redis target)
#   ROUNDS=11 CALLS=3000 THREADS=8 PIN=1 bench/redis/engine_store.sh build
#
# run.sh compares the medians of rows that ran seconds apart; on this VM calls/s drift by 10-20 %
# over that time, more than the 5 % in question. Here each round runs the `store` row and the
# `engine` row back to back (alternating which goes first), each in a process of its own, and the
# ratio is taken within the round; the table shows the median and the spread of those ratios.
# PIN as in run.sh (1: redis-server and the client on CPU 0). A benchmark, not a test: nothing here
# fails on a number.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${ROUNDS:-11}
calls=${CALLS:-3000}
threads=${THREADS:-8}

source "$root/bench/redis/bench_server.sh"
bench_binary "$build" idem_bench_redis
bench_server_start "${PIN:-1}"

echo "# $(uname -m), $(nproc) cores; $rounds rounds x $calls calls per phase; threads 1 and $threads; PIN=${PIN:-1}"
for round in $(seq 1 "$rounds"); do
  order=(store engine)
  ((round % 2 == 0)) && order=(engine store)
  for row in "${order[@]}"; do
    "${run[@]}" "$bench" --address "$address" --calls "$calls" --repeats 1 --threads "$threads" --only "$row" |
      awk -v round="$round" '$1 == "RESULT" { print "ROUND", round, $0 }' | tee -a "$results"
  done
done

# Per round and cell: engine calls/s / store calls/s; then the median, lowest and highest ratio.
printf '\n## engine / store, calls/s within each round: median (lowest-highest) over the rounds\n'
printf '%-8s %-7s %s\n' threads phase "engine / store"
awk '
  $1 == "ROUND" { ops[$2, $4, $5, $6] = $7; cells[$5 " " $6] = 1; rounds[$2] = 1 }
  function sorted_median(v, m,   i, j, t) {
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }
  END {
    for (cell in cells) {
      split(cell, part, " "); m = 0
      for (r in rounds) {
        e = ops[r, "engine", part[1], part[2]]; s = ops[r, "store", part[1], part[2]]
        if (e > 0 && s > 0) v[++m] = e / s
      }
      if (m == 0) continue
      med = sorted_median(v, m)
      printf "%-8s %-7s %.2fx (%.2f-%.2f, %d rounds)\n", part[1], part[2], med, v[1], v[m], m
      delete v
    }
  }' "$results" | sort -k1,1n -k2,2
