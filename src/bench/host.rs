//! What the host is doing around a measured window: the 1-minute load
//! average and how many cores were busy (from /proc/stat), so the gates can
//! tell a quiet window from one shared with other work.
//!
//! Reads /proc only; judges nothing.

use std::path::{Path, PathBuf};

use crate::results::HostUse;

/// Jiffies counters of the aggregate `cpu` line of /proc/stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Time spent doing work (user, nice, system, irq, softirq, steal).
    pub busy: u64,
    /// All time, idle and iowait included.
    pub total: u64,
}

/// Parse the aggregate `cpu ` line of /proc/stat text.
pub fn parse_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    let total: u64 = v.iter().take(8).sum();
    Some(CpuTimes {
        busy: total - idle,
        total,
    })
}

/// The 1-minute load average from /proc/loadavg text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Reads the host's /proc (or another root, for tests).
#[derive(Debug, Clone)]
pub struct HostProbe {
    proc_root: PathBuf,
}

/// A reading taken before a window.
#[derive(Debug, Clone, Copy)]
pub struct HostMark {
    load_1m: f64,
    cpu: CpuTimes,
    at: std::time::Instant,
}

impl Default for HostProbe {
    fn default() -> Self {
        HostProbe::at(Path::new("/proc"))
    }
}

impl HostProbe {
    /// A probe reading `root/stat` and `root/loadavg`.
    pub fn at(root: &Path) -> HostProbe {
        HostProbe {
            proc_root: root.to_path_buf(),
        }
    }

    fn read(&self) -> Option<(f64, CpuTimes)> {
        let load = parse_loadavg(&std::fs::read_to_string(self.proc_root.join("loadavg")).ok()?)?;
        let cpu = parse_stat(&std::fs::read_to_string(self.proc_root.join("stat")).ok()?)?;
        Some((load, cpu))
    }

    /// Take the reading that starts a window; `None` when /proc is unreadable.
    pub fn mark(&self) -> Option<HostMark> {
        let (load_1m, cpu) = self.read()?;
        Some(HostMark {
            load_1m,
            cpu,
            at: std::time::Instant::now(),
        })
    }

    /// Close the window opened by `mark`: `own_cpu_us` is the CPU time the
    /// server and the loader used in it (what is ours, not foreign).
    pub fn finish(&self, mark: HostMark, own_cpu_us: u64) -> Option<HostUse> {
        let (load_after, cpu) = self.read()?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let total = cpu.total.saturating_sub(mark.cpu.total);
        if total == 0 {
            return None;
        }
        let busy_share = cpu.busy.saturating_sub(mark.cpu.busy) as f64 / total as f64;
        let busy_cores = busy_share * f64::from(cpus);
        let secs = mark.at.elapsed().as_secs_f64();
        let own_cores = if secs > 0.0 {
            own_cpu_us as f64 / 1e6 / secs
        } else {
            0.0
        };
        Some(HostUse {
            cpus,
            load_1m_before: mark.load_1m,
            load_1m_after: load_after,
            busy_cores,
            foreign_cores: (busy_cores - own_cores).max(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_and_loadavg() {
        let stat = "cpu  100 5 50 800 20 3 2 10 0 0\ncpu0 1 2 3 4\n";
        let t = parse_stat(stat).unwrap();
        assert_eq!(t.total, 990);
        assert_eq!(t.busy, 990 - 820);
        assert_eq!(parse_loadavg("0.42 0.30 0.20 1/123 4567\n"), Some(0.42));
        assert_eq!(parse_stat("intr 1 2\n"), None);
    }

    #[test]
    fn reads_this_hosts_proc() {
        let probe = HostProbe::default();
        let mark = probe.mark().expect("/proc is readable on Linux");
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Whether the 50 ms registered depends on the tick; when it did, the
        // figures must be sane.
        if let Some(h) = probe.finish(mark, 0) {
            assert!(
                h.busy_cores >= 0.0 && h.busy_cores <= f64::from(h.cpus) + 1e-9,
                "{h:?}"
            );
            assert!(h.foreign_cores <= h.busy_cores + 1e-9);
        }
    }
}
