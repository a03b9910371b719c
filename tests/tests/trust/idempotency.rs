//! `Idempotency-Key` on `POST /v1/alerts` (`decisions.md` §13), through the real binary: a retried
//! create answers the alert the first made (same id, one record, one cap slot), even when both
//! arrive at once; the same key with another body is a 422, and so is a retry after its alert
//! was deleted; a malformed key is a 422; without the header nothing changes.

use std::sync::Arc;
use std::thread;

use rampart_tests::{Reply, Server, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn create(server: &Server, key: Option<&str>, body: &Value) -> Reply {
    let auth = format!("Bearer {}", server.key);
    let mut headers = vec![("Authorization", auth.as_str())];
    if let Some(k) = key {
        headers.push(("Idempotency-Key", k));
    }
    server.request_with("POST", "/v1/alerts", &headers, Some(&body.to_string()))
}

fn active(server: &Server) -> Vec<Value> {
    let r = server.get_authed("/v1/alerts?status=active");
    r.ok("list")["data"].as_array().cloned().expect("a list")
}

fn body(server: &Server, note: &str) -> Value {
    let price = server.get_authed("/v1/symbols/BTCUSDT").ok("price")["data"]["price"].as_f64().expect("price");
    json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(price * 3.0).round(),"note":note})
}

#[test]
fn a_retried_create_answers_the_same_alert_and_another_body_is_refused() {
    let server = Server::start(BIN, FAST);
    let first = body(&server, "first");
    let a = create(&server, Some("order-7f3a"), &first);
    let id = a.ok("create")["data"]["id"].as_i64().expect("an id");
    let again = create(&server, Some("order-7f3a"), &first);
    assert_eq!(again.ok("retry")["data"]["id"].as_i64(), Some(id), "the retry answers the same alert");
    assert_eq!(again.body["data"], a.body["data"], "the same record");
    assert_eq!(active(&server).len(), 1, "one record");
    let other = create(&server, Some("order-7f3a"), &body(&server, "second"));
    other.assert_error(422, "Idempotency-Key was already used with another body", "another body");
    for bad in [String::new(), "x".repeat(256), "has space".into()] {
        let r = create(&server, Some(&bad), &first);
        r.assert_error(422, "Idempotency-Key must be 1 to 255 visible ASCII characters", &format!("key {bad:?}"));
    }
    assert_eq!(active(&server).len(), 1, "refusals made nothing");
    // Another key, or none, creates as before.
    create(&server, Some("order-7f3b"), &first).ok("another key");
    create(&server, None, &first).ok("no key");
    assert_eq!(active(&server).len(), 3);
    // The alert a key made, deleted since: a retry neither answers it nor makes it again.
    let auth = format!("Bearer {}", server.key);
    server.request("DELETE", &format!("/v1/alerts/{id}"), Some(&auth), None).ok("delete");
    let late = create(&server, Some("order-7f3a"), &first);
    let said = format!("Idempotency-Key already created alert {id}, which has been deleted since");
    late.assert_error(422, &said, "a retry after the delete");
    assert_eq!(active(&server).len(), 2, "nothing made again");
}

#[test]
fn the_same_key_sent_twice_at_once_creates_one_alert_and_takes_one_slot() {
    let server = Arc::new(Server::start(BIN, FAST));
    for round in 0..10 {
        let before = active(&server).len();
        let body = body(&server, &format!("round {round}"));
        let key = format!("race-{round}");
        let answers: Vec<Reply> = (0..2)
            .map(|_| {
                let (server, body, key) = (server.clone(), body.clone(), key.clone());
                thread::spawn(move || create(&server, Some(&key), &body))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().expect("a thread"))
            .collect();
        let ids: Vec<Option<i64>> = answers.iter().map(|r| r.ok("create")["data"]["id"].as_i64()).collect();
        assert_eq!(ids[0], ids[1], "round {round}: both answers name one alert");
        assert_eq!(active(&server).len(), before + 1, "round {round}: one record, one cap slot");
    }
}
