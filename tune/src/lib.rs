//! tgc-tune: the tuning driver as a library.
//!
//! [`tune`] takes an imported model and a [`TuneConfig`] and runs the pipeline of
//! `driver.rs`: open the run (`run.rs`: the TVM worker, which settles the toolchain and TVM's
//! canonical target; the cache, opened once and handed to annotate-cache), plan the model
//! with the target's named pipeline (`tgc-cpu` or `tgc-gpu`: partition, canonicalize,
//! annotate-cache, seed-schedules), then per distinct task lower it, re-plan it with its TVM
//! workload hash (which finds imported MetaSchedule records) and the records earlier tasks
//! of the run wrote (within-model reuse), execute the plan and write the best records back
//! at once; finally build the whole model with the best schedule per task, time it and
//! check its outputs against an untuned build's. An input IR that already carries plans
//! (what `tgc opt --passes tgc-cpu` prints, perhaps edited by hand) is executed as written.
//!
//! A plan is executed by `search.rs` through a tuning session of the worker, which measures
//! and decides nothing: the seeds first (an exact plan's best hit alone, checked before the
//! others are built), then MetaSchedule's evolutionary search round by round, then the best
//! records re-measured. Every decision on the way is one function of [`rules`] (the
//! exact-hit check, the stop rules, the write-back choice); the plan's rules are
//! `tgc_passes::seeding`'s, the run budget's `budget.rs`'s.
//!
//! Records are keyed by what the worker reports, not by what tgc was built for: the
//! toolchain is the worker's TVM, tvm-ffi and LLVM versions (a worker other than the pinned
//! one is used, with a warning, and its records stay apart), and the target is TVM's
//! canonical form of the requested one, so every spelling of one target finds the same
//! records; the spelling is registered in the cache as an alias of the canonical form for
//! lookups without TVM (`tgc opt`).
//!
//! With `rpc`, candidates are built here and measured on the devices an RPC tracker hands
//! out under a key, several at once; the key becomes part of the target (its `tag`,
//! `rpc:KEY`), so those records never mix with this machine's.
//!
//! `no_cache` is stock MetaSchedule with the same trial budget: no lookups, no seeds, no
//! early stop, no write-back.
//!
//! [`build`] shares the run's set-up and planning to compile a deployable model from the
//! cache, with a zero-trial transfer for tasks never tuned (see that module's docs), and
//! [`bench()`] times the library it writes; [`plan_schedules`] is its record choice alone, for a
//! front end that applies the records to the model itself.
//!
//! Front ends (the `tgc tune` command, the Python package) map their options onto
//! [`TuneOptions`] (checked once, into a [`TuneConfig`]) and present progress through an
//! [`Observer`]; everything else lives here.

// the report's per-task `json!` object has more fields than serde_json's macro expands within
// the default limit of 128
#![recursion_limit = "256"]

mod budget;
mod build;
mod config;
pub mod docs;
mod driver;
mod error;
mod observer;
mod report;
pub mod rules;
mod run;
mod search;

pub use budget::{expected_gain, Budget, RunBudget, Share, TunedTask, Turn};
pub use build::{
    bench, build, calling_convention, plan_schedules, sidecar_path, workload_hashes, AppliedTier,
    Arithmetic, BuildConfig, BuildReport, BuildTask, SchedulePlan, TaskTime, BENCH_REPEATS,
};
pub use config::{CostModel, ModelTiming, RpcTracker, SearchSettings, TuneConfig, TuneOptions};
pub use driver::tune;
pub use error::TuneError;
pub use observer::{Observer, Silent};
pub use report::{PlanSource, Report, TaskBudget, TaskReport, TimeSplit};
pub use rules::StopReason;
pub use search::{RunnerSettings, TuneRound};
