#!/usr/bin/env python3
"""Seconds per measured trial: tgc's tuning session (persistent builder and runner) against stock
MetaSchedule (`ms.tune_tasks` with a stock LocalBuilder and LocalRunner), same task, same
search settings.

    PY=~/.cache/tgc/venv-tvm-0.27.0.post1/bin/python
    cargo build --release -p tgc-cli
    $PY scripts/bench_trial_cost.py --trials 32 [--tasks fused_conv2d_relu_2] [--repeats 2]

Tasks come from a bundled model: `tgc tasks MODEL --json` lists them with their ops and
param/result shapes, and this script turns a conv2d[+add][+relu] task into the worker's
task JSON (3x3 convs get padding 1, strides from the shapes). Both arms tune the workload
that tgc_worker lowers it to, with rand_state 1, the same EvolutionarySearch arguments,
the same trials per round and trial budget, and the XGB cost model:

- tgc: a tuning session (`tgc_worker.session`) in this process, driven as `tgc tune
  --no-cache` drives it (no seeds, patience off), which builds with tgc_worker.pool's
  persistent pool; the best 3 records are re-measured at the end (included in its wall
  time; reported separately as `remeasure_s`).
- stock: `ms.tune_tasks(tasks=[TuneContext], builder=LocalBuilder(), runner=LocalRunner())`
  with their defaults (LocalBuilder: default_build, 30 s timeout, a fresh process pool per
  batch; LocalRunner: EvaluatorConfig number=3, repeat=1, min_repeat_ms=100), a
  MemoryDatabase and round-robin scheduling.

One-time in-process costs (lazy TVM imports, the design space) are paid before timing.
The arms alternate (stock, tgc, stock, tgc, ...); each is repeated --repeats times, and
the median and spread ((max - min) / median) of seconds per trial are reported. The first
tgc run starts the pools (cold), later ones find them warm. Prints a table and writes JSON
(--out).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "tvm" / "python"
sys.path.insert(0, str(PKG))
sys.path.insert(0, str(PKG / "tests"))
# the builder's and runner's processes unpickle tgc_worker functions
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(PKG)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)

TARGET = {"kind": "llvm", "num-cores": 2}


def model_tasks(model: pathlib.Path) -> dict:
    tgc = ROOT / "target" / "release" / "tgc"
    if not tgc.exists():
        sys.exit(f"{tgc}: not built; run `cargo build --release -p tgc-cli` first")
    out = subprocess.run([str(tgc), "tasks", str(model), "--json"], check=True, capture_output=True)
    return {t["name"]: t for t in json.loads(out.stdout)["tasks"]}


def task_json(entry: dict) -> dict:
    """A conv2d [add] [relu] task of `tgc tasks --json` as the worker's task JSON."""
    from tasks import with_defaults

    ops, params, (res,) = entry["ops"], entry["params"], entry["results"]
    if ops[0] != "nn.conv2d" or any(o not in ("add", "nn.relu") for o in ops[1:]):
        sys.exit(f"{entry['name']}: only conv2d[+add][+relu] tasks are supported, got {ops}")
    x, w = params[0]["shape"], params[1]["shape"]
    k, out = w[2], res["shape"]
    pad = (k - 1) // 2
    stride = (x[2] + 2 * pad - k) // (out[2] - 1) if out[2] > 1 else 1
    names = ["x", "w"]
    bindings = [
        {
            "op": "nn.conv2d",
            "operands": [0, 1],
            "attrs": {"strides": [stride, stride], "padding": [pad] * 4},
            "results": [res],
        }
    ]
    extra = []
    for op in ops[1:]:
        if op == "add":
            extra.append(params[2 + len(extra)])
            names.append(f"r{len(extra)}")
            bindings.append({"op": "add", "operands": [None, 1 + len(extra)], "results": [res]})
        else:
            bindings.append({"op": "nn.relu", "operands": [None], "results": [res]})
    # values: the params first (x, w, the adds' other operands), then each binding's result
    n_params = 2 + len(extra)
    for i, b in enumerate(bindings):
        if i > 0:
            b["operands"][0] = n_params + i - 1
    value = n_params + len(bindings) - 1
    ps = [dict(name=n, **p) for n, p in zip(names, params[:2] + extra)]
    return with_defaults(
        {"name": entry["name"], "params": ps, "bindings": bindings, "results": [value]}
    )


def run_tgc(task, trials, per_round, evo, work_dir) -> dict:
    """tgc's engine: a tuning session in this process, driven as `tgc tune --no-cache` drives
    it (rounds of `per_round` until `trials`, no seeds, patience off), then the best 3
    records re-measured with 5 fresh runs each (tgc's defaults; its wall time includes it,
    `remeasure_s` names it)."""
    from tgc_worker.server import _task_and_target
    from tgc_worker.session import close_session, open_session, session

    params = {
        "task": task,
        "target": TARGET,
        "work_dir": work_dir,
        "seed": 1,
        "max_trials": trials,
        "max_round": per_round + per_round // 2,
        "evolutionary": evo,
        "evaluator": {"number": 3, "repeat": 1, "min_repeat_ms": 100},
        "builder_timeout_s": 300.0,
        "runner_timeout_s": 60.0,
        "cost_model": "xgb",
        "cost_model_file": None,
        "rpc": None,
    }
    lt, target = _task_and_target(params)
    t0 = time.perf_counter()
    sid = open_session(lt, target, params)["session"]
    s = session({"session": sid})
    rounds, done = [], 0
    while done < trials:
        r = s.search(min(per_round, trials - done), params["builder_timeout_s"])
        if not r["candidates"]:
            break
        done += len(r["candidates"])
        rounds.append(r)
    searched = time.perf_counter() - t0
    recs = s.records(trials)["records"]
    s.windows([x["candidate"] for x in recs[:3]], 5, 0)
    close_session({"session": sid, "train": True, "cost_model_max_samples": 4096})
    wall = time.perf_counter() - t0
    means = [sum(x["run_secs"]) / len(x["run_secs"]) for x in recs]
    in_rounds = {k: round(sum(r[k] for r in rounds), 3) for k in ("search_s", "build_s", "run_s", "trained_s")}
    return {
        "wall_s": round(wall, 3),
        "trials": done,
        "valid_trials": len(recs),
        "best_s": min(means) if means else None,
        "rounds": in_rounds,
        # what follows the last round: mostly the final re-measurement
        "remeasure_s": round(wall - searched, 3),
    }


def run_stock(lt, trials, per_round, evo, work_dir, builder_timeout=None) -> dict:
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir

    target = tvm.target.Target(TARGET)
    t0 = time.perf_counter()
    ctx = ms.TuneContext(
        logger=get_loggers_from_work_dir(work_dir, [lt.task.name])[0],
        mod=lt.workload,
        target=target,
        space_generator="post-order-apply",
        search_strategy=ms.search_strategy.EvolutionarySearch(**evo),
        task_name=lt.task.name,
        rand_state=1,
        num_threads=2,
    )
    database = ms.database.MemoryDatabase()
    ms.tune_tasks(
        tasks=[ctx],
        task_weights=[1.0],
        work_dir=work_dir,
        max_trials_global=trials,
        max_trials_per_task=trials,
        num_trials_per_iter=per_round,
        builder=ms.builder.LocalBuilder(
            **({"timeout_sec": builder_timeout} if builder_timeout else {})
        ),
        runner=ms.runner.LocalRunner(),
        database=database,
        cost_model="xgb",
        task_scheduler="round-robin",
    )
    wall = time.perf_counter() - t0
    recs = database.get_all_tuning_records()
    secs = [
        sum(float(x) for x in r.run_secs) / len(r.run_secs)
        for r in recs
        if r.run_secs and all(float(x) < 1e9 for x in r.run_secs)
    ]
    return {
        "wall_s": round(wall, 3),
        "trials": len(recs),
        "valid_trials": len(secs),
        "best_s": min(secs) if secs else None,
    }


def warm_up(lt) -> None:
    """One-time in-process costs, untimed, so that neither arm pays them: TVM's lazy imports
    (the tensor intrinsics that the llvm design space rules register, about 30 s here), the
    design space, xgboost."""
    import tvm
    import xgboost  # noqa: F401
    from tvm.s_tir import meta_schedule as ms

    t0 = time.perf_counter()
    ctx = ms.TuneContext(
        mod=lt.workload,
        target=tvm.target.Target(TARGET),
        space_generator="post-order-apply",
        search_strategy=ms.search_strategy.EvolutionarySearch(),
        task_name=lt.task.name,
        num_threads=2,
    )
    ctx.generate_design_space()
    print(f"warm-up {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


def summary(runs) -> dict:
    spt = [r["wall_s"] / r["trials"] for r in runs if r["trials"]]
    valid = [r["wall_s"] / r["valid_trials"] for r in runs if r.get("valid_trials")]
    med = statistics.median(spt)
    return {
        "runs": runs,
        "s_per_trial": [round(x, 4) for x in spt],
        "median_s_per_trial": round(med, 4),
        "spread": round((max(spt) - min(spt)) / med, 4),
        "median_wall_s": round(statistics.median(r["wall_s"] for r in runs), 3),
        "median_s_per_valid_trial": round(statistics.median(valid), 4) if valid else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "keras-resnet50.onnx"))
    ap.add_argument("--tasks", nargs="+", default=["fused_conv2d_relu_2"])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--per-round", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--population", type=int, default=64)
    ap.add_argument("--out", default="bench_trial_cost.json")
    ap.add_argument(
        "--stock-builder-timeout",
        type=float,
        default=None,
        help="LocalBuilder timeout_sec of the stock arm (default: its own, 30 s, which kills "
        "builds on a loaded 2-core machine; tgc's builder_timeout_s default is 300)",
    )
    args = ap.parse_args()
    if args.repeats < 2:
        sys.exit("--repeats must be at least 2")
    evo = {"population_size": args.population, "genetic_num_iters": 1, "init_min_unmeasured": 32}

    from tgc_worker.server import _task_and_target

    listed = model_tasks(pathlib.Path(args.model))
    results = []
    with tempfile.TemporaryDirectory(prefix="tgc-bench-trial-") as tmp:
        for name in args.tasks:
            if name not in listed:
                sys.exit(f"{name}: not a task of {args.model} ({', '.join(sorted(listed))})")
            task = task_json(listed[name])
            lt, _ = _task_and_target({"task": task, "target": TARGET})
            warm_up(lt)
            arms = {"stock": [], "tgc": []}
            for i in range(args.repeats):
                for arm in ("stock", "tgc"):
                    wd = os.path.join(tmp, f"{name}-{arm}-{i}")
                    print(f"[{name}] {arm} run {i + 1}/{args.repeats} ...", file=sys.stderr, flush=True)
                    if arm == "stock":
                        r = run_stock(lt, args.trials, args.per_round, evo, wd, args.stock_builder_timeout)
                    else:
                        r = run_tgc(task, args.trials, args.per_round, evo, wd)
                    print(f"[{name}] {arm}: {json.dumps(r)}", file=sys.stderr, flush=True)
                    arms[arm].append(r)
            s, t = summary(arms["stock"]), summary(arms["tgc"])
            results.append(
                {
                    "task": name,
                    "workload_hash": lt.structural_hash,
                    "stock": s,
                    "tgc": t,
                    "ratio_stock_over_tgc": round(s["median_s_per_trial"] / t["median_s_per_trial"], 3),
                }
            )
    report = {
        "model": os.path.relpath(args.model, ROOT),
        "target": TARGET,
        "trials": args.trials,
        "trials_per_round": args.per_round,
        "evolutionary": evo,
        "repeats": args.repeats,
        "stock_builder_timeout_s": args.stock_builder_timeout or 30.0,
        "tasks": results,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"{'task':28} {'arm':6} {'s/trial (median)':>17} {'spread':>7} {'wall_s':>8} {'trials':>6}")
    for r in results:
        for arm in ("stock", "tgc"):
            a = r[arm]
            print(
                f"{r['task']:28} {arm:6} {a['median_s_per_trial']:17.3f} {a['spread']:7.3f} "
                f"{a['median_wall_s']:8.1f} {a['runs'][0]['trials']:6d}"
            )
        print(f"{r['task']:28} ratio stock/tgc: {r['ratio_stock_over_tgc']:.2f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
