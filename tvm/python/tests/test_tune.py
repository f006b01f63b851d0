"""Tuning sessions through the worker process on real TVM (a few trials per task): the
session measures and reports what the driver asks for, and decides nothing; and the
whole-model build with records applied. About a minute and a half together."""

import itertools
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from tasks import LLVM, T, conv_task, matmul_task  # noqa: E402
from worker_client import shared_worker  # noqa: E402

# small and quick: a population of 64 (MetaSchedule's default 512 takes 30-50 s per batch
# here), one genetic iteration, short timing runs; every field is required
OPEN = {
    "seed": 1,
    "max_trials": 64,
    "max_round": 12,
    "evolutionary": {"population_size": 64, "genetic_num_iters": 1, "init_min_unmeasured": 32},
    "evaluator": {"number": 3, "repeat": 1, "min_repeat_ms": 20},
    "builder_timeout_s": 300.0,
    "runner_timeout_s": 60.0,
    "cost_model": "xgb",
    "cost_model_file": None,
    "rpc": None,
}


class TestTune(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tgc-worker-test-")
        cls.n = itertools.count()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def open(self, task, **params):
        params.setdefault("work_dir", os.path.join(self.tmp.name, f"{task['name']}-{next(self.n)}"))
        return shared_worker().call("tune_open", {**OPEN, "task": task, "target": LLVM, **params})

    def test_a_search_its_records_windows_and_a_seeded_session(self):
        w = shared_worker()
        task = conv_task("fused_conv2d_add_relu")
        opened = self.open(task)
        self.assertEqual(
            opened["evaluator"],
            {"number": 3, "repeat": 1, "min_repeat_ms": 20, "enable_cpu_cache_flush": False},
        )
        self.assertEqual(opened["threads"], w.call("hello")["runtime_threads"])
        self.assertEqual(opened["structural_hash"], w.call("lower", {"task": task, "target": LLVM})["structural_hash"])
        sid = opened["session"]
        r = w.call("tune_search", {"session": sid, "count": 8, "build_timeout_s": 300.0})
        self.assertEqual(len(r["candidates"]), 8, r)
        self.assertEqual(len(set(r["candidates"])), 8)
        self.assertTrue(all(m["run_secs"] and m["error"] is None for m in r["results"]), r)
        for k in ("search_s", "build_s", "run_s"):
            self.assertGreater(r[k], 0, k)
        self.assertEqual(r["trained_s"], 0.0, "nothing measured before")
        # the next round first trains the cost model on the first
        r2 = w.call("tune_search", {"session": sid, "count": 4, "build_timeout_s": 300.0})
        self.assertEqual(len(r2["candidates"]), 4)
        self.assertGreater(r2["trained_s"], 0)
        self.assertFalse(set(r["candidates"]) & set(r2["candidates"]), "new candidates")
        # the records are the candidates measured, MetaSchedule's order (by mean)
        recs = w.call("tune_records", {"session": sid, "top_k": 32})["records"]
        self.assertEqual(sorted(x["candidate"] for x in recs), sorted(r["candidates"] + r2["candidates"]))
        means = [sum(x["run_secs"]) / len(x["run_secs"]) for x in recs]
        self.assertEqual(means, sorted(means))
        # windows: `repeats` fresh runs each, in the order asked (one id twice), of what the
        # trials built: nothing is built again
        best, second = recs[0]["candidate"], recs[1]["candidate"]
        ws = w.call("tune_windows", {"session": sid, "candidates": [best, second, best], "repeats": 3, "retries": 0})
        self.assertEqual([len(x["run_secs"]) for x in ws["windows"]], [3, 3, 3], ws)
        self.assertEqual((ws["build_s"], [x["build_s"] for x in ws["windows"]]), (0.0, [None] * 3), ws)
        again = w.call("tune_windows", {"session": sid, "candidates": [best], "repeats": 2, "retries": 0})
        self.assertEqual(again["build_s"], 0.0, "a candidate is built once")
        self.assertEqual(len(again["windows"][0]["run_secs"]), 2)
        closed = w.call("tune_close", {"session": sid, "train": True, "cost_model_max_samples": 4096})
        self.assertEqual((closed["failed_runs"], closed["run_errors"], closed["errors"]), (0, [], []))

        # the records replay exactly on their own task; seeded with them, a session measures
        # what it is asked to: the best one alone, then a window of it
        traces = [x["trace"] for x in recs[:4]]
        res = w.call("replay", {"task": task, "target": LLVM, "traces": traces})
        self.assertEqual([x["mode"] for x in res["results"]], ["exact"] * 4)
        sid = self.open(task)["session"]
        seeded = w.call("tune_seeds", {"session": sid, "seeds": traces, "limit": 8})
        self.assertEqual([(s["mode"], s["duplicate"], s["error"]) for s in seeded["seeds"]], [("exact", False, None)] * 4)
        ids = [s["candidate"] for s in seeded["seeds"]]
        m = w.call("tune_measure", {"session": sid, "candidates": ids[:1], "build_timeout_s": 300.0})
        self.assertEqual(len(m["results"]), 1)
        self.assertTrue(m["results"][0]["run_secs"])
        # the measured seed's window runs its trial's artifact; a seed not measured as a trial
        # is built for its window, once
        ws = w.call("tune_windows", {"session": sid, "candidates": ids[:2], "repeats": 3, "retries": 0})
        self.assertEqual([len(x["run_secs"]) for x in ws["windows"]], [3, 3], ws)
        self.assertIsNone(ws["windows"][0]["build_s"], ws)
        self.assertGreater(ws["windows"][1]["build_s"], 0, ws)
        again = w.call("tune_windows", {"session": sid, "candidates": ids[1:2], "repeats": 1, "retries": 0})
        self.assertIsNone(again["windows"][0]["build_s"], again)
        # the database holds what was measured as trials: the one seed
        recs = w.call("tune_records", {"session": sid, "top_k": 32})["records"]
        self.assertEqual([x["candidate"] for x in recs], ids[:1])
        self.assertEqual(recs[0]["trace"], traces[0])
        w.call("tune_close", {"session": sid, "train": False, "cost_model_max_samples": 4096})

    def test_every_trial_and_window_says_what_other_load_it_met(self):
        w = shared_worker()
        sid = self.open(matmul_task("loaded", m=64, k=64, n=64))["session"]
        r = w.call("tune_search", {"session": sid, "count": 2, "build_timeout_s": 300.0})
        loads = [m["load"] for m in r["results"]]
        self.assertTrue(all(isinstance(x, float) and x >= 0 for x in loads), r)
        best = r["candidates"][0]
        # a process that keeps a core busy while the window runs is other load: most of a
        # core, however the scheduler shares the two cores with the runner's threads
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.2)
            ws = w.call("tune_windows", {"session": sid, "candidates": [best], "repeats": 5, "retries": 0})
        finally:
            busy.kill()
            busy.wait()
        self.assertGreater(ws["windows"][0]["load"], 0.4, ws)
        w.call("tune_close", {"session": sid, "train": False, "cost_model_max_samples": 4096})

    def test_seeds_replay_until_the_limit_and_failures_are_named(self):
        w = shared_worker()
        task = matmul_task("matmul", m=32, k=64, n=32)
        seeds = w.call("sample", {"task": task, "target": LLVM, "count": 3, "seed": 3})["traces"]
        # a conv trace does not replay on a matmul: named; a repeated seed is a duplicate
        bad = w.call("sample", {"task": conv_task("c"), "target": LLVM, "count": 1, "seed": 1})["traces"]
        sid = self.open(task)["session"]
        r = w.call("tune_seeds", {"session": sid, "seeds": bad + seeds[:1] + seeds, "limit": 8})
        out = r["seeds"]
        self.assertEqual(len(out), 5)
        self.assertIsNone(out[0]["candidate"])
        self.assertIsNone(out[0]["mode"])
        self.assertTrue(out[0]["error"])
        self.assertEqual((out[2]["duplicate"], out[2]["candidate"]), (True, out[1]["candidate"]))
        self.assertEqual(len({s["candidate"] for s in out[1:]}), 3)
        # at the limit, the seeds after are not tried
        sid = self.open(task)["session"]
        r = w.call("tune_seeds", {"session": sid, "seeds": seeds, "limit": 2})
        self.assertEqual(len(r["seeds"]), 2)
        # a measured batch of seeds: one result each, the build and run timed
        m = w.call("tune_measure", {"session": sid, "candidates": [s["candidate"] for s in r["seeds"]], "build_timeout_s": 300.0})
        self.assertEqual(len(m["results"]), 2)
        self.assertTrue(m["build_s"] > 0 and m["run_s"] > 0, m)
        # the search continues from them: its candidates are new ones, round after round
        # (MetaSchedule's search proposes the measured seeds again; the session drops them)
        measured = {x["candidate"] for x in r["seeds"]}
        for _ in range(3):
            s = w.call("tune_search", {"session": sid, "count": 4, "build_timeout_s": 300.0})
            self.assertEqual(len(s["candidates"]), 4, s)
            self.assertFalse(set(s["candidates"]) & measured, (s, measured))
            self.assertIsInstance(s["repeats_dropped"], int)
            measured |= set(s["candidates"])
        w.call("tune_close", {"session": sid, "train": True, "cost_model_max_samples": 4096})

    def test_cost_model_warm_start_and_training_on_request(self):
        w = shared_worker()
        path = os.path.join(self.tmp.name, "cm", "llvm.tar")

        def session(name, shape, rounds, train=True, max_samples=4096):
            opened = self.open(matmul_task(name, **shape), cost_model_file=path)
            sid = opened["session"]
            trials = 0
            for n in rounds:
                trials += len(w.call("tune_search", {"session": sid, "count": n, "build_timeout_s": 300.0})["candidates"])
            closed = w.call("tune_close", {"session": sid, "train": train, "cost_model_max_samples": max_samples})
            return opened, closed, trials

        opened, first, t1 = session("mm_a", dict(m=32, k=64, n=32), [8])
        self.assertEqual(opened["cost_model_warm_samples"], 0)
        self.assertEqual(first["saved_samples"], t1)
        self.assertEqual(first["errors"], [])
        self.assertTrue(os.path.exists(path))
        # the next task starts from the first one's measurements and adds its own
        opened, second, t2 = session("mm_b", dict(m=64, k=32, n=16), [4, 4])
        self.assertEqual(opened["cost_model_warm_samples"], t1)
        self.assertEqual(second["saved_samples"], t1 + t2)
        # without training, the batch not yet learnt is left out; a cap keeps the newest group
        opened, third, _ = session("mm_c", dict(m=16, k=16, n=16), [4, 4], train=False, max_samples=4)
        self.assertEqual(opened["cost_model_warm_samples"], t1 + t2)
        self.assertEqual(third["saved_samples"], 4, "the first round, learnt before the second")
        # a damaged file: reported with its path, the task tunes cold, the file is replaced
        with open(path, "wb") as f:
            f.write(b"not a tar")
        opened, fourth, t4 = session("mm_d", dict(m=16, k=32, n=16), [4])
        self.assertEqual(opened["cost_model_warm_samples"], 0)
        (err,) = fourth["errors"]
        self.assertIn(path, err)
        self.assertIn("unreadable cost model", err)
        self.assertNotIn("\n", err)
        self.assertEqual(fourth["saved_samples"], t4)

    def test_bad_session_requests_are_one_line_errors(self):
        w = shared_worker()
        resp = w.request("tune_open", {**OPEN, "task": matmul_task("mm_e"), "target": LLVM,
                                       "work_dir": self.tmp.name, "cost_model_file": 3})
        self.assertEqual(resp["error"]["kind"], "bad_params")
        self.assertIn("cost_model_file", resp["error"]["message"])
        sid = self.open(matmul_task("mm_f", m=8, k=8, n=8))["session"]
        for method, params, needle in (
            ("tune_search", {"session": sid + 1, "count": 1, "build_timeout_s": 300.0}, "is not open"),
            ("tune_search", {"session": sid, "count": 0, "build_timeout_s": 300.0}, "count must be an int of at least 1"),
            ("tune_measure", {"session": sid, "candidates": [7], "build_timeout_s": 300.0}, "no candidate 7"),
            ("tune_measure", {"session": sid, "candidates": [], "build_timeout_s": 0}, "build_timeout_s must be a positive number"),
            ("tune_search", {"session": sid, "count": 1, "build_timeout_s": "60"}, "build_timeout_s must be a positive number"),
            ("tune_windows", {"session": sid, "candidates": ["a"], "repeats": 1, "retries": 0}, "candidate ids"),
            ("tune_close", {"session": sid, "train": 1, "cost_model_max_samples": 1}, "train must be a bool"),
        ):
            resp = w.request(method, params)
            self.assertEqual(resp["error"]["kind"], "bad_params", (method, resp))
            self.assertIn(needle, resp["error"]["message"])
        # opening another session closes this one
        self.open(matmul_task("mm_g", m=8, k=8, n=8))
        resp = w.request("tune_records", {"session": sid, "top_k": 1})
        self.assertIn("is not open", resp["error"]["message"])

    def test_build_and_measure(self):
        w = shared_worker()
        c1 = conv_task("fused_conv2d_add_relu")
        c2 = conv_task("fused_conv2d_relu", tail="relu")
        mm = {
            "name": "reshape_matmul",
            "params": [dict(name="a", **T([1, 8, 16, 16])), dict(name="b", **T([256, 8]))],
            "bindings": [
                {"op": "reshape", "operands": [0], "attrs": {"shape": [8, 256]}, "results": [T([8, 256])]},
                {"op": "matmul", "operands": [2, 1], "results": [T([8, 8])]},
            ],
            "results": [3],
        }
        module = {
            "params": [
                dict(name="x", **T([1, 8, 16, 16])),
                dict(name="w1", **T([8, 8, 3, 3])),
                dict(name="w2", **T([8, 8, 3, 3])),
                dict(name="wm", **T([256, 8])),
            ],
            "tasks": [c1, c2, mm],
            "calls": [
                {"task": "fused_conv2d_relu", "args": [0, 1]},  # value 4
                {"task": "fused_conv2d_add_relu", "args": [4, 2, 0]},  # 5
                {"task": "fused_conv2d_relu", "args": [5, 1]},  # 6
                {"task": "reshape_matmul", "args": [6, 3]},  # 7
            ],
            "results": [7],
        }
        records = {
            t["name"]: w.call("sample", {"task": t, "target": LLVM, "count": 2, "seed": 5})["traces"]
            for t in (c1, c2, mm)
        }
        r = w.call(
            "build_and_measure", {"module": module, "records": records, "target": LLVM, "repeat": 5,
                                  "number": 1, "seed": 0}
        )
        self.assertTrue(r["outputs_match"], r)
        self.assertLess(r["max_rel_err"], r["tolerance"]["atol_rel"], r)
        self.assertGreaterEqual(r["max_abs_err"], 0.0)
        self.assertEqual(r["applied"], {n: "exact" for n in records})
        self.assertEqual(sorted(r["scheduled"]), sorted(records))
        lat = r["latency_ms"]
        self.assertGreater(lat["mean"], 0)
        self.assertEqual(lat["repeat"], 5)
        self.assertEqual(lat["threads"], w.call("hello")["runtime_threads"])
        # the tasks' hashes are the ones `lower` gives
        h = w.call("lower", {"task": c1, "target": LLVM})["structural_hash"]
        self.assertEqual(r["tasks"]["fused_conv2d_add_relu"], h)

        # a task of the module that is not lowerable is an error naming it; the worker goes on
        broken = dict(module, tasks=[c1, c2, dict(mm, bindings=[dict(mm["bindings"][0], op="nope")] + mm["bindings"][1:])])
        resp = w.request("build_and_measure", {"module": broken, "records": {}, "target": LLVM,
                                               "repeat": 1, "number": 1, "seed": 0})
        self.assertEqual((resp["error"]["kind"], resp["error"]["task"]), ("unsupported_op", "reshape_matmul"))


if __name__ == "__main__":
    unittest.main()
