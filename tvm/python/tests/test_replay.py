"""Replay of traces: exact, tile repair across shapes, anchor transfer, CUDA without a GPU.

The traces come from `sample` (random valid schedules of the design space), so nothing is
measured here.
"""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from tasks import CUDA, LLVM, conv_task, matmul_task  # noqa: E402
from worker_client import shared_worker  # noqa: E402


def sample(task, target, count=4):
    r = shared_worker().call("sample", {"task": task, "target": target, "count": count, "seed": 7})
    assert len(r["traces"]) >= 2, r
    return r["traces"]


def replay(task, target, traces):
    return shared_worker().call("replay", {"task": task, "target": target, "traces": traces})[
        "results"
    ]


class TestReplay(unittest.TestCase):
    def test_exact(self):
        for task in (conv_task("fused_conv2d_add_relu"), matmul_task("matmul")):
            traces = sample(task, LLVM)
            for res in replay(task, LLVM, traces):
                self.assertEqual((res["ok"], res["mode"], res["error"]), (True, "exact", None))

    def test_tile_repair_across_shapes(self):
        # a 3x3 conv trace of 16x16 spatial replayed on 32x32 and on 28x28 with 12 channels
        traces = sample(conv_task("c16", hw=16), LLVM)
        for task in (conv_task("c32", hw=32), conv_task("c28", hw=28, c=12)):
            for res in replay(task, LLVM, traces):
                self.assertTrue(res["ok"], res)
                self.assertEqual(res["mode"], "repaired")
                self.assertGreater(res["repaired_decisions"], 0)

    def test_repair_tile_rule(self):
        from tgc_worker.replay import repair_tile

        self.assertEqual(repair_tile([2, 8, 1, 1], 16, 64), [2, 8, 1, 1])  # fits: unchanged
        self.assertEqual(repair_tile([2, 8, 1, 1], 32, 64), [4, 8, 1, 1])  # outermost grows
        self.assertEqual(repair_tile([1, 4, 2, 8], 28, 64), [1, 2, 2, 7])  # nearest divisors
        r = repair_tile([1, 1, 1, 64], 100, 16)
        self.assertEqual(r[0] * r[1] * r[2] * r[3], 100)
        self.assertLessEqual(r[3], 16)

    def test_anchor_transfer(self):
        # conv2d+relu traces applied to conv2d+add+relu
        src = conv_task("fused_conv2d_relu", tail="relu")
        dst = conv_task("fused_conv2d_add_relu")
        traces = sample(src, LLVM)
        items = [{"trace": t, "source_task": src} for t in traces]
        results = replay(dst, LLVM, items)
        for res in results:
            # TVM's anchor transfer needs the trace to schedule the relu; traces that leave it
            # alone replay directly instead (the add stays its own loop nest): "repaired"
            self.assertTrue(res["ok"], res)
            self.assertIn(res["mode"], ("anchor", "repaired"))
        self.assertIn("anchor", [r["mode"] for r in results])
        # the other way round (the trace names T_add, which conv2d+relu lacks): it does not
        # replay, and without the source task there is nothing to anchor on
        back = sample(dst, LLVM, count=2)
        for res in replay(src, LLVM, back):
            self.assertFalse(res["ok"])
            self.assertIsNone(res["mode"])
            self.assertIn("exact: replay failed: ScheduleError", res["error"])
            self.assertIn("no source_task", res["error"])
            self.assertNotIn("\n", res["error"])
        # with it, TVM's anchor transfer takes over; it fails for traces that leave the
        # elementwise tail alone (design spaces without consumer fusion), one line each
        results = replay(src, LLVM, [{"trace": t, "source_task": dst} for t in sample(dst, LLVM)])
        self.assertIn("anchor", [r["mode"] for r in results])
        for res in results:
            self.assertIn((res["ok"], res["mode"]), [(True, "anchor"), (False, None)])
            if not res["ok"]:
                self.assertIn("anchor: failed", res["error"])

    def test_source_workload_stands_for_source_task(self):
        # what the cache stores for a task is `lower`'s workload_json; sent as
        # source_workload it must enable the same modes as the tgc task itself
        w = shared_worker()
        src = conv_task("fused_conv2d_relu", tail="relu")
        dst = conv_task("fused_conv2d_add_relu")
        wl = w.call("lower", {"task": src, "target": LLVM})["workload_json"]
        traces = sample(src, LLVM)
        by_task = replay(dst, LLVM, [{"trace": t, "source_task": src} for t in traces])
        by_workload = replay(dst, LLVM, [{"trace": t, "source_workload": wl} for t in traces])
        self.assertEqual(by_workload, by_task)
        self.assertIn("anchor", [r["mode"] for r in by_workload])
        # a trace of another shape with its source workload: repaired, never "exact"
        c16 = conv_task("c16", hw=16)
        wl16 = w.call("lower", {"task": c16, "target": LLVM})["workload_json"]
        for res in replay(conv_task("c32", hw=32), LLVM,
                          [{"trace": t, "source_workload": wl16} for t in sample(c16, LLVM)]):
            self.assertEqual((res["ok"], res["mode"]), (True, "repaired"), res)
        # its own workload: exact
        for res in replay(c16, LLVM, [{"trace": t, "source_workload": wl16} for t in sample(c16, LLVM)]):
            self.assertEqual((res["ok"], res["mode"]), (True, "exact"), res)
        # garbage is a one-line bad_params error naming the entry; the worker goes on
        for bad, why in (("{not json", "not a TVM IRModule JSON"), (7, "must be a string")):
            resp = w.request(
                "replay",
                {"task": dst, "target": LLVM, "traces": [{"trace": traces[0], "source_workload": bad}]},
            )
            self.assertEqual(resp["error"]["kind"], "bad_params", resp)
            self.assertIn("traces[0].source_workload", resp["error"]["message"])
            self.assertIn(why, resp["error"]["message"])
            self.assertNotIn("\n", resp["error"]["message"])
        self.assertEqual(len(replay(dst, LLVM, traces[:1])), 1)

    def test_blocks_named_after_another_imports_tensors(self):
        # TVM names a reduction block after its input: stock TVM's import of a model calls
        # it `lv293_red` where tgc's workload (parameters named by position) has `p0_red`.
        # A trace of the one replays on the other, the same schedule; a name with no unique
        # counterpart is not guessed.
        from tvm import te, topi
        from tvm.s_tir import Trace

        from tgc_worker.lower import normalize_mod
        from tgc_worker.replay import new_schedule, replay, sample_traces, with_workload_block_names
        from tgc_worker.tvmutil import make_context, parse_target

        def mean(name):
            x = te.placeholder((1, 64, 7, 7), name=name)
            y = topi.divide(topi.sum(x, axis=[2, 3], keepdims=True), 49.0)
            return normalize_mod(te.create_prim_func([x, y]))

        theirs, ours = mean("lv293"), mean("p0")
        target = parse_target(LLVM)
        ctx = make_context(theirs, target, "mean")
        traces, _ = sample_traces(ctx, 3, seed=7, max_attempts=40)
        self.assertGreaterEqual(len(traces), 2)
        postprocs = list(make_context(ours, target, "mean").space_generator.postprocs)
        for tj in traces:
            with self.assertRaises(Exception):  # as it is, the trace names a missing block
                Trace.apply_json_to_schedule(tj, new_schedule(ours))
            res = replay(ours, target, postprocs, tj)
            self.assertEqual((res.ok, res.mode), (True, "exact"), res.error)
            mine = replay(theirs, target, postprocs, tj).sch
            self.assertEqual(str(res.sch.mod["main"].body), str(mine.mod["main"].body).replace("lv293", "p0"))
        odd = [[[k, i, ["x_y_red", *a[1:]] if a and a[0] == "lv293_red" else a, o]
                for k, i, a, o in traces[0][0]], traces[0][1]]
        self.assertIsNone(with_workload_block_names(odd, ours))
        self.assertFalse(replay(ours, target, postprocs, odd).ok)

    def test_anchor_transfers_give_traces_the_search_can_mutate(self):
        # ReLU6 as from_onnx writes it (maximum/minimum by rank-0 bound tensors) and as a
        # Relax clip: another tail, so the transfer is TVM's anchor transfer. Its trace looks
        # up the loops of every block at the end; where a block's loops depend on a sampled
        # compute location, MetaSchedule's compute-location mutation makes TVM's replay fail
        # fatally (the search round ends with "old_outputs.size() == new_outputs.size()").
        # replay() gives the program without those dead lookups, and says when the trace is
        # still unsafe; the session keeps such a seed from the search (it is still measured).
        import tvm_ffi
        from tvm import te, topi
        from tvm.s_tir import Trace
        from tvm.s_tir import meta_schedule as ms

        from tgc_worker.lower import normalize_mod
        from tgc_worker.replay import new_schedule, replay, run_postprocs, sample_traces, strip_postproc
        from tgc_worker.session import SearchView
        from tgc_worker.tvmutil import make_context, parse_target, trace_to_json

        def conv(x, w):
            return topi.nn.conv2d_nchw(x, w, 1, 1, 1)

        x = te.placeholder((1, 8, 16, 16), name="x")
        w = te.placeholder((8, 8, 3, 3), name="w")
        lo, hi = te.placeholder((), name="lo"), te.placeholder((), name="hi")
        src = normalize_mod(te.create_prim_func(
            [x, w, lo, hi, topi.minimum(topi.maximum(conv(x, w), lo), hi)]))
        dst = normalize_mod(te.create_prim_func([x, w, topi.clip(conv(x, w), 0.0, 6.0)]))
        target = parse_target(LLVM)
        traces, _ = sample_traces(make_context(src, target, "src"), 8, seed=3, max_attempts=80)
        self.assertGreaterEqual(len(traces), 6)
        postprocs = list(make_context(dst, target, "dst").space_generator.postprocs)

        def breaks(trace):
            """A compute-location decision whose replay fails in TVM's fatal check."""
            base = trace.simplified(remove_postproc=True)
            for inst in base.insts:
                if inst.kind.name == "SampleComputeLocation":
                    for d in range(-2, 32):
                        try:
                            base.with_decision(inst, d, True).apply_to_schedule(new_schedule(dst), True)
                        except Exception as e:  # noqa: BLE001
                            if "old_outputs.size() == new_outputs.size()" in str(e):
                                return True
            return False

        unsafe_raw, outcomes = 0, []
        for tj in traces:
            res = replay(dst, target, postprocs, tj, src)
            if not res.ok:
                continue  # TVM's transfer needs the trace to schedule the tail
            self.assertEqual(res.mode, "anchor")
            outcomes.append(res)
            # what TVM's anchor transfer gives, as it gives it
            s = new_schedule(src)
            Trace.apply_json_to_schedule(strip_postproc(tj), s)
            raw = new_schedule(dst)
            ms.trace_apply.schedule_using_anchor_trace(raw, s.trace, target)
            self.assertIsNone(run_postprocs(raw, postprocs))
            self.assertTrue(tvm_ffi.structural_equal(res.sch.mod, raw.mod))
            self.assertLessEqual(len(res.sch.trace.insts), len(raw.trace.insts))
            unsafe_raw += breaks(raw.trace)
            self.assertEqual(res.search_safe, not breaks(res.sch.trace))
        self.assertGreaterEqual(len(outcomes), 3)
        # the case this guards against occurs with TVM's own transfer
        self.assertGreater(unsafe_raw, 0)
        self.assertLessEqual(sum(not r.search_safe for r in outcomes), unsafe_raw)

        # the session's view of its database leaves out what it hides: MetaSchedule's search
        # runs its rounds over it
        db = ms.database.MemoryDatabase()
        wl = db.commit_workload(dst)
        hidden = set()
        for i, res in enumerate(outcomes):
            db.commit_tuning_record(ms.database.TuningRecord(
                res.sch.trace, wl, [1e-5 * (i + 1)], target,
                ms.arg_info.ArgInfo.from_prim_func(dst["main"])))
            if not res.search_safe:
                hidden.add(json.dumps(trace_to_json(res.sch.trace)))
        self.assertTrue(hidden)
        view = SearchView(db, hidden)
        self.assertEqual(len(view.get_top_k(wl, len(outcomes))), len(outcomes) - len(hidden))

        def two_rounds(database, seed):
            ctx = make_context(dst, target, "dst", seed=seed, strategy=ms.search_strategy.EvolutionarySearch(
                population_size=32, init_measured_ratio=1.0, genetic_num_iters=3))
            ctx.pre_tuning(16, 8, ctx.generate_design_space(), database,
                           ms.cost_model.CostModel.create("random"))
            try:
                for _ in range(2):
                    cands = ctx.generate_measure_candidates()
                    self.assertTrue(cands)
                    ctx.notify_runner_results(cands, [ms.runner.RunnerResult([1e-5], None) for _ in cands])
            except RuntimeError as e:  # TVM wraps its check in parallel_for_dynamic's error
                self.assertIn("old_outputs.size() == new_outputs.size()", str(e))
                return False
            return True

        # (over the whole database, 11 of 40 seeds' rounds failed here: TVM's threads make
        # it a matter of chance, so only the view is asserted)
        for seed in range(1, 9):
            self.assertTrue(two_rounds(view, seed), seed)

    def test_cuda_without_gpu(self):
        w = shared_worker()
        task = conv_task("fused_conv2d_add_relu")
        lowered = w.call("lower", {"task": task, "target": CUDA})
        self.assertIn("max_threads_per_block", lowered["target"])
        traces = sample(task, CUDA)
        for res in replay(task, CUDA, traces):
            self.assertEqual((res["ok"], res["mode"]), (True, "exact"), res)
        for res in replay(conv_task("c32", hw=32), CUDA, traces):
            self.assertEqual((res["ok"], res["mode"]), (True, "repaired"), res)
        src = conv_task("fused_conv2d_relu", tail="relu")
        items = [{"trace": t, "source_task": src} for t in sample(src, CUDA)]
        results = replay(task, CUDA, items)
        for res in results:
            self.assertTrue(res["ok"], res)
        self.assertIn("anchor", [r["mode"] for r in results])
        mm = matmul_task("matmul")
        for res in replay(mm, CUDA, sample(mm, CUDA, count=2)):
            self.assertEqual((res["ok"], res["mode"]), (True, "exact"), res)
        # a CPU trace on CUDA: either the GPU postprocessors make it valid (they bind unbound
        # loops to threads) or it is rejected with a one-line reason
        for res in replay(task, CUDA, sample(task, LLVM, count=2)):
            self.assertEqual(res["ok"], res["error"] is None, res)
            if not res["ok"]:
                self.assertNotIn("\n", res["error"])


if __name__ == "__main__":
    unittest.main()
