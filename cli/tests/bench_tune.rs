//! scripts/bench_tune.py end to end on two tiny models, with tiny budgets and without the
//! stock TVM arm (tvm/python/tests/test_stock_tvm.py runs that): the repeats and their
//! ranges, and a sequence (`--chain`) whose second model starts from the cache the first
//! one left.
//!
//! Needs the pinned TVM venv (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh` creates it).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn model(name: &str, c: usize) -> String {
    format!(
        r#"module @{name} {{
  func @main(%x: tensor<1x{c}x16x16xf32>, %w: tensor<{c}x{c}x3x3xf32>) -> tensor<1x{c}x16x16xf32> {{
    %0 = nn.conv2d(%x, %w) {{padding = [1, 1, 1, 1]}} : tensor<1x{c}x16x16xf32>
    %1 = nn.relu(%0) : tensor<1x{c}x16x16xf32>
    return %1
  }}
}}
"#
    )
}

#[test]
fn repeats_and_a_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A and B have one task each, of one structure and two shapes
    std::fs::write(d.join("a.tgc"), model("a", 8)).unwrap();
    std::fs::write(d.join("b.tgc"), model("b", 16)).unwrap();
    let out = d.join("bench");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench_tune.py");
    let run = Command::new("python3")
        .arg(&script)
        .arg("--tgc")
        .arg(env!("CARGO_BIN_EXE_tgc"))
        .arg("--a")
        .arg(d.join("a.tgc"))
        // B twice in a sequence: the second time, B's own records are in the cache
        .arg("--b")
        .arg(d.join("b.tgc"))
        .arg("--b")
        .arg(d.join("b.tgc"))
        .args(["--chain", "--repeat", "2", "--no-stock", "--no-measure"])
        .args(["--trials", "2", "--per-round", "2", "--population", "16"])
        .args(["--tolerance", "3"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("python3 runs");
    assert!(
        run.status.success(),
        "bench_tune.py failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let bench: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!(bench["chain"], true);
    let pairs = bench["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2);
    for p in pairs {
        let reps = p["repeats"].as_array().unwrap();
        assert_eq!(reps.len(), 2);
        // each repeat ran both tgc arms; the ranges span exactly those runs
        let walls: Vec<f64> = reps
            .iter()
            .map(|r| r["seeded_wall_s"].as_f64().unwrap())
            .collect();
        let sp = &p["spread"]["seeded_wall_s"];
        assert_eq!(sp["n"], 2);
        let (lo, hi) = (walls[0].min(walls[1]), walls[0].max(walls[1]));
        assert_eq!(
            (sp["min"].as_f64(), sp["max"].as_f64()),
            (Some(lo), Some(hi))
        );
        assert_eq!(p["spread"]["cold_wall_s"]["n"], 2);
        assert_eq!(p["spread"]["cache_time"]["n"], 2);
        assert!(out.join("b0_r1_seeded.json").exists());
    }
    // the first B found only A's task of another shape; the second found B's own records,
    // which it can only have from the first B's cache
    assert_eq!(pairs[0]["tiers"], serde_json::json!({"structural": 1}));
    assert_eq!(pairs[1]["tiers"], serde_json::json!({"exact": 1}));
}
