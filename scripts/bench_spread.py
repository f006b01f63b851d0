#!/usr/bin/env python3
"""Run-to-run spread of one schedule (issue 13.3): the search's single measurement against
tgc's re-measurement (median of fresh runs), each repeated minutes apart.

    PY=~/.cache/tgc/venv-tvm-0.27.0.post1/bin/python
    $PY scripts/bench_spread.py --cache CACHE.sqlite [--task NAME] [--rounds 10] [--gap 30]
        [--repeats 5] [--out spread.json]

The schedule is the best record of one task in a tgc cache (default: the task whose best
record is slowest, i.e. the one that weighs most), replayed on its stored TVM workload for
the record's stored target. Every round builds it afresh with the worker's persistent
builder (tgc_worker.pool, as `tgc tune` does) and measures it twice, back to back:

- before: the search's measurement, which is what a record's latency used to be: one run
  of MetaSchedule's default evaluator (number=3, repeat=1, min_repeat_ms=100, no cache
  flush), as LocalRunner and tgc's search measure every candidate;
- after: tgc's re-measurement before a record is written back and when an exact hit is
  checked: the same evaluator with repeat=R (default 5), the median kept;
- the minimum of those R runs (`after_min`): interference from other work on the machine
  only ever adds time, so the fastest of R fresh runs of one schedule is an estimate of its
  latency too (one schedule: no selection across candidates, as in a search's minimum).

Each round also re-measures the task's second-best record right after the best (the
runner-up, the other exact seed of a hit): the ratio best / runner-up, both measured in
the same second, shows how much of the drift is the machine's, common to both schedules,
and how much is the schedule's own.

Rounds are --gap seconds apart, so the spread is the one an exact hit meets when it is
checked in a later run. The runner's measuring process persists across rounds, as it does
across a run's tasks; with --fresh-runner every round measures in a new one (as a later
run does), which separates what a process brings to a schedule's latency (where its buffers
land, say) from the machine's load: within one process both schedules see the same
process, so their ratio moves with the machine only. Per kind: median, min, max, spread ((max - min) / median) and the
share of rounds within 5 % of the kind's median (what the default exact-hit tolerance
asks). Also the bias the old cached latency had: the minimum of the `before` values (a
search keeps its minimum) against the median of the `after` values.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sqlite3
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKER = str(ROOT / "tvm" / "python")
sys.path.insert(0, WORKER)
# the builder's pool processes import tgc_worker too
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (WORKER, os.environ.get("PYTHONPATH")) if p)


def pick(db: sqlite3.Connection, task: str | None):
    """(task_name, workload_json, [best, runner-up trace_json], target_json, [their cached
    latencies]) of the chosen task (one with two records)."""
    rows = db.execute(
        """SELECT r.task_name, t.workload_json, tr.trace_json, tg.canonical_json, r.mean_latency
           FROM records r JOIN tasks t ON t.id = r.task_id JOIN traces tr ON tr.id = r.trace_id
           JOIN targets tg ON tg.id = r.target_id
           WHERE t.workload_json IS NOT NULL AND r.task_name IS NOT NULL
           ORDER BY r.task_id, r.mean_latency"""
    ).fetchall()
    best = {}
    for name, wl, tj, tg, lat in rows:
        b = best.setdefault(name, (name, wl, [], tg, []))
        if len(b[2]) < 2:
            b[2].append(tj)
            b[4].append(lat)
    best = {k: v for k, v in best.items() if len(v[2]) == 2}
    if not best:
        sys.exit("bench_spread: the cache has no task with two records and a stored workload")
    if task is not None:
        if task not in best:
            sys.exit(f"bench_spread: no task {task!r} with two records; tasks: "
                     f"{', '.join(sorted(best))}")
        return best[task]
    return max(best.values(), key=lambda b: b[4][0])


def summary(vals: list[float]) -> dict:
    med = statistics.median(vals)
    return {
        "runs_s": vals,
        "median_s": med,
        "min_s": min(vals),
        "max_s": max(vals),
        "spread": (max(vals) - min(vals)) / med,
        "within_5pct": sum(abs(v - med) <= 0.05 * med for v in vals) / len(vals),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", required=True)
    p.add_argument("--task")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--gap", type=float, default=30.0, help="seconds between rounds")
    p.add_argument("--repeats", type=int, default=5, help="fresh runs of a re-measurement")
    p.add_argument("--fresh-runner", action="store_true",
                   help="measure every round in a new runner process")
    p.add_argument("--out")
    args = p.parse_args()
    if args.rounds < 2 or args.repeats < 1 or args.gap < 0:
        sys.exit("bench_spread: needs --rounds >= 2, --repeats >= 1, --gap >= 0")

    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from tgc_worker import pool
    from tgc_worker.replay import new_schedule
    from tgc_worker.tvmutil import (default_runtime_threads, parse_target, physical_cores,
                                    runtime_threads, target_num_cores)

    # the runner process inherits it: the thread count tgc's worker measures with
    default_runtime_threads()

    db = sqlite3.connect(f"file:{args.cache}?mode=ro", uri=True)
    name, wl, tjs, tg, cached = pick(db, args.task)
    target = parse_target(json.loads(tg))
    mod = tvm.ir.load_json(wl)
    mods = []
    for tj in tjs:
        sch = new_schedule(mod)
        tvm.s_tir.Trace.apply_json_to_schedule(json.loads(tj), sch)
        mods.append((sch.mod, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
    builder = pool.get_builder(target_num_cores(target) or physical_cores(), 300.0)
    runner = pool.get_runner(300.0, None)
    search = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100)
    remeasure = ms.runner.EvaluatorConfig(number=3, repeat=args.repeats, min_repeat_ms=100)

    def measure(which, evaluator) -> list[list[float]]:
        res = pool.build_and_measure_mods(builder, runner, which, target, evaluator)
        for secs, err in res:
            if secs is None:
                sys.exit(f"bench_spread: {name}: measuring failed: {err}")
        return [[float(s) for s in secs] for secs, _ in res]

    print(f"{name}: cached {cached[0] * 1e6:.1f} us (runner-up {cached[1] * 1e6:.1f} us); "
          f"{args.rounds} rounds, {args.gap:.0f} s apart", flush=True)
    before, after, after_min, second, t0 = [], [], [], [], time.time()
    for i in range(args.rounds):
        if i:
            time.sleep(args.gap)
            if args.fresh_runner:
                runner.shutdown()  # the next measurement starts a new process
        ((b,),) = measure(mods[:1], search)
        runs_a, runs_r = measure(mods, remeasure)
        a, r = statistics.median(runs_a), statistics.median(runs_r)
        before.append(b)
        after.append(a)
        after_min.append(min(runs_a))
        second.append(r)
        print(f"  round {i + 1} at {time.time() - t0:5.0f} s: search {b * 1e6:9.1f} us, "
              f"re-measured {a * 1e6:9.1f} us, runner-up {r * 1e6:9.1f} us", flush=True)
    res = {
        "schema": "tgc.bench-spread/1",
        "cache": args.cache,
        "task": name,
        "target": json.loads(tg),
        "cached_latency_s": cached[0],
        "runner_up_cached_latency_s": cached[1],
        "rounds": args.rounds,
        "gap_s": args.gap,
        "fresh_runner": args.fresh_runner,
        "threads": runtime_threads(),
        "evaluator": {"number": 3, "min_repeat_ms": 100, "enable_cpu_cache_flush": False},
        "before": {"kind": "search measurement (repeat=1)", **summary(before)},
        "after": {"kind": f"re-measurement (median of repeat={args.repeats})", **summary(after)},
    }
    res["after_min"] = {"kind": f"re-measurement (min of repeat={args.repeats})",
                        **summary(after_min)}
    res["runner_up"] = {"kind": res["after"]["kind"], **summary(second)}
    res["ratio_to_runner_up"] = {"kind": "best / runner-up, both re-measured in one round",
                                 **summary([a / r for a, r in zip(after, second)])}
    res["old_cached_bias"] = min(before) / res["after"]["median_s"]
    for k in ("before", "after", "after_min", "runner_up", "ratio_to_runner_up"):
        s = res[k]
        unit = 1.0 if k.startswith("ratio") else 1e6
        print(f"{k:18}: median {s['median_s'] * unit:.3f}, [{s['min_s'] * unit:.3f}, "
              f"{s['max_s'] * unit:.3f}], spread {s['spread']:.1%}, "
              f"{s['within_5pct']:.0%} of rounds within 5 % of the median")
    print(f"min of the search's measurements / median re-measured: {res['old_cached_bias']:.3f}")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
