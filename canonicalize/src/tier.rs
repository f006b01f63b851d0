//! The tiers of a cache lookup: which of a task's keys found a record.

/// How a candidate was found, best first: the task's own records (`exact`), records of
/// other tasks that lower to the same TVM workload (`tvm-hash`), structural neighbours of
/// other shapes (`structural`), same op family (`family`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Exact,
    TvmHash,
    Structural,
    Family,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Exact, Tier::TvmHash, Tier::Structural, Tier::Family];

    /// The spelling in the IR, the report and the cache.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Exact => "exact",
            Tier::TvmHash => "tvm-hash",
            Tier::Structural => "structural",
            Tier::Family => "family",
        }
    }

    pub fn parse(s: &str) -> Result<Tier, String> {
        Tier::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown tier '{s}' (exact, tvm-hash, structural, family)"))
    }

    /// The task's own workload: a hit's latency is a bar this task can be held to.
    pub fn is_exact(self) -> bool {
        matches!(self, Tier::Exact | Tier::TvmHash)
    }
}
