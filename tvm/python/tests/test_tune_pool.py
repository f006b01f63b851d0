"""The worker's persistent builder and runner (tgc_worker.pool), per-round timings and
re-measured latencies, in this process (real TVM, tiny budgets: about a minute)."""

import os
import statistics
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
# the pools' processes unpickle tgc_worker.build_worker: let them import it
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)

from tasks import LLVM, matmul_task  # noqa: E402

TINY = {
    "seeds": [],
    "max_trials": 4,
    "trials_per_round": 4,
    "patience_rounds": 0,
    "exact_tolerance": 0.05,
    "evolutionary": {"population_size": 16, "genetic_num_iters": 1, "init_min_unmeasured": 8},
    "runner": {"number": 2, "repeat": 1, "min_repeat_ms": 0},
    "cost_model": "random",
    "remeasure_top": 2,
    "remeasure_repeats": 3,
}
KEYS = ("search_s", "build_s", "run_s", "cost_model_s")


class TestTunePool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tgc-pool-test-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def tune(self, task, seeds=(), **params):
        from tgc_worker.server import _task_and_target, _traces
        from tgc_worker.tune import tune_task

        p = {**TINY, "task": task, "target": LLVM, "seeds": list(seeds), **params}
        p.setdefault("work_dir", os.path.join(self.tmp.name, f"{task['name']}-{id(p)}"))
        lt, target = _task_and_target(p)
        return tune_task(lt, target, p, _traces(p, "seeds", task["name"]))

    def test_pool_is_reused_across_tune_calls_and_rounds_are_timed(self):
        from tgc_worker import pool
        from tgc_worker.tvmutil import runtime_threads

        first = self.tune(matmul_task("pool_a", m=16, k=32, n=16))
        builder, runner = pool._BUILDER, pool._RUNNER
        executor, run_executor = builder.pool, runner.pool
        pids, run_pids = builder.pids(), runner.pids()
        self.assertTrue(pids and run_pids)
        builds = builder.builds
        second = self.tune(
            matmul_task("pool_b", m=32, k=16, n=16), max_trials=8, patience_rounds=0
        )
        # the same builder, executor and processes served both calls
        self.assertIs(pool._BUILDER, builder)
        self.assertIs(pool._RUNNER, runner)
        self.assertIs(builder.pool, executor)
        self.assertIs(runner.pool, run_executor)
        self.assertEqual(builder.pids(), pids)
        self.assertEqual(runner.pids(), run_pids)
        self.assertEqual((builder.pools_started, runner.pools_started), (1, 1))
        self.assertGreaterEqual(builder.builds - builds, second["trials"])

        for r in (first, second):
            h = r["history"]
            self.assertEqual(len(h), r["rounds"])
            for e in h:
                self.assertTrue(all(e[k] >= 0 for k in KEYS), e)
                self.assertGreater(e["build_s"], 0)
                self.assertGreater(e["run_s"], 0)
            self.assertLessEqual(sum(e[k] for e in h for k in KEYS), h[-1]["elapsed_s"])
            self.assertLessEqual(h[-1]["elapsed_s"], r["wall_s"])
            # honest latencies: the best two re-measured with 3 fresh runs, the best of them
            # in 3 windows of 3 (the second too, should the windows move the first behind
            # it), the rest flagged
            recs = r["records"]
            self.assertGreaterEqual(len(recs), 3, r)
            self.assertEqual(len(recs[0]["run_secs"]), 9)
            self.assertIn(len(recs[1]["run_secs"]), (3, 9))
            for x in recs[:2]:
                self.assertTrue(x["remeasured"])
                self.assertEqual(x["median_s"], statistics.median(x["run_secs"]))
                lo, hi = min(x["run_secs"]), max(x["run_secs"])
                self.assertAlmostEqual(x["spread"], (hi - lo) / x["median_s"], places=9)
            self.assertLessEqual(recs[0]["median_s"], recs[1]["median_s"])
            for x in recs[2:]:
                self.assertFalse(x["remeasured"])
                self.assertEqual(len(x["run_secs"]), 1)
            self.assertEqual(r["best_s"], recs[0]["median_s"])
            self.assertEqual(
                r["runner"],
                {"number": 2, "repeat": 1, "min_repeat_ms": 0, "enable_cpu_cache_flush": False,
                 "remeasure_top": 2, "remeasure_repeats": 3, "exact_windows": 6,
                 "writeback_windows": 3, "threads": runtime_threads()},
            )

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

    def test_patience_counts_only_once_the_goal_is_reached(self):
        from types import SimpleNamespace

        from tgc_worker.tune import SeededSearch, TuneState

        class Inner:  # the evolutionary search's bookkeeping is not under test here
            def notify_runner_results(self, candidates, results):
                pass

        def rounds(goal, bests):
            st = TuneState()
            # the Python object behind TVM's wrapper: its decisions, without FFI round trips
            s = SeededSearch(Inner(), [], 100, 1, None, 0.05, st, None, goal)._inst
            s.ctx = SimpleNamespace(task_name="t")
            for b in bests:
                s.notify_runner_results([None], [SimpleNamespace(run_secs=[b], error_msg=None)])
                if st.stopped:
                    break
            return st.stopped, st.rounds

        # without a goal one stale round ends the search
        self.assertEqual(rounds(None, [2.0, 3.0, 3.0]), ("patience", 2))
        # short of the goal (1.0 at most 5 % over it) stale rounds do not count ...
        self.assertEqual(rounds(1.0, [2.0, 3.0, 3.0]), (None, 3))
        # ... until the best gets there; then the next stale round ends it
        self.assertEqual(rounds(1.0, [2.0, 3.0, 1.04, 1.5]), ("patience", 4))
        # reaching the goal alone ends nothing
        self.assertEqual(rounds(1.0, [0.5, 0.4, 0.3]), (None, 3))

    def test_a_goal_out_of_reach_keeps_the_budget(self):
        # patience 1 would stop a search that fails to improve; a goal no schedule meets
        # keeps the whole budget (real TVM, two rounds)
        task = matmul_task("goal_a", m=16, k=32, n=16)
        r = self.tune(task, max_trials=8, patience_rounds=1, goal_latency_s=1e-12)
        self.assertEqual((r["stopped"], r["trials"]), ("budget", 8), r)

    def test_a_small_remainder_is_folded_into_the_round_before(self):
        from tgc_worker.server import m_sample
        from tgc_worker.tune import _round_size

        self.assertEqual([_round_size(8, r) for r in (16, 13, 12, 9, 8, 3)], [8, 8, 12, 9, 8, 3])
        # real TVM: 3 seeds of an 8-trial budget in rounds of 4 leave 5, one round, not 4 + 1
        task = matmul_task("fold_a", m=16, k=32, n=16)
        seeds = m_sample({"task": task, "target": LLVM, "count": 3, "seed": 7})["traces"]
        r = self.tune(task, seeds, max_trials=8)
        self.assertEqual(r["seeds_measured"], 3, r)
        self.assertEqual([h["trials"] for h in r["history"]], [3, 8], r["history"])
        self.assertEqual(r["stopped"], "budget")

    @staticmethod
    def scripted_windows(*scripts):
        """A stand-in for pool.measure_windows: the real builds and one real run of each
        item happen, and the windows it returns for item i are `scripts[i]` in order
        (the last script for items beyond; each cycling through its last window)."""
        from tgc_worker import pool

        real = pool.measure_windows

        def fake(builder, runner, mods_and_args, target, evaluator, windows, next_item):
            n = len(mods_and_args)
            _, err = real(builder, runner, mods_and_args, target, evaluator, n,
                          lambda done: next((i for i in range(n) if not done[i]), None))
            assert err is None, err
            done = [[] for _ in range(n)]
            for _ in range(windows):
                i = next_item(done)
                if i is None:
                    break
                script = scripts[min(i, len(scripts) - 1)]
                done[i].append(list(script[min(len(done[i]), len(script) - 1)]))
            return done, None

        return mock.patch.object(pool, "measure_windows", fake)

    def test_a_missed_hit_holds_when_its_control_drifted_as_far(self):
        """A hit slower than cached is followed, window for window, by the runner-up exact
        seed (the control): once both have two windows and the control re-measures slower
        by as much (the machine, not the schedule), the hit ends the task; when the control
        kept its cached latency, the windows run out and the search runs. Without a control
        latency no control is measured."""
        from tgc_worker.server import m_sample

        task = matmul_task("pool_ctl", m=16, k=16, n=16)
        seeds = m_sample({"task": task, "target": LLVM, "count": 2, "seed": 5})["traces"]
        hit = [[1.2, 1.2, 1.2]]  # cached 1.0: 20 % slower in every window
        common = dict(cached_latency_s=1.0, exact_tolerance=0.05, max_trials=4, exact_windows=6)
        # the control (cached 2.0) re-measures at 2.3, then 2.5: drift 1.2, like the hit's
        with self.scripted_windows(hit, [[2.3, 2.3, 2.3], [2.5, 2.5, 2.5]]):
            held = self.tune(task, seeds, control_latency_s=2.0, **common)
        self.assertEqual(held["stopped"], "exact_hit", held)
        self.assertEqual(held["exact_windows_s"], [1.2, 1.2], "two windows each, then held")
        c = held["exact_control"]
        self.assertEqual((c["cached_s"], c["windows_s"], c["held"]), (2.0, [2.3, 2.5], True), c)
        self.assertAlmostEqual(c["hit_drift"], 1.2)
        self.assertAlmostEqual(c["control_drift"], 1.2)
        self.assertEqual((held["trials"], held["seeds_measured"]), (1, 1), held)
        # the control kept its latency (drift 1.0): the hit's 1.2 is its own; three windows
        # each (six in all), then the other seed and the search
        with self.scripted_windows(hit, [[2.0, 2.0, 2.0]]):
            lost = self.tune(task, seeds, control_latency_s=2.0, **common)
        self.assertEqual(lost["stopped"], "budget", lost)
        self.assertEqual(lost["exact_windows_s"], [1.2, 1.2, 1.2])
        self.assertEqual(lost["exact_control"]["windows_s"], [2.0, 2.0, 2.0])
        self.assertEqual(lost["exact_control"]["held"], False)
        self.assertAlmostEqual(lost["exact_control"]["control_drift"], 1.0)
        self.assertEqual(lost["seeds_measured"], 2, "the other seed follows, then search")
        # a window within tolerance after a missed one is a hit, whatever the control says
        with self.scripted_windows([[1.2, 1.2, 1.2], [1.0, 1.0, 1.0]], [[2.0, 2.0, 2.0]]):
            late = self.tune(task, seeds, control_latency_s=2.0, **common)
        self.assertEqual(late["stopped"], "exact_hit", late)
        self.assertEqual(late["exact_windows_s"], [1.2, 1.0])
        self.assertEqual(late["exact_control"]["windows_s"], [2.0])
        # no control latency: six windows of the hit, then the search
        with self.scripted_windows(hit, [[2.4, 2.4, 2.4]]):
            plain = self.tune(task, seeds, **common)
        self.assertIsNone(plain["exact_control"])
        self.assertEqual(plain["exact_windows_s"], [1.2] * 6)
        self.assertEqual(plain["stopped"], "budget", plain)

    def test_exact_hit_compares_the_remeasured_median(self):
        from tgc_worker.server import m_sample

        task = matmul_task("pool_d", m=16, k=16, n=16)
        seeds = m_sample({"task": task, "target": LLVM, "count": 2, "seed": 5})["traces"]
        # search measurements are ~1e-5 s and would hit; the re-measured median is 2.0
        with self.scripted_windows([[1.0, 2.0, 30.0]]):  # median 2.0, mean 11.0
            miss = self.tune(task, seeds, cached_latency_s=1.5, exact_tolerance=0.1, max_trials=2,
                             exact_windows=3)
            hit = self.tune(task, seeds, cached_latency_s=1.9, exact_tolerance=0.1, max_trials=8)
        self.assertEqual(miss["exact_seed_remeasured_s"], 2.0)
        self.assertEqual(miss["exact_windows_s"], [2.0, 2.0, 2.0], "every window, then search")
        self.assertEqual(miss["stopped"], "budget")
        self.assertEqual(miss["runner"]["exact_windows"], 3)
        self.assertEqual(hit["exact_seed_remeasured_s"], 2.0)
        self.assertEqual(hit["exact_windows_s"], [2.0], "the first window hit")
        self.assertEqual(hit["stopped"], "exact_hit", hit)
        # the best exact seed is measured alone; the hit leaves the other unmeasured
        self.assertEqual((hit["trials"], hit["seeds_measured"]), (1, 1), hit)
        self.assertEqual(hit["history"][0]["trials"], 1, hit["history"])
        self.assertEqual(hit["records"][0]["median_s"], 2.0)
        self.assertEqual([r["remeasured"] for r in hit["records"]], [True])
        # a miss measures the other seed as a second batch, then searches
        self.assertEqual(miss["seeds_measured"], 2, miss)
        self.assertEqual([h["trials"] for h in miss["history"]], [1, 2], miss["history"])

    def test_a_window_in_a_burst_of_load_is_followed_by_another(self):
        """A first window slowed down by other work on the machine does not decide: the
        next one, within tolerance, is a hit, the lowest window median is the one kept, and
        the record written back carries the runs of both windows."""
        from tgc_worker.server import m_sample

        task = matmul_task("pool_e", m=16, k=16, n=16)
        seeds = m_sample({"task": task, "target": LLVM, "count": 1, "seed": 5})["traces"]
        with self.scripted_windows([[3.0, 3.1, 2.9], [1.0, 1.1, 0.9]]):
            r = self.tune(task, seeds, cached_latency_s=1.0, exact_tolerance=0.05, max_trials=8)
        self.assertEqual(r["stopped"], "exact_hit", r)
        self.assertEqual(r["exact_windows_s"], [3.0, 1.0])
        self.assertEqual(r["exact_seed_remeasured_s"], 1.0)
        self.assertEqual(sorted(r["records"][0]["run_secs"]), [0.9, 1.0, 1.1, 2.9, 3.0, 3.1])
        self.assertEqual(r["records"][0]["median_s"], 2.0)
        self.assertEqual(r["runner"]["exact_windows"], 6, "the default")

    def test_the_best_record_is_written_back_from_several_windows(self):
        """The best re-measured record gets `writeback_windows` windows in all; when they
        move it behind the second, the second is extended too. One window is what the other
        records keep, and writeback_windows 1 is the old single re-measurement."""
        task = matmul_task("pool_g", m=16, k=16, n=16)
        # real re-measurements are ~1e-5 s; the scripted extra windows read 5.0
        with self.scripted_windows([[5.0, 5.0, 5.0]]):
            r = self.tune(task, max_trials=8, trials_per_round=8, writeback_windows=3)
            one = self.tune(task, max_trials=8, trials_per_round=8, writeback_windows=1)
        recs = r["records"]
        self.assertEqual(r["runner"]["writeback_windows"], 3)
        for x in recs[:2]:
            self.assertEqual(len(x["run_secs"]), 9, x)
            self.assertEqual(sorted(x["run_secs"])[3:], [5.0] * 6, "two windows added")
            self.assertEqual(x["median_s"], 5.0)
        self.assertEqual(r["best_s"], 5.0)
        for x in recs[2:]:
            self.assertFalse(x["remeasured"])
        self.assertEqual([len(x["run_secs"]) for x in one["records"][:2]], [3, 3])
        self.assertLess(one["best_s"], 1.0, "not extended")

    def test_windows_build_once_and_measure_until_enough(self):
        """Remeasurer.windows on real TVM: one build, then windows until `enough`; the runs
        of all windows are added to the schedule's fresh runs."""
        from tvm.s_tir import meta_schedule as ms
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        from tgc_worker import pool
        from tgc_worker.server import _task_and_target
        from tgc_worker.tune import Remeasurer
        from tgc_worker.tvmutil import physical_cores

        task = matmul_task("pool_f", m=16, k=16, n=16)
        lt, target = _task_and_target({"task": task, "target": LLVM})
        mod = lt.workload
        ev = ms.runner.EvaluatorConfig(number=2, repeat=1, min_repeat_ms=0)
        builder = pool.get_builder(physical_cores(), 300.0)
        rm = Remeasurer(builder, pool.get_runner(60.0, ev), target, ev, 3)
        args = ArgInfo.from_entry_func(mod, remove_preproc=True)
        builds = builder.builds
        never = rm.windows(("a", mod, args), 3, lambda med: False)
        self.assertEqual([len(w) for w in never], [3, 3, 3])
        self.assertEqual(builder.builds, builds + 1, "built once for its windows")
        self.assertEqual(rm.fresh["a"], [s for w in never for s in w])
        self.assertTrue(all(0 < s < 1 for s in rm.fresh["a"]))
        at_once = rm.windows(("b", mod, args), 3, lambda med: True)
        self.assertEqual(len(at_once), 1)
        self.assertEqual(rm.measure([("a", mod, args)]), [rm.fresh["a"]], "not measured again")
        more = rm.windows(("a", mod, args), 1, lambda med: False)
        self.assertEqual(rm.fresh["a"], [s for w in never + more for s in w], "runs added")
        # two schedules, each built once, windows alternating as next_item says, at most
        # `windows` in all
        builds, order = builder.builds, []

        def next_item(done):
            order.append([len(w) for w in done])
            return len(order) % 2  # d, c, d, c, d

        both = rm.alternate([("c", mod, args), ("d", mod, args)], 5, next_item)
        self.assertEqual(builder.builds, builds + 2, "each built once")
        self.assertEqual([len(w) for w in both], [2, 3])
        self.assertEqual(order, [[0, 0], [0, 1], [1, 1], [1, 2], [2, 2]])
        self.assertEqual(rm.fresh["d"], [s for w in both[1] for s in w])

if __name__ == "__main__":
    unittest.main()
