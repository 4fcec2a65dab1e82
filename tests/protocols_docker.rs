//! Known answers for TLS and HTTP/2 through the real pipeline: `fairground
//! run` with its loader container, certificates made for the run and seeded
//! into the containers, contract verification per protocol.
//!
//! The server is the reference server itself (`fairground serve
//! --contract-ports`, the static binary copied into a `FROM scratch`
//! framework made here): http1 on 8080, h2c on 8082, TLS on 8443, every
//! answer 200 ms late once verification is past. So:
//! - `refserve` at 8 connections: http1 and https answer 8 / 0.2 s = 40
//!   req/s; h2 and h2c with 32 streams per connection 8 × 32 / 0.2 s =
//!   1,280 req/s at most (within 1% on a quiet host; a busy one's late
//!   timers lower the rate, never Little's law per stream: 256 in flight);
//!   the TLS cells carry their handshakes (one per connection, ALPN what
//!   was asked);
//! - `h1only`, the same server whose TLS listener offers only `http/1.1`
//!   under ALPN while its manifest claims h2: its h2 cell is rejected with
//!   ALPN named, and its other protocols are measured as usual;
//! - `serial` (`--h2-defect serial`): every answer right, a stream limit of
//!   1000, and the streams of a connection answered one at a time (2 ms
//!   each): its h2 and h2c cells are rejected by `h2-concurrency` in
//!   verification, with the profile's GET scenario alone;
//! - `limit4` (`--h2-defect limit4`): SETTINGS_MAX_CONCURRENT_STREAMS 4
//!   under `load.streams: 32`: its h2 and h2c cells are measured and
//!   flagged `stream limit`, naming 4, 32 and the 8 × 4 = 32 requests in
//!   flight, and answer 8 × 4 / 0.2 s = 160 req/s; the loader's warning
//!   is in results.json.
//!
//! Only traffic: containers on the run's own internal network.

mod docker_support;

use std::path::Path;
use std::sync::OnceLock;

use docker_support::*;
use fairground::contract::Protocol;
use fairground::results::{Cell, Reason, Results, Status};

const CONNECTIONS: f64 = 8.0;
const STREAMS: f64 = 32.0;
/// `fairground serve --h2-defect limit4`'s stream limit.
const LIMIT: f64 = 4.0;
const DELAY_S: f64 = 0.2;

/// The reference server as framework `name`, every answer 200 ms late once
/// verification is past, `env` added.
fn refserve(dir: &Path, name: &str, env: &[(&str, &str)]) {
    let mut all = vec![
        ("FAIRGROUND_SERVE_DELAY", "200ms"),
        ("FAIRGROUND_SERVE_DELAY_AFTER", "4000"),
    ];
    all.extend_from_slice(env);
    docker_support::refserve(
        dir,
        name,
        "[plaintext, json]",
        "[http1, https, h2, h2c]",
        &all,
    );
}

/// The run every test reads, once per test process.
fn run() -> Option<&'static (Results, String)> {
    static RUN: OnceLock<Option<(Results, String)>> = OnceLock::new();
    RUN.get_or_init(|| {
        if !docker_or_skip("protocols_docker") {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap().keep();
        refserve(&tmp, "refserve", &[]);
        refserve(&tmp, "h1only", &[("FAIRGROUND_SERVE_TLS_PROTOCOL", "https")]);
        refserve(&tmp, "serial", &[("FAIRGROUND_SERVE_H2_DEFECT", "serial")]);
        refserve(&tmp, "limit4", &[("FAIRGROUND_SERVE_H2_DEFECT", "limit4")]);
        let profile = format!(
            "description: \"protocol known answers\"\n\
             frameworks: [refserve, h1only, serial, limit4]\nscenarios: [json]\n\
             protocol: [http1, https, h2, h2c]\nconcurrency: [{CONNECTIONS}]\n\
             warmup: 2s\nduration: 3s\nrounds: 1\n\
             load: {{threads: 1, streams: {STREAMS}, timeout: 2s}}\n\
             server: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             loader: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {{preflight: warn}}\n"
        );
        let (r, stderr) = run_profile_in(&tmp, &profile);
        for c in &r.cells {
            let round = c.rounds.first();
            eprintln!(
                "protocol known answer {:8} {:5} {:>8} req/s, mean {:>8} µs, in use {:>6}, tls {:?}: {:?} {:?}",
                c.key.framework,
                c.key.protocol.to_string(),
                round.map_or("-".into(), |x| format!("{:.2}", x.throughput_rps)),
                round.map_or("-".into(), |x| format!("{:.0}", x.latency.mean_us)),
                round.map_or("-".into(), |x| format!("{:.2}", x.connections_in_use)),
                round.and_then(|x| x.tls.as_ref()).map(|t| (t.handshakes, t.failed, t.alpn.clone())),
                c.verdict.status,
                c.verdict.reasons.iter().map(|r| r.to_string()).collect::<Vec<_>>()
            );
        }
        let ca = std::fs::read_to_string(run_dir(&tmp.join("output")).join("tls/ca.pem"))
            .expect("the run keeps its CA");
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        let _ = std::fs::remove_dir_all(&tmp);
        Some((r, stderr))
    })
    .as_ref()
}

fn cell<'a>(r: &'a Results, fw: &str, p: Protocol, stderr: &str) -> &'a Cell {
    r.cells
        .iter()
        .find(|c| c.key.framework == fw && c.key.protocol == p)
        .unwrap_or_else(|| panic!("no {fw} {p} cell\n{stderr}"))
}

#[test]
fn each_protocol_answers_connections_times_streams_over_the_delay() {
    let Some((r, stderr)) = run() else { return };
    for (p, in_flight) in [
        (Protocol::Http1, CONNECTIONS),
        (Protocol::Https, CONNECTIONS),
        (Protocol::H2, CONNECTIONS * STREAMS),
        (Protocol::H2c, CONNECTIONS * STREAMS),
    ] {
        let c = cell(r, "refserve", p, stderr);
        // Measured and not rejected (a busy shared host may flag it).
        assert_ne!(
            c.verdict.status,
            Status::Rejected,
            "{p}: {:?}\n{stderr}",
            c.verdict
        );
        let round = &c.rounds[0];
        // At most in_flight / 0.2 s (1,280 for h2), Little's law per
        // stream; on a quiet host within a percent of it.
        assert_held_answers(
            &format!("refserve {p}"),
            round,
            in_flight,
            in_flight,
            DELAY_S,
        );
        assert!(
            round.latency.mean_us / 1e6 <= DELAY_S * 1.25,
            "{p}: mean latency {} µs",
            round.latency.mean_us
        );
        assert_eq!(round.answers.wrong, 0, "{p}");
    }
}

#[test]
fn tls_cells_carry_one_handshake_per_connection_and_what_alpn_agreed() {
    let Some((r, stderr)) = run() else { return };
    for (p, alpn) in [(Protocol::Https, "http/1.1"), (Protocol::H2, "h2")] {
        let round = &cell(r, "refserve", p, stderr).rounds[0];
        let tls = round
            .tls
            .as_ref()
            .unwrap_or_else(|| panic!("{p}: no TLS figures"));
        assert_eq!(tls.failed, 0, "{p}: {tls:?}");
        assert_eq!(
            tls.handshakes, CONNECTIONS as u64,
            "{p}: one per connection: {tls:?}"
        );
        assert_eq!(tls.alpn.as_deref(), Some(alpn), "{p}");
        assert!(tls.handshake.p50_us > 0, "{p}: {tls:?}");
    }
    for p in [Protocol::Http1, Protocol::H2c] {
        assert!(
            cell(r, "refserve", p, stderr).rounds[0].tls.is_none(),
            "{p}"
        );
    }
}

#[test]
fn a_server_that_offers_only_http1_under_alpn_gets_no_h2_number() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "h1only", Protocol::H2, stderr);
    assert_eq!(c.verdict.status, Status::Rejected, "{:?}", c.verdict);
    let why: Vec<String> = c.verdict.reasons.iter().map(|x| x.to_string()).collect();
    assert!(
        c.verdict
            .reasons
            .iter()
            .any(|x| matches!(x, Reason::FailedVerify { .. }))
            && why.iter().any(|w| w.contains("ALPN")),
        "the reason names ALPN: {why:?}"
    );
    assert!(c.rounds.is_empty(), "never measured");
    for p in [Protocol::Http1, Protocol::Https, Protocol::H2c] {
        let other = cell(r, "h1only", p, stderr);
        assert_ne!(
            other.verdict.status,
            Status::Rejected,
            "{p}: {:?}",
            other.verdict
        );
        assert!(!other.rounds.is_empty(), "{p}: measured");
    }
}

#[test]
fn a_server_serving_the_streams_of_a_connection_one_at_a_time_is_rejected_by_h2_concurrency() {
    let Some((r, stderr)) = run() else { return };
    for p in [Protocol::H2, Protocol::H2c] {
        let c = cell(r, "serial", p, stderr);
        assert_eq!(c.verdict.status, Status::Rejected, "{p}: {:?}", c.verdict);
        let why: Vec<String> = c.verdict.reasons.iter().map(|x| x.to_string()).collect();
        assert!(
            why.iter().any(|w| w.contains("h2-concurrency")
                && w.contains("streams of one connection served one at a time")),
            "{p}: the reason names the rule: {why:?}"
        );
        assert!(c.rounds.is_empty(), "{p}: never measured");
    }
    // Its HTTP/1.1 is honest and measured.
    let c = cell(r, "serial", Protocol::Http1, stderr);
    assert_ne!(c.verdict.status, Status::Rejected, "{:?}", c.verdict);
}

#[test]
fn a_stream_limit_below_load_streams_is_flagged_naming_both_numbers_and_what_was_in_flight() {
    let Some((r, stderr)) = run() else { return };
    for p in [Protocol::H2, Protocol::H2c] {
        let c = cell(r, "limit4", p, stderr);
        assert_eq!(c.verdict.status, Status::Flagged, "{p}: {:?}", c.verdict);
        let limit = c
            .verdict
            .reasons
            .iter()
            .find(|x| matches!(x, Reason::StreamLimit { .. }))
            .unwrap_or_else(|| panic!("{p}: no stream-limit flag: {:?}", c.verdict));
        assert!(
            matches!(
                limit,
                Reason::StreamLimit {
                    limit: 4,
                    streams: 32,
                    connections: 8,
                    ..
                }
            ),
            "{p}: {limit:?}"
        );
        assert!(
            limit
                .to_string()
                .contains("8 connections × 4 streams = 32 requests in flight at most, not 256"),
            "{limit}"
        );
        let round = &c.rounds[0];
        // What the server really served at once: 8 × 4 = 32, each answer
        // 200 ms late (160 req/s at most), not the 256 asked; the loader
        // kept all 256 in flight, the rest queued behind the limit
        // (Little's law over the loader's latency).
        assert_held_answers(
            &format!("limit4 {p}"),
            round,
            CONNECTIONS * STREAMS,
            CONNECTIONS * LIMIT,
            DELAY_S,
        );
        // The loader's warning reached results.json.
        assert!(
            round
                .loader_warnings
                .iter()
                .any(|w| w.contains("allows 4 concurrent streams per connection")),
            "{p}: {:?}",
            round.loader_warnings
        );
        assert_eq!(round.stream_limit.map(|s| s.effective()), Some(32), "{p}");
    }
    // A server that allows every stream asked gets no such flag.
    for p in [Protocol::H2, Protocol::H2c] {
        let c = cell(r, "refserve", p, stderr);
        assert!(
            !c.verdict
                .reasons
                .iter()
                .any(|x| matches!(x, Reason::StreamLimit { .. })),
            "{p}: {:?}",
            c.verdict
        );
        assert!(c.rounds[0].stream_limit.is_none(), "{p}");
    }
}
