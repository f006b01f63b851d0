"""Small TVM helpers shared by the methods: targets, trace JSON, tuning contexts."""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading

import tvm

from .errors import WorkerError

_intrin_lock = threading.Lock()
_intrin_loaded = False


def _cheap_stack(context: int = 1):
    """inspect.stack() without reading source files for frames below the third.

    TVMScript's @T.prim_func calls inspect.stack() and only looks at the code of its first
    frames; stdlib's version resolves a module for every frame, which for the frozen import
    machinery frames means a scan of sys.modules each time. Importing
    tvm.s_tir.tensor_intrin parses about 250 prim_funcs that way (76 s measured here).
    """
    out = []
    f = sys._getframe(1)
    i = 0
    while f is not None:
        if i < 3:
            tb = inspect.getframeinfo(f, context)
            out.append(
                inspect.FrameInfo(
                    f,
                    tb.filename,
                    tb.lineno,
                    tb.function,
                    tb.code_context,
                    tb.index,
                    positions=tb.positions,
                )
            )
        else:
            out.append(
                inspect.FrameInfo(
                    f, f.f_code.co_filename, f.f_lineno, f.f_code.co_name, None, None, positions=None
                )
            )
        f = f.f_back
        i += 1
    return out


def ensure_tensor_intrin() -> None:
    """Import tvm.s_tir.tensor_intrin (TuneContext does on first use) with a cheaper stack()."""
    global _intrin_loaded
    if _intrin_loaded:
        return
    with _intrin_lock:
        if _intrin_loaded:
            return
        orig = inspect.stack
        inspect.stack = _cheap_stack
        try:
            import tvm.s_tir.tensor_intrin  # noqa: F401
        finally:
            inspect.stack = orig
        _intrin_loaded = True


CUDA_DEFAULTS = {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152}

GPU_KINDS = ("cuda", "rocm", "vulkan", "metal", "opencl", "nvptx", "webgpu")


def physical_cores() -> int:
    """Physical cores (MetaSchedule's num-cores: SMT siblings share the vector units):
    psutil when installed, else /proc/cpuinfo's distinct (physical id, core id) pairs, else
    the logical count. The Rust side counts the same way (tgc_passes::target)."""
    logical = os.cpu_count() or 1
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
        if n:
            return int(n)
    except ImportError:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            blocks = f.read().split("\n\n")
    except OSError:
        return logical
    cores = set()
    for b in blocks:
        fields = dict(
            (k.strip(), v.strip()) for k, _, v in (l.partition(":") for l in b.splitlines())
        )
        if "physical id" in fields and "core id" in fields:
            cores.add((fields["physical id"], fields["core id"]))
    return min(len(cores), logical) if cores else logical


# The environment variables TVM's runtime reads for its CPU thread pool, in its order.
THREADS_ENV = ("TVM_NUM_THREADS", "OMP_NUM_THREADS")


def default_runtime_threads() -> None:
    """Run TVM's CPU thread pool on every physical core unless the user chose a count.

    Without TVM_NUM_THREADS or OMP_NUM_THREADS, TVM 0.27 takes half the hardware threads on
    x86 (it assumes two per core), so a VM whose vCPUs are one thread per core runs every
    measurement on half its cores: one thread on a 2-vCPU machine, while MetaSchedule
    schedules for `num-cores` of them. The pool reads the variable when it is first used, so
    this works after `import tvm`; the builder and runner processes inherit it. Call it
    before anything runs a kernel."""
    if not any(os.environ.get(k) for k in THREADS_ENV):
        os.environ["TVM_NUM_THREADS"] = str(physical_cores())


def runtime_threads() -> int:
    """The threads of this process's TVM CPU thread pool (what measurements here run on)."""
    return int(tvm.get_global_func("runtime.NumThreads")())


# The key of a spelled target that means "this machine" (tgc_passes::target::HOST_KEY): its
# value is the Rust side's host fingerprint, and it is replaced by the CPU and triple this
# TVM's LLVM detects and the physical cores.
HOST_KEY = "tgc.host"


def host_llvm_fields() -> dict:
    from tvm.target import codegen

    return {
        "mcpu": str(codegen.llvm_get_system_cpu()),
        "mtriple": str(codegen.llvm_get_system_triple()),
        "num-cores": physical_cores(),
    }


def parse_target(obj, task: str | None = None, with_host: bool = False) -> tvm.target.Target:
    if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
        raise WorkerError(
            "bad_params", 'target must be an object with a "kind", e.g. {"kind": "llvm"}', task
        )
    cfg = dict(obj)
    if HOST_KEY in cfg:
        if cfg["kind"] != "llvm":
            raise WorkerError("bad_params", f"{HOST_KEY} applies to llvm targets only", task)
        del cfg[HOST_KEY]
        for k, v in host_llvm_fields().items():
            cfg.setdefault(k, v)
    if cfg["kind"] == "cuda":
        # Without a GPU TVM cannot query these; MetaSchedule's CUDA rules and VerifyGPUCode
        # need them. Values of every NVIDIA GPU since Kepler (48 KiB static shared memory).
        for k, v in CUDA_DEFAULTS.items():
            cfg.setdefault(k, v)
    if cfg["kind"] == "llvm" and "num-cores" not in cfg:
        # MetaSchedule refuses an llvm target without it; default to this machine's cores
        cfg["num-cores"] = physical_cores()
    if with_host and cfg["kind"] in GPU_KINDS and "host" not in cfg:
        cfg["host"] = {"kind": "llvm"}
    try:
        return tvm.target.Target(cfg)
    except Exception as e:  # noqa: BLE001
        from .errors import one_line

        raise WorkerError("bad_params", f"invalid target {json.dumps(obj)}: {one_line(e)}", task)


def llvm_version() -> str | None:
    """The LLVM this TVM links, as TVM reports it (`llvm_version_major()`, e.g. "22"); None
    for a TVM built without LLVM."""
    major = tvm.target.codegen.llvm_version_major(allow_none=True)
    return None if major is None else str(int(major))


# Fields of Target.export() that are not a property of the target (differ between two
# processes for the same config) and so are left out of the canonical form. TVM 0.27's
# export has none: checked for llvm (with and without num-cores, mcpu, mtriple, mattr,
# keys), cuda (with and without arch and host) and c; every export is a fixed point.
VOLATILE_TARGET_FIELDS: tuple[str, ...] = ()


def _sorted_json(o):
    if isinstance(o, dict):
        return {k: _sorted_json(o[k]) for k in sorted(o) if k not in VOLATILE_TARGET_FIELDS}
    if isinstance(o, list):
        return [_sorted_json(x) for x in o]
    return o


def canonical_target(obj, task: str | None = None) -> tuple[dict, tvm.target.Target]:
    """TVM's canonical form of a target config: the target `parse_target` builds from it
    (num-cores and CUDA limits filled in as every method does) as `Target.export()` writes
    it, which is also what MetaSchedule stores in its tuning records; keys sorted."""
    target = parse_target(obj, task)
    exported = plain_json(target.export())
    if not isinstance(exported, dict) or not isinstance(exported.get("kind"), str):
        raise WorkerError("internal", f"Target.export() gave {exported!r}", task)
    return _sorted_json(exported), target


def target_num_cores(target: tvm.target.Target) -> int | None:
    try:
        n = target.attrs.get("num-cores")
        return int(n) if n is not None else None
    except Exception:  # noqa: BLE001
        return None


def plain_json(o):
    """TVM containers/immediates from Trace.as_json -> plain Python JSON values."""
    if o is None or isinstance(o, (bool, int, float, str)):
        return o
    if isinstance(o, tvm.tirx.IntImm):
        return int(o.value)
    if isinstance(o, tvm.tirx.FloatImm):
        return float(o.value)
    if isinstance(o, dict) or hasattr(o, "items"):
        return {str(k): plain_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)) or hasattr(o, "__len__"):
        return [plain_json(x) for x in o]
    return str(o)


def trace_to_json(trace, remove_postproc: bool = False):
    return plain_json(trace.as_json(remove_postproc=remove_postproc))


def make_context(
    workload, target, task_name: str, seed: int = 1, num_threads=None, strategy=None, logger=None
):
    from tvm.s_tir import meta_schedule as ms

    ensure_tensor_intrin()
    if num_threads is None:
        num_threads = target_num_cores(target) or "physical"
    return ms.TuneContext(
        mod=workload,
        target=target,
        space_generator="post-order-apply",
        search_strategy=strategy,
        task_name=task_name,
        rand_state=seed,
        num_threads=num_threads,
        logger=logger,
    )
