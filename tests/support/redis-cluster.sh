#!/usr/bin/env bash
# tests/support/redis-cluster.sh — a throwaway Redis Cluster for the test suite and benchmarks:
# 3 masters with one replica each, on 127.0.0.1, every node's files in <state-dir>/<port>/.
#
#   redis-cluster.sh start <state-dir>   start six redis-server processes in cluster mode on free
#                                        ports, create the cluster with redis-cli --cluster create
#                                        and wait until every node reports cluster_state:ok and
#                                        every slot has a master; write <state-dir>/seeds (one
#                                        "127.0.0.1:<port>" per line, masters first as created)
#   redis-cluster.sh stop <state-dir>    stop every node (by the pids they wrote) and delete the
#                                        files this script made
#
# cluster-node-timeout is 1000 ms so that a failover takes a few seconds. Nothing is persisted
# (--save "" --appendonly no). Exits non-zero with the nodes' logs on stderr when the cluster cannot
# be created, so the ctest fixture fails instead of skipping. Environment: IDEM_REDIS_SERVER and
# IDEM_REDIS_CLI override the binaries.
set -euo pipefail

usage() {
  echo "usage: $0 start <state-dir> | stop <state-dir>" >&2
  exit 2
}

[[ $# -eq 2 ]] || usage
action=$1
state_dir=$2
server=${IDEM_REDIS_SERVER:-redis-server}
cli=${IDEM_REDIS_CLI:-redis-cli}
nodes=6

# shellcheck source=ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

# A port whose cluster bus port (port + 10000) is free as well, neither of them taken by a node
# started before (their ports and bus ports are in `taken`). Both stay below Linux's ephemeral range
# (32768 and up), where an outgoing connection may hold a port that nobody listens on.
taken=" "
pick_cluster_port() {
  local port
  for _ in $(seq 1 100); do
    port=$(( 20000 + RANDOM % 2700 ))
    if [[ "$taken" != *" $port "* && "$taken" != *" $(( port + 10000 )) "* ]] &&
       ! port_in_use "$port" && ! port_in_use $(( port + 10000 )); then
      echo "$port"
      return
    fi
  done
  echo "redis-cluster.sh: no free port pair found" >&2
  exit 1
}

stop_all() {
  local dir pid
  for dir in "$state_dir"/*/; do
    [[ -f "$dir/redis.pid" ]] || continue
    pid=$(cat "$dir/redis.pid" 2>/dev/null || true)
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  for dir in "$state_dir"/*/; do
    [[ -d "$dir" ]] || continue
    rm -f "$dir/redis.pid" "$dir/redis.log" "$dir/nodes.conf" "$dir/dump.rdb"
    rmdir "$dir" 2>/dev/null || true
  done
  rm -f "$state_dir/seeds"
}

fail() {
  echo "redis-cluster.sh: $1; the nodes' logs:" >&2
  local log
  for log in "$state_dir"/*/redis.log; do
    [[ -f "$log" ]] || continue
    echo "--- $log" >&2
    tail -n 30 "$log" >&2
  done
  stop_all
  exit 1
}

start() {
  if ! command -v "$server" >/dev/null || ! command -v "$cli" >/dev/null; then
    echo "redis-cluster.sh: $server or $cli not found (install redis-server, see scripts/install-deps.sh)" >&2
    exit 1
  fi
  mkdir -p "$state_dir"
  stop_all
  local ports=() port i
  local attempt up
  for i in $(seq 1 "$nodes"); do
    up=0
    for attempt in 1 2 3 4 5; do  # another process may take a port between the check and the bind
      port=$(pick_cluster_port)
      taken+="$port $(( port + 10000 )) "
      mkdir -p "$state_dir/$port"
      "$server" --bind 127.0.0.1 --port "$port" --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 1000 --save "" --appendonly no --dir "$state_dir/$port" \
        --daemonize yes --pidfile "$state_dir/$port/redis.pid" --logfile "$state_dir/$port/redis.log" \
        --maxclients 2000 >/dev/null 2>&1 || continue
      for _ in $(seq 1 200); do
        if "$cli" -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then up=1; break; fi
        grep -q "Address already in use" "$state_dir/$port/redis.log" 2>/dev/null && break
        sleep 0.025
      done
      [[ $up -eq 1 ]] && break
      echo "redis-cluster.sh: node on port $port did not start (attempt $attempt)" >&2
      rm -rf "${state_dir:?}/$port"
    done
    [[ $up -eq 1 ]] || fail "redis-server did not start"
    ports+=("$port")
  done
  local addresses=()
  for port in "${ports[@]}"; do addresses+=("127.0.0.1:$port"); done
  "$cli" --cluster create "${addresses[@]}" --cluster-replicas 1 --cluster-yes >"$state_dir/create.log" 2>&1 ||
    { cat "$state_dir/create.log" >&2; fail "redis-cli --cluster create failed"; }
  rm -f "$state_dir/create.log"
  # Every node must agree that the cluster is up, and every replica must have synced.
  local ok
  for _ in $(seq 1 400); do
    ok=1
    for port in "${ports[@]}"; do
      "$cli" -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | grep -q "cluster_state:ok" || { ok=0; break; }
      if "$cli" -h 127.0.0.1 -p "$port" role 2>/dev/null | head -1 | grep -q slave; then
        "$cli" -h 127.0.0.1 -p "$port" info replication 2>/dev/null | grep -q "master_link_status:up" || { ok=0; break; }
      fi
    done
    [[ $ok -eq 1 ]] && break
    sleep 0.05
  done
  [[ $ok -eq 1 ]] || fail "the cluster did not reach cluster_state:ok with every replica in sync"
  printf '%s\n' "${addresses[@]}" >"$state_dir/seeds"
  echo "redis-cluster.sh: $("$server" --version | cut -d' ' -f1-3) cluster of ${#ports[@]} nodes on 127.0.0.1:${ports[*]}, files in $state_dir"
}

case "$action" in
  start) start ;;
  stop)
    stop_all
    rmdir "$state_dir" 2>/dev/null || true
    echo "redis-cluster.sh: stopped"
    ;;
  *) usage ;;
esac
