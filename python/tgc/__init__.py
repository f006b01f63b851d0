"""tgc for TVM users: Task Graph Caching from Python, in process.

The Rust library (``tgc._native``, built from this clone by maturin) does the work: loading
models, partitioning them into tuning tasks, keying them, the cache, the tuning driver and
the build. This layer gives it Pythonic signatures and returns the CLI's JSON documents as
dicts. A model is a path (ONNX, text IR, or a zoo name, as the CLI takes it), a Relax
``tvm.IRModule`` (through :func:`from_relax`), or a :class:`Module`.

Every error is a :class:`TgcError` with the one-line message the CLI prints.

``tgc.relax`` (imported on first use, it needs TVM) holds ``ApplyCache``, the pass that
applies the cached schedules inside TVM's own pipeline, and ``compile``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Iterable, Sequence

from . import _native
from .frontend import from_relax, relax_text

TgcError = _native.TgcError
Module = _native.Module

__all__ = [
    "TgcError", "Module", "load", "from_relax", "relax_text", "tasks", "similarity", "Cache",
    "tune", "build", "relax", "ms",
]


def __getattr__(name: str):
    # tgc.relax and tgc.ms import TVM; the rest of the package works without it.
    if name in ("relax", "ms"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tgc' has no attribute {name!r}")


def _is_irmodule(model: Any) -> bool:
    try:
        import tvm
    except ImportError:
        return False
    return isinstance(model, tvm.IRModule)


def load(model, *, shapes: dict[str, Sequence[int]] | None = None, name: str | None = None,
         layout: str = "model", pack_weights: bool = False) -> Module:
    """The tgc IR of ``model``: a path or zoo name (``shapes``: static shapes of ONNX
    inputs by name), a Relax ``IRModule`` (``name`` names it), or a ``Module`` as is.
    ``layout="nhwc"``: its 2-D convolutions in NHWC with HWIO kernels (``--layout nhwc``).
    ``pack_weights``: its contractions' weights marked for packing (``--pack-weights``)."""
    if layout not in ("model", "nhwc"):
        raise TgcError(f"layout must be 'model' or 'nhwc', not {layout!r}")
    if isinstance(model, Module):
        m = model
    elif _is_irmodule(model):
        m = from_relax(model, name=name or "relax")
    elif isinstance(model, (str, os.PathLike)):
        pairs = [(k, [int(d) for d in v]) for k, v in (shapes or {}).items()]
        m = Module.load(os.fspath(model), pairs)
    else:
        raise TgcError(f"a model is a path, a zoo name, a tvm.IRModule or a tgc.Module, not {type(model).__name__}")
    m = m.convert_layout() if layout == "nhwc" else m
    return m.pack_weights() if pack_weights else m


def _label(model, name: str | None) -> str:
    if name is not None:
        return name
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, Module):
        return model.name
    return "relax"


def tasks(model, *, shapes=None, max_depth: int = 256, name: str | None = None,
          layout: str = "model", pack_weights: bool = False) -> dict:
    """The distinct tuning tasks of ``model``, as ``tgc tasks --json`` prints them (schema
    ``tgc.tasks/1``): per task its name, ops, the exact, structural and family keys,
    occurrences, FLOPs, bytes, parameter and result types. ``model`` in the document is
    ``name``, else the path as given. ``layout="nhwc"``, ``pack_weights``: as ``--layout
    nhwc`` and ``--pack-weights`` tune them."""
    m = load(model, shapes=shapes, name=name, layout=layout, pack_weights=pack_weights)
    return json.loads(_native.tasks_json(m, _label(model, name), max_depth))


def similarity(models: Iterable, *, level: str = "structural", names: Sequence[str] | None = None) -> dict:
    """``tgc similarity --json`` of several models (schema ``tgc.similarity/1``): the census
    per model at every key level, the coverage matrix at ``level`` (``exact``,
    ``structural`` or ``family``) and nearest structural neighbour distances. A file goes
    by its stem, a zoo model by its name, a Relax module by ``names[i]`` (else
    ``relax<i>``)."""
    models = list(models)
    if names is not None and len(names) != len(models):
        raise TgcError(f"names: {len(names)} names for {len(models)} models")
    entries = []
    for i, m in enumerate(models):
        if isinstance(m, (str, os.PathLike)):
            source = os.fspath(m)
            is_file = Path(source).exists()
            display = Path(source).stem if is_file else source
            origin = "file" if is_file else "zoo"
        else:
            display = source = (names[i] if names else None) or (m.name if isinstance(m, Module) else f"relax{i}")
            origin = "relax" if _is_irmodule(m) else "module"
        if names is not None:
            display = names[i]
        entries.append([display, source, origin, load(m, name=display)])
    stems = [e[0] for e in entries]
    if len(set(stems)) != len(stems):
        # The CLI's rule: where two names clash, every model goes by what it was given as.
        for e in entries:
            e[0] = e[1]
    return json.loads(_native.similarity_json([tuple(e) for e in entries], level))


class Cache:
    """The tgc task cache: one SQLite file of the best MetaSchedule records per task, target
    and toolchain. ``path`` defaults to ``$TGC_CACHE``, else the user cache dir; with
    ``create=False`` a missing file is an error (as ``tgc cache stats`` treats it)."""

    def __init__(self, path: str | os.PathLike | None = None, *, create: bool = True):
        self._cache = _native.Cache(None if path is None else os.fspath(path), create)

    @property
    def path(self) -> Path:
        return Path(self._cache.path)

    def __repr__(self) -> str:
        return f"tgc.Cache({str(self.path)!r})"

    def stats(self) -> dict:
        """``tgc cache stats --json`` (schema ``tgc.cache-stats/1``): counts of tasks,
        imported workloads, traces and records, per target and toolchain."""
        return json.loads(self._cache.stats_json())

    def lookup(self, model, *, target: str = "llvm", task: str | None = None, limit: int = 8,
               toolchain: str | None = None, shapes=None) -> dict:
        """The ranked cached records for each distinct task of ``model`` on ``target``
        (``llvm``: this machine, ``llvm-generic``, ``cuda`` or a TVM target JSON), best
        first, at most ``limit`` per task: tier (exact, tvm_hash, structural, family),
        latency, trials, the source task and the trace. ``task``: only the task of this
        name or exact key. ``toolchain``: ``TVM/FFI/LLVM`` (default: the pinned one)."""
        m = load(model, shapes=shapes)
        return json.loads(self._cache.lookup_json(m, _label(model, None), target, task, limit, toolchain))

    def import_database(self, directory: str | os.PathLike, *, toolchain: str | None = None) -> str:
        """``tgc cache import DIR``: a MetaSchedule JSON database (``database_workload.json``,
        ``database_tuning_record.json``) into the cache. Returns the summary line."""
        return self._cache.import_msdb(os.fspath(directory), toolchain)

    def export_database(self, directory: str | os.PathLike, *, toolchain: str | None = None,
                        target: str | None = None, model=None, shapes=None) -> str:
        """``tgc cache export DIR``: one toolchain's records (of one ``target``, a TVM target
        JSON, when given) as a MetaSchedule JSON database. With ``model``, only the TVM
        workloads its tasks lower to (this starts the TVM worker). Returns the summary."""
        workloads = None
        if model is not None:
            m = load(model, shapes=shapes)
            hashes = _native.workload_hashes(m, _label(model, None), target or "llvm")
            workloads = sorted({h for _, h in hashes})
        return self._cache.export_msdb(os.fspath(directory), toolchain, target, workloads)


def _worker_python() -> None:
    # The driver starts the TVM worker with $TGC_PYTHON; inside the TVM venv that is us.
    os.environ.setdefault("TGC_PYTHON", sys.executable)


def _warn(messages: list[str]) -> None:
    for m in messages:
        warnings.warn(m, stacklevel=3)


def tune(model, *, target: str = "llvm", cache: str | os.PathLike | Cache | None = None,
         trials_per_task: int | None = None, trials: int | None = None,
         time_budget: float | None = None, no_cache: bool = False, max_tasks: int | None = None,
         trials_per_round: int | None = None, population: int | None = None,
         max_seeds: int | None = None, patience: int | None = None,
         seeded_patience: int | None = None, tolerance: float | None = None,
         cost_model: str | os.PathLike | None = None, cost_model_warm_start: bool = True,
         measure: bool = True, work_dir: str | os.PathLike | None = None,
         cache_read_only: bool = False, rpc: str | None = None, rpc_key: str | None = None,
         rpc_sessions: int | None = None, shapes=None, name: str | None = None,
         layout: str = "model", pack_weights: bool = False) -> dict:
    """Tunes ``model`` with TVM MetaSchedule seeded from the cache and writes the results
    back: the ``tgc tune`` driver (the tgc-tune crate), the keywords are its flags. Returns
    the report (``tgc tune --report``) as a dict. Raises ``TgcError`` when the tuned build's
    outputs differ from an untuned build's (the report is the exception's ``report``).
    ``cache`` is a file or a ``postgres://`` URL (docs/scale.md); ``cache_read_only``
    reads it and writes nothing back; ``rpc="HOST:PORT", rpc_key=KEY`` measures on the
    devices a TVM RPC tracker offers under the key; ``layout="nhwc"`` tunes the model with
    its convolutions in NHWC (``--layout nhwc``), ``pack_weights`` with their weights
    layout-free (``--pack-weights``)."""
    _worker_python()
    m = load(model, shapes=shapes, name=name, layout=layout, pack_weights=pack_weights)
    opts = dict(target=target, cache=_path(cache), no_cache=no_cache,
                trials_per_task=trials_per_task, trials=trials, time_budget=time_budget,
                max_tasks=max_tasks, trials_per_round=trials_per_round, population=population,
                max_seeds=max_seeds, patience=patience, seeded_patience=seeded_patience,
                tolerance=tolerance, cost_model=_path(cost_model),
                cost_model_warm_start=cost_model_warm_start, measure=measure,
                work_dir=_path(work_dir), cache_read_only=cache_read_only, rpc=rpc,
                rpc_key=rpc_key, rpc_sessions=rpc_sessions)
    text, warns, problem = _native.tune_json(m, _label(model, name), **opts)
    _warn(warns)
    return _checked(json.loads(text), problem, check=True)


def _path(p) -> str | None:
    if p is None:
        return None
    if isinstance(p, Cache):
        return str(p.path)
    return os.fspath(p)


def _checked(report: dict, problem: str | None, check: bool) -> dict:
    """The CLI's ending: a build whose outputs differ from an untuned build's is an error
    (tune; build with ``check``), else a warning. The exception carries the report."""
    if problem:
        if check:
            e = TgcError(problem)
            e.report = report
            raise e
        warnings.warn(problem, stacklevel=3)
    return report


def build(model, *, target: str = "llvm", cache: str | os.PathLike | Cache | None = None,
          output: str | os.PathLike | None = None, no_cache: bool = False,
          measure_candidates: int | None = None, bench: bool = False,
          onnxruntime: bool = False, work_dir: str | os.PathLike | None = None,
          check: bool = False, cache_read_only: bool = False, shapes=None,
          name: str | None = None, layout: str = "model", pack_weights: bool = False):
    """Compiles the deployable ``model`` with the cached schedule per task and a zero-trial
    transfer where no exact record exists: ``tgc build`` (tgc-tune's build). With
    ``output``, writes the library there (and its sidecar ``output + ".json"``) and returns
    the build report as a dict; without, returns ``(executable, report)``, the library
    loaded with ``tvm.runtime.load_module`` (run it with ``relax.VirtualMachine``).
    ``check``: also build the model untuned and compare the outputs on random inputs (the
    report's ``end_to_end``; a difference raises TgcError); without it the model is built
    once and nothing runs. ``bench``: time the library and an untuned build (the report's
    ``bench``); with ``onnxruntime`` and an ONNX file as ``model``, also onnxruntime on that
    file, on the same inputs and threads (``bench["onnxruntime"]``). ``layout="nhwc"``:
    built with the convolutions in NHWC (``--layout nhwc``; the sidecar gives the HWIO
    kernels' ``permutation`` of the model's). ``pack_weights``: the contractions' weights
    packed (``--pack-weights``): the library's ``main_transform_params`` takes the inputs
    the sidecar marks ``packed`` and returns what ``main`` takes after the others."""
    import tempfile

    if onnxruntime:
        if not bench:
            raise TgcError("onnxruntime=True times onnxruntime beside the library: it needs bench=True")
        if not (isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith(".onnx")
                and os.path.isfile(model)):
            raise TgcError(f"{model!s:.80}: onnxruntime=True times an ONNX file (a .onnx model), not this")
    _worker_python()
    m = load(model, shapes=shapes, name=name, layout=layout, pack_weights=pack_weights)
    keep = output is not None
    if not keep:
        tmp = tempfile.mkdtemp(prefix="tgc-build-")
        output = os.path.join(tmp, "model.so")
    opts = dict(target=target, cache=_path(cache), no_cache=no_cache,
                measure_candidates=measure_candidates, check=check, bench=bench,
                onnxruntime=os.fspath(model) if onnxruntime else None,
                work_dir=_path(work_dir), cache_read_only=cache_read_only)
    text, warns, problem = _native.build_json(m, _label(model, name), os.fspath(output), **opts)
    _warn(warns)
    report = _checked(json.loads(text), problem, check)
    if keep:
        return report
    import tvm

    return tvm.runtime.load_module(os.fspath(output)), report
