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
    let path = root().join("models").join(model);
    let mut m = tgc_ir::onnx::import_file(&path, &[]).expect("model imports");
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline("partition,canonicalize", &mut pm).expect("pipeline");
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

fn check(model: &str) {
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(
            root()
                .join("tests/fixtures/tvm")
                .join(model.replace(".onnx", ".json")),
        )
        .expect("fixture exists"),
    )
    .expect("fixture is JSON");
    let m = partitioned(model);

    let ours = our_groups(&m);
    let theirs = tvm_groups(&fixture);
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
        tvm_tasks_modulo_operand_order(&fixture),
        "{model}: distinct exact keys vs TVM's tasks merged modulo commutative operand order \
         (TVM has {tvm_tasks} tasks)"
    );
}

#[test]
fn resnet50_agrees_with_tvm() {
    check("keras-resnet50.onnx");
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
