//! Every knob of a tuning run, with its default, in one place.

use std::path::PathBuf;
use tgc_passes::seeding::SeedPolicy;
pub use tgc_tvm::RpcTracker;

/// Where the XGB cost model that guides the search comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum CostModel {
    /// Carried from task to task: across runs in a file beside the cache, one per target
    /// and toolchain; with `no_cache` only within the run, as MetaSchedule's own
    /// `tune_tasks` trains one model over the tasks it tunes.
    Shared,
    /// This file, loaded by every task and updated after it.
    File(PathBuf),
    /// A cold model per task.
    Cold,
}

/// The configuration of one tuning run.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneConfig {
    /// `llvm` (this machine: its CPU, triple and physical cores), `llvm-generic` (portable
    /// code), `cuda`, or a TVM target JSON.
    pub target: String,
    /// The cache: a file or a `postgres://` URL; `None`: `$TGC_CACHE`, else the user cache dir.
    pub cache: Option<PathBuf>,
    /// Read the cache, never write it (a CI job consuming a team's cache): opened
    /// read-only, no write-back.
    pub cache_read_only: bool,
    /// Stock MetaSchedule with the same budget: no cache reads or writes, no seeds, no early
    /// stop.
    pub no_cache: bool,
    /// The seed policy: trials per task, seeds, exact-hit tolerance, patience.
    pub policy: SeedPolicy,
    /// Candidates per search round.
    pub trials_per_round: i64,
    /// MetaSchedule's evolutionary population.
    pub population: i64,
    /// Tune at most this many distinct tasks, the most frequent first.
    pub max_tasks: Option<usize>,
    /// A trial budget for the whole run, spread across tasks by their share of the model's
    /// latency (see `budget`); replaces the per-task trials of the policy.
    pub run_trials: Option<u64>,
    /// A wall-time budget for tuning, in seconds, spread the same way.
    pub time_budget_s: Option<f64>,
    pub cost_model: CostModel,
    /// Build the whole model with the tuned schedules, time it and check its outputs.
    pub measure: bool,
    /// Where MetaSchedule's logs and the worker log go; `None`: a temp dir.
    pub work_dir: Option<PathBuf>,
    /// The model's name in the records' provenance (the CLI passes the path it was given).
    pub model_name: String,
    /// Measure on the devices registered with this TVM RPC tracker under its key instead
    /// of this machine (candidates are still built here). `target` then describes the
    /// device, and its records are kept apart from this machine's: the key goes into the
    /// target's `tag` (see `driver::device_target`).
    pub rpc: Option<RpcTracker>,
}

impl TuneConfig {
    pub const DEFAULT_TRIALS_PER_ROUND: i64 = 16;
    pub const DEFAULT_POPULATION: i64 = 512;

    /// The defaults for a model called `model_name`.
    pub fn new(model_name: impl Into<String>) -> TuneConfig {
        TuneConfig {
            target: "llvm".into(),
            cache: None,
            cache_read_only: false,
            no_cache: false,
            policy: SeedPolicy::DEFAULT,
            trials_per_round: Self::DEFAULT_TRIALS_PER_ROUND,
            population: Self::DEFAULT_POPULATION,
            max_tasks: None,
            run_trials: None,
            time_budget_s: None,
            cost_model: CostModel::Shared,
            measure: true,
            work_dir: None,
            model_name: model_name.into(),
            rpc: None,
        }
    }
}
