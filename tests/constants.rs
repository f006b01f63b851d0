//! Constant-agnostic exact keys against TVM 0.27 on a model whose weights are initializers:
//! `tests/fixtures/onnx/pplcnet-blocks.onnx` (written by `make_pplcnet_blocks.py` beside it)
//! repeats PP-LCNet-style blocks with identical shapes and different bias, scale and shift
//! values, and scales its last stage by rank-0 constants (two equal, one different).
//!
//! Checked live: tgc's tasks are TVM's tasks (TVM's own from_onnx with bound initializers,
//! FoldConstant, FuseOps, extract_tasks: same count, same weights), and for every pair of
//! tgc's Primitive functions, equal exact keys if and only if the worker lowers them to
//! structurally equal MetaSchedule workloads.

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use tgc_canonicalize::{extract_tasks, TaskKey, TaskKeys};
use tgc_ir::Module;
use tgc_passes::{Instrumentation, PassManager};
use tgc_tvm::{Worker, WorkerConfig};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn model_path() -> PathBuf {
    root().join("tests/fixtures/onnx/pplcnet-blocks.onnx")
}

fn partitioned() -> Module {
    let mut m = tgc_ir::onnx::import_file(&model_path(), &[]).expect("fixture imports");
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline("partition", &mut pm).expect("pipeline");
    pm.run(&mut m, &mut std::io::sink())
        .expect("partition runs");
    m
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tgc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn tasks_and_weights_equal_tvms_with_bound_initializers() {
    let python = tgc_tvm::find_python().unwrap_or_else(|e| panic!("no TVM python: {e}"));
    let dir = scratch("constants-ref");
    let out = dir.join("ref.json");
    let status = std::process::Command::new(&python)
        .args(["-m", "tgc_tvm_ref"])
        .arg(model_path())
        .arg("--json")
        .arg(&out)
        .env("PYTHONPATH", root().join("tvm/python"))
        .status()
        .expect("the TVM python runs");
    assert!(status.success(), "TVM reference run failed");
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("output")).expect("JSON");
    let mut theirs: Vec<u64> = reference["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["weight"].as_u64().expect("weight"))
        .collect();
    theirs.sort_unstable();
    let mut ours: Vec<u64> = extract_tasks(&partitioned())
        .iter()
        .map(|t| t.occurrences as u64)
        .collect();
    ours.sort_unstable();
    assert_eq!(ours, theirs, "task weights (sorted): tgc's, then TVM's");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn equal_exact_keys_if_and_only_if_equal_tvm_workloads() {
    let m = partitioned();
    let dir = scratch("constants-lower");
    let mut worker = Worker::start(WorkerConfig::new(dir.join("worker.log"))).expect("worker");
    let target = json!({ "kind": "llvm", "num-cores": 1 });
    let mut hashes_of_key: BTreeMap<TaskKey, BTreeSet<String>> = BTreeMap::new();
    let mut keys_of_hash: BTreeMap<String, BTreeSet<TaskKey>> = BTreeMap::new();
    let mut functions = 0;
    for f in m.functions.values().filter(|f| f.is_primitive()) {
        let task = tgc_tvm::task_json(f).expect("task JSON");
        let lowered = worker
            .call(
                "lower",
                json!({ "task": task, "target": target }),
                Some(&f.name),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let hash = lowered["structural_hash"]
            .as_str()
            .expect("hash")
            .to_string();
        let key = TaskKeys::of(f).exact;
        hashes_of_key.entry(key).or_default().insert(hash.clone());
        keys_of_hash.entry(hash).or_default().insert(key);
        functions += 1;
    }
    worker.shutdown().expect("worker stops");
    for (key, hashes) in &hashes_of_key {
        assert_eq!(
            hashes.len(),
            1,
            "{key} lowers to several workloads: {hashes:?}"
        );
    }
    for (hash, keys) in &keys_of_hash {
        assert_eq!(keys.len(), 1, "workload {hash} has several keys: {keys:?}");
    }
    // The blocks with equal shapes share keys although their constants differ, and the two
    // rank-0 layer scales of different value do not.
    assert!(
        functions > hashes_of_key.len(),
        "no two functions share a key"
    );
    assert_eq!(hashes_of_key.len(), 11);
    let _ = std::fs::remove_dir_all(&dir);
}
