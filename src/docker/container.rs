//! Typed container specs, the Docker create body they become, the limits
//! really applied (read back with inspect), and how a container ended.
//!
//! Owns the security and isolation defaults every fairground container gets
//! (cap-drop ALL, no-new-privileges, no swap, labels). Starts nothing itself:
//! the engine does.

use std::collections::{BTreeMap, HashMap};

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, EndpointSettings, HostConfig, NetworkingConfig,
    ResourcesUlimits,
};

use super::error::DockerError;
use super::{RunId, LABEL_ROLE, LABEL_RUN};

/// What a container is for; also its `fairground.role` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The framework under test.
    Server,
    /// The load generator.
    Loader,
    /// A short helper: readiness prober, version reader.
    Probe,
}

impl Role {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Loader => "loader",
            Role::Probe => "probe",
        }
    }
}

/// The network name that puts a container on the host's own network stack
/// (Docker's `--network host`): no network of the run, no per-container
/// sysctls, the server reached at 127.0.0.1.
pub const HOST_NETWORK: &str = "host";

/// Per-container network sysctls (`net.*`, namespaced, so allowed per
/// container). The defaults are the usual high-concurrency tuning.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetSysctls {
    /// `net.core.somaxconn`: listen backlog cap.
    pub somaxconn: u32,
    /// `net.ipv4.tcp_max_syn_backlog`: half-open connection queue.
    pub tcp_max_syn_backlog: u32,
    /// `net.ipv4.ip_local_port_range`: ephemeral ports for the loader.
    pub ip_local_port_range: (u16, u16),
    /// `net.ipv4.tcp_tw_reuse`: reuse TIME_WAIT sockets for new connections.
    pub tcp_tw_reuse: bool,
}

impl Default for NetSysctls {
    fn default() -> Self {
        Self {
            somaxconn: 65535,
            tcp_max_syn_backlog: 65535,
            ip_local_port_range: (1024, 65535),
            tcp_tw_reuse: true,
        }
    }
}

impl NetSysctls {
    /// As Docker's `Sysctls` map.
    pub fn to_map(&self) -> HashMap<String, String> {
        HashMap::from([
            ("net.core.somaxconn".into(), self.somaxconn.to_string()),
            (
                "net.ipv4.tcp_max_syn_backlog".into(),
                self.tcp_max_syn_backlog.to_string(),
            ),
            (
                "net.ipv4.ip_local_port_range".into(),
                format!(
                    "{} {}",
                    self.ip_local_port_range.0, self.ip_local_port_range.1
                ),
            ),
            (
                "net.ipv4.tcp_tw_reuse".into(),
                if self.tcp_tw_reuse { "1" } else { "0" }.into(),
            ),
        ])
    }
}

/// Resource limits asked for one container.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// CPUs the container may run on (Docker cpuset syntax, e.g. `0`, `1-3`).
    pub cpuset: Option<String>,
    /// CPU quota in CPUs (becomes `NanoCpus`), e.g. `1.5`.
    pub cpus: Option<f64>,
    /// Memory limit, bytes. Swap is always off: `MemorySwap` = `Memory`.
    pub memory_bytes: Option<u64>,
    /// Open files limit (soft = hard).
    pub nofile: Option<u64>,
}

impl Limits {
    /// CPUs allotted: the quota rounded up, capped by the cpuset size; the
    /// value of `FAIRGROUND_CPUS` so servers size their worker pools by it.
    pub fn cpus_allotted(&self) -> Option<usize> {
        let from_set = self
            .cpuset
            .as_deref()
            .and_then(|s| parse_cpuset(s).ok())
            .map(|v| v.len());
        let from_quota = self.cpus.map(|c| c.ceil().max(1.0) as usize);
        match (from_set, from_quota) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Everything needed to create one container.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ContainerSpec {
    /// The run it belongs to (label `fairground.run`).
    pub run: RunId,
    /// Its role (label `fairground.role`).
    pub role: Role,
    /// Container name; unique per daemon (prefix it with the run id).
    pub name: String,
    /// Image tag or id.
    pub image: String,
    /// Command (arguments after the image's entrypoint).
    pub cmd: Vec<String>,
    /// Entrypoint override, when the image's is not wanted.
    pub entrypoint: Option<Vec<String>>,
    /// Network to attach to (the run network, or [`HOST_NETWORK`] for the
    /// host's own stack); `None` means no network at all.
    pub network: Option<String>,
    /// Resource limits.
    pub limits: Limits,
    /// Network sysctls set inside the container's namespace.
    pub sysctls: NetSysctls,
    /// Mount the root filesystem read-only (with a small tmpfs on /tmp).
    pub read_only_rootfs: bool,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
}

/// Size of the tmpfs mounted on /tmp when the root filesystem is read-only.
pub const TMPFS_TMP: &str = "rw,noexec,nosuid,size=64m";

impl ContainerSpec {
    /// A spec with fairground's defaults: no limits, default sysctls, writable root.
    pub fn new(run: &RunId, role: Role, name: impl Into<String>, image: impl Into<String>) -> Self {
        Self {
            run: run.clone(),
            role,
            name: name.into(),
            image: image.into(),
            cmd: Vec::new(),
            entrypoint: None,
            network: None,
            limits: Limits::default(),
            sysctls: NetSysctls::default(),
            read_only_rootfs: false,
            env: BTreeMap::new(),
        }
    }

    /// The server container of framework `fw`: its image's own command, the
    /// manifest's env and read-only-root choice, on the run network.
    pub fn server(
        run: &RunId,
        fw: &crate::framework::Framework,
        image: &str,
        network: &str,
        limits: Limits,
    ) -> Self {
        let mut s = Self::new(
            run,
            Role::Server,
            format!("{}-server-{}", run.name_prefix(), fw.name()),
            image,
        );
        s.network = Some(network.to_string());
        s.limits = limits;
        s.read_only_rootfs = fw.manifest.read_only_rootfs;
        s.env = fw.manifest.env.clone();
        s
    }

    /// A loader container: the fairground image running `args` (e.g.
    /// `["load", "--url", …, "--json"]`) on the run network.
    pub fn loader(
        run: &RunId,
        fairground_image: &str,
        network: &str,
        limits: Limits,
        args: Vec<String>,
    ) -> Self {
        let mut s = Self::new(
            run,
            Role::Loader,
            format!("{}-loader-{:04x}", run.name_prefix(), rand::random::<u16>()),
            fairground_image,
        );
        s.network = Some(network.to_string());
        s.limits = limits;
        s.read_only_rootfs = true;
        s.cmd = args;
        s
    }

    /// The labels every object of this container carries.
    pub fn labels(&self) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_RUN.to_string(), self.run.0.clone()),
            (LABEL_ROLE.to_string(), self.role.as_str().to_string()),
        ])
    }

    /// The Docker create body: limits, hardening, network, labels.
    pub fn to_create_body(&self) -> ContainerCreateBody {
        let mut env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some(n) = self.limits.cpus_allotted() {
            env.push(format!("{}={n}", crate::framework::CPUS_ENV));
        }
        let memory = self.limits.memory_bytes.map(|m| m as i64);
        let mut host_config = HostConfig {
            cpuset_cpus: self.limits.cpuset.clone(),
            nano_cpus: self.limits.cpus.map(|c| (c * 1e9).round() as i64),
            memory,
            // Equal to memory: no swap, so a memory limit is a real limit.
            memory_swap: memory,
            ulimits: self.limits.nofile.map(|n| {
                vec![ResourcesUlimits {
                    name: Some("nofile".into()),
                    soft: Some(n as i64),
                    hard: Some(n as i64),
                }]
            }),
            sysctls: Some(self.sysctls.to_map()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges:true".into()]),
            readonly_rootfs: Some(self.read_only_rootfs),
            tmpfs: self
                .read_only_rootfs
                .then(|| HashMap::from([("/tmp".to_string(), TMPFS_TMP.to_string())])),
            network_mode: Some(self.network.clone().unwrap_or_else(|| "none".into())),
            init: Some(false),
            ..Default::default()
        };
        let on_host = self.network.as_deref() == Some(HOST_NETWORK);
        if on_host {
            // The host's namespace is not the container's to tune.
            host_config.sysctls = None;
        }
        let networking_config =
            self.network
                .as_ref()
                .filter(|_| !on_host)
                .map(|net| NetworkingConfig {
                    endpoints_config: Some(HashMap::from([(
                        net.clone(),
                        EndpointSettings::default(),
                    )])),
                });
        ContainerCreateBody {
            image: Some(self.image.clone()),
            cmd: Some(self.cmd.clone()),
            entrypoint: self.entrypoint.clone(),
            env: Some(env),
            labels: Some(self.labels()),
            host_config: Some(host_config),
            networking_config,
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        }
    }
}

/// The limits Docker really applied, read back from inspect: the report
/// shows these, not what was asked.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppliedLimits {
    /// `HostConfig.CpusetCpus`.
    pub cpuset: Option<String>,
    /// `HostConfig.NanoCpus` / 1e9.
    pub cpus: Option<f64>,
    /// `HostConfig.Memory`, bytes.
    pub memory_bytes: Option<u64>,
    /// `HostConfig.MemorySwap`, bytes (equal to memory: swap off).
    pub memory_swap_bytes: Option<i64>,
    /// nofile soft limit.
    pub nofile_soft: Option<u64>,
    /// nofile hard limit.
    pub nofile_hard: Option<u64>,
    /// `HostConfig.Sysctls`.
    pub sysctls: BTreeMap<String, String>,
    /// `HostConfig.ReadonlyRootfs`.
    pub read_only_rootfs: bool,
    /// `HostConfig.CapDrop`.
    pub cap_drop: Vec<String>,
    /// `HostConfig.SecurityOpt`.
    pub security_opt: Vec<String>,
}

impl AppliedLimits {
    /// Extract the applied limits from an inspect response.
    pub fn from_inspect(inspect: &ContainerInspectResponse) -> Self {
        let hc = inspect.host_config.clone().unwrap_or_default();
        let nofile = hc
            .ulimits
            .unwrap_or_default()
            .into_iter()
            .find(|u| u.name.as_deref() == Some("nofile"));
        Self {
            cpuset: hc.cpuset_cpus.filter(|s| !s.is_empty()),
            cpus: hc.nano_cpus.filter(|&n| n > 0).map(|n| n as f64 / 1e9),
            memory_bytes: hc.memory.filter(|&m| m > 0).map(|m| m as u64),
            memory_swap_bytes: hc.memory_swap.filter(|&m| m != 0),
            nofile_soft: nofile.as_ref().and_then(|u| u.soft).map(|v| v as u64),
            nofile_hard: nofile.as_ref().and_then(|u| u.hard).map(|v| v as u64),
            sysctls: hc.sysctls.unwrap_or_default().into_iter().collect(),
            read_only_rootfs: hc.readonly_rootfs.unwrap_or(false),
            cap_drop: hc.cap_drop.unwrap_or_default(),
            security_opt: hc.security_opt.unwrap_or_default(),
        }
    }

    /// Whether swap is off (MemorySwap equals Memory).
    pub fn swap_off(&self) -> bool {
        matches!((self.memory_bytes, self.memory_swap_bytes), (Some(m), Some(s)) if s == m as i64)
    }
}

/// How a container ended (or that it still runs).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExitState {
    /// Still running.
    pub running: bool,
    /// Exit code once it stopped.
    pub exit_code: Option<i64>,
    /// Killed by the kernel's OOM killer (`State.OOMKilled`, or exit 137
    /// with the cgroup's OOM kill count raised).
    pub oom_killed: bool,
    /// The daemon's error text, if any.
    pub error: Option<String>,
    /// `State.StartedAt` (RFC 3339).
    pub started_at: Option<String>,
    /// `State.FinishedAt` (RFC 3339).
    pub finished_at: Option<String>,
    /// OOM kills counted by the container's cgroup while it runs (a worker
    /// process killed while the container survives); `None` when not read.
    pub cgroup_oom_kills: Option<u64>,
}

impl ExitState {
    /// Read from an inspect response.
    pub fn from_inspect(inspect: &ContainerInspectResponse) -> Self {
        let st = inspect.state.clone().unwrap_or_default();
        let running = st.running.unwrap_or(false);
        Self {
            running,
            exit_code: if running { None } else { st.exit_code },
            oom_killed: st.oom_killed.unwrap_or(false),
            error: st.error.filter(|e| !e.is_empty()),
            started_at: st.started_at,
            finished_at: st.finished_at.filter(|f| !f.starts_with("0001-")),
            cgroup_oom_kills: None,
        }
    }

    /// A crash: stopped with a non-zero code, or OOM-killed.
    pub fn crashed(&self) -> bool {
        !self.running && (self.oom_killed || self.exit_code.is_some_and(|c| c != 0))
    }

    /// One line for the report: `running`, `exited 0`, `OOM-killed (exit 137)` …
    pub fn describe(&self) -> String {
        if self.running {
            return match self.cgroup_oom_kills {
                Some(n) if n > 0 => {
                    format!("running, but the kernel OOM-killed {n} process(es) inside it")
                }
                _ => "running".into(),
            };
        }
        let code = self.exit_code.map_or("?".to_string(), |c| c.to_string());
        if self.oom_killed {
            format!("OOM-killed by the kernel: memory limit exceeded (exit {code})")
        } else if self.exit_code == Some(137) {
            format!("killed by SIGKILL (exit {code})")
        } else {
            format!("exited with code {code}")
        }
    }
}

/// Parse a cpuset list (`0-2,5`) into CPU numbers.
pub fn parse_cpuset(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("`{s}` is not a cpuset list like `0-3,6`");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.parse().map_err(|_| bad())?;
                let b: usize = b.parse().map_err(|_| bad())?;
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Format CPU numbers as a cpuset list (`0-2,5`).
pub fn format_cpuset(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// `cpuset: auto`: disjoint cores for server and loader. The server takes
/// the highest-numbered cores and the loader the ones below, leaving CPU 0
/// (where the host's interrupts and daemons tend to run) for last.
pub fn allocate_cpusets(
    host_cpus: &[usize],
    server: usize,
    loader: usize,
) -> Result<(String, String), DockerError> {
    if server == 0 || loader == 0 || server + loader > host_cpus.len() {
        return Err(DockerError::TooFewCores {
            available: host_cpus.len(),
            server,
            loader,
        });
    }
    let mut cpus = host_cpus.to_vec();
    cpus.sort_unstable();
    let n = cpus.len();
    let mut server_set = cpus[n - server..].to_vec();
    let mut loader_set = cpus[n - server - loader..n - server].to_vec();
    server_set.sort_unstable();
    loader_set.sort_unstable();
    Ok((format_cpuset(&server_set), format_cpuset(&loader_set)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuset_lists_round_trip() {
        assert_eq!(parse_cpuset("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(format_cpuset(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert!(parse_cpuset("3-1").is_err());
        assert!(parse_cpuset("a").is_err());
    }

    #[test]
    fn auto_cpusets_are_disjoint_and_refuse_small_hosts() {
        let (s, l) = allocate_cpusets(&[0, 1, 2, 3, 4, 5, 6, 7], 4, 3).unwrap();
        assert_eq!(s, "4-7");
        assert_eq!(l, "1-3");
        let (s, l) = allocate_cpusets(&[0, 1], 1, 1).unwrap();
        assert_eq!((s.as_str(), l.as_str()), ("1", "0"));
        let err = allocate_cpusets(&[0, 1], 2, 1).unwrap_err();
        assert!(err.to_string().contains("has 2 CPU(s)"), "{err}");
    }

    #[test]
    fn host_network_mode_joins_the_hosts_stack_without_sysctls() {
        let run = RunId("fg-test".into());
        let mut spec = ContainerSpec::new(&run, Role::Server, "fg-test-server", "img");
        spec.network = Some(HOST_NETWORK.into());
        let body = spec.to_create_body();
        let hc = body.host_config.unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("host"));
        assert_eq!(hc.sysctls, None);
        assert!(body.networking_config.is_none());
    }

    #[test]
    fn create_body_turns_off_swap_drops_caps_and_labels_the_run() {
        let run = RunId("fg-test".into());
        let mut spec = ContainerSpec::new(&run, Role::Server, "fg-test-server", "img");
        spec.network = Some("fg-test-net".into());
        spec.read_only_rootfs = true;
        spec.limits = Limits {
            cpuset: Some("2-3".into()),
            cpus: Some(1.5),
            memory_bytes: Some(256 << 20),
            nofile: Some(65536),
        };
        let body = spec.to_create_body();
        let hc = body.host_config.unwrap();
        assert_eq!(hc.memory, Some(256 << 20));
        assert_eq!(hc.memory_swap, hc.memory);
        assert_eq!(hc.nano_cpus, Some(1_500_000_000));
        assert_eq!(hc.cap_drop.unwrap(), vec!["ALL"]);
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert!(hc.tmpfs.unwrap().contains_key("/tmp"));
        assert_eq!(hc.sysctls.unwrap()["net.core.somaxconn"], "65535");
        assert_eq!(body.labels.unwrap()[LABEL_RUN], "fg-test");
        // 1.5 CPUs rounds up to 2, within the 2-CPU cpuset.
        assert!(body.env.unwrap().contains(&"FAIRGROUND_CPUS=2".to_string()));
    }

    #[test]
    fn server_spec_follows_the_manifest_and_loader_runs_read_only() {
        let fw = crate::framework::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/frameworks/tinyfw"),
        )
        .unwrap();
        let run = RunId("fg-x".into());
        let s = ContainerSpec::server(&run, &fw, "img", "fg-x-net", Limits::default());
        assert_eq!(s.name, "fg-x-server-tinyfw");
        assert_eq!(s.role, Role::Server);
        assert!(s.read_only_rootfs, "the manifest default");
        assert!(s.cmd.is_empty(), "the image's own CMD");
        let l = ContainerSpec::loader(
            &run,
            "fg",
            "fg-x-net",
            Limits::default(),
            vec!["load".into()],
        );
        assert!(l.name.starts_with("fg-x-loader-") && l.read_only_rootfs);
        assert_eq!(l.network.as_deref(), Some("fg-x-net"));
    }

    #[test]
    fn exit_state_explains_oom() {
        let st = ExitState {
            exit_code: Some(137),
            oom_killed: true,
            ..Default::default()
        };
        assert!(st.crashed());
        assert!(st.describe().contains("OOM-killed"));
    }
}
