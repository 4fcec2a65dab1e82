//! The end of a run: every worker thread's counters and histograms merged
//! into one [`LoadReport`], and the loader's own CPU use.

use std::sync::atomic::Ordering;

use super::conn::{Shared, ThreadStats};
use super::report::{
    self, ErrorCounts, LoadReport, Mode, RequestAccounting, StatusCounts, WarmupReport,
    WindowTimes, SCHEMA_VERSION,
};
use super::{histogram, limits, LoadConfig};

pub(super) fn loader_usage(
    start: limits::Usage,
    end: limits::Usage,
    responses: u64,
) -> report::LoaderUsage {
    let user = end.user_us.saturating_sub(start.user_us);
    let sys = end.sys_us.saturating_sub(start.sys_us);
    report::LoaderUsage {
        user_cpu_us: user,
        sys_cpu_us: sys,
        cpu_us_per_response: if responses > 0 {
            (user + sys) as f64 / responses as f64
        } else {
            0.0
        },
        peak_rss_kib: end.max_rss_kib,
        throttling: None,
    }
}

/// The fine series' bin width the run used (the plan's, from the window asked).
fn cfg_bin_ns(cfg: &LoadConfig) -> u64 {
    super::bursts::bin_ns(cfg.duration.as_nanos() as u64)
}

pub(super) fn merge(
    cfg: &LoadConfig,
    attempted: usize,
    threads: usize,
    shared: &Shared,
    stats: Vec<ThreadStats>,
    window: WindowTimes,
    warmup: WarmupReport,
) -> LoadReport {
    let mut responses = StatusCounts::default();
    let mut requests = RequestAccounting::default();
    let mut errors = ErrorCounts::default();
    let mut errors_whole_run = ErrorCounts::default();
    let (mut read, mut written, mut response_bytes) = (0u64, 0u64, 0u64);
    let (mut established, mut serving) = (0u64, 0u64);
    let (mut reconnects, mut reconnects_whole_run) = (0u64, 0u64);
    let mut hist = histogram::new_histogram();
    let mut hist_unc = histogram::new_histogram();
    let mut max_lag = 0u64;
    let mut windows_ok = vec![0u64; stats.first().map_or(0, |s| s.windows_ok.len())];
    let mut windows_err = windows_ok.clone();
    let mut windows_lat_ns = windows_ok.clone();
    let mut windows_lat_n = windows_ok.clone();
    let mut fine_ok = vec![0u64; stats.first().map_or(0, |s| s.fine_ok.len())];
    let mut answers = report::AnswerChecks::default();
    let mut handshakes = histogram::new_histogram();
    let mut tls_failed = 0u64;
    let mut tls_last_error = None;
    let mut tls_agreed = None;
    for s in &stats {
        responses.merge(&s.responses);
        requests.merge(&s.requests);
        errors.merge(&s.errors);
        errors_whole_run.merge(&s.errors_whole_run);
        read += s.bytes_read;
        written += s.bytes_written;
        response_bytes += s.response_bytes;
        established += s
            .first_connect_ns
            .iter()
            .filter(|&&t| t != 0 && t < window.start_mono_ns.max(1))
            .count() as u64;
        serving += s.served.iter().filter(|&&b| b).count() as u64;
        reconnects += s.reconnects;
        reconnects_whole_run += s.reconnects_whole_run;
        hist.add(&s.hist).expect("histograms share bounds");
        hist_unc
            .add(&s.hist_uncorrected)
            .expect("histograms share bounds");
        max_lag = max_lag.max(s.max_lag_ns);
        for (a, b) in windows_ok.iter_mut().zip(&s.windows_ok) {
            *a += b;
        }
        for (a, b) in fine_ok.iter_mut().zip(&s.fine_ok) {
            *a += b;
        }
        for (a, b) in windows_err.iter_mut().zip(&s.windows_err) {
            *a += b;
        }
        for (a, b) in windows_lat_ns.iter_mut().zip(&s.windows_latency_ns) {
            *a += b;
        }
        for (a, b) in windows_lat_n.iter_mut().zip(&s.windows_latency_n) {
            *a += b;
        }
        answers.checked += s.answers.checked;
        answers.wrong += s.answers.wrong;
        if answers.example.is_none() {
            answers.example.clone_from(&s.answers.example);
        }
        handshakes
            .add(&s.handshakes)
            .expect("histograms share bounds");
        tls_failed += s.tls_failed;
        if s.tls_last_error.is_some() {
            tls_last_error.clone_from(&s.tls_last_error);
        }
        if s.tls_agreed.is_some() {
            tls_agreed.clone_from(&s.tls_agreed);
        }
    }
    let tls = cfg.tls.as_ref().map(|_| {
        let (version, cipher_suite, alpn) = match tls_agreed {
            Some((v, c, a)) => (Some(v), Some(c), a),
            None => (None, None, None),
        };
        report::TlsReport {
            handshakes: handshakes.len(),
            failed: tls_failed,
            handshake: histogram::LatencySummary::of(&handshakes),
            version,
            cipher_suite,
            alpn,
            last_error: tls_last_error,
        }
    });
    let measured_s = window.end_mono_ns.saturating_sub(window.start_mono_ns) as f64 / 1e9;
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
            latency_mean_us: (windows_lat_n[i] > 0)
                .then(|| windows_lat_ns[i] as f64 / windows_lat_n[i] as f64 / 1e3),
        })
        .collect();
    let rate = cfg.rate.map(|target| {
        let achieved = per_s(responses.total());
        report::RateReport {
            target_rps: target,
            achieved_rps: achieved,
            ratio: achieved / target,
            max_schedule_lag_us: max_lag / 1000,
        }
    });
    let answered = requests.answered.total();
    let window_ns = window.end_mono_ns.saturating_sub(window.start_mono_ns);
    let bursts = super::bursts::analyse(&fine_ok, cfg_bin_ns(cfg), window_ns);
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
            protocol: cfg.protocol,
            streams: cfg.streams,
            warmup_s: cfg.warmup.as_secs_f64(),
            duration_s: cfg.duration.as_secs_f64(),
            timeout_ms: cfg.timeout.as_millis() as u64,
            connect_timeout_ms: cfg.connect_timeout.as_millis() as u64,
            rate_rps: cfg.rate,
            max_requests: cfg.max_requests,
            until_stable: cfg.until_stable.map(|(w, cv)| report::StableSettings {
                window_s: w.as_secs_f64(),
                max_cv: cv,
            }),
        },
        window,
        measured_s,
        warmup,
        responses,
        // Answers in waves: read over whole waves, not the window's edges.
        throughput_rps: bursts.map_or_else(|| per_s(responses.status_2xx), |b| b.rate_rps),
        bursts,
        requests,
        errors,
        errors_whole_run,
        drain_s: 0.0,
        connections: report::Connections {
            requested: cfg.connections as u64,
            attempted: attempted as u64,
            established,
            serving,
            peak_open: shared.peak_open.load(Ordering::Relaxed),
            reconnects,
            reconnects_whole_run,
        },
        bytes: report::WireBytes {
            read,
            written,
            mean_response_bytes: if answered > 0 {
                response_bytes as f64 / answered as f64
            } else {
                0.0
            },
        },
        latency: histogram::LatencySummary::of(&hist),
        uncorrected_latency: cfg.rate.map(|_| histogram::LatencySummary::of(&hist_unc)),
        rate,
        tls,
        // Set by the caller, which reads it from the connections' stats.
        http2_stream_limit: None,
        answers,
        loader: report::LoaderUsage::default(),
        windows,
        warnings: Vec::new(),
    }
}
