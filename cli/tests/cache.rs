//! `tgc cache ...` end to end through the binary: output lines, exit codes, and one-line
//! errors that name the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(args)
        .env_remove("TGC_CACHE")
        .output()
        .expect("run tgc")
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cache/tests/fixtures/ms-llvm")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts failure with exactly one stderr line that names `path`; returns it.
fn one_line_error(o: &Output, path: &Path) -> String {
    assert_eq!(o.status.code(), Some(1), "stdout: {}", stdout(o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(&path.display().to_string()),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    err
}

#[test]
fn import_stats_export_gc_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("c.sqlite");
    let c = cache.to_str().unwrap();
    let fx = fixture();
    let o = tgc(&["cache", "import", fx.to_str().unwrap(), "--cache", c]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = stdout(&o);
    assert_eq!(line.lines().count(), 1);
    assert!(
        line.contains("imported ") && line.contains(" records for ") && line.contains("; skipped "),
        "{line}"
    );

    let o = tgc(&["cache", "stats", "--json", "--cache", c]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "tgc.cache-stats/1");
    assert_eq!(v["best_k"], 32);
    let records = v["records"].as_u64().unwrap();
    assert!(records > 0);
    let o = tgc(&["cache", "--cache", c, "stats"]);
    assert!(
        stdout(&o).contains(&format!("records:    {records} (")),
        "{}",
        stdout(&o)
    );

    let out = tmp.path().join("ms");
    let o = tgc(&["cache", "export", out.to_str().unwrap(), "--cache", c]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout(&o).contains(&format!("exported {records} records")),
        "{}",
        stdout(&o)
    );
    assert!(
        out.join("database_workload.json").is_file()
            && out.join("database_tuning_record.json").is_file()
    );

    let o = tgc(&["cache", "gc", "--best-k", "1", "--cache", c]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("removed "), "{}", stdout(&o));
    let o = tgc(&["cache", "verify", "--cache", c]);
    assert!(o.status.success());
    assert!(stdout(&o).contains(": ok ("), "{}", stdout(&o));
}

#[test]
fn a_torn_record_line_is_a_skipped_line_count() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("torn");
    std::fs::create_dir(&db).unwrap();
    std::fs::copy(
        fixture().join("database_workload.json"),
        db.join("database_workload.json"),
    )
    .unwrap();
    let mut recs = std::fs::read_to_string(fixture().join("database_tuning_record.json")).unwrap();
    let first = recs.lines().next().unwrap().to_string();
    recs.push_str(&first[..first.len() / 3]);
    std::fs::write(db.join("database_tuning_record.json"), recs).unwrap();
    let cache = tmp.path().join("c.sqlite");
    let o = tgc(&[
        "cache",
        "import",
        db.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let line = stdout(&o);
    assert!(
        line.contains("bad JSON (database_tuning_record.json:"),
        "{line}"
    );
}

#[test]
fn damaged_caches_give_one_line_errors_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    // Garbage.
    let garbage = tmp.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x5au8; 10_000]).unwrap();
    for cmd in ["stats", "verify", "gc"] {
        let e = one_line_error(
            &tgc(&["cache", cmd, "--cache", garbage.to_str().unwrap()]),
            &garbage,
        );
        assert!(e.contains("not a tgc cache"), "{e}");
    }
    // Missing.
    let missing = tmp.path().join("missing.sqlite");
    let e = one_line_error(
        &tgc(&["cache", "stats", "--cache", missing.to_str().unwrap()]),
        &missing,
    );
    assert!(e.contains("does not exist"), "{e}");
    assert!(!missing.exists());
    // Newer schema.
    let newer = tmp.path().join("newer.sqlite");
    let o = tgc(&[
        "cache",
        "import",
        fixture().to_str().unwrap(),
        "--cache",
        newer.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    rusqlite::Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", 7)
        .unwrap();
    let e = one_line_error(
        &tgc(&["cache", "stats", "--cache", newer.to_str().unwrap()]),
        &newer,
    );
    assert!(e.contains("schema version 7 is newer"), "{e}");
    // Truncated.
    let cut = tmp.path().join("cut.sqlite");
    let o = tgc(&[
        "cache",
        "import",
        fixture().to_str().unwrap(),
        "--cache",
        cut.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let o = tgc(&["cache", "gc", "--cache", cut.to_str().unwrap()]);
    assert!(o.status.success());
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = tgc(&["cache", "verify", "--cache", cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&cut.display().to_string()), "{err}");
    // A directory that is not a MetaSchedule database.
    let fresh = tmp.path().join("fresh.sqlite");
    let e = one_line_error(
        &tgc(&[
            "cache",
            "import",
            tmp.path().to_str().unwrap(),
            "--cache",
            fresh.to_str().unwrap(),
        ]),
        tmp.path(),
    );
    assert!(e.contains("database_workload.json is missing"), "{e}");
}

/// Every output of a command, for checks that a secret never shows.
fn all_output(o: &Output) -> String {
    format!("{}{}", stdout(o), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn push_and_pull_between_a_file_and_a_server_without_showing_the_password() {
    use tgc_cache::throwaway::ThrowawayServer;
    let server = ThrowawayServer::start().unwrap();
    let url = server.new_database().unwrap();
    let pw = ThrowawayServer::PASSWORD;
    let shown = url.replace(&format!(":{pw}@"), "@");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("local.sqlite");
    let f = file.to_str().unwrap();
    let fx = fixture();
    assert!(
        tgc(&["cache", "import", fx.to_str().unwrap(), "--cache", f])
            .status
            .success()
    );

    let o = tgc(&["cache", "push", "--cache", f, "--to", &url]);
    assert!(o.status.success(), "{}", all_output(&o));
    let line = stdout(&o);
    assert!(line.starts_with(&format!("{f} -> {shown}: ")), "{line}");
    let records: usize = line
        .split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        records > 0 && line.contains(&format!("{records} new")),
        "{line}"
    );
    let o = tgc(&["cache", "push", "--from", f, "--to", &url]);
    assert!(
        stdout(&o).contains(&format!("0 new, 0 replaced, {records} already there")),
        "idempotent: {}",
        all_output(&o)
    );
    // The server cache through $TGC_CACHE as well as --cache.
    let stats = |cache: &str, env: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tgc"));
        cmd.args(["cache", "stats", "--json"]);
        if env {
            cmd.env("TGC_CACHE", cache);
        } else {
            cmd.env_remove("TGC_CACHE").args(["--cache", cache]);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", all_output(&o));
        no_secret(&all_output(&o), pw);
        let mut v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let path = v["path"].as_str().unwrap().to_string();
        for k in ["path", "file_bytes"] {
            v.as_object_mut().unwrap().remove(k);
        }
        (path, v)
    };
    let (p_server, v_server) = stats(&url, true);
    assert_eq!(p_server, shown);
    assert_eq!(stats(&url, false).1, v_server);
    let (_, v_file) = stats(f, false);
    assert_eq!(v_server, v_file, "the server holds what the file holds");
    for args in [
        vec!["cache", "verify", "--cache", &url],
        vec!["cache", "stats", "--cache", &url],
        vec!["cache", "gc", "--cache", &url],
    ] {
        let o = tgc(&args);
        assert!(o.status.success(), "{args:?}: {}", all_output(&o));
        no_secret(&all_output(&o), pw);
        assert!(stdout(&o).contains(&shown), "{args:?}: {}", stdout(&o));
    }

    // Pulled back into a new file: the same contents.
    let back = tmp.path().join("back.sqlite");
    let b = back.to_str().unwrap();
    let o = tgc(&["cache", "pull", "--from", &url, "--cache", b]);
    assert!(o.status.success(), "{}", all_output(&o));
    assert_eq!(stats(b, false).1, v_file);

    // A wrong password or an unreachable server: one line naming the server, no secret.
    let wrong = url.replace(pw, "Wrong-Pw-1234");
    let o = tgc(&["cache", "stats", "--cache", &wrong]);
    let err = one_line_error(&o, Path::new(&shown));
    no_secret(&err, "Wrong-Pw-1234");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("postgres://tgc:{pw}@127.0.0.1:{port}/x");
    let o = tgc(&["cache", "push", "--cache", f, "--to", &nowhere]);
    let err = one_line_error(&o, Path::new(&format!("postgres://tgc@127.0.0.1:{port}/x")));
    no_secret(&err, pw);
}

fn no_secret(text: &str, secret: &str) {
    assert!(!text.contains(secret), "the password shows: {text}");
}
