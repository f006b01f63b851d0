"""Measuring on RPC devices: a real TVM tracker and real servers on loopback (rpc_cluster),
the worker's `rpc_devices`, a tuning session with `rpc`, and a device dropping out mid-batch."""

import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
# the pools' processes unpickle tgc_worker functions: let them import the package
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.dirname(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)

from rpc_cluster import Cluster, free_port  # noqa: E402
from tasks import LLVM, matmul_task  # noqa: E402
from worker_client import shared_worker  # noqa: E402

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
}


class TestRpc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.key = f"tgc-test-{os.getpid()}"
        cls.cluster = Cluster(key=cls.key).start(2)
        cls.tmp = tempfile.TemporaryDirectory(prefix="tgc-rpc-test-")

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.tmp.cleanup()

    def rpc(self, cluster=None, sessions=2):
        c = cluster or self.cluster
        return {"tracker_host": "127.0.0.1", "tracker_port": c.port, "key": c.key, "sessions": sessions}

    def test_rpc_devices_lists_the_servers_under_the_key(self):
        # a server the other tests had a session with registers again a moment after it
        self.cluster.wait_free(2)
        w = shared_worker()
        r = w.call("rpc_devices", {"tracker_host": "127.0.0.1", "tracker_port": self.cluster.port, "key": self.key})
        self.assertEqual(r["tracker"], f"127.0.0.1:{self.cluster.port}")
        self.assertEqual((r["key"], r["free"], r["pending"]), (self.key, 2, 0))
        self.assertEqual(len(r["servers"]), 2, r)
        self.assertIn(self.key, r["keys"])
        other = w.call("rpc_devices", {"tracker_host": "127.0.0.1", "tracker_port": self.cluster.port, "key": "no-such-key"})
        self.assertEqual((other["free"], other["servers"]), (0, []))
        self.assertNotIn("no-such-key", other["keys"])

    def test_an_unreachable_tracker_is_one_rpc_error(self):
        port = free_port()  # nothing listens there
        t0 = time.time()
        resp = shared_worker().request("rpc_devices", {"tracker_host": "127.0.0.1", "tracker_port": port, "key": "k"})
        self.assertLess(time.time() - t0, 20)  # not TVM's minute of retries
        self.assertEqual(resp["error"]["kind"], "rpc", resp)
        self.assertIn(f"RPC tracker 127.0.0.1:{port}: cannot connect", resp["error"]["message"])
        self.assertNotIn("\n", resp["error"]["message"])
        bad = shared_worker().request("rpc_devices", {"tracker_host": "127.0.0.1", "tracker_port": 0, "key": "k"})
        self.assertEqual(bad["error"]["kind"], "bad_params", bad)

    def open(self, task, **params):
        """A session in this process (what the server's tune_open does)."""
        from tgc_worker.server import _task_and_target
        from tgc_worker.session import open_session, session

        p = {**TINY, "task": task, "target": LLVM, **params}
        p.setdefault("work_dir", os.path.join(self.tmp.name, f"{task['name']}-{id(p)}"))
        lt, target = _task_and_target(p)
        return session({"session": open_session(lt, target, p)["session"]})

    def test_a_session_measures_on_the_devices(self):
        from tgc_worker import pool

        s = self.open(matmul_task("rpc_a", m=16, k=32, n=16), rpc=self.rpc())
        self.assertIsNone(s.opened()["threads"], "the device's server chooses its threads")
        r = s.search(6, 300.0)
        self.assertEqual(len(r["results"]), 6)
        self.assertTrue(all(m["run_secs"] for m in r["results"]), r)
        self.assertGreater(r["run_s"], 0)
        recs = s.records(8)["records"]
        w = s.windows([recs[0]["candidate"]] * 2, 3, 1)
        self.assertEqual([len(x["run_secs"]) for x in w["windows"]], [3, 3])
        closed = s.close(True, 64)
        self.assertEqual((closed["failed_runs"], closed["run_errors"]), (0, []))
        # measured through the remote runner of this tracker and key, not the local one
        remote = [x for t, x in pool._REMOTE.items() if t.port == self.cluster.port]
        self.assertEqual(len(remote), 1)
        self.assertGreaterEqual(remote[0].runs, 6 + 2)

    def test_bad_rpc_params_are_bad_params(self):
        from tgc_worker.errors import WorkerError

        task = matmul_task("rpc_bad", m=8, k=8, n=8)
        for rpc, needle in (
            ({"tracker_host": "127.0.0.1", "tracker_port": 1, "key": "k"}, "missing field 'sessions'"),
            ({**self.rpc(), "sessions": 0}, "sessions must be an int"),
            ({**self.rpc(), "tracker_port": 70000}, "tracker_port must be an int"),
            ({**self.rpc(), "key": ""}, "rpc.key must be"),
            ({**self.rpc(), "extra": 1}, "unknown field 'extra'"),
            ("127.0.0.1:9190", "rpc must be an object"),
        ):
            with self.assertRaises(WorkerError) as cm:
                self.open(task, rpc=rpc)
            self.assertEqual(cm.exception.kind, "bad_params")
            self.assertIn(needle, cm.exception.message)

    def test_a_candidate_for_an_arm_device_is_cross_compiled_here(self):
        """What RemoteRunner uploads for an aarch64 board: AArch64 objects in a tar (the
        device's server links them), built by the local builder; the device tag the driver
        adds does not change the code."""
        import tarfile

        from tvm.s_tir.meta_schedule.builder import BuilderInput

        from tgc_worker.pool import TrialBuilder
        from tgc_worker.server import _task_and_target

        a64 = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "num-cores": 4, "tag": "rpc:rasp4"}
        lt, target = _task_and_target({"task": matmul_task("rpc_a64", m=8, k=8, n=8), "target": a64})
        self.assertEqual(target.tag, "rpc:rasp4")
        builder = TrialBuilder(1, 120.0)
        res = None
        try:
            (res,) = builder.build([BuilderInput(lt.workload, target)])
            self.assertIsNone(res.error_msg)
            with tarfile.open(str(res.artifact_path)) as tar:
                objects = [n for n in tar.getnames() if n.endswith(".o")]
                self.assertTrue(objects, tar.getnames())
                head = tar.extractfile(objects[0]).read(20)
            self.assertEqual(head[:4], b"\x7fELF")
            self.assertEqual(int.from_bytes(head[18:20], "little"), 183)  # EM_AARCH64
        finally:
            builder.shutdown()
            if res is not None and res.artifact_path:
                shutil.rmtree(os.path.dirname(str(res.artifact_path)), ignore_errors=True)

    def test_a_device_that_drops_out_fails_only_its_candidates(self):
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo
        from tvm.s_tir.meta_schedule.builder import BuilderInput
        from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, RunnerInput

        from tgc_worker.pool import RemoteRunner, RpcTracker, TrialBuilder
        from tgc_worker.server import _task_and_target

        lt, target = _task_and_target({"task": matmul_task("rpc_drop", m=16, k=16, n=16), "target": LLVM})
        builder = TrialBuilder(1, 120.0)
        built = []
        with Cluster(key=f"{self.key}-drop").start(2) as cluster:
            runner = RemoteRunner(RpcTracker("127.0.0.1", cluster.port, cluster.key, 2), 60.0)
            try:
                built[:] = builder.build([BuilderInput(lt.workload, target) for _ in range(4)])
                self.assertTrue(all(b.error_msg is None for b in built), built)
                args = ArgInfo.from_entry_func(lt.workload, remove_preproc=True)
                inputs = [RunnerInput(b.artifact_path, "cpu", args) for b in built]
                # each timing holds its device for about two seconds
                slow = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=2000)
                out = []
                t = threading.Thread(target=lambda: out.extend(runner.measure(inputs, slow)))
                t.start()
                deadline = time.time() + 60
                while cluster.free() > 0 and time.time() < deadline:
                    time.sleep(0.05)  # both devices in a session
                self.assertEqual(cluster.free(), 0)
                # past the sessions' handshakes (a kill before one is no failure: TVM's
                # tracker client asks for another device), well inside their timing runs
                time.sleep(0.5)
                cluster.kill_server(1)
                t.join(timeout=180)
                self.assertFalse(t.is_alive())
                self.assertEqual(len(out), 4)
                failed = [err for secs, err, _ in out if err is not None]
                ok = [secs for secs, err, _ in out if err is None]
                self.assertEqual([load for _, _, load in out], [None] * 4)  # devices elsewhere
                # the candidate on the lost device failed; the other device measured the rest
                self.assertGreaterEqual(len(failed), 1, out)
                self.assertGreaterEqual(len(ok), 2, out)
                self.assertTrue(all(s and s[0] > 0 for s in ok), ok)
                self.assertTrue(all("RemoteRunner" in e for e in failed), failed)
                self.assertEqual(runner.failures.count, len(failed))
                # one line each: where it failed, then the error TVM raised, not the traceback
                for m in runner.failures.since(0):
                    self.assertRegex(m, r"^RemoteRunner \(key .* at tracker 127\.0\.0\.1:\d+\): An exception occurred: ")
                    self.assertNotIn("Traceback", m)
                self.assertEqual(len(runner.failures.since(0)), len(set(runner.failures.since(0))))
            finally:
                runner.shutdown()
                builder.shutdown()
                for b in built:
                    shutil.rmtree(os.path.dirname(str(b.artifact_path)), ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
