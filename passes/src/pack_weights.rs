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
use tgc_ir::{Attr, Function, Module, Op};

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
        let called = module.called_functions();
        for f in module.functions.values_mut() {
            if called.contains(&f.name) || f.is_primitive() {
                continue;
            }
            let names: Vec<Attr> = f
                .params_only_used_as(1, |b| b.callee.op().is_some_and(is_contraction))
                .into_iter()
                .map(|p| Attr::Str(f.name_of(p).to_string()))
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
