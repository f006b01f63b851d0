//! The cache's SQLite schema and its forward migrations.
//!
//! The schema version lives in `PRAGMA user_version`. [`MIGRATIONS`] lists the steps in
//! order; step `i` takes a cache from version `i` to `i + 1`. Opening a cache applies the
//! missing steps inside one `BEGIN IMMEDIATE` transaction, so two processes opening an old
//! cache at once migrate it once, and a process killed mid-migration leaves the old version.
//! A cache whose version is newer than [`SCHEMA_VERSION`] is refused: a binary never
//! rewrites or downgrades a schema it does not know.
//!
//! Version 1 (tables, one idea each):
//! - `settings(name, value)`: `best_k`, the number of records kept per (task, target,
//!   toolchain).
//! - `targets(id, kind, canonical_json)`: TVM target configs, keys sorted.
//! - `toolchains(id, tvm_version, tvm_ffi_version)`.
//! - `tasks(id, exact_key, structural_key, family_key, features_json, tvm_hash,
//!   workload_json)`: a tgc task has its three `tgc2:` keys and features, and optionally its
//!   TVM workload; a workload imported from a MetaSchedule database has no tgc keys, only
//!   its TVM structural hash and workload JSON (at most one such row per hash). Both kinds
//!   meet through `tvm_hash`.
//! - `traces(id, digest, trace_json)`: canonical trace JSON, stored once per blake3 digest.
//! - `records(id, task_id, target_id, toolchain_id, trace_id, args_info_json,
//!   latencies_json, mean_latency, num_samples, model, task_name, trials, source,
//!   created_at)`: one measured trace of a task on a target under a toolchain; at most one
//!   per (task, target, toolchain, trace) and at most `best_k` per (task, target, toolchain).
//!
//! Version 2:
//! - `toolchains(id, tvm_version, tvm_ffi_version, llvm_version)`: the LLVM version joins the
//!   toolchain (TVM's `llvm_version_major()`; empty when unknown). The table is rebuilt with
//!   the ids kept, so records keep their toolchain. Rows of version 1 get `'22'` when they are
//!   the pinned TVM 0.27.0.post1 / tvm-ffi 0.1.14.post1 (the wheel links LLVM 22, and version
//!   1 binaries keyed every tuning run by that pin), and `''` (unknown) otherwise.
//! - `target_spellings(spelling, toolchain_id, target_id)`: a target as someone wrote it
//!   (canonical JSON of the spelling) -> the target row of TVM's canonical form of it under
//!   that toolchain. Lookups resolve a spelling through it before matching targets directly.

use crate::db::{args, Db, DbResult};
use crate::error::{CacheError, Result, SqliteContext};
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;

/// One forward migration step.
pub struct Migration {
    /// What the step does, for humans.
    pub description: &'static str,
    /// The SQL it runs (several statements).
    pub sql: &'static str,
}

/// Every migration, oldest first; `MIGRATIONS[i]` upgrades version `i` to `i + 1`.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        description: "initial schema: settings, targets, toolchains, tasks, traces, records",
        sql: r#"
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO settings(name, value) VALUES ('best_k', '32');

CREATE TABLE targets (
    id             INTEGER PRIMARY KEY,
    kind           TEXT NOT NULL,
    canonical_json TEXT NOT NULL UNIQUE
);

CREATE TABLE toolchains (
    id              INTEGER PRIMARY KEY,
    tvm_version     TEXT NOT NULL,
    tvm_ffi_version TEXT NOT NULL,
    UNIQUE (tvm_version, tvm_ffi_version)
);

CREATE TABLE tasks (
    id             INTEGER PRIMARY KEY,
    exact_key      TEXT UNIQUE,
    structural_key TEXT,
    family_key     TEXT,
    features_json  TEXT,
    tvm_hash       TEXT,
    workload_json  TEXT,
    CHECK ((exact_key IS NULL) = (structural_key IS NULL)
       AND (exact_key IS NULL) = (family_key IS NULL)
       AND (exact_key IS NULL) = (features_json IS NULL)),
    CHECK (exact_key IS NOT NULL OR (tvm_hash IS NOT NULL AND workload_json IS NOT NULL)),
    CHECK (workload_json IS NULL OR tvm_hash IS NOT NULL)
);
CREATE INDEX tasks_by_structural ON tasks(structural_key) WHERE structural_key IS NOT NULL;
CREATE INDEX tasks_by_family ON tasks(family_key) WHERE family_key IS NOT NULL;
CREATE INDEX tasks_by_tvm_hash ON tasks(tvm_hash) WHERE tvm_hash IS NOT NULL;
CREATE UNIQUE INDEX imported_workload_per_hash ON tasks(tvm_hash) WHERE exact_key IS NULL;

CREATE TABLE traces (
    id         INTEGER PRIMARY KEY,
    digest     BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    trace_json TEXT NOT NULL
);

CREATE TABLE records (
    id             INTEGER PRIMARY KEY,
    task_id        INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    target_id      INTEGER NOT NULL REFERENCES targets(id),
    toolchain_id   INTEGER NOT NULL REFERENCES toolchains(id),
    trace_id       INTEGER NOT NULL REFERENCES traces(id),
    args_info_json TEXT,
    latencies_json TEXT NOT NULL,
    mean_latency   REAL NOT NULL CHECK (mean_latency > 0),
    num_samples    INTEGER NOT NULL CHECK (num_samples > 0),
    model          TEXT,
    task_name      TEXT,
    trials         INTEGER,
    source         TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    UNIQUE (task_id, target_id, toolchain_id, trace_id)
);
-- Covering index of every lookup: best records of one (task, target, toolchain) in order.
CREATE INDEX records_best ON records(task_id, target_id, toolchain_id, mean_latency, trace_id);
CREATE INDEX records_by_trace ON records(trace_id);
"#,
    },
    Migration {
        description:
            "toolchains gain the LLVM version; target spellings resolve to TVM's canonical targets",
        sql: r#"
CREATE TABLE toolchains_v2 (
    id              INTEGER PRIMARY KEY,
    tvm_version     TEXT NOT NULL,
    tvm_ffi_version TEXT NOT NULL,
    llvm_version    TEXT NOT NULL,
    UNIQUE (tvm_version, tvm_ffi_version, llvm_version)
);
INSERT INTO toolchains_v2(id, tvm_version, tvm_ffi_version, llvm_version)
    SELECT id, tvm_version, tvm_ffi_version,
           CASE WHEN tvm_version = '0.27.0.post1' AND tvm_ffi_version = '0.1.14.post1'
                THEN '22' ELSE '' END
    FROM toolchains;
DROP TABLE toolchains;
ALTER TABLE toolchains_v2 RENAME TO toolchains;

CREATE TABLE target_spellings (
    spelling     TEXT NOT NULL,
    toolchain_id INTEGER NOT NULL REFERENCES toolchains(id) ON DELETE CASCADE,
    target_id    INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
    PRIMARY KEY (spelling, toolchain_id)
) WITHOUT ROWID;
CREATE INDEX target_spellings_by_target ON target_spellings(target_id);
"#,
    },
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The same migrations for a cache on a PostgreSQL server, step for step (same tables,
/// columns, constraints and indexes; `PG_MIGRATIONS[i]` is `MIGRATIONS[i]` in PostgreSQL's
/// DDL). Integers are `BIGINT`, reals `DOUBLE PRECISION`, blobs `BYTEA`, row ids identity
/// columns. The version lives in the one-row table `tgc_schema`.
pub const PG_MIGRATIONS: &[Migration] = &[
    Migration {
        description: "initial schema: settings, targets, toolchains, tasks, traces, records",
        sql: r#"
CREATE TABLE tgc_schema (version BIGINT NOT NULL);
INSERT INTO tgc_schema(version) VALUES (0);

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO settings(name, value) VALUES ('best_k', '32');

CREATE TABLE targets (
    id             BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    kind           TEXT NOT NULL,
    canonical_json TEXT NOT NULL UNIQUE
);

CREATE TABLE toolchains (
    id              BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    tvm_version     TEXT NOT NULL,
    tvm_ffi_version TEXT NOT NULL,
    CONSTRAINT toolchains_versions UNIQUE (tvm_version, tvm_ffi_version)
);

CREATE TABLE tasks (
    id             BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    exact_key      TEXT UNIQUE,
    structural_key TEXT,
    family_key     TEXT,
    features_json  TEXT,
    tvm_hash       TEXT,
    workload_json  TEXT,
    CHECK ((exact_key IS NULL) = (structural_key IS NULL)
       AND (exact_key IS NULL) = (family_key IS NULL)
       AND (exact_key IS NULL) = (features_json IS NULL)),
    CHECK (exact_key IS NOT NULL OR (tvm_hash IS NOT NULL AND workload_json IS NOT NULL)),
    CHECK (workload_json IS NULL OR tvm_hash IS NOT NULL)
);
CREATE INDEX tasks_by_structural ON tasks(structural_key) WHERE structural_key IS NOT NULL;
CREATE INDEX tasks_by_family ON tasks(family_key) WHERE family_key IS NOT NULL;
CREATE INDEX tasks_by_tvm_hash ON tasks(tvm_hash) WHERE tvm_hash IS NOT NULL;
CREATE UNIQUE INDEX imported_workload_per_hash ON tasks(tvm_hash) WHERE exact_key IS NULL;

CREATE TABLE traces (
    id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    digest     BYTEA NOT NULL UNIQUE CHECK (length(digest) = 32),
    trace_json TEXT NOT NULL
);

CREATE TABLE records (
    id             BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id        BIGINT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    target_id      BIGINT NOT NULL REFERENCES targets(id),
    toolchain_id   BIGINT NOT NULL REFERENCES toolchains(id),
    trace_id       BIGINT NOT NULL REFERENCES traces(id),
    args_info_json TEXT,
    latencies_json TEXT NOT NULL,
    mean_latency   DOUBLE PRECISION NOT NULL CHECK (mean_latency > 0),
    num_samples    BIGINT NOT NULL CHECK (num_samples > 0),
    model          TEXT,
    task_name      TEXT,
    trials         BIGINT,
    source         TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    UNIQUE (task_id, target_id, toolchain_id, trace_id)
);
CREATE INDEX records_best ON records(task_id, target_id, toolchain_id, mean_latency, trace_id);
CREATE INDEX records_by_trace ON records(trace_id);
"#,
    },
    Migration {
        description:
            "toolchains gain the LLVM version; target spellings resolve to TVM's canonical targets",
        sql: r#"
ALTER TABLE toolchains ADD COLUMN llvm_version TEXT NOT NULL DEFAULT '';
UPDATE toolchains SET llvm_version = '22'
    WHERE tvm_version = '0.27.0.post1' AND tvm_ffi_version = '0.1.14.post1';
ALTER TABLE toolchains ALTER COLUMN llvm_version DROP DEFAULT;
ALTER TABLE toolchains DROP CONSTRAINT toolchains_versions;
ALTER TABLE toolchains ADD CONSTRAINT toolchains_versions UNIQUE (tvm_version, tvm_ffi_version, llvm_version);

CREATE TABLE target_spellings (
    spelling     TEXT NOT NULL,
    toolchain_id BIGINT NOT NULL REFERENCES toolchains(id) ON DELETE CASCADE,
    target_id    BIGINT NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
    PRIMARY KEY (spelling, toolchain_id)
);
CREATE INDEX target_spellings_by_target ON target_spellings(target_id);
"#,
    },
];

/// The schema version of an open cache, file or server.
pub(crate) fn version(db: &Db) -> DbResult<i64> {
    match db.lite() {
        Some(c) => Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?),
        None => server_version(db),
    }
}

/// The version of a server's schema; 0 for a database without one.
pub(crate) fn server_version(db: &Db) -> DbResult<i64> {
    // Through pg_tables (a plain MVCC read), not to_regclass: the catalog cache of a
    // session that waited for the writers' lock may not have seen another session's
    // migration yet.
    let exists: i64 = db.one(
        "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'tgc_schema'",
        &[],
        |r| r.get(0),
    )?;
    if exists == 0 {
        return Ok(0);
    }
    db.one("SELECT version FROM tgc_schema", &[], |r| r.get(0))
}

/// A cache opened read-only must already have this binary's schema: it cannot migrate.
pub(crate) fn require_current(location: &Path, found: i64) -> Result<()> {
    if found > SCHEMA_VERSION {
        return Err(CacheError::SchemaTooNew {
            path: location.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found < SCHEMA_VERSION {
        return Err(CacheError::ReadOnly {
            location: location.to_path_buf(),
            detail: format!(
                "schema version {found} needs migrating to {SCHEMA_VERSION}; open it once with write access"
            ),
        });
    }
    Ok(())
}

/// Brings a server's cache up to [`PG_MIGRATIONS`]: one write transaction (the writers'
/// lock, so two machines opening an old cache at once migrate it once); a database that
/// holds other tables and no tgc schema is refused.
pub(crate) fn migrate_server(db: &Db, location: &Path) -> Result<()> {
    let supported = PG_MIGRATIONS.len() as i64;
    let check = |found: i64| {
        if found > supported {
            return Err(CacheError::SchemaTooNew {
                path: location.to_path_buf(),
                found,
                supported,
            });
        }
        Ok(())
    };
    let found = server_version(db).at(location)?;
    check(found)?;
    if found == supported {
        return Ok(());
    }
    let tx = db.begin_write().at(location)?;
    let found = server_version(&tx).at(location)?;
    check(found)?;
    if found == 0 {
        let tables: i64 = tx
            .one(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
                &[],
                |r| r.get(0),
            )
            .at(location)?;
        if tables > 0 {
            return Err(CacheError::Foreign {
                path: location.to_path_buf(),
                detail: format!("a database with {tables} tables and no tgc schema version"),
            });
        }
    }
    for step in &PG_MIGRATIONS[found as usize..] {
        tx.batch(step.sql).at(location)?;
    }
    tx.exec("UPDATE tgc_schema SET version = ?1", args![supported])
        .at(location)?;
    tx.commit().at(location)
}

/// Reads `PRAGMA user_version`.
pub fn user_version(conn: &Connection, path: &Path) -> Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .at(path)
}

/// Brings the cache at `path` up to the version of `migrations` (normally [`MIGRATIONS`]).
pub fn migrate(conn: &mut Connection, path: &Path, migrations: &[Migration]) -> Result<()> {
    let supported = migrations.len() as i64;
    let found = user_version(conn, path)?;
    if found > supported {
        return Err(CacheError::SchemaTooNew {
            path: path.to_path_buf(),
            found,
            supported,
        });
    }
    if found == supported {
        return Ok(());
    }
    // A step may rebuild a table that others reference (SQLite's procedure for changing a
    // constraint: create, copy, drop, rename), which foreign key enforcement would refuse
    // midway. Enforcement is off during the migration (the pragma is a no-op inside a
    // transaction, hence here), the result is checked before commit, and the setting is
    // restored whatever happens.
    let fk: bool = conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .at(path)?;
    if fk {
        conn.pragma_update(None, "foreign_keys", false).at(path)?;
    }
    let result = migrate_steps(conn, path, migrations, supported);
    if fk {
        let restored = conn.pragma_update(None, "foreign_keys", true).at(path);
        result.and(restored)
    } else {
        result
    }
}

fn migrate_steps(
    conn: &mut Connection,
    path: &Path,
    migrations: &[Migration],
    supported: i64,
) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .at(path)?;
    // Another process may have migrated while we waited for the write lock.
    let found = tx
        .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .at(path)?;
    if found > supported {
        return Err(CacheError::SchemaTooNew {
            path: path.to_path_buf(),
            found,
            supported,
        });
    }
    if found == 0 {
        // Version 0 must be an empty file: never build our schema inside someone else's database.
        let tables: i64 = tx
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .at(path)?;
        if tables > 0 {
            return Err(CacheError::Foreign {
                path: path.to_path_buf(),
                detail: format!(
                    "an SQLite database with {tables} tables and no tgc schema version"
                ),
            });
        }
    }
    for step in &migrations[found as usize..] {
        tx.execute_batch(step.sql).at(path)?;
    }
    let dangling: i64 = tx
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .at(path)?;
    if dangling > 0 {
        return Err(CacheError::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "migrating from schema version {found} would leave {dangling} rows referring to missing rows"
            ),
        });
    }
    tx.pragma_update(None, "user_version", supported).at(path)?;
    tx.commit().at(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &Path) -> Connection {
        Connection::open(path).unwrap()
    }

    #[test]
    fn fresh_database_gets_the_current_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let mut conn = open(&path);
        migrate(&mut conn, &path, MIGRATIONS).unwrap();
        assert_eq!(user_version(&conn, &path).unwrap(), SCHEMA_VERSION);
        // Idempotent.
        migrate(&mut conn, &path, MIGRATIONS).unwrap();
    }

    #[test]
    fn a_later_step_upgrades_an_old_cache_and_an_old_binary_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let mut conn = open(&path);
        migrate(&mut conn, &path, MIGRATIONS).unwrap();
        conn.execute(
            "INSERT INTO targets(kind, canonical_json) VALUES ('llvm', '{\"kind\":\"llvm\"}')",
            [],
        )
        .unwrap();
        let mut next: Vec<Migration> = MIGRATIONS
            .iter()
            .map(|m| Migration {
                description: m.description,
                sql: m.sql,
            })
            .collect();
        next.push(Migration {
            description: "add a note column",
            sql: "ALTER TABLE targets ADD COLUMN note TEXT;",
        });
        migrate(&mut conn, &path, &next).unwrap();
        assert_eq!(user_version(&conn, &path).unwrap(), SCHEMA_VERSION + 1);
        let n: i64 = conn
            .query_row("SELECT count(*) FROM targets WHERE note IS NULL", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 1);
        // The current binary now refuses the newer cache.
        let err = migrate(&mut conn, &path, MIGRATIONS).unwrap_err();
        assert!(
            matches!(err, CacheError::SchemaTooNew { found, supported, .. } if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
            "{err}"
        );
    }

    #[test]
    fn rebuilding_a_referenced_table_keeps_references_and_foreign_keys_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sqlite");
        let mut conn = open(&path);
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        migrate(&mut conn, &path, &MIGRATIONS[..1]).unwrap();
        conn.execute_batch(
            r#"INSERT INTO targets(id, kind, canonical_json) VALUES (1, 'llvm', '{"kind":"llvm"}');
               INSERT INTO toolchains(id, tvm_version, tvm_ffi_version) VALUES (5, '0.27.0.post1', '0.1.14.post1');
               INSERT INTO tasks(id, tvm_hash, workload_json) VALUES (1, '7', '{}');
               INSERT INTO traces(id, digest, trace_json) VALUES (1, zeroblob(32), '[[],[]]');
               INSERT INTO records(task_id, target_id, toolchain_id, trace_id, latencies_json, mean_latency,
                 num_samples, source, created_at) VALUES (1, 1, 5, 1, '[1]', 1, 1, 'tune', 0);"#,
        )
        .unwrap();
        migrate(&mut conn, &path, MIGRATIONS).unwrap();
        let fk: bool = conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert!(fk, "foreign keys are enforced again after the migration");
        let llvm: String = conn
            .query_row(
                "SELECT c.llvm_version FROM records r JOIN toolchains c ON c.id = r.toolchain_id",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(llvm, "22");
        // The rebuilt table is still the one records reference.
        assert!(conn
            .execute("DELETE FROM toolchains WHERE id = 5", [])
            .is_err());
        assert!(conn
            .execute(
                "INSERT INTO toolchains(tvm_version, tvm_ffi_version, llvm_version) VALUES ('0.27.0.post1', '0.1.14.post1', '21')",
                [],
            )
            .is_ok());
    }

    #[test]
    fn a_foreign_database_is_not_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.sqlite");
        let mut conn = open(&path);
        conn.execute_batch("CREATE TABLE t(x)").unwrap();
        let err = migrate(&mut conn, &path, MIGRATIONS).unwrap_err();
        assert!(err.to_string().contains("not a tgc cache"), "{err}");
    }
}
