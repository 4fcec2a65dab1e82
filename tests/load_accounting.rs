//! The loader counts exactly what happened: requests, status classes, each
//! kind of error, and connections, against real servers on loopback.

mod load_support;

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::time::Duration;

use load_support::{load, load_with, ok_response, Action, ScriptedServer};

#[test]
fn counts_exactly_the_requests_the_server_received() {
    let server = ScriptedServer::start(|_| Action::Reply(ok_response()));
    let r = load(&[
        "--url",
        &server.url(),
        "-c",
        "7",
        "-t",
        "2",
        "-n",
        "1000",
        "-d",
        "5s",
    ]);
    assert_eq!(r.responses.total, 1000, "{r:?}");
    assert_eq!(r.responses.status_2xx, 1000);
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(server.received.load(Ordering::SeqCst), 1000);
    // Bounded by --requests, so measured time is shorter than --duration.
    assert!(r.measured_s < 5.0, "{}", r.measured_s);
    assert_eq!(r.bytes.mean_response_bytes, ok_response().len() as f64);
    assert_eq!(r.latency.count, 1000);
}

#[test]
fn timed_run_counts_every_answer_but_those_in_flight_at_the_end() {
    let server = ScriptedServer::start(|_| Action::Reply(ok_response()));
    let r = load(&["--url", &server.url(), "-c", "5", "-t", "1", "-d", "1s"]);
    let received = server.received.load(Ordering::SeqCst);
    // Each connection may have one request in flight when the run ends.
    assert!(
        received >= r.responses.total && received <= r.responses.total + 5,
        "server saw {received}, loader counted {}",
        r.responses.total
    );
    assert!(r.responses.total > 0);
    let windows: u64 = r.windows.iter().map(|w| w.ok).sum();
    assert_eq!(windows, r.responses.status_2xx, "{:?}", r.windows);
}

#[test]
fn refused_connections_are_connect_errors_and_nothing_is_established() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // dropped: nothing listens there now
    let url = format!("http://127.0.0.1:{port}");
    let r = load(&["--url", &url, "-c", "4", "-t", "1", "-d", "1s"]);
    assert!(r.errors.connect >= 4, "{:?}", r.errors);
    assert_eq!(r.connections.established, 0);
    assert_eq!(r.responses.total, 0);
    assert!(
        r.warnings.iter().any(|w| w.contains("only 0 of the 4")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn server_closing_mid_response_is_a_read_error() {
    let server = ScriptedServer::start(|_| {
        Action::ReplyAndClose(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part".to_vec())
    });
    let r = load(&["--url", &server.url(), "-c", "2", "-t", "1", "-d", "1s"]);
    assert!(r.errors.read > 0, "{:?}", r.errors);
    assert_eq!(r.responses.total, 0, "a cut response must not count");
    assert!(r.connections.reconnects > 0);
    assert_eq!(
        r.errors.read,
        server.received.load(Ordering::SeqCst).min(r.errors.read)
    );
}

#[test]
fn malformed_status_line_is_a_parse_error() {
    let server = ScriptedServer::start(|_| {
        Action::Reply(b"HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n".to_vec())
    });
    let r = load(&["--url", &server.url(), "-c", "2", "-t", "1", "-d", "1s"]);
    assert!(r.errors.parse > 0, "{:?}", r.errors);
    assert_eq!(r.responses.total, 0);
    assert_eq!(
        r.errors.read + r.errors.timeout + r.errors.connect,
        0,
        "{:?}",
        r.errors
    );
}

#[test]
fn stalled_requests_count_as_timeouts_when_the_timeout_expires() {
    let server = ScriptedServer::start(|_| Action::Stall);
    // 2 connections, 300 ms timeout, 1.2 s run: each connection times out
    // at ~0.3, ~0.6 and ~0.9 s (plus reconnect time), so 4 to 8 timeouts in
    // all. A loader that counted a timeout only when the answer finally came
    // would count none.
    let r = load(&[
        "--url",
        &server.url(),
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "1200ms",
        "--timeout",
        "300ms",
    ]);
    assert!((4..=8).contains(&r.errors.timeout), "{:?}", r.errors);
    assert_eq!(r.responses.total, 0);
}

#[test]
fn server_errors_are_5xx_and_not_throughput() {
    let server = ScriptedServer::start(|_| {
        Action::Reply(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_vec())
    });
    let r = load(&["--url", &server.url(), "-c", "2", "-t", "1", "-d", "1s"]);
    assert!(r.responses.status_5xx > 0);
    assert_eq!(r.responses.status_5xx, r.responses.total);
    assert_eq!(r.responses.status_2xx, 0);
    assert_eq!(r.throughput_rps, 0.0);
    assert_eq!(
        r.errors.total(),
        0,
        "5xx answers are answers, not loader errors"
    );
}

#[test]
fn connections_beyond_the_servers_backlog_are_reported_as_not_established() {
    use socket2::{Domain, Socket, Type};
    // A listener with a backlog of 1 that never accepts: the kernel completes
    // about two handshakes, then drops SYNs, so the other connects time out.
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    socket.listen(1).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    let url = format!("http://{addr}");
    let r = load(&[
        "--url",
        &url,
        "-c",
        "20",
        "-t",
        "1",
        "-d",
        "1s",
        "--connect-timeout",
        "300ms",
    ]);
    assert!(r.connections.established < 20, "{:?}", r.connections);
    assert!(r.connections.established >= 1, "{:?}", r.connections);
    assert!(r.errors.connect > 0, "{:?}", r.errors);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("of the 20 requested connections were established")),
        "{:?}",
        r.warnings
    );
    drop(socket);
}

#[test]
fn connections_beyond_the_nofile_limit_are_announced_and_not_attempted() {
    use std::os::unix::process::CommandExt;
    let server = fairground::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_fairground"));
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in pre_exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 100,
                rlim_max: 100,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let r = load_with(cmd, &["--url", &url, "-c", "300", "-t", "1", "-d", "1s"]);
    server.stop();
    assert_eq!(r.connections.requested, 300);
    assert!(r.connections.attempted < 100, "{:?}", r.connections);
    assert_eq!(
        r.connections.established, r.connections.attempted as u64,
        "{:?}",
        r.connections
    );
    assert_eq!(
        r.errors.connect, 0,
        "the limit must be announced, not show up as connect errors"
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("nofile")),
        "{:?}",
        r.warnings
    );
    assert!(r.responses.status_2xx > 0);
}

#[test]
fn pipelining_depth_8_answers_as_many_requests_as_depth_1() {
    let server = fairground::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    let mut totals = Vec::new();
    for depth in ["1", "8"] {
        let r = load(&[
            "--url",
            &url,
            "--scenario",
            "param",
            "-c",
            "4",
            "-t",
            "2",
            "-n",
            "3000",
            "-d",
            "10s",
            "--pipeline",
            depth,
        ]);
        assert_eq!(r.errors.total(), 0, "depth {depth}: {:?}", r.errors);
        assert_eq!(r.responses.status_2xx, r.responses.total, "depth {depth}");
        totals.push(r.responses.total);
    }
    server.stop();
    assert_eq!(totals, vec![3000, 3000]);
}

#[test]
fn every_scenario_gets_only_2xx_from_the_reference_server() {
    let server = fairground::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
    let url = format!("http://{}", server.addr);
    for scenario in [
        "plaintext",
        "json",
        "param",
        "echo",
        "validate",
        "middleware-10",
    ] {
        let r = load(&[
            "--url",
            &url,
            "--scenario",
            scenario,
            "-c",
            "2",
            "-t",
            "1",
            "-n",
            "200",
            "-d",
            "5s",
        ]);
        assert_eq!(
            r.responses.status_2xx, 200,
            "{scenario}: {:?} {:?}",
            r.responses, r.errors
        );
    }
    server.stop();
    let _ = Duration::ZERO;
}
