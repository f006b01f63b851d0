"""A MetaSchedule database made by stock TVM, for the import-then-tune test (cli/tests/tune.rs).

Imports an ONNX model with TVM's own frontend and pipeline (from_onnx, DecomposeOpsForInference,
LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR), extracts MetaSchedule's
tasks, and tunes the task of the largest weight (the most frequent; it must be the only one of
that weight), or with `--all-tasks` every task, with `ms.tune_tasks` for a few trials each
into a JSON database:

    <out>/database_workload.json
    <out>/database_tuning_record.json
    <out>/manifest.json   (task name, weight, workload hash, valid records, target; with
                           --all-tasks `tasks`, each task's name, weight and workload hash)

    PYTHONPATH=tvm/python $TGC_PYTHON cli/tests/stock_ms_db.py models/keras-densenet121.onnx OUT

The database is stock MetaSchedule's: its search, task scheduler, runner and JSON database
write it. Two things come from tgc_worker, neither of which shapes a record: its faster
loading of TVM's tensor intrinsics in this process, and the builder's build function
(`tgc_worker.build_worker.build`, given to the stock LocalBuilder as its `f_build`), which
compiles as MetaSchedule's `default_build` does without first importing those intrinsics
in every build process: LocalBuilder starts fresh processes for every batch, and that
import took about 40 s of each here, 25 minutes for one trial of each of MobileNetV2's 38
tasks. The search is shrunk because the test needs real, replayable records, not good
ones.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import warnings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("out", help="output directory (replaced)")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--num-cores", type=int, default=2)
    parser.add_argument("--build-timeout", type=float, default=1800.0)
    parser.add_argument("--all-tasks", action="store_true", help="tune every task, --trials each")
    args = parser.parse_args()

    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    try:
        model = onnx.load(args.model)
    except Exception as e:  # noqa: BLE001
        print(f"{args.model}: not a readable ONNX model ({type(e).__name__})", file=sys.stderr)
        return 1
    weights = {i.name for i in model.graph.initializer}
    data = [v for v in model.graph.input if v.name not in weights][0]
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = from_onnx(model, shape_dict={data.name: shape}, keep_params_in_input=False)
    pipeline = tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
    )
    with tvm.transform.PassContext(opt_level=2):
        mod = pipeline(mod)
    target = tvm.target.Target({"kind": "llvm", "num-cores": args.num_cores})
    tasks = ms.relax_integration.extract_tasks(mod, target)
    top = max(int(t.weight) for t in tasks)
    chosen = tasks if args.all_tasks else [t for t in tasks if int(t.weight) == top]
    if len(chosen) != 1 and not args.all_tasks:
        names = ", ".join(t.task_name for t in chosen)
        print(f"{args.model}: {len(chosen)} tasks share the largest weight {top}: {names}", file=sys.stderr)
        return 1
    task = max(chosen, key=lambda t: int(t.weight))

    from tgc_worker import build_worker
    from tgc_worker.tvmutil import ensure_tensor_intrin

    ensure_tensor_intrin()
    work = tempfile.mkdtemp(prefix="tgc-stock-ms-")
    try:
        contexts, task_weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            chosen,
            work,
            strategy=ms.search_strategy.EvolutionarySearch(
                population_size=32, init_min_unmeasured=8, genetic_num_iters=1
            ),
            num_threads=args.num_cores,
            seed=1,
        )
        database = ms.tune_tasks(
            tasks=contexts,
            task_weights=task_weights,
            work_dir=work,
            max_trials_global=args.trials * len(chosen),
            num_trials_per_iter=args.trials,
            builder=ms.builder.LocalBuilder(timeout_sec=args.build_timeout, f_build=build_worker.build),
            runner=ms.runner.LocalRunner(),
            database="json",
            cost_model="random",
        )
        hashes = [str(database.commit_workload(t.mod).as_json()[0]) for t in chosen]
        workload_hash = hashes[chosen.index(task)]
        shutil.rmtree(args.out, ignore_errors=True)
        os.makedirs(args.out)
        for f in ("database_workload.json", "database_tuning_record.json"):
            shutil.copyfile(os.path.join(work, f), os.path.join(args.out, f))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    manifest = _manifest(args.out, task, top, workload_hash)
    if args.all_tasks:
        manifest["tasks"] = [
            {"task": t.task_name, "weight": int(t.weight), "workload_hash": h}
            for t, h in zip(chosen, hashes)
        ]
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps(manifest, sort_keys=True))
    return 0


def _manifest(out: str, task, weight: int, workload_hash: str) -> dict:
    """What the database in `out` holds: its records, the valid ones, the tuned task."""
    import tvm
    import tvm_ffi

    with open(os.path.join(out, "database_tuning_record.json")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    valid = [r for r in records if r[1][1] and any(s < 1e10 for s in r[1][1])]
    return {
        "task": task.task_name,
        "weight": weight,
        "workload_hash": workload_hash,
        "tvm_structural_hash": str(tvm_ffi.structural_hash(task.mod)),
        "records": len(records),
        "valid_records": len(valid),
        "target": records[0][1][2] if records else None,
        "tvm_version": tvm.__version__,
    }


if __name__ == "__main__":
    sys.exit(main())
