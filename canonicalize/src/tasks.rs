//! Tasks of a partitioned module: one entry per distinct exact key, with its occurrences.

use crate::features::Features;
use crate::keys::TaskKeys;
use std::collections::HashMap;
use tgc_ir::{Callee, Module, TensorType};

/// A distinct tuning task of a module.
#[derive(Clone, Debug)]
pub struct Task {
    /// The name of the first function with this exact key.
    pub name: String,
    /// Op names in binding order (constants left out).
    pub ops: Vec<&'static str>,
    pub keys: TaskKeys,
    /// How many times the model calls a function with this exact key.
    pub occurrences: usize,
    /// Every Primitive function of the module with this key.
    pub functions: Vec<String>,
    pub features: Features,
    pub param_types: Vec<TensorType>,
    pub result_types: Vec<TensorType>,
}

/// Collects the tasks of a module whose tasks are `Primitive` functions (after `partition`),
/// in order of first appearance. Occurrences count calls from non-Primitive functions.
pub fn extract_tasks(module: &Module) -> Vec<Task> {
    collect_tasks(module, |f| {
        Ok::<_, std::convert::Infallible>(TaskKeys::of(f))
    })
    .unwrap_or_else(|e| match e {})
}

/// [`extract_tasks`] for a module the `canonicalize` pass ran over: the keys are read from
/// its attributes ([`TaskKeys::of_annotated`]) instead of computed again.
pub fn extract_annotated_tasks(module: &Module) -> Result<Vec<Task>, String> {
    collect_tasks(module, TaskKeys::of_annotated)
}

fn collect_tasks<E>(
    module: &Module,
    keys_of: impl Fn(&tgc_ir::Function) -> Result<TaskKeys, E>,
) -> Result<Vec<Task>, E> {
    let mut calls: HashMap<&str, usize> = HashMap::new();
    for f in module.functions.values().filter(|f| !f.is_primitive()) {
        for b in &f.bindings {
            if let Callee::Func(name) = &b.callee {
                *calls.entry(name.as_str()).or_default() += 1;
            }
        }
    }
    let mut index: HashMap<crate::keys::TaskKey, usize> = HashMap::new();
    let mut tasks: Vec<Task> = Vec::new();
    for f in module.functions.values().filter(|f| f.is_primitive()) {
        let keys = keys_of(f)?;
        let n = calls.get(f.name.as_str()).copied().unwrap_or(0);
        match index.get(&keys.exact) {
            Some(&i) => {
                tasks[i].occurrences += n;
                tasks[i].functions.push(f.name.clone());
            }
            None => {
                index.insert(keys.exact, tasks.len());
                tasks.push(Task {
                    name: f.name.clone(),
                    ops: f
                        .bindings
                        .iter()
                        .filter_map(|b| b.callee.op())
                        .map(|op| op.name())
                        .filter(|n| *n != "constant")
                        .collect(),
                    keys,
                    occurrences: n,
                    functions: vec![f.name.clone()],
                    features: Features::of(f),
                    param_types: f.param_types(),
                    result_types: f.result_types(),
                });
            }
        }
    }
    Ok(tasks)
}
