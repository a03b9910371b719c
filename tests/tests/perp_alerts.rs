//! The derivatives alerts of decisions §17 "Alerts" through the real binary on the simulated
//! market: every refusal of the create path with its exact text, the Alert resource's new fields,
//! and a `*` liquidations alert firing on the simulated perpetuals with §17's body. (The exact
//! boundaries — $1M against $999 999.99, a sum once per passing, OI re-armed below 0.8 × pct,
//! funding 0.005 pp back — are the engine's tests; the shard's tests inject a liquidation and a
//! funding change and see each alert fire once.) And a test send of each derivatives type
//! carrying the trigger object a firing would (§16, §17). And a perpetual's listing changes while
//! its pair stays, on one process and through a cluster (PostgreSQL and nats-server started by the
//! test on loopback ports).

use std::time::{Duration, Instant};

use rampart_tests::{allow_private_config, json_receiver, Server, SimVenue, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn post(server: &Server, body: &Value) -> rampart_tests::Reply {
    server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()))
}

fn create(server: &Server, body: &Value) -> Value {
    post(server, body).ok(&format!("create {body}"))["data"].clone()
}

#[test]
fn every_refusal_of_section_17_names_what_is_wrong() {
    let server = Server::start(BIN, FAST);
    let perp = server.get_authed("/v1/perp/BTCUSDT?exchange=binance").ok("perp")["data"].clone();
    let rate8h = perp["funding"]["rate8h"].as_f64().unwrap_or_else(|| panic!("rate8h: {perp}"));
    let below_now = ((rate8h - 0.1) * 1e6).round() / 1e6;
    // A pair the venue lists without a perpetual.
    let with: Vec<String> = server.get_authed("/v1/perp?exchange=binance").ok("perp")["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p["symbol"].as_str().map(str::to_owned))
        .collect();
    let listed = server.get_authed("/v1/exchanges/binance/symbols").ok("symbols")["data"].clone();
    let without = listed
        .as_array()
        .and_then(|l| l.iter().filter_map(|s| s["symbol"].as_str()).find(|s| !with.iter().any(|w| w == s)))
        .expect("a binance pair without a perpetual")
        .to_owned();
    let refusals = [
        (json!({"type":"swap","symbol":"BTCUSDT","direction":"up"}), "invalid type 'swap'. Allowed: price, pct, level, wall, liquidations, oi, funding".to_owned()),
        (json!({"type":"liquidations","symbol":"BTCUSDT","min_usd":1000}), "missing field 'event'".to_owned()),
        (json!({"type":"liquidations","symbol":"BTCUSDT","event":"order","min_usd":50}), "min_usd must be between 100 and 1000000000000".to_owned()),
        (json!({"type":"liquidations","symbol":"BTCUSDT","event":"order","min_usd":500,"window":"5m"}), "field 'window' is only allowed with event 'sum'".to_owned()),
        (json!({"type":"oi","symbol":"BTCUSDT","direction":"up","pct":5,"window":"2h"}), "invalid window '2h'. Allowed: 5m, 15m, 1h, 4h, 1d".to_owned()),
        (json!({"type":"funding","symbol":"BTCUSDT","direction":"above","funding_pct":0.1,"price":5}), "field 'price' is not allowed on a funding alert".to_owned()),
        (json!({"type":"price","symbol":"BTCUSDT","direction":"above","price":1000000,"funding_pct":0.1}), "field 'funding_pct' is not allowed on a price alert".to_owned()),
        (json!({"type":"liquidations","symbol":"BTCUSDT","exchange":"bitget","event":"order","min_usd":1000}), "bitget publishes no liquidations; liquidations alerts are not available on bitget".to_owned()),
        (json!({"type":"liquidations","symbol":"*","exchange":"bitget","event":"order","min_usd":1000}), "bitget publishes no liquidations; liquidations alerts are not available on bitget".to_owned()),
        (json!({"type":"oi","symbol":without,"exchange":"binance","direction":"up","pct":5,"window":"1h"}), format!("'{without}' has no perpetual contract on binance; oi alerts need one")),
        (json!({"type":"price","symbol":"*","exchange":"binance","direction":"above","price":1}), "symbol '*' (every pair of the venue) is allowed for pct, level, wall, liquidations, oi and funding alerts, not price".to_owned()),
    ];
    for (body, message) in refusals {
        post(&server, &body).assert_error(422, &message, &body.to_string());
    }
    // The funding rate moves every second: the refusal names the rate of its moment.
    let body =
        json!({"type":"funding","symbol":"BTCUSDT","exchange":"binance","direction":"above","funding_pct":below_now});
    let message = post(&server, &body).assert_some_error(422, "funding on the near side");
    let now = message
        .strip_prefix("funding_pct must be above the funding rate now ")
        .and_then(|m| m.strip_suffix(" (percent per 8 h) for an 'above' alert"))
        .unwrap_or_else(|| panic!("{message}"));
    let now: f64 = now.parse().unwrap_or_else(|_| panic!("{message}"));
    assert!((now - rate8h).abs() < 0.05 && now > below_now, "{message}, rate8h {rate8h}");
}

#[test]
fn the_alert_resource_shows_the_new_fields_and_null_where_they_do_not_apply() {
    let server = Server::start(BIN, FAST);
    let oi = create(
        &server,
        &json!({"type":"oi","symbol":"ETHUSDT","exchange":"okx","direction":"down","pct":7.5,"window":"4h","min_usd":2000000}),
    );
    assert_eq!(
        (oi["type"].clone(), oi["direction"].clone(), oi["pct"].clone()),
        (json!("oi"), json!("down"), json!(7.5)),
        "{oi}"
    );
    assert_eq!(
        (oi["window"].clone(), oi["minUsd"].clone(), oi["event"].clone()),
        (json!("4h"), json!(2000000), Value::Null),
        "{oi}"
    );
    assert_eq!(oi["fundingPct"], Value::Null, "{oi}");
    let funding = create(
        &server,
        &json!({"type":"funding","symbol":"*","exchange":"bybit","direction":"below","funding_pct":-0.25}),
    );
    assert_eq!(
        (funding["fundingPct"].clone(), funding["pct"].clone(), funding["window"].clone()),
        (json!(-0.25), Value::Null, Value::Null),
        "{funding}"
    );
    assert_eq!(
        (funding["symbol"].clone(), funding["repeat"].clone(), funding["cooldownS"].clone()),
        (json!("*"), json!(true), json!(900)),
        "{funding}"
    );
    let sum = create(
        &server,
        &json!({"type":"liquidations","symbol":"BTCUSDT","event":"sum","direction":"short","min_usd":2500000.5,"window":"15m"}),
    );
    assert_eq!(
        (sum["event"].clone(), sum["direction"].clone(), sum["window"].clone(), sum["minUsd"].clone()),
        (json!("sum"), json!("short"), json!("15m"), json!(2500000.5)),
        "{sum}"
    );
    let price = create(&server, &json!({"type":"price","symbol":"BTCUSDT","direction":"above","price":10000000}));
    assert_eq!(price["fundingPct"], Value::Null, "every alert has every field: {price}");
    // Read back as stored.
    let all = server.get_authed("/v1/alerts?status=all").ok("alerts")["data"].clone();
    for made in [&oi, &funding, &sum] {
        let listed = all.as_array().and_then(|l| l.iter().find(|a| a["id"] == made["id"])).expect("listed");
        assert_eq!(listed, made, "stored and read back the same");
    }
}

#[test]
fn a_universe_order_alert_fires_on_the_simulated_liquidations_with_section_17s_body() {
    let server = Server::start(BIN, FAST);
    let made = create(
        &server,
        &json!({"type":"liquidations","symbol":"*","exchange":"binance","event":"order","min_usd":100,"cooldown_s":0}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let inbox = server.get_authed("/v1/inbox");
        let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
        if let Some(e) = entries.iter().find(|e| e["alertId"] == made["id"]) {
            break e["event"].clone();
        }
        assert!(Instant::now() < deadline, "no liquidation on any binance perpetual in 30 s: {}", inbox.text);
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(body["event"], "alert.triggered", "{body}");
    let alert = &body["alert"];
    assert_eq!(
        (alert["type"].clone(), alert["event"].clone(), alert["symbol"].clone()),
        (json!("liquidations"), json!("order"), json!("*")),
        "{body}"
    );
    assert_eq!((alert["fundingPct"].clone(), alert["minUsd"].clone()), (Value::Null, json!(100)), "{body}");
    let triggers = body["triggers"].as_array().cloned().unwrap_or_default();
    assert!(!triggers.is_empty() && triggers.len() <= 100, "{body}");
    assert_eq!(body["trigger"], triggers[0], "trigger is the first of triggers");
    for t in &triggers {
        let l = &t["liquidation"];
        assert!(l["side"] == "long" || l["side"] == "short", "{t}");
        let (price, qty, usd) = (l["price"].as_f64(), l["qty"].as_f64(), l["usd"].as_f64());
        let (price, qty, usd) = (price.expect("price"), qty.expect("qty"), usd.expect("usd"));
        assert!(usd >= 100.0 && (price * qty / usd - 1.0).abs() < 1e-3, "{t}");
        assert!(l["count"].as_u64().is_some_and(|c| c >= 1), "{t}");
        assert_eq!(l["completeness"], "largest_per_second", "{t}");
        let (time, at) = (t["time"].as_i64().expect("time"), l["time"].as_i64().expect("time"));
        assert!(t["move"].is_null() && time >= at && time - at < 1_000, "the liquidation's time: {t}");
        assert!(t["symbol"].as_str().is_some_and(|s| s.ends_with("USDT")) && t["price"].as_f64().is_some(), "{t}");
    }
}

#[test]
fn with_derivatives_off_no_pair_has_a_perpetual_and_the_three_types_are_refused() {
    let cfg = std::env::temp_dir().join(format!("rampart-derivatives-off-{}.toml", std::process::id()));
    std::fs::write(&cfg, "[derivatives]\nenabled = false\n").expect("write the config");
    let path = cfg.display().to_string();
    let server = Server::start(BIN, &[FAST, &["--config", &path]].concat());
    for body in [
        json!({"type":"liquidations","symbol":"BTCUSDT","event":"order","min_usd":1000}),
        json!({"type":"oi","symbol":"*","exchange":"okx","direction":"up","pct":5,"window":"1h"}),
        json!({"type":"funding","symbol":"ETHUSDT","direction":"above","funding_pct":1}),
    ] {
        post(&server, &body).assert_error(422, "derivatives are off on this server", &body.to_string());
    }
    server.get_authed("/v1/perp/BTCUSDT").assert_error(404, "no perpetual contract for 'BTCUSDT' on binance", "perp");
    let symbol = server.get_authed("/v1/symbols/BTCUSDT").ok("symbol")["data"].clone();
    assert!(symbol["perp"].is_null(), "{symbol}");
    let all = server.get_authed("/v1/perp?exchange=bybit").ok("perp bulk")["data"].clone();
    assert_eq!(all, json!([]), "no pair has a perpetual");
    let health = server.get("/healthz", None).ok("healthz").clone();
    let perps: Vec<&Value> =
        health["exchanges"].as_array().map(|e| e.iter().map(|x| &x["perp"]).collect()).unwrap_or_default();
    assert!(perps.len() == 4 && perps.iter().all(|p| **p == "off"), "{health}");
    // Spot alerts are unchanged.
    create(&server, &json!({"type":"pct","symbol":"BTCUSDT","direction":"any","pct":5,"window":"1d"}));
    let _ = std::fs::remove_file(&cfg);
}

#[test]
fn a_test_send_carries_the_trigger_object_a_firing_would() {
    let (port, hits) = json_receiver();
    let cfg = allow_private_config("perp-test-send");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg]].concat());
    let hook = format!("http://127.0.0.1:{port}/hook");
    let auth = format!("Bearer {}", server.key);
    let cases = [
        (json!({"type":"funding","symbol":"BTCUSDT","exchange":"okx","direction":"above","funding_pct":50}), "funding"),
        (json!({"type":"oi","symbol":"BTCUSDT","exchange":"bybit","direction":"up","pct":400,"window":"5m"}), "oi"),
        (json!({"type":"liquidations","symbol":"*","exchange":"binance","event":"order","min_usd":1e9}), "liquidation"),
    ];
    for (mut body, key) in cases {
        body["webhook_url"] = json!(hook);
        let made = create(&server, &body);
        let id = made["id"].as_str().map(str::to_owned).unwrap_or_else(|| made["id"].to_string());
        let path = format!("/v1/alerts/{id}/test");
        // The value may take a moment after start (a liquidation of the venue's pairs, an OI
        // change needs a watched window): the test goes at the price alone until then.
        let deadline = Instant::now() + Duration::from_secs(40);
        let trigger = loop {
            let sent = hits.lock().expect("hits").len();
            let answer = server.request("POST", &path, Some(&auth), None);
            assert_eq!(answer.ok(&path)["data"]["outcome"], "delivered", "{}", answer.text);
            let got = hits.lock().expect("hits")[sent..].to_vec();
            let body = got.last().cloned().expect("the test body arrived");
            assert_eq!(body["event"], "alert.test", "{body}");
            if body["trigger"].get(key).is_some() {
                break body["trigger"].clone();
            }
            assert!(key == "oi" || Instant::now() < deadline, "no {key} trigger in a test send: {body}");
            if key == "oi" {
                // A 5m window is watched in full only 5 minutes after start: not waited for here.
                assert!(body["trigger"].get("oi").is_none(), "{body}");
                break Value::Null;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        match key {
            "funding" => {
                let f = &trigger["funding"];
                assert!(f["rate8h"].is_number() && f["intervalH"].is_number() && f["nextTime"].is_number(), "{f}");
            }
            "liquidation" => {
                let l = &trigger["liquidation"];
                assert!(l["usd"].is_number() && l["count"] == 1, "{trigger}");
                assert_eq!(l["completeness"], "largest_per_second", "{trigger}");
                assert!(trigger["symbol"].as_str().is_some_and(|s| s.ends_with("USDT")), "a `*` test names its pair");
            }
            _ => {}
        }
    }
}

/// The live feed (decisions §17 item 1): the four venues' perpetuals read from `rampart
/// sim-venue`'s real wire formats (Binance's open interest polled over REST), served as the
/// simulated feed's are, `perp: up` on `/healthz`, an injected liquidation found in the lists in
/// the spot pair's units, and `order` alerts firing on it once: one on $1M and not another on
/// $1M + $10. OKX's funding, pushed only every 30 to 90 s, is polled too (here every second), so
/// it is never older than the poll.
#[test]
fn the_live_feed_reads_every_venues_perpetuals_and_alerts_on_them() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8"]);
    let venues = ["binance", "bybit", "okx", "bitget"];
    let extra = "[derivatives]\nbinance_oi_poll_s = 2\nokx_funding_poll_s = 1\n";
    let config = sim.config(&venues, 8, extra).display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "2"]);
    for v in venues {
        server.wait_venue(v, "perp up", 30, |h| h["state"] == "ok" && h["perp"] == "up");
        let deadline = Instant::now() + Duration::from_secs(20);
        let perp = loop {
            let p = server.get_authed(&format!("/v1/perp/BTCUSDT?exchange={v}")).ok("perp")["data"].clone();
            // Binance's OI comes with its first poll; OKX sends no mark (none of §17's channels).
            let mark = p["markPrice"].as_f64().is_some() || v == "okx";
            if mark && p["oi"]["base"].as_f64().is_some() && p["funding"]["rate8h"].as_f64().is_some() {
                break p;
            }
            assert!(Instant::now() < deadline, "{v}: no mark, OI and funding in 20 s: {p}");
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(perp["funding"]["stale"], false, "{v}: {perp}");
        assert!(perp["oi"]["usd"].as_f64().is_some_and(|u| u > 0.0), "{v}: {perp}");
    }
    // Five looks 2 s apart, each finding OKX's funding at most 5 s old: the pushes alone (30 to
    // 90 s apart) could make at most three of them so.
    for _ in 0..5 {
        let answer = server.get_authed("/v1/perp/BTCUSDT?exchange=okx").ok("okx perp").clone();
        let (ts, time) = (answer["ts"].as_i64().unwrap_or(0), answer["data"]["funding"]["time"].as_i64().unwrap_or(0));
        assert!(ts - time <= 5_000, "OKX funding {} ms old: {answer:?}", ts - time);
        std::thread::sleep(Duration::from_millis(2_000));
    }
    let once = create(
        &server,
        &json!({"type":"liquidations","symbol":"BTCUSDT","exchange":"bybit","event":"order","direction":"long","min_usd":1000000}),
    );
    let over = create(
        &server,
        &json!({"type":"liquidations","symbol":"BTCUSDT","exchange":"bybit","event":"order","direction":"long","min_usd":1000010}),
    );
    sim.control("liquidation", &json!({"venue":"bybit","symbol":"BTCUSDT","side":"long","usd":1000000}));
    let deadline = Instant::now() + Duration::from_secs(20);
    let fired = loop {
        let inbox = server.get_authed("/v1/inbox");
        let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
        if let Some(e) = entries.iter().find(|e| e["alertId"] == once["id"]) {
            break e["event"].clone();
        }
        assert!(Instant::now() < deadline, "the $1M liquidation fired nothing in 20 s: {}", inbox.text);
        std::thread::sleep(Duration::from_millis(200));
    };
    let l = &fired["trigger"]["liquidation"];
    assert_eq!((l["side"].clone(), l["completeness"].clone()), (json!("long"), json!("all")), "{fired}");
    let usd = l["usd"].as_f64().expect("usd");
    assert!((1_000_000.0..1_001_000.0).contains(&usd), "worth at least $1M at the mark: {fired}");
    // The lists read the pair's ring (the shard writes each liquidation as it takes it).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list = server.get_authed("/v1/liquidations/BTCUSDT?exchange=bybit").ok("list")["data"].clone();
        if list.as_array().is_some_and(|l| l.iter().any(|x| x["side"] == "long" && x["usd"].as_f64() == Some(usd))) {
            break;
        }
        assert!(Instant::now() < deadline, "the liquidation is not listed: {list}");
        std::thread::sleep(Duration::from_millis(100));
    }
    if usd < 1_000_010.0 {
        let inbox = server.get_authed("/v1/inbox").ok("inbox")["data"].clone();
        let entries = inbox.as_array().cloned().unwrap_or_default();
        assert!(!entries.iter().any(|e| e["alertId"] == over["id"]), "more than the liquidation fired: {inbox}");
    }
}

/// Waits up to `secs` for `done` on the inbox's entries; returns them.
fn inbox_until(server: &Server, secs: u64, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let inbox = server.get_authed("/v1/inbox");
        let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
        if done(&entries) {
            return entries;
        }
        assert!(Instant::now() < deadline, "{what} not in {secs} s: {}", inbox.text);
        // Once a second: the key's plan allows 120 requests a minute.
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Waits up to `secs` for `GET /v1/perp/{symbol}` on Binance to answer `status`.
fn perp_status_within(server: &Server, symbol: &str, status: u16, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = server.get_authed(&format!("/v1/perp/{symbol}?exchange=binance"));
        if r.status == status {
            return;
        }
        assert!(Instant::now() < deadline, "{symbol}'s perpetual answers {} after {secs} s: {}", r.status, r.text);
        // Once a second: the key's plan allows 120 requests a minute.
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A `*` liquidations alert's firing naming `symbol`, once the simulator liquidated `usd` on it.
fn star_fires_on(server: &Server, sim: &SimVenue, star: &Value, symbol: &str, usd: u64) {
    sim.control("liquidation", &json!({"venue":"binance","symbol":symbol,"side":"long","usd":usd}));
    inbox_until(server, 20, &format!("the `*` alert's firing on {symbol}"), |entries| {
        entries.iter().any(|e| {
            let triggers = e["event"]["triggers"].as_array().cloned().unwrap_or_default();
            e["alertId"] == star["id"] && triggers.iter().any(|t| t["symbol"] == symbol)
        })
    });
}

/// decisions §17 "Listings", live: the listing refresh notices a perpetual delisted while its
/// spot pair stays (after two refreshes, as a pair's delisting): its data answers "no perpetual
/// contract", its one-pair derivatives alert is removed with an `alert.delisted` notice saying
/// `"reason":"perp"`, the pair's price alert and the venue's `*` alert stay. A pair that gains a
/// perpetual after start is served and joins the `*` alert; a perpetual listed again is served
/// again and back in the `*` alert.
#[test]
fn a_perpetual_delisted_gained_or_listed_again_while_its_pair_stays() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8"]);
    sim.control("perp", &json!({"venue":"binance","symbol":"ETHUSDT","listed":false}));
    let config = sim.config(&["binance"], 8, "[derivatives]\nbinance_oi_poll_s = 2\n").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config]);
    server.wait_venue("binance", "perp up", 30, |h| h["state"] == "ok" && h["perp"] == "up");
    listing_changes(&server, &sim);
}

/// The same through a cluster (issue #61, item 7): the market node that owns the partition runs
/// the listing refresh, its shard and its fenced writer; the api node serves the change from the
/// market node's snapshots and takes the alerts.
#[test]
fn a_perpetual_delisted_gained_or_listed_again_through_a_cluster() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8"]);
    sim.control("perp", &json!({"venue":"binance","symbol":"ETHUSDT","listed":false}));
    let config = sim.config(&["binance"], 8, "[derivatives]\nbinance_oi_poll_s = 2\n").display().to_string();
    let cluster = rampart_tests::SmallCluster::start(BIN, &config, "binance");
    cluster.market.wait_venue("binance", "the market node's perpetual sessions up", 60, |h| h["perp"] == "up");
    cluster.api.wait_venue("binance", "perpetuals relayed", 60, |h| h["perp"] == "up");
    listing_changes(&cluster.api, &sim);
}

/// decisions §17 "Listings", live, asked of `server`: the listing refresh notices a perpetual
/// delisted while its spot pair stays (after two refreshes, as a pair's delisting): its data
/// answers "no perpetual contract", its one-pair derivatives alert is removed with an
/// `alert.delisted` notice saying `"reason":"perp"`, the pair's price alert and the venue's `*`
/// alert stay. A pair that gains a perpetual after start (ETHUSDT, unlisted at the venue before
/// the start) is served and joins the `*` alert; a perpetual listed again is served again and
/// back in the `*` alert.
fn listing_changes(server: &Server, sim: &SimVenue) {
    perp_status_within(server, "BTCUSDT", 200, 10);
    assert_eq!(server.get_authed("/v1/perp/ETHUSDT?exchange=binance").status, 404, "no perpetual at start");
    let one = create(
        server,
        &json!({"type":"liquidations","symbol":"BTCUSDT","exchange":"binance","event":"order","direction":"long","min_usd":100}),
    );
    let price =
        create(server, &json!({"type":"price","symbol":"BTCUSDT","exchange":"binance","direction":"below","price":1}));
    let star = create(
        server,
        &json!({"type":"liquidations","symbol":"*","exchange":"binance","event":"order","direction":"long","min_usd":100,"cooldown_s":0}),
    );
    sim.control("perp", &json!({"venue":"binance","symbol":"BTCUSDT","listed":false}));
    sim.control("perp", &json!({"venue":"binance","symbol":"ETHUSDT","listed":true}));
    // Gained at the next refresh (every 10 s), delisted at the second.
    perp_status_within(server, "ETHUSDT", 200, 25);
    let entries = inbox_until(server, 35, "the perpetual's delisting notice", |entries| {
        entries.iter().any(|e| e["kind"] == "alert.delisted" && e["alertId"] == one["id"])
    });
    let notice = entries.iter().find(|e| e["alertId"] == one["id"]).expect("found above");
    assert_eq!(notice["event"]["reason"], "perp", "{notice}");
    assert_eq!(notice["event"]["alert"]["symbol"], "BTCUSDT", "{notice}");
    perp_status_within(server, "BTCUSDT", 404, 5);
    let listed = server.get_authed("/v1/alerts?status=all").ok("alerts")["data"].clone();
    let ids: Vec<Value> = listed.as_array().cloned().unwrap_or_default().iter().map(|a| a["id"].clone()).collect();
    assert!(!ids.contains(&one["id"]), "the one-pair derivatives alert is removed: {listed}");
    assert!(ids.contains(&price["id"]) && ids.contains(&star["id"]), "the others stay: {listed}");
    assert_eq!(server.get_authed("/v1/symbols/BTCUSDT").status, 200, "the spot pair stays");
    star_fires_on(server, sim, &star, "ETHUSDT", 2_000_000);
    sim.control("perp", &json!({"venue":"binance","symbol":"BTCUSDT","listed":true}));
    perp_status_within(server, "BTCUSDT", 200, 25);
    star_fires_on(server, sim, &star, "BTCUSDT", 3_000_000);
}
