//! Removing what a run created: containers and networks carrying its
//! `fairground.run` label, at the end of the run, on Ctrl-C, on SIGTERM, on
//! error, and (last resort) when the [`RunGuard`] is dropped.
//!
//! Only ever removes objects by label, and only a given run's unless the
//! caller explicitly asks for every fairground run (`fairground clean`).
//! Images and the cargo cache volumes of Rust framework builds are the build
//! cache: removed only when asked (`--images`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bollard::query_parameters::{
    ListContainersOptions, ListImagesOptions, ListNetworksOptions, ListVolumesOptions,
    RemoveContainerOptions, RemoveImageOptions, RemoveVolumeOptions,
};
use bollard::Docker;

use super::error::{is_not_found, ApiContext, DockerError};
use super::{RunId, KIND_CARGO_CACHE, LABEL_KIND, LABEL_RUN};

/// Remove container `id` and its anonymous volumes, running or not. The one
/// place fairground removes a container (run cleanup, the engine, image builds).
pub(crate) async fn force_remove(docker: &Docker, id: &str) -> Result<(), bollard::errors::Error> {
    let opts = RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    };
    docker.remove_container(id, Some(opts)).await
}

/// What a cleanup removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CleanupReport {
    /// Container names removed.
    pub containers: Vec<String>,
    /// Network names removed.
    pub networks: Vec<String>,
    /// Image tags (or ids) removed.
    pub images: Vec<String>,
    /// Cargo cache volumes removed.
    pub volumes: Vec<String>,
    /// Objects that could not be removed, with why.
    pub failed: Vec<String>,
}

impl CleanupReport {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty()
            && self.networks.is_empty()
            && self.images.is_empty()
            && self.volumes.is_empty()
            && self.failed.is_empty()
    }

    /// One line for humans.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "removed {} container(s), {} network(s), {} image(s), {} cache volume(s)",
            self.containers.len(),
            self.networks.len(),
            self.images.len(),
            self.volumes.len()
        );
        if !self.failed.is_empty() {
            s.push_str(&format!("; could not remove: {}", self.failed.join("; ")));
        }
        s
    }
}

/// The label filter: one run (`fairground.run=ID`) or every run (`fairground.run`).
fn run_filter(run: Option<&RunId>) -> HashMap<String, Vec<String>> {
    let value = match run {
        Some(r) => format!("{LABEL_RUN}={}", r.0),
        None => LABEL_RUN.to_string(),
    };
    HashMap::from([("label".to_string(), vec![value])])
}

/// Remove the containers and networks of `run` (every fairground run when
/// `None`), and with `images` also fairground's images (every one when
/// `run` is `None`, else those that run built).
pub async fn clean(
    docker: &Docker,
    run: Option<&RunId>,
    images: bool,
) -> Result<CleanupReport, DockerError> {
    let mut report = CleanupReport::default();
    let which = run.map_or("every fairground run".to_string(), |r| format!("run {r}"));
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(run_filter(run)),
            ..Default::default()
        }))
        .await
        .doing(|| format!("listing containers of {which}"))?;
    for c in containers {
        let id = c.id.unwrap_or_default();
        let name = c
            .names
            .and_then(|n| n.first().cloned())
            .map(|n| n.trim_start_matches('/').to_string())
            .unwrap_or_else(|| id.clone());
        match force_remove(docker, &id).await {
            Ok(()) => report.containers.push(name),
            Err(e) if is_not_found(&e) => {}
            // Already being removed (auto-remove, a concurrent cleanup).
            Err(e) if e.to_string().contains("already in progress") => {}
            Err(e) => report.failed.push(format!("container {name}: {e}")),
        }
    }
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(run_filter(run)),
        }))
        .await
        .doing(|| format!("listing networks of {which}"))?;
    for n in networks {
        let name = n.name.unwrap_or_default();
        match docker
            .remove_network(n.id.as_deref().unwrap_or(&name))
            .await
        {
            Ok(()) => report.networks.push(name),
            Err(e) if is_not_found(&e) => {}
            Err(e) => report.failed.push(format!("network {name}: {e}")),
        }
    }
    if images {
        let mut filters = run_filter(run);
        filters
            .get_mut("label")
            .unwrap()
            .push(LABEL_KIND.to_string());
        let imgs = docker
            .list_images(Some(ListImagesOptions {
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .doing(|| format!("listing images of {which}"))?;
        for img in imgs {
            let name = img
                .repo_tags
                .first()
                .cloned()
                .unwrap_or_else(|| img.id.clone());
            let opts = RemoveImageOptions {
                force: true,
                ..Default::default()
            };
            match docker.remove_image(&img.id, Some(opts), None).await {
                Ok(_) => report.images.push(name),
                Err(e) if is_not_found(&e) => {}
                Err(e) => report.failed.push(format!("image {name}: {e}")),
            }
        }
        let mut filters = run_filter(run);
        filters
            .get_mut("label")
            .unwrap()
            .push(format!("{LABEL_KIND}={KIND_CARGO_CACHE}"));
        let volumes = docker
            .list_volumes(Some(ListVolumesOptions {
                filters: Some(filters),
            }))
            .await
            .doing(|| format!("listing cargo cache volumes of {which}"))?;
        for v in volumes.volumes.unwrap_or_default() {
            match docker
                .remove_volume(&v.name, None::<RemoveVolumeOptions>)
                .await
            {
                Ok(()) => report.volumes.push(v.name),
                Err(e) if is_not_found(&e) => {}
                Err(e) => report.failed.push(format!("volume {}: {e}", v.name)),
            }
        }
    }
    Ok(report)
}

/// Owns a run id and removes the run's containers and networks however the
/// run ends: [`RunGuard::finish`] on the normal path, a tokio signal task on
/// Ctrl-C / SIGTERM (cleans up, then exits with code 130), and `Drop` as a
/// last resort (errors, panics).
///
/// Once created, the guard owns SIGINT and SIGTERM for the process (tokio
/// keeps the handlers installed); create it only in the orchestrator.
#[derive(Debug)]
pub struct RunGuard {
    run: RunId,
    docker: Docker,
    done: Arc<AtomicBool>,
    signals: Option<tokio::task::JoinHandle<()>>,
}

impl RunGuard {
    /// Guard `run`. Must be called inside a tokio runtime.
    pub fn new(docker: Docker, run: RunId) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let signals = {
            let docker = docker.clone();
            let run = run.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let name = crate::host::signal::stop_requested().await;
                if done.swap(true, Ordering::SeqCst) {
                    return;
                }
                eprintln!("fairground: {name}: removing the containers and networks of run {run}");
                match clean(&docker, Some(&run), false).await {
                    Ok(r) => eprintln!("fairground: {}", r.summary()),
                    Err(e) => eprintln!("fairground: cleanup of run {run} failed: {e}; run `fairground clean --run {run}`"),
                }
                std::process::exit(crate::exit::ExitCode::Interrupted.code() as i32);
            })
        };
        Self {
            run,
            docker,
            done,
            signals: Some(signals),
        }
    }

    /// The guarded run.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// Clean up now (the normal end of a run) and disarm the guard.
    pub async fn finish(mut self) -> Result<CleanupReport, DockerError> {
        self.done.store(true, Ordering::SeqCst);
        if let Some(s) = self.signals.take() {
            s.abort();
        }
        clean(&self.docker, Some(&self.run), false).await
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if let Some(s) = self.signals.take() {
            s.abort();
        }
        if self.done.swap(true, Ordering::SeqCst) {
            return;
        }
        // We may be inside a runtime (cannot block_on there): clean up on a
        // fresh thread with its own small runtime and its own connection
        // (pooled connections of the old one are driven by the old runtime,
        // which this thread may be blocking).
        let run = self.run.clone();
        let joined = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match rt {
                Ok(rt) => rt
                    .block_on(async {
                        let docker = super::connect().await?;
                        clean(&docker, Some(&run), false).await
                    })
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        })
        .join();
        match joined {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!(
                "fairground: cleanup of run {} failed: {e}; run `fairground clean --run {}`",
                self.run, self.run
            ),
            Err(_) => eprintln!("fairground: cleanup of run {} panicked", self.run),
        }
    }
}
