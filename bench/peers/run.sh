#!/usr/bin/env bash
# bench/peers/run.sh — the npm idempotency peers on a Redis that is already running.
#
#   bench/peers/run.sh <host:port> [calls] [repeats]
#
# npm-installs the pinned versions (package.json, package-lock.json) into bench/peers/node_modules
# (git-ignored) on first use, then runs bench.mjs for every peer, one call at a time and with 8
# calls in flight, printing RESULT lines (see bench.mjs). Needs node >= 20 (@redis/client 6 requires it) and npm; benchmark only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
address=${1:?usage: $0 host:port [calls] [repeats]}
calls=${2:-2000}
repeats=${3:-5}

if [[ ! -d "$here/node_modules/@aws-lambda-powertools/idempotency" || ! -d "$here/node_modules/@node-idempotency/core" ]]; then
  echo "# npm ci in $here" >&2
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
versions=""
for package in @aws-lambda-powertools/idempotency @redis/client @node-idempotency/core \
               @node-idempotency/storage-adapter-redis redis; do
  version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$here/node_modules/$package/package.json" | head -n 1)
  versions+=" $package@$version"
done
echo "# peers: node $(node --version),$versions"
for concurrency in 1 8; do
  for peer in powertools powertools+cache node-idempotency; do
    node "$here/bench.mjs" --peer "$peer" --address "$address" --calls "$calls" --repeats "$repeats" \
      --concurrency "$concurrency"
  done
done
