//! The decisions of a task's search, each one function over what was measured: whether an
//! exact hit holds ([`exact_hit_step`]), how many candidates the next search round measures
//! or why the search stops ([`next_round`]), and what is re-measured before write-back
//! ([`remeasure_choice`], [`writeback_extension`]), whether a window is taken again
//! ([`retake_window`]; what counts as other load: [`loaded`]), and how long a build may
//! take ([`BuildGuard`]). The `search` module carries them out through the worker, which
//! measures and decides nothing.
//!
//! The other rules of a run live with the data they read: the seed plan (which seeds, the
//! budget, whether an exact hit may end the task or resumes its search:
//! `tgc_passes::seeding::plan` and `SeedPolicy::hit_is_final`) and the run budget
//! (`crate::budget`).
//!
//! Why the exact-hit check looks the way it does. The cached latency is the median of a
//! re-measurement, so the hit is re-measured the same way (a window: the median of
//! `remeasure_repeats` fresh runs) and compared with it, within `tolerance`. On the 2-core
//! VMs this project measures on, other tenants' load comes in bursts of about a second
//! that add tens of percent to a window that falls in one, while a schedule as fast as
//! cached shows it in some window: up to `exact_windows` windows are taken one after the
//! other until one is within the tolerance. Load can also slow one workload by 8-16 % for
//! minutes, every schedule of it alike (`scripts/bench_spread.py` measured a record and
//! its runner-up moving together). So a hit that misses has a control, the task's
//! runner-up record: a window of it follows each missed window of the hit (both share the
//! window cap), and once both have two windows the hit also holds when its drift (the
//! median of all its fresh runs over its cached latency) is at most the control's times
//! 1 + tolerance. A schedule that lost ground of its own (a changed library, another
//! machine behind the same target) moves apart from its control, and the search runs.

use crate::config::{GuardSettings, RetakeSettings};
use serde::Serialize;

/// Why a task's search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The best exact seed re-measured within the tolerance of its cached latency (or
    /// drifted no further than its control).
    ExactHit,
    /// `patience` search rounds in a row did not improve the best (once the goal, if any,
    /// was reached).
    Patience,
    /// The task's trials were measured.
    Budget,
    /// The evolutionary search produced no more candidates.
    Exhausted,
}

impl StopReason {
    /// The report's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::ExactHit => "exact_hit",
            StopReason::Patience => "patience",
            StopReason::Budget => "budget",
            StopReason::Exhausted => "exhausted",
        }
    }
}

/// The median of `vals` (`f64::INFINITY` for none).
pub fn median(vals: &[f64]) -> f64 {
    let mut v: Vec<f64> = vals.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::INFINITY,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// A latency from a measurement's runs: the median of the valid ones (MetaSchedule marks a
/// failed run 1e10).
pub fn latency(run_secs: &[f64]) -> f64 {
    let valid: Vec<f64> = run_secs.iter().copied().filter(|&s| s < 1e9).collect();
    median(&valid)
}

/// The mean of the valid runs (`f64::INFINITY` for none): a search trial's latency, as
/// MetaSchedule ranks them.
pub fn mean(run_secs: &[f64]) -> f64 {
    let valid: Vec<f64> = run_secs.iter().copied().filter(|&s| s < 1e9).collect();
    if valid.is_empty() {
        f64::INFINITY
    } else {
        valid.iter().sum::<f64>() / valid.len() as f64
    }
}

/// `(max - min) / median` of the valid runs; 0 for one run.
pub fn spread(run_secs: &[f64]) -> f64 {
    let valid: Vec<f64> = run_secs.iter().copied().filter(|&s| s < 1e9).collect();
    let med = median(&valid);
    if valid.is_empty() || med <= 0.0 || !med.is_finite() {
        return 0.0;
    }
    let (lo, hi) = valid
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &s| {
            (lo.min(s), hi.max(s))
        });
    (hi - lo) / med
}

// ---- the exact-hit check -----------------------------------------------------------------

/// What an exact-hit check compares with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HitCheck {
    /// The hit's cached latency.
    pub cached_s: f64,
    /// The control's (the task's runner-up record's) cached latency, when it has one that
    /// replayed.
    pub control_cached_s: Option<f64>,
    pub tolerance: f64,
    /// The most windows, the hit's and the control's together.
    pub max_windows: usize,
}

/// The next step of an exact-hit check.
#[derive(Clone, Debug, PartialEq)]
pub enum HitStep {
    /// Measure a window of the hit.
    MeasureHit,
    /// Measure a window of the control.
    MeasureControl,
    /// The check is over.
    Decided(HitVerdict),
}

/// How an exact-hit check ended.
#[derive(Clone, Debug, PartialEq)]
pub struct HitVerdict {
    /// The hit holds: the task ends on it.
    pub holds: bool,
    /// The control's part, when a window of it was measured.
    pub control: Option<ExactControl>,
}

/// The drift control of an exact-hit check, as the report carries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExactControl {
    /// The control's cached latency.
    pub cached_s: f64,
    /// The median of each of the control's windows.
    pub windows_s: Vec<f64>,
    pub control_drift: f64,
    pub hit_drift: f64,
    pub held: bool,
}

/// The exact-hit check, given the runs of each window measured so far (`hit[i]`,
/// `control[i]`): measure the hit until a window is within the tolerance of its cached
/// latency; after each window that is not, measure the control; once both have two
/// windows, the hit also holds when it drifted no further than the control (times 1 +
/// tolerance); at most `max_windows` in all. `failed`: the last window could not be
/// measured, which ends the check with what it has.
pub fn exact_hit_step(
    check: &HitCheck,
    hit: &[Vec<f64>],
    control: &[Vec<f64>],
    failed: bool,
) -> HitStep {
    let limit = check.cached_s * (1.0 + check.tolerance);
    let within = hit.last().is_some_and(|w| median(w) <= limit);
    let drifts = || {
        let pooled = |ws: &[Vec<f64>]| median(&ws.concat());
        let c = check.control_cached_s?;
        (!control.is_empty()).then(|| (pooled(hit) / check.cached_s, pooled(control) / c))
    };
    let held = || {
        hit.len() >= 2
            && control.len() >= 2
            && drifts().is_some_and(|(h, c)| h <= c * (1.0 + check.tolerance))
    };
    let over = within || failed || hit.len() + control.len() >= check.max_windows;
    let next = if over {
        None
    } else if hit.is_empty() || check.control_cached_s.is_none() {
        Some(HitStep::MeasureHit)
    } else if control.len() < hit.len() {
        Some(HitStep::MeasureControl)
    } else if held() {
        None
    } else {
        Some(HitStep::MeasureHit)
    };
    next.unwrap_or_else(|| {
        let control_report = drifts().map(|(hit_drift, control_drift)| ExactControl {
            cached_s: check.control_cached_s.unwrap_or(f64::NAN),
            windows_s: control.iter().map(|w| median(w)).collect(),
            control_drift,
            hit_drift,
            held: held(),
        });
        HitStep::Decided(HitVerdict {
            holds: within || held(),
            control: control_report,
        })
    })
}

// ---- the search's stop rules -------------------------------------------------------------

/// What limits a task's search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchLimits {
    /// Trials in all, seeds included.
    pub max_trials: u64,
    /// Candidates per search round.
    pub per_round: u64,
    /// Search rounds in a row without improvement that end the search (0: never).
    pub patience: u64,
    /// With neighbour seeds: the latency at their sources' FLOP rate. Patience only counts
    /// once the best is within `tolerance` of it.
    pub goal_s: Option<f64>,
    pub tolerance: f64,
}

/// Where a task's search stands.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SearchProgress {
    pub trials: u64,
    /// The best trial latency so far (`f64::INFINITY`: none valid).
    pub best_s: f64,
    /// Search rounds since the best last improved.
    pub stale_rounds: u64,
}

/// The next search round: how many candidates it measures, or why the search stops.
///
/// - Patience: `patience` rounds without improvement end the search, but only once the
///   best is within the tolerance of the goal (a search short of what its sources reached
///   keeps its budget; reaching the goal alone ends nothing, since a source's FLOP rate
///   is a floor for a task of another shape, not a ceiling).
/// - Budget: the trials are spent.
/// - A remainder of at most half a round is folded into the round before: each round's
///   evolutionary search costs seconds here however few candidates it yields.
pub fn next_round(limits: &SearchLimits, progress: &SearchProgress) -> Result<u64, StopReason> {
    let goal_reached = limits
        .goal_s
        .is_none_or(|g| progress.best_s <= g * (1.0 + limits.tolerance));
    if limits.patience > 0 && progress.stale_rounds >= limits.patience && goal_reached {
        return Err(StopReason::Patience);
    }
    let remaining = limits.max_trials.saturating_sub(progress.trials);
    if remaining == 0 {
        return Err(StopReason::Budget);
    }
    Ok(if remaining <= limits.per_round + limits.per_round / 2 {
        remaining
    } else {
        limits.per_round
    })
}

/// The most candidates a search round asks the evolutionary search for (a round and a
/// half: see [`next_round`]).
pub fn largest_round(per_round: u64) -> u64 {
    per_round + per_round / 2
}

// ---- write-back ---------------------------------------------------------------------------

/// What a task's write-back re-measures, besides an exact hit's own windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritebackScope {
    /// The session's best records, seeds included: what a task's turn writes back.
    Best,
    /// Only schedules the session found whose trial beat the best seed's trial: a second
    /// turn's ([`crate::budget::RunBudget::second_turn`]). Its seeds are the task's stored
    /// records, measured in windows when they were written back, and re-measuring them
    /// says nothing about the turn: a window of a seed that comes out fast is this VM's
    /// noise, not progress (it would count as an improvement and earn the task another
    /// turn). A schedule whose trial did not beat the seeds' trial in the same session
    /// (both single measurements, biased alike) is not expected to beat them in windows. A
    /// turn that found none writes nothing back and does not improve the task's best.
    BeyondSeeds,
}

/// One of a session's best records, as the write-back sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Found {
    /// Measured in windows already (the exact-hit check).
    pub fresh: bool,
    /// One of the session's seeds.
    pub seed: bool,
    /// The search's measurement of it (its trial).
    pub trial_s: f64,
}

/// Which of the search's best records (`found`, best first) are re-measured before
/// write-back: the first `top` of those in `scope` (a search's single measurement is the
/// minimum of noisy draws, biased low, and would become the bar a later exact hit misses).
/// After an exact hit only those already measured in windows (the hit): nothing new was
/// found, and the other records are the cache's own.
pub fn remeasure_choice(
    found: &[Found],
    top: usize,
    exact_hit: bool,
    scope: WritebackScope,
) -> Vec<usize> {
    let seeds_best = found
        .iter()
        .filter(|f| f.seed)
        .map(|f| f.trial_s)
        .fold(f64::INFINITY, f64::min);
    found
        .iter()
        .enumerate()
        .filter(|(_, f)| match scope {
            WritebackScope::Best => true,
            WritebackScope::BeyondSeeds => !f.seed && f.trial_s < seeds_best,
        })
        .take(top)
        .filter(|(_, f)| !exact_hit || f.fresh)
        .map(|(i, _)| i)
        .collect()
}

/// The record whose re-measurement is extended before write-back, and by how many
/// windows: the best re-measured one, to `windows` windows in all, since its latency is
/// the bar later exact hits are held to and one window is one moment. Should the extra
/// windows move it behind another, that one is extended next. `remeasured`: each
/// re-measured record's fresh runs (`None`: not re-measured); `extended`: records already
/// extended. `None`: done (and always after an exact hit, which replaces no stored
/// measurement).
pub fn writeback_extension(
    remeasured: &[Option<Vec<f64>>],
    extended: &[usize],
    repeats: usize,
    windows: usize,
    exact_hit: bool,
) -> Option<(usize, usize)> {
    if exact_hit {
        return None;
    }
    let best = remeasured
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().map(|runs| (i, latency(runs))))
        .min_by(|a, b| a.1.total_cmp(&b.1))?
        .0;
    if extended.contains(&best) {
        return None;
    }
    let have = remeasured[best].as_ref().map_or(0, Vec::len) / repeats.max(1);
    Some((best, windows.saturating_sub(have)))
}

/// Whether the write-back may replace stored measurements: not after an exact hit, whose
/// windows stopped at the first fast one (a measurement selected for being fast, while the
/// cached record was measured in several windows, unselected); the hit is then stored only
/// where the task lacks it.
pub fn replaces_stored(stopped: StopReason) -> bool {
    stopped != StopReason::ExactHit
}

/// Whether the cost model learns from the task's measurements: not after an exact hit,
/// whose one trial no later candidate is ranked with.
pub fn trains_cost_model(stopped: StopReason) -> bool {
    stopped != StopReason::ExactHit
}

// ---- windows taken again ------------------------------------------------------------------

/// Whether a measurement met other load: other work took more than `max_cores` while it
/// ran (`load`, from the worker; unknown counts as none).
pub fn loaded(load: Option<f64>, settings: &RetakeSettings) -> bool {
    load.is_some_and(|l| l > settings.max_cores)
}

/// Whether a window is measured again, after a pause, while it was retaken fewer than
/// `retakes` times: when it met other load ([`loaded`]), or when its median (`median_s`)
/// is more than `max_slowdown` times the candidate's trial (`trial_s`, the search's
/// measurement of the same build; `None`: no reference, as in the exact-hit check, whose
/// windows have their own control). A window is what a record's latency is made of, and a kernel on all the
/// cores slows down for seconds at a time: beside another busy process up to twice (which
/// the load shows), and by 1.6-3x with no other process busy (the VM's neighbours, which
/// only the trial shows). The last retake is kept whatever it met.
pub fn retake_window(
    load: Option<f64>,
    median_s: f64,
    trial_s: Option<f64>,
    retaken: usize,
    settings: &RetakeSettings,
) -> bool {
    let slow = trial_s.is_some_and(|t| t > 0.0 && median_s > settings.max_slowdown * t);
    retaken < settings.retakes && (loaded(load, settings) || slow)
}

// ---- builds -------------------------------------------------------------------------------

/// The build guard: how long the next build may take, from the builds the run has seen. A
/// candidate whose build runs far past the run's usual builds is killed and recorded as a
/// failed trial (the cost model does not learn from it) instead of holding its batch, and
/// with it the whole run, until the builder's timeout: one such build of a stem
/// convolution once took 317 s of a 766 s run. Until the run has `min_builds` builds, the
/// timeout is the ceiling (the builder's timeout); then `factor` times their 90th
/// percentile, at least `floor_s`, at most the ceiling. A killed build adds nothing to the
/// observations, so a run of them cannot raise the bar.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildGuard {
    settings: GuardSettings,
    ceiling_s: f64,
    /// Seconds of each successful build, in the build's own process.
    seconds: Vec<f64>,
    /// Builds killed at a timeout below the ceiling.
    killed: u64,
}

impl BuildGuard {
    pub fn new(settings: GuardSettings, ceiling_s: f64) -> BuildGuard {
        BuildGuard {
            settings,
            ceiling_s,
            seconds: Vec::new(),
            killed: 0,
        }
    }

    /// The timeout of the next builds.
    pub fn timeout_s(&self) -> f64 {
        let g = self.settings;
        if self.seconds.len() < g.min_builds.max(1) {
            return self.ceiling_s;
        }
        let mut v = self.seconds.clone();
        v.sort_by(f64::total_cmp);
        let p90 = v[((v.len() - 1) as f64 * 0.9).round() as usize];
        (g.factor * p90).max(g.floor_s).min(self.ceiling_s)
    }

    /// A batch built with `timeout_s`: each candidate's build seconds (`None`: it failed)
    /// and whether it timed out.
    pub fn observe(
        &mut self,
        timeout_s: f64,
        builds: impl IntoIterator<Item = (Option<f64>, bool)>,
    ) {
        for (secs, timed_out) in builds {
            match secs {
                Some(s) if s.is_finite() && s >= 0.0 => self.seconds.push(s),
                _ if timed_out && timeout_s < self.ceiling_s => self.killed += 1,
                _ => {}
            }
        }
    }

    /// Builds the guard killed so far (at a timeout below the builder's own).
    pub fn killed(&self) -> u64 {
        self.killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` runs of `s` seconds: one window.
    fn w(s: f64) -> Vec<f64> {
        vec![s; 5]
    }

    fn check(control: Option<f64>) -> HitCheck {
        HitCheck {
            cached_s: 1.0,
            control_cached_s: control,
            tolerance: 0.05,
            max_windows: 6,
        }
    }

    #[test]
    fn a_window_under_load_or_far_slower_than_its_trial_is_retaken_until_the_cap() {
        let settings = crate::config::SearchSettings::DEFAULT.window_retake;
        let cap = settings.retakes;
        let bar = settings.max_slowdown;
        // quiet, unknown (an RPC device), at the bar: kept
        for load in [Some(0.0), Some(0.04), None, Some(settings.max_cores)] {
            assert!(
                !retake_window(load, 1.0, Some(1.0), 0, &settings),
                "{load:?}"
            );
        }
        // one busy process beside the runner: retaken, but never past the cap
        assert!(retake_window(Some(1.0), 1.0, None, 0, &settings));
        assert!(retake_window(Some(1.0), 1.0, None, cap - 1, &settings));
        assert!(!retake_window(Some(1.0), 1.0, None, cap, &settings));
        // quiet but far slower than its trial: retaken; within the bar, or without a
        // trial to hold it to, kept
        assert!(retake_window(Some(0.0), 1.0, Some(0.9 / bar), 0, &settings));
        assert!(!retake_window(
            Some(0.0),
            1.0,
            Some(0.9 / bar),
            cap,
            &settings
        ));
        assert!(!retake_window(
            Some(0.0),
            1.0,
            Some(1.1 / bar),
            0,
            &settings
        ));
        assert!(!retake_window(Some(0.0), 1.0, None, 0, &settings));
    }

    /// Runs the check against scripted windows (each list cycles through its last
    /// window): the hit's window medians, the control's, and whether the hit held.
    fn run(check: &HitCheck, hit: &[f64], control: &[f64]) -> (Vec<f64>, Vec<f64>, HitVerdict) {
        let (mut h, mut c) = (Vec::new(), Vec::new());
        loop {
            match exact_hit_step(check, &h, &c, false) {
                HitStep::MeasureHit => h.push(w(hit[h.len().min(hit.len() - 1)])),
                HitStep::MeasureControl => c.push(w(control[c.len().min(control.len() - 1)])),
                HitStep::Decided(v) => {
                    let m = |x: &Vec<Vec<f64>>| x.iter().map(|w| median(w)).collect();
                    return (m(&h), m(&c), v);
                }
            }
        }
    }

    #[test]
    fn the_exact_hit_check_over_the_noise_this_machine_makes() {
        let none: &[f64] = &[9.0];
        // (case, control's cached latency, the hit's windows, the control's windows,
        //  hit windows measured, control windows measured, holds)
        type Case<'a> = (
            &'a str,
            Option<f64>,
            &'a [f64],
            &'a [f64],
            usize,
            usize,
            bool,
        );
        let cases: &[Case] = &[
            (
                "as fast as cached: the first window decides",
                Some(2.0),
                &[1.02],
                none,
                1,
                0,
                true,
            ),
            (
                "within the tolerance exactly",
                None,
                &[1.05],
                none,
                1,
                0,
                true,
            ),
            (
                "a burst of load in one window: the next one hits",
                Some(2.0),
                &[1.4, 1.0],
                &[2.0],
                2,
                1,
                true,
            ),
            (
                "a slowdown shared with the runner-up: held after two windows each",
                Some(2.0),
                &[1.2],
                &[2.3, 2.5],
                2,
                2,
                true,
            ),
            (
                "a slowdown of its own (the control kept its latency): six windows, no hit",
                Some(2.0),
                &[1.2],
                &[2.0],
                3,
                3,
                false,
            ),
            (
                "its own slowdown, a little beyond the control's: no hit",
                Some(2.0),
                &[1.3],
                &[2.4],
                3,
                3,
                false,
            ),
            (
                "no control: six windows of the hit, no hit",
                None,
                &[1.2],
                none,
                6,
                0,
                false,
            ),
            (
                "a late window within the tolerance wins whatever the control says",
                Some(2.0),
                &[1.2, 1.0],
                &[2.0],
                2,
                1,
                true,
            ),
        ];
        for &(case, control, hit, ctl, n_hit, n_ctl, holds) in cases {
            let (h, c, v) = run(&check(control), hit, ctl);
            assert_eq!(
                (h.len(), c.len(), v.holds),
                (n_hit, n_ctl, holds),
                "{case}: {h:?} {c:?}"
            );
            assert_eq!(v.control.is_some(), n_ctl > 0, "{case}");
        }
    }

    #[test]
    fn the_exact_hit_checks_account_failed_windows_and_medians() {
        // the report's account of a held control
        let (_, _, v) = run(&check(Some(2.0)), &[1.2], &[2.3, 2.5]);
        let c = v.control.unwrap();
        assert_eq!(
            (c.cached_s, c.windows_s.clone(), c.held),
            (2.0, vec![2.3, 2.5], true)
        );
        assert!((c.hit_drift - 1.2).abs() < 1e-12 && (c.control_drift - 1.2).abs() < 1e-12);
        // a window that cannot be measured ends the check with what it has
        let v = exact_hit_step(&check(None), &[w(1.3)], &[], true);
        assert_eq!(
            v,
            HitStep::Decided(HitVerdict {
                holds: false,
                control: None
            })
        );
        assert_eq!(
            exact_hit_step(&check(None), &[], &[], true),
            HitStep::Decided(HitVerdict {
                holds: false,
                control: None
            })
        );
        // the median decides, not the mean: one run caught in a burst does not miss
        let burst = vec![1.0, 1.0, 30.0];
        assert!(matches!(
            exact_hit_step(&check(None), &[burst], &[], false),
            HitStep::Decided(HitVerdict { holds: true, .. })
        ));
    }

    fn limits(patience: u64, goal_s: Option<f64>) -> SearchLimits {
        SearchLimits {
            max_trials: 16,
            per_round: 8,
            patience,
            goal_s,
            tolerance: 0.05,
        }
    }

    fn at(trials: u64, best_s: f64, stale_rounds: u64) -> SearchProgress {
        SearchProgress {
            trials,
            best_s,
            stale_rounds,
        }
    }

    #[test]
    fn the_stop_rules_of_a_search() {
        use StopReason::{Budget, Patience};
        let cases: &[(&str, SearchLimits, SearchProgress, Result<u64, StopReason>)] = &[
            (
                "a fresh search takes a round",
                limits(3, None),
                at(0, f64::INFINITY, 0),
                Ok(8),
            ),
            (
                "the budget spent",
                limits(3, None),
                at(16, 1.0, 0),
                Err(Budget),
            ),
            (
                "patience spent",
                limits(1, None),
                at(8, 1.0, 1),
                Err(Patience),
            ),
            (
                "patience 0 never stops",
                limits(0, None),
                at(8, 1.0, 5),
                Ok(8),
            ),
            (
                "short of the goal, stale rounds do not count",
                limits(1, Some(0.5)),
                at(8, 1.0, 3),
                Ok(8),
            ),
            (
                "at the goal (within the tolerance) they do",
                limits(1, Some(1.0)),
                at(8, 1.04, 1),
                Err(Patience),
            ),
            (
                "reaching the goal alone ends nothing",
                limits(1, Some(1.0)),
                at(8, 0.5, 0),
                Ok(8),
            ),
            (
                "patience comes before the budget",
                limits(1, None),
                at(16, 1.0, 1),
                Err(Patience),
            ),
        ];
        for (case, l, p, want) in cases {
            assert_eq!(next_round(l, p), *want, "{case}");
        }
        // a remainder of at most half a round is folded into the round before
        let sizes: Vec<u64> = [16, 13, 12, 9, 8, 3]
            .iter()
            .map(|&left| next_round(&limits(0, None), &at(16 - left, 1.0, 0)).unwrap())
            .collect();
        assert_eq!(sizes, [8, 8, 12, 9, 8, 3]);
        assert_eq!(largest_round(8), 12);
    }

    #[test]
    fn what_is_remeasured_before_write_back() {
        // the best three records; after an exact hit only those measured in windows
        use WritebackScope::{Best, BeyondSeeds};
        let f = |fresh: bool, seed: bool, trial_s: f64| Found {
            fresh,
            seed,
            trial_s,
        };
        let none = Vec::<usize>::new();
        assert_eq!(
            remeasure_choice(&[f(false, false, 1.0); 5], 3, false, Best),
            [0, 1, 2]
        );
        let hit = [
            f(false, false, 1.0),
            f(true, true, 1.1),
            f(false, false, 1.2),
        ];
        assert_eq!(remeasure_choice(&hit, 3, true, Best), [1]);
        let two = [f(true, false, 1.0), f(false, false, 1.1)];
        assert_eq!(remeasure_choice(&two, 0, false, Best), none);
        // a second turn: only what it found, and only what beat the best seed's trial
        let turn = [
            f(false, false, 0.8),
            f(false, true, 0.9),
            f(false, false, 0.95),
            f(false, true, 1.0),
            f(false, false, 1.3),
        ];
        assert_eq!(remeasure_choice(&turn, 3, false, Best), [0, 1, 2]);
        assert_eq!(remeasure_choice(&turn, 3, false, BeyondSeeds), [0]);
        // nothing beat the seeds: nothing is re-measured
        assert_eq!(remeasure_choice(&turn[1..], 3, false, BeyondSeeds), none);
        // no seed among the best (failed, or behind all of them): the best found
        let fresh_run = [f(false, false, 1.0), f(false, false, 2.0)];
        assert_eq!(remeasure_choice(&fresh_run, 1, false, BeyondSeeds), [0]);
        // the best gets windows up to three in all; when they move it behind the second,
        // the second follows; after an exact hit nothing is extended
        let one = |s: f64| Some(vec![s; 3]);
        let mut fresh = vec![one(1.0), one(2.0), None];
        assert_eq!(writeback_extension(&fresh, &[], 3, 3, false), Some((0, 2)));
        fresh[0] = Some([vec![1.0; 3], vec![5.0; 6]].concat());
        assert_eq!(writeback_extension(&fresh, &[0], 3, 3, false), Some((1, 2)));
        fresh[1] = Some([vec![2.0; 3], vec![3.0; 6]].concat());
        assert_eq!(writeback_extension(&fresh, &[0, 1], 3, 3, false), None);
        assert_eq!(writeback_extension(&fresh, &[], 3, 3, true), None);
        assert_eq!(writeback_extension(&[None, None], &[], 3, 3, false), None);
        // and the hit keeps the stored measurements and the cost model untrained
        assert!(!replaces_stored(StopReason::ExactHit) && replaces_stored(StopReason::Patience));
        assert!(!trains_cost_model(StopReason::ExactHit) && trains_cost_model(StopReason::Budget));
    }

    #[test]
    fn latencies_are_medians_of_the_valid_runs() {
        assert_eq!(latency(&[3.0, 1.0, 2.0, 1e10]), 2.0);
        assert_eq!(latency(&[1.0, 2.0]), 1.5);
        assert_eq!(latency(&[1e10]), f64::INFINITY);
        assert_eq!(mean(&[1.0, 3.0, 1e10]), 2.0);
        assert!((spread(&[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-12);
        assert_eq!(spread(&[2.0]), 0.0);
    }

    #[test]
    fn the_build_guard_follows_the_runs_own_builds() {
        let settings = GuardSettings {
            min_builds: 4,
            factor: 10.0,
            floor_s: 30.0,
        };
        let mut g = BuildGuard::new(settings, 300.0);
        let built = |s: &[f64]| s.iter().map(|&x| (Some(x), false)).collect::<Vec<_>>();
        // too few builds yet: the builder's own timeout
        g.observe(300.0, built(&[1.0, 2.0, 3.0]));
        assert_eq!(g.timeout_s(), 300.0);
        // ten times the 90th percentile, at least the floor
        g.observe(300.0, built(&[1.0, 1.0, 2.0, 1.5, 2.0, 1.0, 2.5]));
        assert_eq!(g.timeout_s(), 30.0);
        g.observe(300.0, built(&[6.0; 10]));
        assert_eq!(g.timeout_s(), 60.0);
        // at most the ceiling
        g.observe(300.0, built(&[50.0; 40]));
        assert_eq!(g.timeout_s(), 300.0);
        assert_eq!(g.killed(), 0);

        // a killed build: counted below the ceiling, never an observation; a failed build
        // that did not time out is neither
        let mut g = BuildGuard::new(settings, 300.0);
        g.observe(300.0, built(&[2.0; 8]));
        let t = g.timeout_s();
        assert_eq!(t, 30.0);
        g.observe(
            t,
            vec![
                (None, true),
                (None, true),
                (None, false),
                (Some(2.0), false),
            ],
        );
        assert_eq!((g.killed(), g.timeout_s()), (2, 30.0));
        g.observe(300.0, vec![(None, true)]);
        assert_eq!(
            g.killed(),
            2,
            "a timeout at the ceiling is the builder's, not the guard's"
        );
        // a slow but not pathological run keeps its builds: the bar follows them
        g.observe(t, built(&[20.0; 40]));
        assert_eq!(g.timeout_s(), 200.0);
    }
}
