//! Reading back what `tgc opt --emit mlir` writes (`crate::text::print_module_mlir`): every
//! `func.func` becomes a function of the module, `func.call` a call, each generic `tgc.OP`
//! operation the registry's `OP` with its attributes, and the module's `tgc.`-prefixed
//! attributes the module's own.

use super::{bail, body_block, op_name, PResult, Problem};
use crate::attr::{Attr, Attrs};
use crate::module::{Callee, Function, Module, ValueId};
use crate::text::MLIR_DIALECT;
use melior::ir::attribute::{
    ArrayAttribute, Attribute, BoolAttribute, DenseI64ArrayAttribute, DictionaryAttribute,
    FloatAttribute, IntegerAttribute, StringAttribute,
};
use melior::ir::block::BlockLike;
use melior::ir::operation::OperationLike;
use melior::ir::{OperationRef, Value, ValueLike};
use std::collections::HashMap;

/// Whether `func` holds an operation of tgc's dialect.
pub(super) fn uses_tgc_dialect(func: &OperationRef) -> bool {
    let prefix = format!("{MLIR_DIALECT}.");
    let Some(block) = body_block(func) else {
        return false;
    };
    let mut op = block.first_operation();
    while let Some(o) = op {
        if op_name(&o).starts_with(&prefix) {
            return true;
        }
        op = o.next_in_block();
    }
    false
}

/// The module's functions, in order, with the module's attributes (their `tgc.` prefix
/// removed).
pub(super) fn convert_module(
    name: String,
    module_op: &OperationRef,
    funcs: &[(String, OperationRef)],
) -> PResult<Module> {
    let mut m = Module::new(name);
    let prefix = format!("{MLIR_DIALECT}.");
    for (key, value) in discardable(module_op)? {
        let key = key.strip_prefix(&prefix).unwrap_or(&key).to_string();
        m.attrs.insert(key, value);
    }
    for (sym, func) in funcs {
        let f = convert_function(sym, func).map_err(|p| p.at(func))?;
        m.add_function(f).map_err(|e| Problem::msg(e.to_string()))?;
    }
    Ok(m)
}

fn key(v: &Value) -> usize {
    v.to_raw().ptr as usize
}

fn convert_function(sym: &str, func: &OperationRef) -> PResult<Function> {
    let block = body_block(func).ok_or_else(|| Problem::msg("has no body"))?;
    let mut f = Function::new(sym);
    let mut env: HashMap<usize, ValueId> = HashMap::new();
    for i in 0..block.argument_count() {
        let arg = block.argument(i).map_err(|e| Problem::msg(e.to_string()))?;
        let ty = super::convert::tensor_type(&arg.r#type().to_string())
            .map_err(|m| Problem::msg(format!("argument {i}: {m}")))?;
        let id = f.add_param(Some(&format!("arg{i}")), ty);
        env.insert(key(&arg.into()), id);
    }
    f.attrs = discardable(func)?;
    let prefix = format!("{MLIR_DIALECT}.");
    let mut op = block.first_operation();
    while let Some(o) = op {
        let name = op_name(&o);
        let operands = (0..o.operand_count())
            .map(|i| {
                let v = o.operand(i).map_err(|e| Problem::msg(e.to_string()))?;
                env.get(&key(&v)).copied().ok_or_else(|| {
                    Problem::msg(format!("operand {i} is not defined before its use"))
                })
            })
            .collect::<PResult<Vec<_>>>()
            .map_err(|p| p.at(&o))?;
        let result_types = (0..o.result_count())
            .map(|i| {
                let r = o.result(i).map_err(|e| Problem::msg(e.to_string()))?;
                super::convert::tensor_type(&r.r#type().to_string())
                    .map_err(|m| Problem::msg(format!("result {i}: {m}")))
            })
            .collect::<PResult<Vec<_>>>()
            .map_err(|p| p.at(&o))?;
        let results: Vec<ValueId> = if name == "func.return" {
            f.results = operands.into_iter().collect();
            return Ok(f);
        } else if name == "func.call" {
            let callee = o
                .attribute("callee")
                .map_err(|_| Problem::msg("has no callee").at(&o))?
                .to_string();
            let callee = callee.trim_start_matches('@').trim_matches('"').to_string();
            f.push_binding(Callee::Func(callee), &operands, Attrs::new(), result_types)
                .to_vec()
        } else if let Some(op_name) = name.strip_prefix(&prefix) {
            let attrs = discardable(&o).map_err(|p| p.at(&o))?;
            let ids = f
                .push_op(op_name, &operands, attrs)
                .map_err(|e| Problem::msg(e.to_string()).at(&o))?;
            let inferred: Vec<_> = ids.iter().map(|&id| f.ty(id).clone()).collect();
            if inferred != result_types {
                return Err(Problem::msg(format!(
                    "result types {result_types:?} differ from the inferred {inferred:?}"
                ))
                .at(&o));
            }
            ids.to_vec()
        } else {
            return Err(Problem::msg("unsupported op in a module of tgc's dialect").at(&o));
        };
        for (i, id) in results.into_iter().enumerate() {
            let r = o
                .result(i)
                .map_err(|e| Problem::msg(e.to_string()).at(&o))?;
            env.insert(key(&r.into()), id);
        }
        op = o.next_in_block();
    }
    bail!("the function has no func.return")
}

/// The discardable attributes of `op` (its inherent ones, such as a function's type, are
/// MLIR's business).
fn discardable(op: &OperationRef) -> PResult<Attrs> {
    let mut out = Attrs::new();
    for i in 0..op.discardable_attribute_count() {
        let (k, v) = op
            .discardable_attribute_at(i)
            .map_err(|e| Problem::msg(e.to_string()))?;
        let k = k
            .as_string_ref()
            .as_str()
            .map_err(|_| Problem::msg("an attribute name is not UTF-8"))?
            .to_string();
        let v = attr(v).map_err(|m| Problem::msg(format!("attribute '{k}': {m}")))?;
        out.insert(k, v);
    }
    Ok(out)
}

fn attr(a: Attribute) -> Result<Attr, String> {
    if let Ok(b) = BoolAttribute::try_from(a) {
        return Ok(Attr::Bool(b.value()));
    }
    if let Ok(i) = IntegerAttribute::try_from(a) {
        return Ok(Attr::Int(i.value()));
    }
    if let Ok(x) = FloatAttribute::try_from(a) {
        return Ok(Attr::Float(x.value()));
    }
    if let Ok(s) = StringAttribute::try_from(a) {
        return Ok(Attr::Str(s.value().to_string()));
    }
    if let Ok(arr) = DenseI64ArrayAttribute::try_from(a) {
        return (0..arr.len())
            .map(|i| arr.element(i).map(Attr::Int).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()
            .map(Attr::List);
    }
    if let Ok(arr) = ArrayAttribute::try_from(a) {
        return (0..arr.len())
            .map(|i| attr(arr.element(i).map_err(|e| e.to_string())?))
            .collect::<Result<Vec<_>, _>>()
            .map(Attr::List);
    }
    if let Ok(d) = DictionaryAttribute::try_from(a) {
        let mut out = Attrs::new();
        for i in 0..d.len() {
            let (k, v) = d.element(i).map_err(|e| e.to_string())?;
            let k = k
                .as_string_ref()
                .as_str()
                .map_err(|e| e.to_string())?
                .to_string();
            out.insert(k, attr(v)?);
        }
        return Ok(Attr::Dict(out));
    }
    Err(format!("{a} is not an attribute tgc reads"))
}
