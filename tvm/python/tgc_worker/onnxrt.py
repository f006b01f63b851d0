"""onnxruntime on the ONNX file a library was built from: the latency a user would get from
running the model with onnxruntime instead, timed beside TVM's in `bench`.

The model's graph inputs are matched to the library's inputs by position (tgc's ONNX
import keeps their order), each checked for shape and dtype. An input the library draws as a
weight (or a positive statistic) becomes an initializer with that same array: the bundled
models are structure-only (their large initializers were turned into graph inputs), and a
deployed model carries its weights as initializers, which onnxruntime may pre-pack. The data
inputs are fed per call. CPU execution provider, all graph optimizations, sequential
execution, intra-op threads equal to the TVM runtime's threads.
"""

from __future__ import annotations

import time

from .errors import WorkerError, one_line


def _dims(value_info) -> list:
    t = value_info.type.tensor_type
    return [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]


def _session(path: str, types: list, roles: list, arrays: list, threads: int):
    """The onnxruntime session of `path` with the weight inputs folded in, and its feeds."""
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    try:
        model = onnx.load(path)
    except Exception as e:  # noqa: BLE001 - any load failure is the file's
        raise WorkerError("bad_params", f"onnx: {path}: cannot load: {one_line(e)}")
    graph = model.graph
    given = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in given]
    if len(inputs) != len(types):
        raise WorkerError(
            "bad_params",
            f"onnx: {path} has {len(inputs)} graph inputs, the library {len(types)}: not the model it was built from",
        )
    feeds, folded = {}, []
    for k, (vi, ty, role, arr) in enumerate(zip(inputs, types, roles, arrays)):
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if _dims(vi) != list(ty.shape) or str(dtype) != ty.dtype:
            raise WorkerError(
                "bad_params",
                f"onnx: {path}: input {k} ({vi.name}) is {_dims(vi)} {dtype}, the library's is {list(ty.shape)} {ty.dtype}",
            )
        if role[0] == "data":
            feeds[vi.name] = arr
        else:
            graph.initializer.append(numpy_helper.from_array(arr, vi.name))
            folded.append(vi)
    for vi in folded:
        graph.input.remove(vi)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        sess = ort.InferenceSession(
            model.SerializeToString(), so, providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # noqa: BLE001
        raise WorkerError("bad_params", f"onnx: {path}: onnxruntime rejects it: {one_line(e)}")
    return sess, feeds


def latency(path: str, types: list, roles: list, arrays: list, repeat: int, number: int, threads: int) -> dict:
    """Milliseconds per call over `repeat` timing runs of `number` calls each (after one
    warm-up call), as `measure.latency_stats` gives TVM's; with onnxruntime's version."""
    import onnxruntime as ort

    from .measure import latency_stats

    sess, feeds = _session(path, types, roles, arrays, threads)
    try:
        sess.run(None, feeds)
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                sess.run(None, feeds)
            runs.append((time.perf_counter() - t0) / number)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"onnx: {path}: onnxruntime failed to run it: {one_line(e)}")
    stats = latency_stats(runs, repeat, number)
    stats["threads"] = threads
    return {"latency_ms": stats, "version": ort.__version__}
