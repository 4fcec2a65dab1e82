//! cgroup v1 and v2 readers: find a process's cgroup and read its memory and
//! CPU counters.
//!
//! Every path goes through [`CgroupFs`] (the cgroup mount root and the /proc
//! root), so tests point it at fixture trees under `tests/fixtures/cgroup/`.
//! Only reads files; never writes a cgroup knob.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What can go wrong while probing a cgroup.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A file the probe needs could not be read.
    #[error("cannot read {path}: {source} (is the container still running, and is its cgroup mounted on this host?)")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file held something that is not what the kernel writes there.
    #[error("{path}: cannot parse `{text}` as a counter")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The offending text.
        text: String,
    },
    /// A counter the figures need is missing from a file that exists (a
    /// kernel without it, or a cgroup without the controller enabled).
    #[error("{path} has no `{key}` line: the container's CPU time cannot be read, so CPU figures are unknown")]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key that is not there.
        key: &'static str,
    },
    /// `/proc/PID/cgroup` names neither a v1 memory hierarchy nor a v2 path.
    #[error("{path}: no memory cgroup (v1) and no unified `0::` line (v2) found")]
    NoCgroup {
        /// The `/proc/PID/cgroup` file.
        path: PathBuf,
    },
}

/// Which cgroup interface a container's counters come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// Legacy per-controller hierarchies (`/sys/fs/cgroup/memory/...`).
    V1,
    /// The unified hierarchy (`/sys/fs/cgroup/<path>/memory.current`).
    V2,
}

/// Where the cgroup mount and /proc are; the defaults are the real ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFs {
    /// The cgroup mount root, normally `/sys/fs/cgroup`.
    pub cgroup_root: PathBuf,
    /// The proc root, normally `/proc`.
    pub proc_root: PathBuf,
}

impl Default for CgroupFs {
    fn default() -> Self {
        Self {
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// The directories holding one process's memory and CPU counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupPaths {
    /// v1 or v2.
    pub version: CgroupVersion,
    /// Directory with the memory files (v1 memory controller, or the v2 cgroup).
    pub memory: PathBuf,
    /// Directory with CPU usage (v1 `cpuacct.usage`, or the v2 cgroup).
    pub cpuacct: PathBuf,
    /// Directory with CPU throttling `cpu.stat` (v1 cpu controller, or the v2 cgroup).
    pub cpu: PathBuf,
}

/// One reading of a cgroup's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CgroupReading {
    /// Memory charged to the cgroup now, bytes (v2 `memory.current`, v1
    /// `memory.usage_in_bytes`): what the memory limit is enforced against.
    pub mem_bytes: u64,
    /// Highest charge seen, bytes (v2 `memory.peak`, v1
    /// `memory.max_usage_in_bytes`); `None` on kernels without it.
    pub mem_peak_bytes: Option<u64>,
    /// Anonymous memory (heap, stacks), bytes, from `memory.stat`.
    pub anon_bytes: Option<u64>,
    /// Page cache, bytes, from `memory.stat`.
    pub file_bytes: Option<u64>,
    /// CPU time used by every task of the cgroup, microseconds.
    pub cpu_usec: u64,
    /// Time the cgroup was throttled by its CPU quota, microseconds.
    pub throttled_usec: Option<u64>,
    /// Number of periods in which it was throttled.
    pub nr_throttled: Option<u64>,
    /// OOM kills inside the cgroup (v2 `memory.events`, v1
    /// `memory.oom_control`); `None` where the kernel does not count them.
    pub oom_kills: Option<u64>,
}

fn read(path: &Path) -> Result<String, ProbeError> {
    std::fs::read_to_string(path).map_err(|source| ProbeError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_u64(path: &Path) -> Result<u64, ProbeError> {
    let text = read(path)?;
    let t = text.trim();
    // v2 writes `max` for "no limit"; counters never do, but be exact.
    t.parse().map_err(|_| ProbeError::Parse {
        path: path.to_path_buf(),
        text: t.to_string(),
    })
}

fn read_optional_u64(path: &Path) -> Result<Option<u64>, ProbeError> {
    if path.exists() {
        read_u64(path).map(Some)
    } else {
        Ok(None)
    }
}

/// Parse a flat keyed file (`memory.stat`, `cpu.stat`, `memory.events`).
pub fn parse_keyed(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let key = it.next()?;
            let value = it.next()?.parse().ok()?;
            Some((key.to_string(), value))
        })
        .collect()
}

fn read_keyed(path: &Path) -> Result<HashMap<String, u64>, ProbeError> {
    read(path).map(|t| parse_keyed(&t))
}

fn read_optional_keyed(path: &Path) -> Result<Option<HashMap<String, u64>>, ProbeError> {
    if path.exists() {
        read_keyed(path).map(Some)
    } else {
        Ok(None)
    }
}

/// One line of `/proc/PID/cgroup`: hierarchy id, controllers, path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupLine {
    controllers: Vec<String>,
    path: String,
}

fn parse_proc_cgroup(text: &str) -> Vec<CgroupLine> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some(CgroupLine {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

impl CgroupFs {
    /// A tree rooted elsewhere (fixtures): `<root>/sys/fs/cgroup` and `<root>/proc`.
    pub fn at(root: &Path) -> Self {
        Self {
            cgroup_root: root.join("sys/fs/cgroup"),
            proc_root: root.join("proc"),
        }
    }

    /// Directory of a v1 hierarchy: mounts are named after their controller
    /// list (`cpu,cpuacct`) with per-controller symlinks on most distros, or
    /// mounted separately (`cpu`, `cpuacct`) on others; try both.
    fn v1_dir(&self, line: &CgroupLine, controller: &str) -> PathBuf {
        let rel = line.path.trim_start_matches('/');
        let joined = self.cgroup_root.join(line.controllers.join(","));
        let base = if joined.is_dir() {
            joined
        } else {
            self.cgroup_root.join(controller)
        };
        base.join(rel)
    }

    /// Find the cgroup directories of process `pid` from `/proc/PID/cgroup`.
    pub fn for_pid(&self, pid: u32) -> Result<CgroupPaths, ProbeError> {
        let file = self.proc_root.join(pid.to_string()).join("cgroup");
        let lines = parse_proc_cgroup(&read(&file)?);
        let find = |name: &str| {
            lines
                .iter()
                .find(|l| l.controllers.iter().any(|c| c == name))
        };
        if let Some(mem) = find("memory") {
            let cpuacct = find("cpuacct").unwrap_or(mem);
            let cpu = find("cpu").unwrap_or(cpuacct);
            return Ok(CgroupPaths {
                version: CgroupVersion::V1,
                memory: self.v1_dir(mem, "memory"),
                cpuacct: self.v1_dir(cpuacct, "cpuacct"),
                cpu: self.v1_dir(cpu, "cpu"),
            });
        }
        if let Some(unified) = lines.iter().find(|l| l.controllers.is_empty()) {
            let dir = self.cgroup_root.join(unified.path.trim_start_matches('/'));
            return Ok(CgroupPaths {
                version: CgroupVersion::V2,
                memory: dir.clone(),
                cpuacct: dir.clone(),
                cpu: dir,
            });
        }
        Err(ProbeError::NoCgroup { path: file })
    }
}

impl CgroupPaths {
    /// Read every counter once.
    pub fn read(&self) -> Result<CgroupReading, ProbeError> {
        match self.version {
            CgroupVersion::V2 => self.read_v2(),
            CgroupVersion::V1 => self.read_v1(),
        }
    }

    fn read_v2(&self) -> Result<CgroupReading, ProbeError> {
        let d = &self.memory;
        let stat = read_optional_keyed(&d.join("memory.stat"))?.unwrap_or_default();
        let events = read_optional_keyed(&d.join("memory.events"))?;
        let cpu = read_keyed(&self.cpu.join("cpu.stat"))?;
        Ok(CgroupReading {
            mem_bytes: read_u64(&d.join("memory.current"))?,
            mem_peak_bytes: read_optional_u64(&d.join("memory.peak"))?,
            anon_bytes: stat.get("anon").copied(),
            file_bytes: stat.get("file").copied(),
            // Never 0 for "not there": a missing counter stops the series
            // and the figure is unknown, with this reason.
            cpu_usec: cpu
                .get("usage_usec")
                .copied()
                .ok_or_else(|| ProbeError::MissingKey {
                    path: self.cpu.join("cpu.stat"),
                    key: "usage_usec",
                })?,
            throttled_usec: cpu.get("throttled_usec").copied(),
            nr_throttled: cpu.get("nr_throttled").copied(),
            oom_kills: events.and_then(|e| e.get("oom_kill").copied()),
        })
    }

    fn read_v1(&self) -> Result<CgroupReading, ProbeError> {
        let d = &self.memory;
        let stat = read_optional_keyed(&d.join("memory.stat"))?.unwrap_or_default();
        // `total_*` include child cgroups; a container has none, but prefer
        // them where present so nested setups are counted whole.
        let stat_of = |a: &str, b: &str| stat.get(a).or_else(|| stat.get(b)).copied();
        let oom = read_optional_keyed(&d.join("memory.oom_control"))?;
        let cpu_stat = read_optional_keyed(&self.cpu.join("cpu.stat"))?.unwrap_or_default();
        let usage_ns = read_u64(&self.cpuacct.join("cpuacct.usage"))?;
        Ok(CgroupReading {
            mem_bytes: read_u64(&d.join("memory.usage_in_bytes"))?,
            mem_peak_bytes: read_optional_u64(&d.join("memory.max_usage_in_bytes"))?,
            anon_bytes: stat_of("total_rss", "rss"),
            file_bytes: stat_of("total_cache", "cache"),
            cpu_usec: usage_ns / 1_000,
            // v1 reports throttled time in nanoseconds.
            throttled_usec: cpu_stat.get("throttled_time").map(|ns| ns / 1_000),
            nr_throttled: cpu_stat.get("nr_throttled").copied(),
            oom_kills: oom.and_then(|o| o.get("oom_kill").copied()),
        })
    }
}

/// A container's memory high-water mark, reset as a measured window opens
/// and read as it closes, so a window's peak is its own and not the
/// container's lifetime one (start-up, verification, earlier rounds).
///
/// cgroup v1: writing `0` to `memory.max_usage_in_bytes` resets it to the
/// current usage (for every reader: the lifetime mark is gone, so the lab
/// keeps the highest it read). cgroup v2 (Linux 6.12+): writing to
/// `memory.peak` resets it for reads through the same open file only, and
/// the file's lifetime value stays for everyone else.
#[derive(Debug)]
pub struct PeakWatch {
    file: PeakFile,
}

#[derive(Debug)]
enum PeakFile {
    V1(PathBuf),
    V2(std::fs::File, PathBuf),
}

impl CgroupPaths {
    /// A watch on this cgroup's memory high-water mark.
    pub fn peak_watch(&self) -> Result<PeakWatch, ProbeError> {
        let file = match self.version {
            CgroupVersion::V1 => PeakFile::V1(self.memory.join("memory.max_usage_in_bytes")),
            CgroupVersion::V2 => {
                let path = self.memory.join("memory.peak");
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(|source| ProbeError::Read {
                        path: path.clone(),
                        source,
                    })?;
                PeakFile::V2(f, path)
            }
        };
        Ok(PeakWatch { file })
    }
}

impl PeakWatch {
    /// Reset the mark to the current usage; returns the mark before the
    /// reset, bytes.
    pub fn reset(&mut self) -> Result<u64, ProbeError> {
        let before = self.read()?;
        let (result, path) = match &mut self.file {
            PeakFile::V1(path) => (std::fs::write(&*path, "0"), path.clone()),
            PeakFile::V2(f, path) => {
                use std::io::Write;
                (f.write_all(b"reset\n"), path.clone())
            }
        };
        result.map_err(|source| ProbeError::Read { path, source })?;
        Ok(before)
    }

    /// The mark now, bytes (since the reset, through this watch).
    pub fn read(&mut self) -> Result<u64, ProbeError> {
        match &mut self.file {
            PeakFile::V1(path) => read_u64(path),
            PeakFile::V2(f, path) => {
                use std::io::{Read, Seek};
                let mut text = String::new();
                f.seek(std::io::SeekFrom::Start(0))
                    .and_then(|_| f.read_to_string(&mut text))
                    .map_err(|source| ProbeError::Read {
                        path: path.clone(),
                        source,
                    })?;
                text.trim().parse().map_err(|_| ProbeError::Parse {
                    path: path.clone(),
                    text: text.trim().to_string(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> CgroupFs {
        CgroupFs::at(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/cgroup")
                .join(name),
        )
    }

    #[test]
    fn v2_reader_finds_unified_cgroup_and_reads_counters() {
        let fs = fixture("v2");
        let paths = fs.for_pid(4242).unwrap();
        assert_eq!(paths.version, CgroupVersion::V2);
        assert!(paths.memory.ends_with("system.slice/docker-abc123.scope"));
        let r = paths.read().unwrap();
        assert_eq!(r.mem_bytes, 52_428_800);
        assert_eq!(r.mem_peak_bytes, Some(104_857_600));
        assert_eq!(r.anon_bytes, Some(41_943_040));
        assert_eq!(r.file_bytes, Some(8_388_608));
        assert_eq!(r.cpu_usec, 1_234_567);
        assert_eq!(r.throttled_usec, Some(2_500));
        assert_eq!(r.nr_throttled, Some(3));
        assert_eq!(r.oom_kills, Some(1));
    }

    #[test]
    fn v1_reader_follows_each_controller_and_converts_nanoseconds() {
        let fs = fixture("v1");
        let paths = fs.for_pid(4242).unwrap();
        assert_eq!(paths.version, CgroupVersion::V1);
        assert!(paths.memory.ends_with("memory/docker/abc123"));
        // The fixture mounts cpu and cpuacct together as `cpu,cpuacct`.
        assert!(paths.cpuacct.ends_with("cpu,cpuacct/docker/abc123"));
        let r = paths.read().unwrap();
        assert_eq!(r.mem_bytes, 31_457_280);
        assert_eq!(r.mem_peak_bytes, Some(62_914_560));
        assert_eq!(r.anon_bytes, Some(20_971_520));
        assert_eq!(r.file_bytes, Some(4_194_304));
        assert_eq!(r.cpu_usec, 987_654);
        assert_eq!(r.throttled_usec, Some(7_000));
        assert_eq!(r.nr_throttled, Some(2));
        assert_eq!(r.oom_kills, Some(0));
    }

    #[test]
    fn missing_process_names_the_file() {
        let err = fixture("v2").for_pid(1).unwrap_err();
        assert!(err.to_string().contains("proc/1/cgroup"), "{err}");
    }

    #[test]
    fn separate_v1_mounts_are_found_by_controller_name() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = CgroupFs::at(tmp.path());
        std::fs::create_dir_all(tmp.path().join("proc/7")).unwrap();
        std::fs::write(
            tmp.path().join("proc/7/cgroup"),
            "4:memory:/docker/x\n2:cpuacct:/docker/x\n1:cpu:/docker/x\n0::/\n",
        )
        .unwrap();
        let p = fs.for_pid(7).unwrap();
        assert!(p.cpuacct.ends_with("sys/fs/cgroup/cpuacct/docker/x"));
        assert!(p.cpu.ends_with("sys/fs/cgroup/cpu/docker/x"));
    }

    #[test]
    fn a_v1_peak_watch_resets_the_mark_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let paths = CgroupPaths {
            version: CgroupVersion::V1,
            memory: dir.path().into(),
            cpuacct: dir.path().into(),
            cpu: dir.path().into(),
        };
        let f = dir.path().join("memory.max_usage_in_bytes");
        std::fs::write(&f, "4096\n").unwrap();
        let mut w = paths.peak_watch().unwrap();
        assert_eq!(w.reset().unwrap(), 4096);
        // A plain file stands in for the kernel's: the write is what resets.
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "0");
        std::fs::write(&f, "2048\n").unwrap();
        assert_eq!(w.read().unwrap(), 2048);
    }
}
