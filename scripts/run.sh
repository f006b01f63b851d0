#!/usr/bin/env bash
# The main job of README.md: tune the whole bundled Keras ResNet-50 (ONNX) with TVM
# MetaSchedule through tgc into an empty cache, tune it again from that cache, and deploy
# it: a TVM library built from the cache, timed beside TVM's default schedules and
# onnxruntime on the same file, inputs and threads. The convolutions run in NHWC with HWIO
# kernels (`--layout nhwc`, the convert-layout pass: 27 tasks, the exporter's transpose
# gone), whose schedules are much faster on CPUs than the ONNX file's NCHW.
#
# A short run budget, so that it finishes in minutes on 2 cores: 64 trials for the whole
# model, spread over its tasks by their weight (occurrences times latency). The first run
# reaches the heaviest tasks; the tasks it does not reach are built from what it found for
# their neighbours (a zero-trial transfer), not TVM's defaults. The second run finds the
# first run's tasks in the cache: each one's best record is re-measured, and within 5 % of
# its cached latency (docs/tuning.md has how this VM's noise is handled) it is an exact
# hit of one trial, so the budget goes on to the tasks the first run did not reach; what
# is left then goes a round at a time to the tasks with the largest expected gain.
# Set TGC_RUN_ARGS to change the budget (e.g. "--trials 448").
set -euo pipefail
cd "$(dirname "$0")/.."
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
# `import tgc` in that venv too (bootstrap.sh installs it; a given $TGC_PYTHON gets it here).
bash python/install.sh "$TGC_PYTHON"
cargo build --release --locked -q -p tgc-cli
work="$(mktemp -d -t tgc-run-XXXXXX)"
model=models/keras-resnet50.onnx
args=("$model" --target llvm --cache "$work/cache.sqlite"
      --trials 64 --trials-per-round 8 --population 64 --layout nhwc ${TGC_RUN_ARGS:-})
./target/release/tgc tasks "$model" --layout nhwc
echo "== first run (empty cache)"
./target/release/tgc tune "${args[@]}" --no-measure --work-dir "$work/first" --report "$work/first.json"
echo "== second run (same cache, same budget)"
./target/release/tgc tune "${args[@]}" --no-measure --work-dir "$work/second" --report "$work/second.json"
echo "== the deployable library from the cache, beside TVM's defaults and onnxruntime"
./target/release/tgc build "$model" --layout nhwc --cache "$work/cache.sqlite" -o "$work/model.so" \
  --check --bench --onnxruntime --work-dir "$work/build" --report "$work/build.json"
echo "== what the cache saved"
python3 - "$work/first.json" "$work/second.json" <<'EOF'
import json, sys

first, second = (json.load(open(p)) for p in sys.argv[1:3])
def turn(t, key):
    # a task's trials or seconds at its turn, before the second turns the budget left
    return t[key] - ((t.get("second_turns") or {}).get(key) or 0)

spent = {t["name"]: t for t in first["tasks"]}
hits = [t for t in second["tasks"] if t["stopped"] == "exact_hit" and t["name"] in spent]
before = sum(turn(spent[t["name"]], "wall_s") for t in hits)
after = sum(turn(t, "wall_s") for t in hits)
searched = [t for t in second["tasks"] if t["stopped"] != "exact_hit"]
again = [t for t in second["tasks"] if t.get("second_turns")]
print(f"first run: {len(first['tasks'])} tasks tuned in {first['totals']['tuning_wall_s']:.0f} s")
print(f"second run: {len(hits)} of them exact hits in {after:.0f} s (the first run's search of them: "
      f"{before:.0f} s, {before / max(after, 1e-9):.1f}x), {len(searched)} tasks searched, then "
      f"{sum(t['second_turns']['trials'] for t in again)} trials of what the budget left to the "
      f"{len(again)} tasks with the largest expected gain "
      f"({second['totals']['tuning_wall_s']:.0f} s in all)")
EOF
echo "reports: $work/first.json $work/second.json $work/build.json"
