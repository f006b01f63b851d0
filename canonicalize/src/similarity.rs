//! Graph similarity studies: how much tuning work repeats inside a model and carries over
//! between models, at each key [`Level`].
//!
//! A study takes the tasks of several partitioned models ([`extract_tasks`](crate::extract_tasks)) and computes:
//! - a [`Census`] per model and level: task occurrences (calls of fused functions), distinct
//!   keys, and within-model repetition `1 - distinct / occurrences` (the share of task
//!   occurrences a cache would serve from an earlier occurrence of the same model);
//! - a [`Coverage`] matrix at one level: entry `(r, c)` is the fraction of model `r`'s task
//!   occurrences whose key also occurs in model `c` (what a cache filled by tuning `c` serves
//!   of `r`); the diagonal is 1;
//! - [`NeighbourDistances`]: for every distinct task (exact key), the [`Features::distance`]
//!   to its nearest other task with the same structural key, per model and pooled over all
//!   models, with [`Quantiles`]. These are the neighbours whose traces transfer.
//!
//! Only tasks that a model calls (`occurrences > 0`) take part. Everything is exact
//! arithmetic over counts, independent of the order of models and tasks except for the order
//! of rows and columns.
//!
//! ```
//! use tgc_canonicalize::similarity::{ModelTasks, Study};
//! use tgc_canonicalize::{extract_tasks, Level};
//!
//! // A partitioned model (as `partition` leaves it) that applies one ReLU task to an image
//! // of `hw` x `hw`.
//! fn model(name: &str, hw: i64) -> ModelTasks {
//!     let t = format!("tensor<1x8x{hw}x{hw}xf32>");
//!     let src = format!(
//!         "module @{name} {{
//!            func @main(%x: {t}) -> {t} {{
//!              %y = call @task(%x) : {t}
//!              return %y
//!            }}
//!            func @task(%a: {t}) -> {t} attributes {{Primitive = true}} {{
//!              %r = nn.relu(%a) : {t}
//!              return %r
//!            }}
//!          }}"
//!     );
//!     let module = tgc_ir::text::parse_module(&src, name).expect("parses");
//!     ModelTasks::new(name, extract_tasks(&module))
//! }
//!
//! let models = [model("big", 16), model("small", 8)];
//! // Same loop nest, other extents: the structural key covers, the exact key does not.
//! let study = Study::new(&models, Level::Structural);
//! assert_eq!(study.coverage.get(0, 1), 1.0);
//! assert_eq!(Study::new(&models, Level::Exact).coverage.get(0, 1), 0.0);
//! // Pooled, each task is the other's nearest structural neighbour.
//! assert_eq!(study.pooled.distances.len(), 2);
//! print!("{}", study.census_markdown());
//! ```

use crate::features::Features;
use crate::keys::TaskKey;
use crate::level::Level;
use crate::tasks::Task;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// The tasks of one model under the name a study shows for it.
#[derive(Clone, Debug)]
pub struct ModelTasks {
    /// The model's name in tables and plots.
    pub name: String,
    /// Its tasks, as [`extract_tasks`](crate::extract_tasks) returns them for the partitioned module.
    pub tasks: Vec<Task>,
}

impl ModelTasks {
    /// Names the tasks of one model.
    pub fn new(name: impl Into<String>, tasks: Vec<Task>) -> ModelTasks {
        ModelTasks {
            name: name.into(),
            tasks,
        }
    }

    /// The tasks the model calls.
    fn called(&self) -> impl Iterator<Item = &Task> {
        self.tasks.iter().filter(|t| t.occurrences > 0)
    }
}

/// One model's task counts at one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Census {
    /// The key level counted.
    pub level: Level,
    /// Calls of tasks (fused functions) in the model.
    pub occurrences: usize,
    /// Distinct keys at `level` among the called tasks.
    pub distinct: usize,
}

impl Census {
    /// The census of `tasks` (one model's) at `level`.
    pub fn of(tasks: &[Task], level: Level) -> Census {
        let called = tasks.iter().filter(|t| t.occurrences > 0);
        Census {
            level,
            occurrences: called.clone().map(|t| t.occurrences).sum(),
            distinct: called
                .map(|t| t.keys.get(level))
                .collect::<HashSet<_>>()
                .len(),
        }
    }

    /// `1 - distinct / occurrences`: the share of occurrences that repeat an earlier key of
    /// the same model (0 for a model without tasks).
    pub fn repetition(&self) -> f64 {
        if self.occurrences == 0 {
            0.0
        } else {
            1.0 - self.distinct as f64 / self.occurrences as f64
        }
    }
}

/// Which share of each model's task occurrences another model's keys cover, at one level.
#[derive(Clone, Debug, PartialEq)]
pub struct Coverage {
    /// The key level compared.
    pub level: Level,
    /// Row and column names, in study order.
    pub models: Vec<String>,
    /// `matrix[r][c]`: fraction of model `r`'s occurrences whose key occurs in model `c`.
    pub matrix: Vec<Vec<f64>>,
    /// Per model, the fraction of its occurrences whose key occurs in any other model of the
    /// study (leave-one-out: what a cache filled by tuning all the others serves).
    pub by_others: Vec<f64>,
}

impl Coverage {
    /// The coverage matrix of `models` at `level`, rows and columns in the order given.
    pub fn of(models: &[ModelTasks], level: Level) -> Coverage {
        let keys: Vec<HashSet<TaskKey>> = models
            .iter()
            .map(|m| m.called().map(|t| t.keys.get(level)).collect())
            .collect();
        let matrix = models
            .iter()
            .map(|row| {
                keys.iter()
                    .map(|col| covered_fraction(row, col, level))
                    .collect()
            })
            .collect();
        let by_others = models
            .iter()
            .enumerate()
            .map(|(r, row)| {
                let others: HashSet<TaskKey> = keys
                    .iter()
                    .enumerate()
                    .filter(|(c, _)| *c != r)
                    .flat_map(|(_, k)| k.iter().copied())
                    .collect();
                covered_fraction(row, &others, level)
            })
            .collect();
        Coverage {
            level,
            models: models.iter().map(|m| m.name.clone()).collect(),
            matrix,
            by_others,
        }
    }

    /// The entry of row `r`, column `c`.
    pub fn get(&self, r: usize, c: usize) -> f64 {
        self.matrix[r][c]
    }
}

/// The fraction of `row`'s task occurrences whose key at `level` is in `keys`.
fn covered_fraction(row: &ModelTasks, keys: &HashSet<TaskKey>, level: Level) -> f64 {
    let (mut hit, mut total) = (0usize, 0usize);
    for t in row.called() {
        total += t.occurrences;
        if keys.contains(&t.keys.get(level)) {
            hit += t.occurrences;
        }
    }
    if total == 0 {
        0.0
    } else {
        hit as f64 / total as f64
    }
}

/// The fraction of `row`'s task occurrences whose key at `level` occurs in `column`.
pub fn coverage(row: &ModelTasks, column: &ModelTasks, level: Level) -> f64 {
    let keys = column.called().map(|t| t.keys.get(level)).collect();
    covered_fraction(row, &keys, level)
}

/// Summary quantiles of a sample (linear interpolation between order statistics).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantiles {
    /// The smallest value.
    pub min: f64,
    /// The 25th, 50th, 75th and 90th percentiles.
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub p90: f64,
    /// The largest value.
    pub max: f64,
}

impl Quantiles {
    /// The quantiles of `sample`, or `None` when it is empty. NaNs are not expected (feature
    /// distances are finite) and sort last.
    pub fn of(sample: &[f64]) -> Option<Quantiles> {
        if sample.is_empty() {
            return None;
        }
        let mut v = sample.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| {
            let pos = p * (v.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
        };
        Some(Quantiles {
            min: v[0],
            p25: q(0.25),
            median: q(0.5),
            p75: q(0.75),
            p90: q(0.9),
            max: v[v.len() - 1],
        })
    }
}

/// Nearest-neighbour feature distances inside structural groups, over one set of distinct
/// tasks (one model's, or every model's pooled).
#[derive(Clone, Debug, PartialEq)]
pub struct NeighbourDistances {
    /// The model's name, or `*` for the pooled set.
    pub scope: String,
    /// Distinct tasks (exact keys) considered.
    pub tasks: usize,
    /// Structural groups among them (distinct structural keys).
    pub groups: usize,
    /// For each task with another task of the same structural key, the distance to the
    /// nearest one; tasks alone in their group have no entry.
    pub distances: Vec<f64>,
}

impl NeighbourDistances {
    /// The distances among `tasks`; tasks with the same exact key count once (the first).
    pub fn among<'t>(scope: impl Into<String>, tasks: impl IntoIterator<Item = &'t Task>) -> Self {
        let mut seen = HashSet::new();
        let mut groups: HashMap<TaskKey, Vec<&Features>> = HashMap::new();
        let mut order: Vec<TaskKey> = Vec::new();
        for t in tasks {
            if t.occurrences == 0 || !seen.insert(t.keys.exact) {
                continue;
            }
            let group = groups.entry(t.keys.structural).or_insert_with(|| {
                order.push(t.keys.structural);
                Vec::new()
            });
            group.push(&t.features);
        }
        let mut distances = Vec::new();
        for key in &order {
            let group = &groups[key];
            for (i, a) in group.iter().enumerate() {
                let nearest = group
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .filter_map(|(_, b)| a.distance(b))
                    .min_by(|x, y| x.total_cmp(y));
                distances.extend(nearest);
            }
        }
        NeighbourDistances {
            scope: scope.into(),
            tasks: seen.len(),
            groups: order.len(),
            distances,
        }
    }

    /// The quantiles of [`NeighbourDistances::distances`]; `None` without any.
    pub fn quantiles(&self) -> Option<Quantiles> {
        Quantiles::of(&self.distances)
    }
}

/// A whole study: census at every level, coverage at one level, neighbour distances.
#[derive(Clone, Debug, PartialEq)]
pub struct Study {
    /// The level of [`Study::coverage`].
    pub level: Level,
    /// Model names, in the order given.
    pub models: Vec<String>,
    /// Per model, its census at exact, structural and family level ([`Level::ALL`] order).
    pub census: Vec<[Census; 3]>,
    /// Coverage at [`Study::level`].
    pub coverage: Coverage,
    /// Per model, distances among its own tasks.
    pub neighbours: Vec<NeighbourDistances>,
    /// Distances among the distinct tasks of all models together.
    pub pooled: NeighbourDistances,
}

impl Study {
    /// The study of `models` (in this order), with the coverage matrix at `level`.
    pub fn new(models: &[ModelTasks], level: Level) -> Study {
        Study {
            level,
            models: models.iter().map(|m| m.name.clone()).collect(),
            census: models
                .iter()
                .map(|m| Level::ALL.map(|l| Census::of(&m.tasks, l)))
                .collect(),
            coverage: Coverage::of(models, level),
            neighbours: models
                .iter()
                .map(|m| NeighbourDistances::among(m.name.clone(), &m.tasks))
                .collect(),
            pooled: NeighbourDistances::among("*", models.iter().flat_map(|m| &m.tasks)),
        }
    }

    /// The census as a Markdown table: one row per model, occurrences, then distinct keys and
    /// repetition at each level.
    pub fn census_markdown(&self) -> String {
        let mut out = String::from(
            "| model | occurrences | exact | structural | family | repetition exact | repetition structural | repetition family |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for (name, census) in self.models.iter().zip(&self.census) {
            let [e, s, f] = census;
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
                e.occurrences,
                e.distinct,
                s.distinct,
                f.distinct,
                e.repetition(),
                s.repetition(),
                f.repetition()
            );
        }
        out
    }

    /// The coverage matrix as a Markdown table (rows: covered model, columns: covering model,
    /// then `others`: covered by all other models together).
    pub fn coverage_markdown(&self) -> String {
        let mut out = format!("| {} coverage |", self.level.name());
        for name in &self.models {
            let _ = write!(out, " {name} |");
        }
        out.push_str(" others |\n|---|");
        out.push_str(&"---:|".repeat(self.models.len() + 1));
        out.push('\n');
        let rows = self.models.iter().zip(&self.coverage.matrix);
        for ((name, row), others) in rows.zip(&self.coverage.by_others) {
            let _ = write!(out, "| {name} |");
            for v in row {
                let _ = write!(out, " {v:.3} |");
            }
            let _ = writeln!(out, " {others:.3} |");
        }
        out
    }

    /// Neighbour distance quantiles as a Markdown table, per model and pooled (`*`).
    pub fn neighbours_markdown(&self) -> String {
        let mut out = String::from(
            "| scope | tasks | structural groups | with neighbour | min | p25 | median | p75 | p90 | max |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for n in self.neighbours.iter().chain(std::iter::once(&self.pooled)) {
            let _ = write!(
                out,
                "| {} | {} | {} | {} |",
                n.scope,
                n.tasks,
                n.groups,
                n.distances.len()
            );
            match n.quantiles() {
                Some(q) => {
                    for v in [q.min, q.p25, q.median, q.p75, q.p90, q.max] {
                        let _ = write!(out, " {v:.3} |");
                    }
                }
                None => out.push_str(&" - |".repeat(6)),
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests;
