"""Time TVM 0.27's importers on the files `ir/benches/frontends.rs` times tgc's on: its ONNX
importer on models/keras-resnet50.onnx, and its StableHLO importer on the JAX MLP
(`scripts/export_stablehlo.py mlp`), the one kind of module it still reads (with jaxlib
0.4.38's MLIR bindings first on PYTHONPATH; see docs/mlir.md). In process, from bytes or
text in memory, after one warm-up call; prints the median and the range of N calls, in milliseconds.

    PYTHONPATH=~/.cache/tgc/jaxlib-0.4.38 python scripts/bench_import_tvm.py MLP.mlir [N]
"""

import statistics
import sys
import time
import warnings


def timed(fn, n):
    fn()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times), max(times)


def main():
    mlp = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    import onnx
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.relax.frontend.stablehlo import from_stablehlo

    data = open("models/keras-resnet50.onnx", "rb").read()
    text = open(mlp).read()

    # From bytes in memory, as tgc's benchmark: decoding the protobuf included.
    def onnx_import():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from_onnx(onnx.load_from_string(data), keep_params_in_input=True)

    for label, fn, runs in [
        ("from_onnx keras-resnet50.onnx", onnx_import, max(3, n // 4)),
        ("from_stablehlo mlp.mlir", lambda: from_stablehlo(text), n),
    ]:
        med, lo, hi = timed(fn, runs)
        print(f"{label}: median {med:.2f} ms (range {lo:.2f}-{hi:.2f}, {runs} calls)")


if __name__ == "__main__":
    main()
