#!/usr/bin/env bash
# bench/asio/run.sh — idem::async_execute against engine::execute, on the memory store and on a
# redis-server that this script starts (127.0.0.1, a free port, nothing persisted) and stops.
#
#   bench/asio/run.sh [build-dir]          (default: ./build; needs the idem_bench_async target)
#   CALLS=20000 ROUNDS=5 REDIS_CALLS=2000 bench/asio/run.sh build
#
# A benchmark, not a test: nothing here fails on a number. docs/benchmarks.md records the figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bench="$build/bench/idem_bench_async"
[[ -x "$bench" ]] || { echo "run.sh: $bench not found; cmake --build $build --target idem_bench_async" >&2; exit 1; }
state=$(mktemp -d /tmp/idem-bench-async.XXXXXXXX)
cleanup() {
  bash "$root/tests/support/redis-server.sh" stop "$state" >/dev/null 2>&1 || true
  rmdir "$state" 2>/dev/null || true
}
trap cleanup EXIT
"$bench" memory "${CALLS:-50000}" "${ROUNDS:-5}"
echo
bash "$root/tests/support/redis-server.sh" start "$state" >&2
"$bench" "redis:$(cat "$state/address")" "${REDIS_CALLS:-2000}" "${ROUNDS:-5}"
