"""Protocol, error paths, lowering and the op table (fast: no tuning, no measuring)."""

import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from tasks import CUDA, LLVM, T, conv_task, matmul_task, with_defaults  # noqa: E402
from worker_client import WorkerProcess, shared_worker  # noqa: E402
from tgc_worker import PROTOCOL_VERSION  # noqa: E402


class TestProtocol(unittest.TestCase):
    def test_hello(self):
        r = shared_worker().call("hello")
        self.assertEqual(r["protocol"], 16)
        self.assertTrue(r["tvm"].startswith("0.27"), r["tvm"])
        self.assertTrue(r["tvm_ffi"])
        self.assertIn("llvm", r["targets"])
        self.assertIn("cuda", r["targets"])
        self.assertIn("cpu", r["devices"])
        # the LLVM this TVM links, as TVM reports it: part of the cache's toolchain
        import tvm

        self.assertEqual(r["llvm"], str(tvm.target.codegen.llvm_version_major()))
        self.assertIn("target", r["methods"])
        self.assertIn("prepare_tuning", r["methods"])

    def test_runtime_threads_default_to_the_physical_cores(self):
        # TVM alone takes half the hardware threads on x86: one on a 2-vCPU VM
        from tgc_worker.tvmutil import THREADS_ENV, physical_cores

        bare = {k: v for k, v in os.environ.items() if k not in THREADS_ENV}
        for env, want in ((bare, physical_cores()), ({**bare, "TVM_NUM_THREADS": "1"}, 1),
                          ({**bare, "OMP_NUM_THREADS": "1"}, 1)):
            w = WorkerProcess(env=env)
            try:
                self.assertEqual(w.call("hello")["runtime_threads"], want, env)
            finally:
                self.assertEqual(w.close(), 0)

    def test_target_spellings_have_one_canonical_form(self):
        w = shared_worker()
        spellings = [
            {"kind": "llvm", "num-cores": 2},
            {"num-cores": 2, "kind": "llvm", "keys": ["cpu"]},
            {"tag": "", "num-cores": 2, "kind": "llvm", "keys": ["cpu"]},
        ]
        results = [w.call("target", {"target": t}) for t in spellings]
        canonical = results[0]["canonical"]
        for t, r in zip(spellings, results):
            self.assertEqual(r["canonical"], canonical, t)
            self.assertEqual(r["kind"], "llvm")
        # TVM's defaults are spelled out, keys are sorted, and the form is a fixed point
        self.assertEqual(canonical["keys"], ["cpu"])
        self.assertEqual(canonical["num-cores"], 2)
        self.assertEqual(list(canonical), sorted(canonical))
        self.assertEqual(w.call("target", {"target": canonical})["canonical"], canonical)
        # what MetaSchedule stores in its tuning records for the same target
        import tvm
        from tgc_worker.tvmutil import plain_json

        stock = plain_json(tvm.target.Target({"kind": "llvm", "num-cores": 2}).export())
        self.assertEqual(canonical, stock)
        # other targets stay other targets
        other = w.call("target", {"target": {"kind": "llvm", "num-cores": 4}})["canonical"]
        self.assertNotEqual(other, canonical)
        cuda = w.call("target", {"target": CUDA})
        self.assertEqual(cuda["kind"], "cuda")
        self.assertIn("max_shared_memory_per_block", cuda["canonical"])
        # an llvm target without num-cores gets this machine's, as in every other method
        bare = w.call("target", {"target": {"kind": "llvm"}})["canonical"]
        self.assertIsInstance(bare["num-cores"], int)
        for bad in ("llvm", {"kind": "llvm", "frob": 1}):
            r = w.request("target", {"target": bad})
            self.assertEqual(r["error"]["kind"], "bad_params", r)
            self.assertNotIn("\n", r["error"]["message"])
        self.assertEqual(w.request("target", {})["error"]["kind"], "bad_params")

    def test_the_host_spelling_names_this_machine(self):
        import tvm
        from tgc_worker.tvmutil import physical_cores

        w = shared_worker()
        host = w.call("target", {"target": {"kind": "llvm", "tgc.host": "fingerprint"}})
        c = host["canonical"]
        # the CPU and triple this TVM's LLVM detects, the physical cores: what
        # Target.from_device("cpu") builds, plus the cores MetaSchedule needs
        self.assertEqual(c["mcpu"], str(tvm.target.codegen.llvm_get_system_cpu()))
        self.assertEqual(c["mtriple"], str(tvm.target.codegen.llvm_get_system_triple()))
        self.assertEqual(c["num-cores"], physical_cores())
        self.assertNotIn("tgc.host", c)
        from_device = tvm.target.Target.from_device("cpu").export()
        self.assertEqual(c["mcpu"], from_device["mcpu"])
        # generic code stays another target (records kept apart)
        generic = w.call("target", {"target": {"kind": "llvm", "num-cores": c["num-cores"]}})
        self.assertNotIn("mcpu", generic["canonical"])
        self.assertNotEqual(generic["canonical"], c)
        # fields given with the host key are kept; the key belongs to llvm only
        mine = w.call("target", {"target": {"kind": "llvm", "tgc.host": "f", "num-cores": 1}})
        self.assertEqual(mine["canonical"]["num-cores"], 1)
        r = w.request("target", {"target": {"kind": "cuda", "tgc.host": "f"}})
        self.assertEqual(r["error"]["kind"], "bad_params", r)

    def test_bad_requests_keep_the_worker_serving(self):
        w = shared_worker()
        r = w.send_raw("this is not json")
        self.assertEqual(r["error"]["kind"], "protocol")
        self.assertIsNone(r["id"])
        r = w.send_raw(json.dumps({"v": 1, "id": 7, "method": "hello"}))
        self.assertEqual((r["id"], r["error"]["kind"]), (7, "version"))
        r = w.send_raw(json.dumps({"v": PROTOCOL_VERSION, "id": 8, "method": "frobnicate"}))
        self.assertEqual(r["error"]["kind"], "unknown_method")
        r = w.request("lower", {"target": LLVM})
        self.assertEqual(r["error"]["kind"], "bad_params")
        r = w.request("lower", {"task": conv_task("c"), "target": "llvm"})
        self.assertEqual(r["error"]["kind"], "bad_params")
        self.assertEqual(r["error"]["task"], "c")
        self.assertEqual(w.call("hello")["protocol"], PROTOCOL_VERSION)

    def test_unknown_and_missing_params_fields_are_named(self):
        w = shared_worker()
        bad = [
            ("hello", {"verbose": True}, "hello: unknown params field 'verbose'"),
            ("target", {}, "target: missing params field 'target'"),
            ("target", {"target": LLVM, "tagret": LLVM}, "target: unknown params field 'tagret'"),
            ("lower", {"task": conv_task("c")}, "lower: missing params field 'target'"),
            ("lower", {"task": conv_task("c"), "target": LLVM, "trget": 1},
             "lower: unknown params field 'trget'"),
            ("replay", {"task": conv_task("c"), "target": LLVM}, "replay: missing params field 'traces'"),
            ("sample", {"task": conv_task("c"), "target": LLVM, "count": 1, "seed": 1, "cnt": 2},
             "sample: unknown params field 'cnt'"),
            ("sample", {"task": conv_task("c"), "target": LLVM, "count": 1},
             "sample: missing params field 'seed'"),
            ("build_and_measure", {"module": {}, "target": LLVM},
             "build_and_measure: missing params field 'records'"),
            ("build_and_measure", {"module": {}, "records": {}, "target": LLVM, "repeat": 1,
                                   "number": 1, "seed": 0, "repeats": 3},
             "build_and_measure: unknown params field 'repeats'"),
            ("shutdown", {"now": 1}, "shutdown: unknown params field 'now'"),
        ]
        tune = {"task": conv_task("c"), "target": LLVM, "work_dir": "/nonexistent/never-made",
                "seed": 1, "max_trials": 8, "max_round": 8, "evolutionary": {}, "evaluator": {},
                "builder_timeout_s": 1.0, "runner_timeout_s": 1.0, "cost_model": "random",
                "cost_model_file": None, "rpc": None}
        # every knob is required: the worker has no defaults of its own
        for k in tune:
            if k in ("task", "target"):
                continue
            params = {f: v for f, v in tune.items() if f != k}
            bad.append(("tune_open", params, f"tune_open: missing params field {k!r}"))
        bad.append(("tune_open", {**tune, "max_trial": 8}, "tune_open: unknown params field 'max_trial'"))
        bad.append(("tune_seeds", {"session": 1, "seeds": []}, "tune_seeds: missing params field 'limit'"))
        bad.append(("tune_close", {"session": 1, "train": True},
                    "tune_close: missing params field 'cost_model_max_samples'"))
        for method, params, message in bad:
            r = w.request(method, params)
            self.assertEqual(r["error"]["kind"], "bad_params", (method, params, r))
            self.assertEqual(r["error"]["message"], message, (method, params))
        # the task is named when params carry one; the worker goes on (shutdown did not exit)
        r = w.request("lower", {"task": conv_task("c"), "target": LLVM, "x": 1})
        self.assertEqual(r["error"]["task"], "c")
        # a seed object's fields are checked too
        r = w.request("replay", {"task": conv_task("c"), "target": LLVM,
                                 "traces": [{"trace": [[], []], "source": "x"}]})
        self.assertEqual(r["error"]["kind"], "bad_params", r)
        self.assertEqual(r["error"]["message"], "traces[0]: unknown field 'source'")
        # every knob is required: sample with its count and seed
        self.assertIn("traces", w.call("sample", {"task": conv_task("c"), "target": LLVM, "count": 1, "seed": 1}))
        self.assertEqual(w.call("hello")["protocol"], PROTOCOL_VERSION)

    def test_unknown_op_names_the_task(self):
        w = shared_worker()
        task = conv_task("fused_conv2d_frob")
        task["bindings"][1]["op"] = "nn.frobnicate"
        r = w.request("lower", {"task": task, "target": LLVM})
        self.assertEqual(r["error"]["kind"], "unsupported_op")
        self.assertEqual(r["error"]["task"], "fused_conv2d_frob")
        self.assertIn("nn.frobnicate", r["error"]["message"])
        self.assertNotIn("\n", r["error"]["message"])
        # the same request through tune_open and replay, and then the worker still works
        tune = {"work_dir": "/tmp/unused", "seed": 1, "max_trials": 8, "max_round": 8,
                "evolutionary": {}, "evaluator": {}, "builder_timeout_s": 1.0,
                "runner_timeout_s": 1.0, "cost_model": "random", "cost_model_file": None, "rpc": None}
        for m, extra in (("replay", {"traces": []}), ("tune_open", tune)):
            r = w.request(m, {"task": task, "target": LLVM, **extra})
            self.assertEqual(r["error"]["kind"], "unsupported_op", r)
            self.assertEqual(r["error"]["task"], "fused_conv2d_frob")
        self.assertIn("structural_hash", w.call("lower", {"task": conv_task("c"), "target": LLVM}))

    def test_bad_task_errors(self):
        w = shared_worker()
        bad = conv_task("wrong_shape")
        bad["bindings"][0]["results"] = [T([1, 8, 15, 15])]
        r = w.request("lower", {"task": bad, "target": LLVM})
        self.assertEqual(r["error"]["kind"], "bad_task")
        self.assertIn("Relax infers [1, 8, 16, 16] float32", r["error"]["message"])
        bad = conv_task("bad_attr")
        bad["bindings"][0]["attrs"]["stride"] = [2, 2]
        r = w.request("lower", {"task": bad, "target": LLVM})
        self.assertEqual(r["error"]["kind"], "bad_task")
        self.assertIn("'stride'", r["error"]["message"])
        bad = conv_task("channels")
        bad["params"][1]["shape"] = [8, 5, 3, 3]
        r = w.request("lower", {"task": bad, "target": LLVM})
        self.assertEqual((r["error"]["kind"], r["error"]["task"]), ("bad_task", "channels"))
        self.assertIn("Relax rejects it", r["error"]["message"])
        bad = conv_task("use_before_def")
        bad["bindings"][0]["operands"] = [0, 9]
        r = w.request("lower", {"task": bad, "target": LLVM})
        self.assertEqual(r["error"]["kind"], "bad_task")
        r = w.request("replay", {"task": conv_task("c"), "target": LLVM, "traces": [[1, 2, 3]]})
        self.assertEqual(r["error"]["kind"], "bad_trace")

    def test_tvm_exception_is_an_error_response(self):
        import tempfile

        w = shared_worker()
        task = conv_task("c")
        module = {
            "params": task["params"],
            "tasks": [task],
            "calls": [{"task": "c", "args": [0, 1, 2]}],
            "results": [3],
        }
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "database_workload.json"), "w") as f:
                f.write("garbage\n")
            open(os.path.join(d, "database_tuning_record.json"), "w").close()
            r = w.request("build_and_measure", {"module": module, "records": d, "target": LLVM,
                                                "repeat": 1, "number": 1, "seed": 0})
        self.assertEqual(r["error"]["kind"], "tvm", r)
        self.assertNotIn("\n", r["error"]["message"])
        self.assertEqual(w.call("hello")["protocol"], PROTOCOL_VERSION)

    def test_eof_exits_cleanly_and_shutdown(self):
        w = WorkerProcess()
        self.assertEqual(w.call("hello")["protocol"], PROTOCOL_VERSION)
        self.assertEqual(w.close(), 0)
        w = WorkerProcess()
        self.assertEqual(w.call("shutdown"), {})
        self.assertEqual(w.proc.wait(timeout=30), 0)


class TestLower(unittest.TestCase):
    def test_hash_stable_and_equal_to_extract_tasks(self):
        import tvm
        from tvm.s_tir import meta_schedule as ms

        from tgc_worker.lower import lower_task, structural_hash_u64
        from tgc_worker.task import parse_task

        w = shared_worker()
        for task in (conv_task("fused_conv2d_add_relu"), matmul_task("matmul")):
            r = w.call("lower", {"task": task, "target": LLVM})
            self.assertRegex(r["structural_hash"], r"^[0-9]+$")
            self.assertIn("def main(", r["tir"])
            # in this process, renamed params and task: same hash
            renamed = json.loads(json.dumps(task))
            renamed["name"] = task["name"] + "_other"
            for p in renamed["params"]:
                p["name"] = p["name"] + "_renamed"
            lt = lower_task(parse_task(renamed))
            self.assertEqual(lt.structural_hash, r["structural_hash"])
            # extract_tasks on the lowered Relax module finds exactly this workload
            ext = ms.relax_integration.extract_tasks(lt.lowered, tvm.target.Target(LLVM))
            self.assertEqual(len(ext), 1)
            self.assertEqual(ext[0].task_name, renamed["name"])
            self.assertEqual(structural_hash_u64(ext[0].dispatched[0]), r["structural_hash"])
            # and workload_json round-trips to the same hash
            wl = tvm.ir.load_json(r["workload_json"])
            self.assertEqual(structural_hash_u64(wl), r["structural_hash"])

    def test_a_models_value_names_do_not_reach_the_workload(self):
        # A reduction's block is named after its input tensor; the same task from two
        # models (its input named 171 in one, 515 in the other) must lower to one workload,
        # block names included, so that a trace tuned on one replays exactly on the other.
        w = shared_worker()

        def mean(name):
            return with_defaults({
                "name": "fused_mean",
                "params": [dict(name=name, **T([1, 64, 7, 7]))],
                "bindings": [{"op": "mean", "operands": [0], "attrs": {"axis": [2, 3],
                              "keepdims": True}, "results": [T([1, 64, 1, 1])]}],
                "results": [1],
            })

        a, b = mean("171"), mean("515")
        la = w.call("lower", {"task": a, "target": LLVM})
        lb = w.call("lower", {"task": b, "target": LLVM})
        self.assertEqual(la["tir"], lb["tir"])
        self.assertNotIn("171", la["tir"])
        traces = w.call("sample", {"task": a, "target": LLVM, "count": 2, "seed": 1})["traces"]
        res = w.call("replay", {"task": b, "target": LLVM, "traces": traces})["results"]
        self.assertEqual([r["mode"] for r in res], ["exact"] * len(traces), res)

    def test_shapes_change_the_hash(self):
        w = shared_worker()
        h16 = w.call("lower", {"task": conv_task("c", hw=16), "target": LLVM})["structural_hash"]
        h32 = w.call("lower", {"task": conv_task("c", hw=32), "target": LLVM})["structural_hash"]
        hcuda = w.call("lower", {"task": conv_task("c", hw=16), "target": CUDA})["structural_hash"]
        self.assertNotEqual(h16, h32)
        self.assertEqual(h16, hcuda)  # lowering does not depend on the target

    def test_constants_are_lifted_in_first_use_order(self):
        from tgc_worker.lower import lower_task
        from tgc_worker.task import parse_task

        task = with_defaults({
            "name": "fused_conv2d_multiply_clip",
            "params": [dict(name="x", **T([1, 4, 8, 8])), dict(name="w", **T([4, 4, 1, 1]))],
            "bindings": [
                {"op": "nn.conv2d", "operands": [0, 1], "results": [T([1, 4, 8, 8])]},
                {"op": "constant", "attrs": {"value": [0.5], "shape": [1, 4, 1, 1], "dtype": "float32"},
                 "results": [T([1, 4, 1, 1])]},
                {"op": "multiply", "operands": [2, 3], "results": [T([1, 4, 8, 8])]},
                {"op": "clip", "operands": [4], "attrs": {"min": 0, "max": 6}, "results": [T([1, 4, 8, 8])]},
            ],
            "results": [5],
        })
        lt = lower_task(parse_task(task))
        params = lt.workload["main"].params
        self.assertEqual(len(params), 4)  # x, w, the lifted constant, the output
        fn = lt.relax_mod[task["name"]]
        self.assertEqual([p.name for p in fn.params], ["p0", "p1", "c1"])
        # the constant's value is not part of the workload
        task2 = json.loads(json.dumps(task))
        task2["bindings"][1]["attrs"]["value"] = [2.0]
        self.assertEqual(lower_task(parse_task(task2)).structural_hash, lt.structural_hash)


def _one(op, ins, out, attrs=None, extra=()):
    params = [dict(name=f"p{i}", **t) for i, t in enumerate(ins)]
    b = list(extra) + [
        {"op": op, "operands": list(range(len(ins))), "attrs": attrs or {},
         "results": out if isinstance(out, list) else [out]}
    ]
    n = len(out) if isinstance(out, list) else 1
    return with_defaults({"name": "t_" + re.sub(r"\W", "_", op), "params": params, "bindings": b,
                          "results": list(range(len(ins), len(ins) + n))})


X = T([2, 4, 8, 8])
ONE_OP_CASES = [
    ("nn.conv2d", [X, T([6, 4, 3, 3])], T([2, 6, 8, 8]), {"padding": [1, 1, 1, 1]}),
    ("nn.conv2d", [X, T([4, 1, 3, 3])], T([2, 4, 4, 4]), {"strides": [2, 2], "padding": [1, 1, 1, 1], "groups": 4}),
    ("nn.conv2d_transpose", [X, T([4, 3, 2, 2])], T([2, 3, 16, 16]), {"strides": [2, 2]}),
    ("matmul", [T([3, 5]), T([5, 7])], T([3, 7]), None),
    ("nn.dense", [T([3, 5]), T([7, 5])], T([3, 7]), None),
    ("nn.batch_matmul", [T([2, 3, 5]), T([2, 7, 5])], T([2, 3, 7]), None),
    ("nn.batch_matmul", [T([2, 5, 3]), T([2, 5, 7])], T([2, 3, 7]), {"transpose_a": True, "transpose_b": False}),
    ("nn.hard_swish", [X], X, None),
    ("nn.hard_sigmoid", [X], X, {"alpha": 0.25}),
    ("clip", [X], X, {"min": -1, "max": 1.5}),
    ("clip", [X], X, {"min": -1, "max": 1.5, "tensor_bounds": True}),
    ("clip", [X], X, {"min": "-inf", "max": 6, "tensor_bounds": True}),
    ("nn.leakyrelu", [X], X, {"alpha": 0.1}),
    ("astype", [X], T([2, 4, 8, 8], "float16"), {"dtype": "float16"}),
    ("where", [T([2, 4, 8, 8], "bool"), X, T([1, 4, 1, 1])], X, None),
    ("greater", [X, T([8])], T([2, 4, 8, 8], "bool"), None),
    ("mean", [X], T([2, 4, 1, 1]), {"axis": [2, 3], "keepdims": True}),
    ("sum", [X], T([]), None),
    ("argmax", [X], T([2, 8, 8], "int64"), {"axis": 1}),
    ("nn.batch_norm", [X, T([4]), T([4]), T([4]), T([4])], X, {"epsilon": 1e-3}),
    ("nn.layer_norm", [X, T([8]), T([8])], X, {"axes": [-1]}),
    ("nn.softmax", [X], X, None),
    ("nn.log_softmax", [X], X, {"axis": 1}),
    ("nn.max_pool2d", [X], T([2, 4, 4, 4]), {"pool_size": [2, 2], "strides": [2, 2]}),
    ("nn.avg_pool2d", [X], T([2, 4, 8, 8]), {"pool_size": [3, 3], "padding": [1, 1, 1, 1]}),
    ("nn.adaptive_avg_pool2d", [X], T([2, 4, 1, 1]), {"output_size": [1, 1]}),
    ("reshape", [X], T([8, 64]), {"shape": [8, 64]}),
    ("permute_dims", [X], T([2, 8, 8, 4]), {"axes": [0, 2, 3, 1]}),
    ("concat", [X, X, X], T([2, 12, 8, 8]), {"axis": 1}),
    ("split", [X], [T([2, 1, 8, 8]), T([2, 3, 8, 8])], {"indices_or_sections": [1], "axis": 1}),
    ("strided_slice", [X], T([2, 4, 4, 8]), {"axes": [2], "begin": [0], "end": [8], "strides": [2]}),
    ("nn.pad", [X], T([2, 4, 10, 11]), {"pad_width": [0, 0, 0, 0, 1, 1, 0, 3]}),
    ("image.resize2d", [X], T([2, 4, 16, 16]), {"size": [16, 16]}),
    ("squeeze", [T([2, 1, 8, 1])], T([2, 8]), {"axis": [1, 3]}),
    ("expand_dims", [T([2, 8])], T([2, 1, 8]), {"axis": [1]}),
    ("flatten", [X], T([512]), None),
    ("take", [T([10, 4]), T([3], "int64")], T([3, 4]), {"axis": 0}),
    ("broadcast_to", [T([1, 4, 1, 1])], X, {"shape": [2, 4, 8, 8]}),
    ("tile", [T([2, 3])], T([4, 9]), {"repeats": [2, 3]}),
]


class TestOpTable(unittest.TestCase):
    def test_every_op_lowers(self):
        from tgc_worker.lower import lower_task
        from tgc_worker.ops import OPS
        from tgc_worker.task import parse_task

        cases = list(ONE_OP_CASES)
        covered = {c[0] for c in cases}
        # the remaining elementwise ops: unary on X, binary on (X, X)
        for name, spec in OPS.items():
            if name in covered or name == "constant":
                continue
            if name in ("max", "min", "prod"):
                cases.append((name, [X], T([2, 4]), {"axis": [2, 3]}))
            elif name == "argmin":
                cases.append((name, [X], T([], "int64"), None))
            elif spec.min_operands == 1:
                cases.append((name, [X], X, None))
            elif spec.min_operands == 2:
                out = T([2, 4, 8, 8], "bool") if name in ("equal", "not_equal", "less", "less_equal", "greater_equal") else X
                cases.append((name, [X, X], out, None))
        lowered = set()
        for op, ins, out, attrs in cases:
            with self.subTest(op=op, attrs=attrs):
                lt = lower_task(parse_task(_one(op, ins, out, attrs)))
                self.assertIn("main", [gv.name_hint for gv in lt.workload.get_global_vars()])
                lowered.add(op)
        self.assertEqual(lowered, set(OPS) - {"constant"})


if __name__ == "__main__":
    unittest.main()
