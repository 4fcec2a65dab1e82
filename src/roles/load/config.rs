//! [`LoadConfig`]: everything one load run needs, its builder setters and
//! the checks that name the flag to fix.

use std::time::Duration;

use anyhow::bail;

use super::request::{CustomRequest, RequestSpec, Target};
use crate::contract::{Protocol, Scenario};

/// Everything a load run needs. Build with [`LoadConfig::new`] and the
/// chained setters, or fill the fields directly.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Where to send the load (an IP address and port).
    pub target: Target,
    /// The URL as the user wrote it (for the report).
    pub url: String,
    /// What to send.
    pub request: RequestSpec,
    /// Keep-alive connections to hold.
    pub connections: usize,
    /// Worker threads (each with its own runtime); capped at `connections`.
    pub threads: usize,
    /// Measured duration.
    pub duration: Duration,
    /// Load before measuring (not counted).
    pub warmup: Duration,
    /// Fixed rate in requests per second; `None` is closed loop.
    pub rate: Option<f64>,
    /// Requests in flight per connection (closed loop: batch size).
    pub pipeline: usize,
    /// A request unanswered this long after it was sent is a timeout error.
    pub timeout: Duration,
    /// Longest wait for one connect.
    pub connect_timeout: Duration,
    /// Stop after this many measured requests (across all threads).
    pub max_requests: Option<u64>,
    /// Warm up until throughput (closed loop) or mean latency (fixed rate)
    /// of the last three windows of this length varies by no more than
    /// this CV; `warmup` is then the longest the warm-up may take.
    pub until_stable: Option<(Duration, f64)>,
    /// Print one JSON progress line per second on stderr.
    pub progress: bool,
    /// Seed for request pools and ids.
    pub seed: u64,
    /// Wall-clock instant (unix ns) to wait for before connecting: the
    /// start barrier that lets loaders on several hosts share one window.
    pub start_at_unix_ns: Option<u64>,
    /// https: how to speak TLS to the target (required for an https URL).
    pub tls: Option<TlsClient>,
    /// The protocol spoken (TLS ones need `tls`).
    pub protocol: Protocol,
    /// Concurrent streams per HTTP/2 connection (1 for HTTP/1).
    pub streams: usize,
    /// Fault injection for the accounting check's own test: one answered
    /// window request is dropped without being counted anywhere.
    #[cfg(test)]
    pub(crate) drop_one_record: bool,
}

/// How the loader speaks TLS to an https target: a client configuration
/// that trusts the run's CA alone, and the name the server's certificate
/// must carry (the target's IP address unless told otherwise).
#[derive(Debug, Clone)]
pub struct TlsClient {
    /// rustls client configuration (ALPN as [`TlsClient::new`] says).
    pub config: std::sync::Arc<rustls::ClientConfig>,
    /// The name verified against the certificate, and sent as SNI when it
    /// is a DNS name.
    pub name: rustls::pki_types::ServerName<'static>,
}

impl PartialEq for TlsClient {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.config, &other.config) && self.name == other.name
    }
}

impl TlsClient {
    /// A client for `protocol` that trusts the CA in `ca_pem` and checks
    /// the certificate against `name`.
    ///
    /// ALPN: https offers `http/1.1`; h2 offers `h2`, then `http/1.1`, as
    /// HTTP/2 clients do (h2load, browsers), so that a server without h2
    /// agrees `http/1.1` and the loader can say so ("ALPN agreed http/1.1,
    /// not h2") instead of a bare `no_application_protocol` alert. The
    /// loader never speaks what it did not ask for: a connection where h2
    /// was not agreed is a failed handshake (`conn::connect::alpn_refused`).
    pub fn new(
        ca_pem: &[u8],
        name: &str,
        protocol: crate::contract::Protocol,
    ) -> anyhow::Result<TlsClient> {
        let mut config = crate::tls::client_config(ca_pem, protocol)?;
        if protocol == Protocol::H2 {
            let mut c = (*config).clone();
            c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            config = std::sync::Arc::new(c);
        }
        Ok(TlsClient {
            config,
            name: rustls::pki_types::ServerName::try_from(name.to_string())
                .map_err(|_| anyhow::anyhow!("`{name}` is neither a DNS name nor an IP address"))?,
        })
    }
}

/// Most concurrent streams per HTTP/2 connection the loader keeps.
pub const MAX_STREAMS: usize = 256;

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            target: Target::parse("http://127.0.0.1:8080/").expect("constant URL"),
            url: "http://127.0.0.1:8080/".into(),
            request: RequestSpec::default(),
            connections: 100,
            threads: 1,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            rate: None,
            pipeline: 1,
            timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(3),
            max_requests: None,
            until_stable: None,
            progress: false,
            seed: 0x5eed,
            start_at_unix_ns: None,
            tls: None,
            protocol: Protocol::Http1,
            streams: 1,
            #[cfg(test)]
            drop_one_record: false,
        }
    }
}

impl LoadConfig {
    /// Defaults aimed at `url` (`http://IP:PORT[/path]`): the protocol is
    /// https for an `https://` URL, http1 otherwise.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let target = Target::parse(url)?;
        Ok(Self {
            protocol: if target.tls {
                Protocol::Https
            } else {
                Protocol::Http1
            },
            target,
            url: url.to_string(),
            ..Self::default()
        })
    }
    /// The protocol to speak (h2 and https need `tls` and an https URL).
    pub fn protocol(mut self, p: Protocol) -> Self {
        self.protocol = p;
        self
    }
    /// Concurrent streams per HTTP/2 connection.
    pub fn streams(mut self, n: usize) -> Self {
        self.streams = n;
        self
    }
    /// Send requests of a contract scenario.
    pub fn scenario(mut self, s: Scenario) -> Self {
        self.request = RequestSpec::Scenario(s);
        self
    }
    /// Send an ad-hoc request.
    pub fn custom(mut self, c: CustomRequest) -> Self {
        self.request = RequestSpec::Custom(c);
        self
    }
    /// Connections to hold.
    pub fn connections(mut self, n: usize) -> Self {
        self.connections = n;
        self
    }
    /// Worker threads.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }
    /// Measured duration.
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = d;
        self
    }
    /// Warmup before measuring.
    pub fn warmup(mut self, d: Duration) -> Self {
        self.warmup = d;
        self
    }
    /// Fixed rate, req/s.
    pub fn rate(mut self, r: f64) -> Self {
        self.rate = Some(r);
        self
    }
    /// Pipelining depth.
    pub fn pipeline(mut self, d: usize) -> Self {
        self.pipeline = d;
        self
    }
    /// Per-request timeout.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }
    /// Connect timeout.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
    /// Bound on measured requests.
    pub fn max_requests(mut self, n: u64) -> Self {
        self.max_requests = Some(n);
        self
    }

    /// Check the settings make sense; errors name the flag to fix.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.connections == 0 {
            bail!("--connections must be at least 1");
        }
        if self.threads == 0 {
            bail!("--threads must be at least 1");
        }
        if self.duration.is_zero() {
            bail!("--duration must be longer than zero");
        }
        if !(1..=1024).contains(&self.pipeline) {
            bail!("--pipeline must be from 1 to 1024 (got {})", self.pipeline);
        }
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            bail!(
                "--streams must be from 1 to {MAX_STREAMS} (got {})",
                self.streams
            );
        }
        if self.streams > 1 && !self.protocol.is_http2() {
            bail!(
                "--streams {} is for HTTP/2 (--protocol h2 or h2c); {} has one request in flight per connection (see --pipeline)",
                self.streams,
                self.protocol
            );
        }
        if self.pipeline > 1 && self.protocol.is_http2() {
            bail!(
                "--pipeline is HTTP/1.1's; HTTP/2 keeps requests in flight as streams (--streams)"
            );
        }
        if self.protocol.is_tls() != self.target.tls {
            bail!(
                "--protocol {} needs an {} URL; --url {} is not one",
                self.protocol,
                if self.protocol.is_tls() {
                    "https://"
                } else {
                    "http://"
                },
                self.url
            );
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                bail!("--rate must be a positive number of requests per second (got {r})");
            }
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            bail!("--timeout and --connect-timeout must be longer than zero");
        }
        if self.max_requests == Some(0) {
            bail!("--requests must be at least 1");
        }
        if self.target.tls && self.tls.is_none() {
            bail!(
                "--url {}: an https URL needs --tls-ca, the certificate of the CA that signed \
                 the server's (PEM)",
                self.url
            );
        }
        if let Some((window, cv)) = self.until_stable {
            if window.is_zero() || !(cv > 0.0 && cv.is_finite()) {
                bail!("--stable-window must be longer than zero and --stable-cv a positive fraction (got {window:?}, {cv})");
            }
        }
        Ok(())
    }

    pub(super) fn scenario_name(&self) -> Option<String> {
        match &self.request {
            RequestSpec::Scenario(s) => Some(s.to_string()),
            RequestSpec::Custom(_) => None,
        }
    }

    pub(super) fn method(&self) -> String {
        match &self.request {
            RequestSpec::Scenario(s) => s.method().to_string(),
            RequestSpec::Custom(c) => c.method.clone(),
        }
    }
}
