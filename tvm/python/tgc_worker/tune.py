"""Seeded MetaSchedule tuning of one task."""

from __future__ import annotations

import json
import math
import os
import sys
import time

import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from .errors import WorkerError
from .replay import replay
from .tvmutil import make_context, trace_to_json


def _log(msg: str) -> None:
    print(f"tgc_worker: {msg}", file=sys.stderr, flush=True)


def _mean(run_secs) -> float:
    vals = [float(x) for x in (run_secs or [])]
    vals = [v for v in vals if v < 1e9]
    return sum(vals) / len(vals) if vals else math.inf


class TuneState:
    """What the strategy saw: read back after tuning."""

    def __init__(self, t0: float | None = None):
        self.t0 = time.time() if t0 is None else t0
        # One entry per measured batch: seconds since the task started, trials so far, best.
        self.history: list[dict] = []
        self.trials = 0
        self.rounds = 0  # measured batches, the seed batch included
        self.best_s = math.inf
        self.stale_rounds = 0
        self.stopped: str | None = None
        self.seeds_measured = 0
        self.seed_best_s = math.inf
        self.seed_trace_keys: set[str] = set()
        self.seed_modes: dict[str, int] = {}
        self.seeds_failed = 0
        self.seeds_duplicate = 0
        self.seeds_skipped = 0
        self.seed_errors: list[str] = []


@derived_object
class SeededSearch(PySearchStrategy):
    """Forward everything to an inner EvolutionarySearch; the first batch is the seeds.

    Stops (generate_measure_candidates returns None) on an exact hit, when the best has not
    improved for `patience_rounds` search rounds, or when `max_trials` are measured.
    """

    def __init__(
        self,
        inner,
        seeds: list,  # [(trace_json, source_workload or None)]
        max_trials: int,
        patience_rounds: int,
        cached_latency_s: float | None,
        exact_tolerance: float,
        state: TuneState,
    ):
        self.inner = inner
        self.seeds = seeds
        self.max_trials = max_trials
        self.patience_rounds = patience_rounds
        self.cached_latency_s = cached_latency_s
        self.exact_tolerance = exact_tolerance
        self.state = state
        self.ctx = None
        self.seeds_done = False
        self.seed_batch: list | None = None  # modes of the pending seed candidates
        self.exact_seed_means: list[float] = []

    # ---- forwarding
    def _initialize_with_tune_context(self, context) -> None:
        self.ctx = context
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None):
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def clone(self):
        return SeededSearch(
            self.inner.clone(),
            self.seeds,
            self.max_trials,
            self.patience_rounds,
            self.cached_latency_s,
            self.exact_tolerance,
            TuneState(),
        )

    # ---- seeds
    def _seed_candidates(self) -> list:
        st = self.state
        ctx = self.ctx
        postprocs = list(ctx.space_generator.postprocs)
        cands, modes, seen = [], [], set()
        for i, (tj, src) in enumerate(self.seeds):
            if len(cands) >= self.max_trials:
                st.seeds_skipped += 1
                continue
            res = replay(ctx.mod, ctx.target, postprocs, tj, src)
            if not res.ok:
                st.seeds_failed += 1
                if len(st.seed_errors) < 8:
                    st.seed_errors.append(f"seed {i}: {res.error}")
                continue
            key = str(tvm_ffi.structural_hash(res.sch.mod))
            if key in seen:
                st.seeds_duplicate += 1
                continue
            seen.add(key)
            st.seed_modes[res.mode] = st.seed_modes.get(res.mode, 0) + 1
            st.seed_trace_keys.add(json.dumps(trace_to_json(res.sch.trace)))
            cands.append(
                MeasureCandidate(
                    res.sch, ArgInfo.from_entry_func(res.sch.mod, remove_preproc=True)
                )
            )
            modes.append(res.mode)
        self.seed_batch = modes
        return cands

    def generate_measure_candidates(self):
        st = self.state
        if st.stopped:
            return None
        if not self.seeds_done:
            self.seeds_done = True
            cands = self._seed_candidates()
            _log(
                f"{self.ctx.task_name}: {len(cands)} seed candidates "
                f"({st.seeds_failed} failed to replay, {st.seeds_duplicate} duplicates)"
            )
            if cands:
                return cands
            self.seed_batch = None
        remaining = self.max_trials - st.trials
        if remaining <= 0:
            st.stopped = "budget"
            return None
        cands = self.inner.generate_measure_candidates()
        if cands is None or len(cands) == 0:
            st.stopped = "exhausted"
            return None
        cands = list(cands)
        return cands[:remaining]

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)
        st = self.state
        means = [
            _mean(r.run_secs) if r.error_msg is None else math.inf for r in results
        ]
        st.trials += len(results)
        st.rounds += 1
        batch_best = min(means) if means else math.inf
        improved = batch_best < st.best_s
        if improved:
            st.best_s = batch_best
        st.history.append(
            {
                "elapsed_s": round(time.time() - st.t0, 3),
                "trials": st.trials,
                "best_s": None if st.best_s == math.inf else st.best_s,
            }
        )
        if self.seed_batch is not None:
            modes = self.seed_batch
            self.seed_batch = None
            st.seeds_measured = len(results)
            st.seed_best_s = batch_best
            exact = [m for m, mode in zip(means, modes) if mode == "exact"]
            best_exact = min(exact) if exact else math.inf
            if (
                self.cached_latency_s is not None
                and best_exact < math.inf
                and best_exact <= self.cached_latency_s * (1.0 + self.exact_tolerance)
            ):
                st.stopped = "exact_hit"
            _log(
                f"{self.ctx.task_name}: seeds measured, best {batch_best:.3e} s"
                + (f" (exact hit vs cached {self.cached_latency_s:.3e} s)" if st.stopped else "")
            )
            return
        st.stale_rounds = 0 if improved else st.stale_rounds + 1
        _log(
            f"{self.ctx.task_name}: round {st.rounds}, {st.trials} trials, "
            f"batch best {batch_best:.3e} s, best {st.best_s:.3e} s"
        )
        if self.patience_rounds > 0 and st.stale_rounds >= self.patience_rounds:
            st.stopped = "patience"
        elif st.trials >= self.max_trials:
            st.stopped = "budget"


def _int_param(params, name, default, lo=None, hi=None, task=None):
    v = params.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool) or (lo is not None and v < lo) or (
        hi is not None and v > hi
    ):
        raise WorkerError("bad_params", f"{name} must be an int in [{lo}, {hi}], got {v!r}", task)
    return v


def _float_param(params, name, default, task=None):
    v = params.get(name, default)
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
        raise WorkerError("bad_params", f"{name} must be a non-negative number, got {v!r}", task)
    return float(v)


def tune_task(lt, target, params: dict, seeds: list) -> dict:
    """Run seeded MetaSchedule on one lowered task. `seeds`: [(trace_json, source_workload)]."""
    task = lt.task.name
    t0 = time.time()
    max_trials = _int_param(params, "max_trials", None, 1, None, task)
    per_round = _int_param(params, "trials_per_round", None, 1, None, task)
    patience = _int_param(params, "patience_rounds", None, 0, None, task)
    top_k = _int_param(params, "top_k", 32, 1, None, task)
    seed = _int_param(params, "seed", 1, 1, 2**31 - 1, task)
    tol = _float_param(params, "exact_tolerance", None, task)
    if tol is None:
        raise WorkerError("bad_params", "exact_tolerance must be a non-negative number, got None", task)
    cached = _float_param(params, "cached_latency_s", None, task)
    builder_timeout = _float_param(params, "builder_timeout_s", 300.0, task)
    runner_timeout = _float_param(params, "runner_timeout_s", 60.0, task)
    work_dir = params.get("work_dir")
    if not isinstance(work_dir, str) or not work_dir:
        raise WorkerError("bad_params", "work_dir must be a path", task)
    evo = params.get("evolutionary", {})
    runner_cfg = params.get("runner", {})
    cost_model_kind = params.get("cost_model", "xgb")
    cost_model_file = params.get("cost_model_file")
    if cost_model_file is not None and (not isinstance(cost_model_file, str) or not cost_model_file):
        raise WorkerError("bad_params", "cost_model_file must be a path", task)
    max_samples = _int_param(params, "cost_model_max_samples", 4096, 1, None, task)
    if not isinstance(evo, dict) or not isinstance(runner_cfg, dict):
        raise WorkerError("bad_params", "evolutionary and runner must be objects", task)
    if cost_model_kind not in ("xgb", "random"):
        raise WorkerError("bad_params", "cost_model must be xgb or random", task)
    os.makedirs(work_dir, exist_ok=True)

    try:
        inner = ms.search_strategy.EvolutionarySearch(**evo)
    except TypeError as e:
        raise WorkerError("bad_params", f"evolutionary: {e}", task)
    state = TuneState(t0)
    strategy = SeededSearch(inner, seeds, max_trials, patience, cached, tol, state)
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir

    logger = get_loggers_from_work_dir(work_dir, [task])[0]
    ctx = make_context(lt.workload, target, task, seed=seed, strategy=strategy, logger=logger)
    num_cores = ctx.num_threads
    try:
        evaluator = ms.runner.EvaluatorConfig(**runner_cfg)
    except TypeError as e:
        raise WorkerError("bad_params", f"runner: {e}", task)
    from .build_worker import build as f_build

    builder = ms.builder.LocalBuilder(
        max_workers=num_cores, timeout_sec=builder_timeout, f_build=f_build
    )
    runner = ms.runner.LocalRunner(timeout_sec=runner_timeout, evaluator_config=evaluator)
    database = ms.database.MemoryDatabase()
    cost_model = ms.cost_model.CostModel.create(
        cost_model_kind, **({"num_tuning_cores": num_cores} if cost_model_kind == "xgb" else {})
    )
    warm = {"loaded": False, "samples": 0, "error": None}
    if cost_model_file and cost_model_kind == "xgb":
        from .costmodel import load_into

        warm = load_into(cost_model, cost_model_file)
        if warm["error"]:
            _log(warm["error"])
    ms.tune_tasks(
        tasks=[ctx],
        task_weights=[1.0],
        work_dir=work_dir,
        max_trials_global=max_trials,
        max_trials_per_task=max_trials,
        num_trials_per_iter=per_round,
        builder=builder,
        runner=runner,
        database=database,
        cost_model=cost_model,
        task_scheduler="round-robin",
    )
    if state.stopped is None:
        state.stopped = "budget"
    saved = {"saved": False, "samples": 0, "error": None}
    if cost_model_file and cost_model_kind == "xgb":
        from .costmodel import save_merged

        saved = save_merged(cost_model, cost_model_file, max_samples)
        if saved["error"]:
            _log(saved["error"])
    workload = database.commit_workload(lt.workload)
    records = []
    for rec in database.get_top_k(workload, top_k):
        tj = trace_to_json(rec.trace)
        run_secs = [float(x) for x in (rec.run_secs or [])]
        if _mean(run_secs) == math.inf:
            continue
        records.append(
            {
                "trace": tj,
                "run_secs": run_secs,
                "mean_s": _mean(run_secs),
                "origin": "seed" if json.dumps(tj) in state.seed_trace_keys else "search",
            }
        )
    best = records[0]["mean_s"] if records else None
    return {
        "task": task,
        "structural_hash": lt.structural_hash,
        "records": records,
        "seeds_tried": len(seeds),
        "seeds_failed": state.seeds_failed,
        "seeds_duplicate": state.seeds_duplicate,
        "seeds_skipped": state.seeds_skipped,
        "seeds_measured": state.seeds_measured,
        "seed_modes": state.seed_modes,
        "seed_errors": state.seed_errors,
        "seed_best_s": None if state.seed_best_s == math.inf else state.seed_best_s,
        "trials": state.trials,
        "rounds": state.rounds,
        "best_s": best,
        "stopped": state.stopped,
        "history": state.history,
        "cost_model": {
            "warm_samples": warm["samples"],
            "saved_samples": saved["samples"],
            "errors": [e for e in (warm["error"], saved["error"]) if e],
        },
        "wall_s": round(time.time() - t0, 3),
    }
