//! `/proc` readings: the aggregate CPU time of `/proc/stat`, the load
//! average, and each process's CPU ticks. Every reader takes the root it
//! reads under (`/` on the real machine, a fixture tree in tests).

use std::collections::HashMap;
use std::path::Path;

/// Counters of the aggregate `cpu` line of /proc/stat, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Ticks doing work: user + nice + system + irq + softirq (guest time
    /// is already inside user).
    pub busy: u64,
    /// Idle ticks.
    pub idle: u64,
    /// Ticks idle waiting for I/O.
    pub iowait: u64,
    /// Ticks the hypervisor gave this machine's CPUs to someone else.
    pub steal: u64,
    /// Ticks in soft interrupts (inside `busy`): on a benchmark host
    /// mostly the network stack carrying the benchmark's own packets,
    /// charged to no container.
    pub softirq: u64,
    /// CPUs counted in the reading (its `cpuN` lines).
    pub cpus: u32,
}

impl CpuTimes {
    /// Every tick counted.
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.iowait + self.steal
    }

    /// Shares (0 to 1) of busy, iowait and steal ticks between `earlier`
    /// and this reading; `None` when no tick passed.
    pub fn shares_since(&self, earlier: &CpuTimes) -> Option<Shares> {
        let total = self.total().saturating_sub(earlier.total());
        if total == 0 {
            return None;
        }
        let share = |a: u64, b: u64| a.saturating_sub(b) as f64 / total as f64;
        Some(Shares {
            busy: share(self.busy, earlier.busy),
            iowait: share(self.iowait, earlier.iowait),
            steal: share(self.steal, earlier.steal),
            softirq: share(self.softirq, earlier.softirq),
        })
    }
}

/// How CPU time was spent between two [`CpuTimes`] readings, as fractions
/// of all ticks (of every CPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shares {
    /// Doing work.
    pub busy: f64,
    /// Waiting for I/O.
    pub iowait: f64,
    /// Stolen by the hypervisor.
    pub steal: f64,
    /// In soft interrupts (part of `busy`).
    pub softirq: f64,
}

/// Parse the aggregate `cpu ` line of a /proc/stat text.
pub fn parse_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    // A field that is not a number makes the line unreadable (no host
    // figure), never a 0 that would read as an idle host.
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if f.len() < 4 {
        return None;
    }
    // Columns an older kernel does not have (iowait before 2.5.41, steal
    // before 2.6.11, ...) are time it does not count: zero.
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        idle: at(3),
        iowait: at(4),
        steal: at(7),
        softirq: at(6),
        cpus: text
            .lines()
            .filter(|l| {
                l.strip_prefix("cpu")
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
            .count() as u32,
    })
}

/// The 1-minute load average from a /proc/loadavg text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// `/proc/stat` under `root`.
pub fn read_stat(root: &Path) -> Option<CpuTimes> {
    parse_stat(&std::fs::read_to_string(root.join("proc/stat")).ok()?)
}

/// The 1-minute load average under `root`.
pub fn read_loadavg(root: &Path) -> Option<f64> {
    parse_loadavg(&std::fs::read_to_string(root.join("proc/loadavg")).ok()?)
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

/// The parent pid (field 4) from a /proc/PID/stat line.
pub fn parse_pid_parent(text: &str) -> Option<u32> {
    let close = text.rfind(')')?;
    text.get(close + 1..)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Every process under `root`/proc: pid → its parent's pid.
pub fn read_pid_parents(root: &Path) -> HashMap<u32, u32> {
    read_each_pid_stat(root, parse_pid_parent)
}

/// Every process under `root`/proc: pid → what `parse` makes of its `stat`
/// (processes that vanish or do not parse are left out).
fn read_each_pid_stat<T>(root: &Path, parse: impl Fn(&str) -> Option<T>) -> HashMap<u32, T> {
    let mut out = HashMap::new();
    let Ok(entries) = std::fs::read_dir(root.join("proc")) else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(parsed) = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| parse(&s))
        {
            out.insert(pid, parsed);
        }
    }
    out
}

/// `me` and every process descended from it, by the parent links `parents`.
pub fn descendants_of(me: u32, parents: &HashMap<u32, u32>) -> std::collections::HashSet<u32> {
    let mut family = std::collections::HashSet::from([me]);
    // Parents come before children only by chance; repeat until stable
    // (the depth of the tree, a handful of passes).
    loop {
        let before = family.len();
        for (pid, ppid) in parents {
            if family.contains(ppid) {
                family.insert(*pid);
            }
        }
        if family.len() == before {
            return family;
        }
    }
}

/// Every process under `root`/proc: pid → (comm, CPU ticks so far).
pub fn read_pid_ticks(root: &Path) -> HashMap<u32, (String, u64)> {
    read_each_pid_stat(root, parse_pid_stat)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 when unknown).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_follow_parent_links_in_any_order() {
        let parents = HashMap::from([(30, 20), (20, 10), (11, 1), (10, 1), (40, 30)]);
        let mut got: Vec<u32> = descendants_of(10, &parents).into_iter().collect();
        got.sort_unstable();
        assert_eq!(got, vec![10, 20, 30, 40]);
        assert_eq!(parse_pid_parent("7 (a (b) c) S 42 7 7 0"), Some(42));
    }

    #[test]
    fn stat_shares_count_busy_iowait_and_steal_apart() {
        let a = parse_stat("cpu  100 0 100 700 50 0 0 50 0 0\ncpu0 1 2 3\n").unwrap();
        let b = parse_stat("cpu  200 0 100 800 70 0 0 80 0 0\n").unwrap();
        let s = b.shares_since(&a).unwrap();
        // Deltas: busy 100, idle 100, iowait 20, steal 30 → total 250.
        assert!((s.steal - 0.12).abs() < 1e-9);
        assert!((s.iowait - 0.08).abs() < 1e-9);
        assert!((s.busy - 0.40).abs() < 1e-9);
        assert_eq!(b.shares_since(&b), None);
        assert_eq!(parse_stat("intr 1 2\n"), None);
        assert_eq!(
            parse_stat("cpu  100 x 100 700\n"),
            None,
            "a garbled field is not 0"
        );
    }

    #[test]
    fn parses_loadavg_and_pid_stat() {
        assert_eq!(parse_loadavg("0.46 0.66 0.38 5/144 12679\n"), Some(0.46));
        assert_eq!(parse_loadavg(""), None);
        let line = "42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 1 0 5 0 0";
        let (comm, ticks) = parse_pid_stat(line).unwrap();
        assert_eq!(comm, "my (odd) cmd");
        assert_eq!(ticks, 22);
    }

    #[test]
    fn reads_this_machines_proc() {
        let root = Path::new("/");
        assert!(read_stat(root).is_some_and(|t| t.total() > 0));
        assert!(read_loadavg(root).is_some());
        let me = std::process::id();
        assert!(read_pid_ticks(root).contains_key(&me));
        let parents = read_pid_parents(root);
        assert_eq!(parents.get(&me), Some(&std::os::unix::process::parent_id()));
    }
}
