"""TVM's view of the similarity study: tasks by TVM structural hash and by task name.

    PYTHONPATH=tvm/python $PY tvm/python/similarity_tvm.py --out DIR MODEL.onnx...

For every ONNX model, runs stock TVM 0.27 the way `tgc_tvm_ref` does (from_onnx, then
DecomposeOpsForInference, LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR,
MetaSchedule `extract_tasks` for llvm) and records each task's name, weight and
`structural_hash`. Writes `DIR/<model>.json` per model (reused on later runs when the ONNX
file's sha256 is unchanged) and `DIR/tvm-similarity.json` with, per model, the census and the
coverage matrices under three keys:

- `hash`: TVM's structural hash of the task's normalized IRModule (what MetaSchedule's
  database keys tuning records by);
- `name`: the task name with trailing digits stripped (`fused_conv2d3_add_relu2` ->
  `fused_conv2d3_add_relu`), the name-based family key the TGC paper used;
- `ops`: every `_`-separated part of the name stripped of trailing digits
  (`fused_conv2d_add_relu`): the sequence of legalized ops, as tgc's family key.

Coverage of row r by column c: the share of r's task weight whose key occurs in c; coverage
by others: the share whose key occurs in any other model given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings

from tgc_tvm_ref.reference import (
    PASS_CONTEXT_OPT_LEVEL,
    UserError,
    _run_pipeline,
    _sha256,
    load_onnx,
    resolve_shapes,
)

SCHEMA = "tgc.tvm-similarity/1"
KEYS = ("hash", "name", "ops")


def name_family(task_name: str) -> str:
    return task_name.rstrip("0123456789") or task_name


def ops_family(task_name: str) -> str:
    return "_".join(part.rstrip("0123456789") or part for part in task_name.split("_"))


def model_tasks(path: str) -> list[dict]:
    import tvm
    import tvm_ffi
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    model = load_onnx(path)
    shapes = resolve_shapes(path, model, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imported = from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    fused = _run_pipeline(imported)
    with tvm.transform.PassContext(opt_level=PASS_CONTEXT_OPT_LEVEL):
        lowered = relax.transform.FuseTIR()(fused)
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    tasks = ms.relax_integration.extract_tasks(lowered, target=target)
    return [
        {
            "task_name": str(t.task_name),
            "weight": int(t.weight),
            "hash": str(int(tvm_ffi.structural_hash(t.mod))),
        }
        for t in tasks
    ]


def key_of(task: dict, key: str) -> str:
    if key == "hash":
        return task["hash"]
    if key == "name":
        return name_family(task["task_name"])
    return ops_family(task["task_name"])


def census(tasks: list[dict], key: str) -> dict:
    occurrences = sum(t["weight"] for t in tasks)
    distinct = len({key_of(t, key) for t in tasks})
    repetition = 0.0 if occurrences == 0 else 1.0 - distinct / occurrences
    return {"occurrences": occurrences, "distinct": distinct, "repetition": repetition}


def coverage(row: list[dict], col: list[dict], key: str) -> float:
    keys = {key_of(t, key) for t in col}
    total = sum(t["weight"] for t in row)
    hit = sum(t["weight"] for t in row if key_of(t, key) in keys)
    return 0.0 if total == 0 else hit / total


def coverage_by_others(names: list[str], per_model: dict, r: str, key: str) -> float:
    others = [t for n in names if n != r for t in per_model[n]]
    return coverage(per_model[r], others, key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="ONNX files; a model is named by its stem")
    parser.add_argument("--out", required=True, help="directory for the JSON files")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    names, per_model = [], {}
    for path in args.models:
        name = os.path.splitext(os.path.basename(path))[0]
        cache = os.path.join(args.out, f"{name}.json")
        digest = _sha256(path)
        entry = None
        if os.path.exists(cache):
            with open(cache, encoding="utf-8") as handle:
                entry = json.load(handle)
            if entry.get("sha256") != digest:
                entry = None
        if entry is None:
            try:
                entry = {"model": name, "sha256": digest, "tasks": model_tasks(path)}
            except UserError as exc:
                print(f"similarity_tvm: {exc}", file=sys.stderr)
                return 1
            with open(cache, "w", encoding="utf-8") as handle:
                json.dump(entry, handle, indent=1, sort_keys=True)
            print(f"{name}: {len(entry['tasks'])} TVM tasks", file=sys.stderr)
        names.append(name)
        per_model[name] = entry["tasks"]
    import tvm

    report = {
        "schema": SCHEMA,
        "tvm": tvm.__version__,
        "models": names,
        "census": {
            key: {n: census(per_model[n], key) for n in names} for key in KEYS
        },
        "coverage": {
            key: [[coverage(per_model[r], per_model[c], key) for c in names] for r in names]
            for key in KEYS
        },
        "coverage_by_others": {
            key: [coverage_by_others(names, per_model, r, key) for r in names] for key in KEYS
        },
    }
    with open(os.path.join(args.out, "tvm-similarity.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
