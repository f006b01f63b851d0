//! How a front end follows a run: progress, warnings, per-task results.

use crate::report::TaskReport;
use tgc_passes::seeding::SeedPlan;

/// Callbacks of a tuning run, in the order they happen; every method has an empty default.
pub trait Observer {
    /// The worker is up and the pipeline has planned the model; `tasks` will be tuned.
    fn started(&mut self, _tasks: usize) {}
    /// Something the user should know that does not stop the run.
    fn warning(&mut self, _message: &str) {}
    /// A task begins, with the plan it will execute.
    fn task_started(&mut self, _task: &str, _plan: &SeedPlan) {}
    /// A task is done and its records are written back.
    fn task_finished(&mut self, _report: &TaskReport) {}
    /// A second turn of a task is done (`report`: that turn alone); `best_s` is the task's
    /// best over all its turns.
    fn second_turn_finished(&mut self, _report: &TaskReport, _best_s: Option<f64>) {}
    /// Tuning is done; the whole model is being built and measured.
    fn measuring(&mut self) {}
}

/// An observer that ignores everything.
pub struct Silent;

impl Observer for Silent {}
