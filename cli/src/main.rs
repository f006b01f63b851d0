//! `tgc`: the command-line face of the tgc passes.
//!
//! Every error is reported as one line on stderr (`error: ...`, naming the file and the
//! problem) with exit code 1; nothing a user types can make it panic or print a backtrace.

mod cache;
mod import;
mod input;
mod opt;
mod tasks;
mod tune;

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
    /// Import an ONNX model into text IR.
    Import(import::ImportArgs),
    /// Partition a model into tuning tasks and list each distinct task with its keys.
    Tasks(tasks::TasksArgs),
    /// Tune a model with TVM MetaSchedule, seeded from the cache, and write the results back.
    Tune(tune::TuneArgs),
    /// Inspect and maintain the task cache: stats, import, export, gc, verify.
    Cache(cache::CacheArgs),
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
            let first = rendered
                .lines()
                .next()
                .unwrap_or("error: invalid arguments");
            eprintln!("{first} (see 'tgc --help')");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Opt(args) => opt::run(args),
        Command::Import(args) => import::run(args),
        Command::Tasks(args) => tasks::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Cache(args) => cache::run(args),
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
