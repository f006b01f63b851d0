#!/usr/bin/env bash
# Regenerates docs/similarity.md's tables and plots: the zoo (exported as ONNX) plus the four
# bundled models, studied by tgc at the three key levels and by stock TVM 0.27 (structural
# hash and task names). TGC=path/to/tgc skips the release build; TGC_PYTHON picks the TVM
# venv's python (else tvm/python/bootstrap.sh creates it). Work files go to
# ${SIMILARITY_DIR:-target/similarity}; TVM's per-model results are cached there.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${TGC:-}" ]]; then
    cargo build --release --locked -q -p tgc-cli
    TGC="${CARGO_TARGET_DIR:-target}/release/tgc"
fi
DIR="${SIMILARITY_DIR:-target/similarity}"
mkdir -p "$DIR/onnx"
MODELS=()
for name in $("$TGC" zoo --list | cut -d' ' -f1); do
    "$TGC" zoo "$name" -o "$DIR/onnx/$name.onnx"
    MODELS+=("$DIR/onnx/$name.onnx")
done
MODELS+=(models/keras-resnet50.onnx models/keras-mobilenetv2.onnx \
         models/keras-densenet121.onnx models/keras-inceptionv3.onnx)
for level in exact structural family; do
    "$TGC" similarity "${MODELS[@]}" --level "$level" --json -o "$DIR/tgc-$level.json" \
        --plot "docs/similarity-$level.svg"
done
PY="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
PYTHONPATH=tvm/python "$PY" tvm/python/similarity_tvm.py --out "$DIR/tvm" "${MODELS[@]}"
cp "$DIR/tvm/tvm-similarity.json" tests/fixtures/tvm/similarity.json   # tests/zoo.rs checks it
python3 scripts/similarity_report.py "$DIR" docs/similarity.md
echo "docs/similarity.md and docs/similarity-{exact,structural,family}.svg regenerated" >&2
