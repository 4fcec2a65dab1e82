//! Images without a registry: fairground's own `FROM scratch` image and the
//! framework images, built from local inputs and tagged by the hash of those
//! inputs so an unchanged one is reused, never rebuilt.
//!
//! Owns locating the static fairground binary, host-side prebuilds (cargo),
//! build contexts, build logs, and reading back an image's id, size and
//! `/fairground/versions.txt`. Base images live in `bases`. Must not pull
//! anything: builds run with `networkmode: none`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    BuildImageOptions, CreateContainerOptions, DownloadFromContainerOptions, ListImagesOptions,
    RemoveContainerOptions,
};
use bollard::Docker;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::error::{is_not_found, ApiContext, DockerError};
use super::{RunId, LABEL_INPUTS, LABEL_KIND, LABEL_NAME, LABEL_RUN};
use crate::framework::{Framework, Prebuild, VERSIONS_FILE};

/// Repository of fairground's own image.
pub const FAIRGROUND_REPO: &str = "fairground/fairground";
/// Where the binary lives inside the fairground image (its entrypoint).
pub const FAIRGROUND_IN_IMAGE: &str = "/fairground/fairground";
/// The target static binaries are built for.
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";
/// Rust flags of every static build (fairground and cargo frameworks).
pub const STATIC_RUSTFLAGS: &str = "-C target-feature=+crt-static";
/// Env var naming a static fairground binary (set by `make test`).
pub const STATIC_BIN_ENV: &str = "FAIRGROUND_STATIC_BIN";
/// Lines of a failed build log shown in the error.
const TAIL_LINES: usize = 30;

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
    /// Size as the daemon reports it, bytes.
    pub size_bytes: u64,
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

// ---------------------------------------------------------------------------
// The static binary

/// Whether the ELF file at `path` is statically linked (no `PT_INTERP`).
pub fn is_static_elf(path: &Path) -> std::io::Result<bool> {
    const PT_INTERP: u32 = 3;
    let mut f = std::fs::File::open(path)?;
    let mut head = [0u8; 64];
    f.read_exact(&mut head)?;
    let bad = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a 64-bit little-endian ELF file",
        )
    };
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return Err(bad());
    }
    let phoff = u64::from_le_bytes(head[0x20..0x28].try_into().unwrap());
    let phentsize = u16::from_le_bytes(head[0x36..0x38].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(head[0x38..0x3a].try_into().unwrap()) as usize;
    if phentsize < 4 {
        return Err(bad());
    }
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(phoff))?;
    let mut table = vec![0u8; phentsize * phnum];
    f.read_exact(&mut table)?;
    Ok(!table
        .chunks(phentsize)
        .any(|ph| u32::from_le_bytes(ph[..4].try_into().unwrap()) == PT_INTERP))
}

/// The cargo output path of the static build under `root`.
pub fn static_bin_path(root: &Path) -> PathBuf {
    root.join("target")
        .join(STATIC_TARGET)
        .join("release/fairground")
}

/// The static fairground binary to put in the image: this executable if it
/// is static, else `$FAIRGROUND_STATIC_BIN`, else the `make static` output.
pub fn locate_static_binary(root: &Path) -> Result<PathBuf, DockerError> {
    locate_static_binary_from(
        std::env::current_exe().ok(),
        std::env::var_os(STATIC_BIN_ENV).map(PathBuf::from),
        root,
    )
}

/// [`locate_static_binary`] with its inputs explicit (for tests).
pub fn locate_static_binary_from(
    current_exe: Option<PathBuf>,
    env_bin: Option<PathBuf>,
    root: &Path,
) -> Result<PathBuf, DockerError> {
    let mut looked = Vec::new();
    if let Some(exe) = current_exe {
        // Only the fairground binary itself, not a test harness that happens
        // to be static.
        if exe.file_name().is_some_and(|n| n == "fairground")
            && is_static_elf(&exe).unwrap_or(false)
        {
            return Ok(exe);
        }
        looked.push(format!("{} is not a static fairground", exe.display()));
    }
    if let Some(p) = env_bin {
        match is_static_elf(&p) {
            Ok(true) => return Ok(p),
            Ok(false) => looked.push(format!(
                "{STATIC_BIN_ENV}={} is dynamically linked",
                p.display()
            )),
            Err(e) => looked.push(format!("{STATIC_BIN_ENV}={}: {e}", p.display())),
        }
    }
    let p = static_bin_path(root);
    match is_static_elf(&p) {
        Ok(true) => return Ok(p),
        Ok(false) => looked.push(format!("{} is dynamically linked", p.display())),
        Err(e) => looked.push(format!("{}: {e}", p.display())),
    }
    Err(DockerError::NoStaticBinary {
        detail: looked.join("; "),
    })
}

// ---------------------------------------------------------------------------
// Build contexts and builds

/// Files of a build context folder, sorted, skipping `target/` and `.git`
/// (cargo output and history never belong in an image context).
pub fn context_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let rel = path.strip_prefix(base).unwrap().to_path_buf();
            let name = e.file_name();
            if name == "target" || name == ".git" {
                continue;
            }
            let ft = e.file_type()?;
            if ft.is_dir() {
                walk(base, &path, out)?;
            } else if ft.is_file() {
                out.push(rel);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// Hash of a folder's files (relative paths and contents).
pub fn hash_dir(dir: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
    for rel in context_files(dir)? {
        hasher.update(rel.to_string_lossy().as_bytes());
        hasher.update([0]);
        let bytes = std::fs::read(dir.join(&rel))?;
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(())
}

/// An in-memory tar build context.
pub struct Context {
    builder: tar::Builder<Vec<u8>>,
}

impl Default for Context {
    fn default() -> Self {
        Self::new()
    }
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    /// Add a file with content and mode.
    pub fn add_bytes(&mut self, name: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(mode);
        h.set_mtime(0);
        h.set_cksum();
        self.builder.append_data(&mut h, name, bytes)
    }

    /// Add every context file of `dir` (see [`context_files`]).
    pub fn add_dir(&mut self, dir: &Path) -> std::io::Result<()> {
        for rel in context_files(dir)? {
            let path = dir.join(&rel);
            let mode = {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(&path)?.permissions().mode() & 0o777
            };
            self.add_bytes(&rel.to_string_lossy(), &std::fs::read(&path)?, mode)?;
        }
        Ok(())
    }

    /// The tar bytes.
    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        self.builder.into_inner()
    }
}

/// Last `n` lines of a file (for error messages).
pub fn tail_file(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn image_labels(kind: ImageKind, name: &str, hash: &str, run: &RunId) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_KIND.to_string(), kind.as_str().to_string()),
        (LABEL_NAME.to_string(), name.to_string()),
        (LABEL_INPUTS.to_string(), hash.to_string()),
        (LABEL_RUN.to_string(), run.0.clone()),
    ])
}

/// What to build: a tag from a tar context, with labels and build args.
pub struct BuildRequest<'a> {
    /// `repo:tag`.
    pub tag: &'a str,
    /// Human name for errors (`framework axum`).
    pub what: &'a str,
    /// The tar context (Dockerfile at its root).
    pub context: Vec<u8>,
    /// Image labels.
    pub labels: HashMap<String, String>,
    /// `--build-arg`s.
    pub build_args: HashMap<String, String>,
    /// Log file for the builder's output.
    pub log: &'a Path,
    /// Docker network mode of the build (`none` unless a build must fetch).
    pub network: &'a str,
}

/// Run one classic-builder build, streaming its output to the log file.
pub async fn build(docker: &Docker, req: BuildRequest<'_>) -> Result<(), DockerError> {
    let fail = |reason: String| DockerError::Build {
        image: req.tag.to_string(),
        what: req.what.to_string(),
        reason,
        log: req.log.to_path_buf(),
        tail: tail_file(req.log, TAIL_LINES),
    };
    if let Some(dir) = req.log.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    }
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(req.log)
        .map_err(|e| fail(format!("cannot open {}: {e}", req.log.display())))?;
    let _ = writeln!(log, "=== docker build -t {} ({})", req.tag, req.what);
    let opts = BuildImageOptions {
        t: Some(req.tag.to_string()),
        rm: true,
        forcerm: true,
        labels: Some(req.labels.clone()),
        buildargs: Some(req.build_args.clone()),
        networkmode: Some(req.network.to_string()),
        ..Default::default()
    };
    let mut stream = docker.build_image(opts, None, Some(bollard::body_full(req.context.into())));
    let mut failure = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(s) = info.stream {
                    let _ = log.write_all(s.as_bytes());
                }
                if let Some(detail) = info.error_detail.and_then(|d| d.message) {
                    let _ = writeln!(log, "ERROR: {detail}");
                    failure = Some(detail);
                }
            }
            Err(e) => {
                let _ = writeln!(log, "ERROR: {e}");
                failure = Some(e.to_string());
                break;
            }
        }
    }
    drop(log);
    match failure {
        Some(reason) => Err(fail(reason)),
        None => Ok(()),
    }
}

/// Inspect `tag`: `Some((id, size))` when present.
pub async fn existing(docker: &Docker, tag: &str) -> Result<Option<(String, u64)>, DockerError> {
    match docker.inspect_image(tag).await {
        Ok(img) => Ok(Some((
            img.id.unwrap_or_default(),
            img.size.unwrap_or(0).max(0) as u64,
        ))),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(source) => Err(DockerError::Api {
            doing: format!("inspecting image {tag}"),
            source,
        }),
    }
}

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
    let mut archive = tar::Archive::new(tar_bytes.as_slice());
    let entries = archive.entries().map_err(|e| DockerError::Build {
        image: image.into(),
        what: format!("reading {path}"),
        reason: e.to_string(),
        log: PathBuf::new(),
        tail: String::new(),
    })?;
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
            (super::LABEL_ROLE.to_string(), "probe".to_string()),
        ])),
        network_disabled: Some(true),
        ..Default::default()
    };
    let created = docker
        .create_container(None::<CreateContainerOptions>, body)
        .await
        .doing(|| format!("creating a stopped container of {image} to read {path}"))?;
    let mut tar_bytes = Vec::new();
    let mut stream = docker.download_from_container(
        &created.id,
        Some(DownloadFromContainerOptions {
            path: path.to_string(),
        }),
    );
    let mut missing = false;
    let mut err = None;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(b) => tar_bytes.extend_from_slice(&b),
            Err(e) if is_not_found(&e) => {
                missing = true;
                break;
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let _ = docker
        .remove_container(
            &created.id,
            Some(RemoveContainerOptions {
                force: true,
                v: true,
                ..Default::default()
            }),
        )
        .await;
    if let Some(source) = err {
        return Err(DockerError::Api {
            doing: format!("reading {path} from image {image}"),
            source,
        });
    }
    if missing {
        return Ok(None);
    }
    Ok(Some(tar_bytes))
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

// ---------------------------------------------------------------------------
// fairground's own image

/// The Dockerfile of the fairground image.
pub const FAIRGROUND_DOCKERFILE: &str = "FROM scratch\n\
COPY fairground /fairground/fairground\n\
COPY versions.txt /fairground/versions.txt\n\
ENTRYPOINT [\"/fairground/fairground\"]\n";

/// Build (or reuse) `fairground/fairground:<sha256 of the binary, 12 hex>`.
pub async fn ensure_fairground(docker: &Docker, opts: &ImageOptions) -> anyhow::Result<ImageInfo> {
    let bin = locate_static_binary(&opts.root)?;
    let bytes =
        std::fs::read(&bin).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", bin.display()))?;
    let hash = sha256_hex(&bytes);
    let tag = format!("{FAIRGROUND_REPO}:{}", short(&hash));
    if existing(docker, &tag).await?.is_some() {
        (opts.progress)(&format!("fairground image {tag}: up to date"));
        return Ok(finish_info(
            docker,
            ImageKind::Fairground,
            "fairground",
            &tag,
            &hash,
            true,
            &opts.run,
        )
        .await?);
    }
    (opts.progress)(&format!(
        "fairground image {tag}: building from {}",
        bin.display()
    ));
    let mut ctx = Context::new();
    ctx.add_bytes("Dockerfile", FAIRGROUND_DOCKERFILE.as_bytes(), 0o644)?;
    ctx.add_bytes("fairground", &bytes, 0o755)?;
    let versions = format!("fairground {}\n", env!("CARGO_PKG_VERSION"));
    ctx.add_bytes("versions.txt", versions.as_bytes(), 0o644)?;
    let log = opts.log_dir.join("fairground.log");
    build(
        docker,
        BuildRequest {
            tag: &tag,
            what: "the fairground image",
            context: ctx.finish()?,
            labels: image_labels(ImageKind::Fairground, "fairground", &hash, &opts.run),
            build_args: HashMap::new(),
            log: &log,
            network: "none",
        },
    )
    .await?;
    Ok(finish_info(
        docker,
        ImageKind::Fairground,
        "fairground",
        &tag,
        &hash,
        false,
        &opts.run,
    )
    .await?)
}

// ---------------------------------------------------------------------------
// Framework images

/// `rustc -V` (e.g. `rustc 1.95.0 (…)`), part of a cargo framework's inputs.
pub fn rustc_version() -> anyhow::Result<String> {
    let out = std::process::Command::new("rustc")
        .arg("-V")
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run `rustc -V`: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The hash of everything a framework image is built from: its folder
/// (minus target/), the resolved base tag, and for cargo prebuilds the
/// compiler and flags.
pub fn framework_inputs_hash(fw: &Framework, base_tag: &str) -> anyhow::Result<String> {
    let mut h = Sha256::new();
    h.update(b"fairground-framework-v1\0");
    h.update(fw.name().as_bytes());
    h.update([0]);
    h.update(base_tag.as_bytes());
    h.update([0]);
    if let Some(Prebuild::Cargo { bin }) = &fw.manifest.prebuild {
        h.update(bin.as_bytes());
        h.update(rustc_version()?.as_bytes());
        h.update(STATIC_RUSTFLAGS.as_bytes());
    }
    hash_dir(&fw.dir, &mut h).map_err(|e| {
        anyhow::anyhow!(
            "framework {}: cannot read {}: {e}",
            fw.name(),
            fw.dir.display()
        )
    })?;
    Ok(hex::encode(h.finalize()))
}

/// `name version` of the direct (normal) dependencies of the Cargo project
/// in `dir`, from `cargo metadata`, plus the rustc version.
pub fn cargo_versions(dir: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new("cargo")
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
            STATIC_TARGET,
        ])
        .current_dir(dir)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run cargo metadata in {}: {e}", dir.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "cargo metadata in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let root = meta["resolve"]["root"].as_str().unwrap_or_default();
    let version_of = |id: &str| {
        meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["id"] == id)
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or_default().to_string(),
                    p["version"].as_str().unwrap_or_default().to_string(),
                )
            })
    };
    let mut lines = Vec::new();
    for node in meta["resolve"]["nodes"].as_array().into_iter().flatten() {
        if node["id"] != root {
            continue;
        }
        for dep in node["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .is_none_or(|kinds| kinds.iter().any(|k| k["kind"].is_null()));
            if normal {
                if let Some((n, v)) = dep["pkg"].as_str().and_then(version_of) {
                    lines.push(format!("{n} {v}"));
                }
            }
        }
    }
    lines.sort();
    let rustc = rustc_version()?;
    let rustc_ver = rustc.split_whitespace().nth(1).unwrap_or("unknown");
    lines.push(format!("rustc {rustc_ver}"));
    Ok(lines.join("\n") + "\n")
}

/// `cargo build --release --locked` of a framework, static, into the shared
/// `target/frameworks`; returns the binary. Output goes to `log`.
pub async fn cargo_prebuild(
    fw: &Framework,
    bin: &str,
    root: &Path,
    log: &Path,
) -> anyhow::Result<PathBuf> {
    let target_dir = root.join("target/frameworks");
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let status = tokio::process::Command::new("cargo")
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            STATIC_TARGET,
            "--bin",
            bin,
        ])
        .current_dir(&fw.dir)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env(
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
            STATIC_RUSTFLAGS,
        )
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .await
        .map_err(|e| anyhow::anyhow!("framework {}: cannot run cargo: {e}", fw.name()))?;
    if !status.success() {
        anyhow::bail!(
            "framework {}: `cargo build --release --locked` in {} failed ({status})\nfull log: {}\n--- last lines ---\n{}",
            fw.name(),
            fw.dir.display(),
            log.display(),
            tail_file(log, TAIL_LINES)
        );
    }
    Ok(target_dir.join(STATIC_TARGET).join("release").join(bin))
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

/// Remove the images `current` supersedes: other tags of the same
/// repositories (`fairground/fairground`, `fairground/fw-NAME`,
/// `fairground/base-NAME`), built from inputs that have since changed.
/// Nothing is removed while any fairground container exists: another run
/// may be between two containers of an image this one supersedes. Returns
/// the tags removed.
pub async fn prune_superseded(docker: &Docker, current: &[&str]) -> anyhow::Result<Vec<String>> {
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
        return Ok(Vec::new());
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
    Ok(removed)
}

/// Build (or reuse) `fairground/fw-NAME:<inputs hash>` FROM `base_tag`
/// (`scratch` or a resolved base image tag).
pub async fn ensure_framework(
    docker: &Docker,
    fw: &Framework,
    base_tag: &str,
    opts: &ImageOptions,
) -> anyhow::Result<ImageInfo> {
    let name = fw.name().to_string();
    let hash = framework_inputs_hash(fw, base_tag)?;
    let tag = format!("fairground/fw-{name}:{}", short(&hash));
    if existing(docker, &tag).await?.is_some() {
        (opts.progress)(&format!("framework {name} {tag}: up to date"));
        return Ok(finish_info(
            docker,
            ImageKind::Framework,
            &name,
            &tag,
            &hash,
            true,
            &opts.run,
        )
        .await?);
    }
    let log = opts.log_dir.join(format!("fw-{name}.log"));
    let _ = std::fs::remove_file(&log);
    let mut ctx = Context::new();
    if let Some(Prebuild::Cargo { bin }) = &fw.manifest.prebuild {
        (opts.progress)(&format!(
            "framework {name}: cargo build (log: {})",
            log.display()
        ));
        let app = cargo_prebuild(fw, bin, &opts.root, &log).await?;
        ctx.add_bytes("app", &std::fs::read(&app)?, 0o755)?;
        let versions = cargo_versions(&fw.dir)
            .map_err(|e| anyhow::anyhow!("framework {name}: reading crate versions: {e:#}"))?;
        ctx.add_bytes("versions.txt", versions.as_bytes(), 0o644)?;
    }
    ctx.add_dir(&fw.dir)
        .map_err(|e| anyhow::anyhow!("framework {name}: packing {}: {e}", fw.dir.display()))?;
    (opts.progress)(&format!(
        "framework {name} {tag}: docker build FROM {base_tag} (log: {})",
        log.display()
    ));
    build(
        docker,
        BuildRequest {
            tag: &tag,
            what: &format!("framework {name}"),
            context: ctx.finish()?,
            labels: image_labels(ImageKind::Framework, &name, &hash, &opts.run),
            build_args: HashMap::from([("BASE".to_string(), base_tag.to_string())]),
            log: &log,
            network: "none",
        },
    )
    .await?;
    Ok(finish_info(
        docker,
        ImageKind::Framework,
        &name,
        &tag,
        &hash,
        false,
        &opts.run,
    )
    .await?)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_dynamic_and_elf_check_rejects_text() {
        let exe = std::env::current_exe().unwrap();
        // Test binaries are built for the host without crt-static.
        assert!(!is_static_elf(&exe).unwrap());
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), b"#!/bin/sh\necho hi\n").unwrap();
        assert!(is_static_elf(tmp.path()).is_err());
    }

    #[test]
    fn context_skips_target_and_hash_follows_content() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir_all(d.join("target/release")).unwrap();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(d.join("target/release/big"), b"x").unwrap();
        std::fs::write(d.join("Dockerfile"), b"FROM scratch\n").unwrap();
        std::fs::write(d.join("src/main.rs"), b"fn main() {}\n").unwrap();
        let files = context_files(d).unwrap();
        assert_eq!(
            files,
            vec![PathBuf::from("Dockerfile"), PathBuf::from("src/main.rs")]
        );
        let hash = |d: &Path| {
            let mut h = Sha256::new();
            hash_dir(d, &mut h).unwrap();
            hex::encode(h.finalize())
        };
        let before = hash(d);
        std::fs::write(d.join("target/release/big"), b"changed").unwrap();
        assert_eq!(hash(d), before, "target/ is not an input");
        std::fs::write(d.join("src/main.rs"), b"fn main() { }\n").unwrap();
        assert_ne!(hash(d), before);
    }

    #[test]
    fn missing_static_binary_says_make_static() {
        let tmp = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let err = locate_static_binary_from(Some(exe.clone()), Some(exe), tmp.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("make static"), "{msg}");
        assert!(msg.contains("dynamically linked"), "{msg}");
    }
}
