//! MetaSchedule import throughput.
//!
//! Imports a synthetic MetaSchedule database (100 workloads, 20,000 record lines of
//! MetaSchedule-shaped traces, written once into `<target dir>/tgc-bench/`) into a fresh
//! cache per iteration, and prints records per second besides criterion's estimate.
//! The real fixture database is imported too (3 workloads with real ~50 KB workload graphs).
//!
//! `cargo bench -p tgc-cache --bench import`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tgc_cache::msdb::{self, encode_workload_payload, RECORD_FILE, WORKLOAD_FILE};
use tgc_cache::{synth, Cache, Toolchain};

const WORKLOADS: u64 = 100;
const RECORDS: u64 = 20_000;

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("tgc-bench")
}

/// A synthetic MetaSchedule database (deterministic; rewritten each run, it is cheap).
fn synthetic_database() -> PathBuf {
    let dir = bench_dir().join(format!("ms-{RECORDS}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join(WORKLOAD_FILE)).unwrap());
    for i in 0..WORKLOADS {
        let graph = format!("{{\n  \"root_index\": {i},\n  \"nodes\": [{{\"type\": \"None\"}}],\n  \"attrs\": {{\"tvm_version\": \"0.27.0\"}}\n}}");
        writeln!(
            w,
            "[\"{}\",\"{}\"]",
            synth::mix(i),
            encode_workload_payload(&graph)
        )
        .unwrap();
    }
    w.flush().unwrap();
    let mut r = std::io::BufWriter::new(std::fs::File::create(dir.join(RECORD_FILE)).unwrap());
    let target =
        r#"{"keys":["cpu"],"kind":"llvm","mtriple":"x86_64-linux-gnu","num-cores":2,"tag":""}"#;
    for i in 0..RECORDS {
        let secs = synth::latency(i);
        writeln!(
            r,
            "[{},[{},[{secs},{}],{target},[[\"TENSOR\",\"float32\",[1,8,8,8]]]]]",
            i % WORKLOADS,
            synth::trace(i).json(),
            secs * 1.01
        )
        .unwrap();
    }
    r.flush().unwrap();
    dir
}

fn fresh_cache(dir: &Path, n: &mut u64) -> Cache {
    *n += 1;
    let path = dir.join(format!("import-{}-{n}.sqlite", std::process::id()));
    Cache::open(path).unwrap()
}

fn import(c: &mut Criterion) {
    let db = synthetic_database();
    let scratch = tempfile::tempdir().unwrap();
    let tc = Toolchain::pinned();
    let mut n = 0;

    // Plain timing: three imports.
    for _ in 0..3 {
        let mut cache = fresh_cache(scratch.path(), &mut n);
        let start = Instant::now();
        let s = msdb::import(&mut cache, &db, &tc).unwrap();
        let t = start.elapsed();
        eprintln!(
            "import {} record lines: {:.2?} ({:.0} records/s; {} stored, {} outside best k)",
            RECORDS,
            t,
            RECORDS as f64 / t.as_secs_f64(),
            s.stored.inserted,
            s.stored.pruned
        );
    }

    let mut group = c.benchmark_group("import");
    group.throughput(Throughput::Elements(RECORDS));
    group.bench_function("synthetic-20000", |b| {
        b.iter_batched(
            || fresh_cache(scratch.path(), &mut n),
            |mut cache| msdb::import(&mut cache, &db, &tc).unwrap(),
            BatchSize::PerIteration,
        )
    });
    group.finish();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ms-llvm");
    let mut group = c.benchmark_group("import");
    group.bench_function("fixture", |b| {
        b.iter_batched(
            || fresh_cache(scratch.path(), &mut n),
            |mut cache| msdb::import(&mut cache, &fixture, &tc).unwrap(),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(1));
    targets = import
}
criterion_main!(benches);
