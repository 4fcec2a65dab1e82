//! Base images for frameworks that need a runtime, made without a registry:
//! `docker/bases/NAME.yaml` lists Debian packages; fairground bootstraps a
//! minimal Debian root filesystem with mmdebstrap from the archive the host
//! already uses and imports it (`POST /images/create?fromSrc=-`).
//!
//! Tag: `fairground/base-NAME:<hash of the yaml + mirror>`, so a changed
//! package list or mirror makes a new base and an unchanged one is reused.
//! With `--upstream-base IMAGE` (machines that can pull) the base is instead
//! built `FROM IMAGE` with apt-get, the one build that may use the network.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use bollard::query_parameters::CreateImageOptions;
use bollard::Docker;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::error::DockerError;
use super::images::{self, ImageInfo, ImageKind, ImageOptions};
use super::{LABEL_INPUTS, LABEL_KIND, LABEL_NAME, LABEL_RUN};

/// Folder of base descriptions, relative to the project root.
pub const BASES_DIR: &str = "docker/bases";
/// The base the database container runs: PostgreSQL from Debian.
pub const DATABASE_BASE: &str = "postgres";
/// Names the Debian archive bases are made from, over the host's apt
/// sources. No archive address is built in: a machine whose apt names none
/// for the base's suite must say which one to use.
pub const MIRROR_ENV: &str = "FAIRGROUND_DEBIAN_MIRROR";

/// `docker/bases/NAME.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BaseSpec {
    /// Debian suite, e.g. `bookworm`.
    pub suite: String,
    /// Debian packages to install on top of `minbase`.
    #[serde(default)]
    pub packages: Vec<String>,
    /// What the base is for (shown by `images list`).
    #[serde(default)]
    pub description: Option<String>,
}

/// Path of a base description.
pub fn spec_path(root: &Path, name: &str) -> PathBuf {
    root.join(BASES_DIR).join(format!("{name}.yaml"))
}

/// Read and check `docker/bases/NAME.yaml`; returns the spec and its bytes
/// (hashed into the tag).
pub fn load_spec(root: &Path, name: &str) -> Result<(BaseSpec, Vec<u8>), DockerError> {
    let path = spec_path(root, name);
    let err = |reason: String| DockerError::Base {
        name: name.to_string(),
        path: path.clone(),
        reason,
    };
    let bytes = std::fs::read(&path).map_err(|e| {
        err(format!(
            "cannot read it ({e}); a framework manifest names base `{name}`: add {BASES_DIR}/{name}.yaml (see {BASES_DIR}/README.md)"
        ))
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let spec: BaseSpec = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
    let valid_pkg = |p: &String| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.:".contains(c))
    };
    if let Some(bad) = spec.packages.iter().find(|p| !valid_pkg(p)) {
        return Err(err(format!(
            "`packages`: `{bad}` is not a Debian package name"
        )));
    }
    if spec.suite.is_empty()
        || !spec
            .suite
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(err(format!(
            "`suite`: `{}` is not a Debian suite name",
            spec.suite
        )));
    }
    Ok((spec, bytes))
}

/// The Debian mirror the host's apt uses for `suite`: from deb822
/// `/etc/apt/sources.list.d/*.sources` first, then `/etc/apt/sources.list`;
/// `None` when neither names one.
pub fn host_mirror(etc_apt: &Path, suite: &str) -> Option<String> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(etc_apt.join("sources.list.d"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    sources.sort();
    for path in sources
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sources"))
    {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(m) = mirror_from_deb822(&text, suite) {
            return Some(m);
        }
    }
    let list = std::fs::read_to_string(etc_apt.join("sources.list")).unwrap_or_default();
    mirror_from_list(&list, suite)
}

/// The mirror base `name` (of `suite`) is made from: [`MIRROR_ENV`] if set,
/// else the host's apt sources, else an error naming the setting.
fn mirror(root: &Path, name: &str, suite: &str) -> Result<String, DockerError> {
    if let Some(m) = std::env::var(MIRROR_ENV)
        .ok()
        .filter(|m| !m.trim().is_empty())
    {
        return Ok(m.trim().to_string());
    }
    host_mirror(Path::new("/etc/apt"), suite).ok_or_else(|| DockerError::Base {
        name: name.to_string(),
        path: spec_path(root, name),
        reason: format!(
            "the host's apt sources (/etc/apt) name no Debian mirror for suite `{suite}`: \
             set {MIRROR_ENV} to the Debian archive to build from, or build with \
             --upstream-base on a daemon that can pull"
        ),
    })
}

fn mirror_from_deb822(text: &str, suite: &str) -> Option<String> {
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
                .map(|v| v.trim().to_string())
        };
        let is_deb = field("Types").is_some_and(|t| t.split_whitespace().any(|x| x == "deb"));
        let has_suite = field("Suites").is_some_and(|s| s.split_whitespace().any(|x| x == suite));
        if is_deb && has_suite {
            if let Some(uri) =
                field("URIs").and_then(|u| u.split_whitespace().next().map(str::to_string))
            {
                return Some(uri);
            }
        }
    }
    None
}

fn mirror_from_list(text: &str, suite: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace().filter(|w| !w.starts_with('['));
        (it.next()? == "deb").then_some(())?;
        let uri = it.next()?;
        (it.next()? == suite).then(|| uri.to_string())
    })
}

/// The hash (and so the tag) of a base: its yaml bytes and where it comes from.
pub fn inputs_hash(yaml: &[u8], source: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"fairground-base-v1\0");
    h.update(yaml);
    h.update([0]);
    h.update(source.as_bytes());
    hex::encode(h.finalize())
}

/// Resolve a manifest's `base`: `scratch` stays `scratch`; a name is built
/// when missing and its tag returned.
pub async fn resolve(
    docker: &Docker,
    base: &str,
    opts: &ImageOptions,
) -> anyhow::Result<(String, Option<ImageInfo>)> {
    if base == "scratch" {
        return Ok(("scratch".to_string(), None));
    }
    let info = ensure(docker, base, opts).await?;
    Ok((info.tag.clone(), Some(info)))
}

/// What base `name` would be built from, and so its tag, known without
/// Docker.
#[derive(Debug, Clone)]
pub struct BasePlan {
    /// The parsed `docker/bases/NAME.yaml`.
    pub spec: BaseSpec,
    /// The Debian mirror, or `upstream IMAGE`.
    pub source: String,
    /// The inputs hash.
    pub hash: String,
    /// `fairground/base-NAME:<12 hex>`.
    pub tag: String,
}

/// Plan base `name`: read its yaml, find its source, hash them.
pub fn plan(name: &str, opts: &ImageOptions) -> Result<BasePlan, DockerError> {
    let (spec, yaml) = load_spec(&opts.root, name)?;
    let source = match &opts.upstream_base {
        Some(up) => format!("upstream {up}"),
        None => mirror(&opts.root, name, &spec.suite)?,
    };
    let hash = inputs_hash(&yaml, &source);
    let tag = format!("fairground/base-{name}:{}", images::short(&hash));
    Ok(BasePlan {
        spec,
        source,
        hash,
        tag,
    })
}

/// Build (or reuse) base `name`.
pub async fn ensure(docker: &Docker, name: &str, opts: &ImageOptions) -> anyhow::Result<ImageInfo> {
    let BasePlan {
        spec,
        source,
        hash,
        tag,
    } = plan(name, opts)?;
    let finish = |id: String, size: Option<u64>, reused: bool| ImageInfo {
        kind: ImageKind::Base,
        name: name.to_string(),
        tag: tag.clone(),
        id,
        size_bytes: size,
        inputs_hash: hash.clone(),
        reused,
        versions: None,
        app_binary_bytes: None,
    };
    if let Some((id, size)) = images::existing(docker, &tag).await? {
        (opts.progress)(&format!("base {name} {tag}: up to date"));
        return Ok(finish(id, size, true));
    }
    let log = opts.log_dir.join(format!("base-{name}.log"));
    let _ = std::fs::remove_file(&log);
    match &opts.upstream_base {
        Some(up) => build_from_upstream(docker, name, &spec, up, &tag, &hash, &log, opts).await?,
        None => bootstrap(docker, name, &spec, &source, &tag, &hash, &log, opts).await?,
    }
    let (id, size) = images::existing(docker, &tag)
        .await?
        .ok_or_else(|| DockerError::Build {
            image: tag.clone(),
            what: format!("base {name}"),
            reason: "the import reported success but the image is not there".into(),
            log: log.clone(),
            tail: images::tail_file(&log, 30),
        })?;
    Ok(finish(id, size, false))
}

fn labels(name: &str, hash: &str, opts: &ImageOptions) -> Vec<(String, String)> {
    vec![
        (LABEL_KIND.into(), ImageKind::Base.as_str().into()),
        (LABEL_NAME.into(), name.into()),
        (LABEL_INPUTS.into(), hash.into()),
        (LABEL_RUN.into(), opts.run.0.clone()),
    ]
}

/// mmdebstrap → tar on stdout → streamed into the daemon's import.
#[allow(clippy::too_many_arguments)]
async fn bootstrap(
    docker: &Docker,
    name: &str,
    spec: &BaseSpec,
    mirror: &str,
    tag: &str,
    hash: &str,
    log: &Path,
    opts: &ImageOptions,
) -> anyhow::Result<()> {
    let fail = |reason: String| DockerError::Build {
        image: tag.to_string(),
        what: format!("base {name}"),
        reason,
        log: log.to_path_buf(),
        tail: images::tail_file(log, 30),
    };
    let mut log_file = images::open_log(log).map_err(fail)?;
    let mut args = vec!["--variant=minbase".to_string(), "--mode=auto".to_string()];
    if !spec.packages.is_empty() {
        args.push(format!("--include={}", spec.packages.join(",")));
    }
    // No apt lists or caches in the image: smaller, and nothing to fetch later.
    args.push("--aptopt=Acquire::Languages \"none\"".to_string());
    args.push(
        "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* \"$1\"/var/cache/apt/*.bin".to_string(),
    );
    args.extend([spec.suite.clone(), "-".to_string(), mirror.to_string()]);
    let _ = writeln!(log_file, "=== mmdebstrap {}", args.join(" "));
    (opts.progress)(&format!(
        "base {name} {tag}: mmdebstrap {} from {mirror} (log: {})",
        spec.packages.join(","),
        log.display()
    ));
    let mut child = tokio::process::Command::new("mmdebstrap")
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(
            log_file
                .try_clone()
                .map_err(|e| fail(format!("cannot share build log {}: {e}", log.display())))?,
        )
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot run mmdebstrap ({e}); install it: `make deps` or `apt-get install mmdebstrap`")))?;
    let stdout = child.stdout.take().expect("piped stdout");
    // Stream mmdebstrap's stdout (the root filesystem tar) into the import
    // without buffering the whole file system in memory.
    let body = futures_util::stream::unfold(Some(stdout), |state| async move {
        let mut out = state?;
        let mut buf = vec![0u8; 256 * 1024];
        match out.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), Some(out)))
            }
            // Report the error once, then end the stream.
            Err(e) => Some((Err(e), None)),
        }
    });
    let changes = labels(name, hash, opts)
        .into_iter()
        .map(|(k, v)| format!("LABEL {k}={v}"))
        .chain(["CMD [\"/bin/sh\"]".to_string()])
        .collect();
    let (repo, tag_part) = tag.split_once(':').expect("tag has a colon");
    let import_opts = CreateImageOptions {
        from_src: Some("-".into()),
        repo: Some(repo.into()),
        tag: Some(tag_part.into()),
        changes,
        message: Some(format!(
            "fairground base {name}: mmdebstrap {} from {mirror}",
            spec.suite
        )),
        ..Default::default()
    };
    let mut stream = docker.create_image(
        Some(import_opts),
        Some(bollard::body_try_stream(body)),
        None,
    );
    let mut import_err = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(s) = info.status {
                    let _ = writeln!(log_file, "import: {s}");
                }
            }
            Err(e) => {
                import_err = Some(e.to_string());
                break;
            }
        }
    }
    let status = child
        .wait()
        .await
        .map_err(|e| fail(format!("waiting for mmdebstrap: {e}")))?;
    if !status.success() || import_err.is_some() {
        // A failed bootstrap may still have produced a partial import: drop it.
        let _ = docker
            .remove_image(
                tag,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await;
        let reason = match import_err {
            Some(e) if status.success() => format!("docker import failed: {e}"),
            _ => format!("mmdebstrap failed ({status})"),
        };
        return Err(fail(reason).into());
    }
    Ok(())
}

/// `--upstream-base`: `FROM IMAGE` + apt-get install, with the network.
#[allow(clippy::too_many_arguments)]
async fn build_from_upstream(
    docker: &Docker,
    name: &str,
    spec: &BaseSpec,
    upstream: &str,
    tag: &str,
    hash: &str,
    log: &Path,
    opts: &ImageOptions,
) -> anyhow::Result<()> {
    let dockerfile = format!(
        "FROM {upstream}\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {} && rm -rf /var/lib/apt/lists/*\n",
        spec.packages.join(" ")
    );
    let mut ctx = images::Context::new();
    ctx.add_bytes("Dockerfile", dockerfile.as_bytes(), 0o644)?;
    (opts.progress)(&format!(
        "base {name} {tag}: FROM {upstream} (log: {})",
        log.display()
    ));
    images::build(
        docker,
        images::BuildRequest {
            tag,
            what: &format!("base {name} from {upstream}"),
            context: ctx.finish()?,
            labels: labels(name, hash, opts)
                .into_iter()
                .collect::<HashMap<_, _>>(),
            build_args: HashMap::new(),
            log,
            // The only build allowed to fetch: apt-get from the upstream image.
            network: "default",
        },
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_comes_from_deb822_sources_first() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir_all(d.join("sources.list.d")).unwrap();
        std::fs::write(
            d.join("sources.list.d/debian.sources"),
            "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n\
             Types: deb deb-src\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n",
        )
        .unwrap();
        std::fs::write(
            d.join("sources.list"),
            "deb http://old.example/debian bookworm main\n",
        )
        .unwrap();
        assert_eq!(
            host_mirror(d, "bookworm").as_deref(),
            Some("http://mirror.example/debian")
        );
    }

    #[test]
    fn mirror_falls_back_to_sources_list_and_no_address_is_built_in() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert_eq!(host_mirror(d, "bookworm"), None);
        std::fs::write(
            d.join("sources.list"),
            "# comment\ndeb [arch=amd64] http://list.example/debian bookworm main\n",
        )
        .unwrap();
        assert_eq!(
            host_mirror(d, "bookworm").as_deref(),
            Some("http://list.example/debian")
        );
    }

    #[test]
    fn spec_rejects_bad_package_names_and_names_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(BASES_DIR)).unwrap();
        std::fs::write(
            spec_path(tmp.path(), "x"),
            "suite: bookworm\npackages: [\"nginx; rm -rf\"]\n",
        )
        .unwrap();
        let err = load_spec(tmp.path(), "x").unwrap_err().to_string();
        assert!(
            err.contains("x.yaml") && err.contains("not a Debian package"),
            "{err}"
        );
        let err = load_spec(tmp.path(), "missing").unwrap_err().to_string();
        assert!(err.contains("add docker/bases/missing.yaml"), "{err}");
    }

    #[test]
    fn hash_changes_with_yaml_or_mirror() {
        let a = inputs_hash(b"suite: bookworm\n", "http://m1");
        assert_ne!(
            a,
            inputs_hash(b"suite: bookworm\npackages: [x]\n", "http://m1")
        );
        assert_ne!(a, inputs_hash(b"suite: bookworm\n", "http://m2"));
    }
}
