#!/usr/bin/env python3
"""Tuning-time benchmark: model A cold, then model B seeded from A's cache, B with
--no-cache (tgc's engine without the cache, same budget), and B with stock TVM
(scripts/stock_tvm.py: TVM's own ONNX frontend, tune_relax, compile_relax), all in one run.

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

Stock TVM arm (for each B that is an ONNX file; A too with --stock-a): stock_tvm.py with
the target of tgc's report (its `target` field), the same per-round count and task limit,
and the same total trials as tgc's --no-cache run (trials per task x tasks tgc tuned;
--stock-trials N overrides). Its LocalBuilder gets tgc's build timeout (--stock-builder-timeout,
default 300 s; 0 keeps TVM's 30 s, which kills builds on a loaded 2-core machine). Ratios,
each as tuning wall time and end-to-end latency (below 1: the first is faster):
  engine = tgc cold (--no-cache) / stock TVM,  cache = tgc seeded / tgc cold,
  total  = tgc seeded / stock TVM.
Python for stock_tvm.py: --stock-python, else $TGC_PYTHON, else tvm/python/bootstrap.sh's.
--no-stock skips the arm.

Repeats (--repeat R): each B's seeded run (from a fresh copy of its starting cache) and
tgc cold run are repeated R times, the stock TVM arm --stock-repeat times (fewer stock runs
are reused in order, so their own spread is then not in the ranges); bench.json's pair
carries every repeat and a `spread` with the median, min and max of each ratio, time and
latency. --chain runs a sequence instead of pairs: each B starts from the cache as the B
before it left it (A's for the first), and with --stock-a every model is measured against
stock TVM; --no-cold drops the tgc cold arm.

Reports go to --out (JSON, schema tgc.tune/1; the stock TVM arm's b<i>_tvm.json, schema
tgc.stock/1), with a summary in bench.json. In bench.json's pairs, `stock_*` (and the task
rows' `stock_*`) is the --no-cache run, as before; the stock TVM arm is `tvm`, the ratios
`ratios`.
"""

import argparse
import json
import pathlib
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.dont_write_bytecode = True  # no scripts/__pycache__ in the working tree
import stock_tvm  # noqa: E402  (no TVM import at module level)


def tune(model, cache, report, args, extra=()):
    tgc = pathlib.Path(args.tgc) if args.tgc else ROOT / "target" / "release" / "tgc"
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


def stock_tune(model, tgc_report, report, args):
    """Stock TVM on `model` with tgc_report's target and total trials; None when `model` is
    not an ONNX file (stock_tvm.py reads ONNX only)."""
    report = pathlib.Path(report)
    if report.exists() and args.reuse:
        print(f"reusing {report}", flush=True)
        return json.loads(report.read_text())
    path = pathlib.Path(str(model))
    if path.suffix.lower() != ".onnx" or not path.is_file():
        print(f"stock TVM arm skipped for {model}: not an ONNX file", flush=True)
        return None
    trials = args.stock_trials or tgc_report["trials_per_task"] * len(tgc_report["tasks"])
    work = report.with_suffix("")
    if work.exists():
        shutil.rmtree(work)  # a crashed run's database: MetaSchedule would resume from it
    extra = []
    if args.stock_builder_timeout:
        extra += ["--builder-timeout", str(args.stock_builder_timeout)]
    if args.no_measure:
        extra += ["--no-measure"]
    extra += args.stock_args.split()
    cmd = stock_tvm.command(path, tgc_report["target"], trials, args.per_round, work, report,
                            max_tasks=args.max_tasks, python=args.stock_python, extra=extra)
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return json.loads(report.read_text())


def ratio(x, y):
    return x / y if x is not None and y else None


def fmt(r):
    return "n/a" if r is None else f"{r:.3f}"


def matched_latency(tgc_report, tvm_report):
    """Occurrence-weighted best task latencies over the tasks both tuned, matched by TVM
    workload hash (tgc's lowering hash-equals TVM's task): (n matched, tgc / stock)."""
    by = {t["workload_hash"]: t for t in tvm_report["tasks"]
          if t.get("selected") and t.get("best_latency_s") is not None}
    n, lt, lk = 0, 0.0, 0.0
    for t in tgc_report["tasks"]:
        k = by.get(t.get("workload_hash"))
        if k is None or t.get("best_latency_s") is None:
            continue
        n += 1
        lt += t["occurrences"] * t["best_latency_s"]
        lk += t["occurrences"] * k["best_latency_s"]
    return n, ratio(lt, lk)


def runtime_threads(tgc_report):
    """The TVM runtime threads tgc's measurements ran with: its end-to-end timing's, else a
    tuned task's (None for reports older than worker protocol 9)."""
    lat = (tgc_report.get("end_to_end") or {}).get("latency_ms") or {}
    if "threads" in lat:
        return lat["threads"]
    for t in tgc_report["tasks"]:
        if (t.get("runner") or {}).get("threads") is not None:
            return t["runner"]["threads"]
    return None


def stock_lines(label, tvm_rep, tgc_rep):
    """Prints the stock TVM arm; returns its summary."""
    tt = tvm_rep["totals"]
    threads = dict(tgc=runtime_threads(tgc_rep), tvm=tvm_rep["settings"].get("runtime_threads"))
    print(f"{label} stock TVM: {tt['tuning_wall_s']:.0f} s, {tt['trials']} trials"
          f" ({tt['failed_trials']} failed, {fmt(tt['s_per_trial'])} s/trial),"
          f" {tvm_rep['tasks_tuned']} of {tvm_rep['tasks_extracted']} tasks"
          f" (tgc: {len(tgc_rep['tasks'])}), e2e {stock_tvm.e2e_ms(tvm_rep)} ms,"
          f" runtime threads {threads['tvm']} (tgc: {threads['tgc']})")
    if threads["tgc"] != threads["tvm"]:
        print(f"  warning: the arms ran TVM's runtime on different thread counts {threads};"
              " their latencies and times do not compare")
    n, lat = matched_latency(tgc_rep, tvm_rep)
    return dict(runtime_threads=threads, wall_s=tt["tuning_wall_s"], trials=tt["trials"],
                failed_trials=tt["failed_trials"], s_per_trial=tt["s_per_trial"],
                tasks_extracted=tvm_rep["tasks_extracted"], tasks_tuned=tvm_rep["tasks_tuned"],
                tgc_tasks=len(tgc_rep["tasks"]), e2e_ms=stock_tvm.e2e_ms(tvm_rep),
                compile_s=tvm_rep.get("compile_s"), matched_tasks=n,
                matched_weighted_latency_tgc_over_tvm=lat)


def ratios(first, second):
    """{time, e2e}: first / second, tuning wall time and end-to-end latency; each arg is a
    (wall_s, e2e_ms) pair."""
    return dict(time=ratio(first[0], second[0]), e2e=ratio(first[1], second[1]))


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


def report_pair(args, a, b, seeded, stock, tvm_rep=None):
    """Prints and returns one repeat of one B: seeded against tgc cold (`stock`, None with
    --no-cold) and against stock TVM (`tvm_rep`, None with --no-stock)."""
    sw, st = seeded["totals"]["tuning_wall_s"], seeded["totals"]["trials"]
    print(f"\n== A {args.a} -> B {b}")
    print(f"A cold:    {a['totals']['tuning_wall_s']:.0f} s, {a['totals']['trials']} trials,"
          f" e2e {e2e(a)} ms")
    print(f"B seeded:  {sw:.0f} s, {st} trials, e2e {e2e(seeded)} ms,"
          f" tasks by tier {seeded['totals']['tasks_by_tier']},"
          f" stopped {stop_counts(seeded)}")
    out = dict(b=b, seeded_wall_s=sw, seeded_trials=st, tiers=seeded["totals"]["tasks_by_tier"],
               stopped=stop_counts(seeded), e2e_ms=dict(seeded=e2e(seeded)))
    if stock is not None:
        rows, missed, t = compare(seeded, stock, args.reach)
        kw, kt = stock["totals"]["tuning_wall_s"], stock["totals"]["trials"]
        print(f"B no-cache (tgc cold): {kw:.0f} s, {kt} trials, e2e {e2e(stock)} ms")
        print(f"whole runs, no-cache / seeded: time {kw / sw:.2f}x, trials {kt / max(st, 1):.2f}x")
        reached = len(rows) - len(missed)
        print(f"time to reach no-cache's final best, summed over the {reached} of {len(rows)}"
              " tasks where seeded got there:"
              f" seeded {t['seeded_s']:.0f} s / {t['seeded_trials']} trials;"
              f" no-cache {t['stock_s']:.0f} s / {t['stock_trials']} trials"
              f" -> {t['stock_s'] / max(t['seeded_s'], 1e-9):.2f}x time,"
              f" {t['stock_trials'] / max(t['seeded_trials'], 1):.2f}x trials")
        print(f"  no-cache reached its own final best after {t['stock_own_s']:.0f} s /"
              f" {t['stock_own_trials']} trials"
              f" ({t['stock_own_s'] / max(t['seeded_s'], 1e-9):.2f}x)")
        print(f"  tasks where seeded never reached it (left out above): {len(missed)}/"
              f"{len(rows)} {missed}")
        lat_ratio = t["lat_seeded"] / t["lat_stock"] if t["lat_stock"] else None
        if lat_ratio:
            print(f"occurrence-weighted task latency seeded / no-cache: {lat_ratio:.3f}")
        if e2e(seeded) and e2e(stock):
            print(f"end-to-end latency seeded / no-cache: {e2e(seeded) / e2e(stock):.3f}")
        out.update(stock_wall_s=kw, stock_trials=kt, totals=t, missed=missed,
                   weighted_latency_ratio=lat_ratio, tasks=rows)
        out["e2e_ms"]["stock"] = e2e(stock)
    tvm_sum, rat = None, {}
    if tvm_rep is not None:
        tvm_sum = stock_lines("B", tvm_rep, stock or seeded)
        tv = (tvm_sum["wall_s"], tvm_sum["e2e_ms"])
        seed = (sw, e2e(seeded))
        rat["total"] = ratios(seed, tv)
        if stock is not None:
            cold = (stock["totals"]["tuning_wall_s"], e2e(stock))
            rat.update(engine=ratios(cold, tv), cache=ratios(seed, cold))
        if "tasks" in seeded:
            n, lat = matched_latency(seeded, tvm_rep)
            rat["total"]["matched_tasks"], rat["total"]["weighted_latency"] = n, lat
    elif stock is not None:
        rat["cache"] = ratios((sw, e2e(seeded)), (stock["totals"]["tuning_wall_s"], e2e(stock)))
    for k, what in (("engine", "tgc cold / stock TVM"), ("cache", "tgc seeded / tgc cold"),
                    ("total", "tgc seeded / stock TVM")):
        if k in rat:
            print(f"{k:6s} ({what}): tuning time {fmt(rat[k]['time'])},"
                  f" e2e latency {fmt(rat[k]['e2e'])}")
    if tvm_sum is not None:
        print(f"  tasks matched by workload hash, {'tgc cold' if stock else 'tgc seeded'} vs"
              f" stock TVM: {tvm_sum['matched_tasks']}, occurrence-weighted best latency"
              f" tgc / stock {fmt(tvm_sum['matched_weighted_latency_tgc_over_tvm'])}")
    out.update(tvm=tvm_sum, ratios=rat or None)
    return out


def stop_counts(rep):
    c = {}
    for t in rep["tasks"]:
        c[t.get("stopped")] = c.get(t.get("stopped"), 0) + 1
    return c


def spread(values):
    """{median, min, max, n} of the values that are not None (None when there are none)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    return dict(median=statistics.median(v), min=v[0], max=v[-1], n=len(v))


def summarize(b, reps):
    """Medians and ranges over the repeats of one B: every ratio, time and latency."""
    out = {}
    for k in ("engine", "cache", "total"):
        for f in ("time", "e2e"):
            sp = spread([(r["ratios"] or {}).get(k, {}).get(f) for r in reps])
            if sp:
                out[f"{k}_{f}"] = sp
    for f, get in (("seeded_wall_s", lambda r: r["seeded_wall_s"]),
                   ("cold_wall_s", lambda r: r.get("stock_wall_s")),
                   ("tvm_wall_s", lambda r: (r["tvm"] or {}).get("wall_s")),
                   ("seeded_e2e_ms", lambda r: r["e2e_ms"].get("seeded")),
                   ("cold_e2e_ms", lambda r: r["e2e_ms"].get("stock")),
                   ("tvm_e2e_ms", lambda r: (r["tvm"] or {}).get("e2e_ms")),
                   ("weighted_latency_seeded_over_cold", lambda r: r.get("weighted_latency_ratio"))):
        sp = spread([get(r) for r in reps])
        if sp:
            out[f] = sp
    if len(reps) > 1:
        print(f"\n== {b}: over {len(reps)} repeats (median [min, max])")
        for k, sp in out.items():
            print(f"  {k}: {sp['median']:.3f} [{sp['min']:.3f}, {sp['max']:.3f}]")
    return out


def markdown_table(summary) -> str:
    """The results as one markdown table: per model, tgc's tuning time and stock TVM's, their
    ratio and the end-to-end latency ratio (median [min, max] over the repeats), the
    occurrence-weighted latency of the tuned tasks (tgc / stock, each repeat) and how the
    tasks ended; then the geometric mean of the B models' time ratios."""

    def cell(sp):
        if not sp:
            return "-"
        if sp["n"] == 1 or sp["min"] == sp["max"]:
            return f"{sp['median']:.3f}"
        return f"{sp['median']:.3f} [{sp['min']:.3f}, {sp['max']:.3f}]"

    def name(path):
        return pathlib.Path(path).stem

    rows = ["| model | tgc s | stock TVM s | time tgc / stock | end to end tgc / stock "
            "| tuned tasks' latency tgc / stock | how tasks ended |",
            "|---|---|---|---|---|---|---|"]
    a_tvm = summary.get("a_tvm")
    if a_tvm:
        eng = a_tvm["engine"]
        one = lambda x: None if x is None else dict(median=x, min=x, max=x, n=1)  # noqa: E731
        rows.append(f"| {name(summary['a'])} (A, cold) | {summary['a_wall_s']:.1f} | "
                    f"{a_tvm['wall_s']:.1f} | {cell(one(eng['time']))} | {cell(one(eng['e2e']))} | "
                    f"{fmt(a_tvm.get('matched_weighted_latency_tgc_over_tvm'))} | |")
    times = []
    for pair in summary["pairs"]:
        sp = pair["spread"]
        reps = pair["repeats"]
        lat = ", ".join(fmt((r["ratios"] or {}).get("total", {}).get("weighted_latency")) for r in reps)
        ended = " / ".join(", ".join(f"{n} {k}" for k, n in sorted(r["stopped"].items())) for r in reps)
        tvm_s = sp.get("tvm_wall_s", {}).get("median")
        rows.append(f"| {name(pair['b'])} | {cell(sp.get('seeded_wall_s'))} | "
                    f"{'-' if tvm_s is None else f'{tvm_s:.1f}'} | {cell(sp.get('total_time'))} | "
                    f"{cell(sp.get('total_e2e'))} | {lat} | {ended} |")
        if sp.get("total_time"):
            times.append(sp["total_time"]["median"])
    if times:
        g = statistics.geometric_mean(times)
        rows.append(f"| geomean of the B models | | | {g:.3f} ({1 / g:.1f}x less) | | | |")
    return "\n".join(rows) + "\n"


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
    p.add_argument("--no-stock", action="store_true",
                   help="skip the stock TVM arm (scripts/stock_tvm.py)")
    p.add_argument("--stock-a", action="store_true", help="run the stock TVM arm on A too")
    p.add_argument("--stock-trials", type=int, default=0,
                   help="stock TVM's max_trials_global (default: tgc's trials per task x "
                        "the tasks tgc tuned)")
    p.add_argument("--stock-builder-timeout", type=float, default=300.0,
                   help="stock TVM LocalBuilder timeout_sec (default tgc's 300; 0: TVM's 30)")
    p.add_argument("--stock-python", default=None,
                   help="python with TVM for stock_tvm.py (default $TGC_PYTHON or bootstrap.sh)")
    p.add_argument("--stock-args", default="",
                   help="extra stock_tvm.py arguments, e.g. '--population 256'")
    p.add_argument("--out", default=None)
    p.add_argument("--tgc", default=None,
                   help="the tgc binary (default target/release/tgc)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each B's tgc arms this many times (each seeded run from a fresh"
                        " copy of its cache) and report medians and ranges")
    p.add_argument("--stock-repeat", type=int, default=1,
                   help="how many of the repeats also run the stock TVM arm")
    p.add_argument("--chain", action="store_true",
                   help="a sequence: each B starts from the cache as the B before it left it"
                        " (A's for the first), instead of from A's")
    p.add_argument("--no-cold", action="store_true",
                   help="skip the tgc --no-cache arm (seeded against stock TVM only)")
    p.add_argument("--reuse", action="store_true",
                   help="reuse reports already in --out (to recompute the comparison)")
    p.add_argument("--table", default=None,
                   help="also write the results as a markdown table to this file (the one "
                        "docs/tuning.md shows)")
    args = p.parse_args()
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="tgc-bench-tune-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "a_cache.sqlite"
    if cache.exists() and not args.reuse:
        sys.exit(f"{cache}: exists; use a fresh --out (or --reuse)")

    seeded_args = args.seeded_args.split()
    a = tune(args.a, cache, out / "a_cold.json", args, seeded_args)
    if not args.no_stock and args.stock_python is None:
        args.stock_python = stock_tvm.tvm_python()
    a_tvm = None
    if args.stock_a and not args.no_stock:
        a_rep = stock_tune(args.a, a, out / "a_tvm.json", args)
        if a_rep is not None:
            a_tvm = stock_lines("A", a_rep, a)
            a_tvm["engine"] = ratios((a["totals"]["tuning_wall_s"], e2e(a)),
                                     (a_tvm["wall_s"], a_tvm["e2e_ms"]))
            print(f"A engine (tgc cold / stock TVM): tuning time {fmt(a_tvm['engine']['time'])},"
                  f" e2e latency {fmt(a_tvm['engine']['e2e'])}")
    pairs, prev = [], cache
    for i, b in enumerate(args.b):
        reps, tvm_reps = [], []
        for r in range(args.repeat):
            tag = f"b{i}" if r == 0 else f"b{i}_r{r}"
            b_cache = out / f"{tag}_cache.sqlite"
            if not (args.reuse and b_cache.exists()):
                snapshot(prev, b_cache)
            seeded = tune(b, b_cache, out / f"{tag}_seeded.json", args, seeded_args)
            stock = None if args.no_cold else tune(
                b, out / "unused.sqlite", out / f"{tag}_stock.json", args, ["--no-cache"])
            tvm_rep = None
            if not args.no_stock and r < args.stock_repeat:
                tvm_rep = stock_tune(b, stock or seeded, out / f"{tag}_tvm.json", args)
                tvm_reps.append(tvm_rep)
            elif tvm_reps:
                tvm_rep = tvm_reps[r % len(tvm_reps)]  # fewer stock runs: reused in order
            reps.append(report_pair(args, a, b, seeded, stock, tvm_rep))
        pairs.append(dict(reps[0], repeats=reps, spread=summarize(b, reps)))
        if args.chain:
            prev = out / f"b{i}_cache.sqlite"  # the sequence goes on from repeat 0's cache
    summary = dict(a=args.a, trials=args.trials, population=args.population,
                   per_round=args.per_round, max_tasks=args.max_tasks, reach=args.reach,
                   tolerance=args.tolerance, seeded_args=args.seeded_args, a_wall_s=a["totals"]["tuning_wall_s"],
                   a_trials=a["totals"]["trials"], a_e2e_ms=e2e(a), a_tvm=a_tvm,
                   stock_trials=args.stock_trials, stock_builder_timeout=args.stock_builder_timeout,
                   stock_args=args.stock_args, repeat=args.repeat,
                   stock_repeat=args.stock_repeat, chain=args.chain, no_cold=args.no_cold,
                   pairs=pairs)
    (out / "bench.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.table:
        table = markdown_table(summary)
        pathlib.Path(args.table).write_text(table)
        print(f"\n{table}")
    print(f"reports in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
