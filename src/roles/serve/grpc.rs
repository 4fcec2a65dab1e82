//! The reference server's gRPC: `fairground.bench.Bench` over its HTTP/2
//! listeners (h2c, and h2 over TLS), written on hyper with the messages of
//! [`contract::grpc`]: the answer is a 200 head, its length-prefixed
//! messages (one for a unary call, `count` for `Stream`, produced as flow
//! control lets them out) and trailers with `grpc-status` (a trailers-only
//! answer for an error), as the gRPC HTTP/2 protocol document says.
//!
//! Deadlines are honoured: a call whose `grpc-timeout` passes before its
//! answer is ready (the server's `--delay` included) is answered
//! DEADLINE_EXCEEDED at the deadline, and a stream still sending then ends
//! with DEADLINE_EXCEEDED in its trailers.
//!
//! `--grpc-defect` makes it one of the liars the verifier and the loader
//! must catch, each right in every other way.

use std::convert::Infallible;

use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use http_body_util::{BodyExt, Either, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use prost::Message;
use tokio::time::Instant;

use crate::contract::grpc;

/// A gRPC answer's body: its messages, then its trailers.
pub(super) type GrpcBody = StreamBody<BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// Any answer of the reference server: a whole body, or a gRPC one.
pub(super) type AnyBody = Either<Full<Bytes>, GrpcBody>;

/// A known defect of the reference server's gRPC, for tests that prove
/// fairground catches it (`fairground serve --grpc-defect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GrpcDefect {
    /// Every Echo answered with one fixed reply (id 0, a constant payload),
    /// status OK.
    Fixed,
    /// `grpc-status: 0` over a message whose length prefix promises more
    /// bytes than follow.
    BadMessage,
    /// The reply, then the stream ended without trailers (no
    /// `grpc-status`).
    NoTrailers,
    /// Every method of the service answered as Echo: an unknown one too,
    /// with status OK.
    AnyMethod,
    /// `grpc-timeout` ignored: a call answered (OK) after its deadline,
    /// a stream sent on past it.
    IgnoresDeadline,
}

static DEFECT: std::sync::OnceLock<GrpcDefect> = std::sync::OnceLock::new();

/// Serve gRPC with `defect` (once per process, before the server starts).
pub fn set_grpc_defect(defect: GrpcDefect) {
    let _ = DEFECT.set(defect);
}

/// Whether `req` is a gRPC call (by its content type).
pub(super) fn is_call(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(grpc::CONTENT_TYPE))
}

/// The trailers frame of a call that ended with `status` (and `why` as
/// its `grpc-message`); none from the no-trailers liar.
fn trailers(status: u32, why: &str) -> Option<Result<Frame<Bytes>, Infallible>> {
    if DEFECT.get() == Some(&GrpcDefect::NoTrailers) {
        return None;
    }
    let mut t = HeaderMap::new();
    t.insert("grpc-status", HeaderValue::from(status));
    if !why.is_empty() {
        if let Ok(v) = HeaderValue::from_str(why) {
            t.insert("grpc-message", v);
        }
    }
    Some(Ok(Frame::trailers(t)))
}

/// A 200 `application/grpc` answer whose body is `frames`.
fn respond(frames: BoxStream<'static, Result<Frame<Bytes>, Infallible>>) -> Response<AnyBody> {
    let mut resp = Response::new(Either::Right(StreamBody::new(frames)));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(grpc::CONTENT_TYPE));
    resp
}

/// An answer of at most one message, then the trailers.
fn answer(message: Option<Vec<u8>>, status: u32, why: &str) -> Response<AnyBody> {
    let frames: Vec<_> = message
        .map(|m| Ok(Frame::data(Bytes::from(m))))
        .into_iter()
        .chain(trailers(status, why))
        .collect();
    respond(futures_util::stream::iter(frames).boxed())
}

/// `Stream`'s answer: `count` replies, each made when hyper asks for it
/// (as flow control lets it out), then `grpc-status: 0`; past `deadline`,
/// DEADLINE_EXCEEDED instead of the rest.
fn streamed(id: u64, count: u32, deadline: Option<Instant>) -> Response<AnyBody> {
    // The state: the next reply's index; None once the trailers are out.
    let frames = futures_util::stream::unfold(Some(0u32), move |next| async move {
        let i = next?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return trailers(grpc::DEADLINE_EXCEEDED, "deadline exceeded").map(|t| (t, None));
        }
        if i == count {
            return trailers(grpc::OK, "").map(|t| (t, None));
        }
        let reply = grpc::frame(&grpc::StreamReply { id, index: i });
        Some((Ok(Frame::data(Bytes::from(reply))), Some(i + 1)))
    });
    respond(frames.boxed())
}

/// The deadline `req` carries (`grpc-timeout`), counted from now; none
/// for the liar that ignores it.
fn deadline_of(req: &Request<Incoming>) -> Option<Instant> {
    if DEFECT.get() == Some(&GrpcDefect::IgnoresDeadline) {
        return None;
    }
    let v = req.headers().get("grpc-timeout")?.to_str().ok()?;
    Some(Instant::now() + grpc::parse_timeout(v)?)
}

/// Answer one gRPC call, after `delay` (the server's, as every answer),
/// within the call's deadline.
pub(super) async fn call(
    req: Request<Incoming>,
    delay: impl std::future::Future<Output = ()>,
) -> Response<AnyBody> {
    let deadline = deadline_of(&req);
    let work = async move {
        delay.await;
        work(req, deadline).await
    };
    match deadline {
        Some(d) => tokio::time::timeout_at(d, work)
            .await
            .unwrap_or_else(|_| answer(None, grpc::DEADLINE_EXCEEDED, "deadline exceeded")),
        None => work.await,
    }
}

/// The answer to `req`, streamed within `deadline`.
async fn work(req: Request<Incoming>, deadline: Option<Instant>) -> Response<AnyBody> {
    let defect = DEFECT.get().copied();
    // gRPC requires `te: trailers` (gRPC's HTTP/2 protocol document), and
    // C-core refuses a call without it (grpc-status 2, "Missing :te
    // header"): so does this server, so a client that drops it is caught
    // here first.
    let te = req
        .headers()
        .get("te")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    if !te {
        return answer(None, 2, "missing te: trailers");
    }
    let path = req.uri().path().to_string();
    let body = match Limited::new(req.into_body(), grpc::MAX_MESSAGE + 5)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => return answer(None, 13, &format!("reading the request: {e}")),
    };
    let msgs = match grpc::messages(&body) {
        Ok(m) => m,
        Err(e) => return answer(None, 13, &e),
    };
    let [one] = msgs.as_slice() else {
        return answer(None, 12, "a call of this service takes one message");
    };
    let method = if defect == Some(GrpcDefect::AnyMethod) {
        grpc::ECHO_PATH
    } else {
        path.as_str()
    };
    match method {
        grpc::ECHO_PATH => {
            let Ok(mut m) = grpc::Echo::decode(*one) else {
                return answer(None, 13, "not an EchoRequest");
            };
            if defect == Some(GrpcDefect::Fixed) {
                m = grpc::Echo {
                    id: 0,
                    payload: vec![b'x'; grpc::UNARY_PAYLOAD],
                };
            }
            let mut framed = grpc::frame(&m);
            if defect == Some(GrpcDefect::BadMessage) {
                // Promise one byte more than follows.
                let len = u32::from_be_bytes([framed[1], framed[2], framed[3], framed[4]]) + 1;
                framed[1..5].copy_from_slice(&len.to_be_bytes());
            }
            answer(Some(framed), grpc::OK, "")
        }
        grpc::SUM_PATH => {
            let Ok(m) = grpc::SumRequest::decode(*one) else {
                return answer(None, 13, "not a SumRequest");
            };
            let sum = m.values.iter().fold(0i64, |a, v| a.wrapping_add(*v));
            answer(Some(grpc::frame(&grpc::SumReply { sum })), grpc::OK, "")
        }
        grpc::STREAM_PATH => {
            let Ok(m) = grpc::StreamRequest::decode(*one) else {
                return answer(None, 13, "not a StreamRequest");
            };
            streamed(m.id, m.count, deadline)
        }
        _ => answer(None, grpc::UNIMPLEMENTED, &format!("unknown method {path}")),
    }
}
