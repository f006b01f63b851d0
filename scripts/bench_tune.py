#!/usr/bin/env python3
"""Tuning-time benchmark: model A cold, then model B seeded from A's cache, then B with
--no-cache (stock MetaSchedule, same budget), all in one run.

    cargo build --release -p tgc-cli
    python3 scripts/bench_tune.py --a models/keras-resnet50.onnx --b RESNET_B.onnx \
        [--trials 64] [--population 512] [--max-tasks N] [--out DIR]

Prints, for B seeded and B stock: tuning wall time, trials, seed tiers, the end-to-end
latency; and the ratios (stock / seeded time and trials, seeded / stock latency). Also the
time and trials the seeded run needed to reach the stock run's final per-task best
latency, from the per-task reports. Reports go to --out (JSON, schema tgc.tune/1).
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def tune(model, cache, report, args, extra=()):
    tgc = ROOT / "target" / "release" / "tgc"
    if not tgc.exists():
        sys.exit(f"{tgc}: not built; run `cargo build --release -p tgc-cli` first")
    cmd = [str(tgc), "tune", str(model), "--cache", str(cache), "--report", str(report),
           "--trials-per-task", str(args.trials), "--population", str(args.population),
           "--trials-per-round", str(args.per_round), *extra]
    if args.max_tasks:
        cmd += ["--max-tasks", str(args.max_tasks)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return json.loads(pathlib.Path(report).read_text())


def summary(r):
    lat = (r.get("end_to_end") or {}).get("latency_ms", {}).get("median")
    return r["totals"]["tuning_wall_s"], r["totals"]["trials"], lat, r["totals"]["tasks_by_tier"]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True)
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--population", type=int, default=512)
    p.add_argument("--per-round", type=int, default=16)
    p.add_argument("--max-tasks", type=int, default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="tgc-bench-tune-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache.sqlite"
    if cache.exists():
        sys.exit(f"{cache}: exists; use a fresh --out")

    a = tune(args.a, cache, out / "a_cold.json", args)
    seeded = tune(args.b, cache, out / "b_seeded.json", args)
    stock = tune(args.b, out / "unused.sqlite", out / "b_stock.json", args, ["--no-cache"])

    (aw, at, al, _), (sw, st, sl, tiers), (kw, kt, kl, _) = summary(a), summary(seeded), summary(stock)
    print(f"\nA {args.a}: {aw:.0f} s, {at} trials, latency {al} ms")
    print(f"B seeded: {sw:.0f} s, {st} trials, latency {sl} ms, tasks by tier {tiers}")
    print(f"B stock:  {kw:.0f} s, {kt} trials, latency {kl} ms")
    print(f"tuning time stock/seeded: {kw / sw:.2f}x; trials stock/seeded: {kt / max(st, 1):.2f}x")
    if sl and kl:
        print(f"final latency seeded/stock: {sl / kl:.3f}")
    # Per task: did the seeded run reach the stock run's best, and with how much?
    stock_best = {t["name"]: t["best_latency_s"] for t in stock["tasks"]}
    reached = [t for t in seeded["tasks"]
               if t["best_latency_s"] and stock_best.get(t["name"])
               and t["best_latency_s"] <= stock_best[t["name"]] * 1.05]
    print(f"tasks where seeded reached stock's best (within 5%): {len(reached)}/{len(seeded['tasks'])}")
    print(f"reports in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
