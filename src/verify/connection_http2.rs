//! The checks that the server speaks the protocol asked at all (`tls`,
//! `http2`), run before anything else, and the connection-wide checks of
//! HTTP/2 (h2, h2c), which replace HTTP/1.1's:
//!
//! - keep-alive: many requests answered on ONE connection, as HTTP/1.1's
//!   keep-alive check asks (HTTP/2 has no Connection header: a server ends
//!   a connection with GOAWAY, which shows as the next request failing);
//! - streams: `pipeline_depth` requests in flight at once on one
//!   connection, each answered correctly (HTTP/2's counterpart of
//!   pipelining; answers are matched to requests by stream, so there is no
//!   order to get wrong). When a POST scenario passed, one of them is held
//!   open with half its body sent while the others must be answered, which
//!   a server answering one stream at a time cannot do. Required: HTTP/2 is
//!   measured with concurrent streams on each connection (`load.streams`);
//! - not-found, and the recorded Date and Server headers, as for HTTP/1.1.
//!
//! Not here: pipelining (HTTP/1.1 only) and wire bytes per answer (headers
//! travel HPACK-compressed in frames; the HTTP/2 client does not show the
//! bytes of one answer).

use bytes::Bytes;
use futures_util::future::join_all;
use rand::rngs::StdRng;
use tokio::time::Instant;

use crate::contract::{self, Protocol, Request, Scenario};

use super::client::{ClientError, Io, Response};
use super::http2::{exchange, preface, H2Conn, ReqBody};
use super::report::{names, ContractCheck, TlsFacts, VerifyReport};
use super::{connection, scenario, tls, Endpoint, VerifyOptions};

/// The `tls` check (https, h2) and the `http2` check (h2, h2c): whether the
/// server speaks the protocol asked. Returns false when it does not, after
/// recording why; nothing else is worth asking then. http1 has nothing to
/// check here. Bound: one timeout for each of the two checks.
pub(crate) async fn spoken(target: &Endpoint, report: &mut VerifyReport) -> bool {
    let protocol = target.protocol;
    let mut io: Box<dyn Io> = match protocol {
        Protocol::Http1 => return true,
        Protocol::Https | Protocol::H2 => {
            let (stream, facts) = match target.tls_stream(Instant::now() + target.timeout).await {
                Ok(pair) => pair,
                Err(e) => {
                    report
                        .checks
                        .push(ContractCheck::required(names::TLS, Err(e.to_string())));
                    return false;
                }
            };
            let agreed = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
            report
                .checks
                .push(ContractCheck::required(names::TLS, Ok(describe(&facts))));
            report.tls = Some(facts);
            let fits = tls::alpn_fits(protocol, agreed.as_deref());
            if protocol == Protocol::Https {
                if let Err(e) = fits {
                    let check = report.checks.last_mut().expect("just pushed");
                    *check = ContractCheck::required(names::TLS, Err(e));
                    return false;
                }
                return true;
            }
            if let Err(e) = fits {
                report
                    .checks
                    .push(ContractCheck::required(names::HTTP2, Err(e)));
                return false;
            }
            Box::new(stream)
        }
        Protocol::H2c => match target.tcp(Instant::now() + target.timeout).await {
            Ok(tcp) => Box::new(tcp),
            Err(e) => {
                report
                    .checks
                    .push(ContractCheck::required(names::HTTP2, Err(e.to_string())));
                return false;
            }
        },
    };
    let how = if protocol == Protocol::H2 {
        "after ALPN agreed h2"
    } else {
        "with prior knowledge (h2c)"
    };
    let result = preface(
        &mut *io,
        how,
        Instant::now() + target.timeout,
        target.timeout,
    )
    .await;
    let ok = result.is_ok();
    let result = result.map(|settings| {
        report.facts.max_concurrent_streams = settings.max_concurrent_streams();
        format!(
            "{}the server answered the connection preface with SETTINGS: {}",
            if protocol == Protocol::H2 {
                "ALPN agreed h2; "
            } else {
                ""
            },
            settings.describe()
        )
    });
    report
        .checks
        .push(ContractCheck::required(names::HTTP2, result));
    ok
}

/// `TLS 1.3 (TLS13_AES_128_GCM_SHA256), ALPN h2, certificate verified for
/// localhost against the CA given`.
fn describe(facts: &TlsFacts) -> String {
    format!(
        "{} ({}), ALPN {}, certificate verified for {} against the CA given",
        facts.version,
        facts.cipher_suite,
        facts.alpn.as_deref().unwrap_or("none agreed"),
        facts.server_name
    )
}

/// Run HTTP/2's connection checks and record their facts in `report`.
pub(crate) async fn check(
    target: &Endpoint,
    answering: &[Scenario],
    correct: &[Scenario],
    options: &VerifyOptions,
    rng: &mut StdRng,
    report: &mut VerifyReport,
) {
    let first = connection::keep_alive::<H2Conn>(
        target,
        answering,
        options.keep_alive_requests,
        rng,
        report,
    )
    .await;
    // As for pipelining: only scenarios answered correctly, so a wrong
    // answer here means concurrency went wrong, not the endpoint.
    if report.facts.keep_alive_answered > 0 && !correct.is_empty() {
        let max = report.facts.max_concurrent_streams;
        let result = streams(target, correct, options.pipeline_depth, max, rng).await;
        report.facts.concurrent_streams = Some(result.is_ok());
        report
            .checks
            .push(ContractCheck::required(names::STREAMS, result));
    }
    report.checks.push(ContractCheck::required(
        names::NOT_FOUND,
        connection::not_found(target, rng).await,
    ));
    if let Some(resp) = first {
        connection::header_facts(&resp, report);
    }
}

impl connection::OneConnection for H2Conn {
    const NAME: &'static str = "one HTTP/2 connection";

    async fn open(target: &Endpoint) -> Result<Self, ClientError> {
        target.connect_h2().await
    }

    async fn ask(&mut self, req: &Request) -> Result<Response, ClientError> {
        self.request(req).await
    }

    fn ended(i: u32, n: u32) -> String {
        format!(
            "the server ended the HTTP/2 connection after {i} of {n} answers; many \
             requests on one connection are required"
        )
    }

    // No `check` beyond the answer: HTTP/2 has no Connection header (a
    // server ends a connection with GOAWAY, which shows as the next request
    // failing), and the client does not show one answer's wire bytes.
}

/// `depth` requests in flight at once on one connection, each answered
/// correctly. When a POST scenario passed, the first is a POST held open
/// with half its body sent until the others are answered. Bound: one
/// timeout for the others, one more for the held stream's own answer.
async fn streams(
    target: &Endpoint,
    correct: &[Scenario],
    depth: u32,
    max: Option<u32>,
    rng: &mut StdRng,
) -> Result<String, String> {
    if let Some(max) = max.filter(|&m| m < depth) {
        return Err(format!(
            "the server allows at most {max} concurrent streams \
             (SETTINGS_MAX_CONCURRENT_STREAMS), fewer than the {depth} verify sends at once"
        ));
    }
    let held = correct
        .iter()
        .copied()
        .find(|s| s.method() == "POST")
        .filter(|_| depth >= 2)
        .map(|s| (s, contract::sample_request(s, rng)));
    let pool = connection::telling(correct);
    let others = depth as usize - usize::from(held.is_some());
    let reqs: Vec<(Scenario, Request)> = (0..others)
        .map(|i| {
            let s = pool[i % pool.len()];
            (s, contract::sample_request(s, rng))
        })
        .collect();
    let conn = target.connect_h2().await.map_err(|e| e.to_string())?;
    let (after, deadline) = (target.timeout, Instant::now() + target.timeout);
    let label = |r: &Request| format!("{} {}", r.method, r.path);
    let send_all = || {
        let requests = reqs
            .iter()
            .map(|(_, r)| conn.build(r, ReqBody::Full(r.body.clone().map(Bytes::from))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok::<_, ClientError>(join_all(
            requests
                .into_iter()
                .map(|r| exchange(conn.sender(), r, deadline, after)),
        ))
    };
    let judge_all = |answers: Vec<Result<Response, ClientError>>, offset: usize| {
        let total = depth as usize;
        for (i, ((s, req), answer)) in reqs.iter().zip(answers).enumerate() {
            let n = i + 1 + offset;
            let resp =
                answer.map_err(|e| format!("stream {n} of {total} ({}): {e}", label(req)))?;
            scenario::judge(*s, req, &resp).map_err(|e| {
                format!(
                    "stream {n} of {total} ({}) was answered wrongly: {e}",
                    label(req)
                )
            })?;
        }
        Ok::<(), String>(())
    };
    let Some((held_scenario, held_req)) = held else {
        let answers = send_all().map_err(|e| e.to_string())?.await;
        judge_all(answers, 0)?;
        return Ok(format!(
            "{depth} requests in flight at once on one connection, each answered correctly (no \
             POST scenario passed, so no stream was held open to show they are answered \
             concurrently)"
        ));
    };

    // Stream 1: a POST with half its body sent; the rest waits on `tx`.
    let body = held_req.body.clone().unwrap_or_default();
    let half = body.len() / 2;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    if half > 0 {
        let _ = tx.send(Bytes::copy_from_slice(&body[..half]));
    }
    let request = conn
        .build(
            &held_req,
            ReqBody::Held {
                rx,
                len: body.len() as u64,
            },
        )
        .map_err(|e| e.to_string())?;
    // Its answer may come only after the others', so it has a timeout of
    // its own after theirs: were the deadline shared, a server answering
    // one stream at a time would show as stream 1 timing out, not as what
    // it is.
    let held_answer = exchange(conn.sender(), request, deadline + after, after);
    tokio::pin!(held_answer);
    let others_answered = send_all().map_err(|e| e.to_string())?;
    let answers = tokio::select! {
        biased;
        early = &mut held_answer => {
            return Err(match early {
                Ok(resp) => format!(
                    "stream 1 ({}) was answered ({} {}) before its whole body was sent",
                    label(&held_req), resp.status, resp.reason
                ),
                Err(e) => format!("stream 1 ({}): {e}", label(&held_req)),
            });
        }
        answers = others_answered => answers,
    };
    judge_all(answers, 1).map_err(|e| {
        // A stream left unanswered while another waits is what a server
        // that answers one stream at a time does; a wrong answer is not.
        if e.contains("timed out after") {
            format!(
                "{e}, while stream 1 ({}) waited for the rest of its body: the server does not \
                 answer streams concurrently",
                label(&held_req)
            )
        } else {
            e
        }
    })?;
    let _ = tx.send(Bytes::copy_from_slice(&body[half..]));
    drop(tx);
    let resp = held_answer
        .await
        .map_err(|e| format!("stream 1 ({}): {e}", label(&held_req)))?;
    scenario::judge(held_scenario, &held_req, &resp).map_err(|e| {
        format!(
            "stream 1 of {depth} ({}) was answered wrongly: {e}",
            label(&held_req)
        )
    })?;
    Ok(format!(
        "{depth} requests in flight at once on one connection, each answered correctly; {} of \
         them while stream 1 ({}) waited for the rest of its body",
        depth - 1,
        label(&held_req)
    ))
}
