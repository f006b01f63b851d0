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
from .tvmutil import GPU_KINDS, make_context, runtime_threads


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


def packed_inputs(spec: ModelSpec) -> list:
    """The indices of main's params that some call passes to a task's layout-free param:
    the weights the built model takes packed (`main_transform_params`), in param order."""
    packed = set()
    for c in spec.calls:
        if c[0] == "call":
            t = spec.tasks[c[1]]
            packed.update(c[2][k] for k in t.layout_free if c[2][k] < len(spec.params))
    return sorted(packed)


def main_param_order(spec: ModelSpec) -> list:
    """Main's params in the built model's order: the inputs not packed, then the packed
    weights (Relax's `num_input` convention, which LiftTransformParams reads)."""
    packed = set(packed_inputs(spec))
    return [i for i in range(len(spec.params)) if i not in packed] + sorted(packed)


def main_args(packed: list, vm, inputs: list) -> list:
    """The arguments of the built model's main for `inputs` (in the module's param order),
    `packed` the indices of the packed weights (`packed_inputs`): the inputs as they are, or
    the other inputs and then `main_transform_params` of the packed weights (run once here; a
    deployment runs it once per set of weights). A build without the transform (TVM's
    default schedules) takes the weights unpacked, in the same order."""
    if not packed:
        return list(inputs)
    packed_set = set(packed)
    rest = [inputs[i] for i in range(len(inputs)) if i not in packed_set]
    weights = [inputs[i] for i in packed]
    if not vm.module.implements_function("main_transform_params"):
        return rest + weights
    out = vm["main_transform_params"](weights)
    return rest + [out[k] for k in range(len(out))]


def model_relax_module(spec: ModelSpec) -> tvm.IRModule:
    from .lower import _np_constant

    bb = relax.BlockBuilder()
    fns = {name: emit_task_function(bb, t) for name, t in spec.tasks.items()}
    main_params = [
        relax.Var(name, relax.TensorType(list(ty.shape), ty.dtype)) for name, ty in spec.params
    ]
    order = main_param_order(spec)
    n_packed = len(packed_inputs(spec))
    attrs = {"num_input": len(spec.params) - n_packed} if n_packed else None
    with bb.function("main", [main_params[i] for i in order], attrs):
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
    """A task's records, best first: [(trace_json, source_workload or None)]. An entry is a
    trace JSON, or an object with a "trace" (tune's records) and optionally the
    "source_workload" of the task it was tuned on (then the trace is transferred: tiles
    repaired, or the anchor block's schedule applied)."""
    from .server import load_workload

    if not isinstance(entries, list):
        raise WorkerError("bad_params", f"records[{task!r}] must be a list", task)
    out = []
    sources: dict = {}
    for i, e in enumerate(entries):
        where = f"records[{task!r}][{i}]"
        src = None
        if isinstance(e, dict):
            tj = e.get("trace")
            text = e.get("source_workload")
            if text is not None:
                if not isinstance(text, str) or text not in sources:
                    sources[text] = load_workload(text, where, task)  # raises for a non-string
                src = sources[text]
        else:
            tj = e
        out.append((parse_trace_json(tj, where, task), src))
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


def lift_weight_packing(mod, target):
    """The layout rewrites that the schedules of layout-free weights begin with, split off
    their PrimFuncs and lifted out of main into `main_transform_params` (which a deployment
    runs once per set of weights), as TVM's own `cpu_weight_prepack` does."""
    t = relax.transform
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential([t.SplitLayoutRewritePreproc(), t.LiftTransformParams()])(mod)


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


# ---- the output check: inputs of order one, a tolerance relative to the output's scale ----

# ops that contract their second operand: how to get the weight's fan-in from its type
_PASS_THROUGH = {"reshape", "permute_dims", "astype", "expand_dims", "squeeze", "flatten"}


def _fan_in(b, shape) -> int | None:
    """Fan-in of the weight operand (operand 1) of contraction `b`, whose type has `shape`:
    the number of products each output element sums."""
    if not shape:
        return None
    if b.op in ("nn.conv2d", "nn.conv2d_transpose"):
        layout = b.attrs.get("kernel_layout") or ("OIHW" if b.op == "nn.conv2d" else "IOHW")
        o = layout.find("O")
        if len(layout) != len(shape) or o < 0:
            return None
        return max(1, int(np.prod(shape)) // max(1, shape[o]))
    if b.op == "matmul" and len(shape) >= 2:
        return shape[-2]
    if b.op == "nn.dense":
        return shape[-1]
    if b.op == "nn.batch_matmul" and len(shape) >= 2:
        return shape[-1] if b.attrs.get("transpose_b", True) else shape[-2]
    return None


def _task_roles(t, value: int, depth: int = 0) -> list:
    """How task `t` uses its value `value`: ("weight", fan_in) where it is a contraction's
    second operand (through reshape/permute/astype), ("positive",) where it is a batch norm's
    variance."""
    types = t.value_types()
    roles = []
    n = len(t.params)
    for i, b in enumerate(t.bindings):
        for pos, o in enumerate(b.operands):
            if o != value:
                continue
            if pos == 1:
                f = _fan_in(b, types[value].shape)
                if f is not None:
                    roles.append(("weight", f))
            if b.op == "nn.batch_norm" and pos == 4:
                roles.append(("positive",))
            if b.op in _PASS_THROUGH and depth < 4 and len(b.results) == 1:
                out = n + sum(len(x.results) for x in t.bindings[:i])
                roles += _task_roles(t, out, depth + 1)
    return roles


def input_roles(spec: ModelSpec) -> list:
    """Per main param: ("weight", fan_in), ("positive",) or ("data",), from how the tasks use it."""
    roles = [[] for _ in spec.params]
    for c in spec.calls:
        if c[0] != "call":
            continue
        _, name, args = c
        for j, a in enumerate(args):
            if a < len(roles):
                roles[a] += _task_roles(spec.tasks[name], j)
    out = []
    for r in roles:
        w = [x for x in r if x[0] == "weight"]
        out.append(w[0] if w else (("positive",) if r else ("data",)))
    return out


def check_inputs(spec: ModelSpec, seed: int) -> list:
    """Random inputs that keep every activation of order one through any depth: data inputs
    uniform [-1, 1), weights normal with std 1/sqrt(fan_in) (so a contraction's output has the
    variance of its input), batch norm variances uniform [0.5, 1.5), zeros for ints."""
    return draw_inputs([ty for _, ty in spec.params], input_roles(spec), seed)


def roles_json(spec: ModelSpec) -> list:
    """main's params with their roles, as build_and_measure reports them (`inputs`) and
    `bench` takes them back."""
    out = []
    for (name, ty), role in zip(spec.params, input_roles(spec)):
        out.append(
            {
                "name": name,
                "shape": list(ty.shape),
                "dtype": ty.dtype,
                "role": role[0],
                "fan_in": role[1] if role[0] == "weight" else None,
            }
        )
    for i in packed_inputs(spec):
        out[i]["packed"] = True
    return out


def roles_from_json(inputs, where: str) -> tuple[list, list]:
    """([TensorTy], [role]) from a list of {name, shape, dtype, role?, fan_in?, permutation?}
    (the inputs of an artifact's sidecar); an absent role is data."""
    if not isinstance(inputs, list):
        raise WorkerError("bad_params", f"{where} must be a list")
    types, roles = [], []
    for i, x in enumerate(inputs):
        w = f"{where}[{i}]"
        types.append(_tensor_ty(x, w))
        perm = x.get("permutation")
        rank = len(types[-1].shape)
        if perm is not None and (
            not isinstance(perm, list)
            or any(isinstance(a, bool) for a in perm)
            or sorted(perm) != list(range(rank))
        ):
            raise WorkerError(
                "bad_params", f"{w}: permutation must list the {rank} axes once each, got {perm!r}"
            )
        if not isinstance(x.get("packed", False), bool):
            raise WorkerError("bad_params", f"{w}: packed must be true or false, got {x['packed']!r}")
        role = x.get("role", "data")
        if role == "weight":
            f = x.get("fan_in")
            if not isinstance(f, int) or isinstance(f, bool) or f < 1:
                raise WorkerError("bad_params", f"{w}: a weight needs a positive int fan_in")
            roles.append(("weight", f))
        elif role in ("data", "positive"):
            roles.append((role,))
        else:
            raise WorkerError("bad_params", f"{w}: role must be data, weight or positive, got {role!r}")
    return types, roles


def model_inputs(inputs: list, types: list, arrays: list) -> tuple[list, list]:
    """The library's inputs as the model it was built from takes them: an input whose
    sidecar entry has a `permutation` (a kernel `--layout nhwc` made HWIO, the library's
    array being `permute_dims(model's, permutation)`) transposed back; ([TensorTy], arrays)."""
    out_types, out_arrays = [], []
    for x, ty, arr in zip(inputs, types, arrays):
        perm = x.get("permutation")  # checked by roles_from_json
        if perm is None:
            out_types.append(ty)
            out_arrays.append(arr)
            continue
        inverse = [perm.index(a) for a in range(len(perm))]
        out_types.append(TensorTy(tuple(ty.shape[a] for a in inverse), ty.dtype))
        out_arrays.append(np.ascontiguousarray(np.transpose(arr, inverse)))
    return out_types, out_arrays


def draw_inputs(types: list, roles: list, seed: int) -> list:
    """check_inputs' draw for tensors of `types` with `roles`."""
    rng = np.random.default_rng(seed)
    out = []
    for ty, role in zip(types, roles):
        if ty.dtype.startswith("float") or ty.dtype.startswith("bfloat"):
            if role[0] == "weight":
                arr = rng.normal(0.0, 1.0 / np.sqrt(role[1]), size=ty.shape)
            elif role[0] == "positive":
                arr = rng.uniform(0.5, 1.5, size=ty.shape)
            else:
                arr = rng.uniform(-1.0, 1.0, size=ty.shape)
            arr = arr.astype(ty.dtype)
        elif ty.dtype == "bool":
            arr = rng.integers(0, 2, size=ty.shape).astype("bool")
        else:
            # small non-negative ints: valid indices for take on any non-empty axis
            arr = np.zeros(ty.shape, dtype=ty.dtype)
        out.append(arr)
    return out


_SUMMING = {"sum", "mean", "nn.avg_pool2d", "nn.adaptive_avg_pool2d"}


def reduction_lengths(spec: ModelSpec) -> list:
    """K of every reduction main executes (each call of a task counts): the fan-in of each
    contraction, the elements summed into each output of sum/mean/average pools."""
    ks = []
    for c in spec.calls:
        if c[0] != "call":
            continue
        t = spec.tasks[c[1]]
        types = t.value_types()
        for b in t.bindings:
            if len(b.operands) >= 2:
                f = _fan_in(b, types[b.operands[1]].shape)
                if f is not None:
                    ks.append(f)
            elif b.op in _SUMMING and b.results:
                n_in = int(np.prod(types[b.operands[0]].shape))
                n_out = max(1, int(np.prod(b.results[0].shape)))
                ks.append(max(1, n_in // n_out))
    return ks


# Constants of the tolerance (see output_tolerance).
TOL_SAFETY = 16.0  # x the expected rms reassociation error: covers the largest of ~1e6 elements
TOL_FLOOR_ULPS = 64.0  # fused elementwise code (FMA contraction, vectorized libm) moves a few ulps
TOL_CAP = 1e-3  # strictest bound on a deep model: a dropped reduction step still moves ~1e-2
RTOL_ULPS = 16.0  # elementwise relative part, for values far above the output's scale


def output_tolerance(spec: ModelSpec, dtype: str) -> dict:
    """|tuned - ref| <= atol_rel * max|ref| + rtol * |ref|, elementwise, per output.

    A schedule only reorders float arithmetic. Summing K terms of order-one inputs and fan-in
    scaled weights in another order moves the result by about sqrt(K) * eps of the output's
    scale (random rounding errors of the partial sums), and the errors of successive
    reductions add up as the model runs them, so the expected error is eps * sum(sqrt(K)).
    atol_rel is TOL_SAFETY times that, at least TOL_FLOOR_ULPS ulps, at most TOL_CAP: for
    three 3x3 convs over 32 channels (K = 288) 9.7e-5 of the output's scale. A wrong
    schedule is far outside: one of K products lost moves an output by ~1/sqrt(K) of its
    scale (6e-2 for K = 288), one k-tile lost by tens of percent."""
    eps = float(np.finfo(np.dtype(dtype)).eps) if np.dtype(dtype).kind == "f" else 0.0
    budget = eps * sum(float(np.sqrt(k)) for k in reduction_lengths(spec))
    floor = TOL_FLOOR_ULPS * eps
    atol_rel = min(max(floor, TOL_CAP), max(floor, TOL_SAFETY * budget))
    return {"atol_rel": atol_rel, "rtol": RTOL_ULPS * eps}


def compare_outputs(out_t: list, out_r: list, tol_for) -> dict:
    """Compares the tuned build's outputs with the reference's. `tol_for(dtype)` gives
    {atol_rel, rtol}. Returns outputs_match, max_abs_err, max_rel_err (the largest error over
    the output's scale max|ref|), the tolerance of the first float output, and a mismatch line."""
    res = {"outputs_match": len(out_t) == len(out_r), "max_abs_err": 0.0, "max_rel_err": 0.0}
    mismatch = None if res["outputs_match"] else f"{len(out_t)} outputs vs {len(out_r)}"
    tolerance = None
    for k, (a, b) in enumerate(zip(out_t, out_r)):
        if a.shape != b.shape or a.dtype != b.dtype:
            res["outputs_match"] = False
            mismatch = mismatch or f"output {k}: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
            continue
        if a.dtype.kind != "f":
            bad = int(np.count_nonzero(a != b))
            if bad:
                res["outputs_match"] = False
                mismatch = mismatch or f"output {k}: {bad} / {a.size} elements differ"
            continue
        tol = tol_for(str(a.dtype))
        tolerance = tolerance or tol
        a64, b64 = a.astype("float64"), b.astype("float64")
        nan_a, nan_b = np.isnan(a64), np.isnan(b64)
        finite = np.isfinite(b64)
        scale = float(np.max(np.abs(b64[finite]))) if finite.any() else 0.0
        diff = np.abs(a64 - b64)
        # equal infinities and NaN where both are NaN are equal
        diff[(a64 == b64) | (nan_a & nan_b)] = 0.0
        diff[nan_a != nan_b] = np.inf
        allowed = tol["atol_rel"] * scale + tol["rtol"] * np.abs(np.where(finite, b64, 0.0))
        worst = float(np.max(diff)) if diff.size else 0.0
        res["max_abs_err"] = max(res["max_abs_err"], worst)
        rel = worst / scale if scale > 0 else (0.0 if worst == 0 else float("inf"))
        res["max_rel_err"] = max(res["max_rel_err"], rel)
        bad = diff > allowed
        if bad.any():
            res["outputs_match"] = False
            i = int(np.argmax(np.where(bad, diff - allowed, -np.inf)))
            idx = tuple(int(x) for x in np.unravel_index(i, a.shape))
            mismatch = mismatch or (
                f"output {k}: {int(bad.sum())} / {a.size} elements beyond "
                f"{tol['atol_rel']:.2e} * max|ref| ({scale:.3g}) + {tol['rtol']:.2e} * |ref|; "
                f"max error {worst:.3g} ({rel:.2e} of the scale), worst at {list(idx)}: "
                f"tuned {a64[idx]:.6g} vs untuned {b64[idx]:.6g}"
            )
    res["tolerance"] = tolerance or {"atol_rel": 0.0, "rtol": 0.0}
    for k in ("max_abs_err", "max_rel_err"):  # JSON has no infinity: null when NaN/inf disagree
        if not np.isfinite(res[k]):
            res[k] = None
    if mismatch:
        res["mismatch"] = mismatch
    return res


def _outputs(res) -> list:
    if isinstance(res, tvm.runtime.Tensor):
        return [res.numpy()]
    return [x for r in res for x in _outputs(r)]


def export_executable(executable, path: str) -> None:
    """`export_library` to `path`, through a temporary file beside it: a failed export leaves
    no partial library behind, and an existing one is replaced whole."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise WorkerError("bad_params", f"export: {directory} is not a directory")
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp.so")
    try:
        executable.export_library(tmp)
        os.replace(tmp, path)
    except Exception as e:  # noqa: BLE001 - the compiler driver's and TVM's errors
        if os.path.exists(tmp):
            os.remove(tmp)
        raise WorkerError("tvm", f"export to {path} failed: {one_line(e)}")


def latency_stats(results_s: list, repeat: int, number: int) -> dict:
    """Milliseconds: median, p10, p90, mean, min, max of the timing runs."""
    ms_vals = np.array([float(x) * 1e3 for x in results_s])
    return {
        "median": float(np.median(ms_vals)),
        "p10": float(np.percentile(ms_vals, 10)),
        "p90": float(np.percentile(ms_vals, 90)),
        "mean": float(np.mean(ms_vals)),
        "min": float(np.min(ms_vals)),
        "max": float(np.max(ms_vals)),
        "repeat": repeat,
        "number": number,
        "threads": runtime_threads(),
    }


def _positive_int(params, k):
    v = params[k]
    if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k == "seed" else 1):
        raise WorkerError("bad_params", f"{k} must be a positive int, got {v!r}")
    return v


def bench(params: dict) -> dict:
    """End-to-end latency of an exported library (and of an untuned build of a module, and of
    onnxruntime on the ONNX file it came from), on the same inputs."""
    t0 = time.time()
    from .tvmutil import parse_target

    target = parse_target(params["target"], with_host=True)
    repeat = _positive_int(params, "repeat")
    number = _positive_int(params, "number")
    seed = _positive_int(params, "seed")
    library = params["library"]
    if not isinstance(library, str) or not os.path.isfile(library):
        raise WorkerError("bad_params", f"library: {library!r} is not a file")
    types, roles = roles_from_json(params["inputs"], "inputs")
    kind = target.kind.name
    dev = tvm.device("cpu" if kind in ("llvm", "c") else kind, 0)
    if not dev.exist:
        raise WorkerError("tvm", f"no {kind} device on this machine to measure on")
    arrays = draw_inputs(types, roles, seed)
    inputs = [tvm.runtime.tensor(a, dev) for a in arrays]

    packed = [i for i, x in enumerate(params["inputs"]) if x.get("packed", False)]

    def timed(executable, packed, repeat=repeat) -> dict:
        vm = relax.VirtualMachine(executable, dev)
        args = main_args(packed, vm, inputs)
        vm["main"](*args)  # warm-up: first-call allocations stay out of the figures
        res = vm.time_evaluator("main", dev, number=number, repeat=repeat)(*args)
        return latency_stats(res.results, repeat, number)

    try:
        lib = tvm.runtime.load_module(library)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("bad_params", f"library: {library}: cannot load: {one_line(e)}")
    try:
        latency = timed(lib, packed)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"{library}: running main failed: {one_line(e)}")
    untuned = None
    if params.get("untuned") is not None:
        spec = parse_module(params["untuned"])
        if [ty for _, ty in spec.params] != types:
            raise WorkerError(
                "bad_params", "untuned: the module's params differ from the library's inputs"
            )
        try:
            ref = _build(lower_module(model_relax_module(spec)), target)
        except Exception as e:  # noqa: BLE001
            raise WorkerError("tvm", f"untuned build failed: {one_line(e)}")
        if params.get("untuned_repeat") is None:
            raise WorkerError("bad_params", "untuned needs untuned_repeat (its timing runs)")
        untuned = timed(ref, packed_inputs(spec), _positive_int(params, "untuned_repeat"))
    onnxruntime = None
    if params.get("onnx") is not None:
        from . import onnxrt

        path = params["onnx"]
        if not isinstance(path, str) or not os.path.isfile(path):
            raise WorkerError("bad_params", f"onnx: {path!r} is not a file")
        if kind != "llvm":
            raise WorkerError("bad_params", f"onnx: onnxruntime is timed on this CPU, the library is for {kind}")
        model_types, model_arrays = model_inputs(params["inputs"], types, arrays)
        onnxruntime = onnxrt.latency(
            path, model_types, roles, model_arrays, repeat, number, runtime_threads()
        )
    return {
        "latency_ms": latency,
        "untuned_latency_ms": untuned,
        "onnxruntime": onnxruntime,
        "wall_s": round(time.time() - t0, 3),
    }


class Scheduled:
    """A model lowered with its records applied (MetaScheduleApplyDatabase), not built yet:
    what `build`, `build_and_measure` and the `tgc` package's pass for `tvm.compile` share."""

    def __init__(self, spec, target, lowered, mod, applied, failed, scheduled):
        self.spec, self.target, self.lowered, self.mod = spec, target, lowered, mod
        self.applied, self.failed, self.scheduled = applied, failed, scheduled

    def result(self, t0: float) -> dict:
        """How the records went in (`build`'s result)."""
        lowered = self.lowered
        return {
            "applied": self.applied,
            "failed": self.failed,
            "scheduled": self.scheduled,
            "inputs": roles_json(self.spec),
            "tasks": {
                name: structural_hash_u64(normalize_mod(find_primfunc(lowered, name, name)))
                for name in self.spec.tasks
            },
            "wall_s": round(time.time() - t0, 3),
        }


class _ScheduledBuild(Scheduled):
    """The model built with its records: what `build` and `build_and_measure` share."""

    def __init__(self, scheduled: Scheduled, tuned):
        super().__init__(
            scheduled.spec,
            scheduled.target,
            scheduled.lowered,
            scheduled.mod,
            scheduled.applied,
            scheduled.failed,
            scheduled.scheduled,
        )
        self.tuned = tuned


def _export_param(params: dict):
    """`export`, checked before anything is built: a file path in an existing directory."""
    export = params.get("export")
    if export is not None and (not isinstance(export, str) or not export):
        raise WorkerError("bad_params", f"export must be a file path, got {export!r}")
    if export is not None and not os.path.isdir(os.path.dirname(os.path.abspath(export))):
        raise WorkerError(
            "bad_params", f"export: {os.path.dirname(os.path.abspath(export))} is not a directory"
        )
    return export


def build(params: dict) -> dict:
    """The model built with the records and written with `export_library`; nothing else is
    built or run (`tgc build` without --check or --bench)."""
    t0 = time.time()
    export = _export_param(params)
    b = _scheduled_build(params)
    export_executable(b.tuned, export)
    return b.result(t0)


def _scheduled_build(params: dict) -> _ScheduledBuild:
    from .tvmutil import parse_target

    spec = parse_module(params["module"])
    target = parse_target(params["target"], with_host=True)
    s = schedule_model(spec, target, params["records"])
    try:
        tuned = _build(s.mod, target)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"build failed: {one_line(e)}")
    return _ScheduledBuild(s, tuned)


def schedule_model(spec: ModelSpec, target, records) -> Scheduled:
    """The model of `spec` lowered (each task one PrimFunc) and its tasks scheduled with
    `records`: {task function: [record, ...]} (best first; the first that replays goes in)
    or a MetaSchedule database directory."""
    mod = model_relax_module(spec)
    try:
        lowered = lower_module(mod)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"lowering the model failed: {one_line(e)}")

    from tvm.s_tir import meta_schedule as ms

    applied: dict = {}
    failed: dict = {name: 0 for name in spec.tasks}
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
            for tj, src in _record_traces(entries, name):
                res = replay(wl, target, postprocs, tj, src, allow_anchor=src is not None)
                if not res.ok:
                    errors.append(res.error)
                    failed[name] += 1
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
        if packed_inputs(spec):
            scheduled_mod = lift_weight_packing(scheduled_mod, target)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"build failed: {one_line(e)}")
    return Scheduled(spec, target, lowered, scheduled_mod, applied, failed, scheduled)


def build_and_measure(params: dict) -> dict:
    t0 = time.time()
    repeat, number, seed = (_positive_int(params, k) for k in ("repeat", "number", "seed"))
    overrides = {}
    for k in ("atol_rel", "rtol"):
        if k in params:
            v = params[k]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
                raise WorkerError("bad_params", f"{k} must be a non-negative number, got {v!r}")
            overrides[k] = float(v)

    export = _export_param(params)
    b = _scheduled_build(params)
    spec, target, lowered, tuned = b.spec, b.target, b.lowered, b.tuned
    try:
        ref = _build(lowered, target)
    except Exception as e:  # noqa: BLE001
        raise WorkerError("tvm", f"build failed: {one_line(e)}")
    if export is not None:
        export_executable(tuned, export)

    kind = target.kind.name
    dev = tvm.device("cpu" if kind in ("llvm", "c") else kind, 0)
    if not dev.exist:
        raise WorkerError("tvm", f"no {target.kind.name} device on this machine to measure on")
    inputs_np = check_inputs(spec, seed)
    inputs = [tvm.runtime.tensor(a, dev) for a in inputs_np]
    vm_t = relax.VirtualMachine(tuned, dev)
    vm_r = relax.VirtualMachine(ref, dev)
    packed = packed_inputs(spec)
    args_t = main_args(packed, vm_t, inputs)
    out_t = _outputs(vm_t["main"](*args_t))
    out_r = _outputs(vm_r["main"](*main_args(packed, vm_r, inputs)))
    check = compare_outputs(out_t, out_r, lambda dt: {**output_tolerance(spec, dt), **overrides})

    timer = vm_t.time_evaluator("main", dev, number=number, repeat=repeat)
    res = timer(*args_t)
    ms_vals = [float(x) * 1e3 for x in res.results]
    out = {
        "latency_ms": {
            "mean": float(np.mean(ms_vals)),
            "median": float(np.median(ms_vals)),
            "std": float(np.std(ms_vals)),
            "min": float(np.min(ms_vals)),
            "repeat": repeat,
            "number": number,
            "threads": runtime_threads(),
        },
        "outputs_match": check["outputs_match"],
        "max_abs_err": check["max_abs_err"],
        "max_rel_err": check["max_rel_err"],
        "tolerance": check["tolerance"],
        **b.result(t0),
    }
    if "mismatch" in check:
        out["mismatch"] = check["mismatch"]
    return out
