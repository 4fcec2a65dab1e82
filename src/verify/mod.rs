//! `fairground verify`: contract checks against a running framework.
//!
//! Owns the judgement "may this framework be measured on this scenario?". It
//! sends requests drawn at random (after the server is up) from `contract`,
//! compares the answers with `contract::expected_response`, and reports
//! pass / warn / fail per check. It must not start containers itself in
//! `--url` mode and must never send traffic anywhere but the given URL.

pub mod answer;
pub mod client;
pub mod connection;
pub mod footprint;
pub mod orchestrate;
pub mod report;
pub mod scenario;

use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::contract::Scenario;

use client::{ClientError, Conn, Response};
pub use report::{CheckStatus, ContractCheck, VerifyJson, VerifyReport, VerifyTable};

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
        }
    }
}

/// The server under test: where to connect and what Host header to send.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Socket address to connect to.
    pub addr: SocketAddr,
    /// Host header value (`host:port` as given in the URL).
    pub host: String,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl Endpoint {
    /// Parse `http://HOST:PORT[/]` and resolve HOST (an IP needs no resolver,
    /// which matters in the FROM-scratch verifier image).
    pub async fn from_url(url: &str, timeout: Duration) -> Result<Endpoint, VerifyError> {
        let bad = |why: &str| VerifyError::BadUrl {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        if uri.scheme_str() != Some("http") {
            return Err(bad(
                "only http:// is supported (the contract is plain HTTP/1.1)",
            ));
        }
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
        })
    }

    /// A fresh connection.
    pub async fn connect(&self) -> Result<Conn, ClientError> {
        Conn::connect(self.addr, &self.host, self.timeout).await
    }
}

/// A keep-alive connection that is reopened when the server closed it, for
/// checks that care about answers, not about connection reuse.
pub(crate) struct Session<'a> {
    target: &'a Endpoint,
    conn: Option<Conn>,
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
            Some(c) if !c.peer_closed() => c,
            _ => self.target.connect().await?,
        };
        let resp = conn.request(req, false).await?;
        if !resp.closes() {
            self.conn = Some(conn);
        }
        Ok(resp)
    }
}

/// Check the server at `base_url` on `scenarios` (async; call it from a tokio
/// runtime). Inputs are drawn from a seed chosen now, after the server is up,
/// so nothing could have been prepared for them. `Err` only when the URL is
/// unusable; an unreachable or broken server gives a report full of failures.
///
/// Bound: at most two timeouts per scenario plus three for the connection
/// checks, each `options.timeout`, plus 100 ms per scenario of listening for
/// bytes beyond a Content-Length.
pub async fn verify_url(
    base_url: &str,
    scenarios: &[Scenario],
    options: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    let target = Endpoint::from_url(base_url, options.timeout).await?;
    let seed = options.seed.unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut report = VerifyReport {
        framework: options.framework.clone(),
        url: base_url.to_string(),
        seed,
        timeout_ms: u64::try_from(options.timeout.as_millis()).unwrap_or(u64::MAX),
        require_pipelining: options.require_pipelining,
        checks: Vec::new(),
        scenarios: Vec::new(),
        facts: report::Facts::default(),
        footprint: None,
        declared_limits: None,
        passed: false,
    };
    let mut answering = Vec::new();
    let mut correct = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for &scenario in scenarios {
        if !seen.insert(scenario) {
            continue;
        }
        let outcome = scenario::check(&target, scenario, &mut rng).await;
        if outcome.answered {
            answering.push(scenario);
        }
        if outcome.correct {
            correct.push(scenario);
        }
        report.scenarios.push(outcome.report);
    }
    connection::check(
        &target,
        &answering,
        &correct,
        options,
        &mut rng,
        &mut report,
    )
    .await;
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
            "https://127.0.0.1:1",
            "http://127.0.0.1:1/json",
            "127.0.0.1:1",
            "http://",
        ] {
            let err = Endpoint::from_url(bad, Duration::from_secs(1))
                .await
                .unwrap_err();
            assert!(matches!(err, VerifyError::BadUrl { .. }), "{bad}: {err}");
        }
    }
}
