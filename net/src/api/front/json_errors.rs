//! JSON bodies for the errors hyper answers by itself, below the router: a malformed request
//! line or framing (400), a request head over the bounds (431), a URI too long (414), an
//! unsupported version (505). hyper writes those with `content-length: 0` and no way to set a
//! body, so the connection's writer recognises such a head, alone in one write, and sends it
//! with `{"error": "..."}` instead, like every other error the service gives.
//!
//! Rationale: the alternative, parsing request heads ourselves before hyper, would duplicate the
//! part of hyper that the front was chosen for (see docs/design/why-hyper.md). A response the service
//! writes never matches: its errors always carry a body, and a HEAD answer keeps the length of
//! the body it would have had.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};

/// A connection whose bodiless hyper error answers get a JSON error body.
#[derive(Debug)]
pub struct JsonErrors<T> {
    inner: T,
    /// A rewritten answer being written: the bytes, how many are out, and the length of the
    /// write it replaces (reported once all are out).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> JsonErrors<T> {
    /// Wraps a connection.
    pub fn new(inner: T) -> JsonErrors<T> {
        JsonErrors { inner, pending: None }
    }
}

/// The message for a status hyper answers by itself; `None` for any other status.
fn message(status: &[u8]) -> Option<&'static str> {
    Some(match status {
        b"400" => "malformed request",
        b"413" => "request body too large",
        b"414" => "request URI too long",
        b"431" => "request head too large (at most 64 headers and 64 KiB)",
        b"501" => "not implemented",
        b"505" => "HTTP version not supported",
        _ => return None,
    })
}

/// The JSON-bodied form of `buf` if `buf` is exactly one bodiless error head written by hyper.
pub fn rewrite(buf: &[u8]) -> Option<Vec<u8>> {
    if buf.len() < 16 || !(buf.starts_with(b"HTTP/1.1 ") || buf.starts_with(b"HTTP/1.0 ")) {
        return None;
    }
    let text = message(&buf[9..12])?;
    // The head must be the whole write, and declare an empty body.
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    if end + 4 != buf.len() {
        return None;
    }
    let head = &buf[..end];
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next()?;
    let mut empty = false;
    let mut kept: Vec<&[u8]> = Vec::new();
    for line in lines {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with(b"content-length:") {
            empty = lower[15..].trim_ascii() == b"0";
            continue;
        }
        if lower.starts_with(b"content-type:") {
            return None;
        }
        kept.push(line);
    }
    if !empty {
        return None;
    }
    let body = rampart_state::json::error_body(text);
    let mut out = Vec::with_capacity(buf.len() + body.len() + 64);
    out.extend_from_slice(status_line);
    out.extend_from_slice(b"\r\n");
    for line in kept {
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-type: application/json\r\ncontent-length: ");
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body.as_bytes());
    Some(out)
}

impl<T: Read + Unpin> Read for JsonErrors<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> JsonErrors<T> {
    /// Writes what is pending; `Ready(Ok(n))` with the replaced write's length once all is out.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        loop {
            let Some((bytes, done, reported)) = self.pending.as_mut() else { return Poll::Ready(Ok(0)) };
            if *done == bytes.len() {
                let n = *reported;
                self.pending = None;
                return Poll::Ready(Ok(n));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *done += n,
                other => return other,
            }
        }
    }
}

impl<T: Write + Unpin> Write for JsonErrors<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_none() {
            match rewrite(buf) {
                Some(bytes) => this.pending = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        this.drain(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_none() {
            // An error head is written alone: one slice, or the head with empty slices after it.
            let only = bufs.iter().filter(|b| !b.is_empty()).count() == 1;
            match bufs.first().filter(|_| only).and_then(|b| rewrite(b)) {
                Some(bytes) => this.pending = Some((bytes, 0, bufs[0].len())),
                None => return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            }
        }
        this.drain(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(out: &[u8]) -> serde_json::Value {
        let text = String::from_utf8_lossy(out);
        let (_, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        serde_json::from_str(body).expect("JSON")
    }

    #[test]
    fn bodiless_error_heads_get_a_json_body() {
        for (status, message) in [
            ("400 Bad Request", "malformed request"),
            ("431 Request Header Fields Too Large", "request head too large (at most 64 headers and 64 KiB)"),
            ("414 URI Too Long", "request URI too long"),
            ("505 HTTP Version Not Supported", "HTTP version not supported"),
        ] {
            let head = format!("HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n");
            let out = rewrite(head.as_bytes()).unwrap_or_else(|| panic!("{status} is rewritten"));
            let text = String::from_utf8_lossy(&out).into_owned();
            assert!(text.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{text}");
            assert!(text.contains("\r\nconnection: close\r\n") && text.contains("\r\ndate: x\r\n"), "{text}");
            assert!(text.contains("\r\ncontent-type: application/json\r\n"), "{text}");
            let body = body_of(&out);
            assert_eq!(body, serde_json::json!({ "error": message }));
            let declared =
                format!("content-length: {}\r\n", serde_json::to_string(&body).map(|s| s.len()).unwrap_or(0));
            assert!(text.contains(&declared), "{text}");
        }
    }

    #[test]
    fn everything_else_passes_untouched() {
        for head in [
            // The service's own errors carry a body and a type.
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 9\r\n\r\n{\"a\":\"b\"}",
            // A HEAD answer declares the length of the body it would have had.
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 31\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            // Not the whole write, or not a head at all.
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nHTTP/1.1 200 OK\r\n",
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            "{\"data\":[]}",
            "",
        ] {
            assert_eq!(rewrite(head.as_bytes()), None, "{head:?}");
        }
    }
}
