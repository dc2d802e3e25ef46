#!/usr/bin/env bash
# bench/redis/script_instructions.sh — what idem's Lua scripts cost Redis, in instructions: a number
# this VM's wall clock cannot blur (the µs of `idem_bench_redis --only server-cost` move by ±30 %
# from run to run here). Starts a redis-server of its own under callgrind, collecting only inside
# EVALSHA, loads the scripts, sends CALLS claims (acquire on free keys), completions and replays
# (acquire on complete records) through `redis-cli --pipe`, and prints the instructions per call of
# each path.
#
#   bench/redis/script_instructions.sh [REV ...]      (default: the working tree's scripts)
#   CALLS=2000 bench/redis/script_instructions.sh HEAD~1 HEAD
#
# Each REV is a git revision whose runtime/redis/lua/ is measured (`worktree` = the working tree),
# all on the same server, one after the other. Needs valgrind (installed with apt-get if missing)
# and redis-server / redis-cli. A benchmark, not a test: nothing here fails on a number.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
calls=${CALLS:-2000}
revs=("$@")
[[ ${#revs[@]} -eq 0 ]] && revs=(worktree)

# shellcheck source=instructions_support.sh
source "$root/bench/redis/instructions_support.sh"
start_redis script_instructions.sh valgrind --tool=callgrind --collect-atstart=no --toggle-collect=evalGenericCommand \
  --callgrind-out-file="$work/callgrind.%p"

# The script `name` of revision `rev` as runtime/redis/CMakeLists.txt of that revision embeds it:
# expanded by the revision's lua/expand.cmake where it has one, else common.lua followed by name.lua.
script_of() {
  local rev=$1 name=$2 dir="$work/lua-$1"
  if [[ ! -d $dir ]]; then
    mkdir -p "$dir"
    if [[ $rev == worktree ]]; then
      cp "$root"/runtime/redis/lua/* "$dir"/
    else
      git -C "$root" archive "$rev" runtime/redis/lua | tar -x -C "$dir" --strip-components=3
    fi
  fi
  if [[ -f $dir/expand.cmake ]]; then
    cmake -DSCRIPT="$dir/$name.lua" -DLIBRARY="$dir/common.lua" -DOUTPUT="$dir/$name.expanded" -P "$dir/expand.cmake"
    cat "$dir/$name.expanded"
  else
    cat "$dir/common.lua" "$dir/$name.lua"
  fi
}

# RESP for `calls` calls of one path, with the arguments the store sends (a 16-byte payload type,
# a 40-byte body, no fingerprint, no local cache).
commands() {
  local path=$1 sha=$2 prefix=$3
  awk -v path="$path" -v sha="$sha" -v n="$calls" -v prefix="$prefix" 'function bulk(s) { printf "$%d\r\n%s\r\n", length(s), s }
    BEGIN {
      payload = "16:application/json40:{\"ok\":true,\"order_id\":\"o-1\",\"amount\":42}0:"
      channel = prefix ":evt:Bench.store:" sprintf("%064d", 0)
      for (i = 0; i < n; ++i) {
        key = prefix ":rec:Bench.store:" sprintf("%054d", i); token = sprintf("%032d", i)
        if (path == "complete") {
          printf "*10\r\n"; bulk("EVALSHA"); bulk(sha); bulk("1"); bulk(key); bulk(token); bulk("3600000")
          bulk("3600000"); bulk(payload); bulk(channel); bulk("PUBLISH")
        } else {
          printf "*10\r\n"; bulk("EVALSHA"); bulk(sha); bulk("1"); bulk(key); bulk(token); bulk("30000")
          bulk("3600000"); bulk("-"); bulk("3660000"); bulk("0")
        }
      }
    }'
}

# Instructions inside EVALSHA while `redis-cli --pipe` sends the file, per call.
measure() {
  local file=$1
  callgrind_control -z "$server_pid" >/dev/null
  local sent
  sent=$(redis-cli -p "$port" --pipe <"$file" | tail -1)
  [[ $sent == *"errors: 0"* ]] || { echo "script_instructions.sh: the server refused calls: $sent" >&2; exit 1; }
  rm -f "$work"/callgrind.*
  callgrind_control -d "$server_pid" >/dev/null
  local total
  total=$(grep -h -E '^(summary|totals):' "$work"/callgrind.* | head -1 | awk '{print $2}')
  echo $((total / calls))
}

echo "# instructions per call inside EVALSHA, $calls calls per path; $(redis-server --version | cut -d' ' -f1-3)"
printf '%-12s %10s %10s %10s %12s\n' revision claim complete replay "first call"
for rev in "${revs[@]}"; do
  acquire=$(redis-cli -p "$port" SCRIPT LOAD "$(script_of "$rev" acquire)")
  complete=$(redis-cli -p "$port" SCRIPT LOAD "$(script_of "$rev" complete)")
  prefix="bench:instructions:$RANDOM$RANDOM"
  commands claim "$acquire" "$prefix" >"$work/claim"
  commands complete "$complete" "$prefix" >"$work/complete"
  claim=$(measure "$work/claim")
  completion=$(measure "$work/complete")
  replay=$(measure "$work/claim")  # the same acquire calls, now on complete records
  printf '%-12s %10d %10d %10d %12d\n' "$rev" "$claim" "$completion" "$replay" $((claim + completion))
  redis-cli -p "$port" FLUSHALL >/dev/null
done
