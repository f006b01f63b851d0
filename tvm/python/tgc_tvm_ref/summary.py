"""`python -m tgc_tvm_ref.summary FIXTURE.json`: a tgc.tvmref/1 report as Markdown tables.

Needs no TVM; used to write tvm/python/README.md and to read fixtures quickly.
"""

from __future__ import annotations

import collections
import json
import re
import sys

from . import SCHEMA


def _shape(desc) -> str:
    shape = desc.get("shape")
    return "()" if shape == [] else "x".join(str(d) for d in shape) if shape else "?"


_SHORT = (("pool_size", "k"), ("strides", "s"), ("padding", "p"), ("groups", "g"))


def _short_attrs(attrs: str) -> str:
    """'Conv2DAttrs(strides=(2, 2), padding=(3, 3, 3, 3), ..., groups=1, ...)' -> 's2,2 p3,3,3,3 g1'."""
    parts = []
    for name, short in _SHORT:
        match = re.search(rf"\b{name}=(\([^)]*\)|[-\w]+)", attrs or "")
        if match:
            parts.append(short + match.group(1).strip("()").replace(" ", ""))
    return " ".join(parts)


def _body(group) -> str:
    ops = []
    for op in group["body"]:
        extra = _short_attrs(op.get("attrs", ""))
        ops.append(f"{op['kind']}({', '.join(op['args'])}){' [' + extra + ']' if extra else ''}")
    return "; ".join(ops)


def task_table(report) -> str:
    lines = [
        "| # | task_name | weight | ops (args: pN group param, oN earlier op) | patterns | params (source: shape) | out |",
        "|---|---|---|---|---|---|---|",
    ]
    for index, task in enumerate(report["tasks"]):
        group = task["groups"][0]
        params = ", ".join(f"{p.get('source', '?')}: {_shape(p)}" for p in group["params"])
        patterns = ",".join(str(p) for p in task["op_patterns"])
        lines.append(
            f"| {index} | {task['task_name']} | {task['weight']} | {_body(group)} | {patterns} "
            f"| {params} | {_shape(task['buffers'][-1])} |"
        )
    return "\n".join(lines)


def family_table(report) -> str:
    tasks: collections.Counter = collections.Counter()
    weight: collections.Counter = collections.Counter()
    for task in report["tasks"]:
        key = " ".join(task["ops"])
        tasks[key] += 1
        weight[key] += task["weight"]
    lines = ["| ops | tasks | weight |", "|---|---|---|"]
    for key in sorted(weight, key=lambda k: (-weight[k], k)):
        lines.append(f"| {key} | {tasks[key]} | {weight[key]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tgc_tvm_ref.summary FIXTURE.json", file=sys.stderr)
        return 1
    try:
        with open(args[0], encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"tgc_tvm_ref.summary: {args[0]}: {exc}", file=sys.stderr)
        return 1
    if report.get("schema") != SCHEMA:
        print(f"tgc_tvm_ref.summary: {args[0]}: schema is not {SCHEMA}", file=sys.stderr)
        return 1
    summary = report["summary"]
    print(f"## {report['model']['file']}: {summary['num_tasks']} tasks, total weight "
          f"{summary['total_weight']}\n")
    print(family_table(report))
    print()
    print(task_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
