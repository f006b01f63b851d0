#!/usr/bin/env python3
"""Tuning throughput, measured trials per minute: `tgc tune` measuring on this machine
against measuring through a TVM RPC tracker with one and with two device servers on
loopback (started here with TVM's own entry points, stopped at the end).

    $TGC_PYTHON scripts/bench_rpc.py [--repeats 2] [--trials-per-task 12] [--tgc target/debug/tgc]

Each run tunes the same small two-task model (two 3x3 convolutions over 8 channels) with
`--no-cache` (no seeds, no early stop: every task measures its whole budget) and a fresh
work dir, so every configuration does the same work. Configurations run interleaved
(local, rpc-1, rpc-2, local, ...) so that drift in the machine's load spreads over all of
them. Prints per-run figures and, per configuration, the median and the range of trials per
minute, with where the time went (the worker's per-round build, run and search seconds).

Run with the TVM venv's python (it starts the tracker and servers with it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tvm", "python", "tests"))

from rpc_cluster import Cluster  # noqa: E402

MODEL = """module @small {
  func @main(%x: tensor<1x8x16x16xf32>, %w1: tensor<8x8x3x3xf32>, %w2: tensor<8x8x3x3xf32>) -> tensor<1x8x16x16xf32> {
    %0 = nn.conv2d(%x, %w1) {padding = [1, 1, 1, 1]} : tensor<1x8x16x16xf32>
    %1 = nn.relu(%0) : tensor<1x8x16x16xf32>
    %2 = nn.conv2d(%1, %w2) {padding = [1, 1, 1, 1]} : tensor<1x8x16x16xf32>
    %3 = add(%2, %x) : tensor<1x8x16x16xf32>
    %4 = nn.relu(%3) : tensor<1x8x16x16xf32>
    return %4
  }
}
"""

TARGET = '{"kind": "llvm", "num-cores": 2}'


def tune(args, tmp: str, name: str, rpc: tuple[int, str, int] | None) -> dict:
    work = os.path.join(tmp, name)
    report = os.path.join(tmp, f"{name}.json")
    cmd = [
        args.tgc, "tune", os.path.join(tmp, "small.tgc"),
        "--no-cache", "--no-measure",
        "--target", TARGET,
        "--trials-per-task", str(args.trials_per_task),
        "--trials-per-round", str(args.trials_per_round),
        "--population", str(args.population),
        "--work-dir", work, "--report", report,
    ]
    if rpc is not None:
        port, key, sessions = rpc
        cmd += ["--rpc", f"127.0.0.1:{port}", "--rpc-key", key, "--rpc-sessions", str(sessions)]
    t0 = time.time()
    load0 = os.getloadavg()[0]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TGC_PYTHON": sys.executable})
    if out.returncode != 0:
        raise SystemExit(f"{name}: tgc tune failed:\n{out.stdout}\n{out.stderr}")
    r = json.load(open(report))
    trials = r["totals"]["trials"]
    wall = r["totals"]["tuning_wall_s"]
    phases = {k: sum(h[k] for t in r["tasks"] for h in t["history"]) for k in ("search_s", "build_s", "run_s", "cost_model_s")}
    return {
        "trials": trials,
        "failed": r["totals"]["failed_runs"],
        "wall_s": wall,
        "process_s": time.time() - t0,
        "trials_per_min": 60.0 * trials / wall,
        "best_us": [t["best_latency_s"] * 1e6 for t in r["tasks"]],
        # the machine's 1-minute load average before and after: other jobs share the cores
        "load": (load0, os.getloadavg()[0]),
        **phases,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tgc", default=os.path.join(ROOT, "target", "debug", "tgc"))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--trials-per-task", type=int, default=12)
    ap.add_argument("--trials-per-round", type=int, default=6)
    ap.add_argument("--population", type=int, default=64)
    args = ap.parse_args()
    if not os.path.exists(args.tgc):
        raise SystemExit(f"{args.tgc}: no tgc binary (cargo build -p tgc-cli, or pass --tgc)")

    runs: dict[str, list[dict]] = {"local": [], "rpc, 1 server": [], "rpc, 2 servers": []}
    with tempfile.TemporaryDirectory(prefix="tgc-bench-rpc-") as tmp:
        open(os.path.join(tmp, "small.tgc"), "w").write(MODEL)
        one = Cluster(key=f"bench-one-{os.getpid()}", log_dir=tmp)
        two = Cluster(key=f"bench-two-{os.getpid()}", log_dir=os.path.join(tmp, "two"))
        os.makedirs(two.log_dir)
        try:
            one.start(1)
            two.start(2)
            for i in range(args.repeats):
                for name, rpc in (
                    ("local", None),
                    ("rpc, 1 server", (one.port, one.key, 1)),
                    ("rpc, 2 servers", (two.port, two.key, 2)),
                ):
                    tag = f"{name.replace(', ', '-').replace(' ', '')}-{i}"
                    r = tune(args, tmp, tag, rpc)
                    runs[name].append(r)
                    print(
                        f"run {i + 1} {name:<15} {r['trials']:>3} trials in {r['wall_s']:6.1f} s: "
                        f"{r['trials_per_min']:5.1f} trials/min (build {r['build_s']:.1f} s, run "
                        f"{r['run_s']:.1f} s, search {r['search_s']:.1f} s, cost model "
                        f"{r['cost_model_s']:.1f} s; {r['failed']} failed; load average "
                        f"{r['load'][0]:.1f} -> {r['load'][1]:.1f})",
                        flush=True,
                    )
        finally:
            one.stop()
            two.stop()

    print()
    print(f"| measured on | trials/min, median | range | build s | run s | search s | cost model s | failed |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rs in runs.items():
        tpm = [r["trials_per_min"] for r in rs]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(
            f"| {name} | {statistics.median(tpm):.1f} | {min(tpm):.1f}-{max(tpm):.1f} | "
            f"{med('build_s'):.1f} | {med('run_s'):.1f} | {med('search_s'):.1f} | "
            f"{med('cost_model_s'):.1f} | {sum(r['failed'] for r in rs)} |"
        )
    print(f"\n{args.repeats} runs per configuration of {runs['local'][0]['trials']} trials each "
          f"(--trials-per-task {args.trials_per_task}, --trials-per-round {args.trials_per_round}, "
          f"--population {args.population}); medians of the per-run phase sums.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
