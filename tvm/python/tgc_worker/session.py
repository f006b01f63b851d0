"""One task's tuning session: TVM's hands for the driver's search (tune/src/search.rs).

The driver opens a session for a task (`tune_open`), then asks for what it needs, one
request at a time: seeds replayed into candidates (`tune_seeds`), batches of candidates
measured as trials (`tune_measure`), rounds of MetaSchedule's evolutionary search
(`tune_search`), windows of fresh timing runs of chosen candidates (`tune_windows`), the
session database's best records (`tune_records`), and the end (`tune_close`). The session
measures and reports. It decides nothing: which batch comes first, whether an exact hit
holds, when the search stops, what is re-measured before write-back and whether the cost
model learns from what was measured are the driver's rules (tune/src/rules.rs).

What a trial is, is MetaSchedule's: the candidate is built and run with the task's
evaluator, the inner EvolutionarySearch is notified, the record goes into the session's
database (from which the search takes its measured population) and the XGB cost model is
updated with it, as `ms.tune_tasks`' task scheduler and its default measure callbacks do
(AddToDatabase, RemoveBuildArtifact, UpdateCostModel). The update is made before the next
batch is measured or searched, or at close when the driver asks for it: an exact hit that
ends the task leaves the cost model untrained on it.

Every candidate has an id, unique in the session: seeds, search candidates and records
alike, one id per schedule (by its trace), so that a record of the database is the
candidate it was measured as. A candidate is built once: the artifact of its trial (or of
its first window) stays until the session closes, so the exact-hit check and the
re-measurement of the best records time what the trial built. A schedule is measured as a
trial once: the search's proposals of measured ones are dropped. One session is open at a
time: opening another closes it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass

import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate

from .errors import WorkerError, one_line
from .replay import new_schedule, replay
from .tvmutil import make_context, physical_cores, runtime_threads, target_num_cores, trace_to_json


# how often one round asks MetaSchedule's search again when it proposed measured schedules
GENERATE_TRIES = 3


def _log(msg: str) -> None:
    print(f"tgc_worker: {msg}", file=sys.stderr, flush=True)


@dataclass
class Candidate:
    """A schedule of the session's task. `sch` is None for a record the database returned
    that was not measured in this session's windows yet (it is replayed from `trace` when
    it is). `runner_input` is set once the candidate was built (for a trial or a window)."""

    key: str  # its trace as JSON text
    sch: object | None
    trace: object
    args_info: list
    runner_input: object | None = None
    build_error: str | None = None


@derived_object
class SearchView(ms.database.PyDatabase):
    """What the evolutionary search sees of the session database: all of it but the records
    whose trace (as JSON text) is in `hidden`, which it could not mutate without failing
    (replay.search_safe). The session commits into and reads `inner` itself."""

    def __init__(self, inner, hidden: set):
        super().__init__()
        self.inner, self.hidden = inner, hidden

    def has_workload(self, mod) -> bool:
        return self.inner.has_workload(mod)

    def commit_workload(self, mod):
        return self.inner.commit_workload(mod)

    def commit_tuning_record(self, record) -> None:
        self.inner.commit_tuning_record(record)

    def get_top_k(self, workload, top_k: int) -> list:
        if not self.hidden:
            return list(self.inner.get_top_k(workload, top_k))
        recs = self.inner.get_top_k(workload, top_k + len(self.hidden))
        return [r for r in recs if json.dumps(trace_to_json(r.trace)) not in self.hidden][:top_k]

    def get_all_tuning_records(self) -> list:
        return [
            r for r in self.inner.get_all_tuning_records()
            if json.dumps(trace_to_json(r.trace)) not in self.hidden
        ]

    def __len__(self) -> int:
        return len(self.inner)


def _int(p: dict, name: str, lo: int, task: str, hi: int | None = None) -> int:
    v = p[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        raise WorkerError("bad_params", f"{name} must be an int in [{lo}, {hi}], got {v!r}", task)
    return v


def _seconds(p: dict, name: str, task: str) -> float:
    v = p[name]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
        raise WorkerError("bad_params", f"{name} must be a positive number, got {v!r}", task)
    return float(v)


def rpc_param(rpc, task=None):
    """tune_open's `rpc`: None (measure on this machine) or a pool.RpcTracker."""
    from .pool import RpcTracker

    if rpc is None:
        return None
    fields = ("tracker_host", "tracker_port", "key", "sessions")
    if not isinstance(rpc, dict):
        raise WorkerError("bad_params", f"rpc must be an object with {', '.join(fields)}", task)
    for k in rpc:
        if k not in fields:
            raise WorkerError("bad_params", f"rpc: unknown field {k!r}", task)
    for k in fields:
        if k not in rpc:
            raise WorkerError("bad_params", f"rpc: missing field {k!r}", task)
    host, key = rpc["tracker_host"], rpc["key"]
    if not isinstance(host, str) or not host:
        raise WorkerError("bad_params", f"rpc.tracker_host must be a host name, got {host!r}", task)
    if not isinstance(key, str) or not key:
        raise WorkerError("bad_params", f"rpc.key must be a non-empty string, got {key!r}", task)
    port = _int(rpc, "tracker_port", 1, task, 65535)
    sessions = _int(rpc, "sessions", 1, task, 1024)
    return RpcTracker(host, port, key, sessions)


class Session:
    """The state of one task's tuning between the driver's requests."""

    def __init__(self, sid: int, lt, target, p: dict):
        from . import pool
        from .costmodel import load_into

        self.id = sid
        self.task = lt.task.name
        task = self.task
        for name in ("max_trials", "max_round"):
            _int(p, name, 1, task)
        _int(p, "seed", 1, task, 2**31 - 1)
        timeouts = {k: _seconds(p, k, task) for k in ("builder_timeout_s", "runner_timeout_s")}
        if not isinstance(p["work_dir"], str) or not p["work_dir"]:
            raise WorkerError("bad_params", "work_dir must be a path", task)
        for k in ("evolutionary", "evaluator"):
            if not isinstance(p[k], dict):
                raise WorkerError("bad_params", f"{k} must be an object", task)
        if p["cost_model"] not in ("xgb", "random"):
            raise WorkerError("bad_params", "cost_model must be xgb or random", task)
        cm_file = p["cost_model_file"]
        if cm_file is not None and (not isinstance(cm_file, str) or not cm_file):
            raise WorkerError("bad_params", "cost_model_file must be a path or null", task)
        tracker = rpc_param(p["rpc"], task)
        self.lt = lt
        self.target = target
        self.work_dir = p["work_dir"]
        os.makedirs(self.work_dir, exist_ok=True)
        try:
            inner = ms.search_strategy.EvolutionarySearch(**p["evolutionary"])
        except TypeError as e:
            raise WorkerError("bad_params", f"evolutionary: {e}", self.task)
        try:
            self.evaluator = ms.runner.EvaluatorConfig._normalized(  # noqa: SLF001
                ms.runner.EvaluatorConfig(**p["evaluator"])
            )
        except TypeError as e:
            raise WorkerError("bad_params", f"evaluator: {e}", self.task)
        self.remote = tracker is not None
        num_cores = target_num_cores(target) or physical_cores()
        if tracker is None:
            self.builder = pool.get_builder(num_cores, timeouts["builder_timeout_s"])
            self.runner = pool.get_runner(timeouts["runner_timeout_s"], self.evaluator)
        else:
            # the device's cores are the target's; the builds run here, on this machine's
            self.builder = pool.get_builder(physical_cores(), timeouts["builder_timeout_s"])
            self.runner = pool.get_remote_runner(tracker, timeouts["runner_timeout_s"], self.evaluator)
        self.failures_mark = self.runner.failures.mark()
        from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir

        logger = get_loggers_from_work_dir(self.work_dir, [self.task])[0]
        self.ctx = make_context(
            lt.workload, target, self.task, seed=p["seed"], num_threads=num_cores,
            strategy=inner, logger=logger,
        )
        self.database = ms.database.MemoryDatabase()
        # candidates' keys the search must not see (seeds it could not mutate)
        self.hidden: set[str] = set()
        kind = p["cost_model"]
        self.cost_model = ms.cost_model.CostModel.create(
            kind, **({"num_tuning_cores": num_cores} if kind == "xgb" else {})
        )
        self.cost_model_file = cm_file if kind == "xgb" else None
        self.warm = {"loaded": False, "samples": 0, "error": None}
        if self.cost_model_file:
            self.warm = load_into(self.cost_model, self.cost_model_file)
            if self.warm["error"]:
                _log(self.warm["error"])
        self.ctx.pre_tuning(
            p["max_trials"], p["max_round"], self.ctx.generate_design_space(),
            SearchView(self.database, self.hidden), self.cost_model,
        )
        self.workload = self.database.commit_workload(lt.workload)
        self.postprocs = list(self.ctx.space_generator.postprocs)
        self.candidates: list[Candidate] = []
        self.by_key: dict[str, int] = {}
        # measured batches the cost model has not been updated with: (candidates, results)
        self.untrained: list[tuple[list, list]] = []
        # structural hashes of the schedules measured as trials (and of the search's picks)
        self.measured: set[str] = set()

    # ---- candidates

    def _add(self, sch, trace, args_info) -> tuple[int, bool]:
        """The id of the schedule with this trace, and whether it is new."""
        key = json.dumps(trace_to_json(trace))
        if key in self.by_key:
            return self.by_key[key], False
        self.candidates.append(Candidate(key, sch, trace, list(args_info) if args_info else []))
        self.by_key[key] = len(self.candidates) - 1
        return len(self.candidates) - 1, True

    def candidate(self, cid) -> Candidate:
        if not isinstance(cid, int) or isinstance(cid, bool) or not 0 <= cid < len(self.candidates):
            raise WorkerError("bad_params", f"no candidate {cid!r} in session {self.id}", self.task)
        return self.candidates[cid]

    def _measure_candidate(self, c: Candidate) -> MeasureCandidate:
        return MeasureCandidate(c.sch, c.args_info)

    # ---- requests

    def seeds(self, seeds: list, limit: int) -> dict:
        """Replay each seed into a candidate until `limit` distinct candidates replayed; the
        seeds after that are not tried. Per seed tried: its candidate id, mode and error, and
        whether its schedule equals an earlier seed's (same structural hash)."""
        t0 = time.perf_counter()
        out, hashes, distinct = [], {}, 0
        for i, (tj, src) in enumerate(seeds):
            if distinct >= limit:
                break
            res = replay(self.ctx.mod, self.target, self.postprocs, tj, src)
            if not res.ok:
                out.append({"candidate": None, "mode": None, "error": res.error, "duplicate": False})
                continue
            h = str(tvm_ffi.structural_hash(res.sch.mod))
            if h in hashes:
                out.append({"candidate": hashes[h], "mode": res.mode, "error": None, "duplicate": True})
                continue
            cid, _ = self._add(
                res.sch, res.sch.trace, ArgInfo.from_entry_func(res.sch.mod, remove_preproc=True)
            )
            if not res.search_safe:
                # measured as a trial all the same; the search evolves from the others
                self.hidden.add(self.candidates[cid].key)
                _log(f"{self.task}: seed {i} ({res.mode}) is measured but kept from the search, which cannot mutate its trace")
            hashes[h] = cid
            distinct += 1
            out.append({"candidate": cid, "mode": res.mode, "error": None, "duplicate": False})
        return {"seeds": out, "seconds": round(time.perf_counter() - t0, 4)}

    def measure(self, ids: list, build_timeout_s: float) -> dict:
        """One batch of trials: the candidates `ids` (seeds, as a rule), each build killed
        after `build_timeout_s` (a failed trial)."""
        cands = [self.candidate(i) for i in ids]
        for c in cands:
            if c.sch is None:
                raise WorkerError("bad_params", f"candidate {self.by_key[c.key]} is a record, not a schedule to measure as a trial", self.task)
        trained_s = self._train()
        results, build_s, run_s = self._trials(cands, [self._measure_candidate(c) for c in cands], build_timeout_s)
        return {"results": results, "build_s": build_s, "run_s": run_s, "trained_s": trained_s}

    def search(self, count: int, build_timeout_s: float) -> dict:
        """One round of the evolutionary search: its next candidates, at most `count` of them,
        measured as trials (each build killed after `build_timeout_s`). No candidates: the
        search has none left (`exhausted`)."""
        trained_s = self._train()
        t0 = time.perf_counter()
        batch, repeats = self._generate(count)
        search_s = round(time.perf_counter() - t0, 4)
        if not batch:
            return {"candidates": [], "results": [], "search_s": search_s, "build_s": 0.0, "run_s": 0.0, "trained_s": trained_s, "repeats_dropped": repeats}
        ids = [self._add(m.sch, m.sch.trace, m.args_info)[0] for m in batch]
        results, build_s, run_s = self._trials([self.candidates[i] for i in ids], batch, build_timeout_s)
        return {"candidates": ids, "results": results, "search_s": search_s, "build_s": build_s, "run_s": run_s, "trained_s": trained_s, "repeats_dropped": repeats}

    def _generate(self, count: int) -> tuple[list, int]:
        """At most `count` candidates of the evolutionary search that were not measured in
        this session yet, and how many it proposed that were. MetaSchedule's search only
        remembers what it picked itself, so the seeds measured before it come back from the
        database as its best population; each is dropped, and the search asked again (at
        most `GENERATE_TRIES` times) while the batch is short."""
        batch, repeats = [], 0
        for _ in range(GENERATE_TRIES):
            generated = self.ctx.generate_measure_candidates()
            if not generated:
                break
            for m in generated:
                h = str(tvm_ffi.structural_hash(m.sch.mod))
                if h in self.measured:
                    repeats += 1
                elif len(batch) < count:
                    self.measured.add(h)
                    batch.append(m)
            if len(batch) >= count or repeats == 0:
                break
        return batch, repeats

    def _trials(self, cands: list, batch: list, build_timeout_s: float) -> tuple[list, float, float]:
        """Build and run `batch` (the MeasureCandidates of `cands`) with the task's evaluator,
        notify the search and commit the records, as the task scheduler does; queue the cost
        model's update. Each built artifact stays with its candidate for later windows (the
        exact-hit check, the re-measurement of the best records) until the session ends.
        Returns the per-candidate results (each with its build's seconds) and the build and
        run seconds."""
        from .pool import build_mods, remove_artifacts

        b0, r0 = self.builder.seconds, self.runner.seconds
        outcome, inputs, where, build_secs = build_mods(
            self.builder, [(m.sch.mod, m.args_info) for m in batch], self.target, build_timeout_s
        )
        built = [o is None for o in outcome]
        loads = [None] * len(batch)
        try:
            for i, (secs, err, load) in zip(where, self.runner.measure(inputs, self.evaluator)):
                outcome[i], loads[i] = (secs, err), load
        finally:
            spare = []
            for i, ri in zip(where, inputs):
                if cands[i].runner_input is None:
                    cands[i].runner_input = ri
                else:
                    spare.append(ri)
            remove_artifacts(spare)
        results = [ms.runner.RunnerResult(secs, err) for secs, err in outcome]
        self.ctx.notify_runner_results(batch, results)
        self.measured.update(str(tvm_ffi.structural_hash(m.sch.mod)) for m in batch)
        for m, (secs, _) in zip(batch, outcome):
            self.database.commit_tuning_record(
                ms.database.TuningRecord(
                    m.sch.trace, self.workload, secs if secs is not None else [1e10], self.target,
                    m.args_info,
                )
            )
        # MetaSchedule's UpdateCostModel takes the built candidates that failed to run or ran
        # in a positive time
        kept = [
            (m, r)
            for m, r, ok, (secs, err) in zip(batch, results, built, outcome)
            if ok and (err is not None or (secs is not None and sum(secs) > 0))
        ]
        self.untrained.append(([m for m, _ in kept], [r for _, r in kept]))
        out = [
            {"run_secs": secs, "error": err, "build_s": b, "load": load}
            for (secs, err), b, load in zip(outcome, build_secs, loads)
        ]
        return out, round(self.builder.seconds - b0, 4), round(self.runner.seconds - r0, 4)

    def _train(self) -> float:
        """Update the cost model with the batches measured since its last update."""
        t0 = time.perf_counter()
        for cands, results in self.untrained:
            if cands:
                self.cost_model.update(self.ctx, cands, results)
        self.untrained = []
        return round(time.perf_counter() - t0, 4)

    def windows(self, ids: list, repeats: int, retries: int) -> dict:
        """One window of `repeats` fresh timing runs (the task's evaluator otherwise) of each
        candidate of `ids`, in that order (an id may come more than once). Candidates not
        built for windows yet are built first, together. A window that fails is measured
        again up to `retries` times (an RPC device that dropped out)."""
        from .pool import build_mods

        b0, r0 = self.builder.seconds, self.runner.seconds
        todo = []
        for cid in dict.fromkeys(ids):
            c = self.candidate(cid)
            if c.runner_input is None and c.build_error is None:
                todo.append(c)
        mods = []
        for c in todo:
            if c.sch is None:
                try:
                    sch = new_schedule(self.lt.workload)
                    c.trace.apply_to_schedule(sch, remove_postproc=False)
                    c.sch = sch
                    if not c.args_info:
                        c.args_info = ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
                except Exception as e:  # noqa: BLE001 - the record keeps its search measurement
                    c.build_error = f"replay failed: {one_line(e)}"
                    continue
            mods.append(c)
        built_s = {}
        if mods:
            outcome, inputs, where, build_secs = build_mods(
                self.builder, [(c.sch.mod, c.args_info) for c in mods], self.target
            )
            for i, c in enumerate(mods):
                built_s[id(c)] = build_secs[i]
                if outcome[i] is not None:
                    c.build_error = outcome[i][1]
            for i, ri in zip(where, inputs):
                mods[i].runner_input = ri
        evaluator = ms.runner.EvaluatorConfig(
            number=self.evaluator.number,
            repeat=repeats,
            min_repeat_ms=self.evaluator.min_repeat_ms,
            enable_cpu_cache_flush=self.evaluator.enable_cpu_cache_flush,
        )
        out = []
        for cid in ids:
            c = self.candidates[cid]
            build_s = built_s.pop(id(c), None)
            if c.runner_input is None:
                out.append({"run_secs": None, "error": c.build_error, "build_s": build_s, "load": None})
                continue
            for attempt in range(retries + 1):
                ((secs, err, load),) = self.runner.measure([c.runner_input], evaluator)
                if secs is not None:
                    break
                again = " (trying again)" if attempt < retries else ""
                _log(f"{self.task}: window of candidate {cid} failed{again}: {one_line(err)}")
            out.append({"run_secs": secs, "error": err if secs is None else None, "build_s": build_s, "load": load})
        return {
            "windows": out,
            "build_s": round(self.builder.seconds - b0, 4),
            "run_s": round(self.runner.seconds - r0, 4),
        }

    def records(self, top_k: int) -> dict:
        """The session database's best `top_k` records of the task (MetaSchedule's order: by
        mean run time), each with its candidate id; records without a valid run are left
        out."""
        out = []
        for rec in self.database.get_top_k(self.workload, top_k):
            secs = [float(x) for x in (rec.run_secs or [])]
            if not any(s < 1e9 for s in secs):
                continue
            cid, _ = self._add(None, rec.trace, list(rec.args_info) if rec.args_info is not None else [])
            out.append({"candidate": cid, "trace": trace_to_json(rec.trace), "run_secs": secs})
        return {"records": out}

    def close(self, train: bool, max_samples: int) -> dict:
        """Ends the session: with `train`, the cost model learns the batches it has not seen;
        then it is merged into its file (when it has one), and the artifacts are removed."""
        from .costmodel import save_merged
        from .pool import remove_artifacts

        trained_s = self._train() if train else 0.0
        self.untrained = []
        saved = {"saved": False, "samples": 0, "error": None}
        if self.cost_model_file:
            saved = save_merged(self.cost_model, self.cost_model_file, max_samples)
            if saved["error"]:
                _log(saved["error"])
        self.ctx.post_tuning()
        self.release()
        failed = self.runner.failures.count - self.failures_mark
        return {
            "trained_s": trained_s,
            "saved_samples": saved["samples"],
            "errors": [e for e in (self.warm["error"], saved["error"]) if e],
            "failed_runs": failed,
            "run_errors": self.runner.failures.since(self.failures_mark),
        }

    def release(self) -> None:
        """Remove the artifacts built for windows."""
        for c in self.candidates:
            if c.runner_input is not None:
                shutil.rmtree(os.path.dirname(str(c.runner_input.artifact_path)), ignore_errors=True)
                c.runner_input = None

    def opened(self) -> dict:
        ev = self.evaluator
        return {
            "session": self.id,
            "structural_hash": self.lt.structural_hash,
            "evaluator": {
                "number": int(ev.number),
                "repeat": int(ev.repeat),
                "min_repeat_ms": int(ev.min_repeat_ms),
                "enable_cpu_cache_flush": bool(ev.enable_cpu_cache_flush),
            },
            # the runner processes inherit this process's TVM_NUM_THREADS; a device behind
            # an RPC tracker runs with its own server's
            "threads": None if self.remote else runtime_threads(),
            "cost_model_warm_samples": self.warm["samples"],
        }


# ---- the open session ---------------------------------------------------------------------

_OPEN: Session | None = None
_NEXT_ID = 1


def open_session(lt, target, params: dict) -> dict:
    """tune_open: a new session (the open one, if any, is closed without saving)."""
    global _OPEN, _NEXT_ID
    if _OPEN is not None:
        _OPEN.release()
        _OPEN = None
    s = Session(_NEXT_ID, lt, target, params)
    _NEXT_ID += 1
    _OPEN = s
    return s.opened()


def session(params: dict) -> Session:
    """The open session the request names."""
    sid = params["session"]
    if _OPEN is None or _OPEN.id != sid:
        held = "none" if _OPEN is None else str(_OPEN.id)
        raise WorkerError("bad_params", f"session {sid!r} is not open (open: {held})")
    return _OPEN


def close_session(params: dict) -> dict:
    global _OPEN
    s = session(params)
    try:
        return s.close(params["train"], params["cost_model_max_samples"])
    finally:
        _OPEN = None
