//! `tgc opt`: run a textual pass pipeline over a module.

use crate::input::{read_module, write_output};
use anyhow::{anyhow, Result};
use clap::Args;
use std::path::PathBuf;
use tgc_passes::manager::format_timings;
use tgc_passes::{Instrumentation, PassManager, PrintIrAfter};

#[derive(Args)]
pub struct OptArgs {
    /// Input module: text IR, or `-` for stdin; a model (`.onnx`, `.mlir`) is imported first.
    input: String,
    /// The pass pipeline, e.g. 'dce,cse' (empty: parse, verify and print).
    #[arg(long, default_value = "")]
    passes: String,
    /// Write the output here instead of stdout.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Print the IR to stderr after the named passes (comma-separated) or after `all`.
    #[arg(long, value_name = "NAME|all")]
    print_ir_after: Option<String>,
    /// Verify the IR before the pipeline and after every pass.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    verify_each: bool,
    /// Print per-pass wall times to stderr.
    #[arg(long)]
    timing: bool,
    /// Run only the first N passes of the pipeline (to bisect a problem).
    #[arg(long, value_name = "N")]
    opt_bisect_limit: Option<usize>,
    /// Output format: tgc's text IR, or MLIR (`func.func` per function, tgc's ops as
    /// generic `tgc.*` operations, the passes' results as attributes; `mlir-opt
    /// --allow-unregistered-dialect` reads it).
    #[arg(long, value_enum, default_value_t = Emit::Tgc)]
    emit: Emit,
}

/// What `tgc opt` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    Tgc,
    Mlir,
}

pub fn run(args: OptArgs) -> Result<()> {
    let print_ir_after = match args.print_ir_after.as_deref() {
        None => PrintIrAfter::Never,
        Some("all") => PrintIrAfter::All,
        Some(list) => {
            let names: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
            if let Some(bad) = names.iter().find(|n| tgc_pipelines::lookup(n).is_none()) {
                return Err(anyhow!(
                    "--print-ir-after: unknown pass '{bad}'; valid passes: {}",
                    tgc_pipelines::pass_names()
                ));
            }
            PrintIrAfter::Passes(names)
        }
    };
    let mut pm = PassManager::new(Instrumentation {
        verify_each: args.verify_each,
        print_ir_after,
        bisect_limit: args.opt_bisect_limit,
    });
    tgc_pipelines::build_pipeline(&args.passes, &mut pm).map_err(|e| anyhow!("--passes: {e}"))?;
    let mut module = if args.input.ends_with(".onnx") || args.input.ends_with(".mlir") {
        crate::input::load_model(&args.input, &[])?
    } else {
        read_module(&args.input)?
    };
    let runs = pm
        .run(&mut module, &mut std::io::stderr().lock())
        .map_err(|e| anyhow!("{}: {e}", display_name(&args.input)))?;
    if args.timing {
        eprint!("{}", format_timings(&runs));
    }
    let text = match args.emit {
        Emit::Tgc => tgc_ir::text::print_module(&module),
        Emit::Mlir => tgc_ir::text::print_module_mlir(&module),
    };
    write_output(args.output.as_deref(), &text)
}

fn display_name(input: &str) -> &str {
    if input == "-" {
        "<stdin>"
    } else {
        input
    }
}
