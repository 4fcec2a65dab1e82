//! The reference server's gRPC: `fairground.bench.Bench` over its HTTP/2
//! listeners (h2c, and h2 over TLS), written on hyper with the messages of
//! [`contract::grpc`]: the answer is a 200 head, one length-prefixed
//! message and trailers with `grpc-status` (a trailers-only answer for an
//! error), as the gRPC HTTP/2 protocol document says.
//!
//! `--grpc-defect` makes it one of the liars the verifier and the loader
//! must catch, each right in every other way.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use prost::Message;

use crate::contract::grpc;

/// A gRPC answer's body: its message, then its trailers.
pub(super) type GrpcBody =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

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

fn answer(message: Option<Vec<u8>>, status: u32, why: &str) -> Response<AnyBody> {
    let mut frames = Vec::with_capacity(2);
    if let Some(m) = message {
        frames.push(Ok(Frame::data(Bytes::from(m))));
    }
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from(status));
    if !why.is_empty() {
        if let Ok(v) = HeaderValue::from_str(why) {
            trailers.insert("grpc-message", v);
        }
    }
    if DEFECT.get() != Some(&GrpcDefect::NoTrailers) {
        frames.push(Ok(Frame::trailers(trailers)));
    }
    let mut resp = Response::new(Either::Right(StreamBody::new(futures_util::stream::iter(
        frames,
    ))));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(grpc::CONTENT_TYPE));
    resp
}

/// Answer one gRPC call (after the server's delay, as every answer).
pub(super) async fn call(req: Request<Incoming>) -> Response<AnyBody> {
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
        return answer(None, 12, "a unary method takes one message");
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
        _ => answer(None, grpc::UNIMPLEMENTED, &format!("unknown method {path}")),
    }
}
