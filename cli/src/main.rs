//! `tgc`: the command-line face of the tgc passes.
//!
//! Every error is reported as one line on stderr (`error: ...`, naming the file and the
//! problem) with exit code 1; nothing a user types can make it panic or print a backtrace.

mod build;
mod cache;
mod curves;
mod import;
mod input;
mod opt;
mod plot;
mod similarity;
mod tasks;
mod tune;
mod zoo;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tgc",
    version,
    about = "Task Graph Caching for TVM: partition, key, cache and seed tuning tasks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pass pipeline over a module and print the resulting IR.
    Opt(opt::OptArgs),
    /// List the registered passes with their options.
    Passes,
    /// Import an ONNX model (or an MLIR module, StableHLO) into text IR.
    Import(import::ImportArgs),
    /// Partition a model into tuning tasks and list each distinct task with its keys.
    Tasks(tasks::TasksArgs),
    /// Tune a model with TVM MetaSchedule, seeded from the cache, and write the results back.
    Tune(tune::TuneArgs),
    /// Compile a deployable model (a TVM library) with the cached schedule per task, and a
    /// zero-trial transfer from neighbours for tasks never tuned.
    Build(build::BuildArgs),
    /// Time a library `tgc build` wrote, end to end (and an untuned build of its model, and
    /// onnxruntime on its ONNX file).
    Bench(build::BenchArgs),
    /// Plot a whole-model benchmark (scripts/bench_whole.py's bench.json): latency against
    /// tuning time, tgc beside stock TVM, onnxruntime and TVM's defaults.
    Curves(curves::CurvesArgs),
    /// Inspect and maintain the task cache: stats, import, export, gc, verify.
    Cache(cache::CacheArgs),
    /// Compare the tasks of several models: census, coverage matrix, structural neighbours.
    Similarity(similarity::SimilarityArgs),
    /// Write a built-in model (the TGC paper's CNNs, a BERT encoder) as text IR or ONNX.
    Zoo(zoo::ZooArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::FAILURE
                } else {
                    ExitCode::SUCCESS
                };
            }
            let rendered = e.render().to_string();
            let mut lines = rendered.lines().filter(|l| !l.trim().is_empty());
            let mut first = lines
                .next()
                .unwrap_or("error: invalid arguments")
                .to_string();
            // "the following required arguments were not provided:" names them on the next line.
            if first.ends_with(':') {
                if let Some(next) = lines.next() {
                    first = format!("{first} {}", next.trim());
                }
            }
            eprintln!("{first} (see 'tgc --help')");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Opt(args) => opt::run(args),
        Command::Import(args) => import::run(args),
        Command::Tasks(args) => tasks::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Build(args) => build::run(args),
        Command::Bench(args) => build::bench(args),
        Command::Curves(args) => curves::run(args),
        Command::Cache(args) => cache::run(args),
        Command::Similarity(args) => similarity::run(args),
        Command::Zoo(args) => zoo::run(args),
        Command::Passes => {
            print!(
                "Registered passes (use in --passes as name{{option=value ...}}):\n{}",
                tgc_pipelines::help_text()
            );
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes joined, outermost first.
            let msg = e
                .chain()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(": ");
            eprintln!("error: {}", msg.replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}
