//! [`DockerEngine`]: the [`Engine`] on a real Docker daemon, through bollard.
//! Containers are created with the specs' limits and labels, followed to
//! their exit with a bounded wait, and removed; images are built or reused
//! through `images` and `bases`; cgroups are read directly when the daemon
//! is local, through the stats API otherwise.
//!
//! Must not decide what to measure or judge results.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use bollard::query_parameters::{
    CreateContainerOptions, KillContainerOptions, LogsOptions, StartContainerOptions,
};
use bollard::Docker;
use futures_util::StreamExt;

use super::cleanup::{self, CleanupReport};
use super::container::{AppliedLimits, ContainerSpec, ExitState};
use super::engine::{
    BuiltImages, ContainerOutput, Engine, FrameworkImage, Handle, LineSink, Readiness, ReadyCheck,
    ReadyStart,
};
use anyhow::Context;

use super::error::{ApiContext, DockerError};
use super::images::{self, ImageInfo, ImageOptions};
use super::network::{self, NetworkInfo};
use super::{bases, RunId};
use crate::framework::Framework;
use crate::probe::{CgroupFs, CgroupReading, PeakWatch, Sampler, SamplerSource};

/// How long the log follower may lag behind a container's exit before the
/// rest of its lines are given up (they are still in the collected output).
const FOLLOW_DRAIN: Duration = Duration::from_secs(2);

/// Set (to anything) to keep superseded images and build stages: for
/// several checkouts of fairground sharing one daemon, each with images of
/// its own inputs and builds that may overlap.
pub const KEEP_SUPERSEDED_ENV: &str = "FAIRGROUND_KEEP_SUPERSEDED";

/// [`Engine`] on a real Docker daemon.
pub struct DockerEngine {
    docker: Docker,
    opts: ImageOptions,
    cgroup: CgroupFs,
    pub(super) fairground_image: Mutex<Option<String>>,
    /// The daemon runs on this machine, so its containers' cgroup files
    /// can be read here; otherwise the stats API stands in.
    pub(super) local: bool,
    /// The endpoint, for messages (`local`, `tcp://…`).
    pub(super) endpoint: String,
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
        let docker = super::connect().await?;
        Ok(Self::with_docker(docker, opts))
    }

    /// Wrap an existing connection.
    pub fn with_docker(docker: Docker, opts: ImageOptions) -> Self {
        Self {
            docker,
            opts,
            cgroup: CgroupFs::default(),
            fairground_image: Mutex::new(None),
            local: crate::host::docker::daemon_is_local(),
            endpoint: crate::host::docker::docker_host(),
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

    pub(super) async fn fairground_tag(&self) -> anyhow::Result<String> {
        if let Some(t) = self.fairground_image.lock().unwrap().clone() {
            return Ok(t);
        }
        Ok(self.ensure_fairground().await?.tag)
    }

    pub(super) async fn inspect(
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

    pub(super) async fn create_and_start(&self, spec: &ContainerSpec) -> anyhow::Result<String> {
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
        if let Err(e) = self.seed_files(&created.id, spec).await {
            let _ = self.force_remove(&created.id).await;
            return Err(e);
        }
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

    /// Put `spec`'s files into the created container `id` (its volumes)
    /// before it starts.
    async fn seed_files(&self, id: &str, spec: &ContainerSpec) -> anyhow::Result<()> {
        for dir in spec.file_dirs() {
            let tar = spec
                .files_archive(dir)
                .with_context(|| format!("packing the files for {}:{dir}", spec.name))?;
            self.docker
                .upload_to_container(
                    id,
                    Some(bollard::query_parameters::UploadToContainerOptions {
                        path: dir.to_string(),
                        ..Default::default()
                    }),
                    bollard::body_full(tar.into()),
                )
                .await
                .doing(|| format!("copying files into {}:{dir}", spec.name))?;
        }
        Ok(())
    }

    pub(super) async fn force_remove(&self, id: &str) -> Result<(), DockerError> {
        cleanup::force_remove(&self.docker, id)
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

    pub(super) async fn tail(&self, id: &str, lines: usize) -> Result<String, DockerError> {
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
        self.follow(id, false, sink)
    }

    /// Follow a container's stdout (`stdout`) or stderr and send it on line
    /// by line until the container stops or `sink` is dropped.
    pub(super) fn follow(
        &self,
        id: &str,
        stdout: bool,
        sink: LineSink,
    ) -> tokio::task::JoinHandle<()> {
        let docker = self.docker.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            let opts = LogsOptions {
                follow: true,
                stdout,
                stderr: !stdout,
                tail: "all".into(),
                ..Default::default()
            };
            let mut stream = docker.logs(&id, Some(opts));
            let mut pending: Vec<u8> = Vec::new();
            while let Some(Ok(item)) = stream.next().await {
                let message = match item {
                    bollard::container::LogOutput::StdErr { message } if !stdout => message,
                    bollard::container::LogOutput::StdOut { message } if stdout => message,
                    _ => continue,
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
    pub(crate) async fn run_collect(
        &self,
        spec: &ContainerSpec,
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<ContainerOutput> {
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
        Ok(ContainerOutput {
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

/// What a base error is about: `framework NAME: base `BASE``.
fn base_of(fw: &Framework) -> String {
    format!("framework {}: base `{}`", fw.name(), fw.manifest.base)
}

impl DockerEngine {
    /// The images a run on this daemon needs before its first server:
    /// fairground's own and the database's (when `database`), built or
    /// reused now; and the tags each framework's image will have, planned
    /// from its inputs but not built: the run builds each one just before
    /// its framework's first server ([`Engine::ensure_framework_image`]),
    /// so the first round does not wait for every image of the roster.
    /// Older builds of all of these are pruned here.
    pub async fn ensure_run_images(
        &self,
        frameworks: &[Framework],
        database: bool,
    ) -> anyhow::Result<(BuiltImages, crate::plan::spec::ImageTags)> {
        let fairground = self.ensure_fairground().await?;
        let database = self.ensure_database(database).await?;
        let mut bases_planned = Vec::new();
        let mut planned = BTreeMap::new();
        for fw in frameworks {
            let base_tag = if fw.manifest.base == "scratch" {
                "scratch".to_string()
            } else {
                let tag = bases::plan(&fw.manifest.base, &self.opts)
                    .map_err(|e| anyhow::Error::from(e).context(base_of(fw)))?
                    .tag;
                bases_planned.push(tag.clone());
                tag
            };
            planned.insert(
                fw.name().to_string(),
                images::framework_tag(fw, &base_tag, &self.opts)?,
            );
        }
        let current: Vec<&str> = std::iter::once(fairground.tag.as_str())
            .chain(database.iter().map(|d| d.tag.as_str()))
            .chain(bases_planned.iter().map(String::as_str))
            .chain(planned.values().map(String::as_str))
            .collect();
        self.prune_images(&current).await?;
        let built = BuiltImages {
            fairground,
            bases: Vec::new(),
            frameworks: BTreeMap::new(),
            database,
        };
        let mut tags = built.tags();
        tags.frameworks = planned;
        Ok((built, tags))
    }

    /// Remove the untagged build stages multi-stage builds leave (nothing
    /// refers to them); how many.
    pub async fn prune_build_stages(&self) -> anyhow::Result<usize> {
        images::prune_build_stages(&self.docker).await
    }

    /// Build or reuse `fw`'s base and then its image (nothing pruned).
    async fn build_framework(&self, fw: &Framework) -> anyhow::Result<FrameworkImage> {
        let (base_tag, base) = bases::resolve(&self.docker, &fw.manifest.base, &self.opts)
            .await
            .map_err(|e| e.context(base_of(fw)))?;
        let image = images::ensure_framework(&self.docker, fw, &base_tag, &self.opts).await?;
        Ok(FrameworkImage { image, base })
    }

    /// The database image (base `postgres`) when `wanted`.
    async fn ensure_database(&self, wanted: bool) -> anyhow::Result<Option<ImageInfo>> {
        if !wanted {
            return Ok(None);
        }
        Ok(Some(
            bases::ensure(&self.docker, bases::DATABASE_BASE, &self.opts)
                .await
                .context("the database image (base `postgres`)")?,
        ))
    }

    /// Remove build stages and older builds of the images this run uses
    /// (`current`), unless [`KEEP_SUPERSEDED_ENV`] is set: several
    /// checkouts of fairground sharing one daemon would remove each
    /// other's images (and the build stages of a build under way).
    async fn prune_images(&self, current: &[&str]) -> anyhow::Result<()> {
        if std::env::var_os(KEEP_SUPERSEDED_ENV).is_some() {
            return Ok(());
        }
        // Multi-stage builds leave their build stages as untagged images:
        // nothing refers to them, so they would only pile up.
        self.prune_build_stages().await?;
        // Older builds of the same images (inputs since changed) are never
        // used again: remove them rather than let every edit leave one.
        let pruned = images::prune_superseded(&self.docker, &self.opts.run, current).await?;
        for tag in &pruned.removed {
            (self.opts.progress)(&format!("removed superseded image {tag}"));
        }
        if !pruned.held_by.is_empty() {
            (self.opts.progress)(&format!(
                "superseded images kept: fairground containers exist ({}); \
                 they go with their run, or with `fairground clean`",
                pruned.held_by.join(", ")
            ));
        }
        Ok(())
    }
}

impl Engine for DockerEngine {
    async fn ensure_images(
        &self,
        frameworks: &[Framework],
        database: bool,
    ) -> anyhow::Result<BuiltImages> {
        let fairground = self.ensure_fairground().await?;
        let mut base_infos: BTreeMap<String, ImageInfo> = BTreeMap::new();
        let mut fw_infos = BTreeMap::new();
        for fw in frameworks {
            let FrameworkImage { image, base } = self.build_framework(fw).await?;
            if let Some(b) = base {
                base_infos.insert(b.name.clone(), b);
            }
            fw_infos.insert(fw.name().to_string(), image);
        }
        let database = self.ensure_database(database).await?;
        let current: Vec<&str> = std::iter::once(fairground.tag.as_str())
            .chain(base_infos.values().map(|b| b.tag.as_str()))
            .chain(fw_infos.values().map(|f| f.tag.as_str()))
            .chain(database.iter().map(|d| d.tag.as_str()))
            .collect();
        self.prune_images(&current).await?;
        Ok(BuiltImages {
            fairground,
            bases: base_infos.into_values().collect(),
            frameworks: fw_infos,
            database,
        })
    }

    async fn ensure_framework_image(&self, fw: &Framework) -> anyhow::Result<FrameworkImage> {
        let built = self.build_framework(fw).await?;
        if std::env::var_os(KEEP_SUPERSEDED_ENV).is_none() {
            self.prune_build_stages().await?;
        }
        Ok(built)
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
            published_port: spec.publish.and_then(|port| {
                if on_host {
                    return Some(port);
                }
                host_port(inspect.network_settings.as_ref(), port)
            }),
            companion: None,
        })
    }

    async fn inspect_limits(&self, h: &Handle) -> anyhow::Result<AppliedLimits> {
        let mut limits = AppliedLimits::from_inspect(&self.inspect(&h.id).await?);
        if let Some(owner) = &h.companion {
            // A server in its prober's network namespace has that
            // namespace's sysctls, set on the prober's container.
            if limits.sysctls.is_empty() {
                limits.sysctls = AppliedLimits::from_inspect(&self.inspect(owner).await?).sysctls;
            }
        }
        Ok(limits)
    }

    async fn start_ready(
        &self,
        spec: &ContainerSpec,
        check: &ReadyCheck,
    ) -> anyhow::Result<ReadyStart> {
        self.start_prestarted(spec, check).await
    }

    async fn wait_ready(&self, server: &Handle, check: &ReadyCheck) -> anyhow::Result<Readiness> {
        self.wait_ready_late(server, check).await
    }

    async fn run_to_exit(
        &self,
        spec: &ContainerSpec,
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<ContainerOutput> {
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

    async fn exec_to_exit(
        &self,
        h: &Handle,
        cmd: &[String],
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> anyhow::Result<ContainerOutput> {
        let out = self.exec_collect(h, cmd, timeout, stderr_lines).await?;
        if out.state.crashed() {
            return Err(DockerError::ContainerFailed {
                container: h.name.clone(),
                role: h.role.as_str().into(),
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
        let local = self
            .cgroup_here(h)
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

    async fn peak_watch(&self, h: &Handle) -> anyhow::Result<Option<PeakWatch>> {
        if !self.cgroup_here(h) {
            return Ok(None);
        }
        Ok(h.pid
            .and_then(|pid| self.cgroup.for_pid(pid).ok())
            .and_then(|paths| paths.peak_watch().ok()))
    }

    async fn exit_state(&self, h: &Handle) -> anyhow::Result<ExitState> {
        let mut state = ExitState::from_inspect(&self.inspect(&h.id).await?);
        // While it runs, the cgroup also tells about OOM kills of processes
        // other than the main one (memory.events / memory.oom_control).
        if state.running && self.cgroup_here(h) {
            state.cgroup_oom_kills = self.read_cgroup(h).ok().and_then(|r| r.oom_kills);
        }
        Ok(state)
    }

    async fn logs_tail(&self, h: &Handle, lines: usize) -> anyhow::Result<String> {
        Ok(self.tail(&h.id, lines).await?)
    }

    async fn remove(&self, h: &Handle) -> anyhow::Result<()> {
        // The server and its prober go together (the daemon's work for each
        // overlaps).
        let companion = async {
            match &h.companion {
                Some(c) => self.force_remove(c).await,
                None => Ok(()),
            }
        };
        let (removed, companion) =
            futures_util::future::join(self.force_remove(&h.id), companion).await;
        removed?;
        Ok(companion?)
    }

    async fn cleanup(&self, run: &RunId) -> anyhow::Result<CleanupReport> {
        Ok(cleanup::clean(&self.docker, Some(run), false).await?)
    }
}

impl DockerEngine {
    /// Whether `h`'s cgroup files can be read on this machine: the daemon
    /// is reached through a local socket, and the PID it reported is, here,
    /// a process whose cgroup names the container (a socket forwarded from
    /// another machine over SSH is a unix socket too, and its PIDs are that
    /// machine's).
    fn cgroup_here(&self, h: &Handle) -> bool {
        self.local
            && h.pid.is_some_and(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .is_ok_and(|text| text.contains(&h.id))
            })
    }

    /// Read a container's cgroup once (local daemons only).
    pub fn read_cgroup(&self, h: &Handle) -> anyhow::Result<CgroupReading> {
        let pid = h
            .pid
            .ok_or_else(|| anyhow::anyhow!("container {} has no PID (not running?)", h.name))?;
        Ok(self.cgroup.for_pid(pid)?.read()?)
    }
}

/// The host port the daemon bound for a container's `port`/tcp, as its
/// inspection reports it (a published port the daemon picked).
pub(super) fn host_port(
    settings: Option<&bollard::models::NetworkSettings>,
    port: u16,
) -> Option<u16> {
    settings?
        .ports
        .as_ref()?
        .get(&format!("{port}/tcp"))?
        .as_ref()?
        .iter()
        .find_map(|b| b.host_port.as_deref()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

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
