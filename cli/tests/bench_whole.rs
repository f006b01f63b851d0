//! scripts/bench_whole.py end to end on two tiny ONNX models with tiny budgets, both arms
//! (tgc in two pieces, stock TVM's tune_relax) and the anchors (TVM's defaults and
//! onnxruntime on the same files): the curve has a point per piece, B starts from the model
//! built from A's cache, the table is written and the curves plotted (`tgc curves`); tgc
//! with `--pack-weights`, which reaches every tune and build of its arm.
//!
//! Needs the pinned TVM venv (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh` creates it).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// a.onnx (8 channels) and b.onnx (16) in `d`.
fn write_models(python: &Path, d: &Path) {
    for (name, c) in [("a.onnx", "8"), ("b.onnx", "16")] {
        let out = Command::new(python)
            .arg(tgc_tvm::worker_dir().join("tests/onnx_models.py"))
            .arg("conv")
            .arg(d.join(name))
            .arg(c)
            .output()
            .expect("python runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
    }
}

#[test]
fn a_whole_model_protocol_in_pieces_with_both_arms_and_the_anchors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let python = tgc_tvm::find_python().expect("the pinned TVM venv");
    write_models(&python, d);
    let out = d.join("bench");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench_whole.py");
    let run = Command::new("python3")
        .arg(&script)
        .arg("--tgc")
        .arg(env!("CARGO_BIN_EXE_tgc"))
        .arg("--model")
        .arg(d.join("a.onnx"))
        .arg("--seeded")
        .arg(d.join("b.onnx"))
        .args(["--trials", "2", "--pieces", "2", "--per-round", "1"])
        .args(["--population", "16", "--pack-weights"])
        .arg("--out")
        .arg(&out)
        .arg("--table")
        .arg(d.join("table.md"))
        .arg("--plot")
        .arg(d.join("curves.svg"))
        .env("TGC_PYTHON", &python)
        .output()
        .expect("python3 runs");
    assert!(
        run.status.success(),
        "bench_whole.py failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let bench: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!(bench["schema"], "tgc.bench-whole/1");
    let models = bench["models"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    for m in models {
        let curve = m["curve"].as_array().unwrap();
        assert_eq!(curve.len(), 3, "the start and a point per piece: {m}");
        let times: Vec<f64> = curve.iter().map(|p| p[0].as_f64().unwrap()).collect();
        assert_eq!(times[0], 0.0);
        assert!(times[0] < times[1] && times[1] < times[2], "{m}");
        assert!(curve.iter().all(|p| p[1].as_f64().unwrap() > 0.0), "{m}");
        let tgc = &m["tgc"];
        assert!(tgc["trials"].as_u64().unwrap() <= 2, "{m}");
        assert_eq!(tgc["latency_ms"], curve[2][1]);
        assert!(m["onnxruntime_ms"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["defaults_ms"].as_f64().unwrap() > 0.0, "{m}");
        let stock = &m["stock"];
        assert_eq!(stock["trials"], 2, "stock's run budget is tgc's: {m}");
        assert!(stock["latency_ms"].as_f64().unwrap() > 0.0, "{m}");
        // the time to stock's latency is a point on tgc's curve, or never
        if let Some(t) = m["tgc_reach_s"].as_f64() {
            assert!(t <= times[2], "{m}");
        }
    }
    // A starts at TVM's defaults, B at the model built from A's cache
    assert_eq!(models[0]["curve"][0][1], models[0]["defaults_ms"]);
    let b_start: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("b0_build_start.json")).unwrap())
            .unwrap();
    assert_eq!(
        models[1]["curve"][0][1],
        b_start["end_to_end"]["latency_ms"]["median"]
    );
    // --pack-weights reaches every tune and build of the tgc arm: its libraries take packed weights
    let side: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("a_1.so.json")).unwrap()).unwrap();
    assert!(
        side["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["packed"] == true),
        "{side}"
    );
    let table = std::fs::read_to_string(d.join("table.md")).unwrap();
    assert!(table.contains("(`--pack-weights`)"), "{table}");
    assert!(table.contains("| b.onnx | stock `tune_relax` |"), "{table}");
    assert!(table.contains("| a.onnx | onnxruntime "), "{table}");
    let svg = std::fs::read_to_string(d.join("curves.svg")).expect("the curves plotted");
    for label in ["a.onnx", "b.onnx", "onnxruntime", "stock tune_relax"] {
        assert!(svg.contains(label), "{label} not in the plot");
    }

    // a model that is not an ONNX file: one line, nothing run
    let bad = Command::new("python3")
        .arg(&script)
        .arg("--tgc")
        .arg(env!("CARGO_BIN_EXE_tgc"))
        .args(["--model", "resnet50", "--trials", "2", "--pieces", "1"])
        .output()
        .expect("python3 runs");
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("resnet50: not an ONNX file"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
