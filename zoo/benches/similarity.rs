//! The whole similarity study of docs/similarity.md: the 13 zoo models built with the IR
//! builder plus the four bundled ONNX models imported, all partitioned, tasks extracted and
//! keyed, and the study computed at the three levels. Also each stage alone.
//!
//! `cargo bench -p tgc-zoo --bench similarity`

use criterion::{criterion_group, criterion_main, Criterion};
use std::path::PathBuf;
use tgc_canonicalize::similarity::{ModelTasks, Study};
use tgc_canonicalize::{extract_tasks, Level};
use tgc_ir::Module;
use tgc_passes::partition::Partition;
use tgc_passes::Pass;

const SHARED: [&str; 4] = [
    "keras-resnet50",
    "keras-mobilenetv2",
    "keras-densenet121",
    "keras-inceptionv3",
];

fn load() -> Vec<(String, Module)> {
    let mut out: Vec<(String, Module)> = tgc_zoo::MODELS
        .iter()
        .map(|z| (z.name.to_string(), z.build().expect("zoo model builds")))
        .collect();
    for name in SHARED {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../models")
            .join(format!("{name}.onnx"));
        let m = tgc_ir::onnx::import_file(&path, &[]).expect("bundled model imports");
        out.push((name.to_string(), m));
    }
    out
}

fn tasks(modules: Vec<(String, Module)>) -> Vec<ModelTasks> {
    modules
        .into_iter()
        .map(|(name, mut m)| {
            Partition::default().run(&mut m).expect("partition");
            ModelTasks::new(name, extract_tasks(&m))
        })
        .collect()
}

fn studies(models: &[ModelTasks]) -> Vec<Study> {
    Level::ALL.iter().map(|l| Study::new(models, *l)).collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("similarity");
    g.sample_size(10);
    g.bench_function("whole_study_17_models", |b| {
        b.iter(|| studies(&tasks(load())))
    });
    g.bench_function("load_17_models", |b| b.iter(load));
    let loaded = load();
    g.bench_function("partition_and_key_17_models", |b| {
        b.iter(|| tasks(loaded.clone()))
    });
    let models = tasks(load());
    g.bench_function("study_3_levels", |b| b.iter(|| studies(&models)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
