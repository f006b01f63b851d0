//! `tgc tasks`: partition a model into tuning tasks and print one entry per distinct task.

use crate::input::{load_model_in, parse_shape_arg, write_output, Layout};
use anyhow::{anyhow, Result};
use clap::Args;
use std::path::PathBuf;
use tgc_canonicalize::extract_tasks;
use tgc_ir::TensorType;
use tgc_passes::{Instrumentation, PassManager};

#[derive(Args)]
pub struct TasksArgs {
    /// The model: ONNX (`.onnx`), text IR, or a zoo name (`tgc zoo --list`).
    model: String,
    /// Static shape of an ONNX input, e.g. `input=1x224x224x3` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = parse_shape_arg)]
    shapes: Vec<(String, Vec<i64>)>,
    /// Print JSON (schema `tgc.tasks/1`) instead of a table.
    #[arg(long)]
    json: bool,
    /// The layout the convolutions run in, as `tgc tune --layout` tunes them.
    #[arg(long, value_enum, default_value_t = Layout::Model)]
    layout: Layout,
    /// Let the schedules of the convolutions and matmuls choose their weights' layout: weights
    /// that are model inputs are packed once, by the library's `main_transform_params`, instead
    /// of read in the model's layout on every run (MetaSchedule's layout-free buffers; pays
    /// where the weights exceed the last-level cache). Such tasks are cached apart.
    #[arg(long)]
    pack_weights: bool,
    /// Most nodes in one fused group (TVM's kMaxFusedOps).
    #[arg(long, default_value_t = 256)]
    max_depth: usize,
    /// Write the output here instead of stdout.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
}

fn short_type(t: &TensorType) -> String {
    let s = t.to_string();
    s.trim_start_matches("tensor<")
        .trim_end_matches('>')
        .to_string()
}

pub fn run(args: TasksArgs) -> Result<()> {
    let mut module = load_model_in(&args.model, &args.shapes, args.layout, args.pack_weights)?;
    let mut pm = PassManager::new(Instrumentation::default());
    // extract_tasks computes the keys itself: running canonicalize too would key every task twice.
    tgc_pipelines::build_pipeline(
        &format!("partition{{max-depth={}}}", args.max_depth),
        &mut pm,
    )
    .map_err(|e| anyhow!("--max-depth: {e}"))?;
    pm.run(&mut module, &mut std::io::sink())
        .map_err(|e| anyhow!("{}: {e}", args.model))?;
    let tasks = extract_tasks(&module);
    let occurrences: usize = tasks.iter().map(|t| t.occurrences).sum();
    let text = if args.json {
        let doc = tgc_tune::docs::tasks(&args.model, &tasks);
        format!("{}\n", serde_json::to_string_pretty(&doc)?)
    } else {
        let mut out = format!(
            "{}: {} distinct tasks, {} occurrences\n{:>4}  {:<44} {:>4} {:>12}  {:<37} {}\n",
            args.model,
            tasks.len(),
            occurrences,
            "#",
            "task",
            "occ",
            "MFLOPs",
            "exact key",
            "output"
        );
        for (i, t) in tasks.iter().enumerate() {
            let output = t
                .result_types
                .iter()
                .map(short_type)
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(
                "{:>4}  {:<44} {:>4} {:>12.2}  {:<37} {}\n",
                i,
                t.name,
                t.occurrences,
                t.features.flops / 1e6,
                t.keys.exact.to_string(),
                output
            ));
        }
        out
    };
    write_output(args.output.as_deref(), &text)
}
