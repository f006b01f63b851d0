#!/usr/bin/env python3
"""Stock TVM 0.27 MetaSchedule on an ONNX model, the way a TVM user runs it: the baseline
arm of scripts/bench_tune.py (no tgc code on the tuning or compile path).

    PY=~/.cache/tgc/venv-tvm-0.27.0.post1/bin/python
    $PY scripts/stock_tvm.py MODEL.onnx --target '{"kind": "llvm", "num-cores": 2}' \
        --trials 64 --per-round 16 [--max-tasks M] --work-dir DIR --out REPORT.json

Steps, all TVM's own API:
1. `relax.frontend.onnx.from_onnx(model, shape_dict, dtype_dict)` with the graph's input
   shapes (initializers are bound into the module as constants, the frontend's default and
   what TVM's ONNX tutorials do; `--shape NAME=1,3,224,224` for inputs with symbolic dims).
2. `DecomposeOpsForInference`, then the preparation `compile_relax` itself runs before
   `MetaScheduleApplyDatabase` (the target's library dispatch passes, LegalizeOps,
   AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR), so the tuned workloads are the
   ones the compile looks up. On the frontend's raw output `extract_tasks` finds nothing.
3. `ms.relax_integration.tune_relax(mod, None, target, work_dir, max_trials_global=N,
   num_trials_per_iter=K)`: LocalBuilder, LocalRunner, JSON database, XGB cost model,
   EvolutionarySearch, gradient task scheduler, all defaults. With `--max-tasks M`, the M
   extracted tasks of largest weight (ties: extraction order) are tuned by the same three
   steps tune_relax consists of (`extract_tasks`, `extracted_tasks_to_tune_contexts`,
   `ms.tune.tune_tasks`), only the task list filtered; tune_relax's own filter (`op_names`,
   substring match) cannot pick exact tasks.
4. `ms.relax_integration.compile_relax(database, mod, target, params=None)`, then the
   end-to-end timing tgc's worker uses (tgc_worker/measure.py, build_and_measure, as tgc
   tune calls it): `relax.VirtualMachine(ex, dev)`, one run of main, then
   `vm.time_evaluator("main", dev, number=1, repeat=20)`. That timing is inline in
   build_and_measure (not a reusable function), so its settings are replicated here
   (END_TO_END_REPEATS, END_TO_END_NUMBER). Inputs: data uniform [-1, 1), weight inputs
   (Conv / MatMul / Gemm operand 1) normal with std 1/sqrt(fan_in), other float inputs
   uniform [0.5, 1.5), ints zero: the roles tgc's check_inputs gives, read from the ONNX graph.

TVM's runtime runs on the thread count tgc's worker gives it: TVM_NUM_THREADS = the physical
cores unless TVM_NUM_THREADS or OMP_NUM_THREADS is set (TVM alone takes half the hardware
threads on x86, one on a 2-vCPU VM); the report names it (`settings.runtime_threads`, and
the end-to-end latency's `threads`).

After tuning, each tuned task's best record is re-measured the way tgc measures its own
records before writing them back (median of 5 fresh runs; `remeasure_best`), with stock
TVM's LocalBuilder and LocalRunner. The median is the task's `best_latency_s`, the search's
minimum `search_best_s`. `stock_tvm.py remeasure REPORT --work-dir DIR` does this for a
finished run.

Writes a JSON report (schema tgc.stock/1). Importing this file does not import TVM, so
bench_tune.py (system python) can use `command()` and the report helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

SCHEMA = "tgc.stock/1"
ROOT = pathlib.Path(__file__).resolve().parent.parent

# tgc's end-to-end timing settings (tune/src/driver.rs END_TO_END_REPEATS = 20, number unset
# -> the worker's default 1; tgc_worker/measure.py build_and_measure).
END_TO_END_REPEATS = 20
END_TO_END_NUMBER = 1

GPU_KINDS = ("cuda", "rocm", "vulkan", "metal", "opencl", "nvptx", "webgpu")


# ---- helpers that need no TVM (bench_tune.py uses them with the system python) ----------


def tvm_python() -> str:
    """The pinned TVM venv's python: $TGC_PYTHON, else what tvm/python/bootstrap.sh prints."""
    p = os.environ.get("TGC_PYTHON")
    if p:
        return p
    out = subprocess.run(
        ["bash", str(ROOT / "tvm" / "python" / "bootstrap.sh")],
        check=True, capture_output=True, text=True,
    ).stdout.strip().splitlines()
    return out[-1]


def command(model, target, trials, per_round, work_dir, out, max_tasks=0, python=None,
            extra=()) -> list:
    """The command line that runs this script."""
    cmd = [python or tvm_python(), str(pathlib.Path(__file__).resolve()), str(model),
           "--target", json.dumps(target, sort_keys=True), "--trials", str(trials),
           "--per-round", str(per_round), "--work-dir", str(work_dir), "--out", str(out)]
    if max_tasks:
        cmd += ["--max-tasks", str(max_tasks)]
    return cmd + list(extra)


def e2e_ms(report) -> float | None:
    return ((report or {}).get("end_to_end") or {}).get("latency_ms", {}).get("median")


# ---- ONNX import ---------------------------------------------------------------------------


def parse_shapes(items) -> dict:
    shapes = {}
    for s in items or []:
        name, _, dims = s.rpartition("=")
        if not name or not dims:
            raise SystemExit(f"--shape {s!r}: expected NAME=D,D,...")
        shapes[name] = [int(d) for d in dims.split(",")]
    return shapes


def graph_inputs(model, overrides: dict) -> list:
    """[(name, shape, dtype)] of the graph's inputs that are not initializers."""
    import numpy as np
    from onnx import helper

    inits = {i.name for i in model.graph.initializer}
    out = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        if i.name in overrides:
            shape = overrides[i.name]
        else:
            shape = []
            for d in tt.shape.dim:
                if not d.HasField("dim_value") or d.dim_value <= 0:
                    raise SystemExit(
                        f"input {i.name!r} has a symbolic dimension {d.dim_param!r}: "
                        f"give its shape with --shape {i.name}=D,D,..."
                    )
                shape.append(int(d.dim_value))
        dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))
        out.append((i.name, shape, dtype))
    return out


def input_roles(model, inputs) -> list:
    """Per graph input: ("data",), ("weight", fan_in) or ("scale",), from its ONNX consumers."""
    import numpy as np

    consumers = {}
    for n in model.graph.node:
        for k, x in enumerate(n.input):
            consumers.setdefault(x, []).append((n, k))
    roles = []
    for idx, (name, shape, _) in enumerate(inputs):
        role = ("data",) if idx == 0 else ("scale",)
        for n, k in consumers.get(name, []):
            if k != 1 or not shape:
                continue
            if n.op_type in ("Conv", "ConvTranspose") and len(shape) >= 2:
                # Conv W: (M, C/group, k...); ConvTranspose W: (C, M/group, k...)
                axis = 0 if n.op_type == "Conv" else 1
                role = ("weight", max(1, int(np.prod(shape)) // max(1, shape[axis])))
            elif n.op_type == "MatMul" and len(shape) >= 2:
                role = ("weight", shape[-2])
            elif n.op_type == "Gemm" and len(shape) == 2:
                trans_b = any(a.name == "transB" and a.i for a in n.attribute)
                role = ("weight", shape[1] if trans_b else shape[0])
            if role[0] == "weight":
                break
        roles.append(role)
    return roles


def make_inputs(model, inputs, seed: int = 0) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for (name, shape, dtype), role in zip(inputs, input_roles(model, inputs)):
        if np.dtype(dtype).kind == "f":
            if role[0] == "weight":
                a = rng.normal(0.0, 1.0 / np.sqrt(role[1]), size=shape)
            elif role[0] == "scale":
                a = rng.uniform(0.5, 1.5, size=shape)
            else:
                a = rng.uniform(-1.0, 1.0, size=shape)
            out.append(a.astype(dtype))
        elif dtype == "bool":
            out.append(rng.integers(0, 2, size=shape).astype("bool"))
        else:
            out.append(np.zeros(shape, dtype=dtype))
    return out


# ---- the stock run ---------------------------------------------------------------------------


def parse_target(obj):
    """The target as tgc's worker builds it (tgc_worker.tvmutil.parse_target: num-cores
    filled in for llvm, CUDA limits, an llvm host for GPUs), so both arms compile for the
    same target; TVM's Target(dict) with the same defaults if tgc_worker is not importable."""
    sys.path.insert(0, str(ROOT / "tvm" / "python"))
    try:
        from tgc_worker.tvmutil import parse_target as tgc_parse_target

        return tgc_parse_target(obj, with_host=True)
    except ImportError:
        import tvm

        cfg = dict(obj)
        if cfg["kind"] == "llvm" and "num-cores" not in cfg:
            import psutil

            cfg["num-cores"] = psutil.cpu_count(logical=False) or os.cpu_count()
        if cfg["kind"] in GPU_KINDS and "host" not in cfg:
            cfg["host"] = {"kind": "llvm"}
        return tvm.target.Target(cfg)


def runtime_threads() -> int:
    """Gives TVM's CPU thread pool the thread count tgc's worker gives it
    (tgc_worker.tvmutil.default_runtime_threads: TVM_NUM_THREADS = the physical cores unless
    TVM_NUM_THREADS or OMP_NUM_THREADS is set), so that both arms measure on the same
    threads; returns the count the pool runs with. TVM alone takes half the hardware threads
    on x86: one on a 2-vCPU VM, which would time stock TVM on half the machine. Call before
    anything runs a kernel (LocalRunner's processes inherit the variable)."""
    if not any(os.environ.get(k) for k in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")):
        sys.path.insert(0, str(ROOT / "tvm" / "python"))
        try:
            from tgc_worker.tvmutil import physical_cores

            cores = physical_cores()
        except ImportError:
            import psutil

            cores = psutil.cpu_count(logical=False) or os.cpu_count()
        os.environ["TVM_NUM_THREADS"] = str(cores)
    import tvm

    return int(tvm.get_global_func("runtime.NumThreads")())


def prepare(mod, target):
    """(user module, tuning module): DecomposeOpsForInference, then compile_relax's own
    preparation (so the tuning tasks are the workloads compile_relax looks up)."""
    import tvm
    from tvm import relax

    user = relax.transform.DecomposeOpsForInference()(mod)
    try:
        dispatch = list(relax.pipeline.library_dispatch_passes(target))
    except (ValueError, AttributeError):
        dispatch = []
    seq = tvm.transform.Sequential(
        dispatch
        + [
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
    )
    with target, tvm.transform.PassContext(opt_level=3):
        tuning = seq(user)
    return user, tuning


def select_tasks(tasks, max_tasks: int):
    """The max_tasks tasks of largest weight (stable: ties keep extraction order), in
    extraction order; all when max_tasks is 0."""
    if not max_tasks or max_tasks >= len(tasks):
        return list(tasks)
    keep = set(sorted(range(len(tasks)), key=lambda i: -int(tasks[i].weight))[:max_tasks])
    return [t for i, t in enumerate(tasks) if i in keep]


def hash_u64(mod) -> str:
    import tvm_ffi

    return str(tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF)


def _secs(rec):
    """Mean run seconds of a record; None when it failed (missing or 1e10)."""
    rs = rec.run_secs
    if rs is None or len(rs) == 0:
        return None
    vals = [float(x.value if hasattr(x, "value") else x) for x in rs]
    if all(v >= 1e9 for v in vals):
        return None
    return sum(vals) / len(vals)


def task_results(database, tasks) -> list:
    """Per task: records in the database (all, valid) and the best mean latency."""
    recs = list(database.get_all_tuning_records())
    rec_hash = [hash_u64(r.workload.mod) for r in recs]
    out = []
    for t in tasks:
        h = hash_u64(t.dispatched[0])
        mine = [r for r, rh in zip(recs, rec_hash) if rh == h]
        secs = [s for s in (_secs(r) for r in mine) if s is not None]
        out.append(dict(trials=len(mine), valid_trials=len(secs),
                        best_latency_s=min(secs) if secs else None))
    return out, recs


REMEASURE_REPEATS = 5


def remeasure_best(database, target, tasks_j, repeats=REMEASURE_REPEATS, builder_timeout=300.0,
                   log=print) -> None:
    """Measures each tuned task's best record as tgc measures its own before writing it back
    (tgc_worker.tune.Remeasurer), here with stock TVM's LocalBuilder and LocalRunner: the
    record with the lowest search mean is run `repeats` fresh times with LocalRunner's
    default evaluator (number=3, min_repeat_ms=100, no cache flush, which tgc's search uses
    too) and `repeat=repeats`. The median becomes the task's `best_latency_s`; the search's
    minimum stays as `search_best_s`. Without this the comparison would set a minimum over
    noisy single measurements (biased low) against tgc's medians. The builder gets tgc's
    build timeout (LocalBuilder's 30 s default times out here when 2 cores build 4 tasks
    in a fresh pool)."""
    from tvm.runtime import Device
    from tvm.s_tir import meta_schedule as ms

    best = {}
    for r in database.get_all_tuning_records():
        m = _secs(r)
        if m is None:
            continue
        h = hash_u64(r.workload.mod)
        if h not in best or m < best[h][0]:
            best[h] = (m, r)
    todo = [t for t in tasks_j if t["selected"] and t["workload_hash"] in best]
    if not todo:
        return
    cands = [best[t["workload_hash"]][1].as_measure_candidate() for t in todo]
    built = ms.builder.LocalBuilder(timeout_sec=builder_timeout).build(
        [ms.builder.BuilderInput(c.sch.mod, target) for c in cands])
    device = Device._DEVICE_TYPE_TO_NAME[target.get_target_device_type()]  # noqa: SLF001
    runner = ms.runner.LocalRunner(
        evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=repeats, min_repeat_ms=100))
    inputs, where = [], []
    for t, c, b in zip(todo, cands, built):
        t.setdefault("search_best_s", t["best_latency_s"])  # kept when re-measured again
        t["remeasured_runs_s"] = None
        if b.error_msg is not None:
            log(f"stock: {t['name']}: re-measurement build failed: "
                f"{str(b.error_msg).strip().splitlines()[-1]}")
            continue
        inputs.append(ms.runner.RunnerInput(b.artifact_path, device, c.args_info))
        where.append(t)
    for t, fut in zip(where, runner.run(inputs)):
        res = fut.result()
        if res.error_msg is not None or not res.run_secs:
            log(f"stock: {t['name']}: re-measurement failed: "
                f"{str(res.error_msg).strip().splitlines()[-1] if res.error_msg else 'no runs'}")
            continue
        secs = [float(x.value if hasattr(x, "value") else x) for x in res.run_secs]
        t["remeasured_runs_s"] = secs
        t["best_latency_s"] = statistics.median(secs)


def remeasure_report(report_path, work_dir, log=print) -> dict:
    """`--remeasure`: applies remeasure_best to a finished run's report and database (for
    reports written before the re-measurement existed); rewrites the report."""
    from tvm.s_tir import meta_schedule as ms

    report = json.loads(pathlib.Path(report_path).read_text())
    threads = runtime_threads()
    if report["settings"].get("runtime_threads", threads) != threads:
        raise SystemExit(f"{report_path}: tuned with {report['settings']['runtime_threads']} "
                         f"runtime threads, this process has {threads}; set TVM_NUM_THREADS")
    work_dir = pathlib.Path(work_dir)
    database = ms.database.JSONDatabase(
        path_workload=str(work_dir / "database_workload.json"),
        path_tuning_record=str(work_dir / "database_tuning_record.json"),
        allow_missing=False)
    target = parse_target(report["target"])
    remeasure_best(database, target, report["tasks"], log=log)
    finish_totals(report)
    pathlib.Path(report_path).write_text(json.dumps(report, indent=1) + "\n")
    return report


def finish_totals(report) -> None:
    tasks_j = report["tasks"]
    report["totals"]["weighted_best_latency_s"] = sum(
        t["weight"] * t["best_latency_s"] for t in tasks_j
        if t["selected"] and t["best_latency_s"] is not None)
    report["settings"]["best_latency"] = (
        "the search's minimum (the re-measurement failed)"
        if report["totals"].get("remeasure_error") else
        f"median of {REMEASURE_REPEATS} fresh runs of each task's best record "
        "(LocalRunner, EvaluatorConfig(number=3, repeat=5, min_repeat_ms=100))")


def scheduled_from_database(tuning_mod, target, database) -> list:
    """Names of the fused PrimFuncs that MetaScheduleApplyDatabase schedules from the
    database (compile_relax runs the same preparation, then this pass)."""
    import tvm
    from tvm.relax.transform import MetaScheduleApplyDatabase

    with target, database, tvm.transform.PassContext(opt_level=3):
        mod = MetaScheduleApplyDatabase(enable_warning=False)(tuning_mod)
    return sorted(
        gv.name_hint
        for gv, f in mod.functions_items()
        if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and f.attrs.get("tirx.is_scheduled", False)
    )


def time_model(ex, target, inputs_np, repeat=END_TO_END_REPEATS, number=END_TO_END_NUMBER):
    """tgc's end-to-end timing (tgc_worker/measure.py build_and_measure): VM on the target's
    device, one run of main, then time_evaluator("main", number=1, repeat=20)."""
    import numpy as np
    import tvm
    from tvm import relax

    kind = target.kind.name
    dev = tvm.device("cpu" if kind in ("llvm", "c") else kind, 0)
    if not dev.exist:
        raise SystemExit(f"no {kind} device on this machine to measure on")
    inputs = [tvm.runtime.tensor(a, dev) for a in inputs_np]
    vm = relax.VirtualMachine(ex, dev)
    res = vm["main"](*inputs)
    outs = [res] if isinstance(res, tvm.runtime.Tensor) else list(res)
    finite = all(
        np.isfinite(o.numpy()).all() for o in outs if isinstance(o, tvm.runtime.Tensor)
        and o.numpy().dtype.kind == "f"
    )
    timer = vm.time_evaluator("main", dev, number=number, repeat=repeat)
    vals = [float(x) * 1e3 for x in timer(*inputs).results]
    return {
        "latency_ms": {
            "mean": float(np.mean(vals)),
            "median": float(np.median(vals)),
            "std": float(np.std(vals)),
            "min": float(np.min(vals)),
            "p10": float(np.percentile(vals, 10)),
            "p90": float(np.percentile(vals, 90)),
            "repeat": repeat,
            "number": number,
            "threads": runtime_threads(),
        },
        "outputs_finite": bool(finite),
    }


def run(model_path, target_obj, trials, per_round, work_dir, max_tasks=0, shapes=None,
        population=None, builder_timeout=None, seed=None, measure=True, log=print) -> dict:
    """The whole stock run; returns the report (schema tgc.stock/1)."""
    t_all = time.time()
    import onnx
    import tvm
    import tvm_ffi
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    threads = runtime_threads()
    work_dir = pathlib.Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    for f in ("database_workload.json", "database_tuning_record.json"):
        if (work_dir / f).exists():
            raise SystemExit(f"{work_dir / f}: exists; MetaSchedule would resume from it. "
                             "Use an empty --work-dir.")
    target = parse_target(target_obj)

    t0 = time.time()
    model = onnx.load(str(model_path))
    inputs = graph_inputs(model, shapes or {})
    mod = from_onnx(model, shape_dict={n: s for n, s, _ in inputs},
                    dtype_dict={n: d for n, _, d in inputs})
    import_s = time.time() - t0

    t0 = time.time()
    user_mod, tuning_mod = prepare(mod, target)
    all_tasks = ms.relax_integration.extract_tasks(tuning_mod, target)
    selected = select_tasks(all_tasks, max_tasks)
    prepare_s = time.time() - t0
    log(f"stock: {len(all_tasks)} tasks extracted, tuning {len(selected)} with "
        f"{trials} trials in all, {per_round} per round")
    if not selected:
        raise SystemExit(f"{model_path}: extract_tasks found no tasks")

    builder = "local" if builder_timeout is None else ms.builder.LocalBuilder(
        timeout_sec=builder_timeout)
    strategy = "evolutionary" if population is None else ms.search_strategy.EvolutionarySearch(
        population_size=population)
    # TuneContext imports tvm.s_tir.tensor_intrin on first use (tens of seconds here: its
    # prim_funcs call inspect.stack()); imported first and timed apart, so the tuning time
    # below is the search's (tgc's worker pays this once per process, outside its tasks).
    t0 = time.time()
    import tvm.s_tir.tensor_intrin  # noqa: F401

    tensor_intrin_s = time.time() - t0
    t0 = time.time()
    if len(selected) == len(all_tasks):
        database = ms.relax_integration.tune_relax(
            tuning_mod, None, target, str(work_dir), trials,
            num_trials_per_iter=per_round, builder=builder, strategy=strategy, seed=seed,
        )
    else:
        ctxs, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            selected, str(work_dir), strategy=strategy, seed=seed
        )
        database = ms.tune.tune_tasks(
            tasks=ctxs, task_weights=weights, work_dir=str(work_dir), max_trials_global=trials,
            num_trials_per_iter=per_round, builder=builder,
        )
    tuning_wall_s = time.time() - t0

    per_task, recs = task_results(database, selected)
    chosen = {id(t) for t in selected}
    by_sel = dict(zip((id(t) for t in selected), per_task))
    tasks_j = []
    for t in all_tasks:
        r = by_sel.get(id(t))
        tasks_j.append(dict(name=t.task_name, weight=int(t.weight), selected=id(t) in chosen,
                            workload_hash=hash_u64(t.dispatched[0]),
                            trials=r["trials"] if r else 0,
                            valid_trials=r["valid_trials"] if r else 0,
                            best_latency_s=r["best_latency_s"] if r else None))
    n_trials = len(recs)
    n_valid = sum(1 for r in recs if _secs(r) is not None)

    report = {
        "schema": SCHEMA,
        "model": str(model_path),
        "target": json.loads(json.dumps(dict(target.export()), default=_plain)),
        "target_spelling": target_obj,
        "tvm": {"version": tvm.__version__,
                "tvm_ffi": getattr(tvm_ffi, "__version__", None)},
        "settings": {
            "max_trials_global": trials,
            "num_trials_per_iter": per_round,
            "max_tasks": max_tasks,
            "task_selection": ("all (tune_relax)" if len(selected) == len(all_tasks) else
                               f"the {len(selected)} tasks of largest weight (extract_tasks, "
                               "then extracted_tasks_to_tune_contexts + tune_tasks)"),
            "builder": "LocalBuilder()" if builder_timeout is None
            else f"LocalBuilder(timeout_sec={builder_timeout})",
            "runner": "LocalRunner()",
            "runtime_threads": threads,
            "database": "JSONDatabase",
            "cost_model": "xgb",
            "strategy": "EvolutionarySearch()" if population is None
            else f"EvolutionarySearch(population_size={population})",
            "task_scheduler": "gradient",
            "seed": seed,
        },
        "inputs": [{"name": n, "shape": s, "dtype": d} for n, s, d in inputs],
        "tasks_extracted": len(all_tasks),
        "tasks_tuned": len(selected),
        "tasks": tasks_j,
        "totals": {
            "tuning_wall_s": tuning_wall_s,
            "trials": n_trials,
            "valid_trials": n_valid,
            "failed_trials": n_trials - n_valid,
            "s_per_trial": tuning_wall_s / n_trials if n_trials else None,
            "import_s": import_s,
            "prepare_s": prepare_s,
            "tensor_intrin_import_s": tensor_intrin_s,
        },
        "compile_s": None,
        "scheduled_from_database": None,
        "end_to_end": None,
    }
    log(f"stock: tuned in {tuning_wall_s:.1f} s, {n_trials} trials ({n_valid} valid)")
    t0 = time.time()
    try:
        remeasure_best(database, target, tasks_j, builder_timeout=builder_timeout or 300.0,
                       log=log)
    except Exception as e:  # noqa: BLE001  (keep the tuning run; say the latencies are raw)
        report["totals"]["remeasure_error"] = f"{type(e).__name__}: {e}"
        log(f"stock: re-measurement failed, best_latency_s stays the search minimum: {e}")
    report["totals"]["remeasure_s"] = time.time() - t0
    finish_totals(report)

    if measure:
        report["scheduled_from_database"] = scheduled_from_database(tuning_mod, target, database)
        t0 = time.time()
        ex = ms.relax_integration.compile_relax(database, user_mod, target, params=None)
        report["compile_s"] = time.time() - t0
        t0 = time.time()
        e2e = time_model(ex, target, make_inputs(model, inputs))
        e2e["wall_s"] = time.time() - t0
        report["end_to_end"] = e2e
        log(f"stock: compiled in {report['compile_s']:.1f} s, "
            f"{len(report['scheduled_from_database'])} functions from the database; "
            f"e2e median {e2e['latency_ms']['median']:.3f} ms")
    report["wall_s"] = time.time() - t_all
    return report


def _plain(o):
    """TVM containers and immediates in Target.export() -> JSON values."""
    if hasattr(o, "value"):
        return o.value
    if hasattr(o, "items"):
        return {str(k): v for k, v in o.items()}
    if hasattr(o, "__len__") and not isinstance(o, str):
        return list(o)
    return str(o)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["remeasure"]:
        q = argparse.ArgumentParser(
            prog="stock_tvm.py remeasure",
            description="re-measure the best records of a finished run (remeasure_best) and "
                        "rewrite its report")
        q.add_argument("report", help="the run's JSON report")
        q.add_argument("--work-dir", required=True, help="the run's MetaSchedule work_dir")
        a = q.parse_args(argv[1:])
        remeasure_report(a.report, a.work_dir)
        print(f"stock: re-measured, report rewritten: {a.report}")
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="an ONNX file")
    p.add_argument("--target", required=True,
                   help='target JSON, e.g. \'{"kind": "llvm", "num-cores": 2}\' '
                        "(bench_tune.py passes the tgc report's `target`)")
    p.add_argument("--trials", type=int, required=True, help="max_trials_global")
    p.add_argument("--per-round", type=int, default=64, help="num_trials_per_iter")
    p.add_argument("--max-tasks", type=int, default=0,
                   help="tune only the M extracted tasks of largest weight (0: all)")
    p.add_argument("--work-dir", required=True, help="MetaSchedule's work_dir (empty)")
    p.add_argument("--out", required=True, help="the JSON report")
    p.add_argument("--shape", action="append", default=[],
                   help="NAME=D,D,... for an input with symbolic dimensions")
    p.add_argument("--population", type=int, default=None,
                   help="EvolutionarySearch population_size (default: TVM's, 512)")
    p.add_argument("--builder-timeout", type=float, default=None,
                   help="LocalBuilder timeout_sec (default: TVM's, 30 s)")
    p.add_argument("--seed", type=int, default=None, help="tune_relax seed (default: random)")
    p.add_argument("--no-measure", action="store_true",
                   help="skip compile_relax and the end-to-end timing")
    args = p.parse_args(argv)
    try:
        target = json.loads(args.target)
    except json.JSONDecodeError as e:
        raise SystemExit(f"--target: not JSON: {e}")
    if not isinstance(target, dict) or "kind" not in target:
        raise SystemExit('--target must be a JSON object with a "kind"')
    report = run(args.model, target, args.trials, args.per_round, args.work_dir,
                 max_tasks=args.max_tasks, shapes=parse_shapes(args.shape),
                 population=args.population, builder_timeout=args.builder_timeout,
                 seed=args.seed, measure=not args.no_measure)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"stock: report in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
