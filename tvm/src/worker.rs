//! The worker process: start, request/response with timeouts, and clean shutdown.
//!
//! Nothing here may hang a tuning job: responses are read on a thread and waited for with a
//! timeout; a worker that times out is killed; a worker that dies (EOF on its stdout) is
//! reported with its exit status and the last lines of its log.

use serde_json::{json, Value};
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// The protocol version this client speaks.
pub const PROTOCOL: u64 = 2;

/// A failure of the bridge: the worker's own error response, or a failure to run it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct BridgeError {
    /// The worker's error kind (`tvm`, `bad_task`, ...) or `worker` for process failures.
    pub kind: String,
    pub message: String,
    pub task: Option<String>,
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.task {
            Some(t) => write!(f, "task {t}: {} ({})", self.message, self.kind),
            None => write!(f, "{} ({})", self.message, self.kind),
        }
    }
}

fn worker_error(message: impl Into<String>, task: Option<&str>) -> BridgeError {
    BridgeError {
        kind: "worker".into(),
        message: message.into(),
        task: task.map(str::to_string),
    }
}

/// Where the worker package lives: `$TGC_TVM_PYTHONPATH`, else `tvm/python` of this source
/// tree.
pub fn worker_dir() -> PathBuf {
    match std::env::var_os("TGC_TVM_PYTHONPATH") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("python"),
    }
}

/// The pinned TVM venv's python: `$TGC_PYTHON`, else the one `tvm/python/bootstrap.sh`
/// creates (on first use; about a minute) and prints.
pub fn find_python() -> Result<PathBuf, BridgeError> {
    if let Some(p) = std::env::var_os("TGC_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let script = worker_dir().join("bootstrap.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| worker_error(format!("{}: cannot run: {e}", script.display()), None))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr.lines().last().unwrap_or("failed");
        return Err(worker_error(format!("{}: {why}", script.display()), None));
    }
    stdout
        .lines()
        .last()
        .map(|l| PathBuf::from(l.trim()))
        .ok_or_else(|| {
            worker_error(
                format!("{}: printed no python path", script.display()),
                None,
            )
        })
}

/// How to run the worker.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The venv python; `None` finds it with [`find_python`].
    pub python: Option<PathBuf>,
    /// Where the worker's stderr (TVM's and MetaSchedule's logs) goes.
    pub log: PathBuf,
    /// Longest wait for `hello`, `lower`, `replay` and `sample`.
    pub quick_timeout: Duration,
    /// Longest wait for `tune` and `build_and_measure`.
    pub long_timeout: Duration,
}

impl WorkerConfig {
    pub fn new(log: impl Into<PathBuf>) -> Self {
        WorkerConfig {
            python: None,
            log: log.into(),
            quick_timeout: Duration::from_secs(300),
            long_timeout: Duration::from_secs(6 * 3600),
        }
    }
}

/// The software versions the worker's TVM reports in `hello`: what records it measures are
/// keyed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    pub tvm: String,
    pub tvm_ffi: String,
    /// TVM's `llvm_version_major()`; `None` for a TVM built without LLVM.
    pub llvm: Option<String>,
}

impl Versions {
    fn from_hello(hello: &Value) -> Result<Versions, BridgeError> {
        let text = |k: &str| {
            hello[k]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    worker_error(
                        format!(
                            "the worker's hello has no '{k}' version string: {}",
                            hello[k]
                        ),
                        None,
                    )
                })
        };
        let llvm = match hello.get("llvm") {
            Some(Value::Null) => None,
            Some(Value::String(v)) if !v.is_empty() => Some(v.clone()),
            _ => {
                return Err(worker_error(
                    format!(
                        "the worker's hello does not report its LLVM version (got {}); is {} this tgc's worker?",
                        hello.get("llvm").unwrap_or(&Value::Null),
                        worker_dir().display()
                    ),
                    None,
                ))
            }
        };
        Ok(Versions {
            tvm: text("tvm")?,
            tvm_ffi: text("tvm_ffi")?,
            llvm,
        })
    }
}

/// A running worker.
pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
    config: WorkerConfig,
    /// The worker's `hello` answer.
    pub hello: Value,
    versions: Versions,
}

impl Worker {
    /// Starts the worker and checks its protocol version.
    pub fn start(config: WorkerConfig) -> Result<Worker, BridgeError> {
        let python = match &config.python {
            Some(p) => p.clone(),
            None => find_python()?,
        };
        if let Some(dir) = config.log.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                worker_error(format!("{}: cannot create: {e}", dir.display()), None)
            })?;
        }
        let log = std::fs::File::create(&config.log).map_err(|e| {
            worker_error(
                format!("{}: cannot create: {e}", config.log.display()),
                None,
            )
        })?;
        let mut child = Command::new(&python)
            .args(["-m", "tgc_worker"])
            .env("PYTHONPATH", worker_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                worker_error(
                    format!("{}: cannot start the worker: {e}", python.display()),
                    None,
                )
            })?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| worker_error("worker has no stdin", None))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| worker_error("worker has no stdout", None))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut w = Worker {
            child,
            stdin,
            lines,
            next_id: 0,
            config,
            hello: Value::Null,
            versions: Versions {
                tvm: String::new(),
                tvm_ffi: String::new(),
                llvm: None,
            },
        };
        let hello = w.call("hello", json!({}), None)?;
        if hello["protocol"].as_u64() != Some(PROTOCOL) {
            return Err(worker_error(
                format!(
                    "worker speaks protocol {}, this tgc speaks {PROTOCOL}",
                    hello["protocol"]
                ),
                None,
            ));
        }
        w.versions = Versions::from_hello(&hello)?;
        w.hello = hello;
        Ok(w)
    }

    /// The TVM, tvm-ffi and LLVM versions the worker reported.
    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// TVM's canonical form of a target config (the worker's `target` method:
    /// `Target.export()` of the target every method would build from it, keys sorted): two
    /// spellings of one target give equal JSON.
    pub fn canonical_target(&mut self, target: &Value) -> Result<Value, BridgeError> {
        let r = self.call("target", json!({ "target": target }), None)?;
        match r.get("canonical") {
            Some(c) if c.get("kind").is_some_and(Value::is_string) => Ok(c.clone()),
            _ => Err(worker_error(
                format!("the worker's 'target' answer has no canonical config with a kind: {r}"),
                None,
            )),
        }
    }

    /// The last lines of the worker's log, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.config.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }

    /// Sends one request and waits for its response. `task` names the task for errors.
    pub fn call(
        &mut self,
        method: &str,
        params: Value,
        task: Option<&str>,
    ) -> Result<Value, BridgeError> {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({ "v": PROTOCOL, "id": id, "method": method, "params": params });
        let mut line = serde_json::to_string(&request).expect("JSON values serialize");
        line.push('\n');
        if let Err(e) = self
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
        {
            return Err(self.died(method, task, &format!("cannot write to the worker: {e}")));
        }
        let timeout = match method {
            "tune" | "build_and_measure" => self.config.long_timeout,
            _ => self.config.quick_timeout,
        };
        let reply = match self.lines.recv_timeout(timeout) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(worker_error(
                    format!(
                        "worker gave no answer to '{method}' within {} s and was stopped",
                        timeout.as_secs()
                    ),
                    task,
                ));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(self.died(method, task, "worker exited"))
            }
        };
        let response: Value = serde_json::from_str(&reply).map_err(|e| {
            worker_error(
                format!("worker sent a line that is not JSON ({e}) in answer to '{method}'"),
                task,
            )
        })?;
        if response["id"].as_u64() != Some(id) {
            return Err(worker_error(
                format!(
                    "worker answered request {} while {id} was pending",
                    response["id"]
                ),
                task,
            ));
        }
        if let Some(err) = response.get("error") {
            return Err(BridgeError {
                kind: err["kind"].as_str().unwrap_or("unknown").to_string(),
                message: err["message"].as_str().unwrap_or("no message").to_string(),
                task: err["task"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| task.map(str::to_string)),
            });
        }
        Ok(response.get("result").cloned().unwrap_or(Value::Null))
    }

    fn died(&mut self, method: &str, task: Option<&str>, what: &str) -> BridgeError {
        let status = match self.child.wait() {
            Ok(s) => s.to_string(),
            Err(e) => format!("unknown status: {e}"),
        };
        worker_error(
            format!(
                "{what} during '{method}' ({status}); log {}: {}",
                self.config.log.display(),
                self.log_tail()
            ),
            task,
        )
    }

    /// Asks the worker to exit and waits for it.
    pub fn shutdown(mut self) -> Result<(), BridgeError> {
        let result = self.call("shutdown", json!({}), None).map(|_| ());
        let _ = self.child.wait();
        result
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A worker still running (after an error in the caller) must not outlive us.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
