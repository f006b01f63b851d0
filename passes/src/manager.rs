//! The pass manager: runs a sequence of passes over a module with instrumentation.
//!
//! The manager, not the passes, owns the cross-cutting concerns: it verifies the IR after
//! every pass (so a pass that breaks an invariant is named at once), times each pass, dumps
//! the IR after selected passes, and can stop after the first N passes (bisection: find the
//! pass that introduces a problem by halving N).

use crate::pass::{Pass, PassError};
use std::io::Write;
use std::time::{Duration, Instant};
use tgc_ir::text::print_module;
use tgc_ir::verify::verify_module;
use tgc_ir::Module;

/// After which passes to print the IR.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum PrintIrAfter {
    #[default]
    Never,
    All,
    /// Pass names.
    Passes(Vec<String>),
}

impl PrintIrAfter {
    fn wants(&self, pass: &str) -> bool {
        match self {
            PrintIrAfter::Never => false,
            PrintIrAfter::All => true,
            PrintIrAfter::Passes(names) => names.iter().any(|n| n == pass),
        }
    }
}

/// What the manager does around each pass.
#[derive(Clone, Debug)]
pub struct Instrumentation {
    /// Verify the module before the first pass and after every pass.
    pub verify_each: bool,
    pub print_ir_after: PrintIrAfter,
    /// Run at most this many passes; the rest are skipped and reported.
    pub bisect_limit: Option<usize>,
}

impl Default for Instrumentation {
    fn default() -> Self {
        Instrumentation {
            verify_each: true,
            print_ir_after: PrintIrAfter::Never,
            bisect_limit: None,
        }
    }
}

/// What happened to one pass.
#[derive(Clone, Debug)]
pub struct PassRun {
    pub name: &'static str,
    pub elapsed: Duration,
    /// Skipped because of the bisection limit.
    pub skipped: bool,
}

/// A failure while running a pipeline: the pass it happened in and why.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("input IR is invalid: {0}")]
    InvalidInput(String),
    #[error("pass '{pass}' failed: {error}")]
    PassFailed {
        pass: &'static str,
        error: PassError,
    },
    #[error("pass '{pass}' produced invalid IR: {message}")]
    InvalidOutput { pass: &'static str, message: String },
    #[error("cannot write IR dump: {0}")]
    Dump(#[from] std::io::Error),
}

/// An ordered list of passes plus instrumentation.
#[derive(Default)]
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    pub instrumentation: Instrumentation,
}

impl PassManager {
    pub fn new(instrumentation: Instrumentation) -> Self {
        PassManager {
            passes: Vec::new(),
            instrumentation,
        }
    }

    pub fn add(&mut self, pass: Box<dyn Pass>) {
        self.passes.push(pass);
    }

    pub fn len(&self) -> usize {
        self.passes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// Names of the passes in order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.info().name).collect()
    }

    /// Runs every pass over `module`, writing IR dumps to `dump`.
    pub fn run(
        &self,
        module: &mut Module,
        dump: &mut dyn Write,
    ) -> Result<Vec<PassRun>, PipelineError> {
        let inst = &self.instrumentation;
        if inst.verify_each {
            verify_module(module).map_err(|e| PipelineError::InvalidInput(e.to_string()))?;
        }
        let mut runs = Vec::with_capacity(self.passes.len());
        for (i, pass) in self.passes.iter().enumerate() {
            let name = pass.info().name;
            if inst.bisect_limit.is_some_and(|limit| i >= limit) {
                runs.push(PassRun {
                    name,
                    elapsed: Duration::ZERO,
                    skipped: true,
                });
                continue;
            }
            let start = Instant::now();
            pass.run(module)
                .map_err(|error| PipelineError::PassFailed { pass: name, error })?;
            let elapsed = start.elapsed();
            if inst.verify_each {
                verify_module(module).map_err(|e| PipelineError::InvalidOutput {
                    pass: name,
                    message: e.to_string(),
                })?;
            }
            if inst.print_ir_after.wants(name) {
                writeln!(dump, "// -----// IR Dump After {name} //----- //")?;
                dump.write_all(print_module(module).as_bytes())?;
            }
            runs.push(PassRun {
                name,
                elapsed,
                skipped: false,
            });
        }
        Ok(runs)
    }
}

/// Formats per-pass timings as a table (MLIR's `-mlir-timing` in spirit).
pub fn format_timings(runs: &[PassRun]) -> String {
    let total: Duration = runs.iter().map(|r| r.elapsed).sum();
    let mut out = String::from("===- pass execution timing -===\n   wall (ms)   share  pass\n");
    for r in runs {
        if r.skipped {
            out.push_str(&format!(
                "{:>12}  {:>6}  {} (skipped: bisect limit)\n",
                "-", "-", r.name
            ));
            continue;
        }
        let share = if total.is_zero() {
            0.0
        } else {
            100.0 * r.elapsed.as_secs_f64() / total.as_secs_f64()
        };
        out.push_str(&format!(
            "{:>12.3}  {:>5.1}%  {}\n",
            r.elapsed.as_secs_f64() * 1e3,
            share,
            r.name
        ));
    }
    out.push_str(&format!(
        "{:>12.3}  100.0%  total\n",
        total.as_secs_f64() * 1e3
    ));
    out
}
