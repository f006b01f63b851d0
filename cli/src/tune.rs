//! `tgc tune`: tune a model with TVM MetaSchedule, seeded from the cache, and write the best
//! records back.
//!
//! The pipeline is the one of `tgc-cpu`/`tgc-gpu` (partition, canonicalize, annotate-cache,
//! seed-schedules), then, per distinct task: lower it through the worker, look its candidates
//! up (records written by earlier tasks of this run count: within-model reuse) by its tgc
//! keys and, when they find no exact hit, by its TVM structural hash (records imported from
//! MetaSchedule databases carry no tgc keys but are exact for the workload), measure
//! the seeds first and let MetaSchedule's evolutionary search continue unless an exact hit
//! re-measures within tolerance, and write the best records back at once. The representative
//! of each structural group (its most frequent task) is tuned before the rest of the group,
//! so the others start from its records. Finally the whole model is built with the best
//! schedule per task and timed with TVM's time evaluator; its outputs must equal an untuned
//! build's.
//!
//! Records are keyed by what the worker reports, not by what tgc was built for: the
//! toolchain is the worker's TVM, tvm-ffi and LLVM versions (a worker other than the pinned
//! one is used, with a warning, and its records stay apart), and the target is TVM's
//! canonical form of `--target` (the worker's `target` method), so every spelling of one
//! target finds the same records; the spelling is registered in the cache as an alias of
//! the canonical form for lookups without TVM (`tgc opt`).
//!
//! `--no-cache` is stock MetaSchedule with the same trial budget: no lookups, no seeds, no
//! early stop, no write-back.

use crate::input::{load_model, parse_shape_arg, write_output};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tgc_cache::{
    Cache, Candidate, NewRecord, Provenance, Query, Target, TaskEntry, Toolchain, Trace, Workload,
};
use tgc_canonicalize::{extract_tasks, Task};
use tgc_ir::Module;
use tgc_passes::canonicalize::Canonicalize;
use tgc_passes::partition::Partition;
use tgc_passes::seeding::{plan, resolve_target, CandidateRef, SeedPolicy};
use tgc_passes::{Instrumentation, PassManager};
use tgc_tvm::{module_json, task_json, Versions, Worker, WorkerConfig};

#[derive(Args)]
pub struct TuneArgs {
    /// The model: ONNX (`.onnx`) or text IR.
    model: String,
    /// `llvm`, `cuda`, or a TVM target JSON.
    #[arg(long, default_value = "llvm")]
    target: String,
    /// The cache file (default: $TGC_CACHE, else the user cache dir).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Measured candidates per task, seeds included.
    #[arg(long, default_value_t = 64)]
    trials_per_task: i64,
    /// Stock MetaSchedule with the same budget: no cache reads or writes, no seeds, no early
    /// stop; the cost model is shared by this run's tasks only.
    #[arg(long)]
    no_cache: bool,
    /// Write a JSON report (schema `tgc.tune/1`) here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Static shape of an ONNX input, e.g. `input=1x224x224x3` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = parse_shape_arg)]
    shapes: Vec<(String, Vec<i64>)>,
    /// Most seeds measured first per task.
    #[arg(long, default_value_t = 16)]
    max_seeds: usize,
    /// Search rounds without improvement before a task stops (0: never).
    #[arg(long, default_value_t = 3)]
    patience: i64,
    /// Relative tolerance within which an exact hit's re-measured latency ends the task.
    #[arg(long, default_value_t = 0.05)]
    tolerance: f64,
    /// Candidates per search round.
    #[arg(long, default_value_t = 16)]
    trials_per_round: i64,
    /// MetaSchedule's evolutionary population (smaller is faster per round, searches less).
    #[arg(long, default_value_t = 512)]
    population: i64,
    /// Tune at most this many distinct tasks (the most frequent first); the rest keep
    /// TVM's default schedules.
    #[arg(long)]
    max_tasks: Option<usize>,
    /// The warm-started XGB cost model file (default: beside the cache, one per target
    /// and toolchain). Each task loads it, so the search is guided from its first round
    /// instead of sampling blindly until MetaSchedule's 100-sample warm-up, and merges its
    /// measurements back after tuning.
    #[arg(long, value_name = "FILE")]
    cost_model: Option<PathBuf>,
    /// Start every task with a cold cost model. (By default the model carries over from
    /// task to task, as in MetaSchedule's own tune_tasks, and with the cache across runs.)
    #[arg(long, conflicts_with = "cost_model")]
    no_cost_model_warm_start: bool,
    /// Skip the final whole-model build and latency measurement.
    #[arg(long)]
    no_measure: bool,
    /// Where MetaSchedule's logs and the worker log go (default: a temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

/// What happened to one task.
struct TaskReport {
    name: String,
    occurrences: usize,
    tier: String,
    seeds_tried: u64,
    seeds_failed: u64,
    trials: u64,
    best_s: Option<f64>,
    stopped: String,
    wall_s: f64,
    written: usize,
    /// Per measured batch: seconds into the task, trials so far, best so far (the worker's).
    history: Value,
    /// How the measured seeds replayed: exact / repaired / anchor -> count.
    seed_modes: Value,
    /// Measurements the warm-started cost model held when the task began.
    cost_model_warm: u64,
    /// Trials of earlier runs behind the exact hit this task resumed (0: none).
    prior_trials: u64,
    /// The TVM structural hash of the task's workload (decimal), from the worker's `lower`.
    workload_hash: Option<String>,
    /// Where the best seed came from (null: no seeds).
    seed_source: Value,
}

/// The toolchain records measured by this worker are keyed by.
fn toolchain_of(v: &Versions) -> Toolchain {
    Toolchain::new(
        v.tvm.clone(),
        v.tvm_ffi.clone(),
        v.llvm.clone().unwrap_or_else(|| "none".into()),
    )
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

/// One line on the seed source, for the progress output.
fn seed_source_line(s: &Value) -> String {
    match s["kind"].as_str() {
        Some("metaschedule-import") => format!(
            "  (imported MetaSchedule record, workload {}, {})",
            s["workload_hash"].as_str().unwrap_or("?"),
            s["origin"].as_str().unwrap_or("?")
        ),
        Some(_) => format!(
            "  (from {}/{})",
            s["model"].as_str().unwrap_or("?"),
            s["task"].as_str().unwrap_or("?")
        ),
        None => String::new(),
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Structural groups in order of first appearance, each with its most frequent task first.
fn tuning_order(tasks: &[Task]) -> Vec<usize> {
    let mut groups: Vec<(tgc_canonicalize::TaskKey, Vec<usize>)> = Vec::new();
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
    order
}

pub fn run(args: TuneArgs) -> Result<()> {
    if args.trials_per_task < 1 {
        bail!(
            "--trials-per-task must be at least 1, got {}",
            args.trials_per_task
        );
    }
    // The target as spelled; TVM's canonical form of it comes from the worker below.
    let requested = resolve_target(&args.target).map_err(|e| anyhow!("--target: {e}"))?;
    let spelled = Target::from_json(&requested).map_err(|e| anyhow!("--target: {e}"))?;
    let cache_path = match &args.cache {
        Some(p) => p.clone(),
        None => Cache::default_path().map_err(|e| anyhow!("{e}"))?,
    };
    let policy = SeedPolicy {
        trials: args.trials_per_task,
        max_seeds: args.max_seeds,
        tolerance: args.tolerance,
        patience: if args.no_cache { 0 } else { args.patience },
        ..SeedPolicy::default()
    };

    // Partition and key the model.
    let mut module = load_model(&args.model, &args.shapes)?;
    let mut pm = PassManager::new(Instrumentation::default());
    pm.add(Box::new(Partition::default()));
    pm.add(Box::new(Canonicalize));
    pm.run(&mut module, &mut std::io::sink())
        .map_err(|e| anyhow!("{}: {e}", args.model))?;
    let tasks = extract_tasks(&module);
    let mut order = tuning_order(&tasks);
    if let Some(max) = args.max_tasks {
        let mut by_use: Vec<usize> = order.clone();
        by_use.sort_by_key(|&i| std::cmp::Reverse(tasks[i].occurrences));
        let keep: std::collections::HashSet<usize> = by_use.into_iter().take(max).collect();
        order.retain(|i| keep.contains(i));
    }

    let work_dir = match &args.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("tgc-tune-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work_dir)
        .with_context(|| format!("{}: cannot create", work_dir.display()))?;
    let progress = MultiProgress::new();
    let overall = progress.add(ProgressBar::new(order.len() as u64));
    overall.set_style(
        ProgressStyle::with_template(
            "{prefix:>8} [{bar:30}] {pos}/{len} tasks {elapsed_precise} {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    overall.set_prefix("tuning");
    overall.set_message("starting the TVM worker");
    let mut worker = Worker::start(WorkerConfig::new(work_dir.join("worker.log")))?;

    // Key records by the software that measures them, and the target by TVM's canonical form.
    let toolchain = toolchain_of(worker.versions());
    if !toolchain.is_pinned() {
        progress.suspend(|| {
            eprintln!(
                "warning: the TVM worker reports toolchain {toolchain} (TVM/tvm-ffi/LLVM), not the pinned {}; tuning with it, its cache records kept apart from the pinned toolchain's",
                Toolchain::pinned()
            )
        });
    }
    let target_json = worker
        .canonical_target(&requested)
        .map_err(|e| anyhow!("--target: {e}"))?;
    let target = Target::from_json(&target_json).map_err(|e| anyhow!("--target: {e}"))?;
    let mut cache = if args.no_cache {
        None
    } else {
        let mut c = Cache::open(&cache_path).map_err(|e| anyhow!("{e}"))?;
        let moved = c
            .register_target(&spelled, &target, &toolchain)
            .map_err(|e| anyhow!("{e}"))?;
        if moved > 0 {
            progress.suspend(|| {
                eprintln!(
                    "{}: {moved} records filed under the target spelling {spelled} now belong to TVM's canonical form {target}",
                    cache_path.display()
                )
            });
        }
        Some(c)
    };
    // The cost model: the given file; else across runs, beside the cache; with --no-cache
    // only within this run, which is what stock MetaSchedule does (tune_tasks trains one
    // model over all the tasks it tunes); with --no-cost-model-warm-start a cold model per
    // task.
    let cost_model = match (
        &args.cost_model,
        args.no_cost_model_warm_start,
        args.no_cache,
    ) {
        (_, true, _) => None,
        (Some(file), _, _) => Some(file.clone()),
        (None, _, true) => {
            let file = work_dir.join(format!("cost-model-{}.tar", std::process::id()));
            let _ = std::fs::remove_file(&file);
            Some(file)
        }
        (None, _, false) => Some(Cache::cost_model_path(&cache_path, &target, &toolchain)),
    };
    overall.set_message("");

    let started = Instant::now();
    let mut reports: Vec<TaskReport> = Vec::new();
    // Best trace per exact key, for the final build.
    let mut best_traces: HashMap<tgc_canonicalize::TaskKey, Value> = HashMap::new();
    for &ti in &order {
        let task = &tasks[ti];
        let f = module
            .function(&task.name)
            .expect("tasks name functions of the module");
        let tj = task_json(f).map_err(|e| anyhow!(e))?;
        let spinner = progress.insert_before(&overall, ProgressBar::new_spinner());
        spinner.set_style(
            ProgressStyle::with_template("  {spinner} {msg} {elapsed}").expect("static template"),
        );
        spinner.enable_steady_tick(Duration::from_millis(200));

        let lowered = worker.call(
            "lower",
            json!({ "task": tj, "target": target_json }),
            Some(&task.name),
        )?;
        let tvm_hash: Option<u64> = lowered["structural_hash"]
            .as_str()
            .and_then(|h| h.parse().ok());

        // Look the task up now: records written earlier in this run count. The tgc keys
        // first; when they find no exact hit, the TVM hash of the workload just lowered
        // (the TvmHash tier: imported MetaSchedule records, and tasks of other tgc keys
        // that lower to the same workload).
        let (candidates, refs) = match &cache {
            Some(c) => {
                let mut q = Query::new(
                    &task.keys,
                    &task.features,
                    &target,
                    &toolchain,
                    tgc_passes::annotate_cache::DEFAULT_CANDIDATE_LIMIT,
                );
                if let Some(h) = tvm_hash {
                    q = q.with_tvm_hash(h);
                }
                let found = c
                    .lookup(&q)
                    .map_err(|e| anyhow!("task {}: {e}", task.name))?;
                let refs: Vec<CandidateRef> =
                    found.iter().map(CandidateRef::from_candidate).collect();
                (found, refs)
            }
            None => (Vec::new(), Vec::new()),
        };
        let seed_plan = plan(&refs, &policy);
        spinner.set_message(format!(
            "{} ({} seeds from {})",
            task.name,
            seed_plan.seeds.len(),
            seed_plan.tier
        ));
        // Each seed goes with the TVM workload of the task it was measured on, when the
        // cache has it: the worker then repairs tiles or transfers the anchor block's
        // schedule instead of taking another task's trace for an exact one.
        // Seeds often share a source task: read each source's workload once.
        let mut sources: HashMap<(Option<tgc_canonicalize::TaskKey>, Option<u64>), Option<String>> =
            HashMap::new();
        let mut seeds: Vec<Value> = Vec::new();
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
                &cache,
                sources.entry((c.source.exact_key, c.source.tvm_hash)),
            ) {
                (_, Entry::Occupied(e)) => e.into_mut(),
                (Some(cache), Entry::Vacant(e)) => e.insert(
                    cache
                        .source_workload(&c.source)
                        .map_err(|e| anyhow!("task {}: {e}", task.name))?,
                ),
                (None, Entry::Vacant(e)) => e.insert(None),
            };
            seeds.push(match source {
                Some(w) => json!({ "trace": trace, "source_workload": w }),
                None => trace,
            });
        }

        let task_dir = work_dir.join(&task.name);
        let mut params = json!({
            "task": tj,
            "target": target_json,
            "work_dir": task_dir,
            "seeds": seeds,
            "max_trials": seed_plan.trials,
            "trials_per_round": args.trials_per_round,
            "patience_rounds": seed_plan.patience,
            "exact_tolerance": seed_plan.tolerance,
            "evolutionary": { "population_size": args.population },
        });
        if let Some(cm) = &cost_model {
            params["cost_model_file"] = json!(cm);
        }
        if let Some(l) = seed_plan.cached_latency_s {
            params["cached_latency_s"] = json!(l);
        }
        let result = worker.call("tune", params, Some(&task.name))?;
        let records = result["records"].as_array().cloned().unwrap_or_default();
        if let Some(best) = records.first() {
            best_traces.insert(task.keys.exact, best["trace"].clone());
        }

        // The search effort behind the records written back: a resumed search adds its
        // trials to the earlier ones; an exact hit confirms the earlier search (its
        // re-measurements are no search); otherwise this run's trials.
        let run_trials = u(&result["trials"]);
        let effort: u64 = if seed_plan.prior_trials > 0 {
            seed_plan.prior_trials as u64 + run_trials
        } else if result["stopped"] == "exact_hit" {
            refs.iter()
                .filter(|r| r.tier == seed_plan.tier)
                .min_by(|a, b| a.latency_s.total_cmp(&b.latency_s))
                .map_or(0, |r| r.trials.max(0) as u64)
                .max(run_trials)
        } else {
            run_trials
        };
        let mut written = 0;
        if let Some(c) = cache.as_mut() {
            let entry = TaskEntry {
                keys: task.keys,
                features: task.features.clone(),
                workload: tvm_hash.map(|tvm_hash| Workload {
                    tvm_hash,
                    json: lowered["workload_json"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                }),
            };
            let new: Vec<NewRecord> = records
                .iter()
                .filter_map(|r| {
                    let trace = Trace::from_json(&r["trace"]).ok()?;
                    let latencies: Vec<f64> = r["run_secs"]
                        .as_array()?
                        .iter()
                        .filter_map(Value::as_f64)
                        .collect();
                    Some(NewRecord {
                        trace,
                        latencies,
                        args_info: None,
                        provenance: Provenance {
                            model: Some(args.model.clone()),
                            task_name: Some(task.name.clone()),
                            trials: Some(effort as u32),
                            created_at: None,
                            source: "tune".into(),
                        },
                    })
                })
                .collect();
            let summary = c
                .put(&entry, &target, &toolchain, &new)
                .map_err(|e| anyhow!("task {}: {e}", task.name))?;
            written = summary.inserted + summary.improved;
        }
        spinner.finish_and_clear();
        let report = TaskReport {
            name: task.name.clone(),
            occurrences: task.occurrences,
            tier: seed_plan.tier.clone(),
            seeds_tried: u(&result["seeds_tried"]),
            seeds_failed: u(&result["seeds_failed"]),
            trials: u(&result["trials"]),
            best_s: result["best_s"].as_f64(),
            stopped: result["stopped"].as_str().unwrap_or("?").to_string(),
            wall_s: result["wall_s"].as_f64().unwrap_or(0.0),
            written,
            history: result["history"].clone(),
            seed_modes: result["seed_modes"].clone(),
            cost_model_warm: u(&result["cost_model"]["warm_samples"]),
            prior_trials: seed_plan.prior_trials.max(0) as u64,
            workload_hash: tvm_hash.map(|h| h.to_string()),
            seed_source: first_source,
        };
        for e in result["cost_model"]["errors"]
            .as_array()
            .into_iter()
            .flatten()
        {
            overall.println(format!("warning: {}", e.as_str().unwrap_or_default()));
        }
        overall.println(format!(
            "  {:<40} {:<10} trials {:>4}  best {:>10}  {}{}",
            report.name,
            report.tier,
            report.trials,
            report
                .best_s
                .map_or("-".to_string(), |s| format!("{:.1} us", s * 1e6)),
            report.stopped,
            seed_source_line(&report.seed_source)
        ));
        reports.push(report);
        overall.inc(1);
    }
    let tuning_wall_s = started.elapsed().as_secs_f64();
    overall.finish_and_clear();

    let measured = if args.no_measure {
        None
    } else {
        Some(measure(
            &mut worker,
            &module,
            &tasks,
            &best_traces,
            &target_json,
        )?)
    };
    let _ = worker.shutdown();

    let text = summary_table(&args.model, &reports, tuning_wall_s, measured.as_ref());
    print!("{text}");
    if let Some(path) = &args.report {
        let doc = report_json(
            &args,
            (&requested, &target_json),
            &toolchain,
            &reports,
            tuning_wall_s,
            measured.as_ref(),
            cost_model.as_ref(),
        );
        write_output(
            Some(path),
            &format!("{}\n", serde_json::to_string_pretty(&doc)?),
        )?;
    }
    if let Some(m) = &measured {
        if m["outputs_match"] != json!(true) {
            bail!(
                "{}: the tuned model's outputs differ from an untuned build's ({})",
                args.model,
                m["mismatch"].as_str().unwrap_or("no mismatch given")
            );
        }
    }
    Ok(())
}

/// Builds the whole model with the best trace per task and times it.
fn measure(
    worker: &mut Worker,
    module: &Module,
    tasks: &[Task],
    best: &HashMap<tgc_canonicalize::TaskKey, Value>,
    target: &Value,
) -> Result<Value> {
    let mj = module_json(module).map_err(|e| anyhow!(e))?;
    let mut records: BTreeMap<String, Value> = BTreeMap::new();
    for t in tasks {
        if let Some(trace) = best.get(&t.keys.exact) {
            for name in &t.functions {
                records.insert(name.clone(), json!([trace]));
            }
        }
    }
    Ok(worker.call(
        "build_and_measure",
        json!({ "module": mj, "records": records, "target": target, "repeat": 20 }),
        None,
    )?)
}

fn summary_table(
    model: &str,
    reports: &[TaskReport],
    wall: f64,
    measured: Option<&Value>,
) -> String {
    let mut out = format!(
        "{model}: {} tasks tuned in {wall:.1} s\n{:<40} {:>4} {:<10} {:>6} {:>6} {:>6} {:>12} {:<10} {:>7}\n",
        reports.len(),
        "task",
        "occ",
        "tier",
        "seeds",
        "failed",
        "trials",
        "best (us)",
        "stopped",
        "time s"
    );
    let mut tiers: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reports {
        *tiers.entry(r.tier.as_str()).or_default() += 1;
        out.push_str(&format!(
            "{:<40} {:>4} {:<10} {:>6} {:>6} {:>6} {:>12} {:<10} {:>7.1}\n",
            r.name,
            r.occurrences,
            r.tier,
            r.seeds_tried,
            r.seeds_failed,
            r.trials,
            r.best_s.map_or("-".into(), |s| format!("{:.2}", s * 1e6)),
            r.stopped,
            r.wall_s
        ));
    }
    let trials: u64 = reports.iter().map(|r| r.trials).sum();
    let hits: Vec<String> = tiers.iter().map(|(t, n)| format!("{t} {n}")).collect();
    out.push_str(&format!(
        "total: {trials} trials; tasks by seed tier: {}\n",
        hits.join(", ")
    ));
    if let Some(m) = measured {
        let num = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.1e}"));
        out.push_str(&format!(
            "end-to-end latency: {:.3} ms (median of {}); outputs match untuned build: {} \
             (max error {} of the output's scale, allowed {})\n",
            m["latency_ms"]["median"].as_f64().unwrap_or(f64::NAN),
            m["latency_ms"]["repeat"],
            m["outputs_match"],
            num(&m["max_rel_err"]),
            num(&m["tolerance"]["atol_rel"]),
        ));
    }
    out
}

fn report_json(
    args: &TuneArgs,
    (spelled, target): (&Value, &Value),
    toolchain: &Toolchain,
    reports: &[TaskReport],
    wall: f64,
    measured: Option<&Value>,
    cost_model: Option<&PathBuf>,
) -> Value {
    let mut tiers: BTreeMap<String, usize> = BTreeMap::new();
    for r in reports {
        *tiers.entry(r.tier.clone()).or_default() += 1;
    }
    json!({
        "schema": "tgc.tune/1",
        "model": args.model,
        "target": target,
        "target_spelling": spelled,
        "toolchain": {
            "tvm": toolchain.tvm,
            "tvm_ffi": toolchain.tvm_ffi,
            "llvm": toolchain.llvm,
            "pinned": toolchain.is_pinned(),
        },
        "no_cache": args.no_cache,
        "trials_per_task": args.trials_per_task,
        "cost_model_file": cost_model,
        "tasks": reports.iter().map(|r| json!({
            "name": r.name,
            "occurrences": r.occurrences,
            "tier": r.tier,
            "seeds_tried": r.seeds_tried,
            "seeds_failed": r.seeds_failed,
            "trials": r.trials,
            "best_latency_s": r.best_s,
            "stopped": r.stopped,
            "wall_s": r.wall_s,
            "records_written": r.written,
            "seed_modes": r.seed_modes,
            "cost_model_warm_samples": r.cost_model_warm,
            "prior_trials": r.prior_trials,
            "workload_hash": r.workload_hash,
            "seed_source": r.seed_source,
            "history": r.history,
        })).collect::<Vec<_>>(),
        "totals": {
            "tuning_wall_s": wall,
            "trials": reports.iter().map(|r| r.trials).sum::<u64>(),
            "tasks_by_tier": tiers,
        },
        "end_to_end": measured.cloned().unwrap_or(Value::Null),
    })
}
