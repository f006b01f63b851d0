#!/usr/bin/env python3
"""What the convolution layout, packed weights and cold measurement are worth to
MetaSchedule on this CPU, with stock TVM only.

For each convolution shape (by default five of ResNet-50's), a Relax module of conv2d + bias
+ ReLU with constant weights goes through the passes of TVM's `static_shape_tuning` pipeline
with the same trial budget per arm, is compiled, and timed twice on the runtime threads:
warm (TVM's time evaluator: the weights stay in the caches between runs) and evicted (a
96 MB buffer written before each call, so the weights come from memory, as in a model whose
weights exceed the last-level cache). Prints one JSON line per arm and a table of GFLOP/s.

    $TGC_PYTHON scripts/bench_layout.py [--trials 64] [--per-iter 64] [--shapes 64,256,56,1 ...]
        [--arms NCHW NHWC NHWC+prepack:cold ...]

An arm is LAYOUT[+prepack][:cold]: NCHW/OIHW (as ONNX models arrive) or NHWC/HWIO (what
`tgc --layout nhwc` tunes); `+prepack` is TVM's `cpu_weight_prepack` (the weights marked
layout-free, MetaSchedule's RewriteLayout packs them in the order the schedule reads them,
and the packing is folded into the constants); `:cold` tunes with MetaSchedule's cold
evaluator (`enable_cpu_cache_flush`, one run per repeat) instead of its default warm one.
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


def parse_arm(arm: str) -> tuple[str, bool, bool]:
    """LAYOUT[+prepack][:cold] -> (layout, prepack, cold)."""
    body, _, ev = arm.partition(":")
    layout, _, extra = body.partition("+")
    if layout not in ("NCHW", "NHWC") or extra not in ("", "prepack") or ev not in ("", "cold"):
        raise ValueError(f"'{arm}' is not LAYOUT[+prepack][:cold] with LAYOUT NCHW or NHWC")
    return layout, extra == "prepack", ev == "cold"


def tuned(mod, arm: str, trials: int, per_iter: int, target, work: str):
    """The module through static_shape_tuning's passes, the runner's evaluator per the arm."""
    from tvm.s_tir import meta_schedule as ms

    _, prepack, cold = parse_arm(arm)
    t = relax.transform
    with target:
        pre = [t.DecomposeOpsForInference(), t.CanonicalizeBindings(), relax.pipeline.zero_pipeline()]
        mod = tvm.transform.Sequential(pre + ([t.AttachAttrLayoutFreeBuffers()] if prepack else []))(mod)
    if cold:  # MetaSchedule's cold measurement: caches flushed before each single run
        ev = ms.runner.EvaluatorConfig(number=1, repeat=10, min_repeat_ms=0, enable_cpu_cache_flush=True)
    else:  # MetaSchedule's default evaluator
        ev = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100)
    ms.relax_integration.tune_relax(
        mod=mod,
        params={},
        target=target,
        work_dir=work,
        max_trials_global=trials,
        max_trials_per_task=trials,
        num_trials_per_iter=per_iter,
        runner=ms.runner.LocalRunner(evaluator_config=ev),
    )
    with target:
        post = [t.MetaScheduleApplyDatabase(work)]
        if prepack:
            post += [t.SplitLayoutRewritePreproc(), t.LiftTransformParams(), t.FoldConstant()]
        return tvm.transform.Sequential(post)(mod)


EVICT = None


def evicted_ms(f, x, runs: int) -> np.ndarray:
    """Call times with the last-level cache evicted before each call (a 96 MB write)."""
    global EVICT
    if EVICT is None:
        EVICT = np.zeros(96 << 18, dtype=np.float32)
    out = []
    for _ in range(runs):
        np.add(EVICT, 1.0, out=EVICT)
        t = time.perf_counter()
        f(x)
        out.append((time.perf_counter() - t) * 1e3)
    return np.array(out)


def run(spec: str, arm: str, trials: int, per_iter: int, target, seed: int) -> dict:
    cin, cout, hw, k = (int(v) for v in spec.split(","))
    rng = np.random.default_rng(seed)
    mod, shape = module(cin, cout, hw, k, parse_arm(arm)[0], rng)
    with tempfile.TemporaryDirectory() as work:
        t0 = time.time()
        mod = tuned(mod, arm, trials, per_iter, target, work)
        tune_s = time.time() - t0
    ex = tvm.compile(mod, target=target)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    x = tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype("float32"), dev)
    vm["main"](x)
    warm = np.array(vm.time_evaluator("main", dev, number=20, repeat=15)(x).results) * 1e3
    cold = evicted_ms(vm["main"], x, 60)
    flops = 2 * cout * cin * k * k * hw * hw
    row = {"shape": spec, "arm": arm, "trials": trials, "per_iter": per_iter, "tune_s": round(tune_s, 1)}
    for name, ms_ in (("warm", warm), ("evicted", cold)):
        median = float(np.median(ms_))
        row[f"{name}_ms"] = round(median, 4)
        row[f"{name}_p10_ms"] = round(float(np.percentile(ms_, 10)), 4)
        row[f"{name}_p90_ms"] = round(float(np.percentile(ms_, 90)), 4)
        row[f"{name}_gflops"] = round(flops / median / 1e6, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--shapes", nargs="+", default=RESNET50, help="CIN,COUT,HW,K")
    ap.add_argument("--per-iter", type=int, default=64, help="candidates per search iteration (TVM's default)")
    ap.add_argument("--arms", nargs="+", default=["NCHW", "NHWC"], help="LAYOUT[+prepack][:cold]")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for s in args.shapes:
        parts = s.split(",")
        if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
            sys.exit(f"error: --shapes: '{s}' is not CIN,COUT,HW,K (positive integers)")
    for a in args.arms:
        try:
            parse_arm(a)
        except ValueError as e:
            sys.exit(f"error: --arms: {e}")
    target = tvm.target.Target(
        {
            "kind": "llvm",
            "mcpu": str(codegen.llvm_get_system_cpu()),
            "mtriple": str(codegen.llvm_get_system_triple()),
            "num-cores": int(os.environ["TVM_NUM_THREADS"]),
        }
    )
    rows = []
    for s in args.shapes:
        for arm in args.arms:
            r = run(s, arm, args.trials, args.per_iter, target, args.seed)
            print(json.dumps(r), flush=True)
            rows.append(r)
    print(f"\n{args.trials} trials per task in iterations of {args.per_iter}, {os.environ['TVM_NUM_THREADS']} threads, {target.attrs['mcpu']}")
    print("GFLOP/s warm (weights in the caches) / evicted (weights from memory), medians")
    print("| conv (cin, cout, hw, k) | " + " | ".join(args.arms) + " |")
    print("|---" * (len(args.arms) + 1) + "|")
    for s in args.shapes:
        by = {r["arm"]: r for r in rows if r["shape"] == s}
        cells = [f"{by[a]['warm_gflops']} / {by[a]['evicted_gflops']}" for a in args.arms]
        print(f"| {s} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
