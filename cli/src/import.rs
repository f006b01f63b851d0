//! `tgc import`: an ONNX model, or an MLIR (StableHLO) module, to text IR.

use crate::input::{parse_shape_arg, write_output};
use anyhow::Result;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct ImportArgs {
    /// The ONNX model, or an MLIR module (`.mlir`, StableHLO in generic form).
    model: PathBuf,
    /// Static shape of an input, e.g. `input=1x224x224x3` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = parse_shape_arg)]
    shapes: Vec<(String, Vec<i64>)>,
    /// Write the IR here instead of stdout.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
}

pub fn run(args: ImportArgs) -> Result<()> {
    let path = args.model.to_string_lossy();
    let module = if path.ends_with(".mlir") {
        crate::input::load_model(&path, &args.shapes)?
    } else {
        tgc_ir::onnx::import_file(Path::new(&args.model), &args.shapes)?
    };
    write_output(args.output.as_deref(), &tgc_ir::text::print_module(&module))
}
