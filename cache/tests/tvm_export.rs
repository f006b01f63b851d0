//! Exported MetaSchedule databases open in stock TVM 0.27 and their records replay.
//!
//! Runs `tests/tvm_replay_export.py` with the pinned TVM venv's python: `$TGC_PYTHON`, or
//! the last line printed by `tvm/python/bootstrap.sh` (which creates the venv once). There
//! is no skip: without TVM this test fails and says how to provide it.

use base64::Engine as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tgc_cache::msdb::{self, ExportOptions, RECORD_FILE, WORKLOAD_FILE};
use tgc_cache::{
    synth, Cache, NewRecord, Provenance, Target, TaskEntry, Toolchain, Trace, Workload,
};

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> PathBuf {
    manifest_dir().join("tests/fixtures/ms-llvm")
}

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TGC_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let bootstrap = manifest_dir().join("../tvm/python/bootstrap.sh");
    if bootstrap.is_file() {
        let out = Command::new("bash")
            .arg(&bootstrap)
            .output()
            .expect("run tvm/python/bootstrap.sh");
        assert!(
            out.status.success(),
            "tvm/python/bootstrap.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or("").trim();
        assert!(
            !last.is_empty() && Path::new(last).exists(),
            "bootstrap.sh printed no python path: {stdout}"
        );
        return PathBuf::from(last);
    }
    panic!(
        "this test needs the pinned TVM 0.27 venv: set TGC_PYTHON=/path/to/venv/bin/python \
         (e.g. /root/.cache/tgc/venv-tvm/bin/python) or provide tvm/python/bootstrap.sh"
    );
}

/// Opens `dir` with stock TVM, replays every record and builds each workload's best.
fn replay_in_tvm(dir: &Path) -> Value {
    let script = manifest_dir().join("tests/tvm_replay_export.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(dir)
        .output()
        .expect("run the TVM replay script");
    assert!(
        out.status.success(),
        "TVM could not open or replay {}:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn first_line_json(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn exported_databases_open_and_replay_in_tvm() {
    let tmp = tempfile::tempdir().unwrap();
    let tc = Toolchain::pinned();

    // Cache A: the fixture imported.
    let mut a = Cache::open(tmp.path().join("a.sqlite")).unwrap();
    let imported = msdb::import(&mut a, &fixture(), &tc).unwrap();

    // Cache B: what the tuning bridge would write: a tgc task lowered to the fixture's first
    // workload, with the fixture's measured traces of it (through `put`, not import).
    let workloads = first_line_json(&fixture().join(WORKLOAD_FILE));
    let hash: u64 = workloads[0][0].as_str().unwrap().parse().unwrap();
    let json = msdb::decode_workload_payload(workloads[0][1].as_str().unwrap()).unwrap();
    let task = TaskEntry {
        workload: Some(Workload {
            tvm_hash: hash,
            json,
        }),
        ..synth::task(0, 0, 0)
    };
    let mut target = None;
    let records: Vec<NewRecord> = first_line_json(&fixture().join(RECORD_FILE))
        .into_iter()
        .filter(|r| r[0] == 0)
        .filter_map(|r| {
            let secs: Vec<f64> = r[1][1]
                .as_array()?
                .iter()
                .filter_map(Value::as_f64)
                .filter(|&s| s < 1e10)
                .collect();
            if secs.is_empty() {
                return None;
            }
            target = Some(Target::from_json(&r[1][2]).unwrap());
            Some(NewRecord {
                trace: Trace::from_json(&r[1][0]).unwrap(),
                latencies: secs,
                args_info: Some(r[1][3].clone()),
                provenance: Provenance {
                    model: Some("fixture".into()),
                    ..Provenance::default()
                },
            })
        })
        .collect();
    assert!(
        !records.is_empty(),
        "the fixture has valid records for its first workload"
    );
    let mut b = Cache::open(tmp.path().join("b.sqlite")).unwrap();
    b.put(&task, target.as_ref().unwrap(), &tc, &records)
        .unwrap();
    // The same records in A as well: the export writes each trace of a workload once.
    a.put(&task, target.as_ref().unwrap(), &tc, &records)
        .unwrap();

    for (name, cache, expected) in [("a", &a, imported.imported()), ("b", &b, records.len())] {
        let dir = tmp.path().join(format!("export-{name}"));
        let s = msdb::export(
            cache,
            &dir,
            &ExportOptions {
                toolchain: tc.clone(),
                target: None,
                workloads: None,
            },
        )
        .unwrap();
        assert_eq!(s.records, expected, "{name}: {s}");
        let r = replay_in_tvm(&dir);
        assert_eq!(r["records"], expected, "{name}: {r}");
        assert_eq!(r["replayed"], expected, "{name}: {r}");
        assert_eq!(r["workloads"], s.workloads, "{name}: {r}");
        assert_eq!(r["built"], s.workloads, "{name}: {r}");
        assert_eq!(r["without_valid"], 0, "{name}: {r}");
        // Our stored TVM hashes are TVM's own.
        assert_eq!(r["hash_matches"], s.workloads, "{name}: {r}");
    }
    // TVM 0.27 payloads carry the 8-byte length prefix that export writes.
    let payload = base64::engine::general_purpose::STANDARD
        .decode(workloads[0][1].as_str().unwrap())
        .unwrap();
    assert_eq!(
        u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize,
        payload.len() - 8
    );
}
