//! `tgc cache`: inspect and maintain the task cache (stats, MetaSchedule import/export, gc,
//! verify), and copy records between caches (push/pull: a file and a shared server).

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tgc_cache::msdb::{self, ExportOptions};
use tgc_cache::{Cache, Target, Toolchain};

#[derive(Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    command: CacheCommand,
    /// The cache: a file, or a PostgreSQL server as postgres://USER@HOST:PORT/DB (password
    /// from the URL, $PGPASSWORD or the password file) [default: $TGC_CACHE, else
    /// tgc/cache.sqlite in the user cache dir].
    #[arg(long, global = true, value_name = "PATH|URL")]
    cache: Option<PathBuf>,
}

#[derive(Subcommand)]
enum CacheCommand {
    /// Counts of tasks, imported workloads, traces and records, per target and toolchain.
    Stats {
        /// Print JSON (schema `tgc.cache-stats/1`).
        #[arg(long)]
        json: bool,
    },
    /// Import a MetaSchedule JSON database (a directory with database_workload.json and
    /// database_tuning_record.json); unreadable lines are skipped and counted.
    Import {
        dir: PathBuf,
        /// The toolchain that measured the records, as TVM_VERSION/TVM_FFI_VERSION/LLVM_VERSION
        /// (LLVM: TVM's llvm_version_major(); a MetaSchedule database does not record it).
        #[arg(long, value_name = "TVM/FFI/LLVM", default_value_t = Toolchain::pinned().to_string())]
        toolchain: String,
    },
    /// Export the records of one toolchain as a MetaSchedule JSON database directory.
    Export {
        dir: PathBuf,
        /// Which toolchain's records, as TVM_VERSION/TVM_FFI_VERSION/LLVM_VERSION.
        #[arg(long, value_name = "TVM/FFI/LLVM", default_value_t = Toolchain::pinned().to_string())]
        toolchain: String,
        /// Only records of this target (TVM target config JSON); default all targets.
        #[arg(long, value_name = "JSON")]
        target: Option<String>,
        /// Only the records this model's tasks need: the TVM workload of each task, as the
        /// TVM worker lowers it (so records imported from MetaSchedule count too).
        #[arg(long, value_name = "MODEL")]
        model: Option<String>,
        /// Static shape of an ONNX input of the model (repeatable).
        #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = crate::input::parse_shape_arg, requires = "model")]
        shapes: Vec<(String, Vec<i64>)>,
    },
    /// Keep only the best k records per task, target and toolchain, drop rows no record
    /// uses, and checkpoint the write-ahead log.
    Gc {
        /// Set k (kept from then on) before collecting.
        #[arg(long, value_name = "K")]
        best_k: Option<usize>,
        /// Also rewrite the file to return free space to the file system.
        #[arg(long)]
        vacuum: bool,
    },
    /// Check SQLite integrity, foreign keys and the cache's invariants; exit 1 on a problem.
    Verify,
    /// Copy every record of one cache into another (e.g. this machine's file to the team's
    /// server), keeping the newer measurement of a trace both hold and the destination's
    /// best k. Idempotent: a second push changes nothing.
    Push {
        /// The source [default: --cache, else $TGC_CACHE, else the user cache file].
        #[arg(long, value_name = "PATH|URL")]
        from: Option<PathBuf>,
        /// The destination (created if it is a file that does not exist yet).
        #[arg(long, value_name = "PATH|URL")]
        to: PathBuf,
    },
    /// Copy every record of another cache into this one (`push` the other way round).
    Pull {
        /// The source.
        #[arg(long, value_name = "PATH|URL")]
        from: PathBuf,
        /// The destination [default: --cache, else $TGC_CACHE, else the user cache file].
        #[arg(long, value_name = "PATH|URL")]
        to: Option<PathBuf>,
    },
}

/// Copies `from` into `to` and says what happened.
fn copy(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    let source = Cache::open_existing(from)?;
    let mut dest = Cache::open(to)?;
    if source.path() == dest.path() {
        bail!(
            "{}: source and destination are the same cache",
            source.path().display()
        );
    }
    let s = source.copy_into(&mut dest)?;
    println!(
        "{} -> {}: {} records of {} tasks: {} new, {} replaced, {} already there, {} not among the best k; {} target spellings",
        source.path().display(),
        dest.path().display(),
        s.records,
        s.tasks,
        s.stored.inserted,
        s.stored.replaced,
        s.stored.duplicates,
        s.stored.pruned,
        s.spellings
    );
    Ok(())
}

fn cache_path(arg: Option<PathBuf>) -> Result<PathBuf> {
    let given = arg.map(tgc_cache::CacheLocation::parse);
    Ok(tgc_cache::CacheLocation::or_default(given)?
        .as_path()
        .to_path_buf())
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

pub fn run(args: CacheArgs) -> Result<()> {
    let path = cache_path(args.cache)?;
    match args.command {
        CacheCommand::Push { from, to } => copy(&from.unwrap_or(path), &to),
        CacheCommand::Pull { from, to } => copy(&from, &to.unwrap_or(path)),
        CacheCommand::Stats { json } => stats(&path, json),
        CacheCommand::Import { dir, toolchain } => {
            let toolchain = Toolchain::parse(&toolchain)?;
            let mut cache = Cache::open(&path)?;
            let summary = msdb::import(&mut cache, &dir, &toolchain)?;
            println!("{summary}");
            Ok(())
        }
        CacheCommand::Export {
            dir,
            toolchain,
            target,
            model,
            shapes,
        } => export(&path, &dir, &toolchain, target, model, &shapes),
        CacheCommand::Gc { best_k, vacuum } => gc(&path, best_k, vacuum),
        CacheCommand::Verify => verify(&path),
    }
}

/// `tgc cache stats [--json]`.
fn stats(path: &Path, json: bool) -> Result<()> {
    let s = Cache::open_existing(path)?.stats()?;
    if json {
        let doc = tgc_tune::docs::cache_stats(&s);
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "{}: schema {}, {}",
        s.path.display(),
        s.schema_version,
        mb(s.file_bytes)
    );
    println!("best k:     {}", s.best_k);
    println!(
        "tasks:      {} tgc tasks, {} imported workloads ({} linked to a tgc task by TVM hash)",
        s.tasks, s.imported_workloads, s.linked_workloads
    );
    println!("records:    {} ({} distinct traces)", s.records, s.traces);
    println!("targets:");
    for (kind, config, records) in &s.targets {
        println!("  {kind:<8} {records:>9} records  {config}");
    }
    println!("toolchains:");
    for (t, records) in &s.toolchains {
        let llvm = if t.llvm.is_empty() { "?" } else { &t.llvm };
        println!(
            "  tvm {} / tvm-ffi {} / llvm {llvm} {records:>9} records",
            t.tvm, t.tvm_ffi
        );
    }
    Ok(())
}

/// `tgc cache export DIR [--model M]`: with a model, only the TVM workloads its tasks lower to.
fn export(
    path: &Path,
    dir: &Path,
    toolchain: &str,
    target: Option<String>,
    model: Option<String>,
    shapes: &[(String, Vec<i64>)],
) -> Result<()> {
    let toolchain = Toolchain::parse(toolchain)?;
    let target_json = target.clone();
    let target = target.as_deref().map(Target::parse).transpose()?;
    let cache = Cache::open_existing(path)?;
    let tasks = match &model {
        Some(m) => {
            let module = crate::input::load_model(m, shapes)?;
            let lower_for = target_json.as_deref().unwrap_or("llvm");
            Some(
                tgc_tune::workload_hashes(module, lower_for, None)
                    .map_err(|e| anyhow::anyhow!("{m}: {e}"))?,
            )
        }
        None => None,
    };
    let workloads = tasks
        .as_ref()
        .map(|t| t.iter().map(|(_, h)| *h).collect::<BTreeSet<u64>>());
    let summary = msdb::export(
        &cache,
        dir,
        &ExportOptions {
            toolchain,
            target,
            workloads: workloads.clone(),
        },
    )?;
    println!("{summary}");
    if let (Some(m), Some(tasks)) = (&model, &tasks) {
        println!(
            "{m}: {} tasks, {} distinct TVM workloads, {} of them with records exported",
            tasks.len(),
            workloads.as_ref().map_or(0, BTreeSet::len),
            summary.workloads
        );
    }
    Ok(())
}

/// `tgc cache gc [--best-k K] [--vacuum]`.
fn gc(path: &Path, best_k: Option<usize>, vacuum: bool) -> Result<()> {
    let mut cache = Cache::open_existing(path)?;
    if let Some(k) = best_k {
        cache.set_best_k(k)?;
    }
    let g = cache.gc(vacuum)?;
    println!(
        "{}: removed {} records, {} traces, {} tasks, {} targets, {} toolchains; {} -> {}",
        cache.path().display(),
        g.records,
        g.traces,
        g.tasks,
        g.targets,
        g.toolchains,
        mb(g.bytes_before),
        mb(g.bytes_after)
    );
    Ok(())
}

/// `tgc cache verify`: every problem on its own line, then an error naming their count.
fn verify(path: &Path) -> Result<()> {
    let cache = Cache::open_existing(path)?;
    // The file, or the server's URL without its password.
    let path = cache.path().to_path_buf();
    let report = cache.verify()?;
    if !report.is_ok() {
        for p in &report.problems {
            println!("{}: {p}", path.display());
        }
        bail!(
            "{}: verify found {} problems (listed above)",
            path.display(),
            report.problems.len()
        );
    }
    println!(
        "{}: ok ({} tasks, {} traces, {} records; {} unused rows for gc)",
        path.display(),
        report.tasks,
        report.traces,
        report.records,
        report.unreferenced
    );
    if report.older_keys > 0 {
        println!(
            "{}: {} tasks carry keys of an older encoding (before {}): reached through their TVM workload hash only",
            path.display(),
            report.older_keys,
            tgc_canonicalize::KEY_PREFIX
        );
    }
    Ok(())
}
