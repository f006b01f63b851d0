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


def onnx_conv_clip(path: Path, c: int = 8, hw: int = 16) -> None:
    """Conv then Clip(0, 6) as an ONNX exporter writes ReLU6 (opset 17: bounds as inputs)."""
    import onnx
    from onnx import TensorProto, helper

    def vi(n, s):
        return helper.make_tensor_value_info(n, TensorProto.FLOAT, s)

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    inits = [helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]),
             helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])]
    g = helper.make_graph(nodes, "conv_clip", [vi("x", [1, c, hw, hw]), vi("w", [c, c, 3, 3])],
                          [vi("y", [1, c, hw, hw])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def relax_conv_clip(c: int = 8, hw: int = 16):
    """The same layers as Relax writes them (R.clip, as from_exported_program and nn give it)."""
    from tvm import relax
    from tvm.script import relax as R

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, c, hw, hw), "float32"))
    w = relax.Var("w", relax.TensorType((c, c, 3, 3), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(R.clip(R.nn.conv2d(x, w, padding=[1, 1, 1, 1]), 0, 6))
        bb.emit_func_output(out)
    return bb.get()

