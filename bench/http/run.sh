#!/usr/bin/env bash
# bench/http/run.sh — requests/s and latency of a guarded endpoint against the same endpoint
# unguarded, in the same run, with wrk over loopback; memory store and Redis.
#
#   bench/http/run.sh <build-dir> [seconds-per-run=5] [rounds=3] [connections=16]
#   SERVERS="httplib beast" (the default): both servers, one after the other
#   PEERS=1 (the default when node and npm are there): then the payments sample on Redis (both
#     servers) against the Express peers of bench/http/peers on the same redis-server, POST
#     /payments, at PEER_CONNECTIONS="16 256"; PEERS=0 skips it; BEAST_THREADS=N (default 1) runs
#     the Beast sample on N io_context threads
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
peer_pids=()
cleanup() {
  [[ -n "$server_pid" ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  for pid in "${peer_pids[@]}"; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  [[ -f "$redis_dir/redis.pid" ]] && bash "$root/tests/support/redis-server.sh" stop "$redis_dir" >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# launch <name> <command...>: starts a server that prints `listening on 127.0.0.1:PORT` first;
# sets launched_pid and port.
launch() {
  local name=$1
  shift
  mkfifo "$work/out.$name"
  "$@" >"$work/out.$name" 2>"$work/err.$name" &
  launched_pid=$!
  exec 3<"$work/out.$name"
  local line
  IFS= read -r -t 60 line <&3 || { cat "$work/err.$name" >&2; exit 1; }
  cat <&3 >/dev/null &
  exec 3<&-
  port=${line##*:}
}

start_server() {
  launch "$1" "$server_bin" --store "$2" --server "$3"
  server_pid=$launched_pid
}

stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
}

to_ms() {  # wrk prints 480.00us, 2.10ms or 1.02s
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n = n; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}

# run_wrk <script> <path> [run-id] → "rps p50ms p99ms"
run_wrk() {
  local out
  out=$(wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$here/$1" "http://127.0.0.1:$port" -- "$2" \
    "${3:-r$RANDOM$RANDOM}")
  if grep -q "Non-2xx" <<<"$out"; then echo "run.sh: non-2xx answers on $2 ($1):" >&2; echo "$out" >&2; exit 1; fi
  # wrk counts a connection the server closed (and reconnects) as a read error.
  if grep -q "Socket errors" <<<"$out"; then
    echo "# port $port, $2 ($1): $(grep "Socket errors" <<<"$out" | sed 's/^ *//') (reconnects included)" >&2
  fi
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

# The payments sample beside the Node peers, all on the same redis-server, POST /payments.
peers_wanted=${PEERS:-1}
if [[ $peers_wanted != 0 ]] && ! command -v node >/dev/null; then
  echo "run.sh: node is not installed: the Express peers are not measured (PEERS=0 to say so)" >&2
  exit 1
fi
if [[ $peers_wanted != 0 && -f "$redis_dir/address" ]]; then
  sample_bin="$build/samples/payments/idem_sample_payments"
  [[ -x "$sample_bin" ]] || { echo "run.sh: build idem_sample_payments first" >&2; exit 1; }
  peers_dir="$here/peers"
  if [[ ! -d "$peers_dir/node_modules/express-idempotency" || ! -d "$peers_dir/node_modules/@node-idempotency/core" ]]; then
    echo "# npm ci in $peers_dir" >&2
    (cd "$peers_dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  fi
  redis_address=$(cat "$redis_dir/address")
  contenders=("sample httplib" "sample beast" "express-idempotency" "node-idempotency")
  declare -A port_of
  launch sample-httplib "$sample_bin" --port 0 --store "redis:$redis_address" --server httplib
  peer_pids+=("$launched_pid"); port_of["sample httplib"]=$port
  launch sample-beast "$sample_bin" --port 0 --store "redis:$redis_address" --server beast --threads "${BEAST_THREADS:-1}"
  peer_pids+=("$launched_pid"); port_of["sample beast"]=$port
  for peer in express-idempotency node-idempotency; do
    launch "$peer" node "$peers_dir/server.mjs" --peer "$peer" --redis "$redis_address"
    peer_pids+=("$launched_pid"); port_of[$peer]=$port
  done
  versions=""
  for package in express express-idempotency express-idempotency-redis-adapter @node-idempotency/core \
                 @node-idempotency/storage-adapter-redis; do
    versions+=" $package@$(sed -n 's/^ *"version": "\(.*\)",$/\1/p' "$peers_dir/node_modules/$package/package.json" | head -n 1)"
  done
  echo
  echo "# POST /payments on redis:$redis_address; node $(node --version),$versions"
  echo "| connections | workload | sample httplib req/s | sample beast req/s | express-idempotency req/s | node-idempotency req/s | httplib ÷ best peer | beast ÷ best peer | p99 ms (httplib / beast / e-i / n-i) |"
  echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for connections in ${PEER_CONNECTIONS:-16 256}; do
    for workload in first replay; do
      for c in "${contenders[@]}"; do : >"$work/peer.${c// /-}"; done
      for ((r = 1; r <= rounds; ++r)); do
        for c in "${contenders[@]}"; do
          port=${port_of[$c]}
          run_id="r$RANDOM$RANDOM"
          # replay.lua's keys (one per wrk thread) are stored first: the sample answers a duplicate
          # of a call in flight 409 (waitTimeout PT0S), and so do the peers.
          if [[ $workload == replay ]]; then
            for tid in 0 1; do
              curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
                -H "Idempotency-Key: \"replay-$run_id-$tid\"" -d '{"amount": 1200, "currency": "EUR"}' \
                "http://127.0.0.1:$port/payments"
            done
          fi
          run_wrk "$workload.lua" /payments "$run_id" >>"$work/peer.${c// /-}"
        done
      done
      declare -A rps p99
      for c in "${contenders[@]}"; do
        rps[$c]=$(cut -d' ' -f1 "$work/peer.${c// /-}" | median)
        p99[$c]=$(cut -d' ' -f3 "$work/peer.${c// /-}" | median)
      done
      best=$(printf '%s\n%s\n' "${rps[express-idempotency]}" "${rps[node-idempotency]}" | sort -g | tail -n 1)
      label=$([[ $workload == first ]] && echo "first call (new key each)" || echo "replay (same key)")
      printf '| %s | %s | %.0f | %.0f | %.0f | %.0f | %s× | %s× | %s / %s / %s / %s |\n' "$connections" "$label" \
        "${rps[sample httplib]}" "${rps[sample beast]}" "${rps[express-idempotency]}" "${rps[node-idempotency]}" \
        "$(awk -v a="${rps[sample httplib]}" -v b="$best" 'BEGIN { printf "%.2f", a / b }')" \
        "$(awk -v a="${rps[sample beast]}" -v b="$best" 'BEGIN { printf "%.2f", a / b }')" \
        "${p99[sample httplib]}" "${p99[sample beast]}" "${p99[express-idempotency]}" "${p99[node-idempotency]}"
    done
  done
fi
