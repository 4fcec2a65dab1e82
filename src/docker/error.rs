//! Typed errors of the container engine. Each names the object it is about
//! (daemon address, image, framework, container, log file) and what to do.

use std::path::PathBuf;

/// Errors from the Docker side of fairground.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// No daemon answers at the configured address.
    #[error(
        "cannot reach the Docker daemon at {host}: {reason}\n\
         Start it (e.g. `sudo systemctl start docker`, or `sudo dockerd &`) or point \
         DOCKER_HOST at a running one (unix:///var/run/docker.sock or tcp://HOST:2375)"
    )]
    Unavailable {
        /// The address tried (DOCKER_HOST or the default socket).
        host: String,
        /// What the client said.
        reason: String,
    },
    /// The static fairground binary to put in the image was not found.
    #[error(
        "no statically linked fairground binary to put in the fairground image: {detail}\n\
         Run `make static` (or set FAIRGROUND_STATIC_BIN to a static build)"
    )]
    NoStaticBinary {
        /// What was looked at.
        detail: String,
    },
    /// An image build failed.
    #[error("building image {image} for {what} failed: {reason}\nfull log: {log}\n--- last lines ---\n{tail}")]
    Build {
        /// The image tag being built.
        image: String,
        /// What it was for (`framework axum`, `base nginx`, `fairground`).
        what: String,
        /// The error the builder reported.
        reason: String,
        /// The build log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
    /// A base image description is missing or malformed.
    #[error("base image `{name}` ({path}): {reason}")]
    Base {
        /// The base name.
        name: String,
        /// Its `docker/bases/NAME.yaml`.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `cpuset: auto` could not give server and loader disjoint cores.
    /// No free subnet for a run network.
    #[error("no free /24 subnet left in {range} for run network {network}; remove old networks with `fairground clean`")]
    NoSubnet {
        /// The network being created.
        network: String,
        /// The range searched.
        range: String,
    },
    /// A container did not finish in time.
    #[error("container {container} did not exit within {timeout_s} s; it was killed\n--- last log lines ---\n{tail}")]
    Timeout {
        /// Container name.
        container: String,
        /// The timeout.
        timeout_s: u64,
        /// Its last log lines.
        tail: String,
    },
    /// A container exited with a failure.
    #[error("container {container} ({role}) failed: {why}\n--- last log lines ---\n{tail}")]
    ContainerFailed {
        /// Container name.
        container: String,
        /// server, loader or probe.
        role: String,
        /// Exit code / OOM explanation.
        why: String,
        /// Its last log lines.
        tail: String,
    },
    /// The server never answered 200 on its readiness path.
    #[error("server {container} did not answer 200 on {url} within {timeout_s} s\n--- prober output ---\n{probe}\n--- server log (last lines) ---\n{tail}")]
    NotReady {
        /// Server container name.
        container: String,
        /// The URL probed.
        url: String,
        /// The timeout.
        timeout_s: u64,
        /// What the prober printed.
        probe: String,
        /// The server's last log lines.
        tail: String,
    },
    /// A local file or archive could not be read or written.
    #[error("{doing}: {source}")]
    Io {
        /// What fairground was doing (names the file or object).
        doing: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Any other daemon error, with what fairground was doing.
    #[error("{doing}: {source}")]
    Api {
        /// What fairground was doing (names the object).
        doing: String,
        /// The client error.
        source: bollard::errors::Error,
    },
}

impl crate::exit::ExitCodeOf for DockerError {
    fn exit_code(&self) -> crate::exit::ExitCode {
        use crate::exit::ExitCode::{DockerUnavailable, Failure};
        match self {
            DockerError::Unavailable { .. } => DockerUnavailable,
            DockerError::NoStaticBinary { .. } => Failure,
            DockerError::Build { .. } => Failure,
            DockerError::Base { .. } => Failure,
            DockerError::NoSubnet { .. } => Failure,
            DockerError::Timeout { .. } => Failure,
            DockerError::ContainerFailed { .. } => Failure,
            DockerError::NotReady { .. } => Failure,
            DockerError::Io { .. } => Failure,
            DockerError::Api { .. } => Failure,
        }
    }
}

/// Attach "what we were doing" to a bollard error.
pub(crate) trait ApiContext<T> {
    fn doing(self, doing: impl FnOnce() -> String) -> Result<T, DockerError>;
}

impl<T> ApiContext<T> for Result<T, bollard::errors::Error> {
    fn doing(self, doing: impl FnOnce() -> String) -> Result<T, DockerError> {
        self.map_err(|source| DockerError::Api {
            doing: doing(),
            source,
        })
    }
}

/// Whether a bollard error is "no such object" (HTTP 404).
pub(crate) fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}
