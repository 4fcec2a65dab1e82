//! Known answers for gRPC through the real pipeline: `fairground run` with
//! its loader container, the contract verified first, certificates made
//! for the run (h2).
//!
//! The servers are the reference server itself (`fairground serve
//! --contract-ports`, this build's static binary in a `FROM scratch`
//! framework made here), over h2 and h2c:
//! - `rpcref` (`grpc-unary`, `grpc-stream`), every call answered 10 ms
//!   late once verification is past: at 8 connections × 4 streams, every
//!   cell, unary or streams of 20 replies, reads at most 32 / 10 ms =
//!   3,200 rpc/s with rate × mean latency = 32 in flight (Little's law per
//!   stream), its latency never below 10 ms, every call checked and right;
//!   results.md says rpc/s;
//! - `rpcfixed` (`grpc-unary`, `--grpc-defect fixed`), one reply for every
//!   call: its cells are rejected by verification, `grpc-call` named,
//!   never measured;
//! - `rpclate` (`grpc-stream`, `--grpc-defect ignores-deadline`), a stream
//!   sent on past its deadline: rejected, `grpc-deadline` named.
//!
//! Only traffic: containers on the run's own internal network.

mod docker_support;

use std::sync::OnceLock;

use docker_support::*;
use fairground::contract::{Protocol, Scenario};
use fairground::results::{Cell, Results, Status};

const CONNECTIONS: f64 = 8.0;
const STREAMS: f64 = 4.0;
const DELAY_S: f64 = 0.010;

/// The run every test reads, once per test process, and its results.md.
fn run() -> Option<&'static (Results, String, String)> {
    static RUN: OnceLock<Option<(Results, String, String)>> = OnceLock::new();
    RUN.get_or_init(|| {
        if !docker_or_skip("grpc_docker") {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap().keep();
        let declare = |name: &str, scenarios: &str, env: &[(&str, &str)]| {
            refserve(&tmp, name, scenarios, "[http1, h2, h2c]", env);
        };
        declare(
            "rpcref",
            "[grpc-unary, grpc-stream]",
            &[
                ("FAIRGROUND_SERVE_DELAY", "10ms"),
                ("FAIRGROUND_SERVE_DELAY_AFTER", "4000"),
            ],
        );
        declare(
            "rpcfixed",
            "[grpc-unary]",
            &[("FAIRGROUND_SERVE_GRPC_DEFECT", "fixed")],
        );
        declare(
            "rpclate",
            "[grpc-stream]",
            &[("FAIRGROUND_SERVE_GRPC_DEFECT", "ignores-deadline")],
        );
        let profile = format!(
            "description: \"gRPC known answers\"\n\
             frameworks: [rpcref, rpcfixed, rpclate]\n\
             scenarios: [grpc-unary, grpc-stream-20]\n\
             protocol: [h2c, h2]\nconcurrency: [{CONNECTIONS}]\n\
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
                "grpc known answer {:8} {:14} {:4} {:>9} rpc/s, mean {:>8} µs, in use {:>6}: {:?} {:?}",
                c.key.framework,
                c.key.scenario.to_string(),
                c.key.protocol.to_string(),
                round.map_or("-".into(), |x| format!("{:.2}", x.throughput_rps)),
                round.map_or("-".into(), |x| format!("{:.0}", x.latency.mean_us)),
                round.map_or("-".into(), |x| format!("{:.2}", x.connections_in_use)),
                c.verdict.status,
                c.verdict
                    .reasons
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
            );
        }
        let md = std::fs::read_to_string(run_dir(&tmp.join("output")).join("results.md"))
            .expect("the run writes results.md");
        let _ = std::fs::remove_dir_all(&tmp);
        Some((r, stderr, md))
    })
    .as_ref()
}

fn cell<'a>(r: &'a Results, fw: &str, s: Scenario, p: Protocol, stderr: &str) -> &'a Cell {
    r.cells
        .iter()
        .find(|c| c.key.framework == fw && c.key.scenario == s && c.key.protocol == p)
        .unwrap_or_else(|| panic!("no {fw} {s} {p} cell\n{stderr}"))
}

const STREAM: Scenario = Scenario::GrpcStream(20);

#[test]
fn calls_10_ms_late_read_connections_times_streams_over_the_delay() {
    let Some((r, stderr, md)) = run() else { return };
    for (s, p) in [Scenario::GrpcUnary, STREAM]
        .into_iter()
        .flat_map(|s| [(s, Protocol::H2c), (s, Protocol::H2)])
    {
        let c = cell(r, "rpcref", s, p, stderr);
        assert_ne!(
            c.verdict.status,
            Status::Rejected,
            "{s} {p}: {:?}\n{stderr}",
            c.verdict
        );
        let round = &c.rounds[0];
        let in_flight = CONNECTIONS * STREAMS;
        assert_held_answers(
            &format!("rpcref {s} {p}"),
            round,
            in_flight,
            in_flight,
            DELAY_S,
        );
        // Every call was checked, and every one was right.
        assert_eq!(round.answers.wrong, 0, "{p}: {:?}", round.answers);
        assert!(
            round.answers.checked >= round.requests.answered.total(),
            "{p}: {:?} for {:?}",
            round.answers,
            round.requests
        );
        assert_eq!(
            round.requests.answered.total(),
            round.requests.answered.status_2xx,
            "{p}: {:?}",
            round.requests
        );
    }
    // Calls, counted as calls.
    assert!(md.contains("rpc/s"), "{md}");
    assert!(md.contains("grpc-status: 0"), "{md}");
}

#[test]
fn a_server_that_answers_a_fixed_reply_is_rejected_naming_grpc_call() {
    let Some((r, stderr, _)) = run() else { return };
    for p in [Protocol::H2c, Protocol::H2] {
        let c = cell(r, "rpcfixed", Scenario::GrpcUnary, p, stderr);
        assert_eq!(c.verdict.status, Status::Rejected, "{p}: {:?}", c.verdict);
        let why: Vec<String> = c.verdict.reasons.iter().map(|x| x.to_string()).collect();
        assert!(
            why.iter().any(|w| w.contains("grpc-call")),
            "{p}: {why:?}\n{stderr}"
        );
        assert!(c.rounds.is_empty(), "{p}: never measured");
    }
}

#[test]
fn a_server_that_streams_past_its_deadline_is_rejected_naming_grpc_deadline() {
    let Some((r, stderr, _)) = run() else { return };
    for p in [Protocol::H2c, Protocol::H2] {
        let c = cell(r, "rpclate", STREAM, p, stderr);
        assert_eq!(c.verdict.status, Status::Rejected, "{p}: {:?}", c.verdict);
        let why: Vec<String> = c.verdict.reasons.iter().map(|x| x.to_string()).collect();
        assert!(
            why.iter().any(|w| w.contains("grpc-deadline")),
            "{p}: {why:?}\n{stderr}"
        );
        assert!(c.rounds.is_empty(), "{p}: never measured");
    }
}
