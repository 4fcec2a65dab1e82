//! Checks of one scenario: a sample answer (status, media type, body,
//! framing), then the scenario's own family of random inputs: several ids for
//! param, several bodies for echo, valid and invalid bodies for validate,
//! several `x-test` tokens for middleware-N.
//!
//! Owns the choice of inputs per family; the judgements are in `answer`.
//! A timeout ends the scenario's checks at once, so a hanging server costs
//! at most two timeouts here.

use rand::rngs::StdRng;

use crate::contract::{self, ExpectedBody, Request, Scenario};

use super::answer;
use super::client::Response;
use super::report::{names, ContractCheck, ScenarioReport};
use super::{Endpoint, Session};

/// Random ids sent by the param check.
const PARAM_IDS: usize = 5;
/// x-test tokens sent by the middleware check.
const MW_TOKENS: usize = 3;
/// Rows asked of `/db` by its randomness check.
const DB_SAMPLES: usize = 5;
/// Valid and invalid bodies sent by the validate check (each).
const VALIDATE_BODIES: usize = 4;
/// How long to listen for bytes beyond a Content-Length after an answer.
const EXTRA_BYTES_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// What checking one scenario found.
pub(crate) struct ScenarioOutcome {
    /// The scenario's checks (verdict filled in later by `finish`).
    pub report: ScenarioReport,
    /// Whether the sample request got a complete answer (of any status):
    /// such scenarios are used by the keep-alive check.
    pub answered: bool,
    /// Whether every check of the scenario passed: only such scenarios are
    /// pipelined, where a wrong answer would read as a wrong order.
    pub correct: bool,
}

/// Run every check of `scenario` against `target`.
pub(crate) async fn check(
    target: &Endpoint,
    scenario: Scenario,
    rng: &mut StdRng,
) -> ScenarioOutcome {
    if scenario.is_websocket() {
        return super::websocket::check(target, scenario, rng).await;
    }
    if scenario.is_grpc() {
        return super::grpc::check(target, scenario, rng).await;
    }
    let mut checks = Vec::new();
    let answered = sample(target, scenario, rng, &mut checks).await;
    if answered {
        family(target, scenario, rng, &mut checks).await;
    }
    ScenarioOutcome::of(scenario, checks, answered)
}

impl ScenarioOutcome {
    /// The outcome of `scenario`'s `checks`, its sample `answered` or not
    /// (verdict filled in later by `finish`).
    pub(crate) fn of(scenario: Scenario, checks: Vec<ContractCheck>, answered: bool) -> Self {
        let correct = answered
            && checks
                .iter()
                .all(|c| c.status == super::report::CheckStatus::Pass);
        ScenarioOutcome {
            correct,
            report: ScenarioReport {
                scenario,
                checks,
                wire_bytes: None,
                measurable: false,
                excluded_reason: None,
            },
            answered,
        }
    }
}

/// One sample request on a fresh connection with `Connection: close`, so a
/// body longer or shorter than its Content-Length shows at once (extra bytes,
/// or a close before the promised length) rather than as a later
/// desynchronised answer. Returns whether a complete answer came.
///
/// Over HTTP/2 the request goes alone on a fresh connection without
/// `Connection: close` (HTTP/2 forbids the header, and frames delimit every
/// body, so there is no desynchronising to guard against); the answer
/// checks are the same.
async fn sample(
    target: &Endpoint,
    scenario: Scenario,
    rng: &mut StdRng,
    checks: &mut Vec<ContractCheck>,
) -> bool {
    let req = contract::sample_request(scenario, rng);
    let (want_status, want_body) = contract::expected_response(scenario, &req);
    let what = format!("{} {}", req.method, req.path);
    let result = match target.open().await {
        Ok(mut conn) => match conn.request(&req, true).await {
            Ok(resp) => {
                let extra = if matches!(resp.framing, super::client::Framing::Length(_)) {
                    conn.unsolicited_bytes(EXTRA_BYTES_GRACE).await
                } else {
                    0
                };
                Ok((resp, extra))
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    match result {
        Ok((resp, extra)) => {
            checks.push(ContractCheck::required(
                names::STATUS,
                answer::status(&resp, &[want_status]),
            ));
            checks.push(ContractCheck::required(
                names::CONTENT_TYPE,
                answer::content_type(&resp, contract::expected_content_type(scenario)),
            ));
            checks.push(ContractCheck::required(
                names::BODY,
                answer::body(&resp, &want_body).map_err(|e| format!("{what}: {e}")),
            ));
            checks.push(ContractCheck::required(
                names::FRAMING,
                answer::framing(&resp, extra),
            ));
            if let Scenario::Middleware(n) = scenario {
                let token = mw_token(&req);
                checks.push(ContractCheck::required(
                    names::MW_HEADERS,
                    answer::middleware_headers(&resp, n, &token),
                ));
            }
            true
        }
        Err(e) if e.is_framing() => {
            // The head came; the body did not come as its framing promised.
            if let super::client::ClientError::Body { status, .. } = &e {
                let ok = *status == want_status;
                checks.push(ContractCheck::required(
                    names::STATUS,
                    if ok {
                        Ok(status.to_string())
                    } else {
                        Err(format!("status {status}, expected {want_status}"))
                    },
                ));
            }
            checks.push(ContractCheck::required(
                names::FRAMING,
                Err(format!("{what}: {e}")),
            ));
            false
        }
        Err(e) => {
            checks.push(ContractCheck::required(
                names::STATUS,
                Err(format!("no answer to {what}: {e}")),
            ));
            false
        }
    }
}

fn mw_token(req: &Request) -> String {
    req.headers
        .iter()
        .find(|(n, _)| n == contract::MW_REQUEST_HEADER)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// Whether `resp` is the correct answer to `req` (status, body and, for
/// middleware, the headers). Used by the families and by pipelining.
pub(crate) fn judge(scenario: Scenario, req: &Request, resp: &Response) -> Result<(), String> {
    let (want_status, want_body) = contract::expected_response(scenario, req);
    match want_body {
        // An invalid validate body: only the status matters.
        ExpectedBody::Json(serde_json::Value::Null) if scenario == Scenario::Validate => {
            answer::status(resp, &[400, 422])?;
        }
        want => {
            answer::status(resp, &[want_status])?;
            answer::body(resp, &want)?;
        }
    }
    if let Scenario::Middleware(n) = scenario {
        answer::middleware_headers(resp, n, &mw_token(req))?;
    }
    Ok(())
}

/// The scenario's own random inputs.
async fn family(
    target: &Endpoint,
    scenario: Scenario,
    rng: &mut StdRng,
    checks: &mut Vec<ContractCheck>,
) {
    match scenario {
        // Constant answers: nothing varies with the input (middleware-0 has
        // no layer to echo x-test), so there is no hard-coding to catch.
        // The fortunes page is one fixed table: its sample says it all.
        Scenario::Plaintext | Scenario::Json | Scenario::Middleware(0) | Scenario::Fortunes => {}
        // Random messages are the WebSocket checks' own (`websocket`).
        Scenario::WsEcho(_) | Scenario::WsIdle => {}
        // Random calls are the gRPC checks' own (`grpc`).
        Scenario::GrpcUnary | Scenario::GrpcStream(_) => {}
        Scenario::Db => {
            // Random rows: five answers that are all the same row are a
            // cached or constant answer.
            let reqs: Vec<Request> = (0..DB_SAMPLES)
                .map(|_| contract::sample_request(scenario, rng))
                .collect();
            let result = run_family(target, scenario, &reqs, "rows", false).await;
            checks.push(ContractCheck::required(names::RANDOM_INPUTS, result));
        }
        Scenario::Queries(_) | Scenario::Updates(_) => {
            let path = if matches!(scenario, Scenario::Queries(_)) {
                contract::db::QUERIES_PATH
            } else {
                contract::db::UPDATES_PATH
            };
            let reqs: Vec<Request> = contract::db::EDGE_COUNTS
                .iter()
                .map(|(raw, _)| Request {
                    method: "GET",
                    path: format!("{path}?{}={raw}", contract::db::QUERIES_PARAM),
                    headers: Vec::new(),
                    body: None,
                })
                .collect();
            let result = run_edges(target, scenario, &reqs).await;
            checks.push(ContractCheck::required(names::INVALID_INPUT, result));
        }
        Scenario::Param => {
            let reqs = distinct(rng, PARAM_IDS, |rng| {
                contract::sample_request(scenario, rng)
            });
            let result = run_family(target, scenario, &reqs, "ids", false).await;
            checks.push(ContractCheck::required(names::RANDOM_INPUTS, result));
        }
        Scenario::Echo => {
            let bodies = [
                contract::random_echo_body(rng, 48),
                contract::random_echo_body(rng, 700),
                contract::random_echo_body(rng, 8 * 1024),
                // Not only objects: any JSON value must come back.
                serde_json::json!([
                    contract::random_echo_body(rng, 32),
                    "ünïcödé ✓ 🚀 \"quoted\" \\ back\nslash",
                    -0.5,
                    1e300,
                    true,
                    null
                ]),
            ];
            let reqs: Vec<Request> = bodies.into_iter().map(|b| post("/echo", &b)).collect();
            let result = run_family(target, scenario, &reqs, "bodies", false).await;
            checks.push(ContractCheck::required(names::RANDOM_INPUTS, result));
        }
        Scenario::Validate => {
            let valid = distinct(rng, VALIDATE_BODIES, |rng| {
                post("/validate", &contract::random_valid_validate_body(rng))
            });
            let result = run_family(target, scenario, &valid, "valid bodies", false).await;
            let timed_out = result
                .as_ref()
                .is_err_and(|e| e.contains("timed out after"));
            checks.push(ContractCheck::required(names::RANDOM_INPUTS, result));
            if timed_out {
                return;
            }
            let mut invalid = Vec::new();
            let mut why = Vec::new();
            for _ in 0..VALIDATE_BODIES {
                let (body, reason) = contract::random_invalid_validate_body(rng);
                invalid.push(post("/validate", &body));
                why.push(reason);
            }
            let result = run_invalid(target, &invalid, &why).await;
            checks.push(ContractCheck::required(names::INVALID_INPUT, result));
        }
        Scenario::Middleware(_) => {
            let reqs = distinct(rng, MW_TOKENS, |rng| {
                contract::sample_request(scenario, rng)
            });
            let result = run_family(target, scenario, &reqs, "x-test tokens", true).await;
            checks.push(ContractCheck::required(names::RANDOM_INPUTS, result));
        }
    }
}

fn post(path: &str, body: &serde_json::Value) -> Request {
    Request {
        method: "POST",
        path: path.to_string(),
        headers: Vec::new(),
        body: Some(serde_json::to_vec(body).expect("JSON values serialize")),
    }
}

/// `n` requests that differ from each other (random draws rarely collide;
/// a collision would make the hard-coding check meaningless).
fn distinct(
    rng: &mut StdRng,
    n: usize,
    mut draw: impl FnMut(&mut StdRng) -> Request,
) -> Vec<Request> {
    let mut out: Vec<Request> = Vec::with_capacity(n);
    let mut tries = 0;
    while out.len() < n && tries < n * 10 {
        tries += 1;
        let r = draw(rng);
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// Send `reqs` (distinct inputs), require every answer correct and the
/// answers not all the same. `with_headers`: the input shows in response
/// headers (middleware), so compare those too when looking for hard-coding.
async fn run_family(
    target: &Endpoint,
    scenario: Scenario,
    reqs: &[Request],
    what: &str,
    with_headers: bool,
) -> Result<String, String> {
    let mut session = Session::new(target);
    let mut answers = Vec::new();
    let mut wrong = None;
    let mut all_ok = true;
    for (i, req) in reqs.iter().enumerate() {
        let label = format!("{} {} ({} of {})", req.method, req.path, i + 1, reqs.len());
        let resp = session
            .request(req)
            .await
            .map_err(|e| format!("{label}: {e}"))?;
        let mut fingerprint = resp.body.clone();
        if with_headers {
            for (n, v) in &resp.headers {
                if n.to_ascii_lowercase().starts_with("x-mw-") {
                    fingerprint.extend_from_slice(format!("\n{n}: {v}").as_bytes());
                }
            }
        }
        answers.push(fingerprint);
        all_ok &= (200..300).contains(&resp.status);
        if wrong.is_none() {
            if let Err(e) = judge(scenario, req, &resp) {
                wrong = Some(format!("{label}: {e}"));
            }
        }
    }
    // Hard-coding is the more telling diagnosis, so it is reported first;
    // but the same error page for every input is an error, not hard-coding.
    if all_ok {
        answer::not_hard_coded(&answers, what)?;
    }
    match wrong {
        Some(e) => Err(e),
        None => Ok(format!("{} random {what} answered correctly", reqs.len())),
    }
}

/// `?queries=` values out of range or not numbers must be answered with
/// the clamped number of rows (TechEmpower's rules).
async fn run_edges(
    target: &Endpoint,
    scenario: Scenario,
    reqs: &[Request],
) -> Result<String, String> {
    let mut session = Session::new(target);
    for req in reqs {
        let label = format!("{} {}", req.method, req.path);
        let resp = session
            .request(req)
            .await
            .map_err(|e| format!("{label}: {e}"))?;
        judge(scenario, req, &resp).map_err(|e| format!("{label}: {e}"))?;
    }
    let values: Vec<String> = contract::db::EDGE_COUNTS
        .iter()
        .map(|(raw, n)| format!("`{raw}`→{n}"))
        .collect();
    Ok(format!("row counts clamped: {}", values.join(", ")))
}

/// Invalid validate bodies must be answered 400 or 422.
async fn run_invalid(target: &Endpoint, reqs: &[Request], why: &[&str]) -> Result<String, String> {
    let mut session = Session::new(target);
    for (req, why) in reqs.iter().zip(why) {
        let resp = session
            .request(req)
            .await
            .map_err(|e| format!("invalid body ({why}): {e}"))?;
        if !matches!(resp.status, 400 | 422) {
            return Err(format!(
                "a body with {why} was answered {} {}, expected 400 or 422 (sent {})",
                resp.status,
                resp.reason,
                answer::quote(&String::from_utf8_lossy(req.body.as_deref().unwrap_or(b"")))
            ));
        }
    }
    Ok(format!("{} invalid bodies answered 400 or 422", reqs.len()))
}
