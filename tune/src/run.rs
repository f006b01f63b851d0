//! A run's set-up and its per-task steps, shared by tuning ([`crate::tune`]) and building
//! ([`crate::build`]): the worker, which settles the toolchain and TVM's canonical target;
//! the cache, opened once for the whole run and handed to annotate-cache; the cost model;
//! then planning the model, lowering and re-planning a task, reading its seeds, writing
//! its records back, and building the whole model.

use crate::config::{CostModel, TuneConfig};
use crate::error::{task_error, TuneError};
use crate::observer::Observer;
use crate::rules::BuildGuard;
use crate::rules::{largest_round, replaces_stored};
use crate::search::SearchOutcome;
use serde_json::{json, Value};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use tgc_cache::{
    Cache, CacheConfig, CacheLocation, Candidate, NewRecord, Provenance, SharedCache, Target,
    TaskEntry, Toolchain, Trace, Workload,
};
use tgc_canonicalize::{Task, TaskKey};
use tgc_ir::{Attr, Function, Module};
use tgc_passes::annotate_cache::WORKLOAD_HASH_ATTR;
use tgc_passes::annotate_cache::{AnnotateCache, CacheSource, DEFAULT_CANDIDATE_LIMIT};
use tgc_passes::seed_schedules::{seed_plan, SeedSchedules, SEED_PLAN_ATTR};
use tgc_passes::seeding::{SeedPlan, SeedPolicy, Tier};
use tgc_passes::target::resolve_target;
use tgc_passes::{Instrumentation, PassManager};
use tgc_pipelines::{build_pipeline_with, Overrides};
use tgc_tvm::{
    module_json, task_json, BuildRecords, BuildRequest, BuildResult, Built, CostModelKind,
    ExportRequest, LowerRequest, LowerResult, RpcDevices, RpcTracker, Seed, Trials, TuneOpen,
    Versions, Worker, WorkerConfig,
};

/// A task lowered and planned, its seeds read ([`Run::prepare_task`]).
pub(crate) struct PreparedTask {
    pub(crate) task_json: Value,
    pub(crate) lowered: LowerResult,
    /// The re-plan changed the plan.
    pub(crate) replanned: bool,
    pub(crate) plan: SeedPlan,
    /// The plan's seeds, each with the report's account of its source.
    pub(crate) seeds: Vec<(Seed, Value)>,
}

/// What a run does with the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheUse {
    /// Tuning: a missing cache file is created (unless read-only).
    Create,
    /// Building: the cache must exist; said before the worker starts.
    Existing,
}

/// The state of a run between tasks.
pub(crate) struct Run<'a> {
    pub(crate) config: &'a TuneConfig,
    pub(crate) worker: Worker,
    /// The run's one opened cache (`None` with `no_cache`).
    pub(crate) cache: Option<SharedCache>,
    /// Where the cache is (`None` with `no_cache`).
    pub(crate) location: Option<CacheLocation>,
    /// The target as requested (with an RPC device's tag) and as TVM spells it.
    pub(crate) requested: Value,
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
    /// How long a build may take, from the run's builds so far.
    pub(crate) builds: BuildGuard,
}

impl<'a> Run<'a> {
    /// Resolves the target and the cache's location, starts the worker in the run's work
    /// dir (`<tmp>/<prefix>-<pid>` unless configured) and settles what the run's records
    /// are keyed by: the worker's toolchain and TVM's canonical form of the target (the
    /// spelling registered as its alias in the cache); opens the cache and names the cost
    /// model's file.
    pub(crate) fn open(
        config: &'a TuneConfig,
        prefix: &str,
        cache_use: CacheUse,
        observer: &mut dyn Observer,
    ) -> Result<Run<'a>, TuneError> {
        let (requested, spelled) = requested_target(config)?;
        let location = match config.no_cache {
            true => None,
            false => Some(CacheLocation::or_default(config.cache.clone())?),
        };
        if let (CacheUse::Existing, Some(l)) = (cache_use, &location) {
            check_exists(l)?;
        }
        let work_dir = work_dir(config, prefix)?;
        let mut worker = Worker::start(WorkerConfig::new(work_dir.join("worker.log")))?;
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
            .canonical_target(&requested)
            .map_err(|e| TuneError::Config(format!("target: {e}")))?;
        let target =
            Target::from_json(&target_json).map_err(|e| TuneError::Config(e.to_string()))?;
        let mut run = Run {
            config,
            worker,
            cache: None,
            location,
            requested,
            target,
            target_json,
            toolchain,
            cost_model: None,
            work_dir,
            cache_writes_refused: config.cache_read_only,
            rpc_devices,
            builds: BuildGuard::new(config.search.build_guard, config.search.builder_timeout_s),
        };
        if let Some(location) = run.location.clone() {
            run.open_cache(&location, &spelled, cache_use, observer)?;
        }
        run.cost_model = run.cost_model_file();
        Ok(run)
    }

    /// Opens the run's cache (read-only as configured) and files the target's spelling as
    /// an alias of TVM's canonical form.
    fn open_cache(
        &mut self,
        location: &CacheLocation,
        spelled: &Target,
        cache_use: CacheUse,
        observer: &mut dyn Observer,
    ) -> Result<(), TuneError> {
        let read_only = self.config.cache_read_only;
        let settings = CacheConfig {
            read_only,
            ..CacheConfig::default()
        };
        let create = cache_use == CacheUse::Create && !read_only;
        let mut c = Cache::open_with(location, settings, create)?;
        if read_only {
            observer.warning(&format!(
                "{}: opened read-only: lookups only, no record of this run is written back",
                c.path().display()
            ));
        } else {
            match c.register_target(spelled, &self.target, &self.toolchain) {
                Ok(moved) if moved > 0 => observer.warning(&format!(
                    "{}: {moved} records filed under the target spelling {spelled} now belong to TVM's canonical form {}",
                    c.path().display(),
                    self.target
                )),
                Ok(_) => {}
                Err(e) if e.is_read_only() => {
                    observer.warning(&format!(
                        "{e}; lookups only, no record of this run is written back"
                    ));
                    self.cache_writes_refused = true;
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.cache = Some(SharedCache::new(c));
        Ok(())
    }

    /// Where the XGB cost model lives (see [`CostModel`]).
    fn cost_model_file(&self) -> Option<PathBuf> {
        match (&self.config.cost_model, &self.location) {
            (CostModel::Cold, _) => None,
            (CostModel::File(file), _) => Some(file.clone()),
            // without a cache, shared only within the run
            (CostModel::Shared, None) => {
                let file = self
                    .work_dir
                    .join(format!("cost-model-{}.tar", std::process::id()));
                let _ = std::fs::remove_file(&file);
                Some(file)
            }
            (CostModel::Shared, Some(location)) => Some(Cache::cost_model_path(
                location.as_path(),
                &self.target,
                &self.toolchain,
            )),
        }
    }

    /// Ends the run: the worker exits.
    pub(crate) fn finish(self) {
        let _ = self.worker.shutdown();
    }
}

impl Run<'_> {
    /// The run's seed policy: the configured one; with `no_cache`, stock MetaSchedule's
    /// (no early stop).
    pub(crate) fn policy(&self) -> SeedPolicy {
        let p = self.config.policy.clone();
        if self.config.no_cache {
            SeedPolicy {
                patience: 0,
                seeded_patience: 0,
                ..p
            }
        } else {
            p
        }
    }

    /// The named pipeline for the run's target.
    fn pipeline_name(&self) -> &'static str {
        if self.target.kind() == "cuda" {
            "tgc-gpu"
        } else {
            "tgc-cpu"
        }
    }

    /// The named pipeline's passes as this run needs them: the run's opened cache, TVM's
    /// canonical target and the worker's toolchain for annotate-cache, the run's policy for
    /// seed-schedules; with `no_cache` no lookups.
    fn pipeline_overrides(&self) -> Overrides {
        let p = self.policy();
        let o = Overrides::default()
            .set("annotate-cache", "target", self.target.canonical_json())
            .set("annotate-cache", "toolchain", &self.toolchain)
            .set("seed-schedules", "trials", p.trials)
            .set("seed-schedules", "max-seeds", p.max_seeds)
            .set("seed-schedules", "tolerance", p.tolerance)
            .set("seed-schedules", "patience", p.patience)
            .set("seed-schedules", "seeded-patience", p.seeded_patience);
        match &self.cache {
            Some(c) => o.cache(c.clone()),
            None => o.skip("annotate-cache"),
        }
    }

    /// Runs the target's named pipeline over `module`, which then carries every task's
    /// keys, candidates and plan.
    pub(crate) fn plan_module(&self, module: &mut Module) -> Result<(), TuneError> {
        let name = self.pipeline_name();
        let mut pm = PassManager::new(Instrumentation::default());
        build_pipeline_with(name, &self.pipeline_overrides(), &mut pm)
            .map_err(|e| TuneError::Config(format!("pipeline {name}: {e}")))?;
        pm.run(module, &mut std::io::sink())
            .map_err(|e| TuneError::Config(format!("{}: {e}", self.config.model_name)))?;
        Ok(())
    }

    /// Lowers the task through the worker and, with `replan`, plans it again under that
    /// policy with its TVM workload hash (see [`Run::replan`]); returns its task JSON, its
    /// workload and whether the plan changed.
    pub(crate) fn lower(
        &mut self,
        task: &Task,
        module: &mut Module,
        replan: Option<&SeedPolicy>,
    ) -> Result<(Value, LowerResult, bool), TuneError> {
        let f = module
            .function_mut(&task.name)
            .expect("tasks name functions of the module");
        let tj = task_json(f).map_err(|e| task_error(&task.name, e))?;
        let lowered = self.worker.lower(&LowerRequest {
            task: tj.clone(),
            target: self.target_json.clone(),
        })?;
        let replanned = match replan {
            Some(policy) => self.replan(f, lowered.structural_hash, policy)?,
            None => false,
        };
        Ok((tj, lowered, replanned))
    }

    /// Lowers the task (re-planned under `policy`, if any, as [`Run::lower`] does) and reads
    /// its plan and the plan's seeds: what a tuning run and a build do first for each task.
    /// (The caller tells the observer that the task started.)
    pub(crate) fn prepare_task(
        &mut self,
        task: &Task,
        module: &mut Module,
        policy: Option<&SeedPolicy>,
        observer: &mut dyn Observer,
    ) -> Result<PreparedTask, TuneError> {
        let (task_json, lowered, replanned) = self.lower(task, module, policy)?;
        let f = module
            .function(&task.name)
            .expect("tasks name functions of the module");
        let plan = seed_plan(f)
            .map_err(TuneError::Config)?
            .ok_or_else(|| task_error(&task.name, format!("carries no {SEED_PLAN_ATTR}")))?;
        let seeds = self.seeds(task, &plan, observer)?;
        Ok(PreparedTask {
            task_json,
            lowered,
            replanned,
            plan,
            seeds,
        })
    }

    /// Looks the task up again (now with its TVM workload hash, which finds imported
    /// MetaSchedule records, and with the records earlier tasks of the run wrote) and plans
    /// it under `policy`, as annotate-cache and seed-schedules do. Returns whether the plan
    /// changed.
    fn replan(
        &self,
        f: &mut Function,
        tvm_hash: u64,
        policy: &SeedPolicy,
    ) -> Result<bool, TuneError> {
        let before = f.attrs.get(SEED_PLAN_ATTR).cloned();
        f.attrs
            .insert(WORKLOAD_HASH_ATTR.into(), Attr::Str(tvm_hash.to_string()));
        if let Some(cache) = &self.cache {
            let annotate = AnnotateCache {
                source: CacheSource::Opened(cache.clone()),
                target: self.target.clone(),
                toolchain: self.toolchain.clone(),
                limit: DEFAULT_CANDIDATE_LIMIT,
            };
            annotate
                .annotate(Some(&*cache.lock()), f)
                .map_err(|e| task_error(&f.name, e))?;
        }
        let plan = SeedSchedules(policy.clone())
            .plan(f)
            .map_err(|e| task_error(&f.name, e))?;
        let after = plan.to_attr();
        let changed = before.as_ref() != Some(&after);
        f.attrs.insert(SEED_PLAN_ATTR.into(), after);
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
        let Some(shared) = &self.cache else {
            if seed_plan.seeds.is_empty() {
                return Ok(Vec::new());
            }
            return Err(task_error(
                &task.name,
                "its seed plan names seeds, but --no-cache has no cache to read them from",
            ));
        };
        let cache = shared.lock();
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
    /// provenance; returns how many were inserted or replaced. Whether stored measurements
    /// may be replaced is [`replaces_stored`]'s rule ([`Cache::put`], else
    /// [`Cache::put_missing`]). A cache that refuses writes (read-only) is warned about
    /// once and then skipped.
    pub(crate) fn write_back(
        &mut self,
        task: &Task,
        workload: Option<Workload>,
        result: &SearchOutcome,
        effort: u64,
        source: &str,
        observer: &mut dyn Observer,
    ) -> Result<usize, TuneError> {
        if self.cache_writes_refused {
            return Ok(0);
        }
        let Some(shared) = &self.cache else {
            return Ok(0);
        };
        let entry = TaskEntry {
            keys: task.keys,
            features: task.features.clone(),
            workload,
        };
        let new = self.new_records(task, result, effort, source);
        let put = if replaces_stored(result.stopped) {
            Cache::put
        } else {
            Cache::put_missing
        };
        let outcome = put(
            &mut shared.lock(),
            &entry,
            &self.target,
            &self.toolchain,
            &new,
        );
        match outcome {
            Ok(s) => Ok(s.inserted + s.replaced),
            Err(e) if e.is_read_only() => {
                observer.warning(&format!(
                    "{e}; from here on no record of this run is written back"
                ));
                self.cache_writes_refused = true;
                Ok(0)
            }
            Err(e) => Err(task_error(&task.name, e)),
        }
    }

    /// The records of a search the cache takes: only re-measured ones (a search's single
    /// measurement is the minimum of noisy draws, biased low, and would become the bar a
    /// later exact hit misses), with `effort` trials of search behind them.
    fn new_records(
        &self,
        task: &Task,
        result: &SearchOutcome,
        effort: u64,
        source: &str,
    ) -> Vec<NewRecord> {
        result
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
            .collect()
    }

    /// A tuning session of the task `name` (JSON `task`) with this run's settings.
    pub(crate) fn session(
        &self,
        name: &str,
        task: Value,
        max_trials: Trials,
        per_round: Trials,
        cost_model: CostModelKind,
    ) -> TuneOpen {
        let s = &self.config.search;
        TuneOpen {
            task,
            target: self.target_json.clone(),
            work_dir: self.work_dir.join(name),
            seed: s.seed,
            max_trials,
            max_round: largest_round(per_round),
            evolutionary: json!({ "population_size": self.config.population }),
            evaluator: s.evaluator,
            builder_timeout_s: s.builder_timeout_s,
            runner_timeout_s: s.runner_timeout_s,
            cost_model,
            cost_model_file: match cost_model {
                CostModelKind::Xgb => self.cost_model.clone(),
                CostModelKind::Random => None,
            },
            rpc: self.config.rpc.clone(),
        }
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
        let m = &self.config.model_timing;
        Ok(self.worker.build_and_measure(&BuildRequest {
            module: mj,
            records: by_function,
            target: self.target_json.clone(),
            repeat: m.repeat,
            number: m.number,
            seed: m.seed,
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

/// The target as the run requests it (resolved from its spelling, an RPC device's key in its
/// tag) and as the cache spells it until TVM's canonical form is known.
fn requested_target(config: &TuneConfig) -> Result<(Value, Target), TuneError> {
    let mut requested = resolve_target(&config.target).map_err(TuneError::Config)?;
    if let Some(rpc) = &config.rpc {
        device_target(&mut requested, &rpc.key).map_err(TuneError::Config)?;
    }
    let spelled = Target::from_json(&requested).map_err(|e| TuneError::Config(e.to_string()))?;
    Ok((requested, spelled))
}

/// A build's cache must exist: a missing file is a one-line error before the worker starts.
fn check_exists(location: &CacheLocation) -> Result<(), TuneError> {
    if !location.exists() {
        return Err(TuneError::Io {
            path: location.as_path().to_path_buf(),
            message:
                "no cache there (tune a model first, or --no-cache for TVM's default schedules)"
                    .into(),
        });
    }
    Cache::open_existing(location)?;
    Ok(())
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
fn work_dir(config: &TuneConfig, prefix: &str) -> Result<PathBuf, TuneError> {
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
        let (local, local_spelled) = requested_target(&config).unwrap();
        config.rpc = Some(RpcTracker::parse("127.0.0.1:9190", "k1", 2).unwrap());
        let (remote, remote_spelled) = requested_target(&config).unwrap();
        assert_ne!(local_spelled, remote_spelled);
        assert_eq!(remote["tag"], "rpc:k1");
        assert!(local.get("tag").is_none());
    }
}
