//! Probes: the facts preflight cannot read from files — the CPUID hypervisor
//! signature, the measured cost of a VM exit and of a syscall, fairground's
//! own nofile limit, and a 1-second sample of CPU time (steal, iowait, other
//! busy processes).
//!
//! [`ProbeFacts`] is plain data: [`ProbeFacts::measure`] fills it on the real
//! machine, fixtures supply it as JSON. Real CPUID is read through
//! [`cpuid`] only, so nothing else here touches the instruction. This file
//! measures; it judges nothing (the checks in the family files do).

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Everything measured on the live machine rather than read from files.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProbeFacts {
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
    let mut per_call: Vec<f64> = (0..TIMING_BURSTS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..TIMING_PER_BURST {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(TIMING_PER_BURST)
        })
        .collect();
    median(&mut per_call)
}

/// Median of `v` (sorted in place); 0 for an empty slice.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
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

impl ProbeFacts {
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

/// Counters of the aggregate `cpu` line of /proc/stat, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Busy ticks: user + nice + system + irq + softirq.
    pub busy: u64,
    /// Idle ticks.
    pub idle: u64,
    /// I/O wait ticks.
    pub iowait: u64,
    /// Ticks stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
        self.busy + self.idle + self.iowait + self.steal
    }
}

/// Parse the aggregate `cpu ` line of /proc/stat. Guest time is already
/// counted in user time, so it is not added again.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        idle: at(3),
        iowait: at(4),
        steal: at(7),
    })
}

/// `(comm, utime + stime ticks)` from a /proc/PID/stat line. The command
/// name is in parentheses and may itself hold spaces and parentheses, so the
/// fields are counted from the last `)`.
pub fn parse_pid_stat(text: &str) -> Option<(String, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

fn read_pid_ticks(proc_dir: &Path) -> HashMap<u32, (String, u64)> {
    let mut out = HashMap::new();
    let Ok(entries) = fs::read_dir(proc_dir) else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(parsed) = fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| parse_pid_stat(&s))
        {
            out.insert(pid, parsed);
        }
    }
    out
}

/// Shares of steal, iowait and busy time between two /proc/stat readings.
pub fn shares(before: CpuTimes, after: CpuTimes) -> (f64, f64, f64) {
    let total = after.total().saturating_sub(before.total()).max(1) as f64;
    let pct = |a: u64, b: u64| a.saturating_sub(b) as f64 * 100.0 / total;
    (
        pct(after.steal, before.steal),
        pct(after.iowait, before.iowait),
        pct(after.busy, before.busy),
    )
}

/// Sample /proc/stat and every /proc/PID/stat under `root` twice, `interval`
/// apart. fairground's own process is left out of the top list.
pub fn sample_cpu(root: &Path, interval: Duration) -> Option<LoadSample> {
    let proc_dir = root.join("proc");
    let stat = || {
        fs::read_to_string(proc_dir.join("stat"))
            .ok()
            .and_then(|s| parse_proc_stat(&s))
    };
    let t0 = Instant::now();
    let before = stat()?;
    let ticks0 = read_pid_ticks(&proc_dir);
    std::thread::sleep(interval);
    let after = stat()?;
    let ticks1 = read_pid_ticks(&proc_dir);
    let seconds = t0.elapsed().as_secs_f64();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    let me = std::process::id();
    let mut top: Vec<ProcCpu> = ticks1
        .iter()
        .filter(|(pid, _)| **pid != me)
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
    let (steal_pct, iowait_pct, busy_pct) = shares(before, after);
    Some(LoadSample {
        seconds,
        steal_pct,
        iowait_pct,
        busy_pct,
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

    #[test]
    fn proc_stat_shares_count_steal_and_iowait() {
        let a = parse_proc_stat("cpu  100 0 100 700 50 0 0 50 0 0\ncpu0 1 2 3\n").unwrap();
        let b = parse_proc_stat("cpu  200 0 100 800 70 0 0 80 0 0\n").unwrap();
        let (steal, iowait, busy) = shares(a, b);
        // Deltas: busy 100, idle 100, iowait 20, steal 30 → total 250.
        assert!((steal - 12.0).abs() < 1e-9);
        assert!((iowait - 8.0).abs() < 1e-9);
        assert!((busy - 40.0).abs() < 1e-9);
    }

    #[test]
    fn pid_stat_comm_may_hold_spaces_and_parens() {
        let line = "42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 1 0 5 0 0";
        let (comm, ticks) = parse_pid_stat(line).unwrap();
        assert_eq!(comm, "my (odd) cmd");
        assert_eq!(ticks, 22);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn real_cpuid_timing_yields_positive_medians() {
        let c = measure_exit_cost().unwrap();
        assert!(c.cpuid_ns > 0.0 && c.syscall_ns > 0.0, "{c:?}");
        assert_eq!(c.bursts, TIMING_BURSTS);
    }
}
