//! `verify`: SQLite's own integrity and foreign-key checks (a server enforces both itself)
//! plus the cache's invariants.
//!
//! Invariants beyond what the schema's constraints enforce on write:
//! - at most `best_k` records per (task, target, toolchain);
//! - each record's latency samples parse, are valid times, number `num_samples` and average
//!   to `mean_latency`;
//! - each trace's digest is the blake3 of its canonical JSON, which is `[instructions,
//!   decisions]`;
//! - each task's keys are keys of the current encoding (or, for tasks written before the
//!   last key change, of an older one: counted, not a problem) and its features parse; TVM
//!   hashes are u64;
//! - each target's JSON is canonical and names its kind, and so is each target spelling's,
//!   with the kind of the target it stands for.

use crate::db::{args, DbError, DbResult};
use crate::error::{CacheError, Result};
use crate::model::{canonical_json, features_from_json, Trace, TraceDigest, MS_INVALID_SECS};
use crate::rows::read_best_k;
use crate::schema::{self, SCHEMA_VERSION};
use crate::store::Cache;
use rusqlite::ErrorCode;
use serde_json::Value;
use tgc_canonicalize::TaskKey;

/// What `verify` found. An empty `problems` means the cache is sound.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    pub problems: Vec<String>,
    pub tasks: u64,
    pub traces: u64,
    pub records: u64,
    /// Rows no record uses (harmless; `gc` removes them).
    pub unreferenced: u64,
    /// Tasks keyed by an older key encoding: tgc's keys no longer reach them, their TVM
    /// workload hash does (harmless).
    pub older_keys: u64,
}

impl VerifyReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// One check: reports problems, counts rows; an SQLite error means it could not finish.
type Check = fn(&Cache, &mut Problems, &mut VerifyReport) -> DbResult<()>;

/// Problems reported per check, at most; the rest are counted.
const MAX_PROBLEMS_PER_CHECK: usize = 20;

struct Problems<'a> {
    out: &'a mut Vec<String>,
    check: &'static str,
    n: usize,
}

impl Problems<'_> {
    fn push(&mut self, msg: String) {
        self.n += 1;
        if self.n <= MAX_PROBLEMS_PER_CHECK {
            self.out.push(format!("{}: {msg}", self.check));
        }
    }
}

impl Drop for Problems<'_> {
    fn drop(&mut self) {
        if self.n > MAX_PROBLEMS_PER_CHECK {
            self.out.push(format!(
                "{}: ... and {} more",
                self.check,
                self.n - MAX_PROBLEMS_PER_CHECK
            ));
        }
    }
}

impl Cache {
    /// Checks the whole file. Damage found while checking becomes a problem in the report;
    /// only a file that cannot be read at all is an error.
    pub fn verify(&self) -> Result<VerifyReport> {
        let mut report = VerifyReport::default();
        let mut problems = Vec::new();
        let tx = self.conn.begin_read().map_err(|e| e.at(&self.path))?;
        let checks: [(&'static str, Check); 7] = [
            ("integrity", check_integrity),
            ("foreign keys", check_foreign_keys),
            ("schema", check_schema),
            ("best k", check_best_k),
            ("records", check_records),
            ("traces", check_traces),
            ("tasks and targets", check_tasks_and_targets),
        ];
        for (name, check) in checks {
            let mut p = Problems {
                out: &mut problems,
                check: name,
                n: 0,
            };
            if let Err(e) = check(self, &mut p, &mut report) {
                match &e {
                    DbError::Lite(le)
                        if le.sqlite_error_code() == Some(ErrorCode::NotADatabase) =>
                    {
                        return Err(CacheError::NotADatabase {
                            path: self.path.clone(),
                        })
                    }
                    DbError::Pg(pe) if pe.is_closed() => return Err(e.at(&self.path)),
                    _ => p.push(format!("cannot read: {e}")),
                }
            }
        }
        drop(tx);
        report.problems = problems;
        Ok(report)
    }
}

fn check_integrity(c: &Cache, p: &mut Problems, _: &mut VerifyReport) -> DbResult<()> {
    let Some(conn) = c.conn.lite() else {
        return Ok(());
    };
    let mut stmt = conn.prepare("PRAGMA integrity_check")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    for row in rows {
        let line = row?;
        if line != "ok" {
            p.push(line);
        }
    }
    Ok(())
}

fn check_foreign_keys(c: &Cache, p: &mut Problems, _: &mut VerifyReport) -> DbResult<()> {
    let Some(conn) = c.conn.lite() else {
        return Ok(());
    };
    let mut stmt = conn.prepare("PRAGMA foreign_key_check")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<i64>>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    for row in rows {
        let (table, rowid, parent) = row?;
        p.push(format!(
            "{table} row {} refers to a missing {parent} row",
            rowid.unwrap_or(-1)
        ));
    }
    Ok(())
}

fn check_schema(c: &Cache, p: &mut Problems, _: &mut VerifyReport) -> DbResult<()> {
    match schema::version(&c.conn) {
        Ok(v) if v == SCHEMA_VERSION => {}
        Ok(v) => p.push(format!("schema version {v}, expected {SCHEMA_VERSION}")),
        Err(e) => p.push(e.at(&c.path).to_string()),
    }
    if let Err(e) = read_best_k(&c.conn, &c.path) {
        p.push(e.to_string());
    }
    Ok(())
}

fn check_best_k(c: &Cache, p: &mut Problems, _: &mut VerifyReport) -> DbResult<()> {
    let Ok(k) = read_best_k(&c.conn, &c.path) else {
        return Ok(());
    };
    let rows = c.conn.rows(
        "SELECT task_id, target_id, toolchain_id, count(*) FROM records
         GROUP BY task_id, target_id, toolchain_id HAVING count(*) > ?1",
        args![k as i64],
        |r| {
            Ok((
                r.get::<i64>(0)?,
                r.get::<i64>(1)?,
                r.get::<i64>(2)?,
                r.get::<i64>(3)?,
            ))
        },
    )?;
    for (task, target, toolchain, n) in rows {
        p.push(format!("task {task} target {target} toolchain {toolchain} has {n} records, more than best k = {k}"));
    }
    Ok(())
}

fn check_records(c: &Cache, p: &mut Problems, report: &mut VerifyReport) -> DbResult<()> {
    type Rec = (i64, String, f64, i64, Option<String>);
    let rows: Vec<Rec> = c.conn.rows(
        "SELECT id, latencies_json, mean_latency, num_samples, args_info_json FROM records",
        &[],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )?;
    for (id, lat, mean, n, args) in rows {
        report.records += 1;
        let samples: Option<Vec<f64>> = serde_json::from_str::<Value>(&lat)
            .ok()
            .and_then(|v| {
                v.as_array()
                    .map(|a| a.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>())
            })
            .flatten();
        let Some(samples) = samples else {
            p.push(format!("record {id}: latencies are not a list of numbers"));
            continue;
        };
        if samples.len() as i64 != n || samples.is_empty() {
            p.push(format!(
                "record {id}: {} samples but num_samples = {n}",
                samples.len()
            ));
            continue;
        }
        if samples
            .iter()
            .any(|&x| !(x.is_finite() && x > 0.0 && x < MS_INVALID_SECS))
        {
            p.push(format!("record {id}: a latency sample is not a valid time"));
            continue;
        }
        let actual = samples.iter().sum::<f64>() / samples.len() as f64;
        if (actual - mean).abs() > 1e-9 * actual.max(mean) {
            p.push(format!(
                "record {id}: mean_latency {mean} but the samples average {actual}"
            ));
        }
        if let Some(args) = args {
            if serde_json::from_str::<Value>(&args).is_err() {
                p.push(format!("record {id}: args_info is not JSON"));
            }
        }
    }
    Ok(())
}

fn check_traces(c: &Cache, p: &mut Problems, report: &mut VerifyReport) -> DbResult<()> {
    let rows: Vec<(i64, Vec<u8>, String)> =
        c.conn
            .rows("SELECT id, digest, trace_json FROM traces", &[], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
    for (id, digest, json) in rows {
        report.traces += 1;
        if digest != TraceDigest::of(&json).0 {
            p.push(format!("trace {id}: digest does not match its JSON"));
        }
        match Trace::parse(&json) {
            Ok(t) if t.json() == json => {}
            Ok(_) => p.push(format!("trace {id}: JSON is not canonical")),
            Err(e) => p.push(format!("trace {id}: {e}")),
        }
    }
    report.unreferenced += c.conn.one(
        "SELECT count(*) FROM traces WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.trace_id = traces.id)",
        &[],
        |r| r.get::<i64>(0),
    )? as u64;
    Ok(())
}

fn check_tasks_and_targets(c: &Cache, p: &mut Problems, report: &mut VerifyReport) -> DbResult<()> {
    type Task = (i64, [Option<String>; 3], Option<String>, Option<String>);
    let rows: Vec<Task> = c.conn.rows(
        "SELECT id, exact_key, structural_key, family_key, features_json, tvm_hash FROM tasks",
        &[],
        |r| {
            Ok((
                r.get(0)?,
                [r.get(1)?, r.get(2)?, r.get(3)?],
                r.get(4)?,
                r.get(5)?,
            ))
        },
    )?;
    for (id, keys, features, hash) in rows {
        report.tasks += 1;
        let mut older = false;
        for k in keys.into_iter().flatten() {
            {
                if TaskKey::is_older_encoding(&k) {
                    older = true;
                } else if k.parse::<TaskKey>().is_err() {
                    p.push(format!("task {id}: bad key '{k}'"));
                }
            }
        }
        report.older_keys += u64::from(older);
        if let Some(f) = features {
            if features_from_json(&f).is_none() {
                p.push(format!("task {id}: features do not parse"));
            }
        }
        if let Some(h) = hash {
            if h.parse::<u64>().is_err() {
                p.push(format!("task {id}: TVM hash '{h}' is not a u64"));
            }
        }
    }
    let rows: Vec<(i64, String, String)> =
        c.conn
            .rows("SELECT id, kind, canonical_json FROM targets", &[], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
    for (id, kind, json) in rows {
        match serde_json::from_str::<Value>(&json) {
            Ok(v)
                if canonical_json(&v) == json
                    && v.get("kind").and_then(Value::as_str) == Some(kind.as_str()) => {}
            _ => p.push(format!(
                "target {id}: JSON is not the canonical config of a '{kind}' target"
            )),
        }
    }
    let rows: Vec<(String, i64, String)> = c.conn.rows(
        "SELECT s.spelling, s.toolchain_id, t.kind FROM target_spellings s JOIN targets t ON t.id = s.target_id",
        &[],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    for (json, toolchain, kind) in rows {
        match serde_json::from_str::<Value>(&json) {
            Ok(v)
                if canonical_json(&v) == json
                    && v.get("kind").and_then(Value::as_str) == Some(kind.as_str()) => {}
            _ => p.push(format!(
                "target spelling {json} (toolchain {toolchain}): not the canonical JSON of a '{kind}' target"
            )),
        }
    }
    report.unreferenced += c.conn.one(
        "SELECT (SELECT count(*) FROM tasks WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.task_id = tasks.id))
              + (SELECT count(*) FROM targets WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.target_id = targets.id))
              + (SELECT count(*) FROM toolchains WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.toolchain_id = toolchains.id))",
        &[],
        |r| r.get::<i64>(0),
    )? as u64;
    Ok(())
}
