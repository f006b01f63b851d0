//! The two backends side by side: lookup latency (p50/p99) and the write throughput of 8
//! concurrent writer processes, a cache file against a PostgreSQL server on loopback.
//!
//! The server is a throwaway cluster started here (`tgc_cache::throwaway`); the records are
//! the layout of the `lookup` bench (families of 8 structural groups of 16 tasks, 32
//! records per task), copied into the server with `Cache::copy_into`. Lookups are the
//! three kinds of the `lookup` bench, 2,000 random tasks each after a warm-up. Writes: 8
//! `tgc-cache-writer` processes, each putting `TGC_BENCH_WRITES` (default 250) records in
//! one transaction per record, on tasks of their own.
//!
//! `cargo bench -p tgc-cache --bench backends` (`TGC_BENCH_RECORDS`, default 100000;
//! `TGC_BENCH_ROUNDS`, default 3: the write test is repeated and every round printed).

mod common;

use common::{families, fill, query, target, Kind, KINDS, LIMIT};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tgc_cache::throwaway::ThrowawayServer;
use tgc_cache::{Cache, Toolchain};

const WRITERS: u64 = 8;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn lookups(cache: &Cache, kind: Kind, fams: u64, n: u64) -> (Duration, Duration, usize) {
    let (target, tc) = (target(), Toolchain::pinned());
    let mut wall = Vec::with_capacity(n as usize);
    let mut found = 0;
    for i in 0..n {
        let q = query(kind, fams, i);
        let start = Instant::now();
        found += cache
            .candidates(&q.keys, &q.features, &target, &tc, LIMIT)
            .unwrap()
            .len();
        wall.push(start.elapsed());
    }
    wall.sort();
    (
        wall[wall.len() / 2],
        wall[wall.len() * 99 / 100],
        found / n as usize,
    )
}

/// Seconds for 8 writer processes to put `per_writer` records each.
fn writers(location: &Path, per_writer: u64, round: u64) -> f64 {
    let start = Instant::now();
    let children: Vec<_> = (0..WRITERS)
        .map(|w| {
            Command::new(env!("CARGO_BIN_EXE_tgc-cache-writer"))
                .arg("--cache")
                .arg(location)
                .args([
                    "--writer",
                    &(1000 + round * WRITERS + w).to_string(),
                    "--records",
                    &per_writer.to_string(),
                    "--tasks",
                    "40",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing we need.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let records = env_u64("TGC_BENCH_RECORDS", 100_000);
    let per_writer = env_u64("TGC_BENCH_WRITES", 250);
    let rounds = env_u64("TGC_BENCH_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.sqlite");
    let t = Instant::now();
    fill(&mut Cache::open(&file).unwrap(), records);
    eprintln!(
        "built the file cache ({records} records) in {:.1?}",
        t.elapsed()
    );
    let server = ThrowawayServer::start().unwrap();
    let url = PathBuf::from(server.new_database().unwrap());
    let t = Instant::now();
    {
        let source = Cache::open_existing(&file).unwrap();
        let mut dest = Cache::open(&url).unwrap();
        source.copy_into(&mut dest).unwrap();
        dest.gc(true).unwrap();
    }
    eprintln!("copied it to the server in {:.1?}", t.elapsed());
    let fams = families(records);
    for (name, location) in [("sqlite", file.clone()), ("postgres", url.clone())] {
        let cache = Cache::open_existing(&location).unwrap();
        lookups(&cache, Kind::NewShape, fams, 300);
        for kind in KINDS {
            let (p50, p99, per) = lookups(&cache, kind, fams, 2_000);
            println!(
                "lookup {name:<8} {records} records {kind:?}: p50 {p50:.2?} p99 {p99:.2?} ({per} candidates)"
            );
        }
    }
    for round in 0..rounds {
        for (name, location) in [("sqlite", &file), ("postgres", &url)] {
            let secs = writers(location, per_writer, round);
            println!(
                "write    {name:<8} round {round}: {WRITERS} writers x {per_writer} records in {secs:.2} s = {:.0} records/s",
                (WRITERS * per_writer) as f64 / secs
            );
        }
    }
    for (name, location) in [("sqlite", &file), ("postgres", &url)] {
        let cache = Cache::open_existing(location).unwrap();
        assert!(cache.verify().unwrap().is_ok(), "{name}");
        let st = cache.stats().unwrap();
        assert_eq!(
            st.records,
            records.div_ceil(4096) * 4096 + rounds * WRITERS * per_writer
        );
    }
}
