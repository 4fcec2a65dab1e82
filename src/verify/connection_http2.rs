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
//!   measured with concurrent streams on each connection (`load.streams`).
//!   A stream limit below `pipeline_depth` is lawful: verify sends what the
//!   server allows (a limit of 1 fails), and the run flags a cell whose
//!   `load.streams` is above it;
//! - h2-concurrency: the same requests timed at once on one connection and
//!   on as many connections (`concurrency`), which catches a server that
//!   serves a connection's streams one at a time with any scenario, GET
//!   included (the held-open POST above needs a POST scenario, and only
//!   catches a server that waits for a whole body);
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
/// `http`: some scenario asked is an HTTP one; a gRPC service alone has no
/// HTTP paths to answer 404 (its unknown method is `grpc-unimplemented`),
/// so `not-found` is not asked of it.
pub(crate) async fn check(
    target: &Endpoint,
    answering: &[Scenario],
    correct: &[Scenario],
    http: bool,
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
        let streams_ok = result.is_ok();
        report
            .checks
            .push(ContractCheck::required(names::STREAMS, result));
        // Timed only when the streams were answered right: a wrong answer
        // is named by `streams`, and a time is worth nothing beside it.
        let concurrent = if streams_ok {
            let result = concurrency(target, correct, max, rng).await;
            let ok = result.is_ok();
            report
                .checks
                .push(ContractCheck::required(names::H2_CONCURRENCY, result));
            ok
        } else {
            false
        };
        report.facts.concurrent_streams = Some(concurrent);
    }
    if http {
        report.checks.push(ContractCheck::required(
            names::NOT_FOUND,
            connection::not_found(target, rng).await,
        ));
    }
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
    // A lawful stream limit below `depth` is not a fault here: verify sends
    // what the server allows, and a cell whose `load.streams` is above it is
    // flagged under load (`stream-limit`). One stream at a time is no
    // concurrency at all.
    if let Some(max) = max.filter(|&m| m < 2) {
        return Err(format!(
            "the server allows at most {max} concurrent stream(s) \
             (SETTINGS_MAX_CONCURRENT_STREAMS): no two requests of one connection can be served \
             at once"
        ));
    }
    let depth = max.map_or(depth, |m| depth.min(m));
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

/// Streams sent at once on one connection in the `h2-concurrency` timing
/// (fewer when the server allows fewer): enough that a server taking
/// turns shows a delay many times its baseline.
pub const CONCURRENCY_STREAMS: u32 = 16;
/// Timings of each kind; their medians are compared, so a repetition
/// slowed by a busy host (or a server's collector) moves nothing.
pub const CONCURRENCY_REPEATS: usize = 7;
/// A connection whose S streams take this many times as long as the same
/// S requests on S connections is taking turns. An honest server takes
/// about as long either way (a CPU-bound one does the same work in both);
/// one serving a connection's streams one at a time takes about S times
/// longer on one connection (the liar, 2 ms a stream: 57 ms against 10 ms
/// for 16 streams in a debug build on a busy 2-core host, about 13 times
/// in a release build). 3 leaves room for an honest server that runs each
/// connection on one core of up to three (its streams of one connection
/// share a core, its S connections do not); beyond that the gap below
/// keeps cheap requests from counting.
pub const SERIAL_RATIO: f64 = 3.0;
/// And the gap must be at least this long: fast servers answer S streams
/// in well under a millisecond either way, where a ratio is noise. The
/// serial liar (2 ms a stream) is 30 ms apart at 16 streams.
pub const SERIAL_MIN_GAP: std::time::Duration = std::time::Duration::from_millis(5);

/// Whether a connection's streams are served concurrently, timed: S
/// requests sent at once on one connection against the same S sent at
/// once on S connections, each [`CONCURRENCY_REPEATS`] times (in turns),
/// every answer judged. The scenario timed is the cheapest-looking one the
/// profile measures (a GET without a database when there is one), so an
/// honest server's own work stays small beside any waiting. Bound: one
/// timeout per timing, and one per connection opened.
async fn concurrency(
    target: &Endpoint,
    correct: &[Scenario],
    max: Option<u32>,
    rng: &mut StdRng,
) -> Result<String, String> {
    let s = max.map_or(CONCURRENCY_STREAMS, |m| CONCURRENCY_STREAMS.min(m)) as usize;
    let scenario = correct
        .iter()
        .copied()
        .find(|x| x.method() == "GET" && !x.needs_database())
        .or_else(|| correct.iter().copied().find(|x| x.method() == "GET"))
        .unwrap_or(correct[0]);
    let one = quick_ack_h2(target).await.map_err(|e| e.to_string())?;
    let mut many = Vec::with_capacity(s);
    for _ in 0..s {
        many.push(quick_ack_h2(target).await.map_err(|e| e.to_string())?);
    }
    let after = target.timeout;
    // S requests at once, the i-th on `conns[i % conns.len()]`; the time
    // until the last answer, every answer judged.
    let timed = async |conns: &[&H2Conn], rng: &mut StdRng| {
        let reqs: Vec<Request> = (0..s)
            .map(|_| contract::sample_request(scenario, rng))
            .collect();
        let built = reqs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                conns[i % conns.len()].build(r, ReqBody::Full(r.body.clone().map(Bytes::from)))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        let deadline = started + after;
        let answers = join_all(
            built
                .into_iter()
                .enumerate()
                .map(|(i, r)| exchange(conns[i % conns.len()].sender(), r, deadline, after)),
        )
        .await;
        let took = started.elapsed();
        for (req, answer) in reqs.iter().zip(answers) {
            let what = format!("{} {}", req.method, req.path);
            let resp = answer.map_err(|e| format!("timing concurrent streams, {what}: {e}"))?;
            scenario::judge(scenario, req, &resp).map_err(|e| {
                format!("timing concurrent streams, {what} was answered wrongly: {e}")
            })?;
        }
        Ok::<_, String>(took.as_secs_f64())
    };
    let on_one = [&one];
    let on_many: Vec<&H2Conn> = many.iter().collect();
    // One untimed turn of each: first requests warm what a server warms.
    timed(&on_one, rng).await?;
    timed(&on_many, rng).await?;
    let (mut one_s, mut many_s) = (Vec::new(), Vec::new());
    for i in 0..CONCURRENCY_REPEATS {
        // In turns, so a slow spell of the host falls on both kinds.
        if i % 2 == 0 {
            one_s.push(timed(&on_one, rng).await?);
            many_s.push(timed(&on_many, rng).await?);
        } else {
            many_s.push(timed(&on_many, rng).await?);
            one_s.push(timed(&on_one, rng).await?);
        }
    }
    let one_s = crate::stats::median(&one_s).unwrap_or(0.0);
    let many_s = crate::stats::median(&many_s).unwrap_or(0.0);
    let ms = |x: f64| format!("{:.2} ms", x * 1e3);
    let serial = one_s >= SERIAL_RATIO * many_s && one_s - many_s >= SERIAL_MIN_GAP.as_secs_f64();
    let figures = format!(
        "{} for {s} streams on one connection vs {} for {s} requests on {s} connections \
         (medians of {CONCURRENCY_REPEATS}, {scenario})",
        ms(one_s),
        ms(many_s)
    );
    if serial {
        Err(format!(
            "streams of one connection served one at a time: {figures}"
        ))
    } else {
        Ok(format!(
            "streams of one connection served concurrently: {figures}"
        ))
    }
}

/// An HTTP/2 connection for the `h2-concurrency` timing whose socket
/// acknowledges every read at once (TCP_QUICKACK after each). Why: the
/// timing sends its S requests and then nothing until every answer is in,
/// so the kernel would delay its ACKs (40 ms), and a server that leaves
/// Nagle on (no TCP_NODELAY: axum::serve's h2c, measured) holds its second
/// write of a connection for that ACK: 44 ms for 16 honest streams. The
/// loader never meets that stall (it sends a request as each answer
/// arrives, and its ACKs ride on them), and it is no sign of streams
/// served one at a time.
async fn quick_ack_h2(target: &Endpoint) -> Result<H2Conn, ClientError> {
    let deadline = Instant::now() + target.timeout;
    let io: Box<dyn Io> = if target.tls.is_none() {
        Box::new(QuickAck(target.tcp(deadline).await?))
    } else {
        let (stream, _) = target.tls_stream(deadline).await?;
        tls::alpn_fits(target.protocol, stream.get_ref().1.alpn_protocol())
            .map_err(ClientError::Http2)?;
        Box::new(QuickAck(stream))
    };
    target.handshake_h2(io, deadline).await
}

/// A byte stream over TCP whose every read is acknowledged at once.
struct QuickAck<S>(S);

/// The TCP socket under a byte stream.
trait Tcp {
    fn tcp(&self) -> &tokio::net::TcpStream;
}

impl Tcp for tokio::net::TcpStream {
    fn tcp(&self) -> &tokio::net::TcpStream {
        self
    }
}

impl Tcp for tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    fn tcp(&self) -> &tokio::net::TcpStream {
        self.get_ref().0
    }
}

impl<S: tokio::io::AsyncRead + Tcp + Unpin> tokio::io::AsyncRead for QuickAck<S> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.0).poll_read(cx, buf);
        if polled.is_ready() {
            // Linux leaves quick-ack mode on its own; set it again after
            // every read. A failure only brings the delay back.
            let _ = socket2::SockRef::from(this.0.tcp()).set_tcp_quickack(true);
        }
        polled
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for QuickAck<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
