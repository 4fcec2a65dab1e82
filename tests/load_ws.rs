//! Known answers for the loader's WebSocket driver (`ws-echo-N`), against
//! the reference server (`fairground serve`) on 127.0.0.1, no Docker:
//! - C connections, one message in flight each, echoes D late: C / D
//!   messages per second, mean latency D, Little's law;
//! - the same over TLS (wss), one handshake per connection;
//! - a fixed rate below capacity reads the rate;
//! - liars under load (`--ws-defect`): a fixed echo and a still-masked
//!   echo are wrong answers, counted on every message and named; an
//!   upgrade answered with the wrong accept never opens a connection.
//!
//! Every load is bounded to a few seconds.

mod load_support;

use std::time::Duration;

use fairground::roles::load::LoadReport;
use load_support::load;
use load_support::serve_child::ServeChild;

/// Every echo of the reference server waits this long.
const DELAY: Duration = Duration::from_millis(10);
const CONNECTIONS: usize = 50;

fn closed(url: &str, scenario: &str, connections: usize, extra: &[&str]) -> LoadReport {
    let c = connections.to_string();
    let mut args = vec![
        "--url",
        url,
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
    args.extend_from_slice(extra);
    load(&args)
}

/// The figures of a clean closed-loop run of `connections` against echoes
/// that take [`DELAY`]. What a busy host cannot move is asserted tightly:
/// no echo is faster than D, and the rate is what the latency allows,
/// connections / mean latency, to 2% (Little's law). How much later than D
/// the echoes come is the host's (the server's timer tick, a compile
/// beside it, a debug build): bounded loosely, at 2 D.
fn assert_known_answer(r: &LoadReport, what: &str, connections: usize) {
    let d = DELAY.as_secs_f64();
    let mean = r.latency.mean_us / 1e6;
    assert!(
        mean >= d && mean < d * 2.0,
        "{what}: mean latency {mean:.5}s, expected D = {d}s or a little more"
    );
    let p50 = r.latency.p50_us as f64 / 1e6;
    assert!(p50 >= d, "{what}: p50 {p50:.5}s below D = {d}s");
    let expected = connections as f64 / mean;
    assert!(
        (r.throughput_rps / expected - 1.0).abs() < 0.02,
        "{what}: {:.1} msg/s, expected connections / latency = {expected:.1}: {:?}",
        r.throughput_rps,
        r.windows
    );
    let q = &r.requests;
    assert!(
        q.balanced() && q.lost.total() == 0 && q.sent > 0,
        "{what}: {q:?}"
    );
    assert_eq!(q.answered.total(), q.answered.status_2xx, "{what}: {q:?}");
    assert_eq!(
        r.errors_whole_run.total(),
        0,
        "{what}: {:?}",
        r.errors_whole_run
    );
    assert_eq!(
        r.connections.serving, connections as u64,
        "{what}: {:?}",
        r.connections
    );
    assert_eq!(
        r.connections.reconnects_whole_run, 0,
        "{what}: {:?}",
        r.connections
    );
    // Every echo is compared with its message, not one in a thousand.
    assert!(
        r.answers.wrong == 0 && r.answers.checked >= q.answered.total(),
        "{what}: {:?} for {:?}",
        r.answers,
        q
    );
    assert!(
        r.bytes.read > 0 && r.bytes.written > 0,
        "{what}: {:?}",
        r.bytes
    );
}

#[test]
fn echoes_d_late_read_c_over_d_messages_per_second_with_latency_d() {
    let server = ServeChild::start(&["--delay", "10ms"]);
    let r = closed(
        &format!("http://{}", server.addr),
        "ws-echo-64",
        CONNECTIONS,
        &[],
    );
    assert_known_answer(&r, "ws-echo-64", CONNECTIONS);
    // 64 B of payload in a 2-byte header, the 101 not counted: 66 B per echo.
    let per = r.bytes.mean_response_bytes;
    assert!((per - 66.0).abs() < 0.5, "{per} wire bytes per echo");
}

#[test]
fn large_messages_arrive_in_pieces_and_are_compared_whole() {
    let server = ServeChild::start(&["--delay", "10ms"]);
    // 4 connections: 64 KiB frames take the reads of several buffers each.
    let r = closed(&format!("http://{}", server.addr), "ws-echo-65536", 4, &[]);
    assert_known_answer(&r, "ws-echo-65536", 4);
}

#[test]
fn wss_reads_the_same_with_one_handshake_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    let certs = fairground::tls::RunCerts::make(&["127.0.0.1".into()]).unwrap();
    let files = certs.write(dir.path()).unwrap();
    let (cert, key, ca) = (files.chain, files.key, files.ca);
    let server = ServeChild::start(&[
        "--protocol",
        "https",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--delay",
        "10ms",
    ]);
    let r = closed(
        &format!("https://{}", server.addr),
        "ws-echo-64",
        CONNECTIONS,
        &["--tls-ca", ca.to_str().unwrap()],
    );
    assert_known_answer(&r, "wss ws-echo-64", CONNECTIONS);
    let t = r.tls.expect("a wss run reports its TLS");
    assert_eq!((t.handshakes, t.failed), (CONNECTIONS as u64, 0), "{t:?}");
}

#[test]
fn a_fixed_rate_below_capacity_reads_the_rate_and_latency_d() {
    let server = ServeChild::start(&["--delay", "10ms"]);
    let url = format!("http://{}", server.addr);
    // Capacity C / D = 10 / 10 ms = 1,000 msg/s; ask for 500.
    let r = load(&[
        "--url",
        &url,
        "--scenario",
        "ws-echo-64",
        "-R",
        "500",
        "-c",
        "10",
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
    assert!((rate.achieved_rps / 500.0 - 1.0).abs() < 0.05, "{rate:?}");
    assert!(
        (r.throughput_rps / 500.0 - 1.0).abs() < 0.05,
        "{}",
        r.throughput_rps
    );
    assert_eq!(r.requests.unsent, 0, "{:?}", r.requests);
    // Below capacity nothing waits: latency from the due time is D, or a
    // little more on a busy host (bounded loosely, as above).
    let mean = r.latency.mean_us / 1e6;
    assert!((0.010..0.020).contains(&mean), "mean latency {mean:.5}s");
    assert_eq!(r.answers.wrong, 0, "{:?}", r.answers);
}

/// A liar's run: every message sent is either a wrong answer or the one
/// right echo a fixed server gives (its first), and the example says how.
fn liar(defect: &str) -> LoadReport {
    let server = ServeChild::start(&["--ws-defect", defect]);
    let r = load(&[
        "--url",
        &format!("http://{}", server.addr),
        "--scenario",
        "ws-echo-64",
        "-c",
        "4",
        "-t",
        "1",
        "--warmup",
        "200ms",
        "-d",
        "1s",
        "--timeout",
        "1s",
    ]);
    drop(server);
    r
}

#[test]
fn a_server_that_echoes_a_fixed_message_is_wrong_on_every_later_message() {
    let r = liar("fixed");
    let a = &r.answers;
    // Every echo is checked, the warm-up's too; those of the window are
    // all wrong but each connection's first.
    assert!(
        a.wrong + 4 >= a.checked && a.checked > r.requests.answered.total(),
        "{a:?} {:?}",
        r.requests
    );
    assert!(
        a.example
            .as_deref()
            .is_some_and(|e| e.contains("differs from the 64 B message")),
        "{a:?}"
    );
    // Wrong echoes are not throughput.
    assert_eq!(r.requests.answered.status_2xx, 0, "{:?}", r.requests);
}

#[test]
fn a_server_that_echoes_the_payload_still_masked_is_wrong_on_every_message() {
    let r = liar("no-unmask");
    assert!(r.answers.wrong > 100, "{:?}", r.answers);
    assert_eq!(r.answers.wrong, r.answers.checked, "{:?}", r.answers);
    assert_eq!(
        r.requests.answered.status_other,
        r.requests.answered.total(),
        "{:?}",
        r.requests
    );
    assert_eq!(r.throughput_rps, 0.0);
}

#[test]
fn an_upgrade_answered_with_the_wrong_accept_opens_no_connection_and_is_named() {
    let r = liar("bad-accept");
    assert_eq!(r.connections.established, 0, "{:?}", r.connections);
    assert_eq!(r.requests.sent, 0, "{:?}", r.requests);
    assert!(
        r.answers
            .example
            .as_deref()
            .is_some_and(|e| e.contains("Sec-WebSocket-Accept")),
        "{:?}",
        r.answers
    );
}

/// A WebSocket echo server on 127.0.0.1 whose `stall_at`-th message (over
/// the whole server) is echoed `stall` late, every other one at once:
/// blocking, a thread per connection, the contract's codec.
fn stalling_server(stall_at: u64, stall: Duration) -> std::net::SocketAddr {
    use fairground::contract::ws;
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { return };
            let count = Arc::clone(&count);
            std::thread::spawn(move || {
                let _ = c.set_nodelay(true);
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 16384];
                // The upgrade.
                let key = loop {
                    let Ok(n) = c.read(&mut chunk) else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        let key = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                            .unwrap_or_default()
                            .trim()
                            .to_string();
                        break key;
                    }
                };
                let answer = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
                    ws::accept_key(&key)
                );
                if c.write_all(answer.as_bytes()).is_err() {
                    return;
                }
                loop {
                    while let Ok(Some(h)) = ws::Header::parse(&buf) {
                        let end = h.len + h.payload as usize;
                        if buf.len() < end {
                            break;
                        }
                        let mut payload = buf[h.len..end].to_vec();
                        buf.drain(..end);
                        if let Some(k) = h.mask {
                            ws::apply_mask(&mut payload, k, 0);
                        }
                        if h.opcode == ws::OP_CLOSE {
                            return;
                        }
                        if count.fetch_add(1, Ordering::Relaxed) + 1 == stall_at {
                            std::thread::sleep(stall);
                        }
                        if c.write_all(&ws::frame(true, h.opcode, &payload, None))
                            .is_err()
                        {
                            return;
                        }
                    }
                    match c.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    addr
}

/// At a fixed rate, a stalled echo delays every message due behind it on
/// its connection: measured from their due times the stall shows in the
/// tail (coordinated omission corrected), as it does for HTTP
/// (tests/load_rate.rs); measured from their actual sends it hides.
#[test]
fn at_a_fixed_rate_a_stalled_echo_shows_in_the_corrected_tail() {
    let addr = stalling_server(300, Duration::from_millis(500));
    // 1,000 msg/s on one connection for 2 s: ~2,000 messages, ~500 of them
    // due during the stall, sent late back to back, their latencies from
    // their due times spread over 0–500 ms: the corrected p99 near 490 ms
    // (≥ 200 ms asserted, room for a busy host); uncorrected, one message
    // of 2,000 is slow, so its p99 is a loopback echo (< 100 ms).
    let r = load(&[
        "--url",
        &format!("http://{addr}"),
        "--scenario",
        "ws-echo-64",
        "-R",
        "1000",
        "-c",
        "1",
        "-t",
        "1",
        "-d",
        "2s",
        "--timeout",
        "2s",
    ]);
    let unc = r
        .uncorrected_latency
        .as_ref()
        .expect("fixed rate reports uncorrected latency");
    assert!(
        r.latency.p99_us >= 200_000,
        "corrected p99 {} µs",
        r.latency.p99_us
    );
    assert!(unc.p99_us < 100_000, "uncorrected p99 {} µs", unc.p99_us);
    assert!(
        r.latency.max_us >= 450_000,
        "corrected max {} µs",
        r.latency.max_us
    );
    let rate = r.rate.expect("fixed rate reports its rate");
    assert!(rate.ratio > 0.9 && rate.ratio < 1.05, "{rate:?}");
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(r.answers.wrong, 0, "{:?}", r.answers);
}
