//! The container engine: everything fairground asks of Docker.
//!
//! Owns connecting to the daemon, building images without a registry
//! (`images`, `bases`), the per-run internal network (`network`), typed
//! container specs and the limits really applied (`container`), readiness and
//! cold start (`ready`), and removing what a run created (`cleanup`). The run
//! pipeline talks to it only through the [`engine::Engine`] trait, so it can be
//! tested with the in-memory fake (`fake`, test builds only). It must not decide what to measure or
//! judge results: it runs containers and reports facts.
//!
//! Every object created carries the label [`LABEL_RUN`]`=<run id>`.

pub mod bases;
pub mod cleanup;
pub mod container;
pub mod daemon;
pub mod database;
pub mod engine;
pub mod error;
pub mod exec;
#[cfg(test)]
pub mod fake;
pub mod images;
pub mod network;
pub mod prestart;
pub mod remote;

use std::fmt;
use std::time::Duration;

use bollard::Docker;

pub use error::DockerError;

/// Label carrying the run id on every object fairground creates.
pub const LABEL_RUN: &str = "fairground.run";
/// Label carrying the role of a container: server, loader or probe.
pub const LABEL_ROLE: &str = "fairground.role";
/// Label on images: `fairground`, `base` or `framework`.
pub const LABEL_KIND: &str = "fairground.kind";
/// The `fairground.kind` label of cargo cache volumes (the Rust sandbox
/// makes them, cleanup removes them with the run).
pub const KIND_CARGO_CACHE: &str = "cargo-cache";
/// Label on images: the hash of every input the image was built from.
pub const LABEL_INPUTS: &str = "fairground.inputs";
/// Label on images: the framework or base name.
pub const LABEL_NAME: &str = "fairground.name";

/// How long to wait for the daemon to answer the first request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Per-request ceiling of the client. bollard's default (2 min) cuts long
/// requests that are legitimately open for minutes: an import streaming a
/// mmdebstrap bootstrap, a framework build, waiting for a loader. Each of
/// those is bounded by fairground itself where it matters (loader and probe
/// timeouts); this is only the backstop.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2 * 3600);

/// The id of one fairground run; every object it creates is labelled with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RunId(pub String);

impl RunId {
    /// A fresh id: `fg-YYYYmmdd-HHMMSS-xxxx` (UTC; random suffix so two runs
    /// started in the same second never share objects).
    pub fn new() -> Self {
        let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
        let suffix: u16 = rand::random();
        RunId(format!("fg-{now}-{suffix:04x}"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A prefix for object names of this run (Docker names allow `[a-zA-Z0-9_.-]`).
    pub fn name_prefix(&self) -> String {
        self.0
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

use crate::host::docker::docker_host;

/// Connect to the daemon named by `DOCKER_HOST` (unix:// or tcp://; default
/// the local socket) and negotiate the API version down to what it speaks
/// (20.10 speaks 1.41). A missing or silent daemon is one clear
/// [`DockerError::Unavailable`].
pub async fn connect() -> Result<Docker, DockerError> {
    let host = docker_host();
    let unavailable = |reason: String| DockerError::Unavailable {
        host: host.clone(),
        reason,
    };
    let docker = Docker::connect_with_host(&host)
        .map_err(|e| unavailable(e.to_string()))?
        .with_timeout(REQUEST_TIMEOUT);
    let docker = tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version())
        .await
        .map_err(|_| unavailable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| unavailable(e.to_string()))?;
    tokio::time::timeout(CONNECT_TIMEOUT, docker.ping())
        .await
        .map_err(|_| unavailable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| unavailable(e.to_string()))?;
    Ok(docker)
}

/// A small current-thread-free runtime for the synchronous CLI entry points.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_unique_and_name_safe() {
        let a = RunId::new();
        let b = RunId::new();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("fg-"));
        assert_eq!(a.name_prefix(), a.0);
        assert_eq!(RunId("a/b c".into()).name_prefix(), "a-b-c");
    }
}
