//! Known answers for WebSocket through the real pipeline: `fairground run`
//! with its loader container, the server's cgroup read by the lab, the
//! contract verified first.
//!
//! The servers are the reference server itself (`fairground serve
//! --contract-ports`, this build's static binary in a `FROM scratch`
//! framework made here), declaring `ws-echo`:
//! - `wsref`, every echo 10 ms late once verification is past: at 50
//!   connections with one message in flight each, `ws-echo-64` reads
//!   connections ÷ latency to 2% (Little's law), its latency never below
//!   10 ms, every echo checked and right;
//! - `wshold`, every upgraded connection holding 1 MiB (`--ws-hold`):
//!   `ws-idle` at 50 connections reads 1 MiB per connection ±10% from the
//!   cgroup, and 50 pings a second (one per connection per second);
//! - `wsfixed` (`--ws-defect fixed`), answering every message with the
//!   first: its cells are rejected by verification, `ws-echo` named.
//!
//! Only traffic: containers on the run's own internal network.

mod docker_support;

use std::path::Path;
use std::sync::OnceLock;

use docker_support::*;
use fairground::contract::Scenario;
use fairground::results::{Cell, Results, Status};

const CONNECTIONS: f64 = 50.0;
const DELAY_S: f64 = 0.010;
const MIB: f64 = 1024.0 * 1024.0;

/// The reference server as framework `name`, declaring `ws-echo`, `env`
/// added.
fn refserve(dir: &Path, name: &str, env: &[(&str, &str)]) {
    docker_support::refserve(dir, name, "[plaintext, ws-echo]", "[http1]", env);
}

/// The run every test reads, once per test process.
fn run() -> Option<&'static (Results, String)> {
    static RUN: OnceLock<Option<(Results, String)>> = OnceLock::new();
    RUN.get_or_init(|| {
        if !docker_or_skip("websocket_docker") {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap().keep();
        refserve(
            &tmp,
            "wsref",
            &[
                ("FAIRGROUND_SERVE_DELAY", "10ms"),
                ("FAIRGROUND_SERVE_DELAY_AFTER", "4000"),
            ],
        );
        refserve(&tmp, "wshold", &[("FAIRGROUND_SERVE_WS_HOLD", "1MiB")]);
        refserve(&tmp, "wsfixed", &[("FAIRGROUND_SERVE_WS_DEFECT", "fixed")]);
        let profile = format!(
            "description: \"WebSocket known answers\"\n\
             frameworks: [wsref, wshold, wsfixed]\nscenarios: [ws-echo-64, ws-idle]\n\
             concurrency: [{CONNECTIONS}]\n\
             warmup: 2s\nduration: 3s\nrounds: 1\n\
             load: {{threads: 1, timeout: 2s}}\n\
             server: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             loader: {{cpus: 1, memory: 256MiB, nofile: 16384}}\n\
             idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {{preflight: warn}}\n"
        );
        let (r, stderr) = run_profile_in(&tmp, &profile);
        for c in &r.cells {
            let round = c.rounds.first();
            eprintln!(
                "websocket known answer {:8} {:10} {:>9} msg/s, mean {:>8} µs, per connection {:?}: {:?} {:?}",
                c.key.framework,
                c.key.scenario.to_string(),
                round.map_or("-".into(), |x| format!("{:.2}", x.throughput_rps)),
                round.map_or("-".into(), |x| format!("{:.0}", x.latency.mean_us)),
                round.and_then(|x| x.server.memory_per_connection_bytes),
                c.verdict.status,
                c.verdict.reasons.iter().map(|r| r.to_string()).collect::<Vec<_>>()
            );
        }
        let _ = std::fs::remove_dir_all(&tmp);
        Some((r, stderr))
    })
    .as_ref()
}

fn cell<'a>(r: &'a Results, fw: &str, s: Scenario, stderr: &str) -> &'a Cell {
    r.cells
        .iter()
        .find(|c| c.key.framework == fw && c.key.scenario == s)
        .unwrap_or_else(|| panic!("no {fw} {s} cell\n{stderr}"))
}

#[test]
fn echoes_10_ms_late_read_connections_over_the_latency() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "wsref", Scenario::WsEcho(64), stderr);
    assert_ne!(
        c.verdict.status,
        Status::Rejected,
        "{:?}\n{stderr}",
        c.verdict
    );
    let round = &c.rounds[0];
    let mean = round.latency.mean_us / 1e6;
    assert!(
        mean >= DELAY_S,
        "mean latency {mean}s below 10 ms\n{stderr}"
    );
    let want = CONNECTIONS / mean;
    assert!(
        (round.throughput_rps / want - 1.0).abs() <= 0.02,
        "{:.1} msg/s, want connections / latency = {want:.1} ±2%\n{stderr}",
        round.throughput_rps
    );
    assert_eq!(round.answers.wrong, 0);
    assert!(round.answers.checked >= round.requests.answered.total());
    assert_eq!(
        round.requests.answered.total(),
        round.requests.answered.status_2xx
    );
}

#[test]
fn ws_idle_reads_the_memory_each_connection_holds() {
    let Some((r, stderr)) = run() else { return };
    let c = cell(r, "wshold", Scenario::WsIdle, stderr);
    assert_ne!(
        c.verdict.status,
        Status::Rejected,
        "{:?}\n{stderr}",
        c.verdict
    );
    let per = c.rounds[0]
        .server
        .memory_per_connection_bytes
        .expect("a memory per connection");
    assert!(
        (per / MIB - 1.0).abs() <= 0.10,
        "{:.3} MiB per connection, want 1 MiB ±10%\n{stderr}",
        per / MIB
    );
    // One ping per connection per second.
    let rate = c.rounds[0].throughput_rps;
    assert!(
        (rate / CONNECTIONS - 1.0).abs() <= 0.10,
        "{rate:.1} pings/s, want about {CONNECTIONS}"
    );
    // The reference server without --ws-hold holds next to nothing.
    let base = cell(r, "wsref", Scenario::WsIdle, stderr).rounds[0]
        .server
        .memory_per_connection_bytes
        .expect("a memory per connection");
    assert!(
        base < 0.2 * MIB,
        "{base} B per connection without --ws-hold"
    );
}

#[test]
fn a_server_that_echoes_a_fixed_message_is_rejected_naming_ws_echo() {
    let Some((r, stderr)) = run() else { return };
    for s in [Scenario::WsEcho(64), Scenario::WsIdle] {
        let c = cell(r, "wsfixed", s, stderr);
        assert_eq!(c.verdict.status, Status::Rejected, "{s}: {:?}", c.verdict);
        let why: Vec<String> = c.verdict.reasons.iter().map(|x| x.to_string()).collect();
        assert!(
            why.iter().any(|w| w.contains("ws-echo")),
            "{s}: {why:?}\n{stderr}"
        );
    }
}
