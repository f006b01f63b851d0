//! `tgc similarity`: partition several models and compare their tasks: census per model at
//! every key level, coverage matrix at one level, nearest structural neighbour distances
//! (the computation is `tgc_canonicalize::similarity`). Output as Markdown tables (default),
//! JSON (`tgc.similarity/1`) or CSV, and optionally a plot (SVG or PNG).

use crate::input::{load_model, write_output};
use crate::plot;
use anyhow::{anyhow, Result};
use clap::{Args, ValueEnum};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tgc_canonicalize::similarity::{ModelTasks, Study};
use tgc_canonicalize::{extract_tasks, Level};
use tgc_passes::{Instrumentation, PassManager};

/// `--level`, parsed by clap.
#[derive(Clone, Copy, ValueEnum)]
enum LevelArg {
    Exact,
    Structural,
    Family,
}

impl From<LevelArg> for Level {
    fn from(l: LevelArg) -> Level {
        match l {
            LevelArg::Exact => Level::Exact,
            LevelArg::Structural => Level::Structural,
            LevelArg::Family => Level::Family,
        }
    }
}

#[derive(Args)]
pub struct SimilarityArgs {
    /// Models: ONNX (`.onnx`), text IR, or zoo names (`tgc zoo --list`).
    #[arg(required = true, value_name = "MODEL")]
    models: Vec<String>,
    /// Key level of the coverage matrix (the census shows every level).
    #[arg(long, value_enum, default_value = "structural")]
    level: LevelArg,
    /// Print JSON (schema `tgc.similarity/1`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV rows `table,level,model,column,value` (tables: census, coverage,
    /// coverage_by_others, neighbours).
    #[arg(long)]
    csv: bool,
    /// Also draw the coverage heatmap and the census bar chart to FILE (`.svg` or `.png`).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Write the tables here instead of stdout.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
}

/// The name a model goes by in the study: a zoo name as is, a file by its stem; the whole
/// argument where two stems would clash.
fn display_names(models: &[String]) -> Vec<String> {
    let stems: Vec<String> = models
        .iter()
        .map(|m| {
            Path::new(m)
                .file_stem()
                .map_or_else(|| m.clone(), |s| s.to_string_lossy().to_string())
        })
        .collect();
    let unique: HashSet<&String> = stems.iter().collect();
    if unique.len() == stems.len() {
        stems
    } else {
        models.to_vec()
    }
}

/// Loads and partitions one model and extracts its tasks.
pub fn model_tasks(model: &str, name: &str) -> Result<ModelTasks> {
    let mut module = load_model(model, &[])?;
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline("partition", &mut pm).map_err(|e| anyhow!("{e}"))?;
    pm.run(&mut module, &mut std::io::sink())
        .map_err(|e| anyhow!("{model}: {e}"))?;
    Ok(ModelTasks::new(name, extract_tasks(&module)))
}

pub fn run(args: SimilarityArgs) -> Result<()> {
    if let Some(plot) = &args.plot {
        // Refuse a bad plot path before the work, not after it.
        plot::format_of(plot)?;
    }
    let names = display_names(&args.models);
    let models = args
        .models
        .iter()
        .zip(&names)
        .map(|(m, n)| model_tasks(m, n))
        .collect::<Result<Vec<_>>>()?;
    let study = Study::new(&models, args.level.into());
    if let Some(path) = &args.plot {
        plot::draw(&study, path)?;
    }
    let text = if args.json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&to_json(&study, &args.models))?
        )
    } else if args.csv {
        to_csv(&study)
    } else {
        to_markdown(&study)
    };
    write_output(args.output.as_deref(), &text)
}

fn to_markdown(study: &Study) -> String {
    format!(
        "## Census (task occurrences; distinct keys and repetition per level)\n\n{}\n\
         ## Coverage at {} level (row: covered model, column: covering model)\n\n{}\n\
         ## Nearest structural neighbour distances (per model, * = pooled)\n\n{}",
        study.census_markdown(),
        study.level.name(),
        study.coverage_markdown(),
        study.neighbours_markdown()
    )
}

fn to_json(study: &Study, sources: &[String]) -> Value {
    let sources: Vec<(String, String)> = sources
        .iter()
        .map(|source| {
            let from = if tgc_zoo::lookup(source).is_some() && !Path::new(source).exists() {
                "zoo"
            } else {
                "file"
            };
            (source.clone(), from.to_string())
        })
        .collect();
    tgc_tune::docs::similarity(study, &sources)
}

/// A CSV field: quoted when it holds a comma, quote or line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn to_csv(study: &Study) -> String {
    let mut out = String::from("table,level,model,column,value\n");
    let mut row = |table: &str, level: &str, model: &str, column: &str, value: String| {
        out.push_str(&format!(
            "{table},{level},{},{},{value}\n",
            field(model),
            field(column)
        ));
    };
    for (name, census) in study.models.iter().zip(&study.census) {
        for c in census {
            let level = c.level.name();
            row(
                "census",
                level,
                name,
                "occurrences",
                c.occurrences.to_string(),
            );
            row("census", level, name, "distinct", c.distinct.to_string());
            row(
                "census",
                level,
                name,
                "repetition",
                format!("{:.6}", c.repetition()),
            );
        }
    }
    let level = study.level.name();
    for (name, values) in study.models.iter().zip(&study.coverage.matrix) {
        for (other, v) in study.models.iter().zip(values) {
            row("coverage", level, name, other, format!("{v:.6}"));
        }
    }
    for (name, v) in study.models.iter().zip(&study.coverage.by_others) {
        row("coverage_by_others", level, name, "", format!("{v:.6}"));
    }
    for n in study.neighbours.iter().chain([&study.pooled]) {
        let scope = &n.scope;
        row(
            "neighbours",
            "structural",
            scope,
            "tasks",
            n.tasks.to_string(),
        );
        row(
            "neighbours",
            "structural",
            scope,
            "groups",
            n.groups.to_string(),
        );
        row(
            "neighbours",
            "structural",
            scope,
            "with_neighbour",
            n.distances.len().to_string(),
        );
        if let Some(q) = n.quantiles() {
            for (col, v) in [
                ("min", q.min),
                ("p25", q.p25),
                ("median", q.median),
                ("p75", q.p75),
                ("p90", q.p90),
                ("max", q.max),
            ] {
                row("neighbours", "structural", scope, col, format!("{v:.6}"));
            }
        }
    }
    out
}
