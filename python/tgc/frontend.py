"""The Relax frontend: a Relax IRModule (before legalization, static shapes) as tgc IR.

``from_relax`` walks the ``main`` function's bindings and writes each one as tgc text IR,
which the Rust side parses and verifies (shape inference of every op against the types
written here), so op typing is the registry's, as for ONNX. Relax op ``relax.X`` is tgc op
``X``: the registry uses Relax's op and attribute names, and its schema (``op_schema()``)
says which attributes each op has. Where an op takes a Relax argument that tgc keeps as an
attribute (``reshape``'s shape, ``clip``'s bounds, ``concat``'s tuple) the table
``_ARGUMENTS`` below says how to read it.

What TVM's frontends write that is not a Relax op call is brought to the form tgc's own ONNX
importer produces, so the same model gives the same tasks and keys by either route:

- ``call_tir`` of the TE functions ``from_onnx`` emits for ``Clip`` and ``Pad``
  (``topi.maximum``/``topi.minimum`` with a scalar bound, ``topi.nn.pad``) become
  ``maximum``/``minimum``/``nn.pad``, read from the PrimFunc's single block; with constant
  bounds they are ``clip {min = lo, max = hi, tensor_bounds = true}`` (one clip for a
  ``minimum(maximum(x, lo), hi)``, an infinite bound for a lone one).
- Ops whose operands are all small constants are evaluated here, as tgc's importer folds
  them: the NaN guards ``where(isnan(c), inf, c)`` of ``Clip``'s bounds, a Conv bias
  reshaped for broadcasting.
- A constant with at most 16 elements, or one computed by folding, is a ``constant``
  binding (its value kept); a larger one becomes a parameter of ``@main``, as an ONNX
  initializer does.

An op tgc does not know, or a construct outside this subset (a call of another function, a
``match_cast``, a dynamic shape), is a ``TgcError`` naming the binding and the op.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from . import _native

TgcError = _native.TgcError

# A constant with at most this many elements is a `constant` binding, a bigger one a
# parameter (ir/src/onnx: ImportOptions::constant_binding_max_elements).
CONSTANT_BINDING_MAX_ELEMENTS = 16

# Float constants with more elements are never folded (ImportOptions::fold_float_max_elements).
FOLD_FLOAT_MAX_ELEMENTS = 256

_FOLD_BINARY = {
    "add": lambda np, a, b: np.add(a, b),
    "subtract": lambda np, a, b: np.subtract(a, b),
    "multiply": lambda np, a, b: np.multiply(a, b),
    "divide": lambda np, a, b: np.divide(a, b),
}

_SCHEMA: dict[str, dict] | None = None


def op_schema() -> dict[str, dict]:
    """The op registry: tgc op name -> its schema (operand counts, attributes)."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = {o["name"]: o for o in json.loads(_native.op_schema())["ops"]}
    return _SCHEMA


_SHORT_DTYPES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
}

_NAME = re.compile(r"^[A-Za-z0-9_.]+$")


def _quote(s: str) -> str:
    out = []
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\u{%x}" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _ident(sigil: str, name: str) -> str:
    return sigil + (name if _NAME.match(name) else _quote(name))


def _float(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    r = repr(float(v))
    return r if ("." in r or "e" in r) else r + ".0"


def _attr_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_attr_value(x) for x in v) + "]"
    raise TypeError(f"no text form for attribute value {v!r}")


def _attrs_text(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    key = lambda k: k if re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", k) else _quote(k)
    return " {" + ", ".join(f"{key(k)} = {_attr_value(v)}" for k, v in attrs.items()) + "}"


class _Tensor:
    """A tensor type: static shape and TVM dtype name."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: list[int], dtype: str):
        self.shape = shape
        self.dtype = dtype

    def text(self) -> str:
        short = _SHORT_DTYPES.get(self.dtype)
        if short is None:
            raise TgcError(f"dtype {self.dtype} has no tgc equivalent")
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + short + ">"


class _Const:
    """A known constant: a numpy array (and, once materialized, the value naming it).
    `folded`: computed here from other constants (always a `constant` binding)."""

    __slots__ = ("array", "value", "folded")

    def __init__(self, array, folded: bool = False):
        self.array = array
        self.value: str | None = None
        self.folded = folded


class _Converter:
    def __init__(self, mod, func_name: str):
        import numpy as np
        from tvm import relax

        self.np = np
        self.relax = relax
        self.mod = mod
        self.func_name = func_name
        self.params: list[tuple[str, _Tensor]] = []
        # The values of the constants lifted to parameters, in the order of those parameters
        # (after the function's own).
        self.lifted: list = []
        self.lines: list[str] = []
        # results of the TE maximum/minimum from_onnx writes for Clip (see peephole_clip)
        self.te_clamps: set[str] = set()
        self.names: set[str] = set()
        # Relax Var -> a tgc value name, a _Const, or a tuple of those.
        self.env: dict[Any, Any] = {}
        # tgc value name -> its type (for the signature's result types).
        self.types: dict[str, _Tensor] = {}
        self.binding = "?"

    # ---- names and types --------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        # Names stay in the text format's bare spelling, so the peephole can read them.
        base = re.sub(r"[^A-Za-z0-9_.]", "_", hint) or "v"
        name, i = base, 0
        while name in self.names:
            i += 1
            name = f"{base}_{i}"
        self.names.add(name)
        return name

    def fail(self, what: str) -> TgcError:
        return TgcError(f"from_relax: @{self.func_name}, binding '{self.binding}': {what}")

    def tensor_type(self, sinfo, what: str) -> _Tensor:
        relax = self.relax
        if not isinstance(sinfo, relax.TensorType):
            raise self.fail(f"{what} is {type(sinfo).__name__}, not a tensor")
        if sinfo.shape is None or not isinstance(sinfo.shape, relax.ShapeExpr):
            raise self.fail(f"{what} has no static shape")
        dims = []
        for d in sinfo.shape.values:
            if not hasattr(d, "value"):
                raise self.fail(f"{what} has the symbolic dimension {d} (static shapes only)")
            dims.append(int(d.value))
        return _Tensor(dims, str(sinfo.dtype))

    # ---- constants ----------------------------------------------------------------------

    def const_value(self, c: _Const) -> str:
        """The tgc value of a constant, materialized on first use."""
        if c.value is not None:
            return c.value
        arr = c.array
        ty = _Tensor([int(d) for d in arr.shape], str(arr.dtype))
        if arr.size <= CONSTANT_BINDING_MAX_ELEMENTS or c.folded:
            name = self.fresh("const")
            attrs = {
                "value": [float(x) for x in arr.reshape(-1).tolist()],
                "shape": list(ty.shape),
                "dtype": ty.dtype,
            }
            self.lines.append(f"    %{name} = constant(){_attrs_text(attrs)} : {ty.text()}")
        else:
            name = self.fresh("param")
            self.params.append((name, ty))
            self.lifted.append(arr)
        self.types[name] = ty
        c.value = name
        return name

    # ---- operands ------------------------------------------------------------------------

    def operand(self, e) -> Any:
        relax = self.relax
        if isinstance(e, _generic_const()):
            return _Const(e.value.numpy())
        if isinstance(e, relax.Var):
            if e not in self.env:
                raise self.fail(f"uses {e.name}, which is not defined before it")
            return self.env[e]
        if isinstance(e, relax.Tuple):
            return tuple(self.operand(f) for f in e.fields)
        raise self.fail(f"has an operand of kind {type(e).__name__}")

    def tensor_operand(self, x) -> str:
        if isinstance(x, _Const):
            return self.const_value(x)
        if isinstance(x, str):
            return x
        raise self.fail("passes a tuple where a tensor is expected")

    # ---- emitting ------------------------------------------------------------------------

    def emit(self, op: str, operands: list, attrs: dict, results: list[_Tensor], hint: str):
        names = [self.fresh(hint if len(results) == 1 else f"{hint}.{i}") for i in range(len(results))]
        args = ", ".join(_ident("%", self.tensor_operand(x)) for x in operands)
        res = results[0].text() if len(results) == 1 else "(" + ", ".join(r.text() for r in results) + ")"
        lhs = ", ".join(_ident("%", n) for n in names)
        self.lines.append(f"    {lhs} = {op}({args}){_attrs_text(attrs)} : {res}")
        for n, r in zip(names, results):
            self.types[n] = r
        return names

    def result_types(self, sinfo) -> list[_Tensor]:
        relax = self.relax
        if isinstance(sinfo, relax.TupleType):
            return [self.tensor_type(f, "a result") for f in sinfo.fields]
        return [self.tensor_type(sinfo, "the result")]

    # ---- the walk ------------------------------------------------------------------------

    def convert(self, name: str) -> str:
        relax = self.relax
        if all(gv.name_hint != self.func_name for gv in self.mod.functions):
            raise TgcError(f"from_relax: the module has no function @{self.func_name}")
        func = self.mod[self.func_name]
        if not isinstance(func, relax.Function):
            raise TgcError(f"from_relax: @{self.func_name} is not a Relax function")
        self.binding = "(parameters)"
        for p in func.params:
            pname = self.fresh(p.name)
            self.params.append((pname, self.tensor_type(p.ty, f"parameter {p.name}")))
            self.types[pname] = self.params[-1][1]
            self.env[p] = pname
        body = func.body
        if not isinstance(body, relax.SeqExpr):
            raise TgcError(f"from_relax: @{self.func_name}: the body is not a sequence of bindings")
        num_params = len(self.params)
        for block in body.blocks:
            for b in block.bindings:
                self.binding = b.var.name
                if not isinstance(b, relax.VarBinding):
                    raise self.fail(f"is a {type(b).__name__} (only plain bindings are supported)")
                self.env[b.var] = self.binding_value(b.var, b.value)
        self.binding = "(result)"
        out = self.operand(body.body)
        outs = list(out) if isinstance(out, tuple) else [out]
        ret = [self.tensor_operand(o) for o in outs]
        self.lines = self.peephole_clip(self.lines)
        sig = ", ".join(f"{_ident('%', n)}: {t.text()}" for n, t in self.params)
        rtys = [self.types[r] for r in ret]
        rty = rtys[0].text() if len(rtys) == 1 else "(" + ", ".join(t.text() for t in rtys) + ")"
        head = (f"module {_ident('@', name)} {{\n"
                f"  func @main({sig}) -> {rty} attributes {{num_input = {num_params}}} {{\n")
        tail = "    return " + ", ".join(_ident("%", r) for r in ret) + "\n  }\n}\n"
        return head + "\n".join(self.lines) + ("\n" if self.lines else "") + tail

    def binding_value(self, var, value):
        relax = self.relax
        if isinstance(value, (relax.Var, _generic_const(), relax.Tuple)):
            return self.operand(value)
        if isinstance(value, relax.TupleGetItem):
            t = self.operand(value.tuple_value)
            if not isinstance(t, tuple):
                raise self.fail("takes an item of a value that is not a tuple")
            return t[value.index]
        if not isinstance(value, relax.Call):
            raise self.fail(f"binds a {type(value).__name__} (only op calls are supported)")
        op = value.op
        if isinstance(op, relax.GlobalVar) or not hasattr(op, "name"):
            callee = getattr(op, "name_hint", type(op).__name__)
            raise self.fail(f"calls the function {callee} (only op calls are supported)")
        opname = str(op.name)
        if opname == "relax.call_tir":
            return self.call_tir(var, value)
        if not opname.startswith("relax."):
            raise self.fail(f"calls {opname}, which tgc does not support")
        tgc_op = opname[len("relax."):]
        args = [self.operand(a) if not self._is_param_arg(a) else a for a in value.args]
        folded = self.fold(tgc_op, args)
        if folded is not None:
            return folded
        schema = op_schema().get(tgc_op)
        if schema is None or tgc_op == "constant":
            raise self.fail(f"calls {opname}, which tgc does not support")
        operands, attrs = self.arguments(tgc_op, opname, args, value.attrs, schema)
        results = self.result_types(var.ty)
        names = self.emit(tgc_op, operands, attrs, results, var.name)
        return names[0] if len(names) == 1 and not isinstance(var.ty, relax.TupleType) else tuple(names)

    def _is_param_arg(self, a) -> bool:
        """A non-tensor argument: a shape, or a scalar or string immediate (TVM 0.27 spells
        prim values as IntImm/FloatImm, constants of the IR, not GenericConst tensors)."""
        import tvm

        relax = self.relax
        if isinstance(a, relax.ShapeExpr):
            return True
        return isinstance(a, tvm.ir.expr.Constant) and not isinstance(a, _generic_const())

    # ---- arguments and attributes ---------------------------------------------------------

    def arguments(self, op: str, opname: str, args: list, rattrs, schema: dict):
        """Operands and tgc attributes of a Relax call."""
        attrs: dict[str, Any] = {}
        special = _ARGUMENTS.get(op)
        if special is not None:
            operands, extra = special(self, args)
            attrs.update(extra)
        else:
            operands = args
        for a in operands:
            if not isinstance(a, (str, _Const, tuple)):
                raise self.fail(f"calls {opname} with an argument of kind {type(a).__name__}")
        flat = []
        for a in operands:
            flat.extend(a if isinstance(a, tuple) else [a])
        for spec in schema["attrs"]:
            n = spec["name"]
            if n in attrs or rattrs is None or not hasattr(rattrs, n):
                continue
            v = self.attr(getattr(rattrs, n), spec["kind"], f"{opname} attribute {n}")
            if v is None:
                continue
            if spec["presence"] == "optional" and self._natural(n, v, rattrs):
                continue
            attrs[n] = v
        lo, hi = schema["min_operands"], schema["max_operands"]
        if len(flat) < lo or (hi is not None and len(flat) > hi):
            raise self.fail(f"calls {opname} with {len(flat)} operands")
        return flat, attrs

    @staticmethod
    def _natural(name: str, v, rattrs) -> bool:
        """An optional attribute whose value Relax filled in from another (out_layout from
        the input layout): tgc leaves it out, as its ONNX importer does."""
        if name == "out_layout":
            for src in ("data_layout", "layout"):
                if hasattr(rattrs, src) and str(getattr(rattrs, src)) == v:
                    return True
        return False

    def attr(self, v, kind: str, what: str):
        if v is None:
            return None
        try:
            if kind == "int":
                return int(v)
            if kind == "float":
                return float(v.value if hasattr(v, "value") else v)
            if kind == "bool":
                return bool(int(v.value if hasattr(v, "value") else v))
            if kind == "str":
                s = str(v)
                return None if s in ("", "void") else s
            if kind == "int_list":
                return [int(x) for x in v]
            if kind == "float_list":
                return [float(x.value if hasattr(x, "value") else x) for x in v]
            if kind == "int_or_int_list":
                if hasattr(v, "__len__"):
                    return [int(x) for x in v]
                return int(v)
        except (TypeError, ValueError) as e:
            raise self.fail(f"{what}: {v!r} is not a {kind} ({e})")
        raise self.fail(f"{what}: attributes of kind {kind} are not supported")

    # ---- constant folding -----------------------------------------------------------------

    def fold(self, op: str, args: list):
        """The value of an op over constants only, as tgc's ONNX importer folds them (its
        `eval`): the NaN guards of Clip's bounds (isnan, where), and reshapes, casts and
        arithmetic of small constants (a Conv bias reshaped for broadcasting). None when
        the op is not folded."""
        np = self.np
        consts = [a for a in args if isinstance(a, _Const)]
        if not consts or any(isinstance(a, (str, tuple)) for a in args):
            return None
        if any(c.array.dtype.kind == "f" and c.array.size > FOLD_FLOAT_MAX_ELEMENTS for c in consts):
            return None
        xs = [c.array for c in consts]
        out = None
        if op == "isnan" and len(xs) == 1:
            out = np.isnan(xs[0])
        elif op == "where" and len(xs) == 3:
            out = np.where(xs[0], xs[1], xs[2]).astype(np.result_type(xs[1], xs[2]))
        elif op == "reshape" and len(xs) == 1 and isinstance(args[1], self.relax.ShapeExpr):
            out = xs[0].reshape([int(d) for d in args[1].values])
        elif op in _FOLD_BINARY and len(xs) == 2 and len(args) == 2:
            out = _FOLD_BINARY[op](np, xs[0], xs[1]).astype(np.result_type(xs[0], xs[1]))
        if out is None:
            return None
        if out.dtype.kind == "f" and out.size > FOLD_FLOAT_MAX_ELEMENTS:
            return None
        return _Const(out, folded=True)

    # ---- call_tir of the TE functions from_onnx emits ------------------------------------

    def call_tir(self, var, call):
        _, P = _ir()
        gv = call.args[0]
        prim = self.mod[gv]
        args = self.operand(call.args[1])
        args = list(args) if isinstance(args, tuple) else [args]
        results = self.result_types(var.ty)
        what = f"calls call_tir({gv.name_hint})"
        store = _single_store(prim)
        if store is None or len(results) != 1:
            raise self.fail(f"{what}: only the single-block TE functions of from_onnx are supported")
        value = store.value
        if isinstance(value, (P.Max, P.Min)) and len(args) == 2:
            op = "maximum" if isinstance(value, P.Max) else "minimum"
            name = self.emit(op, args, {}, results, var.name)[0]
            self.te_clamps.add(name)
            return name
        pad = _pad_widths(prim, store)
        if pad is not None and len(args) == 1:
            widths, pad_value = pad
            attrs = {"pad_width": widths, "pad_mode": "constant", "pad_value": pad_value}
            return self.emit("nn.pad", args, attrs, results, var.name)[0]
        raise self.fail(f"{what}: only the single-block TE functions of from_onnx are supported")

    # ---- clip ---------------------------------------------------------------------------

    def peephole_clip(self, lines: list[str]) -> list[str]:
        """The TE maximum/minimum of from_onnx's Clip with scalar constant bounds are clip
        {min = lo, max = hi, tensor_bounds = true}, as tgc's ONNX import writes Clip from
        opset 11 on: a maximum used only by a minimum is one clip, a lone one a clip with
        the other bound infinite. A Relax maximum/minimum stays what it is."""
        consts: dict[str, str] = {}
        pat_const = re.compile(r"^    %(\S+) = constant\(\) \{value = \[([^\]]*)\], shape = \[\], dtype = \"(float\d+)\"\} : .*$")
        pat_bin = re.compile(r"^    %(\S+) = (maximum|minimum)\(%(\S+), %(\S+)\) : (.*)$")
        uses: dict[str, int] = {}
        for ln in lines:
            m = pat_const.match(ln)
            if m:
                consts[m.group(1)] = m.group(2)
            rhs = ln.split("=", 1)[1] if "=" in ln else ln
            for u in re.findall(r"%([A-Za-z0-9_.]+)", rhs):
                uses[u] = uses.get(u, 0) + 1

        def clip(out: str, x: str, lo: str, hi: str, ty: str) -> str:
            return (f"    %{out} = clip(%{x}) {{min = {lo}, max = {hi}, tensor_bounds = true}}"
                    f" : {ty}")

        maxes: dict[str, tuple[str, str, int]] = {}
        out: list[str | None] = []
        for ln in lines:
            m = pat_bin.match(ln)
            if not (m and m.group(1) in self.te_clamps and m.group(4) in consts):
                out.append(ln)
                continue
            res, op, x, c, ty = m.groups()
            if op == "maximum":
                maxes[res] = (x, consts[c], len(out))
                ln = clip(res, x, consts[c], "inf", ty)
            elif x in maxes and uses.get(x) == 1:
                x, lo, at = maxes.pop(x)
                out[at] = None
                ln = clip(res, x, lo, consts[c], ty)
            else:
                ln = clip(res, x, "-inf", consts[c], ty)
            out.append(ln)
        kept = [ln for ln in out if ln is not None]
        # Bound constants only the clips used are gone with them.
        return _drop_unused_constants(kept)


def _drop_unused_constants(lines: list[str]) -> list[str]:
    pat_const = re.compile(r"^    %(\S+) = constant\(\)")
    used: set[str] = set()
    for ln in lines:
        if pat_const.match(ln):
            continue
        rhs = ln.split("=", 1)[1] if "=" in ln else ln
        used.update(re.findall(r"%([A-Za-z0-9_.]+)", rhs))
    return [ln for ln in lines if not (pat_const.match(ln) and pat_const.match(ln).group(1) not in used)]


def _generic_const():
    """A tensor constant (relax.const) in TVM 0.27."""
    import tvm

    return tvm.ir.expr.GenericConst


def _tirx():
    from tvm import tirx

    return tirx


def _ir():
    """TVM 0.27's unified expression classes: (tvm.ir.expr, tvm.ir.prim.expr)."""
    import tvm.ir.expr as E
    import tvm.ir.prim.expr as P

    return E, P


def _single_store(prim):
    """The one BufferStore of a PrimFunc made of one block in a loop nest, else None."""
    tirx = _tirx()
    stores = []

    def walk(s):
        if isinstance(s, tirx.BufferStore):
            stores.append(s)
            return
        for attr in ("body", "block"):
            child = getattr(s, attr, None)
            if child is not None and not isinstance(child, (int, float, str)):
                walk(child)
        for child in getattr(s, "seq", None) or []:
            walk(child)

    walk(prim.body)
    return stores[0] if len(stores) == 1 else None


def _pad_widths(prim, store):
    """topi.nn.pad's block: out[v] = if_then_else(in bounds, A[v - before], pad_value).
    Returns ([b0, a0, b1, a1, ...], pad_value) from the load indices and the shapes."""
    E, P = _ir()
    v = store.value
    if not (isinstance(v, E.Call) and str(getattr(v.op, "name", "")) == "prim.if_then_else"):
        return None
    load, fill = v.args[1], v.args[2]
    if not isinstance(load, E.TensorLoad) or not isinstance(fill, (P.FloatImm, P.IntImm)):
        return None
    before = []
    for idx in load.indices:
        if isinstance(idx, E.Var):
            before.append(0)
        elif isinstance(idx, P.Sub) and isinstance(idx.a, E.Var) and isinstance(idx.b, P.IntImm):
            before.append(int(idx.b.value))
        else:
            return None
    src = [int(d) for d in load.source.shape]
    dst = [int(d) for d in store.buffer.shape]
    if len(src) != len(dst) or len(before) != len(src):
        return None
    widths = []
    for b, s, d in zip(before, src, dst):
        widths += [b, d - s - b]
    return widths, float(fill.value)


def _shape_values(self, e, what: str) -> list[int]:
    relax = self.relax
    if isinstance(e, relax.ShapeExpr):
        return [int(d) for d in e.values]
    raise self.fail(f"{what} is not a static shape")


def _prim(self, e, what: str) -> float:
    if self._is_param_arg(e) and isinstance(getattr(e, "value", None), (int, float)):
        return float(e.value)
    raise self.fail(f"{what} is not a constant")


# Relax ops whose non-tensor arguments are tgc attributes: op -> (converter, args) ->
# (operands, attributes).
_ARGUMENTS = {
    "reshape": lambda self, a: ([a[0]], {"shape": _shape_values(self, a[1], "reshape's shape")}),
    "broadcast_to": lambda self, a: ([a[0]], {"shape": _shape_values(self, a[1], "broadcast_to's shape")}),
    "clip": lambda self, a: ([a[0]], {"min": _prim(self, a[1], "clip's min"), "max": _prim(self, a[2], "clip's max")}),
    "concat": lambda self, a: (list(a[0]) if isinstance(a[0], tuple) else [a[0]], {}),
    "image.resize2d": lambda self, a: ([a[0]], {"size": _shape_values(self, a[1], "resize2d's size")}),
}


def _entry(mod, func: str | None) -> str:
    """The function to convert: `func`, else `main`, else the module's only Relax function
    (``relax.frontend.nn``'s ``export_tvm`` names it after the method, e.g. ``forward``)."""
    from tvm import relax

    if func is not None:
        return func
    names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, relax.Function)]
    if "main" in names or len(names) != 1:
        if "main" not in names:
            raise TgcError(f"from_relax: the module has no @main; name one of its functions "
                           f"with func= ({', '.join(sorted(names)) or 'none'})")
        return "main"
    return names[0]


def from_relax(mod, name: str = "relax", func: str | None = None):
    """A Relax IRModule's function ``func`` as a tgc IR module (default ``main``, else the
    module's only Relax function).

    The module must not be legalized yet (Relax op calls, not TIR) and have static shapes,
    as ``relax.frontend.onnx.from_onnx`` and ``relax.frontend.nn``'s ``export_tvm`` give it.
    Returns a ``tgc.Module``; ``tgc.tasks(module)`` lists its tasks. An op tgc does not
    support raises ``tgc.TgcError`` naming the op and the binding.
    """
    return convert(mod, name, func)[0]


def convert(mod, name: str = "relax", func: str | None = None):
    """``from_relax`` with what it lifted: ``(module, entry, lifted)``, ``entry`` the name
    of the function converted and ``lifted`` the values (numpy arrays) of the constants that
    became parameters of ``@main``, in the order of those parameters (after the function's
    own)."""
    entry = _entry(mod, func)
    c = _Converter(mod, entry)
    text = c.convert(name)
    return _native.Module.parse(text, f"<relax {name}>"), entry, c.lifted


def relax_text(mod, name: str = "relax", func: str | None = None) -> str:
    """The text IR ``from_relax`` parses (for inspection and error reports)."""
    return _Converter(mod, _entry(mod, func)).convert(name)
