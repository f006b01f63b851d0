"""`python -m tgc_tvm_ref MODEL.onnx [--shape NAME=1x224x224x3]... --json OUT.json`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .reference import UserError, analyse, parse_shape


def dumps(value, indent: int = 0) -> str:
    """Pretty JSON with sorted keys; lists of scalars (shapes, op names) stay on one line."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k))}: {dumps(value[k], indent + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return json.dumps(list(value))
        items = [f"{pad}{dumps(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tgc_tvm_ref",
        description=(
            "Import an ONNX model with TVM 0.27, run DecomposeOpsForInference, LegalizeOps, "
            "AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR and MetaSchedule task "
            "extraction, and write what TVM did as JSON (schema tgc.tvmref/1)."
        ),
    )
    parser.add_argument("model", help="ONNX model file")
    parser.add_argument(
        "--shape", action="append", default=[], metavar="NAME=D0xD1x...",
        help="static shape of a graph input (repeatable); inputs not named keep their declared "
             "shape, which must then be static",
    )
    parser.add_argument("--json", required=True, metavar="OUT.json", dest="out",
                        help="where to write the report ('-' for stdout)")
    parser.add_argument("--num-cores", type=int, default=2,
                        help="num-cores of the llvm target given to extract_tasks (default 2)")
    parser.add_argument("--timings", action="store_true",
                        help="also put wall-clock timings into the JSON (makes it non-deterministic)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        shapes = {}
        for text in args.shape:
            name, dims = parse_shape(text)
            shapes[name] = dims
        if args.num_cores < 1:
            raise UserError("--num-cores must be at least 1")
        report, timings = analyse(args.model, shapes, num_cores=args.num_cores)
    except UserError as exc:
        print(f"tgc_tvm_ref: {exc}", file=sys.stderr)
        return 1
    if args.timings:
        report["timings_s"] = {k: round(v, 3) for k, v in timings.items()}
    text = dumps(report) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        directory = os.path.dirname(os.path.abspath(args.out))
        try:
            os.makedirs(directory, exist_ok=True)
            tmp = args.out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, args.out)
        except OSError as exc:
            print(f"tgc_tvm_ref: {args.out}: cannot write ({exc.strerror})", file=sys.stderr)
            return 1
    summary = report["summary"]
    print(
        f"{report['model']['file']}: {summary['num_tasks']} tasks, total weight "
        f"{summary['total_weight']}, {summary['num_fused_functions']} fused functions; "
        + ", ".join(f"{k}={v:.2f}" for k, v in timings.items()),
        file=sys.stderr,
    )
    return 0
