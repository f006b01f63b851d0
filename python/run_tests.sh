#!/usr/bin/env bash
# Run the tgc package's tests (stdlib unittest) against the installed package and real TVM.
#
#   python/run_tests.sh PY                        that interpreter (the pinned TVM venv's, with
#                                                 the package python/install.sh installed)
#   python/run_tests.sh PY test_frontend.TestOnnxModels
#
# $TGC_CLI: the tgc binary the CLI-agreement tests compare with (default target/debug/tgc,
# built here when missing).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${1:?usage: python/run_tests.sh PYTHON [tests...]}"
shift
ROOT="$(dirname "$HERE")"
export TGC_CLI="${TGC_CLI:-$ROOT/target/debug/tgc}"
if [[ ! -x "$TGC_CLI" ]]; then
  (cd "$ROOT" && cargo build --locked -q -p tgc-cli)
fi
export TGC_PYTHON="$PY"
cd "$HERE/tests"
# Run outside the source tree's tgc/ folder, so the installed package is what is tested.
if [[ $# -gt 0 ]]; then
  exec "$PY" -m unittest -v "$@"
fi
exec "$PY" -m unittest discover -v -s . -p 'test_*.py'
