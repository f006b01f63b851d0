"""One builder and one runner per worker process, kept warm across tasks and batches.

MetaSchedule's stock LocalBuilder starts a process pool for its sanity check when it is
constructed (about 1.8 s here) and starts and shuts down another pool on every `build` call,
each of whose processes imports TVM again. Here one `TrialBuilder` (a `PyBuilder`) keeps a `PopenPoolExecutor` alive for the whole worker
process, and one `TrialRunner` (a `PyRunner`) keeps its single measuring process alive.

Measuring does not overlap building. MetaSchedule's task loop cannot overlap them for one
task anyway (the next batch is generated only after the cost model has seen this batch's
results, and the runner is joined before that), and on this 2-core machine a kernel timed
while a build runs on the other core measures the build, not the kernel: the runner gets the
cores to itself, one candidate after the other, as LocalRunner does.

With `rpc` (tune_open's param), candidates are still built here by the same builder, and measured
on devices registered with a TVM RPC tracker under one key instead: `RemoteRunner` keeps a
pool of `sessions` processes, each of which asks the tracker for a device, uploads one
artifact, times it and closes the session (MetaSchedule's own RPCRunner `_worker_func`), so
up to `sessions` candidates are measured at once on as many devices. A device that drops out
fails the candidates it held (their session raises, or the pool's timeout kills it) and the
tracker hands the next ones to the devices that remain.

Errors never escape: a build that raises or times out, or whose process dies, becomes a
`BuilderResult(None, error_msg)`, and a run the same as a `RunnerResult(None, error_msg)`,
that is, a failed candidate.
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, PyRunner, RunnerInput
from tvm.s_tir.meta_schedule.runner.local_runner import LocalRunnerFuture
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from . import build_worker
from .errors import one_line

# Builds per builder process before it is replaced by a fresh one. TVM shuts its build pool
# down after every batch because build processes grow (apache/tvm#11074: memory that
# compiling a module leaves behind is never returned). Keeping the processes across batches
# saves the restart and the TVM import, and recycling after this many builds (a few batches)
# bounds the growth.
BUILDS_PER_PROCESS = 64

# Runs per measuring process before it is replaced: each run loads a module (dlopen of a
# fresh shared library) into that process. LocalRunner never recycles; this bounds what
# loaded modules leave behind over a long worker life.
RUNS_PER_PROCESS = 256


def _busy_ticks() -> int | None:
    """Clock ticks all CPUs spent busy since boot (user, nice, system, irq, softirq and the
    hypervisor's steal; /proc/stat), or None where that cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    except (OSError, ValueError):
        return None
    return user + nice + system + irq + softirq + steal


def _process_ticks(pid: int) -> int:
    """Clock ticks a process (its threads included) spent on a CPU; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, ValueError, IndexError):
        return 0


class OtherLoad:
    """The CPU cores other work takes while a measurement runs: every CPU's busy time less
    the measuring processes' own, over the wall time. Other processes and a hypervisor that
    takes a core from the VM (steal) count; the measuring process's threads, spinning or
    not, do not. The counts are clock ticks, sampled at slightly different moments: the
    first `SLACK_TICKS_PER_CPU` per CPU are their resolution, not load (on 2 CPUs, 0.04
    core-seconds: a 0.1 s trial would otherwise show up to 0.3 cores on a quiet machine).
    None where /proc cannot be read."""

    SLACK_TICKS_PER_CPU = 2

    def __init__(self, pids) -> None:
        self._pids = pids
        self._own = {p: _process_ticks(p) for p in pids()}
        self._busy = _busy_ticks()
        self._t0 = time.perf_counter()

    def cores(self) -> float | None:
        busy, wall = _busy_ticks(), time.perf_counter() - self._t0
        if busy is None or self._busy is None or wall <= 0:
            return None
        own = sum(max(0, _process_ticks(p) - self._own.get(p, 0)) for p in self._pids())
        slack = self.SLACK_TICKS_PER_CPU * (os.cpu_count() or 1)
        return max(0.0, (busy - self._busy - own - slack) / os.sysconf("SC_CLK_TCK") / wall)


def _kill_pool(pool) -> None:
    if pool is not None:
        try:
            pool.shutdown(wait=True)
        except Exception:  # noqa: BLE001 - shutting down must not fail the caller
            pass


def pool_pids(pool) -> list[int]:
    """The pids of a PopenPoolExecutor's live processes (for tests and logs)."""
    if pool is None:
        return []
    pids = []
    for w in list(pool._worker_map.values()):  # noqa: SLF001 - no public accessor
        proc = getattr(w, "_proc", None)
        if proc is not None and proc.poll() is None:
            pids.append(proc.pid)
    return sorted(pids)


class _PersistentPool:
    """A PopenPoolExecutor kept across calls (what TrialBuilder and the runners share): it
    starts on first use with `workers` processes, each replaced after `uses_per_process`
    uses, and is dropped (killed, started again on next use) when its settings change or it
    breaks. (A base after PyBuilder or PyRunner: derived_object reads the first base's
    metadata.)"""

    def _setup_pool(self, workers: int, timeout_sec: float, uses_per_process: int) -> None:
        self.workers = workers
        self.timeout_sec = timeout_sec
        self.uses_per_process = uses_per_process
        self.pool = None
        self.pools_started = 0
        self._lock = threading.Lock()

    def _ensure_pool(self):
        if self.pool is None:
            self.pool = PopenPoolExecutor(
                max_workers=self.workers,
                timeout=self.timeout_sec,
                maximum_process_uses=self.uses_per_process,
            )
            self.pools_started += 1
        return self.pool

    def _drop_pool(self) -> None:
        _kill_pool(self.pool)
        self.pool = None

    def pids(self) -> list[int]:
        return pool_pids(self.pool)

    def shutdown(self) -> None:
        with self._lock:
            self._drop_pool()


@derived_object
class TrialBuilder(PyBuilder, _PersistentPool):
    """A PyBuilder over a persistent PopenPoolExecutor running `build_worker.build_and_export`.

    `seconds` accumulates the wall time spent in `build` (a session reads deltas of it
    per round); `builds` counts the inputs built. `build_timed` also gives each build's own
    seconds and takes a timeout for that call (a build guard's, below the pool's).
    """

    def __init__(self, max_workers: int, timeout_sec: float, builds_per_process: int = BUILDS_PER_PROCESS):
        super().__init__()
        self._setup_pool(max_workers, timeout_sec, builds_per_process)
        self.seconds = 0.0
        self.builds = 0

    def configure(self, max_workers: int, timeout_sec: float) -> None:
        """Keep the pool when nothing changed; else replace it (the timeout is the pool's)."""
        with self._lock:
            if (max_workers, timeout_sec) != (self.workers, self.timeout_sec):
                self._drop_pool()
                self.workers, self.timeout_sec = max_workers, timeout_sec

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        return self.build_timed(build_inputs)[0]

    def build_timed(
        self, build_inputs: list[BuilderInput], timeout_sec: float | None = None
    ) -> tuple[list[BuilderResult], list[float | None]]:
        """Build each input, killing a build after `timeout_sec` (None: the pool's timeout;
        at most the pool's). Returns the results and each build's seconds (None: it failed)."""
        t0 = time.perf_counter()
        with self._lock:
            try:
                return self._build(build_inputs, timeout_sec)
            finally:
                self.seconds += time.perf_counter() - t0
                self.builds += len(build_inputs)

    def _build(self, build_inputs, timeout_sec):
        args = [(x.mod, x.target, None) for x in build_inputs]
        limit = self.timeout_sec if timeout_sec is None else min(timeout_sec, self.timeout_sec)
        try:
            pool = self._ensure_pool()
            # PopenPoolExecutor reads its timeout as each job is sent to a process
            pool._timeout = limit  # noqa: SLF001 - no public setter
            outcomes = list(pool.map_with_error_catching(build_worker.build_and_export, args))
        except Exception as e:  # noqa: BLE001 - a broken pool fails the batch, not the worker
            self._drop_pool()
            msg = f"TrialBuilder: the build pool failed: {type(e).__name__}: {e}"
            return [BuilderResult(None, msg) for _ in build_inputs], [None] * len(build_inputs)
        results, seconds = [], []
        for r in outcomes:
            if r.status == StatusKind.COMPLETE:
                path, secs = r.value
                results.append(BuilderResult(path, None))
                seconds.append(secs)
                continue
            seconds.append(None)
            if r.status == StatusKind.TIMEOUT:
                results.append(BuilderResult(None, f"TrialBuilder: Timeout, killed after {limit:g} seconds"))
            else:
                results.append(BuilderResult(None, f"TrialBuilder: An exception occurred\n{r.value}"))
        return results, seconds


class _MeasuringPool(_PersistentPool):
    """What TrialRunner and RemoteRunner share: a persistent pool of `workers` measuring
    processes (recycled after `runs_per_process` uses), its timeout and the evaluator
    config, and measuring: each runner gives `_submit` (its worker function and arguments),
    `_label` (for error messages) and `serial`. (A base after
    PyRunner: derived_object reads the first base's metadata, and PyRunner's abstract `run`
    comes first, so each runner's `run` calls `_futures`.)"""

    def _setup_runner(self, workers: int, timeout_sec: float, evaluator: EvaluatorConfig | None, runs_per_process: int) -> None:
        self._setup_pool(workers, timeout_sec, runs_per_process)
        self.evaluator = EvaluatorConfig._normalized(evaluator)  # noqa: SLF001
        self.seconds = 0.0
        self.runs = 0
        self.failures = RunFailures()

    def configure(self, timeout_sec: float, evaluator: EvaluatorConfig | None) -> None:
        with self._lock:
            self.evaluator = EvaluatorConfig._normalized(evaluator)  # noqa: SLF001
            if timeout_sec != self.timeout_sec:
                self._drop_pool()
                self.timeout_sec = timeout_sec

    def _futures(self, runner_inputs: list[RunnerInput]):
        return [
            LocalRunnerFuture(res=secs, error_message=None)
            if err is None
            else LocalRunnerFuture(res=None, error_message=err)
            for secs, err, _ in self.measure(runner_inputs, self.evaluator)
        ]

    def measure(self, runner_inputs: list[RunnerInput], evaluator: EvaluatorConfig):
        """[(run_secs or None, error or None, load)] per input: one after the other
        (`serial`, each with the cores other work took meanwhile: `OtherLoad`), or all
        submitted at once and collected in order (load None: the devices are elsewhere). A
        submit that fails (a broken pool), a timeout or a lost process or device fails its
        input only, and is counted."""
        t0 = time.perf_counter()
        with self._lock:
            try:
                if self.serial:
                    out = [self._serial(ri, evaluator) for ri in runner_inputs]
                else:
                    futures = [self._try_submit(ri, evaluator) for ri in runner_inputs]
                    out = [(*self._outcome(f), None) for f in futures]
            finally:
                self.seconds += time.perf_counter() - t0
                self.runs += len(runner_inputs)
        return out

    def _serial(self, ri: RunnerInput, evaluator: EvaluatorConfig):
        load = OtherLoad(self.pids)
        secs, err = self._outcome(self._try_submit(ri, evaluator))
        return secs, err, None if secs is None else load.cores()

    def _try_submit(self, ri: RunnerInput, evaluator: EvaluatorConfig):
        try:
            return self._submit(ri, evaluator)
        except Exception as e:  # noqa: BLE001 - a broken pool fails the input
            return e

    def _outcome(self, fut):
        """(run_secs, None) or (None, error) of one submitted input; errors are counted."""
        try:
            if isinstance(fut, Exception):
                raise fut
            res = ([float(x) for x in fut.result()], None)
        except TimeoutError:
            res = (None, f"{self._label()}: Timeout, killed after {self.timeout_sec} seconds")
        except Exception as e:  # noqa: BLE001 - a lost process or device fails its candidate
            res = (None, f"{self._label()}: An exception occurred\n{e}")
        if res[1] is not None:
            self.failures.add(res[1])
        return res


@derived_object
class TrialRunner(PyRunner, _MeasuringPool):
    """A PyRunner over one persistent measuring process (as LocalRunner, max_workers=1).

    Candidates are measured one after the other, synchronously inside `run` (so `seconds`,
    the wall time spent in `run` and `measure`, is the measuring time). The evaluator config
    is per call: `evaluator` (set per task) for `run`, any other for `measure`.
    """

    def __init__(self, timeout_sec: float, evaluator: EvaluatorConfig | None = None, runs_per_process: int = RUNS_PER_PROCESS):
        super().__init__()
        self._setup_runner(1, timeout_sec, evaluator, runs_per_process)

    def run(self, runner_inputs: list[RunnerInput]):
        return self._futures(runner_inputs)

    # One candidate at a time: the measuring process has the cores to itself.
    serial = True

    def _label(self) -> str:
        return "TrialRunner"

    def _submit(self, ri: RunnerInput, evaluator: EvaluatorConfig):
        from tvm.s_tir.meta_schedule.runner.local_runner import _worker_func

        return self._ensure_pool().submit(
            _worker_func,
            None,
            None,
            None,
            evaluator,
            1,
            str(ri.artifact_path),
            str(ri.device_type),
            tuple(a.as_json() for a in ri.args_info),
        )


class RunFailures:
    """Measurements that failed (the run raised, timed out or lost its process or device):
    a running count and the most recent messages, one line each. A session takes a
    `mark()` when it starts and reads what came after it (`since`)."""

    KEEP = 256  # messages kept (the newest)

    def __init__(self):
        self.count = 0
        self._log: list[tuple[int, str]] = []  # (sequence number, line)
        self._lock = threading.Lock()

    def add(self, message: str) -> None:
        # "<runner>: An exception occurred" and a traceback: the head and the error line
        lines = [ln for ln in str(message).splitlines() if ln.strip()]
        head, rest = (lines[0].strip(), "\n".join(lines[1:])) if lines else ("(no message)", "")
        line = f"{head}: {one_line(rest)}" if rest else head
        with self._lock:
            self._log.append((self.count, line[:300]))
            self.count += 1
            del self._log[: -self.KEEP]

    def mark(self) -> int:
        return self.count

    def since(self, mark: int, limit: int = 8) -> list[str]:
        """The first `limit` distinct messages of the failures after `mark`."""
        out: list[str] = []
        with self._lock:
            for seq, line in self._log:
                if seq >= mark and line not in out:
                    out.append(line)
                    if len(out) == limit:
                        break
        return out


@dataclass(frozen=True)
class RpcTracker:
    """Where the devices are: a TVM RPC tracker and the key they registered under."""

    host: str
    port: int
    key: str
    sessions: int  # measurements at once (RPCRunner's max_workers)

    def rpc_config(self, timeout_sec: float):
        from tvm.s_tir.meta_schedule.runner import RPCConfig

        return RPCConfig(
            tracker_host=self.host,
            tracker_port=self.port,
            tracker_key=self.key,
            session_priority=1,
            session_timeout_sec=max(1, int(math.ceil(timeout_sec))),
        )

    def describe(self) -> str:
        return f"key {self.key!r} at tracker {self.host}:{self.port}"


@derived_object
class RemoteRunner(PyRunner, _MeasuringPool):
    """A PyRunner that measures on RPC devices, `sessions` candidates at once.

    Each candidate runs MetaSchedule's RPCRunner worker function in one of `sessions`
    persistent processes: request a device from the tracker, upload the artifact, time it,
    close the session. Unlike RPCRunner (whose pool has no timeout, so a session stuck on a
    device that went silent would hang the session), the pool kills a process after
    `timeout_sec`, which counts from the tracker request: waiting for a free device,
    uploading and timing all fall under it. `run` returns when the whole batch is done, as
    TrialRunner's does, so `seconds` is the measuring time.
    """

    def __init__(self, tracker: RpcTracker, timeout_sec: float, evaluator: EvaluatorConfig | None = None, runs_per_process: int = RUNS_PER_PROCESS):
        super().__init__()
        self.tracker = tracker
        self._setup_runner(tracker.sessions, timeout_sec, evaluator, runs_per_process)

    def run(self, runner_inputs: list[RunnerInput]):
        return self._futures(runner_inputs)

    # Up to `sessions` candidates at once, on as many devices.
    serial = False

    def _label(self) -> str:
        return f"RemoteRunner ({self.tracker.describe()})"

    def _submit(self, ri: RunnerInput, evaluator: EvaluatorConfig):
        from tvm.s_tir.meta_schedule.runner.rpc_runner import _worker_func

        return self._ensure_pool().submit(
            _worker_func,
            None,
            None,
            None,
            None,
            None,
            self.tracker.rpc_config(self.timeout_sec),
            evaluator,
            1,
            str(ri.artifact_path),
            str(ri.device_type),
            tuple(a.as_json() for a in ri.args_info),
        )


_BUILDER: TrialBuilder | None = None
_RUNNER: TrialRunner | None = None
_REMOTE: dict = {}  # RpcTracker -> RemoteRunner


def get_builder(max_workers: int, timeout_sec: float) -> TrialBuilder:
    """This process's builder, (re)configured; its pool survives across calls."""
    global _BUILDER
    if _BUILDER is None:
        _BUILDER = TrialBuilder(max_workers, timeout_sec)
    else:
        _BUILDER.configure(max_workers, timeout_sec)
    return _BUILDER


def get_runner(timeout_sec: float, evaluator: EvaluatorConfig | None) -> TrialRunner:
    """This process's runner, (re)configured; its measuring process survives across calls."""
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = TrialRunner(timeout_sec, evaluator)
    else:
        _RUNNER.configure(timeout_sec, evaluator)
    return _RUNNER


def get_remote_runner(tracker: RpcTracker, timeout_sec: float, evaluator: EvaluatorConfig | None) -> RemoteRunner:
    """The runner of this tracker and key (one per `RpcTracker`), (re)configured; its
    session processes survive across calls."""
    runner = _REMOTE.get(tracker)
    if runner is None:
        runner = _REMOTE[tracker] = RemoteRunner(tracker, timeout_sec, evaluator)
    else:
        runner.configure(timeout_sec, evaluator)
    return runner


def build_and_measure_mods(builder: TrialBuilder, runner: TrialRunner, mods_and_args, target, evaluator):
    """Build each (mod, args_info) and measure it with `evaluator`; the artifacts are removed.

    Returns [(run_secs or None, error or None)]."""
    out, inputs, where, _ = build_mods(builder, mods_and_args, target)
    try:
        for i, (secs, err, _) in zip(where, runner.measure(inputs, evaluator)):
            out[i] = (secs, err)
    finally:
        remove_artifacts(inputs)
    return out


def build_mods(builder, mods_and_args, target, timeout_sec=None):
    """Build each (mod, args_info) for `target`, each build killed after `timeout_sec` (None:
    the builder's timeout): ([(None, build error)] or [None] per item, the RunnerInputs of
    the built ones, their item indices, each item's build seconds or None). The caller
    removes the artifacts (remove_artifacts)."""
    from tvm.runtime import Device

    device_type = Device._DEVICE_TYPE_TO_NAME[target.get_target_device_type()]  # noqa: SLF001
    built, seconds = builder.build_timed(
        [BuilderInput(mod, target) for mod, _ in mods_and_args], timeout_sec
    )
    out: list = [None] * len(built)
    inputs, where = [], []
    for i, (b, (_, args_info)) in enumerate(zip(built, mods_and_args)):
        if b.error_msg is not None:
            out[i] = (None, b.error_msg)
        else:
            inputs.append(RunnerInput(b.artifact_path, device_type, args_info))
            where.append(i)
    return out, inputs, where, seconds


def remove_artifacts(inputs) -> None:
    for ri in inputs:
        shutil.rmtree(os.path.dirname(str(ri.artifact_path)), ignore_errors=True)


def shutdown_all() -> None:
    """Stop the builder's and the runner's processes (the worker is exiting)."""
    for x in (_BUILDER, _RUNNER, *_REMOTE.values()):
        if x is not None:
            x.shutdown()


atexit.register(shutdown_all)

__all__ = [
    "BUILDS_PER_PROCESS",
    "RUNS_PER_PROCESS",
    "RemoteRunner",
    "RpcTracker",
    "RunFailures",
    "TrialBuilder",
    "TrialRunner",
    "build_and_measure_mods",
    "build_mods",
    "get_builder",
    "get_remote_runner",
    "get_runner",
    "remove_artifacts",
    "shutdown_all",
]
