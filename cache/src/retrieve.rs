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

use crate::error::{Result, SqliteContext};
use crate::model::{features_from_json, Target, Toolchain, Trace, TraceDigest};
use crate::rows::{resolve_target, toolchain_columns, toolchain_id, trace_digest};
use crate::store::Cache;
use rusqlite::{params, OptionalExtension};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use tgc_canonicalize::{Features, TaskKey, TaskKeys};

/// How a candidate was found, best tier first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Exact,
    TvmHash,
    Structural,
    Family,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Exact => "exact",
            Tier::TvmHash => "tvm-hash",
            Tier::Structural => "structural",
            Tier::Family => "family",
        }
    }
}

/// The task a candidate's record was measured on.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceTask {
    /// Its tgc exact key; `None` for a workload imported from a MetaSchedule database.
    pub exact_key: Option<TaskKey>,
    /// Its TVM structural hash, when known.
    pub tvm_hash: Option<u64>,
    pub model: Option<String>,
    pub task_name: Option<String>,
}

/// One ranked trace to try.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub tier: Tier,
    pub trace: Trace,
    /// Mean measured latency (seconds) of the trace on the source task.
    pub mean_latency: f64,
    pub num_samples: usize,
    /// The search effort behind the record: trials measured on its task, by the run that
    /// wrote it and the runs it resumed (provenance; `None` for MetaSchedule imports).
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

/// A ranked record before its trace text is read.
struct Hit {
    tier: Tier,
    record_id: i64,
    distance: f64,
    rank_bias: f64,
    score: f64,
}

/// A record row of one task, as ranking needs it.
struct Row {
    record_id: i64,
    trace_id: i64,
    mean: f64,
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
            (Some(k), _) => self
                .conn
                .prepare_cached("SELECT workload_json FROM tasks WHERE exact_key = ?1")
                .and_then(|mut s| {
                    s.query_row([k.to_string()], |r| r.get::<_, Option<String>>(0))
                        .optional()
                }),
            (None, Some(h)) => self
                .conn
                .prepare_cached(
                    "SELECT workload_json FROM tasks WHERE tvm_hash = ?1 AND exact_key IS NULL",
                )
                .and_then(|mut s| {
                    s.query_row([h.to_string()], |r| r.get::<_, Option<String>>(0))
                        .optional()
                }),
            (None, None) => return Ok(None),
        };
        Ok(row.at(path)?.flatten().filter(|j| !j.is_empty()))
    }

    /// The candidates for a full query (TVM hash tier, across toolchains).
    pub fn lookup(&self, q: &Query) -> Result<Vec<Candidate>> {
        let path = &self.path;
        if q.limit == 0 {
            return Ok(Vec::new());
        }
        // One read transaction: a consistent snapshot while other processes write.
        let tx = self.conn.unchecked_transaction().at(path)?;
        let toolchain_id = toolchain_id(&tx, path, q.toolchain)?;
        if toolchain_id.is_none() && !q.any_toolchain {
            return Ok(Vec::new());
        }
        let Some(target_id) = resolve_target(&tx, path, q.target, toolchain_id)? else {
            return Ok(Vec::new());
        };
        let toolchain_filter = if q.any_toolchain { None } else { toolchain_id };

        let rows_of = |task_id: i64| -> Result<Vec<Row>> {
            let map = |r: &rusqlite::Row| {
                Ok(Row {
                    record_id: r.get(0)?,
                    trace_id: r.get(1)?,
                    mean: r.get(2)?,
                })
            };
            match toolchain_filter {
                Some(tc) => tx
                    .prepare_cached(
                        "SELECT id, trace_id, mean_latency FROM records
                         WHERE task_id = ?1 AND target_id = ?2 AND toolchain_id = ?3 ORDER BY mean_latency, trace_id",
                    )
                    .and_then(|mut s| s.query_map(params![task_id, target_id, tc], map)?.collect())
                    .at(path),
                None => tx
                    .prepare_cached(
                        "SELECT id, trace_id, mean_latency FROM records
                         WHERE task_id = ?1 AND target_id = ?2 ORDER BY mean_latency, trace_id",
                    )
                    .and_then(|mut s| s.query_map(params![task_id, target_id], map)?.collect())
                    .at(path),
            }
        };

        let mut hits: Vec<Hit> = Vec::new();
        let mut seen: IdSet<i64> = IdSet::default();
        let exact_key = q.keys.exact.to_string();
        let exact_id: Option<i64> = tx
            .prepare_cached("SELECT id FROM tasks WHERE exact_key = ?1")
            .and_then(|mut s| s.query_row([&exact_key], |r| r.get(0)).optional())
            .at(path)?;

        // Tier 1 and 2: the same workload; fastest first.
        let mut same_workload = |tier: Tier, rows: Vec<Row>, hits: &mut Vec<Hit>| {
            let n = rows.len();
            for (i, row) in rows.into_iter().enumerate() {
                if seen.insert(row.trace_id) {
                    let rank_bias = if n > 1 {
                        i as f64 / (n - 1) as f64
                    } else {
                        0.0
                    };
                    hits.push(Hit {
                        tier,
                        record_id: row.record_id,
                        distance: 0.0,
                        rank_bias,
                        score: row.mean,
                    });
                }
            }
        };
        if let Some(id) = exact_id {
            same_workload(Tier::Exact, rows_of(id)?, &mut hits);
        }
        if let (Some(hash), true) = (q.tvm_hash, hits.len() < q.limit) {
            let ids: Vec<i64> = tx
                .prepare_cached("SELECT id FROM tasks WHERE tvm_hash = ?1 AND id IS NOT ?2")
                .and_then(|mut s| {
                    s.query_map(params![hash.to_string(), exact_id], |r| r.get(0))?
                        .collect()
                })
                .at(path)?;
            let mut rows = Vec::new();
            for id in ids {
                rows.extend(rows_of(id)?);
            }
            rows.sort_by(|a, b| {
                a.mean
                    .total_cmp(&b.mean)
                    .then(a.record_id.cmp(&b.record_id))
            });
            same_workload(Tier::TvmHash, rows, &mut hits);
        }

        // Tiers 3 and 4: neighbours, ranked by distance and averaged rank.
        for tier in [Tier::Structural, Tier::Family] {
            if hits.len() >= q.limit {
                break;
            }
            let (group_key, exclude_key) = match tier {
                Tier::Structural => (q.keys.structural.to_string(), exact_key.clone()),
                _ => (q.keys.family.to_string(), q.keys.structural.to_string()),
            };
            let max_scanned = self.config.ranking.max_scanned;
            let map = |r: &rusqlite::Row| Ok((r.get(0)?, r.get(1)?));
            let scanned: Vec<(i64, String)> = tx
                .prepare_cached(neighbour_sql(tier, toolchain_filter.is_some()))
                .and_then(|mut s| match toolchain_filter {
                    Some(tc) => s
                        .query_map(params![group_key, exclude_key, target_id, tc], map)?
                        .take(max_scanned)
                        .collect(),
                    None => s
                        .query_map(params![group_key, exclude_key, target_id], map)?
                        .take(max_scanned)
                        .collect(),
                })
                .at(path)?;
            let mut neighbours: Vec<(f64, i64)> = scanned
                .into_iter()
                .map(|(id, fj)| {
                    let d = match features_from_json(&fj) {
                        Some(f) => match tier {
                            Tier::Structural => q
                                .features
                                .distance(&f)
                                .unwrap_or_else(|| size_distance(q.features, &f)),
                            _ => size_distance(q.features, &f),
                        },
                        None => f64::INFINITY,
                    };
                    (d, id)
                })
                .collect();
            neighbours.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            neighbours.truncate(self.config.ranking.max_neighbours);

            // Per trace: (nearest distance, its record there, sum of normalised ranks, tasks).
            let mut per_trace: IdMap<i64, (f64, i64, f64, f64, u32)> = IdMap::default();
            for (d, task_id) in neighbours {
                let rows = rows_of(task_id)?;
                let n = rows.len();
                let mut ranked_here: IdSet<i64> = IdSet::default();
                for (i, row) in rows.into_iter().enumerate() {
                    // Across toolchains a trace may appear twice in one task: rank it once.
                    if toolchain_filter.is_none() && !ranked_here.insert(row.trace_id) {
                        continue;
                    }
                    let rho = if n > 1 {
                        i as f64 / (n - 1) as f64
                    } else {
                        0.0
                    };
                    let e = per_trace.entry(row.trace_id).or_insert((
                        d,
                        row.record_id,
                        0.0,
                        row.mean,
                        0,
                    ));
                    if d < e.0 {
                        e.0 = d;
                        e.1 = row.record_id;
                        e.3 = row.mean;
                    }
                    e.2 += rho;
                    e.4 += 1;
                }
            }
            let lambda = self.config.ranking.rank_weight;
            let mut ranked: Vec<(f64, f64, i64, Hit)> = per_trace
                .into_iter()
                .filter(|(trace_id, _)| !seen.contains(trace_id))
                .map(|(trace_id, (d, record_id, rho_sum, mean, count))| {
                    let rank_bias = rho_sum / count as f64;
                    let score = d + lambda * rank_bias;
                    (
                        mean,
                        score,
                        trace_id,
                        Hit {
                            tier,
                            record_id,
                            distance: d,
                            rank_bias,
                            score,
                        },
                    )
                })
                .collect();
            ranked.sort_by(|a, b| {
                a.1.total_cmp(&b.1)
                    .then(a.0.total_cmp(&b.0))
                    .then(a.2.cmp(&b.2))
            });
            for (_, _, trace_id, hit) in ranked {
                seen.insert(trace_id);
                hits.push(hit);
            }
        }

        hits.truncate(q.limit);
        // Source tasks and toolchains repeat across candidates: read each once.
        let mut sources: IdMap<i64, (Option<TaskKey>, Option<u64>)> = IdMap::default();
        let mut toolchains: IdMap<i64, Toolchain> = IdMap::default();
        let mut out = Vec::with_capacity(hits.len());
        for hit in hits {
            let (task_id, toolchain_id, mean, n, model, task_name, trace_json, digest, trials, origin) = tx
                .prepare_cached(
                    "SELECT r.task_id, r.toolchain_id, r.mean_latency, r.num_samples, r.model, r.task_name,
                            tr.trace_json, tr.digest, r.trials, r.source
                     FROM records r JOIN traces tr ON tr.id = r.trace_id WHERE r.id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([hit.record_id], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, f64>(2)?,
                            r.get::<_, i64>(3)?,
                            r.get::<_, Option<String>>(4)?,
                            r.get::<_, Option<String>>(5)?,
                            r.get::<_, String>(6)?,
                            r.get::<_, Vec<u8>>(7)?,
                            r.get::<_, Option<i64>>(8)?,
                            r.get::<_, String>(9)?,
                        ))
                    })
                })
                .at(path)?;
            if let Entry::Vacant(slot) = sources.entry(task_id) {
                let source = tx
                    .prepare_cached("SELECT exact_key, tvm_hash FROM tasks WHERE id = ?1")
                    .and_then(|mut s| {
                        s.query_row([task_id], |r| {
                            let exact: Option<String> = r.get(0)?;
                            let hash: Option<String> = r.get(1)?;
                            Ok((
                                exact.and_then(|k| k.parse().ok()),
                                hash.and_then(|h| h.parse().ok()),
                            ))
                        })
                    })
                    .at(path)?;
                slot.insert(source);
            }
            if let Entry::Vacant(slot) = toolchains.entry(toolchain_id) {
                let toolchain = tx
                    .prepare_cached(
                        "SELECT tvm_version, tvm_ffi_version, llvm_version FROM toolchains WHERE id = ?1",
                    )
                    .and_then(|mut s| {
                        s.query_row([toolchain_id], |r| toolchain_columns(r, 0))
                    })
                    .at(path)?;
                slot.insert(toolchain);
            }
            let (exact_key, tvm_hash) = sources[&task_id];
            let digest = trace_digest(&digest).unwrap_or(TraceDigest([0; 32]));
            out.push(Candidate {
                tier: hit.tier,
                trace: Trace::from_stored(trace_json, digest),
                mean_latency: mean,
                num_samples: n as usize,
                trials: trials.and_then(|t| u32::try_from(t).ok()),
                distance: hit.distance,
                rank_bias: hit.rank_bias,
                score: hit.score,
                source: SourceTask {
                    exact_key,
                    tvm_hash,
                    model,
                    task_name,
                },
                toolchain: toolchains[&toolchain_id].clone(),
                origin,
            });
        }
        Ok(out)
    }
}
