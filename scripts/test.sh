#!/usr/bin/env bash
# The test command of README.md: installs what the tests need (LLVM FileCheck; the pinned
# TVM 0.27 venv), then runs every test: the Rust workspace (unit, property, snapshot, lit,
# TVM cross-checks, real tuning) and the Python worker's tests against real TVM.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
bash tvm/python/run_tests.sh "$TGC_PYTHON"
cargo test --workspace --locked --no-fail-fast "$@"
