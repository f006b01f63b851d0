//! The canonical form of a function at one key level, and its byte encoding.
//!
//! Two functions that differ only by value names, function name, the order of independent
//! bindings, the order of parameters or the operand order of commutative ops must encode to
//! the same bytes. We get there in two steps:
//!
//! 1. **Colour refinement** (1-dimensional Weisfeiler-Leman on the dataflow DAG). Every value
//!    starts with a colour from what it is at this level (a parameter and its type, or the
//!    op, attributes, result index and type of its binding). Each round recolours a value
//!    from its own colour, the colours of its operands (as a multiset for commutative ops,
//!    in order otherwise) and the colours of its uses (consumer colour plus operand slot,
//!    as a multiset), until the number of colour classes stops growing.
//! 2. **Canonical order.** Parameters are ordered by colour; bindings by a topological sort
//!    that always takes the ready binding of smallest colour. The encoding then numbers
//!    values in that order and writes every binding with explicit operand numbers, so the
//!    exact dataflow (including sharing) is part of the bytes, not only the colours.
//!
//! Ties left after refinement are values that refinement cannot tell apart. For the DAGs of
//! fused tasks these are automorphic (e.g. the two operands of `add(%p, %q)` with equal
//! types). Ties are split one at a time (individualization, then refinement again, see
//! `individualize`), so that two tie classes that depend on each other are ordered
//! consistently. Refinement can in theory leave ties between non-automorphic values (regular
//! graphs), where two isomorphic functions could then get different keys; a missed cache
//! hit, never a wrong one.

use crate::level::{encode_attrs, encode_type, Level};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use tgc_ir::lowering::{constants_in_tir, layout_free};
use tgc_ir::{Callee, Function, ValueId};

type Color = u64;

/// Folds 64-bit words into one colour. Colours only order values (the key itself is a
/// blake3 digest of the explicit encoding), so a fast, fixed (platform- and run-independent)
/// mixer is enough: a multiply-xorshift fold with a final avalanche (the murmur3 finalizer).
fn mix(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ (parts.len() as u64);
    for &p in parts {
        h = (h ^ p).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    avalanche(h)
}

fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A colour for a byte string (FNV-1a, then the avalanche).
fn hash_bytes(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in b {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    avalanche(h)
}

fn is_commutative(callee: &Callee) -> bool {
    callee.op().is_some_and(|op| op.def().commutative)
}

/// What a callee is, as bytes (op name, or `call` and the callee's name, since a call's
/// meaning depends on the function it calls).
fn callee_bytes(callee: &Callee, out: &mut Vec<u8>) {
    match callee {
        Callee::Op(op) => {
            out.extend_from_slice(b"op:");
            out.extend_from_slice(op.name().as_bytes());
        }
        Callee::Func(name) => {
            out.extend_from_slice(b"call:");
            out.extend_from_slice(name.as_bytes());
        }
    }
    out.push(0);
}

/// The canonical order of a function's parameters and bindings at one level.
pub struct CanonicalOrder {
    /// Indices into `f.params`.
    pub params: Vec<usize>,
    /// Indices into `f.bindings`.
    pub bindings: Vec<usize>,
}

/// Initial colour of each value: what it is at `level`, ignoring its neighbours.
fn initial_colors(f: &Function, level: Level) -> Vec<Color> {
    let mut colors = vec![0u64; f.num_values()];
    let in_tir = constants_in_tir(f);
    let layout_free = layout_free_params(f, level);
    let mut buf = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        buf.clear();
        buf.extend_from_slice(b"param");
        encode_type(f.ty(*p), level, &mut buf);
        if layout_free.contains(&i) {
            buf.extend_from_slice(b"layout_free");
        }
        colors[p.index()] = hash_bytes(&buf);
    }
    for (b, &in_tir) in f.bindings.iter().zip(&in_tir) {
        buf.clear();
        callee_bytes(&b.callee, &mut buf);
        encode_attrs(b, level, in_tir, &mut buf);
        let base = hash_bytes(&buf);
        for (i, r) in b.results.iter().enumerate() {
            buf.clear();
            encode_type(f.ty(*r), level, &mut buf);
            colors[r.index()] = mix(&[base, i as u64, hash_bytes(&buf)]);
        }
    }
    colors
}

fn count_classes(colors: &[Color], live: &[ValueId]) -> usize {
    let mut v: Vec<Color> = live.iter().map(|x| colors[x.index()]).collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// What refinement reads of a function besides the colours, computed once per function.
struct Dataflow {
    /// Parameters, then every binding result.
    live: Vec<ValueId>,
    /// Uses of each value: (binding index, operand slot or u64::MAX for a commutative slot).
    uses: Vec<Vec<(usize, u64)>>,
}

impl Dataflow {
    fn of(f: &Function) -> Dataflow {
        let live = f
            .params
            .iter()
            .copied()
            .chain(f.bindings.iter().flat_map(|b| b.results.iter().copied()))
            .collect();
        let mut uses: Vec<Vec<(usize, u64)>> = vec![Vec::new(); f.num_values()];
        for (bi, b) in f.bindings.iter().enumerate() {
            let comm = is_commutative(&b.callee);
            for (slot, v) in b.operands.iter().enumerate() {
                uses[v.index()].push((bi, if comm { u64::MAX } else { slot as u64 }));
            }
        }
        for (k, r) in f.results.iter().enumerate() {
            // A function result is used by "the return", at its position.
            uses[r.index()].push((usize::MAX, k as u64));
        }
        Dataflow { live, uses }
    }
}

/// Refines `colors` to a stable partition (see the module docs).
fn refine(f: &Function, df: &Dataflow, mut colors: Vec<Color>) -> Vec<Color> {
    let (live, uses) = (&df.live, &df.uses);
    let mut classes = count_classes(&colors, live);
    // Each round can only split classes; at most |values| rounds are ever needed.
    for _ in 0..live.len().max(1) {
        // Colour of each binding = mix of its first result's colour and its operand colours.
        let binding_color: Vec<Color> = f
            .bindings
            .iter()
            .map(|b| {
                let mut ops: Vec<u64> = b.operands.iter().map(|v| colors[v.index()]).collect();
                if is_commutative(&b.callee) {
                    ops.sort_unstable();
                }
                let own = b.results.first().map_or(0, |r| colors[r.index()]);
                let mut parts = vec![own];
                parts.extend(ops);
                mix(&parts)
            })
            .collect();
        let mut next = colors.clone();
        for v in live {
            let mut ctx: Vec<u64> = uses[v.index()]
                .iter()
                .map(|&(bi, slot)| {
                    let consumer = if bi == usize::MAX {
                        u64::MAX
                    } else {
                        binding_color[bi]
                    };
                    mix(&[consumer, slot])
                })
                .collect();
            ctx.sort_unstable();
            let mut parts = vec![colors[v.index()]];
            parts.extend(ctx);
            next[v.index()] = mix(&parts);
        }
        // Forward: a result also sees its binding's (refined) operands.
        for b in &f.bindings {
            let mut ops: Vec<u64> = b.operands.iter().map(|v| next[v.index()]).collect();
            if is_commutative(&b.callee) {
                ops.sort_unstable();
            }
            for r in &b.results {
                let mut parts = vec![next[r.index()]];
                parts.extend(ops.iter().copied());
                next[r.index()] = mix(&parts);
            }
        }
        let n = count_classes(&next, live);
        colors = next;
        if n == classes {
            break;
        }
        classes = n;
    }
    colors
}

/// A colour for every binding of `f` that depends only on the dataflow graph, not on the
/// order of the bindings, their names, the order of parameters or of commutative operands,
/// computed in linear time: one forward sweep folds each binding's ancestors into its
/// colour (what it computes), one backward sweep its descendants (how it is used). Unlike
/// the fixed point of `refine` it may leave ties between bindings that refinement would
/// split, but it costs two passes, not one pass per round, so it serves graphs of any size
/// (the partition pass orders whole models with it).
pub fn dataflow_colors(f: &Function) -> Vec<u64> {
    let mut colors = initial_colors(f, Level::Exact);
    let comm: Vec<bool> = f
        .bindings
        .iter()
        .map(|b| is_commutative(&b.callee))
        .collect();
    let mut parts: Vec<u64> = Vec::new();
    // Forward: bindings are in dataflow order, so every operand is final when it is read.
    for (b, &comm) in f.bindings.iter().zip(&comm) {
        parts.clear();
        parts.extend(b.operands.iter().map(|v| colors[v.index()]));
        if comm {
            parts.sort_unstable();
        }
        for r in &b.results {
            parts.push(colors[r.index()]);
            colors[r.index()] = mix(&parts);
            parts.pop();
        }
    }
    // Backward: a value's uses (consumer colour and operand slot, as a multiset) are final
    // once every later binding has been visited.
    let mut uses: Vec<Vec<u64>> = vec![Vec::new(); f.num_values()];
    for (k, r) in f.results.iter().enumerate() {
        uses[r.index()].push(mix(&[u64::MAX, k as u64]));
    }
    let mut out = vec![0u64; f.bindings.len()];
    for (bi, b) in f.bindings.iter().enumerate().rev() {
        parts.clear();
        for r in &b.results {
            let mut u = std::mem::take(&mut uses[r.index()]);
            u.sort_unstable();
            u.insert(0, colors[r.index()]);
            parts.push(mix(&u));
        }
        let color = mix(&parts);
        out[bi] = color;
        for (slot, v) in b.operands.iter().enumerate() {
            let slot = if comm[bi] { u64::MAX } else { slot as u64 };
            uses[v.index()].push(mix(&[color, slot]));
        }
    }
    out
}

/// Splits the ties refinement leaves: the tied class of smallest colour gives one member
/// (the first in the function) a colour of its own and refinement runs again, until every
/// value has its own colour. Independent tie classes are coupled this way (two equal
/// parameters read by two equal bindings: which binding reads which parameter follows from
/// which parameter was picked), so automorphic ties, whichever member is picked, give the
/// same bytes.
fn individualize(f: &Function, df: &Dataflow, mut colors: Vec<Color>) -> Vec<Color> {
    loop {
        let mut seen: HashMap<Color, ValueId> = HashMap::with_capacity(df.live.len());
        let mut tied: Option<(Color, ValueId)> = None;
        for &v in &df.live {
            let c = colors[v.index()];
            match seen.entry(c) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(v);
                }
                std::collections::hash_map::Entry::Occupied(e) => {
                    if tied.is_none_or(|(t, _)| c < t) {
                        tied = Some((c, *e.get()));
                    }
                }
            }
        }
        let Some((c, v)) = tied else {
            return colors;
        };
        colors[v.index()] = mix(&[c, 0x1d1d_1d1d_1d1d_1d1d]);
        colors = refine(f, df, colors);
    }
}

/// Computes the canonical order of `f` at `level`.
pub fn canonical_order(f: &Function, level: Level) -> CanonicalOrder {
    let df = Dataflow::of(f);
    let colors = individualize(f, &df, refine(f, &df, initial_colors(f, level)));
    let mut params: Vec<usize> = (0..f.params.len()).collect();
    params.sort_by_key(|&i| (colors[f.params[i].index()], i));

    let mut def: HashMap<ValueId, usize> = HashMap::new();
    for (bi, b) in f.bindings.iter().enumerate() {
        for r in &b.results {
            def.insert(*r, bi);
        }
    }
    let key = |bi: usize| -> Color {
        let b = &f.bindings[bi];
        b.results.first().map_or(0, |r| colors[r.index()])
    };
    let mut indegree = vec![0usize; f.bindings.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); f.bindings.len()];
    for (bi, b) in f.bindings.iter().enumerate() {
        let mut deps: Vec<usize> = b
            .operands
            .iter()
            .filter_map(|v| def.get(v).copied())
            .collect();
        deps.sort_unstable();
        deps.dedup();
        indegree[bi] = deps.len();
        for d in deps {
            users[d].push(bi);
        }
    }
    let mut ready: BinaryHeap<Reverse<(Color, usize)>> = (0..f.bindings.len())
        .filter(|&i| indegree[i] == 0)
        .map(|i| Reverse((key(i), i)))
        .collect();
    let mut bindings = Vec::with_capacity(f.bindings.len());
    while let Some(Reverse((_, bi))) = ready.pop() {
        bindings.push(bi);
        for &u in &users[bi] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(Reverse((key(u), u)));
            }
        }
    }
    CanonicalOrder { params, bindings }
}

/// The canonical byte encoding of `f` at `level`.
/// The parameters whose layout the task's schedule chooses (`tgc.layout_free`): part of the
/// exact and structural encodings (another TVM workload), not of the family's ops.
fn layout_free_params(f: &Function, level: Level) -> Vec<usize> {
    if level == Level::Family {
        Vec::new()
    } else {
        layout_free(f)
    }
}

pub fn encode(f: &Function, level: Level) -> Vec<u8> {
    let order = canonical_order(f, level);
    let in_tir = constants_in_tir(f);
    let mut number: HashMap<ValueId, u32> = HashMap::with_capacity(f.num_values());
    let mut out = Vec::with_capacity(64 * (f.bindings.len() + 1));
    out.extend_from_slice(level.tag());
    out.extend_from_slice(&(f.params.len() as u32).to_le_bytes());
    for &pi in &order.params {
        let p = f.params[pi];
        number.insert(p, number.len() as u32);
        encode_type(f.ty(p), level, &mut out);
    }
    out.extend_from_slice(&(f.bindings.len() as u32).to_le_bytes());
    for &bi in &order.bindings {
        let b = &f.bindings[bi];
        callee_bytes(&b.callee, &mut out);
        encode_attrs(b, level, in_tir[bi], &mut out);
        let mut ops: Vec<u32> = b
            .operands
            .iter()
            .map(|v| number.get(v).copied().unwrap_or(u32::MAX))
            .collect();
        if is_commutative(&b.callee) {
            ops.sort_unstable();
        }
        out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
        for o in ops {
            out.extend_from_slice(&o.to_le_bytes());
        }
        out.extend_from_slice(&(b.results.len() as u32).to_le_bytes());
        for r in &b.results {
            number.insert(*r, number.len() as u32);
            encode_type(f.ty(*r), level, &mut out);
        }
    }
    out.extend_from_slice(&(f.results.len() as u32).to_le_bytes());
    for r in &f.results {
        out.extend_from_slice(&number.get(r).copied().unwrap_or(u32::MAX).to_le_bytes());
    }
    // Only a task with layout-free parameters gets these bytes: every other key is unchanged.
    let layout_free = layout_free_params(f, level);
    if !layout_free.is_empty() {
        out.extend_from_slice(b"layout_free");
        out.extend_from_slice(&(layout_free.len() as u32).to_le_bytes());
        let mut positions: Vec<u32> = layout_free.iter().map(|&i| number[&f.params[i]]).collect();
        positions.sort_unstable();
        for p in positions {
            out.extend_from_slice(&p.to_le_bytes());
        }
    }
    out
}
