//! Reliability with real processes (`tgc-cache-writer`): concurrent writers lose nothing,
//! and a writer killed with SIGKILL at random moments never leaves a cache that fails
//! `verify` nor loses a commit it acknowledged. Each runs on a cache file and on a
//! throwaway PostgreSQL server (`sqlite::NAME`, `postgres::NAME`).

mod support;
use support::Backend;

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tgc_cache::throwaway::ThrowawayServer;
use tgc_cache::{synth, Cache, Target, Toolchain};

/// Where a test's caches live: files in a temporary directory, or databases on a server.
enum Place {
    Dir(tempfile::TempDir),
    Server(ThrowawayServer),
}

impl Place {
    fn new(b: Backend) -> Place {
        match b {
            Backend::Sqlite => Place::Dir(tempfile::tempdir().unwrap()),
            Backend::Postgres => Place::Server(ThrowawayServer::start().unwrap()),
        }
    }

    /// A new cache location (`name` for a file).
    fn cache(&self, name: &str) -> PathBuf {
        match self {
            Place::Dir(d) => d.path().join(format!("{name}.sqlite")),
            Place::Server(s) => PathBuf::from(s.new_database().unwrap()),
        }
    }
}

const WRITER: &str = env!("CARGO_BIN_EXE_tgc-cache-writer");

fn llvm() -> Target {
    Target::parse(r#"{"kind":"llvm","keys":["cpu"],"num-cores":2}"#).unwrap()
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ms-llvm")
}

fn spawn(cache: &Path, args: &[&str]) -> Child {
    Command::new(WRITER)
        .arg("--cache")
        .arg(cache)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tgc-cache-writer")
}

fn finish(mut child: Child) {
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "writer failed: {err}");
}

/// The trace digests stored for synthetic task (owner, task) of the writer target.
fn stored(cache: &Cache, owner: u64, task: u64) -> BTreeSet<String> {
    let t = synth::task(owner, task, 0);
    cache
        .candidates(&t.keys, &t.features, &llvm(), &Toolchain::pinned(), 1000)
        .unwrap()
        .into_iter()
        .filter(|c| c.tier == tgc_cache::Tier::Exact)
        .map(|c| c.trace.digest().to_string())
        .collect()
}

fn assert_verifies(path: &Path, context: &str) {
    let cache = Cache::open(path).unwrap_or_else(|e| panic!("{context}: {e}"));
    let report = cache.verify().unwrap_or_else(|e| panic!("{context}: {e}"));
    assert!(report.is_ok(), "{context}: {:?}", report.problems);
}

const WRITERS: u64 = 8;
const RECORDS: u64 = 1000;

fn eight_concurrent_writers_lose_nothing(b: Backend) {
    let place = Place::new(b);
    let path = place.cache("cache");
    let tasks = 40; // 25 records per task: below best k, so every record must stay.
    let start = Instant::now();
    let children: Vec<Child> = (0..WRITERS)
        .map(|w| {
            spawn(
                &path,
                &[
                    "--writer",
                    &w.to_string(),
                    "--records",
                    &RECORDS.to_string(),
                    "--tasks",
                    &tasks.to_string(),
                ],
            )
        })
        .collect();
    children.into_iter().for_each(finish);
    eprintln!(
        "{} records by {WRITERS} processes in {:.1?}",
        WRITERS * RECORDS,
        start.elapsed()
    );
    let cache = Cache::open(&path).unwrap();
    let st = cache.stats().unwrap();
    assert_eq!(
        (st.records, st.traces, st.tasks),
        (WRITERS * RECORDS, WRITERS * RECORDS, WRITERS * tasks)
    );
    for w in 0..WRITERS {
        for t in 0..tasks {
            let expected: BTreeSet<String> = (t..RECORDS)
                .step_by(tasks as usize)
                .map(|i| synth::trace(w * 1_000_000 + i).digest().to_string())
                .collect();
            assert_eq!(stored(&cache, w, t), expected, "writer {w} task {t}");
        }
    }
    assert!(cache.verify().unwrap().is_ok());
}

fn eight_concurrent_writers_on_shared_tasks_keep_exactly_the_best_k(b: Backend) {
    let place = Place::new(b);
    let path = place.cache("cache");
    let tasks = 10u64; // 800 records per task compete for 32 places.
    let children: Vec<Child> = (0..WRITERS)
        .map(|w| {
            spawn(
                &path,
                &[
                    "--writer",
                    &w.to_string(),
                    "--records",
                    &RECORDS.to_string(),
                    "--tasks",
                    &tasks.to_string(),
                    "--shared",
                ],
            )
        })
        .collect();
    children.into_iter().for_each(finish);
    let cache = Cache::open(&path).unwrap();
    let k = cache.best_k().unwrap();
    for t in 0..tasks {
        let mut all: Vec<(f64, u64)> = (0..WRITERS)
            .flat_map(|w| {
                (t..RECORDS)
                    .step_by(tasks as usize)
                    .map(move |i| w * 1_000_000 + i)
            })
            .map(|tag| (synth::latency(tag), tag))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let expected: BTreeSet<String> = all[..k]
            .iter()
            .map(|&(_, tag)| synth::trace(tag).digest().to_string())
            .collect();
        assert_eq!(stored(&cache, 0, t), expected, "task {t}");
    }
    let st = cache.stats().unwrap();
    assert_eq!(
        (st.records, st.traces),
        (tasks * k as u64, tasks * k as u64)
    );
    assert!(cache.verify().unwrap().is_ok());
}

/// Reads lines until `ready`, so the kill lands after the cache was opened (opening is also
/// killed at random in other rounds through the plain sleep).
fn wait_ready(child: &mut Child) -> BufReader<std::process::ChildStdout> {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    out
}

fn writers_killed_at_random_moments_leave_a_sound_cache_and_keep_acknowledged_commits(b: Backend) {
    let place = Place::new(b);
    // Two mixers share one cache (puts, best-k changes, gc, imports); a plain writer puts
    // records into another, acknowledging each commit (best k is unbounded there, so every
    // acknowledged record must survive).
    let mixed = place.cache("mixed");
    let acked = place.cache("acked");
    let fixture = fixture();
    // No pruning in the acknowledging cache: a fast writer can commit more than the default
    // best 32 records per task before it is killed, and pruned records are not lost ones.
    Cache::open(&acked)
        .unwrap()
        .set_best_k(1_000_000_000)
        .unwrap();
    let rounds = 24u64;
    let mut kills = 0;
    let mut acknowledged: HashMap<u64, Vec<u64>> = HashMap::new();
    for round in 0..rounds {
        let r = synth::mix(round);
        let plain_id = 100 + round;
        let mut children = [
            spawn(
                &mixed,
                &[
                    "--writer",
                    &(2 * round).to_string(),
                    "--mix",
                    "--import",
                    fixture.to_str().unwrap(),
                ],
            ),
            spawn(&mixed, &["--writer", &(2 * round + 1).to_string(), "--mix"]),
            spawn(
                &acked,
                &[
                    "--writer",
                    &plain_id.to_string(),
                    "--records",
                    "1000000",
                    "--tasks",
                    "7",
                ],
            ),
        ];
        // Some rounds kill while the processes may still be opening (creating, migrating)
        // the cache; most wait until each is writing.
        let mut readers: Vec<Option<BufReader<std::process::ChildStdout>>> = vec![None, None, None];
        if !r.is_multiple_of(5) {
            for (i, c) in children.iter_mut().enumerate() {
                readers[i] = Some(wait_ready(c));
            }
        }
        let mut delays: Vec<(Duration, usize)> = (0..3)
            .map(|i| (Duration::from_millis((r >> (8 * i)) % 80), i))
            .collect();
        delays.sort();
        let start = Instant::now();
        for (delay, i) in delays {
            std::thread::sleep(delay.saturating_sub(start.elapsed()));
            children[i].kill().unwrap(); // SIGKILL
            kills += 1;
        }
        for (i, c) in children.iter_mut().enumerate() {
            let status = c.wait().unwrap();
            // Each must have died by our signal, not failed on its own before it.
            if status.signal() != Some(9) {
                let mut err = String::new();
                c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                panic!("round {round}: writer {i} ended with {status} before the kill: {err}");
            }
            let stdout: Box<dyn Read> = match readers[i].take() {
                Some(r) => Box::new(r),
                None => Box::new(c.stdout.take().unwrap()),
            };
            if i == 2 {
                let acks: Vec<u64> = BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                    .filter_map(|l| l.strip_prefix("ok ").and_then(|n| n.parse().ok()))
                    .collect();
                acknowledged.insert(plain_id, acks);
            }
        }
        assert_verifies(&mixed, &format!("round {round}, mixed cache"));
        assert_verifies(&acked, &format!("round {round}, acknowledging cache"));
    }
    assert!(kills >= 50, "{kills} kills");
    // Every acknowledged commit survived its writer's death.
    let cache = Cache::open(&acked).unwrap();
    let mut total = 0;
    for (w, acks) in &acknowledged {
        for t in 0..7 {
            let want: BTreeSet<String> = acks
                .iter()
                .filter(|&&i| i % 7 == t)
                .map(|&i| synth::trace(w * 1_000_000 + i).digest().to_string())
                .collect();
            let have = stored(&cache, *w, t);
            assert!(
                want.is_subset(&have),
                "writer {w} task {t}: acknowledged records lost"
            );
            total += want.len();
        }
    }
    eprintln!("{kills} kills, {total} acknowledged records all present");
    // Both caches still take writes.
    for path in [&mixed, &acked] {
        let mut cache = Cache::open(path).unwrap();
        cache
            .put(
                &synth::task(0, 0, 0),
                &llvm(),
                &Toolchain::pinned(),
                &[synth::record(1)],
            )
            .unwrap();
        assert!(cache.verify().unwrap().is_ok());
    }
}

support::on_both_backends!(
    eight_concurrent_writers_lose_nothing,
    eight_concurrent_writers_on_shared_tasks_keep_exactly_the_best_k,
    writers_killed_at_random_moments_leave_a_sound_cache_and_keep_acknowledged_commits,
);
