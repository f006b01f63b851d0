"""Task JSON -> Relax Primitive function -> lowered task PrimFunc (the MetaSchedule workload)."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

import tvm
import tvm_ffi
from tvm import relax

from .errors import WorkerError, one_line
from .ops import OPS
from .task import Task

# The passes between our Relax module and MetaSchedule's tasks. No FuseOps: each task
# function already is one group (Primitive=1), FuseTIR turns it into one PrimFunc.
# DecomposeOpsForInference only matters for nn.batch_norm (as in TVM's own pipeline).


def _single_call_patterns(mod: tvm.IRModule) -> dict:
    """{Primitive function name: op_pattern} for every Primitive function whose body calls
    exactly one legalized PrimFunc."""
    out = {}
    for gv, f in mod.functions_items():
        if not isinstance(f, relax.Function) or not f.attrs or "Primitive" not in f.attrs:
            continue
        callees = []
        for block in f.body.blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, relax.Call) and v.op == tvm.ir.Op.get("relax.call_tir"):
                    callees.append(v.args[0])
        if len(callees) == 1:
            prim = mod[callees[0]]
            if prim.attrs and "op_pattern" in prim.attrs:
                out[gv.name_hint] = prim.attrs["op_pattern"]
    return out


# A Primitive function's attribute that lists its params (by index) whose layout the schedule
# may choose: after FuseTIR, the task PrimFunc's `layout_free_buffers`, which MetaSchedule's
# RewriteLayout postprocessor reads (it packs such a weight in the order the schedule reads
# it, in a preprocessing block that the model build lifts out of the runs).
LAYOUT_FREE_ATTR = "tgc.layout_free"


def _layout_free_params(mod: tvm.IRModule) -> dict:
    """{Primitive function name: [param index]} of the functions with LAYOUT_FREE_ATTR."""
    out = {}
    for gv, f in mod.functions_items():
        if isinstance(f, relax.Function) and f.attrs and LAYOUT_FREE_ATTR in f.attrs:
            out[gv.name_hint] = [int(i) for i in f.attrs[LAYOUT_FREE_ATTR]]
    return out


def lower_module(mod: tvm.IRModule) -> tvm.IRModule:
    """Legalizes `mod` and turns each Primitive function into one PrimFunc (FuseTIR).

    A group of one op is a TVM task of its own too, but TVM's FuseOps leaves such an op
    unfused, so its task is the legalized PrimFunc itself, which carries the `op_pattern`
    attribute AnnotateTIROpPattern gave it; FuseTIR's copy of it does not. The attribute is
    part of the structural hash, so it is put back: single-op tasks then hash like TVM's own
    (and records imported from MetaSchedule databases find them).

    A Primitive function's LAYOUT_FREE_ATTR becomes its PrimFunc's `layout_free_buffers`
    (FuseTIR keeps the function's params first and in order)."""
    mod = tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
        ]
    )(mod)
    patterns = _single_call_patterns(mod)
    layout_free = _layout_free_params(mod)
    mod = relax.transform.FuseTIR()(mod)
    by_name = {gv.name_hint: gv for gv in mod.get_global_vars()}
    for name, pattern in patterns.items():
        gv = by_name.get(name)
        if gv is not None and isinstance(mod[gv], tvm.tirx.PrimFunc):
            mod[gv] = mod[gv].with_attr("op_pattern", pattern)
    for name, params in layout_free.items():
        gv = by_name.get(name)
        if gv is not None and isinstance(mod[gv], tvm.tirx.PrimFunc):
            mod[gv] = mod[gv].with_attr("layout_free_buffers", params)
    return mod


def normalize_mod(func) -> tvm.IRModule:
    """The IRModule MetaSchedule tunes for a PrimFunc (what extract_tasks/TuneContext do)."""
    return tvm.get_global_func("tvm.s_tir.meta_schedule.normalize_mod")(func)


def structural_hash_u64(obj) -> str:
    return str(tvm_ffi.structural_hash(obj) & 0xFFFFFFFFFFFFFFFF)


@dataclass
class TaskFunction:
    """A task emitted as a Relax Primitive function into a BlockBuilder."""

    task: Task
    gv: relax.GlobalVar
    # what a caller passes, in order: ("param", k) = the task's k-th declared param,
    # ("const", ndarray) = a lifted `constant` binding
    call_plan: list


def _np_constant(attrs: dict) -> np.ndarray:
    shape = tuple(attrs["shape"])
    vals = attrs["value"]
    arr = np.array(vals, dtype="float64")
    if arr.size == 1:
        arr = np.full(shape, arr.reshape(()), dtype="float64")
    else:
        arr = arr.reshape(shape)
    return arr.astype(attrs["dtype"])


def _first_values(task: Task) -> list[int]:
    """The number of the first result of each binding (params are numbered first)."""
    out = []
    v = len(task.params)
    for b in task.bindings:
        out.append(v)
        v += len(b.results)
    return out


def immediate_operands(task: Task) -> dict[int, int]:
    """{binding index: operand slot} of the operands LegalizeOps writes into the TIR as
    immediates: a rank-0 constant operand of a binary elementwise op, operand 1 if it is
    one, else operand 0 (Relax's _binary). The same rule as tgc_ir::lowering in Rust, which
    keys tasks by it; every other constant is lifted to a parameter."""
    first = _first_values(task)
    scalar = {
        first[bi]
        for bi, b in enumerate(task.bindings)
        if b.op == "constant" and len(b.results[0].shape) == 0
    }
    out = {}
    for bi, b in enumerate(task.bindings):
        if not OPS[b.op].inlines_scalar_constant:
            continue
        for slot in (1, 0):
            if slot < len(b.operands) and b.operands[slot] in scalar:
                out[bi] = slot
                break
    return out


def clip_bounds(task: Task) -> dict[int, list]:
    """{binding index: [(operand slot, value)]} of the finite bounds of every `clip` with
    `tensor_bounds`, min (slot 1) before max (slot 2). The task function takes them as rank-0
    parameters that a `maximum` and a `minimum` read, because that is how TVM's ONNX
    frontend writes Clip from opset 11 on (TE maximum/minimum over the bound tensors,
    constants that FuseOps lifts to parameters of the fused function): such a task is then
    the workload stock TVM tunes for it. An infinite bound is an absent Clip input."""
    out = {}
    for bi, b in enumerate(task.bindings):
        if b.op == "clip" and b.attrs.get("tensor_bounds"):
            finite = [(slot, b.attrs[k]) for slot, k in ((1, "min"), (2, "max"))
                      if math.isfinite(b.attrs[k])]
            if finite:
                out[bi] = finite
    return out


def _param_order(task: Task, immediates: dict[int, int], bounds: dict[int, list]) -> list:
    """Order of the Primitive function's parameters: declared params plus lifted constants
    (constant bindings, and the clip bounds of `clip_bounds`).

    Declared params keep their order; each lifted constant (one with a use that is not an
    immediate) goes right before the first declared param whose first use comes after the
    constant's first use (so when the declared params are in order of first use, as TVM's
    FuseOps makes them, the whole list is in order of first use, as FuseOps' lift_constants
    makes it). A clip's bounds are first used by the clip, as its operands 1 and 2.
    """
    n_params = len(task.params)
    first_use: dict[int, tuple] = {}
    immediate_values = set()
    value_of_binding = _first_values(task)
    for bi, b in enumerate(task.bindings):
        for oi, x in enumerate(b.operands):
            if immediates.get(bi) == oi:
                immediate_values.add(x)
            else:
                first_use.setdefault(x, (bi, oi))
    inf = (float("inf"), 0)
    consts = [
        (first_use.get(value_of_binding[bi], inf), ("const", bi))
        for bi, b in enumerate(task.bindings)
        if b.op == "constant"
        and (value_of_binding[bi] in first_use or value_of_binding[bi] not in immediate_values)
    ]
    consts += [((bi, slot), ("bound", (bi, slot))) for bi, bs in bounds.items() for slot, _ in bs]
    consts.sort(key=lambda c: c[0])  # stable: unused constants stay in binding order
    order = []
    ci = 0
    for k in range(n_params):
        fu = first_use.get(k, inf)
        while ci < len(consts) and consts[ci][0] < fu:
            order.append(consts[ci][1])
            ci += 1
        order.append(("param", k))
    order.extend(entry for _, entry in consts[ci:])
    return order


def _ty_matches(ty, want) -> bool:
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return False
    try:
        shape = tuple(int(d) for d in ty.shape.values)
    except (TypeError, ValueError):
        return False
    return shape == tuple(want.shape) and str(ty.dtype) == want.dtype


def _describe(ty) -> str:
    try:
        return f"{[int(d) for d in ty.shape.values]} {ty.dtype}"
    except Exception:  # noqa: BLE001 - only used for a message
        return str(ty)


def emit_task_function(bb: relax.BlockBuilder, task: Task) -> TaskFunction:
    """Emit `task` into bb as a Relax function with attribute Primitive=1."""
    immediates = immediate_operands(task)
    bounds = clip_bounds(task)
    order = _param_order(task, immediates, bounds)
    fn_params = []
    value_var: dict[int, relax.Expr] = {}
    bound_var: dict[tuple, relax.Var] = {}
    binding_first_value = _first_values(task)
    constant_of_value = {
        binding_first_value[bi]: b for bi, b in enumerate(task.bindings) if b.op == "constant"
    }
    call_plan = []
    for kind, idx in order:
        if kind == "param":
            p = task.params[idx]
            # Named by position, not by the model's value name: TVM names some blocks after
            # their input tensor (a reduction of `x` is the block `x_red`), and a trace names
            # the blocks it schedules, so a model's names would keep one model's records from
            # replaying on the same task of another.
            var = relax.Var(f"p{idx}", relax.TensorType(list(p.ty.shape), p.ty.dtype))
            value_var[idx] = var
            call_plan.append(("param", idx))
        elif kind == "bound":
            bi, slot = idx
            dtype = task.bindings[bi].results[0].dtype
            var = relax.Var(f"b{bi}_{slot}", relax.TensorType([], dtype))
            bound_var[idx] = var
            call_plan.append(("const", np.array(dict(bounds[bi])[slot], dtype=dtype)))
        else:
            b = task.bindings[idx]
            ty = b.results[0]
            var = relax.Var(f"c{idx}", relax.TensorType(list(ty.shape), ty.dtype))
            value_var[binding_first_value[idx]] = var
            call_plan.append(("const", _np_constant(b.attrs)))
        fn_params.append(var)

    attrs = {"Primitive": 1}
    if task.layout_free:
        attrs[LAYOUT_FREE_ATTR] = [
            i for i, (kind, x) in enumerate(call_plan) if kind == "param" and x in task.layout_free
        ]
    R = relax.op
    with bb.function(task.name, fn_params, attrs):
        with bb.dataflow():
            for bi, b in enumerate(task.bindings):
                if b.op == "constant":
                    continue
                where = f"bindings[{bi}] ({b.op})"
                operands = [
                    relax.const(_np_constant(constant_of_value[x].attrs))
                    if immediates.get(bi) == oi
                    else value_var[x]
                    for oi, x in enumerate(b.operands)
                ]
                if bi in bounds:  # the clip's (min, max) parameters, None where infinite
                    operands += [bound_var.get((bi, 1)), bound_var.get((bi, 2))]
                try:
                    expr = OPS[b.op].lower(R, bb, operands, b.attrs)
                    out = bb.emit(expr)
                except (WorkerError, AttributeError, NameError, KeyError, IndexError):
                    raise  # ours, or a bug in this package (reported as internal)
                except Exception as e:  # TVM rejects the op/attrs (struct info inference)
                    raise WorkerError(
                        "bad_task", f"{where}: Relax rejects it: {one_line(e)}", task.name
                    )
                first = binding_first_value[bi]
                if b.op == "split":
                    n = len(b.results)
                    if not isinstance(out.ty, relax.TupleType) or len(out.ty.fields) != n:
                        raise WorkerError(
                            "bad_task", f"{where}: Relax gives {out.ty}, declared {n} results", task.name
                        )
                    outs = [bb.emit(relax.TupleGetItem(out, k)) for k in range(n)]
                else:
                    outs = [out]
                for k, (o, want) in enumerate(zip(outs, b.results)):
                    if not _ty_matches(o.ty, want):
                        raise WorkerError(
                            "bad_task",
                            f"{where}: declared result {k} is {list(want.shape)} {want.dtype}, "
                            f"Relax infers {_describe(o.ty)}",
                            task.name,
                        )
                    value_var[first + k] = o
            res = [value_var[x] for x in task.results]
            ret = res[0] if len(res) == 1 else relax.Tuple(res)
            gv_out = bb.emit_output(ret)
        bb.emit_func_output(gv_out)
    gv = bb.get().get_global_var(task.name)
    return TaskFunction(task, gv, call_plan)


def call_args(tf: TaskFunction, args: list) -> list:
    """The arguments of a call to tf, given the exprs of the task's declared params."""
    out = []
    for kind, x in tf.call_plan:
        out.append(args[x] if kind == "param" else relax.const(x))
    return out


def task_relax_module(task: Task) -> tuple[tvm.IRModule, TaskFunction]:
    """{task function (Primitive=1), main(params...) = task(params..., constants...)}."""
    bb = relax.BlockBuilder()
    tf = emit_task_function(bb, task)
    main_params = [
        relax.Var(p.name, relax.TensorType(list(p.ty.shape), p.ty.dtype)) for p in task.params
    ]
    with bb.function("main", main_params):
        with bb.dataflow():
            out = bb.emit_output(relax.Call(tf.gv, call_args(tf, main_params)))
        bb.emit_func_output(out)
    return bb.get(), tf


def find_primfunc(lowered: tvm.IRModule, name: str, task_name: str):
    for gv, f in lowered.functions_items():
        if gv.name_hint == name and isinstance(f, tvm.tirx.PrimFunc):
            return f
    names = sorted(gv.name_hint for gv in lowered.get_global_vars())
    raise WorkerError(
        "tvm", f"FuseTIR left no PrimFunc named {name!r} (functions: {', '.join(names)})", task_name
    )


@dataclass
class LoweredTask:
    task: Task
    relax_mod: tvm.IRModule  # before lowering
    lowered: tvm.IRModule  # after FuseTIR
    workload: tvm.IRModule  # {"main": task PrimFunc}, normalized as MetaSchedule does
    structural_hash: str


_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 64


def lower_task(task: Task) -> LoweredTask:
    hit = _CACHE.get(task.key)
    if hit is not None:
        _CACHE.move_to_end(task.key)
        return hit
    mod, _ = task_relax_module(task)
    try:
        lowered = lower_module(mod)
    except Exception as e:
        raise WorkerError("tvm", f"lowering failed: {one_line(e)}", task.name)
    prim = find_primfunc(lowered, task.name, task.name)
    workload = normalize_mod(prim)
    lt = LoweredTask(task, mod, lowered, workload, structural_hash_u64(workload))
    _CACHE[task.key] = lt
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return lt
