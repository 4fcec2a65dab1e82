//! The endpoint contract: what every framework must answer, in one place.
//!
//! `serve` (the reference server), `load` (what requests to send) and `verify`
//! (what a correct answer looks like) all read this module, so the three can
//! never disagree. docs/contract.md is the prose version of the same table;
//! change both together.
//!
//! This module owns request templates and response expectations. It does no
//! I/O and must not depend on any other fairground module.

pub mod db;
pub mod grpc;
pub mod ws;

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// Body of the plaintext scenario.
pub const PLAINTEXT_BODY: &str = "Hello, World!";
/// Body of the json scenario, byte for byte as the reference server sends it.
/// Frameworks may serialize with other whitespace: verify compares parsed JSON.
pub const JSON_BODY: &str = r#"{"message":"Hello, World!"}"#;
/// The fixed `name` in the param scenario's answer.
pub const PARAM_NAME: &str = "ada";
/// Request header each middleware layer reads.
pub const MW_REQUEST_HEADER: &str = "x-test";
/// Largest middleware chain a profile may ask for. Chains longer than this say
/// more about header handling than about middleware.
pub const MAX_MIDDLEWARE: u16 = 64;
/// Largest decimal id the param scenario draws (ids are `1..=MAX_PARAM_ID`).
pub const MAX_PARAM_ID: u64 = 999_999_999;
/// Largest body the echo scenario sends; frameworks must accept at least this.
pub const MAX_ECHO_BODY: usize = 64 * 1024;

/// Port a framework serves `https` and `h2` on inside its container (TLS;
/// ALPN picks the protocol), set as [`TLS_PORT_ENV`].
pub const TLS_PORT: u16 = 8443;
/// Port a framework serves `h2c` on (HTTP/2 with prior knowledge), set as
/// [`H2C_PORT_ENV`].
pub const H2C_PORT: u16 = 8082;
/// Environment variable holding [`TLS_PORT`].
pub const TLS_PORT_ENV: &str = "FAIRGROUND_TLS_PORT";
/// Environment variable holding [`H2C_PORT`].
pub const H2C_PORT_ENV: &str = "FAIRGROUND_H2C_PORT";
/// Folder, inside a server container, holding the run's certificate chain
/// ([`crate::tls::CHAIN_FILE`]) and key ([`crate::tls::KEY_FILE`]).
pub const TLS_DIR: &str = "/run/fairground/tls";
/// Environment variable holding the path of the certificate chain (PEM:
/// the server's certificate, then the run CA's).
pub const TLS_CERT_ENV: &str = "FAIRGROUND_TLS_CERT";
/// Environment variable holding the path of the private key (PEM, PKCS#8).
pub const TLS_KEY_ENV: &str = "FAIRGROUND_TLS_KEY";

/// A benchmark scenario: one endpoint of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// `GET /` → 200 `text/plain` `Hello, World!`.
    Plaintext,
    /// `GET /json` → 200 `application/json` `{"message":"Hello, World!"}`.
    Json,
    /// `GET /users/{id}` → 200 `application/json` `{"id":"{id}","name":"ada"}`.
    Param,
    /// `POST /echo` with a JSON body → 200 `application/json`, the same JSON value.
    Echo,
    /// `POST /validate` with a small JSON object → 200 with the validated
    /// fields when valid, 400 or 422 when not.
    Validate,
    /// `GET /mw/{N}` through a chain of N middleware layers; layer `i` reads
    /// `x-test` and sets response header `x-mw-{i}` to its value.
    Middleware(u16),
    /// `GET /db` → one random `world` row, `{"id":…,"randomNumber":…}`.
    Db,
    /// `GET /queries?queries=N` → an array of N random `world` rows. In a
    /// manifest, `queries` (N = [`ANY_COUNT`]) declares every N.
    Queries(u16),
    /// `GET /fortunes` → the fortune table and one added row, sorted, as
    /// an HTML page ([`db::fortunes_page`]).
    Fortunes,
    /// `GET /updates?queries=N` → N random `world` rows, each given a new
    /// random number that is written back and returned. In a manifest,
    /// `updates` declares every N.
    Updates(u16),
    /// `GET /ws` upgraded to a WebSocket, then text messages of N bytes
    /// echoed ([`ws`]). In a manifest, `ws-echo` (N = [`ANY_SIZE`])
    /// declares every size.
    WsEcho(u32),
    /// `GET /ws` upgraded, then the connection held idle: one ping every
    /// [`ws::IDLE_PING_INTERVAL`], answered by a pong. Measures what an
    /// idle connection costs (memory per connection). Served by every
    /// framework that declares `ws-echo`.
    WsIdle,
    /// `POST /fairground.bench.Bench/Echo` over HTTP/2: a unary gRPC call
    /// ([`grpc`]) with a random id and payload, answered with the same id
    /// and payload and `grpc-status: 0` in the trailers.
    GrpcUnary,
    /// `POST /fairground.bench.Bench/Stream` over HTTP/2: one request, N
    /// replies streamed back, each with the request's random id and its
    /// index, then `grpc-status: 0`. In a manifest, `grpc-stream` (N =
    /// [`ANY_SIZE`]) declares every N.
    GrpcStream(u32),
}

/// The size of a manifest's `ws-echo`, or the count of its
/// `grpc-stream`: every one.
pub const ANY_SIZE: u32 = 0;
/// Largest WebSocket message a scenario sends (and a server must read).
pub const MAX_WS_MESSAGE: u32 = 64 * 1024;
/// Message size verification measures for a manifest's `ws-echo` (it
/// checks every size from 1 B to [`MAX_WS_MESSAGE`] too).
pub const VERIFY_WS_SIZE: u32 = 64;

/// The count of a manifest's `queries` or `updates`: every N.
pub const ANY_COUNT: u16 = 0;
/// Rows per request verification asks of a `queries` or `updates` family
/// (TechEmpower's most quoted count).
pub const VERIFY_COUNT: u16 = 20;

/// The number a workload's name carries (`middleware-3`, `ws-echo-64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameParam {
    /// None: the name is the workload (`plaintext`).
    None,
    /// `NAME-N`, N from `min` to `max`, N counting `what` (shown in
    /// messages: "layers", "rows", "bytes"). With `family`, `NAME` alone
    /// names every N in a framework manifest.
    Number {
        min: u32,
        max: u32,
        what: &'static str,
        family: bool,
    },
}

/// One workload as its name is written: the registry every list of names
/// is made from (the parse error's "known: …", `Scenario::known_names`,
/// the JSON Schemas' pattern). Adding a workload adds a row here, its
/// variant, its `Display` and `FromStr` arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadName {
    /// The name, or the name before `-N`.
    pub name: &'static str,
    /// What number follows it, if any.
    pub param: NameParam,
}

const fn plain(name: &'static str) -> WorkloadName {
    WorkloadName {
        name,
        param: NameParam::None,
    }
}

const fn numbered(
    name: &'static str,
    min: u32,
    max: u32,
    what: &'static str,
    family: bool,
) -> WorkloadName {
    WorkloadName {
        name,
        param: NameParam::Number {
            min,
            max,
            what,
            family,
        },
    }
}

/// Every workload's name, in the order messages list them.
pub const WORKLOADS: [WorkloadName; 14] = [
    plain("plaintext"),
    plain("json"),
    plain("param"),
    plain("echo"),
    plain("validate"),
    numbered("middleware", 0, MAX_MIDDLEWARE as u32, "layers", false),
    plain("db"),
    numbered("queries", 1, db::MAX_QUERIES as u32, "rows", true),
    plain("fortunes"),
    numbered("updates", 1, db::MAX_QUERIES as u32, "rows", true),
    numbered("ws-echo", 1, MAX_WS_MESSAGE, "bytes", true),
    plain("ws-idle"),
    plain("grpc-unary"),
    numbered("grpc-stream", 1, grpc::MAX_STREAM, "replies", true),
];

impl WorkloadName {
    /// `plaintext`, `middleware-N (N from 0 to 64 layers)`.
    fn described(&self) -> String {
        match self.param {
            NameParam::None => self.name.to_string(),
            NameParam::Number { min, max, what, .. } => {
                format!("{}-N (N from {min} to {max} {what})", self.name)
            }
        }
    }

    /// The regular expression of the names it takes.
    fn pattern(&self) -> String {
        let name = self.name.to_string();
        match self.param {
            NameParam::None => name,
            NameParam::Number { max, family, .. } => {
                let digits = max.max(1).to_string().len();
                let n = format!("-[0-9]{{1,{digits}}}");
                if family {
                    format!("{name}({n})?")
                } else {
                    format!("{name}{n}")
                }
            }
        }
    }
}

/// Every name a profile or manifest may use, for messages.
pub fn known_list() -> String {
    WORKLOADS
        .iter()
        .map(WorkloadName::described)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The JSON Schema pattern of a scenario name, made from [`WORKLOADS`].
pub fn name_pattern() -> String {
    let alts: Vec<String> = WORKLOADS.iter().map(WorkloadName::pattern).collect();
    format!("^({})$", alts.join("|"))
}

impl Scenario {
    /// Every fixed-name scenario (middleware chains are parametrised).
    pub const FIXED: [Scenario; 5] = [
        Scenario::Plaintext,
        Scenario::Json,
        Scenario::Param,
        Scenario::Echo,
        Scenario::Validate,
    ];

    /// The database scenarios as a manifest declares them (every count).
    pub const DATABASE: [Scenario; 4] = [
        Scenario::Db,
        Scenario::Queries(ANY_COUNT),
        Scenario::Fortunes,
        Scenario::Updates(ANY_COUNT),
    ];

    /// The names a profile or manifest may use, for messages and suggestions.
    pub fn known_names() -> Vec<String> {
        WORKLOADS
            .iter()
            .map(|w| match w.param {
                NameParam::None => w.name.to_string(),
                NameParam::Number { .. } => format!("{}-N", w.name),
            })
            .collect()
    }

    /// Whether the scenario reads or writes the database.
    pub fn needs_database(self) -> bool {
        matches!(
            self,
            Scenario::Db | Scenario::Queries(_) | Scenario::Fortunes | Scenario::Updates(_)
        )
    }

    /// Whether a manifest that declares `self` serves `cell`: the same
    /// scenario, or `queries` / `updates` (every count) for any count.
    pub fn covers(self, cell: Scenario) -> bool {
        match (self, cell) {
            (Scenario::Queries(ANY_COUNT), Scenario::Queries(_))
            | (Scenario::Updates(ANY_COUNT), Scenario::Updates(_))
            | (Scenario::WsEcho(ANY_SIZE), Scenario::WsEcho(_) | Scenario::WsIdle)
            | (Scenario::GrpcStream(ANY_SIZE), Scenario::GrpcStream(_)) => true,
            _ => self == cell,
        }
    }

    /// The scenario verification checks for a manifest's declaration: a
    /// family (`queries`, `updates`) at [`VERIFY_COUNT`] rows, anything
    /// else as it is.
    pub fn verified(self) -> Scenario {
        match self {
            Scenario::Queries(ANY_COUNT) => Scenario::Queries(VERIFY_COUNT),
            Scenario::Updates(ANY_COUNT) => Scenario::Updates(VERIFY_COUNT),
            Scenario::WsEcho(ANY_SIZE) => Scenario::WsEcho(VERIFY_WS_SIZE),
            Scenario::GrpcStream(ANY_SIZE) => Scenario::GrpcStream(grpc::VERIFY_STREAM),
            s => s,
        }
    }

    /// Whether this names a whole family (`queries`, `updates`,
    /// `ws-echo` or `grpc-stream` without a number): a manifest may
    /// declare one, a cell cannot be one.
    pub fn is_family(self) -> bool {
        matches!(
            self,
            Scenario::Queries(ANY_COUNT)
                | Scenario::Updates(ANY_COUNT)
                | Scenario::WsEcho(ANY_SIZE)
                | Scenario::GrpcStream(ANY_SIZE)
        )
    }

    /// Whether the scenario speaks WebSocket after an upgrade (its answers
    /// are messages, not HTTP responses).
    pub fn is_websocket(self) -> bool {
        matches!(self, Scenario::WsEcho(_) | Scenario::WsIdle)
    }

    /// Whether the scenario is a gRPC call (HTTP/2 only; its answers are
    /// judged by `grpc-status` and the reply message, not the HTTP status).
    pub fn is_grpc(self) -> bool {
        matches!(self, Scenario::GrpcUnary | Scenario::GrpcStream(_))
    }

    /// Whether protocol `p` can carry the scenario: WebSocket runs over an
    /// HTTP/1.1 upgrade (http1, https), gRPC over HTTP/2 (h2c, h2), every
    /// other scenario over all four. Verification asks a framework only
    /// what its protocols carry; a profile that pairs others is refused.
    pub fn runs_over(self, p: Protocol) -> bool {
        if self.is_websocket() {
            !p.is_http2()
        } else if self.is_grpc() {
            p.is_http2()
        } else {
            true
        }
    }

    /// Whether each connection waits between its requests by design
    /// (`ws-idle` pings once per interval): closed loop, yet what is in
    /// flight is not one request per connection.
    pub fn is_paced(self) -> bool {
        self == Scenario::WsIdle
    }

    /// The unit of the scenario's rate: requests per second over HTTP,
    /// messages per second over WebSocket (an echo of each message sent
    /// is its answer).
    pub fn rate_unit(self) -> &'static str {
        match self {
            Scenario::WsIdle => "pings/s",
            s if s.is_websocket() => "msg/s",
            s if s.is_grpc() => "rpc/s",
            _ => "req/s",
        }
    }

    /// `text`, written in HTTP's words (req/s, requests, 2xx responses), in
    /// the scenario's own: a WebSocket cell's verdict reasons and headings
    /// speak of messages and exact echoes. One place, so that the HTML
    /// report, results.md's notes and JUnit say the same.
    pub fn in_own_words(self, text: &str) -> String {
        // HTTP's words and the workload's, replaced in this order.
        let words: &[(&str, &str)] = if self.is_grpc() {
            &[
                ("non-2xx answers", "answers without grpc-status 0"),
                ("2xx responses", "calls answered OK"),
                ("per 2xx response", "per call answered OK"),
                ("per request", "per call"),
            ]
        } else if self.is_websocket() {
            &[
                ("2xx responses", "exact echoes"),
                ("per 2xx response", "per exact echo"),
                ("per request", "per message"),
            ]
        } else {
            return text.to_string();
        };
        words
            .iter()
            .fold(text.replace("req/s", self.rate_unit()), |t, (http, own)| {
                t.replace(http, own)
            })
    }

    /// World rows one request of the scenario reads (and, for updates,
    /// writes): what `pg_stat_statements` must count at least, per request.
    pub fn rows_per_request(self) -> u16 {
        match self {
            Scenario::Db => 1,
            Scenario::Queries(n) | Scenario::Updates(n) => n,
            _ => 0,
        }
    }

    /// HTTP method of the scenario's request.
    pub fn method(self) -> &'static str {
        match self {
            Scenario::Echo | Scenario::Validate | Scenario::GrpcUnary | Scenario::GrpcStream(_) => {
                "POST"
            }
            _ => "GET",
        }
    }

    /// Whether the request path carries a random `{id}`.
    pub fn has_random_path(self) -> bool {
        matches!(self, Scenario::Param)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scenario::Plaintext => f.write_str("plaintext"),
            Scenario::Json => f.write_str("json"),
            Scenario::Param => f.write_str("param"),
            Scenario::Echo => f.write_str("echo"),
            Scenario::Validate => f.write_str("validate"),
            Scenario::Middleware(n) => write!(f, "middleware-{n}"),
            Scenario::Db => f.write_str("db"),
            Scenario::Queries(ANY_COUNT) => f.write_str("queries"),
            Scenario::Queries(n) => write!(f, "queries-{n}"),
            Scenario::Fortunes => f.write_str("fortunes"),
            Scenario::Updates(ANY_COUNT) => f.write_str("updates"),
            Scenario::Updates(n) => write!(f, "updates-{n}"),
            Scenario::WsEcho(ANY_SIZE) => f.write_str("ws-echo"),
            Scenario::WsEcho(n) => write!(f, "ws-echo-{n}"),
            Scenario::WsIdle => f.write_str("ws-idle"),
            Scenario::GrpcUnary => f.write_str("grpc-unary"),
            Scenario::GrpcStream(ANY_SIZE) => f.write_str("grpc-stream"),
            Scenario::GrpcStream(n) => write!(f, "grpc-stream-{n}"),
        }
    }
}

/// How a server is spoken to: HTTP/1.1 or HTTP/2, over plain TCP or TLS.
/// Names as a profile, a manifest and the command line write them.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1 on plain TCP.
    #[default]
    Http1,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`).
    Https,
    /// HTTP/2 over TLS, agreed by ALPN `h2`.
    H2,
    /// HTTP/2 with prior knowledge on plain TCP.
    H2c,
}

impl Protocol {
    /// Whether this is `http1` (serde's `skip_serializing_if`: records
    /// before protocols existed read back as http1).
    pub fn is_http1(&self) -> bool {
        *self == Protocol::Http1
    }

    /// Every protocol, in the order cells are listed.
    pub const ALL: [Protocol; 4] = [
        Protocol::Http1,
        Protocol::Https,
        Protocol::H2,
        Protocol::H2c,
    ];

    /// Whether it runs over TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Protocol::Https | Protocol::H2)
    }

    /// Whether it is HTTP/2.
    pub fn is_http2(self) -> bool {
        matches!(self, Protocol::H2 | Protocol::H2c)
    }

    /// The ALPN protocol a client asks for over TLS (none on plain TCP).
    pub fn alpn(self) -> Option<&'static [u8]> {
        match self {
            Protocol::Https => Some(b"http/1.1"),
            Protocol::H2 => Some(b"h2"),
            Protocol::Http1 | Protocol::H2c => None,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Http1 => "http1",
            Protocol::Https => "https",
            Protocol::H2 => "h2",
            Protocol::H2c => "h2c",
        })
    }
}

/// Why a scenario name was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioParseError {
    #[error("unknown scenario `{0}`; known: {known}", known = known_list())]
    Unknown(String),
    #[error("`{0}`: the message size must be a whole number of bytes from 1 to {MAX_WS_MESSAGE} (`ws-echo` alone, in a framework manifest, declares every size)")]
    BadSize(String),
    #[error("`{0}`: the number of rows must be a whole number from 1 to {max} (`queries` and `updates` alone, in a framework manifest, declare every number)", max = db::MAX_QUERIES)]
    BadCount(String),
    #[error("`{0}`: the number of replies must be a whole number from 1 to {max} (`grpc-stream` alone, in a framework manifest, declares every number)", max = grpc::MAX_STREAM)]
    BadReplies(String),
    #[error(
        "`{0}`: the middleware chain length must be a whole number from 0 to {MAX_MIDDLEWARE}"
    )]
    BadMiddleware(String),
}

impl FromStr for Scenario {
    type Err = ScenarioParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "plaintext" => Ok(Scenario::Plaintext),
            "json" => Ok(Scenario::Json),
            "param" => Ok(Scenario::Param),
            "echo" => Ok(Scenario::Echo),
            "validate" => Ok(Scenario::Validate),
            "db" => Ok(Scenario::Db),
            "fortunes" => Ok(Scenario::Fortunes),
            "queries" => Ok(Scenario::Queries(ANY_COUNT)),
            "updates" => Ok(Scenario::Updates(ANY_COUNT)),
            "ws-echo" => Ok(Scenario::WsEcho(ANY_SIZE)),
            "ws-idle" => Ok(Scenario::WsIdle),
            "grpc-unary" => Ok(Scenario::GrpcUnary),
            "grpc-stream" => Ok(Scenario::GrpcStream(ANY_SIZE)),
            _ if s.starts_with("grpc-stream-") => match s["grpc-stream-".len()..].parse::<u32>() {
                Ok(n) if (1..=grpc::MAX_STREAM).contains(&n) => Ok(Scenario::GrpcStream(n)),
                _ => Err(ScenarioParseError::BadReplies(s.to_string())),
            },
            _ if s.starts_with("ws-echo-") => match s["ws-echo-".len()..].parse::<u32>() {
                Ok(n) if (1..=MAX_WS_MESSAGE).contains(&n) => Ok(Scenario::WsEcho(n)),
                _ => Err(ScenarioParseError::BadSize(s.to_string())),
            },
            _ if s.starts_with("queries-") || s.starts_with("updates-") => {
                let (family, n) = s.split_once('-').expect("checked above");
                match n.parse::<u16>() {
                    Ok(n) if (1..=db::MAX_QUERIES).contains(&n) => Ok(if family == "queries" {
                        Scenario::Queries(n)
                    } else {
                        Scenario::Updates(n)
                    }),
                    _ => Err(ScenarioParseError::BadCount(s.to_string())),
                }
            }
            _ => match s.strip_prefix("middleware-") {
                Some(n) => match n.parse::<u16>() {
                    Ok(n) if n <= MAX_MIDDLEWARE => Ok(Scenario::Middleware(n)),
                    _ => Err(ScenarioParseError::BadMiddleware(s.to_string())),
                },
                None => Err(ScenarioParseError::Unknown(s.to_string())),
            },
        }
    }
}

impl Serialize for Scenario {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Scenario {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Scenario {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Scenario".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let description = format!(
            "A contract scenario: {}",
            Scenario::known_names().join(", ")
        );
        schemars::json_schema!({
            "type": "string",
            "description": description,
            "pattern": name_pattern()
        })
    }
}

/// One concrete request of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: &'static str,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Extra headers beyond Host, Content-Length and Content-Type.
    pub headers: Vec<(String, String)>,
    /// `Some` for requests with a JSON body.
    pub body: Option<Vec<u8>>,
}

/// The path of the param scenario for `id`.
pub fn param_path(id: u64) -> String {
    format!("/users/{id}")
}

/// The param scenario's expected answer for `id`.
pub fn param_response(id: &str) -> serde_json::Value {
    serde_json::json!({ "id": id, "name": PARAM_NAME })
}

/// Path of a middleware chain of `n` layers.
pub fn middleware_path(n: u16) -> String {
    format!("/mw/{n}")
}

/// Response header set by middleware layer `i` (1-based, outermost first).
pub fn middleware_header(i: u16) -> String {
    format!("x-mw-{i}")
}

/// Fields a validate request must carry. The rules are small on purpose: the
/// scenario measures parsing plus a handful of checks, not a schema engine.
///
/// - `name`: string, 1 to 64 characters;
/// - `age`: integer, 0 to 150;
/// - `email`: string, 3 to 254 characters, with an `@` that is neither first
///   nor last.
///
/// A valid request is answered with 200 and exactly these three fields (extra
/// fields dropped); an invalid one with 400 or 422.
pub fn validate(value: &serde_json::Value) -> Result<serde_json::Value, String> {
    let obj = value.as_object().ok_or("body must be a JSON object")?;
    let name = obj
        .get("name")
        .and_then(|v| v.as_str())
        .ok_or("`name` must be a string")?;
    let name_len = name.chars().count();
    if !(1..=64).contains(&name_len) {
        return Err("`name` must have 1 to 64 characters".into());
    }
    let age = obj
        .get("age")
        .and_then(|v| v.as_i64())
        .ok_or("`age` must be an integer")?;
    if !(0..=150).contains(&age) {
        return Err("`age` must be from 0 to 150".into());
    }
    let email = obj
        .get("email")
        .and_then(|v| v.as_str())
        .ok_or("`email` must be a string")?;
    let at = email.find('@');
    if !(3..=254).contains(&email.len()) || matches!(at, None | Some(0)) || email.ends_with('@') {
        return Err("`email` must look like user@host".into());
    }
    Ok(serde_json::json!({ "name": name, "age": age, "email": email }))
}

/// A random valid validate body.
pub fn random_valid_validate_body(rng: &mut impl Rng) -> serde_json::Value {
    let name = random_word(rng, 3, 12);
    serde_json::json!({
        "name": name,
        "age": rng.random_range(0..=150),
        "email": format!("{}@{}.example", random_word(rng, 3, 10), random_word(rng, 3, 8)),
    })
}

/// A random invalid validate body, and which rule it breaks.
pub fn random_invalid_validate_body(rng: &mut impl Rng) -> (serde_json::Value, &'static str) {
    let mut v = random_valid_validate_body(rng);
    match rng.random_range(0..4) {
        0 => {
            v["age"] = serde_json::json!(rng.random_range(151..10_000));
            (v, "age out of range")
        }
        1 => {
            v["email"] = serde_json::json!(random_word(rng, 5, 10));
            (v, "email without @")
        }
        2 => {
            v.as_object_mut().unwrap().remove("name");
            (v, "missing name")
        }
        _ => {
            v["age"] = serde_json::json!("forty");
            (v, "age is not an integer")
        }
    }
}

/// A random JSON document for the echo scenario: nested objects and arrays,
/// unicode strings, numbers, booleans and null, roughly `target_len` bytes.
pub fn random_echo_body(rng: &mut impl Rng, target_len: usize) -> serde_json::Value {
    let mut items = Vec::new();
    let mut len = 2;
    let mut i = 0u32;
    const UNICODE: [&str; 4] = ["héllo wörld", "日本語", "emoji 🚀", "ελληνικά"];
    while len < target_len {
        let uni = UNICODE[rng.random_range(0..UNICODE.len())];
        let entry = serde_json::json!({
            "seq": i,
            "word": random_word(rng, 2, 16),
            "uni": uni,
            "n": rng.random_range(-1_000_000i64..1_000_000),
            "f": (rng.random_range(0..1_000_000) as f64) / 1000.0,
            "ok": rng.random_bool(0.5),
            "none": null,
            "nested": { "a": [1, 2, { "b": random_word(rng, 1, 6) }] },
        });
        len += entry.to_string().len() + 1;
        items.push(entry);
        i += 1;
    }
    serde_json::json!({ "items": items, "count": i })
}

fn random_word(rng: &mut impl Rng, min: usize, max: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// A random param id, as the loader and the verifier draw it.
pub fn random_param_id(rng: &mut impl Rng) -> u64 {
    rng.random_range(1..=MAX_PARAM_ID)
}

/// A fresh request for `scenario`: random id, random body, random `x-test`.
/// The loader pre-generates pools of these; the verifier draws them one by one.
pub fn sample_request(scenario: Scenario, rng: &mut impl Rng) -> Request {
    match scenario {
        Scenario::Plaintext => get("/"),
        Scenario::Json => get("/json"),
        Scenario::Param => get(&param_path(random_param_id(rng))),
        Scenario::Echo => {
            let len = rng.random_range(16..512);
            post("/echo", random_echo_body(rng, len))
        }
        Scenario::Validate => post("/validate", random_valid_validate_body(rng)),
        Scenario::Middleware(n) => Request {
            method: "GET",
            path: middleware_path(n),
            headers: vec![(MW_REQUEST_HEADER.to_string(), random_word(rng, 8, 16))],
            body: None,
        },
        Scenario::Db => get(db::DB_PATH),
        Scenario::Queries(n) => get(&db::queries_path(db::QUERIES_PATH, n)),
        Scenario::Fortunes => get(db::FORTUNES_PATH),
        Scenario::Updates(n) => get(&db::queries_path(db::UPDATES_PATH, n)),
        // The upgrade; its messages are `ws::` (the loader's `Messages`).
        Scenario::WsEcho(_) | Scenario::WsIdle => get(ws::PATH),
        Scenario::GrpcUnary => Request {
            method: "POST",
            path: grpc::ECHO_PATH.to_string(),
            headers: grpc_headers(),
            body: Some(grpc::frame(&grpc::random_echo(rng))),
        },
        Scenario::GrpcStream(n) => Request {
            method: "POST",
            path: grpc::STREAM_PATH.to_string(),
            headers: grpc_headers(),
            body: Some(grpc::frame(&grpc::StreamRequest {
                id: rng.random(),
                count: n,
            })),
        },
    }
}

/// The headers of every gRPC call (beside its deadline, which the caller
/// adds: [`grpc::timeout_value`]).
fn grpc_headers() -> Vec<(String, String)> {
    vec![
        ("content-type".to_string(), grpc::CONTENT_TYPE.to_string()),
        ("te".to_string(), "trailers".to_string()),
    ]
}

fn get(path: &str) -> Request {
    Request {
        method: "GET",
        path: path.to_string(),
        headers: Vec::new(),
        body: None,
    }
}

fn post(path: &str, body: serde_json::Value) -> Request {
    Request {
        method: "POST",
        path: path.to_string(),
        headers: Vec::new(),
        body: Some(serde_json::to_vec(&body).expect("JSON values always serialize")),
    }
}

/// The media type a scenario's successful answer must carry (parameters such
/// as `charset` are allowed after it).
pub fn expected_content_type(scenario: Scenario) -> &'static str {
    match scenario {
        Scenario::Plaintext | Scenario::Middleware(_) => "text/plain",
        Scenario::Fortunes => "text/html",
        Scenario::GrpcUnary | Scenario::GrpcStream(_) => grpc::CONTENT_TYPE,
        _ => "application/json",
    }
}

/// What a correct answer to `request` (a request of `scenario`) is.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpectedBody {
    /// These exact bytes.
    Exact(&'static str),
    /// Any JSON text that parses to this value.
    Json(serde_json::Value),
    /// `world` rows as JSON, ids and numbers in range: one object
    /// (`None`) or an array of exactly this many. Whether the numbers are
    /// the stored ones only the database can say (verify reads it).
    World(Option<u16>),
    /// The fortunes page ([`db::check_fortunes`]).
    Fortunes,
    /// A 101 Switching Protocols: a WebSocket upgrade, whose messages the
    /// WebSocket checks judge (`verify::websocket`, the loader's driver).
    Upgrade,
    /// One gRPC `EchoReply` with this id and payload ([`grpc::check_echo`]);
    /// its `grpc-status` is the trailers', judged beside the body.
    GrpcEcho(grpc::Echo),
    /// gRPC `StreamReply`s to this request: `count` of them, in order,
    /// each with its id and index ([`grpc::check_stream`]).
    GrpcStream(grpc::StreamRequest),
}

/// The expected status and body of a correct answer to a valid `request`.
pub fn expected_response(scenario: Scenario, request: &Request) -> (u16, ExpectedBody) {
    match scenario {
        Scenario::Plaintext | Scenario::Middleware(_) => (200, ExpectedBody::Exact(PLAINTEXT_BODY)),
        Scenario::Json => (
            200,
            ExpectedBody::Json(serde_json::from_str(JSON_BODY).expect("constant is JSON")),
        ),
        Scenario::Param => {
            let id = request.path.trim_start_matches("/users/");
            (200, ExpectedBody::Json(param_response(id)))
        }
        Scenario::Echo => {
            let body = request.body.as_deref().unwrap_or(b"null");
            (
                200,
                ExpectedBody::Json(serde_json::from_slice(body).unwrap_or(serde_json::Value::Null)),
            )
        }
        Scenario::Validate => {
            let body: serde_json::Value = request
                .body
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(serde_json::Value::Null);
            match validate(&body) {
                Ok(v) => (200, ExpectedBody::Json(v)),
                // 400 and 422 are both correct; verify accepts either.
                Err(_) => (400, ExpectedBody::Json(serde_json::Value::Null)),
            }
        }
        Scenario::Db => (200, ExpectedBody::World(None)),
        Scenario::Queries(_) | Scenario::Updates(_) => (
            200,
            ExpectedBody::World(Some(db::count_in_path(&request.path))),
        ),
        Scenario::Fortunes => (200, ExpectedBody::Fortunes),
        Scenario::WsEcho(_) | Scenario::WsIdle => (101, ExpectedBody::Upgrade),
        Scenario::GrpcUnary => {
            // The request's own message, read back from its frame.
            let sent = request
                .body
                .as_deref()
                .and_then(|b| grpc::messages(b).ok())
                .and_then(|m| m.first().copied())
                .and_then(|m| <grpc::Echo as prost::Message>::decode(m).ok())
                .unwrap_or_default();
            (200, ExpectedBody::GrpcEcho(sent))
        }
        Scenario::GrpcStream(_) => {
            let sent = request
                .body
                .as_deref()
                .and_then(|b| grpc::messages(b).ok())
                .and_then(|m| m.first().copied())
                .and_then(|m| <grpc::StreamRequest as prost::Message>::decode(m).ok())
                .unwrap_or_default();
            (200, ExpectedBody::GrpcStream(sent))
        }
    }
}

/// Whether `body` is what `expected` says: exact bytes, or a JSON text
/// that parses to the expected value (whitespace and key order free). The
/// error says what came and what was expected.
pub fn check_body(body: &[u8], expected: &ExpectedBody) -> Result<(), String> {
    match expected {
        ExpectedBody::Exact(text) if body == text.as_bytes() => Ok(()),
        ExpectedBody::Exact(text) => Err(format!(
            "body {}, expected exactly {}",
            quote_bytes(body),
            quote_bytes(text.as_bytes())
        )),
        ExpectedBody::Json(want) => {
            let got: serde_json::Value = serde_json::from_slice(body)
                .map_err(|e| format!("body is not JSON ({e}): {}", quote_bytes(body)))?;
            if json_equal(&got, want) {
                Ok(())
            } else {
                Err(format!(
                    "body {}, expected JSON equal to {}",
                    quote_bytes(got.to_string().as_bytes()),
                    quote_bytes(want.to_string().as_bytes())
                ))
            }
        }
        ExpectedBody::World(count) => db::check_world(body, *count).map(|_| ()),
        ExpectedBody::Upgrade => Ok(()),
        ExpectedBody::GrpcEcho(sent) => grpc::check_echo(body, sent),
        ExpectedBody::GrpcStream(sent) => grpc::check_stream(body, sent),
        ExpectedBody::Fortunes => {
            let page =
                std::str::from_utf8(body).map_err(|_| "the page is not UTF-8".to_string())?;
            db::check_fortunes(page)
        }
    }
}

/// Check a successful (2xx) answer to `request` (a request of `scenario`):
/// the status and body a correct framework gives.
pub fn check_answer(
    scenario: Scenario,
    request: &Request,
    status: u16,
    body: &[u8],
) -> Result<(), String> {
    let (want_status, want_body) = expected_response(scenario, request);
    if status != want_status {
        return Err(format!(
            "{} {}: status {status}, expected {want_status}",
            request.method, request.path
        ));
    }
    check_body(body, &want_body).map_err(|e| format!("{} {}: {e}", request.method, request.path))
}

/// JSON equality as JSON defines it: one number type, so `825.0` and `825`
/// are the same value (JavaScript's JSON.stringify writes the first as the
/// second); integers that both sides write as integers compare exactly.
pub fn json_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => match (x.as_i128(), y.as_i128()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Longest excerpt of a body quoted in a message.
const QUOTE: usize = 120;

/// `text` quoted for a message: at most [`QUOTE`] characters, control
/// characters escaped so a quoted body stays on one line.
pub fn quote(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().take(QUOTE) {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    if text.chars().count() > QUOTE {
        out.push('…');
    }
    format!("`{out}`")
}

fn quote_bytes(b: &[u8]) -> String {
    quote(&String::from_utf8_lossy(b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_registered_name_parses_and_the_pattern_takes_exactly_what_parses() {
        use super::*;
        let re_ok = |name: &str| {
            // The pattern's alternatives, checked without a regex engine:
            // each registered name, bare or with digits.
            WORKLOADS.iter().any(|w| match w.param {
                NameParam::None => name == w.name,
                NameParam::Number { family, .. } => {
                    (family && name == w.name)
                        || name
                            .strip_prefix(w.name)
                            .and_then(|r| r.strip_prefix('-'))
                            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
                }
            })
        };
        for w in WORKLOADS {
            let names = match w.param {
                NameParam::None => vec![w.name.to_string()],
                NameParam::Number {
                    min, max, family, ..
                } => {
                    let mut v = vec![format!("{}-{min}", w.name), format!("{}-{max}", w.name)];
                    if family {
                        v.push(w.name.to_string());
                    }
                    v
                }
            };
            for n in names {
                let s: Scenario = n.parse().unwrap_or_else(|e| panic!("{n}: {e}"));
                assert_eq!(s.to_string(), n, "Display round-trips {n}");
                assert!(re_ok(&n), "{n}");
            }
        }
        assert_eq!(Scenario::known_names().len(), WORKLOADS.len());
        assert!(
            name_pattern().contains("ws-echo(-[0-9]{1,5})?"),
            "{}",
            name_pattern()
        );
        let e = "nope".parse::<Scenario>().unwrap_err().to_string();
        assert!(
            e.contains("middleware-N (N from 0 to 64 layers)") && e.contains("ws-idle"),
            "{e}"
        );
    }

    use super::*;
    use rand::SeedableRng;

    #[test]
    fn scenario_names_round_trip() {
        for name in [
            "plaintext",
            "json",
            "param",
            "echo",
            "validate",
            "middleware-0",
            "middleware-10",
            "db",
            "queries",
            "queries-20",
            "fortunes",
            "updates",
            "updates-500",
        ] {
            let s: Scenario = name.parse().unwrap();
            assert_eq!(s.to_string(), name);
        }
    }

    #[test]
    fn rejects_unknown_and_oversized_middleware() {
        assert!(matches!(
            "plain".parse::<Scenario>(),
            Err(ScenarioParseError::Unknown(_))
        ));
        assert!(matches!(
            "middleware-65".parse::<Scenario>(),
            Err(ScenarioParseError::BadMiddleware(_))
        ));
        assert!(matches!(
            "middleware-x".parse::<Scenario>(),
            Err(ScenarioParseError::BadMiddleware(_))
        ));
    }

    #[test]
    fn database_scenarios_parse_with_counts_and_families_cover_them() {
        assert_eq!("queries-1".parse(), Ok(Scenario::Queries(1)));
        assert_eq!("updates".parse(), Ok(Scenario::Updates(ANY_COUNT)));
        for bad in ["queries-0", "queries-501", "updates-x", "queries-"] {
            assert!(
                matches!(
                    bad.parse::<Scenario>(),
                    Err(ScenarioParseError::BadCount(_))
                ),
                "{bad}"
            );
        }
        assert!(Scenario::Queries(ANY_COUNT).covers(Scenario::Queries(20)));
        assert!(!Scenario::Queries(ANY_COUNT).covers(Scenario::Updates(20)));
        assert!(!Scenario::Queries(5).covers(Scenario::Queries(20)));
        assert!(Scenario::Db.covers(Scenario::Db));
        assert!(Scenario::Updates(20).needs_database() && !Scenario::Json.needs_database());
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        assert_eq!(
            sample_request(Scenario::Queries(20), &mut rng).path,
            "/queries?queries=20"
        );
        assert_eq!(
            sample_request(Scenario::Updates(3), &mut rng).path,
            "/updates?queries=3"
        );
    }

    #[test]
    fn validate_accepts_valid_and_rejects_each_broken_rule() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..100 {
            let v = random_valid_validate_body(&mut rng);
            assert!(validate(&v).is_ok(), "{v}");
            let (bad, why) = random_invalid_validate_body(&mut rng);
            assert!(validate(&bad).is_err(), "{why}: {bad}");
        }
    }

    #[test]
    fn echo_bodies_reach_their_target_size() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let body = random_echo_body(&mut rng, 8 * 1024).to_string();
        assert!(body.len() >= 8 * 1024, "{}", body.len());
        assert!(body.len() < MAX_ECHO_BODY);
    }

    #[test]
    fn param_requests_draw_fresh_ids() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let a = sample_request(Scenario::Param, &mut rng);
        let b = sample_request(Scenario::Param, &mut rng);
        assert_ne!(a.path, b.path);
        let (status, body) = expected_response(Scenario::Param, &a);
        assert_eq!(status, 200);
        let id = a.path.trim_start_matches("/users/");
        assert_eq!(
            body,
            ExpectedBody::Json(serde_json::json!({"id": id, "name": "ada"}))
        );
    }
}
