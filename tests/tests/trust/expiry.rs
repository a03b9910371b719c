//! `expires_at` (`decisions.md` §13) through the real binary: the Alert carries `expiresAt`; at
//! expiry the alert is gone from `GET /v1/alerts` and an `alert.expired` notice is in the inbox;
//! out-of-range and malformed values are refused with 422. (The shortest expiry is a minute, so
//! the test waits one.)

use std::thread;
use std::time::{Duration, Instant};

use rampart_state::clock::iso8601;
use rampart_tests::{now_ms, Reply, Server, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn create(server: &Server, extra: Value) -> Reply {
    let price = server.get_authed("/v1/symbols/BTCUSDT").ok("price")["data"]["price"].as_f64().expect("price");
    let mut body = json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(price * 3.0).round()});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()))
}

fn listed(server: &Server, id: i64) -> bool {
    let r = server.get_authed("/v1/alerts?status=all");
    r.ok("list")["data"].as_array().is_some_and(|a| a.iter().any(|x| x["id"] == id))
}

#[test]
fn an_expired_alert_is_gone_and_its_owner_told() {
    let server = Server::start(BIN, FAST);
    let at = now_ms() + 61_000;
    let a = create(&server, json!({"expires_at": iso8601(at)}));
    let alert = a.ok("create")["data"].clone();
    let id = alert["id"].as_i64().expect("an id");
    assert_eq!(alert["expiresAt"], iso8601(at), "the Alert carries its expiry");
    let forever = create(&server, json!({})).ok("no expiry")["data"].clone();
    assert_eq!(forever["expiresAt"], Value::Null);
    assert!(listed(&server, id));
    let deadline = Instant::now() + Duration::from_secs(75);
    while listed(&server, id) {
        assert!(Instant::now() < deadline, "the alert outlived its expiry by 10 s");
        thread::sleep(Duration::from_millis(1_000));
    }
    assert!(now_ms() >= at, "not removed before its time");
    let inbox = server.get_authed("/v1/inbox");
    let entries = inbox.ok("inbox")["data"].as_array().cloned().expect("entries");
    let notice = entries.iter().find(|e| e["alertId"] == id).unwrap_or_else(|| panic!("a notice: {}", inbox.text));
    assert_eq!(notice["kind"], "alert.expired");
    assert_eq!(notice["event"]["event"], "alert.expired");
    assert_eq!(notice["event"]["alert"]["symbol"], "BTCUSDT");
    assert!(listed(&server, forever["id"].as_i64().expect("id")), "an alert without expiry stays");
}

#[test]
fn expiries_out_of_range_or_malformed_are_refused() {
    let server = Server::start(BIN, FAST);
    let range = "expires_at must be between 1 minute and 365 days from now";
    create(&server, json!({"expires_at": iso8601(now_ms() + 30_000)})).assert_error(422, range, "30 s ahead");
    create(&server, json!({"expires_at": iso8601(now_ms() - 1_000)})).assert_error(422, range, "in the past");
    let year = now_ms() + 366 * 86_400_000;
    create(&server, json!({"expires_at": iso8601(year)})).assert_error(422, range, "366 days ahead");
    for bad in ["tomorrow", "2026-12-01", "2026-12-01T00:00:00"] {
        let r = create(&server, json!({ "expires_at": bad }));
        let message = r.assert_some_error(422, bad);
        assert!(message.starts_with(&format!("invalid expires_at '{bad}'")), "{message}");
    }
    create(&server, json!({"expires_at": 1_800_000_000_000_i64})).assert_error(
        422,
        "field 'expires_at' must be a string",
        "a number",
    );
}
