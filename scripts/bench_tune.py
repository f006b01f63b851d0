#!/usr/bin/env python3
"""Tuning-time benchmark: model A cold, then model B seeded from A's cache, then B with
--no-cache (stock MetaSchedule, same budget), all in one run.

    cargo build --release -p tgc-cli
    python3 scripts/bench_tune.py --a resnet50 --b resnet152 [--b wide_resnet50_2 ...] \
        [--trials 64] [--population 512] [--max-tasks N] [--out DIR]

A and B are anything `tgc tune` accepts (ONNX files, text IR, zoo names). A is tuned once;
each B starts from its own copy of the cache as A left it. Prints, for each B seeded and
B stock: tuning wall time, trials, seed tiers, the end-to-end latency; and:

- time to reach: per task, the seconds (and trials) the seeded run needed until its best
  was within --reach (default 0 %) of the stock run's final best for that task, from the
  per-round histories in the reports. Summed over the tasks where seeded got there and
  compared with the stock run's whole time on those tasks, and with the time stock needed
  to reach its own final best (a lower bound for stock: it would not know to stop there).
  Tasks where seeded never got there are listed and left out of the sums (stopping early
  with a worse schedule is not a saving): the latency ratio below covers them.
- the occurrence-weighted sum of per-task best latencies (seeded / stock), and the
  measured end-to-end latency ratio.

Reports go to --out (JSON, schema tgc.tune/1), with a summary in bench.json.
"""

import argparse
import json
import pathlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def tune(model, cache, report, args, extra=()):
    tgc = ROOT / "target" / "release" / "tgc"
    if not tgc.exists():
        sys.exit(f"{tgc}: not built; run `cargo build --release -p tgc-cli` first")
    if pathlib.Path(report).exists() and args.reuse:
        print(f"reusing {report}", flush=True)
        return json.loads(pathlib.Path(report).read_text())
    cmd = [str(tgc), "tune", str(model), "--cache", str(cache), "--report", str(report),
           "--trials-per-task", str(args.trials), "--population", str(args.population),
           "--trials-per-round", str(args.per_round), "--tolerance", str(args.tolerance),
           "--work-dir", str(pathlib.Path(report).with_suffix(""))]
    if args.max_tasks:
        cmd += ["--max-tasks", str(args.max_tasks)]
    if args.no_measure:
        cmd += ["--no-measure"]
    cmd += list(extra)
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return json.loads(pathlib.Path(report).read_text())


def reach(history, goal):
    """(elapsed_s, trials) of the first batch whose best is <= goal, else None."""
    for h in history or []:
        if h["best_s"] is not None and h["best_s"] <= goal:
            return h["elapsed_s"], h["trials"]
    return None


def compare(seeded, stock, tol):
    stock_by = {t["name"]: t for t in stock["tasks"]}
    rows, missed = [], []
    tot = dict(seeded_s=0.0, seeded_trials=0, stock_s=0.0, stock_trials=0,
               stock_own_s=0.0, stock_own_trials=0, lat_seeded=0.0, lat_stock=0.0)
    for t in seeded["tasks"]:
        k = stock_by.get(t["name"])
        if k is None or k["best_latency_s"] is None or t["best_latency_s"] is None:
            continue
        goal = k["best_latency_s"] * (1 + tol)
        got = reach(t.get("history"), goal)
        own = reach(k.get("history"), k["best_latency_s"]) or (k["wall_s"], k["trials"])
        if got is None:
            # never as good as stock: no time-to-reach (an early stop is not a saving)
            missed.append(t["name"])
        else:
            tot["seeded_s"] += got[0]
            tot["seeded_trials"] += got[1]
            tot["stock_s"] += k["wall_s"]
            tot["stock_trials"] += k["trials"]
            tot["stock_own_s"] += own[0]
            tot["stock_own_trials"] += own[1]
        tot["lat_seeded"] += t["occurrences"] * t["best_latency_s"]
        tot["lat_stock"] += k["occurrences"] * k["best_latency_s"]
        rows.append(dict(task=t["name"], occurrences=t["occurrences"], tier=t["tier"],
                         stopped=t["stopped"], seeded_best_s=t["best_latency_s"],
                         stock_best_s=k["best_latency_s"],
                         seeded_reach_s=got[0] if got else None,
                         seeded_reach_trials=got[1] if got else None, seeded_wall_s=t["wall_s"],
                         stock_wall_s=k["wall_s"], stock_own_reach_s=own[0]))
    return rows, missed, tot


def snapshot(src, dst):
    """Copy an SQLite cache consistently (WAL included) with SQLite's backup API, and the
    warm-started cost models that live beside it."""
    with sqlite3.connect(src) as s, sqlite3.connect(dst) as d:
        s.backup(d)
    models = pathlib.Path(str(src) + ".cost-models")
    if models.is_dir():
        shutil.copytree(models, str(dst) + ".cost-models", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.lock", ".tgc-cost-model-*"))


def e2e(r):
    return (r.get("end_to_end") or {}).get("latency_ms", {}).get("median")


def report_pair(args, a, b, seeded, stock):
    rows, missed, t = compare(seeded, stock, args.reach)
    sw, kw = seeded["totals"]["tuning_wall_s"], stock["totals"]["tuning_wall_s"]
    st, kt = seeded["totals"]["trials"], stock["totals"]["trials"]
    print(f"\n== A {args.a} -> B {b}")
    print(f"A cold:    {a['totals']['tuning_wall_s']:.0f} s, {a['totals']['trials']} trials,"
          f" e2e {e2e(a)} ms")
    print(f"B seeded:  {sw:.0f} s, {st} trials, e2e {e2e(seeded)} ms,"
          f" tasks by tier {seeded['totals']['tasks_by_tier']}")
    print(f"B stock:   {kw:.0f} s, {kt} trials, e2e {e2e(stock)} ms")
    print(f"whole runs, stock / seeded: time {kw / sw:.2f}x, trials {kt / max(st, 1):.2f}x")
    reached = len(rows) - len(missed)
    print(f"time to reach stock's final best, summed over the {reached} of {len(rows)} tasks"
          " where seeded got there:"
          f" seeded {t['seeded_s']:.0f} s / {t['seeded_trials']} trials;"
          f" stock {t['stock_s']:.0f} s / {t['stock_trials']} trials"
          f" -> {t['stock_s'] / max(t['seeded_s'], 1e-9):.2f}x time,"
          f" {t['stock_trials'] / max(t['seeded_trials'], 1):.2f}x trials")
    print(f"  stock reached its own final best after {t['stock_own_s']:.0f} s /"
          f" {t['stock_own_trials']} trials ({t['stock_own_s'] / max(t['seeded_s'], 1e-9):.2f}x)")
    print(f"  tasks where seeded never reached it (left out above): {len(missed)}/{len(rows)}"
          f" {missed}")
    lat_ratio = t["lat_seeded"] / t["lat_stock"] if t["lat_stock"] else None
    if lat_ratio:
        print(f"occurrence-weighted task latency seeded / stock: {lat_ratio:.3f}")
    if e2e(seeded) and e2e(stock):
        print(f"end-to-end latency seeded / stock: {e2e(seeded) / e2e(stock):.3f}")
    return dict(b=b, seeded_wall_s=sw, stock_wall_s=kw, seeded_trials=st, stock_trials=kt,
                tiers=seeded["totals"]["tasks_by_tier"],
                e2e_ms=dict(seeded=e2e(seeded), stock=e2e(stock)), totals=t, missed=missed,
                weighted_latency_ratio=lat_ratio, tasks=rows)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True, action="append")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--population", type=int, default=512)
    p.add_argument("--per-round", type=int, default=16)
    p.add_argument("--tolerance", type=float, default=0.05, help="exact-hit tolerance")
    p.add_argument("--reach", type=float, default=0.0,
                   help="relative slack on stock's final best for time-to-reach")
    p.add_argument("--max-tasks", type=int, default=0)
    p.add_argument("--seeded-args", default="",
                   help="extra `tgc tune` arguments for A and B seeded, e.g. "
                        "'--no-cost-model-warm-start' for an ablation")
    p.add_argument("--no-measure", action="store_true",
                   help="skip the whole-model builds (per-task latencies only)")
    p.add_argument("--out", default=None)
    p.add_argument("--reuse", action="store_true",
                   help="reuse reports already in --out (to recompute the comparison)")
    args = p.parse_args()
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="tgc-bench-tune-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "a_cache.sqlite"
    if cache.exists() and not args.reuse:
        sys.exit(f"{cache}: exists; use a fresh --out (or --reuse)")

    seeded_args = args.seeded_args.split()
    a = tune(args.a, cache, out / "a_cold.json", args, seeded_args)
    pairs = []
    for i, b in enumerate(args.b):
        b_cache = out / f"b{i}_cache.sqlite"
        if not (args.reuse and b_cache.exists()):
            snapshot(cache, b_cache)
        seeded = tune(b, b_cache, out / f"b{i}_seeded.json", args, seeded_args)
        stock = tune(b, out / "unused.sqlite", out / f"b{i}_stock.json", args, ["--no-cache"])
        pairs.append(report_pair(args, a, b, seeded, stock))
    summary = dict(a=args.a, trials=args.trials, population=args.population,
                   per_round=args.per_round, max_tasks=args.max_tasks, reach=args.reach,
                   tolerance=args.tolerance, seeded_args=args.seeded_args, a_wall_s=a["totals"]["tuning_wall_s"],
                   a_trials=a["totals"]["trials"], a_e2e_ms=e2e(a), pairs=pairs)
    (out / "bench.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"reports in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
