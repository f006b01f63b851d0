//! Where a cache is: a SQLite file or a PostgreSQL server, as a user names it (`--cache
//! PATH|URL`, `$TGC_CACHE`, a Python `cache=`), parsed once.

use crate::error::{CacheError, Result};
use crate::server::is_server_url;
use std::fmt;
use std::path::{Path, PathBuf};

/// A cache's location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheLocation {
    /// A SQLite file (created on first use where the opener allows it).
    File(PathBuf),
    /// `postgres://...` or `postgresql://...`: a server (see [`crate::server`]).
    Server(String),
}

impl CacheLocation {
    /// What a user wrote: a server URL, else a file path.
    pub fn parse(text: impl AsRef<Path>) -> CacheLocation {
        let p = text.as_ref();
        match p.to_str() {
            Some(url) if is_server_url(p) => CacheLocation::Server(url.to_string()),
            _ => CacheLocation::File(p.to_path_buf()),
        }
    }

    /// The location given, else the default: `$TGC_CACHE` (a path or a URL), else
    /// `<user cache dir>/tgc/cache.sqlite` (`$XDG_CACHE_HOME` or `~/.cache` on Linux).
    pub fn or_default(given: Option<CacheLocation>) -> Result<CacheLocation> {
        match given {
            Some(l) => Ok(l),
            None => CacheLocation::default_location(),
        }
    }

    /// The default location (see [`CacheLocation::or_default`]).
    pub fn default_location() -> Result<CacheLocation> {
        if let Some(p) = std::env::var_os("TGC_CACHE").filter(|p| !p.is_empty()) {
            return Ok(CacheLocation::parse(PathBuf::from(p)));
        }
        dirs::cache_dir()
            .map(|d| CacheLocation::File(d.join("tgc").join("cache.sqlite")))
            .ok_or(CacheError::NoDefaultLocation)
    }

    pub fn is_server(&self) -> bool {
        matches!(self, CacheLocation::Server(_))
    }

    /// Whether there is a cache to open without creating one: a file that exists, or any
    /// server (whether it holds tgc's schema is known once connected).
    pub fn exists(&self) -> bool {
        match self {
            CacheLocation::File(p) => p.exists(),
            CacheLocation::Server(_) => true,
        }
    }

    /// The location as the cache's openers take it.
    pub fn as_path(&self) -> &Path {
        match self {
            CacheLocation::File(p) => p,
            CacheLocation::Server(url) => Path::new(url),
        }
    }
}

impl AsRef<Path> for CacheLocation {
    fn as_ref(&self) -> &Path {
        self.as_path()
    }
}

/// A file's path; a server's URL without its password.
impl fmt::Display for CacheLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheLocation::File(p) => write!(f, "{}", p.display()),
            CacheLocation::Server(url) => f.write_str(&crate::server::without_password(url)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_a_server_anything_else_a_file() {
        assert_eq!(
            CacheLocation::parse("postgres://me@db:5432/tgc"),
            CacheLocation::Server("postgres://me@db:5432/tgc".into())
        );
        assert!(CacheLocation::parse("postgresql://db/tgc").is_server());
        assert_eq!(
            CacheLocation::parse("cache.sqlite"),
            CacheLocation::File("cache.sqlite".into())
        );
        // a file named like a scheme without the slashes is a file
        assert!(!CacheLocation::parse("postgres:cache").is_server());
        assert!(CacheLocation::parse("postgres://db/tgc").exists());
        assert!(!CacheLocation::parse("/no/such/tgc/cache.sqlite").exists());
        let shown = CacheLocation::parse("postgres://me:secret@db:5432/tgc").to_string();
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("db") && shown.contains("tgc"), "{shown}");
    }
}
