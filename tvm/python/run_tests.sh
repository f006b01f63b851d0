#!/usr/bin/env bash
# Run the tgc_worker tests (stdlib unittest, no pytest needed).
#
#   tvm/python/run_tests.sh                      python from bootstrap.sh (creates the venv once)
#   tvm/python/run_tests.sh /path/to/python      that interpreter (the pinned TVM venv's)
#   tvm/python/run_tests.sh PY tests.test_protocol tests.test_replay.TestReplay.test_exact
#
# The worker's stderr goes to $TGC_WORKER_LOG when set (default: discarded).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ $# -gt 0 && -x "$1" && ! -d "$1" ]]; then
  PY="$1"
  shift
else
  PY="$("$HERE/bootstrap.sh" | tail -n 1)"
fi

cd "$HERE"
export TGC_PYTHON="$PY"
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" tests/run.py "$@"
