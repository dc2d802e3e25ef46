#!/usr/bin/env bash
# tests/admin/unreachable.sh — idem-admin against stores that cannot be reached: exit code 3, and
# a conninfo's password never in what it prints. Also: a store without administration (memory) is
# a usage error (2).
set -euo pipefail
admin=$1
source "$(dirname "$0")/../support/ports.sh"
port=$(pick_port unreachable.sh)
secret="hunter2-$RANDOM$RANDOM"
fail() { echo "unreachable.sh: FAILED: $*" >&2; exit 1; }
check() {  # expected-exit store args...
  local expected=$1 spec=$2 rc=0
  shift 2
  out=$("$admin" --store "$spec" "$@" 2>&1) || rc=$?
  [[ "$rc" == "$expected" ]] || fail "--store ${spec%%:*} $*: exit $rc, expected $expected: $out"
  [[ "$out" != *"$secret"* ]] || fail "the password appears in: $out"
  [[ -n "$out" ]] || fail "--store ${spec%%:*}: no message"
}
check 3 "postgres:host=127.0.0.1 port=$port user=idem password=$secret connect_timeout=2" stats
check 3 "postgres:postgresql://idem:$secret@127.0.0.1:$port/idem?connect_timeout=2" stats
check 3 "redis:127.0.0.1:$port" stats
check 3 "redis-cluster:127.0.0.1:$port" stats
check 3 "sqlite:/nonexistent-$RANDOM/records.db" stats
check 2 "memory" stats
check 2 "mysql:somewhere" stats
check 2 "redis:nohost" stats
echo "unreachable.sh: all checks passed"
