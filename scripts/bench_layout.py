#!/usr/bin/env python3
"""What the convolution layout is worth to MetaSchedule on this CPU, with stock TVM only.

For each convolution shape (by default five of ResNet-50's), a Relax module of conv2d + bias
+ ReLU with constant weights is tuned by TVM's own `static_shape_tuning` pipeline with the
same trial budget in NCHW/OIHW (as ONNX models arrive) and in NHWC/HWIO (what `tgc
--layout nhwc` tunes), compiled, and timed with TVM's time evaluator on the runtime
threads. Prints one JSON line per run and a table of the GFLOP/s of both layouts.

    $TGC_PYTHON scripts/bench_layout.py [--trials 64] [--shapes 64,256,56,1 ...] [--prepack]

`--prepack` adds a third arm: NCHW with `cpu_weight_prepack=True` (MetaSchedule's
RewriteLayout on the layout-free weights, TVM's own answer to kernel layouts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

# The machine's cores, as tgc's worker runs TVM (TVM alone would take half of them).
os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.target import codegen  # noqa: E402

# (in channels, out channels, height = width, kernel): ResNet-50's 1x1 expansion and
# reduction at 56x56, its 3x3 at 56x56 and 14x14, a 1x1 reduction at 14x14.
RESNET50 = ["64,256,56,1", "256,64,56,1", "64,64,56,3", "256,256,14,3", "1024,256,14,1"]


def module(cin: int, cout: int, hw: int, k: int, layout: str, rng) -> tvm.IRModule:
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype("float32")
    b = rng.standard_normal((1, cout, 1, 1)).astype("float32")
    shape = [1, cin, hw, hw]
    if layout == "NHWC":
        w = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
        b = b.reshape(1, 1, 1, cout)
        shape = [1, hw, hw, cin]
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(
                relax.op.nn.conv2d(
                    x,
                    relax.const(w),
                    padding=k // 2,
                    data_layout=layout,
                    kernel_layout="OIHW" if layout == "NCHW" else "HWIO",
                )
            )
            y = bb.emit(relax.op.add(y, relax.const(b)))
            out = bb.emit_output(bb.emit(relax.op.nn.relu(y)))
        bb.emit_func_output(out)
    return bb.get(), shape


def run(spec: str, layout: str, prepack: bool, trials: int, target, seed: int) -> dict:
    cin, cout, hw, k = (int(v) for v in spec.split(","))
    rng = np.random.default_rng(seed)
    mod, shape = module(cin, cout, hw, k, layout, rng)
    with tempfile.TemporaryDirectory() as work:
        t0 = time.time()
        mod = relax.pipeline.static_shape_tuning_pipeline(
            total_trials=trials,
            target=target,
            work_dir=work,
            cpu_weight_prepack=prepack,
            max_trials_per_task=trials,
        )(mod)
        tune_s = time.time() - t0
    ex = tvm.compile(mod, target=target)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    x = tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype("float32"), dev)
    vm["main"](x)
    ms = np.array(vm.time_evaluator("main", dev, number=20, repeat=15)(x).results) * 1e3
    flops = 2 * cout * cin * k * k * hw * hw
    median = float(np.median(ms))
    return {
        "shape": spec,
        "layout": layout + (" prepacked" if prepack else ""),
        "trials": trials,
        "tune_s": round(tune_s, 1),
        "median_ms": round(median, 4),
        "p10_ms": round(float(np.percentile(ms, 10)), 4),
        "p90_ms": round(float(np.percentile(ms, 90)), 4),
        "gflops": round(flops / median / 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--shapes", nargs="+", default=RESNET50, help="CIN,COUT,HW,K")
    ap.add_argument("--prepack", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for s in args.shapes:
        parts = s.split(",")
        if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
            sys.exit(f"error: --shapes: '{s}' is not CIN,COUT,HW,K (positive integers)")
    target = tvm.target.Target(
        {
            "kind": "llvm",
            "mcpu": str(codegen.llvm_get_system_cpu()),
            "mtriple": str(codegen.llvm_get_system_triple()),
            "num-cores": int(os.environ["TVM_NUM_THREADS"]),
        }
    )
    arms = [("NCHW", False), ("NHWC", False)] + ([("NCHW", True)] if args.prepack else [])
    rows = []
    for s in args.shapes:
        for layout, prepack in arms:
            r = run(s, layout, prepack, args.trials, target, args.seed)
            print(json.dumps(r), flush=True)
            rows.append(r)
    print(f"\n{args.trials} trials per task, {os.environ['TVM_NUM_THREADS']} threads, {target.attrs['mcpu']}")
    print("| conv (cin, cout, hw, k) | " + " | ".join(f"{l}{' prepacked' if p else ''} GFLOP/s" for l, p in arms) + " | NHWC / NCHW |")
    print("|---" * (len(arms) + 2) + "|")
    for s in args.shapes:
        by = {r["layout"]: r for r in rows if r["shape"] == s}
        rates = [by[l + (" prepacked" if p else "")]["gflops"] for l, p in arms]
        print(f"| {s} | " + " | ".join(str(r) for r in rates) + f" | {rates[1] / rates[0]:.2f}x |")


if __name__ == "__main__":
    main()
