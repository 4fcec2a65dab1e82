//! Process limits and resource usage: the nofile limit, the local port
//! range, and the loader's own CPU time and peak RSS.
//!
//! Owns: checking, before a run starts, that the requested connections can
//! exist at all, so a shortfall is announced up front instead of showing up
//! as a pile of connect errors. Must not: open connections.

use super::report::Throttling;
use std::net::SocketAddr;

/// File descriptors kept back for the runtime (epoll, eventfds, timerfds,
/// stdio, /proc reads) beyond one per connection.
pub const FD_RESERVE_BASE: u64 = 32;
/// Extra descriptors kept back per worker thread.
pub const FD_RESERVE_PER_THREAD: u64 = 8;

/// Raise the soft nofile limit to the hard limit; returns the new soft limit.
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a stack struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// Descriptors open in this process right now.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(16, |d| d.count() as u64)
}

/// The local port range (`net.ipv4.ip_local_port_range`): how many
/// connections one process can hold to a single server address and port.
pub fn local_ports() -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|s| s.parse::<u32>().ok());
    let lo = it.next()??;
    let hi = it.next()??;
    Some((lo, hi))
}

/// How many of `requested` connections can be opened to `addr`, and a
/// message for each limit that cuts them short.
pub fn connection_capacity(
    requested: usize,
    threads: usize,
    addr: SocketAddr,
) -> (usize, Vec<String>) {
    let mut allowed = requested;
    let mut warnings = Vec::new();
    let soft = raise_nofile();
    let reserve = FD_RESERVE_BASE + FD_RESERVE_PER_THREAD * threads as u64 + open_fds();
    let fd_room = soft.saturating_sub(reserve) as usize;
    if fd_room < allowed {
        warnings.push(format!(
            "the open-files limit (nofile {soft}, hard limit included) leaves room for only \
             {fd_room} of the {requested} requested connections; opening {fd_room}. \
             Raise it (ulimit -Hn, or the container's nofile ulimit) to hold them all"
        ));
        allowed = fd_room;
    }
    if let Some((lo, hi)) = local_ports() {
        let ports = hi.saturating_sub(lo) as usize + 1;
        if ports < allowed {
            warnings.push(format!(
                "the local port range {lo}-{hi} (net.ipv4.ip_local_port_range) holds only \
                 {ports} connections to {addr}; opening {ports} of the {requested} requested. \
                 Widen the range to hold them all"
            ));
            allowed = ports;
        }
    }
    (allowed, warnings)
}

/// CPU time and peak RSS of this process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// User CPU time, µs.
    pub user_us: u64,
    /// System CPU time, µs.
    pub sys_us: u64,
    /// Peak resident set size, KiB.
    pub max_rss_kib: u64,
}

/// `getrusage(RUSAGE_SELF)`: all threads of this process.
pub fn usage() -> Usage {
    // SAFETY: getrusage fills the zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    Usage {
        user_us: us(ru.ru_utime),
        sys_us: us(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss as u64,
    }
}

/// Where a container sees its own cgroup's cpu.stat: cgroup v2 (private
/// cgroup namespace) first, then the v1 cpu controller as Docker mounts it.
const CPU_STAT_PATHS: [&str; 3] = [
    "/sys/fs/cgroup/cpu.stat",
    "/sys/fs/cgroup/cpu,cpuacct/cpu.stat",
    "/sys/fs/cgroup/cpu/cpu.stat",
];

/// This process's cgroup CFS counters so far (`nr_periods`,
/// `nr_throttled`), when a cpu.stat with them is readable (it is not in the
/// root cgroup of v2).
pub fn cpu_throttling() -> Option<Throttling> {
    CPU_STAT_PATHS.iter().find_map(|p| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| parse_cpu_stat(&t))
    })
}

/// `nr_periods` and `nr_throttled` from cpu.stat text (v1 and v2 alike).
pub fn parse_cpu_stat(text: &str) -> Option<Throttling> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    Some(Throttling {
        periods: field("nr_periods")?,
        throttled_periods: field("nr_throttled")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_connections_beyond_the_port_range_or_nofile_with_a_warning() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let (ok, w) = connection_capacity(10, 1, addr);
        assert_eq!((ok, w.len()), (10, 0));
        let (capped, w) = connection_capacity(10_000_000, 1, addr);
        assert!(capped < 10_000_000);
        assert!(!w.is_empty());
    }

    #[test]
    fn reads_cfs_throttling_from_v1_and_v2_cpu_stat() {
        let v1 = "nr_periods 120\nnr_throttled 97\nthrottled_time 8583117000\n";
        let v2 = "usage_usec 1\nuser_usec 1\nsystem_usec 0\nnr_periods 40\nnr_throttled 3\nthrottled_usec 9\n";
        assert_eq!(
            parse_cpu_stat(v1),
            Some(Throttling {
                periods: 120,
                throttled_periods: 97
            })
        );
        assert_eq!(
            parse_cpu_stat(v2),
            Some(Throttling {
                periods: 40,
                throttled_periods: 3
            })
        );
        // The v2 root cgroup has no bandwidth counters.
        assert_eq!(parse_cpu_stat("usage_usec 5\nuser_usec 3\n"), None);
    }

    #[test]
    fn usage_and_clock_move_forward() {
        let a = crate::host::clock::now_ns();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(crate::host::clock::now_ns() > a);
        assert!(usage().max_rss_kib > 0);
    }
}
