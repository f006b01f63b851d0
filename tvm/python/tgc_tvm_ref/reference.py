"""Run TVM 0.27's import, fusion and task extraction on an ONNX model and describe the result.

Everything here is plain data extraction from TVM objects; the JSON layout is documented in
``tvm/python/README.md``.
"""

from __future__ import annotations

import collections
import hashlib
import os
import time
import warnings
from typing import Any

from . import SCHEMA

# OpPatternKind values (include/tvm/relax/op_attr_types.h, shared with TIR's AnnotateTIROpPattern).
PATTERN_NAMES = {
    0: "ElemWise",
    1: "Broadcast",
    2: "Injective",
    3: "CommReduce",
    4: "OutEWiseFusable",
    7: "Tuple",
    8: "Opaque",
}

PIPELINE = [
    "DecomposeOpsForInference",
    "LegalizeOps",
    "AnnotateTIROpPattern",
    "FoldConstant",
    "FuseOps",
    "FuseTIR",
]

# Where TVM bounds fusion.  Read in apache/tvm (main at 5d4dc87; src/relax/transform/fuse_ops.cc
# and src/relax/analysis/graph_partitioner.cc are byte-identical to tag v0.26.0, so they are the
# sources of the 0.27 wheel as well).  `config_registered` is re-checked at run time.
FUSE_OPS_LIMITS: dict[str, Any] = {
    "max_fused_ops": {
        "value": 256,
        "constant": "kMaxFusedOps",
        "source": "src/relax/transform/fuse_ops.cc: constexpr uint32_t kMaxFusedOps = 256;",
        "config_key": "relax.FuseOps.max_depth",
        "config_source": (
            "src/relax/transform/fuse_ops.cc: TVM_REGISTER_PASS_CONFIG_OPTION"
            '("relax.FuseOps.max_depth", int64_t); FuseOps reads '
            'pc->GetConfig<int64_t>("relax.FuseOps.max_depth", kMaxFusedOps)'
        ),
        "semantics": (
            "GraphPartitioner::RunFuse skips fusing a node into its post-dominator's group when "
            "CountFusedNodesWithNewChild (nodes already in the dominator's group + nodes on the "
            "paths from the node up to the dominator) > max depth"
        ),
    },
    "max_function_args": {
        "value": 0,
        "source": (
            "src/relax/transform/fuse_ops.cc: relax::FuseOps constructs "
            "GraphPartitioner(&arena, opt_level, max_fuse_depth, /*max_function_args=*/0)"
        ),
        "semantics": (
            "0 disables the argument-count check in GraphPartitioner::RunFuse "
            "(only `if (max_function_args_ > 0)` limits arguments); Relax FuseOps never "
            "limits the number of parameters of a fused function"
        ),
    },
    "opt_level": {
        "source": (
            "src/relax/transform/fuse_ops.cc: FuseOps(fuse_opt_level=-1) uses PassContext "
            "opt_level; src/relax/analysis/graph_partitioner.cc: Partition returns singleton "
            "groups when opt_level == 0"
        ),
        "semantics": "any opt_level > 0 gives the same fusion; 0 disables fusion",
    },
    "lift_constants": {
        "value": True,
        "source": (
            "src/relax/transform/fuse_ops.cc: OperatorFusor(mod, graph, groups, "
            "/*lift_constants*/ true)"
        ),
        "semantics": (
            "constants used by a fused group become parameters of the fused function "
            "(named param_0, param_1, ...) and are passed as arguments at the call site"
        ),
    },
    "phases": {
        "value": 3,
        "source": "src/relax/analysis/graph_partitioner.cc: GraphPartitioner::Partition",
        "semantics": (
            "phase 0 fuses OutEWiseFusable anchors with elementwise consumers and "
            "<=Broadcast producers into their post-dominator, phase 1 fuses Injective/Tuple "
            "nodes, phase 2 fuses injective ops into intermediate tuples"
        ),
    },
}

PASS_CONTEXT_OPT_LEVEL = 2  # the PassContext default; see FUSE_OPS_LIMITS["opt_level"]


class UserError(Exception):
    """A problem with the user's input (file, shape); reported as one line, exit code 1."""


# --------------------------------------------------------------------------------------------
# Small helpers over TVM objects
# --------------------------------------------------------------------------------------------


def _dim(value) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


def _type_desc(ty) -> Any:
    """Shape/dtype of a Relax type (tensor or tuple of tensors)."""
    from tvm import relax

    if isinstance(ty, relax.TensorType):
        shape = None if ty.shape is None else [_dim(v) for v in ty.shape.values]
        return {"shape": shape, "dtype": str(ty.dtype)}
    if isinstance(ty, relax.TupleType):
        return {"tuple": [_type_desc(f) for f in ty.fields]}
    return {"type": str(ty)}


def _bindings(func):
    for block in func.body.blocks:
        yield from block.bindings


def _is_op(call, name: str) -> bool:
    import tvm

    return isinstance(call.op, tvm.ir.Op) and call.op.name == name


def _kind(primfunc_name: str) -> str:
    """Legalized PrimFunc name without BlockBuilder's uniquifying number (conv2d12 -> conv2d).

    The bases TVM's legalization uses in these models never end in a digit (conv2d, max_pool2d,
    add, relu, ...), so stripping trailing digits is exact here; README notes the caveat.
    """
    return primfunc_name.rstrip("0123456789") or primfunc_name


def _is_tensor_const(expr) -> bool:
    """A Relax tensor constant (in 0.27 PrimExpr immediates are Constants too)."""
    import tvm
    from tvm import relax

    return isinstance(expr, tvm.ir.expr.Constant) and isinstance(expr.ty, relax.TensorType)


def _flops(mod) -> Any:
    from tvm.s_tir.analysis import estimate_tir_flops

    value = float(estimate_tir_flops(mod))
    return int(value) if value.is_integer() else value


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# Model loading
# --------------------------------------------------------------------------------------------


def parse_shape(text: str) -> tuple[str, list[int]]:
    """`name=1x224x224x3` -> ("name", [1, 224, 224, 3])."""
    name, sep, dims = text.partition("=")
    if not sep or not name or not dims:
        raise UserError(f"--shape {text!r}: expected NAME=D0xD1x..., e.g. input=1x224x224x3")
    try:
        values = [int(d) for d in dims.lower().split("x")]
    except ValueError:
        raise UserError(f"--shape {text!r}: dimensions must be integers") from None
    if any(v <= 0 for v in values):
        raise UserError(f"--shape {text!r}: dimensions must be positive")
    return name, values


def load_onnx(path: str):
    import onnx

    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    try:
        return onnx.load(path)
    except Exception as exc:  # onnx raises DecodeError and others
        raise UserError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None


def graph_inputs(model) -> dict[str, list[Any]]:
    """Graph inputs that are not initializers, with their declared dims (int or symbol name)."""
    initializers = {init.name for init in model.graph.initializer}
    result = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = []
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_value"):
                dims.append(int(dim.dim_value))
            else:
                dims.append(dim.dim_param or "?")
        result[value.name] = dims
    return result


def resolve_shapes(path: str, model, shapes: dict[str, list[int]]) -> dict[str, list[int]]:
    """Shapes for from_onnx; its keys are the data inputs (the other params are weights)."""
    declared = graph_inputs(model)
    for name in shapes:
        if name not in declared:
            raise UserError(f"{path}: --shape names {name!r}, which is not a graph input")
    for name, dims in shapes.items():
        if len(dims) != len(declared[name]):
            raise UserError(
                f"{path}: --shape {name} has rank {len(dims)}, the model declares "
                f"{len(declared[name])}"
            )
    for name, dims in declared.items():
        if name not in shapes and not all(isinstance(d, int) and d > 0 for d in dims):
            raise UserError(f"{path}: input {name!r} has dynamic shape {dims}; pass --shape")
    if not shapes and declared:
        # No --shape: the first graph input is the data input (ONNX exporters put it first;
        # in structure-only models every weight is a graph input as well).
        first = next(iter(declared))
        shapes = {first: declared[first]}
    return dict(shapes)


# --------------------------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------------------------


def _import_section(mod, data_inputs: dict[str, list[int]]) -> dict[str, Any]:
    import tvm
    from tvm import relax

    main = mod["main"]
    op_counts: collections.Counter = collections.Counter()
    call_tir_callees: collections.Counter = collections.Counter()
    constants: collections.Counter = collections.Counter()
    seen_constants = set()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            op_counts[expr.op.name] += 1
            if expr.op.name == "relax.call_tir":
                call_tir_callees[expr.args[0].name_hint] += 1
        elif _is_tensor_const(expr) and expr not in seen_constants:
            seen_constants.add(expr)
            desc = _type_desc(expr.ty)
            constants[f"{desc['dtype']}{desc['shape']}"] += 1

    for _gvar, func in mod.functions.items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)

    params = list(main.params)
    data = [p for p in params if p.name in data_inputs]
    ret = main.ret_ty
    outputs = ret.fields if isinstance(ret, relax.TupleType) else [ret]
    return {
        "op_counts": dict(sorted(op_counts.items())),
        "num_op_calls": sum(op_counts.values()),
        "call_tir_primfuncs": dict(sorted(call_tir_callees.items())),
        "num_primfuncs": sum(1 for f in mod.functions.values() if not isinstance(f, relax.Function)),
        "params": {
            "data": [{"name": p.name, **_type_desc(p.ty)} for p in data],
            "num_weights": len(params) - len(data),
            "num_input_attr": _dim(main.attrs["num_input"]) if "num_input" in main.attrs else None,
        },
        "constants": dict(sorted(constants.items())),
        "outputs": [_type_desc(o) for o in outputs],
    }


def _legalize_provenance(mod) -> dict[str, dict[str, str]]:
    """PrimFunc name -> the Relax op(s) it was legalized from and their attributes.

    LegalizeOps rewrites each binding's value in place and keeps the bound variable object, so
    the variables of main before and after legalization pair each call_tir with its op.
    Calls that were already call_tir at import (ONNX Pad, Clip's min/max) map to
    ``relax.call_tir`` without attributes.
    """
    import tvm
    from tvm import relax

    with tvm.transform.PassContext(opt_level=PASS_CONTEXT_OPT_LEVEL):
        decomposed = relax.transform.DecomposeOpsForInference()(mod)
        legalized = relax.transform.LegalizeOps()(decomposed)
    before = {}
    for binding in _bindings(decomposed["main"]):
        value = binding.value
        if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
            attrs = "" if value.attrs is None else str(value.attrs)
            before[binding.var] = (value.op.name, attrs)
    ops: dict[str, set] = collections.defaultdict(set)
    attrs: dict[str, set] = collections.defaultdict(set)
    for binding in _bindings(legalized["main"]):
        value = binding.value
        if isinstance(value, relax.Call) and _is_op(value, "relax.call_tir"):
            op, attr = before.get(binding.var, ("?", ""))
            ops[value.args[0].name_hint].add(op)
            if attr:
                attrs[value.args[0].name_hint].add(attr)
    return {
        name: {"relax_op": "|".join(sorted(ops[name])), "attrs": " | ".join(sorted(attrs[name]))}
        for name in ops
    }


def _run_pipeline(mod):
    """PIPELINE without its last pass (FuseTIR)."""
    import tvm
    from tvm import relax

    passes = [
        relax.transform.DecomposeOpsForInference(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
    ]
    with tvm.transform.PassContext(opt_level=PASS_CONTEXT_OPT_LEVEL):
        return tvm.transform.Sequential(passes)(mod)


def _op_entry(mod, gvar, provenance) -> dict[str, Any]:
    prim = mod[gvar]
    pattern = prim.attrs["op_pattern"] if prim.attrs is not None and "op_pattern" in prim.attrs else None
    pattern = None if pattern is None else int(pattern)
    return {
        "primfunc": gvar.name_hint,
        "kind": _kind(gvar.name_hint),
        "relax_op": provenance.get(gvar.name_hint, {}).get("relax_op", "?"),
        "attrs": provenance.get(gvar.name_hint, {}).get("attrs", ""),
        "op_pattern": pattern,
        "pattern_name": "none" if pattern is None else PATTERN_NAMES.get(pattern, str(pattern)),
    }


def _describe_fused_function(mod, func, provenance) -> dict[str, Any]:
    """Body of a Primitive Relax function: its call_tir'd PrimFuncs in binding order."""
    from tvm import relax

    params = list(func.params)
    ref: dict = {p: f"p{i}" for i, p in enumerate(params)}
    body = []
    for binding in _bindings(func):
        value = binding.value
        if isinstance(value, relax.Call) and _is_op(value, "relax.call_tir"):
            entry = _op_entry(mod, value.args[0], provenance)
            entry["args"] = [_arg_ref(a, ref) for a in value.args[1].fields]
        else:
            entry = {"primfunc": None, "kind": type(value).__name__, "relax_op": None,
                     "op_pattern": None, "pattern_name": "none",
                     "args": [_arg_ref(a, ref) for a in _leaf_args(value)]}
        entry["out"] = _type_desc(binding.var.ty)
        ref[binding.var] = f"o{len(body)}"
        body.append(entry)
    result_ref = _arg_ref(func.body.body, ref)
    return {
        "params": [{"name": p.name, **_type_desc(p.ty)} for p in params],
        "body": body,
        "result": result_ref,
    }


def _leaf_args(value) -> list:
    from tvm import relax

    if isinstance(value, relax.Call):
        return list(value.args)
    if isinstance(value, relax.Tuple):
        return list(value.fields)
    if isinstance(value, relax.TupleGetItem):
        return [value.tuple_value]
    return []


def _arg_ref(expr, ref) -> str:
    from tvm import relax

    if expr in ref:
        return ref[expr]
    if _is_tensor_const(expr):
        return "const"
    if isinstance(expr, relax.Tuple):
        return "(" + ",".join(_arg_ref(f, ref) for f in expr.fields) + ")"
    return "?"


def _arg_source(expr, main_params: dict, data_inputs) -> str:
    """What main passes for a group parameter: data input, weight param, constant or activation."""
    if _is_tensor_const(expr):
        return "constant"
    if expr in main_params:
        return "input" if main_params[expr] in data_inputs else "weight"
    return "activation"


def analyse(path: str, shapes: dict[str, list[int]], num_cores: int = 2) -> tuple[dict, dict]:
    """Return (report, timings) for the ONNX model at `path`."""
    import onnx
    import tvm
    import tvm_ffi
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    timings: dict[str, float] = {}
    start = time.perf_counter()
    model = load_onnx(path)
    shapes = resolve_shapes(path, model, shapes)

    mark = time.perf_counter()
    with warnings.catch_warnings():
        # the frontend warns once per sanitized input name (':' and '/' -> '_')
        warnings.simplefilter("ignore")
        imported = from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    timings["import_s"] = time.perf_counter() - mark

    import_section = _import_section(imported, shapes)

    # The pipeline up to FuseOps, then FuseTIR on its result: the same as running all six
    # passes as one Sequential (checked structurally equal on the four models), and half the
    # work of running the pipeline twice.
    mark = time.perf_counter()
    fused = _run_pipeline(imported)
    timings["fuse_ops_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    with tvm.transform.PassContext(opt_level=PASS_CONTEXT_OPT_LEVEL):
        lowered = relax.transform.FuseTIR()(fused)
    timings["fuse_tir_s"] = time.perf_counter() - mark

    target = tvm.target.Target({"kind": "llvm", "num-cores": num_cores})
    mark = time.perf_counter()
    tasks = list(ms.relax_integration.extract_tasks(lowered, target=target))
    timings["extract_tasks_s"] = time.perf_counter() - mark

    mark = time.perf_counter()
    provenance = _legalize_provenance(imported)

    # Task lookup by (structural hash, structural equality) of the normalized module.
    normalize = tvm_ffi.get_global_func("tvm.s_tir.meta_schedule.normalize_mod")
    by_hash: dict[int, list[int]] = collections.defaultdict(list)
    hashes = []
    for index, task in enumerate(tasks):
        h = int(tvm_ffi.structural_hash(task.mod))
        hashes.append(h)
        by_hash[h].append(index)

    def task_of(prim) -> int:
        mod = normalize(prim)
        for index in by_hash.get(int(tvm_ffi.structural_hash(mod)), []):
            if tvm_ffi.structural_equal(mod, tasks[index].mod):
                return index
        raise RuntimeError("a call_tir after FuseTIR matches no extracted task")

    # After FuseTIR: main's call_tir sites, in binding order, and their tasks.  FuseTIR turns
    # each call of a fused function into one call_tir in place, so the i-th call site here is
    # the i-th call site of main without FuseTIR (checked below by output type).  Names cannot
    # pair them: FuseOps reuses names such as `lv` for the new call sites.
    lowered_sites = []
    for binding in _bindings(lowered["main"]):
        value = binding.value
        if isinstance(value, relax.Call) and _is_op(value, "relax.call_tir"):
            lowered_sites.append((binding.var, task_of(lowered[value.args[0]])))

    # Before FuseTIR: main's call sites -> fused Relax function or PrimFunc (a group).
    main = fused["main"]
    main_params = {p: p.name for p in main.params}
    groups: dict[str, dict] = {}
    group_order: list[str] = []
    fused_order = []
    unlowered = collections.Counter()
    for position, binding in enumerate(_bindings(main)):
        value = binding.value
        if not isinstance(value, relax.Call):
            continue
        if isinstance(value.op, tvm.ir.GlobalVar):
            func = fused[value.op]
            if not (func.attrs is not None and "Primitive" in func.attrs and int(func.attrs["Primitive"])):
                raise RuntimeError(f"main calls non-primitive function {value.op.name_hint}")
            key, args = value.op.name_hint, list(value.args)
            if key not in groups:
                groups[key] = {"function": key, **_describe_fused_function(fused, func, provenance)}
        elif _is_op(value, "relax.call_tir"):
            gvar = value.args[0]
            key, args = "call_tir:" + gvar.name_hint, list(value.args[1].fields)
            if key not in groups:
                entry = _op_entry(fused, gvar, provenance)
                entry["args"] = [f"p{i}" for i in range(len(args))]
                entry["out"] = _type_desc(binding.var.ty)
                groups[key] = {
                    "function": None,
                    "params": [_type_desc(a.ty) for a in args],
                    "body": [entry],
                    "result": "o0",
                }
        else:
            unlowered[value.op.name if isinstance(value.op, tvm.ir.Op) else str(value.op)] += 1
            continue
        group = groups[key]
        if "calls" not in group:
            group.update(calls=0, first_call=position, call_sites=[], task=None, param_sources=[])
            group_order.append(key)
        group["calls"] += 1
        group["call_sites"].append(position)
        sources = [_arg_source(a, main_params, shapes) for a in args]
        group["param_sources"].append(sources)
        site = len(fused_order)
        fused_order.append(binding.var)
        if site >= len(lowered_sites) or not tvm_ffi.structural_equal(
            binding.var.ty, lowered_sites[site][0].ty
        ):
            raise RuntimeError(f"call site {site} of main differs with and without FuseTIR")
        task_index = lowered_sites[site][1]
        if group["task"] not in (None, task_index):
            raise RuntimeError(f"group {key} maps to more than one task")
        group["task"] = task_index

    if len(fused_order) != len(lowered_sites):
        raise RuntimeError("main has a different number of call sites with and without FuseTIR")

    # Assemble tasks in order of first call in main.
    task_groups: dict[int, list[str]] = collections.defaultdict(list)
    for key in group_order:
        task_groups[groups[key]["task"]].append(key)
    first_site: dict[int, int] = {}
    for position, (_var, task_index) in enumerate(lowered_sites):
        first_site.setdefault(task_index, position)

    task_entries = []
    for index in sorted(range(len(tasks)), key=lambda i: first_site.get(i, len(lowered_sites) + i)):
        task = tasks[index]
        members = []
        for key in task_groups.get(index, []):
            g = groups[key]
            sources = g.pop("param_sources")
            merged = [
                "|".join(sorted({site[i] for site in sources})) for i in range(len(sources[0]))
            ] if sources else []
            params = g["params"]
            for i, param in enumerate(params):
                param["source"] = merged[i] if i < len(merged) else "?"
            members.append({k: v for k, v in g.items() if k != "task"})
        signatures = {
            tuple((op["kind"], op["op_pattern"], tuple(op["args"])) for op in m["body"])
            for m in members
        }
        head = members[0]["body"] if members else []
        prim = task.mod["main"]
        task_entries.append({
            "task_name": str(task.task_name),
            "weight": int(task.weight),
            "structural_hash": str(hashes[index]),
            "ops": [op["kind"] for op in head],
            "relax_ops": [op["relax_op"] for op in head],
            "op_patterns": [op["op_pattern"] for op in head],
            "group_pattern": max((op["op_pattern"] for op in head if op["op_pattern"] is not None),
                                 default=None),
            "num_groups": len(members),
            "groups_agree": len(signatures) <= 1,
            "calls": sum(m["calls"] for m in members),
            "buffers": [{"shape": [_dim(d) for d in p.shape], "dtype": str(p.dtype)}
                        for p in prim.params],
            "flops": _flops(task.mod),
            "groups": members,
        })

    # Pattern table over every PrimFunc that main or a fused function calls.
    pattern_rows: dict[tuple, dict] = {}
    for key in group_order:
        g = groups[key]
        for op in g["body"]:
            if op["primfunc"] is None:
                continue
            row = pattern_rows.setdefault(
                (op["kind"], op["op_pattern"]),
                {"kind": op["kind"], "op_pattern": op["op_pattern"],
                 "pattern_name": op["pattern_name"], "relax_ops": set(), "primfuncs": set(),
                 "calls": 0},
            )
            row["relax_ops"].add(op["relax_op"])
            row["primfuncs"].add(op["primfunc"])
            row["calls"] += g["calls"]
    patterns = []
    for (_kind_name, _pattern), row in sorted(pattern_rows.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        row["relax_ops"] = sorted(row["relax_ops"])
        row["primfuncs"] = len(row["primfuncs"])
        patterns.append(row)

    group_sizes = collections.Counter(len(groups[k]["body"]) for k in group_order)
    num_fused_functions = sum(1 for g in groups.values() if g["function"] is not None)
    timings["analysis_s"] = time.perf_counter() - mark
    timings["total_s"] = time.perf_counter() - start

    limits = {k: dict(v) for k, v in FUSE_OPS_LIMITS.items()}
    configs = tvm.transform.PassContext.list_configs()
    limits["max_fused_ops"]["config_registered"] = "relax.FuseOps.max_depth" in configs
    limits["max_fused_ops"]["config_set"] = False
    limits["opt_level"]["value"] = PASS_CONTEXT_OPT_LEVEL

    total_weight = sum(int(t.weight) for t in tasks)
    report = {
        "schema": SCHEMA,
        "model": {
            "file": os.path.basename(path),
            "sha256": _sha256(path),
            "opset": {op.domain or "ai.onnx": int(op.version) for op in model.opset_import},
            "onnx_nodes": len(model.graph.node),
            "onnx_op_counts": dict(sorted(collections.Counter(n.op_type for n in model.graph.node).items())),
            "shapes": {k: v for k, v in sorted(shapes.items())},
        },
        "toolchain": {
            "tvm": tvm.__version__,
            "tvm_ffi": tvm_ffi.__version__,
            "onnx": onnx.__version__,
        },
        "settings": {
            "frontend": "tvm.relax.frontend.onnx.from_onnx",
            "keep_params_in_input": False,
            "pipeline": PIPELINE,
            "fused_module": "PIPELINE without FuseTIR: fused Primitive Relax functions (groups)",
            "lowered_module": "FuseTIR applied to the fused module; input of extract_tasks",
            "pass_context_opt_level": PASS_CONTEXT_OPT_LEVEL,
            "target": {"kind": "llvm", "num-cores": num_cores},
            "extract_tasks": "tvm.s_tir.meta_schedule.relax_integration.extract_tasks",
            "module_equality": "structural",
        },
        "fuse_ops_limits": limits,
        "import": import_section,
        "summary": {
            "num_tasks": len(tasks),
            "total_weight": total_weight,
            "sum_of_group_calls": sum(g["calls"] for g in groups.values()),
            "num_main_call_sites": len(lowered_sites),
            "num_fused_functions": num_fused_functions,
            "num_unfused_primfunc_groups": len(groups) - num_fused_functions,
            "group_size_histogram": {str(k): v for k, v in sorted(group_sizes.items())},
            "calls_not_lowered": dict(sorted(unlowered.items())),
        },
        "patterns": patterns,
        "tasks": task_entries,
    }
    return report, timings
