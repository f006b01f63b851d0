//! tgc-passes: the [`Pass`] trait, the [`PassManager`] with its instrumentation, and the
//! passes. Each pass declares itself once in a `static INFO: PassInfo`; the registry in
//! tgc-pipelines lists those declarations.
//!
//! Features: `cache` (default) builds the annotate-cache pass over tgc-cache, which links
//! SQLite; without it the crate has every other pass and no SQLite.

pub mod annotate_cache;
pub mod canonicalize;
pub mod convert_layout;
pub mod cse;
pub mod dce;
pub mod manager;
pub mod pack_weights;
pub mod partition;
pub mod pass;
pub mod seed_schedules;
pub mod seeding;
pub mod target;

pub use manager::{Instrumentation, PassManager, PassRun, PipelineError, PrintIrAfter};
pub use pass::{
    OptionDefault, OptionKind, OptionSpec, OptionValue, Pass, PassError, PassInfo, PassOptions,
};
/// The run's opened cache, which a driver hands the passes that read the cache.
#[cfg(feature = "cache")]
pub use tgc_cache::SharedCache;
