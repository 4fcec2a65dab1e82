//! gRPC (`grpc-unary`, `grpc-stream-N`, docs/contract.md "gRPC
//! scenarios") against the
//! reference server (`fairground serve`) on 127.0.0.1, no Docker:
//! - verification: the reference server passes every gRPC rule over h2c
//!   and over TLS (h2); each liar of `--grpc-defect` keeps every other rule
//!   and breaks one, and is caught by that rule's check, named (a server
//!   that ignores deadlines by `grpc-deadline`, on the stream);
//! - the loader's known answer: C connections × S streams, every call
//!   answered D late, read C × S / D calls per second with mean latency D
//!   (Little's law per stream), every answer's grpc-status and reply
//!   checked, for unary calls and for streams of N replies;
//! - liars under load: a fixed reply, a malformed message under status OK
//!   and an answer without trailers are never counted as calls answered.
//!
//! Every load is bounded to a few seconds; every verify to a minute.

mod load_support;

use std::time::Duration;

use fairground::contract::{Protocol, Scenario};
use fairground::roles::load::LoadReport;
use fairground::tls::RunCerts;
use fairground::verify::report::{names, render_table};
use fairground::verify::{verify_url, CheckStatus, VerifyOptions, VerifyReport, VerifyTls};
use load_support::load;
use load_support::serve_child::ServeChild;

const BOUND: Duration = Duration::from_secs(60);
const RPC: Scenario = Scenario::GrpcUnary;
const STREAM: Scenario = Scenario::GrpcStream(10);

fn options(protocol: Protocol) -> VerifyOptions {
    VerifyOptions {
        timeout: Duration::from_secs(1),
        seed: Some(11),
        protocol,
        ..VerifyOptions::default()
    }
}

async fn verify(url: &str, opts: &VerifyOptions) -> VerifyReport {
    tokio::time::timeout(
        BOUND,
        verify_url(url, &[Scenario::Plaintext, RPC, STREAM], opts),
    )
    .await
    .expect("verify finished within its bound")
    .unwrap()
}

fn check(r: &VerifyReport, name: &str) -> (CheckStatus, String) {
    check_in(r, RPC, name)
}

fn check_in(r: &VerifyReport, scenario: Scenario, name: &str) -> (CheckStatus, String) {
    let s = r.scenarios.iter().find(|s| s.scenario == scenario).unwrap();
    let c = s
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in\n{}", render_table(&[("serve".into(), r)])));
    (c.status, c.detail.clone())
}

fn measurable(r: &VerifyReport, s: Scenario) -> bool {
    r.scenarios
        .iter()
        .find(|x| x.scenario == s)
        .unwrap()
        .measurable
}

const RULES: [&str; 4] = [
    names::GRPC_CALL,
    names::RANDOM_INPUTS,
    names::GRPC_UNIMPLEMENTED,
    names::GRPC_SUM,
];

/// Every rule of both scenarios passed (the stream's deadline too).
fn every_rule_passed(r: &VerifyReport) {
    let table = render_table(&[("serve".into(), r)]);
    for scenario in [RPC, STREAM] {
        for name in RULES {
            let (status, detail) = check_in(r, scenario, name);
            assert_eq!(
                status,
                CheckStatus::Pass,
                "{scenario} {name}: {detail}\n{table}"
            );
        }
        assert!(measurable(r, scenario), "{table}");
    }
    let (status, detail) = check_in(r, STREAM, names::GRPC_DEADLINE);
    assert_eq!(status, CheckStatus::Pass, "{detail}\n{table}");
    assert!(
        detail.contains("grpc-status 4 DEADLINE_EXCEEDED"),
        "{detail}"
    );
    assert!(r.passed, "{table}");
}

#[tokio::test]
async fn the_reference_server_passes_every_grpc_rule_over_h2c() {
    let server = ServeChild::start(&["--protocol", "h2c"]);
    let r = verify(&format!("http://{}", server.addr), &options(Protocol::H2c)).await;
    let table = render_table(&[("serve".into(), &r)]);
    every_rule_passed(&r);
    // The connection checks asked the calls concurrently, as any HTTP/2
    // scenario's requests.
    assert!(
        r.checks
            .iter()
            .any(|c| c.name == names::H2_CONCURRENCY && c.status == CheckStatus::Pass),
        "{table}"
    );
}

#[tokio::test]
async fn grpc_passes_over_tls_with_the_runs_ca() {
    let certs = RunCerts::make(&["127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = certs.write(dir.path()).unwrap();
    let server = ServeChild::start(&[
        "--protocol",
        "h2",
        "--tls-cert",
        files.chain.to_str().unwrap(),
        "--tls-key",
        files.key.to_str().unwrap(),
    ]);
    let opts = VerifyOptions {
        tls: Some(VerifyTls {
            ca_pem: certs.ca_pem.clone().into_bytes(),
            name: "127.0.0.1".into(),
        }),
        ..options(Protocol::H2)
    };
    let r = verify(&format!("https://{}", server.addr), &opts).await;
    every_rule_passed(&r);
}

#[tokio::test]
async fn grpc_is_not_asked_of_http1() {
    let server = ServeChild::start(&[]);
    let r = verify(
        &format!("http://{}", server.addr),
        &options(Protocol::Http1),
    )
    .await;
    let (status, detail) = check(&r, names::GRPC_CALL);
    assert_eq!(status, CheckStatus::Fail);
    assert!(detail.contains("gRPC runs over HTTP/2"), "{detail}");
    assert!(!Scenario::GrpcUnary.runs_over(Protocol::Http1));
    assert!(Scenario::GrpcUnary.runs_over(Protocol::H2c));
}

/// The liar `defect` fails `name` of the unary scenario (with a detail
/// containing `says`); that scenario is not measurable, plaintext is
/// unharmed.
async fn caught(defect: &str, name: &str, says: &str) {
    caught_in(RPC, defect, name, says).await;
}

/// As [`caught`], for `scenario`'s check `name`.
async fn caught_in(scenario: Scenario, defect: &str, name: &str, says: &str) -> VerifyReport {
    let server = ServeChild::start(&["--protocol", "h2c", "--grpc-defect", defect]);
    let r = verify(&format!("http://{}", server.addr), &options(Protocol::H2c)).await;
    let table = render_table(&[("serve".into(), &r)]);
    let (status, detail) = check_in(&r, scenario, name);
    assert_eq!(
        status,
        CheckStatus::Fail,
        "{defect}: {name} passed: {detail}\n{table}"
    );
    assert!(detail.contains(says), "{defect}: {name}: {detail}");
    assert!(!measurable(&r, scenario), "{table}");
    assert!(
        measurable(&r, Scenario::Plaintext),
        "{defect}: plaintext is unharmed\n{table}"
    );
    r
}

#[tokio::test]
async fn a_server_that_answers_a_fixed_reply_fails_the_call_and_random_inputs() {
    caught("fixed", names::GRPC_CALL, "reply id 0").await;
    caught("fixed", names::RANDOM_INPUTS, "reply id 0").await;
}

#[tokio::test]
async fn a_malformed_message_under_status_ok_fails_the_call() {
    caught("bad-message", names::GRPC_CALL, "prefix says").await;
}

#[tokio::test]
async fn an_answer_without_trailers_fails_the_call() {
    caught("no-trailers", names::GRPC_CALL, "no grpc-status").await;
}

#[tokio::test]
async fn a_server_that_answers_any_method_fails_grpc_unimplemented() {
    caught("any-method", names::GRPC_UNIMPLEMENTED, "grpc-status 0 OK").await;
    caught("any-method", names::GRPC_SUM, "grpc-status 13").await;
}

/// A server that never gives up on a call: its stream runs on past its
/// deadline and is caught by `grpc-deadline`, named; its unary calls
/// (answered at once) still pass every rule, so only the stream is not
/// measured.
#[tokio::test]
async fn a_server_that_ignores_deadlines_fails_grpc_deadline() {
    let r = caught_in(
        STREAM,
        "ignores-deadline",
        names::GRPC_DEADLINE,
        "grpc-timeout ignored",
    )
    .await;
    assert!(
        measurable(&r, RPC),
        "{}",
        render_table(&[("serve".into(), &r)])
    );
}

/// Each call of the reference server waits this long.
const DELAY_S: f64 = 0.010;

fn closed(url: &str, connections: usize, streams: usize, extra: &[&str]) -> LoadReport {
    closed_on(url, "grpc-unary", connections, streams, extra)
}

fn closed_on(
    url: &str,
    scenario: &str,
    connections: usize,
    streams: usize,
    extra: &[&str],
) -> LoadReport {
    let (c, s) = (connections.to_string(), streams.to_string());
    let mut args = vec![
        "--url",
        url,
        "--scenario",
        scenario,
        "--protocol",
        "h2c",
        "-c",
        &c,
        "--streams",
        &s,
        "-t",
        "1",
        "--warmup",
        "300ms",
        "-d",
        "2s",
        "--timeout",
        "1s",
    ];
    args.extend_from_slice(extra);
    load(&args)
}

#[test]
fn calls_d_late_read_c_times_s_over_d_every_answer_checked() {
    known_answer("grpc-unary");
}

/// The same for streams of 20 replies: a call is answered when its last
/// reply and its trailers are in, every reply checked.
#[test]
fn streams_d_late_read_c_times_s_over_d_every_reply_checked() {
    known_answer("grpc-stream-20");
}

fn known_answer(scenario: &str) {
    let server = ServeChild::start(&["--protocol", "h2c", "--delay", "10ms"]);
    let (c, s) = (8usize, 4usize);
    let r = closed_on(&format!("http://{}", server.addr), scenario, c, s, &[]);
    let in_flight = (c * s) as f64;
    // What a busy host cannot move: no call answered before its delay;
    // the rate is what the latency allows (Little's law per stream, 2%);
    // at most C × S / D. How late the timer wakes is the host's (loosely:
    // under 2 D).
    let mean = r.latency.mean_us / 1e6;
    assert!(
        (DELAY_S..DELAY_S * 2.0).contains(&mean),
        "mean latency {mean:.5}s, expected D = {DELAY_S}s or a little more"
    );
    assert!(
        (r.throughput_rps * mean / in_flight - 1.0).abs() < 0.02,
        "{:.1} rpc/s × {mean:.5}s is not {in_flight} in flight",
        r.throughput_rps
    );
    assert!(r.throughput_rps <= in_flight / DELAY_S * 1.01);
    let q = &r.requests;
    assert!(q.balanced() && q.lost.total() == 0 && q.sent > 0, "{q:?}");
    assert_eq!(q.answered.total(), q.answered.status_2xx, "{q:?}");
    // Every call's grpc-status and reply were checked, not one in a
    // thousand.
    assert!(
        r.answers.wrong == 0 && r.answers.checked >= q.answered.total(),
        "{:?} for {q:?}",
        r.answers
    );
    assert_eq!(r.errors_whole_run.total(), 0, "{:?}", r.errors_whole_run);
}

/// A liar's run over h2c at 2 connections × 4 streams.
fn liar(defect: &str) -> LoadReport {
    let server = ServeChild::start(&["--protocol", "h2c", "--grpc-defect", defect]);
    closed(&format!("http://{}", server.addr), 2, 4, &[])
}

#[test]
fn a_fixed_reply_under_load_is_a_wrong_answer_on_every_call() {
    let r = liar("fixed");
    let q = &r.requests;
    assert!(q.sent > 100, "{q:?}");
    assert_eq!(q.answered.status_2xx, 0, "{q:?}");
    assert_eq!(r.throughput_rps, 0.0);
    assert!(r.answers.wrong >= q.answered.total(), "{:?}", r.answers);
    let example = r.answers.example.as_deref().unwrap_or("");
    assert!(example.contains("reply id 0"), "{example}");
}

#[test]
fn a_malformed_message_or_no_trailers_under_load_is_never_a_call_answered() {
    for defect in ["bad-message", "no-trailers"] {
        let r = liar(defect);
        let q = &r.requests;
        assert!(q.sent > 100, "{defect}: {q:?}");
        assert_eq!(q.answered.status_2xx, 0, "{defect}: {q:?}");
        assert_eq!(r.throughput_rps, 0.0, "{defect}");
        assert_eq!(
            q.answered.total(),
            q.answered.status_other,
            "{defect}: {q:?}"
        );
    }
    // The malformed message is named as a wrong answer; no trailers is an
    // answer without grpc-status (an error answer, not a wrong reply).
    let r = liar("bad-message");
    assert!(
        r.answers
            .example
            .as_deref()
            .unwrap_or("")
            .contains("prefix says"),
        "{:?}",
        r.answers
    );
    let r = liar("no-trailers");
    assert_eq!(r.answers.wrong, 0, "{:?}", r.answers);
}

/// A gRPC service alone is not asked HTTP's `not-found` (a gRPC server
/// resets or answers grpc-status to a GET of an unknown path: grpc-go and
/// grpc.aio do, rightly); its unknown method is `grpc-unimplemented`.
#[tokio::test]
async fn grpc_alone_is_not_asked_for_an_http_404() {
    let server = ServeChild::start(&["--protocol", "h2c"]);
    let r = tokio::time::timeout(
        BOUND,
        verify_url(
            &format!("http://{}", server.addr),
            &[RPC],
            &options(Protocol::H2c),
        ),
    )
    .await
    .expect("verify finished within its bound")
    .unwrap();
    let table = render_table(&[("serve".into(), &r)]);
    assert!(r.passed && measurable(&r, RPC), "{table}");
    assert!(
        !r.checks.iter().any(|c| c.name == names::NOT_FOUND),
        "{table}"
    );
    // Asked beside an HTTP scenario, it is.
    let both = verify(&format!("http://{}", server.addr), &options(Protocol::H2c)).await;
    assert!(
        both.checks.iter().any(|c| c.name == names::NOT_FOUND),
        "{}",
        render_table(&[("serve".into(), &both)])
    );
}
