//! Reads that the store, retrieval, verification and MetaSchedule export share: the best-k
//! setting, the rows a toolchain or target resolves to, and the decoding of stored columns.
//! Everything here reads through any connection or transaction and writes nothing, so the
//! modules above depend on this one and never on each other for it.

use crate::db::{args, Db, DbResult, Row};
use crate::error::{CacheError, Result, SqliteContext};
use crate::model::{NewRecord, Provenance, Target, Toolchain, Trace, TraceDigest};
use std::path::Path;

/// The number of records kept per (task, target, toolchain), from the settings table.
pub(crate) fn read_best_k(conn: &Db, path: &Path) -> Result<usize> {
    let v: Option<String> = conn
        .opt(
            "SELECT value FROM settings WHERE name = 'best_k'",
            &[],
            |r| r.get(0),
        )
        .at(path)?;
    v.as_deref()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&k| k > 0)
        .ok_or_else(|| CacheError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("settings.best_k is {v:?}"),
        })
}

/// The id of `t`'s toolchain row, if the cache knows it.
pub(crate) fn toolchain_id(conn: &Db, path: &Path, t: &Toolchain) -> Result<Option<i64>> {
    conn.opt(
        "SELECT id FROM toolchains WHERE tvm_version = ?1 AND tvm_ffi_version = ?2 AND llvm_version = ?3",
        args![t.tvm, t.tvm_ffi, t.llvm],
        |r| r.get(0),
    )
    .at(path)
}

/// The canonical target that the spelling `t` was registered for under `toolchain_id`.
pub(crate) fn spelled_target(
    conn: &Db,
    path: &Path,
    t: &Target,
    toolchain_id: i64,
) -> Result<Option<i64>> {
    conn.opt(
        "SELECT target_id FROM target_spellings WHERE spelling = ?1 AND toolchain_id = ?2",
        args![t.canonical_json(), toolchain_id],
        |r| r.get(0),
    )
    .at(path)
}

/// The target row that lookups of `t` under the toolchain `toolchain_id` read: the canonical
/// target the spelling was registered for under that toolchain, else the row of `t` itself;
/// with no toolchain (one the cache does not know, or a lookup across toolchains), a
/// registration under any toolchain counts.
pub(crate) fn resolve_target(
    conn: &Db,
    path: &Path,
    t: &Target,
    toolchain_id: Option<i64>,
) -> Result<Option<i64>> {
    if let Some(tc) = toolchain_id {
        if let Some(id) = spelled_target(conn, path, t, tc)? {
            return Ok(Some(id));
        }
    }
    let own: Option<i64> = conn
        .opt(
            "SELECT id FROM targets WHERE canonical_json = ?1",
            args![t.canonical_json()],
            |r| r.get(0),
        )
        .at(path)?;
    if own.is_some() || toolchain_id.is_some() {
        return Ok(own);
    }
    conn.opt(
        "SELECT target_id FROM target_spellings WHERE spelling = ?1 ORDER BY toolchain_id LIMIT 1",
        args![t.canonical_json()],
        |r| r.get(0),
    )
    .at(path)
}

/// A toolchain stored as three columns (TVM, tvm-ffi and LLVM versions) from `first` on.
pub(crate) fn toolchain_columns(r: &Row, first: usize) -> DbResult<Toolchain> {
    Ok(Toolchain::new(
        r.get::<String>(first)?,
        r.get::<String>(first + 1)?,
        r.get::<String>(first + 2)?,
    ))
}

/// A stored trace digest; `None` when the blob is not 32 bytes (a damaged file).
pub(crate) fn trace_digest(blob: &[u8]) -> Option<TraceDigest> {
    <[u8; 32]>::try_from(blob).ok().map(TraceDigest)
}

/// The columns of a whole stored record (`records r JOIN traces tr`), in the order
/// [`RecordRow::read`] decodes them.
macro_rules! record_columns {
    () => {
        "r.task_id, r.target_id, r.toolchain_id, tr.digest, tr.trace_json, r.latencies_json,
         r.args_info_json, r.model, r.task_name, r.trials, r.source, r.created_at"
    };
}
pub(crate) use record_columns;

/// A whole stored record, read to be stored again (under another target, or in another
/// cache).
pub(crate) struct RecordRow {
    pub task_id: i64,
    pub target_id: i64,
    pub toolchain_id: i64,
    digest: Vec<u8>,
    trace_json: String,
    latencies_json: String,
    args_info_json: Option<String>,
    provenance: Provenance,
}

impl RecordRow {
    /// Decodes the columns of [`record_columns!`].
    pub(crate) fn read(r: &Row) -> DbResult<RecordRow> {
        Ok(RecordRow {
            task_id: r.get(0)?,
            target_id: r.get(1)?,
            toolchain_id: r.get(2)?,
            digest: r.get(3)?,
            trace_json: r.get(4)?,
            latencies_json: r.get(5)?,
            args_info_json: r.get(6)?,
            provenance: Provenance {
                model: r.get(7)?,
                task_name: r.get(8)?,
                trials: r.get::<Option<i64>>(9)?.and_then(|t| u32::try_from(t).ok()),
                source: r.get(10)?,
                created_at: Some(r.get(11)?),
            },
        })
    }

    /// The record as the writer takes it; a damaged row (a digest that is not the trace's,
    /// latencies or args that do not parse) is [`CacheError::Corrupt`] of the cache at `path`.
    pub(crate) fn into_new_record(self, path: &Path) -> Result<NewRecord> {
        let task = self.task_id;
        let bad = |what: &str| CacheError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("a record of task {task} has {what}"),
        };
        let digest =
            trace_digest(&self.digest).ok_or_else(|| bad("a trace digest that is not 32 bytes"))?;
        // The writer dedupes by digest: never carry one that does not match.
        if TraceDigest::of(&self.trace_json) != digest {
            return Err(bad("a trace whose digest does not match its JSON"));
        }
        let latencies: Vec<f64> = serde_json::from_str(&self.latencies_json)
            .map_err(|_| bad("latencies that are not a JSON list of numbers"))?;
        let args_info = match &self.args_info_json {
            Some(text) => {
                Some(serde_json::from_str(text).map_err(|_| bad("args_info that is not JSON"))?)
            }
            None => None,
        };
        Ok(NewRecord {
            trace: Trace::from_stored(self.trace_json, digest),
            latencies,
            args_info,
            provenance: self.provenance,
        })
    }
}
