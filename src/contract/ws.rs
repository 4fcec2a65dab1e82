//! The WebSocket wire (RFC 6455) as the contract's `ws-*` scenarios speak
//! it: the upgrade's key and accept, frame headers, masking. One codec for
//! the loader (hot path: headers parsed in place, payloads unmasked in
//! place), the verifier (which also writes what a loader never would:
//! fragments, pings, unmasked frames) and the reference server.
//!
//! Must not: do I/O.

use base64::Engine as _;
use sha1::{Digest, Sha1};

/// The path every WebSocket scenario upgrades.
pub const PATH: &str = "/ws";
/// The GUID RFC 6455 §1.3 appends to the key.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A continuation frame.
pub const OP_CONT: u8 = 0x0;
/// A text frame.
pub const OP_TEXT: u8 = 0x1;
/// A binary frame.
pub const OP_BINARY: u8 = 0x2;
/// A close frame.
pub const OP_CLOSE: u8 = 0x8;
/// A ping.
pub const OP_PING: u8 = 0x9;
/// A pong.
pub const OP_PONG: u8 = 0xA;

/// How often each connection of `ws-idle` pings (its first ping at a
/// random point of the first interval, so pings spread evenly).
pub const IDLE_PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Largest frame header: 2 bytes, an 8-byte length and a 4-byte mask.
pub const MAX_HEADER: usize = 14;

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.trim().as_bytes());
    h.update(GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64.
pub fn new_key(rng: &mut impl rand::Rng) -> String {
    let mut k = [0u8; 16];
    rng.fill(&mut k);
    base64::engine::general_purpose::STANDARD.encode(k)
}

/// The upgrade request, whole: `GET {path}` with the RFC's headers and
/// nothing offered (no subprotocol, no extension).
pub fn upgrade_request(path: &str, authority: &str, key: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// What is wrong with an upgrade's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    #[error("the upgrade was answered {0}, not 101 Switching Protocols")]
    Status(u16),
    #[error("the 101 lacks `Upgrade: websocket`")]
    NoUpgrade,
    #[error("the 101's Sec-WebSocket-Accept is {got:?}, the key asks for {want:?}")]
    Accept { got: Option<String>, want: String },
    #[error("the 101 agreed an extension nobody offered: Sec-WebSocket-Extensions: {0}")]
    Extension(String),
    #[error("the upgrade's answer is not HTTP: {0}")]
    Parse(String),
}

/// Reads the answer to an upgrade out of `buf`: `Ok(None)` until the head
/// is whole, then its length (bytes after it are frames already sent).
pub fn read_upgrade(buf: &[u8], key: &str) -> Result<Option<usize>, UpgradeError> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let used = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(UpgradeError::Parse(e.to_string())),
    };
    let status = resp.code.unwrap_or(0);
    if status != 101 {
        return Err(UpgradeError::Status(status));
    }
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    if !header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        return Err(UpgradeError::NoUpgrade);
    }
    let want = accept_key(key);
    let got = header("sec-websocket-accept");
    if got.as_deref() != Some(want.as_str()) {
        return Err(UpgradeError::Accept { got, want });
    }
    if let Some(ext) = header("sec-websocket-extensions").filter(|e| !e.is_empty()) {
        return Err(UpgradeError::Extension(ext));
    }
    Ok(Some(used))
}

/// A frame's header, parsed in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The last frame of its message.
    pub fin: bool,
    /// The opcode (`OP_*`).
    pub opcode: u8,
    /// The masking key, when masked.
    pub mask: Option<[u8; 4]>,
    /// Bytes of the header.
    pub len: usize,
    /// Bytes of the payload after it.
    pub payload: u64,
}

/// What makes a frame unreadable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("reserved bits set (no extension was agreed)")]
    Reserved,
    #[error("unknown opcode {0:#x}")]
    Opcode(u8),
    #[error("a control frame of {0} bytes or fragmented (at most 125, whole)")]
    Control(u64),
}

impl Header {
    /// Parses a header at the start of `buf`: `Ok(None)` when `buf` holds
    /// less than a whole header.
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<Option<Header>, FrameError> {
        if buf.len() < 2 {
            return Ok(None);
        }
        let (b0, b1) = (buf[0], buf[1]);
        if b0 & 0x70 != 0 {
            return Err(FrameError::Reserved);
        }
        let opcode = b0 & 0x0F;
        if !matches!(
            opcode,
            OP_CONT | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG
        ) {
            return Err(FrameError::Opcode(opcode));
        }
        let fin = b0 & 0x80 != 0;
        let masked = b1 & 0x80 != 0;
        let (payload, mut at) = match b1 & 0x7F {
            126 => {
                if buf.len() < 4 {
                    return Ok(None);
                }
                (u16::from_be_bytes([buf[2], buf[3]]) as u64, 4)
            }
            127 => {
                if buf.len() < 10 {
                    return Ok(None);
                }
                (
                    u64::from_be_bytes(buf[2..10].try_into().expect("8 bytes")),
                    10,
                )
            }
            n => (n as u64, 2),
        };
        if opcode >= OP_CLOSE && (payload > 125 || !fin) {
            return Err(FrameError::Control(payload));
        }
        let mask = if masked {
            if buf.len() < at + 4 {
                return Ok(None);
            }
            let m = buf[at..at + 4].try_into().expect("4 bytes");
            at += 4;
            Some(m)
        } else {
            None
        };
        Ok(Some(Header {
            fin,
            opcode,
            mask,
            len: at,
            payload,
        }))
    }
}

/// Writes a frame's header into `out`: masked (a client's) when `mask` is
/// given. The payload follows, masked by [`apply_mask`] for a client.
pub fn write_header(out: &mut Vec<u8>, fin: bool, opcode: u8, len: usize, mask: Option<[u8; 4]>) {
    out.push(if fin { 0x80 } else { 0 } | opcode);
    let m = if mask.is_some() { 0x80 } else { 0 };
    if len < 126 {
        out.push(m | len as u8);
    } else if len <= u16::MAX as usize {
        out.push(m | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(m | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    if let Some(k) = mask {
        out.extend_from_slice(&k);
    }
}

/// A whole frame: header and payload, masked with `mask` when given.
pub fn frame(fin: bool, opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_HEADER + payload.len());
    write_header(&mut out, fin, opcode, payload.len(), mask);
    let at = out.len();
    out.extend_from_slice(payload);
    if let Some(k) = mask {
        apply_mask(&mut out[at..], k, 0);
    }
    out
}

/// XORs `data` with `mask`, `data` starting `offset` bytes into the
/// payload (so a payload can be unmasked in pieces as it arrives).
/// Masking and unmasking are the same operation.
#[inline]
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: usize) {
    let mut m = [0u8; 4];
    for (i, b) in m.iter_mut().enumerate() {
        *b = mask[(offset + i) % 4];
    }
    let word = u32::from_ne_bytes(m);
    let mut chunks = data.chunks_exact_mut(4);
    for c in &mut chunks {
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) ^ word;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= m[i];
    }
}

/// A close frame's payload: the status code, then the reason.
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason.as_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfcs_example_key_is_accepted_as_the_rfc_says() {
        // RFC 6455 §1.3.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn the_rfcs_example_frames_parse() {
        // RFC 6455 §5.7: an unmasked and a masked text "Hello".
        let plain = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        let h = Header::parse(&plain).unwrap().unwrap();
        assert_eq!(
            (h.fin, h.opcode, h.mask, h.len, h.payload),
            (true, OP_TEXT, None, 2, 5)
        );
        let mut masked = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        let h = Header::parse(&masked).unwrap().unwrap();
        assert_eq!(h.mask, Some([0x37, 0xfa, 0x21, 0x3d]));
        apply_mask(&mut masked[6..], h.mask.unwrap(), 0);
        assert_eq!(&masked[6..], b"Hello");
        assert_eq!(
            frame(true, OP_TEXT, b"Hello", Some([0x37, 0xfa, 0x21, 0x3d])),
            {
                let mut m = vec![0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d];
                m.extend_from_slice(&[0x7f, 0x9f, 0x4d, 0x51, 0x58]);
                m
            }
        );
    }

    #[test]
    fn lengths_take_the_rfcs_three_forms_and_unmask_in_pieces() {
        for len in [0usize, 125, 126, 65_535, 65_536, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let f = frame(true, OP_BINARY, &payload, Some([1, 2, 3, 4]));
            assert_eq!(Header::parse(&f[..1]).unwrap(), None);
            let h = Header::parse(&f).unwrap().unwrap();
            assert_eq!(h.payload, len as u64);
            let mut body = f[h.len..].to_vec();
            let cut = len / 3;
            let (a, b) = body.split_at_mut(cut);
            apply_mask(a, [1, 2, 3, 4], 0);
            apply_mask(b, [1, 2, 3, 4], cut);
            assert_eq!(body, payload, "{len}");
        }
    }

    #[test]
    fn bad_frames_are_named() {
        assert_eq!(Header::parse(&[0xC1, 0]), Err(FrameError::Reserved));
        assert_eq!(Header::parse(&[0x83, 0]), Err(FrameError::Opcode(3)));
        assert_eq!(Header::parse(&[0x09, 0]), Err(FrameError::Control(0)));
        assert_eq!(
            Header::parse(&[0x89, 126, 0, 200]),
            Err(FrameError::Control(200))
        );
    }

    #[test]
    fn an_upgrade_answer_is_checked_key_and_all() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let ok = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x00";
        assert_eq!(read_upgrade(ok, key), Ok(Some(ok.len() - 2)));
        assert_eq!(read_upgrade(&ok[..20], key), Ok(None));
        let wrong = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: xxx\r\n\r\n";
        assert!(matches!(
            read_upgrade(wrong, key),
            Err(UpgradeError::Accept { .. })
        ));
        let deflate = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n";
        assert!(matches!(
            read_upgrade(deflate, key),
            Err(UpgradeError::Extension(_))
        ));
        assert_eq!(
            read_upgrade(b"HTTP/1.1 404 Not Found\r\n\r\n", key),
            Err(UpgradeError::Status(404))
        );
    }
}
