//! The run: partition and key the model, then per task lower, look up, plan, tune and write
//! back, then build and measure the whole model.

use crate::budget::{capped, hit_bar, Budget, Share};
use crate::config::{CostModel, TuneConfig};
use crate::observer::Observer;
use crate::report::{PlanSource, Report, TaskBudget, TaskReport};
use serde_json::{json, Value};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;
use tgc_cache::{
    Cache, CacheError, Candidate, NewRecord, Provenance, Target, TaskEntry, Toolchain, Trace,
    Workload,
};
use tgc_canonicalize::{extract_annotated_tasks, Task, TaskKey};
use tgc_ir::{Attr, Module};
use tgc_passes::annotate_cache::{CANDIDATES_ATTR, WORKLOAD_HASH_ATTR};
use tgc_passes::seed_schedules::{seed_plan, SEED_PLAN_ATTR};
use tgc_passes::seeding::{effort_suffices, CandidateRef, Outcome, SeedPlan, Tier};
use tgc_passes::target::resolve_target;
use tgc_passes::{Instrumentation, PassManager};
use tgc_pipelines::{build_pipeline_with, Overrides};
use tgc_tvm::{
    module_json, task_json, BridgeError, BuildRecords, BuildRequest, BuildResult, Built,
    ExportRequest, LowerRequest, LowerResult, RpcDevices, RpcTracker, Seed, StopReason, Trials,
    TuneRequest, TuneResult, Versions, Worker, WorkerConfig,
};

/// Why a run stopped. Each message is one line naming what it is about.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Cache(#[from] CacheError),
    #[error("{0}")]
    Worker(#[from] BridgeError),
    #[error("task {task}: {message}")]
    Task { task: String, message: String },
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
}

pub(crate) fn task_error(task: &str, e: impl std::fmt::Display) -> TuneError {
    TuneError::Task {
        task: task.to_string(),
        message: e.to_string(),
    }
}

/// Tunes `module` as `config` says, reporting progress to `observer`.
pub fn tune(
    mut module: Module,
    config: &TuneConfig,
    observer: &mut dyn Observer,
) -> Result<Report, TuneError> {
    if config.policy.trials < 1 {
        return Err(TuneError::Config(format!(
            "trials per task must be at least 1, got {}",
            config.policy.trials
        )));
    }
    let Setup {
        requested,
        spelled,
        cache_path,
    } = Setup::of(config)?;
    // The pipeline plans every task (tgc.seed_plan) unless the input already carries plans,
    // which are then executed as written. Keys are computed once, by canonicalize.
    let planned = carries_plans(&module);
    let mut budget = Budget::new(config.run_trials, config.time_budget_s);
    if planned && budget.is_limited() {
        return Err(TuneError::Config(format!(
            "{}: the input carries seed plans, which are executed as written; a run budget (trials over the model, time) would re-plan them",
            config.model_name
        )));
    }
    let work_dir = work_dir(config, "tgc-tune")?;
    let mut run = Run::start(
        config,
        &spelled,
        &requested,
        &cache_path,
        work_dir,
        observer,
    )?;
    let replan = if planned {
        None
    } else {
        Some(run.plan_module(&mut module, &cache_path)?)
    };
    let tasks = extract_annotated_tasks(&module)
        .map_err(|e| TuneError::Config(format!("{}: {e}", config.model_name)))?;
    let order = tuning_order(&tasks, config.max_tasks);
    // The worker's one-time set-up of tuning (an import MetaSchedule's first task makes)
    // happens before the clock starts, as the stock TVM arm of the benchmarks does it; the
    // report names its seconds apart.
    let prepare_tuning_s = if order.is_empty() {
        0.0
    } else {
        run.worker.prepare_tuning()?.seconds
    };
    observer.started(order.len());

    let started = Instant::now();
    let mut reports = Vec::with_capacity(order.len());
    // Best trace per exact key, for the final build.
    let mut best_traces: HashMap<TaskKey, Value> = HashMap::new();
    let mut skipped = Vec::new();
    // Under a run budget, the share a cold run would give each task is, short of less than
    // a search round, the effort an exact hit's record needs behind it to be final
    // (budget.rs).
    let cold = budget.cold_shares(
        &order
            .iter()
            .map(|&i| share_of(&module, &tasks[i], None))
            .collect::<Vec<_>>(),
    );
    let per_round = config.trials_per_round.max(1) as u64;
    let bar = |k: usize| cold.as_ref().map(|c| hit_bar(c[k], per_round));
    for (k, &ti) in order.iter().enumerate() {
        let task = &tasks[ti];
        let rest: Vec<Share> = order[k + 1..]
            .iter()
            .enumerate()
            .map(|(d, &i)| share_of(&module, &tasks[i], bar(k + 1 + d)))
            .collect();
        let cold_share = cold.as_ref().map(|c| c[k]);
        let allocated = budget
            .allocate(&share_of(&module, task, bar(k)), &rest)
            .map(|n| cold_share.map_or(n, |c| capped(n, c)));
        if allocated == Some(0) {
            skipped.push(task.name.clone());
            continue;
        }
        // (a limited budget gives both an allocation and a cold share; no budget, neither)
        let replan = replan.as_ref().map(|o| match (allocated, bar(k)) {
            (Some(n), Some(effort)) => o.clone().set("seed-schedules", "trials", n).set(
                "seed-schedules",
                "hit-effort",
                effort.max(1),
            ),
            _ => o.clone(),
        });
        let (mut report, best) = run.tune_task(task, &mut module, replan.as_ref(), observer)?;
        if let (Some(allocated), Some(cold_share)) = (allocated, cold_share) {
            report.budget = Some(TaskBudget {
                allocated,
                cold_share,
            });
        }
        budget.spend(report.trials, report.wall_s);
        if let Some(best) = best {
            best_traces.insert(task.keys.exact, best);
        }
        observer.task_finished(&report);
        reports.push(report);
    }
    let tuning_wall_s = started.elapsed().as_secs_f64();

    let end_to_end = if config.measure && config.rpc.is_some() {
        observer.warning(
            "--rpc: the whole model is not timed (build_and_measure runs it on this machine, not on the device); the report's end_to_end is null",
        );
        None
    } else if config.measure {
        observer.measuring();
        Some(run.measure(&module, &tasks, &best_traces)?)
    } else {
        None
    };
    let _ = run.worker.shutdown();
    Ok(Report {
        model: config.model_name.clone(),
        target_spelling: requested,
        target: run.target_json,
        toolchain: run.toolchain,
        no_cache: config.no_cache,
        trials_per_task: config.policy.trials,
        cost_model_file: run.cost_model,
        tasks: reports,
        skipped,
        run_trials: config.run_trials,
        time_budget_s: config.time_budget_s,
        tuning_wall_s,
        prepare_tuning_s,
        end_to_end,
        rpc: config.rpc.clone().zip(run.rpc_devices),
    })
}

/// What a run settles before the worker starts: the target as spelled (TVM's canonical form
/// of it comes from the worker) and the cache file.
pub(crate) struct Setup {
    pub(crate) requested: Value,
    pub(crate) spelled: Target,
    pub(crate) cache_path: PathBuf,
}

impl Setup {
    pub(crate) fn of(config: &TuneConfig) -> Result<Setup, TuneError> {
        let mut requested = resolve_target(&config.target).map_err(TuneError::Config)?;
        if let Some(rpc) = &config.rpc {
            device_target(&mut requested, &rpc.key).map_err(TuneError::Config)?;
        }
        let spelled =
            Target::from_json(&requested).map_err(|e| TuneError::Config(e.to_string()))?;
        let cache_path = match &config.cache {
            Some(p) => p.clone(),
            None => Cache::default_path()?,
        };
        Ok(Setup {
            requested,
            spelled,
            cache_path,
        })
    }
}

/// The tag element that names an RPC device key in a target: `rpc:KEY`.
pub(crate) const DEVICE_TAG_PREFIX: &str = "rpc:";

/// Names the RPC device `key` in `target`'s `tag` (TVM's free-form target name, which
/// `Target.export()` keeps and no code generator reads), so TVM's canonical form of the
/// target, and with it the cache's target key, the alias of its spelling and the cost-model
/// file, differ from the same target measured on this machine: records of device key K
/// never seed a local run, nor local records a run on K. The tag is a comma-separated list;
/// a tag the target already has (a TVM tag name) is kept, `rpc:KEY` added once. A target
/// whose tag names another device is an error. Without `--rpc`, a target spelt with
/// `"tag": "rpc:KEY"` (as the report writes it) finds those records, for `tgc build`.
pub(crate) fn device_target(target: &mut Value, key: &str) -> Result<(), String> {
    let device = format!("{DEVICE_TAG_PREFIX}{key}");
    let Some(obj) = target.as_object_mut() else {
        return Err(format!(
            "--rpc: the target must be a JSON object, got {target}"
        ));
    };
    let tag = match obj.get("tag") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => t.clone(),
        Some(other) => return Err(format!("target: \"tag\" must be a string, got {other}")),
    };
    let mut parts: Vec<&str> = tag
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if let Some(other) = parts
        .iter()
        .find(|p| p.starts_with(DEVICE_TAG_PREFIX) && **p != device)
    {
        return Err(format!(
            "target: its tag {tag:?} names the device {other}, but --rpc-key is {key:?}"
        ));
    }
    if !parts.contains(&device.as_str()) {
        parts.push(&device);
    }
    obj.insert("tag".into(), Value::String(parts.join(",")));
    Ok(())
}

/// The run's work dir (created): the configured one, else `<tmp>/<prefix>-<pid>`.
pub(crate) fn work_dir(config: &TuneConfig, prefix: &str) -> Result<PathBuf, TuneError> {
    let work_dir = match &config.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("{prefix}-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work_dir).map_err(|e| TuneError::Io {
        path: work_dir.clone(),
        message: format!("cannot create: {e}"),
    })?;
    Ok(work_dir)
}

/// The toolchain records measured by this worker are keyed by.
fn toolchain_of(v: &Versions) -> Toolchain {
    Toolchain::new(
        v.tvm.clone(),
        v.tvm_ffi.clone(),
        v.llvm.clone().unwrap_or_else(|| "none".into()),
    )
}

/// Structural groups in order of first appearance, each with its most frequent task first;
/// with `max_tasks`, only that many tasks, the most frequent ones.
fn tuning_order(tasks: &[Task], max_tasks: Option<usize>) -> Vec<usize> {
    let mut groups: Vec<(TaskKey, Vec<usize>)> = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        match groups.iter_mut().find(|(k, _)| *k == t.keys.structural) {
            Some((_, members)) => members.push(i),
            None => groups.push((t.keys.structural, vec![i])),
        }
    }
    for (_, members) in groups.iter_mut() {
        members.sort_by_key(|&i| std::cmp::Reverse(tasks[i].occurrences));
    }
    let mut order: Vec<usize> = groups.iter().map(|(_, m)| m[0]).collect();
    order.extend(groups.iter().flat_map(|(_, m)| m[1..].iter().copied()));
    if let Some(max) = max_tasks {
        let mut by_use = order.clone();
        by_use.sort_by_key(|&i| std::cmp::Reverse(tasks[i].occurrences));
        let keep: std::collections::HashSet<usize> = by_use.into_iter().take(max).collect();
        order.retain(|i| keep.contains(i));
    }
    order
}

/// The report's account of a seed's record: a MetaSchedule import (its workload hash and
/// the directory it came from) or a tgc run (model and task).
fn seed_source(c: &Candidate) -> Value {
    json!({
        "kind": if c.is_imported() { "metaschedule-import" } else { "tgc-tune" },
        "origin": c.origin,
        "workload_hash": c.source.tvm_hash.map(|h| h.to_string()),
        "model": c.source.model,
        "task": c.source.task_name,
        "latency_s": c.mean_latency,
    })
}

/// What the run budget knows about a task from its annotations: occurrences, FLOPs, the
/// best exact candidate's latency (else the plan's goal), and the one trial an exact hit
/// costs (the worker measures its best exact seed alone first) when the hit may end the task: its record has `effort_bar` trials of search
/// behind it (unknown effort counts as enough), or, without a bar, its plan says so.
fn share_of(module: &Module, task: &Task, effort_bar: Option<u64>) -> Share {
    let f = module
        .function(&task.name)
        .expect("tasks name functions of the module");
    let best_exact = f
        .attrs
        .get(CANDIDATES_ATTR)
        .and_then(Attr::as_list)
        .into_iter()
        .flatten()
        .filter_map(|a| CandidateRef::from_attr(a).ok())
        .filter(|c| c.tier.is_exact())
        .min_by(|a, b| a.latency_s.total_cmp(&b.latency_s));
    let plan = seed_plan(f).ok().flatten();
    let exact_plan = plan.as_ref().filter(|p| p.tier.is_some_and(Tier::is_exact));
    let final_hit = match (&best_exact, effort_bar) {
        (Some(c), Some(bar)) => effort_suffices(c.trials, bar as i64),
        _ => exact_plan.is_some_and(|p| p.cached_latency_s.is_some()),
    };
    Share {
        occurrences: task.occurrences,
        flops: task.features.flops,
        latency_s: best_exact
            .map(|c| c.latency_s)
            .or(plan.as_ref().and_then(|p| p.goal_latency_s)),
        exact_seeds: match exact_plan {
            Some(p) if final_hit => p.seeds.len().min(1) as u64,
            _ => 0,
        },
    }
}

/// Whether any task of `module` already carries a seed plan (an IR that `tgc opt --passes
/// tgc-cpu` printed, perhaps edited by hand).
fn carries_plans(module: &Module) -> bool {
    module
        .functions
        .values()
        .any(|f| f.is_primitive() && f.attrs.contains_key(SEED_PLAN_ATTR))
}

/// The state of a run between tasks (a tuning run's, or a build's: `crate::build`).
pub(crate) struct Run<'a> {
    pub(crate) config: &'a TuneConfig,
    pub(crate) worker: Worker,
    pub(crate) cache: Option<Cache>,
    pub(crate) target: Target,
    pub(crate) target_json: Value,
    pub(crate) toolchain: Toolchain,
    pub(crate) cost_model: Option<PathBuf>,
    pub(crate) work_dir: PathBuf,
    /// The cache refuses writes (opened read-only, or a role that may only read): the
    /// run's records are not written back; said once.
    pub(crate) cache_writes_refused: bool,
    /// With `--rpc`: what the tracker offered under the key when the run started.
    pub(crate) rpc_devices: Option<RpcDevices>,
}

/// Asks the tracker what it offers under the key, before anything is tuned: an unreachable
/// tracker, or a key no device is registered under, is one error naming it (instead of
/// candidates that each wait out the runner's timeout); devices that are all busy are a
/// warning (another job holds them; the run waits its turn).
fn check_devices(
    worker: &mut Worker,
    rpc: &RpcTracker,
    observer: &mut dyn Observer,
) -> Result<RpcDevices, TuneError> {
    let devices = worker
        .rpc_devices(rpc)
        .map_err(|e| TuneError::Config(format!("--rpc: {}", e.message)))?;
    if devices.free == 0 && !devices.keys.contains(&rpc.key) {
        let keys = if devices.keys.is_empty() {
            "none".to_string()
        } else {
            devices.keys.join(", ")
        };
        return Err(TuneError::Config(format!(
            "--rpc {}: no device is registered under the key {:?} (the tracker's keys: {keys})",
            rpc.address(),
            rpc.key
        )));
    }
    if devices.free == 0 {
        observer.warning(&format!(
            "--rpc {}: every device under the key {:?} is busy ({} requests waiting); measurements wait for one",
            rpc.address(),
            rpc.key,
            devices.pending
        ));
    }
    Ok(devices)
}

impl<'a> Run<'a> {
    /// Starts the worker and settles what the run's records are keyed by: the worker's
    /// toolchain and TVM's canonical form of the target (the spelling registered as its
    /// alias in the cache), and where the cost model lives.
    pub(crate) fn start(
        config: &'a TuneConfig,
        spelled: &Target,
        requested: &Value,
        cache_path: &std::path::Path,
        work_dir: PathBuf,
        observer: &mut dyn Observer,
    ) -> Result<Run<'a>, TuneError> {
        let mut worker = Worker::start(WorkerConfig::new(work_dir.join("worker.log")))?;

        // Key records by the software that measures them, and the target by TVM's canonical form.
        let toolchain = toolchain_of(worker.versions());
        if !toolchain.is_pinned() {
            observer.warning(&format!(
                "the TVM worker reports toolchain {toolchain} (TVM/tvm-ffi/LLVM), not the pinned {}; tuning with it, its cache records kept apart from the pinned toolchain's",
                Toolchain::pinned()
            ));
        }
        let rpc_devices = match &config.rpc {
            Some(rpc) => Some(check_devices(&mut worker, rpc, observer)?),
            None => None,
        };
        let target_json = worker
            .canonical_target(requested)
            .map_err(|e| TuneError::Config(format!("target: {e}")))?;
        let target =
            Target::from_json(&target_json).map_err(|e| TuneError::Config(e.to_string()))?;
        let mut read_only = config.cache_read_only;
        let cache = if config.no_cache {
            None
        } else {
            let cache_config = tgc_cache::CacheConfig {
                read_only: config.cache_read_only,
                ..tgc_cache::CacheConfig::default()
            };
            let mut c = Cache::open_with(cache_path, cache_config, !config.cache_read_only)?;
            if config.cache_read_only {
                observer.warning(&format!(
                    "{}: opened read-only: lookups only, no record of this run is written back",
                    c.path().display()
                ));
            } else {
                match c.register_target(spelled, &target, &toolchain) {
                    Ok(moved) if moved > 0 => observer.warning(&format!(
                        "{}: {moved} records filed under the target spelling {spelled} now belong to TVM's canonical form {target}",
                        c.path().display()
                    )),
                    Ok(_) => {}
                    Err(e) if e.is_read_only() => {
                        observer.warning(&format!(
                            "{e}; lookups only, no record of this run is written back"
                        ));
                        read_only = true;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Some(c)
        };
        let cost_model = match (&config.cost_model, config.no_cache) {
            (CostModel::Cold, _) => None,
            (CostModel::File(file), _) => Some(file.clone()),
            (CostModel::Shared, true) => {
                let file = work_dir.join(format!("cost-model-{}.tar", std::process::id()));
                let _ = std::fs::remove_file(&file);
                Some(file)
            }
            (CostModel::Shared, false) => {
                Some(Cache::cost_model_path(cache_path, &target, &toolchain))
            }
        };
        Ok(Run {
            config,
            worker,
            cache,
            target,
            target_json,
            toolchain,
            cost_model,
            work_dir,
            cache_writes_refused: read_only,
            rpc_devices,
        })
    }
}

impl Run<'_> {
    /// The named pipeline for the run's target.
    fn pipeline_name(&self) -> &'static str {
        if self.target.kind() == "cuda" {
            "tgc-gpu"
        } else {
            "tgc-cpu"
        }
    }

    /// The named pipeline's passes as this run needs them: the run's cache, TVM's canonical
    /// target and the worker's toolchain for annotate-cache, the run's budget for
    /// seed-schedules; with `no_cache` no lookups and no early stop.
    fn pipeline_overrides(&self, cache_path: &std::path::Path) -> Overrides {
        let p = &self.config.policy;
        let o = Overrides::default()
            .set("annotate-cache", "cache", cache_path.display())
            .set("annotate-cache", "target", self.target.canonical_json())
            .set("annotate-cache", "toolchain", &self.toolchain)
            .set("seed-schedules", "trials", p.trials)
            .set("seed-schedules", "max-seeds", p.max_seeds)
            .set("seed-schedules", "tolerance", p.tolerance);
        if self.config.no_cache {
            o.skip("annotate-cache")
                .set("seed-schedules", "patience", 0)
                .set("seed-schedules", "seeded-patience", 0)
        } else {
            o.set("seed-schedules", "patience", p.patience).set(
                "seed-schedules",
                "seeded-patience",
                p.seeded_patience,
            )
        }
    }

    /// Runs the target's named pipeline over `module`, which then carries every task's
    /// keys, candidates and plan; returns the options the pipeline ran with, for re-plans.
    pub(crate) fn plan_module(
        &self,
        module: &mut Module,
        cache_path: &std::path::Path,
    ) -> Result<Overrides, TuneError> {
        let overrides = self.pipeline_overrides(cache_path);
        let name = self.pipeline_name();
        let mut pm = PassManager::new(Instrumentation::default());
        build_pipeline_with(name, &overrides, &mut pm)
            .map_err(|e| TuneError::Config(format!("pipeline {name}: {e}")))?;
        pm.run(module, &mut std::io::sink())
            .map_err(|e| TuneError::Config(format!("{}: {e}", self.config.model_name)))?;
        Ok(overrides)
    }

    /// Lowers the task, re-plans it when its candidates changed (`replan`: records written
    /// earlier in this run, and the records its TVM hash finds), executes its plan, and
    /// writes back; returns its report and its best trace.
    fn tune_task(
        &mut self,
        task: &Task,
        module: &mut Module,
        replan: Option<&Overrides>,
        observer: &mut dyn Observer,
    ) -> Result<(TaskReport, Option<Value>), TuneError> {
        let (tj, lowered, replanned) = self.lower(task, module, replan)?;
        let tvm_hash = lowered.structural_hash;
        let f = module
            .function(&task.name)
            .expect("tasks name functions of the module");
        let seed_plan = seed_plan(f)
            .map_err(TuneError::Config)?
            .ok_or_else(|| task_error(&task.name, format!("carries no {SEED_PLAN_ATTR}")))?;
        observer.task_started(&task.name, &seed_plan);
        let planned = self.seeds(task, &seed_plan, observer)?;
        let first_source = planned.first().map_or(Value::Null, |(_, s)| s.clone());
        let seeds = planned.into_iter().map(|(seed, _)| seed).collect();

        let result = self.worker.tune(&TuneRequest {
            task: tj,
            target: self.target_json.clone(),
            work_dir: self.work_dir.join(&task.name),
            seeds,
            max_trials: seed_plan.trials.max(1) as Trials,
            trials_per_round: self.config.trials_per_round.max(1) as Trials,
            patience_rounds: seed_plan.patience.max(0) as u64,
            exact_tolerance: seed_plan.tolerance,
            cached_latency_s: seed_plan.cached_latency_s,
            control_latency_s: seed_plan.control_latency_s,
            goal_latency_s: seed_plan.goal_latency_s,
            evolutionary: Some(json!({ "population_size": self.config.population })),
            cost_model_file: self.cost_model.clone(),
            rpc: self.config.rpc.clone(),
            ..TuneRequest::default()
        })?;
        if result.failed_runs > 0 {
            observer.warning(&format!(
                "task {}: {} of {} measurements failed (first: {})",
                task.name,
                result.failed_runs,
                result.trials,
                result
                    .run_errors
                    .first()
                    .map_or("no message", String::as_str)
            ));
        }
        let best = result.records.first().map(|r| r.trace.clone());
        let effort = seed_plan.effort(match result.stopped {
            StopReason::ExactHit => Outcome::ExactHit,
            reason => Outcome::Searched {
                trials: result.trials,
                converged: matches!(reason, StopReason::Patience | StopReason::Exhausted),
            },
        });
        let workload = Workload {
            tvm_hash,
            json: lowered.workload_json,
        };
        let written = self.write_back(task, Some(workload), &result, effort, "tune", observer)?;
        for e in &result.cost_model.errors {
            observer.warning(e);
        }
        let report = TaskReport {
            name: task.name.clone(),
            occurrences: task.occurrences,
            tier: seed_plan.tier,
            seeds_tried: result.seeds_tried,
            seeds_failed: result.seeds_failed,
            trials: result.trials,
            failed_runs: result.failed_runs,
            run_errors: result.run_errors,
            best_s: result.best_s,
            stopped: result.stopped,
            exact_windows_s: result.exact_windows_s,
            exact_control: result.exact_control,
            runner: result.runner,
            wall_s: result.wall_s,
            written,
            remeasured: result.records.iter().filter(|r| r.remeasured).count(),
            history: result.history,
            seed_modes: result.seed_modes,
            cost_model_warm: result.cost_model.warm_samples,
            prior_trials: seed_plan.prior_trials.max(0) as u64,
            workload_hash: tvm_hash,
            seed_source: first_source,
            plan_source: if replan.is_some() {
                PlanSource::Pipeline { replanned }
            } else {
                PlanSource::Input
            },
            plan: seed_plan,
            budget: None,
        };
        Ok((report, best))
    }

    /// Lowers the task through the worker and, with `replan`, plans it again with its TVM
    /// workload hash (see [`Run::replan`]); returns its task JSON, its workload and whether
    /// the plan changed.
    pub(crate) fn lower(
        &mut self,
        task: &Task,
        module: &mut Module,
        replan: Option<&Overrides>,
    ) -> Result<(Value, LowerResult, bool), TuneError> {
        let f = module
            .function(&task.name)
            .expect("tasks name functions of the module");
        let tj = task_json(f).map_err(|e| task_error(&task.name, e))?;
        let lowered = self.worker.lower(&LowerRequest {
            task: tj.clone(),
            target: self.target_json.clone(),
        })?;
        let replanned = match replan {
            Some(o) => self.replan(module, &task.name, lowered.structural_hash, o)?,
            None => false,
        };
        Ok((tj, lowered, replanned))
    }

    /// Runs annotate-cache and seed-schedules again over the task, now that it carries its
    /// TVM workload hash and earlier tasks of the run wrote their records; keeps the new
    /// annotations in `module`. Returns whether the plan changed.
    fn replan(
        &self,
        module: &mut Module,
        name: &str,
        tvm_hash: u64,
        overrides: &Overrides,
    ) -> Result<bool, TuneError> {
        let mut pm = PassManager::new(Instrumentation {
            verify_each: false,
            ..Instrumentation::default()
        });
        build_pipeline_with("annotate-cache,seed-schedules", overrides, &mut pm)
            .map_err(|e| task_error(name, format!("re-plan pipeline: {e}")))?;
        let f = module
            .functions
            .get_mut(name)
            .expect("tasks name functions of the module");
        let before = f.attrs.get(SEED_PLAN_ATTR).cloned();
        let mut one = Module::new(format!("replan_{name}"));
        let mut g = f.clone();
        g.attrs
            .insert(WORKLOAD_HASH_ATTR.into(), Attr::Str(tvm_hash.to_string()));
        one.functions.insert(name.to_string(), g);
        pm.run(&mut one, &mut std::io::sink())
            .map_err(|e| task_error(name, e))?;
        let g = one
            .functions
            .swap_remove(name)
            .expect("passes keep functions");
        let changed = g.attrs.get(SEED_PLAN_ATTR) != before.as_ref();
        *f = g;
        Ok(changed)
    }

    /// The plan's seeds as the worker takes them, each with the TVM workload of the task it
    /// was measured on when the cache has it (the worker then repairs tiles or transfers the
    /// anchor block's schedule instead of taking another task's trace for an exact one), and
    /// the report's account of each seed's source. A digest the cache does not hold
    /// for this target and toolchain (a plan edited by hand) is skipped with a warning.
    pub(crate) fn seeds(
        &self,
        task: &Task,
        seed_plan: &SeedPlan,
        observer: &mut dyn Observer,
    ) -> Result<Vec<(Seed, Value)>, TuneError> {
        let Some(cache) = &self.cache else {
            if seed_plan.seeds.is_empty() {
                return Ok(Vec::new());
            }
            return Err(task_error(
                &task.name,
                "its seed plan names seeds, but --no-cache has no cache to read them from",
            ));
        };
        let tier = seed_plan.tier.unwrap_or(Tier::Exact);
        // Seeds often share a source task: read each source's workload once.
        let mut sources: HashMap<(Option<TaskKey>, Option<u64>), Option<String>> = HashMap::new();
        let mut seeds = Vec::new();
        for d in &seed_plan.seeds {
            let found = cache
                .seed_by_digest(
                    d,
                    Some(&task.keys.exact),
                    tier,
                    &self.target,
                    &self.toolchain,
                )
                .map_err(|e| task_error(&task.name, e))?;
            let Some(c) = found else {
                observer.warning(&format!(
                    "task {}: seed {d} is not in the cache for target {} and toolchain {}; skipped",
                    task.name, self.target, self.toolchain
                ));
                continue;
            };
            let trace = serde_json::from_str::<Value>(c.trace.json())
                .map_err(|e| task_error(&task.name, format!("seed {d}: stored trace: {e}")))?;
            let source = match sources.entry((c.source.exact_key, c.source.tvm_hash)) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(
                    cache
                        .source_workload(&c.source)
                        .map_err(|e| task_error(&task.name, e))?,
                ),
            };
            seeds.push((
                Seed {
                    source_workload: source.clone(),
                    ..Seed::trace(trace)
                },
                seed_source(&c),
            ));
        }
        Ok(seeds)
    }

    /// Writes the task's re-measured records back with `source` (`tune`, `build`) as their
    /// provenance; returns how many were inserted or replaced. After an exact hit no stored
    /// measurement is replaced ([`Cache::put_missing`]): the check stops at the first window
    /// within the tolerance, a measurement selected for being fast, and the cached record
    /// (measured at write-back in several windows, unselected) stands; the hit is stored only
    /// where this task lacks it (a seed found by TVM hash in an import). A cache that refuses
    /// writes (read-only) is warned about once and then skipped.
    pub(crate) fn write_back(
        &mut self,
        task: &Task,
        workload: Option<Workload>,
        result: &TuneResult,
        effort: u64,
        source: &str,
        observer: &mut dyn Observer,
    ) -> Result<usize, TuneError> {
        if self.cache_writes_refused {
            return Ok(0);
        }
        let Some(cache) = self.cache.as_mut() else {
            return Ok(0);
        };
        let entry = TaskEntry {
            keys: task.keys,
            features: task.features.clone(),
            workload,
        };
        // Only re-measured records: a search's single measurement is the minimum of noisy
        // draws, biased low, and would become the bar a later exact hit misses.
        let new: Vec<NewRecord> = result
            .records
            .iter()
            .filter(|r| r.remeasured)
            .filter_map(|r| {
                let trace = Trace::from_json(&r.trace).ok()?;
                Some(NewRecord {
                    trace,
                    latencies: r.run_secs.clone(),
                    args_info: None,
                    provenance: Provenance {
                        model: Some(self.config.model_name.clone()),
                        task_name: Some(task.name.clone()),
                        // 0: unknown (a confirmed MetaSchedule import)
                        trials: (effort > 0).then(|| effort.min(u32::MAX as u64) as u32),
                        created_at: None,
                        source: source.into(),
                    },
                })
            })
            .collect();
        let put = if matches!(result.stopped, StopReason::ExactHit) {
            Cache::put_missing
        } else {
            Cache::put
        };
        let summary = match put(cache, &entry, &self.target, &self.toolchain, &new) {
            Ok(s) => s,
            Err(e) if e.is_read_only() => {
                observer.warning(&format!(
                    "{e}; from here on no record of this run is written back"
                ));
                self.cache_writes_refused = true;
                return Ok(0);
            }
            Err(e) => return Err(task_error(&task.name, e)),
        };
        Ok(summary.inserted + summary.replaced)
    }

    /// Builds the whole model with the best trace per task and times it.
    fn measure(
        &mut self,
        module: &Module,
        tasks: &[Task],
        best: &HashMap<TaskKey, Value>,
    ) -> Result<BuildResult, TuneError> {
        let records = tasks
            .iter()
            .filter_map(|t| {
                best.get(&t.keys.exact)
                    .map(|trace| (t, vec![trace.clone()]))
            })
            .collect::<Vec<_>>();
        self.build_model(module, &records, None)
    }

    /// Builds the whole model with each task's records (best first: the first that replays
    /// is applied; the same for every function of the task), checks it against an untuned
    /// build and times it; with `export`, writes the tuned build there.
    pub(crate) fn build_model(
        &mut self,
        module: &Module,
        records: &[(&Task, Vec<Value>)],
        export: Option<PathBuf>,
    ) -> Result<BuildResult, TuneError> {
        let (mj, by_function) = self.model_records(module, records)?;
        Ok(self.worker.build_and_measure(&BuildRequest {
            module: mj,
            records: by_function,
            target: self.target_json.clone(),
            repeat: Some(END_TO_END_REPEATS),
            number: None,
            seed: None,
            atol_rel: None,
            rtol: None,
            export,
        })?)
    }

    /// Builds the whole model with each task's records as [`Run::build_model`] does and
    /// writes it to `export`; nothing else is built or run.
    pub(crate) fn export_model(
        &mut self,
        module: &Module,
        records: &[(&Task, Vec<Value>)],
        export: PathBuf,
    ) -> Result<Built, TuneError> {
        let (mj, by_function) = self.model_records(module, records)?;
        Ok(self.worker.build(&ExportRequest {
            module: mj,
            records: by_function,
            target: self.target_json.clone(),
            export,
        })?)
    }

    /// The module's JSON, and each task's records under the name of every function of it.
    fn model_records(
        &self,
        module: &Module,
        records: &[(&Task, Vec<Value>)],
    ) -> Result<(Value, BuildRecords), TuneError> {
        let mj = module_json(module)
            .map_err(|e| TuneError::Config(format!("{}: {e}", self.config.model_name)))?;
        let mut by_function: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (t, traces) in records {
            for name in &t.functions {
                by_function.insert(name.clone(), traces.clone());
            }
        }
        Ok((mj, BuildRecords::Traces(by_function)))
    }
}

/// Timing repeats of the whole-model latency.
const END_TO_END_REPEATS: u64 = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_key_goes_into_the_target_tag_once() {
        let mut t = json!({"kind": "llvm", "num-cores": 4, "mtriple": "aarch64-linux-gnu"});
        device_target(&mut t, "rasp4").unwrap();
        assert_eq!(t["tag"], "rpc:rasp4");
        // idempotent: a target spelt as the report writes it stays as it is
        device_target(&mut t, "rasp4").unwrap();
        assert_eq!(t["tag"], "rpc:rasp4");
        // a TVM tag name is kept
        let mut t = json!({"kind": "cuda", "tag": "nvidia/jetson-orin-nano"});
        device_target(&mut t, "orin").unwrap();
        assert_eq!(t["tag"], "nvidia/jetson-orin-nano,rpc:orin");
        let mut t = json!({"kind": "llvm", "tag": ""});
        device_target(&mut t, "k").unwrap();
        assert_eq!(t["tag"], "rpc:k");
    }

    #[test]
    fn a_tag_naming_another_device_or_not_a_string_is_an_error() {
        let mut t = json!({"kind": "llvm", "tag": "rpc:other"});
        let e = device_target(&mut t, "rasp4").unwrap_err();
        assert!(
            e.contains("names the device rpc:other, but --rpc-key is \"rasp4\""),
            "{e}"
        );
        let e = device_target(&mut json!({"kind": "llvm", "tag": 3}), "k").unwrap_err();
        assert!(e.contains("\"tag\" must be a string"), "{e}");
        assert!(device_target(&mut json!("llvm"), "k").is_err());
    }

    #[test]
    fn an_rpc_run_keys_its_target_by_the_device() {
        let mut config = TuneConfig::new("m");
        config.target = r#"{"kind": "llvm", "num-cores": 2}"#.into();
        let local = Setup::of(&config).unwrap();
        config.rpc = Some(RpcTracker::parse("127.0.0.1:9190", "k1", 2).unwrap());
        let remote = Setup::of(&config).unwrap();
        assert_ne!(local.spelled, remote.spelled);
        assert_eq!(remote.requested["tag"], "rpc:k1");
        assert!(local.requested.get("tag").is_none());
    }
}
