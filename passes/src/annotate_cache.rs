//! `annotate-cache`: attach to every task the ranked candidates the cache holds for it
//! (`tgc.candidates`, best tier first), for one target and one toolchain (by default the
//! pinned one). The keys are the ones `canonicalize` attached, when it ran. A task that
//! carries its TVM workload hash (`tgc.workload_hash`, a decimal string: `tgc tune` adds
//! it after lowering the task) is also looked up by that hash, which finds imported
//! MetaSchedule records.
//!
//! The pass reads the SQLite cache, so it exists only with the `cache` feature (on by
//! default). The attribute name and the default limit do not: seed-schedules reads
//! `tgc.candidates` with or without the cache behind it.

#[cfg(feature = "cache")]
use {
    crate::pass::{OptionDefault, OptionSpec, Pass, PassError, PassInfo, PassOptions},
    crate::seeding::CandidateRef,
    crate::target::resolve_target,
    tgc_cache::{Cache, CacheLocation, Candidate, Query, SharedCache, Target, Toolchain},
    tgc_canonicalize::{Features, TaskKeys},
    tgc_ir::{Attr, Function, Module},
};

pub const CANDIDATES_ATTR: &str = "tgc.candidates";

/// A task's TVM structural hash of its lowered workload, as a decimal string.
pub const WORKLOAD_HASH_ATTR: &str = "tgc.workload_hash";

/// Most candidates read per task, by default.
pub const DEFAULT_CANDIDATE_LIMIT: usize = 32;

#[cfg(feature = "cache")]
pub static INFO: PassInfo = PassInfo {
    name: "annotate-cache",
    summary: "Attach each task's cached candidates (exact, structural, family) as tgc.candidates",
    options: &[
        OptionSpec {
            name: "cache",
            default: OptionDefault::Str(""),
            help: "cache file or postgres:// URL ($TGC_CACHE or the user cache dir when empty; a driver hands the pass its opened cache instead)",
        },
        OptionSpec {
            name: "target",
            default: OptionDefault::Str("llvm"),
            help: "llvm (this machine), llvm-generic, cuda or a TVM target JSON",
        },
        OptionSpec {
            name: "toolchain",
            default: OptionDefault::Str(""),
            help: "TVM/tvm-ffi/LLVM versions the records were measured with (the pinned ones when empty)",
        },
        OptionSpec {
            name: "limit",
            default: OptionDefault::Int(DEFAULT_CANDIDATE_LIMIT as i64),
            help: "most candidates per task",
        },
    ],
    create: |o: &PassOptions| {
        let target = resolve_target(o.str("target"))?;
        let target = Target::from_json(&target).map_err(|e| e.to_string())?;
        let limit = o.int("limit");
        if limit < 0 {
            return Err(format!(
                "option 'limit' of pass 'annotate-cache' must be at least 0, got {limit}"
            ));
        }
        let source = match (o.cache(), o.str("cache")) {
            (Some(opened), _) => CacheSource::Opened(opened.clone()),
            (None, "") => CacheSource::At(CacheLocation::default_location().map_err(|e| e.to_string())?),
            (None, p) => CacheSource::At(CacheLocation::parse(p)),
        };
        let toolchain = match o.str("toolchain") {
            "" => Toolchain::pinned(),
            t => Toolchain::parse(t).map_err(|e| e.to_string())?,
        };
        Ok(Box::new(AnnotateCache {
            source,
            target,
            toolchain,
            limit: limit as usize,
        }))
    },
};

/// The cache annotate-cache reads.
#[cfg(feature = "cache")]
#[derive(Clone, Debug)]
pub enum CacheSource {
    /// A driver's opened cache (`tgc tune`, `tgc build`): one connection for the run, with
    /// the run's settings.
    Opened(SharedCache),
    /// A location, opened for each run of the pass (`tgc opt`).
    At(CacheLocation),
}

#[cfg(feature = "cache")]
pub struct AnnotateCache {
    pub source: CacheSource,
    pub target: Target,
    pub toolchain: Toolchain,
    pub limit: usize,
}

#[cfg(feature = "cache")]
impl AnnotateCache {
    /// The cache's candidates for one task function, ranked (see tgc-cache's retrieval).
    pub fn lookup(&self, cache: &Cache, f: &Function) -> Result<Vec<Candidate>, String> {
        let keys = TaskKeys::of_annotated(f)?;
        let features = Features::of(f);
        let mut q = Query::new(&keys, &features, &self.target, &self.toolchain, self.limit);
        if let Some(a) = f.attrs.get(WORKLOAD_HASH_ATTR) {
            let hash = a
                .as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| {
                    format!(
                        "@{}: {WORKLOAD_HASH_ATTR} must be a decimal string of a 64-bit hash",
                        f.name
                    )
                })?;
            q = q.with_tvm_hash(hash);
        }
        cache.lookup(&q).map_err(|e| format!("@{}: {e}", f.name))
    }

    /// Annotates one task function (what the pass does to each).
    pub fn annotate(&self, cache: Option<&Cache>, f: &mut Function) -> Result<(), String> {
        let mut list = Vec::new();
        if let Some(cache) = cache {
            let found = self.lookup(cache, f)?;
            list.extend(
                found
                    .iter()
                    .map(|c| CandidateRef::from_candidate(c).to_attr()),
            );
        }
        f.attrs.insert(CANDIDATES_ATTR.into(), Attr::List(list));
        Ok(())
    }

    /// Annotates every task function of `module` from the pass's cache: the opened one, or
    /// the location's when it exists (a server is always opened; no cache yet means no
    /// candidates, not an error: the first run of a model).
    pub fn annotate_module(&self, module: &mut Module) -> Result<(), String> {
        let tasks = module.functions.values_mut().filter(|f| f.is_primitive());
        match &self.source {
            CacheSource::Opened(shared) => {
                let cache = shared.lock();
                tasks
                    .into_iter()
                    .try_for_each(|f| self.annotate(Some(&*cache), f))
            }
            CacheSource::At(location) => {
                let cache = if location.exists() {
                    Some(Cache::open_existing(location).map_err(|e| e.to_string())?)
                } else {
                    None
                };
                tasks
                    .into_iter()
                    .try_for_each(|f| self.annotate(cache.as_ref(), f))
            }
        }
    }
}

#[cfg(feature = "cache")]
impl CandidateRef {
    /// The annotation for a cache candidate.
    pub fn from_candidate(c: &Candidate) -> CandidateRef {
        CandidateRef {
            tier: c.tier,
            trace: c.trace.digest().to_string(),
            latency_s: c.mean_latency,
            distance: c.distance,
            source: format!(
                "{}/{}",
                c.source.model.as_deref().unwrap_or("?"),
                c.source.task_name.as_deref().unwrap_or("?")
            ),
            trials: c.trials.map_or(0, i64::from),
            source_flops: c.source.flops.unwrap_or(0.0),
        }
    }
}

#[cfg(feature = "cache")]
impl Pass for AnnotateCache {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        self.annotate_module(module).map_err(PassError)
    }
}
