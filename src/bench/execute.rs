//! Execution: walk the plan framework by framework through a [`Lab`], judge
//! every cell after each of its rounds and store it at once.
//!
//! This module owns the order of operations and the failure rules: a
//! framework that cannot start is recorded and skipped; scenarios that fail
//! verification become rejected cells; a server that dies is restarted and
//! the round that saw it die keeps the evidence; Ctrl-C (the [`Cancel`]
//! token) stops at once, stops the server and leaves valid results behind.
//! It must not talk to Docker or the loader directly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use chrono::Utc;
use tokio::sync::Notify;

use super::gates::{finish_cell, GateContext};
use super::lab::Lab;
use super::plan::{FrameworkPlan, Plan, Step};
use super::store::Store;
use crate::results::{Cell, CellKey, Incident, Round, Skipped, Thresholds};

/// A cancellation flag that can also be awaited (set by the Ctrl-C handler).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<(AtomicBool, Notify)>);

impl Cancel {
    /// A token that is not cancelled.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ask everything watching this token to stop.
    pub fn cancel(&self) {
        self.0 .0.store(true, Ordering::SeqCst);
        self.0 .1.notify_waiters();
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0 .0.load(Ordering::SeqCst)
    }

    /// Resolves once the token is cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0 .1.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// What the pipeline reports while it works (progress bars, plain lines).
#[derive(Debug)]
pub enum Event<'a> {
    /// Work on a framework begins.
    Framework {
        /// Framework name.
        name: &'a str,
        /// 1-based position among the run's frameworks.
        index: usize,
        /// Number of frameworks.
        total: usize,
    },
    /// A server answered its readiness path.
    Started {
        /// Framework name.
        name: &'a str,
        /// Cold start, ms.
        cold_start_ms: Option<f64>,
    },
    /// Verification finished.
    Verified {
        /// Framework name.
        name: &'a str,
        /// Scenarios excluded.
        excluded: usize,
    },
    /// A round starts.
    Step {
        /// The cell.
        key: &'a CellKey,
        /// Round, 0-based.
        round: u32,
        /// Steps finished in the whole run before this one.
        done: usize,
    },
    /// A round finished and its cell was stored.
    Stored {
        /// The cell, with every round so far and its verdict.
        cell: &'a Cell,
        /// The round just measured.
        round: &'a Round,
    },
    /// Something went wrong and was recorded; the run goes on.
    Incident(&'a Incident),
}

/// Receives [`Event`]s.
pub trait Observer {
    /// Called for every event, in order.
    fn on(&mut self, event: &Event<'_>);
}

/// Discards events.
pub struct Silent;

impl Observer for Silent {
    fn on(&mut self, _: &Event<'_>) {}
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every planned step ran (or was recorded as impossible).
    Finished,
    /// Cancelled before the end; what was measured is stored.
    Interrupted,
}

/// Rules of the run besides the plan.
#[derive(Debug, Clone)]
pub struct RunRules {
    /// Gate thresholds.
    pub thresholds: Thresholds,
    /// Preflight failed and the run was forced.
    pub environment_forced: bool,
}

/// Run every step of `plan` not already in `store`.
pub async fn execute<L: Lab>(
    lab: &mut L,
    store: &mut Store,
    plan: &Plan,
    rules: &RunRules,
    observer: &mut dyn Observer,
    cancel: &Cancel,
) -> anyhow::Result<Outcome> {
    let total = plan.frameworks.len();
    let mut done = count_done(store, plan);
    for (i, fw) in plan.frameworks.iter().enumerate() {
        if cancel.is_cancelled() {
            return Ok(Outcome::Interrupted);
        }
        let steps: Vec<Step> = plan
            .steps_of(fw)
            .into_iter()
            .filter(|s| !step_done(store, s))
            .collect();
        if steps.is_empty() {
            continue;
        }
        observer.on(&Event::Framework {
            name: &fw.name,
            index: i + 1,
            total,
        });
        let outcome = run_framework(
            lab, store, plan, fw, steps, rules, observer, cancel, &mut done,
        )
        .await?;
        if outcome == Outcome::Interrupted {
            return Ok(Outcome::Interrupted);
        }
    }
    Ok(Outcome::Finished)
}

fn step_done(store: &Store, step: &Step) -> bool {
    store
        .results()
        .cell(&step.key)
        .is_some_and(|c| c.is_complete() || c.has_round(step.round))
}

fn count_done(store: &Store, plan: &Plan) -> usize {
    plan.frameworks
        .iter()
        .flat_map(|f| plan.steps_of(f))
        .filter(|s| step_done(store, s))
        .count()
}

fn incident(
    store: &mut Store,
    observer: &mut dyn Observer,
    framework: &str,
    key: Option<&CellKey>,
    round: Option<u32>,
    what: String,
) -> anyhow::Result<()> {
    let inc = Incident {
        at: Utc::now(),
        framework: framework.to_string(),
        cell: key.cloned(),
        round,
        what,
    };
    observer.on(&Event::Incident(&inc));
    store.update(|r| r.incidents.push(inc))
}

/// Start (or restart) the server, recording the cold start and limits.
async fn start<L: Lab>(
    lab: &mut L,
    store: &mut Store,
    name: &str,
    observer: &mut dyn Observer,
) -> anyhow::Result<L::Server> {
    let (server, started) = lab.start(name).await?;
    observer.on(&Event::Started {
        name,
        cold_start_ms: started.cold_start_ms,
    });
    store.update(|r| {
        let f = r.framework_mut(name);
        f.cold_start_ms.extend(started.cold_start_ms);
        if started.cold_start_ms.is_some() && started.cold_start_is_upper_bound {
            f.cold_start_upper_bounds += 1;
        }
        if started.limits.is_some() {
            f.limits = started.limits.clone();
        }
    })?;
    Ok(server)
}

/// Everything `run_framework` and its steps share.
struct Job<'a> {
    plan: &'a Plan,
    fw: &'a FrameworkPlan,
    rules: &'a RunRules,
    cancel: &'a Cancel,
}

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
async fn run_framework<L: Lab>(
    lab: &mut L,
    store: &mut Store,
    plan: &Plan,
    fw: &FrameworkPlan,
    steps: Vec<Step>,
    rules: &RunRules,
    observer: &mut dyn Observer,
    cancel: &Cancel,
    done: &mut usize,
) -> anyhow::Result<Outcome> {
    let name = fw.name.as_str();
    let server = match start(lab, store, name, observer).await {
        Ok(s) => s,
        Err(e) => {
            let why = format!("could not start: {e:#}");
            store.update(|r| {
                r.framework_mut(name).failure = Some(why.clone());
                r.skipped.push(Skipped {
                    framework: name.to_string(),
                    scenario: None,
                    reason: why.clone(),
                });
            })?;
            incident(store, observer, name, None, None, why)?;
            return Ok(Outcome::Finished);
        }
    };
    let job = Job {
        plan,
        fw,
        rules,
        cancel,
    };
    // The running server, if any: restarts replace it, a failed restart
    // leaves None so the final stop below has nothing to do.
    let mut slot = Some(server);
    let result = framework_steps(lab, store, &job, steps, observer, done, &mut slot).await;
    let stopped = match slot.take() {
        Some(server) => lab.stop(server).await,
        None => Ok(()),
    };
    match result {
        Ok(Outcome::Interrupted) => Ok(Outcome::Interrupted),
        Ok(Outcome::Finished) => {
            stopped.with_context(|| format!("stopping {name}"))?;
            Ok(Outcome::Finished)
        }
        Err(e) => {
            // A failure inside one framework's work is recorded; the run
            // moves on to the next framework.
            let why = format!("{e:#}");
            store.update(|r| {
                r.framework_mut(name).failure = Some(why.clone());
            })?;
            incident(store, observer, name, None, None, why)?;
            Ok(Outcome::Finished)
        }
    }
}

/// Stop the server in `slot` and start a fresh one.
async fn restart<L: Lab>(
    lab: &mut L,
    store: &mut Store,
    name: &str,
    observer: &mut dyn Observer,
    slot: &mut Option<L::Server>,
) -> anyhow::Result<()> {
    if let Some(old) = slot.take() {
        lab.stop(old)
            .await
            .with_context(|| format!("stopping {name}"))?;
    }
    *slot = Some(start(lab, store, name, observer).await?);
    Ok(())
}

fn running<S>(slot: &Option<S>) -> anyhow::Result<&S> {
    slot.as_ref()
        .ok_or_else(|| anyhow::anyhow!("no server is running"))
}

async fn framework_steps<L: Lab>(
    lab: &mut L,
    store: &mut Store,
    job: &Job<'_>,
    steps: Vec<Step>,
    observer: &mut dyn Observer,
    done: &mut usize,
    slot: &mut Option<L::Server>,
) -> anyhow::Result<Outcome> {
    let (plan, fw, rules) = (job.plan, job.fw, job.rules);
    let name = fw.name.as_str();
    // Idle memory and verification once per framework (a resumed run that
    // already has them keeps the first ones).
    let known = store
        .results()
        .framework(name)
        .and_then(|f| f.verify.clone());
    let outcome = match known {
        Some(v) => v,
        None => {
            let idle = lab.idle_memory(running(slot)?).await?;
            let verified = lab.verify(running(slot)?, &fw.scenarios).await?;
            store.update(|r| {
                let f = r.framework_mut(name);
                f.idle_memory_bytes = idle;
                f.verify = Some(verified.outcome.clone());
                f.binary_size_bytes = f.binary_size_bytes.or(verified.binary_size_bytes);
                f.app_lines_of_code = f.app_lines_of_code.or(verified.app_lines_of_code);
            })?;
            verified.outcome
        }
    };
    observer.on(&Event::Verified {
        name,
        excluded: outcome.excluded.len(),
    });
    // Excluded scenarios become rejected cells with no rounds.
    for ex in &outcome.excluded {
        for key in plan
            .cells_of(fw)
            .into_iter()
            .filter(|k| k.scenario == ex.scenario)
        {
            if store.is_done(&key) {
                continue;
            }
            let ctx = GateContext {
                thresholds: &rules.thresholds,
                environment_forced: rules.environment_forced,
                verify_failure: Some(&ex.reason),
                rounds_planned: plan.rounds,
            };
            store.append_cell(finish_cell(key, Vec::new(), &ctx)?)?;
            *done += plan.rounds as usize;
        }
    }

    let mut last_round = steps.first().map(|s| s.round);
    for step in steps {
        if job.cancel.is_cancelled() {
            return Ok(Outcome::Interrupted);
        }
        if outcome
            .excluded
            .iter()
            .any(|e| e.scenario == step.key.scenario)
        {
            continue;
        }
        if plan.restart_between_rounds && last_round != Some(step.round) {
            restart(lab, store, name, observer, slot).await?;
        }
        last_round = Some(step.round);
        observer.on(&Event::Step {
            key: &step.key,
            round: step.round,
            done: *done,
        });
        let measured = tokio::select! {
            m = lab.measure(running(slot)?, &step.key, step.round) => m,
            () = job.cancel.cancelled() => return Ok(Outcome::Interrupted),
        };
        let m = match measured {
            Ok(m) => m,
            Err(e) => {
                incident(
                    store,
                    observer,
                    name,
                    Some(&step.key),
                    Some(step.round),
                    format!("round {} not measured: {e:#}", step.round + 1),
                )?;
                if !lab.alive(running(slot)?).await? {
                    restart(lab, store, name, observer, slot).await?;
                }
                *done += 1;
                continue;
            }
        };
        let mut round = m.into_round(step.round)?;
        let alive = lab.alive(running(slot)?).await?;
        if !alive && round.server.restarts == 0 {
            round.server.restarts = 1;
        }
        let mut rounds = store
            .results()
            .cell(&step.key)
            .map(|c| c.rounds.clone())
            .unwrap_or_default();
        rounds.retain(|r| r.index != step.round);
        rounds.push(round.clone());
        rounds.sort_by_key(|r| r.index);
        let ctx = GateContext {
            thresholds: &rules.thresholds,
            environment_forced: rules.environment_forced,
            verify_failure: None,
            rounds_planned: plan.rounds,
        };
        let cell = finish_cell(step.key.clone(), rounds, &ctx)?;
        store.append_cell(cell.clone())?;
        *done += 1;
        observer.on(&Event::Stored {
            cell: &cell,
            round: &round,
        });
        if !alive {
            incident(
                store,
                observer,
                name,
                Some(&step.key),
                Some(step.round),
                format!(
                    "the server was not running after round {}; restarted",
                    step.round + 1
                ),
            )?;
            restart(lab, store, name, observer, slot).await?;
        }
    }
    Ok(Outcome::Finished)
}
