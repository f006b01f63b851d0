//! The ONNX frontend: real exported models into the IR, with static shapes.
//!
//! [`import_file`] / [`import_bytes`] decode a model with the `onnx-protobuf` messages, give
//! every graph input a static shape (from the model, or from the `shapes` the caller passes,
//! which the CLI takes as `--shape NAME=1x3x224x224`), convert the nodes in order, and return
//! a module with one function `@main`.
//!
//! # What each ONNX op becomes
//! The converters ([`supported_ops`]) follow TVM's Relax `from_onnx`, so that op counts and
//! tuning tasks compare with TVM's: `Gemm` is `matmul` plus `multiply`/`permute_dims`/`add`,
//! `GlobalAveragePool` is `mean` over H, W with kept dims, a `Conv` bias is `reshape` + `add`,
//! `Conv` with `auto_pad = SAME_*` pads the data with `nn.pad` first, `HardSigmoid` and
//! `HardSwish` are written out with `multiply`/`add`/`clip`/`divide`. `BatchNormalization` is
//! decomposed for inference exactly as TVM's `DecomposeOpsForInference` does, so no
//! `nn.batch_norm` is left. Where TVM emits a TE function (`Clip`, `Pad`) we emit the Relax op
//! that computes the same (`clip`, `nn.pad`). Deliberate differences, each computing the same:
//! `Sum`/`Max`/`Min` of several inputs are chains of binary ops (TVM stacks and reduces),
//! `Unsqueeze` of several axes is one `expand_dims`, a `Cast` to the same dtype and a `Pad`
//! with all-zero pads vanish, and legacy (opset < 13) `Softmax` skips the reshapes when the
//! input is already 2-D.
//!
//! # Constants, initializers and folding
//! Like onnx-simplifier and TVM's FoldConstant, an op whose operands are all known constants
//! is evaluated at import time (the `eval` module) instead of being emitted, so exporter shape
//! arithmetic (`Shape`, `Gather`, `Concat`, `Cast`, `Unsqueeze`, `Slice`, arithmetic,
//! `ConstantOfShape`, `Range`, ...) disappears and a `Reshape` whose target is computed at run
//! time still imports with a static shape. The policy, with its limits in [`ImportOptions`]:
//! - Initializers (and `Constant` tensors) are read only when needed. Integer ones, and float
//!   ones with at most [`ImportOptions::fold_float_max_elements`] (256) elements, are folded
//!   into whatever consumes them: attributes (Reshape's shape, Clip's bounds, Pad's pads, axes)
//!   and folded ops. Bigger float tensors are never read.
//! - A constant used as data by an emitted op is materialized once: with at most
//!   [`ImportOptions::constant_binding_max_elements`] (16) elements, or when it was computed by
//!   folding, it becomes a `constant` binding (value kept); a bigger initializer becomes a
//!   parameter of `@main` with its static shape, named after it (the weights bind at run time,
//!   as with TVM's `keep_params_in_input`). TVM keeps every initializer as a `relax.const`;
//!   neither is an op call, so op counts compare.
//! - Graph inputs are parameters in model order; `@main` carries `num_input`, the number of
//!   leading parameters that are graph inputs (weights an exporter made inputs count, as ONNX
//!   cannot tell them apart); parameters after them are initializers.
//!
//! # Names
//! IR value names are the ONNX names made legal for the text format (the `names` module): scopes `/`
//! become `.`, a trailing `:0` is dropped, other characters become `_`; temporaries of a node
//! are named `<output>.<op>`. The function keeps names unique with numeric suffixes.
//!
//! # Export
//! [`export_module`] writes a module back as ONNX (opset 17), one node per binding, so that
//! importing the result gives the same tasks; see the `export` module.
//!
//! # Errors
//! Bad input never panics: every problem is an [`ImportError`] whose `Display` is one line
//! naming the file and the node (name and op type), input, output, initializer or field.

mod attrs;
mod context;
mod convert;
mod error;
mod eval;
mod export;
mod import;
mod names;
mod order;
mod tensor;

pub use convert::supported_ops;
#[cfg(feature = "mlir")]
pub(crate) use error::one_line;
pub use error::ImportError;
pub use export::{export_model, export_module, exportable_ops, ExportError, EXPORT_OPSET};

use crate::module::{Callee, Module};
use std::collections::BTreeMap;
use std::path::Path;

/// Limits of the constant policy (see the module docs). The defaults are what
/// [`import_file`] and [`import_bytes`] use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportOptions {
    /// A constant with at most this many elements used as data becomes a `constant` binding;
    /// a bigger initializer becomes a parameter.
    pub constant_binding_max_elements: usize,
    /// Float constants with more elements than this are never read or produced by folding.
    pub fold_float_max_elements: usize,
    /// Integer constants with more elements than this are never read or produced by folding.
    pub fold_int_max_elements: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            constant_binding_max_elements: 16,
            fold_float_max_elements: 256,
            fold_int_max_elements: 1 << 20,
        }
    }
}

/// Imports the ONNX model in `path`. `shapes` gives static shapes for graph inputs by their
/// ONNX name (needed for every dynamic dimension; it replaces the model's shape otherwise).
pub fn import_file(path: &Path, shapes: &[(String, Vec<i64>)]) -> Result<Module, ImportError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| ImportError {
        file: error::one_line(&file),
        place: String::new(),
        message: error::one_line(&format!("cannot read the file: {e}")),
    })?;
    import_bytes(&bytes, &file, shapes)
}

/// Imports an ONNX model held in memory; `name` stands for the file in messages and names the
/// module.
pub fn import_bytes(
    bytes: &[u8],
    name: &str,
    shapes: &[(String, Vec<i64>)],
) -> Result<Module, ImportError> {
    import_bytes_with(bytes, name, shapes, &ImportOptions::default())
}

/// [`import_bytes`] with explicit limits.
pub fn import_bytes_with(
    bytes: &[u8],
    name: &str,
    shapes: &[(String, Vec<i64>)],
    options: &ImportOptions,
) -> Result<Module, ImportError> {
    import::import_model(bytes, name, shapes, options).map_err(|p| p.into_error(name))
}

/// How many bindings call each op, over all functions (calls of functions count as
/// `call @name`). `constant` bindings are counted too; TVM has no call for a constant, so a
/// comparison with TVM's op counts leaves that key out.
pub fn op_histogram(m: &Module) -> BTreeMap<String, usize> {
    let mut h = BTreeMap::new();
    for f in m.functions.values() {
        for b in &f.bindings {
            let key = match &b.callee {
                Callee::Op(op) => op.name().to_string(),
                Callee::Func(name) => format!("call @{name}"),
            };
            *h.entry(key).or_insert(0) += 1;
        }
    }
    h
}
