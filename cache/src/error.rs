//! The errors of the cache. Every variant that concerns a file names it, so the CLI can print
//! one line that says which file and what is wrong with it.

use std::path::{Path, PathBuf};

/// An error of the task cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The file exists but is not an SQLite database (garbage, or a damaged header).
    #[error("{}: not a tgc cache (not an SQLite database, or its header is damaged)", path.display())]
    NotADatabase { path: PathBuf },
    /// SQLite found damaged pages (a truncated or overwritten file).
    #[error("{}: cache file is corrupt ({detail}); move it away or restore a backup", path.display())]
    Corrupt { path: PathBuf, detail: String },
    /// The cache was written by a newer tgc; we never downgrade a schema.
    #[error(
        "{}: cache schema version {found} is newer than this tgc supports ({supported}); use a newer tgc or another --cache",
        path.display()
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// The file is an SQLite database, but not one of ours (unknown tables, no version).
    #[error("{}: not a tgc cache ({detail})", path.display())]
    Foreign { path: PathBuf, detail: String },
    /// `open_existing` on a path that does not exist.
    #[error("{}: cache file does not exist", path.display())]
    Missing { path: PathBuf },
    /// Any other SQLite failure (locked past the busy timeout, disk full, read-only file...).
    #[error("{}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// A failure of the cache server (`location` is its URL without the password).
    #[error("{}: {detail}", location.display())]
    Server { location: PathBuf, detail: String },
    /// A write to a cache opened read-only, or by a role that may only read.
    #[error("{}: the cache is read-only here ({detail}); nothing was written", location.display())]
    ReadOnly { location: PathBuf, detail: String },
    /// The file system refused WAL journaling (e.g. a network file system).
    #[error("{}: cannot enable WAL journaling (journal mode stays '{mode}'); put the cache on a local disk", path.display())]
    NoWal { path: PathBuf, mode: String },
    /// A file system failure on a cache or database file.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A MetaSchedule database directory that cannot be imported at all (missing file).
    #[error("{}: {detail}", path.display())]
    MsDatabase { path: PathBuf, detail: String },
    /// A value handed to the cache API is malformed (bad target JSON, empty latencies...).
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    /// No default cache location: neither `$TGC_CACHE` nor a user cache directory.
    #[error("no cache location: set $TGC_CACHE or pass --cache PATH")]
    NoDefaultLocation,
}

pub type Result<T, E = CacheError> = std::result::Result<T, E>;

impl CacheError {
    /// Classifies an SQLite error on the cache at `path`.
    pub(crate) fn sqlite(path: &Path, e: rusqlite::Error) -> CacheError {
        use rusqlite::ErrorCode;
        match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => CacheError::NotADatabase {
                path: path.to_path_buf(),
            },
            Some(ErrorCode::DatabaseCorrupt) => CacheError::Corrupt {
                path: path.to_path_buf(),
                detail: e.to_string(),
            },
            _ => CacheError::Sqlite {
                path: path.to_path_buf(),
                source: e,
            },
        }
    }

    /// Classifies a server error on the cache at `location`.
    pub(crate) fn postgres(location: &Path, e: &postgres::Error) -> CacheError {
        match crate::server::sqlstate(e) {
            // insufficient_privilege, read_only_sql_transaction
            Some("42501") | Some("25006") => CacheError::ReadOnly {
                location: location.to_path_buf(),
                detail: crate::server::describe(e),
            },
            _ => CacheError::Server {
                location: location.to_path_buf(),
                detail: crate::server::describe(e),
            },
        }
    }

    /// Whether this error says the cache may not be written (the caller may go on reading).
    pub fn is_read_only(&self) -> bool {
        matches!(self, CacheError::ReadOnly { .. })
    }

    pub(crate) fn io(path: &Path, e: std::io::Error) -> CacheError {
        CacheError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    }

    pub(crate) fn invalid(what: &'static str, detail: impl Into<String>) -> CacheError {
        CacheError::Invalid {
            what,
            detail: detail.into(),
        }
    }
}

/// Attaches the cache path to SQLite results.
pub(crate) trait SqliteContext<T> {
    fn at(self, path: &Path) -> Result<T>;
}

impl<T> SqliteContext<T> for std::result::Result<T, crate::db::DbError> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|e| e.at(path))
    }
}

impl<T> SqliteContext<T> for std::result::Result<T, rusqlite::Error> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|e| CacheError::sqlite(path, e))
    }
}
