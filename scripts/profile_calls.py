#!/usr/bin/env python3
"""Where a built library's time goes, call by call: runs `tgc build`'s library in TVM's Relax
VM with an instrument that times every call the VM makes (each fused function at each of its
call sites, and the VM's own builtins), and prints the calls largest first beside the
library's plain end-to-end time. Compare a task's time at its call sites with the latency
its record was measured at (`tgc build --report`): the difference is what the task costs in
the model that it does not cost measured alone (its weights no longer in the caches). A
library built with `--pack-weights` gets its weights packed once, before the runs.

    $TGC_PYTHON scripts/profile_calls.py model.so [--runs 10] [--top 30]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import relax  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("library")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    try:
        side = json.load(open(args.library + ".json"))
        vm = relax.VirtualMachine(tvm.runtime.load_module(args.library), tvm.cpu())
    except Exception as e:  # noqa: BLE001 - one line naming the file
        sys.exit(f"error: {args.library}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    rng = np.random.default_rng(0)
    inputs = [
        tvm.runtime.tensor((rng.uniform(-1, 1, i["shape"]) * 0.05).astype(i["dtype"]), tvm.cpu())
        for i in side["inputs"]
    ]
    packed = [x for x, i in zip(inputs, side["inputs"]) if i.get("packed")]
    if packed:  # `--pack-weights`: packed once, outside the timed runs, as a deployment does
        out = vm["main_transform_params"](packed)
        inputs = [x for x, i in zip(inputs, side["inputs"]) if not i.get("packed")] + list(out)
    for _ in range(3):
        vm["main"](*inputs)
    plain = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        vm["main"](*inputs)
        plain.append(time.perf_counter() - t0)
    started, spent = {}, {}

    def instrument(_func, name, before_run, _ret, *_args):
        now = time.perf_counter()
        if before_run:
            started[name] = now
        else:
            spent.setdefault(name, []).append(now - started[name])
        return 0  # go on

    vm.set_instrument(instrument)
    t0 = time.perf_counter()
    for _ in range(args.runs):
        vm["main"](*inputs)
    instrumented = (time.perf_counter() - t0) / args.runs
    per = {k: sum(v) / args.runs for k, v in spent.items()}
    calls = sum(len(v) for v in spent.values()) / args.runs
    print(
        f"{args.library}: {np.median(plain) * 1e3:.1f} ms end to end (median of {args.runs}); "
        f"instrumented {instrumented * 1e3:.1f} ms, {calls:.0f} calls summing to "
        f"{sum(per.values()) * 1e3:.1f} ms"
    )
    for name, s in sorted(per.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {name:44s} {s * 1e3:8.3f} ms  ({len(spent[name]) // args.runs} per run)")


if __name__ == "__main__":
    main()
