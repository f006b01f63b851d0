#!/usr/bin/env bash
# The test command of README.md: installs what the tests need (LLVM FileCheck; the pinned
# TVM 0.27 venv), then runs every test: the Python worker's tests against real TVM, and the
# Rust workspace (unit, property, snapshot, lit, TVM cross-checks, real tuning). Ends with
# one summary line over both.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
TGC_PYTHON="${TGC_PYTHON:-$(bash tvm/python/bootstrap.sh | tail -n 1)}"
export TGC_PYTHON
log="$(mktemp -t tgc-test-XXXXXX)"
trap 'rm -f "$log"' EXIT
status=0
bash tvm/python/run_tests.sh "$TGC_PYTHON" 2>&1 | tee "$log" || status=1
py_ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -n 1)
py_failed=$(sed -n 's/^FAILED (\(failures\|errors\)=\([0-9]*\).*/\2/p' "$log" | tail -n 1)
: > "$log"
cargo test --workspace --locked --no-fail-fast "$@" 2>&1 | tee "$log" || status=1
read -r rs_passed rs_failed < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$log")
passed=$(( rs_passed + ${py_ran:-0} - ${py_failed:-0} ))
failed=$(( rs_failed + ${py_failed:-0} ))
echo "tests: $passed passed, $failed failed"
exit "$status"
