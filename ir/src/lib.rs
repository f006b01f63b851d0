//! tgc-ir: the graph IR every tgc pass works on.
//!
//! A [`Module`] holds [`Function`]s; a function has typed parameters, one dataflow block of
//! SSA [`Binding`]s and results. Tensor types are static ([`TensorType`]). Ops are declared
//! once in the [`ops`] registry. The text format ([`text`]) prints and parses every construct
//! losslessly; the [`verify`] module checks well-formedness.

pub mod attr;
pub mod builder;
pub mod dtype;
pub mod error;
pub mod lowering;
#[cfg(feature = "mlir")]
pub mod mlir;
pub mod module;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod ops;
pub mod text;
pub mod ty;
pub mod verify;

pub use attr::{Attr, AttrKind, Attrs};
pub use dtype::DType;
pub use error::IrError;
pub use module::{Binding, BuildError, Callee, Function, Module, ValueData, ValueId};
pub use ops::{Op, OpDef, OpPattern};
pub use ty::{Shape, TensorType};
pub use verify::{verify_function, verify_module, VerifyError};
