//! Build contexts and classic-builder builds: which files of a folder go into
//! an image (and into its inputs hash), the in-memory tar context, and one
//! `docker build` streamed into a log file.
//!
//! Must not decide what an image contains beyond the folder it is given, and
//! never builds with the network unless the caller says so
//! ([`BuildRequest::network`]).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use bollard::query_parameters::BuildImageOptions;
use bollard::Docker;
use futures_util::StreamExt;
use sha2::Sha256;

use super::{ImageKind, TAIL_LINES};
use crate::docker::error::DockerError;
use crate::docker::{RunId, LABEL_INPUTS, LABEL_KIND, LABEL_NAME, LABEL_RUN};

/// Files of a build context folder, sorted, skipping `target/` and `.git`
/// (cargo output and history never belong in an image context). Symbolic
/// links are skipped too: what they point at is not the folder's to ship.
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
    use sha2::Digest;
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

    /// Add every context file of `dir` (see [`context_files`]). The error
    /// names the file that could not be read.
    pub fn add_dir(&mut self, dir: &Path) -> std::io::Result<()> {
        let named = |path: &Path, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
        };
        for rel in context_files(dir).map_err(|e| named(dir, e))? {
            let path = dir.join(&rel);
            let mode = {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(&path)
                    .map_err(|e| named(&path, e))?
                    .permissions()
                    .mode()
                    & 0o777
            };
            let bytes = std::fs::read(&path).map_err(|e| named(&path, e))?;
            self.add_bytes(&rel.to_string_lossy(), &bytes, mode)?;
        }
        Ok(())
    }

    /// The tar bytes.
    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        self.builder.into_inner()
    }
}

/// The Dockerfile fairground builds from: the context's `Dockerfile` with
/// the image's labels appended in one `LABEL` instruction.
pub const LABELLED_DOCKERFILE: &str = ".fairground.Dockerfile";

/// `context` (a tar) with [`LABELLED_DOCKERFILE`] added: its `Dockerfile`
/// and one `LABEL` line carrying every label. The classic builder turns
/// each label passed through the API into a step of its own, and on a
/// daemon whose storage diffs layers by walking them (fuse-overlayfs, vfs)
/// every step on a large base costs seconds: four labels were four steps.
pub fn labelled(context: &[u8], labels: &HashMap<String, String>) -> std::io::Result<Vec<u8>> {
    let mut out = tar::Builder::new(Vec::new());
    let mut dockerfile = None;
    let mut archive = tar::Archive::new(context);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes)?;
        if path == Path::new("Dockerfile") {
            dockerfile = Some(bytes.clone());
        }
        let mut h = entry.header().clone();
        out.append_data(&mut h, &path, bytes.as_slice())?;
    }
    let mut text = dockerfile.ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no Dockerfile in the context")
    })?;
    if !labels.is_empty() {
        let mut sorted: Vec<(&String, &String)> = labels.iter().collect();
        sorted.sort();
        let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let line: Vec<String> = sorted
            .into_iter()
            .map(|(k, v)| format!("{}={}", quote(k), quote(v)))
            .collect();
        if !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(format!("LABEL {}\n", line.join(" ")).as_bytes());
    }
    let mut h = tar::Header::new_gnu();
    h.set_size(text.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    out.append_data(&mut h, LABELLED_DOCKERFILE, text.as_slice())?;
    out.into_inner()
}

/// Last `n` lines of a file (for error messages).
pub fn tail_file(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The labels of an image fairground builds.
pub(super) fn image_labels(
    kind: ImageKind,
    name: &str,
    hash: &str,
    run: &RunId,
) -> HashMap<String, String> {
    HashMap::from([
        (LABEL_KIND.to_string(), kind.as_str().to_string()),
        (LABEL_NAME.to_string(), name.to_string()),
        (LABEL_INPUTS.to_string(), hash.to_string()),
        (LABEL_RUN.to_string(), run.0.clone()),
    ])
}

/// Open `log` for appending, creating its folder; the error names the path.
pub(crate) fn open_log(log: &Path) -> Result<std::fs::File, String> {
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create log folder {}: {e}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open build log {}: {e}", log.display()))
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
    let mut log = open_log(req.log).map_err(fail)?;
    let _ = writeln!(log, "=== docker build -t {} ({})", req.tag, req.what);
    let context = labelled(&req.context, &req.labels)
        .map_err(|e| fail(format!("reading the build context: {e}")))?;
    let opts = BuildImageOptions {
        t: Some(req.tag.to_string()),
        dockerfile: LABELLED_DOCKERFILE.to_string(),
        rm: true,
        forcerm: true,
        buildargs: Some(req.build_args.clone()),
        networkmode: Some(req.network.to_string()),
        ..Default::default()
    };
    let mut stream = docker.build_image(opts, None, Some(bollard::body_full(context.into())));
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

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    #[test]
    fn labels_go_into_one_label_instruction_after_the_dockerfile() {
        let mut ctx = Context::new();
        ctx.add_bytes("Dockerfile", b"FROM scratch\nCOPY app /app", 0o644)
            .unwrap();
        ctx.add_bytes("app", b"binary", 0o755).unwrap();
        let labels = HashMap::from([
            ("fairground.run".to_string(), "fg-1".to_string()),
            (
                "fairground.kind".to_string(),
                "a \"quoted\" \\ value".to_string(),
            ),
        ]);
        let tar = labelled(&ctx.finish().unwrap(), &labels).unwrap();
        let mut files = std::collections::BTreeMap::new();
        for e in tar::Archive::new(tar.as_slice()).entries().unwrap() {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mode = e.header().mode().unwrap();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut e, &mut text).unwrap();
            files.insert(name, (mode, text));
        }
        // The context is kept as it was, modes included.
        assert_eq!(files["app"], (0o755, "binary".to_string()));
        assert_eq!(files["Dockerfile"].1, "FROM scratch\nCOPY app /app");
        assert_eq!(
            files[LABELLED_DOCKERFILE].1,
            "FROM scratch\nCOPY app /app\n\
             LABEL \"fairground.kind\"=\"a \\\"quoted\\\" \\\\ value\" \"fairground.run\"=\"fg-1\"\n"
        );
        // A context without a Dockerfile says so.
        let e = labelled(&Context::new().finish().unwrap(), &labels).unwrap_err();
        assert!(e.to_string().contains("no Dockerfile"), "{e}");
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
    fn unreadable_context_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Context::new()
            .add_dir(&tmp.path().join("nosuch"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nosuch"), "{err}");
    }

    #[test]
    fn log_that_cannot_be_opened_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let err = open_log(&file.join("sub/fw.log")).unwrap_err();
        assert!(
            err.contains(&file.join("sub").display().to_string()),
            "{err}"
        );
    }
}
