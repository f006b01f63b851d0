//! MetaSchedule database import and export against the real fixtures in
//! `tests/fixtures/ms-llvm` (made by `tvm/python/make_ms_fixtures.py`), and against damaged
//! copies of them.

mod support;
use support::Backend;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tgc_cache::msdb::{self, ExportOptions, SkipReason, RECORD_FILE, WORKLOAD_FILE};
use tgc_cache::throwaway::ThrowawayServer;
use tgc_cache::{
    synth, Cache, NewRecord, Query, Target, TaskEntry, Tier, Toolchain, Trace, Workload,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ms-llvm")
}

struct Manifest {
    /// (workload hash, record lines, valid records) per task, in workload-file order.
    tasks: Vec<(u64, usize, usize)>,
}

fn manifest() -> Manifest {
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("manifest.json")).unwrap())
            .unwrap();
    let mut tasks: Vec<(usize, u64, usize, usize)> = m["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["workload_index"].as_u64().unwrap() as usize,
                t["workload_hash"].as_str().unwrap().parse().unwrap(),
                t["record_lines"].as_u64().unwrap() as usize,
                t["valid_records"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    tasks.sort();
    Manifest {
        tasks: tasks.into_iter().map(|(_, h, l, v)| (h, l, v)).collect(),
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A fresh cache: a file in `dir`, or a database on a throwaway server (kept alive by the
/// first element).
fn temp_cache(dir: &Path, b: Backend) -> (Option<ThrowawayServer>, Cache) {
    match b {
        Backend::Sqlite => (None, Cache::open(dir.join("cache.sqlite")).unwrap()),
        Backend::Postgres => {
            let server = ThrowawayServer::start().unwrap();
            let url = server.new_database().unwrap();
            let cache = Cache::open(&url).unwrap();
            (Some(server), cache)
        }
    }
}

/// (workload hash, target JSON, trace digest, run_secs) of every record line of a database.
fn record_set(dir: &Path) -> BTreeSet<(String, String, String, String)> {
    let hashes: Vec<String> = lines(&dir.join(WORKLOAD_FILE))
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()[0]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    lines(&dir.join(RECORD_FILE))
        .iter()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let secs = v[1][1].as_array()?;
            if secs.iter().all(|s| s.as_f64().unwrap() >= 1e10) {
                return None;
            }
            Some((
                hashes[v[0].as_u64().unwrap() as usize].clone(),
                tgc_cache::canonical_json(&v[1][2]),
                Trace::from_json(&v[1][0]).unwrap().digest().to_string(),
                tgc_cache::canonical_json(&v[1][1]),
            ))
        })
        .collect()
}

fn imports_the_fixture_databases(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let (_server_cache, mut cache) = temp_cache(tmp.path(), b);
    let m = manifest();
    let s = msdb::import(&mut cache, &fixture(), &Toolchain::pinned()).unwrap();
    let valid: usize = m.tasks.iter().map(|t| t.2).sum();
    let lines_total: usize = m.tasks.iter().map(|t| t.1).sum();
    let with_records = m.tasks.iter().filter(|t| t.2 > 0).count();
    assert_eq!(s.workload_lines, m.tasks.len());
    assert_eq!(s.record_lines, valid);
    assert_eq!(s.imported() + s.stored.duplicates, valid);
    assert_eq!(s.workloads, with_records);
    // Failed measurements (all 1e10) are counted, never silently dropped.
    assert_eq!(s.skipped.len(), lines_total - valid);
    assert!(s
        .skipped
        .iter()
        .all(|k| k.reason == SkipReason::NoValidRunSecs && k.file == RECORD_FILE));
    let line = s.to_string();
    assert!(
        line.contains(&format!(
            "imported {} records for {} workloads",
            s.imported(),
            with_records
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!("skipped {} lines", lines_total - valid)),
        "{line}"
    );
    assert!(!line.contains('\n'));

    let st = cache.stats().unwrap();
    assert_eq!(st.imported_workloads as usize, m.tasks.len());
    assert_eq!(st.records as usize, s.imported());
    assert_eq!(st.targets.len(), 1);
    assert_eq!(st.targets[0].0, "llvm");
    assert!(cache.verify().unwrap().is_ok());

    // Importing again changes nothing.
    let again = msdb::import(&mut cache, &fixture(), &Toolchain::pinned()).unwrap();
    assert_eq!(again.imported(), 0);
    assert_eq!(again.stored.duplicates, valid);
    assert_eq!(cache.stats().unwrap().records, st.records);
}

fn imported_workloads_link_to_tgc_tasks_by_tvm_hash(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let (_server_cache, mut cache) = temp_cache(tmp.path(), b);
    msdb::import(&mut cache, &fixture(), &Toolchain::pinned()).unwrap();
    let (hash, _, valid) = manifest().tasks.into_iter().find(|t| t.2 > 0).unwrap();
    assert_eq!(cache.stats().unwrap().linked_workloads, 0);
    // The bridge lowered a tgc task to this workload and wrote one record for it.
    let task = TaskEntry {
        workload: Some(Workload {
            tvm_hash: hash,
            json: "{}".into(),
        }),
        ..synth::task(7, 0, 0)
    };
    let target = Target::from_json(
        &cache.stats().unwrap().targets[0]
            .1
            .parse::<Value>()
            .unwrap(),
    )
    .unwrap();
    let tc = Toolchain::pinned();
    cache.put(&task, &target, &tc, &[synth::record(1)]).unwrap();
    assert_eq!(cache.stats().unwrap().linked_workloads, 1);
    let c = cache
        .lookup(&Query::new(&task.keys, &task.features, &target, &tc, 100).with_tvm_hash(hash))
        .unwrap();
    assert_eq!(c[0].tier, Tier::Exact);
    assert_eq!(c.iter().filter(|c| c.tier == Tier::TvmHash).count(), valid);
    assert!(c[1..]
        .windows(2)
        .all(|w| w[0].mean_latency <= w[1].mean_latency));
    assert!(c[1..]
        .iter()
        .all(|c| c.source.exact_key.is_none() && c.source.tvm_hash == Some(hash)));
    // Imported records are only ever found for this target and toolchain.
    let other = Toolchain::new("0.26.0", "0.1.0", "20");
    assert!(cache
        .lookup(&Query::new(&task.keys, &task.features, &target, &other, 100).with_tvm_hash(hash))
        .unwrap()
        .is_empty());
}

/// A copy of the fixture with damaged lines: returns the expected skips.
fn damaged_copy(dir: &Path) -> Vec<(&'static str, usize, SkipReason)> {
    let wl = lines(&fixture().join(WORKLOAD_FILE));
    let recs = lines(&fixture().join(RECORD_FILE));
    let n = wl.len();
    let mut workloads = wl.clone();
    // Line n+1: bad base64; n+2: bad hash; n+3: not even JSON; n+4: a valid copy of line 1
    // (the same hash again: same workload row).
    workloads.push(r#"["123","%%%not base64%%%"]"#.into());
    workloads.push(format!(
        r#"["-5",{}]"#,
        serde_json::from_str::<Value>(&wl[0]).unwrap()[1]
    ));
    workloads.push("\u{0}\u{1}garbage".into());
    workloads.push(wl[0].clone());
    std::fs::write(dir.join(WORKLOAD_FILE), workloads.join("\n") + "\n").unwrap();

    let good = &recs[0];
    let v: Value = serde_json::from_str(good).unwrap();
    let body = &v[1];
    let with_index = |i: usize| format!("[{i},{body}]");
    let mut records = recs.clone();
    let mut expect = Vec::new();
    let mut push = |records: &mut Vec<String>, line: String, reason: Option<SkipReason>| {
        records.push(line);
        if let Some(r) = reason {
            expect.push((RECORD_FILE, records.len(), r));
        }
    };
    push(
        &mut records,
        with_index(n + 7),
        Some(SkipReason::UnknownWorkload),
    );
    push(
        &mut records,
        with_index(n),
        Some(SkipReason::UnknownWorkload),
    ); // names the bad-base64 line
    push(
        &mut records,
        format!("[0,[{},[1e10,1e10],{},null]]", body[0], body[2]),
        Some(SkipReason::NoValidRunSecs),
    );
    push(
        &mut records,
        format!("[0,[{},[3e-6],null,null]]", body[0]),
        Some(SkipReason::BadTarget),
    );
    push(
        &mut records,
        r#"[0,[{"not":"a trace"},[3e-6],{"kind":"llvm"},null]]"#.into(),
        Some(SkipReason::BadTrace),
    );
    push(
        &mut records,
        r#"{"what": 1}"#.into(),
        Some(SkipReason::BadShape),
    );
    // Through the duplicate workload line: a valid record (same trace: a duplicate).
    push(&mut records, with_index(n + 3), None);
    // Last: a torn line, as left by a tuner killed mid-write (no newline).
    let torn = &good[..good.len() / 2];
    let mut text = records.join("\n") + "\n";
    text.push_str(torn);
    expect.push((RECORD_FILE, records.len() + 1, SkipReason::BadJson));
    std::fs::write(dir.join(RECORD_FILE), text).unwrap();
    let mut all = vec![
        (WORKLOAD_FILE, n + 1, SkipReason::BadBase64),
        (WORKLOAD_FILE, n + 2, SkipReason::BadHash),
        (WORKLOAD_FILE, n + 3, SkipReason::BadJson),
    ];
    all.extend(expect);
    all
}

fn damaged_lines_are_counted_and_skipped_with_their_place(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("damaged");
    std::fs::create_dir(&db).unwrap();
    let expected = damaged_copy(&db);
    let (_server_cache, mut cache) = temp_cache(tmp.path(), b);
    let s = msdb::import(&mut cache, &db, &Toolchain::pinned()).unwrap();
    let m = manifest();
    let original_skips = m.tasks.iter().map(|t| t.1 - t.2).sum::<usize>();
    let got: Vec<(&str, usize, SkipReason)> = s
        .skipped
        .iter()
        .map(|k| (k.file, k.line, k.reason))
        .filter(|k| {
            // Leave out the fixture's own failed measurements (counted in the other test).
            !(k.0 == RECORD_FILE && k.1 <= m.tasks.iter().map(|t| t.1).sum::<usize>())
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(s.skipped.len(), expected.len() + original_skips);
    // Every good record still arrives.
    assert_eq!(s.imported(), m.tasks.iter().map(|t| t.2).sum::<usize>());
    let line = s.to_string();
    assert!(
        line.contains(&format!("skipped {} lines: ", s.skipped.len())),
        "{line}"
    );
    let torn = expected.last().unwrap();
    assert!(
        line.contains(&format!(
            "2 bad JSON ({WORKLOAD_FILE}:{}, {RECORD_FILE}:{})",
            m.tasks.len() + 3,
            torn.1
        )),
        "{line}"
    );
    assert!(line.contains("2 unknown workload index"), "{line}");
    assert!(
        line.contains(&format!(
            "1 bad base64 ({WORKLOAD_FILE}:{})",
            m.tasks.len() + 1
        )),
        "{line}"
    );
    assert!(cache.verify().unwrap().is_ok());
}

fn a_directory_without_the_database_files_is_a_clear_error(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let (_server_cache, mut cache) = temp_cache(tmp.path(), b);
    let err = msdb::import(&mut cache, tmp.path(), &Toolchain::pinned())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&tmp.path().display().to_string()) && err.contains(WORKLOAD_FILE),
        "{err}"
    );
}

fn export_then_import_preserves_every_valid_record(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let (_server_cache, mut cache) = temp_cache(tmp.path(), b);
    msdb::import(&mut cache, &fixture(), &Toolchain::pinned()).unwrap();
    let out = tmp.path().join("exported");
    let s = msdb::export(
        &cache,
        &out,
        &ExportOptions {
            toolchain: Toolchain::pinned(),
            target: None,
            workloads: None,
        },
    )
    .unwrap();
    let m = manifest();
    assert_eq!(s.workloads, m.tasks.iter().filter(|t| t.2 > 0).count());
    assert_eq!(s.records, m.tasks.iter().map(|t| t.2).sum::<usize>());
    assert_eq!(
        s.to_string(),
        format!(
            "{}: exported {} records for {} workloads",
            out.display(),
            s.records,
            s.workloads
        )
    );
    // Workload lines come back byte for byte.
    let original: BTreeSet<String> = lines(&fixture().join(WORKLOAD_FILE)).into_iter().collect();
    for l in lines(&out.join(WORKLOAD_FILE)) {
        assert!(
            original.contains(&l),
            "exported workload line differs from the original"
        );
    }
    // The same records (workload, target, trace, run times).
    assert_eq!(record_set(&out), record_set(&fixture()));
    // And a second cache reads the export as it read the original.
    let tmp2 = tempfile::tempdir().unwrap();
    let (_server_cache2, mut cache2) = temp_cache(tmp2.path(), b);
    let s2 = msdb::import(&mut cache2, &out, &Toolchain::pinned()).unwrap();
    assert_eq!((s2.imported(), s2.skipped.len()), (s.records, 0));
}

fn export_selects_toolchain_and_target_and_reports_tasks_without_workload(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let (_server_cache, mut cache) = temp_cache(tmp.path(), b);
    let old = Toolchain::new("0.26.0", "0.1.9", "20");
    msdb::import(&mut cache, &fixture(), &old).unwrap();
    let llvm = Target::parse(r#"{"kind":"llvm"}"#).unwrap();
    let recs: Vec<NewRecord> = (0..3).map(synth::record).collect();
    cache
        .put(&synth::task(0, 0, 0), &llvm, &Toolchain::pinned(), &recs)
        .unwrap();
    let out = tmp.path().join("x");
    let s = msdb::export(
        &cache,
        &out,
        &ExportOptions {
            toolchain: Toolchain::pinned(),
            target: None,
            workloads: None,
        },
    )
    .unwrap();
    assert_eq!((s.records, s.workloads, s.without_workload), (0, 0, 3));
    assert!(s
        .to_string()
        .ends_with("left out 3 records of tasks without a TVM workload"));
    assert_eq!(std::fs::read_to_string(out.join(RECORD_FILE)).unwrap(), "");
    let s = msdb::export(
        &cache,
        &out,
        &ExportOptions {
            toolchain: old.clone(),
            target: None,
            workloads: None,
        },
    )
    .unwrap();
    assert_eq!(
        s.records,
        manifest().tasks.iter().map(|t| t.2).sum::<usize>()
    );
    let s = msdb::export(
        &cache,
        &out,
        &ExportOptions {
            toolchain: old,
            target: Some(llvm),
            workloads: None,
        },
    )
    .unwrap();
    assert_eq!(s.records, 0);
}

fn an_export_for_some_workloads_writes_only_their_records(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let (_server_cache, mut cache) = temp_cache(tmp.path(), b);
    msdb::import(&mut cache, &fixture(), &Toolchain::pinned()).unwrap();
    let m = manifest();
    let with_records: Vec<&(u64, usize, usize)> = m.tasks.iter().filter(|t| t.2 > 0).collect();
    assert!(
        with_records.len() >= 2,
        "the fixture has workloads to choose from"
    );
    let chosen = with_records[0];
    // one workload with records, and one hash the cache does not have
    let only: BTreeSet<u64> = [chosen.0, 12345].into_iter().collect();
    let out = tmp.path().join("some");
    let s = msdb::export(
        &cache,
        &out,
        &ExportOptions {
            toolchain: Toolchain::pinned(),
            target: None,
            workloads: Some(only),
        },
    )
    .unwrap();
    assert_eq!(s.workloads, 1);
    assert_eq!(s.records, chosen.2);
    let workload_lines = lines(&out.join(WORKLOAD_FILE));
    assert_eq!(workload_lines.len(), 1);
    assert!(
        workload_lines[0].starts_with(&format!("[\"{}\"", chosen.0)),
        "{}",
        workload_lines[0]
    );
    assert_eq!(lines(&out.join(RECORD_FILE)).len(), chosen.2);
    // no workload: an empty database
    let none = tmp.path().join("none");
    let s = msdb::export(
        &cache,
        &none,
        &ExportOptions {
            toolchain: Toolchain::pinned(),
            target: None,
            workloads: Some(BTreeSet::new()),
        },
    )
    .unwrap();
    assert_eq!((s.workloads, s.records), (0, 0));
}

/// What a running MetaSchedule tuner commits (`tgc.ms.Database`) is read back by its
/// workload's hash, on its target only, best first, each trace once; an unreadable record
/// is an error naming the cache, and stores nothing.
fn committed_records_are_read_back_by_workload_and_target(b: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, mut cache) = temp_cache(tmp.path(), b);
    let workloads = lines(&fixture().join(WORKLOAD_FILE));
    let records: Vec<Value> = lines(&fixture().join(RECORD_FILE))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // the first workload with two valid records
    let (index, mine) = (0..workloads.len())
        .map(|i| {
            let valid: Vec<Value> = records
                .iter()
                .filter(|r| {
                    r[0] == i
                        && r[1][1]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|x| x.as_f64().unwrap() < 1e9)
                })
                .map(|r| r[1].clone())
                .collect();
            (i, valid)
        })
        .find(|(_, v)| v.len() >= 2)
        .expect("a workload with two records");
    let hash: u64 = serde_json::from_str::<Value>(&workloads[index]).unwrap()[0]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let tc = Toolchain::pinned();
    for body in &mine {
        let s = msdb::commit(
            &mut cache,
            &workloads[index],
            &body.to_string(),
            &tc,
            "metaschedule",
        )
        .unwrap();
        assert_eq!(s.inserted, 1);
    }
    // the same record again is no new record
    let again = msdb::commit(
        &mut cache,
        &workloads[index],
        &mine[0].to_string(),
        &tc,
        "metaschedule",
    )
    .unwrap();
    assert_eq!(again.inserted + again.replaced, 0);
    let target = Target::from_json(&mine[0][2]).unwrap();
    let got = msdb::top_k(&cache, hash, Some(&target), &tc, 64).unwrap();
    assert_eq!(got.len(), mine.len());
    let means: Vec<f64> = got
        .iter()
        .map(|t| {
            let v: Value = serde_json::from_str(t).unwrap();
            let xs: Vec<f64> = v[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            xs.iter().sum::<f64>() / xs.len() as f64
        })
        .collect();
    assert!(
        means.windows(2).all(|w| w[0] <= w[1]),
        "best first: {means:?}"
    );
    assert_eq!(
        msdb::top_k(&cache, hash, Some(&target), &tc, 1)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        msdb::top_k(&cache, hash, None, &tc, 64).unwrap().len(),
        mine.len()
    );
    let other = Target::from_json(
        &serde_json::json!({"kind": "llvm", "mcpu": "not-this-one", "num-cores": 3}),
    )
    .unwrap();
    assert!(msdb::top_k(&cache, hash, Some(&other), &tc, 64)
        .unwrap()
        .is_empty());
    assert!(msdb::top_k(&cache, hash ^ 1, None, &tc, 64)
        .unwrap()
        .is_empty());
    let e = msdb::commit(&mut cache, "[\"12\", \"%%%\"]", "[]", &tc, "metaschedule")
        .unwrap_err()
        .to_string();
    assert!(e.contains("base64") && !e.contains('\n'), "{e}");
    let e = msdb::commit(
        &mut cache,
        &workloads[index],
        "[[], [1e10], {\"kind\": \"llvm\"}, null]",
        &tc,
        "metaschedule",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("tuning record"), "{e}");
    assert_eq!(cache.stats().unwrap().records, mine.len() as u64);
}

support::on_both_backends!(
    committed_records_are_read_back_by_workload_and_target,
    imports_the_fixture_databases,
    imported_workloads_link_to_tgc_tasks_by_tvm_hash,
    damaged_lines_are_counted_and_skipped_with_their_place,
    a_directory_without_the_database_files_is_a_clear_error,
    export_then_import_preserves_every_valid_record,
    export_selects_toolchain_and_target_and_reports_tasks_without_workload,
    an_export_for_some_workloads_writes_only_their_records,
);
