//! Every knob of a tuning run, with its default, in one place ([`TuneConfig`]), and the
//! options a front end (the CLI, the Python package) gives a run by their flag names
//! ([`TuneOptions`]), validated once.

use std::path::PathBuf;
use tgc_cache::CacheLocation;
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

/// How a run measures: every knob of the worker's tuning session (the worker has no
/// defaults of its own) and of the re-measurements the search rules ask for.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchSettings {
    /// MetaSchedule's random state.
    pub seed: u64,
    /// How a trial is timed.
    pub evaluator: tgc_tvm::Evaluator,
    /// The most seconds one build may take: the build guard's ceiling.
    pub builder_timeout_s: f64,
    pub runner_timeout_s: f64,
    /// The build guard ([`crate::rules::BuildGuard`]): once the run has this many builds,
    /// a build is killed after `factor` times their 90th percentile, at least `floor_s`.
    pub build_guard: GuardSettings,
    /// Records read back from a task's search for write-back.
    pub top_k: u64,
    /// Of those, re-measured before write-back (0: none, nothing written).
    pub remeasure_top: usize,
    /// Fresh runs in one window of re-measurement (the exact-hit check's too).
    pub remeasure_repeats: u64,
    /// The most windows of the exact-hit check, the control's included.
    pub exact_windows: usize,
    /// Windows of re-measurement of the best record before write-back.
    pub writeback_windows: usize,
    /// Windows taken again: measured under other load, or far slower than their trial
    /// ([`crate::rules::retake_window`]).
    pub window_retake: RetakeSettings,
    /// The most measurements the cost-model file keeps.
    pub cost_model_max_samples: u64,
}

impl SearchSettings {
    /// The defaults: the one place they are written.
    pub const DEFAULT: SearchSettings = SearchSettings {
        seed: 1,
        evaluator: tgc_tvm::Evaluator {
            number: 3,
            repeat: 1,
            min_repeat_ms: 100,
            enable_cpu_cache_flush: false,
        },
        // a build can take minutes on a loaded 2-core machine; TVM's 30 s kills them
        builder_timeout_s: 300.0,
        runner_timeout_s: 60.0,
        build_guard: GuardSettings {
            min_builds: 8,
            factor: 10.0,
            floor_s: 30.0,
        },
        top_k: 32,
        remeasure_top: 3,
        remeasure_repeats: 5,
        exact_windows: 6,
        writeback_windows: 3,
        // quiet, this VM's other processes take at most 0.04 of a core during a window
        // (one busy process takes one), and a write-back window's median is at most 1.28
        // times its trial (0.13-3.1 when a slowdown of seconds met one or the other)
        window_retake: RetakeSettings {
            max_cores: 0.25,
            max_slowdown: 1.5,
            retakes: 3,
            pause_s: 1.0,
        },
        cost_model_max_samples: 4096,
    };
}

/// When a window is measured again (see [`SearchSettings::window_retake`]): a window
/// during which other work took more than `max_cores`, or a write-back window whose median
/// is more than `max_slowdown` times the candidate's trial, is taken again after `pause_s`
/// seconds, at most `retakes` times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetakeSettings {
    pub max_cores: f64,
    pub max_slowdown: f64,
    pub retakes: usize,
    pub pause_s: f64,
}

/// The build guard's knobs (see [`SearchSettings::build_guard`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardSettings {
    pub min_builds: usize,
    pub factor: f64,
    pub floor_s: f64,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings::DEFAULT
    }
}

/// The configuration of one tuning run.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneConfig {
    /// `llvm` (this machine: its CPU, triple and physical cores), `llvm-generic` (portable
    /// code), `cuda`, or a TVM target JSON.
    pub target: String,
    /// The cache: a file or a `postgres://` URL; `None`: `$TGC_CACHE`, else the user cache dir.
    pub cache: Option<CacheLocation>,
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
    /// How candidates are measured and re-measured.
    pub search: SearchSettings,
    /// How the whole model is timed.
    pub model_timing: ModelTiming,
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
            search: SearchSettings::DEFAULT,
            model_timing: ModelTiming::DEFAULT,
            rpc: None,
        }
    }

    /// Whether the configuration can run: the one check of its values (front ends build it
    /// through [`TuneOptions::config`], and [`crate::tune`] checks again).
    pub fn check(&self) -> Result<(), String> {
        let p = &self.policy;
        if p.trials < 1 {
            return Err(format!(
                "--trials-per-task must be at least 1, got {}",
                p.trials
            ));
        }
        if self.trials_per_round < 1 || self.population < 1 {
            return Err(format!(
                "--trials-per-round and --population must be at least 1, got {} and {}",
                self.trials_per_round, self.population
            ));
        }
        if p.patience < 0 || p.seeded_patience < 0 {
            return Err(format!(
                "--patience and --seeded-patience must be at least 0, got {} and {}",
                p.patience, p.seeded_patience
            ));
        }
        if !(0.0..=10.0).contains(&p.tolerance) {
            return Err(format!(
                "--tolerance must be between 0 and 10, got {}",
                p.tolerance
            ));
        }
        if self.time_budget_s.is_some_and(|s| s.is_nan() || s <= 0.0) {
            return Err("--time-budget must be a positive number of seconds".into());
        }
        if self.cache_read_only && self.no_cache {
            return Err("--cache-read-only and --no-cache exclude each other".into());
        }
        Ok(())
    }
}

/// How the whole model is timed (the tuned build at the end of a run, `tgc build --check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelTiming {
    /// Timing runs (their median is the latency).
    pub repeat: u64,
    /// Calls per timing run.
    pub number: u64,
    /// The random inputs' seed.
    pub seed: u64,
}

impl ModelTiming {
    pub const DEFAULT: ModelTiming = ModelTiming {
        repeat: 20,
        number: 1,
        seed: 0,
    };
}

/// A run's options as a front end takes them, by the CLI's flag names (`trials_per_task` is
/// `--trials-per-task`); `None`/`false`: the default. [`TuneOptions::config`] turns them into
/// a [`TuneConfig`], with every check made there, once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TuneOptions {
    pub target: Option<String>,
    /// A file or a `postgres://` URL.
    pub cache: Option<String>,
    pub cache_read_only: bool,
    pub no_cache: bool,
    pub trials_per_task: Option<i64>,
    pub trials: Option<u64>,
    pub time_budget: Option<f64>,
    pub max_seeds: Option<usize>,
    pub patience: Option<i64>,
    pub seeded_patience: Option<i64>,
    pub tolerance: Option<f64>,
    pub trials_per_round: Option<i64>,
    pub population: Option<i64>,
    pub max_tasks: Option<usize>,
    /// The cost model's file.
    pub cost_model: Option<PathBuf>,
    pub no_cost_model_warm_start: bool,
    pub no_measure: bool,
    pub work_dir: Option<PathBuf>,
    /// `HOST:PORT` of an RPC tracker, with `rpc_key` and optionally `rpc_sessions`.
    pub rpc: Option<String>,
    pub rpc_key: Option<String>,
    pub rpc_sessions: Option<u32>,
}

impl TuneOptions {
    /// The run's configuration for `model_name`, checked ([`TuneConfig::check`]).
    pub fn config(&self, model_name: &str) -> Result<TuneConfig, String> {
        let d = TuneConfig::new(model_name);
        let p = SeedPolicy::DEFAULT;
        let config = TuneConfig {
            target: self.target.clone().unwrap_or(d.target),
            cache: self.cache.as_deref().map(CacheLocation::parse),
            cache_read_only: self.cache_read_only,
            no_cache: self.no_cache,
            policy: SeedPolicy {
                trials: self.trials_per_task.unwrap_or(p.trials),
                max_seeds: self.max_seeds.unwrap_or(p.max_seeds),
                tolerance: self.tolerance.unwrap_or(p.tolerance),
                patience: self.patience.unwrap_or(p.patience),
                seeded_patience: self.seeded_patience.unwrap_or(p.seeded_patience),
                ..p
            },
            trials_per_round: self.trials_per_round.unwrap_or(d.trials_per_round),
            population: self.population.unwrap_or(d.population),
            max_tasks: self.max_tasks,
            run_trials: self.trials,
            time_budget_s: self.time_budget,
            cost_model: match (&self.cost_model, self.no_cost_model_warm_start) {
                (Some(_), true) => {
                    return Err(
                        "--cost-model and --no-cost-model-warm-start exclude each other".into(),
                    )
                }
                (_, true) => CostModel::Cold,
                (Some(file), false) => CostModel::File(file.clone()),
                (None, false) => CostModel::Shared,
            },
            measure: !self.no_measure,
            work_dir: self.work_dir.clone(),
            rpc: self.rpc_tracker()?,
            ..d
        };
        config.check()?;
        Ok(config)
    }

    /// The tracker and key of `rpc`, `rpc_key` and `rpc_sessions`; one of them without the
    /// others is an error.
    fn rpc_tracker(&self) -> Result<Option<RpcTracker>, String> {
        match (&self.rpc, &self.rpc_key) {
            (Some(addr), Some(key)) => {
                RpcTracker::parse(addr, key, self.rpc_sessions.unwrap_or(1)).map(Some)
            }
            (Some(_), None) => {
                Err("--rpc needs --rpc-key: the key the devices registered under".into())
            }
            (None, Some(_)) => {
                Err("--rpc-key needs --rpc HOST:PORT: the tracker to measure through".into())
            }
            (None, None) if self.rpc_sessions.is_some() => {
                Err("--rpc-sessions needs --rpc HOST:PORT and --rpc-key".into())
            }
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_once_with_the_flags_named() {
        let c = TuneOptions::default().config("m").unwrap();
        assert_eq!(c, TuneConfig::new("m"));
        let bad = |o: TuneOptions, needle: &str| {
            let e = o.config("m").unwrap_err();
            assert!(e.contains(needle), "{e}");
            assert!(!e.contains('\n'));
        };
        bad(
            TuneOptions {
                trials_per_task: Some(0),
                ..TuneOptions::default()
            },
            "--trials-per-task must be at least 1, got 0",
        );
        bad(
            TuneOptions {
                rpc: Some("127.0.0.1:9190".into()),
                ..TuneOptions::default()
            },
            "--rpc needs --rpc-key",
        );
        bad(
            TuneOptions {
                rpc_key: Some("k".into()),
                ..TuneOptions::default()
            },
            "--rpc-key needs --rpc HOST:PORT",
        );
        bad(
            TuneOptions {
                rpc_sessions: Some(2),
                ..TuneOptions::default()
            },
            "--rpc-sessions needs --rpc",
        );
        bad(
            TuneOptions {
                rpc: Some("nohostport".into()),
                rpc_key: Some("k".into()),
                ..TuneOptions::default()
            },
            "expected HOST:PORT",
        );
        bad(
            TuneOptions {
                cache_read_only: true,
                no_cache: true,
                ..TuneOptions::default()
            },
            "exclude each other",
        );
        bad(
            TuneOptions {
                tolerance: Some(-0.1),
                ..TuneOptions::default()
            },
            "--tolerance must be between 0 and 10",
        );
        let c = TuneOptions {
            cache: Some("postgres://me@db/tgc".into()),
            rpc: Some("h:9190".into()),
            rpc_key: Some("k".into()),
            no_cost_model_warm_start: true,
            ..TuneOptions::default()
        }
        .config("m")
        .unwrap();
        assert!(c.cache.unwrap().is_server());
        assert_eq!(c.rpc.unwrap().sessions, 1);
        assert_eq!(c.cost_model, CostModel::Cold);
    }
}
