//! Helpers for shape and dtype inference functions.

use super::OpDef;
use crate::attr::{Attr, Attrs};
use crate::ty::{Shape, TensorType};

/// What an inference function sees: the op's declaration, operand types and attributes.
/// Attribute getters fall back to the schema default.
pub struct InferCtx<'a> {
    pub def: &'static OpDef,
    pub operands: &'a [&'a TensorType],
    pub attrs: &'a Attrs,
}

impl<'a> InferCtx<'a> {
    pub fn new(def: &'static OpDef, operands: &'a [&'a TensorType], attrs: &'a Attrs) -> Self {
        InferCtx { def, operands, attrs }
    }

    pub fn operand(&self, i: usize) -> &TensorType {
        self.operands[i]
    }

    /// The attribute, or its schema default.
    pub fn attr(&self, name: &str) -> Option<Attr> {
        self.attrs
            .get(name)
            .cloned()
            .or_else(|| self.def.attr_spec(name).and_then(|s| s.default.value()))
    }

    pub fn int(&self, name: &str) -> Result<i64, String> {
        self.attr(name)
            .and_then(|a| a.as_int())
            .ok_or_else(|| format!("attribute '{name}' must be an int"))
    }

    pub fn float(&self, name: &str) -> Result<f64, String> {
        self.attr(name)
            .and_then(|a| a.as_float())
            .ok_or_else(|| format!("attribute '{name}' must be a float"))
    }

    pub fn string(&self, name: &str) -> Result<String, String> {
        self.attr(name)
            .and_then(|a| a.as_str().map(str::to_string))
            .ok_or_else(|| format!("attribute '{name}' must be a string"))
    }

    pub fn bool(&self, name: &str) -> Result<bool, String> {
        self.attr(name)
            .and_then(|a| a.as_bool())
            .ok_or_else(|| format!("attribute '{name}' must be a bool"))
    }

    pub fn ints(&self, name: &str) -> Result<Vec<i64>, String> {
        self.attr(name)
            .and_then(|a| a.as_ints())
            .ok_or_else(|| format!("attribute '{name}' must be a list of ints"))
    }

    /// A list of ints of length `n`, where a single-element list is broadcast to `n`.
    pub fn ints_n(&self, name: &str, n: usize) -> Result<Vec<i64>, String> {
        let v = self.ints(name)?;
        match v.len() {
            l if l == n => Ok(v),
            1 => Ok(vec![v[0]; n]),
            l => Err(format!("attribute '{name}' must have {n} elements, got {l}")),
        }
    }
}

/// Numpy-style broadcast of two shapes.
pub fn broadcast_shapes(a: &[i64], b: &[i64]) -> Result<Shape, String> {
    let rank = a.len().max(b.len());
    let mut out = Shape::with_capacity(rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            (x, y) => return Err(format!("shapes {a:?} and {b:?} do not broadcast ({x} vs {y})")),
        });
    }
    Ok(out)
}

/// Normalizes a possibly negative axis against `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r.max(1) {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(a as usize)
}
