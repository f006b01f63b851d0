//! Typed attributes on ops, functions and modules: int, float, string, bool, lists and nested
//! dictionaries. Dictionaries keep their insertion order so printing is stable.

use indexmap::IndexMap;
use std::fmt;

/// An ordered attribute dictionary.
pub type Attrs = IndexMap<String, Attr>;

/// One attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    List(Vec<Attr>),
    Dict(Attrs),
}

/// The kind of an attribute value, as an op's attribute schema declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttrKind {
    Int,
    Float,
    Str,
    Bool,
    IntList,
    FloatList,
    StrList,
    /// An integer or a list of integers (`split`'s `indices_or_sections`: a number of equal
    /// sections, or the indices to split at).
    IntOrIntList,
    /// Any list (elements of mixed kinds, or nested lists).
    List,
    Dict,
    /// Anything: used by generic containers such as function attributes.
    Any,
}

impl AttrKind {
    /// Whether `value` has this kind. An integer is accepted where a float is expected, and an
    /// empty list matches every list kind.
    pub fn accepts(self, value: &Attr) -> bool {
        match (self, value) {
            (AttrKind::Any, _) => true,
            (AttrKind::Int, Attr::Int(_)) => true,
            (AttrKind::Float, Attr::Float(_) | Attr::Int(_)) => true,
            (AttrKind::Str, Attr::Str(_)) => true,
            (AttrKind::Bool, Attr::Bool(_)) => true,
            (AttrKind::IntList, Attr::List(v)) => v.iter().all(|a| matches!(a, Attr::Int(_))),
            (AttrKind::FloatList, Attr::List(v)) => {
                v.iter().all(|a| matches!(a, Attr::Float(_) | Attr::Int(_)))
            }
            (AttrKind::StrList, Attr::List(v)) => v.iter().all(|a| matches!(a, Attr::Str(_))),
            (AttrKind::IntOrIntList, Attr::Int(_)) => true,
            (AttrKind::IntOrIntList, Attr::List(v)) => v.iter().all(|a| matches!(a, Attr::Int(_))),
            (AttrKind::List, Attr::List(_)) => true,
            (AttrKind::Dict, Attr::Dict(_)) => true,
            _ => false,
        }
    }
}

impl fmt::Display for AttrKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            AttrKind::Int => "int",
            AttrKind::Float => "float",
            AttrKind::Str => "string",
            AttrKind::Bool => "bool",
            AttrKind::IntList => "list of int",
            AttrKind::FloatList => "list of float",
            AttrKind::StrList => "list of string",
            AttrKind::IntOrIntList => "int or list of int",
            AttrKind::List => "list",
            AttrKind::Dict => "dictionary",
            AttrKind::Any => "any",
        };
        f.write_str(s)
    }
}

impl Attr {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Attr::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// A float, or an integer widened to float.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Attr::Float(v) => Some(*v),
            Attr::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Attr::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Attr]> {
        match self {
            Attr::List(v) => Some(v),
            _ => None,
        }
    }

    /// A list of integers.
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        self.as_list()?.iter().map(Attr::as_int).collect()
    }

    /// A list of floats (integers widened).
    pub fn as_floats(&self) -> Option<Vec<f64>> {
        self.as_list()?.iter().map(Attr::as_float).collect()
    }

    pub fn as_dict(&self) -> Option<&Attrs> {
        match self {
            Attr::Dict(d) => Some(d),
            _ => None,
        }
    }

    pub fn ints(v: impl IntoIterator<Item = i64>) -> Attr {
        Attr::List(v.into_iter().map(Attr::Int).collect())
    }

    pub fn floats(v: impl IntoIterator<Item = f64>) -> Attr {
        Attr::List(v.into_iter().map(Attr::Float).collect())
    }

    pub fn str(s: impl Into<String>) -> Attr {
        Attr::Str(s.into())
    }

    /// Equality that treats every NaN as equal to every NaN (floats are compared bitwise
    /// otherwise-by-value), so that structural equality is reflexive.
    pub fn same_as(&self, other: &Attr) -> bool {
        match (self, other) {
            (Attr::Float(a), Attr::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Attr::List(a), Attr::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_as(y))
            }
            (Attr::Dict(a), Attr::Dict(b)) => attrs_same(a, b),
            _ => self == other,
        }
    }
}

/// Structural equality of two attribute dictionaries (order matters: it is printed).
pub fn attrs_same(a: &Attrs, b: &Attrs) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && va.same_as(vb))
}

impl From<i64> for Attr {
    fn from(v: i64) -> Self {
        Attr::Int(v)
    }
}
impl From<f64> for Attr {
    fn from(v: f64) -> Self {
        Attr::Float(v)
    }
}
impl From<bool> for Attr {
    fn from(v: bool) -> Self {
        Attr::Bool(v)
    }
}
impl From<&str> for Attr {
    fn from(v: &str) -> Self {
        Attr::Str(v.to_string())
    }
}
impl From<String> for Attr {
    fn from(v: String) -> Self {
        Attr::Str(v)
    }
}
