//! Typed container specs, the Docker create body they become, the limits
//! really applied (read back with inspect), and how a container ended.
//!
//! Owns the security and isolation defaults every fairground container gets
//! (cap-drop ALL, no-new-privileges, no swap, labels). Starts nothing itself:
//! the engine does.

use std::collections::{BTreeMap, HashMap};

// The specs are the plan's; `Resources` is also part of this module's
// `ContainerSpec`, so callers outside the crate name it here.
pub use crate::plan::spec::{DatabaseSpec, LoaderSpec, Resources, ServerSpec};

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, EndpointSettings, HostConfig, Mount, MountType,
    MountVolumeOptions, NetworkingConfig, ResourcesUlimits,
};

use super::{RunId, LABEL_ROLE, LABEL_RUN};
use crate::host::Sysctls;
use crate::plan::spec::SeededFile;

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
    /// The database of the database scenarios.
    Database,
}

impl Role {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Loader => "loader",
            Role::Probe => "probe",
            Role::Database => "database",
        }
    }
}

/// The network name that puts a container on the host's own network stack
/// (Docker's `--network host`): no network of the run, no per-container
/// sysctls, the server reached at 127.0.0.1.
pub const HOST_NETWORK: &str = "host";

/// The `network` of a container that joins another's network namespace
/// (Docker's `--network container:ID`): it has that container's address
/// and sysctls, and no endpoint or sysctls of its own.
pub fn joined_network(owner_id: &str) -> String {
    format!("container:{owner_id}")
}

/// Whether `network` joins another container's namespace ([`joined_network`]).
pub fn is_joined(network: &str) -> bool {
    network.starts_with("container:")
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
    /// Resources it is given.
    pub limits: Resources,
    /// Network sysctls set inside the container's namespace (exactly
    /// these: nothing is added behind the profile's back).
    pub sysctls: Sysctls,
    /// Mount the root filesystem read-only (with a small tmpfs on /tmp).
    pub read_only_rootfs: bool,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// A container port to publish on a host port the daemon picks (the
    /// server seen from loaders on other hosts); bridge networks only.
    pub publish: Option<u16>,
    /// Bind mounts, `host:container[:ro]` (the preflight of another host
    /// reads that host's /proc and /sys read-only).
    pub binds: Vec<String>,
    /// Files put in before it starts, each directory an anonymous volume
    /// labelled with the run (see [`crate::plan::spec::SeededFile`]).
    pub files: Vec<SeededFile>,
    /// The user it runs as (name or uid), when not the image's.
    #[serde(default)]
    pub user: Option<String>,
    /// tmpfs mounts beyond /tmp: mount point → options.
    #[serde(default)]
    pub tmpfs: BTreeMap<String, String>,
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
            limits: Resources::default(),
            sysctls: Sysctls::default(),
            read_only_rootfs: false,
            env: BTreeMap::new(),
            publish: None,
            binds: Vec::new(),
            files: Vec::new(),
            user: None,
            tmpfs: BTreeMap::new(),
        }
    }

    /// The server container of `spec` on `network`: its image's own
    /// command, the manifest's env and read-only-root choice.
    pub fn server(run: &RunId, name: impl Into<String>, spec: &ServerSpec, network: &str) -> Self {
        let mut s = Self::new(run, Role::Server, name, spec.image.clone());
        s.network = Some(network.to_string());
        s.limits = spec.resources.clone();
        s.sysctls = spec.sysctls.clone();
        s.read_only_rootfs = spec.read_only_rootfs;
        s.env = spec.env.clone();
        s.files = spec.files.clone();
        s
    }

    /// A loader container of `spec` on `network`, aimed at `url`.
    pub fn loader(
        run: &RunId,
        name: impl Into<String>,
        spec: &LoaderSpec,
        network: &str,
        url: &str,
    ) -> Self {
        let mut s = Self::new(run, Role::Loader, name, spec.image.clone());
        s.network = Some(network.to_string());
        s.limits = spec.resources.clone();
        s.sysctls = spec.sysctls.clone();
        s.read_only_rootfs = true;
        s.files = spec.files.clone();
        let mut args = spec.args.clone();
        args.url = url.to_string();
        s.cmd = std::iter::once("load".to_string())
            .chain(args.to_args())
            .collect();
        s
    }

    /// The labels every object of this container carries.
    pub fn labels(&self) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_RUN.to_string(), self.run.0.clone()),
            (LABEL_ROLE.to_string(), self.role.as_str().to_string()),
        ])
    }

    /// The directories of [`Self::files`], each once, in order.
    pub fn file_dirs(&self) -> Vec<&str> {
        let mut dirs: Vec<&str> = Vec::new();
        for f in &self.files {
            if !dirs.contains(&f.dir.as_str()) {
                dirs.push(&f.dir);
            }
        }
        dirs
    }

    /// An anonymous volume per directory of [`Self::files`], labelled with
    /// the run: writable under a read-only root, filled before the start
    /// (through the daemon's archive API, so a remote daemon takes it too),
    /// and removed with the container.
    fn file_mounts(&self) -> Vec<Mount> {
        self.file_dirs()
            .into_iter()
            .map(|dir| Mount {
                target: Some(dir.to_string()),
                typ: Some(MountType::VOLUME),
                volume_options: Some(MountVolumeOptions {
                    labels: Some(self.labels()),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect()
    }

    /// The tar archive of the files in `dir`: read-only to everyone (the
    /// server runs as an unprivileged user; the key is a throwaway made
    /// for the run).
    pub fn files_archive(&self, dir: &str) -> std::io::Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        for f in self.files.iter().filter(|f| f.dir == dir) {
            let mut h = tar::Header::new_gnu();
            h.set_size(f.contents.len() as u64);
            h.set_mode(0o444);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            b.append_data(&mut h, &f.name, f.contents.as_slice())?;
        }
        b.into_inner()
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
            sysctls: (!self.sysctls.is_empty())
                .then(|| self.sysctls.0.clone().into_iter().collect()),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges:true".into()]),
            readonly_rootfs: Some(self.read_only_rootfs),
            tmpfs: {
                let mut t: HashMap<String, String> = self.tmpfs.clone().into_iter().collect();
                if self.read_only_rootfs {
                    t.entry("/tmp".into()).or_insert_with(|| TMPFS_TMP.into());
                }
                (!t.is_empty()).then_some(t)
            },
            network_mode: Some(self.network.clone().unwrap_or_else(|| "none".into())),
            binds: (!self.binds.is_empty()).then(|| self.binds.clone()),
            mounts: (!self.files.is_empty()).then(|| self.file_mounts()),
            init: Some(false),
            ..Default::default()
        };
        let on_host = self.network.as_deref() == Some(HOST_NETWORK);
        let joined = self.network.as_deref().is_some_and(is_joined);
        if on_host || joined {
            // The host's namespace is not the container's to tune; a joined
            // namespace is its owner's.
            host_config.sysctls = None;
        }
        let networking_config = self
            .network
            .as_ref()
            .filter(|_| !on_host && !joined)
            .map(|net| NetworkingConfig {
                endpoints_config: Some(HashMap::from([(net.clone(), EndpointSettings::default())])),
            });
        if let Some(port) = self.publish.filter(|_| !on_host && !joined) {
            // HostPort "" lets the daemon pick a free port; it is read back
            // from inspect, so no two runs ever race for one. A joined
            // namespace publishes through its owner (the prober).
            host_config.port_bindings = Some(HashMap::from([(
                format!("{port}/tcp"),
                Some(vec![bollard::models::PortBinding {
                    host_ip: Some("0.0.0.0".into()),
                    host_port: Some(String::new()),
                }]),
            )]));
        }
        ContainerCreateBody {
            exposed_ports: self
                .publish
                .filter(|_| !on_host && !joined)
                .map(|p| vec![format!("{p}/tcp")]),
            image: Some(self.image.clone()),
            cmd: Some(self.cmd.clone()),
            entrypoint: self.entrypoint.clone(),
            user: self.user.clone(),
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
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joined_container_has_no_endpoint_or_sysctls_of_its_own() {
        let mut spec = ContainerSpec::new(&RunId("fg-test".into()), Role::Server, "s", "img");
        spec.network = Some(joined_network("abc123"));
        spec.sysctls = Sysctls::of(&[("net.core.somaxconn", "4096")]);
        let body = spec.to_create_body();
        let hc = body.host_config.unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("container:abc123"));
        assert!(hc.sysctls.is_none());
        assert!(body.networking_config.is_none());
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
    fn seeded_files_get_one_labelled_volume_per_directory_and_a_read_only_archive() {
        let run = RunId("fg-x".into());
        let mut spec = ContainerSpec::new(&run, Role::Server, "fg-x-s-1", "img");
        spec.read_only_rootfs = true;
        let file = |dir: &str, name: &str, text: &str| SeededFile {
            dir: dir.into(),
            name: name.into(),
            contents: text.as_bytes().to_vec(),
        };
        spec.files = vec![
            file("/run/fairground/tls", "server.pem", "CHAIN"),
            file("/run/fairground/tls", "server.key", "KEY"),
            file("/other", "x", "X"),
        ];
        let body = spec.to_create_body();
        let mounts = body.host_config.unwrap().mounts.unwrap();
        assert_eq!(mounts.len(), 2, "{mounts:?}");
        assert_eq!(mounts[0].target.as_deref(), Some("/run/fairground/tls"));
        assert_eq!(mounts[0].typ, Some(MountType::VOLUME));
        assert_eq!(
            mounts[0].source, None,
            "anonymous: removed with the container"
        );
        let labels = mounts[0]
            .volume_options
            .as_ref()
            .unwrap()
            .labels
            .clone()
            .unwrap();
        assert_eq!(labels.get(LABEL_RUN).map(String::as_str), Some("fg-x"));
        let tar = spec.files_archive("/run/fairground/tls").unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mode = entry.header().mode().unwrap();
            let name = entry.path().unwrap().display().to_string();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            seen.push((name, mode, text));
        }
        assert_eq!(
            seen,
            [
                ("server.pem".to_string(), 0o444, "CHAIN".to_string()),
                ("server.key".to_string(), 0o444, "KEY".to_string()),
            ]
        );
        assert!(
            ContainerSpec::new(&run, Role::Server, "n", "img")
                .to_create_body()
                .host_config
                .unwrap()
                .mounts
                .is_none(),
            "no files, no volume"
        );
    }

    #[test]
    fn a_published_port_lets_the_daemon_pick_the_host_port_except_on_the_host_stack() {
        let run = RunId("fg-test".into());
        let mut spec = ContainerSpec::new(&run, Role::Server, "fg-test-server", "img");
        spec.network = Some("bridge".into());
        spec.publish = Some(8080);
        spec.binds = vec!["/proc:/host/proc:ro".into()];
        let body = spec.to_create_body();
        assert_eq!(body.exposed_ports, Some(vec!["8080/tcp".to_string()]));
        let hc = body.host_config.unwrap();
        let b = hc.port_bindings.unwrap()["8080/tcp"].clone().unwrap();
        assert_eq!(b[0].host_port.as_deref(), Some(""), "the daemon picks");
        assert_eq!(hc.binds, Some(vec!["/proc:/host/proc:ro".to_string()]));
        spec.network = Some(HOST_NETWORK.into());
        let body = spec.to_create_body();
        assert_eq!(body.exposed_ports, None);
        assert_eq!(body.host_config.unwrap().port_bindings, None);
    }

    #[test]
    fn create_body_turns_off_swap_drops_caps_and_labels_the_run() {
        let run = RunId("fg-test".into());
        let mut spec = ContainerSpec::new(&run, Role::Server, "fg-test-server", "img");
        spec.network = Some("fg-test-net".into());
        spec.read_only_rootfs = true;
        spec.limits = Resources {
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
        assert_eq!(hc.sysctls, None, "no sysctl the spec does not name");
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
        let spec = ServerSpec::of_framework(
            &fw,
            "img",
            Resources::default(),
            Sysctls::default(),
            std::time::Duration::from_secs(5),
        );
        assert_eq!((spec.port, spec.readiness_path.as_str()), (8080, "/"));
        let s = ContainerSpec::server(&run, "fg-x-tinyfw-1", &spec, "fg-x-net");
        assert_eq!(s.role, Role::Server);
        assert!(s.read_only_rootfs, "the manifest default");
        assert!(s.cmd.is_empty(), "the image's own CMD");
        let loader = LoaderSpec {
            label: "t".into(),
            image: "fg".into(),
            resources: Resources::default(),
            sysctls: Sysctls::default(),
            args: crate::roles::load::args::LoadArgs::new(""),
            time_limit: std::time::Duration::from_secs(60),
            files: Vec::new(),
        };
        let l = ContainerSpec::loader(
            &run,
            "fg-x-load",
            &loader,
            "fg-x-net",
            "http://10.1.2.3:8080",
        );
        assert!(l.read_only_rootfs);
        assert_eq!(l.network.as_deref(), Some("fg-x-net"));
        assert_eq!(&l.cmd[..3], ["load", "--url", "http://10.1.2.3:8080"]);
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
