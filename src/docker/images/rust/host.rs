//! The host side of a Rust framework build: which toolchain to mount, where
//! the crates are, `cargo fetch` (downloads and unpacks crates) and `cargo
//! metadata` (reads the resolved versions for `versions.txt`).
//!
//! Must not compile or run anything from the framework's folder. That
//! shapes every command here:
//! - the toolchain's own `cargo` and `rustc` are called by absolute path, so
//!   no rustup proxy reads the folder's `rust-toolchain.toml` (whose `path`
//!   key can name a "toolchain" inside the folder);
//! - cargo runs from `/` with `--manifest-path`, because cargo reads
//!   `.cargo/config.toml` from its working directory upwards, not from the
//!   manifest's folder: run inside the folder, a `build.rustc-wrapper` there
//!   would run on the host (`cargo metadata --filter-platform` and `cargo
//!   fetch` both ask rustc about the target);
//! - `RUSTC` is the toolchain's rustc and the wrappers are switched off.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context as _;

use super::super::STATIC_TARGET;

/// The Rust toolchain fairground mounts read-only into build containers:
/// the host's, as rustup (or any install) laid it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// Its sysroot (`rustc --print sysroot`, symlinks resolved): holds
    /// `bin/cargo`, `bin/rustc` and `lib/rustlib/<target>`.
    pub sysroot: PathBuf,
    /// `rustc -V` of it, e.g. `rustc 1.95.0 (…)`: part of the inputs hash.
    pub version: String,
}

impl Toolchain {
    /// The toolchain `rustc` on `PATH` resolves to, asked from `/` so that no
    /// project's `rust-toolchain.toml` picks it.
    pub fn host() -> anyhow::Result<Self> {
        let out = std::process::Command::new("rustc")
            .args(["--print", "sysroot"])
            .current_dir("/")
            .output()
            .context("cannot run `rustc --print sysroot` to find the Rust toolchain; install one with rustup")?;
        if !out.status.success() {
            anyhow::bail!(
                "`rustc --print sysroot` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let printed = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Self::at(&printed)
    }

    /// The toolchain whose sysroot is `sysroot`; checks it has what a build
    /// needs and names what is missing.
    pub fn at(sysroot: &Path) -> anyhow::Result<Self> {
        let sysroot = sysroot.canonicalize().with_context(|| {
            format!(
                "Rust toolchain sysroot {}: cannot resolve it",
                sysroot.display()
            )
        })?;
        let tc = Toolchain {
            sysroot,
            version: String::new(),
        };
        for tool in [tc.cargo(), tc.rustc()] {
            anyhow::ensure!(
                tool.is_file(),
                "Rust toolchain {}: no {}; fairground mounts a whole toolchain (rustup's layout) into the build container",
                tc.sysroot.display(),
                tool.display()
            );
        }
        let std_dir = tc
            .sysroot
            .join("lib/rustlib")
            .join(STATIC_TARGET)
            .join("lib");
        anyhow::ensure!(
            std_dir.is_dir(),
            "Rust toolchain {}: no standard library for {STATIC_TARGET} ({} is missing); run `rustup target add {STATIC_TARGET}`",
            tc.sysroot.display(),
            std_dir.display()
        );
        let out = std::process::Command::new(tc.rustc())
            .arg("-V")
            .current_dir("/")
            .output()
            .with_context(|| format!("cannot run {} -V", tc.rustc().display()))?;
        anyhow::ensure!(
            out.status.success(),
            "{} -V failed ({}): {}",
            tc.rustc().display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(Toolchain {
            version: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            ..tc
        })
    }

    /// `bin/cargo` of the toolchain.
    pub fn cargo(&self) -> PathBuf {
        self.sysroot.join("bin/cargo")
    }

    /// `bin/rustc` of the toolchain.
    pub fn rustc(&self) -> PathBuf {
        self.sysroot.join("bin/rustc")
    }

    /// `X.Y.Z` of `rustc X.Y.Z (…)`.
    pub fn short_version(&self) -> &str {
        self.version.split_whitespace().nth(1).unwrap_or("unknown")
    }

    /// The toolchain's cargo, set up to read nothing from the framework's
    /// folder but its manifest (see the module doc).
    fn cargo_command(&self, cargo_home: &Path) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(self.cargo());
        cmd.current_dir("/")
            .env("CARGO_HOME", cargo_home)
            .env("RUSTC", self.rustc())
            .env("RUSTC_WRAPPER", "")
            .env("RUSTC_WORKSPACE_WRAPPER", "")
            .env("CARGO_TERM_COLOR", "never")
            .kill_on_drop(true);
        cmd
    }
}

/// Where framework crates are fetched, under the project root:
/// fairground's own cargo home, not the user's `~/.cargo`. Build containers
/// mount its `registry/` and `git/`, so they see only crates fetched for
/// frameworks (never the user's other or private crates, nor their
/// credentials), and fairground may make its files readable to the build
/// user (see [`make_readable`]).
pub const CARGO_HOME_DIR: &str = "target/fairground-cargo-home";

/// fairground's cargo home for the project at `root`, absolute (cargo runs
/// from `/` here, so a relative path would move).
pub fn cargo_home(root: &Path) -> anyhow::Result<PathBuf> {
    let home = root.join(CARGO_HOME_DIR);
    std::path::absolute(&home).with_context(|| format!("cargo home {}", home.display()))
}

/// Give "others" read access (and search access on folders) to everything
/// under `cargo_home`'s `registry/` and `git/`. Crate archives carry their
/// authors' file modes (fnv 1.0.7 ships `lib.rs` as 0640) and cargo keeps
/// them, so the unprivileged build user could not read some sources. Only
/// fairground's own cargo home is touched; returns how many modes changed.
pub fn make_readable(cargo_home: &Path) -> anyhow::Result<usize> {
    use std::os::unix::fs::PermissionsExt;
    fn walk(path: &Path, changed: &mut usize) -> anyhow::Result<()> {
        let meta = std::fs::symlink_metadata(path)
            .with_context(|| format!("reading the mode of {}", path.display()))?;
        if meta.file_type().is_symlink() {
            return Ok(());
        }
        let mode = meta.permissions().mode();
        let want = if meta.is_dir() {
            mode | 0o005
        } else {
            mode | 0o004
        };
        if want != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(want))
                .with_context(|| format!("making {} readable", path.display()))?;
            *changed += 1;
        }
        if meta.is_dir() {
            for e in
                std::fs::read_dir(path).with_context(|| format!("listing {}", path.display()))?
            {
                walk(
                    &e.with_context(|| format!("listing {}", path.display()))?
                        .path(),
                    changed,
                )?;
            }
        }
        Ok(())
    }
    let mut changed = 0;
    for sub in ["registry", "git"] {
        let dir = cargo_home.join(sub);
        if dir.exists() {
            walk(&dir, &mut changed)?;
        }
    }
    Ok(changed)
}

/// Files and folders under `dir` (the framework's folder, as
/// [`context_files`](super::super::context_files) sees it) that "others"
/// cannot read: the build user could not either. Paths are relative.
pub fn unreadable_by_others(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use std::os::unix::fs::PermissionsExt;
    let files =
        super::super::context_files(dir).with_context(|| format!("listing {}", dir.display()))?;
    let mut bad = Vec::new();
    let mut folders = std::collections::BTreeSet::from([PathBuf::new()]);
    for rel in &files {
        folders.extend(rel.ancestors().skip(1).map(Path::to_path_buf));
        let mode = std::fs::metadata(dir.join(rel))
            .with_context(|| format!("reading the mode of {}", dir.join(rel).display()))?
            .permissions()
            .mode();
        if mode & 0o004 == 0 {
            bad.push(rel.clone());
        }
    }
    for rel in folders {
        let path = dir.join(&rel);
        let mode = std::fs::metadata(&path)
            .with_context(|| format!("reading the mode of {}", path.display()))?
            .permissions()
            .mode();
        if mode & 0o005 != 0o005 {
            bad.push(if rel.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                rel
            });
        }
    }
    bad.sort();
    Ok(bad)
}

/// `cargo fetch --locked` of the project at `dir` (absolute), for the static
/// target only: downloads and unpacks the crates its Cargo.lock names into
/// `cargo_home`, compiles and runs nothing. Output goes to `log`.
pub async fn fetch(
    tc: &Toolchain,
    cargo_home: &Path,
    dir: &Path,
    log: &std::fs::File,
) -> anyhow::Result<()> {
    let manifest = dir.join("Cargo.toml");
    let output = || {
        log.try_clone()
            .context("sharing the build log with cargo fetch")
    };
    let status = tc
        .cargo_command(cargo_home)
        .args([
            "fetch",
            "--locked",
            "--target",
            STATIC_TARGET,
            "--manifest-path",
        ])
        .arg(&manifest)
        .stdin(Stdio::null())
        .stdout(output()?)
        .stderr(output()?)
        .status()
        .await
        .with_context(|| format!("cannot run {}", tc.cargo().display()))?;
    anyhow::ensure!(
        status.success(),
        "`cargo fetch --locked --manifest-path {}` failed ({status}): a Cargo.lock that needs updating, or a crate that cannot be downloaded",
        manifest.display()
    );
    Ok(())
}

/// `name version` of the direct (normal) dependencies of the project at
/// `dir` (absolute), from `cargo metadata --offline` (after [`fetch`]), then
/// `rustc X.Y.Z`.
pub async fn versions(tc: &Toolchain, cargo_home: &Path, dir: &Path) -> anyhow::Result<String> {
    let manifest = dir.join("Cargo.toml");
    let out = tc
        .cargo_command(cargo_home)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--offline",
            "--filter-platform",
            STATIC_TARGET,
            "--manifest-path",
        ])
        .arg(&manifest)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {}", tc.cargo().display()))?;
    anyhow::ensure!(
        out.status.success(),
        "`cargo metadata --manifest-path {}` failed ({}): {}",
        manifest.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("cargo metadata of {}: not JSON", manifest.display()))?;
    let mut lines = direct_dependencies(&meta);
    lines.push(format!("rustc {}", tc.short_version()));
    Ok(lines.join("\n") + "\n")
}

/// `name version` of the root package's normal dependencies, sorted.
fn direct_dependencies(meta: &serde_json::Value) -> Vec<String> {
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
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_dependencies_are_the_roots_normal_ones() {
        let meta = serde_json::json!({
            "packages": [
                {"id": "app 0.1.0", "name": "app", "version": "0.1.0"},
                {"id": "tokio 1.0.0", "name": "tokio", "version": "1.0.0"},
                {"id": "cc 1.2.0", "name": "cc", "version": "1.2.0"},
                {"id": "bytes 1.5.0", "name": "bytes", "version": "1.5.0"}
            ],
            "resolve": {"root": "app 0.1.0", "nodes": [
                {"id": "app 0.1.0", "deps": [
                    {"pkg": "tokio 1.0.0", "dep_kinds": [{"kind": null}]},
                    {"pkg": "cc 1.2.0", "dep_kinds": [{"kind": "build"}]}
                ]},
                {"id": "tokio 1.0.0", "deps": [
                    {"pkg": "bytes 1.5.0", "dep_kinds": [{"kind": null}]}
                ]}
            ]}
        });
        assert_eq!(direct_dependencies(&meta), vec!["tokio 1.0.0"]);
    }

    #[test]
    fn crate_files_become_readable_and_unreadable_sources_are_listed() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        let tmp = tempfile::tempdir().unwrap();
        let krate = tmp.path().join("registry/src/index/fnv-1.0.7");
        std::fs::create_dir_all(&krate).unwrap();
        std::fs::write(krate.join("lib.rs"), "").unwrap();
        set(&krate.join("lib.rs"), 0o640);
        set(&krate, 0o750);
        assert_eq!(make_readable(tmp.path()).unwrap(), 2);
        assert_eq!(mode(&krate.join("lib.rs")), 0o644);
        assert_eq!(mode(&krate), 0o755);
        assert_eq!(
            make_readable(tmp.path()).unwrap(),
            0,
            "nothing left to change"
        );

        let fw = tmp.path().join("fw");
        std::fs::create_dir_all(fw.join("src")).unwrap();
        std::fs::write(fw.join("Cargo.toml"), "").unwrap();
        std::fs::write(fw.join("src/main.rs"), "").unwrap();
        assert!(unreadable_by_others(&fw).unwrap().is_empty());
        set(&fw.join("src/main.rs"), 0o600);
        set(&fw.join("src"), 0o700);
        assert_eq!(
            unreadable_by_others(&fw).unwrap(),
            vec![PathBuf::from("src"), PathBuf::from("src/main.rs")]
        );
    }

    #[test]
    fn a_folder_that_is_no_toolchain_is_named_with_what_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let err = format!("{:#}", Toolchain::at(tmp.path()).unwrap_err());
        assert!(err.contains(&tmp.path().display().to_string()), "{err}");
        assert!(err.contains("bin/cargo"), "{err}");
        let err = format!(
            "{:#}",
            Toolchain::at(&tmp.path().join("nosuch")).unwrap_err()
        );
        assert!(err.contains("nosuch"), "{err}");
    }

    /// The reason cargo runs from `/`: a framework's `.cargo/config.toml`
    /// naming a rustc wrapper must not run on the host when fairground asks
    /// cargo about the framework.
    #[tokio::test]
    async fn cargo_metadata_never_runs_a_wrapper_from_the_framework_folder() {
        let Ok(tc) = Toolchain::host() else {
            eprintln!("!!! SKIPPING: no Rust toolchain on PATH");
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("fw");
        let marker = tmp.path().join("wrapper-ran");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join(".cargo")).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"fw\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
        )
        .unwrap();
        std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
        let wrapper = dir.join("wrapper.sh");
        std::fs::write(
            &wrapper,
            format!("#!/bin/sh\ntouch {}\nexec \"$@\"\n", marker.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            dir.join(".cargo/config.toml"),
            format!("[build]\nrustc-wrapper = \"{}\"\n", wrapper.display()),
        )
        .unwrap();
        // A lock file for a project without dependencies, as `--locked` wants.
        std::fs::write(
            dir.join("Cargo.lock"),
            "version = 4\n\n[[package]]\nname = \"fw\"\nversion = \"0.1.0\"\n",
        )
        .unwrap();
        let home = tmp.path().join("cargo-home");
        let versions = versions(&tc, &home, &dir).await.unwrap();
        assert!(versions.starts_with("rustc "), "{versions}");
        assert!(
            !marker.exists(),
            "cargo ran the framework's rustc-wrapper on the host"
        );
    }
}
