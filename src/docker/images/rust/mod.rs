//! Rust frameworks (`prebuild: {cargo: {bin: B}}`): the static server
//! binary that goes into their `FROM scratch` image, built without running
//! any of the framework's code on the host.
//!
//! Split by where it runs:
//! - `host`: find the toolchain, `cargo fetch --locked` (downloads and
//!   unpacks crates; compiles and runs nothing) and `cargo metadata` for
//!   `versions.txt`;
//! - `sandbox`: `cargo build --release --frozen` in a build container with
//!   no network, as an unprivileged user, everything read-only but the
//!   framework's own cache volume.
//!
//! The build image is base [`BUILD_BASE`] (`docker/bases/rust-build.yaml`:
//! gcc and static glibc from Debian, made with mmdebstrap like every base);
//! the toolchain is the host's, mounted read-only (Debian's rustc is too old
//! for the frameworks' crates, and no other toolchain can be downloaded).

pub mod host;
pub mod sandbox;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use bollard::Docker;
use sha2::{Digest, Sha256};

use super::{ImageOptions, STATIC_RUSTFLAGS};
use crate::docker::bases;
use crate::framework::Framework;
pub use host::Toolchain;

/// The base image Rust frameworks are compiled in.
pub const BUILD_BASE: &str = "rust-build";

/// Everything a Rust framework's binary is built from, known before building
/// (hashed into the image tag).
#[derive(Debug, Clone)]
pub struct RustPlan {
    /// Framework name.
    pub framework: String,
    /// The framework's folder, absolute.
    pub dir: PathBuf,
    /// Binary target.
    pub bin: String,
    /// The toolchain mounted into the build container.
    pub toolchain: Toolchain,
    /// The tag the build base has (or will have once built).
    pub build_image: String,
}

impl RustPlan {
    /// Plan the build of `bin` of `fw`. Errors name the folder, the
    /// toolchain or the base description that is missing.
    pub fn new(fw: &Framework, bin: &str, opts: &ImageOptions) -> anyhow::Result<Self> {
        let dir = absolute_dir(&fw.dir).with_context(|| format!("framework {}", fw.name()))?;
        let toolchain = Toolchain::host()
            .with_context(|| format!("framework {}: finding the Rust toolchain", fw.name()))?;
        let build_image = bases::plan(BUILD_BASE, opts)
            .with_context(|| format!("framework {}: its build image", fw.name()))?
            .tag;
        Ok(RustPlan {
            framework: fw.name().to_string(),
            dir,
            bin: bin.to_string(),
            toolchain,
            build_image,
        })
    }

    /// Feed what decides the binary into an inputs hash (the folder itself
    /// is hashed by the caller).
    pub fn hash_into(&self, h: &mut Sha256) {
        for part in [
            self.bin.as_str(),
            self.toolchain.version.as_str(),
            STATIC_RUSTFLAGS,
            self.build_image.as_str(),
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
    }
}

/// `dir` resolved to an absolute path without symlinks: the bind mount
/// source, whatever the current directory. The error names the folder.
pub fn absolute_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let abs = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve folder {}", dir.display()))?;
    anyhow::ensure!(
        abs.join("Cargo.toml").is_file(),
        "{} has no Cargo.toml, but its manifest asks for a cargo prebuild",
        abs.display()
    );
    Ok(abs)
}

/// What the build produced for the image context.
#[derive(Debug)]
pub struct Built {
    /// The static binary (`app` in the context).
    pub app: Vec<u8>,
    /// `versions.txt`.
    pub versions: String,
}

/// Build `plan`: the build base when missing, `cargo fetch` on the host,
/// the compile in a build container. Output goes to `log`; `tag` is the
/// framework image being built (for errors).
pub async fn build(
    docker: &Docker,
    plan: &RustPlan,
    tag: &str,
    opts: &ImageOptions,
    log: &Path,
) -> anyhow::Result<Built> {
    let name = &plan.framework;
    let base = bases::ensure(docker, BUILD_BASE, opts)
        .await
        .with_context(|| format!("framework {name}: its build image"))?;
    let unreadable =
        host::unreadable_by_others(&plan.dir).with_context(|| format!("framework {name}"))?;
    if !unreadable.is_empty() {
        let list: Vec<String> = unreadable.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!(
            "framework {name}: the build container compiles as an unprivileged user ({}), which cannot read these in {}: {}; make them readable: `chmod -R o+rX {}`",
            sandbox::BUILD_USER,
            plan.dir.display(),
            list.join(", "),
            plan.dir.display()
        );
    }
    let cargo_home = host::cargo_home(&opts.root).with_context(|| format!("framework {name}"))?;
    let mut log_file =
        super::context::open_log(log).map_err(|e| anyhow::anyhow!("framework {name}: {e}"))?;
    let _ = writeln!(
        log_file,
        "=== cargo fetch on the host ({}; downloads and unpacks crates into fairground's cargo home {}, compiles and runs nothing)",
        plan.toolchain.cargo().display(),
        cargo_home.display()
    );
    (opts.progress)(&format!(
        "framework {name}: cargo fetch (log: {})",
        log.display()
    ));
    host::fetch(&plan.toolchain, &cargo_home, &plan.dir, &log_file)
        .await
        .with_context(|| {
            format!(
                "framework {name}: fetching crates\nfull log: {}\n--- last lines ---\n{}",
                log.display(),
                super::tail_file(log, super::TAIL_LINES)
            )
        })?;
    host::make_readable(&cargo_home).with_context(|| format!("framework {name}"))?;
    (opts.progress)(&format!(
        "framework {name}: cargo build in a build container (network none, unprivileged; log: {})",
        log.display()
    ));
    let spec = sandbox::CompileSpec {
        framework: name.clone(),
        source: plan.dir.clone(),
        project: opts.root.canonicalize().with_context(|| {
            format!(
                "framework {name}: cannot resolve the project root {}",
                opts.root.display()
            )
        })?,
        bin: plan.bin.clone(),
        toolchain: plan.toolchain.sysroot.clone(),
        cargo_home: cargo_home.clone(),
        image: base.tag,
        run: opts.run.clone(),
    };
    let app = sandbox::compile(docker, &spec, tag, log, &mut log_file).await?;
    let versions = host::versions(&plan.toolchain, &cargo_home, &plan.dir)
        .await
        .with_context(|| format!("framework {name}: reading crate versions"))?;
    Ok(Built { app, versions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_cargo_less_folder_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let err = format!("{:#}", absolute_dir(&tmp.path().join("gone")).unwrap_err());
        assert!(err.contains("gone"), "{err}");
        let err = format!("{:#}", absolute_dir(tmp.path()).unwrap_err());
        assert!(
            err.contains(&tmp.path().canonicalize().unwrap().display().to_string())
                && err.contains("no Cargo.toml"),
            "{err}"
        );
    }

    #[test]
    fn relative_folders_become_absolute() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("Cargo.toml"), "").unwrap();
        // Up from the current directory to `/`, then down to the folder.
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        let mut rel = PathBuf::new();
        for _ in cwd.components().skip(1) {
            rel.push("..");
        }
        let abs = tmp.path().canonicalize().unwrap();
        rel.push(abs.strip_prefix("/").unwrap());
        assert!(rel.is_relative());
        assert_eq!(absolute_dir(&rel).unwrap(), abs);
    }
}
