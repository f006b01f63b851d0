//! `tgc tune` against a cache on a real PostgreSQL server (a throwaway cluster): the first
//! run writes its records there; a CI-style reader, a role that may only SELECT, finds them
//! (exact hits), and its write-back is skipped with one warning, with `--cache-read-only`
//! and without it; the password never shows in output or reports.
//!
//! Needs the pinned TVM venv (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh` creates it) and
//! PostgreSQL's server programs (scripts/deps.sh installs them).

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use tgc_cache::throwaway::ThrowawayServer;

const MODEL: &str = r#"module @small {
  func @main(%x: tensor<1x8x16x16xf32>, %w1: tensor<8x8x3x3xf32>) -> tensor<1x8x16x16xf32> {
    %0 = nn.conv2d(%x, %w1) {padding = [1, 1, 1, 1]} : tensor<1x8x16x16xf32>
    %1 = nn.relu(%0) : tensor<1x8x16x16xf32>
    return %1
  }
}
"#;

fn tune(dir: &Path, cache: &str, report: &str, extra: &[&str]) -> (Output, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_tgc"))
        .arg("tune")
        .arg(dir.join("small.tgc"))
        .args(["--cache", cache])
        .args([
            "--trials-per-task",
            "3",
            "--trials-per-round",
            "3",
            "--population",
            "32",
        ])
        // The exact-hit mechanism is tested, not the machine's noise (see tests/tune.rs).
        .args(["--tolerance", "3", "--no-measure"])
        .args(extra)
        .arg("--report")
        .arg(dir.join(report))
        .arg("--work-dir")
        .arg(dir.join(report.replace(".json", "")))
        .env_remove("TGC_CACHE")
        .output()
        .expect("tgc runs");
    assert!(
        out.status.success(),
        "tgc tune failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(dir.join(report)).expect("report written");
    (out, serde_json::from_str(&report).expect("JSON report"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn written(report: &Value) -> u64 {
    report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["records_written"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_reader_that_may_only_select_uses_the_teams_records_and_writes_nothing() {
    let server = ThrowawayServer::start().unwrap();
    let url = server.new_database().unwrap();
    let db = url.rsplit('/').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.tgc"), MODEL).unwrap();

    let (out, first) = tune(dir.path(), &url, "first.json", &[]);
    assert!(written(&first) >= 1, "{first}");
    let records = tgc_cache::Cache::open_existing(&url)
        .unwrap()
        .stats()
        .unwrap()
        .records;

    let reader = server.add_reader(&db, "ci", "ci-secret-pw").unwrap();
    let mut outputs = vec![text(&out)];
    for (report, extra) in [
        ("flag.json", &["--cache-read-only"][..]),
        ("role.json", &[][..]),
    ] {
        let (out, r) = tune(dir.path(), &reader, report, extra);
        let warnings: Vec<String> = text(&out)
            .lines()
            .filter(|l| l.contains("read-only"))
            .map(str::to_string)
            .collect();
        assert_eq!(warnings.len(), 1, "{report}: one warning: {}", text(&out));
        assert!(
            warnings[0].contains(&format!("postgres://ci@127.0.0.1:{}/{db}", server.port())),
            "{}",
            warnings[0]
        );
        for t in r["tasks"].as_array().unwrap() {
            assert_eq!(
                t["tier"], "exact",
                "{report}: the team's record is found: {t}"
            );
        }
        assert_eq!(written(&r), 0, "{report}");
        outputs.push(text(&out));
        outputs.push(serde_json::to_string(&r).unwrap());
    }
    assert_eq!(
        tgc_cache::Cache::open_existing(&url)
            .unwrap()
            .stats()
            .unwrap()
            .records,
        records,
        "nothing was written"
    );
    // Nor in any file the runs left: reports, worker logs, MetaSchedule's logs.
    let mut files = vec![dir.path().to_path_buf()];
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            outputs.push(String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned());
        }
    }
    assert!(outputs.len() > 6, "the runs left their logs");
    for o in outputs {
        assert!(
            !o.contains("ci-secret-pw") && !o.contains(ThrowawayServer::PASSWORD),
            "{o}"
        );
    }
}
