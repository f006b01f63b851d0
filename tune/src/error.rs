//! Why a run stopped.

use std::path::PathBuf;
use tgc_cache::CacheError;
use tgc_tvm::BridgeError;

/// Why a run stopped. Each message is one line naming what it is about.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Cache(#[from] CacheError),
    #[error("{0}")]
    Worker(#[from] BridgeError),
    #[error("task {task}: {message}")]
    Task { task: String, message: String },
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
}

/// An error of the task `task`.
pub(crate) fn task_error(task: &str, e: impl std::fmt::Display) -> TuneError {
    TuneError::Task {
        task: task.to_string(),
        message: e.to_string(),
    }
}
