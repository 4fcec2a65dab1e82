//! Docker: is the daemon reachable, which version and drivers, are memory
//! and swap limits enforced, and which containers are already running.
//!
//! Facts are gathered once by [`gather`] (bollard, version negotiated down
//! to the daemon's API, a short timeout) into [`DockerFacts`]; fixtures
//! supply `DockerFacts` directly. This file only reads: it never stops or
//! removes a container, not even a leftover of an earlier run.

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::ListContainersOptionsBuilder;
use serde::{Deserialize, Serialize};

use super::{Check, CheckStatus, Env, Family, Judgement};

/// Label every fairground object carries: its run id.
pub const RUN_LABEL: &str = "fairground.run";

/// What the Docker daemon said.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DockerFacts {
    /// Whether the daemon answered.
    pub reachable: bool,
    /// Why it did not, when it did not.
    pub error: Option<String>,
    /// Server version (`20.10.24+dfsg1`).
    pub server_version: Option<String>,
    /// API version in use after negotiation (`1.41`).
    pub api_version: Option<String>,
    /// Storage driver (`overlay2`, `fuse-overlayfs`).
    pub storage_driver: Option<String>,
    /// Cgroup driver (`cgroupfs`, `systemd`).
    pub cgroup_driver: Option<String>,
    /// Cgroup version the daemon uses (`1`, `2`).
    pub cgroup_version: Option<String>,
    /// Whether memory limits are enforced (info `MemoryLimit`).
    pub memory_limit: Option<bool>,
    /// Whether swap limits are enforced (info `SwapLimit`).
    pub swap_limit: Option<bool>,
    /// Warnings from `docker info`.
    pub warnings: Vec<String>,
    /// Every container, running or not.
    pub containers: Vec<ContainerFact>,
}

/// One container on the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerFact {
    /// Short id (12 hex digits).
    pub id: String,
    /// Name, without the leading slash.
    pub name: String,
    /// Whether it is running (it can use CPU).
    pub running: bool,
    /// Its `fairground.run` label, if it has one.
    pub run_label: Option<String>,
}

impl DockerFacts {
    /// Facts for a daemon that could not be asked.
    pub fn unreachable(why: impl Into<String>) -> Self {
        Self {
            reachable: false,
            error: Some(why.into()),
            ..Self::default()
        }
    }
}

/// Ask the daemon (`DOCKER_HOST` or the local socket), giving up after `timeout`.
pub async fn gather(timeout: Duration) -> DockerFacts {
    match tokio::time::timeout(timeout, ask()).await {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => DockerFacts::unreachable(format!("{e}")),
        Err(_) => DockerFacts::unreachable(format!("no answer within {} ms", timeout.as_millis())),
    }
}

/// [`gather`] on a runtime of its own (for callers without one).
pub fn gather_blocking(timeout: Duration) -> DockerFacts {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(gather(timeout)),
        Err(e) => DockerFacts::unreachable(format!("cannot start a tokio runtime: {e}")),
    }
}

async fn ask() -> Result<DockerFacts, bollard::errors::Error> {
    let docker = bollard::Docker::connect_with_defaults()?
        .negotiate_version()
        .await?;
    let version = docker.version().await?;
    let info = docker.info().await?;
    let listed = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default().all(true).build(),
        ))
        .await?;
    let containers = listed
        .into_iter()
        .map(|c| {
            let labels: HashMap<String, String> = c.labels.unwrap_or_default();
            ContainerFact {
                id: c.id.unwrap_or_default().chars().take(12).collect(),
                name: c
                    .names
                    .and_then(|n| n.into_iter().next())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                running: c.state.is_some_and(|s| s.to_string() == "running"),
                run_label: labels.get(RUN_LABEL).cloned(),
            }
        })
        .collect();
    let text = |s: Option<String>| s.filter(|s| !s.is_empty());
    Ok(DockerFacts {
        reachable: true,
        error: None,
        server_version: version.version,
        api_version: Some(docker.client_version().to_string()),
        storage_driver: info.driver,
        cgroup_driver: text(info.cgroup_driver.map(|d| d.to_string())),
        cgroup_version: text(info.cgroup_version.map(|d| d.to_string())),
        memory_limit: info.memory_limit,
        swap_limit: info.swap_limit,
        warnings: info.warnings.unwrap_or_default(),
        containers,
    })
}

fn not_reached(env: &Env<'_>) -> String {
    format!(
        "daemon not reachable: {}",
        env.docker.error.as_deref().unwrap_or("unknown error")
    )
}

fn names(list: &[&ContainerFact]) -> String {
    const SHOWN: usize = 5;
    let mut s = list
        .iter()
        .take(SHOWN)
        .map(|c| match &c.run_label {
            Some(r) => format!("{} ({}, run {r})", c.name, c.id),
            None => format!("{} ({})", c.name, c.id),
        })
        .collect::<Vec<_>>()
        .join(", ");
    if list.len() > SHOWN {
        s.push_str(&format!(" and {} more", list.len() - SHOWN));
    }
    s
}

/// `docker.daemon`: reachable, server and API version, storage driver.
pub struct DockerDaemon;

impl Check for DockerDaemon {
    fn id(&self) -> &'static str {
        "docker.daemon"
    }
    fn family(&self) -> Family {
        Family::Docker
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "every server and the loader run in containers: without the daemon nothing runs";
        let threshold = "daemon answers (API version negotiated down to the daemon's)";
        let remedy = "start the daemon (systemctl start docker / dockerd) or set DOCKER_HOST";
        let d = env.docker;
        if !d.reachable {
            return Judgement::new(CheckStatus::Fail, not_reached(env), threshold, why, remedy);
        }
        Judgement::new(
            CheckStatus::Pass,
            format!(
                "server {}, API {}, storage driver {}",
                d.server_version.as_deref().unwrap_or("?"),
                d.api_version.as_deref().unwrap_or("?"),
                d.storage_driver.as_deref().unwrap_or("?")
            ),
            threshold,
            why,
            remedy,
        )
    }
}

/// `docker.cgroup`: the daemon's cgroup driver and version (recorded).
pub struct DockerCgroup;

impl Check for DockerCgroup {
    fn id(&self) -> &'static str {
        "docker.cgroup"
    }
    fn family(&self) -> Family {
        Family::Docker
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "the probe reads memory and CPU from the containers' cgroups, whose paths and \
                   files depend on the driver and the version";
        let threshold = "recorded; warn when the daemon does not say";
        let remedy =
            "a daemon that does not report its cgroup driver is too old for fairground's probe";
        let d = env.docker;
        if !d.reachable {
            return Judgement::new(CheckStatus::Warn, not_reached(env), threshold, why, remedy);
        }
        match (&d.cgroup_driver, &d.cgroup_version) {
            (Some(drv), Some(v)) => Judgement::new(
                CheckStatus::Pass,
                format!("driver {drv}, cgroup v{v}"),
                threshold,
                why,
                remedy,
            ),
            (drv, v) => Judgement::new(
                CheckStatus::Warn,
                format!(
                    "driver {}, version {}",
                    drv.as_deref().unwrap_or("not reported"),
                    v.as_deref().unwrap_or("not reported")
                ),
                threshold,
                why,
                remedy,
            ),
        }
    }
}

/// `docker.limits`: whether memory and swap limits are enforced.
pub struct DockerLimits;

impl Check for DockerLimits {
    fn id(&self) -> &'static str {
        "docker.limits"
    }
    fn family(&self) -> Family {
        Family::Docker
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why =
            "a memory limit the kernel does not enforce is no limit: frameworks then compete \
                   with different memory than the profile says; without swap limits a container \
                   at its limit swaps instead of being stopped";
        let threshold = "MemoryLimit true (fail otherwise), SwapLimit true (warn otherwise)";
        let remedy = "enable the memory cgroup controller (cgroup_enable=memory swapaccount=1 on \
                      the kernel command line, or cgroup v2)";
        let d = env.docker;
        if !d.reachable {
            return Judgement::new(CheckStatus::Warn, not_reached(env), threshold, why, remedy);
        }
        let show = |b: Option<bool>| b.map_or("not reported".to_string(), |b| b.to_string());
        let verdict = if d.memory_limit != Some(true) {
            CheckStatus::Fail
        } else if d.swap_limit != Some(true) {
            CheckStatus::Warn
        } else {
            CheckStatus::Pass
        };
        let mut measured = format!(
            "MemoryLimit {}, SwapLimit {}",
            show(d.memory_limit),
            show(d.swap_limit)
        );
        if !d.warnings.is_empty() {
            measured.push_str(&format!("; daemon warnings: {}", d.warnings.join(" / ")));
        }
        Judgement::new(verdict, measured, threshold, why, remedy)
    }
}

/// `docker.leftovers`: fairground containers of earlier runs.
pub struct DockerLeftovers;

impl Check for DockerLeftovers {
    fn id(&self) -> &'static str {
        "docker.leftovers"
    }
    fn family(&self) -> Family {
        Family::Docker
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "a server or loader left running by an earlier run keeps serving or loading and \
                   steals CPU from this one";
        let threshold = format!(
            "no running container labelled {RUN_LABEL} other than this run's (stopped ones warn)"
        );
        let remedy = format!(
            "remove them once their run is surely over: docker rm -f $(docker ps -aq --filter label={RUN_LABEL}=<run id>)"
        );
        let d = env.docker;
        if !d.reachable {
            return Judgement::new(CheckStatus::Warn, not_reached(env), threshold, why, remedy);
        }
        let current = env.input.run_id.as_deref();
        let left: Vec<&ContainerFact> = d
            .containers
            .iter()
            .filter(|c| c.run_label.is_some() && c.run_label.as_deref() != current)
            .collect();
        let running: Vec<&ContainerFact> = left.iter().copied().filter(|c| c.running).collect();
        let stopped: Vec<&ContainerFact> = left.iter().copied().filter(|c| !c.running).collect();
        let (verdict, measured) = if !running.is_empty() {
            (
                CheckStatus::Fail,
                format!(
                    "{} running: {}; {} stopped",
                    running.len(),
                    names(&running),
                    stopped.len()
                ),
            )
        } else if !stopped.is_empty() {
            (
                CheckStatus::Warn,
                format!(
                    "none running; {} stopped: {}",
                    stopped.len(),
                    names(&stopped)
                ),
            )
        } else {
            (CheckStatus::Pass, "none".to_string())
        };
        Judgement::new(verdict, measured, threshold, why, remedy)
    }
}

/// `docker.others`: running containers that are not fairground's.
pub struct DockerOthers;

impl Check for DockerOthers {
    fn id(&self) -> &'static str {
        "docker.others"
    }
    fn family(&self) -> Family {
        Family::Docker
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "other running containers share the host's CPUs, memory and network with the run";
        let threshold = "no other running container (warn)";
        let remedy =
            "stop them for the run if they are yours; otherwise run when the host is quiet";
        let d = env.docker;
        if !d.reachable {
            return Judgement::new(CheckStatus::Warn, not_reached(env), threshold, why, remedy);
        }
        let others: Vec<&ContainerFact> = d
            .containers
            .iter()
            .filter(|c| c.running && c.run_label.is_none())
            .collect();
        if others.is_empty() {
            Judgement::new(CheckStatus::Pass, "none", threshold, why, remedy)
        } else {
            Judgement::new(
                CheckStatus::Warn,
                format!("{} running: {}", others.len(), names(&others)),
                threshold,
                why,
                remedy,
            )
        }
    }
}

/// The checks of this family.
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![
        Box::new(DockerDaemon),
        Box::new(DockerCgroup),
        Box::new(DockerLimits),
        Box::new(DockerLeftovers),
        Box::new(DockerOthers),
    ]
}
