"""The lowering of constants against TVM's own pipeline: a task whose constants are bound
(`relax.const`, as from_onnx binds initializers), run through LegalizeOps, FoldConstant,
FuseOps and FuseTIR, hashes exactly like the worker's lowering of the same task JSON, for a
rank-0 constant (an immediate of the TIR) on either operand of a binary op and a shape-[1]
constant (lifted to a parameter)."""

import unittest

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from tgc_worker.lower import immediate_operands, lower_task
from tgc_worker.task import parse_task

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 1})


def task_json(value: float, shape: list, op: str, const_first: bool) -> dict:
    operands = [1, 0] if const_first else [0, 1]
    return {
        "name": "t",
        "params": [{"name": "x", "shape": [1, 8], "dtype": "float32"}],
        "bindings": [
            {"op": "constant", "operands": [], "results": [{"shape": shape, "dtype": "float32"}],
             "attrs": {"value": [value], "shape": shape, "dtype": "float32"}},
            {"op": op, "operands": operands, "attrs": {},
             "results": [{"shape": [1, 8], "dtype": "float32"}]},
            {"op": "nn.relu", "operands": [2], "attrs": {},
             "results": [{"shape": [1, 8], "dtype": "float32"}]},
        ],
        "results": [3],
    }


def tvm_hash(value: float, shape: list, op: str, const_first: bool) -> str:
    """The task's MetaSchedule workload hash through TVM's own pipeline."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 8], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            c = relax.const(np.full(shape, value, dtype="float32"))
            args = (c, x) if const_first else (x, c)
            y = bb.emit(getattr(relax.op, op)(*args))
            out = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(out)
    mod = tvm.transform.Sequential([
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ])(bb.get())
    (task,) = ms.relax_integration.extract_tasks(mod, TARGET)
    return str(tvm_ffi.structural_hash(task.dispatched[0]) & 0xFFFFFFFFFFFFFFFF)


class TestLowerConstants(unittest.TestCase):
    def test_hashes_equal_tvms_pipeline(self):
        for shape in ([], [1]):
            for op in ("add", "subtract"):
                for const_first in (False, True):
                    for value in (3.0, 4.0):
                        with self.subTest(shape=shape, op=op, const_first=const_first, value=value):
                            ours = lower_task(parse_task(task_json(value, shape, op, const_first)))
                            self.assertEqual(
                                ours.structural_hash, tvm_hash(value, shape, op, const_first)
                            )

    def test_only_rank_0_operands_of_binary_ops_are_immediates(self):
        imm = lambda *a: immediate_operands(parse_task(task_json(*a)))  # noqa: E731
        self.assertEqual(imm(3.0, [], "add", False), {1: 1})
        self.assertEqual(imm(3.0, [], "subtract", True), {1: 0})
        self.assertEqual(imm(3.0, [1], "add", False), {})
        # The value reaches the TIR: two values, two workloads; lifted, one workload.
        h = lambda *a: lower_task(parse_task(task_json(*a))).structural_hash  # noqa: E731
        self.assertNotEqual(h(3.0, [], "add", False), h(4.0, [], "add", False))
        self.assertEqual(h(3.0, [1], "add", False), h(4.0, [1], "add", False))


if __name__ == "__main__":
    unittest.main()
