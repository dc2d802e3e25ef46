#!/usr/bin/env bash
# Lists what a Ninja build spent its time on, from the build's .ninja_log: the slowest steps
# (compiles, precompiled headers, links, generator runs), then the CPU time by kind of step and by
# folder of the source tree.
#   scripts/slowest-objects.sh BUILD_DIR [N]     N rows of slowest steps (default 20)
# A step built more than once (an incremental rebuild) counts as its last run. Times are each
# step's own wall time: with -j 2 two of them run at once, so the sum is CPU time, not wall time.
set -euo pipefail
dir=${1:?usage: scripts/slowest-objects.sh BUILD_DIR [N]}
rows=${2:-20}
log="$dir/.ninja_log"
[ -f "$log" ] || { echo "slowest-objects: no $log (is $dir a Ninja build that ran?)" >&2; exit 1; }

awk -F'\t' -v rows="$rows" '
  # v5 lines: start_ms end_ms mtime output command_hash. The last line of an output is its latest
  # run; the outputs of one command (a generator writes three files) share its times and hash.
  NR > 1 && NF >= 5 { run[$4] = $1 FS $2 FS $5 }
  function rank(o) { return (o ~ /^\//) * 2 + (o ~ /\.cmake$/) }
  function kind(o) {
    if (o ~ /\.(gch|pch)$/) return "precompiled headers"
    if (o ~ /\.o$/) return "compiles"
    if (o ~ /idem_generated|\.idem\./) return "generator runs"
    if (o ~ /\.(a|so)(\.[0-9.]+)?$/ || o ~ /\/[^.\/]+$/ || o !~ /\//) return "links"
    return "other"
  }
  function folder(o,   f) {
    f = o
    sub(/\/CMakeFiles\/.*/, "", f)
    if (f == o) { sub(/\/[^\/]*$/, "", f); if (f == o) f = "." }
    split(f, part, "/")
    return part[1] (part[2] != "" ? "/" part[2] : "")
  }
  END {
    # A step is named by its main output: a relative path before an absolute one, the program
    # before the test list Catch writes beside it.
    for (o in run) if (!(run[o] in name) || rank(o) < rank(name[run[o]])) name[run[o]] = o
    for (r in name) { split(r, t, FS); ms[name[r]] = t[2] - t[1] }
    n = 0
    for (o in ms) { n++; total += ms[o]; by_kind[kind(o)] += ms[o]; count_kind[kind(o)]++
                    if (kind(o) == "compiles" || kind(o) == "precompiled headers") by_folder[folder(o)] += ms[o] }
    printf "%d steps, %.0f s of step time in all\n\n", n, total / 1000
    printf "slowest %d steps:\n", rows
    cmd = "sort -rn | head -n " rows
    for (o in ms) printf "%8.1f s  %s\n", ms[o] / 1000, o | cmd
    close(cmd)
    printf "\nby kind:\n"
    cmd = "sort -rn"
    for (k in by_kind) printf "%8.1f s  %5d  %s\n", by_kind[k] / 1000, count_kind[k], k | cmd
    close(cmd)
    printf "\ncompiling by folder:\n"
    for (f in by_folder) printf "%8.1f s  %s\n", by_folder[f] / 1000, f | cmd
    close(cmd)
  }' "$log"
