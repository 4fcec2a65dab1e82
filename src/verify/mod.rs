//! `fairground verify`: contract checks against a running framework.
//!
//! Owns the judgement "may this framework be measured on this scenario?". It
//! sends requests drawn at random (after the server is up) from `contract`,
//! compares the answers with `contract::expected_response`, and reports
//! pass / warn / fail per check. It must not start containers itself in
//! `--url` mode and must never send traffic anywhere but the given URL.
//!
//! It speaks to the server in one [`Protocol`] per call: HTTP/1.1 on TCP
//! (`http1`), HTTP/1.1 over TLS (`https`), HTTP/2 over TLS (`h2`) or HTTP/2
//! with prior knowledge (`h2c`). The answer checks are the same in all of
//! them; the connection checks are the protocol's own (`connection` for
//! HTTP/1.1, `connection_http2` for HTTP/2), after the checks that the
//! protocol is spoken at all (`tls`, `http2`).

pub mod answer;
pub mod client;
pub mod connection;
pub mod connection_http2;
pub mod database;
pub mod footprint;
mod grpc;
pub mod http2;
pub mod orchestrate;
pub mod report;
pub mod scenario;
pub mod tls;
mod websocket;

use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::contract::{Protocol, Scenario};

use client::{ClientError, Conn, Io, Response};
use http2::H2Conn;
pub use report::{CheckStatus, ContractCheck, TlsFacts, VerifyJson, VerifyReport, VerifyTable};

/// How `verify_url` checks a server.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Bound on each request (connect, write, whole answer). A server that
    /// does not answer within it fails with "timed out after …".
    pub timeout: Duration,
    /// Whether a server that does not answer pipelined requests in order
    /// fails (otherwise this is only recorded, as a warning).
    pub require_pipelining: bool,
    /// Seed of the random inputs; None draws one at random (recorded in the
    /// report so a run can be repeated with the same inputs).
    pub seed: Option<u64>,
    /// Requests sent on one connection by the keep-alive check.
    pub keep_alive_requests: u32,
    /// Requests written at once by the pipelining check.
    pub pipeline_depth: u32,
    /// Framework name to put in the report, when known.
    pub framework: Option<String>,
    /// The protocol to speak: https and h2 need an https:// URL and
    /// [`VerifyOptions::tls`]; http1 and h2c an http:// URL.
    pub protocol: Protocol,
    /// What to trust over TLS (https and h2; ignored otherwise).
    pub tls: Option<VerifyTls>,
}

/// What verify trusts over TLS: the server's certificate must chain to
/// `ca_pem` (and to nothing else) and carry `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyTls {
    /// The CA certificate to trust, PEM.
    pub ca_pem: Vec<u8>,
    /// The name the server's certificate must carry: a DNS name (also sent
    /// as SNI) or an IP address.
    pub name: String,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            timeout: Duration::from_secs(5),
            require_pipelining: false,
            seed: None,
            keep_alive_requests: 100,
            pipeline_depth: 8,
            framework: None,
            protocol: Protocol::Http1,
            tls: None,
        }
    }
}

/// Why verification could not even start.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The base URL is not `http://HOST:PORT`.
    #[error("`{url}` is not a base URL of the form http://HOST:PORT (e.g. http://127.0.0.1:8080): {why}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The host name did not resolve.
    #[error("cannot resolve the host of `{url}`: {source}")]
    Resolve {
        /// The URL given.
        url: String,
        /// What the resolver said.
        source: std::io::Error,
    },
    /// The URL's scheme is not the one the protocol runs on.
    #[error("`{url}` does not fit protocol {protocol}: {why}")]
    ProtocolMismatch {
        /// The URL given.
        url: String,
        /// The protocol asked for.
        protocol: Protocol,
        /// What would fit.
        why: String,
    },
    /// A TLS protocol without usable TLS settings (no CA, a CA that is not
    /// PEM, a name that no certificate can carry).
    #[error("cannot verify {protocol}: {why}")]
    Tls {
        /// The protocol asked for.
        protocol: Protocol,
        /// What is missing or wrong.
        why: String,
    },
    /// A framework asked for by name is not in the roster.
    #[error("no framework `{name}`{hint}; known: {known}")]
    UnknownFramework {
        /// The name asked for.
        name: String,
        /// ` (did you mean `x`?)`, or empty.
        hint: String,
        /// The names that exist, or `none`.
        known: String,
    },
}

impl crate::exit::ExitCodeOf for VerifyError {
    fn exit_code(&self) -> crate::exit::ExitCode {
        use crate::exit::ExitCode::BadInput;
        match self {
            VerifyError::BadUrl { .. } => BadInput,
            VerifyError::Resolve { .. } => BadInput,
            VerifyError::UnknownFramework { .. } => BadInput,
            VerifyError::ProtocolMismatch { .. } => BadInput,
            VerifyError::Tls { .. } => BadInput,
        }
    }
}

/// The server under test: where to connect, what Host header (HTTP/2:
/// `:authority`) to send, and in which protocol.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Socket address to connect to.
    pub addr: SocketAddr,
    /// Host header value (`host:port` as given in the URL).
    pub host: String,
    /// Per-request timeout.
    pub timeout: Duration,
    /// The protocol spoken.
    pub protocol: Protocol,
    /// TLS to open first (https and h2).
    tls: Option<tls::TlsClient>,
}

impl Endpoint {
    /// Parse `http://HOST:PORT[/]` and resolve HOST (an IP needs no resolver,
    /// which matters in the FROM-scratch verifier image): HTTP/1.1 on TCP.
    pub async fn from_url(url: &str, timeout: Duration) -> Result<Endpoint, VerifyError> {
        Endpoint::resolve(url, Protocol::Http1, None, timeout).await
    }

    /// Parse `http://HOST:PORT[/]` (http1, h2c) or `https://HOST:PORT[/]`
    /// (https, h2, which need `tls`) and resolve HOST.
    pub async fn resolve(
        url: &str,
        protocol: Protocol,
        tls: Option<&VerifyTls>,
        timeout: Duration,
    ) -> Result<Endpoint, VerifyError> {
        let bad = |why: &str| VerifyError::BadUrl {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let want = if protocol.is_tls() { "https" } else { "http" };
        match uri.scheme_str() {
            Some(scheme) if scheme == want => {}
            Some("http" | "https") => {
                return Err(VerifyError::ProtocolMismatch {
                    url: url.to_string(),
                    protocol,
                    why: match protocol {
                        Protocol::Http1 => "http1 is HTTP/1.1 on plain TCP: give an http:// URL",
                        Protocol::Https => "https is HTTP/1.1 over TLS: give an https:// URL",
                        Protocol::H2 => "h2 is HTTP/2 over TLS: give an https:// URL",
                        Protocol::H2c => {
                            "h2c is HTTP/2 with prior knowledge on plain TCP: give an http:// URL"
                        }
                    }
                    .to_string(),
                })
            }
            _ => {
                return Err(bad(
                    "only http:// (http1, h2c) and https:// (https, h2) are supported",
                ))
            }
        }
        let tls = if protocol.is_tls() {
            let given = tls.ok_or_else(|| VerifyError::Tls {
                protocol,
                why: "it runs over TLS, so the CA to trust and the name the server's \
                      certificate carries are needed (VerifyOptions::tls)"
                    .into(),
            })?;
            Some(tls::TlsClient::new(given, protocol)?)
        } else {
            None
        };
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(bad("give the base URL only, without a path"));
        }
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = authority.port_u16().unwrap_or(80);
        let addr = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, port),
            Err(_) => {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
                    .await
                    .map_err(|source| VerifyError::Resolve {
                        url: url.to_string(),
                        source,
                    })?
                    .collect();
                // IPv4 first: `localhost` often resolves to ::1 first while
                // servers commonly listen on 127.0.0.1 only.
                addrs
                    .iter()
                    .find(|a| a.is_ipv4())
                    .or(addrs.first())
                    .copied()
                    .ok_or_else(|| bad("the host resolved to no address"))?
            }
        };
        Ok(Endpoint {
            addr,
            host: authority.as_str().to_string(),
            timeout,
            protocol,
            tls,
        })
    }

    /// A fresh HTTP/1.1 connection (http1: TCP; https: TLS too, all within
    /// one timeout).
    pub async fn connect(&self) -> Result<Conn, ClientError> {
        if self.tls.is_none() {
            return Conn::connect(self.addr, &self.host, self.timeout).await;
        }
        let io = self.stream(Instant::now() + self.timeout).await?;
        Ok(Conn::over(io, &self.host, self.timeout))
    }

    /// A fresh HTTP/2 connection (h2: TLS that agreed h2; h2c: TCP), ready
    /// within one timeout.
    pub async fn connect_h2(&self) -> Result<H2Conn, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let io = self.stream(deadline).await?;
        self.handshake_h2(io, deadline).await
    }

    /// [`Endpoint::connect_h2`] with a receive window of `window` bytes
    /// (stream and connection): what a reader of many tiny DATA frames
    /// needs, since h2 closes a connection on which more small frames wait
    /// unread than its DATA-frame budget allows (h2 0.4.16's guard against
    /// a peer that floods small frames).
    pub(crate) async fn connect_h2_window(&self, window: u32) -> Result<H2Conn, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let io = self.stream(deadline).await?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        H2Conn::handshake(
            io,
            format!("{scheme}://{}", self.host),
            deadline,
            self.timeout,
            Some(window),
        )
        .await
    }

    /// The HTTP/2 handshake over `io`, a connection to this endpoint
    /// opened by the caller, by `deadline`.
    pub(crate) async fn handshake_h2(
        &self,
        io: Box<dyn Io>,
        deadline: Instant,
    ) -> Result<H2Conn, ClientError> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        H2Conn::handshake(
            io,
            format!("{scheme}://{}", self.host),
            deadline,
            self.timeout,
            None,
        )
        .await
    }

    /// A fresh connection in the endpoint's protocol.
    pub(crate) async fn open(&self) -> Result<Link, ClientError> {
        if self.protocol.is_http2() {
            Ok(Link::H2(self.connect_h2().await?))
        } else {
            Ok(Link::H1(self.connect().await?))
        }
    }

    /// A TCP connection before `deadline`.
    pub(crate) async fn tcp(&self, deadline: Instant) -> Result<TcpStream, ClientError> {
        let stream = match tokio::time::timeout_at(deadline, TcpStream::connect(self.addr)).await {
            Err(_) => {
                return Err(ClientError::Timeout {
                    after: self.timeout,
                    what: format!("a TCP connection to {}", self.addr),
                })
            }
            Ok(Err(source)) => {
                return Err(ClientError::Connect {
                    addr: self.addr,
                    source,
                })
            }
            Ok(Ok(s)) => s,
        };
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// TCP, then TLS with the handshake done (https and h2 only), and what
    /// the handshake agreed.
    pub(crate) async fn tls_stream(
        &self,
        deadline: Instant,
    ) -> Result<(tokio_rustls::client::TlsStream<TcpStream>, TlsFacts), ClientError> {
        let tls = self
            .tls
            .as_ref()
            .expect("tls_stream is only called for TLS protocols");
        let tcp = self.tcp(deadline).await?;
        let stream = tls
            .handshake(tcp, self.addr, deadline, self.timeout)
            .await?;
        let facts = tls.facts(&stream);
        Ok((stream, facts))
    }

    /// The byte stream requests run over: TCP, or TLS whose ALPN fits the
    /// protocol (h2 exactly `h2`: never a fallback to HTTP/1.1).
    async fn stream(&self, deadline: Instant) -> Result<Box<dyn Io>, ClientError> {
        if self.tls.is_none() {
            return Ok(Box::new(self.tcp(deadline).await?));
        }
        let (stream, _) = self.tls_stream(deadline).await?;
        tls::alpn_fits(self.protocol, stream.get_ref().1.alpn_protocol())
            .map_err(ClientError::Http2)?;
        Ok(Box::new(stream))
    }
}

/// One connection in the endpoint's protocol: the scenario checks send
/// their requests through this, so they run unchanged over every protocol.
pub(crate) enum Link {
    /// HTTP/1.1 over TCP or TLS.
    H1(Conn),
    /// HTTP/2 over TLS or TCP.
    H2(H2Conn),
}

impl Link {
    /// Send one request and read its answer. `close` asks an HTTP/1.1
    /// server to close after answering (`Connection: close`); HTTP/2 has no
    /// such header (RFC 9113 §8.2.2 forbids it), so it is not sent there.
    pub(crate) async fn request(
        &mut self,
        req: &crate::contract::Request,
        close: bool,
    ) -> Result<Response, ClientError> {
        match self {
            Link::H1(conn) => conn.request(req, close).await,
            Link::H2(conn) => conn.request(req).await,
        }
    }

    /// Whether another request may be sent on this connection.
    fn reusable(&self) -> bool {
        match self {
            Link::H1(conn) => !conn.peer_closed(),
            Link::H2(conn) => conn.is_open(),
        }
    }

    /// Bytes that arrived after a complete answer within `grace` (a body
    /// longer than its Content-Length). HTTP/1.1 only: HTTP/2 frames
    /// delimit every body and its client checks a Content-Length against
    /// the DATA itself, so there is nothing to listen for.
    pub(crate) async fn unsolicited_bytes(&mut self, grace: Duration) -> usize {
        match self {
            Link::H1(conn) => conn.unsolicited_bytes(grace).await,
            Link::H2(_) => 0,
        }
    }
}

/// A keep-alive connection that is reopened when the server closed it, for
/// checks that care about answers, not about connection reuse.
pub(crate) struct Session<'a> {
    target: &'a Endpoint,
    conn: Option<Link>,
}

impl<'a> Session<'a> {
    pub(crate) fn new(target: &'a Endpoint) -> Self {
        Session { target, conn: None }
    }

    pub(crate) async fn request(
        &mut self,
        req: &crate::contract::Request,
    ) -> Result<Response, ClientError> {
        let mut conn = match self.conn.take() {
            Some(c) if c.reusable() => c,
            _ => self.target.open().await?,
        };
        let resp = conn.request(req, false).await?;
        if !resp.closes() {
            self.conn = Some(conn);
        }
        Ok(resp)
    }
}

/// Check the server at `base_url` on `scenarios`, spoken to in
/// `options.protocol` (async; call it from a tokio runtime). Inputs are
/// drawn from a seed chosen now, after the server is up, so nothing could
/// have been prepared for them. `Err` only when the URL or the TLS settings
/// are unusable; an unreachable or broken server gives a report full of
/// failures (a failed TLS handshake, or a server that does not speak
/// HTTP/2, fails the `tls` or `http2` check and excludes every scenario
/// untried).
///
/// Bound: at most two timeouts per scenario plus three for the connection
/// checks (four over HTTP/2), each `options.timeout`, plus 100 ms per
/// scenario of listening for bytes beyond a Content-Length (HTTP/1.1 only);
/// plus, before them, one timeout for the `tls` check and one for `http2`.
pub async fn verify_url(
    base_url: &str,
    scenarios: &[Scenario],
    options: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    let target = Endpoint::resolve(
        base_url,
        options.protocol,
        options.tls.as_ref(),
        options.timeout,
    )
    .await?;
    let seed = options.seed.unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut report = VerifyReport {
        framework: options.framework.clone(),
        url: base_url.to_string(),
        seed,
        timeout_ms: u64::try_from(options.timeout.as_millis()).unwrap_or(u64::MAX),
        require_pipelining: options.require_pipelining,
        protocol: options.protocol,
        tls: None,
        checks: Vec::new(),
        scenarios: Vec::new(),
        facts: report::Facts::default(),
        footprint: None,
        declared_limits: None,
        passed: false,
    };
    let mut seen = std::collections::BTreeSet::new();
    let scenarios: Vec<Scenario> = scenarios
        .iter()
        .map(|s| s.verified())
        .filter(|&s| seen.insert(s))
        .collect();
    if !connection_http2::spoken(&target, &mut report).await {
        // Nothing can be asked in a protocol the server does not speak (or
        // over a handshake that fails): every scenario is excluded by the
        // failed check, untried, rather than failing the same way again.
        report.scenarios = scenarios
            .iter()
            .map(|&scenario| report::ScenarioReport {
                scenario,
                checks: Vec::new(),
                wire_bytes: None,
                measurable: false,
                excluded_reason: None,
            })
            .collect();
        report.finish();
        return Ok(report);
    }
    let mut answering = Vec::new();
    let mut correct = Vec::new();
    for &scenario in &scenarios {
        let outcome = scenario::check(&target, scenario, &mut rng).await;
        // The connection checks (keep-alive, pipelining, streams) ask
        // HTTP requests: a WebSocket scenario has its own checks of its
        // connection.
        if outcome.answered && !scenario.is_websocket() {
            answering.push(scenario);
        }
        if outcome.correct && !scenario.is_websocket() {
            correct.push(scenario);
        }
        report.scenarios.push(outcome.report);
    }
    if scenarios.iter().all(|s| s.is_websocket()) {
        // Nothing asked over HTTP: the connection checks are the WebSocket
        // scenarios' own (a connection upgraded, echoing, closed).
    } else if target.protocol.is_http2() {
        connection_http2::check(
            &target,
            &answering,
            &correct,
            scenarios.iter().any(|s| !s.is_grpc()),
            options,
            &mut rng,
            &mut report,
        )
        .await;
    } else {
        connection::check(
            &target,
            &answering,
            &correct,
            options,
            &mut rng,
            &mut report,
        )
        .await;
    }
    report.finish();
    Ok(report)
}

/// Scenarios checked when none are named.
pub fn default_scenarios() -> Vec<Scenario> {
    let mut all = Scenario::FIXED.to_vec();
    all.push(Scenario::Middleware(3));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parses_base_urls_and_rejects_paths_and_other_schemes() {
        let t = Endpoint::from_url("http://127.0.0.1:8080", Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8080");
        let t = Endpoint::from_url("http://localhost:9/", Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(t.addr, "127.0.0.1:9".parse().unwrap());
        for bad in [
            "ftp://127.0.0.1:1",
            "http://127.0.0.1:1/json",
            "127.0.0.1:1",
            "http://",
        ] {
            let err = Endpoint::from_url(bad, Duration::from_secs(1))
                .await
                .unwrap_err();
            assert!(matches!(err, VerifyError::BadUrl { .. }), "{bad}: {err}");
        }
        let err = Endpoint::from_url("https://127.0.0.1:1", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, VerifyError::ProtocolMismatch { .. }), "{err}");
    }

    #[tokio::test]
    async fn each_protocol_needs_its_scheme_and_tls_protocols_need_a_ca() {
        let certs = crate::tls::RunCerts::make(&["localhost".into()]).unwrap();
        let tls = VerifyTls {
            ca_pem: certs.ca_pem.into_bytes(),
            name: "localhost".into(),
        };
        let t = Duration::from_secs(1);
        for (protocol, url) in [
            (Protocol::Http1, "http://127.0.0.1:1"),
            (Protocol::H2c, "http://127.0.0.1:1"),
            (Protocol::Https, "https://127.0.0.1:1"),
            (Protocol::H2, "https://127.0.0.1:1"),
        ] {
            let e = Endpoint::resolve(url, protocol, Some(&tls), t)
                .await
                .unwrap();
            assert_eq!(e.protocol, protocol);
            assert_eq!(e.tls.is_some(), protocol.is_tls());
        }
        for (protocol, url, want) in [
            (
                Protocol::H2,
                "http://127.0.0.1:1",
                "h2 is HTTP/2 over TLS: give an https:// URL",
            ),
            (
                Protocol::Https,
                "http://127.0.0.1:1",
                "https is HTTP/1.1 over TLS",
            ),
            (
                Protocol::H2c,
                "https://127.0.0.1:1",
                "h2c is HTTP/2 with prior knowledge",
            ),
        ] {
            let err = Endpoint::resolve(url, protocol, Some(&tls), t)
                .await
                .unwrap_err();
            assert!(matches!(err, VerifyError::ProtocolMismatch { .. }), "{err}");
            assert!(err.to_string().contains(want), "{err}");
        }
        let err = Endpoint::resolve("https://127.0.0.1:1", Protocol::H2, None, t)
            .await
            .unwrap_err();
        assert!(matches!(err, VerifyError::Tls { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("cannot verify h2: it runs over TLS"),
            "{err}"
        );
    }
}
