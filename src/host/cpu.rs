//! CPU lists in the kernel's notation (`0-3,8,10-11`), as in
//! `/sys/devices/system/cpu/online` and Docker's `--cpuset-cpus`, and the
//! cores online. The one parser and printer of that notation.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// A set of CPU cores in Linux list notation (`0-3,6`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CoreList(pub BTreeSet<usize>);

/// Largest core number accepted; keeps a typo like `0-99999999` from
/// allocating a huge set.
const MAX_CORE: usize = 4095;

/// Where the kernel lists the cores online, relative to the root.
pub const ONLINE: &str = "sys/devices/system/cpu/online";

impl CoreList {
    /// Cores `0..n`.
    pub fn first(n: usize) -> CoreList {
        CoreList((0..n).collect())
    }

    /// Number of cores in the list.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The cores, ascending.
    pub fn to_vec(&self) -> Vec<usize> {
        self.0.iter().copied().collect()
    }
}

impl FromStr for CoreList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |part: &str| {
            format!("`{s}`: `{part}` is not a core number or range; write cores like `0-3,6`")
        };
        let mut set = BTreeSet::new();
        for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let lo: usize = lo.parse().map_err(|_| bad(part))?;
            let hi: usize = hi.parse().map_err(|_| bad(part))?;
            if lo > hi {
                return Err(format!("`{s}`: range `{part}` runs backwards"));
            }
            if hi > MAX_CORE {
                return Err(format!("`{s}`: core {hi} is beyond {MAX_CORE}"));
            }
            set.extend(lo..=hi);
        }
        Ok(CoreList(set))
    }
}

impl fmt::Display for CoreList {
    /// Compact ranges: `{0,1,2,5}` prints as `0-2,5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end = iter.next().unwrap_or(end);
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
        }
        f.write_str(&parts.join(","))
    }
}

impl FromIterator<usize> for CoreList {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        CoreList(iter.into_iter().collect())
    }
}

/// The cores online under `root` (`/` for this machine); `None` when the
/// file is missing, unreadable or empty.
pub fn online(root: &Path) -> Option<CoreList> {
    std::fs::read_to_string(root.join(ONLINE))
        .ok()?
        .parse::<CoreList>()
        .ok()
        .filter(|c| !c.is_empty())
}

/// The cores online on this machine, or `0..available_parallelism` when
/// the kernel does not say.
pub fn online_here() -> CoreList {
    online(Path::new("/")).unwrap_or_else(|| {
        CoreList::first(std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_lists_and_prints_them_compactly() {
        let c: CoreList = "0-2,5, 7\n".parse().unwrap();
        assert_eq!(c.0, BTreeSet::from([0, 1, 2, 5, 7]));
        assert_eq!(c.to_string(), "0-2,5,7");
        assert_eq!("0-3,8,10-11".parse::<CoreList>().unwrap().len(), 7);
        assert!("3-1".parse::<CoreList>().unwrap_err().contains("backwards"));
        assert!("a".parse::<CoreList>().is_err());
        assert!("0-99999".parse::<CoreList>().is_err());
        assert!("".parse::<CoreList>().unwrap().is_empty());
    }

    #[test]
    fn reads_the_cores_online_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(online(dir.path()), None);
        let f = dir.path().join(ONLINE);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, "0-1\n").unwrap();
        assert_eq!(online(dir.path()), Some(CoreList::first(2)));
        assert!(!online_here().is_empty());
    }
}
