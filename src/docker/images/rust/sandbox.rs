//! The compile of a Rust framework, in a build container: no network, an
//! unprivileged user, no capabilities, a read-only root, the framework's
//! folder, the toolchain and the fetched crates mounted read-only. Writable:
//! the cargo target dir, in a named volume of that framework's own (kept:
//! the cache), and `/tmp`, an anonymous volume removed with the container,
//! where the compiled binary is copied and read back through the archive
//! API.
//!
//! Everything the framework's `build.rs` and proc macros do happens here;
//! this module must never run any of it on the host, and must give the
//! container nothing writable that the host or another framework reads
//! (the cache volume is read back only for this framework's binary).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptions, KillContainerOptions, LogsOptions, StartContainerOptions,
    WaitContainerOptions,
};
use bollard::Docker;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::super::{files, STATIC_RUSTFLAGS, STATIC_TARGET};
use crate::docker::error::{ApiContext, DockerError};
use crate::docker::{RunId, KIND_CARGO_CACHE, LABEL_KIND, LABEL_NAME, LABEL_ROLE, LABEL_RUN};

/// User and group the compile runs as (`nobody:nogroup` in Debian): owns
/// nothing in the image, cannot write the read-only mounts.
pub const BUILD_USER: &str = "65534:65534";
/// The `fairground.role` label of build containers.
pub const ROLE_BUILD: &str = "build";
/// Where the toolchain is mounted (read-only).
pub const TOOLCHAIN_IN: &str = "/fairground/rust";
/// Where the framework's folder is mounted (read-only).
pub const SOURCE_IN: &str = "/fairground/src";
/// `CARGO_HOME` in the container: a tmpfs for cargo's lock files, with the
/// `registry/` and `git/` of fairground's cargo home (where the host fetched
/// the crates) mounted read-only inside it.
pub const CARGO_HOME_IN: &str = "/fairground/cargo-home";
/// Where the cache volume is mounted. It must be a directory of the image
/// with mode 1777: Docker gives a new, empty named volume the owner and mode
/// of the image's directory it is mounted on, which is how an unprivileged
/// user gets a writable volume without a root step. Debian's `/var/tmp` is
/// such a directory (and is meant for temporary files that persist).
pub const CACHE_IN: &str = "/var/tmp";
/// `CARGO_TARGET_DIR` in the container, inside the cache volume.
pub const TARGET_IN: &str = "/var/tmp/target";
/// Where the binary is copied at the end of the compile: an anonymous
/// volume on the image's `/tmp` (mode 1777, copied up like the cache), so
/// the file read back is this container's own even when another build of a
/// framework of the same name (a test's copy) shares the cache volume.
pub const OUTPUT_IN: &str = "/tmp/fairground-app";
/// Longest a compile may take before it is killed.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(3600);

/// One compile: what to mount and build.
#[derive(Debug, Clone)]
pub struct CompileSpec {
    /// Framework name (labels, container and volume names, errors).
    pub framework: String,
    /// The framework's folder, absolute.
    pub source: PathBuf,
    /// The project root, absolute: with the name, it keys the cache volume.
    pub project: PathBuf,
    /// The binary target to build.
    pub bin: String,
    /// The toolchain's sysroot, absolute.
    pub toolchain: PathBuf,
    /// fairground's cargo home, absolute (its `registry/` and `git/` are
    /// mounted when they exist).
    pub cargo_home: PathBuf,
    /// The build image (gcc and static glibc).
    pub image: String,
    /// The run building; labels the container and a new volume.
    pub run: RunId,
}

impl CompileSpec {
    /// The cargo cache volume of this framework (see [`cache_volume`]).
    pub fn cache_volume(&self) -> String {
        cache_volume(&self.framework, &self.project)
    }

    /// The compile, as one shell line (`/bin/sh -c`): cargo, then a copy of
    /// the binary to [`OUTPUT_IN`]. The binary name comes through the
    /// environment (`FAIRGROUND_BIN`), never spliced into the line.
    pub fn script(&self) -> String {
        // --frozen: --locked and --offline; the crates were fetched on the
        // host, and there is no network to look for others.
        format!(
            "cargo build --release --frozen --target {STATIC_TARGET} --bin \"$FAIRGROUND_BIN\" \
             && cp \"{TARGET_IN}/{STATIC_TARGET}/release/$FAIRGROUND_BIN\" {OUTPUT_IN}"
        )
    }

    /// The container's name.
    pub fn container_name(&self) -> String {
        format!("{}-build-{}", self.run.name_prefix(), self.framework)
    }

    /// The create body: every restriction of the build container is here.
    pub fn to_create_body(&self) -> ContainerCreateBody {
        let bind = |source: &Path, target: &str| Mount {
            typ: Some(MountType::BIND),
            source: Some(source.display().to_string()),
            target: Some(target.to_string()),
            read_only: Some(true),
            ..Default::default()
        };
        let volume = |source: Option<String>, target: &str| Mount {
            typ: Some(MountType::VOLUME),
            source,
            target: Some(target.to_string()),
            read_only: Some(false),
            ..Default::default()
        };
        let mut mounts = vec![
            bind(&self.source, SOURCE_IN),
            bind(&self.toolchain, TOOLCHAIN_IN),
            volume(Some(self.cache_volume()), CACHE_IN),
            // Anonymous: removed with the container.
            volume(None, "/tmp"),
        ];
        // A project without dependencies leaves no registry to mount.
        for sub in ["registry", "git"] {
            let dir = self.cargo_home.join(sub);
            if dir.is_dir() {
                mounts.push(bind(&dir, &format!("{CARGO_HOME_IN}/{sub}")));
            }
        }
        let env = [
            ("PATH", format!("{TOOLCHAIN_IN}/bin:/usr/bin:/bin")),
            ("HOME", "/tmp".to_string()),
            ("TMPDIR", "/tmp".to_string()),
            ("CARGO_HOME", CARGO_HOME_IN.to_string()),
            ("CARGO_TARGET_DIR", TARGET_IN.to_string()),
            (
                "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
                STATIC_RUSTFLAGS.to_string(),
            ),
            // cargo's cache cleaner would try to delete from the read-only
            // registry.
            ("CARGO_CACHE_AUTO_CLEAN_FREQUENCY", "never".to_string()),
            ("CARGO_TERM_COLOR", "never".to_string()),
            ("FAIRGROUND_BIN", self.bin.clone()),
        ]
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
        ContainerCreateBody {
            image: Some(self.image.clone()),
            cmd: Some(vec!["/bin/sh".into(), "-c".into(), self.script()]),
            env: Some(env),
            user: Some(BUILD_USER.to_string()),
            working_dir: Some(SOURCE_IN.to_string()),
            labels: Some(HashMap::from([
                (LABEL_RUN.to_string(), self.run.0.clone()),
                (LABEL_ROLE.to_string(), ROLE_BUILD.to_string()),
            ])),
            network_disabled: Some(true),
            host_config: Some(HostConfig {
                network_mode: Some("none".to_string()),
                mounts: Some(mounts),
                tmpfs: Some(HashMap::from([(
                    CARGO_HOME_IN.to_string(),
                    "rw,noexec,nosuid,nodev,size=64m,mode=1777".to_string(),
                )])),
                readonly_rootfs: Some(true),
                cap_drop: Some(vec!["ALL".to_string()]),
                security_opt: Some(vec!["no-new-privileges:true".to_string()]),
                init: Some(false),
                ..Default::default()
            }),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        }
    }
}

/// The cargo cache volume of framework `name` built by the project at
/// `project` (absolute): `fairground-cargo-NAME-<8 hex of the project
/// path>`. One per framework, so no framework's build script can touch
/// another's cache; one per checkout, so checkouts sharing a daemon never
/// share one; copies of a framework under the same name (tests) share it,
/// which keeps their number bounded.
pub fn cache_volume(name: &str, project: &Path) -> String {
    let digest = Sha256::digest(project.as_os_str().as_encoded_bytes());
    format!("fairground-cargo-{name}-{}", &hex::encode(digest)[..8])
}

/// Compile `spec` in a build container, streaming cargo's output into
/// `log`; returns the binary. The container is removed however it ends;
/// the cache volume stays (it is what makes the next build incremental).
/// `tag` and the log name the failure.
pub async fn compile(
    docker: &Docker,
    spec: &CompileSpec,
    tag: &str,
    log: &Path,
    log_file: &mut std::fs::File,
) -> Result<Vec<u8>, DockerError> {
    let what = format!("framework {}", spec.framework);
    let fail = |reason: String| DockerError::Build {
        image: tag.to_string(),
        what: what.clone(),
        reason,
        log: log.to_path_buf(),
        tail: super::super::tail_file(log, super::super::TAIL_LINES),
    };
    ensure_volume(docker, spec).await?;
    let name = spec.container_name();
    let _ = writeln!(
        log_file,
        "=== build container {name} (image {}, network none, user {BUILD_USER}, cache volume {}): {}",
        spec.image,
        spec.cache_volume(),
        spec.script()
    );
    let created = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.clone()),
                ..Default::default()
            }),
            spec.to_create_body(),
        )
        .await
        .map_err(|e| {
            fail(format!(
                "cannot create build container {name}: {e} (its mounts are host paths: {}, {}, {}; the Docker daemon must run on this machine)",
                spec.source.display(),
                spec.toolchain.display(),
                spec.cargo_home.display()
            ))
        })?;
    let result = run(docker, &created.id, &name, spec, log_file).await;
    files::force_remove(docker, &created.id).await;
    let _ = log_file.flush();
    result.map_err(fail)
}

/// Start, follow, wait, read the binary; `Err` is the reason of a failure.
async fn run(
    docker: &Docker,
    id: &str,
    name: &str,
    spec: &CompileSpec,
    log_file: &mut std::fs::File,
) -> Result<Vec<u8>, String> {
    docker
        .start_container(id, None::<StartContainerOptions>)
        .await
        .map_err(|e| format!("cannot start build container {name}: {e}"))?;
    let followed = tokio::time::timeout(BUILD_TIMEOUT, async {
        let mut logs = docker.logs(
            id,
            Some(LogsOptions {
                follow: true,
                stdout: true,
                stderr: true,
                tail: "all".into(),
                ..Default::default()
            }),
        );
        while let Some(Ok(item)) = logs.next().await {
            let _ = log_file.write_all(&item.into_bytes());
        }
        // The log stream ends when the container stops; a non-zero exit
        // comes back as an error item, the code is read from inspect below.
        let _ = docker
            .wait_container(id, None::<WaitContainerOptions>)
            .next()
            .await;
    })
    .await;
    if followed.is_err() {
        let _ = docker
            .kill_container(
                id,
                Some(KillContainerOptions {
                    signal: "KILL".into(),
                }),
            )
            .await;
        return Err(format!(
            "the compile in build container {name} did not finish within {} min; it was killed",
            BUILD_TIMEOUT.as_secs() / 60
        ));
    }
    let state = docker
        .inspect_container(id, None)
        .await
        .map_err(|e| format!("inspecting build container {name}: {e}"))?
        .state
        .unwrap_or_default();
    if state.oom_killed == Some(true) {
        return Err(format!(
            "build container {name} was OOM-killed by the kernel"
        ));
    }
    let code = state.exit_code.unwrap_or(-1);
    if code != 0 {
        return Err(format!(
            "`{}` in build container {name} (network none, user {BUILD_USER}) exited with code {code}",
            spec.script()
        ));
    }
    files::read_bytes_from_container(docker, id, &format!("build container {name}"), OUTPUT_IN)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!("the compile finished but build container {name} has no {OUTPUT_IN}")
        })
}

/// Create the cache volume when missing (creating an existing named volume
/// returns it unchanged).
async fn ensure_volume(docker: &Docker, spec: &CompileSpec) -> Result<(), DockerError> {
    let name = spec.cache_volume();
    docker
        .create_volume(VolumeCreateRequest {
            name: Some(name.clone()),
            labels: Some(HashMap::from([
                (LABEL_KIND.to_string(), KIND_CARGO_CACHE.to_string()),
                (LABEL_NAME.to_string(), spec.framework.clone()),
                (LABEL_RUN.to_string(), spec.run.0.clone()),
            ])),
            ..Default::default()
        })
        .await
        .doing(|| format!("creating cargo cache volume {name}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cargo_home: &Path) -> CompileSpec {
        CompileSpec {
            framework: "demo".into(),
            source: PathBuf::from("/src/frameworks/demo"),
            project: PathBuf::from("/src"),
            bin: "demo-app".into(),
            toolchain: PathBuf::from("/opt/rust"),
            cargo_home: cargo_home.to_path_buf(),
            image: "fairground/base-rust-build:0123456789ab".into(),
            run: RunId("fg-test".into()),
        }
    }

    #[test]
    fn build_container_has_no_network_no_privilege_and_only_the_cache_writable() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("registry")).unwrap();
        let body = spec(home.path()).to_create_body();
        let hc = body.host_config.clone().unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(body.user.as_deref(), Some(BUILD_USER));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
        let mounts = hc.mounts.unwrap();
        let writable: Vec<_> = mounts
            .iter()
            .filter(|m| m.read_only != Some(true))
            .map(|m| (m.typ, m.source.clone(), m.target.clone().unwrap()))
            .collect();
        assert_eq!(
            writable,
            vec![
                (
                    Some(MountType::VOLUME),
                    Some(cache_volume("demo", Path::new("/src"))),
                    CACHE_IN.to_string()
                ),
                (Some(MountType::VOLUME), None, "/tmp".to_string()),
            ],
            "only the named cache and an anonymous /tmp are writable"
        );
        let targets: Vec<_> = mounts.iter().filter_map(|m| m.target.clone()).collect();
        assert!(targets.contains(&format!("{CARGO_HOME_IN}/registry")));
        // No git checkouts on this "host": nothing mounted for them.
        assert!(!targets.contains(&format!("{CARGO_HOME_IN}/git")));
        let cmd = body.cmd.unwrap().join(" ");
        assert!(cmd.contains("--frozen") && cmd.contains(OUTPUT_IN), "{cmd}");
        assert!(body
            .env
            .unwrap()
            .contains(&"FAIRGROUND_BIN=demo-app".to_string()));
        assert_eq!(
            body.labels.unwrap().get(LABEL_ROLE).map(String::as_str),
            Some(ROLE_BUILD)
        );
    }

    #[test]
    fn cache_volume_is_per_framework_and_checkout() {
        let a = cache_volume("hyper", Path::new("/work/main"));
        assert!(a.starts_with("fairground-cargo-hyper-"), "{a}");
        assert_ne!(a, cache_volume("hyper", Path::new("/work/wt")));
        assert_ne!(a, cache_volume("axum", Path::new("/work/main")));
        assert_eq!(a, cache_volume("hyper", Path::new("/work/main")));
    }
}
