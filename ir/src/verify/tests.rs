//! One test per kind of error the verifier reports, each on a function built by hand with the
//! `Function` API, plus valid modules and the verifier's speed on a large module.

// `&[x.clone()]` reads better than `std::slice::from_ref(&x)` in a table of cases.
#![allow(clippy::cloned_ref_to_slice_refs)]

use super::*;
use crate::attr::Attr;
use crate::dtype::DType;
use crate::ops::Op;

fn f32(shape: &[i64]) -> TensorType {
    TensorType::new(DType::F32, shape.iter().copied())
}

fn attrs(list: &[(&str, Attr)]) -> Attrs {
    list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// Appends an op binding with the inferred result types, as a correct pass would.
fn op(f: &mut Function, name: &str, operands: &[ValueId], a: Attrs) -> SmallVec<[ValueId; 1]> {
    let op = Op::lookup(name).unwrap();
    let types: Vec<TensorType> = operands.iter().map(|&v| f.ty(v).clone()).collect();
    let refs: Vec<&TensorType> = types.iter().collect();
    let results = op.infer(&refs, &a).unwrap_or_else(|e| panic!("{name}: {e}"));
    f.push_binding(Callee::Op(op), operands, a, results)
}

/// Appends a binding as given, with result values of the given types.
fn raw(f: &mut Function, callee: Callee, operands: &[ValueId], a: Attrs, results: &[TensorType]) {
    f.push_binding(callee, operands, a, results.to_vec());
}

fn callee(name: &str) -> Callee {
    Callee::Op(Op::lookup(name).unwrap())
}

fn module(functions: Vec<Function>) -> Module {
    let mut m = Module::new("test");
    for f in functions {
        m.add_function(f).unwrap();
    }
    m
}

/// `@fused(x: 1x64x56x56, w: 64x64x3x3) -> relu(conv(x, w))`.
fn fused_conv_relu() -> Function {
    let mut f = Function::new("fused");
    let x = f.add_param(Some("x"), f32(&[1, 64, 56, 56]));
    let w = f.add_param(Some("w"), f32(&[64, 64, 3, 3]));
    let c = op(&mut f, "nn.conv2d", &[x, w], attrs(&[("padding", Attr::ints([1]))]))[0];
    let r = op(&mut f, "nn.relu", &[c], Attrs::new())[0];
    f.results.push(r);
    f
}

/// A ResNet-like `@main`: stem conv, pool, a call of `@fused`, a split and a concat.
fn main_calling_fused() -> Function {
    let mut f = Function::new("main");
    let x = f.add_param(Some("data"), f32(&[1, 3, 224, 224]));
    let w = f.add_param(Some("w0"), f32(&[64, 3, 7, 7]));
    let w1 = f.add_param(Some("w1"), f32(&[64, 64, 3, 3]));
    let stem = [("strides", Attr::ints([2, 2])), ("padding", Attr::ints([3]))];
    let c = op(&mut f, "nn.conv2d", &[x, w], attrs(&stem))[0];
    let pool = [
        ("pool_size", Attr::ints([3])),
        ("strides", Attr::ints([2])),
        ("padding", Attr::ints([1])),
    ];
    let p = op(&mut f, "nn.max_pool2d", &[c], attrs(&pool))[0];
    let fused = fused_conv_relu().result_types();
    f.push_binding(Callee::Func("fused".into()), &[p, w1], Attrs::new(), fused);
    let y = f.bindings.last().unwrap().results[0];
    let halves = op(
        &mut f,
        "split",
        &[y],
        attrs(&[("indices_or_sections", Attr::Int(2)), ("axis", Attr::Int(1))]),
    );
    let cat = op(&mut f, "concat", &[halves[1], halves[0]], attrs(&[("axis", Attr::Int(1))]))[0];
    f.results.push(cat);
    f
}

fn problem(r: Result<(), VerifyError>) -> Problem {
    *r.expect_err("verification should fail").problem
}

#[test]
fn valid_modules_pass() {
    let m = module(vec![fused_conv_relu(), main_calling_fused()]);
    assert_eq!(verify_module(&m), Ok(()));
    // Defaults may be spelled out or left implicit.
    let mut f = Function::new("explicit");
    let x = f.add_param(None, f32(&[2, 3]));
    let s = op(&mut f, "sum", &[x], Op::lookup("sum").unwrap().with_defaults(&Attrs::new()))[0];
    f.results.push(s);
    assert_eq!(verify_module(&module(vec![f])), Ok(()));
}

#[test]
fn result_type_mismatch_names_function_binding_and_types() {
    let mut f = Function::new("main");
    let x = f.add_param(Some("x"), f32(&[1, 3, 224, 224]));
    let w = f.add_param(Some("w"), f32(&[64, 3, 7, 7]));
    let stem = attrs(&[("strides", Attr::ints([2, 2])), ("padding", Attr::ints([3]))]);
    let r = f.new_value_named("3", f32(&[1, 64, 56, 56])).unwrap();
    f.push(Binding {
        results: [r].into_iter().collect(),
        callee: callee("nn.conv2d"),
        operands: [x, w].into_iter().collect(),
        attrs: stem,
    });
    f.results.push(r);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "@main: %3 = nn.conv2d: result type tensor<1x64x56x56xf32> does not match inferred tensor<1x64x112x112xf32>"
    );
    assert_eq!(e.binding, Some(0));
    assert_eq!(e.function, "main");
}

#[test]
fn multi_result_mismatch_names_the_result() {
    let mut f = Function::new("main");
    let x = f.add_param(Some("x"), f32(&[4]));
    let a = [("indices_or_sections", Attr::Int(2))];
    raw(&mut f, callee("split"), &[x], attrs(&a), &[f32(&[2]), f32(&[3])]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "@main: %0 = split: result %1 type tensor<3xf32> does not match inferred tensor<2xf32>"
    );
}

#[test]
fn result_count_must_match() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[6]));
    let a = [("indices_or_sections", Attr::Int(3))];
    raw(&mut f, callee("split"), &[x], attrs(&a), &[f32(&[2]), f32(&[2])]);
    assert_eq!(
        problem(verify_module(&module(vec![f]))),
        Problem::ResultCount { expected: 3, got: 2 }
    );
}

#[test]
fn operands_out_of_range_are_reported() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2]));
    raw(&mut f, callee("add"), &[x, ValueId(99)], Attrs::new(), &[f32(&[2])]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(*e.problem, Problem::ValueOutOfRange { id: 99, count: 2 });
    assert_eq!(
        e.to_string(),
        "@main: %1 = add: value #99 is out of range (the function has 2 values)"
    );
}

#[test]
fn use_before_definition() {
    let mut f = Function::new("main");
    let x = f.add_param(Some("x"), f32(&[2]));
    let later = f.new_value(Some("later"), f32(&[2]));
    raw(&mut f, callee("add"), &[x, later], Attrs::new(), &[f32(&[2])]);
    f.push(Binding {
        results: [later].into_iter().collect(),
        callee: callee("nn.relu"),
        operands: [x].into_iter().collect(),
        attrs: Attrs::new(),
    });
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(e.to_string(), "@main: %0 = add: operand 1 %later is used before it is defined");
}

#[test]
fn values_are_defined_once() {
    // Two bindings defining the same value.
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2]));
    let r = op(&mut f, "nn.relu", &[x], Attrs::new())[0];
    f.push(f.bindings[0].clone());
    f.results.push(r);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!((e.binding, *e.problem), (Some(1), Problem::Redefined("1".into())));

    // A parameter listed twice.
    let mut g = Function::new("g");
    let x = g.add_param(Some("x"), f32(&[2]));
    g.params.push(x);
    let e = verify_module(&module(vec![g])).unwrap_err();
    assert_eq!(e.to_string(), "@g: %x is defined more than once");

    // A binding redefining a parameter.
    let mut h = Function::new("h");
    let x = h.add_param(Some("x"), f32(&[2]));
    h.push(Binding {
        results: [x].into_iter().collect(),
        callee: callee("nn.relu"),
        operands: [x].into_iter().collect(),
        attrs: Attrs::new(),
    });
    assert_eq!(problem(verify_module(&module(vec![h]))), Problem::Redefined("x".into()));
}

#[test]
fn results_must_be_defined() {
    let mut f = Function::new("main");
    f.add_param(None, f32(&[2]));
    let dangling = f.new_value(Some("dangling"), f32(&[2]));
    f.results.push(dangling);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(e.to_string(), "@main: result %dangling is not defined");
    let mut g = Function::new("g");
    g.results.push(ValueId(7));
    assert_eq!(
        problem(verify_module(&module(vec![g]))),
        Problem::ValueOutOfRange { id: 7, count: 0 }
    );
}

#[test]
fn parameters_with_negative_extents() {
    let mut f = Function::new("main");
    let x = f.add_param(Some("x"), f32(&[2, -1]));
    f.results.push(x);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(e.to_string(), "@main: parameter %x has a negative extent: tensor<2x-1xf32>");
}

#[test]
fn op_arity() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2]));
    raw(&mut f, callee("add"), &[x], Attrs::new(), &[f32(&[2])]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(e.to_string(), "@main: %1 = add: takes 2 operands, got 1");
    let mut g = Function::new("g");
    let x = g.add_param(None, f32(&[2]));
    raw(&mut g, callee("concat"), &[], Attrs::new(), &[f32(&[2])]);
    g.results.push(x);
    assert_eq!(
        problem(verify_module(&module(vec![g]))),
        Problem::Arity { expected: crate::ops::Arity::at_least(1), got: 0 }
    );
}

#[test]
fn attribute_schema() {
    let check = |a: Attrs| {
        let mut f = Function::new("main");
        let x = f.add_param(None, f32(&[1, 3, 8, 8]));
        raw(&mut f, callee("nn.max_pool2d"), &[x], a, &[f32(&[1, 3, 4, 4])]);
        verify_module(&module(vec![f]))
    };
    let pool = || vec![("pool_size", Attr::ints([2])), ("strides", Attr::ints([2]))];
    assert_eq!(check(attrs(&pool())), Ok(()));

    let mut unknown = pool();
    unknown.push(("count_include_pad", Attr::Bool(true)));
    let e = check(attrs(&unknown)).unwrap_err();
    assert_eq!(e.to_string(), "@main: %1 = nn.max_pool2d: unknown attribute 'count_include_pad'");

    let mut kind = pool();
    kind.push(("ceil_mode", Attr::Int(1)));
    let e = check(attrs(&kind)).unwrap_err();
    assert_eq!(e.to_string(), "@main: %1 = nn.max_pool2d: attribute 'ceil_mode' must be bool");

    let e = check(attrs(&[("strides", Attr::ints([2]))])).unwrap_err();
    assert_eq!(*e.problem, Problem::Attr(AttrProblem::Missing("pool_size".into())));

    // IntOrIntList accepts both forms and nothing else.
    let split = |v: Attr| {
        let mut f = Function::new("main");
        let x = f.add_param(None, f32(&[4]));
        op(&mut f, "split", &[x], attrs(&[("indices_or_sections", v)]));
        verify_module(&module(vec![f]))
    };
    assert_eq!(split(Attr::Int(2)), Ok(()));
    assert_eq!(split(Attr::ints([1, 3])), Ok(()));
}

#[test]
fn inference_failures_are_reported_with_the_message() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[1, 4, 8, 8]));
    let w = f.add_param(None, f32(&[8, 3, 3, 3]));
    raw(&mut f, callee("nn.conv2d"), &[x, w], Attrs::new(), &[f32(&[1, 8, 6, 6])]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "@main: %2 = nn.conv2d: data channels (4) must equal weight input channels (3) times groups (1)"
    );
    assert!(matches!(*e.problem, Problem::Infer(_)));
}

#[test]
fn calls_must_name_existing_functions() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2]));
    raw(&mut f, Callee::Func("missing".into()), &[x], Attrs::new(), &[f32(&[2])]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(e.to_string(), "@main: %1 = call @missing: calls unknown function @missing");
}

#[test]
fn calls_must_match_the_callee_signature() {
    let sig = fused_conv_relu();
    let (x_ty, w_ty, out) =
        (sig.param_types()[0].clone(), sig.param_types()[1].clone(), sig.result_types()[0].clone());
    let call = |operand_types: &[TensorType], results: &[TensorType]| {
        let mut f = Function::new("main");
        let ops: Vec<ValueId> =
            operand_types.iter().map(|t| f.add_param(None, t.clone())).collect();
        raw(&mut f, Callee::Func("fused".into()), &ops, Attrs::new(), results);
        verify_module(&module(vec![fused_conv_relu(), f]))
    };
    assert_eq!(call(&[x_ty.clone(), w_ty.clone()], &[out.clone()]), Ok(()));
    assert_eq!(
        problem(call(&[x_ty.clone()], &[out.clone()])),
        Problem::CallArity { expected: 2, got: 1 }
    );
    let e = call(&[x_ty.clone(), f32(&[64, 64, 1, 1])], &[out.clone()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "@main: %2 = call @fused: operand 1 has type tensor<64x64x1x1xf32>, the callee expects tensor<64x64x3x3xf32>"
    );
    assert_eq!(
        problem(call(&[x_ty.clone(), w_ty.clone()], &[out.clone(), out.clone()])),
        Problem::CallResultCount { expected: 1, got: 2 }
    );
    assert_eq!(
        problem(call(&[x_ty, w_ty], &[f32(&[1])])),
        Problem::CallResultType { index: 0, expected: out, declared: f32(&[1]) }
    );
}

#[test]
fn malformed_callee_signatures_do_not_panic() {
    let mut callee_fn = Function::new("broken");
    callee_fn.params.push(ValueId(5));
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2]));
    raw(&mut f, Callee::Func("broken".into()), &[x], Attrs::new(), &[]);
    // `@main` is checked first; `@broken` itself would be reported after it.
    let m = module(vec![f, callee_fn]);
    assert_eq!(problem(verify_module(&m)), Problem::MalformedCallee(5));
}

#[test]
fn recursion_is_rejected() {
    // Direct: @f calls @f.
    let mut f = Function::new("f");
    let x = f.add_param(None, f32(&[2]));
    raw(&mut f, Callee::Func("f".into()), &[x], Attrs::new(), &[f32(&[2])]);
    f.results.push(f.bindings[0].results[0]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(e.to_string(), "@f: %1 = call @f: recursive call: @f -> @f");

    // Through another function: @a -> @b -> @a, reached from @main.
    let one = |name: &str, target: &str| {
        let mut g = Function::new(name);
        let x = g.add_param(None, f32(&[2]));
        raw(&mut g, Callee::Func(target.into()), &[x], Attrs::new(), &[f32(&[2])]);
        g.results.push(g.bindings[0].results[0]);
        g
    };
    let m = module(vec![one("main", "a"), one("a", "b"), one("b", "a")]);
    let e = verify_module(&m).unwrap_err();
    assert_eq!(e.to_string(), "@b: %1 = call @a: recursive call: @a -> @b -> @a");
    // Each function on its own is fine: the cycle is a module property.
    assert_eq!(verify_function(&m, &m.functions["a"]), Ok(()));

    // A diamond is not a cycle.
    let mut d = Function::new("main");
    let x = d.add_param(None, f32(&[2]));
    raw(&mut d, Callee::Func("leaf".into()), &[x], Attrs::new(), &[f32(&[2])]);
    raw(&mut d, Callee::Func("mid".into()), &[x], Attrs::new(), &[f32(&[2])]);
    let m = module(vec![d, one("mid", "leaf"), {
        let mut leaf = Function::new("leaf");
        let y = leaf.add_param(None, f32(&[2]));
        leaf.results.push(y);
        leaf
    }]);
    assert_eq!(verify_module(&m), Ok(()));
}

#[test]
fn bindings_without_results_are_described_by_index() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2]));
    raw(&mut f, callee("nn.relu"), &[x], Attrs::new(), &[]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert_eq!(e.to_string(), "@main: binding #0 (nn.relu): has 0 results, inferred 1");
}

#[test]
fn long_call_chains_do_not_overflow_the_stack() {
    let n = 20_000;
    let mut fs = Vec::with_capacity(n);
    for i in 0..n {
        let mut g = Function::new(format!("f{i}"));
        let x = g.add_param(None, f32(&[1]));
        if i + 1 < n {
            raw(&mut g, Callee::Func(format!("f{}", i + 1)), &[x], Attrs::new(), &[f32(&[1])]);
            g.results.push(g.bindings[0].results[0]);
        } else {
            g.results.push(x);
        }
        fs.push(g);
    }
    assert_eq!(verify_module(&module(fs)), Ok(()));
}

/// 10,000 bindings of a transformer-like mix verify in well under 10 ms in release builds.
#[test]
fn large_modules_verify_fast() {
    let mut f = Function::new("main");
    let mut x = f.add_param(Some("x"), f32(&[8, 128, 768]));
    let g = f.add_param(Some("gamma"), f32(&[768]));
    let w = f.add_param(Some("w"), f32(&[768, 768]));
    let norm = attrs(&[("axes", Attr::ints([-1]))]);
    while f.bindings.len() < 10_000 {
        let y = op(&mut f, "matmul", &[x, w], Attrs::new())[0];
        let y = op(&mut f, "nn.gelu", &[y], Attrs::new())[0];
        let y = op(&mut f, "add", &[y, x], Attrs::new())[0];
        x = op(&mut f, "nn.layer_norm", &[y, g, g], norm.clone())[0];
    }
    f.results.push(x);
    let m = module(vec![f]);
    let best = (0..5)
        .map(|_| {
            let start = std::time::Instant::now();
            assert_eq!(verify_module(&m), Ok(()));
            start.elapsed()
        })
        .min()
        .unwrap();
    if !cfg!(debug_assertions) {
        assert!(best < std::time::Duration::from_millis(10), "took {best:?}");
    }
}

#[test]
fn messages_are_one_line() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2]));
    let a = attrs(&[("min", Attr::Float(0.0)), ("max", Attr::Float(1.0)), ("a\nb", Attr::Int(1))]);
    raw(&mut f, callee("clip"), &[x], a, &[f32(&[2])]);
    let e = verify_module(&module(vec![f])).unwrap_err();
    assert!(!e.to_string().contains('\n'), "{e}");
    assert_eq!(e.to_string(), "@main: %1 = clip: unknown attribute 'a\\nb'");
}
