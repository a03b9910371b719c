//! A WebSocket client codec (RFC 6455), sans-I/O: the opening handshake, server frames parsed
//! in place in a reused buffer, and masked client frames written into a reused buffer.
//!
//! Rationale: venue frames are decoded where they land, on the shard that owns the pair, with
//! no allocation per message. General WebSocket crates hand out an owned buffer per message;
//! this codec hands out a slice of its own read buffer instead. It is the client half only, with
//! no extensions (no permessage-deflate is offered, so none can be negotiated) and a bound on
//! every buffer: a message larger than [`WsCodec`]'s `message_bytes_max` is a protocol error
//! (the caller closes with 1009 and reconnects).

use base64::Engine as _;
use sha1::{Digest, Sha1};

/// The GUID of RFC 6455 §1.3, appended to the key to form the accept hash.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// Bytes of a handshake response head at most; a longer head is refused.
pub const HANDSHAKE_HEAD_BYTES_MAX: usize = 16 * 1024;
/// Control frame payloads are at most 125 bytes (RFC 6455 §5.5).
const CONTROL_PAYLOAD_MAX: usize = 125;

/// Why a connection cannot go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsError {
    /// The handshake response was not a valid `101 Switching Protocols` for our key.
    Handshake(String),
    /// The server broke the framing rules (masked frame, bad opcode, bad control frame, ...).
    Protocol(&'static str),
    /// A message exceeded the configured bound.
    TooBig {
        /// Its length so far, bytes.
        len: usize,
    },
    /// A text message was not UTF-8.
    NotUtf8,
}

impl std::fmt::Display for WsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WsError::Handshake(why) => write!(f, "WebSocket handshake refused: {why}"),
            WsError::Protocol(why) => write!(f, "WebSocket protocol error: {why}"),
            WsError::TooBig { len } => write!(f, "WebSocket message too big ({len} bytes)"),
            WsError::NotUtf8 => write!(f, "WebSocket text message is not UTF-8"),
        }
    }
}

impl std::error::Error for WsError {}

/// The parts of a `ws://` or `wss://` URL a client needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsUrl {
    /// `wss://`.
    pub tls: bool,
    /// Host name or address, without brackets.
    pub host: String,
    /// Port (default 80 or 443).
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

/// Why a WebSocket URL was refused (each variant holds the URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsUrlError {
    /// Not `ws://` or `wss://`.
    Scheme(String),
    /// A missing or malformed host or port.
    Authority(String),
}

impl std::fmt::Display for WsUrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WsUrlError::Scheme(u) => write!(f, "'{u}' is not a ws:// or wss:// URL"),
            WsUrlError::Authority(u) => write!(f, "'{u}' has an invalid host or port"),
        }
    }
}

impl std::error::Error for WsUrlError {}

impl WsUrl {
    /// Parses `ws://host[:port]/path?query` or `wss://...`.
    pub fn parse(url: &str) -> Result<WsUrl, WsUrlError> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("wss://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("ws://") {
            (false, r)
        } else {
            return Err(WsUrlError::Scheme(url.to_owned()));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_host_port(authority, if tls { 443 } else { 80 })
            .ok_or_else(|| WsUrlError::Authority(url.to_owned()))?;
        Ok(WsUrl { tls, host, port, path: path.to_owned() })
    }

    /// `host` or `host:port` as the `Host` header wants it.
    pub fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// Splits `host[:port]` (IPv6 in brackets); `None` when malformed.
pub fn split_host_port(authority: &str, default_port: u16) -> Option<(String, u16)> {
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = &rest[..end];
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.contains(':') => Some((h.to_owned(), p.parse().ok()?)),
        Some(_) => None,
        None => Some((authority.to_owned(), default_port)),
    }
}

/// The opening handshake: the request to send and the check of the answer.
#[derive(Clone, Debug)]
pub struct Handshake {
    key: String,
}

impl Handshake {
    /// A handshake with a key made from 16 random bytes.
    pub fn new(random16: [u8; 16]) -> Handshake {
        Handshake { key: base64::engine::general_purpose::STANDARD.encode(random16) }
    }

    /// The request head for `url`.
    pub fn request(&self, url: &WsUrl, user_agent: &str) -> Vec<u8> {
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: {}\r\n\r\n",
            url.path,
            url.authority(),
            self.key,
            user_agent
        )
        .into_bytes()
    }

    /// The `Sec-WebSocket-Accept` value the server must send back.
    pub fn expected_accept(&self) -> String {
        let mut h = Sha1::new();
        h.update(self.key.as_bytes());
        h.update(ACCEPT_GUID);
        base64::engine::general_purpose::STANDARD.encode(h.finalize())
    }

    /// Looks for a complete response head in `buf`. `Ok(None)`: not complete yet;
    /// `Ok(Some(n))`: accepted, the head is `buf[..n]` and what follows is frame data.
    pub fn check_response(&self, buf: &[u8]) -> Result<Option<usize>, WsError> {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            if buf.len() > HANDSHAKE_HEAD_BYTES_MAX {
                return Err(WsError::Handshake("response head too long".into()));
            }
            return Ok(None);
        };
        let head = std::str::from_utf8(&buf[..end]).map_err(|_| WsError::Handshake("head is not UTF-8".into()))?;
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap_or_default();
        let mut parts = status.splitn(3, ' ');
        let (version, code) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        if !version.starts_with("HTTP/1.") {
            return Err(WsError::Handshake(format!("not an HTTP response: '{status}'")));
        }
        if code != "101" {
            return Err(WsError::Handshake(format!("status {code} instead of 101 ('{status}')")));
        }
        let (mut upgrade, mut connection, mut accept) = (false, false, None);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "upgrade" => upgrade = value.eq_ignore_ascii_case("websocket"),
                "connection" => connection = value.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade")),
                "sec-websocket-accept" => accept = Some(value.to_owned()),
                "sec-websocket-extensions" if !value.is_empty() => {
                    return Err(WsError::Handshake("the server chose an extension we did not offer".into()))
                }
                _ => {}
            }
        }
        if !upgrade || !connection {
            return Err(WsError::Handshake("missing Upgrade: websocket / Connection: Upgrade".into()));
        }
        if accept.as_deref() != Some(self.expected_accept().as_str()) {
            return Err(WsError::Handshake("wrong Sec-WebSocket-Accept".into()));
        }
        Ok(Some(end + 4))
    }
}

/// Frame opcodes (RFC 6455 §5.2).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Opcode {
    /// Continuation of a fragmented message.
    Continuation,
    /// UTF-8 text.
    Text,
    /// Binary.
    Binary,
    /// Close.
    Close,
    /// Ping.
    Ping,
    /// Pong.
    Pong,
}

impl Opcode {
    fn from_bits(b: u8) -> Option<Opcode> {
        Some(match b {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }
}

/// What the reader found in the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A whole text message (borrowed from the codec's buffers).
    Text(&'a [u8]),
    /// A whole binary message.
    Binary(&'a [u8]),
    /// A ping: answer with a pong carrying the same payload ([`WsCodec::pong`]).
    Ping(&'a [u8]),
    /// A pong (ignored, but it shows the connection is alive).
    Pong,
    /// The server closes: its status code (1005 when none) and reason.
    Close {
        /// Close code.
        code: u16,
        /// Reason text, raw.
        reason: &'a [u8],
    },
}

/// Reads server frames from a bounded buffer and writes masked client frames.
///
/// Use: [`WsCodec::read_space`] gives the free tail of the read buffer to read the socket into,
/// [`WsCodec::filled`] records what was read, [`WsCodec::next_event`] yields events until it needs
/// more bytes. Bounds: the read buffer holds `message_bytes_max` plus one frame header; a
/// fragmented message is assembled in a second buffer of `message_bytes_max`. Both are
/// allocated in [`WsCodec::new`].
#[derive(Debug)]
pub struct WsCodec {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes of the frame handed out by the last `next`, released at the next call.
    consumed: usize,
    frag: Vec<u8>,
    frag_opcode: Option<Opcode>,
    message_bytes_max: usize,
    out: Vec<u8>,
    mask_state: u64,
}

/// Largest frame header: 2 + 8 bytes of length + 4 bytes of mask.
const HEADER_BYTES_MAX: usize = 14;

impl WsCodec {
    /// A codec for messages of at most `message_bytes_max` bytes; `mask_seed` seeds the masking
    /// keys of client frames.
    pub fn new(message_bytes_max: usize, mask_seed: u64) -> WsCodec {
        WsCodec {
            buf: vec![0; message_bytes_max + HEADER_BYTES_MAX],
            start: 0,
            end: 0,
            consumed: 0,
            frag: Vec::with_capacity(message_bytes_max),
            frag_opcode: None,
            message_bytes_max,
            out: Vec::with_capacity(1024),
            mask_state: mask_seed | 1,
        }
    }

    /// Drops every buffered byte (a new connection).
    pub fn reset(&mut self) {
        self.start = 0;
        self.end = 0;
        self.consumed = 0;
        self.frag.clear();
        self.frag_opcode = None;
    }

    /// Puts bytes already read (what followed the handshake head) in front of the buffer.
    pub fn preload(&mut self, bytes: &[u8]) -> Result<(), WsError> {
        self.reset();
        if bytes.len() > self.buf.len() {
            return Err(WsError::TooBig { len: bytes.len() });
        }
        self.buf[..bytes.len()].copy_from_slice(bytes);
        self.end = bytes.len();
        Ok(())
    }

    /// The free tail of the read buffer (compacting first). Never empty: a buffer that is full
    /// without a whole frame in it is reported by [`WsCodec::next_event`] as [`WsError::TooBig`].
    pub fn read_space(&mut self) -> &mut [u8] {
        self.release();
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were read into [`WsCodec::read_space`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    fn release(&mut self) {
        self.start += self.consumed;
        self.consumed = 0;
    }

    /// The next event, `Ok(None)` when more bytes are needed.
    // Long: RFC 6455 frame parsing in one pass over the buffer (header, length forms, masking,
    // control frames, fragments), kept together so each check sits next to the byte it reads.
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, WsError> {
        self.release();
        loop {
            let avail = &self.buf[self.start..self.end];
            if avail.len() < 2 {
                return self.need_more();
            }
            let (b0, b1) = (avail[0], avail[1]);
            let fin = b0 & 0x80 != 0;
            if b0 & 0x70 != 0 {
                return Err(WsError::Protocol("reserved bits set"));
            }
            let opcode = Opcode::from_bits(b0 & 0x0F).ok_or(WsError::Protocol("unknown opcode"))?;
            if b1 & 0x80 != 0 {
                return Err(WsError::Protocol("a server frame is masked"));
            }
            let (len, header) = match b1 & 0x7F {
                126 => {
                    if avail.len() < 4 {
                        return self.need_more();
                    }
                    (u64::from(u16::from_be_bytes([avail[2], avail[3]])), 4)
                }
                127 => {
                    if avail.len() < 10 {
                        return self.need_more();
                    }
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&avail[2..10]);
                    (u64::from_be_bytes(b), 10)
                }
                n => (u64::from(n), 2),
            };
            let is_control = matches!(opcode, Opcode::Close | Opcode::Ping | Opcode::Pong);
            if is_control && (!fin || len > CONTROL_PAYLOAD_MAX as u64) {
                return Err(WsError::Protocol("fragmented or oversized control frame"));
            }
            if len > self.message_bytes_max as u64 {
                return Err(WsError::TooBig { len: usize::try_from(len).unwrap_or(usize::MAX) });
            }
            let len = len as usize;
            if avail.len() < header + len {
                return self.need_more();
            }
            let payload_start = self.start + header;
            let payload_end = payload_start + len;
            self.consumed = header + len;
            match opcode {
                Opcode::Ping => return Ok(Some(Event::Ping(&self.buf[payload_start..payload_end]))),
                Opcode::Pong => return Ok(Some(Event::Pong)),
                Opcode::Close => {
                    let p = &self.buf[payload_start..payload_end];
                    return Ok(Some(match p.len() {
                        0 => Event::Close { code: 1005, reason: b"" },
                        1 => return Err(WsError::Protocol("close payload of one byte")),
                        _ => Event::Close { code: u16::from_be_bytes([p[0], p[1]]), reason: &p[2..] },
                    }));
                }
                Opcode::Text | Opcode::Binary => {
                    if self.frag_opcode.is_some() {
                        return Err(WsError::Protocol("new message inside a fragmented one"));
                    }
                    if fin {
                        let p = &self.buf[payload_start..payload_end];
                        return Ok(Some(if opcode == Opcode::Text {
                            if std::str::from_utf8(p).is_err() {
                                return Err(WsError::NotUtf8);
                            }
                            Event::Text(p)
                        } else {
                            Event::Binary(p)
                        }));
                    }
                    self.frag.clear();
                    self.frag.extend_from_slice(&self.buf[payload_start..payload_end]);
                    self.frag_opcode = Some(opcode);
                    self.release();
                }
                Opcode::Continuation => {
                    let Some(first) = self.frag_opcode else {
                        return Err(WsError::Protocol("continuation without a message"));
                    };
                    if self.frag.len() + len > self.message_bytes_max {
                        return Err(WsError::TooBig { len: self.frag.len() + len });
                    }
                    self.frag.extend_from_slice(&self.buf[payload_start..payload_end]);
                    if fin {
                        self.frag_opcode = None;
                        return Ok(Some(if first == Opcode::Text {
                            if std::str::from_utf8(&self.frag).is_err() {
                                return Err(WsError::NotUtf8);
                            }
                            Event::Text(&self.frag)
                        } else {
                            Event::Binary(&self.frag)
                        }));
                    }
                    self.release();
                }
            }
        }
    }

    fn need_more(&mut self) -> Result<Option<Event<'_>>, WsError> {
        if self.start == 0 && self.end == self.buf.len() {
            return Err(WsError::TooBig { len: self.end });
        }
        Ok(None)
    }

    fn mask_key(&mut self) -> [u8; 4] {
        // xorshift64*: masking keys need not be secret, only unpredictable to intermediaries.
        let mut x = self.mask_state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.mask_state = x;
        let k = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (k as u32).to_le_bytes()
    }

    /// Writes one masked client frame into the output buffer and returns it (valid until the
    /// next call).
    pub fn frame(&mut self, opcode: Opcode, payload: &[u8]) -> &[u8] {
        let key = self.mask_key();
        self.out.clear();
        self.out.push(0x80 | opcode.bits());
        let len = payload.len();
        if len < 126 {
            self.out.push(0x80 | len as u8);
        } else if len <= usize::from(u16::MAX) {
            self.out.push(0x80 | 126);
            self.out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            self.out.push(0x80 | 127);
            self.out.extend_from_slice(&(len as u64).to_be_bytes());
        }
        self.out.extend_from_slice(&key);
        let start = self.out.len();
        self.out.extend_from_slice(payload);
        for (i, b) in self.out[start..].iter_mut().enumerate() {
            *b ^= key[i & 3];
        }
        &self.out
    }

    /// A masked text frame.
    pub fn text(&mut self, payload: &[u8]) -> &[u8] {
        self.frame(Opcode::Text, payload)
    }

    /// A masked pong echoing `payload` (at most 125 bytes are echoed).
    pub fn pong(&mut self, payload: &[u8]) -> &[u8] {
        let mut copy = [0u8; CONTROL_PAYLOAD_MAX];
        let n = payload.len().min(CONTROL_PAYLOAD_MAX);
        copy[..n].copy_from_slice(&payload[..n]);
        self.frame(Opcode::Pong, &copy[..n])
    }

    /// A masked close frame with `code`.
    pub fn close(&mut self, code: u16) -> &[u8] {
        self.frame(Opcode::Close, &code.to_be_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server frame (unmasked).
    fn server(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![(if fin { 0x80 } else { 0 }) | opcode];
        if payload.len() < 126 {
            v.push(payload.len() as u8);
        } else if payload.len() <= 65535 {
            v.push(126);
            v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        } else {
            v.push(127);
            v.extend_from_slice(&(payload.len() as u64).to_be_bytes());
        }
        v.extend_from_slice(payload);
        v
    }

    fn feed(c: &mut WsCodec, bytes: &[u8]) {
        let space = c.read_space();
        space[..bytes.len()].copy_from_slice(bytes);
        c.filled(bytes.len());
    }

    #[test]
    fn accept_key_matches_the_rfc_example() {
        // RFC 6455 §1.3: key "dGhlIHNhbXBsZSBub25jZQ==" → "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".
        let h = Handshake { key: "dGhlIHNhbXBsZSBub25jZQ==".into() };
        assert_eq!(h.expected_accept(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        let ok = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\n\r\nXY",
            h.expected_accept()
        );
        assert_eq!(h.check_response(ok.as_bytes()), Ok(Some(ok.len() - 2)));
        assert_eq!(h.check_response(&ok.as_bytes()[..20]), Ok(None));
        let bad = ok.replace("s3pP", "AAAA");
        assert!(matches!(h.check_response(bad.as_bytes()), Err(WsError::Handshake(_))));
        let refused = "HTTP/1.1 503 Service Unavailable\r\n\r\n";
        assert!(matches!(h.check_response(refused.as_bytes()), Err(WsError::Handshake(m)) if m.contains("503")));
        let ext = ok.replace("\r\n\r\n", "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n");
        assert!(h.check_response(ext.as_bytes()).is_err());
        assert!(h.check_response(&vec![b'a'; HANDSHAKE_HEAD_BYTES_MAX + 1]).is_err());
    }

    #[test]
    fn urls_parse() {
        let u = WsUrl::parse("wss://stream.binance.com:9443/stream?streams=a/b").expect("valid");
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.path.as_str()),
            (true, "stream.binance.com", 9443, "/stream?streams=a/b")
        );
        assert_eq!(u.authority(), "stream.binance.com:9443");
        let u = WsUrl::parse("ws://127.0.0.1").expect("valid");
        assert_eq!((u.port, u.path.as_str(), u.authority().as_str()), (80, "/", "127.0.0.1"));
        let u = WsUrl::parse("ws://[::1]:9/x").expect("valid");
        assert_eq!((u.host.as_str(), u.port, u.authority().as_str()), ("::1", 9, "[::1]:9"));
        for bad in ["http://x", "ws://", "ws://a:b", "ws://u@h/", "ws://[::1/x", "ws://:80/"] {
            assert!(WsUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn frames_in_pieces_and_fragments() {
        let mut c = WsCodec::new(1 << 16, 7);
        let mut wire = server(0x1, true, b"{\"a\":1}");
        wire.extend(server(0x9, true, b"hi"));
        wire.extend(server(0x1, false, b"par"));
        wire.extend(server(0xA, true, b""));
        wire.extend(server(0x0, false, b"ti"));
        wire.extend(server(0x0, true, b"al"));
        wire.extend(server(0x2, true, &[0u8; 300]));
        wire.extend(server(0x1, true, &vec![b'x'; 70_000][..65_000]));
        wire.extend(server(0x8, true, &[0x03, 0xE8, b'b', b'y', b'e']));
        let mut got = Vec::new();
        // One byte at a time: every split point is exercised.
        for b in wire {
            feed(&mut c, &[b]);
            while let Some(ev) = c.next_event().expect("valid") {
                got.push(match ev {
                    Event::Text(t) => format!(
                        "text {}",
                        if t.len() > 20 { t.len().to_string() } else { String::from_utf8_lossy(t).into() }
                    ),
                    Event::Binary(b) => format!("binary {}", b.len()),
                    Event::Ping(p) => format!("ping {}", String::from_utf8_lossy(p)),
                    Event::Pong => "pong".into(),
                    Event::Close { code, reason } => format!("close {code} {}", String::from_utf8_lossy(reason)),
                });
            }
        }
        assert_eq!(
            got,
            ["text {\"a\":1}", "ping hi", "pong", "text partial", "binary 300", "text 65000", "close 1000 bye"]
        );
    }

    #[test]
    fn protocol_errors() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0x81, 0x81, 0, 0, 0, 0, b'a'], "masked"),
            (vec![0x83, 0x00], "opcode"),
            (vec![0xC1, 0x00], "reserved"),
            (vec![0x09, 0x00], "fragmented control"),
            (server(0x9, true, &[0; 126]), "oversized control"),
            (server(0x0, true, b"x"), "continuation"),
            (server(0x1, true, &[0xFF, 0xFE]), "utf8"),
            (server(0x8, true, &[3]), "close of one byte"),
            ([server(0x1, false, b"a"), server(0x1, true, b"b")].concat(), "nested"),
        ];
        for (wire, what) in cases {
            let mut c = WsCodec::new(1024, 1);
            feed(&mut c, &wire);
            let mut r = Ok(None);
            for _ in 0..3 {
                r = c.next_event().map(|e| e.map(|_| ()));
                if r.is_err() {
                    break;
                }
            }
            assert!(r.is_err(), "{what}: {r:?}");
        }
    }

    #[test]
    fn bounds_are_enforced() {
        let mut c = WsCodec::new(100, 1);
        feed(&mut c, &server(0x1, true, &[b'a'; 101])[..20]);
        assert_eq!(c.next_event(), Err(WsError::TooBig { len: 101 }));
        let mut c = WsCodec::new(100, 1);
        feed(&mut c, &server(0x1, false, &[b'a'; 60]));
        assert_eq!(c.next_event(), Ok(None), "a first fragment is kept");
        feed(&mut c, &server(0x0, true, &[b'a'; 60]));
        assert!(matches!(c.next_event(), Err(WsError::TooBig { len: 120 })));
        // A 64-bit length that does not fit is too big, not a panic.
        let mut c = WsCodec::new(100, 1);
        feed(&mut c, &[0x81, 127, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        assert!(matches!(c.next_event(), Err(WsError::TooBig { .. })));
    }

    #[test]
    fn client_frames_are_masked_and_unmask_back() {
        let mut c = WsCodec::new(1 << 17, 99);
        for len in [0usize, 5, 125, 126, 65_535, 65_536] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let f = c.text(&payload).to_vec();
            assert_eq!(f[0], 0x81);
            assert!(f[1] & 0x80 != 0, "masked");
            let (n, hdr) = match f[1] & 0x7F {
                126 => (usize::from(u16::from_be_bytes([f[2], f[3]])), 4),
                127 => (u64::from_be_bytes(f[2..10].try_into().expect("8 bytes")) as usize, 10),
                n => (usize::from(n), 2),
            };
            assert_eq!(n, len);
            let key = &f[hdr..hdr + 4];
            let un: Vec<u8> = f[hdr + 4..].iter().enumerate().map(|(i, b)| b ^ key[i & 3]).collect();
            assert_eq!(un, payload);
        }
        assert_eq!(c.close(1000).len(), 2 + 4 + 2);
        assert_eq!(c.pong(&[1u8; 200]).len(), 2 + 4 + 125);
    }
}
