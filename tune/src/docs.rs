//! The JSON documents of the front ends: `tgc tasks --json` (`tgc.tasks/1`), `tgc similarity
//! --json` (`tgc.similarity/1`), `tgc cache stats --json` (`tgc.cache-stats/1`) and a cache
//! lookup (`tgc.cache-lookup/1`), so the Python package returns what the CLI prints.
//! python/tests/test_api.py checks the two against each other on the same input.

use serde_json::{json, Value};
use tgc_cache::{Candidate, Stats};
use tgc_canonicalize::similarity::{NeighbourDistances, Quantiles, Study};
use tgc_canonicalize::Task;
use tgc_ir::TensorType;

fn type_json(t: &TensorType) -> Value {
    json!({ "shape": t.shape.as_slice(), "dtype": t.dtype.tvm_name() })
}

fn task_json(t: &Task) -> Value {
    json!({
        "name": t.name,
        "ops": t.ops,
        "exact_key": t.keys.exact.to_string(),
        "structural_key": t.keys.structural.to_string(),
        "family_key": t.keys.family.to_string(),
        "occurrences": t.occurrences,
        "flops": t.features.flops,
        "bytes": t.features.bytes,
        "params": t.param_types.iter().map(type_json).collect::<Vec<_>>(),
        "results": t.result_types.iter().map(type_json).collect::<Vec<_>>(),
    })
}

/// Schema `tgc.tasks/1`.
pub fn tasks(model: &str, tasks: &[Task]) -> Value {
    json!({
        "schema": "tgc.tasks/1",
        "model": model,
        "num_tasks": tasks.len(),
        "num_occurrences": tasks.iter().map(|t| t.occurrences).sum::<usize>(),
        "tasks": tasks.iter().map(task_json).collect::<Vec<_>>(),
    })
}

fn quantiles_json(q: Option<Quantiles>) -> Value {
    match q {
        Some(q) => json!({
            "min": q.min, "p25": q.p25, "median": q.median,
            "p75": q.p75, "p90": q.p90, "max": q.max,
        }),
        None => Value::Null,
    }
}

fn neighbours_json(n: &NeighbourDistances) -> Value {
    json!({
        "scope": n.scope,
        "tasks": n.tasks,
        "structural_groups": n.groups,
        "with_neighbour": n.distances.len(),
        "quantiles": quantiles_json(n.quantiles()),
    })
}

/// Schema `tgc.similarity/1`; `sources`: per model, what the caller named it by and where it
/// came from (`file`, `zoo` or `relax`).
pub fn similarity(study: &Study, sources: &[(String, String)]) -> Value {
    let census: Vec<Value> = study
        .models
        .iter()
        .zip(&study.census)
        .map(|(name, census)| {
            let mut entry = json!({ "model": name, "occurrences": census[0].occurrences });
            for c in census {
                entry[c.level.name()] =
                    json!({ "distinct": c.distinct, "repetition": c.repetition() });
            }
            entry
        })
        .collect();
    json!({
        "schema": "tgc.similarity/1",
        "level": study.level.name(),
        "models": study.models.iter().zip(sources).map(|(name, (source, from))| {
            json!({ "name": name, "source": source, "from": from })
        }).collect::<Vec<_>>(),
        "census": census,
        "coverage": {
            "level": study.coverage.level.name(),
            "models": study.coverage.models,
            "matrix": study.coverage.matrix,
            "by_others": study.coverage.by_others,
        },
        "neighbours": study.neighbours.iter().chain([&study.pooled])
            .map(neighbours_json).collect::<Vec<_>>(),
    })
}

/// Schema `tgc.cache-stats/1`.
pub fn cache_stats(s: &Stats) -> Value {
    json!({
        "schema": "tgc.cache-stats/1",
        "path": s.path,
        "schema_version": s.schema_version,
        "best_k": s.best_k,
        "tasks": s.tasks,
        "imported_workloads": s.imported_workloads,
        "linked_workloads": s.linked_workloads,
        "traces": s.traces,
        "records": s.records,
        "file_bytes": s.file_bytes,
        "targets": s.targets.iter().map(|(kind, config, records)| json!({"kind": kind, "config": config, "records": records})).collect::<Vec<_>>(),
        "toolchains": s.toolchains.iter().map(|(t, records)| json!({"tvm": t.tvm, "tvm_ffi": t.tvm_ffi, "llvm": t.llvm, "records": records})).collect::<Vec<_>>(),
    })
}

/// One task's lookup result (an entry of `tgc.cache-lookup/1`'s `tasks`): the ranked
/// candidates, best first.
pub fn lookup(t: &Task, found: &[Candidate]) -> Value {
    json!({
        "name": t.name,
        "exact_key": t.keys.exact.to_string(),
        "candidates": found.iter().map(|c| json!({
            "tier": c.tier.as_str(),
            "mean_latency": c.mean_latency,
            "num_samples": c.num_samples,
            "trials": c.trials,
            "distance": c.distance,
            "score": c.score,
            "origin": c.origin,
            "toolchain": c.toolchain.to_string(),
            "source": {
                "exact_key": c.source.exact_key.as_ref().map(|k| k.to_string()),
                "tvm_hash": c.source.tvm_hash.map(|h| h.to_string()),
                "model": c.source.model,
                "task": c.source.task_name,
            },
            "trace": serde_json::from_str::<Value>(c.trace.json()).unwrap_or(Value::Null),
        })).collect::<Vec<_>>(),
    })
}
