//! cgroups: which layout the host mounts (v1, v2, or hybrid: v1 controllers
//! with a cgroup2 tree beside them) and whether the memory and CPU
//! controllers the probe reads are there.
//!
//! Read from /proc/self/mountinfo (falling back to /proc/mounts) and each
//! cgroup2 mount's `cgroup.controllers`; nothing is written or created.

use std::collections::BTreeSet;
use std::fmt;

use super::{Check, CheckStatus, Env, Family, Judgement};

/// cgroup layout of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Only v1 hierarchies.
    V1,
    /// Only the unified v2 hierarchy.
    V2,
    /// v1 controllers plus a cgroup2 mount (usually /sys/fs/cgroup/unified).
    Hybrid,
    /// No cgroup filesystem mounted.
    None,
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::V1 => "v1",
            Layout::V2 => "v2",
            Layout::Hybrid => "hybrid (v1 controllers + cgroup2)",
            Layout::None => "none mounted",
        })
    }
}

/// The controllers fairground's probe and Docker's limits rely on.
const V1_CONTROLLERS: [&str; 14] = [
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "blkio",
    "perf_event",
    "net_prio",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// What the mounts say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFacts {
    /// The layout.
    pub layout: Layout,
    /// Controllers mounted as v1 hierarchies.
    pub v1_controllers: BTreeSet<String>,
    /// Mount point of the cgroup2 tree, if any.
    pub v2_mount: Option<String>,
    /// Controllers enabled in the cgroup2 tree's root.
    pub v2_controllers: BTreeSet<String>,
}

/// `(mount point, fs type, super options)` of each mount, from mountinfo
/// (`... mountpoint ... - fstype source superopts`) or /proc/mounts.
fn mounts(env: &Env<'_>) -> Vec<(String, String, String)> {
    if let Some(mi) = env.read("/proc/self/mountinfo") {
        return mi
            .lines()
            .filter_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let mp = left.split_whitespace().nth(4)?.to_string();
                let mut r = right.split_whitespace();
                let fstype = r.next()?.to_string();
                let _source = r.next();
                Some((mp, fstype, r.next().unwrap_or("").to_string()))
            })
            .collect();
    }
    env.read("/proc/mounts")
        .map(|m| {
            m.lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    Some((
                        f.get(1)?.to_string(),
                        f.get(2)?.to_string(),
                        f.get(3)?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Weigh the mounts under `env.root`.
pub fn detect(env: &Env<'_>) -> CgroupFacts {
    let mut v1 = BTreeSet::new();
    let mut v2_mount = None;
    for (mp, fstype, opts) in mounts(env) {
        match fstype.as_str() {
            "cgroup" => v1.extend(
                opts.split(',')
                    .filter(|o| V1_CONTROLLERS.contains(o))
                    .map(str::to_string),
            ),
            "cgroup2" => v2_mount = Some(mp),
            _ => {}
        }
    }
    let v2_controllers: BTreeSet<String> = v2_mount
        .as_deref()
        .and_then(|mp| env.read(&format!("{mp}/cgroup.controllers")))
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let layout = match (v1.is_empty(), v2_mount.is_some()) {
        (false, true) => Layout::Hybrid,
        (false, false) => Layout::V1,
        (true, true) => Layout::V2,
        (true, false) => Layout::None,
    };
    CgroupFacts {
        layout,
        v1_controllers: v1,
        v2_mount,
        v2_controllers,
    }
}

impl CgroupFacts {
    /// Where `controller` is available: `"v1"`, `"v2"` or `None`.
    pub fn controller(&self, controller: &str) -> Option<&'static str> {
        if self.v1_controllers.contains(controller) {
            Some("v1")
        } else if self.v2_controllers.contains(controller) {
            Some("v2")
        } else {
            None
        }
    }
}

/// `cgroup.version`: the layout (recorded; fails only when none is mounted).
pub struct CgroupLayout;

impl Check for CgroupLayout {
    fn id(&self) -> &'static str {
        "cgroup.version"
    }
    fn family(&self) -> Family {
        Family::Cgroup
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let f = detect(env);
        let why =
            "container limits are cgroups; the probe reads memory and CPU from v1 or v2 files";
        let threshold = "a cgroup filesystem mounted (v1, v2 or hybrid)";
        let remedy =
            "mount cgroup2 on /sys/fs/cgroup (or the v1 controllers) before starting Docker";
        let mut measured = f.layout.to_string();
        if !f.v1_controllers.is_empty() {
            measured.push_str(&format!(
                "; v1: {}",
                f.v1_controllers
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if let Some(mp) = &f.v2_mount {
            measured.push_str(&format!(
                "; cgroup2 at {mp}: {}",
                if f.v2_controllers.is_empty() {
                    "no controllers".to_string()
                } else {
                    f.v2_controllers
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(",")
                }
            ));
        }
        let verdict = if f.layout == Layout::None {
            CheckStatus::Fail
        } else {
            CheckStatus::Pass
        };
        Judgement::new(verdict, measured, threshold, why, remedy)
    }
}

/// `cgroup.controllers`: memory and CPU accounting available to the probe.
pub struct CgroupControllers;

impl Check for CgroupControllers {
    fn id(&self) -> &'static str {
        "cgroup.controllers"
    }
    fn family(&self) -> Family {
        Family::Cgroup
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let f = detect(env);
        let why = "without the memory and CPU controllers the probe cannot sample a container's \
                   memory every second nor its CPU time per request, and falls back to docker stats";
        let threshold = "memory and cpu (v2) or memory, cpu and cpuacct (v1) controllers present";
        let remedy = "enable the missing controllers (kernel command line cgroup_enable=…, or \
                      cgroup2 with +memory +cpu in cgroup.subtree_control)";
        // v2 accounts CPU time in the cpu controller; v1 in cpuacct.
        let wanted: &[&str] = if f.layout == Layout::V2 {
            &["memory", "cpu"]
        } else {
            &["memory", "cpu", "cpuacct"]
        };
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for c in wanted {
            match f.controller(c) {
                Some(v) => found.push(format!("{c} ({v})")),
                None => missing.push(c.to_string()),
            }
        }
        let mut measured = found.join(", ");
        if !missing.is_empty() {
            measured = format!("{measured}; missing: {}", missing.join(", "));
        }
        let verdict = CheckStatus::pass_or(missing.is_empty(), CheckStatus::Warn);
        Judgement::new(
            verdict,
            measured.trim_start_matches("; ").to_string(),
            threshold,
            why,
            remedy,
        )
    }
}

/// The checks of this family.
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![Box::new(CgroupLayout), Box::new(CgroupControllers)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::{DockerFacts, MeasuredFacts, PreflightInput};

    fn detect_in(files: &[(&str, &str)]) -> CgroupFacts {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let (input, probes, docker) = (
            PreflightInput::default(),
            MeasuredFacts::default(),
            DockerFacts::default(),
        );
        let env = Env {
            root: dir.path(),
            input: &input,
            probes: &probes,
            docker: &docker,
        };
        detect(&env)
    }

    #[test]
    fn proc_mounts_is_read_when_mountinfo_is_absent() {
        let f = detect_in(&[
            (
                "proc/mounts",
                "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n",
            ),
            ("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n"),
        ]);
        assert_eq!(f.layout, Layout::V2);
        assert_eq!(f.controller("memory"), Some("v2"));
        assert_eq!(f.controller("cpuacct"), None);
    }

    #[test]
    fn no_cgroup_mount_is_layout_none() {
        let f = detect_in(&[(
            "proc/self/mountinfo",
            "27 1 8:1 / / rw - ext4 /dev/sda1 rw\n",
        )]);
        assert_eq!(f.layout, Layout::None);
    }
}
