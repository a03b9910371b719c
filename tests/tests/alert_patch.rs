//! `PATCH /v1/alerts/{id}` through the real binary and the venue simulator (`decisions.md` §16):
//! the note, the webhook (set, then used by the next firing; `null` removes it), the end
//! (`expires_at`, `null` removes it) and the cooldown (which the shard then applies without
//! re-arming the alert) change; the condition cannot (422 naming the field); every refusal of
//! a bad value, another account's alert and an unknown one (404), and the site's rule that its
//! alerts have no webhook.

use std::time::{Duration, Instant};

use rampart_state::clock::iso8601;
use rampart_tests::{hook_receiver, Server, SimVenue, SiteSession};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
const PAIR: &str = "BTCUSDT";

/// The live feed from the simulator, webhooks to loopback allowed.
fn live() -> (SimVenue, Server) {
    rampart_tests::live_binance_with(BIN, "[webhooks]\nallow_private = true\n")
}

fn bearer(server: &Server) -> String {
    format!("Bearer {}", server.key)
}

fn create(server: &Server, body: &Value) -> Value {
    let reply = server.request("POST", "/v1/alerts", Some(&bearer(server)), Some(&body.to_string()));
    reply.ok(&format!("create {body}"))["data"].clone()
}

fn patch(server: &Server, id: &Value, body: &Value) -> rampart_tests::Reply {
    server.request("PATCH", &format!("/v1/alerts/{id}"), Some(&bearer(server)), Some(&body.to_string()))
}

fn price_now(server: &Server) -> f64 {
    let s = server.get_authed(&format!("/v1/symbols/{PAIR}?exchange=binance"));
    s.ok("symbol")["data"]["price"].as_f64().expect("a price")
}

fn trade(sim: &SimVenue, at: f64) {
    sim.control("trade", &json!({"venue":"binance","symbol":PAIR,"price":format!("{at:.2}")}));
}

fn alert(server: &Server, id: &Value) -> Value {
    let all = server.get_authed("/v1/alerts?status=all");
    let list = all.ok("alerts")["data"].as_array().cloned().unwrap_or_default();
    list.into_iter().find(|a| a["id"] == *id).unwrap_or_else(|| panic!("alert {id} listed"))
}

/// Waits until alert `id` has fired `n` times.
fn fired(server: &Server, id: &Value, n: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alert(server, id)["triggerCount"] != json!(n) {
        assert!(Instant::now() < deadline, "{what}: {}", alert(server, id));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn note_webhook_end_and_cooldown_change_and_the_condition_cannot() {
    let (sim, server) = live();
    let (port, hits) = hook_receiver();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let body =
        json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"repeat":true});
    let plain = create(&server, &body);
    let quiet = create(&server, &body);
    let id = plain["id"].clone();

    // Note, webhook and end, each alone; the answer is the Alert as GET /v1/alerts lists it.
    let hook = format!("http://127.0.0.1:{port}/patched");
    let changed = patch(&server, &id, &json!({"note":"moved","webhook_url":hook,"expires_at":"2099-01-01T00:00:00Z"}));
    changed.assert_error(422, "expires_at must be between 1 minute and 365 days from now", "an end too far");
    let changed = patch(&server, &id, &json!({"note":"moved","webhook_url":hook}));
    let a = changed.ok("patch")["data"].clone();
    assert_eq!((&a["note"], &a["webhookUrl"], a["price"].as_f64()), (&json!("moved"), &json!(hook), Some(level)));
    assert_eq!(alert(&server, &id), a, "stored as answered");
    let end = rampart_tests::now_ms() + 86_400_000;
    let a = patch(&server, &id, &json!({"expires_at":iso8601(end)})).ok("end")["data"].clone();
    assert_eq!(a["expiresAt"], iso8601(end), "{a}");
    let a = patch(&server, &id, &json!({"expires_at":null})).ok("no end")["data"].clone();
    assert_eq!((&a["expiresAt"], &a["note"]), (&Value::Null, &json!("moved")), "the rest as it was");
    // The other alert gets an hour's cooldown before it ever fires.
    let q = patch(&server, &quiet["id"], &json!({"cooldown_s":3600})).ok("cooldown")["data"].clone();
    assert_eq!(q["cooldownS"], 3600);

    // A crossing: both fire, the patched webhook receives the first alert's body.
    trade(&sim, level + 1.0);
    fired(&server, &id, 1, "the first crossing");
    fired(&server, &quiet["id"], 1, "the first crossing, the quiet one");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = hits.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = got.iter().find(|h| h.request_line.starts_with("POST /patched")) {
            let v: Value = serde_json::from_str(&h.body).expect("json");
            assert_eq!((&v["alert"]["id"], &v["alert"]["note"]), (&id, &json!("moved")), "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "the patched webhook got nothing: {got:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Back under the re-arm point and across again: the plain one fires, the quiet one not.
    trade(&sim, level * 0.99);
    trade(&sim, level + 1.0);
    fired(&server, &id, 2, "the second crossing");
    assert_eq!(alert(&server, &quiet["id"])["triggerCount"], 1, "held back by its cooldown");

    // The webhook removed.
    let a = patch(&server, &id, &json!({"webhook_url":null})).ok("no webhook")["data"].clone();
    assert_eq!(a["webhookUrl"], Value::Null);

    refusals(&server, &id);
}

/// Every refusal of `PATCH /v1/alerts/{id}`.
fn refusals(server: &Server, id: &Value) {
    let cases = [
        (json!({"price":1}), 422, "field 'price' cannot change: delete the alert and create another"),
        (json!({"direction":"below"}), 422, "field 'direction' cannot change: delete the alert and create another"),
        (json!({"paused":true}), 422, "unknown field 'paused'. Allowed: note, webhook_url, expires_at, cooldown_s"),
        (json!({}), 422, "the body changes nothing: send any of note, webhook_url, expires_at, cooldown_s"),
        (json!({"cooldown_s":-1}), 422, "cooldown_s must be a whole number of seconds from 0 to 86400"),
        (
            json!({"expires_at":"2020-01-01T00:00:00Z"}),
            422,
            "expires_at must be between 1 minute and 365 days from now",
        ),
        (json!({"webhook_url":"not a url"}), 422, "webhook_url must be an absolute http or https URL"),
    ];
    for (body, status, message) in cases {
        let r = patch(server, id, &body);
        assert_eq!(r.status, status, "{body}: {}", r.text);
        assert!(r.body["error"].as_str().is_some_and(|e| e.contains(message)), "{body}: {}", r.text);
    }
    let bad = server.request("PATCH", &format!("/v1/alerts/{id}"), Some(&bearer(server)), Some("{"));
    assert_eq!(bad.status, 400, "{}", bad.text);
    for unknown in ["999999", "abc", "0"] {
        let r =
            server.request("PATCH", &format!("/v1/alerts/{unknown}"), Some(&bearer(server)), Some(r#"{"note":"x"}"#));
        r.assert_error(404, "unknown alert", unknown);
    }
    // Another account's alert is unknown to it.
    let other = server.create_key("developer", None);
    let r =
        server.request("PATCH", &format!("/v1/alerts/{id}"), Some(&format!("Bearer {other}")), Some(r#"{"note":"x"}"#));
    r.assert_error(404, "unknown alert", "another account's");
    // The site's alerts have no webhook: a PATCH through the site may not set one.
    let (_, site) = SiteSession::signin(server, &server.key);
    let site = site.expect("signed in");
    let r = site.change(
        server,
        "PATCH",
        &format!("/site/v1/alerts/{id}"),
        Some(&json!({"webhook_url":"https://example.com/h"})),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = site.change(server, "PATCH", &format!("/site/v1/alerts/{id}"), Some(&json!({"note":"from the site"})));
    assert_eq!(r.status, 200, "{}", r.text);
    // A deleted alert is gone for PATCH too.
    server.request("DELETE", &format!("/v1/alerts/{id}"), Some(&bearer(server)), None).ok("delete");
    patch(server, id, &json!({"note":"x"})).assert_error(404, "unknown alert", "deleted");
}
