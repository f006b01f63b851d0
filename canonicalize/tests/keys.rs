//! Property tests of the keys: random rewrites that must keep all three keys, random
//! mutations that must change them, and agreement with a graph-isomorphism oracle (petgraph's
//! VF2 on the labelled dataflow graph).

use petgraph::algo::is_isomorphic_matching;
use petgraph::graph::DiGraph;
use proptest::prelude::*;
use std::collections::HashMap;
use tgc_canonicalize::{key, Level, TaskKeys};
use tgc_ir::{Attr, Attrs, Callee, DType, Function, TensorType, ValueId};

const UNARY: &[&str] = &["nn.relu", "sigmoid", "exp", "tanh", "negative"];
const BINARY: &[&str] = &["add", "multiply", "subtract", "divide", "maximum"];

/// A recipe for a task: data parameters of one shape, one conv weight, and bindings that
/// refer to earlier values by index (parameters first).
#[derive(Clone, Debug)]
struct Recipe {
    channels: i64,
    size: i64,
    dtype: DType,
    data_params: usize,
    /// (kind, operand indices); kind < UNARY.len() is unary, then binary, then conv2d.
    steps: Vec<(usize, usize, usize)>,
    outputs: Vec<usize>,
}

fn recipe() -> impl Strategy<Value = Recipe> {
    (
        1usize..4,
        prop::collection::vec(
            (
                0usize..UNARY.len() + BINARY.len() + 1,
                any::<usize>(),
                any::<usize>(),
            ),
            1..10,
        ),
    )
        .prop_flat_map(|(data_params, steps)| {
            let values = data_params + steps.len();
            (
                Just(data_params),
                Just(steps),
                prop::collection::vec(data_params..values, 1..3),
                prop_oneof![Just(4i64), Just(8)],
                prop_oneof![Just(8i64), Just(16)],
            )
        })
        .prop_map(|(data_params, steps, outputs, channels, size)| {
            let mut fixed = Vec::new();
            for (i, (kind, a, b)) in steps.into_iter().enumerate() {
                let available = data_params + i;
                fixed.push((kind, a % available, b % available));
            }
            let mut outputs = outputs;
            outputs.sort_unstable();
            outputs.dedup();
            Recipe {
                channels,
                size,
                dtype: DType::F32,
                data_params,
                steps: fixed,
                outputs,
            }
        })
}

/// How to write the same task differently.
#[derive(Clone, Debug)]
struct Rewrite {
    param_order_seed: u64,
    binding_order_seed: u64,
    swap_commutative: bool,
    name_prefix: &'static str,
}

fn rewrite() -> impl Strategy<Value = Rewrite> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<bool>(),
        prop_oneof![Just("v"), Just("renamed_"), Just("x.")],
    )
        .prop_map(
            |(param_order_seed, binding_order_seed, swap_commutative, name_prefix)| Rewrite {
                param_order_seed,
                binding_order_seed,
                swap_commutative,
                name_prefix,
            },
        )
}

fn conv_attrs() -> Attrs {
    let mut a = Attrs::new();
    a.insert("padding".into(), Attr::ints([1, 1, 1, 1]));
    a
}

/// A deterministic shuffle (xorshift) so that a seed picks one order.
fn shuffled<T>(mut v: Vec<T>, mut seed: u64) -> Vec<T> {
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    v
}

/// Builds the function of `r`, written as `w` says (or plainly for `None`).
fn build(r: &Recipe, w: Option<&Rewrite>) -> Function {
    let prefix = w.map_or("", |w| w.name_prefix);
    let mut f = Function::new(format!("{prefix}task"));
    f.attrs.insert("Primitive".into(), Attr::Bool(true));
    let data_ty = TensorType::new(r.dtype, [1, r.channels, r.size, r.size]);
    let weight_ty = TensorType::new(r.dtype, [r.channels, r.channels, 3, 3]);
    // Parameters: data params 0..n and the weight (index n), in a possibly shuffled order.
    let order: Vec<usize> = match w {
        Some(w) => shuffled((0..=r.data_params).collect(), w.param_order_seed | 1),
        None => (0..=r.data_params).collect(),
    };
    let mut params: HashMap<usize, ValueId> = HashMap::new();
    for i in order {
        let ty = if i == r.data_params {
            weight_ty.clone()
        } else {
            data_ty.clone()
        };
        params.insert(i, f.add_param(Some(&format!("{prefix}p{i}")), ty));
    }
    // Step i defines value data_params + i. Emit the steps in a random topological order.
    let n = r.steps.len();
    let deps = |i: usize| -> Vec<usize> {
        let (kind, a, b) = r.steps[i];
        let mut d = vec![a];
        if kind >= UNARY.len() {
            d.push(b);
        }
        d.into_iter()
            .filter(|&v| v >= r.data_params)
            .map(|v| v - r.data_params)
            .collect()
    };
    let mut emitted = vec![false; n];
    let mut order = Vec::new();
    let mut seed = w.map_or(0, |w| w.binding_order_seed) | 1;
    while order.len() < n {
        let ready: Vec<usize> = (0..n)
            .filter(|&i| !emitted[i] && deps(i).iter().all(|&d| emitted[d]))
            .collect();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let pick = if w.is_some() {
            ready[(seed % ready.len() as u64) as usize]
        } else {
            ready[0]
        };
        emitted[pick] = true;
        order.push(pick);
    }
    let mut values: HashMap<usize, ValueId> = HashMap::new();
    let value = |values: &HashMap<usize, ValueId>, i: usize| -> ValueId {
        if i < r.data_params {
            params[&i]
        } else {
            values[&(i - r.data_params)]
        }
    };
    for i in order {
        let (kind, a, b) = r.steps[i];
        let va = value(&values, a);
        let v = if kind < UNARY.len() {
            f.push_op1(UNARY[kind], &[va], Attrs::new())
        } else if kind < UNARY.len() + BINARY.len() {
            let op = BINARY[kind - UNARY.len()];
            let commutative = matches!(op, "add" | "multiply" | "maximum");
            let swap = commutative && w.is_some_and(|w| w.swap_commutative);
            let vb = value(&values, b);
            let operands = if swap { [vb, va] } else { [va, vb] };
            f.push_op1(op, &operands, Attrs::new())
        } else {
            f.push_op1("nn.conv2d", &[va, params[&r.data_params]], conv_attrs())
        }
        .expect("generated binding type-checks");
        // Name the value as the rewrite says.
        values.insert(i, v);
    }
    f.results = r.outputs.iter().map(|&o| value(&values, o)).collect();
    f
}

/// The labelled dataflow graph of a function, for the isomorphism oracle.
fn graph(f: &Function) -> DiGraph<String, String> {
    let mut g = DiGraph::new();
    let mut node = HashMap::new();
    for p in &f.params {
        node.insert(*p, g.add_node(format!("param {}", f.ty(*p))));
    }
    for b in &f.bindings {
        let Callee::Op(op) = &b.callee else {
            panic!("no calls in generated tasks")
        };
        let mut keys: Vec<_> = op.with_defaults(&b.attrs).into_iter().collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        let n = g.add_node(format!("{} {:?} {}", op.name(), keys, f.ty(b.results[0])));
        // VF2 does not take multigraphs: the edges from one operand (`add(%x, %x)`) become
        // one edge labelled with all their slots.
        let mut slots: Vec<(ValueId, Vec<String>)> = Vec::new();
        for (slot, v) in b.operands.iter().enumerate() {
            let label = if op.def().commutative {
                "c".to_string()
            } else {
                slot.to_string()
            };
            match slots.iter_mut().find(|(u, _)| u == v) {
                Some((_, labels)) => labels.push(label),
                None => slots.push((*v, vec![label])),
            }
        }
        for (v, mut labels) in slots {
            labels.sort();
            g.add_edge(node[&v], n, labels.join(","));
        }
        node.insert(b.results[0], n);
    }
    for (k, r) in f.results.iter().enumerate() {
        let out = g.add_node(format!("result {k}"));
        g.add_edge(node[r], out, "r".to_string());
    }
    g
}

fn isomorphic(a: &Function, b: &Function) -> bool {
    is_isomorphic_matching(&graph(a), &graph(b), |x, y| x == y, |x, y| x == y)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rewrites_keep_all_keys(r in recipe(), w in rewrite()) {
        let plain = build(&r, None);
        let rewritten = build(&r, Some(&w));
        prop_assert_eq!(TaskKeys::of(&plain), TaskKeys::of(&rewritten));
    }

    #[test]
    fn changing_an_op_changes_every_key(r in recipe(), step in any::<prop::sample::Index>()) {
        let mut m = r.clone();
        let i = step.index(m.steps.len());
        let (kind, a, b) = m.steps[i];
        // Swap within the same arity class so the function still type-checks.
        let new_kind = if kind < UNARY.len() {
            (kind + 1) % UNARY.len()
        } else if kind < UNARY.len() + BINARY.len() {
            UNARY.len() + (kind - UNARY.len() + 1) % BINARY.len()
        } else {
            0
        };
        m.steps[i] = (new_kind, a, b);
        let (f, g) = (build(&r, None), build(&m, None));
        prop_assume!(!isomorphic(&f, &g));
        // Replacing one op by another changes the multiset of op names, so even the family
        // key, which sees nothing else, must change.
        for level in Level::ALL {
            prop_assert_ne!(key(&f, level), key(&g, level), "level {:?}", level);
        }
    }

    #[test]
    fn changing_dataflow_changes_exact_and_structural_keys(r in recipe(), step in any::<prop::sample::Index>(), to in any::<prop::sample::Index>()) {
        let mut m = r.clone();
        let i = step.index(m.steps.len());
        let (kind, _, b) = m.steps[i];
        m.steps[i] = (kind, to.index(m.data_params + i), b);
        let (f, g) = (build(&r, None), build(&m, None));
        prop_assume!(!isomorphic(&f, &g));
        prop_assert_ne!(key(&f, Level::Exact), key(&g, Level::Exact));
        prop_assert_ne!(key(&f, Level::Structural), key(&g, Level::Structural));
    }

    #[test]
    fn changing_shapes_changes_only_the_exact_key(r in recipe()) {
        let mut m = r.clone();
        m.size *= 2;
        m.channels += 4;
        let (f, g) = (build(&r, None), build(&m, None));
        prop_assert_ne!(key(&f, Level::Exact), key(&g, Level::Exact));
        prop_assert_eq!(key(&f, Level::Structural), key(&g, Level::Structural));
        prop_assert_eq!(key(&f, Level::Family), key(&g, Level::Family));
    }

    #[test]
    fn changing_dtype_changes_exact_and_structural_keys(r in recipe()) {
        let mut m = r.clone();
        m.dtype = DType::F16;
        let (f, g) = (build(&r, None), build(&m, None));
        prop_assert_ne!(key(&f, Level::Exact), key(&g, Level::Exact));
        prop_assert_ne!(key(&f, Level::Structural), key(&g, Level::Structural));
        prop_assert_eq!(key(&f, Level::Family), key(&g, Level::Family));
    }

    /// Equal exact keys exactly when the oracle finds the two functions isomorphic.
    #[test]
    fn exact_keys_agree_with_isomorphism(a in recipe(), b in recipe()) {
        let (f, g) = (build(&a, None), build(&b, None));
        prop_assert_eq!(key(&f, Level::Exact) == key(&g, Level::Exact), isomorphic(&f, &g));
    }
}

#[test]
fn changing_an_attribute_changes_exact_and_structural_keys() {
    let r = Recipe {
        channels: 4,
        size: 8,
        dtype: DType::F32,
        data_params: 1,
        steps: vec![(10, 0, 0)],
        outputs: vec![1],
    };
    let f = build(&r, None);
    let mut g = f.clone();
    g.bindings[0]
        .attrs
        .insert("dilation".into(), Attr::ints([2, 2]));
    g.bindings[0]
        .attrs
        .insert("padding".into(), Attr::ints([2, 2, 2, 2]));
    assert_ne!(key(&f, Level::Exact), key(&g, Level::Exact));
    assert_ne!(key(&f, Level::Structural), key(&g, Level::Structural));
    assert_eq!(key(&f, Level::Family), key(&g, Level::Family));
}

#[test]
fn default_attributes_are_the_same_as_absent_ones() {
    let r = Recipe {
        channels: 4,
        size: 8,
        dtype: DType::F32,
        data_params: 1,
        steps: vec![(10, 0, 0)],
        outputs: vec![1],
    };
    let f = build(&r, None);
    let mut g = f.clone();
    g.bindings[0]
        .attrs
        .insert("strides".into(), Attr::ints([1, 1]));
    g.bindings[0].attrs.insert("groups".into(), Attr::Int(1));
    assert_eq!(TaskKeys::of(&f), TaskKeys::of(&g));
}

#[test]
fn keys_print_and_parse() {
    let r = Recipe {
        channels: 4,
        size: 8,
        dtype: DType::F32,
        data_params: 2,
        steps: vec![(5, 0, 1)],
        outputs: vec![2],
    };
    let k = key(&build(&r, None), Level::Exact);
    let text = k.to_string();
    assert!(text.starts_with("tgc2:") && text.len() == 5 + 32, "{text}");
    assert_eq!(text.parse::<tgc_canonicalize::TaskKey>().unwrap(), k);
    assert!("tgc2:00".parse::<tgc_canonicalize::TaskKey>().is_err());
    assert!("tgc2:zz".parse::<tgc_canonicalize::TaskKey>().is_err());
    let old = format!("tgc1:{}", &text[5..]);
    assert!(old.parse::<tgc_canonicalize::TaskKey>().is_err());
    assert!(tgc_canonicalize::TaskKey::is_older_encoding(&old));
    assert!(!tgc_canonicalize::TaskKey::is_older_encoding(&text));
    assert!(!tgc_canonicalize::TaskKey::is_older_encoding("tgc1:00"));
}
