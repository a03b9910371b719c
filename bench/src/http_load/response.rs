//! HTTP/1.1 response parsing, sans-I/O: [`ResponseParser`] reads one response at a time from the
//! bytes given (status line, `Content-Length` or chunked bodies with trailers, a body delimited by
//! the close, interim `1xx` answers, `HEAD`, `204` and `304`, `Connection: close` and HTTP/1.0
//! keep-alive rules) and holds no bytes itself.

/// A complete response.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    /// The server closes the connection after it.
    pub(super) close: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
enum State {
    /// Reading a status line and headers.
    #[default]
    Head,
    /// `Content-Length` bytes still to come.
    Body(u64),
    /// A chunk-size line.
    ChunkSize,
    /// Chunk data still to come.
    ChunkData(u64),
    /// The CRLF after chunk data.
    ChunkEnd,
    /// Trailer lines up to the empty one.
    Trailers,
    /// The body ends when the server closes the connection.
    UntilClose,
}

/// Parses one response at a time from the bytes given; holds no bytes itself.
#[derive(Clone, Debug, Default)]
pub(super) struct ResponseParser {
    state: State,
    status: u16,
    close: bool,
    /// Bytes of the unparsed input already searched for the end of the head.
    scanned: usize,
    /// A byte of this response has been seen.
    pub(super) seen: bool,
}

impl ResponseParser {
    /// Parses as much of `input` as it can: returns the bytes used and the answer once one is
    /// complete (then the parser is ready for the next response; the bytes after it are not
    /// used). An error means the connection cannot be trusted any more.
    pub(super) fn advance(&mut self, input: &[u8], head_only: bool) -> Result<(usize, Option<Answer>), &'static str> {
        let mut used = 0;
        self.seen |= !input.is_empty();
        loop {
            let rest = &input[used..];
            match self.state {
                State::Head => {
                    let from = self.scanned.saturating_sub(3);
                    let Some(at) = find(&rest[from.min(rest.len())..], b"\r\n\r\n").map(|i| i + from) else {
                        self.scanned = rest.len();
                        return Ok((used, None));
                    };
                    self.scanned = 0;
                    let head = parse_head(&rest[..at])?;
                    used += at + 4;
                    self.status = head.status;
                    self.close = head.close;
                    if (100..200).contains(&head.status) {
                        if head.status == 101 {
                            return Err("101 Switching Protocols is not HTTP/1.1 any more");
                        }
                        // An interim answer: the real one follows.
                        continue;
                    }
                    self.state = if head_only || head.status == 204 || head.status == 304 {
                        return Ok((used, Some(self.done())));
                    } else if head.chunked {
                        State::ChunkSize
                    } else if head.other_coding {
                        self.close = true;
                        State::UntilClose
                    } else {
                        match head.content_length {
                            Some(0) => return Ok((used, Some(self.done()))),
                            Some(n) => State::Body(n),
                            None => {
                                self.close = true;
                                State::UntilClose
                            }
                        }
                    };
                }
                State::Body(left) => {
                    let take = left.min(rest.len() as u64);
                    used += take as usize;
                    if take == left {
                        return Ok((used, Some(self.done())));
                    }
                    self.state = State::Body(left - take);
                    return Ok((used, None));
                }
                State::ChunkSize => {
                    let Some(at) = find(rest, b"\r\n") else { return Ok((used, None)) };
                    let size = chunk_size(&rest[..at])?;
                    used += at + 2;
                    self.state = if size == 0 { State::Trailers } else { State::ChunkData(size) };
                }
                State::ChunkData(left) => {
                    let take = left.min(rest.len() as u64);
                    used += take as usize;
                    if take < left {
                        self.state = State::ChunkData(left - take);
                        return Ok((used, None));
                    }
                    self.state = State::ChunkEnd;
                }
                State::ChunkEnd => {
                    if rest.len() < 2 {
                        return Ok((used, None));
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err("chunk data not followed by CRLF");
                    }
                    used += 2;
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(at) = find(rest, b"\r\n") else { return Ok((used, None)) };
                    used += at + 2;
                    if at == 0 {
                        return Ok((used, Some(self.done())));
                    }
                }
                State::UntilClose => return Ok((input.len(), None)),
            }
        }
    }

    /// The connection was closed: the status of a response that ends there, or an error.
    pub(super) fn on_eof(&mut self) -> Result<u16, &'static str> {
        match self.state {
            State::UntilClose => Ok(self.done().status),
            State::Head if !self.seen => Err("closed before answering"),
            _ => Err("closed in the middle of a response"),
        }
    }

    fn done(&mut self) -> Answer {
        let answer = Answer { status: self.status, close: self.close };
        *self = ResponseParser::default();
        answer
    }
}

/// What a response head says about framing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Head {
    status: u16,
    close: bool,
    content_length: Option<u64>,
    chunked: bool,
    /// A transfer coding other than a final `chunked`: the body runs to the close.
    other_coding: bool,
}

/// Parses a response head (without its final CRLF CRLF).
fn parse_head(head: &[u8]) -> Result<Head, &'static str> {
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().ok_or("empty head")?;
    let http10 = match status_line.get(..9) {
        Some(b"HTTP/1.1 ") => false,
        Some(b"HTTP/1.0 ") => true,
        _ => return Err("not an HTTP/1.x status line"),
    };
    let code = status_line.get(9..12).ok_or("short status line")?;
    if !code.iter().all(u8::is_ascii_digit) || status_line.get(12).is_some_and(|&b| b != b' ') {
        return Err("malformed status code");
    }
    let status = code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    let mut h = Head { status, close: false, content_length: None, chunked: false, other_coding: false };
    let (mut close, mut keep_alive) = (false, false);
    for line in lines {
        if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
            return Err("folded header line");
        }
        let colon = line.iter().position(|&b| b == b':').ok_or("header line without a colon")?;
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.is_empty() || name.iter().any(|&b| b == b' ' || b == b'\t') {
            return Err("malformed header name");
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
                return Err("malformed Content-Length");
            }
            let n = value.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
            if h.content_length.is_some_and(|m| m != n) {
                return Err("conflicting Content-Length");
            }
            h.content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = value.rsplit(|&b| b == b',').next().map(trim).unwrap_or_default();
            if last.eq_ignore_ascii_case(b"chunked") {
                h.chunked = true;
                h.other_coding = false;
            } else {
                h.chunked = false;
                h.other_coding = true;
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    h.close = close || (http10 && !keep_alive);
    Ok(h)
}

/// A chunk-size line: hex digits, then optional extensions after `;`.
fn chunk_size(line: &[u8]) -> Result<u64, &'static str> {
    let digits = trim(line.split(|&b| b == b';').next().unwrap_or_default());
    if digits.is_empty() || digits.len() > 15 {
        return Err("malformed chunk size");
    }
    digits.iter().try_fold(0u64, |n, &d| {
        let v = (d as char).to_digit(16).ok_or("malformed chunk size")?;
        Ok(n * 16 + u64::from(v))
    })
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes like a socket would, keeping unparsed bytes.
    fn feed(input: &[u8], step: usize, head_only: bool) -> Result<Vec<Answer>, &'static str> {
        let mut p = ResponseParser::default();
        let mut pending: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        for piece in input.chunks(step.max(1)) {
            pending.extend_from_slice(piece);
            loop {
                let (used, done) = p.advance(&pending, head_only)?;
                pending.drain(..used);
                match done {
                    Some(a) => out.push(a),
                    None => break,
                }
            }
        }
        assert!(pending.is_empty(), "bytes left: {:?}", String::from_utf8_lossy(&pending));
        Ok(out)
    }

    #[test]
    fn content_length_chunked_and_interim_answers() {
        let input = concat!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: y\r\n\r\n",
            "HTTP/1.1 204 No Content\r\n\r\n",
            "HTTP/1.1 503 Busy\r\nContent-Length: 2\r\nConnection: keep-alive, close\r\n\r\nno",
        );
        for step in [1, 2, 3, 7, 64, 4096] {
            let answers = feed(input.as_bytes(), step, false).expect("parses");
            let statuses: Vec<(u16, bool)> = answers.iter().map(|a| (a.status, a.close)).collect();
            assert_eq!(statuses, [(200, false), (404, false), (200, false), (204, false), (503, true)], "step {step}");
        }
    }

    #[test]
    fn head_answers_and_http10() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n";
        let a = feed(head.as_bytes(), 5, true).expect("parses");
        assert_eq!(a, [Answer { status: 200, close: false }]);
        let old = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(feed(old.as_bytes(), 3, false).expect("parses"), [Answer { status: 200, close: true }]);
        let kept = "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(feed(kept.as_bytes(), 3, false).expect("parses"), [Answer { status: 200, close: false }]);
    }

    #[test]
    fn body_until_close() {
        let mut p = ResponseParser::default();
        let input = b"HTTP/1.1 200 OK\r\n\r\nsome body";
        let (used, done) = p.advance(input, false).expect("parses");
        assert_eq!((used, done), (input.len(), None));
        assert_eq!(p.on_eof(), Ok(200));
        let mut q = ResponseParser::default();
        assert!(q.on_eof().is_err(), "closed before answering");
        let (_, done) = q.advance(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", false).expect("parses");
        assert_eq!(done, None);
        assert!(q.on_eof().is_err(), "closed mid-body");
    }

    #[test]
    fn malformed_responses_are_errors() {
        for bad in [
            "HTTP/2 200 OK\r\n\r\n",
            "HTTP/1.1 20 OK\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
            "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        ] {
            assert!(feed(bad.as_bytes(), 4096, false).is_err(), "{bad:?}");
        }
    }
}
