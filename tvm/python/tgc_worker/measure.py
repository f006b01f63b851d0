"""Whole-model build with the best trace per task applied, end-to-end timing, output check."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import numpy as np

import tvm
from tvm import relax

from .errors import WorkerError, one_line
from .lower import (
    call_args,
    emit_task_function,
    find_primfunc,
    lower_module,
    normalize_mod,
    structural_hash_u64,
)
from .replay import parse_trace_json, replay
from .task import TensorTy, parse_task
from .tvmutil import GPU_KINDS, make_context


@dataclass
class ModelSpec:
    params: list  # [(name, TensorTy)]
    tasks: dict  # name -> Task (insertion order)
    calls: list  # [("call", task_name, [value idx]) | ("const", attrs dict)]
    results: list  # [value idx]


def _tensor_ty(obj, where):
    if (
        not isinstance(obj, dict)
        or not isinstance(obj.get("shape"), list)
        or not isinstance(obj.get("dtype"), str)
    ):
        raise WorkerError("bad_params", f"{where}: expected {{name, shape, dtype}}")
    return TensorTy(tuple(int(d) for d in obj["shape"]), obj["dtype"])


def parse_module(obj) -> ModelSpec:
    if not isinstance(obj, dict):
        raise WorkerError("bad_params", "module must be an object")
    params_j, tasks_j, calls_j, results_j = (
        obj.get("params"),
        obj.get("tasks"),
        obj.get("calls"),
        obj.get("results"),
    )
    if not isinstance(params_j, list) or not isinstance(tasks_j, list) or not tasks_j:
        raise WorkerError("bad_params", "module needs params (list) and tasks (non-empty list)")
    if not isinstance(calls_j, list) or not calls_j:
        raise WorkerError("bad_params", "module.calls must be a non-empty list")
    if not isinstance(results_j, list) or not results_j:
        raise WorkerError("bad_params", "module.results must be a non-empty list")
    params = []
    for i, p in enumerate(params_j):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise WorkerError("bad_params", f"module.params[{i}]: expected {{name, shape, dtype}}")
        params.append((p["name"], _tensor_ty(p, f"module.params[{i}]")))
    tasks = {}
    for tj in tasks_j:
        t = parse_task(tj)
        if t.name in tasks:
            raise WorkerError("bad_params", f"module.tasks: two tasks named {t.name!r}", t.name)
        tasks[t.name] = t
    n_values = len(params)
    calls = []
    for i, c in enumerate(calls_j):
        where = f"module.calls[{i}]"
        if isinstance(c, dict) and "task" in c:
            name = c["task"]
            if name not in tasks:
                raise WorkerError("bad_params", f"{where}: unknown task {name!r}")
            args = c.get("args")
            t = tasks[name]
            if not isinstance(args, list) or len(args) != len(t.params):
                raise WorkerError(
                    "bad_params", f"{where}: {name} takes {len(t.params)} args", name
                )
            for a in args:
                if not isinstance(a, int) or not 0 <= a < n_values:
                    raise WorkerError("bad_params", f"{where}: arg {a!r} is not a defined value")
            calls.append(("call", name, list(args)))
            n_values += len(t.results)
        elif isinstance(c, dict) and "constant" in c:
            k = c["constant"]
            if not isinstance(k, dict) or not all(x in k for x in ("value", "shape", "dtype")):
                raise WorkerError("bad_params", f"{where}: constant needs value, shape, dtype")
            calls.append(("const", k))
            n_values += 1
        else:
            raise WorkerError("bad_params", f"{where}: expected {{task, args}} or {{constant}}")
    for r in results_j:
        if not isinstance(r, int) or not 0 <= r < n_values:
            raise WorkerError("bad_params", f"module.results: {r!r} is not a defined value")
    return ModelSpec(params, tasks, calls, list(results_j))


def model_relax_module(spec: ModelSpec) -> tvm.IRModule:
    from .lower import _np_constant

    bb = relax.BlockBuilder()
    fns = {name: emit_task_function(bb, t) for name, t in spec.tasks.items()}
    main_params = [
        relax.Var(name, relax.TensorType(list(ty.shape), ty.dtype)) for name, ty in spec.params
    ]
    with bb.function("main", main_params):
        with bb.dataflow():
            values = list(main_params)
            for c in spec.calls:
                if c[0] == "const":
                    values.append(relax.const(_np_constant(c[1])))
                    continue
                _, name, args = c
                tf = fns[name]
                out = bb.emit(relax.Call(tf.gv, call_args(tf, [values[a] for a in args])))
                n = len(tf.task.results)
                if n == 1:
                    values.append(out)
                else:
                    values.extend(bb.emit(relax.TupleGetItem(out, k)) for k in range(n))
            res = [values[r] for r in spec.results]
            out = bb.emit_output(res[0] if len(res) == 1 else relax.Tuple(res))
        bb.emit_func_output(out)
    return bb.get()


def _record_traces(entries, task: str) -> list:
    """A task's records: trace JSONs, or objects with a "trace" (tune's records), best first."""
    if not isinstance(entries, list):
        raise WorkerError("bad_params", f"records[{task!r}] must be a list", task)
    out = []
    for i, e in enumerate(entries):
        tj = e.get("trace") if isinstance(e, dict) else e
        out.append(parse_trace_json(tj, f"records[{task!r}][{i}]", task))
    return out


def apply_database(lowered, target, database):
    """MetaScheduleApplyDatabase; returns the module and the names of the PrimFuncs it scheduled."""
    from tvm.relax.transform import MetaScheduleApplyDatabase

    with target, database, tvm.transform.PassContext(opt_level=3):
        mod = MetaScheduleApplyDatabase(enable_warning=False)(lowered)
    scheduled = sorted(
        gv.name_hint
        for gv, f in mod.functions_items()
        if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and f.attrs.get("tirx.is_scheduled", False)
    )
    return mod, scheduled


def _backend_pipeline_module(target):
    """The relax backend pipeline module for the target (its package __init__ may not
    re-export dataflow_lower_passes/finalize_passes, e.g. cpu_generic in 0.27)."""
    import importlib

    kind = target.kind.name
    name = {"llvm": "cpu_generic", "cuda": "cuda", "rocm": "rocm"}.get(
        kind, "gpu_generic" if kind in GPU_KINDS else None
    )
    if name is None:
        raise WorkerError("bad_params", f"build_and_measure does not support target kind {kind}")
    return importlib.import_module(f"tvm.relax.backend.{name}.pipeline")


def _build(lowered, target):
    """Build a module whose tasks are already fused PrimFuncs: no LegalizeOps/FuseOps again
    (they would merge our tasks), DLight for what is left unscheduled on GPUs."""
    rp = _backend_pipeline_module(target)
    is_gpu = target.kind.name in GPU_KINDS
    passes = []
    if is_gpu:
        from tvm.s_tir import dlight as dl

        passes.append(
            dl.ApplyDefaultSchedule(
                dl.gpu.Matmul(),
                dl.gpu.GEMV(),
                dl.gpu.Reduction(),
                dl.gpu.GeneralReduction(),
                dl.gpu.Fallback(),
            )
        )
    passes += list(rp.dataflow_lower_passes(target)) + list(rp.finalize_passes(target))
    seq = tvm.transform.Sequential(passes)

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod, _ctx):
        return seq(mod)

    with target, tvm.transform.PassContext(opt_level=3):
        return relax.build(lowered, target=target, relax_pipeline=pipeline)


def _random_inputs(spec: ModelSpec, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _, ty in spec.params:
        if ty.dtype.startswith("float") or ty.dtype.startswith("bfloat"):
            arr = rng.uniform(-1.0, 1.0, size=ty.shape).astype(ty.dtype)
        elif ty.dtype == "bool":
            arr = rng.integers(0, 2, size=ty.shape).astype("bool")
        else:
            # small non-negative ints: valid indices for take on any non-empty axis
            arr = np.zeros(ty.shape, dtype=ty.dtype)
        out.append(arr)
    return out


def _outputs(res) -> list:
    if isinstance(res, tvm.runtime.Tensor):
        return [res.numpy()]
    return [x for r in res for x in _outputs(r)]


def build_and_measure(params: dict) -> dict:
    t0 = time.time()
    from .tvmutil import parse_target

    spec = parse_module(params.get("module"))
    target = parse_target(params.get("target"), with_host=True)
    repeat = params.get("repeat", 20)
    number = params.get("number", 1)
    seed = params.get("seed", 0)
    for k, v in (("repeat", repeat), ("number", number), ("seed", seed)):
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k == "seed" else 1):
            raise WorkerError("bad_params", f"{k} must be a positive int, got {v!r}")
    rtol = float(params.get("rtol", 1e-4))
    atol = float(params.get("atol", 1e-4))

    mod = model_relax_module(spec)
    try:
        lowered = lower_module(mod)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"lowering the model failed: {one_line(e)}")

    from tvm.s_tir import meta_schedule as ms

    records = params.get("records", {})
    applied: dict = {}
    if isinstance(records, str):
        if not os.path.isdir(records):
            raise WorkerError("bad_params", f"records: {records!r} is not a directory")
        database = ms.database.JSONDatabase(work_dir=records, module_equality="structural")
        for name in spec.tasks:
            wl = normalize_mod(find_primfunc(lowered, name, name))
            applied[name] = "database" if database.has_workload(wl) else None
    elif isinstance(records, dict):
        database = ms.database.MemoryDatabase(module_equality="structural")
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        for name, entries in records.items():
            if name not in spec.tasks:
                raise WorkerError("bad_params", f"records: no task named {name!r} in the module", name)
            wl = normalize_mod(find_primfunc(lowered, name, name))
            ctx = make_context(wl, target, name)
            postprocs = list(ctx.space_generator.postprocs)
            applied[name] = None
            errors = []
            for tj in _record_traces(entries, name):
                res = replay(wl, target, postprocs, tj, allow_anchor=False)
                if not res.ok:
                    errors.append(res.error)
                    continue
                workload = database.commit_workload(wl)
                database.commit_tuning_record(
                    ms.database.TuningRecord(
                        res.sch.trace,
                        workload,
                        run_secs=[1.0],
                        target=target,
                        args_info=ArgInfo.from_prim_func(wl["main"]),
                    )
                )
                applied[name] = res.mode
                break
            if applied[name] is None and errors:
                applied[name] = None
                print(f"tgc_worker: {name}: no record replays: {errors[0]}", file=sys.stderr)
        for name in spec.tasks:
            applied.setdefault(name, None)
    else:
        raise WorkerError("bad_params", "records must be {task: [trace...]} or a directory path")

    try:
        scheduled_mod, scheduled = apply_database(lowered, target, database)
        tuned = _build(scheduled_mod, target)
        ref = _build(lowered, target)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"build failed: {one_line(e)}")

    kind = target.kind.name
    dev = tvm.device("cpu" if kind in ("llvm", "c") else kind, 0)
    if not dev.exist:
        raise WorkerError("tvm", f"no {target.kind.name} device on this machine to measure on")
    inputs_np = _random_inputs(spec, seed)
    inputs = [tvm.runtime.tensor(a, dev) for a in inputs_np]
    vm_t = relax.VirtualMachine(tuned, dev)
    vm_r = relax.VirtualMachine(ref, dev)
    out_t = _outputs(vm_t["main"](*inputs))
    out_r = _outputs(vm_r["main"](*inputs))
    match = len(out_t) == len(out_r)
    max_abs = 0.0
    mismatch = None
    for k, (a, b) in enumerate(zip(out_t, out_r)):
        if a.shape != b.shape or a.dtype != b.dtype:
            match = False
            mismatch = f"output {k}: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
            continue
        if a.size:
            diff = np.abs(a.astype("float64") - b.astype("float64"))
            max_abs = max(max_abs, float(np.nanmax(diff)))
        try:
            if a.dtype.kind == "f":
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
            else:
                np.testing.assert_array_equal(a, b)
        except AssertionError as e:
            match = False
            mismatch = mismatch or f"output {k}: {one_line(str(e))}"

    timer = vm_t.time_evaluator("main", dev, number=number, repeat=repeat)
    res = timer(*inputs)
    ms_vals = [float(x) * 1e3 for x in res.results]
    out = {
        "latency_ms": {
            "mean": float(np.mean(ms_vals)),
            "median": float(np.median(ms_vals)),
            "std": float(np.std(ms_vals)),
            "min": float(np.min(ms_vals)),
            "repeat": repeat,
            "number": number,
        },
        "outputs_match": match,
        "max_abs_diff": max_abs,
        "applied": applied,
        "scheduled": scheduled,
        "tasks": {
            name: structural_hash_u64(normalize_mod(find_primfunc(lowered, name, name)))
            for name in spec.tasks
        },
        "wall_s": round(time.time() - t0, 3),
    }
    if mismatch:
        out["mismatch"] = mismatch
    return out
