//! One task's search, carried out through a worker session: the seeds measured first (an
//! exact plan's hit alone, checked before the others are built), then MetaSchedule's
//! evolutionary search round by round, then the best records re-measured for write-back.
//! Every decision on the way is a function of [`crate::rules`] over what the worker
//! measured; this module only sequences the requests and keeps the account the report
//! gives.

use crate::config::SearchSettings;
use crate::rules::{
    self, BuildGuard, ExactControl, Found, HitCheck, HitStep, SearchLimits, SearchProgress,
    StopReason, WritebackScope,
};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use tgc_tvm::{
    BridgeError, CandidateId, Measurement, ReplayMode, Seed, Trials, TuneMeasured, TuneOpen,
    TuneOpened, TuneWindowed, Worker,
};

/// The timing settings a task was measured with, as the report gives them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunnerSettings {
    /// `EvaluatorConfig` of the search's measurements.
    pub number: u64,
    pub repeat: u64,
    pub min_repeat_ms: u64,
    pub enable_cpu_cache_flush: bool,
    /// Records re-measured at the end, and fresh runs (repeats) per re-measurement.
    pub remeasure_top: u64,
    pub remeasure_repeats: u64,
    /// The most windows of the exact-hit check.
    pub exact_windows: u64,
    /// Windows of re-measurement of the best record before write-back.
    pub writeback_windows: u64,
    /// A window that met more than this many cores of other load, or whose median is more
    /// than `window_max_slowdown` times its trial, is taken again.
    pub window_max_load: f64,
    pub window_max_slowdown: f64,
    /// The TVM runtime's CPU threads of the measurements; `null` on an RPC device, whose
    /// server chooses its own.
    pub threads: Option<u64>,
}

/// One measured batch of a task (the seed batches included).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneRound {
    /// Seconds since the task started.
    pub elapsed_s: f64,
    /// Trials measured so far.
    pub trials: Trials,
    /// The best mean latency so far; `null` while nothing measured successfully.
    pub best_s: Option<f64>,
    /// Seconds of this round in candidate generation (the seeds' replay or the
    /// evolutionary search, cost-model predictions included), building, running (the
    /// exact-hit check's windows included), and the cost model's update with it.
    pub search_s: f64,
    pub build_s: f64,
    pub run_s: f64,
    pub cost_model_s: f64,
}

/// Where a record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordOrigin {
    Seed,
    Search,
}

/// One of the task's best records after its search.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneRecord {
    /// Trace JSON with its postprocessing instructions.
    pub trace: Value,
    /// The fresh runs when `remeasured`, else the search's measurement.
    pub run_secs: Vec<f64>,
    /// The median of `run_secs`.
    pub median_s: f64,
    /// `(max - min) / median` of `run_secs`.
    pub spread: f64,
    pub remeasured: bool,
    pub origin: RecordOrigin,
}

/// The cost model's warm start and save.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModelReport {
    pub warm_samples: u64,
    pub saved_samples: u64,
    pub errors: Vec<String>,
}

/// What a task's search did.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOutcome {
    /// Re-measured first (by median), then the rest in the search's order.
    pub records: Vec<TuneRecord>,
    pub seeds_tried: Trials,
    pub seeds_failed: Trials,
    pub seed_modes: BTreeMap<ReplayMode, Trials>,
    pub trials: Trials,
    /// The first record's median, when it was re-measured (nothing else is written back).
    pub best_s: Option<f64>,
    pub stopped: StopReason,
    pub history: Vec<TuneRound>,
    /// The median of each window of the exact-hit check (empty: none ran).
    pub exact_windows_s: Vec<f64>,
    pub exact_control: Option<ExactControl>,
    pub runner: RunnerSettings,
    pub failed_runs: Trials,
    pub run_errors: Vec<String>,
    /// Trials whose build the build guard killed ([`rules::BuildGuard`]).
    pub builds_killed: Trials,
    /// Schedules the search proposed again after they were measured (the seeds), dropped.
    pub repeats_dropped: Trials,
    /// Windows measured again: under other load, or far slower than their trial
    /// ([`rules::retake_window`]).
    pub windows_retaken: Trials,
    /// Trials measured under other load ([`rules::loaded`]; kept as measured: a trial is
    /// one draw of the search, not a record's latency).
    pub trials_loaded: Trials,
    pub cost_model: CostModelReport,
    /// Seconds of the re-measurement of the best records before write-back (their
    /// builds included), after the search: not in `history`.
    pub writeback_s: f64,
    pub wall_s: f64,
}

/// A task's search: the session to open, its seeds (best first) and what the plan says.
pub struct SearchJob {
    pub open: TuneOpen,
    pub seeds: Vec<Seed>,
    pub limits: SearchLimits,
    /// An exact plan's cached latency of its best hit (the first seed) and, when it has
    /// one, of its control (the second seed, the runner-up record of the same workload).
    pub exact: Option<(f64, Option<f64>)>,
    /// Measure the seeds only: no search after them (a build's measured transfer).
    pub seeds_only: bool,
    /// What the write-back re-measures ([`rules::remeasure_choice`]).
    pub writeback: WritebackScope,
}

/// Runs a task's search (see the module docs), its builds under the run's `guard`.
pub fn search(
    worker: &mut Worker,
    job: &SearchJob,
    settings: &SearchSettings,
    guard: &mut BuildGuard,
) -> Result<SearchOutcome, BridgeError> {
    let mut s = TaskSearch::open(worker, job, settings, guard)?;
    let stopped = match s.seeds()? {
        Some(reason) => reason,
        None if job.seeds_only => StopReason::Budget,
        None => s.rounds()?,
    };
    let records = s.records(stopped)?;
    s.close(stopped, records)
}

/// A search between its requests.
struct TaskSearch<'a> {
    worker: &'a mut Worker,
    job: &'a SearchJob,
    settings: &'a SearchSettings,
    guard: &'a mut BuildGuard,
    /// The guard's kills when the task started.
    killed_before: Trials,
    repeats_dropped: Trials,
    windows_retaken: Trials,
    trials_loaded: Trials,
    task: Option<String>,
    opened: TuneOpened,
    t0: Instant,
    history: Vec<TuneRound>,
    progress: SearchProgress,
    /// Fresh runs (windows pooled) per candidate measured in windows.
    fresh: HashMap<CandidateId, Vec<f64>>,
    seed_ids: HashSet<CandidateId>,
    seeds_failed: Trials,
    seed_modes: BTreeMap<ReplayMode, Trials>,
    exact_windows_s: Vec<f64>,
    exact_control: Option<ExactControl>,
    /// Seconds of the write-back's re-measurement ([`TaskSearch::records`]).
    writeback_s: f64,
    /// An RPC device that drops out mid-window leaves the window to the devices that
    /// remain: a failed window is measured again this many times.
    retries: u64,
}

impl<'a> TaskSearch<'a> {
    fn open(
        worker: &'a mut Worker,
        job: &'a SearchJob,
        settings: &'a SearchSettings,
        guard: &'a mut BuildGuard,
    ) -> Result<TaskSearch<'a>, BridgeError> {
        let t0 = Instant::now();
        let opened = worker.tune_open(&job.open)?;
        Ok(TaskSearch {
            worker,
            job,
            settings,
            killed_before: guard.killed(),
            repeats_dropped: 0,
            windows_retaken: 0,
            trials_loaded: 0,
            guard,
            task: job.open.task["name"].as_str().map(str::to_string),
            opened,
            t0,
            history: Vec::new(),
            progress: SearchProgress {
                best_s: f64::INFINITY,
                ..SearchProgress::default()
            },
            fresh: HashMap::new(),
            seed_ids: HashSet::new(),
            seeds_failed: 0,
            seed_modes: BTreeMap::new(),
            exact_windows_s: Vec::new(),
            exact_control: None,
            writeback_s: 0.0,
            retries: u64::from(job.open.rpc.is_some()),
        })
    }

    fn sid(&self) -> u64 {
        self.opened.session
    }

    /// Replays the seeds and measures them: an exact plan's best hit alone first and, when
    /// it does not hold, the others. Returns `ExactHit` when the hit held.
    fn seeds(&mut self) -> Result<Option<StopReason>, BridgeError> {
        let replayed = self.worker.tune_seeds(
            self.sid(),
            &self.job.seeds,
            self.job.limits.max_trials,
            self.task.as_deref(),
        )?;
        let mut distinct: Vec<(CandidateId, ReplayMode)> = Vec::new();
        for r in &replayed.seeds {
            match (r.candidate, r.mode) {
                (Some(c), Some(mode)) if !r.duplicate => {
                    *self.seed_modes.entry(mode).or_insert(0) += 1;
                    self.seed_ids.insert(c);
                    distinct.push((c, mode));
                }
                (None, _) => self.seeds_failed += 1,
                _ => {}
            }
        }
        // An exact plan's first seed is its best hit, the second its control (the plan's
        // contract: `SeedPlan::control_latency_s`); each counts when it replayed exact.
        let exact_seed = |i: usize| {
            replayed
                .seeds
                .get(i)
                .filter(|r| r.mode == Some(ReplayMode::Exact) && !r.duplicate)
                .and_then(|r| r.candidate)
        };
        let hit = self.job.exact.and(exact_seed(0));
        let control = hit.and(exact_seed(1));
        let ids: Vec<CandidateId> = distinct.iter().map(|(c, _)| *c).collect();
        let (first, rest) = match hit {
            Some(h) if ids.len() > 1 => {
                (vec![h], ids.iter().copied().filter(|&c| c != h).collect())
            }
            _ => (ids, Vec::new()),
        };
        if first.is_empty() {
            return Ok(None);
        }
        let m = self.measure(&first)?;
        self.batch(
            &m.results,
            replayed.seconds,
            m.build_s,
            m.run_s,
            m.trained_s,
        );
        if let Some(h) = hit {
            let at = first
                .iter()
                .position(|&c| c == h)
                .expect("the hit is in its batch");
            let measured = m.results[at]
                .run_secs
                .as_deref()
                .is_some_and(|r| rules::mean(r).is_finite());
            if measured && self.exact_hit(h, control)? {
                return Ok(Some(StopReason::ExactHit));
            }
        }
        if !rest.is_empty() {
            let m = self.measure(&rest)?;
            self.batch(&m.results, 0.0, m.build_s, m.run_s, m.trained_s);
        }
        Ok(None)
    }

    /// The exact-hit check ([`rules::exact_hit_step`]) on the measured hit, with its
    /// control; returns whether the hit holds.
    fn exact_hit(
        &mut self,
        hit: CandidateId,
        control: Option<CandidateId>,
    ) -> Result<bool, BridgeError> {
        let (cached_s, control_s) = self.job.exact.expect("an exact plan");
        let check = HitCheck {
            cached_s,
            control_cached_s: control.and(control_s),
            tolerance: self.job.limits.tolerance,
            max_windows: self.settings.exact_windows,
        };
        let (mut hit_w, mut control_w) = (Vec::new(), Vec::new());
        let mut failed = false;
        let verdict = loop {
            let (which, windows) = match rules::exact_hit_step(&check, &hit_w, &control_w, failed) {
                HitStep::Decided(v) => break v,
                HitStep::MeasureHit => (hit, &mut hit_w),
                HitStep::MeasureControl => (control.expect("a control to measure"), &mut control_w),
            };
            // the check's windows are part of the seed batch's time; they have their own
            // control, no trial to hold them to
            let (runs, build_s, run_s) = self.window(which, None)?;
            self.windows_of_last(build_s, run_s);
            match runs {
                Some(runs) => windows.push(runs),
                None => failed = true,
            }
        };
        self.exact_windows_s = hit_w.iter().map(|w| rules::median(w)).collect();
        self.exact_control = verdict.control;
        Ok(verdict.holds)
    }

    /// One window of `candidate` (whose trial measured `trial_s`), added to its fresh runs:
    /// the runs (`None`: it failed) and the seconds of building and running it (retakes
    /// and their pauses included).
    fn window(
        &mut self,
        candidate: CandidateId,
        trial_s: Option<f64>,
    ) -> Result<(Option<Vec<f64>>, f64, f64), BridgeError> {
        let w = self.windows(&[candidate])?;
        let first = w.windows.into_iter().next();
        let (runs, retakes_s) = self.settle(candidate, first, trial_s)?;
        Ok((runs, w.build_s, w.run_s + retakes_s))
    }

    /// One window of each of `candidates`, as measured.
    fn windows(&mut self, candidates: &[CandidateId]) -> Result<TuneWindowed, BridgeError> {
        self.worker.tune_windows(
            self.sid(),
            candidates,
            self.settings.remeasure_repeats,
            self.retries,
            self.task.as_deref(),
        )
    }

    /// A window of `candidate` (`first`, as measured), taken again after a pause while the
    /// load it met or its slowdown against the candidate's trial (`trial_s`) asks for it
    /// ([`rules::retake_window`]); the window kept is added to the candidate's fresh runs.
    /// Returns its runs (`None`: it failed) and the seconds the retakes took.
    fn settle(
        &mut self,
        candidate: CandidateId,
        first: Option<Measurement>,
        trial_s: Option<f64>,
    ) -> Result<(Option<Vec<f64>>, f64), BridgeError> {
        let started = Instant::now();
        let retake = self.settings.window_retake;
        let mut m = first;
        let mut retaken = 0;
        let again = |m: &Option<Measurement>, retaken: usize| {
            m.as_ref().is_some_and(|w| {
                let median_s = w.run_secs.as_deref().map_or(f64::NAN, rules::latency);
                rules::retake_window(w.load, median_s, trial_s, retaken, &retake)
            })
        };
        while again(&m, retaken) {
            retaken += 1;
            std::thread::sleep(Duration::from_secs_f64(retake.pause_s));
            m = self.windows(&[candidate])?.windows.into_iter().next();
        }
        self.windows_retaken += retaken as Trials;
        let runs = m.and_then(|m| m.run_secs);
        if let Some(r) = &runs {
            self.fresh.entry(candidate).or_default().extend(r);
        }
        let retakes_s = if retaken > 0 {
            started.elapsed().as_secs_f64()
        } else {
            0.0
        };
        Ok((runs, retakes_s))
    }

    /// The evolutionary search, round by round, until a stop rule ([`rules::next_round`])
    /// or the search itself ends it.
    fn rounds(&mut self) -> Result<StopReason, BridgeError> {
        loop {
            let count = match rules::next_round(&self.job.limits, &self.progress) {
                Ok(n) => n,
                Err(reason) => return Ok(reason),
            };
            let timeout_s = self.guard.timeout_s();
            let r = self
                .worker
                .tune_search(self.sid(), count, timeout_s, self.task.as_deref())?;
            self.observe_builds(timeout_s, &r.results);
            self.repeats_dropped += r.repeats_dropped;
            if r.candidates.is_empty() {
                self.trained_last(r.trained_s);
                return Ok(StopReason::Exhausted);
            }
            let before = self.progress.best_s;
            self.batch(&r.results, r.search_s, r.build_s, r.run_s, r.trained_s);
            self.progress.stale_rounds = if self.progress.best_s < before {
                0
            } else {
                self.progress.stale_rounds + 1
            };
        }
    }

    /// One batch of trials of `candidates`, under the build guard.
    fn measure(&mut self, candidates: &[CandidateId]) -> Result<TuneMeasured, BridgeError> {
        let timeout_s = self.guard.timeout_s();
        let m =
            self.worker
                .tune_measure(self.sid(), candidates, timeout_s, self.task.as_deref())?;
        self.observe_builds(timeout_s, &m.results);
        Ok(m)
    }

    /// The builds of a batch built with `timeout_s`, to the build guard.
    fn observe_builds(&mut self, timeout_s: f64, results: &[Measurement]) {
        self.guard.observe(
            timeout_s,
            results.iter().map(|m| (m.build_s, m.build_timed_out())),
        );
    }

    /// A measured batch into the account; `trained_s`, the cost model's update with the
    /// batch before, goes to that batch.
    fn batch(
        &mut self,
        results: &[Measurement],
        search_s: f64,
        build_s: f64,
        run_s: f64,
        trained_s: f64,
    ) {
        self.trained_last(trained_s);
        let retake = &self.settings.window_retake;
        self.trials_loaded += results
            .iter()
            .filter(|m| rules::loaded(m.load, retake))
            .count() as Trials;
        let batch_best = results
            .iter()
            .map(|m| m.run_secs.as_deref().map_or(f64::INFINITY, rules::mean))
            .fold(f64::INFINITY, f64::min);
        self.progress.trials += results.len() as u64;
        self.progress.best_s = self.progress.best_s.min(batch_best);
        self.history.push(TuneRound {
            elapsed_s: self.t0.elapsed().as_secs_f64(),
            trials: self.progress.trials,
            best_s: self
                .progress
                .best_s
                .is_finite()
                .then_some(self.progress.best_s),
            search_s,
            build_s,
            run_s,
            cost_model_s: 0.0,
        });
    }

    /// The exact-hit check's windows, measured right after the last batch: its time.
    fn windows_of_last(&mut self, build_s: f64, run_s: f64) {
        let now = self.t0.elapsed().as_secs_f64();
        if let Some(h) = self.history.last_mut() {
            h.build_s += build_s;
            h.run_s += run_s;
            h.elapsed_s = now;
        }
    }

    /// The cost model's update with the last batch, which the worker makes at the start of
    /// the next request: its time, as if right after the batch.
    fn trained_last(&mut self, cost_model_s: f64) {
        if let Some(h) = self.history.last_mut() {
            h.cost_model_s += cost_model_s;
            h.elapsed_s += cost_model_s;
        }
    }

    /// The session's best records, the chosen ones re-measured ([`rules::remeasure_choice`],
    /// [`rules::writeback_extension`]): re-measured first by median, then the others in
    /// the search's order.
    fn records(&mut self, stopped: StopReason) -> Result<Vec<TuneRecord>, BridgeError> {
        let hit = stopped == StopReason::ExactHit;
        let found = self
            .worker
            .tune_records(self.sid(), self.settings.top_k, self.task.as_deref())?
            .records;
        let seen: Vec<Found> = found
            .iter()
            .map(|r| Found {
                fresh: self.fresh.contains_key(&r.candidate),
                seed: self.seed_ids.contains(&r.candidate),
                trial_s: rules::latency(&r.run_secs),
            })
            .collect();
        let chosen =
            rules::remeasure_choice(&seen, self.settings.remeasure_top, hit, self.job.writeback);
        let new: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|&i| !self.fresh.contains_key(&found[i].candidate))
            .collect();
        let started = Instant::now();
        if !new.is_empty() {
            let ids: Vec<CandidateId> = new.iter().map(|&i| found[i].candidate).collect();
            let w = self.windows(&ids)?;
            for (&i, m) in new.iter().zip(w.windows) {
                self.settle(found[i].candidate, Some(m), Some(seen[i].trial_s))?;
            }
        }
        let mut remeasured: Vec<Option<Vec<f64>>> = found
            .iter()
            .enumerate()
            .map(|(i, r)| {
                chosen
                    .contains(&i)
                    .then(|| self.fresh.get(&r.candidate).cloned())
                    .flatten()
            })
            .collect();
        let mut extended = Vec::new();
        let repeats = self.settings.remeasure_repeats as usize;
        while let Some((i, n)) = rules::writeback_extension(
            &remeasured,
            &extended,
            repeats,
            self.settings.writeback_windows,
            hit,
        ) {
            extended.push(i);
            for _ in 0..n {
                if self
                    .window(found[i].candidate, Some(seen[i].trial_s))?
                    .0
                    .is_none()
                {
                    break;
                }
            }
            remeasured[i] = self.fresh.get(&found[i].candidate).cloned();
        }
        if !chosen.is_empty() {
            self.writeback_s += started.elapsed().as_secs_f64();
        }
        let mut out: Vec<(bool, TuneRecord)> = found
            .into_iter()
            .zip(remeasured)
            .map(|(r, fresh)| {
                let runs = fresh.clone().unwrap_or(r.run_secs);
                (
                    fresh.is_some(),
                    TuneRecord {
                        median_s: rules::latency(&runs),
                        spread: rules::spread(&runs),
                        remeasured: fresh.is_some(),
                        origin: if self.seed_ids.contains(&r.candidate) {
                            RecordOrigin::Seed
                        } else {
                            RecordOrigin::Search
                        },
                        trace: r.trace,
                        run_secs: runs,
                    },
                )
            })
            .collect();
        // re-measured first, by median; the sort is stable for the rest
        out.sort_by(|(a, ra), (b, rb)| match (a, b) {
            (true, true) => ra.median_s.total_cmp(&rb.median_s),
            _ => b.cmp(a),
        });
        Ok(out.into_iter().map(|(_, r)| r).collect())
    }

    /// Ends the session ([`rules::trains_cost_model`]) and gives the account.
    fn close(
        self,
        stopped: StopReason,
        records: Vec<TuneRecord>,
    ) -> Result<SearchOutcome, BridgeError> {
        let closed = self.worker.tune_close(
            self.sid(),
            rules::trains_cost_model(stopped),
            self.settings.cost_model_max_samples,
            self.task.as_deref(),
        )?;
        let mut history = self.history;
        if let Some(h) = history.last_mut() {
            h.cost_model_s += closed.trained_s;
            h.elapsed_s += closed.trained_s;
        }
        let ev = self.opened.evaluator;
        let s = self.settings;
        Ok(SearchOutcome {
            best_s: records
                .first()
                .filter(|r| r.remeasured)
                .map(|r| r.median_s)
                .filter(|m| m.is_finite()),
            records,
            seeds_tried: self.job.seeds.len() as u64,
            seeds_failed: self.seeds_failed,
            seed_modes: self.seed_modes,
            trials: self.progress.trials,
            stopped,
            history,
            exact_windows_s: self.exact_windows_s,
            exact_control: self.exact_control,
            runner: RunnerSettings {
                number: ev.number,
                repeat: ev.repeat,
                min_repeat_ms: ev.min_repeat_ms,
                enable_cpu_cache_flush: ev.enable_cpu_cache_flush,
                remeasure_top: s.remeasure_top as u64,
                remeasure_repeats: s.remeasure_repeats,
                exact_windows: s.exact_windows as u64,
                writeback_windows: s.writeback_windows as u64,
                window_max_load: s.window_retake.max_cores,
                window_max_slowdown: s.window_retake.max_slowdown,
                threads: self.opened.threads,
            },
            failed_runs: closed.failed_runs,
            run_errors: closed.run_errors,
            builds_killed: self.guard.killed() - self.killed_before,
            repeats_dropped: self.repeats_dropped,
            windows_retaken: self.windows_retaken,
            trials_loaded: self.trials_loaded,
            cost_model: CostModelReport {
                warm_samples: self.opened.cost_model_warm_samples,
                saved_samples: closed.saved_samples,
                errors: closed.errors,
            },
            writeback_s: self.writeback_s,
            wall_s: self.t0.elapsed().as_secs_f64(),
        })
    }
}
