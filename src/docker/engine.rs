//! The [`Engine`] trait: the few container operations the run pipeline
//! needs, with the real implementation ([`DockerEngine`], bollard) and an
//! in-memory one ([`FakeEngine`]) so the pipeline can be tested without a
//! daemon (hyperfine's Executor/MockExecutor idea).
//!
//! A typical run:
//! ```text
//! engine.ensure_images(&frameworks)        -> BuiltImages (fairground, bases, frameworks)
//! engine.create_network(&run)              -> NetworkInfo (internal, own subnet)
//! engine.start_container(&server_spec)     -> Handle (id, ip, pid, started_at)
//! engine.inspect_limits(&server)           -> AppliedLimits (what Docker really applied)
//! engine.wait_ready(&server, &check)       -> Readiness (first 200, cold start)
//! engine.start_sampler(&server, 1 s)       -> Sampler ... .stop() -> Series
//! engine.run_to_exit(&loader_spec, limit)  -> Output (stdout = the loader's JSON)
//! engine.exit_state(&server)               -> ExitState (crash / OOM?)
//! engine.logs_tail(&server, 100)
//! engine.cleanup(&run)                     -> CleanupReport
//! ```
//! Must not decide what to measure or judge results.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use bollard::query_parameters::{
    CreateContainerOptions, KillContainerOptions, LogsOptions, RemoveContainerOptions,
    StartContainerOptions,
};
use bollard::Docker;
use futures_util::StreamExt;

use super::cleanup::{self, CleanupReport};
use super::container::{AppliedLimits, ContainerSpec, ExitState, Role};
use super::error::{ApiContext, DockerError};
use super::images::{self, ImageInfo, ImageOptions};
use super::network::{self, NetworkInfo};
use super::ready::ReadyReport;
use super::{bases, RunId};
use crate::framework::Framework;
use crate::probe::{CgroupFs, CgroupReading, Sampler, SamplerSource};

/// A started container.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Handle {
    /// Container id.
    pub id: String,
    /// Container name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The network it is on, if any.
    pub network: Option<String>,
    /// Its IPv4 address on that network.
    pub ip: Option<String>,
    /// Host PID of its main process (for cgroup probes).
    pub pid: Option<u32>,
    /// `State.StartedAt`, RFC 3339.
    pub started_at: Option<String>,
}

/// What to probe for readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyCheck {
    /// Server port inside its container.
    pub port: u16,
    /// Readiness path (`/` by default in manifests).
    pub path: String,
    /// Give up after this long.
    pub timeout: Duration,
}

/// The server answered 200.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Readiness {
    /// The URL probed from inside the run network.
    pub url: String,
    /// Unix time (ms) of the first 200.
    pub first_200_unix_ms: u64,
    /// Requests until the first 200.
    pub attempts: u64,
    /// Cold start: first 200 − the container's `State.StartedAt`, ms.
    pub cold_start_ms: Option<i64>,
    /// True when the very first request already got 200: the server was
    /// ready before the prober (itself a container, started after the
    /// server) could ask, so `cold_start_ms` is only an upper bound (it
    /// includes the prober's own start, ~0.5 s on a busy host). Show it as
    /// `≤ N ms`.
    pub cold_start_is_upper_bound: bool,
}

/// How a run-to-exit container ended and what it printed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Output {
    /// Exit code.
    pub exit_code: i64,
    /// Everything it wrote on stdout.
    pub stdout: String,
    /// Everything it wrote on stderr.
    pub stderr: String,
    /// How it ended.
    pub state: ExitState,
}

/// The images a run uses.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BuiltImages {
    /// fairground's own image (loader, prober, reference server).
    pub fairground: ImageInfo,
    /// Base images resolved for the frameworks.
    pub bases: Vec<ImageInfo>,
    /// Framework images by framework name.
    pub frameworks: BTreeMap<String, ImageInfo>,
}

/// The container operations the run pipeline needs. See the module docs
/// for the order of calls in a run.
pub trait Engine: Send + Sync {
    /// Build or reuse the fairground image, the bases the frameworks need
    /// and the framework images.
    fn ensure_images(
        &self,
        frameworks: &[Framework],
    ) -> impl Future<Output = anyhow::Result<BuiltImages>> + Send;
    /// CPUs of the daemon's host, for `cpuset: auto`
    /// ([`super::container::allocate_cpusets`]).
    fn host_cpus(&self) -> impl Future<Output = anyhow::Result<Vec<usize>>> + Send;
    /// Create the run's internal network.
    fn create_network(
        &self,
        run: &RunId,
    ) -> impl Future<Output = anyhow::Result<NetworkInfo>> + Send;
    /// Create and start a long-running container (server).
    fn start_container(
        &self,
        spec: &ContainerSpec,
    ) -> impl Future<Output = anyhow::Result<Handle>> + Send;
    /// The limits Docker really applied to a container.
    fn inspect_limits(
        &self,
        h: &Handle,
    ) -> impl Future<Output = anyhow::Result<AppliedLimits>> + Send;
    /// Wait for 200 on the server's readiness path, probed from inside the
    /// run network; errors with the server's log tail on timeout.
    fn wait_ready(
        &self,
        server: &Handle,
        check: &ReadyCheck,
    ) -> impl Future<Output = anyhow::Result<Readiness>> + Send;
    /// Run a container to its exit (bounded by `timeout`), remove it, and
    /// return its output. A non-zero exit is an error showing its output.
    /// With `stderr_lines`, each stderr line is also sent there as the
    /// container prints it (the loader's live progress).
    fn run_to_exit(
        &self,
        spec: &ContainerSpec,
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> impl Future<Output = anyhow::Result<Output>> + Send;
    /// Start sampling memory and CPU of a container every `every`.
    fn start_sampler(
        &self,
        h: &Handle,
        every: Duration,
    ) -> impl Future<Output = anyhow::Result<Sampler>> + Send;
    /// Whether the container still runs, or how it ended (crash, OOM kill).
    fn exit_state(&self, h: &Handle) -> impl Future<Output = anyhow::Result<ExitState>> + Send;
    /// Its last `lines` log lines (stdout and stderr).
    fn logs_tail(
        &self,
        h: &Handle,
        lines: usize,
    ) -> impl Future<Output = anyhow::Result<String>> + Send;
    /// Stop and remove one container.
    fn remove(&self, h: &Handle) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Remove every container and network of `run`.
    fn cleanup(&self, run: &RunId) -> impl Future<Output = anyhow::Result<CleanupReport>> + Send;
}

// ---------------------------------------------------------------------------
// The real engine

/// Where a running container's stderr lines go, one `String` per line
/// without its newline.
pub type LineSink = tokio::sync::mpsc::UnboundedSender<String>;

/// How long the log follower may lag behind a container's exit before the
/// rest of its lines are given up (they are still in the collected output).
const FOLLOW_DRAIN: Duration = Duration::from_secs(2);

/// Set (to anything) to keep superseded images: for several checkouts of
/// fairground sharing one daemon, each with images of its own inputs.
pub const KEEP_SUPERSEDED_ENV: &str = "FAIRGROUND_KEEP_SUPERSEDED";

/// [`Engine`] on a real Docker daemon.
pub struct DockerEngine {
    docker: Docker,
    opts: ImageOptions,
    cgroup: CgroupFs,
    fairground_image: Mutex<Option<String>>,
}

impl std::fmt::Debug for DockerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerEngine")
            .field("opts", &self.opts)
            .finish()
    }
}

impl DockerEngine {
    /// Connect (DOCKER_HOST or the local socket). Unreachable daemon: exit code 4.
    pub async fn connect(opts: ImageOptions) -> anyhow::Result<Self> {
        let docker = super::connect_or_exit_code().await?;
        Ok(Self::with_docker(docker, opts))
    }

    /// Wrap an existing connection.
    pub fn with_docker(docker: Docker, opts: ImageOptions) -> Self {
        Self {
            docker,
            opts,
            cgroup: CgroupFs::default(),
            fairground_image: Mutex::new(None),
        }
    }

    /// The bollard client (for the [`cleanup::RunGuard`]).
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// Image options in use.
    pub fn options(&self) -> &ImageOptions {
        &self.opts
    }

    /// Build or reuse only the fairground image; remembers its tag for probes.
    pub async fn ensure_fairground(&self) -> anyhow::Result<ImageInfo> {
        let info = images::ensure_fairground(&self.docker, &self.opts).await?;
        *self.fairground_image.lock().unwrap() = Some(info.tag.clone());
        Ok(info)
    }

    async fn fairground_tag(&self) -> anyhow::Result<String> {
        if let Some(t) = self.fairground_image.lock().unwrap().clone() {
            return Ok(t);
        }
        Ok(self.ensure_fairground().await?.tag)
    }

    async fn inspect(
        &self,
        id: &str,
    ) -> Result<bollard::models::ContainerInspectResponse, DockerError> {
        self.docker
            .inspect_container(
                id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .doing(|| format!("inspecting container {id}"))
    }

    async fn create_and_start(&self, spec: &ContainerSpec) -> anyhow::Result<String> {
        let created = self
            .docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(spec.name.clone()),
                    ..Default::default()
                }),
                spec.to_create_body(),
            )
            .await
            .doing(|| {
                format!(
                    "creating container {} ({}) from {}",
                    spec.name,
                    spec.role.as_str(),
                    spec.image
                )
            })?;
        if let Err(source) = self
            .docker
            .start_container(&created.id, None::<StartContainerOptions>)
            .await
        {
            let tail = self.tail(&created.id, 100).await.unwrap_or_default();
            let _ = self.force_remove(&created.id).await;
            let mut why = format!("could not start: {source}");
            // runc cannot raise RLIMIT_NOFILE (type 7) above the daemon's own
            // hard limit; say so instead of leaving the user with runc's words.
            if why.contains("rlimit type 7") {
                why.push_str(&format!(
                    "\nhint: nofile {} is above the Docker daemon's own open-files hard limit; \
                     lower `nofile`, or raise dockerd's limit (systemd: LimitNOFILE=) and restart it",
                    spec.limits.nofile.unwrap_or(0)
                ));
            }
            return Err(DockerError::ContainerFailed {
                container: spec.name.clone(),
                role: spec.role.as_str().into(),
                why,
                tail,
            }
            .into());
        }
        Ok(created.id)
    }

    async fn force_remove(&self, id: &str) -> Result<(), DockerError> {
        self.docker
            .remove_container(
                id,
                Some(RemoveContainerOptions {
                    force: true,
                    v: true,
                    ..Default::default()
                }),
            )
            .await
            .doing(|| format!("removing container {id}"))
    }

    /// stdout and stderr of a container, separately, last `lines` each (0 = all).
    async fn logs(&self, id: &str, lines: usize) -> Result<(String, String), DockerError> {
        let opts = LogsOptions {
            stdout: true,
            stderr: true,
            tail: if lines == 0 {
                "all".into()
            } else {
                lines.to_string()
            },
            ..Default::default()
        };
        let mut stream = self.docker.logs(id, Some(opts));
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(item) = stream.next().await {
            match item.doing(|| format!("reading logs of container {id}"))? {
                bollard::container::LogOutput::StdErr { message } => {
                    err.extend_from_slice(&message)
                }
                other => out.extend_from_slice(other.as_ref()),
            }
        }
        Ok((
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        ))
    }

    async fn tail(&self, id: &str, lines: usize) -> Result<String, DockerError> {
        let (out, err) = self.logs(id, lines).await?;
        Ok(match (out.is_empty(), err.is_empty()) {
            (false, false) => format!("{out}{err}"),
            (false, true) => out,
            _ => err,
        })
    }

    /// Follow a container's stderr and send it on line by line until the
    /// container stops or `sink` is dropped.
    fn follow_stderr(&self, id: &str, sink: LineSink) -> tokio::task::JoinHandle<()> {
        let docker = self.docker.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            let opts = LogsOptions {
                follow: true,
                stdout: false,
                stderr: true,
                tail: "all".into(),
                ..Default::default()
            };
            let mut stream = docker.logs(&id, Some(opts));
            let mut pending: Vec<u8> = Vec::new();
            while let Some(Ok(item)) = stream.next().await {
                let bollard::container::LogOutput::StdErr { message } = item else {
                    continue;
                };
                pending.extend_from_slice(&message);
                while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=nl).collect();
                    if sink
                        .send(String::from_utf8_lossy(&line[..nl]).into_owned())
                        .is_err()
                    {
                        return;
                    }
                }
            }
        })
    }

    /// Run to exit and collect output, whatever the exit code.
    async fn run_collect(
        &self,
        spec: &ContainerSpec,
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<Output> {
        let id = self.create_and_start(spec).await?;
        let follower = stderr_lines.map(|sink| self.follow_stderr(&id, sink));
        let waited = tokio::time::timeout(timeout, async {
            let mut w = self
                .docker
                .wait_container(&id, None::<bollard::query_parameters::WaitContainerOptions>);
            // A non-zero exit comes back as an error item; the state is
            // read from inspect below either way.
            let _ = w.next().await;
        })
        .await;
        if waited.is_err() {
            let _ = self
                .docker
                .kill_container(
                    &id,
                    Some(KillContainerOptions {
                        signal: "KILL".into(),
                    }),
                )
                .await;
            let tail = self.tail(&id, 100).await.unwrap_or_default();
            let _ = self.force_remove(&id).await;
            return Err(DockerError::Timeout {
                container: spec.name.clone(),
                timeout_s: timeout.as_secs(),
                tail,
            }
            .into());
        }
        if let Some(mut f) = follower {
            // The stream ends when the container stops; never wait long.
            if tokio::time::timeout(FOLLOW_DRAIN, &mut f).await.is_err() {
                f.abort();
            }
        }
        let inspect = self.inspect(&id).await;
        let logs = self.logs(&id, 0).await;
        let _ = self.force_remove(&id).await;
        let state = ExitState::from_inspect(&inspect?);
        let (stdout, stderr) = logs?;
        Ok(Output {
            exit_code: state.exit_code.unwrap_or(-1),
            stdout,
            stderr,
            state,
        })
    }
}

/// Keep the last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Milliseconds between an RFC 3339 timestamp and a unix time in ms.
pub fn cold_start_ms(started_at: &str, first_200_unix_ms: u64) -> Option<i64> {
    let started = chrono::DateTime::parse_from_rfc3339(started_at).ok()?;
    Some(first_200_unix_ms as i64 - started.timestamp_millis())
}

impl Engine for DockerEngine {
    async fn ensure_images(&self, frameworks: &[Framework]) -> anyhow::Result<BuiltImages> {
        let fairground = self.ensure_fairground().await?;
        let mut base_infos: BTreeMap<String, ImageInfo> = BTreeMap::new();
        let mut fw_infos = BTreeMap::new();
        for fw in frameworks {
            let (base_tag, base_info) = bases::resolve(&self.docker, &fw.manifest.base, &self.opts)
                .await
                .map_err(|e| {
                    e.context(format!(
                        "framework {}: base `{}`",
                        fw.name(),
                        fw.manifest.base
                    ))
                })?;
            if let Some(b) = base_info {
                base_infos.insert(b.name.clone(), b);
            }
            let info = images::ensure_framework(&self.docker, fw, &base_tag, &self.opts).await?;
            fw_infos.insert(fw.name().to_string(), info);
        }
        // Multi-stage builds leave their build stages as untagged images:
        // nothing refers to them, so they would only pile up.
        images::prune_build_stages(&self.docker).await?;
        // Older builds of the same images (inputs since changed) are never
        // used again: remove them rather than let every edit leave one.
        let current: Vec<&str> = std::iter::once(fairground.tag.as_str())
            .chain(base_infos.values().map(|b| b.tag.as_str()))
            .chain(fw_infos.values().map(|f| f.tag.as_str()))
            .collect();
        // Several checkouts of fairground sharing one daemon would remove
        // each other's images at every build; they can opt out.
        if std::env::var_os(KEEP_SUPERSEDED_ENV).is_none() {
            for tag in images::prune_superseded(&self.docker, &current).await? {
                (self.opts.progress)(&format!("removed superseded image {tag}"));
            }
        }
        Ok(BuiltImages {
            fairground,
            bases: base_infos.into_values().collect(),
            frameworks: fw_infos,
        })
    }

    async fn host_cpus(&self) -> anyhow::Result<Vec<usize>> {
        let info = self
            .docker
            .info()
            .await
            .doing(|| "reading daemon info".into())?;
        let n = info.ncpu.unwrap_or(0).max(0) as usize;
        Ok((0..n).collect())
    }

    async fn create_network(&self, run: &RunId) -> anyhow::Result<NetworkInfo> {
        Ok(network::create(&self.docker, run).await?)
    }

    async fn start_container(&self, spec: &ContainerSpec) -> anyhow::Result<Handle> {
        let id = self.create_and_start(spec).await?;
        let inspect = self.inspect(&id).await?;
        let state = inspect.state.clone().unwrap_or_default();
        let on_host = spec.network.as_deref() == Some(super::container::HOST_NETWORK);
        let ip = spec.network.as_ref().and_then(|net| {
            if on_host {
                // Its ports are the host's own.
                return Some("127.0.0.1".to_string());
            }
            inspect
                .network_settings
                .as_ref()?
                .networks
                .as_ref()?
                .get(net)?
                .ip_address
                .clone()
                .filter(|ip| !ip.is_empty())
        });
        Ok(Handle {
            id,
            name: spec.name.clone(),
            role: spec.role,
            network: spec.network.clone(),
            ip,
            pid: state.pid.filter(|&p| p > 0).map(|p| p as u32),
            started_at: state.started_at,
        })
    }

    async fn inspect_limits(&self, h: &Handle) -> anyhow::Result<AppliedLimits> {
        Ok(AppliedLimits::from_inspect(&self.inspect(&h.id).await?))
    }

    async fn wait_ready(&self, server: &Handle, check: &ReadyCheck) -> anyhow::Result<Readiness> {
        let ip = server.ip.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "server {} has no address on a run network; start it with `network` set",
                server.name
            )
        })?;
        let url = format!("http://{ip}:{}{}", check.port, check.path);
        let image = self.fairground_tag().await?;
        let run = RunId(
            self.inspect(&server.id)
                .await?
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get(super::LABEL_RUN).cloned())
                .unwrap_or_else(|| self.opts.run.0.clone()),
        );
        let mut spec = ContainerSpec::new(
            &run,
            Role::Probe,
            format!("{}-ready-{:04x}", server.name, rand::random::<u16>()),
            image,
        );
        spec.network = server.network.clone();
        spec.read_only_rootfs = true;
        spec.cmd = vec![
            "ready".into(),
            "--url".into(),
            url.clone(),
            "--timeout".into(),
            format!("{}ms", check.timeout.as_millis()),
        ];
        let out = self
            .run_collect(&spec, check.timeout + Duration::from_secs(30), None)
            .await?;
        let report: Option<ReadyReport> = out
            .stdout
            .lines()
            .find_map(|l| serde_json::from_str(l).ok());
        match report {
            Some(ReadyReport {
                ready: true,
                first_200_unix_ms: Some(t),
                attempts,
                ..
            }) => Ok(Readiness {
                url,
                first_200_unix_ms: t,
                attempts,
                cold_start_ms: server
                    .started_at
                    .as_deref()
                    .and_then(|s| cold_start_ms(s, t)),
                cold_start_is_upper_bound: attempts <= 1,
            }),
            _ => {
                let tail = self.tail(&server.id, 100).await.unwrap_or_default();
                let state = self.exit_state(server).await.ok();
                let mut probe = format!("{}{}", out.stdout, out.stderr);
                if let Some(st) = state.filter(|s| !s.running) {
                    probe.push_str(&format!("\n(the server is not running: {})", st.describe()));
                }
                Err(DockerError::NotReady {
                    container: server.name.clone(),
                    url,
                    timeout_s: check.timeout.as_secs(),
                    probe,
                    tail,
                }
                .into())
            }
        }
    }

    async fn run_to_exit(
        &self,
        spec: &ContainerSpec,
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<Output> {
        let out = self.run_collect(spec, timeout, stderr_lines).await?;
        if out.state.crashed() {
            return Err(DockerError::ContainerFailed {
                container: spec.name.clone(),
                role: spec.role.as_str().into(),
                why: out.state.describe(),
                tail: last_lines(&format!("{}{}", out.stdout, out.stderr), 100),
            }
            .into());
        }
        Ok(out)
    }

    async fn start_sampler(&self, h: &Handle, every: Duration) -> anyhow::Result<Sampler> {
        // Prefer the cgroup files (exact, cheap); fall back to the stats API
        // when the daemon is remote or its cgroup tree is not visible here.
        let local = super::daemon_is_local()
            .then(|| h.pid.and_then(|pid| self.cgroup.for_pid(pid).ok()))
            .flatten()
            .filter(|paths| paths.read().is_ok());
        let source = match local {
            Some(paths) => SamplerSource::Cgroup(paths),
            None => SamplerSource::StatsApi {
                docker: self.docker.clone(),
                container: h.id.clone(),
            },
        };
        Ok(Sampler::start(source, every))
    }

    async fn exit_state(&self, h: &Handle) -> anyhow::Result<ExitState> {
        let mut state = ExitState::from_inspect(&self.inspect(&h.id).await?);
        // While it runs, the cgroup also tells about OOM kills of processes
        // other than the main one (memory.events / memory.oom_control).
        if state.running && super::daemon_is_local() {
            state.cgroup_oom_kills = self.read_cgroup(h).ok().and_then(|r| r.oom_kills);
        }
        Ok(state)
    }

    async fn logs_tail(&self, h: &Handle, lines: usize) -> anyhow::Result<String> {
        Ok(self.tail(&h.id, lines).await?)
    }

    async fn remove(&self, h: &Handle) -> anyhow::Result<()> {
        Ok(self.force_remove(&h.id).await?)
    }

    async fn cleanup(&self, run: &RunId) -> anyhow::Result<CleanupReport> {
        Ok(cleanup::clean(&self.docker, Some(run), false).await?)
    }
}

impl DockerEngine {
    /// Read a container's cgroup once (local daemons only).
    pub fn read_cgroup(&self, h: &Handle) -> anyhow::Result<CgroupReading> {
        let pid = h
            .pid
            .ok_or_else(|| anyhow::anyhow!("container {} has no PID (not running?)", h.name))?;
        Ok(self.cgroup.for_pid(pid)?.read()?)
    }
}

// ---------------------------------------------------------------------------
// The fake engine

/// Scripted behaviour of the [`FakeEngine`].
#[derive(Debug, Clone)]
pub struct FakeScript {
    /// Cold start reported by `wait_ready`, ms; `None` makes the server never ready.
    pub cold_start_ms: Option<i64>,
    /// What loaders print on stdout.
    pub loader_stdout: String,
    /// What loaders print on stderr (their progress lines).
    pub loader_stderr: String,
    /// Exit code of loaders.
    pub loader_exit: i64,
    /// Whether servers are reported OOM-killed by `exit_state`.
    pub server_oom: bool,
    /// Readings the sampler serves, one per period.
    pub samples: Vec<CgroupReading>,
    /// CPUs `host_cpus` reports.
    pub host_cpus: usize,
}

impl Default for FakeScript {
    fn default() -> Self {
        Self {
            cold_start_ms: Some(50),
            loader_stdout: "{}".into(),
            loader_stderr: String::new(),
            loader_exit: 0,
            server_oom: false,
            samples: vec![CgroupReading::default()],
            host_cpus: 4,
        }
    }
}

/// An in-memory [`Engine`] that records every call, for pipeline tests.
#[derive(Debug, Default)]
pub struct FakeEngine {
    /// Scripted answers.
    pub script: FakeScript,
    state: Mutex<FakeState>,
}

#[derive(Debug, Default)]
struct FakeState {
    /// Live containers: id -> (spec, run).
    containers: BTreeMap<String, ContainerSpec>,
    /// Live networks: name -> run.
    networks: BTreeMap<String, RunId>,
    /// Every call, in order (`start server fg-x-server`, `cleanup fg-x` …).
    calls: Vec<String>,
    next: u32,
}

impl FakeEngine {
    /// A fake with the given script.
    pub fn new(script: FakeScript) -> Self {
        Self {
            script,
            state: Mutex::default(),
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Names of containers and networks still present.
    pub fn leftovers(&self) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.containers
            .values()
            .map(|s| s.name.clone())
            .chain(st.networks.keys().cloned())
            .collect()
    }

    fn log(&self, call: String) {
        self.state.lock().unwrap().calls.push(call);
    }

    fn image(kind: images::ImageKind, name: &str) -> ImageInfo {
        ImageInfo {
            kind,
            name: name.into(),
            tag: format!("fake/{name}:000000000000"),
            id: format!("sha256:fake-{name}"),
            size_bytes: 1 << 20,
            inputs_hash: "0".repeat(64),
            reused: false,
            versions: Some(format!("{name} 0.0.0\n")),
            app_binary_bytes: (kind == images::ImageKind::Framework).then_some(2 << 20),
        }
    }
}

impl Engine for FakeEngine {
    async fn ensure_images(&self, frameworks: &[Framework]) -> anyhow::Result<BuiltImages> {
        self.log(format!("ensure_images {}", frameworks.len()));
        Ok(BuiltImages {
            fairground: Self::image(images::ImageKind::Fairground, "fairground"),
            bases: Vec::new(),
            frameworks: frameworks
                .iter()
                .map(|f| {
                    (
                        f.name().to_string(),
                        Self::image(images::ImageKind::Framework, f.name()),
                    )
                })
                .collect(),
        })
    }

    async fn host_cpus(&self) -> anyhow::Result<Vec<usize>> {
        Ok((0..self.script.host_cpus).collect())
    }

    async fn create_network(&self, run: &RunId) -> anyhow::Result<NetworkInfo> {
        let name = format!("{}-net", run.name_prefix());
        self.log(format!("create_network {name}"));
        self.state
            .lock()
            .unwrap()
            .networks
            .insert(name.clone(), run.clone());
        Ok(NetworkInfo {
            name: name.clone(),
            id: format!("fake-{name}"),
            subnet: "10.213.0.0/24".into(),
            internal: true,
        })
    }

    async fn start_container(&self, spec: &ContainerSpec) -> anyhow::Result<Handle> {
        self.log(format!("start {} {}", spec.role.as_str(), spec.name));
        let mut st = self.state.lock().unwrap();
        st.next += 1;
        let n = st.next;
        let id = format!("fake{n:04}");
        st.containers.insert(id.clone(), spec.clone());
        Ok(Handle {
            id,
            name: spec.name.clone(),
            role: spec.role,
            network: spec.network.clone(),
            ip: spec.network.as_ref().map(|_| format!("10.213.0.{}", n + 1)),
            pid: Some(10_000 + n),
            started_at: Some("2026-01-01T00:00:00Z".into()),
        })
    }

    async fn inspect_limits(&self, h: &Handle) -> anyhow::Result<AppliedLimits> {
        let st = self.state.lock().unwrap();
        let spec = st
            .containers
            .get(&h.id)
            .ok_or_else(|| anyhow::anyhow!("fake: no container {}", h.name))?;
        let l = &spec.limits;
        Ok(AppliedLimits {
            cpuset: l.cpuset.clone(),
            cpus: l.cpus,
            memory_bytes: l.memory_bytes,
            memory_swap_bytes: l.memory_bytes.map(|m| m as i64),
            nofile_soft: l.nofile,
            nofile_hard: l.nofile,
            sysctls: spec.sysctls.to_map().into_iter().collect(),
            read_only_rootfs: spec.read_only_rootfs,
            cap_drop: vec!["ALL".into()],
            security_opt: vec!["no-new-privileges:true".into()],
        })
    }

    async fn wait_ready(&self, server: &Handle, check: &ReadyCheck) -> anyhow::Result<Readiness> {
        self.log(format!("wait_ready {}", server.name));
        let url = format!(
            "http://{}:{}{}",
            server.ip.clone().unwrap_or_default(),
            check.port,
            check.path
        );
        match self.script.cold_start_ms {
            Some(ms) => Ok(Readiness {
                url,
                first_200_unix_ms: 1_767_225_600_000 + ms as u64,
                attempts: 3,
                cold_start_ms: Some(ms),
                cold_start_is_upper_bound: false,
            }),
            None => Err(DockerError::NotReady {
                container: server.name.clone(),
                url,
                timeout_s: check.timeout.as_secs(),
                probe: "fake: never ready".into(),
                tail: String::new(),
            }
            .into()),
        }
    }

    async fn run_to_exit(
        &self,
        spec: &ContainerSpec,
        _timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<Output> {
        self.log(format!("run {} {}", spec.role.as_str(), spec.name));
        if let Some(sink) = stderr_lines {
            for line in self.script.loader_stderr.lines() {
                let _ = sink.send(line.to_string());
            }
            // Like a real container, exit after the lines were printed:
            // whoever reads them gets to run first.
            tokio::task::yield_now().await;
        }
        let state = ExitState {
            exit_code: Some(self.script.loader_exit),
            ..Default::default()
        };
        if state.crashed() {
            return Err(DockerError::ContainerFailed {
                container: spec.name.clone(),
                role: spec.role.as_str().into(),
                why: state.describe(),
                tail: self.script.loader_stdout.clone(),
            }
            .into());
        }
        Ok(Output {
            exit_code: self.script.loader_exit,
            stdout: self.script.loader_stdout.clone(),
            stderr: self.script.loader_stderr.clone(),
            state,
        })
    }

    async fn start_sampler(&self, h: &Handle, every: Duration) -> anyhow::Result<Sampler> {
        self.log(format!("sample {}", h.name));
        Ok(Sampler::start(
            SamplerSource::Scripted(self.script.samples.clone()),
            every,
        ))
    }

    async fn exit_state(&self, h: &Handle) -> anyhow::Result<ExitState> {
        let running = self.state.lock().unwrap().containers.contains_key(&h.id);
        Ok(if self.script.server_oom {
            ExitState {
                running: false,
                exit_code: Some(137),
                oom_killed: true,
                ..Default::default()
            }
        } else {
            ExitState {
                running,
                exit_code: (!running).then_some(0),
                ..Default::default()
            }
        })
    }

    async fn logs_tail(&self, h: &Handle, _lines: usize) -> anyhow::Result<String> {
        Ok(format!("fake log of {}\n", h.name))
    }

    async fn remove(&self, h: &Handle) -> anyhow::Result<()> {
        self.log(format!("remove {}", h.name));
        self.state.lock().unwrap().containers.remove(&h.id);
        Ok(())
    }

    async fn cleanup(&self, run: &RunId) -> anyhow::Result<CleanupReport> {
        self.log(format!("cleanup {run}"));
        let mut st = self.state.lock().unwrap();
        let mut report = CleanupReport::default();
        let ids: Vec<String> = st
            .containers
            .iter()
            .filter(|(_, s)| &s.run == run)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(s) = st.containers.remove(&id) {
                report.containers.push(s.name);
            }
        }
        let nets: Vec<String> = st
            .networks
            .iter()
            .filter(|(_, r)| *r == run)
            .map(|(n, _)| n.clone())
            .collect();
        for n in nets {
            st.networks.remove(&n);
            report.networks.push(n);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A miniature pipeline written only against the trait, as the run
    /// pipeline will be.
    async fn mini_run<E: Engine>(engine: &E, run: &RunId) -> anyhow::Result<(Readiness, String)> {
        let net = engine.create_network(run).await?;
        let cpus = engine.host_cpus().await?;
        let (server_set, loader_set) = super::super::container::allocate_cpusets(&cpus, 1, 1)?;
        let mut server = ContainerSpec::new(run, Role::Server, "srv", "fw");
        server.network = Some(net.name.clone());
        server.limits.cpuset = Some(server_set);
        let h = engine.start_container(&server).await?;
        let ready = engine
            .wait_ready(
                &h,
                &ReadyCheck {
                    port: 8080,
                    path: "/".into(),
                    timeout: Duration::from_secs(1),
                },
            )
            .await?;
        let sampler = engine.start_sampler(&h, Duration::from_millis(5)).await?;
        let mut loader = ContainerSpec::new(run, Role::Loader, "load", "fairground");
        loader.network = Some(net.name);
        loader.limits.cpuset = Some(loader_set);
        let out = engine
            .run_to_exit(&loader, Duration::from_secs(5), None)
            .await?;
        let _series = sampler.stop().await;
        Ok((ready, out.stdout))
    }

    #[tokio::test]
    async fn fake_engine_runs_a_pipeline_and_cleanup_leaves_nothing() {
        let fake = FakeEngine::new(FakeScript {
            loader_stdout: "{\"ok\":true}".into(),
            ..Default::default()
        });
        let run = RunId("fg-fake".into());
        let (ready, stdout) = mini_run(&fake, &run).await.unwrap();
        assert_eq!(ready.cold_start_ms, Some(50));
        assert_eq!(stdout, "{\"ok\":true}");
        assert!(!fake.leftovers().is_empty());
        let report = fake.cleanup(&run).await.unwrap();
        assert_eq!(report.containers, vec!["srv"]);
        assert!(fake.leftovers().is_empty());
        assert_eq!(fake.calls().last().unwrap(), "cleanup fg-fake");
    }

    #[tokio::test]
    async fn fake_engine_reports_failing_loader_and_unready_server_as_errors() {
        let fake = FakeEngine::new(FakeScript {
            loader_exit: 3,
            ..Default::default()
        });
        let err = mini_run(&fake, &RunId("fg-a".into())).await.unwrap_err();
        assert!(format!("{err:#}").contains("exited with code 3"), "{err:#}");
        let fake = FakeEngine::new(FakeScript {
            cold_start_ms: None,
            ..Default::default()
        });
        let err = mini_run(&fake, &RunId("fg-b".into())).await.unwrap_err();
        assert!(format!("{err:#}").contains("did not answer 200"), "{err:#}");
    }

    #[test]
    fn cold_start_is_first_200_minus_started_at() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:01.250Z")
            .unwrap()
            .timestamp_millis() as u64;
        assert_eq!(
            cold_start_ms("2026-01-01T00:00:01.000000000Z", t),
            Some(250)
        );
        assert_eq!(cold_start_ms("0001-garbage", t), None);
    }
}
