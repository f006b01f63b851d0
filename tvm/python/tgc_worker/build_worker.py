"""The build function MetaSchedule's LocalBuilder runs in its worker processes.

TVM's default_build first imports tvm.s_tir.tensor_intrin, which parses about 250
TVMScript functions: tens of seconds per build batch on a loaded 2-core machine, since
LocalBuilder starts fresh worker processes for every batch. Building a scheduled module
does not need the intrinsics registered (tensorization already happened while
scheduling), so this does the same build without that import.
"""


def build(mod, target, _params):
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)
