//! A scripted [`Lab`] for tests: each framework gets a [`Script`] saying how
//! fast it is and what goes wrong (start failure, verify exclusions, a
//! client-bound loader, dropped connections, an OOM kill, a loader error, a
//! Ctrl-C in the middle of a round). It logs every call so tests can check
//! that every started server was stopped.

use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;

use super::execute::Cancel;
use super::lab::{Lab, Measured, Prepared, Started, Urls};
use crate::contract::{Protocol, Scenario};
use crate::plan::spec::{LoaderSpec, ServerSpec};
use crate::results::{
    AnswerChecks, AppliedLimits, Connections, ErrorCounts, Exclusion, HostUse, LabFigures,
    PhaseTimes, RequestAccounting, ServerSamples, StatusCounts, VerifyOutcome, WindowTimes,
};
use crate::roles::load::report::{
    LatencySummary, LoaderUsage, Mode, RunSettings, WarmupReport, Window, WireBytes,
};
use crate::roles::load::LoadReport;

/// Clean figures for one 10 s round at `concurrency` doing `rps` req/s:
/// every request sent in the window answered, latency whose mean obeys
/// Little's law (concurrency / rps).
pub(crate) fn measurement(concurrency: u32, rps: f64) -> Measured {
    let ok = (rps * 10.0).round() as u64;
    // 90% at x and 10% at 3x: a mean of 1.2x = concurrency / rps.
    let x = ((f64::from(concurrency) / rps.max(1.0)) * 1e9 / 1.2).max(1.0) as u64;
    let mut h = Histogram::<u64>::new(3).unwrap();
    h.record_n(x, ok * 9 / 10).unwrap();
    h.record_n(x * 3, ok - ok * 9 / 10).unwrap();
    let c = u64::from(concurrency);
    let answered = StatusCounts {
        status_2xx: ok,
        ..StatusCounts::default()
    };
    let window = WindowTimes {
        connects_mono_ns: 1_000_000_000,
        start_mono_ns: 3_000_000_000,
        end_mono_ns: 13_000_000_000,
        start_unix_ns: 1_796_000_000_000_000_000,
        end_unix_ns: 1_796_000_010_000_000_000,
    };
    let load = LoadReport {
        schema_version: crate::roles::load::SCHEMA_VERSION,
        settings: RunSettings {
            url: "http://10.0.0.1:8080".into(),
            scenario: Some("plaintext".into()),
            method: "GET".into(),
            mode: Mode::Closed,
            threads: 1,
            pipeline: 1,
            protocol: Protocol::Http1,
            streams: 1,
            warmup_s: 2.0,
            duration_s: 10.0,
            timeout_ms: 2_000,
            connect_timeout_ms: 3_000,
            rate_rps: None,
            max_requests: None,
            until_stable: None,
        },
        window,
        measured_s: 10.0,
        warmup: WarmupReport {
            seconds: 2.0,
            stable: None,
            windows_ok: vec![ok / 10; 2],
        },
        responses: answered,
        throughput_rps: ok as f64 / 10.0,
        bursts: None,
        requests: RequestAccounting {
            sent: ok,
            answered,
            lost: ErrorCounts::default(),
            ..RequestAccounting::default()
        },
        errors: ErrorCounts::default(),
        errors_whole_run: ErrorCounts::default(),
        drain_s: 0.01,
        connections: Connections::all_served(c),
        bytes: WireBytes {
            read: ok * 120,
            written: ok * 40,
            mean_response_bytes: 120.0,
        },
        latency: LatencySummary::of(&h),
        uncorrected_latency: None,
        tls: None,
        http2_stream_limit: None,
        rate: None,
        answers: AnswerChecks {
            checked: ok / 1000,
            wrong: 0,
            example: None,
        },
        loader: LoaderUsage {
            user_cpu_us: 5_000_000,
            sys_cpu_us: 1_000_000,
            ..LoaderUsage::default()
        },
        windows: (0..10)
            .map(|t_s| Window {
                t_s,
                ok: ok / 10,
                errors: 0,
                latency_mean_us: None,
            })
            .collect(),
        warnings: Vec::new(),
    };
    let lab = LabFigures {
        window_clock: crate::bench::docker_lab::WINDOW_CLOCK_MONOTONIC.to_string(),
        loader_usable_cpus: 1.0,
        loader_threads: 1,
        server: ServerSamples {
            cpu_time_us: Some(ok * 20),
            cpu_unknown: None,
            sampler_stopped_by: None,
            memory_before_bytes: Some(1 << 20),
            memory_samples_bytes: vec![2 << 20; 10],
            memory_window_peak_bytes: Some(3 << 20),
            memory_peak_source: "high-water mark".into(),
            memory_lifetime_peak_bytes: Some(4 << 20),
            oom_kills: Some(0),
            restarts: 0,
        },
        host: Some(HostUse {
            cpus: 4,
            load_1m_before: 0.2,
            load_1m_after: 1.8,
            busy_cores: 1.6,
            foreign_cores: 0.05,
            softirq_cores: 0.1,
            steal_cores: 0.0,
        }),
        loaders: Vec::new(),
        machine: None,
        database: None,
    };
    Measured {
        load,
        lab,
        phases: PhaseTimes {
            loader_start_s: 0.25,
            connect_s: 0.01,
            warmup_s: 2.0,
            window_s: 10.0,
            drain_s: 0.01,
            loader_exit_s: 0.1,
            sampling_s: 0.05,
            ..PhaseTimes::default()
        },
    }
}

/// How one framework behaves.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    /// Throughput it reaches, req/s.
    pub rps: f64,
    /// Starting it fails with this message.
    pub start_error: Option<String>,
    /// Scenarios verify excludes, with the reason.
    pub excluded: Vec<(Scenario, String)>,
    /// Protocols whose verification fails every scenario (e.g. a server
    /// whose TLS handshake fails), with the reason.
    pub broken_protocols: Vec<(Protocol, String)>,
    /// Loader CPU use as a fraction of its allotment.
    pub loader_fraction: f64,
    /// Share of requested connections really established.
    pub established_fraction: f64,
    /// The round (scenario, concurrency, round) in which it is OOM-killed.
    pub oom_at: Option<(Scenario, u32, u32)>,
    /// The round in which the loader fails.
    pub loader_error_at: Option<(Scenario, u32, u32)>,
    /// Round-to-round swing of throughput: even rounds reach
    /// rps × (1 + jitter), odd ones rps × (1 − jitter).
    pub jitter: f64,
    /// Rounds (scenario, round) measured on a slowed machine: the probe
    /// reads 8.5 µs instead of 5.0 µs and throughput is 30% lower. When
    /// any is set, every round carries a probe reading and its server
    /// keeps 0.9 cores busy.
    pub slowed_at: Vec<(Scenario, u32)>,
    /// The round in which its database container exits (exit 137, OOM).
    pub database_dies_at: Option<(Scenario, u32, u32)>,
    /// Stopping its server fails with this message (the container is
    /// left behind).
    pub stop_error: Option<String>,
    /// Building its image (when images are deferred) fails with this
    /// message.
    pub build_error: Option<String>,
    /// Seconds one of its rounds takes on the lab's clock when the lab
    /// keeps its own ([`FakeLab::virtual_clock`]).
    pub round_s: f64,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            rps: 10_000.0,
            start_error: None,
            excluded: vec![],
            broken_protocols: vec![],
            loader_fraction: 0.6,
            established_fraction: 1.0,
            oom_at: None,
            loader_error_at: None,
            jitter: 0.0,
            slowed_at: vec![],
            database_dies_at: None,
            stop_error: None,
            build_error: None,
            round_s: 10.0,
        }
    }
}

/// A running fake server.
#[derive(Debug)]
pub(crate) struct FakeServer {
    id: u32,
    framework: String,
}

/// The round of a loader run, from its label (`a-json-c10-r1`), and
/// whether it is an until-stable warm-up window (`…-r1-warm0`).
fn round_of(l: &LoaderSpec) -> (u32, bool) {
    let warm = l.label.contains("-warm");
    let base = l.label.split("-warm").next().unwrap_or_default();
    let round = base
        .rsplit_once("-r")
        .and_then(|(_, r)| r.parse().ok())
        .expect("loader labels end in -rN");
    (round, warm)
}

/// The scripted lab.
#[derive(Debug, Default)]
pub(crate) struct FakeLab {
    /// Behaviour per framework (missing: [`Script::default`]).
    pub scripts: BTreeMap<String, Script>,
    /// Every call, in order: `start a#1`, `measure a plaintext c=10 r0`, …
    pub log: Vec<String>,
    /// Cancel this token in the middle of the n-th measure call (1-based).
    pub interrupt: Option<(usize, Cancel)>,
    /// The daemon goes away during the n-th measure call (1-based): that
    /// call and every call after it fail as an unreachable daemon does.
    pub daemon_gone_at: Option<usize>,
    /// Frameworks whose image is built just before their first server
    /// ([`Lab::prepare`]); each is built once.
    pub deferred: BTreeSet<String>,
    /// Keep a clock of its own ([`Lab::now`]): a build takes 100 s, a
    /// start 2 s, a stop 0.5 s, a round its script's `round_s`, and nothing
    /// else any time.
    pub virtual_clock: bool,
    clock_s: f64,
    epoch: std::sync::OnceLock<std::time::Instant>,
    daemon_gone: bool,
    db_dead: BTreeSet<u32>,
    measures: usize,
    next_id: u32,
    running: BTreeSet<u32>,
    dead: BTreeSet<u32>,
}

impl FakeLab {
    fn script(&self, fw: &str) -> Script {
        self.scripts.get(fw).cloned().unwrap_or_default()
    }

    /// Servers started and never stopped.
    pub fn leaked(&self) -> usize {
        self.running.len()
    }

    /// Number of starts of `fw`.
    pub fn starts(&self, fw: &str) -> usize {
        self.log
            .iter()
            .filter(|l| l.starts_with(&format!("start {fw}#")))
            .count()
    }

    /// Number of measure calls.
    pub fn measures(&self) -> usize {
        self.measures
    }

    /// Let `seconds` pass on the lab's own clock.
    fn pass(&mut self, seconds: f64) {
        if self.virtual_clock {
            self.clock_s += seconds;
        }
    }

    /// Fail as a call to a daemon that went away does.
    fn reachable(&self, doing: &str) -> anyhow::Result<()> {
        if self.daemon_gone {
            anyhow::bail!(
                "{doing}: cannot reach the Docker daemon at unix:///var/run/docker.sock (connection refused)"
            );
        }
        Ok(())
    }
}

impl Lab for FakeLab {
    type Server = FakeServer;

    async fn prepare(&mut self, spec: &ServerSpec) -> anyhow::Result<Option<Prepared>> {
        let framework = spec.framework.as_str();
        if !self.deferred.remove(framework) {
            return Ok(None);
        }
        self.reachable(&format!("building {framework}"))?;
        self.log.push(format!("build {framework}"));
        self.pass(100.0);
        if let Some(e) = self.script(framework).build_error {
            anyhow::bail!("{e}");
        }
        Ok(Some(Prepared {
            image: crate::docker::images::ImageInfo {
                kind: crate::docker::images::ImageKind::Framework,
                name: framework.to_string(),
                tag: spec.image.clone(),
                id: format!("sha256:built-{framework}"),
                size_bytes: Some(3 << 20),
                inputs_hash: "0".repeat(64),
                reused: false,
                versions: Some(format!("{framework} 1.2.3\n")),
                app_binary_bytes: Some(1 << 20),
            },
            seconds: 2.5,
            load_after: Some(1.5),
        }))
    }

    async fn start(&mut self, spec: &ServerSpec) -> anyhow::Result<(FakeServer, Started)> {
        let framework = spec.framework.as_str();
        self.reachable(&format!("starting {framework}"))?;
        if let Some(e) = self.script(framework).start_error {
            self.log.push(format!("start {framework} failed"));
            anyhow::bail!("{e}");
        }
        self.pass(2.0);
        self.next_id += 1;
        self.running.insert(self.next_id);
        self.log.push(format!("start {framework}#{}", self.next_id));
        Ok((
            FakeServer {
                id: self.next_id,
                framework: framework.to_string(),
            },
            Started {
                urls: Urls::on(&format!("10.0.0.{}", self.next_id), spec),
                cold_start_ms: Some(40.0 + f64::from(self.next_id)),
                cold_start_is_upper_bound: false,
                limits: Some(AppliedLimits {
                    cpus: Some(1.0),
                    cpuset: Some("0".into()),
                    memory_bytes: Some(1 << 30),
                    memory_swap_bytes: Some(1 << 30),
                    nofile_soft: Some(65_536),
                    nofile_hard: Some(65_536),
                    read_only_rootfs: true,
                    cap_drop: vec!["ALL".into()],
                    ..AppliedLimits::default()
                }),
                start_s: 0.1,
                readiness_s: 0.04,
            },
        ))
    }

    async fn idle_memory(
        &mut self,
        _: &FakeServer,
        _: std::time::Duration,
    ) -> anyhow::Result<Option<u64>> {
        Ok(Some(1 << 20))
    }

    async fn verify(
        &mut self,
        s: &FakeServer,
        scenarios: &[Scenario],
        protocol: Protocol,
        _tls: Option<&crate::verify::VerifyTls>,
    ) -> anyhow::Result<VerifyOutcome> {
        let script = self.script(&s.framework);
        if protocol == Protocol::Http1 {
            self.log.push(format!("verify {}", s.framework));
        } else {
            self.log.push(format!("verify {} {protocol}", s.framework));
        }
        let broken = script
            .broken_protocols
            .iter()
            .find(|(p, _)| *p == protocol)
            .map(|(_, why)| why.clone());
        let excluded: Vec<Exclusion> = match broken {
            Some(why) => scenarios
                .iter()
                .map(|&scenario| Exclusion {
                    scenario,
                    protocol,
                    reason: why.clone(),
                })
                .collect(),
            None => script
                .excluded
                .iter()
                .filter(|(sc, _)| scenarios.contains(sc))
                .map(|(scenario, reason)| Exclusion {
                    scenario: *scenario,
                    protocol,
                    reason: reason.clone(),
                })
                .collect(),
        };
        Ok(VerifyOutcome {
            checks: 10 * scenarios.len() as u64,
            failed: excluded.len() as u64,
            passed: scenarios
                .iter()
                .filter(|s| !excluded.iter().any(|e| e.scenario == **s))
                .copied()
                .collect(),
            excluded,
        })
    }

    async fn measure(&mut self, s: &FakeServer, l: &LoaderSpec) -> anyhow::Result<Measured> {
        let framework = s.framework.clone();
        let scenario = l.args.scenario.unwrap_or(Scenario::Plaintext);
        let concurrency = l.args.connections as u32;
        let (round, warm) = round_of(l);
        if warm {
            self.log.push(format!(
                "warm {framework} {scenario} c={concurrency} r{round}"
            ));
            return Ok(measurement(concurrency, self.script(&framework).rps));
        }
        self.measures += 1;
        self.log.push(format!(
            "measure {framework} {scenario} c={concurrency} r{round}"
        ));
        self.pass(self.script(&framework).round_s);
        if self.daemon_gone_at == Some(self.measures) {
            self.daemon_gone = true;
        }
        self.reachable("reading the server's cgroup")?;
        if let Some((n, cancel)) = &self.interrupt {
            if *n == self.measures {
                cancel.cancel();
                std::future::pending::<()>().await;
            }
        }
        let script = self.script(&s.framework);
        let at = Some((scenario, concurrency, round));
        if script.loader_error_at == at {
            anyhow::bail!("loader container exited with code 1: connection refused");
        }
        let swing = if round % 2 == 0 { 1.0 } else { -1.0 };
        let slowed = script.slowed_at.contains(&(scenario, round));
        let speed = if slowed { 0.7 } else { 1.0 };
        let mut m = measurement(
            concurrency,
            script.rps * speed * (1.0 + swing * script.jitter),
        );
        if !script.slowed_at.is_empty() {
            // A server that keeps its core busy (0.9 cores over the 10 s
            // window), so the probe judges its rounds.
            m.lab.server.cpu_time_us = Some(9_000_000);
            let exchange_ns = if slowed { 8_500.0 } else { 5_000.0 };
            m.lab.machine = Some(crate::results::MachineSpeed {
                core: 0,
                samples: 12,
                exchange_ns,
                exchange_ns_min: exchange_ns * 0.97,
                exchange_ns_max: exchange_ns * 1.03,
            });
        }
        m.load.loader.user_cpu_us = (script.loader_fraction * 10.0 * 1e6) as u64;
        m.load.loader.sys_cpu_us = 0;
        let served = (f64::from(concurrency) * script.established_fraction).round() as u64;
        m.load.connections.established = served;
        m.load.connections.serving = served;
        if script.oom_at == at {
            m.lab.server.oom_kills = Some(1);
            self.dead.insert(s.id);
        }
        if script.database_dies_at == at {
            self.db_dead.insert(s.id);
        }
        Ok(m)
    }

    async fn alive(&mut self, s: &FakeServer) -> anyhow::Result<bool> {
        self.reachable(&format!("inspecting {}#{}", s.framework, s.id))?;
        Ok(!self.dead.contains(&s.id))
    }

    async fn stop(&mut self, s: FakeServer) -> anyhow::Result<()> {
        self.log.push(format!("stop {}#{}", s.framework, s.id));
        self.pass(0.5);
        self.reachable(&format!("removing fg-fake-{}-{}", s.framework, s.id))?;
        if let Some(e) = self.script(&s.framework).stop_error {
            // Left behind, as a container the daemon would not remove is.
            anyhow::bail!("removing fg-fake-{}-{}: {e}", s.framework, s.id);
        }
        self.running.remove(&s.id);
        Ok(())
    }

    async fn dependency_down(&mut self, s: &FakeServer) -> anyhow::Result<Option<String>> {
        self.reachable("inspecting the database container")?;
        Ok(self.db_dead.contains(&s.id).then(|| {
            format!(
                "the database container fg-fake-{}-{}-db OOM-killed by the kernel: memory limit exceeded (exit 137)",
                s.framework, s.id
            )
        }))
    }

    async fn engine_reachable(&mut self) -> bool {
        !self.daemon_gone
    }

    fn now(&self) -> std::time::Instant {
        let epoch = *self.epoch.get_or_init(std::time::Instant::now);
        if self.virtual_clock {
            epoch + std::time::Duration::from_secs_f64(self.clock_s)
        } else {
            std::time::Instant::now()
        }
    }
}
