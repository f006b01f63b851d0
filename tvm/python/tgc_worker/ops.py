"""tgc's op table (ir/src/ops/table.rs) as seen from TVM: attribute schemas and lowering to Relax.

Every op of the Rust table is here with the same names, attribute names and defaults. Most
map one to one onto `tvm.relax.op`; `nn.dense`, `nn.batch_matmul`, `nn.hard_swish`,
`nn.hard_sigmoid` are lowered to small Relax expressions, and `constant` is lifted to a
parameter of the task function by lower.py (as TVM's FuseOps does), so it never reaches
`lower_binding`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import WorkerError

REQUIRED = object()  # attribute must be given
ABSENT = None  # optional attribute, absent by default

# attribute kinds (AttrKind in the Rust table)
INT, INTS, FLOAT, FLOATS, BOOL, STR, INT_OR_INTS = (
    "int",
    "int list",
    "float",
    "float list",
    "bool",
    "string",
    "int or int list",
)


@dataclass(frozen=True)
class OpSpec:
    name: str
    min_operands: int
    max_operands: int | None  # None: unbounded
    attrs: dict[str, tuple[str, Any]] = field(default_factory=dict)  # name -> (kind, default)
    lower: Callable[..., Any] | None = None  # (R, bb, operands, attrs) -> relax expr
    # LegalizeOps writes a rank-0 constant operand into the TIR as an immediate (Relax's
    # _binary legalization); lower.immediate_operand applies the rule.
    inlines_scalar_constant: bool = False


def _conv_attrs(kernel_layout: str, transpose: bool) -> dict:
    a = {
        "strides": (INTS, [1, 1]),
        "padding": (INTS, [0, 0, 0, 0]),
    }
    if transpose:
        a["output_padding"] = (INTS, [0, 0])
    a.update(
        {
            "dilation": (INTS, [1, 1]),
            "groups": (INT, 1),
            "data_layout": (STR, "NCHW"),
            "kernel_layout": (STR, kernel_layout),
            "out_layout": (STR, ABSENT),
            "out_dtype": (STR, ABSENT),
        }
    )
    return a


REDUCE = {"axis": (INTS, ABSENT), "keepdims": (BOOL, False)}
ARG_REDUCE = {"axis": (INT, ABSENT), "keepdims": (BOOL, False)}
SOFTMAX = {"axis": (INT, -1)}
POOL_COMMON = {
    "pool_size": (INTS, REQUIRED),
    "strides": (INTS, [1, 1]),
    "padding": (INTS, [0, 0, 0, 0]),
    "dilation": (INTS, [1, 1]),
    "ceil_mode": (BOOL, False),
}


def _nz(v, default=None):
    return default if v is None else v


# ---- lowering helpers: each gets (R, bb, xs, a) with R = tvm.relax.op, bb a BlockBuilder,
# xs the operand exprs, a the full attribute dict (defaults filled). They return one expr.


def _conv2d(R, bb, xs, a):
    return R.nn.conv2d(
        xs[0],
        xs[1],
        strides=a["strides"],
        padding=a["padding"],
        dilation=a["dilation"],
        groups=a["groups"],
        data_layout=a["data_layout"],
        kernel_layout=a["kernel_layout"],
        out_layout=a["out_layout"],
        out_dtype=a["out_dtype"],
    )


def _conv2d_transpose(R, bb, xs, a):
    return R.nn.conv2d_transpose(
        xs[0],
        xs[1],
        strides=a["strides"],
        padding=a["padding"],
        output_padding=a["output_padding"],
        dilation=a["dilation"],
        groups=a["groups"],
        data_layout=a["data_layout"],
        kernel_layout=a["kernel_layout"],
        out_layout=a["out_layout"],
        out_dtype=a["out_dtype"],
    )


def _swap_last_two(R, bb, x):
    nd = x.ty.ndim
    axes = list(range(nd))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return bb.emit(R.permute_dims(x, axes))


def _dense(R, bb, xs, a):
    # data [..., K] x weight [N, K]^T: Relax's linear (permute_dims + matmul)
    return R.linear(xs[0], xs[1], out_dtype=a["out_dtype"])


def _batch_matmul(R, bb, xs, a):
    lhs, rhs = xs
    if a["transpose_a"]:
        lhs = _swap_last_two(R, bb, lhs)
    if a["transpose_b"]:
        rhs = _swap_last_two(R, bb, rhs)
    return R.matmul(lhs, rhs, out_dtype=a["out_dtype"])


def _scalar(x, value):
    from tvm import relax

    return relax.const(value, x.ty.dtype)


def _bound(x, value):
    """A clip bound as a PrimValue of x's element type (what TOPI's clip casts to anyway)."""
    from tvm import relax, tirx

    dtype = str(x.ty.dtype)
    if dtype.startswith(("int", "uint")):
        return relax.prim_value(tirx.IntImm(dtype, int(value)))
    return relax.prim_value(tirx.FloatImm(dtype, float(value)))


def _clip(x, lo, hi, R):
    return R.clip(x, _bound(x, lo), _bound(x, hi))


def _hard_swish(R, bb, xs, a):
    x = xs[0]
    t = bb.emit(R.add(x, _scalar(x, 3.0)))
    t = bb.emit(_clip(t, 0.0, 6.0, R))
    t = bb.emit(R.multiply(x, t))
    return R.divide(t, _scalar(x, 6.0))


def _hard_sigmoid(R, bb, xs, a):
    x = xs[0]
    t = bb.emit(R.multiply(x, _scalar(x, a["alpha"])))
    t = bb.emit(R.add(t, _scalar(x, a["beta"])))
    return _clip(t, 0.0, 1.0, R)


def _batch_norm(R, bb, xs, a):
    from tvm import relax

    t = bb.emit(
        R.nn.batch_norm(
            *xs,
            axis=a["axis"],
            epsilon=a["epsilon"],
            center=a["center"],
            scale=a["scale"],
            training=False,
        )
    )
    return relax.TupleGetItem(t, 0)


def _unary(path: str):
    def f(R, bb, xs, a):
        fn = R
        for p in path.split("."):
            fn = getattr(fn, p)
        return fn(xs[0])

    return f


def _binary(name: str):
    return lambda R, bb, xs, a: getattr(R, name)(xs[0], xs[1])


def _reduce(name: str):
    return lambda R, bb, xs, a: getattr(R, name)(xs[0], axis=a["axis"], keepdims=a["keepdims"])


def _pool(name: str, count_include_pad: bool):
    def f(R, bb, xs, a):
        kw = dict(
            pool_size=a["pool_size"],
            strides=a["strides"],
            padding=a["padding"],
            dilation=a["dilation"],
            ceil_mode=a["ceil_mode"],
            layout=a["layout"],
            out_layout=a["out_layout"],
        )
        if count_include_pad:
            kw["count_include_pad"] = a["count_include_pad"]
        return getattr(R.nn, name)(xs[0], **kw)

    return f


def _split(R, bb, xs, a):
    return R.split(xs[0], indices_or_sections=a["indices_or_sections"], axis=a["axis"])


def _strided_slice(R, bb, xs, a):
    return R.strided_slice(xs[0], a["axes"], a["begin"], a["end"], a["strides"])


def _resize2d(R, bb, xs, a):
    return R.image.resize2d(
        xs[0],
        size=a["size"],
        roi=a["roi"],
        layout=a["layout"],
        method=a["method"],
        coordinate_transformation_mode=a["coordinate_transformation_mode"],
        rounding_method=a["rounding_method"],
        cubic_alpha=a["cubic_alpha"],
        cubic_exclude=a["cubic_exclude"],
        extrapolation_value=a["extrapolation_value"],
        out_dtype=a["out_dtype"],
    )


def _spec(name, lo, hi, attrs, lower):
    return OpSpec(name, lo, hi, dict(attrs), lower)


_UNARY_RELAX = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "erf": "erf",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "negative": "negative",
    "abs": "abs",
    "floor": "floor",
    "ceil": "ceil",
    "round": "round",
    "sin": "sin",
    "cos": "cos",
    "nn.relu": "nn.relu",
    "nn.gelu": "nn.gelu",
    "nn.gelu_tanh": "nn.gelu_tanh",
    "nn.silu": "nn.silu",
}

_BINARY = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "floor_divide",
    "power",
    "maximum",
    "minimum",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
]


def _build_table() -> dict[str, OpSpec]:
    t: dict[str, OpSpec] = {}

    def add(s: OpSpec):
        t[s.name] = s

    out_dtype = {"out_dtype": (STR, ABSENT)}
    add(_spec("nn.conv2d", 2, 2, _conv_attrs("OIHW", False), _conv2d))
    add(_spec("nn.conv2d_transpose", 2, 2, _conv_attrs("IOHW", True), _conv2d_transpose))
    add(
        _spec(
            "matmul", 2, 2, out_dtype, lambda R, bb, xs, a: R.matmul(xs[0], xs[1], a["out_dtype"])
        )
    )
    add(_spec("nn.dense", 2, 2, {"units": (INT, ABSENT), **out_dtype}, _dense))
    add(
        _spec(
            "nn.batch_matmul",
            2,
            2,
            {"transpose_a": (BOOL, False), "transpose_b": (BOOL, True), **out_dtype},
            _batch_matmul,
        )
    )
    for ours, relax_name in _UNARY_RELAX.items():
        add(_spec(ours, 1, 1, {}, _unary(relax_name)))
    add(
        _spec(
            "nn.leakyrelu",
            1,
            1,
            {"alpha": (FLOAT, 0.01)},
            lambda R, bb, xs, a: R.nn.leakyrelu(xs[0], alpha=a["alpha"]),
        )
    )
    add(_spec("nn.hard_swish", 1, 1, {}, _hard_swish))
    add(
        _spec(
            "nn.hard_sigmoid", 1, 1, {"alpha": (FLOAT, 0.2), "beta": (FLOAT, 0.5)}, _hard_sigmoid
        )
    )
    add(
        _spec(
            "clip",
            1,
            1,
            {"min": (FLOAT, REQUIRED), "max": (FLOAT, REQUIRED)},
            lambda R, bb, xs, a: _clip(xs[0], a["min"], a["max"], R),
        )
    )
    add(
        _spec(
            "astype",
            1,
            1,
            {"dtype": (STR, REQUIRED)},
            lambda R, bb, xs, a: R.astype(xs[0], a["dtype"]),
        )
    )
    for b in _BINARY:
        add(OpSpec(b, 2, 2, {}, _binary(b), inlines_scalar_constant=True))
    add(_spec("where", 3, 3, {}, lambda R, bb, xs, a: R.where(xs[0], xs[1], xs[2])))
    for r in ["sum", "mean", "max", "min", "prod"]:
        add(_spec(r, 1, 1, REDUCE, _reduce(r)))
    for r in ["argmax", "argmin"]:
        add(_spec(r, 1, 1, ARG_REDUCE, _reduce(r)))
    add(
        _spec(
            "nn.batch_norm",
            5,
            5,
            {
                "axis": (INT, 1),
                "epsilon": (FLOAT, 1e-5),
                "center": (BOOL, True),
                "scale": (BOOL, True),
            },
            _batch_norm,
        )
    )
    add(
        _spec(
            "nn.layer_norm",
            3,
            3,
            {
                "axes": (INTS, REQUIRED),
                "epsilon": (FLOAT, 1e-5),
                "center": (BOOL, True),
                "scale": (BOOL, True),
            },
            lambda R, bb, xs, a: R.nn.layer_norm(
                xs[0], xs[1], xs[2], a["axes"], a["epsilon"], a["center"], a["scale"]
            ),
        )
    )
    add(
        _spec(
            "nn.softmax", 1, 1, SOFTMAX, lambda R, bb, xs, a: R.nn.softmax(xs[0], axis=a["axis"])
        )
    )
    add(
        _spec(
            "nn.log_softmax",
            1,
            1,
            SOFTMAX,
            lambda R, bb, xs, a: R.nn.log_softmax(xs[0], axis=a["axis"]),
        )
    )
    add(
        _spec(
            "nn.max_pool2d",
            1,
            1,
            {**POOL_COMMON, "layout": (STR, "NCHW"), "out_layout": (STR, ABSENT)},
            _pool("max_pool2d", False),
        )
    )
    add(
        _spec(
            "nn.avg_pool2d",
            1,
            1,
            {
                **POOL_COMMON,
                "count_include_pad": (BOOL, False),
                "layout": (STR, "NCHW"),
                "out_layout": (STR, ABSENT),
            },
            _pool("avg_pool2d", True),
        )
    )
    add(
        _spec(
            "nn.adaptive_avg_pool2d",
            1,
            1,
            {
                "output_size": (INTS, ABSENT),
                "layout": (STR, "NCHW"),
                "out_layout": (STR, ABSENT),
            },
            lambda R, bb, xs, a: R.nn.adaptive_avg_pool2d(
                xs[0], output_size=a["output_size"], layout=a["layout"], out_layout=a["out_layout"]
            ),
        )
    )
    add(
        _spec(
            "reshape",
            1,
            1,
            {"shape": (INTS, REQUIRED)},
            lambda R, bb, xs, a: R.reshape(xs[0], a["shape"]),
        )
    )
    add(
        _spec(
            "permute_dims",
            1,
            1,
            {"axes": (INTS, ABSENT)},
            lambda R, bb, xs, a: R.permute_dims(xs[0], a["axes"]),
        )
    )
    add(
        _spec(
            "concat",
            1,
            None,
            {"axis": (INT, 0)},
            lambda R, bb, xs, a: R.concat(list(xs), axis=a["axis"]),
        )
    )
    add(
        _spec(
            "split",
            1,
            1,
            {"indices_or_sections": (INT_OR_INTS, REQUIRED), "axis": (INT, 0)},
            _split,
        )
    )
    add(
        _spec(
            "strided_slice",
            1,
            1,
            {
                "axes": (INTS, REQUIRED),
                "begin": (INTS, REQUIRED),
                "end": (INTS, REQUIRED),
                "strides": (INTS, ABSENT),
            },
            _strided_slice,
        )
    )
    add(
        _spec(
            "nn.pad",
            1,
            1,
            {
                "pad_width": (INTS, REQUIRED),
                "pad_mode": (STR, "constant"),
                "pad_value": (FLOAT, 0.0),
            },
            lambda R, bb, xs, a: R.nn.pad(xs[0], a["pad_width"], a["pad_mode"], a["pad_value"]),
        )
    )
    add(
        _spec(
            "image.resize2d",
            1,
            1,
            {
                "size": (INTS, REQUIRED),
                "roi": (FLOATS, [0.0, 0.0, 0.0, 0.0]),
                "layout": (STR, "NCHW"),
                "method": (STR, "linear"),
                "coordinate_transformation_mode": (STR, "half_pixel"),
                "rounding_method": (STR, "round"),
                "cubic_alpha": (FLOAT, -0.75),
                "cubic_exclude": (INT, 0),
                "extrapolation_value": (FLOAT, 0.0),
                "out_dtype": (STR, ABSENT),
            },
            _resize2d,
        )
    )
    add(
        _spec(
            "squeeze",
            1,
            1,
            {"axis": (INTS, ABSENT)},
            lambda R, bb, xs, a: R.squeeze(xs[0], a["axis"]),
        )
    )
    add(
        _spec(
            "expand_dims",
            1,
            1,
            {"axis": (INTS, REQUIRED)},
            lambda R, bb, xs, a: R.expand_dims(xs[0], a["axis"]),
        )
    )
    add(_spec("flatten", 1, 1, {}, lambda R, bb, xs, a: R.flatten(xs[0])))
    add(
        _spec(
            "take",
            2,
            2,
            {"axis": (INT, ABSENT), "mode": (STR, "fast")},
            lambda R, bb, xs, a: R.take(xs[0], xs[1], axis=a["axis"], mode=a["mode"]),
        )
    )
    add(
        _spec(
            "broadcast_to",
            1,
            1,
            {"shape": (INTS, REQUIRED)},
            lambda R, bb, xs, a: R.broadcast_to(xs[0], a["shape"]),
        )
    )
    add(
        _spec(
            "tile",
            1,
            1,
            {"repeats": (INTS, REQUIRED)},
            lambda R, bb, xs, a: R.tile(xs[0], a["repeats"]),
        )
    )
    # constant: lifted to a task parameter by lower.py; never lowered as a binding
    add(
        _spec(
            "constant",
            0,
            0,
            {"value": (FLOATS, REQUIRED), "shape": (INTS, REQUIRED), "dtype": (STR, REQUIRED)},
            None,
        )
    )
    return t


OPS: dict[str, OpSpec] = _build_table()


def _check_kind(kind: str, v: Any) -> Any:
    """Return v converted to the attribute kind, or raise ValueError."""

    def is_int(x):
        return isinstance(x, int) and not isinstance(x, bool)

    def is_num(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    if kind == INT and is_int(v):
        return v
    if kind == INTS and isinstance(v, list) and all(is_int(x) for x in v):
        return list(v)
    if kind == FLOAT and is_num(v):
        return float(v)
    if kind == FLOATS and isinstance(v, list) and all(is_num(x) for x in v):
        return [float(x) for x in v]
    if kind == BOOL and isinstance(v, bool):
        return v
    if kind == STR and isinstance(v, str):
        return v
    if kind == INT_OR_INTS:
        if is_int(v):
            return v
        if isinstance(v, list) and all(is_int(x) for x in v):
            return list(v)
    raise ValueError(f"expected {kind}, got {v!r}")


def normalize_attrs(op: str, attrs: dict, where: str, task: str | None) -> dict:
    """Fill defaults, check kinds, reject unknown and missing required attributes."""
    spec = OPS[op]
    if not isinstance(attrs, dict):
        raise WorkerError("bad_task", f"{where}: attrs must be an object", task)
    out = {}
    for k in attrs:
        if k not in spec.attrs:
            known = ", ".join(sorted(spec.attrs)) or "none"
            raise WorkerError(
                "bad_task", f"{where}: {op} has no attribute {k!r} (known: {known})", task
            )
    for k, (kind, default) in spec.attrs.items():
        if k in attrs and attrs[k] is not None:
            try:
                out[k] = _check_kind(kind, attrs[k])
            except ValueError as e:
                raise WorkerError("bad_task", f"{where}: attribute {k} of {op}: {e}", task)
        elif default is REQUIRED:
            raise WorkerError("bad_task", f"{where}: {op} requires attribute {k!r}", task)
        else:
            out[k] = list(default) if isinstance(default, list) else default
    return out
