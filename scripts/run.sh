#!/usr/bin/env bash
# The main job of README.md: tune the whole bundled Keras ResNet-50 (ONNX) with TVM
# MetaSchedule through tgc into an empty cache and deploy it (a TVM library built from the
# cache, timed beside TVM's default schedules and onnxruntime on the same file, inputs and
# threads); then tune the bundled Keras ResNet-101, seeded from that cache, deploy it, and
# say what the cache saved. The convolutions run in NHWC with HWIO kernels (`--layout
# nhwc`, the convert-layout pass: 27 tasks, the exporter's transpose gone), whose schedules
# are much faster on CPUs than the ONNX file's NCHW.
#
# A short run budget, so that it finishes in minutes on 2 cores: 64 trials per model, spread
# over its tasks by their weight (occurrences times latency). The first run reaches the
# heaviest tasks; the tasks it does not reach are built from what it found for their
# neighbours (a zero-trial transfer), not TVM's defaults. ResNet-101 has exactly ResNet-50's
# tasks (more often), so the second run finds the first run's tasks in the cache: each one's
# best record is re-measured, and within 5 % of its cached latency (docs/tuning.md has how
# this VM's noise is handled) it is an exact hit of one trial, so the budget goes on to the
# tasks the first run did not reach; what is left then goes a round at a time to the tasks
# with the largest expected gain.
# Set TGC_RUN_ARGS to change the budget (e.g. "--trials 448").
set -euo pipefail
cd "$(dirname "$0")/.."
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
# `import tgc` in that venv too (bootstrap.sh installs it; a given $TGC_PYTHON gets it here).
bash python/install.sh "$TGC_PYTHON"
cargo build --release --locked -q -p tgc-cli
work="$(mktemp -d -t tgc-run-XXXXXX)"
first=models/keras-resnet50.onnx
second=models/keras-resnet101.onnx
args=(--target llvm --cache "$work/cache.sqlite"
      --trials 64 --trials-per-round 8 --population 64 --layout nhwc ${TGC_RUN_ARGS:-})
./target/release/tgc tasks "$first" --layout nhwc
echo "== $first: tuned into an empty cache"
./target/release/tgc tune "$first" "${args[@]}" --no-measure --work-dir "$work/first" --report "$work/first.json"
echo "== $first: the deployable library from the cache, beside TVM's defaults and onnxruntime"
./target/release/tgc build "$first" --layout nhwc --cache "$work/cache.sqlite" -o "$work/first.so" \
  --check --bench --onnxruntime --work-dir "$work/first-build" --report "$work/first-build.json"
echo "== $second: tuned from that cache"
./target/release/tgc tune "$second" "${args[@]}" --no-measure --work-dir "$work/second" --report "$work/second.json"
echo "== $second: the deployable library from the cache, beside onnxruntime"
./target/release/tgc build "$second" --layout nhwc --cache "$work/cache.sqlite" -o "$work/second.so" \
  --work-dir "$work/second-build" --report "$work/second-build.json"
./target/release/tgc bench "$work/second.so" --onnxruntime "$second" --work-dir "$work/second-build"
echo "== what the cache saved"
python3 - "$work/first.json" "$work/second.json" "$first" "$second" <<'EOF'
import json, os, sys

first, second = (json.load(open(p)) for p in sys.argv[1:3])
names = [os.path.basename(p).removesuffix(".onnx") for p in sys.argv[3:5]]
def turn(t, key):
    # a task's trials or seconds at its turn, before the second turns the budget left
    return t[key] - ((t.get("second_turns") or {}).get(key) or 0)

def tasks(n):
    return f"{n} task" + ("" if n == 1 else "s")

# the same task in both models is the same TVM workload
spent = {t["workload_hash"]: t for t in first["tasks"]}
hits = [t for t in second["tasks"] if t["stopped"] == "exact_hit" and t["workload_hash"] in spent]
before = sum(turn(spent[t["workload_hash"]], "wall_s") for t in hits)
after = sum(turn(t, "wall_s") for t in hits)
searched = [t for t in second["tasks"] if t["stopped"] != "exact_hit"]
again = [t for t in second["tasks"] if t.get("second_turns")]
print(f"{names[0]}: {len(first['tasks'])} tasks tuned in {first['totals']['tuning_wall_s']:.0f} s "
      f"({first['totals']['trials']} trials)")
print(f"{names[1]}: {len(hits)} of its tasks were exact hits in {after:.0f} s, where searching them "
      f"took {names[0]}'s run {before:.0f} s: {before - after:.0f} s saved ({before / max(after, 1e-9):.1f}x "
      f"less); then {tasks(len(searched))} searched and {sum(t['second_turns']['trials'] for t in again)} "
      f"trials of what the budget left to the {tasks(len(again))} with the largest expected gain "
      f"({second['totals']['tuning_wall_s']:.0f} s, {second['totals']['trials']} trials in all)")
EOF
echo "reports: $work/first.json $work/first-build.json $work/second.json $work/second-build.json"
