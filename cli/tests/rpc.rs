//! `tgc tune --rpc`: a small two-task model tuned through a real TVM RPC tracker and two
//! real device servers on loopback, started with TVM's own entry points
//! (`python -m tvm.exec.rpc_tracker`, `python -m tvm.exec.rpc_server`). One server is
//! killed while it measures; the run must finish on the other, count the failed
//! measurements, and write back every record it re-measured, under a target that names the
//! device key. Bad `--rpc` input and an unreachable tracker are one-line errors.
//!
//! Everything the test starts runs in a process group of its own and is killed with it when
//! the guard drops, also when an assertion panics.
//!
//! Needs the pinned TVM venv (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh` creates it).

use serde_json::Value;
use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const MODEL: &str = r#"module @small {
  func @main(%x: tensor<1x8x16x16xf32>, %w1: tensor<8x8x3x3xf32>, %w2: tensor<8x8x3x3xf32>) -> tensor<1x8x16x16xf32> {
    %0 = nn.conv2d(%x, %w1) {padding = [1, 1, 1, 1]} : tensor<1x8x16x16xf32>
    %1 = nn.relu(%0) : tensor<1x8x16x16xf32>
    %2 = nn.conv2d(%1, %w2) {padding = [1, 1, 1, 1]} : tensor<1x8x16x16xf32>
    %3 = add(%2, %x) : tensor<1x8x16x16xf32>
    %4 = nn.relu(%3) : tensor<1x8x16x16xf32>
    return %4
  }
}
"#;

/// A port nothing listens on now (the OS picks it; a race with another process shows as a
/// tracker that fails to bind, and `Cluster::start` tries another).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Kills a process group (the leader's pid): a TVM tracker or server runs its work in
/// child processes (popen workers, one per session), which a kill of the leader alone
/// would leave running.
fn kill_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .stderr(Stdio::null())
        .status();
}

/// The tracker and the servers, killed (whole process groups) on drop.
struct Cluster {
    python: PathBuf,
    dir: PathBuf,
    key: String,
    tracker: Option<Child>,
    port: u16,
    servers: Vec<(Child, PathBuf)>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (child, _) in &mut self.servers {
            kill_group(child.id());
            let _ = child.wait();
        }
        if let Some(t) = &mut self.tracker {
            kill_group(t.id());
            let _ = t.wait();
        }
    }
}

impl Cluster {
    fn spawn(&self, args: &[&str], log: &Path) -> Child {
        let out = fs::File::create(log).expect("log file");
        Command::new(&self.python)
            .arg("-m")
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .process_group(0)
            .spawn()
            .expect("python starts")
    }

    /// A tracker on a free loopback port.
    fn start(python: PathBuf, dir: &Path, key: &str) -> Cluster {
        let mut c = Cluster {
            python,
            dir: dir.to_path_buf(),
            key: key.to_string(),
            tracker: None,
            port: 0,
            servers: Vec::new(),
        };
        for attempt in 0..5 {
            let port = free_port();
            let log = dir.join(format!("tracker-{attempt}.log"));
            let (p, end) = (port.to_string(), (port + 1).to_string());
            let mut child = c.spawn(
                &[
                    "tvm.exec.rpc_tracker",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &p,
                    "--port-end",
                    &end,
                ],
                &log,
            );
            let bound = format!("bind to 127.0.0.1:{port}");
            let ok = wait_for(Duration::from_secs(30), || {
                fs::read_to_string(&log).is_ok_and(|t| t.contains(&bound))
                    || child.try_wait().ok().flatten().is_some()
            }) && fs::read_to_string(&log).is_ok_and(|t| t.contains(&bound));
            if ok {
                c.tracker = Some(child);
                c.port = port;
                return c;
            }
            kill_group(child.id());
            let _ = child.wait();
        }
        panic!("the RPC tracker did not start; logs in {}", dir.display());
    }

    /// A device server registered under the key; returns its index.
    fn add_server(&mut self) -> usize {
        let i = self.servers.len();
        let log = self.dir.join(format!("server-{i}.log"));
        let base = free_port();
        let tracker = format!("127.0.0.1:{}", self.port);
        let (p, end) = (base.to_string(), base.saturating_add(100).to_string());
        let child = self.spawn(
            &[
                "tvm.exec.rpc_server",
                "--tracker",
                &tracker,
                "--key",
                &self.key,
                "--host",
                "127.0.0.1",
                "--port",
                &p,
                "--port-end",
                &end,
            ],
            &log,
        );
        self.servers.push((child, log));
        i
    }

    /// Servers free under the key, as the tracker's summary says (TVM's own client).
    fn free(&self) -> u64 {
        let script = format!(
            "from tvm import rpc; q = rpc.connect_tracker('127.0.0.1', {}).summary()['queue_info']; print(q.get({:?}, {{}}).get('free', 0))",
            self.port, self.key
        );
        let out = Command::new(&self.python)
            .args(["-c", &script])
            .output()
            .expect("python runs");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    }

    /// How many modules server `i` has loaded for its clients (its log's "load_module"
    /// lines): one per measuring session, logged after the session's handshake and upload
    /// and before its timing runs.
    fn modules_loaded(&self, i: usize) -> usize {
        fs::read_to_string(&self.servers[i].1)
            .map(|t| t.matches("load_module").count())
            .unwrap_or(0)
    }

    /// SIGKILL server `i` and the session process it forked: the device drops out.
    fn kill_server(&mut self, i: usize) {
        let child = &mut self.servers[i].0;
        kill_group(child.id());
        let _ = child.wait();
    }
}

fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tgc-rpc-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn tgc_tune(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tgc"));
    cmd.arg("tune")
        .arg(dir.join("small.tgc"))
        .arg("--cache")
        .arg(dir.join("cache.sqlite"))
        .args(["--target", r#"{"kind": "llvm", "num-cores": 2}"#])
        .args(extra);
    cmd
}

/// The one line of a failed `tgc tune`.
fn error_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    lines[0].to_string()
}

#[test]
fn a_device_that_drops_out_mid_run_fails_its_candidates_and_the_run_goes_on() {
    let dir = scratch("tune");
    fs::write(dir.join("small.tgc"), MODEL).expect("model written");
    let python = tgc_tvm::find_python().expect("the pinned TVM venv");
    let key = format!("tgc-rpc-test-{}", std::process::id());
    let mut cluster = Cluster::start(python, &dir, &key);
    cluster.add_server();
    cluster.add_server();
    assert!(
        wait_for(Duration::from_secs(60), || cluster.free() >= 2),
        "two servers did not register; logs in {}",
        dir.display()
    );

    let work = dir.join("work");
    let report = dir.join("report.json");
    let tracker = format!("127.0.0.1:{}", cluster.port);
    let run = tgc_tune(
        &dir,
        &[
            "--trials-per-task",
            "8",
            "--trials-per-round",
            "4",
            "--population",
            "32",
            "--rpc",
            &tracker,
            "--rpc-key",
            &key,
            "--rpc-sessions",
            "2",
        ],
    )
    .arg("--report")
    .arg(&report)
    .arg("--work-dir")
    .arg(&work)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("tgc runs");
    // Server 1 dies inside its second session, between loading the candidate and timing
    // it (at least 100 ms of timing runs; the log is polled every 10 ms): that candidate
    // fails, and what its first session measured must survive. (A kill before the session's
    // handshake is not a failure: TVM's tracker client asks for another device.)
    let in_session = wait_for(Duration::from_secs(300), || cluster.modules_loaded(1) >= 2);
    cluster.kill_server(1);
    let out = run.wait_with_output().expect("tgc finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        in_session,
        "server 1 never loaded a second candidate; logs in {}",
        dir.display()
    );
    assert!(
        out.status.success(),
        "tgc tune failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );

    let r: Value = serde_json::from_str(&fs::read_to_string(&report).expect("report written"))
        .expect("JSON report");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let written = the_lost_candidate_is_counted(&r, &stdout, &stderr, &tracker, &key);
    the_cache_holds_every_record_under_the_device(&dir, &key, written);
}

/// The report of a run on two devices, one of them lost: where it was measured, the
/// device in the target, every re-measured record written, the failures counted and
/// named. Returns the records written.
fn the_lost_candidate_is_counted(
    r: &Value,
    stdout: &str,
    stderr: &str,
    tracker: &str,
    key: &str,
) -> u64 {
    let on = &r["measured_on"];
    assert_eq!(on["kind"], "rpc", "{on}");
    assert_eq!(on["tracker"], tracker);
    assert_eq!(on["key"], key);
    assert_eq!(on["sessions"], 2);
    assert_eq!(on["devices_at_start"]["free"], 2, "{on}");
    // The device's identity is in the target, so in the cache's key.
    assert_eq!(r["target"]["tag"], format!("rpc:{key}"), "{}", r["target"]);
    assert_eq!(r["target_spelling"]["tag"], format!("rpc:{key}"));
    assert!(r["end_to_end"].is_null(), "not timed on this host");
    assert!(
        stderr.contains("--rpc: the whole model is not timed"),
        "{stderr}"
    );

    let tasks = r["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 2);
    let mut failed = 0;
    let mut written = 0;
    for t in tasks {
        assert_eq!(t["trials"], 8, "{t}");
        assert!(t["best_latency_s"].as_f64().unwrap() > 0.0, "{t}");
        // every record the worker re-measured is in the cache: nothing measured is lost
        let rem = t["records_remeasured"].as_u64().unwrap();
        assert!(rem >= 1, "{t}");
        assert_eq!(t["records_written"].as_u64().unwrap(), rem, "{t}");
        written += rem;
        let f = t["failed_runs"].as_u64().unwrap();
        let errors = t["run_errors"].as_array().expect("run_errors");
        assert_eq!(f == 0, errors.is_empty(), "{t}");
        for e in errors {
            assert!(e.as_str().unwrap().contains("RemoteRunner"), "{e}");
        }
        failed += f;
    }
    assert!(failed >= 1, "the lost device's candidate is counted: {r}");
    assert_eq!(r["totals"]["failed_runs"], failed);
    assert!(
        stderr.contains("measurements failed (first: RemoteRunner"),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "measured on the devices under key {key:?} at RPC tracker {tracker}, 2 at once; {failed} measurements failed"
        )),
        "{stdout}"
    );
    written
}

/// The cache holds exactly the run's `written` records, all under the device's target.
fn the_cache_holds_every_record_under_the_device(dir: &Path, key: &str, written: u64) {
    let stats = Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(["cache", "stats", "--json", "--cache"])
        .arg(dir.join("cache.sqlite"))
        .output()
        .expect("tgc runs");
    assert!(stats.status.success(), "{stats:?}");
    let s: Value = serde_json::from_slice(&stats.stdout).expect("stats JSON");
    let text = s.to_string();
    assert!(text.contains(&format!("rpc:{key}")), "{text}");
    let records: u64 = s["records"].as_u64().expect("records");
    assert_eq!(records, written, "{text}");
}

#[test]
fn bad_rpc_input_is_one_line_naming_the_problem() {
    let dir = scratch("errors");
    fs::write(dir.join("small.tgc"), MODEL).expect("model written");
    let nowhere = format!("127.0.0.1:{}", free_port());
    for (args, needle) in [
        (
            vec!["--rpc", "localhost", "--rpc-key", "k"],
            "--rpc \"localhost\": expected HOST:PORT".to_string(),
        ),
        (
            vec!["--rpc", "127.0.0.1:0", "--rpc-key", "k"],
            "the port must be a number in 1..=65535".into(),
        ),
        (
            vec!["--rpc", "127.0.0.1:9190"],
            "--rpc needs --rpc-key".into(),
        ),
        (
            vec!["--rpc-key", "k"],
            "--rpc-key needs --rpc HOST:PORT".into(),
        ),
        (
            vec!["--rpc-sessions", "2"],
            "--rpc-sessions needs --rpc".into(),
        ),
        (
            vec!["--rpc", "127.0.0.1:9190", "--rpc-key", "a b"],
            "without spaces or commas".into(),
        ),
        (
            vec![
                "--rpc",
                "127.0.0.1:9190",
                "--rpc-key",
                "k",
                "--rpc-sessions",
                "0",
            ],
            "--rpc-sessions 0: must be between 1 and 1024".into(),
        ),
        // nothing listens there: the worker says so at once, before any task
        (
            vec!["--rpc", &nowhere, "--rpc-key", "k"],
            format!("--rpc: RPC tracker {nowhere}: cannot connect"),
        ),
    ] {
        let out = tgc_tune(&dir, &args)
            .arg("--work-dir")
            .arg(dir.join("work"))
            .output()
            .expect("tgc runs");
        let line = error_line(&out);
        assert!(line.contains(&needle), "{args:?}: {line}");
    }
}

#[test]
fn a_key_no_device_registered_under_is_one_line() {
    let dir = scratch("nokey");
    fs::write(dir.join("small.tgc"), MODEL).expect("model written");
    let python = tgc_tvm::find_python().expect("the pinned TVM venv");
    let cluster = Cluster::start(python, &dir, "unused");
    let tracker = format!("127.0.0.1:{}", cluster.port);
    let out = tgc_tune(&dir, &["--rpc", &tracker, "--rpc-key", "nobody"])
        .arg("--work-dir")
        .arg(dir.join("work"))
        .output()
        .expect("tgc runs");
    let line = error_line(&out);
    assert!(
        line.contains(&format!(
            "--rpc {tracker}: no device is registered under the key \"nobody\" (the tracker's keys: none)"
        )),
        "{line}"
    );
}
