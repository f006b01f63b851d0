#!/usr/bin/env bash
# Installs what tgc's tests need beyond the Rust toolchain and python3, idempotently:
# LLVM's FileCheck and not (Debian package llvm-19-tools) for the lit tests, and a TrueType
# font (fonts-dejavu-core) that `tgc similarity --plot` lays its text out with, and PostgreSQL
# (server programs) for the shared-cache tests.
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
