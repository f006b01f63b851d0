"""tgc.ms.Database against real TVM: stock MetaSchedule (tune_relax, MetaScheduleApplyDatabase)
reads and writes the tgc cache, tgc tune and TVM's tuner find each other's records by the
TVM workload, and a model's task the cache has no record of gets a neighbour's transfer.
About a minute and a half."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import unittest
from unittest import mock
from pathlib import Path

import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.script import relax as R

import support
import tgc
import tgc.ms


def conv_relu(c: int = 8, hw: int = 16):
    """conv+relu on 1xcxhwxhw: one task; the weight is an input."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, c, hw, hw), "float32"))
    w = relax.Var("w", relax.TensorType((c, c, 3, 3), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.relu(R.nn.conv2d(x, w, padding=[1, 1, 1, 1])))
        bb.emit_func_output(out)
    return bb.get()


# the package's tgc_worker (the one tgc.ms imports), for the build processes too
WORKER = os.fspath(tgc._native.worker_dir())
if WORKER not in sys.path:
    sys.path.insert(0, WORKER)
os.environ["PYTHONPATH"] = os.pathsep.join([WORKER] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def builder():
    """TVM's LocalBuilder with room for its first build, which imports TVM in a fresh process
    (over the default 30 s on a loaded 2-core machine: every trial then fails). It compiles
    with tgc_worker's build function, MetaSchedule's `default_build` without its import of
    TVM's tensor intrinsics, which LocalBuilder's fresh processes of every build round would
    pay (about 40 s a round here); what is built, and every record, stays stock's."""
    from tgc_worker import build_worker

    return ms.builder.LocalBuilder(timeout_sec=300, f_build=build_worker.build)


@derived_object
class CountingBuilder(ms.builder.PyBuilder):
    """TVM's LocalBuilder (as `builder()`), counting the candidates of each build round."""

    def __init__(self):
        super().__init__()
        self.inner = builder()
        self.rounds: list[int] = []

    def build(self, build_inputs):
        self.rounds.append(len(build_inputs))
        return self.inner.build(build_inputs)


def lowered(mod, target):
    """What TVM's own pipeline tunes and compiles: legalized, fused PrimFuncs."""
    with target:
        return relax.get_pipeline("zero")(mod)


def scheduled(mod) -> dict:
    return {gv.name_hint: bool(f.attrs and f.attrs.get("tirx.is_scheduled"))
            for gv, f in mod.functions.items() if not isinstance(f, relax.Function)}


def commit_half(cache: str, target_json: str, records: list, half: int) -> int:
    """In another process: a Database on `cache` commits `records[half::2]`."""
    db = tgc.ms.Database(cache, tvm.target.Target(json.loads(target_json)))
    wl, bodies = records[0], records[1]
    workload = db.commit_workload(ms.database.Workload.from_json(wl).mod)
    for body in bodies[half::2]:
        db.commit_tuning_record(ms.database.TuningRecord.from_json(body, workload))
    return len(bodies[half::2])


class TestMsDatabase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name)
        cls.cache = str(cls.dir / "ms.sqlite")
        cls.db = tgc.ms.Database(cls.cache, "llvm")
        cls.target = cls.db.target
        cls.mod = conv_relu()
        # stock MetaSchedule tunes the model into the tgc cache
        ms.relax_integration.tune_relax(lowered(cls.mod, cls.target), {}, cls.target,
                                        str(cls.dir / "ms"), max_trials_global=8,
                                        num_trials_per_iter=8, database=cls.db, builder=builder())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_stock_tuner_commits_into_the_cache(self):
        stats = tgc.Cache(self.cache, create=False).stats()
        self.assertEqual(stats["imported_workloads"], 1, stats)
        self.assertEqual(len(self.db), 8, "every trial committed")
        self.assertGreater(stats["records"], 0, stats)
        self.assertLessEqual(stats["records"], 8, stats)
        # a fresh Database (another process's view) applies the best record at zero trials
        fresh = tgc.ms.Database(self.cache, self.target, create=False)
        with self.target, fresh:
            applied = relax.transform.MetaScheduleApplyDatabase(enable_warning=True)(lowered(self.mod, self.target))
        self.assertEqual(scheduled(applied), {"fused_conv2d_relu": True})
        # only the Database's target: another target finds nothing
        other = tgc.ms.Database(self.cache, "llvm-generic", create=False)
        wl = other.commit_workload(_task_mod(self.mod, self.target))
        self.assertEqual(other.get_top_k(wl, 4), [])
        self.assertEqual(len(fresh.get_top_k(fresh.commit_workload(_task_mod(self.mod, self.target)), 4)), 4)

    def test_tgc_tune_takes_the_stock_records_as_exact_hits(self):
        cache = str(self.dir / "copy.sqlite")
        with sqlite3.connect(self.cache) as src, sqlite3.connect(cache) as dst:
            src.backup(dst)
        r = tgc.tune(self.mod, name="convrelu", cache=cache, trials_per_task=4, trials_per_round=4,
                     population=32, tolerance=3.0, measure=False, work_dir=self.dir / "tgc")
        (t,) = r["tasks"]
        self.assertEqual((t["tier"], t["stopped"]), ("tvm-hash", "exact_hit"), t)
        self.assertEqual(t["seed_source"]["origin"], tgc.ms.SOURCE, t)

    def test_stock_compile_applies_what_tgc_tune_wrote(self):
        cache = str(self.dir / "tgc.sqlite")
        mod = conv_relu(16)
        tgc.tune(mod, name="convrelu16", cache=cache, trials_per_task=4, trials_per_round=4,
                 population=32, measure=False, work_dir=self.dir / "tgc16")
        db = tgc.ms.Database(cache, self.target, create=False)
        with self.target, db:
            applied = relax.transform.MetaScheduleApplyDatabase(enable_warning=True)(lowered(mod, self.target))
        self.assertEqual(scheduled(applied), {"fused_conv2d_relu": True})

    def test_a_neighbours_records_seed_stock_tuning_of_the_model(self):
        # tgc tuned conv+relu at 16x16; the Database of a model with it at 32x32, which the
        # cache has no record of, serves the neighbour's traces repaired for 32x32
        cache = str(self.dir / "neighbour.sqlite")
        tgc.tune(conv_relu(8), name="a16", cache=cache, trials_per_task=4, trials_per_round=4,
                 population=32, measure=False, work_dir=self.dir / "a16")
        b = conv_relu(8, hw=32)
        seeded_cache = str(self.dir / "neighbour-seeded.sqlite")
        with sqlite3.connect(cache) as src, sqlite3.connect(seeded_cache) as dst:
            src.backup(dst)
        plain = tgc.ms.Database(cache, self.target, create=False)
        self.assertEqual(plain.get_top_k(plain.commit_workload(_task_mod(b, self.target)), 4), [])
        db = tgc.ms.Database(cache, self.target, create=False, model=b, name="b32")
        wl = db.commit_workload(_task_mod(b, self.target))
        self.assertTrue(db.has_workload(wl.mod))
        recs = db.get_top_k(wl, 4)
        self.assertGreaterEqual(len(recs), 1)
        self.assertEqual(db.transfers_served, len(recs))
        for r in recs:  # B's schedule, as stock MetaSchedule applies a record
            sch = tvm.s_tir.Schedule(wl.mod)
            r.trace.apply_to_schedule(sch, remove_postproc=False)
            self.assertIsNone(r.run_secs)
        # MetaScheduleApplyDatabase schedules B's task from it at zero trials
        with self.target, db:
            applied = relax.transform.MetaScheduleApplyDatabase(enable_warning=True)(lowered(b, self.target))
        self.assertEqual(scheduled(applied), {"fused_conv2d_relu": True})
        # stock tune_relax on B asks for it (its evolutionary search starts from the database)
        served = db.transfers_served
        ms.relax_integration.tune_relax(lowered(b, self.target), {}, self.target, str(self.dir / "b32"),
                                        max_trials_global=4, num_trials_per_iter=4, database=db,
                                        builder=builder())
        self.assertGreater(db.transfers_served, served)
        self.assertGreaterEqual(len(plain.get_top_k(plain.commit_workload(wl.mod), 8)), 1,
                                "the trials are committed into the cache")
        # SeededSearch measures the transfers in its first round, which the search fills up;
        # they count as trials
        db = tgc.ms.Database(seeded_cache, self.target, create=False, model=b, name="b32")
        wl = db.commit_workload(_task_mod(b, self.target))
        seeds = [_applied_hash(wl.mod, r) for r in db.get_top_k(wl, 2)]
        counting = CountingBuilder()
        ms.relax_integration.tune_relax(lowered(b, self.target), {}, self.target, str(self.dir / "b32s"),
                                        max_trials_global=4, num_trials_per_iter=4, database=db,
                                        builder=counting, strategy=tgc.ms.SeededSearch(seeds=2))
        self.assertEqual(counting.rounds, [4], "the seeds and the search share one round")
        committed = db.get_all_tuning_records()
        self.assertEqual(len(committed), 4)
        self.assertEqual([_applied_hash(wl.mod, r) for r in committed[:len(seeds)]], seeds)
        self.assertEqual(len({_applied_hash(wl.mod, r) for r in committed}), 4, "no seed twice")
        self.assertTrue(all(r.run_secs for r in committed[:len(seeds)]), "the seeds were measured")

    def test_a_family_transfer_is_served_when_the_search_can_mutate_it(self):
        # ReLU6 tuned from ONNX (TVM's from_onnx workload: maximum/minimum by bound tensors),
        # asked for by a Relax model with R.clip: the family tier, TVM's anchor transfer.
        # Stock MetaSchedule's search mutates what get_top_k returns and fails fatally on an
        # anchor trace that looks up loops a compute-location mutation changes, so those are
        # skipped and counted; the rest are served.
        from tgc_worker.replay import search_safe

        onnx_path = self.dir / "conv_clip.onnx"
        support.onnx_conv_clip(onnx_path)
        cache = str(self.dir / "clip.sqlite")
        tgc.tune(onnx_path, name="onnx", cache=cache, trials_per_task=8, trials_per_round=4,
                 population=32, measure=False, work_dir=self.dir / "clip")
        b = support.relax_conv_clip()
        db = tgc.ms.Database(cache, self.target, create=False, model=b, name="relax")
        wl = db.commit_workload(_task_mod(b, self.target))
        recs = db.get_top_k(wl, 8)
        self.assertGreaterEqual(len(recs), 1)
        self.assertGreaterEqual(len(recs) + db.transfers_skipped, 3)  # the cache keeps 3 per task
        for r in recs:
            self.assertIsNone(r.run_secs)
            self.assertTrue(search_safe(r.trace, wl.mod))

    def test_tvms_tuning_pipeline_tunes_into_the_current_database(self):
        # static_shape_tuning tunes into its work_dir's JSON database in stock TVM; with a
        # tgc Database entered (and tgc.ms imported) it tunes into the cache and applies it
        cache = str(self.dir / "pipeline.sqlite")
        db = tgc.ms.Database(cache, self.target)
        work_dir = self.dir / "pipeline"
        pipeline = relax.get_pipeline("static_shape_tuning", target=self.target, total_trials=4,
                                      work_dir=str(work_dir))
        # the pipeline's own LocalBuilder keeps the 30 s timeout, which the tensor-intrinsics
        # import of each fresh build process races (its build round took 31 s in a passing
        # run here; in another, every trial failed): it builds as `builder()` does
        local = builder()
        with self.target, db, mock.patch.object(ms.Builder, "create", lambda *_, **__: local):
            out = pipeline(conv_relu(4))
        self.assertEqual(len(db), 4, "every trial committed into the Database")
        self.assertGreater(tgc.Cache(cache, create=False).stats()["records"], 0)
        self.assertFalse((work_dir / "database_tuning_record.json").exists())
        self.assertEqual(scheduled(out), {"fused_conv2d_relu": True})
        # a later tgc tune of the model finds the pipeline's record by workload
        r = tgc.tune(conv_relu(4), name="pipeline", cache=cache, trials_per_task=4,
                     trials_per_round=4, population=32, tolerance=3.0, measure=False,
                     work_dir=self.dir / "pipeline-tgc")
        self.assertEqual(r["tasks"][0]["tier"], "tvm-hash", r["tasks"][0])

    def test_two_processes_commit_into_one_cache_and_lose_nothing(self):
        wl = self.db.commit_workload(_task_mod(self.mod, self.target))
        recs = self.db.get_top_k(wl, 64)
        self.assertGreaterEqual(len(recs), 4)
        payload = (json.loads(json.dumps(tgc.ms._json_safe(wl.as_json()))),
                   [json.loads(json.dumps(tgc.ms._json_safe(r.as_json()))) for r in recs])
        cache = str(self.dir / "shared.sqlite")
        tgc.Cache(cache).stats()  # created before the writers start
        target_json = json.dumps(tgc.ms._json_safe(self.target.export()))
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(2) as pool:
            done = pool.starmap(commit_half, [(cache, target_json, payload, 0), (cache, target_json, payload, 1)])
        self.assertEqual(sum(done), len(recs))
        self.assertEqual(tgc.Cache(cache, create=False).stats()["records"], len(recs))

    def test_a_failed_candidate_is_not_stored_and_a_bad_record_is_one_error(self):
        cache = str(self.dir / "bad.sqlite")
        db = tgc.ms.Database(cache, self.target)
        wl = self.db.commit_workload(_task_mod(self.mod, self.target))
        best = self.db.get_top_k(wl, 1)[0]
        own = db.commit_workload(wl.mod)
        failed = ms.database.TuningRecord(best.trace, own, [1e10], self.target, best.args_info)
        db.commit_tuning_record(failed)
        self.assertEqual(tgc.Cache(cache, create=False).stats()["records"], 0)
        native = tgc._native.Cache(cache, False)
        with self.assertRaises(tgc.TgcError) as e:
            native.ms_commit('["12", "%%%"]', "[]", tgc.ms.SOURCE)
        self.assertIn(cache, str(e.exception))
        self.assertIn("base64", str(e.exception))
        self.assertEqual(tgc.Cache(cache, create=False).stats()["records"], 0)

    def test_a_record_that_does_not_replay_is_skipped_and_counted(self):
        # conv+relu's best trace committed as a record of a matmul (its blocks are not
        # there): stock MetaSchedule would fail replaying it, so get_top_k leaves it out
        cache = str(self.dir / "misfiled.sqlite")
        db = tgc.ms.Database(cache, self.target)
        best = self.db.get_top_k(self.db.commit_workload(_task_mod(self.mod, self.target)), 1)[0]
        bb = relax.BlockBuilder()
        a = relax.Var("a", relax.TensorType((16, 32), "float32"))
        b = relax.Var("b", relax.TensorType((32, 16), "float32"))
        with bb.function("main", [a, b]):
            with bb.dataflow():
                out = bb.emit_output(R.matmul(a, b))
            bb.emit_func_output(out)
        matmul = db.commit_workload(_task_mod(bb.get(), self.target))
        db.commit_tuning_record(ms.database.TuningRecord(best.trace, matmul, [1e-5], self.target,
                                                         best.args_info))
        self.assertEqual(tgc.Cache(cache, create=False).stats()["records"], 1)
        for _ in range(2):
            self.assertEqual(db.get_top_k(matmul, 4), [])
        self.assertEqual(db.records_skipped, 1)
        # the records that do replay are served as before
        self.assertEqual(len(self.db.get_top_k(self.db.commit_workload(_task_mod(self.mod, self.target)), 4)), 4)
        self.assertEqual(self.db.records_skipped, 0)


def _applied_hash(workload, record) -> int:
    """The structural hash of the schedule `record` gives `workload`."""
    sch = tvm.s_tir.Schedule(workload)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return tvm_ffi.structural_hash(sch.mod)


def _task_mod(mod, target):
    """The fused task's PrimFunc as MetaSchedule's task extraction gives it (its workload)."""
    (task,) = ms.relax_integration.extract_tasks(lowered(mod, target), target)
    return task.dispatched[0]


if __name__ == "__main__":
    unittest.main()
