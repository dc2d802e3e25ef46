#!/usr/bin/env bash
# bench/http/run.sh — requests/s and latency of a guarded endpoint against the same endpoint
# unguarded, in the same run, with wrk over loopback; memory store and Redis.
#
#   bench/http/run.sh <build-dir> [seconds-per-run=5] [rounds=3] [connections=16]
#   SERVERS="httplib beast" (the default): both servers, one after the other
#
# For each store it starts build/bench/http/idem_bench_http_server, then per round runs wrk on
# /unguarded and /guarded, alternating, for first calls (first.lua: a new key per request) and
# replays (replay.lua: one key per wrk thread). Prints one markdown row per store and workload:
# medians over the rounds and the ratio guarded/unguarded of requests/s. Redis: a redis-server
# started by tests/support/redis-server.sh on 127.0.0.1 and a free port in a temporary directory.
set -euo pipefail

build=${1:?usage: run.sh <build-dir> [seconds] [rounds] [connections]}
seconds=${2:-5}
rounds=${3:-3}
connections=${4:-16}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
server_bin="$build/bench/http/idem_bench_http_server"
command -v wrk >/dev/null || { echo "run.sh: wrk is not installed (scripts/install-deps.sh)" >&2; exit 1; }
[[ -x "$server_bin" ]] || { echo "run.sh: build idem_bench_http_server first" >&2; exit 1; }

work=$(mktemp -d /tmp/idem-bench-http.XXXXXXXX)
server_pid=""
redis_dir="$work/redis"
cleanup() {
  [[ -n "$server_pid" ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  [[ -f "$redis_dir/redis.pid" ]] && bash "$root/tests/support/redis-server.sh" stop "$redis_dir" >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start_server() {
  mkfifo "$work/out.$1"
  "$server_bin" --store "$2" --server "$3" >"$work/out.$1" 2>"$work/err.$1" &
  server_pid=$!
  exec 3<"$work/out.$1"
  local line
  IFS= read -r -t 60 line <&3 || { cat "$work/err.$1" >&2; exit 1; }
  cat <&3 >/dev/null &
  exec 3<&-
  port=${line##*:}
}

stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
}

to_ms() {  # wrk prints 480.00us, 2.10ms or 1.02s
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n = n; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}

# run_wrk <script> <path> → "rps p50ms p99ms"
run_wrk() {
  local out
  out=$(wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$here/$1" "http://127.0.0.1:$port" -- "$2" "r$RANDOM$RANDOM")
  if grep -q "Non-2xx" <<<"$out"; then echo "run.sh: non-2xx answers on $2 ($1):" >&2; echo "$out" >&2; exit 1; fi
  local rps p50 p99
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  echo "$rps $p50 $p99"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

stores=("memory")
if command -v redis-server >/dev/null; then
  bash "$root/tests/support/redis-server.sh" start "$redis_dir" >/dev/null
  stores+=("redis:$(cat "$redis_dir/address")" "redis-cache:$(cat "$redis_dir/address")")
fi

servers=(${SERVERS:-httplib beast})
echo "| server | store | workload | unguarded req/s | guarded req/s | ratio | unguarded p50 / p99 ms | guarded p50 / p99 ms |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
for server in "${servers[@]}"; do
for store in "${stores[@]}"; do
  name=${store%%:*}
  start_server "$server-$name" "$store" "$server"
  for workload in first replay; do
    : >"$work/u" ; : >"$work/g"
    for ((r = 1; r <= rounds; ++r)); do
      run_wrk "$workload.lua" /unguarded >>"$work/u"
      run_wrk "$workload.lua" /guarded >>"$work/g"
    done
    u_rps=$(cut -d' ' -f1 "$work/u" | median); g_rps=$(cut -d' ' -f1 "$work/g" | median)
    u50=$(cut -d' ' -f2 "$work/u" | median); g50=$(cut -d' ' -f2 "$work/g" | median)
    u99=$(cut -d' ' -f3 "$work/u" | median); g99=$(cut -d' ' -f3 "$work/g" | median)
    ratio=$(awk -v g="$g_rps" -v u="$u_rps" 'BEGIN { printf "%.2f", g / u }')
    label=$([[ $workload == first ]] && echo "first call (new key each)" || echo "replay (same key)")
    printf '| %s | %s | %s | %.0f | %.0f | %s× | %s / %s | %s / %s |\n' "$server" "$name" "$label" "$u_rps" "$g_rps" \
      "$ratio" "$u50" "$u99" "$g50" "$g99"
  done
  stop_server
done
done
