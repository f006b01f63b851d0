#!/usr/bin/env python3
"""Export a Keras Applications model to ONNX the way models/README.md describes.

Keras Applications with `weights=None` (TensorFlow 2.21), converted by tf2onnx 1.17 at
opset 17 with batch 1, then made structure-only: every float initializer with 256 or
more elements becomes a graph input of the same name, shape and dtype (small ones, shape
constants and scalars, stay). The graph is otherwise what the exporter wrote.

Needs tensorflow-cpu 2.21 and tf2onnx 1.17, which the TVM venv does not carry:

    python3 -m venv /tmp/tf && /tmp/tf/bin/pip install "tensorflow-cpu==2.21.*" "tf2onnx==1.17.*"
    /tmp/tf/bin/python scripts/export_keras_onnx.py ResNet101 models/keras-resnet101.onnx

Errors are one line on stderr with exit status 1.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def structure_only(model, threshold=256):
    """Turns every float initializer of `threshold` or more elements into a graph input."""
    import numpy as np
    from onnx import TensorProto, helper

    graph = model.graph
    keep, moved = [], []
    for init in graph.initializer:
        elements = int(np.prod(init.dims)) if init.dims else 1
        if init.data_type == TensorProto.FLOAT and elements >= threshold:
            moved.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        else:
            keep.append(init)
    del graph.initializer[:]
    graph.initializer.extend(keep)
    graph.input.extend(moved)
    return len(moved)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("architecture", help="a keras.applications name, e.g. ResNet101")
    parser.add_argument("out", help="the .onnx file to write")
    parser.add_argument("--size", type=int, default=224, help="input height and width (224)")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()
    try:
        import onnx
        import tensorflow as tf
        import tf2onnx
    except ImportError as e:
        sys.exit(f"export_keras_onnx.py: {e.name} is not installed (see the script's docstring)")
    build = getattr(tf.keras.applications, args.architecture, None)
    if build is None:
        sys.exit(f"export_keras_onnx.py: keras.applications has no {args.architecture}")
    shape = (args.size, args.size, 3)
    model = build(weights=None, input_shape=shape)
    spec = [tf.TensorSpec((1, *shape), tf.float32, name="input")]
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=args.opset)
    moved = structure_only(proto)
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, args.out)
    print(f"{args.out}: {len(proto.graph.node)} nodes, {moved} weights as graph inputs, "
          f"tf {tf.__version__}, tf2onnx {tf2onnx.__version__}")


if __name__ == "__main__":
    main()
