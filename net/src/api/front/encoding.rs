//! gzip for clients that ask for it: a `/v1` answer of at least [`GZIP_MIN_BYTES`] is sent with
//! `Content-Encoding: gzip` when the request's `Accept-Encoding` accepts gzip (`gzip` or `*`,
//! with no `q=0`), and every such answer carries `Vary: Accept-Encoding` for caches in between.
//!
//! Compression is per answer at the fastest level (a 1.9 MB bulk levels body becomes a few
//! hundred kB); smaller bodies are sent as they are, where compression would cost more than it
//! saves.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Body as _;
use hyper::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING, VARY};
use hyper::Response;

/// Bodies smaller than this (about one TCP segment) are never compressed.
pub const GZIP_MIN_BYTES: u64 = 1_400;

/// Whether `headers` accept a gzip-encoded answer.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|item| {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            let p = p.trim();
            let q = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q="));
            q.is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
    })
}

/// How hard [`gzip`] compresses.
#[derive(Clone, Copy, Debug)]
pub enum Level {
    /// The fastest: answers compressed as they are sent.
    Fast,
    /// The smallest: bytes compressed once and sent many times (the site's files).
    Best,
}

/// `body` compressed with gzip at `level`.
pub fn gzip(body: &[u8], level: Level) -> Bytes {
    use std::io::Write as _;
    let level = match level {
        Level::Fast => flate2::Compression::fast(),
        Level::Best => flate2::Compression::best(),
    };
    let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4 + 64), level);
    // Writing into a Vec cannot fail.
    let _ = e.write_all(body);
    Bytes::from(e.finish().unwrap_or_default())
}

/// `resp` as the client asked: gzip-encoded when `gzip` and the answer is a success of at least
/// [`GZIP_MIN_BYTES`] not already encoded; `Vary: Accept-Encoding` on every answer that could be.
pub async fn negotiate(resp: Response<Full<Bytes>>, gzip_ok: bool) -> Response<Full<Bytes>> {
    let size = resp.body().size_hint().exact().unwrap_or(0);
    let eligible =
        resp.status().is_success() && size >= GZIP_MIN_BYTES && !resp.headers().contains_key(CONTENT_ENCODING);
    if !eligible {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    parts.headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    // A `Full` body cannot fail (its error type is uninhabited) and is collected at once.
    let Ok(collected) = body.collect().await;
    let bytes = collected.to_bytes();
    if !gzip_ok {
        return Response::from_parts(parts, Full::new(bytes));
    }
    parts.headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    Response::from_parts(parts, Full::new(gzip(&bytes, Level::Fast)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, HeaderValue::from_str(value).expect("header"));
        h
    }

    #[test]
    fn accept_encoding_is_read_with_its_q_values() {
        assert!(accepts_gzip(&with("gzip")));
        assert!(accepts_gzip(&with("br, GZip;q=0.5")));
        assert!(accepts_gzip(&with("*")));
        assert!(accepts_gzip(&with("deflate, gzip, br")));
        assert!(!accepts_gzip(&with("gzip;q=0")));
        assert!(!accepts_gzip(&with("identity")));
        assert!(!accepts_gzip(&with("br, deflate")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read as _;
        let body = b"{\"data\":[]}".repeat(500);
        let mut sizes = Vec::new();
        for level in [Level::Fast, Level::Best] {
            let z = gzip(&body, level);
            assert!(z.len() < body.len() / 10, "{level:?}: {} bytes from {}", z.len(), body.len());
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&z[..]).read_to_end(&mut back).expect("valid gzip");
            assert_eq!(back, body, "{level:?}");
            sizes.push(z.len());
        }
        assert!(sizes[1] <= sizes[0], "the best level is no larger: {sizes:?}");
    }
}
