"""tgc.relax.ApplyCache and tgc.relax.compile against real TVM: a model tuned into a cache,
compiled by `tvm.compile` after the pass and by the one-line form, runs like an untuned stock
build, keeps its signature, and the PrimFuncs TVM compiles are the cached schedules."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.s_tir import Schedule, Trace
from tvm.script import relax as R

import tgc
import tgc.relax


def model_with_constants():
    """conv(+bias)+relu, then conv+add+relu, the weights constants: they are larger than 16
    elements, so from_relax lifts them to parameters, which the pass must bind back; the
    bias (8 elements) stays a constant binding."""
    rng = np.random.default_rng(0)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 16, 16), "float32"))
    w1 = relax.const(rng.normal(0, 0.3, (8, 8, 3, 3)).astype("float32"))
    w2 = relax.const(rng.normal(0, 0.3, (8, 8, 3, 3)).astype("float32"))
    bias = relax.const(rng.normal(0, 0.1, (1, 8, 1, 1)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.nn.conv2d(x, w1, padding=[1, 1, 1, 1]))
            y = bb.emit(R.nn.relu(R.add(y, bias)))
            y = bb.emit(R.nn.conv2d(y, w2, padding=[1, 1, 1, 1]))
            out = bb.emit_output(R.nn.relu(R.add(y, x)))
        bb.emit_func_output(out)
    return bb.get()


@tvm.instrument.pass_instrument
class Capture:
    """Keeps the module as the Relax pipeline leaves it (after its last pass,
    AttachGlobalSymbol): the functions `tvm.compile` then generates code for."""

    def __init__(self):
        self.final = None

    def run_after_pass(self, mod, info):
        if info.name == "AttachGlobalSymbol" and self.final is None:
            self.final = mod


def compiled(mod, target, **kwargs):
    """`tvm.compile(mod, target)` and the module its Relax pipeline produced."""
    cap = Capture()
    with tvm.transform.PassContext(instruments=[cap]):
        ex = tvm.compile(mod, target=target, **kwargs)
    return ex, cap.final


def prim_funcs(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}


def run(ex, x):
    dev = tvm.cpu()
    return relax.VirtualMachine(ex, dev)["main"](tvm.runtime.tensor(x, dev)).numpy()


class TestApplyCache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name)
        cls.cache = cls.dir / "cache.sqlite"
        cls.mod = model_with_constants()
        tgc.tune(cls.mod, name="consts", cache=cls.cache, trials_per_task=3, trials_per_round=3,
                 population=32, tolerance=3.0, measure=False, work_dir=cls.dir / "tune")
        cls.apply = tgc.relax.ApplyCache(cls.cache, "llvm", name="consts",
                                         work_dir=cls.dir / "apply")
        cls.scheduled = cls.apply(cls.mod)
        cls.target = cls.apply.target
        cls.ex, cls.final = compiled(cls.scheduled, cls.target)
        cls.untuned = tvm.compile(cls.mod, target=cls.target)
        cls.x = np.random.default_rng(1).uniform(-1, 1, (1, 8, 16, 16)).astype("float32")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_matches_untuned(self, ex):
        want = run(self.untuned, self.x)
        got = run(ex, self.x)
        self.assertGreater(float(np.abs(want).max()), 0.1)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))

    def test_the_pass_is_a_tvm_pass(self):
        self.assertIsInstance(self.apply, tvm.transform.Pass)
        self.assertEqual(self.apply.info.name, "tgc.ApplyCache")

    def test_the_signature_is_the_callers(self):
        ours, theirs = self.scheduled["main"], self.mod["main"]
        self.assertEqual(len(ours.params), 1, "the lifted weights are bound back as constants")
        self.assertTrue(ours.params[0].same_as(theirs.params[0]))
        self.assertTrue(tvm_ffi.structural_equal(ours.ret_ty, theirs.ret_ty))

    def test_pass_then_tvm_compile_matches_an_untuned_build(self):
        self.assert_matches_untuned(self.ex)

    def test_the_one_line_form_matches_an_untuned_build(self):
        ex = tgc.relax.compile(self.mod, "llvm", cache=self.cache, work_dir=self.dir / "one-line")
        self.assert_matches_untuned(ex)

    def test_the_report_names_tgcs_tasks_and_their_exact_records(self):
        r = self.apply.report
        self.assertEqual(r["schema"], "tgc.apply-cache/1")
        want = {t["name"]: t["exact_key"] for t in tgc.tasks(self.mod)["tasks"]}
        self.assertEqual({t["name"]: t["exact_key"] for t in r["tasks"]}, want)
        self.assertEqual(r["totals"]["tasks_by_tier"], {"exact": 2})
        # The workload each task was scheduled as is the one its cached records were tuned on.
        lookup = {t["exact_key"]: t for t in tgc.Cache(self.cache).lookup(self.mod)["tasks"]}
        for t in r["tasks"]:
            self.assertEqual(t["mode"], "exact")
            self.assertEqual(t["source"]["model"], "consts")
            best = lookup[t["exact_key"]]["candidates"][0]["source"]
            self.assertEqual(best["tvm_hash"], t["workload_hash"])
            self.assertEqual(best["task"], t["name"])
        self.assertEqual(sorted(r["scheduled"]), sorted(f for t in r["tasks"] for f in t["functions"]))

    def test_the_compiled_tasks_are_the_cached_schedules(self):
        """Each task's PrimFunc, as tvm.compile's pipeline leaves it, is its workload with the
        cache's best trace applied by stock MetaSchedule, and carries its workload's hash."""
        unscheduled = prim_funcs(tgc.relax.ApplyCache(self.cache, "llvm", no_cache=True,
                                                      work_dir=self.dir / "untuned")(self.mod))
        lookup = {t["exact_key"]: t for t in tgc.Cache(self.cache).lookup(self.mod)["tasks"]}
        final = prim_funcs(self.final)
        for t in self.apply.report["tasks"]:
            (name,) = t["functions"]
            f = final[name]
            self.assertTrue(f.attrs["tirx.is_scheduled"], name)
            self.assertEqual(f.attrs["tgc.task"], t["name"])
            self.assertFalse(unscheduled[name].attrs.get("tirx.is_scheduled", False), name)
            workload = unscheduled[name].without_attr("op_pattern").without_attr("tgc.task")
            wl = tvm.get_global_func("tvm.s_tir.meta_schedule.normalize_mod")(workload)
            self.assertEqual(str(tvm_ffi.structural_hash(wl) & 0xFFFFFFFFFFFFFFFF), t["workload_hash"])
            best = lookup[t["exact_key"]]["candidates"][0]
            self.assertEqual(best["tier"], "exact")
            sch = Schedule(wl)
            Trace.apply_json_to_schedule(best["trace"], sch)
            self.assertTrue(tvm_ffi.structural_equal(f.body, sch.mod["main"].body),
                            f"{name}: the compiled PrimFunc is not the cached trace's schedule")

    def test_the_tasks_survive_the_targets_own_pipeline(self):
        """relax.get_default_pipeline(target) runs AnnotateTIROpPattern, FuseOps and FuseTIR:
        the tasks are opaque to them, so nothing is re-fused and the schedules stay."""
        pipeline = relax.get_default_pipeline(self.target)
        ex, final = compiled(self.scheduled, self.target, relax_pipeline=pipeline)
        self.assert_matches_untuned(ex)
        ours, theirs = prim_funcs(self.scheduled), prim_funcs(final)
        self.assertEqual(set(theirs), set(ours))
        for name, f in ours.items():
            self.assertTrue(tvm_ffi.structural_equal(theirs[name].body, f.body), name)
            self.assertEqual(int(theirs[name].attrs["op_pattern"]), tgc.relax.OPAQUE)

    def test_an_onnx_model_keeps_its_signature_and_loses_the_te_functions_it_no_longer_calls(self):
        """from_onnx writes Clip as call_tir of TE PrimFuncs (maximum, minimum), which
        from_relax reads as a clip: the pass's main no longer calls them, and they go."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        from tvm.relax.frontend.onnx import from_onnx

        rng = np.random.default_rng(2)
        w = numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype("float32"), "w")
        lo = numpy_helper.from_array(np.array(0.0, "float32"), "lo")
        hi = numpy_helper.from_array(np.array(0.5, "float32"), "hi")
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
            "conv_clip",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
            [w, lo, hi])
        mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
        te = set(prim_funcs(mod))
        self.assertTrue(te, "from_onnx wrote Clip as TE functions")
        apply = tgc.relax.ApplyCache(no_cache=True, name="conv_clip", work_dir=self.dir / "onnx")
        out = apply(mod)
        self.assertFalse(te & set(prim_funcs(out)))
        self.assertEqual(apply.report["totals"]["tasks_by_tier"], {"default": 1})
        self.assertEqual([p.name for p in out["main"].params], [p.name for p in mod["main"].params])
        x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 8, 8)).astype("float32")
        want = run(tvm.compile(mod, target=apply.target), x)
        np.testing.assert_allclose(run(tvm.compile(out, target=apply.target), x), want,
                                   rtol=1e-5, atol=1e-5)
        self.assertEqual((float(want.min()), float(want.max())), (0.0, 0.5), "both bounds bite")

    def test_a_one_element_tuple_result_stays_a_tuple(self):
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType((2, 8), "float32"))
        with bb.function("main", [x]):
            with bb.dataflow():
                y = bb.emit(R.nn.relu(x))
                out = bb.emit_output(relax.Tuple([y]))
            bb.emit_func_output(out)
        mod = bb.get()
        apply = tgc.relax.ApplyCache(no_cache=True, name="tuple", work_dir=self.dir / "tuple")
        out = apply(mod)
        self.assertTrue(tvm_ffi.structural_equal(out["main"].ret_ty, mod["main"].ret_ty))
        dev = tvm.cpu()
        v = np.linspace(-1, 1, 16, dtype="float32").reshape(2, 8)
        got = relax.VirtualMachine(tvm.compile(out, target=apply.target), dev)["main"](
            tvm.runtime.tensor(v, dev))
        self.assertEqual(len(got), 1)
        np.testing.assert_array_equal(got[0].numpy(), np.maximum(v, 0))

    def test_an_unsupported_op_is_a_one_line_error(self):
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType((4, 4), "float32"))
        with bb.function("main", [x]):
            with bb.dataflow():
                out = bb.emit_output(R.cumsum(x, axis=0))
            bb.emit_func_output(out)
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.relax.ApplyCache(self.cache, "llvm")(bb.get())
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        self.assertIn("relax.cumsum", msg)
        self.assertIn("which tgc does not support", msg)

    def test_a_file_that_is_not_a_cache_is_a_one_line_error(self):
        bad = self.dir / "not-a-cache.sqlite"
        bad.write_text("these are not the records you are looking for\n")
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.relax.ApplyCache(bad, "llvm")(self.mod)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        self.assertIn(str(bad), msg)
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.relax.compile(self.mod, "llvm", cache=self.dir / "missing.sqlite")
        self.assertIn("no cache there", str(cm.exception))

    def test_the_target_is_known_after_the_pass_only(self):
        with self.assertRaises(tgc.TgcError):
            tgc.relax.ApplyCache(self.cache, "llvm").target
        self.assertEqual(self.target.kind.name, "llvm")


if __name__ == "__main__":
    unittest.main()
