#!/usr/bin/env bash
# The main job of README.md: tune the bundled Keras ResNet-50 (ONNX) with TVM MetaSchedule
# through tgc, twice, on a fresh cache. The first run searches (its later tasks already
# profit from the records of earlier ones); the second finds the tasks in the cache, measures
# the best cached schedule first and stops at an exact hit, then builds the whole model and
# checks its outputs against an untuned build.
#
# A short budget, so that it finishes in minutes on 2 cores: the 3 most frequent tasks,
# 4 trials each. Set TGC_RUN_ARGS to change it (e.g. "--trials-per-task 64").
#
# The default exact-hit tolerance (5 %): cached latencies are medians of five fresh runs
# taken before write-back, and the exact hit is re-measured the same way, in up to six
# windows until one is within the tolerance (load on these VMs comes in bursts). A hit
# slower in every window still holds when the task's runner-up record, measured in
# alternate windows, slowed down as much (load that slows the workload, not the schedule);
# otherwise that task searches one more round (docs/tuning.md).
set -euo pipefail
cd "$(dirname "$0")/.."
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
# `import tgc` in that venv too (bootstrap.sh installs it; a given $TGC_PYTHON gets it here).
bash python/install.sh "$TGC_PYTHON"
cargo build --release --locked -q -p tgc-cli
work="$(mktemp -d -t tgc-run-XXXXXX)"
args=(models/keras-resnet50.onnx --target llvm --cache "$work/cache.sqlite"
      --max-tasks 3 --trials-per-task 4 --trials-per-round 4 --population 32
      ${TGC_RUN_ARGS:-})
./target/release/tgc tasks models/keras-resnet50.onnx
echo "== first run (empty cache)"
./target/release/tgc tune "${args[@]}" --no-measure --work-dir "$work/first" --report "$work/first.json"
echo "== second run (same cache)"
./target/release/tgc tune "${args[@]}" --work-dir "$work/second" --report "$work/second.json"
echo "reports: $work/first.json $work/second.json"
