//! `pack-weights`: the weights of an entry function's contractions may be packed ahead of the
//! runs, in whatever layout their schedules read best.
//!
//! Why: a model whose weights exceed the last-level cache reads every convolution's kernel
//! from memory on every run. A kernel in the model's layout is read in strides; packed in the
//! order the schedule reads it (MetaSchedule's RewriteLayout on a layout-free buffer), it is
//! one stream that the prefetchers keep ahead of (docs/tuning.md, "Where the time goes against
//! onnxruntime").
//!
//! How: an entry function's parameter whose every use is the weight (operand 1) of a
//! contraction (`nn.conv2d`, `nn.conv2d_transpose`, `matmul`, `nn.dense`, `nn.batch_matmul`)
//! is listed in the function's [`PACKED_PARAMS_ATTR`]. The `partition` pass that follows
//! marks each task parameter such a weight feeds in the task's `tgc.layout_free`, which is
//! part of its keys (a task with a packed weight is another TVM workload); the worker gives
//! the task's PrimFunc `layout_free_buffers` from it, and a model built from such tasks takes
//! its packed weights through `main_transform_params` (PROTOCOL.md, "Task JSON").

use crate::pass::{Pass, PassError, PassInfo, PassOptions};
use std::collections::HashSet;
use tgc_ir::{Attr, Callee, Function, Module, Op};

pub static INFO: PassInfo = PassInfo {
    name: "pack-weights",
    summary: "Let the schedules of the contractions choose their weights' layout (packed once, before the runs)",
    options: &[],
    create: |_: &PassOptions| Ok(Box::new(PackWeights)),
};

/// The entry function attribute listing (by name) the parameters whose layout the schedules
/// choose.
pub const PACKED_PARAMS_ATTR: &str = "packed_params";

pub struct PackWeights;

impl Pass for PackWeights {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        let called: HashSet<String> = module
            .functions
            .values()
            .flat_map(|f| f.bindings.iter())
            .filter_map(|b| match &b.callee {
                Callee::Func(name) => Some(name.clone()),
                Callee::Op(_) => None,
            })
            .collect();
        for f in module.functions.values_mut() {
            if called.contains(&f.name) || f.is_primitive() {
                continue;
            }
            let names: Vec<Attr> = weight_params(f)
                .into_iter()
                .map(|i| Attr::Str(f.name_of(f.params[i]).to_string()))
                .collect();
            if !names.is_empty() {
                f.attrs.insert(PACKED_PARAMS_ATTR.into(), Attr::List(names));
            }
        }
        Ok(())
    }
}

fn is_contraction(op: Op) -> bool {
    matches!(
        op.name(),
        "nn.conv2d" | "nn.conv2d_transpose" | "matmul" | "nn.dense" | "nn.batch_matmul"
    )
}

/// The indices of `f`'s parameters that are only ever a contraction's weight (operand 1).
pub fn weight_params(f: &Function) -> Vec<usize> {
    let mut weight_uses = vec![0usize; f.num_values()];
    let mut other_uses = vec![0usize; f.num_values()];
    for b in &f.bindings {
        let contraction = b.callee.op().is_some_and(is_contraction);
        for (pos, o) in b.operands.iter().enumerate() {
            if contraction && pos == 1 {
                weight_uses[o.index()] += 1;
            } else {
                other_uses[o.index()] += 1;
            }
        }
    }
    for r in &f.results {
        other_uses[r.index()] += 1;
    }
    (0..f.params.len())
        .filter(|&i| {
            let p = f.params[i].index();
            weight_uses[p] > 0 && other_uses[p] == 0
        })
        .collect()
}

/// The parameter names `f` lists in [`PACKED_PARAMS_ATTR`] (empty without the attribute).
pub fn packed_params(f: &Function) -> HashSet<String> {
    match f.attrs.get(PACKED_PARAMS_ATTR) {
        Some(Attr::List(l)) => l
            .iter()
            .filter_map(|a| match a {
                Attr::Str(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => HashSet::new(),
    }
}
