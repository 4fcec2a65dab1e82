//! Connection-wide checks: keep-alive (many answers on one connection),
//! HTTP/1.1 pipelining (answers in order), 404 for an unknown path, and the
//! recorded headers (Date, Server) and wire bytes per plaintext answer.
//! These are HTTP/1.1's, over TCP (http1) or TLS (https); HTTP/2 has its own
//! in `connection_http2`, which shares the 404 and header checks from here.
//!
//! These use only scenarios whose sample request was answered, so one broken
//! endpoint does not also show up as a keep-alive failure.

use rand::rngs::StdRng;

use crate::contract::{self, Request, Scenario};

use super::client::{self, ClientError, Response};
use super::report::{names, ContractCheck, VerifyReport};
use super::{scenario, Endpoint, VerifyOptions};

/// Run the connection checks and record their facts in `report`.
pub(crate) async fn check(
    target: &Endpoint,
    answering: &[Scenario],
    correct: &[Scenario],
    options: &VerifyOptions,
    rng: &mut StdRng,
    report: &mut VerifyReport,
) {
    let first =
        keep_alive::<client::Conn>(target, answering, options.keep_alive_requests, rng, report)
            .await;
    // Without a correctly answered scenario a pipelining verdict would mean
    // nothing; every scenario is excluded already.
    if report.facts.keep_alive_answered > 0 && !correct.is_empty() {
        let check = pipelining(target, correct, options.pipeline_depth, rng).await;
        report.facts.pipelining = Some(check.is_ok());
        report.checks.push(if options.require_pipelining {
            ContractCheck::required(names::PIPELINING, check)
        } else {
            ContractCheck::recorded(
                names::PIPELINING,
                check.map_err(|e| {
                    format!(
                        "not supported ({e}); recorded, required only with --require-pipelining"
                    )
                }),
            )
        });
    }
    report.checks.push(ContractCheck::required(
        names::NOT_FOUND,
        not_found(target, rng).await,
    ));
    if let Some(resp) = first {
        header_facts(&resp, report);
    }
    if let (Some(wire), Some(head)) = (
        report.facts.plaintext_wire_bytes,
        report.facts.plaintext_head_bytes,
    ) {
        report.checks.push(ContractCheck::recorded(
            names::WIRE_BYTES,
            Ok(format!(
                "{wire} B per plaintext answer ({head} B status line and headers + {} B body)",
                wire - head
            )),
        ));
    }
}

/// The recorded header checks (Date, Server) of the first keep-alive answer.
pub(crate) fn header_facts(resp: &Response, report: &mut VerifyReport) {
    let date = resp.header("date").map(str::to_string);
    report.facts.date_header = Some(date.is_some());
    report.checks.push(ContractCheck::recorded(
        names::DATE,
        date.map(|d| format!("Date: {d}")).ok_or_else(|| {
            "no Date header (RFC 9110 §6.6.1: a server with a clock must send one)".to_string()
        }),
    ));
    let server = resp.header("server").map(str::to_string);
    report.facts.server_header = server.clone();
    report.checks.push(ContractCheck::recorded(
        names::SERVER,
        Ok(server.map_or("no Server header".into(), |s| format!("Server: {s}"))),
    ));
}

/// One connection of a protocol, as the keep-alive check uses it: HTTP/1.1
/// (http1, https) and HTTP/2 (h2, h2c) differ only in how a connection is
/// opened, asked and read, and in what each answer must also show.
pub(super) trait OneConnection: Sized {
    /// What the check's verdict calls it: `one connection`.
    const NAME: &'static str;
    /// Open one, within the endpoint's timeout.
    async fn open(target: &Endpoint) -> Result<Self, ClientError>;
    /// Ask one request and read its whole answer.
    async fn ask(&mut self, req: &Request) -> Result<Response, ClientError>;
    /// Why the connection ended before answer `i + 1` of `n`.
    fn ended(i: u32, n: u32) -> String;
    /// What answer `i + 1` of `n` (to `scenario`) must show beyond being an
    /// answer, recording its facts in `report`; nothing by default.
    fn check(
        _i: u32,
        _n: u32,
        _scenario: Scenario,
        _resp: &Response,
        _report: &mut VerifyReport,
    ) -> Result<(), String> {
        Ok(())
    }
}

impl OneConnection for client::Conn {
    const NAME: &'static str = "one connection";

    async fn open(target: &Endpoint) -> Result<Self, ClientError> {
        target.connect().await
    }

    async fn ask(&mut self, req: &Request) -> Result<Response, ClientError> {
        self.request(req, false).await
    }

    fn ended(i: u32, n: u32) -> String {
        format!("the server closed the connection after {i} of {n} answers; keep-alive is required")
    }

    /// Records wire bytes per scenario; an answer that ends the connection
    /// before the last fails keep-alive.
    fn check(
        i: u32,
        n: u32,
        scenario: Scenario,
        resp: &Response,
        report: &mut VerifyReport,
    ) -> Result<(), String> {
        if let Some(s) = report.scenarios.iter_mut().find(|s| s.scenario == scenario) {
            s.wire_bytes.get_or_insert(resp.wire_bytes as u64);
        }
        if scenario == Scenario::Plaintext && report.facts.plaintext_wire_bytes.is_none() {
            report.facts.plaintext_wire_bytes = Some(resp.wire_bytes as u64);
            report.facts.plaintext_head_bytes = Some(resp.head_bytes as u64);
        }
        if resp.closes() && i + 1 < n {
            let connection = resp.header("connection").unwrap_or("");
            return Err(format!(
                "answer {} of {n} ends the connection ({}); keep-alive is required",
                i + 1,
                if connection.is_empty() {
                    "HTTP/1.0 or close-delimited body".to_string()
                } else {
                    format!("Connection: {connection}")
                }
            ));
        }
        Ok(())
    }
}

/// `n` requests on one connection of protocol `C`, cycling over the
/// answering scenarios with fresh random inputs. Returns the first answer
/// (for header facts).
pub(super) async fn keep_alive<C: OneConnection>(
    target: &Endpoint,
    answering: &[Scenario],
    n: u32,
    rng: &mut StdRng,
    report: &mut VerifyReport,
) -> Option<Response> {
    if answering.is_empty() {
        report.checks.push(ContractCheck::required(
            names::KEEP_ALIVE,
            Err("not tried: no scenario answered its sample request".into()),
        ));
        return None;
    }
    let mut first = None;
    let result = async {
        let mut conn = C::open(target).await.map_err(|e| e.to_string())?;
        for i in 0..n {
            let scenario = answering[i as usize % answering.len()];
            let req = contract::sample_request(scenario, rng);
            let resp = match conn.ask(&req).await {
                Ok(r) => r,
                Err(ClientError::Closed { .. }) if i > 0 => return Err(C::ended(i, n)),
                Err(e) => return Err(format!("request {} of {n} ({scenario}): {e}", i + 1)),
            };
            report.facts.keep_alive_answered = i + 1;
            let checked = C::check(i, n, scenario, &resp, report);
            if first.is_none() {
                first = Some(resp);
            }
            checked?;
        }
        Ok(format!("{n} requests answered on {}", C::NAME))
    }
    .await;
    report
        .checks
        .push(ContractCheck::required(names::KEEP_ALIVE, result));
    first
}

/// Write `depth` requests at once, then read the answers: each must be the
/// right answer to the request in the same position.
async fn pipelining(
    target: &Endpoint,
    answering: &[Scenario],
    depth: u32,
    rng: &mut StdRng,
) -> Result<String, String> {
    let pool = telling(answering);
    let reqs: Vec<(Scenario, Request)> = (0..depth as usize)
        .map(|i| {
            let s = pool[i % pool.len()];
            (s, contract::sample_request(s, rng))
        })
        .collect();
    let mut conn = target.connect().await.map_err(|e| e.to_string())?;
    let bytes: Vec<u8> = reqs
        .iter()
        .flat_map(|(_, r)| client::encode(r, conn.host(), false))
        .collect();
    conn.send_raw(&bytes).await.map_err(|e| e.to_string())?;
    for i in 0..reqs.len() {
        let resp = conn
            .read_response(false)
            .await
            .map_err(|e| format!("{e} after {i} of {} pipelined answers", reqs.len()))?;
        let (s, req) = &reqs[i];
        if let Err(e) = scenario::judge(*s, req, &resp) {
            if let Some(j) = (0..reqs.len())
                .find(|&j| j != i && scenario::judge(reqs[j].0, &reqs[j].1, &resp).is_ok())
            {
                return Err(format!(
                    "answer {} of {} is the answer to request {}: answered out of order",
                    i + 1,
                    reqs.len(),
                    j + 1
                ));
            }
            return Err(format!("answer {} of {} is wrong: {e}", i + 1, reqs.len()));
        }
    }
    Ok(format!(
        "{} pipelined requests answered in order",
        reqs.len()
    ))
}

/// The scenarios to send several requests of at once: those whose answers
/// differ by input (so an answer shows which request it belongs to) first,
/// then any GET scenario, then whatever answered.
pub(crate) fn telling(answering: &[Scenario]) -> Vec<Scenario> {
    let telling: Vec<Scenario> = answering
        .iter()
        .copied()
        .filter(|s| matches!(s, Scenario::Param | Scenario::Middleware(1..)))
        .collect();
    let gets: Vec<Scenario> = answering
        .iter()
        .copied()
        .filter(|s| s.method() == "GET")
        .collect();
    [telling, gets, answering.to_vec()]
        .into_iter()
        .find(|p| !p.is_empty())
        .unwrap_or_default()
}

/// A random path outside the contract must be answered 404 (on a fresh
/// connection in the endpoint's protocol).
pub(crate) async fn not_found(target: &Endpoint, rng: &mut StdRng) -> Result<String, String> {
    let path = format!(
        "/fairground-verify-{}/{}",
        contract::random_param_id(rng),
        contract::random_param_id(rng)
    );
    let req = Request {
        method: "GET",
        path: path.clone(),
        headers: Vec::new(),
        body: None,
    };
    let mut conn = target
        .open()
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    let resp = conn
        .request(&req, true)
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    if resp.status == 404 {
        Ok(format!("GET {path} answered 404"))
    } else {
        Err(format!(
            "GET {path} (an unknown path) answered {} {}, expected 404",
            resp.status, resp.reason
        ))
    }
}
