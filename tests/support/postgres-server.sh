#!/usr/bin/env bash
# tests/support/postgres-server.sh — a throwaway PostgreSQL server for the test suite.
#
#   postgres-server.sh start <state-dir>   initdb into a fresh temporary directory, start a server on
#                                          127.0.0.1 and a free port, write <state-dir>/conninfo
#   postgres-server.sh stop <state-dir>    stop that server and delete its data directory
#   postgres-server.sh kill <state-dir>    SIGKILL the server's postmaster (data kept; fault tests)
#   postgres-server.sh halt <state-dir>    stop the server cleanly, keeping its data (fault tests)
#   postgres-server.sh restart <state-dir> start the kept data again on the same port (fault tests)
#
# The server listens on 127.0.0.1 only; its unix socket lives in its own temporary directory, never
# in a shared place. fsync is off: the data is thrown away after the run. Run as root, the server
# runs as the `postgres` user (runuser). Exits non-zero with the server log on stderr when the
# server cannot start, so the ctest fixture fails instead of skipping.
#
# Environment: IDEM_PG_DURABLE=1 keeps fsync and synchronous_commit on (the fault tests, which kill
# the server and count what survives). IDEM_PG_BIN overrides the directory of initdb/pg_ctl (default: the newest
# /usr/lib/postgresql/*/bin).
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|kill|halt|restart <state-dir>" >&2
  exit 2
}

[[ $# -eq 2 ]] || usage
action=$1
state_dir=$2

find_bin() {
  if [[ -n "${IDEM_PG_BIN:-}" ]]; then
    echo "$IDEM_PG_BIN"
    return
  fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -z "$dir" || ! -x "$dir/initdb" ]]; then
    echo "postgres-server.sh: no PostgreSQL server found under /usr/lib/postgresql/*/bin" \
         "(install postgresql, or set IDEM_PG_BIN)" >&2
    exit 1
  fi
  echo "$dir"
}

# Runs a server binary as the server's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# shellcheck source=ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

start() {
  local bin
  bin=$(find_bin)
  mkdir -p "$state_dir"
  if [[ -f "$state_dir/datadir" ]]; then
    stop_quietly
  fi
  rm -f "$state_dir/conninfo"

  local data_root
  data_root=$(mktemp -d /tmp/idem-pg.XXXXXXXX)
  echo "$data_root" >"$state_dir/datadir"
  if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$data_root"
  fi
  chmod 700 "$data_root"

  if ! as_owner "$bin/initdb" -D "$data_root/data" -U idem -A trust -E UTF8 --locale=C.UTF-8 \
         --no-sync >"$state_dir/initdb.log" 2>&1; then
    echo "postgres-server.sh: initdb failed:" >&2
    cat "$state_dir/initdb.log" >&2
    exit 1
  fi

  local port attempt durable=off
  [[ "${IDEM_PG_DURABLE:-}" == 1 ]] && durable=on
  for attempt in 1 2 3 4 5; do
    port=$(pick_port postgres-server.sh)
    cat >>"$data_root/data/postgresql.conf" <<EOF
# --- idem test fixture (attempt $attempt) ---
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$data_root'
fsync = $durable
synchronous_commit = $durable
full_page_writes = $durable
max_connections = 300
shared_buffers = 64MB
log_min_messages = warning
log_line_prefix = '%m [%p] %a '
EOF
    if as_owner "$bin/pg_ctl" -D "$data_root/data" -l "$data_root/server.log" -w -t 60 start \
         >"$state_dir/pg_ctl.log" 2>&1; then
      echo "host=127.0.0.1 port=$port user=idem dbname=postgres connect_timeout=10" >"$state_dir/conninfo"
      echo "$port" >"$state_dir/port"
      echo "postgres-server.sh: PostgreSQL ($("$bin/postgres" --version)) listening on 127.0.0.1:$port," \
           "data in $data_root"
      return 0
    fi
    # Most likely another process took the port between the check and the bind: try another.
    echo "postgres-server.sh: start attempt $attempt on port $port failed" >&2
  done
  echo "postgres-server.sh: PostgreSQL did not start; server log:" >&2
  cat "$data_root/server.log" >&2 2>/dev/null || true
  cat "$state_dir/pg_ctl.log" >&2 || true
  exit 1
}

stop_quietly() {
  local bin data_root
  bin=$(find_bin)
  data_root=$(cat "$state_dir/datadir" 2>/dev/null || true)
  if [[ -n "$data_root" && -d "$data_root/data" ]]; then
    as_owner "$bin/pg_ctl" -D "$data_root/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
  fi
  if [[ -n "$data_root" && "$data_root" == /tmp/idem-pg.* ]]; then
    rm -rf "$data_root"
  fi
  rm -f "$state_dir/datadir" "$state_dir/conninfo" "$state_dir/port"
}

data_dir() {
  echo "$(cat "$state_dir/datadir")/data"
}

case "$action" in
  start) start ;;
  kill)
    pid=$(head -n 1 "$(data_dir)/postmaster.pid")
    kill -KILL "$pid"
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.025; done
    # Its backends exit once they notice the postmaster is gone; the restart waits for them.
    ;;
  halt) as_owner "$(find_bin)/pg_ctl" -D "$(data_dir)" -m fast -w -t 60 stop >/dev/null ;;
  restart)
    for _ in $(seq 1 200); do
      as_owner "$(find_bin)/pg_ctl" -D "$(data_dir)" -l "$(cat "$state_dir/datadir")/server.log" -w -t 60 start \
        >"$state_dir/pg_ctl.log" 2>&1 && exit 0
      sleep 0.05  # backends of a killed postmaster still hold the shared memory
    done
    cat "$state_dir/pg_ctl.log" >&2
    exit 1
    ;;
  stop)
    stop_quietly
    echo "postgres-server.sh: stopped"
    ;;
  *) usage ;;
esac
