#!/usr/bin/env bash
# bench/annotator/run.sh — idem-annotate against `clang++-19 -fsyntax-only` on the same header,
# in the same run, alternating, N times each; prints the medians and the ratios.
#
#   bench/annotator/run.sh <idem-annotate> <idem include dir> [runs=9]
#
# A benchmark, not a test: no threshold is enforced here. docs/bench-annotator.md records results.
set -euo pipefail
tool=$1
include=$2
runs=${3:-9}
here=$(cd "$(dirname "$0")" && pwd)
header="$here/bench_header.hpp"
clang=${CLANG:-clang++-19}
flags=(-std=c++20 -I"$include")

ms() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -a base=() full=() nokey=()
for _ in $(seq "$runs"); do
  t0=$(ms); "$clang" -fsyntax-only -Wno-unknown-attributes "${flags[@]}" "$header"; t1=$(ms)
  "$tool" "$header" -- "${flags[@]}"; t2=$(ms)
  "$tool" --no-key-check "$header" -- "${flags[@]}"; t3=$(ms)
  base+=($(( (t1 - t0) / 1000000 ))); full+=($(( (t2 - t1) / 1000000 ))); nokey+=($(( (t3 - t2) / 1000000 )))
done
b=$(printf '%s\n' "${base[@]}" | median)
f=$(printf '%s\n' "${full[@]}" | median)
n=$(printf '%s\n' "${nokey[@]}" | median)
echo "runs: $runs, header: bench/annotator/bench_header.hpp (12 standard headers + nlohmann/json, 5 annotations)"
echo "clang++-19 -fsyntax-only           median ${b} ms   (all: ${base[*]})"
echo "idem-annotate (key checks on)      median ${f} ms   (all: ${full[*]})"
echo "idem-annotate --no-key-check       median ${n} ms   (all: ${nokey[*]})"
awk -v b="$b" -v f="$f" -v n="$n" 'BEGIN { printf "ratio, key checks on:  %.2fx   (target <= 1.6x)\nratio, key checks off: %.2fx\n", f / b, n / b }'
