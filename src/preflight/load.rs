//! Load: is the box already busy? 1-minute load average against the cores,
//! steal and iowait over the 1-second sample, the busiest other processes,
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

/// Machine busy share (percent of all CPU time, over one second) below which
/// a high load average is only the echo of work that already ended (a
/// compile just before the run): the average lags by about a minute.
pub const QUIET_NOW_BUSY_PCT: f64 = 15.0;

/// How the wait for a lagging load average ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// The average was within the limit (at once or after `waited_s`).
    Quiet {
        /// Seconds waited.
        waited_s: f64,
    },
    /// Something is busy right now: waiting would not help; preflight
    /// judges it.
    BusyNow {
        /// Machine busy share over one second, percent.
        busy_pct: f64,
    },
    /// Still above the limit after the longest wait; preflight judges it.
    GaveUp {
        /// The 1-minute load average at the end.
        load_1m: f64,
    },
}

/// Before preflight judges `load.avg`: when the 1-minute average is above
/// `limit` per core but the machine is quiet now, wait (up to `max_wait`)
/// for the average to catch up instead of refusing the run for work that
/// already finished. `note` is told once when waiting starts.
pub fn wait_for_quiet(
    root: &std::path::Path,
    cores: usize,
    limit: f64,
    max_wait: std::time::Duration,
    mut note: impl FnMut(&str),
) -> Settled {
    let started = std::time::Instant::now();
    let mut told = false;
    loop {
        let la = crate::host::proc::read_loadavg(root);
        let Some(la) = la else {
            return Settled::Quiet { waited_s: 0.0 };
        };
        if la / cores.max(1) as f64 <= limit {
            return Settled::Quiet {
                waited_s: started.elapsed().as_secs_f64(),
            };
        }
        let busy = super::measure::sample_cpu(root, std::time::Duration::from_secs(1))
            .map_or(0.0, |s| s.busy_pct);
        if busy > QUIET_NOW_BUSY_PCT {
            return Settled::BusyNow { busy_pct: busy };
        }
        if started.elapsed() >= max_wait {
            return Settled::GaveUp { load_1m: la };
        }
        if !told {
            note(&format!(
                "host load average {la:.2} on {cores} cores is above {limit:.2} per core, but the \
                 machine is {busy:.0}% busy now: the average lags by a minute, waiting up to {} for it \
                 to settle",
                humantime::format_duration(max_wait)
            ));
            told = true;
        }
        std::thread::sleep(std::time::Duration::from_secs(4));
    }
}

/// `load.avg`: 1-minute load average per online core before the run.
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
                let verdict = if per_core > limit { CheckStatus::Fail } else { CheckStatus::Pass };
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
/// one recorded before it. The run's own CPUs explain part of any rise; a
/// rise beyond them plus a margin means something else ran in the window.
pub fn judge_after_run(report: &EnvReport, now: Option<f64>) -> CheckResult {
    let cores = report.host.cores_online.unwrap_or(1).max(1) as f64;
    let own = run_cpus(report);
    let margin = LOAD_ROSE_MARGIN_PER_CORE * cores;
    let why = "a load that rose beyond what the run itself explains means other work shared \
               the measurement window";
    let remedy = "rerun the cells measured in this window when the host is quiet";
    let (verdict, measured, threshold) = match (report.host.loadavg_1m, now) {
        (Some(before), Some(after)) => {
            let limit = before + own + margin;
            (
                if after > limit { CheckStatus::Warn } else { CheckStatus::Pass },
                format!("1-minute load {before:.2} before, {after:.2} after"),
                format!(
                    "≤ {limit:.2} (before + {own} CPUs of the run + {LOAD_ROSE_MARGIN_PER_CORE} per core)"
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
    vec![Box::new(LoadAvg), Box::new(LoadSteal), Box::new(LoadBusy)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_host_with_a_lagging_average_waits_then_gives_up_at_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let proc_dir = dir.path().join("proc");
        std::fs::create_dir_all(&proc_dir).unwrap();
        // Idle /proc/stat (it does not move) and a high average.
        std::fs::write(proc_dir.join("stat"), "cpu  1 0 1 1000 0 0 0 0 0 0\n").unwrap();
        std::fs::write(proc_dir.join("loadavg"), "2.20 1.50 0.90 1/100 42\n").unwrap();
        let mut notes = Vec::new();
        let s = wait_for_quiet(dir.path(), 2, 0.5, std::time::Duration::ZERO, |n| {
            notes.push(n.to_string())
        });
        assert_eq!(s, Settled::GaveUp { load_1m: 2.2 });
        std::fs::write(proc_dir.join("loadavg"), "0.40 1.50 0.90 1/100 42\n").unwrap();
        let s = wait_for_quiet(dir.path(), 2, 0.5, std::time::Duration::ZERO, |_| {});
        assert!(matches!(s, Settled::Quiet { .. }), "{s:?}");
    }

    #[test]
    fn loadavg_first_field_is_the_one_minute_average() {}
}
