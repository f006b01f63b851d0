"""Produce the small, real MetaSchedule databases that tgc-cache's tests import.

Tunes three tiny TIR tasks (a 1x8x8x8 conv2d+relu, a 16x16x16 matmul, a 1x8x8x8 add) with
stock TVM MetaSchedule on llvm for a handful of trials each, into one JSON database:

    <out>/database_workload.json
    <out>/database_tuning_record.json
    <out>/manifest.json      (versions, target, per-task workload hash and record count)

Run with the pinned venv (tvm/python/bootstrap.sh prints its python):

    $(tvm/python/bootstrap.sh | tail -1) tvm/python/make_ms_fixtures.py cache/tests/fixtures/ms-llvm

Building dominates the cost: about 2.5 s per trial on 2 idle cores, but minutes per batch
on a loaded machine, where the default 30 s (and even 300 s) builder timeout turned every
build of a batch into a failed record; hence the 30 min default. The search is shrunk (small
population) because the fixtures only need real, replayable records, not good ones. The
whole run takes 5 to 25 minutes here.
"""

import argparse
import json
import os
import shutil
import tempfile

import tvm
import tvm_ffi
from tvm import te, topi
from tvm.s_tir import meta_schedule as ms


def conv2d_relu():
    data = te.placeholder((1, 8, 8, 8), "float32", name="data")
    weight = te.placeholder((8, 8, 3, 3), "float32", name="weight")
    out = topi.nn.relu(topi.nn.conv2d_nchw(data, weight, 1, 1, 1))
    return te.create_prim_func([data, weight, out])


def matmul():
    a = te.placeholder((16, 16), "float32", name="a")
    b = te.placeholder((16, 16), "float32", name="b")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((16, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="matmul")
    return te.create_prim_func([a, b, c])


def add():
    x = te.placeholder((1, 8, 8, 8), "float32", name="x")
    y = te.placeholder((1, 8, 8, 8), "float32", name="y")
    z = topi.add(x, y)
    return te.create_prim_func([x, y, z])


TASKS = [("conv2d_relu", conv2d_relu), ("matmul", matmul), ("add", add)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="output directory (replaced)")
    parser.add_argument("--trials", type=int, default=5, help="trials per task")
    parser.add_argument("--build-timeout", type=float, default=1800.0)
    args = parser.parse_args()

    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    work = tempfile.mkdtemp(prefix="tgc-ms-fixtures-")
    db = ms.database.JSONDatabase(work_dir=work)
    hashes = []
    for name, make in TASKS:
        mod = tvm.IRModule({"main": make()})
        ms.tune_tir(
            mod,
            target,
            work_dir=os.path.join(work, name),
            max_trials_global=args.trials,
            num_trials_per_iter=args.trials,
            builder=ms.builder.LocalBuilder(timeout_sec=args.build_timeout),
            runner=ms.runner.LocalRunner(),
            database=db,
            strategy=ms.search_strategy.EvolutionarySearch(
                population_size=32, init_min_unmeasured=8, genetic_num_iters=1
            ),
            seed=1,
        )
        hashes.append((name, str(db.commit_workload(mod).as_json()[0])))
    os.makedirs(args.out, exist_ok=True)
    for f in ("database_workload.json", "database_tuning_record.json"):
        shutil.copyfile(os.path.join(work, f), os.path.join(args.out, f))
    shutil.rmtree(work, ignore_errors=True)
    manifest = describe(args.out, hashes, args.trials)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps(manifest, sort_keys=True))


def describe(out, hashes, trials):
    """The manifest: versions, and per task its workload hash and record counts, read back
    from the written files (a record is valid when some run time is not the 1e10 stub)."""
    with open(os.path.join(out, "database_workload.json")) as f:
        file_hashes = [json.loads(line)[0] for line in f]
    with open(os.path.join(out, "database_tuning_record.json")) as f:
        records = [json.loads(line) for line in f]
    tasks = []
    for name, shash in hashes:
        index = file_hashes.index(shash)
        mine = [body for i, body in records if i == index]
        valid = [b for b in mine if b[1] and any(s < 1e10 for s in b[1])]
        tasks.append(
            {
                "name": name,
                "workload_hash": shash,
                "workload_index": index,
                "record_lines": len(mine),
                "valid_records": len(valid),
            }
        )
    return {
        "schema": "tgc.ms-fixtures/1",
        "tvm_version": tvm.__version__,
        "tvm_ffi_version": tvm_ffi.__version__,
        "target": records[0][1][2] if records else None,
        "trials_per_task": trials,
        "tasks": tasks,
    }


if __name__ == "__main__":
    main()
