//! Seeding: from cached candidates to a seed plan per task.
//!
//! `annotate-cache` looks every task up in the cache and attaches the ranked candidates
//! (`tgc.candidates`); `seed-schedules` turns them into a plan (`tgc.seed_plan`) that the TVM
//! bridge executes: which traces to measure first, from which tier, with what budget, and
//! the cached latency an exact hit must re-measure within. Both live in the IR as
//! attributes, so a plan can be printed, checked by FileCheck and edited by hand.
//!
//! The policy ([`plan`]):
//! - exact hits: seed with them, best first; if the best re-measures within `tolerance` of its
//!   cached latency the task is done without search (the bridge checks), provided at
//!   least as many trials of search stand behind it as this run would spend on it
//!   (`trials`, or under a run budget `hit_effort`: what a cold run would give it); a hit
//!   from a shorter search resumes that search for the rest of the budget instead (so
//!   raising `--trials-per-task` over a cache filled with short runs still buys better
//!   schedules);
//! - otherwise structural neighbours: their traces replay with tile repair;
//! - otherwise family hits: anchor-trace transfer;
//! - otherwise no seeds: a plain search.
//!
//! Seeds come from the best tier only, up to `max_seeds` (`max_exact_seeds` for exact hits:
//! the best one decides), because a worse tier's traces
//! only dilute the first batch when a better tier exists. Every plan has the same trial
//! budget (less the trials a resumed exact hit already had): seeding wins time by stopping
//! early (exact hit, or patience once the goal is reached), not by starving the search.

pub use tgc_canonicalize::Tier;
use tgc_ir::{Attr, Attrs};

/// A plan's tier as written: the tier, or `none` for a plain search.
pub fn tier_name(tier: Option<Tier>) -> &'static str {
    tier.map_or("none", Tier::as_str)
}

/// One cached candidate as annotate-cache records it.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateRef {
    pub tier: Tier,
    /// The trace's digest in the cache (hex).
    pub trace: String,
    /// Mean latency of the trace on its source task, seconds.
    pub latency_s: f64,
    /// Feature distance to the source task (0 for exact tiers).
    pub distance: f64,
    /// `model/task` the record was measured on.
    pub source: String,
    /// Trials of search behind the record (0: unknown, e.g. a MetaSchedule import).
    pub trials: i64,
    /// Floating-point operations of the source task (0: unknown, e.g. an import).
    pub source_flops: f64,
}

impl CandidateRef {
    pub fn to_attr(&self) -> Attr {
        let mut d = Attrs::new();
        d.insert("tier".into(), Attr::str(self.tier.as_str()));
        d.insert("trace".into(), Attr::str(&self.trace));
        d.insert("latency_s".into(), Attr::Float(self.latency_s));
        d.insert("distance".into(), Attr::Float(self.distance));
        d.insert("source".into(), Attr::str(&self.source));
        if self.trials > 0 {
            d.insert("trials".into(), Attr::Int(self.trials));
        }
        if self.source_flops > 0.0 {
            d.insert("source_flops".into(), Attr::Float(self.source_flops));
        }
        Attr::Dict(d)
    }

    pub fn from_attr(a: &Attr) -> Result<CandidateRef, String> {
        let d = a.as_dict().ok_or("a candidate must be a dictionary")?;
        let s = |k: &str| {
            d.get(k)
                .and_then(Attr::as_str)
                .map(str::to_string)
                .ok_or(format!("candidate has no string '{k}'"))
        };
        let f = |k: &str| {
            d.get(k)
                .and_then(Attr::as_float)
                .ok_or(format!("candidate has no number '{k}'"))
        };
        Ok(CandidateRef {
            tier: Tier::parse(&s("tier")?).map_err(|e| format!("candidate: {e}"))?,
            trace: s("trace")?,
            latency_s: f("latency_s")?,
            distance: f("distance")?,
            source: s("source")?,
            trials: d.get("trials").and_then(Attr::as_int).unwrap_or(0),
            source_flops: d
                .get("source_flops")
                .and_then(Attr::as_float)
                .unwrap_or(0.0),
        })
    }
}

/// The knobs of the seed policy (explicit, named, with defaults; nothing buried in loops).
#[derive(Clone, Debug, PartialEq)]
pub struct SeedPolicy {
    /// Measured candidates per task, seeds included.
    pub trials: i64,
    /// The search effort (trials) an exact hit's record must have behind it to end the
    /// task; 0: `trials`. Under a run budget the driver sets it to the share a cold run
    /// would give the task, since the task's own allocation grows with the trials that
    /// earlier hits left unspent, which says nothing about how much search it deserves.
    pub hit_effort: i64,
    /// Most seeds measured in the first batch.
    pub max_seeds: usize,
    /// Most exact hits measured: the best one re-measured within tolerance ends the task,
    /// the runner-up covers a best one that no longer replays.
    pub max_exact_seeds: usize,
    /// An exact hit ends the task when it re-measures within this relative tolerance.
    pub tolerance: f64,
    /// Search rounds without improvement before a task stops early.
    pub patience: i64,
    /// The same for a task seeded from the cache (any tier): its first round starts from
    /// what an earlier search found, so one round without improvement ends it. For an exact
    /// hit that re-measured off its cached latency (the machine drifted, or the record was
    /// lucky) this is what keeps the task from searching its whole budget again.
    pub seeded_patience: i64,
}

impl SeedPolicy {
    /// The defaults: the one place they are written (the seed-schedules pass options, the
    /// CLI flags and the tuning driver take them from here).
    pub const DEFAULT: SeedPolicy = SeedPolicy {
        trials: 64,
        hit_effort: 0,
        max_seeds: 16,
        max_exact_seeds: 2,
        tolerance: 0.05,
        patience: 3,
        seeded_patience: 1,
    };

    /// The effort that makes an exact hit final: `hit_effort` when set, never more than the
    /// trials this run may spend on the task.
    pub fn effort_bar(&self) -> i64 {
        if self.hit_effort > 0 {
            self.hit_effort.min(self.trials)
        } else {
            self.trials
        }
    }

    /// Whether an exact hit whose record has `effort` trials behind it (0: unknown) may end
    /// the task under this policy.
    pub fn hit_is_final(&self, effort: i64) -> bool {
        effort_suffices(effort, self.effort_bar())
    }
}

/// Whether a record with `effort` trials of search behind it (0 or less: unknown, as in
/// MetaSchedule imports, which counts as enough) meets `bar`.
pub fn effort_suffices(effort: i64, bar: i64) -> bool {
    effort <= 0 || effort >= bar
}

impl Default for SeedPolicy {
    fn default() -> Self {
        SeedPolicy::DEFAULT
    }
}

/// What the bridge does for one task.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedPlan {
    /// The tier the seeds come from; `None` (written `none`) for a plain search.
    pub tier: Option<Tier>,
    /// Trace digests, best first.
    pub seeds: Vec<String>,
    pub trials: i64,
    pub patience: i64,
    pub tolerance: f64,
    /// The best exact hit's cached latency: the bar for finishing without search.
    pub cached_latency_s: Option<f64>,
    /// With `cached_latency_s`: the cached latency of the runner-up exact seed (the second
    /// seed, a record of the same workload), the control of the hit check. A hit that
    /// re-measures slower than cached by more than the tolerance still ends the task when
    /// the control re-measures slower by as much: the machine runs this workload slower
    /// now (docs/tuning.md), the schedule has not lost its lead.
    pub control_latency_s: Option<f64>,
    /// Trials already spent on this very task in earlier runs (the best exact hit's
    /// effort), when the search resumes from it; 0 otherwise.
    pub prior_trials: i64,
    /// The search effort behind the best exact hit when it may end the task (0: unknown or
    /// no such hit): what a record confirmed by re-measuring it inherits.
    pub hit_trials: i64,
    /// For neighbour seeds: the latency at which this task would run at the FLOP rate the
    /// best of its seeds' source tasks reached. Patience counts only once the task's best is
    /// within `tolerance` of it: a search short of its sources keeps its budget.
    pub goal_latency_s: Option<f64>,
}

/// How a task's tuning ended, as far as the records' effort is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The best exact hit re-measured within tolerance: no search ran.
    ExactHit,
    /// A search ran (seeded or not) and measured `trials`; `converged` when it ended because
    /// more search was not expected to pay (patience, or the search ran out of candidates)
    /// rather than on its budget.
    Searched { trials: u64, converged: bool },
}

/// The seed plan for a task of `task_flops` floating-point operations (`None`: unknown)
/// with these candidates (ranked best first within each tier).
pub fn plan(candidates: &[CandidateRef], task_flops: Option<f64>, policy: &SeedPolicy) -> SeedPlan {
    let tier = candidates.iter().map(|c| c.tier).min();
    // Exact tiers: the best hit decides, the runner-up covers one that fails to replay.
    let cap = match tier {
        Some(t) if t.is_exact() => policy.max_exact_seeds.min(policy.max_seeds),
        _ => policy.max_seeds,
    };
    let chosen: Vec<&CandidateRef> = candidates
        .iter()
        .filter(|c| Some(c.tier) == tier)
        .take(cap)
        .collect();
    let best_exact = chosen
        .iter()
        .filter(|c| c.tier.is_exact())
        .min_by(|a, b| a.latency_s.total_cmp(&b.latency_s));
    // An exact hit ends the task only when as much search stands behind it as this run
    // would spend (unknown effort, as in MetaSchedule imports, counts as enough). A hit
    // from a shorter search resumes it: seeded with the hit, for the rest of the budget.
    let (cached_latency_s, prior_trials, hit_trials, trials) = match best_exact {
        Some(b) if !policy.hit_is_final(b.trials) => {
            (None, b.trials, 0, (policy.trials - b.trials).max(1))
        }
        Some(b) => (Some(b.latency_s), 0, b.trials, policy.trials),
        None => (None, 0, 0, policy.trials),
    };
    // The control: the second seed, when the hit is the first (the worker checks the first
    // exact seed and controls with the next).
    let control_latency_s = match chosen.as_slice() {
        [hit, next, ..] if cached_latency_s == Some(hit.latency_s) && next.latency_s > 0.0 => {
            Some(next.latency_s)
        }
        _ => None,
    };
    // Neighbours' latencies are of other tasks: scaled by work, the best FLOP rate they
    // reached is the goal.
    let neighbours = tier.is_some_and(|t| !t.is_exact());
    let goal_latency_s = match task_flops {
        Some(flops) if neighbours && flops > 0.0 => chosen
            .iter()
            .filter(|c| c.source_flops > 0.0 && c.latency_s > 0.0)
            .map(|c| c.latency_s * flops / c.source_flops)
            .min_by(f64::total_cmp),
        _ => None,
    };
    SeedPlan {
        tier: chosen.first().map(|c| c.tier),
        seeds: chosen.iter().map(|c| c.trace.clone()).collect(),
        trials,
        patience: if tier.is_some() {
            policy.seeded_patience
        } else {
            policy.patience
        },
        tolerance: policy.tolerance,
        cached_latency_s,
        control_latency_s,
        prior_trials,
        hit_trials,
        goal_latency_s,
    }
}

impl SeedPlan {
    /// The search effort the task's records carry after it ran as `outcome`: a resumed
    /// search adds its trials to the earlier ones; a confirmed exact hit keeps the effort
    /// of the search that found it (re-measuring is no search); otherwise this run's trials,
    /// and a search that converged counts as the whole budget it had (it stopped because
    /// more search was not expected to pay, so a later run with that budget must not resume
    /// it).
    pub fn effort(&self, outcome: Outcome) -> u64 {
        let prior = self.prior_trials.max(0) as u64;
        match outcome {
            Outcome::ExactHit => self.hit_trials.max(0) as u64,
            Outcome::Searched {
                trials,
                converged: false,
            } => prior + trials,
            Outcome::Searched {
                trials,
                converged: true,
            } => prior + trials.max(self.trials.max(0) as u64),
        }
    }

    pub fn to_attr(&self) -> Attr {
        let mut d = Attrs::new();
        d.insert("tier".into(), Attr::str(tier_name(self.tier)));
        d.insert(
            "seeds".into(),
            Attr::List(self.seeds.iter().map(Attr::str).collect()),
        );
        d.insert("trials".into(), Attr::Int(self.trials));
        d.insert("patience".into(), Attr::Int(self.patience));
        d.insert("tolerance".into(), Attr::Float(self.tolerance));
        if let Some(l) = self.cached_latency_s {
            d.insert("cached_latency_s".into(), Attr::Float(l));
        }
        if let Some(l) = self.control_latency_s {
            d.insert("control_latency_s".into(), Attr::Float(l));
        }
        if self.prior_trials > 0 {
            d.insert("prior_trials".into(), Attr::Int(self.prior_trials));
        }
        if self.hit_trials > 0 {
            d.insert("hit_trials".into(), Attr::Int(self.hit_trials));
        }
        if let Some(g) = self.goal_latency_s {
            d.insert("goal_latency_s".into(), Attr::Float(g));
        }
        Attr::Dict(d)
    }

    pub fn from_attr(a: &Attr) -> Result<SeedPlan, String> {
        let d = a.as_dict().ok_or("a seed plan must be a dictionary")?;
        const FIELDS: [&str; 10] = [
            "tier",
            "seeds",
            "trials",
            "patience",
            "tolerance",
            "cached_latency_s",
            "control_latency_s",
            "prior_trials",
            "hit_trials",
            "goal_latency_s",
        ];
        if let Some(k) = d.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "seed plan has an unknown field '{k}' (fields: {})",
                FIELDS.join(", ")
            ));
        }
        let tier = match d
            .get("tier")
            .and_then(Attr::as_str)
            .ok_or("seed plan has no 'tier'")?
        {
            "none" => None,
            t => Some(Tier::parse(t).map_err(|e| format!("seed plan: {e}"))?),
        };
        let seeds = d
            .get("seeds")
            .and_then(Attr::as_list)
            .ok_or("seed plan has no 'seeds' list")?
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or("a seed must be a trace digest string")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let int = |k: &str| {
            d.get(k)
                .and_then(Attr::as_int)
                .ok_or(format!("seed plan has no integer '{k}'"))
        };
        let (trials, patience) = (int("trials")?, int("patience")?);
        if trials < 1 || patience < 0 {
            return Err(format!(
                "seed plan needs trials >= 1 and patience >= 0, got trials={trials} patience={patience}"
            ));
        }
        let tolerance = d
            .get("tolerance")
            .and_then(Attr::as_float)
            .filter(|t| *t >= 0.0)
            .ok_or("seed plan has no non-negative number 'tolerance'")?;
        Ok(SeedPlan {
            tier,
            seeds,
            trials,
            patience,
            tolerance,
            cached_latency_s: d.get("cached_latency_s").and_then(Attr::as_float),
            control_latency_s: optional_positive(d, "control_latency_s")?,
            prior_trials: optional_count(d, "prior_trials")?,
            hit_trials: optional_count(d, "hit_trials")?,
            goal_latency_s: optional_positive(d, "goal_latency_s")?,
        })
    }
}

/// An optional positive number of a plan (absent: `None`).
fn optional_positive(d: &Attrs, k: &str) -> Result<Option<f64>, String> {
    match d.get(k) {
        None => Ok(None),
        Some(a) => match a.as_float() {
            Some(x) if x > 0.0 => Ok(Some(x)),
            _ => Err(format!("seed plan's '{k}' must be a positive number")),
        },
    }
}

/// An optional non-negative integer of a plan (absent: 0).
fn optional_count(d: &Attrs, k: &str) -> Result<i64, String> {
    match d.get(k) {
        None => Ok(0),
        Some(a) => match a.as_int() {
            Some(n) if n >= 0 => Ok(n),
            _ => Err(format!("seed plan's '{k}' must be a non-negative integer")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(tier: &str, trace: &str, latency_s: f64) -> CandidateRef {
        CandidateRef {
            tier: Tier::parse(tier).unwrap(),
            trace: trace.into(),
            latency_s,
            distance: 0.0,
            source: "m/t".into(),
            trials: 0,
            source_flops: 0.0,
        }
    }

    fn with_trials(mut c: CandidateRef, trials: i64) -> CandidateRef {
        c.trials = trials;
        c
    }

    #[test]
    fn an_exact_hit_from_a_shorter_search_resumes_it() {
        let policy = SeedPolicy::default(); // 64 trials
                                            // 16 trials behind the best hit: no finishing on it, 48 more trials from it
        let p = plan(
            &[
                with_trials(cand("exact", "a", 1e-4), 16),
                with_trials(cand("exact", "b", 2e-4), 64),
            ],
            None,
            &policy,
        );
        assert_eq!(p.seeds, vec!["a", "b"]);
        assert_eq!(
            (p.cached_latency_s, p.prior_trials, p.trials),
            (None, 16, 48)
        );
        // as much search as this run would do, or more: the hit may end the task
        for t in [64, 500] {
            let p = plan(&[with_trials(cand("exact", "a", 1e-4), t)], None, &policy);
            assert_eq!(
                (p.cached_latency_s, p.prior_trials, p.trials),
                (Some(1e-4), 0, 64)
            );
        }
        // unknown effort (a MetaSchedule import) counts as enough
        let p = plan(&[cand("tvm-hash", "h", 1e-4)], None, &policy);
        assert_eq!(p.cached_latency_s, Some(1e-4));
        // neighbours' effort is about other tasks: it never shortens the budget
        let p = plan(
            &[with_trials(cand("structural", "s", 1e-4), 8)],
            None,
            &policy,
        );
        assert_eq!((p.prior_trials, p.trials), (0, 64));
        // the plan keeps it through the IR
        let p = plan(&[with_trials(cand("exact", "a", 1e-4), 10)], None, &policy);
        assert_eq!(SeedPlan::from_attr(&p.to_attr()).unwrap(), p);
        let c = with_trials(cand("exact", "a", 1e-4), 10);
        assert_eq!(CandidateRef::from_attr(&c.to_attr()).unwrap(), c);
    }

    #[test]
    fn a_final_hit_carries_its_runner_up_as_the_control() {
        let policy = SeedPolicy::default(); // 64 trials
        let full = |c| with_trials(c, 64);
        let p = plan(
            &[
                full(cand("exact", "a", 1e-4)),
                full(cand("exact", "b", 1.3e-4)),
            ],
            None,
            &policy,
        );
        assert_eq!(
            (p.cached_latency_s, p.control_latency_s),
            (Some(1e-4), Some(1.3e-4))
        );
        assert_eq!(SeedPlan::from_attr(&p.to_attr()).unwrap(), p);
        // one record: nothing to control with
        let p = plan(&[full(cand("exact", "a", 1e-4))], None, &policy);
        assert_eq!(p.control_latency_s, None);
        // a hit that resumes its search is not checked, so it has no control
        let p = plan(
            &[
                with_trials(cand("exact", "a", 1e-4), 8),
                full(cand("exact", "b", 1.3e-4)),
            ],
            None,
            &policy,
        );
        assert_eq!((p.cached_latency_s, p.control_latency_s), (None, None));
        // neighbours have no hit and no control
        let p = plan(
            &[cand("structural", "s", 1e-4), cand("structural", "t", 2e-4)],
            None,
            &policy,
        );
        assert_eq!(p.control_latency_s, None);
        // a plan in the IR with a control that is not a positive number is an error
        let mut d = p.to_attr().as_dict().unwrap().clone();
        d.insert("control_latency_s".into(), Attr::str("fast"));
        let e = SeedPlan::from_attr(&Attr::Dict(d)).unwrap_err();
        assert!(
            e.contains("'control_latency_s' must be a positive number"),
            "{e}"
        );
    }

    #[test]
    fn a_hit_effort_bar_below_the_trials_keeps_the_hit() {
        // a run budget allocates 55 trials, but a cold run would give the task 20
        let policy = SeedPolicy {
            trials: 55,
            hit_effort: 20,
            ..SeedPolicy::default()
        };
        let p = plan(&[with_trials(cand("exact", "a", 1e-4), 20)], None, &policy);
        assert_eq!(
            (p.cached_latency_s, p.prior_trials, p.trials),
            (Some(1e-4), 0, 55),
            "20 trials stand behind the hit: final (and 55 if it does not stick)"
        );
        // a shorter search behind it resumes, for the rest of the allocation
        let p = plan(&[with_trials(cand("exact", "a", 1e-4), 12)], None, &policy);
        assert_eq!(
            (p.cached_latency_s, p.prior_trials, p.trials),
            (None, 12, 43)
        );
        // the bar is never above the trials the run may spend
        let policy = SeedPolicy {
            trials: 10,
            hit_effort: 20,
            ..SeedPolicy::default()
        };
        assert_eq!(policy.effort_bar(), 10);
        let p = plan(&[with_trials(cand("exact", "a", 1e-4), 12)], None, &policy);
        assert_eq!(p.cached_latency_s, Some(1e-4));
    }

    #[test]
    fn records_carry_the_effort_behind_them() {
        let policy = SeedPolicy::default(); // 64 trials
                                            // a resumed search adds its trials to the earlier ones
        let p = plan(&[with_trials(cand("exact", "a", 1e-4), 16)], None, &policy);
        assert_eq!(
            p.effort(Outcome::Searched {
                trials: 48,
                converged: false
            }),
            64
        );
        // a confirmed hit keeps the effort of the search that found it
        let p = plan(&[with_trials(cand("exact", "a", 1e-4), 200)], None, &policy);
        assert_eq!(p.hit_trials, 200);
        assert_eq!(p.effort(Outcome::ExactHit), 200);
        // ... and when the hit did not stick, the search that followed counts
        assert_eq!(
            p.effort(Outcome::Searched {
                trials: 64,
                converged: false
            }),
            64
        );
        // an import's unknown effort stays unknown (0), never the re-measure's 2 trials
        let p = plan(&[cand("tvm-hash", "h", 1e-4)], None, &policy);
        assert_eq!(p.effort(Outcome::ExactHit), 0);
        // plain and neighbour-seeded searches: this run's trials
        let searched = |trials, converged| Outcome::Searched { trials, converged };
        assert_eq!(plan(&[], None, &policy).effort(searched(64, false)), 64);
        // a search that converged stands for its whole budget, resumed or not
        assert_eq!(plan(&[], None, &policy).effort(searched(24, true)), 64);
        let p = plan(&[with_trials(cand("exact", "a", 1e-4), 16)], None, &policy);
        assert_eq!(p.effort(searched(8, true)), 64);
        assert_eq!(p.effort(searched(8, false)), 24);
    }

    #[test]
    fn seeds_set_a_shorter_patience_and_neighbours_a_goal() {
        let policy = SeedPolicy::default();
        let mut a = cand("structural", "a", 2e-3);
        a.source_flops = 1e9; // 0.5 TFLOP/s
        let mut b = cand("structural", "b", 1e-3);
        b.source_flops = 1e8; // 0.1 TFLOP/s
                              // this task does twice a's work: at a's rate it runs in 4 ms
        let p = plan(&[a.clone(), b], Some(2e9), &policy);
        assert_eq!(p.goal_latency_s, Some(4e-3));
        assert_eq!(p.patience, policy.seeded_patience);
        // unknown work or unknown source work: no goal, the patience still applies
        let p = plan(std::slice::from_ref(&a), None, &policy);
        assert_eq!(
            (p.goal_latency_s, p.patience),
            (None, policy.seeded_patience)
        );
        // exact hits have their own bar and the seeded patience; plain searches neither
        let mut e = cand("exact", "e", 1e-3);
        e.source_flops = 1e9;
        let p = plan(&[e], Some(1e9), &policy);
        assert_eq!(
            (p.goal_latency_s, p.patience),
            (None, policy.seeded_patience)
        );
        let p = plan(&[], Some(1e9), &policy);
        assert_eq!((p.goal_latency_s, p.patience), (None, policy.patience));
        // through the IR
        let p = plan(&[a], Some(2e9), &policy);
        assert_eq!(SeedPlan::from_attr(&p.to_attr()).unwrap(), p);
    }

    #[test]
    fn hand_written_plans_are_checked() {
        let good = plan(&[cand("exact", "a", 1e-4)], None, &SeedPolicy::default()).to_attr();
        let edit = |k: &str, v: Attr| {
            let mut d = good.as_dict().unwrap().clone();
            d.insert(k.into(), v);
            SeedPlan::from_attr(&Attr::Dict(d))
        };
        assert_eq!(
            edit("trials", Attr::Int(8)).unwrap().trials,
            8,
            "an edited budget is taken as written"
        );
        assert_eq!(edit("tier", Attr::str("none")).unwrap().tier, None);
        let err = |r: Result<SeedPlan, String>| r.unwrap_err();
        assert!(err(edit("trails", Attr::Int(8))).contains("unknown field 'trails'"));
        assert!(err(edit("tier", Attr::str("exakt"))).contains("unknown tier 'exakt'"));
        assert!(err(edit("trials", Attr::Int(0))).contains("trials >= 1"));
        assert!(err(edit("prior_trials", Attr::Int(-1))).contains("'prior_trials'"));
        assert!(err(edit("tolerance", Attr::Float(-0.5))).contains("'tolerance'"));
    }

    #[test]
    fn exact_hits_win_and_set_the_bar() {
        let c = [
            cand("exact", "a", 2e-4),
            cand("exact", "b", 1e-4),
            cand("exact", "x", 3e-4),
            cand("structural", "c", 5e-5),
        ];
        let p = plan(&c, None, &SeedPolicy::default());
        assert_eq!(p.tier, Some(Tier::Exact));
        assert_eq!(
            p.seeds,
            vec!["a", "b"],
            "at most two exact hits are measured"
        );
        assert_eq!(p.cached_latency_s, Some(1e-4));
    }

    #[test]
    fn structural_neighbours_when_no_exact_hit() {
        let c = [
            cand("structural", "s1", 1e-3),
            cand("structural", "s2", 2e-3),
            cand("family", "f", 1e-4),
        ];
        let p = plan(&c, None, &SeedPolicy::default());
        assert_eq!(p.tier, Some(Tier::Structural));
        assert_eq!(p.seeds, vec!["s1", "s2"]);
        assert_eq!(
            p.cached_latency_s, None,
            "neighbours' latencies are of other tasks"
        );
    }

    #[test]
    fn family_hits_last_and_plain_search_without_candidates() {
        let p = plan(&[cand("family", "f", 1e-4)], None, &SeedPolicy::default());
        assert_eq!((p.tier, p.seeds.len()), (Some(Tier::Family), 1));
        let none = plan(&[], None, &SeedPolicy::default());
        assert_eq!(none.tier, None);
        assert!(none.seeds.is_empty());
        assert_eq!(none.trials, 64);
    }

    #[test]
    fn seeds_are_capped() {
        let c: Vec<CandidateRef> = (0..40)
            .map(|i| cand("structural", &format!("t{i}"), 1e-4 + i as f64 * 1e-6))
            .collect();
        let p = plan(
            &c,
            None,
            &SeedPolicy {
                max_seeds: 5,
                ..SeedPolicy::default()
            },
        );
        assert_eq!(p.seeds, vec!["t0", "t1", "t2", "t3", "t4"]);
    }

    #[test]
    fn tvm_hash_hits_count_as_exact() {
        let p = plan(
            &[cand("tvm-hash", "h", 3e-5), cand("family", "f", 1e-5)],
            None,
            &SeedPolicy::default(),
        );
        assert_eq!(p.tier, Some(Tier::TvmHash));
        assert_eq!(p.cached_latency_s, Some(3e-5));
    }

    #[test]
    fn plans_and_candidates_round_trip_through_attributes() {
        let p = plan(&[cand("exact", "a", 1e-4)], None, &SeedPolicy::default());
        assert_eq!(SeedPlan::from_attr(&p.to_attr()).unwrap(), p);
        let c = cand("family", "z", 2.5e-3);
        assert_eq!(CandidateRef::from_attr(&c.to_attr()).unwrap(), c);
        assert!(SeedPlan::from_attr(&Attr::Int(1)).is_err());
    }
}
