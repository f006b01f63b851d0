//! What only a cache on a server has: a restart while a write is in flight, roles that may
//! only read, and credentials that never show. Against a real throwaway PostgreSQL server.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tgc_cache::throwaway::ThrowawayServer;
use tgc_cache::{synth, Cache, CacheConfig, NewRecord, Target, TaskEntry, Toolchain};

fn llvm() -> Target {
    Target::parse(r#"{"kind":"llvm","keys":["cpu"],"num-cores":2}"#).unwrap()
}

/// `per_task` records on each of `tasks` synthetic tasks (their own tasks per `first`).
fn batch(first: u64, tasks: u64, per_task: u64) -> Vec<(TaskEntry, Vec<NewRecord>)> {
    (0..tasks)
        .map(|t| {
            let recs = (0..per_task)
                .map(|i| synth::record(first + t * per_task + i))
                .collect();
            (synth::task(first, t, 0), recs)
        })
        .collect()
}

fn put_all(cache: &mut Cache, b: &[(TaskEntry, Vec<NewRecord>)]) -> tgc_cache::Result<usize> {
    cache
        .put_batch(
            &llvm(),
            &Toolchain::pinned(),
            b.iter().map(|(t, r)| (t, r.as_slice())),
        )
        .map(|s| s.inserted)
}

#[test]
fn a_restart_fails_the_write_in_flight_clearly_and_a_retry_succeeds() {
    let server = ThrowawayServer::start().unwrap();
    let url_text = server.new_database().unwrap();
    let db = url_text.rsplit('/').next().unwrap().to_string();
    let url = PathBuf::from(&url_text);
    let mut cache = Cache::open(&url).unwrap();
    put_all(&mut cache, &batch(0, 2, 5)).unwrap();
    // A large batch in one transaction, and the server restarts under it. Another session
    // holds a lock on `records`, so the writer has stored its tasks and traces and waits
    // at its first record when the restart comes (no race with the writer's speed).
    let lock = server.block_writes_to(&db, "records").unwrap();
    let big = batch(1_000, 50, 32);
    let writer = std::thread::spawn(move || {
        let r = put_all(&mut cache, &big);
        (cache, big, r)
    });
    server
        .wait_for_a_blocked_session(&db, Duration::from_secs(60))
        .unwrap();
    server.restart().unwrap();
    drop(lock);
    let (mut cache, big, first) = writer.join().unwrap();
    let err = first.expect_err("the write in flight cannot have committed through a restart");
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(
        msg.starts_with(&format!("postgres://tgc@127.0.0.1:{}/", server.port())),
        "names the server: {msg}"
    );
    assert!(
        msg.contains("connection to the cache server was lost")
            || msg.contains("terminating connection"),
        "{msg}"
    );
    // Nothing of the failed transaction is there; the retry stores all of it.
    let st = cache.stats().unwrap();
    assert_eq!(st.records, 10, "only the first batch");
    assert_eq!(st.tasks, 2, "no task of the failed transaction: {st:?}");
    assert_eq!(put_all(&mut cache, &big).unwrap(), 50 * 32);
    assert_eq!(cache.stats().unwrap().records, 10 + 50 * 32);
    assert!(cache.verify().unwrap().is_ok());
}

#[test]
fn a_role_that_may_only_read_looks_up_and_its_writes_are_refused_cleanly() {
    let server = ThrowawayServer::start().unwrap();
    let url = server.new_database().unwrap();
    let db = url.rsplit('/').next().unwrap().to_string();
    let task = synth::task(1, 2, 0);
    {
        let mut cache = Cache::open(&url).unwrap();
        cache
            .put(&task, &llvm(), &Toolchain::pinned(), &[synth::record(5)])
            .unwrap();
    }
    let reader = server.add_reader(&db, "reader", "reader-pw").unwrap();
    for read_only in [true, false] {
        let config = CacheConfig {
            read_only,
            ..CacheConfig::default()
        };
        let mut cache = Cache::open_with(&reader, config, false).unwrap();
        let found = cache
            .candidates(&task.keys, &task.features, &llvm(), &Toolchain::pinned(), 5)
            .unwrap();
        assert_eq!(found.len(), 1, "read_only={read_only}: lookups work");
        assert!(cache.verify().unwrap().is_ok());
        let err = cache
            .put(&task, &llvm(), &Toolchain::pinned(), &[synth::record(6)])
            .unwrap_err();
        assert!(err.is_read_only(), "read_only={read_only}: {err}");
        assert!(err.to_string().contains("read-only"), "{err}");
    }
    // The writer's cache is untouched by the refused writes.
    let cache = Cache::open(&url).unwrap();
    assert_eq!(cache.stats().unwrap().records, 1);
}

#[test]
fn a_read_only_file_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.sqlite");
    let task = synth::task(1, 2, 0);
    Cache::open(&path)
        .unwrap()
        .put(&task, &llvm(), &Toolchain::pinned(), &[synth::record(5)])
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let config = CacheConfig {
        read_only: true,
        ..CacheConfig::default()
    };
    let mut cache = Cache::open_with(&path, config, false).unwrap();
    assert_eq!(
        cache
            .candidates(&task.keys, &task.features, &llvm(), &Toolchain::pinned(), 5)
            .unwrap()
            .len(),
        1
    );
    let err = cache
        .put(&task, &llvm(), &Toolchain::pinned(), &[synth::record(6)])
        .unwrap_err();
    assert!(err.is_read_only(), "{err}");
    assert!(cache.gc(false).unwrap_err().is_read_only());
    drop(cache);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

fn no_secret(text: &str, secret: &str) {
    assert!(!text.contains(secret), "the password shows: {text}");
}

#[test]
fn credentials_come_from_the_url_the_environment_or_a_password_file_and_never_show() {
    let server = ThrowawayServer::start().unwrap();
    let url = server.new_database().unwrap();
    let db = url.rsplit('/').next().unwrap().to_string();
    let pw = ThrowawayServer::PASSWORD;
    // From the URL; what the cache shows has no password.
    let cache = Cache::open(&url).unwrap();
    let st = cache.stats().unwrap();
    let shown = st.path.display().to_string();
    assert_eq!(
        shown,
        format!("postgres://tgc@127.0.0.1:{}/{db}", server.port())
    );
    no_secret(&format!("{st:?}"), pw);
    drop(cache);
    // A wrong password: the error names the server, not the password.
    let wrong = server.url_as("tgc", Some("not-the-Pw-4711"), &db);
    let err = Cache::open(&wrong).err().unwrap().to_string();
    no_secret(&err, "not-the-Pw-4711");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(err.starts_with("postgres://tgc@127.0.0.1:"), "{err}");
    // A bad URL: the same.
    let bad = format!("postgres://tgc:{pw}@127.0.0.1:notaport/{db}");
    let err = Cache::open(&bad).err().unwrap().to_string();
    no_secret(&err, pw);
    // No password in the URL: $PGPASSWORD, else the password file. (Only this test in
    // this binary reads or sets these variables.)
    let bare = server.url_as("tgc", None, &db);
    std::env::remove_var("PGPASSWORD");
    let pgpass = server.dir().join("pgpass");
    std::fs::write(
        &pgpass,
        format!("127.0.0.1:{}:{db}:tgc:{pw}\n", server.port()),
    )
    .unwrap();
    set_mode(&pgpass, 0o600);
    std::env::set_var("PGPASSFILE", &pgpass);
    Cache::open(&bare).expect("password from PGPASSFILE");
    // A password file others can read is ignored, as libpq does.
    set_mode(&pgpass, 0o644);
    let err = Cache::open(&bare).err().unwrap().to_string();
    no_secret(&err, pw);
    std::env::remove_var("PGPASSFILE");
    std::env::set_var("PGPASSWORD", pw);
    Cache::open(&bare).expect("password from PGPASSWORD");
    std::env::remove_var("PGPASSWORD");
    // Cost models of a server cache stay on this machine, apart per server, never beside
    // anything another machine wrote.
    let model = Cache::cost_model_path(Path::new(&url), &llvm(), &Toolchain::pinned());
    assert!(
        model.starts_with(dirs_cache().join("tgc").join("cost-models")),
        "{}",
        model.display()
    );
    no_secret(&model.display().to_string(), pw);
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn dirs_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"))
}

fn ms_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ms-llvm")
}

/// Everything a cache shows of its contents: counts, and the MetaSchedule export of each
/// toolchain's records (byte for byte).
fn contents(cache: &Cache, dir: &Path) -> (Vec<u64>, Vec<Vec<u8>>) {
    let st = cache.stats().unwrap();
    let counts = vec![
        st.tasks,
        st.imported_workloads,
        st.linked_workloads,
        st.traces,
        st.records,
    ];
    let mut files = Vec::new();
    for (tc, _) in &st.toolchains {
        let out = dir.join(format!("export-{}", files.len()));
        let opts = tgc_cache::msdb::ExportOptions {
            toolchain: tc.clone(),
            target: None,
            workloads: None,
        };
        tgc_cache::msdb::export(cache, &out, &opts).unwrap();
        for f in ["database_workload.json", "database_tuning_record.json"] {
            files.push(std::fs::read(out.join(f)).unwrap());
        }
    }
    (counts, files)
}

#[test]
fn copying_between_a_file_and_a_server_keeps_everything_and_is_idempotent() {
    let server = ThrowawayServer::start().unwrap();
    let url = PathBuf::from(server.new_database().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("source.sqlite");
    let mut source = Cache::open(&file).unwrap();
    // MetaSchedule imports, tgc tasks with and without workloads, two toolchains, a spelling.
    tgc_cache::msdb::import(&mut source, &ms_fixture(), &Toolchain::pinned()).unwrap();
    let other = Toolchain::new("0.26.0", "0.1.9", "21");
    for t in 0..6 {
        let mut task = synth::task(3, t, 0);
        if t % 2 == 0 {
            task.workload = Some(tgc_cache::Workload {
                tvm_hash: 1000 + t,
                json: format!("{{\"root_index\":{t}}}"),
            });
        }
        let recs: Vec<NewRecord> = (0..4).map(|i| synth::record(t * 10 + i)).collect();
        source
            .put(&task, &llvm(), &Toolchain::pinned(), &recs)
            .unwrap();
        source.put(&task, &llvm(), &other, &recs[..2]).unwrap();
    }
    let spelled = Target::parse(r#"{"kind":"llvm","num-cores":2}"#).unwrap();
    source
        .register_target(&spelled, &llvm(), &Toolchain::pinned())
        .unwrap();
    let want = contents(&source, &dir.path().join("a"));

    let mut server_cache = Cache::open(&url).unwrap();
    let first = source.copy_into(&mut server_cache).unwrap();
    assert_eq!(first.stored.inserted, first.records, "{first:?}");
    assert_eq!(first.spellings, 1);
    let again = source.copy_into(&mut server_cache).unwrap();
    assert_eq!(
        (again.stored.inserted, again.stored.duplicates),
        (0, again.records),
        "a second push changes nothing: {again:?}"
    );
    assert_eq!(contents(&server_cache, &dir.path().join("b")), want);
    assert!(server_cache.verify().unwrap().is_ok());

    // And back into a fresh file.
    let mut back = Cache::open(dir.path().join("back.sqlite")).unwrap();
    server_cache.copy_into(&mut back).unwrap();
    assert_eq!(contents(&back, &dir.path().join("c")), want);
    let task = synth::task(3, 2, 0);
    let ids = |c: &Cache| -> Vec<(String, u64)> {
        c.candidates(
            &task.keys,
            &task.features,
            &spelled,
            &Toolchain::pinned(),
            10,
        )
        .unwrap()
        .iter()
        .map(|c| (c.trace.digest().to_string(), c.mean_latency.to_bits()))
        .collect()
    };
    assert_eq!(
        ids(&back),
        ids(&source),
        "the spelling resolves on the copy too"
    );
    assert!(!ids(&back).is_empty());
    assert!(back.verify().unwrap().is_ok());
}
