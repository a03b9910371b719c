//! `rampart serve --feed live` against the venue simulator (`rampart sim-venue`), end to end over
//! loopback: for each venue the service lists the pairs, backfills history, syncs the books over
//! the venue's WebSocket protocol, serves levels and walls, and fires an alert from a trade;
//! every injected fault (gap, stale snapshot, checksum mismatch, reset, disconnect, shutdown
//! notice) is detected, counted and recovered from; a venue going down does not stop the others;
//! a delisting is noticed by the listing refresh.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn start(venues: &[&str], sim_args: &[&str]) -> (SimVenue, Server) {
    let list = venues.join(",");
    let mut args = vec!["--sim-pairs", "8", "--venues", &list];
    args.extend_from_slice(sim_args);
    let sim = SimVenue::start(BIN, &args);
    let config = sim.config(venues, 3, "");
    let config = config.display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", &list]);
    (sim, server)
}

fn venue_health(server: &Server, venue: &str) -> Value {
    server.venue_health(venue)
}

/// Waits until `check` holds for the venue's health entry.
fn wait_health(server: &Server, venue: &str, what: &str, secs: u64, check: impl Fn(&Value) -> bool) -> Value {
    server.wait_venue(venue, what, secs, check)
}

fn wait_ok(server: &Server, venue: &str) -> Value {
    wait_health(server, venue, "state ok", 30, |h| h["state"] == "ok")
}

fn price_of(server: &Server, venue: &str, symbol: &str) -> f64 {
    let r = server.get_authed(&format!("/v1/symbols/{symbol}?exchange={venue}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut r = r;
    loop {
        if let Some(p) = r.ok("symbol")["data"]["price"].as_f64().filter(|p| *p > 0.0) {
            return p;
        }
        assert!(Instant::now() < deadline, "{venue} {symbol}: no price: {}", r.text);
        thread::sleep(Duration::from_millis(200));
        r = server.get_authed(&format!("/v1/symbols/{symbol}?exchange={venue}"));
    }
}

/// Places a wall in the simulator's true book (between its 5th and 6th bids, a price the
/// simulated market never uses) and waits until rampart serves it with the exact size: the venue
/// frame went through decode, sync, the book and the wall scan. Then removes it again.
fn wall_round_trip(sim: &SimVenue, server: &Server, venue: &str, symbol: &str) {
    let truth = sim.get(&format!("book?venue={venue}&symbol={symbol}"));
    let level_qty = truth["bids"][3][1].as_str().and_then(|s| s.parse::<f64>().ok()).expect("a true bid size");
    let wall_qty = format!("{:.0}", (level_qty * 300.0).ceil().max(1.0));
    let placed = sim.control("level", &json!({"venue":venue,"symbol":symbol,"side":"bid","depth":5,"qty":wall_qty}));
    let wall_price: f64 = placed["price"].as_str().and_then(|p| p.parse().ok()).expect("placed price");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = server.get_authed(&format!("/v1/densities/{symbol}?exchange={venue}"));
        if r.status == 200 {
            let walls = r.ok("densities")["data"]["walls"].as_array().cloned().unwrap_or_default();
            let hit = walls
                .iter()
                .find(|w| w["side"] == "bid" && w["price"].as_f64().is_some_and(|x| (x - wall_price).abs() < 1e-9));
            if let Some(w) = hit {
                let q = w["qty"].as_f64().unwrap_or(0.0);
                assert!(
                    (q - wall_qty.parse::<f64>().unwrap_or(0.0)).abs() < 1e-6,
                    "{venue}: wall size {q} vs {wall_qty}: {w}"
                );
                assert!(w["dist"].as_f64().is_some_and(|d| d < 0.0), "{w}");
                break;
            }
        }
        assert!(Instant::now() < deadline, "{venue}: the wall at {wall_price} never showed: {}", r.text);
        thread::sleep(Duration::from_millis(200));
    }
    let price = placed["price"].as_str().unwrap_or_default();
    sim.control("level", &json!({"venue":venue,"symbol":symbol,"side":"bid","price":price,"qty":"0"}));
}

/// A price alert just above the price, then a trade through it on the simulator: the alert
/// fires once.
fn alert_round_trip(sim: &SimVenue, server: &Server, venue: &str, symbol: &str) {
    let p = price_of(server, venue, symbol);
    let level = (p * 1.02 * 100.0).round() / 100.0;
    let body = json!({"exchange":venue,"symbol":symbol,"type":"price","direction":"above","price":level});
    let created =
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()));
    let id = created.ok("create alert")["data"]["id"].clone();
    sim.control("trade", &json!({"venue":venue,"symbol":symbol,"price":format!("{:.2}", p * 1.03)}));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let list = server.get_authed("/v1/alerts?status=triggered");
        let rows = list.ok("alerts")["data"].as_array().cloned().unwrap_or_default();
        if let Some(data) = rows.iter().find(|a| a["id"] == id) {
            assert_eq!(data["triggerCount"], 1, "{data}");
            assert_eq!(data["exchange"], venue, "{data}");
            return;
        }
        assert!(Instant::now() < deadline, "{venue}: the alert did not fire\n{}", server.diagnostics());
        thread::sleep(Duration::from_millis(200));
    }
}

fn end_to_end(venue: &str) {
    let (sim, server) = start(&[venue], &[]);
    let h = wait_ok(&server, venue);
    assert_eq!(h["pairs"].as_i64(), Some(8), "{h}");
    assert!(h["connections"].as_i64().is_some_and(|c| c >= 3), "8 pairs at 3 per connection: {h}");
    assert_eq!(h["rest"]["backfilled"].as_i64(), Some(8), "{h}");
    // Levels from the backfilled history.
    let levels = server.get_authed(&format!("/v1/levels/BTCUSDT?exchange={venue}"));
    let data = levels.ok("levels")["data"].as_array().cloned().expect("levels array");
    assert!(!data.is_empty(), "{venue}: BTCUSDT has 500 bars of history, so levels: {}", levels.text);
    wall_round_trip(&sim, &server, venue, "BTCUSDT");
    alert_round_trip(&sim, &server, venue, "ETHUSDT");
    let h = venue_health(&server, venue);
    for k in ["gaps", "checksumMismatches", "decodeErrors", "crossedBooks", "venueErrors"] {
        assert_eq!(h[k], 0, "{venue}: {k} without any fault: {h}");
    }
}

#[test]
fn binance_end_to_end() {
    end_to_end("binance");
}

#[test]
fn bybit_end_to_end() {
    end_to_end("bybit");
}

#[test]
fn okx_end_to_end() {
    end_to_end("okx");
}

#[test]
fn bitget_end_to_end() {
    end_to_end("bitget");
}

/// Injects `kind` on `venue`, waits for `counter` to grow, then for the venue to be whole again
/// and a fresh wall to be served exactly (the rebuilt book is right).
fn fault(sim: &SimVenue, server: &Server, venue: &str, kind: &str, counter: &str) {
    let before = venue_health(server, venue)[counter].as_i64().unwrap_or(0);
    sim.control("fault", &json!({"venue":venue,"symbol":"BTCUSDT","kind":kind}));
    wait_health(server, venue, &format!("{counter} after {kind}"), 20, |h| h[counter].as_i64().unwrap_or(0) > before);
    wait_ok(server, venue);
}

#[test]
fn injected_faults_are_detected_and_recovered() {
    let venues = ["binance", "bybit", "okx", "bitget"];
    let (sim, server) = start(&venues, &[]);
    for v in venues {
        wait_ok(&server, v);
    }
    fault(&sim, &server, "binance", "gap", "gaps");
    // The next snapshot after a gap is stale: it is refused and another one is fetched.
    sim.control("fault", &json!({"venue":"binance","symbol":"BTCUSDT","kind":"stale_snapshot"}));
    fault(&sim, &server, "binance", "gap", "staleSnapshots");
    fault(&sim, &server, "bybit", "gap", "gaps");
    fault(&sim, &server, "bybit", "reset", "resets");
    fault(&sim, &server, "okx", "gap", "gaps");
    fault(&sim, &server, "okx", "checksum", "checksumMismatches");
    fault(&sim, &server, "okx", "reset", "resets");
    fault(&sim, &server, "bitget", "gap", "gaps");
    fault(&sim, &server, "bitget", "checksum", "checksumMismatches");
    fault(&sim, &server, "okx", "crossed", "crossedBooks");
    for v in venues {
        fault(&sim, &server, v, "disconnect", "disconnects");
    }
    fault(&sim, &server, "binance", "notice", "disconnects");
    fault(&sim, &server, "okx", "notice", "disconnects");
    // A venue's notice is a reconnect of its own kind in /healthz.
    for v in ["binance", "okx"] {
        let h = venue_health(&server, v);
        assert!(h["reconnects"]["notice"].as_i64().is_some_and(|n| n >= 1), "{v}: {h}");
    }
    // Every rebuilt book is right: a new wall shows with its exact size on each venue.
    for v in venues {
        wall_round_trip(&sim, &server, v, "BTCUSDT");
    }
}

#[test]
fn a_venue_down_does_not_stop_the_others_and_delistings_are_noticed() {
    let (sim, server) = start(&["binance", "okx"], &[]);
    wait_ok(&server, "binance");
    wait_ok(&server, "okx");
    sim.control("venue", &json!({"venue":"okx","up":false}));
    wait_health(&server, "okx", "down", 20, |h| h["state"] == "down");
    let before = venue_health(&server, "binance")["messages"].as_i64().unwrap_or(0);
    wait_health(&server, "binance", "messages flowing", 10, |h| h["messages"].as_i64().unwrap_or(0) > before + 10);
    assert_eq!(venue_health(&server, "binance")["state"], "ok");
    alert_round_trip(&sim, &server, "binance", "BTCUSDT");
    sim.control("venue", &json!({"venue":"okx","up":true}));
    wait_ok(&server, "okx");
    // A delisting: two listing refreshes in a row (every 10 s here) must miss the pair before it
    // and its alerts are removed.
    let p = price_of(&server, "okx", "SOLUSDT");
    let body =
        json!({"exchange":"okx","symbol":"SOLUSDT","type":"price","direction":"above","price":(p * 2.0).round()});
    server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string())).ok("create");
    sim.control("delist", &json!({"venue":"okx","symbol":"SOLUSDT"}));
    wait_health(&server, "okx", "a delisting", 45, |h| h["rest"]["delistings"].as_i64().unwrap_or(0) >= 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let inbox = server.get_authed("/v1/inbox");
        if inbox.text.contains("SOLUSDT") {
            break;
        }
        assert!(Instant::now() < deadline, "no delisting notice: {}", inbox.text);
        thread::sleep(Duration::from_millis(200));
    }
}
