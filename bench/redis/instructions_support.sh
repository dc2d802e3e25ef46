# bench/redis/instructions_support.sh — sourced by script_instructions.sh and client_instructions.sh:
# valgrind (installed with apt-get if missing) and a redis-server of the script's own on a random
# port, in a temporary directory removed on exit with the server.
#
#   start_redis NAME [WRAPPER...]   sets $work, $port and $server_pid; WRAPPER runs the server (e.g. valgrind)

if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  echo "# installing valgrind" >&2
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -qq valgrind >/dev/null
fi

work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

start_redis() {
  local name=$1
  shift
  "$@" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" PING >/dev/null || { echo "$name: redis-server did not start" >&2; exit 1; }
}
