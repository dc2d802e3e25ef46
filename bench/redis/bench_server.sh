# bench/redis/bench_server.sh — sourced by the Redis benchmark scripts: one redis-server of their own.
#
#   source "$root/bench/redis/bench_server.sh"; bench_binary <build> <target>; bench_server_start <PIN mode>

# Sets `bench` to the benchmark `target` built in `build`, or fails saying how to build it.
bench_binary() {
  local build=$1 target=$2
  bench="$build/bench/redis/$target"
  if [[ ! -x "$bench" ]]; then
    echo "$(basename "$0"): $bench not found; build it first: cmake --build $build --target $target" >&2
    exit 1
  fi
}

# Starts a redis-server (127.0.0.1, a free port, nothing persisted) in a temporary directory that an
# EXIT trap stops and removes, and sets `address` (host:port), `results` (an empty file in that
# directory) and `run` (the command prefix for the clients). PIN mode 1: redis-server and the clients
# on CPU 0; split: redis-server on CPU 1, the clients on CPU 0; anything else: unpinned.
bench_server_start() {
  state=$(mktemp -d /tmp/idem-bench-redis.XXXXXXXX)
  trap bench_server_stop EXIT
  bash "$root/tests/support/redis-server.sh" start "$state" >&2
  address=$(cat "$state/address")
  results="$state/results.txt"
  : >"$results"
  run=()
  case "$1" in
    1) taskset -pc 0 "$(cat "$state/redis.pid")" >/dev/null; run=(taskset -c 0) ;;
    split) taskset -pc 1 "$(cat "$state/redis.pid")" >/dev/null; run=(taskset -c 0) ;;
  esac
}

bench_server_stop() {
  bash "$root/tests/support/redis-server.sh" stop "$state" >/dev/null 2>&1 || true
  rm -f "$results"
  rmdir "$state" 2>/dev/null || true
}
