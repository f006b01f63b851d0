//! The op registry. Every op is declared once, as data, in the `table` module: its Relax name,
//! arity, attribute schema with defaults, TVM op pattern, commutativity, and a shape/dtype
//! inference function. Parser, verifier, builders, partitioning and canonicalization all read
//! the same declaration.

mod infer;
mod nn;
mod table;
mod tensor;
#[cfg(test)]
mod tests;

pub use infer::InferCtx;
pub(crate) use infer::{broadcast_shapes, find_attr};

use crate::attr::{Attr, AttrKind, Attrs};
use crate::ty::TensorType;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

/// TVM's operator pattern kinds (`tvm/relax/op_attr_types.h`), used by fusion. The numeric
/// order matters: fusion compares patterns with `<=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpPattern {
    ElemWise = 0,
    Broadcast = 1,
    Injective = 2,
    CommReduce = 3,
    OutEWiseFusable = 4,
    Tuple = 7,
    Opaque = 8,
}

impl OpPattern {
    pub fn name(self) -> &'static str {
        match self {
            OpPattern::ElemWise => "ElemWise",
            OpPattern::Broadcast => "Broadcast",
            OpPattern::Injective => "Injective",
            OpPattern::CommReduce => "CommReduce",
            OpPattern::OutEWiseFusable => "OutEWiseFusable",
            OpPattern::Tuple => "Tuple",
            OpPattern::Opaque => "Opaque",
        }
    }
}

/// How many operands an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arity {
    pub min: usize,
    /// `None`: variadic.
    pub max: Option<usize>,
}

impl Arity {
    pub const fn exactly(n: usize) -> Arity {
        Arity {
            min: n,
            max: Some(n),
        }
    }
    pub const fn between(min: usize, max: usize) -> Arity {
        Arity {
            min,
            max: Some(max),
        }
    }
    pub const fn at_least(min: usize) -> Arity {
        Arity { min, max: None }
    }
    pub fn accepts(self, n: usize) -> bool {
        n >= self.min && self.max.is_none_or(|m| n <= m)
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.max {
            Some(m) if m == self.min => write!(f, "{m}"),
            Some(m) => write!(f, "{} to {}", self.min, m),
            None => write!(f, "at least {}", self.min),
        }
    }
}

/// The default of an attribute, as a `const`-friendly value.
#[derive(Clone, Copy, Debug)]
pub enum AttrDefault {
    /// Must be given.
    Required,
    /// May be absent; absence has its own meaning (e.g. `clip` without `max`).
    Optional,
    Int(i64),
    Float(f64),
    Str(&'static str),
    Bool(bool),
    Ints(&'static [i64]),
    Floats(&'static [f64]),
}

impl AttrDefault {
    /// The default as an attribute value, if there is one.
    pub fn value(self) -> Option<Attr> {
        match self {
            AttrDefault::Required | AttrDefault::Optional => None,
            AttrDefault::Int(v) => Some(Attr::Int(v)),
            AttrDefault::Float(v) => Some(Attr::Float(v)),
            AttrDefault::Str(s) => Some(Attr::Str(s.to_string())),
            AttrDefault::Bool(b) => Some(Attr::Bool(b)),
            AttrDefault::Ints(v) => Some(Attr::ints(v.iter().copied())),
            AttrDefault::Floats(v) => Some(Attr::floats(v.iter().copied())),
        }
    }
}

/// One entry of an op's attribute schema.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
    pub default: AttrDefault,
}

/// Shape and dtype inference: operand types and attributes in, result types out, or a
/// message saying what is wrong (the caller adds the op and location).
pub type InferFn = fn(&InferCtx<'_>) -> Result<Vec<TensorType>, String>;

/// The declaration of one op.
pub struct OpDef {
    /// Relax's name, e.g. `nn.conv2d`.
    pub name: &'static str,
    pub summary: &'static str,
    pub inputs: Arity,
    pub attrs: &'static [AttrSpec],
    pub pattern: OpPattern,
    /// Operand order does not matter (`add`, `multiply`, `maximum`, `minimum`, `equal`,
    /// `not_equal`).
    pub commutative: bool,
    /// LegalizeOps writes a rank-0 constant operand into the TIR as an immediate instead of
    /// reading it from a buffer (Relax's `_binary` legalization of the binary elementwise
    /// ops: operand 1 when it is such a constant, else operand 0). See
    /// [`crate::lowering::immediate_operand`].
    pub inlines_scalar_constant: bool,
    pub infer: InferFn,
}

impl OpDef {
    pub fn attr_spec(&self, name: &str) -> Option<&AttrSpec> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// A handle to a registered op: cheap to copy, compare and hash.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op(u16);

static BY_NAME: LazyLock<HashMap<&'static str, Op>> = LazyLock::new(|| {
    table::OPS
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name, Op(i as u16)))
        .collect()
});

impl Op {
    /// Looks an op up by its name.
    pub fn lookup(name: &str) -> Option<Op> {
        BY_NAME.get(name).copied()
    }

    pub fn def(self) -> &'static OpDef {
        &table::OPS[self.0 as usize]
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    pub fn pattern(self) -> OpPattern {
        self.def().pattern
    }

    /// Every registered op, in declaration order.
    pub fn all() -> impl Iterator<Item = Op> {
        (0..table::OPS.len()).map(|i| Op(i as u16))
    }

    /// Infers result types for the given operand types and attributes (attributes that are
    /// absent take their defaults). Operands with a negative extent are rejected here, once,
    /// so that no inference function has to guard against them.
    pub fn infer(self, operands: &[&TensorType], attrs: &Attrs) -> Result<Vec<TensorType>, String> {
        let def = self.def();
        if !def.inputs.accepts(operands.len()) {
            return Err(format!(
                "'{}' takes {} operands, got {}",
                def.name,
                def.inputs,
                operands.len()
            ));
        }
        if let Some((i, t)) = operands
            .iter()
            .enumerate()
            .find(|(_, t)| t.shape.iter().any(|&d| d < 0))
        {
            return Err(format!("operand {i} has a negative extent: {t}"));
        }
        (def.infer)(&InferCtx::new(def, operands, attrs))
    }

    /// `attrs` with every absent attribute that has a default filled in, in schema order,
    /// followed by the attributes the schema does not know, unchanged (rejecting them is the
    /// verifier's business). Absent optional attributes stay absent.
    pub fn with_defaults(self, attrs: &Attrs) -> Attrs {
        let def = self.def();
        let mut out = Attrs::new();
        for spec in def.attrs {
            if let Some(v) = attrs
                .get(spec.name)
                .cloned()
                .or_else(|| spec.default.value())
            {
                out.insert(spec.name.to_string(), v);
            }
        }
        for (k, v) in attrs {
            if !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        out
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
