//! Several loaders' reports made into one, exactly: counters summed,
//! HDR histograms added bucket by bucket (percentiles are read from the
//! merged histogram, never averaged), per-second windows summed by second.
//!
//! The loaders ran behind one start barrier (`--start-at-unix-ns`), so
//! their windows cover the same wall-clock span; the combined window is
//! the loaders' mean measured length (each timed on its own monotonic
//! clock), its wall-clock edges the earliest start and latest end.

use anyhow::{bail, Context};

use super::histogram::{self, LatencySummary};
use super::report::{LoadReport, Throttling};

/// Add histogram `b` (encoded) into `into`.
fn add(into: &mut hdrhistogram::Histogram<u64>, b: &str) -> anyhow::Result<()> {
    let h = histogram::decode(b)?;
    into.add(&h)
        .context("two loaders' histograms have different bounds")
}

/// One report of `reports` (at least one), merged exactly.
pub fn combine(reports: &[LoadReport]) -> anyhow::Result<LoadReport> {
    let Some(first) = reports.first() else {
        bail!("no loader report to combine");
    };
    if reports.len() == 1 {
        return Ok(first.clone());
    }
    let mut out = first.clone();
    let mut hist = histogram::new_histogram();
    let mut hist_unc = histogram::new_histogram();
    let mut handshakes = histogram::new_histogram();
    let (mut answered, mut response_bytes) = (0u64, 0.0f64);
    let mut measured = 0.0;
    let mut throttling: Option<Throttling> = None;
    out.warnings.clear();
    for (i, r) in reports.iter().enumerate() {
        add(&mut hist, &r.latency.histogram)
            .with_context(|| format!("loader {}'s latency histogram", i + 1))?;
        if let Some(u) = &r.uncorrected_latency {
            add(&mut hist_unc, &u.histogram)?;
        }
        if let Some(t) = &r.tls {
            add(&mut handshakes, &t.handshake.histogram)
                .with_context(|| format!("loader {}'s handshake histogram", i + 1))?;
        }
        measured += r.measured_s;
        let a = r.requests.answered.total();
        answered += a;
        response_bytes += r.bytes.mean_response_bytes * a as f64;
        if let Some(t) = r.loader.throttling {
            let acc = throttling.get_or_insert(Throttling {
                periods: 0,
                throttled_periods: 0,
            });
            acc.periods += t.periods;
            acc.throttled_periods += t.throttled_periods;
        }
        out.warnings
            .extend(r.warnings.iter().map(|w| format!("loader {}: {w}", i + 1)));
        if i == 0 {
            continue;
        }
        out.settings.threads += r.settings.threads;
        out.settings.rate_rps = match (out.settings.rate_rps, r.settings.rate_rps) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        out.window.start_unix_ns = out.window.start_unix_ns.min(r.window.start_unix_ns);
        out.window.end_unix_ns = out.window.end_unix_ns.max(r.window.end_unix_ns);
        out.warmup.seconds = out.warmup.seconds.max(r.warmup.seconds);
        out.warmup.stable = match (out.warmup.stable, r.warmup.stable) {
            (Some(a), Some(b)) => Some(a && b),
            (a, b) => a.or(b),
        };
        sum_into(&mut out.warmup.windows_ok, &r.warmup.windows_ok);
        out.responses.merge(&r.responses);
        out.requests.merge(&r.requests);
        out.errors.merge(&r.errors);
        out.errors_whole_run.merge(&r.errors_whole_run);
        out.drain_s = out.drain_s.max(r.drain_s);
        let (c, o) = (&mut out.connections, &r.connections);
        c.requested += o.requested;
        c.attempted += o.attempted;
        c.established += o.established;
        c.serving += o.serving;
        c.peak_open += o.peak_open;
        c.reconnects += o.reconnects;
        c.reconnects_whole_run += o.reconnects_whole_run;
        out.bytes.read += r.bytes.read;
        out.bytes.written += r.bytes.written;
        out.answers.checked += r.answers.checked;
        out.answers.wrong += r.answers.wrong;
        if out.answers.example.is_none() {
            out.answers.example.clone_from(&r.answers.example);
        }
        let (l, o) = (&mut out.loader, &r.loader);
        l.user_cpu_us += o.user_cpu_us;
        l.sys_cpu_us += o.sys_cpu_us;
        l.peak_rss_kib = l.peak_rss_kib.max(o.peak_rss_kib);
        for w in &r.windows {
            match out.windows.iter_mut().find(|x| x.t_s == w.t_s) {
                Some(x) => {
                    x.ok += w.ok;
                    x.errors += w.errors;
                }
                None => out.windows.push(*w),
            }
        }
        if let (Some(a), Some(b)) = (out.rate.as_mut(), r.rate.as_ref()) {
            a.target_rps += b.target_rps;
            a.max_schedule_lag_us = a.max_schedule_lag_us.max(b.max_schedule_lag_us);
        }
        // The lowest limit any loader met: the one the cell's flag names.
        out.http2_stream_limit = match (out.http2_stream_limit, r.http2_stream_limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let (Some(a), Some(b)) = (out.tls.as_mut(), r.tls.as_ref()) {
            a.handshakes += b.handshakes;
            a.failed += b.failed;
            if b.last_error.is_some() {
                a.last_error.clone_from(&b.last_error);
            }
        }
    }
    if let Some(t) = out.tls.as_mut() {
        t.handshake = LatencySummary::of(&handshakes);
    }
    out.measured_s = measured / reports.len() as f64;
    let per_s = |n: u64| {
        if out.measured_s > 0.0 {
            n as f64 / out.measured_s
        } else {
            0.0
        }
    };
    out.throughput_rps = per_s(out.responses.status_2xx);
    // A loader whose answers came in waves read its rate over whole waves;
    // the loaders' rates then add (each over its own window), and the
    // waves are the first such loader's, their size scaled to the sum.
    if let Some(first) = reports.iter().find_map(|r| r.bursts) {
        let rate: f64 = reports.iter().map(|r| r.throughput_rps).sum();
        out.bursts = Some(super::bursts::Bursts {
            rate_rps: rate,
            per_burst: rate * first.period_s,
            window_rps: out.throughput_rps,
            ..first
        });
        out.throughput_rps = rate;
    }
    out.bytes.mean_response_bytes = if answered > 0 {
        response_bytes / answered as f64
    } else {
        0.0
    };
    out.latency = LatencySummary::of(&hist);
    out.uncorrected_latency = out
        .uncorrected_latency
        .as_ref()
        .map(|_| LatencySummary::of(&hist_unc));
    let total = out.responses.total();
    if let Some(rate) = out.rate.as_mut() {
        rate.achieved_rps = per_s(total);
        rate.ratio = if rate.target_rps > 0.0 {
            rate.achieved_rps / rate.target_rps
        } else {
            0.0
        };
    }
    out.loader.throttling = throttling;
    let cpu = out.loader.user_cpu_us + out.loader.sys_cpu_us;
    out.loader.cpu_us_per_response = if total > 0 {
        cpu as f64 / total as f64
    } else {
        0.0
    };
    out.windows.sort_by_key(|w| w.t_s);
    Ok(out)
}

fn sum_into(into: &mut Vec<u64>, add: &[u64]) {
    if into.len() < add.len() {
        into.resize(add.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(add) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::Duration;

    use super::*;
    use crate::contract::Scenario;
    use crate::roles::load::LoadConfig;

    /// Two real loaders (in-process, one after the other) against the
    /// reference server.
    fn two_reports() -> (LoadReport, LoadReport) {
        let server = crate::roles::serve::start(IpAddr::V4(Ipv4Addr::LOCALHOST), 0, 1).unwrap();
        let url = format!("http://{}", server.addr);
        let run = |c: usize| {
            let cfg = LoadConfig::new(&url)
                .unwrap()
                .scenario(Scenario::Plaintext)
                .connections(c)
                .threads(1)
                .duration(Duration::from_millis(300));
            crate::roles::load::run(&cfg).unwrap()
        };
        let out = (run(2), run(3));
        server.stop();
        out
    }

    #[test]
    fn merged_histogram_counts_every_request_of_every_loader() {
        let (a, b) = two_reports();
        let m = combine(&[a.clone(), b.clone()]).unwrap();
        assert!(a.latency.count > 0 && b.latency.count > 0);
        assert_eq!(m.latency.count, a.latency.count + b.latency.count);
        assert_eq!(
            m.responses.status_2xx,
            a.responses.status_2xx + b.responses.status_2xx
        );
        assert_eq!(m.connections.requested, 5);
        assert_eq!(m.settings.threads, 2);
        let windows: u64 = m.windows.iter().map(|w| w.ok).sum();
        let parts: u64 = a.windows.iter().chain(&b.windows).map(|w| w.ok).sum();
        assert_eq!(windows, parts);
        // Percentiles come from the merged histogram: the max is the larger
        // of the two, never their mean.
        assert_eq!(m.latency.max_us, a.latency.max_us.max(b.latency.max_us));
        let mean_len = (a.measured_s + b.measured_s) / 2.0;
        assert!((m.measured_s - mean_len).abs() < 1e-12);
    }

    /// A loader that met waves read its rate over whole waves: the
    /// loaders' rates add, and the combined report keeps the waves.
    #[test]
    fn loaders_that_met_waves_add_their_rates_over_whole_waves() {
        let (mut a, b) = two_reports();
        assert_eq!((a.bursts, b.bursts), (None, None));
        a.bursts = Some(crate::roles::load::bursts::Bursts {
            period_s: 0.2,
            per_burst: 60.0,
            rate_rps: 300.0,
            window_rps: 320.0,
            periodicity: 0.95,
            concentration: 1.0,
            bin_s: 0.01,
        });
        a.throughput_rps = 300.0;
        let m = combine(&[a, b.clone()]).unwrap();
        let rate = 300.0 + b.throughput_rps;
        assert!(
            (m.throughput_rps - rate).abs() < 1e-9,
            "{}",
            m.throughput_rps
        );
        let w = m.bursts.expect("the waves are kept");
        assert_eq!(w.period_s, 0.2);
        assert!((w.per_burst - rate * 0.2).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn the_lowest_stream_limit_any_loader_met_is_the_rounds() {
        let (mut a, mut b) = two_reports();
        assert_eq!(
            combine(&[a.clone(), b.clone()]).unwrap().http2_stream_limit,
            None
        );
        b.http2_stream_limit = Some(4);
        assert_eq!(
            combine(&[a.clone(), b.clone()]).unwrap().http2_stream_limit,
            Some(4)
        );
        a.http2_stream_limit = Some(2);
        assert_eq!(combine(&[a, b]).unwrap().http2_stream_limit, Some(2));
    }

    #[test]
    fn one_report_is_returned_unchanged() {
        let (a, _) = two_reports();
        assert_eq!(combine(std::slice::from_ref(&a)).unwrap(), a);
        assert!(combine(&[]).is_err());
    }
}
