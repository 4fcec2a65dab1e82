//! Images without a registry: fairground's own `FROM scratch` image and the
//! framework images, built from local inputs and tagged by the hash of those
//! inputs so an unchanged one is reused, never rebuilt.
//!
//! Owns the options and report types of image builds, reading back an
//! image's id, size and `/fairground/versions.txt`, listing and pruning.
//! By responsibility:
//! - `context`: build contexts (which files, their hash) and one classic
//!   `docker build` streamed into a log;
//! - `fairground`: the static fairground binary and its image;
//! - `framework`: framework images;
//! - `rust`: the static binary of Rust frameworks, compiled in a build
//!   container (only `cargo fetch` and `cargo metadata` run on the host);
//! - `files`: reading files out of images and stopped containers.
//!
//! Base images live in `bases`. Must not pull anything, and must not run
//! anything from a framework's folder on the host: builds run with
//! `networkmode: none`, compiles in build containers.

mod context;
mod fairground;
mod files;
mod framework;
pub mod rust;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bollard::query_parameters::ListImagesOptions;
use bollard::Docker;
use sha2::{Digest, Sha256};

use super::error::{is_not_found, ApiContext, DockerError};
use super::{RunId, LABEL_INPUTS, LABEL_KIND, LABEL_NAME, LABEL_RUN};
use crate::framework::VERSIONS_FILE;
use rust::sandbox::ROLE_BUILD;

pub(crate) use context::open_log;
pub use context::{build, context_files, hash_dir, tail_file, BuildRequest, Context};
pub use fairground::{
    ensure_fairground, is_static_elf, locate_static_binary, locate_static_binary_from,
    static_bin_path, FAIRGROUND_DOCKERFILE, FAIRGROUND_IN_IMAGE, FAIRGROUND_REPO, STATIC_BIN_ENV,
};
pub use files::{file_size_in_image, read_bytes_from_container, read_file_from_image};
pub use framework::{ensure_framework, framework_inputs_hash, framework_tag};

/// The target static binaries are built for.
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";
/// Rust flags of every static build (fairground and cargo frameworks).
pub const STATIC_RUSTFLAGS: &str = "-C target-feature=+crt-static";
/// Lines of a failed build log shown in the error.
const TAIL_LINES: usize = 30;

/// The `fairground.role` of the stopped containers an image build creates
/// to read a file out of an image.
pub const ROLE_PROBE: &str = "probe";

/// Reports what the image builder is doing, one line at a time.
pub type ProgressFn = Arc<dyn Fn(&str) + Send + Sync>;

/// A progress sink that drops everything.
pub fn no_progress() -> ProgressFn {
    Arc::new(|_| {})
}

/// Where inputs and logs are, and how to label what is built.
#[derive(Clone)]
pub struct ImageOptions {
    /// The project root: holds `frameworks/`, `docker/bases/` and `target/`.
    pub root: PathBuf,
    /// Directory for build logs (default `output/build-logs`).
    pub log_dir: PathBuf,
    /// Build bases from this upstream image (e.g. `debian:bookworm-slim`)
    /// instead of bootstrapping them with mmdebstrap. Needs a daemon that
    /// can pull and a build that may reach the Debian archive.
    pub upstream_base: Option<String>,
    /// The run (or `images build` invocation) building; labels its objects.
    pub run: RunId,
    /// Progress lines.
    pub progress: ProgressFn,
}

impl std::fmt::Debug for ImageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageOptions")
            .field("root", &self.root)
            .field("log_dir", &self.log_dir)
            .field("upstream_base", &self.upstream_base)
            .field("run", &self.run)
            .finish()
    }
}

impl ImageOptions {
    /// Defaults for a project rooted at `root`.
    pub fn new(root: impl Into<PathBuf>, run: RunId) -> Self {
        let root = root.into();
        Self {
            log_dir: root.join("output/build-logs"),
            root,
            upstream_base: None,
            run,
            progress: no_progress(),
        }
    }
}

/// Which kind of image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    /// fairground's own FROM-scratch image.
    Fairground,
    /// A Debian base made with mmdebstrap.
    Base,
    /// A framework's server image.
    Framework,
}

impl ImageKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageKind::Fairground => "fairground",
            ImageKind::Base => "base",
            ImageKind::Framework => "framework",
        }
    }
}

/// A built (or reused) image, for the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ImageInfo {
    /// What it is.
    pub kind: ImageKind,
    /// Framework or base name (`fairground` for the own image).
    pub name: String,
    /// `repo:tag`.
    pub tag: String,
    /// Image id (`sha256:…`).
    pub id: String,
    /// Size as the daemon reports it, bytes; `None` when it did not.
    pub size_bytes: Option<u64>,
    /// Hash of every input (first 12 hex digits are the tag).
    pub inputs_hash: String,
    /// Whether an existing image was reused instead of built.
    pub reused: bool,
    /// Content of `/fairground/versions.txt`, when the image has one.
    pub versions: Option<String>,
    /// Size of the app's one binary, when the image runs one: its entrypoint
    /// is exactly [`APP_BINARY`] (how every compiled framework is packaged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_binary_bytes: Option<u64>,
}

/// First 12 hex digits of a sha256: the tag of a content-addressed image.
pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// Hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Inspect `tag`: `Some((id, size))` when present; the size is `None`
/// when the daemon did not say it.
pub async fn existing(
    docker: &Docker,
    tag: &str,
) -> Result<Option<(String, Option<u64>)>, DockerError> {
    match docker.inspect_image(tag).await {
        Ok(img) => Ok(Some((
            img.id.unwrap_or_default(),
            img.size.and_then(|s| u64::try_from(s).ok()),
        ))),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(source) => Err(DockerError::Api {
            doing: format!("inspecting image {tag}"),
            source,
        }),
    }
}

async fn finish_info(
    docker: &Docker,
    kind: ImageKind,
    name: &str,
    tag: &str,
    hash: &str,
    reused: bool,
    run: &RunId,
) -> Result<ImageInfo, DockerError> {
    let (id, size_bytes) = existing(docker, tag)
        .await?
        .ok_or_else(|| DockerError::Build {
            image: tag.into(),
            what: name.into(),
            reason: "the build reported success but the image is not there".into(),
            log: PathBuf::new(),
            tail: String::new(),
        })?;
    let versions = read_file_from_image(docker, tag, VERSIONS_FILE, run).await?;
    let app_binary_bytes = if kind == ImageKind::Framework && runs_app_binary(docker, tag).await {
        file_size_in_image(docker, tag, APP_BINARY, run).await?
    } else {
        None
    };
    Ok(ImageInfo {
        kind,
        name: name.to_string(),
        tag: tag.to_string(),
        id,
        size_bytes,
        inputs_hash: hash.to_string(),
        reused,
        versions,
        app_binary_bytes,
    })
}

/// Where compiled frameworks put their one server binary, and their
/// entrypoint.
pub const APP_BINARY: &str = "/app";

/// Whether the image's entrypoint is exactly [`APP_BINARY`], with no
/// interpreter in front of it.
async fn runs_app_binary(docker: &Docker, tag: &str) -> bool {
    docker
        .inspect_image(tag)
        .await
        .ok()
        .and_then(|i| i.config?.entrypoint)
        .is_some_and(|e| e == [APP_BINARY])
}

/// Remove the untagged images that multi-stage builds leave behind (the
/// `build` stage of the Go, C++ and cpp-httplib frameworks). They inherit the
/// labels of the base they were built from, so the `fairground.run` label
/// filter touches only fairground's own; the tagged images (the cache) stay.
/// Returns how many were removed.
pub async fn prune_build_stages(docker: &Docker) -> anyhow::Result<usize> {
    let filters = HashMap::from([
        ("dangling".to_string(), vec!["true".to_string()]),
        ("label".to_string(), vec![LABEL_RUN.to_string()]),
    ]);
    let resp = docker
        .prune_images(Some(bollard::query_parameters::PruneImagesOptions {
            filters: Some(filters),
        }))
        .await
        .doing(|| "removing untagged build-stage images".into())?;
    Ok(resp.images_deleted.map_or(0, |d| d.len()))
}

/// What [`prune_superseded`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Superseded {
    /// Tags removed.
    pub removed: Vec<String>,
    /// Names of the fairground containers that exist, when their existence
    /// kept every superseded image (empty when nothing was held back).
    pub held_by: Vec<String>,
}

/// Remove the images `current` supersedes: other tags of the same
/// repositories (`fairground/fairground`, `fairground/fw-NAME`,
/// `fairground/base-NAME`), built from inputs that have since changed.
/// Nothing is removed while any fairground container exists (another run
/// may be between two containers of an image this one supersedes); the
/// result names those containers so the caller can say why. The build's
/// own helper containers (`run`'s build and probe containers, removed best
/// effort as each ends) are removed again first rather than counted.
pub async fn prune_superseded(
    docker: &Docker,
    run: &RunId,
    current: &[&str],
) -> anyhow::Result<Superseded> {
    let own = docker
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![format!("{LABEL_RUN}={}", run.0)],
            )])),
            ..Default::default()
        }))
        .await
        .doing(|| format!("listing the containers of build {}", run.0))?;
    for c in own {
        let role = c
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::docker::LABEL_ROLE))
            .map(String::as_str);
        if matches!(role, Some(ROLE_BUILD | ROLE_PROBE)) {
            if let Some(id) = &c.id {
                let _ = crate::docker::cleanup::force_remove(docker, id).await;
            }
        }
    }
    let others = docker
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![LABEL_RUN.to_string()],
            )])),
            ..Default::default()
        }))
        .await
        .doing(|| "listing fairground containers".into())?;
    if !others.is_empty() {
        let held_by = others
            .into_iter()
            .map(|c| {
                c.names
                    .and_then(|n| n.into_iter().next())
                    .map(|n| n.trim_start_matches('/').to_string())
                    .or(c.id)
                    .unwrap_or_default()
            })
            .collect();
        return Ok(Superseded {
            removed: Vec::new(),
            held_by,
        });
    }
    let repo = |t: &str| {
        t.rsplit_once(':')
            .map_or(t.to_string(), |(r, _)| r.to_string())
    };
    let repos: std::collections::BTreeSet<String> = current.iter().map(|t| repo(t)).collect();
    let filters = HashMap::from([("label".to_string(), vec![LABEL_KIND.to_string()])]);
    let images = docker
        .list_images(Some(bollard::query_parameters::ListImagesOptions {
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .doing(|| "listing fairground's images".into())?;
    let mut removed = Vec::new();
    for tag in images.into_iter().flat_map(|i| i.repo_tags) {
        if current.contains(&tag.as_str()) || !repos.contains(&repo(&tag)) {
            continue;
        }
        if docker
            .remove_image(
                &tag,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await
            .is_ok()
        {
            removed.push(tag);
        }
    }
    Ok(Superseded {
        removed,
        held_by: Vec::new(),
    })
}

// ---------------------------------------------------------------------------
// Listing

/// One row of `fairground images list`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ImageRow {
    /// fairground, base or framework.
    pub kind: String,
    /// Name.
    pub name: String,
    /// `repo:tag` (first tag).
    pub tag: String,
    /// Size, bytes.
    pub size_bytes: u64,
    /// Inputs hash label.
    pub inputs_hash: String,
    /// Creation time, unix seconds.
    pub created: i64,
}

/// Every image fairground built, sorted by kind and name.
pub async fn list(docker: &Docker) -> Result<Vec<ImageRow>, DockerError> {
    let filters = HashMap::from([("label".to_string(), vec![LABEL_KIND.to_string()])]);
    let imgs = docker
        .list_images(Some(ListImagesOptions {
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .doing(|| "listing fairground images".into())?;
    let mut rows: Vec<ImageRow> = imgs
        .into_iter()
        .map(|i| ImageRow {
            kind: i.labels.get(LABEL_KIND).cloned().unwrap_or_default(),
            name: i.labels.get(LABEL_NAME).cloned().unwrap_or_default(),
            tag: i.repo_tags.first().cloned().unwrap_or_else(|| i.id.clone()),
            size_bytes: i.size.max(0) as u64,
            inputs_hash: i.labels.get(LABEL_INPUTS).cloned().unwrap_or_default(),
            created: i.created,
        })
        .collect();
    rows.sort_by(|a, b| (&a.kind, &a.name, -a.created).cmp(&(&b.kind, &b.name, -b.created)));
    Ok(rows)
}
