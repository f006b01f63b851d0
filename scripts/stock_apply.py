#!/usr/bin/env python3
"""Stock TVM 0.27 applying a MetaSchedule database (what `tgc cache export --model` writes) to
its own import of an ONNX model, through its own path: no tgc code on the compile path.

    PY=~/.cache/tgc/venv-tvm-0.27.0.post1/bin/python
    $PY scripts/stock_apply.py MODEL.onnx DB_DIR [--target JSON] [--out REPORT.json]

1. `relax.frontend.onnx.from_onnx`, DecomposeOpsForInference and compile_relax's own
   preparation (LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR), as
   scripts/stock_tvm.py does (its helpers are reused);
2. `ms.relax_integration.extract_tasks`: which of TVM's tasks the database has a workload
   for (`JSONDatabase(DB_DIR).has_workload`), and which fused functions
   `MetaScheduleApplyDatabase` schedules from it;
3. `ms.relax_integration.compile_relax(database=JSONDatabase(DB_DIR), ...)` and the
   end-to-end timing of stock_tvm.py (20 runs), beside an untuned compile (an empty
   database) timed the same way.

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


def run(model_path, db_dir, target_obj) -> dict:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    import stock_tvm

    if not os.path.isfile(os.path.join(db_dir, "database_workload.json")):
        raise SystemExit(f"{db_dir}: no database_workload.json (not a MetaSchedule database)")
    target = stock_tvm.parse_target(target_obj)
    model = onnx.load(str(model_path))
    inputs = stock_tvm.graph_inputs(model, {})
    mod = from_onnx(model, shape_dict={n: s for n, s, _ in inputs},
                    dtype_dict={n: d for n, _, d in inputs})
    user_mod, tuning_mod = stock_tvm.prepare(mod, target)
    tasks = ms.relax_integration.extract_tasks(tuning_mod, target)
    database = ms.database.JSONDatabase(work_dir=str(db_dir))
    found = [t.task_name for t in tasks if database.has_workload(t.dispatched[0])]
    scheduled = stock_tvm.scheduled_from_database(tuning_mod, target, database)
    inputs_np = stock_tvm.make_inputs(model, inputs)

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
    a = p.parse_args(argv)
    report = run(a.model, a.db_dir, json.loads(a.target))
    text = json.dumps(report, indent=2)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
