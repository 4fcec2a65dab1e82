//! HPACK (RFC 7541) for the HTTP/2 loader: an encoder for requests and a
//! decoder for responses, each as small as the loader's needs.
//!
//! The decoder keeps the dynamic table exactly (every insertion, eviction
//! and size update the server makes), but reads a field's value only when
//! it must: `:status`, `grpc-status` (gRPC's answer, in the trailers;
//! [`Decoder::grpc_status`]), and the fields the server inserts into the table
//! (their size is the decoded length). Every other value is skipped by its
//! length, so a response costs no Huffman decoding in the common case
//! (servers send `date`, `content-type`, `content-length` as literals
//! without indexing). Huffman strings are decoded with `loona-hpack`'s
//! decoder.
//!
//! The encoder sends the pseudo-headers from the static table where it has
//! them, and every other field once as a literal with incremental indexing
//! and afterwards as one byte, as long as it fits the table without
//! evicting anything (so indices never move); `:path` and `content-length`
//! change per request and are sent as literals without indexing. Strings
//! are not Huffman-coded (the server decodes them as they are).

use std::collections::VecDeque;

use loona_hpack::huffman::HuffmanDecoder;

/// RFC 7541, Appendix A.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The size of a table entry (RFC 7541, 4.1).
fn entry_size(name: usize, value: usize) -> usize {
    name + value + 32
}

/// Why a header block could not be decoded (a connection error,
/// COMPRESSION_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

/// Read an integer with an `n`-bit prefix at `buf[*at]` (RFC 7541, 5.1).
fn integer(buf: &[u8], at: &mut usize, n: u32) -> Result<usize, Malformed> {
    let mask = (1usize << n) - 1;
    let first = *buf.get(*at).ok_or(Malformed)? as usize & mask;
    *at += 1;
    if first < mask {
        return Ok(first);
    }
    let (mut value, mut shift) = (mask, 0u32);
    loop {
        let b = *buf.get(*at).ok_or(Malformed)?;
        *at += 1;
        if shift > 28 {
            return Err(Malformed);
        }
        value += ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Write `value` with an `n`-bit prefix, the prefix's other bits `flags`.
fn put_integer(out: &mut Vec<u8>, flags: u8, n: u32, value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// A string literal without Huffman coding.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// A string literal at `buf[*at]`: its raw bytes and whether they are
/// Huffman-coded.
fn string<'a>(buf: &'a [u8], at: &mut usize) -> Result<(&'a [u8], bool), Malformed> {
    let huffman = *buf.get(*at).ok_or(Malformed)? & 0x80 != 0;
    let len = integer(buf, at, 7)?;
    let raw = buf.get(*at..*at + len).ok_or(Malformed)?;
    *at += len;
    Ok((raw, huffman))
}

/// Huffman-coded strings decoded lately, kept: servers send the same few
/// values in every response (nginx inserts `server`, `date`,
/// `content-type` and `content-length` into the table each time), and the
/// decoder is slow to make and to run.
const DECODED: usize = 8;

/// The response decoder's dynamic table and limits.
pub(crate) struct Decoder {
    /// Newest first (index 62 is the front): each entry's name length,
    /// size, and status when its name is `:status`. Nothing else of an
    /// entry is ever needed, so nothing else is kept.
    table: VecDeque<(Entry, usize)>,
    size: usize,
    max: usize,
    /// The most a size update may ask: our SETTINGS_HEADER_TABLE_SIZE
    /// (the default, 4,096: the loader does not change it).
    limit: usize,
    huffman: Option<HuffmanDecoder>,
    /// Raw Huffman bytes and what they decoded to, replaced in turn.
    decoded: Vec<(Vec<u8>, Vec<u8>)>,
    next: usize,
    /// The `grpc-status` of the last block decoded, if it had one.
    grpc: Option<u32>,
}

/// The status of a header block, if it carries one.
pub(crate) type Status = Option<u16>;

impl Decoder {
    pub(crate) fn new() -> Self {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: 4096,
            limit: 4096,
            huffman: None,
            decoded: Vec::new(),
            next: 0,
            grpc: None,
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let (_, size) = self.table.pop_back().expect("size counts the entries");
            self.size -= size;
        }
    }

    fn insert(&mut self, e: Entry, value_len: usize) {
        let size = entry_size(e.name_len, value_len);
        // An entry larger than the table empties it (RFC 7541, 4.4).
        self.evict_to(self.max.saturating_sub(size));
        if size <= self.max {
            self.size += size;
            self.table.push_front((e, size));
        }
    }

    /// The entry at `index` (1-based, static then dynamic).
    fn get(&self, index: usize) -> Result<Entry, Malformed> {
        match index {
            0 => Err(Malformed),
            1..=61 => {
                let (name, value) = STATIC[index - 1];
                Ok(Entry {
                    name_len: name.len(),
                    status: (name == b":status")
                        .then(|| parse_status(value))
                        .transpose()?,
                    grpc: None,
                })
            }
            _ => self.table.get(index - 62).map(|&(e, _)| e).ok_or(Malformed),
        }
    }

    /// The text of a string literal (decoded when Huffman-coded).
    fn text<'a>(&'a mut self, raw: &'a [u8], huffman: bool) -> Result<&'a [u8], Malformed> {
        if !huffman {
            return Ok(raw);
        }
        if let Some(i) = self.decoded.iter().position(|(r, _)| r == raw) {
            return Ok(&self.decoded[i].1);
        }
        let text = self
            .huffman
            .get_or_insert_with(HuffmanDecoder::new)
            .decode(raw)
            .map_err(|_| Malformed)?;
        let i = if self.decoded.len() < DECODED {
            self.decoded.push((raw.to_vec(), text));
            self.decoded.len() - 1
        } else {
            let i = self.next;
            self.next = (i + 1) % DECODED;
            self.decoded[i] = (raw.to_vec(), text);
            i
        };
        Ok(&self.decoded[i].1)
    }

    /// A literal's name (at `block[*at]` when `index` is 0): its length and
    /// whether it is `:status` or `grpc-status`.
    fn name(
        &mut self,
        block: &[u8],
        at: &mut usize,
        index: usize,
    ) -> Result<(usize, Name), Malformed> {
        if index == 0 {
            let (raw, h) = string(block, at)?;
            let name = self.text(raw, h)?;
            let kind = match name {
                b":status" => Name::Status,
                b"grpc-status" => Name::GrpcStatus,
                _ => Name::Other,
            };
            return Ok((name.len(), kind));
        }
        let e = self.get(index)?;
        let kind = if e.status.is_some() {
            Name::Status
        } else if e.grpc.is_some() {
            Name::GrpcStatus
        } else {
            Name::Other
        };
        Ok((e.name_len, kind))
    }

    /// The `grpc-status` of the block [`Decoder::decode`] read last (a
    /// gRPC answer's trailers, or a trailers-only answer's head); a value
    /// that is not a number reads as UNKNOWN (2).
    pub(crate) fn grpc_status(&self) -> Option<u32> {
        self.grpc
    }

    /// Decode one header block, keeping the table in step, and return its
    /// `:status` (a response's head has one; trailers do not).
    pub(crate) fn decode(&mut self, block: &[u8]) -> Result<Status, Malformed> {
        let mut status = None;
        let mut at = 0;
        let mut fields = false;
        self.grpc = None;
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                let e = self.get(integer(block, &mut at, 7)?)?;
                if let Some(s) = e.status {
                    status = Some(s);
                }
                if e.grpc.is_some() {
                    self.grpc = e.grpc;
                }
            } else if b & 0xc0 == 0x40 {
                let index = integer(block, &mut at, 6)?;
                let (name_len, kind) = self.name(block, &mut at, index)?;
                let (raw, h) = string(block, &mut at)?;
                let value = self.text(raw, h)?;
                let value_len = value.len();
                let code = if kind == Name::Status {
                    Some(parse_status(value)?)
                } else {
                    None
                };
                let grpc = (kind == Name::GrpcStatus).then(|| grpc_code(value));
                if code.is_some() {
                    status = code;
                }
                if grpc.is_some() {
                    self.grpc = grpc;
                }
                self.insert(
                    Entry {
                        name_len,
                        status: code,
                        grpc,
                    },
                    value_len,
                );
            } else if b & 0xe0 == 0x20 {
                // A size update comes before the first field.
                let max = integer(block, &mut at, 5)?;
                if fields || max > self.limit {
                    return Err(Malformed);
                }
                self.max = max;
                self.evict_to(max);
                continue;
            } else {
                // Literal without indexing (0000) or never indexed (0001).
                let index = integer(block, &mut at, 4)?;
                let (_, kind) = self.name(block, &mut at, index)?;
                let (raw, h) = string(block, &mut at)?;
                match kind {
                    Name::Status => status = Some(parse_status(self.text(raw, h)?)?),
                    Name::GrpcStatus => self.grpc = Some(grpc_code(self.text(raw, h)?)),
                    Name::Other => {}
                }
            }
            fields = true;
        }
        Ok(status)
    }
}

/// What the decoder keeps of a table entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    name_len: usize,
    status: Option<u16>,
    /// Its value when its name is `grpc-status`.
    grpc: Option<u32>,
}

/// The names whose values the decoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Status,
    GrpcStatus,
    Other,
}

/// A `grpc-status` value; one that is not a number is UNKNOWN (2).
fn grpc_code(v: &[u8]) -> u32 {
    crate::contract::grpc::parse_status(v).unwrap_or(2)
}

fn parse_status(v: &[u8]) -> Result<u16, Malformed> {
    match v {
        [a, b, c] if v.iter().all(u8::is_ascii_digit) => {
            Ok((a - b'0') as u16 * 100 + (b - b'0') as u16 * 10 + (c - b'0') as u16)
        }
        _ => Err(Malformed),
    }
}

/// The request encoder's dynamic table: entries are only ever added while
/// they fit, so an entry's index is fixed by how many came after it.
pub(crate) struct Encoder {
    /// Oldest first.
    table: Vec<(Vec<u8>, Vec<u8>)>,
    size: usize,
    /// The server's SETTINGS_HEADER_TABLE_SIZE.
    max: usize,
    /// The server changed the table's size: the next block starts with a
    /// size update (two when the table had to be emptied: 0, then the new
    /// size).
    update: Option<(bool, usize)>,
}

impl Encoder {
    pub(crate) fn new() -> Self {
        Encoder {
            table: Vec::new(),
            size: 0,
            max: 4096,
            update: None,
        }
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE (at most 4,096 is used).
    /// A change is said at the start of the next block (RFC 7541, 4.2);
    /// shrinking below what the table holds empties it first.
    pub(crate) fn set_max(&mut self, max: usize) {
        let max = max.min(4096);
        if max == self.max {
            return;
        }
        let empty = max < self.size;
        if empty {
            self.table.clear();
            self.size = 0;
        }
        let emptied = self.update.is_some_and(|(e, _)| e);
        self.update = Some((empty || emptied, max));
        self.max = max;
    }

    /// Append the header block of a request to `out`: pseudo-headers, then
    /// `headers` (lower-case names, none connection-specific).
    pub(crate) fn encode(
        &mut self,
        out: &mut Vec<u8>,
        method: &[u8],
        https: bool,
        authority: &[u8],
        path: &[u8],
        headers: &[(Vec<u8>, Vec<u8>)],
    ) {
        if let Some((empty, max)) = self.update.take() {
            if empty {
                put_integer(out, 0x20, 5, 0);
            }
            put_integer(out, 0x20, 5, max);
        }
        match method {
            b"GET" => out.push(0x82),
            b"POST" => out.push(0x83),
            m => {
                put_integer(out, 0, 4, 2);
                put_string(out, m);
            }
        }
        out.push(if https { 0x87 } else { 0x86 });
        if path == b"/" {
            out.push(0x84);
        } else {
            put_integer(out, 0, 4, 4);
            put_string(out, path);
        }
        self.field(out, b":authority", authority);
        for (n, v) in headers {
            self.field(out, n, v);
        }
    }

    fn field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        let len = self.table.len();
        if let Some(i) = self.table.iter().position(|(n, v)| n == name && v == value) {
            put_integer(out, 0x80, 7, 62 + (len - 1 - i));
            return;
        }
        let size = entry_size(name.len(), value.len());
        let varies = name == b"content-length";
        if !varies && self.size + size <= self.max {
            out.push(0x40);
            self.table.push((name.to_vec(), value.to_vec()));
            self.size += size;
        } else {
            out.push(0x00);
        }
        put_string(out, name);
        put_string(out, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7541, C.3: three requests without Huffman coding, one decoder.
    #[test]
    fn decodes_the_rfc_examples_and_keeps_the_table() {
        let mut d = Decoder::new();
        let first = hex("828684410f7777772e6578616d706c652e636f6d");
        assert_eq!(d.decode(&first), Ok(None));
        assert_eq!(d.size, 57);
        let second = hex("828684be58086e6f2d6361636865");
        assert_eq!(d.decode(&second), Ok(None));
        assert_eq!(d.size, 110);
        // cache-control: no-cache, then :authority: www.example.com.
        assert_eq!(d.table.iter().map(|e| e.1).collect::<Vec<_>>(), [53, 57]);
        assert_eq!(d.get(63).unwrap().name_len, 10);
        // C.4.1: the same first request, Huffman-coded, and again: decoded
        // once.
        let mut h = Decoder::new();
        let huffman = hex("828684418cf1e3c2e5f23a6ba0ab90f4ff");
        assert_eq!(h.decode(&huffman), Ok(None));
        assert_eq!(h.decode(&huffman), Ok(None));
        assert_eq!(h.size, 114);
        assert_eq!(h.decoded.len(), 1);
        assert_eq!(h.decoded[0].1, b"www.example.com");
    }

    /// RFC 7541, C.6.1: a Huffman-coded response inserting every field into
    /// a 256-byte table, then C.6.2, which evicts one.
    #[test]
    fn reads_the_status_of_huffman_coded_responses_with_eviction() {
        let mut d = Decoder::new();
        d.max = 256;
        let r1 = hex(
            "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
        );
        assert_eq!(d.decode(&r1), Ok(Some(302)));
        assert_eq!(d.size, 222);
        let r2 = hex("4883640effc1c0bf");
        assert_eq!(d.decode(&r2), Ok(Some(307)));
        assert_eq!(d.size, 222);
        assert_eq!(d.get(62).unwrap().status, Some(307));
        assert_eq!(d.get(65).unwrap().status, None);
        // Indexed: the entry's status.
        assert_eq!(d.decode(&[0xbe]), Ok(Some(307)));
    }

    /// gRPC's trailers: `grpc-status` as a new literal name inserted into
    /// the table (as Go's and C's encoders do), then as an indexed field;
    /// never indexed; a value that is not a number; and a block without
    /// it clears the last one's.
    #[test]
    fn reads_grpc_status_however_the_server_encodes_it() {
        let mut d = Decoder::new();
        // Literal with incremental indexing, new name: grpc-status: 0.
        let mut block = vec![0x40, 11];
        block.extend_from_slice(b"grpc-status");
        block.extend_from_slice(&[1, b'0']);
        assert_eq!(d.decode(&block), Ok(None));
        assert_eq!(d.grpc_status(), Some(0));
        // The same field again, indexed (62: the newest entry).
        assert_eq!(d.decode(&[0xbe]), Ok(None));
        assert_eq!(d.grpc_status(), Some(0));
        // A head with :status 200 alone: no grpc-status.
        assert_eq!(d.decode(&[0x88]), Ok(Some(200)));
        assert_eq!(d.grpc_status(), None);
        // Its name indexed (62), a new value without indexing: 12.
        assert_eq!(d.decode(&[0x0f, 0x2f, 2, b'1', b'2']), Ok(None));
        assert_eq!(d.grpc_status(), Some(12));
        // Never indexed, a literal name, a value that is not a number:
        // UNKNOWN.
        let mut block = vec![0x10, 11];
        block.extend_from_slice(b"grpc-status");
        block.extend_from_slice(&[2, b'o', b'k']);
        assert_eq!(d.decode(&block), Ok(None));
        assert_eq!(d.grpc_status(), Some(2));
    }

    #[test]
    fn skips_values_it_need_not_read_and_refuses_malformed_blocks() {
        let mut d = Decoder::new();
        // :status 404 (static), a literal without indexing, never indexed.
        let mut block = vec![0x8d, 0x0f, 0x12, 0x03];
        block.extend_from_slice(b"abc");
        block.extend_from_slice(&[0x10, 0x01, b'x', 0x81, 0xff]);
        assert_eq!(d.decode(&block), Ok(Some(404)));
        assert_eq!(d.size, 0);
        assert_eq!(d.decode(&[0x80]), Err(Malformed)); // index 0
        assert_eq!(d.decode(&[0xbe]), Err(Malformed)); // empty dynamic table
        assert_eq!(d.decode(&[0x0f, 0x12, 0x05, b'a']), Err(Malformed)); // short
        assert_eq!(d.decode(&[0x88, 0x3f, 0xe1, 0x1f]), Err(Malformed)); // late size update
        assert_eq!(d.decode(&[0x3f, 0xe2, 0x1f]), Err(Malformed)); // above 4,096
                                                                   // A literal status.
        assert_eq!(d.decode(&[0x08, 0x03, b'2', b'0', b'1']), Ok(Some(201)));
        assert_eq!(d.decode(&[0x08, 0x02, b'2', b'0']), Err(Malformed));
    }

    #[test]
    fn encoded_requests_decode_to_what_was_encoded() {
        let headers = vec![
            (b"user-agent".to_vec(), b"fairground".to_vec()),
            (b"content-type".to_vec(), b"application/json".to_vec()),
            (b"content-length".to_vec(), b"7".to_vec()),
        ];
        let mut e = Encoder::new();
        let mut d = loona_hpack::Decoder::new();
        for (method, path) in [
            (&b"GET"[..], &b"/"[..]),
            (b"POST", b"/echo"),
            (b"PUT", b"/x/1"),
        ] {
            let mut block = Vec::new();
            e.encode(&mut block, method, false, b"127.0.0.1:8080", path, &headers);
            let got = d.decode(&block).unwrap();
            let want: Vec<(Vec<u8>, Vec<u8>)> = [
                (&b":method"[..], method),
                (b":scheme", b"http"),
                (b":path", path),
                (b":authority", b"127.0.0.1:8080"),
            ]
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .chain(headers.iter().cloned())
            .collect();
            assert_eq!(got, want);
        }
        // Once indexed, a constant field is one byte.
        let mut block = Vec::new();
        e.encode(
            &mut block,
            b"GET",
            true,
            b"127.0.0.1:8080",
            b"/",
            &headers[..2],
        );
        assert_eq!(block, [0x82, 0x87, 0x84, 0x80 | 64, 0x80 | 63, 0x80 | 62]);
        // A smaller table from the server that still holds ours: said.
        e.set_max(2048);
        let mut block = Vec::new();
        e.encode(&mut block, b"GET", false, b"127.0.0.1:8080", b"/", &[]);
        assert_eq!(block, [0x3f, 0xe1, 0x0f, 0x82, 0x86, 0x84, 0x80 | 64]);
        // One that does not: ours is emptied, and that is said too.
        e.set_max(16);
        let mut block = Vec::new();
        e.encode(&mut block, b"GET", false, b"a", b"/", &[]);
        assert_eq!(&block[..2], [0x20, 0x30]);
        let mut d = loona_hpack::Decoder::new();
        assert!(d.decode(&block).is_ok());
        // Unchanged: nothing said.
        e.set_max(16);
        let mut block = Vec::new();
        e.encode(&mut block, b"GET", false, b"a", b"/", &[]);
        assert_eq!(block[0], 0x82);
    }

    #[test]
    fn integers_round_trip_across_prefixes() {
        for n in [4, 5, 6, 7] {
            for v in [
                0,
                1,
                14,
                15,
                30,
                31,
                62,
                63,
                126,
                127,
                128,
                1337,
                4096,
                1 << 20,
            ] {
                let mut out = Vec::new();
                put_integer(&mut out, 0, n, v);
                let mut at = 0;
                assert_eq!(integer(&out, &mut at, n), Ok(v), "{v} with {n} bits");
                assert_eq!(at, out.len());
            }
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
