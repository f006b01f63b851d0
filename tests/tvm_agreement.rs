//! Reference agreement with TVM 0.27: each bundled model, imported and partitioned by tgc,
//! against what stock TVM does to the same ONNX file (from_onnx, DecomposeOpsForInference,
//! LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, extract_tasks), recorded
//! in `tests/fixtures/tvm/*.json` by `tvm/python/regen_fixtures.sh`.
//!
//! Compared: the fused groups as a multiset of (op sequence, output shape) with their call
//! counts (so every group's op sequence must agree), the task occurrences against TVM's summed
//! task weights, and the number of distinct exact keys against TVM's task count.
//!
//! Naming: TVM's ONNX frontend turns Clip into isnan/where/maximum/minimum, which FoldConstant
//! reduces to `maximum` then `minimum`; tgc imports Clip as Relax's single `clip` op. A tgc
//! `clip` in a group therefore stands for TVM's `maximum, minimum` pair.
//!
//! The fixtures are checked in so that this runs without TVM; `live_tvm_agrees` runs the
//! same comparison against TVM itself (the pinned venv, found through `$TGC_PYTHON` or
//! `tvm/python/bootstrap.sh`), and also compares the imported op counts and output types
//! with what TVM's `from_onnx` produces.
//!
//! The one expected difference is in distinct task counts: TVM's structural hash sees the
//! operand order of commutative ops (`add(conv, x)` and `add(x, conv)` are two MetaSchedule
//! tasks), tgc's exact key does not. The test checks that TVM's tasks, merged modulo that
//! order (same op sequence and the same multiset of buffer shapes), are exactly as many as
//! tgc's tasks.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use tgc_canonicalize::extract_tasks;
use tgc_ir::{Callee, Module};
use tgc_passes::{Instrumentation, PassManager};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// TVM's name for the PrimFunc an op of ours legalizes to (the fixture's `kind`).
fn tvm_kind(op: &str) -> &str {
    match op {
        "permute_dims" => "transpose",
        "concat" => "concatenate",
        other => other.rsplit('.').next().unwrap_or(other),
    }
}

fn partitioned(model: &str) -> Module {
    partitioned_file(&root().join("models").join(model))
}

fn partitioned_file(path: &std::path::Path) -> Module {
    let mut m = tgc_ir::onnx::import_file(path, &[]).expect("model imports");
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline("partition{order=program},canonicalize", &mut pm)
        .expect("pipeline");
    pm.run(&mut m, &mut std::io::sink()).expect("pipeline runs");
    m
}

type GroupKey = (Vec<String>, Vec<i64>);

fn our_groups(m: &Module) -> BTreeMap<GroupKey, usize> {
    let mut out = BTreeMap::new();
    let main = m.function("main").expect("main");
    for b in &main.bindings {
        let Callee::Func(name) = &b.callee else {
            panic!("unfused op left in main")
        };
        let f = m.function(name).expect("callee");
        let mut ops: Vec<String> = Vec::new();
        for name in f
            .bindings
            .iter()
            .filter_map(|b| b.callee.op())
            .map(|op| op.name())
        {
            match name {
                "constant" => {}
                "clip" => ops.extend(["maximum".to_string(), "minimum".to_string()]),
                other => ops.push(tvm_kind(other).to_string()),
            }
        }
        let last = f.results.last().expect("a result");
        *out.entry((ops, f.ty(*last).shape.to_vec())).or_default() += 1;
    }
    out
}

fn tvm_groups(fixture: &Value) -> BTreeMap<GroupKey, usize> {
    let mut out = BTreeMap::new();
    for task in fixture["tasks"].as_array().expect("tasks") {
        for g in task["groups"].as_array().expect("groups") {
            let body = g["body"].as_array().expect("body");
            let ops = body
                .iter()
                .map(|b| b["kind"].as_str().expect("kind").to_string())
                .collect();
            let shape = body.last().expect("op")["out"]["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_i64().expect("dim"))
                .collect();
            *out.entry((ops, shape)).or_default() += g["calls"].as_u64().expect("calls") as usize;
        }
    }
    out
}

/// TVM's tasks merged modulo operand order: op sequence plus the sorted buffer shapes.
fn tvm_tasks_modulo_operand_order(fixture: &Value) -> usize {
    let mut set = BTreeSet::new();
    for task in fixture["tasks"].as_array().expect("tasks") {
        let ops: Vec<&str> = task["ops"]
            .as_array()
            .expect("ops")
            .iter()
            .map(|o| o.as_str().expect("op"))
            .collect();
        let mut buffers: Vec<String> = task["buffers"]
            .as_array()
            .expect("buffers")
            .iter()
            .map(|b| format!("{}{}", b["dtype"], b["shape"]))
            .collect();
        buffers.sort();
        set.insert((ops, buffers));
    }
    set.len()
}

fn fixture(model: &str) -> Value {
    let path = root()
        .join("tests/fixtures/tvm")
        .join(model.replace(".onnx", ".json"));
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture exists"))
        .expect("fixture is JSON")
}

fn check(model: &str) {
    check_against(model, &fixture(model));
}

fn check_against(model: &str, fixture: &Value) {
    let m = partitioned(model);

    let ours = our_groups(&m);
    let theirs = tvm_groups(fixture);
    let only_ours: Vec<_> = ours
        .iter()
        .filter(|(k, n)| theirs.get(*k) != Some(n))
        .collect();
    let only_theirs: Vec<_> = theirs
        .iter()
        .filter(|(k, n)| ours.get(*k) != Some(n))
        .collect();
    assert!(
        only_ours.is_empty() && only_theirs.is_empty(),
        "{model}: fused groups differ\n tgc only: {only_ours:?}\n TVM only: {only_theirs:?}"
    );

    let tasks = extract_tasks(&m);
    let occurrences: usize = tasks.iter().map(|t| t.occurrences).sum();
    let weight: u64 = fixture["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["weight"].as_u64().expect("w"))
        .sum();
    assert_eq!(
        occurrences as u64, weight,
        "{model}: task occurrences vs TVM's summed weights"
    );

    let tvm_tasks = fixture["tasks"].as_array().expect("tasks").len();
    assert!(
        tasks.len() <= tvm_tasks,
        "{model}: more distinct tasks than TVM"
    );
    assert_eq!(
        tasks.len(),
        tvm_tasks_modulo_operand_order(fixture),
        "{model}: distinct exact keys vs TVM's tasks merged modulo commutative operand order \
         (TVM has {tvm_tasks} tasks)"
    );
}

#[test]
fn resnet50_agrees_with_tvm() {
    check("keras-resnet50.onnx");
}

#[test]
fn resnet101_agrees_with_tvm() {
    check("keras-resnet101.onnx");
}

#[test]
fn mobilenetv2_agrees_with_tvm() {
    check("keras-mobilenetv2.onnx");
}

#[test]
fn densenet121_agrees_with_tvm() {
    check("keras-densenet121.onnx");
}

#[test]
fn inceptionv3_agrees_with_tvm() {
    check("keras-inceptionv3.onnx");
}

/// The pinned TVM venv's python (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh`).
fn tvm_python() -> PathBuf {
    tgc_tvm::find_python().unwrap_or_else(|e| panic!("no TVM python: {e}"))
}

/// Our op histogram in TVM's terms, right after import. Two ops differ by design: TVM's
/// frontend emits Pad as a `call_tir` of a `pad` PrimFunc, and Clip as two `isnan`, two
/// `where`, a `maximum` and a `minimum` call_tir (the isnan/where pairs guard NaN bounds and
/// fold away later); tgc imports them as `nn.pad` and `clip`.
fn our_import_counts(m: &Module) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let main = m.function("main").expect("main");
    for op in main
        .bindings
        .iter()
        .filter_map(|b| b.callee.op())
        .map(|op| op.name())
    {
        let mut add = |k: &str, n: u64| *out.entry(k.to_string()).or_default() += n;
        match op {
            "constant" => {}
            "nn.pad" => add("relax.call_tir", 1),
            "clip" => {
                add("relax.call_tir", 2);
                add("relax.isnan", 2);
                add("relax.where", 2);
            }
            other => add(&format!("relax.{other}"), 1),
        }
    }
    out
}

#[test]
fn live_tvm_agrees() {
    let python = tvm_python();
    let dir = std::env::temp_dir().join(format!("tgc-tvm-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for model in [
        "keras-resnet50.onnx",
        "keras-resnet101.onnx",
        "keras-mobilenetv2.onnx",
        "keras-densenet121.onnx",
        "keras-inceptionv3.onnx",
    ] {
        let out = dir.join(model.replace(".onnx", ".json"));
        let status = std::process::Command::new(&python)
            .args(["-m", "tgc_tvm_ref"])
            .arg(root().join("models").join(model))
            .arg("--json")
            .arg(&out)
            .env("PYTHONPATH", root().join("tvm/python"))
            .status()
            .expect("the TVM python runs");
        assert!(status.success(), "{model}: TVM reference run failed");
        let live: Value =
            serde_json::from_str(&std::fs::read_to_string(&out).expect("output")).expect("JSON");

        let path = root().join("models").join(model);
        let imported = tgc_ir::onnx::import_file(&path, &[]).expect("model imports");
        let theirs: BTreeMap<String, u64> = live["import"]["op_counts"]
            .as_object()
            .expect("op_counts")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().expect("count")))
            .collect();
        assert_eq!(
            our_import_counts(&imported),
            theirs,
            "{model}: op counts after import"
        );
        let outputs: Vec<(Vec<i64>, String)> = live["import"]["outputs"]
            .as_array()
            .expect("outputs")
            .iter()
            .map(|o| {
                let shape = o["shape"]
                    .as_array()
                    .expect("shape")
                    .iter()
                    .map(|d| d.as_i64().expect("dim"))
                    .collect();
                (shape, o["dtype"].as_str().expect("dtype").to_string())
            })
            .collect();
        let main = imported.function("main").expect("main");
        let ours: Vec<(Vec<i64>, String)> = main
            .result_types()
            .iter()
            .map(|t| (t.shape.to_vec(), t.dtype.tvm_name().to_string()))
            .collect();
        assert_eq!(ours, outputs, "{model}: output types");

        check_against(model, &live);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every call site of our partitioned main with its task's exact key, in order.
fn our_call_sites(m: &Module) -> Vec<(String, tgc_canonicalize::TaskKey)> {
    let main = m.function("main").expect("main");
    main.bindings
        .iter()
        .map(|b| {
            let Callee::Func(name) = &b.callee else {
                panic!("unfused op left in main")
            };
            let f = m.function(name).expect("callee");
            (name.clone(), tgc_canonicalize::TaskKeys::of(f).exact)
        })
        .collect()
}

/// TVM's call sites in order: (task name, structural hash, op sequence + sorted buffers).
fn tvm_call_sites(fixture: &Value) -> Vec<(String, String, String)> {
    let mut sites: Vec<(u64, (String, String, String))> = Vec::new();
    for task in fixture["tasks"].as_array().expect("tasks") {
        let mut buffers: Vec<String> = task["buffers"]
            .as_array()
            .expect("buffers")
            .iter()
            .map(|b| format!("{}{}", b["dtype"], b["shape"]))
            .collect();
        buffers.sort();
        let signature = format!("{} {}", task["ops"], buffers.join(" "));
        for g in task["groups"].as_array().expect("groups") {
            for site in g["call_sites"].as_array().expect("call_sites") {
                let entry = (
                    task["task_name"].as_str().expect("name").to_string(),
                    task["structural_hash"].as_str().expect("hash").to_string(),
                    signature.clone(),
                );
                sites.push((site.as_u64().expect("site"), entry));
            }
        }
    }
    sites.sort_by_key(|(site, _)| *site);
    sites.into_iter().map(|(_, e)| e).collect()
}

/// Equal exact keys imply equal TVM structural hashes, except where TVM's hash sees the
/// operand order of a commutative op; returns the TVM task pairs split only by that.
fn hash_splits(model: &str) -> Vec<(String, String)> {
    let fixture = fixture(model);
    let ours = our_call_sites(&partitioned(model));
    let theirs = tvm_call_sites(&fixture);
    assert_eq!(ours.len(), theirs.len(), "{model}: call sites");
    let mut by_key: BTreeMap<tgc_canonicalize::TaskKey, BTreeMap<String, (String, String)>> =
        BTreeMap::new();
    for ((_, key), (name, hash, signature)) in ours.iter().zip(&theirs) {
        by_key
            .entry(*key)
            .or_default()
            .insert(hash.clone(), (name.clone(), signature.clone()));
    }
    let mut splits = Vec::new();
    for tvm in by_key.values() {
        let mut tasks: Vec<&(String, String)> = tvm.values().collect();
        tasks.sort();
        for t in &tasks[1..] {
            assert_eq!(
                t.1, tasks[0].1,
                "{model}: one exact key covers TVM tasks {} and {} that differ beyond operand order",
                tasks[0].0, t.0
            );
            splits.push((tasks[0].0.clone(), t.0.clone()));
        }
    }
    splits
}

/// ResNet-50's first stage adds the shortcut as `add(conv, shortcut)` in block 1 and as
/// `add(identity, conv)` in blocks 2 and 3: one tgc task, two TVM tasks.
#[test]
fn exact_keys_imply_tvm_hashes_resnet50() {
    assert_eq!(
        hash_splits("keras-resnet50.onnx"),
        vec![(
            "fused_conv2d3_add_relu2".to_string(),
            "fused_conv2d3_add_relu21".to_string()
        )]
    );
}

/// ResNet-101 has ResNet-50's tasks (`models/README.md`), the same split included.
#[test]
fn exact_keys_imply_tvm_hashes_resnet101() {
    assert_eq!(
        hash_splits("keras-resnet101.onnx"),
        vec![(
            "fused_conv2d3_add_relu2".to_string(),
            "fused_conv2d3_add_relu21".to_string()
        )]
    );
}

#[test]
fn exact_keys_imply_tvm_hashes_mobilenetv2() {
    assert_eq!(hash_splits("keras-mobilenetv2.onnx"), vec![]);
}

#[test]
fn exact_keys_imply_tvm_hashes_densenet121() {
    assert_eq!(hash_splits("keras-densenet121.onnx"), vec![]);
}

#[test]
fn exact_keys_imply_tvm_hashes_inceptionv3() {
    assert_eq!(hash_splits("keras-inceptionv3.onnx"), vec![]);
}

/// The worker's lowering of every call site's task hashes exactly like TVM's own task for
/// that site (the fixture's structural hash), on every bundled model: the same MetaSchedule
/// workloads, single-op tasks (which TVM leaves unfused, `op_pattern` attribute included),
/// operand order of commutative ops and Clip's bound tensors included. This is what lets
/// databases made by stock TVM seed tgc and tgc's exports serve stock TVM.
#[test]
fn our_lowering_hashes_like_tvms_tasks() {
    let (dir, mut worker) = lowering_worker("tgc-lower-hash");
    let mut all = Vec::new();
    for model in [
        "keras-resnet50.onnx",
        "keras-resnet101.onnx",
        "keras-mobilenetv2.onnx",
        "keras-densenet121.onnx",
        "keras-inceptionv3.onnx",
    ] {
        all.extend(lowering_mismatches(
            &mut worker,
            model,
            &partitioned(model),
            &fixture(model),
        ));
    }
    assert!(all.is_empty(), "workloads that differ from TVM's: {all:#?}");
    worker.shutdown().expect("worker stops");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every way ONNX clamps hashes like TVM's task: Clip with both bounds and with the min only
/// (opset 17: rank-0 bound tensors that TVM reads with TE maximum/minimum; opset 10:
/// attributes, written into the TIR), HardSigmoid and HardSwish (Relax's clip inside). TVM's
/// side is computed here by the reference analysis (`python -m tgc_tvm_ref`).
#[test]
fn every_onnx_clamp_hashes_like_tvms_task() {
    let (dir, mut worker) = lowering_worker("tgc-lower-clips");
    let python = tvm_python();
    let script = root().join("tvm/python/tests/onnx_models.py");
    let mut all = Vec::new();
    for opset in ["10", "17"] {
        let model = dir.join(format!("clips{opset}.onnx"));
        let json = dir.join(format!("clips{opset}.json"));
        let run = |args: &[&std::ffi::OsStr]| {
            let status = std::process::Command::new(&python)
                .args(args)
                .env("PYTHONPATH", root().join("tvm/python"))
                .status()
                .expect("python runs");
            assert!(status.success(), "{args:?}");
        };
        run(&[
            script.as_os_str(),
            "clips".as_ref(),
            model.as_os_str(),
            opset.as_ref(),
        ]);
        run(&[
            "-m".as_ref(),
            "tgc_tvm_ref".as_ref(),
            model.as_os_str(),
            "--json".as_ref(),
            json.as_os_str(),
        ]);
        let theirs: Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("analysis")).expect("JSON");
        let want = if opset == "10" { 3 } else { 4 };
        assert_eq!(
            theirs["tasks"].as_array().expect("tasks").len(),
            want,
            "opset {opset}"
        );
        let label = format!("clips, opset {opset}");
        all.extend(lowering_mismatches(
            &mut worker,
            &label,
            &partitioned_file(&model),
            &theirs,
        ));
    }
    assert!(all.is_empty(), "workloads that differ from TVM's: {all:#?}");
    worker.shutdown().expect("worker stops");
    let _ = std::fs::remove_dir_all(&dir);
}

fn lowering_worker(prefix: &str) -> (PathBuf, tgc_tvm::Worker) {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let worker = tgc_tvm::Worker::start(tgc_tvm::WorkerConfig::new(dir.join("worker.log")))
        .expect("worker starts");
    (dir, worker)
}

/// The call sites of `m` whose task the worker lowers to another workload than TVM's task
/// for that site in `fixture` (one line naming them, or nothing).
fn lowering_mismatches(
    worker: &mut tgc_tvm::Worker,
    model: &str,
    m: &Module,
    fixture: &Value,
) -> Option<String> {
    let target = serde_json::json!({ "kind": "llvm", "num-cores": 2 });
    let theirs = tvm_call_sites(fixture);
    let main = m.function("main").expect("main");
    assert_eq!(main.bindings.len(), theirs.len(), "{model}: call sites");
    // Call sites of one task JSON (names aside) lower once.
    let mut hash_of: BTreeMap<String, String> = BTreeMap::new();
    let mut mismatches = Vec::new();
    for (b, (tvm_name, tvm_hash, _)) in main.bindings.iter().zip(&theirs) {
        let Callee::Func(name) = &b.callee else {
            panic!("unfused op left in main")
        };
        let f = m.function(name).expect("callee");
        let mut task = tgc_tvm::task_json(f).expect("task JSON");
        task["name"] = Value::from("t");
        for p in task["params"].as_array_mut().expect("params") {
            p["name"] = Value::from("p");
        }
        let text = task.to_string();
        let ours = match hash_of.get(&text) {
            Some(h) => h.clone(),
            None => {
                let lowered = worker
                    .call(
                        "lower",
                        serde_json::json!({ "task": task, "target": target }),
                        Some(name),
                    )
                    .unwrap_or_else(|e| panic!("{model} {name}: {e}"));
                let h = lowered["structural_hash"]
                    .as_str()
                    .expect("hash")
                    .to_string();
                hash_of.insert(text, h.clone());
                h
            }
        };
        if &ours != tvm_hash {
            mismatches.push(format!("{name} (TVM {tvm_name})"));
        }
    }
    (!mismatches.is_empty()).then(|| {
        format!(
            "{model}: {} of {}: {mismatches:?}",
            mismatches.len(),
            theirs.len()
        )
    })
}
