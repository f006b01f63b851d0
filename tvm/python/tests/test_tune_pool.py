"""The worker's persistent builder and runner (tgc_worker.pool) under tuning sessions, in
this process (real TVM, tiny budgets)."""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
# the pools' processes unpickle tgc_worker.build_worker: let them import it
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)

from tasks import LLVM, matmul_task  # noqa: E402

TINY = {
    "seed": 1,
    "max_trials": 64,
    "max_round": 6,
    "evolutionary": {"population_size": 16, "genetic_num_iters": 1, "init_min_unmeasured": 8},
    "evaluator": {"number": 2, "repeat": 1, "min_repeat_ms": 0},
    "builder_timeout_s": 300.0,
    "runner_timeout_s": 60.0,
    "cost_model": "random",
    "cost_model_file": None,
    "rpc": None,
}
KEYS = ("search_s", "build_s", "run_s", "trained_s")


class TestTunePool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tgc-pool-test-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def open(self, task, **params):
        """A session in this process (what the server's tune_open does)."""
        from tgc_worker.server import _task_and_target
        from tgc_worker.session import open_session, session

        p = {**TINY, "task": task, "target": LLVM, **params}
        p.setdefault("work_dir", os.path.join(self.tmp.name, f"{task['name']}-{id(p)}"))
        lt, target = _task_and_target(p)
        return session({"session": open_session(lt, target, p)["session"]})

    def test_pool_is_reused_across_sessions_and_batches_are_timed(self):
        from tgc_worker import pool

        s = self.open(matmul_task("pool_a", m=16, k=32, n=16))
        first = [s.search(4, 300.0), s.search(4, 300.0)]
        s.close(True, 64)
        builder, runner = pool._BUILDER, pool._RUNNER
        executor, run_executor = builder.pool, runner.pool
        pids, run_pids = builder.pids(), runner.pids()
        self.assertTrue(pids and run_pids)
        builds, started = builder.builds, (builder.pools_started, runner.pools_started)
        s = self.open(matmul_task("pool_b", m=32, k=16, n=16))
        second = [s.search(4, 300.0)]
        recs = s.records(8)["records"]
        s.windows([recs[0]["candidate"]], 3, 0)
        s.close(True, 64)
        # the same builder, executor and processes served both sessions
        self.assertIs(pool._BUILDER, builder)
        self.assertIs(pool._RUNNER, runner)
        self.assertIs(builder.pool, executor)
        self.assertIs(runner.pool, run_executor)
        self.assertEqual(builder.pids(), pids)
        self.assertEqual(runner.pids(), run_pids)
        self.assertEqual((builder.pools_started, runner.pools_started), started)
        # one build per trial; the window ran the trial's artifact
        self.assertEqual(builder.builds - builds, len(second[0]["candidates"]))
        for r in first + second:
            self.assertTrue(all(r[k] >= 0 for k in KEYS), r)
            self.assertGreater(r["build_s"], 0)
            self.assertGreater(r["run_s"], 0)
            self.assertEqual(len(r["results"]), len(r["candidates"]))

    def test_a_build_past_the_guards_timeout_is_a_failed_trial_the_cost_model_does_not_learn(self):
        """The build guard's timeout, per request and below the session's: each build past it
        is killed, its result names the timeout and has no build seconds, the database keeps
        no valid record of it, and the cost model's update leaves it out (as MetaSchedule's
        UpdateCostModel does). The next request with a longer timeout builds as usual, in the
        same pool, each build timed in its own process."""
        from tgc_worker import pool

        s = self.open(matmul_task("pool_h", m=16, k=16, n=16), builder_timeout_s=300.0)
        r = s.search(2, 0.01)
        self.assertEqual(len(r["results"]), 2)
        for m in r["results"]:
            self.assertIsNone(m["run_secs"])
            self.assertIsNone(m["build_s"])
            self.assertEqual(m["error"], "TrialBuilder: Timeout, killed after 0.01 seconds")
        self.assertEqual(s.records(8)["records"], [])
        self.assertEqual(s.untrained[-1], ([], []))
        started = pool._BUILDER.pools_started
        r = s.search(2, 300.0)
        self.assertEqual(len(r["results"]), 2)
        for m in r["results"]:
            self.assertIsNotNone(m["run_secs"], m)
            self.assertTrue(0 < m["build_s"] <= r["build_s"], (m, r["build_s"]))
        self.assertEqual(pool._BUILDER.pools_started, started)
        self.assertEqual(len(s.records(8)["records"]), 2)
        s.close(True, 64)
        # a timeout above the session's is the session's
        s = self.open(matmul_task("pool_i", m=8, k=8, n=8), builder_timeout_s=0.01)
        r = s.search(1, 300.0)
        self.assertEqual(r["results"][0]["error"], "TrialBuilder: Timeout, killed after 0.01 seconds")
        s.close(False, 64)

    def test_builder_recycles_processes_and_errors_are_failed_candidates(self):
        import tvm
        from tvm.s_tir.meta_schedule.builder import BuilderInput

        from tgc_worker.pool import TrialBuilder
        from tgc_worker.server import _task_and_target

        lt, target = _task_and_target({"task": matmul_task("pool_c", m=8, k=8, n=8), "target": LLVM})
        good = BuilderInput(lt.workload, target)
        # LLVM rejects the triple: the build raises in the pool's process
        bad = BuilderInput(
            lt.workload, tvm.target.Target({"kind": "llvm", "num-cores": 2, "mtriple": "bogus-none-x"})
        )
        b = TrialBuilder(1, 120.0, builds_per_process=2)
        try:
            pids = []
            for inp in (good, bad, good, good):
                (res,) = b.build([inp])
                pids.append(b.pids())
                if inp is bad:
                    self.assertIsNone(res.artifact_path)
                    self.assertIn("TrialBuilder: An exception occurred", res.error_msg)
                else:
                    self.assertIsNone(res.error_msg)
                    self.assertTrue(os.path.exists(str(res.artifact_path)))
                    import shutil

                    shutil.rmtree(os.path.dirname(str(res.artifact_path)), ignore_errors=True)
            # one process for two builds, then a fresh one: same pool object throughout
            self.assertEqual(pids[0], pids[1])
            self.assertNotEqual(pids[1], pids[2])
            self.assertEqual(pids[2], pids[3])
            self.assertEqual(b.pools_started, 1)
        finally:
            b.shutdown()
        # a build that runs past the timeout is a failed candidate too
        t = TrialBuilder(1, 0.01)
        try:
            (res,) = t.build([good])
            self.assertIsNone(res.artifact_path)
            self.assertIn("Timeout", res.error_msg)
        finally:
            t.shutdown()


if __name__ == "__main__":
    unittest.main()
