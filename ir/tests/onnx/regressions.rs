//! Inputs the `import_onnx` fuzz target found panicking, as readable graphs, plus the raw
//! crash files in `fuzz_regressions/`, which must import or fail cleanly.

use crate::builder::*;
use std::path::PathBuf;

#[test]
fn raw_fuzz_findings_do_not_panic() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/onnx/fuzz_regressions");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz_regressions/") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("readable");
        if let Ok(m) = tgc_ir::onnx::import_bytes(&bytes, "crash.onnx", &[]) {
            tgc_ir::verify_module(&m).expect("verifies");
        }
        seen += 1;
    }
    assert!(seen > 0);
}

/// Slice without axes takes the first `len(starts)` axes; more starts than the rank indexed
/// past the shape.
#[test]
fn slice_without_axes_and_more_starts_than_rank() {
    let mut g = Graph::new(13);
    g.input("x", F32, &[4])
        .init_i64("starts", &[2], &[0, 0])
        .init_i64("ends", &[2], &[1, 1]);
    g.node("Slice", &["x", "starts", "ends"], &["y"], vec![])
        .output("y");
    assert_eq!(
        g.err(),
        "test.onnx: node 'n0' (Slice): axis 1 is out of range for rank 1"
    );
}

/// Found by review while fuzzing: Range read the first element of an empty `start`.
#[test]
fn range_with_an_empty_start() {
    let mut g = Graph::new(13);
    g.init_i64("start", &[0], &[])
        .init_i64("limit", &[], &[3])
        .init_i64("delta", &[], &[1]);
    g.node("Range", &["start", "limit", "delta"], &["y"], vec![])
        .output("y");
    assert_eq!(g.err(), "test.onnx: node 'n0' (Range): start, limit and delta must each be a single value, all of one dtype");
}
