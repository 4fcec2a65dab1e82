//! `fairground load`: the load generator that produces every figure.
//!
//! Owns: running a closed-loop (wrk-like) or fixed-rate (wrk2-like,
//! coordinated-omission corrected) load against one HTTP/1.1 server and
//! returning a [`LoadReport`]. One current-thread tokio runtime per worker
//! thread, one task per connection, per-thread counters and histograms
//! merged at the end (see `conn` for the hot path).
//!
//! Phases, all on CLOCK_MONOTONIC from one start time shared by every
//! thread: connections open at `start`, and requests start as soon as every
//! connection slot's first connect has ended (the start gate, see
//! `conn::Worker::gate_keeper`); a response is
//! *measured* when its request was scheduled in `[start + warmup, start +
//! warmup + duration)` and completed before that end. The run stops at the
//! end whatever the server does: tasks still waiting are dropped with their
//! sockets, so the run is bounded by warmup + duration (+ a few ms).
//!
//! Must not: talk to Docker, print anything but the report and progress,
//! or resolve host names (the loader runs in a scratch container).

pub mod args;
pub mod conn;
pub mod histogram;
pub mod limits;
pub mod open;
pub mod parse;
pub mod report;
pub mod request;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

pub use histogram::decode as decode_histogram;
pub use report::{ErrorCounts, LoadReport, Mode, SCHEMA_VERSION};
pub use request::{CustomRequest, RequestSpec, Target};

use crate::contract::Scenario;
use conn::{LiveCounters, LoadPlan, Shared, ThreadStats, Worker};
use limits::now_ns;

/// Everything a load run needs. Build with [`LoadConfig::new`] and the
/// chained setters, or fill the fields directly.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Where to send the load (an IP address and port).
    pub target: Target,
    /// The URL as the user wrote it (for the report).
    pub url: String,
    /// What to send.
    pub request: RequestSpec,
    /// Keep-alive connections to hold.
    pub connections: usize,
    /// Worker threads (each with its own runtime); capped at `connections`.
    pub threads: usize,
    /// Measured duration.
    pub duration: Duration,
    /// Load before measuring (not counted).
    pub warmup: Duration,
    /// Fixed rate in requests per second; `None` is closed loop.
    pub rate: Option<f64>,
    /// Requests in flight per connection (closed loop: batch size).
    pub pipeline: usize,
    /// A request unanswered this long after it was sent is a timeout error.
    pub timeout: Duration,
    /// Longest wait for one connect.
    pub connect_timeout: Duration,
    /// Stop after this many measured requests (across all threads).
    pub max_requests: Option<u64>,
    /// Print one JSON progress line per second on stderr.
    pub progress: bool,
    /// Seed for request pools and ids.
    pub seed: u64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            target: Target::parse("http://127.0.0.1:8080/").expect("constant URL"),
            url: "http://127.0.0.1:8080/".into(),
            request: RequestSpec::default(),
            connections: 100,
            threads: 1,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            rate: None,
            pipeline: 1,
            timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(3),
            max_requests: None,
            progress: false,
            seed: 0x5eed,
        }
    }
}

impl LoadConfig {
    /// Defaults aimed at `url` (`http://IP:PORT[/path]`).
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            target: Target::parse(url)?,
            url: url.to_string(),
            ..Self::default()
        })
    }
    /// Send requests of a contract scenario.
    pub fn scenario(mut self, s: Scenario) -> Self {
        self.request = RequestSpec::Scenario(s);
        self
    }
    /// Send an ad-hoc request.
    pub fn custom(mut self, c: CustomRequest) -> Self {
        self.request = RequestSpec::Custom(c);
        self
    }
    /// Connections to hold.
    pub fn connections(mut self, n: usize) -> Self {
        self.connections = n;
        self
    }
    /// Worker threads.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }
    /// Measured duration.
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = d;
        self
    }
    /// Warmup before measuring.
    pub fn warmup(mut self, d: Duration) -> Self {
        self.warmup = d;
        self
    }
    /// Fixed rate, req/s.
    pub fn rate(mut self, r: f64) -> Self {
        self.rate = Some(r);
        self
    }
    /// Pipelining depth.
    pub fn pipeline(mut self, d: usize) -> Self {
        self.pipeline = d;
        self
    }
    /// Per-request timeout.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }
    /// Connect timeout.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
    /// Bound on measured requests.
    pub fn max_requests(mut self, n: u64) -> Self {
        self.max_requests = Some(n);
        self
    }

    /// Check the settings make sense; errors name the flag to fix.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.connections == 0 {
            bail!("--connections must be at least 1");
        }
        if self.threads == 0 {
            bail!("--threads must be at least 1");
        }
        if self.duration.is_zero() {
            bail!("--duration must be longer than zero");
        }
        if !(1..=1024).contains(&self.pipeline) {
            bail!("--pipeline must be from 1 to 1024 (got {})", self.pipeline);
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                bail!("--rate must be a positive number of requests per second (got {r})");
            }
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            bail!("--timeout and --connect-timeout must be longer than zero");
        }
        if self.max_requests == Some(0) {
            bail!("--requests must be at least 1");
        }
        Ok(())
    }

    fn scenario_name(&self) -> Option<String> {
        match &self.request {
            RequestSpec::Scenario(s) => Some(s.to_string()),
            RequestSpec::Custom(_) => None,
        }
    }

    fn method(&self) -> String {
        match &self.request {
            RequestSpec::Scenario(s) => s.method().to_string(),
            RequestSpec::Custom(c) => c.method.clone(),
        }
    }
}

/// Print these before the run (limits that will cap it) on stderr.
fn announce(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// Run the load and return what it saw. Blocks until the run ends
/// (warmup + duration at most, a few ms more for shutdown).
pub fn run(cfg: &LoadConfig) -> anyhow::Result<LoadReport> {
    cfg.validate()?;
    let (attempted, mut warnings) =
        limits::connection_capacity(cfg.connections, cfg.threads, cfg.target.addr);
    announce(&warnings);
    if attempted == 0 {
        bail!(
            "no connection can be opened within this process's limits: {}",
            warnings.join("; ")
        );
    }
    let threads = cfg.threads.min(attempted);
    let set = request::RequestSet::build(&cfg.target, &cfg.request, cfg.pipeline, cfg.seed);

    // A short lead lets every thread build its runtime before the clock starts.
    let start_ns = now_ns() + 2_000_000;
    let measure_start_ns = start_ns + cfg.warmup.as_nanos() as u64;
    let measure_end_ns = measure_start_ns + cfg.duration.as_nanos() as u64;
    let plan = Arc::new(LoadPlan {
        addr: cfg.target.addr,
        set,
        connections: attempted,
        pipeline: cfg.pipeline,
        rate: cfg.rate,
        start_ns,
        measure_start_ns,
        measure_end_ns,
        timeout_ns: cfg.timeout.as_nanos() as u64,
        connect_timeout: cfg.connect_timeout,
        seed: cfg.seed,
    });
    let shared = Arc::new(Shared::default());
    let lives: Vec<Arc<LiveCounters>> = (0..threads)
        .map(|_| Arc::new(LiveCounters::default()))
        .collect();

    let mut handles = Vec::with_capacity(threads);
    for (t, live) in lives.iter().enumerate() {
        // Connection i belongs to thread i % threads.
        let globals: Vec<usize> = (t..attempted).step_by(threads).collect();
        let permits = match cfg.max_requests {
            None => u64::MAX,
            Some(n) => n / threads as u64 + u64::from((t as u64) < n % threads as u64),
        };
        let (plan, live, shared) = (Arc::clone(&plan), Arc::clone(live), Arc::clone(&shared));
        let handle = std::thread::Builder::new()
            .name(format!("load-{t}"))
            .spawn(move || worker_thread(plan, globals, permits, live, shared))
            .context("cannot start a load worker thread")?;
        handles.push(handle);
    }

    // Main thread: CPU snapshots at the measurement boundaries, progress.
    let run_start = start_ns;
    let mut cpu_at_measure_start = None;
    let mut throttling_at_measure_start = None;
    let mut next_tick = start_ns + 1_000_000_000;
    let (mut last_ok, mut last_err) = (0u64, 0u64);
    while handles.iter().any(|h| !h.is_finished()) {
        // Coarse on purpose: this thread only snapshots CPU time at the
        // start of measurement and prints progress once a second; it wakes
        // at the start of measurement itself, not up to a tick after it.
        let mut nap = Duration::from_millis(20);
        if cpu_at_measure_start.is_none() {
            nap = nap.min(Duration::from_nanos(
                measure_start_ns.saturating_sub(now_ns()),
            ));
        }
        std::thread::sleep(nap);
        let now = now_ns();
        if cpu_at_measure_start.is_none() && now >= measure_start_ns {
            cpu_at_measure_start = Some(limits::usage());
            throttling_at_measure_start = limits::cpu_throttling();
            if cfg.progress {
                // The orchestrator starts its server probe on this line.
                let t = ((now - run_start) as f64 / 1e6).round() / 1e3;
                eprintln!("{}", report::Progress::Measure { t }.line());
            }
        }
        if cfg.progress && now >= next_tick {
            let ok: u64 = lives.iter().map(|l| l.ok.load(Ordering::Relaxed)).sum();
            let err: u64 = lives.iter().map(|l| l.errors.load(Ordering::Relaxed)).sum();
            let t = (now - run_start) as f64 / 1e9;
            let phase = if now < measure_start_ns {
                report::Phase::Warmup
            } else {
                report::Phase::Measure
            };
            let tick = report::Progress::Tick {
                t: (t * 10.0).round() / 10.0,
                phase,
                ok: ok - last_ok,
                errors: err - last_err,
            };
            eprintln!("{}", tick.line());
            (last_ok, last_err) = (ok, err);
            next_tick += 1_000_000_000;
        }
    }
    let cpu_end = limits::usage();
    let throttling_end = limits::cpu_throttling();
    let cpu_start = cpu_at_measure_start.unwrap_or(cpu_end);
    let mut stats = Vec::with_capacity(threads);
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a load worker thread panicked"))?
            .context("load worker thread failed")?;
        stats.push(s);
    }
    let mut report = merge(
        cfg, &plan, attempted, threads, &shared, stats, cpu_start, cpu_end,
    );
    if let (Some(start), Some(end)) = (throttling_at_measure_start, throttling_end) {
        report.loader.throttling = end.since(start);
    }
    if let Some(rate) = &report.rate {
        if rate.ratio < 0.98 {
            report.warnings.push(format!(
                "achieved {:.0} req/s of the {:.0} req/s target ({:.1}%): the server or the loader could not keep up",
                rate.achieved_rps,
                rate.target_rps,
                rate.ratio * 100.0
            ));
        }
    }
    let established = report.connections.established;
    if (established as usize) < cfg.connections {
        report.warnings.push(format!(
            "only {established} of the {} requested connections were established",
            cfg.connections
        ));
    }
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    Ok(report)
}

fn worker_thread(
    plan: Arc<LoadPlan>,
    globals: Vec<usize>,
    permits: u64,
    live: Arc<LiveCounters>,
    shared: Arc<Shared>,
) -> anyhow::Result<ThreadStats> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build a tokio runtime for a load worker")?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let worker = std::rc::Rc::new(
            Worker::new(Arc::clone(&plan), globals.len(), permits, live, shared)
                .context("cannot create the fixed-rate pacer (timerfd)")?,
        );
        tokio::time::sleep_until(worker.instant_at(plan.start_ns)).await;
        tokio::task::spawn_local(std::rc::Rc::clone(&worker).gate_keeper());
        tokio::task::spawn_local(std::rc::Rc::clone(&worker).timeout_sweeper());
        if let Some(p) = &worker.pacer {
            tokio::task::spawn_local(std::rc::Rc::clone(p).run());
        }
        let tasks: Vec<_> = globals
            .iter()
            .enumerate()
            .map(|(local, &global)| {
                tokio::task::spawn_local(conn::connection(
                    std::rc::Rc::clone(&worker),
                    global,
                    local,
                ))
            })
            .collect();
        let all = futures_util::future::join_all(tasks);
        let end = worker.instant_at(plan.measure_end_ns);
        tokio::select! {
            _ = all => {
                worker.stats.borrow_mut().finished_ns = Some(now_ns());
            }
            () = tokio::time::sleep_until(end) => {}
        }
        let windows = worker.stats.borrow().windows_ok.len();
        let stats = worker.stats.replace(ThreadStats::new(windows));
        anyhow::Ok(stats)
    })
}

#[allow(clippy::too_many_arguments)]
fn merge(
    cfg: &LoadConfig,
    plan: &LoadPlan,
    attempted: usize,
    threads: usize,
    shared: &Shared,
    stats: Vec<ThreadStats>,
    cpu_start: limits::Usage,
    cpu_end: limits::Usage,
) -> LoadReport {
    let mut status = [0u64; 6];
    let mut errors = ErrorCounts::default();
    let mut errors_whole_run = ErrorCounts::default();
    let (mut read, mut written, mut response_bytes) = (0u64, 0u64, 0u64);
    let (mut established, mut reconnects) = (0u64, 0u64);
    let mut hist = histogram::new_histogram();
    let mut hist_unc = histogram::new_histogram();
    let mut max_lag = 0u64;
    let mut windows_ok = vec![0u64; stats.first().map_or(0, |s| s.windows_ok.len())];
    let mut windows_err = windows_ok.clone();
    let mut all_finished = true;
    let mut finished_at = plan.measure_start_ns;
    for s in &stats {
        for (a, b) in status.iter_mut().zip(s.status) {
            *a += b;
        }
        errors.merge(&s.errors);
        errors_whole_run.merge(&s.errors_whole_run);
        read += s.bytes_read;
        written += s.bytes_written;
        response_bytes += s.response_bytes;
        established += s.established;
        reconnects += s.reconnects;
        hist.add(&s.hist).expect("histograms share bounds");
        hist_unc
            .add(&s.hist_uncorrected)
            .expect("histograms share bounds");
        max_lag = max_lag.max(s.max_lag_ns);
        for (a, b) in windows_ok.iter_mut().zip(&s.windows_ok) {
            *a += b;
        }
        for (a, b) in windows_err.iter_mut().zip(&s.windows_err) {
            *a += b;
        }
        match s.finished_ns {
            Some(t) => finished_at = finished_at.max(t),
            None => all_finished = false,
        }
    }
    let measured_end = if all_finished {
        finished_at.min(plan.measure_end_ns)
    } else {
        plan.measure_end_ns
    };
    let measured_s = (measured_end.saturating_sub(plan.measure_start_ns)) as f64 / 1e9;
    let total: u64 = status.iter().sum();
    let per_s = |n: u64| {
        if measured_s > 0.0 {
            n as f64 / measured_s
        } else {
            0.0
        }
    };
    // Keep only the windows the measured period really covered.
    let covered = (measured_s.ceil() as usize).min(windows_ok.len());
    let windows = (0..covered)
        .map(|i| report::Window {
            t_s: i as u64,
            ok: windows_ok[i],
            errors: windows_err[i],
        })
        .collect();
    let cpu_user = cpu_end.user_us.saturating_sub(cpu_start.user_us);
    let cpu_sys = cpu_end.sys_us.saturating_sub(cpu_start.sys_us);
    let rate = cfg.rate.map(|target| {
        let achieved = per_s(total);
        report::RateReport {
            target_rps: target,
            achieved_rps: achieved,
            ratio: achieved / target,
            max_schedule_lag_us: max_lag / 1000,
        }
    });
    LoadReport {
        schema_version: SCHEMA_VERSION,
        settings: report::RunSettings {
            url: cfg.url.clone(),
            scenario: cfg.scenario_name(),
            method: cfg.method(),
            mode: if cfg.rate.is_some() {
                Mode::FixedRate
            } else {
                Mode::Closed
            },
            threads,
            pipeline: cfg.pipeline,
            warmup_s: cfg.warmup.as_secs_f64(),
            duration_s: cfg.duration.as_secs_f64(),
            timeout_ms: cfg.timeout.as_millis() as u64,
            connect_timeout_ms: cfg.connect_timeout.as_millis() as u64,
            rate_rps: cfg.rate,
            max_requests: cfg.max_requests,
        },
        measured_s,
        responses: report::Responses {
            total,
            status_2xx: status[2],
            status_3xx: status[3],
            status_4xx: status[4],
            status_5xx: status[5],
            status_other: status[0] + status[1],
        },
        throughput_rps: per_s(status[2]),
        errors,
        errors_whole_run,
        connections: report::Connections {
            requested: cfg.connections,
            attempted,
            established,
            peak_open: shared.peak_open.load(Ordering::Relaxed),
            reconnects,
        },
        bytes: report::WireBytes {
            read,
            written,
            mean_response_bytes: if total > 0 {
                response_bytes as f64 / total as f64
            } else {
                0.0
            },
        },
        latency: histogram::LatencySummary::of(&hist),
        uncorrected_latency: cfg.rate.map(|_| histogram::LatencySummary::of(&hist_unc)),
        rate,
        loader: report::LoaderUsage {
            user_cpu_us: cpu_user,
            sys_cpu_us: cpu_sys,
            cpu_us_per_response: if total > 0 {
                (cpu_user + cpu_sys) as f64 / total as f64
            } else {
                0.0
            },
            peak_rss_kib: cpu_end.max_rss_kib,
            throttling: None,
        },
        windows,
        warnings: Vec::new(),
    }
}
