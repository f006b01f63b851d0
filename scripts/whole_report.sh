#!/usr/bin/env bash
# Regenerates the whole-model table of docs/tuning.md: scripts/bench_whole.py on zoo
# ResNet-50 (A, from an empty cache), then ResNet-152 (the same tasks, other occurrences)
# and Wide-ResNet-50-2 (the same loop nests, other extents) each from a copy of A's cache;
# every task, one run budget of TRIALS for tgc (in PIECES runs, the model built and timed
# after each) and for stock TVM's tune_relax; onnxruntime and TVM's defaults on the same
# files. The machine must be otherwise idle: with the default 448 trials it takes hours on
# 2 cores, most of it stock TVM (7-8 s per trial here).
#
#   bash scripts/whole_report.sh              # writes the table between the markers
#   TRIALS=64 PIECES=2 SEEDED=resnet152 bash scripts/whole_report.sh   # a shorter run
#
# TGC=path/to/tgc skips the release build; TGC_PYTHON picks the TVM venv's python (else
# tvm/python/bootstrap.sh creates it). Work files go to ${WHOLE_DIR:-target/whole-report};
# an existing directory is reused (--reuse: finished runs are not run again), so an
# interrupted run goes on where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${TGC:-}" ]]; then
    cargo build --release --locked -q -p tgc-cli
    TGC="${CARGO_TARGET_DIR:-target}/release/tgc"
fi
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
DIR="${WHOLE_DIR:-target/whole-report}"
mkdir -p "$DIR/onnx"
seeded=()
for name in resnet50 ${SEEDED-resnet152 wide_resnet50_2}; do
    "$TGC" zoo "$name" -o "$DIR/onnx/$name.onnx"
    [[ "$name" == resnet50 ]] || seeded+=(--seeded "$DIR/onnx/$name.onnx")
done
python3 scripts/bench_whole.py --tgc "$TGC" --model "$DIR/onnx/resnet50.onnx" "${seeded[@]}" \
    --trials "${TRIALS:-448}" --pieces "${PIECES:-4}" --per-round 8 --population 128 \
    --reuse --out "$DIR/run" --table "$DIR/table.md" --plot docs/whole-models.svg
python3 scripts/replace_section.py "$DIR/table.md" docs/tuning.md whole
echo "docs/tuning.md: whole-model table and docs/whole-models.svg regenerated (reports in $DIR/run)" >&2
