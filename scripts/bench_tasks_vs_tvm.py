#!/usr/bin/env python3
"""Time `tgc tasks` against TVM's own lowering of the same ONNX model to tuning tasks.

    PY=$(tvm/python/bootstrap.sh | tail -n 1)
    cargo build --release -p tgc-cli
    $PY scripts/bench_tasks_vs_tvm.py [--runs 30]

tgc: the whole `tgc tasks MODEL --json` process (read, import, verify, partition,
canonicalize, print), median of --runs runs. TVM: in one process with TVM already imported,
`from_onnx`, then DecomposeOpsForInference, LegalizeOps, AnnotateTIROpPattern, FoldConstant,
FuseOps, FuseTIR, then `extract_tasks` for llvm; median of 3 runs. Prints one row per model
and the ratio TVM / tgc, then the same for import alone on DenseNet-121 (`tgc import`
against `from_onnx`).
"""

import argparse
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = {
    "keras-resnet50": [1, 224, 224, 3],
    "keras-mobilenetv2": [1, 224, 224, 3],
    "keras-densenet121": [1, 224, 224, 3],
    "keras-inceptionv3": [1, 299, 299, 3],
}


def time_tgc(model: pathlib.Path, runs: int) -> float:
    tgc = ROOT / "target" / "release" / "tgc"
    if not tgc.exists():
        sys.exit(f"{tgc}: not built; run `cargo build --release -p tgc-cli` first")
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(tgc), "tasks", str(model), "--json", "-o", "/dev/null"], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def time_tvm(model: pathlib.Path, shape, runs: int = 3) -> tuple[float, int]:
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    proto = onnx.load(str(model))
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    samples, count = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        mod = from_onnx(proto, shape_dict={"input": shape}, keep_params_in_input=False)
        seq = tvm.transform.Sequential([
            relax.transform.DecomposeOpsForInference(),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ])
        with tvm.transform.PassContext(opt_level=2):
            mod = seq(mod)
        tasks = ms.relax_integration.extract_tasks(mod, target)
        samples.append(time.perf_counter() - start)
        count = len(tasks)
    return statistics.median(samples), count


def time_tgc_import(model: pathlib.Path, runs: int) -> float:
    tgc = ROOT / "target" / "release" / "tgc"
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(tgc), "import", str(model), "-o", "/dev/null"], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def time_tvm_import(model: pathlib.Path, shape, runs: int = 5) -> float:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        proto = onnx.load(str(model))
        from_onnx(proto, shape_dict={"input": shape}, keep_params_in_input=False)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    print(f"{'model':<20} {'tgc tasks (ms)':>15} {'TVM lowering (ms)':>18} {'TVM tasks':>10} {'ratio':>8}")
    for name, shape in MODELS.items():
        path = ROOT / "models" / f"{name}.onnx"
        ours = time_tgc(path, args.runs)
        theirs, count = time_tvm(path, shape)
        print(f"{name:<20} {ours * 1e3:>15.2f} {theirs * 1e3:>18.1f} {count:>10} {theirs / ours:>7.0f}x")
    # Import alone (issue 3): the whole `tgc import` process against TVM's from_onnx
    # (file read and parse included on both sides).
    dense = ROOT / "models" / "keras-densenet121.onnx"
    ours = time_tgc_import(dense, args.runs)
    theirs = time_tvm_import(dense, MODELS["keras-densenet121"])
    print(f"\nimport keras-densenet121: tgc {ours * 1e3:.2f} ms, TVM from_onnx {theirs * 1e3:.1f} ms, "
          f"ratio {theirs / ours:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
