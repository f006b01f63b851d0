//! One converter per ONNX op: ONNX semantics (attributes, optional inputs, opset
//! differences) in, IR ops out, following what TVM's Relax `from_onnx` emits so that op counts
//! and tasks compare. Where TVM emits a TE function instead of a Relax op (`Clip`, `Pad`) we
//! emit the Relax op that computes the same (`clip`, `nn.pad`).
//!
//! Values an op needs at import time (Reshape's shape, Pad's pads, Clip's bounds, axes, ...)
//! must be constants after folding; every ONNX-level shape computation (Shape, Gather,
//! Concat, Unsqueeze, arithmetic, ...) folds because [`Importer::emit`] evaluates ops whose
//! operands are all constants.

use super::attrs::NodeAttrs;
use super::context::{Importer, Val};
use super::error::{bail, PResult};
use super::eval::{broadcast_shape, norm_axis, resolve_reshape, slice_range};
use super::tensor::{self, num_elements, round_to, Data, Tensor};
use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use onnx_protobuf::NodeProto;

/// A node being converted: its proto, its resolved inputs (`None` for an absent optional
/// input) and its attributes.
pub(crate) struct NodeIn<'m> {
    pub proto: &'m NodeProto,
    pub inputs: Vec<Option<Val<'m>>>,
    pub attrs: NodeAttrs<'m>,
}

impl<'m> NodeIn<'m> {
    /// A required input.
    fn input(&self, i: usize) -> PResult<Val<'m>> {
        match self.inputs.get(i) {
            Some(Some(v)) => Ok(v.clone()),
            _ => bail!("input #{i} is missing"),
        }
    }

    /// An optional input.
    fn opt(&self, i: usize) -> Option<Val<'m>> {
        self.inputs.get(i).cloned().flatten()
    }

    /// Whether the graph uses output `i`.
    fn wants_output(&self, i: usize) -> bool {
        self.proto.output.get(i).is_some_and(|o| !o.is_empty())
    }

    fn attr_int(&self, name: &str, default: i64) -> PResult<i64> {
        self.attrs.int_or(name, default)
    }
}

/// Converts one node; the result has one entry per ONNX output it produces (in order).
type Convert =
    for<'m, 'o, 'a> fn(&'a mut Importer<'m, 'o>, &'a NodeIn<'m>) -> PResult<Vec<Val<'m>>>;

/// Every supported ONNX op (default domain) and its converter.
static CONVERTERS: &[(&str, Convert)] = &[
    ("Abs", |cx, n| unary(cx, n, "abs")),
    ("Add", |cx, n| binary(cx, n, "add")),
    ("ArgMax", |cx, n| arg_reduce(cx, n, "argmax")),
    ("ArgMin", |cx, n| arg_reduce(cx, n, "argmin")),
    ("AveragePool", |cx, n| pool(cx, n, "nn.avg_pool2d")),
    ("BatchNormalization", batch_norm),
    ("Cast", cast),
    ("CastLike", cast_like),
    ("Ceil", |cx, n| unary(cx, n, "ceil")),
    ("Clip", clip),
    ("Concat", concat),
    ("Constant", constant),
    ("ConstantOfShape", constant_of_shape),
    ("Conv", conv),
    ("ConvTranspose", conv_transpose),
    ("Cos", |cx, n| unary(cx, n, "cos")),
    ("Div", |cx, n| binary(cx, n, "divide")),
    ("Dropout", dropout),
    ("Equal", |cx, n| binary(cx, n, "equal")),
    ("Erf", |cx, n| unary(cx, n, "erf")),
    ("Exp", |cx, n| unary(cx, n, "exp")),
    ("Expand", expand),
    ("Flatten", flatten),
    ("Floor", |cx, n| unary(cx, n, "floor")),
    ("Gather", gather),
    ("Gelu", gelu),
    ("Gemm", gemm),
    ("GlobalAveragePool", |cx, n| global_pool(cx, n, "mean")),
    ("GlobalMaxPool", |cx, n| global_pool(cx, n, "max")),
    ("Greater", |cx, n| binary(cx, n, "greater")),
    ("GreaterOrEqual", |cx, n| binary(cx, n, "greater_equal")),
    ("HardSigmoid", hard_sigmoid),
    ("HardSwish", hard_swish),
    ("Identity", identity),
    ("LayerNormalization", layer_norm),
    ("LeakyRelu", leaky_relu),
    ("Less", |cx, n| binary(cx, n, "less")),
    ("LessOrEqual", |cx, n| binary(cx, n, "less_equal")),
    ("Log", |cx, n| unary(cx, n, "log")),
    ("LogSoftmax", |cx, n| softmax(cx, n, "nn.log_softmax")),
    ("MatMul", |cx, n| binary(cx, n, "matmul")),
    ("Max", |cx, n| variadic(cx, n, "maximum")),
    ("MaxPool", |cx, n| pool(cx, n, "nn.max_pool2d")),
    ("Mean", |cx, n| variadic(cx, n, "mean")),
    ("Min", |cx, n| variadic(cx, n, "minimum")),
    ("Mul", |cx, n| binary(cx, n, "multiply")),
    ("Neg", |cx, n| unary(cx, n, "negative")),
    ("Pad", pad),
    ("Pow", pow),
    ("Range", range),
    ("ReduceMax", |cx, n| reduce(cx, n, "max", 18)),
    ("ReduceMean", |cx, n| reduce(cx, n, "mean", 18)),
    ("ReduceMin", |cx, n| reduce(cx, n, "min", 18)),
    ("ReduceProd", |cx, n| reduce(cx, n, "prod", 18)),
    ("ReduceSum", |cx, n| reduce(cx, n, "sum", 13)),
    ("Relu", |cx, n| unary(cx, n, "nn.relu")),
    ("Reshape", reshape),
    ("Resize", resize),
    ("Round", |cx, n| unary(cx, n, "round")),
    ("Shape", shape),
    ("Sigmoid", |cx, n| unary(cx, n, "sigmoid")),
    ("Sin", |cx, n| unary(cx, n, "sin")),
    ("Size", size),
    ("Slice", slice),
    ("Softmax", |cx, n| softmax(cx, n, "nn.softmax")),
    ("Split", split),
    ("Sqrt", |cx, n| unary(cx, n, "sqrt")),
    ("Squeeze", squeeze),
    ("Sub", |cx, n| binary(cx, n, "subtract")),
    ("Sum", |cx, n| variadic(cx, n, "add")),
    ("Tanh", |cx, n| unary(cx, n, "tanh")),
    ("Tile", tile),
    ("Transpose", transpose),
    ("Unsqueeze", unsqueeze),
    ("Where", where_),
];

/// The ONNX ops the frontend converts, in alphabetical order.
pub fn supported_ops() -> impl Iterator<Item = &'static str> {
    CONVERTERS.iter().map(|(name, _)| *name)
}

/// Converts `n` with the converter of its op type.
pub(crate) fn convert<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let op_type = n.proto.op_type.as_str();
    match CONVERTERS.binary_search_by(|(name, _)| (*name).cmp(op_type)) {
        Ok(i) => (CONVERTERS[i].1)(cx, n),
        Err(_) => bail!("unsupported op"),
    }
}

// ---- helpers ------------------------------------------------------------------------------

fn attrs<const N: usize>(kv: [(&str, Attr); N]) -> Attrs {
    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// A scalar constant of `dtype`.
fn scalar<'m>(dtype: DType, v: f64) -> Val<'m> {
    let t = if dtype.is_float() {
        Tensor::scalar_f(dtype, v)
    } else {
        Tensor::ints(dtype, Vec::new(), vec![tensor::wrap_int(dtype, v as i64)])
    };
    Val::computed("", t)
}

/// Geometry attributes (kernel sizes, strides, pads, dilations) must be in a sane range so
/// that shape arithmetic downstream cannot overflow.
fn check_range(v: &[i64], what: &str, min: i64) -> PResult<()> {
    const MAX: i64 = 1 << 24;
    if let Some(x) = v.iter().find(|x| !(min..=MAX).contains(*x)) {
        bail!("{what} value {x} is out of range ({min} to {MAX})");
    }
    Ok(())
}

fn check_len(v: &[i64], n: usize, what: &str) -> PResult<()> {
    if v.len() != n {
        bail!("{what} must have {n} values, got {}", v.len());
    }
    Ok(())
}

fn product(dims: &[i64]) -> PResult<i64> {
    Ok(num_elements(dims)? as i64)
}

/// Normalizes a list of axes against `rank`, rejecting repeats; keeps the given order.
fn norm_axes(axes: &[i64], rank: usize) -> PResult<Vec<i64>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let ax = norm_axis(a, rank)? as i64;
        if out.contains(&ax) {
            bail!("axis {a} is given twice");
        }
        out.push(ax);
    }
    Ok(out)
}

/// The node's axes: an attribute before `input_opset`, the optional input #1 from then on.
fn axes_of<'m>(
    cx: &Importer<'m, '_>,
    n: &NodeIn<'m>,
    input_opset: i64,
) -> PResult<Option<Vec<i64>>> {
    if cx.opset < input_opset {
        n.attrs.ints("axes")
    } else {
        match n.opt(1) {
            Some(v) => Ok(Some(cx.const_ints(&v, "axes")?)),
            None => Ok(None),
        }
    }
}

fn require_rank<'m>(cx: &Importer<'m, '_>, v: &Val<'m>, rank: usize, what: &str) -> PResult<()> {
    let r = cx.rank(v);
    if r != rank {
        bail!("{what} must have rank {rank}, got rank {r}");
    }
    Ok(())
}

/// Emits a chain of ops, each taking the previous result as its first operand; the last one
/// is named after the node's output.
fn chain<'m>(
    cx: &mut Importer<'m, '_>,
    mut v: Val<'m>,
    steps: Vec<(&str, Vec<Val<'m>>, Attrs)>,
) -> PResult<Vec<Val<'m>>> {
    let last = steps.len();
    for (i, (op, rest, a)) in steps.into_iter().enumerate() {
        let mut operands = vec![v];
        operands.extend(rest);
        if i + 1 == last {
            return cx.out1(op, &operands, a);
        }
        v = cx.op(op, &operands, a)?;
    }
    Ok(vec![v])
}

// ---- elementwise ---------------------------------------------------------------------------

fn unary<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>, op: &str) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    cx.out1(op, &[x], Attrs::new())
}

fn binary<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>, op: &str) -> PResult<Vec<Val<'m>>> {
    let (a, b) = (n.input(0)?, n.input(1)?);
    cx.out1(op, &[a, b], Attrs::new())
}

fn pow<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let (x, mut y) = (n.input(0)?, n.input(1)?);
    // ONNX lets the exponent have its own dtype; Relax `power` wants one dtype.
    let dtype = cx.ty(&x).dtype;
    if cx.ty(&y).dtype != dtype {
        y = cx.op(
            "astype",
            &[y],
            attrs([("dtype", Attr::str(dtype.tvm_name()))]),
        )?;
    }
    cx.out1("power", &[x, y], Attrs::new())
}

fn where_<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let operands = [n.input(0)?, n.input(1)?, n.input(2)?];
    cx.out1("where", &operands, Attrs::new())
}

/// `Sum`, `Max`, `Min`, `Mean` of any number of inputs: a chain of binary ops (TVM stacks
/// broadcast copies and reduces; the chain computes the same with fewer ops).
fn variadic<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>, op: &str) -> PResult<Vec<Val<'m>>> {
    let inputs: Vec<Val<'m>> = n.inputs.iter().flatten().cloned().collect();
    let Some(first) = inputs.first().cloned() else {
        bail!("needs at least one input")
    };
    let bin = if op == "mean" { "add" } else { op };
    let mut steps: Vec<(&str, Vec<Val<'m>>, Attrs)> = inputs[1..]
        .iter()
        .map(|v| (bin, vec![v.clone()], Attrs::new()))
        .collect();
    if op == "mean" && inputs.len() > 1 {
        let count = scalar(cx.ty(&first).dtype, inputs.len() as f64);
        steps.push(("divide", vec![count], Attrs::new()));
    }
    if steps.is_empty() {
        return Ok(vec![first]);
    }
    chain(cx, first, steps)
}

fn leaky_relu<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let alpha = n.attrs.float_or("alpha", 0.01)?;
    cx.out1(
        "nn.leakyrelu",
        &[n.input(0)?],
        attrs([("alpha", Attr::Float(alpha))]),
    )
}

fn gelu<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    match n.attrs.string_or("approximate", "none")?.as_str() {
        "none" => unary(cx, n, "nn.gelu"),
        "tanh" => unary(cx, n, "nn.gelu_tanh"),
        other => bail!("approximate = '{other}' is not supported"),
    }
}

/// `clip(alpha * x + beta, 0, 1)`, as TVM writes it.
fn hard_sigmoid<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let dtype = cx.ty(&x).dtype;
    let alpha = scalar(dtype, n.attrs.float_or("alpha", 0.2)?);
    let beta = scalar(dtype, n.attrs.float_or("beta", 0.5)?);
    let scaled = cx.op("multiply", &[alpha, x], Attrs::new())?;
    chain(
        cx,
        scaled,
        vec![
            ("add", vec![beta], Attrs::new()),
            (
                "clip",
                vec![],
                attrs([("min", Attr::Float(0.0)), ("max", Attr::Float(1.0))]),
            ),
        ],
    )
}

/// `x * clip(x + 3, 0, 6) / 6`, as TVM writes it.
fn hard_swish<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let dtype = cx.ty(&x).dtype;
    let shifted = cx.op("add", &[x.clone(), scalar(dtype, 3.0)], Attrs::new())?;
    let clipped = cx.op(
        "clip",
        &[shifted],
        attrs([("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))]),
    )?;
    let scaled = cx.op("divide", &[clipped, scalar(dtype, 6.0)], Attrs::new())?;
    cx.out1("multiply", &[x, scaled], Attrs::new())
}

/// A bound of `Clip`: known at import time, or a run-time value.
enum Bound<'m> {
    Known(f64),
    Value(Val<'m>),
}

/// TVM's ONNX frontend clamps with `maximum` then `minimum`. From opset 11 on the bounds are
/// inputs, read from rank-0 tensors: a known pair (or one known bound) is `clip` with
/// `tensor_bounds = true`, which lowers to that workload, an absent bound infinite. Before
/// opset 11 they are attributes written into the TIR, an absent one as an infinity: a
/// `maximum` and a `minimum` by scalar constants, which lower to immediates as TVM's do.
fn clip<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let dtype = cx.ty(&x).dtype;
    if cx.opset < 11 {
        let lo = n.attrs.float("min")?.unwrap_or(f64::NEG_INFINITY);
        let hi = n.attrs.float("max")?.unwrap_or(f64::INFINITY);
        let steps = vec![
            ("maximum", vec![scalar(dtype, lo)], Attrs::new()),
            ("minimum", vec![scalar(dtype, hi)], Attrs::new()),
        ];
        return chain(cx, x, steps);
    }
    let bound = |cx: &Importer<'m, '_>, i: usize, name: &str| -> PResult<Option<Bound<'m>>> {
        let Some(v) = n.opt(i) else { return Ok(None) };
        Ok(match cx.try_const(&v)? {
            // ONNX Runtime treats a NaN bound as no bound.
            Some(_) => Some(Bound::Known(cx.const_scalar(&v, name)?))
                .filter(|b| !matches!(b, Bound::Known(v) if v.is_nan())),
            None => Some(Bound::Value(v)),
        })
    };
    let lo = bound(cx, 1, "min")?;
    let hi = bound(cx, 2, "max")?;
    let known = |b: &Option<Bound<'m>>| !matches!(b, Some(Bound::Value(_)));
    match (lo, hi) {
        (None, None) => Ok(vec![x]),
        (lo, hi) if known(&lo) && known(&hi) => {
            let value = |b: Option<Bound<'m>>, none: f64| match b {
                Some(Bound::Known(v)) => v,
                _ => none,
            };
            let a = attrs([
                ("min", Attr::Float(value(lo, f64::NEG_INFINITY))),
                ("max", Attr::Float(value(hi, f64::INFINITY))),
                ("tensor_bounds", Attr::Bool(true)),
            ]);
            cx.out1("clip", &[x], a)
        }
        (lo, hi) => {
            let as_val = |b: Bound<'m>| match b {
                Bound::Known(v) => scalar(dtype, v),
                Bound::Value(v) => v,
            };
            let mut steps = Vec::new();
            if let Some(lo) = lo {
                steps.push(("maximum", vec![as_val(lo)], Attrs::new()));
            }
            if let Some(hi) = hi {
                steps.push(("minimum", vec![as_val(hi)], Attrs::new()));
            }
            chain(cx, x, steps)
        }
    }
}

fn identity<'m>(_cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    Ok(vec![n.input(0)?])
}

/// Inference: the identity. The mask output is not supported.
fn dropout<'m>(_cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    if n.wants_output(1) {
        bail!("the mask output is not supported");
    }
    Ok(vec![n.input(0)?])
}

fn cast<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let Some(to) = n.attrs.int("to")? else {
        bail!("attribute 'to' is missing")
    };
    let dtype = tensor::dtype_of(to as i32)?;
    cast_to(cx, n.input(0)?, dtype)
}

fn cast_like<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let dtype = cx.ty(&n.input(1)?).dtype;
    cast_to(cx, n.input(0)?, dtype)
}

/// `astype`, or nothing for a cast to the same dtype.
fn cast_to<'m>(cx: &mut Importer<'m, '_>, x: Val<'m>, dtype: DType) -> PResult<Vec<Val<'m>>> {
    if cx.ty(&x).dtype == dtype {
        return Ok(vec![x]);
    }
    cx.out1(
        "astype",
        &[x],
        attrs([("dtype", Attr::str(dtype.tvm_name()))]),
    )
}

// ---- linear algebra and convolution --------------------------------------------------------

/// `alpha * A' B' + beta * C`, as TVM writes it: multiply A by alpha, transpose, matmul, add.
fn gemm<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let (mut a, mut b) = (n.input(0)?, n.input(1)?);
    require_rank(cx, &a, 2, "A")?;
    require_rank(cx, &b, 2, "B")?;
    let alpha = n.attrs.float_or("alpha", 1.0)?;
    let beta = n.attrs.float_or("beta", 1.0)?;
    let dtype = cx.ty(&a).dtype;
    let t = || attrs([("axes", Attr::ints([1, 0]))]);
    if alpha != 1.0 {
        a = cx.op("multiply", &[a, scalar(dtype, alpha)], Attrs::new())?;
    }
    if n.attr_int("transA", 0)? != 0 {
        a = cx.op("permute_dims", &[a], t())?;
    }
    if n.attr_int("transB", 0)? != 0 {
        b = cx.op("permute_dims", &[b], t())?;
    }
    let Some(mut c) = n.opt(2) else {
        return cx.out1("matmul", &[a, b], Attrs::new());
    };
    let y = cx.op("matmul", &[a, b], Attrs::new())?;
    if beta != 1.0 {
        c = cx.op("multiply", &[c, scalar(dtype, beta)], Attrs::new())?;
    }
    cx.out1("add", &[y, c], Attrs::new())
}

/// Common attributes of `Conv` and `ConvTranspose` for a 2-D (4-D input) convolution.
struct ConvGeometry {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads: Vec<i64>,
    auto_pad: String,
    group: i64,
}

fn conv_geometry<'m>(cx: &Importer<'m, '_>, n: &NodeIn<'m>, w: &Val<'m>) -> PResult<ConvGeometry> {
    let x = n.input(0)?;
    let r = cx.rank(&x);
    if r != 4 {
        bail!("only 2-D convolution (4-D input) is supported, got a rank-{r} input");
    }
    require_rank(cx, w, 4, "the weight")?;
    let w_shape = cx.shape(w);
    let kernel = n
        .attrs
        .ints("kernel_shape")?
        .unwrap_or_else(|| w_shape[2..].to_vec());
    check_len(&kernel, 2, "kernel_shape")?;
    if kernel != w_shape[2..] {
        bail!("kernel_shape {kernel:?} does not match the weight shape {w_shape:?}");
    }
    let strides = n.attrs.ints("strides")?.unwrap_or_else(|| vec![1, 1]);
    let dilations = n.attrs.ints("dilations")?.unwrap_or_else(|| vec![1, 1]);
    let pads = n.attrs.ints("pads")?.unwrap_or_else(|| vec![0; 4]);
    check_len(&strides, 2, "strides")?;
    check_len(&dilations, 2, "dilations")?;
    check_len(&pads, 4, "pads")?;
    check_range(&strides, "strides", 1)?;
    check_range(&dilations, "dilations", 1)?;
    check_range(&pads, "pads", 0)?;
    let group = n.attr_int("group", 1)?;
    check_range(&[group], "group", 1)?;
    let auto_pad = n.attrs.string_or("auto_pad", "NOTSET")?;
    if !matches!(
        auto_pad.as_str(),
        "NOTSET" | "SAME_UPPER" | "SAME_LOWER" | "VALID"
    ) {
        bail!("auto_pad = '{auto_pad}' is not valid");
    }
    Ok(ConvGeometry {
        kernel,
        strides,
        dilations,
        pads,
        auto_pad,
        group,
    })
}

/// `reshape(bias, [1, C, 1, 1])` added to `y`, as TVM does for conv biases.
fn add_channel_bias<'m>(
    cx: &mut Importer<'m, '_>,
    y: Val<'m>,
    bias: Val<'m>,
) -> PResult<Vec<Val<'m>>> {
    let c = product(&cx.shape(&bias))?;
    let b = cx.op(
        "reshape",
        &[bias],
        attrs([("shape", Attr::ints([1, c, 1, 1]))]),
    )?;
    cx.out1("add", &[y, b], Attrs::new())
}

fn conv<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let (mut x, w) = (n.input(0)?, n.input(1)?);
    let g = conv_geometry(cx, n, &w)?;
    let mut pads = g.pads.clone();
    match g.auto_pad.as_str() {
        "VALID" => pads = vec![0; 4],
        "SAME_UPPER" | "SAME_LOWER" => {
            // TVM pads the data with a separate op and convolves without padding.
            let in_shape = cx.shape(&x);
            let mut width = vec![0i64; 4];
            for i in 0..2 {
                let (size, s) = (in_shape[2 + i], g.strides[i]);
                let dk = (g.kernel[i] - 1) * g.dilations[i] + 1;
                let rem = size % s;
                let total = if rem == 0 {
                    (dk - s).max(0)
                } else {
                    (dk - rem).max(0)
                };
                let (before, after) = (total / 2, total - total / 2);
                let (before, after) = if g.auto_pad == "SAME_LOWER" {
                    (after, before)
                } else {
                    (before, after)
                };
                width[2 * i] = before;
                width[2 * i + 1] = after;
            }
            if width.iter().any(|p| *p != 0) {
                let mut pad_width = vec![0, 0, 0, 0];
                pad_width.extend(width);
                let a = attrs([
                    ("pad_width", Attr::ints(pad_width)),
                    ("pad_mode", Attr::str("constant")),
                    ("pad_value", Attr::Float(0.0)),
                ]);
                x = cx.op("nn.pad", &[x], a)?;
            }
            pads = vec![0; 4];
        }
        _ => {}
    }
    let a = attrs([
        ("strides", Attr::ints(g.strides)),
        ("padding", Attr::ints(pads)),
        ("dilation", Attr::ints(g.dilations)),
        ("groups", Attr::Int(g.group)),
        ("data_layout", Attr::str("NCHW")),
        ("kernel_layout", Attr::str("OIHW")),
    ]);
    match n.opt(2) {
        None => cx.out1("nn.conv2d", &[x, w], a),
        Some(bias) => {
            let y = cx.op("nn.conv2d", &[x, w], a)?;
            add_channel_bias(cx, y, bias)
        }
    }
}

fn conv_transpose<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let (x, w) = (n.input(0)?, n.input(1)?);
    let g = conv_geometry(cx, n, &w)?;
    let output_padding = n
        .attrs
        .ints("output_padding")?
        .unwrap_or_else(|| vec![0, 0]);
    check_len(&output_padding, 2, "output_padding")?;
    check_range(&output_padding, "output_padding", 0)?;
    let in_shape = cx.shape(&x);
    let dk = |i: usize| (g.kernel[i] - 1) * g.dilations[i] + 1;
    let split = |total: i64, upper: bool| {
        if upper {
            (total / 2, total - total / 2)
        } else {
            (total - total / 2, total / 2)
        }
    };
    let mut pads = g.pads.clone();
    if let Some(out) = n.attrs.ints("output_shape")? {
        // The spec derives the pads from the requested output size.
        let out = match out.len() {
            2 => out,
            4 => out[2..].to_vec(),
            l => bail!("output_shape must have 2 or 4 values, got {l}"),
        };
        check_range(&out, "output_shape", 1)?;
        for i in 0..2 {
            let total = g.strides[i] * (in_shape[2 + i] - 1) + output_padding[i] + dk(i) - out[i];
            if total < 0 {
                bail!("output_shape {out:?} needs negative padding, which is not supported");
            }
            let (b, e) = split(total, g.auto_pad == "SAME_UPPER");
            pads[i] = b;
            pads[i + 2] = e;
        }
    } else {
        match g.auto_pad.as_str() {
            "VALID" => pads = vec![0; 4],
            "SAME_UPPER" | "SAME_LOWER" => {
                for i in 0..2 {
                    let total = (dk(i) + output_padding[i] - g.strides[i]).max(0);
                    let (b, e) = split(total, g.auto_pad == "SAME_UPPER");
                    pads[i] = b;
                    pads[i + 2] = e;
                }
            }
            _ => {}
        }
    }
    let a = attrs([
        ("strides", Attr::ints(g.strides)),
        ("padding", Attr::ints(pads)),
        ("output_padding", Attr::ints(output_padding)),
        ("dilation", Attr::ints(g.dilations)),
        ("groups", Attr::Int(g.group)),
        ("data_layout", Attr::str("NCHW")),
        ("kernel_layout", Attr::str("IOHW")),
    ]);
    match n.opt(2) {
        None => cx.out1("nn.conv2d_transpose", &[x, w], a),
        Some(bias) => {
            let y = cx.op("nn.conv2d_transpose", &[x, w], a)?;
            add_channel_bias(cx, y, bias)
        }
    }
}

// ---- normalization -------------------------------------------------------------------------

/// Inference batch norm, decomposed exactly as TVM's `DecomposeOpsForInference` does:
/// `(x - mean) / sqrt(var + eps) * gamma + beta`, every per-channel tensor expanded to the
/// data's rank. With constant statistics the expansions and `sqrt(var + eps)` fold.
fn batch_norm<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    if n.attr_int("training_mode", 0)? != 0 || (1..5).any(|i| n.wants_output(i)) {
        bail!("training mode (running statistics outputs) is not supported");
    }
    if n.attrs.has("spatial") && n.attr_int("spatial", 1)? == 0 {
        bail!("spatial = 0 is not supported");
    }
    let x = n.input(0)?;
    let [gamma, beta, mean, var] = [n.input(1)?, n.input(2)?, n.input(3)?, n.input(4)?];
    let rank = cx.rank(&x);
    if rank < 2 {
        bail!("the input must have rank 2 or more, got {rank}");
    }
    let dtype = cx.ty(&x).dtype;
    let eps = n.attrs.float_or("epsilon", 1e-5)?;
    let expand_axes: Vec<i64> = (0..rank as i64).filter(|a| *a != 1).collect();
    let expand = |cx: &mut Importer<'m, '_>, v: Val<'m>| {
        cx.op(
            "expand_dims",
            &[v],
            attrs([("axis", Attr::ints(expand_axes.iter().copied()))]),
        )
    };
    let mean = expand(cx, mean)?;
    let var = expand(cx, var)?;
    let var_eps = cx.op("add", &[var, scalar(dtype, eps)], Attrs::new())?;
    let std = cx.op("sqrt", &[var_eps], Attrs::new())?;
    let centered = cx.op("subtract", &[x, mean], Attrs::new())?;
    let normed = cx.op("divide", &[centered, std], Attrs::new())?;
    let gamma = expand(cx, gamma)?;
    let scaled = cx.op("multiply", &[normed, gamma], Attrs::new())?;
    let beta = expand(cx, beta)?;
    cx.out1("add", &[scaled, beta], Attrs::new())
}

fn layer_norm<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    if n.wants_output(1) || n.wants_output(2) {
        bail!("the mean and inverse standard deviation outputs are not supported");
    }
    let (x, gamma) = (n.input(0)?, n.input(1)?);
    let rank = cx.rank(&x);
    let axis = norm_axis(n.attr_int("axis", -1)?, rank)?;
    let eps = n.attrs.float_or("epsilon", 1e-5)?;
    let beta = match n.opt(2) {
        Some(b) => b,
        None => {
            // TVM passes zeros for an absent bias.
            let t = cx.ty(&gamma);
            let len = num_elements(&t.shape)?;
            let data = if t.dtype.is_float() {
                Data::Float(vec![0.0; len])
            } else {
                Data::Int(vec![0; len])
            };
            Val::computed("", Tensor::new(t.dtype, t.shape.to_vec(), data))
        }
    };
    let a = attrs([
        ("axes", Attr::ints(axis as i64..rank as i64)),
        ("epsilon", Attr::Float(eps)),
    ]);
    cx.out1("nn.layer_norm", &[x, gamma, beta], a)
}

/// Softmax and LogSoftmax. Before opset 13 the op works on the input flattened to 2-D at
/// `axis` (default 1), so we reshape around a last-axis softmax as TVM does; the reshapes are
/// left out when the input already has that 2-D shape.
fn softmax<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>, op: &str) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    if cx.opset >= 13 {
        let axis = n.attr_int("axis", -1)?;
        return cx.out1(op, &[x], attrs([("axis", Attr::Int(axis))]));
    }
    let shape = cx.shape(&x);
    let rank = shape.len();
    let axis = norm_axis(n.attr_int("axis", 1)?, rank)?;
    let flat = [product(&shape[..axis])?, product(&shape[axis..])?];
    if shape == flat {
        return cx.out1(op, &[x], attrs([("axis", Attr::Int(-1))]));
    }
    let x2 = cx.op("reshape", &[x], attrs([("shape", Attr::ints(flat))]))?;
    let y2 = cx.op(op, &[x2], attrs([("axis", Attr::Int(-1))]))?;
    cx.out1("reshape", &[y2], attrs([("shape", Attr::ints(shape))]))
}

// ---- pooling and reductions ----------------------------------------------------------------

fn pool<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>, op: &str) -> PResult<Vec<Val<'m>>> {
    if n.wants_output(1) {
        bail!("the indices output is not supported");
    }
    let x = n.input(0)?;
    let shape = cx.shape(&x);
    if shape.len() != 4 {
        bail!(
            "only 2-D pooling (4-D input) is supported, got a rank-{} input",
            shape.len()
        );
    }
    let Some(kernel) = n.attrs.ints("kernel_shape")? else {
        bail!("attribute 'kernel_shape' is missing")
    };
    check_len(&kernel, 2, "kernel_shape")?;
    check_range(&kernel, "kernel_shape", 1)?;
    let strides = n.attrs.ints("strides")?.unwrap_or_else(|| vec![1, 1]);
    let dilations = n.attrs.ints("dilations")?.unwrap_or_else(|| vec![1, 1]);
    let mut pads = n.attrs.ints("pads")?.unwrap_or_else(|| vec![0; 4]);
    check_len(&strides, 2, "strides")?;
    check_len(&dilations, 2, "dilations")?;
    check_len(&pads, 4, "pads")?;
    check_range(&strides, "strides", 1)?;
    check_range(&dilations, "dilations", 1)?;
    check_range(&pads, "pads", 0)?;
    if n.attr_int("storage_order", 0)? != 0 {
        bail!("storage_order = 1 is not supported");
    }
    let auto_pad = n.attrs.string_or("auto_pad", "NOTSET")?;
    match auto_pad.as_str() {
        "NOTSET" => {}
        "VALID" => pads = vec![0; 4],
        "SAME_UPPER" | "SAME_LOWER" => {
            // The ONNX formula: output = ceil(in / stride) (upper) or floor (lower).
            for i in 0..2 {
                let (size, s) = (shape[2 + i], strides[i]);
                let out = if auto_pad == "SAME_UPPER" {
                    (size + s - 1) / s
                } else {
                    size / s
                };
                let dk = (kernel[i] - 1) * dilations[i] + 1;
                let total = ((out - 1) * s + dk - size).max(0);
                let (b, e) = if auto_pad == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                };
                pads[i] = b;
                pads[i + 2] = e;
            }
        }
        other => bail!("auto_pad = '{other}' is not valid"),
    }
    let mut a = attrs([
        ("pool_size", Attr::ints(kernel)),
        ("strides", Attr::ints(strides)),
        ("padding", Attr::ints(pads)),
        ("dilation", Attr::ints(dilations)),
        ("ceil_mode", Attr::Bool(n.attr_int("ceil_mode", 0)? != 0)),
    ]);
    if op == "nn.avg_pool2d" {
        a.insert(
            "count_include_pad".into(),
            Attr::Bool(n.attr_int("count_include_pad", 0)? != 0),
        );
    }
    a.insert("layout".into(), Attr::str("NCHW"));
    cx.out1(op, &[x], a)
}

/// GlobalAveragePool / GlobalMaxPool: `mean` / `max` over the spatial axes with kept dims,
/// as TVM's `from_onnx` emits them.
fn global_pool<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>, op: &str) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let rank = cx.rank(&x);
    if rank < 3 {
        bail!("the input must have rank 3 or more, got {rank}");
    }
    let a = attrs([
        ("axis", Attr::ints(2..rank as i64)),
        ("keepdims", Attr::Bool(true)),
    ]);
    cx.out1(op, &[x], a)
}

/// ReduceX: axes as an attribute before `input_opset`, as an optional input from then on.
fn reduce<'m>(
    cx: &mut Importer<'m, '_>,
    n: &NodeIn<'m>,
    op: &str,
    input_opset: i64,
) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let rank = cx.rank(&x);
    let keepdims = n.attr_int("keepdims", 1)? != 0;
    let axes = axes_of(cx, n, input_opset)?.unwrap_or_default();
    let axes = if axes.is_empty() {
        if cx.opset >= input_opset && n.attr_int("noop_with_empty_axes", 0)? != 0 {
            return Ok(vec![x]);
        }
        (0..rank as i64).collect()
    } else {
        let mut a = norm_axes(&axes, rank)?;
        a.sort_unstable();
        a
    };
    let a = attrs([
        ("axis", Attr::ints(axes)),
        ("keepdims", Attr::Bool(keepdims)),
    ]);
    cx.out1(op, &[x], a)
}

fn arg_reduce<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>, op: &str) -> PResult<Vec<Val<'m>>> {
    if n.attr_int("select_last_index", 0)? != 0 {
        bail!("select_last_index = 1 is not supported");
    }
    let x = n.input(0)?;
    let axis = norm_axis(n.attr_int("axis", 0)?, cx.rank(&x))? as i64;
    let keepdims = n.attr_int("keepdims", 1)? != 0;
    cx.out1(
        op,
        &[x],
        attrs([
            ("axis", Attr::Int(axis)),
            ("keepdims", Attr::Bool(keepdims)),
        ]),
    )
}

// ---- shapes and layout ---------------------------------------------------------------------

fn transpose<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let rank = cx.rank(&x);
    let perm = match n.attrs.ints("perm")? {
        Some(p) => {
            check_len(&p, rank, "perm")?;
            norm_axes(&p, rank)?
        }
        None => (0..rank as i64).rev().collect(),
    };
    cx.out1("permute_dims", &[x], attrs([("axes", Attr::ints(perm))]))
}

fn reshape<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let target = cx.const_ints(&n.input(1)?, "the shape")?;
    let in_shape = cx.shape(&x);
    let allow_zero = n.attr_int("allowzero", 0)? != 0;
    let mut resolved = Vec::with_capacity(target.len());
    for (i, &d) in target.iter().enumerate() {
        resolved.push(match d {
            0 if !allow_zero => match in_shape.get(i) {
                Some(s) => *s,
                None => bail!("shape {target:?} copies dimension {i}, which the input lacks"),
            },
            d => d,
        });
    }
    let shape = resolve_reshape(&in_shape, &resolved)?;
    cx.out1("reshape", &[x], attrs([("shape", Attr::ints(shape))]))
}

fn flatten<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let shape = cx.shape(&x);
    let rank = shape.len() as i64;
    let axis = n.attr_int("axis", 1)?;
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..=rank).contains(&a) {
        bail!("axis {axis} is out of range for rank {rank}");
    }
    let a = a as usize;
    let out = [product(&shape[..a])?, product(&shape[a..])?];
    cx.out1("reshape", &[x], attrs([("shape", Attr::ints(out))]))
}

fn squeeze<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let shape = cx.shape(&x);
    let axes = match axes_of(cx, n, 13)? {
        Some(a) if !a.is_empty() => {
            let a = norm_axes(&a, shape.len())?;
            if let Some(bad) = a.iter().find(|ax| shape[**ax as usize] != 1) {
                bail!(
                    "cannot squeeze axis {bad} of extent {}",
                    shape[*bad as usize]
                );
            }
            a
        }
        _ => (0..shape.len() as i64)
            .filter(|ax| shape[*ax as usize] == 1)
            .collect(),
    };
    let mut axes = axes;
    axes.sort_unstable();
    cx.out1("squeeze", &[x], attrs([("axis", Attr::ints(axes))]))
}

/// One `expand_dims` with every new axis (TVM emits one per axis).
fn unsqueeze<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let Some(axes) = axes_of(cx, n, 13)? else {
        bail!("axes are missing")
    };
    let out_rank = cx.rank(&x) + axes.len();
    let mut axes = norm_axes(&axes, out_rank)?;
    axes.sort_unstable();
    cx.out1("expand_dims", &[x], attrs([("axis", Attr::ints(axes))]))
}

fn concat<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let inputs: Vec<Val<'m>> = n.inputs.iter().flatten().cloned().collect();
    let Some(first) = inputs.first() else {
        bail!("needs at least one input")
    };
    let Some(axis) = n.attrs.int("axis")? else {
        bail!("attribute 'axis' is missing")
    };
    let axis = norm_axis(axis, cx.rank(first))? as i64;
    cx.out1("concat", &inputs, attrs([("axis", Attr::Int(axis))]))
}

fn split<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let shape = cx.shape(&x);
    let axis = norm_axis(n.attr_int("axis", 0)?, shape.len())?;
    let dim = shape[axis];
    let outputs = n.proto.output.len();
    let sizes = if cx.opset < 13 {
        n.attrs.ints("split")?
    } else {
        match n.opt(1) {
            Some(v) => Some(cx.const_ints(&v, "split")?),
            None => None,
        }
    };
    let sections = match sizes {
        Some(sizes) if !sizes.is_empty() => {
            check_len(&sizes, outputs, "split")?;
            check_range(&sizes, "split", 0)?;
            if sizes.iter().sum::<i64>() != dim {
                bail!("split sizes {sizes:?} do not add up to extent {dim}");
            }
            let mut at = 0;
            let mut indices = Vec::new();
            for s in &sizes[..sizes.len() - 1] {
                at += s;
                indices.push(at);
            }
            Attr::ints(indices)
        }
        _ => {
            let parts = n.attr_int("num_outputs", outputs as i64)?;
            if parts < 1 || parts as usize != outputs {
                bail!("num_outputs = {parts} does not match the {outputs} outputs");
            }
            if dim % parts == 0 {
                Attr::Int(parts)
            } else {
                // Opset 18: chunks of ceil(dim / parts), the last one smaller.
                let chunk = (dim + parts - 1) / parts;
                Attr::ints((1..parts).map(|i| (i * chunk).min(dim)))
            }
        }
    };
    let a = attrs([
        ("indices_or_sections", sections),
        ("axis", Attr::Int(axis as i64)),
    ]);
    cx.out("split", &[x], a)
}

fn slice<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let shape = cx.shape(&x);
    let (starts, ends, axes, steps) = if cx.opset < 10 {
        let Some(s) = n.attrs.ints("starts")? else {
            bail!("attribute 'starts' is missing")
        };
        let Some(e) = n.attrs.ints("ends")? else {
            bail!("attribute 'ends' is missing")
        };
        (s, e, n.attrs.ints("axes")?, None)
    } else {
        let ints = |i: usize, what: &str| match n.opt(i) {
            Some(v) => cx.const_ints(&v, what).map(Some),
            None => Ok(None),
        };
        let Some(s) = ints(1, "starts")? else {
            bail!("input 'starts' is missing")
        };
        let Some(e) = ints(2, "ends")? else {
            bail!("input 'ends' is missing")
        };
        (s, e, ints(3, "axes")?, ints(4, "steps")?)
    };
    let k = starts.len();
    check_len(&ends, k, "ends")?;
    let axes = match axes {
        Some(a) => {
            check_len(&a, k, "axes")?;
            norm_axes(&a, shape.len())?
        }
        None => norm_axes(&(0..k as i64).collect::<Vec<_>>(), shape.len())?,
    };
    let steps = steps.unwrap_or_else(|| vec![1; k]);
    check_len(&steps, k, "steps")?;
    let (mut begin, mut end) = (Vec::with_capacity(k), Vec::with_capacity(k));
    for i in 0..k {
        let dim = shape[axes[i] as usize];
        let (b, count) = slice_range(dim, starts[i], ends[i], steps[i])?;
        // Normalized bounds that Relax reads the same way: an exclusive end of -1 (before the
        // first element, for a negative step) is written -(dim + 1).
        let e = (b as i128 + count as i128 * steps[i] as i128).clamp(-1, dim as i128) as i64;
        begin.push(b);
        end.push(if e < 0 { -(dim + 1) } else { e });
    }
    let a = attrs([
        ("axes", Attr::ints(axes)),
        ("begin", Attr::ints(begin)),
        ("end", Attr::ints(end)),
        ("strides", Attr::ints(steps)),
    ]);
    cx.out1("strided_slice", &[x], a)
}

/// `take`, with negative constant indices made positive at import time.
fn gather<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let (x, mut idx) = (n.input(0)?, n.input(1)?);
    let shape = cx.shape(&x);
    let axis = norm_axis(n.attr_int("axis", 0)?, shape.len())?;
    let dim = shape[axis];
    if let Some(t) = cx.try_const(&idx)? {
        if t.dtype.is_float() {
            bail!("indices must be integers, got {}", t.dtype);
        }
        let mut v = t.to_i64s();
        for i in v.iter_mut() {
            if *i < 0 {
                *i += dim;
            }
            if !(0..dim).contains(i) {
                bail!("index {i} is out of range for extent {dim}");
            }
        }
        idx = Val::computed("", Tensor::ints(t.dtype, t.shape.clone(), v));
    }
    cx.out1("take", &[x, idx], attrs([("axis", Attr::Int(axis as i64))]))
}

fn expand<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let target = cx.const_ints(&n.input(1)?, "the shape")?;
    let in_shape = cx.shape(&x);
    let out = broadcast_shape(&in_shape, &target)?;
    num_elements(&out)?;
    if out == in_shape {
        return Ok(vec![x]);
    }
    cx.out1("broadcast_to", &[x], attrs([("shape", Attr::ints(out))]))
}

fn tile<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let repeats = cx.const_ints(&n.input(1)?, "repeats")?;
    check_len(&repeats, cx.rank(&x), "repeats")?;
    check_range(&repeats, "repeats", 0)?;
    cx.out1("tile", &[x], attrs([("repeats", Attr::ints(repeats))]))
}

fn pad<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let rank = cx.rank(&x);
    let mode = match n.attrs.string_or("mode", "constant")?.as_str() {
        "constant" => "constant",
        "reflect" => "reflect",
        "edge" => "replicate",
        "wrap" => "circular",
        other => bail!("mode = '{other}' is not supported"),
    };
    let (pads, value, axes) = if cx.opset < 11 {
        let Some(p) = n.attrs.ints("pads")? else {
            bail!("attribute 'pads' is missing")
        };
        (p, n.attrs.float_or("value", 0.0)?, None)
    } else {
        let pads = cx.const_ints(&n.input(1)?, "pads")?;
        let value = match n.opt(2) {
            Some(v) => cx.const_scalar(&v, "the constant value")?,
            None => 0.0,
        };
        let axes = match n.opt(3) {
            Some(v) => Some(cx.const_ints(&v, "axes")?),
            None => None,
        };
        (pads, value, axes)
    };
    let axes = match axes {
        Some(a) => norm_axes(&a, rank)?,
        None => (0..rank as i64).collect(),
    };
    check_len(&pads, 2 * axes.len(), "pads")?;
    if pads.iter().any(|p| *p < 0) {
        bail!("negative pads (cropping) are not supported");
    }
    check_range(&pads, "pads", 0)?;
    let mut width = vec![0i64; 2 * rank];
    for (i, ax) in axes.iter().enumerate() {
        width[2 * *ax as usize] = pads[i];
        width[2 * *ax as usize + 1] = pads[i + axes.len()];
    }
    if width.iter().all(|p| *p == 0) {
        return Ok(vec![x]);
    }
    let a = attrs([
        ("pad_width", Attr::ints(width)),
        ("pad_mode", Attr::str(mode)),
        ("pad_value", Attr::Float(value)),
    ]);
    cx.out1("nn.pad", &[x], a)
}

fn resize<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let x = n.input(0)?;
    let shape = cx.shape(&x);
    if shape.len() != 4 {
        bail!(
            "only 2-D resize (4-D NCHW input) is supported, got a rank-{} input",
            shape.len()
        );
    }
    let method = match n.attrs.string_or("mode", "nearest")?.as_str() {
        "nearest" => "nearest_neighbor",
        "linear" => "linear",
        "cubic" => "cubic",
        other => bail!("mode = '{other}' is not supported"),
    };
    // Resize-10 has no coordinate mode and behaves as `asymmetric`.
    let default_coord = if cx.opset < 11 {
        "asymmetric"
    } else {
        "half_pixel"
    };
    let coord = n
        .attrs
        .string_or("coordinate_transformation_mode", default_coord)?;
    const COORD_MODES: [&str; 6] = [
        "half_pixel",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
        "tf_crop_and_resize",
        "half_pixel_symmetric",
    ];
    if !COORD_MODES.contains(&coord.as_str()) {
        bail!("coordinate_transformation_mode = '{coord}' is not supported");
    }
    let rounding = n.attrs.string_or("nearest_mode", "round_prefer_floor")?;
    if !["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"].contains(&rounding.as_str()) {
        bail!("nearest_mode = '{rounding}' is not supported");
    }
    if n.attr_int("antialias", 0)? != 0 {
        bail!("antialias = 1 is not supported");
    }
    if n.attrs.has("axes") {
        bail!("attribute 'axes' is not supported");
    }
    if n.attrs.string_or("keep_aspect_ratio_policy", "stretch")? != "stretch" {
        bail!("keep_aspect_ratio_policy other than 'stretch' is not supported");
    }
    let floats = |i: usize, what: &str| -> PResult<Vec<f64>> {
        match n.opt(i) {
            Some(v) => Ok(cx.require_const(&v, what)?.to_f64s()),
            None => Ok(Vec::new()),
        }
    };
    let (roi, scales, sizes) = if cx.opset < 11 {
        (Vec::new(), floats(1, "scales")?, Vec::new())
    } else {
        let sizes = match n.opt(3) {
            Some(v) => cx.const_ints(&v, "sizes")?,
            None => Vec::new(),
        };
        (floats(1, "roi")?, floats(2, "scales")?, sizes)
    };
    let roi = match roi.len() {
        0 => vec![0.0; 4],
        4 => roi,
        8 => vec![roi[2], roi[3], roi[6], roi[7]],
        l => bail!("roi must have 0, 4 or 8 values, got {l}"),
    };
    let size = match (scales.is_empty(), sizes.is_empty()) {
        (false, true) => {
            if scales.len() != 4 {
                bail!("scales must have 4 values, got {}", scales.len());
            }
            if scales[0] != 1.0 || scales[1] != 1.0 {
                bail!("scaling the batch or channel axis is not supported");
            }
            let mut out = Vec::with_capacity(2);
            for i in 2..4 {
                let s = scales[i] * shape[i] as f64;
                if !(s.is_finite() && s >= 1.0 && s <= (1u64 << 31) as f64) {
                    bail!("scale {} gives an invalid output extent", scales[i]);
                }
                out.push(s.floor() as i64);
            }
            out
        }
        (true, false) => {
            check_len(&sizes, 4, "sizes")?;
            if sizes[0] != shape[0] || sizes[1] != shape[1] {
                bail!("resizing the batch or channel axis is not supported");
            }
            check_range(&sizes[2..], "sizes", 1)?;
            sizes[2..].to_vec()
        }
        _ => bail!("exactly one of scales and sizes must be given"),
    };
    let a = attrs([
        ("size", Attr::ints(size)),
        ("roi", Attr::floats(roi)),
        ("layout", Attr::str("NCHW")),
        ("method", Attr::str(method)),
        ("coordinate_transformation_mode", Attr::Str(coord)),
        ("rounding_method", Attr::Str(rounding)),
        (
            "cubic_alpha",
            Attr::Float(n.attrs.float_or("cubic_coeff_a", -0.75)?),
        ),
        (
            "cubic_exclude",
            Attr::Int(n.attr_int("exclude_outside", 0)?),
        ),
        (
            "extrapolation_value",
            Attr::Float(n.attrs.float_or("extrapolation_value", 0.0)?),
        ),
    ]);
    cx.out1("image.resize2d", &[x], a)
}

// ---- constants and shape computations -------------------------------------------------------

fn out_name(n: &NodeIn<'_>) -> String {
    n.proto.output.first().cloned().unwrap_or_default()
}

fn constant<'m>(_cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let name = out_name(n);
    let given: Vec<&str> = n.attrs.names().collect();
    if given.len() != 1 {
        bail!("exactly one value attribute must be given, got {given:?}");
    }
    let t = if let Some(t) = n.attrs.tensor("value")? {
        return Ok(vec![Val::weight(&name, t)?]);
    } else if let Some(v) = n.attrs.float("value_float")? {
        Tensor::scalar_f(DType::F32, v)
    } else if let Some(v) = n.attrs.floats("value_floats")? {
        let len = v.len() as i64;
        Tensor::new(
            DType::F32,
            vec![len],
            Data::Float(v.iter().map(|x| round_to(DType::F32, *x)).collect()),
        )
    } else if let Some(v) = n.attrs.int("value_int")? {
        Tensor::ints(DType::I64, Vec::new(), vec![v])
    } else if let Some(v) = n.attrs.ints("value_ints")? {
        Tensor::i64_vector(v)
    } else {
        bail!("attribute '{}' is not supported", given[0]);
    };
    Ok(vec![Val::computed(&name, t)])
}

/// A tensor of `shape` filled with `value` (default float32 zero): folded when small, else
/// `broadcast_to` of a scalar constant (as TVM emits it).
fn constant_of_shape<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let shape = cx.const_ints(&n.input(0)?, "the shape")?;
    num_elements(&shape)?;
    let value = match n.attrs.tensor("value")? {
        Some(t) => {
            let v = tensor::decode(t, 1)?;
            if v.len() != 1 {
                bail!("attribute 'value' must have one element");
            }
            Tensor {
                shape: Vec::new(),
                ..v
            }
        }
        None => Tensor::scalar_f(DType::F32, 0.0),
    };
    cx.out1(
        "broadcast_to",
        &[Val::computed("", value)],
        attrs([("shape", Attr::ints(shape))]),
    )
}

fn shape<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let dims = cx.shape(&n.input(0)?);
    let rank = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let start = clamp(n.attr_int("start", 0)?);
    let end = clamp(n.attr_int("end", rank)?);
    let dims = if start < end {
        dims[start..end].to_vec()
    } else {
        Vec::new()
    };
    Ok(vec![Val::computed(&out_name(n), Tensor::i64_vector(dims))])
}

fn size<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let count = product(&cx.shape(&n.input(0)?))?;
    Ok(vec![Val::computed(
        &out_name(n),
        Tensor::ints(DType::I64, Vec::new(), vec![count]),
    )])
}

fn range<'m>(cx: &mut Importer<'m, '_>, n: &NodeIn<'m>) -> PResult<Vec<Val<'m>>> {
    let [start, limit, delta] = [
        cx.require_const(&n.input(0)?, "start")?,
        cx.require_const(&n.input(1)?, "limit")?,
        cx.require_const(&n.input(2)?, "delta")?,
    ];
    let dtype = start.dtype;
    if [&start, &limit, &delta]
        .iter()
        .any(|t| t.len() != 1 || t.dtype != dtype)
    {
        bail!("start, limit and delta must each be a single value, all of one dtype");
    }
    let max = cx.opts.fold_int_max_elements;
    let t = match (&start.data, &limit.data, &delta.data) {
        (Data::Int(s), Data::Int(l), Data::Int(d)) => {
            let (s, l, d) = (s[0] as i128, l[0] as i128, d[0] as i128);
            if d == 0 {
                bail!("delta must not be 0");
            }
            let count = ((l - s) + d - d.signum()).div_euclid(d).max(0);
            if count > max as i128 {
                bail!("a range of {count} elements is too large");
            }
            let v = (0..count)
                .map(|i| tensor::wrap_int(dtype, (s + i * d) as i64))
                .collect();
            Tensor::ints(dtype, vec![count as i64], v)
        }
        (Data::Float(s), Data::Float(l), Data::Float(d)) => {
            let count = ((l[0] - s[0]) / d[0]).ceil();
            if !(count.is_finite() || count.is_nan()) || count > max as f64 {
                bail!(
                    "the range from {} to {} by {} is too large",
                    s[0],
                    l[0],
                    d[0]
                );
            }
            let count = if count.is_nan() {
                0
            } else {
                count.max(0.0) as usize
            };
            let v = (0..count)
                .map(|i| round_to(dtype, s[0] + i as f64 * d[0]))
                .collect();
            Tensor::new(dtype, vec![count as i64], Data::Float(v))
        }
        _ => bail!("start, limit and delta must have one dtype"),
    };
    Ok(vec![Val::computed(&out_name(n), t)])
}

#[cfg(test)]
mod tests {
    #[test]
    fn converter_table_is_sorted_for_binary_search() {
        let names: Vec<&str> = super::supported_ops().collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }
}
