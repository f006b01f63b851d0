//! The module as MLIR text: what `tgc opt --emit mlir` writes, so that an MLIR pipeline can
//! read what tgc's passes found.
//!
//! Functions are `func.func` (upstream, custom form), calls `func.call`, results
//! `func.return`; every op of the registry is an operation of a `tgc` dialect in MLIR's
//! generic form (`"tgc.nn.conv2d"(%x, %w) {strides = array<i64: 1, 1>, ...} : (...) -> ...`),
//! which `mlir-opt --allow-unregistered-dialect` parses and prints back. Function and module
//! attributes are discardable attributes of the `func.func` (under their own names) and the
//! `builtin.module` (prefixed `tgc.`, as MLIR wants a module's attributes): a partitioned module's fused functions carry `tgc.exact_key`,
//! `tgc.structural_key`, `tgc.family_key`, `tgc.features`, `tgc.candidates` and
//! `tgc.seed_plan` where the passes put them.
//!
//! Attributes (an op's are discardable attributes, `{...}` after its operands): integers are
//! `i64`, floats `f64` (non-finite ones as the hexadecimal bit pattern MLIR reads), lists of
//! integers `array<i64: ...>`, other lists `[...]`, dictionaries `{...}`. The MLIR frontend reads this dialect back
//! into the same module (value names aside: MLIR does not keep them).

use crate::attr::{Attr, Attrs};
use crate::module::{Callee, Function, Module, ValueId};
use crate::ty::TensorType;
use std::collections::HashSet;
use std::fmt::Write;

/// The dialect prefix of tgc's ops in MLIR.
pub const DIALECT: &str = "tgc";

/// `m` as MLIR text (see the module docs).
pub fn print_module_mlir(m: &Module) -> String {
    let mut out = String::new();
    let _ = write!(out, "module @{}", symbol(&m.name));
    if !m.attrs.is_empty() {
        // A builtin.module takes dialect-prefixed attributes only.
        let prefixed: Attrs = m
            .attrs
            .iter()
            .map(|(k, v)| (format!("{DIALECT}.{k}"), v.clone()))
            .collect();
        out.push_str(" attributes ");
        write_dict(&mut out, &prefixed);
    }
    out.push_str(" {\n");
    for (i, f) in m.functions.values().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        write_function(&mut out, f);
    }
    out.push_str("}\n");
    out
}

fn write_function(out: &mut String, f: &Function) {
    let names = value_names(f);
    let v = |id: ValueId| format!("%{}", names[id.index()]);
    let _ = write!(out, "  func.func @{}(", symbol(&f.name));
    for (i, &p) in f.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}: {}", v(p), mlir_type(f.ty(p)));
    }
    out.push_str(") -> (");
    write_types(out, f, &f.results);
    out.push(')');
    if !f.attrs.is_empty() {
        out.push_str(" attributes ");
        write_dict(out, &f.attrs);
    }
    out.push_str(" {\n");
    for b in &f.bindings {
        out.push_str("    ");
        match b.results.len() {
            0 => {}
            1 => {
                let _ = write!(out, "{} = ", v(b.results[0]));
            }
            _ => {
                // Several results: `%name:N`, each read as `%name#i`.
                let _ = write!(
                    out,
                    "%{}:{} = ",
                    names[b.results[0].index()],
                    b.results.len()
                );
            }
        }
        let operands: Vec<String> = b.operands.iter().map(|&o| use_name(f, &names, o)).collect();
        match &b.callee {
            Callee::Func(name) => {
                let _ = write!(out, "func.call @{}({})", symbol(name), operands.join(", "));
            }
            Callee::Op(op) => {
                let _ = write!(out, "\"{DIALECT}.{}\"({})", op.name(), operands.join(", "));
                if !b.attrs.is_empty() {
                    out.push(' ');
                    write_dict(out, &b.attrs);
                }
            }
        }
        out.push_str(" : (");
        let types: Vec<String> = b.operands.iter().map(|&o| mlir_type(f.ty(o))).collect();
        out.push_str(&types.join(", "));
        out.push_str(") -> (");
        write_types(out, f, &b.results);
        out.push_str(")\n");
    }
    out.push_str("    func.return");
    if !f.results.is_empty() {
        let rs: Vec<String> = f.results.iter().map(|&r| use_name(f, &names, r)).collect();
        let _ = write!(out, " {} : ", rs.join(", "));
        write_types(out, f, &f.results);
    }
    out.push_str("\n  }\n");
}

fn write_types(out: &mut String, f: &Function, ids: &[ValueId]) {
    let types: Vec<String> = ids.iter().map(|&r| mlir_type(f.ty(r))).collect();
    out.push_str(&types.join(", "));
}

/// How a use of `id` is spelled: `%name`, or `%first#i` for the i-th result of a
/// multi-result binding.
fn use_name(f: &Function, names: &[String], id: ValueId) -> String {
    for b in &f.bindings {
        if b.results.len() > 1 {
            if let Some(i) = b.results.iter().position(|&r| r == id) {
                return format!("%{}#{}", names[b.results[0].index()], i);
            }
        }
    }
    format!("%{}", names[id.index()])
}

/// An MLIR-legal, unique SSA name per value: the IR name where MLIR allows it (digits only,
/// or a letter or `$._-` followed by those and digits), else `v` + the name's legal
/// characters.
fn value_names(f: &Function) -> Vec<String> {
    let mut used = HashSet::new();
    (0..f.num_values())
        .map(|i| {
            let name = &f.value(ValueId(i as u32)).name;
            let legal = |c: char| c.is_ascii_alphanumeric() || "$._-".contains(c);
            let ok = !name.is_empty()
                && (name.chars().all(|c| c.is_ascii_digit())
                    || (!name.starts_with(|c: char| c.is_ascii_digit())
                        && name.chars().all(legal)));
            let mut base = if ok {
                name.clone()
            } else {
                format!(
                    "v{}",
                    name.chars().filter(|&c| legal(c)).collect::<String>()
                )
            };
            while !used.insert(base.clone()) {
                base.push('_');
            }
            base
        })
        .collect()
}

/// `@name`'s symbol: bare where MLIR allows it, else quoted.
fn symbol(name: &str) -> String {
    if is_bare_id(name) {
        name.to_string()
    } else {
        quoted(name)
    }
}

fn is_bare_id(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c))
}

fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:02X}");
            }
        }
    }
    out.push('"');
    out
}

fn write_dict(out: &mut String, attrs: &Attrs) {
    out.push('{');
    write_entries(out, attrs);
    out.push('}');
}

fn write_entries(out: &mut String, attrs: &Attrs) {
    for (i, (k, v)) in attrs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if is_bare_id(k) {
            out.push_str(k);
        } else {
            out.push_str(&quoted(k));
        }
        out.push_str(" = ");
        write_attr(out, v);
    }
}

fn float(x: f64) -> String {
    if x.is_finite() {
        // `{:?}` always has a point or an exponent, as MLIR's float literal needs.
        format!("{x:?}")
    } else {
        format!("0x{:016X}", x.to_bits())
    }
}

fn write_attr(out: &mut String, a: &Attr) {
    match a {
        Attr::Int(i) => {
            let _ = write!(out, "{i} : i64");
        }
        Attr::Float(x) => {
            let _ = write!(out, "{} : f64", float(*x));
        }
        Attr::Str(s) => out.push_str(&quoted(s)),
        Attr::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Attr::List(items)
            if !items.is_empty() && items.iter().all(|x| matches!(x, Attr::Int(_))) =>
        {
            let v: Vec<String> = items
                .iter()
                .map(|x| x.as_int().unwrap_or(0).to_string())
                .collect();
            let _ = write!(out, "array<i64: {}>", v.join(", "));
        }
        Attr::List(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_attr(out, x);
            }
            out.push(']');
        }
        Attr::Dict(d) => write_dict(out, d),
    }
}

/// The type as MLIR spells it: tgc's text format uses MLIR's spelling but for unsigned
/// integers (`u8` is MLIR's `ui8`).
fn mlir_type(t: &TensorType) -> String {
    let elem = t.dtype.short_name();
    let elem = match elem.strip_prefix('u') {
        Some(bits) => format!("ui{bits}"),
        None => elem.to_string(),
    };
    let mut s = String::from("tensor<");
    for d in t.shape.iter() {
        let _ = write!(s, "{d}x");
    }
    s.push_str(&elem);
    s.push('>');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse_module;

    #[test]
    fn attributes_types_and_multi_results_in_mlir_spelling() {
        let m = parse_module(
            r#"module @m attributes {source = "a \"b\""} {
  func @main(%x: tensor<1x8xu8>, %y: tensor<1x8xf32>) -> tensor<1x4xf32> attributes {num_input = 2, tgc.features = {flops = 2.5, log2 = [1.0, 2.0]}} {
    %a, %b = split(%y) {indices_or_sections = 2, axis = 1} : (tensor<1x4xf32>, tensor<1x4xf32>)
    %s = add(%a, %b) : tensor<1x4xf32>
    return %s
  }
}
"#,
            "t",
        )
        .expect("parses");
        let mut m = m;
        let f = m.function_mut("main").expect("main");
        f.attrs
            .insert("bad-key".into(), Attr::Float(f64::NEG_INFINITY));
        let text = print_module_mlir(&m);
        assert!(
            text.starts_with("module @m attributes {tgc.source = \"a \\\"b\\\"\"} {"),
            "{text}"
        );
        assert!(text.contains("%x: tensor<1x8xui8>"), "{text}");
        assert!(text.contains("num_input = 2 : i64"), "{text}");
        assert!(
            text.contains("tgc.features = {flops = 2.5 : f64, log2 = [1.0 : f64, 2.0 : f64]}"),
            "{text}"
        );
        assert!(
            text.contains("\"bad-key\" = 0xFFF0000000000000 : f64"),
            "{text}"
        );
        assert!(
            text.contains(
                "%a:2 = \"tgc.split\"(%y) {indices_or_sections = 2 : i64, axis = 1 : i64}"
            ),
            "{text}"
        );
        assert!(text.contains("\"tgc.add\"(%a#0, %a#1)"), "{text}");
        assert!(text.contains("func.return %s : tensor<1x4xf32>"), "{text}");
    }
}
