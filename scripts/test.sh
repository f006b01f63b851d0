#!/usr/bin/env bash
# The test command of README.md: installs what the tests need (LLVM FileCheck, PostgreSQL's
# server programs for the shared-cache tests, which start their own throwaway clusters; the pinned
# TVM 0.27 venv with the `tgc` Python package built from this clone), then runs every test:
# the Python worker's tests against real TVM, the Python package's tests, and the Rust
# workspace (unit, property, snapshot, lit, TVM cross-checks, real tuning), with the `mlir`
# feature (the MLIR frontend against LLVM/MLIR 22, which deps.sh installs). Ends with one
# summary line over all three.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
# bootstrap.sh installs the package; a $TGC_PYTHON given from outside gets it here (a no-op
# when it is up to date).
bash python/install.sh "$TGC_PYTHON"
log="$(mktemp -t tgc-test-XXXXXX)"
trap 'rm -f "$log"' EXIT
status=0
bash tvm/python/run_tests.sh "$TGC_PYTHON" 2>&1 | tee "$log" || status=1
py_ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -n 1)
py_failed=$(sed -n 's/^FAILED (\(failures\|errors\)=\([0-9]*\).*/\2/p' "$log" | tail -n 1)
: > "$log"
# The package's tests compare with the CLI: build it first (cargo test needs it anyway).
cargo build --locked -q -p tgc-cli --features mlir
TGC_CLI="$PWD/target/debug/tgc" bash python/run_tests.sh "$TGC_PYTHON" 2>&1 | tee "$log" || status=1
pkg_ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -n 1)
# unittest's last line: FAILED (failures=F, errors=E, skipped=S); count failures and errors.
pkg_failed=$(sed -n 's/^FAILED (\(.*\))$/\1/p' "$log" | tail -n 1 | awk -F', *' '{
  n = 0; for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "failures" || kv[1] == "errors") n += kv[2] }
  print n }')
: > "$log"
cargo test --workspace --locked --no-fail-fast --features tgc-cli/mlir "$@" 2>&1 | tee "$log" || status=1
read -r rs_passed rs_failed < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$log")
passed=$(( rs_passed + ${py_ran:-0} - ${py_failed:-0} + ${pkg_ran:-0} - ${pkg_failed:-0} ))
failed=$(( rs_failed + ${py_failed:-0} + ${pkg_failed:-0} ))
echo "tests: $passed passed, $failed failed"
exit "$status"
