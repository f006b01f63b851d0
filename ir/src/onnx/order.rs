//! Binding order as TVM's ONNX frontend produces it.
//!
//! TVM's `relax.frontend.onnx.from_onnx` does not emit an op when it converts the ONNX node:
//! it builds the node's expression and only *normalizes* it, which binds the nested calls
//! inside it but leaves the node's own call unbound. That call gets its binding when a later
//! node first uses it as an argument (arguments are normalized left to right), or at the end
//! if it is a graph output; a result nobody uses is never emitted. So a residual `Add(a, b)`
//! emits the producer of `a` before the producer of `b`, whatever the ONNX node order was.
//!
//! The order matters beyond looks: fusion walks bindings in order, and when two convs feed
//! one `add` only the first one visited fuses with it. Importing in TVM's order makes our
//! tasks the same as TVM's (see the agreement test in tests/tvm_agreement.rs).

use crate::module::{Binding, Function, ValueId};
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq)]
enum State {
    NotYet,
    Pending,
    Emitted,
}

struct Emitter<'a> {
    bindings: &'a [Binding],
    def: HashMap<ValueId, usize>,
    state: Vec<State>,
    order: Vec<usize>,
}

impl Emitter<'_> {
    /// Makes sure the binding defining `v` is emitted: a pending root of an earlier node is
    /// bound now; a not-yet-emitted binding of the current node is bound after its operands.
    fn visit(&mut self, v: ValueId) {
        let Some(&b) = self.def.get(&v) else { return };
        match self.state[b] {
            State::Emitted => {}
            State::Pending => self.emit(b),
            State::NotYet => {
                let operands = self.bindings[b].operands.clone();
                for o in operands {
                    self.visit(o);
                }
                self.emit(b);
            }
        }
    }

    fn emit(&mut self, b: usize) {
        self.state[b] = State::Emitted;
        self.order.push(b);
    }
}

/// Reorders `f`'s bindings as TVM would emit them. `node_of[i]` is the ONNX node that
/// produced binding `i` (bindings are in node order). Bindings that TVM would never emit
/// (results no later node and no graph output uses) are dropped.
pub(crate) fn relax_emission_order(f: &mut Function, node_of: &[usize]) {
    let bindings = std::mem::take(&mut f.bindings);
    let mut def = HashMap::new();
    for (i, b) in bindings.iter().enumerate() {
        for r in &b.results {
            def.insert(*r, i);
        }
    }
    // Which bindings have a result used by another node's binding or by the graph outputs.
    let mut used_outside = vec![false; bindings.len()];
    for (i, b) in bindings.iter().enumerate() {
        for o in &b.operands {
            if let Some(&d) = def.get(o) {
                if node_of[d] != node_of[i] {
                    used_outside[d] = true;
                }
            }
        }
    }
    for r in &f.results {
        if let Some(&d) = def.get(r) {
            used_outside[d] = true;
        }
    }
    let mut e = Emitter {
        bindings: &bindings,
        def,
        state: vec![State::NotYet; bindings.len()],
        order: Vec::new(),
    };
    let mut start = 0;
    while start < bindings.len() {
        let node = node_of[start];
        let end = (start..bindings.len())
            .find(|&i| node_of[i] != node)
            .unwrap_or(bindings.len());
        let outward: Vec<usize> = (start..end).filter(|&i| used_outside[i]).collect();
        match outward.as_slice() {
            // One single-result binding carries the node's value: bind what it needs now,
            // leave it unbound until its first use.
            [root] if bindings[*root].results.len() == 1 => {
                for o in bindings[*root].operands.clone() {
                    e.visit(o);
                }
                e.state[*root] = State::Pending;
            }
            // Tuple-producing nodes are bound at once (TVM emits their TupleGetItems).
            _ => {
                for i in outward {
                    e.visit(bindings[i].results[0]);
                }
            }
        }
        start = end;
    }
    for r in f.results.clone() {
        e.visit(r);
    }
    let order = e.order;
    let mut slots: Vec<Option<Binding>> = bindings.into_iter().map(Some).collect();
    f.bindings = order.into_iter().filter_map(|i| slots[i].take()).collect();
}
