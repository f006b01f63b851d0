//! Dead-code elimination: removes bindings none of whose results are used.
//!
//! Every op in the IR is pure, so a binding whose results reach neither a function result nor
//! another live binding can go. One backward sweep over the dataflow block suffices because
//! bindings are in SSA order (uses come after definitions).

use crate::pass::{Pass, PassError, PassInfo, PassOptions};
use tgc_ir::{Function, Module};

pub static INFO: PassInfo = PassInfo {
    name: "dce",
    summary: "Remove bindings whose results are never used",
    options: &[],
    create: |_: &PassOptions| Ok(Box::new(DeadCodeElimination)),
};

pub struct DeadCodeElimination;

impl Pass for DeadCodeElimination {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for f in module.functions.values_mut() {
            eliminate_dead_bindings(f);
        }
        Ok(())
    }
}

/// Removes dead bindings from `f`; returns how many were removed.
pub fn eliminate_dead_bindings(f: &mut Function) -> usize {
    let mut live = vec![false; f.num_values()];
    for r in &f.results {
        live[r.index()] = true;
    }
    let mut keep = vec![false; f.bindings.len()];
    for (i, b) in f.bindings.iter().enumerate().rev() {
        if b.results.iter().any(|r| live[r.index()]) {
            keep[i] = true;
            for o in &b.operands {
                live[o.index()] = true;
            }
        }
    }
    let before = f.bindings.len();
    let mut flags = keep.into_iter();
    f.bindings.retain(|_| flags.next().unwrap_or(true));
    before - f.bindings.len()
}
