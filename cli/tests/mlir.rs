//! The MLIR frontend (feature `mlir`) on StableHLO from the real exporter: JAX 0.10 lowering
//! Keras 3 models (`keras.applications` ResNet50 and MobileNetV2, a transformer block) and a
//! plain JAX function, printed in MLIR's generic form by `scripts/export_stablehlo.py` with
//! the pinned venv's python (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh`). The exports are
//! cached under `~/.cache/tgc/stablehlo/<hash of the script>/` between runs.
//!
//! Checked: the Keras models' convolutions are those of the same models' ONNX exports in
//! NHWC; what `tgc build` makes of an MLIR module computes what JAX computes on CPU (the
//! exporter's own arguments and output), untuned and after seeded tuning; bad MLIR is a
//! one-line error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tgc_ir::{Callee, Module};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> PathBuf {
    tgc_tvm::find_python().unwrap_or_else(|e| panic!("no TVM python: {e}"))
}

/// `~/.cache/tgc/stablehlo/<hash of the exporters>/`: exports are cached there between runs.
fn export_dir() -> PathBuf {
    let mut hash = 0xcbf29ce484222325u64;
    for script in ["scripts/export_stablehlo.py", "scripts/export_tosa.py"] {
        let text = std::fs::read(root().join(script)).expect("the exporter script");
        // FNV-1a: a cache key that changes when a script does.
        hash = text
            .iter()
            .fold(hash, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = home.join(format!(".cache/tgc/stablehlo/{hash:016x}"));
    std::fs::create_dir_all(&dir).expect("the export cache directory");
    dir
}

/// The TOSA of a bundled ONNX model, as torch-mlir lowers it (`scripts/export_tosa.py`).
fn exported_tosa(onnx: &str) -> PathBuf {
    let out = export_dir().join(onnx.replace(".onnx", ".tosa.mlir"));
    if !out.exists() {
        let status = Command::new(python())
            .arg(root().join("scripts/export_tosa.py"))
            .arg(root().join("models").join(onnx))
            .arg(&out)
            .status()
            .expect("the exporter runs");
        assert!(status.success(), "export_tosa.py {onnx} failed");
    }
    out
}

/// `MODEL.mlir` (and `.npz`) in [`export_dir`], exported on first use.
fn exported(model: &str, with_npz: bool) -> (PathBuf, PathBuf) {
    let script = root().join("scripts/export_stablehlo.py");
    let dir = export_dir();
    let mlir = dir.join(format!("{model}.mlir"));
    let npz = dir.join(format!("{model}.npz"));
    if !mlir.exists() || (with_npz && !npz.exists()) {
        let mut cmd = Command::new(python());
        cmd.arg(&script).arg(model).arg(&mlir);
        if with_npz {
            cmd.arg("--npz").arg(&npz);
        }
        let out = cmd.output().expect("the exporter runs");
        assert!(
            out.status.success(),
            "export_stablehlo.py {model} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (mlir, npz)
}

fn tgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(args)
        .output()
        .expect("tgc runs")
}

fn ok(args: &[&str]) -> String {
    let out = tgc(args);
    assert!(
        out.status.success(),
        "tgc {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The one-line error of a failing command.
fn error_line(args: &[&str]) -> String {
    let out = tgc(args);
    assert_eq!(out.status.code(), Some(1), "tgc {args:?} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr}");
    lines[0].to_string()
}

fn fresh_dir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Every 2-D convolution as (padded input extent H, W, C; kernel HWIO; output; strides;
/// groups), counted. The padded extent makes an explicit `nn.pad` before a convolution (as
/// Keras exports `ZeroPadding2D`) and the convolution's own padding compare.
type ConvSig = (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>, i64);

fn convolutions(m: &Module) -> BTreeMap<ConvSig, usize> {
    convolutions_with(m, true)
}

/// [`convolutions`]; without the input extent where `with_input` is false (TOSA's lowering
/// slices a strided convolution's input to the extent it reads).
fn convolutions_with(m: &Module, with_input: bool) -> BTreeMap<ConvSig, usize> {
    let f = m.function("main").expect("main");
    let mut out = BTreeMap::new();
    for b in &f.bindings {
        let Callee::Op(op) = &b.callee else { continue };
        if op.name() != "nn.conv2d" {
            continue;
        }
        let attr = |k: &str| {
            b.attrs
                .get(k)
                .unwrap_or_else(|| panic!("conv2d without {k}"))
        };
        assert_eq!(attr("data_layout").as_str(), Some("NHWC"));
        let pad = attr("padding").as_ints().expect("padding");
        let x = f.ty(b.operands[0]).shape.to_vec();
        let padded = if with_input {
            vec![x[1] + pad[0] + pad[2], x[2] + pad[1] + pad[3], x[3]]
        } else {
            Vec::new()
        };
        let layout = attr("kernel_layout").as_str().expect("kernel_layout");
        let shape = f.ty(b.operands[1]).shape.to_vec();
        // The kernel's shape in HWIO order.
        let w: Vec<i64> = "HWIO"
            .chars()
            .map(|c| shape[layout.find(c).expect("a 4-letter kernel layout")])
            .collect();
        let y = f.ty(b.results[0]).shape.to_vec();
        let strides = attr("strides").as_ints().expect("strides");
        let groups = attr("groups").as_int().expect("groups");
        *out.entry((padded, w, y, strides, groups)).or_default() += 1;
    }
    out
}

/// The padding of an `nn.pad` that feeds a convolution folded into it, so both exports read
/// alike: the Keras export pads explicitly before strided convolutions.
fn fold_pads_into_convolutions(m: &mut Module) {
    let f = m.function_mut("main").expect("main");
    let pads: BTreeMap<usize, (tgc_ir::ValueId, Vec<i64>)> = f
        .bindings
        .iter()
        .filter(|b| b.callee.op().is_some_and(|o| o.name() == "nn.pad"))
        .map(|b| {
            let w = b.attrs["pad_width"].as_ints().expect("pad_width");
            (b.results[0].index(), (b.operands[0], w))
        })
        .collect();
    for b in &mut f.bindings {
        if b.callee.op().is_none_or(|o| o.name() != "nn.conv2d") {
            continue;
        }
        if let Some((src, w)) = pads.get(&b.operands[0].index()) {
            // NHWC pad_width: [n0, n1, h0, h1, w0, w1, c0, c1]; conv2d: [top, left, bottom, right].
            let p = b.attrs["padding"].as_ints().expect("padding");
            let folded = vec![p[0] + w[2], p[1] + w[4], p[2] + w[3], p[3] + w[5]];
            b.attrs.insert("padding".into(), tgc_ir::Attr::ints(folded));
            b.operands[0] = *src;
        }
    }
}

fn onnx_in_nhwc(file: &str) -> Module {
    use tgc_passes::Pass;
    let mut m = tgc_ir::onnx::import_file(&root().join("models").join(file), &[])
        .expect("the ONNX model imports");
    tgc_passes::convert_layout::ConvertLayout
        .run(&mut m)
        .expect("convert-layout");
    m
}

#[test]
fn keras_applications_from_jax_have_the_convolutions_of_their_onnx_exports() {
    for (model, onnx) in [
        ("resnet50", "keras-resnet50.onnx"),
        ("mobilenetv2", "keras-mobilenetv2.onnx"),
    ] {
        let (mlir, _) = exported(model, false);
        let mut ours = tgc_ir::mlir::import_file(&mlir).expect("the StableHLO module imports");
        tgc_ir::verify_module(&ours).expect("the import verifies");
        fold_pads_into_convolutions(&mut ours);
        let from_mlir = convolutions(&ours);
        let from_onnx = convolutions(&onnx_in_nhwc(onnx));
        let n: usize = from_mlir.values().sum();
        assert!(n > 50, "{model}: {n} convolutions");
        assert_eq!(
            from_mlir, from_onnx,
            "{model}: convolutions, MLIR against ONNX"
        );

        // And the tasks built around them: as many distinct convolution tasks, as often.
        let onnx_path = root().join("models").join(onnx);
        let ours = conv_tasks(&["tasks", mlir.to_str().unwrap(), "--json"]);
        let theirs = conv_tasks(&[
            "tasks",
            onnx_path.to_str().unwrap(),
            "--layout",
            "nhwc",
            "--json",
        ]);
        assert_eq!(
            ours, theirs,
            "{model}: convolution tasks (distinct, occurrences)"
        );
    }
}

/// (distinct tasks, occurrences) of the tasks holding a convolution, from `tgc tasks --json`.
fn conv_tasks(args: &[&str]) -> (usize, u64) {
    let v: serde_json::Value = serde_json::from_str(&ok(args)).expect("JSON");
    let tasks: Vec<&serde_json::Value> = v["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| {
            t["ops"]
                .as_array()
                .expect("ops")
                .iter()
                .any(|o| o == "nn.conv2d")
        })
        .collect();
    let occ = tasks
        .iter()
        .map(|t| t["occurrences"].as_u64().expect("occ"))
        .sum();
    (tasks.len(), occ)
}

/// `tgc tasks` output: (distinct tasks, occurrences) from its first line.
fn task_counts(stdout: &str) -> (usize, usize) {
    let first = stdout.lines().next().expect("a summary line");
    let nums: Vec<usize> = first
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    let n = nums.len();
    (nums[n - 2], nums[n - 1])
}

#[test]
fn tasks_of_each_export_carry_its_convolutions_and_matmuls() {
    // The task table names each task by its ops; every convolution and every matmul of the
    // module lands in exactly one task occurrence.
    for (model, convs, matmuls) in [("resnet50", 53, 1), ("mobilenetv2", 52, 1), ("block", 0, 8)] {
        let (mlir, _) = exported(model, false);
        let path = mlir.to_str().expect("UTF-8 path");
        let json = ok(&["tasks", path, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&json).expect("tasks --json is JSON");
        let tasks = v["tasks"].as_array().expect("tasks");
        let count = |op: &str| -> u64 {
            tasks
                .iter()
                .map(|t| {
                    let ops = t["ops"].as_array().expect("ops");
                    let k = ops.iter().filter(|o| o.as_str() == Some(op)).count() as u64;
                    k * t["occurrences"].as_u64().expect("occurrences")
                })
                .sum()
        };
        assert_eq!(count("nn.conv2d"), convs, "{model}: convolutions in tasks");
        assert_eq!(count("matmul"), matmuls, "{model}: matmuls in tasks");
        let (distinct, occurrences) = task_counts(&ok(&["tasks", path]));
        assert_eq!(distinct, tasks.len(), "{model}");
        assert!(occurrences >= distinct, "{model}");
    }
}

/// Runs the library `so` on the exporter's arguments and compares with JAX's output; returns
/// the largest difference relative to the output's scale. Softmax outputs compare as logs
/// (probabilities of a randomly initialized classifier are all near 1/1000).
fn check_against_jax(so: &Path, npz: &Path) -> f64 {
    let script = r#"
import json, sys, numpy as np, tvm
from tvm import relax
so, npz = sys.argv[1], sys.argv[2]
d = np.load(npz)
vm = relax.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
inputs = json.load(open(so + ".json"))["inputs"]
assert len(inputs) == len([k for k in d.files if k.startswith("arg")]), "argument count"
out = vm["main"](*[tvm.runtime.tensor(d[f"arg{i}"], tvm.cpu()) for i in range(len(inputs))]).numpy()
ref = d["out"]
assert out.shape == ref.shape, (out.shape, ref.shape)
if ref.min() > 0 and abs(ref.sum() - ref.shape[0]) < 1e-3:
    out, ref = np.log(out), np.log(ref)
print(float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-6)))
"#;
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(so)
        .arg(npz)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "running {} failed: {}",
        so.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a relative difference")
}

#[test]
fn tgc_build_of_an_export_computes_what_jax_computes() {
    let dir = fresh_dir("tgc-mlir-build");
    for model in ["convnet", "block"] {
        let (mlir, npz) = exported(model, true);
        let so = dir.join(format!("{model}.so"));
        ok(&[
            "build",
            mlir.to_str().unwrap(),
            "--no-cache",
            "-o",
            so.to_str().unwrap(),
        ]);
        let rel = check_against_jax(&so, &npz);
        assert!(rel < 1e-4, "{model}: relative difference {rel} against JAX");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn seeded_tuning_then_build_of_an_export_runs_end_to_end() {
    let dir = fresh_dir("tgc-mlir-tune");
    let cache = dir.join("cache.sqlite");
    let (mlir, npz) = exported("convnet", true);
    let (mlir, cache_s) = (mlir.to_str().unwrap(), cache.to_str().unwrap());
    let tune = |extra: &[&str]| {
        let mut args = vec![
            "tune",
            mlir,
            "--cache",
            cache_s,
            "--trials",
            "8",
            "--trials-per-round",
            "4",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    tune(&[]);
    // A second run, seeded from the first: the convolution is an exact hit.
    let second = dir.join("second.json");
    tune(&["--report", second.to_str().unwrap()]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&second).expect("report")).expect("JSON");
    let conv = r["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["name"] == "fused_conv2d_add_relu")
        .expect("the convolution task");
    assert_eq!(conv["tier"], "exact", "{conv}");
    let so = dir.join("convnet.so");
    let report = dir.join("build.json");
    ok(&[
        "build",
        mlir,
        "--cache",
        cache_s,
        "-o",
        so.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("JSON");
    let tiers: Vec<(&str, &str)> = r["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().expect("name"),
                t["tier"].as_str().expect("tier"),
            )
        })
        .collect();
    // The budget goes to the convolution first (most of the work): its record is exact.
    assert!(
        tiers.contains(&("fused_conv2d_add_relu", "exact")),
        "the tuned convolution builds from its record: {tiers:?}"
    );
    let rel = check_against_jax(&so, &npz);
    assert!(
        rel < 1e-4,
        "tuned convnet: relative difference {rel} against JAX"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_mlir_is_a_one_line_error() {
    let dir = fresh_dir("tgc-mlir-errors");
    let (mlir, _) = exported("convnet", false);
    let text = std::fs::read_to_string(&mlir).expect("the export");
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).expect("write");
        p.to_str().unwrap().to_string()
    };

    // Truncated: MLIR's own diagnostic, with its line and column.
    let cut = write("truncated.mlir", &text[..text.len() / 2]);
    let e = error_line(&["tasks", &cut]);
    assert!(e.starts_with(&format!("error: {cut}:")), "{e}");

    // The custom (pretty) form of StableHLO, from the real exporter.
    let pretty = dir.join("pretty.mlir");
    let out = Command::new(python())
        .arg(root().join("scripts/export_stablehlo.py"))
        .args(["convnet", pretty.to_str().unwrap(), "--pretty"])
        .output()
        .expect("exporter");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = error_line(&["tasks", pretty.to_str().unwrap()]);
    assert!(e.contains("generic form"), "{e}");

    // An op the frontend does not convert, and a dynamic dimension: named with their line.
    let gather = write(
        "gather.mlir",
        r#""func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
^bb0(%arg0: tensor<4xf32>):
  %0 = "stablehlo.sort"(%arg0) <{dimension = 0 : i64}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = "stablehlo.compare"(%a, %b) <{comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
    "stablehlo.return"(%c) : (tensor<i1>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()
"#,
    );
    let e = error_line(&["tasks", &gather]);
    assert!(
        e.contains(":3:") && e.contains("'stablehlo.sort': unsupported op"),
        "{e}"
    );
    let dynamic = write(
        "dynamic.mlir",
        r#""func.func"() <{function_type = (tensor<?x4xf32>) -> tensor<?x4xf32>, sym_name = "main"}> ({
^bb0(%arg0: tensor<?x4xf32>):
  %0 = "stablehlo.exponential"(%arg0) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  "func.return"(%0) : (tensor<?x4xf32>) -> ()
}) : () -> ()
"#,
    );
    let e = error_line(&["tasks", &dynamic]);
    assert!(e.contains("dynamic dimension"), "{e}");

    // A missing file, and an empty one.
    let e = error_line(&["tasks", dir.join("missing.mlir").to_str().unwrap()]);
    assert!(e.to_lowercase().contains("no such file"), "{e}");
    let empty = write("empty.mlir", "");
    let e = error_line(&["tasks", &empty]);
    assert!(e.contains("empty.mlir"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every attribute dictionary sorted by key, as MLIR keeps dictionaries.
fn sorted_attrs(m: &mut Module) {
    fn sort(a: &mut tgc_ir::Attrs) {
        a.sort_keys();
        for v in a.values_mut() {
            sort_attr(v);
        }
    }
    fn sort_attr(v: &mut tgc_ir::Attr) {
        match v {
            tgc_ir::Attr::Dict(d) => sort(d),
            tgc_ir::Attr::List(items) => items.iter_mut().for_each(sort_attr),
            _ => {}
        }
    }
    sort(&mut m.attrs);
    for f in m.functions.values_mut() {
        sort(&mut f.attrs);
        for b in &mut f.bindings {
            sort(&mut b.attrs);
        }
    }
}

fn mlir_opt() -> PathBuf {
    let dir = std::env::var("MLIR_TOOLS_DIR").unwrap_or_else(|_| "/usr/lib/llvm-22/bin".into());
    PathBuf::from(dir).join("mlir-opt")
}

#[test]
fn emit_mlir_parses_with_mlir_opt_and_reads_back_to_the_same_module() {
    let dir = fresh_dir("tgc-mlir-emit");
    let (resnet, _) = exported("resnet50", false);
    let (block, _) = exported("block", false);
    let onnx = root().join("models/keras-mobilenetv2.onnx");
    for model in [resnet, block, onnx] {
        let model = model.to_str().unwrap();
        let out = dir.join("out.mlir");
        let out_s = out.to_str().unwrap();
        // What the tgc-cpu pipeline found: tasks outlined with their keys and seed plans.
        let text = ok(&["opt", model, "--passes", "tgc-cpu"]);
        ok(&[
            "opt", model, "--passes", "tgc-cpu", "--emit", "mlir", "-o", out_s,
        ]);
        let emitted = std::fs::read_to_string(&out).expect("the MLIR output");
        for attr in [
            "tgc.exact_key",
            "tgc.structural_key",
            "tgc.family_key",
            "tgc.seed_plan",
        ] {
            assert!(
                emitted.contains(attr),
                "{model}: no {attr} in the MLIR output"
            );
        }
        let parsed = Command::new(mlir_opt())
            .args([
                "--allow-unregistered-dialect",
                "--verify-diagnostics",
                out_s,
            ])
            .output()
            .expect("mlir-opt runs");
        assert!(
            parsed.status.success(),
            "{model}: mlir-opt rejects the output: {}",
            String::from_utf8_lossy(&parsed.stderr)
        );
        // Read back (tgc's dialect), and through mlir-opt's own printing (generic form).
        let generic = dir.join("generic.mlir");
        let printed = Command::new(mlir_opt())
            .args([
                "--allow-unregistered-dialect",
                "--mlir-print-op-generic",
                out_s,
                "-o",
            ])
            .arg(&generic)
            .output()
            .expect("mlir-opt runs");
        assert!(printed.status.success());
        let mut want = tgc_ir::text::parse_module(&text, "original").expect("tgc text parses");
        sorted_attrs(&mut want);
        for file in [&out, &generic] {
            let back = ok(&["opt", file.to_str().unwrap()]);
            let mut got = tgc_ir::text::parse_module(&back, "read back").expect("parses");
            sorted_attrs(&mut got);
            assert!(
                got.structurally_equal(&want),
                "{model}: {} does not read back to the module written\n--- written ---\n{}\n--- read ---\n{}",
                file.display(),
                tgc_ir::text::print_module(&want),
                tgc_ir::text::print_module(&got)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tosa_from_torch_mlir_imports_builds_and_computes_what_onnxruntime_computes() {
    // torch-mlir lowers the bundled ONNX files to TOSA; the TOSA import has the ONNX import's
    // convolutions (kernels, outputs, strides, groups).
    for onnx in ["keras-resnet50.onnx", "keras-mobilenetv2.onnx"] {
        let tosa = exported_tosa(onnx);
        let m = tgc_ir::mlir::import_file(&tosa).expect("the TOSA module imports");
        tgc_ir::verify_module(&m).expect("the import verifies");
        let ours = convolutions_with(&m, false);
        let theirs = convolutions_with(&onnx_in_nhwc(onnx), false);
        assert!(ours.values().sum::<usize>() > 50, "{onnx}");
        assert_eq!(ours, theirs, "{onnx}: convolutions, TOSA against ONNX");
        let onnx_path = root().join("models").join(onnx);
        assert_eq!(
            conv_tasks(&["tasks", tosa.to_str().unwrap(), "--json"]),
            conv_tasks(&[
                "tasks",
                onnx_path.to_str().unwrap(),
                "--layout",
                "nhwc",
                "--json"
            ]),
            "{onnx}: convolution tasks (distinct, occurrences), TOSA against ONNX"
        );
    }
    // The whole ResNet-50 from TOSA, built and run on the model's inputs in their ONNX order
    // (torch-mlir keeps it), against onnxruntime on the ONNX file: log-probabilities agree.
    let dir = fresh_dir("tgc-mlir-tosa");
    let tosa = exported_tosa("keras-resnet50.onnx");
    let so = dir.join("resnet50.so");
    ok(&[
        "build",
        tosa.to_str().unwrap(),
        "--no-cache",
        "-o",
        so.to_str().unwrap(),
    ]);
    let script = r#"
import json, sys, numpy as np, onnx, onnxruntime as ort, tvm
from tvm import relax
onnx_path, so = sys.argv[1], sys.argv[2]
m = onnx.load(onnx_path)
init_names = {t.name for t in m.graph.initializer}
inputs = [i for i in m.graph.input if i.name not in init_names]
rng = np.random.default_rng(0)
feeds = {}
for i in inputs:
    s = [d.dim_value for d in i.type.tensor_type.shape.dim]
    x = rng.standard_normal(s).astype(np.float32)
    if len(s) == 2:  # the classifier: small logits, so that no probability underflows
        x *= 0.01 / np.sqrt(s[0])
    elif len(s) == 4 and s[0] != 1:  # convolution kernels: He scale
        x *= np.sqrt(2.0 / np.prod(s[1:]))
    feeds[i.name] = x
args = [feeds[i.name] for i in inputs]
spec = json.load(open(so + ".json"))["inputs"]
assert [list(a.shape) for a in args] == [s["shape"] for s in spec], "argument shapes"
vm = relax.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
out = vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()
ref = ort.InferenceSession(onnx_path).run(None, feeds)[0]
print(float(np.abs(np.log(out) - np.log(ref)).max()), float(np.log(ref).std()))
"#;
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(root().join("models/keras-resnet50.onnx"))
        .arg(&so)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .map(|x| x.parse().expect("a number"))
        .collect();
    let (diff, spread) = (v[0], v[1]);
    assert!(
        spread > 1.0,
        "the check needs logits that differ: spread {spread}"
    );
    assert!(
        diff < 1e-3,
        "log-probabilities differ by {diff} (spread {spread})"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_truncation_of_an_export_is_an_error_or_a_module_never_a_panic() {
    // Cut the exported ResNet-50 and transformer block at 64 points each: MLIR's parser or
    // the frontend refuses (one line, with the file's name), or a cut that still parses
    // imports to a verified module.
    for model in ["resnet50", "block"] {
        let (mlir, _) = exported(model, false);
        let text = std::fs::read_to_string(&mlir).expect("the export");
        for k in 1..64 {
            let mut cut = text.len() * k / 64;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            match tgc_ir::mlir::import_str(&text[..cut], "cut.mlir") {
                Ok(m) => tgc_ir::verify_module(&m).expect("a module that imports verifies"),
                Err(e) => {
                    let line = e.to_string();
                    assert!(line.starts_with("cut.mlir:"), "{line}");
                    assert!(!line.contains('\n'), "{line}");
                }
            }
        }
    }
}

/// jax/jaxlib 0.4.38 (MLIR Python bindings of the kind TVM 0.27's StableHLO importer was
/// written against), installed once with pip into `~/.cache/tgc/jaxlib-0.4.38`.
fn old_jax_bindings() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = home.join(".cache/tgc/jaxlib-0.4.38");
    if !dir.join("jaxlib").is_dir() {
        let staged = home.join(format!(
            ".cache/tgc/jaxlib-0.4.38.tmp{}",
            std::process::id()
        ));
        let out = Command::new(python())
            .args(["-m", "pip", "install", "-q", "--no-deps", "--target"])
            .arg(&staged)
            .args(["jax==0.4.38", "jaxlib==0.4.38"])
            .output()
            .expect("pip runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::rename(&staged, &dir);
        let _ = std::fs::remove_dir_all(&staged);
    }
    dir
}

/// A task's ops as TVM names them in a task name (`fused_matmul1_broadcast_to3_add1` ->
/// matmul, broadcast_to, add).
fn tvm_task_ops(name: &str) -> Vec<String> {
    let known = [
        "broadcast_to",
        "matmul",
        "add",
        "maximum",
        "multiply",
        "subtract",
    ];
    let mut rest = name.trim_start_matches("fused_");
    let mut ops = Vec::new();
    while !rest.is_empty() {
        let Some(op) = known.iter().find(|k| rest.starts_with(*k)) else {
            panic!("unknown op in TVM task name {name}");
        };
        ops.push(op.to_string());
        rest = rest[op.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        rest = rest.trim_start_matches('_');
    }
    ops
}

#[test]
fn partition_agrees_with_tvms_own_stablehlo_importer_where_it_reads_the_module() {
    // TVM 0.27's from_stablehlo + FuseOps + extract_tasks against tgc's tasks of the same
    // module: as many tasks, as often, with the same ops once tgc's implicit broadcasts
    // (TVM keeps `broadcast_to`) and `nn.relu` (TVM keeps `maximum`) are accounted for.
    let (mlp, _) = exported("mlp", false);
    let out = Command::new(python())
        .args(["-m", "tgc_tvm_ref.stablehlo_tasks"])
        .arg(&mlp)
        .env(
            "PYTHONPATH",
            format!(
                "{}:{}",
                old_jax_bindings().display(),
                root().join("tvm/python").display()
            ),
        )
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "TVM's importer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tvm: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut theirs: Vec<(Vec<String>, u64)> = tvm
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            let ops = tvm_task_ops(t["name"].as_str().expect("name"))
                .into_iter()
                .filter(|o| o != "broadcast_to")
                .collect();
            (ops, t["weight"].as_u64().expect("weight"))
        })
        .collect();
    let v: serde_json::Value =
        serde_json::from_str(&ok(&["tasks", mlp.to_str().unwrap(), "--json"])).expect("JSON");
    let mut ours: Vec<(Vec<String>, u64)> = v["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            let ops = t["ops"]
                .as_array()
                .expect("ops")
                .iter()
                .map(|o| match o.as_str().expect("op") {
                    "nn.relu" => "maximum".to_string(),
                    other => other.to_string(),
                })
                .collect();
            (ops, t["occurrences"].as_u64().expect("occurrences"))
        })
        .collect();
    theirs.sort();
    ours.sort();
    assert_eq!(ours.len(), 2, "{ours:?}");
    assert_eq!(ours, theirs, "tgc's tasks against TVM's");
}

#[test]
fn stablehlo_batch_norm_inference_builds_to_what_numpy_computes() {
    // lit/mlir/stablehlo-batch-norm.mlir: an NCHW convolution and
    // stablehlo.batch_norm_inference (feature_index 1, epsilon 1e-3), built by tgc, against
    // the same in numpy.
    let dir = fresh_dir("tgc-mlir-bn");
    let model = root().join("lit/mlir/stablehlo-batch-norm.mlir");
    let so = dir.join("bn.so");
    ok(&[
        "build",
        model.to_str().unwrap(),
        "--no-cache",
        "-o",
        so.to_str().unwrap(),
    ]);
    let script = r#"
import sys, numpy as np, tvm
from numpy.lib.stride_tricks import sliding_window_view
from tvm import relax
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
scale, offset, mean = (rng.standard_normal(8).astype(np.float32) for _ in range(3))
var = rng.uniform(0.5, 2.0, 8).astype(np.float32)
vm = relax.VirtualMachine(tvm.runtime.load_module(sys.argv[1]), tvm.cpu())
out = vm["main"](*[tvm.runtime.tensor(a) for a in (x, w, scale, offset, mean, var)]).numpy()
windows = sliding_window_view(x, (3, 3), axis=(2, 3))  # 1x4x6x6x3x3
conv = np.einsum("nchwij,ocij->nohw", windows, w)
c = lambda v: v.reshape(1, 8, 1, 1)
ref = (conv - c(mean)) / np.sqrt(c(var) + np.float32(1e-3)) * c(scale) + c(offset)
print(float(np.abs(out - ref).max() / np.abs(ref).max()))
"#;
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(&so)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rel: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a number");
    assert!(rel < 1e-5, "relative difference {rel} against numpy");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn similarity_reads_an_export_beside_an_onnx_model() {
    let (mlir, _) = exported("resnet50", false);
    let mlir = mlir.to_str().unwrap();
    let onnx = root().join("models/keras-resnet50.onnx");
    let v: serde_json::Value = serde_json::from_str(&ok(&[
        "similarity",
        mlir,
        onnx.to_str().unwrap(),
        "--level",
        "family",
        "--json",
    ]))
    .expect("JSON");
    let census = v["census"].as_array().expect("census");
    assert_eq!(census.len(), 2);
    let tasks: serde_json::Value =
        serde_json::from_str(&ok(&["tasks", mlir, "--json"])).expect("JSON");
    assert_eq!(census[0]["occurrences"], tasks["num_occurrences"]);
    assert_eq!(census[0]["exact"]["distinct"], tasks["num_tasks"]);
}
