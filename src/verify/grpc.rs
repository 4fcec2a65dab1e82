//! The checks of a gRPC scenario (`grpc-unary`, `grpc-stream-N`), over
//! HTTP/2 (h2c, or h2 over TLS): a call answered as gRPC answers (200,
//! `application/grpc`, the length-prefixed replies, `grpc-status: 0` in
//! the trailers), random calls each answered with their own id (a server
//! answering a fixed reply fails), an unknown method answered
//! UNIMPLEMENTED (a server that answers every path alike fails), `Sum`
//! computed, and for a stream its deadline honoured: a stream that cannot
//! finish within its `grpc-timeout` is ended by the server then, not sent
//! on past it. The connection checks (streams, h2-concurrency) then ask
//! the same calls concurrently, as for any HTTP/2 scenario.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use rand::rngs::StdRng;
use tokio::time::Instant;

use crate::contract::{self, grpc, Request, Scenario};

use super::client::{fmt_duration, Response};
use super::http2::ReqBody;
use super::report::{names, ContractCheck};
use super::scenario::ScenarioOutcome;
use super::Endpoint;

/// Random calls the `random-inputs` check makes on one connection.
const RANDOM_CALLS: usize = 5;
/// The deadline of the `grpc-deadline` check's stream.
pub const DEADLINE_PROBE: Duration = Duration::from_millis(200);
/// The receive window of that stream's connection (see
/// `Endpoint::connect_h2_window`).
const DEADLINE_WINDOW: u32 = 1024;
/// How early a server may end that stream (its clock starts when the
/// call arrives, after the verifier's): an end sooner misread the
/// deadline.
const DEADLINE_EARLY: Duration = Duration::from_millis(20);

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

/// Whether `resp` answers `req` (a call of `scenario`) as gRPC answers
/// it: 200, the content type, `grpc-status: 0` in the trailers after the
/// replies, the replies the contract expects.
fn call_answered(scenario: Scenario, req: &Request, resp: &Response) -> Check {
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
    contract::check_answer(scenario, req, resp.status, &resp.body)?;
    let replies = match scenario {
        Scenario::GrpcStream(n) => format!("{n} StreamReplies"),
        _ => "one EchoReply".to_string(),
    };
    Ok(format!(
        "200 {ct}, {replies} ({} bytes), grpc-status 0 in the trailers",
        resp.body.len()
    ))
}

/// `grpc-sum`: `Sum` of random values answered with their sum.
fn sum_answered(resp: &Response, want: i64) -> Check {
    if status_of(resp) != Some(grpc::OK) || resp.status != 200 {
        return Err(format!(
            "HTTP {} grpc-status {}{}",
            resp.status,
            status_of(resp).map_or("none".to_string(), |c| format!(
                "{c} {}",
                grpc::status_name(c)
            )),
            grpc_message(resp)
        ));
    }
    let msgs = grpc::messages(&resp.body)?;
    let [one] = msgs.as_slice() else {
        return Err(format!("{} messages in a unary answer, not 1", msgs.len()));
    };
    let got = <grpc::SumReply as prost::Message>::decode(*one)
        .map_err(|e| format!("the reply is not a SumReply: {e}"))?;
    if got.sum != want {
        return Err(format!("sum {}, expected {want}", got.sum));
    }
    Ok(format!(
        "the sum of random int64 values, {want}, wrapping as int64 does"
    ))
}

/// `grpc-deadline`: a `Stream` call asking for more replies than any
/// server sends in [`DEADLINE_PROBE`], with that deadline, its replies
/// read as fast as they come: the server must end it at the deadline
/// (grpc-status DEADLINE_EXCEEDED or CANCELLED in the trailers, or a
/// reset), within `grace` after it; one that streams on, or ends OK, or
/// ends well before the deadline (a misread `grpc-timeout`), fails.
async fn deadline_honoured(target: &super::Endpoint, rng: &mut StdRng, grace: Duration) -> Check {
    use rand::Rng;
    // A window of 1 KiB: at most ~50 replies wait unread, within h2's
    // budget for small DATA frames (one reply is one ~20-byte frame from
    // most servers).
    let conn = target
        .connect_h2_window(DEADLINE_WINDOW)
        .await
        .map_err(|e| e.to_string())?;
    let count = u32::MAX;
    let mut req = contract::sample_request(Scenario::GrpcStream(1), rng);
    req.body = Some(grpc::frame(&grpc::StreamRequest {
        id: rng.random(),
        count,
    }));
    req.headers.push((
        "grpc-timeout".to_string(),
        grpc::timeout_value(DEADLINE_PROBE),
    ));
    let request = conn
        .build(&req, ReqBody::Full(req.body.clone().map(Bytes::from)))
        .map_err(|e| e.to_string())?;
    let asked = format!(
        "a Stream of {count} replies with grpc-timeout {} ({})",
        grpc::timeout_value(DEADLINE_PROBE),
        fmt_duration(DEADLINE_PROBE)
    );
    let start = Instant::now();
    let give_up = start + DEADLINE_PROBE + grace;
    let mut send = conn.sender();
    let resp = match tokio::time::timeout_at(give_up, async {
        send.ready().await?;
        send.send_request(request).await
    })
    .await
    {
        Err(_) => {
            return Err(format!(
                "{asked}: no answer head within {}",
                fmt_duration(DEADLINE_PROBE + grace)
            ))
        }
        Ok(Err(e)) => return Err(format!("{asked}: {e}")),
        Ok(Ok(r)) => r,
    };
    // A trailers-only answer: the head carries the status.
    let head_status = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| grpc::parse_status(v.as_bytes()));
    let mut body = resp.into_body();
    let (mut bytes, mut ended) = (0u64, None::<Result<Option<u32>, String>>);
    if head_status.is_some() {
        ended = Some(Ok(head_status));
    }
    while ended.is_none() {
        match tokio::time::timeout_at(give_up, body.frame()).await {
            Err(_) => break,
            Ok(None) => ended = Some(Ok(None)),
            Ok(Some(Err(e))) => ended = Some(Err(super::http2::chain(&e))),
            Ok(Some(Ok(f))) => match f.into_data() {
                Ok(d) => bytes += d.len() as u64,
                Err(f) => {
                    let status = f
                        .trailers_ref()
                        .and_then(|t| t.get("grpc-status"))
                        .and_then(|v| grpc::parse_status(v.as_bytes()));
                    ended = Some(Ok(status));
                }
            },
        }
    }
    let at = start.elapsed();
    let sent = format!("{bytes} bytes of replies");
    let early = |why: &str| {
        Err(format!(
            "{asked}: {why} after {} and {sent}, before its deadline: grpc-timeout misread",
            fmt_duration(at)
        ))
    };
    match ended {
        None => Err(format!(
            "{asked}: still streaming {} after its deadline ({sent}): grpc-timeout ignored",
            fmt_duration(grace)
        )),
        Some(Ok(Some(code))) if at + DEADLINE_EARLY < DEADLINE_PROBE => early(&format!(
            "ended with grpc-status {code} {}",
            grpc::status_name(code)
        )),
        Some(Ok(None)) if at + DEADLINE_EARLY < DEADLINE_PROBE => {
            early("ended without a grpc-status")
        }
        Some(Err(reset)) if at + DEADLINE_EARLY < DEADLINE_PROBE => {
            early(&format!("reset ({reset})"))
        }
        Some(Ok(Some(code @ (grpc::DEADLINE_EXCEEDED | 1)))) => Ok(format!(
            "{asked}: ended with grpc-status {code} {} after {} and {sent}",
            grpc::status_name(code),
            fmt_duration(at)
        )),
        Some(Err(reset)) => Ok(format!(
            "{asked}: reset by the server after {} and {sent} ({reset})",
            fmt_duration(at)
        )),
        Some(Ok(Some(code))) => Err(format!(
            "{asked}: ended with grpc-status {code} {} after {} and {sent}, expected 4 DEADLINE_EXCEEDED",
            grpc::status_name(code),
            fmt_duration(at)
        )),
        Some(Ok(None)) => Err(format!(
            "{asked}: ended without a grpc-status after {} and {sent}",
            fmt_duration(at)
        )),
    }
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
        call_answered(scenario, &req, &resp),
    ));

    // Random calls on the same connection, each with its own reply.
    let mut random: Check = Ok(format!(
        "{RANDOM_CALLS} calls of random ids and payloads, each answered with its own"
    ));
    for _ in 0..RANDOM_CALLS {
        let req = contract::sample_request(scenario, rng);
        match conn.request(&req, false).await {
            Ok(resp) => {
                if let Err(e) = call_answered(scenario, &req, &resp) {
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

    // Sum: computed from the request, not a fixed reply.
    let (sum_req, want) = grpc::random_sum(rng);
    let mut call = contract::sample_request(Scenario::GrpcUnary, rng);
    call.path = grpc::SUM_PATH.to_string();
    call.body = Some(grpc::frame(&sum_req));
    let sum = match conn.request(&call, false).await {
        Ok(resp) => sum_answered(&resp, want),
        Err(e) => Err(e.to_string()),
    };
    checks.push(ContractCheck::required(names::GRPC_SUM, sum));

    // A stream's deadline.
    if let Scenario::GrpcStream(_) = scenario {
        let grace = target.timeout.max(Duration::from_secs(1));
        checks.push(ContractCheck::required(
            names::GRPC_DEADLINE,
            deadline_honoured(target, rng, grace).await,
        ));
    }
    ScenarioOutcome::of(scenario, checks, true)
}
