//! The worker protocol's requests and results as types (`tvm/python/tgc_worker/PROTOCOL.md`).
//!
//! Requests serialize to exactly the params the worker takes; results deserialize with
//! `deny_unknown_fields` and without defaults, so a field the worker does not send, or one
//! this client does not know, is an error naming the field instead of a silent 0 or "?".
//! A field the worker may send as `null` is `Option<T>` that must still be present
//! ([`nullable`]); a field the worker documents as sent only sometimes is `Option<T>` with
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
pub const PROTOCOL: u64 = 10;

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
    /// Optional (the worker's default: 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Optional (the worker's default: 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// `sample`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleResult {
    pub task: String,
    pub traces: Vec<Value>,
    pub attempts: u64,
}

// ---- tune ---------------------------------------------------------------------------------

/// The drift control of the exact-hit check: each window in which the best exact seed
/// re-measured slower than its cached latency by more than the tolerance is followed by a
/// window of the runner-up record of the same workload. Both drifts are the pooled median of the fresh
/// runs over the cached latency; the hit holds when its drift is at most the control's times
/// (1 + tolerance): the machine runs the workload slower now, not this schedule alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactControl {
    /// The control's cached latency.
    pub cached_s: f64,
    /// The median of each of the control's windows.
    pub windows_s: Vec<f64>,
    pub control_drift: f64,
    pub hit_drift: f64,
    pub held: bool,
}

/// Why a `tune` call stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The best seed replayed `exact` re-measured within `exact_tolerance` of `cached_latency_s`.
    ExactHit,
    /// `patience_rounds` search rounds in a row did not improve the best.
    Patience,
    /// `max_trials` were measured.
    Budget,
    /// The evolutionary search produced no more candidates.
    Exhausted,
}

impl StopReason {
    /// The protocol's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::ExactHit => "exact_hit",
            StopReason::Patience => "patience",
            StopReason::Budget => "budget",
            StopReason::Exhausted => "exhausted",
        }
    }
}

/// `tune`'s `cost_model`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostModelKind {
    Xgb,
    Random,
}

/// `tune`'s params. The first fields are required by the worker; the `Option`s are the
/// documented optional ones (absent: the worker's default, PROTOCOL.md's table). `Default`
/// exists so that callers can fill the optional fields with `..TuneRequest::default()`; the
/// required ones must always be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TuneRequest {
    pub task: Value,
    pub target: Value,
    /// MetaSchedule's logs go to `work_dir/logs/`.
    pub work_dir: PathBuf,
    /// Best first.
    pub seeds: Vec<Seed>,
    /// Measured candidates in all, seeds included.
    pub max_trials: Trials,
    pub trials_per_round: Trials,
    /// 0 turns patience off.
    pub patience_rounds: u64,
    /// Relative, for the exact hit.
    pub exact_tolerance: f64,
    /// Optional: the cached mean latency of the exact-hit record, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_latency_s: Option<f64>,
    /// Optional, with `cached_latency_s`: the cached latency of the runner-up exact seed,
    /// the control of the hit check (a hit that misses its windows still ends the task when
    /// the control re-measured slower by as much).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_latency_s: Option<f64>,
    /// Optional: the latency at which more search is not expected to pay (neighbour seeds:
    /// the FLOP rate their source tasks reached); reaching it within `exact_tolerance` stops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal_latency_s: Option<f64>,
    /// Optional: records returned (worker default 32).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u64>,
    /// Optional: MetaSchedule's random state (worker default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Optional (worker default 300).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builder_timeout_s: Option<f64>,
    /// Optional (worker default 60).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_timeout_s: Option<f64>,
    /// Optional: `ms.runner.EvaluatorConfig` fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner: Option<Value>,
    /// Optional: `EvolutionarySearch` arguments (`population_size`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evolutionary: Option<Value>,
    /// Optional (worker default xgb).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_model: Option<CostModelKind>,
    /// Optional: the warm-start file of the XGB cost model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_model_file: Option<PathBuf>,
    /// Optional (worker default 4096).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_model_max_samples: Option<u64>,
    /// Optional: how many of the best records get fresh timing runs before they are
    /// returned (worker default 3; 0 turns re-measuring off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remeasure_top: Option<u64>,
    /// Optional: fresh timing runs per re-measured record and for the exact-hit seed
    /// (worker default 5, at least 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remeasure_repeats: Option<u64>,
    /// Optional: the most re-measurements (windows) of the exact-hit seed, taken one after
    /// the other until one is within `exact_tolerance` (worker default 6, 1 to 64; the seed is built once for them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_windows: Option<u64>,
    /// Optional: windows of re-measurement of the best record before it is returned for
    /// write-back, one after the other, their runs pooled (worker default 3, 1 to 64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writeback_windows: Option<u64>,
    /// Optional: measure on the devices of this RPC tracker instead of this machine
    /// (absent: here). Candidates are built here either way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc: Option<RpcTracker>,
}

/// Devices registered with a TVM RPC tracker under one key, and how many of them one
/// `tune` measures on at once (`tune`'s `rpc`).
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

/// Where a tuning record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordOrigin {
    Seed,
    Search,
}

/// One of MetaSchedule's top records of the tuned workload.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneRecord {
    /// Trace JSON with its postprocessing instructions.
    pub trace: Value,
    /// The fresh runs when `remeasured`, else the search's measurement(s).
    pub run_secs: Vec<f64>,
    /// The median of `run_secs` (protocol 2 had the mean, `mean_s`).
    pub median_s: f64,
    /// `(max - min) / median` of `run_secs`; 0 for a single run.
    pub spread: f64,
    /// Whether `run_secs` are `remeasure_repeats` fresh runs after the search.
    pub remeasured: bool,
    pub origin: RecordOrigin,
}

/// The timing settings a `tune` call measured with.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSettings {
    /// `EvaluatorConfig` of the search's measurements.
    pub number: u64,
    pub repeat: u64,
    pub min_repeat_ms: u64,
    pub enable_cpu_cache_flush: bool,
    /// Records re-measured at the end, and fresh runs (repeats) per re-measurement.
    pub remeasure_top: u64,
    pub remeasure_repeats: u64,
    /// The most windows of the exact-hit check.
    pub exact_windows: u64,
    /// Windows of re-measurement of the best record before write-back.
    pub writeback_windows: u64,
    /// The TVM runtime's CPU threads of the measurements (`TVM_NUM_THREADS`, by default the
    /// physical cores); `null` on an RPC device, whose server chooses its own.
    #[serde(deserialize_with = "nullable")]
    pub threads: Option<u64>,
}

/// One measured batch of a `tune` call (the seed batch included).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TuneRound {
    /// Seconds since the call started.
    pub elapsed_s: f64,
    /// Trials measured so far.
    pub trials: Trials,
    /// The best mean latency so far; `null` while nothing measured successfully.
    #[serde(deserialize_with = "nullable")]
    pub best_s: Option<f64>,
    /// Seconds of this round in candidate generation (seeds' replay or the evolutionary
    /// search, cost-model predictions included), building, running (re-measuring the
    /// exact-hit seed included), and the cost model's update.
    pub search_s: f64,
    pub build_s: f64,
    pub run_s: f64,
    pub cost_model_s: f64,
}

/// `tune`'s cost-model warm start and save.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostModelReport {
    pub warm_samples: u64,
    pub saved_samples: u64,
    pub errors: Vec<String>,
}

/// `tune`'s result.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneResult {
    pub task: String,
    #[serde(deserialize_with = "decimal_u64")]
    pub structural_hash: u64,
    /// Best (lowest mean) first.
    pub records: Vec<TuneRecord>,
    pub seeds_tried: Trials,
    pub seeds_failed: Trials,
    pub seeds_duplicate: Trials,
    pub seeds_skipped: Trials,
    pub seeds_measured: Trials,
    pub seed_modes: BTreeMap<ReplayMode, Trials>,
    /// The first few replay errors.
    pub seed_errors: Vec<String>,
    /// `null` when no seed measured successfully.
    #[serde(deserialize_with = "nullable")]
    pub seed_best_s: Option<f64>,
    pub trials: Trials,
    pub rounds: u64,
    /// The first record's `median_s`; `null` when nothing measured successfully.
    #[serde(deserialize_with = "nullable")]
    pub best_s: Option<f64>,
    pub stopped: StopReason,
    pub history: Vec<TuneRound>,
    pub runner: RunnerSettings,
    /// The median of the exact seed's re-measurement that the exact-hit check compared
    /// with `cached_latency_s`; `null` when no such check ran.
    #[serde(deserialize_with = "nullable")]
    pub exact_seed_remeasured_s: Option<f64>,
    /// The median of each window of the exact-hit check, in order (empty: no check ran).
    pub exact_windows_s: Vec<f64>,
    /// The drift control of an exact-hit check that missed a window (`null`: none ran).
    #[serde(deserialize_with = "nullable")]
    pub exact_control: Option<ExactControl>,
    /// Measurements that failed (a device that dropped out, a timeout, a crashed run), the
    /// search's and the re-measurements' alike.
    pub failed_runs: Trials,
    /// The first few distinct messages of those failures, one line each.
    pub run_errors: Vec<String>,
    pub cost_model: CostModelReport,
    pub wall_s: f64,
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
    /// Optional: timing repeats (worker default 20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u64>,
    /// Optional: runs per repeat (worker default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// Optional: the inputs' random seed (worker default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
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
    /// Optional: timing runs (worker default 50).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u64>,
    /// Optional: calls per timing run (worker default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// Optional: the inputs' random seed (worker default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Optional: a module (JSON as `build_and_measure` takes it) built untuned and timed too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untuned: Option<Value>,
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
    pub wall_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tune_result() -> Value {
        json!({
            "task": "t", "structural_hash": "18446744073709551615",
            "records": [{"trace": [[], []], "run_secs": [1e-4, 1.1e-4, 0.9e-4], "median_s": 1e-4,
                         "spread": 0.2, "remeasured": true, "origin": "seed"}],
            "seeds_tried": 1, "seeds_failed": 0, "seeds_duplicate": 0, "seeds_skipped": 0,
            "seeds_measured": 1, "seed_modes": {"exact": 1}, "seed_errors": [],
            "seed_best_s": 1e-4, "trials": 1, "rounds": 1, "best_s": null,
            "stopped": "exact_hit",
            "history": [{"elapsed_s": 1.0, "trials": 1, "best_s": null, "search_s": 0.1,
                         "build_s": 0.3, "run_s": 0.2, "cost_model_s": 0.0}],
            "runner": {"number": 3, "repeat": 1, "min_repeat_ms": 100,
                       "enable_cpu_cache_flush": false, "remeasure_top": 3, "remeasure_repeats": 5, "exact_windows": 6, "writeback_windows": 3,
                       "threads": 2},
            "exact_seed_remeasured_s": 1e-4, "exact_windows_s": [2e-4, 1e-4], "failed_runs": 1,
            "exact_control": {"cached_s": 2e-4, "windows_s": [2.4e-4, 2.5e-4],
                              "control_drift": 1.22, "hit_drift": 1.2, "held": true},
            "run_errors": ["RemoteRunner (key 'k' at tracker h:1): An exception occurred"],
            "cost_model": {"warm_samples": 0, "saved_samples": 0, "errors": []},
            "wall_s": 2.0
        })
    }

    fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn tune_result_decodes() {
        let r: TuneResult = decode(tune_result()).unwrap();
        assert_eq!(r.structural_hash, u64::MAX);
        assert_eq!(r.stopped, StopReason::ExactHit);
        assert_eq!(r.seed_modes[&ReplayMode::Exact], 1);
        assert_eq!(r.records[0].origin, RecordOrigin::Seed);
        assert_eq!(r.best_s, None);
        assert_eq!(r.records[0].median_s, 1e-4);
        assert!(r.records[0].remeasured);
        assert_eq!(r.runner.remeasure_repeats, 5);
        assert_eq!(r.history[0].build_s, 0.3);
        assert_eq!(r.exact_seed_remeasured_s, Some(1e-4));
        assert_eq!(r.exact_windows_s, [2e-4, 1e-4]);
        let c = r.exact_control.as_ref().unwrap();
        assert_eq!((c.windows_s.len(), c.held), (2, true));
        assert!(c.hit_drift <= c.control_drift);
        assert_eq!(r.runner.exact_windows, 6);
        assert_eq!(r.runner.writeback_windows, 3);
        assert_eq!(r.runner.threads, Some(2));
        assert_eq!(r.failed_runs, 1);
        assert_eq!(r.run_errors.len(), 1);
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
        let mut v = tune_result();
        v.as_object_mut().unwrap().remove("stopped");
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("missing field `stopped`"));
        // a nullable field must still be present
        let mut v = tune_result();
        v.as_object_mut().unwrap().remove("best_s");
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("missing field `best_s`"));
        let mut v = tune_result();
        v["history"][0].as_object_mut().unwrap().remove("best_s");
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("missing field `best_s`"));
        let mut v = tune_result();
        v["trails"] = json!(3);
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("unknown field `trails`"));
        let mut v = tune_result();
        v["records"][0]["score"] = json!(1);
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("unknown field `score`"));
        let mut v = tune_result();
        v["stopped"] = json!("?");
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("unknown variant `?`"));
        let mut v = tune_result();
        v["seed_modes"] = json!({"fuzzy": 1});
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("unknown variant `fuzzy`"));
        let mut v = tune_result();
        v["structural_hash"] = json!("0x12");
        assert!(decode::<TuneResult>(v)
            .unwrap_err()
            .contains("not a decimal u64 hash"));
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
        let b: BenchResult =
            decode(json!({"latency_ms": range.clone(), "untuned_latency_ms": null, "wall_s": 3.0}))
                .unwrap();
        assert_eq!(b.latency_ms.p90, 2.5);
        assert_eq!(b.untuned_latency_ms, None);
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
    fn requests_send_only_what_is_set() {
        let r = TuneRequest {
            task: json!({}),
            target: json!({"kind": "llvm"}),
            work_dir: "/w".into(),
            seeds: vec![
                Seed::trace(json!([[], []])),
                Seed {
                    source_workload: Some("wl".into()),
                    ..Seed::trace(json!([[], []]))
                },
            ],
            max_trials: 8,
            trials_per_round: 4,
            patience_rounds: 0,
            exact_tolerance: 0.05,
            cached_latency_s: None,
            control_latency_s: None,
            goal_latency_s: None,
            top_k: None,
            seed: None,
            builder_timeout_s: None,
            runner_timeout_s: None,
            runner: None,
            evolutionary: Some(json!({"population_size": 64})),
            cost_model: Some(CostModelKind::Random),
            cost_model_file: None,
            cost_model_max_samples: None,
            remeasure_top: None,
            remeasure_repeats: None,
            exact_windows: None,
            writeback_windows: None,
            rpc: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "cost_model",
                "evolutionary",
                "exact_tolerance",
                "max_trials",
                "patience_rounds",
                "seeds",
                "target",
                "task",
                "trials_per_round",
                "work_dir"
            ]
        );
        assert_eq!(v["cost_model"], "random");
        assert_eq!(v["seeds"][0], json!({"trace": [[], []]}));
        assert_eq!(v["seeds"][1]["source_workload"], "wl");
        let b = BuildRequest {
            module: json!({}),
            records: BuildRecords::Database("/db".into()),
            target: json!({"kind": "llvm"}),
            repeat: Some(3),
            number: None,
            seed: None,
            atol_rel: None,
            rtol: None,
            export: None,
        };
        assert_eq!(
            serde_json::to_value(&b).unwrap(),
            json!({"module": {}, "records": "/db", "target": {"kind": "llvm"}, "repeat": 3})
        );
    }
}
