//! One round's load from several loaders on other Docker daemons: the
//! round's connections (and rate) split between them, every loader told
//! to connect at one wall-clock instant (`--start-at-unix-ns`) so their
//! windows coincide, their reports merged exactly (`load::combine`), and
//! each loader's own figures kept.
//!
//! The loaders run on their hosts' network stacks (no NAT of their own
//! between them and the wire) and reach the server through its published
//! port. The merged window is put on this machine's monotonic clock
//! through the wall clock, so the server's samples are bracketed as in a
//! one-host round.

use std::time::Duration;

use anyhow::Context;

use super::{describe, parse_report, DockerServer, Spread, BARRIER_LEAD};
use crate::docker::container::{ContainerSpec, HOST_NETWORK};
use crate::docker::engine::{Engine, LineSink};
use crate::docker::RunId;
use crate::host::clock::now_ns;
use crate::plan::spec::LoaderSpec;
use crate::results::LoaderShare;
use crate::roles::load::LoadReport;

/// Connections of loader `i` of `n` when `total` are split between them.
pub fn split(total: usize, n: usize, i: usize) -> usize {
    total / n + usize::from(i < total % n)
}

/// Run the round's loaders on the daemons of `spread` (container names
/// `names`) and merge their reports; loader 1's progress goes to `lines`.
pub(super) async fn load<E: Engine>(
    spread: &Spread<'_, E>,
    run: &RunId,
    names: Vec<String>,
    server: &DockerServer,
    loader: &LoaderSpec,
    lines: Option<LineSink>,
) -> anyhow::Result<(LoadReport, Vec<LoaderShare>)> {
    let n = spread.loaders.len();
    let what = describe(server, loader);
    if loader.args.connections < n {
        anyhow::bail!(
            "{what}: {} connection(s) cannot be split between {n} loaders; \
             use a concurrency of at least {n}",
            loader.args.connections
        );
    }
    let start_at = unix_ns() + BARRIER_LEAD.as_nanos() as u64;
    let runs =
        spread
            .loaders
            .iter()
            .zip(names)
            .enumerate()
            .map(|(i, ((engine, endpoint), name))| {
                let mut l = loader.clone();
                l.args.connections = split(loader.args.connections, n, i);
                l.args.rate = loader.args.rate.map(|r| r / n as f64);
                l.args.start_at_unix_ns = Some(start_at);
                l.time_limit += BARRIER_LEAD;
                let spec = ContainerSpec::loader(run, name, &l, HOST_NETWORK, &l.args.url);
                let sink = if i == 0 { lines.clone() } else { None };
                let what = format!("{what} (loader {} on {endpoint})", i + 1);
                async move {
                    let out = engine
                        .run_to_exit(&spec, l.time_limit, sink)
                        .await
                        .with_context(|| format!("load generator for {what}"))?;
                    parse_report(&out.stdout, &what)
                }
            });
    let reports = futures_util::future::try_join_all(runs).await?;
    let mut merged = crate::roles::load::combine::combine(&reports)?;
    let earliest = reports
        .iter()
        .map(|r| r.window.start_unix_ns)
        .min()
        .unwrap_or(0);
    let shares = reports
        .iter()
        .zip(&spread.loaders)
        .map(|(r, (_, endpoint))| share(r, endpoint, loader, earliest))
        .collect();
    // The loaders' monotonic clocks are their hosts'; the server's samples
    // are on this machine's. Their wall clocks are the common ground.
    let first = reports[0].window;
    let offset = unix_ns() as i128 - now_ns() as i128;
    let mono = |unix: u64| (unix as i128 - offset).max(0) as u64;
    let w = &mut merged.window;
    w.start_mono_ns = mono(w.start_unix_ns);
    w.end_mono_ns = mono(w.end_unix_ns);
    w.connects_mono_ns = w
        .start_mono_ns
        .saturating_sub(first.start_mono_ns.saturating_sub(first.connects_mono_ns));
    Ok((merged, shares))
}

/// One loader's own figures.
fn share(r: &LoadReport, endpoint: &str, loader: &LoaderSpec, earliest: u64) -> LoaderShare {
    let usable = loader.resources.usable_cpus(r.settings.threads);
    let allot_us = usable * r.measured_s * 1e6;
    let cpu = (r.loader.user_cpu_us + r.loader.sys_cpu_us) as f64;
    LoaderShare {
        endpoint: endpoint.to_string(),
        connections_requested: r.connections.requested,
        connections_established: r.connections.established,
        responses_2xx: r.responses.status_2xx,
        latency_count: r.latency.count,
        throughput_rps: r.throughput_rps,
        p50_us: r.latency.p50_us,
        p99_us: r.latency.p99_us,
        cpu_fraction: if allot_us > 0.0 { cpu / allot_us } else { 0.0 },
        window_s: r.measured_s,
        window_start_skew_ms: r.window.start_unix_ns.saturating_sub(earliest) as f64 / 1e6,
    }
}

pub(super) fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn connections_split_to_the_last_one() {
        let parts: Vec<usize> = (0..3).map(|i| split(10, 3, i)).collect();
        assert_eq!(parts, vec![4, 3, 3]);
        assert_eq!(parts.iter().sum::<usize>(), 10);
        assert_eq!(split(2, 2, 1), 1);
    }
}
