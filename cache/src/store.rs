//! The persistent store: opening a cache (a file, or a PostgreSQL server shared by many
//! tuning machines), writing records, best-k pruning, statistics and garbage collection.
//!
//! A server cache gives the same guarantees through the same statements (see the `db` module):
//! one writer at a time (a transaction-scoped advisory lock), readers on consistent
//! snapshots, and a killed process leaves no partial transaction.
//!
//! Concurrency and crash safety come from SQLite: the file is in WAL mode, so readers never
//! block the one writer; every write is one `BEGIN IMMEDIATE` transaction (the write lock is
//! taken up front, so a writer never fails half-way on a lock upgrade) and waits for the
//! lock up to the busy timeout. A process killed at any instant leaves either the whole
//! transaction or none of it. `synchronous=NORMAL` keeps commits durable against process
//! crashes; a power loss may forget the last commits but never corrupts the file.

use crate::config::CacheConfig;
use crate::db::{args, Db};
use crate::error::{CacheError, Result, SqliteContext};
use crate::model::{
    canonical_json, features_to_json, record_latency, NewRecord, Target, TaskEntry, Toolchain,
    Workload,
};
use crate::rows::{read_best_k, record_columns, spelled_target, toolchain_columns, RecordRow};
use crate::schema;
use crate::server::{is_server_url, PgConn, ServerUrl};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Default number of records kept per (task, target, toolchain).
pub const DEFAULT_BEST_K: usize = 32;

/// One opened cache shared by everything a run does with it (annotate-cache's lookups, the
/// driver's seeds and write-back): one connection for the whole run, opened once with the
/// run's settings (read-only included).
#[derive(Clone)]
pub struct SharedCache(std::sync::Arc<std::sync::Mutex<Cache>>);

impl SharedCache {
    pub fn new(cache: Cache) -> SharedCache {
        SharedCache(std::sync::Arc::new(std::sync::Mutex::new(cache)))
    }

    /// The cache, for one use (a panic while it was held leaves it usable: every write is
    /// one transaction).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedCache({})", self.lock().path().display())
    }
}

/// The same handle, not an equal cache.
impl PartialEq for SharedCache {
    fn eq(&self, other: &SharedCache) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Bytes of the cache file mapped into memory for reads.
const MMAP_BYTES: i64 = 1 << 30;
/// SQLite page cache per connection, in KiB.
const PAGE_CACHE_KIB: i64 = 32 * 1024;

/// An open task cache.
pub struct Cache {
    pub(crate) conn: Db,
    /// The file, or the server's URL without its password.
    pub(crate) path: PathBuf,
    pub(crate) config: CacheConfig,
}

/// What one [`Cache::put`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutSummary {
    /// New records stored.
    pub inserted: usize,
    /// Traces already stored for this task, target and toolchain whose record was replaced
    /// by a newer measurement (or one as new and faster).
    pub replaced: usize,
    /// Traces already stored with the same, an older or (as new) a faster measurement, and
    /// imported traces already stored (nothing changed).
    pub duplicates: usize,
    /// Records not kept because they are not among the best k (new ones, or old ones pushed out).
    pub pruned: usize,
}

/// Counts of a cache's contents.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub path: PathBuf,
    pub schema_version: i64,
    pub best_k: usize,
    /// Tasks with tgc keys.
    pub tasks: u64,
    /// Workloads imported from MetaSchedule databases (no tgc keys).
    pub imported_workloads: u64,
    /// Imported workloads whose TVM hash matches a tgc task's.
    pub linked_workloads: u64,
    pub traces: u64,
    pub records: u64,
    /// Per target: (kind, canonical JSON, records).
    pub targets: Vec<(String, String, u64)>,
    /// Per toolchain: records.
    pub toolchains: Vec<(Toolchain, u64)>,
    /// Bytes of the database file plus its WAL (of the whole database on a server).
    pub file_bytes: u64,
}

/// What [`Cache::gc`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcSummary {
    pub records: usize,
    pub traces: usize,
    pub tasks: usize,
    pub targets: usize,
    pub toolchains: usize,
    /// Bytes of file before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

pub(crate) fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn file_bytes(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    size(path) + size(Path::new(&wal))
}

impl Cache {
    /// Opens the cache at `path`, creating it (and its directory) if needed, and migrates it
    /// to the current schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Cache> {
        Cache::open_with(path, CacheConfig::default(), true)
    }

    /// Opens an existing cache; a missing file is an error instead of a new, empty cache.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Cache> {
        Cache::open_with(path, CacheConfig::default(), false)
    }

    /// Opens with explicit configuration; `create` says whether a missing file is created
    /// (on a server: whether a database without tgc's schema gets it). A location
    /// `postgres://...` is a server (see [`crate::server`]).
    pub fn open_with(path: impl AsRef<Path>, config: CacheConfig, create: bool) -> Result<Cache> {
        if is_server_url(path.as_ref()) {
            return Cache::open_server(path.as_ref(), config, create);
        }
        let path = path.as_ref().to_path_buf();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => {
                return Err(CacheError::io(
                    &path,
                    std::io::Error::other("is a directory, not a cache file"),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    return Err(CacheError::Missing { path });
                }
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| CacheError::io(dir, e))?;
                }
            }
            Err(e) => return Err(CacheError::io(&path, e)),
        }
        let mut flags = OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if config.read_only {
            flags |= OpenFlags::SQLITE_OPEN_READ_ONLY;
        } else {
            flags |= OpenFlags::SQLITE_OPEN_READ_WRITE;
            if create {
                flags |= OpenFlags::SQLITE_OPEN_CREATE;
            }
        }
        let mut conn = Connection::open_with_flags(&path, flags).at(&path)?;
        conn.busy_timeout(config.busy_timeout).at(&path)?;
        // Lookup and write paths together use about 20 distinct statements; keep all prepared.
        conn.set_prepared_statement_cache_capacity(64);
        // Cache files are data from elsewhere: refuse schema tricks (no functions with side
        // effects in views or triggers, no writable sqlite_schema).
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
            .at(&path)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)
            .at(&path)?;
        // Reading the header first turns a garbage file into NotADatabase right here.
        let version = schema::user_version(&conn, &path)?;
        if !config.read_only {
            enable_wal(&conn, &path, config.busy_timeout)?;
            conn.pragma_update(None, "synchronous", "NORMAL")
                .at(&path)?;
        }
        // Lookups read through a memory map and keep hot index pages in a larger page cache.
        conn.pragma_update(None, "mmap_size", MMAP_BYTES)
            .at(&path)?;
        conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)
            .at(&path)?;
        conn.pragma_update(None, "foreign_keys", true).at(&path)?;
        if config.read_only {
            schema::require_current(&path, version)?;
        } else {
            schema::migrate(&mut conn, &path, schema::MIGRATIONS)?;
        }
        Ok(Cache {
            conn: Db::file(conn),
            path,
            config,
        })
    }

    /// Opens the cache on the PostgreSQL server of `url`.
    fn open_server(url: &Path, config: CacheConfig, create: bool) -> Result<Cache> {
        let text = url.to_str().unwrap_or_default();
        let server = ServerUrl::parse(
            text,
            config.busy_timeout.min(std::time::Duration::from_secs(10)),
        )
        .map_err(|detail| CacheError::Server {
            location: PathBuf::from(
                text.split_once("://")
                    .map_or("postgres", |(s, _)| s)
                    .to_string()
                    + "://...",
            ),
            detail,
        })?;
        let location = PathBuf::from(&server.shown);
        let conn =
            PgConn::connect(server.with_password().config, config.read_only).at(&location)?;
        let conn = Db::server(conn);
        let version = schema::server_version(&conn).at(&location)?;
        if version == 0 && !create {
            return Err(CacheError::Missing { path: location });
        }
        if config.read_only {
            schema::require_current(&location, version)?;
        } else {
            schema::migrate_server(&conn, &location)?;
        }
        Ok(Cache {
            conn,
            path: location,
            config,
        })
    }

    /// Whether this cache is on a server.
    pub fn is_server(&self) -> bool {
        self.conn.is_server()
    }

    /// The cache file, or the server's URL without its password.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the warm-started cost model of a target and toolchain lives: a file beside
    /// the cache (`<cache>.cost-models/<kind>-<digest>.tar`, MetaSchedule's XGB model tar,
    /// written by the TVM worker). It depends only on the cache's path, so jobs that share
    /// a cache share the model.
    ///
    /// A cache on a server keeps its cost models on this machine
    /// (`<user cache dir>/tgc/cost-models/<digest of the URL without password>/`): the model
    /// files are Python pickles, and a file another machine wrote must never be unpickled.
    pub fn cost_model_path(cache_path: &Path, target: &Target, toolchain: &Toolchain) -> PathBuf {
        let mut h = blake3::Hasher::new();
        for part in [
            target.canonical_json(),
            toolchain.tvm.as_str(),
            toolchain.tvm_ffi.as_str(),
            toolchain.llvm.as_str(),
        ] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        let digest = h.finalize().to_hex();
        if is_server_url(cache_path) {
            let shown = cache_path
                .to_str()
                .and_then(|u| ServerUrl::parse(u, std::time::Duration::from_secs(1)).ok())
                .map_or_else(|| "postgres".to_string(), |u| u.shown);
            let server = blake3::hash(shown.as_bytes()).to_hex();
            let base = dirs::cache_dir()
                .unwrap_or_else(std::env::temp_dir)
                .join("tgc")
                .join("cost-models")
                .join(&server[..16]);
            return base.join(format!("{}-{}.tar", target.kind(), &digest[..16]));
        }
        let mut dir = cache_path.as_os_str().to_owned();
        dir.push(".cost-models");
        PathBuf::from(dir).join(format!("{}-{}.tar", target.kind(), &digest[..16]))
    }

    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// The number of records kept per (task, target, toolchain).
    pub fn best_k(&self) -> Result<usize> {
        read_best_k(&self.conn, &self.path)
    }

    /// Sets k and prunes every group to it; returns the number of records removed.
    pub fn set_best_k(&mut self, k: usize) -> Result<usize> {
        if k == 0 {
            return Err(CacheError::invalid("best k", "must be at least 1"));
        }
        let path = self.path.clone();
        let tx = self.write_tx()?;
        tx.exec(
            "UPDATE settings SET value = ?1 WHERE name = 'best_k'",
            args![k.to_string()],
        )
        .at(&path)?;
        let pruned = prune_all(&tx, &path, k)?;
        delete_orphan_traces(&tx, &path)?;
        tx.commit().at(&path)?;
        Ok(pruned)
    }

    /// Records that `spelling` means the target `canonical` under `toolchain` (TVM's canonical
    /// form of it, from the worker's `target` method), so that lookups and writes with the
    /// spelling use the canonical target's records. Records an older tgc filed under the
    /// spelling itself (a target row with that JSON, same toolchain) move to the canonical
    /// target, keeping the best k. Returns the number of records moved. Registering a target
    /// as its own spelling only makes sure its row exists.
    pub fn register_target(
        &mut self,
        spelling: &Target,
        canonical: &Target,
        toolchain: &Toolchain,
    ) -> Result<usize> {
        if spelling.kind() != canonical.kind() {
            return Err(CacheError::invalid(
                "target",
                format!("{spelling} cannot mean {canonical}: the kinds differ"),
            ));
        }
        let path = self.path.clone();
        let tx = self.write_tx()?;
        let mut w = Writer::new(&tx, &path)?;
        let toolchain_id = w.toolchain(toolchain)?;
        let target_id = w.target(canonical)?;
        let mut moved = 0;
        if spelling != canonical {
            w.spelling(spelling.canonical_json(), toolchain_id, target_id)?;
            let legacy: Option<i64> = tx
                .opt(
                    "SELECT id FROM targets WHERE canonical_json = ?1",
                    args![spelling.canonical_json()],
                    |r| r.get(0),
                )
                .at(&path)?;
            if let Some(legacy) = legacy {
                moved = w.move_records(legacy, target_id, toolchain_id)?;
            }
        }
        tx.commit().at(&path)?;
        Ok(moved)
    }

    /// Stores measured records of a task on a target under a toolchain, in one transaction:
    /// registers the task (or fills in its workload), dedupes traces by digest, keeps the
    /// newer measurement of a trace seen before (see `Writer::record`), and prunes the
    /// group to the best k.
    pub fn put(
        &mut self,
        task: &TaskEntry,
        target: &Target,
        toolchain: &Toolchain,
        records: &[NewRecord],
    ) -> Result<PutSummary> {
        self.put_records(task, target, toolchain, records, true)
    }

    /// [`Cache::put`] that stores only records of traces the group lacks and replaces no
    /// stored measurement (an exact hit's confirmation: its re-measurement stopped at the
    /// first window fast enough, a measurement selected for being fast, while the record
    /// it confirms may be under another task, an import's, and still belong under this one).
    pub fn put_missing(
        &mut self,
        task: &TaskEntry,
        target: &Target,
        toolchain: &Toolchain,
        records: &[NewRecord],
    ) -> Result<PutSummary> {
        self.put_records(task, target, toolchain, records, false)
    }

    fn put_records(
        &mut self,
        task: &TaskEntry,
        target: &Target,
        toolchain: &Toolchain,
        records: &[NewRecord],
        replace_known: bool,
    ) -> Result<PutSummary> {
        let path = self.path.clone();
        let tx = self.write_tx()?;
        let mut w = Writer::new(&tx, &path)?;
        w.replace_known = replace_known;
        let task_id = w.tgc_task(task)?;
        let toolchain_id = w.toolchain(toolchain)?;
        let target_id = w.target_for(target, toolchain_id)?;
        let mut summary = PutSummary::default();
        for r in records {
            w.record(
                Group {
                    task_id,
                    target_id,
                    toolchain_id,
                },
                r,
                &mut summary,
            )?;
        }
        tx.commit().at(&path)?;
        Ok(summary)
    }

    /// Stores the records of many tasks on one target and toolchain in one transaction
    /// (bulk loads: a whole tuning log, a benchmark database). Same rules as [`Cache::put`].
    pub fn put_batch<'r>(
        &mut self,
        target: &Target,
        toolchain: &Toolchain,
        entries: impl IntoIterator<Item = (&'r TaskEntry, &'r [NewRecord])>,
    ) -> Result<PutSummary> {
        let path = self.path.clone();
        let tx = self.write_tx()?;
        let mut w = Writer::new(&tx, &path)?;
        let toolchain_id = w.toolchain(toolchain)?;
        let target_id = w.target_for(target, toolchain_id)?;
        let mut summary = PutSummary::default();
        for (task, records) in entries {
            let task_id = w.tgc_task(task)?;
            for r in records {
                w.record(
                    Group {
                        task_id,
                        target_id,
                        toolchain_id,
                    },
                    r,
                    &mut summary,
                )?;
            }
        }
        tx.commit().at(&path)?;
        Ok(summary)
    }

    /// Counts of the cache's contents.
    pub fn stats(&self) -> Result<Stats> {
        let p = &self.path;
        let tx = self.conn.begin_read().at(p)?;
        let count = |sql: &str| -> Result<u64> {
            tx.one(sql, &[], |r| r.get::<i64>(0))
                .at(p)
                .map(|n| n as u64)
        };
        let targets = tx
            .rows(
                "SELECT t.kind, t.canonical_json, (SELECT count(*) FROM records r WHERE r.target_id = t.id)
                 FROM targets t ORDER BY t.kind, t.canonical_json",
                &[],
                |r| Ok((r.get(0)?, r.get(1)?, r.get::<i64>(2)? as u64)),
            )
            .at(p)?;
        let toolchains = tx
            .rows(
                "SELECT c.tvm_version, c.tvm_ffi_version, c.llvm_version,
                        (SELECT count(*) FROM records r WHERE r.toolchain_id = c.id)
                 FROM toolchains c ORDER BY c.tvm_version, c.tvm_ffi_version, c.llvm_version",
                &[],
                |r| Ok((toolchain_columns(r, 0)?, r.get::<i64>(3)? as u64)),
            )
            .at(p)?;
        let file_bytes = self.size_bytes()?;
        Ok(Stats {
            path: p.clone(),
            schema_version: schema::version(&tx).at(p)?,
            best_k: self.best_k()?,
            tasks: count("SELECT count(*) FROM tasks WHERE exact_key IS NOT NULL")?,
            imported_workloads: count("SELECT count(*) FROM tasks WHERE exact_key IS NULL")?,
            linked_workloads: count(
                "SELECT count(*) FROM tasks i WHERE i.exact_key IS NULL AND EXISTS
                   (SELECT 1 FROM tasks t WHERE t.tvm_hash = i.tvm_hash AND t.exact_key IS NOT NULL)",
            )?,
            traces: count("SELECT count(*) FROM traces")?,
            records: count("SELECT count(*) FROM records")?,
            targets,
            toolchains,
            file_bytes,
        })
    }

    /// Prunes every group to the best k and deletes what no record uses any more (traces,
    /// tasks, targets, toolchains); then checkpoints the WAL into the main file and, with
    /// `vacuum`, rewrites the file to return free pages to the file system.
    pub fn gc(&mut self, vacuum: bool) -> Result<GcSummary> {
        let path = self.path.clone();
        let mut s = GcSummary {
            bytes_before: self.size_bytes()?,
            ..GcSummary::default()
        };
        let tx = self.write_tx()?;
        let k = read_best_k(&tx, &path)?;
        s.records = prune_all(&tx, &path, k)?;
        s.traces = delete_orphan_traces(&tx, &path)?;
        s.tasks = tx.exec("DELETE FROM tasks WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.task_id = tasks.id)", &[]).at(&path)?;
        s.targets = tx
            .exec("DELETE FROM targets WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.target_id = targets.id)", &[])
            .at(&path)?;
        s.toolchains = tx
            .exec("DELETE FROM toolchains WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.toolchain_id = toolchains.id)", &[])
            .at(&path)?;
        tx.commit().at(&path)?;
        if vacuum {
            // Outside any transaction on both; a server also refreshes its planner statistics.
            let sql = if self.conn.is_server() {
                "VACUUM ANALYZE"
            } else {
                "VACUUM"
            };
            self.conn.batch(sql).at(&path)?;
        }
        if let Some(conn) = self.conn.lite() {
            // Best effort: readers of other processes may hold the WAL; then it shrinks later.
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
        s.bytes_after = self.size_bytes()?;
        Ok(s)
    }

    /// Bytes of the database file plus its WAL, or of the whole database on a server.
    fn size_bytes(&self) -> Result<u64> {
        match self.conn.lite() {
            Some(_) => Ok(file_bytes(&self.path)),
            None => self
                .conn
                .one("SELECT pg_database_size(current_database())", &[], |r| {
                    r.get::<i64>(0)
                })
                .map(|n| n as u64)
                .at(&self.path),
        }
    }

    /// A write transaction that holds the write lock from its start.
    pub(crate) fn write_tx(&mut self) -> Result<crate::db::Txn<'_>> {
        if self.config.read_only {
            return Err(CacheError::ReadOnly {
                location: self.path.clone(),
                detail: "opened read-only".into(),
            });
        }
        self.conn.begin_write().at(&self.path)
    }
}

/// Switches to WAL. A fresh file opened by several processes at once can see SQLITE_BUSY
/// here without the busy handler being consulted, so retry until the busy timeout.
fn enable_wal(conn: &Connection, path: &Path, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(CacheError::NoWal {
                    path: path.to_path_buf(),
                    mode,
                })
            }
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && start.elapsed() < timeout =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(CacheError::sqlite(path, e)),
        }
    }
}

fn prune_all(tx: &Db, path: &Path, k: usize) -> Result<usize> {
    tx.exec(
        "DELETE FROM records WHERE id IN (
           SELECT id FROM (
             SELECT id, row_number() OVER (PARTITION BY task_id, target_id, toolchain_id ORDER BY mean_latency, id) AS rn
             FROM records) AS ranked
           WHERE rn > ?1)",
        args![k as i64],
    )
    .at(path)
}

fn delete_orphan_traces(tx: &Db, path: &Path) -> Result<usize> {
    tx.exec("DELETE FROM traces WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.trace_id = traces.id)", &[]).at(path)
}

/// The stored columns of a tgc task (keys as text).
pub(crate) struct TaskRow {
    pub exact_key: String,
    pub structural_key: String,
    pub family_key: String,
    pub features_json: String,
    pub tvm_hash: Option<String>,
    pub workload_json: Option<String>,
}

/// The records of one task on one target under one toolchain: the unit of best-k.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Group {
    pub task_id: i64,
    pub target_id: i64,
    pub toolchain_id: i64,
}

/// A record's columns as stored: the measurement encoded, the provenance with its defaults
/// filled in (source `tune`, created now).
struct RecordColumns<'r> {
    mean_latency: f64,
    latencies_json: String,
    num_samples: i64,
    args_info_json: Option<String>,
    model: &'r Option<String>,
    task_name: &'r Option<String>,
    trials: Option<u32>,
    source: &'r str,
    created_at: i64,
}

impl<'r> RecordColumns<'r> {
    /// Checks the samples and encodes `r`; `now` is the creation time when it has none.
    fn of(r: &'r NewRecord, now: i64) -> Result<RecordColumns<'r>> {
        let p = &r.provenance;
        Ok(RecordColumns {
            mean_latency: record_latency(&r.latencies)?,
            latencies_json: serde_json::to_string(&r.latencies)
                .map_err(|e| CacheError::invalid("latencies", e.to_string()))?,
            num_samples: r.latencies.len() as i64,
            args_info_json: r.args_info.as_ref().map(canonical_json),
            model: &p.model,
            task_name: &p.task_name,
            trials: p.trials,
            source: if p.source.is_empty() {
                "tune"
            } else {
                p.source.as_str()
            },
            created_at: p.created_at.unwrap_or(now),
        })
    }
}

/// The stored measurement of a trace in a group.
struct StoredMeasurement {
    record_id: i64,
    mean_latency: f64,
    latencies_json: String,
    created_at: i64,
}

/// How full a group is.
struct GroupFill {
    records: usize,
    /// The slowest mean latency; `None` for an empty group.
    worst: Option<f64>,
}

/// Write helpers inside one transaction (shared by `put` and MetaSchedule import).
pub(crate) struct Writer<'a> {
    tx: &'a Db,
    path: &'a Path,
    best_k: usize,
    now: i64,
    /// Whether a record of a trace the group already holds may replace the stored one
    /// (false for MetaSchedule imports: an import adds what the cache lacks).
    pub(crate) replace_known: bool,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(tx: &'a Db, path: &'a Path) -> Result<Writer<'a>> {
        Ok(Writer {
            tx,
            path,
            best_k: read_best_k(tx, path)?,
            now: now_unix(),
            replace_known: true,
        })
    }

    pub(crate) fn target(&mut self, t: &Target) -> Result<i64> {
        self.tx
            .one(
                "INSERT INTO targets(kind, canonical_json) VALUES (?1, ?2)
                 ON CONFLICT(canonical_json) DO UPDATE SET kind = excluded.kind RETURNING id",
                args![t.kind(), t.canonical_json()],
                |r| r.get(0),
            )
            .at(self.path)
    }

    pub(crate) fn toolchain(&mut self, t: &Toolchain) -> Result<i64> {
        self.tx
            .one(
                "INSERT INTO toolchains(tvm_version, tvm_ffi_version, llvm_version) VALUES (?1, ?2, ?3)
                 ON CONFLICT(tvm_version, tvm_ffi_version, llvm_version) DO UPDATE SET tvm_version = excluded.tvm_version
                 RETURNING id",
                args![t.tvm, t.tvm_ffi, t.llvm],
                |r| r.get(0),
            )
            .at(self.path)
    }

    /// The target row to write records of `t` under `toolchain_id`: the canonical target
    /// the spelling `t` was registered for, else `t`'s own row.
    pub(crate) fn target_for(&mut self, t: &Target, toolchain_id: i64) -> Result<i64> {
        match spelled_target(self.tx, self.path, t, toolchain_id)? {
            Some(id) => Ok(id),
            None => self.target(t),
        }
    }

    /// Moves the records of target `from` under `toolchain_id` to target `to`, with the
    /// rules of [`Writer::record`] (a trace stored twice keeps its newer measurement, each
    /// group keeps its best k). Returns how many records were moved.
    fn move_records(&mut self, from: i64, to: i64, toolchain_id: i64) -> Result<usize> {
        let path = self.path;
        let rows: Vec<RecordRow> = self
            .tx
            .rows(
                concat!(
                    "SELECT ",
                    record_columns!(),
                    " FROM records r JOIN traces tr ON tr.id = r.trace_id
                     WHERE r.target_id = ?1 AND r.toolchain_id = ?2 ORDER BY r.id"
                ),
                args![from, toolchain_id],
                RecordRow::read,
            )
            .at(path)?;
        if rows.is_empty() {
            return Ok(0);
        }
        // Delete first (the traces stay until the end), then store again under `to`.
        self.tx
            .exec(
                "DELETE FROM records WHERE target_id = ?1 AND toolchain_id = ?2",
                args![from, toolchain_id],
            )
            .at(path)?;
        let mut summary = PutSummary::default();
        for row in rows {
            let task_id = row.task_id;
            let record = row.into_new_record(path)?;
            self.record(
                Group {
                    task_id,
                    target_id: to,
                    toolchain_id,
                },
                &record,
                &mut summary,
            )?;
        }
        delete_orphan_traces(self.tx, path)?;
        Ok(summary.inserted + summary.replaced + summary.duplicates + summary.pruned)
    }

    /// Registers a tgc task; a later call with a workload fills in the workload.
    pub(crate) fn tgc_task(&mut self, t: &TaskEntry) -> Result<i64> {
        let (hash, wl) = match &t.workload {
            Some(w) => (Some(w.tvm_hash.to_string()), Some(w.json.as_str())),
            None => (None, None),
        };
        self.task_row(&TaskRow {
            exact_key: t.keys.exact.to_string(),
            structural_key: t.keys.structural.to_string(),
            family_key: t.keys.family.to_string(),
            features_json: features_to_json(&t.features),
            tvm_hash: hash,
            workload_json: wl.map(str::to_string),
        })
    }

    /// Registers a tgc task by its stored columns (a copy from another cache keeps keys of
    /// any encoding as they are); a row with a workload fills in a missing one.
    pub(crate) fn task_row(&mut self, t: &TaskRow) -> Result<i64> {
        self.tx
            .one(
                "INSERT INTO tasks(exact_key, structural_key, family_key, features_json, tvm_hash, workload_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(exact_key) DO UPDATE SET
                   tvm_hash = coalesce(excluded.tvm_hash, tasks.tvm_hash),
                   workload_json = coalesce(excluded.workload_json, tasks.workload_json)
                 RETURNING id",
                args![
                    t.exact_key,
                    t.structural_key,
                    t.family_key,
                    t.features_json,
                    t.tvm_hash,
                    t.workload_json
                ],
                |r| r.get(0),
            )
            .at(self.path)
    }

    /// Records that `spelling` means target `target_id` under `toolchain_id`.
    pub(crate) fn spelling(
        &mut self,
        spelling: &str,
        toolchain_id: i64,
        target_id: i64,
    ) -> Result<()> {
        self.tx
            .exec(
                "INSERT INTO target_spellings(spelling, toolchain_id, target_id) VALUES (?1, ?2, ?3)
                 ON CONFLICT(spelling, toolchain_id) DO UPDATE SET target_id = excluded.target_id",
                args![spelling, toolchain_id, target_id],
            )
            .at(self.path)?;
        Ok(())
    }

    /// Registers a workload imported from a MetaSchedule database (keyed by its TVM hash).
    pub(crate) fn imported_workload(&mut self, w: &Workload) -> Result<i64> {
        let hash = w.tvm_hash.to_string();
        let existing: Option<i64> = self
            .tx
            .opt(
                "SELECT id FROM tasks WHERE tvm_hash = ?1 AND exact_key IS NULL",
                args![hash],
                |r| r.get(0),
            )
            .at(self.path)?;
        if let Some(id) = existing {
            return Ok(id);
        }
        self.tx
            .one(
                "INSERT INTO tasks(tvm_hash, workload_json) VALUES (?1, ?2) RETURNING id",
                args![hash, w.json],
                |r| r.get(0),
            )
            .at(self.path)
    }

    /// Stores one record in `g`, keeping the group at the best k.
    pub(crate) fn record(
        &mut self,
        g: Group,
        r: &NewRecord,
        summary: &mut PutSummary,
    ) -> Result<()> {
        let columns = RecordColumns::of(r, self.now)?;
        let digest = r.trace.digest();
        let trace_id: Option<i64> = self
            .tx
            .opt(
                "SELECT id FROM traces WHERE digest = ?1",
                args![digest.0[..]],
                |r| r.get(0),
            )
            .at(self.path)?;
        if let Some(trace_id) = trace_id {
            if let Some(existing) = self.stored_measurement(g, trace_id)? {
                // The same trace measured again: the newer measurement replaces the older
                // one. A latency is what the schedule runs at now; keeping the fastest ever
                // seen would make it the minimum over many re-measurements, biased low, a
                // bar later exact hits miss (and one their own re-measurement, slower,
                // could never correct). At the same time the faster one stays, so that a
                // second copy of the same records changes nothing.
                let newer = columns.created_at > existing.created_at
                    || (columns.created_at == existing.created_at
                        && columns.mean_latency < existing.mean_latency);
                if self.replace_known && newer && columns.latencies_json != existing.latencies_json
                {
                    self.remeasure(existing.record_id, &columns)?;
                    summary.replaced += 1;
                } else {
                    summary.duplicates += 1;
                }
                return Ok(());
            }
        }
        // A full group keeps a newcomer only if it beats the current worst.
        let fill = self.group_fill(g)?;
        let full = fill.records >= self.best_k;
        if full && fill.worst.is_some_and(|w| columns.mean_latency >= w) {
            summary.pruned += 1;
            return Ok(());
        }
        let trace_id = match trace_id {
            Some(id) => id,
            None => self
                .tx
                .one(
                    "INSERT INTO traces(digest, trace_json) VALUES (?1, ?2) RETURNING id",
                    args![digest.0[..], r.trace.json()],
                    |r| r.get(0),
                )
                .at(self.path)?,
        };
        self.insert_record(g, trace_id, &columns)?;
        summary.inserted += 1;
        if full {
            summary.pruned += self.prune_group(g)?;
        }
        Ok(())
    }

    /// The record of trace `trace_id` in `g`, if the group has one.
    fn stored_measurement(&self, g: Group, trace_id: i64) -> Result<Option<StoredMeasurement>> {
        self.tx
            .opt(
                "SELECT id, mean_latency, latencies_json, created_at FROM records
                     WHERE task_id = ?1 AND target_id = ?2 AND toolchain_id = ?3 AND trace_id = ?4",
                args![g.task_id, g.target_id, g.toolchain_id, trace_id],
                |r| {
                    Ok(StoredMeasurement {
                        record_id: r.get(0)?,
                        mean_latency: r.get(1)?,
                        latencies_json: r.get(2)?,
                        created_at: r.get(3)?,
                    })
                },
            )
            .at(self.path)
    }

    /// Replaces the measurement and provenance of record `id` (args_info only when given).
    fn remeasure(&self, id: i64, c: &RecordColumns) -> Result<()> {
        self.tx
            .exec(
                "UPDATE records SET latencies_json = ?2, mean_latency = ?3, num_samples = ?4,
                               args_info_json = coalesce(?5, args_info_json), model = ?6, task_name = ?7,
                               trials = ?8, source = ?9, created_at = ?10
                             WHERE id = ?1",
                args![
                    id,
                    c.latencies_json,
                    c.mean_latency,
                    c.num_samples,
                    c.args_info_json,
                    c.model,
                    c.task_name,
                    c.trials,
                    c.source,
                    c.created_at
                ],
            )
            .at(self.path)?;
        Ok(())
    }

    /// How many records `g` holds and the slowest mean latency among them.
    fn group_fill(&self, g: Group) -> Result<GroupFill> {
        self.tx
            .one(
                "SELECT count(*), max(mean_latency) FROM records WHERE task_id = ?1 AND target_id = ?2 AND toolchain_id = ?3",
                args![g.task_id, g.target_id, g.toolchain_id],
                |r| {
                    Ok(GroupFill {
                        records: r.get::<i64>(0)? as usize,
                        worst: r.get(1)?,
                    })
                },
            )
            .at(self.path)
    }

    fn insert_record(&self, g: Group, trace_id: i64, c: &RecordColumns) -> Result<()> {
        self.tx
            .exec(
                "INSERT INTO records(task_id, target_id, toolchain_id, trace_id, args_info_json, latencies_json,
                   mean_latency, num_samples, model, task_name, trials, source, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                args![
                    g.task_id,
                    g.target_id,
                    g.toolchain_id,
                    trace_id,
                    c.args_info_json,
                    c.latencies_json,
                    c.mean_latency,
                    c.num_samples,
                    c.model,
                    c.task_name,
                    c.trials,
                    c.source,
                    c.created_at
                ],
            )
            .at(self.path)?;
        Ok(())
    }

    /// Deletes the records of `g` beyond the best k, and their traces if now unused.
    fn prune_group(&mut self, g: Group) -> Result<usize> {
        let path = self.path;
        let trace_ids: Vec<i64> = self
            .tx
            .rows(
                "DELETE FROM records WHERE task_id = ?1 AND target_id = ?2 AND toolchain_id = ?3 AND id NOT IN (
                   SELECT id FROM records WHERE task_id = ?1 AND target_id = ?2 AND toolchain_id = ?3
                   ORDER BY mean_latency, id LIMIT ?4)
                 RETURNING trace_id",
                args![g.task_id, g.target_id, g.toolchain_id, self.best_k as i64],
                |r| r.get(0),
            )
            .at(path)?;
        for id in &trace_ids {
            self.tx
                .exec(
                    "DELETE FROM traces WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM records WHERE trace_id = ?1)",
                    args![id],
                )
                .at(path)?;
        }
        Ok(trace_ids.len())
    }
}
