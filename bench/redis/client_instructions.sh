#!/usr/bin/env bash
# bench/redis/client_instructions.sh — what an asynchronous Redis call costs the client process, in
# instructions: the number this VM's wall clock cannot resolve (calls/s at 64 in flight move by
# ±30 % from run to run here). Runs idem_bench_async_redis under callgrind twice per row, with
# CALLS and 2×CALLS calls (each a first call and a replay), against a redis-server of its own, and
# prints the difference per call pair: setup and teardown cancel out.
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

# Instructions of one whole run of `binary` for `row` with `n` calls.
instructions() {
  local binary=$1 row=$2 n=$3
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" --address "127.0.0.1:$port" --calls "$n" \
    --in-flight "$in_flight" --rows "$row" 2>&1 >/dev/null | awk '/Collected :/ { print $NF }'
}

echo "# client instructions per call (first calls and replays averaged), $in_flight in flight, $calls calls"
printf '%-40s %18s %18s %8s\n' binary idem-async+loop hiredis-pipelined ratio
for binary in "${binaries[@]}"; do
  declare -A per_call=()
  for row in idem-async+loop hiredis-pipelined; do
    one=$(instructions "$binary" "$row" "$calls")
    two=$(instructions "$binary" "$row" $((2 * calls)))
    per_call[$row]=$(( (two - one) / (2 * calls) ))
  done
  printf '%-40s %18d %18d %7.2fx\n' "$(basename "$binary")" "${per_call[idem-async+loop]}" \
    "${per_call[hiredis-pipelined]}" "$(awk -v a="${per_call[idem-async+loop]}" -v b="${per_call[hiredis-pipelined]}" 'BEGIN { print a / b }')"
done
