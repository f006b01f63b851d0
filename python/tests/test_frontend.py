"""tgc.from_relax: Relax modules from TVM's frontends give tgc's tasks and keys."""

from __future__ import annotations

import unittest
import warnings

import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.relax.frontend import nn
from tvm.relax.frontend.onnx import from_onnx
from tvm.script import relax as R

import tgc
from support import bundled_models, cli_json, task_signature


def import_onnx(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # from_onnx warns about every renamed input
        return from_onnx(onnx.load(str(path)))


class TestOnnxModels(unittest.TestCase):
    """For every bundled model, from_relax(from_onnx(model)) has the tasks and exact keys
    `tgc tasks model.onnx --json` prints."""

    def test_models_are_bundled(self):
        self.assertGreaterEqual(len(bundled_models()), 5)

    def test_same_tasks_and_keys_as_the_cli(self):
        for path in bundled_models():
            with self.subTest(model=path.name):
                want = cli_json("tasks", str(path), "--json")
                got = tgc.tasks(tgc.from_relax(import_onnx(path), name=path.stem))
                self.assertEqual(got["schema"], want["schema"])
                self.assertEqual(got["num_tasks"], want["num_tasks"])
                self.assertEqual(got["num_occurrences"], want["num_occurrences"])
                self.assertEqual([t["exact_key"] for t in got["tasks"]],
                                 [t["exact_key"] for t in want["tasks"]])
                self.assertEqual([task_signature(t) for t in got["tasks"]],
                                 [task_signature(t) for t in want["tasks"]])


def relax_module(build):
    """A Relax module with `main(x: 1x3x8x8)` whose body `build(bb, x)` emits."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 3, 8, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(build(bb, x))
        bb.emit_func_output(out)
    return bb.get()


class TestRelaxOps(unittest.TestCase):
    def test_ops_map_onto_the_registry(self):
        def build(bb, x):
            w = relax.const(np.ones((4, 3, 3, 3), "float32"))
            y = bb.emit(R.nn.conv2d(x, w, padding=[1, 1, 1, 1]))
            y = bb.emit(R.clip(y, 0.0, 6.0))
            y = bb.emit(R.add(y, relax.const(1.0, "float32")))
            y = bb.emit(R.reshape(y, (1, 256)))
            return R.nn.softmax(y, axis=-1)

        m = tgc.from_relax(relax_module(build), name="small")
        text = m.text()
        self.assertIn("nn.conv2d(", text)
        self.assertIn("clip(", text)
        self.assertIn("{min = 0.0, max = 6.0}", text)
        self.assertIn("reshape(", text)
        self.assertIn("{shape = [1, 256]}", text)
        # the weight (108 elements) is a parameter; the scalar a constant binding
        self.assertIn("tensor<4x3x3x3xf32>", text.splitlines()[1])
        self.assertIn("constant() {value = [1.0], shape = [], dtype = \"float32\"}", text)
        tasks = tgc.tasks(m)
        self.assertEqual(tasks["num_occurrences"], sum(t["occurrences"] for t in tasks["tasks"]))
        self.assertEqual(tasks["tasks"][0]["ops"][:2], ["nn.conv2d", "clip"])

    def test_unsupported_op_names_the_op_and_the_binding(self):
        def build(bb, x):
            y = bb.emit(R.nn.relu(x))
            return R.cumsum(y, axis=1)

        with self.assertRaises(tgc.TgcError) as cm:
            tgc.from_relax(relax_module(build))
        msg = str(cm.exception)
        self.assertIn("relax.cumsum", msg)
        self.assertIn("binding 'gv'", msg)
        self.assertNotIn("\n", msg)

    def test_dynamic_shapes_are_refused(self):
        bb = relax.BlockBuilder()
        n = tvm.tirx.Var("n", "int64")
        x = relax.Var("x", relax.TensorType((n, 4), "float32"))
        with bb.function("main", [x]):
            bb.emit_func_output(bb.emit(R.nn.relu(x)))
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.from_relax(bb.get())
        self.assertIn("static shapes only", str(cm.exception))


class SmallCNN(nn.Module):
    def __init__(self):
        self.conv1 = nn.Conv2D(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2D(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2D(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        x = nn.relu(self.conv1(x))
        x = nn.relu(self.conv2(x))
        x = nn.relu(self.conv3(x))
        return self.fc(nn.op.reshape(x, (1, 8 * 16 * 16)))


class Block(nn.Module):
    """A pre-norm transformer block: attention written with matmul and softmax, then an MLP."""

    def __init__(self, d: int, heads: int):
        self.d, self.heads = d, heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d, h = 1, 16, self.d, self.heads
        q, k, v = nn.op.split(self.qkv(self.ln1(x)), 3, axis=2)
        heads = lambda t: nn.op.permute_dims(nn.op.reshape(t, (b, s, h, d // h)), [0, 2, 1, 3])
        q, k, v = heads(q), heads(k), heads(v)
        scores = nn.op.matmul(q, nn.op.permute_dims(k, [0, 1, 3, 2])) * (1.0 / (d // h) ** 0.5)
        att = nn.op.matmul(nn.op.softmax(scores, axis=-1), v)
        att = nn.op.reshape(nn.op.permute_dims(att, [0, 2, 1, 3]), (b, s, d))
        x = x + self.proj(att)
        return x + self.down(nn.op.gelu(self.up(self.ln2(x))))


class TwoBlocks(nn.Module):
    def __init__(self):
        self.blocks = nn.ModuleList([Block(32, 4), Block(32, 4)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


class TestNnModels(unittest.TestCase):
    """Models written with tvm.relax.frontend.nn (as MLC-LLM writes them)."""

    def test_small_cnn(self):
        mod, _ = SmallCNN().export_tvm(
            spec={"forward": {"x": nn.spec.Tensor((1, 3, 16, 16), "float32")}})
        # export_tvm names the function `forward`, the module's only Relax function
        self.assertEqual(tgc.from_relax(mod).text(), tgc.from_relax(mod, func="forward").text())
        tasks = tgc.tasks(mod, name="cnn")
        convs = [t for t in tasks["tasks"] if t["ops"][0] == "nn.conv2d"]
        # conv + bias + relu fuse; conv2 and conv3 are the same task
        self.assertEqual(len(convs), 2, tasks)
        self.assertEqual(sorted(t["occurrences"] for t in convs), [1, 2])
        for t in convs:
            self.assertIn("nn.relu", t["ops"])
            self.assertIn("add", t["ops"])
        self.assertTrue(any("matmul" in t["ops"] for t in tasks["tasks"]))

    def test_transformer_blocks(self):
        mod, _ = TwoBlocks().export_tvm(
            spec={"forward": {"x": nn.spec.Tensor((1, 16, 32), "float32")}})
        tasks = tgc.tasks(tgc.from_relax(mod, func="forward", name="blocks"))
        with self.assertRaises(tgc.TgcError) as cm:
            tgc.from_relax(mod, func="backward")
        self.assertIn("backward", str(cm.exception))
        ops = {op for t in tasks["tasks"] for op in t["ops"]}
        for op in ("nn.layer_norm", "matmul", "nn.softmax", "nn.gelu", "split", "permute_dims"):
            self.assertIn(op, ops)
        # the two blocks are the same computation: every task occurs an even number of times
        self.assertTrue(all(t["occurrences"] % 2 == 0 for t in tasks["tasks"]), tasks)


if __name__ == "__main__":
    unittest.main()
