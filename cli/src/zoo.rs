//! `tgc zoo`: the built-in architectures (the TGC paper's twelve CNNs and a BERT-base
//! encoder) as text IR or ONNX.

use crate::input::write_output;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ZooArgs {
    /// The model (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// List the models with a one-line summary.
    #[arg(long, conflicts_with_all = ["name", "output"])]
    list: bool,
    /// Write here: ONNX (opset 17, weights as graph inputs) when it ends in `.onnx`, text IR
    /// otherwise; text IR to stdout without it.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
}

pub fn run(args: ZooArgs) -> Result<()> {
    if args.list {
        let mut text = String::new();
        for m in tgc_zoo::MODELS {
            text.push_str(&format!("{:<20} {}\n", m.name, m.summary));
        }
        return write_output(None, &text);
    }
    let name = args.name.as_deref().unwrap_or_default();
    let model = tgc_zoo::lookup(name).ok_or_else(|| {
        anyhow!(
            "unknown zoo model '{name}'; models: {}",
            tgc_zoo::names().collect::<Vec<_>>().join(", ")
        )
    })?;
    let module = model
        .build()
        .map_err(|e| anyhow!("zoo model {name}: {e}"))?;
    match &args.output {
        Some(path) if path.extension().is_some_and(|e| e == "onnx") => {
            let bytes = tgc_ir::onnx::export_module(&module)?;
            std::fs::write(path, bytes).with_context(|| format!("{}: cannot write", path.display()))
        }
        Some(path) if path.is_dir() => bail!("{}: is a directory", path.display()),
        out => write_output(out.as_deref(), &tgc_ir::text::print_module(&module)),
    }
}
