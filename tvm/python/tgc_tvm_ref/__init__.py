"""tgc_tvm_ref: TVM 0.27 reference data for tgc's fusion and task extraction.

Imports an ONNX model with TVM's own Relax frontend, runs TVM's fusion pipeline and
MetaSchedule task extraction, and writes what TVM did as JSON (schema ``tgc.tvmref/1``):
the imported op histogram, every task with the Relax ops fused into it, the op pattern
TVM assigned to each legalized PrimFunc, and the FuseOps limits.  tgc's Rust passes are
tested against these files; TVM itself is never needed at test time.
"""

SCHEMA = "tgc.tvmref/1"

__all__ = ["SCHEMA"]
