//! What a run did: per task and in total, as the `tgc.tune/1` JSON report.

use crate::rules::{ExactControl, StopReason};
use crate::search::{RunnerSettings, SearchOutcome, TuneRound};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use tgc_cache::Toolchain;
use tgc_canonicalize::Task;
use tgc_passes::seeding::{tier_name, SeedPlan, Tier};
use tgc_tvm::{Applied, BuildResult, ReplayMode, RpcDevices, RpcTracker, Trials};

/// What happened to one task.
#[derive(Clone, Debug)]
pub struct TaskReport {
    pub name: String,
    pub occurrences: usize,
    /// The tier the seeds came from (`None`: a plain search).
    pub tier: Option<Tier>,
    pub seeds_tried: Trials,
    pub seeds_failed: Trials,
    pub trials: Trials,
    /// Measurements that failed (a device that dropped out, a timeout, a crashed run), the
    /// re-measurements' included, and the first few messages.
    pub failed_runs: Trials,
    pub run_errors: Vec<String>,
    /// Trials whose build the build guard killed (`rules::BuildGuard`).
    pub builds_killed: Trials,
    /// Schedules the search proposed again after they were measured, dropped unmeasured.
    pub repeats_dropped: Trials,
    /// Windows measured again: under other load, or far slower than their trial
    /// (`rules::retake_window`).
    pub windows_retaken: Trials,
    /// Trials measured under other load (`rules::loaded`).
    pub trials_loaded: Trials,
    pub best_s: Option<f64>,
    pub stopped: StopReason,
    /// The median of each window of the exact-hit check (empty: no check ran).
    pub exact_windows_s: Vec<f64>,
    /// The drift control of an exact-hit check that missed a window.
    pub exact_control: Option<ExactControl>,
    /// The timing settings the worker measured with.
    pub runner: RunnerSettings,
    pub wall_s: f64,
    /// Of `wall_s`, the re-measurement of the best records before write-back.
    pub writeback_s: f64,
    /// Records inserted or replaced in the cache.
    pub written: usize,
    /// Records the worker returned re-measured: the ones offered for write-back.
    pub remeasured: usize,
    /// Per measured batch: seconds into the task, trials so far, best so far.
    pub history: Vec<TuneRound>,
    /// How the measured seeds replayed.
    pub seed_modes: BTreeMap<ReplayMode, Trials>,
    /// Measurements the warm-started cost model held when the task began.
    pub cost_model_warm: u64,
    /// Trials of earlier runs behind the exact hit this task resumed (0: none).
    pub prior_trials: u64,
    /// The TVM structural hash of the task's workload, from the worker's `lower`.
    pub workload_hash: u64,
    /// Where the first seed's record came from: a MetaSchedule import or a tgc run.
    pub seed_source: Value,
    /// The plan the task executed.
    pub plan: SeedPlan,
    pub plan_source: PlanSource,
    /// Under a run budget: the trials the task was allocated at its turn, and the share a
    /// cold run would give it (the effort an exact hit's record needs to be final).
    pub budget: Option<TaskBudget>,
    /// The rounds the run gave the task after every task's turn (`driver`'s second turns),
    /// counted in `trials`, `wall_s`, `best_s` and `history`.
    pub second_turns: Option<SecondTurns>,
}

/// A task's second turns: what the run left after every task's turn, a round at a time.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SecondTurns {
    pub turns: u64,
    pub trials: Trials,
    pub wall_s: f64,
    /// Records of new schedules the turns re-measured and wrote back (the seeds are not:
    /// `rules::WritebackScope::BeyondSeeds`), and the seconds that took.
    pub remeasured: usize,
    pub writeback_s: f64,
    /// The task's best after its first turn.
    pub best_before_s: Option<f64>,
}

impl TaskReport {
    /// The report of `task` after its search `result` under `plan` (its budget, if any, is
    /// set by the caller).
    pub(crate) fn of(
        task: &Task,
        plan: SeedPlan,
        result: SearchOutcome,
        written: usize,
        workload_hash: u64,
        seed_source: Value,
        plan_source: PlanSource,
    ) -> TaskReport {
        TaskReport {
            name: task.name.clone(),
            occurrences: task.occurrences,
            tier: plan.tier,
            seeds_tried: result.seeds_tried,
            seeds_failed: result.seeds_failed,
            trials: result.trials,
            failed_runs: result.failed_runs,
            run_errors: result.run_errors,
            builds_killed: result.builds_killed,
            repeats_dropped: result.repeats_dropped,
            windows_retaken: result.windows_retaken,
            trials_loaded: result.trials_loaded,
            best_s: result.best_s,
            stopped: result.stopped,
            exact_windows_s: result.exact_windows_s,
            exact_control: result.exact_control,
            runner: result.runner,
            wall_s: result.wall_s,
            writeback_s: result.writeback_s,
            written,
            remeasured: result.records.iter().filter(|r| r.remeasured).count(),
            history: result.history,
            seed_modes: result.seed_modes,
            cost_model_warm: result.cost_model.warm_samples,
            prior_trials: plan.prior_trials.max(0) as u64,
            workload_hash,
            seed_source,
            plan_source,
            plan,
            budget: None,
            second_turns: None,
        }
    }

    /// Takes in `later`, a second turn of the same task: its trials, time, records and
    /// rounds add to this report's (its rounds' times and trials after this report's); the
    /// plan, tier and how the first turn stopped stay as they were.
    pub(crate) fn absorb(&mut self, later: TaskReport) {
        let before = self.second_turns.unwrap_or(SecondTurns {
            turns: 0,
            trials: 0,
            wall_s: 0.0,
            remeasured: 0,
            writeback_s: 0.0,
            best_before_s: self.best_s,
        });
        self.second_turns = Some(SecondTurns {
            turns: before.turns + 1,
            trials: before.trials + later.trials,
            wall_s: before.wall_s + later.wall_s,
            remeasured: before.remeasured + later.remeasured,
            writeback_s: before.writeback_s + later.writeback_s,
            ..before
        });
        for mut round in later.history {
            round.elapsed_s += self.wall_s;
            round.trials += self.trials;
            self.history.push(round);
        }
        self.seeds_tried += later.seeds_tried;
        self.seeds_failed += later.seeds_failed;
        self.trials += later.trials;
        self.failed_runs += later.failed_runs;
        self.run_errors.extend(later.run_errors);
        self.builds_killed += later.builds_killed;
        self.repeats_dropped += later.repeats_dropped;
        self.windows_retaken += later.windows_retaken;
        self.trials_loaded += later.trials_loaded;
        self.best_s = best_of(self.best_s, later.best_s);
        self.wall_s += later.wall_s;
        self.writeback_s += later.writeback_s;
        self.written += later.written;
        self.remeasured += later.remeasured;
        for (mode, n) in later.seed_modes {
            *self.seed_modes.entry(mode).or_default() += n;
        }
    }
}

/// Where a run's (or a task's) tuning seconds went.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct TimeSplit {
    /// Candidate generation: the seeds' replay, the evolutionary search and its cost-model
    /// predictions.
    pub search_s: f64,
    /// Building the trials (and the exact-hit check's candidates).
    pub build_s: f64,
    /// Running them, the exact-hit check's windows included.
    pub run_s: f64,
    /// Updating the cost model.
    pub cost_model_s: f64,
    /// Re-measuring the best records before write-back, their builds included.
    pub writeback_s: f64,
    /// The rest of the wall time: planning, opening and closing sessions, cache writes.
    pub other_s: f64,
}

impl TimeSplit {
    /// The split of `wall_s` over `tasks`' rounds and write-backs; what they do not
    /// account for is `other_s`.
    pub fn of<'a>(tasks: impl IntoIterator<Item = &'a TaskReport>, wall_s: f64) -> TimeSplit {
        let mut t = TimeSplit::default();
        for r in tasks {
            for h in &r.history {
                t.search_s += h.search_s;
                t.build_s += h.build_s;
                t.run_s += h.run_s;
                t.cost_model_s += h.cost_model_s;
            }
            t.writeback_s += r.writeback_s;
        }
        let accounted = t.search_s + t.build_s + t.run_s + t.cost_model_s + t.writeback_s;
        t.other_s = (wall_s - accounted).max(0.0);
        t
    }
}

/// The better of two best latencies, either perhaps unknown.
pub(crate) fn best_of(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A task the run did not tune (the run budget or `--max-tasks` left it out), as the tuned
/// model was built: with the first of its cached or transferred records that replayed, as
/// `tgc build` does at zero trials, or TVM's default schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct UntunedTask {
    pub name: String,
    pub occurrences: usize,
    /// The tier its records came from (`None`: the cache has nothing for it).
    pub tier: Option<Tier>,
    /// Records offered to the build.
    pub records: usize,
    /// How the applied record went in (`None`: TVM's default schedule).
    pub applied: Option<Applied>,
}

/// A task's part of a run budget (`budget.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskBudget {
    pub allocated: u64,
    pub cold_share: u64,
}

/// Where a task's executed plan came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanSource {
    /// The run's pipeline (`tgc-cpu`, `tgc-gpu`); `replanned`: annotate-cache and
    /// seed-schedules ran again over the task just before it was tuned and changed its plan
    /// (records written earlier in the run, or found by its TVM hash).
    Pipeline { replanned: bool },
    /// The input IR carried the plan; executed as written.
    Input,
}

impl PlanSource {
    fn as_str(self) -> &'static str {
        match self {
            PlanSource::Pipeline { replanned: false } => "pipeline",
            PlanSource::Pipeline { replanned: true } => "replanned",
            PlanSource::Input => "input",
        }
    }
}

/// A plan as the report writes it: the `tgc.seed_plan` attribute's fields.
fn plan_json(p: &SeedPlan) -> Value {
    json!({
        "tier": tier_name(p.tier),
        "seeds": p.seeds,
        "trials": p.trials,
        "patience": p.patience,
        "tolerance": p.tolerance,
        "cached_latency_s": p.cached_latency_s,
        "control_latency_s": p.control_latency_s,
        "prior_trials": p.prior_trials,
        "hit_trials": p.hit_trials,
        "goal_latency_s": p.goal_latency_s,
    })
}

/// The whole run.
#[derive(Clone, Debug)]
pub struct Report {
    pub model: String,
    /// The target as requested and as TVM spells it (the cache's key).
    pub target_spelling: Value,
    pub target: Value,
    pub toolchain: Toolchain,
    pub no_cache: bool,
    pub trials_per_task: i64,
    pub cost_model_file: Option<PathBuf>,
    pub tasks: Vec<TaskReport>,
    /// Tasks the run budget did not reach (TVM's default schedules).
    pub skipped: Vec<String>,
    pub run_trials: Option<u64>,
    pub time_budget_s: Option<f64>,
    /// From the first task's start to the last task's end.
    pub tuning_wall_s: f64,
    /// The worker's one-time set-up of tuning, before the first task (not in
    /// `tuning_wall_s`).
    pub prepare_tuning_s: f64,
    /// The worker's `build_and_measure` result, when the model was measured.
    pub end_to_end: Option<BuildResult>,
    /// The tasks the run did not tune, built from their best cached or transferred
    /// schedules where the cache has any (when the model was measured).
    pub untuned: Vec<UntunedTask>,
    /// Seconds spent choosing the untuned tasks' records (not in `tuning_wall_s`).
    pub untuned_s: f64,
    /// With `--rpc`: the tracker and key measured on, and what the tracker offered under
    /// the key when the run started.
    pub rpc: Option<(RpcTracker, RpcDevices)>,
}

impl Report {
    /// Tasks per seed tier.
    pub fn tasks_by_tier(&self) -> BTreeMap<String, usize> {
        let mut tiers = BTreeMap::new();
        for r in &self.tasks {
            *tiers.entry(tier_name(r.tier).to_string()).or_default() += 1;
        }
        tiers
    }

    /// Where `tuning_wall_s` went.
    pub fn time_split(&self) -> TimeSplit {
        TimeSplit::of(&self.tasks, self.tuning_wall_s)
    }

    pub fn total_trials(&self) -> u64 {
        self.tasks.iter().map(|r| r.trials).sum()
    }

    /// Measurements that failed, over every task.
    pub fn total_failed_runs(&self) -> u64 {
        self.tasks.iter().map(|r| r.failed_runs).sum()
    }

    /// Builds the build guard killed, over every task.
    pub fn total_builds_killed(&self) -> u64 {
        self.tasks.iter().map(|r| r.builds_killed).sum()
    }

    /// `Err` with the worker's account when the tuned model's outputs differ from an
    /// untuned build's.
    pub fn check_outputs(&self) -> Result<(), String> {
        outputs_check(&self.model, "tuned", self.end_to_end.as_ref())
    }

    /// The JSON report (schema `tgc.tune/1`).
    pub fn to_json(&self) -> Value {
        let tc = &self.toolchain;
        json!({
            "schema": "tgc.tune/1",
            "model": self.model,
            "target": self.target,
            "target_spelling": self.target_spelling,
            "toolchain": {
                "tvm": tc.tvm,
                "tvm_ffi": tc.tvm_ffi,
                "llvm": tc.llvm,
                "pinned": tc.is_pinned(),
            },
            "no_cache": self.no_cache,
            "trials_per_task": self.trials_per_task,
            "budget": {
                "trials": self.run_trials,
                "time_s": self.time_budget_s,
                "skipped_tasks": self.skipped,
            },
            "cost_model_file": self.cost_model_file,
            "measured_on": match &self.rpc {
                None => json!({"kind": "local"}),
                Some((t, d)) => json!({
                    "kind": "rpc",
                    "tracker": t.address(),
                    "key": t.key,
                    "sessions": t.sessions,
                    "devices_at_start": {"free": d.free, "pending": d.pending, "servers": d.servers},
                }),
            },
            "tasks": self.tasks.iter().map(|r| json!({
                "name": r.name,
                "occurrences": r.occurrences,
                "tier": tier_name(r.tier),
                "plan": plan_json(&r.plan),
                "plan_source": r.plan_source.as_str(),
                "seeds_tried": r.seeds_tried,
                "seeds_failed": r.seeds_failed,
                "trials": r.trials,
                "failed_runs": r.failed_runs,
                "run_errors": r.run_errors,
                "builds_killed": r.builds_killed,
                "repeats_dropped": r.repeats_dropped,
                "windows_retaken": r.windows_retaken,
                "trials_loaded": r.trials_loaded,
                "best_latency_s": r.best_s,
                "stopped": r.stopped.as_str(),
                "exact_windows_s": r.exact_windows_s,
                "exact_control": r.exact_control,
                "runner": r.runner,
                "wall_s": r.wall_s,
                "seconds": TimeSplit::of([r], r.wall_s),
                "records_written": r.written,
                "records_remeasured": r.remeasured,
                "seed_modes": r.seed_modes,
                "cost_model_warm_samples": r.cost_model_warm,
                "prior_trials": r.prior_trials,
                "budget": r.budget.map(|b| json!({
                    "allocated": b.allocated,
                    "cold_share": b.cold_share,
                })),
                "second_turns": r.second_turns,
                "workload_hash": r.workload_hash.to_string(),
                "seed_source": r.seed_source,
                "history": r.history,
            })).collect::<Vec<_>>(),
            "totals": {
                "tuning_wall_s": self.tuning_wall_s,
                "prepare_tuning_s": self.prepare_tuning_s,
                "seconds": self.time_split(),
                "trials": self.total_trials(),
                "failed_runs": self.total_failed_runs(),
                "builds_killed": self.total_builds_killed(),
                "repeats_dropped": self.tasks.iter().map(|r| r.repeats_dropped).sum::<u64>(),
                "windows_retaken": self.tasks.iter().map(|r| r.windows_retaken).sum::<u64>(),
                "trials_loaded": self.tasks.iter().map(|r| r.trials_loaded).sum::<u64>(),
                "tasks_by_tier": self.tasks_by_tier(),
            },
            "untuned_tasks": self.untuned.iter().map(|u| json!({
                "name": u.name,
                "occurrences": u.occurrences,
                "tier": tier_name(u.tier),
                "records": u.records,
                "applied": u.applied,
            })).collect::<Vec<_>>(),
            "untuned_s": self.untuned_s,
            "end_to_end": self.end_to_end.as_ref().map_or(Value::Null, |m| json!(m)),
        })
    }
}

/// `Err` naming `model` when the `what` (tuned, built) model's outputs differ from an untuned
/// build's in `measured`; `Ok` when they match or were not compared.
pub(crate) fn outputs_check(
    model: &str,
    what: &str,
    measured: Option<&BuildResult>,
) -> Result<(), String> {
    match measured {
        Some(m) if !m.outputs_match => Err(format!(
            "{model}: the {what} model's outputs differ from an untuned build's ({})",
            m.mismatch.as_deref().unwrap_or("no mismatch given")
        )),
        _ => Ok(()),
    }
}
