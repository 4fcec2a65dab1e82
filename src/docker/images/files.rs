//! Reading files out of images and stopped containers through the archive
//! API, without running anything: an image's `/fairground/versions.txt` and
//! binary size for the report, a compiled binary out of a finished build
//! container.
//!
//! Must not start a container: images are read through a created, never
//! started one, removed at once.

use std::collections::HashMap;
use std::io::Read;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptions, DownloadFromContainerOptions};
use bollard::Docker;
use futures_util::StreamExt;

use crate::docker::error::{is_not_found, ApiContext, DockerError};
use crate::docker::{RunId, LABEL_ROLE, LABEL_RUN};

/// Read one file out of an image without running it: create a container
/// (never started), download the path through the archive API, remove it.
/// `Ok(None)` when the image has no such file.
pub async fn read_file_from_image(
    docker: &Docker,
    image: &str,
    path: &str,
    run: &RunId,
) -> Result<Option<String>, DockerError> {
    with_file_in_image(docker, image, path, run, |entry| {
        let mut s = String::new();
        entry.read_to_string(&mut s).ok().map(|_| s)
    })
    .await
}

/// Size in bytes of the regular file at `path` in an image (read from the
/// archive header, the file itself is not kept); `Ok(None)` when there is
/// no such file.
pub async fn file_size_in_image(
    docker: &Docker,
    image: &str,
    path: &str,
    run: &RunId,
) -> Result<Option<u64>, DockerError> {
    with_file_in_image(docker, image, path, run, |entry| entry.header().size().ok()).await
}

/// The bytes of the regular file at `path` in container `id` (running or
/// stopped; its volumes included); `Ok(None)` when there is no such file.
/// `what` names the container in errors.
pub async fn read_bytes_from_container(
    docker: &Docker,
    id: &str,
    what: &str,
    path: &str,
) -> Result<Option<Vec<u8>>, DockerError> {
    let Some(tar_bytes) = download(docker, id, path)
        .await
        .map_err(|source| DockerError::Api {
            doing: format!("reading {path} from {what}"),
            source,
        })?
    else {
        return Ok(None);
    };
    first_regular_file(&tar_bytes, |entry| {
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).ok().map(|_| bytes)
    })
    .map_err(|e| DockerError::Io {
        doing: format!("unpacking {path} read from {what}"),
        source: e,
    })
}

/// `read` applied to the regular file at `path` in `image`, taken from the
/// archive of a container that is never started; `Ok(None)` when there is
/// no such file.
async fn with_file_in_image<T>(
    docker: &Docker,
    image: &str,
    path: &str,
    run: &RunId,
    read: impl FnOnce(&mut tar::Entry<'_, &[u8]>) -> Option<T>,
) -> Result<Option<T>, DockerError> {
    let Some(tar_bytes) = download_from_image(docker, image, path, run).await? else {
        return Ok(None);
    };
    first_regular_file(&tar_bytes, read).map_err(|e| DockerError::Io {
        doing: format!("unpacking {path} read from image {image}"),
        source: e,
    })
}

/// `read` applied to the first regular file of a tar archive.
fn first_regular_file<T>(
    tar_bytes: &[u8],
    read: impl FnOnce(&mut tar::Entry<'_, &[u8]>) -> Option<T>,
) -> std::io::Result<Option<T>> {
    let mut archive = tar::Archive::new(tar_bytes);
    let entries = archive.entries()?;
    Ok(entries
        .flatten()
        .find(|e| e.header().entry_type().is_file())
        .and_then(|mut e| read(&mut e)))
}

/// The archive of `path` in `image`, from a container that is never started.
async fn download_from_image(
    docker: &Docker,
    image: &str,
    path: &str,
    run: &RunId,
) -> Result<Option<Vec<u8>>, DockerError> {
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        // Never started: the command only has to be non-empty.
        cmd: Some(vec!["/fairground-never-started".into()]),
        labels: Some(HashMap::from([
            (LABEL_RUN.to_string(), run.0.clone()),
            (LABEL_ROLE.to_string(), super::ROLE_PROBE.to_string()),
        ])),
        network_disabled: Some(true),
        ..Default::default()
    };
    let created = docker
        .create_container(None::<CreateContainerOptions>, body)
        .await
        .doing(|| format!("creating a stopped container of {image} to read {path}"))?;
    let downloaded = download(docker, &created.id, path).await;
    force_remove(docker, &created.id).await;
    downloaded.map_err(|source| DockerError::Api {
        doing: format!("reading {path} from image {image}"),
        source,
    })
}

/// Remove container `id` and its anonymous volumes, running or not; best
/// effort (a leftover is caught by the run's cleanup, by label).
pub(super) async fn force_remove(docker: &Docker, id: &str) {
    let _ = crate::docker::cleanup::force_remove(docker, id).await;
}

/// The archive of `path` in container `id`; `Ok(None)` when it has none.
async fn download(
    docker: &Docker,
    id: &str,
    path: &str,
) -> Result<Option<Vec<u8>>, bollard::errors::Error> {
    let mut tar_bytes = Vec::new();
    let mut stream = docker.download_from_container(
        id,
        Some(DownloadFromContainerOptions {
            path: path.to_string(),
        }),
    );
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(b) => tar_bytes.extend_from_slice(&b),
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(tar_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_regular_file_skips_directories() {
        let mut b = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_size(0);
        dir.set_cksum();
        b.append_data(&mut dir, "d/", std::io::empty()).unwrap();
        let mut f = tar::Header::new_gnu();
        f.set_size(3);
        f.set_cksum();
        b.append_data(&mut f, "d/app", &b"abc"[..]).unwrap();
        let bytes = b.into_inner().unwrap();
        let got = first_regular_file(&bytes, |e| {
            let mut v = Vec::new();
            e.read_to_end(&mut v).ok().map(|_| v)
        })
        .unwrap();
        assert_eq!(got.as_deref(), Some(&b"abc"[..]));
    }
}
