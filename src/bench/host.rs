//! What the host is doing around a measured window: the 1-minute load
//! average and how many cores were busy (from /proc/stat, through
//! [`crate::host::proc`]), so the gates can tell a quiet window from one
//! shared with other work.
//!
//! Reads /proc only; judges nothing.

use std::path::{Path, PathBuf};

use crate::host::proc::{self, CpuTimes};
use crate::results::HostUse;

/// Reads the host's /proc (or another root, for tests).
#[derive(Debug, Clone)]
pub struct HostProbe {
    root: PathBuf,
}

/// A reading taken before a window.
#[derive(Debug, Clone, Copy)]
pub struct HostMark {
    load_1m: f64,
    cpu: CpuTimes,
}

impl Default for HostProbe {
    fn default() -> Self {
        HostProbe::at(Path::new("/"))
    }
}

impl HostProbe {
    /// A probe reading `root`/proc/stat and `root`/proc/loadavg.
    pub fn at(root: &Path) -> HostProbe {
        HostProbe {
            root: root.to_path_buf(),
        }
    }

    fn read(&self) -> Option<(f64, CpuTimes)> {
        Some((
            proc::read_loadavg(&self.root)?,
            proc::read_stat(&self.root)?,
        ))
    }

    /// Take the reading that starts a window; `None` when /proc is unreadable.
    pub fn mark(&self) -> Option<HostMark> {
        let (load_1m, cpu) = self.read()?;
        Some(HostMark { load_1m, cpu })
    }

    /// The host over the window between `mark` (taken as the loader
    /// announced the window's start) and `end` (as it announced the end):
    /// `own_cpu_us` is the CPU the server and the loader used over their
    /// window of `window_s` seconds. Both sides of the subtraction cover
    /// the same window, so our own connects, drain and socket teardown
    /// (outside it) never read as foreign; soft interrupts (the network
    /// stack, charged to no container) are shown beside, not counted
    /// foreign. CPUs are those /proc/stat counts, not this process's
    /// affinity.
    pub fn between(
        mark: HostMark,
        end: HostMark,
        own_cpu_us: u64,
        window_s: f64,
    ) -> Option<HostUse> {
        let cpus = end.cpu.cpus.max(1);
        let shares = end.cpu.shares_since(&mark.cpu)?;
        let cores = |share: f64| share * f64::from(cpus);
        let busy_cores = cores(shares.busy);
        let softirq_cores = cores(shares.softirq);
        let own_cores = if window_s > 0.0 {
            own_cpu_us as f64 / 1e6 / window_s
        } else {
            0.0
        };
        Some(HostUse {
            cpus,
            load_1m_before: mark.load_1m,
            load_1m_after: end.load_1m,
            busy_cores,
            foreign_cores: (busy_cores - softirq_cores - own_cores).max(0.0),
            softirq_cores,
            steal_cores: cores(shares.steal),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_hosts_proc() {
        let probe = HostProbe::default();
        let mark = probe.mark().expect("/proc is readable on Linux");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let end = probe.mark().unwrap();
        // Whether the 50 ms registered depends on the tick; when it did, the
        // figures must be sane.
        if let Some(h) = HostProbe::between(mark, end, 0, 0.05) {
            assert!(
                h.busy_cores >= 0.0 && h.busy_cores <= f64::from(h.cpus) + 1e-9,
                "{h:?}"
            );
            assert!(h.foreign_cores <= h.busy_cores + 1e-9);
        }
    }

    fn reading(user: u64, softirq: u64, idle: u64) -> HostMark {
        HostMark {
            load_1m: 0.5,
            cpu: CpuTimes {
                busy: user + softirq,
                idle,
                softirq,
                cpus: 2,
                ..CpuTimes::default()
            },
        }
    }

    #[test]
    fn our_own_work_and_the_network_stack_are_not_foreign() {
        // 2 CPUs over 1 s = 200 ticks: 150 busy, of which 30 soft
        // interrupts; server and loader used 1.2 cores over the window:
        // 1.5 − 0.3 − 1.2 = 0 foreign.
        let h = HostProbe::between(reading(0, 0, 0), reading(120, 30, 50), 1_200_000, 1.0).unwrap();
        assert!((h.busy_cores - 1.5).abs() < 1e-9, "{h:?}");
        assert!((h.softirq_cores - 0.3).abs() < 1e-9, "{h:?}");
        assert!(h.foreign_cores.abs() < 1e-9, "{h:?}");
        // A hog beside it: 0.5 more busy cores are foreign.
        let h = HostProbe::between(reading(0, 0, 0), reading(170, 30, 0), 1_200_000, 1.0).unwrap();
        assert!((h.foreign_cores - 0.5).abs() < 1e-9, "{h:?}");
    }
}
