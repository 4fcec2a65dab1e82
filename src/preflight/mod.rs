//! `fairground preflight`: measure and judge the environment before any result
//! is accepted.
//!
//! Whole result sets have been thrown away because the host was wrong (a
//! hypervisor on its slow path, an emulated e1000 NIC, a box loaded by a
//! compile storm, nofile too low for the connection count). This module
//! checks the environment, records it in an [`EnvReport`] that is stored with
//! the results, and says whether results from it may be accepted.
//!
//! Shape: one file per family of checks, one [`Check`] impl per check. Every
//! file read goes through a root directory (`/` for real, a fixture tree in
//! tests); what cannot come from files (CPUID, exit timing, getrlimit, the
//! 1-second load sample) comes from [`MeasuredFacts`], and what the Docker daemon
//! says from [`DockerFacts`]: both are plain data with a real gatherer and
//! fixture values. This module judges; it must not change the host (no
//! sysctl writes, no container removal, no governor changes).
//!
//! Every check, its threshold and the source of that threshold: docs/preflight.md.

pub mod cgroup;
pub mod cpu;
pub mod docker;
pub mod limits;
pub mod load;
pub mod measure;
pub mod memory;
pub mod nic;
mod report;
pub mod virt;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use docker::DockerFacts;
pub use limits::{NamespaceSysctls, SysctlNamespace};
pub use measure::MeasuredFacts;
pub use report::{
    EnvReport, HostSummary, PreflightJson, PreflightMarkdown, PreflightTable, TABLE_MEASURED_WIDTH,
};

/// Outcome of one check, of the environment (preflight) or of a
/// framework against the contract (verify); ordered from good to bad so the
/// worst of several is their max.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Within the threshold: nothing here can distort results.
    #[default]
    Pass,
    /// Worth knowing: results may be distorted; they are kept but marked.
    Warn,
    /// Results from here are not to be accepted (unless forced).
    Fail,
}

impl CheckStatus {
    /// `Pass` when `ok`, else `otherwise`.
    pub fn pass_or(ok: bool, otherwise: CheckStatus) -> CheckStatus {
        if ok {
            CheckStatus::Pass
        } else {
            otherwise
        }
    }
}

impl fmt::Display for CheckStatus {
    /// `pass`, `warn`, or `FAIL` (shouted, so a failure stands out in
    /// tables and terminal lines).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "FAIL",
        })
    }
}

/// The family a check belongs to (one source file each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Bare metal, container or VM, and what a VM exit costs.
    Virtualization,
    /// Network interface drivers and the traffic path.
    Nic,
    /// Cores, SMT, governor, turbo, clock source.
    Cpu,
    /// Load average, steal, iowait, other busy processes.
    Load,
    /// Available memory, swap, transparent hugepages.
    Memory,
    /// nofile and network sysctls.
    Limits,
    /// The Docker daemon and the containers on it.
    Docker,
    /// cgroup version and controllers.
    Cgroup,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Virtualization => "virtualization",
            Family::Nic => "nic",
            Family::Cpu => "cpu",
            Family::Load => "load",
            Family::Memory => "memory",
            Family::Limits => "limits",
            Family::Docker => "docker",
            Family::Cgroup => "cgroup",
        })
    }
}

/// What one check found and what it means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Stable id, `family.name` (e.g. `virt.cost`); results and docs use it.
    pub id: String,
    /// The family of checks it belongs to.
    pub family: Family,
    /// Pass, warn or fail.
    pub verdict: CheckStatus,
    /// What was measured, with its unit and how (and which namespace, for sysctls).
    pub measured: String,
    /// The threshold the measurement was judged against.
    pub threshold: String,
    /// Why this matters for benchmark results.
    pub why: String,
    /// What to do when it warns or fails.
    pub remedy: String,
}

/// A check's judgement before it is stamped with the check's id and family.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// Pass, warn or fail.
    pub verdict: CheckStatus,
    /// What was measured (with unit).
    pub measured: String,
    /// What it was judged against.
    pub threshold: String,
    /// Why it matters.
    pub why: String,
    /// What to do about it.
    pub remedy: String,
}

impl Judgement {
    /// An outcome; `why` and `remedy` usually come from the check's constants.
    pub fn new(
        verdict: CheckStatus,
        measured: impl Into<String>,
        threshold: impl Into<String>,
        why: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Self {
        Self {
            verdict,
            measured: measured.into(),
            threshold: threshold.into(),
            why: why.into(),
            remedy: remedy.into(),
        }
    }
}

/// Everything a check may look at: the root to read files from, the run's
/// inputs, and the facts that could not come from files.
pub struct Env<'a> {
    /// Root of the filesystem to read (`/`, or a fixture tree).
    pub root: &'a Path,
    /// What the coming run needs.
    pub input: &'a PreflightInput,
    /// CPUID, exit timing, rlimits, load sample.
    pub probes: &'a MeasuredFacts,
    /// What the Docker daemon said.
    pub docker: &'a DockerFacts,
}

impl Env<'_> {
    /// `rel` (written like an absolute path, `/proc/loadavg`) under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    /// The trimmed contents of `rel` under the root, or `None` when it is absent
    /// or unreadable (many of these files are simply not exposed in VMs).
    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.path(rel))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// CPUs online, from `/sys/devices/system/cpu/online`.
    pub fn online_cpus(&self) -> Option<Vec<usize>> {
        crate::host::cpu::online(self.root).map(|c| c.to_vec())
    }
}

/// One check of the environment. One impl per check; each family's file
/// lists its checks, and [`all_checks`] runs them in a fixed order.
pub trait Check {
    /// Stable id, `family.name`.
    fn id(&self) -> &'static str;
    /// The family it belongs to.
    fn family(&self) -> Family;
    /// Judge the environment.
    fn evaluate(&self, env: &Env<'_>) -> Judgement;
}

/// Every check, in report order.
pub fn all_checks() -> Vec<Box<dyn Check>> {
    let mut checks: Vec<Box<dyn Check>> = Vec::new();
    checks.extend(virt::checks());
    checks.extend(nic::checks());
    checks.extend(cpu::checks());
    checks.extend(load::checks());
    checks.extend(memory::checks());
    checks.extend(limits::checks());
    checks.extend(docker::checks());
    checks.extend(cgroup::checks());
    checks
}

/// What the coming run needs from the environment. Thresholds that depend on
/// the run (nofile vs concurrency, cores vs cpusets) are computed from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PreflightInput {
    /// The current run's id: its own containers (label `fairground.run`) are
    /// not leftovers.
    pub run_id: Option<String>,
    /// The highest number of concurrent connections any cell opens.
    pub max_concurrency: u64,
    /// Cpuset the server container is pinned to (`"0-1"`, `"2,3"`), if any.
    pub server_cpuset: Option<String>,
    /// Cpuset the loader container is pinned to, if any.
    pub loader_cpuset: Option<String>,
    /// CPUs (quota) the server gets when not pinned.
    pub server_cpus: Option<f64>,
    /// CPUs (quota) the loader gets when not pinned.
    pub loader_cpus: Option<f64>,
    /// Whether server and loader may share cores (a small machine); turns the
    /// core-sharing failure into a warning.
    pub allow_shared_cores: bool,
    /// Sum of the memory limits of every container the run starts at once, bytes.
    pub memory_limits_total: Option<u64>,
    /// Whether the loader runs on another machine (traffic crosses a NIC).
    pub remote_loader: bool,
    /// The address the run's traffic goes to from this host (the server's
    /// address across hosts): the NIC check judges the interface the route
    /// to it takes. `None`: the default route's.
    pub traffic_to: Option<std::net::Ipv4Addr>,
    /// Whether the containers use the host's network stack (traffic over
    /// loopback) rather than a Docker bridge.
    pub host_network: bool,
    /// Highest 1-minute load average per online core before a run.
    pub load_per_core_limit: f64,
    /// Network sysctls as the containers see them (read inside a container,
    /// see [`limits::NamespaceSysctls`]); `None` judges the host's namespace.
    pub container_sysctls: Option<NamespaceSysctls>,
    /// How long to wait for the Docker daemon, milliseconds.
    pub docker_timeout_ms: u64,
    /// The highest nofile limit the run asks for its containers (server or
    /// loader); `None` when no run is given.
    pub container_nofile: Option<u64>,
}

/// Default per-core load limit: a box whose run queue already holds half a
/// task per core before the run steals enough CPU to move figures by more
/// than run-to-run noise (the Go library page saw 3.5-8.5x at ~7 per core).
pub const DEFAULT_LOAD_PER_CORE_LIMIT: f64 = 0.5;

/// Default highest concurrency when no run is given: the middle of the
/// 100 / 1,000 / 10,000 ladder practitioners publish.
pub const DEFAULT_MAX_CONCURRENCY: u64 = 1_000;

impl Default for PreflightInput {
    fn default() -> Self {
        Self {
            run_id: None,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            server_cpuset: None,
            loader_cpuset: None,
            server_cpus: None,
            loader_cpus: None,
            allow_shared_cores: false,
            memory_limits_total: None,
            remote_loader: false,
            traffic_to: None,
            host_network: false,
            load_per_core_limit: DEFAULT_LOAD_PER_CORE_LIMIT,
            container_sysctls: None,
            docker_timeout_ms: 2_500,
            container_nofile: None,
        }
    }
}

impl PreflightInput {
    /// What `profile` needs: its highest concurrency, the cores it places
    /// server and loader on (by [`Profile::placement`](crate::profile::Profile::placement)
    /// on `host`; when they cannot be placed, their CPU counts, which
    /// `cpu.cores` then refuses), its memory limits and shared-cores permission.
    /// A profile runs its loader on this machine, so `remote_loader` is false.
    /// Container sysctls are the ones the profile requests, labelled so; the
    /// run pipeline replaces them with the values read inside the container.
    pub fn from_profile(
        profile: &crate::profile::Profile,
        host: &crate::profile::HostFacts,
    ) -> Self {
        let placement = profile.placement(host).ok();
        Self {
            max_concurrency: u64::from(profile.max_concurrency()),
            server_cpuset: placement.as_ref().map(|p| p.server.to_string()),
            loader_cpuset: placement.as_ref().map(|p| p.loader.to_string()),
            server_cpus: Some(profile.server.cpus),
            loader_cpus: Some(profile.loader.cpus),
            allow_shared_cores: profile.allow_shared_cores,
            memory_limits_total: Some(profile.server.memory + profile.loader.memory),
            remote_loader: false,
            host_network: profile.network == crate::profile::Network::Host,
            container_sysctls: NamespaceSysctls::requested_by(profile),
            container_nofile: Some(profile.server.nofile.max(profile.loader.nofile)),
            ..Self::default()
        }
    }
}

/// Measure and judge the real environment: probes on this machine, Docker
/// facts from the daemon, files under `root`. Takes a little over a second
/// (the load sample) and blocks meanwhile: from async code call it through
/// `spawn_blocking`. It starts no runtime on the caller's thread (the Docker
/// query runs on a thread of its own), so it is safe inside a tokio runtime.
pub fn run(input: &PreflightInput, root: &Path) -> EnvReport {
    // Timed first, on a quiet process: a few ms, outside the load sample.
    let exit_cost = measure::measure_exit_cost();
    let timeout = std::time::Duration::from_millis(input.docker_timeout_ms);
    let docker = std::thread::scope(|s| {
        s.spawn(|| docker::gather_blocking(timeout))
            .join()
            .unwrap_or_else(|_| DockerFacts::unreachable("the Docker query thread panicked"))
    });
    let probes = measure::MeasuredFacts::measure(root, exit_cost);
    judge(input, root, probes, docker)
}

/// Judge an environment from facts already gathered (fixtures, or a re-check
/// of a stored report).
pub fn judge(
    input: &PreflightInput,
    root: &Path,
    probes: MeasuredFacts,
    docker: DockerFacts,
) -> EnvReport {
    let env = Env {
        root,
        input,
        probes: &probes,
        docker: &docker,
    };
    let checks: Vec<CheckResult> = all_checks()
        .iter()
        .map(|c| {
            let o = c.evaluate(&env);
            CheckResult {
                id: c.id().to_string(),
                family: c.family(),
                verdict: o.verdict,
                measured: o.measured,
                threshold: o.threshold,
                why: o.why,
                remedy: o.remedy,
            }
        })
        .collect();
    let host = host_summary(&env);
    let verdict = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(CheckStatus::Pass);
    EnvReport {
        fairground_version: env!("CARGO_PKG_VERSION").to_string(),
        taken_at: chrono::Utc::now(),
        root: root.to_path_buf(),
        input: input.clone(),
        host,
        probes,
        docker,
        checks,
        verdict,
    }
}

/// After the run: read the 1-minute load average again and judge whether it
/// rose more than the run itself explains (see [`load::judge_after_run`]);
/// `after_builds` is the load right after the images the run built between
/// rounds, if any.
pub fn after_run(report: &EnvReport, after_builds: Option<f64>) -> CheckResult {
    let now = crate::host::proc::read_loadavg(&report.root);
    load::judge_after_run(report, after_builds, now)
}

fn host_summary(env: &Env<'_>) -> HostSummary {
    let cpu_model = env.read("/proc/cpuinfo").and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let docker = env.docker.reachable.then(|| {
        format!(
            "{} (API {})",
            env.docker.server_version.as_deref().unwrap_or("?"),
            env.docker.api_version.as_deref().unwrap_or("?")
        )
    });
    HostSummary {
        hostname: env.read("/proc/sys/kernel/hostname"),
        kernel: env.read("/proc/sys/kernel/osrelease"),
        cpu_model,
        cores_online: env.online_cpus().map(|c| c.len()),
        memory_total: env
            .read("/proc/meminfo")
            .and_then(|m| memory::meminfo_bytes(&m, "MemTotal")),
        loadavg_1m: crate::host::proc::read_loadavg(env.root),
        platform: virt::detect(env).describe(),
        cgroup: cgroup::detect(env).layout.to_string(),
        docker,
        traffic_path: nic::traffic_path(env),
    }
}
