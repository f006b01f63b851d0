//! Copying records between two caches (`tgc cache push` / `pull`): a file to a server and
//! back, or any two of either.
//!
//! The copy reads the source in one read transaction and writes the destination in one
//! write transaction, through the same writer as [`Cache::put`]: a trace the destination
//! already holds keeps the faster measurement, each group keeps its best k (the
//! destination's k), and a second copy of the same records changes nothing. Tasks keep
//! their stored keys (of any encoding), features and TVM workload; imported MetaSchedule
//! workloads, target spellings and each record's provenance (model, task, trials, source,
//! time) and `args_info` come along.

use crate::db::Db;
use crate::error::{CacheError, Result, SqliteContext};
use crate::model::{Provenance, Target, Toolchain, Trace, Workload};
use crate::rows::{toolchain_columns, trace_digest};
use crate::store::{Cache, Group, PutSummary, TaskRow, Writer};
use std::collections::HashMap;
use std::path::Path;

/// What a copy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopySummary {
    /// Records read from the source.
    pub records: usize,
    /// Tasks (and imported workloads) they belong to.
    pub tasks: usize,
    /// Target spellings copied.
    pub spellings: usize,
    /// What the destination's writer did with the records.
    pub stored: PutSummary,
}

/// One record as the source stores it.
struct SourceRecord {
    task_id: i64,
    target_id: i64,
    toolchain_id: i64,
    digest: Vec<u8>,
    trace_json: String,
    latencies_json: String,
    args_info_json: Option<String>,
    provenance: Provenance,
}

/// A source task: a tgc task, or an imported workload (no keys).
enum SourceTask {
    Tgc(TaskRow),
    Imported(Workload),
}

fn corrupt(path: &Path, detail: String) -> CacheError {
    CacheError::Corrupt {
        path: path.to_path_buf(),
        detail,
    }
}

fn read_tasks(db: &Db, path: &Path) -> Result<HashMap<i64, SourceTask>> {
    type Row = (
        i64,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let rows: Vec<Row> = db
        .rows(
            "SELECT id, exact_key, structural_key, family_key, features_json, tvm_hash, workload_json
             FROM tasks t WHERE EXISTS (SELECT 1 FROM records r WHERE r.task_id = t.id)",
            &[],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            },
        )
        .at(path)?;
    let mut out = HashMap::with_capacity(rows.len());
    for (id, exact, structural, family, features, hash, workload) in rows {
        let task = match (exact, structural, family, features) {
            (Some(exact_key), Some(structural_key), Some(family_key), Some(features_json)) => {
                SourceTask::Tgc(TaskRow {
                    exact_key,
                    structural_key,
                    family_key,
                    features_json,
                    tvm_hash: hash,
                    workload_json: workload,
                })
            }
            (None, None, None, None) => {
                let tvm_hash = hash
                    .as_deref()
                    .and_then(|h| h.parse::<u64>().ok())
                    .ok_or_else(|| {
                        corrupt(path, format!("imported workload {id} has no TVM hash"))
                    })?;
                let json = workload.ok_or_else(|| {
                    corrupt(path, format!("imported workload {id} has no workload"))
                })?;
                SourceTask::Imported(Workload { tvm_hash, json })
            }
            _ => {
                return Err(corrupt(
                    path,
                    format!("task {id} has only some of its keys"),
                ))
            }
        };
        out.insert(id, task);
    }
    Ok(out)
}

impl Cache {
    /// Copies every record of this cache into `dest` (see the module docs).
    pub fn copy_into(&self, dest: &mut Cache) -> Result<CopySummary> {
        let src_path = self.path.clone();
        let src = self.conn.begin_read().at(&src_path)?;
        let tasks = read_tasks(&src, &src_path)?;
        let targets: HashMap<i64, Target> = src
            .rows("SELECT id, canonical_json FROM targets", &[], |r| {
                Ok((r.get::<i64>(0)?, r.get::<String>(1)?))
            })
            .at(&src_path)?
            .into_iter()
            .map(|(id, json)| {
                Target::parse(&json)
                    .map(|t| (id, t))
                    .map_err(|e| corrupt(&src_path, format!("target {id}: {e}")))
            })
            .collect::<Result<_>>()?;
        let toolchains: HashMap<i64, Toolchain> = src
            .rows(
                "SELECT id, tvm_version, tvm_ffi_version, llvm_version FROM toolchains",
                &[],
                |r| Ok((r.get::<i64>(0)?, toolchain_columns(r, 1)?)),
            )
            .at(&src_path)?
            .into_iter()
            .collect();
        let spellings: Vec<(String, i64, i64)> = src
            .rows(
                "SELECT spelling, toolchain_id, target_id FROM target_spellings",
                &[],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .at(&src_path)?;
        let records: Vec<SourceRecord> = src
            .rows(
                "SELECT r.task_id, r.target_id, r.toolchain_id, tr.digest, tr.trace_json, r.latencies_json,
                        r.args_info_json, r.model, r.task_name, r.trials, r.source, r.created_at
                 FROM records r JOIN traces tr ON tr.id = r.trace_id ORDER BY r.id",
                &[],
                |r| {
                    Ok(SourceRecord {
                        task_id: r.get(0)?,
                        target_id: r.get(1)?,
                        toolchain_id: r.get(2)?,
                        digest: r.get(3)?,
                        trace_json: r.get(4)?,
                        latencies_json: r.get(5)?,
                        args_info_json: r.get(6)?,
                        provenance: Provenance {
                            model: r.get(7)?,
                            task_name: r.get(8)?,
                            trials: r
                                .get::<Option<i64>>(9)?
                                .and_then(|t| u32::try_from(t).ok()),
                            source: r.get(10)?,
                            created_at: Some(r.get(11)?),
                        },
                    })
                },
            )
            .at(&src_path)?;
        drop(src);

        let mut summary = CopySummary {
            records: records.len(),
            tasks: tasks.len(),
            ..CopySummary::default()
        };
        let dest_path = dest.path.clone();
        let tx = dest.write_tx()?;
        {
            let mut w = Writer::new(&tx, &dest_path)?;
            let mut task_ids: HashMap<i64, i64> = HashMap::new();
            let mut target_ids: HashMap<i64, i64> = HashMap::new();
            let mut toolchain_ids: HashMap<i64, i64> = HashMap::new();
            for (id, t) in &toolchains {
                toolchain_ids.insert(*id, w.toolchain(t)?);
            }
            for (id, t) in &targets {
                target_ids.insert(*id, w.target(t)?);
            }
            for (spelling, tc, target) in &spellings {
                if let (Some(&tc), Some(&target)) = (toolchain_ids.get(tc), target_ids.get(target))
                {
                    w.spelling(spelling, tc, target)?;
                    summary.spellings += 1;
                }
            }
            for (id, t) in &tasks {
                let dest_id = match t {
                    SourceTask::Tgc(row) => w.task_row(row)?,
                    SourceTask::Imported(wl) => w.imported_workload(wl)?,
                };
                task_ids.insert(*id, dest_id);
            }
            for r in records {
                let bad = |what: &str| {
                    corrupt(
                        &src_path,
                        format!("a record of task {} has {what}", r.task_id),
                    )
                };
                let group = Group {
                    task_id: *task_ids.get(&r.task_id).ok_or_else(|| bad("no task"))?,
                    target_id: *target_ids
                        .get(&r.target_id)
                        .ok_or_else(|| bad("no target"))?,
                    toolchain_id: *toolchain_ids
                        .get(&r.toolchain_id)
                        .ok_or_else(|| bad("no toolchain"))?,
                };
                let digest = trace_digest(&r.digest)
                    .ok_or_else(|| bad("a trace digest that is not 32 bytes"))?;
                // The destination dedupes by digest: never carry one that does not match.
                if crate::model::TraceDigest::of(&r.trace_json) != digest {
                    return Err(bad("a trace whose digest does not match its JSON"));
                }
                let latencies: Vec<f64> = serde_json::from_str(&r.latencies_json)
                    .map_err(|_| bad("latencies that are not a JSON list of numbers"))?;
                let args_info = match &r.args_info_json {
                    Some(text) => Some(
                        serde_json::from_str(text)
                            .map_err(|_| bad("args_info that is not JSON"))?,
                    ),
                    None => None,
                };
                let record = crate::model::NewRecord {
                    trace: Trace::from_stored(r.trace_json, digest),
                    latencies,
                    args_info,
                    provenance: r.provenance,
                };
                w.record(group, &record, &mut summary.stored)?;
            }
        }
        tx.commit().at(&dest_path)?;
        Ok(summary)
    }
}
