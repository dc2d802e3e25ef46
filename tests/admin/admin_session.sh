#!/usr/bin/env bash
# tests/admin/admin_session.sh — drives the idem-admin binary against one store.
#
#   admin_session.sh <idem-admin> <idem_admin_holder> <store>
#
# <store> is what --store takes; `sqlite:fresh` is a new file in a temporary directory, and
# `postgres:@<file>`, `redis:@<file>` and `redis-cluster:@<file>` read the conninfo, the address or
# the nodes (one per line) from a fixture's file. Checks, with
# the exit codes idem-admin documents: inspect of a completed record (human, JSON, --payload) and
# of an absent one; a record left in progress by a SIGKILLed holder (release refused while its
# lease lives, accepted once it lapsed); a forced release racing a live holder (the holder's
# completion is refused, the next caller's recorded: never two); list with its filters; stats;
# purge; usage errors; an unreachable store; and that no key appears in anything it printed.
set -euo pipefail

admin=$1
holder=$2
store=$3
work=$(mktemp -d /tmp/idem-admin-session.XXXXXXXX)
case "$store" in
  sqlite:fresh) store="sqlite:$work/records.db" ;;
  postgres:@*) store="postgres:$(cat "${store#postgres:@}")" ;;
  redis:@*) store="redis:$(cat "${store#redis:@}")" ;;
  redis-cluster:@*) store="redis-cluster:$(paste -sd, "${store#redis-cluster:@}")" ;;
esac
kind=${store%%:*}

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "admin_session.sh ($kind): FAILED: $*" >&2
  echo "--- last output:" >&2
  cat "$work/out" "$work/err" >&2 2>/dev/null || true
  exit 1
}

# adm <expected exit> <args...>: runs idem-admin, keeps its output in $work/out and $work/err
# (and everything in $work/all, to look for keys at the end).
adm() {
  local expected=$1
  shift
  local rc=0
  "$admin" --store "$store" "$@" >"$work/out" 2>"$work/err" || rc=$?
  cat "$work/out" "$work/err" >>"$work/all"
  [[ "$rc" == "$expected" ]] || fail "idem-admin $* exited $rc, expected $expected"
}

# start_holder <name> <key> <lease ms> <result>: a holder in a process of its own that has acquired
# <key> and waits for a line on fd 5 before it completes; its output is read on fd 6. Sets $held_by.
start_holder() {
  mkfifo "$work/$1.in" "$work/$1.out"
  "$holder" "$store" "$scope" "$2" "$3" hold "$4" <"$work/$1.in" >"$work/$1.out" 2>&1 &
  held_by=$!
  pids+=("$held_by")
  exec 5>"$work/$1.in"
  exec 6<"$work/$1.out"
  local said=""
  IFS= read -r -t 60 said <&6 || fail "holder $1 did not acquire"
  [[ "$said" == acquired ]] || fail "holder $1 said $said"
}

run_id="$(date +%s%N)-$RANDOM"
scope="Admin.session${RANDOM}"
key_done="done-key-$run_id"
key_killed="killed-key-$run_id"
key_race="race-key-$run_id"

# A completed record: inspect it three ways, and an absent one.
[[ "$("$holder" "$store" "$scope" "$key_done" 30000 run first-result)" == executed ]] || fail "the first call"
adm 0 inspect "$scope" "$key_done"
grep -q "^state  *completed" "$work/out" || fail "inspect: no completed state"
grep -q "^record  *$scope/#[0-9a-f]\{8\}$" "$work/out" || fail "inspect: the record is not shown as Scope/#xxxxxxxx"
! grep -q "first-result" "$work/out" || fail "inspect printed the payload without --payload"
adm 0 --json inspect "$scope" "$key_done"
grep -q '"state": "completed"' "$work/out" || fail "inspect --json: state"
grep -q '"payload_type": "application/json"' "$work/out" || fail "inspect --json: payload type"
adm 0 inspect "$scope" "$key_done" --payload
grep -q 'first-result' "$work/out" || fail "inspect --payload: no payload"
# Global options after the subcommand and its arguments, as git and kubectl take them.
rc=0
"$admin" inspect "$scope" "$key_done" --json --store "$store" >"$work/out" 2>"$work/err" || rc=$?
cat "$work/out" "$work/err" >>"$work/all"
[[ "$rc" == 0 ]] || fail "idem-admin inspect ... --json --store exited $rc: $(cat "$work/err")"
grep -q '"state": "completed"' "$work/out" || fail "inspect with --json after the subcommand: not JSON"
adm 0 stats --json
grep -q '"completed": ' "$work/out" || fail "stats with --json after the subcommand"
adm 1 inspect "$scope" "absent-key-$run_id"
adm 4 release "$scope" "$key_done"  # complete: never released
grep -q "complete" "$work/err" || fail "release of a complete record: no reason given"

# A holder SIGKILLed while it holds its record: the record stays in progress; release is refused
# while the lease lives and accepted once it lapsed. The lease outlasts two idem-admin runs on a
# loaded machine (a sanitized build's start-up alone can take a second there).
start_holder killed "$key_killed" 5000 never
killed=$held_by
kill -KILL "$killed"
wait "$killed" 2>/dev/null || true
exec 5>&- 6<&-
adm 0 --json inspect "$scope" "$key_killed"
grep -q '"state": "in-progress"' "$work/out" || fail "the killed holder's record is not in progress"
adm 4 release "$scope" "$key_killed"
grep -q "live lease" "$work/err" || fail "release of a live lease: no reason given"
deadline=$((SECONDS + 30))
until "$admin" --store "$store" --json inspect "$scope" "$key_killed" 2>/dev/null | grep -q '"lease_lapsed": true'; do
  (( SECONDS < deadline )) || fail "the killed holder's lease did not lapse within 30 s"
  sleep 0.2
done
adm 0 stats
# Exact only on the test's own SQLite file: the servers are shared with tests running beside it.
[[ "$kind" != sqlite ]] || grep -q "^abandoned  *1  " "$work/out" || fail "stats: the abandoned record is not counted"
adm 0 release "$scope" "$key_killed"
grep -q "^released $scope/#" "$work/out" || fail "release: $(cat "$work/out")"
adm 1 inspect "$scope" "$key_killed"

# A forced release racing a live holder: the holder's completion is refused (its lease token no
# longer owns the record), the next caller runs and is recorded. Never two successes.
start_holder race "$key_race" 60000 holder-result
racer=$held_by
adm 4 release "$scope" "$key_race"
adm 0 --json release "$scope" "$key_race" --force
grep -q '"result": "released"' "$work/out" || fail "release --force: $(cat "$work/out")"
[[ "$("$holder" "$store" "$scope" "$key_race" 30000 run second-result)" == executed ]] ||
  fail "the caller after a forced release did not run"
echo go >&5
IFS= read -r -t 60 line <&6 || fail "the racing holder did not finish"
rc=0
wait "$racer" || rc=$?
[[ "$line" == lease-lost && "$rc" == 5 ]] || fail "the holder whose lease was ended said '$line' (exit $rc)"
exec 5>&- 6<&-
adm 0 inspect "$scope" "$key_race" --payload
grep -q 'second-result' "$work/out" || fail "the record is not the second caller's"
! grep -q 'holder-result' "$work/out" || fail "the refused holder's result was recorded"

# list and its filters; stats; purge.
adm 0 list --scope "$scope"
grep -q "^2 records$" "$work/out" || fail "list --scope: $(tail -n 1 "$work/out")"
adm 0 --json list --scope "$scope" --state completed --limit 1
grep -q '"count": 1' "$work/out" || fail "list --limit 1"
adm 0 --json list --scope "$scope" --state in-progress
grep -q '"count": 0' "$work/out" || fail "list --state in-progress"
adm 0 --json list --scope "$scope" --older-than PT1H
grep -q '"count": 0' "$work/out" || fail "list --older-than PT1H"
adm 0 --json stats
grep -q '"completed": ' "$work/out" || fail "stats --json"
# purge deletes every expired record of the store: only on the test's own SQLite file, since on the
# shared servers it would take the expired records that purge cases running beside it count on.
if [[ "$kind" == sqlite ]]; then
  adm 0 purge
  grep -q "^purged [0-9]* expired records$" "$work/out" || fail "purge: $(cat "$work/out")"
fi

# Usage errors, and what --help documents.
adm 2 list --state finished
adm 2 inspect "bad:scope" "k"
adm 2 list --older-than 5m
adm 2
"$admin" --help >"$work/out" 2>&1 || true
grep -q "4  refused" "$work/out" || fail "--help does not document the exit codes"

# No key anywhere in what idem-admin printed.
for key in "$key_done" "$key_killed" "$key_race" "absent-key-$run_id"; do
  ! grep -qF "$key" "$work/all" || fail "idem-admin printed a key"
done
echo "admin_session.sh: all checks passed on $kind"
