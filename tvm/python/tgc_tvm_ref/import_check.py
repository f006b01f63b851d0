"""`python -m tgc_tvm_ref.import_check MODEL.onnx...`: does TVM's Relax frontend import them?

Imports every model with `relax.frontend.onnx.from_onnx` (declared shapes) in one process and
prints one JSON document on stdout: per file, whether the import succeeded (with the error's
first line otherwise), the output types and the number of parameters of `main`. Exit status 0
when every model imported, 1 otherwise. tgc's zoo test runs it over the exported zoo.
"""

from __future__ import annotations

import json
import sys
import warnings

from .reference import UserError, _import_section, load_onnx, resolve_shapes


def check(path: str) -> dict:
    from tvm.relax.frontend.onnx import from_onnx

    try:
        model = load_onnx(path)
        shapes = resolve_shapes(path, model, {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
        section = _import_section(mod, shapes)
    except UserError as exc:
        return {"file": path, "ok": False, "error": str(exc)}
    except Exception as exc:  # the frontend raises many kinds; report, do not crash
        first = (str(exc).strip().splitlines() or [""])[0]
        return {"file": path, "ok": False, "error": f"{type(exc).__name__}: {first}"}
    return {
        "file": path,
        "ok": True,
        "outputs": section["outputs"],
        "num_params": len(mod["main"].params),
        "num_op_calls": section["num_op_calls"],
    }


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m tgc_tvm_ref.import_check MODEL.onnx...", file=sys.stderr)
        return 1
    results = [check(p) for p in paths]
    json.dump({"schema": "tgc.tvm-import-check/1", "models": results}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
