"""The build function tgc's builder runs in its worker processes.

TVM's default_build first imports tvm.s_tir.tensor_intrin, which parses about 250
TVMScript functions: tens of seconds per build batch on a loaded 2-core machine, since
LocalBuilder starts fresh worker processes for every batch. Building a scheduled module
does not need the intrinsics registered (tensorization already happened while
scheduling), so this does the same build without that import.

`build_and_export` is what `pool.TrialBuilder` sends to its persistent processes: build,
then export as MetaSchedule's default_export does (a tar in a fresh temporary directory,
which the runner side removes after measuring), timed in the build's own process (the
seconds a build guard compares, without the pool's queueing).
"""


def build(mod, target, _params):
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def export(rt_mod) -> str:
    import os
    import tempfile

    from tvm.support.tar import tar

    path = os.path.join(tempfile.mkdtemp(prefix="tgc-build-"), "tvm_tmp_mod." + tar.output_format)
    rt_mod.export_library(path, fcompile=tar)
    return path


def build_and_export(args) -> tuple[str, float]:
    """`args`: (mod, target, params). Returns the artifact path and the seconds it took."""
    import time

    t0 = time.perf_counter()
    mod, target, params = args
    path = export(build(mod, target, params))
    return path, time.perf_counter() - t0
