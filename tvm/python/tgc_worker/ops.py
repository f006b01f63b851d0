"""The worker's op table: what an op is comes from the Rust registry, how it lowers is here.

`op_schema.json`, generated from `ir/src/ops/table.rs` (`TGC_BLESS=1 cargo test -p tgc-tvm
op_schema`), gives every op's name, operand counts, attributes with kinds and presence, and
`inlines_scalar_constant`. This module adds one lowering per op, keyed by name
(`LOWERINGS`), and refuses to load when an op has no lowering or a lowering no op. Most ops
map one to one onto `tvm.relax.op`; `nn.dense`, `nn.batch_matmul`, `nn.hard_swish` and
`nn.hard_sigmoid` become small Relax expressions, and `constant` is lifted to a parameter of
the task function by lower.py (as TVM's FuseOps does), so it has no lowering.

Defaults are the client's business: the Rust side sends every attribute with the registry's
defaults filled in, and `check_attrs` only checks what arrived.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable

from .errors import WorkerError

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_schema.json")
REGENERATE = "TGC_BLESS=1 cargo test -p tgc-tvm op_schema"

# The attribute kinds an op's schema may use (AttrKind in Rust, as the schema spells it).
KINDS = ("int", "float", "str", "bool", "int_list", "float_list", "int_or_int_list")
# "defaulted": the client fills in `default`; "required": the client must be given it;
# "optional": may be absent, and absence has its own meaning (clip without max).
PRESENCES = ("defaulted", "required", "optional")


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: str
    presence: str
    default: Any = None  # what the client fills in when presence == "defaulted"


@dataclass(frozen=True)
class OpSpec:
    name: str
    min_operands: int
    max_operands: int | None  # None: variadic
    attrs: dict[str, AttrSpec]  # in the registry's order
    # LegalizeOps writes a rank-0 constant operand into the TIR as an immediate (Relax's
    # _binary legalization); lower.immediate_operands applies the rule.
    inlines_scalar_constant: bool
    lower: Callable[..., Any] | None  # (R, bb, operands, attrs) -> relax expr


class OpSchemaError(Exception):
    """op_schema.json is malformed or disagrees with LOWERINGS (a bug of this checkout)."""


# ---- lowerings: each gets (R, bb, xs, a) with R = tvm.relax.op, bb a BlockBuilder, xs the
# operand exprs and a the checked attributes (every one of the schema; None for an absent
# optional one). They return one expr.


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


def _relax_clip(x, lo, hi, R):
    return R.clip(x, _bound(x, lo), _bound(x, hi))


def _clip(R, bb, xs, a):
    """Relax's clip; with `tensor_bounds`, ONNX Clip as TVM's ONNX frontend writes it:
    `maximum` with the min, then `minimum` with the max, each bound a rank-0 parameter
    (xs[1:] = the min's and the max's, None for an infinite one, as lower.clip_bounds
    lifts them)."""
    if len(xs) == 1:
        return _relax_clip(xs[0], a["min"], a["max"], R)
    x, lo, hi = xs
    if lo is not None:
        x = R.maximum(x, lo)
        if hi is None:
            return x
        x = bb.emit(x)
    return R.minimum(x, hi)


def _hard_swish(R, bb, xs, a):
    x = xs[0]
    t = bb.emit(R.add(x, _scalar(x, 3.0)))
    t = bb.emit(_relax_clip(t, 0.0, 6.0, R))
    t = bb.emit(R.multiply(x, t))
    return R.divide(t, _scalar(x, 6.0))


def _hard_sigmoid(R, bb, xs, a):
    x = xs[0]
    t = bb.emit(R.multiply(x, _scalar(x, a["alpha"])))
    t = bb.emit(R.add(t, _scalar(x, a["beta"])))
    return _relax_clip(t, 0.0, 1.0, R)


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


def _relax_op(path: str):
    """The Relax op called `path` (`exp`, `nn.relu`) on the first operand."""

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


# Ops that are the Relax op of the same name applied to their operands, attributes ignored.
_SAME_NAME_UNARY = [
    "exp", "log", "sqrt", "rsqrt", "erf", "tanh", "sigmoid", "negative", "abs", "floor",
    "ceil", "round", "sin", "cos", "nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu",
]
_SAME_NAME_BINARY = [
    "add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
]

LOWERINGS: dict[str, Callable[..., Any] | None] = {
    "nn.conv2d": _conv2d,
    "nn.conv2d_transpose": _conv2d_transpose,
    "matmul": lambda R, bb, xs, a: R.matmul(xs[0], xs[1], a["out_dtype"]),
    "nn.dense": _dense,
    "nn.batch_matmul": _batch_matmul,
    **{name: _relax_op(name) for name in _SAME_NAME_UNARY},
    "nn.leakyrelu": lambda R, bb, xs, a: R.nn.leakyrelu(xs[0], alpha=a["alpha"]),
    "nn.hard_swish": _hard_swish,
    "nn.hard_sigmoid": _hard_sigmoid,
    "clip": _clip,
    "astype": lambda R, bb, xs, a: R.astype(xs[0], a["dtype"]),
    **{name: _binary(name) for name in _SAME_NAME_BINARY},
    "where": lambda R, bb, xs, a: R.where(xs[0], xs[1], xs[2]),
    **{name: _reduce(name) for name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin")},
    "nn.batch_norm": _batch_norm,
    "nn.layer_norm": lambda R, bb, xs, a: R.nn.layer_norm(
        xs[0], xs[1], xs[2], a["axes"], a["epsilon"], a["center"], a["scale"]
    ),
    "nn.softmax": lambda R, bb, xs, a: R.nn.softmax(xs[0], axis=a["axis"]),
    "nn.log_softmax": lambda R, bb, xs, a: R.nn.log_softmax(xs[0], axis=a["axis"]),
    "nn.max_pool2d": _pool("max_pool2d", False),
    "nn.avg_pool2d": _pool("avg_pool2d", True),
    "nn.adaptive_avg_pool2d": lambda R, bb, xs, a: R.nn.adaptive_avg_pool2d(
        xs[0], output_size=a["output_size"], layout=a["layout"], out_layout=a["out_layout"]
    ),
    "reshape": lambda R, bb, xs, a: R.reshape(xs[0], a["shape"]),
    "permute_dims": lambda R, bb, xs, a: R.permute_dims(xs[0], a["axes"]),
    "concat": lambda R, bb, xs, a: R.concat(list(xs), axis=a["axis"]),
    "split": _split,
    "strided_slice": _strided_slice,
    "nn.pad": lambda R, bb, xs, a: R.nn.pad(xs[0], a["pad_width"], a["pad_mode"], a["pad_value"]),
    "image.resize2d": _resize2d,
    "squeeze": lambda R, bb, xs, a: R.squeeze(xs[0], a["axis"]),
    "expand_dims": lambda R, bb, xs, a: R.expand_dims(xs[0], a["axis"]),
    "flatten": lambda R, bb, xs, a: R.flatten(xs[0]),
    "take": lambda R, bb, xs, a: R.take(xs[0], xs[1], axis=a["axis"], mode=a["mode"]),
    "broadcast_to": lambda R, bb, xs, a: R.broadcast_to(xs[0], a["shape"]),
    "tile": lambda R, bb, xs, a: R.tile(xs[0], a["repeats"]),
    # lifted to a task parameter by lower.py; never lowered as a binding
    "constant": None,
}


def _attr_spec(op: str, a: dict) -> AttrSpec:
    where = f"{SCHEMA_PATH}: {op}, attribute {a.get('name')!r}"
    if a.get("kind") not in KINDS:
        raise OpSchemaError(f"{where}: kind {a.get('kind')!r} is none of {', '.join(KINDS)}")
    if a.get("presence") not in PRESENCES:
        raise OpSchemaError(f"{where}: presence {a.get('presence')!r} is none of {PRESENCES}")
    if ("default" in a) != (a["presence"] == "defaulted"):
        raise OpSchemaError(f"{where}: a default goes with presence 'defaulted' and only with it")
    try:
        default = _check_kind(a["kind"], a["default"]) if "default" in a else None
    except ValueError as e:
        raise OpSchemaError(f"{where}: default: {e}")
    return AttrSpec(a["name"], a["kind"], a["presence"], default)


def load_ops(schema: dict, lowerings: dict) -> dict[str, OpSpec]:
    """The op table: each op of `schema` (op_schema.json) with its lowering. Raises
    OpSchemaError when an op has no lowering or a lowering names no op."""
    names = [o["name"] for o in schema["ops"]]
    no_lowering = [n for n in names if n not in lowerings]
    no_op = [n for n in lowerings if n not in names]
    if no_lowering or no_op:
        parts = []
        if no_lowering:
            parts.append(f"ops without a lowering in tgc_worker/ops.py: {', '.join(no_lowering)}")
        if no_op:
            parts.append(f"lowerings of ops the schema lacks: {', '.join(no_op)}")
        raise OpSchemaError(
            f"{'; '.join(parts)} (the schema is the Rust registry's: add or remove the "
            f"lowering, or regenerate the schema with `{REGENERATE}`)"
        )
    return {
        o["name"]: OpSpec(
            name=o["name"],
            min_operands=o["min_operands"],
            max_operands=o["max_operands"],
            attrs={a["name"]: _attr_spec(o["name"], a) for a in o["attrs"]},
            inlines_scalar_constant=o["inlines_scalar_constant"],
            lower=lowerings[o["name"]],
        )
        for o in schema["ops"]
    }


def _read_schema(path: str = SCHEMA_PATH) -> dict:
    with open(path) as f:
        return json.load(f)


# JSON has no infinity or NaN: a float attribute spells them as these strings.
NON_FINITE = ("inf", "-inf", "nan")


def _check_kind(kind: str, v: Any) -> Any:
    """Return v converted to the attribute kind, or raise ValueError."""

    def is_int(x):
        return isinstance(x, int) and not isinstance(x, bool)

    def is_num(x):
        return (isinstance(x, (int, float)) and not isinstance(x, bool)) or x in NON_FINITE

    if kind == "int" and is_int(v):
        return v
    if kind == "int_list" and isinstance(v, list) and all(is_int(x) for x in v):
        return list(v)
    if kind == "float" and is_num(v):
        return float(v)
    if kind == "float_list" and isinstance(v, list) and all(is_num(x) for x in v):
        return [float(x) for x in v]
    if kind == "bool" and isinstance(v, bool):
        return v
    if kind == "str" and isinstance(v, str):
        return v
    if kind == "int_or_int_list":
        if is_int(v):
            return v
        if isinstance(v, list) and all(is_int(x) for x in v):
            return list(v)
    raise ValueError(f"expected {kind}, got {v!r}")


OPS: dict[str, OpSpec] = load_ops(_read_schema(), LOWERINGS)


def check_attrs(op: str, attrs, where: str, task: str | None) -> dict:
    """A binding's attributes, checked against the schema: none unknown, every one but the
    optional ones present (the client fills in defaults, this never does), each of its kind
    (a JSON int is accepted as a float). Absent optional attributes come back as None."""
    spec = OPS[op]
    if not isinstance(attrs, dict):
        raise WorkerError("bad_task", f"{where}: attrs must be an object", task)
    for k in attrs:
        if k not in spec.attrs:
            known = ", ".join(spec.attrs) or "none"
            raise WorkerError(
                "bad_task", f"{where}: {op} has no attribute {k!r} (known: {known})", task
            )
    out = {}
    for k, a in spec.attrs.items():
        if k not in attrs:
            if a.presence != "optional":
                raise WorkerError(
                    "bad_task",
                    f"{where}: missing {a.presence} attribute {k!r} (the client sends every "
                    f"attribute but absent optional ones, defaults filled in)",
                    task,
                )
            out[k] = None
        elif attrs[k] is None:
            raise WorkerError(
                "bad_task",
                f"{where}: attribute {k!r} is null (a float spells infinity and NaN as "
                f"\"inf\", \"-inf\", \"nan\")",
                task,
            )
        else:
            try:
                out[k] = _check_kind(a.kind, attrs[k])
            except ValueError as e:
                raise WorkerError("bad_task", f"{where}: attribute {k!r} of {op}: {e}", task)
    return out
