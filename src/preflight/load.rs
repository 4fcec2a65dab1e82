//! Load: is the box already busy? CPU busy with other work now (over the
//! 1-second sample, fairground's own processes excluded), the 1-minute load
//! average against the cores (it lags: it judges only when nothing was
//! sampled), steal and iowait over the sample, the busiest other processes,
//! and (after the run) whether the load rose more than the run explains.
//!
//! The Go library page measured the same targets 3.5-8.5x slower in a window
//! with load average 90-105 on 14 cores: an overloaded window voids results.

use super::{Check, CheckResult, CheckStatus, Env, EnvReport, Family, Judgement};

/// Steal share (percent of all CPU time) above which the hypervisor is
/// visibly giving our CPUs to others. Source: judgement — a couple of
/// percent is within run-to-run noise (≈ 2-5% CV on a quiet box).
pub const STEAL_WARN_PCT: f64 = 2.0;
/// Steal share above which figures are reduced by more than any effect
/// worth reporting (10% of the CPU is gone, unevenly).
pub const STEAL_FAIL_PCT: f64 = 10.0;
/// iowait share above which something is hammering the disk during the run
/// (page cache reclaim, a compile, a backup) and competes for memory bandwidth.
pub const IOWAIT_WARN_PCT: f64 = 10.0;
/// CPU share of one core above which another process counts as busy: a
/// fifth of a core is more than background daemons use on a quiet host.
pub const OTHER_PROCESS_WARN_PCT: f64 = 20.0;
/// Rise of the 1-minute load per online core, beyond what the run's own
/// CPUs explain, that marks a run whose window was disturbed.
pub const LOAD_ROSE_MARGIN_PER_CORE: f64 = 0.5;

/// `load.now`: CPU busy right now, over the 1-second sample, minus what
/// fairground and its own processes used: the foreign load the run would
/// share the machine with.
pub struct LoadNow;

impl Check for LoadNow {
    fn id(&self) -> &'static str {
        "load.now"
    }
    fn family(&self) -> Family {
        Family::Load
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let limit = env.input.load_per_core_limit;
        let why = "other work running now takes CPU from the server and the loader; \
                   figures then measure the neighbours";
        let threshold = format!(
            "≤ {:.0}% of all CPU time busy with other work ({limit:.2} busy cores per core), \
             over the sample",
            limit * 100.0
        );
        let remedy = "wait for other work (builds, tests, other benchmarks) to finish, or stop \
                      it; load.busy names the busiest processes";
        let Some(s) = &env.probes.sample else {
            return Judgement::new(
                CheckStatus::Warn,
                "not sampled (/proc/stat unreadable); load.avg judges the load instead",
                threshold,
                why,
                remedy,
            );
        };
        let foreign = (s.busy_pct - s.own_busy_pct).max(0.0);
        Judgement::new(
            CheckStatus::pass_or(foreign <= limit * 100.0, CheckStatus::Fail),
            format!(
                "{foreign:.0}% of all CPU time busy with other work (machine {:.0}%, fairground \
                 {:.0}%) over {:.2} s (/proc/stat, /proc/*/stat)",
                s.busy_pct, s.own_busy_pct, s.seconds
            ),
            threshold,
            why,
            remedy,
        )
    }
}

/// `load.avg`: 1-minute load average per online core before the run. It
/// lags by about a minute (a compile that just ended still counts), so when
/// the present was sampled it only warns: `load.now` judges.
pub struct LoadAvg;

impl Check for LoadAvg {
    fn id(&self) -> &'static str {
        "load.avg"
    }
    fn family(&self) -> Family {
        Family::Load
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let limit = env.input.load_per_core_limit;
        let why = "a host already running other work gives the server and loader less CPU than \
                   they are told they have; figures then measure the neighbours";
        let threshold = format!("≤ {limit:.2} per online core (1-minute load average)");
        let remedy =
            "wait for other work (builds, tests, other benchmarks) to finish, or stop it; \
                      see load.busy for the busiest processes";
        let la = crate::host::proc::read_loadavg(env.root);
        let cores = env.online_cpus().map(|c| c.len()).filter(|n| *n > 0);
        match (la, cores) {
            (Some(la), Some(cores)) => {
                let per_core = la / cores as f64;
                let above = if env.probes.sample.is_some() {
                    CheckStatus::Warn
                } else {
                    CheckStatus::Fail
                };
                let verdict = CheckStatus::pass_or(per_core <= limit, above);
                Judgement::new(
                    verdict,
                    format!("{la:.2} on {cores} cores = {per_core:.2} per core"),
                    threshold,
                    why,
                    remedy,
                )
            }
            _ => Judgement::new(
                CheckStatus::Warn,
                "load average or cores online not readable (/proc/loadavg, /sys/devices/system/cpu/online)",
                threshold,
                why,
                remedy,
            ),
        }
    }
}

/// `load.steal`: steal and iowait over the 1-second sample.
pub struct LoadSteal;

impl Check for LoadSteal {
    fn id(&self) -> &'static str {
        "load.steal"
    }
    fn family(&self) -> Family {
        Family::Load
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why =
            "steal is CPU time the hypervisor gave to other guests: our cores were not ours; \
                   high iowait means disk work competing for the same machine";
        let threshold = format!(
            "steal pass < {STEAL_WARN_PCT}%, warn ≤ {STEAL_FAIL_PCT}%, fail above; iowait warn > {IOWAIT_WARN_PCT}%"
        );
        let remedy = "use dedicated (not overcommitted) vCPUs or bare metal; stop disk-heavy work";
        let Some(s) = &env.probes.sample else {
            return Judgement::new(
                CheckStatus::Warn,
                "not sampled (/proc/stat unreadable)",
                threshold,
                why,
                remedy,
            );
        };
        let mut verdict = if s.steal_pct > STEAL_FAIL_PCT {
            CheckStatus::Fail
        } else if s.steal_pct >= STEAL_WARN_PCT {
            CheckStatus::Warn
        } else {
            CheckStatus::Pass
        };
        if s.iowait_pct > IOWAIT_WARN_PCT {
            verdict = verdict.max(CheckStatus::Warn);
        }
        Judgement::new(
            verdict,
            format!(
                "steal {:.1}%, iowait {:.1}% of all CPU time over {:.2} s (/proc/stat)",
                s.steal_pct, s.iowait_pct, s.seconds
            ),
            threshold,
            why,
            remedy,
        )
    }
}

/// `load.busy`: the busiest other processes over the 1-second sample.
pub struct LoadBusy;

impl Check for LoadBusy {
    fn id(&self) -> &'static str {
        "load.busy"
    }
    fn family(&self) -> Family {
        Family::Load
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "another busy process takes CPU, cache and memory bandwidth from the run";
        let threshold = format!("no other process above {OTHER_PROCESS_WARN_PCT}% of a core");
        let remedy = "stop or wait for the processes named here before running";
        let Some(s) = &env.probes.sample else {
            return Judgement::new(CheckStatus::Warn, "not sampled", threshold, why, remedy);
        };
        let top = if s.top.is_empty() {
            "no other process used CPU".to_string()
        } else {
            s.top
                .iter()
                .map(|p| format!("{} (pid {}) {:.0}%", p.comm, p.pid, p.cpu_pct))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let verdict = CheckStatus::pass_or(
            s.top.iter().all(|p| p.cpu_pct <= OTHER_PROCESS_WARN_PCT),
            CheckStatus::Warn,
        );
        Judgement::new(
            verdict,
            format!(
                "machine {:.0}% busy; top: {top} (% of one core, over {:.2} s)",
                s.busy_pct, s.seconds
            ),
            threshold,
            why,
            remedy,
        )
    }
}

/// CPUs the run itself keeps busy: its pinned or quota CPUs, or every online
/// core when it gives none (an unlimited container can use them all).
fn run_cpus(report: &EnvReport) -> f64 {
    let i = &report.input;
    let count = |set: &Option<String>, cpus: Option<f64>| {
        set.as_deref()
            .and_then(|s| s.parse::<crate::host::CoreList>().ok())
            .map(|v| v.len() as f64)
            .or(cpus)
    };
    let cores = report.host.cores_online.unwrap_or(1) as f64;
    match (
        count(&i.server_cpuset, i.server_cpus),
        count(&i.loader_cpuset, i.loader_cpus),
    ) {
        (Some(s), Some(l)) => (s + l).min(cores),
        _ => cores,
    }
}

/// Judge the 1-minute load average `now` (read after the run) against the
/// one recorded before it, or the one right after the run's own image
/// builds (`after_builds`) when higher: those builds ran between rounds,
/// not in a window. The run's own CPUs explain part of any rise; a rise
/// beyond them plus a margin means something else ran in the window.
pub fn judge_after_run(
    report: &EnvReport,
    after_builds: Option<f64>,
    now: Option<f64>,
) -> CheckResult {
    let cores = report.host.cores_online.unwrap_or(1).max(1) as f64;
    let own = run_cpus(report);
    let margin = LOAD_ROSE_MARGIN_PER_CORE * cores;
    let why = "a load that rose beyond what the run itself explains means other work shared \
               the measurement window";
    let remedy = "rerun the cells measured in this window when the host is quiet";
    let (verdict, measured, threshold) = match (report.host.loadavg_1m, now) {
        (Some(before), Some(after)) => {
            let (start, builds) = match after_builds {
                Some(b) if b > before => (b, format!(" ({b:.2} after the run's image builds)")),
                _ => (before, String::new()),
            };
            let limit = start + own + margin;
            (
                if after > limit { CheckStatus::Warn } else { CheckStatus::Pass },
                format!("1-minute load {before:.2} before{builds}, {after:.2} after"),
                format!(
                    "≤ {limit:.2} ({} + {own} CPUs of the run + {LOAD_ROSE_MARGIN_PER_CORE} per core)",
                    if builds.is_empty() { "before" } else { "after the builds" }
                ),
            )
        }
        (before, after) => (
            CheckStatus::Warn,
            format!(
                "load average not readable (before {}, after {})",
                before.map_or("unknown".into(), |v| format!("{v:.2}")),
                after.map_or("unknown".into(), |v| format!("{v:.2}"))
            ),
            "both readings present".to_string(),
        ),
    };
    CheckResult {
        id: "load.after".into(),
        family: Family::Load,
        verdict,
        measured,
        threshold,
        why: why.into(),
        remedy: remedy.into(),
    }
}

/// The checks of this family (the after-run check is [`judge_after_run`]).
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![
        Box::new(LoadNow),
        Box::new(LoadAvg),
        Box::new(LoadSteal),
        Box::new(LoadBusy),
    ]
}
