//! fairground's own `FROM scratch` image: finding the statically linked
//! binary to put in it, and building (or reusing) the image tagged by that
//! binary's hash.
//!
//! Must not build the binary itself (`make static` does) nor run it.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use bollard::Docker;

use super::context::{build, image_labels, BuildRequest, Context};
use super::{existing, finish_info, sha256_hex, short, ImageInfo, ImageKind, ImageOptions};
use crate::docker::error::DockerError;

/// Repository of fairground's own image.
pub const FAIRGROUND_REPO: &str = "fairground/fairground";
/// Where the binary lives inside the fairground image (its entrypoint).
pub const FAIRGROUND_IN_IMAGE: &str = "/fairground/fairground";
/// Env var naming a static fairground binary (set by `make test`).
pub const STATIC_BIN_ENV: &str = "FAIRGROUND_STATIC_BIN";

/// The Dockerfile of the fairground image.
pub const FAIRGROUND_DOCKERFILE: &str = "FROM scratch\n\
COPY fairground /fairground/fairground\n\
COPY versions.txt /fairground/versions.txt\n\
ENTRYPOINT [\"/fairground/fairground\"]\n";

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
        .join(super::STATIC_TARGET)
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

/// Build (or reuse) `fairground/fairground:<sha256 of the binary, 12 hex>`.
pub async fn ensure_fairground(docker: &Docker, opts: &ImageOptions) -> anyhow::Result<ImageInfo> {
    let bin = locate_static_binary(&opts.root)?;
    let bytes =
        std::fs::read(&bin).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", bin.display()))?;
    let hash = sha256_hex(&bytes);
    let tag = format!("{FAIRGROUND_REPO}:{}", short(&hash));
    let info = |reused| {
        finish_info(
            docker,
            ImageKind::Fairground,
            "fairground",
            &tag,
            &hash,
            reused,
            &opts.run,
        )
    };
    if existing(docker, &tag).await?.is_some() {
        (opts.progress)(&format!("fairground image {tag}: up to date"));
        return Ok(info(true).await?);
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
    Ok(info(false).await?)
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
    fn missing_static_binary_says_make_static() {
        let tmp = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let err = locate_static_binary_from(Some(exe.clone()), Some(exe), tmp.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("make static"), "{msg}");
        assert!(msg.contains("dynamically linked"), "{msg}");
    }
}
