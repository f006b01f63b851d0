//! The store and retrieval through the public API: dedupe, best k, gc, stats, the lookup
//! tiers and their ranking, target and toolchain isolation, and damaged cache files.

mod support;
use support::Backend;

use std::path::{Path, PathBuf};
use tgc_cache::throwaway::ThrowawayServer;
use tgc_cache::{
    synth, Cache, CacheError, CacheLocation, NewRecord, Query, Target, TaskEntry, Tier, Toolchain,
    Workload,
};

fn llvm() -> Target {
    Target::parse(r#"{"kind":"llvm","keys":["cpu"],"num-cores":2}"#).unwrap()
}

fn cuda() -> Target {
    Target::parse(r#"{"kind":"cuda","arch":"sm_90","keys":["cuda","gpu"]}"#).unwrap()
}

fn tc() -> Toolchain {
    Toolchain::pinned()
}

fn record_with(tag: u64, latency: f64) -> NewRecord {
    let mut r = synth::record(tag);
    r.latencies = vec![latency];
    r
}

/// `task` as the bridge leaves it after lowering: with its TVM workload.
fn lowered(mut task: TaskEntry, tvm_hash: u64, json: &str) -> TaskEntry {
    task.workload = Some(Workload {
        tvm_hash,
        json: json.into(),
    });
    task
}

/// What keeps a test's cache alive, and a way behind the cache's back.
enum Fixture {
    File(#[allow(dead_code)] tempfile::TempDir, PathBuf),
    Server(#[allow(dead_code)] ThrowawayServer, String),
}

impl Fixture {
    /// Runs SQL on the cache directly (as an older binary with a bug might).
    fn exec(&self, sql: &str) {
        match self {
            Fixture::File(_, path) => rusqlite::Connection::open(path)
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Fixture::Server(_, url) => ::postgres::Client::connect(url, ::postgres::NoTls)
                .unwrap()
                .batch_execute(sql)
                .unwrap(),
        }
    }

    /// The location the cache reports: the file, or the URL without its password.
    fn shown(&self) -> PathBuf {
        match self {
            Fixture::File(_, path) => path.clone(),
            Fixture::Server(_, url) => {
                PathBuf::from(url.replace(&format!(":{}@", ThrowawayServer::PASSWORD), "@"))
            }
        }
    }
}

/// A fresh cache on `b`; the returned location opens it again.
fn temp_cache(b: Backend) -> (Fixture, PathBuf, Cache) {
    let (fixture, location) = match b {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("cache.sqlite");
            (Fixture::File(dir, path.clone()), path)
        }
        Backend::Postgres => {
            let server = ThrowawayServer::start().unwrap();
            let url = server.new_database().unwrap();
            (Fixture::Server(server, url.clone()), PathBuf::from(url))
        }
    };
    let cache = Cache::open(&location).unwrap();
    (fixture, location, cache)
}

fn put_dedupes_traces_and_at_one_time_keeps_the_faster_measurement(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    let task = synth::task(0, 0, 0);
    let s = cache
        .put(
            &task,
            &llvm(),
            &tc(),
            &[record_with(1, 3e-4), record_with(2, 2e-4)],
        )
        .unwrap();
    assert_eq!((s.inserted, s.duplicates, s.replaced), (2, 0, 0));
    // Trace 1 again at the same time (synth records of one tag share their time), slower:
    // nothing changes. Faster: the record is replaced.
    let s = cache
        .put(&task, &llvm(), &tc(), &[record_with(1, 5e-4)])
        .unwrap();
    assert_eq!(s.duplicates, 1);
    let s = cache
        .put(&task, &llvm(), &tc(), &[record_with(1, 1e-4)])
        .unwrap();
    assert_eq!(s.replaced, 1);
    // The same trace on another task is stored once.
    cache
        .put(
            &synth::task(0, 0, 1),
            &llvm(),
            &tc(),
            &[record_with(1, 1e-4)],
        )
        .unwrap();
    let st = cache.stats().unwrap();
    assert_eq!((st.tasks, st.records, st.traces), (2, 3, 2));
    let c = cache
        .candidates(&task.keys, &task.features, &llvm(), &tc(), 10)
        .unwrap();
    assert_eq!(
        c.iter().map(|c| c.mean_latency).collect::<Vec<_>>(),
        vec![1e-4, 2e-4]
    );
    assert_eq!(c[0].trace, synth::trace(1));
    assert!(cache.verify().unwrap().is_ok());
}

/// `record_with(tag, latency)` measured `age` seconds after the synth record's time.
fn measured_later(tag: u64, latencies: &[f64], age: i64) -> NewRecord {
    let mut r = synth::record(tag);
    r.latencies = latencies.to_vec();
    r.provenance.created_at = r.provenance.created_at.map(|t| t + age);
    r
}

fn a_newer_measurement_replaces_an_older_one_slower_or_faster(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    let task = synth::task(0, 0, 0);
    let latency = |cache: &Cache| {
        let c = cache
            .candidates(&task.keys, &task.features, &llvm(), &tc(), 10)
            .unwrap();
        assert_eq!(c.len(), 1);
        c[0].mean_latency
    };
    cache
        .put(&task, &llvm(), &tc(), &[measured_later(1, &[2e-4; 5], 0)])
        .unwrap();
    // Re-measured later and slower (a missed exact hit's windows): the record takes the
    // slower latency, where keeping the fastest would hold later checks to a quiet moment.
    let s = cache
        .put(
            &task,
            &llvm(),
            &tc(),
            &[measured_later(1, &[3e-4, 3e-4, 4e-4], 10)],
        )
        .unwrap();
    assert_eq!((s.inserted, s.replaced, s.duplicates), (0, 1, 0));
    assert_eq!(latency(&cache), 3e-4);
    // Later still and faster: replaced again.
    let s = cache
        .put(
            &task,
            &llvm(),
            &tc(),
            &[measured_later(1, &[1.5e-4; 3], 20)],
        )
        .unwrap();
    assert_eq!(s.replaced, 1);
    assert_eq!(latency(&cache), 1.5e-4);
    // An older measurement (a copy from a cache measured before) changes nothing, even
    // a faster one; so does the same measurement again.
    for (secs, age) in [(1e-4, 15), (1.5e-4, 20)] {
        let s = cache
            .put(&task, &llvm(), &tc(), &[measured_later(1, &[secs; 3], age)])
            .unwrap();
        assert_eq!((s.replaced, s.duplicates), (0, 1), "{secs} at {age}");
    }
    assert_eq!(latency(&cache), 1.5e-4);
    let st = cache.stats().unwrap();
    assert_eq!((st.records, st.traces), (1, 1));
    // put_missing (an exact hit's confirmation) replaces nothing, even when newer, and
    // stores only what the group lacks.
    let s = cache
        .put_missing(
            &task,
            &llvm(),
            &tc(),
            &[measured_later(1, &[1.4e-4; 3], 30)],
        )
        .unwrap();
    assert_eq!((s.inserted, s.replaced, s.duplicates), (0, 0, 1));
    assert_eq!(latency(&cache), 1.5e-4);
    let s = cache
        .put_missing(
            &synth::task(0, 0, 1),
            &llvm(),
            &tc(),
            &[measured_later(1, &[1.4e-4; 3], 30)],
        )
        .unwrap();
    assert_eq!(s.inserted, 1, "the same trace under another task");
    assert!(cache.verify().unwrap().is_ok());
}

fn best_k_bounds_every_group_and_can_be_lowered(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    assert_eq!(cache.best_k().unwrap(), 32);
    let task = synth::task(0, 0, 0);
    let records: Vec<NewRecord> = (0..50)
        .map(|i| record_with(i, 1e-4 * (1.0 + i as f64)))
        .collect();
    let s = cache.put(&task, &llvm(), &tc(), &records).unwrap();
    // Offered fastest first, the last 18 never make it into the full group.
    assert_eq!((s.inserted, s.pruned), (32, 18));
    // Offered a faster one, the group drops its slowest.
    let s = cache
        .put(&task, &llvm(), &tc(), &[record_with(99, 1e-5)])
        .unwrap();
    assert_eq!((s.inserted, s.pruned), (1, 1));
    let kept = cache
        .candidates(&task.keys, &task.features, &llvm(), &tc(), 100)
        .unwrap();
    assert_eq!(kept.len(), 32);
    // The kept ones are the 32 fastest, fastest first.
    assert_eq!(kept[0].trace, synth::trace(99));
    assert!(kept[1..]
        .iter()
        .enumerate()
        .all(|(i, c)| c.trace == synth::trace(i as u64)));
    assert_eq!(cache.set_best_k(5).unwrap(), 27);
    assert_eq!(
        cache
            .candidates(&task.keys, &task.features, &llvm(), &tc(), 100)
            .unwrap()
            .len(),
        5
    );
    // Pruned traces do not linger.
    assert_eq!(cache.stats().unwrap().traces, 5);
    assert!(cache.set_best_k(0).is_err());
    assert!(cache.verify().unwrap().is_ok());
}

fn a_candidate_carries_the_most_effort_its_task_had(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    let task = synth::task(0, 0, 0);
    let with_effort = |tag: u64, latency: f64, trials: Option<u32>| {
        let mut r = record_with(tag, latency);
        r.provenance.trials = trials;
        r
    };
    // A 3-trial search, then a 2-trial one (not resuming it) that found a faster trace.
    cache
        .put(&task, &llvm(), &tc(), &[with_effort(1, 3e-4, Some(3))])
        .unwrap();
    cache
        .put(&task, &llvm(), &tc(), &[with_effort(2, 2e-4, Some(2))])
        .unwrap();
    // The same task for another target had a longer search: it stays apart.
    cache
        .put(&task, &cuda(), &tc(), &[with_effort(3, 1e-4, Some(9))])
        .unwrap();
    let c = cache
        .candidates(&task.keys, &task.features, &llvm(), &tc(), 10)
        .unwrap();
    assert_eq!(c[0].trace, synth::trace(2), "the faster record leads");
    assert_eq!(
        c.iter().map(|c| c.trials).collect::<Vec<_>>(),
        vec![Some(3), Some(3)],
        "3 trials stand behind the task, whichever record found its best"
    );
    // A record of unknown effort (a MetaSchedule import) stays unknown.
    cache
        .put(&task, &llvm(), &tc(), &[with_effort(4, 1e-4, None)])
        .unwrap();
    let c = cache
        .candidates(&task.keys, &task.features, &llvm(), &tc(), 10)
        .unwrap();
    assert_eq!(c[0].trials, None);
    assert_eq!(c[1].trials, Some(3));
}

fn target_and_toolchain_are_part_of_every_lookup(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    let task = synth::task(0, 0, 0);
    let old = Toolchain::new("0.20.0", "0.1.0", "15");
    cache
        .put(&task, &llvm(), &tc(), &[record_with(1, 1e-4)])
        .unwrap();
    cache
        .put(&task, &cuda(), &tc(), &[record_with(2, 1e-5)])
        .unwrap();
    cache
        .put(&task, &llvm(), &old, &[record_with(3, 1e-6)])
        .unwrap();
    let on = |t: &Target, c: &Toolchain| {
        cache
            .candidates(&task.keys, &task.features, t, c, 10)
            .unwrap()
    };
    // A CPU record never seeds a GPU run, and the reverse.
    assert_eq!(
        on(&llvm(), &tc())
            .iter()
            .map(|c| c.trace.clone())
            .collect::<Vec<_>>(),
        vec![synth::trace(1)]
    );
    assert_eq!(
        on(&cuda(), &tc())
            .iter()
            .map(|c| c.trace.clone())
            .collect::<Vec<_>>(),
        vec![synth::trace(2)]
    );
    // Another TVM version is not applied unless asked for.
    assert_eq!(on(&llvm(), &old).len(), 1);
    assert!(on(&llvm(), &Toolchain::new("0.28.0", "0.2.0", "22")).is_empty());
    let any = cache
        .lookup(&Query::new(&task.keys, &task.features, &llvm(), &tc(), 10).across_toolchains())
        .unwrap();
    assert_eq!(any.len(), 2);
    assert_eq!(any[0].toolchain, old);
    // An unknown target finds nothing.
    assert!(on(
        &Target::parse(r#"{"kind":"llvm","num-cores":8}"#).unwrap(),
        &tc()
    )
    .is_empty());
}

fn tiers_come_in_order_exact_structural_family(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    let query = synth::task(1, 0, 0);
    // Exact: two records of the query task itself.
    cache
        .put(
            &query,
            &llvm(),
            &tc(),
            &[record_with(10, 5e-4), record_with(11, 4e-4)],
        )
        .unwrap();
    // Structural neighbours: same group, other members (near and far).
    cache
        .put(
            &synth::task(1, 0, 1),
            &llvm(),
            &tc(),
            &[record_with(20, 1e-4), record_with(21, 2e-4)],
        )
        .unwrap();
    cache
        .put(
            &synth::task(1, 0, 19),
            &llvm(),
            &tc(),
            &[record_with(30, 1e-5)],
        )
        .unwrap();
    // Family: another structural group of the same family.
    cache
        .put(
            &synth::task(1, 1, 0),
            &llvm(),
            &tc(),
            &[record_with(40, 1e-6)],
        )
        .unwrap();
    // Unrelated family: never returned.
    cache
        .put(
            &synth::task(2, 0, 0),
            &llvm(),
            &tc(),
            &[record_with(50, 1e-7)],
        )
        .unwrap();

    let c = cache
        .candidates(&query.keys, &query.features, &llvm(), &tc(), 10)
        .unwrap();
    let got: Vec<(Tier, u64)> = c.iter().map(|c| (c.tier, tag_of(&c.trace))).collect();
    assert_eq!(
        got,
        vec![
            (Tier::Exact, 11),
            (Tier::Exact, 10),
            (Tier::Structural, 20),
            (Tier::Structural, 21),
            (Tier::Structural, 30),
            (Tier::Family, 40)
        ]
    );
    assert_eq!(c[0].distance, 0.0);
    // Distances grow with the member index; the nearest neighbour wins despite slower records.
    assert!(c[2].distance < c[4].distance);
    assert_eq!(c[2].source.exact_key, Some(synth::keys(1, 0, 1).exact));
    assert_eq!(c[2].source.model.as_deref(), Some("synthetic"));
    // The formula of the docs: score = distance + rank weight * averaged rank.
    for cand in &c[2..] {
        assert!((cand.score - (cand.distance + cand.rank_bias)).abs() < 1e-12);
    }
    assert_eq!((c[2].rank_bias, c[3].rank_bias), (0.0, 1.0));
    // The limit cuts in tier order.
    let two = cache
        .candidates(&query.keys, &query.features, &llvm(), &tc(), 3)
        .unwrap();
    assert_eq!(
        two.iter().map(|c| tag_of(&c.trace)).collect::<Vec<_>>(),
        vec![11, 10, 20]
    );
}

fn the_ranking_bias_prefers_traces_good_on_many_neighbours(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    let query = synth::task(3, 0, 0);
    // Members 1 and 5 sit at one distance from the query (their extent vectors differ
    // from it by the same amount in different positions): only the rank bias separates
    // their traces. Trace 100 is the fastest on both; trace 101 is fastest on one only.
    let (a, b) = (synth::task(3, 0, 1), synth::task(3, 0, 5));
    assert_eq!(
        query
            .features
            .distance(&a.features)
            .map(|d| (d * 1e9).round()),
        query
            .features
            .distance(&b.features)
            .map(|d| (d * 1e9).round())
    );
    cache
        .put(
            &a,
            &llvm(),
            &tc(),
            &[
                record_with(100, 1e-4),
                record_with(101, 2e-4),
                record_with(102, 3e-4),
            ],
        )
        .unwrap();
    cache
        .put(
            &b,
            &llvm(),
            &tc(),
            &[
                record_with(101, 1.5e-4),
                record_with(100, 1e-4),
                record_with(103, 9e-4),
            ],
        )
        .unwrap();
    let c = cache
        .candidates(&query.keys, &query.features, &llvm(), &tc(), 10)
        .unwrap();
    let order: Vec<u64> = c.iter().map(|c| tag_of(&c.trace)).collect();
    assert_eq!(order, vec![100, 101, 102, 103]);
    // Trace 101 ranks 0.5 on a (2nd of 3) and 0.5 on b (2nd of 3): averaged 0.5.
    assert_eq!(c[1].rank_bias, 0.5);
    assert!(c.iter().all(|c| c.tier == Tier::Structural));
}

fn imported_workloads_are_found_through_the_tvm_hash(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    // A tgc task the bridge lowered to TVM hash 42, and (as an import would leave it) a
    // MetaSchedule workload with hash 42 and its own records.
    let task = lowered(synth::task(4, 0, 0), 42, "{\"root_index\":0}");
    cache
        .put(&task, &llvm(), &tc(), &[record_with(1, 3e-4)])
        .unwrap();
    let other = lowered(synth::task(99, 9, 9), 42, "{}");
    cache
        .put(&other, &llvm(), &tc(), &[record_with(2, 1e-4)])
        .unwrap();
    let (target, toolchain) = (llvm(), tc());
    let q = Query::new(&task.keys, &task.features, &target, &toolchain, 10);
    assert_eq!(
        cache.lookup(&q).unwrap().len(),
        1,
        "without the hash only the exact tier"
    );
    let c = cache.lookup(&q.clone().with_tvm_hash(42)).unwrap();
    assert_eq!(
        c.iter().map(|c| c.tier).collect::<Vec<_>>(),
        vec![Tier::Exact, Tier::TvmHash]
    );
    assert_eq!(c[1].source.tvm_hash, Some(42));
}

fn candidates_lead_to_their_source_workload(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    // A structural neighbour the bridge lowered (its TVM workload is stored), another one
    // that was never lowered, and a MetaSchedule import known only by its TVM hash.
    let neighbour = lowered(synth::task(1, 0, 1), 7, "{\"root_index\":1}");
    let bare = synth::task(1, 0, 2);
    cache
        .put(&neighbour, &llvm(), &tc(), &[record_with(1, 1e-4)])
        .unwrap();
    cache
        .put(&bare, &llvm(), &tc(), &[record_with(2, 2e-4)])
        .unwrap();
    let query = synth::task(1, 0, 3);
    let (target, toolchain) = (llvm(), tc());
    let c = cache
        .lookup(&Query::new(
            &query.keys,
            &query.features,
            &target,
            &toolchain,
            10,
        ))
        .unwrap();
    assert_eq!(c.len(), 2);
    let by_source = |key| c.iter().find(|c| c.source.exact_key == Some(key)).unwrap();
    assert_eq!(
        cache
            .source_workload(&by_source(neighbour.keys.exact).source)
            .unwrap()
            .as_deref(),
        Some("{\"root_index\":1}")
    );
    assert_eq!(
        cache
            .source_workload(&by_source(bare.keys.exact).source)
            .unwrap(),
        None
    );

    // an imported MetaSchedule workload: found through its hash
    let imported = tgc_cache::SourceTask {
        exact_key: None,
        tvm_hash: Some(42),
        model: None,
        task_name: None,
        flops: None,
    };
    assert_eq!(cache.source_workload(&imported).unwrap(), None);
    let hashed = lowered(synth::task(3, 0, 0), 42, "{}");
    cache
        .put(&hashed, &llvm(), &tc(), &[record_with(3, 1e-4)])
        .unwrap();
    assert_eq!(
        cache.source_workload(&imported).unwrap(),
        None,
        "a tgc task with that hash is not an imported workload"
    );

    // a real MetaSchedule database import: its workload comes back by hash
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ms-llvm");
    tgc_cache::msdb::import(&mut cache, &dir, &tc()).unwrap();
    let first = std::fs::read_to_string(dir.join("database_workload.json")).unwrap();
    let row: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let hash: u64 = row[0].as_str().unwrap().parse().unwrap();
    let json = cache
        .source_workload(&tgc_cache::SourceTask {
            tvm_hash: Some(hash),
            ..imported
        })
        .unwrap()
        .expect("the imported workload");
    assert_eq!(
        json,
        tgc_cache::msdb::decode_workload_payload(row[1].as_str().unwrap()).unwrap()
    );
}

fn gc_removes_what_no_record_uses(b: Backend) {
    let (_d, path, mut cache) = temp_cache(b);
    for m in 0..5 {
        let recs: Vec<NewRecord> = (0..10)
            .map(|i| record_with(m * 100 + i, 1e-4 * (1.0 + i as f64)))
            .collect();
        cache
            .put(&synth::task(5, 0, m), &llvm(), &tc(), &recs)
            .unwrap();
    }
    // Lower k behind the cache's back (as an older binary with a bug might): gc enforces it.
    let _ = &path;
    _d.exec("UPDATE settings SET value = '3' WHERE name = 'best_k'");
    let report = cache.verify().unwrap();
    assert_eq!(report.problems.len(), 5, "{:?}", report.problems);
    assert!(report.problems[0].contains("more than best k = 3"));
    let g = cache.gc(true).unwrap();
    assert_eq!((g.records, g.traces), (35, 35));
    assert!(cache.verify().unwrap().is_ok());
    let st = cache.stats().unwrap();
    assert_eq!((st.records, st.traces, st.tasks), (15, 15, 5));
}

fn stats_counts_targets_and_toolchains(b: Backend) {
    let (_d, path, mut cache) = temp_cache(b);
    cache
        .put(
            &synth::task(0, 0, 0),
            &llvm(),
            &tc(),
            &[record_with(1, 1e-4)],
        )
        .unwrap();
    cache
        .put(
            &synth::task(0, 0, 0),
            &cuda(),
            &tc(),
            &[record_with(1, 1e-4), record_with(2, 1e-4)],
        )
        .unwrap();
    let st = cache.stats().unwrap();
    let _ = &path;
    assert_eq!(st.path, _d.shown());
    assert_eq!(st.schema_version, tgc_cache::schema::SCHEMA_VERSION);
    assert_eq!(
        st.targets
            .iter()
            .map(|t| (t.0.as_str(), t.2))
            .collect::<Vec<_>>(),
        vec![("cuda", 2), ("llvm", 1)]
    );
    assert_eq!(st.toolchains, vec![(tc(), 3)]);
    assert!(st.file_bytes > 0);
}

#[test]
fn default_location_follows_tgc_cache() {
    // Only this test touches the variable.
    std::env::set_var("TGC_CACHE", "/some/where/c.sqlite");
    assert_eq!(
        CacheLocation::default_location().unwrap(),
        CacheLocation::File(PathBuf::from("/some/where/c.sqlite"))
    );
    // a team's server in the variable is a server
    std::env::set_var("TGC_CACHE", "postgres://me@db/tgc");
    assert!(CacheLocation::default_location().unwrap().is_server());
    std::env::remove_var("TGC_CACHE");
    let l = CacheLocation::default_location().unwrap();
    assert!(
        l.as_path().ends_with("tgc/cache.sqlite") && !l.is_server(),
        "{l}"
    );
}

fn one_line_naming(err: &CacheError, path: &Path) -> String {
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
    msg
}

#[test]
fn a_garbage_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.sqlite");
    let bytes: Vec<u8> = (0..8192u64).map(|i| synth::mix(i) as u8).collect();
    std::fs::write(&path, bytes).unwrap();
    let err = Cache::open(&path).err().unwrap();
    let msg = one_line_naming(&err, &path);
    assert!(matches!(err, CacheError::NotADatabase { .. }), "{msg}");
    // The file is left alone.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
}

#[test]
fn a_truncated_cache_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.sqlite");
    {
        let mut cache = Cache::open(&path).unwrap();
        for m in 0..40 {
            let recs: Vec<NewRecord> = (0..8).map(|i| synth::record(m * 100 + i)).collect();
            cache
                .put(&synth::task(6, m % 4, m), &llvm(), &tc(), &recs)
                .unwrap();
        }
        cache.gc(false).unwrap();
    }
    let full = std::fs::read(&path).unwrap();
    assert!(full.len() > 64 * 1024);
    for keep in [full.len() / 2, 4096 + 100, 50] {
        std::fs::write(&path, &full[..keep]).unwrap();
        let _ = std::fs::remove_file(path.with_extension("sqlite-wal"));
        let _ = std::fs::remove_file(path.with_extension("sqlite-shm"));
        // Either opening fails, or verify or reading reports the damage; never silence.
        match Cache::open(&path) {
            Err(e) => {
                one_line_naming(&e, &path);
            }
            Ok(cache) => {
                let report = cache.verify();
                let damaged = match &report {
                    Ok(r) => !r.is_ok(),
                    Err(e) => {
                        one_line_naming(e, &path);
                        true
                    }
                };
                assert!(damaged, "a cache cut to {keep} bytes passed verify");
                if let Err(e) = cache.stats() {
                    one_line_naming(&e, &path);
                }
            }
        }
    }
}

fn a_newer_schema_is_refused_not_downgraded(b: Backend) {
    let (_d, path, cache) = temp_cache(b);
    drop(cache);
    let bump = match b {
        Backend::Sqlite => "PRAGMA user_version = 99",
        Backend::Postgres => "UPDATE tgc_schema SET version = 99",
    };
    _d.exec(bump);
    let err = Cache::open(&path).err().unwrap();
    let msg = one_line_naming(&err, &_d.shown());
    let expected = format!(
        "schema version 99 is newer than this tgc supports ({})",
        tgc_cache::schema::SCHEMA_VERSION
    );
    assert!(msg.contains(&expected), "{msg}");
    // Left untouched: still refused, also read-only.
    let ro = tgc_cache::CacheConfig {
        read_only: true,
        ..Default::default()
    };
    let err = Cache::open_with(&path, ro, false).err().unwrap();
    assert!(err.to_string().contains(&expected), "{err}");
}

#[test]
fn open_existing_does_not_create() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.sqlite");
    let err = Cache::open_existing(&path).err().unwrap();
    assert!(matches!(err, CacheError::Missing { .. }));
    one_line_naming(&err, &path);
    assert!(!path.exists());
}

/// The tag a synthetic trace was made from (its last decision).
fn tag_of(t: &tgc_cache::Trace) -> u64 {
    let v: serde_json::Value = serde_json::from_str(t.json()).unwrap();
    v[1].as_array().unwrap().last().unwrap()[1]
        .as_u64()
        .unwrap()
}

fn tags(found: &[tgc_cache::Candidate]) -> Vec<u64> {
    found.iter().map(|c| tag_of(&c.trace)).collect()
}

fn records_of_two_toolchains_stay_apart(b: Backend) {
    let (_d, _p, mut cache) = temp_cache(b);
    let task = lowered(synth::task(0, 0, 0), 77, "{}");
    // The same TVM and tvm-ffi, another LLVM: another toolchain.
    let llvm21 = Toolchain::new(Toolchain::PINNED_TVM, Toolchain::PINNED_TVM_FFI, "21");
    cache
        .put(&task, &llvm(), &tc(), &[record_with(1, 1e-4)])
        .unwrap();
    cache
        .put(&task, &llvm(), &llvm21, &[record_with(2, 1e-5)])
        .unwrap();
    let lookup = |c: &Toolchain| {
        cache
            .lookup(&Query::new(&task.keys, &task.features, &llvm(), c, 10).with_tvm_hash(77))
            .unwrap()
    };
    assert_eq!(tags(&lookup(&tc())), vec![1]);
    assert_eq!(tags(&lookup(&llvm21)), vec![2]);
    // LLVM unknown (the two-part form) is a third toolchain, which has no records.
    assert!(lookup(&Toolchain::parse("0.27.0.post1/0.1.14.post1").unwrap()).is_empty());
    let mut seen = cache.stats().unwrap().toolchains;
    seen.sort();
    assert_eq!(seen, vec![(llvm21.clone(), 1), (tc(), 1)]);
    // The neighbour tiers keep them apart too.
    let neighbour = synth::task(0, 0, 1);
    assert_eq!(
        tags(
            &cache
                .candidates(&neighbour.keys, &neighbour.features, &llvm(), &llvm21, 10)
                .unwrap()
        ),
        vec![2]
    );
}

/// `{"kind":"llvm","num-cores":2}` as TVM 0.27 exports it.
fn llvm_exported() -> Target {
    Target::parse(
        r#"{"kind":"llvm","keys":["cpu"],"mtriple":"x86_64-conda-linux-gnu","num-cores":2,"tag":""}"#,
    )
    .unwrap()
}

fn a_registered_spelling_finds_the_canonical_targets_records(b: Backend) {
    let (_d, path, mut cache) = temp_cache(b);
    let spelled = Target::parse(r#"{"num-cores":2,"kind":"llvm"}"#).unwrap();
    let canonical = llvm_exported();
    let other = Toolchain::new(Toolchain::PINNED_TVM, Toolchain::PINNED_TVM_FFI, "21");
    let task = synth::task(0, 0, 0);
    let find = |cache: &Cache, t: &Target, c: &Toolchain| {
        tags(
            &cache
                .candidates(&task.keys, &task.features, t, c, 10)
                .unwrap(),
        )
    };
    // An older tgc filed records under the spelling; the canonical target has trace 1
    // measured faster, and trace 3. Another toolchain has a record under the spelling.
    cache
        .put(
            &task,
            &spelled,
            &tc(),
            &[record_with(1, 2e-4), record_with(2, 3e-4)],
        )
        .unwrap();
    cache
        .put(
            &task,
            &canonical,
            &tc(),
            &[record_with(1, 1e-4), record_with(3, 5e-4)],
        )
        .unwrap();
    cache
        .put(&task, &spelled, &other, &[record_with(4, 1e-4)])
        .unwrap();
    assert_eq!(find(&cache, &spelled, &tc()), vec![1, 2]);
    assert_eq!(find(&cache, &canonical, &tc()), vec![1, 3]);

    assert_eq!(
        cache.register_target(&spelled, &canonical, &tc()).unwrap(),
        2
    );
    // Either spelling, in any key order, now reads the same records; trace 1 kept its
    // faster measurement.
    let reordered = Target::parse(r#"{"kind":"llvm","num-cores":2}"#).unwrap();
    for t in [&spelled, &reordered, &canonical] {
        assert_eq!(find(&cache, t, &tc()), vec![1, 2, 3], "{t}");
    }
    let best = cache
        .candidates(&task.keys, &task.features, &spelled, &tc(), 1)
        .unwrap();
    assert_eq!(best[0].mean_latency, 1e-4);
    // Registered under the pinned toolchain only: the other one keeps its own row.
    assert_eq!(find(&cache, &spelled, &other), vec![4]);
    assert!(find(&cache, &canonical, &other).is_empty());
    // Writes with the spelling land on the canonical target.
    cache
        .put(&task, &spelled, &tc(), &[record_with(5, 1e-6)])
        .unwrap();
    assert_eq!(find(&cache, &canonical, &tc())[0], 5);
    // Registering again moves nothing; a target registered as itself is a no-op.
    assert_eq!(
        cache.register_target(&spelled, &canonical, &tc()).unwrap(),
        0
    );
    assert_eq!(
        cache
            .register_target(&canonical, &canonical, &tc())
            .unwrap(),
        0
    );
    let err = cache
        .register_target(&cuda(), &canonical, &tc())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the kinds differ") && !err.contains('\n'),
        "{err}"
    );
    assert!(cache.verify().unwrap().is_ok());
    // gc drops the emptied legacy row of the pinned toolchain, not the registration.
    drop(cache);
    let mut cache = Cache::open(&path).unwrap();
    cache.gc(false).unwrap();
    assert_eq!(find(&cache, &spelled, &tc()), vec![5, 1, 2, 3]);
    assert_eq!(find(&cache, &spelled, &other), vec![4]);
    assert!(cache.verify().unwrap().is_ok());
}

#[test]
fn a_version_1_cache_opens_and_keeps_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.sqlite");
    let task = synth::task(0, 0, 0);
    {
        // A cache as schema version 1 wrote it: toolchains without LLVM.
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        tgc_cache::schema::migrate(&mut conn, &path, &tgc_cache::schema::MIGRATIONS[..1]).unwrap();
        let features = serde_json::json!({
            "bytes": task.features.bytes,
            "flops": task.features.flops,
            "log2_extents": task.features.log2_extents,
        });
        conn.execute(
            "INSERT INTO tasks(id, exact_key, structural_key, family_key, features_json) VALUES (1, ?1, ?2, ?3, ?4)",
            rusqlite::params![
                task.keys.exact.to_string(),
                task.keys.structural.to_string(),
                task.keys.family.to_string(),
                tgc_cache::canonical_json(&features)
            ],
        )
        .unwrap();
        conn.execute_batch(
            r#"INSERT INTO targets(id, kind, canonical_json) VALUES (1, 'llvm', '{"kind":"llvm","num-cores":2}');
               INSERT INTO toolchains(id, tvm_version, tvm_ffi_version) VALUES (1, '0.27.0.post1', '0.1.14.post1'), (2, '0.26.0', '0.1.9');"#,
        )
        .unwrap();
        for (id, tag, toolchain) in [(1, 1u64, 1), (2, 2, 2)] {
            let trace = synth::trace(tag);
            conn.execute(
                "INSERT INTO traces(id, digest, trace_json) VALUES (?1, ?2, ?3)",
                rusqlite::params![id, &trace.digest().0[..], trace.json()],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO records(task_id, target_id, toolchain_id, trace_id, latencies_json, mean_latency,
                   num_samples, source, created_at) VALUES (1, 1, ?1, ?2, '[0.0001]', 0.0001, 1, 'tune', 0)",
                rusqlite::params![toolchain, id],
            )
            .unwrap();
        }
    }
    let mut cache = Cache::open(&path).unwrap();
    let st = cache.stats().unwrap();
    assert_eq!(st.schema_version, tgc_cache::schema::SCHEMA_VERSION);
    // The pinned TVM of version 1 gets the LLVM its wheel links; another is unknown.
    let legacy = Toolchain::parse("0.26.0/0.1.9").unwrap();
    assert_eq!(st.toolchains, vec![(legacy.clone(), 1), (tc(), 1)]);
    let spelled = Target::parse(r#"{"kind":"llvm","num-cores":2}"#).unwrap();
    let find = |cache: &Cache, t: &Target, c: &Toolchain| {
        tags(
            &cache
                .candidates(&task.keys, &task.features, t, c, 10)
                .unwrap(),
        )
    };
    assert_eq!(find(&cache, &spelled, &tc()), vec![1]);
    assert_eq!(find(&cache, &spelled, &legacy), vec![2]);
    assert!(cache.verify().unwrap().is_ok());
    // The first tgc tune that canonicalizes the old spelling moves the pinned records.
    assert_eq!(
        cache
            .register_target(&spelled, &llvm_exported(), &tc())
            .unwrap(),
        1
    );
    assert_eq!(find(&cache, &llvm_exported(), &tc()), vec![1]);
    assert_eq!(find(&cache, &spelled, &legacy), vec![2]);
    assert!(cache.verify().unwrap().is_ok());
}

/// A cache written before the key encoding changed (`tgc1:` keys): its tasks verify, tgc's
/// current keys miss them, and the task's TVM workload hash (what tgc tune looks up after
/// lowering) still finds their records, exact for the workload.
fn tasks_with_keys_of_an_older_encoding_are_reached_through_the_tvm_hash(b: Backend) {
    let (_d, path, mut cache) = temp_cache(b);
    let task = lowered(synth::task(5, 0, 0), 77, "{\"root_index\":0}");
    cache
        .put(&task, &llvm(), &tc(), &[record_with(3, 2e-4)])
        .unwrap();
    drop(cache);
    _d.exec("UPDATE tasks SET exact_key = 'tgc1:' || substr(exact_key, 6), structural_key = 'tgc1:' || substr(structural_key, 6), family_key = 'tgc1:' || substr(family_key, 6)");
    let cache = Cache::open(&path).unwrap();
    let report = cache.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.older_keys, 1);
    let (target, toolchain) = (llvm(), tc());
    let q = Query::new(&task.keys, &task.features, &target, &toolchain, 10);
    assert!(cache.lookup(&q).unwrap().is_empty(), "current keys miss it");
    let found = cache.lookup(&q.with_tvm_hash(77)).unwrap();
    assert_eq!(
        found.iter().map(|c| c.tier).collect::<Vec<_>>(),
        vec![Tier::TvmHash]
    );
    assert_eq!(tags(&found), vec![3]);
}

fn a_seed_is_found_by_its_trace_digest_with_its_best_record_and_source(b: Backend) {
    let (_dir, _path, mut cache) = temp_cache(b);
    let task = synth::task(5, 0, 0);
    let (fast, slow) = (record_with(1, 1e-4), record_with(1, 3e-4));
    let digest = fast.trace.digest().to_string();
    cache.put(&task, &llvm(), &tc(), &[slow]).unwrap();
    let other = synth::task(5, 0, 1);
    cache.put(&other, &llvm(), &tc(), &[fast]).unwrap();
    // the trace is stored on two tasks: the best record decides the source...
    let seed = cache
        .seed_by_digest(&digest, None, Tier::Structural, &llvm(), &tc())
        .unwrap()
        .expect("stored");
    assert_eq!(seed.trace.digest().to_string(), digest);
    assert_eq!(seed.tier, Tier::Structural);
    assert_eq!(seed.mean_latency, 1e-4);
    assert_eq!(seed.source.exact_key, Some(other.keys.exact));
    assert_eq!(seed.source.flops, Some(other.features.flops));
    // ... unless the seeded task has its own record of it: an exact seed's latency is its own
    let own = cache
        .seed_by_digest(&digest, Some(&task.keys.exact), Tier::Exact, &llvm(), &tc())
        .unwrap()
        .expect("stored");
    assert_eq!(own.mean_latency, 3e-4);
    assert_eq!(own.source.exact_key, Some(task.keys.exact));
    let third = synth::task(5, 0, 2);
    let not_own = cache
        .seed_by_digest(
            &digest,
            Some(&third.keys.exact),
            Tier::Structural,
            &llvm(),
            &tc(),
        )
        .unwrap()
        .expect("stored");
    assert_eq!(not_own.mean_latency, 1e-4, "no record of its own: the best");
    // another target, an unknown digest: nothing; a malformed digest: an error naming it
    assert!(cache
        .seed_by_digest(&digest, None, Tier::Exact, &cuda(), &tc())
        .unwrap()
        .is_none());
    assert!(cache
        .seed_by_digest(&"0".repeat(64), None, Tier::Exact, &llvm(), &tc())
        .unwrap()
        .is_none());
    let err = cache
        .seed_by_digest("xyz", None, Tier::Exact, &llvm(), &tc())
        .unwrap_err()
        .to_string();
    assert!(err.contains("'xyz' is not 64 hex digits"), "{err}");
}

support::on_both_backends!(
    put_dedupes_traces_and_at_one_time_keeps_the_faster_measurement,
    a_newer_measurement_replaces_an_older_one_slower_or_faster,
    best_k_bounds_every_group_and_can_be_lowered,
    a_candidate_carries_the_most_effort_its_task_had,
    target_and_toolchain_are_part_of_every_lookup,
    tiers_come_in_order_exact_structural_family,
    the_ranking_bias_prefers_traces_good_on_many_neighbours,
    imported_workloads_are_found_through_the_tvm_hash,
    candidates_lead_to_their_source_workload,
    gc_removes_what_no_record_uses,
    stats_counts_targets_and_toolchains,
    a_newer_schema_is_refused_not_downgraded,
    records_of_two_toolchains_stay_apart,
    a_registered_spelling_finds_the_canonical_targets_records,
    tasks_with_keys_of_an_older_encoding_are_reached_through_the_tvm_hash,
    a_seed_is_found_by_its_trace_digest_with_its_best_record_and_source,
);
