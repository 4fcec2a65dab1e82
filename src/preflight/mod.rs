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
//! 1-second load sample) comes from [`ProbeFacts`], and what the Docker daemon
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
pub mod memory;
pub mod nic;
pub mod probe;
pub mod virt;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

pub use docker::DockerFacts;
pub use limits::{NetSysctls, SysctlNamespace};
pub use probe::ProbeFacts;

use crate::exit::{coded, ExitCode};

/// Judgement of one check, ordered from good to bad so the worst is the max.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Nothing in this check can distort results.
    Pass,
    /// Results may be distorted; they are kept but marked.
    Warn,
    /// Results from this environment are not to be accepted.
    Fail,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
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
    pub verdict: Verdict,
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
pub struct Outcome {
    /// Pass, warn or fail.
    pub verdict: Verdict,
    /// What was measured (with unit).
    pub measured: String,
    /// What it was judged against.
    pub threshold: String,
    /// Why it matters.
    pub why: String,
    /// What to do about it.
    pub remedy: String,
}

impl Outcome {
    /// An outcome; `why` and `remedy` usually come from the check's constants.
    pub fn new(
        verdict: Verdict,
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
    pub probes: &'a ProbeFacts,
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
    pub fn online_cpus(&self) -> Option<Vec<u32>> {
        cpu::parse_cpu_list(&self.read("/sys/devices/system/cpu/online")?).ok()
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
    fn evaluate(&self, env: &Env<'_>) -> Outcome;
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
    /// Whether the containers use the host's network stack (traffic over
    /// loopback) rather than a Docker bridge.
    pub host_network: bool,
    /// Highest 1-minute load average per online core before a run.
    pub load_per_core_limit: f64,
    /// Network sysctls as the containers see them (read inside a container,
    /// see [`limits::NetSysctls`]); `None` judges the host's namespace.
    pub container_sysctls: Option<NetSysctls>,
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
            container_sysctls: NetSysctls::requested_by(profile),
            container_nofile: Some(profile.server.nofile.max(profile.loader.nofile)),
            ..Self::default()
        }
    }
}

/// Facts about the host worth a line in every report.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostSummary {
    /// Host name (`/proc/sys/kernel/hostname`).
    pub hostname: Option<String>,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// CPU model name (`/proc/cpuinfo`).
    pub cpu_model: Option<String>,
    /// CPUs online.
    pub cores_online: Option<usize>,
    /// MemTotal, bytes.
    pub memory_total: Option<u64>,
    /// 1-minute load average when preflight ran (the before-run figure that
    /// [`after_run`] compares with).
    pub loadavg_1m: Option<f64>,
    /// Bare metal, container or VM and which hypervisor, in words.
    pub platform: String,
    /// cgroup layout: v1, v2 or hybrid.
    pub cgroup: String,
    /// Docker server version and API version, if reachable.
    pub docker: Option<String>,
    /// Where the run's traffic flows.
    pub traffic_path: String,
}

/// The environment as measured and judged before a run; stored whole in
/// results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvReport {
    /// fairground version that judged it.
    pub fairground_version: String,
    /// When it was taken (UTC).
    pub taken_at: chrono::DateTime<chrono::Utc>,
    /// Root the files were read from (`/` on a real run).
    pub root: PathBuf,
    /// The run's needs it was judged against.
    pub input: PreflightInput,
    /// Host facts for the report header.
    pub host: HostSummary,
    /// Raw probe facts (CPUID, timing, limits, load sample).
    pub probes: ProbeFacts,
    /// Raw Docker facts.
    pub docker: DockerFacts,
    /// One result per check, in report order.
    pub checks: Vec<CheckResult>,
    /// The worst verdict of all checks.
    pub verdict: Verdict,
}

impl EnvReport {
    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.checks.iter().filter(|c| c.verdict == Verdict::Fail)
    }

    /// The result of the check `id`, if it ran.
    pub fn check(&self, id: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// A Markdown section: host facts, then one table row per check.
    pub fn summary(&self) -> String {
        let h = &self.host;
        let mut out = String::new();
        out.push_str(&format!(
            "Environment: **{}** ({} checks: {} pass, {} warn, {} fail)\n\n",
            self.verdict,
            self.checks.len(),
            self.count(Verdict::Pass),
            self.count(Verdict::Warn),
            self.count(Verdict::Fail)
        ));
        let or_unknown = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
        out.push_str(&format!(
            "- host: {} · kernel {} · {} · {} CPUs online · {} memory\n",
            or_unknown(&h.hostname),
            or_unknown(&h.kernel),
            or_unknown(&h.cpu_model),
            h.cores_online.map_or("?".into(), |n| n.to_string()),
            h.memory_total.map_or("?".into(), fmt_bytes)
        ));
        out.push_str(&format!(
            "- platform: {} · cgroup {} · docker {}\n- traffic: {}\n\n",
            h.platform,
            h.cgroup,
            or_unknown(&h.docker),
            h.traffic_path
        ));
        out.push_str("| check | verdict | measured | threshold | remedy |\n");
        out.push_str("|---|---|---|---|---|\n");
        for c in &self.checks {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                c.id,
                c.verdict,
                md_cell(&c.measured),
                md_cell(&c.threshold),
                if c.verdict == Verdict::Pass {
                    "".to_string()
                } else {
                    md_cell(&c.remedy)
                }
            ));
        }
        out
    }

    /// Plain-text table for a terminal: one line per check (long
    /// measurements cut to [`TABLE_MEASURED_WIDTH`]; `--json` has them
    /// whole), then the whole measurement, why and remedy of every check
    /// that did not pass.
    pub fn table(&self) -> String {
        let w_id = self
            .checks
            .iter()
            .map(|c| c.id.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let w_m = self
            .checks
            .iter()
            .map(|c| c.measured.chars().count())
            .max()
            .unwrap_or(8)
            .clamp(8, TABLE_MEASURED_WIDTH);
        let mut out = format!(
            "{:<7} {:<w_id$}  {:<w_m$}  THRESHOLD\n",
            "VERDICT", "CHECK", "MEASURED"
        );
        for c in &self.checks {
            out.push_str(&format!(
                "{:<7} {:<w_id$}  {:<w_m$}  {}\n",
                c.verdict.to_string(),
                c.id,
                ellipsize(&c.measured, w_m),
                c.threshold
            ));
        }
        let bad: Vec<_> = self
            .checks
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .collect();
        if !bad.is_empty() {
            out.push('\n');
            for c in bad {
                out.push_str(&format!(
                    "{} {}: {}\n    threshold: {}\n    why: {}\n    remedy: {}\n",
                    c.verdict, c.id, c.measured, c.threshold, c.why, c.remedy
                ));
            }
        }
        let h = &self.host;
        out.push_str(&format!(
            "\nplatform: {}; cgroup {}; traffic: {}\nenvironment: {}\n",
            h.platform, h.cgroup, h.traffic_path, self.verdict
        ));
        out
    }

    fn count(&self, v: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == v).count()
    }
}

/// Widest MEASURED column of the terminal table, in characters.
pub const TABLE_MEASURED_WIDTH: usize = 72;

/// `s` cut to `width` characters, the cut marked with `…`.
fn ellipsize(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Bytes in binary units with one decimal (`23.5 GiB`).
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// Measure and judge the real environment: probes on this machine, Docker
/// facts from the daemon, files under `root`. Takes a little over a second
/// (the load sample) and blocks meanwhile: from async code call it through
/// `spawn_blocking`. It starts no runtime on the caller's thread (the Docker
/// query runs on a thread of its own), so it is safe inside a tokio runtime.
pub fn run(input: &PreflightInput, root: &Path) -> EnvReport {
    // Timed first, on a quiet process: a few ms, outside the load sample.
    let exit_cost = probe::measure_exit_cost();
    let timeout = std::time::Duration::from_millis(input.docker_timeout_ms);
    let docker = std::thread::scope(|s| {
        s.spawn(|| docker::gather_blocking(timeout))
            .join()
            .unwrap_or_else(|_| DockerFacts::unreachable("the Docker query thread panicked"))
    });
    let probes = probe::ProbeFacts::measure(root, exit_cost);
    judge(input, root, probes, docker)
}

/// Judge an environment from facts already gathered (fixtures, or a re-check
/// of a stored report).
pub fn judge(
    input: &PreflightInput,
    root: &Path,
    probes: ProbeFacts,
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
        .unwrap_or(Verdict::Pass);
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
/// rose more than the run itself explains (see [`load::judge_after_run`]).
pub fn after_run(report: &EnvReport) -> CheckResult {
    let now = fs::read_to_string(report.root.join("proc/loadavg"))
        .ok()
        .and_then(|s| load::parse_loadavg(&s));
    load::judge_after_run(report, now)
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
        loadavg_1m: env
            .read("/proc/loadavg")
            .and_then(|s| load::parse_loadavg(&s)),
        platform: virt::detect(env).describe(),
        cgroup: cgroup::detect(env).layout.to_string(),
        docker,
        traffic_path: nic::traffic_path(env),
    }
}

/// Options of `fairground preflight`.
#[derive(Debug, Clone, clap::Args)]
pub struct PreflightArgs {
    /// Print the whole report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Read /proc and /sys under this directory instead of / (fixture trees).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Judge against this profile's needs (a bare name in profiles/, or a
    /// path): highest concurrency, cores, memory limits.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// The id of the current run: its own containers are not leftovers.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Highest 1-minute load average per online core before a run
    /// (default 0.5).
    #[arg(long, value_name = "LOAD", allow_negative_numbers = true)]
    pub max_load_per_core: Option<f64>,
    /// Print only this network namespace's sysctls as JSON and exit (the run
    /// pipeline calls this inside the loader container).
    #[arg(long)]
    pub net_sysctls: bool,
}

/// The host facts a profile is validated and placed against: this machine's,
/// with cores and port range read under `root` when it is not `/`.
fn host_facts(root: &Path) -> crate::profile::HostFacts {
    let mut host = crate::profile::HostFacts::detect();
    if root != Path::new("/") {
        let read = |rel: &str| fs::read_to_string(root.join(rel)).ok();
        if let Some(c) = read("sys/devices/system/cpu/online").and_then(|s| s.trim().parse().ok()) {
            host.cores_online = c;
        }
        host.ip_local_port_range = read("proc/sys/net/ipv4/ip_local_port_range")
            .and_then(|s| crate::profile::parse_port_range(s.trim()).ok());
    }
    host
}

/// `fairground preflight`: print the report; exit 3 when something fails.
pub fn run_cli(args: &PreflightArgs) -> anyhow::Result<ExitCode> {
    if !args.root.is_dir() {
        return Err(coded(
            ExitCode::BadInput,
            anyhow::anyhow!(
                "--root {}: not a directory; give the root of a filesystem tree (default /)",
                args.root.display()
            ),
        ));
    }
    if args.net_sysctls {
        let s = NetSysctls::read(&args.root, SysctlNamespace::Host)
            .with_context(|| format!("reading network sysctls under {}", args.root.display()))?;
        println!("{}", serde_json::to_string(&s)?);
        return Ok(ExitCode::Ok);
    }
    let mut input = match &args.profile {
        Some(name) => {
            let host = host_facts(&args.root);
            let (profile, path) = crate::profile::resolve_with(name, &host)?;
            let input = PreflightInput::from_profile(&profile, &host);
            eprintln!(
                "preflight for profile {} ({}): concurrency up to {}, server cores {}, loader cores {}",
                profile.name,
                path.display(),
                input.max_concurrency,
                input.server_cpuset.as_deref().unwrap_or("unplaced"),
                input.loader_cpuset.as_deref().unwrap_or("unplaced"),
            );
            input
        }
        None => PreflightInput::default(),
    };
    input.run_id = args.run_id.clone();
    if let Some(limit) = args.max_load_per_core {
        if !(limit.is_finite() && limit > 0.0) {
            return Err(coded(
                ExitCode::BadInput,
                anyhow::anyhow!(
                    "--max-load-per-core {limit}: give a positive load per core, e.g. 0.5"
                ),
            ));
        }
        input.load_per_core_limit = limit;
    }
    let report = run(&input, &args.root);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(if report.verdict == Verdict::Fail {
        ExitCode::EnvRefused
    } else {
        ExitCode::Ok
    })
}
