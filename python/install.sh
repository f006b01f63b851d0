#!/usr/bin/env bash
# Build the `tgc` Python package from this clone (maturin, an abi3 wheel, cargo's dev profile
# in the workspace target dir, so `cargo test` reuses what it compiled) and install it into
# the environment of the given python; skipped when the installed package was built from
# the same sources by the same toolchain (a hash of them, stamped in that environment).
#
#   python/install.sh /path/to/venv/bin/python      (bootstrap.sh runs it with the TVM venv)
#   TGC_PACKAGE_FORCE=1 python/install.sh PY        rebuild even when the stamp matches
#
# Build output goes to stderr; nothing is printed on stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${1:?usage: python/install.sh PYTHON}"
MATURIN_VERSION="1.16.0"
# The crates the extension links (python/Cargo.toml) and the build's inputs.
SOURCES=(Cargo.toml Cargo.lock ir canonicalize cache passes pipelines tvm/Cargo.toml tvm/src tune zoo python)

die() { echo "python/install.sh: $*" >&2; exit 1; }

prefix="$("$PY" -c 'import sys; print(sys.prefix)')" || die "$PY does not run"
STAMP="$prefix/.tgc-package-stamp"

source_hash() {
    cd "$ROOT"
    {
        echo "root $ROOT"
        echo "maturin $MATURIN_VERSION"
        rustc -V
        if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
            git ls-files -co --exclude-standard -- "${SOURCES[@]}"
        else
            find "${SOURCES[@]}" -type f -not -path '*/__pycache__/*'
        fi | grep -v -e '/tests/' -e '__pycache__' | LC_ALL=C sort | while read -r f; do
            [[ -f "$f" ]] && sha256sum "$f"
        done
    } | sha256sum | cut -d' ' -f1
}

want="$(source_hash)"
up_to_date() {
    [[ -z "${TGC_PACKAGE_FORCE:-}" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] \
        && "$PY" -c 'import tgc._native' >/dev/null 2>&1
}
up_to_date && exit 0
# Two installs at once would build into one target dir and install over each other.
if command -v flock >/dev/null 2>&1; then
    exec 8>"$prefix/.tgc-package.lock"
    flock 8
    up_to_date && exit 0
fi

if ! "$PY" -m maturin --version 2>/dev/null | grep -q "maturin $MATURIN_VERSION\$"; then
    echo "python/install.sh: installing maturin $MATURIN_VERSION into $prefix" >&2
    "$PY" -m pip install --disable-pip-version-check -q "maturin==$MATURIN_VERSION" >&2 \
        || die "pip install maturin==$MATURIN_VERSION failed"
fi

out="$ROOT/target/tgc-wheel"
rm -rf "$out"
echo "python/install.sh: building the tgc package (maturin, dev profile)" >&2
start=$SECONDS
( cd "$ROOT/python" && "$PY" -m maturin build --profile dev --interpreter "$PY" --out "$out" ) >&2 \
    || die "maturin build failed"
wheel="$(ls "$out"/tgc-*.whl 2>/dev/null | head -n 1)"
[[ -n "$wheel" ]] || die "maturin wrote no wheel to $out"
"$PY" -m pip install --disable-pip-version-check -q --no-deps --force-reinstall "$wheel" >&2 \
    || die "pip install $wheel failed"
"$PY" -c 'import tgc._native' || die "the installed package does not import"
printf '%s\n' "$want" >"$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP"
echo "python/install.sh: installed $(basename "$wheel") in $((SECONDS - start)) s" >&2
