//! The real [`Lab`]: frameworks in Docker containers with the profile's
//! limits on the run's internal network, load from the fairground image's
//! `load` subcommand in its own container, resources from the server's
//! cgroup through the engine's sampler, the contract from `verify`.
//!
//! Generic over [`Engine`], so the glue is tested with the engine's fake and
//! runs on the real daemon unchanged. This module translates between the
//! engine, the loader's JSON and the pipeline's [`Measurement`]; it judges
//! nothing and never removes objects of other runs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;

use super::host::HostProbe;
use super::lab::{Lab, Measurement, Started, Verified};
use crate::contract::Scenario;
use crate::docker::container::{ContainerSpec, Limits, NetSysctls, Role, HOST_NETWORK};
use crate::docker::engine::{BuiltImages, Engine, Handle, LineSink, ReadyCheck};
use crate::docker::RunId;
use crate::framework::Framework;
use crate::load::report::{Phase, Progress};
use crate::load::LoadReport;
use crate::probe::{Sampler, Series};
use crate::profile::{LoadMode, Network, Placement, Profile, Warmup};
use crate::results::{
    AppliedLimits, CellKey, Connections, ErrorCounts, Exclusion, RateFigures, StatusCounts,
    VerifyOutcome,
};
use crate::verify::{self, VerifyOptions};

/// How often the server's cgroup is read during a round. Finer than the 1 s
/// the report promises, so the samples bracket the measured window tightly;
/// memory figures use the samples inside the window only.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Per-request timeout of contract verification.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// Time allowed on top of a loader run's warm-up and window: container
/// start, opening every connection (bounded by the loader's connect
/// timeout) and writing the report.
const LOADER_SLACK: Duration = Duration::from_secs(60);

/// Lines of each server container's log kept in the run's `logs/` folder:
/// enough for a crash's story, small enough that a chatty framework cannot
/// bloat the evidence.
const LOG_LINES: usize = 1000;

/// A framework's server container.
#[derive(Debug)]
pub struct DockerServer {
    handle: Handle,
    framework: String,
    port: u16,
}

/// The real lab for one run.
pub struct DockerLab<'a, E: Engine> {
    engine: &'a E,
    run: RunId,
    profile: &'a Profile,
    frameworks: BTreeMap<String, Framework>,
    images: BuiltImages,
    /// The run's network (its name), or the host's stack.
    network: String,
    placement: Placement,
    host: HostProbe,
    starts: u32,
    /// OOM kills each server's cgroup had counted after its previous round.
    oom_seen: BTreeMap<String, u64>,
    /// Where each server's log tail is written when it stops (`logs/`).
    logs_dir: Option<std::path::PathBuf>,
    /// Live progress of the current round.
    live: Option<LiveSink>,
}

impl<'a, E: Engine> DockerLab<'a, E> {
    /// Build or reuse every image and create the run's network.
    pub async fn prepare(
        engine: &'a E,
        run: RunId,
        profile: &'a Profile,
        frameworks: &[Framework],
        placement: Placement,
    ) -> anyhow::Result<Self> {
        let images = engine
            .ensure_images(frameworks)
            .await
            .context("building the images")?;
        let network = match profile.network {
            Network::Bridge => {
                engine
                    .create_network(&run)
                    .await
                    .context("creating the run's network")?
                    .name
            }
            Network::Host => HOST_NETWORK.to_string(),
        };
        Ok(DockerLab {
            engine,
            run,
            profile,
            frameworks: frameworks
                .iter()
                .map(|f| (f.name().to_string(), f.clone()))
                .collect(),
            images,
            network,
            placement,
            host: HostProbe::default(),
            starts: 0,
            oom_seen: BTreeMap::new(),
            logs_dir: None,
            live: None,
        })
    }

    /// Send each second of every round's progress to `sink`.
    pub fn show_live(&mut self, sink: LiveSink) {
        self.live = Some(sink);
    }

    /// Keep the last [`LOG_LINES`] lines of every server's log in `dir`
    /// (one file per container, written when the server stops).
    pub fn keep_logs_in(&mut self, dir: std::path::PathBuf) {
        self.logs_dir = Some(dir);
    }

    /// The images the run uses (ids, sizes and versions for the report).
    pub fn images(&self) -> &BuiltImages {
        &self.images
    }

    fn framework(&self, name: &str) -> anyhow::Result<&Framework> {
        self.frameworks
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("framework `{name}` is not part of this run"))
    }

    fn url(server: &DockerServer) -> anyhow::Result<String> {
        let ip = server.handle.ip.as_deref().ok_or_else(|| {
            anyhow::anyhow!(
                "container {} has no address on the run network",
                server.handle.name
            )
        })?;
        Ok(format!("http://{ip}:{}", server.port))
    }

    /// The loader container for one run against `server`: `warmup`, then the
    /// measured `duration`, on the same connections.
    fn loader_spec(
        &self,
        server: &DockerServer,
        key: &CellKey,
        warmup: Duration,
        duration: Duration,
        tag: &str,
    ) -> anyhow::Result<ContainerSpec> {
        let p = self.profile;
        let mut spec = ContainerSpec::new(
            &self.run,
            Role::Loader,
            format!("{}-load-{tag}", self.run.name_prefix()),
            self.images.fairground.tag.clone(),
        );
        spec.network = Some(self.network.clone());
        spec.limits = Limits {
            cpuset: Some(self.placement.loader.to_string()),
            cpus: Some(p.loader.cpus),
            memory_bytes: Some(p.loader.memory),
            nofile: Some(p.loader.nofile),
        };
        spec.sysctls = net_sysctls(&p.loader.sysctls);
        spec.read_only_rootfs = true;
        let mut cmd: Vec<String> = vec![
            "load".into(),
            "--url".into(),
            Self::url(server)?,
            "--scenario".into(),
            key.scenario.to_string(),
            "--connections".into(),
            key.concurrency.to_string(),
            "--threads".into(),
            p.load.threads.to_string(),
            "--duration".into(),
            format!("{}ms", duration.as_millis()),
            "--warmup".into(),
            format!("{}ms", warmup.as_millis()),
            "--pipeline".into(),
            p.load.pipeline.to_string(),
            "--timeout".into(),
            format!("{}ms", p.load.timeout.as_millis()),
            "--json".into(),
            "--progress".into(),
        ];
        if let LoadMode::FixedRate { rate } = p.load.mode {
            cmd.extend(["--rate".into(), rate.to_string()]);
        }
        spec.cmd = cmd;
        Ok(spec)
    }

    /// Run the loader once and parse its report; progress lines go to
    /// `lines`.
    async fn load_once(
        &self,
        server: &DockerServer,
        key: &CellKey,
        (warmup, duration): (Duration, Duration),
        tag: &str,
        lines: Option<LineSink>,
    ) -> anyhow::Result<LoadReport> {
        let spec = self.loader_spec(server, key, warmup, duration, tag)?;
        let out = self
            .engine
            .run_to_exit(&spec, warmup + duration + LOADER_SLACK, lines)
            .await
            .with_context(|| format!("load generator for {key}"))?;
        serde_json::from_str(&out.stdout).with_context(|| {
            let head: String = out.stdout.chars().take(300).collect();
            format!("the load generator for {key} printed no load report: `{head}`")
        })
    }

    /// Warm-up windows (separate loader runs) until the last three vary by
    /// no more than the profile's CV, or time runs out; `None` when the
    /// profile's warm-up is a fixed time, which the measuring loader run
    /// does itself on the connections it then measures.
    async fn warm_up_until_stable(
        &self,
        server: &DockerServer,
        key: &CellKey,
        round: u32,
    ) -> anyhow::Result<Option<f64>> {
        let started = Instant::now();
        match self.profile.warmup {
            Warmup::Fixed { .. } => return Ok(None),
            Warmup::UntilStable {
                window,
                max_cv,
                max_duration,
            } => {
                let mut tputs = Vec::new();
                let mut i = 0;
                while started.elapsed() < max_duration {
                    let r = self
                        .load_once(
                            server,
                            key,
                            (Duration::ZERO, window),
                            &format!("{}-warm{round}-{i}", key.stem()),
                            None,
                        )
                        .await?;
                    tputs.push(r.throughput_rps);
                    i += 1;
                    if tputs.len() >= crate::profile::STABLE_WINDOWS as usize {
                        let last = &tputs[tputs.len() - crate::profile::STABLE_WINDOWS as usize..];
                        if crate::stats::cv(last).is_some_and(|cv| cv <= max_cv) {
                            break;
                        }
                    }
                }
            }
        }
        Ok(Some(started.elapsed().as_secs_f64()))
    }

    /// Tell the live sink about a progress line.
    fn show(&self, key: &CellKey, round: u32, p: &Progress) {
        if let (
            Some(live),
            Progress::Tick {
                phase, ok, errors, ..
            },
        ) = (&self.live, p)
        {
            live(&Live {
                key,
                round,
                measuring: *phase == Phase::Measure,
                responses_per_s: *ok,
                errors_per_s: *errors,
            });
        }
    }
}

/// One second of a round in progress, for people watching.
#[derive(Debug)]
pub struct Live<'a> {
    /// The cell.
    pub key: &'a CellKey,
    /// Round, 0-based.
    pub round: u32,
    /// Inside the measured window (else warming up).
    pub measuring: bool,
    /// Responses completed in the last second.
    pub responses_per_s: u64,
    /// Errors in the last second.
    pub errors_per_s: u64,
}

/// Where live progress goes (the progress bars).
pub type LiveSink = std::sync::Arc<dyn Fn(&Live<'_>) + Send + Sync>;

/// Profile sysctls (`name → value`) as the engine's typed set: the four it
/// knows, defaults for any the profile leaves out.
fn net_sysctls(map: &BTreeMap<String, String>) -> NetSysctls {
    let mut s = NetSysctls::default();
    if let Some(v) = map.get("net.core.somaxconn").and_then(|v| v.parse().ok()) {
        s.somaxconn = v;
    }
    if let Some(v) = map
        .get("net.ipv4.tcp_max_syn_backlog")
        .and_then(|v| v.parse().ok())
    {
        s.tcp_max_syn_backlog = v;
    }
    if let Some((a, b)) = map
        .get("net.ipv4.ip_local_port_range")
        .and_then(|v| crate::profile::parse_port_range(v).ok())
    {
        s.ip_local_port_range = (a, b);
    }
    if let Some(v) = map.get("net.ipv4.tcp_tw_reuse") {
        s.tcp_tw_reuse = v.trim() != "0";
    }
    s
}

/// The engine's applied limits in the results' terms.
fn applied(l: &crate::docker::container::AppliedLimits) -> AppliedLimits {
    AppliedLimits {
        cpus: l.cpus.unwrap_or(0.0),
        cpuset: l.cpuset.clone(),
        memory_bytes: l.memory_bytes.unwrap_or(0),
        memory_swap_bytes: l.memory_swap_bytes,
        nofile: l.nofile_soft.unwrap_or(0),
    }
}

/// What verify found, in the results' terms.
pub fn outcome(report: &verify::VerifyReport, scenarios: &[Scenario]) -> VerifyOutcome {
    let all = report
        .checks
        .iter()
        .chain(report.scenarios.iter().flat_map(|s| s.checks.iter()));
    let (mut checks, mut failed) = (0u64, 0u64);
    for c in all {
        checks += 1;
        if c.excludes() {
            failed += 1;
        }
    }
    let mut passed = Vec::new();
    let mut excluded = Vec::new();
    for &s in scenarios {
        match report.excluded(s) {
            None => passed.push(s),
            Some(reason) => excluded.push(Exclusion {
                scenario: s,
                reason,
            }),
        }
    }
    VerifyOutcome {
        checks,
        failed,
        passed,
        excluded,
    }
}

/// One round's raw figures from the loader's report and the server's
/// samples. `window_end_ms` is when the loader returned, on the sampler's
/// clock: memory samples count when they fall within the loader's measured
/// time before it.
pub fn measurement(
    key: &CellKey,
    load: &LoadReport,
    series: &Series,
    window_end_ms: u64,
    warmup_s: f64,
    loader_cpus: f64,
) -> Measurement {
    let window_ms = (load.measured_s * 1000.0) as u64;
    let from = window_end_ms.saturating_sub(window_ms);
    let in_window: Vec<u64> = series
        .samples
        .iter()
        .filter(|s| s.t_ms >= from && s.t_ms <= window_end_ms)
        .map(|s| s.mem_bytes)
        .collect();
    let r = &load.responses;
    Measurement {
        started_at: Utc::now() - chrono::Duration::milliseconds(window_ms as i64),
        warmup_s,
        duration_s: load.measured_s,
        responses: StatusCounts {
            s2xx: r.status_2xx,
            s3xx: r.status_3xx,
            s4xx: r.status_4xx,
            s5xx: r.status_5xx,
            other: r.status_other,
        },
        errors: ErrorCounts {
            connect: load.errors.connect,
            read: load.errors.read,
            write: load.errors.write,
            timeout: load.errors.timeout,
            parse: load.errors.parse,
        },
        histogram: load.latency.histogram.clone(),
        connections: Connections {
            requested: key.concurrency,
            established: u32::try_from(load.connections.peak_open).unwrap_or(u32::MAX),
        },
        wire_bytes_per_response: (load.bytes.mean_response_bytes > 0.0)
            .then_some(load.bytes.mean_response_bytes),
        rate: load.rate.map(|x| RateFigures {
            target_rps: x.target_rps,
            achieved_rps: x.achieved_rps,
            max_lag_us: x.max_schedule_lag_us,
        }),
        windows_ok: load.windows.iter().map(|w| w.ok).collect(),
        loader_cpus,
        loader_cpu_us: load.loader.user_cpu_us + load.loader.sys_cpu_us,
        loader_throttled_fraction: load.loader.throttling.map(|t| t.fraction()),
        // The sampler starts as the loader's measured window starts and
        // stops after the loader returned (the server idle by then): the
        // delta is the window's CPU, warm-up and connection set-up excluded.
        server_cpu_us: series.cpu_usec_delta(),
        memory_idle_bytes: series.samples.first().map(|s| s.mem_bytes),
        memory_samples_bytes: in_window,
        memory_peak_bytes: series.peak_mem_bytes(),
        oom_kills: 0,
        restarts: 0,
        host: None,
    }
}

impl<E: Engine> Lab for DockerLab<'_, E> {
    type Server = DockerServer;

    async fn start(&mut self, name: &str) -> anyhow::Result<(DockerServer, Started)> {
        let fw = self.framework(name)?.clone();
        let image = self
            .images
            .frameworks
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no image was built for framework `{name}`"))?;
        self.starts += 1;
        let p = self.profile;
        let mut spec = ContainerSpec::new(
            &self.run,
            Role::Server,
            format!("{}-{name}-{}", self.run.name_prefix(), self.starts),
            image.tag.clone(),
        );
        spec.network = Some(self.network.clone());
        spec.limits = Limits {
            cpuset: Some(self.placement.server.to_string()),
            cpus: Some(p.server.cpus),
            memory_bytes: Some(p.server.memory),
            nofile: Some(p.server.nofile),
        };
        spec.sysctls = net_sysctls(&p.server.sysctls);
        spec.read_only_rootfs = fw.manifest.read_only_rootfs;
        spec.env = fw.manifest.env.clone();
        let handle = self
            .engine
            .start_container(&spec)
            .await
            .with_context(|| format!("starting {name}"))?;
        let check = ReadyCheck {
            port: fw.manifest.port,
            path: fw.manifest.readiness.clone(),
            timeout: p.readiness_timeout,
        };
        let ready = match self.engine.wait_ready(&handle, &check).await {
            Ok(r) => r,
            Err(e) => {
                let _ = self.engine.remove(&handle).await;
                return Err(e.context(format!("{name} never became ready")));
            }
        };
        let limits = self
            .engine
            .inspect_limits(&handle)
            .await
            .ok()
            .map(|l| applied(&l));
        Ok((
            DockerServer {
                handle,
                framework: name.to_string(),
                port: fw.manifest.port,
            },
            Started {
                cold_start_ms: ready.cold_start_ms.map(|ms| ms as f64),
                cold_start_is_upper_bound: ready.cold_start_is_upper_bound,
                limits,
            },
        ))
    }

    async fn idle_memory(&mut self, server: &DockerServer) -> anyhow::Result<Option<u64>> {
        tokio::time::sleep(self.profile.idle_settle).await;
        let sampler = self
            .engine
            .start_sampler(&server.handle, SAMPLE_EVERY)
            .await?;
        tokio::time::sleep(SAMPLE_EVERY * 4).await;
        let series = sampler.stop().await;
        let samples: Vec<f64> = series.samples.iter().map(|s| s.mem_bytes as f64).collect();
        Ok(crate::stats::median(&samples).map(|m| m as u64))
    }

    async fn verify(
        &mut self,
        server: &DockerServer,
        scenarios: &[Scenario],
    ) -> anyhow::Result<Verified> {
        let url = Self::url(server)?;
        let options = VerifyOptions {
            timeout: VERIFY_TIMEOUT,
            framework: Some(server.framework.clone()),
            ..VerifyOptions::default()
        };
        let report = verify::verify_url(&url, scenarios, &options)
            .await
            .with_context(|| format!("verifying {} at {url}", server.framework))?;
        let dir = &self.framework(&server.framework)?.dir;
        let lines = verify::footprint::count_dir(dir).ok().map(|l| l.total);
        Ok(Verified {
            outcome: outcome(&report, scenarios),
            binary_size_bytes: None,
            app_lines_of_code: lines,
        })
    }

    async fn measure(
        &mut self,
        server: &DockerServer,
        key: &CellKey,
        round: u32,
    ) -> anyhow::Result<Measurement> {
        let (warmup, warmup_s) = match self.warm_up_until_stable(server, key, round).await? {
            Some(s) => (Duration::ZERO, s),
            None => {
                let w = self.profile.warmup.max();
                (w, w.as_secs_f64())
            }
        };
        // One loader run warms up and then measures on the same
        // connections; the server's probe starts when the loader says its
        // measured window starts, so the CPU and memory figures cover that
        // window, not the warm-up.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tag = format!("{}-r{round}", key.stem());
        let mut probe: Option<(
            anyhow::Result<Sampler>,
            Instant,
            Option<super::host::HostMark>,
        )> = None;
        let loaded = {
            let run = self.load_once(server, key, (warmup, self.profile.duration), &tag, Some(tx));
            tokio::pin!(run);
            loop {
                tokio::select! {
                    // Lines first: the start of the window must be seen
                    // before the loader's exit is.
                    biased;
                    Some(line) = rx.recv() => {
                        let Some(p) = Progress::parse(&line) else { continue };
                        if probe.is_none() && matches!(p, Progress::Measure { .. }) {
                            let sampler = self.engine.start_sampler(&server.handle, SAMPLE_EVERY).await;
                            probe = Some((sampler, Instant::now(), self.host.mark()));
                        }
                        self.show(key, round, &p);
                    }
                    loaded = &mut run => break loaded,
                }
            }
        };
        let Some((sampler, clock, mark)) = probe else {
            loaded?;
            anyhow::bail!(
                "the load generator for {key} never announced the start of its measured window \
                 (no `{{\"event\":\"measure\"}}` line on its stderr); is the fairground image current?"
            );
        };
        let sampler = sampler?;
        let window_end_ms = clock.elapsed().as_millis() as u64;
        // Let the sampler take at least one reading after the load stopped
        // (two periods: one tick may race with the stop), so the CPU delta
        // covers the whole window.
        tokio::time::sleep(SAMPLE_EVERY * 2).await;
        let series = sampler.stop().await;
        let load = loaded?;
        let mut m = measurement(
            key,
            &load,
            &series,
            window_end_ms,
            warmup_s,
            self.profile.loader.cpus,
        );
        let state = self.engine.exit_state(&server.handle).await?;
        let kills = state.cgroup_oom_kills.unwrap_or(0);
        let seen = self
            .oom_seen
            .insert(server.handle.id.clone(), kills)
            .unwrap_or(0);
        m.oom_kills = kills.saturating_sub(seen).max(u64::from(state.oom_killed));
        m.restarts = u64::from(!state.running);
        if let Some(mark) = mark {
            m.host = self.host.finish(mark, m.server_cpu_us + m.loader_cpu_us);
        }
        Ok(m)
    }

    async fn alive(&mut self, server: &DockerServer) -> anyhow::Result<bool> {
        Ok(self.engine.exit_state(&server.handle).await?.running)
    }

    async fn stop(&mut self, server: DockerServer) -> anyhow::Result<()> {
        if let Some(dir) = &self.logs_dir {
            // Evidence, not a reason to fail the run: a log that cannot be
            // read or written is reported and the run goes on.
            let kept = match self.engine.logs_tail(&server.handle, LOG_LINES).await {
                Ok(text) => std::fs::create_dir_all(dir)
                    .and_then(|()| {
                        std::fs::write(dir.join(format!("{}.log", server.handle.name)), text)
                    })
                    .map_err(anyhow::Error::from),
                Err(e) => Err(e),
            };
            if let Err(e) = kept {
                eprintln!(
                    "warning: could not keep the log of {}: {e:#}",
                    server.handle.name
                );
            }
        }
        self.engine
            .remove(&server.handle)
            .await
            .with_context(|| format!("removing {}", server.handle.name))
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::bench::plan::tests::framework;
    use crate::docker::engine::{FakeEngine, FakeScript};
    use crate::load::LoadConfig;
    use crate::probe::CgroupReading;
    use crate::profile::HostFacts;

    /// A real loader report: the loader in-process against the reference
    /// server for a fraction of a second.
    fn real_load_report() -> LoadReport {
        let server = crate::serve::start(IpAddr::V4(Ipv4Addr::LOCALHOST), 0, 1).unwrap();
        let url = format!("http://{}", server.addr);
        let cfg = LoadConfig::new(&url)
            .unwrap()
            .scenario(Scenario::Plaintext)
            .connections(4)
            .threads(1)
            .duration(Duration::from_millis(400));
        let report = crate::load::run(&cfg).unwrap();
        server.stop();
        report
    }

    fn reading(cpu_usec: u64, mem_bytes: u64) -> CgroupReading {
        CgroupReading {
            cpu_usec,
            mem_bytes,
            ..CgroupReading::default()
        }
    }

    fn profile() -> Profile {
        Profile {
            name: "t".into(),
            duration: Duration::from_millis(400),
            ..Profile::default()
        }
    }

    #[test]
    fn measures_a_round_from_the_loaders_json_and_the_servers_samples() {
        let load = real_load_report();
        assert!(load.responses.status_2xx > 0);
        let engine = FakeEngine::new(FakeScript {
            loader_stdout: serde_json::to_string(&load).unwrap(),
            loader_stderr: progress_lines(),
            samples: vec![
                reading(1_000, 5 << 20),
                reading(51_000, 6 << 20),
                reading(51_000, 6 << 20),
                reading(51_000, 6 << 20),
            ],
            ..FakeScript::default()
        });
        let profile = profile();
        let placement = profile.placement(&HostFacts::with_cores(4)).unwrap();
        let fw = framework("a", &[Scenario::Plaintext]);
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut lab =
                DockerLab::prepare(&engine, RunId("t".into()), &profile, &[fw], placement)
                    .await
                    .unwrap();
            let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = std::sync::Arc::clone(&seen);
            lab.show_live(std::sync::Arc::new(move |l: &Live<'_>| {
                sink.lock().unwrap().push((l.measuring, l.responses_per_s));
            }));
            let (server, started) = lab.start("a").await.unwrap();
            assert_eq!(started.cold_start_ms, Some(50.0));
            let limits = started.limits.unwrap();
            assert_eq!((limits.cpus, limits.nofile), (1.0, profile.server.nofile));
            let key = CellKey {
                framework: "a".into(),
                scenario: Scenario::Plaintext,
                concurrency: 4,
                rate: None,
            };
            let m = lab.measure(&server, &key, 0).await.unwrap();
            assert_eq!(*seen.lock().unwrap(), [(false, 900), (true, 1000)]);
            assert_eq!(m.warmup_s, profile.warmup.max().as_secs_f64());
            assert_eq!(m.server_cpu_us, 50_000);
            assert_eq!(m.oom_kills, 0);
            assert_eq!(m.restarts, 0);
            let round = m.into_round(0).unwrap();
            assert_eq!(round.responses.s2xx, load.responses.status_2xx);
            assert_eq!(
                round.connections.established,
                load.connections.peak_open as u32
            );
            assert!(
                (round.throughput_rps - load.throughput_rps).abs() < 1e-6 * load.throughput_rps
            );
            assert_eq!(round.latency.count, load.latency.count);
            assert!(lab.alive(&server).await.unwrap());
            lab.stop(server).await.unwrap();
        });
        // Warm-up and measured window: one loader container.
        let runs = engine
            .calls()
            .iter()
            .filter(|c| c.starts_with("run loader"))
            .count();
        assert_eq!(runs, 1, "{:?}", engine.calls());
        rt.block_on(engine.cleanup(&RunId("t".into()))).unwrap();
        assert!(engine.leftovers().is_empty(), "{:?}", engine.leftovers());
    }

    /// What a loader prints on stderr with `--progress`: a warm-up second,
    /// the start of measurement, a measured second.
    fn progress_lines() -> String {
        [
            Progress::Tick {
                t: 1.0,
                phase: Phase::Warmup,
                ok: 900,
                errors: 0,
            },
            Progress::Measure { t: 1.5 },
            Progress::Tick {
                t: 2.0,
                phase: Phase::Measure,
                ok: 1000,
                errors: 0,
            },
        ]
        .iter()
        .map(|p| p.line() + "\n")
        .collect()
    }

    /// Measure one round of framework `a` (plaintext, 4 connections) with
    /// a loader that behaves as `script` says; the error it ends with.
    fn failed_round(script: FakeScript) -> String {
        let engine = FakeEngine::new(script);
        let profile = profile();
        let placement = profile.placement(&HostFacts::with_cores(4)).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let fw = framework("a", &[Scenario::Plaintext]);
            let mut lab =
                DockerLab::prepare(&engine, RunId("t".into()), &profile, &[fw], placement)
                    .await
                    .unwrap();
            let (server, _) = lab.start("a").await.unwrap();
            let key = CellKey {
                framework: "a".into(),
                scenario: Scenario::Plaintext,
                concurrency: 4,
                rate: None,
            };
            let err = lab.measure(&server, &key, 0).await.unwrap_err();
            lab.stop(server).await.unwrap();
            format!("{err:#}")
        })
    }

    #[test]
    fn a_loader_that_never_starts_its_window_is_an_error_not_a_figure() {
        let text = failed_round(FakeScript {
            loader_stdout: serde_json::to_string(&real_load_report()).unwrap(),
            loader_stderr: "warming up\n".into(),
            ..FakeScript::default()
        });
        assert!(
            text.contains("never announced the start of its measured window"),
            "{text}"
        );
    }

    #[test]
    fn a_loader_that_prints_no_report_is_an_error_naming_the_cell() {
        let text = failed_round(FakeScript {
            loader_stdout: "panicked at src/load".into(),
            ..FakeScript::default()
        });
        assert!(
            text.contains("a plaintext c=4") && text.contains("panicked"),
            "{text}"
        );
    }

    #[test]
    fn until_stable_warm_up_stops_after_three_steady_windows_and_rate_reaches_the_loader() {
        let load = real_load_report();
        let engine = FakeEngine::new(FakeScript {
            loader_stdout: serde_json::to_string(&load).unwrap(),
            loader_stderr: progress_lines(),
            samples: vec![reading(0, 1 << 20), reading(10, 1 << 20)],
            ..FakeScript::default()
        });
        let profile = Profile {
            warmup: Warmup::UntilStable {
                window: Duration::from_millis(100),
                max_cv: 0.05,
                max_duration: Duration::from_secs(30),
            },
            load: crate::profile::Load {
                mode: LoadMode::FixedRate { rate: 5_000 },
                ..crate::profile::Load::default()
            },
            ..profile()
        };
        let placement = profile.placement(&HostFacts::with_cores(4)).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let key = CellKey {
            framework: "a".into(),
            scenario: Scenario::Plaintext,
            concurrency: 4,
            rate: Some(5_000),
        };
        rt.block_on(async {
            let fw = framework("a", &[Scenario::Plaintext]);
            let mut lab =
                DockerLab::prepare(&engine, RunId("t".into()), &profile, &[fw], placement)
                    .await
                    .unwrap();
            let (server, _) = lab.start("a").await.unwrap();
            // The same report every window: CV 0 after three windows.
            lab.measure(&server, &key, 0).await.unwrap();
            let spec = lab
                .loader_spec(&server, &key, Duration::ZERO, Duration::from_secs(1), "x")
                .unwrap();
            let rate = spec.cmd.iter().position(|a| a == "--rate").unwrap();
            assert_eq!(spec.cmd[rate + 1], "5000");
            assert_eq!(spec.limits.cpuset.as_deref(), Some("1"));
            lab.stop(server).await.unwrap();
        });
        let runs = engine
            .calls()
            .iter()
            .filter(|c| c.starts_with("run loader"))
            .count();
        assert_eq!(runs, 3 + 1, "{:?}", engine.calls());
    }

    #[tokio::test]
    async fn verify_outcome_of_the_reference_server_passes_every_scenario() {
        let server = crate::serve::start(IpAddr::V4(Ipv4Addr::LOCALHOST), 0, 1).unwrap();
        let url = format!("http://{}", server.addr);
        let scenarios = [Scenario::Plaintext, Scenario::Json, Scenario::Param];
        let report = verify::verify_url(&url, &scenarios, &VerifyOptions::default())
            .await
            .unwrap();
        server.stop();
        let o = outcome(&report, &scenarios);
        assert!(o.excluded.is_empty(), "{:?}", o.excluded);
        assert_eq!(o.passed, scenarios);
        assert!(o.checks > 0 && o.failed == 0);
    }

    #[test]
    fn profile_sysctls_map_onto_the_engines_set() {
        let map: BTreeMap<String, String> = [
            ("net.core.somaxconn", "1024"),
            ("net.ipv4.ip_local_port_range", "2000 3000"),
            ("net.ipv4.tcp_tw_reuse", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = net_sysctls(&map);
        assert_eq!(s.somaxconn, 1024);
        assert_eq!(s.ip_local_port_range, (2000, 3000));
        assert!(!s.tcp_tw_reuse);
        assert_eq!(
            s.tcp_max_syn_backlog,
            NetSysctls::default().tcp_max_syn_backlog
        );
    }
}
