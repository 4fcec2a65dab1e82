//! The real [`Lab`]: servers in Docker containers on the run's network (or
//! the host's), load from the fairground image's `load` subcommand in its own
//! container, resources from the server's cgroup through the engine's
//! sampler, the contract from `verify`.
//!
//! It runs the specs it is given ([`ServerSpec`], [`LoaderSpec`]) and holds
//! no profile. Generic over [`Engine`], so the glue is tested with the
//! engine's fake and runs on the real daemon unchanged. This module
//! translates between the engine, the loader's JSON and the pipeline's
//! [`Measured`]; it judges nothing and never removes objects of other runs.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;

use super::host::HostProbe;
use super::lab::{Lab, Measured, Prepared, Started, Urls};
use crate::contract::{Protocol, Scenario};
use crate::docker::cleanup::CleanupReport;
use crate::docker::container::{ContainerSpec, HOST_NETWORK};
use crate::docker::engine::{Engine, Handle, ReadyCheck};
use crate::docker::images::FAIRGROUND_IN_IMAGE;
use crate::docker::RunId;
use crate::host::clock::now_ns;
use crate::plan::spec::{LoaderSpec, ServerSpec};
use crate::profile::Network;
use crate::results::{LoaderShare, MachineSpeed, VerifyOutcome};
use crate::roles::load::report::{Phase, Progress};
use crate::roles::load::LoadReport;
use crate::verify::{self, VerifyOptions};

/// How often the server's cgroup is read during a round. Finer than the 1 s
/// the report promises, so the samples bracket the measured window tightly;
/// memory figures use the samples inside the window only.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// How often an idle server's memory is read after its settle: an idle
/// server's memory does not move, so a few readings close together give
/// the median without stretching the settle by a second.
const IDLE_SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Per-request timeout of contract verification.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's default bridge network: the server's in a multi-host run
/// (a run's own network is internal, and internal networks publish no port).
pub const DEFAULT_BRIDGE: &str = "bridge";

/// How far ahead of now the loaders of a multi-host round are told to
/// start: room for every daemon to create and start its loader container.
const BARRIER_LEAD: Duration = Duration::from_secs(3);

/// Lines of each server container's log kept in the run's `logs/` folder:
/// enough for a crash's story, small enough that a chatty framework cannot
/// bloat the evidence.
const LOG_LINES: usize = 1000;

/// A framework's server container.
#[derive(Debug)]
pub struct DockerServer {
    handle: Handle,
    framework: String,
    urls: Urls,
    /// The core the calibration probe runs on: the server's first, when
    /// it is pinned and its daemon shares this machine.
    probe_core: Option<usize>,
    /// Its database, started (and seeded) before it, removed after it.
    database: Option<crate::docker::database::StartedDatabase>,
    /// What that database was started from.
    database_spec: Option<crate::plan::spec::DatabaseSpec>,
}

/// The real lab for one run.
pub struct DockerLab<'a, E: Engine> {
    engine: &'a E,
    run: RunId,
    /// The run's network (its name), or the host's stack.
    network: String,
    host: HostProbe,
    /// Containers started so far (servers and loaders), for unique names.
    started: std::cell::Cell<u32>,
    /// OOM kills each server's cgroup had counted after its previous round.
    oom_seen: BTreeMap<String, u64>,
    /// Each server's memory high-water mark over its life so far (on
    /// cgroup v1 the kernel's is reset every window).
    peaks: BTreeMap<String, u64>,
    /// Where each server's log tail is written when it stops (`logs/`).
    logs_dir: Option<std::path::PathBuf>,
    /// Live progress of the current round.
    live: Option<LiveSink>,
    /// Loaders on other daemons (`hosts:`); `None`: one loader on the run
    /// network of `engine`.
    spread: Option<Spread<'a, E>>,
    /// The run's long-lived loader container (its spec, to tell whether a
    /// round's loader fits it), in which every round's loader is started.
    loader_host: Option<(ContainerSpec, Handle)>,
    /// Loaders expected soon ([`Lab::expect_loader`]): their container is
    /// started during the next idle settle.
    expected_loader: Option<LoaderSpec>,
    /// Whether a calibration probe failed already (said once).
    probe_failed: bool,
    /// Frameworks whose image is built just before their first server
    /// ([`Lab::prepare`]), by name.
    deferred: BTreeMap<String, crate::framework::Framework>,
}

/// Loaders on other Docker daemons (a profile's `hosts:`), aimed at the
/// server's published port through `server_address`.
pub struct Spread<'a, E: Engine> {
    /// Each loader's daemon and its endpoint, for messages and results.
    pub loaders: Vec<(&'a E, String)>,
    /// The IPv4 address the loaders reach the server's host at.
    pub server_address: String,
    /// Same daemon as the server's, per loader (by daemon id): those are
    /// cleaned once, with the server's.
    pub same_as_server: Vec<bool>,
}

impl<'a, E: Engine> DockerLab<'a, E> {
    /// A lab on `engine` for `run`: creates the run's network in bridge
    /// mode (the host's stack in host mode).
    pub async fn open(engine: &'a E, run: RunId, network: Network) -> anyhow::Result<Self> {
        let network = match network {
            Network::Bridge => {
                engine
                    .create_network(&run)
                    .await
                    .context("creating the run's network")?
                    .name
            }
            Network::Host => HOST_NETWORK.to_string(),
        };
        Ok(Self::on(engine, run, network, None))
    }

    /// A lab whose server runs on `engine` with its port published (on the
    /// daemon's default bridge, or the host's stack in host mode) and whose
    /// loaders run on the daemons of `spread`, on their hosts' stacks.
    pub fn open_spread(engine: &'a E, run: RunId, network: Network, spread: Spread<'a, E>) -> Self {
        let network = match network {
            Network::Bridge => DEFAULT_BRIDGE.to_string(),
            Network::Host => HOST_NETWORK.to_string(),
        };
        Self::on(engine, run, network, Some(spread))
    }

    /// A fresh lab on `network` (already made), nothing started yet.
    fn on(engine: &'a E, run: RunId, network: String, spread: Option<Spread<'a, E>>) -> Self {
        DockerLab {
            engine,
            run,
            network,
            host: HostProbe::default(),
            started: std::cell::Cell::new(0),
            oom_seen: BTreeMap::new(),
            peaks: BTreeMap::new(),
            logs_dir: None,
            live: None,
            spread,
            loader_host: None,
            expected_loader: None,
            probe_failed: false,
            deferred: BTreeMap::new(),
        }
    }

    /// Remove every container and the network of this run, on every daemon
    /// the run used.
    pub async fn close(self) -> anyhow::Result<CleanupReport> {
        let mut report = self.engine.cleanup(&self.run).await?;
        if let Some(spread) = &self.spread {
            for ((engine, endpoint), same) in spread.loaders.iter().zip(&spread.same_as_server) {
                if *same {
                    continue;
                }
                let r = engine
                    .cleanup(&self.run)
                    .await
                    .with_context(|| format!("cleaning up on {endpoint}"))?;
                report.containers.extend(r.containers);
                report.networks.extend(r.networks);
                report.failed.extend(r.failed);
            }
        }
        Ok(report)
    }

    /// Build the images of `frameworks` only just before each one's first
    /// server ([`Lab::prepare`]), under the tags the run's specs planned.
    pub fn defer_images(&mut self, frameworks: Vec<crate::framework::Framework>) {
        self.deferred = frameworks
            .into_iter()
            .map(|f| (f.name().to_string(), f))
            .collect();
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

    /// Raise server `id`'s lifetime memory peak to `bytes` if higher.
    fn lifetime_peak(&mut self, id: &str, bytes: u64) {
        let p = self.peaks.entry(id.to_string()).or_default();
        *p = (*p).max(bytes);
    }

    /// A container name of this run, unique within it.
    fn name(&self, what: &str) -> String {
        self.started.set(self.started.get() + 1);
        format!("{}-{what}-{}", self.run.name_prefix(), self.started.get())
    }

    /// The long-lived loader container for `loader`'s limits, sysctls and
    /// network: the one running when it fits, else a new one (the old one
    /// removed). It sleeps (`fairground hold`) between rounds; each round's
    /// loader is a fresh process in it, so only the daemon's per-round
    /// create, start, wait and removal are saved, not anything a round
    /// measures.
    async fn loader_host(&mut self, loader: &LoaderSpec) -> anyhow::Result<Handle> {
        let mut spec = ContainerSpec::loader(&self.run, "", loader, &self.network, "");
        spec.cmd = vec!["hold".into()];
        let fits = |running: &ContainerSpec| {
            running.image == spec.image
                && running.limits == spec.limits
                && running.sysctls == spec.sysctls
                && running.network == spec.network
                && running.files == spec.files
        };
        match self.loader_host.take() {
            Some((running, h)) if fits(&running) => {
                self.loader_host = Some((running, h.clone()));
                return Ok(h);
            }
            Some((_, old)) => {
                let _ = self.engine.remove(&old).await;
            }
            None => {}
        }
        spec.name = self.name("loader");
        let h = self
            .engine
            .start_container(&spec)
            .await
            .context("starting the run's loader container")?;
        self.loader_host = Some((spec, h.clone()));
        Ok(h)
    }

    /// Run the loader once in the run's loader container `host` and parse
    /// its report; progress lines go to `lines`.
    async fn load_once(
        &self,
        server: &DockerServer,
        loader: &LoaderSpec,
        host: Option<&Handle>,
        lines: Option<crate::docker::engine::LineSink>,
    ) -> anyhow::Result<(LoadReport, Vec<LoaderShare>)> {
        if let Some(spread) = &self.spread {
            let names: Vec<String> = (0..spread.loaders.len())
                .map(|i| self.name(&format!("load-{}-h{}", loader.label, i + 1)))
                .collect();
            return spread::load(spread, &self.run, names, server, loader, lines).await;
        }
        let what = describe(server, loader);
        let host = host.context("no loader container for this run")?;
        let spec = ContainerSpec::loader(&self.run, "", loader, &self.network, &loader.args.url);
        let cmd: Vec<String> = std::iter::once(FAIRGROUND_IN_IMAGE.to_string())
            .chain(spec.cmd)
            .collect();
        let out = self
            .engine
            .exec_to_exit(host, &cmd, loader.time_limit, lines)
            .await
            .with_context(|| format!("load generator for {what}"))?;
        Ok((parse_report(&out.stdout, &what)?, Vec::new()))
    }

    /// Tell the live sink about a progress line.
    fn show(&self, p: &Progress) {
        if let (
            Some(live),
            Progress::Tick {
                phase, ok, errors, ..
            },
        ) = (&self.live, p)
        {
            live(&LiveSecond {
                measuring: *phase == Phase::Measure,
                responses_per_s: *ok,
                errors_per_s: *errors,
            });
        }
    }
}

/// Whether `port` is free on this host (host network mode, local daemon).
fn port_free_on_host(port: u16) -> anyhow::Result<()> {
    match std::net::TcpListener::bind(("0.0.0.0", port)) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "port {port} is already in use on the host, and with `network: host` the server \
             needs it: stop what listens there (`ss -ltnp 'sport = :{port}'` names it) or use \
             `network: bridge`"
        ),
        // No privilege to bind, or a remote daemon's host: nothing to learn here.
        Err(_) => Ok(()),
    }
}

/// The loader's JSON report from its stdout.
fn parse_report(stdout: &str, what: &str) -> anyhow::Result<LoadReport> {
    serde_json::from_str(stdout).with_context(|| {
        let head: String = stdout.chars().take(300).collect();
        format!("the load generator for {what} printed no load report: `{head}`")
    })
}

/// `axum plaintext c=100`: what a loader run is aimed at, for messages.
fn describe(server: &DockerServer, loader: &LoaderSpec) -> String {
    let scenario = loader
        .args
        .scenario
        .map_or_else(|| "ad-hoc".to_string(), |s| s.to_string());
    let mut s = format!(
        "{} {scenario} c={}",
        server.framework, loader.args.connections
    );
    if let Some(r) = loader.args.rate {
        s.push_str(&format!(" rate={r}/s"));
    }
    s
}

/// One second of a round in progress, for people watching.
#[derive(Debug)]
pub struct LiveSecond {
    /// Inside the measured window (else warming up).
    pub measuring: bool,
    /// Responses completed in the last second.
    pub responses_per_s: u64,
    /// Errors in the last second.
    pub errors_per_s: u64,
}

/// Where live progress goes (the progress bars).
pub type LiveSink = std::sync::Arc<dyn Fn(&LiveSecond) + Send + Sync>;

impl<E: Engine> Lab for DockerLab<'_, E> {
    type Server = DockerServer;

    fn expect_loader(&mut self, loader: &LoaderSpec) {
        self.expected_loader = Some(loader.clone());
    }

    async fn prepare(&mut self, spec: &ServerSpec) -> anyhow::Result<Option<Prepared>> {
        // Taken out whatever happens: a framework whose image failed is not
        // built again (its failure is recorded once).
        let Some(fw) = self.deferred.remove(&spec.framework) else {
            return Ok(None);
        };
        let t = std::time::Instant::now();
        let built = self.engine.ensure_framework_image(&fw).await?;
        anyhow::ensure!(
            built.image.tag == spec.image,
            "framework {}: its image was built as {} but the run planned {} (did {} change \
             during the run?); rerun to measure it as it is now",
            spec.framework,
            built.image.tag,
            spec.image,
            fw.dir.display()
        );
        let load_after = if built.image.reused {
            None
        } else {
            crate::host::proc::read_loadavg(std::path::Path::new("/"))
        };
        Ok(Some(Prepared {
            image: built.image,
            seconds: t.elapsed().as_secs_f64(),
            load_after,
        }))
    }

    async fn start(&mut self, spec: &ServerSpec) -> anyhow::Result<(DockerServer, Started)> {
        if self.network == HOST_NETWORK {
            // On the host's stack the server shares the host's ports: if
            // something else listens there, readiness and load would reach
            // that instead, and the server would die on its bind.
            port_free_on_host(spec.port)
                .with_context(|| format!("starting {} on the host's network", spec.framework))?;
        }
        let database = match &spec.database {
            Some(db) => {
                anyhow::ensure!(
                    self.spread.is_none() && self.network != HOST_NETWORK,
                    "{}: the database scenarios run on the run's own bridge network, with the \
                     loader on this host (not `network: host`, not `hosts:`)",
                    spec.framework
                );
                let name = self.name(&format!("{}-db", spec.framework));
                Some(
                    crate::docker::database::start(self.engine, &self.run, name, db, &self.network)
                        .await
                        .with_context(|| format!("the database of {}", spec.framework))?,
                )
            }
            None => None,
        };
        let name = self.name(&spec.framework);
        let mut container = ContainerSpec::server(&self.run, name, spec, &self.network);
        if let (Some(db), Some(started)) = (&spec.database, &database) {
            for (k, v) in crate::contract::db::env(&started.ip, db.pool) {
                container.env.insert(k.to_string(), v);
            }
        }
        if self.spread.is_some() {
            container.publish = Some(spec.port);
        }
        let check = ReadyCheck {
            port: spec.port,
            path: spec.readiness_path.clone(),
            timeout: spec.readiness_timeout,
        };
        let ready = match self.engine.start_ready(&container, &check).await {
            Ok(r) => r,
            Err(e) => {
                if let Some(db) = &database {
                    let _ = self.engine.remove(&db.handle).await;
                }
                return Err(e.context(format!("{} never became ready", spec.framework)));
            }
        };
        let handle = ready.handle;
        let limits = self.engine.inspect_limits(&handle).await.ok();
        let ip = handle.ip.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "container {} has no address on the run network",
                handle.name
            )
        })?;
        let urls =
            match &self.spread {
                None => Urls::on(&ip, spec),
                Some(spread) => {
                    // Loaders on other daemons reach the server through its
                    // published port; only its HTTP/1.1 port is published.
                    anyhow::ensure!(
                    spec.protocols == [Protocol::Http1],
                    "{}: loaders on other Docker hosts (`hosts:`) reach the server through one \
                     published port and speak http1 only; run {} with the loaders on this host",
                    spec.framework,
                    spec.protocols.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
                );
                    let port = handle
                        .published_port
                        .ok_or_else(|| anyhow::anyhow!("{} has no published port", handle.name))?;
                    Urls::http1(format!("http://{}:{port}", spread.server_address))
                }
            };
        Ok((
            DockerServer {
                handle,
                framework: spec.framework.clone(),
                urls: urls.clone(),
                probe_core: probe_core(spec),
                database,
                database_spec: spec.database.clone(),
            },
            Started {
                urls,
                cold_start_ms: ready.readiness.cold_start_ms.map(|ms| ms as f64),
                cold_start_is_upper_bound: ready.readiness.cold_start_is_upper_bound,
                limits,
                start_s: ready.start.as_secs_f64(),
                readiness_s: ready.readiness_wait.as_secs_f64(),
            },
        ))
    }

    async fn idle_memory(
        &mut self,
        server: &DockerServer,
        settle: Duration,
    ) -> anyhow::Result<Option<u64>> {
        // The settle is the server's idle time: starting the run's loader
        // container meanwhile touches nothing of the server and takes that
        // container's start out of the first round. A failure here is met
        // again, and reported, by the first round.
        // Loaders on other daemons (`hosts:`) run one container per round
        // there: nothing to prepare here.
        let expected = self
            .expected_loader
            .take()
            .filter(|_| self.spread.is_none());
        let prepare = async {
            if let Some(l) = expected {
                let _ = self.loader_host(&l).await;
            }
        };
        tokio::join!(tokio::time::sleep(settle), prepare);
        let sampler = self
            .engine
            .start_sampler(&server.handle, IDLE_SAMPLE_EVERY)
            .await?;
        // Five readings (the first, three ticks, the one `stop` takes).
        tokio::time::sleep(IDLE_SAMPLE_EVERY * 3 + IDLE_SAMPLE_EVERY / 2).await;
        let series = sampler.stop().await;
        let samples: Vec<f64> = series.samples.iter().map(|s| s.mem_bytes as f64).collect();
        Ok(crate::stats::median(&samples).map(|m| m as u64))
    }

    async fn verify(
        &mut self,
        server: &DockerServer,
        scenarios: &[Scenario],
        protocol: Protocol,
        tls: Option<&verify::VerifyTls>,
    ) -> anyhow::Result<VerifyOutcome> {
        let url = server.urls.of(protocol).ok_or_else(|| {
            anyhow::anyhow!(
                "{} is not spoken to in {protocol} on this run",
                server.framework
            )
        })?;
        let options = VerifyOptions {
            timeout: VERIFY_TIMEOUT,
            framework: Some(server.framework.clone()),
            protocol,
            tls: tls.filter(|_| protocol.is_tls()).cloned(),
            ..VerifyOptions::default()
        };
        let mut report = verify::verify_url(url, scenarios, &options)
            .await
            .with_context(|| format!("verifying {} at {url} ({protocol})", server.framework))?;
        if let Some(db) = &server.database {
            let access = verify::database::ContainerDatabase::new(self.engine, &db.handle);
            verify::database::check_report(&mut report, &options, &access).await;
        }
        Ok(outcome(&report, scenarios, protocol))
    }

    async fn measure(
        &mut self,
        server: &DockerServer,
        loader: &LoaderSpec,
    ) -> anyhow::Result<Measured> {
        // The server's cgroup is sampled from before the loader starts to
        // after it exits, so samples bracket the loader's window, whose
        // instants its report gives: CPU is interpolated at exactly those,
        // memory samples outside them are not used. The memory high-water
        // mark is reset when the loader announces its window and read when
        // it announces its end.
        let asked_ns = now_ns();
        let host = match self.spread {
            None => Some(self.loader_host(loader).await?),
            Some(_) => None,
        };
        let sampler = self
            .engine
            .start_sampler(&server.handle, SAMPLE_EVERY)
            .await?;
        let prober = server
            .probe_core
            .map(|core| (core, crate::host::speed::start(core, SAMPLE_EVERY)));
        let mut peak = self.engine.peak_watch(&server.handle).await.unwrap_or(None);
        // The database, in database scenarios: sampled like the server, its
        // statements counted at the window's edges.
        let db_sampler = match &server.database {
            Some(db) => Some(self.engine.start_sampler(&db.handle, SAMPLE_EVERY).await?),
            None => None,
        };
        let mut counts_at_start = None;
        let mut counts_at_end = None;
        // Statement counts are read over a connection of the lab's own at
        // the window's edges (a query, not a process start on the core the
        // database shares).
        let db_client = match &server.database {
            Some(db) => Some(crate::docker::database::connect(db).await),
            None => None,
        };
        let counts_now = || async {
            match &db_client {
                Some(Ok(c)) => crate::docker::database::counts_over(c).await,
                Some(Err(e)) => Err(anyhow::anyhow!("{e:#}")),
                None => Err(anyhow::anyhow!("no database")),
            }
        };
        let id = server.handle.id.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut mark = None;
        let mut end_mark = None;
        let mut announced = false;
        let mut window_peak = None;
        let mut before_reset = None;
        let loaded = {
            let run = self.load_once(server, loader, host.as_ref(), Some(tx));
            tokio::pin!(run);
            loop {
                tokio::select! {
                    // Lines first: the window's edges must be seen before
                    // the loader's exit is.
                    biased;
                    Some(line) = rx.recv() => {
                        let Some(p) = Progress::parse(&line) else { continue };
                        match &p {
                            Progress::Measure { .. } if !announced => {
                                announced = true;
                                sampler.sample_now();
                                mark = self.host.mark();
                                if let Some(s) = &db_sampler {
                                    s.sample_now();
                                    counts_at_start = Some(counts_now().await);
                                }
                                if let Some(w) = peak.as_mut() {
                                    match w.reset() {
                                        Ok(before) => before_reset = Some(before),
                                        Err(_) => peak = None,
                                    }
                                }
                            }
                            Progress::Drain { .. } => {
                                sampler.sample_now();
                                end_mark = self.host.mark();
                                if let Some(s) = &db_sampler {
                                    s.sample_now();
                                    counts_at_end = Some(counts_now().await);
                                }
                                window_peak = peak.as_mut().and_then(|w| w.read().ok());
                            }
                            _ => {}
                        }
                        self.show(&p);
                    }
                    loaded = &mut run => break loaded,
                }
            }
        };
        let loaded_ns = now_ns();
        let load_ended = std::time::Instant::now();
        if loaded.is_err() {
            // A loader that failed or was killed at its time limit may have
            // taken its container with it: the next round starts a new one.
            if let Some((_, h)) = self.loader_host.take() {
                let _ = self.engine.remove(&h).await;
            }
        }
        // Stopping takes a reading now, after the loader's exit and so after
        // the window's end: the window is bracketed without a wait.
        let series = sampler.stop().await;
        let db_series = match db_sampler {
            Some(s) => Some(s.stop().await),
            None => None,
        };
        let probed = match prober {
            Some((core, running)) => Some((
                core,
                tokio::task::spawn_blocking(move || running.stop())
                    .await
                    .map_err(std::io::Error::other)
                    .and_then(|r| r),
            )),
            None => None,
        };
        if !announced {
            loaded?;
            anyhow::bail!(
                "the load generator for {} never announced the start of its measured window \
                 (no `{{\"event\":\"measure\"}}` line on its stderr); is the fairground image current?",
                describe(server, loader)
            );
        }
        let (mut load, shares) = loaded?;
        // The window's instants must be on the samples' clock. A loader on
        // this kernel shares its CLOCK_MONOTONIC (its first connect falls
        // between asking and having the report); one on another host (a
        // remote DOCKER_HOST, or `hosts:` loaders, whose window `spread`
        // already put on this clock) does not: carry its instants on the
        // wall clock instead.
        let offset = spread::unix_ns() as i128 - now_ns() as i128;
        let (window, clock) = on_this_clock(load.window, asked_ns, loaded_ns, offset);
        let clock = if shares.is_empty() {
            clock
        } else {
            WINDOW_CLOCK_WALL
        };
        load.window = window;
        let mut lab = lab_figures(&load, &series, window_peak, loader, !shares.is_empty());
        lab.window_clock = clock.to_string();
        let work_from = counts_at_start
            .as_ref()
            .and_then(|c| c.as_ref().ok())
            .copied();
        if let (Some(series), Some(spec), Some(start)) =
            (&db_series, &server.database_spec, counts_at_start)
        {
            lab.database = Some(database_figures(&load, series, start, counts_at_end, spec));
        }
        // The rows the executor read and wrote: counted from the window's
        // start to a reading taken once the backends flushed their counts
        // (they keep them up to 10 s after the load stops).
        if let (Some(samples), Some(Ok(client)), Some(start), Some(scenario)) = (
            lab.database.as_mut(),
            &db_client,
            work_from,
            loader.args.scenario,
        ) {
            if let Some(need) = crate::docker::database::required_work(scenario) {
                // The counts start at their first reading, which a busy
                // database answers some way into the window: the work it
                // missed is that of the responses before it (at the
                // window's rate), and the need is the rest's.
                let ok = counted_responses(
                    load.responses.status_2xx,
                    load.window.start_unix_ns,
                    load.window.end_unix_ns,
                    start.at_unix_us.saturating_mul(1000),
                );
                let target = match server.urls.of(Protocol::Http1) {
                    Some(url) => {
                        verify::Endpoint::resolve(url, Protocol::Http1, None, VERIFY_TIMEOUT)
                            .await
                            .ok()
                    }
                    None => None,
                };
                let lanes = (loader.args.connections as u32).clamp(NUDGE_MIN, NUDGE_MAX);
                let page_rows = crate::contract::db::FORTUNES.len() as u64;
                let mut nudges =
                    verify::database::Nudges::new(target.as_ref(), scenario, page_rows, lanes);
                let settled = crate::docker::database::settled_counts(
                    client,
                    &start,
                    |d, rows| work_done(need, d, ok, rows),
                    load_ended,
                    &mut nudges,
                )
                .await
                .map(|(d, waited)| (d, waited, nudges.answered, nudges.rows));
                match settled {
                    Ok((d, waited, nudged, rows)) => {
                        let mut work = database_work(need, &d, waited, nudged, rows);
                        work.responses = Some(ok);
                        samples.work = Some(work);
                    }
                    Err(e) => {
                        samples.statements_unknown.get_or_insert(format!(
                            "the tables' row counters could not be read after the load: {e:#}"
                        ));
                    }
                }
            }
        }
        // Then the table changes behind the server's back, and a few
        // requests must see it: a cache still on after the load does not.
        if let (Some(samples), Some(db), Some(scenario), Some(url)) = (
            lab.database.as_mut(),
            &server.database,
            loader.args.scenario,
            server.urls.of(Protocol::Http1),
        ) {
            match table_change(self.engine, &db.handle, url, scenario).await {
                Ok(change) => samples.table_change = change,
                Err(e) => eprintln!(
                    "warning: the table-change check of {} could not run: {e:#}",
                    describe(server, loader)
                ),
            }
        }
        lab.loaders = shares;
        lab.machine = match probed {
            Some((core, Ok(samples))) => {
                let inside: Vec<_> = samples
                    .into_iter()
                    .filter(|s| (window.start_mono_ns..=window.end_mono_ns).contains(&s.t_mono_ns))
                    .collect();
                MachineSpeed::of(core, &inside)
            }
            Some((core, Err(e))) => {
                // Said once per run; the rounds simply go unprobed.
                if !self.probe_failed {
                    self.probe_failed = true;
                    eprintln!(
                        "warning: the calibration probe could not run on core {core} ({e}); rounds go unprobed"
                    );
                }
                None
            }
            None => None,
        };
        if let Some(p) = before_reset {
            self.lifetime_peak(&id, p);
        }
        if let Some(p) = lab.server.memory_window_peak_bytes {
            self.lifetime_peak(&id, p);
        }
        for s in &series.samples {
            if let Some(p) = s.mem_peak_bytes {
                self.lifetime_peak(&id, p);
            }
        }
        lab.server.memory_lifetime_peak_bytes = self.peaks.get(&id).copied();
        let state = self.engine.exit_state(&server.handle).await?;
        // The cgroup's counter says how many processes the kernel killed
        // this round; Docker's flag says the container itself was. Without
        // the counter and without the flag the count is unknown, not 0.
        let docker = u64::from(state.oom_killed);
        lab.server.oom_kills = match state.cgroup_oom_kills {
            Some(kills) => {
                let seen = self.oom_seen.insert(id, kills).unwrap_or(0);
                Some(kills.saturating_sub(seen).max(docker))
            }
            None => (docker > 0).then_some(docker),
        };
        lab.server.restarts = u64::from(!state.running);
        // Foreign CPU is the host's busy time less our own: without the
        // server's CPU it cannot be told, so no host figure rather than a
        // made-up one.
        let loader_cpu_us = load.loader.user_cpu_us + load.loader.sys_cpu_us;
        // The database is the run's own too (database scenarios).
        let database_cpu_us = match &lab.database {
            Some(d) => d.cpu_time_us,
            None => Some(0),
        };
        if let (Some(mark), Some(end), Some(server_cpu), Some(db_cpu)) =
            (mark, end_mark, lab.server.cpu_time_us, database_cpu_us)
        {
            lab.host = HostProbe::between(
                mark,
                end,
                server_cpu + loader_cpu_us + db_cpu,
                load.measured_s,
            );
        }
        let phases = loader_phases(&load, asked_ns, loaded_ns, now_ns());
        Ok(Measured { load, lab, phases })
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
        let removed = self
            .engine
            .remove(&server.handle)
            .await
            .with_context(|| format!("removing {}", server.handle.name));
        // The database goes too, whether or not the server could.
        if let Some(db) = &server.database {
            self.engine
                .remove(&db.handle)
                .await
                .with_context(|| format!("removing the database container {}", db.handle.name))?;
        }
        removed
    }

    async fn dependency_down(&mut self, server: &DockerServer) -> anyhow::Result<Option<String>> {
        let Some(db) = &server.database else {
            return Ok(None);
        };
        let state = self
            .engine
            .exit_state(&db.handle)
            .await
            .with_context(|| format!("inspecting the database container {}", db.handle.name))?;
        let oom = state.cgroup_oom_kills.is_some_and(|n| n > 0);
        Ok((!state.running || oom).then(|| {
            format!(
                "the database container {} {}",
                db.handle.name,
                state.describe()
            )
        }))
    }

    async fn engine_reachable(&mut self) -> bool {
        self.engine.host_cpus().await.is_ok()
    }
}

/// The core of `spec`'s server the calibration probe can run on: its
/// cpuset's first, when it has one and the daemon is on this machine (a
/// remote server's machine cannot be timed from here).
fn probe_core(spec: &ServerSpec) -> Option<usize> {
    if !crate::host::docker::daemon_is_local() {
        return None;
    }
    let cores: crate::host::CoreList = spec.resources.cpuset.as_deref()?.parse().ok()?;
    cores.to_vec().first().copied()
}

mod figures;
mod spread;

pub use figures::{
    database_figures, lab_figures, loader_phases, on_this_clock, outcome, WINDOW_CLOCK_WALL,
};
#[cfg(test)]
pub use figures::{PEAK_FROM_MARK, PEAK_FROM_SAMPLES, WINDOW_CLOCK_MONOTONIC};
/// Whether the counts `d` show the work `need` (a scenario's table, rows
/// read and written per response) for `ok` responses, less the gate's
/// slack.
fn work_done(
    need: (&'static str, f64, Option<f64>),
    d: &crate::docker::database::StatementCounts,
    ok: u64,
    nudge_rows: u64,
) -> bool {
    // The gate's slack: counts that already pass it pass it whole, and an
    // honest round then need not wait out the last backend's 10 s.
    let ok = ok as f64 * (1.0 - crate::judge::gates::DATABASE_WORK_SLACK);
    let (_, read, written) = need;
    rows_read_of(need.0, d).saturating_sub(nudge_rows) as f64 >= read * ok
        && written.is_none_or(|w| d.world_rows_written as f64 >= w * ok)
}

/// Of `ok` 2xx responses in the window `[start_ns, end_ns]` (wall clock),
/// those answered after `read_ns`, when the counts were first read: at the
/// window's rate, all of them when it was read before the window opened.
fn counted_responses(ok: u64, start_ns: u64, end_ns: u64, read_ns: u64) -> u64 {
    let window = end_ns.saturating_sub(start_ns);
    if read_ns <= start_ns || window == 0 {
        return ok;
    }
    let after = end_ns.saturating_sub(read_ns);
    (ok as f64 * after as f64 / window as f64).round() as u64
}

fn rows_read_of(table: &str, d: &crate::docker::database::StatementCounts) -> u64 {
    if table == "fortune" {
        d.fortune_rows_read
    } else {
        d.world_rows_read
    }
}

/// The round's work figure from the settled counts `d`, read `waited`
/// after the load ended.
fn database_work(
    need: (&'static str, f64, Option<f64>),
    d: &crate::docker::database::StatementCounts,
    waited: std::time::Duration,
    nudged: u64,
    nudge_rows: u64,
) -> crate::results::DatabaseWork {
    crate::results::DatabaseWork {
        table: need.0.to_string(),
        rows_read: rows_read_of(need.0, d).saturating_sub(nudge_rows),
        rows_written: d.world_rows_written,
        rows_read_per_request: None,
        rows_written_per_request: None,
        rows_read_required: need.1,
        rows_written_required: need.2,
        settled_after_s: waited.as_secs_f64(),
        nudged_responses: nudged,
        responses: None,
    }
}

/// Fewest and most connections of a nudge after a database round (one
/// request each; the load's connections, within these).
const NUDGE_MIN: u32 = 16;
const NUDGE_MAX: u32 = 64;

/// Requests of the spot check after a round's table change.
const SPOT_REQUESTS: u32 = 8;

/// Change the table `scenario` reads behind the server's back (every row of
/// `world` to a number it did not hold; a `fortune` row with markup added,
/// and taken away again) and ask [`SPOT_REQUESTS`] requests of `url`: what
/// they showed. `None` for a scenario that writes the table itself
/// (`updates`, checked for persistence instead); `Err` when the check
/// itself could not run.
async fn table_change<E: Engine>(
    engine: &E,
    db: &Handle,
    url: &str,
    scenario: Scenario,
) -> anyhow::Result<Option<crate::results::TableChange>> {
    use crate::contract::db;
    use crate::docker::database as pg;
    let target = verify::Endpoint::resolve(url, Protocol::Http1, None, VERIFY_TIMEOUT).await?;
    let mut session = verify::Session::new(&target);
    let mut rng = rand::rng();
    let seen = match scenario {
        Scenario::Db | Scenario::Queries(_) => {
            pg::own_work(engine, db, pg::CHANGE_WORLD_SQL).await?;
            let mut rows = Vec::new();
            for _ in 0..SPOT_REQUESTS {
                let req = crate::contract::sample_request(scenario, &mut rng);
                let resp = session.request(&req).await?;
                let count = match scenario {
                    Scenario::Db => None,
                    _ => Some(db::count_in_path(&req.path)),
                };
                rows.extend(db::check_world(&resp.body, count).map_err(anyhow::Error::msg)?);
            }
            let ids: Vec<u32> = rows.iter().map(|r| r.0).collect();
            let (stored, _) = pg::world_rows(engine, db, &ids).await?;
            let stale: Vec<String> = rows
                .iter()
                .filter(|(id, n)| stored.get(id) != Some(n))
                .map(|(id, n)| {
                    format!(
                        "id {id} returned {n}, stored {}",
                        stored.get(id).map_or("nothing".into(), u32::to_string)
                    )
                })
                .collect();
            if stale.is_empty() {
                Ok(format!(
                    "after fairground changed every row of world, {} rows of {SPOT_REQUESTS} requests held the new numbers",
                    rows.len()
                ))
            } else {
                Err(format!(
                    "after fairground changed every row of world, {} of {} rows of {SPOT_REQUESTS} requests held the old numbers: {}",
                    stale.len(),
                    rows.len(),
                    stale.into_iter().take(3).collect::<Vec<_>>().join("; ")
                ))
            }
        }
        Scenario::Fortunes => {
            pg::own_work(engine, db, &pg::add_fortune_sql()).await?;
            let mut first_wrong = None;
            let mut asked = Ok(());
            for _ in 0..SPOT_REQUESTS {
                let req = crate::contract::sample_request(scenario, &mut rng);
                match session.request(&req).await {
                    Ok(resp) => {
                        let page = String::from_utf8_lossy(&resp.body);
                        if let Err(e) = db::check_fortunes_with(
                            &page,
                            Some((pg::ADDED_ROW_ID, pg::ADDED_ROW_MESSAGE)),
                        ) {
                            first_wrong.get_or_insert(e);
                        }
                    }
                    Err(e) => {
                        asked = Err(e);
                        break;
                    }
                }
            }
            pg::own_work(engine, db, &pg::remove_fortune_sql()).await?;
            asked?;
            match first_wrong {
                None => Ok(format!(
                    "after fairground added a fortune with markup, {SPOT_REQUESTS} pages showed it, escaped"
                )),
                Some(e) => Err(format!(
                    "after fairground added a fortune, a page did not show it as it should: {e}"
                )),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(match seen {
        Ok(detail) => crate::results::TableChange {
            followed: true,
            detail,
        },
        Err(detail) => crate::results::TableChange {
            followed: false,
            detail,
        },
    }))
}

#[cfg(test)]
mod tests;
