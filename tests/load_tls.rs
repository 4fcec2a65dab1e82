//! Known answers for what the loader reads of TLS itself, against the
//! reference server (`fairground serve --protocol https|h2`) behind a
//! counting proxy on 127.0.0.1, no Docker:
//! - a server that holds its first flight (ServerHello, certificate) for H
//!   reads a handshake time of at least H at p50 (−2% for the clocks) and
//!   not 25% more: the lower bound is what no host can move, the upper
//!   one leaves a busy host room for the handshake's crypto and still fails
//!   a loader that times something else (the TCP connect alone, or the
//!   handshake twice);
//! - wire bytes per response are the TLS records the server wrote per
//!   response, counted on the server's side of the connection: the
//!   proxy's count and the loader's over two runs of different lengths,
//!   so the handshake, session tickets and closing alerts cancel out.
//!
//! Every load is bounded to a few seconds.

mod load_support;

use std::time::Duration;

use fairground::roles::load::LoadReport;
use load_support::load;
use load_support::proxy::Proxy;
use load_support::serve_child::ServeChild;

/// How long the proxy holds each server's first flight.
const HOLD: Duration = Duration::from_millis(400);

/// The run's certificates, written to a temporary folder: (folder, chain,
/// key, CA).
fn certs() -> (tempfile::TempDir, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let certs = fairground::tls::RunCerts::make(&["127.0.0.1".into()]).unwrap();
    let files = certs.write(dir.path()).unwrap();
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (chain, key, ca) = (s(&files.chain), s(&files.key), s(&files.ca));
    (dir, chain, key, ca)
}

#[test]
fn a_server_that_holds_its_handshake_h_reads_h_at_p50() {
    let (_dir, chain, key, ca) = certs();
    let server = ServeChild::start(&[
        "--protocol",
        "https",
        "--tls-cert",
        &chain,
        "--tls-key",
        &key,
    ]);
    let proxy = Proxy::start(server.addr, HOLD);
    let url = format!("https://{}", proxy.addr);
    let r = load(&[
        "--url",
        &url,
        "--tls-ca",
        &ca,
        "--scenario",
        "plaintext",
        "-c",
        "4",
        "-t",
        "1",
        "--warmup",
        "300ms",
        "-d",
        "1s",
        "--connect-timeout",
        "2s",
    ]);
    let t = r.tls.expect("an https run reports its TLS");
    assert_eq!((t.handshakes, t.failed), (4, 0), "{t:?}");
    let p50 = t.handshake.p50_us as f64 / 1e3;
    let h = HOLD.as_secs_f64() * 1e3;
    eprintln!(
        "handshake held {h} ms: p50 {p50:.1} ms, p99 {:.1} ms",
        t.handshake.p99_us as f64 / 1e3
    );
    assert!(
        p50 >= 0.98 * h && p50 <= 1.25 * h,
        "handshake p50 {p50:.1} ms, the server held it {h} ms: {t:?}"
    );
    assert!(r.responses.status_2xx > 0, "{:?}", r.responses);
}

/// Closed loop, one connection, exactly `n` requests of `plaintext` over
/// `protocol` through `proxy`; the report and the bytes the server wrote.
fn bounded(proxy: &Proxy, protocol: &str, ca: Option<&str>, n: u64) -> (LoadReport, u64) {
    let before = proxy.down.load(std::sync::atomic::Ordering::SeqCst);
    let scheme = if ca.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", proxy.addr);
    let n = n.to_string();
    let mut args = vec![
        "--url",
        &url,
        "--protocol",
        protocol,
        "--scenario",
        "plaintext",
        "-c",
        "1",
        "-t",
        "1",
        "-n",
        &n,
        "-d",
        "10s",
    ];
    if let Some(ca) = ca {
        args.extend(["--tls-ca", ca]);
    }
    let r = load(&args);
    proxy.settle();
    let wrote = proxy.down.load(std::sync::atomic::Ordering::SeqCst) - before;
    (r, wrote)
}

/// Bytes per response from two bounded runs (200 and 600 requests), as the
/// difference over the 400 more, so what a connection carries once
/// (handshake, session tickets, SETTINGS, closing alerts) cancels: the
/// server's, counted by the proxy, and the loader's, from its wire bytes
/// per response (the first answer's share holds what arrived once after
/// the handshake).
fn per_response(proxy: &Proxy, protocol: &str, ca: Option<&str>) -> (f64, f64) {
    let (short, b1) = bounded(proxy, protocol, ca, 200);
    let (long, b2) = bounded(proxy, protocol, ca, 600);
    for (r, n) in [(&short, 200), (&long, 600)] {
        assert_eq!(
            r.errors_whole_run.total(),
            0,
            "{protocol}: {:?}",
            r.errors_whole_run
        );
        assert_eq!(r.responses.status_2xx, n, "{protocol}: {:?}", r.responses);
    }
    let server = (b2 - b1) as f64 / 400.0;
    let (m1, m2) = (
        short.bytes.mean_response_bytes,
        long.bytes.mean_response_bytes,
    );
    // Undifferenced, the figure a report shows is within a few per cent.
    assert!(
        (m2 / server - 1.0).abs() < 0.03,
        "{protocol}: {m2} B per response, the server wrote {server:.2}"
    );
    (server, (m2 * 600.0 - m1 * 200.0) / 400.0)
}

#[test]
fn wire_bytes_per_response_are_the_records_the_server_wrote() {
    let (_dir, chain, key, ca) = certs();
    // Plain HTTP/1.1 first: the bytes of the answer itself.
    let plain = ServeChild::start(&[]);
    let proxy = Proxy::start(plain.addr, Duration::ZERO);
    let (server, loader) = per_response(&proxy, "http1", None);
    eprintln!("http1: server wrote {server:.2} B per response, the loader read {loader:.2}");
    assert!(
        (loader / server - 1.0).abs() < 0.005,
        "http1: {loader} vs {server}"
    );
    let http = server;
    for protocol in ["https", "h2"] {
        let tls = ServeChild::start(&[
            "--protocol",
            protocol,
            "--tls-cert",
            &chain,
            "--tls-key",
            &key,
        ]);
        let proxy = Proxy::start(tls.addr, Duration::ZERO);
        let (server, loader) = per_response(&proxy, protocol, Some(&ca));
        eprintln!(
            "{protocol}: server wrote {server:.2} B per response, the loader read {loader:.2}"
        );
        assert!(
            (loader / server - 1.0).abs() < 0.005,
            "{protocol}: the loader read {loader:.2} B per response, the server wrote {server:.2}"
        );
        if protocol == "https" {
            // The same answer in a record: a 5-byte header and at least a
            // 16-byte tag more.
            assert!(
                server >= http + 21.0,
                "https: {server:.2} B per response against {http:.2} in plain HTTP/1.1"
            );
        }
    }
}
