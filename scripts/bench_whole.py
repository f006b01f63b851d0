#!/usr/bin/env python3
"""Whole-model tuning benchmark: every task of the model, one run budget for both arms, the
model's latency as a function of tuning time, with onnxruntime and TVM's default schedules
timed on the same file in the same run.

    cargo build --release -p tgc-cli
    python3 scripts/bench_whole.py --model models/keras-resnet50.onnx --trials 448 \
        [--pieces 4] [--seeded B.onnx ...] [--out DIR] [--table FILE]

Per model (A, then each --seeded B):
- tgc: `tgc tune MODEL --trials N/P` run P times on one cache (A: empty; each B: a copy of
  the cache A's run left), each piece going on where the last stopped (its exact hits are
  final, its budget goes to the tasks not reached yet). After each piece the model is built
  from the cache (`tgc build --check`: every task with its cached or transferred schedule)
  and timed end to end. The curve: (tuning seconds so far, measured latency) after each
  piece; at 0 s, TVM's default schedules (A) or the model built from A's cache (B).
- stock TVM: `scripts/stock_tvm.py` (TVM's own ONNX import, `tune_relax` with
  `max_trials_global=N` over all extracted tasks, its gradient task scheduler,
  `compile_relax`), its tuning seconds and its model's latency, timed the same way
  (`build_and_measure`'s 20 runs of one call).
- the anchors, after the last piece, on the same file, inputs and threads: TVM's default
  schedules and onnxruntime (`tgc build --bench --onnxruntime`).

Reported: each arm's tuning seconds, trials, seconds per measured trial and final
latency; the seconds tgc needed to reach stock's final latency (the first piece at or below
it, interpolated linearly from the piece before), and stock's time over that; the final
latencies over onnxruntime's. Reports and bench.json go to --out; --table writes the
markdown table, --plot the curves (`tgc curves`); --reuse keeps reports already there (run
a long protocol in parts).
Python for stock_tvm.py: $TGC_PYTHON, else tvm/python/bootstrap.sh's.
"""

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.dont_write_bytecode = True
import stock_tvm  # noqa: E402  (no TVM import at module level)
from bench_tune import snapshot  # noqa: E402  (a cache and its cost models, consistently)


def run_json(cmd, report, reuse):
    report = pathlib.Path(report)
    if reuse and report.exists():
        print(f"reusing {report}", flush=True)
    else:
        print("$", " ".join(map(str, cmd)), flush=True)
        subprocess.run([str(c) for c in cmd], check=True)
    return json.loads(report.read_text())


def model_args(args) -> list:
    """How tgc prepares the model in every tune and build of its arm."""
    return ["--layout", args.layout, *(["--pack-weights"] if args.pack_weights else [])]


def tgc_arm(model, cache, out, stem, args):
    """The tgc arm of one model: P pieces, each tuned then built and timed. Returns the
    pieces' reports and the builds' (the last with the anchors)."""
    tgc = args.tgc
    per_piece = max(1, args.trials // args.pieces)
    pieces, builds = [], []
    for j in range(args.pieces):
        rep = out / f"{stem}_tgc_{j}.json"
        pieces.append(run_json([
            tgc, "tune", model, "--cache", cache, "--trials", per_piece,
            "--trials-per-round", args.per_round, "--population", args.population,
            "--no-measure", "--report", rep, "--work-dir", out / f"{stem}_tgc_{j}",
            *model_args(args),
        ], rep, args.reuse))
        last = j == args.pieces - 1
        brep = out / f"{stem}_build_{j}.json"
        builds.append(run_json([
            tgc, "build", model, "--cache", cache, "-o", out / f"{stem}_{j}.so", "--check",
            *(["--bench", "--onnxruntime"] if last else []),
            "--report", brep, "--work-dir", out / f"{stem}_build_{j}", *model_args(args),
        ], brep, args.reuse))
    return pieces, builds


def start_latency(model, cache, out, stem, args):
    """The model before this run's tuning: built from the cache it starts with (None for an
    empty cache: TVM's defaults, from the last build's bench)."""
    if cache is None:
        return None
    brep = out / f"{stem}_build_start.json"
    b = run_json([
        args.tgc, "build", model, "--cache", cache, "-o", out / f"{stem}_start.so", "--check",
        "--cache-read-only", "--report", brep, "--work-dir", out / f"{stem}_build_start",
        *model_args(args),
    ], brep, args.reuse)
    return b["end_to_end"]["latency_ms"]["median"]


def stock_arm(model, target, out, stem, args):
    rep = out / f"{stem}_stock.json"
    if args.reuse and rep.exists():
        print(f"reusing {rep}", flush=True)
        return json.loads(rep.read_text())
    work = out / f"{stem}_stock"
    if work.exists():
        shutil.rmtree(work)  # MetaSchedule would resume from a crashed run's database
    extra = ["--population", str(args.population), "--builder-timeout", "300"]
    cmd = stock_tvm.command(model, target, args.trials, args.per_round, work, rep,
                            extra=extra)
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return json.loads(rep.read_text())


def reach(curve, goal_ms):
    """Seconds at which the curve [(s, ms)] first reaches `goal_ms` (linear between
    points); None when it never does."""
    prev = None
    for t, lat in curve:
        if lat <= goal_ms:
            if prev is None:
                return t
            t0, l0 = prev
            return t0 + (t - t0) * (l0 - goal_ms) / (l0 - lat)
        prev = (t, lat)
    return None


def summarize(model, start_ms, pieces, builds, stock):
    bench = builds[-1]["bench"]
    defaults = bench["untuned_latency_ms"]["median"]
    ort = bench["onnxruntime"]["latency_ms"]["median"]
    curve = [(0.0, start_ms if start_ms is not None else defaults)]
    spent = 0.0
    for p, b in zip(pieces, builds):
        spent += p["totals"]["tuning_wall_s"]
        curve.append((spent, b["end_to_end"]["latency_ms"]["median"]))
    trials = sum(p["totals"]["trials"] for p in pieces)
    s = {
        "model": model,
        "curve": curve,
        "tgc": {"tuning_s": spent, "trials": trials,
                "s_per_trial": spent / trials if trials else None,
                "latency_ms": curve[-1][1],
                "tasks_tuned": len({t["name"] for p in pieces for t in p["tasks"]})},
        "defaults_ms": defaults,
        "onnxruntime_ms": ort,
        "onnxruntime_version": bench["onnxruntime"]["version"],
        "threads": bench["latency_ms"]["threads"],
        "stock": None,
    }
    if stock is not None:
        st = stock["totals"]
        lat = stock_tvm.e2e_ms(stock)
        t_reach = reach(curve, lat) if lat is not None else None
        s["stock"] = {"tuning_s": st["tuning_wall_s"], "trials": st["trials"],
                      "s_per_trial": st["s_per_trial"], "latency_ms": lat,
                      "tasks_extracted": stock["tasks_extracted"],
                      "tasks_with_records": sum(1 for t in stock["tasks"] if t["trials"])}
        s["tgc_reach_s"] = t_reach
        s["time_ratio"] = st["tuning_wall_s"] / t_reach if t_reach else None
    return s


def fmt(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


def reach_cells(s) -> str:
    """The last two cells of tgc's row: when it reached stock's latency, stock's time over
    that."""
    t = s.get("tgc_reach_s")
    if t is None:
        return "not reached | n/a" if s["stock"] else "n/a | n/a"
    if t == 0:
        return "before tuning (the model from the cache) | n/a"
    return f"{t:.1f} s | {s['time_ratio']:.2f}x"


def table(summaries, args) -> str:
    threads = summaries[0]["threads"]
    rows = [f"{args.trials} trials per arm and model (tgc in {args.pieces} runs of "
            f"{args.trials // args.pieces}), rounds of {args.per_round}, population "
            f"{args.population}; every latency on {threads} runtime threads"
            + ("; tgc's convolutions in NHWC (`--layout nhwc`), stock's as TVM's importer "
               "gives them" if args.layout == "nhwc" else "")
            + ("; tgc's weights packed (`--pack-weights`)" if args.pack_weights else "") + ".", "",
            "| model | arm | tuning s | trials | s/trial | latency ms | / onnxruntime | "
            "reaches stock's latency at | stock time / that |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        name = pathlib.Path(s["model"]).name
        t = s["tgc"]
        rows.append(f"| {name} | tgc | {fmt(t['tuning_s'])} | {t['trials']} | "
                    f"{fmt(t['s_per_trial'], '.2f')} | {fmt(t['latency_ms'])} | "
                    f"{fmt(t['latency_ms'] / s['onnxruntime_ms'], '.2f')} | "
                    f"{reach_cells(s)} |")
        st = s["stock"]
        if st:
            rows.append(f"| {name} | stock `tune_relax` | {fmt(st['tuning_s'])} | {st['trials']} | "
                        f"{fmt(st['s_per_trial'], '.2f')} | {fmt(st['latency_ms'])} | "
                        f"{fmt(st['latency_ms'] / s['onnxruntime_ms'], '.2f') if st['latency_ms'] else 'n/a'} | | |")
        rows.append(f"| {name} | onnxruntime {s['onnxruntime_version']} | | | | "
                    f"{fmt(s['onnxruntime_ms'])} | 1.00 | | |")
        rows.append(f"| {name} | TVM defaults | | | | {fmt(s['defaults_ms'])} | "
                    f"{fmt(s['defaults_ms'] / s['onnxruntime_ms'], '.2f')} | | |")
    return "\n".join(rows) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="model A, an ONNX file")
    p.add_argument("--seeded", action="append", default=[],
                   help="a model B (ONNX) tuned from a copy of A's cache (repeatable)")
    p.add_argument("--trials", type=int, required=True, help="the run budget of each arm")
    p.add_argument("--pieces", type=int, default=4, help="tgc runs of trials/pieces each")
    p.add_argument("--per-round", type=int, default=8)
    p.add_argument("--population", type=int, default=128)
    p.add_argument("--no-stock", action="store_true", help="skip the stock TVM arm")
    p.add_argument("--layout", choices=["model", "nhwc"], default="model",
                   help="tgc's --layout (the stock arm tunes the model as TVM imports it)")
    p.add_argument("--pack-weights", action="store_true",
                   help="tgc's --pack-weights (weights packed once, layout-free for the schedules)")
    p.add_argument("--out", default=None)
    p.add_argument("--reuse", action="store_true", help="keep reports already in --out")
    p.add_argument("--table", default=None, help="write the markdown table here")
    p.add_argument("--plot", default=None, help="draw the curves here (.svg or .png: tgc curves)")
    p.add_argument("--tgc", default=str(ROOT / "target" / "release" / "tgc"))
    args = p.parse_args()
    if args.pieces < 1 or args.trials < args.pieces:
        sys.exit("--pieces must be at least 1 and at most --trials")
    if not pathlib.Path(args.tgc).exists():
        sys.exit(f"{args.tgc}: not built; run `cargo build --release -p tgc-cli` first")
    for m in [args.model, *args.seeded]:
        if not (m.endswith(".onnx") and pathlib.Path(m).is_file()):
            sys.exit(f"{m}: not an ONNX file (both arms and onnxruntime read the same file)")
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="tgc-bench-whole-"))
    out.mkdir(parents=True, exist_ok=True)

    summaries = []
    a_cache = out / "a_cache.sqlite"
    for k, model in enumerate([args.model, *args.seeded]):
        stem = "a" if k == 0 else f"b{k - 1}"
        cache = a_cache
        if k > 0:
            cache = out / f"{stem}_cache.sqlite"
            if not (args.reuse and cache.exists()):
                # with the warm-started cost model beside it, as a user's cache has it
                snapshot(out / "a_cache_final.sqlite", cache)
        start = start_latency(model, cache if k > 0 else None, out, stem, args)
        pieces, builds = tgc_arm(model, cache, out, stem, args)
        if k == 0 and not (args.reuse and (out / "a_cache_final.sqlite").exists()):
            snapshot(a_cache, out / "a_cache_final.sqlite")
        stock = None if args.no_stock else stock_arm(model, pieces[0]["target"], out, stem, args)
        summaries.append(summarize(model, start, pieces, builds, stock))
    (out / "bench.json").write_text(json.dumps({"schema": "tgc.bench-whole/1",
                                                "trials": args.trials, "pieces": args.pieces,
                                                "per_round": args.per_round,
                                                "population": args.population,
                                                "models": summaries}, indent=2) + "\n")
    text = table(summaries, args)
    print(text)
    for s in summaries:
        print(f"{pathlib.Path(s['model']).name}: tgc's curve (s, ms): "
              + ", ".join(f"({t:.0f}, {l:.1f})" for t, l in s["curve"]))
    if args.table:
        pathlib.Path(args.table).write_text(text)
    if args.plot:
        subprocess.run([args.tgc, "curves", out / "bench.json", "-o", args.plot], check=True)
    print(f"reports: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
