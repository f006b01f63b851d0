//! What TVM's lowering of a task keeps of its constants.
//!
//! A task's `constant` bindings reach TVM in one of two ways. Most are lifted to parameters
//! of the Primitive function (FuseOps' `lift_constants`; tgc's bridge does the same), so the
//! MetaSchedule workload sees only their dtype and shape and two tasks that differ only in
//! constant values are one workload. The exception is LegalizeOps' binary elementwise ops: a
//! rank-0 constant operand becomes an immediate of the TIR (Relax's `_binary` looks at
//! operand 1 first and at operand 0 only when operand 1 is not such a constant), so its
//! value is part of the workload. The keys and the bridge both follow this one rule.

use crate::module::{Binding, Function, ValueId};
use std::collections::HashMap;

fn is_constant(b: &Binding) -> bool {
    b.callee.op().is_some_and(|op| op.name() == "constant")
}

/// The binding index of every value defined by a rank-0 `constant` binding of `f`.
fn scalar_constants(f: &Function) -> HashMap<ValueId, usize> {
    f.bindings
        .iter()
        .enumerate()
        .filter(|(_, b)| is_constant(b))
        .flat_map(|(bi, b)| b.results.iter().map(move |r| (*r, bi)))
        .filter(|(r, _)| f.ty(*r).rank() == 0)
        .collect()
}

fn immediate_slot(b: &Binding, is_scalar_constant: impl Fn(ValueId) -> bool) -> Option<usize> {
    if !b
        .callee
        .op()
        .is_some_and(|op| op.def().inlines_scalar_constant)
    {
        return None;
    }
    [1, 0]
        .into_iter()
        .find(|&slot| b.operands.get(slot).is_some_and(|v| is_scalar_constant(*v)))
}

/// The operand of `b` that the lowering writes into the TIR as an immediate, if any.
pub fn immediate_operand(f: &Function, b: &Binding) -> Option<usize> {
    let scalars = scalar_constants(f);
    immediate_slot(b, |v| scalars.contains_key(&v))
}

/// For every binding of `f`: whether it is a constant whose value the lowering writes into
/// the TIR (it is an immediate operand of at least one binding). Every other constant is
/// lifted to a parameter, and only its dtype and shape reach the workload.
pub fn constants_in_tir(f: &Function) -> Vec<bool> {
    let scalars = scalar_constants(f);
    let mut in_tir = vec![false; f.bindings.len()];
    if scalars.is_empty() {
        return in_tir;
    }
    for b in &f.bindings {
        if let Some(slot) = immediate_slot(b, |v| scalars.contains_key(&v)) {
            in_tir[scalars[&b.operands[slot]]] = true;
        }
    }
    in_tir
}

/// The task function attribute listing (by index) the parameters whose layout the task's
/// schedule chooses: weights packed once, before the runs (the `pack-weights` pass; the
/// worker gives the task's PrimFunc `layout_free_buffers` from it, which MetaSchedule's
/// RewriteLayout reads). Part of the keys: such a task is another TVM workload.
pub const LAYOUT_FREE_ATTR: &str = "tgc.layout_free";

/// The indices a [`LAYOUT_FREE_ATTR`] value lists, sorted, when it is a list of distinct
/// parameter indices of a function of `params` parameters (what the verifier accepts).
pub fn layout_free_indices(attr: &crate::Attr, params: usize) -> Option<Vec<usize>> {
    let crate::Attr::List(l) = attr else {
        return None;
    };
    let mut out = Vec::with_capacity(l.len());
    for a in l {
        match a {
            crate::Attr::Int(i) => out.push(usize::try_from(*i).ok().filter(|&i| i < params)?),
            _ => return None,
        }
    }
    out.sort_unstable();
    let n = out.len();
    out.dedup();
    (out.len() == n).then_some(out)
}

/// The indices [`LAYOUT_FREE_ATTR`] lists on `f`, sorted (empty without it; a verified
/// function has no other kind of value there).
pub fn layout_free(f: &Function) -> Vec<usize> {
    f.attrs
        .get(LAYOUT_FREE_ATTR)
        .and_then(|a| layout_free_indices(a, f.params.len()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_module;

    fn function(text: &str) -> Function {
        let m = parse_module(text, "test.tgc").expect("test IR parses");
        m.functions.values().next().expect("one function").clone()
    }

    #[test]
    fn scalar_operands_of_binary_ops_are_immediates() {
        let f = function(
            r#"module @m {
            func @t(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
              %s = constant() {value = [3.0], shape = [], dtype = "float32"} : tensor<f32>
              %one = constant() {value = [1.0], shape = [1], dtype = "float32"} : tensor<1xf32>
              %k = constant() {value = [2.0], shape = [], dtype = "float32"} : tensor<f32>
              %a = add(%x, %s) : tensor<1x8xf32>
              %b = multiply(%a, %one) : tensor<1x8xf32>
              %c = subtract(%k, %b) : tensor<1x8xf32>
              return %c
            }
            }"#,
        );
        // %s: operand 1 of add; %k: operand 0 of subtract whose operand 1 is no constant;
        // %one has rank 1 and is lifted.
        assert_eq!(
            constants_in_tir(&f),
            [true, false, true, false, false, false]
        );
        assert_eq!(immediate_operand(&f, &f.bindings[3]), Some(1));
        assert_eq!(immediate_operand(&f, &f.bindings[4]), None);
        assert_eq!(immediate_operand(&f, &f.bindings[5]), Some(0));
    }

    #[test]
    fn operand_one_wins_and_other_ops_lift_scalars() {
        let f = function(
            r#"module @m {
            func @t(%x: tensor<4xf32>, %m: tensor<4xi1>) -> (tensor<f32>, tensor<4xf32>) {
              %p = constant() {value = [1.0], shape = [], dtype = "float32"} : tensor<f32>
              %q = constant() {value = [2.0], shape = [], dtype = "float32"} : tensor<f32>
              %r = constant() {value = [0.0], shape = [], dtype = "float32"} : tensor<f32>
              %s = add(%p, %q) : tensor<f32>
              %w = where(%m, %x, %r) : tensor<4xf32>
              return %s, %w
            }
            }"#,
        );
        // add(%p, %q): only %q becomes an immediate; where lifts its scalar.
        assert_eq!(constants_in_tir(&f), [false, true, false, false, false]);
    }
}
