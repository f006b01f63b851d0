//! The worker process: start, request/response with timeouts, and clean shutdown.
//!
//! Nothing here may hang a tuning job: responses are read on a thread and waited for with a
//! timeout; a worker that times out is killed; a worker that dies (EOF on its stdout) is
//! reported with its exit status and the last lines of its log.

use crate::protocol::{
    BenchRequest, BenchResult, BuildRequest, BuildResult, Built, CandidateId, Empty, ExportRequest,
    HelloResult, LowerRequest, LowerResult, NoParams, PrepareResult, ReplayRequest, ReplayResult,
    RpcDevices, RpcDevicesRequest, RpcTracker, SampleRequest, SampleResult, Seed, TargetRequest,
    TargetResult, Trials, TuneClose, TuneClosed, TuneMeasure, TuneMeasured, TuneOpen, TuneOpened,
    TuneRecorded, TuneRecords, TuneSearch, TuneSearched, TuneSeeded, TuneSeeds, TuneWindowed,
    TuneWindows, PROTOCOL,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

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
    // The worker needs the venv only: building the `tgc` Python package into it (minutes
    // on a fresh clone) is the README commands' work, not a side effect of `tgc tune`.
    let out = Command::new("bash")
        .arg(&script)
        .env("TGC_NO_PACKAGE", "1")
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
    /// Longest wait for each method's answer; a worker that does not answer in time is killed.
    pub timeouts: Timeouts,
}

/// The longest wait for each method's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// `hello`, at start-up: the first import of TVM included.
    pub hello: Duration,
    pub target: Duration,
    pub lower: Duration,
    pub replay: Duration,
    pub sample: Duration,
    /// Every request of a tuning session (`tune_open` ... `tune_close`).
    pub tune: Duration,
    pub build: Duration,
    pub build_and_measure: Duration,
    pub bench: Duration,
    pub shutdown: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        let quick = Duration::from_secs(300);
        let long = Duration::from_secs(6 * 3600);
        Timeouts {
            hello: quick,
            target: quick,
            lower: quick,
            replay: quick,
            sample: quick,
            tune: long,
            build: long,
            build_and_measure: long,
            bench: long,
            shutdown: quick,
        }
    }
}

impl Timeouts {
    /// The timeout of a method by its protocol name (an unknown one gets `hello`'s).
    pub fn of(&self, method: &str) -> Duration {
        match method {
            "target" => self.target,
            "lower" => self.lower,
            "replay" => self.replay,
            "sample" => self.sample,
            m if m.starts_with("tune_") => self.tune,
            "build" => self.build,
            "build_and_measure" => self.build_and_measure,
            "bench" => self.bench,
            "shutdown" => self.shutdown,
            _ => self.hello,
        }
    }
}

impl WorkerConfig {
    pub fn new(log: impl Into<PathBuf>) -> Self {
        WorkerConfig {
            python: None,
            log: log.into(),
            timeouts: Timeouts::default(),
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
    fn from_hello(hello: &HelloResult) -> Result<Versions, BridgeError> {
        let text = |k: &str, v: &str| {
            if v.is_empty() {
                Err(worker_error(
                    format!("the worker's hello has an empty '{k}' version string"),
                    None,
                ))
            } else {
                Ok(v.to_string())
            }
        };
        if hello.llvm.as_deref() == Some("") {
            return Err(worker_error(
                "the worker's hello has an empty 'llvm' version string",
                None,
            ));
        }
        Ok(Versions {
            tvm: text("tvm", &hello.tvm)?,
            tvm_ffi: text("tvm_ffi", &hello.tvm_ffi)?,
            llvm: hello.llvm.clone(),
        })
    }
}

/// Decodes a method's result: an error naming the method and the field (a missing or an
/// unknown one, a wrong type, an unknown enum value) when it does not match the protocol.
pub fn decode_result<T: DeserializeOwned>(
    method: &str,
    result: Value,
    task: Option<&str>,
) -> Result<T, BridgeError> {
    serde_json::from_value(result).map_err(|e| BridgeError {
        kind: "protocol".into(),
        message: format!("the worker's '{method}' result does not match protocol {PROTOCOL}: {e}"),
        task: task.map(str::to_string),
    })
}

/// A running worker.
pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
    config: WorkerConfig,
    /// The worker's `hello` answer at start-up.
    greeting: HelloResult,
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
            greeting: HelloResult {
                protocol: PROTOCOL,
                tvm: String::new(),
                tvm_ffi: String::new(),
                llvm: None,
                targets: Vec::new(),
                devices: Vec::new(),
                runtime_threads: 0,
                methods: Vec::new(),
                pid: 0,
            },
            versions: Versions {
                tvm: String::new(),
                tvm_ffi: String::new(),
                llvm: None,
            },
        };
        // The version first, from the raw answer: a worker of another protocol version
        // answers with other fields (or a `version` error), and that is what to report.
        let raw = match w.call("hello", json!({}), None) {
            Err(e) if e.kind == "version" => {
                return Err(worker_error(
                    format!("{}; this tgc speaks protocol {PROTOCOL}", e.message),
                    None,
                ))
            }
            r => r?,
        };
        if raw["protocol"].as_u64() != Some(PROTOCOL) {
            return Err(worker_error(
                format!(
                    "worker speaks protocol {}, this tgc speaks {PROTOCOL}; is {} this tgc's worker?",
                    raw["protocol"],
                    worker_dir().display()
                ),
                None,
            ));
        }
        let hello: HelloResult = decode_result("hello", raw, None)?;
        w.versions = Versions::from_hello(&hello)?;
        w.greeting = hello;
        Ok(w)
    }

    /// The worker's `hello` answer at start-up.
    pub fn greeting(&self) -> &HelloResult {
        &self.greeting
    }

    /// Sends one typed request of `method` and decodes its result, waiting at most the
    /// method's timeout.
    fn request<P: Serialize, R: DeserializeOwned>(
        &mut self,
        method: &str,
        params: &P,
        task: Option<&str>,
    ) -> Result<R, BridgeError> {
        let params = serde_json::to_value(params).expect("protocol requests serialize");
        let result = self.call(method, params, task)?;
        decode_result(method, result, task)
    }

    /// `hello` again: the protocol version, the toolchain, targets and devices.
    pub fn hello(&mut self) -> Result<HelloResult, BridgeError> {
        self.request("hello", &NoParams {}, None)
    }

    /// `target`: TVM's canonical form of a target config, its kind and `str`.
    pub fn target(&mut self, target: &Value) -> Result<TargetResult, BridgeError> {
        self.request(
            "target",
            &TargetRequest {
                target: target.clone(),
            },
            None,
        )
    }

    /// `lower`: the task's MetaSchedule workload, its hash and TIR.
    pub fn lower(&mut self, request: &LowerRequest) -> Result<LowerResult, BridgeError> {
        let name = task_name(&request.task);
        self.request("lower", request, name.as_deref())
    }

    /// `replay`: how each trace applies to the task, without measuring.
    pub fn replay(&mut self, request: &ReplayRequest) -> Result<ReplayResult, BridgeError> {
        let name = task_name(&request.task);
        self.request("replay", request, name.as_deref())
    }

    /// `sample`: random schedules of the task's design space.
    pub fn sample(&mut self, request: &SampleRequest) -> Result<SampleResult, BridgeError> {
        let name = task_name(&request.task);
        self.request("sample", request, name.as_deref())
    }

    /// `prepare_tuning`: the worker process's one-time set-up of tuning (the import that
    /// MetaSchedule's first TuneContext makes), so that a run's timing starts after it.
    pub fn prepare_tuning(&mut self) -> Result<PrepareResult, BridgeError> {
        self.request("prepare_tuning", &NoParams {}, None)
    }

    /// `tune_open`: a tuning session for one task (closing the one open before, if any).
    pub fn tune_open(&mut self, request: &TuneOpen) -> Result<TuneOpened, BridgeError> {
        let name = task_name(&request.task);
        self.request("tune_open", request, name.as_deref())
    }

    /// `tune_seeds`: the seeds replayed into candidates, until `limit` distinct ones.
    pub fn tune_seeds(
        &mut self,
        session: u64,
        seeds: &[Seed],
        limit: u64,
        task: Option<&str>,
    ) -> Result<TuneSeeded, BridgeError> {
        let request = TuneSeeds {
            session,
            seeds: seeds.to_vec(),
            limit,
        };
        self.request("tune_seeds", &request, task)
    }

    /// `tune_measure`: one batch of trials of the given candidates.
    pub fn tune_measure(
        &mut self,
        session: u64,
        candidates: &[CandidateId],
        build_timeout_s: f64,
        task: Option<&str>,
    ) -> Result<TuneMeasured, BridgeError> {
        let request = TuneMeasure {
            session,
            candidates: candidates.to_vec(),
            build_timeout_s,
        };
        self.request("tune_measure", &request, task)
    }

    /// `tune_search`: one round of the evolutionary search, at most `count` trials.
    pub fn tune_search(
        &mut self,
        session: u64,
        count: Trials,
        build_timeout_s: f64,
        task: Option<&str>,
    ) -> Result<TuneSearched, BridgeError> {
        let request = TuneSearch {
            session,
            count,
            build_timeout_s,
        };
        self.request("tune_search", &request, task)
    }

    /// `tune_windows`: a window of `repeats` fresh runs of each candidate, in order.
    pub fn tune_windows(
        &mut self,
        session: u64,
        candidates: &[CandidateId],
        repeats: u64,
        retries: u64,
        task: Option<&str>,
    ) -> Result<TuneWindowed, BridgeError> {
        let request = TuneWindows {
            session,
            candidates: candidates.to_vec(),
            repeats,
            retries,
        };
        self.request("tune_windows", &request, task)
    }

    /// `tune_records`: the session database's best records.
    pub fn tune_records(
        &mut self,
        session: u64,
        top_k: u64,
        task: Option<&str>,
    ) -> Result<TuneRecorded, BridgeError> {
        self.request("tune_records", &TuneRecords { session, top_k }, task)
    }

    /// `tune_close`: the end of the session (the cost model trained when `train`, saved).
    pub fn tune_close(
        &mut self,
        session: u64,
        train: bool,
        cost_model_max_samples: u64,
        task: Option<&str>,
    ) -> Result<TuneClosed, BridgeError> {
        let request = TuneClose {
            session,
            train,
            cost_model_max_samples,
        };
        self.request("tune_close", &request, task)
    }

    /// `build_and_measure`: the whole model built with the records and without, checked
    /// against each other, the tuned one timed.
    pub fn build_and_measure(
        &mut self,
        request: &BuildRequest,
    ) -> Result<BuildResult, BridgeError> {
        self.request("build_and_measure", request, None)
    }

    /// `build`: the whole model built with the records and exported, nothing measured.
    pub fn build(&mut self, request: &ExportRequest) -> Result<Built, BridgeError> {
        self.request("build", request, None)
    }

    /// `bench`: an exported library's end-to-end latency (and an untuned build's).
    pub fn bench(&mut self, request: &BenchRequest) -> Result<BenchResult, BridgeError> {
        self.request("bench", request, None)
    }

    /// `rpc_devices`: what an RPC tracker offers under a key (an unreachable tracker is an
    /// error of kind `rpc` naming it).
    pub fn rpc_devices(&mut self, tracker: &RpcTracker) -> Result<RpcDevices, BridgeError> {
        self.request(
            "rpc_devices",
            &RpcDevicesRequest {
                tracker_host: tracker.tracker_host.clone(),
                tracker_port: tracker.tracker_port,
                key: tracker.key.clone(),
            },
            None,
        )
    }

    /// The TVM, tvm-ffi and LLVM versions the worker reported.
    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// TVM's canonical form of a target config (the worker's `target` method:
    /// `Target.export()` of the target every method would build from it, keys sorted): two
    /// spellings of one target give equal JSON.
    pub fn canonical_target(&mut self, target: &Value) -> Result<Value, BridgeError> {
        let r = self.target(target)?;
        match r.canonical.get("kind") {
            Some(Value::String(_)) => Ok(r.canonical),
            _ => Err(worker_error(
                format!(
                    "the worker's 'target' answer has no canonical config with a kind: {}",
                    r.canonical
                ),
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

    /// Sends one request of untyped params and waits for its untyped result, at most the
    /// method's timeout. `task` names the task for errors. Prefer the typed methods
    /// ([`Worker::lower`], [`Worker::tune_search`], ...), which check every field of the result.
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
        let timeout = self.config.timeouts.of(method);
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
        let result = self
            .request::<_, Empty>("shutdown", &NoParams {}, None)
            .map(|_| ());
        let _ = self.child.wait();
        result
    }
}

/// The `name` of a task JSON, for errors.
fn task_name(task: &Value) -> Option<String> {
    task.get("name").and_then(Value::as_str).map(str::to_string)
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

#[cfg(test)]
mod tests {
    //! The real worker (the pinned TVM venv: `$TGC_PYTHON`, else `bootstrap.sh` creates it).
    use super::*;
    use crate::protocol::{BuildRecords, CostModelKind, Evaluator, ReplayMode, Seed};
    use std::collections::BTreeMap;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tgc-tvm-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    /// `relu(x + y)` over [4, 64]: tiny, quick to tune.
    fn task() -> Value {
        let t = json!({"shape": [4, 64], "dtype": "float32"});
        json!({
            "name": "fused_add_relu",
            "params": [
                {"name": "x", "shape": [4, 64], "dtype": "float32"},
                {"name": "y", "shape": [4, 64], "dtype": "float32"}
            ],
            "bindings": [
                {"op": "add", "operands": [0, 1], "results": [t]},
                {"op": "nn.relu", "operands": [2], "results": [t]}
            ],
            "results": [3]
        })
    }

    fn target() -> Value {
        json!({"kind": "llvm", "num-cores": 1})
    }

    fn tune_open(work_dir: PathBuf) -> TuneOpen {
        TuneOpen {
            task: task(),
            target: target(),
            work_dir,
            seed: 1,
            max_trials: 8,
            max_round: 4,
            evolutionary: json!({
                "population_size": 16, "genetic_num_iters": 1, "init_min_unmeasured": 8
            }),
            evaluator: Evaluator {
                number: 2,
                repeat: 1,
                min_repeat_ms: 0,
                enable_cpu_cache_flush: false,
            },
            builder_timeout_s: 300.0,
            runner_timeout_s: 60.0,
            cost_model: CostModelKind::Random,
            cost_model_file: None,
            rpc: None,
        }
    }

    /// `result` without `field` (a path of object keys and array indices), and with an
    /// extra field beside it, each fail to decode as `T` with an error naming the field.
    fn assert_strict<T: DeserializeOwned + fmt::Debug>(
        method: &str,
        result: &Value,
        path: &[&str],
    ) {
        let (last, parents) = path.split_last().expect("a path");
        let mut missing = result.clone();
        let mut extra = result.clone();
        let (mut m, mut x) = (&mut missing, &mut extra);
        for p in parents {
            m = match p.parse::<usize>() {
                Ok(i) => &mut m[i],
                Err(_) => &mut m[*p],
            };
            x = match p.parse::<usize>() {
                Ok(i) => &mut x[i],
                Err(_) => &mut x[*p],
            };
        }
        assert!(
            m.as_object_mut()
                .expect("an object")
                .remove(*last)
                .is_some(),
            "{method}: the worker sent no {path:?}"
        );
        let unknown = format!("{last}_typo");
        x[unknown.as_str()] = json!(1);
        let e = decode_result::<T>(method, missing, None).unwrap_err();
        assert_eq!(e.kind, "protocol");
        assert!(
            e.message.contains(&format!("'{method}' result"))
                && e.message.contains(&format!("missing field `{last}`")),
            "{e}"
        );
        let e = decode_result::<T>(method, extra, None).unwrap_err();
        assert!(
            e.message.contains(&format!("unknown field `{unknown}`")),
            "{e}"
        );
    }

    #[test]
    fn typed_methods_decode_the_real_workers_results() {
        let dir = scratch("protocol");
        let mut w = Worker::start(WorkerConfig::new(dir.join("worker.log"))).expect("worker");
        assert_eq!(w.greeting().protocol, PROTOCOL);
        let hello = w.hello().expect("hello");
        assert!(hello.methods.iter().any(|m| m == "build_and_measure"));
        assert!(hello.runtime_threads >= 1, "{hello:?}");
        assert_eq!(Some(&hello.tvm), Some(&w.versions().tvm));
        assert_strict::<HelloResult>(
            "hello",
            &w.call("hello", json!({}), None).unwrap(),
            &["llvm"],
        );

        let canonical = w.canonical_target(&target()).expect("target");
        assert_eq!(canonical["num-cores"], 1);
        let raw = w.call("target", json!({"target": target()}), None).unwrap();
        assert_strict::<TargetResult>("target", &raw, &["canonical"]);

        let first = w.prepare_tuning().expect("prepare_tuning");
        let again = w.prepare_tuning().expect("prepare_tuning again");
        assert!(
            first.seconds >= 0.0 && again.seconds < 0.5,
            "{first:?} {again:?}"
        );
        let raw = w.call("prepare_tuning", json!({}), None).unwrap();
        assert_strict::<PrepareResult>("prepare_tuning", &raw, &["seconds"]);

        let lower = LowerRequest {
            task: task(),
            target: target(),
        };
        let lowered = w.lower(&lower).expect("lower");
        assert_eq!(lowered.task, "fused_add_relu");
        assert!(lowered.tir.contains("def main("));
        let raw = w
            .call("lower", serde_json::to_value(&lower).unwrap(), None)
            .unwrap();
        assert_eq!(raw["structural_hash"], lowered.structural_hash.to_string());
        assert_strict::<LowerResult>("lower", &raw, &["structural_hash"]);

        // the worker's side: an unknown or a missing params field is bad_params naming it
        let mut params = serde_json::to_value(&lower).unwrap();
        params["trget"] = json!(1);
        let e = w.call("lower", params, None).unwrap_err();
        assert_eq!(e.kind, "bad_params");
        assert_eq!(e.message, "lower: unknown params field 'trget'");
        assert_eq!(e.task.as_deref(), Some("fused_add_relu"));
        let e = w.call("lower", json!({"task": task()}), None).unwrap_err();
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            ("bad_params", "lower: missing params field 'target'")
        );

        // a session: a search round, the records, a window of the best, the end
        let open = tune_open(dir.join("tune1"));
        let raw = w
            .call("tune_open", serde_json::to_value(&open).unwrap(), None)
            .unwrap();
        assert_strict::<TuneOpened>("tune_open", &raw, &["threads"]);
        assert_strict::<TuneOpened>("tune_open", &raw, &["evaluator", "min_repeat_ms"]);
        let opened: TuneOpened = decode_result("tune_open", raw, None).unwrap();
        assert_eq!(opened.structural_hash, lowered.structural_hash);
        let sid = opened.session;
        let raw = w
            .call(
                "tune_search",
                json!({"session": sid, "count": 4, "build_timeout_s": 60.0}),
                None,
            )
            .unwrap();
        assert_strict::<TuneSearched>("tune_search", &raw, &["results", "0", "error"]);
        assert_strict::<TuneSearched>("tune_search", &raw, &["results", "0", "build_s"]);
        let round: TuneSearched = decode_result("tune_search", raw, None).unwrap();
        assert!(
            !round.candidates.is_empty() && round.candidates.len() <= 4,
            "{round:?}"
        );
        assert_eq!(round.results.len(), round.candidates.len());
        assert!(
            round
                .results
                .iter()
                .all(|m| m.build_s.is_some_and(|b| b > 0.0 && b <= round.build_s)),
            "each trial's build is timed in its own process: {round:?}"
        );
        let records = w.tune_records(sid, 4, None).expect("tune_records");
        assert!(!records.records.is_empty());
        assert!(
            round.candidates.contains(&records.records[0].candidate),
            "a record is the candidate it was measured as"
        );
        let best = records.records[0].candidate;
        let raw = w
            .call(
                "tune_windows",
                json!({"session": sid, "candidates": [best, best], "repeats": 3, "retries": 0}),
                None,
            )
            .unwrap();
        assert_strict::<TuneWindowed>("tune_windows", &raw, &["build_s"]);
        let windows: TuneWindowed = decode_result("tune_windows", raw, None).unwrap();
        assert!(windows
            .windows
            .iter()
            .all(|m| m.run_secs.as_ref().is_some_and(|r| r.len() == 3)));
        let closed = w.tune_close(sid, true, 64, None).expect("tune_close");
        assert_eq!((closed.failed_runs, closed.run_errors.len()), (0, 0));
        let e = w.tune_records(sid, 4, None).unwrap_err();
        assert_eq!(e.kind, "bad_params");
        assert!(e.message.contains("is not open"), "{e}");

        // a second session seeded with the records: each replays exactly, once
        let sid = w.tune_open(&tune_open(dir.join("tune2"))).unwrap().session;
        let seeds: Vec<Seed> = records
            .records
            .iter()
            .map(|r| Seed {
                source_workload: Some(lowered.workload_json.clone()),
                ..Seed::trace(r.trace.clone())
            })
            .collect();
        let replayed = w.tune_seeds(sid, &seeds, 8, None).expect("tune_seeds");
        assert_eq!(replayed.seeds.len(), seeds.len());
        assert!(replayed
            .seeds
            .iter()
            .all(|r| r.mode == Some(ReplayMode::Exact) && !r.duplicate));
        let first = replayed.seeds[0].candidate.unwrap();
        let measured = w
            .tune_measure(sid, &[first], 60.0, None)
            .expect("tune_measure");
        assert!(measured.results[0].run_secs.is_some(), "{measured:?}");
        w.tune_close(sid, false, 64, None).expect("tune_close");

        // rpc_devices: a tracker address nothing listens on is one `rpc` error naming it
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let nowhere = RpcTracker::parse(&format!("127.0.0.1:{port}"), "k", 1).unwrap();
        let e = w.rpc_devices(&nowhere).unwrap_err();
        assert_eq!(e.kind, "rpc", "{e}");
        assert!(
            e.message
                .contains(&format!("RPC tracker 127.0.0.1:{port}: cannot connect")),
            "{e}"
        );

        // the whole "model": one call of the task, built with its best record
        let module = json!({
            "params": [
                {"name": "a", "shape": [4, 64], "dtype": "float32"},
                {"name": "b", "shape": [4, 64], "dtype": "float32"}
            ],
            "tasks": [task()],
            "calls": [{"task": "fused_add_relu", "args": [0, 1]}],
            "results": [2]
        });
        let build = BuildRequest {
            module,
            records: BuildRecords::Traces(BTreeMap::from([(
                "fused_add_relu".to_string(),
                vec![records.records[0].trace.clone()],
            )])),
            target: target(),
            repeat: 2,
            number: 1,
            seed: 0,
            atol_rel: None,
            rtol: None,
            export: None,
        };
        let built = w.build_and_measure(&build).expect("build_and_measure");
        assert!(built.outputs_match, "{built:?}");
        assert_eq!(built.mismatch, None);
        assert!(built
            .max_abs_err
            .is_some_and(|e| e <= built.tolerance.atol_rel));
        assert_eq!(built.tasks["fused_add_relu"], lowered.structural_hash);
        assert_eq!(built.latency_ms.repeat, 2);
        let raw = w
            .call(
                "build_and_measure",
                serde_json::to_value(&build).unwrap(),
                None,
            )
            .unwrap();
        assert_strict::<BuildResult>("build_and_measure", &raw, &["max_rel_err"]);
        assert_strict::<BuildResult>("build_and_measure", &raw, &["tolerance", "rtol"]);
        assert_strict::<BuildResult>("build_and_measure", &raw, &["latency_ms", "median"]);

        w.shutdown().expect("shutdown");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn each_method_has_its_own_timeout() {
        let t = Timeouts {
            lower: Duration::from_secs(7),
            ..Timeouts::default()
        };
        assert_eq!(t.of("lower"), Duration::from_secs(7));
        assert_eq!(t.of("tune_search"), Timeouts::default().tune);
        assert_ne!(t.of("tune_open"), t.of("hello"));
    }
}

#[cfg(test)]
mod agreement {
    //! The Rust requests and the worker's params table (`server.PARAMS`) are one definition:
    //! every field a request can send is one the worker takes, and the fields it always sends
    //! are exactly the ones the worker requires.
    use super::*;
    use crate::protocol::{BuildRecords, CostModelKind, Evaluator, Seed};
    use std::collections::{BTreeMap, BTreeSet};

    fn keys(v: Value) -> BTreeSet<String> {
        v.as_object()
            .expect("params object")
            .keys()
            .cloned()
            .collect()
    }

    /// (method, the params with every optional field set, with none set).
    fn requests() -> Vec<(&'static str, Value, Value)> {
        fn v<T: Serialize>(x: &T) -> Value {
            serde_json::to_value(x).expect("requests serialize")
        }
        let open = |some: bool| TuneOpen {
            task: json!({}),
            target: json!({}),
            work_dir: "/w".into(),
            seed: 1,
            max_trials: 1,
            max_round: 1,
            evolutionary: json!({}),
            evaluator: Evaluator {
                number: 1,
                repeat: 1,
                min_repeat_ms: 0,
                enable_cpu_cache_flush: false,
            },
            builder_timeout_s: 1.0,
            runner_timeout_s: 1.0,
            cost_model: CostModelKind::Xgb,
            cost_model_file: some.then(|| "/c".into()),
            rpc: some.then(|| RpcTracker::parse("h:1", "k", 1).expect("an address")),
        };
        let seeds = TuneSeeds {
            session: 1,
            seeds: vec![Seed::trace(json!([[], []]))],
            limit: 1,
        };
        let measure = TuneMeasure {
            session: 1,
            candidates: vec![0],
            build_timeout_s: 1.0,
        };
        let search = TuneSearch {
            session: 1,
            count: 1,
            build_timeout_s: 1.0,
        };
        let windows = TuneWindows {
            session: 1,
            candidates: vec![0],
            repeats: 3,
            retries: 0,
        };
        let records = TuneRecords {
            session: 1,
            top_k: 1,
        };
        let close = TuneClose {
            session: 1,
            train: true,
            cost_model_max_samples: 1,
        };
        let build = |some: bool| BuildRequest {
            module: json!({}),
            records: BuildRecords::Traces(BTreeMap::new()),
            target: json!({}),
            repeat: 1,
            number: 1,
            seed: 1,
            atol_rel: some.then_some(0.0),
            rtol: some.then_some(0.0),
            export: some.then(|| "/m.so".into()),
        };
        let export = ExportRequest {
            module: json!({}),
            records: BuildRecords::Traces(BTreeMap::new()),
            target: json!({}),
            export: "/m.so".into(),
        };
        let bench = |some: bool| BenchRequest {
            library: "/m.so".into(),
            inputs: vec![],
            target: json!({}),
            repeat: 1,
            number: 1,
            seed: 1,
            untuned: some.then(|| json!({})),
            untuned_repeat: some.then_some(1),
            onnx: some.then(|| "/m.onnx".into()),
        };
        let sample = SampleRequest {
            task: json!({}),
            target: json!({}),
            count: 1,
            seed: 1,
        };
        let lower = LowerRequest {
            task: json!({}),
            target: json!({}),
        };
        let replay = ReplayRequest {
            task: json!({}),
            target: json!({}),
            traces: vec![],
        };
        let target = TargetRequest { target: json!({}) };
        let rpc_devices = RpcDevicesRequest {
            tracker_host: "h".into(),
            tracker_port: 1,
            key: "k".into(),
        };
        vec![
            ("hello", v(&NoParams {}), v(&NoParams {})),
            ("shutdown", v(&NoParams {}), v(&NoParams {})),
            ("target", v(&target), v(&target)),
            ("lower", v(&lower), v(&lower)),
            ("replay", v(&replay), v(&replay)),
            ("sample", v(&sample), v(&sample)),
            ("prepare_tuning", v(&NoParams {}), v(&NoParams {})),
            ("tune_open", v(&open(true)), v(&open(false))),
            ("tune_seeds", v(&seeds), v(&seeds)),
            ("tune_measure", v(&measure), v(&measure)),
            ("tune_search", v(&search), v(&search)),
            ("tune_windows", v(&windows), v(&windows)),
            ("tune_records", v(&records), v(&records)),
            ("tune_close", v(&close), v(&close)),
            ("build", v(&export), v(&export)),
            ("build_and_measure", v(&build(true)), v(&build(false))),
            ("bench", v(&bench(true)), v(&bench(false))),
            ("rpc_devices", v(&rpc_devices), v(&rpc_devices)),
        ]
    }

    #[test]
    fn requests_agree_with_the_workers_params_table() {
        let python = find_python().expect("python");
        let out = Command::new(python)
            .args([
                "-c",
                "import json; from tgc_worker.server import PARAMS; print(json.dumps(PARAMS))",
            ])
            .env("PYTHONPATH", worker_dir())
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let table: BTreeMap<String, (Vec<String>, Vec<String>)> =
            serde_json::from_slice(&out.stdout).expect("PARAMS as JSON");
        let reqs = requests();
        let methods: BTreeSet<&str> = reqs.iter().map(|r| r.0).collect();
        assert_eq!(
            methods,
            table.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            "a request type per method"
        );
        for (method, full, minimal) in reqs {
            let (required, optional) = &table[method];
            let required: BTreeSet<String> = required.iter().cloned().collect();
            let all: BTreeSet<String> = required.iter().chain(optional).cloned().collect();
            assert_eq!(keys(full), all, "{method}: every field the worker takes");
            assert_eq!(keys(minimal), required, "{method}: the fields it requires");
        }
    }
}
