//! The live feed against a misbehaving venue (issue #12), through real processes: the venue
//! simulator's `/sim/rest` makes a REST route hang, answer an empty listing, or answer 429 with
//! an absurd `Retry-After`. Alerts keep firing while a book is rebuilt; no venue answer kills a
//! request task or loses a book; an empty listing deletes nothing and a real delisting is
//! confirmed before anything is removed, and a pair listed again is served again; a hanging
//! venue holds neither the port nor readiness, and joins once it answers (with the stored alerts
//! on its pairs); a pair listed after start is served without a restart; before a pair's first
//! trade its price is the backfilled close and its levels are typed against it.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn sim(venues: &[&str], extra: &[&str]) -> SimVenue {
    let list = venues.join(",");
    let mut args = vec!["--sim-pairs", "8", "--venues", &list];
    args.extend_from_slice(extra);
    SimVenue::start(BIN, &args)
}

/// `serve` arguments for the live feed on `sim`'s `venues`.
fn live_args(sim: &SimVenue, venues: &[&str], venue_extra: &str) -> Vec<String> {
    let config = sim.config_with(venues, 4, "", venue_extra).display().to_string();
    ["--feed", "live", "--config", &config, "--shards", "1", "--venues", &venues.join(",")]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn serve(sim: &SimVenue, venues: &[&str], venue_extra: &str) -> Server {
    let args = live_args(sim, venues, venue_extra);
    Server::start(BIN, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn rest_fault(sim: &SimVenue, venue: &str, route: &str, fault: Value) {
    let mut body = fault;
    body["venue"] = json!(venue);
    body["route"] = json!(route);
    sim.control("rest", &body);
}

fn int(h: &Value, path: &[&str]) -> i64 {
    let mut v = h;
    for k in path {
        v = &v[*k];
    }
    v.as_i64().unwrap_or_else(|| panic!("{path:?} is not an integer in {h}"))
}

fn wait_ok(server: &Server, venue: &str) -> Value {
    server.wait_venue(venue, "state ok", 40, |h| h["state"] == "ok")
}

/// The pair's price as `/v1/symbols` serves it (must be there and positive).
fn price_now(server: &Server, venue: &str, symbol: &str) -> f64 {
    let r = server.get_authed(&format!("/v1/symbols/{symbol}?exchange={venue}"));
    let p = r.ok("symbol")["data"]["price"].as_f64().unwrap_or(0.0);
    assert!(p > 0.0, "{venue} {symbol}: no price: {}", r.text);
    p
}

fn create_alert(server: &Server, venue: &str, symbol: &str, level: f64) -> Value {
    let level = (level * 100.0).round() / 100.0;
    let body = json!({"exchange":venue,"symbol":symbol,"type":"price","direction":"above","price":level});
    let r = server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()));
    r.ok("create alert")["data"]["id"].clone()
}

fn wait_fired(server: &Server, id: &Value, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let list = server.get_authed("/v1/alerts?status=triggered");
        if list.ok("alerts")["data"].as_array().is_some_and(|rows| rows.iter().any(|a| a["id"] == *id)) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the alert did not fire\n{}", server.diagnostics());
        thread::sleep(Duration::from_millis(200));
    }
}

/// A price alert above the price, then a trade through it on the simulator: it must fire.
fn fire_through(sim: &SimVenue, server: &Server, venue: &str, symbol: &str, what: &str) {
    let p = price_now(server, venue, symbol);
    let id = create_alert(server, venue, symbol, p * 1.02);
    sim.control("trade", &json!({"venue":venue,"symbol":symbol,"price":format!("{:.2}", p * 1.03)}));
    wait_fired(server, &id, what);
}

/// Item 1: a Binance book whose snapshot never comes stays stale, and a trade through an alert
/// fires it all the same; an OKX book rebuilt by resubscribing its book channel keeps its trade
/// channel, so an alert fires after the rebuild.
#[test]
fn alerts_fire_while_a_book_is_rebuilt() {
    let sim = sim(&["binance", "okx"], &[]);
    let server = serve(&sim, &["binance", "okx"], "");
    wait_ok(&server, "binance");
    wait_ok(&server, "okx");
    rest_fault(&sim, "binance", "depth", json!({"fault":"hang"}));
    sim.control("fault", &json!({"venue":"binance","symbol":"BTCUSDT","kind":"gap"}));
    server.wait_venue("binance", "a stale book", 20, |h| int(h, &["booksLive"]) < int(h, &["pairs"]));
    fire_through(&sim, &server, "binance", "BTCUSDT", "binance, book being rebuilt");
    let h = server.venue_health("binance");
    assert!(int(&h, &["booksLive"]) < int(&h, &["pairs"]), "the book was still being rebuilt: {h}");
    rest_fault(&sim, "binance", "depth", json!({"fault":"none"}));
    wait_ok(&server, "binance");

    let before = int(&server.venue_health("okx"), &["resyncs"]);
    sim.control("fault", &json!({"venue":"okx","symbol":"BTCUSDT","kind":"gap"}));
    server.wait_venue("okx", "a rebuild", 20, |h| int(h, &["resyncs"]) > before);
    wait_ok(&server, "okx");
    fire_through(&sim, &server, "okx", "BTCUSDT", "okx, after the book channel was resubscribed");
}

/// Item 2: a 429 with `Retry-After: 18446744073709551615` on the depth snapshot kills no task:
/// the pause is cut to the venue's `retry_after_max_s`, and once the venue answers again the
/// book is rebuilt.
#[test]
fn an_absurd_retry_after_loses_no_book() {
    let sim = sim(&["binance"], &[]);
    let server = serve(&sim, &["binance"], "retry_after_max_s = 2\n");
    wait_ok(&server, "binance");
    let absurd = json!({"fault":"status","status":429,"retry_after":"18446744073709551615"});
    rest_fault(&sim, "binance", "depth", absurd);
    sim.control("fault", &json!({"venue":"binance","symbol":"BTCUSDT","kind":"gap"}));
    server.wait_venue("binance", "a rate-limit answer", 20, |h| int(h, &["rest", "rateLimited"]) >= 1);
    // Several snapshot attempts meet the 429, each paused at most 2 s.
    server.wait_venue("binance", "rate-limit answers again", 20, |h| int(h, &["rest", "rateLimited"]) >= 3);
    rest_fault(&sim, "binance", "depth", json!({"fault":"none"}));
    let h = wait_ok(&server, "binance");
    assert_eq!(int(&h, &["rest", "tasksLost"]), 0, "{h}");
    assert!(server.alive(), "the server is up");
    let log = server.stderr_tail().join("\n");
    assert!(!log.contains("panicked"), "no task panicked:\n{log}");
    fire_through(&sim, &server, "binance", "BTCUSDT", "after the rate limit");
}

/// The bound on `Retry-After` bounds how long a book stays stale: with the default
/// `retry_after_max_s` (300 s) a 429 with an absurd `Retry-After` is probed every 10 s, so once
/// the venue answers again its books are rebuilt and live within 30 s.
#[test]
fn books_are_live_again_within_30_s_of_a_rate_limited_venue_recovering() {
    let sim = sim(&["binance"], &[]);
    let server = serve(&sim, &["binance"], "");
    wait_ok(&server, "binance");
    let absurd = json!({"fault":"status","status":429,"retry_after":"18446744073709551615"});
    rest_fault(&sim, "binance", "depth", absurd);
    sim.control("fault", &json!({"venue":"binance","symbol":"BTCUSDT","kind":"gap"}));
    server.wait_venue("binance", "a rate-limit answer", 20, |h| int(h, &["rest", "rateLimited"]) >= 1);
    // Still limited a while later: the probe meets the 429 again.
    server.wait_venue("binance", "a probe limited again", 30, |h| int(h, &["rest", "rateLimited"]) >= 2);
    rest_fault(&sim, "binance", "depth", json!({"fault":"none"}));
    let recovered = Instant::now();
    let h = wait_ok(&server, "binance");
    let took = recovered.elapsed();
    eprintln!("books live again {took:?} after the venue recovered");
    assert!(took < Duration::from_secs(30), "books live {took:?} after the venue recovered: {h}");
    assert_eq!(int(&h, &["rest", "tasksLost"]), 0, "{h}");
    fire_through(&sim, &server, "binance", "BTCUSDT", "after the rate limit");
}

/// Item 7: an empty listing is a venue fault (nothing is delisted, no alert removed); a real
/// delisting needs two refreshes in a row; a pair listed again is served again, book and all.
#[test]
fn an_empty_listing_deletes_nothing_and_a_pair_comes_back() {
    let sim = sim(&["binance"], &[]);
    let server = serve(&sim, &["binance"], "");
    wait_ok(&server, "binance");
    let p = price_now(&server, "binance", "ETHUSDT");
    let kept = create_alert(&server, "binance", "ETHUSDT", p * 2.0);
    rest_fault(&sim, "binance", "listing", json!({"fault":"empty"}));
    server.wait_venue("binance", "a refused listing", 30, |h| int(h, &["rest", "listingFaults"]) >= 1);
    rest_fault(&sim, "binance", "listing", json!({"fault":"none"}));
    let h = server.venue_health("binance");
    assert_eq!(int(&h, &["rest", "delistings"]), 0, "{h}");
    assert_eq!(int(&h, &["pairs"]), 8, "{h}");
    let active = server.get_authed("/v1/alerts?status=active");
    assert!(
        active.ok("alerts")["data"].as_array().is_some_and(|rows| rows.iter().any(|a| a["id"] == kept)),
        "the alert survives an empty listing: {}",
        active.text
    );
    server.get_authed("/v1/symbols/ETHUSDT?exchange=binance").ok("ETHUSDT still served");

    sim.control("delist", &json!({"venue":"binance","symbol":"SOLUSDT"}));
    server.wait_venue("binance", "a suspected delisting", 30, |h| int(h, &["rest", "delistingsSuspected"]) >= 1);
    server.get_authed("/v1/symbols/SOLUSDT?exchange=binance").ok("served until a second refresh confirms");
    server.wait_venue("binance", "a confirmed delisting", 30, |h| int(h, &["rest", "delistings"]) >= 1);
    let gone = server.get_authed("/v1/symbols/SOLUSDT?exchange=binance");
    assert_eq!(gone.status, 404, "{}", gone.text);

    sim.control("relist", &json!({"venue":"binance","symbol":"SOLUSDT"}));
    server.wait_venue("binance", "the pair listed again", 30, |h| int(h, &["rest", "relistings"]) >= 1);
    server.get_authed("/v1/symbols/SOLUSDT?exchange=binance").ok("served again");
    wait_ok(&server, "binance");
    fire_through(&sim, &server, "binance", "SOLUSDT", "a pair listed again");
}

/// Item 8: a venue whose listing hangs holds the port for no one (it answers 503 "starting"
/// while the others are listed) and is left out after the start-up bound; a venue whose candle
/// history hangs holds readiness for at most the shard's wait, and its books get their history
/// once the venue answers.
#[test]
fn a_hanging_venue_holds_neither_the_port_nor_readiness() {
    let sim = sim(&["binance", "okx"], &[]);
    rest_fault(&sim, "binance", "listing", json!({"fault":"hang"}));
    rest_fault(&sim, "okx", "candles", json!({"fault":"hang"}));
    let started = Instant::now();
    let server = serve(&sim, &["binance", "okx"], "");
    let waited = started.elapsed();
    let first = server.startup_not_ready.as_ref().expect("the port answered before the server was ready");
    assert_eq!(first.status, 503, "{first:?}");
    let body: Value = serde_json::from_str(&first.text).expect("JSON");
    assert_eq!(body["status"], "starting", "{first:?}");
    assert!(waited < Duration::from_secs(60), "ready after {waited:?}");
    let b = server.venue_health("binance");
    assert_eq!((b["state"].as_str(), int(&b, &["pairs"])), (Some("down"), 0), "{b}");
    let o = server.venue_health("okx");
    assert_eq!(int(&o, &["booksWithHistory"]), 0, "history hangs: {o}");
    price_now(&server, "okx", "BTCUSDT");
    rest_fault(&sim, "okx", "candles", json!({"fault":"none"}));
    server.wait_venue("okx", "every book's history", 100, |h| int(h, &["booksWithHistory"]) == 8);
    let levels = server.get_authed("/v1/levels/BTCUSDT?exchange=okx");
    assert!(levels.ok("levels")["data"].as_array().is_some_and(|a| !a.is_empty()), "{}", levels.text);
}

/// Item 8: a single venue that cannot be listed within the start-up bound (15 s) is asked
/// again, round after round (the port answers 503 "starting" meanwhile, and the log says so),
/// and the server serves it once it answers instead of exiting.
#[test]
fn a_single_venue_that_cannot_be_listed_is_waited_for() {
    let sim = sim(&["bybit"], &[]);
    rest_fault(&sim, "bybit", "listing", json!({"fault":"hang"}));
    let server = thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_secs(17));
            rest_fault(&sim, "bybit", "listing", json!({"fault":"none"}));
        });
        serve(&sim, &["bybit"], "")
    });
    let first = server.startup_not_ready.as_ref().expect("the port answered while the venue was listed");
    assert_eq!(first.status, 503, "{first:?}");
    let log = server.stderr_tail().join("\n");
    assert!(log.contains("no venue could be listed (round 1); asking again"), "{log}");
    let h = wait_ok(&server, "bybit");
    assert_eq!(int(&h, &["pairs"]), 8, "{h}");
}

/// Item 14: with no trade yet (the simulated pairs barely move), a pair's price is its
/// backfilled close, its levels are typed against it (supports below, resistances above), and an
/// alert can be created at once.
#[test]
fn before_the_first_trade_the_price_is_the_backfilled_close() {
    let sim = sim(&["okx"], &["--step-ms", "600000"]);
    let server = serve(&sim, &["okx"], "");
    let p = price_now(&server, "okx", "BTCUSDT");
    let levels = server.get_authed("/v1/levels/BTCUSDT?exchange=okx");
    let data = levels.ok("levels")["data"].as_array().cloned().unwrap_or_default();
    let typed: Vec<(f64, &str)> =
        data.iter().map(|l| (l["price"].as_f64().unwrap_or(0.0), l["type"].as_str().unwrap_or(""))).collect();
    assert!(typed.iter().any(|l| l.1 == "support"), "supports below {p}: {}", levels.text);
    assert!(typed.iter().any(|l| l.1 == "resistance"), "resistances above {p}: {}", levels.text);
    let slack = p * 0.003;
    for (price, kind) in &typed {
        match *kind {
            "support" => assert!(*price <= p + slack, "support {price} above {p}"),
            _ => assert!(*price >= p - slack, "resistance {price} below {p}"),
        }
    }
    let minor = data.iter().filter(|l| matches!(l["timeframe"].as_str(), Some("15m" | "1h"))).count();
    assert!(minor > 0, "15m/1h zones are kept: {}", levels.text);
    create_alert(&server, "okx", "BTCUSDT", p * 1.5);
}

/// Before a pair's first trade its price is the backfilled close whether its book or its
/// history arrives first: here the book comes first (the history route hangs, then answers),
/// and the close replaces the book's mid once the history is in.
#[test]
fn the_backfilled_close_is_the_price_even_when_the_book_came_first() {
    let sim = sim(&["okx"], &["--step-ms", "600000"]);
    rest_fault(&sim, "okx", "candles", json!({"fault":"hang"}));
    let server = serve(&sim, &["okx"], "");
    wait_ok(&server, "okx");
    let h = server.venue_health("okx");
    assert_eq!(int(&h, &["booksWithHistory"]), 0, "no history yet: {h}");
    rest_fault(&sim, "okx", "candles", json!({"fault":"none"}));
    server.wait_venue("okx", "every book's history", 90, |h| int(h, &["booksWithHistory"]) == 8);
    let price = price_now(&server, "okx", "BTCUSDT");
    let bars = server.get_authed("/v1/candles/BTCUSDT?exchange=okx&interval=5m&limit=1");
    let close = bars.ok("candles")["data"][0]["close"].as_f64().unwrap_or_else(|| panic!("a close: {}", bars.text));
    assert_eq!(price, close, "the price before the first trade is the backfilled close");
}

/// Item 7: a pair the venue lists after start (here: not trading when the server listed the
/// venue) is served once a refresh sees it: its book, its history, its alerts.
#[test]
fn a_pair_listed_after_start_is_served_without_a_restart() {
    let sim = sim(&["binance"], &["--delist", "binance:SOLUSDT@0"]);
    let server = serve(&sim, &["binance"], "");
    let h = wait_ok(&server, "binance");
    assert_eq!(int(&h, &["pairs"]), 7, "SOLUSDT is not trading at start: {h}");
    assert_eq!(server.get_authed("/v1/symbols/SOLUSDT?exchange=binance").status, 404);
    sim.control("relist", &json!({"venue":"binance","symbol":"SOLUSDT"}));
    server.wait_venue("binance", "the new pair", 30, |h| int(h, &["rest", "added"]) == 1 && int(h, &["pairs"]) == 8);
    server.get_authed("/v1/symbols/SOLUSDT?exchange=binance").ok("served without a restart");
    let h = server.wait_venue("binance", "the new book live with its history", 40, |h| {
        h["state"] == "ok" && int(h, &["booksWithHistory"]) == 8
    });
    assert_eq!(int(&h, &["rest", "newListings"]), 0, "nothing left unserved: {h}");
    let levels = server.get_authed("/v1/levels/SOLUSDT?exchange=binance");
    assert!(levels.ok("levels")["data"].as_array().is_some_and(|a| !a.is_empty()), "{}", levels.text);
    fire_through(&sim, &server, "binance", "SOLUSDT", "a pair listed after start");
}

/// Item 8: a venue that could not be listed at start joins once it answers, without a restart,
/// and the stored alerts on its pairs are evaluated again.
#[test]
fn a_venue_that_failed_at_start_joins_later_with_its_alerts() {
    let sim = sim(&["binance", "okx"], &[]);
    let args = live_args(&sim, &["binance", "okx"], "");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start(BIN, &args);
    wait_ok(&server, "okx");
    let p = price_now(&server, "okx", "ETHUSDT");
    let id = create_alert(&server, "okx", "ETHUSDT", p * 1.02);
    rest_fault(&sim, "okx", "listing", json!({"fault":"hang"}));
    let server = server.restart(&args);
    let h = server.venue_health("okx");
    assert_eq!((h["state"].as_str(), int(&h, &["pairs"])), (Some("down"), 0), "{h}");
    rest_fault(&sim, "okx", "listing", json!({"fault":"none"}));
    server.wait_venue("okx", "the venue joining", 40, |h| int(h, &["pairs"]) == 8);
    wait_ok(&server, "okx");
    let through = price_now(&server, "okx", "ETHUSDT").max(p) * 1.05;
    sim.control("trade", &json!({"venue":"okx","symbol":"ETHUSDT","price":format!("{through:.2}")}));
    wait_fired(&server, &id, "a stored alert on a venue that joined late");
}

/// #14: with every venue of a live feed down, readiness says so (503, "no venue has live data")
/// and the log names each outage; with one back the service is degraded but ready; with all
/// back it is ok again and the log says they recovered. A price shows its age.
#[test]
fn health_follows_the_venues_down_and_back() {
    let sim = sim(&["binance", "okx"], &[]);
    let server = serve(&sim, &["binance", "okx"], "");
    wait_ok(&server, "binance");
    wait_ok(&server, "okx");
    let sym = server.get_authed("/v1/symbols/BTCUSDT?exchange=okx");
    assert!(sym.ok("symbol")["data"]["priceAgeMs"].as_i64().is_some_and(|a| a >= 0), "{}", sym.text);
    for v in ["binance", "okx"] {
        sim.control("venue", &json!({"venue":v,"up":false}));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let h = server.get("/healthz", None);
        if h.status == 503 {
            break serde_json::from_str::<Value>(&h.text).expect("JSON");
        }
        assert!(Instant::now() < deadline, "still ready with every venue down: {}", h.text);
        thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(body["status"], "degraded", "{body}");
    assert_eq!(body["error"], "no venue has live data", "{body}");
    let wait_log = |line: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.stderr_tail().iter().any(|l| l.contains(line)) {
            assert!(Instant::now() < deadline, "no log line {line:?}:\n{}", server.stderr_tail().join("\n"));
            thread::sleep(Duration::from_millis(100));
        }
    };
    wait_log("binance: down: ");
    wait_log("okx: down: ");
    sim.control("venue", &json!({"venue":"okx","up":true}));
    wait_ok(&server, "okx");
    let h = server.get("/healthz", None);
    assert_eq!(h.status, 200, "one venue back: ready again: {}", h.text);
    assert_eq!(serde_json::from_str::<Value>(&h.text).expect("JSON")["status"], "degraded", "{}", h.text);
    wait_log("okx: recovered");
    sim.control("venue", &json!({"venue":"binance","up":true}));
    wait_ok(&server, "binance");
    let h = server.get("/healthz", None);
    assert_eq!((h.status, serde_json::from_str::<Value>(&h.text).expect("JSON")["status"].clone()), (200, json!("ok")));
    wait_log("binance: recovered");
}
