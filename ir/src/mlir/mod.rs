//! The MLIR frontend (cargo feature `mlir`): StableHLO modules as JAX and Keras 3 export them,
//! and TOSA as torch-mlir lowers ONNX to it (the `tosa` module), read through melior (the Rust bindings of MLIR's C API, LLVM 22), into the IR.
//!
//! [`import_file`] / [`import_str`] parse the text with an MLIR context that allows
//! unregistered dialects (StableHLO is not an upstream dialect), so the module must be in
//! MLIR's *generic* form, the one `lowered.compiler_ir("stablehlo").operation.get_asm(
//! print_generic_op_form=True)` prints. The public function `@main` (or the only public
//! function) becomes the module's `@main`; private functions it calls (`func.call`, which JAX
//! emits for repeated pieces such as `relu` and `_pad`) are inlined.
//!
//! # What each StableHLO op becomes
//! The converters map StableHLO onto the Relax ops of the registry, as TVM's ONNX frontend
//! would have them, so that tasks compare with the ONNX import of the same model:
//! - `convolution` is `nn.conv2d` with the layouts of its `dimension_numbers`
//!   (`[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` is `NHWC`/`HWIO`), `reduce_window` with a
//!   `maximum` body is `nn.max_pool2d`, `dot_general` is `matmul` (operands permuted and
//!   reshaped into `[batch..., M, K] x [batch..., K, N]` only where they are not already),
//!   `reduce` with an `add`/`maximum`/`minimum`/`multiply` body is `sum`/`max`/`min`/`prod`,
//!   `pad` is `nn.pad`, `slice` is `strided_slice`, `transpose` is `permute_dims`,
//!   `concatenate` is `concat`, `convert` is `astype`, `select` is `where`, `compare` the
//!   comparison of its direction, `batch_norm_inference` the decomposition of TVM's
//!   `DecomposeOpsForInference`, and elementwise ops their Relax names.
//! - `broadcast_in_dim` is implicit: where its operand broadcasts numpy-style to the result (after a
//!   `reshape` that puts its dimensions in place), the consuming elementwise op takes the
//!   operand itself, as Relax and ONNX broadcast; anything else gets an explicit `broadcast_to`.
//! - `maximum(x, 0)` is `nn.relu` and `clamp(lo, x, hi)` with constant bounds is `clip`, as an
//!   ONNX exporter writes them.
//! - `constant`: splats and tensors of at most 16 elements become `constant` bindings (values
//!   kept); ops whose operands are all such constants are folded at import (`convert`,
//!   `reshape`, `broadcast_in_dim`, `negate` and elementwise arithmetic), as TVM's
//!   FoldConstant would. A bigger constant becomes a parameter of `@main` (`const.N`), its
//!   values not read, as the ONNX frontend does with initializers.
//!
//! A module in tgc's own dialect, as `tgc opt --emit mlir` writes it (generic `tgc.*` ops),
//! reads back function by function into the module it was written from (`tgc_dialect`).
//!
//! Function arguments are the parameters of `@main` in order (`arg0`, `arg1`, ...); MLIR does
//! not say which are weights, so `num_input` counts all of them.
//!
//! # Errors
//! Bad input never panics: every problem is an [`MlirImportError`] whose `Display` is one line,
//! `FILE:LINE:COL: 'op': message` (MLIR's own diagnostic for a parse error), naming the op an
//! unsupported construct, a dynamic dimension or an unsupported attribute was found in.

mod convert;
mod tgc_dialect;
mod tosa;

use crate::attr::Attr;
use crate::module::Module;
use crate::onnx::one_line;
use melior::dialect::DialectHandle;
use melior::ir::block::BlockLike;
use melior::ir::operation::OperationLike;
use melior::ir::{Location, Module as MlirModule, OperationRef, RegionLike};
use melior::Context;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

/// An MLIR module could not be imported.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}:{place}{message}")]
pub struct MlirImportError {
    /// The file (or the name given to [`import_str`]).
    pub file: String,
    /// `LINE:COL: 'op': ` of the operation the problem is in, or a single space for the
    /// whole file.
    pub place: String,
    /// What is wrong, one line.
    pub message: String,
}

/// Where and what, before the file name is attached.
#[derive(Debug)]
pub(crate) struct Problem {
    place: String,
    message: String,
}

impl Problem {
    pub(crate) fn msg(message: impl Into<String>) -> Problem {
        Problem {
            place: " ".into(),
            message: message.into(),
        }
    }

    /// The problem placed at `op` (its source line and column, and its name), unless it
    /// already has a place (an op inside an inlined callee keeps its own).
    pub(crate) fn at(mut self, op: &OperationRef) -> Problem {
        if self.place == " " {
            self.place = format!("{} '{}': ", line_col(op.location()), op_name(op));
        }
        self
    }

    fn into_error(self, file: &str) -> MlirImportError {
        MlirImportError {
            file: one_line(file),
            place: self.place,
            message: one_line(&self.message),
        }
    }
}

pub(crate) type PResult<T> = Result<T, Problem>;

macro_rules! bail {
    ($($arg:tt)*) => { return Err($crate::mlir::Problem::msg(format!($($arg)*))) };
}
pub(crate) use bail;

/// Imports the MLIR module in `path`.
pub fn import_file(path: &Path) -> Result<Module, MlirImportError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| MlirImportError {
        file: one_line(&file),
        place: " ".into(),
        message: one_line(&format!("cannot read the file: {e}")),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| MlirImportError {
        file: one_line(&file),
        place: " ".into(),
        message: format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })?;
    import_str(&text, &file)
}

/// Imports an MLIR module held in memory; `name` stands for the file in messages and names
/// the module.
pub fn import_str(text: &str, name: &str) -> Result<Module, MlirImportError> {
    import(text, name).map_err(|p| p.into_error(name))
}

fn import(text: &str, name: &str) -> PResult<Module> {
    let context = Context::new();
    // func is upstream (its custom form parses); StableHLO and CHLO are not: their ops are
    // read as unregistered operations in the generic form.
    DialectHandle::func().register_dialect(&context);
    context.set_allow_unregistered_dialects(true);
    let diagnostics = RefCell::new(Vec::<String>::new());
    let handler = context.attach_diagnostic_handler(|d| {
        diagnostics.borrow_mut().push(format!(
            "{} {}",
            line_col(d.location()),
            d.to_string().trim()
        ));
        true
    });
    let parsed = MlirModule::parse(&context, text);
    context.detach_diagnostic_handler(handler);
    let Some(module) = parsed else {
        let first = diagnostics.borrow().first().cloned();
        let mut message = first.unwrap_or_else(|| " the text is not an MLIR module".into());
        if message.contains("custom op") {
            message.push_str(
                " (tgc reads StableHLO in MLIR's generic form: print the module with \
                 print_generic_op_form=True)",
            );
        }
        // The diagnostic starts with its own LINE:COL.
        return Err(Problem {
            place: String::new(),
            message,
        });
    };
    let body = module.body();
    let mut funcs: HashMap<String, OperationRef> = HashMap::new();
    let mut ordered = Vec::new();
    let mut publics = Vec::new();
    let mut op = body.first_operation();
    while let Some(o) = op {
        if op_name(&o) == "func.func" {
            let sym = string_attr(&o, "sym_name").map_err(|p| p.at(&o))?;
            let private = string_attr(&o, "sym_visibility").is_ok_and(|v| v == "private");
            if !private {
                publics.push(sym.clone());
            }
            if funcs.insert(sym.clone(), o).is_some() {
                return Err(Problem::msg(format!("@{sym} is defined twice")).at(&o));
            }
            ordered.push((sym, o));
        } else {
            return Err(
                Problem::msg("only func.func is supported at the top level of the module").at(&o),
            );
        }
        op = o.next_in_block();
    }
    if ordered
        .iter()
        .any(|(_, f)| tgc_dialect::uses_tgc_dialect(f))
    {
        // The module keeps the name it was written with.
        let op = module.as_operation();
        let sym = string_attr(&op, "sym_name").unwrap_or_else(|_| module_name(name));
        return tgc_dialect::convert_module(sym, &op, &ordered);
    }
    let main = if funcs.contains_key("main") {
        "main".to_string()
    } else if publics.len() == 1 {
        publics[0].clone()
    } else {
        bail!(
            "no function @main, and {} public functions to choose from",
            publics.len()
        );
    };
    let (f, dialects) = convert::convert_main(&funcs, &main)?;
    let mut m = Module::new(module_name(name));
    m.attrs.insert("source".into(), Attr::str(one_line(name)));
    m.attrs.insert("mlir_dialect".into(), Attr::str(dialects));
    m.add_function(f).map_err(|e| Problem::msg(e.to_string()))?;
    Ok(m)
}

/// The module's name: the file stem, made legal for the text format.
fn module_name(file: &str) -> String {
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("module");
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("m_{name}")
    } else {
        name
    }
}

pub(crate) fn op_name(op: &OperationRef) -> String {
    op.name()
        .as_string_ref()
        .as_str()
        .unwrap_or("<non-UTF-8 op name>")
        .to_string()
}

/// `LINE:COL:` of a file location (the parser gives every op one), else the location as MLIR
/// prints it.
fn line_col(loc: Location) -> String {
    let text = loc.to_string();
    // loc("NAME":LINE:COL) as the parser assigns it; callsite/fused locations start with one.
    if let Some(rest) = text.split("\":").nth(1) {
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ':')
            .collect();
        let digits = digits.trim_end_matches(':');
        if !digits.is_empty() {
            return format!("{digits}:");
        }
    }
    format!("{}:", one_line(&text))
}

/// A string attribute's value (`sym_name = "main"`).
pub(crate) fn string_attr(op: &OperationRef, name: &str) -> PResult<String> {
    let a = op
        .inherent_attribute(name)
        .or_else(|_| op.attribute(name))
        .map_err(|_| Problem::msg(format!("has no attribute '{name}'")))?;
    let text = a.to_string();
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(s) => Ok(s.to_string()),
        None => bail!("attribute '{name}' is not a string: {text}"),
    }
}

/// The first region's first block of `op`, if any.
pub(crate) fn body_block<'c, 'a>(
    op: &OperationRef<'c, 'a>,
) -> Option<melior::ir::BlockRef<'c, 'a>> {
    op.region(0).ok()?.first_block()
}
