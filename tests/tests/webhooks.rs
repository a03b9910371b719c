//! Webhooks through the real binary: a firing on the simulated market reaches a real receiver
//! on loopback within a second, with the exact headers and body; and every non-public target is
//! refused at creation (the SSRF matrix).

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{hook_receiver as receiver, Server, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn config(allow_private: bool) -> String {
    let path = std::env::temp_dir().join(format!("rampart-webhooks-{}-{allow_private}.toml", std::process::id()));
    std::fs::write(&path, format!("[webhooks]\nallow_private = {allow_private}\n")).expect("config");
    path.display().to_string()
}

#[test]
fn a_firing_reaches_the_receiver_within_a_second() {
    let (port, hits) = receiver();
    let cfg = config(true);
    let server = Server::start(BIN, &[FAST, &["--config", cfg.as_str()]].concat());
    let key = server.key.clone();
    let names = server.volatile_pairs();
    for (i, s) in names.iter().enumerate() {
        let body = json!({"symbol": s, "type": "pct", "direction": "any", "pct": 0.1, "window": "5m",
                          "note": format!("n{i}"), "webhook_url": format!("http://127.0.0.1:{port}/hook/{i}?secret=x{i}")});
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string())).ok("create");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while hits.lock().map(|h| h.is_empty()).unwrap_or(true) {
        assert!(Instant::now() < deadline, "no webhook arrived in 120 s");
        thread::sleep(Duration::from_millis(50));
    }
    let hits = hits.lock().expect("lock");
    let hit = &hits[0];
    assert!(
        hit.request_line.starts_with("POST /hook/") && hit.request_line.contains("?secret=x"),
        "{}",
        hit.request_line
    );
    let header = |n: &str| hit.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.clone());
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(header("x-service-event").as_deref(), Some("alert.triggered"));
    assert!(header("user-agent").is_some_and(|u| u.starts_with("rampart/")));
    let body: Value = serde_json::from_str(&hit.body).expect("JSON body");
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
        k.sort();
        k
    };
    assert_eq!(keys(&body), ["alert", "event", "trigger"]);
    assert_eq!(
        keys(&body["alert"]),
        ["direction", "exchange", "id", "note", "pct", "price", "repeat", "symbol", "type", "window"]
    );
    assert_eq!(keys(&body["trigger"]), ["move", "price", "time"]);
    assert_eq!(body["event"], "alert.triggered");
    assert_eq!((body["alert"]["type"].as_str(), body["alert"]["pct"].as_f64()), (Some("pct"), Some(0.1)));
    let fired_at = body["trigger"]["time"].as_i64().expect("time");
    assert!(hit.at_ms - fired_at < 1_000, "received {} ms after the firing", hit.at_ms - fired_at);
    // The account view agrees.
    let id = body["alert"]["id"].clone();
    let all = server.get("/v1/alerts?status=all", Some(&key));
    let row =
        all.ok("list")["data"].as_array().and_then(|a| a.iter().find(|x| x["id"] == id).cloned()).expect("alert row");
    assert_eq!(row["triggerCount"], 1);
}

/// Targets that must never be reached without the operator's switch.
const NOT_PUBLIC: &[&str] = &[
    "http://127.0.0.1/",
    "http://127.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://017700000001/",
    "http://0177.0.0.1/",
    "http://127.0.0.1./",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://app.localhost/",
    "http://0.0.0.0/",
    "http://10.0.0.1/",
    "http://10.1/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.1.1/",
    "http://0xc0a80101/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",
    "http://198.18.0.1/",
    "http://192.0.2.1/",
    "http://198.51.100.1/",
    "http://203.0.113.1/",
    "http://224.0.0.1/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://[::1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[64:ff9b::a00:1]/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[ff02::1]/",
    "http://[2001:db8::1]/",
    "http://example.com@127.0.0.1/",
    "https://user:pass@10.0.0.1/",
];

#[test]
fn the_ssrf_matrix_is_refused_at_creation() {
    let cfg = config(false);
    let server = Server::start(BIN, &[FAST, &["--config", cfg.as_str()]].concat());
    let key = server.key.clone();
    for url in NOT_PUBLIC {
        let body = json!({"symbol": "BTCUSDT", "type": "price", "direction": "below", "price": 1, "webhook_url": url});
        let reply = server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string()));
        let msg = reply.assert_some_error(422, url);
        assert!(msg.starts_with("webhook_url"), "{url}: {msg}");
    }
    let all = server.get("/v1/alerts?status=all", Some(&key));
    assert_eq!(all.ok("list")["data"].as_array().map(Vec::len), Some(0), "nothing was stored");
}
