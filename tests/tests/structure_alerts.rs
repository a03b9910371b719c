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
    // Repeating approaches: one without a cooldown fires at each approach, one with an hour's
    // cooldown once.
    let again = create(&server, &with(json!({"event":"approach","within_pct":0.5,"repeat":true})));
    let quiet = create(&server, &with(json!({"event":"approach","within_pct":0.5,"repeat":true,"cooldown_s":3600})));
    assert_eq!((&quiet["cooldownS"], &approach["cooldownS"]), (&json!(3600), &json!(0)), "{quiet}");
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
    // Away by more than the band and its 0.1 % re-arm, and back into the band.
    trade(&sim, at * 0.99);
    trade(&sim, at * 0.996);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alert(&server, &again["id"])["triggerCount"] != json!(2) {
        assert!(
            Instant::now() < deadline,
            "the repeating approach did not fire again: {}",
            alert(&server, &again["id"])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let held = alert(&server, &quiet["id"]);
    assert_eq!(
        (&held["status"], &held["triggerCount"]),
        (&json!("active"), &json!(1)),
        "the cooldown held it back: {held}"
    );

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

/// The wall's entry in a firing body, checked against the wall placed.
fn wall_of(body: &Value, side: &str, at: &str) -> Value {
    let w = body["trigger"]["wall"].clone();
    assert_eq!((&w["side"], w["price"].as_f64()), (&json!(side), at.parse::<f64>().ok()), "{body}");
    for field in ["qty", "usd", "dist", "ratio", "age", "lifetimeS"] {
        assert!(w[field].is_number(), "{field}: {body}");
    }
    w
}

#[test]
fn a_wall_placed_pulled_and_another_filled_fire_each_alert_once_with_the_wall() {
    let (sim, server) = live();
    let truth = sim.get(&format!("book?venue=binance&symbol={PAIR}"));
    let size = |side: &str| -> f64 { truth[side][3][1].as_str().and_then(|s| s.parse().ok()).expect("a true size") };
    let base = json!({"type":"wall","symbol":PAIR,"exchange":"binance","max_dist_pct":50});
    let with = |extra: Value| {
        let mut b = base.clone();
        if let Some(o) = b.as_object_mut() {
            o.extend(extra.as_object().cloned().unwrap_or_default());
        }
        b
    };
    let appeared = create(&server, &with(json!({"event":"appeared","direction":"bid"})));
    let pulled = create(&server, &with(json!({"event":"pulled","direction":"bid"})));
    let filled = create(&server, &with(json!({"event":"filled","direction":"ask"})));
    // Filters that exclude the walls below: too small a value asked for; the other side.
    let rich = create(&server, &with(json!({"event":"pulled","min_usd":1_000_000_000_000_i64})));
    let asks = create(&server, &with(json!({"event":"pulled","direction":"ask"})));
    assert_eq!(
        (&appeared["type"], &appeared["event"], &appeared["direction"]),
        (&json!("wall"), &json!("appeared"), &json!("bid"))
    );
    assert_eq!((appeared["maxDistPct"].as_f64(), appeared["minUsd"].as_f64()), (Some(50.0), Some(0.0)), "{appeared}");
    for field in ["price", "pct", "window", "withinPct", "minStrength", "timeframes", "minRatio"] {
        assert_eq!(appeared[field], Value::Null, "{field}: {appeared}");
    }
    assert_eq!((rich["minUsd"].as_f64(), &appeared["minAgeS"]), (Some(1e12), &json!(0)), "{rich}");

    // A bid far below the price, placed: appeared; removed with no trade near it: pulled.
    let qty = format!("{}", (size("bids") * 300.0).ceil());
    let placed = sim.control("level", &json!({"venue":"binance","symbol":PAIR,"side":"bid","depth":5,"qty":qty}));
    let bid = placed["price"].as_str().expect("placed price").to_owned();
    let body = fired(&server, &appeared["id"], "appeared");
    let w = wall_of(&body, "bid", &bid);
    assert_eq!((&w["reason"], &body["alert"]["event"]), (&Value::Null, &json!("appeared")), "{body}");
    sim.control("level", &json!({"venue":"binance","symbol":PAIR,"side":"bid","price":bid,"qty":"0"}));
    let body = fired(&server, &pulled["id"], "pulled");
    assert_eq!(wall_of(&body, "bid", &bid)["reason"], "pulled", "{body}");

    // An ask that a trade reaches before it goes: filled.
    let qty = format!("{}", (size("asks") * 300.0).ceil());
    let placed = sim.control("level", &json!({"venue":"binance","symbol":PAIR,"side":"ask","depth":5,"qty":qty}));
    let ask = placed["price"].as_str().expect("placed price").to_owned();
    // Seen standing by a scan (every 2 s) before it goes.
    std::thread::sleep(Duration::from_millis(2_500));
    sim.control("trade", &json!({"venue":"binance","symbol":PAIR,"price":ask}));
    std::thread::sleep(Duration::from_millis(300));
    sim.control("level", &json!({"venue":"binance","symbol":PAIR,"side":"ask","price":ask,"qty":"0"}));
    let body = fired(&server, &filled["id"], "filled");
    assert_eq!(wall_of(&body, "ask", &ask)["reason"], "filled", "{body}");

    for (a, what) in [(&appeared, "appeared"), (&pulled, "pulled"), (&filled, "filled")] {
        let now = alert(&server, &a["id"]);
        assert_eq!((&now["status"], &now["triggerCount"]), (&json!("triggered"), &json!(1)), "{what}: {now}");
    }
    for (a, what) in [(&rich, "too rich"), (&asks, "asks, none pulled")] {
        let now = alert(&server, &a["id"]);
        assert_eq!((&now["status"], &now["triggerCount"]), (&json!("active"), &json!(0)), "{what}: {now}");
    }
}

#[test]
fn wall_alerts_count_against_the_density_cap_not_the_price_cap() {
    let server = Server::start(BIN, rampart_tests::FAST);
    let key = server.create_key("developer-lite", None);
    server.await_key(&key);
    let auth = format!("Bearer {key}");
    let post = |body: &Value| server.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string()));
    // developer-lite: 10 density alerts, 50 price alerts.
    for i in 0..10 {
        post(&json!({"type":"wall","symbol":PAIR,"event":"pulled","note":format!("{i}")})).ok("a wall alert");
    }
    post(&json!({"type":"wall","symbol":PAIR,"event":"filled"})).assert_error(
        422,
        "active density-alert limit reached (10 on plan developer-lite)",
        "the 11th wall alert",
    );
    for i in 0..50 {
        post(&json!({"type":"level","symbol":PAIR,"event":"break","note":format!("{i}")})).ok("a level alert");
    }
    post(&json!({"type":"level","symbol":PAIR,"event":"break"})).assert_error(
        422,
        "active price-alert limit reached (50 on plan developer-lite)",
        "the 51st price or level alert",
    );
    let free = server.create_key("free", None);
    server.await_key(&free);
    let reply = server.request(
        "POST",
        "/v1/alerts",
        Some(&format!("Bearer {free}")),
        Some(&json!({"type":"wall","symbol":PAIR,"event":"pulled"}).to_string()),
    );
    assert_eq!(reply.status, 403, "the free plan has no API: {reply:?}");
}
