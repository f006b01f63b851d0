//! Partition + canonicalize speed: each bundled model, and a generated 100,000-binding
//! module; plus key hashing throughput in nodes per second.
//!
//! `cargo bench -p tgc-passes --bench partition`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::path::PathBuf;
use tgc_canonicalize::TaskKeys;
use tgc_ir::{Attr, Attrs, DType, Function, Module, TensorType};
use tgc_passes::canonicalize::Canonicalize;
use tgc_passes::partition::Partition;
use tgc_passes::Pass;

const MODELS: [&str; 4] = [
    "keras-resnet50",
    "keras-mobilenetv2",
    "keras-densenet121",
    "keras-inceptionv3",
];

fn model(name: &str) -> Module {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models")
        .join(format!("{name}.onnx"));
    tgc_ir::onnx::import_file(&path, &[]).expect("bundled model imports")
}

/// A ResNet-like chain of conv + bias + relu blocks with a residual add every third block.
fn generated(n: usize) -> Module {
    let mut f = Function::new("main");
    let mut x = f.add_param(Some("input"), TensorType::new(DType::F32, [1, 64, 56, 56]));
    let w = f.add_param(Some("w"), TensorType::new(DType::F32, [64, 64, 3, 3]));
    let b = f.add_param(Some("b"), TensorType::new(DType::F32, [1, 64, 1, 1]));
    let mut conv = Attrs::new();
    conv.insert("padding".into(), Attr::ints([1, 1, 1, 1]));
    let (mut skip, mut block) = (x, 0);
    while f.bindings.len() + 4 <= n {
        let y = f
            .push_op1("nn.conv2d", &[x, w], conv.clone())
            .expect("conv2d");
        let mut y = f.push_op1("add", &[y, b], Attrs::new()).expect("bias");
        if block % 3 == 2 {
            y = f
                .push_op1("add", &[y, skip], Attrs::new())
                .expect("residual");
            skip = y;
        }
        x = f.push_op1("nn.relu", &[y], Attrs::new()).expect("relu");
        block += 1;
    }
    f.results.push(x);
    let mut m = Module::new("generated");
    m.add_function(f).expect("one function");
    m
}

fn partition_and_canonicalize(m: &Module) -> Module {
    let mut m = m.clone();
    Partition::default().run(&mut m).expect("partition");
    Canonicalize.run(&mut m).expect("canonicalize");
    m
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("partition+canonicalize");
    for name in MODELS {
        let m = model(name);
        g.throughput(Throughput::Elements(m.num_bindings() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(name), &m, |b, m| {
            b.iter(|| partition_and_canonicalize(m))
        });
    }
    let big = generated(100_000);
    g.sample_size(10);
    g.throughput(Throughput::Elements(big.num_bindings() as u64));
    g.bench_with_input(
        BenchmarkId::from_parameter("generated-100k"),
        &big,
        |b, m| b.iter(|| partition_and_canonicalize(m)),
    );
    g.finish();

    // Hashing alone: the three keys of every task of the partitioned DenseNet-121.
    let mut dense = model("keras-densenet121");
    Partition::default().run(&mut dense).expect("partition");
    let tasks: Vec<&Function> = dense
        .functions
        .values()
        .filter(|f| f.is_primitive())
        .collect();
    let nodes: usize = tasks
        .iter()
        .map(|f| f.bindings.len() + f.params.len())
        .sum();
    let mut h = c.benchmark_group("keys");
    h.throughput(Throughput::Elements(nodes as u64));
    h.bench_function("densenet121-task-keys", |b| {
        b.iter(|| tasks.iter().map(|f| TaskKeys::of(f)).collect::<Vec<_>>())
    });
    h.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
