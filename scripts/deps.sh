#!/usr/bin/env bash
# Installs what tgc's tests need beyond the Rust toolchain and python3, idempotently:
# LLVM's FileCheck and not (Debian package llvm-19-tools) for the lit tests, and a TrueType
# font (fonts-dejavu-core) that `tgc similarity --plot` lays its text out with.
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
