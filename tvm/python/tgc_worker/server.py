"""The JSON-lines loop: one request per stdin line, one response per stdout line."""

from __future__ import annotations

import io
import json
import math
import os
import sys
import time
import traceback

from . import PROTOCOL_VERSION
from .errors import WorkerError, one_line

METHODS = (
    "hello",
    "target",
    "lower",
    "replay",
    "sample",
    "prepare_tuning",
    "tune_open",
    "tune_seeds",
    "tune_measure",
    "tune_search",
    "tune_windows",
    "tune_records",
    "tune_close",
    "build",
    "build_and_measure",
    "bench",
    "rpc_devices",
    "shutdown",
)


# Per method: the params it requires and the ones it takes optionally (PROTOCOL.md). Any other
# field is bad_params naming it, and so is a missing required one; nothing is defaulted for a
# field the client always sends.
PARAMS = {
    "hello": ((), ()),
    "target": (("target",), ()),
    "lower": (("task", "target"), ()),
    "replay": (("task", "target", "traces"), ()),
    "sample": (("task", "target", "count", "seed"), ()),
    "prepare_tuning": ((), ()),
    "tune_open": (
        (
            "task",
            "target",
            "work_dir",
            "seed",
            "max_trials",
            "max_round",
            "evolutionary",
            "evaluator",
            "builder_timeout_s",
            "runner_timeout_s",
            "cost_model",
            "cost_model_file",
            "rpc",
        ),
        (),
    ),
    "tune_seeds": (("session", "seeds", "limit"), ()),
    "tune_measure": (("session", "candidates", "build_timeout_s"), ()),
    "tune_search": (("session", "count", "build_timeout_s"), ()),
    "tune_windows": (("session", "candidates", "repeats", "retries"), ()),
    "tune_records": (("session", "top_k"), ()),
    "tune_close": (("session", "train", "cost_model_max_samples"), ()),
    "build": (("module", "records", "target", "export"), ()),
    "build_and_measure": (
        ("module", "records", "target", "repeat", "number", "seed"),
        ("atol_rel", "rtol", "export"),
    ),
    "bench": (("library", "inputs", "target", "repeat", "number", "seed"), ("untuned", "untuned_repeat", "onnx")),
    "rpc_devices": (("tracker_host", "tracker_port", "key"), ()),
    "shutdown": ((), ()),
}

# Why a field that once existed is gone, for its bad_params message.
GONE = {
    ("build_and_measure", "atol"): "atol is gone: the check takes atol_rel (of the output's scale) and rtol",
}


def check_params(method: str, params: dict) -> None:
    """bad_params for the first unknown or missing field of `method`'s params."""
    required, optional = PARAMS[method]
    for k in params:
        if k not in required and k not in optional:
            hint = GONE.get((method, k))
            raise WorkerError(
                "bad_params",
                f"{method}: unknown params field {k!r}" + (f" ({hint})" if hint else ""),
            )
    for k in required:
        if k not in params:
            raise WorkerError("bad_params", f"{method}: missing params field {k!r}")


def _log(msg: str) -> None:
    print(f"tgc_worker: {msg}", file=sys.stderr, flush=True)


def _task_name_of(params) -> str | None:
    if isinstance(params, dict):
        t = params.get("task")
        if isinstance(t, dict) and isinstance(t.get("name"), str):
            return t["name"]
    return None


def _finite(o):
    """JSON has no inf/nan: turn them into null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


# ---- methods ---------------------------------------------------------------------------


def m_hello(params: dict) -> dict:
    import tvm
    import tvm_ffi

    from .tvmutil import llvm_version, runtime_threads

    kinds = sorted(tvm.target.Target.list_kinds())
    targets = [
        k
        for k in kinds
        if tvm.get_global_func(f"target.build.{k}", allow_missing=True) is not None
    ]
    devices = []
    for name in ("cpu", "cuda", "rocm", "vulkan", "metal", "opencl"):
        try:
            if tvm.device(name, 0).exist:
                devices.append(name)
        except Exception:  # noqa: BLE001
            pass
    return {
        "protocol": PROTOCOL_VERSION,
        "tvm": tvm.__version__,
        "tvm_ffi": tvm_ffi.__version__,
        "llvm": llvm_version(),
        "targets": targets,
        "devices": devices,
        "runtime_threads": runtime_threads(),
        "methods": list(METHODS),
        "pid": os.getpid(),
    }


def m_target(params: dict) -> dict:
    from .tvmutil import canonical_target

    canonical, target = canonical_target(params["target"])
    return {"canonical": canonical, "kind": target.kind.name, "str": str(target)}


def _task_and_target(params: dict):
    from .lower import lower_task
    from .task import parse_task
    from .tvmutil import parse_target

    task = parse_task(params["task"])
    target = parse_target(params["target"], task.name)
    return lower_task(task), target


def m_lower(params: dict) -> dict:
    lt, target = _task_and_target(params)
    import tvm

    return {
        "task": lt.task.name,
        "workload_json": tvm.ir.save_json(lt.workload),
        "structural_hash": lt.structural_hash,
        "tir": lt.workload.script(),
        "target": str(target),
    }


def load_workload(text, where: str, task_name: str):
    """A TVM IRModule from `tvm.ir.save_json` text (what `lower` returns as workload_json)."""
    import tvm

    if not isinstance(text, str):
        raise WorkerError("bad_params", f"{where}.source_workload must be a string", task_name)
    try:
        mod = tvm.ir.load_json(text)
    except Exception as e:  # noqa: BLE001 - TVM's JSON errors
        raise WorkerError(
            "bad_params", f"{where}.source_workload: not a TVM IRModule JSON: {one_line(e)}", task_name
        )
    if not isinstance(mod, tvm.IRModule):
        raise WorkerError(
            "bad_params", f"{where}.source_workload: a {type(mod).__name__}, not an IRModule", task_name
        )
    return mod


def _traces(params: dict, key: str, task_name: str) -> list:
    """[(trace_json, source_workload | None)] from params[key]."""
    from .lower import lower_task
    from .replay import parse_trace_json
    from .task import parse_task

    items = params[key]
    if not isinstance(items, list):
        raise WorkerError("bad_params", f"params.{key} must be a list", task_name)
    out = []
    # traces from one source task come with the same source: lower or load it once
    sources: dict = {}
    for i, item in enumerate(items):
        src = None
        if isinstance(item, dict):
            if "trace" not in item:
                raise WorkerError(
                    "bad_params", f"{key}[{i}]: an object needs a 'trace'", task_name
                )
            for k in item:
                if k not in ("trace", "source_task", "source_workload"):
                    raise WorkerError("bad_params", f"{key}[{i}]: unknown field {k!r}", task_name)
            if item.get("source_task") is not None:
                memo = ("task", json.dumps(item["source_task"], sort_keys=True))
                if memo not in sources:
                    sources[memo] = lower_task(parse_task(item["source_task"])).workload
                src = sources[memo]
            elif item.get("source_workload") is not None:
                text = item["source_workload"]
                memo = ("workload", text if isinstance(text, str) else None)
                if memo not in sources or memo[1] is None:  # a non-string raises below
                    sources[memo] = load_workload(text, f"{key}[{i}]", task_name)
                src = sources[memo]
            tj = item["trace"]
        else:
            tj = item
        out.append((parse_trace_json(tj, f"{key}[{i}]", task_name), src))
    return out


def m_replay(params: dict) -> dict:
    from .replay import replay
    from .tvmutil import make_context

    lt, target = _task_and_target(params)
    traces = _traces(params, "traces", lt.task.name)
    ctx = make_context(lt.workload, target, lt.task.name)
    postprocs = list(ctx.space_generator.postprocs)
    results = []
    for tj, src in traces:
        res = replay(lt.workload, target, postprocs, tj, src)
        results.append(res.as_json())
    return {"task": lt.task.name, "structural_hash": lt.structural_hash, "results": results}


def m_sample(params: dict) -> dict:
    from .replay import sample_traces
    from .tvmutil import make_context

    lt, target = _task_and_target(params)
    count = params["count"]
    seed = params["seed"]
    for k, v in (("count", count), ("seed", seed)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise WorkerError("bad_params", f"{k} must be a positive int, got {v!r}", lt.task.name)
    ctx = make_context(lt.workload, target, lt.task.name, seed=seed)
    traces, attempts = sample_traces(ctx, count, seed, max_attempts=max(16, 8 * count))
    return {"task": lt.task.name, "traces": traces, "attempts": attempts}


def m_prepare_tuning(params: dict) -> dict:
    """The one-time set-up of tuning in this process: TuneContext's first use imports
    tvm.s_tir.tensor_intrin (seconds). A client calls it before it starts timing a run."""
    from .tvmutil import ensure_tensor_intrin

    t0 = time.time()
    ensure_tensor_intrin()
    return {"seconds": round(time.time() - t0, 3)}


def _tvm_errors(method: str, task: str | None):
    """TVM's exceptions during a tuning request as one `tvm` error naming the method."""
    import contextlib

    @contextlib.contextmanager
    def wrap():
        try:
            yield
        except WorkerError:
            raise
        except Exception as e:  # noqa: BLE001
            _log(traceback.format_exc())
            raise WorkerError("tvm", f"{method} failed: {one_line(e)}", task)

    return wrap()


def _count(params: dict, name: str, lo: int, task: str | None) -> int:
    v = params[name]
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise WorkerError("bad_params", f"{name} must be an int of at least {lo}, got {v!r}", task)
    return v


def _seconds(params: dict, name: str, task: str | None) -> float:
    from .session import _seconds as seconds

    return seconds(params, name, task)


def _ids(params: dict, task: str | None) -> list:
    ids = params["candidates"]
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise WorkerError("bad_params", "candidates must be a list of candidate ids", task)
    return ids


def m_tune_open(params: dict) -> dict:
    from .session import open_session

    lt, target = _task_and_target(params)
    with _tvm_errors("tune_open", lt.task.name):
        return open_session(lt, target, params)


def _close(s, params: dict) -> dict:
    from .session import close_session

    if not isinstance(params["train"], bool):
        raise WorkerError("bad_params", "train must be a bool", s.task)
    _count(params, "cost_model_max_samples", 1, s.task)
    return close_session(params)


# The session requests after tune_open: each one call of the open session (session.py),
# its params checked, TVM's errors named by the method.
SESSION_REQUESTS = {
    "tune_seeds": lambda s, p: s.seeds(_traces(p, "seeds", s.task), _count(p, "limit", 0, s.task)),
    "tune_measure": lambda s, p: s.measure(_ids(p, s.task), _seconds(p, "build_timeout_s", s.task)),
    "tune_search": lambda s, p: s.search(
        _count(p, "count", 1, s.task), _seconds(p, "build_timeout_s", s.task)
    ),
    "tune_windows": lambda s, p: s.windows(
        _ids(p, s.task), _count(p, "repeats", 1, s.task), _count(p, "retries", 0, s.task)
    ),
    "tune_records": lambda s, p: s.records(_count(p, "top_k", 1, s.task)),
    "tune_close": _close,
}


def _session_request(method: str):
    def handler(params: dict) -> dict:
        from .session import session

        s = session(params)
        with _tvm_errors(method, s.task):
            return SESSION_REQUESTS[method](s, params)

    return handler


def m_build(params: dict) -> dict:
    from .measure import build

    return build(params)


def m_build_and_measure(params: dict) -> dict:
    from .measure import build_and_measure

    return build_and_measure(params)


def m_bench(params: dict) -> dict:
    from .measure import bench

    return bench(params)


def m_rpc_devices(params: dict) -> dict:
    from .rpc import devices

    return devices(params)


HANDLERS = {
    "hello": m_hello,
    "target": m_target,
    "lower": m_lower,
    "replay": m_replay,
    "sample": m_sample,
    "prepare_tuning": m_prepare_tuning,
    "tune_open": m_tune_open,
    **{m: _session_request(m) for m in SESSION_REQUESTS},
    "build": m_build,
    "build_and_measure": m_build_and_measure,
    "bench": m_bench,
    "rpc_devices": m_rpc_devices,
}


def _error_kind(e: BaseException) -> str:
    """internal when the exception was raised in this package's own code, else tvm."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return "internal"
    here = os.path.dirname(os.path.abspath(__file__))
    return "internal" if os.path.abspath(frames[-1].filename).startswith(here) else "tvm"


# ---- loop --------------------------------------------------------------------------------


def handle_line(line: str) -> tuple[dict, bool]:
    """Answer one request line. Returns (response, keep_running)."""
    req_id = None
    try:
        try:
            req = json.loads(line)
        except ValueError as e:
            raise WorkerError("protocol", f"request is not JSON: {e}")
        if not isinstance(req, dict):
            raise WorkerError("protocol", "request must be a JSON object")
        req_id = req.get("id")
        if not isinstance(req_id, (int, str)) or isinstance(req_id, bool):
            req_id = None
            raise WorkerError("protocol", "request needs an id (int or string)")
        v = req.get("v")
        if v != PROTOCOL_VERSION:
            raise WorkerError(
                "version", f"this worker speaks protocol {PROTOCOL_VERSION}, request has v={v!r}"
            )
        method = req.get("method")
        params = req.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise WorkerError("protocol", "params must be an object")
        if method not in PARAMS:
            raise WorkerError("unknown_method", f"unknown method {method!r}")
        try:
            check_params(method, params)
        except WorkerError as e:
            e.task = _task_name_of(params)
            raise
        if method == "shutdown":
            return {"v": PROTOCOL_VERSION, "id": req_id, "result": {}}, False
        handler = HANDLERS[method]
        t0 = time.time()
        try:
            result = handler(params)
        except WorkerError as e:
            if e.task is None:
                e.task = _task_name_of(params)
            raise
        except Exception as e:  # noqa: BLE001 - TVM errors and bugs alike become responses
            tb = traceback.format_exc()
            _log(tb)
            raise WorkerError(_error_kind(e), one_line(e), _task_name_of(params))
        _log(f"{method} id={req_id} done in {time.time() - t0:.2f} s")
        return {"v": PROTOCOL_VERSION, "id": req_id, "result": _finite(result)}, True
    except WorkerError as e:
        return (
            {
                "v": PROTOCOL_VERSION,
                "id": req_id,
                "error": {"kind": e.kind, "message": one_line(e.message), "task": e.task},
            },
            True,
        )


def main() -> int:
    # Keep stdout for protocol lines only: whatever TVM, its C++ logging, or a subprocess
    # prints to fd 1 goes to stderr instead.
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = io.TextIOWrapper(os.fdopen(proto_fd, "wb", buffering=0), encoding="utf-8", newline="\n")
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    # Builder/runner subprocesses unpickle functions of this package: let them import it.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + [p for p in paths if p])
    from .tvmutil import default_runtime_threads, runtime_threads

    default_runtime_threads()
    _log(f"ready (pid {os.getpid()}, protocol {PROTOCOL_VERSION}, {runtime_threads()} runtime threads)")
    while True:
        line = stdin.readline()
        if not line:
            break  # EOF: exit cleanly
        if not line.strip():
            continue
        resp, keep = handle_line(line)
        out.write(json.dumps(resp, separators=(",", ":"), allow_nan=False) + "\n")
        out.flush()
        if not keep:
            break
    # the tuning builder's and runner's processes (tgc_worker.pool), when a session ever ran
    pool = sys.modules.get(__package__ + ".pool")
    if pool is not None:
        pool.shutdown_all()
    _log("exiting")
    return 0
