//! A cache on a PostgreSQL server: the URL, where its credentials come from, the connection
//! and how its errors are told.
//!
//! `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` (or `postgresql://`, libpq's URI form). The
//! password comes from the URL, else `$PGPASSWORD`, else the password file (`$PGPASSFILE`,
//! else `~/.pgpass`, libpq's format). It is never part of what the cache shows: the
//! location in errors, reports and statistics is the URL rebuilt without it (user, hosts,
//! ports, database), and the server's own messages do not contain it.
//!
//! The connection is reopened at the next transaction or statement outside one when the
//! server dropped it (a restart): the write that was in flight fails with a clear error,
//! and a retry succeeds once the server is back.

use crate::db::{pg_sql, DbResult, Statements, Value};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// Whether a cache location names a server rather than a file.
pub fn is_server_url(location: &Path) -> bool {
    location
        .to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// The connection settings of a URL and the URL as shown (no password). Only a connection
/// needs the password from the environment or the password file: [`ServerUrl::with_password`].
pub(crate) struct ServerUrl {
    pub config: postgres::Config,
    pub shown: String,
}

impl ServerUrl {
    pub(crate) fn parse(
        url: &str,
        connect_timeout: Duration,
    ) -> std::result::Result<ServerUrl, String> {
        let mut config = postgres::Config::from_str(url).map_err(|e| {
            // The parser's message may quote the URL; name the problem without it.
            format!(
                "not a valid PostgreSQL URL ({})",
                strip_secret(&e.to_string(), url)
            )
        })?;
        if config.get_user().is_none() {
            let user = std::env::var("PGUSER")
                .or_else(|_| std::env::var("USER"))
                .unwrap_or_else(|_| "postgres".into());
            config.user(&user);
        }
        if config.get_dbname().is_none() {
            let db = config.get_user().unwrap_or("postgres").to_string();
            config.dbname(&db);
        }
        if config.get_hosts().is_empty() {
            config.host("localhost");
        }
        config.connect_timeout(connect_timeout);
        config.application_name("tgc");
        let shown = shown_url(&config);
        Ok(ServerUrl { config, shown })
    }

    /// Fills in the password, when the URL has none, from `$PGPASSWORD`, else the password
    /// file.
    pub(crate) fn with_password(mut self) -> ServerUrl {
        if self.config.get_password().is_none() {
            if let Some(pw) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
                self.config.password(pw.as_encoded_bytes());
            } else if let Some(pw) = password_from_file(&self.config) {
                self.config.password(pw);
            }
        }
        self
    }
}

/// `url` as shown: scheme, user, hosts with ports, database; never a password or options.
fn shown_url(c: &postgres::Config) -> String {
    let user = c.get_user().unwrap_or("");
    let ports = c.get_ports();
    let hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                postgres::config::Host::Tcp(s) => s.clone(),
                postgres::config::Host::Unix(p) => p.display().to_string(),
            };
            match ports.get(i).or(ports.first()) {
                Some(p) => format!("{host}:{p}"),
                None => host,
            }
        })
        .collect();
    format!(
        "postgres://{user}@{}/{}",
        hosts.join(","),
        c.get_dbname().unwrap_or("")
    )
}

/// `url` as it may be shown: the URL rebuilt without its password when it parses, else
/// with the password masked.
pub fn without_password(url: &str) -> String {
    match postgres::Config::from_str(url) {
        Ok(c) => shown_url(&c),
        Err(_) => strip_secret(url, url),
    }
}

/// Removes the password part of `url` (if any) from a message that may quote it.
fn strip_secret(msg: &str, url: &str) -> String {
    let Some(rest) = url.split_once("://").map(|(_, r)| r) else {
        return msg.to_string();
    };
    let userinfo = rest.split(['@', '/']).next().unwrap_or("");
    let mut out = msg.to_string();
    if rest.contains('@') {
        if let Some((_, pw)) = userinfo.split_once(':') {
            if !pw.is_empty() {
                out = out.replace(pw, "***");
            }
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        for kv in query.split('&') {
            if let Some(("password", pw)) = kv.split_once('=') {
                if !pw.is_empty() {
                    out = out.replace(pw, "***");
                }
            }
        }
    }
    out
}

/// The password for `c` in the password file (`$PGPASSFILE`, else `~/.pgpass`): the first
/// line `host:port:database:user:password` whose fields match (`*` matches anything; `\`
/// escapes `:` and `\`). A file readable by others is ignored, as libpq does.
fn password_from_file(c: &postgres::Config) -> Option<String> {
    let path = match std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => dirs::home_dir()?.join(".pgpass"),
    };
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "tgc: warning: {}: ignored, it is readable by group or others (chmod 0600 it)",
                path.display()
            );
            return None;
        }
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let host = match c.get_hosts().first()? {
        postgres::config::Host::Tcp(h) => h.clone(),
        postgres::config::Host::Unix(_) => "localhost".into(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432).to_string();
    let want = [
        host.as_str(),
        port.as_str(),
        c.get_dbname().unwrap_or(""),
        c.get_user().unwrap_or(""),
    ];
    pgpass_lookup(&text, &want)
}

/// The password of the first line of a password file whose first four fields match `want`.
pub(crate) fn pgpass_lookup(text: &str, want: &[&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut fields = Vec::with_capacity(5);
        let mut cur = String::new();
        let mut chars = line.chars();
        while let Some(ch) = chars.next() {
            match ch {
                '\\' => cur.extend(chars.next()),
                ':' if fields.len() < 4 => fields.push(std::mem::take(&mut cur)),
                _ => cur.push(ch),
            }
        }
        fields.push(cur);
        if fields.len() != 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(want)
            .all(|(f, w)| f == "*" || f == w)
        {
            return fields.pop();
        }
    }
    None
}

/// A server's message, without any of the client's own settings.
pub(crate) fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("server: {} ({})", db.message(), db.code().code());
    }
    if e.is_closed() {
        return "the connection to the cache server was lost (server restarted or unreachable); retry".into();
    }
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

/// The SQLSTATE of a server error, if it is one.
pub(crate) fn sqlstate(e: &postgres::Error) -> Option<&str> {
    e.code().map(|c| c.code())
}

/// One connection to the cache server with its prepared statements.
pub(crate) struct PgConn {
    client: postgres::Client,
    config: postgres::Config,
    statements: Statements,
    read_only: bool,
    in_transaction: bool,
}

impl PgConn {
    pub(crate) fn connect(config: postgres::Config, read_only: bool) -> DbResult<PgConn> {
        let client = Self::open(&config, read_only)?;
        Ok(PgConn {
            client,
            config,
            statements: Statements::new(),
            read_only,
            in_transaction: false,
        })
    }

    fn open(config: &postgres::Config, read_only: bool) -> DbResult<postgres::Client> {
        let mut client = config.connect(postgres::NoTls)?;
        // Sessions of one cache agree on the wire format of numbers and text.
        client.batch_execute("SET client_min_messages = warning; SET TIME ZONE 'UTC'")?;
        if read_only {
            client.batch_execute("SET default_transaction_read_only = on")?;
        }
        Ok(client)
    }

    /// Reconnects when the server dropped the connection, unless a transaction was open
    /// (its statements are gone: the caller must see the error, not a silent half).
    fn ensure_open(&mut self) -> DbResult<()> {
        if self.client.is_closed() && !self.in_transaction {
            self.client = Self::open(&self.config, self.read_only)?;
            self.statements.clear();
        }
        Ok(())
    }

    fn statement(&mut self, sql: &str) -> DbResult<postgres::Statement> {
        self.ensure_open()?;
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(&pg_sql(sql))?;
        self.statements.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    fn params<'v>(args: &'v [Value<'v>]) -> Vec<&'v (dyn postgres::types::ToSql + Sync)> {
        args.iter()
            .map(|a| a as &(dyn postgres::types::ToSql + Sync))
            .collect()
    }

    pub(crate) fn execute(&mut self, sql: &str, args: &[Value]) -> DbResult<usize> {
        let s = self.statement(sql)?;
        Ok(self.client.execute(&s, &Self::params(args))? as usize)
    }

    pub(crate) fn query(&mut self, sql: &str, args: &[Value]) -> DbResult<Vec<postgres::Row>> {
        let s = self.statement(sql)?;
        Ok(self.client.query(&s, &Self::params(args))?)
    }

    pub(crate) fn batch(&mut self, sql: &str) -> DbResult<()> {
        self.ensure_open()?;
        Ok(self.client.batch_execute(sql)?)
    }

    pub(crate) fn begin(&mut self, sql: &str) -> DbResult<()> {
        self.ensure_open()?;
        self.client.batch_execute(sql)?;
        self.in_transaction = true;
        Ok(())
    }

    pub(crate) fn finish(&mut self, sql: &str) -> DbResult<()> {
        self.in_transaction = false;
        Ok(self.client.batch_execute(sql)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_url_has_no_password() {
        let u = ServerUrl::parse(
            "postgres://tgc:s3cret@db.example:6543/cache?sslmode=disable",
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(u.shown, "postgres://tgc@db.example:6543/cache");
        let u = u.with_password();
        assert_eq!(u.config.get_password(), Some(&b"s3cret"[..]));
        let err = ServerUrl::parse(
            "postgres://tgc:s3cret@host:notaport/db",
            Duration::from_secs(1),
        )
        .err()
        .unwrap();
        assert!(!err.contains("s3cret"), "{err}");
        assert!(err.contains("not a valid PostgreSQL URL"), "{err}");
    }

    #[test]
    fn password_file_lines_match_field_by_field() {
        let text =
            "# comment\nother:5432:*:tgc:wrong\nlocalhost:5433:cache:tgc:a\\:b\n*:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(text, &["localhost", "5433", "cache", "tgc"]).as_deref(),
            Some("a:b")
        );
        assert_eq!(
            pgpass_lookup(text, &["elsewhere", "1", "x", "y"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("h:1:d:u\n", &["h", "1", "d", "u"]), None);
    }
}
