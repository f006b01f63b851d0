//! `tgc build` and `tgc bench` with real TVM: a cache filled by tuning model A for a few
//! trials, then model B (the same blocks at another resolution, so every task is a
//! structural neighbour of one of A's) built with zero trials, both measuring the top
//! candidate and ranking only; the records a measured transfer writes back make the next
//! build of B exact. The library loads in stock TVM (no tgc code) and computes what an
//! untuned build computes; bad input is a one-line error.
//!
//! Needs the pinned TVM venv (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh` creates it).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Two tasks: conv+relu, and conv+add+relu (the residual).
fn model(hw: u32) -> String {
    format!(
        r#"module @blocks{hw} {{
  func @main(%x: tensor<1x8x{hw}x{hw}xf32>, %w1: tensor<8x8x3x3xf32>, %w2: tensor<8x8x3x3xf32>) -> tensor<1x8x{hw}x{hw}xf32> {{
    %0 = nn.conv2d(%x, %w1) {{padding = [1, 1, 1, 1]}} : tensor<1x8x{hw}x{hw}xf32>
    %1 = nn.relu(%0) : tensor<1x8x{hw}x{hw}xf32>
    %2 = nn.conv2d(%1, %w2) {{padding = [1, 1, 1, 1]}} : tensor<1x8x{hw}x{hw}xf32>
    %3 = add(%2, %x) : tensor<1x8x{hw}x{hw}xf32>
    %4 = nn.relu(%3) : tensor<1x8x{hw}x{hw}xf32>
    return %4
  }}
}}
"#
    )
}

fn tgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(args)
        .output()
        .expect("tgc runs")
}

fn ok(args: &[&str]) -> Output {
    let out = tgc(args);
    assert!(
        out.status.success(),
        "tgc {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The one-line error of a failing command.
fn error_line(args: &[&str]) -> String {
    let out = tgc(args);
    assert_eq!(out.status.code(), Some(1), "tgc {args:?} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr}");
    lines[0].to_string()
}

/// An empty directory `PREFIX-PID` under the temp dir, whatever an earlier run left there.
fn fresh_dir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("file written")).expect("JSON")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Builds `model` into `out` (`-o`), with the report beside it; the report.
fn build(dir: &Path, model: &str, out: &str, extra: &[&str]) -> Value {
    let report = dir.join(format!("{out}.report.json"));
    let so = dir.join(out);
    let mut args = vec!["build", model, "-o", s(&so), "--report", s(&report)];
    args.extend_from_slice(extra);
    let printed = ok(&args);
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(
        stdout.contains("tvm.runtime.load_module(") && stdout.contains("relax.VirtualMachine("),
        "the calling convention is printed: {stdout}"
    );
    read_json(&report)
}

/// Loads both libraries with stock TVM only, runs them on the same random inputs (the
/// sidecar's shapes) and returns the largest difference over the output's scale. An input
/// of `b` that its sidecar marks as a permutation of the model's (`--layout nhwc`) gets
/// `a`'s array transposed so; inputs marked packed (`--pack-weights`) go through the
/// library's `main_transform_params` first.
fn stock_tvm_difference(a: &Path, b: &Path) -> f64 {
    let python = tgc_tvm::find_python().expect("the TVM venv");
    let script = r#"
import json, sys
import numpy as np
import tvm
from tvm import relax
a, b = sys.argv[1], sys.argv[2]
spec = json.load(open(a + ".json"))
rng = np.random.default_rng(0)
arrays = [rng.uniform(-1, 1, size=i["shape"]).astype(i["dtype"]) for i in spec["inputs"]]
assert all(i.get("permutation") is None for i in spec["inputs"])
outs = []
for path in (a, b):
    inputs = json.load(open(path + ".json"))["inputs"]
    given = [x if i.get("permutation") is None else np.ascontiguousarray(np.transpose(x, i["permutation"]))
             for x, i in zip(arrays, inputs)]
    assert [list(x.shape) for x in given] == [i["shape"] for i in inputs], path
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    args = [tvm.runtime.tensor(x, tvm.cpu()) for x in given]
    if any(i.get("packed") for i in inputs):  # --pack-weights: packed once, then main
        packed = vm["main_transform_params"]([x for x, i in zip(args, inputs) if i.get("packed")])
        args = [x for x, i in zip(args, inputs) if not i.get("packed")] + list(packed)
    outs.append(vm["main"](*args).numpy())
assert list(outs[0].shape) == spec["outputs"][0]["shape"], (outs[0].shape, spec["outputs"])
scale = float(np.max(np.abs(outs[1])))
print(float(np.max(np.abs(outs[0] - outs[1]))) / scale)
"#;
    let out = Command::new(python)
        .args(["-c", script, s(a), s(b)])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a number")
}

/// A copy of a closed cache file (its write-ahead log too, when one is left).
/// `scripts/stock_apply.py ARGS` in the TVM venv: its JSON report.
fn stock_apply(args: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/stock_apply.py");
    let out = Command::new(tgc_tvm::find_python().expect("the TVM venv"))
        .arg(&script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report JSON")
}

fn copy_cache(from: &Path, to: &Path) {
    std::fs::copy(from, to).expect("cache copied");
    let wal = |p: &Path| PathBuf::from(format!("{}-wal", p.display()));
    if wal(from).exists() {
        std::fs::copy(wal(from), wal(to)).expect("cache log copied");
    }
}

fn tasks_of(report: &Value) -> &Vec<Value> {
    report["tasks"].as_array().expect("tasks")
}

#[test]
fn zero_trial_builds_from_a_neighbours_cache_load_in_stock_tvm() {
    let dir = fresh_dir("tgc-build-test");
    let (a, b) = (dir.join("a.tgc"), dir.join("b.tgc"));
    std::fs::write(&a, model(16)).expect("model A");
    std::fs::write(&b, model(12)).expect("model B");
    let cache = dir.join("cache.sqlite");
    bad_input_is_one_line(&dir, &b, &cache);
    ok(&[
        "tune",
        s(&a),
        "--cache",
        s(&cache),
        "--trials-per-task",
        "2",
        "--trials-per-round",
        "2",
        "--population",
        "32",
        "--no-measure",
        "--work-dir",
        s(&dir.join("tune-a")),
    ]);
    // A cache that holds only A's records, for the rank-only build below.
    let only_a = dir.join("only-a.sqlite");
    copy_cache(&cache, &only_a);

    // A cache for another target: no records for this one, a one-line error.
    let e = error_line(&[
        "build",
        s(&b),
        "-o",
        s(&dir.join("x.so")),
        "--cache",
        s(&cache),
        "--target",
        "llvm-generic",
    ]);
    assert!(
        e.contains(s(&cache)) && e.contains("no records for target"),
        "{e}"
    );

    a_measured_transfer_is_written_back(&dir, &a, &b, &cache);
    exact_ranked_and_default_builds_run_in_stock_tvm(&dir, &b, &cache, &only_a);
    // tgc bench on a library, with the untuned model for comparison.
    let out = ok(&[
        "bench",
        s(&dir.join("b-ranked.so")),
        "--repeat",
        "5",
        "--untuned",
        s(&b),
        "--json",
    ]);
    let bench: Value = serde_json::from_slice(&out.stdout).expect("bench JSON");
    assert_eq!(bench["schema"], "tgc.bench/1");
    assert_eq!(bench["latency_ms"]["repeat"], 5);
    assert!(bench["untuned_latency_ms"]["median"].as_f64().unwrap() > 0.0);
    let e = error_line(&["bench", s(&dir.join("b.tgc"))]);
    assert!(e.contains("b.tgc.json") && e.contains("sidecar"), "{e}");
    let e = error_line(&["bench", s(&dir.join("b-ranked.so")), "--onnxruntime", s(&b)]);
    assert!(e.contains(s(&b)) && e.contains("ONNX file"), "{e}");
    onnxruntime_beside_tvm(&dir);

    let _ = std::fs::remove_dir_all(&dir);
}

/// No cache yet, an unreadable one, an unsupported op: one line each, nothing written.
fn bad_input_is_one_line(dir: &Path, b: &Path, cache: &Path) {
    // Bad input first: no cache yet, an unreadable one, an unsupported op.
    let e = error_line(&[
        "build",
        s(b),
        "-o",
        s(&dir.join("x.so")),
        "--cache",
        s(cache),
    ]);
    assert!(e.contains(s(cache)) && e.contains("no cache there"), "{e}");
    let garbage = dir.join("garbage.sqlite");
    std::fs::write(&garbage, "not a database").expect("garbage written");
    let e = error_line(&[
        "build",
        s(b),
        "-o",
        s(&dir.join("x.so")),
        "--cache",
        s(&garbage),
    ]);
    assert!(
        e.contains(s(&garbage)) && e.contains("not a tgc cache"),
        "{e}"
    );
    let bad = dir.join("bad.tgc");
    std::fs::write(&bad, model(12).replace("nn.relu(%0)", "nn.frobnicate(%0)")).expect("bad");
    let e = error_line(&["build", s(&bad), "-o", s(&dir.join("x.so")), "--no-cache"]);
    assert!(
        e.contains(s(&bad)) && e.contains("unknown op 'nn.frobnicate'"),
        "{e}"
    );
    assert!(!dir.join("x.so").exists());
}

/// K = 1 from A's records: each task's best valid neighbour measured, applied, written back.
fn a_measured_transfer_is_written_back(dir: &Path, a: &Path, b: &Path, cache: &Path) {
    // K = 1: each task's best valid neighbour is measured (one trial), applied and written
    // back; the outputs are checked and the library timed.
    let measured = build(
        dir,
        s(b),
        "b-measured.so",
        &[
            "--cache",
            s(cache),
            "--measure-candidates",
            "1",
            "--check",
            "--bench",
            "--work-dir",
            s(&dir.join("build-1")),
        ],
    );
    assert_eq!(measured["schema"], "tgc.build/1");
    assert_eq!(measured["end_to_end"]["outputs_match"], true, "{measured}");
    assert_eq!(tasks_of(&measured).len(), 2);
    for t in tasks_of(&measured) {
        assert_eq!(t["plan_tier"], "structural", "{t}");
        assert_eq!(t["tier"], "structural-transfer", "{t}");
        assert_eq!(t["measured"], 1, "{t}");
        assert_eq!(t["latency_kind"], "measured", "{t}");
        assert!(t["latency_s"].as_f64().unwrap() > 0.0, "{t}");
        assert!(t["records_written"].as_u64().unwrap() >= 1, "{t}");
        assert_eq!(t["source"]["model"], s(a), "{t}");
        assert!(t["tried"].as_u64().unwrap() >= 1, "{t}");
    }
    assert_eq!(
        measured["totals"]["tasks_by_tier"]["structural-transfer"],
        2
    );
    assert_eq!(measured["totals"]["candidates_measured"], 2);
    let bench = &measured["bench"];
    let lat = &bench["latency_ms"];
    assert_eq!(lat["repeat"], 50);
    assert!(lat["p10"].as_f64() <= lat["median"].as_f64(), "{bench}");
    assert!(lat["median"].as_f64() <= lat["p90"].as_f64(), "{bench}");
    assert!(bench["untuned_latency_ms"]["median"].as_f64().unwrap() > 0.0);
    arithmetic_adds_up(&measured, 2);
    let sidecar = read_json(&dir.join("b-measured.so.json"));
    assert_eq!(sidecar["schema"], "tgc.artifact/1");
    let inputs: Vec<&str> = sidecar["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["x", "w1", "w2"]);
    assert_eq!(sidecar["inputs"][1]["role"], "weight");
    assert_eq!(
        sidecar["outputs"][0]["shape"],
        serde_json::json!([1, 8, 12, 12])
    );

    // The written-back records carry K trials of effort (never 0, which would read as a
    // complete search): a later `tgc tune` of B resumes their search. Their provenance
    // says a build measured them.
    let db = rusqlite::Connection::open(cache).expect("cache opens");
    let trials: Vec<(Option<i64>, String)> = db
        .prepare("SELECT trials, source FROM records WHERE model = ?1")
        .unwrap()
        .query_map([s(b)], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(!trials.is_empty());
    assert!(
        trials
            .iter()
            .all(|(t, src)| *t == Some(1) && src == "build"),
        "{trials:?}"
    );
    drop(db);
}

/// An exact build, a rank-only build and TVM's defaults, all loaded by stock TVM.
fn exact_ranked_and_default_builds_run_in_stock_tvm(
    dir: &Path,
    b: &Path,
    cache: &Path,
    only_a: &Path,
) {
    // The next build of B is exact: the records as they are, nothing measured. Without
    // --check (or --bench) the model is built once and exported, nothing runs.
    let exact = build(dir, s(b), "b-exact.so", &["--cache", s(cache)]);
    assert!(exact["end_to_end"].is_null(), "{exact}");
    assert!(exact["bench"].is_null(), "{exact}");
    for t in tasks_of(&exact) {
        assert_eq!(t["tier"], "exact", "{t}");
        assert_eq!(t["measured"], 0, "{t}");
        assert_eq!(t["latency_kind"], "cached", "{t}");
    }

    // K = 0 from A's records only: ranked, the first candidate that replays is applied.
    let ranked = build(
        dir,
        s(b),
        "b-ranked.so",
        &["--cache", s(only_a), "--measure-candidates", "0", "--check"],
    );
    for t in tasks_of(&ranked) {
        assert_eq!(t["tier"], "structural-transfer", "{t}");
        assert_eq!(t["measured"], 0, "{t}");
        assert!(t["mode"] == "repaired" || t["mode"] == "anchor", "{t}");
        assert_eq!(
            t["tried"].as_u64().unwrap(),
            t["failed"].as_u64().unwrap() + 1,
            "{t}"
        );
        assert_eq!(t["records_written"], 0, "{t}");
    }

    // TVM's defaults, and both libraries in stock TVM on the same inputs.
    let untuned = build(dir, s(b), "b-untuned.so", &["--no-cache"]);
    for t in tasks_of(&untuned) {
        assert_eq!(t["tier"], "default", "{t}");
    }
    assert_eq!(untuned["totals"]["tasks_by_tier"]["default"], 2);
    for built in ["b-measured.so", "b-exact.so", "b-ranked.so"] {
        let d = stock_tvm_difference(&dir.join(built), &dir.join("b-untuned.so"));
        assert!(d < 1e-4, "{built}: {d} of the output's scale");
    }
}

#[test]
fn an_onnx_model_with_an_unsupported_op_is_a_one_line_error() {
    // The fixture with one op renamed in place (same length: the protobuf stays valid).
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/onnx/pplcnet-blocks.onnx");
    let mut bytes = std::fs::read(&fixture).expect("fixture");
    let mut renamed = 0;
    while let Some(at) = bytes.windows(9).position(|w| w == b"HardSwish") {
        bytes[at..at + 9].copy_from_slice(b"HardSwisj");
        renamed += 1;
    }
    assert!(renamed > 0, "the fixture has HardSwish nodes");
    let dir = fresh_dir("tgc-build-onnx");
    let model = dir.join("unsupported.onnx");
    std::fs::write(&model, bytes).expect("model written");
    let e = error_line(&["build", s(&model), "-o", s(&dir.join("m.so")), "--no-cache"]);
    assert!(e.contains(s(&model)) && e.contains("unsupported op"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 14.5: `tgc cache export --model` writes only the records a model's tasks need, and
/// stock TVM applies them through its own path (its own ONNX import, compile_relax with a
/// JSONDatabase of the directory).
#[test]
fn a_models_export_feeds_stock_compile_relax() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/onnx/pplcnet-blocks.onnx");
    let dir = fresh_dir("tgc-export-model");
    let cache = dir.join("cache.sqlite");
    let report = dir.join("tune.json");
    ok(&[
        "tune",
        s(&fixture),
        "--cache",
        s(&cache),
        "--max-tasks",
        "2",
        "--trials-per-task",
        "2",
        "--trials-per-round",
        "2",
        "--population",
        "32",
        "--no-measure",
        "--report",
        s(&report),
        "--work-dir",
        s(&dir.join("tune")),
    ]);
    let tuned = read_json(&report);
    // Another model's tasks in the same cache, which the export must leave out.
    let other = dir.join("other.tgc");
    std::fs::write(&other, model(12)).expect("other model");
    ok(&[
        "tune",
        s(&other),
        "--cache",
        s(&cache),
        "--trials-per-task",
        "1",
        "--trials-per-round",
        "1",
        "--population",
        "32",
        "--no-measure",
        "--work-dir",
        s(&dir.join("tune-other")),
    ]);

    let db = dir.join("db");
    let out = ok(&[
        "cache",
        "export",
        s(&db),
        "--cache",
        s(&cache),
        "--model",
        s(&fixture),
    ]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("11 tasks") && printed.contains("2 of them with records exported"),
        "{printed}"
    );
    let lines = |f: &str| {
        std::fs::read_to_string(db.join(f))
            .expect("database file")
            .lines()
            .count()
    };
    assert_eq!(
        lines("database_workload.json"),
        2,
        "only the model's workloads"
    );
    assert!(lines("database_tuning_record.json") >= 2);

    let target = serde_json::to_string(&tuned["target"]).unwrap();
    let applied = stock_apply(&[s(&fixture), s(&db), "--target", &target]);
    assert_eq!(applied["schema"], "tgc.stock-apply/1");
    assert!(
        applied["tasks_extracted"].as_u64().unwrap() >= 2,
        "{applied}"
    );
    assert_eq!(applied["tasks_with_records"], 2, "{applied}");
    // each workload schedules every fused function of it (one per occurrence, unless TVM
    // merged equal ones)
    assert!(
        applied["scheduled_from_database"].as_array().unwrap().len() >= 2,
        "{applied}"
    );
    assert!(
        applied["end_to_end"]["latency_ms"]["median"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(applied["end_to_end"]["outputs_finite"], true);

    alternating_rounds_time_two_databases(&fixture, &db, &target, &applied);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `stock_apply.py --against`: the same model from two databases (here both `db`), timed in
/// alternating rounds in one process.
fn alternating_rounds_time_two_databases(fixture: &Path, db: &Path, target: &str, applied: &Value) {
    let alt = stock_apply(&[
        s(fixture),
        s(db),
        "--against",
        s(db),
        "--rounds",
        "3",
        "--runs",
        "2",
        "--target",
        target,
    ]);
    let a = &alt["alternating"];
    assert_eq!(a["rounds"], 3, "{alt}");
    for arm in [&a["a"], &a["b"]] {
        assert_eq!(arm["tasks_with_records"], 2, "{alt}");
        assert_eq!(
            arm["scheduled_from_database"],
            applied["scheduled_from_database"]
        );
        assert_eq!(
            arm["round_medians_ms"].as_array().unwrap().len(),
            3,
            "{alt}"
        );
    }
    let ratios: Vec<f64> = a["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_f64().unwrap())
        .collect();
    assert_eq!(ratios.len(), 3);
    assert!(ratios.iter().all(|r| r.is_finite() && *r > 0.0), "{alt}");
    let (lo, hi) = (
        a["ratio_min"].as_f64().unwrap(),
        a["ratio_max"].as_f64().unwrap(),
    );
    assert!(lo <= a["ratio_median"].as_f64().unwrap() && a["ratio_median"].as_f64().unwrap() <= hi);
    // TVM's runtime on the thread count tgc's worker uses (the physical cores)
    assert_eq!(
        a["threads"], applied["end_to_end"]["latency_ms"]["threads"],
        "{alt}"
    );
}

/// Runs a Python script of the repository in the TVM venv, the worker package importable;
/// it must succeed.
fn python_script(script: &Path, args: &[&str]) {
    let out = Command::new(tgc_tvm::find_python().expect("the pinned TVM venv"))
        .arg(script)
        .args(args)
        .env("PYTHONPATH", tgc_tvm::worker_dir())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{script:?} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The test ONNX writer (`tvm/python/tests/onnx_models.py`).
fn onnx_models() -> PathBuf {
    tgc_tvm::worker_dir().join("tests/onnx_models.py")
}

/// The report's `arithmetic` agrees with its tasks and its bench: the model's work is every
/// task's FLOPs times its occurrences; `timed` tasks have a latency, a task's rate is its
/// FLOPs over it, their shares of the time add up to one, largest first; the end-to-end
/// rate is the work over the median latency.
fn arithmetic_adds_up(report: &Value, timed: usize) -> f64 {
    let a = &report["arithmetic"];
    let f = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("a number: {v} in {a}"));
    let mut work = 0.0;
    for t in tasks_of(report) {
        assert!(f(&t["flops"]) > 0.0, "{t}");
        work += f(&t["flops"]) * f(&t["occurrences"]);
        if let Some(l) = t["latency_s"].as_f64() {
            let rate = f(&t["flops"]) / l / 1e9;
            assert!((f(&t["gflops"]) - rate).abs() <= 1e-9 * rate, "{t}");
        } else {
            assert!(t["gflops"].is_null(), "{t}");
        }
    }
    assert!(
        (f(&a["model_gflop"]) - work / 1e9).abs() <= 1e-12 * work,
        "{a}"
    );
    assert_eq!(a["tasks_timed"], timed, "{a}");
    let shares: Vec<f64> = a["by_time"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| f(&t["share"]))
        .collect();
    assert_eq!(shares.len(), timed, "{a}");
    if timed > 0 {
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{a}");
        assert!(shares.windows(2).all(|w| w[0] >= w[1]), "{a}");
    }
    let median = f(&report["bench"]["latency_ms"]["median"]);
    let e2e = work / (median / 1e3) / 1e9;
    assert!(
        (f(&a["end_to_end_gflops"]) - e2e).abs() <= 1e-9 * e2e,
        "{a}"
    );
    f(&a["model_gflop"])
}

/// An ONNX model built with TVM's default schedules and timed beside onnxruntime on the same
/// file: both latencies and the ratio, printed and in the report; the work per inference is
/// the two 3x3 convolutions' multiply-adds and at most one operation per element of the
/// ReLUs and the residual add.
fn onnxruntime_beside_tvm(dir: &Path) {
    let onnx = dir.join("b.onnx");
    python_script(&onnx_models(), &["blocks", s(&onnx), "12", "8"]);
    let lib = dir.join("b-onnx.so");
    let report = dir.join("b-onnx.json");
    let out = ok(&[
        "build",
        s(&onnx),
        "-o",
        s(&lib),
        "--no-cache",
        "--bench",
        "--onnxruntime",
        "--report",
        s(&report),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("onnxruntime ") && text.contains("this library / onnxruntime: "),
        "{text}"
    );
    let bench = &read_json(&report)["bench"];
    assert_eq!(bench["untuned_latency_ms"]["repeat"], 10, "{bench}");
    let ort = &bench["onnxruntime"];
    assert_eq!(ort["latency_ms"]["repeat"], 50, "{bench}");
    assert_eq!(
        ort["latency_ms"]["threads"], bench["latency_ms"]["threads"],
        "the same threads: {bench}"
    );
    assert!(
        ort["latency_ms"]["median"].as_f64().unwrap() > 0.0,
        "{bench}"
    );
    assert!(!ort["version"].as_str().unwrap().is_empty(), "{bench}");
    let built = read_json(&report);
    let gflop = arithmetic_adds_up(&built, 0);
    let convs = 2.0 * (2.0 * 8.0 * 8.0 * 9.0 * 12.0 * 12.0);
    let elementwise = 3.0 * 8.0 * 12.0 * 12.0;
    assert!(
        gflop * 1e9 >= convs && gflop * 1e9 <= convs + elementwise,
        "{gflop} GFLOP"
    );
    let ort_rate = built["arithmetic"]["onnxruntime_gflops"].as_f64().unwrap();
    let want = gflop / (ort["latency_ms"]["median"].as_f64().unwrap() / 1e3);
    assert!((ort_rate - want).abs() <= 1e-9 * want, "{built}");
    assert!(
        text.contains("work: ") && text.contains("onnxruntime "),
        "{text}"
    );
    let e = error_line(&[
        "build",
        s(&dir.join("b.tgc")),
        "-o",
        s(&lib),
        "--no-cache",
        "--bench",
        "--onnxruntime",
    ]);
    assert!(e.contains("b.tgc") && e.contains("ONNX file"), "{e}");
}

/// `--layout nhwc` keeps what the model computes: an ONNX model (a transpose from NHWC
/// input, convolutions with bias, a depthwise one, ReLUs, a pool, a residual add and a global
/// average) built as it is and built with its
/// convolutions in NHWC, TVM's default schedules both, gives the same outputs on the same
/// inputs, the NHWC library's kernels being the model's transposed as its sidecar says; and
/// onnxruntime runs the ONNX file beside the NHWC library on those inputs transposed back.
#[test]
fn a_model_in_nhwc_computes_what_the_model_computes() {
    let dir = fresh_dir("tgc-nhwc");
    let onnx = dir.join("m.onnx");
    python_script(&onnx_models(), &["nhwc_blocks", s(&onnx), "10", "8"]);
    let a = dir.join("a.so");
    let n = dir.join("n.so");
    build(&dir, s(&onnx), "a.so", &["--no-cache"]);
    let report = build(
        &dir,
        s(&onnx),
        "n.so",
        &["--no-cache", "--layout", "nhwc", "--bench", "--onnxruntime"],
    );
    let side = read_json(&dir.join("n.so.json"));
    let permuted: Vec<&Value> = side["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| !i["permutation"].is_null())
        .collect();
    assert_eq!(permuted.len(), 3, "the three kernels are HWIO: {side}");
    for i in &permuted {
        assert_eq!(i["permutation"], serde_json::json!([2, 3, 1, 0]), "{side}");
        assert_eq!(i["role"], "weight", "{side}");
    }
    let untransposed = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().contains("permute_dims"))
        .count();
    assert_eq!(
        untransposed, 0,
        "no transposes run with the model: {report}"
    );
    let d = stock_tvm_difference(&a, &n);
    assert!(d < 1e-5, "the NHWC model computes what the model does: {d}");
    let ort = &report["bench"]["onnxruntime"]["latency_ms"]["median"];
    assert!(ort.as_f64().unwrap() > 0.0, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--pack-weights`: the tasks' weights are layout-free, so their records are cached apart
/// from the same tasks' without packing (another TVM workload), the model built from them
/// takes its weights through `main_transform_params` (in other layouts than the model's)
/// and computes, in stock TVM, what TVM's default schedules compute; its output check and
/// timing run.
#[test]
fn packed_weights_are_tuned_cached_and_built_apart() {
    let dir = fresh_dir("tgc-packed");
    let m = dir.join("m.tgc");
    std::fs::write(&m, model(10)).expect("model");
    let cache = dir.join("cache.sqlite");
    let tuned = ok(&[
        "tune",
        s(&m),
        "--pack-weights",
        "--cache",
        s(&cache),
        "--trials-per-task",
        "4",
        "--trials-per-round",
        "4",
        "--population",
        "32",
        "--no-measure",
        "--report",
        s(&dir.join("tune.json")),
        "--work-dir",
        s(&dir.join("tune")),
    ]);
    assert!(tuned.status.success());
    let report = build(
        &dir,
        s(&m),
        "p.so",
        &["--pack-weights", "--cache", s(&cache), "--check", "--bench"],
    );
    for t in tasks_of(&report) {
        assert_eq!(t["tier"], "exact", "{report}");
    }
    assert_eq!(report["end_to_end"]["outputs_match"], true, "{report}");
    let side = read_json(&dir.join("p.so.json"));
    let packed: Vec<bool> = side["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["packed"] == true)
        .collect();
    assert_eq!(packed, [false, true, true], "{side}");
    // Without packing the same tasks are other workloads: no exact record for them.
    let plain = build(
        &dir,
        s(&m),
        "u.so",
        &["--cache", s(&cache), "--cache-read-only"],
    );
    for t in tasks_of(&plain) {
        assert_ne!(t["tier"], "exact", "{plain}");
    }
    build(&dir, s(&m), "d.so", &["--no-cache"]);
    let d = stock_tvm_difference(&dir.join("d.so"), &dir.join("p.so"));
    assert!(
        d < 1e-4,
        "the packed model computes what the model does: {d}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 31.1 through both doors: every way ONNX clamps (Clip with bound tensors, Clip with
/// the min only, HardSigmoid, HardSwish) lowers to the workload stock TVM tunes. A database
/// that stock TVM wrote for every task of the model (its own import and pipeline,
/// `ms.tune_tasks`; `cli/tests/stock_ms_db.py --all-tasks`) gives `tgc build` an exact
/// record for every task once imported, and tgc's export of the model's records schedules
/// every one of TVM's tasks in stock `compile_relax` (none keeps a default schedule).
#[test]
fn a_stock_database_of_every_clamp_builds_exact_and_exports_back() {
    let dir = fresh_dir("tgc-clamps");
    let model = dir.join("clips.onnx");
    python_script(&onnx_models(), &["clips", s(&model), "17"]);
    stock_database_round_trip(&dir, &model, "2", 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same round trip on every task of keras-mobilenetv2 (38 of TVM's tasks, 35 of its 57
/// fused call sites clamp), one stock trial each: about 2 minutes of stock tuning, a build
/// round per task (`stock_ms_db.py` says why its builds skip the tensor-intrinsics import).
#[test]
fn a_stock_database_of_every_mobilenetv2_task_builds_exact_and_exports_back() {
    let dir = fresh_dir("tgc-mnv2-stock");
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/keras-mobilenetv2.onnx");
    stock_database_round_trip(&dir, &model, "1", 38);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Stock TVM tunes every task of `model` (`trials` each) into a JSON database; imported, it
/// gives `tgc build` an exact record of every one of the `n_tasks` tasks by TVM workload
/// hash; exported for the model, stock `compile_relax` finds records for all of TVM's tasks
/// and schedules a function from each.
fn stock_database_round_trip(dir: &Path, model: &Path, trials: &str, n_tasks: usize) {
    let msdb = dir.join("msdb");
    let stock = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/stock_ms_db.py");
    python_script(
        &stock,
        &[s(model), s(&msdb), "--all-tasks", "--trials", trials],
    );
    let manifest = read_json(&msdb.join("manifest.json"));
    let stock_hashes: Vec<&str> = manifest["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["workload_hash"].as_str().expect("hash"))
        .collect();
    assert_eq!(stock_hashes.len(), n_tasks, "{manifest}");

    let cache = dir.join("cache.sqlite");
    ok(&["cache", "import", s(&msdb), "--cache", s(&cache)]);
    let target = r#"{"kind":"llvm","num-cores":2}"#;
    let report = build(
        dir,
        s(model),
        "model.so",
        &["--cache", s(&cache), "--target", target],
    );
    let tasks = tasks_of(&report);
    assert_eq!(tasks.len(), n_tasks, "{report}");
    for t in tasks {
        assert_eq!(
            t["plan_tier"], "tvm-hash",
            "found by TVM's workload hash: {t}"
        );
        assert_eq!(t["tier"], "exact", "{t}");
        assert_eq!(t["source"]["kind"], "metaschedule-import", "{t}");
        let hash = t["workload_hash"].as_str().expect("hash");
        assert!(stock_hashes.contains(&hash), "{t}");
    }

    let db = dir.join("export");
    ok(&[
        "cache",
        "export",
        s(&db),
        "--cache",
        s(&cache),
        "--model",
        s(model),
    ]);
    let applied = stock_apply(&[s(model), s(&db), "--target", target]);
    assert_eq!(applied["tasks_extracted"], n_tasks, "{applied}");
    assert_eq!(applied["tasks_with_records"], n_tasks, "{applied}");
    assert!(
        applied["scheduled_from_database"]
            .as_array()
            .expect("scheduled")
            .len()
            >= n_tasks,
        "{applied}"
    );
}
