#!/usr/bin/env bash
# Regenerates the whole-model table of docs/tuning.md: scripts/bench_whole.py on the bundled
# Keras ResNet-50 (A, from an empty cache), then the bundled Keras ResNet-101 (exactly A's
# tasks, other occurrences) from a copy of A's cache; every task, one run budget of TRIALS
# for tgc (in PIECES runs, the model built and timed after each; convolutions in NHWC,
# `--layout nhwc`) and for stock TVM's tune_relax (TVM's own import of the same ONNX file);
# onnxruntime and TVM's defaults on the same files. The machine must be otherwise idle: with
# the default 320 trials it takes over an hour on 2 cores, most of it stock TVM.
#
#   bash scripts/whole_report.sh              # writes the table between the markers
#   TRIALS=64 PIECES=2 bash scripts/whole_report.sh   # a shorter run
#   SEEDED="models/keras-resnet101.onnx OTHER.onnx" bash scripts/whole_report.sh
#   LAYOUT=model bash scripts/whole_report.sh   # tgc in the ONNX file's own layout (NCHW)
#   PACK_WEIGHTS=1 bash scripts/whole_report.sh # tgc with --pack-weights
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
mkdir -p "$DIR"
seeded=()
for model in ${SEEDED-models/keras-resnet101.onnx}; do
    seeded+=(--seeded "$model")
done
python3 scripts/bench_whole.py --tgc "$TGC" --model models/keras-resnet50.onnx "${seeded[@]}" \
    --trials "${TRIALS:-320}" --pieces "${PIECES:-4}" --per-round 8 --population 128 \
    --layout "${LAYOUT:-nhwc}" ${PACK_WEIGHTS:+--pack-weights} --reuse --out "$DIR/run" --table "$DIR/table.md" \
    --plot docs/whole-models.svg
python3 scripts/replace_section.py "$DIR/table.md" docs/tuning.md whole
echo "docs/tuning.md: whole-model table and docs/whole-models.svg regenerated (reports in $DIR/run)" >&2
