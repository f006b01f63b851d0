//! Retrieval: the ranked candidate traces for a task on a target under a toolchain, for the
//! annotate-cache pass and the seeding of a search.
//!
//! # Tiers, in order
//!
//! 1. **Exact**: records of the task with the same exact key. They replay as is. Ranked by
//!    mean latency, fastest first.
//! 2. **TvmHash**: records of other cache entries with the same TVM structural hash, when the
//!    caller passes the task's hash. This is how workloads imported from MetaSchedule
//!    databases (which carry no tgc keys) are found: the same TVM workload, so they also
//!    replay as is. Ranked by mean latency.
//! 3. **Structural**: records of neighbour tasks, i.e. the same structural key with another
//!    exact key (same loop nest, other extents; TVM repairs the tile sizes on replay).
//! 4. **Family**: records of tasks with the same family key (op sequence) and another
//!    structural key; for anchor-trace transfer.
//!
//! A trace (by digest) is returned once, in the first tier that finds it. Lookup stops at
//! the tier that fills `limit`.
//!
//! # Ranking of neighbours (tiers 3 and 4)
//!
//! Let `q` be the query task and `N` the neighbour tasks of the tier that have records on
//! the target (and toolchain); only the `max_neighbours` nearest by `dist(q, t)` are used
//! (of at most `max_scanned` read). In each neighbour task `t`, the records sorted by mean
//! latency get a normalised rank `rho_t(c) = i / (n_t - 1)` for the i-th of `n_t`
//! (0 = fastest, 1 = slowest; 0 when `n_t = 1`). A trace `c` measured on the tasks
//! `T_c ⊆ N` scores
//!
//! ```text
//!     score(c) = min_{t in T_c} dist(q, t)  +  lambda * mean_{t in T_c} rho_t(c)
//! ```
//!
//! and candidates are sorted by ascending score (ties: faster mean latency, then digest).
//! The second term is the ranking bias of history-biased Bayesian optimisation: a trace's
//! rank averaged over the tasks of its group, so a trace that did well on several similar
//! tasks is preferred over one that was good on a single task. `lambda` is
//! [`RankingConfig::rank_weight`] (default 1: being the slowest of its task costs as much
//! as one unit of distance, i.e. a factor 2 in one extent).
//!
//! `dist` is [`Features::distance`] (Euclidean distance of the log2-extent vectors plus the
//! |log2| FLOP ratio) for structural neighbours. Family neighbours have other structures,
//! whose extent vectors do not correspond, so their distance is the size distance
//! `|log2((flops_q+1)/(flops_t+1))| + |log2((bytes_q+1)/(bytes_t+1))|`; the same is used
//! for a structural neighbour whose vectors do not align.

use crate::config::RankingConfig;
use crate::db::{args, Db, Row};
use crate::error::{Result, SqliteContext};
use crate::model::{features_from_json, Target, Toolchain, Trace, TraceDigest};
use crate::rows::{resolve_target, toolchain_columns, toolchain_id, trace_digest};
use crate::store::Cache;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;
use tgc_canonicalize::{Features, TaskKey, TaskKeys};

pub use tgc_canonicalize::Tier;

/// The task a candidate's record was measured on.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceTask {
    /// Its tgc exact key; `None` for a workload imported from a MetaSchedule database.
    pub exact_key: Option<TaskKey>,
    /// Its TVM structural hash, when known.
    pub tvm_hash: Option<u64>,
    pub model: Option<String>,
    pub task_name: Option<String>,
    /// Its floating-point operations (tgc features; `None` for an imported workload): with
    /// the record's latency, the throughput the source task reached.
    pub flops: Option<f64>,
}

/// One ranked trace to try.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub tier: Tier,
    pub trace: Trace,
    /// Mean measured latency (seconds) of the trace on the source task.
    pub mean_latency: f64,
    pub num_samples: usize,
    /// The search effort behind the record: the most trials any run measured on its task
    /// (for this target and toolchain), counting the runs each resumed. A record found by a
    /// short search may be the best of a task a longer search covered before; the task's
    /// effort is the longer one. `None` when the record's own effort is unknown, as for
    /// MetaSchedule imports.
    pub trials: Option<u32>,
    /// Feature distance between the query and the source task (0 for exact tiers).
    pub distance: f64,
    /// The averaged normalised rank in [0, 1] (the ranking bias).
    pub rank_bias: f64,
    /// The sort key within the tier: mean latency for the exact tiers, the ranking formula
    /// of the module docs for neighbours. Lower is better.
    pub score: f64,
    pub source: SourceTask,
    /// The toolchain that measured it (differs from the query's only across toolchains).
    pub toolchain: Toolchain,
    /// Where the record came from (its provenance source): `tune` for a record `tgc tune`
    /// measured, `import:<dir>` for one imported from a MetaSchedule database.
    pub origin: String,
}

impl Candidate {
    /// Whether the record was imported from a MetaSchedule database.
    pub fn is_imported(&self) -> bool {
        self.origin.starts_with("import:")
    }
}

/// A lookup: the task, where it will run, and how many candidates to return.
#[derive(Clone, Debug)]
pub struct Query<'a> {
    pub keys: &'a TaskKeys,
    pub features: &'a Features,
    pub target: &'a Target,
    pub toolchain: &'a Toolchain,
    /// The task's TVM structural hash, which enables the TvmHash tier.
    pub tvm_hash: Option<u64>,
    /// Also return records measured under other toolchains (off by default: a trace from
    /// another TVM version may not replay).
    pub any_toolchain: bool,
    pub limit: usize,
}

impl<'a> Query<'a> {
    pub fn new(
        keys: &'a TaskKeys,
        features: &'a Features,
        target: &'a Target,
        toolchain: &'a Toolchain,
        limit: usize,
    ) -> Self {
        Query {
            keys,
            features,
            target,
            toolchain,
            tvm_hash: None,
            any_toolchain: false,
            limit,
        }
    }

    pub fn with_tvm_hash(mut self, hash: u64) -> Self {
        self.tvm_hash = Some(hash);
        self
    }

    pub fn across_toolchains(mut self) -> Self {
        self.any_toolchain = true;
        self
    }
}

/// Row ids are integers SQLite hands out: a multiplicative hash spreads them well and costs
/// far less than SipHash on the lookup path (a crafted file could only make lookups slower).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_i64(&mut self, i: i64) {
        self.0 = (self.0 ^ i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
type IdSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;

/// The scan of a neighbour tier: tasks of the group (`?1`) other than the excluded key
/// (`?2`) that have records on the target (`?3`) [and toolchain (`?4`)]. The caller stops
/// reading after `max_scanned` rows: a bound `LIMIT ?` makes SQLite re-prepare the
/// statement whenever the binding changes (measured: on every lookup). Separate statements
/// with and without the toolchain keep each plan simple.
fn neighbour_sql(tier: Tier, with_toolchain: bool) -> &'static str {
    match (tier, with_toolchain) {
        (Tier::Structural, true) => {
            "SELECT t.id, t.features_json FROM tasks t WHERE t.structural_key = ?1 AND t.exact_key <> ?2
               AND EXISTS (SELECT 1 FROM records r WHERE r.task_id = t.id AND r.target_id = ?3 AND r.toolchain_id = ?4)"
        }
        (Tier::Structural, false) => {
            "SELECT t.id, t.features_json FROM tasks t WHERE t.structural_key = ?1 AND t.exact_key <> ?2
               AND EXISTS (SELECT 1 FROM records r WHERE r.task_id = t.id AND r.target_id = ?3)"
        }
        (_, true) => {
            "SELECT t.id, t.features_json FROM tasks t WHERE t.family_key = ?1 AND t.structural_key <> ?2
               AND EXISTS (SELECT 1 FROM records r WHERE r.task_id = t.id AND r.target_id = ?3 AND r.toolchain_id = ?4)"
        }
        (_, false) => {
            "SELECT t.id, t.features_json FROM tasks t WHERE t.family_key = ?1 AND t.structural_key <> ?2
               AND EXISTS (SELECT 1 FROM records r WHERE r.task_id = t.id AND r.target_id = ?3)"
        }
    }
}

fn size_distance(a: &Features, b: &Features) -> f64 {
    let ratio = |x: f64, y: f64| ((x + 1.0) / (y + 1.0)).log2().abs();
    ratio(a.flops, b.flops) + ratio(a.bytes, b.bytes)
}

/// The tiers in the order lookup tries them.
const TIER_ORDER: [Tier; 4] = [Tier::Exact, Tier::TvmHash, Tier::Structural, Tier::Family];

/// A ranked record before its trace text is read.
struct Hit {
    tier: Tier,
    record_id: i64,
    trace_id: i64,
    /// Mean latency on the record's task: the tie-break among neighbours of equal score.
    mean_latency: f64,
    distance: f64,
    rank_bias: f64,
    score: f64,
}

/// A record of one task, as ranking needs it.
struct TaskRecord {
    record_id: i64,
    trace_id: i64,
    mean_latency: f64,
}

/// A neighbour task of the query, at its distance from it.
struct Neighbour {
    task_id: i64,
    distance: f64,
}

/// A trace as the neighbour tasks of a tier measured it.
struct NeighbourTrace {
    /// The distance of the nearest neighbour that measured it, and its record there.
    distance: f64,
    record_id: i64,
    mean_latency: f64,
    /// The sum of its normalised ranks over the `tasks` neighbours that measured it.
    rank_sum: f64,
    tasks: u32,
}

/// A record with its trace and provenance, as a candidate carries it.
struct StoredRecord {
    task_id: i64,
    target_id: i64,
    toolchain_id: i64,
    mean_latency: f64,
    num_samples: i64,
    model: Option<String>,
    task_name: Option<String>,
    trace_json: String,
    digest: Vec<u8>,
    trials: Option<i64>,
    origin: String,
}

/// The keys a source task is known by.
#[derive(Clone, Copy)]
struct SourceKeys {
    exact_key: Option<TaskKey>,
    tvm_hash: Option<u64>,
    flops: Option<f64>,
}

/// The hits so far, best tier first; a trace counts once, in the first tier that finds it.
#[derive(Default)]
struct Found {
    hits: Vec<Hit>,
    traces: IdSet<i64>,
}

impl Found {
    fn add(&mut self, tier_hits: Vec<Hit>) {
        for hit in tier_hits {
            if self.traces.insert(hit.trace_id) {
                self.hits.push(hit);
            }
        }
    }
}

/// `i / (n - 1)` for the i-th of `n` records sorted by latency (0 = fastest, 1 = slowest).
fn normalised_rank(i: usize, n: usize) -> f64 {
    if n > 1 {
        i as f64 / (n - 1) as f64
    } else {
        0.0
    }
}

/// The hits of a tier whose records belong to the query's own workload (tiers 1 and 2):
/// in the order given (fastest first), scored by mean latency.
fn same_workload(tier: Tier, records: Vec<TaskRecord>) -> Vec<Hit> {
    let n = records.len();
    records
        .into_iter()
        .enumerate()
        .map(|(i, r)| Hit {
            tier,
            record_id: r.record_id,
            trace_id: r.trace_id,
            mean_latency: r.mean_latency,
            distance: 0.0,
            rank_bias: normalised_rank(i, n),
            score: r.mean_latency,
        })
        .collect()
}

/// One lookup inside its read transaction: the query and the rows it resolved to.
struct Lookup<'a> {
    conn: &'a Db,
    path: &'a Path,
    ranking: &'a RankingConfig,
    query: &'a Query<'a>,
    target_id: i64,
    /// The toolchain records must have been measured under; `None` across toolchains.
    toolchain_id: Option<i64>,
    /// The query task's own row, when the cache has it.
    task_id: Option<i64>,
}

impl<'a> Lookup<'a> {
    /// Resolves the query's toolchain, target and task in the cache; `None` when no record
    /// can match (the target is unknown, or the toolchain is and the query stays within it).
    fn resolve(
        conn: &'a Db,
        path: &'a Path,
        ranking: &'a RankingConfig,
        query: &'a Query<'a>,
    ) -> Result<Option<Lookup<'a>>> {
        let toolchain = toolchain_id(conn, path, query.toolchain)?;
        if toolchain.is_none() && !query.any_toolchain {
            return Ok(None);
        }
        let Some(target_id) = resolve_target(conn, path, query.target, toolchain)? else {
            return Ok(None);
        };
        let task_id = conn
            .opt(
                "SELECT id FROM tasks WHERE exact_key = ?1",
                args![query.keys.exact.to_string()],
                |r| r.get(0),
            )
            .at(path)?;
        Ok(Some(Lookup {
            conn,
            path,
            ranking,
            query,
            target_id,
            toolchain_id: if query.any_toolchain { None } else { toolchain },
            task_id,
        }))
    }

    /// The hits of one tier, best first, before traces found by earlier tiers are removed.
    fn tier(&self, tier: Tier) -> Result<Vec<Hit>> {
        match tier {
            Tier::Exact => self.exact(),
            Tier::TvmHash => self.tvm_hash(),
            Tier::Structural => self.structural(),
            Tier::Family => self.family(),
        }
    }

    /// Tier 1: the records of the query's own task, fastest first.
    fn exact(&self) -> Result<Vec<Hit>> {
        match self.task_id {
            Some(id) => Ok(same_workload(Tier::Exact, self.records_of(id)?)),
            None => Ok(Vec::new()),
        }
    }

    /// Tier 2: the records of the other tasks with the query's TVM hash, fastest first.
    fn tvm_hash(&self) -> Result<Vec<Hit>> {
        let Some(hash) = self.query.tvm_hash else {
            return Ok(Vec::new());
        };
        let ids: Vec<i64> = self
            .conn
            .rows(
                "SELECT id FROM tasks WHERE tvm_hash = ?1 AND id IS DISTINCT FROM ?2",
                args![hash.to_string(), self.task_id],
                |r| r.get(0),
            )
            .at(self.path)?;
        let mut records = Vec::new();
        for id in ids {
            records.extend(self.records_of(id)?);
        }
        records.sort_by(|a, b| {
            a.mean_latency
                .total_cmp(&b.mean_latency)
                .then(a.record_id.cmp(&b.record_id))
        });
        Ok(same_workload(Tier::TvmHash, records))
    }

    /// Tier 3: the traces of the tasks with the query's structural key and another exact
    /// key, ranked by feature distance and averaged rank.
    fn structural(&self) -> Result<Vec<Hit>> {
        let q = self.query;
        let neighbours = self.nearest_neighbours(
            Tier::Structural,
            &q.keys.structural.to_string(),
            &q.keys.exact.to_string(),
            |f| {
                q.features
                    .distance(f)
                    .unwrap_or_else(|| size_distance(q.features, f))
            },
        )?;
        self.rank_neighbour_traces(Tier::Structural, neighbours)
    }

    /// Tier 4: the traces of the tasks with the query's family key and another structural
    /// key, ranked by size distance and averaged rank.
    fn family(&self) -> Result<Vec<Hit>> {
        let q = self.query;
        let neighbours = self.nearest_neighbours(
            Tier::Family,
            &q.keys.family.to_string(),
            &q.keys.structural.to_string(),
            |f| size_distance(q.features, f),
        )?;
        self.rank_neighbour_traces(Tier::Family, neighbours)
    }

    /// The `max_neighbours` tasks of the group `group_key` (without `exclude_key`) nearest
    /// to the query, of the first `max_scanned` that have records here; nearest first.
    fn nearest_neighbours(
        &self,
        tier: Tier,
        group_key: &str,
        exclude_key: &str,
        distance: impl Fn(&Features) -> f64,
    ) -> Result<Vec<Neighbour>> {
        let max_scanned = self.ranking.max_scanned;
        let neighbour = |r: &Row| {
            let features = features_from_json(&r.get::<String>(1)?);
            Ok(Neighbour {
                task_id: r.get(0)?,
                distance: features.map_or(f64::INFINITY, |f| distance(&f)),
            })
        };
        let sql = neighbour_sql(tier, self.toolchain_id.is_some());
        let mut neighbours: Vec<Neighbour> = match self.toolchain_id {
            Some(tc) => self.conn.rows_at_most(
                sql,
                args![group_key, exclude_key, self.target_id, tc],
                max_scanned,
                neighbour,
            ),
            None => self.conn.rows_at_most(
                sql,
                args![group_key, exclude_key, self.target_id],
                max_scanned,
                neighbour,
            ),
        }
        .at(self.path)?;
        neighbours.sort_by(|a, b| {
            a.distance
                .total_cmp(&b.distance)
                .then(a.task_id.cmp(&b.task_id))
        });
        neighbours.truncate(self.ranking.max_neighbours);
        Ok(neighbours)
    }

    /// The traces measured on `neighbours`, scored by the formula of the module docs and
    /// sorted by score (ties: faster mean latency, then trace).
    fn rank_neighbour_traces(&self, tier: Tier, neighbours: Vec<Neighbour>) -> Result<Vec<Hit>> {
        let mut per_trace: IdMap<i64, NeighbourTrace> = IdMap::default();
        for neighbour in neighbours {
            let records = self.records_of(neighbour.task_id)?;
            let n = records.len();
            let mut ranked_here: IdSet<i64> = IdSet::default();
            for (i, r) in records.into_iter().enumerate() {
                // Across toolchains a trace may appear twice in one task: rank it once.
                if self.toolchain_id.is_none() && !ranked_here.insert(r.trace_id) {
                    continue;
                }
                let t = per_trace.entry(r.trace_id).or_insert(NeighbourTrace {
                    distance: neighbour.distance,
                    record_id: r.record_id,
                    mean_latency: r.mean_latency,
                    rank_sum: 0.0,
                    tasks: 0,
                });
                if neighbour.distance < t.distance {
                    t.distance = neighbour.distance;
                    t.record_id = r.record_id;
                    t.mean_latency = r.mean_latency;
                }
                t.rank_sum += normalised_rank(i, n);
                t.tasks += 1;
            }
        }
        let lambda = self.ranking.rank_weight;
        let mut hits: Vec<Hit> = per_trace
            .into_iter()
            .map(|(trace_id, t)| {
                let rank_bias = t.rank_sum / t.tasks as f64;
                Hit {
                    tier,
                    record_id: t.record_id,
                    trace_id,
                    mean_latency: t.mean_latency,
                    distance: t.distance,
                    rank_bias,
                    score: t.distance + lambda * rank_bias,
                }
            })
            .collect();
        hits.sort_by(|a, b| {
            a.score
                .total_cmp(&b.score)
                .then(a.mean_latency.total_cmp(&b.mean_latency))
                .then(a.trace_id.cmp(&b.trace_id))
        });
        Ok(hits)
    }

    /// The records of one task on the target (and toolchain), fastest first.
    fn records_of(&self, task_id: i64) -> Result<Vec<TaskRecord>> {
        let record = |r: &Row| {
            Ok(TaskRecord {
                record_id: r.get(0)?,
                trace_id: r.get(1)?,
                mean_latency: r.get(2)?,
            })
        };
        match self.toolchain_id {
            Some(tc) => self.conn.rows(
                "SELECT id, trace_id, mean_latency FROM records
                     WHERE task_id = ?1 AND target_id = ?2 AND toolchain_id = ?3 ORDER BY mean_latency, trace_id",
                args![task_id, self.target_id, tc],
                record,
            ),
            None => self.conn.rows(
                "SELECT id, trace_id, mean_latency FROM records
                     WHERE task_id = ?1 AND target_id = ?2 ORDER BY mean_latency, trace_id",
                args![task_id, self.target_id],
                record,
            ),
        }
        .at(self.path)
    }
}

/// Reads of stored records, shared by lookups and seeds by digest.
struct Rows<'a> {
    conn: &'a Db,
    path: &'a Path,
}

impl Rows<'_> {
    /// The candidates of `hits`, in order. Source tasks and toolchains repeat across
    /// candidates: each is read once.
    fn candidates(&self, hits: Vec<Hit>) -> Result<Vec<Candidate>> {
        let mut sources: IdMap<i64, SourceKeys> = IdMap::default();
        let mut toolchains: IdMap<i64, Toolchain> = IdMap::default();
        let mut out = Vec::with_capacity(hits.len());
        for hit in hits {
            let record = self.stored_record(hit.record_id)?;
            let effort = match record.trials {
                Some(own) => u32::try_from(own.max(self.task_effort(&record)?)).ok(),
                None => None,
            };
            if let Entry::Vacant(slot) = sources.entry(record.task_id) {
                slot.insert(self.source_keys(record.task_id)?);
            }
            if let Entry::Vacant(slot) = toolchains.entry(record.toolchain_id) {
                slot.insert(self.toolchain(record.toolchain_id)?);
            }
            let keys = sources[&record.task_id];
            let digest = trace_digest(&record.digest).unwrap_or(TraceDigest([0; 32]));
            out.push(Candidate {
                tier: hit.tier,
                trace: Trace::from_stored(record.trace_json, digest),
                mean_latency: record.mean_latency,
                num_samples: record.num_samples as usize,
                trials: effort,
                distance: hit.distance,
                rank_bias: hit.rank_bias,
                score: hit.score,
                source: SourceTask {
                    exact_key: keys.exact_key,
                    tvm_hash: keys.tvm_hash,
                    model: record.model,
                    task_name: record.task_name,
                    flops: keys.flops,
                },
                toolchain: toolchains[&record.toolchain_id].clone(),
                origin: record.origin,
            });
        }
        Ok(out)
    }

    fn stored_record(&self, record_id: i64) -> Result<StoredRecord> {
        self.conn
            .one(
                "SELECT r.task_id, r.toolchain_id, r.mean_latency, r.num_samples, r.model, r.task_name,
                            tr.trace_json, tr.digest, r.trials, r.source, r.target_id
                     FROM records r JOIN traces tr ON tr.id = r.trace_id WHERE r.id = ?1",
                args![record_id],
                |r| {
                    Ok(StoredRecord {
                        task_id: r.get(0)?,
                        toolchain_id: r.get(1)?,
                        mean_latency: r.get(2)?,
                        num_samples: r.get(3)?,
                        model: r.get(4)?,
                        task_name: r.get(5)?,
                        trace_json: r.get(6)?,
                        digest: r.get(7)?,
                        trials: r.get(8)?,
                        origin: r.get(9)?,
                        target_id: r.get(10)?,
                    })
                },
            )
            .at(self.path)
    }

    /// The most trials any run spent on `record`'s task for its target and toolchain
    /// (0 when none is known).
    fn task_effort(&self, record: &StoredRecord) -> Result<i64> {
        self.conn
            .one(
                "SELECT coalesce(max(trials), 0) FROM records
                     WHERE task_id = ?1 AND target_id = ?2 AND toolchain_id = ?3",
                args![record.task_id, record.target_id, record.toolchain_id],
                |r| r.get(0),
            )
            .at(self.path)
    }

    /// The keys of a task row; a key that does not parse (a cache from an older key
    /// encoding) is unknown.
    fn source_keys(&self, task_id: i64) -> Result<SourceKeys> {
        self.conn
            .one(
                "SELECT exact_key, tvm_hash, features_json FROM tasks WHERE id = ?1",
                args![task_id],
                |r| {
                    let exact: Option<String> = r.get(0)?;
                    let hash: Option<String> = r.get(1)?;
                    let features: Option<String> = r.get(2)?;
                    Ok(SourceKeys {
                        exact_key: exact.and_then(|k| k.parse().ok()),
                        tvm_hash: hash.and_then(|h| h.parse().ok()),
                        flops: features
                            .as_deref()
                            .and_then(features_from_json)
                            .map(|f| f.flops)
                            .filter(|f| *f > 0.0),
                    })
                },
            )
            .at(self.path)
    }

    fn toolchain(&self, toolchain_id: i64) -> Result<Toolchain> {
        self.conn
            .one(
                "SELECT tvm_version, tvm_ffi_version, llvm_version FROM toolchains WHERE id = ?1",
                args![toolchain_id],
                |r| toolchain_columns(r, 0),
            )
            .at(self.path)
    }
}

impl Cache {
    /// The candidates for a task: exact hits, then structural neighbours, then family hits
    /// (see the module docs for the ranking). At most `limit`.
    pub fn candidates(
        &self,
        keys: &TaskKeys,
        features: &Features,
        target: &Target,
        toolchain: &Toolchain,
        limit: usize,
    ) -> Result<Vec<Candidate>> {
        self.lookup(&Query::new(keys, features, target, toolchain, limit))
    }

    /// The TVM workload (IRModule JSON as `tvm.ir.save_json` writes it) of the task a
    /// candidate was measured on, when the cache has it. Seeds from other tasks replay
    /// better with it: the worker then knows the shapes and blocks the trace was made for
    /// (tile repair, anchor transfer). Kept out of [`Cache::lookup`], which stays cheap; the
    /// caller asks only for the seeds it sends.
    pub fn source_workload(&self, source: &SourceTask) -> Result<Option<String>> {
        let path = &self.path;
        let row = match (&source.exact_key, source.tvm_hash) {
            (Some(k), _) => self.conn.opt(
                "SELECT workload_json FROM tasks WHERE exact_key = ?1",
                args![k.to_string()],
                |r| r.get::<Option<String>>(0),
            ),
            (None, Some(h)) => self.conn.opt(
                "SELECT workload_json FROM tasks WHERE tvm_hash = ?1 AND exact_key IS NULL",
                args![h.to_string()],
                |r| r.get::<Option<String>>(0),
            ),
            (None, None) => return Ok(None),
        };
        Ok(row.at(path)?.flatten().filter(|j| !j.is_empty()))
    }

    /// The trace with this digest (hex, as `tgc.candidates` and `tgc.seed_plan` write it) as
    /// a candidate of `tier`: its record of the task `own` (the task being seeded) when it
    /// has one, else its best record, for `target` and `toolchain`, with the task it was
    /// measured on. A trace two tasks share has a latency per task: an exact hit is judged
    /// against its own task's. `None` when no such record exists (a digest edited into a
    /// plan by hand that the cache does not hold, or holds only for another target).
    pub fn seed_by_digest(
        &self,
        digest: &str,
        own: Option<&TaskKey>,
        tier: Tier,
        target: &Target,
        toolchain: &Toolchain,
    ) -> Result<Option<Candidate>> {
        let Some(bytes) = tgc_canonicalize::keys::hex_bytes::<32>(digest) else {
            return Err(crate::error::CacheError::invalid(
                "trace digest",
                format!("'{digest}' is not 64 hex digits"),
            ));
        };
        let tx = self.conn.begin_read().at(&self.path)?;
        let Some(tc) = toolchain_id(&tx, &self.path, toolchain)? else {
            return Ok(None);
        };
        let Some(target_id) = resolve_target(&tx, &self.path, target, Some(tc))? else {
            return Ok(None);
        };
        let best: Option<(i64, i64, f64)> = tx
            .opt(
                "SELECT r.id, r.trace_id, r.mean_latency FROM records r JOIN traces tr ON tr.id = r.trace_id
                  JOIN tasks t ON t.id = r.task_id
                  WHERE tr.digest = ?1 AND r.target_id = ?2 AND r.toolchain_id = ?3
                  ORDER BY CASE WHEN t.exact_key = ?4 THEN 0 ELSE 1 END, r.mean_latency, r.id LIMIT 1",
                args![bytes.to_vec(), target_id, tc, own.map(|k| k.to_string())],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .at(&self.path)?;
        let Some((record_id, trace_id, mean_latency)) = best else {
            return Ok(None);
        };
        let hit = Hit {
            tier,
            record_id,
            trace_id,
            mean_latency,
            distance: 0.0,
            rank_bias: 0.0,
            score: mean_latency,
        };
        let rows = Rows {
            conn: &tx,
            path: &self.path,
        };
        Ok(rows.candidates(vec![hit])?.pop())
    }

    /// The candidates for a full query (TVM hash tier, across toolchains): the tiers in
    /// order until `limit` traces are found, then the records of the first `limit` read.
    pub fn lookup(&self, q: &Query) -> Result<Vec<Candidate>> {
        if q.limit == 0 {
            return Ok(Vec::new());
        }
        // One read transaction: a consistent snapshot while other processes write.
        let tx = self.conn.begin_read().at(&self.path)?;
        let Some(lookup) = Lookup::resolve(&tx, &self.path, &self.config.ranking, q)? else {
            return Ok(Vec::new());
        };
        let mut found = Found::default();
        for tier in TIER_ORDER {
            if found.hits.len() >= q.limit {
                break;
            }
            found.add(lookup.tier(tier)?);
        }
        found.hits.truncate(q.limit);
        Rows {
            conn: &tx,
            path: &self.path,
        }
        .candidates(found.hits)
    }
}
