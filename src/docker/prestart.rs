//! Readiness measured from before the server exists ([`Engine::start_ready`]
//! on the real daemon).
//!
//! The prober container (`fairground ready --every 1ms --hold`) is started
//! first, on the run's network; the server container is then started in the
//! prober's network namespace (`--network container:<prober>`), so the
//! prober polls `127.0.0.1:PORT` from before the server's process exists:
//! refused connects on loopback, 1 ms apart, until the server answers 200.
//! No address has to be known in advance and nothing depends on ARP (an
//! address polled before its container exists would be re-resolved only
//! once a second). The namespace, its address on the run network and its
//! sysctls (the profile's, set on the prober's container) are the server's
//! for its whole life; the prober sleeps in it until both are removed
//! together ([`Handle::companion`]).
//!
//! Cold start = the prober's clock at the first whole 200 − the server's
//! `State.StartedAt` (both the host's realtime clock, ns).
//!
//! [`Engine::start_ready`]: super::engine::Engine::start_ready

use std::time::{Duration, Instant};

use super::container::{is_joined, joined_network, ContainerSpec, Role, HOST_NETWORK};
use super::daemon::DockerEngine;
use super::daemon::{cold_start_ms, host_port};
use super::engine::{Engine, Handle, Readiness, ReadyCheck, ReadyStart};
use super::error::DockerError;
use super::RunId;
use crate::roles::ready::{ReadyReport, PRESTART_EVERY};

/// Memory of the prober container: a static binary polling one socket.
const PROBER_MEMORY: u64 = 64 << 20;

/// How long after its own timeout a prober may take to say so.
const PROBER_GRACE: Duration = Duration::from_secs(30);

/// Cold start in ms from the first 200 (unix ns) and the container's
/// `State.StartedAt` (RFC 3339, ns), rounded to the ms. Docker stamps
/// `StartedAt` when the runtime reports the process started, a little after
/// its exec: a server answering sooner than that reads 0, never negative.
pub fn cold_start_ms_ns(started_at: &str, first_200_unix_ns: u64) -> Option<i64> {
    let started = chrono::DateTime::parse_from_rfc3339(started_at)
        .ok()?
        .timestamp_nanos_opt()?;
    let ns = first_200_unix_ns as i64 - started;
    Some(((ns as f64 / 1e6).round() as i64).max(0))
}

impl DockerEngine {
    /// [`Engine::start_ready`]: prober first, then the server in its network
    /// namespace (on the host's network, both on the host's).
    pub(super) async fn start_prestarted(
        &self,
        spec: &ContainerSpec,
        check: &ReadyCheck,
    ) -> anyhow::Result<ReadyStart> {
        let net = spec
            .network
            .clone()
            .filter(|n| !is_joined(n))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "server {} needs the run's network or the host's to be probed",
                    spec.name
                )
            })?;
        let on_host = net == HOST_NETWORK;
        let asked = Instant::now();
        let mut probe = ContainerSpec::new(
            &spec.run,
            Role::Probe,
            format!("{}-ready", spec.name),
            self.fairground_tag().await?,
        );
        probe.network = Some(net.clone());
        probe.read_only_rootfs = true;
        probe.limits.memory_bytes = Some(PROBER_MEMORY);
        if !on_host {
            // The namespace the server joins is the prober's: the profile's
            // sysctls are set there.
            probe.sysctls = spec.sysctls.clone();
            // And its ports: a published port (loaders on other hosts) is
            // the namespace owner's to publish.
            probe.publish = spec.publish;
        }
        probe.cmd = vec![
            "ready".into(),
            "--url".into(),
            format!("http://127.0.0.1:{}{}", check.port, check.path),
            "--timeout".into(),
            format!("{}ms", check.timeout.as_millis()),
            "--every".into(),
            format!("{}ms", PRESTART_EVERY.as_millis()),
            "--hold".into(),
        ];
        let probe_id = self.create_and_start(&probe).await?;
        let mut server_id = None;
        let result = self
            .probed(spec, check, &probe, &probe_id, asked, &mut server_id)
            .await;
        if result.is_err() {
            if let Some(id) = server_id {
                let _ = self.force_remove(&id).await;
            }
            let _ = self.force_remove(&probe_id).await;
        }
        result
    }

    /// The rest of [`Self::start_prestarted`] once the prober runs; the
    /// server's id goes to `server_id` as soon as it exists, for cleanup.
    async fn probed(
        &self,
        spec: &ContainerSpec,
        check: &ReadyCheck,
        probe: &ContainerSpec,
        probe_id: &str,
        asked: Instant,
        server_id: &mut Option<String>,
    ) -> anyhow::Result<ReadyStart> {
        let net = probe.network.as_deref().unwrap_or(HOST_NETWORK);
        let on_host = net == HOST_NETWORK;
        let (ip, published_port) = if on_host {
            (Some("127.0.0.1".to_string()), spec.publish)
        } else {
            let settings = self.inspect(probe_id).await?.network_settings;
            let ip = settings
                .as_ref()
                .and_then(|n| n.networks.as_ref())
                .and_then(|n| n.get(net).and_then(|e| e.ip_address.clone()))
                .filter(|ip| !ip.is_empty());
            let published = probe
                .publish
                .and_then(|port| host_port(settings.as_ref(), port));
            (ip, published)
        };
        let ip =
            ip.ok_or_else(|| anyhow::anyhow!("prober {} has no address on {net}", probe.name))?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let follower = self.follow(probe_id, true, tx);
        let mut server = spec.clone();
        if !on_host {
            server.network = Some(joined_network(probe_id));
            server.sysctls = Default::default();
            server.publish = None;
        }
        let id = self.create_and_start(&server).await?;
        *server_id = Some(id.clone());
        let started = Instant::now();
        let state = self.inspect(&id).await?.state.unwrap_or_default();
        let handle = Handle {
            id,
            name: spec.name.clone(),
            role: spec.role,
            network: Some(net.to_string()),
            ip: Some(ip.clone()),
            pid: state.pid.filter(|&p| p > 0).map(|p| p as u32),
            started_at: state.started_at,
            published_port,
            companion: Some(probe_id.to_string()),
        };
        let wait = check.timeout + PROBER_GRACE;
        let report = tokio::time::timeout(wait, async {
            while let Some(line) = rx.recv().await {
                if let Ok(r) = serde_json::from_str::<ReadyReport>(&line) {
                    return Some(r);
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let readiness_wait = started.elapsed();
        follower.abort();
        let url = format!("http://{ip}:{}{}", check.port, check.path);
        match report {
            Some(ReadyReport {
                ready: true,
                first_200_unix_ms: Some(ms),
                first_200_unix_ns,
                attempts,
                ..
            }) => {
                let ns = first_200_unix_ns.unwrap_or(ms * 1_000_000);
                Ok(ReadyStart {
                    readiness: Readiness {
                        url,
                        first_200_unix_ms: ms,
                        attempts,
                        cold_start_ms: handle
                            .started_at
                            .as_deref()
                            .and_then(|s| cold_start_ms_ns(s, ns)),
                        cold_start_is_upper_bound: attempts <= 1,
                    },
                    handle,
                    start: started - asked,
                    readiness_wait,
                })
            }
            other => {
                let tail = self.tail(&handle.id, 100).await.unwrap_or_default();
                let mut said = match other {
                    Some(r) => serde_json::to_string(&r).unwrap_or_default(),
                    None => self.tail(probe_id, 20).await.unwrap_or_default(),
                };
                if let Some(st) = self.exit_state(&handle).await.ok().filter(|s| !s.running) {
                    said.push_str(&format!("\n(the server is not running: {})", st.describe()));
                }
                Err(DockerError::NotReady {
                    container: spec.name.clone(),
                    url,
                    timeout_s: check.timeout.as_secs(),
                    probe: said,
                    tail,
                }
                .into())
            }
        }
    }
}

impl DockerEngine {
    /// [`Engine::wait_ready`]: a prober started after the server, polling
    /// its address on the run network 10 ms apart.
    pub(super) async fn wait_ready_late(
        &self,
        server: &Handle,
        check: &ReadyCheck,
    ) -> anyhow::Result<Readiness> {
        let ip = server.ip.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "server {} has no address on a run network; start it with `network` set",
                server.name
            )
        })?;
        let url = format!("http://{ip}:{}{}", check.port, check.path);
        let image = self.fairground_tag().await?;
        let run = RunId(
            self.inspect(&server.id)
                .await?
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get(super::LABEL_RUN).cloned())
                .unwrap_or_else(|| self.options().run.0.clone()),
        );
        let mut spec = ContainerSpec::new(
            &run,
            Role::Probe,
            format!("{}-ready-{:04x}", server.name, rand::random::<u16>()),
            image,
        );
        spec.network = server.network.clone();
        spec.read_only_rootfs = true;
        spec.cmd = vec![
            "ready".into(),
            "--url".into(),
            url.clone(),
            "--timeout".into(),
            format!("{}ms", check.timeout.as_millis()),
        ];
        let out = self
            .run_collect(&spec, check.timeout + Duration::from_secs(30), None)
            .await?;
        let report: Option<ReadyReport> = out
            .stdout
            .lines()
            .find_map(|l| serde_json::from_str(l).ok());
        match report {
            Some(ReadyReport {
                ready: true,
                first_200_unix_ms: Some(t),
                attempts,
                ..
            }) => Ok(Readiness {
                url,
                first_200_unix_ms: t,
                attempts,
                cold_start_ms: server
                    .started_at
                    .as_deref()
                    .and_then(|s| cold_start_ms(s, t)),
                cold_start_is_upper_bound: attempts <= 1,
            }),
            _ => {
                let tail = self.tail(&server.id, 100).await.unwrap_or_default();
                let state = self.exit_state(server).await.ok();
                let mut probe = format!("{}{}", out.stdout, out.stderr);
                if let Some(st) = state.filter(|s| !s.running) {
                    probe.push_str(&format!("\n(the server is not running: {})", st.describe()));
                }
                Err(DockerError::NotReady {
                    container: server.name.clone(),
                    url,
                    timeout_s: check.timeout.as_secs(),
                    probe,
                    tail,
                }
                .into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cold_start_is_first_200_minus_started_at_to_the_ms_never_negative() {
        let started = "2026-01-01T00:00:01.250300000Z";
        let at = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .unwrap()
                .timestamp_nanos_opt()
                .unwrap() as u64
        };
        assert_eq!(
            cold_start_ms_ns(started, at("2026-01-01T00:00:01.553900000Z")),
            Some(304)
        );
        assert_eq!(
            cold_start_ms_ns(started, at("2026-01-01T00:00:01.249000000Z")),
            Some(0)
        );
        assert_eq!(cold_start_ms_ns("garbage", 1), None);
    }
}
