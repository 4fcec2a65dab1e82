//! gRPC scenarios (`grpc-unary`): the `fairground.bench.Bench` service of
//! `bench.proto` (shipped beside this file; every gRPC framework carries a
//! copy and generates its code from it), its messages, and the gRPC wire
//! over HTTP/2 (the gRPC "PROTOCOL-HTTP2" document): a request is a POST to
//! `/fairground.bench.Bench/{Method}` with `content-type:
//! application/grpc` and `te: trailers`, its body one length-prefixed
//! message; the answer is a 200 head, one length-prefixed message, and
//! trailers whose `grpc-status` says whether the call succeeded (0, OK).
//!
//! The messages are prost's (derived here from the .proto's fields, so no
//! code generation at build time); the framing is five bytes and written
//! here.

use prost::Message;
use rand::Rng;

/// The service's full name.
pub const SERVICE: &str = "fairground.bench.Bench";
/// `Echo`'s path.
pub const ECHO_PATH: &str = "/fairground.bench.Bench/Echo";
/// `Sum`'s path.
pub const SUM_PATH: &str = "/fairground.bench.Bench/Sum";
/// `Stream`'s path.
pub const STREAM_PATH: &str = "/fairground.bench.Bench/Stream";
/// A method the service does not have: a server answers it UNIMPLEMENTED.
pub const UNKNOWN_PATH: &str = "/fairground.bench.Bench/NoSuchMethod";
/// The content type of every gRPC request and answer.
pub const CONTENT_TYPE: &str = "application/grpc";
/// Bytes of random payload in a `grpc-unary` request.
pub const UNARY_PAYLOAD: usize = 64;
/// The largest message the loader and verifier accept (gRPC's default
/// receive limit, 4 MiB).
pub const MAX_MESSAGE: usize = 4 << 20;

/// `grpc-status` OK.
pub const OK: u32 = 0;
/// `grpc-status` DEADLINE_EXCEEDED.
pub const DEADLINE_EXCEEDED: u32 = 4;
/// `grpc-status` UNIMPLEMENTED.
pub const UNIMPLEMENTED: u32 = 12;

/// `EchoRequest` and `EchoReply` (the same fields).
#[derive(Clone, PartialEq, Message)]
pub struct Echo {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(bytes = "vec", tag = "2")]
    pub payload: Vec<u8>,
}

/// `SumRequest`.
#[derive(Clone, PartialEq, Message)]
pub struct SumRequest {
    #[prost(int64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `SumReply`.
#[derive(Clone, PartialEq, Message)]
pub struct SumReply {
    #[prost(int64, tag = "1")]
    pub sum: i64,
}

/// `StreamRequest`.
#[derive(Clone, PartialEq, Message)]
pub struct StreamRequest {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint32, tag = "2")]
    pub count: u32,
}

/// `StreamReply`.
#[derive(Clone, PartialEq, Message)]
pub struct StreamReply {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint32, tag = "2")]
    pub index: u32,
}

/// `m` as one length-prefixed message: a zero byte (not compressed), its
/// length (4 bytes, big-endian), the protobuf bytes.
pub fn frame(m: &impl Message) -> Vec<u8> {
    let len = m.encoded_len();
    let mut out = Vec::with_capacity(5 + len);
    out.push(0);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    m.encode(&mut out).expect("a Vec grows as needed");
    out
}

/// The messages of a body of length-prefixed messages, in order; an error
/// names what is wrong with the framing (a compressed message, which the
/// loader never allowed: it sends no `grpc-accept-encoding`; a length past
/// the body's end; bytes left over).
pub fn messages(mut body: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    while !body.is_empty() {
        if body.len() < 5 {
            return Err(format!(
                "{} byte(s) after the last message, not a 5-byte message prefix",
                body.len()
            ));
        }
        if body[0] != 0 {
            return Err(format!(
                "a message flagged compressed ({}) though the request offered no grpc-accept-encoding",
                body[0]
            ));
        }
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        if len > MAX_MESSAGE || len > body.len() - 5 {
            return Err(format!(
                "a message prefix says {len} bytes but {} follow",
                body.len() - 5
            ));
        }
        out.push(&body[5..5 + len]);
        body = &body[5 + len..];
    }
    Ok(out)
}

/// A random `Echo` request: a random id and [`UNARY_PAYLOAD`] random bytes.
pub fn random_echo(rng: &mut impl Rng) -> Echo {
    let mut payload = vec![0u8; UNARY_PAYLOAD];
    rng.fill(&mut payload[..]);
    Echo {
        id: rng.random(),
        payload,
    }
}

/// Whether `body` is the answer to `Echo` request `sent`: exactly one
/// message, decoding to the same id and payload. The error says what came.
pub fn check_echo(body: &[u8], sent: &Echo) -> Result<(), String> {
    let msgs = messages(body)?;
    let [one] = msgs.as_slice() else {
        return Err(format!("{} messages in a unary answer, not 1", msgs.len()));
    };
    let got = Echo::decode(*one).map_err(|e| format!("the reply is not an EchoReply: {e}"))?;
    if got.id != sent.id {
        return Err(format!("reply id {} for request id {}", got.id, sent.id));
    }
    if got.payload != sent.payload {
        return Err(format!(
            "reply payload of {} bytes differs from the {} sent (first difference at byte {})",
            got.payload.len(),
            sent.payload.len(),
            got.payload
                .iter()
                .zip(&sent.payload)
                .position(|(a, b)| a != b)
                .unwrap_or(got.payload.len().min(sent.payload.len()))
        ));
    }
    Ok(())
}

/// The `grpc-status` of a trailer value: a decimal number.
pub fn parse_status(value: &[u8]) -> Option<u32> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// A status code's name (for messages).
pub fn status_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "not a gRPC status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn an_echo_frames_and_checks_and_a_changed_one_is_named() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let sent = random_echo(&mut rng);
        let body = frame(&sent);
        assert_eq!(body[0], 0);
        assert_eq!(
            u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize,
            body.len() - 5
        );
        assert_eq!(check_echo(&body, &sent), Ok(()));
        // Field 1 varint, field 2 bytes: protobuf's canonical encoding.
        assert_eq!(body[5], 0x08);

        let mut other = sent.clone();
        other.payload[3] ^= 1;
        let e = check_echo(&frame(&other), &sent).unwrap_err();
        assert!(e.contains("first difference at byte 3"), "{e}");
        let mut other = sent.clone();
        other.id += 1;
        assert!(check_echo(&frame(&other), &sent)
            .unwrap_err()
            .contains("reply id"));

        // Framing: two messages, a short prefix, a length past the end, a
        // compressed flag.
        let two = [frame(&sent), frame(&sent)].concat();
        assert!(check_echo(&two, &sent).unwrap_err().contains("2 messages"));
        assert!(messages(&body[..3]).unwrap_err().contains("5-byte"));
        assert!(messages(&body[..body.len() - 1])
            .unwrap_err()
            .contains("prefix says"));
        let mut c = body.clone();
        c[0] = 1;
        assert!(messages(&c).unwrap_err().contains("compressed"));
        assert_eq!(messages(&[]).unwrap().len(), 0);
        assert!(check_echo(&[], &sent).unwrap_err().contains("0 messages"));
    }

    #[test]
    fn statuses_parse_from_trailer_text() {
        assert_eq!(parse_status(b"0"), Some(0));
        assert_eq!(parse_status(b"12"), Some(UNIMPLEMENTED));
        assert_eq!(parse_status(b"x"), None);
        assert_eq!(status_name(4), "DEADLINE_EXCEEDED");
    }
}
