"""Replaying cached traces on a task's workload: exact, tile-repaired, or through an anchor trace."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from tvm.s_tir import Schedule, Trace

from .errors import WorkerError, one_line
from .tvmutil import trace_to_json


def new_schedule(workload) -> Schedule:
    # seed must be >= 1 (TVM_NOTES); no debug checks, no error rendering (fast failures)
    return Schedule(workload, seed=1, debug_mask=0, error_render_level="none")


def parse_trace_json(obj, where: str, task: str | None):
    """A trace in MetaSchedule JSON ([instructions, decisions]), possibly as a JSON string."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError as e:
            raise WorkerError("bad_trace", f"{where}: not JSON: {e}", task)
    if (
        not isinstance(obj, list)
        or len(obj) != 2
        or not isinstance(obj[0], list)
        or not isinstance(obj[1], list)
    ):
        raise WorkerError("bad_trace", f"{where}: expected [instructions, decisions]", task)
    for i, inst in enumerate(obj[0]):
        if not isinstance(inst, list) or len(inst) != 4 or not isinstance(inst[0], str):
            raise WorkerError(
                "bad_trace", f"{where}: instruction {i} is not [kind, inputs, attrs, outputs]", task
            )
    for d in obj[1]:
        if not isinstance(d, list) or len(d) != 2 or not isinstance(d[0], int):
            raise WorkerError("bad_trace", f"{where}: decision {d!r} is not [index, value]", task)
    return obj


def strip_postproc(trace_json):
    """Drop EnterPostproc and everything after it (postprocessors are re-run on replay)."""
    insts, decisions = trace_json
    cut = len(insts)
    for i, inst in enumerate(insts):
        if inst[0] == "EnterPostproc":
            cut = i
            break
    return [insts[:cut], [d for d in decisions if d[0] < cut]]


def _replay_error(tj, workload) -> str:
    """Replay again with error rendering on, for a readable message (failures only)."""
    try:
        sch = Schedule(workload, seed=1, debug_mask=0, error_render_level="fast")
        Trace.apply_json_to_schedule(tj, sch)
    except Exception as e:  # noqa: BLE001
        return one_line(e)
    return "(failed once, then replayed: nondeterministic)"


def _decision_map(decisions) -> dict:
    return {d[0]: json.dumps(d[1]) for d in decisions}


def run_postprocs(sch: Schedule, postprocs) -> str | None:
    """Run the postprocessors; None on success, else the name of the one that failed."""
    sch.enter_postproc()
    for p in postprocs:
        if not p.apply(sch):
            return type(p).__name__
    return None


def _divisors(n: int) -> list[int]:
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def repair_tile(factors: list[int], extent: int, max_innermost: int) -> list[int]:
    """Factors for `extent` close to `factors`, innermost first, outermost takes the rest.

    TVM's own replay keeps each non-dividing factor's loop whole (l = remaining length, the
    rest 1); here each factor becomes the divisor of the remaining length nearest to it (in
    log scale; ties to the smaller), so a 16x16 tiling of a 28x28 loop stays a tiling.
    """
    n = len(factors)
    out = [1] * n
    length = extent
    for i in range(n - 1, 0, -1):
        want = max(1, int(factors[i]))
        cands = _divisors(length)
        if i == n - 1 and max_innermost and max_innermost > 0:
            cands = [d for d in cands if d <= max_innermost] or [1]
        best = min(cands, key=lambda d: (abs(math.log(d) - math.log(want)), d))
        out[i] = best
        length //= best
    out[0] = length
    return out


@dataclass
class ReplayOutcome:
    ok: bool
    mode: str | None = None  # exact | repaired | anchor
    sch: Schedule | None = None
    error: str | None = None
    repaired_decisions: int = 0
    applied: bool = False  # the trace replayed on the workload as is (before postprocessing)
    # MetaSchedule's evolutionary search can mutate sch.trace (search_safe); checked for the
    # transfers to another fused tail, False where it cannot
    search_safe: bool = True
    attempts: list = field(default_factory=list)  # (mode, error) of failed attempts

    def as_json(self) -> dict:
        out = {"ok": self.ok, "mode": self.mode, "error": self.error}
        if self.mode == "repaired":
            out["repaired_decisions"] = self.repaired_decisions
        return out


def _repaired_apply(trace: Trace, orig_decisions: dict, workload, counter_ref: list):
    """Re-apply `trace` with SamplePerfectTile decisions repaired by repair_tile."""
    sch = new_schedule(workload)
    idx = [0]
    changed = [0]

    def provider(inst, inputs, attrs, decision):
        k = idx[0]
        idx[0] += 1
        if inst.kind.name != "SamplePerfectTile" or k not in orig_decisions:
            return decision
        orig = json.loads(orig_decisions[k])
        extent = sch.get(inputs[0]).extent
        try:
            extent = int(extent)
        except TypeError:
            return decision
        max_inner = int(attrs[1]) if len(attrs) > 1 else -1
        new = repair_tile(orig, extent, max_inner)
        if new != orig:
            changed[0] += 1
        return new

    trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
    counter_ref.append(changed[0])
    return sch


def block_names(workload) -> frozenset:
    """Names of the blocks under the workload's root block."""
    sch = new_schedule(workload)
    return frozenset(sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root")))


def with_workload_block_names(tj, workload):
    """`tj` with the block names it looks up but `workload` lacks renamed to the workload's,
    or None when nothing needs renaming or a name has no unique counterpart.

    TVM names some blocks after a tensor of the model (a reduction of `lv293` is the block
    `lv293_red`), so a record tuned on another import of the same workload (stock TVM's
    `from_onnx`, whose names are main's variables; tgc names parameters by position) looks
    them up under other names. A missing name maps to the one block the trace does not name
    whose name ends the same way after its first `_`; the replay that follows checks it."""
    names = block_names(workload) | {"root"}  # a workload's blocks are the root's children
    wanted = list(dict.fromkeys(i[2][0] for i in tj[0] if i[0] == "GetSBlock" and i[2]))
    missing = [n for n in wanted if n not in names]
    if not missing:
        return None
    free = [n for n in names if n not in wanted]

    def role(n: str) -> str:
        return n.split("_", 1)[1] if "_" in n else ""

    mapping = {}
    for m in missing:
        match = [f for f in free if role(f) == role(m) and f not in mapping.values()]
        if len(match) != 1:
            return None
        mapping[m] = match[0]
    insts = [
        [k, ins, [mapping.get(a[0], a[0]), *a[1:]] if k == "GetSBlock" and a else a, outs]
        for k, ins, a, outs in tj[0]
    ]
    return [insts, tj[1]]


def replay(
    workload,
    target,
    postprocs,
    trace_json,
    source_workload=None,
    allow_anchor: bool = True,
) -> ReplayOutcome:
    """Replay one trace (already validated by parse_trace_json) on `workload`.

    `source_workload` is the workload the trace was tuned on, when known. A trace that does
    not apply because it names blocks `workload` lacks is tried again with them renamed
    (with_workload_block_names) in steps 1-2.

    1. exact: the trace as is. If TVM had to change no decision, the postprocessors pass and
       the source workload (when known) is structurally equal to `workload`, the mode is
       "exact".
    2. repaired: when a decision did not fit (TVM changed it while replaying), the
       exact replay's postprocessors failed, or the source workload has other extents:
       re-apply with tile factors repaired by repair_tile; if that fails, keep TVM's own
       repair when its postprocessors pass.
    3. anchor: when the source workload has other blocks than `workload` (another fused
       tail), or when the trace does not replay at all: replay it on the source workload and
       transfer it with ms.trace_apply.schedule_using_anchor_trace. Needs the source
       workload. With other blocks this is tried first; when TVM's transfer fails (it needs
       the trace to schedule the tail), steps 1-2 follow, and a success there is "repaired".
    """
    import tvm_ffi

    tj = strip_postproc(trace_json)
    out = ReplayOutcome(ok=False)
    same_workload = source_workload is None or tvm_ffi.structural_equal(source_workload, workload)
    same_blocks = same_workload or block_names(source_workload) == block_names(workload)

    if same_blocks:
        if _replay_direct_renamed(out, tj, workload, postprocs, same_workload):
            return out
        if allow_anchor and not out.applied:
            if _replay_anchor(out, tj, workload, target, postprocs, source_workload):
                return out
    else:
        # another fused tail: the anchor block's schedule is what transfers
        if allow_anchor and _replay_anchor(out, tj, workload, target, postprocs, source_workload):
            return out
        # TVM's anchor transfer needs the trace to schedule the tail; when it does not, the
        # trace may still replay here (blocks it does not name stay as they are)
        if _replay_direct_renamed(out, tj, workload, postprocs, same_workload=False):
            out.search_safe = search_safe(out.sch.trace, workload)
            return out
    out.error = "; ".join(f"{m}: {msg}" for m, msg in out.attempts) or "replay failed"
    return out


def _replay_direct_renamed(out: ReplayOutcome, tj, workload, postprocs, same_workload: bool) -> bool:
    """_replay_direct; when the trace did not apply, once more with the block names the
    workload lacks renamed (with_workload_block_names), if any are. The anchor path keeps
    the names: it replays the trace on its source workload."""
    if _replay_direct(out, tj, workload, postprocs, same_workload):
        return True
    renamed = None if out.applied else with_workload_block_names(tj, workload)
    return renamed is not None and _replay_direct(out, renamed, workload, postprocs, same_workload)


def _replay_direct(out: ReplayOutcome, tj, workload, postprocs, same_workload: bool) -> bool:
    """Steps 1 and 2 of replay(); fills `out` and returns True on success."""
    orig = _decision_map(tj[1])
    sch1 = new_schedule(workload)
    try:
        Trace.apply_json_to_schedule(tj, sch1)
    except Exception:  # noqa: BLE001 - TVM's ScheduleError & co
        out.attempts.append(("exact", f"replay failed: {_replay_error(tj, workload)}"))
        return False
    out.applied = True
    new = _decision_map(trace_to_json(sch1.trace, remove_postproc=True)[1])
    changed = [k for k in orig if new.get(k) != orig[k]]
    trace1 = sch1.trace
    if not changed:
        try:
            failed = run_postprocs(sch1, postprocs)
        except Exception as e:  # noqa: BLE001
            failed = f"postprocessing raised {one_line(e)}"
        if failed is None:
            out.ok, out.sch = True, sch1
            out.mode = "exact" if same_workload else "repaired"
            return True
        out.attempts.append(("exact", f"postprocessor {failed} rejected the schedule"))
    # 2. repaired
    try:
        counter: list = []
        sch2 = _repaired_apply(trace1, orig, workload, counter)
        failed = run_postprocs(sch2, postprocs)
        if failed is None:
            out.ok, out.mode, out.sch = True, "repaired", sch2
            out.repaired_decisions = max(counter[0], len(changed))
            return True
        out.attempts.append(("repaired", f"postprocessor {failed} rejected the schedule"))
    except Exception as e:  # noqa: BLE001
        out.attempts.append(("repaired", f"replay failed: {one_line(e)}"))
    if changed:
        # TVM's own repair (the schedule of step 1)
        try:
            failed = run_postprocs(sch1, postprocs)
            if failed is None:
                out.ok, out.mode, out.sch = True, "repaired", sch1
                out.repaired_decisions = len(changed)
                return True
            out.attempts.append(
                ("repaired", f"TVM's repair: postprocessor {failed} rejected the schedule")
            )
        except Exception as e:  # noqa: BLE001
            out.attempts.append(("repaired", f"TVM's repair raised {one_line(e)}"))
    return False


def _replay_anchor(out: ReplayOutcome, tj, workload, target, postprocs, source_workload) -> bool:
    """Step 3 of replay(); fills `out` and returns True on success."""
    from tvm.s_tir import meta_schedule as ms

    if source_workload is None:
        out.attempts.append(("anchor", "not tried: no source_task given for this trace"))
        return False
    try:
        src = new_schedule(source_workload)
        Trace.apply_json_to_schedule(tj, src)
        sch3 = new_schedule(workload)
        ms.trace_apply.schedule_using_anchor_trace(sch3, src.trace, target)
        failed = run_postprocs(sch3, postprocs)
        if failed is None:
            out.ok, out.mode, out.sch = True, "anchor", _simplified(sch3, workload)
            out.search_safe = search_safe(out.sch.trace, workload)
            return True
        out.attempts.append(("anchor", f"postprocessor {failed} rejected the schedule"))
    except Exception as e:  # noqa: BLE001
        out.attempts.append(("anchor", f"failed: {one_line(e)}"))
    return False


def _simplified(sch: Schedule, workload) -> Schedule:
    """`sch` rebuilt from its trace without the instructions whose results nothing uses (TVM's
    anchor transfer leaves a get_loops of every block behind), when that gives the same
    program; else `sch`. Fewer dead loop lookups, fewer ways for a mutation to break it."""
    import tvm_ffi

    trace = sch.trace.simplified(remove_postproc=False)
    try:
        again = new_schedule(workload)
        trace.apply_to_schedule(again, remove_postproc=False)
    except Exception:  # noqa: BLE001 - keep the schedule TVM's transfer made
        return sch
    return again if tvm_ffi.structural_equal(again.mod, sch.mod) else sch


# compute-location decisions search_safe tries: inline, root, and loop positions (a decision
# past the last loop is taken as the last)
_LOCATIONS = range(-2, 32)


def search_safe(trace: Trace, workload) -> bool:
    """Whether MetaSchedule's evolutionary search can mutate `trace` without failing.

    Its compute-location mutator moves a block to another legal loop and replays the trace
    without catching errors; a trace that looks up that block's loops afterwards (as TVM's
    anchor transfer writes them) then replays to another number of loops, which TVM checks
    fatally, ending the whole search round. Tries every location of every
    sample_compute_location: an illegal one is a ScheduleError (the mutator never picks
    it), any other error is a trace the search cannot mutate."""
    from tvm.s_tir.schedule import ScheduleError

    base = trace.simplified(remove_postproc=True)
    for inst in base.insts:
        if inst.kind.name != "SampleComputeLocation":
            continue
        for decision in _LOCATIONS:
            try:
                base.with_decision(inst, decision, remove_postproc=True).apply_to_schedule(
                    new_schedule(workload), remove_postproc=True
                )
            except ScheduleError:
                continue
            except Exception:  # noqa: BLE001 - TVM's InternalError, the fatal check
                return False
    return True


def sample_traces(ctx, count: int, seed: int, max_attempts: int) -> tuple[list, int]:
    """Random schedules of the task's design space that pass the postprocessors, as trace JSON.

    Each design space's trace is re-applied with every sampling decision dropped, so TVM
    samples it afresh (Schedule seed = seed + attempt). No measurement.
    """
    spaces = ctx.space_generator.generate_design_space(ctx.mod)
    postprocs = list(ctx.space_generator.postprocs)
    out, seen, attempts = [], set(), 0
    while len(out) < count and attempts < max_attempts:
        space = spaces[attempts % len(spaces)]
        sch = Schedule(ctx.mod, seed=seed + attempts, debug_mask=0, error_render_level="none")
        attempts += 1
        try:
            space.trace.apply_to_schedule(
                sch, remove_postproc=True, decision_provider=lambda inst, i, a, d: None
            )
            if run_postprocs(sch, postprocs) is not None:
                continue
        except Exception:  # noqa: BLE001 - an unlucky sample; try another
            continue
        tj = trace_to_json(sch.trace)
        key = json.dumps(tj)
        if key in seen:
            continue
        seen.add(key)
        out.append(tj)
    return out, attempts
