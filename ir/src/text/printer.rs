//! The printer: writes the canonical text of a module or function into one `fmt::Write`.
//!
//! Canonical means the parser reads it back to a structurally equal module whose printed
//! text is the same string, so every choice here (spacing, quoting, float spelling) is the
//! one and only spelling of its construct.

use super::lexer::{is_ident_start, is_name_byte};
use crate::attr::{Attr, Attrs};
use crate::module::{Binding, Callee, Function, Module};
use crate::ty::TensorType;
use std::fmt::{self, Write};

/// Writes `m` in canonical form.
pub(super) fn write_module<W: Write>(out: &mut W, m: &Module) -> fmt::Result {
    out.write_str("module ")?;
    write_name(out, '@', &m.name)?;
    if !m.attrs.is_empty() {
        out.write_str(" attributes ")?;
        write_dict(out, &m.attrs)?;
    }
    out.write_str(" {\n")?;
    for (i, (name, f)) in m.functions.iter().enumerate() {
        if i > 0 {
            out.write_char('\n')?;
        }
        // The map key, not `f.name`, is what calls refer to.
        write_function(out, name, f, "  ")?;
    }
    out.write_str("}\n")
}

/// Writes `f` under `name`, each line prefixed with `indent`.
pub(super) fn write_function<W: Write>(
    out: &mut W,
    name: &str,
    f: &Function,
    indent: &str,
) -> fmt::Result {
    out.write_str(indent)?;
    out.write_str("func ")?;
    write_name(out, '@', name)?;
    out.write_char('(')?;
    for (i, &p) in f.params.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write_name(out, '%', f.name_of(p))?;
        out.write_str(": ")?;
        write_type(out, f.ty(p))?;
    }
    out.write_str(") -> ")?;
    write_types(out, f.results.iter().map(|&r| f.ty(r)), f.results.len())?;
    if !f.attrs.is_empty() {
        out.write_str(" attributes ")?;
        write_dict(out, &f.attrs)?;
    }
    out.write_str(" {\n")?;
    for b in &f.bindings {
        out.write_str(indent)?;
        out.write_str("  ")?;
        write_binding(out, f, b)?;
        out.write_char('\n')?;
    }
    out.write_str(indent)?;
    out.write_str("  return")?;
    for (i, &r) in f.results.iter().enumerate() {
        out.write_str(if i == 0 { " " } else { ", " })?;
        write_name(out, '%', f.name_of(r))?;
    }
    out.write_char('\n')?;
    out.write_str(indent)?;
    out.write_str("}\n")
}

fn write_binding<W: Write>(out: &mut W, f: &Function, b: &Binding) -> fmt::Result {
    for (i, &r) in b.results.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write_name(out, '%', f.name_of(r))?;
    }
    if !b.results.is_empty() {
        out.write_str(" = ")?;
    }
    match &b.callee {
        Callee::Op(op) => out.write_str(op.name())?,
        Callee::Func(name) => {
            out.write_str("call ")?;
            write_name(out, '@', name)?;
        }
    }
    out.write_char('(')?;
    for (i, &v) in b.operands.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write_name(out, '%', f.name_of(v))?;
    }
    out.write_char(')')?;
    if !b.attrs.is_empty() {
        out.write_char(' ')?;
        write_dict(out, &b.attrs)?;
    }
    out.write_str(" : ")?;
    write_types(out, b.results.iter().map(|&r| f.ty(r)), b.results.len())
}

/// One type bare, any other number parenthesized.
fn write_types<'t, W: Write>(
    out: &mut W,
    types: impl Iterator<Item = &'t TensorType>,
    n: usize,
) -> fmt::Result {
    if n == 1 {
        for t in types {
            write_type(out, t)?;
        }
        return Ok(());
    }
    out.write_char('(')?;
    for (i, t) in types.enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write_type(out, t)?;
    }
    out.write_char(')')
}

fn write_type<W: Write>(out: &mut W, t: &TensorType) -> fmt::Result {
    out.write_str("tensor<")?;
    for &d in &t.shape {
        write_int(out, d)?;
        out.write_char('x')?;
    }
    out.write_str(t.dtype.short_name())?;
    out.write_char('>')
}

/// `%name` / `@name`, or `%"..."` / `@"..."` when the name is not `[A-Za-z0-9_.]+`.
pub(super) fn write_name<W: Write>(out: &mut W, sigil: char, name: &str) -> fmt::Result {
    out.write_char(sigil)?;
    if !name.is_empty() && name.bytes().all(is_name_byte) {
        out.write_str(name)
    } else {
        write_string(out, name)
    }
}

fn write_dict<W: Write>(out: &mut W, attrs: &Attrs) -> fmt::Result {
    out.write_char('{')?;
    for (i, (k, v)) in attrs.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        let bare =
            k.as_bytes().first().is_some_and(|&b| is_ident_start(b)) && k.bytes().all(is_name_byte);
        if bare {
            out.write_str(k)?;
        } else {
            write_string(out, k)?;
        }
        out.write_str(" = ")?;
        write_attr(out, v)?;
    }
    out.write_char('}')
}

/// An attribute's canonical text (as in a printed module), for messages.
pub(crate) fn attr_text(a: &Attr) -> String {
    let mut out = String::new();
    write_attr(&mut out, a).expect("writing to a String cannot fail");
    out
}

fn write_attr<W: Write>(out: &mut W, a: &Attr) -> fmt::Result {
    match a {
        Attr::Int(v) => write_int(out, *v),
        Attr::Float(v) => write_float(out, *v),
        Attr::Str(s) => write_string(out, s),
        Attr::Bool(b) => out.write_str(if *b { "true" } else { "false" }),
        Attr::List(items) => {
            out.write_char('[')?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                write_attr(out, item)?;
            }
            out.write_char(']')
        }
        Attr::Dict(d) => write_dict(out, d),
    }
}

/// Decimal digits without going through `fmt` machinery (types and ints are most of the text).
fn write_int<W: Write>(out: &mut W, v: i64) -> fmt::Result {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.write_char('-')?;
    }
    // Only ASCII digits were written.
    out.write_str(std::str::from_utf8(&buf[i..]).unwrap_or_default())
}

/// Rust's `{:?}` is the shortest spelling that reads back to the same bits, and always has a
/// `.` or an exponent, which is how the parser tells floats from ints.
fn write_float<W: Write>(out: &mut W, v: f64) -> fmt::Result {
    if v.is_nan() {
        out.write_str("nan")
    } else if v.is_infinite() {
        out.write_str(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        write!(out, "{v:?}")
    }
}

/// A double-quoted string: `"` `\` newline and tab escaped by name, other control characters
/// as `\u{hex}`, everything else as is.
fn write_string<W: Write>(out: &mut W, s: &str) -> fmt::Result {
    out.write_char('"')?;
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let named = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\t' => "\\t",
            c if c.is_control() => "",
            _ => continue,
        };
        out.write_str(&s[run_start..i])?;
        if named.is_empty() {
            write!(out, "\\u{{{:x}}}", c as u32)?;
        } else {
            out.write_str(named)?;
        }
        run_start = i + c.len_utf8();
    }
    out.write_str(&s[run_start..])?;
    out.write_char('"')
}
