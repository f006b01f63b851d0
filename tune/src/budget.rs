//! A run-level budget (`--trials N` over the whole model, `--time-budget S`) spread across
//! tasks by their share of the model's latency.
//!
//! A task's weight is its occurrences times its current best latency: the cached best of
//! an exact hit, else the latency its neighbours' FLOP rate predicts (the plan's goal), else
//! its FLOPs at the median FLOP rate of the model's tasks whose latency is known (every task
//! at one rate when none is). That is the objective MetaSchedule's gradient task scheduler
//! weighs tasks by; unlike it, tgc tunes one task after another, so each task gets, when its
//! turn comes, its share of what is left:
//!
//! - a task whose plan may end on an exact hit is expected to cost one trial (the worker
//!   measures the best exact seed alone first, the other seeds only after a miss); the
//!   tasks after it are charged that much, and when the hit sticks the rest of its share
//!   flows to them;
//! - any task that stops early (exact hit, patience) leaves its unspent trials to the
//!   tasks after it, which share them by weight;
//! - an exact hit is final (costs its one seed) when its record has at least as much
//!   search behind it as a cold run would give the task ([`Budget::cold_shares`]: the run's
//!   budget by weight, every task a search), short of less than one search round
//!   ([`hit_bar`]); the allocation a hit gets at its turn is inflated by what earlier hits
//!   left, which is no reason to search it again;
//! - no task gets more than [`SHARE_CAP`] times its cold share: what earlier tasks left
//!   goes to the later ones by weight up to that cap, and beyond it stays unspent (the run
//!   ends sooner). Without the cap the last task takes whatever is left, however light
//!   ([`capped`]);
//! - a time budget converts into trials at the seconds per trial measured so far in the
//!   run (before the first task: [`INITIAL_SECONDS_PER_TRIAL`]);
//! - when the budget holds a search round for every task, each task's share starts from
//!   one round ([`RunBudget::new`]'s floor) and the rest is shared by weight: a light
//!   task's FLOPs predict little of its latency before it has a record (the classifier's
//!   4-MFLOP matmul runs milliseconds on TVM's default schedule), and one round takes it
//!   off that schedule.
//!
//! Tasks the budget no longer reaches are not tuned (they keep TVM's default schedules)
//! and the report lists them. What the turns leave (the cap, hits, patience) goes, once
//! every task had its turn, a round at a time to the tasks whose allocation cut their
//! search short or whose exact hit ended it, largest [`expected_gain`] first
//! ([`RunBudget::second_turn`]): a task's weight was a prediction at its turn, its measured
//! best says what it still costs. A hit that was final at its turn resumes its search
//! there when its gain is the largest, so a task a short search left slow does not stay
//! slow in every later run of the same budget.

/// What the allocation knows about a task before it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    pub occurrences: usize,
    /// The task's floating-point operations (0: unknown).
    pub flops: f64,
    /// Its best known latency on this target: a cached exact hit, or the neighbours' goal.
    pub latency_s: Option<f64>,
    /// The search effort (trials) behind its best exact record, when it has one (0:
    /// unknown, as in a MetaSchedule import).
    pub exact_effort: Option<i64>,
    /// Its plan may end on an exact hit after measuring this many trials (its best exact
    /// seed: 1; 0: a search). [`RunBudget::new`] sets it from `exact_effort`.
    pub exact_seeds: u64,
}

/// Seconds per measured trial assumed before the run has measured any (a round of 16 took
/// 40-60 s on the 2-core machines this was written on; the estimate is replaced by the
/// run's own figure after its first task).
pub const INITIAL_SECONDS_PER_TRIAL: f64 = 2.5;

/// The remaining budget of a run.
#[derive(Clone, Debug)]
pub struct Budget {
    trials: Option<u64>,
    seconds: Option<f64>,
    spent_trials: u64,
    spent_seconds: f64,
    /// Trials every task gets before the rest is shared by weight (0: none).
    floor: u64,
}

impl Budget {
    pub fn new(trials: Option<u64>, seconds: Option<f64>) -> Budget {
        Budget {
            trials,
            seconds,
            spent_trials: 0,
            spent_seconds: 0.0,
            floor: 0,
        }
    }

    /// The same budget with `floor` trials for every task before the rest is shared by
    /// weight.
    pub fn with_floor(self, floor: u64) -> Budget {
        Budget { floor, ..self }
    }

    /// Whether the run has a budget at all (else every plan keeps its own trials).
    pub fn is_limited(&self) -> bool {
        self.trials.is_some() || self.seconds.is_some()
    }

    /// Records a finished task.
    pub fn spend(&mut self, trials: u64, seconds: f64) {
        self.spent_trials += trials;
        self.spent_seconds += seconds;
    }

    /// Trials the budget has left: the trial budget, and the time budget at the run's
    /// seconds per trial so far. `None`: no limit.
    pub fn remaining(&self) -> Option<u64> {
        let by_trials = self.trials.map(|t| t.saturating_sub(self.spent_trials));
        let by_time = self.seconds.map(|s| {
            let per_trial = if self.spent_trials > 0 {
                self.spent_seconds / self.spent_trials as f64
            } else {
                INITIAL_SECONDS_PER_TRIAL
            };
            ((s - self.spent_seconds).max(0.0) / per_trial.max(1e-3)).floor() as u64
        });
        match (by_trials, by_time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The run's whole budget in trials: what was spent and what is left (a time budget at
    /// the run's seconds per trial so far). `None`: no limit.
    pub fn total(&self) -> Option<u64> {
        self.remaining().map(|left| left + self.spent_trials)
    }

    /// What a cold run would give each of `all` (in tuning order): the floor, and the rest
    /// of the whole budget shared by weight, every task a search. An exact hit whose record
    /// has that much search behind it is final. `None`: no limit.
    pub fn cold_shares(&self, all: &[Share]) -> Option<Vec<u64>> {
        let total = self.total()?;
        let shared = total.saturating_sub(self.floor * all.len() as u64) as f64;
        let rate = median_rate(all.iter());
        let weights: Vec<f64> = all.iter().map(|s| weight(s, rate)).collect();
        let sum: f64 = weights.iter().sum();
        Some(
            weights
                .iter()
                .map(|&w| self.floor + (shared * fraction(w, sum, all.len())).round() as u64)
                .collect(),
        )
    }

    /// The trials for `this` task, with `rest` still to come after it; 0 when the budget is
    /// spent. `None`: no limit (the plan's own budget).
    pub fn allocate(&self, this: &Share, rest: &[Share]) -> Option<u64> {
        let left = self.remaining()?;
        let rate = median_rate(std::iter::once(this).chain(rest));
        // Later exact hits are charged their seed, later searches their floor; this task
        // gets its floor and shares the rest with the later searches by weight.
        let reserved: u64 = rest
            .iter()
            .map(|s| match s.exact_seeds {
                0 => self.floor,
                seeds => seeds,
            })
            .sum();
        let pool = left.saturating_sub(reserved);
        let others: f64 = rest
            .iter()
            .filter(|s| s.exact_seeds == 0)
            .map(|s| weight(s, rate))
            .sum();
        let own = weight(this, rate);
        let share = fraction(own, own + others, 1 + rest.len());
        let floor = self.floor.min(pool);
        let trials = floor + ((pool - floor) as f64 * share).round() as u64;
        // An exact hit needs its seed even when the others' weight leaves it nothing.
        Some(trials.max(this.exact_seeds).min(left))
    }
}

/// A run budget over a run's tasks in tuning order: what each task gets at its turn
/// ([`RunBudget::turn`]) and what it spent.
#[derive(Clone, Debug)]
pub struct RunBudget {
    budget: Budget,
    shares: Vec<Share>,
    cold: Vec<u64>,
    per_round: u64,
}

/// A task's part of a run budget at its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// Its trials (0: the budget does not reach it).
    pub allocated: u64,
    /// What a cold run would give it.
    pub cold_share: u64,
    /// The search effort an exact hit's record needs behind it to be final (`hit_bar`).
    pub hit_effort: u64,
}

impl RunBudget {
    /// The budget of `trials` and `seconds` over `shares` (tuning order), with rounds of
    /// `per_round`; `None` without a limit (every plan keeps its own trials).
    pub fn new(
        trials: Option<u64>,
        seconds: Option<f64>,
        mut shares: Vec<Share>,
        per_round: u64,
    ) -> Option<RunBudget> {
        let budget = Budget::new(trials, seconds);
        // one search round for every task, when the budget holds that many
        let rounds = per_round * shares.len() as u64;
        let floor = if budget.total().is_some_and(|t| t >= rounds) {
            per_round
        } else {
            0
        };
        let budget = budget.with_floor(floor);
        let cold = budget.cold_shares(&shares)?;
        // a later exact hit is charged its one trial when its record meets the bar, by the
        // plan's own rule
        for (s, &c) in shares.iter_mut().zip(&cold) {
            let bar = hit_bar(c, per_round) as i64;
            s.exact_seeds = u64::from(s.exact_effort.is_some_and(|e| effort_suffices(e, bar)));
        }
        Some(RunBudget {
            budget,
            shares,
            cold,
            per_round,
        })
    }

    /// The `k`-th task's turn: its share of what is left ([`Budget::allocate`], at most
    /// `capped`), its cold share and the effort that makes its exact hit final.
    pub fn turn(&self, k: usize) -> Turn {
        let cold_share = self.cold[k];
        let allocated = self
            .budget
            .allocate(&self.shares[k], &self.shares[k + 1..])
            .map_or(0, |n| capped(n, cold_share));
        Turn {
            allocated,
            cold_share,
            hit_effort: hit_bar(cold_share, self.per_round),
        }
    }

    /// Records a finished task.
    pub fn spend(&mut self, trials: u64, seconds: f64) {
        self.budget.spend(trials, seconds);
    }

    /// The next second turn once every task had its turn: the index of the open task with
    /// the largest [`expected_gain`] among `tuned` and one round of trials for it, while
    /// the budget has a round left. The peak rate the gains are measured against is the
    /// best of every task with a latency, open or not (a final exact hit shows what the
    /// machine reaches); `None` marks a task without one.
    pub fn second_turn(&self, tuned: &[Option<TunedTask>]) -> Option<(usize, u64)> {
        let left = self.budget.remaining()?;
        if left < self.per_round {
            return None;
        }
        let peak = tuned
            .iter()
            .flatten()
            .filter(|t| t.flops > 0.0 && t.best_s > 0.0)
            .map(|t| t.flops / t.best_s)
            .fold(0.0, f64::max);
        tuned
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.filter(|t| t.open).map(|t| (i, expected_gain(&t, peak))))
            .filter(|&(_, g)| g > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| (i, self.per_round))
    }
}

/// What a task the run tuned offers to a second turn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TunedTask {
    pub occurrences: usize,
    /// Floating-point operations (0: unknown).
    pub flops: f64,
    /// Its best latency so far.
    pub best_s: f64,
    /// Whether a second turn may go to it (not: a search that ended on its own, a second
    /// turn that brought nothing, or a record of unknown effort, which a resumed search
    /// would take as final).
    pub open: bool,
}

/// What another round of a task can gain at most, in seconds of the model: its occurrences
/// times the distance between its best latency and the latency it would have at `peak`,
/// the best FLOP rate any task of the run reached (a task without FLOPs: all its time).
pub fn expected_gain(t: &TunedTask, peak: f64) -> f64 {
    let reachable = if t.flops > 0.0 && peak > 0.0 {
        t.flops / peak
    } else {
        0.0
    };
    t.occurrences.max(1) as f64 * (t.best_s - reachable).max(0.0)
}

/// The search effort (trials) an exact hit's record needs behind it to be final under a
/// run budget: the task's cold share, less anything short of one search round of
/// `per_round` trials. Shares are rounded slices of a budget whose weights move from model
/// to model (a record of 27 trials met a share of 28 for the same task in a model that
/// weighs it more), and a resumed search cannot make up less than a round: it re-measures
/// its seeds, searches at least one round of `per_round` and re-measures its best before
/// write-back (on the benchmark's machine about 12 s, against 1 to 4 s for a hit).
pub fn hit_bar(cold_share: u64, per_round: u64) -> u64 {
    cold_share
        .saturating_sub(per_round.saturating_sub(1))
        .max(1)
}

/// The most a task gets under a run budget, in multiples of its cold share.
pub const SHARE_CAP: u64 = 2;

/// A task's allocation `allocated`, capped at [`SHARE_CAP`] times its `cold_share` (at
/// least one trial, which a final exact hit needs).
pub fn capped(allocated: u64, cold_share: u64) -> u64 {
    allocated.min((SHARE_CAP * cold_share).max(1))
}

/// A task's weight: occurrences times latency (MetaSchedule's gradient scheduler's objective).
fn weight(s: &Share, rate: Option<f64>) -> f64 {
    s.occurrences.max(1) as f64 * latency(s, rate)
}

/// `own`'s part of `sum`; an even split among `count` when nothing weighs.
fn fraction(own: f64, sum: f64, count: usize) -> f64 {
    if sum > 0.0 {
        own / sum
    } else {
        1.0 / count as f64
    }
}

/// A task's latency: known, else its FLOPs at the model's median rate (`None`: no rate
/// known, every task at one rate, so FLOPs alone weigh).
fn latency(s: &Share, rate: Option<f64>) -> f64 {
    match (s.latency_s, rate) {
        (Some(l), _) => l,
        (None, Some(r)) => s.flops / r,
        (None, None) => s.flops.max(1.0),
    }
}

/// The median FLOP rate of the tasks whose latency is known.
fn median_rate<'a>(shares: impl Iterator<Item = &'a Share>) -> Option<f64> {
    let mut rates: Vec<f64> = shares
        .filter_map(|s| match s.latency_s {
            Some(l) if l > 0.0 && s.flops > 0.0 => Some(s.flops / l),
            _ => None,
        })
        .collect();
    if rates.is_empty() {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    Some(rates[rates.len() / 2])
}

use tgc_passes::seeding::effort_suffices;

#[cfg(test)]
mod tests {
    use super::*;

    fn search(occurrences: usize, flops: f64, latency_s: Option<f64>) -> Share {
        Share {
            occurrences,
            flops,
            latency_s,
            exact_effort: None,
            exact_seeds: 0,
        }
    }

    #[test]
    fn no_budget_keeps_the_plans() {
        let b = Budget::new(None, None);
        assert!(!b.is_limited());
        assert_eq!(b.allocate(&search(1, 1e9, None), &[]), None);
    }

    #[test]
    fn trials_follow_occurrences_times_latency() {
        let b = Budget::new(Some(100), None);
        // 3 x 1 ms against 1 x 1 ms: three quarters
        let rest = [search(1, 1e6, Some(1e-3))];
        assert_eq!(b.allocate(&search(3, 1e6, Some(1e-3)), &rest), Some(75));
        // unknown latency: FLOPs at the known tasks' rate (1e9 FLOP/s): 4e6 FLOPs = 4 ms
        assert_eq!(b.allocate(&search(1, 4e6, None), &rest), Some(80));
        // nothing known: FLOPs alone
        let rest = [search(1, 1e6, None)];
        assert_eq!(b.allocate(&search(1, 3e6, None), &rest), Some(75));
        // the last task takes what is left
        assert_eq!(b.allocate(&search(1, 1.0, None), &[]), Some(100));
    }

    #[test]
    fn exact_hits_cost_their_seeds_and_free_the_rest() {
        let mut b = Budget::new(Some(100), None);
        let hit = Share {
            exact_seeds: 2,
            ..search(5, 1e6, Some(1e-3))
        };
        // a later hit is charged its 2 seeds; the search gets the rest
        assert_eq!(
            b.allocate(&search(1, 1e6, Some(1e-3)), std::slice::from_ref(&hit)),
            Some(98)
        );
        // the hit's own turn: its share (a hit that does not stick searches with it)
        assert_eq!(b.allocate(&hit, &[search(1, 1e6, Some(1e-3))]), Some(83));
        // it stuck after 2 trials: the next task gets everything else
        b.spend(2, 1.0);
        assert_eq!(b.allocate(&search(1, 1e6, Some(1e-3)), &[]), Some(98));
        // a spent budget: nothing, but an exact hit's seeds are never more than what is left
        b.spend(98, 1.0);
        assert_eq!(b.allocate(&hit, &[]), Some(0));
    }

    #[test]
    fn a_task_takes_at_most_twice_its_cold_share() {
        // the last task of a run whose earlier tasks stopped early: 98 left, share 6
        let mut b = Budget::new(Some(100), None);
        b.spend(2, 1.0);
        let last = b.allocate(&search(1, 1e6, Some(1e-3)), &[]).unwrap();
        assert_eq!(last, 98);
        assert_eq!(capped(last, 6), 12);
        // below the cap the allocation stands
        assert_eq!(capped(10, 6), 10);
        // a task a cold run would give nothing still gets the one trial of a hit
        assert_eq!(capped(98, 0), 1);
    }

    #[test]
    fn a_hit_short_of_its_cold_share_by_less_than_a_round_is_final() {
        // rounds of 8: 21 trials behind a record meet a share of 28, 20 do not
        assert_eq!(hit_bar(28, 8), 21);
        assert!(effort_suffices(27, hit_bar(28, 8) as i64));
        assert!(effort_suffices(21, hit_bar(28, 8) as i64));
        assert!(!effort_suffices(20, hit_bar(28, 8) as i64));
        // rounds of one trial: the share itself
        assert_eq!(hit_bar(28, 1), 28);
        // a share smaller than a round still needs a record with some search behind it
        assert_eq!(hit_bar(5, 8), 1);
        assert_eq!(hit_bar(0, 8), 1);
    }

    #[test]
    fn cold_shares_weigh_every_task_as_a_search() {
        assert_eq!(Budget::new(None, None).cold_shares(&[]), None);
        let mut b = Budget::new(Some(64), None);
        let hit = Share {
            exact_seeds: 2,
            ..search(3, 1e6, Some(1e-3))
        };
        // 3 x 1 ms (a hit, weighed as a search), 1 x 1 ms, and 4e6 FLOPs at 1e9 FLOP/s
        let all = [hit, search(1, 1e6, Some(1e-3)), search(1, 4e6, None)];
        assert_eq!(b.cold_shares(&all), Some(vec![24, 8, 32]));
        // spending changes nothing: the shares are of the whole budget
        b.spend(40, 10.0);
        assert_eq!(b.total(), Some(64));
        assert_eq!(b.cold_shares(&all), Some(vec![24, 8, 32]));
        // nothing known: an even split
        let none = [search(1, 0.0, None), search(1, 0.0, None)];
        assert_eq!(
            Budget::new(Some(10), None).cold_shares(&none),
            Some(vec![5, 5])
        );
    }

    #[test]
    fn a_run_budget_gives_each_task_its_turn() {
        assert!(RunBudget::new(None, None, vec![search(1, 1e6, None)], 8).is_none());
        // two tasks of one weight, 32 trials, rounds of 8: cold shares 16 each, a hit
        // final with 9 trials of search behind it
        let hit = |effort| Share {
            exact_effort: Some(effort),
            ..search(1, 1e6, Some(1e-3))
        };
        let b =
            RunBudget::new(Some(32), None, vec![search(1, 1e6, Some(1e-3)), hit(9)], 8).unwrap();
        // the later final hit is charged one trial; the first task's share is capped at
        // twice its cold share
        assert_eq!(
            b.turn(0),
            Turn {
                allocated: 31,
                cold_share: 16,
                hit_effort: 9
            }
        );
        // a record with less search behind it resumes: no charge, an even split
        let b =
            RunBudget::new(Some(32), None, vec![search(1, 1e6, Some(1e-3)), hit(8)], 8).unwrap();
        assert_eq!(b.turn(0).allocated, 16);
        // spent: the last task gets what is left, at most twice its cold share
        let mut b = b;
        b.spend(4, 1.0);
        assert_eq!(b.turn(1).allocated, 28);
        b.spend(28, 1.0);
        assert_eq!(b.turn(1).allocated, 0);
    }

    #[test]
    fn a_budget_with_a_round_for_every_task_gives_each_one() {
        // a 1 s task and a light one without a record: 4 MFLOP, 4 ms at the other's rate
        let shares = vec![search(1, 1e9, Some(1.0)), search(1, 4e6, None)];
        // 100 trials hold two rounds of 8: each task starts from one, the other 84 go by
        // weight (the light task's 0.4 % of them rounds to nothing)
        let mut b = RunBudget::new(Some(100), None, shares.clone(), 8).unwrap();
        assert_eq!(
            b.turn(0),
            Turn {
                allocated: 92,
                cold_share: 92,
                hit_effort: 85
            }
        );
        b.spend(92, 60.0);
        assert_eq!(
            b.turn(1),
            Turn {
                allocated: 8,
                cold_share: 8,
                hit_effort: 1
            }
        );
        // 12 trials do not: by weight alone the heavy task takes them all and the light
        // one is not reached
        let mut b = RunBudget::new(Some(12), None, shares, 8).unwrap();
        assert_eq!(b.turn(0).allocated, 12);
        b.spend(12, 10.0);
        assert_eq!(b.turn(1).allocated, 0);
        // a floor never hands out more than is left
        let b = Budget::new(Some(5), None).with_floor(8);
        assert_eq!(b.allocate(&search(1, 1e6, None), &[]), Some(5));
        assert_eq!(
            b.allocate(&search(1, 1e6, None), &[search(1, 1e6, None)]),
            Some(0)
        );
    }

    #[test]
    fn what_the_turns_left_goes_a_round_at_a_time_to_the_largest_gain() {
        let tuned = |occurrences, flops, best_s| {
            Some(TunedTask {
                occurrences,
                flops,
                best_s,
                open: true,
            })
        };
        // the run's best rate is 100 GFLOP/s (a 1e8-FLOP task at 1 ms)
        let at_peak = TunedTask {
            occurrences: 6,
            flops: 1e8,
            best_s: 1e-3,
            open: true,
        };
        assert_eq!(expected_gain(&at_peak, 1e11), 0.0);
        // 5e7 FLOPs could run 0.5 ms: 6.28 ms once is a gain of 5.78 ms
        let slow = tuned(1, 5e7, 6.28e-3).unwrap();
        assert!((expected_gain(&slow, 1e11) - 5.78e-3).abs() < 1e-12);
        // no FLOPs known: all of its time
        assert_eq!(expected_gain(&tuned(2, 0.0, 1e-3).unwrap(), 1e11), 2e-3);

        let closed = |t: Option<TunedTask>| t.map(|t| TunedTask { open: false, ..t });
        let all = [
            closed(Some(at_peak)), // patience ended it: no turn, but its rate is the peak
            tuned(1, 5e7, 6.28e-3),
            tuned(3, 1e8, 2e-3),         // 3 x (2 - 1) ms = 3 ms
            closed(tuned(9, 1e8, 9e-3)), // not a candidate, however slow
            None,                        // no latency
        ];
        let mut b = RunBudget::new(Some(64), None, vec![search(1, 1e8, Some(1e-3)); 5], 8).unwrap();
        b.spend(31, 60.0);
        assert_eq!(b.second_turn(&all), Some((1, 8)));
        // once it is closed, the next largest gain
        let rest = [all[0], closed(all[1]), all[2], all[3], all[4]];
        assert_eq!(b.second_turn(&rest), Some((2, 8)));
        // every open task at the run's best rate: nothing to gain
        assert_eq!(b.second_turn(&[all[0], tuned(2, 1e8, 1e-3)]), None);
        assert_eq!(b.second_turn(&[all[0], all[3]]), None);
        // less than a round left: no second turn
        b.spend(26, 60.0);
        assert_eq!(b.second_turn(&all), None);
        // no run budget, no second turns
        assert!(RunBudget::new(None, None, vec![], 8).is_none());
    }

    #[test]
    fn a_time_budget_is_trials_at_the_runs_own_rate() {
        let mut b = Budget::new(None, Some(100.0));
        assert_eq!(
            b.remaining(),
            Some((100.0 / INITIAL_SECONDS_PER_TRIAL) as u64)
        );
        b.spend(10, 50.0); // 5 s per trial
        assert_eq!(b.remaining(), Some(10));
        let both = Budget::new(Some(3), Some(100.0));
        assert_eq!(both.remaining(), Some(3), "the tighter of the two");
    }
}
