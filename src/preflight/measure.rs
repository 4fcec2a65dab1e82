//! What preflight measures rather than reads from files — the CPUID hypervisor
//! signature, the measured cost of a VM exit and of a syscall, fairground's
//! own nofile limit, and a 1-second sample of CPU time (steal, iowait, other
//! busy processes).
//!
//! [`MeasuredFacts`] is plain data: [`MeasuredFacts::measure`] fills it on the real
//! machine, fixtures supply it as JSON. Real CPUID is read through
//! [`cpuid`] only, so nothing else here touches the instruction. This file
//! measures; it judges nothing (the checks in the family files do).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::host::proc;

/// Everything measured on the live machine rather than read from files.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MeasuredFacts {
    /// CPUID hypervisor facts; `None` on CPUs without CPUID (not x86_64).
    pub cpuid: Option<CpuidFacts>,
    /// Measured cost of a VM exit (CPUID) and of a cheap syscall.
    pub exit_cost: Option<ExitCost>,
    /// fairground's own nofile limit (getrlimit).
    pub nofile: Option<NofileLimit>,
    /// CPU time over a 1-second sample of /proc/stat and /proc/*/stat.
    pub sample: Option<LoadSample>,
}

/// What CPUID says about a hypervisor.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuidFacts {
    /// Leaf 1, ECX bit 31: "running under a hypervisor".
    pub hypervisor_bit: bool,
    /// Leaf 0x40000000 vendor signature (EBX, ECX, EDX as 12 ASCII bytes,
    /// NULs trimmed), e.g. `KVMKVMKVM`, `Microsoft Hv`, `TCGTCGTCGTCG`.
    /// Empty when the hypervisor bit is clear.
    pub signature: String,
}

/// Measured cost of trapping to the hypervisor and of entering the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExitCost {
    /// Median over the bursts of the time per CPUID instruction, ns. In a VM
    /// every CPUID exits to the hypervisor, so this is the VM-exit round trip.
    pub cpuid_ns: f64,
    /// Median over the bursts of the time per getppid() syscall, ns.
    pub syscall_ns: f64,
    /// Bursts timed (the median is over these).
    pub bursts: u32,
    /// Instructions (or syscalls) per burst.
    pub per_burst: u32,
}

/// A nofile (RLIMIT_NOFILE) limit; `u64::MAX` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NofileLimit {
    /// Soft limit (what the process may open now).
    pub soft: u64,
    /// Hard limit (what the soft limit may be raised to without privilege).
    pub hard: u64,
}

/// CPU time over one sample interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoadSample {
    /// Length of the sample, seconds.
    pub seconds: f64,
    /// Share of all CPU time stolen by the hypervisor, percent.
    pub steal_pct: f64,
    /// Share of all CPU time idle waiting for I/O, percent.
    pub iowait_pct: f64,
    /// Share of all CPU time busy (not idle, not iowait, not steal), percent.
    pub busy_pct: f64,
    /// Part of `busy_pct` used by fairground itself and the processes it
    /// started, percent of all CPU time: not foreign load.
    #[serde(default)]
    pub own_busy_pct: f64,
    /// The busiest other processes in the sample, most CPU first (at most 3).
    pub top: Vec<ProcCpu>,
}

/// One process's CPU use over the sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcCpu {
    /// Process id.
    pub pid: u32,
    /// Command name (`comm`).
    pub comm: String,
    /// CPU used, percent of one core.
    pub cpu_pct: f64,
}

/// Bursts of CPUID / getppid timed; the median damps a burst that was
/// preempted on this shared, busy box.
pub const TIMING_BURSTS: u32 = 9;
/// Instructions per burst: 256 × ~1.3 µs ≈ 0.3 ms per burst in this
/// workplace's microVM, so the whole timing costs a few milliseconds.
pub const TIMING_PER_BURST: u32 = 256;
/// Length of the load sample.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// Processes listed in the load sample.
pub const TOP_PROCESSES: usize = 3;

/// Execute CPUID `leaf` (subleaf 0) and return `[eax, ebx, ecx, edx]`.
/// The only place real CPUID is read.
#[cfg(target_arch = "x86_64")]
pub fn cpuid(leaf: u32) -> [u32; 4] {
    // `__cpuid` is unsafe on older toolchains and safe on newer ones.
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid(leaf) };
    [r.eax, r.ebx, r.ecx, r.edx]
}

/// CPUID hypervisor facts of this CPU, `None` where there is no CPUID.
pub fn read_cpuid_facts() -> Option<CpuidFacts> {
    #[cfg(target_arch = "x86_64")]
    {
        let hypervisor_bit = cpuid(1)[2] & (1 << 31) != 0;
        let signature = if hypervisor_bit {
            let [_, b, c, d] = cpuid(0x4000_0000);
            signature_from_regs(b, c, d)
        } else {
            String::new()
        };
        Some(CpuidFacts {
            hypervisor_bit,
            signature,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// The 12-byte vendor signature in EBX, ECX, EDX, NULs trimmed.
pub fn signature_from_regs(ebx: u32, ecx: u32, edx: u32) -> String {
    let mut bytes = Vec::with_capacity(12);
    for r in [ebx, ecx, edx] {
        bytes.extend_from_slice(&r.to_le_bytes());
    }
    String::from_utf8_lossy(&bytes)
        .trim_end_matches('\0')
        .to_string()
}

/// Time bursts of CPUID and of getppid() and return the medians per call.
pub fn measure_exit_cost() -> Option<ExitCost> {
    #[cfg(target_arch = "x86_64")]
    {
        let cpuid_ns = median_per_call(|| {
            std::hint::black_box(cpuid(std::hint::black_box(0)));
        });
        let syscall_ns = median_per_call(|| {
            // SAFETY: getppid has no preconditions and cannot fail.
            std::hint::black_box(unsafe { libc::getppid() });
        });
        Some(ExitCost {
            cpuid_ns,
            syscall_ns,
            bursts: TIMING_BURSTS,
            per_burst: TIMING_PER_BURST,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

#[cfg(target_arch = "x86_64")]
fn median_per_call(mut f: impl FnMut()) -> f64 {
    let per_call: Vec<f64> = (0..TIMING_BURSTS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..TIMING_PER_BURST {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(TIMING_PER_BURST)
        })
        .collect();
    crate::stats::median(&per_call).unwrap_or(0.0)
}

/// fairground's own nofile limit.
pub fn read_nofile() -> Option<NofileLimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for getrlimit to fill.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    let widen = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            u64::MAX
        } else {
            v
        }
    };
    (rc == 0).then(|| NofileLimit {
        soft: widen(r.rlim_cur),
        hard: widen(r.rlim_max),
    })
}

impl MeasuredFacts {
    /// Measure the live machine: CPUID, limits, and the 1-second CPU sample
    /// of `root`'s /proc. `exit_cost` is timed by the caller beforehand (see
    /// [`measure_exit_cost`]) so it does not run inside the sample.
    pub fn measure(root: &Path, exit_cost: Option<ExitCost>) -> Self {
        Self {
            cpuid: read_cpuid_facts(),
            exit_cost,
            nofile: read_nofile(),
            sample: sample_cpu(root, SAMPLE_INTERVAL),
        }
    }
}

/// Sample /proc/stat and every /proc/PID/stat under `root` twice, `interval`
/// apart. fairground's own process and its descendants are left out of the
/// top list and counted apart (`own_busy_pct`).
pub fn sample_cpu(root: &Path, interval: Duration) -> Option<LoadSample> {
    let t0 = Instant::now();
    let before = proc::read_stat(root)?;
    let ticks0 = proc::read_pid_ticks(root);
    std::thread::sleep(interval);
    let after = proc::read_stat(root)?;
    let ticks1 = proc::read_pid_ticks(root);
    let seconds = t0.elapsed().as_secs_f64();
    let hz = proc::ticks_per_second();
    let me = std::process::id();
    let family = proc::descendants_of(me, &proc::read_pid_parents(root));
    let own_ticks: u64 = ticks1
        .iter()
        .filter(|(pid, _)| family.contains(pid))
        .filter_map(|(pid, (_, t1))| Some(t1.saturating_sub(ticks0.get(pid)?.1)))
        .sum();
    let mut top: Vec<ProcCpu> = ticks1
        .iter()
        .filter(|(pid, _)| !family.contains(pid))
        .filter_map(|(pid, (comm, t1))| {
            let (_, t0) = ticks0.get(pid)?;
            let d = t1.saturating_sub(*t0);
            (d > 0).then(|| ProcCpu {
                pid: *pid,
                comm: comm.clone(),
                cpu_pct: d as f64 / hz / seconds * 100.0,
            })
        })
        .collect();
    top.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct).then(a.pid.cmp(&b.pid)));
    top.truncate(TOP_PROCESSES);
    let shares = after.shares_since(&before)?;
    let all_ticks = after.total().saturating_sub(before.total()).max(1);
    let busy_pct = shares.busy * 100.0;
    Some(LoadSample {
        seconds,
        steal_pct: shares.steal * 100.0,
        iowait_pct: shares.iowait * 100.0,
        busy_pct,
        // Per-process and machine ticks are both USER_HZ; a process's tick
        // may land just outside the machine's window, hence the clamp.
        own_busy_pct: (own_ticks as f64 / all_ticks as f64 * 100.0).min(busy_pct),
        top,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_read_from_ebx_ecx_edx_in_order() {
        // "KVMKVMKVM\0\0\0" as KVM returns it.
        let sig = signature_from_regs(0x4b4d_564b, 0x564b_4d56, 0x0000_004d);
        assert_eq!(sig, "KVMKVMKVM");
        let hv = signature_from_regs(
            u32::from_le_bytes(*b"Micr"),
            u32::from_le_bytes(*b"osof"),
            u32::from_le_bytes(*b"t Hv"),
        );
        assert_eq!(hv, "Microsoft Hv");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn real_cpuid_timing_yields_positive_medians() {
        let c = measure_exit_cost().unwrap();
        assert!(c.cpuid_ns > 0.0 && c.syscall_ns > 0.0, "{c:?}");
        assert_eq!(c.bursts, TIMING_BURSTS);
    }
}
