//! `tgc._native`: the tgc library in process, for the `tgc` Python package.
//!
//! A thin front end, like the CLI: it loads models, runs the same passes, and hands results
//! to Python as the JSON documents the CLI prints (`tgc.tasks/1`, `tgc.similarity/1`,
//! `tgc.cache-stats/1`, the tune and build reports), which the Python layer turns into dicts.
//! Every error is a `tgc.TgcError` whose message is the line the CLI prints after `error: `.
//! Tuning and building release the GIL: they wait on the TVM worker for minutes.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use tgc_cache::{Cache as Store, Query, Target, Toolchain};
use tgc_canonicalize::{extract_tasks, Level, Task};
use tgc_passes::{Instrumentation, PassManager};
use tgc_tune::docs;

create_exception!(
    _native,
    TgcError,
    PyException,
    "A tgc error: one line naming the input and the problem, as the CLI prints it."
);

fn err(msg: impl std::fmt::Display) -> PyErr {
    TgcError::new_err(msg.to_string().replace('\n', " "))
}

/// A tgc IR module (the graph IR every pass works on), immutable from Python.
#[pyclass(module = "tgc._native", name = "Module", frozen)]
struct Module {
    inner: tgc_ir::Module,
}

#[pymethods]
impl Module {
    /// Parses text IR (`file` names it in messages) and verifies it: every binding's type
    /// must be what the op registry infers.
    #[staticmethod]
    #[pyo3(signature = (text, file = "<text>"))]
    fn parse(text: &str, file: &str) -> PyResult<Module> {
        let inner = tgc_ir::text::parse_module(text, file).map_err(err)?;
        tgc_ir::verify_module(&inner).map_err(|e| err(format!("{file}: {e}")))?;
        Ok(Module { inner })
    }

    /// Loads a model as `tgc tasks` does: ONNX when the path ends in `.onnx`, text IR when it
    /// is a file, else the zoo model of that name. `shapes`: static shapes of ONNX inputs.
    #[staticmethod]
    #[pyo3(signature = (path, shapes = Vec::new()))]
    fn load(path: &str, shapes: Vec<(String, Vec<i64>)>) -> PyResult<Module> {
        load_model(path, &shapes).map(|inner| Module { inner })
    }

    /// The module with its 2-D convolutions in NHWC with HWIO kernels (the `convert-layout`
    /// pass, what `--layout nhwc` tunes and builds); kernels that are inputs become HWIO
    /// inputs, listed in `@main`'s `permuted_params`.
    fn convert_layout(&self) -> PyResult<Module> {
        use tgc_passes::Pass;
        let mut inner = self.inner.clone();
        tgc_passes::convert_layout::ConvertLayout
            .run(&mut inner)
            .map_err(|e| err(format!("@{}: convert-layout: {}", inner.name, e.0)))?;
        tgc_ir::verify_module(&inner).map_err(|e| err(format!("@{}: {e}", inner.name)))?;
        Ok(Module { inner })
    }

    /// The module with its entry function's contraction weights marked for packing (the
    /// `pack-weights` pass, what `--pack-weights` tunes and builds): listed in `@main`'s
    /// `packed_params`, their tasks' params marked layout-free when partitioned.
    fn pack_weights(&self) -> PyResult<Module> {
        use tgc_passes::Pass;
        let mut inner = self.inner.clone();
        tgc_passes::pack_weights::PackWeights
            .run(&mut inner)
            .map_err(|e| err(format!("@{}: pack-weights: {}", inner.name, e.0)))?;
        Ok(Module { inner })
    }

    /// The module's canonical text (what `tgc import` prints).
    fn text(&self) -> String {
        tgc_ir::text::print_module(&self.inner)
    }

    fn __str__(&self) -> String {
        self.text()
    }

    /// The module's name (`@name`).
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
}

/// The CLI's model loading rule (`tgc tasks MODEL`), with the same messages.
fn load_model(path: &str, shapes: &[(String, Vec<i64>)]) -> PyResult<tgc_ir::Module> {
    if path.ends_with(".onnx") {
        return tgc_ir::onnx::import_file(Path::new(path), shapes).map_err(err);
    }
    if !Path::new(path).exists() {
        if let Some(model) = tgc_zoo::lookup(path) {
            if !shapes.is_empty() {
                return Err(err(format!(
                    "{path}: shapes apply to ONNX models only (zoo models have fixed shapes)"
                )));
            }
            return model
                .build()
                .map_err(|e| err(format!("zoo model {path}: {e}")));
        }
        return Err(err(format!(
            "{path}: no such file, and no zoo model of that name (see 'tgc zoo --list')"
        )));
    }
    if !shapes.is_empty() {
        return Err(err(format!("{path}: shapes apply to ONNX models only")));
    }
    let bytes = std::fs::read(path).map_err(|e| err(format!("{path}: cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        err(format!(
            "{path}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    tgc_ir::text::parse_module(&text, path).map_err(err)
}

/// Partitions a copy of `module` as `tgc tasks` does and extracts its distinct tasks.
fn partitioned_tasks(
    module: &tgc_ir::Module,
    label: &str,
    max_depth: usize,
) -> PyResult<Vec<Task>> {
    let mut module = module.clone();
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline(&format!("partition{{max-depth={max_depth}}}"), &mut pm)
        .map_err(|e| err(format!("max_depth: {e}")))?;
    pm.run(&mut module, &mut std::io::sink())
        .map_err(|e| err(format!("{label}: {e}")))?;
    Ok(extract_tasks(&module))
}

/// The op registry as JSON (the worker's `op_schema.json`): names, operand counts and
/// attribute schemas, which the Relax frontend maps Relax calls onto.
#[pyfunction]
fn op_schema() -> String {
    tgc_tvm::op_schema()
}

/// `tgc tasks --json` of a module: schema `tgc.tasks/1`; `model` is the document's `model`.
#[pyfunction]
#[pyo3(signature = (module, model, max_depth = 256))]
fn tasks_json(module: &Module, model: &str, max_depth: usize) -> PyResult<String> {
    let tasks = partitioned_tasks(&module.inner, model, max_depth)?;
    Ok(docs::tasks(model, &tasks).to_string())
}

/// `tgc similarity --json` (schema `tgc.similarity/1`) of `(name, source, from, module)`
/// entries at `level` (exact, structural or family).
#[pyfunction]
fn similarity_json(
    models: Vec<(String, String, String, PyRef<'_, Module>)>,
    level: &str,
) -> PyResult<String> {
    let level: Level = level.parse().map_err(|e| err(format!("level: {e}")))?;
    let mut studied = Vec::new();
    let mut sources = Vec::new();
    for (name, source, from, module) in &models {
        let tasks = partitioned_tasks(&module.inner, source, 256)?;
        studied.push(tgc_canonicalize::similarity::ModelTasks::new(
            name.clone(),
            tasks,
        ));
        sources.push((source.clone(), from.clone()));
    }
    let study = tgc_canonicalize::similarity::Study::new(&studied, level);
    Ok(docs::similarity(&study, &sources).to_string())
}

/// The task cache (one SQLite file), opened for the life of the object.
#[pyclass(module = "tgc._native", name = "Cache", unsendable)]
struct Cache {
    inner: Store,
}

fn cache_location(path: Option<PathBuf>) -> PyResult<tgc_cache::CacheLocation> {
    tgc_cache::CacheLocation::or_default(path.map(tgc_cache::CacheLocation::parse)).map_err(err)
}

fn toolchain(text: Option<&str>) -> PyResult<Toolchain> {
    match text {
        Some(t) => Toolchain::parse(t).map_err(err),
        None => Ok(Toolchain::pinned()),
    }
}

fn target(text: &str) -> PyResult<Target> {
    let v = tgc_passes::target::resolve_target(text).map_err(err)?;
    Target::from_json(&v).map_err(err)
}

#[pymethods]
impl Cache {
    /// Opens the cache at `path` (default: `$TGC_CACHE`, else the user cache dir); with
    /// `create`, a missing file becomes an empty cache, else it is an error.
    #[new]
    #[pyo3(signature = (path = None, create = true))]
    fn new(path: Option<PathBuf>, create: bool) -> PyResult<Cache> {
        let path = cache_location(path)?;
        let inner = if create {
            Store::open(&path)
        } else {
            Store::open_existing(&path)
        }
        .map_err(err)?;
        Ok(Cache { inner })
    }

    /// The file's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }

    /// `tgc cache stats --json` (schema `tgc.cache-stats/1`).
    fn stats_json(&self) -> PyResult<String> {
        let s = self.inner.stats().map_err(err)?;
        Ok(docs::cache_stats(&s).to_string())
    }

    /// The ranked candidates for each distinct task of `module` on `target` (as `tgc tune`
    /// spells it: `llvm`, `llvm-generic`, `cuda` or a JSON config), at most `limit` each,
    /// as JSON: `{"tasks": [{"name", "exact_key", "candidates": [...]}]}`. `task`: only the
    /// task of that name or exact key.
    #[pyo3(signature = (module, model, target = "llvm", task = None, limit = 8, toolchain = None))]
    fn lookup_json(
        &self,
        module: &Module,
        model: &str,
        target: &str,
        task: Option<&str>,
        limit: usize,
        toolchain: Option<&str>,
    ) -> PyResult<String> {
        let tasks = partitioned_tasks(&module.inner, model, 256)?;
        let target = self::target(target)?;
        let toolchain = self::toolchain(toolchain)?;
        let mut out = Vec::new();
        for t in &tasks {
            let exact = t.keys.exact.to_string();
            if task.is_some_and(|want| want != t.name && want != exact) {
                continue;
            }
            let q = Query::new(&t.keys, &t.features, &target, &toolchain, limit);
            let found = self.inner.lookup(&q).map_err(err)?;
            out.push(docs::lookup(t, &found));
        }
        if let (Some(want), true) = (task, out.is_empty()) {
            return Err(err(format!("{model}: no task named or keyed '{want}'")));
        }
        Ok(
            serde_json::json!({ "schema": "tgc.cache-lookup/1", "model": model, "tasks": out })
                .to_string(),
        )
    }

    /// `tgc cache import DIR`: a MetaSchedule JSON database into the cache; the summary line.
    #[pyo3(signature = (dir, toolchain = None))]
    fn import_msdb(&mut self, dir: PathBuf, toolchain: Option<&str>) -> PyResult<String> {
        let toolchain = self::toolchain(toolchain)?;
        let s = tgc_cache::msdb::import(&mut self.inner, &dir, &toolchain).map_err(err)?;
        Ok(s.to_string())
    }

    /// `tgc cache export DIR`: the records of one toolchain (and target, and the TVM
    /// workloads listed, when given) as a MetaSchedule JSON database; the summary line.
    #[pyo3(signature = (dir, toolchain = None, target = None, workloads = None))]
    fn export_msdb(
        &self,
        dir: PathBuf,
        toolchain: Option<&str>,
        target: Option<&str>,
        workloads: Option<Vec<u64>>,
    ) -> PyResult<String> {
        let opts = tgc_cache::msdb::ExportOptions {
            toolchain: self::toolchain(toolchain)?,
            target: target.map(Target::parse).transpose().map_err(err)?,
            workloads: workloads.map(|w| w.into_iter().collect()),
        };
        let s = tgc_cache::msdb::export(&self.inner, &dir, &opts).map_err(err)?;
        Ok(s.to_string())
    }

    /// `tgc.ms.Database`'s commit: one MetaSchedule record, its workload line and record as
    /// `JSONDatabase` writes them (`tgc_cache::msdb::commit`), under provenance `source`;
    /// whether it was stored (false: the cache holds that trace already, or a faster k).
    #[pyo3(signature = (workload, record, source, toolchain = None))]
    fn ms_commit(
        &mut self,
        workload: &str,
        record: &str,
        source: &str,
        toolchain: Option<&str>,
    ) -> PyResult<bool> {
        let toolchain = self::toolchain(toolchain)?;
        let s = tgc_cache::msdb::commit(&mut self.inner, workload, record, &toolchain, source)
            .map_err(err)?;
        Ok(s.inserted + s.replaced > 0)
    }

    /// `tgc.ms.Database`'s read: the best `k` records of TVM workload `tvm_hash` on
    /// `target` (TVM's exported target JSON; every target when None), as `JSONDatabase`
    /// writes a record (`tgc_cache::msdb::top_k`).
    #[pyo3(signature = (tvm_hash, target = None, k = 1, toolchain = None))]
    fn ms_top_k(
        &self,
        tvm_hash: u64,
        target: Option<&str>,
        k: usize,
        toolchain: Option<&str>,
    ) -> PyResult<Vec<String>> {
        let toolchain = self::toolchain(toolchain)?;
        let target = target.map(Target::parse).transpose().map_err(err)?;
        tgc_cache::msdb::top_k(&self.inner, tvm_hash, target.as_ref(), &toolchain, k).map_err(err)
    }
}

/// Collects the run's warnings for Python (`warnings.warn`), in order.
#[derive(Default)]
struct Warnings(Vec<String>);

impl tgc_tune::Observer for Warnings {
    fn warning(&mut self, message: &str) {
        self.0.push(message.to_string());
    }
}

/// Runs a tune or build without the GIL (it waits on the TVM worker for minutes), with its
/// warnings collected.
fn detached<R: Send>(
    py: Python<'_>,
    run: impl FnOnce(&mut Warnings) -> R + Send,
) -> (R, Vec<String>) {
    py.detach(move || {
        let mut w = Warnings::default();
        let r = run(&mut w);
        (r, w.0)
    })
}

/// What `tune_json` and `build_json` return: the report, the warnings, the output check's
/// failure.
fn outcome(
    report: serde_json::Value,
    warnings: Vec<String>,
    check: Result<(), String>,
) -> (String, Vec<String>, Option<String>) {
    (report.to_string(), warnings, check.err())
}

/// `tgc tune`: the tuning driver on `module`, its options by their flag names
/// (`trials_per_task` is `--trials-per-task`; checked once, by the driver's options). Returns
/// the report (`tgc tune --report`) as JSON, the run's warnings, and the output check's
/// failure, if any.
#[pyfunction]
#[pyo3(signature = (module, model, *, target = None, cache = None, cache_read_only = false,
    no_cache = false, trials_per_task = None, trials = None, time_budget = None,
    max_seeds = None, patience = None, seeded_patience = None, tolerance = None,
    trials_per_round = None, population = None, max_tasks = None, cost_model = None,
    cost_model_warm_start = true, measure = true, work_dir = None, rpc = None, rpc_key = None,
    rpc_sessions = None))]
#[allow(clippy::too_many_arguments)]
fn tune_json(
    py: Python<'_>,
    module: &Module,
    model: &str,
    target: Option<String>,
    cache: Option<String>,
    cache_read_only: bool,
    no_cache: bool,
    trials_per_task: Option<i64>,
    trials: Option<u64>,
    time_budget: Option<f64>,
    max_seeds: Option<usize>,
    patience: Option<i64>,
    seeded_patience: Option<i64>,
    tolerance: Option<f64>,
    trials_per_round: Option<i64>,
    population: Option<i64>,
    max_tasks: Option<usize>,
    cost_model: Option<PathBuf>,
    cost_model_warm_start: bool,
    measure: bool,
    work_dir: Option<PathBuf>,
    rpc: Option<String>,
    rpc_key: Option<String>,
    rpc_sessions: Option<u32>,
) -> PyResult<(String, Vec<String>, Option<String>)> {
    let options = tgc_tune::TuneOptions {
        target,
        cache,
        cache_read_only,
        no_cache,
        trials_per_task,
        trials,
        time_budget,
        max_seeds,
        patience,
        seeded_patience,
        tolerance,
        trials_per_round,
        population,
        max_tasks,
        cost_model,
        no_cost_model_warm_start: !cost_model_warm_start,
        no_measure: !measure,
        work_dir,
        rpc,
        rpc_key,
        rpc_sessions,
    };
    let c = options.config(model).map_err(err)?;
    let module = module.inner.clone();
    let (result, warnings) = detached(py, move |w| tgc_tune::tune(module, &c, w));
    let report = result.map_err(err)?;
    Ok(outcome(report.to_json(), warnings, report.check_outputs()))
}

/// `tgc build -o output`: the deployable library from the cache, its options by their flag
/// names. Returns the build report (`tgc build --report`) as JSON, the run's warnings, and
/// the output check's failure, if any.
#[pyfunction]
#[pyo3(signature = (module, model, output, *, target = None, cache = None,
    cache_read_only = false, no_cache = false, measure_candidates = None, check = false,
    bench = false, onnxruntime = None, work_dir = None))]
#[allow(clippy::too_many_arguments)]
fn build_json(
    py: Python<'_>,
    module: &Module,
    model: &str,
    output: PathBuf,
    target: Option<String>,
    cache: Option<String>,
    cache_read_only: bool,
    no_cache: bool,
    measure_candidates: Option<u64>,
    check: bool,
    bench: bool,
    onnxruntime: Option<PathBuf>,
    work_dir: Option<PathBuf>,
) -> PyResult<(String, Vec<String>, Option<String>)> {
    let defaults = tgc_tune::BuildConfig::new(model, output);
    let c = tgc_tune::BuildConfig {
        target: target.unwrap_or(defaults.target.clone()),
        cache: cache.map(tgc_cache::CacheLocation::parse),
        cache_read_only,
        no_cache,
        measure_candidates: measure_candidates.unwrap_or(defaults.measure_candidates),
        check,
        bench,
        onnxruntime,
        work_dir,
        ..defaults
    };
    let module = module.inner.clone();
    let (result, warnings) = detached(py, move |w| tgc_tune::build(module, &c, w));
    let report = result.map_err(err)?;
    Ok(outcome(report.to_json(), warnings, report.check_outputs()))
}

/// `tgc build`'s choice of records per task, without the build (`tgc_tune::plan_schedules`):
/// what `tgc.relax.ApplyCache` applies to a Relax module itself.
#[pyclass(module = "tgc._native", name = "SchedulePlan", frozen)]
struct SchedulePlan {
    inner: tgc_tune::SchedulePlan,
}

#[pymethods]
impl SchedulePlan {
    /// The partitioned model as the worker's `build` takes it (JSON text).
    fn module_json(&self) -> String {
        self.inner.module.to_string()
    }

    /// `{function name: [record, ...]}`, best first (JSON text): the worker's `build` records.
    fn records_json(&self) -> String {
        serde_json::to_string(&self.inner.records).expect("JSON values serialize")
    }

    /// `{function name: TVM workload hash}` of every task function, as planning lowered it.
    fn workload_hashes(&self) -> std::collections::BTreeMap<String, u64> {
        self.inner.workload_hashes()
    }

    /// TVM's canonical form of the target the records are for (JSON text).
    fn target_json(&self) -> String {
        self.inner.target.to_string()
    }

    /// `[(task name, [function names])]`, in the model's order.
    fn functions(&self) -> Vec<(String, Vec<String>)> {
        self.inner.functions.clone()
    }

    /// The `tgc.apply-cache/1` report (JSON text) once the records are applied: `built` is
    /// what `tgc_worker.measure.Scheduled.result` says (the worker's `build` result, JSON).
    fn report_json(&self, built: &str) -> PyResult<String> {
        let built: tgc_tvm::Built =
            serde_json::from_str(built).map_err(|e| err(format!("applied records: {e}")))?;
        Ok(self.inner.report(&built).to_string())
    }
}

/// Plans the records of every task of `module` as `tgc build` does (the options are
/// `build_json`'s, without output, check and bench); starts the TVM worker. Returns the plan
/// and the run's warnings.
#[pyfunction]
#[pyo3(signature = (module, model, *, target = None, cache = None, no_cache = false,
    measure_candidates = None, work_dir = None))]
#[allow(clippy::too_many_arguments)]
fn schedule_plan(
    py: Python<'_>,
    module: &Module,
    model: &str,
    target: Option<String>,
    cache: Option<String>,
    no_cache: bool,
    measure_candidates: Option<u64>,
    work_dir: Option<PathBuf>,
) -> PyResult<(SchedulePlan, Vec<String>)> {
    let defaults = tgc_tune::BuildConfig::new(model, PathBuf::new());
    let c = tgc_tune::BuildConfig {
        target: target.unwrap_or(defaults.target.clone()),
        cache: cache.map(tgc_cache::CacheLocation::parse),
        no_cache,
        measure_candidates: measure_candidates.unwrap_or(defaults.measure_candidates),
        work_dir,
        ..defaults
    };
    let module = module.inner.clone();
    let (result, warnings) = detached(py, move |w| tgc_tune::plan_schedules(module, &c, w));
    let inner = result.map_err(err)?;
    Ok((SchedulePlan { inner }, warnings))
}

/// A target as tgc spells it (`llvm`, `llvm-generic`, `cuda` or a JSON config) as the JSON
/// config the worker resolves into a TVM target.
#[pyfunction]
fn target_config(text: &str) -> PyResult<String> {
    Ok(tgc_passes::target::resolve_target(text)
        .map_err(err)?
        .to_string())
}

/// Where the TVM worker package (`tgc_worker`) of the clone that built this extension lives.
#[pyfunction]
fn worker_dir() -> PathBuf {
    tgc_tvm::worker_dir()
}

/// The TVM workload hash of each task of `module` lowered for `target` (what `tgc cache
/// export --model` selects by), as `(task name, hash)`; starts the TVM worker.
#[pyfunction]
fn workload_hashes(
    py: Python<'_>,
    module: &Module,
    model: &str,
    target: &str,
) -> PyResult<Vec<(String, u64)>> {
    let module = module.inner.clone();
    let target = target.to_string();
    py.detach(move || tgc_tune::workload_hashes(module, &target, None))
        .map_err(|e| err(format!("{model}: {e}")))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TgcError", m.py().get_type::<TgcError>())?;
    m.add_class::<Module>()?;
    m.add_class::<Cache>()?;
    m.add_function(wrap_pyfunction!(target_config, m)?)?;
    m.add_function(wrap_pyfunction!(op_schema, m)?)?;
    m.add_function(wrap_pyfunction!(tasks_json, m)?)?;
    m.add_function(wrap_pyfunction!(similarity_json, m)?)?;
    m.add_function(wrap_pyfunction!(tune_json, m)?)?;
    m.add_function(wrap_pyfunction!(build_json, m)?)?;
    m.add_function(wrap_pyfunction!(workload_hashes, m)?)?;
    m.add_class::<SchedulePlan>()?;
    m.add_function(wrap_pyfunction!(schedule_plan, m)?)?;
    m.add_function(wrap_pyfunction!(worker_dir, m)?)?;
    Ok(())
}
