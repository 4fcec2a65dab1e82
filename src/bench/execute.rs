//! Execution: walk the plan framework by framework through a [`Lab`], judge
//! every cell after each of its rounds and store it at once.
//!
//! This module owns the order of operations and the failure rules: a
//! framework that cannot start is recorded and skipped; scenarios that fail
//! verification become rejected cells; a server that dies is restarted and
//! the round that saw it die keeps the evidence; a database that dies
//! rejects its cell by name and ends that framework's work; a container
//! that cannot be removed is an incident; a container engine that stops
//! answering ends the run ([`RunOutcome::EngineLost`]) with every result
//! kept; Ctrl-C (the [`Cancel`] token) stops at once, stops the server and
//! leaves valid results behind.
//! It must not talk to Docker or the loader directly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use chrono::Utc;
use tokio::sync::Notify;

use super::budget::{choose, need, Candidate, Spending};
use super::lab::{Lab, Measured, Urls};
use super::store::Store;
use crate::judge::gates::{finish_cell, judged_probe, left_out, machine_reference, GateContext};
use crate::plan::spec::RunSpec;
use crate::plan::{FrameworkPlan, Plan, Step};
use crate::results::{
    Budget, BudgetEnd, Cell, CellKey, Incident, PhaseTimes, Round, Skipped, Thresholds,
    VerifyOutcome,
};

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
        /// Scenarios verified, each in every protocol the run speaks to
        /// the framework in: (scenario, protocol) pairs.
        verified: usize,
        /// Those excluded, each with the check it failed.
        excluded: &'a [crate::results::Exclusion],
    },
    /// A round starts.
    Step {
        /// The cell.
        key: &'a CellKey,
        /// Round, 0-based.
        round: u32,
        /// Steps finished in the whole run before this one.
        done: usize,
        /// Set when this round measures again round `again` (0-based) of
        /// the cell, which was left out (slowed machine or busy host).
        again: Option<u32>,
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
    /// The first pass of a run with a budget ended: what the rest of the
    /// budget is expected to buy.
    Budget(&'a Budget),
    /// Frameworks that sit out block `round` (0-based) because the whole
    /// block did not fit in the budget.
    SatOut {
        /// The block.
        round: u32,
        /// Frameworks left out of it.
        names: &'a [&'a str],
    },
    /// Work on a framework (or one segment of it) ended: where its wall
    /// time went.
    Phases {
        /// Framework name.
        name: &'a str,
        /// Seconds by phase.
        phases: &'a PhaseTimes,
    },
}

/// Receives [`Event`]s.
pub trait Observer {
    /// Called for every event, in order.
    fn on(&mut self, event: &Event<'_>);
}

/// Discards events.
#[cfg(test)]
pub struct Silent;

#[cfg(test)]
impl Observer for Silent {
    fn on(&mut self, _: &Event<'_>) {}
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every planned step ran (or was recorded as impossible).
    Finished,
    /// Cancelled before the end; what was measured is stored.
    Interrupted,
    /// The container engine stopped answering (a daemon restarted or went
    /// away): the run ended there, what was measured is stored, and an
    /// incident says what failed. `--resume` measures the rest.
    EngineLost,
}

/// Rules of the run besides the plan.
#[derive(Debug, Clone)]
pub struct RunRules {
    /// Gate thresholds.
    pub thresholds: Thresholds,
    /// Preflight failed and the run was forced.
    pub environment_forced: bool,
}

/// What a run executes: the plan's steps, the specs of their containers
/// and the rules their cells are judged by.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    /// The steps, in order.
    pub plan: &'a Plan,
    /// What each container gets.
    pub spec: &'a RunSpec,
    /// Gate thresholds and the environment verdict.
    pub rules: &'a RunRules,
    /// When the run started: the wait for its first round is timed from here.
    pub started: Instant,
}

/// Run every step of the job's plan not already in `store`.
///
/// With interleaved rounds the plan's segments come in blocks (one round of
/// every framework); a profile's `budget:` decides, block by block past
/// the first pass, which of them run ([`super::budget`]).
pub async fn execute<L: Lab>(
    lab: &mut L,
    store: &mut Store,
    job: Job<'_>,
    observer: &mut dyn Observer,
    cancel: &Cancel,
) -> anyhow::Result<RunOutcome> {
    let plan = job.plan;
    let segments = plan.segments();
    let total = segments.len();
    // The budget's time begins with the first framework, on the lab's
    // clock; image builds are left out of it.
    let spending = match (plan.budget, plan.precision) {
        (Some(b), Some(_)) if plan.interleave_rounds => Some(Spending::new(lab.now(), b)),
        _ => None,
    };
    let mut runner = Runner {
        done: count_done(store, plan),
        lab,
        store,
        observer,
        job,
        cancel,
        phases: PhaseTimes::default(),
        first_round: None,
        spending,
    };
    let per_block = if plan.interleave_rounds {
        plan.frameworks.len().max(1)
    } else {
        1
    };
    let mut blocks: Vec<Vec<(usize, &FrameworkPlan, Vec<Step>)>> = Vec::new();
    for (i, (fw, steps)) in segments.into_iter().enumerate() {
        if i % per_block == 0 {
            blocks.push(Vec::new());
        }
        if let Some(b) = blocks.last_mut() {
            b.push((i, fw, steps));
        }
    }
    let mut outcome = RunOutcome::Finished;
    let mut out_of_budget = false;
    for (b, block) in blocks.into_iter().enumerate() {
        match runner.block(b as u32, block, total).await? {
            BlockOutcome::Ran => {}
            BlockOutcome::OutOfBudget => {
                out_of_budget = true;
                break;
            }
            BlockOutcome::Ended(o) => {
                outcome = o;
                break;
            }
        }
    }
    runner.budget_ended(outcome, out_of_budget)?;
    Ok(outcome)
}

/// How a block of segments ended.
enum BlockOutcome {
    /// Its segments ran (or had nothing left to do); the next follows.
    Ran,
    /// Rounds were still wanted but none fitted in what is left of the
    /// budget: the run's rounds end here.
    OutOfBudget,
    /// The run ends here (interrupted, engine lost).
    Ended(RunOutcome),
}

fn step_done(store: &Store, step: &Step) -> bool {
    store
        .results()
        .cell(&step.key)
        .is_some_and(|c| store.results().is_done(c) || c.has_round(step.round))
}

fn count_done(store: &Store, plan: &Plan) -> usize {
    plan.frameworks
        .iter()
        .flat_map(|f| plan.steps_of(f))
        .filter(|s| step_done(store, s))
        .count()
}

/// A running server and the URLs it answers on.
struct Running<S> {
    server: S,
    urls: Urls,
}

/// The executor's state while it works through the plan.
struct Runner<'a, L: Lab> {
    lab: &'a mut L,
    store: &'a mut Store,
    observer: &'a mut dyn Observer,
    job: Job<'a>,
    cancel: &'a Cancel,
    /// Steps finished in the whole run (for progress).
    done: usize,
    /// Where the current segment's time went so far.
    phases: PhaseTimes,
    /// When the run's first loader was asked for.
    first_round: Option<Instant>,
    /// The budget's clock and estimates, when the profile has one.
    spending: Option<Spending>,
}

impl<L: Lab> Runner<'_, L> {
    /// Run block `round`'s segments (`index`: each one's place among the
    /// run's `total`): those with steps left, of frameworks that have not
    /// failed, and, past the first pass of a run with a budget, only those
    /// that fit in it.
    async fn block(
        &mut self,
        round: u32,
        block: Vec<(usize, &FrameworkPlan, Vec<Step>)>,
        total: usize,
    ) -> anyhow::Result<BlockOutcome> {
        let mut pending = Vec::new();
        for (i, fw, steps) in block {
            let steps: Vec<Step> = steps
                .into_iter()
                .filter(|s| !step_done(self.store, s))
                .collect();
            // A framework that failed in an earlier segment (interleaved
            // rounds) is not started again: its failure is recorded once.
            let failed = self
                .store
                .results()
                .framework(&fw.name)
                .is_some_and(|f| f.failure.is_some());
            if !steps.is_empty() && !failed {
                pending.push((i, fw, steps));
            }
        }
        let budgeted = self.spending.is_some() && round >= self.job.plan.min_rounds;
        if budgeted && round == self.job.plan.min_rounds {
            self.expect()?;
        }
        if budgeted && !pending.is_empty() {
            let chosen = self.choose(&pending);
            if chosen.is_empty() {
                return Ok(BlockOutcome::OutOfBudget);
            }
            let sat_out: Vec<&str> = pending
                .iter()
                .enumerate()
                .filter(|(k, _)| !chosen.contains(k))
                .map(|(_, (_, fw, _))| fw.name.as_str())
                .collect();
            let n = sat_out.len() as u32;
            if n > 0 {
                self.observer.on(&Event::SatOut {
                    round,
                    names: &sat_out,
                });
            }
            self.store.update(|r| {
                if let Some(b) = r.budget.as_mut() {
                    b.blocks += 1;
                    b.sat_out += n;
                }
            })?;
            pending = pending
                .into_iter()
                .enumerate()
                .filter(|(k, _)| chosen.contains(k))
                .map(|(_, p)| p)
                .collect();
        }
        let began = self.lab.now();
        let builds_before = self.spending.as_ref().map_or(0.0, Spending::builds_total);
        let ran = !pending.is_empty();
        for (i, fw, steps) in pending {
            if self.cancel.is_cancelled() {
                return Ok(BlockOutcome::Ended(RunOutcome::Interrupted));
            }
            self.observer.on(&Event::Framework {
                name: &fw.name,
                index: i + 1,
                total,
            });
            let seg_began = self.lab.now();
            let (seg_rounds, seg_builds) = self
                .spending
                .as_ref()
                .map_or((0.0, 0.0), |s| (s.rounds_total(), s.builds_total()));
            let outcome = self.framework(fw, steps).await?;
            let wall = self.lab.now().saturating_duration_since(seg_began);
            if let Some(s) = self.spending.as_mut() {
                let rounds = s.rounds_total() - seg_rounds;
                let builds = s.builds_total() - seg_builds;
                s.segment(&fw.name, wall.as_secs_f64() - builds, rounds);
            }
            if outcome != RunOutcome::Finished {
                return Ok(BlockOutcome::Ended(outcome));
            }
        }
        if ran && !budgeted {
            if let Some(s) = self.spending.as_mut() {
                // A block's image builds are not its cost.
                let wall = self
                    .lab
                    .now()
                    .saturating_duration_since(began)
                    .as_secs_f64();
                s.first_pass_blocks
                    .push(wall - (s.builds_total() - builds_before));
            }
        }
        Ok(BlockOutcome::Ran)
    }

    /// After the first pass: store and report what the rest of the budget
    /// is expected to buy.
    fn expect(&mut self) -> anyhow::Result<()> {
        let (Some(s), Some(asked)) = (self.spending.as_ref(), self.job.plan.precision) else {
            return Ok(());
        };
        let now = self.lab.now();
        let first_pass = s.spent(now);
        let left = s.left(now);
        let block = s.block();
        let most = self.job.plan.rounds - self.job.plan.min_rounds;
        self.store.update(|r| {
            if let Some(b) = r.budget.as_mut() {
                b.first_pass_s = Some(first_pass);
                if let Some(block) = block {
                    super::budget::expect(b, &r.cells, asked, left, block, most);
                }
            }
        })?;
        if let Some(b) = self.store.results().budget.as_ref() {
            self.observer.on(&Event::Budget(b));
        }
        Ok(())
    }

    /// Which of a block's pending segments run within the budget: indices
    /// into `pending`.
    fn choose(&self, pending: &[(usize, &FrameworkPlan, Vec<Step>)]) -> Vec<usize> {
        let (Some(s), Some(asked)) = (self.spending.as_ref(), self.job.plan.precision) else {
            return (0..pending.len()).collect();
        };
        let results = self.store.results();
        let candidates: Vec<Candidate> = pending
            .iter()
            .map(|(_, fw, steps)| Candidate {
                need: steps
                    .iter()
                    .map(|st| need(results.cell(&st.key), asked))
                    .fold(0.0, f64::max),
                cost: s.estimate(&fw.name, steps.len()),
            })
            .collect();
        choose(&candidates, s.left(self.lab.now()))
    }

    /// Store why the run's budgeted rounds stopped.
    fn budget_ended(&mut self, outcome: RunOutcome, out_of_budget: bool) -> anyhow::Result<()> {
        let Some(s) = self.spending.as_ref() else {
            return Ok(());
        };
        let spent = s.spent(self.lab.now());
        let ended = match outcome {
            RunOutcome::Finished if out_of_budget => BudgetEnd::Budget,
            RunOutcome::Finished => BudgetEnd::Precise,
            RunOutcome::Interrupted | RunOutcome::EngineLost => BudgetEnd::CutShort,
        };
        self.store.update(|r| {
            if let Some(b) = r.budget.as_mut() {
                // A run whose rounds all ended in the first pass.
                b.first_pass_s.get_or_insert(spent);
                // A resume of a run its budget ended measures nothing
                // more and keeps why.
                if b.ended != Some(BudgetEnd::Budget) {
                    b.ended = Some(ended);
                }
            }
        })
    }

    fn incident(&mut self, framework: &str, at: Option<&Step>, what: String) -> anyhow::Result<()> {
        let inc = Incident {
            at: Utc::now(),
            framework: framework.to_string(),
            cell: at.map(|s| s.key.clone()),
            round: at.map(|s| s.round),
            what,
        };
        self.observer.on(&Event::Incident(&inc));
        self.store.update(|r| r.incidents.push(inc))
    }

    /// Have the lab build `name`'s image if it builds images as they are
    /// needed, and record the image and the time it took.
    async fn prepare(&mut self, name: &str) -> anyhow::Result<()> {
        let began = self.lab.now();
        let prepared = self.lab.prepare(self.job.spec.server(name)?).await;
        if let Some(s) = self.spending.as_mut() {
            s.built(
                self.lab
                    .now()
                    .saturating_duration_since(began)
                    .as_secs_f64(),
            );
        }
        let Some(p) = prepared? else {
            return Ok(());
        };
        let after_first_round = self.first_round.is_some();
        self.store.update(|r| {
            record_image(r.framework_mut(name), &p.image);
            r.timing.image_check_s += p.seconds;
            if after_first_round {
                r.timing.builds_after_first_round_s += p.seconds;
            }
            if let Some(load) = p.load_after {
                r.timing.load_after_builds =
                    Some(r.timing.load_after_builds.map_or(load, |l| l.max(load)));
            }
        })
    }

    /// `name` could not begin (its image did not build, its server did not
    /// start): it fails with `why`, its cells are skipped for that reason,
    /// and an incident says so; the run moves on.
    fn not_begun(&mut self, name: &str, why: String) -> anyhow::Result<()> {
        self.store.update(|r| {
            r.framework_mut(name).failure = Some(why.clone());
            r.skipped.push(Skipped {
                framework: name.to_string(),
                scenario: None,
                protocol: None,
                reason: why.clone(),
            });
        })?;
        self.incident(name, None, why)
    }

    /// Start (or restart) the server, recording the cold start and limits.
    async fn start(&mut self, name: &str) -> anyhow::Result<Running<L::Server>> {
        let (server, started) = self.lab.start(self.job.spec.server(name)?).await?;
        self.phases.start_s += started.start_s;
        self.phases.readiness_s += started.readiness_s;
        self.observer.on(&Event::Started {
            name,
            cold_start_ms: started.cold_start_ms,
        });
        self.store.update(|r| {
            let f = r.framework_mut(name);
            f.cold_start_ms.extend(started.cold_start_ms);
            if started.cold_start_ms.is_some() && started.cold_start_is_upper_bound {
                f.cold_start_upper_bounds += 1;
            }
            if started.limits.is_some() {
                f.limits = started.limits.clone();
            }
        })?;
        Ok(Running {
            server,
            urls: started.urls,
        })
    }

    /// Stop the server in `slot` and start a fresh one.
    async fn restart(
        &mut self,
        name: &str,
        slot: &mut Option<Running<L::Server>>,
    ) -> anyhow::Result<()> {
        if let Some(old) = slot.take() {
            let t = Instant::now();
            self.lab
                .stop(old.server)
                .await
                .with_context(|| format!("stopping {name}"))?;
            self.phases.teardown_s += t.elapsed().as_secs_f64();
        }
        *slot = Some(self.start(name).await?);
        Ok(())
    }

    /// Start `fw`'s server, run `steps` on it and stop it. A failure inside
    /// one framework's work is recorded and the run moves on.
    async fn framework(
        &mut self,
        fw: &FrameworkPlan,
        steps: Vec<Step>,
    ) -> anyhow::Result<RunOutcome> {
        let name = fw.name.as_str();
        // Its image first, when the lab builds images as they are needed:
        // outside the segment's phases (the image check's time).
        if let Err(e) = self.prepare(name).await {
            if let Some(lost) = self.engine_lost(name, &e).await? {
                return Ok(lost);
            }
            self.not_begun(name, format!("its image did not build: {e:#}"))?;
            return Ok(RunOutcome::Finished);
        }
        let began = Instant::now();
        self.phases = PhaseTimes::default();
        let server = match self.start(name).await {
            Ok(s) => s,
            Err(e) => {
                if let Some(lost) = self.engine_lost(name, &e).await? {
                    self.close_phases(name, began)?;
                    return Ok(lost);
                }
                self.not_begun(name, format!("could not start: {e:#}"))?;
                self.close_phases(name, began)?;
                return Ok(RunOutcome::Finished);
            }
        };
        // The running server, if any: restarts replace it, a failed restart
        // leaves None so the final stop below has nothing to do.
        let mut slot = Some(server);
        let result = self.steps(fw, steps, &mut slot).await;
        let stopping = Instant::now();
        let stopped = match slot.take() {
            Some(r) => self.lab.stop(r.server).await,
            None => Ok(()),
        };
        self.phases.teardown_s += stopping.elapsed().as_secs_f64();
        self.close_phases(name, began)?;
        match result {
            Ok(RunOutcome::Interrupted) => Ok(RunOutcome::Interrupted),
            Ok(RunOutcome::EngineLost) => Ok(RunOutcome::EngineLost),
            Ok(RunOutcome::Finished) => {
                // A container left behind is reported and the run goes on
                // (cleanup at the run's end removes what carries its
                // label); only a daemon that went away ends it.
                if let Err(e) = stopped {
                    if let Some(lost) = self.engine_lost(name, &e).await? {
                        return Ok(lost);
                    }
                    let what = format!("could not stop or remove its container: {e:#}");
                    eprintln!("warning: {name}: {what}");
                    self.incident(name, None, what)?;
                }
                Ok(RunOutcome::Finished)
            }
            Err(e) => {
                if let Some(lost) = self.engine_lost(name, &e).await? {
                    return Ok(lost);
                }
                let why = format!("{e:#}");
                self.store.update(|r| {
                    r.framework_mut(name).failure = Some(why.clone());
                })?;
                self.incident(name, None, why)?;
                Ok(RunOutcome::Finished)
            }
        }
    }

    /// When `e` came from a container engine that no longer answers: an
    /// incident saying so, and the outcome that ends the run. The
    /// framework is not marked failed, so `--resume` measures it again.
    async fn engine_lost(
        &mut self,
        name: &str,
        e: &anyhow::Error,
    ) -> anyhow::Result<Option<RunOutcome>> {
        if self.lab.engine_reachable().await {
            return Ok(None);
        }
        let what = format!(
            "the container engine stopped answering (a Docker daemon that restarted or went away): {e:#}; the run ends here with every measured result kept"
        );
        self.incident(name, None, what)?;
        Ok(Some(RunOutcome::EngineLost))
    }

    /// The database of `name` died in `step`'s round: the cell is rejected
    /// naming it (with the rounds it has), the framework is marked failed
    /// with the same words, and its remaining cells are left.
    fn database_down(&mut self, name: &str, step: &Step, what: String) -> anyhow::Result<()> {
        let rounds = self
            .store
            .results()
            .cell(&step.key)
            .map(|c| c.rounds.clone())
            .unwrap_or_default();
        let mut cell = finish_cell(step.key.clone(), rounds, &self.gates())?;
        let mut reasons = std::mem::take(&mut cell.verdict.reasons);
        reasons.push(crate::results::Reason::DatabaseDown {
            round: step.round,
            what: what.clone(),
        });
        cell.verdict = crate::results::Verdict::from_reasons(reasons);
        self.store.append_cell(cell)?;
        let why = format!(
            "{what} during round {} of {}; its remaining cells were not measured",
            step.round + 1,
            step.key
        );
        self.store.update(|r| {
            r.framework_mut(name).failure = Some(why.clone());
        })?;
        self.incident(name, Some(step), why)
    }

    /// Store where the segment of `name` that began at `began` spent its
    /// time (what no phase covers is `between`), and the run's clock.
    fn close_phases(&mut self, name: &str, began: Instant) -> anyhow::Result<()> {
        let mut phases = self.phases;
        phases.between_s = (began.elapsed().as_secs_f64() - phases.total_s()).max(0.0);
        let started = self.job.started;
        let first = self.first_round;
        self.store.update(|r| {
            r.framework_mut(name).phases.add(&phases);
            r.timing.phases.add(&phases);
            if let Some(first) = first {
                r.timing.to_first_round_s = (first - started).as_secs_f64();
                r.timing.first_round_to_end_s = first.elapsed().as_secs_f64();
            }
        })?;
        self.observer.on(&Event::Phases {
            name,
            phases: &phases,
        });
        self.phases = PhaseTimes::default();
        Ok(())
    }

    /// What the gates need besides the rounds (no verify failure).
    fn gates(&self) -> GateContext<'_> {
        GateContext {
            thresholds: &self.job.rules.thresholds,
            environment_forced: self.job.rules.environment_forced,
            verify_failure: None,
            rounds_planned: self.job.plan.rounds,
            rounds_min: self.job.plan.min_rounds,
            precise: false,
            closed_loop_pipeline: self
                .job
                .plan
                .rate
                .is_none()
                .then_some(self.job.plan.pipeline),
            http2_streams: self.job.plan.streams,
        }
    }

    /// Idle memory and verification once per framework (a resumed run that
    /// already has them keeps the first ones); scenarios verification
    /// excludes become rejected cells with no rounds.
    async fn verify(
        &mut self,
        fw: &FrameworkPlan,
        running: &Running<L::Server>,
    ) -> anyhow::Result<VerifyOutcome> {
        let name = fw.name.as_str();
        let known = self
            .store
            .results()
            .framework(name)
            .and_then(|f| f.verify.clone());
        let outcome = match known {
            Some(v) => v,
            None => {
                self.lab.expect_loader(self.job.spec.loader_template());
                let t = Instant::now();
                let idle = self
                    .lab
                    .idle_memory(&running.server, self.job.spec.idle_settle)
                    .await?;
                self.phases.settle_s += t.elapsed().as_secs_f64();
                let t = Instant::now();
                let verified = self.verify_protocols(fw, running).await?;
                self.phases.verify_s += t.elapsed().as_secs_f64();
                self.store.update(|r| {
                    let f = r.framework_mut(name);
                    f.idle_memory_bytes = idle;
                    f.verify = Some(verified.clone());
                })?;
                verified
            }
        };
        self.observer.on(&Event::Verified {
            name,
            verified: fw.scenarios.len() * fw.protocols.len(),
            excluded: &outcome.excluded,
        });
        let plan = self.job.plan;
        for ex in &outcome.excluded {
            for key in plan
                .cells_of(fw)
                .into_iter()
                .filter(|k| k.scenario == ex.scenario && k.protocol == ex.protocol)
            {
                if self.store.is_done(&key) {
                    continue;
                }
                let mut ctx = self.gates();
                ctx.verify_failure = Some(&ex.reason);
                let cell = finish_cell(key, Vec::new(), &ctx)?;
                self.store.append_cell(cell)?;
                self.done += plan.rounds as usize;
            }
        }
        Ok(outcome)
    }

    /// Verify `fw` in each protocol the run speaks to it in, http1 first:
    /// a scenario is excluded in the protocols whose verification it
    /// failed, and passes when it failed in none.
    async fn verify_protocols(
        &mut self,
        fw: &FrameworkPlan,
        running: &Running<L::Server>,
    ) -> anyhow::Result<VerifyOutcome> {
        let tls = self.job.spec.certs().map(|c| crate::verify::VerifyTls {
            ca_pem: c.ca_pem.clone().into_bytes(),
            name: crate::plan::spec::TLS_SERVER_NAME.to_string(),
        });
        let mut all = VerifyOutcome::default();
        for &protocol in &fw.protocols {
            let v = self
                .lab
                .verify(&running.server, &fw.scenarios, protocol, tls.as_ref())
                .await?;
            all.checks += v.checks;
            all.failed += v.failed;
            all.excluded.extend(v.excluded);
        }
        all.passed = fw
            .scenarios
            .iter()
            .filter(|s| !all.excluded.iter().any(|e| e.scenario == **s))
            .copied()
            .collect();
        Ok(all)
    }

    async fn steps(
        &mut self,
        fw: &FrameworkPlan,
        steps: Vec<Step>,
        slot: &mut Option<Running<L::Server>>,
    ) -> anyhow::Result<RunOutcome> {
        let name = fw.name.as_str();
        let outcome = self.verify(fw, running(slot)?).await?;
        let mut last_round = steps.first().map(|s| s.round);
        let mut measured = Vec::new();
        for step in steps {
            if self.cancel.is_cancelled() {
                return Ok(RunOutcome::Interrupted);
            }
            if outcome
                .excluded
                .iter()
                .any(|e| e.scenario == step.key.scenario && e.protocol == step.key.protocol)
            {
                continue;
            }
            // Rounds past the least run only while their cell lacks the
            // asked precision (an earlier round of this segment may have
            // given it).
            if self.job.plan.is_conditional(&step) && step_done(self.store, &step) {
                self.done += 1;
                continue;
            }
            if let Some(ended) = self
                .measure_step(name, &step, None, &mut last_round, slot)
                .await?
            {
                return Ok(ended);
            }
            measured.push(step);
        }
        // A fixed number of rounds: each round left out of its cell's
        // figures (slowed machine, busy host) is measured once more, after
        // the segment's other steps, so the repeat falls outside the spell
        // that slowed it when that spell is short. Rounds that go on until
        // precise need no repeat: the left-out round does not count towards
        // the precision, so the cell's next round follows by itself.
        if self.job.plan.precision.is_none() {
            for step in &measured {
                self.recheck_slowed(step)?;
            }
            for step in measured {
                if !self.left_out(&step) {
                    continue;
                }
                let again = Step {
                    round: self.next_round(&step.key),
                    key: step.key.clone(),
                };
                if let Some(ended) = self
                    .measure_step(name, &again, Some(step.round), &mut last_round, slot)
                    .await?
                {
                    return Ok(ended);
                }
            }
        }
        Ok(RunOutcome::Finished)
    }

    /// Measure `step` on the running server (restarting it first when the
    /// profile restarts between rounds) and store its cell; `again` names
    /// the left-out round it measures again. A round that could not be
    /// measured is an incident; the run goes on. `Some`: the framework's
    /// work ends here (`Finished`: its database died, the next framework
    /// follows), or the run's does (`Interrupted`, `EngineLost`).
    async fn measure_step(
        &mut self,
        name: &str,
        step: &Step,
        again: Option<u32>,
        last_round: &mut Option<u32>,
        slot: &mut Option<Running<L::Server>>,
    ) -> anyhow::Result<Option<RunOutcome>> {
        if self.job.plan.restart_between_rounds && *last_round != Some(step.round) {
            self.restart(name, slot).await?;
        }
        *last_round = Some(step.round);
        self.observer.on(&Event::Step {
            key: &step.key,
            round: step.round,
            done: self.done,
            again,
        });
        let cancel = self.cancel;
        self.first_round.get_or_insert_with(Instant::now);
        let began = self.lab.now();
        let measured = tokio::select! {
            m = measure_round(self.lab, self.job.spec, step, running(slot)?) => m,
            () = cancel.cancelled() => return Ok(Some(RunOutcome::Interrupted)),
        };
        let wall = self.lab.now().saturating_duration_since(began);
        if let Some(s) = self.spending.as_mut() {
            s.round(wall.as_secs_f64());
        }
        // A repeat is on top of the planned steps the progress counts.
        if again.is_none() {
            self.done += 1;
        }
        match measured {
            Ok(m) => {
                self.phases.add(&m.phases);
                // A database found dead is named before the server's own
                // death would restart both.
                let down = self.lab.dependency_down(&running(slot)?.server).await?;
                self.store_round(name, step, m, slot, down.is_none())
                    .await?;
                if let Some(what) = down {
                    self.database_down(name, step, what)?;
                    return Ok(Some(RunOutcome::Finished));
                }
            }
            Err(e) => {
                let what = format!("round {} not measured: {e:#}", step.round + 1);
                self.incident(name, Some(step), what)?;
                if let Some(lost) = self.engine_lost(name, &e).await? {
                    return Ok(Some(lost));
                }
                // A round that failed because the database died (a sampler
                // or loader error) names the database, not only the error.
                if let Some(what) = self.lab.dependency_down(&running(slot)?.server).await? {
                    self.database_down(name, step, what)?;
                    return Ok(Some(RunOutcome::Finished));
                }
                if !self.lab.alive(&running(slot)?.server).await? {
                    self.restart(name, slot).await?;
                }
            }
        }
        Ok(None)
    }

    /// Whether `step`'s round, as stored, is left out of its cell's figures.
    fn left_out(&self, step: &Step) -> bool {
        self.store
            .results()
            .cell(&step.key)
            .and_then(|c| c.rounds.iter().find(|r| r.index == step.round))
            .is_some_and(|r| left_out(r, &self.job.rules.thresholds))
    }

    /// The index of a cell's next round: one past its highest (repeats
    /// come after the planned rounds).
    fn next_round(&self, key: &CellKey) -> u32 {
        self.store
            .results()
            .cell(key)
            .and_then(|c| c.rounds.iter().map(|r| r.index).max())
            .map_or(self.job.plan.rounds, |m| (m + 1).max(self.job.plan.rounds))
    }

    /// The probe's verdict on `round` of `key`: slowed when it read more
    /// than `thresholds.slowed_machine` above the framework's fast
    /// reference over its rounds so far (this one included). Only rounds
    /// whose server kept its core busy are judged, and only they make the
    /// reference (`gates::judged_probe`).
    fn slowed(&self, key: &CellKey, round: &Round) -> Option<crate::results::Slowed> {
        let t = &self.job.rules.thresholds;
        let now = judged_probe(round)?;
        if t.off.slowed_machine {
            return None;
        }
        let earlier = self
            .store
            .results()
            .cells
            .iter()
            .filter(|c| c.key.framework == key.framework)
            .flat_map(|c| {
                c.rounds
                    .iter()
                    .filter(move |r| !(c.key == *key && r.index == round.index))
            })
            .filter_map(judged_probe);
        let reference = machine_reference(earlier.chain([now]))?;
        crate::results::Slowed::judge(now, reference, t.slowed_machine)
    }

    /// Judge the cell with its new round and store it; restart a server
    /// that did not survive the round.
    async fn store_round(
        &mut self,
        name: &str,
        step: &Step,
        m: Measured,
        slot: &mut Option<Running<L::Server>>,
        restart_dead: bool,
    ) -> anyhow::Result<()> {
        let mut round = m.into_round(step.round)?;
        round.slowed = self.slowed(&step.key, &round);
        let alive = self.lab.alive(&running(slot)?.server).await?;
        if !alive && round.server.restarts == 0 {
            round.server.restarts = 1;
        }
        let mut rounds = self
            .store
            .results()
            .cell(&step.key)
            .map(|c| c.rounds.clone())
            .unwrap_or_default();
        rounds.retain(|r| r.index != step.round);
        rounds.push(round.clone());
        rounds.sort_by_key(|r| r.index);
        self.judge_and_store(&step.key, rounds)?;
        // As stored: with the rank and precision the store gave it.
        if let Some(cell) = self.store.results().cell(&step.key) {
            self.observer.on(&Event::Stored {
                cell,
                round: &round,
            });
        }
        if !alive && restart_dead {
            let what = format!(
                "the server was not running after round {}; restarted",
                step.round + 1
            );
            self.incident(name, Some(step), what)?;
            self.restart(name, slot).await?;
        }
        Ok(())
    }
}

impl<L: Lab> Runner<'_, L> {
    /// Judge a cell's rounds and store the cell.
    fn judge_and_store(&mut self, key: &CellKey, rounds: Vec<Round>) -> anyhow::Result<()> {
        let mut cell = finish_cell(key.clone(), rounds, &self.gates())?;
        // A cell whose rounds reached the asked precision is judged as
        // precise: its CV is what that precision allows.
        let asked = self.job.plan.precision;
        if crate::compare::precision::of(&cell, asked).is_some_and(|p| p.met()) {
            let ctx = GateContext {
                precise: true,
                ..self.gates()
            };
            cell = finish_cell(key.clone(), cell.rounds, &ctx)?;
        }
        self.store.append_cell(cell)
    }

    /// Judge `step`'s stored round again by the probe, now that the
    /// framework has more rounds (the segment's first rounds had only
    /// themselves to go by); a round found slowed is marked and its cell
    /// judged and stored again. A mark is never taken back.
    fn recheck_slowed(&mut self, step: &Step) -> anyhow::Result<()> {
        let Some(cell) = self.store.results().cell(&step.key) else {
            return Ok(());
        };
        let mut rounds = cell.rounds.clone();
        let Some(round) = rounds.iter_mut().find(|r| r.index == step.round) else {
            return Ok(());
        };
        if round.slowed.is_some() {
            return Ok(());
        }
        let Some(slowed) = self.slowed(&step.key, round) else {
            return Ok(());
        };
        round.slowed = Some(slowed);
        self.judge_and_store(&step.key, rounds)
    }
}

fn running<S>(slot: &Option<Running<S>>) -> anyhow::Result<&Running<S>> {
    slot.as_ref()
        .ok_or_else(|| anyhow::anyhow!("no server is running"))
}

/// Measure one round of a step: one loader run warms up (for a fixed time,
/// or until stable: the loader decides) and measures on the same
/// connections.
async fn measure_round<L: Lab>(
    lab: &mut L,
    spec: &RunSpec,
    step: &Step,
    running: &Running<L::Server>,
) -> anyhow::Result<Measured> {
    let url = running.urls.of(step.key.protocol).ok_or_else(|| {
        anyhow::anyhow!(
            "{} is not reachable in {} on this run",
            step.key.framework,
            step.key.protocol
        )
    })?;
    let loader = spec.loader(&step.key, step.round, url);
    lab.measure(&running.server, &loader).await
}

/// What a run records of a framework's image: its id and size, the size of
/// its one binary (compiled frameworks run one `/app`; interpreters and
/// JVMs have none) and the versions read from it.
pub(super) fn record_image(
    f: &mut crate::results::FrameworkFacts,
    img: &crate::docker::images::ImageInfo,
) {
    f.binary_size_bytes = img.app_binary_bytes;
    f.image_id = Some(img.id.clone());
    f.image_size_bytes = img.size_bytes;
    if let Some(text) = &img.versions {
        f.versions = text
            .lines()
            .filter_map(|l| l.trim().split_once(char::is_whitespace))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect();
    }
}
