"""tgc inside TVM's own pipeline: a pass that applies the cached schedules before ``tvm.compile``.

``ApplyCache(cache, target)`` is a ``tvm.transform.Pass`` over a Relax IRModule (before
legalization, static shapes: what ``from_onnx`` or ``relax.frontend.nn`` give). It

1. converts the entry function with :func:`tgc.from_relax` and partitions it as tgc does
   (TVM's FuseOps rules, decided canonically), so the tasks are tgc's, named by tgc;
2. chooses each task's records from the cache as ``tgc build`` does (the tgc-tune crate's
   ``plan_schedules``: exact records as they are, a zero-trial transfer of a neighbour's
   trace otherwise, TVM's default schedule where nothing is cached). That choice needs each
   task lowered by TVM for its workload hash, which the Rust driver asks of the TVM worker,
   a subprocess, as ``tgc.build`` does;
3. in this process, with the worker's own code (``tgc_worker.measure.schedule_model``):
   builds the partitioned Relax module (one ``Primitive`` function per task), lowers each
   task to one PrimFunc and schedules it with its record (``MetaScheduleApplyDatabase``);
4. returns the caller's module with the entry function replaced: the caller's parameters
   (the constants ``from_relax`` lifted to parameters bound back as constants), the same
   result, calling the task PrimFuncs through ``call_tir``.

Every task PrimFunc is marked ``op_pattern = kOpaque`` (8): ``FuseOps`` does not fuse
opaque calls, so the pipelines ``tvm.compile`` may run (the generic one, which only
legalizes, or a target's, with ``AnnotateTIROpPattern``, ``FuseOps``, ``FuseTIR`` and, on
GPUs, DLight) keep tgc's tasks and their schedules; ``AnnotateTIROpPattern`` keeps a
non-zero pattern, DLight skips a PrimFunc marked ``tirx.is_scheduled``, which
``MetaScheduleApplyDatabase`` set on every scheduled task.

``compile(mod, target, cache=...)`` is the one-line form: the pass, then ``tvm.compile``
for the target the schedules were chosen for.
"""

from __future__ import annotations

import json
import os
import sys
import time

import tvm
import tvm_ffi
from tvm import relax as rx

from . import _native
from .frontend import convert

TgcError = _native.TgcError
# A TgcError raised inside the pass crosses TVM's FFI (RunPass calls transform_module) and
# comes back as what it is, not as a RuntimeError.
tvm_ffi.register_error("TgcError", TgcError)

__all__ = ["ApplyCache", "compile", "OPAQUE"]

# TVM's OpPatternKind::kOpaque: FuseOps never fuses a call_tir of a PrimFunc with it.
OPAQUE = 8


def _worker_measure():
    """The worker's `measure` module, imported in this process from the clone that built
    the extension (where the CLI finds its worker too)."""
    d = os.fspath(_native.worker_dir())
    if d not in sys.path:
        sys.path.insert(0, d)
    from tgc_worker import measure, tvmutil
    from tgc_worker.errors import WorkerError

    return measure, tvmutil, WorkerError


def _target_text(target) -> str:
    """The target as tgc spells it: ``llvm``, ``llvm-generic``, ``cuda``, or TVM JSON."""
    if isinstance(target, str):
        return target
    if isinstance(target, tvm.target.Target):
        return json.dumps(_json_safe(target.export()))
    if isinstance(target, dict):
        return json.dumps(target)
    raise TgcError(f"target: a tgc spelling (llvm, cuda, ...), a dict or a tvm.target.Target, "
                   f"not {type(target).__name__}")


def _json_safe(v):
    """A target's export (tvm_ffi Maps and Arrays) as JSON values."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "items"):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if hasattr(v, "__iter__"):
        return [_json_safe(x) for x in v]
    return str(v)


@tvm.transform.module_pass(opt_level=0, name="tgc.ApplyCache")
class ApplyCache:
    """A ``tvm.transform.Pass`` that partitions a Relax module into tgc's tasks and applies
    the cached schedule of each (the records ``tgc.build`` would choose); insert it before
    ``tvm.compile``.

    ``cache``: the cache file (a path or a :class:`tgc.Cache`; default ``$TGC_CACHE``, else
    the user cache dir); it must exist and hold records for the target. ``target``: as
    ``tgc tune`` spells it (``llvm`` is this machine's CPU), a dict of TVM target JSON, or a
    ``tvm.target.Target``. ``no_cache``: TVM's default schedules (tgc's partition only).
    ``measure_candidates``: candidates measured per transferred task (default 0: rank
    only). ``func``: the function to convert (default ``main``, else the only Relax
    function). ``name``: the model's name in the report.

    After the pass ran, ``target`` is the ``tvm.target.Target`` the schedules were chosen
    for (TVM's canonical form of the one given; compile for it) and ``report`` the
    ``tgc.apply-cache/1`` document: per task its tier, mode, source record, workload hash,
    exact key and functions (the PrimFuncs of the returned module).
    """

    def __init__(self, cache=None, target="llvm", *, no_cache: bool = False,
                 measure_candidates: int | None = None, work_dir=None,
                 func: str | None = None, name: str = "relax"):
        from . import _path

        self.options = dict(target=_target_text(target), cache=_path(cache),
                            no_cache=no_cache, measure_candidates=measure_candidates,
                            work_dir=_path(work_dir))
        self.func = func
        self.name = name
        self.report: dict | None = None
        self._target: tvm.target.Target | None = None

    @property
    def target(self) -> tvm.target.Target:
        if self._target is None:
            raise TgcError("ApplyCache.target: the pass has not run yet")
        return self._target

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        from . import _warn, _worker_python

        t0 = time.time()
        _worker_python()
        module, entry, lifted = convert(mod, self.name, self.func)
        plan, warns = _native.schedule_plan(module, self.name, **self.options)
        _warn(warns)
        measure, tvmutil, WorkerError = _worker_measure()
        try:
            spec = measure.parse_module(json.loads(plan.module_json()))
            target = tvmutil.parse_target(json.loads(plan.target_json()), with_host=True)
            scheduled = measure.schedule_model(spec, target, json.loads(plan.records_json()))
        except WorkerError as e:
            raise TgcError(f"{self.name}: {e.message}") from None
        self.report = json.loads(plan.report_json(json.dumps(scheduled.result(t0))))
        self._target = target
        return _assemble(mod, entry, scheduled.mod, plan.functions(), lifted, self.name)


def _assemble(mod, entry: str, scheduled, functions, lifted, name: str) -> tvm.IRModule:
    """`mod` with `entry` replaced by the scheduled model's main (the caller's parameters,
    the lifted constants bound) and the task PrimFuncs added, marked opaque; the private
    PrimFuncs only the replaced function called are dropped."""
    user_gv = mod.get_global_var(entry)
    user = mod[user_gv]
    main = scheduled["main"]
    n = len(user.params)
    params = list(main.params)
    if len(params) != n + len(lifted):
        raise TgcError(f"{name}: the partitioned model takes {len(params)} parameters, not "
                       f"@{entry}'s {n} and {len(lifted)} lifted constants")
    binding = {}
    for p, q in zip(params[:n], user.params):
        if not tvm_ffi.structural_equal(p.ty, q.ty):
            raise TgcError(f"{name}: parameter {q.name} is {q.ty} in @{entry}, {p.ty} in the "
                           f"partitioned model")
        binding[p] = q
    for p, arr in zip(params[n:], lifted):
        const = rx.const(arr)
        if not tvm_ffi.structural_equal(p.ty, const.ty):
            raise TgcError(f"{name}: a lifted constant is {const.ty}, its parameter {p.ty}")
        binding[p] = const
    bound = main.bind_params(binding)
    body = bound.body
    ret = user.ret_ty
    if (isinstance(ret, rx.TupleType) and len(ret.fields) == 1
            and not isinstance(body.body.ty, rx.TupleType)):
        body = rx.SeqExpr(body.blocks, rx.Tuple([body.body]))
    if not tvm_ffi.structural_equal(body.body.ty, ret):
        raise TgcError(f"{name}: the partitioned model returns {body.body.ty}, @{entry} {ret}")
    func = rx.Function(list(user.params), body, ret, user.is_pure, user.attrs)

    tasks = {f: t for t, fs in functions for f in fs}
    out = {gv: f for gv, f in mod.functions_items() if gv.name_hint != entry}
    # What only the replaced function called (the TE PrimFuncs from_onnx emits for Clip and
    # Pad, which from_relax read as ops) goes with it, unless it is public.
    still = set()
    for f in out.values():
        if isinstance(f, rx.Function):
            still.update(rx.analysis.all_global_vars(f))
    for gv in rx.analysis.all_global_vars(user):
        f = out.get(gv)
        if (isinstance(f, tvm.tirx.PrimFunc) and gv not in still
                and not (f.attrs and "global_symbol" in f.attrs)):
            del out[gv]
    taken = {gv.name_hint for gv in out}
    out[user_gv] = func
    for gv, f in scheduled.functions_items():
        if not isinstance(f, tvm.tirx.PrimFunc):
            continue
        if gv.name_hint in taken:
            raise TgcError(f"{name}: the module already has a function named {gv.name_hint}, "
                           f"the name of one of tgc's tasks")
        f = f.with_attr("op_pattern", OPAQUE)
        if gv.name_hint in tasks:
            f = f.with_attr("tgc.task", tasks[gv.name_hint])
        out[gv] = f
    # Normalize gives the new nodes (a result wrapped in a tuple) their types.
    result = rx.transform.Normalize()(tvm.IRModule(out, attrs=mod.attrs))
    try:
        rx.analysis.well_formed(result)
    except Exception as e:  # noqa: BLE001 - TVM's own account of the violation
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise TgcError(f"{name}: the module with the cached schedules is not well formed: "
                       f"{first}") from None
    return result


def compile(mod: tvm.IRModule, target="llvm", *, cache=None, no_cache: bool = False,
            measure_candidates: int | None = None, work_dir=None, func: str | None = None,
            name: str = "relax", relax_pipeline="default", tir_pipeline="default"):
    """``tvm.compile`` of ``mod`` with the cached schedules: ``ApplyCache(cache, target)``
    and then ``tvm.compile`` for the target they were chosen for. Returns the executable
    (``relax.VirtualMachine(ex, device)`` runs it, with ``mod``'s own parameters)."""
    apply = ApplyCache(cache, target, no_cache=no_cache, measure_candidates=measure_candidates,
                       work_dir=work_dir, func=func, name=name)
    scheduled = apply(mod)
    return tvm.compile(scheduled, target=apply.target, relax_pipeline=relax_pipeline,
                       tir_pipeline=tir_pipeline)
