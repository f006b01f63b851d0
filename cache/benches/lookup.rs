//! Lookup latency at 10^5 and 10^6 records.
//!
//! The databases are built once into `<target dir>/tgc-bench/` (bulk insert, one
//! transaction) and reused by later runs. Layout, like a model zoo tuned with best k = 32:
//! families of 8 structural groups of 16 tasks, 32 records per task, one target.
//!
//! Three lookups (limit 32): an exact hit (a task in the cache), a new shape of a known
//! structure (exact miss: the structural tier ranks 15 neighbours' records), and a new
//! structure of a known family (the family tier). Besides criterion's estimates, a plain
//! timing loop prints p50/p99 over 5,000 lookups of random tasks of each kind, in wall time
//! and in the thread's CPU time (which other processes on a shared machine do not inflate).
//!
//! `cargo bench -p tgc-cache --bench lookup` (set `TGC_BENCH_SIZES=100000` to skip 10^6).

mod common;

use common::{families, fill, query, target, Kind, KINDS, LIMIT};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tgc_cache::{Cache, Toolchain};

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("tgc-bench")
}

/// The database with `records` records, built on first use.
fn database(records: u64) -> PathBuf {
    let dir = bench_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("lookup-{records}.sqlite"));
    let done = dir.join(format!("lookup-{records}.done"));
    if done.exists() && path.exists() {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let start = Instant::now();
    let mut cache = Cache::open(&path).unwrap();
    fill(&mut cache, records);
    cache.gc(false).unwrap();
    let st = cache.stats().unwrap();
    eprintln!(
        "built {} ({} records, {} tasks, {:.0} MB) in {:.1?}",
        path.display(),
        st.records,
        st.tasks,
        st.file_bytes as f64 / 1e6,
        start.elapsed()
    );
    std::fs::write(&done, format!("{}\n", st.records)).unwrap();
    path
}

/// CPU time of this thread: unlike wall time, it does not count waiting while other
/// processes use the cores (this machine is shared).
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// p50 and p99 of wall and CPU time per lookup, and candidates per lookup.
struct Percentiles {
    wall: (Duration, Duration),
    cpu: (Duration, Duration),
    per_query: usize,
}

fn percentiles(cache: &Cache, kind: Kind, fams: u64, n: u64) -> Percentiles {
    let (target, tc) = (target(), Toolchain::pinned());
    let mut wall = Vec::with_capacity(n as usize);
    let mut cpu = Vec::with_capacity(n as usize);
    let mut found = 0;
    for i in 0..n {
        let q = query(kind, fams, i);
        let (start, start_cpu) = (Instant::now(), thread_cpu_time());
        let c = cache
            .candidates(&q.keys, &q.features, &target, &tc, LIMIT)
            .unwrap();
        cpu.push(thread_cpu_time() - start_cpu);
        wall.push(start.elapsed());
        found += c.len();
    }
    let p = |v: &mut Vec<Duration>| {
        v.sort();
        (v[v.len() / 2], v[v.len() * 99 / 100])
    };
    Percentiles {
        wall: p(&mut wall),
        cpu: p(&mut cpu),
        per_query: found / n as usize,
    }
}

fn sizes() -> Vec<u64> {
    std::env::var("TGC_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100_000, 1_000_000])
}

fn lookup(c: &mut Criterion) {
    let kinds = KINDS;
    for records in sizes() {
        let path = database(records);
        let cache = Cache::open_existing(&path).unwrap();
        let fams = families(records);
        // Warm the page cache as a long-running tuner would have it.
        percentiles(&cache, Kind::NewShape, fams, 500);
        for kind in kinds {
            let p = percentiles(&cache, kind, fams, 5_000);
            eprintln!(
                "lookup {records} records {kind:?}: wall p50 {:.1?} p99 {:.1?}; cpu p50 {:.1?} p99 {:.1?} ({} candidates per query)",
                p.wall.0, p.wall.1, p.cpu.0, p.cpu.1, p.per_query
            );
        }
        let mut group = c.benchmark_group(format!("lookup/{records}"));
        for kind in kinds {
            let (target, tc) = (target(), Toolchain::pinned());
            let mut i = 0u64;
            group.bench_function(BenchmarkId::from_parameter(format!("{kind:?}")), |b| {
                b.iter(|| {
                    i += 1;
                    let q = query(kind, fams, i);
                    cache
                        .candidates(&q.keys, &q.features, &target, &tc, LIMIT)
                        .unwrap()
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = lookup
}
criterion_main!(benches);
