//! The connection under the cache: one SQL text for both backends, SQLite (a file) and
//! PostgreSQL (a server that many tuning machines share).
//!
//! Every query of the store, retrieval, verification and MetaSchedule import/export is
//! written once, in the SQL that both dialects accept (`ON CONFLICT ... RETURNING`, window
//! functions, `IS DISTINCT FROM`), with SQLite's numbered placeholders `?N`; the PostgreSQL
//! side rewrites them to `$N` once per statement and keeps the prepared statement. What
//! differs is only what cannot be shared: the DDL of the migrations, where the schema
//! version lives, and the pragmas and maintenance (WAL, VACUUM) of a file.
//!
//! Each backend implements [`Backend`] (statements, row streams, transaction bounds):
//! `rusqlite::Connection` for a file, [`crate::server::PgConn`] for a server. [`Db`] holds
//! one of them and gives the store its typed reads.
//!
//! Transactions: [`Db::begin_write`] serializes writers on both backends. SQLite takes its
//! write lock up front (`BEGIN IMMEDIATE`); PostgreSQL takes one transaction-scoped
//! advisory lock, so a write transaction of tgc sees the state the previous one committed,
//! as in SQLite, and best-k pruning can never race. Readers never wait for writers on
//! either (WAL; MVCC). A process killed mid-transaction leaves nothing of it behind on
//! either: SQLite rolls the journal back, the server aborts the session's transaction.

use crate::error::CacheError;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

/// The key of the advisory lock that every tgc write transaction on a server holds
/// ("tgc" in ASCII); other applications in the same database are not affected.
const WRITE_LOCK_KEY: i64 = 0x0074_6763;

/// A bound parameter.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<&'a str>),
    Blob(Option<&'a [u8]>),
}

/// What can be bound as a parameter.
pub(crate) trait Arg {
    fn arg(&self) -> Value<'_>;
}

macro_rules! impl_arg {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {
        $(impl Arg for $t {
            fn arg(&self) -> Value<'_> {
                let $v = self;
                $e
            }
        })*
    };
}

impl_arg! {
    i64 => |v| Value::Int(Some(*v)),
    Option<i64> => |v| Value::Int(*v),
    Option<u32> => |v| Value::Int(v.map(i64::from)),
    f64 => |v| Value::Real(Some(*v)),
    str => |v| Value::Text(Some(v)),
    String => |v| Value::Text(Some(v)),
    Option<String> => |v| Value::Text(v.as_deref()),
    Option<&str> => |v| Value::Text(*v),
    [u8] => |v| Value::Blob(Some(v)),
    Vec<u8> => |v| Value::Blob(Some(v)),
}

impl<T: Arg + ?Sized> Arg for &T {
    fn arg(&self) -> Value<'_> {
        (**self).arg()
    }
}

/// The parameters of one statement: `args![a, b, c]`.
macro_rules! args {
    ($($e:expr),* $(,)?) => {
        &[$($crate::db::Arg::arg(&$e)),*][..]
    };
}
pub(crate) use args;

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Value::Int(v) => v.to_sql(),
            Value::Real(v) => v.to_sql(),
            Value::Text(v) => v.to_sql(),
            Value::Blob(v) => v.to_sql(),
        }
    }
}

impl postgres::types::ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>>
    {
        use postgres::types::Type;
        match *self {
            Value::Int(v) if *ty == Type::INT4 => v.map(i32::try_from).transpose()?.to_sql(ty, out),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Real(v) => v.to_sql(ty, out),
            Value::Text(v) => v.to_sql(ty, out),
            Value::Blob(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// An error of either backend.
#[derive(Debug)]
pub(crate) enum DbError {
    Lite(rusqlite::Error),
    Pg(postgres::Error),
    /// A statement that must return a row returned none.
    NoRow,
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        DbError::Lite(e)
    }
}

impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> Self {
        DbError::Pg(e)
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Lite(e) => e.fmt(f),
            DbError::Pg(e) => f.write_str(&crate::server::describe(e)),
            DbError::NoRow => f.write_str("query returned no rows"),
        }
    }
}

pub(crate) type DbResult<T> = std::result::Result<T, DbError>;

impl DbError {
    /// The cache error of this failure on the cache at `location`.
    pub(crate) fn at(self, location: &Path) -> CacheError {
        match self {
            DbError::Lite(e) => CacheError::sqlite(location, e),
            DbError::Pg(e) => CacheError::postgres(location, &e),
            DbError::NoRow => CacheError::sqlite(location, rusqlite::Error::QueryReturnedNoRows),
        }
    }
}

/// One row of a result.
pub(crate) enum Row<'r> {
    Lite(&'r rusqlite::Row<'r>),
    Pg(&'r postgres::Row),
}

impl Row<'_> {
    /// Column `i` (from 0).
    pub(crate) fn get<T: Column>(&self, i: usize) -> DbResult<T> {
        match self {
            Row::Lite(r) => T::lite(r, i).map_err(DbError::Lite),
            Row::Pg(r) => T::pg(r, i).map_err(DbError::Pg),
        }
    }
}

/// A column type both backends decode. Integers of any width widen to `i64` (PostgreSQL
/// types `SELECT 1` as `int4`, `count(*)` as `int8`).
pub(crate) trait Column: Sized {
    fn lite(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Self>;
    fn pg(r: &postgres::Row, i: usize) -> std::result::Result<Self, postgres::Error>;
}

fn pg_int(r: &postgres::Row, i: usize) -> std::result::Result<Option<i64>, postgres::Error> {
    use postgres::types::Type;
    let ty = r.columns().get(i).map(|c| c.type_().clone());
    match ty {
        Some(Type::INT4) => Ok(r.try_get::<_, Option<i32>>(i)?.map(i64::from)),
        Some(Type::INT2) => Ok(r.try_get::<_, Option<i16>>(i)?.map(i64::from)),
        Some(Type::BOOL) => Ok(r.try_get::<_, Option<bool>>(i)?.map(i64::from)),
        _ => r.try_get::<_, Option<i64>>(i),
    }
}

impl Column for Option<i64> {
    fn lite(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &postgres::Row, i: usize) -> std::result::Result<Self, postgres::Error> {
        pg_int(r, i)
    }
}

impl Column for i64 {
    fn lite(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Self> {
        r.get(i)
    }
    fn pg(r: &postgres::Row, i: usize) -> std::result::Result<Self, postgres::Error> {
        match pg_int(r, i)? {
            Some(v) => Ok(v),
            // Let the driver produce its own "unexpected null" error.
            None => r.try_get::<_, i64>(i),
        }
    }
}

macro_rules! impl_column {
    ($($t:ty),*) => {
        $(impl Column for $t {
            fn lite(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Self> {
                r.get(i)
            }
            fn pg(r: &postgres::Row, i: usize) -> std::result::Result<Self, postgres::Error> {
                r.try_get(i)
            }
        })*
    };
}

impl_column!(f64, Option<f64>, String, Option<String>, Vec<u8>);

/// What each backend implements: statements, row streams and transaction bounds. The
/// store never sees more than this (and, for what only a file has, [`Backend::sqlite`]).
pub(crate) trait Backend: Send {
    /// Runs one statement; returns the rows it changed.
    fn exec(&self, sql: &str, args: &[Value]) -> DbResult<usize>;
    /// Hands the rows of a query to `f`, at most `max` of them.
    fn each_row(
        &self,
        sql: &str,
        args: &[Value],
        max: usize,
        f: &mut dyn FnMut(&Row) -> DbResult<()>,
    ) -> DbResult<()>;
    /// Several statements without parameters (DDL, maintenance).
    fn batch(&self, sql: &str) -> DbResult<()>;
    /// Opens a transaction: a snapshot for reading, or the one writer lock for writing.
    fn begin(&self, write: bool) -> DbResult<()>;
    /// Ends the open transaction.
    fn end(&self, commit: bool) -> DbResult<()>;
    /// The SQLite connection, for what only a file has (pragmas, integrity checks).
    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        None
    }
}

impl Backend for rusqlite::Connection {
    fn exec(&self, sql: &str, args: &[Value]) -> DbResult<usize> {
        Ok(self
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(args))?)
    }

    fn each_row(
        &self,
        sql: &str,
        args: &[Value],
        max: usize,
        f: &mut dyn FnMut(&Row) -> DbResult<()>,
    ) -> DbResult<()> {
        let mut stmt = self.prepare_cached(sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(args))?;
        for _ in 0..max {
            let Some(r) = rows.next()? else { break };
            f(&Row::Lite(r))?;
        }
        Ok(())
    }

    fn batch(&self, sql: &str) -> DbResult<()> {
        Ok(self.execute_batch(sql)?)
    }

    fn begin(&self, write: bool) -> DbResult<()> {
        self.batch(if write { "BEGIN IMMEDIATE" } else { "BEGIN" })
    }

    fn end(&self, commit: bool) -> DbResult<()> {
        self.batch(if commit { "COMMIT" } else { "ROLLBACK" })
    }

    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        Some(self)
    }
}

impl Backend for RefCell<crate::server::PgConn> {
    fn exec(&self, sql: &str, args: &[Value]) -> DbResult<usize> {
        self.borrow_mut().execute(sql, args)
    }

    fn each_row(
        &self,
        sql: &str,
        args: &[Value],
        max: usize,
        f: &mut dyn FnMut(&Row) -> DbResult<()>,
    ) -> DbResult<()> {
        let rows = self.borrow_mut().query(sql, args)?;
        for r in rows.iter().take(max) {
            f(&Row::Pg(r))?;
        }
        Ok(())
    }

    fn batch(&self, sql: &str) -> DbResult<()> {
        self.borrow_mut().batch(sql)
    }

    fn begin(&self, write: bool) -> DbResult<()> {
        let mut c = self.borrow_mut();
        if !write {
            return c.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        }
        c.begin("BEGIN")?;
        if let Err(e) = c.execute("SELECT pg_advisory_xact_lock(?1)", args![WRITE_LOCK_KEY]) {
            let _ = c.finish("ROLLBACK");
            return Err(e);
        }
        Ok(())
    }

    fn end(&self, commit: bool) -> DbResult<()> {
        self.borrow_mut()
            .finish(if commit { "COMMIT" } else { "ROLLBACK" })
    }
}

/// An open connection, to a file or a server, and the typed reads over [`Backend`].
pub(crate) struct Db {
    backend: Box<dyn Backend>,
    server: bool,
}

impl Db {
    pub(crate) fn file(conn: rusqlite::Connection) -> Db {
        Db {
            backend: Box::new(conn),
            server: false,
        }
    }

    pub(crate) fn server(conn: crate::server::PgConn) -> Db {
        Db {
            backend: Box::new(RefCell::new(conn)),
            server: true,
        }
    }

    pub(crate) fn is_server(&self) -> bool {
        self.server
    }

    /// Runs one statement; returns the rows it changed.
    pub(crate) fn exec(&self, sql: &str, args: &[Value]) -> DbResult<usize> {
        self.backend.exec(sql, args)
    }

    /// The rows of a query, each decoded by `f`, at most `max` of them.
    pub(crate) fn rows_at_most<T>(
        &self,
        sql: &str,
        args: &[Value],
        max: usize,
        mut f: impl FnMut(&Row) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let mut out = Vec::new();
        self.backend.each_row(sql, args, max, &mut |r| {
            out.push(f(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The rows of a query, each decoded by `f`.
    pub(crate) fn rows<T>(
        &self,
        sql: &str,
        args: &[Value],
        f: impl FnMut(&Row) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        self.rows_at_most(sql, args, usize::MAX, f)
    }

    /// The first row of a query, if any.
    pub(crate) fn opt<T>(
        &self,
        sql: &str,
        args: &[Value],
        f: impl FnMut(&Row) -> DbResult<T>,
    ) -> DbResult<Option<T>> {
        Ok(self.rows_at_most(sql, args, 1, f)?.pop())
    }

    /// The first row of a query, which must exist.
    pub(crate) fn one<T>(
        &self,
        sql: &str,
        args: &[Value],
        f: impl FnMut(&Row) -> DbResult<T>,
    ) -> DbResult<T> {
        self.opt(sql, args, f)?.ok_or(DbError::NoRow)
    }

    /// Several statements without parameters (DDL, maintenance).
    pub(crate) fn batch(&self, sql: &str) -> DbResult<()> {
        self.backend.batch(sql)
    }

    /// A read transaction: one consistent snapshot while others write.
    pub(crate) fn begin_read(&self) -> DbResult<Txn<'_>> {
        self.backend.begin(false)?;
        Ok(Txn {
            db: self,
            open: true,
        })
    }

    /// A write transaction that holds the one writer lock from its start.
    pub(crate) fn begin_write(&self) -> DbResult<Txn<'_>> {
        self.backend.begin(true)?;
        Ok(Txn {
            db: self,
            open: true,
        })
    }

    /// The SQLite connection, for what only a file has (pragmas, integrity checks).
    pub(crate) fn lite(&self) -> Option<&rusqlite::Connection> {
        self.backend.sqlite()
    }
}

/// An open transaction; rolled back when dropped without [`Txn::commit`].
pub(crate) struct Txn<'a> {
    db: &'a Db,
    open: bool,
}

impl Txn<'_> {
    pub(crate) fn commit(mut self) -> DbResult<()> {
        self.open = false;
        self.db.backend.end(true)
    }
}

impl std::ops::Deref for Txn<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.db
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.db.backend.end(false);
        }
    }
}

/// Statements of one SQL text for PostgreSQL: `?N` placeholders become `$N`.
pub(crate) fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// A map from SQL text to the server's prepared statement.
pub(crate) type Statements = HashMap<String, postgres::Statement>;

#[cfg(test)]
mod tests {
    use super::pg_sql;

    #[test]
    fn numbered_placeholders_become_dollars() {
        assert_eq!(
            pg_sql("SELECT a FROM t WHERE x = ?1 AND y IS DISTINCT FROM ?12"),
            "SELECT a FROM t WHERE x = $1 AND y IS DISTINCT FROM $12"
        );
        assert_eq!(pg_sql("SELECT '?' "), "SELECT '?' ");
    }
}
