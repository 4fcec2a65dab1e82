//! `fairground load`: the load generator that produces every figure.
//!
//! Owns: running a closed-loop (wrk-like) or fixed-rate (wrk2-like,
//! coordinated-omission corrected) load against one HTTP/1.1 server and
//! returning a [`LoadReport`]. One current-thread tokio runtime per worker
//! thread, one task per connection, per-thread counters and histograms
//! merged at the end (see `conn` for the hot path).
//!
//! Phases, on CLOCK_MONOTONIC, driven by the main thread (docs/loader.md):
//! connections open at `start` and requests start once every connection
//! slot's first connect has ended (the start gate, see
//! `conn::Worker::gate_keeper`); the warm-up runs from the gate for
//! `--warmup` (or, until stable, until the last three windows agree); then
//! the measured window of `--duration`; then the drain, at most `--timeout`,
//! in which every request sent inside the window is answered or times out
//! while the load goes on. Throughput counts the answers completed inside
//! the window; latency, every answer to a request sent inside it. The run is
//! bounded by connect timeout + warm-up + duration + timeout (+ a few ms).
//!
//! Must not: talk to Docker, print anything but the report and progress,
//! or resolve host names (the loader runs in a scratch container).

pub mod args;
pub mod bursts;
pub mod combine;
pub mod config;
pub mod conn;
pub mod histogram;
pub mod limits;
mod merge;
pub mod open;
pub mod parse;
pub mod report;
pub mod request;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

pub use config::LoadConfig;
pub use histogram::decode as decode_histogram;
pub use report::{ErrorCounts, LoadReport, Mode, SCHEMA_VERSION};
pub use request::{CustomRequest, RequestSpec, Target};

use crate::host::clock::now_ns;
use conn::{LiveCounters, LoadPlan, Shared, ThreadStats, Worker};
use report::{WarmupReport, WindowTimes};

/// Print these before the run (limits that will cap it) on stderr.
fn announce(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// How long the main thread sleeps at most between two looks at the run.
const MAIN_NAP: Duration = Duration::from_millis(20);

/// An until-stable window opens this far after the main thread decides, so
/// every worker thread sees its start before it comes.
const WINDOW_LEAD_NS: u64 = 1_000_000;

/// Unix time now, ns.
fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Where the run is, as the main thread sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Connections opening, before the start gate.
    Connecting,
    /// Warming up since the gate opened at `since`.
    Warmup { since: u64 },
    /// Inside the window.
    Window,
    /// After the window: requests of the window being answered.
    Drain,
}

/// The until-stable test over warm-up windows: throughput (closed loop) or
/// mean latency (fixed rate, where throughput is pinned to the rate).
struct Stability {
    window_ns: u64,
    max_cv: f64,
    fixed_rate: bool,
    next_ns: u64,
    last: (u64, u64, u64),
    values: Vec<f64>,
}

impl Stability {
    /// Close every warm-up window that ended by `now` from the live
    /// counters `(ok, latency_us, answers)`; whether the last
    /// [`crate::stats::STABLE_WINDOWS`] agree.
    fn stable(&mut self, now: u64, live: (u64, u64, u64)) -> bool {
        let mut stable = false;
        while now >= self.next_ns {
            let (ok, lat, n) = (
                live.0 - self.last.0,
                live.1 - self.last.1,
                live.2 - self.last.2,
            );
            self.last = live;
            self.next_ns += self.window_ns;
            let v = if self.fixed_rate {
                if n == 0 {
                    f64::INFINITY
                } else {
                    lat as f64 / n as f64
                }
            } else {
                ok as f64
            };
            self.values.push(v);
            stable = crate::stats::stable(
                &self.values,
                crate::stats::STABLE_WINDOWS as usize,
                self.max_cv,
            );
        }
        stable
    }
}

/// Longest the start barrier may make a loader wait.
const MAX_BARRIER_WAIT_NS: u64 = 120_000_000_000;

/// Run the load and return what it saw. Blocks until the run ends
/// (connect timeout + warm-up + duration + timeout at most, a few ms more).
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
    let set = request::RequestSet::build(
        &cfg.target,
        &cfg.request,
        cfg.pipeline,
        cfg.seed,
        cfg.timeout,
    );

    // The start barrier: loaders on several hosts connect at one wall-clock
    // instant, so their warm-ups and windows coincide.
    if let Some(at) = cfg.start_at_unix_ns {
        let wait = at.saturating_sub(unix_ns());
        if wait > MAX_BARRIER_WAIT_NS {
            bail!(
                "--start-at-unix-ns is {:.0} s away; the barrier waits at most {} s (are the clocks of the hosts far apart?)",
                wait as f64 / 1e9,
                MAX_BARRIER_WAIT_NS / 1_000_000_000
            );
        }
        std::thread::sleep(std::time::Duration::from_nanos(wait));
    }
    // A short lead lets every thread build its runtime before the clock starts.
    let start_ns = now_ns() + 2_000_000;
    let duration_ns = cfg.duration.as_nanos() as u64;
    let timeout_ns = cfg.timeout.as_nanos() as u64;
    let warmup_ns = cfg.warmup.as_nanos() as u64;
    let plan = Arc::new(LoadPlan {
        fixed_warmup_ns: cfg.until_stable.is_none().then_some(warmup_ns),
        duration_ns,
        addr: cfg.target.addr,
        authority: cfg.target.authority.clone(),
        set,
        connections: attempted,
        pipeline: cfg.pipeline,
        rate: cfg.rate,
        start_ns,
        timeout_ns,
        connect_timeout: cfg.connect_timeout,
        seed: cfg.seed,
        window_seconds: duration_ns.div_ceil(1_000_000_000) as usize,
        fine_bin_ns: bursts::bin_ns(duration_ns),
        tls: cfg.tls.clone(),
        protocol: cfg.protocol,
        streams: cfg.streams,
        #[cfg(test)]
        drop_one_record: cfg.drop_one_record,
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

    // Main thread: the run's phases, CPU snapshots at the window's edges,
    // progress once a second.
    let sum = |f: fn(&LiveCounters) -> &std::sync::atomic::AtomicU64| -> u64 {
        lives.iter().map(|l| f(l).load(Ordering::Relaxed)).sum()
    };
    let live_now = || (sum(|l| &l.ok), sum(|l| &l.latency_us), sum(|l| &l.answers));
    let mut stability = cfg.until_stable.map(|(window, max_cv)| Stability {
        window_ns: window.as_nanos() as u64,
        max_cv,
        fixed_rate: cfg.rate.is_some(),
        next_ns: u64::MAX,
        last: (0, 0, 0),
        values: Vec::new(),
    });
    let mut stage = Stage::Connecting;
    let mut stable = None;
    let mut warm_windows: Vec<u64> = Vec::new();
    let mut warm_seconds = 0.0;
    let (mut cpu_start, mut cpu_end) = (None, None);
    let (mut throttle_start, mut throttle_end) = (None, None);
    let mut window = WindowTimes {
        connects_mono_ns: start_ns,
        ..WindowTimes::default()
    };
    let mut next_tick = start_ns + 1_000_000_000;
    let (mut last_ok, mut last_err) = (0u64, 0u64);
    let progress = |p: report::Progress| {
        if cfg.progress {
            eprintln!("{}", p.line());
        }
    };
    let since_start = |t: u64| ((t.saturating_sub(start_ns)) as f64 / 1e6).round() / 1e3;
    while handles.iter().any(|h| !h.is_finished()) {
        let now = now_ns();
        match stage {
            Stage::Connecting => {
                let gate = shared.gate_ns.load(Ordering::Acquire);
                if gate != 0 {
                    stage = Stage::Warmup { since: gate };
                    if let Some(st) = stability.as_mut() {
                        st.next_ns = gate + st.window_ns;
                        st.last = live_now();
                    }
                    continue;
                }
            }
            Stage::Warmup { since } => {
                // Fixed warm-up: the gate set the window already. Until
                // stable: open it just ahead of now, so every thread knows
                // it before it begins.
                let opened = shared.window().0;
                let start = match stability.as_mut() {
                    // Fixed: the gate set it. Until stable and decided
                    // already: keep it (deciding again would move the
                    // window ahead on every pass and it would never open).
                    None => opened,
                    Some(_) if opened != u64::MAX => opened,
                    Some(st) => {
                        let open = if st.stable(now, live_now()) {
                            stable = Some(true);
                            true
                        } else if now >= since + warmup_ns {
                            stable = Some(false);
                            true
                        } else {
                            false
                        };
                        if open {
                            let at = now + WINDOW_LEAD_NS;
                            shared.open_window(at, duration_ns);
                            at
                        } else {
                            u64::MAX
                        }
                    }
                };
                // The loop's nap ends at the window's start (the CPU
                // snapshot is its edge); until then, nothing to do.
                if start != u64::MAX {
                    if let Some(wait) = start.checked_sub(now_ns()).filter(|&w| w > 0) {
                        if wait < 200_000 {
                            std::thread::sleep(Duration::from_nanos(wait));
                        }
                    }
                    if now_ns() >= start {
                        window.start_mono_ns = start;
                        window.start_unix_ns = unix_ns() - (now_ns() - start);
                        warm_seconds = (start - since) as f64 / 1e9;
                        cpu_start = Some(limits::usage());
                        throttle_start = limits::cpu_throttling();
                        stage = Stage::Window;
                        // The orchestrator starts its server probe on this line.
                        progress(report::Progress::Measure {
                            t: since_start(start),
                            mono_ns: start,
                        });
                    }
                }
            }
            Stage::Window => {
                let (_, end) = shared.window();
                if now >= end {
                    cpu_end = Some(limits::usage());
                    throttle_end = limits::cpu_throttling();
                    window.end_mono_ns = end;
                    window.end_unix_ns = unix_ns() - (now - end);
                    // Every request of the window gets its timeout (and one
                    // sweep of the timeout table) to be answered.
                    let stop = end + timeout_ns + conn::sweep_period(timeout_ns).as_nanos() as u64;
                    shared.stop_ns.store(stop, Ordering::Release);
                    stage = Stage::Drain;
                    progress(report::Progress::Drain {
                        t: since_start(now),
                        mono_ns: end,
                    });
                }
            }
            Stage::Drain => {}
        }
        if now >= next_tick {
            let ok = sum(|l| &l.ok);
            let err = sum(|l| &l.errors);
            let phase = match stage {
                Stage::Connecting | Stage::Warmup { .. } => report::Phase::Warmup,
                Stage::Window => report::Phase::Measure,
                Stage::Drain => report::Phase::Drain,
            };
            if phase == report::Phase::Warmup && stage != Stage::Connecting {
                warm_windows.push(ok - last_ok);
            }
            progress(report::Progress::Tick {
                t: ((now - start_ns) as f64 / 1e8).round() / 10.0,
                phase,
                ok: ok - last_ok,
                errors: err - last_err,
            });
            (last_ok, last_err) = (ok, err);
            next_tick += 1_000_000_000;
        }
        // Wake for the next tick or the window's next edge, whichever comes
        // first: the CPU snapshots are taken at the edges themselves.
        let edge = match stage {
            Stage::Warmup { .. } => shared.window().0,
            Stage::Window => shared.window().1,
            _ => u64::MAX,
        };
        let now = now_ns();
        let next = next_tick.min(edge);
        std::thread::sleep(
            MAIN_NAP.min(Duration::from_nanos(next.saturating_sub(now).max(100_000))),
        );
    }
    let mut stats = Vec::with_capacity(threads);
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a load worker thread panicked"))?
            .context("load worker thread failed")?;
        stats.push(s);
    }
    // A run cut short (`--requests` used up, or no connection ever opened)
    // ends its window when its last thread finished.
    if stage != Stage::Drain {
        let last = stats
            .iter()
            .filter_map(|s| s.finished_ns)
            .max()
            .unwrap_or_else(now_ns);
        if window.start_mono_ns == 0 {
            window.start_mono_ns = last;
            window.start_unix_ns = unix_ns();
        }
        window.end_mono_ns = last.max(window.start_mono_ns);
        window.end_unix_ns = window.start_unix_ns + (window.end_mono_ns - window.start_mono_ns);
    }
    let cpu_end = cpu_end.unwrap_or_else(limits::usage);
    let cpu_start = cpu_start.unwrap_or(cpu_end);
    let drain_end = stats
        .iter()
        .filter_map(|s| s.finished_ns)
        .max()
        .unwrap_or_else(now_ns);
    let warmup = WarmupReport {
        seconds: warm_seconds,
        stable,
        windows_ok: warm_windows,
    };
    let stream_limit = stats.iter().filter_map(|s| s.h2_stream_limit).min();
    let mut report = merge::merge(cfg, attempted, threads, &shared, stats, window, warmup);
    report.http2_stream_limit = stream_limit.map(|l| l as u64);
    if let Some(limit) = stream_limit {
        report.warnings.push(format!(
            "the server allows {limit} concurrent streams per connection \
             (SETTINGS_MAX_CONCURRENT_STREAMS), fewer than --streams {}: the others waited \
             in the loader's queue, and their wait is in the latency",
            cfg.streams
        ));
    }
    report.drain_s = drain_end.saturating_sub(window.end_mono_ns) as f64 / 1e9;
    report.loader = merge::loader_usage(cpu_start, cpu_end, report.responses.total());
    if let (Some(start), Some(end)) = (throttle_start, throttle_end) {
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
    let c = report.connections;
    if c.established < cfg.connections as u64 {
        report.warnings.push(format!(
            "only {} of the {} requested connections were established",
            c.established, cfg.connections
        ));
    }
    if report.warmup.stable == Some(false) {
        report.warnings.push(format!(
            "the warm-up was not stable after {:.1}s; the window opened anyway",
            report.warmup.seconds
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
            Worker::new(Arc::clone(&plan), globals.clone(), permits, live, shared)
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
        tokio::select! {
            _ = all => {}
            () = std::rc::Rc::clone(&worker).until_done() => {}
        }
        let now = now_ns();
        // What the drain did not resolve is counted from the connections'
        // own queues and schedules: timed out (its deadline passed), still
        // in flight, or due and never sent. Never silently dropped.
        worker.settle_accounts(now);
        let mut stats = worker.stats.borrow_mut();
        stats.finished_ns = Some(now);
        let (local, windows) = (stats.served.len(), stats.windows_ok.len());
        let out = std::mem::replace(&mut *stats, ThreadStats::new(local, windows, 0));
        anyhow::Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Scenario;

    /// The accounting identity is a check, not a tautology: drop one
    /// answered record on purpose and it must fail; leave the loader alone
    /// and it must hold, against the same server.
    #[test]
    fn accounting_check_fails_when_a_record_is_dropped() {
        let server = crate::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
        let url = format!("http://{}", server.addr);
        let cfg = |drop: bool| {
            let mut c = LoadConfig::new(&url)
                .unwrap()
                .scenario(Scenario::Plaintext)
                .connections(4)
                .duration(Duration::from_millis(300))
                .timeout(Duration::from_millis(500));
            c.drop_one_record = drop;
            c
        };
        let clean = run(&cfg(false)).unwrap();
        assert!(clean.requests.balanced(), "{:?}", clean.requests);
        assert!(clean.requests.sent > 0);
        let broken = run(&cfg(true)).unwrap();
        assert!(!broken.requests.balanced(), "{:?}", broken.requests);
        let q = broken.requests;
        assert_eq!(
            q.sent,
            q.answered.total() + q.lost.total() + q.in_flight_at_end + 1,
            "exactly the dropped record is missing: {q:?}"
        );
        server.stop();
    }

    /// The reference server over TLS with a run's certificate for 127.0.0.1.
    fn tls_server(certs: &crate::tls::RunCerts) -> crate::roles::serve::Server {
        let config = crate::tls::server_config(
            certs.chain_pem.as_bytes(),
            certs.key_pem.as_bytes(),
            crate::contract::Protocol::Https,
        )
        .unwrap();
        crate::roles::serve::start_with(
            "127.0.0.1".parse().unwrap(),
            0,
            1,
            crate::roles::serve::Wire::Tls(config),
        )
        .unwrap()
    }

    fn https_load(url: &str, ca: &str) -> LoadReport {
        let mut c = LoadConfig::new(url)
            .unwrap()
            .scenario(Scenario::Plaintext)
            .connections(4)
            .duration(Duration::from_millis(300))
            .timeout(Duration::from_millis(500))
            .connect_timeout(Duration::from_millis(500));
        c.tls = Some(
            config::TlsClient::new(ca.as_bytes(), "127.0.0.1", crate::contract::Protocol::Https)
                .unwrap(),
        );
        c.protocol = crate::contract::Protocol::Https;
        run(&c).unwrap()
    }

    /// https: every connection does one handshake, agrees HTTP/1.1, and
    /// every request is answered and checked as over plain HTTP.
    #[test]
    fn https_handshakes_once_per_connection_and_answers_like_http() {
        let certs = crate::tls::RunCerts::make(&["127.0.0.1".into()]).unwrap();
        let server = tls_server(&certs);
        let r = https_load(&format!("https://{}", server.addr), &certs.ca_pem);
        server.stop();
        assert!(
            r.requests.balanced() && r.requests.sent > 0,
            "{:?}",
            r.requests
        );
        assert_eq!(r.errors_whole_run.total(), 0, "{:?}", r.errors_whole_run);
        assert_eq!(r.connections.serving, 4, "{:?}", r.connections);
        assert!(
            r.answers.checked > 0 && r.answers.wrong == 0,
            "{:?}",
            r.answers
        );
        let t = r.tls.expect("an https run reports its TLS");
        assert_eq!((t.handshakes, t.failed), (4, 0), "{t:?}");
        assert_eq!(t.alpn.as_deref(), Some("http/1.1"), "{t:?}");
        assert!(t.version.is_some() && t.handshake.p50_us > 0, "{t:?}");
    }

    /// A server whose certificate another CA signed is never measured:
    /// every attempt is a TLS error, no connection is established.
    #[test]
    fn https_refuses_a_certificate_the_run_did_not_make() {
        let ours = crate::tls::RunCerts::make(&["127.0.0.1".into()]).unwrap();
        let theirs = crate::tls::RunCerts::make(&["127.0.0.1".into()]).unwrap();
        let server = tls_server(&theirs);
        let r = https_load(&format!("https://{}", server.addr), &ours.ca_pem);
        server.stop();
        assert_eq!(r.connections.established, 0, "{:?}", r.connections);
        assert!(r.errors_whole_run.tls > 0, "{:?}", r.errors_whole_run);
        assert_eq!(r.responses.total(), 0);
        let t = r.tls.expect("an https run reports its TLS");
        assert_eq!(t.handshakes, 0, "{t:?}");
        assert!(
            t.last_error
                .as_deref()
                .is_some_and(|e| e.contains("certificate")),
            "{t:?}"
        );
    }
}
