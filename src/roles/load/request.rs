//! Pre-serialized requests: what each connection writes, built once before
//! the run so the hot path only copies bytes.
//!
//! Owns: turning a target (`--url`) plus either a contract scenario or an
//! ad-hoc method/path/headers/body into HTTP/1.1 request bytes, and handing
//! each connection its next request(s) without allocating.
//!
//! Freshness (so a server cannot cache answers): `param` requests get a new
//! random id for *every* request, formatted into the connection's reused
//! write buffer between a pre-serialized prefix and suffix; ids are drawn
//! uniformly from 1..=999,999,999, so a connection repeats an id with
//! negligible probability and no two connections share a sequence. Echo,
//! validate and middleware requests come from a pool of pre-generated
//! requests (random bodies / `x-test` values from `contract::sample_request`);
//! each connection walks the pool from its own random offset. Reusing those
//! bodies is harmless: the server must parse and answer each one anyway.
//!
//! Must not: do I/O or keep statistics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use rand::{Rng, SeedableRng};

use crate::contract::{self, Scenario};

/// Requests in the pool for scenarios with bodies or random headers.
pub const POOL_SIZE: usize = 1024;

/// Where the load goes: an IP address and port, plus the path prefix and
/// Host header taken from `--url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// IP address and port to connect to.
    pub addr: SocketAddr,
    /// The `host:port` as written in the URL, sent as the Host header.
    pub authority: String,
    /// Path (and query) of the URL; for scenarios, a prefix of their paths.
    pub path: String,
    /// `https://`: TLS on every connection.
    pub tls: bool,
}

impl Target {
    /// Parse `http[s]://IP[:PORT][/path]`. Host names are refused: the
    /// loader runs in a scratch container without name resolution.
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => bail!("--url `{url}`: only http:// and https:// URLs are supported"),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let addr = authority
            .parse::<SocketAddr>()
            .or_else(|_| {
                // No port: the scheme's default.
                let host = authority.trim_start_matches('[').trim_end_matches(']');
                host.parse::<std::net::IpAddr>()
                    .map(|ip| SocketAddr::new(ip, if tls { 443 } else { 80 }))
            })
            .map_err(|_| {
                anyhow::anyhow!(
                    "--url `{url}`: the host must be an IP address with an optional port \
                     (e.g. http://172.18.0.2:8080); host names are not resolved"
                )
            })?;
        if authority.is_empty() {
            bail!("--url `{url}` has no host");
        }
        Ok(Self {
            addr,
            authority: authority.to_string(),
            path,
            tls,
        })
    }

    /// `path` (which starts with `/`) under this target's path prefix.
    fn join(&self, path: &str) -> String {
        let base = self.path.trim_end_matches('/');
        format!("{base}{path}")
    }
}

/// An ad-hoc request (`--method`, `--header`, `--body`) sent to `--url` as is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomRequest {
    /// HTTP method, e.g. `GET`.
    pub method: String,
    /// Extra headers, in order.
    pub headers: Vec<(String, String)>,
    /// Request body, if any (sent with Content-Length).
    pub body: Option<Vec<u8>>,
}

/// What to send: a contract scenario or an ad-hoc request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestSpec {
    /// Requests of a contract scenario (`contract::sample_request`).
    Scenario(Scenario),
    /// The same request every time.
    Custom(CustomRequest),
}

impl Default for RequestSpec {
    fn default() -> Self {
        RequestSpec::Custom(CustomRequest {
            method: "GET".into(),
            ..Default::default()
        })
    }
}

fn serialize(
    target: &Target,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    json: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.map_or(0, |b| b.len()));
    out.extend_from_slice(
        format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", target.authority).as_bytes(),
    );
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if let Some(body) = body {
        let has_type = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        if json && !has_type {
            out.extend_from_slice(b"Content-Type: application/json\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
    } else {
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Every request a run may send, shared read-only by all connections.
#[derive(Debug, Clone)]
pub enum RequestSet {
    /// One request, repeated `pipeline` times back to back in `batch`.
    Fixed {
        /// Length of one request in `batch`.
        len: usize,
        /// `pipeline` copies of the request.
        batch: Arc<[u8]>,
        /// The request is HEAD (answers have no body).
        head: bool,
        /// The contract request it is, for checking answers (None: ad hoc).
        request: Option<(Scenario, Arc<contract::Request>)>,
    },
    /// `prefix` + random decimal id + `suffix`.
    Param {
        /// Request line up to the id.
        prefix: Arc<[u8]>,
        /// Rest of the request after the id.
        suffix: Arc<[u8]>,
    },
    /// Pre-generated requests, walked in order from a per-connection offset;
    /// each with the contract request it is.
    Pool(Scenario, Arc<Vec<(Vec<u8>, contract::Request)>>),
    /// A WebSocket scenario: the upgrade's path, then messages of `size`
    /// bytes ([`Messages`]).
    Ws {
        /// Path of the upgrade (`/ws` under the target's prefix).
        path: Arc<str>,
        /// `host:port` for the upgrade's Host header.
        authority: Arc<str>,
        /// Bytes per message.
        size: usize,
        /// Random printable bytes messages are cut from.
        pool: Arc<[u8]>,
        /// `ws-idle`: the messages are pings (their 16-byte stamps), one
        /// per connection per `ws::IDLE_PING_INTERVAL`, answered by pongs.
        idle: bool,
    },
}

impl RequestSet {
    /// Whether its requests are gRPC calls (every answer checked).
    pub fn is_grpc(&self) -> bool {
        matches!(self, RequestSet::Pool(s, _) if s.is_grpc())
    }

    /// Build the requests for `spec` against `target`; `pipeline` is the
    /// batch depth, `seed` makes pools reproducible, `deadline` is what a
    /// gRPC call tells the server it has (`grpc-timeout`: the loader's
    /// request timeout, after which it counts the call a timeout anyway).
    pub fn build(
        target: &Target,
        spec: &RequestSpec,
        pipeline: usize,
        seed: u64,
        deadline: Duration,
    ) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        match spec {
            RequestSpec::Custom(c) => {
                let one = serialize(
                    target,
                    &c.method,
                    &target.path,
                    &c.headers,
                    c.body.as_deref(),
                    false,
                );
                Self::fixed(one, pipeline, c.method.eq_ignore_ascii_case("HEAD"), None)
            }
            RequestSpec::Scenario(Scenario::Param) => {
                let full = serialize(target, "GET", &target.join("/users/"), &[], None, true);
                let split = full.iter().position(|&b| b == b' ').unwrap() + 1;
                let line_end = full[split..].iter().position(|&b| b == b' ').unwrap() + split;
                Self::Param {
                    prefix: full[..line_end].into(),
                    suffix: full[line_end..].into(),
                }
            }
            RequestSpec::Scenario(s @ (Scenario::WsEcho(_) | Scenario::WsIdle)) => {
                let (size, idle) = match s {
                    Scenario::WsEcho(n) => {
                        ((*n).clamp(1, contract::MAX_WS_MESSAGE) as usize, false)
                    }
                    _ => (16, true),
                };
                let pool: Vec<u8> = (0..size + WS_POOL_SLACK)
                    .map(|_| rng.random_range(b' '..=b'~'))
                    .collect();
                Self::Ws {
                    path: target.join(contract::ws::PATH).into(),
                    authority: target.authority.as_str().into(),
                    size,
                    pool: pool.into(),
                    idle,
                }
            }
            RequestSpec::Scenario(s) if !needs_pool(*s) => {
                let (one, request) = sample(target, *s, &mut rng, deadline);
                Self::fixed(one, pipeline, false, Some((*s, Arc::new(request))))
            }
            RequestSpec::Scenario(s) => {
                let pool = (0..POOL_SIZE)
                    .map(|_| sample(target, *s, &mut rng, deadline))
                    .collect();
                Self::Pool(*s, Arc::new(pool))
            }
        }
    }

    fn fixed(
        one: Vec<u8>,
        pipeline: usize,
        head: bool,
        request: Option<(Scenario, Arc<contract::Request>)>,
    ) -> Self {
        let len = one.len();
        let batch: Vec<u8> = one
            .iter()
            .copied()
            .cycle()
            .take(len * pipeline.max(1))
            .collect();
        Self::Fixed {
            len,
            batch: batch.into(),
            head,
            request,
        }
    }

    /// Whether answers to these requests have no body (HEAD).
    pub fn is_head(&self) -> bool {
        matches!(self, Self::Fixed { head: true, .. })
    }
}

fn needs_pool(s: Scenario) -> bool {
    matches!(
        s,
        Scenario::Echo
            | Scenario::Validate
            | Scenario::Middleware(_)
            | Scenario::GrpcUnary
            | Scenario::GrpcStream(_)
    )
}

/// One connection's view of the request set: its random ids, its place in
/// the pool, and its reused write buffer.
pub struct RequestGen {
    set: RequestSet,
    rng: rand::rngs::SmallRng,
    cursor: usize,
    buf: Vec<u8>,
    /// Param: the ids of the last batch, for [`RequestGen::describe`].
    last_ids: Vec<u64>,
    /// Pool: where the last batch started.
    last_cursor: usize,
    /// Requests in the last batch.
    last_n: usize,
}

impl RequestGen {
    /// A generator for one connection; `seed` should differ per connection.
    pub fn new(set: RequestSet, seed: u64) -> Self {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let cursor = match &set {
            RequestSet::Pool(_, p) => rng.random_range(0..p.len()),
            _ => 0,
        };
        // Fixed requests are written straight from the shared batch.
        let buf = match &set {
            RequestSet::Fixed { .. } => Vec::new(),
            _ => Vec::with_capacity(1024),
        };
        Self {
            set,
            rng,
            cursor,
            buf,
            last_ids: Vec::new(),
            last_cursor: 0,
            last_n: 0,
        }
    }

    /// The bytes of the next `n` requests (n ≤ the pipeline depth given to
    /// [`RequestSet::build`]). Allocation-free once the buffer has grown.
    pub fn next(&mut self, n: usize) -> &[u8] {
        self.last_n = n;
        match &self.set {
            RequestSet::Fixed { len, batch, .. } => &batch[..len * n],
            RequestSet::Param { prefix, suffix } => {
                self.buf.clear();
                self.last_ids.clear();
                for _ in 0..n {
                    let id = contract::random_param_id(&mut self.rng);
                    self.last_ids.push(id);
                    self.buf.extend_from_slice(prefix);
                    push_decimal(&mut self.buf, id);
                    self.buf.extend_from_slice(suffix);
                }
                &self.buf
            }
            // The WebSocket driver cuts its messages itself ([`Messages`]).
            RequestSet::Ws { .. } => &[],
            RequestSet::Pool(_, pool) => {
                self.buf.clear();
                self.last_cursor = self.cursor;
                for _ in 0..n {
                    self.buf.extend_from_slice(&pool[self.cursor].0);
                    self.cursor = (self.cursor + 1) % pool.len();
                }
                &self.buf
            }
        }
    }

    /// The bytes [`Self::next`] returned last.
    #[inline]
    pub fn current(&self) -> &[u8] {
        match &self.set {
            RequestSet::Fixed { len, batch, .. } => &batch[..len * self.last_n],
            _ => &self.buf,
        }
    }

    /// The contract request that the `i`-th request of the last batch was,
    /// with its scenario, to check its answer; `None` for ad-hoc requests.
    /// Allocates: call it only for the answers that are checked.
    pub fn describe(&self, i: usize) -> Option<(Scenario, contract::Request)> {
        match &self.set {
            RequestSet::Fixed { request, .. } => request.as_ref().map(|(s, r)| (*s, (**r).clone())),
            RequestSet::Param { .. } => {
                let id = *self.last_ids.get(i)?;
                Some((
                    Scenario::Param,
                    contract::Request {
                        method: "GET",
                        path: contract::param_path(id),
                        headers: Vec::new(),
                        body: None,
                    },
                ))
            }
            RequestSet::Pool(s, pool) => {
                let (_, r) = &pool[(self.last_cursor + i) % pool.len()];
                Some((*s, r.clone()))
            }
            RequestSet::Ws { .. } => None,
        }
    }
}

/// Offsets a message may start at in the pool: messages of one size differ
/// in where they are cut and in their first 16 bytes.
const WS_POOL_SLACK: usize = 4096;

/// One connection's WebSocket messages: message `k` is its 16-byte stamp
/// (`k` and the connection's seed, as hex) followed by the pool cut at an
/// offset drawn from both, truncated to the size. Nothing is stored per
/// message: an echo is compared with its message by recomputing it, so a
/// server that answers a fixed, an earlier or a still masked payload is
/// caught on every message, at the cost of a byte compare.
#[derive(Debug, Clone)]
pub struct Messages {
    pool: Arc<[u8]>,
    size: usize,
    seed: u64,
    idle: bool,
}

impl Messages {
    /// The messages of the connection seeded `seed`; `None` unless `set`
    /// is a WebSocket scenario.
    pub fn of(set: &RequestSet, seed: u64) -> Option<Self> {
        match set {
            RequestSet::Ws {
                pool, size, idle, ..
            } => Some(Self {
                pool: Arc::clone(pool),
                size: *size,
                seed,
                idle: *idle,
            }),
            _ => None,
        }
    }

    /// Bytes per message.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether the messages are `ws-idle`'s pings.
    pub fn idle(&self) -> bool {
        self.idle
    }

    fn stamp(&self, k: u64) -> [u8; 16] {
        // splitmix64 of the message's number and the seed: every nibble
        // varies, so even a 1-byte message is one of 16.
        let mut v = k.wrapping_add(self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        v = (v ^ (v >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        v = (v ^ (v >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        v ^= v >> 31;
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = b"0123456789abcdef"[((v >> (60 - 4 * i)) & 0xF) as usize];
        }
        out
    }

    fn cut(&self, k: u64) -> &[u8] {
        let at = ((k ^ self.seed.rotate_left(17)).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32)
            as usize
            % WS_POOL_SLACK;
        &self.pool[at..at + self.size.saturating_sub(16)]
    }

    /// Appends message `k`'s payload to `out`.
    pub fn write(&self, k: u64, out: &mut Vec<u8>) {
        let stamp = self.stamp(k);
        out.extend_from_slice(&stamp[..self.size.min(16)]);
        out.extend_from_slice(self.cut(k));
    }

    /// Whether `data` is message `k`'s payload from byte `at` on.
    #[inline]
    pub fn matches(&self, k: u64, at: usize, data: &[u8]) -> bool {
        if at + data.len() > self.size {
            return false;
        }
        let head = self.size.min(16);
        let mut data = data;
        let mut at = at;
        if at < head {
            let stamp = self.stamp(k);
            let n = (head - at).min(data.len());
            if data[..n] != stamp[at..at + n] {
                return false;
            }
            data = &data[n..];
            at += n;
        }
        data.is_empty() || data == &self.cut(k)[at - head..at - head + data.len()]
    }
}

fn push_decimal(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// One request of scenario `s` with fresh random inputs, serialized, and
/// the contract request it is; a gRPC call carries `deadline` as its
/// `grpc-timeout`.
fn sample(
    target: &Target,
    s: Scenario,
    rng: &mut impl rand::Rng,
    deadline: Duration,
) -> (Vec<u8>, contract::Request) {
    let mut r = contract::sample_request(s, rng);
    if s.is_grpc() {
        r.headers.push((
            "grpc-timeout".to_string(),
            contract::grpc::timeout_value(deadline),
        ));
    }
    let bytes = serialize(
        target,
        r.method,
        &target.join(&r.path),
        &r.headers,
        r.body.as_deref(),
        true,
    );
    (bytes, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn target() -> Target {
        Target::parse("http://127.0.0.1:8080").unwrap()
    }

    #[test]
    fn websocket_messages_differ_and_are_recognised_piece_by_piece() {
        let target = Target::parse("http://127.0.0.1:8080").unwrap();
        for size in [1usize, 16, 17, 64, 4096] {
            let set = RequestSet::build(
                &target,
                &RequestSpec::Scenario(Scenario::WsEcho(size as u32)),
                1,
                7,
                Duration::from_secs(2),
            );
            let a = Messages::of(&set, 1).unwrap();
            let b = Messages::of(&set, 2).unwrap();
            let (mut m0, mut m1, mut n0) = (Vec::new(), Vec::new(), Vec::new());
            a.write(0, &mut m0);
            a.write(1, &mut m1);
            b.write(0, &mut n0);
            assert_eq!(m0.len(), size);
            assert!(
                m0.iter().all(|c| (b' '..=b'~').contains(c)),
                "printable ASCII: valid UTF-8"
            );
            assert_ne!(m0, m1, "{size}: messages of a connection differ");
            assert_ne!(m0, n0, "{size}: connections differ");
            assert!(a.matches(0, 0, &m0));
            assert!(
                !a.matches(1, 0, &m0),
                "{size}: an earlier message is not the echo"
            );
            let cut = size / 3;
            assert!(a.matches(1, 0, &m1[..cut]) && a.matches(1, cut, &m1[cut..]));
            assert!(
                !a.matches(0, 0, &[m0.clone(), b"x".to_vec()].concat()),
                "too long"
            );
        }
    }

    #[test]
    fn parses_ip_urls_and_refuses_host_names() {
        let t = Target::parse("http://10.0.0.2:9000/api?x=1").unwrap();
        assert_eq!(t.addr, "10.0.0.2:9000".parse().unwrap());
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("10.0.0.2:9000", "/api?x=1")
        );
        assert_eq!(Target::parse("http://[::1]:81").unwrap().addr.port(), 81);
        assert_eq!(Target::parse("http://127.0.0.1").unwrap().addr.port(), 80);
        let err = Target::parse("http://localhost:80")
            .unwrap_err()
            .to_string();
        assert!(err.contains("IP address"), "{err}");
        let tls = Target::parse("https://127.0.0.1").unwrap();
        assert!(tls.tls && tls.addr.port() == 443);
        assert!(!target().tls);
        assert!(Target::parse("ftp://127.0.0.1").is_err());
    }

    #[test]
    fn param_requests_carry_a_fresh_id_each_time() {
        let set = RequestSet::build(
            &target(),
            &RequestSpec::Scenario(Scenario::Param),
            1,
            1,
            SECOND,
        );
        let mut g = RequestGen::new(set, 42);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let r = String::from_utf8(g.next(1).to_vec()).unwrap();
            let id = r
                .strip_prefix("GET /users/")
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string();
            assert!(
                r.ends_with(" HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"),
                "{r}"
            );
            assert!(id.parse::<u64>().unwrap() >= 1);
            seen.insert(id);
        }
        assert!(
            seen.len() >= 999,
            "ids repeat: {} distinct of 1000",
            seen.len()
        );
    }

    #[test]
    fn grpc_calls_carry_the_loaders_timeout_as_their_deadline() {
        for s in [Scenario::GrpcUnary, Scenario::GrpcStream(20)] {
            let set = RequestSet::build(
                &target(),
                &RequestSpec::Scenario(s),
                1,
                1,
                Duration::from_millis(1500),
            );
            assert!(set.is_grpc());
            let mut g = RequestGen::new(set, 1);
            let one = String::from_utf8_lossy(g.next(1)).into_owned();
            assert!(one.contains("grpc-timeout: 1500000u\r\n"), "{s}: {one}");
            assert!(one.contains("te: trailers\r\n"), "{s}: {one}");
            // The contract's request, which answers are checked against,
            // is the one sent.
            let (scenario, req) = g.describe(0).unwrap();
            assert_eq!(scenario, s);
            assert!(req.headers.iter().any(|(k, _)| k == "grpc-timeout"));
        }
        // Not on HTTP requests.
        let set = RequestSet::build(
            &target(),
            &RequestSpec::Scenario(Scenario::Echo),
            1,
            1,
            SECOND,
        );
        let mut g = RequestGen::new(set, 1);
        assert!(!String::from_utf8_lossy(g.next(1)).contains("grpc-timeout"));
    }

    #[test]
    fn fixed_batches_and_pooled_bodies_are_well_formed() {
        let set = RequestSet::build(
            &target(),
            &RequestSpec::Scenario(Scenario::Plaintext),
            4,
            1,
            SECOND,
        );
        let mut g = RequestGen::new(set, 1);
        let three = String::from_utf8(g.next(3).to_vec()).unwrap();
        assert_eq!(three.matches("GET / HTTP/1.1\r\n").count(), 3);

        let set = RequestSet::build(
            &target(),
            &RequestSpec::Scenario(Scenario::Echo),
            1,
            1,
            SECOND,
        );
        let mut g = RequestGen::new(set, 1);
        let one = g.next(1).to_vec();
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let head = match req.parse(&one).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial"),
        };
        let len: usize = req
            .headers
            .iter()
            .find(|h| h.name == "Content-Length")
            .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
            .unwrap();
        assert_eq!(one.len() - head, len);
        serde_json::from_slice::<serde_json::Value>(&one[head..]).unwrap();
    }

    #[test]
    fn decimal_formatting_matches_display() {
        for v in [0u64, 7, 10, 999_999_999, u64::MAX] {
            let mut b = Vec::new();
            push_decimal(&mut b, v);
            assert_eq!(String::from_utf8(b).unwrap(), v.to_string());
        }
    }
}
