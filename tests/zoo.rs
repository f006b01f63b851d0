//! The model zoo against the outside world: every zoo model exported as ONNX imports into
//! TVM 0.27 (`relax.frontend.onnx.from_onnx`, the pinned venv found through `$TGC_PYTHON` or
//! `tvm/python/bootstrap.sh`) with our output types, and our own frontend reads it back to a
//! module with exactly the zoo module's task table. Plus a snapshot of the zoo's census.

use serde_json::Value;
use std::path::PathBuf;
use tgc_canonicalize::similarity::{ModelTasks, Study};
use tgc_canonicalize::{extract_tasks, Level, TaskKey};
use tgc_ir::Module;
use tgc_passes::{Instrumentation, PassManager};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `m` partitioned by `pipeline`: `partition` (tgc's canonical fusion order) or
/// `partition{order=program}` (TVM's, for comparisons with TVM).
fn partitioned_by(pipeline: &str, mut m: Module) -> Module {
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline(pipeline, &mut pm).expect("pipeline");
    pm.run(&mut m, &mut std::io::sink())
        .expect("partition runs");
    m
}

fn partitioned(m: Module) -> Module {
    partitioned_by("partition", m)
}

/// (exact key, occurrences) per task, sorted by key: the frontend emits bindings in the
/// order TVM's frontend does (`onnx::order`), so tasks may first appear in another order.
fn task_table(m: Module) -> Vec<(TaskKey, usize)> {
    let mut table: Vec<(TaskKey, usize)> = extract_tasks(&partitioned(m))
        .iter()
        .map(|t| (t.keys.exact, t.occurrences))
        .collect();
    table.sort();
    table
}

fn zoo() -> Vec<(&'static str, Module)> {
    tgc_zoo::MODELS
        .iter()
        .map(|z| (z.name, z.build().expect("zoo model builds")))
        .collect()
}

/// The pinned TVM venv's python (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh`).
fn tvm_python() -> PathBuf {
    tgc_tvm::find_python().unwrap_or_else(|e| panic!("no TVM python: {e}"))
}

#[test]
fn zoo_onnx_imports_into_tvm_and_back_into_tgc() {
    let dir = std::env::temp_dir().join(format!("tgc-zoo-onnx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let models = zoo();
    let mut files = Vec::new();
    for (name, m) in &models {
        let bytes = tgc_ir::onnx::export_module(m).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join(format!("{name}.onnx"));
        std::fs::write(&path, &bytes).expect("write");
        // Our frontend: the same tasks, the same number of times.
        let back = tgc_ir::onnx::import_bytes(&bytes, name, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            task_table(back),
            task_table(m.clone()),
            "{name}: task table after an ONNX round trip"
        );
        files.push(path);
    }

    // TVM: one process over every file.
    let out = std::process::Command::new(tvm_python())
        .args(["-m", "tgc_tvm_ref.import_check"])
        .args(&files)
        .env("PYTHONPATH", root().join("tvm/python"))
        .output()
        .expect("the TVM python runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "import_check printed no JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let results = report["models"].as_array().expect("models");
    assert_eq!(results.len(), models.len());
    for ((name, m), r) in models.iter().zip(results) {
        assert_eq!(
            r["ok"],
            Value::Bool(true),
            "{name}: TVM import failed: {}",
            r["error"]
        );
        let ours = &m.function("main").expect("main").result_types()[0];
        assert_eq!(
            r["outputs"][0]["shape"],
            serde_json::json!(ours.shape.as_slice()),
            "{name}: output shape in TVM"
        );
        assert_eq!(
            r["num_params"].as_u64(),
            Some(m.function("main").expect("main").params.len() as u64),
            "{name}: TVM keeps every weight a parameter"
        );
    }
    assert!(out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The study's models by name: zoo models built, `keras-*` imported from `models/`.
fn study_model(name: &str) -> ModelTasks {
    let module = match tgc_zoo::lookup(name) {
        Some(z) => z.build().expect("zoo model builds"),
        None => {
            let path = root().join("models").join(format!("{name}.onnx"));
            tgc_ir::onnx::import_file(&path, &[]).expect("bundled model imports")
        }
    };
    ModelTasks::new(
        name,
        extract_tasks(&partitioned_by("partition{order=program}", module)),
    )
}

/// tgc's exact-level study of the zoo and the bundled models against TVM's, by structural
/// hash (`tests/fixtures/tvm/similarity.json`, written by `scripts/similarity_report.sh`):
/// the same occurrences, distinct keys and coverage, but for the differences
/// docs/similarity.md explains.
#[test]
fn exact_study_agrees_with_tvm_hashes() {
    let path = root().join("tests/fixtures/tvm/similarity.json");
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON");
    let names: Vec<&str> = fixture["models"]
        .as_array()
        .expect("models")
        .iter()
        .map(|n| n.as_str().expect("name"))
        .collect();
    let models: Vec<ModelTasks> = names.iter().map(|n| study_model(n)).collect();
    let study = Study::new(&models, Level::Exact);
    for (i, name) in names.iter().enumerate() {
        let tvm = &fixture["census"]["hash"][name];
        let ours = study.census[i][0];
        // TVM's frontend guards the run-time indices of BERT's two Gathers (one more task,
        // called twice); TVM's hash splits Keras ResNet-50's add by operand order.
        let (extra_occurrences, extra_tasks) = match *name {
            "bert_base" => (2, 1),
            "keras-resnet50" => (0, 1),
            _ => (0, 0),
        };
        assert_eq!(
            tvm["occurrences"].as_u64(),
            Some((ours.occurrences + extra_occurrences) as u64),
            "{name}: occurrences"
        );
        assert_eq!(
            tvm["distinct"].as_u64(),
            Some((ours.distinct + extra_tasks) as u64),
            "{name}: distinct exact keys vs TVM hashes"
        );
    }
    for (i, row) in names.iter().enumerate() {
        for (j, col) in names.iter().enumerate() {
            let ours = study.coverage.get(i, j);
            let tvm = fixture["coverage"]["hash"][i][j].as_f64().expect("number");
            // MobileNetV2 adds its residual as x + block(x), V3 as block(x) + x.
            if matches!(
                (*row, *col),
                ("mobilenet_v2", "mobilenet_v3_large") | ("mobilenet_v3_large", "mobilenet_v2")
            ) {
                assert!(ours > tvm, "{row} by {col}: {ours} vs TVM {tvm}");
            } else {
                assert!(
                    (ours - tvm).abs() < 1e-9,
                    "{row} by {col}: {ours} vs TVM {tvm}"
                );
            }
        }
    }
}

#[test]
fn zoo_census() {
    let models: Vec<ModelTasks> = zoo()
        .into_iter()
        .map(|(name, m)| ModelTasks::new(name, extract_tasks(&partitioned(m))))
        .collect();
    let study = Study::new(&models, Level::Structural);
    insta::assert_snapshot!(study.census_markdown());
}

/// tgc's canonical fusion order against TVM's program order on every zoo and bundled model:
/// never more distinct tasks, the same number of calls, and the same tasks except where the
/// exporter put a residual block's shortcut convolution first. Keras' ResNet-50 does, so in
/// TVM the shortcut absorbs the residual add; the canonical order gives it to the main path,
/// whose last convolution then is the same task as in the identity blocks (28 tasks, not 31).
/// The zoo's ResNets are built main path first, as torchvision's are, and TVM agrees there.
#[test]
fn canonical_fusion_order_against_tvms_program_order() {
    let mut models = zoo();
    for name in [
        "keras-resnet50",
        "keras-mobilenetv2",
        "keras-densenet121",
        "keras-inceptionv3",
    ] {
        let path = root().join("models").join(format!("{name}.onnx"));
        models.push((
            name,
            tgc_ir::onnx::import_file(&path, &[]).expect("imports"),
        ));
    }
    let mut differ = Vec::new();
    for (name, m) in models {
        let table = |pipeline: &str| {
            let mut t: Vec<(TaskKey, usize)> = extract_tasks(&partitioned_by(pipeline, m.clone()))
                .iter()
                .map(|t| (t.keys.exact, t.occurrences))
                .collect();
            t.sort();
            t
        };
        let (canonical, program) = (table("partition"), table("partition{order=program}"));
        let calls = |t: &[(TaskKey, usize)]| t.iter().map(|x| x.1).sum::<usize>();
        assert!(
            canonical.len() <= program.len(),
            "{name}: more tasks than TVM's order"
        );
        assert_eq!(calls(&canonical), calls(&program), "{name}: calls");
        if canonical != program {
            differ.push((name, canonical.len(), program.len()));
        }
    }
    assert_eq!(differ, vec![("keras-resnet50", 28, 31)]);
}
