//! Import and export of MetaSchedule JSON databases (TVM 0.27 `JSONDatabase`).
//!
//! A database is a directory with two JSON-lines files:
//! - `database_workload.json`: one workload per line, `["<u64 structural hash>", "<base64>"]`
//!   where the base64 payload is an 8-byte little-endian length followed by TVM's JSON graph
//!   of the workload module (older TVMs wrote the JSON without the length; both are read).
//! - `database_tuning_record.json`: one record per line,
//!   `[workload_index, [trace, run_secs, target_config, args_info]]`, the index counting
//!   workload lines from 0.
//!
//! # Keying imported workloads
//!
//! A TVM workload cannot be turned back into tgc IR, so it has no tgc keys. An imported
//! workload is stored as a task row keyed by its TVM structural hash (the first field of its
//! line), with its workload JSON; at most one such row per hash. A tgc task that the bridge
//! lowered records the TVM hash of its workload, so the two meet through the hash: retrieval
//! returns imported records in its `TvmHash` tier when the caller passes the task's hash, and
//! `stats` counts imported workloads linked to a tgc task that way. Records are imported under
//! the toolchain the caller names (a MetaSchedule database does not record its TVM version).
//!
//! # Damaged input
//!
//! A line that cannot be read (torn, bad JSON, bad base64, bad hash, unknown workload index,
//! no valid run time, no target, malformed trace) is skipped and counted with its file and
//! line number in the [`ImportSummary`]; nothing is dropped silently. The whole import is one
//! transaction: a killed import leaves the cache as it was.
//!
//! # Export
//!
//! Export writes a database that stock TVM opens with `JSONDatabase(path_workload=...,
//! path_tuning_record=...)`: the records of one toolchain (and optionally one target) whose
//! task has a TVM workload, each workload once per hash. Files are written beside the
//! destination and renamed into place.

use crate::db::{args, Db};
use crate::error::{CacheError, Result, SqliteContext};
use crate::model::{NewRecord, Provenance, Target, Toolchain, Trace, Workload, MS_INVALID_SECS};
use crate::rows;
use crate::store::{Cache, Group, PutSummary, Writer};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

pub const WORKLOAD_FILE: &str = "database_workload.json";
pub const RECORD_FILE: &str = "database_tuning_record.json";

/// Why a line was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    /// Not JSON (a torn line, binary garbage).
    BadJson,
    /// JSON, but not the shape of a workload or record line.
    BadShape,
    /// The workload hash is not a u64.
    BadHash,
    /// The workload payload is not base64.
    BadBase64,
    /// The decoded workload is not (length-prefixed) JSON.
    BadWorkload,
    /// A record's workload index is out of range or names a skipped workload line.
    UnknownWorkload,
    /// A record's trace is not `[instructions, decisions]`.
    BadTrace,
    /// A record without run times, or whose run times are all failures (1e10).
    NoValidRunSecs,
    /// A record without a target, or with a target that is not a config object.
    BadTarget,
}

impl SkipReason {
    fn describe(self) -> &'static str {
        match self {
            SkipReason::BadJson => "bad JSON",
            SkipReason::BadShape => "unexpected shape",
            SkipReason::BadHash => "bad workload hash",
            SkipReason::BadBase64 => "bad base64",
            SkipReason::BadWorkload => "bad workload payload",
            SkipReason::UnknownWorkload => "unknown workload index",
            SkipReason::BadTrace => "bad trace",
            SkipReason::NoValidRunSecs => "no valid run_secs",
            SkipReason::BadTarget => "bad target",
        }
    }
}

/// One skipped line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedLine {
    pub file: &'static str,
    /// 1-based.
    pub line: usize,
    pub reason: SkipReason,
}

/// What an import did.
#[derive(Clone, Debug, Default)]
pub struct ImportSummary {
    pub dir: PathBuf,
    /// Workload lines read.
    pub workload_lines: usize,
    /// Distinct workloads with at least one usable record.
    pub workloads: usize,
    /// Record lines read and usable.
    pub record_lines: usize,
    /// What storing the usable records did (new, duplicates, outside best k; an import
    /// replaces nothing).
    pub stored: PutSummary,
    pub skipped: Vec<SkippedLine>,
}

impl ImportSummary {
    /// Records that changed the cache: new ones (an import replaces no stored record).
    pub fn imported(&self) -> usize {
        self.stored.inserted
    }
}

/// The one-line summary: `imported N records for M workloads; skipped K lines: ...`.
impl fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: imported {} records for {} workloads",
            self.dir.display(),
            self.imported(),
            self.workloads
        )?;
        let mut notes = Vec::new();
        if self.stored.duplicates > 0 {
            notes.push(format!("{} already cached", self.stored.duplicates));
        }
        if self.stored.pruned > 0 {
            notes.push(format!("{} outside the best k", self.stored.pruned));
        }
        if !notes.is_empty() {
            write!(f, " ({})", notes.join(", "))?;
        }
        write!(f, "; skipped {} lines", self.skipped.len())?;
        if !self.skipped.is_empty() {
            let mut by_reason: BTreeMap<SkipReason, Vec<String>> = BTreeMap::new();
            for s in &self.skipped {
                by_reason
                    .entry(s.reason)
                    .or_default()
                    .push(format!("{}:{}", s.file, s.line));
            }
            let parts: Vec<String> = by_reason
                .into_iter()
                .map(|(reason, places)| {
                    let shown = places
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ");
                    let more = if places.len() > 3 {
                        format!(", +{} more", places.len() - 3)
                    } else {
                        String::new()
                    };
                    format!("{} {} ({shown}{more})", places.len(), reason.describe())
                })
                .collect();
            write!(f, ": {}", parts.join("; "))?;
        }
        Ok(())
    }
}

/// Decodes the base64 payload of a workload line into TVM's JSON graph text.
pub fn decode_workload_payload(b64: &str) -> std::result::Result<String, SkipReason> {
    let bytes = B64.decode(b64.trim()).map_err(|_| SkipReason::BadBase64)?;
    let json = if bytes.first() == Some(&b'{') {
        &bytes[..]
    } else {
        let (len, rest) = bytes.split_at_checked(8).ok_or(SkipReason::BadWorkload)?;
        let len = u64::from_le_bytes(len.try_into().map_err(|_| SkipReason::BadWorkload)?);
        if len != rest.len() as u64 {
            return Err(SkipReason::BadWorkload);
        }
        rest
    };
    let text = std::str::from_utf8(json).map_err(|_| SkipReason::BadWorkload)?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => Ok(text.to_string()),
        _ => Err(SkipReason::BadWorkload),
    }
}

/// Encodes TVM's JSON graph text as a workload payload (TVM 0.27 form).
pub fn encode_workload_payload(json: &str) -> String {
    let mut bytes = Vec::with_capacity(json.len() + 8);
    bytes.extend_from_slice(&(json.len() as u64).to_le_bytes());
    bytes.extend_from_slice(json.as_bytes());
    B64.encode(bytes)
}

fn parse_workload_line(line: &[u8]) -> std::result::Result<Workload, SkipReason> {
    let v: Value = serde_json::from_slice(line).map_err(|_| SkipReason::BadJson)?;
    let [hash, payload] = v.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err(SkipReason::BadShape);
    };
    let (Some(hash), Some(payload)) = (hash.as_str(), payload.as_str()) else {
        return Err(SkipReason::BadShape);
    };
    let tvm_hash = hash
        .trim()
        .parse::<u64>()
        .map_err(|_| SkipReason::BadHash)?;
    Ok(Workload {
        tvm_hash,
        json: decode_workload_payload(payload)?,
    })
}

struct RecordLine {
    workload_index: usize,
    trace: Trace,
    run_secs: Vec<f64>,
    target: Target,
    args_info: Option<Value>,
}

fn parse_record_line(line: &[u8]) -> std::result::Result<RecordLine, SkipReason> {
    let v: Value = serde_json::from_slice(line).map_err(|_| SkipReason::BadJson)?;
    let [index, body] = v.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err(SkipReason::BadShape);
    };
    let workload_index = index.as_u64().ok_or(SkipReason::UnknownWorkload)? as usize;
    let [trace, run_secs, target, args_info] =
        body.as_array().map(Vec::as_slice).unwrap_or_default()
    else {
        return Err(SkipReason::BadShape);
    };
    let trace = Trace::from_json(trace).map_err(|_| SkipReason::BadTrace)?;
    let run_secs: Vec<f64> = match run_secs {
        Value::Array(xs) => xs
            .iter()
            .map(|x| x.as_f64().ok_or(SkipReason::BadShape))
            .collect::<std::result::Result<_, _>>()?,
        Value::Null => return Err(SkipReason::NoValidRunSecs),
        _ => return Err(SkipReason::BadShape),
    };
    // MetaSchedule writes 1e10 for a failed run; keep the valid samples.
    let run_secs: Vec<f64> = run_secs
        .into_iter()
        .filter(|&x| x.is_finite() && x > 0.0 && x < MS_INVALID_SECS)
        .collect();
    if run_secs.is_empty() {
        return Err(SkipReason::NoValidRunSecs);
    }
    let target = Target::from_json(target).map_err(|_| SkipReason::BadTarget)?;
    let args_info = if args_info.is_null() {
        None
    } else {
        Some(args_info.clone())
    };
    Ok(RecordLine {
        workload_index,
        trace,
        run_secs,
        target,
        args_info,
    })
}

/// Reads the lines of `path`, as bytes (a line need not be UTF-8 to be counted and skipped).
fn for_each_line(path: &Path, mut f: impl FnMut(usize, &[u8]) -> Result<()>) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|e| CacheError::io(path, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| CacheError::io(path, e))?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        let line = buf.trim_ascii();
        if !line.is_empty() {
            f(n, line)?;
        }
    }
}

fn require_file(dir: &Path, name: &str) -> Result<PathBuf> {
    let p = dir.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(CacheError::MsDatabase {
            path: dir.to_path_buf(),
            detail: format!("not a MetaSchedule database: {name} is missing"),
        })
    }
}

/// Imports the MetaSchedule database in `dir`, its records measured under `toolchain`.
pub fn import(cache: &mut Cache, dir: &Path, toolchain: &Toolchain) -> Result<ImportSummary> {
    let workload_path = require_file(dir, WORKLOAD_FILE)?;
    let record_path = require_file(dir, RECORD_FILE)?;
    let mut summary = ImportSummary {
        dir: dir.to_path_buf(),
        ..ImportSummary::default()
    };
    let source = format!("import:{}", dir.display());
    let path = cache.path.clone();
    let tx = cache.write_tx()?;
    {
        let mut w = Writer::new(&tx, &path)?;
        // A search's measurement of a trace the cache already holds (re-measured by tgc,
        // or imported before) does not replace it; importing again changes nothing.
        w.replace_known = false;
        let toolchain_id = w.toolchain(toolchain)?;
        // Workload line i -> its task row, None for a skipped line.
        let mut workloads: Vec<Option<i64>> = Vec::new();
        for_each_line(&workload_path, |n, line| {
            summary.workload_lines += 1;
            // A skipped (or blank) line still takes its index, as in TVM.
            workloads.resize(n - 1, None);
            match parse_workload_line(line) {
                Ok(wl) => workloads.push(Some(w.imported_workload(&wl)?)),
                Err(reason) => {
                    workloads.push(None);
                    summary.skipped.push(SkippedLine {
                        file: WORKLOAD_FILE,
                        line: n,
                        reason,
                    });
                }
            }
            Ok(())
        })?;
        let mut targets: HashMap<String, i64> = HashMap::new();
        let mut used: HashSet<i64> = HashSet::new();
        for_each_line(&record_path, |n, line| {
            let rec = match parse_record_line(line) {
                Ok(rec) => rec,
                Err(reason) => {
                    summary.skipped.push(SkippedLine {
                        file: RECORD_FILE,
                        line: n,
                        reason,
                    });
                    return Ok(());
                }
            };
            let Some(&Some(task_id)) = workloads.get(rec.workload_index) else {
                summary.skipped.push(SkippedLine {
                    file: RECORD_FILE,
                    line: n,
                    reason: SkipReason::UnknownWorkload,
                });
                return Ok(());
            };
            let target_id = match targets.get(rec.target.canonical_json()) {
                Some(&id) => id,
                None => {
                    let id = w.target_for(&rec.target, toolchain_id)?;
                    targets.insert(rec.target.canonical_json().to_string(), id);
                    id
                }
            };
            summary.record_lines += 1;
            used.insert(task_id);
            let group = Group {
                task_id,
                target_id,
                toolchain_id,
            };
            store_record(&mut w, group, rec, &source, &mut summary.stored)
        })?;
        summary.workloads = used.len();
    }
    tx.commit().at(&path)?;
    Ok(summary)
}

/// Stores one record a running MetaSchedule tuner commits (`tgc.ms.Database`): its
/// workload line `["<hash>", "<base64>"]` and its record `[trace, run_secs, target,
/// args_info]`, as TVM's `JSONDatabase` writes them, the way an import stores them (under
/// `source`, measured with `toolchain`). A record that cannot be read is an error naming
/// the problem; nothing is stored then.
pub fn commit(
    cache: &mut Cache,
    workload_line: &str,
    record: &str,
    toolchain: &Toolchain,
    source: &str,
) -> Result<PutSummary> {
    let bad = |what: &str, reason: SkipReason| CacheError::MsDatabase {
        path: cache.path.clone(),
        detail: format!("a committed {what}: {}", reason.describe()),
    };
    let wl = parse_workload_line(workload_line.as_bytes()).map_err(|r| bad("workload", r))?;
    let rec = parse_record_line(format!("[0,{record}]").as_bytes())
        .map_err(|r| bad("tuning record", r))?;
    let path = cache.path.clone();
    let mut stored = PutSummary::default();
    let tx = cache.write_tx()?;
    {
        let mut w = Writer::new(&tx, &path)?;
        w.replace_known = false;
        let toolchain_id = w.toolchain(toolchain)?;
        let group = Group {
            task_id: w.imported_workload(&wl)?,
            target_id: w.target_for(&rec.target, toolchain_id)?,
            toolchain_id,
        };
        store_record(&mut w, group, rec, source, &mut stored)?;
    }
    tx.commit().at(&path)?;
    Ok(stored)
}

/// A MetaSchedule record stored in `group` with provenance `source` (an import's or a
/// commit's).
fn store_record(
    w: &mut Writer,
    group: Group,
    rec: RecordLine,
    source: &str,
    stored: &mut PutSummary,
) -> Result<()> {
    let record = NewRecord {
        trace: rec.trace,
        latencies: rec.run_secs,
        args_info: rec.args_info,
        provenance: Provenance {
            source: source.to_string(),
            ..Provenance::default()
        },
    };
    w.record(group, &record, stored)
}

/// The records of TVM workload `tvm_hash` (the tgc tasks lowered to it and the imported
/// workload of that hash) measured with `toolchain`, on `target` when given, best (by mean)
/// first, each trace once, at most `k`: each as its record `[trace, run_secs, target,
/// args_info]`, as `JSONDatabase` writes it.
pub fn top_k(
    cache: &Cache,
    tvm_hash: u64,
    target: Option<&Target>,
    toolchain: &Toolchain,
    k: usize,
) -> Result<Vec<String>> {
    let path = &cache.path;
    let tx = cache.conn.begin_read().at(path)?;
    let Some(toolchain_id) = rows::toolchain_id(&tx, path, toolchain)? else {
        return Ok(Vec::new());
    };
    let target_id: Option<i64> = match target {
        Some(t) => match rows::resolve_target(&tx, path, t, Some(toolchain_id))? {
            Some(id) => Some(id),
            None => return Ok(Vec::new()),
        },
        None => None,
    };
    type Row = (Vec<u8>, String, String, String, Option<String>);
    let rows: Vec<Row> = tx
        .rows(
            "SELECT tr.digest, tr.trace_json, r.latencies_json, tg.canonical_json, r.args_info_json
             FROM records r JOIN tasks t ON t.id = r.task_id JOIN traces tr ON tr.id = r.trace_id
                  JOIN targets tg ON tg.id = r.target_id
             WHERE t.tvm_hash = ?1 AND r.toolchain_id = ?2 AND (CAST(?3 AS BIGINT) IS NULL OR r.target_id = ?3)
             ORDER BY r.mean_latency, r.id",
            args![tvm_hash.to_string(), toolchain_id, target_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .at(path)?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (digest, trace, run_secs, target, args) in rows {
        if out.len() == k {
            break;
        }
        if seen.insert(digest) {
            out.push(format!(
                "[{trace},{run_secs},{target},{}]",
                args.as_deref().unwrap_or("null")
            ));
        }
    }
    Ok(out)
}

/// Which records an export writes.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    pub toolchain: Toolchain,
    /// Only this target; all targets when `None`.
    pub target: Option<Target>,
    /// Only the records of these TVM workloads (structural hashes: one model's tasks, as
    /// `tgc cache export --model` lowers them); every workload when `None`.
    pub workloads: Option<std::collections::BTreeSet<u64>>,
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    pub dir: PathBuf,
    pub workloads: usize,
    pub records: usize,
    /// Records left out because their task has no TVM workload yet.
    pub without_workload: usize,
}

impl fmt::Display for ExportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: exported {} records for {} workloads",
            self.dir.display(),
            self.records,
            self.workloads
        )?;
        if self.without_workload > 0 {
            write!(
                f,
                "; left out {} records of tasks without a TVM workload",
                self.without_workload
            )?;
        }
        Ok(())
    }
}

/// Writes `body` to `dir/name` through a temporary file and a rename.
fn write_atomically(
    dir: &Path,
    name: &str,
    body: impl FnOnce(&mut BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    let dest = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let file = std::fs::File::create(&tmp).map_err(|e| CacheError::io(&tmp, e))?;
    let mut out = BufWriter::new(file);
    let written = body(&mut out)
        .and_then(|()| out.flush())
        .and_then(|()| out.get_ref().sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(CacheError::io(&tmp, e));
    }
    std::fs::rename(&tmp, &dest).map_err(|e| CacheError::io(&dest, e))
}

/// Which records an export writes: those measured under one toolchain, on one target or all.
#[derive(Clone, Copy)]
struct ExportScope {
    /// -1 when the cache does not know the toolchain (nothing matches).
    toolchain_id: i64,
    /// `None` for every target; -1 when the cache does not know the target.
    target_id: Option<i64>,
}

/// A workload to write: its TVM hash and the lowest task id that has it.
struct ExportedWorkload {
    tvm_hash: String,
    task_id: i64,
}

/// Exports records to a MetaSchedule database in `dir` (created if needed; its two files are
/// replaced).
pub fn export(cache: &Cache, dir: &Path, opts: &ExportOptions) -> Result<ExportSummary> {
    let path = &cache.path;
    std::fs::create_dir_all(dir).map_err(|e| CacheError::io(dir, e))?;
    let tx = cache.conn.begin_read().at(path)?;
    let toolchain_id = rows::toolchain_id(&tx, path, &opts.toolchain)?;
    let target_id: Option<i64> = match &opts.target {
        Some(t) => rows::resolve_target(&tx, path, t, toolchain_id)?.or(Some(-1)),
        None => None,
    };
    let scope = ExportScope {
        toolchain_id: toolchain_id.unwrap_or(-1),
        target_id,
    };
    let mut workloads = exported_workloads(&tx, path, scope)?;
    if let Some(only) = &opts.workloads {
        workloads.retain(|w| w.tvm_hash.parse().is_ok_and(|h: u64| only.contains(&h)));
    }
    write_workloads(&tx, path, dir, &workloads)?;
    let records = write_records(&tx, path, dir, scope, &workloads)?;
    let without_workload = tx
        .one(
            "SELECT count(*) FROM records r JOIN tasks t ON t.id = r.task_id
             WHERE t.workload_json IS NULL AND r.toolchain_id = ?1 AND (CAST(?2 AS BIGINT) IS NULL OR r.target_id = ?2)",
            args![scope.toolchain_id, scope.target_id],
            |r| r.get::<i64>(0),
        )
        .at(path)? as usize;
    Ok(ExportSummary {
        dir: dir.to_path_buf(),
        workloads: workloads.len(),
        records,
        without_workload,
    })
}

/// One workload per TVM hash, in hash order, from the lowest task id that has it.
fn exported_workloads(conn: &Db, path: &Path, scope: ExportScope) -> Result<Vec<ExportedWorkload>> {
    conn.rows(
        "SELECT t.tvm_hash, min(t.id) FROM tasks t
         WHERE t.workload_json IS NOT NULL AND EXISTS (SELECT 1 FROM records r WHERE r.task_id = t.id
           AND r.toolchain_id = ?1 AND (CAST(?2 AS BIGINT) IS NULL OR r.target_id = ?2))
         GROUP BY t.tvm_hash ORDER BY t.tvm_hash",
        args![scope.toolchain_id, scope.target_id],
        |r| {
            Ok(ExportedWorkload {
                tvm_hash: r.get(0)?,
                task_id: r.get(1)?,
            })
        },
    )
    .at(path)
}

/// Writes the workload file: line i is `workloads[i]`.
fn write_workloads(
    conn: &Db,
    path: &Path,
    dir: &Path,
    workloads: &[ExportedWorkload],
) -> Result<()> {
    let mut workload_err = None;
    write_atomically(dir, WORKLOAD_FILE, |out| {
        for w in workloads {
            let json = conn.one(
                "SELECT workload_json FROM tasks WHERE id = ?1",
                args![w.task_id],
                |r| r.get::<String>(0),
            );
            match json {
                Ok(json) => {
                    let line = serde_json::to_string(&[
                        w.tvm_hash.as_str(),
                        encode_workload_payload(&json).as_str(),
                    ])
                    .map_err(std::io::Error::other)?;
                    writeln!(out, "{line}")?;
                }
                Err(e) => {
                    workload_err = Some(e);
                    return Err(std::io::Error::other("reading a workload failed"));
                }
            }
        }
        Ok(())
    })
    .map_err(|e| {
        workload_err
            .take()
            .map_or(e, |se: crate::db::DbError| se.at(path))
    })
}

/// Writes the record file, each record under the index of its workload's line; returns
/// the number of records written.
fn write_records(
    conn: &Db,
    path: &Path,
    dir: &Path,
    scope: ExportScope,
    workloads: &[ExportedWorkload],
) -> Result<usize> {
    let index: HashMap<&str, usize> = workloads
        .iter()
        .enumerate()
        .map(|(i, w)| (w.tvm_hash.as_str(), i))
        .collect();
    let mut record_err = None;
    let mut records = 0;
    write_atomically(dir, RECORD_FILE, |out| {
        let mut run = || -> crate::db::DbResult<std::io::Result<()>> {
            type Line = (String, Vec<u8>, String, String, String, Option<String>);
            let rows: Vec<Line> = conn.rows(
                "SELECT t.tvm_hash, tr.digest, tr.trace_json, r.latencies_json, tg.canonical_json, r.args_info_json
                 FROM records r JOIN tasks t ON t.id = r.task_id JOIN traces tr ON tr.id = r.trace_id
                      JOIN targets tg ON tg.id = r.target_id
                 WHERE t.workload_json IS NOT NULL AND r.toolchain_id = ?1 AND (CAST(?2 AS BIGINT) IS NULL OR r.target_id = ?2)
                 ORDER BY t.tvm_hash, r.mean_latency, r.id",
                args![scope.toolchain_id, scope.target_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )?;
            let mut seen: HashSet<(usize, String, Vec<u8>)> = HashSet::new();
            for (hash, digest, trace, run_secs, target, args) in rows {
                let Some(&wi) = index.get(hash.as_str()) else { continue };
                // Two tasks with one workload may share a trace: write it once per target.
                if !seen.insert((wi, target.clone(), digest)) {
                    continue;
                }
                let line = format!("[{wi},[{trace},{run_secs},{target},{}]]", args.as_deref().unwrap_or("null"));
                if let Err(e) = writeln!(out, "{line}") {
                    return Ok(Err(e));
                }
                records += 1;
            }
            Ok(Ok(()))
        };
        match run() {
            Ok(io) => io,
            Err(e) => {
                record_err = Some(e);
                Err(std::io::Error::other("reading records failed"))
            }
        }
    })
    .map_err(|e| record_err.take().map_or(e, |se: crate::db::DbError| se.at(path)))?;
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_payload_round_trips_with_its_length_prefix() {
        let json = "{\n  \"root_index\": 1,\n  \"nodes\": []\n}";
        let b64 = encode_workload_payload(json);
        assert_eq!(decode_workload_payload(&b64).unwrap(), json);
        // The pre-0.20 form without a length prefix is read too.
        assert_eq!(decode_workload_payload(&B64.encode(json)).unwrap(), json);
        assert_eq!(decode_workload_payload("%%%"), Err(SkipReason::BadBase64));
        // A wrong length is a damaged payload.
        let mut bytes = B64.decode(&b64).unwrap();
        bytes[0] ^= 1;
        assert_eq!(
            decode_workload_payload(&B64.encode(bytes)),
            Err(SkipReason::BadWorkload)
        );
    }

    #[test]
    fn run_times_parse_exactly() {
        // serde_json's default float parser can be one ulp off; exports must write back the
        // very times TVM measured.
        let line = br#"[0,[[[],[]],[4.7373875328084004e-05],{"kind":"llvm"},null]]"#;
        assert_eq!(
            parse_record_line(line).unwrap().run_secs,
            vec![4.7373875328084004e-05]
        );
    }

    #[test]
    fn record_lines_are_classified() {
        let good = br#"[0,[[[],[]],[1e-5,2e-5],{"kind":"llvm"},null]]"#;
        assert!(parse_record_line(good).is_ok());
        let cases: [(&[u8], SkipReason); 7] = [
            (br#"[0,[[[],[]],[1e-5"#, SkipReason::BadJson),
            (br#"{"a":1}"#, SkipReason::BadShape),
            (
                br#"[-1,[[[],[]],[1e-5],{"kind":"llvm"},null]]"#,
                SkipReason::UnknownWorkload,
            ),
            (
                br#"[0,[{"x":1},[1e-5],{"kind":"llvm"},null]]"#,
                SkipReason::BadTrace,
            ),
            (
                br#"[0,[[[],[]],[1e10,1e10],{"kind":"llvm"},null]]"#,
                SkipReason::NoValidRunSecs,
            ),
            (
                br#"[0,[[[],[]],null,{"kind":"llvm"},null]]"#,
                SkipReason::NoValidRunSecs,
            ),
            (br#"[0,[[[],[]],[1e-5],null,null]]"#, SkipReason::BadTarget),
        ];
        for (line, reason) in cases {
            assert_eq!(
                parse_record_line(line).err(),
                Some(reason),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // Failed samples are dropped, valid ones kept.
        assert_eq!(
            parse_record_line(br#"[0,[[[],[]],[1e10,3e-5],{"kind":"llvm"},null]]"#)
                .unwrap()
                .run_secs,
            vec![3e-5]
        );
    }
}
