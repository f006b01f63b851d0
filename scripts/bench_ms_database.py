#!/usr/bin/env python3
"""Stock MetaSchedule tuning a model with tgc's cache as its database, against stock MetaSchedule
with its own JSON database, on a model B that was never tuned but whose structural neighbour A
was (issue 31, delivery 3).

    PY=~/.cache/tgc/venv-tvm-0.27.0.post1/bin/python
    $PY scripts/bench_ms_database.py models/keras-resnet50.onnx --b-shape input=1,160,160,3 \\
        --a-trials 64 --trials 64 --out DIR

1. A (the file as it is) is tuned by `tgc tune --trials A_TRIALS --no-measure` into
   DIR/cache.sqlite, unless `--cache` names one already made.
2. B is TVM's own import of the model (`--b`, default the same file) with `--b-shape`,
   prepared as `compile_relax` prepares it (scripts/stock_tvm.py).
3. Every arm runs stock `ms.relax_integration.tune_relax` on B with the same trials, trials
   per round, population and seed. stock: `JSONDatabase` in DIR/stock and MetaSchedule's
   `EvolutionarySearch`. tgc: `tgc.ms.Database(cache, target, model=B)`, which gives every
   task the cache has no record of tgc's transfer from A (its planning, timed apart, counts
   in the arm's time), and the same search. tgc-seeded: that Database and
   `tgc.ms.SeededSearch` around the same search (the transfers measured first). Every commit
   is timestamped by a recording database around each.
4. Per arm: each task's best latency over time, the model's estimated latency over time
   (sum of weight x best over the tasks; unknown until every task has a valid record), the
   time at which it first reaches stock's final estimate, and the two databases compiled
   with `compile_relax` and timed end to end in alternating rounds in this process.

Writes DIR/report.json (schema tgc.bench-ms-database/1) and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sqlite3
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True

SCHEMA = "tgc.bench-ms-database/1"

import tvm  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir.meta_schedule.database import PyDatabase  # noqa: E402


@derived_object
class Recording(PyDatabase):
    """`inner` with every committed record timestamped: (seconds since t0, workload hash,
    mean run seconds or None for a failed candidate)."""

    def __init__(self, inner, t0: float):
        super().__init__()
        self.inner, self.t0, self.log = inner, t0, []

    def has_workload(self, mod):
        return self.inner.has_workload(mod)

    def commit_workload(self, mod):
        return self.inner.commit_workload(mod)

    def commit_tuning_record(self, rec):
        import stock_tvm

        self.inner.commit_tuning_record(rec)
        self.log.append((time.time() - self.t0, stock_tvm.hash_u64(rec.workload.mod),
                         stock_tvm._secs(rec)))

    def get_top_k(self, workload, top_k):
        return self.inner.get_top_k(workload, top_k)

    def get_all_tuning_records(self):
        return self.inner.get_all_tuning_records()

    def __len__(self):
        return len(self.inner)


def tgc_cli() -> str:
    cli = os.environ.get("TGC_CLI") or str(ROOT / "target" / "debug" / "tgc")
    if not os.path.exists(cli):
        subprocess.run(["cargo", "build", "--locked", "-q", "-p", "tgc-cli"], cwd=ROOT, check=True)
    return cli


def curves(log, tasks) -> dict:
    """Per task its best over time; the model's estimate over time; the final estimate."""
    weight = {h: w for h, w, _ in tasks}
    best: dict = {}
    estimate = []
    per_task = {h: [] for h in weight}
    for t, h, secs in sorted(log):
        if secs is None or h not in weight or (h in best and best[h] <= secs):
            continue
        best[h] = secs
        per_task[h].append((round(t, 3), secs))
        if len(best) == len(weight):
            estimate.append((round(t, 3), sum(weight[k] * best[k] for k in weight)))
    return {"per_task": per_task, "estimate_s": estimate,
            "final_estimate_s": estimate[-1][1] if estimate else None}


def per_task_against(mine, stock) -> dict:
    """Per task: the final best against stock's final best, and the time each first reaches
    stock's final best (stock's own: when it found it)."""
    out = {}
    for h, curve in mine.items():
        goal = stock[h][-1][1] if stock.get(h) else None
        final = curve[-1][1] if curve else None
        out[h] = {"final_s": final, "stock_final_s": goal,
                  "final_over_stock": final / goal if final and goal else None,
                  "reaches_stock_final_s": first_reach(curve, goal),
                  "stock_reaches_s": stock[h][-1][0] if stock.get(h) else None}
    return out


def task_summary(tasks: dict) -> dict:
    """How many tasks end no slower than stock, the geomean of final ratios, how many reach
    stock's final best, and the median of their time to it over stock's time to it."""
    ratios = [t["final_over_stock"] for t in tasks.values() if t["final_over_stock"]]
    reach = [t["reaches_stock_final_s"] / t["stock_reaches_s"] for t in tasks.values()
             if t["reaches_stock_final_s"] is not None and t["stock_reaches_s"]]
    return {"tasks": len(tasks), "compared": len(ratios),
            "no_slower": sum(1 for r in ratios if r <= 1 + 1e-9),
            "final_geomean": statistics.geometric_mean(ratios) if ratios else None,
            "final_range": [min(ratios), max(ratios)] if ratios else None,
            "reach_stock_final": len(reach),
            "reach_time_over_stock_median": statistics.median(reach) if reach else None}


def first_reach(estimate, goal):
    if goal is None:
        return None
    return next((t for t, e in estimate if e <= goal * (1 + 1e-9)), None)


def tune_arm(name, tuning_mod, target, work_dir, database, args, log, seeded=False):
    from tvm.s_tir import meta_schedule as ms

    import tgc.ms

    log(f"{name}: tune_relax, {args.trials} trials, {args.per_round} per round")
    search = ms.search_strategy.EvolutionarySearch(population_size=args.population)
    t0 = time.time()
    ms.relax_integration.tune_relax(
        tuning_mod, {}, target, str(work_dir), args.trials, num_trials_per_iter=args.per_round,
        database=database, builder=ms.builder.LocalBuilder(timeout_sec=args.builder_timeout),
        strategy=(tgc.ms.SeededSearch(search) if seeded else search),
        seed=args.seed,
    )
    return time.time() - t0


def run(args, log=print) -> dict:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    import stock_tvm
    import tgc
    import tgc.ms

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = stock_tvm.runtime_threads()
    target = tgc.ms._target(args.target)

    cache = pathlib.Path(args.cache) if args.cache else out / "cache.sqlite"
    a_s = None
    if not args.cache:
        if cache.exists():
            raise SystemExit(f"{cache}: exists; give it as --cache or use an empty --out")
        log(f"A: tgc tune {args.a} --trials {args.a_trials}")
        t0 = time.time()
        subprocess.run([tgc_cli(), "tune", str(args.a), "--cache", str(cache), "--target", args.target,
                        "--trials", str(args.a_trials), "--trials-per-round", str(args.per_round),
                        "--population", str(args.population), "--no-measure",
                        "--report", str(out / "a.json"), "--work-dir", str(out / "a")], check=True)
        a_s = time.time() - t0

    b_path = args.b or args.a
    model = onnx.load(str(b_path))
    inputs = stock_tvm.graph_inputs(model, stock_tvm.parse_shapes(args.b_shape))
    mod = from_onnx(model, shape_dict={n: s for n, s, _ in inputs},
                    dtype_dict={n: d for n, _, d in inputs})
    user_mod, tuning_mod = stock_tvm.prepare(mod, target)
    extracted = ms.relax_integration.extract_tasks(tuning_mod, target)
    tasks = [(stock_tvm.hash_u64(t.dispatched[0]), int(t.weight), t.task_name) for t in extracted]
    log(f"B: {len(tasks)} tasks")
    from tgc_worker.tvmutil import ensure_tensor_intrin

    ensure_tensor_intrin()

    arms = {}
    for name in args.arms:
        t0 = time.time()
        (out / name).mkdir(exist_ok=True)
        if name == "stock":
            db = Recording(ms.database.JSONDatabase(work_dir=str(out / name)), t0)
            arms[name] = dict(tuning_s=tune_arm(name, tuning_mod, target, out / name, db, args, log),
                              log=db.log, db=db)
            continue
        # each tgc arm reads a copy of A's cache, since the arms commit into it
        arm_cache = out / name / "cache.sqlite"
        with sqlite3.connect(cache) as src, sqlite3.connect(arm_cache) as dst:
            src.backup(dst)
        t0 = time.time()
        inner = tgc.ms.Database(arm_cache, target, create=False, model=mod, name="b")
        plan_s = time.time() - t0
        db = Recording(inner, t0)
        tuning_s = plan_s + tune_arm(name, tuning_mod, target, out / name, db, args, log,
                                     seeded=name == "tgc-seeded")
        arms[name] = dict(tuning_s=tuning_s, plan_s=plan_s, log=db.log, db=db,
                          transfers_served=inner.transfers_served,
                          tasks_with_transfer=len(inner._transfers))

    report = {"schema": SCHEMA, "a": str(args.a), "b": str(b_path), "b_shape": args.b_shape,
              "target": json.loads(json.dumps(tgc.ms._json_safe(target.export()))),
              "settings": {"a_trials": args.a_trials, "trials": args.trials,
                           "per_round": args.per_round, "population": args.population,
                           "seed": args.seed, "builder_timeout": args.builder_timeout,
                           "runtime_threads": threads},
              "a_tuning_s": a_s, "tasks": [{"hash": h, "weight": w, "name": n} for h, w, n in tasks],
              "arms": {}}
    for name, arm in arms.items():
        c = curves(arm["log"], [(h, w, n) for h, w, n in tasks])
        arm.update(c)
    goal = arms["stock"]["final_estimate_s"]
    for name, arm in arms.items():
        arm["reaches_stock_final_s"] = first_reach(arm["estimate_s"], goal)
    for name, arm in arms.items():
        arm["tasks"] = per_task_against(arm["per_task"], arms["stock"]["per_task"])

    log("compiling both and timing end to end in alternating rounds")
    inputs_np = stock_tvm.make_inputs(model, inputs)
    exes = {name: ms.relax_integration.compile_relax(arm["db"], user_mod, target, params=None)
            for name, arm in arms.items()}
    medians = {name: [] for name in arms}
    order = list(arms)
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            medians[name].append(stock_tvm.time_model(exes[name], target, inputs_np,
                                                      repeat=args.runs)["latency_ms"]["median"])
    for name, arm in arms.items():
        del arm["db"]
        arm["trials_committed"] = len(arm.pop("log"))
        arm["e2e_round_medians_ms"] = medians[name]
        arm["e2e_ms"] = statistics.median(medians[name])
        report["arms"][name] = arm
    s = report["arms"]["stock"]
    report["ratios"] = {name: {
        "tuning_s_over_stock": t["tuning_s"] / s["tuning_s"],
        "time_to_stock_final_over_stock": (t["reaches_stock_final_s"] / s["reaches_stock_final_s"]
                                           if t["reaches_stock_final_s"] and s["reaches_stock_final_s"]
                                           else None),
        "e2e_over_stock": t["e2e_ms"] / s["e2e_ms"],
        "per_task": task_summary(t["tasks"]),
        "e2e_round_ratios": [a / b for a, b in zip(t["e2e_round_medians_ms"], s["e2e_round_medians_ms"])],
    } for name, t in report["arms"].items() if name != "stock"}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", help="model A, an ONNX file (tuned by tgc first)")
    p.add_argument("--b", help="model B, an ONNX file (default: A's file)")
    p.add_argument("--b-shape", action="append", default=[], help="B's input shape NAME=D,D,...")
    p.add_argument("--target", default="llvm", help="as tgc spells it (llvm: this machine)")
    p.add_argument("--cache", help="a cache A was tuned into already (skips step 1)")
    p.add_argument("--a-trials", type=int, default=64)
    p.add_argument("--trials", type=int, default=64, help="tune_relax's max_trials_global, per arm")
    p.add_argument("--per-round", type=int, default=8)
    p.add_argument("--population", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--builder-timeout", type=float, default=120.0,
                   help="LocalBuilder timeout, both arms (its first build in a process imports TVM)")
    p.add_argument("--rounds", type=int, default=6, help="alternating end-to-end rounds")
    p.add_argument("--runs", type=int, default=10, help="timed runs per round")
    p.add_argument("--arms", default="stock,tgc,tgc-seeded",
                   type=lambda v: [a for a in v.split(",") if a],
                   help="which arms, in this order (stock first): stock, tgc, tgc-seeded")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.arms[:1] != ["stock"] or not set(args.arms) <= {"stock", "tgc", "tgc-seeded"}:
        p.error("--arms: stock first, then tgc and/or tgc-seeded")
    r = run(args, log=lambda m: print(m, file=sys.stderr))
    print(f"B: {len(r['tasks'])} tasks")
    for name, a in r["arms"].items():
        served = (f"; transferred to {a['tasks_with_transfer']} tasks, served {a['transfers_served']}"
                  f" records" if "transfers_served" in a else "")
        print(f"{name:11s} tuning {a['tuning_s']:7.1f} s, estimate {a['final_estimate_s']},"
              f" reaches stock's final at {a['reaches_stock_final_s']} s, e2e {a['e2e_ms']:.2f} ms"
              f"{served}")
    for name, q in r["ratios"].items():
        t = q["per_task"]
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"{name:11s} per task: {t['no_slower']}/{t['compared']} no slower than stock, final"
              f" geomean {fmt(t['final_geomean'])}x, {t['reach_stock_final']} reach stock's final"
              f" best in a median {fmt(t['reach_time_over_stock_median'])}x stock's time to it")
    print(json.dumps(r["ratios"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
