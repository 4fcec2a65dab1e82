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
    at: std::time::Instant,
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
        let shares = cpu.shares_since(&mark.cpu)?;
        let busy_cores = shares.busy * f64::from(cpus);
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
