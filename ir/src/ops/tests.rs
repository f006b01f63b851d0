//! Shape and dtype inference of every op family, with real model shapes and the errors users
//! hit; plus registry consistency and a property test that no input makes inference panic.

// `&[x.clone()]` reads better than `std::slice::from_ref(&x)` in a table of cases.
#![allow(clippy::cloned_ref_to_slice_refs)]

use super::{AttrDefault, Op, OpPattern};
use crate::attr::{Attr, AttrKind, Attrs};
use crate::dtype::DType;
use crate::ty::TensorType;

fn t(dtype: DType, shape: &[i64]) -> TensorType {
    TensorType::new(dtype, shape.iter().copied())
}

fn f32(shape: &[i64]) -> TensorType {
    t(DType::F32, shape)
}

fn attrs(list: &[(&str, Attr)]) -> Attrs {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn ints(v: &[i64]) -> Attr {
    Attr::ints(v.iter().copied())
}

fn infer(op: &str, operands: &[TensorType], a: &[(&str, Attr)]) -> Result<Vec<TensorType>, String> {
    let op = Op::lookup(op).unwrap_or_else(|| panic!("op {op} is not registered"));
    let refs: Vec<&TensorType> = operands.iter().collect();
    op.infer(&refs, &attrs(a))
}

/// The single result type, failing the test with the inference message otherwise.
fn ok(op: &str, operands: &[TensorType], a: &[(&str, Attr)]) -> TensorType {
    let mut r = infer(op, operands, a).unwrap_or_else(|e| panic!("{op}: {e}"));
    assert_eq!(r.len(), 1, "{op} should have one result");
    r.remove(0)
}

/// The inference error, failing the test if inference succeeds.
fn err(op: &str, operands: &[TensorType], a: &[(&str, Attr)]) -> String {
    match infer(op, operands, a) {
        Ok(r) => panic!("{op} should fail, inferred {r:?}"),
        Err(e) => e,
    }
}

fn assert_err(op: &str, operands: &[TensorType], a: &[(&str, Attr)], needle: &str) {
    let e = err(op, operands, a);
    assert!(
        e.contains(needle),
        "{op}: error '{e}' does not mention '{needle}'"
    );
}

// ---- convolution -------------------------------------------------------------------------

#[test]
fn conv2d_resnet_stem() {
    let data = f32(&[1, 3, 224, 224]);
    let weight = f32(&[64, 3, 7, 7]);
    let expected = f32(&[1, 64, 112, 112]);
    for padding in [ints(&[3]), ints(&[3, 3]), ints(&[3, 3, 3, 3])] {
        let a = [("strides", ints(&[2, 2])), ("padding", padding)];
        assert_eq!(
            ok("nn.conv2d", &[data.clone(), weight.clone()], &a),
            expected
        );
    }
    // Defaults: stride 1, no padding.
    assert_eq!(
        ok("nn.conv2d", &[data, weight], &[]),
        f32(&[1, 64, 218, 218])
    );
}

#[test]
fn conv2d_asymmetric_padding_is_top_left_bottom_right() {
    let a = [("padding", ints(&[1, 0, 2, 0]))];
    assert_eq!(
        ok("nn.conv2d", &[f32(&[1, 1, 5, 5]), f32(&[1, 1, 3, 3])], &a),
        f32(&[1, 1, 6, 3])
    );
}

#[test]
fn conv2d_depthwise_and_grouped() {
    // MobileNet depthwise 3x3: one input channel per group.
    let a = [("padding", ints(&[1])), ("groups", Attr::Int(32))];
    let r = ok(
        "nn.conv2d",
        &[f32(&[1, 32, 112, 112]), f32(&[32, 1, 3, 3])],
        &a,
    );
    assert_eq!(r, f32(&[1, 32, 112, 112]));
    // ResNeXt grouped conv: 4 groups of 16 input channels, stride 2.
    let a = [
        ("strides", ints(&[2])),
        ("padding", ints(&[1])),
        ("groups", Attr::Int(4)),
    ];
    let r = ok(
        "nn.conv2d",
        &[f32(&[1, 64, 56, 56]), f32(&[128, 16, 3, 3])],
        &a,
    );
    assert_eq!(r, f32(&[1, 128, 28, 28]));
}

#[test]
fn conv2d_nhwc_hwio_and_out_layout() {
    let base = [
        ("strides", ints(&[2, 2])),
        ("padding", ints(&[3])),
        ("data_layout", Attr::str("NHWC")),
        ("kernel_layout", Attr::str("HWIO")),
    ];
    let operands = [f32(&[1, 224, 224, 3]), f32(&[7, 7, 3, 64])];
    assert_eq!(ok("nn.conv2d", &operands, &base), f32(&[1, 112, 112, 64]));
    let mut a = base.to_vec();
    a.push(("out_layout", Attr::str("NCHW")));
    assert_eq!(ok("nn.conv2d", &operands, &a), f32(&[1, 64, 112, 112]));
}

#[test]
fn conv2d_dilation_and_out_dtype() {
    let a = [
        ("dilation", ints(&[2, 2])),
        ("out_dtype", Attr::str("int32")),
    ];
    let r = ok(
        "nn.conv2d",
        &[t(DType::I8, &[1, 8, 32, 32]), t(DType::I8, &[8, 8, 3, 3])],
        &a,
    );
    assert_eq!(r, t(DType::I32, &[1, 8, 28, 28]));
}

#[test]
fn conv2d_errors() {
    let data = f32(&[1, 4, 8, 8]);
    let conv = |w: &[i64], a: &[(&str, Attr)], needle: &str| {
        assert_err("nn.conv2d", &[data.clone(), f32(w)], a, needle)
    };
    conv(
        &[8, 3, 3, 3],
        &[],
        "data channels (4) must equal weight input channels (3)",
    );
    conv(
        &[5, 2, 3, 3],
        &[("groups", Attr::Int(2))],
        "(5) are not divisible by groups (2)",
    );
    conv(
        &[8, 4, 3, 3],
        &[("groups", Attr::Int(0))],
        "'groups' must be positive",
    );
    conv(&[8, 4, 3], &[], "weight must have rank 4");
    conv(
        &[8, 4, 3, 3],
        &[("padding", ints(&[1, 1, 1]))],
        "must have 1, 2 or 4 elements",
    );
    conv(
        &[8, 4, 3, 3],
        &[("padding", ints(&[-1]))],
        "must not be negative",
    );
    conv(
        &[8, 4, 3, 3],
        &[("strides", ints(&[0, 1]))],
        "'strides' must be positive",
    );
    conv(&[8, 4, 9, 9], &[], "larger than the padded input");
    conv(&[8, 4, 0, 3], &[], "empty kernel window");
    conv(
        &[8, 4, 3, 3],
        &[("data_layout", Attr::str("NCHW8c"))],
        "not a permutation of NCHW",
    );
    conv(
        &[8, 4, 3, 3],
        &[("out_dtype", Attr::str("f32"))],
        "unknown dtype 'f32'",
    );
    conv(
        &[8, 4, 3, 3],
        &[("strides", Attr::str("2"))],
        "'strides' must be a list of ints",
    );
    assert_err(
        "nn.conv2d",
        &[data.clone(), t(DType::F16, &[8, 4, 3, 3])],
        &[],
        "operand dtypes differ",
    );
    assert_err(
        "nn.conv2d",
        &[f32(&[1, 4, 8]), f32(&[8, 4, 3, 3])],
        &[],
        "data must have rank 4",
    );
}

#[test]
fn conv2d_transpose_upsamples() {
    // DCGAN-style: 4x4 kernel, stride 2, pad 1 doubles the spatial size.
    let a = [("strides", ints(&[2, 2])), ("padding", ints(&[1, 1]))];
    let operands = [f32(&[1, 64, 14, 14]), f32(&[64, 32, 4, 4])];
    assert_eq!(
        ok("nn.conv2d_transpose", &operands, &a),
        f32(&[1, 32, 28, 28])
    );
    let mut with_out_pad = a.to_vec();
    with_out_pad.push(("output_padding", ints(&[1, 1])));
    assert_eq!(
        ok("nn.conv2d_transpose", &operands, &with_out_pad),
        f32(&[1, 32, 29, 29])
    );
    // Groups multiply the weight's output channels.
    let mut grouped = a.to_vec();
    grouped.push(("groups", Attr::Int(2)));
    let r = ok(
        "nn.conv2d_transpose",
        &[f32(&[1, 64, 14, 14]), f32(&[64, 16, 4, 4])],
        &grouped,
    );
    assert_eq!(r, f32(&[1, 32, 28, 28]));
}

#[test]
fn conv2d_transpose_errors() {
    let data = f32(&[1, 64, 14, 14]);
    let op = "nn.conv2d_transpose";
    assert_err(
        op,
        &[data.clone(), f32(&[32, 32, 4, 4])],
        &[],
        "data channels (64) must equal weight input channels (32)",
    );
    assert_err(
        op,
        &[data.clone(), f32(&[64, 32, 4, 4])],
        &[("output_padding", ints(&[1, 1]))],
        "less than the strides",
    );
    assert_err(
        op,
        &[data.clone(), f32(&[64, 32, 4, 4])],
        &[("groups", Attr::Int(3))],
        "not divisible by groups",
    );
    assert_err(
        op,
        &[f32(&[1, 64, 0, 14]), f32(&[64, 32, 1, 1])],
        &[],
        "input is too small",
    );
}

// ---- linear algebra ----------------------------------------------------------------------

#[test]
fn matmul_follows_numpy() {
    assert_eq!(
        ok("matmul", &[f32(&[2, 3]), f32(&[3, 4])], &[]),
        f32(&[2, 4])
    );
    assert_eq!(ok("matmul", &[f32(&[3]), f32(&[3])], &[]), f32(&[]));
    assert_eq!(ok("matmul", &[f32(&[3]), f32(&[3, 4])], &[]), f32(&[4]));
    assert_eq!(ok("matmul", &[f32(&[2, 3]), f32(&[3])], &[]), f32(&[2]));
    assert_eq!(
        ok("matmul", &[f32(&[5, 1, 2, 3]), f32(&[4, 3, 6])], &[]),
        f32(&[5, 4, 2, 6])
    );
    assert_eq!(
        ok("matmul", &[f32(&[7, 2, 3]), f32(&[3])], &[]),
        f32(&[7, 2])
    );
    // BERT attention scores.
    let r = ok(
        "matmul",
        &[f32(&[8, 12, 128, 64]), f32(&[8, 12, 64, 128])],
        &[],
    );
    assert_eq!(r, f32(&[8, 12, 128, 128]));
    let a = [("out_dtype", Attr::str("int32"))];
    let r = ok(
        "matmul",
        &[t(DType::I8, &[2, 3]), t(DType::I8, &[3, 4])],
        &a,
    );
    assert_eq!(r, t(DType::I32, &[2, 4]));
}

#[test]
fn matmul_errors() {
    assert_err(
        "matmul",
        &[f32(&[2, 3]), f32(&[4, 5])],
        &[],
        "reduction dims differ",
    );
    assert_err(
        "matmul",
        &[f32(&[2, 2, 3]), f32(&[3, 3, 4])],
        &[],
        "batch dims do not broadcast",
    );
    assert_err("matmul", &[f32(&[]), f32(&[3])], &[], "must not be scalars");
    assert_err(
        "matmul",
        &[f32(&[2, 3]), t(DType::F16, &[3, 4])],
        &[],
        "dtypes differ",
    );
}

#[test]
fn dense_and_batch_matmul() {
    assert_eq!(
        ok("nn.dense", &[f32(&[8, 512]), f32(&[1000, 512])], &[]),
        f32(&[8, 1000])
    );
    assert_eq!(
        ok("nn.dense", &[f32(&[2, 8, 512]), f32(&[10, 512])], &[]),
        f32(&[2, 8, 10])
    );
    assert_err(
        "nn.dense",
        &[f32(&[8, 512]), f32(&[1000, 256])],
        &[],
        "reduction dims differ",
    );
    let units = [("units", Attr::Int(10))];
    assert_err(
        "nn.dense",
        &[f32(&[8, 512]), f32(&[1000, 512])],
        &units,
        "'units' (10)",
    );
    assert_err(
        "nn.dense",
        &[f32(&[]), f32(&[1000, 512])],
        &[],
        "rank at least 1",
    );

    let bmm = "nn.batch_matmul";
    assert_eq!(
        ok(bmm, &[f32(&[4, 5, 6]), f32(&[4, 7, 6])], &[]),
        f32(&[4, 5, 7])
    );
    let plain = [("transpose_b", Attr::Bool(false))];
    assert_eq!(
        ok(bmm, &[f32(&[4, 5, 6]), f32(&[4, 6, 7])], &plain),
        f32(&[4, 5, 7])
    );
    let ta = [("transpose_a", Attr::Bool(true))];
    assert_eq!(
        ok(bmm, &[f32(&[4, 6, 5]), f32(&[4, 7, 6])], &ta),
        f32(&[4, 5, 7])
    );
    assert_eq!(
        ok(bmm, &[f32(&[1, 5, 6]), f32(&[4, 7, 6])], &[]),
        f32(&[4, 5, 7])
    );
    assert_err(
        bmm,
        &[f32(&[4, 5, 6]), f32(&[4, 6, 7])],
        &[],
        "reduction dims differ",
    );
    assert_err(
        bmm,
        &[f32(&[4, 5, 6]), f32(&[3, 7, 6])],
        &[],
        "batch dims differ",
    );
    assert_err(
        bmm,
        &[f32(&[5, 6]), f32(&[3, 7, 6])],
        &[],
        "lhs must have rank 3",
    );
}

// ---- elementwise -------------------------------------------------------------------------

#[test]
fn unary_ops_keep_the_type_and_float_ones_reject_ints() {
    let x = f32(&[2, 3]);
    for op in [
        "exp", "log", "sqrt", "rsqrt", "erf", "tanh", "sigmoid", "sin", "cos", "nn.gelu",
    ] {
        assert_eq!(ok(op, &[x.clone()], &[]), x);
        assert_err(op, &[t(DType::I32, &[2])], &[], "must have a float dtype");
    }
    for op in ["negative", "abs", "floor", "ceil", "round", "nn.relu"] {
        assert_eq!(ok(op, &[t(DType::I32, &[4])], &[]), t(DType::I32, &[4]));
    }
    assert_eq!(
        ok("nn.leakyrelu", &[x.clone()], &[("alpha", Attr::Float(0.1))]),
        x
    );
    assert_eq!(ok("nn.hard_sigmoid", &[x.clone()], &[]), x);
    let bounds = [("min", Attr::Float(0.0)), ("max", Attr::Int(6))];
    assert_eq!(ok("clip", &[x.clone()], &bounds), x);
    assert_err(
        "clip",
        &[x.clone()],
        &[("min", Attr::Float(0.0))],
        "missing required attribute 'max'",
    );
}

#[test]
fn astype_changes_the_dtype_by_tvm_name() {
    let r = ok(
        "astype",
        &[f32(&[1, 3])],
        &[("dtype", Attr::str("float16"))],
    );
    assert_eq!(r, t(DType::F16, &[1, 3]));
    assert_err(
        "astype",
        &[f32(&[1])],
        &[("dtype", Attr::str("f16"))],
        "unknown dtype 'f16'",
    );
    assert_err(
        "astype",
        &[f32(&[1])],
        &[],
        "missing required attribute 'dtype'",
    );
    assert_err(
        "astype",
        &[f32(&[1])],
        &[("dtype", Attr::Int(16))],
        "must be a string, got an int",
    );
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    for op in [
        "add",
        "subtract",
        "multiply",
        "divide",
        "floor_divide",
        "power",
        "maximum",
    ] {
        assert_eq!(
            ok(op, &[f32(&[2, 1, 4]), f32(&[3, 1])], &[]),
            f32(&[2, 3, 4])
        );
        assert_eq!(ok(op, &[f32(&[]), f32(&[5])], &[]), f32(&[5]));
        assert_err(
            op,
            &[f32(&[2, 3]), f32(&[4])],
            &[],
            "do not broadcast (3 vs 4)",
        );
        assert_err(op, &[f32(&[2]), t(DType::I32, &[2])], &[], "dtypes differ");
    }
    // A zero extent broadcasts against 1 (numpy).
    assert_eq!(
        ok("minimum", &[f32(&[0, 3]), f32(&[1, 3])], &[]),
        f32(&[0, 3])
    );
}

#[test]
fn comparisons_give_bool() {
    for op in [
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
    ] {
        let r = ok(op, &[t(DType::I64, &[4, 1]), t(DType::I64, &[3])], &[]);
        assert_eq!(r, t(DType::Bool, &[4, 3]));
    }
    assert_err(
        "less",
        &[f32(&[2]), t(DType::F16, &[2])],
        &[],
        "dtypes differ",
    );
}

#[test]
fn where_broadcasts_three_ways() {
    let r = ok(
        "where",
        &[t(DType::Bool, &[1, 4]), f32(&[3, 1]), f32(&[])],
        &[],
    );
    assert_eq!(r, f32(&[3, 4]));
    assert_err(
        "where",
        &[f32(&[1]), f32(&[1]), f32(&[1])],
        &[],
        "must have dtype bool",
    );
    assert_err(
        "where",
        &[t(DType::Bool, &[2]), f32(&[3]), f32(&[3])],
        &[],
        "do not broadcast",
    );
}

#[test]
fn commutativity_and_patterns() {
    let commutative: Vec<&str> = Op::all()
        .filter(|o| o.def().commutative)
        .map(Op::name)
        .collect();
    assert_eq!(
        commutative,
        [
            "add",
            "multiply",
            "maximum",
            "minimum",
            "equal",
            "not_equal"
        ]
    );
    let pattern = |n: &str| Op::lookup(n).unwrap().pattern();
    assert_eq!(pattern("nn.conv2d"), OpPattern::OutEWiseFusable);
    assert_eq!(pattern("exp"), OpPattern::ElemWise);
    assert_eq!(pattern("where"), OpPattern::Broadcast);
    assert_eq!(pattern("sum"), OpPattern::CommReduce);
    assert_eq!(pattern("split"), OpPattern::Injective);
    assert_eq!(pattern("nn.batch_norm"), OpPattern::Opaque);
    assert_eq!(pattern("constant"), OpPattern::Opaque);
}

// ---- reductions --------------------------------------------------------------------------

#[test]
fn reductions_over_axes() {
    let x = f32(&[2, 3, 4]);
    for op in ["sum", "mean", "max", "min", "prod"] {
        assert_eq!(ok(op, &[x.clone()], &[("axis", ints(&[1]))]), f32(&[2, 4]));
        let keep = [("axis", ints(&[1])), ("keepdims", Attr::Bool(true))];
        assert_eq!(ok(op, &[x.clone()], &keep), f32(&[2, 1, 4]));
        assert_eq!(ok(op, &[x.clone()], &[]), f32(&[]));
        assert_eq!(
            ok(op, &[x.clone()], &[("keepdims", Attr::Bool(true))]),
            f32(&[1, 1, 1])
        );
        assert_eq!(ok(op, &[x.clone()], &[("axis", ints(&[-1, 0]))]), f32(&[3]));
        assert_eq!(ok(op, &[x.clone()], &[("axis", ints(&[]))]), x);
        assert_err(op, &[x.clone()], &[("axis", ints(&[1, -2]))], "repeated");
        assert_err(
            op,
            &[x.clone()],
            &[("axis", ints(&[3]))],
            "axis 3 is out of range for rank 3",
        );
    }
}

#[test]
fn argmax_argmin_give_int64() {
    let x = f32(&[2, 3, 4]);
    for op in ["argmax", "argmin"] {
        assert_eq!(
            ok(op, &[x.clone()], &[("axis", Attr::Int(1))]),
            t(DType::I64, &[2, 4])
        );
        let keep = [("axis", Attr::Int(-1)), ("keepdims", Attr::Bool(true))];
        assert_eq!(ok(op, &[x.clone()], &keep), t(DType::I64, &[2, 3, 1]));
        assert_eq!(ok(op, &[x.clone()], &[]), t(DType::I64, &[]));
        assert_err(op, &[x.clone()], &[("axis", Attr::Int(-4))], "out of range");
        assert_err(
            op,
            &[x.clone()],
            &[("axis", ints(&[1]))],
            "must be an int, got a list",
        );
    }
}

// ---- normalization -----------------------------------------------------------------------

#[test]
fn batch_norm_checks_channel_params() {
    let data = f32(&[1, 64, 56, 56]);
    let c = f32(&[64]);
    let params = || vec![data.clone(), c.clone(), c.clone(), c.clone(), c.clone()];
    assert_eq!(ok("nn.batch_norm", &params(), &[]), data);
    let mut wrong = params();
    wrong[3] = f32(&[32]);
    assert_err(
        "nn.batch_norm",
        &wrong,
        &[],
        "moving_mean must have shape [64]",
    );
    let mut wrong_dtype = params();
    wrong_dtype[1] = t(DType::F16, &[64]);
    assert_err(
        "nn.batch_norm",
        &wrong_dtype,
        &[],
        "gamma dtype f16 differs",
    );
    // NHWC: channels last.
    let nhwc = f32(&[1, 56, 56, 64]);
    let r = ok(
        "nn.batch_norm",
        &[nhwc.clone(), c.clone(), c.clone(), c.clone(), c.clone()],
        &[("axis", Attr::Int(3))],
    );
    assert_eq!(r, nhwc);
    assert_err(
        "nn.batch_norm",
        &params(),
        &[("axis", Attr::Int(4))],
        "out of range",
    );
}

#[test]
fn layer_norm_and_softmax() {
    let x = f32(&[2, 128, 768]);
    let a = [("axes", ints(&[-1]))];
    assert_eq!(
        ok("nn.layer_norm", &[x.clone(), f32(&[768]), f32(&[768])], &a),
        x
    );
    assert_err(
        "nn.layer_norm",
        &[x.clone(), f32(&[512]), f32(&[768])],
        &a,
        "gamma must have shape [768]",
    );
    let two = [("axes", ints(&[1, 2]))];
    let g = f32(&[128, 768]);
    assert_eq!(ok("nn.layer_norm", &[x.clone(), g.clone(), g], &two), x);
    assert_err(
        "nn.layer_norm",
        &[x.clone(), f32(&[768]), f32(&[768])],
        &[],
        "missing required attribute 'axes'",
    );
    let ix = t(DType::I32, &[2, 768]);
    assert_err(
        "nn.layer_norm",
        &[ix, t(DType::I32, &[768]), t(DType::I32, &[768])],
        &a,
        "float dtype",
    );

    for op in ["nn.softmax", "nn.log_softmax"] {
        assert_eq!(ok(op, &[x.clone()], &[]), x);
        assert_eq!(ok(op, &[x.clone()], &[("axis", Attr::Int(1))]), x);
        assert_err(op, &[x.clone()], &[("axis", Attr::Int(3))], "out of range");
        assert_err(op, &[t(DType::I32, &[4])], &[], "float dtype");
    }
}

// ---- pooling -----------------------------------------------------------------------------

#[test]
fn pooling_resnet_and_ceil_mode() {
    let a = [
        ("pool_size", ints(&[3, 3])),
        ("strides", ints(&[2, 2])),
        ("padding", ints(&[1])),
    ];
    let r = ok("nn.max_pool2d", &[f32(&[1, 64, 112, 112])], &a);
    assert_eq!(r, f32(&[1, 64, 56, 56]));
    // GoogLeNet-style ceil_mode pooling: 112 -> 56 with ceil, 55 without.
    let floor = [("pool_size", ints(&[3])), ("strides", ints(&[2]))];
    assert_eq!(
        ok("nn.max_pool2d", &[f32(&[1, 64, 112, 112])], &floor),
        f32(&[1, 64, 55, 55])
    );
    let mut ceil = floor.to_vec();
    ceil.push(("ceil_mode", Attr::Bool(true)));
    assert_eq!(
        ok("nn.max_pool2d", &[f32(&[1, 64, 112, 112])], &ceil),
        f32(&[1, 64, 56, 56])
    );
    // The last window may not start in the padding only: 5 + pad 1 + 1, kernel 2, stride 2.
    let edge = [
        ("pool_size", ints(&[2])),
        ("strides", ints(&[2])),
        ("padding", ints(&[1])),
        ("ceil_mode", Attr::Bool(true)),
    ];
    assert_eq!(
        ok("nn.avg_pool2d", &[f32(&[1, 1, 5, 5])], &edge),
        f32(&[1, 1, 3, 3])
    );
}

#[test]
fn pooling_nhwc_and_errors() {
    let a = [
        ("pool_size", ints(&[2, 2])),
        ("strides", ints(&[2, 2])),
        ("layout", Attr::str("NHWC")),
    ];
    assert_eq!(
        ok("nn.avg_pool2d", &[f32(&[1, 32, 32, 16])], &a),
        f32(&[1, 16, 16, 16])
    );
    let mut out_nchw = a.to_vec();
    out_nchw.push(("out_layout", Attr::str("NCHW")));
    assert_eq!(
        ok("nn.avg_pool2d", &[f32(&[1, 32, 32, 16])], &out_nchw),
        f32(&[1, 16, 16, 16])
    );
    assert_eq!(
        ok("nn.avg_pool2d", &[f32(&[1, 32, 30, 16])], &out_nchw),
        f32(&[1, 16, 16, 15])
    );
    assert_err(
        "nn.max_pool2d",
        &[f32(&[1, 1, 4, 4])],
        &[],
        "missing required attribute 'pool_size'",
    );
    let big = [("pool_size", ints(&[5]))];
    assert_err(
        "nn.max_pool2d",
        &[f32(&[1, 1, 4, 4])],
        &big,
        "larger than the padded input",
    );
    let zero_stride = [("pool_size", ints(&[2])), ("strides", ints(&[0]))];
    assert_err(
        "nn.max_pool2d",
        &[f32(&[1, 1, 4, 4])],
        &zero_stride,
        "must be positive",
    );
    assert_err(
        "nn.max_pool2d",
        &[f32(&[1, 4, 4])],
        &big,
        "data must have rank 4",
    );
}

#[test]
fn adaptive_avg_pool2d_sizes() {
    let x = f32(&[1, 2048, 7, 7]);
    assert_eq!(
        ok(
            "nn.adaptive_avg_pool2d",
            &[x.clone()],
            &[("output_size", ints(&[1]))]
        ),
        f32(&[1, 2048, 1, 1])
    );
    assert_eq!(ok("nn.adaptive_avg_pool2d", &[x.clone()], &[]), x);
    let nhwc = [
        ("output_size", ints(&[2, 3])),
        ("layout", Attr::str("NHWC")),
    ];
    assert_eq!(
        ok("nn.adaptive_avg_pool2d", &[f32(&[1, 7, 7, 512])], &nhwc),
        f32(&[1, 2, 3, 512])
    );
    assert_err(
        "nn.adaptive_avg_pool2d",
        &[x.clone()],
        &[("output_size", ints(&[0]))],
        "must be positive",
    );
    assert_err(
        "nn.adaptive_avg_pool2d",
        &[x],
        &[("output_size", ints(&[1, 2, 3]))],
        "1 or 2 elements",
    );
}

// ---- shape manipulation ------------------------------------------------------------------

#[test]
fn reshape_infers_minus_one() {
    let x = f32(&[2, 3, 4]);
    assert_eq!(
        ok("reshape", &[x.clone()], &[("shape", ints(&[6, -1]))]),
        f32(&[6, 4])
    );
    assert_eq!(
        ok("reshape", &[x.clone()], &[("shape", ints(&[-1]))]),
        f32(&[24])
    );
    assert_eq!(
        ok("reshape", &[x.clone()], &[("shape", ints(&[1, 24, 1]))]),
        f32(&[1, 24, 1])
    );
    assert_eq!(
        ok("reshape", &[f32(&[1])], &[("shape", ints(&[]))]),
        f32(&[])
    );
    assert_err(
        "reshape",
        &[x.clone()],
        &[("shape", ints(&[5, 5]))],
        "24 elements",
    );
    assert_err(
        "reshape",
        &[x.clone()],
        &[("shape", ints(&[-1, -1]))],
        "more than one -1",
    );
    assert_err(
        "reshape",
        &[x.clone()],
        &[("shape", ints(&[5, -1]))],
        "-1 cannot be inferred",
    );
    assert_err(
        "reshape",
        &[f32(&[0, 3])],
        &[("shape", ints(&[0, -1]))],
        "-1 cannot be inferred",
    );
    assert_err(
        "reshape",
        &[x.clone()],
        &[("shape", ints(&[-2, -12]))],
        "invalid extent -2",
    );
    assert_err(
        "reshape",
        &[x],
        &[("shape", ints(&[i64::MAX, 2, -1]))],
        "overflows",
    );
}

#[test]
fn permute_dims_defaults_to_reverse() {
    let x = f32(&[2, 3, 4]);
    assert_eq!(ok("permute_dims", &[x.clone()], &[]), f32(&[4, 3, 2]));
    assert_eq!(
        ok("permute_dims", &[x.clone()], &[("axes", ints(&[0, 2, 1]))]),
        f32(&[2, 4, 3])
    );
    assert_eq!(
        ok("permute_dims", &[x.clone()], &[("axes", ints(&[-1, 0, 1]))]),
        f32(&[4, 2, 3])
    );
    assert_err(
        "permute_dims",
        &[x.clone()],
        &[("axes", ints(&[0, 0, 1]))],
        "repeated",
    );
    assert_err(
        "permute_dims",
        &[x],
        &[("axes", ints(&[1, 0]))],
        "one entry per dim",
    );
}

#[test]
fn concat_along_an_axis() {
    let r = ok(
        "concat",
        &[f32(&[1, 2, 3]), f32(&[1, 5, 3]), f32(&[1, 1, 3])],
        &[("axis", Attr::Int(1))],
    );
    assert_eq!(r, f32(&[1, 8, 3]));
    assert_eq!(
        ok("concat", &[f32(&[2, 3]), f32(&[4, 3])], &[]),
        f32(&[6, 3])
    );
    assert_eq!(
        ok("concat", &[f32(&[2, 3])], &[("axis", Attr::Int(-1))]),
        f32(&[2, 3])
    );
    let axis1 = [("axis", Attr::Int(1))];
    assert_err(
        "concat",
        &[f32(&[1, 2, 3]), f32(&[2, 2, 3])],
        &axis1,
        "outside axis 1",
    );
    assert_err(
        "concat",
        &[f32(&[1, 2]), f32(&[1, 2, 3])],
        &axis1,
        "outside axis 1",
    );
    assert_err(
        "concat",
        &[f32(&[1, 2]), t(DType::F16, &[1, 2])],
        &axis1,
        "another dtype",
    );
    assert_err(
        "concat",
        &[f32(&[]), f32(&[])],
        &[],
        "out of range for rank 0",
    );
    let huge = f32(&[i64::MAX]);
    assert_err("concat", &[huge.clone(), huge], &[], "overflows");
}

#[test]
fn split_by_sections_and_indices() {
    let x = f32(&[2, 10]);
    let r = infer(
        "split",
        &[x.clone()],
        &[
            ("indices_or_sections", Attr::Int(5)),
            ("axis", Attr::Int(1)),
        ],
    )
    .unwrap();
    assert_eq!(r, vec![f32(&[2, 2]); 5]);
    // Uneven sections: ceil(10 / 3) = 4, the last one shorter (as Relax).
    let r = infer(
        "split",
        &[x.clone()],
        &[
            ("indices_or_sections", Attr::Int(3)),
            ("axis", Attr::Int(-1)),
        ],
    )
    .unwrap();
    assert_eq!(r, vec![f32(&[2, 4]), f32(&[2, 4]), f32(&[2, 2])]);
    let r = infer(
        "split",
        &[x.clone()],
        &[
            ("indices_or_sections", Attr::Int(1)),
            ("axis", Attr::Int(1)),
        ],
    )
    .unwrap();
    assert_eq!(r, vec![x.clone()]);
    let by = |idx: &[i64]| {
        infer(
            "split",
            &[x.clone()],
            &[("indices_or_sections", ints(idx)), ("axis", Attr::Int(1))],
        )
        .unwrap()
    };
    assert_eq!(by(&[2, 5]), vec![f32(&[2, 2]), f32(&[2, 3]), f32(&[2, 5])]);
    assert_eq!(by(&[3, 20]), vec![f32(&[2, 3]), f32(&[2, 7]), f32(&[2, 0])]);
    assert_eq!(by(&[5, 2]), vec![f32(&[2, 5]), f32(&[2, 0]), f32(&[2, 8])]);
    assert_eq!(by(&[]), vec![x.clone()]);
}

#[test]
fn split_errors() {
    let x = f32(&[5]);
    let sections = |n: i64| [("indices_or_sections", Attr::Int(n))];
    assert_err("split", &[x.clone()], &sections(4), "cannot split axis 0");
    assert_err("split", &[x.clone()], &sections(0), "must be in 1..=");
    assert_err(
        "split",
        &[f32(&[0])],
        &sections(i64::MAX),
        "must be in 1..=",
    );
    assert_err(
        "split",
        &[x.clone()],
        &[],
        "missing required attribute 'indices_or_sections'",
    );
    assert_err(
        "split",
        &[x.clone()],
        &[("indices_or_sections", Attr::str("2"))],
        "an int or a list of ints",
    );
    assert_err(
        "split",
        &[x],
        &[
            ("indices_or_sections", Attr::Int(1)),
            ("axis", Attr::Int(1)),
        ],
        "out of range",
    );
}

#[test]
fn strided_slice_clamps_like_numpy() {
    let slice =
        |shape: &[i64], axes: &[i64], begin: &[i64], end: &[i64], strides: Option<&[i64]>| {
            let mut a = vec![
                ("axes", ints(axes)),
                ("begin", ints(begin)),
                ("end", ints(end)),
            ];
            if let Some(s) = strides {
                a.push(("strides", ints(s)));
            }
            ok("strided_slice", &[f32(shape)], &a).shape.to_vec()
        };
    // x[-3:] with ONNX's "to the end" marker.
    assert_eq!(slice(&[10], &[0], &[-3], &[i64::MAX], None), [3]);
    // x[8:2:-2] = 8, 6, 4.
    assert_eq!(slice(&[10], &[0], &[8], &[2], Some(&[-2])), [3]);
    // Reversal x[::-1] as ONNX writes it.
    assert_eq!(slice(&[10], &[0], &[-1], &[i64::MIN], Some(&[-1])), [10]);
    // Empty and out-of-range ranges.
    assert_eq!(slice(&[10], &[0], &[2], &[1], None), [0]);
    assert_eq!(slice(&[10], &[0], &[-100], &[100], None), [10]);
    assert_eq!(slice(&[10], &[0], &[-20], &[-15], Some(&[-1])), [0]);
    // Strides larger than the extent, and the extreme stride.
    assert_eq!(slice(&[10], &[0], &[0], &[10], Some(&[i64::MAX])), [1]);
    assert_eq!(
        slice(&[10], &[0], &[9], &[i64::MIN], Some(&[i64::MIN])),
        [1]
    );
    // Several axes, negative axis.
    assert_eq!(
        slice(&[4, 5, 6], &[0, -1], &[1, 0], &[3, -1], Some(&[1, 2])),
        [2, 5, 3]
    );
}

#[test]
fn strided_slice_errors() {
    let x = [f32(&[10, 4])];
    let base = |strides: &[i64]| {
        vec![
            ("axes", ints(&[0])),
            ("begin", ints(&[0])),
            ("end", ints(&[5])),
            ("strides", ints(strides)),
        ]
    };
    assert_err("strided_slice", &x, &base(&[0]), "contains 0");
    assert_err("strided_slice", &x, &base(&[1, 1]), "one entry per axis");
    let bad_axis = [
        ("axes", ints(&[2])),
        ("begin", ints(&[0])),
        ("end", ints(&[1])),
    ];
    assert_err("strided_slice", &x, &bad_axis, "axis 2 is out of range");
    assert_err(
        "strided_slice",
        &x,
        &[("axes", ints(&[0])), ("begin", ints(&[0]))],
        "missing required attribute 'end'",
    );
}

#[test]
fn pad_adds_before_and_after() {
    let a = [("pad_width", ints(&[0, 0, 0, 0, 1, 1, 2, 2]))];
    assert_eq!(ok("nn.pad", &[f32(&[1, 3, 4, 4])], &a), f32(&[1, 3, 6, 8]));
    let reflect = [
        ("pad_width", ints(&[1, 2])),
        ("pad_mode", Attr::str("reflect")),
    ];
    assert_eq!(ok("nn.pad", &[f32(&[4])], &reflect), f32(&[7]));
    assert_err("nn.pad", &[f32(&[1, 3])], &a, "2 * rank = 4 elements");
    assert_err(
        "nn.pad",
        &[f32(&[4])],
        &[("pad_width", ints(&[-1, 0]))],
        "must not be negative",
    );
    let mode = [
        ("pad_width", ints(&[1, 1])),
        ("pad_mode", Attr::str("wrap")),
    ];
    assert_err("nn.pad", &[f32(&[4])], &mode, "'pad_mode' must be one of");
    assert_err(
        "nn.pad",
        &[f32(&[4])],
        &[("pad_width", ints(&[i64::MAX, 1]))],
        "overflows",
    );
}

#[test]
fn resize2d_sets_spatial_dims() {
    let x = f32(&[1, 3, 32, 32]);
    assert_eq!(
        ok("image.resize2d", &[x.clone()], &[("size", ints(&[64, 48]))]),
        f32(&[1, 3, 64, 48])
    );
    assert_eq!(
        ok("image.resize2d", &[x.clone()], &[("size", ints(&[16]))]),
        f32(&[1, 3, 16, 16])
    );
    let nhwc = [
        ("size", ints(&[64, 64])),
        ("layout", Attr::str("NHWC")),
        ("method", Attr::str("nearest_neighbor")),
    ];
    assert_eq!(
        ok("image.resize2d", &[f32(&[1, 32, 32, 3])], &nhwc),
        f32(&[1, 64, 64, 3])
    );
    let cast = [("size", ints(&[8, 8])), ("out_dtype", Attr::str("float16"))];
    assert_eq!(
        ok("image.resize2d", &[x.clone()], &cast),
        t(DType::F16, &[1, 3, 8, 8])
    );
    let method = [("size", ints(&[8, 8])), ("method", Attr::str("bilinear"))];
    assert_err(
        "image.resize2d",
        &[x.clone()],
        &method,
        "'method' must be one of",
    );
    let roi = [("size", ints(&[8, 8])), ("roi", Attr::floats([0.0, 1.0]))];
    assert_err(
        "image.resize2d",
        &[x.clone()],
        &roi,
        "'roi' must have 4 elements",
    );
    assert_err(
        "image.resize2d",
        &[x],
        &[("size", ints(&[-8, 8]))],
        "must not be negative",
    );
}

#[test]
fn squeeze_expand_dims_flatten() {
    let x = f32(&[1, 3, 1, 4]);
    assert_eq!(ok("squeeze", &[x.clone()], &[]), f32(&[3, 4]));
    assert_eq!(
        ok("squeeze", &[x.clone()], &[("axis", ints(&[0]))]),
        f32(&[3, 1, 4])
    );
    assert_eq!(
        ok("squeeze", &[x.clone()], &[("axis", ints(&[-2, 0]))]),
        f32(&[3, 4])
    );
    assert_err(
        "squeeze",
        &[x.clone()],
        &[("axis", ints(&[1]))],
        "its extent is not 1",
    );

    let y = f32(&[3, 4]);
    assert_eq!(
        ok("expand_dims", &[y.clone()], &[("axis", ints(&[0]))]),
        f32(&[1, 3, 4])
    );
    assert_eq!(
        ok("expand_dims", &[y.clone()], &[("axis", ints(&[-1]))]),
        f32(&[3, 4, 1])
    );
    assert_eq!(
        ok("expand_dims", &[y.clone()], &[("axis", ints(&[0, 3]))]),
        f32(&[1, 3, 4, 1])
    );
    assert_eq!(
        ok("expand_dims", &[y.clone()], &[("axis", ints(&[1, 2]))]),
        f32(&[3, 1, 1, 4])
    );
    assert_err(
        "expand_dims",
        &[y.clone()],
        &[("axis", ints(&[0, -4]))],
        "repeated",
    );
    assert_err(
        "expand_dims",
        &[y.clone()],
        &[("axis", ints(&[3]))],
        "out of range",
    );

    assert_eq!(ok("flatten", &[f32(&[2, 3, 4])], &[]), f32(&[24]));
    assert_eq!(ok("flatten", &[f32(&[])], &[]), f32(&[1]));
    assert_err("flatten", &[f32(&[i64::MAX, 3])], &[], "overflows");
}

#[test]
fn take_follows_numpy() {
    let data = f32(&[5, 6]);
    let idx = |shape: &[i64]| t(DType::I64, shape);
    assert_eq!(
        ok(
            "take",
            &[data.clone(), idx(&[3])],
            &[("axis", Attr::Int(0))]
        ),
        f32(&[3, 6])
    );
    assert_eq!(
        ok(
            "take",
            &[data.clone(), idx(&[2, 2])],
            &[("axis", Attr::Int(-1))]
        ),
        f32(&[5, 2, 2])
    );
    assert_eq!(
        ok("take", &[data.clone(), idx(&[])], &[("axis", Attr::Int(0))]),
        f32(&[6])
    );
    // Embedding lookup: [vocab, hidden] with [batch, seq] int32 ids.
    let r = ok(
        "take",
        &[f32(&[30522, 768]), t(DType::I32, &[8, 128])],
        &[("axis", Attr::Int(0))],
    );
    assert_eq!(r, f32(&[8, 128, 768]));
    assert_eq!(ok("take", &[data.clone(), idx(&[2, 2])], &[]), f32(&[2, 2]));
    assert_err("take", &[data.clone(), f32(&[3])], &[], "integer dtype");
    assert_err(
        "take",
        &[data.clone(), idx(&[3])],
        &[("mode", Attr::str("nearest"))],
        "'mode' must be one of",
    );
    assert_err(
        "take",
        &[data, idx(&[3])],
        &[("axis", Attr::Int(2))],
        "out of range",
    );
}

#[test]
fn broadcast_to_and_tile() {
    let s = |v: &[i64]| [("shape", ints(v))];
    assert_eq!(
        ok("broadcast_to", &[f32(&[3, 1])], &s(&[2, 3, 4])),
        f32(&[2, 3, 4])
    );
    assert_eq!(ok("broadcast_to", &[f32(&[])], &s(&[2])), f32(&[2]));
    assert_err(
        "broadcast_to",
        &[f32(&[3, 2])],
        &s(&[3, 4]),
        "cannot broadcast",
    );
    assert_err(
        "broadcast_to",
        &[f32(&[2, 3])],
        &s(&[3]),
        "cannot broadcast",
    );
    assert_err(
        "broadcast_to",
        &[f32(&[1])],
        &s(&[-1]),
        "must not be negative",
    );

    let r = |v: &[i64]| [("repeats", ints(v))];
    assert_eq!(ok("tile", &[f32(&[2, 3])], &r(&[2])), f32(&[2, 6]));
    assert_eq!(ok("tile", &[f32(&[2, 3])], &r(&[2, 1, 2])), f32(&[2, 2, 6]));
    assert_eq!(ok("tile", &[f32(&[2, 3])], &r(&[0, 1])), f32(&[0, 3]));
    assert_err("tile", &[f32(&[2])], &r(&[-1]), "must not be negative");
    assert_err("tile", &[f32(&[i64::MAX])], &r(&[2]), "overflows");
}

#[test]
fn constants_check_their_values() {
    let c = |value: Attr, shape: &[i64], dtype: &str| {
        infer(
            "constant",
            &[],
            &[
                ("value", value),
                ("shape", ints(shape)),
                ("dtype", Attr::str(dtype)),
            ],
        )
    };
    assert_eq!(
        c(Attr::floats([1.0]), &[2, 2], "float32"),
        Ok(vec![f32(&[2, 2])])
    );
    assert_eq!(
        c(ints(&[1, 2, 3, 4]), &[2, 2], "int64"),
        Ok(vec![t(DType::I64, &[2, 2])])
    );
    assert_eq!(
        c(Attr::floats([0.5]), &[], "float16"),
        Ok(vec![t(DType::F16, &[])])
    );
    assert_eq!(
        c(Attr::floats([2.0, 3.0]), &[2], "int32"),
        Ok(vec![t(DType::I32, &[2])])
    );
    assert!(c(ints(&[1, 2, 3]), &[2, 2], "int64")
        .unwrap_err()
        .contains("has 3 elements"));
    assert!(c(Attr::floats([1.5]), &[1], "int64")
        .unwrap_err()
        .contains("non-integral"));
    assert!(c(Attr::floats([1.0]), &[1], "f32")
        .unwrap_err()
        .contains("unknown dtype"));
    assert!(c(Attr::floats([1.0]), &[-1], "float32")
        .unwrap_err()
        .contains("must not be negative"));
    assert!(c(Attr::floats([1.0]), &[i64::MAX, 4], "float32")
        .unwrap_err()
        .contains("overflows"));
    assert!(c(Attr::Float(1.0), &[1], "float32")
        .unwrap_err()
        .contains("list of numbers"));
    assert!(infer("constant", &[f32(&[1])], &[])
        .unwrap_err()
        .contains("takes 0 operands"));
}

// ---- the registry as a whole -------------------------------------------------------------

#[test]
fn registry_is_consistent() {
    let names: std::collections::HashSet<&str> = Op::all().map(Op::name).collect();
    assert_eq!(names.len(), Op::all().count(), "op names are unique");
    for op in Op::all() {
        let def = op.def();
        assert_eq!(Op::lookup(def.name), Some(op));
        assert!(!def.summary.is_empty(), "{} has a summary", def.name);
        for (i, spec) in def.attrs.iter().enumerate() {
            assert!(
                def.attrs[..i].iter().all(|s| s.name != spec.name),
                "{}: attribute {} is declared twice",
                def.name,
                spec.name
            );
            if let Some(v) = spec.default.value() {
                assert!(
                    spec.kind.accepts(&v),
                    "{}: default of {} has the wrong kind",
                    def.name,
                    spec.name
                );
            }
        }
    }
    assert_eq!(Op::lookup("nn.conv3d"), None);
}

#[test]
fn negative_extents_are_rejected_before_inference() {
    assert_err(
        "add",
        &[f32(&[-1]), f32(&[1])],
        &[],
        "operand 0 has a negative extent",
    );
    assert_err(
        "nn.conv2d",
        &[f32(&[1, 3, 8, 8]), f32(&[4, 3, -3, 3])],
        &[],
        "operand 1 has a negative extent",
    );
    assert_err("add", &[f32(&[1])], &[], "'add' takes 2 operands, got 1");
}

#[test]
fn defaults_filled_in_infer_the_same() {
    let op = Op::lookup("nn.conv2d").unwrap();
    let given = attrs(&[("strides", ints(&[2, 2])), ("padding", ints(&[3]))]);
    let full = op.with_defaults(&given);
    assert_eq!(full.get("groups"), Some(&Attr::Int(1)));
    assert_eq!(full.get("kernel_layout"), Some(&Attr::str("OIHW")));
    assert!(
        !full.contains_key("out_dtype"),
        "optional attributes stay absent"
    );
    let operands = [f32(&[1, 3, 224, 224]), f32(&[64, 3, 7, 7])];
    let refs: Vec<&TensorType> = operands.iter().collect();
    assert_eq!(op.infer(&refs, &full), op.infer(&refs, &given));
    let roi = Op::lookup("image.resize2d")
        .unwrap()
        .with_defaults(&Attrs::new());
    assert_eq!(roi.get("roi"), Some(&Attr::floats([0.0; 4])));
}

mod never_panics {
    //! Random operand types and attributes of every kind, including extreme values, for every
    //! op: inference returns a result or a message, and results never have negative extents.

    use super::*;
    use proptest::prelude::*;

    fn extent() -> impl Strategy<Value = i64> {
        prop_oneof![
            4 => 0i64..8,
            1 => Just(64i64),
            1 => Just(i64::MAX),
            1 => Just(i64::MAX / 2 + 1),
            1 => Just(-1i64),
        ]
    }

    fn int() -> impl Strategy<Value = i64> {
        prop_oneof![4 => -4i64..8, 1 => Just(i64::MAX), 1 => Just(i64::MIN), 1 => Just(1i64 << 40)]
    }

    fn tensor() -> impl Strategy<Value = TensorType> {
        (
            prop::sample::select(DType::ALL.to_vec()),
            prop::collection::vec(extent(), 0..6),
        )
            .prop_map(|(d, s)| TensorType::new(d, s))
    }

    fn string() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "NCHW",
            "NHWC",
            "OIHW",
            "HWIO",
            "IOHW",
            "NCHW8c",
            "",
            "float32",
            "int8",
            "bool",
            "f32",
            "linear",
            "constant",
            "fast",
            "half_pixel",
            "round",
            "ÑCHW",
        ])
        .prop_map(str::to_string)
    }

    fn attr_value(kind: AttrKind) -> BoxedStrategy<Attr> {
        let ints = || prop::collection::vec(int(), 0..9).prop_map(Attr::ints);
        let any = prop_oneof![
            int().prop_map(Attr::Int),
            any::<f64>().prop_map(Attr::Float),
            string().prop_map(Attr::Str),
            any::<bool>().prop_map(Attr::Bool),
            ints(),
        ];
        // Mostly the declared kind, so inference gets past the kind checks.
        match kind {
            AttrKind::Int => prop_oneof![3 => int().prop_map(Attr::Int), 1 => any].boxed(),
            AttrKind::IntList | AttrKind::IntOrIntList => prop_oneof![
                3 => ints(),
                1 => int().prop_map(Attr::Int),
                1 => any
            ]
            .boxed(),
            AttrKind::Str => prop_oneof![3 => string().prop_map(Attr::Str), 1 => any].boxed(),
            _ => any.boxed(),
        }
    }

    fn case() -> impl Strategy<Value = (Op, Vec<TensorType>, Attrs)> {
        prop::sample::select(Op::all().collect::<Vec<_>>()).prop_flat_map(|op| {
            let def = op.def();
            let n = def.inputs.min..=def.inputs.max.unwrap_or(def.inputs.min + 3);
            let specs: Vec<_> = def
                .attrs
                .iter()
                .map(|s| {
                    let name = s.name.to_string();
                    let absent_ok = !matches!(s.default, AttrDefault::Required);
                    prop::option::weighted(if absent_ok { 0.5 } else { 0.9 }, attr_value(s.kind))
                        .prop_map(move |v| (name.clone(), v))
                })
                .collect();
            (Just(op), prop::collection::vec(tensor(), n), specs).prop_map(|(op, ts, specs)| {
                let attrs = specs
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k, v)))
                    .collect();
                (op, ts, attrs)
            })
        })
    }

    /// One valid application of every op, as the start for mutations.
    fn seeds() -> Vec<(&'static str, Vec<TensorType>, Attrs)> {
        let b = || t(DType::Bool, &[2, 1]);
        let i = |shape: &[i64]| t(DType::I64, shape);
        let v = |a: &[(&str, Attr)]| attrs(a);
        let x = || f32(&[2, 3, 4]);
        let mut out = vec![
            (
                "nn.conv2d",
                vec![f32(&[1, 4, 9, 9]), f32(&[8, 2, 3, 3])],
                v(&[
                    ("strides", ints(&[2, 1])),
                    ("padding", ints(&[1, 0, 2, 1])),
                    ("dilation", ints(&[1, 2])),
                    ("groups", Attr::Int(2)),
                ]),
            ),
            (
                "nn.conv2d",
                vec![f32(&[1, 9, 9, 4]), f32(&[3, 3, 4, 8])],
                v(&[
                    ("data_layout", Attr::str("NHWC")),
                    ("kernel_layout", Attr::str("HWIO")),
                    ("out_layout", Attr::str("NCHW")),
                ]),
            ),
            (
                "nn.conv2d_transpose",
                vec![f32(&[1, 4, 5, 5]), f32(&[4, 2, 3, 3])],
                v(&[
                    ("strides", ints(&[2, 3])),
                    ("padding", ints(&[1])),
                    ("output_padding", ints(&[1, 2])),
                    ("groups", Attr::Int(2)),
                ]),
            ),
            ("matmul", vec![f32(&[5, 1, 2, 3]), f32(&[4, 3, 6])], v(&[])),
            ("matmul", vec![f32(&[3]), f32(&[2, 3, 4])], v(&[])),
            (
                "nn.dense",
                vec![f32(&[2, 8, 5]), f32(&[7, 5])],
                v(&[("units", Attr::Int(7))]),
            ),
            (
                "nn.batch_matmul",
                vec![f32(&[1, 5, 6]), f32(&[4, 7, 6])],
                v(&[]),
            ),
            (
                "clip",
                vec![x()],
                v(&[("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))]),
            ),
            ("astype", vec![x()], v(&[("dtype", Attr::str("int8"))])),
            ("where", vec![b(), f32(&[1, 3]), f32(&[])], v(&[])),
            (
                "sum",
                vec![x()],
                v(&[("axis", ints(&[0, -1])), ("keepdims", Attr::Bool(true))]),
            ),
            ("argmax", vec![x()], v(&[("axis", Attr::Int(1))])),
            (
                "nn.batch_norm",
                vec![
                    f32(&[1, 3, 2, 2]),
                    f32(&[3]),
                    f32(&[3]),
                    f32(&[3]),
                    f32(&[3]),
                ],
                v(&[]),
            ),
            (
                "nn.layer_norm",
                vec![x(), f32(&[3, 4]), f32(&[3, 4])],
                v(&[("axes", ints(&[1, 2]))]),
            ),
            ("nn.softmax", vec![x()], v(&[("axis", Attr::Int(1))])),
            (
                "nn.max_pool2d",
                vec![f32(&[1, 3, 7, 7])],
                v(&[
                    ("pool_size", ints(&[3, 2])),
                    ("strides", ints(&[2])),
                    ("padding", ints(&[1])),
                    ("ceil_mode", Attr::Bool(true)),
                ]),
            ),
            (
                "nn.avg_pool2d",
                vec![f32(&[1, 7, 7, 3])],
                v(&[("pool_size", ints(&[2])), ("layout", Attr::str("NHWC"))]),
            ),
            (
                "nn.adaptive_avg_pool2d",
                vec![f32(&[1, 3, 7, 7])],
                v(&[("output_size", ints(&[2, 3]))]),
            ),
            ("reshape", vec![x()], v(&[("shape", ints(&[4, -1]))])),
            ("permute_dims", vec![x()], v(&[("axes", ints(&[2, 0, 1]))])),
            (
                "concat",
                vec![x(), f32(&[2, 5, 4])],
                v(&[("axis", Attr::Int(1))]),
            ),
            (
                "split",
                vec![f32(&[2, 10])],
                v(&[
                    ("indices_or_sections", Attr::Int(3)),
                    ("axis", Attr::Int(1)),
                ]),
            ),
            (
                "split",
                vec![f32(&[2, 10])],
                v(&[
                    ("indices_or_sections", ints(&[2, 7])),
                    ("axis", Attr::Int(1)),
                ]),
            ),
            (
                "strided_slice",
                vec![x()],
                v(&[
                    ("axes", ints(&[0, 2])),
                    ("begin", ints(&[1, -1])),
                    ("end", ints(&[2, 0])),
                    ("strides", ints(&[1, -1])),
                ]),
            ),
            (
                "nn.pad",
                vec![x()],
                v(&[("pad_width", ints(&[0, 1, 2, 3, 4, 5]))]),
            ),
            (
                "image.resize2d",
                vec![f32(&[1, 3, 4, 4])],
                v(&[("size", ints(&[8, 6]))]),
            ),
            ("squeeze", vec![f32(&[1, 3, 1])], v(&[("axis", ints(&[0]))])),
            ("expand_dims", vec![x()], v(&[("axis", ints(&[0, -1]))])),
            ("take", vec![x(), i(&[2, 2])], v(&[("axis", Attr::Int(1))])),
            (
                "broadcast_to",
                vec![f32(&[3, 1])],
                v(&[("shape", ints(&[2, 3, 4]))]),
            ),
            (
                "tile",
                vec![f32(&[2, 3])],
                v(&[("repeats", ints(&[2, 1, 2]))]),
            ),
            (
                "constant",
                vec![],
                v(&[
                    ("value", Attr::floats([1.0])),
                    ("shape", ints(&[2, 3])),
                    ("dtype", Attr::str("float32")),
                ]),
            ),
        ];
        // The simple families with their own shapes.
        for op in ["add", "less", "exp", "flatten", "nn.relu"] {
            let operands = if Op::lookup(op).unwrap().def().inputs.min == 2 {
                vec![f32(&[2, 1, 4]), f32(&[3, 1])]
            } else {
                vec![x()]
            };
            out.push((op, operands, v(&[])));
        }
        out
    }

    #[test]
    fn seeds_are_valid() {
        for (op, operands, a) in seeds() {
            let refs: Vec<&TensorType> = operands.iter().collect();
            let r = Op::lookup(op).unwrap().infer(&refs, &a);
            assert!(r.is_ok(), "seed {op}: {r:?}");
        }
    }

    /// A change to a valid case: one extent, one integer inside an attribute, one dtype.
    #[derive(Clone, Debug)]
    enum Mutation {
        Extent {
            operand: usize,
            dim: usize,
            value: i64,
        },
        AttrInt {
            attr: usize,
            index: usize,
            value: i64,
        },
        DType {
            operand: usize,
            dtype: DType,
        },
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), any::<usize>(), extent()).prop_map(|(operand, dim, value)| {
                Mutation::Extent {
                    operand,
                    dim,
                    value,
                }
            }),
            (any::<usize>(), any::<usize>(), int())
                .prop_map(|(attr, index, value)| Mutation::AttrInt { attr, index, value }),
            (any::<usize>(), prop::sample::select(DType::ALL.to_vec()))
                .prop_map(|(operand, dtype)| Mutation::DType { operand, dtype }),
        ]
    }

    fn apply(operands: &mut [TensorType], a: &mut Attrs, m: &Mutation) {
        match *m {
            Mutation::Extent {
                operand,
                dim,
                value,
            } if !operands.is_empty() => {
                let t = &mut operands[operand % operands.len()];
                if !t.shape.is_empty() {
                    let n = t.shape.len();
                    t.shape[dim % n] = value;
                }
            }
            Mutation::AttrInt { attr, index, value } if !a.is_empty() => {
                let n = a.len();
                let (_, v) = a.get_index_mut(attr % n).unwrap();
                match v {
                    Attr::List(items) if !items.is_empty() => {
                        let k = items.len();
                        items[index % k] = Attr::Int(value);
                    }
                    Attr::Int(x) => *x = value,
                    _ => {}
                }
            }
            Mutation::DType { operand, dtype } if !operands.is_empty() => {
                let n = operands.len();
                operands[operand % n].dtype = dtype;
            }
            _ => {}
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]
        #[test]
        fn inference_is_total((op, operands, attrs) in case()) {
            let refs: Vec<&TensorType> = operands.iter().collect();
            if let Ok(results) = op.infer(&refs, &attrs) {
                prop_assert!(!results.is_empty(), "{} inferred no result", op);
                for r in &results {
                    prop_assert!(r.shape.iter().all(|&d| d >= 0), "{} inferred {}", op, r);
                }
            }
        }

        #[test]
        fn mutated_valid_cases_are_total(
            seed in any::<usize>(),
            mutations in prop::collection::vec(mutation(), 1..4),
        ) {
            let all = seeds();
            let (op, mut operands, mut a) = all[seed % all.len()].clone();
            for m in &mutations {
                apply(&mut operands, &mut a, m);
            }
            let op = Op::lookup(op).unwrap();
            let refs: Vec<&TensorType> = operands.iter().collect();
            if let Ok(results) = op.infer(&refs, &a) {
                for r in &results {
                    prop_assert!(r.shape.iter().all(|&d| d >= 0), "{} inferred {}", op, r);
                }
            }
        }
    }
}
