//! `tune`: the run as the pipeline it is. Open the run (worker, target, cache), plan the
//! model with the target's named pipeline (partition, canonicalize, annotate-cache,
//! seed-schedules), then per task in tuning order: lower it, re-plan it with its TVM
//! workload hash and its part of the run budget, execute the plan (the search), write the
//! records back; then build and time the whole model. Each step's rule lives in the module
//! that owns it: the plan in `tgc_passes::seeding`, the budget in [`crate::budget`], the
//! search's decisions in [`crate::rules`].

use crate::budget::{RunBudget, Share, TunedTask, Turn};
use crate::build::zero_trial_records;
use crate::config::TuneConfig;
use crate::error::TuneError;
use crate::observer::Observer;
use crate::report::{best_of, PlanSource, Report, TaskBudget, TaskReport, UntunedTask};
use crate::rules::{SearchLimits, StopReason, WritebackScope};
use crate::run::{CacheUse, PreparedTask, Run};
use crate::search::{search, SearchJob, SearchOutcome};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Instant;
use tgc_cache::Workload;
use tgc_canonicalize::{extract_annotated_tasks, Task, TaskKey};
use tgc_ir::{Attr, Module};
use tgc_passes::annotate_cache::CANDIDATES_ATTR;
use tgc_passes::seed_schedules::{seed_plan, SEED_PLAN_ATTR};
use tgc_passes::seeding::{CandidateRef, Outcome, SeedPlan, SeedPolicy};
use tgc_tvm::{BuildResult, CostModelKind, Seed, Trials};

/// Tunes `module` as `config` says, reporting progress to `observer`.
pub fn tune(
    mut module: Module,
    config: &TuneConfig,
    observer: &mut dyn Observer,
) -> Result<Report, TuneError> {
    config.check().map_err(TuneError::Config)?;
    // An input that carries seed plans (printed by `tgc opt --passes tgc-cpu`, perhaps
    // edited by hand) is executed as written; otherwise the pipeline plans every task.
    let as_written = carries_plans(&module);
    if as_written && (config.run_trials.is_some() || config.time_budget_s.is_some()) {
        return Err(TuneError::Config(format!(
            "{}: the input carries seed plans, which are executed as written; a run budget (trials over the model, time) would re-plan them",
            config.model_name
        )));
    }
    let mut run = Run::open(config, "tgc-tune", CacheUse::Create, observer)?;
    if !as_written {
        run.plan_module(&mut module)?;
    }
    let tasks = extract_annotated_tasks(&module)
        .map_err(|e| TuneError::Config(format!("{}: {e}", config.model_name)))?;
    let order = tuning_order(&tasks, config.max_tasks);
    // The worker's one-time set-up of tuning happens before the clock starts, as the stock
    // TVM arm of the benchmarks does it; the report names its seconds apart.
    let prepare_tuning_s = match order.is_empty() {
        true => 0.0,
        false => run.worker.prepare_tuning()?.seconds,
    };
    observer.started(order.len());
    let started = Instant::now();
    let tuned = tune_tasks(&mut run, &mut module, &tasks, &order, !as_written, observer)?;
    let tuning_wall_s = started.elapsed().as_secs_f64();
    let (end_to_end, untuned, untuned_s) = measure_model(
        &mut run,
        &mut module,
        &tasks,
        &tuned.best,
        !as_written,
        observer,
    )?;
    let report = Report {
        model: config.model_name.clone(),
        target_spelling: run.requested.clone(),
        target: run.target_json.clone(),
        toolchain: run.toolchain.clone(),
        no_cache: config.no_cache,
        trials_per_task: config.policy.trials,
        cost_model_file: run.cost_model.clone(),
        tasks: tuned.reports,
        skipped: tuned.skipped,
        run_trials: config.run_trials,
        time_budget_s: config.time_budget_s,
        tuning_wall_s,
        prepare_tuning_s,
        end_to_end,
        untuned,
        untuned_s,
        rpc: config.rpc.clone().zip(run.rpc_devices.clone()),
    };
    run.finish();
    Ok(report)
}

/// What the tasks' tuning gave: a report per tuned task, the best trace per exact key (for
/// the final build), and the tasks a run budget did not reach.
struct Tuned {
    reports: Vec<TaskReport>,
    best: HashMap<TaskKey, Value>,
    skipped: Vec<String>,
}

/// Tunes `order`'s tasks one after the other, each with its part of the run budget, if any;
/// with `replan`, each is planned again just before it runs.
fn tune_tasks(
    run: &mut Run<'_>,
    module: &mut Module,
    tasks: &[Task],
    order: &[usize],
    replan: bool,
    observer: &mut dyn Observer,
) -> Result<Tuned, TuneError> {
    let config = run.config;
    let shares = order.iter().map(|&i| share_of(module, &tasks[i])).collect();
    let per_round = config.trials_per_round.max(1) as u64;
    let mut budget = RunBudget::new(config.run_trials, config.time_budget_s, shares, per_round);
    let mut tuned = Tuned {
        reports: Vec::with_capacity(order.len()),
        best: HashMap::new(),
        skipped: Vec::new(),
    };
    // per report: the task and the search effort its record now has behind it
    let mut ran: Vec<(&Task, u64)> = Vec::with_capacity(order.len());
    for (k, &ti) in order.iter().enumerate() {
        let task = &tasks[ti];
        let turn = budget.as_ref().map(|b| b.turn(k));
        if turn.is_some_and(|t| t.allocated == 0) {
            tuned.skipped.push(task.name.clone());
            continue;
        }
        let policy = replan.then(|| task_policy(run.policy(), turn));
        let (mut report, best, effort) = tune_task(
            run,
            task,
            module,
            policy.as_ref(),
            WritebackScope::Best,
            observer,
        )?;
        report.budget = turn.map(|t| TaskBudget {
            allocated: t.allocated,
            cold_share: t.cold_share,
        });
        if let Some(b) = budget.as_mut() {
            b.spend(report.trials, report.wall_s);
        }
        if let Some(best) = best {
            tuned.best.insert(task.keys.exact, best);
        }
        observer.task_finished(&report);
        tuned.reports.push(report);
        ran.push((task, effort));
    }
    if let (Some(b), true) = (budget.as_mut(), replan) {
        second_turns(run, module, b, &mut ran, &mut tuned, observer)?;
    }
    Ok(tuned)
}

/// Under a run budget, what the tasks' turns left (exact hits, patience, the cap on a
/// task's share) goes a round at a time to the tasks whose search their allocation cut
/// short or an exact hit ended, each round to the one with the largest expected gain at
/// that moment ([`RunBudget::second_turn`]): its search resumes from its record for one
/// round. Searches that patience or the space ended get none; a task whose round did not
/// improve its best by more than the seed tolerance, or ended before its trials, gets no
/// other. A turn re-measures and writes back only what it found beyond its seeds
/// ([`WritebackScope::BeyondSeeds`]): its improvement is a new schedule's, never a seed's
/// lucky window.
fn second_turns(
    run: &mut Run<'_>,
    module: &mut Module,
    budget: &mut RunBudget,
    ran: &mut [(&Task, u64)],
    tuned: &mut Tuned,
    observer: &mut dyn Observer,
) -> Result<(), TuneError> {
    let tolerance = run.policy().tolerance;
    let mut closed: Vec<bool> = tuned
        .reports
        .iter()
        .map(|r| !matches!(r.stopped, StopReason::Budget | StopReason::ExactHit))
        .collect();
    loop {
        let candidates: Vec<Option<TunedTask>> = ran
            .iter()
            .zip(&tuned.reports)
            .zip(&closed)
            .map(|(((task, effort), r), &closed)| {
                r.best_s.map(|best_s| TunedTask {
                    occurrences: task.occurrences,
                    flops: task.features.flops,
                    best_s,
                    open: !closed && *effort > 0,
                })
            })
            .collect();
        let Some((i, trials)) = budget.second_turn(&candidates) else {
            return Ok(());
        };
        let (task, effort) = ran[i];
        // the record's effort plus one round: the exact hit is not final, its search resumes
        let policy = SeedPolicy {
            trials: (effort + trials) as i64,
            hit_effort: 0,
            ..run.policy()
        };
        let (later, best, later_effort) = tune_task(
            run,
            task,
            module,
            Some(&policy),
            WritebackScope::BeyondSeeds,
            observer,
        )?;
        budget.spend(later.trials, later.wall_s);
        let before = tuned.reports[i].best_s;
        observer.second_turn_finished(&later, best_of(before, later.best_s));
        let improved = match (before, later.best_s) {
            (Some(b), Some(l)) => l < b * (1.0 - tolerance),
            (None, Some(_)) => true,
            _ => false,
        };
        if improved {
            if let Some(best) = best {
                tuned.best.insert(task.keys.exact, best);
            }
        } else {
            closed[i] = true;
        }
        if later.trials == 0 || later.stopped != StopReason::Budget {
            closed[i] = true;
        }
        ran[i].1 = later_effort.max(effort);
        tuned.reports[i].absorb(later);
    }
}

/// The seed policy a task is re-planned with: the run's, and under a run budget its
/// allocation as its trials and the effort that makes its exact hit final.
fn task_policy(run_policy: SeedPolicy, turn: Option<Turn>) -> SeedPolicy {
    match turn {
        Some(t) => SeedPolicy {
            trials: t.allocated as i64,
            hit_effort: t.hit_effort as i64,
            ..run_policy
        },
        None => run_policy,
    }
}

/// One task: lower and re-plan it (with `policy`; `None`: its plan as written), execute the
/// plan, write back its records (those `writeback` re-measures). Returns its report, its
/// best trace and the search effort its records were written with.
fn tune_task(
    run: &mut Run<'_>,
    task: &Task,
    module: &mut Module,
    policy: Option<&SeedPolicy>,
    writeback: WritebackScope,
    observer: &mut dyn Observer,
) -> Result<(TaskReport, Option<Value>, u64), TuneError> {
    let PreparedTask {
        task_json,
        lowered,
        replanned,
        plan,
        seeds,
    } = run.prepare_task(task, module, policy, observer)?;
    observer.task_started(&task.name, &plan);
    let seed_source = seeds.first().map_or(Value::Null, |(_, s)| s.clone());
    let seeds = seeds.into_iter().map(|(seed, _)| seed).collect();
    let job = search_job(run, &task.name, task_json, &plan, seeds, writeback);
    let config = run.config;
    let result = search(&mut run.worker, &job, &config.search, &mut run.builds)?;
    warn_of_failures(&task.name, &result, observer);
    let effort = plan.effort(match result.stopped {
        StopReason::ExactHit => Outcome::ExactHit,
        reason => Outcome::Searched {
            trials: result.trials,
            converged: matches!(reason, StopReason::Patience | StopReason::Exhausted),
        },
    });
    let workload = Workload {
        tvm_hash: lowered.structural_hash,
        json: lowered.workload_json,
    };
    let written = run.write_back(task, Some(workload), &result, effort, "tune", observer)?;
    let best = result.records.first().map(|r| r.trace.clone());
    let report = TaskReport::of(
        task,
        plan,
        result,
        written,
        lowered.structural_hash,
        seed_source,
        match policy {
            Some(_) => PlanSource::Pipeline { replanned },
            None => PlanSource::Input,
        },
    );
    Ok((report, best, effort))
}

/// The search a task's plan runs as: the plan's budget, patience, goal and exact hit,
/// the run's search settings, cost model and devices.
fn search_job(
    run: &Run<'_>,
    name: &str,
    task: Value,
    plan: &SeedPlan,
    seeds: Vec<Seed>,
    writeback: WritebackScope,
) -> SearchJob {
    let per_round = run.config.trials_per_round.max(1) as Trials;
    let max_trials = plan.trials.max(1) as Trials;
    SearchJob {
        open: run.session(name, task, max_trials, per_round, CostModelKind::Xgb),
        seeds,
        limits: SearchLimits {
            max_trials,
            per_round,
            patience: plan.patience.max(0) as u64,
            goal_s: plan.goal_latency_s,
            tolerance: plan.tolerance,
        },
        exact: plan.cached_latency_s.map(|c| (c, plan.control_latency_s)),
        seeds_only: false,
        writeback,
    }
}

/// Failed measurements and cost-model problems, as warnings.
fn warn_of_failures(task: &str, result: &SearchOutcome, observer: &mut dyn Observer) {
    if result.failed_runs > 0 {
        observer.warning(&format!(
            "task {task}: {} of {} measurements failed (first: {})",
            result.failed_runs,
            result.trials,
            result
                .run_errors
                .first()
                .map_or("no message", String::as_str)
        ));
    }
    for e in &result.cost_model.errors {
        observer.warning(e);
    }
}

/// Builds the whole model with the best trace per tuned task, and every other task with its
/// best cached or transferred records ([`untuned_records`]), and times it; unless the run
/// does not measure (or measures on RPC devices: the model would run here, not there).
/// Returns the measurement, the untuned tasks and the seconds their records took.
fn measure_model(
    run: &mut Run<'_>,
    module: &mut Module,
    tasks: &[Task],
    best: &HashMap<TaskKey, Value>,
    replan: bool,
    observer: &mut dyn Observer,
) -> Result<(Option<BuildResult>, Vec<UntunedTask>, f64), TuneError> {
    if !run.config.measure {
        return Ok((None, Vec::new(), 0.0));
    }
    if run.config.rpc.is_some() {
        observer.warning(
            "--rpc: the whole model is not timed (build_and_measure runs it on this machine, not on the device); the report's end_to_end is null",
        );
        return Ok((None, Vec::new(), 0.0));
    }
    observer.measuring();
    let mut records = tasks
        .iter()
        .filter_map(|t| {
            best.get(&t.keys.exact)
                .map(|trace| (t, vec![trace.clone()]))
        })
        .collect::<Vec<_>>();
    let rest: Vec<&Task> = tasks
        .iter()
        .filter(|t| !best.contains_key(&t.keys.exact))
        .collect();
    let started = Instant::now();
    let (mut untuned, more) = untuned_records(run, module, &rest, replan, observer)?;
    records.extend(more);
    let untuned_s = started.elapsed().as_secs_f64();
    let measured = run.build_model(module, &records, None)?;
    for u in &mut untuned {
        u.applied = measured.applied.get(&u.name).copied().flatten();
    }
    Ok((Some(measured), untuned, untuned_s))
}

/// Records per task, as the whole model's build takes them.
type TaskRecords<'t> = Vec<(&'t Task, Vec<Value>)>;

/// The tasks the run did not tune, each with the records `tgc build` would apply at zero
/// trials: its own cached records, else its neighbours' for transfer (re-planned first, with
/// what this run wrote, unless the plans were given); none without a cache.
fn untuned_records<'t>(
    run: &mut Run<'_>,
    module: &mut Module,
    rest: &[&'t Task],
    replan: bool,
    observer: &mut dyn Observer,
) -> Result<(Vec<UntunedTask>, TaskRecords<'t>), TuneError> {
    let (mut untuned, mut records) = (Vec::new(), Vec::new());
    for &task in rest {
        let mut u = UntunedTask {
            name: task.name.clone(),
            occurrences: task.occurrences,
            tier: None,
            records: 0,
            applied: None,
        };
        if run.cache.is_some() {
            let policy = replan.then(|| run.policy());
            let p = run.prepare_task(task, module, policy.as_ref(), observer)?;
            let r = zero_trial_records(&p.plan, &p.seeds);
            (u.tier, u.records) = (p.plan.tier, r.len());
            if !r.is_empty() {
                records.push((task, r));
            }
        }
        untuned.push(u);
    }
    Ok((untuned, records))
}

/// Structural groups in order of first appearance, each with its most frequent task first;
/// with `max_tasks`, only that many tasks, the most frequent ones.
fn tuning_order(tasks: &[Task], max_tasks: Option<usize>) -> Vec<usize> {
    let mut groups: Vec<(TaskKey, Vec<usize>)> = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        match groups.iter_mut().find(|(k, _)| *k == t.keys.structural) {
            Some((_, members)) => members.push(i),
            None => groups.push((t.keys.structural, vec![i])),
        }
    }
    for (_, members) in groups.iter_mut() {
        members.sort_by_key(|&i| std::cmp::Reverse(tasks[i].occurrences));
    }
    let mut order: Vec<usize> = groups.iter().map(|(_, m)| m[0]).collect();
    order.extend(groups.iter().flat_map(|(_, m)| m[1..].iter().copied()));
    if let Some(max) = max_tasks {
        let mut by_use = order.clone();
        by_use.sort_by_key(|&i| std::cmp::Reverse(tasks[i].occurrences));
        let keep: std::collections::HashSet<usize> = by_use.into_iter().take(max).collect();
        order.retain(|i| keep.contains(i));
    }
    order
}

/// What the run budget knows about a task from its annotations: occurrences, FLOPs, its
/// best exact candidate's latency (else the plan's goal) and the search effort behind it.
fn share_of(module: &Module, task: &Task) -> Share {
    let f = module
        .function(&task.name)
        .expect("tasks name functions of the module");
    let best_exact = f
        .attrs
        .get(CANDIDATES_ATTR)
        .and_then(Attr::as_list)
        .into_iter()
        .flatten()
        .filter_map(|a| CandidateRef::from_attr(a).ok())
        .filter(|c| c.tier.is_exact())
        .min_by(|a, b| a.latency_s.total_cmp(&b.latency_s));
    let goal = seed_plan(f).ok().flatten().and_then(|p| p.goal_latency_s);
    Share {
        occurrences: task.occurrences,
        flops: task.features.flops,
        latency_s: best_exact.as_ref().map(|c| c.latency_s).or(goal),
        exact_effort: best_exact.map(|c| c.trials),
        exact_seeds: 0,
    }
}

/// Whether any task of `module` already carries a seed plan (an IR that `tgc opt --passes
/// tgc-cpu` printed, perhaps edited by hand).
fn carries_plans(module: &Module) -> bool {
    module
        .functions
        .values()
        .any(|f| f.is_primitive() && f.attrs.contains_key(SEED_PLAN_ATTR))
}
