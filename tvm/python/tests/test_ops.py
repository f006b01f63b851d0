"""The op table: read from the Rust registry's op_schema.json, lowerings keyed by op name, and
attributes checked, never defaulted (fast: no tuning, no measuring)."""

import copy
import json
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from tasks import LLVM, T, conv_task, with_defaults  # noqa: E402
from worker_client import shared_worker  # noqa: E402

from tgc_worker.errors import WorkerError  # noqa: E402
from tgc_worker.ops import (  # noqa: E402
    LOWERINGS,
    OPS,
    SCHEMA_PATH,
    OpSchemaError,
    load_ops,
)
from tgc_worker.task import parse_task  # noqa: E402


def _schema():
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def _reshape_task(attrs):
    return {
        "name": "r",
        "params": [dict(name="x", **T([2, 8]))],
        "bindings": [{"op": "reshape", "operands": [0], "attrs": attrs, "results": [T([16])]}],
        "results": [1],
    }


class TestOpSchema(unittest.TestCase):
    def test_the_table_is_the_schema(self):
        schema = _schema()
        self.assertEqual(list(OPS), [o["name"] for o in schema["ops"]])
        for o in schema["ops"]:
            spec = OPS[o["name"]]
            self.assertEqual(
                (spec.min_operands, spec.max_operands, spec.inlines_scalar_constant),
                (o["min_operands"], o["max_operands"], o["inlines_scalar_constant"]),
                o["name"],
            )
            self.assertEqual(
                [(a.name, a.kind, a.presence, a.default) for a in spec.attrs.values()],
                [(a["name"], a["kind"], a["presence"], a.get("default")) for a in o["attrs"]],
                o["name"],
            )
        # a few facts of the registry, so that a schema that lost them fails here too
        self.assertIsNone(OPS["concat"].max_operands)
        self.assertTrue(OPS["add"].inlines_scalar_constant)
        self.assertEqual(OPS["nn.conv2d"].attrs["kernel_layout"].default, "OIHW")
        self.assertEqual(OPS["nn.max_pool2d"].attrs["pool_size"].presence, "required")
        self.assertEqual(OPS["nn.conv2d"].attrs["out_dtype"].presence, "optional")

    def test_every_op_has_a_lowering_and_every_lowering_an_op(self):
        schema = _schema()
        for name, spec in OPS.items():
            self.assertEqual(spec.lower is None, name == "constant", name)
        without = dict(LOWERINGS)
        del without["tile"]
        with self.assertRaises(OpSchemaError) as e:
            load_ops(schema, without)
        self.assertIn("ops without a lowering in tgc_worker/ops.py: tile", str(e.exception))
        extra = dict(LOWERINGS, **{"nn.frobnicate": LOWERINGS["exp"]})
        with self.assertRaises(OpSchemaError) as e:
            load_ops(schema, extra)
        self.assertIn("lowerings of ops the schema lacks: nn.frobnicate", str(e.exception))
        self.assertIn("TGC_BLESS=1 cargo test -p tgc-tvm op_schema", str(e.exception))
        self.assertNotIn("\n", str(e.exception))

    def test_a_malformed_schema_does_not_load(self):
        for path, value, says in [
            ("kind", "tensor", "kind 'tensor'"),
            ("presence", "sometimes", "presence 'sometimes'"),
            ("default", "1", "default: expected int_list"),
        ]:
            schema = _schema()
            conv = next(o for o in schema["ops"] if o["name"] == "nn.conv2d")
            conv["attrs"][0][path] = value  # strides
            with self.subTest(path=path), self.assertRaises(OpSchemaError) as e:
                load_ops(schema, LOWERINGS)
            self.assertIn("nn.conv2d, attribute 'strides'", str(e.exception))
            self.assertIn(says, str(e.exception))
        schema = _schema()
        pool = next(o for o in schema["ops"] if o["name"] == "nn.max_pool2d")
        pool["attrs"][0]["default"] = [2, 2]  # pool_size is required: a default contradicts it
        with self.assertRaises(OpSchemaError):
            load_ops(schema, LOWERINGS)


class TestAttributes(unittest.TestCase):
    def assertBadTask(self, task, *fragments):
        with self.assertRaises(WorkerError) as e:
            parse_task(task)
        self.assertEqual(e.exception.kind, "bad_task")
        for f in fragments:
            self.assertIn(f, e.exception.message)
        self.assertNotIn("\n", e.exception.message)

    def test_attributes_arrive_as_sent_and_nothing_is_filled_in(self):
        task = conv_task("c")
        sent = task["bindings"][0]["attrs"]
        got = parse_task(task).bindings[0].attrs
        # exactly what was sent, plus None for the absent optional ones
        self.assertEqual(got, dict(sent, out_layout=None, out_dtype=None))
        # a non-default value is kept, an optional one given is passed on
        task["bindings"][0]["attrs"].update(groups=2, out_dtype="float16")
        got = parse_task(task).bindings[0].attrs
        self.assertEqual((got["groups"], got["out_dtype"]), (2, "float16"))

    def test_a_missing_defaulted_attribute_is_a_bad_task(self):
        task = conv_task("c")
        del task["bindings"][0]["attrs"]["dilation"]
        self.assertBadTask(task, "bindings[0] (nn.conv2d)", "'dilation'", "defaulted")
        # even when every attribute is missing
        task["bindings"][0].pop("attrs")
        self.assertBadTask(task, "bindings[0] (nn.conv2d)", "'strides'")

    def test_a_missing_required_attribute_is_a_bad_task(self):
        self.assertBadTask(_reshape_task({}), "bindings[0] (reshape)", "required", "'shape'")

    def test_an_unknown_attribute_is_a_bad_task(self):
        self.assertBadTask(
            _reshape_task({"shape": [16], "shap": [16]}), "bindings[0] (reshape)", "'shap'"
        )

    def test_null_and_wrong_kinds_are_bad_tasks(self):
        self.assertBadTask(_reshape_task({"shape": None}), "bindings[0] (reshape)", "'shape' is null")
        self.assertBadTask(
            _reshape_task({"shape": [16.0]}), "bindings[0] (reshape)", "'shape'", "expected int_list"
        )
        # a JSON int where a float is declared is the float
        clip = {
            "name": "c",
            "params": [dict(name="x", **T([4]))],
            "bindings": [{"op": "clip", "operands": [0], "attrs": {"min": 0, "max": 6}, "results": [T([4])]}],
            "results": [1],
        }
        got = parse_task(clip).bindings[0].attrs
        self.assertEqual((got["min"], got["max"]), (0.0, 6.0))
        self.assertIsInstance(got["min"], float)
        # infinities arrive spelled as strings; any other string is a wrong kind
        clip["bindings"][0]["attrs"] = {"min": "-inf", "max": "inf", "tensor_bounds": True}
        got = parse_task(clip).bindings[0].attrs
        self.assertEqual((got["min"], got["max"], got["tensor_bounds"]), (-math.inf, math.inf, True))
        clip["bindings"][0]["attrs"] = {"min": "-infinity", "max": 6}
        self.assertBadTask(clip, "bindings[0] (clip)", "'min'", "expected float")

    def test_with_defaults_fills_what_the_rust_client_fills(self):
        # the test helper mirrors tgc_tvm::task_json: defaulted attributes only, given ones kept
        task = with_defaults(
            {
                "name": "p",
                "params": [dict(name="x", **T([1, 4, 8, 8]))],
                "bindings": [
                    {"op": "nn.max_pool2d", "operands": [0], "attrs": {"pool_size": [2, 2], "strides": [2, 2]},
                     "results": [T([1, 4, 4, 4])]},
                ],
                "results": [1],
            }
        )
        self.assertEqual(
            task["bindings"][0]["attrs"],
            {"pool_size": [2, 2], "strides": [2, 2], "padding": [0, 0, 0, 0], "dilation": [1, 1],
             "ceil_mode": False, "layout": "NCHW"},
        )

    def test_the_worker_answers_a_missing_attribute_with_one_line(self):
        w = shared_worker()
        task = copy.deepcopy(conv_task("fused_conv2d_add_relu"))
        del task["bindings"][0]["attrs"]["kernel_layout"]
        r = w.request("lower", {"task": task, "target": LLVM})
        self.assertEqual((r["error"]["kind"], r["error"]["task"]), ("bad_task", "fused_conv2d_add_relu"))
        self.assertIn("bindings[0] (nn.conv2d): missing defaulted attribute 'kernel_layout'", r["error"]["message"])
        self.assertNotIn("\n", r["error"]["message"])
        self.assertIn("structural_hash", w.call("lower", {"task": conv_task("c"), "target": LLVM}))


if __name__ == "__main__":
    unittest.main()
