//! `tgc tune`: flags onto [`tgc_tune::TuneConfig`], progress bars and the summary table
//! through an [`Observer`]; the run itself is [`tgc_tune::tune`] (see that crate's docs).

use crate::input::{load_model_in, parse_shape_arg, write_output, Layout};
use anyhow::{anyhow, Result};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use tgc_passes::seeding::{tier_name, SeedPlan, SeedPolicy};
use tgc_tune::{Observer, Report, TaskReport, TuneConfig, TuneOptions};

#[derive(Args)]
pub struct TuneArgs {
    /// The model: ONNX (`.onnx`) or text IR.
    model: String,
    /// `llvm` (this machine: the CPU and triple its LLVM detects, its physical cores),
    /// `llvm-generic` (portable code for the triple), `cuda`, or a TVM target JSON.
    #[arg(long, default_value = "llvm")]
    target: String,
    /// The cache: a file, or a shared PostgreSQL server as postgres://USER@HOST:PORT/DB
    /// (password from the URL, $PGPASSWORD or the password file) (default: $TGC_CACHE,
    /// else the user cache dir).
    #[arg(long, value_name = "PATH|URL")]
    cache: Option<PathBuf>,
    /// Read the cache, never write it (e.g. a CI job consuming a team's cache): lookups
    /// and seeds as usual, no write-back.
    #[arg(long, conflicts_with = "no_cache")]
    cache_read_only: bool,
    /// Measured candidates per task, seeds included.
    #[arg(long, default_value_t = SeedPolicy::DEFAULT.trials)]
    trials_per_task: i64,
    /// A trial budget for the whole model instead of per task: each task gets its share of
    /// what is left by occurrences times current best latency; exact hits cost one trial,
    /// and what a task leaves unspent goes to the tasks after it; what the turns leave goes a
    /// round at a time to the tuned task with the most to gain (its occurrences times the
    /// distance from its best to the run's best FLOP rate).
    #[arg(long, value_name = "N")]
    trials: Option<u64>,
    /// A tuning wall-time budget in seconds, spread the same way (at the run's measured
    /// seconds per trial). Tasks the budget does not reach keep TVM's default schedules.
    #[arg(long, value_name = "SECONDS")]
    time_budget: Option<f64>,
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
    /// The layout the convolutions run in: `nhwc` converts 2-D convolutions to NHWC with
    /// HWIO kernels (much faster schedules on CPUs; the kernel inputs become HWIO).
    #[arg(long, value_enum, default_value_t = Layout::Model)]
    layout: Layout,
    /// Let the schedules of the convolutions and matmuls choose their weights' layout: weights
    /// that are model inputs are packed once, by the library's `main_transform_params`, instead
    /// of read in the model's layout on every run (MetaSchedule's layout-free buffers; pays
    /// where the weights exceed the last-level cache). Such tasks are cached apart.
    #[arg(long)]
    pack_weights: bool,
    /// Most seeds measured first per task.
    #[arg(long, default_value_t = SeedPolicy::DEFAULT.max_seeds)]
    max_seeds: usize,
    /// Search rounds without improvement before a task stops (0: never).
    #[arg(long, default_value_t = SeedPolicy::DEFAULT.patience)]
    patience: i64,
    /// The same for a task seeded by structural or family neighbours, counted once the
    /// seeds are measured (0: never).
    #[arg(long, default_value_t = SeedPolicy::DEFAULT.seeded_patience)]
    seeded_patience: i64,
    /// Relative tolerance within which an exact hit's re-measured latency ends the task,
    /// and within which a neighbour-seeded task's best reaching its goal (the FLOP rate of
    /// its seeds' source tasks) ends it.
    #[arg(long, default_value_t = SeedPolicy::DEFAULT.tolerance)]
    tolerance: f64,
    /// Candidates per search round.
    #[arg(long, default_value_t = TuneConfig::DEFAULT_TRIALS_PER_ROUND)]
    trials_per_round: i64,
    /// MetaSchedule's evolutionary population (smaller is faster per round, searches less).
    #[arg(long, default_value_t = TuneConfig::DEFAULT_POPULATION)]
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
    /// Measure on the devices registered with this TVM RPC tracker instead of this
    /// machine (candidates are still built here; `--target` describes the device). Needs
    /// --rpc-key.
    #[arg(long, value_name = "HOST:PORT")]
    rpc: Option<String>,
    /// The key the devices registered under (`python -m tvm.exec.rpc_server --key KEY`).
    /// It becomes part of the target (its tag, `rpc:KEY`), so the records measured on them
    /// stay apart from this machine's.
    #[arg(long, value_name = "KEY")]
    rpc_key: Option<String>,
    /// Candidates measured at once, each on a device of its own (default 1).
    #[arg(long, value_name = "N")]
    rpc_sessions: Option<u32>,
}

impl TuneArgs {
    /// The flags as the tuning driver's options (checked there, once).
    fn options(&self) -> TuneOptions {
        TuneOptions {
            target: Some(self.target.clone()),
            cache: self.cache.as_ref().map(|p| p.display().to_string()),
            cache_read_only: self.cache_read_only,
            no_cache: self.no_cache,
            trials_per_task: Some(self.trials_per_task),
            trials: self.trials,
            time_budget: self.time_budget,
            max_seeds: Some(self.max_seeds),
            patience: Some(self.patience),
            seeded_patience: Some(self.seeded_patience),
            tolerance: Some(self.tolerance),
            trials_per_round: Some(self.trials_per_round),
            population: Some(self.population),
            max_tasks: self.max_tasks,
            cost_model: self.cost_model.clone(),
            no_cost_model_warm_start: self.no_cost_model_warm_start,
            no_measure: self.no_measure,
            work_dir: self.work_dir.clone(),
            rpc: self.rpc.clone(),
            rpc_key: self.rpc_key.clone(),
            rpc_sessions: self.rpc_sessions,
        }
    }
}

pub fn run(args: TuneArgs) -> Result<()> {
    let config = args.options().config(&args.model).map_err(|e| anyhow!(e))?;
    let module = load_model_in(&args.model, &args.shapes, args.layout, args.pack_weights)?;
    let mut progress = Progress::new();
    let report = tgc_tune::tune(module, &config, &mut progress).map_err(|e| {
        progress.clear();
        anyhow!("{e}")
    })?;
    progress.clear();
    print!("{}", summary_table(&report));
    if let Some(path) = &args.report {
        write_output(
            Some(path),
            &format!("{}\n", serde_json::to_string_pretty(&report.to_json())?),
        )?;
    }
    report.check_outputs().map_err(|e| anyhow!(e))
}

/// Progress bars: one for the run, a spinner per task, a line per finished task.
struct Progress {
    bars: MultiProgress,
    overall: ProgressBar,
    spinner: Option<ProgressBar>,
}

impl Progress {
    fn new() -> Progress {
        let bars = MultiProgress::new();
        let overall = bars.add(ProgressBar::new(0));
        overall.set_style(
            ProgressStyle::with_template(
                "{prefix:>8} [{bar:30}] {pos}/{len} tasks {elapsed_precise} {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        overall.set_prefix("tuning");
        Progress {
            bars,
            overall,
            spinner: None,
        }
    }

    fn clear(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.finish_and_clear();
        }
        self.overall.finish_and_clear();
    }
}

impl Observer for Progress {
    fn started(&mut self, tasks: usize) {
        self.overall.set_length(tasks as u64);
        self.overall.set_message("planned");
    }

    fn warning(&mut self, message: &str) {
        self.bars.suspend(|| eprintln!("warning: {message}"));
    }

    fn task_started(&mut self, task: &str, plan: &SeedPlan) {
        self.overall.set_message("");
        let spinner = self
            .bars
            .insert_before(&self.overall, ProgressBar::new_spinner());
        spinner.set_style(
            ProgressStyle::with_template("  {spinner} {msg} {elapsed}").expect("static template"),
        );
        spinner.enable_steady_tick(Duration::from_millis(200));
        spinner.set_message(format!(
            "{task} ({} seeds from {})",
            plan.seeds.len(),
            tier_name(plan.tier)
        ));
        self.spinner = Some(spinner);
    }

    fn task_finished(&mut self, r: &TaskReport) {
        if let Some(s) = self.spinner.take() {
            s.finish_and_clear();
        }
        self.overall.println(format!(
            "  {:<40} {:<10} trials {:>4}  best {:>10}  {}{}",
            r.name,
            tier_name(r.tier),
            r.trials,
            r.best_s
                .map_or("-".to_string(), |s| format!("{:.1} us", s * 1e6)),
            r.stopped.as_str(),
            seed_source_line(&r.seed_source)
        ));
        self.overall.inc(1);
    }

    fn second_turn_finished(&mut self, r: &TaskReport, best_s: Option<f64>) {
        if let Some(s) = self.spinner.take() {
            s.finish_and_clear();
        }
        self.overall.println(format!(
            "  {:<40} {:<10} trials {:>+4}  best {:>10}  second turn",
            r.name,
            "",
            r.trials,
            best_s.map_or("-".to_string(), |s| format!("{:.1} us", s * 1e6)),
        ));
    }

    fn measuring(&mut self) {
        self.overall
            .set_message("building and measuring the whole model");
    }
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

fn summary_table(report: &Report) -> String {
    let mut out = format!(
        "{}: {} tasks tuned in {:.1} s\n{:<40} {:>4} {:<10} {:>6} {:>6} {:>6} {:>12} {:<10} {:>7}\n",
        report.model,
        report.tasks.len(),
        report.tuning_wall_s,
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
    for r in &report.tasks {
        out.push_str(&format!(
            "{:<40} {:>4} {:<10} {:>6} {:>6} {:>6} {:>12} {:<10} {:>7.1}\n",
            r.name,
            r.occurrences,
            tier_name(r.tier),
            r.seeds_tried,
            r.seeds_failed,
            r.trials,
            r.best_s.map_or("-".into(), |s| format!("{:.2}", s * 1e6)),
            r.stopped.as_str(),
            r.wall_s
        ));
    }
    let hits: Vec<String> = report
        .tasks_by_tier()
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    out.push_str(&format!(
        "total: {} trials; tasks by seed tier: {}\n",
        report.total_trials(),
        hits.join(", ")
    ));
    if !report.tasks.is_empty() {
        let t = report.time_split();
        out.push_str(&format!(
            "time: search {:.1} s, build {:.1} s, run {:.1} s, cost model {:.1} s, \
             write-back re-measurement {:.1} s, other {:.1} s\n",
            t.search_s, t.build_s, t.run_s, t.cost_model_s, t.writeback_s, t.other_s
        ));
    }
    if let Some((t, _)) = &report.rpc {
        out.push_str(&format!(
            "measured on the devices under key {:?} at RPC tracker {}, {} at once; {} measurements failed\n",
            t.key,
            t.address(),
            t.sessions,
            report.total_failed_runs()
        ));
    } else if report.total_failed_runs() > 0 {
        out.push_str(&format!(
            "{} measurements failed\n",
            report.total_failed_runs()
        ));
    }
    if report.total_builds_killed() > 0 {
        out.push_str(&format!(
            "{} builds ran far past the run's others and were killed (failed trials)\n",
            report.total_builds_killed()
        ));
    }
    if !report.skipped.is_empty() {
        out.push_str(&format!(
            "not reached by the run budget: {}\n",
            report.skipped.join(", ")
        ));
    }
    if !report.untuned.is_empty() {
        let mut by_tier: std::collections::BTreeMap<&str, usize> = Default::default();
        for u in report.untuned.iter().filter(|u| u.applied.is_some()) {
            *by_tier.entry(tier_name(u.tier)).or_default() += 1;
        }
        let cached: usize = by_tier.values().sum();
        let tiers: Vec<String> = by_tier.iter().map(|(t, n)| format!("{t} {n}")).collect();
        out.push_str(&format!(
            "{} tasks not tuned: {cached} built from the cache ({}), {} with TVM's default schedules\n",
            report.untuned.len(),
            if tiers.is_empty() { "none".to_string() } else { tiers.join(", ") },
            report.untuned.len() - cached,
        ));
    }
    if let Some(m) = &report.end_to_end {
        out.push_str(&format!(
            "end-to-end latency: {:.3} ms (median of {}); outputs match untuned build: {} \
             (max error {} of the output's scale, allowed {:.1e})\n",
            m.latency_ms.median,
            m.latency_ms.repeat,
            m.outputs_match,
            m.max_rel_err
                .map_or("-".to_string(), |x| format!("{x:.1e}")),
            m.tolerance.atol_rel,
        ));
    }
    out
}
