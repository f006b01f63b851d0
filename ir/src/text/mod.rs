//! The text format of the IR: a printer and a parser with a lossless round trip.
//!
//! ```text
//! // comments run from `//` to the end of the line
//! module @resnet attributes {source = "keras-resnet50.onnx"} {
//!   func @main(%x: tensor<1x3x8x8xf32>, %y: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> attributes {Primitive = true} {
//!     %0 = add(%x, %y) : tensor<1x3x8x8xf32>
//!     %1, %2 = call @pair(%0) : (tensor<1x3x8x8xf32>, tensor<f32>)
//!     %3 = clip(%1) {min = 0.0, max = 6.0} : tensor<1x3x8x8xf32>
//!     return %3
//!   }
//!
//!   func @pair(%a: tensor<1x3x8x8xf32>) -> (tensor<1x3x8x8xf32>, tensor<f32>) {
//!     %s = nn.relu(%a) : tensor<1x3x8x8xf32>
//!     %c = constant() {value = [1.0], shape = [], dtype = "float32"} : tensor<f32>
//!     return %s, %c
//!   }
//! }
//! ```
//!
//! Grammar, in the canonical spelling the printer produces:
//!
//! - `module @name [attributes {..}] { func* }`, functions indented two spaces and separated
//!   by one blank line, bindings and `return` indented four; the text ends with `}\n`.
//! - `func @name(%p: T, ...) -> R [attributes {..}] { binding* return %v, ... }`. `R` is one
//!   type bare, or a parenthesized list for any other count (`()` for none); the parser also
//!   accepts one type in parentheses. Empty attribute dictionaries are not printed.
//! - A binding is `%r, ... = callee(%a, ...) [{..}] : R`, where `callee` is a registered op
//!   (a dotted name such as `nn.conv2d`) or `call @f`. A binding without results is printed
//!   `callee(...) : ()`.
//! - Types are `tensor<1x3xf32>`, scalars `tensor<f32>`, with [`DType::short_name`] spellings.
//! - Value names are `%[A-Za-z0-9_.]+` and function and module names `@[A-Za-z0-9_.]+`; any
//!   other name (empty, or with other characters) is printed quoted, `%"conv/1:0"`, so every
//!   module round-trips. Names are kept exactly.
//! - Attribute keys are `[A-Za-z_][A-Za-z0-9_.]*` or quoted strings. Values are ints (`-3`),
//!   floats (Rust's shortest round-trip spelling, always with `.` or an exponent; `nan`,
//!   `inf`, `-inf`), strings (`\"`, `\\`, `\n`, `\t` escapes and `\u{hex}` for other control
//!   characters), `true`/`false`, lists `[a, b]` and dictionaries `{k = v}`.
//!
//! For every module `m`, `parse_module(&print_module(&m))` is structurally equal to `m` and
//! prints to the same text; floats keep their exact bits (every NaN reads back as the
//! canonical quiet NaN, which structural equality treats as equal to any NaN).
//!
//! The parser checks syntax, that every value is defined once and before its uses, that
//! each binding declares one type per result, that `return` matches the signature and that
//! every called function exists (calls may precede the callee's definition). It does not
//! infer shapes or check op arity: that is the verifier's job.
//!
//! [`DType::short_name`]: crate::DType::short_name

mod lexer;
mod mlir_out;
mod parser;
mod printer;
pub(crate) use printer::attr_text;

pub use mlir_out::{print_module_mlir, DIALECT as MLIR_DIALECT};

use crate::module::{Function, Module};
use std::fmt;

/// A parse failure, displayed on one line as `file:line:col: message` with a 1-based line
/// and column (in characters) of the offending token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct ParseError {
    /// The file name given to [`parse_module`].
    pub file: String,
    pub line: usize,
    pub col: usize,
    /// What was expected and what was found, e.g. `unknown op 'nn.conv3x'`.
    pub message: String,
}

/// Parses a module from its text; `file` names the source in error messages.
pub fn parse_module(src: &str, file: &str) -> Result<Module, ParseError> {
    parser::Parser::new(src)
        .and_then(|mut p| p.module())
        .map_err(|d| {
            let (line, col) = line_col(src, d.pos);
            ParseError {
                file: file.to_string(),
                line,
                col,
                message: d.message,
            }
        })
}

/// The canonical text of a module.
pub fn print_module(m: &Module) -> String {
    let mut out = String::with_capacity(estimated_len(m));
    // Writing into a String cannot fail.
    let _ = printer::write_module(&mut out, m);
    out
}

/// The text of one function as it appears in a module, but not indented: `func` at column
/// 0, its bindings at 2, ending with `}\n`. For dumps and messages; it is not parseable on
/// its own (a module is the unit of parsing).
pub fn print_function(f: &Function) -> String {
    let mut out = String::with_capacity(64 * (f.bindings.len() + 2));
    let _ = printer::write_function(&mut out, &f.name, f, "");
    out
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        printer::write_module(f, self)
    }
}

/// A guess at the printed size, to allocate the output once in the common case.
fn estimated_len(m: &Module) -> usize {
    64 + m
        .functions
        .values()
        .map(|f| 128 + 100 * f.bindings.len())
        .sum::<usize>()
}

/// 1-based line and column (counted in characters) of byte offset `pos`.
fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let bytes = &src.as_bytes()[..pos.min(src.len())];
    let line_start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line = 1 + bytes.iter().filter(|&&b| b == b'\n').count();
    // Count characters, not bytes: skip UTF-8 continuation bytes.
    let col = 1 + bytes[line_start..]
        .iter()
        .filter(|&&b| b & 0xC0 != 0x80)
        .count();
    (line, col)
}
