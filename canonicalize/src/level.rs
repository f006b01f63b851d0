//! Key levels and what each level sees of types and attributes.

use std::borrow::Cow;
use tgc_ir::{Attr, Binding, TensorType};

/// How much of a task a key captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Ops, every attribute, dtypes, full static shapes and the dataflow: equal exact keys
    /// lower to the same TVM workload, so a cached trace replays as is.
    Exact,
    /// Like exact with tensor extents replaced by symbols: ranks, dtypes and attributes such as
    /// kernel size, strides, padding, groups and layouts stay; extent-valued attributes
    /// (a reshape's target shape) are reduced to their length and constants' values dropped. Equal
    /// structural keys mean the same loop nest with other extents.
    Structural,
    /// The sequence of op names in canonical order (the name-based key of the TGC paper).
    Family,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Exact, Level::Structural, Level::Family];

    /// Domain-separation tag written first into every encoding.
    pub fn tag(self) -> &'static [u8] {
        match self {
            Level::Exact => b"tgc2/exact\0",
            Level::Structural => b"tgc2/structural\0",
            Level::Family => b"tgc2/family\0",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::Structural => "structural",
            Level::Family => "family",
        }
    }
}

impl std::str::FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Level::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| {
                format!("unknown key level '{s}'; valid levels: exact, structural, family")
            })
    }
}

/// Writes what `level` sees of a tensor type.
pub fn encode_type(t: &TensorType, level: Level, out: &mut Vec<u8>) {
    match level {
        Level::Family => {}
        Level::Structural => {
            out.extend_from_slice(t.dtype.short_name().as_bytes());
            out.push(b'/');
            out.extend_from_slice(&(t.rank() as u32).to_le_bytes());
        }
        Level::Exact => {
            out.extend_from_slice(t.dtype.short_name().as_bytes());
            out.push(b'/');
            out.extend_from_slice(&(t.rank() as u32).to_le_bytes());
            for d in &t.shape {
                out.extend_from_slice(&d.to_le_bytes());
            }
        }
    }
}

/// Attributes whose values are tensor extents (or data), per op: at the structural level only
/// their length is kept.
const EXTENT_ATTRS: &[(&str, &str)] = &[
    ("reshape", "shape"),
    ("broadcast_to", "shape"),
    ("image.resize2d", "size"),
    ("strided_slice", "begin"),
    ("strided_slice", "end"),
    ("nn.adaptive_avg_pool2d", "output_size"),
    ("constant", "shape"),
    ("tile", "repeats"),
];

fn is_extent_attr(op: &str, attr: &str) -> bool {
    EXTENT_ATTRS.iter().any(|(o, a)| *o == op && *a == attr)
}

fn encode_attr(a: &Attr, out: &mut Vec<u8>) {
    match a {
        Attr::Int(v) => {
            out.push(b'i');
            out.extend_from_slice(&v.to_le_bytes());
        }
        Attr::Float(v) => {
            out.push(b'f');
            let bits = if v.is_nan() {
                f64::NAN.to_bits()
            } else {
                v.to_bits()
            };
            out.extend_from_slice(&bits.to_le_bytes());
        }
        Attr::Str(s) => {
            out.push(b's');
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        Attr::Bool(b) => {
            out.push(b'b');
            out.push(*b as u8);
        }
        Attr::List(l) => {
            out.push(b'l');
            out.extend_from_slice(&(l.len() as u32).to_le_bytes());
            l.iter().for_each(|x| encode_attr(x, out));
        }
        Attr::Dict(d) => {
            out.push(b'd');
            let mut keys: Vec<&String> = d.keys().collect();
            keys.sort();
            out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
            for k in keys {
                out.extend_from_slice(&(k.len() as u32).to_le_bytes());
                out.extend_from_slice(k.as_bytes());
                encode_attr(&d[k], out);
            }
        }
    }
}

/// Writes what `level` sees of a binding's attributes: every attribute with defaults filled
/// in (so an absent attribute and its default are one thing), sorted by name.
///
/// A constant's values are seen only where the lowering writes them into the TIR
/// (`value_in_tir`, from [`tgc_ir::lowering::constants_in_tir`]) and only at the exact level:
/// a lifted constant is a parameter of the workload, known by its dtype and shape. Whether
/// it is lifted or an immediate changes the workload's signature, so both levels see that.
pub fn encode_attrs(b: &Binding, level: Level, value_in_tir: bool, out: &mut Vec<u8>) {
    if level == Level::Family {
        return;
    }
    let constant = b.callee.op().is_some_and(|op| op.name() == "constant");
    if constant {
        out.push(if value_in_tir { b'I' } else { b'P' });
    }
    let keep_value = level == Level::Exact && value_in_tir;
    // The binding's attributes plus the schema defaults it leaves out, without copying the
    // given ones (this runs for every binding of every task at every level).
    let mut entries: Vec<(&str, Cow<'_, Attr>)> = Vec::with_capacity(b.attrs.len() + 8);
    let op = b.callee.op();
    if let Some(op) = op {
        for spec in op.def().attrs {
            match b.attrs.get(spec.name) {
                Some(v) => entries.push((spec.name, Cow::Borrowed(v))),
                None => {
                    if let Some(d) = spec.default.value() {
                        entries.push((spec.name, Cow::Owned(d)));
                    }
                }
            }
        }
    }
    for (k, v) in &b.attrs {
        if op.is_none_or(|op| op.def().attr_spec(k).is_none()) {
            entries.push((k.as_str(), Cow::Borrowed(v)));
        }
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let op_name = op.map_or("", |op| op.name());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    if constant && !keep_value {
        entries.retain(|(k, _)| *k != "value");
    }
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        if level == Level::Structural && is_extent_attr(op_name, k) {
            out.push(b'x');
            let len = v.as_list().map_or(1, |l| l.len());
            out.extend_from_slice(&(len as u32).to_le_bytes());
        } else {
            encode_attr(&v, out);
        }
    }
}
