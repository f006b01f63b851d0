//! Copying records between two caches (`tgc cache push` / `pull`): a file to a server and
//! back, or any two of either.
//!
//! The copy reads the source in one read transaction and writes the destination in one
//! write transaction, through the same writer as [`Cache::put`]: a trace the destination
//! already holds keeps the newer measurement (by each record's time; at the same time the
//! faster one), each group keeps its best k (the
//! destination's k), and a second copy of the same records changes nothing. Tasks keep
//! their stored keys (of any encoding), features and TVM workload; imported MetaSchedule
//! workloads, target spellings and each record's provenance (model, task, trials, source,
//! time) and `args_info` come along.

use crate::db::Db;
use crate::error::{CacheError, Result, SqliteContext};
use crate::model::{Target, Toolchain, Workload};
use crate::rows::{record_columns, toolchain_columns, RecordRow};
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
        let records: Vec<RecordRow> = src
            .rows(
                concat!(
                    "SELECT ",
                    record_columns!(),
                    " FROM records r JOIN traces tr ON tr.id = r.trace_id ORDER BY r.id"
                ),
                &[],
                RecordRow::read,
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
                let missing = |what: &str| {
                    corrupt(
                        &src_path,
                        format!("a record of task {} has no {what}", r.task_id),
                    )
                };
                let group = Group {
                    task_id: *task_ids.get(&r.task_id).ok_or_else(|| missing("task"))?,
                    target_id: *target_ids
                        .get(&r.target_id)
                        .ok_or_else(|| missing("target"))?,
                    toolchain_id: *toolchain_ids
                        .get(&r.toolchain_id)
                        .ok_or_else(|| missing("toolchain"))?,
                };
                let record = r.into_new_record(&src_path)?;
                w.record(group, &record, &mut summary.stored)?;
            }
        }
        tx.commit().at(&dest_path)?;
        Ok(summary)
    }
}
