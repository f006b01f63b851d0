//! The op table: one declaration per op, grouped by kind. Names, attribute names and defaults
//! are Relax's (python/tvm/relax/op/); `nn.dense`, `nn.batch_matmul`, `nn.hard_swish` and
//! `nn.hard_sigmoid` are not Relax ops (the first two are Relay's, the last two are what
//! frontends decompose) and must be lowered by the TVM bridge. The inference functions live
//! in [`super::nn`] and [`super::tensor`].

use super::nn;
use super::tensor as t;
use super::{Arity, AttrDefault as D, AttrSpec, InferFn, OpDef, OpPattern as P};
use crate::attr::AttrKind as K;

const fn spec(name: &'static str, kind: K, default: D) -> AttrSpec {
    AttrSpec {
        name,
        kind,
        default,
    }
}

const fn op(
    name: &'static str,
    summary: &'static str,
    inputs: Arity,
    attrs: &'static [AttrSpec],
    pattern: P,
    infer: InferFn,
) -> OpDef {
    OpDef {
        name,
        summary,
        inputs,
        attrs,
        pattern,
        commutative: false,
        inlines_scalar_constant: false,
        infer,
    }
}

const COMMUTATIVE: bool = true;
const ORDERED: bool = false;

/// A one-operand elementwise op.
const fn unary(
    name: &'static str,
    summary: &'static str,
    attrs: &'static [AttrSpec],
    infer: InferFn,
) -> OpDef {
    op(name, summary, Arity::exactly(1), attrs, P::ElemWise, infer)
}

/// A two-operand op with numpy broadcasting.
const fn binary(
    name: &'static str,
    summary: &'static str,
    commutative: bool,
    infer: InferFn,
) -> OpDef {
    OpDef {
        commutative,
        inlines_scalar_constant: true,
        ..op(name, summary, Arity::exactly(2), &[], P::Broadcast, infer)
    }
}

const fn reduction(
    name: &'static str,
    summary: &'static str,
    attrs: &'static [AttrSpec],
    infer: InferFn,
) -> OpDef {
    op(
        name,
        summary,
        Arity::exactly(1),
        attrs,
        P::CommReduce,
        infer,
    )
}

const fn injective(
    name: &'static str,
    summary: &'static str,
    inputs: Arity,
    attrs: &'static [AttrSpec],
    infer: InferFn,
) -> OpDef {
    op(name, summary, inputs, attrs, P::Injective, infer)
}

// ---- attribute schemas shared by several ops -----------------------------------------------

const OUT_DTYPE: AttrSpec = spec("out_dtype", K::Str, D::Optional);
const OUT_LAYOUT: AttrSpec = spec("out_layout", K::Str, D::Optional);

const CONV2D: &[AttrSpec] = &[
    spec("strides", K::IntList, D::Ints(&[1, 1])),
    spec("padding", K::IntList, D::Ints(&[0, 0, 0, 0])),
    spec("dilation", K::IntList, D::Ints(&[1, 1])),
    spec("groups", K::Int, D::Int(1)),
    spec("data_layout", K::Str, D::Str("NCHW")),
    spec("kernel_layout", K::Str, D::Str("OIHW")),
    OUT_LAYOUT,
    OUT_DTYPE,
];

const CONV2D_TRANSPOSE: &[AttrSpec] = &[
    spec("strides", K::IntList, D::Ints(&[1, 1])),
    spec("padding", K::IntList, D::Ints(&[0, 0, 0, 0])),
    spec("output_padding", K::IntList, D::Ints(&[0, 0])),
    spec("dilation", K::IntList, D::Ints(&[1, 1])),
    spec("groups", K::Int, D::Int(1)),
    spec("data_layout", K::Str, D::Str("NCHW")),
    spec("kernel_layout", K::Str, D::Str("IOHW")),
    OUT_LAYOUT,
    OUT_DTYPE,
];

const REDUCE: &[AttrSpec] = &[
    spec("axis", K::IntList, D::Optional),
    spec("keepdims", K::Bool, D::Bool(false)),
];

const ARG_REDUCE: &[AttrSpec] = &[
    spec("axis", K::Int, D::Optional),
    spec("keepdims", K::Bool, D::Bool(false)),
];

const SOFTMAX: &[AttrSpec] = &[spec("axis", K::Int, D::Int(-1))];

const MAX_POOL2D: &[AttrSpec] = &[
    spec("pool_size", K::IntList, D::Required),
    spec("strides", K::IntList, D::Ints(&[1, 1])),
    spec("padding", K::IntList, D::Ints(&[0, 0, 0, 0])),
    spec("dilation", K::IntList, D::Ints(&[1, 1])),
    spec("ceil_mode", K::Bool, D::Bool(false)),
    spec("layout", K::Str, D::Str("NCHW")),
    OUT_LAYOUT,
];

const AVG_POOL2D: &[AttrSpec] = &[
    spec("pool_size", K::IntList, D::Required),
    spec("strides", K::IntList, D::Ints(&[1, 1])),
    spec("padding", K::IntList, D::Ints(&[0, 0, 0, 0])),
    spec("dilation", K::IntList, D::Ints(&[1, 1])),
    spec("ceil_mode", K::Bool, D::Bool(false)),
    spec("count_include_pad", K::Bool, D::Bool(false)),
    spec("layout", K::Str, D::Str("NCHW")),
    OUT_LAYOUT,
];

const RESIZE2D: &[AttrSpec] = &[
    spec("size", K::IntList, D::Required),
    spec("roi", K::FloatList, D::Floats(&[0.0, 0.0, 0.0, 0.0])),
    spec("layout", K::Str, D::Str("NCHW")),
    spec("method", K::Str, D::Str("linear")),
    spec(
        "coordinate_transformation_mode",
        K::Str,
        D::Str("half_pixel"),
    ),
    spec("rounding_method", K::Str, D::Str("round")),
    spec("cubic_alpha", K::Float, D::Float(-0.75)),
    spec("cubic_exclude", K::Int, D::Int(0)),
    spec("extrapolation_value", K::Float, D::Float(0.0)),
    OUT_DTYPE,
];

pub(super) static OPS: &[OpDef] = &[
    // ---- convolution and linear algebra ----
    op(
        "nn.conv2d",
        "2-D convolution, grouped and depthwise included",
        Arity::exactly(2),
        CONV2D,
        P::OutEWiseFusable,
        nn::conv2d,
    ),
    op(
        "nn.conv2d_transpose",
        "2-D transposed convolution (gradient of conv2d w.r.t. its input)",
        Arity::exactly(2),
        CONV2D_TRANSPOSE,
        P::OutEWiseFusable,
        nn::conv2d_transpose,
    ),
    op(
        "matmul",
        "matrix product with numpy semantics (1-D operands, broadcast batch dims)",
        Arity::exactly(2),
        &[OUT_DTYPE],
        P::OutEWiseFusable,
        nn::matmul,
    ),
    op(
        "nn.dense",
        "data [..., K] times weight [N, K] transposed (Relay)",
        Arity::exactly(2),
        &[spec("units", K::Int, D::Optional), OUT_DTYPE],
        P::OutEWiseFusable,
        nn::dense,
    ),
    op(
        "nn.batch_matmul",
        "batched matrix product, rhs transposed by default (Relay)",
        Arity::exactly(2),
        &[
            spec("transpose_a", K::Bool, D::Bool(false)),
            spec("transpose_b", K::Bool, D::Bool(true)),
            OUT_DTYPE,
        ],
        P::OutEWiseFusable,
        nn::batch_matmul,
    ),
    // ---- elementwise unary ----
    unary("exp", "e^x", &[], t::unary_float),
    unary("log", "natural logarithm", &[], t::unary_float),
    unary("sqrt", "square root", &[], t::unary_float),
    unary("rsqrt", "1 / sqrt(x)", &[], t::unary_float),
    unary("erf", "Gauss error function", &[], t::unary_float),
    unary("tanh", "hyperbolic tangent", &[], t::unary_float),
    unary("sigmoid", "1 / (1 + e^-x)", &[], t::unary_float),
    unary("negative", "-x", &[], t::unary),
    unary("abs", "|x|", &[], t::unary),
    unary("floor", "round toward negative infinity", &[], t::unary),
    unary("ceil", "round toward positive infinity", &[], t::unary),
    unary("round", "round to nearest, ties to even", &[], t::unary),
    unary("sin", "sine", &[], t::unary_float),
    unary("cos", "cosine", &[], t::unary_float),
    unary("nn.relu", "max(x, 0)", &[], t::unary),
    unary(
        "nn.gelu",
        "x * Phi(x) with the exact normal CDF",
        &[],
        t::unary_float,
    ),
    unary(
        "nn.gelu_tanh",
        "GELU with the tanh approximation",
        &[],
        t::unary_float,
    ),
    unary("nn.silu", "x * sigmoid(x)", &[], t::unary_float),
    unary(
        "nn.leakyrelu",
        "x if x > 0 else alpha * x",
        &[spec("alpha", K::Float, D::Float(0.01))],
        t::unary_float,
    ),
    unary("nn.hard_swish", "x * relu6(x + 3) / 6", &[], t::unary_float),
    unary(
        "nn.hard_sigmoid",
        "clip(alpha * x + beta, 0, 1)",
        &[
            spec("alpha", K::Float, D::Float(0.2)),
            spec("beta", K::Float, D::Float(0.5)),
        ],
        t::unary_float,
    ),
    unary(
        "clip",
        "clamp to [min, max]; `tensor_bounds = true`: the bounds arrived as rank-0 tensors \
         (ONNX Clip from opset 11 on), which TVM's ONNX frontend reads with maximum/minimum",
        &[
            spec("min", K::Float, D::Required),
            spec("max", K::Float, D::Required),
            spec("tensor_bounds", K::Bool, D::Optional),
        ],
        t::unary,
    ),
    unary(
        "astype",
        "convert to the element type `dtype` (a TVM name)",
        &[spec("dtype", K::Str, D::Required)],
        t::astype,
    ),
    // ---- binary and ternary with numpy broadcasting ----
    binary("add", "a + b", COMMUTATIVE, t::binary),
    binary("subtract", "a - b", ORDERED, t::binary),
    binary("multiply", "a * b", COMMUTATIVE, t::binary),
    binary("divide", "a / b", ORDERED, t::binary),
    binary("floor_divide", "floor(a / b)", ORDERED, t::binary),
    binary("power", "a ^ b", ORDERED, t::binary),
    binary("maximum", "max(a, b)", COMMUTATIVE, t::binary),
    binary("minimum", "min(a, b)", COMMUTATIVE, t::binary),
    binary("equal", "a == b, as bool", COMMUTATIVE, t::compare),
    binary("not_equal", "a != b, as bool", COMMUTATIVE, t::compare),
    binary("less", "a < b, as bool", ORDERED, t::compare),
    binary("less_equal", "a <= b, as bool", ORDERED, t::compare),
    binary("greater", "a > b, as bool", ORDERED, t::compare),
    binary("greater_equal", "a >= b, as bool", ORDERED, t::compare),
    op(
        "where",
        "cond ? a : b, all three broadcast",
        Arity::exactly(3),
        &[],
        P::Broadcast,
        t::where_,
    ),
    // ---- reductions ----
    reduction("sum", "sum over axes (all when absent)", REDUCE, t::reduce),
    // TVM legalizes mean to a sum block followed by a division block that writes the output;
    // AnnotateTIROpPattern calls that reduce-then-elementwise shape OutEWiseFusable.
    OpDef {
        pattern: P::OutEWiseFusable,
        ..reduction(
            "mean",
            "mean over axes (all when absent)",
            REDUCE,
            t::reduce,
        )
    },
    reduction(
        "max",
        "maximum over axes (all when absent)",
        REDUCE,
        t::reduce,
    ),
    reduction(
        "min",
        "minimum over axes (all when absent)",
        REDUCE,
        t::reduce,
    ),
    reduction(
        "prod",
        "product over axes (all when absent)",
        REDUCE,
        t::reduce,
    ),
    reduction(
        "argmax",
        "int64 index of the maximum along an axis (flattened when absent)",
        ARG_REDUCE,
        t::arg_reduce,
    ),
    reduction(
        "argmin",
        "int64 index of the minimum along an axis (flattened when absent)",
        ARG_REDUCE,
        t::arg_reduce,
    ),
    // ---- normalization ----
    // Provisional patterns: Relax derives a pattern from the legalized PrimFunc
    // (AnnotateTIROpPattern); the TVM-agreement work may refine these.
    op(
        "nn.batch_norm",
        "inference batch normalization along `axis` (one result)",
        Arity::exactly(5),
        &[
            spec("axis", K::Int, D::Int(1)),
            spec("epsilon", K::Float, D::Float(1e-5)),
            spec("center", K::Bool, D::Bool(true)),
            spec("scale", K::Bool, D::Bool(true)),
        ],
        P::Opaque,
        nn::batch_norm,
    ),
    op(
        "nn.layer_norm",
        "layer normalization over `axes`",
        Arity::exactly(3),
        &[
            spec("axes", K::IntList, D::Required),
            spec("epsilon", K::Float, D::Float(1e-5)),
            spec("center", K::Bool, D::Bool(true)),
            spec("scale", K::Bool, D::Bool(true)),
        ],
        P::OutEWiseFusable,
        nn::layer_norm,
    ),
    op(
        "nn.softmax",
        "softmax along `axis`",
        Arity::exactly(1),
        SOFTMAX,
        P::OutEWiseFusable,
        nn::softmax,
    ),
    op(
        "nn.log_softmax",
        "log of softmax along `axis`",
        Arity::exactly(1),
        SOFTMAX,
        P::OutEWiseFusable,
        nn::softmax,
    ),
    // ---- pooling ----
    op(
        "nn.max_pool2d",
        "2-D max pooling",
        Arity::exactly(1),
        MAX_POOL2D,
        P::OutEWiseFusable,
        nn::pool2d,
    ),
    op(
        "nn.avg_pool2d",
        "2-D average pooling",
        Arity::exactly(1),
        AVG_POOL2D,
        P::OutEWiseFusable,
        nn::pool2d,
    ),
    op(
        "nn.adaptive_avg_pool2d",
        "2-D average pooling to a given output size",
        Arity::exactly(1),
        &[
            spec("output_size", K::IntList, D::Optional),
            spec("layout", K::Str, D::Str("NCHW")),
            OUT_LAYOUT,
        ],
        P::OutEWiseFusable,
        nn::adaptive_pool2d,
    ),
    // ---- injective ----
    injective(
        "reshape",
        "same elements, new shape (one -1 is inferred)",
        Arity::exactly(1),
        &[spec("shape", K::IntList, D::Required)],
        t::reshape,
    ),
    injective(
        "permute_dims",
        "transpose by `axes` (reversed when absent)",
        Arity::exactly(1),
        &[spec("axes", K::IntList, D::Optional)],
        t::permute_dims,
    ),
    injective(
        "concat",
        "join operands along `axis`",
        Arity::at_least(1),
        &[spec("axis", K::Int, D::Int(0))],
        t::concat,
    ),
    injective(
        "split",
        "split along `axis` into sections or at indices (one result per piece)",
        Arity::exactly(1),
        &[
            spec("indices_or_sections", K::IntOrIntList, D::Required),
            spec("axis", K::Int, D::Int(0)),
        ],
        t::split,
    ),
    injective(
        "strided_slice",
        "numpy slicing begin:end:stride on `axes`",
        Arity::exactly(1),
        &[
            spec("axes", K::IntList, D::Required),
            spec("begin", K::IntList, D::Required),
            spec("end", K::IntList, D::Required),
            spec("strides", K::IntList, D::Optional),
        ],
        t::strided_slice,
    ),
    injective(
        "nn.pad",
        "pad each axis before and after",
        Arity::exactly(1),
        &[
            spec("pad_width", K::IntList, D::Required),
            spec("pad_mode", K::Str, D::Str("constant")),
            spec("pad_value", K::Float, D::Float(0.0)),
        ],
        nn::pad,
    ),
    injective(
        "image.resize2d",
        "resize the spatial dims to `size`",
        Arity::exactly(1),
        RESIZE2D,
        nn::resize2d,
    ),
    // Its only load reads a subsequence of the output indices: Broadcast for TVM.
    OpDef {
        pattern: P::Broadcast,
        ..injective(
            "squeeze",
            "drop unit dims (all of them when `axis` is absent)",
            Arity::exactly(1),
            &[spec("axis", K::IntList, D::Optional)],
            t::squeeze,
        )
    },
    // Its only load reads a subsequence of the output indices: Broadcast for TVM.
    OpDef {
        pattern: P::Broadcast,
        ..injective(
            "expand_dims",
            "insert unit dims at `axis`",
            Arity::exactly(1),
            &[spec("axis", K::IntList, D::Required)],
            t::expand_dims,
        )
    },
    injective(
        "flatten",
        "reshape to 1-D",
        Arity::exactly(1),
        &[],
        t::flatten,
    ),
    // Its legalized PrimFunc reads `data[indices[i]]`, an index TVM's AnnotateTIROpPattern
    // cannot analyse: Opaque, so a lookup never fuses (BERT's embeddings in TVM 0.27).
    OpDef {
        pattern: P::Opaque,
        ..injective(
            "take",
            "gather along `axis` (flattened data when absent)",
            Arity::exactly(2),
            &[
                spec("axis", K::Int, D::Optional),
                spec("mode", K::Str, D::Str("fast")),
            ],
            t::take,
        )
    },
    // Its only load reads a subsequence of the output indices: Broadcast for TVM.
    OpDef {
        pattern: P::Broadcast,
        ..injective(
            "broadcast_to",
            "broadcast to `shape`",
            Arity::exactly(1),
            &[spec("shape", K::IntList, D::Required)],
            t::broadcast_to,
        )
    },
    injective(
        "tile",
        "repeat the tensor `repeats` times along each axis",
        Arity::exactly(1),
        &[spec("repeats", K::IntList, D::Required)],
        t::tile,
    ),
    // ---- constants ----
    // Opaque: fusion treats constants specially rather than by pattern.
    op(
        "constant",
        "a literal tensor of `shape` and `dtype`; one `value` splats",
        Arity::exactly(0),
        &[
            spec("value", K::FloatList, D::Required),
            spec("shape", K::IntList, D::Required),
            spec("dtype", K::Str, D::Required),
        ],
        P::Opaque,
        t::constant,
    ),
];
