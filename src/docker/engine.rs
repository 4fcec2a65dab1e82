//! The [`Engine`] trait: the few container operations the run pipeline
//! needs, with the real implementation ([`DockerEngine`], bollard); the
//! in-memory one (`docker::fake`, test builds only) lets the pipeline be
//! tested without a daemon (hyperfine's Executor/MockExecutor idea).
//!
//! A typical run:
//! ```text
//! engine.ensure_images(&frameworks, db)    -> BuiltImages (fairground, bases, frameworks)
//! engine.create_network(&run)              -> NetworkInfo (internal, own subnet)
//! engine.start_ready(&server_spec, &check) -> ReadyStart (Handle, first 200, cold start)
//! engine.inspect_limits(&server)           -> AppliedLimits (what Docker really applied)
//! engine.start_sampler(&server, 1 s)       -> Sampler ... .stop() -> Series
//! engine.run_to_exit(&loader_spec, limit)  -> ContainerOutput (stdout = the loader's JSON)
//! engine.exit_state(&server)               -> ExitState (crash / OOM?)
//! engine.logs_tail(&server, 100)
//! engine.cleanup(&run)                     -> CleanupReport
//! ```
//! Must not decide what to measure or judge results.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use super::cleanup::CleanupReport;
use super::container::{AppliedLimits, ContainerSpec, ExitState, Role};
use super::images::ImageInfo;
use super::network::NetworkInfo;
use super::RunId;
use crate::framework::Framework;
use crate::probe::{PeakWatch, Sampler};

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
    /// The host port its published port is reachable at (from other
    /// hosts: the daemon host's address and this port).
    #[serde(default)]
    pub published_port: Option<u16>,
    /// A container that lives and dies with this one: the readiness prober
    /// that owns the server's network namespace ([`Engine::start_ready`]).
    /// Removed with it.
    #[serde(default)]
    pub companion: Option<String>,
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
    /// ready before the prober could ask, so `cold_start_ms` is only an
    /// upper bound. Only [`Engine::wait_ready`] (a prober started after the
    /// server, ~0.5 s on a busy host) leaves this possible; a prober of
    /// [`Engine::start_ready`] polls before the server's process exists.
    /// Show it as `≤ N ms`.
    pub cold_start_is_upper_bound: bool,
}

/// A server started by [`Engine::start_ready`], ready.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadyStart {
    /// The server.
    pub handle: Handle,
    /// Its first 200 and cold start.
    pub readiness: Readiness,
    /// Creating and starting containers (the prober's, then the server's).
    pub start: Duration,
    /// From the server's container start to its first 200 being known here.
    pub readiness_wait: Duration,
}

/// How a run-to-exit container ended and what it printed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ContainerOutput {
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
    /// The database image (base `postgres`), built when a framework
    /// declares a database scenario.
    pub database: Option<ImageInfo>,
}

impl BuiltImages {
    /// The tags the run's containers are made from.
    pub fn tags(&self) -> crate::plan::spec::ImageTags {
        crate::plan::spec::ImageTags {
            fairground: self.fairground.tag.clone(),
            frameworks: self
                .frameworks
                .iter()
                .map(|(name, image)| (name.clone(), image.tag.clone()))
                .collect(),
            database: self.database.as_ref().map(|d| d.tag.clone()),
        }
    }
}

/// A framework's image as [`Engine::ensure_framework_image`] built or
/// reused it, with the base it was built from (`None`: `scratch`).
#[derive(Debug, Clone, PartialEq)]
pub struct FrameworkImage {
    /// The framework's image.
    pub image: ImageInfo,
    /// Its base image.
    pub base: Option<ImageInfo>,
}

/// The container operations the run pipeline needs. See the module docs
/// for the order of calls in a run.
pub trait Engine: Send + Sync {
    /// Build or reuse the fairground image, the bases the frameworks need
    /// and the framework images; the database image too when `database`
    /// (a run builds it only when its plan measures a database scenario).
    fn ensure_images(
        &self,
        frameworks: &[Framework],
        database: bool,
    ) -> impl Future<Output = anyhow::Result<BuiltImages>> + Send;
    /// Build or reuse the image of one framework (and its base), under the
    /// tag its inputs give it: a run builds each just before its
    /// framework's first server.
    fn ensure_framework_image(
        &self,
        fw: &Framework,
    ) -> impl Future<Output = anyhow::Result<FrameworkImage>> + Send;
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
    /// Start a server and wait until it answers 200 on the readiness path,
    /// with the cold start measured as finely as the engine can: the real
    /// engine starts its prober first, polling from inside the network
    /// namespace the server then joins, so the first 200 is seen within a
    /// millisecond of the server answering and is never an upper bound. On
    /// failure nothing it started is left. By default: [`Self::start_container`]
    /// then [`Self::wait_ready`].
    fn start_ready(
        &self,
        spec: &ContainerSpec,
        check: &ReadyCheck,
    ) -> impl Future<Output = anyhow::Result<ReadyStart>> + Send {
        async move {
            let asked = std::time::Instant::now();
            let handle = self.start_container(spec).await?;
            let started = std::time::Instant::now();
            match self.wait_ready(&handle, check).await {
                Ok(readiness) => Ok(ReadyStart {
                    handle,
                    readiness,
                    start: started - asked,
                    readiness_wait: started.elapsed(),
                }),
                Err(e) => {
                    let _ = self.remove(&handle).await;
                    Err(e)
                }
            }
        }
    }
    /// Run a container to its exit (bounded by `timeout`), remove it, and
    /// return its output. A non-zero exit is an error showing its output.
    /// With `stderr_lines`, each stderr line is also sent there as the
    /// container prints it (the loader's live progress).
    fn run_to_exit(
        &self,
        spec: &ContainerSpec,
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> impl Future<Output = anyhow::Result<ContainerOutput>> + Send;
    /// Run `cmd` (the image's binary and its arguments) inside running
    /// container `h` to its exit, bounded by `timeout` (then the container
    /// is killed: an exec cannot be), and return its output; stderr lines go
    /// to `stderr_lines` as with [`Self::run_to_exit`]. A non-zero exit is an
    /// error showing its output.
    fn exec_to_exit(
        &self,
        h: &Handle,
        cmd: &[String],
        timeout: Duration,
        stderr_lines: Option<LineSink>,
    ) -> impl Future<Output = anyhow::Result<ContainerOutput>> + Send;
    /// Start sampling memory and CPU of a container every `every`.
    fn start_sampler(
        &self,
        h: &Handle,
        every: Duration,
    ) -> impl Future<Output = anyhow::Result<Sampler>> + Send;
    /// A watch on a container's memory high-water mark, to reset as a
    /// window opens and read as it closes; `None` where its cgroup cannot be
    /// written (a remote daemon, no privilege): the window's peak is then
    /// its largest sample.
    fn peak_watch(
        &self,
        h: &Handle,
    ) -> impl Future<Output = anyhow::Result<Option<PeakWatch>>> + Send;
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

/// Where a running container's stderr lines go, one `String` per line
/// without its newline.
pub type LineSink = tokio::sync::mpsc::UnboundedSender<String>;

pub use super::daemon::{cold_start_ms, DockerEngine, KEEP_SUPERSEDED_ENV};
