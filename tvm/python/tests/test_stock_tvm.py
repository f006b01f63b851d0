"""scripts/stock_tvm.py (bench_tune.py's stock TVM arm) on a tiny ONNX model: TVM's own tasks
are extracted (not only `pad`), trials are measured, the compiled model is timed."""

import json
import os
import statistics
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
MODEL = os.path.join(REPO, "tests", "fixtures", "onnx", "pplcnet-blocks.onnx")
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.dont_write_bytecode = True  # no scripts/__pycache__ in the working tree


class TestStockTvm(unittest.TestCase):
    def test_tiny_run(self):
        import stock_tvm
        from tgc_worker.tvmutil import ensure_tensor_intrin

        # the same import TuneContext does, with tgc's cheaper inspect.stack (tens of seconds
        # saved here; it changes nothing the run does)
        ensure_tensor_intrin()
        with tempfile.TemporaryDirectory(prefix="tgc-stock-test-") as tmp:
            report = stock_tvm.run(
                MODEL, {"kind": "llvm", "num-cores": 2}, trials=2, per_round=2,
                work_dir=os.path.join(tmp, "work"), max_tasks=1, population=64,
                builder_timeout=300, seed=1, log=lambda *_: None,
            )
        json.dumps(report)  # plain JSON
        self.assertEqual(report["schema"], stock_tvm.SCHEMA)
        names = [t["name"] for t in report["tasks"]]
        self.assertGreater(len(names), 1, names)
        self.assertTrue(any("conv2d" in n for n in names), names)
        self.assertEqual(report["tasks_extracted"], len(names))
        tuned = [t for t in report["tasks"] if t["selected"]]
        self.assertEqual(len(tuned), 1)
        # the tuned task is one of largest weight
        self.assertEqual(tuned[0]["weight"], max(t["weight"] for t in report["tasks"]))
        self.assertGreater(report["totals"]["trials"], 0)
        self.assertEqual(tuned[0]["trials"], report["totals"]["trials"])
        self.assertTrue(report["target"]["kind"] == "llvm")
        # the best record re-measured as tgc re-measures its own: the median of 5 fresh runs
        if tuned[0]["valid_trials"]:
            runs = tuned[0]["remeasured_runs_s"]
            self.assertEqual(len(runs), stock_tvm.REMEASURE_REPEATS)
            self.assertEqual(tuned[0]["best_latency_s"], statistics.median(runs))
            self.assertGreater(tuned[0]["search_best_s"], 0)
            self.assertNotIn("remeasure_error", report["totals"])
        lat = report["end_to_end"]["latency_ms"]
        self.assertEqual(lat["repeat"], stock_tvm.END_TO_END_REPEATS)
        # the thread count tgc's worker gives TVM's runtime (tests/run.py sets it as the
        # worker does), named in the report
        from tgc_worker.tvmutil import runtime_threads

        self.assertEqual(lat["threads"], runtime_threads())
        self.assertEqual(report["settings"]["runtime_threads"], runtime_threads())
        self.assertGreater(lat["median"], 0)
        self.assertLessEqual(lat["p10"], lat["median"])
        self.assertLessEqual(lat["median"], lat["p90"])
        self.assertTrue(report["end_to_end"]["outputs_finite"])
        self.assertGreater(report["compile_s"], 0)
        if tuned[0]["valid_trials"]:
            self.assertIn(tuned[0]["name"], report["scheduled_from_database"])

    def test_select_tasks(self):
        import stock_tvm

        class T:
            def __init__(self, name, weight):
                self.task_name, self.weight = name, weight

        ts = [T("a", 1), T("b", 3), T("c", 2), T("d", 3)]
        self.assertEqual([t.task_name for t in stock_tvm.select_tasks(ts, 2)], ["b", "d"])
        self.assertEqual([t.task_name for t in stock_tvm.select_tasks(ts, 3)], ["b", "c", "d"])
        self.assertEqual(len(stock_tvm.select_tasks(ts, 0)), 4)


if __name__ == "__main__":
    unittest.main()
