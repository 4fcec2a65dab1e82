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
    assert_eq!(r.responses.total(), 1000, "{r:?}");
    assert_eq!(r.responses.status_2xx, 1000);
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(server.received.load(Ordering::SeqCst), 1000);
    // Bounded by --requests, so measured time is shorter than --duration.
    assert!(r.measured_s < 5.0, "{}", r.measured_s);
    assert_eq!(r.bytes.mean_response_bytes, ok_response().len() as f64);
    assert_eq!(r.latency.count, 1000);
}

#[test]
fn every_request_sent_in_the_window_is_answered_or_lost_none_dropped() {
    let server = ScriptedServer::start(|_| Action::Reply(ok_response()));
    let r = load(&["--url", &server.url(), "-c", "5", "-t", "1", "-d", "1s"]);
    let received = server.received.load(Ordering::SeqCst);
    let q = &r.requests;
    assert!(q.balanced(), "{q:?}");
    assert_eq!(q.lost.total(), 0, "{q:?}");
    assert!(q.sent > 0);
    // The load went on through the drain: the server saw more.
    assert!(
        received >= q.sent,
        "server saw {received}, window sent {}",
        q.sent
    );
    assert_eq!(r.latency.count, q.answered.total());
    // Throughput counts what completed in the window, second by second.
    let windows: u64 = r.windows.iter().map(|w| w.ok).sum();
    assert_eq!(windows, r.responses.status_2xx, "{:?}", r.windows);
    assert_eq!(r.connections.serving, 5, "{:?}", r.connections);
}

/// Closed loop, N connections, a server that answers each request after
/// exactly L: the loader must report N/L req/s whatever L is next to the
/// window (the old rule, "sent and answered inside the window", lost every
/// request in flight at the window's start: −L/window, −33% here).
#[test]
fn constant_latency_gives_n_over_l_even_when_l_is_a_third_of_the_window() {
    let delay = Duration::from_millis(300);
    let server = ScriptedServer::start(move |_| Action::SleepThenReply(delay, ok_response()));
    let r = load(&[
        "--url",
        &server.url(),
        "-c",
        "20",
        "-t",
        "1",
        "--warmup",
        "300ms",
        "-d",
        "900ms",
    ]);
    let expected = 20.0 / delay.as_secs_f64();
    // ±8%: one request per connection can straddle each edge by up to the
    // time the loader takes to send (µs); what is left is scheduling noise of
    // a thread-per-connection test server on a shared 2-core machine.
    assert!(
        (r.throughput_rps / expected - 1.0).abs() < 0.08,
        "{:.1} req/s, expected {expected:.1}: {:?}",
        r.throughput_rps,
        r.windows
    );
    // Every request sent in the window was answered, the last ones in the drain.
    assert!(
        r.requests.balanced() && r.requests.lost.total() == 0,
        "{:?}",
        r.requests
    );
    // The drain waited for the window's last answers, and no longer than one
    // latency (plus a poll of the loop that notices).
    assert!(r.drain_s < 0.35, "{}", r.drain_s);
    assert!(r.latency.p50_us >= 300_000, "{:?}", r.latency);
    // Little's law: in use = throughput × mean latency.
    let in_use = r.throughput_rps * r.latency.mean_us / 1e6;
    assert!(
        (in_use / 20.0 - 1.0).abs() < 0.1,
        "{in_use:.1} of 20 connections"
    );
}

#[test]
fn requests_that_never_finish_are_timeouts_even_after_the_window() {
    // Every third request hangs (the connection stays open, silent).
    let server = ScriptedServer::start(|n| {
        if n % 3 == 2 {
            Action::Stall
        } else {
            Action::SleepThenReply(Duration::from_millis(50), ok_response())
        }
    });
    let r = load(&[
        "--url",
        &server.url(),
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "600ms",
        "--timeout",
        "1s",
    ]);
    // The timeout is longer than the window: only the drain can see them.
    assert!(r.requests.lost.timeout > 0, "{:?}", r.requests);
    assert!(r.requests.balanced(), "{:?}", r.requests);
    assert_eq!(r.errors.timeout, r.requests.lost.timeout);
    assert!(r.drain_s >= 0.4, "{}", r.drain_s);
}

#[test]
fn a_server_that_answers_wrong_under_load_is_caught() {
    // Right for the first 100 requests (what verification would see), then
    // a plaintext body that is not the contract's.
    let server = ScriptedServer::start(|n| {
        if n < 100 {
            Action::Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!".to_vec())
        } else {
            Action::Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World?".to_vec())
        }
    });
    let r = load(&[
        "--url",
        &server.url(),
        "--scenario",
        "plaintext",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "1s",
    ]);
    assert!(r.answers.checked > 0, "{:?}", r.answers);
    assert!(r.answers.wrong > 0, "{:?}", r.answers);
    let example = r.answers.example.as_deref().unwrap();
    assert!(example.contains("Hello, World?"), "{example}");
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
    assert_eq!(r.responses.total(), 0);
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
    assert_eq!(r.responses.total(), 0, "a cut response must not count");
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
    assert_eq!(r.responses.total(), 0);
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
    assert_eq!(r.responses.total(), 0);
}

#[test]
fn server_errors_are_5xx_and_not_throughput() {
    let server = ScriptedServer::start(|_| {
        Action::Reply(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_vec())
    });
    let r = load(&["--url", &server.url(), "-c", "2", "-t", "1", "-d", "1s"]);
    assert!(r.responses.status_5xx > 0);
    assert_eq!(r.responses.status_5xx, r.responses.total());
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
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
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
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
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
        assert_eq!(r.responses.status_2xx, r.responses.total(), "depth {depth}");
        totals.push(r.responses.total());
    }
    server.stop();
    assert_eq!(totals, vec![3000, 3000]);
}

#[test]
fn every_scenario_gets_only_2xx_from_the_reference_server() {
    let server = fairground::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
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
