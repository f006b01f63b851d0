//! The checked builders: what they append, the defaults they fill in, and what they refuse
//! (leaving the function unchanged).

use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::error::IrError;
use crate::module::{Callee, Function, Module, ValueId};
use crate::ty::TensorType;
use crate::verify::verify_module;

fn f32(shape: &[i64]) -> TensorType {
    TensorType::new(DType::F32, shape.iter().copied())
}

fn attrs(list: &[(&str, Attr)]) -> Attrs {
    list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// A ResNet stem built with the checked builder.
fn stem() -> (Function, ValueId) {
    let mut f = Function::new("stem");
    let x = f.add_param(Some("data"), f32(&[1, 3, 224, 224]));
    let w = f.add_param(Some("w"), f32(&[64, 3, 7, 7]));
    let conv = [("strides", Attr::ints([2, 2])), ("padding", Attr::ints([3]))];
    let c = f.push_op1("nn.conv2d", &[x, w], attrs(&conv)).unwrap();
    let r = f.push_op1("nn.relu", &[c], Attrs::new()).unwrap();
    let pool = [
        ("pool_size", Attr::ints([3])),
        ("strides", Attr::ints([2])),
        ("padding", Attr::ints([1])),
    ];
    let p = f.push_op1("nn.max_pool2d", &[r], attrs(&pool)).unwrap();
    f.results.push(p);
    (f, p)
}

#[test]
fn push_op_infers_types_and_fills_defaults() {
    let (f, p) = stem();
    assert_eq!(f.ty(p), &f32(&[1, 64, 56, 56]));
    assert_eq!(f.ty(f.bindings[0].results[0]), &f32(&[1, 64, 112, 112]));
    let conv = &f.bindings[0].attrs;
    assert_eq!(conv.get("groups"), Some(&Attr::Int(1)));
    assert_eq!(conv.get("data_layout"), Some(&Attr::str("NCHW")));
    assert_eq!(conv.get("strides"), Some(&Attr::ints([2, 2])));
    assert!(!conv.contains_key("out_dtype"), "optional attributes stay absent");
    let mut m = Module::new("m");
    m.add_function(f).unwrap();
    assert_eq!(verify_module(&m), Ok(()));
}

#[test]
fn push_op_returns_every_result() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[2, 9]));
    let parts = f
        .push_op(
            "split",
            &[x],
            attrs(&[("indices_or_sections", Attr::ints([2, 5])), ("axis", Attr::Int(1))]),
        )
        .unwrap();
    let types: Vec<_> = parts.iter().map(|&v| f.ty(v).clone()).collect();
    assert_eq!(types, [f32(&[2, 2]), f32(&[2, 3]), f32(&[2, 4])]);
    let c = f
        .push_op1(
            "constant",
            &[],
            attrs(&[
                ("value", Attr::floats([0.5])),
                ("shape", Attr::ints([2])),
                ("dtype", Attr::str("float16")),
            ]),
        )
        .unwrap();
    assert_eq!(f.ty(c), &TensorType::new(DType::F16, [2]));
}

#[test]
fn push_op_refusals_leave_the_function_unchanged() {
    let mut f = Function::new("main");
    let x = f.add_param(None, f32(&[1, 4, 8, 8]));
    let w = f.add_param(None, f32(&[8, 3, 3, 3]));
    let before = (f.bindings.len(), f.num_values());

    assert_eq!(
        f.push_op("nn.conv3d", &[x, w], Attrs::new()),
        Err(IrError::UnknownOp("nn.conv3d".into()))
    );
    let e = f.push_op("nn.conv2d", &[x, w], Attrs::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "'nn.conv2d': data channels (4) must equal weight input channels (3) times groups (1)"
    );
    assert!(matches!(e, IrError::Infer { .. }));
    let e = f.push_op("add", &[x], Attrs::new()).unwrap_err();
    assert_eq!(e.to_string(), "'add' takes 2 operands, got 1");
    let e = f.push_op("nn.relu", &[x], attrs(&[("alpha", Attr::Float(0.1))])).unwrap_err();
    assert_eq!(e.to_string(), "'nn.relu': unknown attribute 'alpha'");
    let e = f.push_op("clip", &[x], attrs(&[("min", Attr::Float(0.0))])).unwrap_err();
    assert_eq!(e.to_string(), "'clip': missing required attribute 'max'");
    let e = f.push_op("nn.softmax", &[x], attrs(&[("axis", Attr::str("1"))])).unwrap_err();
    assert_eq!(e.to_string(), "'nn.softmax': attribute 'axis' must be int");
    assert_eq!(f.push_op("nn.relu", &[ValueId(42)], Attrs::new()), Err(IrError::UnknownValue(42)));
    let e = f.push_op1("split", &[x], attrs(&[("indices_or_sections", Attr::Int(2))])).unwrap_err();
    assert_eq!(e.to_string(), "'split' has 2 results where one was expected");

    assert_eq!((f.bindings.len(), f.num_values()), before);
}

#[test]
fn call_takes_the_callee_result_types() {
    let (stem, _) = stem();
    let mut m = Module::new("m");
    m.add_function(stem).unwrap();
    let mut main = Function::new("main");
    let x = main.add_param(None, f32(&[1, 3, 224, 224]));
    let w = main.add_param(None, f32(&[64, 3, 7, 7]));
    let out = main.call(&m, "stem", &[x, w]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(main.ty(out[0]), &f32(&[1, 64, 56, 56]));
    assert_eq!(main.bindings[0].callee, Callee::Func("stem".into()));
    main.results.push(out[0]);
    m.add_function(main).unwrap();
    assert_eq!(verify_module(&m), Ok(()));
}

#[test]
fn call_refusals() {
    let (stem, _) = stem();
    let mut m = Module::new("m");
    m.add_function(stem).unwrap();
    let mut main = Function::new("main");
    let x = main.add_param(None, f32(&[1, 3, 224, 224]));
    let w = main.add_param(None, f32(&[64, 3, 3, 3]));
    assert_eq!(main.call(&m, "nope", &[x, w]), Err(IrError::UnknownFunction("nope".into())));
    let e = main.call(&m, "stem", &[x]).unwrap_err();
    assert_eq!(e.to_string(), "'@stem' takes 2 operands, got 1");
    let e = main.call(&m, "stem", &[x, w]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "'@stem': operand 1 has type tensor<64x3x3x3xf32>, expected tensor<64x3x7x7xf32>"
    );
    assert_eq!(main.call(&m, "stem", &[x, ValueId(9)]), Err(IrError::UnknownValue(9)));
    assert!(main.bindings.is_empty());
}
