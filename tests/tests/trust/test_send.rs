//! `POST /v1/alerts/{id}/test` (`decisions.md` §16) through the real binary: the alert's webhook
//! gets a firing's body with `event` `alert.test` and the header `x-service-event: alert.test`,
//! signed as a firing is (checked by the Standard Webhooks reference library); the answer names
//! the outcome, status and latency; the delivery log lists the send as a `test` row. An alert
//! without a webhook is 422, another account's 404.

use rampart_tests::{hook_receiver, Server};
use serde_json::{json, Value};

use super::signing::{python, verifies};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn post(server: &Server, key: &str, path: &str, body: Option<&Value>) -> rampart_tests::Reply {
    let body = body.map(Value::to_string);
    server.request("POST", path, Some(&format!("Bearer {key}")), body.as_deref())
}

#[test]
fn a_test_send_is_signed_logged_and_answered_with_its_outcome() {
    let python = python();
    let (port, hits) = hook_receiver();
    let (_sim, server) = rampart_tests::live_binance_with(BIN, "[webhooks]\nallow_private = true\n");
    let key = server.key.clone();
    let secret = post(&server, &key, "/v1/webhook-secret", None).ok("secret")["data"]["secret"]
        .as_str()
        .expect("a secret")
        .to_owned();
    let hook = format!("http://127.0.0.1:{port}/test-send");
    let body = json!({"symbol":"BTCUSDT","exchange":"binance","type":"price","direction":"above","price":1e9,
                      "webhook_url":hook,"note":"n"});
    let id = post(&server, &key, "/v1/alerts", Some(&body)).ok("create")["data"]["id"].clone();

    let answer = post(&server, &key, &format!("/v1/alerts/{id}/test"), None).ok("test send")["data"].clone();
    assert_eq!((&answer["outcome"], &answer["status"]), (&json!("delivered"), &json!(200)), "{answer}");
    assert!(answer["latencyMs"].as_i64().is_some_and(|ms| (0..10_000).contains(&ms)), "{answer}");
    let hit = hits.lock().unwrap_or_else(|e| e.into_inner()).first().cloned().expect("the receiver got it");
    assert!(hit.request_line.starts_with("POST /test-send "), "{}", hit.request_line);
    assert_eq!(hit.header("x-service-event"), Some("alert.test"));
    let sent: Value = serde_json::from_str(&hit.body).expect("json");
    assert_eq!(
        (&sent["event"], &sent["alert"]["id"], &sent["alert"]["note"]),
        (&json!("alert.test"), &id, &json!("n"))
    );
    assert!(sent["trigger"]["price"].as_f64().is_some_and(|p| p > 0.0), "at the current price: {sent}");
    assert!(verifies(&python, &secret, &hit), "signed as a firing is: {:?}", hit.headers);

    // The delivery log lists it, marked.
    let log = server.get_authed(&format!("/v1/alerts/{id}/deliveries"));
    let rows = log.ok("log")["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (&rows[0]["outcome"], &rows[0]["status"], &rows[0]["test"]),
        (&json!("delivered"), &json!(200), &json!(true))
    );

    // Refused: no webhook, unknown, another account's; other methods.
    let (_sim2, strict) = rampart_tests::live_binance(BIN);
    let skey = strict.key.clone();
    let plain = json!({"symbol":"BTCUSDT","exchange":"binance","type":"price","direction":"above","price":1e9});
    let none = post(&strict, &skey, "/v1/alerts", Some(&plain)).ok("create")["data"]["id"].clone();
    post(&strict, &skey, &format!("/v1/alerts/{none}/test"), None).assert_error(
        422,
        "the alert has no webhook_url to test",
        "no webhook",
    );
    post(&strict, &skey, "/v1/alerts/999999/test", None).assert_error(404, "unknown alert", "unknown");
    let other = strict.create_key("developer", None);
    post(&strict, &other, &format!("/v1/alerts/{none}/test"), None).assert_error(404, "unknown alert", "another's");
    // The server that allows private addresses lets another account see nothing of this one's.
    let stranger = server.create_key("developer", None);
    post(&server, &stranger, &format!("/v1/alerts/{id}/test"), None).assert_error(404, "unknown alert", "another's");
    let r = server.request("GET", &format!("/v1/alerts/{id}/test"), Some(&format!("Bearer {key}")), None);
    assert_eq!((r.status, r.header("allow")), (405, Some("POST")), "{}", r.text);
}
