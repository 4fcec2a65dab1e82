//! Pure judgements of one answer against the contract: status, media type,
//! body, framing, middleware headers, and "the same answer for different
//! inputs". No I/O here, so every rule is unit-tested on hand-made responses.
//!
//! Each function returns `Ok(detail)` on success (what was seen, for the
//! report) or `Err(detail)` naming what was expected and what came.

use crate::contract::{self, ExpectedBody};

use super::client::{Framing, Response};

pub use crate::contract::quote;

/// The status is one of `allowed`.
pub fn status(resp: &Response, allowed: &[u16]) -> Result<String, String> {
    if allowed.contains(&resp.status) {
        Ok(resp.status.to_string())
    } else {
        let want = allowed
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" or ");
        Err(format!(
            "status {} {}, expected {want} (body {})",
            resp.status,
            resp.reason,
            quote(&resp.body_text())
        ))
    }
}

/// The Content-Type's media type is `media` (case-insensitive); the only
/// parameter allowed is `charset`.
pub fn content_type(resp: &Response, media: &str) -> Result<String, String> {
    let Some(value) = resp.header("content-type") else {
        return Err(format!("no Content-Type header, expected {media}"));
    };
    let mut parts = value.split(';');
    let got = parts.next().unwrap_or("").trim();
    if !got.eq_ignore_ascii_case(media) {
        return Err(format!("Content-Type `{value}`, expected {media}"));
    }
    for param in parts {
        let key = param.split('=').next().unwrap_or("").trim();
        if !key.eq_ignore_ascii_case("charset") {
            return Err(format!(
                "Content-Type `{value}` has parameter `{}`; only charset is allowed after {media}",
                param.trim()
            ));
        }
    }
    Ok(value.to_string())
}

/// The body is what the contract expects: exact bytes, or a JSON text that
/// parses to the expected value (whitespace and key order free).
pub fn body(resp: &Response, expected: &ExpectedBody) -> Result<String, String> {
    contract::check_body(&resp.body, expected)?;
    Ok(match expected {
        ExpectedBody::Exact(_) => format!("{} bytes", resp.body.len()),
        ExpectedBody::Json(_) => format!("{} bytes of equal JSON", resp.body.len()),
        ExpectedBody::World(None) => format!("one world row in {} bytes", resp.body.len()),
        ExpectedBody::World(Some(n)) => format!("{n} world rows in {} bytes", resp.body.len()),
        ExpectedBody::Fortunes => "the 13 fortunes, escaped and sorted".to_string(),
        ExpectedBody::Upgrade => "a WebSocket upgrade".to_string(),
        ExpectedBody::GrpcEcho(e) => format!(
            "an EchoReply of id {} and {} payload bytes",
            e.id,
            e.payload.len()
        ),
        ExpectedBody::GrpcStream(r) => {
            format!("{} StreamReplies of id {}, in order", r.count, r.id)
        }
    })
}

pub use crate::contract::json_equal;

/// Content-Length or chunked framing that agrees with the body.
/// `unsolicited`: bytes that arrived after the answer was complete (a body
/// longer than its Content-Length; always 0 over HTTP/2).
pub fn framing(resp: &Response, unsolicited: usize) -> Result<String, String> {
    if resp.length_and_chunked {
        return Err(
            "both Content-Length and Transfer-Encoding: chunked (RFC 9112 §6.3 forbids it)".into(),
        );
    }
    match resp.framing {
        Framing::Close => Err(format!(
            "neither Content-Length nor chunked: the {}-byte body ends only when the connection closes",
            resp.body.len()
        )),
        Framing::Length(n) if unsolicited > 0 => Err(format!(
            "Content-Length says {n} bytes but {unsolicited} more bytes followed the body"
        )),
        Framing::Length(n) => Ok(format!("Content-Length {n} matches the body")),
        Framing::Chunked => Ok(format!("chunked, {} bytes", resp.body.len())),
        Framing::Empty => Ok("no body".into()),
        // HTTP/2 has neither chunked coding nor close-delimited bodies: DATA
        // frames end with END_STREAM, and the HTTP/2 client has already
        // failed the stream if a Content-Length disagreed with the DATA
        // (RFC 9113 §8.1.1). Nothing further to judge here.
        Framing::Http2 => Ok(match resp.header("content-length") {
            Some(n) => format!("HTTP/2 DATA frames, Content-Length {n} matches the body"),
            None => format!("HTTP/2 DATA frames, {} bytes", resp.body.len()),
        }),
    }
}

/// Every `x-mw-i` (1..=n) header is present once and carries `token`.
pub fn middleware_headers(resp: &Response, n: u16, token: &str) -> Result<String, String> {
    let mut missing = Vec::new();
    for i in 1..=n {
        let name = contract::middleware_header(i);
        match resp.header_all(&name).as_slice() {
            [] => missing.push(name),
            [v] if v.trim() == token => {}
            [v] => {
                return Err(format!(
                    "{name} is `{v}` but the request's {} was `{token}`",
                    contract::MW_REQUEST_HEADER
                ))
            }
            many => {
                return Err(format!(
                    "{name} appears {} times; each layer sets it once",
                    many.len()
                ))
            }
        }
    }
    if missing.is_empty() {
        Ok(format!(
            "{n} headers carry the request's {}",
            contract::MW_REQUEST_HEADER
        ))
    } else {
        Err(format!(
            "missing {} of {n} headers: {}",
            missing.len(),
            missing.join(", ")
        ))
    }
}

/// Different inputs must not all get the same answer. `answers` are the
/// response bodies (and, for middleware, the header values) for `inputs`
/// distinct inputs; what = "ids", "bodies", …
pub fn not_hard_coded(answers: &[Vec<u8>], what: &str) -> Result<(), String> {
    if answers.len() >= 2 && answers.windows(2).all(|w| w[0] == w[1]) {
        Err(format!(
            "the same response for different inputs ({} random {what}): a hard-coded answer: {}",
            answers.len(),
            quote(&String::from_utf8_lossy(&answers[0]))
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_numbers_compare_as_json_numbers() {
        use serde_json::json;
        let sent = json!([{"f": 825.0, "n": 703883, "a": [1.5, 2]}]);
        let node = serde_json::from_str(r#"[{"a":[1.5,2],"n":703883,"f":825}]"#).unwrap();
        assert!(json_equal(&node, &sent));
        assert!(!json_equal(&json!({"f": 825.5}), &json!({"f": 825})));
        assert!(!json_equal(&json!([1, 2]), &json!([1, 2, 3])));
        assert!(!json_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_equal(&json!(u64::MAX), &json!(u64::MAX - 1)));
    }

    use super::*;

    fn resp(headers: &[(&str, &str)], body: &str, framing: Framing) -> Response {
        Response {
            status: 200,
            reason: "OK".into(),
            minor_version: 1,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            framing,
            length_and_chunked: false,
            trailers: Vec::new(),
            head_bytes: 0,
            wire_bytes: 0,
        }
    }

    #[test]
    fn quotes_stay_on_one_line_and_short() {
        assert_eq!(quote("a\r\nb\tc\u{1}"), "`a\\r\\nb\\tc\\u{1}`");
        let long = "x".repeat(200);
        assert_eq!(quote(&long).chars().count(), 120 + 3);
    }

    #[test]
    fn content_type_allows_charset_only() {
        let ok = resp(
            &[("Content-Type", "Text/Plain; charset=UTF-8")],
            "",
            Framing::Empty,
        );
        assert!(content_type(&ok, "text/plain").is_ok());
        let wrong = resp(&[("content-type", "text/html")], "", Framing::Empty);
        assert_eq!(
            content_type(&wrong, "text/plain").unwrap_err(),
            "Content-Type `text/html`, expected text/plain"
        );
        let param = resp(
            &[("content-type", "application/json; v=2")],
            "",
            Framing::Empty,
        );
        assert!(content_type(&param, "application/json")
            .unwrap_err()
            .contains("parameter `v=2`"));
        let none = resp(&[], "", Framing::Empty);
        assert!(content_type(&none, "text/plain").is_err());
    }

    #[test]
    fn json_bodies_compare_as_values() {
        let r = resp(
            &[],
            "{ \"name\": \"ada\",\n \"id\": \"7\" }",
            Framing::Length(30),
        );
        let want = ExpectedBody::Json(contract::param_response("7"));
        assert!(body(&r, &want).is_ok());
        let other = ExpectedBody::Json(contract::param_response("8"));
        assert!(body(&r, &other)
            .unwrap_err()
            .contains("expected JSON equal to"));
        let text = resp(&[], "Hello, World!\n", Framing::Length(14));
        assert!(body(&text, &ExpectedBody::Exact("Hello, World!")).is_err());
    }

    #[test]
    fn framing_rejects_close_delimited_and_trailing_bytes() {
        let r = resp(&[], "abc", Framing::Close);
        assert!(framing(&r, 0)
            .unwrap_err()
            .contains("neither Content-Length"));
        let r = resp(&[], "abc", Framing::Length(3));
        assert!(framing(&r, 0).is_ok());
        assert_eq!(
            framing(&r, 4).unwrap_err(),
            "Content-Length says 3 bytes but 4 more bytes followed the body"
        );
        let mut both = resp(&[], "abc", Framing::Chunked);
        both.length_and_chunked = true;
        assert!(framing(&both, 0).is_err());
    }

    #[test]
    fn middleware_headers_need_every_layer_with_the_token() {
        let all = resp(&[("x-mw-1", "tok"), ("X-MW-2", "tok")], "", Framing::Empty);
        assert!(middleware_headers(&all, 2, "tok").is_ok());
        assert_eq!(
            middleware_headers(&all, 3, "tok").unwrap_err(),
            "missing 1 of 3 headers: x-mw-3"
        );
        assert_eq!(
            middleware_headers(&all, 2, "other").unwrap_err(),
            "x-mw-1 is `tok` but the request's x-test was `other`"
        );
    }

    #[test]
    fn identical_answers_to_different_inputs_are_hard_coded() {
        let same = vec![b"{\"id\":\"42\"}".to_vec(); 3];
        let err = not_hard_coded(&same, "ids").unwrap_err();
        assert!(
            err.starts_with(
                "the same response for different inputs (3 random ids): a hard-coded answer"
            ),
            "{err}"
        );
        assert!(not_hard_coded(&[b"a".to_vec(), b"b".to_vec()], "ids").is_ok());
        assert!(not_hard_coded(&[b"a".to_vec()], "ids").is_ok());
    }
}
