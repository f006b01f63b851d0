"""build_and_measure's output check (issue 12.7): inputs of order one at any depth, a
tolerance relative to the output's scale, and both directions: correct tuned schedules of a
multi-conv model pass for several seeds, a schedule that drops a reduction step fails.
A few seconds."""

import os
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from tasks import LLVM, T, conv_task, with_defaults  # noqa: E402
from worker_client import shared_worker  # noqa: E402

C, HW = 32, 28
CONV = conv_task("fused_conv2d_relu", hw=HW, c=C, tail="relu")
# three convs, 32 channels, 28x28, weights as graph inputs: the model of the issue
MODULE = {
    "params": [dict(name="x", **T([1, C, HW, HW]))]
    + [dict(name=f"w{i}", **T([C, C, 3, 3])) for i in range(3)],
    "tasks": [CONV],
    "calls": [
        {"task": CONV["name"], "args": [0, 1]},  # value 4
        {"task": CONV["name"], "args": [4, 2]},  # 5
        {"task": CONV["name"], "args": [5, 3]},  # 6
    ],
    "results": [6],
}


def spec_of(module):
    from tgc_worker.measure import parse_module

    return parse_module(module)


def convs_f64(inputs):
    """MODULE in float64: three 3x3 pad-1 convs with relu."""
    from numpy.lib.stride_tricks import sliding_window_view

    y = inputs[0].astype("float64")
    for w in inputs[1:]:
        win = sliding_window_view(np.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
        y = np.maximum(np.einsum("nchwij,ocij->nohw", win, w.astype("float64")), 0.0)
    return y


class TestInputsAndTolerance(unittest.TestCase):
    def test_roles_from_the_tasks(self):
        from tgc_worker.measure import input_roles

        self.assertEqual(input_roles(spec_of(MODULE)), [("data",)] + [("weight", C * 9)] * 3)
        # a weight reaching its matmul through permute_dims; a batch norm's variance
        task = with_defaults({
            "name": "t_mm_bn",
            "params": [dict(name="a", **T([4, 16])), dict(name="b", **T([8, 16])),
                       dict(name="x", **T([1, 3, 4, 4]))] + [dict(name=n, **T([3])) for n in "gbmv"],
            "bindings": [
                {"op": "permute_dims", "operands": [1], "attrs": {"axes": [1, 0]}, "results": [T([16, 8])]},
                {"op": "matmul", "operands": [0, 7], "results": [T([4, 8])]},
                {"op": "nn.batch_norm", "operands": [2, 3, 4, 5, 6], "attrs": {"axis": 1},
                 "results": [T([1, 3, 4, 4])]},
            ],
            "results": [8, 9],
        })
        module = {"params": task["params"], "tasks": [task],
                  "calls": [{"task": "t_mm_bn", "args": list(range(7))}], "results": [7, 8]}
        self.assertEqual(
            input_roles(spec_of(module)),
            [("data",), ("weight", 16), ("data",), ("data",), ("data",), ("data",), ("positive",)],
        )

    def test_tolerance_between_reassociation_and_a_dropped_step(self):
        from tgc_worker.measure import output_tolerance, reduction_lengths

        spec = spec_of(MODULE)
        self.assertEqual(reduction_lengths(spec), [C * 9] * 3)
        tol = output_tolerance(spec, "float32")
        eps = float(np.finfo("float32").eps)
        # 16 * eps * 3 * sqrt(288): well above float32 reassociation, well below 1/sqrt(288)
        self.assertAlmostEqual(tol["atol_rel"], 16 * eps * 3 * np.sqrt(288), delta=1e-9)
        self.assertLess(tol["atol_rel"], 1e-3 / 5)
        self.assertEqual(tol["rtol"], 16 * eps)
        # an elementwise model gets the floor, a very deep one the cap
        flat = dict(spec.__dict__)
        self.assertEqual(output_tolerance(type(spec)(**{**flat, "calls": []}), "float32")["atol_rel"], 64 * eps)
        deep = type(spec)(**{**flat, "calls": flat["calls"] * 1000})
        self.assertEqual(output_tolerance(deep, "float32")["atol_rel"], 1e-3)

    def test_compare_outputs(self):
        from tgc_worker.measure import compare_outputs

        tol = lambda _dt: {"atol_rel": 1e-4, "rtol": 1e-6}  # noqa: E731
        ref = np.array([0.0, 1e-7, -2.0, 0.5, np.nan], dtype="float32")
        near = ref + np.array([1.5e-4, -1.5e-4, 0, 0, 0], dtype="float32")  # 1.5e-4 < 1e-4 * 2
        r = compare_outputs([near], [ref], tol)
        self.assertTrue(r["outputs_match"], r)
        self.assertAlmostEqual(r["max_rel_err"], 1.5e-4 / 2, delta=1e-7)
        self.assertEqual(r["tolerance"], tol("float32"))
        far = ref.copy()
        far[0] = 3e-4
        r = compare_outputs([far], [ref], tol)
        self.assertFalse(r["outputs_match"])
        self.assertIn("output 0: 1 / 5 elements beyond", r["mismatch"])
        self.assertIn("worst at [0]", r["mismatch"])
        nan = ref.copy()
        nan[3] = np.nan
        r = compare_outputs([nan], [ref], tol)
        self.assertFalse(r["outputs_match"])
        self.assertEqual((r["max_abs_err"], r["max_rel_err"]), (None, None))
        ints = np.array([1, 2, 3], dtype="int64")
        self.assertFalse(compare_outputs([ints + (ints == 3)], [ints], tol)["outputs_match"])
        self.assertFalse(compare_outputs([ref], [ref[:4]], tol)["outputs_match"])


class TestBothDirections(unittest.TestCase):
    def test_sampled_schedules_pass_for_several_seeds(self):
        """Four different schedules of the conv, each on its own random inputs: all pass with
        errors far inside the bound (the old check failed 2 of 3 such runs)."""
        w = shared_worker()
        for s in range(4):
            traces = w.call("sample", {"task": CONV, "target": LLVM, "count": 1, "seed": 10 + s})["traces"]
            r = w.call("build_and_measure", {"module": MODULE, "records": {CONV["name"]: traces},
                                             "target": LLVM, "repeat": 1, "number": 1, "seed": s})
            self.assertEqual(r["applied"], {CONV["name"]: "exact"})
            self.assertTrue(r["outputs_match"], r)
            self.assertNotIn("mismatch", r)
            self.assertGreater(r["max_abs_err"], 0.0, "a schedule reorders the sums")
            self.assertLess(r["max_rel_err"], r["tolerance"]["atol_rel"] / 10, r)
        # with no tolerance the same reassociation is a mismatch; the old atol is refused
        r = w.call("build_and_measure", {"module": MODULE, "records": {CONV["name"]: traces},
                                         "target": LLVM, "repeat": 1, "number": 1, "seed": 0,
                                         "atol_rel": 0, "rtol": 0})
        self.assertFalse(r["outputs_match"])
        self.assertIn("elements beyond 0.00e+00 * max|ref|", r["mismatch"])
        resp = w.request("build_and_measure", {"module": MODULE, "records": {}, "target": LLVM, "repeat": 1,
                                                "number": 1, "seed": 0, "atol": 1e-4})
        self.assertEqual(resp["error"]["kind"], "bad_params")
        self.assertIn("atol_rel", resp["error"]["message"])

    def test_a_dropped_reduction_step_fails(self):
        """What a wrong schedule of the middle conv would compute, run on the check's own
        inputs: one k-tile of input channels lost, one kernel tap lost, one product of 288
        lost. Each is outside the tolerance; the correct model is inside it."""
        import tvm
        from tvm import relax
        from tgc_worker.lower import lower_module
        from tgc_worker.measure import (
            _build, _outputs, check_inputs, compare_outputs, model_relax_module, output_tolerance,
        )

        spec = spec_of(MODULE)
        target = tvm.target.Target({"kind": "llvm", "num-cores": 2}, host="llvm")
        vm = relax.VirtualMachine(_build(lower_module(model_relax_module(spec)), target), tvm.cpu())

        def run(inputs):
            return _outputs(vm["main"](*[tvm.runtime.tensor(a) for a in inputs]))

        tol = lambda dt: output_tolerance(spec, dt)  # noqa: E731
        for seed in range(3):
            inputs = check_inputs(spec, seed)
            ref = run(inputs)
            scale = float(np.abs(ref[0]).max())
            self.assertTrue(0.1 < scale < 10, f"activations of order one, not hundreds: {scale}")
            # all of float32's rounding and ordering at once: the model in float64 by numpy
            r64 = compare_outputs([convs_f64(inputs).astype("float32")], ref, tol)
            self.assertTrue(r64["outputs_match"], r64)
            self.assertLess(r64["max_rel_err"], r64["tolerance"]["atol_rel"] / 10, r64)
            for what, cut in (("k-tile", np.s_[:, 24:, :, :]), ("tap", np.s_[:, :, 2, 2]),
                              ("one product", np.s_[:, 31, 2, 2])):
                wrong = [a.copy() for a in inputs]
                wrong[2][cut] = 0.0
                r = compare_outputs(run(wrong), ref, tol)
                self.assertFalse(r["outputs_match"], f"seed {seed}, dropped {what}: {r}")
                self.assertGreater(r["max_rel_err"], 10 * r["tolerance"]["atol_rel"], what)


if __name__ == "__main__":
    unittest.main()
