#!/usr/bin/env bash
# Regenerates the results table of docs/tuning.md: the slice protocol of
# scripts/bench_tune.py (zoo ResNet-50 cold, then ResNet-152 (exact pair) and
# Wide-ResNet-50-2 (structural pair) seeded from its cache, each against stock TVM's
# tune_relax; the 4 most frequent tasks of each model, 16 trials per task, rounds of 8,
# population 128; tgc's arms twice). The machine must be otherwise idle: it takes about an
# hour on 2 cores, most of it stock TVM.
#
#   bash scripts/tuning_report.sh            # writes the table between the markers
#
# TGC=path/to/tgc skips the release build; TGC_PYTHON picks the TVM venv's python (else
# tvm/python/bootstrap.sh creates it). Work files go to ${TUNING_DIR:-target/tuning-report};
# an existing directory is reused (--reuse: finished arms are not run again), so an
# interrupted run goes on where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${TGC:-}" ]]; then
    cargo build --release --locked -q -p tgc-cli
    TGC="${CARGO_TARGET_DIR:-target}/release/tgc"
fi
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
DIR="${TUNING_DIR:-target/tuning-report}"
mkdir -p "$DIR/onnx"
for name in resnet50 resnet152 wide_resnet50_2; do
    "$TGC" zoo "$name" -o "$DIR/onnx/$name.onnx"
done
python3 scripts/bench_tune.py --tgc "$TGC" --a "$DIR/onnx/resnet50.onnx" \
    --b "$DIR/onnx/resnet152.onnx" --b "$DIR/onnx/wide_resnet50_2.onnx" \
    --trials 16 --per-round 8 --population 128 --max-tasks 4 \
    --stock-args="--population 128" --stock-a --no-cold --repeat 2 --reuse \
    --out "$DIR/run" --table "$DIR/table.md"
python3 scripts/replace_section.py "$DIR/table.md" docs/tuning.md results
echo "docs/tuning.md: results table regenerated (reports in $DIR/run)" >&2
