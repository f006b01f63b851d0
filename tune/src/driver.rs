//! The run: partition and key the model, then per task lower, look up, plan, tune and write
//! back, then build and measure the whole model.

use crate::config::{CostModel, TuneConfig};
use crate::observer::Observer;
use crate::report::{Report, TaskReport};
use serde_json::{json, Value};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;
use tgc_cache::{
    Cache, CacheError, Candidate, NewRecord, Provenance, Query, Target, TaskEntry, Toolchain,
    Trace, Workload,
};
use tgc_canonicalize::{extract_tasks, Task, TaskKey};
use tgc_ir::Module;
use tgc_passes::annotate_cache::DEFAULT_CANDIDATE_LIMIT;
use tgc_passes::partition::Partition;
use tgc_passes::seeding::{plan, resolve_target, CandidateRef, SeedPlan, SeedPolicy};
use tgc_passes::{Instrumentation, PassManager};
use tgc_tvm::{
    module_json, task_json, BridgeError, BuildRecords, BuildRequest, BuildResult, LowerRequest,
    Seed, StopReason, Trials, TuneRecord, TuneRequest, TuneResult, Versions, Worker, WorkerConfig,
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

fn task_error(task: &str, e: impl std::fmt::Display) -> TuneError {
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
    // The target as spelled; TVM's canonical form of it comes from the worker below.
    let requested = resolve_target(&config.target).map_err(TuneError::Config)?;
    let spelled = Target::from_json(&requested).map_err(|e| TuneError::Config(e.to_string()))?;
    let cache_path = match &config.cache {
        Some(p) => p.clone(),
        None => Cache::default_path()?,
    };
    // Keys come from extract_tasks (once per task); the canonicalize pass would only
    // print them into the IR.
    let mut pm = PassManager::new(Instrumentation::default());
    pm.add(Box::new(Partition::default()));
    pm.run(&mut module, &mut std::io::sink())
        .map_err(|e| TuneError::Config(format!("{}: {e}", config.model_name)))?;
    let tasks = extract_tasks(&module);
    let order = tuning_order(&tasks, config.max_tasks);

    let work_dir = match &config.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("tgc-tune-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work_dir).map_err(|e| TuneError::Io {
        path: work_dir.clone(),
        message: format!("cannot create: {e}"),
    })?;
    observer.started(order.len());
    let mut run = Run::start(
        config,
        &spelled,
        &requested,
        &cache_path,
        work_dir,
        observer,
    )?;

    let started = Instant::now();
    let mut reports = Vec::with_capacity(order.len());
    // Best trace per exact key, for the final build.
    let mut best_traces: HashMap<TaskKey, Value> = HashMap::new();
    for &ti in &order {
        let task = &tasks[ti];
        let f = module
            .function(&task.name)
            .expect("tasks name functions of the module");
        let (report, best) = run.tune_task(task, f, observer)?;
        if let Some(best) = best {
            best_traces.insert(task.keys.exact, best);
        }
        observer.task_finished(&report);
        reports.push(report);
    }
    let tuning_wall_s = started.elapsed().as_secs_f64();

    let end_to_end = if config.measure {
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
        tuning_wall_s,
        end_to_end,
    })
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

/// The state of a run between tasks.
struct Run<'a> {
    config: &'a TuneConfig,
    policy: SeedPolicy,
    worker: Worker,
    cache: Option<Cache>,
    target: Target,
    target_json: Value,
    toolchain: Toolchain,
    cost_model: Option<PathBuf>,
    work_dir: PathBuf,
}

impl<'a> Run<'a> {
    /// Starts the worker and settles what the run's records are keyed by: the worker's
    /// toolchain and TVM's canonical form of the target (the spelling registered as its
    /// alias in the cache), and where the cost model lives.
    fn start(
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
        let target_json = worker
            .canonical_target(requested)
            .map_err(|e| TuneError::Config(format!("target: {e}")))?;
        let target =
            Target::from_json(&target_json).map_err(|e| TuneError::Config(e.to_string()))?;
        let cache = if config.no_cache {
            None
        } else {
            let mut c = Cache::open(cache_path)?;
            let moved = c.register_target(spelled, &target, &toolchain)?;
            if moved > 0 {
                observer.warning(&format!(
                    "{}: {moved} records filed under the target spelling {spelled} now belong to TVM's canonical form {target}",
                    cache_path.display()
                ));
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
        let policy = SeedPolicy {
            patience: if config.no_cache {
                0
            } else {
                config.policy.patience
            },
            ..config.policy.clone()
        };
        Ok(Run {
            config,
            policy,
            worker,
            cache,
            target,
            target_json,
            toolchain,
            cost_model,
            work_dir,
        })
    }
}

impl Run<'_> {
    /// Lowers, looks up, plans, tunes and writes back one task; returns its report and its
    /// best trace.
    fn tune_task(
        &mut self,
        task: &Task,
        f: &tgc_ir::Function,
        observer: &mut dyn Observer,
    ) -> Result<(TaskReport, Option<Value>), TuneError> {
        let tj = task_json(f).map_err(|e| task_error(&task.name, e))?;
        let lowered = self.worker.lower(&LowerRequest {
            task: tj.clone(),
            target: self.target_json.clone(),
        })?;
        let tvm_hash = lowered.structural_hash;
        let candidates = self.lookup(task, Some(tvm_hash))?;
        let refs: Vec<CandidateRef> = candidates
            .iter()
            .map(CandidateRef::from_candidate)
            .collect();
        let seed_plan = plan(&refs, &self.policy);
        observer.task_started(&task.name, &seed_plan);
        let (seeds, first_source) = self.seeds(task, &seed_plan, &candidates)?;

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
            evolutionary: Some(json!({ "population_size": self.config.population })),
            cost_model_file: self.cost_model.clone(),
            ..TuneRequest::default()
        })?;
        let best = result.records.first().map(|r| r.trace.clone());
        let effort = effort(&seed_plan, &refs, &result);
        let workload = Workload {
            tvm_hash,
            json: lowered.workload_json,
        };
        let written = self.write_back(task, Some(workload), &result.records, effort)?;
        for e in &result.cost_model.errors {
            observer.warning(e);
        }
        let report = TaskReport {
            name: task.name.clone(),
            occurrences: task.occurrences,
            tier: seed_plan.tier.clone(),
            seeds_tried: result.seeds_tried,
            seeds_failed: result.seeds_failed,
            trials: result.trials,
            best_s: result.best_s,
            stopped: result.stopped,
            wall_s: result.wall_s,
            written,
            history: result.history,
            seed_modes: result.seed_modes,
            cost_model_warm: result.cost_model.warm_samples,
            prior_trials: seed_plan.prior_trials.max(0) as u64,
            workload_hash: tvm_hash,
            seed_source: first_source,
        };
        Ok((report, best))
    }

    /// The task's candidates now (records written earlier in this run count): by the tgc
    /// keys, and when they find no exact hit, by the TVM hash of the workload just lowered
    /// (imported MetaSchedule records, and tasks of other tgc keys that lower to the same
    /// workload).
    fn lookup(&self, task: &Task, tvm_hash: Option<u64>) -> Result<Vec<Candidate>, TuneError> {
        let Some(cache) = &self.cache else {
            return Ok(Vec::new());
        };
        let mut q = Query::new(
            &task.keys,
            &task.features,
            &self.target,
            &self.toolchain,
            DEFAULT_CANDIDATE_LIMIT,
        );
        if let Some(h) = tvm_hash {
            q = q.with_tvm_hash(h);
        }
        cache.lookup(&q).map_err(|e| task_error(&task.name, e))
    }

    /// The plan's seeds as the worker takes them, each with the TVM workload of the task it
    /// was measured on when the cache has it (the worker then repairs tiles or transfers the
    /// anchor block's schedule instead of taking another task's trace for an exact one), and
    /// the report's account of the first seed's source.
    fn seeds(
        &self,
        task: &Task,
        seed_plan: &SeedPlan,
        candidates: &[Candidate],
    ) -> Result<(Vec<Seed>, Value), TuneError> {
        // Seeds often share a source task: read each source's workload once.
        let mut sources: HashMap<(Option<TaskKey>, Option<u64>), Option<String>> = HashMap::new();
        let mut seeds = Vec::new();
        let mut first_source = Value::Null;
        for d in &seed_plan.seeds {
            let Some(c) = candidates
                .iter()
                .find(|c| &c.trace.digest().to_string() == d)
            else {
                continue;
            };
            let Ok(trace) = serde_json::from_str::<Value>(c.trace.json()) else {
                continue;
            };
            if first_source.is_null() {
                first_source = seed_source(c);
            }
            let source = match (
                &self.cache,
                sources.entry((c.source.exact_key, c.source.tvm_hash)),
            ) {
                (_, Entry::Occupied(e)) => e.into_mut(),
                (Some(cache), Entry::Vacant(e)) => e.insert(
                    cache
                        .source_workload(&c.source)
                        .map_err(|e| task_error(&task.name, e))?,
                ),
                (None, Entry::Vacant(e)) => e.insert(None),
            };
            seeds.push(Seed {
                source_workload: source.clone(),
                ..Seed::trace(trace)
            });
        }
        Ok((seeds, first_source))
    }

    /// Writes the task's records back; returns how many were inserted or improved.
    fn write_back(
        &mut self,
        task: &Task,
        workload: Option<Workload>,
        records: &[TuneRecord],
        effort: u64,
    ) -> Result<usize, TuneError> {
        let Some(cache) = self.cache.as_mut() else {
            return Ok(0);
        };
        let entry = TaskEntry {
            keys: task.keys,
            features: task.features.clone(),
            workload,
        };
        let new: Vec<NewRecord> = records
            .iter()
            .filter_map(|r| {
                let trace = Trace::from_json(&r.trace).ok()?;
                Some(NewRecord {
                    trace,
                    latencies: r.run_secs.clone(),
                    args_info: None,
                    provenance: Provenance {
                        model: Some(self.config.model_name.clone()),
                        task_name: Some(task.name.clone()),
                        trials: Some(effort as u32),
                        created_at: None,
                        source: "tune".into(),
                    },
                })
            })
            .collect();
        let summary = cache
            .put(&entry, &self.target, &self.toolchain, &new)
            .map_err(|e| task_error(&task.name, e))?;
        Ok(summary.inserted + summary.improved)
    }

    /// Builds the whole model with the best trace per task and times it.
    fn measure(
        &mut self,
        module: &Module,
        tasks: &[Task],
        best: &HashMap<TaskKey, Value>,
    ) -> Result<BuildResult, TuneError> {
        let mj = module_json(module)
            .map_err(|e| TuneError::Config(format!("{}: {e}", self.config.model_name)))?;
        let mut records: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for t in tasks {
            if let Some(trace) = best.get(&t.keys.exact) {
                for name in &t.functions {
                    records.insert(name.clone(), vec![trace.clone()]);
                }
            }
        }
        Ok(self.worker.build_and_measure(&BuildRequest {
            module: mj,
            records: BuildRecords::Traces(records),
            target: self.target_json.clone(),
            repeat: Some(END_TO_END_REPEATS),
            number: None,
            seed: None,
            atol_rel: None,
            rtol: None,
        })?)
    }
}

/// Timing repeats of the whole-model latency.
const END_TO_END_REPEATS: u64 = 20;

/// The search effort behind the records written back: a resumed search adds its trials to
/// the earlier ones; an exact hit confirms the earlier search (its re-measurements are no
/// search); otherwise this run's trials.
fn effort(seed_plan: &SeedPlan, refs: &[CandidateRef], result: &TuneResult) -> u64 {
    let run_trials = result.trials;
    if seed_plan.prior_trials > 0 {
        seed_plan.prior_trials as u64 + run_trials
    } else if result.stopped == StopReason::ExactHit {
        refs.iter()
            .filter(|r| r.tier == seed_plan.tier)
            .min_by(|a, b| a.latency_s.total_cmp(&b.latency_s))
            .map_or(0, |r| r.trials.max(0) as u64)
            .max(run_trials)
    } else {
        run_trials
    }
}
