"""The JSON task schema (PROTOCOL.md, "Task JSON"): parsing and validation, no TVM needed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .errors import WorkerError
from .ops import OPS, check_attrs

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass(frozen=True)
class TensorTy:
    shape: tuple[int, ...]
    dtype: str

    def as_json(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Param:
    name: str
    ty: TensorTy


@dataclass(frozen=True)
class Binding:
    op: str
    operands: tuple[int, ...]
    attrs: dict
    results: tuple[TensorTy, ...]


@dataclass(frozen=True)
class Task:
    name: str
    params: tuple[Param, ...]
    bindings: tuple[Binding, ...]
    results: tuple[int, ...]
    key: str  # canonical JSON of the request's task (cache key)
    # declared params whose layout the schedule may choose (weights packed once, ahead of
    # the runs: MetaSchedule's layout-free buffers)
    layout_free: tuple[int, ...] = ()

    def value_types(self) -> list[TensorTy]:
        out = [p.ty for p in self.params]
        for b in self.bindings:
            out.extend(b.results)
        return out


def _tensor_ty(obj, where: str, task: str | None) -> TensorTy:
    if not isinstance(obj, dict):
        raise WorkerError("bad_task", f"{where}: expected an object with shape and dtype", task)
    shape = obj.get("shape")
    dtype = obj.get("dtype")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise WorkerError(
            "bad_task", f"{where}: shape must be a list of non-negative ints, got {shape!r}", task
        )
    if not isinstance(dtype, str) or not dtype:
        raise WorkerError("bad_task", f"{where}: dtype must be a string, got {dtype!r}", task)
    return TensorTy(tuple(shape), dtype)


def _name_of(obj) -> str | None:
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        return obj["name"]
    return None


def parse_task(obj) -> Task:
    """Validate a task JSON object and return a Task. Raises WorkerError(bad_task/unsupported_op)."""
    name = _name_of(obj)
    if not isinstance(obj, dict):
        raise WorkerError("bad_task", "task must be a JSON object", None)
    if name is None:
        raise WorkerError("bad_task", "task.name must be a string", None)
    if not _NAME.match(name) or name == "main":
        raise WorkerError(
            "bad_task",
            f"task name {name!r} must match [A-Za-z_][A-Za-z0-9_.]* and not be 'main'",
            name,
        )
    for k in obj:
        if k not in ("name", "params", "bindings", "results", "layout_free"):
            raise WorkerError("bad_task", f"unknown task field {k!r}", name)
    params_j = obj.get("params")
    bindings_j = obj.get("bindings")
    results_j = obj.get("results")
    if not isinstance(params_j, list):
        raise WorkerError("bad_task", "task.params must be a list", name)
    if not isinstance(bindings_j, list) or not bindings_j:
        raise WorkerError("bad_task", "task.bindings must be a non-empty list", name)
    if not isinstance(results_j, list) or not results_j:
        raise WorkerError("bad_task", "task.results must be a non-empty list", name)

    params = []
    for i, p in enumerate(params_j):
        where = f"params[{i}]"
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise WorkerError("bad_task", f"{where}: expected {{name, shape, dtype}}", name)
        params.append(Param(p["name"], _tensor_ty(p, where, name)))

    n_values = len(params)
    bindings = []
    for i, b in enumerate(bindings_j):
        binding = _parse_binding(b, i, n_values, name)
        bindings.append(binding)
        n_values += len(binding.results)

    results = []
    for x in results_j:
        if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < n_values:
            raise WorkerError(
                "bad_task", f"results: {x!r} is not a value index below {n_values}", name
            )
        results.append(x)
    layout_free = obj.get("layout_free", [])
    if (
        not isinstance(layout_free, list)
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in layout_free)
        or len(set(layout_free)) != len(layout_free)
        or not all(0 <= x < len(params) for x in layout_free)
    ):
        raise WorkerError(
            "bad_task",
            f"layout_free: {layout_free!r} is not a list of distinct param indices below {len(params)}",
            name,
        )
    key = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return Task(name, tuple(params), tuple(bindings), tuple(results), key, tuple(sorted(layout_free)))


def _parse_binding(b, i: int, n_values: int, name: str) -> Binding:
    """Binding `i` of task `name`, whose operands may name the `n_values` values before it."""
    where = f"bindings[{i}]"
    if not isinstance(b, dict):
        raise WorkerError("bad_task", f"{where}: expected an object", name)
    op = b.get("op")
    if not isinstance(op, str):
        raise WorkerError("bad_task", f"{where}: op must be a string", name)
    where = f"bindings[{i}] ({op})"
    if op not in OPS:
        raise WorkerError("unsupported_op", f"{where}: unknown op {op!r}", name)
    spec = OPS[op]
    operands = b.get("operands", [])
    if not isinstance(operands, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in operands
    ):
        raise WorkerError("bad_task", f"{where}: operands must be a list of ints", name)
    for x in operands:
        if not 0 <= x < n_values:
            raise WorkerError(
                "bad_task",
                f"{where}: operand %{x} is not defined before this binding "
                f"({n_values} values so far)",
                name,
            )
    if len(operands) < spec.min_operands or (
        spec.max_operands is not None and len(operands) > spec.max_operands
    ):
        want = (
            str(spec.min_operands)
            if spec.max_operands == spec.min_operands
            else f"at least {spec.min_operands}"
        )
        raise WorkerError(
            "bad_task", f"{where}: takes {want} operands, got {len(operands)}", name
        )
    attrs = check_attrs(op, b.get("attrs", {}), where, name)
    res_j = b.get("results")
    if not isinstance(res_j, list) or not res_j:
        raise WorkerError("bad_task", f"{where}: results must be a non-empty list", name)
    results = tuple(_tensor_ty(r, f"{where} results[{k}]", name) for k, r in enumerate(res_j))
    if op != "split" and len(results) != 1:
        raise WorkerError("bad_task", f"{where}: has one result, got {len(results)}", name)
    if op == "constant":
        shape = attrs["shape"]
        if results[0].shape != tuple(shape) or results[0].dtype != attrs["dtype"]:
            raise WorkerError(
                "bad_task", f"{where}: result type differs from attrs shape/dtype", name
            )
        count = 1
        for d in shape:
            count *= d
        if len(attrs["value"]) not in (1, count):
            raise WorkerError(
                "bad_task",
                f"{where}: value has {len(attrs['value'])} elements, "
                f"shape {shape} needs 1 or {count}",
                name,
            )
    return Binding(op, tuple(operands), attrs, results)
