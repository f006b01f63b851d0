//! The op table: one declaration per op. Keep entries grouped by kind.

use super::infer::broadcast_shapes;
use super::{Arity, AttrDefault as D, AttrSpec, InferCtx, OpDef, OpPattern as P};
use crate::attr::AttrKind as K;
use crate::ty::TensorType;

type R = Result<Vec<TensorType>, String>;

const fn spec(name: &'static str, kind: K, default: D) -> AttrSpec {
    AttrSpec { name, kind, default }
}

fn unary(c: &InferCtx<'_>) -> R {
    Ok(vec![c.operand(0).clone()])
}

fn binary_broadcast(c: &InferCtx<'_>) -> R {
    let (a, b) = (c.operand(0), c.operand(1));
    if a.dtype != b.dtype {
        return Err(format!("operand dtypes differ: {} and {}", a.dtype, b.dtype));
    }
    Ok(vec![TensorType { shape: broadcast_shapes(&a.shape, &b.shape)?, dtype: a.dtype }])
}

pub(super) static OPS: &[OpDef] = &[
    OpDef {
        name: "add",
        summary: "elementwise sum with numpy broadcasting",
        inputs: Arity::exactly(2),
        attrs: &[],
        pattern: P::Broadcast,
        commutative: true,
        infer: binary_broadcast,
    },
    OpDef {
        name: "nn.relu",
        summary: "max(x, 0)",
        inputs: Arity::exactly(1),
        attrs: &[],
        pattern: P::ElemWise,
        commutative: false,
        infer: unary,
    },
    OpDef {
        name: "clip",
        summary: "clamp to [min, max]",
        inputs: Arity::exactly(1),
        attrs: &[spec("min", K::Float, D::Required), spec("max", K::Float, D::Required)],
        pattern: P::ElemWise,
        commutative: false,
        infer: unary,
    },
];
