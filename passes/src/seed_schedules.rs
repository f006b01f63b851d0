//! `seed-schedules`: turn each task's `tgc.candidates` into a seed plan (`tgc.seed_plan`)
//! with the policy of [`crate::seeding::plan`].

use crate::annotate_cache::CANDIDATES_ATTR;
use crate::pass::{OptionDefault, OptionSpec, Pass, PassError, PassInfo, PassOptions};
use crate::seeding::{plan, CandidateRef, SeedPlan, SeedPolicy};
use tgc_ir::{Function, Module};

pub const SEED_PLAN_ATTR: &str = "tgc.seed_plan";

pub static INFO: PassInfo = PassInfo {
    name: "seed-schedules",
    summary: "Turn each task's cached candidates into a seed plan (tgc.seed_plan) for the tuner",
    options: &[
        OptionSpec {
            name: "trials",
            default: OptionDefault::Int(SeedPolicy::DEFAULT.trials),
            help: "measured candidates per task, seeds included",
        },
        OptionSpec {
            name: "hit-effort",
            default: OptionDefault::Int(SeedPolicy::DEFAULT.hit_effort),
            help: "trials of search behind an exact hit that make it final (0: trials)",
        },
        OptionSpec {
            name: "max-seeds",
            default: OptionDefault::Int(SeedPolicy::DEFAULT.max_seeds as i64),
            help: "most seeds in the first batch",
        },
        OptionSpec {
            name: "tolerance",
            default: OptionDefault::Float(SeedPolicy::DEFAULT.tolerance),
            help: "relative re-measure tolerance that makes an exact hit final",
        },
        OptionSpec {
            name: "patience",
            default: OptionDefault::Int(SeedPolicy::DEFAULT.patience),
            help: "search rounds without improvement before stopping (0: never)",
        },
        OptionSpec {
            name: "seeded-patience",
            default: OptionDefault::Int(SeedPolicy::DEFAULT.seeded_patience),
            help: "the same after neighbour seeds (structural, family) were measured",
        },
    ],
    create: |o: &PassOptions| {
        let (trials, max_seeds, patience, seeded_patience) = (
            o.int("trials"),
            o.int("max-seeds"),
            o.int("patience"),
            o.int("seeded-patience"),
        );
        let tolerance = o.float("tolerance");
        let hit_effort = o.int("hit-effort");
        if trials < 1
            || hit_effort < 0
            || max_seeds < 0
            || patience < 0
            || seeded_patience < 0
            || !(0.0..=10.0).contains(&tolerance)
        {
            return Err(format!(
                "pass 'seed-schedules' needs trials >= 1, hit-effort >= 0, max-seeds >= 0, patience >= 0, seeded-patience >= 0 and 0 <= tolerance <= 10, got trials={trials} hit-effort={hit_effort} max-seeds={max_seeds} patience={patience} seeded-patience={seeded_patience} tolerance={tolerance}"
            ));
        }
        Ok(Box::new(SeedSchedules(SeedPolicy {
            trials,
            hit_effort,
            max_seeds: max_seeds as usize,
            tolerance,
            patience,
            seeded_patience,
            ..SeedPolicy::DEFAULT
        })))
    },
};

pub struct SeedSchedules(pub SeedPolicy);

impl Pass for SeedSchedules {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for f in module.functions.values_mut().filter(|f| f.is_primitive()) {
            let p = self.plan(f).map_err(PassError)?;
            f.attrs.insert(SEED_PLAN_ATTR.into(), p.to_attr());
        }
        Ok(())
    }
}

impl SeedSchedules {
    /// The plan for one task function from its `tgc.candidates` (none: a plain search).
    pub fn plan(&self, f: &Function) -> Result<SeedPlan, String> {
        let candidates = match f.attrs.get(CANDIDATES_ATTR) {
            None => Vec::new(),
            Some(a) => a
                .as_list()
                .ok_or_else(|| format!("@{}: {CANDIDATES_ATTR} must be a list", f.name))?
                .iter()
                .map(CandidateRef::from_attr)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("@{}: {CANDIDATES_ATTR}: {e}", f.name))?,
        };
        let flops = tgc_canonicalize::Features::of(f).flops;
        Ok(plan(&candidates, Some(flops), &self.0))
    }
}

/// The seed plan of a task, if seed-schedules ran (or the input carried one).
pub fn seed_plan(f: &Function) -> Result<Option<SeedPlan>, String> {
    f.attrs
        .get(SEED_PLAN_ATTR)
        .map(|a| SeedPlan::from_attr(a).map_err(|e| format!("@{}: {SEED_PLAN_ATTR}: {e}", f.name)))
        .transpose()
}
