//! gRPC scenarios (`grpc-unary`, `grpc-stream-N`): the `fairground.bench.Bench` service of
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
/// The most replies a `grpc-stream-N` call asks for.
pub const MAX_STREAM: u32 = 100_000;
/// Replies per call verification asks of a manifest's `grpc-stream`.
pub const VERIFY_STREAM: u32 = 10;
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

/// Whether `body` is the answer to `Stream` request `sent`: exactly
/// `sent.count` messages, message `i` decoding to the request's id and
/// index `i`. The error names the first that is not.
pub fn check_stream(body: &[u8], sent: &StreamRequest) -> Result<(), String> {
    let msgs = messages(body)?;
    if msgs.len() != sent.count as usize {
        return Err(format!(
            "{} replies to a Stream call that asked for {}",
            msgs.len(),
            sent.count
        ));
    }
    for (i, m) in msgs.iter().enumerate() {
        let got =
            StreamReply::decode(*m).map_err(|e| format!("reply {i} is not a StreamReply: {e}"))?;
        if got.id != sent.id || got.index as usize != i {
            return Err(format!(
                "reply {i} carries id {} index {}, expected id {} index {i}",
                got.id, got.index, sent.id
            ));
        }
    }
    Ok(())
}

/// A random `Sum` request of 1 to 32 values (any int64, so the sum wraps
/// as often as not) and the sum it must be answered with.
pub fn random_sum(rng: &mut impl Rng) -> (SumRequest, i64) {
    let n = rng.random_range(1..=32);
    let values: Vec<i64> = (0..n).map(|_| rng.random()).collect();
    let sum = values.iter().fold(0i64, |a, v| a.wrapping_add(*v));
    (SumRequest { values }, sum)
}

/// `d` as a `grpc-timeout` value (gRPC's HTTP/2 protocol document: at most
/// 8 digits and a unit, `H` `M` `S` `m` `u` `n`): the finest unit whose
/// count fits, rounded up so a deadline is never sent shorter than asked.
pub fn timeout_value(d: std::time::Duration) -> String {
    const UNITS: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    let ns = d.as_nanos().max(1);
    for (per, unit) in UNITS {
        let n = ns.div_ceil(per);
        if n <= 99_999_999 {
            return format!("{n}{unit}");
        }
    }
    "99999999H".to_string()
}

/// A `grpc-timeout` value as a duration (None: not one).
pub fn parse_timeout(v: &str) -> Option<std::time::Duration> {
    use std::time::Duration;
    let v = v.trim();
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
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
    fn a_stream_checks_count_order_and_id() {
        let sent = StreamRequest { id: 9, count: 3 };
        let reply = |id, index| frame(&StreamReply { id, index });
        let good = [reply(9, 0), reply(9, 1), reply(9, 2)].concat();
        assert_eq!(check_stream(&good, &sent), Ok(()));
        let short = [reply(9, 0), reply(9, 1)].concat();
        assert!(check_stream(&short, &sent)
            .unwrap_err()
            .contains("2 replies to a Stream call that asked for 3"));
        let swapped = [reply(9, 0), reply(9, 2), reply(9, 1)].concat();
        assert!(check_stream(&swapped, &sent)
            .unwrap_err()
            .contains("reply 1 carries id 9 index 2"));
        let other = [reply(9, 0), reply(8, 1), reply(9, 2)].concat();
        assert!(check_stream(&other, &sent).unwrap_err().contains("id 8"));
        // Index 0 is protobuf's default: encoded as nothing, still read.
        assert_eq!(frame(&StreamReply { id: 0, index: 0 }), vec![0, 0, 0, 0, 0]);
    }

    #[test]
    fn deadlines_are_written_in_the_finest_unit_that_fits_and_read_back() {
        use std::time::Duration;
        assert_eq!(timeout_value(Duration::from_secs(2)), "2000000u");
        assert_eq!(timeout_value(Duration::from_millis(200)), "200000u");
        assert_eq!(timeout_value(Duration::from_nanos(1500)), "1500n");
        assert_eq!(timeout_value(Duration::from_secs(100)), "100000m");
        assert_eq!(timeout_value(Duration::from_secs(1_000_000)), "1000000S");
        for d in [1, 999, 1_000_000, 2_000_000_000, 123_456_789_012u64] {
            let d = Duration::from_nanos(d);
            let back = parse_timeout(&timeout_value(d)).unwrap();
            assert!(
                back >= d && back - d < d / 1000 + Duration::from_nanos(1),
                "{d:?} {back:?}"
            );
        }
        assert_eq!(parse_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout("10m"), Some(Duration::from_millis(10)));
        for bad in ["", "S", "5", "5s", "123456789S", "-1S", "1.5S"] {
            assert_eq!(parse_timeout(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_random_sum_wraps_as_int64_does() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        for _ in 0..50 {
            let (req, sum) = random_sum(&mut rng);
            assert!((1..=32).contains(&req.values.len()));
            let wide: i128 = req.values.iter().map(|&v| v as i128).sum();
            assert_eq!(sum, wide as i64);
        }
    }

    #[test]
    fn statuses_parse_from_trailer_text() {
        assert_eq!(parse_status(b"0"), Some(0));
        assert_eq!(parse_status(b"12"), Some(UNIMPLEMENTED));
        assert_eq!(parse_status(b"x"), None);
        assert_eq!(status_name(4), "DEADLINE_EXCEEDED");
    }
}
