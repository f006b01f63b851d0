//! Import time of the two model frontends on the same architecture: keras-resnet50 as its
//! bundled ONNX export (`models/keras-resnet50.onnx`) and as the StableHLO module JAX exports
//! from Keras' ResNet50 (`scripts/export_stablehlo.py resnet50`, in MLIR's generic form),
//! each from bytes in memory to a verified module; and the small JAX MLP that TVM's own
//! StableHLO importer reads (`scripts/bench_import_tvm.py` times TVM's importers on the same
//! files). The MLIR module is exported once into
//! `$TGC_BENCH_DIR` (default: the temp dir) with the pinned venv's python (`$TGC_PYTHON`,
//! else `tvm/python/bootstrap.sh`).
//!
//! `cargo bench -p tgc-ir --features mlir --bench frontends`

use criterion::{criterion_group, criterion_main, Criterion};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> String {
    if let Ok(p) = std::env::var("TGC_PYTHON") {
        return p;
    }
    let out = Command::new("bash")
        .arg(root().join("tvm/python/bootstrap.sh"))
        .env("TGC_NO_PACKAGE", "1")
        .output()
        .expect("bootstrap.sh runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("bootstrap.sh prints the venv's python")
        .to_string()
}

fn exported(model: &str) -> PathBuf {
    let dir = std::env::var_os("TGC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let out = dir.join(format!("tgc-bench-{model}.mlir"));
    if !out.exists() {
        let status = Command::new(python())
            .arg(root().join("scripts/export_stablehlo.py"))
            .arg(model)
            .arg(&out)
            .status()
            .expect("the exporter runs");
        assert!(status.success(), "export_stablehlo.py {model} failed");
    }
    out
}

fn frontends(c: &mut Criterion) {
    let onnx_path = root().join("models/keras-resnet50.onnx");
    let onnx = std::fs::read(&onnx_path).expect("the bundled model");
    let mlir_path = exported("resnet50");
    let mlir = std::fs::read_to_string(&mlir_path).expect("the export");
    let name = |p: &Path| p.display().to_string();
    let (onnx_name, mlir_name) = (name(&onnx_path), name(&mlir_path));
    let mut g = c.benchmark_group("import_resnet50");
    g.sample_size(20);
    g.bench_function("onnx", |b| {
        b.iter(|| {
            let m = tgc_ir::onnx::import_bytes(&onnx, &onnx_name, &[]).expect("imports");
            tgc_ir::verify_module(&m).expect("verifies");
            m
        })
    });
    g.bench_function("stablehlo_mlir", |b| {
        b.iter(|| {
            let m = tgc_ir::mlir::import_str(&mlir, &mlir_name).expect("imports");
            tgc_ir::verify_module(&m).expect("verifies");
            m
        })
    });
    g.finish();

    // The module TVM's own StableHLO importer reads (scripts/bench_import_tvm.py times it).
    let mlp_path = exported("mlp");
    let mlp = std::fs::read_to_string(&mlp_path).expect("the export");
    let mlp_name = name(&mlp_path);
    let mut g = c.benchmark_group("import_mlp");
    g.bench_function("stablehlo_mlir", |b| {
        b.iter(|| {
            let m = tgc_ir::mlir::import_str(&mlp, &mlp_name).expect("imports");
            tgc_ir::verify_module(&m).expect("verifies");
            m
        })
    });
    g.finish();
}

criterion_group!(benches, frontends);
criterion_main!(benches);
