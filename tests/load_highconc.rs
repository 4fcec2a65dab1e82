//! 10,000 connections against the reference server on loopback are all
//! established, with no connect error.

mod load_support;

use load_support::{load, raise_nofile};

/// Descriptors the test process needs: the server's 10,000 accepted sockets
/// plus headroom (the loader is a separate process with its own limit).
const NEEDED: u64 = 10_200;

#[test]
fn ten_thousand_connections_are_all_established() {
    let limit = raise_nofile();
    if limit < NEEDED {
        panic!(
            "the hard nofile limit of this host is {limit}, below the {NEEDED} this test \
             needs for 10,000 connections; raise it (ulimit -Hn / limits.conf) and rerun"
        );
    }
    // Requests start only once every connection is open (the start gate),
    // and the run ends after 20,000 answers (two per connection): on a quiet
    // machine that is about a second; the 10 s duration and 5 s connect
    // timeout are only upper bounds for a debug build on a busy machine.
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 2).unwrap();
    let url = format!("http://{}", server.addr);
    let r = load(&[
        "--url",
        &url,
        "--scenario",
        "plaintext",
        "-c",
        "10000",
        "-t",
        "2",
        "-n",
        "20000",
        "-d",
        "10s",
        "--connect-timeout",
        "5s",
        "--timeout",
        "8s",
    ]);
    server.stop();
    assert_eq!(r.errors_whole_run.connect, 0, "{:?}", r.errors_whole_run);
    assert_eq!(
        r.connections.attempted, 10_000,
        "warnings: {:?}",
        r.warnings
    );
    assert_eq!(r.connections.established, 10_000, "{:?}", r.connections);
    assert_eq!(r.connections.peak_open, 10_000, "{:?}", r.connections);
    assert_eq!(r.responses.status_2xx, 20_000, "{:?}", r.errors_whole_run);
}
