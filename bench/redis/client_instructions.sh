#!/usr/bin/env bash
# bench/redis/client_instructions.sh — what an asynchronous Redis call costs the client process, in
# instructions: the number this VM's wall clock cannot resolve (calls/s at 64 in flight move by
# ±30 % from run to run here). Runs idem_bench_async_redis under callgrind three times per row
# against a redis-server of its own: CALLS and 2×CALLS calls (each a first call and a replay), the
# difference per call pair (setup and teardown cancel out); and CALLS calls with a second pass of
# replays, whose difference from the first run is what a replay alone costs (a first call is then
# twice the average less a replay).
#
#   bench/redis/client_instructions.sh [BINARY ...]   (default: build/bench/redis/idem_bench_async_redis)
#   CALLS=2000 IN_FLIGHT=64 bench/redis/client_instructions.sh /tmp/before /tmp/after
#
# Rows: idem-async+loop (the engine, replies read on the io_context's thread) and hiredis-pipelined
# (the same scripts through bare hiredis: the floor). Needs valgrind (installed with apt-get if
# missing) and redis-server. A benchmark, not a test: nothing here fails on a number.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
calls=${CALLS:-2000}
in_flight=${IN_FLIGHT:-64}
binaries=("$@")
[[ ${#binaries[@]} -eq 0 ]] && binaries=("$root/build/bench/redis/idem_bench_async_redis")

# shellcheck source=instructions_support.sh
source "$root/bench/redis/instructions_support.sh"
start_redis client_instructions.sh

# Instructions of one whole run of `binary` for `row` with `n` calls and `replays` passes of replays.
instructions() {
  local binary=$1 row=$2 n=$3 replays=$4
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" --address "127.0.0.1:$port" --calls "$n" \
    --in-flight "$in_flight" --rows "$row" --replays "$replays" 2>&1 >/dev/null | awk '/Collected :/ { print $NF }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }

echo "# client instructions per call, $in_flight in flight, $calls calls: first calls and replays averaged; each alone"
printf '%-32s %-16s %10s %10s %10s\n' binary row average first replay
for binary in "${binaries[@]}"; do
  declare -A average=() first=() replay=()
  for row in idem-async+loop hiredis-pipelined; do
    one=$(instructions "$binary" "$row" "$calls" 1)
    two=$(instructions "$binary" "$row" $((2 * calls)) 1)
    again=$(instructions "$binary" "$row" "$calls" 2)
    average[$row]=$(( (two - one) / (2 * calls) ))
    replay[$row]=$(( (again - one) / calls ))
    first[$row]=$(( 2 * average[$row] - replay[$row] ))
    printf '%-32s %-16s %10d %10d %10d\n' "$(basename "$binary")" "$row" "${average[$row]}" "${first[$row]}" \
      "${replay[$row]}"
  done
  printf '%-32s %-16s %10s %10s %10s\n' "$(basename "$binary")" "idem / floor" \
    "$(ratio "${average[idem-async+loop]}" "${average[hiredis-pipelined]}")" \
    "$(ratio "${first[idem-async+loop]}" "${first[hiredis-pipelined]}")" \
    "$(ratio "${replay[idem-async+loop]}" "${replay[hiredis-pipelined]}")"
done
