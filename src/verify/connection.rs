//! Connection-wide checks: keep-alive (many answers on one connection),
//! HTTP/1.1 pipelining (answers in order), 404 for an unknown path, and the
//! recorded headers (Date, Server) and wire bytes per plaintext answer.
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
    let first = keep_alive(target, answering, options.keep_alive_requests, rng, report).await;
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

/// `n` requests on one connection, cycling over the answering scenarios
/// with fresh random inputs. Returns the first answer (for header facts) and
/// records wire bytes per scenario.
async fn keep_alive(
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
        let mut conn = target.connect().await.map_err(|e| e.to_string())?;
        for i in 0..n {
            let scenario = answering[i as usize % answering.len()];
            let req = contract::sample_request(scenario, rng);
            let resp = match conn.request(&req, false).await {
                Ok(r) => r,
                Err(ClientError::Closed { .. }) if i > 0 => {
                    return Err(format!(
                        "the server closed the connection after {i} of {n} answers; keep-alive is required"
                    ))
                }
                Err(e) => return Err(format!("request {} of {n} ({scenario}): {e}", i + 1)),
            };
            report.facts.keep_alive_answered = i + 1;
            if let Some(s) = report.scenarios.iter_mut().find(|s| s.scenario == scenario) {
                s.wire_bytes.get_or_insert(resp.wire_bytes as u64);
            }
            if scenario == Scenario::Plaintext && report.facts.plaintext_wire_bytes.is_none() {
                report.facts.plaintext_wire_bytes = Some(resp.wire_bytes as u64);
                report.facts.plaintext_head_bytes = Some(resp.head_bytes as u64);
            }
            let closes = resp.closes();
            let connection = resp.header("connection").unwrap_or("").to_string();
            if first.is_none() {
                first = Some(resp);
            }
            if closes && i + 1 < n {
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
        }
        Ok(format!("{n} requests answered on one connection"))
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
    // Requests whose answers differ by input show the order; prefer them,
    // then any GET scenario, then whatever answered.
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
    let pool = [telling, gets, answering.to_vec()]
        .into_iter()
        .find(|p| !p.is_empty())
        .unwrap_or_default();
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

/// A random path outside the contract must be answered 404.
async fn not_found(target: &Endpoint, rng: &mut StdRng) -> Result<String, String> {
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
        .connect()
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
