//! Parse, verify and print a generated 10,000-binding module (the foundation's speed target:
//! under 100 ms for all three together).

use criterion::{criterion_group, criterion_main, Criterion};
use tgc_ir::text::{parse_module, print_module};
use tgc_ir::verify::verify_module;
use tgc_ir::{Attr, Attrs, DType, Function, Module, TensorType};

/// A ResNet-like chain: conv2d + add + relu blocks with a residual add every third block,
/// until `n` bindings exist.
fn generate(n: usize) -> Module {
    let mut f = Function::new("main");
    let c = 64;
    let mut x = f.add_param(Some("input"), TensorType::new(DType::F32, [1, c, 56, 56]));
    let w = f.add_param(Some("w"), TensorType::new(DType::F32, [c, c, 3, 3]));
    let b = f.add_param(Some("b"), TensorType::new(DType::F32, [1, c, 1, 1]));
    let mut conv_attrs = Attrs::new();
    conv_attrs.insert("padding".into(), Attr::ints([1, 1, 1, 1]));
    let mut skip = x;
    let mut block = 0;
    while f.bindings.len() + 4 <= n {
        let y = f
            .push_op1("nn.conv2d", &[x, w], conv_attrs.clone())
            .expect("conv2d");
        let y = f.push_op1("add", &[y, b], Attrs::new()).expect("add");
        let y = if block % 3 == 2 {
            let s = f
                .push_op1("add", &[y, skip], Attrs::new())
                .expect("residual");
            skip = s;
            s
        } else {
            y
        };
        x = f.push_op1("nn.relu", &[y], Attrs::new()).expect("relu");
        block += 1;
    }
    while f.bindings.len() < n {
        x = f.push_op1("nn.relu", &[x], Attrs::new()).expect("relu");
    }
    f.results.push(x);
    let mut m = Module::new("bench");
    m.add_function(f).expect("one function");
    m
}

fn bench_text(c: &mut Criterion) {
    let module = generate(10_000);
    assert_eq!(module.num_bindings(), 10_000);
    let text = print_module(&module);
    let mut g = c.benchmark_group("text-10k-bindings");
    g.bench_function("parse", |b| {
        b.iter(|| parse_module(&text, "bench.tgc").expect("parses"))
    });
    g.bench_function("verify", |b| {
        b.iter(|| verify_module(&module).expect("verifies"))
    });
    g.bench_function("print", |b| b.iter(|| print_module(&module)));
    g.bench_function("parse+verify+print", |b| {
        b.iter(|| {
            let m = parse_module(&text, "bench.tgc").expect("parses");
            verify_module(&m).expect("verifies");
            print_module(&m)
        })
    });
    g.finish();
}

criterion_group!(benches, bench_text);
criterion_main!(benches);
