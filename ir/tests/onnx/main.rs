//! ONNX frontend tests: the shared models, per-op graphs built with the protobuf types, and
//! errors.

mod builder;
mod errors;
mod models;
mod ops;
mod regressions;
mod snapshots;
