//! `tgc build` and `tgc bench`: flags onto [`tgc_tune::BuildConfig`], a line per task and a
//! summary; the build itself is [`tgc_tune::build`] (see that crate's docs).

use crate::input::{load_model_in, parse_shape_arg, write_output, Layout};
use anyhow::{anyhow, Result};
use clap::Args;
use std::path::PathBuf;
use tgc_passes::seeding::{tier_name, SeedPlan};
use tgc_tune::{BuildConfig, BuildReport, Observer, BENCH_REPEATS};
use tgc_tvm::{BenchResult, LatencyRange};

#[derive(Args)]
pub struct BuildArgs {
    /// The model: ONNX (`.onnx`), text IR, or a zoo model's name.
    model: String,
    /// The library to write (a plain TVM library; its sidecar `OUT.json` names the inputs).
    #[arg(short, long, value_name = "OUT.so")]
    output: PathBuf,
    /// `llvm` (this machine), `llvm-generic`, `cuda`, or a TVM target JSON.
    #[arg(long, default_value = "llvm")]
    target: String,
    /// The cache file or postgres:// URL (default: $TGC_CACHE, else the user cache dir); it
    /// must exist and hold records for the target.
    #[arg(long, value_name = "PATH|URL")]
    cache: Option<PathBuf>,
    /// Read the cache, never write it: records measured for transferred tasks stay out.
    #[arg(long, conflicts_with = "no_cache")]
    cache_read_only: bool,
    /// TVM's default schedules for every task (an untuned build, for comparison).
    #[arg(long, conflicts_with = "cache")]
    no_cache: bool,
    /// Candidates measured per task transferred from a neighbour (the fastest is applied,
    /// and written back to the cache); 0: rank only, nothing measured.
    #[arg(long, value_name = "K", default_value_t = BuildConfig::DEFAULT_MEASURE_CANDIDATES)]
    measure_candidates: u64,
    /// Also build the model untuned and compare the outputs on random inputs: exit 1 when
    /// they differ (without it the model is built once and nothing runs).
    #[arg(long)]
    check: bool,
    /// Time the library and an untuned build end to end (TVM's time evaluator, 50 runs; the
    /// untuned build 10).
    #[arg(long)]
    bench: bool,
    /// With --bench and an ONNX model: also time onnxruntime on that file, on the same
    /// inputs (weights as initializers) and threads.
    #[arg(long, requires = "bench")]
    onnxruntime: bool,
    /// Write a JSON report (schema `tgc.build/1`) here.
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
    /// Where the worker log and MetaSchedule's logs go (default: a temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

pub fn run(args: BuildArgs) -> Result<()> {
    let module = load_model_in(&args.model, &args.shapes, args.layout, args.pack_weights)?;
    let onnxruntime = match args.onnxruntime {
        true => Some(onnx_file(&args.model)?),
        false => None,
    };
    let config = BuildConfig {
        target: args.target.clone(),
        cache: args.cache.as_ref().map(tgc_cache::CacheLocation::parse),
        cache_read_only: args.cache_read_only,
        no_cache: args.no_cache,
        measure_candidates: args.measure_candidates,
        check: args.check,
        bench: args.bench,
        onnxruntime,
        work_dir: args.work_dir.clone(),
        ..BuildConfig::new(args.model.clone(), args.output.clone())
    };
    let report = tgc_tune::build(module, &config, &mut Lines).map_err(|e| anyhow!("{e}"))?;
    print!("{}", summary(&report));
    println!("call it with stock TVM:");
    print!(
        "{}",
        tgc_tune::calling_convention(
            &report.artifact,
            &report.target,
            report.built.inputs.iter().any(|i| i.packed)
        )
    );
    if let Some(path) = &args.report {
        write_output(
            Some(path),
            &format!("{}\n", serde_json::to_string_pretty(&report.to_json())?),
        )?;
    }
    report.check_outputs().map_err(|e| anyhow!(e))
}

/// A line per task as it is planned, on stderr (stdout carries the summary).
struct Lines;

impl Observer for Lines {
    fn warning(&mut self, message: &str) {
        eprintln!("warning: {message}");
    }

    fn task_started(&mut self, task: &str, plan: &SeedPlan) {
        eprintln!(
            "  {task:<40} {} candidates from {}",
            plan.seeds.len(),
            tier_name(plan.tier)
        );
    }

    fn measuring(&mut self) {
        eprintln!("building the model");
    }
}

/// `model` as an ONNX file onnxruntime can time.
fn onnx_file(model: &str) -> Result<PathBuf> {
    let path = PathBuf::from(model);
    match path.extension().is_some_and(|e| e == "onnx") && path.is_file() {
        true => Ok(path),
        false => Err(anyhow!(
            "{model}: --onnxruntime times an ONNX file (a .onnx model), not this"
        )),
    }
}

/// The latency lines of a bench: the library's, and those of TVM's defaults and onnxruntime
/// beside it, each with its ratio.
fn bench_lines(library: &str, b: &BenchResult) -> String {
    let mut out = latency_line(library, &b.latency_ms);
    let tuned = b.latency_ms.median;
    if let Some(u) = &b.untuned_latency_ms {
        out.push_str(&latency_line("untuned build (TVM's default schedules)", u));
        out.push_str(&format!(
            "speed-up over TVM's defaults: {:.2}x\n",
            u.median / tuned
        ));
    }
    if let Some(o) = &b.onnxruntime {
        out.push_str(&latency_line(
            &format!(
                "onnxruntime {} (CPU, {} threads)",
                o.version, o.latency_ms.threads
            ),
            &o.latency_ms,
        ));
        out.push_str(&format!(
            "this library / onnxruntime: {:.2}x the time\n",
            tuned / o.latency_ms.median
        ));
    }
    out
}

fn latency_line(what: &str, l: &LatencyRange) -> String {
    format!(
        "{what}: {:.3} ms median, p10 {:.3}, p90 {:.3} ({} runs)\n",
        l.median, l.p10, l.p90, l.repeat
    )
}

fn summary(r: &BuildReport) -> String {
    let mut out = format!(
        "{}: {} tasks, built in {:.1} s -> {} (sidecar {})\n{:<40} {:<20} {:>6} {:>6} {:>8} {:>12}  source\n",
        r.model,
        r.tasks.len(),
        r.build_wall_s,
        r.artifact.display(),
        r.sidecar.display(),
        "task",
        "tier",
        "tried",
        "failed",
        "measured",
        "latency (us)"
    );
    for t in &r.tasks {
        let source = match (t.source["model"].as_str(), t.source["task"].as_str()) {
            (Some(m), Some(task)) => format!("{m}/{task}"),
            _ if t.source["kind"] == "metaschedule-import" => format!(
                "imported workload {}",
                t.source["workload_hash"].as_str().unwrap_or("?")
            ),
            _ if !t.measured_sources.is_empty() => {
                format!("fastest of {} measured", t.measured_sources.len())
            }
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:<40} {:<20} {:>6} {:>6} {:>8} {:>12}  {source}\n",
            t.name,
            t.applied.as_str(),
            t.tried,
            t.failed,
            t.measured,
            t.latency_s.map_or("-".into(), |s| format!(
                "{:.2} {}",
                s * 1e6,
                t.latency_kind.unwrap_or("")
            )),
        ));
    }
    let tiers: Vec<String> = r
        .tasks_by_tier()
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    out.push_str(&format!("tasks by tier: {}\n", tiers.join(", ")));
    if let Some(m) = &r.end_to_end {
        out.push_str(&format!(
            "outputs match an untuned build: {} (max error {} of the output's scale, allowed {:.1e}); latency {:.3} ms (median of {})\n",
            m.outputs_match,
            m.max_rel_err.map_or("-".to_string(), |x| format!("{x:.1e}")),
            m.tolerance.atol_rel,
            m.latency_ms.median,
            m.latency_ms.repeat,
        ));
    }
    if let Some(b) = &r.bench {
        out.push_str(&bench_lines("end to end", b));
    }
    out.push_str(&arithmetic_lines(r));
    out
}

/// The model's work and the rates it runs at: end to end, beside onnxruntime, and per task
/// where the latency is known (the tasks with most of that time first).
fn arithmetic_lines(r: &BuildReport) -> String {
    let a = r.arithmetic();
    let rate = |g: Option<f64>| g.map_or("-".to_string(), |g| format!("{g:.1} GFLOP/s"));
    let mut out = format!("work: {:.3} GFLOP per inference", a.model_gflop);
    if a.end_to_end_gflops.is_some() {
        out.push_str(&format!("; end to end {}", rate(a.end_to_end_gflops)));
    }
    if a.onnxruntime_gflops.is_some() {
        out.push_str(&format!(", onnxruntime {}", rate(a.onnxruntime_gflops)));
    }
    out.push('\n');
    if a.tasks_timed > 0 {
        let top: Vec<String> = a
            .by_time
            .iter()
            .take(5)
            .map(|t| format!("{} {:.0}% at {:.1}", t.name, t.share * 100.0, t.gflops))
            .collect();
        out.push_str(&format!(
            "tasks with a known latency: {} of {}, {:.3} ms at {}; most of that time: {}\n",
            a.tasks_timed,
            r.tasks.len(),
            a.timed_ms,
            rate(a.timed_gflops),
            top.join(", ")
        ));
    }
    out
}

#[derive(Args)]
pub struct BenchArgs {
    /// A library `tgc build` wrote (its sidecar `LIB.json` beside it names the inputs).
    library: PathBuf,
    /// Timing runs (TVM's time evaluator, one call each).
    #[arg(long, default_value_t = BENCH_REPEATS)]
    repeat: u64,
    /// Also time an untuned build of this model (the one the library was built from; at
    /// most 10 runs).
    #[arg(long, value_name = "MODEL")]
    untuned: Option<String>,
    /// Also time onnxruntime on this ONNX file (the one the library was built from), on the
    /// same inputs (weights as initializers) and threads.
    #[arg(long, value_name = "MODEL.onnx")]
    onnxruntime: Option<String>,
    /// Static shape of an ONNX input of the untuned model (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = parse_shape_arg)]
    shapes: Vec<(String, Vec<i64>)>,
    /// The layout the library was built in (`tgc build --layout`), for the untuned model.
    #[arg(long, value_enum, default_value_t = Layout::Model)]
    layout: Layout,
    /// Print JSON (schema `tgc.bench/1`).
    #[arg(long)]
    json: bool,
    /// Where the worker log goes (default: a temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

pub fn bench(args: BenchArgs) -> Result<()> {
    if args.repeat < 1 {
        anyhow::bail!("--repeat must be at least 1, got {}", args.repeat);
    }
    if !args.library.is_file() {
        anyhow::bail!("{}: no such file", args.library.display());
    }
    let untuned = args
        .untuned
        .as_deref()
        .map(|m| load_model_in(m, &args.shapes, args.layout, false))
        .transpose()?;
    let onnxruntime = args.onnxruntime.as_deref().map(onnx_file).transpose()?;
    let r = tgc_tune::bench(
        &args.library,
        untuned,
        onnxruntime.as_deref(),
        args.repeat,
        args.work_dir.clone(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    if args.json {
        let doc = serde_json::json!({
            "schema": "tgc.bench/1",
            "library": args.library,
            "latency_ms": r.latency_ms,
            "untuned_latency_ms": r.untuned_latency_ms,
            "onnxruntime": r.onnxruntime,
            "wall_s": r.wall_s,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    print!("{}", bench_lines(&args.library.display().to_string(), &r));
    Ok(())
}
