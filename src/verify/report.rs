//! The verification report: typed results (serde, for `--json` and for the
//! run pipeline) and the human table.
//!
//! Owns the rule that turns check results into "may be measured": a scenario
//! is excluded when one of its own required checks failed or a required
//! connection-wide check (keep-alive, 404, pipelining when required) failed.
//! Warnings never exclude. It does no I/O except writing the table.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::contract::{Protocol, Scenario};
use crate::export::{json_bytes, Exporter, Rendered};

/// The human table of verification reports (`fairground verify`).
pub struct VerifyTable;

impl Exporter<[VerifyReport]> for VerifyTable {
    fn render(&self, reports: &[VerifyReport]) -> anyhow::Result<Vec<Rendered>> {
        let rows: Vec<(String, &VerifyReport)> = reports
            .iter()
            .map(|r| (r.framework.clone().unwrap_or_else(|| r.url.clone()), r))
            .collect();
        Ok(Rendered::one(
            "verify.txt",
            render_table(&rows).into_bytes(),
        ))
    }
}

/// Verification as JSON (`--json`, docs/verify-report.schema.json): one
/// report as an object, several as an array; newline-terminated.
pub struct VerifyJson;

impl Exporter<VerifyReport> for VerifyJson {
    fn render(&self, report: &VerifyReport) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("verify.json", json_bytes(report)?))
    }
}

impl Exporter<[VerifyReport]> for VerifyJson {
    fn render(&self, reports: &[VerifyReport]) -> anyhow::Result<Vec<Rendered>> {
        Ok(Rendered::one("verify.json", json_bytes(reports)?))
    }
}

pub use crate::preflight::CheckStatus;

/// Names of every check, in table order. Scenario checks first.
pub mod names {
    /// Status code of a sample request (Connection: close).
    pub const STATUS: &str = "status";
    /// Media type of the answer.
    pub const CONTENT_TYPE: &str = "content-type";
    /// Body of the answer (exact text or parsed-JSON equality).
    pub const BODY: &str = "body";
    /// Content-Length or chunked framing consistent with the body.
    pub const FRAMING: &str = "framing";
    /// Several random inputs answered correctly, and differently.
    pub const RANDOM_INPUTS: &str = "random-inputs";
    /// validate: invalid bodies answered 400 or 422.
    pub const INVALID_INPUT: &str = "invalid-input";
    /// middleware-N: every `x-mw-i` header carries the request's `x-test`.
    pub const MW_HEADERS: &str = "mw-headers";
    /// Database scenarios: every row returned holds the stored number.
    pub const DB_VALUES: &str = "db-values";
    /// Database scenarios: `pg_stat_statements` counted a query per row.
    pub const DB_QUERIES: &str = "db-queries";
    /// updates-N: the numbers returned are the numbers stored afterwards.
    pub const DB_PERSIST: &str = "db-persist";
    /// Database scenarios: the executor read (and wrote) at least the rows
    /// the answers stand for, by the tables' own counters.
    pub const DB_ROWS: &str = "db-rows";
    /// Database scenarios: the answers follow a change fairground made to
    /// the table behind the server's back.
    pub const DB_FRESH: &str = "db-fresh";
    /// WebSocket: the upgrade answered 101 with the key's accept, nothing
    /// agreed that was not offered.
    pub const WS_UPGRADE: &str = "ws-upgrade";
    /// WebSocket: random text and binary messages echoed exactly, in order.
    pub const WS_ECHO: &str = "ws-echo";
    /// WebSocket: payloads unmasked before they are echoed.
    pub const WS_UNMASK: &str = "ws-unmask";
    /// WebSocket: a fragmented message (a ping between its frames) echoed
    /// whole.
    pub const WS_FRAGMENTS: &str = "ws-fragments";
    /// WebSocket: a ping answered by a pong with its payload.
    pub const WS_PING: &str = "ws-ping";
    /// WebSocket: a close answered with a close, then the connection closed.
    pub const WS_CLOSE: &str = "ws-close";
    /// gRPC: a call answered 200 `application/grpc`, one message, the
    /// reply expected, `grpc-status: 0` in the trailers.
    pub const GRPC_CALL: &str = "grpc-call";
    /// gRPC: an unknown method of the service answered UNIMPLEMENTED (12).
    pub const GRPC_UNIMPLEMENTED: &str = "grpc-unimplemented";
    /// gRPC: `Sum` of random values answered with their sum (computed,
    /// not a fixed reply).
    pub const GRPC_SUM: &str = "grpc-sum";
    /// gRPC: a stream that cannot finish within its `grpc-timeout` ended
    /// by the server at the deadline (DEADLINE_EXCEEDED, or a reset), not
    /// sent on past it.
    pub const GRPC_DEADLINE: &str = "grpc-deadline";
    /// Scenario checks, in table order.
    pub const SCENARIO: [&str; 22] = [
        STATUS,
        CONTENT_TYPE,
        BODY,
        FRAMING,
        RANDOM_INPUTS,
        INVALID_INPUT,
        MW_HEADERS,
        DB_VALUES,
        DB_QUERIES,
        DB_PERSIST,
        DB_ROWS,
        DB_FRESH,
        WS_UPGRADE,
        WS_ECHO,
        WS_UNMASK,
        WS_FRAGMENTS,
        WS_PING,
        WS_CLOSE,
        GRPC_CALL,
        GRPC_UNIMPLEMENTED,
        GRPC_SUM,
        GRPC_DEADLINE,
    ];

    /// Many requests answered on one connection.
    pub const KEEP_ALIVE: &str = "keep-alive";
    /// Pipelined requests answered in order.
    pub const PIPELINING: &str = "pipelining";
    /// An unknown path answered 404.
    pub const NOT_FOUND: &str = "not-found";
    /// A Date header is sent.
    pub const DATE: &str = "date";
    /// The Server header (recorded).
    pub const SERVER: &str = "server";
    /// Bytes on the wire per plaintext answer (recorded).
    pub const WIRE_BYTES: &str = "wire-bytes";
    /// Connection-wide checks of HTTP/1.1 on TCP, in table order.
    pub const CONNECTION: [&str; 6] = [KEEP_ALIVE, PIPELINING, NOT_FOUND, DATE, SERVER, WIRE_BYTES];

    /// https and h2: the TLS handshake with the CA given (certificate,
    /// version, cipher suite, ALPN agreed).
    pub const TLS: &str = "tls";
    /// h2 and h2c: the server speaks HTTP/2 (ALPN agreed exactly `h2`; the
    /// connection preface answered with SETTINGS).
    pub const HTTP2: &str = "http2";
    /// h2 and h2c: concurrent streams on one connection all answered
    /// correctly (HTTP/2's counterpart of pipelining).
    pub const STREAMS: &str = "streams";
    /// h2 and h2c: the streams of one connection are served concurrently,
    /// timed against the same requests on as many connections.
    pub const H2_CONCURRENCY: &str = "h2-concurrency";
    /// Every connection-wide check of every protocol, in table order (a
    /// table shows those any of its reports has, and always
    /// [`CONNECTION`]).
    pub const CONNECTION_ALL: [&str; 10] = [
        TLS,
        HTTP2,
        KEEP_ALIVE,
        PIPELINING,
        STREAMS,
        H2_CONCURRENCY,
        NOT_FOUND,
        DATE,
        SERVER,
        WIRE_BYTES,
    ];
    /// Orchestrated mode: the server container started and became ready.
    pub const START: &str = "start";
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContractCheck {
    /// ContractCheck name (see [`names`]).
    pub name: String,
    /// Pass, warn or fail.
    pub status: CheckStatus,
    /// Whether a failure excludes (recorded-only checks are not required).
    pub required: bool,
    /// What was seen: the failing detail, or the recorded value.
    pub detail: String,
}

impl ContractCheck {
    /// A required check from a comparison result.
    pub fn required(name: &str, result: Result<String, String>) -> ContractCheck {
        match result {
            Ok(detail) => ContractCheck {
                name: name.into(),
                status: CheckStatus::Pass,
                required: true,
                detail,
            },
            Err(detail) => ContractCheck {
                name: name.into(),
                status: CheckStatus::Fail,
                required: true,
                detail,
            },
        }
    }

    /// A recorded check: a problem is a warning, never a failure.
    pub fn recorded(name: &str, result: Result<String, String>) -> ContractCheck {
        let mut c = ContractCheck::required(name, result);
        c.required = false;
        if c.status == CheckStatus::Fail {
            c.status = CheckStatus::Warn;
        }
        c
    }

    /// Whether this check stops measurement.
    pub fn excludes(&self) -> bool {
        self.required && self.status == CheckStatus::Fail
    }
}

/// The checks of one scenario and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScenarioReport {
    /// The scenario checked.
    pub scenario: Scenario,
    /// Its checks, in the order run.
    pub checks: Vec<ContractCheck>,
    /// Bytes on the wire of one keep-alive answer (head + body), if one came.
    pub wire_bytes: Option<u64>,
    /// Whether the scenario may be measured on this framework.
    pub measurable: bool,
    /// Why not, when it may not.
    pub excluded_reason: Option<String>,
}

/// Values recorded about the server, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Facts {
    /// The Server header, if sent.
    pub server_header: Option<String>,
    /// Whether a Date header was sent (None: no answer to look at).
    pub date_header: Option<bool>,
    /// Bytes on the wire of one keep-alive plaintext answer (head + body).
    pub plaintext_wire_bytes: Option<u64>,
    /// Bytes of the head (status line + headers) of that answer.
    pub plaintext_head_bytes: Option<u64>,
    /// Whether pipelined requests were answered in order (None: not tried).
    pub pipelining: Option<bool>,
    /// Requests answered on one connection before it closed or failed.
    pub keep_alive_answered: u32,
    /// HTTP/2: the server's SETTINGS_MAX_CONCURRENT_STREAMS (None: not
    /// HTTP/2, or not announced, which means no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_streams: Option<u32>,
    /// HTTP/2: whether concurrent streams on one connection were all
    /// answered correctly (`streams`) and served concurrently, as timed
    /// (`h2-concurrency`) (None: not tried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_streams: Option<bool>,
}

/// What the TLS handshake agreed (https and h2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TlsFacts {
    /// `TLS 1.3` or `TLS 1.2`.
    pub version: String,
    /// The cipher suite, e.g. `TLS13_AES_256_GCM_SHA384`.
    pub cipher_suite: String,
    /// The ALPN protocol agreed (None: the server agreed none).
    pub alpn: Option<String>,
    /// The name the certificate was verified for (sent as SNI when it is a
    /// DNS name).
    pub server_name: String,
}

/// What a framework's app costs to write and ship.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Footprint {
    /// Non-blank, non-comment lines of the app (see `verify::footprint`).
    pub lines: super::footprint::LinesOfCode,
    /// Size of the server binary in bytes, where the app is one binary.
    pub binary_bytes: Option<u64>,
}

/// Everything `fairground verify` found about one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyReport {
    /// Framework name, when known (orchestrated mode); None for a bare URL.
    pub framework: Option<String>,
    /// The base URL checked.
    pub url: String,
    /// Seed of the random inputs (drawn after the server was up): rerun with
    /// `--seed` to send the same inputs.
    pub seed: u64,
    /// Per-request timeout, in milliseconds.
    pub timeout_ms: u64,
    /// Whether pipelining was required.
    pub require_pipelining: bool,
    /// The protocol the server was spoken to in (absent in JSON: http1).
    #[serde(default, skip_serializing_if = "Protocol::is_http1")]
    pub protocol: Protocol,
    /// What TLS agreed (https and h2), when a handshake completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsFacts>,
    /// Connection-wide checks (keep-alive, pipelining, 404, headers).
    pub checks: Vec<ContractCheck>,
    /// One entry per scenario asked for.
    pub scenarios: Vec<ScenarioReport>,
    /// Recorded values.
    pub facts: Facts,
    /// Lines of code and binary size of the framework's app, when its
    /// folder (and image) are known: orchestrated mode only.
    #[serde(default)]
    pub footprint: Option<Footprint>,
    /// The connection ceiling the framework declares in its framework.yaml
    /// (`limits:`), shown beside what verify measured: orchestrated mode
    /// only, None when nothing is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_limits: Option<crate::framework::Limits>,
    /// Whether every required check passed.
    pub passed: bool,
}

impl VerifyReport {
    /// Why `scenario` may not be measured, or None when it may. A scenario
    /// that was not verified at all is excluded too.
    pub fn excluded(&self, scenario: Scenario) -> Option<String> {
        match self.scenarios.iter().find(|s| s.scenario == scenario) {
            None => Some(format!("{scenario} was not verified")),
            Some(s) => s.excluded_reason.clone(),
        }
    }

    /// The report of a framework whose server never became ready (or whose
    /// verifier could not run): one failed `start` check with `why`, and
    /// every scenario it declares excluded for that reason.
    pub fn not_started(framework: &str, url: &str, scenarios: &[Scenario], why: String) -> Self {
        let mut r = VerifyReport {
            framework: Some(framework.to_string()),
            url: url.to_string(),
            seed: 0,
            timeout_ms: 0,
            require_pipelining: false,
            protocol: Protocol::Http1,
            tls: None,
            checks: vec![ContractCheck::required(names::START, Err(why))],
            scenarios: scenarios
                .iter()
                .map(|&scenario| ScenarioReport {
                    scenario,
                    checks: Vec::new(),
                    wire_bytes: None,
                    measurable: false,
                    excluded_reason: None,
                })
                .collect(),
            facts: Facts::default(),
            footprint: None,
            declared_limits: None,
            passed: false,
        };
        r.finish();
        r
    }

    /// Compute each scenario's verdict and `passed` from the checks.
    pub fn finish(&mut self) {
        let global = self
            .checks
            .iter()
            .find(|c| c.excludes())
            .map(|c| format!("{} failed: {}", c.name, c.detail));
        for s in &mut self.scenarios {
            let own = s
                .checks
                .iter()
                .find(|c| c.excludes())
                .map(|c| format!("{} failed: {}", c.name, c.detail));
            s.excluded_reason = own.or_else(|| global.clone());
            s.measurable = s.excluded_reason.is_none();
        }
        self.passed = !self.checks.iter().any(ContractCheck::excludes)
            && self.scenarios.iter().all(|s| s.measurable);
    }

    /// A connection-wide check by name.
    pub fn check(&self, name: &str) -> Option<&ContractCheck> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// A scenario's check by name.
    pub fn scenario_check(&self, scenario: Scenario, name: &str) -> Option<&ContractCheck> {
        self.scenarios
            .iter()
            .find(|s| s.scenario == scenario)?
            .checks
            .iter()
            .find(|c| c.name == name)
    }
}

/// JSON Schema of [`VerifyReport`] (the `--json` output); the committed
/// copy is docs/verify-report.schema.json.
pub fn report_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(VerifyReport)).expect("a schema is JSON")
}

/// The `measure` cell of a scenario's row: `yes`, or `NO (streams)`
/// naming the failed checks that exclude it: its own, or the
/// connection-wide ones of its protocol (its own columns may then all read
/// "pass", and a bare NO beside them would not say why).
fn measure_cell(r: &VerifyReport, s: &ScenarioReport) -> String {
    if s.measurable {
        return "yes".into();
    }
    let failed: Vec<&str> = s
        .checks
        .iter()
        .chain(&r.checks)
        .filter(|c| c.excludes())
        .map(|c| c.name.as_str())
        .collect();
    if failed.is_empty() {
        "NO".into()
    } else {
        format!("NO ({})", failed.join(", "))
    }
}

/// The human table: one row per framework × protocol × scenario with its checks, one
/// row per framework with the connection-wide checks, then every warning and
/// failure with its detail. `reports` pairs a display name with a report.
pub fn render_table(reports: &[(String, &VerifyReport)]) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec![
        "framework".to_string(),
        "protocol".to_string(),
        "scenario".to_string(),
    ];
    // The WebSocket checks' columns only when a report has them: a table of
    // HTTP scenarios reads as it always did.
    let scenario_columns: Vec<&str> = names::SCENARIO
        .into_iter()
        .filter(|c| {
            !c.starts_with("ws-")
                || reports.iter().any(|(_, r)| {
                    r.scenarios
                        .iter()
                        .any(|s| s.checks.iter().any(|k| k.name == *c))
                })
        })
        .collect();
    head.extend(scenario_columns.iter().map(|s| s.to_string()));
    head.push("wire B".into());
    head.push("measure".into());
    rows.push(head);
    for (name, r) in reports {
        for s in &r.scenarios {
            let mut row = vec![name.clone(), r.protocol.to_string(), s.scenario.to_string()];
            for &check in &scenario_columns {
                row.push(
                    s.checks
                        .iter()
                        .find(|c| c.name == check)
                        .map_or("-".to_string(), |c| c.status.to_string()),
                );
            }
            row.push(s.wire_bytes.map_or("-".into(), |b| b.to_string()));
            row.push(measure_cell(r, s));
            rows.push(row);
        }
    }
    let mut out = String::new();
    write_aligned(&mut out, &rows);

    // HTTP/1.1 columns always, those of other protocols when a report has
    // them: a table of http1 reports reads as it always did.
    let columns: Vec<&str> = names::CONNECTION_ALL
        .into_iter()
        .filter(|c| {
            names::CONNECTION.contains(c) || reports.iter().any(|(_, r)| r.check(c).is_some())
        })
        .collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec!["framework".to_string(), "protocol".to_string()];
    head.extend(columns.iter().map(|s| s.to_string()));
    rows.push(head);
    for (name, r) in reports {
        let mut row = vec![name.clone(), r.protocol.to_string()];
        for &check in &columns {
            let cell = match (check, r.check(check)) {
                (_, None) => "-".to_string(),
                (names::SERVER, Some(_)) => {
                    r.facts.server_header.clone().unwrap_or("(none)".into())
                }
                (names::WIRE_BYTES, Some(c)) if c.status == CheckStatus::Pass => r
                    .facts
                    .plaintext_wire_bytes
                    .map_or("-".into(), |b| format!("{b} B")),
                (_, Some(c)) => c.status.to_string(),
            };
            row.push(cell);
        }
        rows.push(row);
    }
    out.push('\n');
    write_aligned(&mut out, &rows);

    let mut details = String::new();
    for (name, r) in reports {
        // `axum` for http1, `axum h2` otherwise: which row a line is about.
        let name = if r.protocol.is_http1() {
            name.clone()
        } else {
            format!("{name} {}", r.protocol)
        };
        for c in r.checks.iter().filter(|c| c.status != CheckStatus::Pass) {
            let _ = writeln!(details, "  {name} {}: {} {}", c.name, c.status, c.detail);
        }
        for s in &r.scenarios {
            for c in s.checks.iter().filter(|c| c.status != CheckStatus::Pass) {
                let _ = writeln!(
                    details,
                    "  {name} {} {}: {} {}",
                    s.scenario, c.name, c.status, c.detail
                );
            }
            // Excluded with no failed check of its own in the lines above
            // (a connection-wide failure): say why here.
            if !s.measurable && !s.checks.iter().any(ContractCheck::excludes) {
                let _ = writeln!(
                    details,
                    "  {name} {}: not measured: {}",
                    s.scenario,
                    s.excluded_reason.as_deref().unwrap_or("excluded")
                );
            }
        }
    }
    if !details.is_empty() {
        out.push_str("\nwarnings and failures:\n");
        out.push_str(&details);
    }
    if reports.iter().any(|(_, r)| r.footprint.is_some()) {
        out.push('\n');
    }
    for (name, r) in reports {
        if let Some(fp) = &r.footprint {
            let _ = write!(out, "{name}: app {}", fp.lines);
            if let Some(b) = fp.binary_bytes {
                let _ = write!(out, ", binary {}", crate::units::bytes(b as f64));
            }
            out.push('\n');
        }
    }
    for (name, r) in reports {
        if let Some(l) = &r.declared_limits {
            let _ = writeln!(
                out,
                "{name}: declares at most {} connections ({}); verify measured keep-alive on one \
                 connection ({} answers), a run measures connections served",
                crate::units::thousands(f64::from(l.max_connections)),
                l.why,
                r.facts.keep_alive_answered
            );
        }
    }
    for (name, r) in reports {
        if let Some(line) = protocol_line(r) {
            let _ = writeln!(out, "{name}: {line}");
        }
    }
    out.push('\n');
    for (name, r) in reports {
        let protocol = if r.protocol.is_http1() {
            String::new()
        } else {
            format!("{}, ", r.protocol)
        };
        let _ = writeln!(
            out,
            "{name}: {} ({protocol}seed {}, timeout {} ms)",
            if r.passed {
                "every required check passed"
            } else {
                "FAILED: excluded scenarios are not measured"
            },
            r.seed,
            r.timeout_ms
        );
    }
    out
}

/// What the protocol agreed, for every protocol but http1:
/// `h2 over TLS 1.3 (TLS13_AES_128_GCM_SHA256), ALPN h2, certificate
/// verified for localhost; SETTINGS_MAX_CONCURRENT_STREAMS 200`.
fn protocol_line(r: &VerifyReport) -> Option<String> {
    if r.protocol.is_http1() {
        return None;
    }
    let mut line = match (&r.tls, r.protocol.is_tls()) {
        (Some(t), _) => format!(
            "{} over {} ({}), ALPN {}, certificate verified for {}",
            r.protocol,
            t.version,
            t.cipher_suite,
            t.alpn.as_deref().unwrap_or("none"),
            t.server_name
        ),
        (None, true) => format!("{} (no TLS handshake completed)", r.protocol),
        (None, false) => format!("{} (HTTP/2 with prior knowledge, no TLS)", r.protocol),
    };
    if r.protocol.is_http2() {
        match (r.check(names::HTTP2), r.facts.max_concurrent_streams) {
            (Some(c), Some(n)) if c.status == CheckStatus::Pass => {
                let _ = write!(line, "; SETTINGS_MAX_CONCURRENT_STREAMS {n}");
            }
            (Some(c), None) if c.status == CheckStatus::Pass => {
                line.push_str("; no SETTINGS_MAX_CONCURRENT_STREAMS (no limit)");
            }
            _ => {}
        }
    }
    Some(line)
}

fn write_aligned(out: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let line = row
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> VerifyReport {
        VerifyReport {
            framework: Some("demo".into()),
            url: "http://127.0.0.1:1".into(),
            seed: 1,
            timeout_ms: 500,
            require_pipelining: false,
            protocol: Protocol::Http1,
            tls: None,
            checks: vec![
                ContractCheck::required(names::KEEP_ALIVE, Ok("100 answered".into())),
                ContractCheck::recorded(names::PIPELINING, Err("answered out of order".into())),
            ],
            scenarios: vec![
                ScenarioReport {
                    scenario: Scenario::Plaintext,
                    checks: vec![ContractCheck::required(names::BODY, Ok(String::new()))],
                    wire_bytes: Some(120),
                    measurable: false,
                    excluded_reason: None,
                },
                ScenarioReport {
                    scenario: Scenario::Param,
                    checks: vec![ContractCheck::required(
                        names::RANDOM_INPUTS,
                        Err("hard-coded".into()),
                    )],
                    wire_bytes: None,
                    measurable: true,
                    excluded_reason: None,
                },
            ],
            facts: Facts::default(),
            footprint: None,
            declared_limits: None,
            passed: true,
        }
    }

    #[test]
    fn committed_schema_matches_the_report_type() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/verify-report.schema.json");
        let generated = serde_json::to_string_pretty(&report_schema()).unwrap() + "\n";
        if std::env::var_os("FAIRGROUND_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/verify-report.schema.json is out of date; regenerate it with\n  \
             FAIRGROUND_BLESS=1 cargo test --lib verify::report"
        );
    }

    #[test]
    fn warnings_never_exclude_but_required_failures_do() {
        let mut r = report();
        r.finish();
        assert_eq!(r.excluded(Scenario::Plaintext), None);
        assert_eq!(
            r.excluded(Scenario::Param).as_deref(),
            Some("random-inputs failed: hard-coded")
        );
        assert_eq!(
            r.excluded(Scenario::Json).as_deref(),
            Some("json was not verified")
        );
        assert!(!r.passed);
    }

    #[test]
    fn a_failed_connection_check_excludes_every_scenario() {
        let mut r = report();
        r.checks[0] = ContractCheck::required(names::KEEP_ALIVE, Err("closed after 1".into()));
        r.finish();
        assert_eq!(
            r.excluded(Scenario::Plaintext).as_deref(),
            Some("keep-alive failed: closed after 1")
        );
    }

    #[test]
    fn a_server_that_never_started_excludes_its_scenarios_with_the_reason() {
        let r = VerifyReport::not_started(
            "demo",
            "http://10.0.0.2:8080",
            &[Scenario::Plaintext],
            "not ready within 30s".into(),
        );
        assert!(!r.passed);
        assert_eq!(
            r.excluded(Scenario::Plaintext).as_deref(),
            Some("start failed: not ready within 30s")
        );
        let table = render_table(&[("demo".into(), &r)]);
        assert!(
            table.contains("demo start: FAIL not ready within 30s"),
            "{table}"
        );
    }

    #[test]
    fn table_lists_failures_with_their_detail() {
        let mut r = report();
        r.footprint = Some(Footprint {
            lines: super::super::footprint::LinesOfCode {
                total: 42,
                by_language: [("rust".to_string(), 42)].into(),
                files: 1,
            },
            binary_bytes: Some(3_879_731),
        });
        r.finish();
        let table = render_table(&[("demo".into(), &r)]);
        assert!(
            table.contains("demo: app 42 lines, binary 3.70 MiB"),
            "{table}"
        );
        assert!(table.contains("demo       http1     param"), "{table}");
        assert!(
            table.contains("demo param random-inputs: FAIL hard-coded"),
            "{table}"
        );
        assert!(
            table.contains("demo pipelining: warn answered out of order"),
            "{table}"
        );
        assert!(!table.contains("declares at most"), "{table}");
    }

    #[test]
    fn table_has_a_protocol_column_and_an_h2_row_says_which_check_excluded_it() {
        let http1 = {
            let mut r = report();
            r.finish();
            r
        };
        let mut h2 = report();
        h2.protocol = Protocol::H2c;
        h2.checks = vec![ContractCheck::required(
            names::STREAMS,
            Err("8 streams sent, 1 answered".into()),
        )];
        h2.scenarios.truncate(1);
        h2.finish();
        let table = render_table(&[("demo".into(), &http1), ("demo".into(), &h2)]);
        let row = table
            .lines()
            .find(|l| l.starts_with("demo") && l.contains(" h2c ") && l.contains("plaintext"))
            .unwrap_or_else(|| panic!("no h2c row:\n{table}"));
        // Its own checks pass; the connection-wide one that failed is named.
        assert!(row.contains("pass"), "{row}");
        assert!(row.trim_end().ends_with("NO (streams)"), "{row}");
        assert!(
            table.contains("demo h2c streams: FAIL 8 streams sent, 1 answered"),
            "{table}"
        );
        assert!(
            table.contains("demo h2c plaintext: not measured: "),
            "{table}"
        );
        assert!(
            table.lines().next().unwrap().contains("protocol"),
            "{table}"
        );
    }

    #[test]
    fn table_shows_a_declared_connection_ceiling_beside_what_verify_measured() {
        let mut r = report();
        r.facts.keep_alive_answered = 100;
        r.declared_limits = Some(crate::framework::Limits {
            max_connections: 1024,
            why: "one thread per connection".into(),
        });
        r.finish();
        let table = render_table(&[("demo".into(), &r)]);
        assert!(
            table.contains(
                "demo: declares at most 1,024 connections (one thread per connection); verify \
                 measured keep-alive on one connection (100 answers)"
            ),
            "{table}"
        );
    }
}
