//! `build`: the deployable model from the cache, with zero-trial transfer.
//!
//! The build shares the tuning run's set-up ([`Run::start`]: the worker, TVM's canonical
//! target, the toolchain, the cache) and its planning: the named pipeline gives every task
//! its ranked candidates and a seed plan (annotate-cache, seed-schedules), and each task is
//! lowered and planned again with its TVM workload hash, which finds imported MetaSchedule
//! records. Then, per task, by the plan's tier:
//!
//! - exact (the task's own workload, by tgc key or TVM hash): the best exact records as they
//!   are, best first; the build applies the first that replays.
//! - structural or family neighbours: a zero-trial transfer of the plan's seeds (their
//!   traces with the workload of the task they were tuned on, so the worker repairs tiles or
//!   transfers the anchor block's schedule). With `measure_candidates` K > 0 the seeds are
//!   replayed on the task (no measurement) until K replay, and those K are measured as one
//!   batch of trials in a tuning session, without a search; the fastest goes into
//!   the build, and the measured records are written back to the cache with K trials as
//!   their effort (never 0, which would read as a complete search). With K = 0 the seeds go
//!   to the build in rank order and the first that replays is applied.
//! - nothing cached: TVM's default schedule.
//!
//! The whole model is then built once (the worker's `build_and_measure` with `export`),
//! checked against an untuned build on random inputs, timed, and written as a plain TVM
//! library, with a sidecar JSON (`tgc.artifact/1`) naming the target and the inputs in order.
//!
//! [`plan_schedules`] stops before that build: it returns the model and each task's records
//! as the worker's `build` takes them, for a front end that applies them to the model itself
//! (the Python package's `tgc.relax.ApplyCache`, a pass before `tvm.compile`).

use crate::config::{CostModel, SearchSettings, TuneConfig};
use crate::error::TuneError;
use crate::observer::Observer;
use crate::rules::{SearchLimits, WritebackScope};
use crate::run::{CacheUse, PreparedTask, Run};
use crate::search::{search, SearchJob, SearchOutcome};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tgc_cache::{CacheLocation, Workload};
use tgc_canonicalize::{extract_annotated_tasks, Task};
use tgc_ir::{Attr, Module};
use tgc_passes::convert_layout::PERMUTED_PARAMS_ATTR;
use tgc_passes::seeding::{SeedPlan, SeedPolicy, Tier};
use tgc_tvm::{
    module_json, Applied, BenchRequest, BenchResult, BuildRecord, BuildResult, Built,
    CostModelKind, LowerResult, ModelInput, ReplayRequest, Seed,
};

/// The configuration of one build.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildConfig {
    /// As [`TuneConfig::target`].
    pub target: String,
    /// The cache file or `postgres://` URL; `None`: `$TGC_CACHE`, else the user cache dir.
    /// It must exist.
    pub cache: Option<CacheLocation>,
    /// As [`TuneConfig::cache_read_only`]: records a build measures are not written back.
    pub cache_read_only: bool,
    /// TVM's default schedules for every task: no cache is read.
    pub no_cache: bool,
    /// Candidates measured per transferred task (0: rank only, nothing measured).
    pub measure_candidates: u64,
    /// Most candidates of a task considered (replayed) for a transfer.
    pub max_candidates: usize,
    /// Where the library goes; its sidecar is this path with `.json` appended.
    pub output: PathBuf,
    /// Also build the model untuned and compare the outputs of both on random inputs (and
    /// time the built one): `end_to_end` of the report. Without it the model is built once
    /// and exported, nothing else.
    pub check: bool,
    /// Time the built library (and an untuned build) with [`BENCH_REPEATS`] runs.
    pub bench: bool,
    /// With `bench`: also time onnxruntime on this ONNX file (the model's), on the same
    /// inputs and threads.
    pub onnxruntime: Option<PathBuf>,
    /// Where the worker log and MetaSchedule's logs go; `None`: a temp dir.
    pub work_dir: Option<PathBuf>,
    /// The model's name in the report and in the provenance of written-back records.
    pub model_name: String,
}

impl BuildConfig {
    /// The default K: rank only. Measuring 2 candidates per transferred task made a
    /// ResNet-50 build from Wide-ResNet-50-2's cache 73 s instead of 34 s for a 1.10x faster
    /// model (204 against 225 ms; docs/build.md): over the minute a build may take here.
    pub const DEFAULT_MEASURE_CANDIDATES: u64 = 0;

    pub fn new(model_name: impl Into<String>, output: impl Into<PathBuf>) -> BuildConfig {
        BuildConfig {
            target: "llvm".into(),
            cache: None,
            cache_read_only: false,
            no_cache: false,
            measure_candidates: Self::DEFAULT_MEASURE_CANDIDATES,
            max_candidates: SeedPolicy::DEFAULT.max_seeds,
            output: output.into(),
            check: false,
            bench: false,
            onnxruntime: None,
            work_dir: None,
            model_name: model_name.into(),
        }
    }

    /// The tuning configuration the shared run set-up and planning take.
    fn run_config(&self) -> TuneConfig {
        TuneConfig {
            target: self.target.clone(),
            cache: self.cache.clone(),
            cache_read_only: self.cache_read_only,
            no_cache: self.no_cache,
            policy: SeedPolicy {
                max_seeds: self.max_candidates,
                ..SeedPolicy::DEFAULT
            },
            cost_model: CostModel::Cold,
            measure: true,
            work_dir: self.work_dir.clone(),
            ..TuneConfig::new(self.model_name.clone())
        }
    }
}

/// Timing runs of `bench` (`tgc bench`, `tgc build --bench`) by default.
pub const BENCH_REPEATS: u64 = 50;

/// The most timing runs of an untuned build in `bench`: TVM's default schedules take
/// seconds per call on a CNN.
pub const UNTUNED_REPEATS: u64 = 10;

/// The tier a task's schedule came from in the build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AppliedTier {
    /// The task's own record (tgc exact key or TVM workload hash), as is.
    Exact,
    /// A structural neighbour's trace, tiles repaired.
    StructuralTransfer,
    /// A family neighbour's trace, by anchor-trace transfer.
    FamilyTransfer,
    /// TVM's default schedule: nothing cached applied.
    Default,
}

impl AppliedTier {
    pub fn as_str(self) -> &'static str {
        match self {
            AppliedTier::Exact => "exact",
            AppliedTier::StructuralTransfer => "structural-transfer",
            AppliedTier::FamilyTransfer => "family-transfer",
            AppliedTier::Default => "default",
        }
    }

    fn of(tier: Option<Tier>) -> AppliedTier {
        match tier {
            Some(t) if t.is_exact() => AppliedTier::Exact,
            Some(Tier::Structural) => AppliedTier::StructuralTransfer,
            Some(_) => AppliedTier::FamilyTransfer,
            None => AppliedTier::Default,
        }
    }
}

/// What the build did for one task.
#[derive(Clone, Debug)]
pub struct BuildTask {
    pub name: String,
    pub occurrences: usize,
    pub workload_hash: u64,
    /// The plan's tier (where the candidates came from).
    pub plan_tier: Option<Tier>,
    pub applied: AppliedTier,
    /// How the worker applied the record that went in.
    pub mode: Option<Applied>,
    /// Candidates the cache offered (the plan's seeds).
    pub candidates: usize,
    /// Candidates replayed (validated) on the task, by replay or by the build.
    pub tried: u64,
    /// Of those, the ones that did not replay.
    pub failed: u64,
    /// Candidates measured (K > 0 transfers only).
    pub measured: u64,
    /// The applied record's source (model, task, latency there); for a measured transfer,
    /// the sources of every measured candidate (`measured_sources`), the fastest applied.
    pub source: Value,
    pub measured_sources: Vec<Value>,
    /// Seconds: the cached latency of an exact record, or the measured one of a transfer.
    pub latency_s: Option<f64>,
    /// `cached` or `measured`.
    pub latency_kind: Option<&'static str>,
    pub records_written: usize,
    pub wall_s: f64,
    /// Floating-point operations of one occurrence (a multiply-add counts two).
    pub flops: f64,
}

impl BuildTask {
    /// GFLOP/s of one occurrence at `latency_s` (none when the latency is unknown).
    pub fn gflops(&self) -> Option<f64> {
        self.latency_s
            .filter(|&l| l > 0.0)
            .map(|l| self.flops / l / 1e9)
    }

    /// The task's entry in the reports (`tgc.build/1`, `tgc.apply-cache/1`).
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "occurrences": self.occurrences,
            "workload_hash": self.workload_hash.to_string(),
            "plan_tier": tgc_passes::seeding::tier_name(self.plan_tier),
            "tier": self.applied.as_str(),
            "mode": self.mode,
            "candidates": self.candidates,
            "tried": self.tried,
            "failed": self.failed,
            "measured": self.measured,
            "source": self.source,
            "measured_sources": self.measured_sources,
            "latency_s": self.latency_s,
            "latency_kind": self.latency_kind,
            "records_written": self.records_written,
            "wall_s": self.wall_s,
            "flops": self.flops,
            "gflops": self.gflops(),
        })
    }
}

/// The whole build, as the `tgc.build/1` JSON report.
#[derive(Clone, Debug)]
pub struct BuildReport {
    pub model: String,
    pub target_spelling: Value,
    pub target: Value,
    pub toolchain: tgc_cache::Toolchain,
    pub no_cache: bool,
    pub measure_candidates: u64,
    pub tasks: Vec<BuildTask>,
    pub artifact: PathBuf,
    pub sidecar: PathBuf,
    /// Seconds of the whole build (worker start to the sidecar written).
    pub build_wall_s: f64,
    /// Seconds of the per-task work (lowering, replay, measuring candidates).
    pub tasks_wall_s: f64,
    /// How the records went into the model.
    pub built: Built,
    /// With `check`: the output comparison with an untuned build, and the built model's
    /// latency (20 runs).
    pub end_to_end: Option<BuildResult>,
    pub bench: Option<BenchResult>,
}

impl BuildReport {
    /// Tasks per applied tier.
    pub fn tasks_by_tier(&self) -> BTreeMap<&'static str, usize> {
        let mut m = BTreeMap::new();
        for t in [
            AppliedTier::Exact,
            AppliedTier::StructuralTransfer,
            AppliedTier::FamilyTransfer,
            AppliedTier::Default,
        ] {
            m.insert(t.as_str(), 0);
        }
        for t in &self.tasks {
            *m.entry(t.applied.as_str()).or_default() += 1;
        }
        m
    }

    /// Where the model's time goes, by arithmetic rate: the model's floating-point work, the
    /// GFLOP/s of the tasks whose latency is known (exact records' cached latency, measured
    /// transfers) weighted by their time, the tasks with the largest share of that time, and
    /// the end-to-end rates of this library and of onnxruntime over the same work.
    pub fn arithmetic(&self) -> Arithmetic {
        let model_flops: f64 = self
            .tasks
            .iter()
            .map(|t| t.occurrences as f64 * t.flops)
            .sum();
        let timed: Vec<&BuildTask> = self.tasks.iter().filter(|t| t.gflops().is_some()).collect();
        let time = |t: &BuildTask| t.occurrences as f64 * t.latency_s.unwrap_or(0.0);
        let timed_s: f64 = timed.iter().map(|t| time(t)).sum();
        let timed_flops: f64 = timed.iter().map(|t| t.occurrences as f64 * t.flops).sum();
        let mut by_time: Vec<TaskTime> = timed
            .iter()
            .map(|t| TaskTime {
                name: t.name.clone(),
                share: time(t) / timed_s,
                gflops: t.gflops().unwrap_or(0.0),
            })
            .collect();
        by_time.sort_by(|a, b| b.share.total_cmp(&a.share));
        let rate = |ms: f64| (ms > 0.0).then(|| model_flops / (ms / 1e3) / 1e9);
        Arithmetic {
            model_gflop: model_flops / 1e9,
            tasks_timed: timed.len(),
            timed_ms: timed_s * 1e3,
            timed_gflops: (timed_s > 0.0).then(|| timed_flops / timed_s / 1e9),
            by_time,
            end_to_end_gflops: self.bench.as_ref().and_then(|b| rate(b.latency_ms.median)),
            onnxruntime_gflops: self
                .bench
                .as_ref()
                .and_then(|b| b.onnxruntime.as_ref())
                .and_then(|o| rate(o.latency_ms.median)),
        }
    }

    /// `Err` with the worker's account when the built model's outputs differ from an
    /// untuned build's.
    pub fn check_outputs(&self) -> Result<(), String> {
        crate::report::outputs_check(&self.model, "built", self.end_to_end.as_ref())
    }

    pub fn to_json(&self) -> Value {
        let tc = &self.toolchain;
        json!({
            "schema": "tgc.build/1",
            "model": self.model,
            "target": self.target,
            "target_spelling": self.target_spelling,
            "toolchain": {"tvm": tc.tvm, "tvm_ffi": tc.tvm_ffi, "llvm": tc.llvm, "pinned": tc.is_pinned()},
            "no_cache": self.no_cache,
            "measure_candidates": self.measure_candidates,
            "artifact": self.artifact,
            "sidecar": self.sidecar,
            "tasks": self.tasks.iter().map(BuildTask::to_json).collect::<Vec<_>>(),
            "totals": {
                "tasks": self.tasks.len(),
                "tasks_by_tier": self.tasks_by_tier(),
                "candidates_tried": self.tasks.iter().map(|t| t.tried).sum::<u64>(),
                "candidates_failed": self.tasks.iter().map(|t| t.failed).sum::<u64>(),
                "candidates_measured": self.tasks.iter().map(|t| t.measured).sum::<u64>(),
                "tasks_wall_s": self.tasks_wall_s,
                "build_wall_s": self.build_wall_s,
            },
            "end_to_end": self.end_to_end,
            "bench": self.bench,
            "arithmetic": self.arithmetic(),
        })
    }
}

/// [`BuildReport::arithmetic`]: GFLOP are 1e9 floating-point operations, GFLOP/s per second.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Arithmetic {
    /// The model's work: every task's FLOPs times its occurrences.
    pub model_gflop: f64,
    /// Tasks whose latency is known.
    pub tasks_timed: usize,
    /// Their time in the model (latency times occurrences).
    pub timed_ms: f64,
    /// Their work over their time.
    pub timed_gflops: Option<f64>,
    /// Each timed task's share of that time and its rate, largest share first.
    pub by_time: Vec<TaskTime>,
    /// The model's work over the library's median end-to-end latency (with `bench`).
    pub end_to_end_gflops: Option<f64>,
    /// The same work over onnxruntime's median latency on the same file.
    pub onnxruntime_gflops: Option<f64>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct TaskTime {
    pub name: String,
    pub share: f64,
    pub gflops: f64,
}

/// The sidecar of a library: `OUT.so` -> `OUT.so.json`.
pub fn sidecar_path(library: &Path) -> PathBuf {
    let mut s = library.as_os_str().to_owned();
    s.push(".json");
    PathBuf::from(s)
}

/// Marks the inputs that `@main` lists as permuted (the `convert-layout` pass's
/// [`PERMUTED_PARAMS_ATTR`]) with their permutation of the model's input.
fn mark_permuted_inputs(module: &Module, inputs: &mut [ModelInput]) {
    let Some(permuted) = module
        .function("main")
        .and_then(|f| f.attrs.get(PERMUTED_PARAMS_ATTR))
        .and_then(Attr::as_dict)
    else {
        return;
    };
    for input in inputs {
        input.permutation = permuted
            .get(&input.name)
            .and_then(Attr::as_ints)
            .map(|axes| axes.iter().map(|&a| a as usize).collect());
    }
}

/// The sidecar's JSON (`tgc.artifact/1`): how to call the library.
fn sidecar_json(
    module: &Module,
    library: &Path,
    target: &Value,
    inputs: &[ModelInput],
) -> Result<Value, String> {
    let main = module.function("main").ok_or("the module has no @main")?;
    let outputs: Vec<Value> = main
        .results
        .iter()
        .map(|&r| {
            let t = main.ty(r);
            json!({"shape": t.shape.as_slice(), "dtype": t.dtype.tvm_name()})
        })
        .collect();
    Ok(json!({
        "schema": "tgc.artifact/1",
        "library": library.file_name().map(|n| n.to_string_lossy().into_owned()),
        "entry": "main",
        "target": target,
        "inputs": inputs,
        "outputs": outputs,
    }))
}

/// The calling convention of a built library, as a few lines of Python with stock TVM. With
/// `packed` weights (`--pack-weights`), `main_transform_params` packs them once and `main`
/// takes the other inputs, then them.
pub fn calling_convention(library: &Path, target: &Value, packed: bool) -> String {
    let device = match target["kind"].as_str() {
        Some("cuda") => "tvm.cuda()",
        _ => "tvm.cpu()",
    };
    let lib = library.display();
    let head = format!(
        "import json, numpy as np, tvm\n\
         from tvm import relax\n\
         vm = relax.VirtualMachine(tvm.runtime.load_module(\"{lib}\"), {device})\n\
         spec = json.load(open(\"{lib}.json\"))[\"inputs\"]\n\
         inputs = [tvm.runtime.tensor(np.zeros(i[\"shape\"], i[\"dtype\"]), {device}) for i in spec]\n"
    );
    if packed {
        format!(
            "{head}\
             packed = vm[\"main_transform_params\"]([x for x, i in zip(inputs, spec) if i.get(\"packed\")])  # once per set of weights\n\
             out = vm[\"main\"](*[x for x, i in zip(inputs, spec) if not i.get(\"packed\")], *packed)\n"
        )
    } else {
        format!("{head}out = vm[\"main\"](*inputs)  # the model's inputs, weights included, in the sidecar's order\n")
    }
}

/// What [`build`] and [`plan_schedules`] share: the run, and each task's records chosen.
struct Prepared<'a> {
    run: Run<'a>,
    tasks: Vec<Task>,
    planned: Vec<PlannedTask>,
    tasks_wall_s: f64,
}

/// Starts the run (after the quick checks of the cache), plans the module and chooses each
/// task's records (for a measured transfer, measuring its candidates).
fn prepare<'a>(
    module: &mut Module,
    config: &BuildConfig,
    run_config: &'a TuneConfig,
    observer: &mut dyn Observer,
) -> Result<Prepared<'a>, TuneError> {
    let run = Run::open(run_config, "tgc-build", CacheUse::Existing, observer)?;
    if let Some(cache) = &run.cache {
        let stats = cache.lock().stats()?;
        let here: u64 = stats
            .targets
            .iter()
            .filter(|(_, json, _)| json == run.target.canonical_json())
            .map(|(_, _, n)| n)
            .sum();
        if here == 0 {
            let others: Vec<String> = stats
                .targets
                .iter()
                .filter(|(_, _, n)| *n > 0)
                .map(|(kind, _, n)| format!("{n} for a {kind} target"))
                .collect();
            return Err(TuneError::Io {
                path: cache.lock().path().to_path_buf(),
                message: format!(
                    "no records for target {} ({}); tune for this target first, or --no-cache for TVM's default schedules",
                    run.target,
                    if others.is_empty() {
                        "the cache is empty".to_string()
                    } else {
                        format!("it holds {}", others.join(", "))
                    }
                ),
            });
        }
    }
    let mut run = run;
    run.plan_module(module)?;
    let tasks = extract_annotated_tasks(module)
        .map_err(|e| TuneError::Config(format!("{}: {e}", config.model_name)))?;
    observer.started(tasks.len());

    let tasks_started = Instant::now();
    let mut planned = Vec::with_capacity(tasks.len());
    for task in &tasks {
        planned.push(plan_task(&mut run, config, task, module, observer)?);
    }
    Ok(Prepared {
        run,
        tasks,
        planned,
        tasks_wall_s: tasks_started.elapsed().as_secs_f64(),
    })
}

/// Builds `module` as `config` says: a library at `config.output`, its sidecar beside it.
pub fn build(
    mut module: Module,
    config: &BuildConfig,
    observer: &mut dyn Observer,
) -> Result<BuildReport, TuneError> {
    let started = Instant::now();
    let run_config = config.run_config();
    if let Some(dir) = config.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(TuneError::Io {
                path: dir.to_path_buf(),
                message: "no such directory for the output library".into(),
            });
        }
    }
    let Prepared {
        mut run,
        tasks,
        planned,
        tasks_wall_s,
    } = prepare(&mut module, config, &run_config, observer)?;

    observer.measuring();
    let records: Vec<(&Task, Vec<Value>)> = tasks
        .iter()
        .zip(&planned)
        .filter(|(_, p)| !p.records.is_empty())
        .map(|(t, p)| (t, p.records.clone()))
        .collect();
    // The worker runs in this directory too, but says where it wrote in absolute terms.
    let output = std::path::absolute(&config.output).unwrap_or(config.output.clone());
    let (built, end_to_end) = if config.check {
        let m = run.build_model(&module, &records, Some(output))?;
        (m.built(), Some(m))
    } else {
        (run.export_model(&module, &records, output)?, None)
    };

    let mut built = built;
    mark_permuted_inputs(&module, &mut built.inputs);
    let mut reports = Vec::with_capacity(tasks.len());
    for (task, p) in tasks.iter().zip(planned) {
        reports.push(p.finish(task, &built));
    }
    let sidecar = sidecar_path(&config.output);
    let side = sidecar_json(&module, &config.output, &run.target_json, &built.inputs)
        .map_err(|e| TuneError::Config(format!("{}: {e}", config.model_name)))?;
    std::fs::write(
        &sidecar,
        format!(
            "{}\n",
            serde_json::to_string_pretty(&side).expect("JSON values serialize")
        ),
    )
    .map_err(|e| TuneError::Io {
        path: sidecar.clone(),
        message: format!("cannot write: {e}"),
    })?;
    let build_wall_s = started.elapsed().as_secs_f64();
    let bench = if config.bench {
        let untuned = module_json(&module)
            .map_err(|e| TuneError::Config(format!("{}: {e}", config.model_name)))?;
        let t = run.config.model_timing;
        Some(run.worker.bench(&BenchRequest {
            library: std::path::absolute(&config.output).unwrap_or(config.output.clone()),
            inputs: built.inputs.clone(),
            target: run.target_json.clone(),
            repeat: BENCH_REPEATS,
            number: t.number,
            seed: t.seed,
            untuned: Some(untuned),
            untuned_repeat: Some(UNTUNED_REPEATS),
            onnx: config.onnxruntime.as_deref().map(absolute),
        })?)
    } else {
        None
    };
    let report = BuildReport {
        model: config.model_name.clone(),
        target_spelling: run.requested.clone(),
        target: run.target_json.clone(),
        toolchain: run.toolchain.clone(),
        no_cache: config.no_cache,
        measure_candidates: config.measure_candidates,
        tasks: reports,
        artifact: config.output.clone(),
        sidecar,
        build_wall_s,
        tasks_wall_s,
        built,
        end_to_end,
        bench,
    };
    run.finish();
    Ok(report)
}

/// A build's per-task record choice without the build: for a front end that applies the
/// records to the model itself (the Python package's pass for `tvm.compile`). The worker
/// that chose them is shut down; `module` and `records` are what its `build` method takes.
#[derive(Clone, Debug)]
pub struct SchedulePlan {
    pub model: String,
    pub target_spelling: Value,
    /// TVM's canonical form of the target, which the records are for.
    pub target: Value,
    pub toolchain: tgc_cache::Toolchain,
    pub no_cache: bool,
    pub measure_candidates: u64,
    /// The partitioned model as the worker takes it (`module_json`): its params, one task
    /// per function of a task, the calls, the results.
    pub module: Value,
    /// Per function of each task, the task's records, best first (the first that replays
    /// goes in).
    pub records: BTreeMap<String, Vec<Value>>,
    /// Each task's functions, in the model's order: `(task name, function names)`.
    pub functions: Vec<(String, Vec<String>)>,
    pub tasks_wall_s: f64,
    tasks: Vec<(Task, PlannedTask)>,
}

impl SchedulePlan {
    /// Each task function's TVM workload hash, as the worker lowered it for planning (the
    /// functions of one task share it).
    pub fn workload_hashes(&self) -> BTreeMap<String, u64> {
        self.tasks
            .iter()
            .flat_map(|(t, p)| t.functions.iter().map(|f| (f.clone(), p.workload_hash)))
            .collect()
    }

    /// The `tgc.apply-cache/1` report once `built` says how the records went in: per task
    /// what [`build`]'s report says (tier, mode, source, candidates, latency).
    pub fn report(&self, built: &Built) -> Value {
        let tasks: Vec<BuildTask> = self
            .tasks
            .iter()
            .map(|(t, p)| p.clone().finish(t, built))
            .collect();
        let mut by_tier = BTreeMap::new();
        for t in &tasks {
            *by_tier.entry(t.applied.as_str()).or_insert(0usize) += 1;
        }
        let tc = &self.toolchain;
        json!({
            "schema": "tgc.apply-cache/1",
            "model": self.model,
            "target": self.target,
            "target_spelling": self.target_spelling,
            "toolchain": {"tvm": tc.tvm, "tvm_ffi": tc.tvm_ffi, "llvm": tc.llvm, "pinned": tc.is_pinned()},
            "no_cache": self.no_cache,
            "measure_candidates": self.measure_candidates,
            "tasks": self.tasks.iter().zip(&tasks).map(|((t, _), b)| {
                let mut v = b.to_json();
                v["functions"] = json!(t.functions);
                v["exact_key"] = json!(t.keys.exact.to_string());
                v
            }).collect::<Vec<_>>(),
            "scheduled": built.scheduled,
            "totals": {
                "tasks": tasks.len(),
                "tasks_by_tier": by_tier,
                "tasks_wall_s": self.tasks_wall_s,
            },
        })
    }
}

/// The records [`build`] would apply to each task of `module`, chosen as it chooses them
/// (exact records as they are, neighbours' traces for a transfer, with `measure_candidates`
/// measured), without building the model: `output`, `check` and `bench` are not used.
pub fn plan_schedules(
    mut module: Module,
    config: &BuildConfig,
    observer: &mut dyn Observer,
) -> Result<SchedulePlan, TuneError> {
    let run_config = config.run_config();
    let Prepared {
        run,
        tasks,
        planned,
        tasks_wall_s,
    } = prepare(&mut module, config, &run_config, observer)?;
    let mj = module_json(&module)
        .map_err(|e| TuneError::Config(format!("{}: {e}", config.model_name)))?;
    let mut records = BTreeMap::new();
    for (t, p) in tasks.iter().zip(&planned) {
        if p.records.is_empty() {
            continue;
        }
        for f in &t.functions {
            records.insert(f.clone(), p.records.clone());
        }
    }
    let functions = tasks
        .iter()
        .map(|t| (t.name.clone(), t.functions.clone()))
        .collect();
    let (target_spelling, target) = (run.requested.clone(), run.target_json.clone());
    let toolchain = run.toolchain.clone();
    run.finish();
    Ok(SchedulePlan {
        model: config.model_name.clone(),
        target_spelling,
        target,
        toolchain,
        no_cache: config.no_cache,
        measure_candidates: config.measure_candidates,
        module: mj,
        records,
        functions,
        tasks_wall_s,
        tasks: tasks.into_iter().zip(planned).collect(),
    })
}

/// A task's part of the build before the model is built: the records it sends and what the
/// report says about them.
#[derive(Clone, Debug)]
struct PlannedTask {
    plan: SeedPlan,
    workload_hash: u64,
    /// Sent to the build, best first.
    records: Vec<Value>,
    /// The source of each record sent, in order (for a measured transfer: one entry, the
    /// fastest's sources being unknown, `Value::Null`).
    sources: Vec<Value>,
    candidates: usize,
    /// Replayed before the build (K > 0) and failed there.
    pre_tried: u64,
    pre_failed: u64,
    measured: u64,
    measured_sources: Vec<Value>,
    latency_s: Option<f64>,
    latency_kind: Option<&'static str>,
    records_written: usize,
    wall_s: f64,
}

impl PlannedTask {
    /// The report of the task once the build says which record went in.
    fn finish(self, task: &Task, built: &Built) -> BuildTask {
        let mode = built.applied.get(&task.name).copied().flatten();
        let build_failed = built.failed.get(&task.name).copied().unwrap_or(0);
        let applied = match mode {
            None => AppliedTier::Default,
            Some(_) => AppliedTier::of(self.plan.tier),
        };
        // The build tried its records in order: the first `build_failed` did not replay.
        let tried_in_build = if mode.is_some() {
            build_failed + 1
        } else {
            build_failed
        };
        let source = if mode.is_some() {
            self.sources
                .get(build_failed as usize)
                .cloned()
                .unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let measured_transfer = self.measured > 0;
        BuildTask {
            name: task.name.clone(),
            occurrences: task.occurrences,
            workload_hash: self.workload_hash,
            plan_tier: self.plan.tier,
            applied,
            mode,
            candidates: self.candidates,
            // a measured transfer's records are replays of already validated candidates
            tried: if measured_transfer {
                self.pre_tried
            } else {
                self.pre_tried + tried_in_build
            },
            failed: if measured_transfer {
                self.pre_failed
            } else {
                self.pre_failed + build_failed
            },
            measured: self.measured,
            source,
            measured_sources: self.measured_sources,
            latency_s: if mode.is_some() { self.latency_s } else { None },
            latency_kind: if mode.is_some() {
                self.latency_kind
            } else {
                None
            },
            records_written: self.records_written,
            wall_s: self.wall_s,
            flops: task.features.flops,
        }
    }
}

/// Lowers and plans one task, and for a measured transfer measures its candidates.
fn plan_task(
    run: &mut Run<'_>,
    config: &BuildConfig,
    task: &Task,
    module: &mut Module,
    observer: &mut dyn Observer,
) -> Result<PlannedTask, TuneError> {
    let t0 = Instant::now();
    let policy = (!config.no_cache).then(|| run.policy());
    let PreparedTask {
        task_json: tj,
        lowered,
        plan,
        seeds,
        ..
    } = run.prepare_task(task, module, policy.as_ref(), observer)?;
    observer.task_started(&task.name, &plan);
    let mut out = PlannedTask {
        plan: plan.clone(),
        workload_hash: lowered.structural_hash,
        records: Vec::new(),
        sources: Vec::new(),
        candidates: seeds.len(),
        pre_tried: 0,
        pre_failed: 0,
        measured: 0,
        measured_sources: Vec::new(),
        latency_s: None,
        latency_kind: None,
        records_written: 0,
        wall_s: 0.0,
    };
    let exact = plan.tier.is_some_and(Tier::is_exact);
    if exact || config.measure_candidates == 0 || seeds.is_empty() {
        out.records = zero_trial_records(&plan, &seeds);
        out.sources = seeds.iter().map(|(_, source)| source.clone()).collect();
        if exact {
            out.latency_s = plan
                .cached_latency_s
                .or_else(|| seeds.first().and_then(|(_, s)| s["latency_s"].as_f64()));
            out.latency_kind = Some("cached");
        }
    } else {
        let k = config.measure_candidates as usize;
        let Replayed {
            valid,
            tried,
            failed,
        } = replay_until(run, &tj, &seeds, k)?;
        (out.pre_tried, out.pre_failed) = (tried, failed);
        if !valid.is_empty() {
            let (result, written) = measure_candidates(run, task, tj, lowered, &valid, observer)?;
            out.measured = result.trials;
            out.measured_sources = valid.iter().map(|(_, s)| s.clone()).collect();
            out.latency_s = result.best_s;
            out.latency_kind = result.best_s.map(|_| "measured");
            for r in &result.records {
                out.records.push(r.trace.clone());
                out.sources.push(if valid.len() == 1 {
                    valid[0].1.clone()
                } else {
                    Value::Null
                });
            }
            out.records_written = written;
        }
    }
    out.wall_s = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// Seeds replayed before a measured transfer: the ones that replayed (with their sources),
/// and how many were tried and failed.
struct Replayed {
    valid: Vec<(Seed, Value)>,
    tried: u64,
    failed: u64,
}

/// Replays `seeds` on the task `tj` (no measurement) in rank order until `k` replay.
fn replay_until(
    run: &mut Run<'_>,
    tj: &Value,
    seeds: &[(Seed, Value)],
    k: usize,
) -> Result<Replayed, TuneError> {
    let (mut valid, mut tried, mut failed) = (Vec::new(), 0, 0);
    let mut next = 0;
    while valid.len() < k && next < seeds.len() {
        let end = (next + k - valid.len()).min(seeds.len());
        let chunk = &seeds[next..end];
        let replayed = run.worker.replay(&ReplayRequest {
            task: tj.clone(),
            target: run.target_json.clone(),
            traces: chunk.iter().map(|(s, _)| s.clone()).collect(),
        })?;
        for (c, r) in chunk.iter().zip(&replayed.results) {
            tried += 1;
            if r.ok {
                valid.push(c.clone());
            } else {
                failed += 1;
            }
        }
        next = end;
    }
    Ok(Replayed {
        valid,
        tried,
        failed,
    })
}

/// Measures the candidates `valid` as one batch of trials, without a search after them
/// (the fastest is the one the build takes), and writes the re-measured best back with
/// their number as its effort. Returns the search's outcome and the records written.
fn measure_candidates(
    run: &mut Run<'_>,
    task: &Task,
    tj: Value,
    lowered: LowerResult,
    valid: &[(Seed, Value)],
    observer: &mut dyn Observer,
) -> Result<(SearchOutcome, usize), TuneError> {
    let n = valid.len() as u64;
    let job = SearchJob {
        open: run.session(&task.name, tj, n, n, CostModelKind::Random),
        seeds: valid.iter().map(|(s, _)| s.clone()).collect(),
        limits: SearchLimits {
            max_trials: n,
            per_round: n,
            patience: 0,
            goal_s: None,
            tolerance: 0.0,
        },
        exact: None,
        seeds_only: true,
        writeback: WritebackScope::Best,
    };
    let settings = SearchSettings {
        remeasure_top: 1,
        ..run.config.search.clone()
    };
    let result = search(&mut run.worker, &job, &settings, &mut run.builds)?;
    let written = if result.trials > 0 {
        let workload = Workload {
            tvm_hash: lowered.structural_hash,
            json: lowered.workload_json,
        };
        run.write_back(
            task,
            Some(workload),
            &result,
            result.trials,
            "build",
            observer,
        )?
    } else {
        0
    };
    Ok((result, written))
}

/// The records a task is built with at zero trials, best first (the build applies the first
/// that replays): an exact plan's seeds are the task's own records, as they are; any other
/// plan's are neighbours' traces, each with its source workload for transfer.
pub(crate) fn zero_trial_records(plan: &SeedPlan, seeds: &[(Seed, Value)]) -> Vec<Value> {
    let exact = plan.tier.is_some_and(Tier::is_exact);
    seeds
        .iter()
        .map(|(seed, _)| match exact {
            true => seed.trace.clone(),
            false => transfer_record(seed),
        })
        .collect()
}

/// A neighbour's trace as the build takes it: with its source workload, for transfer.
fn transfer_record(seed: &Seed) -> Value {
    serde_json::to_value(BuildRecord {
        trace: seed.trace.clone(),
        source_workload: seed.source_workload.clone(),
    })
    .expect("records serialize")
}

/// `bench`: an exported library's end-to-end latency, and with `untuned` an untuned build's
/// of that model (`UNTUNED_REPEATS` runs at most), with `onnxruntime` onnxruntime's on that
/// ONNX file, on the inputs its sidecar names.
pub fn bench(
    library: &Path,
    untuned: Option<Module>,
    onnxruntime: Option<&Path>,
    repeat: u64,
    work_dir: Option<PathBuf>,
) -> Result<BenchResult, TuneError> {
    let sidecar = sidecar_path(library);
    let text = std::fs::read_to_string(&sidecar).map_err(|e| TuneError::Io {
        path: sidecar.clone(),
        message: format!("cannot read the library's sidecar (tgc build writes it): {e}"),
    })?;
    let side: Value = serde_json::from_str(&text).map_err(|e| TuneError::Io {
        path: sidecar.clone(),
        message: format!("not JSON: {e}"),
    })?;
    if side["schema"] != "tgc.artifact/1" {
        return Err(TuneError::Io {
            path: sidecar,
            message: format!("schema {} is not tgc.artifact/1", side["schema"]),
        });
    }
    let inputs: Vec<ModelInput> =
        serde_json::from_value(side["inputs"].clone()).map_err(|e| TuneError::Io {
            path: sidecar.clone(),
            message: format!("inputs: {e}"),
        })?;
    let name = library.display().to_string();
    let config = TuneConfig {
        target: side["target"].to_string(),
        no_cache: true,
        cost_model: CostModel::Cold,
        work_dir,
        ..TuneConfig::new(name.clone())
    };
    let mut run = Run::open(&config, "tgc-bench", CacheUse::Create, &mut crate::Silent)?;
    let untuned = match untuned {
        Some(mut m) => {
            run.plan_module(&mut m)?;
            Some(module_json(&m).map_err(|e| TuneError::Config(format!("{name}: {e}")))?)
        }
        None => None,
    };
    let t = config.model_timing;
    let result = run.worker.bench(&BenchRequest {
        library: absolute(library),
        inputs,
        target: run.target_json.clone(),
        repeat,
        number: t.number,
        seed: t.seed,
        untuned_repeat: untuned.is_some().then_some(repeat.min(UNTUNED_REPEATS)),
        untuned,
        onnx: onnxruntime.map(absolute),
    })?;
    run.finish();
    Ok(result)
}

/// `p` as the worker, running elsewhere, needs it.
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or(p.to_path_buf())
}

/// Every task of `module` with its TVM workload hash, as the worker lowers it: the keys a
/// MetaSchedule database matches records by (`tgc cache export --model`).
pub fn workload_hashes(
    mut module: Module,
    target: &str,
    work_dir: Option<PathBuf>,
) -> Result<Vec<(String, u64)>, TuneError> {
    let config = TuneConfig {
        target: target.to_string(),
        no_cache: true,
        cost_model: CostModel::Cold,
        work_dir,
        ..TuneConfig::new("model")
    };
    let mut run = Run::open(&config, "tgc-lower", CacheUse::Create, &mut crate::Silent)?;
    run.plan_module(&mut module)?;
    let tasks = extract_annotated_tasks(&module).map_err(TuneError::Config)?;
    let mut out = Vec::with_capacity(tasks.len());
    for t in &tasks {
        let (_, lowered, _) = run.lower(t, &mut module, None)?;
        out.push((t.name.clone(), lowered.structural_hash));
    }
    run.finish();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sidecar_sits_beside_the_library() {
        assert_eq!(
            sidecar_path(Path::new("/a/model.so")),
            PathBuf::from("/a/model.so.json")
        );
    }

    #[test]
    fn applied_tiers_follow_the_plans_tier() {
        assert_eq!(AppliedTier::of(Some(Tier::Exact)), AppliedTier::Exact);
        assert_eq!(AppliedTier::of(Some(Tier::TvmHash)), AppliedTier::Exact);
        assert_eq!(
            AppliedTier::of(Some(Tier::Structural)),
            AppliedTier::StructuralTransfer
        );
        assert_eq!(
            AppliedTier::of(Some(Tier::Family)),
            AppliedTier::FamilyTransfer
        );
        assert_eq!(AppliedTier::of(None), AppliedTier::Default);
    }

    #[test]
    fn the_calling_convention_is_a_few_lines_of_stock_tvm() {
        let text = calling_convention(Path::new("/o/m.so"), &json!({"kind": "llvm"}), false);
        assert_eq!(text.lines().count(), 6, "{text}");
        assert!(text.contains("tvm.runtime.load_module(\"/o/m.so\")"));
        assert!(text.contains("relax.VirtualMachine("));
        assert!(text.contains("vm[\"main\"](*inputs)"));
        assert!(!text.contains("tgc"), "no tgc code in the loading: {text}");
        let packed = calling_convention(Path::new("/o/m.so"), &json!({"kind": "llvm"}), true);
        assert_eq!(packed.lines().count(), 7, "{packed}");
        assert!(packed.contains("vm[\"main_transform_params\"]("));
        assert!(
            !packed.contains("tgc"),
            "no tgc code in the loading: {packed}"
        );
    }

    #[test]
    fn a_transfer_record_carries_its_source_workload() {
        let seed = Seed {
            source_workload: Some("wl".into()),
            ..Seed::trace(json!([[], []]))
        };
        assert_eq!(
            transfer_record(&seed),
            json!({"trace": [[], []], "source_workload": "wl"})
        );
        assert_eq!(
            transfer_record(&Seed::trace(json!([[], []]))),
            json!({"trace": [[], []]})
        );
    }
}
