"""Tiny ONNX models for the tests, written with the venv's `onnx`, their weights graph
inputs (as the bundled models have them). Imported by the Python tests; the Rust tests run
it as a script:

    python onnx_models.py conv PATH C          conv3x3 + relu on 1xCx16x16 (one task)
    python onnx_models.py blocks PATH HW C     conv3x3 + relu, conv3x3 + add + relu on 1xCxHWxHW
    python onnx_models.py nhwc_blocks PATH HW C
                                               an NHWC input transposed to NCHW, conv3x3 with
                                               bias + relu, max pool, depthwise conv3x3,
                                               conv1x1 with bias + the pooled input added back
                                               + relu, global average
    python onnx_models.py clips PATH OPSET     convs ending in each way ONNX clamps (Clip with
                                               both bounds, with min only; HardSigmoid; HardSwish
                                               from opset 14), bounds as inputs from opset 11
"""

from __future__ import annotations

import sys


def _value(name: str, shape: list):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(nodes: list, name: str, inputs: list, outputs: list, path: str, opset: int = 17,
          initializers: list | None = None) -> None:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers or [])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)


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


def nhwc_blocks(path: str, hw: int, c: int) -> None:
    """A model that arrives in NHWC, as Keras exports do, with convolutions that have biases,
    a pool between them, a depthwise one, a residual add and a global average pool."""
    from onnx import helper

    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["t", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "dw"], ["d"], group=c, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["d", "w2", "b2"], ["c2"]),
        helper.make_node("Add", ["c2", "p"], ["a"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["y"]),
    ]
    inputs = [
        _value("x", [1, hw, hw, 3]),
        _value("w1", [c, 3, 3, 3]),
        _value("b1", [c]),
        _value("dw", [c, 1, 3, 3]),
        _value("w2", [c, c, 1, 1]),
        _value("b2", [c]),
    ]
    _save(nodes, "nhwc_blocks", inputs, [_value("y", [1, c, 1, 1])], path)


def clips(path: str, opset: int) -> None:
    """A chain of 3x3 convolutions on 1x8x16x16, each followed by one way of clamping."""
    from onnx import TensorProto, helper

    c, hw = 8, 16
    nodes, inputs, inits = [], [_value("x", [1, c, hw, hw])], []
    x = "x"

    def conv(k: int) -> str:
        inputs.append(_value(f"w{k}", [c, c, 3, 3]))
        nodes.append(helper.make_node("Conv", [x, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]))
        return f"c{k}"

    def bound(name: str, v: float) -> str:
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, [], [v]))
        return name

    kinds = ["clip", "clip_min", "hard_sigmoid"] + (["hard_swish"] if opset >= 14 else [])
    for k, kind in enumerate(kinds):
        y = conv(k)
        out = f"y{k}"
        if kind == "clip" and opset >= 11:
            nodes.append(helper.make_node("Clip", [y, bound("lo", 0.0), bound("hi", 6.0)], [out]))
        elif kind == "clip":
            nodes.append(helper.make_node("Clip", [y], [out], min=0.0, max=6.0))
        elif kind == "clip_min" and opset >= 11:
            nodes.append(helper.make_node("Clip", [y, bound("lo1", -1.0)], [out]))
        elif kind == "clip_min":
            nodes.append(helper.make_node("Clip", [y], [out], min=-1.0))
        elif kind == "hard_sigmoid":
            nodes.append(helper.make_node("HardSigmoid", [y], [out], alpha=0.25))
        else:
            nodes.append(helper.make_node("HardSwish", [y], [out]))
        x = out
    _save(nodes, "clips", inputs, [_value(x, [1, c, hw, hw])], path, opset, inits)


if __name__ == "__main__":
    kind, path, *dims = sys.argv[1:]
    {"conv": conv, "blocks": blocks, "nhwc_blocks": nhwc_blocks, "clips": clips}[kind](path, *map(int, dims))
