#!/usr/bin/env bash
# The test command of README.md: installs what the tests need (LLVM FileCheck; the pinned
# TVM 0.27 venv for the tests that compare against real TVM), then runs every test of the
# workspace: unit, property, snapshot, lit, and TVM cross-check tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
cargo test --workspace --locked "$@"
