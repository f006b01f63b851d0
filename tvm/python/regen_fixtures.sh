#!/usr/bin/env bash
# Regenerate tests/fixtures/tvm/<model>.json from models/*.onnx with TVM 0.27.
#
#   tvm/python/regen_fixtures.sh            write the fixtures
#   tvm/python/regen_fixtures.sh --check    regenerate into a temp dir and diff against them
#
# Python: $TGC_PYTHON if set, else the venv from tvm/python/bootstrap.sh (created on first use).
# Fails when a model's task count differs from the one models/README.md states.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CHECK=0
[[ "${1:-}" == "--check" ]] && CHECK=1

PY="${TGC_PYTHON:-$("$HERE/bootstrap.sh" | tail -n 1)}"
OUT="$ROOT/tests/fixtures/tvm"
if (( CHECK )); then
  OUT="$(mktemp -d)"
  trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"

# model  input-shape  tasks-per-models/README.md
MODELS=(
  "keras-resnet50    1x224x224x3  32"
  "keras-resnet101   1x224x224x3  32"
  "keras-mobilenetv2 1x224x224x3  38"
  "keras-densenet121 1x224x224x3  192"
  "keras-inceptionv3 1x299x299x3  64"
)

status=0
for row in "${MODELS[@]}"; do
  read -r name shape want <<<"$row"
  start=$(date +%s%N)
  PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m tgc_tvm_ref \
    "$ROOT/models/$name.onnx" --shape "input=$shape" --json "$OUT/$name.json"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  got=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["num_tasks"])' "$OUT/$name.json")
  printf '%-18s %4s tasks (expected %s)  %d.%03d s\n' "$name" "$got" "$want" $((ms / 1000)) $((ms % 1000))
  if [[ "$got" != "$want" ]]; then
    echo "regen_fixtures.sh: $name: $got tasks, models/README.md says $want" >&2
    status=1
  fi
  if (( CHECK )) && ! diff -q "$ROOT/tests/fixtures/tvm/$name.json" "$OUT/$name.json" >/dev/null; then
    echo "regen_fixtures.sh: $name: output differs from tests/fixtures/tvm/$name.json" >&2
    status=1
  fi
done
exit $status
