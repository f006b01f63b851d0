//! `tgc-cache-writer`: a cache writer process for the reliability tests.
//!
//! ```text
//! tgc-cache-writer --cache PATH --writer W --records N [--tasks T] [--shared]
//! tgc-cache-writer --cache PATH --writer W --mix [--import DIR]
//! ```
//!
//! The first form puts N synthetic records, one transaction each, record i of writer W
//! being trace tag `W * 1_000_000 + i` on task `i % T` (the writer's own tasks, or with
//! `--shared` tasks common to all writers). The second form loops forever over a random mix
//! of puts into a few small groups, best-k changes, garbage collections and (with
//! `--import`) MetaSchedule imports, so that a SIGKILL lands in any of them. Both print
//! `ready` once the cache is open and `ok I` after each committed operation.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tgc_cache::{msdb, synth, Cache, Target, Toolchain};

struct Args {
    cache: PathBuf,
    writer: u64,
    records: u64,
    tasks: u64,
    shared: bool,
    mix: bool,
    import: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        cache: PathBuf::new(),
        writer: 0,
        records: 0,
        tasks: 40,
        shared: false,
        mix: false,
        import: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |s: String| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
        match flag.as_str() {
            "--cache" => a.cache = PathBuf::from(value()?),
            "--writer" => a.writer = number(value()?)?,
            "--records" => a.records = number(value()?)?,
            "--tasks" => a.tasks = number(value()?)?.max(1),
            "--shared" => a.shared = true,
            "--mix" => a.mix = true,
            "--import" => a.import = Some(PathBuf::from(value()?)),
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if a.cache.as_os_str().is_empty() {
        return Err("--cache is required".into());
    }
    Ok(a)
}

/// The target all synthetic records use.
pub fn llvm() -> Target {
    Target::parse(r#"{"kind":"llvm","keys":["cpu"],"num-cores":2}"#).expect("valid target")
}

fn run(a: &Args) -> Result<(), String> {
    let mut cache = Cache::open(&a.cache).map_err(|e| e.to_string())?;
    let target = llvm();
    let toolchain = Toolchain::pinned();
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock, s: String| {
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    say(&mut out, "ready".into());
    if !a.mix {
        for i in 0..a.records {
            let owner = if a.shared { 0 } else { a.writer };
            let task = synth::task(owner, i % a.tasks, 0);
            let tag = a.writer * 1_000_000 + i;
            cache
                .put(&task, &target, &toolchain, &[synth::record(tag)])
                .map_err(|e| e.to_string())?;
            say(&mut out, format!("ok {i}"));
        }
        return Ok(());
    }
    for i in 0.. {
        let r = synth::mix(a.writer.wrapping_mul(1_000_003) ^ i);
        match r % 100 {
            0..=84 => {
                let task = synth::task(9, r % 3, (r >> 8) % 4);
                let n = 1 + (r >> 16) % 4;
                let records: Vec<_> = (0..n)
                    .map(|j| synth::record((r >> 20).wrapping_add(j) % 5_000))
                    .collect();
                cache
                    .put(&task, &target, &toolchain, &records)
                    .map_err(|e| e.to_string())?;
            }
            85..=89 => {
                cache
                    .set_best_k(4 + (r >> 8) as usize % 9)
                    .map_err(|e| e.to_string())?;
            }
            90..=94 => {
                cache.gc(false).map_err(|e| e.to_string())?;
            }
            _ => {
                if let Some(dir) = &a.import {
                    msdb::import(&mut cache, dir, &toolchain).map_err(|e| e.to_string())?;
                }
            }
        }
        say(&mut out, format!("ok {i}"));
    }
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(|a| run(&a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
