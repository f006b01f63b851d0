//! Snapshots of the bundled real models after partitioning: the whole partitioned IR of
//! ResNet-50, and for every model its task table (ops, occurrences, output type, keys).
//! A change to the importer, fusion or keys shows up here as a reviewable diff.

use std::fmt::Write;
use std::path::PathBuf;
use tgc_canonicalize::extract_tasks;
use tgc_ir::Module;
use tgc_passes::{Instrumentation, PassManager};

fn partitioned(model: &str) -> Module {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models")
        .join(model);
    let mut m = tgc_ir::onnx::import_file(&path, &[]).expect("model imports");
    // The frontend records the file as given, an absolute path here: keep the snapshot
    // independent of where the repository is checked out.
    m.attrs.insert(
        "source".into(),
        tgc_ir::Attr::str(format!("models/{model}")),
    );
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline("partition", &mut pm).expect("pipeline");
    pm.run(&mut m, &mut std::io::sink()).expect("pipeline runs");
    m
}

fn task_table(model: &str) -> String {
    let m = partitioned(model);
    let mut out = String::new();
    for t in extract_tasks(&m) {
        let results: Vec<String> = t.result_types.iter().map(|r| r.to_string()).collect();
        writeln!(
            out,
            "{:<3} {:<48} {} -> {}\n    exact {} structural {} family {}",
            t.occurrences,
            t.ops.join(","),
            t.param_types.len(),
            results.join(", "),
            t.keys.exact,
            t.keys.structural,
            t.keys.family
        )
        .expect("write to String");
    }
    out
}

#[test]
fn resnet50_partitioned_ir() {
    insta::assert_snapshot!(tgc_ir::text::print_module(&partitioned(
        "keras-resnet50.onnx"
    )));
}

#[test]
fn resnet50_tasks() {
    insta::assert_snapshot!(task_table("keras-resnet50.onnx"));
}

#[test]
fn mobilenetv2_tasks() {
    insta::assert_snapshot!(task_table("keras-mobilenetv2.onnx"));
}

#[test]
fn densenet121_tasks() {
    insta::assert_snapshot!(task_table("keras-densenet121.onnx"));
}

#[test]
fn inceptionv3_tasks() {
    insta::assert_snapshot!(task_table("keras-inceptionv3.onnx"));
}
