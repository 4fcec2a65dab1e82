//! The checks of a gRPC scenario (`grpc-unary`), over HTTP/2 (h2c, or h2
//! over TLS): a call answered as gRPC answers (200, `application/grpc`,
//! one length-prefixed message, `grpc-status: 0` in the trailers), random
//! calls each answered with their own id and payload (a server answering a
//! fixed reply fails), and an unknown method answered UNIMPLEMENTED (a
//! server that answers every path alike fails). The connection checks
//! (streams, h2-concurrency) then ask the same calls concurrently, as for
//! any HTTP/2 scenario.

use rand::rngs::StdRng;

use crate::contract::{self, grpc, Request, Scenario};

use super::client::Response;
use super::report::{names, ContractCheck};
use super::scenario::ScenarioOutcome;
use super::Endpoint;

/// Random calls the `random-inputs` check makes on one connection.
const RANDOM_CALLS: usize = 5;

type Check = Result<String, String>;

/// Field `name` of `resp`: its trailers' or, in a trailers-only answer,
/// its head's.
fn grpc_field<'a>(resp: &'a Response, name: &str) -> Option<&'a str> {
    resp.trailers
        .iter()
        .chain(resp.headers.iter())
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The `grpc-status` of `resp` (one that is not a number reads UNKNOWN).
fn status_of(resp: &Response) -> Option<u32> {
    grpc_field(resp, "grpc-status").map(|v| grpc::parse_status(v.as_bytes()).unwrap_or(2))
}

fn grpc_message(resp: &Response) -> String {
    grpc_field(resp, "grpc-message")
        .map(|v| format!(" ({v})"))
        .unwrap_or_default()
}

/// Whether `resp` answers `req` as gRPC answers it: 200, the content
/// type, `grpc-status: 0` in the trailers after the message, the reply the
/// contract expects.
fn call_answered(req: &Request, resp: &Response) -> Check {
    if resp.status != 200 {
        return Err(format!("HTTP status {}, a gRPC answer is 200", resp.status));
    }
    let ct = resp.header("content-type").unwrap_or("");
    if !ct.starts_with(grpc::CONTENT_TYPE) {
        return Err(format!(
            "content-type `{ct}`, expected `{}` (or `{}+proto`)",
            grpc::CONTENT_TYPE,
            grpc::CONTENT_TYPE
        ));
    }
    let in_trailers = resp
        .trailers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("grpc-status"));
    match status_of(resp) {
        None => return Err("no grpc-status: the answer has no trailers saying how the call ended".into()),
        Some(grpc::OK) if !in_trailers => {
            return Err("grpc-status 0 in the head with no trailers: a message cannot come before a trailers-only answer's end".into())
        }
        Some(grpc::OK) => {}
        Some(code) => {
            return Err(format!(
                "grpc-status {code} {}{}",
                grpc::status_name(code),
                grpc_message(resp)
            ))
        }
    }
    contract::check_answer(Scenario::GrpcUnary, req, resp.status, &resp.body)?;
    Ok(format!(
        "200 {ct}, one EchoReply of {} bytes, grpc-status 0 in the trailers",
        resp.body.len()
    ))
}

/// Every check of a gRPC scenario against `target`.
pub(crate) async fn check(
    target: &Endpoint,
    scenario: Scenario,
    rng: &mut StdRng,
) -> ScenarioOutcome {
    let mut checks = Vec::new();
    if !target.protocol.is_http2() {
        checks.push(ContractCheck::required(
            names::GRPC_CALL,
            Err(format!(
                "not tried: gRPC runs over HTTP/2 (h2, h2c), not {}",
                target.protocol
            )),
        ));
        return ScenarioOutcome::of(scenario, checks, false);
    }
    // One call on a fresh connection.
    let req = contract::sample_request(scenario, rng);
    let first = match target.open().await {
        Ok(mut conn) => conn.request(&req, false).await.map(|r| (conn, r)),
        Err(e) => Err(e),
    };
    let (mut conn, resp) = match first {
        Ok(x) => x,
        Err(e) => {
            checks.push(ContractCheck::required(
                names::GRPC_CALL,
                Err(e.to_string()),
            ));
            return ScenarioOutcome::of(scenario, checks, false);
        }
    };
    checks.push(ContractCheck::required(
        names::GRPC_CALL,
        call_answered(&req, &resp),
    ));

    // Random calls on the same connection, each with its own reply.
    let mut random: Check = Ok(format!(
        "{RANDOM_CALLS} calls of random ids and payloads, each answered with its own"
    ));
    for _ in 0..RANDOM_CALLS {
        let req = contract::sample_request(scenario, rng);
        match conn.request(&req, false).await {
            Ok(resp) => {
                if let Err(e) = call_answered(&req, &resp) {
                    random = Err(e);
                    break;
                }
            }
            Err(e) => {
                random = Err(e.to_string());
                break;
            }
        }
    }
    checks.push(ContractCheck::required(names::RANDOM_INPUTS, random));

    // An unknown method of the service: UNIMPLEMENTED, as every gRPC stack
    // answers it.
    let mut unknown = contract::sample_request(scenario, rng);
    unknown.path = grpc::UNKNOWN_PATH.to_string();
    let unimplemented = match conn.request(&unknown, false).await {
        Ok(resp) => match status_of(&resp) {
            Some(grpc::UNIMPLEMENTED) => Ok(format!(
                "{} answered grpc-status 12 UNIMPLEMENTED",
                grpc::UNKNOWN_PATH
            )),
            Some(code) => Err(format!(
                "{} answered grpc-status {code} {}{}, expected 12 UNIMPLEMENTED",
                grpc::UNKNOWN_PATH,
                grpc::status_name(code),
                grpc_message(&resp)
            )),
            None => Err(format!(
                "{} answered HTTP {} without a grpc-status, expected grpc-status 12 UNIMPLEMENTED",
                grpc::UNKNOWN_PATH,
                resp.status
            )),
        },
        Err(e) => Err(e.to_string()),
    };
    checks.push(ContractCheck::required(
        names::GRPC_UNIMPLEMENTED,
        unimplemented,
    ));
    ScenarioOutcome::of(scenario, checks, true)
}
