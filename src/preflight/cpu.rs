//! CPU: cores online against what the run pins, SMT siblings, frequency
//! governor, turbo, clock source.
//!
//! A loader that shares cores with the server measures its own contention;
//! a powersave governor or turbo makes the clock depend on load and heat; a
//! slow clock source (hpet, acpi_pm) makes every timestamp a costly read.

use super::{Check, CheckStatus, Env, Family, Judgement};
use crate::host::CoreList;

/// A kernel CPU list (`0-3,8`) as sorted CPU numbers.
fn cpu_list(s: &str) -> Result<Vec<usize>, String> {
    s.parse::<CoreList>().map(|c| c.to_vec())
}

fn fmt_list(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// `cpu.cores`: cores online against the cores the run gives server and loader.
pub struct CpuCores;

impl Check for CpuCores {
    fn id(&self) -> &'static str {
        "cpu.cores"
    }
    fn family(&self) -> Family {
        Family::Cpu
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "a loader that shares cores with the server takes CPU from it: the figures \
                   then measure the contention, not the server";
        let remedy = "pin server and loader to disjoint cpusets that fit the cores online (or \
                      set allow_shared_cores on a machine too small to separate them)";
        let threshold = "server and loader on disjoint online cores (server + loader ≤ online)";
        let Some(online) = env.online_cpus() else {
            return Judgement::new(
                CheckStatus::Warn,
                "cores online not exposed (/sys/devices/system/cpu/online)",
                threshold,
                why,
                remedy,
            );
        };
        let input = env.input;
        let parse = |s: &Option<String>| -> Result<Option<Vec<usize>>, String> {
            s.as_deref().map(cpu_list).transpose()
        };
        let (server, loader) = match (parse(&input.server_cpuset), parse(&input.loader_cpuset)) {
            (Ok(s), Ok(l)) => (s, l),
            (Err(e), _) | (_, Err(e)) => {
                return Judgement::new(
                    CheckStatus::Fail,
                    format!("cpuset unreadable: {e}"),
                    threshold,
                    why,
                    remedy,
                )
            }
        };
        let shared_verdict = if input.allow_shared_cores {
            CheckStatus::Warn
        } else {
            CheckStatus::Fail
        };
        let mut measured = format!("{} online ({})", online.len(), fmt_list(&online));
        for (role, set) in [("server", &server), ("loader", &loader)] {
            if let Some(set) = set {
                measured.push_str(&format!("; {role} cpuset {}", fmt_list(set)));
                let offline: Vec<usize> = set
                    .iter()
                    .copied()
                    .filter(|c| !online.contains(c))
                    .collect();
                if !offline.is_empty() {
                    return Judgement::new(
                        CheckStatus::Fail,
                        format!(
                            "{measured}; {role} names offline CPUs {}",
                            fmt_list(&offline)
                        ),
                        threshold,
                        why,
                        remedy,
                    );
                }
            }
        }
        if let (Some(s), Some(l)) = (&server, &loader) {
            let shared: Vec<usize> = s.iter().copied().filter(|c| l.contains(c)).collect();
            if !shared.is_empty() {
                return Judgement::new(
                    shared_verdict,
                    format!("{measured}; shared CPUs {}", fmt_list(&shared)),
                    threshold,
                    why,
                    remedy,
                );
            }
            return Judgement::new(CheckStatus::Pass, measured, threshold, why, remedy);
        }
        let count = |set: &Option<Vec<usize>>, cpus: Option<f64>| {
            set.as_ref().map(|s| s.len() as f64).or(cpus)
        };
        let s = count(&server, input.server_cpus);
        let l = count(&loader, input.loader_cpus);
        if s.is_none() && l.is_none() {
            return Judgement::new(
                CheckStatus::Pass,
                format!("{measured}; the run gives no CPU counts"),
                threshold,
                why,
                remedy,
            );
        }
        let need = s.unwrap_or(0.0) + l.unwrap_or(0.0);
        measured.push_str(&format!(
            "; server {} + loader {} = {need} CPUs",
            s.map_or("unlimited".into(), |v| v.to_string()),
            l.map_or("unlimited".into(), |v| v.to_string())
        ));
        let verdict = if s.is_none() || l.is_none() || need > online.len() as f64 {
            shared_verdict
        } else {
            CheckStatus::Pass
        };
        Judgement::new(verdict, measured, threshold, why, remedy)
    }
}

/// SMT sibling groups of the online CPUs (`thread_siblings_list`), deduplicated.
pub fn sibling_groups(env: &Env<'_>, online: &[usize]) -> Option<Vec<Vec<usize>>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for c in online {
        let s = env.read(&format!(
            "/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
        ))?;
        let g = cpu_list(&s).ok()?;
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    Some(groups)
}

/// `cpu.smt`: SMT siblings, and whether server and loader share a physical core.
pub struct CpuSmt;

impl Check for CpuSmt {
    fn id(&self) -> &'static str {
        "cpu.smt"
    }
    fn family(&self) -> Family {
        Family::Cpu
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "two SMT threads of one core share its execution units: a server and a \
                   loader on sibling threads slow each other down like shared cores";
        let threshold = "server and loader not on sibling threads of one core";
        let remedy =
            "pin server and loader to different physical cores (see thread_siblings_list), \
                      or turn SMT off";
        let online = env.online_cpus().unwrap_or_default();
        let Some(groups) = sibling_groups(env, &online).filter(|g| !g.is_empty()) else {
            return Judgement::new(
                CheckStatus::Pass,
                "topology not exposed",
                threshold,
                why,
                remedy,
            );
        };
        let smt = groups.iter().any(|g| g.len() > 1);
        let measured = if smt {
            format!(
                "SMT on: sibling groups {}",
                groups
                    .iter()
                    .map(|g| fmt_list(g))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        } else {
            format!("SMT off: {} cores, one thread each", groups.len())
        };
        let sets = (
            env.input
                .server_cpuset
                .as_deref()
                .and_then(|s| cpu_list(s).ok()),
            env.input
                .loader_cpuset
                .as_deref()
                .and_then(|s| cpu_list(s).ok()),
        );
        if let (Some(server), Some(loader)) = sets {
            let shared_core = groups.iter().find(|g| {
                g.iter().any(|c| server.contains(c) && !loader.contains(c))
                    && g.iter().any(|c| loader.contains(c) && !server.contains(c))
            });
            if let Some(g) = shared_core {
                return Judgement::new(
                    CheckStatus::Warn,
                    format!(
                        "{measured}; server and loader share the core of threads {}",
                        fmt_list(g)
                    ),
                    threshold,
                    why,
                    remedy,
                );
            }
        }
        Judgement::new(CheckStatus::Pass, measured, threshold, why, remedy)
    }
}

/// `cpu.governor`: the cpufreq scaling governor of each online CPU.
pub struct CpuGovernor;

impl Check for CpuGovernor {
    fn id(&self) -> &'static str {
        "cpu.governor"
    }
    fn family(&self) -> Family {
        Family::Cpu
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "any governor but performance changes the clock with load, so the first \
                   seconds of a cell run slower than the rest";
        let threshold = "performance on every CPU (not exposed in most VMs: the host decides)";
        let remedy = "cpupower frequency-set -g performance (on the host, for a VM)";
        let online = env.online_cpus().unwrap_or_default();
        let govs: Vec<(usize, String)> = online
            .iter()
            .filter_map(|c| {
                env.read(&format!(
                    "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
                ))
                .map(|g| (*c, g))
            })
            .collect();
        if govs.is_empty() {
            return Judgement::new(CheckStatus::Pass, "not exposed", threshold, why, remedy);
        }
        let others: Vec<String> = govs
            .iter()
            .filter(|(_, g)| g != "performance")
            .map(|(c, g)| format!("cpu{c} {g}"))
            .collect();
        if others.is_empty() {
            Judgement::new(
                CheckStatus::Pass,
                "performance on every CPU",
                threshold,
                why,
                remedy,
            )
        } else {
            Judgement::new(CheckStatus::Warn, others.join(", "), threshold, why, remedy)
        }
    }
}

/// `cpu.boost`: turbo / boost state.
pub struct CpuBoost;

impl Check for CpuBoost {
    fn id(&self) -> &'static str {
        "cpu.boost"
    }
    fn family(&self) -> Family {
        Family::Cpu
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "with turbo the clock depends on temperature and how many cores are busy, so \
                   rounds of the same cell drift apart";
        let threshold = "turbo off (recorded; warn when on)";
        let remedy = "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo (Intel) or \
                      echo 0 > /sys/devices/system/cpu/cpufreq/boost (on the host, for a VM)";
        let (on, source) =
            if let Some(v) = env.read("/sys/devices/system/cpu/intel_pstate/no_turbo") {
                (v == "0", "intel_pstate/no_turbo")
            } else if let Some(v) = env.read("/sys/devices/system/cpu/cpufreq/boost") {
                (v == "1", "cpufreq/boost")
            } else {
                return Judgement::new(CheckStatus::Pass, "not exposed", threshold, why, remedy);
            };
        let (verdict, state) = if on {
            (CheckStatus::Warn, "on")
        } else {
            (CheckStatus::Pass, "off")
        };
        Judgement::new(
            verdict,
            format!("turbo {state} ({source})"),
            threshold,
            why,
            remedy,
        )
    }
}

/// Clock sources whose reads are cheap (no exit, no port I/O).
pub const GOOD_CLOCKSOURCES: [&str; 5] = [
    "tsc",
    "kvm-clock",
    "hyperv_clocksource_tsc_page",
    "arch_sys_counter",
    "xen",
];

/// `cpu.clocksource`: the kernel's current clock source.
pub struct CpuClocksource;

impl Check for CpuClocksource {
    fn id(&self) -> &'static str {
        "cpu.clocksource"
    }
    fn family(&self) -> Family {
        Family::Cpu
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "every timestamp (latency, Date header, timeouts) reads the clock; hpet and \
                   acpi_pm cost microseconds per read (an exit in a VM), tsc tens of ns";
        let threshold = format!(
            "one of {} (hpet, acpi_pm warn)",
            GOOD_CLOCKSOURCES.join(", ")
        );
        let remedy = "boot with clocksource=tsc (tsc=reliable if the kernel distrusts it), or \
                      kvm-clock in a KVM guest";
        match env.read("/sys/devices/system/clocksource/clocksource0/current_clocksource") {
            Some(cs) if GOOD_CLOCKSOURCES.contains(&cs.as_str()) => {
                Judgement::new(CheckStatus::Pass, cs, threshold, why, remedy)
            }
            Some(cs) => Judgement::new(CheckStatus::Warn, cs, threshold, why, remedy),
            None => Judgement::new(CheckStatus::Warn, "not exposed", threshold, why, remedy),
        }
    }
}

/// The checks of this family.
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![
        Box::new(CpuCores),
        Box::new(CpuSmt),
        Box::new(CpuGovernor),
        Box::new(CpuBoost),
        Box::new(CpuClocksource),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_ranges_and_singles() {
        assert_eq!(
            cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(fmt_list(&[1, 2]), "1,2");
    }
}
