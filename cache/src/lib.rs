//! tgc-cache: the persistent task cache.
//!
//! One SQLite file (WAL mode, schema versioned with forward migrations, see [`schema`])
//! shared by every tuning process on a machine. An entry is (task, target, toolchain) ->
//! the best k measured MetaSchedule traces with their latency statistics and provenance.
//! Tasks are keyed by tgc's exact / structural / family keys; workloads imported from
//! MetaSchedule JSON databases are keyed by their TVM structural hash and meet tgc tasks
//! through the TVM hash a task records when the bridge lowers it.
//!
//! - [`Cache::open`] / [`Cache::put`] / [`Cache::gc`] / [`Cache::stats`]: the store ([`store`]).
//! - [`Cache::candidates`] / [`Cache::lookup`]: ranked retrieval ([`retrieve`]).
//! - [`Cache::verify`]: integrity and invariants ([`verify`]).
//! - [`msdb::import`] / [`msdb::export`]: MetaSchedule JSON databases ([`msdb`]).
//!
//! Dependencies point one way: [`model`], [`config`], [`schema`] and the shared reads of
//! `rows` (best k, toolchain and target resolution, column decoding) at the bottom; the
//! store on them; retrieval, verification and MetaSchedule import/export on the store.
//!
//! Cache contents are data only: traces, targets and workloads are JSON text that is
//! parsed, compared and copied, never executed, evaluated or unpickled; the SQLite
//! connection runs in defensive mode with an untrusted schema, and extensions are never
//! loaded.

pub mod config;
pub mod copy;
mod db;
pub mod error;
mod location;
pub mod model;
pub mod msdb;
pub mod retrieve;
mod rows;
pub mod schema;
pub mod server;
pub mod store;
pub mod synth;
pub mod throwaway;
pub mod verify;

pub use config::{CacheConfig, RankingConfig};
pub use copy::CopySummary;
pub use error::{CacheError, Result};
pub use location::CacheLocation;
pub use model::{
    canonical_json, NewRecord, Provenance, Target, TaskEntry, Toolchain, Trace, TraceDigest,
    Workload,
};
pub use retrieve::{Candidate, Query, SourceTask, Tier};
pub use store::{Cache, GcSummary, PutSummary, SharedCache, Stats, DEFAULT_BEST_K};
pub use verify::VerifyReport;
