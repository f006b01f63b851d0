#!/usr/bin/env bash
# Installs what tgc's tests need beyond the Rust toolchain and python3, idempotently:
# LLVM's FileCheck and not (Debian package llvm-19-tools) for the lit tests, a TrueType
# font (fonts-dejavu-core) that `tgc similarity --plot` lays its text out with, PostgreSQL
# (server programs) for the shared-cache tests, and LLVM/MLIR 22 (libraries, headers, tools
# and the C libraries its static libraries link) for the `mlir` feature, which melior binds.
set -euo pipefail

have_filecheck() {
    [ -n "${LLVM_TOOLS_DIR:-}" ] && [ -x "$LLVM_TOOLS_DIR/FileCheck" ] && return 0
    [ -x /usr/lib/llvm-19/bin/FileCheck ]
}

if ! have_filecheck; then
    echo "deps: installing llvm-19-tools (FileCheck) ..." >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq llvm-19-tools >/dev/null
    have_filecheck || { echo "deps: llvm-19-tools installed but FileCheck not found" >&2; exit 1; }
fi

have_font() {
    [ -n "${TGC_FONT:-}" ] && [ -f "$TGC_FONT" ] && return 0
    find /usr/share/fonts /usr/local/share/fonts -iname '*.ttf' 2>/dev/null | grep -q .
}

if ! have_font; then
    echo "deps: installing fonts-dejavu-core (plot text) ..." >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fonts-dejavu-core >/dev/null
    have_font || { echo "deps: fonts-dejavu-core installed but no .ttf found" >&2; exit 1; }
fi

# PostgreSQL's server programs, for the shared-cache tests: each test starts its own
# throwaway cluster in a temporary directory (tgc_cache::throwaway), so the package's own
# default cluster is not wanted; under root the servers run as the package's `postgres`
# account.
have_postgres() {
    [ -n "${TGC_PG_BIN:-}" ] && [ -x "$TGC_PG_BIN/initdb" ] && return 0
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if ! have_postgres || { [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; }; then
    echo "deps: installing postgresql (server programs for the shared-cache tests) ..." >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
        # No default cluster: nothing is left running that the tests did not start.
        $SUDO mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
    fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
    have_postgres || { echo "deps: postgresql installed but initdb not found" >&2; exit 1; }
fi

# LLVM/MLIR 22 for the `mlir` feature (melior 0.27 binds MLIR 22's C API; .cargo/config.toml
# points mlir-sys and tblgen at /usr/lib/llvm-22): MLIR's libraries and headers, mlir-opt
# (the tests check that what `--emit mlir` writes parses), LLVM's headers and libclang for
# the bindings' generator, Polly and the compression/XML/Z3 libraries LLVM's static libraries
# link against.
MLIR_PACKAGES=(libmlir-22-dev mlir-22-tools llvm-22-dev libclang-22-dev libpolly-22-dev
               libzstd-dev libz3-dev libxml2-dev zlib1g-dev)
have_mlir() {
    [ -n "${MLIR_SYS_220_PREFIX:-}" ] && [ -f "$MLIR_SYS_220_PREFIX/include/mlir-c/IR.h" ] && return 0
    [ -f /usr/lib/llvm-22/include/mlir-c/IR.h ] && [ -x /usr/lib/llvm-22/bin/mlir-opt ] \
        && [ -f /usr/lib/llvm-22/lib/libPolly.a ] && dpkg -s libzstd-dev libz3-dev >/dev/null 2>&1
}

if ! have_mlir; then
    echo "deps: installing LLVM/MLIR 22 (${MLIR_PACKAGES[*]}) ..." >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${MLIR_PACKAGES[@]}" >/dev/null
    have_mlir || { echo "deps: LLVM/MLIR 22 installed but mlir-c/IR.h or mlir-opt not found" >&2; exit 1; }
fi
