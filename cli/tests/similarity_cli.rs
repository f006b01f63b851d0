//! `tgc similarity` and `tgc zoo` end to end: outputs that other tools read (files, plots,
//! a zoo model through its own ONNX), and every user error as one line naming the file or
//! model, with exit code 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(args)
        .current_dir(lit_dir())
        .output()
        .expect("tgc runs")
}

fn lit_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../lit/similarity")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tgc-similarity-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

/// Runs `tgc args`, expects exit code 1 and one stderr line containing every `needle`.
fn fails(args: &[&str], needles: &[&str]) {
    let out = tgc(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?}: not one line:\n{stderr}"
    );
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {stderr:?} lacks {n:?}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn succeeds(args: &[&str]) -> String {
    let out = tgc(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn missing_model_names_the_argument() {
    fails(
        &["similarity", "blocks.tgc", "nosuch.tgc"],
        &[
            "error: nosuch.tgc: no such file, and no zoo model of that name",
            "tgc zoo --list",
        ],
    );
}

#[test]
fn broken_onnx_names_the_file() {
    let bad = scratch("broken.onnx");
    std::fs::write(&bad, b"\x08\x07 not protobuf").expect("write");
    fails(
        &["similarity", bad.to_str().expect("path"), "blocks.tgc"],
        &["broken.onnx: not a valid ONNX model"],
    );
}

#[test]
fn malformed_text_ir_names_file_line_and_column() {
    let bad = scratch("bad.tgc");
    std::fs::write(&bad, "module @m {\n  func @main( {\n").expect("write");
    fails(
        &["similarity", bad.to_str().expect("path")],
        &["bad.tgc:2:"],
    );
}

#[test]
fn bad_plot_extension_is_refused_before_any_work() {
    fails(
        &["similarity", "nosuch.tgc", "--plot", "out.jpg"],
        &["out.jpg: a plot is written as a .svg or .png file"],
    );
}

#[test]
fn unwritable_outputs_name_the_path() {
    fails(
        &[
            "similarity",
            "blocks.tgc",
            "--plot",
            "/nonexistent-dir/p.svg",
        ],
        &["/nonexistent-dir/p.svg: cannot write"],
    );
    fails(
        &["zoo", "resnet18", "-o", "/nonexistent-dir/r.onnx"],
        &["/nonexistent-dir/r.onnx: cannot write"],
    );
}

#[test]
fn bad_arguments_are_one_line() {
    fails(&["similarity", "blocks.tgc", "--json", "--csv"], &["--csv"]);
    fails(
        &["similarity", "blocks.tgc", "--level", "fuzzy"],
        &["fuzzy"],
    );
    fails(&["similarity"], &["MODEL"]);
    fails(
        &["zoo", "resnet51"],
        &["unknown zoo model 'resnet51'", "resnet50"],
    );
    fails(&["zoo", "--list", "resnet18"], &["--list"]);
}

#[test]
fn zoo_lists_every_model() {
    let list = succeeds(&["zoo", "--list"]);
    assert_eq!(list.lines().count(), 13);
    assert!(list.lines().any(|l| l.starts_with("mobilenet_v3_large ")));
}

#[test]
fn zoo_text_ir_parses_back() {
    let text = succeeds(&["zoo", "alexnet"]);
    let m = tgc_ir::text::parse_module(&text, "alexnet.tgc").expect("parses");
    tgc_ir::verify_module(&m).expect("verifies");
}

/// A zoo model written as ONNX and read back is the same model: full coverage at exact level
/// both ways.
#[test]
fn zoo_onnx_is_the_zoo_model_at_exact_level() {
    let onnx = scratch("resnet18.onnx");
    let path = onnx.to_str().expect("path");
    succeeds(&["zoo", "resnet18", "-o", path]);
    let csv = succeeds(&["similarity", path, "resnet18", "--level", "exact", "--csv"]);
    let covered: Vec<&str> = csv.lines().filter(|l| l.starts_with("coverage,")).collect();
    assert_eq!(covered.len(), 4);
    assert!(
        covered.iter().all(|l| l.ends_with(",1.000000")),
        "{covered:?}"
    );
    // The file's stem equals the zoo name, so the study names both by their arguments.
    assert!(csv.contains(&format!("coverage,exact,{path},resnet18,1.000000")));
}

#[test]
fn plots_are_svg_and_png() {
    let svg = scratch("p.svg");
    let png = scratch("p.png");
    for p in [&svg, &png] {
        succeeds(&[
            "similarity",
            "blocks.tgc",
            "shapes.tgc",
            "--plot",
            p.to_str().expect("path"),
        ]);
    }
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.starts_with("<svg"), "{}", &text[..40.min(text.len())]);
    for label in [
        "structural coverage",
        "blocks",
        "shapes",
        "occurrences",
        "family",
    ] {
        assert!(text.contains(label), "SVG lacks {label}");
    }
    let bytes = std::fs::read(&png).expect("png written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(Path::new(&png).metadata().expect("meta").len() > 1000);
}

#[test]
fn output_file_holds_the_tables() {
    let out = scratch("tables.md");
    let stdout = succeeds(&[
        "similarity",
        "blocks.tgc",
        "-o",
        out.to_str().expect("path"),
    ]);
    assert!(stdout.is_empty());
    let text = std::fs::read_to_string(&out).expect("written");
    assert!(text.starts_with("## Census"), "{text}");
}
