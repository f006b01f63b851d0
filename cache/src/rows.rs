//! Reads that the store, retrieval, verification and MetaSchedule export share: the best-k
//! setting, the rows a toolchain or target resolves to, and the decoding of stored columns.
//! Everything here reads through any connection or transaction and writes nothing, so the
//! modules above depend on this one and never on each other for it.

use crate::db::{args, Db, DbResult, Row};
use crate::error::{CacheError, Result, SqliteContext};
use crate::model::{Target, Toolchain, TraceDigest};
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
