//! The site's density and market alerts (`decisions.md` §10) through the site's routes and their
//! internal interface (`rampart site-alerts`, the same code the site's pages call) and the real
//! binary on the live feed against the venue simulator: a density alert, a wall alert with event
//! `appeared` since §15 (listed by `GET /v1/alerts`), fires when a wall is placed (`/sim/level`)
//! and not again while it stands, and again once it vanished and came back; a market alert
//! fires when a trade moves the board across its threshold; firings reach the inbox and never a
//! webhook; a market alert on the perpetuals' open interest (§17) fires when it jumps at the
//! venue. Every refusal of the interface, and the per-kind caps.

use std::process::Output;
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{describe_output, Server, SimVenue, SiteSession};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
const SYMBOL: &str = "BTCUSDT";

fn created(server: &Server, body: &Value) -> Value {
    let out = server.site_alerts(&["create", "--key", &server.key, &body.to_string()]);
    assert!(out.status.success(), "create {body}: {}", describe_output(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("the created alert as JSON");
    v["data"].clone()
}

fn refused(out: &Output, message: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(message), "expected '{message}' in: {stderr}");
}

fn inbox(server: &Server, kind: &str, alert: &Value) -> Vec<Value> {
    let all = server.get_authed("/v1/inbox?limit=1000");
    let data = all.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
    data.into_iter().filter(|e| e["kind"] == kind && e["alertId"] == *alert).collect()
}

/// Waits until the inbox holds `n` entries of `kind` for `alert`.
fn await_inbox(server: &Server, kind: &str, alert: &Value, n: usize, secs: u64) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let entries = inbox(server, kind, alert);
        if entries.len() >= n {
            return entries;
        }
        assert!(Instant::now() < deadline, "{n} {kind} entries for alert {alert} not seen in {secs} s: {entries:?}");
        thread::sleep(Duration::from_millis(200));
    }
}

fn price_of(server: &Server) -> f64 {
    let body = server.get_authed(&format!("/v1/symbols/{SYMBOL}?exchange=binance"));
    body.ok("symbol")["data"]["price"].as_f64().expect("a price")
}

/// Waits until rampart's walls of the pair do (`present`) or do not show a bid at `price`.
fn await_wall(server: &Server, price: f64, present: bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = server.get_authed(&format!("/v1/densities/{SYMBOL}?exchange=binance"));
        let walls = if r.status == 200 { r.ok("densities")["data"]["walls"].as_array().cloned() } else { None };
        let shown = walls
            .unwrap_or_default()
            .iter()
            .any(|w| w["side"] == "bid" && w["price"].as_f64().is_some_and(|x| (x - price).abs() < 1e-9));
        if shown == present {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the wall at {price} did not {} within 15 s",
            if present { "show" } else { "go" }
        );
        thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn density_and_market_alerts_fire_on_the_live_feed() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 8, "").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 30, |h| h["state"] == "ok");

    // A wall worth far more than anything the simulated book holds.
    let truth = sim.get(&format!("book?venue=binance&symbol={SYMBOL}"));
    let level_qty: f64 = truth["bids"][3][1].as_str().and_then(|s| s.parse().ok()).expect("a true bid size");
    let wall_qty = (level_qty * 300.0).ceil().max(1.0);
    let min_usd = (wall_qty * price_of(&server) * 0.5).floor();
    // Made on the site: each is a wall alert with event `appeared` (decisions.md §15).
    let (_, site) = SiteSession::signin(&server, &server.key);
    let site = site.expect("signed in");
    let density = |body: Value| {
        let r = site.change(&server, "POST", "/site/site-alerts", Some(&body));
        assert_eq!(r.status, 200, "{body}: {}", r.text);
        r.body["data"].clone()
    };
    let pair = density(
        json!({"type":"density","exchange":"binance","symbol":SYMBOL,"side":"bid","min_usd":min_usd,"repeat":true}),
    );
    let venue_wide = density(json!({"type":"density","exchange":"binance","min_usd":min_usd}));
    assert_eq!(
        (&pair["type"], &pair["event"], &pair["direction"]),
        (&json!("wall"), &json!("appeared"), &json!("bid"))
    );
    assert_eq!(
        (&pair["webhookUrl"], pair["minUsd"].as_f64(), pair["maxDistPct"].as_f64()),
        (&Value::Null, Some(min_usd), Some(5.0))
    );
    assert_eq!((pair["status"].as_str(), venue_wide["symbol"].as_str()), (Some("active"), Some("*")), "{venue_wide}");

    let placed = sim.control(
        "level",
        &json!({"venue":"binance","symbol":SYMBOL,"side":"bid","depth":5,"qty":format!("{wall_qty}")}),
    );
    let text = placed["price"].as_str().expect("placed price").to_owned();
    let wall_price: f64 = text.parse().expect("a number");
    const FIRED: &str = "alert.triggered";
    let first = await_inbox(&server, FIRED, &pair["id"], 1, 20);
    let trigger = &first[0]["event"]["trigger"];
    assert_eq!(trigger["wall"]["price"].as_f64(), Some(wall_price), "{trigger}");
    assert_eq!((trigger["wall"]["side"].as_str(), trigger["symbol"].as_str()), (Some("bid"), Some(SYMBOL)));
    assert!(trigger["wall"]["usd"].as_f64().is_some_and(|u| u >= min_usd), "{trigger}");
    let wide = await_inbox(&server, FIRED, &venue_wide["id"], 1, 10);
    assert_eq!(wide[0]["event"]["triggers"][0]["symbol"], SYMBOL, "{}", wide[0]);
    // Standing through several more scans (one per book every 2 s): no second firing.
    thread::sleep(Duration::from_secs(5));
    assert_eq!(inbox(&server, FIRED, &pair["id"]).len(), 1, "once per appearance");
    assert_eq!(inbox(&server, FIRED, &venue_wide["id"]).len(), 1);

    // Gone, then back: the repeating alerts fire again.
    sim.control("level", &json!({"venue":"binance","symbol":SYMBOL,"side":"bid","price":text,"qty":"0"}));
    await_wall(&server, wall_price, false);
    sim.control(
        "level",
        &json!({"venue":"binance","symbol":SYMBOL,"side":"bid","price":text,"qty":format!("{wall_qty}")}),
    );
    await_inbox(&server, FIRED, &pair["id"], 2, 20);
    // A venue-wide density alert is a `*` wall alert, which repeats (issue #58): it fires again.
    assert_eq!(venue_wide["repeat"], true, "{venue_wide}");
    await_inbox(&server, FIRED, &venue_wide["id"], 2, 20);
    // Listed with the account's alerts by the API; not among the site's market alerts.
    let api = server.get_authed("/v1/alerts?status=all");
    let list = api.ok("alerts")["data"].clone();
    let status =
        |id: &Value| list.as_array().and_then(|a| a.iter().find(|x| x["id"] == *id)).map(|x| x["status"].clone());
    assert_eq!(status(&venue_wide["id"]), Some(json!("active")), "{list}");
    assert_eq!(status(&pair["id"]), Some(json!("active")), "{list}");
    assert_eq!(site.get(&server, "/site/site-alerts").body["data"], json!([]), "no market alert yet");

    market_alert_fires(&sim, &server);
}

/// `up5` over 5m one above its current value; a trade 8 % up on the pair with the lowest
/// change moves it there. Through the site: an alert at the current value is refused with the
/// value in its message (it could not fire until the number had gone back), and a repeating one
/// that fired is listed as waiting to re-arm while the number stays at its threshold.
fn market_alert_fires(sim: &SimVenue, server: &Server) {
    let board = server.get_authed("/v1/market?exchange=binance&interval=5m");
    let up5 = board.ok("market")["data"]["up5"].as_f64().expect("up5");
    let alert = created(
        server,
        &json!({"type":"market","exchange":"binance","number":"up5","interval":"5m","direction":"above","threshold":up5 + 1.0}),
    );
    let (_, site) = SiteSession::signin(server, &server.key);
    let site = site.expect("signed in");
    let at_value = json!({"type":"market","exchange":"binance","number":"up5","interval":"5m","direction":"above","threshold":up5});
    site.change(server, "POST", "/site/site-alerts", Some(&at_value)).assert_error(
        422,
        &format!(
            "The count of pairs up 5 % or more on binance (5m) is {up5} now, already at or above {up5}: a market alert \
             fires when the number reaches its threshold from the other side, so this one could not fire until the \
             number had gone back. Choose a threshold above {up5}."
        ),
        "a market alert at the number's value",
    );
    let repeating = json!({"type":"market","exchange":"binance","number":"up5","interval":"5m","direction":"above",
                           "threshold":up5 + 1.0,"repeat":true});
    let repeating = site.change(server, "POST", "/site/site-alerts", Some(&repeating));
    assert_eq!(repeating.status, 200, "{}", repeating.text);
    let repeating = repeating.body["data"]["id"].clone();
    let listed = |id: &Value| {
        let list = site.get(server, "/site/site-alerts");
        list.body["data"].as_array().and_then(|a| a.iter().find(|x| x["id"] == *id).cloned()).unwrap_or_default()
    };
    assert_eq!(listed(&repeating)["waiting"], json!(false), "armed below its threshold");
    // Taken by the board thread at its next build (every second) before the trade.
    thread::sleep(Duration::from_millis(2_500));
    assert!(inbox(server, "market.triggered", &alert["id"]).is_empty(), "nothing crossed yet");
    let ranking = server.get_authed("/v1/rankings/all?exchange=binance&metric=change&interval=5m&order=asc&limit=1");
    let lowest = ranking.ok("ranking")["data"][0].clone();
    let symbol = lowest["symbol"].as_str().expect("a symbol").to_owned();
    let p = lowest["price"].as_f64().expect("a price");
    sim.control("trade", &json!({"venue":"binance","symbol":symbol,"price":format!("{:.2}", p * 1.08)}));
    let fired = await_inbox(server, "market.triggered", &alert["id"], 1, 20);
    let event = &fired[0]["event"];
    assert!(event["value"].as_f64().is_some_and(|v| v >= up5 + 1.0), "{event}");
    assert_eq!(event["alert"]["status"], "triggered", "{event}");
    await_inbox(server, "market.triggered", &repeating, 1, 20);
    let now = listed(&repeating);
    assert_eq!((&now["status"], &now["waiting"]), (&json!("active"), &json!(true)), "fired, waits to re-arm: {now}");
    assert_eq!(listed(&alert["id"]).get("waiting"), None, "a triggered alert neither waits nor is armed");
    thread::sleep(Duration::from_secs(2));
    assert_eq!(inbox(server, "market.triggered", &alert["id"]).len(), 1, "a non-repeating alert fires once");
    inbox_pages(server);
}

/// A market alert on a perpetuals' number of the board (decisions.md §17 "The board"): the summed
/// open interest. One at the number's value is refused with the value in words; one 25 % above
/// it fires once when BTCUSDT's open interest jumps at the venue (Binance's polled every second
/// here), with the board's value in the firing.
#[test]
fn a_market_alert_fires_on_the_perpetuals_open_interest() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 8, "[derivatives]\nbinance_oi_poll_s = 1\n").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "perp up", 30, |h| h["state"] == "ok" && h["perp"] == "up");
    // Binance's open interest arrives a contract at a time (polled in turn): the board's sum is
    // read once every perpetual has a fresh one and the board holds them all (an alert made on a
    // partial sum would see it pass its threshold before the jump and wait for it to come back).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (oi, btc) = loop {
        let perps =
            server.get_authed("/v1/perp?exchange=binance").ok("perp")["data"].as_array().cloned().unwrap_or_default();
        let fresh: Vec<f64> =
            perps.iter().filter(|p| p["oi"]["stale"] == false).filter_map(|p| p["oi"]["usd"].as_f64()).collect();
        let btc = perps.iter().find(|p| p["symbol"] == SYMBOL).and_then(|p| p["oi"]["usd"].as_f64());
        let board = server.get_authed("/v1/market?exchange=binance&interval=1h").ok("market")["data"]["oiUsd"].as_f64();
        let all: f64 = fresh.iter().sum();
        if let (Some(oi), Some(btc), true) = (board, btc, fresh.len() == perps.len() && !perps.is_empty()) {
            if (oi - all).abs() <= 0.05 * all {
                break (oi, btc);
            }
        }
        assert!(Instant::now() < deadline, "no complete open interest on the board in 30 s: {board:?} of {perps:?}");
        thread::sleep(Duration::from_millis(200));
    };
    let (_, site) = SiteSession::signin(&server, &server.key);
    let site = site.expect("signed in");
    let body = |threshold: f64| json!({"type":"market","exchange":"binance","number":"oiUsd","interval":"1h","direction":"above","threshold":threshold});
    let at = site.change(&server, "POST", "/site/site-alerts", Some(&body((oi * 0.5).floor())));
    assert_eq!(at.status, 422, "{}", at.text);
    assert!(
        at.body["error"].as_str().is_some_and(|e| e.starts_with("The open interest in USD on binance (1h) is ")),
        "{}",
        at.text
    );
    let threshold = (oi * 1.25).floor();
    let made = site.change(&server, "POST", "/site/site-alerts", Some(&body(threshold)));
    assert_eq!(made.status, 200, "{}", made.text);
    let alert = made.body["data"]["id"].clone();
    thread::sleep(Duration::from_millis(2_500)); // taken by the board thread at its next build
    assert!(inbox(&server, "market.triggered", &alert).is_empty(), "nothing crossed yet");
    // BTCUSDT alone brings the sum 50 % up.
    let pct = (oi * 0.5 / btc * 100.0).ceil();
    sim.control("oi", &json!({"venue":"binance","symbol":SYMBOL,"pct":pct}));
    let fired = await_inbox(&server, "market.triggered", &alert, 1, 20);
    let event = &fired[0]["event"];
    assert!(event["value"].as_f64().is_some_and(|v| v >= threshold), "{event}");
    assert_eq!(
        (&event["alert"]["number"], &event["alert"]["status"]),
        (&json!("oiUsd"), &json!("triggered")),
        "{event}"
    );
}

/// `GET /v1/inbox?before=` pages back from an entry already seen; bad values are 422.
fn inbox_pages(server: &Server) {
    let all = server.get_authed("/v1/inbox?limit=1000").ok("inbox")["data"].as_array().cloned().unwrap_or_default();
    assert!(all.len() >= 3, "the firings above left entries: {all:?}");
    let newest = server.get_authed("/v1/inbox?limit=1").ok("inbox")["data"].clone();
    assert_eq!(newest, json!([all[0]]));
    let older = server.get_authed(&format!("/v1/inbox?limit=1000&before={}", all[0]["id"]));
    assert_eq!(older.ok("older")["data"], json!(all[1..]), "every entry but the newest, newest first");
    let huge = server.get_authed("/v1/inbox?limit=1000&before=79157928931969697054720");
    assert_eq!(huge.ok("before an id past i64")["data"], json!(all), "every entry");
    let last = server.get_authed(&format!("/v1/inbox?before={}", all[all.len() - 1]["id"]));
    assert_eq!(last.ok("before the oldest")["data"], json!([]));
    let limit = "limit must be an integer from 1 to 1000";
    let before = "before must be an inbox entry id (an integer from 1)";
    let cases =
        [("limit=0", limit), ("limit=1001", limit), ("before=0", before), ("before=x", before), ("before=-3", before)];
    for (query, message) in cases {
        server.get_authed(&format!("/v1/inbox?{query}")).assert_error(422, message, query);
    }
}

#[test]
fn the_interface_refuses_bad_requests_and_keeps_the_caps() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    let free = server.create_key("free", None);
    let create = |key: &str, body: &str| server.site_alerts(&["create", "--key", key, body]);
    refused(
        &create(&free, r#"{"type":"market","exchange":"binance","minUsd":5}"#),
        "422 unknown field 'minUsd'. Allowed: type, exchange",
    );
    refused(
        &create(&free, r#"{"type":"density","exchange":"binance","min_usd":5}"#),
        "422 density alerts are wall alerts (type wall, event appeared) since schema 17",
    );
    refused(
        &create(&free, r#"{"type":"market","exchange":"binance","number":"mood","direction":"above","threshold":1}"#),
        "422 invalid number 'mood'. Allowed: sentiment, advancing",
    );
    refused(&create(&free, "{"), "400 malformed JSON");
    refused(&create("rk_nope", r#"{"type":"market","exchange":"binance","min_usd":5}"#), "401 unknown key");
    // Caps per kind: density 5 (made on the site, a free plan included) and market 2 on free,
    // counted apart (conditions that never hold on the simulated market, so no alert ends and
    // frees a place meanwhile).
    let (_, site) = SiteSession::signin(&server, &free);
    let site = site.expect("signed in");
    let density = json!({"type":"density","exchange":"binance","min_usd":1000000000000u64});
    let mut ids = Vec::new();
    for _ in 0..5 {
        let r = site.change(&server, "POST", "/site/site-alerts", Some(&density));
        assert_eq!(r.status, 200, "{}", r.text);
        ids.push(r.body["data"]["id"].as_i64().expect("id"));
    }
    site.change(&server, "POST", "/site/site-alerts", Some(&density)).assert_error(
        422,
        "active density-alert limit reached (5 on plan free)",
        "the sixth density alert",
    );
    // A density alert on every pair of the venue is a `*` alert: it repeats (issue #58).
    let one_shot = json!({"type":"density","exchange":"binance","min_usd":5,"repeat":false});
    site.change(&server, "POST", "/site/site-alerts", Some(&one_shot)).assert_error(
        422,
        "an alert on every pair of the venue repeats: repeat false is not allowed (an alert that ends at its first pair is a one-pair alert: name the pair instead)",
        "a one-shot venue-wide density alert",
    );
    let market = r#"{"type":"market","exchange":"binance","number":"walls","direction":"above","threshold":1000000}"#;
    let mut markets = Vec::new();
    for _ in 0..2 {
        let out = create(&free, market);
        assert!(out.status.success(), "{}", describe_output(&out));
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        markets.push(v["data"]["id"].as_i64().expect("id"));
    }
    refused(&create(&free, market), "422 active market-alert limit reached (2 on plan free)");
    // Delete: another account's alert and an unknown id are 404; the owner's frees a place.
    let id = markets[0].to_string();
    refused(&server.site_alerts(&["delete", "--key", &server.key, &id]), "404 unknown alert");
    let out = server.site_alerts(&["delete", "--key", &free, &id]);
    assert!(out.status.success(), "{}", describe_output(&out));
    refused(&server.site_alerts(&["delete", "--key", &free, &id]), "404 unknown alert");
    assert!(create(&free, market).status.success(), "room again after the delete");
    let gone = site.change(&server, "DELETE", &format!("/site/v1/alerts/{}", ids[0]), None);
    assert_eq!(gone.status, 200, "a density alert is deleted as the wall alert it is: {}", gone.text);
    let again = site.change(&server, "POST", "/site/site-alerts", Some(&density));
    assert_eq!(again.status, 200, "room again after the delete: {}", again.text);
    let list: Value = serde_json::from_slice(&server.site_alerts(&["list", "--key", &free]).stdout).expect("json");
    assert_eq!(list["data"].as_array().map(Vec::len), Some(2), "the market alerts: {list}");
    let alerts = site.get(&server, "/site/v1/alerts").body["data"].clone();
    assert_eq!(alerts.as_array().map(Vec::len), Some(5), "the density alerts, as wall alerts: {alerts}");
}
