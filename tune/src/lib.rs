//! tgc-tune: the tuning driver as a library.
//!
//! [`tune`] takes an imported model and a [`TuneConfig`], starts the TVM worker (which
//! settles the toolchain and TVM's canonical target), and runs the named pipeline for the
//! target (`tgc-cpu` or `tgc-gpu`: partition, canonicalize, annotate-cache,
//! seed-schedules) with the run's cache, target, toolchain and budget as pass options. The
//! IR then carries every task's `tgc.seed_plan`, and the driver executes those plans: per
//! distinct task it lowers the task through the worker, runs annotate-cache and
//! seed-schedules again over it (now with its TVM workload hash, which finds imported
//! MetaSchedule records, and with the records earlier tasks of this run wrote: within-model
//! reuse), measures the plan's seeds first and lets MetaSchedule's evolutionary search
//! continue unless an exact hit re-measures within tolerance, and writes the best records
//! back at once. An input IR that already carries plans (what `tgc opt --passes tgc-cpu`
//! prints, perhaps edited by hand) is executed as written, without re-planning. The
//! representative of each structural group (its most frequent task) is tuned before the
//! rest of the group, so the others start from its records. Finally the whole model is
//! built with the best schedule per task and timed with TVM's time evaluator; its outputs
//! must equal an untuned build's.
//!
//! Records are keyed by what the worker reports, not by what tgc was built for: the
//! toolchain is the worker's TVM, tvm-ffi and LLVM versions (a worker other than the pinned
//! one is used, with a warning, and its records stay apart), and the target is TVM's
//! canonical form of the requested one (the worker's `target` method), so every spelling of
//! one target finds the same records; the spelling is registered in the cache as an alias of
//! the canonical form for lookups without TVM (`tgc opt`).
//!
//! With `rpc`, candidates are built here and measured on the devices an RPC tracker hands
//! out under a key, several at once; the key becomes part of the target (its `tag`,
//! `rpc:KEY`), so those records never mix with this machine's, and a device that drops out
//! fails only the candidates it held.
//!
//! `no_cache` is stock MetaSchedule with the same trial budget: no lookups, no seeds, no
//! early stop, no write-back.
//!
//! [`build`] shares the run's set-up and planning to compile a deployable model from the
//! cache, with a zero-trial transfer for tasks never tuned (see that module's docs), and
//! [`bench`] times the library it writes; [`plan_schedules`] is its record choice alone, for a
//! front end that applies the records to the model itself.
//!
//! Front ends (the `tgc tune` command) map their flags onto [`TuneConfig`] and present
//! progress through an [`Observer`]; everything else lives here.

mod budget;
mod build;
mod config;
pub mod docs;
mod driver;
mod observer;
mod report;

pub use budget::{Budget, Share};
pub use build::{
    bench, build, calling_convention, plan_schedules, sidecar_path, workload_hashes, AppliedTier,
    BuildConfig, BuildReport, BuildTask, SchedulePlan, BENCH_REPEATS,
};
pub use config::{CostModel, RpcTracker, TuneConfig};
pub use driver::{tune, TuneError};
pub use observer::{Observer, Silent};
pub use report::{PlanSource, Report, TaskBudget, TaskReport};
