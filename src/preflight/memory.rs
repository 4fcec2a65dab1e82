//! Memory: available memory against the containers' limits, swap, and the
//! transparent hugepages setting (recorded: it changes RSS figures).

use super::{Check, CheckStatus, Env, Family, Judgement};

fn fmt_bytes(b: u64) -> String {
    crate::units::bytes(b as f64)
}

/// Share of MemAvailable the containers' limits may take before the page
/// cache, the daemon and fairground itself are squeezed (judgement: the
/// remaining fifth covers dockerd, the image layers in cache and the probe).
pub const MEM_HEADROOM_FRACTION: f64 = 0.8;

/// A `/proc/meminfo` field in bytes (`MemAvailable:  23806552 kB`).
pub fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        let mut f = v.split_whitespace();
        let n: u64 = f.next()?.parse().ok()?;
        Some(match f.next() {
            Some("kB") => n * 1024,
            _ => n,
        })
    })
}

/// `mem.available`: MemAvailable against the sum of the containers' limits.
pub struct MemAvailable;

impl Check for MemAvailable {
    fn id(&self) -> &'static str {
        "mem.available"
    }
    fn family(&self) -> Family {
        Family::Memory
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "limits that add up to more than the host has are not limits: the host reclaims \
                   or the OOM killer picks a container mid-run";
        let threshold = format!(
            "sum of limits ≤ MemAvailable (warn above {:.0}% of it)",
            MEM_HEADROOM_FRACTION * 100.0
        );
        let remedy =
            "lower the containers' memory limits or free memory (stop other containers and jobs)";
        let Some(avail) = env
            .read("/proc/meminfo")
            .and_then(|m| meminfo_bytes(&m, "MemAvailable"))
        else {
            return Judgement::new(
                CheckStatus::Warn,
                "MemAvailable not readable (/proc/meminfo)",
                threshold,
                why,
                remedy,
            );
        };
        let Some(total) = env.input.memory_limits_total else {
            return Judgement::new(
                CheckStatus::Pass,
                format!(
                    "MemAvailable {}; the run gives no memory limits",
                    fmt_bytes(avail)
                ),
                threshold,
                why,
                remedy,
            );
        };
        let verdict = if total > avail {
            CheckStatus::Fail
        } else if total as f64 > avail as f64 * MEM_HEADROOM_FRACTION {
            CheckStatus::Warn
        } else {
            CheckStatus::Pass
        };
        Judgement::new(
            verdict,
            format!(
                "limits {} of MemAvailable {}",
                fmt_bytes(total),
                fmt_bytes(avail)
            ),
            threshold,
            why,
            remedy,
        )
    }
}

/// `mem.swap`: whether swap is on.
pub struct MemSwap;

impl Check for MemSwap {
    fn id(&self) -> &'static str {
        "mem.swap"
    }
    fn family(&self) -> Family {
        Family::Memory
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "with swap a container at its memory limit slows down instead of being killed, \
                   and its latency tail then measures the disk";
        let threshold = "no swap (warn when on)";
        let remedy = "swapoff -a for the run, or give containers --memory-swap equal to --memory";
        let Some(m) = env.read("/proc/meminfo") else {
            return Judgement::new(
                CheckStatus::Warn,
                "not readable (/proc/meminfo)",
                threshold,
                why,
                remedy,
            );
        };
        let total = meminfo_bytes(&m, "SwapTotal").unwrap_or(0);
        let free = meminfo_bytes(&m, "SwapFree").unwrap_or(0);
        if total == 0 {
            Judgement::new(CheckStatus::Pass, "swap off", threshold, why, remedy)
        } else {
            Judgement::new(
                CheckStatus::Warn,
                format!(
                    "swap on: {} total, {} used",
                    fmt_bytes(total),
                    fmt_bytes(total.saturating_sub(free))
                ),
                threshold,
                why,
                remedy,
            )
        }
    }
}

/// `mem.thp`: transparent hugepages setting (recorded).
pub struct MemThp;

impl Check for MemThp {
    fn id(&self) -> &'static str {
        "mem.thp"
    }
    fn family(&self) -> Family {
        Family::Memory
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "THP changes RSS figures (a runtime's heap may be backed by 2 MiB pages) and \
                   adds compaction stalls; results are comparable only under the same setting";
        let threshold = "recorded, not judged";
        let remedy = "compare memory figures only between runs with the same THP setting";
        match env.read("/sys/kernel/mm/transparent_hugepage/enabled") {
            Some(s) => {
                let chosen = s
                    .split_whitespace()
                    .find(|w| w.starts_with('['))
                    .map(|w| w.trim_matches(['[', ']']).to_string())
                    .unwrap_or(s);
                Judgement::new(
                    CheckStatus::Pass,
                    format!("enabled={chosen}"),
                    threshold,
                    why,
                    remedy,
                )
            }
            None => Judgement::new(CheckStatus::Pass, "not exposed", threshold, why, remedy),
        }
    }
}

/// The checks of this family.
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![Box::new(MemAvailable), Box::new(MemSwap), Box::new(MemThp)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_fields_are_bytes() {
        let m =
            "MemTotal:       24684092 kB\nMemAvailable:   23806552 kB\nHugePages_Total:       0\n";
        assert_eq!(meminfo_bytes(m, "MemAvailable"), Some(23_806_552 * 1024));
        assert_eq!(meminfo_bytes(m, "HugePages_Total"), Some(0));
        assert_eq!(meminfo_bytes(m, "Mem"), None);
    }
}
