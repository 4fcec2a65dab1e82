//! Other Docker daemons: connecting to a profile's endpoints (unix socket,
//! TCP, TCP with TLS client certificates) and carrying images to them
//! without a registry.
//!
//! Images are built once, on the daemon fairground builds with, then
//! streamed to every other daemon that lacks them: `GET /images/{tag}/get`
//! on the source piped chunk by chunk into `POST /images/load` on the
//! target, no temporary file. `docker save`/`load` keep the image id and
//! tag, so a daemon that already holds the same id is skipped. Must not
//! build images or start containers.

use std::time::{Duration, Instant};

use bollard::query_parameters::ImportImageOptions;
use bollard::Docker;
use futures_util::StreamExt;

use super::daemon::DockerEngine;
use super::error::{ApiContext, DockerError};
use super::images::ImageOptions;
use super::{CONNECT_TIMEOUT, REQUEST_TIMEOUT};
use crate::profile::hosts::{Endpoint, LOCAL};

/// Connect to `endpoint` and negotiate the API version; a daemon that does
/// not answer is one clear [`DockerError::Unavailable`] naming it.
pub async fn connect(endpoint: &Endpoint) -> Result<Docker, DockerError> {
    if endpoint.url == LOCAL {
        return super::connect().await;
    }
    let unavailable = |reason: String| DockerError::Unavailable {
        host: endpoint.to_string(),
        reason,
    };
    let timeout = REQUEST_TIMEOUT.as_secs();
    let docker = match &endpoint.tls {
        Some(tls) => Docker::connect_with_ssl(
            &endpoint.url,
            &tls.key,
            &tls.cert,
            &tls.ca,
            timeout,
            bollard::API_DEFAULT_VERSION,
        ),
        None => Docker::connect_with_host(&endpoint.url).map(|d| d.with_timeout(REQUEST_TIMEOUT)),
    }
    .map_err(|e| unavailable(e.to_string()))?;
    let docker = tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version())
        .await
        .map_err(|_| unavailable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| unavailable(format!("{e:#}")))?;
    tokio::time::timeout(CONNECT_TIMEOUT, docker.ping())
        .await
        .map_err(|_| unavailable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| unavailable(format!("{e:#}")))?;
    Ok(docker)
}

/// The daemon's identity: its id (`docker info` ID) and data root. Two
/// endpoints naming the same daemon (a socket and its TCP port) share it,
/// so images are not carried to where they already are. The data root is
/// part of it because daemons of one machine may share the id (Docker
/// 20.10 derives it from /etc/docker/key.json, whatever the data root).
pub async fn daemon_id(docker: &Docker) -> Result<String, DockerError> {
    let info = docker.info().await.doing(|| "reading daemon info".into())?;
    Ok(format!(
        "{}@{}",
        info.id.unwrap_or_default(),
        info.docker_root_dir.unwrap_or_default()
    ))
}

/// One image carried (or found already there).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Carried {
    /// The image tag.
    pub tag: String,
    /// Its id (identical on both daemons afterwards).
    pub id: String,
    /// Bytes streamed (the `docker save` tarball); 0 when skipped.
    pub bytes: u64,
    /// Wall time of the transfer, seconds; 0 when skipped.
    pub seconds: f64,
    /// The target already had this id.
    pub skipped: bool,
}

/// The id `docker` holds under `tag`, if any.
async fn image_id(docker: &Docker, tag: &str) -> Option<String> {
    docker.inspect_image(tag).await.ok().and_then(|i| i.id)
}

/// How often progress is reported during a transfer.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Make `to` hold image `tag` exactly as `from` does: skipped when it has
/// the same id already, else streamed from `from` into `to`. `progress`
/// hears a line every few seconds and at the end.
pub async fn carry_image(
    from: &Docker,
    to: &Docker,
    tag: &str,
    target: &str,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> anyhow::Result<Carried> {
    let id = image_id(from, tag)
        .await
        .ok_or_else(|| anyhow::anyhow!("image {tag} is not on the building daemon"))?;
    if image_id(to, tag).await.as_deref() == Some(id.as_str()) {
        return Ok(Carried {
            tag: tag.into(),
            id,
            bytes: 0,
            seconds: 0.0,
            skipped: true,
        });
    }
    let started = Instant::now();
    let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = counted.clone();
    let source = from.export_image(tag).map(move |chunk| {
        if let Ok(b) = &chunk {
            c.fetch_add(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
        chunk
    });
    let mut load = to.import_image_stream(
        ImportImageOptions {
            quiet: true,
            ..Default::default()
        },
        source,
        None,
    );
    let mut last = Instant::now();
    let mut failure = None;
    loop {
        let next = tokio::time::timeout(PROGRESS_EVERY, load.next()).await;
        if last.elapsed() >= PROGRESS_EVERY {
            last = Instant::now();
            progress(&format!(
                "carrying {tag} to {target}: {} so far",
                crate::units::bytes(counted.load(std::sync::atomic::Ordering::Relaxed) as f64)
            ));
        }
        match next {
            Err(_) => continue,
            Ok(None) => break,
            Ok(Some(Ok(info))) => {
                if let Some(e) = info.error_detail.and_then(|d| d.message) {
                    failure = Some(e);
                }
            }
            Ok(Some(Err(e))) => {
                failure = Some(format!("{e:#}"));
                break;
            }
        }
    }
    if let Some(why) = failure {
        anyhow::bail!("carrying image {tag} to {target} failed: {why}");
    }
    let there = image_id(to, tag).await;
    if there.as_deref() != Some(id.as_str()) {
        anyhow::bail!(
            "carrying image {tag} to {target}: the daemon reports id {} after the load, not {id}",
            there.unwrap_or_else(|| "none".into())
        );
    }
    let bytes = counted.load(std::sync::atomic::Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    progress(&format!(
        "carried {tag} to {target}: {} in {seconds:.1} s",
        crate::units::bytes(bytes as f64)
    ));
    Ok(Carried {
        tag: tag.into(),
        id,
        bytes,
        seconds,
        skipped: false,
    })
}

/// A [`DockerEngine`] on one of a profile's endpoints.
impl DockerEngine {
    /// Connect to a profile's endpoint (`hosts:`). A unix socket is this
    /// machine's daemon (cgroups read directly); TCP is remote (stats API).
    pub async fn for_endpoint(
        endpoint: &crate::profile::hosts::Endpoint,
        opts: ImageOptions,
    ) -> anyhow::Result<Self> {
        let docker = connect(endpoint).await?;
        let mut engine = Self::with_docker(docker, opts);
        engine.local = endpoint.is_local_socket();
        engine.endpoint = endpoint.to_string();
        Ok(engine)
    }

    /// The endpoint this engine talks to, for messages.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Whether cgroups are read directly (else through the stats API).
    pub fn is_local(&self) -> bool {
        self.local
    }

    /// fairground's image on this daemon, once known.
    pub fn fairground_image(&self) -> Option<String> {
        self.fairground_image.lock().unwrap().clone()
    }

    /// Use image `tag` as fairground's own (carried here, not built here).
    pub fn use_fairground_image(&self, tag: &str) {
        *self.fairground_image.lock().unwrap() = Some(tag.to_string());
    }
}
