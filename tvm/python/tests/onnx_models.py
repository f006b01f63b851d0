"""Tiny ONNX models for the tests, written with the venv's `onnx`, their weights graph
inputs (as the bundled models have them). Imported by the Python tests; the Rust tests run
it as a script:

    python onnx_models.py conv PATH C          conv3x3 + relu on 1xCx16x16 (one task)
    python onnx_models.py blocks PATH HW C     conv3x3 + relu, conv3x3 + add + relu on 1xCxHWxHW
"""

from __future__ import annotations

import sys


def _value(name: str, shape: list):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(nodes: list, name: str, inputs: list, outputs: list, path: str) -> None:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, name, inputs, outputs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def conv(path: str, c: int, hw: int = 16) -> None:
    from onnx import helper

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    _save(nodes, "conv", [_value("x", [1, c, hw, hw]), _value("w", [c, c, 3, 3])], [_value("y", [1, c, hw, hw])], path)


def blocks(path: str, hw: int, c: int) -> None:
    """Two tasks: a residual block's convolutions, the input added back after the second."""
    from onnx import helper

    pads = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], **pads),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], **pads),
        helper.make_node("Add", ["c2", "x"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    inputs = [_value("x", [1, c, hw, hw]), _value("w1", [c, c, 3, 3]), _value("w2", [c, c, 3, 3])]
    _save(nodes, "blocks", inputs, [_value("y", [1, c, hw, hw])], path)


if __name__ == "__main__":
    kind, path, *dims = sys.argv[1:]
    {"conv": conv, "blocks": blocks}[kind](path, *map(int, dims))
