//! Census, coverage and neighbour math on hand-made partitioned modules.

use super::*;
use crate::tasks::extract_tasks;

/// A partitioned model: task `i` applies `op` to a `1x8xHWxHW` tensor and `@main` calls it
/// `calls` times (0: the function exists but is never called).
fn model(name: &str, tasks: &[(&str, i64, usize)]) -> ModelTasks {
    let ty = |hw: i64| format!("tensor<1x8x{hw}x{hw}xf32>");
    let params: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(i, (_, hw, _))| format!("%x{i}: {}", ty(*hw)))
        .collect();
    let mut main = format!(
        "  func @main({}) -> {} {{\n",
        params.join(", "),
        ty(tasks[0].1)
    );
    for (i, (_, hw, calls)) in tasks.iter().enumerate() {
        for c in 0..*calls {
            main.push_str(&format!(
                "    %c{i}_{c} = call @f{i}(%x{i}) : {}\n",
                ty(*hw)
            ));
        }
    }
    main.push_str("    return %c0_0\n  }\n");
    let mut src = format!("module @{name} {{\n{main}");
    for (i, (op, hw, _)) in tasks.iter().enumerate() {
        let t = ty(*hw);
        src.push_str(&format!(
            "  func @f{i}(%a: {t}) -> {t} attributes {{Primitive = true}} {{\n    %r = {op}(%a) : {t}\n    return %r\n  }}\n"
        ));
    }
    src.push_str("}\n");
    let m = tgc_ir::text::parse_module(&src, name).unwrap_or_else(|e| panic!("{e}\n{src}"));
    ModelTasks::new(name, extract_tasks(&m))
}

#[test]
fn census_counts_occurrences_and_distinct_keys_per_level() {
    // relu 16 x3, relu 32 x1 (same structure), sigmoid 16 x1 (another op)
    let m = model(
        "m",
        &[("nn.relu", 16, 3), ("nn.relu", 32, 1), ("sigmoid", 16, 1)],
    );
    let exact = Census::of(&m.tasks, Level::Exact);
    assert_eq!((exact.occurrences, exact.distinct), (5, 3));
    assert!((exact.repetition() - 0.4).abs() < 1e-12);
    let structural = Census::of(&m.tasks, Level::Structural);
    assert_eq!((structural.occurrences, structural.distinct), (5, 2));
    assert!((structural.repetition() - 0.6).abs() < 1e-12);
    assert_eq!(Census::of(&m.tasks, Level::Family).distinct, 2);
}

#[test]
fn uncalled_tasks_take_no_part() {
    let m = model("m", &[("nn.relu", 16, 2), ("sigmoid", 16, 0)]);
    let c = Census::of(&m.tasks, Level::Exact);
    assert_eq!((c.occurrences, c.distinct), (2, 1));
    let other = model("o", &[("sigmoid", 16, 1)]);
    assert_eq!(coverage(&other, &m, Level::Exact), 0.0);
    assert_eq!(NeighbourDistances::among("m", &m.tasks).tasks, 1);
}

#[test]
fn empty_census_has_no_repetition() {
    let c = Census {
        level: Level::Exact,
        occurrences: 0,
        distinct: 0,
    };
    assert_eq!(c.repetition(), 0.0);
}

#[test]
fn coverage_weights_by_occurrences_and_is_not_symmetric() {
    let x = model("x", &[("nn.relu", 16, 3), ("sigmoid", 16, 1)]);
    let y = model("y", &[("nn.relu", 16, 1), ("tanh", 16, 1)]);
    let c = Coverage::of(&[x.clone(), y.clone()], Level::Exact);
    assert_eq!(c.models, ["x", "y"]);
    assert_eq!(c.matrix, vec![vec![1.0, 0.75], vec![0.5, 1.0]]);
    assert_eq!(c.by_others, vec![0.75, 0.5]);
    assert_eq!(coverage(&x, &y, Level::Exact), 0.75);
}

#[test]
fn coverage_by_others_takes_the_union_of_the_other_models() {
    let x = model(
        "x",
        &[("nn.relu", 16, 1), ("sigmoid", 16, 1), ("tanh", 16, 2)],
    );
    let y = model("y", &[("nn.relu", 16, 1)]);
    let z = model("z", &[("sigmoid", 16, 1)]);
    let c = Coverage::of(&[x, y, z], Level::Exact);
    assert_eq!(c.matrix[0], vec![1.0, 0.25, 0.25]);
    assert_eq!(c.by_others, vec![0.5, 1.0, 1.0]);
}

#[test]
fn coverage_grows_from_exact_to_structural_to_family() {
    let x = model("x", &[("nn.relu", 16, 2), ("sigmoid", 8, 2)]);
    let y = model("y", &[("nn.relu", 32, 1), ("sigmoid", 8, 1)]);
    assert_eq!(coverage(&x, &y, Level::Exact), 0.5);
    assert_eq!(coverage(&x, &y, Level::Structural), 1.0);
    assert_eq!(coverage(&x, &y, Level::Family), 1.0);
}

#[test]
fn quantiles_interpolate_between_order_statistics() {
    let q = Quantiles::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).expect("non-empty");
    assert_eq!(
        (q.min, q.p25, q.median, q.p75, q.max),
        (1.0, 2.0, 3.0, 4.0, 5.0)
    );
    assert!((q.p90 - 4.6).abs() < 1e-12);
    assert_eq!(Quantiles::of(&[2.5]).expect("one").p90, 2.5);
    assert!(Quantiles::of(&[]).is_none());
}

#[test]
fn nearest_neighbours_stay_inside_structural_groups() {
    // relu at 8, 16 and 64 form one structural group; sigmoid stands alone.
    let m = model(
        "m",
        &[
            ("nn.relu", 8, 1),
            ("nn.relu", 16, 1),
            ("nn.relu", 64, 1),
            ("sigmoid", 8, 1),
        ],
    );
    let n = NeighbourDistances::among("m", &m.tasks);
    assert_eq!((n.tasks, n.groups), (4, 2));
    let f = |i: usize| &m.tasks[i].features;
    let d = |a: usize, b: usize| f(a).distance(f(b)).expect("same structure");
    assert_eq!(n.distances, vec![d(0, 1), d(1, 0), d(2, 1)]);
    assert!(d(0, 1) < d(2, 1));
}

#[test]
fn pooled_neighbours_count_a_shared_task_once() {
    let x = model("x", &[("nn.relu", 16, 2)]);
    let y = model("y", &[("nn.relu", 16, 1), ("nn.relu", 32, 1)]);
    let study = Study::new(&[x, y], Level::Exact);
    assert_eq!(study.neighbours[0].distances.len(), 0);
    assert_eq!(study.neighbours[1].distances.len(), 2);
    assert_eq!(study.pooled.tasks, 2);
    assert_eq!(study.pooled.distances.len(), 2);
    assert_eq!(study.pooled.scope, "*");
}

#[test]
fn study_tables_render_as_markdown() {
    let x = model("x", &[("nn.relu", 16, 3), ("sigmoid", 16, 1)]);
    let y = model("y", &[("nn.relu", 16, 1)]);
    let study = Study::new(&[x, y], Level::Exact);
    assert_eq!(
        study.census_markdown().lines().nth(2),
        Some("| x | 4 | 2 | 2 | 2 | 0.500 | 0.500 | 0.500 |")
    );
    let coverage = study.coverage_markdown();
    assert!(
        coverage.starts_with("| exact coverage | x | y | others |\n|---|---:|---:|---:|\n"),
        "{coverage}"
    );
    assert!(
        coverage.contains("| x | 1.000 | 0.750 | 0.750 |"),
        "{coverage}"
    );
    assert!(study
        .neighbours_markdown()
        .contains("| y | 1 | 1 | 0 | - | - |"));
}
