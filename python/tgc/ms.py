"""tgc's cache as a MetaSchedule database, for TVM's own tuner and pipeline.

``Database(cache, target)`` is a ``tvm.s_tir.meta_schedule`` database (a ``PyDatabase``)
over the tgc cache: what ``ms.relax_integration.tune_relax(..., database=db)`` and
``relax.transform.MetaScheduleApplyDatabase`` (through ``Database.current()``) read and
write::

    from tvm.s_tir import meta_schedule as ms
    db = tgc.ms.Database("cache.sqlite", target)
    ms.relax_integration.tune_relax(mod, {}, target, work_dir, 64, database=db)
    with target, db:
        mod = relax.transform.MetaScheduleApplyDatabase()(mod)

A workload is found by its TVM structural hash: the records ``tgc tune`` wrote for tasks
lowered to that workload, the MetaSchedule databases ``tgc cache import`` brought in, and
what TVM's tuner committed through a ``Database`` before, on ``target`` only, best first.

Each record TVM commits goes into the cache at once (provenance ``metaschedule``), where
``tgc tune``, ``tgc build`` and ``tgc cache stats`` see it. A record that cannot be read back
(a trace the workload no longer replays is TVM's own concern, as with its JSON database) is
left out of a read; a commit the cache cannot store is an error naming the cache.

Given the ``model`` being tuned (``Database(cache, target, model=mod)``: a Relax IRModule
as ``from_onnx`` gives it, an ONNX path or a ``tgc.Module``), a workload with no record of
its own gets tgc's transfer instead: the model is partitioned and planned as ``tgc build``
plans it (``plan_schedules``: the ranked records of its structural or family neighbours),
and ``get_top_k`` returns those traces replayed on the workload (tiles repaired for its
extents, or the anchor block's schedule transferred; ``run_secs`` None, since nothing was
measured on it), and ``MetaScheduleApplyDatabase`` applies the best at zero trials.

Tuning, stock MetaSchedule's evolutionary search puts them in its initial population (its
database picks) but measures none of them for sure: until its cost model has 100 samples
(across all tasks) it ranks the population at random, so a transfer is measured by chance
and, unmeasured, never becomes the task's best. ``SeededSearch`` (a search strategy for
``tune_relax(..., strategy=tgc.ms.SeededSearch())``) measures a workload's unmeasured
database records first, then searches as the evolutionary search does::

    ms.relax_integration.tune_relax(mod, {}, target, work_dir, 64,
                                    database=tgc.ms.Database(cache, target, model=mod),
                                    strategy=tgc.ms.SeededSearch())

TVM's tuning pipeline (``relax.get_pipeline("static_shape_tuning", ...)``, any
``MetaScheduleTuneIRMod``) tunes into the JSON database of its ``work_dir``, whatever database
is current, while its ``MetaScheduleApplyDatabase`` reads the current one. Importing this
module makes the tuning stage use the current database too (and ``SeededSearch``), so that
``with target, db: mod = relax.get_pipeline("static_shape_tuning", ...)(mod)`` tunes into
and compiles from the tgc cache; with no database current it is TVM's own. TVM looks the
tuning function up once per process, so import ``tgc.ms`` before the first tuning pipeline.
"""

from __future__ import annotations

import json
import os

import tvm
import tvm_ffi
from tvm.s_tir.meta_schedule.database import MemoryDatabase, PyDatabase, TuningRecord, Workload
from tvm.s_tir.meta_schedule.search_strategy import (EvolutionarySearch, MeasureCandidate,
                                                     PySearchStrategy)
from tvm.ir.utils import derived_object

from . import _native
from .relax import _json_safe, _target_text, _worker_measure

__all__ = ["Database", "SeededSearch", "SOURCE"]

# The provenance of the records TVM's tuner commits.
SOURCE = "metaschedule"


def _target(target) -> tvm.target.Target:
    """A tvm Target, or a target as tgc spells it (``llvm``: this machine, as ``tgc tune``
    resolves it), or a TVM config dict."""
    if isinstance(target, tvm.target.Target):
        return target
    _, tvmutil, WorkerError = _worker_measure()
    try:
        return tvmutil.parse_target(json.loads(_native.target_config(_target_text(target))))
    except WorkerError as e:
        raise _native.TgcError(e.message) from None


def _hash(mod) -> int:
    return tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF


def _mean(rec: TuningRecord) -> float:
    secs = [float(x) for x in rec.run_secs or []]
    return sum(secs) / len(secs) if secs else float("inf")


@derived_object
class Database(PyDatabase):
    """The tgc cache at ``cache`` (a path or ``postgres://`` URL; default ``$TGC_CACHE``,
    else the user cache dir) as a MetaSchedule database of ``target``'s records."""

    def __init__(self, cache: str | os.PathLike | None = None, target="llvm", create: bool = True,
                 *, model=None, name: str = "model"):
        super().__init__()
        from . import _path

        self._cache = _native.Cache(_path(cache), create)
        self.target = _target(target)
        self._target_json = json.dumps(_json_safe(self.target.export()))
        # this process's workloads (the cache holds records, not workloads of its own)
        self._mem = MemoryDatabase()
        self._committed: list[TuningRecord] = []
        # workload hash -> [(trace JSON, source workload)]: the model's transferred tasks
        self._transfers: dict[int, list] = {}
        self._replayed: dict[int, list] = {}
        #: records ``get_top_k`` returned from transfers (each return counts)
        self.transfers_served = 0
        #: transfers left out: they did not replay on the workload, or MetaSchedule's search
        #: could not mutate the replayed trace (an anchor transfer's; its search would fail)
        self.transfers_skipped = 0
        #: the cache's records of a workload left out of ``get_top_k``: TVM could not read
        #: one back, or its trace did not replay on the workload
        self.records_skipped = 0
        self._good: set = set()
        self._bad: set = set()
        if model is not None:
            self._plan(model, name)

    def _plan(self, model, name: str) -> None:
        """The transfers ``tgc build`` would apply to `model`'s tasks, by workload hash."""
        from . import _warn, _worker_python, load

        _worker_python()
        plan, warns = _native.schedule_plan(load(model, name=name), name, target=self._target_json,
                                            cache=os.fspath(self.path))
        _warn(warns)
        measure, _, WorkerError = _worker_measure()
        hashes = plan.workload_hashes()
        try:
            for task, entries in json.loads(plan.records_json()).items():
                pairs = [p for p in measure._record_traces(entries, task) if p[1] is not None]
                if pairs:
                    self._transfers[hashes[task]] = pairs
        except WorkerError as e:
            raise _native.TgcError(f"{name}: {e.message}") from None

    def _transferred(self, workload: Workload) -> list[TuningRecord]:
        """The model's transfer for `workload`, replayed on it once (those that replay)."""
        h = _hash(workload.mod)
        if h not in self._transfers:
            return []
        if h not in self._replayed:
            from tvm.s_tir.meta_schedule.arg_info import ArgInfo
            from tgc_worker.replay import replay
            from tgc_worker.tvmutil import make_context

            wl = workload.mod
            postprocs = list(make_context(wl, self.target, "transfer").space_generator.postprocs)
            done = [replay(wl, self.target, postprocs, tj, src) for tj, src in self._transfers[h]]
            kept = [r for r in done if r.ok and r.search_safe]
            self.transfers_skipped += len(done) - len(kept)
            self._replayed[h] = [
                TuningRecord(r.sch.trace, workload, run_secs=None, target=self.target,
                             args_info=ArgInfo.from_prim_func(wl["main"]))
                for r in kept
            ]
        return self._replayed[h]

    @property
    def path(self):
        return self._cache.path

    def has_workload(self, mod: tvm.IRModule) -> bool:
        h = _hash(mod)
        return (self._mem.has_workload(mod) or h in self._transfers
                or bool(self._cache.ms_top_k(h, self._target_json, 1)))

    def commit_workload(self, mod: tvm.IRModule) -> Workload:
        return self._mem.commit_workload(mod)

    def commit_tuning_record(self, record: TuningRecord) -> None:
        self._committed.append(record)
        if not record.run_secs or _mean(record) >= 1e9:
            return  # a failed candidate (MetaSchedule's 1e10): nothing for the cache
        workload = json.dumps(_json_safe(record.workload.as_json()))
        self._cache.ms_commit(workload, json.dumps(_json_safe(record.as_json())), SOURCE)

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        """The cache's best `top_k` valid records of the workload on the target (this
        process's commits among them), each trace once; with none, the model's transfer."""
        if top_k <= 0:
            return []
        found = []
        for text in self._cache.ms_top_k(_hash(workload.mod), self._target_json, top_k):
            rec = self._readable(text, workload)
            if rec is not None:
                found.append(rec)
        if not found:
            found = self._transferred(workload)[:top_k]
            self.transfers_served += len(found)
        return found

    def _readable(self, text: str, workload: Workload) -> TuningRecord | None:
        """The record, when TVM reads it back and its trace replays on the workload (TVM
        would fail on it while tuning or compiling); else None, counted once per record."""
        key = (_hash(workload.mod), text)
        if key in self._bad:
            return None
        try:
            rec = TuningRecord.from_json(json.loads(text), workload)
            if key not in self._good:
                rec.trace.apply_to_schedule(tvm.s_tir.Schedule(workload.mod), remove_postproc=False)
                self._good.add(key)
            return rec
        except Exception:  # noqa: BLE001 - TVM's errors: unreadable, or names what is not there
            self._bad.add(key)
            self.records_skipped += 1
            return None

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """The records this Database committed, failed candidates included."""
        return list(self._committed)

    def __len__(self) -> int:
        return len(self._committed)


@derived_object
class SeededSearch(PySearchStrategy):
    """A search strategy that measures the database's unmeasured records of the workload
    (``run_secs`` None: a ``Database``'s transfers) in its first round, at most `seeds` of
    them (default: one round), best first, the rest of that round filled by `search`
    (default: MetaSchedule's ``EvolutionarySearch()``), which runs alone afterwards with the
    measured seeds among its database picks. The seeds count against the task's trials and
    take no round of their own; a candidate of the search that repeats a seed is dropped."""

    def __init__(self, search=None, seeds: int | None = None):
        super().__init__()
        self.search = search if search is not None else EvolutionarySearch()
        self.seeds = seeds
        self._context = None
        self._pending: list[MeasureCandidate] = []
        self._seeded: set[int] = set()
        self._round = 0
        #: seeds measured by this strategy's current task
        self.seeds_measured = 0

    def _initialize_with_tune_context(self, context) -> None:
        self._context = context
        self.search._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        self.search.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database,
                               cost_model)
        self._pending, self._seeded, self.seeds_measured = [], set(), 0
        self._round = min(num_trials_per_iter, max_trials)
        if database is None:
            return
        limit = min(self.seeds if self.seeds is not None else num_trials_per_iter, self._round)
        mod = self._context.mod
        if limit <= 0 or not database.has_workload(mod):
            return
        records = database.get_top_k(database.commit_workload(mod), limit)
        self._pending = [c for c in map(self._candidate, records) if c is not None]

    def _candidate(self, record: TuningRecord) -> MeasureCandidate | None:
        """A measure candidate of an unmeasured record whose trace applies, else None."""
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo
        from tgc_worker.replay import new_schedule

        if record.run_secs is not None:
            return None
        try:
            sch = new_schedule(self._context.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
        except Exception:  # noqa: BLE001 - a seed that does not apply is no candidate
            return None
        h = _hash(sch.mod)
        if h in self._seeded:
            return None
        self._seeded.add(h)
        return MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True))

    def post_tuning(self) -> None:
        self.search.post_tuning()

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        seeds, self._pending = self._pending, []
        if len(seeds) >= self._round:
            return seeds
        found = self.search.generate_measure_candidates()
        if found is None:
            return seeds or None
        found = [c for c in found if _hash(c.sch.mod) not in self._seeded]
        return seeds + found[:self._round - len(seeds)] if seeds else found

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.seeds_measured += sum(1 for c in measure_candidates if _hash(c.sch.mod) in self._seeded)
        self.search.notify_runner_results(measure_candidates, results)

    def clone(self) -> "SeededSearch":
        return SeededSearch(self.search.clone(), self.seeds)


# The global function TVM's MetaScheduleTuneIRMod calls (registered by TVM's Python side on
# importing relax_integration, which therefore comes first).
_TUNE_RELAX = "tvm.s_tir.meta_schedule.tune_relax"
from tvm.s_tir.meta_schedule import relax_integration as _relax_integration  # noqa: E402

_tvms_tune_relax = tvm_ffi.get_global_func(_TUNE_RELAX)


def _tune_relax_into_current(mod, params, target, work_dir, max_trials_global,
                             max_trials_per_task=None, op_names=None):
    """TVM's pipeline tuning stage, tuning into the current database when one is entered."""
    from tvm.s_tir.meta_schedule.database import Database as MsDatabase

    current = MsDatabase.current()
    if current is None:
        return _tvms_tune_relax(mod, params, target, work_dir, max_trials_global,
                                max_trials_per_task, op_names)
    _relax_integration.tune_relax(
        mod, params, target, work_dir, int(max_trials_global),
        None if max_trials_per_task is None else int(max_trials_per_task), op_names,
        database=current, strategy=SeededSearch())
    return mod


tvm_ffi.register_global_func(_TUNE_RELAX, _tune_relax_into_current, override=True)
