#!/usr/bin/env bash
# tests/support/redis-server.sh — a throwaway redis-server for the test suite, benchmarks and sample.
#
#   redis-server.sh start <state-dir> [port]   start redis-server on 127.0.0.1 and a free port (or
#                                              `port`) with its files in <state-dir>; write
#                                              <state-dir>/address ("127.0.0.1:<port>") and
#                                              <state-dir>/port
#   redis-server.sh stop <state-dir>           stop that server (by the pid it wrote), delete the
#                                              files it made and <state-dir> if that is then empty
#
# Nothing is persisted (--save "" --appendonly no). The server listens on 127.0.0.1 only. Exits
# non-zero with the server log on stderr when the server cannot start, so the ctest fixture fails
# instead of skipping. Environment: IDEM_REDIS_SERVER overrides the redis-server binary.
set -euo pipefail

usage() {
  echo "usage: $0 start <state-dir> [port] | stop <state-dir>" >&2
  exit 2
}

[[ $# -ge 2 && $# -le 3 ]] || usage
action=$1
state_dir=$2
requested_port=${3:-}
server=${IDEM_REDIS_SERVER:-redis-server}
cli=${IDEM_REDIS_CLI:-redis-cli}

# shellcheck source=ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

server_pid() {
  cat "$state_dir/redis.pid" 2>/dev/null || true
}

stop_quietly() {
  local pid
  pid=$(server_pid)
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$state_dir/redis.pid" "$state_dir/address" "$state_dir/port"
}

start() {
  if ! command -v "$server" >/dev/null; then
    echo "redis-server.sh: $server not found (install redis-server, see scripts/install-deps.sh)" >&2
    exit 1
  fi
  mkdir -p "$state_dir"
  stop_quietly
  local port attempt
  for attempt in 1 2 3 4 5; do
    if [[ -n "$requested_port" ]]; then
      port=$requested_port
    else
      port=$(pick_port redis-server.sh)
    fi
    rm -f "$state_dir/redis.log"
    if "$server" --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$state_dir" \
         --daemonize yes --pidfile "$state_dir/redis.pid" --logfile "$state_dir/redis.log" \
         --maxclients 2000 >/dev/null 2>&1; then
      for _ in $(seq 1 200); do
        if "$cli" -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
          echo "127.0.0.1:$port" >"$state_dir/address"
          echo "$port" >"$state_dir/port"
          echo "redis-server.sh: $("$server" --version | cut -d' ' -f1-3) listening on 127.0.0.1:$port (pid $(server_pid)), files in $state_dir"
          return 0
        fi
        if grep -q -i "address already in use" "$state_dir/redis.log" 2>/dev/null; then
          break
        fi
        sleep 0.025
      done
    fi
    echo "redis-server.sh: start attempt $attempt on port $port failed" >&2
    stop_quietly
    if [[ -n "$requested_port" ]]; then
      sleep 0.2  # the old server's socket may still be closing
    fi
  done
  echo "redis-server.sh: redis-server did not start; its log:" >&2
  cat "$state_dir/redis.log" >&2 2>/dev/null || true
  exit 1
}

case "$action" in
  start) start ;;
  stop)
    stop_quietly
    # Only the files this script made; the directory goes if nothing else is in it.
    rm -f "$state_dir/redis.log" "$state_dir/dump.rdb"
    rmdir "$state_dir" 2>/dev/null || true
    echo "redis-server.sh: stopped"
    ;;
  *) usage ;;
esac
