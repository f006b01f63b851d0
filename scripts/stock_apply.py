#!/usr/bin/env python3
"""Stock TVM 0.27 applying a MetaSchedule database (what `tgc cache export --model` writes) to
its own import of an ONNX model, through its own path: no tgc code on the compile path.

    PY=~/.cache/tgc/venv-tvm-0.27.0.post1/bin/python
    $PY scripts/stock_apply.py MODEL.onnx DB_DIR [--target JSON] [--out REPORT.json]
    $PY scripts/stock_apply.py MODEL.onnx DB_DIR --against DB_DIR2 [--rounds 6 --runs 5]

1. `relax.frontend.onnx.from_onnx`, DecomposeOpsForInference and compile_relax's own
   preparation (LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR), as
   scripts/stock_tvm.py does (its helpers are reused);
2. `ms.relax_integration.extract_tasks`: which of TVM's tasks the database has a workload
   for (`JSONDatabase(DB_DIR).has_workload`), and which fused functions
   `MetaScheduleApplyDatabase` schedules from it;
3. `ms.relax_integration.compile_relax(database=JSONDatabase(DB_DIR), ...)` and the
   end-to-end timing of stock_tvm.py (20 runs), beside an untuned compile (an empty
   database) timed the same way.

With `--against DB_DIR2` (alternating mode) it compiles the model from both databases and
times the two in alternating rounds in one process (`--rounds` rounds of `--runs` runs each,
the order within a round alternating too), so that both see the same moments of the
machine: an end-to-end ratio between two tuning runs (tgc's records exported with `tgc cache
export --model` against stock TVM's own database, say) measured this way is not the spread
between two processes minutes apart. The report's `alternating` holds each round's medians,
their ratios (DB_DIR / DB_DIR2), the median ratio, its range and how many rounds lie above
1.01 and below 0.99.

Prints and writes a JSON report (schema tgc.stock-apply/1).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True

SCHEMA = "tgc.stock-apply/1"


def prepare(model_path, target_obj):
    """TVM's import of the model as compile_relax takes it, its tuning tasks and inputs."""
    import onnx
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    import stock_tvm

    target = stock_tvm.parse_target(target_obj)
    model = onnx.load(str(model_path))
    inputs = stock_tvm.graph_inputs(model, {})
    mod = from_onnx(model, shape_dict={n: s for n, s, _ in inputs},
                    dtype_dict={n: d for n, _, d in inputs})
    user_mod, tuning_mod = stock_tvm.prepare(mod, target)
    tasks = ms.relax_integration.extract_tasks(tuning_mod, target)
    return target, user_mod, tuning_mod, tasks, stock_tvm.make_inputs(model, inputs)


def open_database(db_dir):
    from tvm.s_tir import meta_schedule as ms

    if not os.path.isfile(os.path.join(db_dir, "database_workload.json")):
        raise SystemExit(f"{db_dir}: no database_workload.json (not a MetaSchedule database)")
    return ms.database.JSONDatabase(work_dir=str(db_dir))


def alternate(model_path, db_dir, other_dir, target_obj, rounds, runs) -> dict:
    """Times the model compiled from `db_dir` (A) and from `other_dir` (B) in alternating
    rounds of `runs` runs each: A then B in even rounds, B then A in odd ones."""
    import statistics

    from tvm.s_tir import meta_schedule as ms

    import stock_tvm

    target, user_mod, tuning_mod, tasks, inputs_np = prepare(model_path, target_obj)
    arms = []
    for d in (db_dir, other_dir):
        database = open_database(d)
        arms.append({
            "database": str(d),
            "tasks_with_records": sum(database.has_workload(t.dispatched[0]) for t in tasks),
            "scheduled_from_database": stock_tvm.scheduled_from_database(tuning_mod, target,
                                                                         database),
            "ex": ms.relax_integration.compile_relax(database, user_mod, target, params=None),
        })
    medians = [[], []]
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            t = stock_tvm.time_model(arms[i]["ex"], target, inputs_np, repeat=runs)
            medians[i].append(t["latency_ms"]["median"])
    ratios = [a / b for a, b in zip(*medians)]
    for arm, m in zip(arms, medians):
        del arm["ex"]
        arm["round_medians_ms"] = m
        arm["median_ms"] = statistics.median(m)
    return {
        "schema": SCHEMA,
        "model": str(model_path),
        "tasks_extracted": len(tasks),
        "alternating": {
            "rounds": rounds,
            "runs_per_round": runs,
            "threads": stock_tvm.runtime_threads(),
            "a": arms[0],
            "b": arms[1],
            "ratios": ratios,
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "rounds_above_1_01": sum(x > 1.01 for x in ratios),
            "rounds_below_0_99": sum(x < 0.99 for x in ratios),
        },
    }


def run(model_path, db_dir, target_obj) -> dict:
    from tvm.s_tir import meta_schedule as ms

    import stock_tvm

    database = open_database(db_dir)
    target, user_mod, tuning_mod, tasks, inputs_np = prepare(model_path, target_obj)
    found = [t.task_name for t in tasks if database.has_workload(t.dispatched[0])]
    scheduled = stock_tvm.scheduled_from_database(tuning_mod, target, database)

    t0 = time.time()
    ex = ms.relax_integration.compile_relax(database, user_mod, target, params=None)
    compile_s = time.time() - t0
    tuned = stock_tvm.time_model(ex, target, inputs_np)
    with tempfile.TemporaryDirectory(prefix="tgc-stock-apply-") as empty:
        ex0 = ms.relax_integration.compile_relax(
            ms.database.JSONDatabase(work_dir=empty), user_mod, target, params=None
        )
        untuned = stock_tvm.time_model(ex0, target, inputs_np)
    return {
        "schema": SCHEMA,
        "model": str(model_path),
        "database": str(db_dir),
        "tasks_extracted": len(tasks),
        "tasks_with_records": len(found),
        "tasks_found": found,
        "scheduled_from_database": scheduled,
        "compile_s": compile_s,
        "end_to_end": tuned,
        "untuned_end_to_end": untuned,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("db_dir")
    p.add_argument("--target", default='{"kind": "llvm"}',
                   help="TVM target JSON (num-cores is filled in from this machine)")
    p.add_argument("--out", help="write the report here too")
    p.add_argument("--against", metavar="DB_DIR2",
                   help="alternating mode: time DB_DIR's compile against this database's")
    p.add_argument("--rounds", type=int, default=6, help="alternating rounds (default 6)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per round (default 5)")
    a = p.parse_args(argv)
    if a.rounds < 1 or a.runs < 1:
        p.error("--rounds and --runs must be at least 1")
    import stock_tvm

    # Before any kernel runs: TVM's thread pool on the thread count tgc's worker uses.
    stock_tvm.runtime_threads()
    if a.against:
        report = alternate(a.model, a.db_dir, a.against, json.loads(a.target), a.rounds, a.runs)
    else:
        report = run(a.model, a.db_dir, json.loads(a.target))
    text = json.dumps(report, indent=2)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
