//! Re-export invariance: a semantically identical re-export of a model (random topological
//! node order, fresh value and node names, swapped commutative inputs, permuted graph inputs;
//! `scripts/reexport_onnx.py`) has the same tasks. For every bundled model (`models/*.onnx`)
//! and every zoo model (exported as ONNX), [`SEEDS`] re-exports are written by one run of the
//! script in the pinned TVM venv's python (`$TGC_PYTHON`, else `tvm/python/bootstrap.sh`),
//! imported with our frontend and partitioned; the multiset of exact keys (each key with its
//! occurrences) must equal the original's. The test also checks that the re-exports really
//! differ from the originals (names, graph-input order, node order, operand order), so that
//! it cannot pass by comparing a model with itself.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tgc_canonicalize::{extract_tasks, TaskKey};
use tgc_ir::Module;
use tgc_passes::{Instrumentation, PassManager};

/// Seeds of the re-exports of each model.
const SEEDS: [u64; 3] = [1, 2, 3];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn partitioned(mut m: Module) -> Module {
    let mut pm = PassManager::new(Instrumentation::default());
    tgc_pipelines::build_pipeline("partition", &mut pm).expect("pipeline");
    pm.run(&mut m, &mut std::io::sink())
        .expect("partition runs");
    m
}

/// One task of a model's table: how often the model calls it, and its ops.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    occurrences: usize,
    ops: Vec<&'static str>,
}

/// The multiset of exact keys of a model: exact key -> occurrences (and the task's ops, for
/// messages).
fn task_table(m: Module) -> BTreeMap<TaskKey, Entry> {
    extract_tasks(&partitioned(m))
        .into_iter()
        .map(|t| {
            (
                t.keys.exact,
                Entry {
                    occurrences: t.occurrences,
                    ops: t.ops,
                },
            )
        })
        .collect()
}

/// What an imported module looks like from outside the keys: the names of `@main`'s
/// parameters and its op sequence.
struct Surface {
    param_names: BTreeSet<String>,
    ops: Vec<String>,
}

fn surface(m: &Module) -> Surface {
    let f = m.function("main").expect("main");
    Surface {
        param_names: f.params.iter().map(|&p| f.name_of(p).to_string()).collect(),
        ops: f
            .bindings
            .iter()
            .filter_map(|b| b.callee.op())
            .map(|op| op.name().to_string())
            .collect(),
    }
}

/// The tasks that differ between two tables, one line each.
fn table_diff(original: &BTreeMap<TaskKey, Entry>, other: &BTreeMap<TaskKey, Entry>) -> String {
    let mut s = String::new();
    let ops = |e: &Entry| e.ops.join(",");
    for (key, e) in original {
        match other.get(key) {
            None => writeln!(
                s,
                "    only in the original:  {key} x{} [{}]",
                e.occurrences,
                ops(e)
            ),
            Some(o) if o.occurrences != e.occurrences => writeln!(
                s,
                "    occurrences {} -> {}: {key} [{}]",
                e.occurrences,
                o.occurrences,
                ops(e)
            ),
            Some(_) => Ok(()),
        }
        .unwrap();
    }
    for (key, o) in other {
        if !original.contains_key(key) {
            writeln!(
                s,
                "    only in the re-export: {key} x{} [{}]",
                o.occurrences,
                ops(o)
            )
            .unwrap();
        }
    }
    s
}

fn occurrences(t: &BTreeMap<TaskKey, Entry>) -> usize {
    t.values().map(|e| e.occurrences).sum()
}

/// The models: every `models/*.onnx` as it is, and every zoo model exported into `dir`.
fn model_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(root().join("models"))
        .expect("models/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no models/*.onnx");
    for z in tgc_zoo::MODELS {
        let m = z.build().expect("zoo model builds");
        let bytes = tgc_ir::onnx::export_module(&m).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join(format!("{}.onnx", z.name));
        std::fs::write(&path, bytes).expect("write");
        files.push((z.name.to_string(), path));
    }
    files
}

/// Runs the script once over every file; returns its report lines by output path.
fn reexport_all(files: &[(String, PathBuf)], out_dir: &Path) -> BTreeMap<PathBuf, Value> {
    let python = tgc_tvm::find_python().unwrap_or_else(|e| panic!("no TVM python: {e}"));
    let mut cmd = std::process::Command::new(python);
    cmd.arg(root().join("scripts/reexport_onnx.py"));
    cmd.args(files.iter().map(|(_, p)| p));
    cmd.arg("--out-dir").arg(out_dir).arg("--report");
    for s in SEEDS {
        cmd.args(["--seed", &s.to_string()]);
    }
    let out = cmd.output().expect("the TVM python runs");
    assert!(
        out.status.success(),
        "reexport_onnx.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8 report")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            (PathBuf::from(v["out"].as_str().expect("out")), v)
        })
        .collect()
}

fn count(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("report has no {field}: {v}"))
}

#[test]
fn exact_keys_are_invariant_under_reexport() {
    let dir = std::env::temp_dir().join(format!("tgc-reexport-{}", std::process::id()));
    let out_dir = dir.join("reexports");
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    let files = model_files(&dir);
    let reports = reexport_all(&files, &out_dir);
    assert_eq!(
        reports.len(),
        files.len() * SEEDS.len(),
        "one report per re-export"
    );

    let mut failures = String::new();
    let mut failed_models: Vec<String> = Vec::new();
    let (mut any_order_changed, mut any_swap, mut any_ir_order_changed) = (false, false, false);
    for (name, path) in &files {
        let original = tgc_ir::onnx::import_file(path, &[]).unwrap_or_else(|e| panic!("{e}"));
        let original_surface = surface(&original);
        let want = task_table(original);
        let mut order_choices = 0;
        let mut order_changed = false;
        let mut inputs_moved = 0;
        let mut swapped = 0;
        let mut failed_seeds: Vec<u64> = Vec::new();
        for seed in SEEDS {
            let re_path = out_dir.join(format!("{name}.seed{seed}.onnx"));
            let report = &reports[&re_path];
            // The re-export is another file, not the same one under another name.
            assert_eq!(
                count(report, "names_kept"),
                0,
                "{name} seed {seed}: {report}"
            );
            assert!(count(report, "values_renamed") > 0, "{name} seed {seed}");
            order_choices += count(report, "order_choices");
            order_changed |= count(report, "nodes_moved") > 0;
            inputs_moved += count(report, "inputs_moved");
            swapped += count(report, "swapped");

            let re = tgc_ir::onnx::import_file(&re_path, &[]).unwrap_or_else(|e| panic!("{e}"));
            let re_surface = surface(&re);
            let common: Vec<&String> = original_surface
                .param_names
                .intersection(&re_surface.param_names)
                .collect();
            assert!(
                common.is_empty(),
                "{name} seed {seed}: parameters keep their names: {common:?}"
            );
            any_ir_order_changed |= re_surface.ops != original_surface.ops;

            let got = task_table(re);
            if got != want {
                failed_seeds.push(seed);
                writeln!(
                    failures,
                    "{name} seed {seed}: {} distinct tasks, {} occurrences; \
                     the original has {}, {}:\n{}",
                    got.len(),
                    occurrences(&got),
                    want.len(),
                    occurrences(&want),
                    table_diff(&want, &got)
                )
                .unwrap();
            }
        }
        // Every model has more than one graph input (the weights are inputs), and where
        // the graph admits another topological order some seed must have used one.
        assert!(inputs_moved > 0, "{name}: graph inputs never permuted");
        assert!(
            order_choices == 0 || order_changed,
            "{name}: other topological orders exist, no seed used one"
        );
        any_order_changed |= order_changed;
        any_swap |= swapped > 0;
        println!(
            "{name}: {} tasks, {} occurrences; over {} seeds: {order_choices} order choices, \
             {swapped} swaps, {inputs_moved} inputs moved; keys changed for seeds {failed_seeds:?}",
            want.len(),
            occurrences(&want),
            SEEDS.len()
        );
        if !failed_seeds.is_empty() {
            failed_models.push(format!("{name} (seeds {failed_seeds:?})"));
        }
    }
    assert!(any_order_changed, "no re-export changed the node order");
    assert!(any_swap, "no re-export swapped commutative inputs");
    assert!(
        any_ir_order_changed,
        "no re-export imported with another binding order"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "exact keys changed under re-export of {} of {} models: {}\n{failures}",
        failed_models.len(),
        files.len(),
        failed_models.join(", ")
    );
}

/// A file that is not ONNX is refused in one line that names it.
#[test]
fn reexport_script_names_a_bad_file() {
    let dir = std::env::temp_dir().join(format!("tgc-reexport-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("not-a-model.onnx");
    std::fs::write(&bad, b"not protobuf at all").expect("write");
    let python = tgc_tvm::find_python().unwrap_or_else(|e| panic!("no TVM python: {e}"));
    let out = std::process::Command::new(python)
        .arg(root().join("scripts/reexport_onnx.py"))
        .arg(&bad)
        .arg(dir.join("out.onnx"))
        .output()
        .expect("the TVM python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&*bad.to_string_lossy()), "{stderr}");
    assert!(!dir.join("out.onnx").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
