"""TVM's own view of a StableHLO module: `relax.frontend.stablehlo.from_stablehlo`, then the
pipeline of the ONNX reference (`reference._run_pipeline`: DecomposeOpsForInference,
LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps), FuseTIR and MetaSchedule's
`extract_tasks`; prints the tasks as JSON (name, weight).

    python -m tgc_tvm_ref.stablehlo_tasks MODULE.mlir

TVM 0.27's importer is written against the MLIR Python bindings of jaxlib 0.4 (it calls
`ShapedType.isinstance`, which later bindings dropped) and against StableHLO of that time
(it reads `dimensions`, `window_strides`, ... as dense elements, which StableHLO now writes
as `array<i64>`): run it with jaxlib 0.4.38 first on `PYTHONPATH`, on modules without those
attributes.
"""

import json
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    import tvm
    from tvm import relax
    from tvm.relax.frontend.stablehlo import from_stablehlo
    from tvm.s_tir import meta_schedule as ms

    from . import reference

    with open(argv[0]) as fh:
        mod = from_stablehlo(fh.read())
    fused = reference._run_pipeline(mod)
    with tvm.transform.PassContext(opt_level=reference.PASS_CONTEXT_OPT_LEVEL):
        lowered = relax.transform.FuseTIR()(fused)
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    tasks = ms.relax_integration.extract_tasks(lowered, target=target)
    print(json.dumps([{"name": t.task_name, "weight": int(t.weight)} for t in tasks]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
