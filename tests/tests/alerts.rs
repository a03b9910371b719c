//! Alerts through the real binary: create, list, delete, validation, plan rules and caps,
//! account isolation, firing on the simulated market, the inbox, and durability across a
//! graceful restart and a SIGKILL.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{is_iso8601, Reply, Server, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

fn post(server: &Server, key: &str, body: &Value) -> Reply {
    server.request("POST", "/v1/alerts", Some(&bearer(key)), Some(&body.to_string()))
}

fn price_of(server: &Server, symbol: &str) -> f64 {
    server.get_authed(&format!("/v1/symbols/{symbol}")).ok("price")["data"]["price"].as_f64().expect("price")
}

fn list(server: &Server, key: &str, status: &str) -> Vec<Value> {
    let reply = server.get(&format!("/v1/alerts?status={status}"), Some(key));
    reply.ok("list alerts")["data"].as_array().cloned().expect("data array")
}

/// Writes a config file with a small plan and returns its path.
fn config_with_tiny_plan() -> String {
    let path =
        std::env::temp_dir().join(format!("rampart-alerts-{}-{:?}.toml", std::process::id(), thread::current().id()));
    let text = "[plans.tiny]\napi = true\nprice_alert_cap = 2\npct_alerts = false\nrepeat = false\nburst_per_min = 120\ndaily_quota = 1000\n\
                [plans.tinypct]\napi = true\nprice_alert_cap = 2\npct_alerts = true\nrepeat = false\nburst_per_min = 120\ndaily_quota = 1000\n";
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

#[test]
fn create_list_delete() {
    let server = Server::start(BIN, FAST);
    let key = server.key.clone();
    let p = price_of(&server, "BTCUSDT");
    let level = (p * 1.05 * 100.0).round() / 100.0;
    let reply = post(
        &server,
        &key,
        &json!({"symbol":"btcusdt","type":"price","direction":"above","price":level,"note":"breakout","webhook_url":"https://93.184.216.34/x?secret=abc"}),
    );
    let a = reply.ok("create price alert")["data"].clone();
    assert_eq!(a["exchange"], "binance", "binance is the default venue");
    assert_eq!(a["symbol"], "BTCUSDT");
    assert_eq!((a["type"].as_str(), a["direction"].as_str()), (Some("price"), Some("above")));
    assert_eq!(a["price"].as_f64(), Some(level));
    assert_eq!((a["pct"].clone(), a["window"].clone()), (Value::Null, Value::Null));
    assert_eq!((a["repeat"].clone(), a["note"].clone()), (json!(false), json!("breakout")));
    assert_eq!(a["webhookUrl"], "https://93.184.216.34/x?secret=abc");
    assert_eq!(
        (a["status"].clone(), a["triggerCount"].clone(), a["lastTriggeredAt"].clone()),
        (json!("active"), json!(0), Value::Null)
    );
    assert!(a["createdPrice"].as_f64().is_some_and(|c| (c / p - 1.0).abs() < 0.01));
    assert!(is_iso8601(a["createdAt"].as_str().unwrap_or("")), "{a}");
    assert!(a["createdAt"].as_str().is_some_and(|s| s.ends_with("+00:00")));
    let reply = post(
        &server,
        &key,
        &json!({"symbol":"ETHUSDT","type":"pct","direction":"down","pct":3,"window":"1d","repeat":true,"exchange":"okx"}),
    );
    let b = reply.ok("create pct alert")["data"].clone();
    assert_eq!(
        (b["exchange"].as_str(), b["pct"].as_f64(), b["window"].as_str(), b["price"].clone()),
        (Some("okx"), Some(3.0), Some("1d"), Value::Null)
    );
    let ids: Vec<i64> = list(&server, &key, "active").iter().filter_map(|x| x["id"].as_i64()).collect();
    assert_eq!(ids, [a["id"].as_i64().expect("id"), b["id"].as_i64().expect("id")], "ordered by id");
    assert!(list(&server, &key, "triggered").is_empty());
    let id = a["id"].as_i64().expect("id");
    let del = server.request("DELETE", &format!("/v1/alerts/{id}"), Some(&bearer(&key)), None);
    assert_eq!(del.ok("delete")["data"], json!({"id": id, "deleted": true}));
    server.request("DELETE", &format!("/v1/alerts/{id}"), Some(&bearer(&key)), None).assert_error(
        404,
        "unknown alert",
        "second delete",
    );
    server.request("DELETE", "/v1/alerts/abc", Some(&bearer(&key)), None).assert_error(
        404,
        "unknown alert",
        "non-integer id",
    );
    server.request("DELETE", "/v1/alerts/999999", Some(&bearer(&key)), None).assert_error(
        404,
        "unknown alert",
        "unknown id",
    );
    assert_eq!(list(&server, &key, "all").len(), 1);
    server.get("/v1/alerts?status=done", Some(&key)).assert_error(
        422,
        "invalid status 'done'. Allowed: active, triggered, all",
        "bad status",
    );
}

#[test]
fn validation_through_http() {
    let server = Server::start(BIN, FAST);
    let key = server.key.clone();
    let auth = bearer(&key);
    let reply = server.request("POST", "/v1/alerts", Some(&auth), Some("{\"symbol\":"));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.body["error"].as_str().is_some_and(|e| e.starts_with("malformed JSON")), "{}", reply.text);
    post(&server, &key, &json!({"type":"price","direction":"above","price":1})).assert_error(
        422,
        "missing field 'symbol'",
        "missing",
    );
    post(&server, &key, &json!({"symbol":"BTCUSDT","type":"price","direction":"sideways","price":1})).assert_error(
        422,
        "invalid direction 'sideways' for a price alert. Allowed: above, below",
        "direction",
    );
    post(&server, &key, &json!({"symbol":"BTCUSDT","type":"pct","direction":"up","pct":1,"window":"3h"})).assert_error(
        422,
        "invalid window '3h'. Allowed: 5m, 15m, 1h, 4h, 1d, 1w",
        "window",
    );
    post(&server, &key, &json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":1,"exchange":"kraken"}))
        .assert_error(422, "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget", "exchange");
    post(&server, &key, &json!({"symbol":"NOPEUSDT","type":"price","direction":"above","price":1})).assert_error(
        404,
        "unknown symbol 'NOPEUSDT'",
        "unknown symbol",
    );
    let p = price_of(&server, "BTCUSDT");
    let wrong =
        post(&server, &key, &json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(p * 0.5).round()}));
    let msg = wrong.assert_some_error(422, "far side");
    assert!(msg.starts_with("price must be above the current price "), "{msg}");
    let wrong =
        post(&server, &key, &json!({"symbol":"BTCUSDT","type":"price","direction":"below","price":(p * 2.0).round()}));
    assert!(wrong.assert_some_error(422, "far side").starts_with("price must be below the current price "));
    post(&server, &key, &json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(p * 2.0).round(),"webhook_url":"ftp://x.example.com/"}))
        .assert_error(422, "webhook_url must be an absolute http or https URL", "url");
    let big = format!("{{\"note\":\"{}\"}}", "x".repeat(70_000));
    let reply = server.request("POST", "/v1/alerts", Some(&auth), Some(&big));
    reply.assert_error(413, "request body too large (max 65536 bytes)", "body too large");
    // Nothing was stored by any of these.
    assert!(list(&server, &key, "all").is_empty());
    let reply = server.request("PUT", "/v1/alerts", Some(&auth), Some("{}"));
    assert_eq!(reply.status, 405, "{}", reply.text);
}

#[test]
fn plan_rules_and_the_price_alert_cap() {
    let config = config_with_tiny_plan();
    let server = Server::start(BIN, &[FAST, &["--config", config.as_str()]].concat());
    // The CLI reads plans from the same config file as the server.
    let out = server.keys(&["create", "--plan", "tiny", "--config", config.as_str()]);
    assert!(out.status.success(), "{out:?}");
    let tiny = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").to_owned();
    server.await_key(&tiny);
    let lite = server.create_key("developer-lite", None);
    let p = price_of(&server, "BTCUSDT");
    let pct = json!({"symbol":"BTCUSDT","type":"pct","direction":"up","pct":1,"window":"1h"});
    post(&server, &tiny, &pct).assert_error(422, "percent-move alerts are not included in plan 'tiny'", "pct on tiny");
    post(&server, &lite, &pct).assert_error(
        422,
        "percent-move alerts are not included in plan 'developer-lite'",
        "pct on lite",
    );
    let repeat = json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(p * 1.5).round(),"repeat":true});
    post(&server, &tiny, &repeat).assert_error(
        422,
        "repeating alerts are not included in plan 'tiny'",
        "repeat on tiny",
    );
    let mut ids = Vec::new();
    for k in 0..2 {
        let body =
            json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(p * (1.5 + f64::from(k))).round()});
        ids.push(post(&server, &tiny, &body).ok("within the cap")["data"]["id"].as_i64().expect("id"));
    }
    let third = json!({"symbol":"BTCUSDT","type":"price","direction":"below","price":(p * 0.5).round()});
    post(&server, &tiny, &third).assert_error(422, "active price-alert limit reached (2 on plan tiny)", "over the cap");
    server.request("DELETE", &format!("/v1/alerts/{}", ids[0]), Some(&bearer(&tiny)), None).ok("delete");
    post(&server, &tiny, &third).ok("room again after a delete");
    // Percent alerts count against the same cap as price alerts (decisions.md §2).
    let out = server.keys(&["create", "--plan", "tinypct", "--config", config.as_str()]);
    assert!(out.status.success(), "{out:?}");
    let both = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").to_owned();
    server.await_key(&both);
    let pct = json!({"symbol":"BTCUSDT","type":"pct","direction":"up","pct":50,"window":"1w"});
    post(&server, &both, &pct).ok("first pct within the cap");
    post(&server, &both, &third).ok("a price alert within the cap");
    post(&server, &both, &pct).assert_error(
        422,
        "active price-alert limit reached (2 on plan tinypct)",
        "pct over the cap",
    );
    post(&server, &both, &third).assert_error(
        422,
        "active price-alert limit reached (2 on plan tinypct)",
        "price over the cap",
    );
    let _ = std::fs::remove_file(&config);
}

#[test]
fn accounts_are_isolated() {
    let server = Server::start(BIN, FAST);
    let a = server.key.clone();
    let b = server.create_key("developer", Some("other"));
    let p = price_of(&server, "ETHUSDT");
    let id =
        post(&server, &a, &json!({"symbol":"ETHUSDT","type":"price","direction":"above","price":(p * 2.0).round()}))
            .ok("create")["data"]["id"]
            .as_i64()
            .expect("id");
    assert!(list(&server, &b, "all").is_empty(), "another account's alerts are invisible");
    server.request("DELETE", &format!("/v1/alerts/{id}"), Some(&bearer(&b)), None).assert_error(
        404,
        "unknown alert",
        "other account",
    );
    assert_eq!(list(&server, &a, "active").len(), 1, "still there for its owner");
}

#[test]
fn alerts_fire_on_the_simulated_market_and_reach_the_inbox() {
    let server = Server::start(BIN, FAST);
    let key = server.key.clone();
    let names = server.volatile_pairs();
    for s in &names {
        post(&server, &key, &json!({"symbol":s,"type":"pct","direction":"any","pct":0.1,"window":"5m"}))
            .ok("create pct");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let triggered = loop {
        let t = list(&server, &key, "triggered");
        if !t.is_empty() {
            break t;
        }
        assert!(Instant::now() < deadline, "no alert fired in 120 s");
        thread::sleep(Duration::from_millis(500));
    };
    let a = &triggered[0];
    assert_eq!((a["status"].as_str(), a["triggerCount"].as_i64()), (Some("triggered"), Some(1)));
    assert!(is_iso8601(a["lastTriggeredAt"].as_str().unwrap_or("")), "{a}");
    let inbox = server.get("/v1/inbox", Some(&key));
    let entries = inbox.ok("inbox")["data"].as_array().cloned().expect("data");
    let entry = entries.iter().find(|e| e["alertId"] == a["id"]).expect("an inbox entry for the firing");
    assert_eq!(entry["kind"], "alert.triggered");
    let event = &entry["event"];
    assert_eq!(event["event"], "alert.triggered");
    assert_eq!(event["alert"]["id"], a["id"]);
    for field in ["exchange", "symbol", "type", "direction", "price", "pct", "window", "repeat", "note"] {
        assert!(event["alert"].get(field).is_some(), "alert.{field} missing: {event}");
    }
    let mv = event["trigger"]["move"].as_f64().expect("a pct firing has a move");
    assert!(mv.abs() >= 0.1, "{event}");
    assert!(event["trigger"]["price"].as_f64().is_some_and(|p| p > 0.0));
    assert!(event["trigger"]["time"].as_i64().is_some_and(|t| t > 1_000_000_000_000));
    // The trigger update is durable: after a restart the alert is still triggered, same count.
    let server = server.restart(FAST);
    let again = list(&server, &key, "triggered");
    let same = again.iter().find(|x| x["id"] == a["id"]).expect("still triggered after restart");
    assert_eq!(
        (same["triggerCount"].clone(), same["lastTriggeredAt"].clone()),
        (a["triggerCount"].clone(), a["lastTriggeredAt"].clone())
    );
    assert!(list(&server, &key, "active").iter().all(|x| x["id"] != a["id"]), "not loaded back as active");
}

#[test]
fn alerts_survive_restart_and_sigkill() {
    let server = Server::start(BIN, FAST);
    let key = server.key.clone();
    let p = price_of(&server, "BTCUSDT");
    let first =
        post(&server, &key, &json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(p * 3.0).round()}))
            .ok("create")["data"]
            .clone();
    let server = server.restart(FAST);
    let after: Vec<Value> = list(&server, &key, "active");
    assert_eq!(after.len(), 1);
    assert_eq!(after[0], first, "the same alert, every field");
    // Acknowledged, then killed at once: still there after the restart.
    let second = post(&server, &key, &json!({"symbol":"ETHUSDT","type":"price","direction":"below","price":1}))
        .ok("create before the crash")["data"]["id"]
        .clone();
    let server = server.crash_and_restart(FAST);
    let ids: Vec<Value> = list(&server, &key, "active").iter().map(|a| a["id"].clone()).collect();
    assert_eq!(ids, [first["id"].clone(), second], "nothing acknowledged was lost");
}

#[test]
fn delisting_removes_alerts_and_notifies_the_account() {
    let server = Server::start(BIN, &[FAST, &["--sim-delist", "SOLUSDT@6"]].concat());
    let key = server.key.clone();
    let p = price_of(&server, "SOLUSDT");
    let far = (p * 3.0 * 100.0).round() / 100.0;
    let a = post(&server, &key, &json!({"symbol":"SOLUSDT","type":"price","direction":"above","price":far}))
        .ok("binance")["data"]["id"]
        .clone();
    let b = post(
        &server,
        &key,
        &json!({"symbol":"SOLUSDT","type":"price","direction":"above","price":far,"exchange":"okx"}),
    )
    .ok("okx")["data"]["id"]
        .clone();
    let keep = post(&server, &key, &json!({"symbol":"ETHUSDT","type":"price","direction":"below","price":1}))
        .ok("other")["data"]["id"]
        .clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ids: Vec<Value> = list(&server, &key, "all").iter().map(|x| x["id"].clone()).collect();
        if ids == [keep.clone()] {
            break;
        }
        assert!(Instant::now() < deadline, "delisted alerts still listed: {ids:?}");
        thread::sleep(Duration::from_millis(200));
    }
    let inbox = server.get("/v1/inbox", Some(&key));
    let notices: Vec<Value> = inbox.ok("inbox")["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["kind"] == "alert.delisted")
        .map(|e| e["alertId"].clone())
        .collect();
    assert!(notices.contains(&a) && notices.contains(&b), "{}", inbox.text);
    // The pair is gone from every endpoint: left out of the lists, 404 for single-pair reads.
    for venue in ["binance", "okx"] {
        for path in [
            format!("/v1/exchanges/{venue}/symbols"),
            format!("/v1/levels?exchange={venue}"),
            format!("/v1/levels?exchange={venue}&symbols=SOLUSDT,ETHUSDT"),
            format!("/v1/densities?exchange={venue}"),
        ] {
            let reply = server.get_authed(&path);
            let data = reply.ok(&path)["data"].as_array().cloned().expect("data");
            assert!(!data.iter().any(|s| s["symbol"] == "SOLUSDT"), "{path} still lists SOLUSDT: {}", reply.text);
        }
        for path in [
            format!("/v1/symbols/SOLUSDT?exchange={venue}"),
            format!("/v1/levels/SOLUSDT?exchange={venue}"),
            format!("/v1/densities/SOLUSDT?exchange={venue}"),
        ] {
            server.get_authed(&path).assert_error(404, &format!("symbol 'SOLUSDT' is delisted on {venue}"), &path);
        }
    }
    let bulk = server.get_authed("/v1/levels?exchange=binance&symbols=ETHUSDT");
    assert_eq!(bulk.ok("a listed pair is still served")["data"].as_array().map(Vec::len), Some(1));
    post(&server, &key, &json!({"symbol":"SOLUSDT","type":"price","direction":"above","price":far})).assert_error(
        404,
        "unknown symbol 'SOLUSDT'",
        "no venue lists it any more",
    );
    post(&server, &key, &json!({"symbol":"SOLUSDT","type":"price","direction":"above","price":far,"exchange":"okx"}))
        .assert_error(404, "symbol 'SOLUSDT' is delisted on okx", "delisted venue");
}
