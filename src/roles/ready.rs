//! `fairground ready`: wait until a URL answers 200, from inside the run
//! network, and print when it first did.
//!
//! Runs in the fairground image as a probe container, so readiness is judged
//! from inside the run network, not from the host. Two ways:
//! - after the server started, on its address (`--every 10ms`): the first
//!   answer may come at the first attempt, so a cold start measured so is
//!   only an upper bound;
//! - before the server starts (`--every 1ms --hold`): the prober owns the
//!   network namespace the server joins and polls `127.0.0.1:PORT` from
//!   before the server's process exists, so the first 200 is seen within a
//!   poll interval of the server answering; `--hold` keeps it (and so the
//!   namespace) alive after reporting, until the container is removed.
//!
//! Deliberately tiny: raw HTTP/1.1 GETs on a std `TcpStream`, framed by the
//! loader's parser; the `verify` module does real HTTP checking.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::roles::load::parse::{Parsed, ResponseParser};
use crate::roles::load::Target;

/// Pause between attempts, by default.
pub const RETRY_EVERY: Duration = Duration::from_millis(10);

/// Pause between attempts of a prober that polls before the server starts:
/// the cold start's resolution. A refused connect on loopback costs tens of
/// microseconds, so polling this often costs a few percent of one core for
/// the server's start-up only.
pub const PRESTART_EVERY: Duration = Duration::from_millis(1);

/// The JSON line `fairground ready` prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadyReport {
    /// The URL polled.
    pub url: String,
    /// Unix time (ms) of the first attempt.
    #[serde(default)]
    pub started_unix_ms: u64,
    /// Whether a 200 came back before the timeout.
    pub ready: bool,
    /// Unix time (ms) of the first 200.
    pub first_200_unix_ms: Option<u64>,
    /// Unix time (ns) of the first 200: the instant its whole response was
    /// read (older probers print only the ms).
    #[serde(default)]
    pub first_200_unix_ns: Option<u64>,
    /// Requests tried, the successful one included.
    pub attempts: u64,
    /// Milliseconds from the prober's start to the first 200 (or the timeout).
    pub waited_ms: u64,
    /// What the last failed attempt saw (connection refused, status 503 …).
    pub last_error: Option<String>,
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn unix_ms() -> u64 {
    unix_ns() / 1_000_000
}

/// One GET; `Ok(status)` when a whole response came back (framed by the
/// loader's own parser, so "ready" means what the loader will see).
fn attempt(target: &Target, budget: Duration) -> std::io::Result<u16> {
    let budget = budget.max(Duration::from_millis(50));
    let mut s = TcpStream::connect_timeout(&target.addr, budget)?;
    s.set_read_timeout(Some(budget))?;
    s.set_write_timeout(Some(budget))?;
    write!(
        s,
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: fairground-ready\r\nConnection: close\r\n\r\n",
        target.path, target.authority
    )?;
    let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    let mut parser = ResponseParser::new();
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return parser
                .finish_on_close()
                .map(|(status, _)| status)
                .ok_or_else(|| invalid("closed before a whole response".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
        match parser.feed(&buf, false) {
            Ok(Parsed::Complete { status, .. }) => return Ok(status),
            Ok(Parsed::NeedMore { used }) => {
                buf.drain(..used);
            }
            Err(e) => {
                let head: String = String::from_utf8_lossy(&buf).chars().take(80).collect();
                return Err(invalid(format!("{e} in `{}`", head.trim())));
            }
        }
        if buf.len() > crate::roles::load::conn::MAX_HEAD {
            return Err(invalid("response head too large".into()));
        }
    }
}

/// Poll until 200 or timeout, `every` apart. Bounded in time and therefore
/// in count.
pub fn wait(url: &str, timeout: Duration, every: Duration) -> anyhow::Result<ReadyReport> {
    let target = Target::parse(url)?;
    let started_unix_ms = unix_ms();
    let start = Instant::now();
    let mut attempts = 0u64;
    let mut last_error = None;
    while start.elapsed() < timeout {
        attempts += 1;
        let left = timeout
            .saturating_sub(start.elapsed())
            .min(Duration::from_secs(2));
        match attempt(&target, left) {
            Ok(200) => {
                let at = unix_ns();
                return Ok(ReadyReport {
                    url: url.to_string(),
                    started_unix_ms,
                    ready: true,
                    first_200_unix_ms: Some(at / 1_000_000),
                    first_200_unix_ns: Some(at),
                    attempts,
                    waited_ms: start.elapsed().as_millis() as u64,
                    last_error: None,
                });
            }
            Ok(code) => last_error = Some(format!("status {code}")),
            Err(e) => last_error = Some(e.to_string()),
        }
        std::thread::sleep(every);
    }
    Ok(ReadyReport {
        url: url.to_string(),
        started_unix_ms,
        ready: false,
        first_200_unix_ms: None,
        first_200_unix_ns: None,
        attempts,
        waited_ms: start.elapsed().as_millis() as u64,
        last_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_first_200_from_the_reference_server() {
        let server = crate::roles::serve::start("127.0.0.1".parse().unwrap(), 0, 1).unwrap();
        let r = wait(
            &format!("http://{}/", server.addr),
            Duration::from_secs(5),
            RETRY_EVERY,
        )
        .unwrap();
        assert!(r.ready, "{r:?}");
        assert!(r.first_200_unix_ms.unwrap() > 1_600_000_000_000);
        assert_eq!(
            r.first_200_unix_ns.unwrap() / 1_000_000,
            r.first_200_unix_ms.unwrap()
        );
        server.stop();
    }

    #[test]
    fn a_prober_polling_before_the_server_sees_its_first_answer_not_the_start() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            let listening = unix_ns();
            (
                crate::roles::serve::start("127.0.0.1".parse().unwrap(), port, 1),
                listening,
            )
        });
        let r = wait(
            &format!("http://127.0.0.1:{port}/"),
            Duration::from_secs(5),
            PRESTART_EVERY,
        )
        .unwrap();
        let (server, listening) = late.join().unwrap();
        assert!(r.ready, "{r:?}");
        // Refused until the server listened, answered once it did: never
        // before it, and not at the first attempt (no upper bound).
        assert!(r.attempts > 1, "{r:?}");
        assert!(r.first_200_unix_ns.unwrap() >= listening, "{r:?}");
        assert!(r.first_200_unix_ns.unwrap() < listening + 1_000_000_000);
        server.unwrap().stop();
    }

    #[test]
    fn times_out_on_a_closed_port_with_the_last_error() {
        // Bind then drop: the port is (almost certainly) closed now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = wait(
            &format!("http://127.0.0.1:{port}/"),
            Duration::from_millis(200),
            PRESTART_EVERY,
        )
        .unwrap();
        assert!(!r.ready);
        assert!(r.attempts >= 2);
        assert!(r.last_error.is_some());
    }
}
