//! ONNX frontend tests: the shared models, per-op graphs built with the protobuf types, and
//! errors.

mod builder;
mod models;
mod ops;
mod errors;
mod regressions;
