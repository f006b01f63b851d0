#!/usr/bin/env python3
"""Build benchmark (issue 14.6): model B compiled with zero trials from a cache that model A
filled, against TVM's default schedules and against B tuned, all in one run.

    cargo build --release -p tgc-cli
    python3 scripts/bench_build.py --a resnet50 --b wide_resnet50_2 [--b resnet101 ...] \
        [--trials 64] [--population 512] [--k 2] [--k 0] [--repeat 50] [--out DIR]

A and B are anything `tgc tune` accepts (ONNX files, text IR, zoo names). Steps:

1. `tgc tune A` into an empty cache (--trials per task, --no-measure): the cache A leaves.
2. For each B and each K (--k, repeatable; default the CLI's default): from a copy of A's
   cache, `tgc build B --measure-candidates K`: the zero-trial build (exact records where B
   shares A's tasks, structural/family transfers elsewhere, K candidates measured per
   transferred task). Its report gives the tiers applied and the build time (the command's
   wall time is recorded too: worker start and model import included).
3. B tuned: `tgc tune B` into its own empty cache at the same budget (--b-tuned-from-a:
   seeded from a copy of A's cache instead), then `tgc build B` from that cache (every task
   exact).
4. Latency, measured at the end one library after the other in one process each:
   `tgc bench LIB --repeat R` for every zero-trial build and for the tuned one, and with
   `--untuned B` once: TVM's default schedules (an untuned build of B).

Ratios (median latencies): zero / tuned (goal: at most 1.3), untuned / zero (goal: at least
5), and the zero-trial build's time (goal: under 60 s). Reports (tgc.tune/1, tgc.build/1,
tgc.bench/1) go to --out with a summary in bench.json (schema tgc.bench-build/1).
"""

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TGC = ROOT / "target" / "release" / "tgc"


def run(cmd, label):
    print(f"$ {' '.join(str(c) for c in cmd)}", flush=True)
    t0 = time.time()
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{label} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout, wall


def tune(model, cache, report, args):
    cmd = [TGC, "tune", model, "--cache", cache, "--report", report,
           "--trials-per-task", args.trials, "--population", args.population,
           "--trials-per-round", args.per_round, "--no-measure",
           "--work-dir", pathlib.Path(report).with_suffix("")]
    if int(args.max_tasks) > 0:
        cmd += ["--max-tasks", args.max_tasks]
    _, wall = run(cmd, f"tgc tune {model}")
    rep = json.loads(pathlib.Path(report).read_text())
    rep["command_wall_s"] = wall
    return rep


def build(model, cache, out, report, k):
    cmd = [TGC, "build", model, "--cache", cache, "-o", out, "--report", report,
           "--work-dir", pathlib.Path(report).with_suffix("")]
    if k is not None:
        cmd += ["--measure-candidates", k]
    _, wall = run(cmd, f"tgc build {model}")
    rep = json.loads(pathlib.Path(report).read_text())
    rep["command_wall_s"] = wall
    return rep


def bench(lib, repeat, untuned=None):
    cmd = [TGC, "bench", lib, "--repeat", repeat, "--json"]
    if untuned:
        cmd += ["--untuned", untuned]
    out, _ = run(cmd, f"tgc bench {lib}")
    return json.loads(out)


def ratio(x, y):
    return None if x is None or not y else x / y


def fmt_ms(lat):
    return f"{lat['median']:.3f} ms [p10 {lat['p10']:.3f}, p90 {lat['p90']:.3f}]"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True)
    p.add_argument("--b", action="append", required=True)
    p.add_argument("--trials", type=int, default=64, help="trials per task for A and B tuned")
    p.add_argument("--population", type=int, default=512)
    p.add_argument("--per-round", type=int, default=16)
    p.add_argument("--max-tasks", type=int, default=0)
    p.add_argument("--k", type=int, action="append",
                   help="--measure-candidates of the zero-trial build (repeatable)")
    p.add_argument("--repeat", type=int, default=50, help="timing runs per library")
    p.add_argument("--b-tuned-from-a", action="store_true",
                   help="tune B seeded from A's cache instead of an empty one")
    p.add_argument("--out", help="directory for reports (default: a temp dir)")
    args = p.parse_args()
    if not TGC.exists():
        sys.exit(f"{TGC}: not built; run `cargo build --release -p tgc-cli` first")
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="tgc-bench-build-"))
    out.mkdir(parents=True, exist_ok=True)
    for k in ("trials", "population", "per_round", "max_tasks", "repeat"):
        setattr(args, k, str(getattr(args, k)))
    ks = args.k or [None]

    cache_a = out / "a.sqlite"
    for f in out.glob("*.sqlite*"):
        shutil.rmtree(f) if f.is_dir() else f.unlink()
    rep_a = tune(args.a, cache_a, out / "a_tune.json", args)
    summary = {"schema": "tgc.bench-build/1", "a": args.a, "trials_per_task": int(args.trials),
               "a_tuning_wall_s": rep_a["totals"]["tuning_wall_s"], "pairs": []}

    for i, b in enumerate(args.b):
        pair = {"b": b, "zero": []}
        for k in ks:
            tag = f"b{i}_k{'default' if k is None else k}"
            cache = out / f"{tag}.sqlite"
            shutil.copy(cache_a, cache)
            rep = build(b, cache, out / f"{tag}.so", out / f"{tag}_build.json",
                        None if k is None else str(k))
            pair["zero"].append({"k": rep["measure_candidates"], "library": str(out / f"{tag}.so"),
                                 "build_wall_s": rep["totals"]["build_wall_s"],
                                 "command_wall_s": rep["command_wall_s"],
                                 "tasks_by_tier": rep["totals"]["tasks_by_tier"],
                                 "candidates_measured": rep["totals"]["candidates_measured"],
                                 "outputs_match": (rep["end_to_end"] or {}).get("outputs_match")})
        cache_t = out / f"b{i}_tuned.sqlite"
        if args.b_tuned_from_a:
            shutil.copy(cache_a, cache_t)
        rep_t = tune(b, cache_t, out / f"b{i}_tune.json", args)
        rep_tb = build(b, cache_t, out / f"b{i}_tuned.so", out / f"b{i}_tuned_build.json", "0")
        pair["tuned"] = {"tuning_wall_s": rep_t["totals"]["tuning_wall_s"],
                         "trials": rep_t["totals"]["trials"],
                         "tasks_by_tier": rep_tb["totals"]["tasks_by_tier"],
                         "library": str(out / f"b{i}_tuned.so")}

        # latency, one library after the other; the untuned build with the first
        for j, z in enumerate(pair["zero"]):
            r = bench(z["library"], args.repeat, untuned=b if j == 0 else None)
            (out / f"b{i}_k{z['k']}_bench.json").write_text(json.dumps(r, indent=2) + "\n")
            z["latency_ms"] = r["latency_ms"]
            if j == 0:
                pair["untuned_latency_ms"] = r["untuned_latency_ms"]
        r = bench(pair["tuned"]["library"], args.repeat)
        (out / f"b{i}_tuned_bench.json").write_text(json.dumps(r, indent=2) + "\n")
        pair["tuned"]["latency_ms"] = r["latency_ms"]
        for z in pair["zero"]:
            z["vs_tuned"] = ratio(z["latency_ms"]["median"], pair["tuned"]["latency_ms"]["median"])
            z["speedup_over_defaults"] = ratio(pair["untuned_latency_ms"]["median"],
                                               z["latency_ms"]["median"])
        summary["pairs"].append(pair)

        print(f"\n{args.a} -> {b}")
        print(f"  TVM defaults:   {fmt_ms(pair['untuned_latency_ms'])}")
        print(f"  B tuned:        {fmt_ms(pair['tuned']['latency_ms'])} "
              f"({pair['tuned']['trials']} trials, {pair['tuned']['tuning_wall_s']:.0f} s)")
        for z in pair["zero"]:
            tiers = ", ".join(f"{t} {n}" for t, n in z["tasks_by_tier"].items())
            print(f"  zero-trial K={z['k']}: {fmt_ms(z['latency_ms'])}, built in "
                  f"{z['build_wall_s']:.1f} s ({z['command_wall_s']:.1f} s with start-up); "
                  f"{z['vs_tuned']:.2f}x tuned, {z['speedup_over_defaults']:.2f}x faster than "
                  f"defaults; tiers: {tiers}")

    (out / "bench.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nreports in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
