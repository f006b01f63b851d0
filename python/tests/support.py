"""Shared by the package tests: the bundled models, the tgc CLI to compare with."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("TGC_CLI", str(ROOT / "target" / "debug" / "tgc"))
# The project's shared model folder, where a checkout has one beside it.
SHARED_MODELS = Path(os.environ.get("TGC_SHARED_MODELS", ROOT.parent / "shared" / "models"))


def bundled_models() -> list[Path]:
    """Every bundled ONNX model: models/, the test fixtures, and the shared folder (when
    present), each distinct file once."""
    found, seen = [], set()
    dirs = [ROOT / "models", ROOT / "tests" / "fixtures" / "onnx", SHARED_MODELS]
    for d in dirs:
        for p in sorted(d.glob("*.onnx")) if d.is_dir() else []:
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                found.append(p)
    return found


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=check)


def cli_json(*args: str) -> dict:
    return json.loads(cli(*args).stdout)


def task_signature(t: dict) -> tuple:
    """Everything of a task entry but its name (value names differ between frontends)."""
    return tuple(json.dumps(t[k], sort_keys=True) for k in sorted(t) if k != "name")
