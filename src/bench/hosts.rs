//! A run across Docker hosts (profile `hosts:`): one engine per endpoint,
//! images carried from the building daemon to each that lacks them, the
//! daemons' clocks read, and the [`Topology`] the results record.
//!
//! Connects and copies images; starts no container (the lab does).

use std::time::Instant;

use anyhow::Context;

use super::docker_lab::Spread;
use crate::docker::container::{ContainerSpec, Role, HOST_NETWORK};
use crate::docker::engine::{BuiltImages, DockerEngine};
use crate::docker::images::ImageOptions;
use crate::docker::remote;
use crate::docker::RunId;
use crate::preflight::EnvReport;
use crate::profile::hosts::{Endpoint, Hosts};
use crate::profile::Network;
use crate::results::{CarriedImage, DaemonClock, HostCheck, HostPreflight, Topology};

/// The daemons of a multi-host run.
pub struct HostEngines {
    /// One engine per distinct endpoint, the server's first.
    engines: Vec<DockerEngine>,
    /// Each engine's daemon id.
    ids: Vec<String>,
    /// Index into `engines` of each loader.
    loaders: Vec<usize>,
    /// The IPv4 address loaders reach the server at, and how it was chosen.
    server_address: (String, &'static str),
}

impl HostEngines {
    /// Connect to every endpoint of `hosts`; any that does not answer
    /// stops the run (exit code 4) naming it.
    pub async fn connect(hosts: &Hosts, opts: &ImageOptions) -> anyhow::Result<Self> {
        let all: Vec<&Endpoint> = hosts.all();
        let mut engines = Vec::new();
        let mut ids = Vec::new();
        for e in &all {
            let engine = DockerEngine::for_endpoint(e, opts.clone()).await?;
            ids.push(remote::daemon_id(engine.docker()).await?);
            engines.push(engine);
        }
        let loaders = hosts
            .loaders
            .iter()
            .map(|l| all.iter().position(|e| *e == l).unwrap_or(0))
            .collect();
        let (address, source) = hosts.server_address();
        let ip = resolve_ipv4(&address)?;
        Ok(HostEngines {
            engines,
            ids,
            loaders,
            server_address: (ip, source),
        })
    }

    /// The server's engine.
    pub fn server(&self) -> &DockerEngine {
        &self.engines[0]
    }

    /// Every engine (each daemon once).
    pub fn all(&self) -> &[DockerEngine] {
        &self.engines
    }

    /// The lab's view: each loader's engine and endpoint.
    pub fn spread(&self) -> Spread<'_, DockerEngine> {
        Spread {
            loaders: self
                .loaders
                .iter()
                .map(|&i| (&self.engines[i], self.engines[i].endpoint().to_string()))
                .collect(),
            server_address: self.server_address.0.clone(),
            same_as_server: self
                .loaders
                .iter()
                .map(|&i| self.ids[i] == self.ids[0])
                .collect(),
        }
    }

    /// Carry the images each daemon needs from `build` (where they were
    /// built): fairground's to every daemon (loader, readiness probe), the
    /// frameworks' to the server's. A daemon that is `build` itself, or
    /// that holds the same image id already, is skipped.
    pub async fn carry(
        &self,
        build: &DockerEngine,
        images: &BuiltImages,
    ) -> anyhow::Result<Vec<CarriedImage>> {
        let build_id = remote::daemon_id(build.docker()).await?;
        let progress = build.options().progress.clone();
        let mut out = Vec::new();
        for (i, engine) in self.engines.iter().enumerate() {
            engine.use_fairground_image(&images.fairground.tag);
            if self.ids[i] == build_id {
                continue;
            }
            let mut tags = vec![images.fairground.tag.clone()];
            if i == 0 {
                tags.extend(images.frameworks.values().map(|f| f.tag.clone()));
            }
            for tag in tags {
                let c = remote::carry_image(
                    build.docker(),
                    engine.docker(),
                    &tag,
                    engine.endpoint(),
                    progress.as_ref(),
                )
                .await
                .with_context(|| format!("carrying images to {}", engine.endpoint()))?;
                if c.skipped {
                    progress(&format!("{} already has {tag}", engine.endpoint()));
                }
                out.push(CarriedImage {
                    endpoint: engine.endpoint().to_string(),
                    tag: c.tag,
                    id: c.id,
                    bytes: c.bytes,
                    seconds: c.seconds,
                    skipped: c.skipped,
                });
            }
        }
        Ok(out)
    }

    /// Each daemon's clock against this machine's (`docker info`'s
    /// `SystemTime`, taken at the request's midpoint).
    pub async fn clocks(&self) -> Vec<DaemonClock> {
        let mut out = Vec::new();
        for e in &self.engines {
            let asked = Instant::now();
            let before = chrono::Utc::now();
            let Ok(info) = e.docker().info().await else {
                continue;
            };
            let rtt = asked.elapsed();
            let Some(t) = info
                .system_time
                .as_deref()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            else {
                continue;
            };
            let mid = before + chrono::Duration::from_std(rtt / 2).unwrap_or_default();
            let offset = t.with_timezone(&chrono::Utc) - mid;
            out.push(DaemonClock {
                endpoint: e.endpoint().to_string(),
                offset_ms: offset.num_microseconds().unwrap_or(0) as f64 / 1e3,
                round_trip_ms: rtt.as_secs_f64() * 1e3,
            });
        }
        out
    }

    /// Preflight on every daemon that is not `local` (this machine's,
    /// judged by the run's own preflight): fairground's image runs
    /// `fairground preflight --json` there, on the host's network stack
    /// with its /proc and /sys bound read-only, and the daemon's leftovers
    /// (containers of other fairground runs) are counted through its API.
    /// The Docker checks of the report are dropped: inside the container
    /// there is no daemon to ask; the leftovers count stands in.
    pub async fn preflight(&self, run: &RunId, local: &DockerEngine) -> Vec<HostPreflight> {
        let local_id = remote::daemon_id(local.docker()).await.unwrap_or_default();
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for (i, engine) in self.engines.iter().enumerate() {
            if self.ids[i] == local_id || seen.contains(&self.ids[i]) {
                continue;
            }
            seen.push(self.ids[i].clone());
            let endpoint = engine.endpoint().to_string();
            let mut checks = match preflight_there(engine, run, &self.server_address.0).await {
                Ok(report) => report
                    .checks
                    .into_iter()
                    .filter(|c| c.family != crate::preflight::Family::Docker)
                    .map(|c| HostCheck {
                        id: c.id,
                        verdict: c.verdict.to_string().to_lowercase(),
                        measured: c.measured,
                    })
                    .collect(),
                Err(e) => vec![HostCheck {
                    id: "preflight".into(),
                    verdict: "fail".into(),
                    measured: format!("could not run there: {e:#}"),
                }],
            };
            checks.push(leftovers(engine, run).await);
            let verdict = ["fail", "warn"]
                .into_iter()
                .find(|v| checks.iter().any(|c| c.verdict.eq_ignore_ascii_case(v)))
                .unwrap_or("pass")
                .to_string();
            out.push(HostPreflight {
                endpoint,
                verdict,
                checks,
            });
        }
        out
    }

    /// What the results record about these hosts.
    pub fn topology(&self, network: Network) -> Topology {
        Topology {
            server: self.server().endpoint().to_string(),
            loaders: self
                .loaders
                .iter()
                .map(|&i| self.engines[i].endpoint().to_string())
                .collect(),
            server_address: self.server_address.0.clone(),
            server_address_source: self.server_address.1.to_string(),
            traffic_path: match network {
                Network::Bridge => "published port".into(),
                Network::Host => "host network".into(),
            },
            loader_network: "host network of each loader's host".into(),
            server_resources: if self.server().is_local() {
                "cgroup files".into()
            } else {
                "Docker stats API".into()
            },
            images: Vec::new(),
            clocks: Vec::new(),
            preflight: Vec::new(),
        }
    }
}

/// `address` as an IPv4 address (the loader is a static binary handed IP
/// addresses only); host names are resolved here.
fn resolve_ipv4(address: &str) -> anyhow::Result<String> {
    if address.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(address.to_string());
    }
    use std::net::ToSocketAddrs;
    (address, 0)
        .to_socket_addrs()
        .with_context(|| format!("resolving the server address `{address}`"))?
        .find(|a| a.is_ipv4())
        .map(|a| a.ip().to_string())
        .ok_or_else(|| anyhow::anyhow!("the server address `{address}` has no IPv4 address"))
}

/// How long the preflight container on another host may take.
const PREFLIGHT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// `fairground preflight --json` in fairground's image on `engine`'s host.
async fn preflight_there(
    engine: &DockerEngine,
    run: &RunId,
    server_address: &str,
) -> anyhow::Result<EnvReport> {
    let image = engine
        .fairground_image()
        .ok_or_else(|| anyhow::anyhow!("fairground's image is not on {}", engine.endpoint()))?;
    let mut spec = ContainerSpec::new(
        run,
        Role::Probe,
        format!(
            "{}-preflight-{:04x}",
            run.name_prefix(),
            rand::random::<u16>()
        ),
        image,
    );
    spec.network = Some(HOST_NETWORK.to_string());
    spec.read_only_rootfs = true;
    spec.binds = vec!["/proc:/host/proc:ro".into(), "/sys:/host/sys:ro".into()];
    spec.cmd = vec![
        "preflight".into(),
        "--json".into(),
        "--root".into(),
        "/host".into(),
        "--run-id".into(),
        run.as_str().into(),
        // The NIC check judges the interface the route to the server takes
        // (on the server's host: the one holding its address).
        "--traffic-to".into(),
        server_address.into(),
    ];
    let out = engine.run_collect(&spec, PREFLIGHT_TIMEOUT, None).await?;
    serde_json::from_str(&out.stdout).with_context(|| {
        let tail: String = out
            .stderr
            .chars()
            .rev()
            .take(300)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("no preflight report (exit {}): {tail}", out.exit_code)
    })
}

/// Containers of other fairground runs on `engine`'s daemon.
async fn leftovers(engine: &DockerEngine, run: &RunId) -> HostCheck {
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![crate::docker::LABEL_RUN.to_string()],
    )]);
    let listed = engine
        .docker()
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await;
    match listed {
        Ok(list) => {
            let others: Vec<String> = list
                .into_iter()
                .filter(|c| {
                    c.labels
                        .as_ref()
                        .and_then(|l| l.get(crate::docker::LABEL_RUN))
                        .is_some_and(|r| r != run.as_str())
                })
                .filter_map(|c| c.names.and_then(|n| n.into_iter().next()))
                .collect();
            HostCheck {
                id: "docker.leftovers".into(),
                verdict: if others.is_empty() { "pass" } else { "warn" }.into(),
                measured: if others.is_empty() {
                    "no container of another fairground run".into()
                } else {
                    format!(
                        "{} container(s) of other fairground runs: {} (`fairground clean --profile` removes them)",
                        others.len(),
                        others.join(", ")
                    )
                },
            }
        }
        Err(e) => HostCheck {
            id: "docker.leftovers".into(),
            verdict: "warn".into(),
            measured: format!("could not list containers: {e}"),
        },
    }
}
