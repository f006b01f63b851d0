//! A throwaway PostgreSQL server for tests and benchmarks: a fresh cluster in a temporary
//! directory, bound to 127.0.0.1 on a free port, run as an unprivileged user (PostgreSQL
//! refuses root: under root the server runs as the `postgres` account that Debian's
//! package creates), stopped and deleted on drop.
//!
//! The binaries come from `$TGC_PG_BIN`, else `PATH`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's layout). Password authentication is on for TCP:
//! the superuser `tgc` has the password [`ThrowawayServer::PASSWORD`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A running throwaway cluster.
pub struct ThrowawayServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// Run the server's programs as this user (`None`: as ourselves).
    run_as: Option<String>,
    next_db: std::cell::Cell<u32>,
}

fn find_bin() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("TGC_PG_BIN").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return Ok(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b).ok_or_else(|| {
        "PostgreSQL's server programs (initdb, pg_ctl) are not installed: apt-get install postgresql, or set TGC_PG_BIN".to_string()
    })
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The uid and gid of a local account.
fn account(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

impl ThrowawayServer {
    /// The superuser's password.
    pub const PASSWORD: &'static str = "tgc-throwaway-pw";

    /// Initializes and starts a cluster.
    pub fn start() -> Result<ThrowawayServer, String> {
        let bin = find_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("tgc-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let run_as = if is_root() {
            let (uid, gid) = account("postgres").ok_or(
                "running as root, and there is no 'postgres' account to run the server as",
            )?;
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(|e| format!("{}: {e}", dir.path().display()))?;
            Some("postgres".to_string())
        } else {
            None
        };
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, Self::PASSWORD).map_err(|e| e.to_string())?;
        if let Some(user) = &run_as {
            let (uid, gid) = account(user).unwrap_or((0, 0));
            let _ = std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid));
        }
        let server = ThrowawayServer {
            dir,
            bin,
            port: free_port()?,
            run_as,
            next_db: std::cell::Cell::new(0),
        };
        let data = server.data_dir();
        server.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap_or_default(),
                "-U",
                "tgc",
                "--pwfile",
                pwfile.to_str().unwrap_or_default(),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        server.pg_ctl_start()?;
        Ok(server)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(program);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let out = cmd
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{program} failed: {}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        Ok(())
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=100",
            self.port,
            self.dir.path().display()
        );
        let data = self.data_dir();
        let log = self.dir.path().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap_or_default(),
                "-l",
                log.to_str().unwrap_or_default(),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
    }

    fn pg_ctl_stop(&self, mode: &str) -> Result<(), String> {
        let data = self.data_dir();
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap_or_default(),
                "-m",
                mode,
                "-w",
                "stop",
            ],
        )
    }

    /// Stops the server (fast shutdown: sessions are terminated) and starts it again on
    /// the same port.
    pub fn restart(&self) -> Result<(), String> {
        self.pg_ctl_stop("fast")?;
        self.pg_ctl_start()
    }

    /// Stops the server without starting it again.
    pub fn stop(&self) -> Result<(), String> {
        self.pg_ctl_stop("fast")
    }

    /// Starts a stopped server again.
    pub fn start_again(&self) -> Result<(), String> {
        self.pg_ctl_start()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db` as user `user` with `password` (none: no password part).
    pub fn url_as(&self, user: &str, password: Option<&str>, db: &str) -> String {
        match password {
            Some(pw) => format!("postgres://{user}:{pw}@127.0.0.1:{}/{db}", self.port),
            None => format!("postgres://{user}@127.0.0.1:{}/{db}", self.port),
        }
    }

    /// Runs SQL as the superuser on database `db`.
    pub fn sql(&self, db: &str, sql: &str) -> Result<(), String> {
        let url = self.url_as("tgc", Some(Self::PASSWORD), db);
        let mut c = postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
        c.batch_execute(sql).map_err(|e| e.to_string())
    }

    /// Opens a session on database `db` that holds `LOCK TABLE table IN SHARE MODE` in an
    /// open transaction: every writer that reaches an insert into `table` waits there, in
    /// the middle of its own transaction, until this session ends (the returned client is
    /// dropped, or the server restarts).
    pub fn block_writes_to(&self, db: &str, table: &str) -> Result<postgres::Client, String> {
        let url = self.url_as("tgc", Some(Self::PASSWORD), db);
        let mut c = postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
        c.batch_execute(&format!("BEGIN; LOCK TABLE {table} IN SHARE MODE"))
            .map_err(|e| e.to_string())?;
        Ok(c)
    }

    /// Waits (up to `timeout`) until some session on database `db` waits for a lock.
    pub fn wait_for_a_blocked_session(
        &self,
        db: &str,
        timeout: std::time::Duration,
    ) -> Result<(), String> {
        let url = self.url_as("tgc", Some(Self::PASSWORD), "postgres");
        let mut c = postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
        let start = std::time::Instant::now();
        loop {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
                    &[&db],
                )
                .map_err(|e| e.to_string())?
                .get(0);
            if n > 0 {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "no session on {db} waited for a lock within {timeout:?}"
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Creates a fresh, empty database and returns the superuser's URL of it.
    pub fn new_database(&self) -> Result<String, String> {
        let n = self.next_db.get();
        self.next_db.set(n + 1);
        let name = format!("cache{n}");
        self.sql("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(self.url_as("tgc", Some(Self::PASSWORD), &name))
    }

    /// Creates a role `user` that may log in with `password` and only `SELECT` from the
    /// tables of database `db` as they are now (a CI job's reader); returns its URL.
    pub fn add_reader(&self, db: &str, user: &str, password: &str) -> Result<String, String> {
        self.sql(
            db,
            &format!(
                "CREATE ROLE {user} LOGIN PASSWORD '{password}';
                 GRANT SELECT ON ALL TABLES IN SCHEMA public TO {user};"
            ),
        )?;
        Ok(self.url_as(user, Some(password), db))
    }

    /// The server's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ThrowawayServer {
    fn drop(&mut self) {
        let _ = self.pg_ctl_stop("immediate");
    }
}
