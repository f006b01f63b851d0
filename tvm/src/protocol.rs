//! The worker protocol's requests and results as types (`tvm/python/tgc_worker/PROTOCOL.md`).
//!
//! Requests serialize to exactly the params the worker takes; results deserialize with
//! `deny_unknown_fields` and without defaults, so a field the worker does not send, or one
//! this client does not know, is an error naming the field instead of a silent 0 or "?".
//! A field the worker may send as `null` is `Option<T>` that must still be present
//! (`nullable`); a field the worker documents as sent only sometimes is `Option<T>` with
//! `#[serde(default)]`, and says so. Task JSON, targets and traces stay `serde_json::Value`:
//! [`crate::task_json`] builds the first, TVM defines the other two.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The protocol version this client speaks (`v` of every request, `protocol` of `hello`).
///
/// 2: task attributes travel with the op schema's defaults filled in (the worker fills in
/// nothing), and every method rejects unknown params fields and requires the ones the client
/// always sends. 6: `tune` measures on RPC devices when asked (`rpc`), and its result counts
/// the measurements that failed (`failed_runs`, `run_errors`); the method `rpc_devices`.
/// 9: every latency names the TVM runtime threads it was measured with (`threads`), and
/// the worker runs TVM's CPU thread pool on the physical cores unless told otherwise.
/// 11: `tune` is gone: the worker measures, the driver decides. A task's search is a
/// session (`tune_open`, `tune_seeds`, `tune_measure`, `tune_search`, `tune_windows`,
/// `tune_records`, `tune_close`) whose every knob the client sends. 13: `tune_search`
/// never measures a schedule of the session again, and counts the ones it dropped. 14: a
/// float attribute spells infinity and NaN as strings, and `clip` with `tensor_bounds`
/// lowers to TVM's ONNX Clip workload (bounds as rank-0 parameters). 15: a task's
/// `layout_free` params and the sidecar's `packed` inputs. 16: every trial and window says
/// what other load it was measured under (`load`).
pub const PROTOCOL: u64 = 16;

/// Trials: measured candidates. One type for every count of them.
pub type Trials = u64;

/// A field the worker always sends that may be `null`: present, or a "missing field" error.
/// (serde would otherwise read a missing `Option` field as `None`.)
fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// A TVM structural hash, sent as a decimal string (64 bits do not fit a JSON double).
fn decimal_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = String::deserialize(d)?;
    s.parse()
        .map_err(|_| serde::de::Error::custom(format!("not a decimal u64 hash: {s:?}")))
}

/// Hashes written back as the worker writes them: decimal strings.
fn decimal_u64_map_ser<S: serde::Serializer>(
    m: &BTreeMap<String, u64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(m.iter().map(|(k, v)| (k, v.to_string())))
}

fn decimal_u64_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u64>, D::Error> {
    let m = BTreeMap::<String, String>::deserialize(d)?;
    m.into_iter()
        .map(|(k, s)| match s.parse() {
            Ok(h) => Ok((k, h)),
            Err(_) => Err(serde::de::Error::custom(format!(
                "task {k}: not a decimal u64 hash: {s:?}"
            ))),
        })
        .collect()
}

// ---- hello, target, shutdown -------------------------------------------------------------

/// `hello`'s result: the protocol version, the toolchain, what this TVM can build and run.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelloResult {
    pub protocol: u64,
    pub tvm: String,
    pub tvm_ffi: String,
    /// TVM's `llvm_version_major()`; `null` for a TVM built without LLVM.
    #[serde(deserialize_with = "nullable")]
    pub llvm: Option<String>,
    /// Target kinds with a code generator in this TVM build.
    pub targets: Vec<String>,
    /// Runtime devices present (`cpu`, `cuda`, ...).
    pub devices: Vec<String>,
    /// The threads of the worker's TVM CPU thread pool, which its measurements run on.
    pub runtime_threads: u64,
    pub methods: Vec<String>,
    pub pid: u64,
}

/// `target`'s params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetRequest {
    pub target: Value,
}

/// `target`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetResult {
    /// TVM's canonical form: `Target.export()`, keys sorted at every level.
    pub canonical: Value,
    pub kind: String,
    /// `str(Target)`.
    pub str: String,
}

/// `hello`'s and `shutdown`'s params: none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NoParams {}

/// `shutdown`'s result: `{}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

// ---- lower --------------------------------------------------------------------------------

/// `lower`'s params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LowerRequest {
    /// Task JSON ([`crate::task_json`]).
    pub task: Value,
    /// Only validated: lowering does not depend on it.
    pub target: Value,
}

/// `lower`'s result: the MetaSchedule workload of the task.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LowerResult {
    pub task: String,
    /// `tvm.ir.save_json` of `{"main": PrimFunc}`: what the cache stores per lowered task.
    pub workload_json: String,
    /// `tvm_ffi.structural_hash(workload)` as unsigned 64 bits: MetaSchedule's workload hash.
    #[serde(deserialize_with = "decimal_u64")]
    pub structural_hash: u64,
    /// TVMScript of the workload.
    pub tir: String,
    /// `str(Target)` of the validated target.
    pub target: String,
}

// ---- replay modes, seeds ------------------------------------------------------------------

/// How a trace was applied to a task (PROTOCOL.md, "Replay modes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayMode {
    /// Replayed as is on the same workload.
    Exact,
    /// Tile factors repaired for other extents (or the postprocessors rejected the exact replay).
    Repaired,
    /// Transferred from the source task's workload by MetaSchedule's anchor-trace apply.
    Anchor,
}

/// A trace sent as a seed (`tune`) or to replay (`replay`), with its source when known.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Seed {
    /// MetaSchedule trace JSON `[instructions, decisions]`.
    pub trace: Value,
    /// The task the trace was tuned on (enables anchor transfer); wins over `source_workload`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_task: Option<Value>,
    /// That task's workload as `lower` returns it in `workload_json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_workload: Option<String>,
}

impl Seed {
    /// A trace of unknown source.
    pub fn trace(trace: Value) -> Seed {
        Seed {
            trace,
            source_task: None,
            source_workload: None,
        }
    }
}

/// `replay`'s params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayRequest {
    pub task: Value,
    pub target: Value,
    pub traces: Vec<Seed>,
}

/// `replay`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayResult {
    pub task: String,
    #[serde(deserialize_with = "decimal_u64")]
    pub structural_hash: u64,
    /// One per trace, in order.
    pub results: Vec<ReplayOutcome>,
}

/// One trace's replay.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayOutcome {
    pub ok: bool,
    /// `null` when `ok` is false.
    #[serde(deserialize_with = "nullable")]
    pub mode: Option<ReplayMode>,
    /// Every mode tried and why it failed; `null` when `ok`.
    #[serde(deserialize_with = "nullable")]
    pub error: Option<String>,
    /// Optional: sent only for mode `repaired`, the tile factor lists that changed.
    #[serde(default)]
    pub repaired_decisions: Option<u64>,
}

/// `sample`'s params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleRequest {
    pub task: Value,
    pub target: Value,
    /// Schedules wanted.
    pub count: u64,
    /// The sampler's random state (at least 1).
    pub seed: u64,
}

/// `sample`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleResult {
    pub task: String,
    pub traces: Vec<Value>,
    pub attempts: u64,
}

/// Devices registered with a TVM RPC tracker under one key, and how many of them a tuning
/// session measures on at once (`tune_open`'s `rpc`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RpcTracker {
    pub tracker_host: String,
    pub tracker_port: u16,
    /// The key the devices registered under (`python -m tvm.exec.rpc_server --key KEY`).
    pub key: String,
    /// Measurements at once (MetaSchedule's RPCRunner `max_workers`), at least 1.
    pub sessions: u32,
}

impl RpcTracker {
    /// The most sessions the worker takes.
    pub const MAX_SESSIONS: u32 = 1024;

    /// From the command line's spelling: `HOST:PORT` (`[V6]:PORT` for an IPv6 address), a
    /// key and a session count. The error is one line naming what is wrong.
    pub fn parse(address: &str, key: &str, sessions: u32) -> Result<RpcTracker, String> {
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| format!("--rpc {address:?}: expected HOST:PORT"))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(format!(
                "--rpc {address:?}: expected HOST:PORT, the host is empty or has spaces"
            ));
        }
        let port = port.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
            format!("--rpc {address:?}: the port must be a number in 1..=65535, got {port:?}")
        })?;
        if key.is_empty() || key.contains(|c: char| c.is_whitespace() || c == ',') {
            return Err(format!(
                "--rpc-key {key:?}: a device key is a non-empty word without spaces or commas"
            ));
        }
        if !(1..=Self::MAX_SESSIONS).contains(&sessions) {
            return Err(format!(
                "--rpc-sessions {sessions}: must be between 1 and {}",
                Self::MAX_SESSIONS
            ));
        }
        Ok(RpcTracker {
            tracker_host: host.to_string(),
            tracker_port: port,
            key: key.to_string(),
            sessions,
        })
    }

    /// `HOST:PORT`, as the tracker is spelt in reports and errors.
    pub fn address(&self) -> String {
        if self.tracker_host.contains(':') {
            format!("[{}]:{}", self.tracker_host, self.tracker_port)
        } else {
            format!("{}:{}", self.tracker_host, self.tracker_port)
        }
    }
}

/// `rpc_devices`' params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RpcDevicesRequest {
    pub tracker_host: String,
    pub tracker_port: u16,
    pub key: String,
}

/// `prepare_tuning`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PrepareResult {
    /// Seconds the one-time set-up took (about 0 when it was done before).
    pub seconds: f64,
}

/// `rpc_devices`' result: what the tracker offers under the key now.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RpcDevices {
    /// `HOST:PORT`.
    pub tracker: String,
    pub key: String,
    /// Devices waiting for a client, and requests waiting for a device (a device in a
    /// session is in neither).
    pub free: u64,
    pub pending: u64,
    /// The free devices' addresses.
    pub servers: Vec<String>,
    /// Every key the tracker has a queue for.
    pub keys: Vec<String>,
}

// ---- tuning sessions ----------------------------------------------------------------------

/// MetaSchedule's `EvaluatorConfig`: how a candidate is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evaluator {
    /// Runs averaged into one measurement.
    pub number: u64,
    /// Measurements of a trial.
    pub repeat: u64,
    /// `number` grows until one measurement takes at least this long.
    pub min_repeat_ms: u64,
    pub enable_cpu_cache_flush: bool,
}

/// The XGB cost model MetaSchedule ranks candidates with, or a random one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostModelKind {
    Xgb,
    Random,
}

/// `tune_open`'s params: a task's tuning session. Every field is required: the worker has
/// no tuning defaults of its own.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneOpen {
    pub task: Value,
    pub target: Value,
    /// MetaSchedule's logs go to `work_dir/logs/`.
    pub work_dir: PathBuf,
    /// MetaSchedule's random state (at least 1).
    pub seed: u64,
    /// The trials the evolutionary search may be asked for in all (its `max_trials`).
    pub max_trials: Trials,
    /// The most candidates one search round asks for.
    pub max_round: Trials,
    /// `EvolutionarySearch` arguments (`population_size`, ...).
    pub evolutionary: Value,
    pub evaluator: Evaluator,
    pub builder_timeout_s: f64,
    pub runner_timeout_s: f64,
    pub cost_model: CostModelKind,
    /// The XGB model's warm-start file (loaded now, merged into at close); `None`: cold.
    pub cost_model_file: Option<PathBuf>,
    /// Measure on the devices of this RPC tracker instead of this machine; candidates are
    /// built here either way.
    pub rpc: Option<RpcTracker>,
}

/// `tune_open`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneOpened {
    pub session: u64,
    #[serde(deserialize_with = "decimal_u64")]
    pub structural_hash: u64,
    /// The evaluator as MetaSchedule normalised it.
    pub evaluator: Evaluator,
    /// The TVM runtime's CPU threads of the measurements (`TVM_NUM_THREADS`, by default the
    /// physical cores); `null` on an RPC device, whose server chooses its own.
    #[serde(deserialize_with = "nullable")]
    pub threads: Option<u64>,
    /// Measurements the warm-started cost model holds.
    pub cost_model_warm_samples: u64,
}

/// A candidate of a session: a schedule of its task, by id.
pub type CandidateId = u64;

/// `tune_seeds`' params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneSeeds {
    pub session: u64,
    /// Best first.
    pub seeds: Vec<Seed>,
    /// Replay until this many distinct candidates replayed; the seeds after are not tried.
    pub limit: u64,
}

/// `tune_seeds`' result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneSeeded {
    /// One per seed tried, in order.
    pub seeds: Vec<SeedReplay>,
    pub seconds: f64,
}

/// How one seed replayed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedReplay {
    /// `null`: it did not replay.
    #[serde(deserialize_with = "nullable")]
    pub candidate: Option<CandidateId>,
    #[serde(deserialize_with = "nullable")]
    pub mode: Option<ReplayMode>,
    #[serde(deserialize_with = "nullable")]
    pub error: Option<String>,
    /// It replayed to the schedule of an earlier seed (`candidate` is that seed's).
    pub duplicate: bool,
}

/// `tune_measure`'s params: one batch of trials.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneMeasure {
    pub session: u64,
    pub candidates: Vec<CandidateId>,
    /// Each build is killed after this many seconds (at most the session's
    /// `builder_timeout_s`) and its candidate fails.
    pub build_timeout_s: f64,
}

/// One measurement: a trial's runs, or a window's.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// `null`: the build or the run failed.
    #[serde(deserialize_with = "nullable")]
    pub run_secs: Option<Vec<f64>>,
    #[serde(deserialize_with = "nullable")]
    pub error: Option<String>,
    /// Seconds of its build, in the build's own process; `null`: it failed, or (a window)
    /// it was built for an earlier request.
    #[serde(deserialize_with = "nullable")]
    pub build_s: Option<f64>,
    /// The CPU cores other work took while it was timed: other processes' CPU time and the
    /// hypervisor's steal, over the run's wall time. `null`: not known (a run that did not
    /// happen, a device behind an RPC tracker, a system without `/proc/stat`).
    #[serde(deserialize_with = "nullable")]
    pub load: Option<f64>,
}

impl Measurement {
    /// Whether its build was killed at the build timeout (the builder's message).
    pub fn build_timed_out(&self) -> bool {
        self.run_secs.is_none()
            && self
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("TrialBuilder: Timeout"))
    }
}

/// `tune_measure`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneMeasured {
    /// One per candidate, in order.
    pub results: Vec<Measurement>,
    pub build_s: f64,
    pub run_s: f64,
    /// Seconds the cost model's update with the batches measured before took.
    pub trained_s: f64,
}

/// `tune_search`'s params: one round of the evolutionary search.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneSearch {
    pub session: u64,
    /// The most candidates measured.
    pub count: Trials,
    /// As [`TuneMeasure::build_timeout_s`].
    pub build_timeout_s: f64,
}

/// `tune_search`'s result; no candidates: the search has none left.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneSearched {
    pub candidates: Vec<CandidateId>,
    pub results: Vec<Measurement>,
    pub search_s: f64,
    pub build_s: f64,
    pub run_s: f64,
    pub trained_s: f64,
    /// Schedules the search proposed that the session had measured already (the seeds):
    /// dropped, not measured again.
    pub repeats_dropped: Trials,
}

/// `tune_windows`' params: one window of fresh runs of each listed candidate, in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneWindows {
    pub session: u64,
    pub candidates: Vec<CandidateId>,
    /// Fresh runs per window.
    pub repeats: u64,
    /// Times a failed window is measured again.
    pub retries: u64,
}

/// `tune_windows`' result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneWindowed {
    /// One per listed candidate, in order.
    pub windows: Vec<Measurement>,
    pub build_s: f64,
    pub run_s: f64,
}

/// `tune_records`' params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneRecords {
    pub session: u64,
    pub top_k: u64,
}

/// `tune_records`' result: the session database's best records, MetaSchedule's order.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneRecorded {
    pub records: Vec<SessionRecord>,
}

/// A record of a session's database.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRecord {
    pub candidate: CandidateId,
    /// Trace JSON with its postprocessing instructions.
    pub trace: Value,
    /// The trial's runs.
    pub run_secs: Vec<f64>,
}

/// `tune_close`'s params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneClose {
    pub session: u64,
    /// Update the cost model with the batches it has not seen before saving it.
    pub train: bool,
    /// The most measurements the cost-model file keeps (the newest).
    pub cost_model_max_samples: u64,
}

/// `tune_close`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneClosed {
    pub trained_s: f64,
    pub saved_samples: u64,
    /// The cost model's load and save errors (neither fails the task).
    pub errors: Vec<String>,
    /// Measurements of the session that failed (a device that dropped out, a timeout, a
    /// crashed run), and the first few distinct messages.
    pub failed_runs: Trials,
    pub run_errors: Vec<String>,
}

// ---- build_and_measure --------------------------------------------------------------------

/// `build_and_measure`'s `records`: traces per task name, or a MetaSchedule database directory.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum BuildRecords {
    Traces(BTreeMap<String, Vec<Value>>),
    Database(PathBuf),
}

/// `build_and_measure`'s params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuildRequest {
    /// Module JSON ([`crate::module_json`]).
    pub module: Value,
    pub records: BuildRecords,
    pub target: Value,
    /// Timing runs.
    pub repeat: u64,
    /// Calls per timing run.
    pub number: u64,
    /// The inputs' random seed.
    pub seed: u64,
    /// Optional: replaces the output check's default `atol_rel`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atol_rel: Option<f64>,
    /// Optional: replaces the output check's default `rtol`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// Optional: write the tuned executable here with `export_library`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<PathBuf>,
}

/// A record of `build_and_measure`'s `records`: a trace, with the workload of the task it
/// was tuned on when it comes from another task (then it is transferred, as seeds are).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuildRecord {
    pub trace: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_workload: Option<String>,
}

/// The tuned build's latency (milliseconds).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    pub min: f64,
    pub repeat: u64,
    pub number: u64,
    /// The TVM runtime's CPU threads the timing ran with.
    pub threads: u64,
}

/// The output check's tolerance: `|tuned - ref| <= atol_rel * max|ref| + rtol * |ref|`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub atol_rel: f64,
    pub rtol: f64,
}

/// How a task's record went into the build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Applied {
    Exact,
    Repaired,
    Anchor,
    /// Found in the MetaSchedule database directory.
    Database,
}

/// `build`'s params: `build_and_measure`'s build alone, written to `export`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExportRequest {
    pub module: Value,
    pub records: BuildRecords,
    pub target: Value,
    pub export: PathBuf,
}

/// `build`'s result: how the records went into the model, without measuring it.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Built {
    /// Per task: how its record was applied; `None`: no record applied.
    pub applied: BTreeMap<String, Option<Applied>>,
    /// Per task: the records that did not replay before one did (all when none did).
    pub failed: BTreeMap<String, u64>,
    /// The PrimFuncs `MetaScheduleApplyDatabase` replaced.
    pub scheduled: Vec<String>,
    /// main's params in order, with the role their random values are drawn by.
    pub inputs: Vec<ModelInput>,
    /// Per task, its structural hash.
    #[serde(
        deserialize_with = "decimal_u64_map",
        serialize_with = "decimal_u64_map_ser"
    )]
    pub tasks: BTreeMap<String, u64>,
    pub wall_s: f64,
}

impl BuildResult {
    /// The part of the result that [`Built`] has.
    pub fn built(&self) -> Built {
        Built {
            applied: self.applied.clone(),
            failed: self.failed.clone(),
            scheduled: self.scheduled.clone(),
            inputs: self.inputs.clone(),
            tasks: self.tasks.clone(),
            wall_s: self.wall_s,
        }
    }
}

/// `build_and_measure`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BuildResult {
    pub latency_ms: Latency,
    pub outputs_match: bool,
    /// `null` when a NaN or infinity of one build is not in the other.
    #[serde(deserialize_with = "nullable")]
    pub max_abs_err: Option<f64>,
    /// Of the output's `max|ref|`; `null` as `max_abs_err`.
    #[serde(deserialize_with = "nullable")]
    pub max_rel_err: Option<f64>,
    /// The tolerance the first float output was checked with.
    pub tolerance: Tolerance,
    /// Per task: how its record was applied; `None`: no record applied.
    pub applied: BTreeMap<String, Option<Applied>>,
    /// Per task: the records that did not replay before one did (all when none did).
    pub failed: BTreeMap<String, u64>,
    /// The PrimFuncs `MetaScheduleApplyDatabase` replaced.
    pub scheduled: Vec<String>,
    /// main's params in order, with the role their random values are drawn by.
    pub inputs: Vec<ModelInput>,
    /// Per task, its structural hash.
    #[serde(
        deserialize_with = "decimal_u64_map",
        serialize_with = "decimal_u64_map_ser"
    )]
    pub tasks: BTreeMap<String, u64>,
    pub wall_s: f64,
    /// Optional: sent only when the outputs differ (the output, how many elements, the
    /// bound, the worst element).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<String>,
}

/// How a model input's random values are drawn (`build_and_measure`'s output check, `bench`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputRole {
    /// Uniform [-1, 1).
    Data,
    /// Normal with std `1/sqrt(fan_in)`.
    Weight,
    /// A batch norm's variance: uniform [0.5, 1.5).
    Positive,
}

/// One of main's params.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInput {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: String,
    pub role: InputRole,
    /// The products each output element of the contraction sums; `null` unless a weight.
    #[serde(deserialize_with = "nullable")]
    pub fan_in: Option<u64>,
    /// This input is `permute_dims(the model's input of this name, permutation)`: a kernel
    /// the `convert-layout` pass made HWIO (`tgc build --layout nhwc`). Absent: the model's
    /// own layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permutation: Option<Vec<usize>>,
    /// The library takes this weight packed: through `main_transform_params` (with the other
    /// packed weights, in input order), whose outputs follow the inputs not packed in `main`'s
    /// arguments (`tgc build --pack-weights`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub packed: bool,
}

// ---- bench --------------------------------------------------------------------------------

/// `bench`'s params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchRequest {
    /// An exported library (`build_and_measure`'s `export`).
    pub library: PathBuf,
    /// Its inputs, in order (`build_and_measure`'s `inputs`).
    pub inputs: Vec<ModelInput>,
    /// For the device.
    pub target: Value,
    /// Timing runs.
    pub repeat: u64,
    /// Calls per timing run.
    pub number: u64,
    /// The inputs' random seed.
    pub seed: u64,
    /// Optional: a module (JSON as `build_and_measure` takes it) built untuned and timed too,
    /// in `untuned_repeat` timing runs (TVM's defaults are slow: fewer runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untuned: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untuned_repeat: Option<u64>,
    /// Optional: the ONNX file the library was built from, timed with onnxruntime on the
    /// same inputs (weights as initializers), `repeat` runs of `number` calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub onnx: Option<PathBuf>,
}

/// onnxruntime's latency in `bench`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OnnxRuntimeLatency {
    /// `threads`: onnxruntime's intra-op threads (the TVM runtime's).
    pub latency_ms: LatencyRange,
    pub version: String,
}

/// End-to-end latency over timing runs (milliseconds).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyRange {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub repeat: u64,
    pub number: u64,
    /// The TVM runtime's CPU threads the timing ran with.
    pub threads: u64,
}

/// `bench`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BenchResult {
    pub latency_ms: LatencyRange,
    /// `null` without `untuned`.
    #[serde(deserialize_with = "nullable")]
    pub untuned_latency_ms: Option<LatencyRange>,
    /// `null` without `onnx`.
    #[serde(deserialize_with = "nullable")]
    pub onnxruntime: Option<OnnxRuntimeLatency>,
    pub wall_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opened() -> Value {
        json!({
            "session": 3, "structural_hash": "18446744073709551615",
            "evaluator": {"number": 3, "repeat": 1, "min_repeat_ms": 100,
                          "enable_cpu_cache_flush": false},
            "threads": 2, "cost_model_warm_samples": 0
        })
    }

    fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn session_results_decode() {
        let o: TuneOpened = decode(opened()).unwrap();
        assert_eq!((o.session, o.structural_hash), (3, u64::MAX));
        assert_eq!((o.evaluator.number, o.threads), (3, Some(2)));
        let s: TuneSeeded = decode(json!({"seeds": [
            {"candidate": 0, "mode": "exact", "error": null, "duplicate": false},
            {"candidate": 0, "mode": "repaired", "error": null, "duplicate": true},
            {"candidate": null, "mode": null, "error": "exact: failed", "duplicate": false}],
            "seconds": 0.1}))
        .unwrap();
        assert_eq!(s.seeds[0].mode, Some(ReplayMode::Exact));
        assert!(s.seeds[1].duplicate);
        assert_eq!(s.seeds[2].candidate, None);
        let m: TuneSearched = decode(json!({"candidates": [4, 5],
            "results": [{"run_secs": [1e-4, 2e-4], "error": null, "build_s": 1.2, "load": 0.02},
                        {"run_secs": null, "error": "TrialBuilder: Timeout, killed after 30 seconds",
                         "build_s": null, "load": null}],
            "search_s": 1.0, "build_s": 2.0, "run_s": 0.5, "trained_s": 0.1,
            "repeats_dropped": 1}))
        .unwrap();
        assert_eq!(m.results[1].run_secs, None);
        assert_eq!((m.results[0].load, m.results[1].load), (Some(0.02), None));
        assert_eq!(
            m.results
                .iter()
                .map(|r| (r.build_s, r.build_timed_out()))
                .collect::<Vec<_>>(),
            [(Some(1.2), false), (None, true)]
        );
        let r: TuneRecorded = decode(json!({"records": [
            {"candidate": 4, "trace": [[], []], "run_secs": [1e-4]}]}))
        .unwrap();
        assert_eq!(r.records[0].candidate, 4);
        let c: TuneClosed = decode(json!({"trained_s": 0.0, "saved_samples": 12, "errors": [],
            "failed_runs": 1, "run_errors": ["RemoteRunner (key 'k' at tracker h:1): An exception occurred"]}))
        .unwrap();
        assert_eq!((c.saved_samples, c.failed_runs), (12, 1));
    }

    #[test]
    fn rpc_addresses_parse_or_name_the_problem() {
        let t = RpcTracker::parse("127.0.0.1:9190", "rasp4", 2).unwrap();
        assert_eq!(
            (
                t.tracker_host.as_str(),
                t.tracker_port,
                t.key.as_str(),
                t.sessions
            ),
            ("127.0.0.1", 9190, "rasp4", 2)
        );
        assert_eq!(t.address(), "127.0.0.1:9190");
        let v6 = RpcTracker::parse("[::1]:9190", "k", 1).unwrap();
        assert_eq!(
            (v6.tracker_host.as_str(), v6.address()),
            ("::1", "[::1]:9190".into())
        );
        for (addr, key, n, needle) in [
            ("localhost", "k", 1, "expected HOST:PORT"),
            (":9190", "k", 1, "the host is empty"),
            (
                "h:0",
                "k",
                1,
                "the port must be a number in 1..=65535, got \"0\"",
            ),
            ("h:99999", "k", 1, "got \"99999\""),
            ("h:http", "k", 1, "got \"http\""),
            ("h:9190", "", 1, "--rpc-key \"\""),
            ("h:9190", "a,b", 1, "without spaces or commas"),
            (
                "h:9190",
                "k",
                0,
                "--rpc-sessions 0: must be between 1 and 1024",
            ),
        ] {
            let e = RpcTracker::parse(addr, key, n).unwrap_err();
            assert!(e.contains(needle), "{addr} {key} {n}: {e}");
            assert!(!e.contains('\n'));
        }
        let r = serde_json::to_value(&t).unwrap();
        assert_eq!(
            r,
            json!({"tracker_host": "127.0.0.1", "tracker_port": 9190, "key": "rasp4", "sessions": 2})
        );
    }

    #[test]
    fn missing_unknown_and_misspelt_fields_are_named() {
        let mut v = opened();
        v.as_object_mut().unwrap().remove("session");
        assert!(decode::<TuneOpened>(v)
            .unwrap_err()
            .contains("missing field `session`"));
        // a nullable field must still be present
        let mut v = opened();
        v.as_object_mut().unwrap().remove("threads");
        assert!(decode::<TuneOpened>(v)
            .unwrap_err()
            .contains("missing field `threads`"));
        let mut v = opened();
        v["evaluator"]["repeats"] = json!(3);
        assert!(decode::<TuneOpened>(v)
            .unwrap_err()
            .contains("unknown field `repeats`"));
        let mut v = opened();
        v["structural_hash"] = json!("0x12");
        assert!(decode::<TuneOpened>(v)
            .unwrap_err()
            .contains("not a decimal u64 hash"));
        let seed = |mode: Value| {
            decode::<TuneSeeded>(json!({"seeds": [
                {"candidate": 0, "mode": mode, "error": null, "duplicate": false}], "seconds": 0.0}))
        };
        assert!(seed(json!("fuzzy"))
            .unwrap_err()
            .contains("unknown variant `fuzzy`"));
        let measured = json!({"results": [{"run_secs": [1e-4], "build_s": 0.1, "load": 0.0}], "build_s": 0.0, "run_s": 0.0,
                              "trained_s": 0.0});
        assert!(decode::<TuneMeasured>(measured)
            .unwrap_err()
            .contains("missing field `error`"));
    }

    #[test]
    fn build_and_bench_results_decode() {
        let build = json!({
            "latency_ms": {"mean": 1.0, "median": 1.0, "std": 0.0, "min": 1.0, "repeat": 2, "number": 1,
                           "threads": 2},
            "outputs_match": true, "max_abs_err": 0.0, "max_rel_err": 0.0,
            "tolerance": {"atol_rel": 1e-4, "rtol": 1e-6},
            "applied": {"a": "repaired", "b": null}, "failed": {"a": 1, "b": 0},
            "scheduled": ["a"], "tasks": {"a": "1", "b": "2"},
            "inputs": [{"name": "x", "shape": [1, 8], "dtype": "float32", "role": "data", "fan_in": null},
                       {"name": "w", "shape": [8, 8], "dtype": "float32", "role": "weight", "fan_in": 8}],
            "wall_s": 1.0
        });
        let r: BuildResult = decode(build.clone()).unwrap();
        assert_eq!(r.failed["a"], 1);
        assert_eq!(r.applied["a"], Some(Applied::Repaired));
        assert_eq!(r.inputs[1].role, InputRole::Weight);
        assert_eq!(r.inputs[1].fan_in, Some(8));
        // the sidecar's inputs are these, and `bench` takes them back as they were sent
        assert_eq!(serde_json::to_value(&r.inputs).unwrap(), build["inputs"]);
        let mut v = build.clone();
        v["inputs"][0].as_object_mut().unwrap().remove("fan_in");
        assert!(decode::<BuildResult>(v)
            .unwrap_err()
            .contains("missing field `fan_in`"));
        let mut v = build;
        v["inputs"][0]["role"] = json!("bias");
        assert!(decode::<BuildResult>(v)
            .unwrap_err()
            .contains("unknown variant `bias`"));
        let range = json!({"median": 2.0, "p10": 1.5, "p90": 2.5, "mean": 2.0, "min": 1.0,
                           "max": 3.0, "repeat": 50, "number": 1, "threads": 1});
        let b: BenchResult = decode(json!({"latency_ms": range.clone(),
            "untuned_latency_ms": null, "onnxruntime": null, "wall_s": 3.0}))
        .unwrap();
        assert_eq!(b.latency_ms.p90, 2.5);
        assert_eq!((b.untuned_latency_ms, b.onnxruntime), (None, None));
        let b: BenchResult = decode(json!({"latency_ms": range.clone(),
            "untuned_latency_ms": range.clone(),
            "onnxruntime": {"latency_ms": range.clone(), "version": "1.32.0"}, "wall_s": 3.0}))
        .unwrap();
        assert_eq!(b.onnxruntime.map(|o| o.version).as_deref(), Some("1.32.0"));
        assert!(
            decode::<BenchResult>(json!({"latency_ms": range, "wall_s": 3.0}))
                .unwrap_err()
                .contains("missing field `untuned_latency_ms`")
        );
    }

    #[test]
    fn optional_results_fields_may_be_absent() {
        let v = json!({"ok": true, "mode": "exact", "error": null});
        let r: ReplayOutcome = decode(v).unwrap();
        assert_eq!(r.repaired_decisions, None);
        let v = json!({"ok": false, "error": "exact: failed"});
        assert!(decode::<ReplayOutcome>(v)
            .unwrap_err()
            .contains("missing field `mode`"));
    }

    #[test]
    fn requests_send_every_field_and_seeds_only_what_is_set() {
        let r = TuneOpen {
            task: json!({}),
            target: json!({"kind": "llvm"}),
            work_dir: "/w".into(),
            seed: 1,
            max_trials: 8,
            max_round: 6,
            evolutionary: json!({"population_size": 64}),
            evaluator: Evaluator {
                number: 3,
                repeat: 1,
                min_repeat_ms: 100,
                enable_cpu_cache_flush: false,
            },
            builder_timeout_s: 300.0,
            runner_timeout_s: 60.0,
            cost_model: CostModelKind::Random,
            cost_model_file: None,
            rpc: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["cost_model"], "random");
        // the worker has no defaults: an absent knob is sent as null, never left out
        assert_eq!(v["cost_model_file"], Value::Null);
        assert_eq!(v.as_object().unwrap().len(), 13);
        let s = serde_json::to_value(TuneSeeds {
            session: 1,
            seeds: vec![
                Seed::trace(json!([[], []])),
                Seed {
                    source_workload: Some("wl".into()),
                    ..Seed::trace(json!([[], []]))
                },
            ],
            limit: 2,
        })
        .unwrap();
        assert_eq!(s["seeds"][0], json!({"trace": [[], []]}));
        assert_eq!(s["seeds"][1]["source_workload"], "wl");
        let b = BuildRequest {
            module: json!({}),
            records: BuildRecords::Database("/db".into()),
            target: json!({"kind": "llvm"}),
            repeat: 3,
            number: 1,
            seed: 0,
            atol_rel: None,
            rtol: None,
            export: None,
        };
        assert_eq!(
            serde_json::to_value(&b).unwrap(),
            json!({"module": {}, "records": "/db", "target": {"kind": "llvm"}, "repeat": 3,
                   "number": 1, "seed": 0})
        );
    }
}
