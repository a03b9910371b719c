//! The site's files, embedded in the binary (`net/site/`: the page, its script and style, and the
//! vendored chart library), served at `/` and `/assets/...` on the API's port with a strict
//! Content-Security-Policy, so `cargo run --release` serves the whole site with no other step
//! and the site works offline.
//!
//! Every site answer (these and the `/site/` JSON routes) carries [`CSP`] and the usual
//! hardening headers: no inline script or style, no framing, nothing loaded from elsewhere.
//! Files are answered with an `ETag` (a hash of the embedded bytes) and `Cache-Control:
//! no-cache`, so a browser revalidates and gets `304` until the binary changes; gzip-compressed
//! (once, at start) for a client that accepts it.

use std::sync::OnceLock;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode};
use sha2::{Digest, Sha256};

use crate::api::front::encoding::{accepts_gzip, gzip, Level};
use crate::api::front::{error, method_not_allowed, Resp};

/// The site's Content-Security-Policy: its own script, style, images and requests only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

/// Every file the site serves; `/` is the page.
const ASSETS: [Asset; 4] = [
    Asset { path: "/", content_type: "text/html; charset=utf-8", bytes: include_bytes!("../../../../site/index.html") },
    Asset {
        path: "/assets/app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../../../site/app.js"),
    },
    Asset {
        path: "/assets/app.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../../../site/app.css"),
    },
    Asset {
        path: "/assets/lightweight-charts.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../../../site/vendor/lightweight-charts.standalone.production.js"),
    },
];

/// The files gzip-compressed (at the best level), computed once: sent to every browser that
/// accepts gzip (all do), a third of the bytes (perf/site-pages.md).
fn gzipped() -> &'static [Bytes; ASSETS.len()] {
    static GZ: OnceLock<[Bytes; ASSETS.len()]> = OnceLock::new();
    GZ.get_or_init(|| std::array::from_fn(|i| gzip(ASSETS[i].bytes, Level::Best)))
}

/// The files' `ETag`s, computed once.
fn etags() -> &'static [String; ASSETS.len()] {
    static TAGS: OnceLock<[String; ASSETS.len()]> = OnceLock::new();
    TAGS.get_or_init(|| {
        std::array::from_fn(|i| {
            let digest = Sha256::digest(ASSETS[i].bytes);
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            format!("\"{hex}\"")
        })
    })
}

/// Whether `path` is one of the site's files (or under `/assets/`, answered 404 if unknown).
pub fn is_asset_path(path: &str) -> bool {
    path == "/" || path == "/index.html" || path.starts_with("/assets/")
}

/// Answers a request for one of the site's files.
pub fn serve(req: &Parts) -> Resp {
    let path = match req.uri.path() {
        "/index.html" => "/",
        p => p,
    };
    let Some(i) = ASSETS.iter().position(|a| a.path == path) else {
        return secure(error(StatusCode::NOT_FOUND, "not found"));
    };
    if !matches!(req.method, Method::GET | Method::HEAD) {
        return secure(method_not_allowed("GET"));
    }
    let tag = &etags()[i];
    let fresh = req
        .headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let gzip = accepts_gzip(&req.headers);
    let (status, body) = match (fresh, gzip) {
        (true, _) => (StatusCode::NOT_MODIFIED, Bytes::new()),
        (false, true) => (StatusCode::OK, gzipped()[i].clone()),
        (false, false) => (StatusCode::OK, Bytes::from_static(ASSETS[i].bytes)),
    };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(ASSETS[i].content_type));
    h.insert(VARY, HeaderValue::from_static("accept-encoding"));
    if gzip && !fresh {
        h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(tag) {
        h.insert(ETAG, v);
    }
    secure(r)
}

/// `r` with the site's security headers.
pub fn secure(mut r: Resp) -> Resp {
    let h = r.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_distinct_tag_and_the_page_names_every_script_and_style() {
        let tags = etags();
        for (i, t) in tags.iter().enumerate() {
            assert!(tags.iter().skip(i + 1).all(|u| u != t), "tags differ");
        }
        let page = std::str::from_utf8(ASSETS[0].bytes).expect("utf-8 page");
        let script = std::str::from_utf8(ASSETS[1].bytes).expect("utf-8 script");
        for asset in &ASSETS[1..] {
            // The chart library is loaded by the script, on the pair page only.
            assert!(page.contains(asset.path) || script.contains(asset.path), "the site loads {}", asset.path);
        }
        for (i, gz) in gzipped().iter().enumerate() {
            let mut plain = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).expect("gzip");
            assert_eq!(plain, ASSETS[i].bytes, "{} round-trips", ASSETS[i].path);
        }
        assert!(!page.contains("<script>") && !page.contains("style="), "nothing inline: the CSP would refuse it");
    }
}
