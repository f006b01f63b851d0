"""The deployable artifact (issue 14): build_and_measure's and build's `export` writes a plain
TVM library.
A small model is built with schedules (sampled traces on its tasks, one transferred from a task
of another shape through its source workload) and untuned, to two libraries; a fresh Python
process with stock TVM only (no tgc code) loads both and compares their outputs on the same
random inputs. `bench` times a library and an untuned build. A few tens of seconds."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import onnx_models  # noqa: E402
from tasks import LLVM, T, conv_task, matmul_task, with_defaults  # noqa: E402
from worker_client import shared_worker  # noqa: E402

C, HW = 8, 12
RES = conv_task("fused_conv2d_add_relu", hw=HW, c=C, tail="add_relu")
RELU = conv_task("fused_conv2d_relu", hw=HW, c=C, tail="relu")
# value numbering: x 0, w1 1, w2 2; relu block 3; residual block 4
MODULE = {
    "params": [dict(name="x", **T([1, C, HW, HW])), dict(name="w1", **T([C, C, 3, 3])),
               dict(name="w2", **T([C, C, 3, 3]))],
    "tasks": [RELU, RES],
    "calls": [
        {"task": RELU["name"], "args": [0, 1]},
        {"task": RES["name"], "args": [3, 2, 0]},
    ],
    "results": [4],
}

# Loads two libraries with stock TVM and prints the largest difference over the scale.
STOCK = r"""
import json, sys
import numpy as np
import tvm
from tvm import relax
a, b, inputs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
rng = np.random.default_rng(0)
arrays = [rng.uniform(-1, 1, size=i["shape"]).astype(i["dtype"]) for i in inputs]
outs = []
for path in (a, b):
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    outs.append(vm["main"](*[tvm.runtime.tensor(x, tvm.cpu()) for x in arrays]).numpy())
print(json.dumps({"shape": list(outs[0].shape),
                  "rel": float(np.max(np.abs(outs[0] - outs[1])) / np.max(np.abs(outs[1])))}))
"""

# Loads a library with packed weights and one without, stock TVM only: the packed one's
# main_transform_params packs the weights once, its main takes the data input and them.
STOCK_PACKED = r"""
import json, sys
import numpy as np
import tvm
from tvm import relax
packed_lib, plain_lib, inputs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
rng = np.random.default_rng(0)
dev = tvm.cpu()
x, w1, w2 = [tvm.runtime.tensor(rng.uniform(-1, 1, size=i["shape"]).astype(i["dtype"]), dev) for i in inputs]
vm = relax.VirtualMachine(tvm.runtime.load_module(packed_lib), dev)
packed = vm["main_transform_params"]([w1, w2])
shapes = [list(packed[k].shape) for k in range(len(packed))]
a = vm["main"](x, *[packed[k] for k in range(len(packed))]).numpy()
b = relax.VirtualMachine(tvm.runtime.load_module(plain_lib), dev)["main"](x, w1, w2).numpy()
print(json.dumps({"packed_shapes": shapes, "rel": float(np.max(np.abs(a - b)) / np.max(np.abs(b)))}))
"""


def write_onnx(path: str, hw: int = HW) -> None:
    """MODULE as an ONNX file."""
    onnx_models.blocks(path, hw, C)


class TestArtifact(unittest.TestCase):
    def test_exported_libraries_load_in_stock_tvm_and_agree(self):
        w = shared_worker()
        # a schedule of the residual task itself, and one of a 16x16 relu task transferred
        res_trace = w.call("sample", {"task": RES, "target": LLVM, "count": 1, "seed": 1})["traces"][0]
        other = conv_task("fused_conv2d_relu_16", hw=16, c=C, tail="relu")
        other_trace = w.call("sample", {"task": other, "target": LLVM, "count": 1, "seed": 1})["traces"][0]
        other_wl = w.call("lower", {"task": other, "target": LLVM})["workload_json"]
        # a matmul's trace names blocks no conv task has: it cannot replay there
        unrelated = w.call(
            "sample", {"task": with_defaults(matmul_task("mm")), "target": LLVM, "count": 1, "seed": 1}
        )["traces"][0]
        with tempfile.TemporaryDirectory(prefix="tgc-artifact-") as d:
            tuned, untuned = os.path.join(d, "tuned.so"), os.path.join(d, "untuned.so")
            records = {
                RES["name"]: [res_trace],
                # transferred from the 16x16 task through its workload
                RELU["name"]: [{"trace": other_trace, "source_workload": other_wl}],
            }
            r = w.call("build_and_measure", {"module": MODULE, "records": records,
                                             "target": LLVM, "repeat": 2, "number": 1, "seed": 0, "export": tuned})
            self.assertTrue(r["outputs_match"], r)
            self.assertEqual(r["applied"][RES["name"]], "exact", r)
            self.assertIn(r["applied"][RELU["name"]], ("repaired", "anchor"), r)
            self.assertEqual(r["failed"], {RES["name"]: 0, RELU["name"]: 0})
            self.assertEqual([i["name"] for i in r["inputs"]], ["x", "w1", "w2"])
            self.assertEqual(r["inputs"][0]["role"], "data")
            self.assertEqual(r["inputs"][1], {"name": "w1", "shape": [C, C, 3, 3],
                                              "dtype": "float32", "role": "weight",
                                              "fan_in": C * 9})
            # `build`: the same build and export, with nothing else built or run
            u = w.call("build", {"module": MODULE, "records": {}, "target": LLVM,
                                 "export": untuned})
            self.assertEqual(set(u), {"applied", "failed", "scheduled", "inputs", "tasks",
                                      "wall_s"}, u)
            self.assertEqual(set(u["applied"].values()), {None})
            self.assertEqual(u["inputs"], r["inputs"])
            self.assertEqual(u["tasks"], r["tasks"])
            self.assertTrue(os.path.isfile(tuned) and os.path.isfile(untuned))
            self.assertEqual([f for f in os.listdir(d) if f.endswith(".tmp.so")], [])

            # a fresh interpreter, stock TVM only: this package is not on its path
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            out = subprocess.run(
                [sys.executable, "-c", STOCK, tuned, untuned, json.dumps(r["inputs"])],
                capture_output=True, text=True, env=env, cwd=d, check=False,
            )
            self.assertEqual(out.returncode, 0, out.stderr)
            got = json.loads(out.stdout)
            self.assertEqual(got["shape"], [1, C, HW, HW])
            self.assertLess(got["rel"], 1e-4, got)

            # a record that does not replay is counted, and the next one applied
            r2 = w.call("build_and_measure", {
                "module": MODULE, "target": LLVM, "repeat": 1, "number": 1, "seed": 0,
                "records": {RES["name"]: [unrelated, res_trace]}})
            self.assertEqual(r2["failed"][RES["name"]], 1, r2)
            self.assertEqual(r2["applied"][RES["name"]], "exact", r2)

            onnx_path = os.path.join(d, "blocks.onnx")
            write_onnx(onnx_path)
            b = w.call("bench", {"library": tuned, "inputs": r["inputs"], "target": LLVM,
                                 "repeat": 5, "number": 1, "seed": 0, "untuned": MODULE,
                                 "untuned_repeat": 4, "onnx": onnx_path})
            threads = w.call("hello")["runtime_threads"]
            import onnxruntime

            self.assertEqual(b["onnxruntime"]["version"], onnxruntime.__version__)
            self.assertEqual(b["untuned_latency_ms"]["repeat"], 4)
            for lat in (b["latency_ms"], b["untuned_latency_ms"], b["onnxruntime"]["latency_ms"]):
                self.assertIn(lat["repeat"], (4, 5))
                self.assertEqual(lat["threads"], threads)
                self.assertLessEqual(lat["min"], lat["p10"])
                self.assertLessEqual(lat["p10"], lat["median"])
                self.assertLessEqual(lat["median"], lat["p90"])
                self.assertLessEqual(lat["p90"], lat["max"])
                self.assertGreater(lat["min"], 0)
            b = w.call("bench", {"library": tuned, "inputs": r["inputs"], "target": LLVM,
                                 "repeat": 3, "number": 1, "seed": 0})
            self.assertIsNone(b["untuned_latency_ms"])
            self.assertIsNone(b["onnxruntime"])
            # an ONNX file that is not the library's model, an untuned build without its runs
            other = os.path.join(d, "other.onnx")
            write_onnx(other, hw=HW + 1)
            bad = w.request("bench", {"library": tuned, "inputs": r["inputs"], "target": LLVM,
                                      "repeat": 1, "number": 1, "seed": 0, "onnx": other})
            self.assertEqual(bad["error"]["kind"], "bad_params", bad)
            self.assertIn(f"{other}: input 0 (x) is [1, {C}, {HW + 1}, {HW + 1}] float32", bad["error"]["message"])
            bad = w.request("bench", {"library": tuned, "inputs": r["inputs"], "target": LLVM,
                                      "repeat": 1, "number": 1, "seed": 0, "untuned": MODULE})
            self.assertEqual(bad["error"]["kind"], "bad_params", bad)
            self.assertIn("untuned_repeat", bad["error"]["message"])

    def test_packed_weights_are_packed_once_by_main_transform_params(self):
        w = shared_worker()
        relu_p, res_p = dict(RELU, layout_free=[1]), dict(RES, layout_free=[1])
        plain, packed = (w.call("lower", {"task": t, "target": LLVM}) for t in (RELU, relu_p))
        # a layout-free weight is another workload (records of one do not serve the other)
        self.assertNotEqual(plain["structural_hash"], packed["structural_hash"])
        self.assertIn("layout_free_buffers", packed["workload_json"])
        self.assertNotIn("layout_free_buffers", plain["workload_json"])
        bad = w.request("lower", {"task": dict(RELU, layout_free=[2]), "target": LLVM})
        self.assertEqual(bad["error"]["kind"], "bad_task", bad)
        self.assertIn("layout_free: [2] is not a list of distinct param indices below 2", bad["error"]["message"])
        # MetaSchedule's RewriteLayout packs the weight in every sampled schedule
        traces = {t["name"]: w.call("sample", {"task": t, "target": LLVM, "count": 1, "seed": 1})["traces"][0]
                  for t in (relu_p, res_p)}
        for tr in traces.values():
            self.assertIn("meta_schedule.layout_rewrite_preproc", json.dumps(tr))
        module = dict(MODULE, tasks=[relu_p, res_p])
        with tempfile.TemporaryDirectory(prefix="tgc-packed-") as d:
            lib, plain_lib = os.path.join(d, "packed.so"), os.path.join(d, "plain.so")
            r = w.call("build_and_measure", {"module": module, "records": {k: [v] for k, v in traces.items()},
                                             "target": LLVM, "repeat": 2, "number": 1, "seed": 0, "export": lib})
            self.assertTrue(r["outputs_match"], r)
            self.assertEqual(set(r["applied"].values()), {"exact"}, r)
            self.assertEqual([i.get("packed", False) for i in r["inputs"]], [False, True, True])
            w.call("build", {"module": MODULE, "records": {}, "target": LLVM, "export": plain_lib})
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            out = subprocess.run(
                [sys.executable, "-c", STOCK_PACKED, lib, plain_lib, json.dumps(r["inputs"])],
                capture_output=True, text=True, env=env, cwd=d, check=False,
            )
            self.assertEqual(out.returncode, 0, out.stderr)
            got = json.loads(out.stdout)
            self.assertLess(got["rel"], 1e-4, got)
            # packed: each weight in another shape than the model's [C, C, 3, 3]
            self.assertEqual(len(got["packed_shapes"]), 2, got)
            self.assertNotIn([C, C, 3, 3], got["packed_shapes"], got)
            # `bench` packs the weights once and times main; the untuned build takes them as they are
            b = w.call("bench", {"library": lib, "inputs": r["inputs"], "target": LLVM, "repeat": 2,
                                 "number": 1, "seed": 0, "untuned": module, "untuned_repeat": 2})
            self.assertGreater(b["latency_ms"]["min"], 0)
            self.assertGreater(b["untuned_latency_ms"]["min"], 0)
            bad = w.request("bench", {"library": lib, "inputs": [dict(i, packed="yes") for i in r["inputs"]],
                                      "target": LLVM, "repeat": 1, "number": 1, "seed": 0})
            self.assertEqual(bad["error"]["kind"], "bad_params", bad)
            self.assertIn("inputs[0]: packed must be true or false", bad["error"]["message"])

    def test_bad_export_and_bench_params_are_one_line_errors(self):
        w = shared_worker()
        r = w.request("build_and_measure", {"module": MODULE, "records": {}, "target": LLVM,
                                            "repeat": 1, "number": 1, "seed": 0,
                                            "export": "/nonexistent/dir/m.so"})
        self.assertEqual(r["error"]["kind"], "bad_params", r)
        self.assertIn("/nonexistent/dir", r["error"]["message"])
        r = w.request("build", {"module": MODULE, "records": {}, "target": LLVM,
                                "export": "/nonexistent/dir/m.so"})
        self.assertEqual(r["error"]["kind"], "bad_params", r)
        self.assertIn("/nonexistent/dir", r["error"]["message"])
        r = w.request("build", {"module": MODULE, "records": {}, "target": LLVM})
        self.assertEqual(r["error"]["kind"], "bad_params", r)
        self.assertIn("export", r["error"]["message"])
        r = w.request("bench", {"library": "/nonexistent.so", "inputs": [], "target": LLVM,
                                "repeat": 1, "number": 1, "seed": 0})
        self.assertEqual(r["error"]["kind"], "bad_params", r)
        r = w.request("bench", {"library": __file__, "inputs": [{"name": "x", "shape": [1],
                                "dtype": "float32", "role": "weight"}], "target": LLVM,
                                "repeat": 1, "number": 1, "seed": 0})
        self.assertEqual(r["error"]["kind"], "bad_params", r)
        self.assertIn("fan_in", r["error"]["message"])
        for perm in ([2, 3, 1], [0, 0, 1, 2], "nhwc", [True, 0, 2, 3]):
            r = w.request("bench", {"library": __file__, "inputs": [
                {"name": "w", "shape": [3, 3, 4, 4], "dtype": "float32", "role": "weight",
                 "fan_in": 36, "permutation": perm}], "target": LLVM,
                "repeat": 1, "number": 1, "seed": 0})
            self.assertEqual(r["error"]["kind"], "bad_params", r)
            self.assertIn("inputs[0]: permutation must list the 4 axes", r["error"]["message"])


if __name__ == "__main__":
    unittest.main()
