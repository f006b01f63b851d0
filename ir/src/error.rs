//! Errors from building IR through the checked builders ([`crate::builder`]).

use crate::ops::Arity;
use crate::ty::TensorType;

/// Why a checked builder refused to append a binding. Displays as one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IrError {
    #[error("unknown op '{0}'")]
    UnknownOp(String),
    #[error("unknown function '@{0}'")]
    UnknownFunction(String),
    #[error("value #{0} does not exist in this function")]
    UnknownValue(u32),
    #[error("'{op}' takes {expected} operands, got {got}")]
    Arity { op: String, expected: Arity, got: usize },
    #[error("'{op}': {message}")]
    Attr { op: String, message: String },
    #[error("'{op}': {message}")]
    Infer { op: String, message: String },
    #[error("'@{callee}' takes {expected} operands, got {got}")]
    CallArity { callee: String, expected: usize, got: usize },
    #[error("'@{callee}': operand {index} has type {got}, expected {expected}")]
    CallOperandType {
        callee: String,
        index: usize,
        expected: Box<TensorType>,
        got: Box<TensorType>,
    },
    #[error("'{op}' has {count} results where one was expected")]
    NotSingleResult { op: String, count: usize },
}
