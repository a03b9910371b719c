//! Structure alerts through the real binary and the venue simulator (`decisions.md` §15): a
//! level approached, touched and broken by scripted trades, each alert firing once with the
//! Level in its body; filters that exclude the level do not fire; the Alert shows every field.

use std::time::{Duration, Instant};

use rampart_tests::{Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
const PAIR: &str = "BTCUSDT";

/// The live feed from the simulator, one venue.
fn live() -> (SimVenue, Server) {
    rampart_tests::live_binance(BIN)
}

fn create(server: &Server, body: &Value) -> Value {
    let reply = server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()));
    reply.ok(&format!("create {body}"))["data"].clone()
}

fn price(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// The nearest resistance (formed by a high) at least `min_gap` above the price: no level of
/// its side stands between the price and it.
fn nearest_resistance(server: &Server) -> (Value, f64) {
    let body = server.get_authed(&format!("/v1/levels/{PAIR}?exchange=binance")).ok("levels").clone();
    let current =
        price(&server.get_authed(&format!("/v1/symbols/{PAIR}?exchange=binance")).ok("symbol")["data"]["price"]);
    let levels = body["data"].as_array().cloned().unwrap_or_default();
    let highs = levels.iter().filter(|l| l["side"] == "high" && price(&l["price"]) > current);
    let nearest = highs.min_by(|a, b| price(&a["price"]).total_cmp(&price(&b["price"]))).cloned();
    (nearest.unwrap_or_else(|| panic!("a resistance above {current}: {body}")), current)
}

fn trade(sim: &SimVenue, at: f64) {
    sim.control("trade", &json!({"venue":"binance","symbol":PAIR,"price":format!("{at:.2}")}));
}

/// Waits until the inbox holds an `alert.triggered` entry of `id`; returns its body.
fn fired(server: &Server, id: &Value, what: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let inbox = server.get_authed("/v1/inbox");
        let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
        let mine: Vec<&Value> = entries.iter().filter(|e| e["alertId"] == *id).collect();
        if let Some(e) = mine.first() {
            assert_eq!(mine.len(), 1, "{what}: fired once: {mine:?}");
            return e["event"].clone();
        }
        assert!(Instant::now() < deadline, "{what}: no firing in 10 s; inbox {}", inbox.text);
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn alert(server: &Server, id: &Value) -> Value {
    let all = server.get_authed("/v1/alerts?status=all");
    let list = all.ok("alerts")["data"].as_array().cloned().unwrap_or_default();
    list.into_iter().find(|a| a["id"] == *id).unwrap_or_else(|| panic!("alert {id} listed"))
}

#[test]
fn a_level_approached_touched_and_broken_fires_each_alert_once_with_the_level() {
    let (sim, server) = live();
    let (level, current) = nearest_resistance(&server);
    let at = price(&level["price"]);
    assert!(at > current * 1.006, "the nearest resistance {at} is more than the approach band above {current}");
    let base = json!({"type":"level","symbol":PAIR,"exchange":"binance","direction":"above"});
    let with = |extra: Value| {
        let mut b = base.clone();
        if let Some(o) = b.as_object_mut() {
            o.extend(extra.as_object().cloned().unwrap_or_default());
        }
        b
    };
    let approach = create(&server, &with(json!({"event":"approach","within_pct":0.5})));
    let touch = create(&server, &with(json!({"event":"touch"})));
    let broken = create(&server, &with(json!({"event":"break"})));
    // Filters that exclude this level: supports only; stronger than it; other timeframes.
    let support = create(&server, &with(json!({"event":"break","direction":"below"})));
    let strength = level["strength"].as_i64().expect("strength");
    let stronger = create(&server, &with(json!({"event":"break","min_strength":strength + 1})));
    let others: Vec<&str> = ["15m", "1h", "4h", "1d", "1w", "dmax", "dmin", "wmax", "wmin"]
        .into_iter()
        .filter(|t| level["timeframe"] != *t)
        .collect();
    let elsewhere = create(&server, &with(json!({"event":"break","timeframes":others})));
    // The Alert resource: every field, the structure ones set.
    assert_eq!(
        (
            &approach["type"],
            &approach["event"],
            &approach["direction"],
            &approach["withinPct"],
            &approach["minStrength"]
        ),
        (&json!("level"), &json!("approach"), &json!("above"), &json!(0.5), &json!(1))
    );
    assert_eq!(approach["timeframes"].as_array().map(Vec::len), Some(9), "{approach}");
    for field in ["price", "pct", "window", "minUsd", "minRatio", "maxDistPct", "minAgeS"] {
        assert_eq!(approach[field], Value::Null, "{field}: {approach}");
    }
    assert_eq!((&touch["withinPct"], &broken["event"]), (&Value::Null, &json!("break")));

    trade(&sim, at * 0.996);
    let body = fired(&server, &approach["id"], "approach");
    assert_eq!(body["trigger"]["level"], level, "the Level as GET /v1/levels showed it: {body}");
    assert_eq!((&body["trigger"]["symbol"], &body["alert"]["event"]), (&json!(PAIR), &json!("approach")));
    assert_eq!((&body["alert"]["type"], &body["alert"]["withinPct"]), (&json!("level"), &json!(0.5)));
    // The scripted trade (the simulator rounds it to the pair's tick).
    assert!((price(&body["trigger"]["price"]) - at * 0.996).abs() < at * 0.0002, "{body}");

    trade(&sim, at * 0.9998);
    let body = fired(&server, &touch["id"], "touch");
    assert_eq!((&body["trigger"]["level"], &body["alert"]["event"]), (&level, &json!("touch")));

    trade(&sim, at * 1.001);
    let body = fired(&server, &broken["id"], "break");
    assert_eq!((&body["trigger"]["level"], &body["alert"]["event"]), (&level, &json!("break")));
    assert!(price(&body["trigger"]["price"]) > at, "{body}");

    // Each fired once and is triggered; the excluded ones still wait.
    for (a, what) in [(&approach, "approach"), (&touch, "touch"), (&broken, "break")] {
        let now = alert(&server, &a["id"]);
        assert_eq!((&now["status"], &now["triggerCount"]), (&json!("triggered"), &json!(1)), "{what}: {now}");
        fired(&server, &a["id"], what);
    }
    for (a, what) in [(&support, "supports only"), (&stronger, "stronger"), (&elsewhere, "other timeframes")] {
        let now = alert(&server, &a["id"]);
        assert_eq!((&now["status"], &now["triggerCount"]), (&json!("active"), &json!(0)), "{what}: {now}");
    }
}

#[test]
fn level_alert_refusals_name_the_field() {
    let server = Server::start(BIN, rampart_tests::FAST);
    let auth = format!("Bearer {}", server.key);
    for (body, status, message) in [
        (json!({"type":"level","symbol":PAIR}), 422, "missing field 'event'"),
        (
            json!({"type":"level","symbol":PAIR,"event":"near"}),
            422,
            "invalid event 'near' for a level alert. Allowed: approach, touch, break",
        ),
        (
            json!({"type":"level","symbol":PAIR,"event":"approach","within_pct":20}),
            422,
            "within_pct must be between 0.05 and 10",
        ),
        (
            json!({"type":"level","symbol":PAIR,"event":"break","price":5}),
            422,
            "field 'price' is not allowed on a level alert",
        ),
        (
            json!({"type":"price","symbol":PAIR,"direction":"above","price":1_000_000,"event":"break"}),
            422,
            "field 'event' is not allowed on a price alert",
        ),
        (json!({"type":"level","symbol":"NOPEUSDT","event":"break"}), 404, "unknown symbol 'NOPEUSDT'"),
    ] {
        let reply = server.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string()));
        reply.assert_error(status, message, &body.to_string());
    }
}
