//! Common-subexpression elimination: a binding that applies the same callee with the same
//! attributes to the same operands as an earlier binding is replaced by the earlier one.
//!
//! Operands of commutative ops (`add`, `multiply`, ...) are compared as a multiset, so
//! `add(%a, %b)` and `add(%b, %a)` are one expression. Ops are pure, so any two such bindings
//! compute the same values. Constants with equal attributes merge too.

use crate::pass::{Pass, PassError, PassInfo, PassOptions};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use tgc_ir::attr::attrs_same;
use tgc_ir::{Attr, Binding, Callee, Function, Module, ValueId};

pub static INFO: PassInfo = PassInfo {
    name: "cse",
    summary: "Merge bindings that compute the same expression (commutative operands unordered)",
    options: &[],
    create: |_: &PassOptions| Ok(Box::new(CommonSubexpressionElimination)),
};

pub struct CommonSubexpressionElimination;

impl Pass for CommonSubexpressionElimination {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for f in module.functions.values_mut() {
            eliminate_common_subexpressions(f);
        }
        Ok(())
    }
}

/// The operands of `b` in the order that identifies the expression: sorted for commutative ops.
fn expression_operands(b: &Binding) -> SmallVec<[ValueId; 4]> {
    let mut ops = b.operands.clone();
    if b.callee.op().is_some_and(|op| op.def().commutative) {
        ops.sort_unstable();
    }
    ops
}

fn hash_attr<H: Hasher>(a: &Attr, h: &mut H) {
    std::mem::discriminant(a).hash(h);
    match a {
        Attr::Int(v) => v.hash(h),
        // NaNs compare equal under `same_as`, so they must hash alike.
        Attr::Float(v) => (if v.is_nan() { f64::NAN } else { *v }).to_bits().hash(h),
        Attr::Str(s) => s.hash(h),
        Attr::Bool(b) => b.hash(h),
        Attr::List(l) => {
            l.len().hash(h);
            l.iter().for_each(|x| hash_attr(x, h));
        }
        Attr::Dict(d) => {
            for (k, v) in d {
                k.hash(h);
                hash_attr(v, h);
            }
        }
    }
}

fn expression_hash(callee: &Callee, operands: &[ValueId], b: &Binding) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    callee.hash(&mut h);
    operands.hash(&mut h);
    for (k, v) in &b.attrs {
        k.hash(&mut h);
        hash_attr(v, &mut h);
    }
    h.finish()
}

/// Merges duplicate bindings of `f`; returns how many were removed.
pub fn eliminate_common_subexpressions(f: &mut Function) -> usize {
    // replacement[v] = the value that stands for v from now on.
    let mut replacement: Vec<ValueId> = (0..f.num_values() as u32).map(ValueId).collect();
    let mut seen: HashMap<u64, SmallVec<[usize; 1]>> = HashMap::new();
    let mut kept: Vec<Binding> = Vec::with_capacity(f.bindings.len());
    let mut removed = 0;
    for mut b in std::mem::take(&mut f.bindings) {
        for o in b.operands.iter_mut() {
            *o = replacement[o.index()];
        }
        let key_ops = expression_operands(&b);
        let hash = expression_hash(&b.callee, &key_ops, &b);
        let earlier = seen.get(&hash).and_then(|candidates| {
            candidates.iter().copied().find(|&i| {
                let e: &Binding = &kept[i];
                e.callee == b.callee
                    && e.results.len() == b.results.len()
                    && expression_operands(e) == key_ops
                    && attrs_same(&e.attrs, &b.attrs)
                    && e.results
                        .iter()
                        .zip(&b.results)
                        .all(|(x, y)| f.ty(*x) == f.ty(*y))
            })
        });
        match earlier {
            Some(i) => {
                for (dup, orig) in b.results.iter().zip(&kept[i].results) {
                    replacement[dup.index()] = *orig;
                }
                removed += 1;
            }
            None => {
                seen.entry(hash).or_default().push(kept.len());
                kept.push(b);
            }
        }
    }
    f.bindings = kept;
    for r in f.results.iter_mut() {
        *r = replacement[r.index()];
    }
    removed
}
