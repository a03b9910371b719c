//! The site's files, embedded in the binary (`net/site/`: the page, its style, its JavaScript
//! modules and the vendored chart library), served at `/` and `/assets/...` on the API's port with
//! a strict Content-Security-Policy, so `cargo run --release` serves the whole site with no other
//! step and the site works offline. The table of files is made from the folder by `net/build.rs`:
//! a module added under `net/site/js/` is served with no list to update.
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

use crate::api::front::answer::{error, method_not_allowed, Resp};
use crate::api::front::encoding::{accepts_gzip, gzip, Level};

/// The site's Content-Security-Policy: its own script, style, images and requests only.
/// `script-src 'self'` admits the page's module scripts (`<script type="module">` and every
/// module they import) and the chart library, all from this origin.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

// `const ASSETS: [Asset; N]`: every file under `net/site/` that is served, `/` (the page) first,
// listed by `net/build.rs` from the folder itself.
include!(concat!(env!("OUT_DIR"), "/site_assets.rs"));

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

    fn text(path: &str) -> &'static str {
        let asset = ASSETS.iter().find(|a| a.path == path).unwrap_or_else(|| panic!("{path} is served"));
        std::str::from_utf8(asset.bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The URL paths a script at `from` imports (`import ... from './x.js'`, `import '../y.js'`),
    /// resolved as a browser resolves a relative specifier.
    fn imports(from: &str, script: &str) -> Vec<String> {
        let statements =
            script.lines().map(str::trim_start).filter(|l| l.starts_with("import ") || l.starts_with("export "));
        let specs = statements.filter_map(|l| {
            let at = l.find(" from '").map(|i| i + 7).or_else(|| l.strip_prefix("import '").map(|_| 8))?;
            l[at..].split('\'').next()
        });
        specs
            .map(|spec| {
                let mut dir: Vec<&str> = from.split('/').collect();
                dir.pop();
                for seg in spec.split('/') {
                    match seg {
                        "." => {}
                        ".." => {
                            dir.pop();
                        }
                        s => dir.push(s),
                    }
                }
                dir.join("/")
            })
            .collect()
    }

    #[test]
    fn every_asset_has_a_distinct_tag_and_round_trips_through_gzip() {
        let tags = etags();
        for (i, t) in tags.iter().enumerate() {
            assert!(tags.iter().skip(i + 1).all(|u| u != t), "tags differ");
        }
        for (i, gz) in gzipped().iter().enumerate() {
            let mut plain = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).expect("gzip");
            assert_eq!(plain, ASSETS[i].bytes, "{} round-trips", ASSETS[i].path);
        }
    }

    #[test]
    fn the_page_loads_its_modules_and_every_served_file_is_used() {
        assert_eq!(ASSETS[0].path, "/", "the page is first");
        let page = text("/");
        assert!(
            page.contains(r#"<script type="module" src="/assets/app.js"></script>"#),
            "the page loads app.js as a module"
        );
        assert!(!page.contains("<script>") && !page.contains("style="), "nothing inline: the CSP would refuse it");
        let scripts: Vec<&Asset> = ASSETS.iter().filter(|a| a.path.ends_with(".js")).collect();
        let imported: Vec<String> = scripts.iter().flat_map(|a| imports(a.path, text(a.path))).collect();
        for asset in &ASSETS[1..] {
            // The chart library is a classic script, added by the pair page's module when needed.
            let named = page.contains(asset.path) || scripts.iter().any(|s| text(s.path).contains(asset.path));
            assert!(named || imported.iter().any(|i| i == asset.path), "nothing loads {}", asset.path);
        }
        for path in &imported {
            assert!(ASSETS.iter().any(|a| a.path == path), "{path} is imported but not served");
        }
        for asset in &ASSETS {
            let kind = match asset.path.rsplit_once('.').map_or("html", |(_, e)| e) {
                "js" => "text/javascript; charset=utf-8",
                "css" => "text/css; charset=utf-8",
                _ => "text/html; charset=utf-8",
            };
            assert_eq!(asset.content_type, kind, "{}", asset.path);
        }
        assert!(ASSETS.iter().any(|a| a.path == "/assets/js/router.js"), "the modules under net/site/js/ are served");
    }
}
