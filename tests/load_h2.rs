//! Known answers for the loader's HTTP/2 (h2 over TLS, h2c with prior
//! knowledge), against the reference server (`fairground serve`) answering
//! every request a fixed D late, on 127.0.0.1, no Docker:
//! - C connections × S streams read C × S / D req/s with mean latency D,
//!   so S = 4 reads four times S = 1, and Little's law holds per stream;
//! - every answer checked against the contract passes, request bodies
//!   (echo) included;
//! - h2 against a server that offers only HTTP/1.1 under ALPN reads nothing
//!   and says what was agreed;
//! - a fixed rate below capacity reads the rate.
//!
//! And the HTTP/2 failure paths, against a scripted h2 server: a reset
//! stream, a stalled stream, a silent connection, GOAWAY, and a server
//! that allows fewer concurrent streams than asked.
//!
//! Every load is bounded to a few seconds.

mod load_support;

use std::time::Duration;

use fairground::contract::Protocol;
use fairground::roles::load::LoadReport;
use load_support::h2_server::{H2Action, H2Options, H2Server};
use load_support::load;
use load_support::serve_child::ServeChild;

/// Every answer of the reference server waits this long.
const DELAY: Duration = Duration::from_millis(100);
const CONNECTIONS: usize = 4;

fn d() -> f64 {
    DELAY.as_secs_f64()
}

/// A closed-loop load of `scenario` over `protocol` with `streams` streams
/// per connection, 300 ms of warm-up and a 2 s window.
fn closed(url: &str, protocol: &str, streams: usize, scenario: &str, tls: &[&str]) -> LoadReport {
    let (c, s) = (CONNECTIONS.to_string(), streams.to_string());
    let mut args = vec![
        "--url",
        url,
        "--protocol",
        protocol,
        "--streams",
        &s,
        "--scenario",
        scenario,
        "-c",
        &c,
        "-t",
        "1",
        "--warmup",
        "300ms",
        "-d",
        "2s",
        "--timeout",
        "1s",
    ];
    args.extend_from_slice(tls);
    load(&args)
}

/// The figures of a clean closed-loop run with `streams` per connection
/// against a server whose answers take [`DELAY`].
fn assert_known_answer(r: &LoadReport, protocol: Protocol, streams: usize) {
    let what = format!("{protocol} × {streams} streams");
    assert_eq!(r.settings.protocol, protocol, "{what}");
    assert_eq!(r.settings.streams, streams, "{what}");
    let in_flight = (CONNECTIONS * streams) as f64;
    let expected = in_flight / d();
    assert!(
        (r.throughput_rps / expected - 1.0).abs() < 0.10,
        "{what}: {:.1} req/s, expected C × S / D = {expected:.1}: {:?}",
        r.throughput_rps,
        r.windows
    );
    let mean = r.latency.mean_us / 1e6;
    assert!(
        mean >= d() && mean < d() * 1.10,
        "{what}: mean latency {mean:.4}s, expected D = {}s",
        d()
    );
    // Little's law: answers/s × mean latency = requests in flight, C × S.
    assert_eq!(
        r.connections.serving as usize * r.settings.in_flight_per_connection(),
        CONNECTIONS * streams,
        "{what}"
    );
    let little = r.throughput_rps * mean;
    // (10%: a 2 s window holds about 20 answers per stream, and whether
    // each stream's 20th falls inside is a 5% step.)
    assert!(
        (little / in_flight - 1.0).abs() < 0.10,
        "{what}: {little:.2} in flight by Little's law, {in_flight} held"
    );
    assert_eq!(
        r.errors_whole_run.total(),
        0,
        "{what}: {:?}",
        r.errors_whole_run
    );
    let q = &r.requests;
    assert!(
        q.balanced() && q.lost.total() == 0 && q.sent > 0,
        "{what}: {q:?}"
    );
    assert_eq!(q.answered.total(), q.answered.status_2xx, "{what}: {q:?}");
    assert_eq!(
        r.connections.serving, CONNECTIONS as u64,
        "{what}: {:?}",
        r.connections
    );
    assert_eq!(
        r.connections.reconnects_whole_run, 0,
        "{what}: {:?}",
        r.connections
    );
    assert!(
        r.answers.checked >= CONNECTIONS as u64 && r.answers.wrong == 0,
        "{what}: {:?}",
        r.answers
    );
    assert!(
        r.bytes.read > 0 && r.bytes.written > 0,
        "{what}: {:?}",
        r.bytes
    );
}

#[test]
fn h2c_reads_c_times_s_over_d_and_four_streams_read_four_times_one() {
    let server = ServeChild::start(&["--protocol", "h2c", "--delay", "100ms"]);
    let url = format!("http://{}", server.addr);
    let one = closed(&url, "h2c", 1, "json", &[]);
    assert_known_answer(&one, Protocol::H2c, 1);
    // param: a fresh id in every request, each read back into HTTP/2.
    let four = closed(&url, "h2c", 4, "param", &[]);
    assert_known_answer(&four, Protocol::H2c, 4);
    let ratio = four.throughput_rps / one.throughput_rps;
    assert!(
        (ratio / 4.0 - 1.0).abs() < 0.10,
        "4 streams read {ratio:.2} times 1 stream"
    );
}

#[test]
fn h2_over_tls_reads_the_same_with_one_handshake_per_connection_and_bodies_sent() {
    let dir = tempfile::tempdir().unwrap();
    let certs = fairground::tls::RunCerts::make(&["127.0.0.1".into()]).unwrap();
    let files = certs.write(dir.path()).unwrap();
    let (chain, key, ca) = (
        files.chain.to_str().unwrap(),
        files.key.to_str().unwrap(),
        files.ca.to_str().unwrap(),
    );
    let server = ServeChild::start(&[
        "--protocol",
        "h2",
        "--tls-cert",
        chain,
        "--tls-key",
        key,
        "--delay",
        "100ms",
    ]);
    let url = format!("https://{}", server.addr);
    // echo: POST bodies, echoed back and checked.
    let r = closed(&url, "h2", 4, "echo", &["--tls-ca", ca]);
    assert_known_answer(&r, Protocol::H2, 4);
    let t = r.tls.expect("an h2 run reports its TLS");
    assert_eq!((t.handshakes, t.failed), (CONNECTIONS as u64, 0), "{t:?}");
    assert_eq!(t.alpn.as_deref(), Some("h2"), "{t:?}");
}

#[test]
fn h2_against_a_server_that_offers_only_http11_reads_nothing_and_names_what_alpn_agreed() {
    let dir = tempfile::tempdir().unwrap();
    let certs = fairground::tls::RunCerts::make(&["127.0.0.1".into()]).unwrap();
    let files = certs.write(dir.path()).unwrap();
    let server = ServeChild::start(&[
        "--protocol",
        "https",
        "--tls-cert",
        files.chain.to_str().unwrap(),
        "--tls-key",
        files.key.to_str().unwrap(),
    ]);
    let url = format!("https://{}", server.addr);
    let r = load(&[
        "--url",
        &url,
        "--protocol",
        "h2",
        "--tls-ca",
        files.ca.to_str().unwrap(),
        "--scenario",
        "plaintext",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "500ms",
        "--connect-timeout",
        "500ms",
    ]);
    assert_eq!(r.responses.total(), 0, "{:?}", r.responses);
    assert_eq!(r.requests.sent, 0, "{:?}", r.requests);
    assert_eq!(r.connections.established, 0, "{:?}", r.connections);
    assert!(r.errors_whole_run.tls > 0, "{:?}", r.errors_whole_run);
    assert_eq!(
        r.errors_whole_run.total(),
        r.errors_whole_run.tls,
        "{:?}",
        r.errors_whole_run
    );
    let t = r.tls.expect("an h2 run reports its TLS");
    assert_eq!(t.handshakes, 0, "{t:?}");
    assert_eq!(
        t.last_error.as_deref(),
        Some("ALPN agreed http/1.1, not h2"),
        "{t:?}"
    );
    // The same server over https is fine: it was ALPN, not TLS.
    let ok = load(&[
        "--url",
        &url,
        "--tls-ca",
        files.ca.to_str().unwrap(),
        "--scenario",
        "plaintext",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "300ms",
    ]);
    assert!(ok.responses.status_2xx > 0, "{:?}", ok.responses);
    assert_eq!(ok.settings.protocol, Protocol::Https);
}

#[test]
fn h2c_at_a_fixed_rate_below_capacity_reads_the_rate() {
    let server = ServeChild::start(&["--protocol", "h2c", "--delay", "100ms"]);
    let url = format!("http://{}", server.addr);
    // Capacity C × S / D = 4 × 4 / 0.1 s = 160 req/s; ask for 100 (10 in
    // flight of 16).
    let r = load(&[
        "--url",
        &url,
        "--protocol",
        "h2c",
        "--streams",
        "4",
        "--scenario",
        "json",
        "-R",
        "100",
        "-c",
        "4",
        "-t",
        "1",
        "--warmup",
        "300ms",
        "-d",
        "2s",
        "--timeout",
        "1s",
    ]);
    let rate = r.rate.expect("a fixed-rate run reports its rate");
    assert!(
        (rate.achieved_rps / 100.0 - 1.0).abs() < 0.05,
        "{rate:?}, {:?}",
        r.windows
    );
    assert!(
        (r.throughput_rps / 100.0 - 1.0).abs() < 0.05,
        "{}",
        r.throughput_rps
    );
    assert_eq!(r.requests.unsent, 0, "{:?}", r.requests);
    assert!(
        r.requests.balanced() && r.requests.lost.total() == 0,
        "{:?}",
        r.requests
    );
    assert_eq!(r.errors_whole_run.total(), 0, "{:?}", r.errors_whole_run);
    // Below capacity nothing waits: latency from the due time is D.
    let mean = r.latency.mean_us / 1e6;
    assert!(mean >= d() && mean < d() * 1.10, "mean latency {mean:.4}s");
    assert!(
        r.answers.checked > 0 && r.answers.wrong == 0,
        "{:?}",
        r.answers
    );
}

/// A closed-loop ad-hoc load over h2c against `server`.
fn h2c_load(server: &H2Server, connections: usize, streams: usize, extra: &[&str]) -> LoadReport {
    let (url, c, s) = (server.url(), connections.to_string(), streams.to_string());
    let mut args = vec![
        "--url",
        &url,
        "--protocol",
        "h2c",
        "--streams",
        &s,
        "-c",
        &c,
        "-t",
        "1",
        "-d",
        "1s",
    ];
    args.extend_from_slice(extra);
    load(&args)
}

#[test]
fn a_reset_stream_loses_its_request_as_a_read_error_and_the_connection_goes_on() {
    let server = H2Server::start(H2Options::default(), |n| {
        if n % 10 == 9 {
            H2Action::Reset
        } else {
            H2Action::Answer(Duration::from_millis(5))
        }
    });
    let r = h2c_load(&server, 2, 4, &[]);
    let q = &r.requests;
    assert!(q.balanced(), "{q:?}");
    let share = q.lost.read as f64 / q.sent as f64;
    assert!(
        (0.07..0.13).contains(&share),
        "{share:.3} lost of a tenth reset: {q:?}"
    );
    assert_eq!(q.lost.total(), q.lost.read, "{q:?}");
    assert_eq!(r.connections.reconnects_whole_run, 0, "{:?}", r.connections);
    assert_eq!(
        server.connections.load(std::sync::atomic::Ordering::SeqCst),
        2
    );
}

#[test]
fn a_stalled_stream_times_out_at_its_own_deadline_and_only_it() {
    let server = H2Server::start(H2Options::default(), |n| {
        if n % 10 == 9 {
            H2Action::Stall
        } else {
            H2Action::Answer(Duration::from_millis(5))
        }
    });
    let r = h2c_load(&server, 1, 4, &["--timeout", "200ms"]);
    let q = &r.requests;
    assert!(q.balanced(), "{q:?}");
    let share = q.lost.timeout as f64 / q.sent as f64;
    assert!(
        (0.05..0.15).contains(&share),
        "{share:.3} timed out of a tenth stalled: {q:?}"
    );
    assert_eq!(q.lost.total(), q.lost.timeout, "{q:?}");
    // The others were answered on the same connection: a stalled stream is
    // cancelled, not the connection.
    assert_eq!(q.answered.total(), q.sent - q.lost.timeout, "{q:?}");
    assert_eq!(r.connections.reconnects_whole_run, 0, "{:?}", r.connections);
}

#[test]
fn a_connection_silent_for_a_whole_timeout_is_made_again_as_over_http1() {
    let server = H2Server::start(H2Options::default(), |_| H2Action::Stall);
    let r = h2c_load(&server, 1, 2, &["--timeout", "200ms"]);
    let q = &r.requests;
    assert!(q.balanced(), "{q:?}");
    assert_eq!(q.answered.total(), 0, "{q:?}");
    assert!(q.lost.timeout >= 6, "{q:?}");
    assert_eq!(q.lost.total(), q.lost.timeout, "{q:?}");
    assert!(
        r.connections.reconnects_whole_run >= 3,
        "{:?}",
        r.connections
    );
}

#[test]
fn a_graceful_goaway_loses_nothing_and_the_connection_is_made_again() {
    let server = H2Server::start(
        H2Options {
            goaway_after: Some(40),
            ..H2Options::default()
        },
        |_| H2Action::Answer(Duration::from_millis(5)),
    );
    let r = h2c_load(&server, 2, 4, &[]);
    let q = &r.requests;
    assert!(q.balanced() && q.sent > 200, "{q:?}");
    assert_eq!(r.errors_whole_run.total(), 0, "{:?}", r.errors_whole_run);
    assert_eq!(q.answered.total(), q.sent - q.in_flight_at_end, "{q:?}");
    assert!(r.connections.reconnects >= 2, "{:?}", r.connections);
}

#[test]
fn a_server_allowing_fewer_streams_than_asked_is_measured_and_said() {
    let server = H2Server::start(
        H2Options {
            max_streams: Some(2),
            ..H2Options::default()
        },
        |_| H2Action::Answer(Duration::from_millis(50)),
    );
    let r = h2c_load(&server, 2, 4, &[]);
    // 2 connections × 2 streams the server allows / 50 ms.
    assert!(
        (r.throughput_rps / 80.0 - 1.0).abs() < 0.15,
        "{} req/s",
        r.throughput_rps
    );
    assert_eq!(r.errors_whole_run.total(), 0, "{:?}", r.errors_whole_run);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("allows 2 concurrent streams") && w.contains("--streams 4")),
        "{:?}",
        r.warnings
    );
    // And as a figure, which `fairground run` flags the cell by.
    assert_eq!(r.http2_stream_limit, Some(2));
    // A server that allows every stream asked leaves it out.
    let open = H2Server::start(H2Options::default(), |_| {
        H2Action::Answer(Duration::from_millis(50))
    });
    assert_eq!(h2c_load(&open, 2, 4, &[]).http2_stream_limit, None);
}

#[test]
fn streams_are_for_http2_and_pipelining_for_http1() {
    for args in [
        &["--url", "http://127.0.0.1:1", "--streams", "4"][..],
        &[
            "--url",
            "http://127.0.0.1:1",
            "--protocol",
            "h2c",
            "--pipeline",
            "2",
        ][..],
        &["--url", "http://127.0.0.1:1", "--protocol", "h2"][..],
        &["--url", "https://127.0.0.1:1", "--protocol", "h2c"][..],
        &["--url", "https://127.0.0.1:1", "--protocol", "h2"][..],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fairground"))
            .arg("load")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
