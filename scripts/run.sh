#!/usr/bin/env bash
# The main job: install what is missing, build, and run the sample on the embedded memory store.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${IDEM_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
sample=idem_sample_orders
sample_path=samples/idem_sample_orders
if [ -f samples/annotated/CMakeLists.txt ] && grep -q idem_sample_annotated samples/annotated/CMakeLists.txt; then
  sample=idem_sample_annotated
  sample_path=samples/annotated/idem_sample_annotated
fi
cmake --build "$build" --target "$sample" -j "$(nproc)"
"$build/$sample_path"
