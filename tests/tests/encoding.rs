//! gzip through the real binary: a `/v1` answer is gzip-encoded only for a client that asks
//! (`Accept-Encoding`), decodes to the same JSON, carries `Vary: Accept-Encoding`, and small
//! answers and clients that do not ask get the identity encoding.

use std::io::Read;
use std::time::Duration;

use rampart_tests::{Server, FAST};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// GET `path` with `accept` as `Accept-Encoding` (none when `None`): status, the
/// `Content-Encoding` and `Vary` headers, and the body as sent.
fn get(server: &Server, path: &str, accept: Option<&str>) -> (u16, Option<String>, Option<String>, Vec<u8>) {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let mut req = agent.get(&server.url(path)).set("Authorization", &format!("Bearer {}", server.key));
    if let Some(a) = accept {
        req = req.set("Accept-Encoding", a);
    }
    let resp = req.call().unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let (status, enc, vary) =
        (resp.status(), resp.header("content-encoding").map(str::to_owned), resp.header("vary").map(str::to_owned));
    let mut body = Vec::new();
    resp.into_reader().read_to_end(&mut body).expect("body");
    (status, enc, vary, body)
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).expect("a valid gzip body");
    out
}

#[test]
fn answers_are_gzipped_only_for_clients_that_ask() {
    let server = Server::start(BIN, FAST);
    // The bulk levels answer: large, so it is compressed for a client that asks.
    let (status, enc, vary, zipped) = get(&server, "/v1/levels", Some("br, gzip"));
    assert_eq!((status, enc.as_deref(), vary.as_deref()), (200, Some("gzip"), Some("accept-encoding")));
    let decoded: Value = serde_json::from_slice(&gunzip(&zipped)).expect("JSON inside");
    let (_, plain_enc, plain_vary, plain) = get(&server, "/v1/levels", None);
    assert_eq!((plain_enc, plain_vary.as_deref()), (None, Some("accept-encoding")), "identity, and it varies");
    let plain: Value = serde_json::from_slice(&plain).expect("JSON");
    assert_eq!(decoded["exchange"], plain["exchange"]);
    let symbols = |v: &Value| -> Vec<String> {
        v["data"].as_array().expect("data").iter().map(|p| p["symbol"].as_str().unwrap_or("").to_owned()).collect()
    };
    assert_eq!(symbols(&decoded), symbols(&plain), "the same pairs either way");
    assert!(zipped.len() * 3 < plain_len(&plain), "compressed: {} bytes", zipped.len());
    // Refused gzip (q=0) and small answers are sent as they are.
    let (_, enc, _, _) = get(&server, "/v1/levels", Some("gzip;q=0"));
    assert_eq!(enc, None, "q=0 refuses gzip");
    let (_, enc, vary, body) = get(&server, "/v1/exchanges", Some("gzip"));
    assert_eq!((enc, vary), (None, None), "a small answer is not compressed");
    serde_json::from_slice::<Value>(&body).expect("plain JSON");
}

fn plain_len(v: &Value) -> usize {
    v.to_string().len()
}

/// The site's files are gzip-compressed for a browser that accepts it (every one does), decode
/// to the files sent to one that does not, and a revalidation is still `304`.
#[test]
fn the_sites_files_are_gzipped_for_browsers_that_accept_it() {
    let server = Server::start(BIN, FAST);
    for path in ["/", "/assets/app.js", "/assets/app.css", "/assets/lightweight-charts.js"] {
        let (status, enc, vary, zipped) = get(&server, path, Some("gzip, deflate, br"));
        assert_eq!((status, enc.as_deref(), vary.as_deref()), (200, Some("gzip"), Some("accept-encoding")), "{path}");
        let (_, plain_enc, _, plain) = get(&server, path, None);
        assert_eq!(plain_enc, None, "{path}: identity for a client that does not ask");
        assert_eq!(gunzip(&zipped), plain, "{path}: the same file");
        if plain.len() > 10_000 {
            assert!(zipped.len() * 3 < plain.len(), "{path}: {} of {} bytes", zipped.len(), plain.len());
        }
    }
}
