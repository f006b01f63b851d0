#!/usr/bin/env bash
# Create, once, the pinned TVM virtual environment that tgc's Python side uses
# (the tgc_tvm_ref reference tool, the tuning worker, and the `tgc` Python package, which
# python/install.sh builds from this clone and installs into it, again only when its
# sources changed).
#
#   tvm/python/bootstrap.sh            -> prints the venv's python as the last stdout line
#   TGC_VENV=/some/dir tvm/python/bootstrap.sh
#
# The venv lives at ${TGC_VENV:-$HOME/.cache/tgc/venv-tvm-0.27.0.post1}. A stamp file
# records the pins it was built with; a second run with the same pins only checks the
# stamp and prints the path. Pins (see shared TVM_NOTES): apache-tvm-ffi 0.1.15.post2,
# which pip would pick by default, segfaults in tvm.ir.save_json with TVM 0.27.
# Set PYTHON to choose the interpreter that creates the venv (default python3).
set -euo pipefail

VENV="${TGC_VENV:-$HOME/.cache/tgc/venv-tvm-0.27.0.post1}"
TVM_VERSION="0.27.0.post1"
TVM_FFI_VERSION="0.1.14.post1"
PINS=(
  "apache-tvm==$TVM_VERSION"
  "apache-tvm-ffi==$TVM_FFI_VERSION"
  xgboost psutil cloudpickle tornado onnx numpy
  # the external anchor of every latency figure: `tgc bench --onnxruntime`
  onnxruntime
  # the real exporters of the MLIR frontend's tests: StableHLO from JAX and Keras 3
  # (scripts/export_stablehlo.py), TOSA from torch-mlir's ONNX importer and its TOSA
  # lowering (scripts/export_tosa.py)
  "jax[cpu]==0.10.2" "keras==3.15.1" "torch-mlir==20261001"
)
STAMP="$VENV/.tgc-bootstrap-stamp"
WANT="tgc-bootstrap/1 ${PINS[*]}"
PY="$VENV/bin/python"
BASE_PYTHON="${PYTHON:-python3}"

die() { echo "bootstrap.sh: $*" >&2; exit 1; }

stamp_ok() { [[ -x "$PY" && -f "$STAMP" && "$(cat "$STAMP" 2>/dev/null)" == "$WANT" ]]; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# `import tgc` works wherever the venv is used: build it from this clone when it changed.
# Not under cargo (a test or `cargo run` finding the worker's python: cargo inside cargo would
# wait on the build directory lock), nor with TGC_NO_PACKAGE=1.
install_package() {
  if [[ -n "${CARGO:-}" || "${TGC_NO_PACKAGE:-}" == 1 ]]; then return 0; fi
  bash "$ROOT/python/install.sh" "$PY" || die "building the tgc Python package failed"
}

if stamp_ok; then
  install_package
  echo "$PY"
  exit 0
fi

mkdir -p "$(dirname "$VENV")" || die "cannot create $(dirname "$VENV")"
# Two bootstraps at once would install into the same venv; serialise them.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$VENV.lock"
  flock 9
  if stamp_ok; then install_package; echo "$PY"; exit 0; fi
fi

LOG="$(dirname "$VENV")/$(basename "$VENV").bootstrap.log"
: >"$LOG" || die "cannot write $LOG"

if [[ ! -x "$PY" ]] || ! "$PY" -c "" >/dev/null 2>&1; then
  command -v "$BASE_PYTHON" >/dev/null 2>&1 || die "$BASE_PYTHON not found on PATH"
  echo "bootstrap.sh: creating $VENV" >&2
  "$BASE_PYTHON" -m venv --clear "$VENV" >>"$LOG" 2>&1 \
    || die "$BASE_PYTHON -m venv $VENV failed (log: $LOG)"
fi

echo "bootstrap.sh: installing ${PINS[*]} (log: $LOG)" >&2
"$PY" -m pip install --disable-pip-version-check "${PINS[@]}" >>"$LOG" 2>&1 \
  || die "pip install into $VENV failed (log: $LOG)"

"$PY" - "$TVM_VERSION" "$TVM_FFI_VERSION" >>"$LOG" 2>&1 <<'PYEOF' || die "import check failed: tvm/tvm_ffi/onnx/onnxruntime/jax/keras/torch_mlir missing or wrong version (log: $LOG)"
import os, sys
os.environ["KERAS_BACKEND"] = "jax"
import jax, keras, onnx, onnxruntime, torch_mlir, tvm, tvm_ffi
want_tvm, want_ffi = sys.argv[1], sys.argv[2]
print("tvm", tvm.__version__, "tvm_ffi", tvm_ffi.__version__, "onnx", onnx.__version__,
      "onnxruntime", onnxruntime.__version__)
if tvm.__version__ != want_tvm or tvm_ffi.__version__ != want_ffi:
    sys.exit(f"expected tvm {want_tvm} and tvm_ffi {want_ffi}")
PYEOF

printf '%s\n' "$WANT" >"$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP" || die "cannot write $STAMP"
install_package
echo "$PY"
