#!/usr/bin/env bash
# The test command of README.md: installs what the tests need, then runs every test of the
# workspace (unit, property, snapshot and lit tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cargo test --workspace --locked "$@"
