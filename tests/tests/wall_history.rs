//! The wall history (`GET /v1/walls/{symbol}/history`, `GET /v1/walls/history`) through the real
//! binary: against the venue simulator, a wall placed then removed shows `pulled`, one traded at
//! then removed `filled` with its traded value, one left standing `open`; the filters (`side`,
//! `outcome`, `min_usd`, `limit`) and both shapes; and every 4xx with its exact body.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{Server, SimVenue, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// The live feed from the simulator, binance only, one shard.
fn live() -> (SimVenue, Server) {
    rampart_tests::live_binance(BIN)
}

/// The entries of a history answer.
fn entries(server: &Server, path: &str) -> Vec<Value> {
    server.get_authed(path).ok(path)["data"].as_array().cloned().unwrap_or_default()
}

/// Polls `path` until one of its entries is the wall at `price` on `side` with `outcome`.
fn wait_entry(server: &Server, path: &str, side: &str, price: &str, outcome: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    let price: f64 = price.parse().expect("a price");
    loop {
        let data = entries(server, path);
        let hit = data.iter().find(|w| w["side"] == side && w["price"].as_f64() == Some(price));
        if let Some(w) = hit.filter(|w| w["outcome"] == outcome) {
            return w.clone();
        }
        assert!(Instant::now() < deadline, "{path}: no {outcome} {side} at {price} after 20 s: {data:?}");
        thread::sleep(Duration::from_millis(200));
    }
}

/// A wall's size on `side`: 300 times the true book's 4th level there.
fn wall_qty(sim: &SimVenue, side: &str) -> String {
    let truth = sim.get("book?venue=binance&symbol=BTCUSDT");
    let size: f64 = truth[side][3][1].as_str().and_then(|s| s.parse().ok()).expect("a true size");
    format!("{}", (size * 300.0).ceil())
}

/// Places a wall between the true book's 5th and 6th levels of `side` ("bid" or "ask"); its price.
fn place(sim: &SimVenue, side: &str) -> String {
    let qty = wall_qty(sim, &format!("{side}s"));
    let placed = sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":side,"depth":5,"qty":qty}));
    placed["price"].as_str().expect("placed price").to_owned()
}

fn remove(sim: &SimVenue, side: &str, price: &str) {
    sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":side,"price":price,"qty":"0"}));
}

/// Every field of an entry, with its type and the invariants between them.
fn check_entry(w: &Value, with_symbol: bool) {
    let mut keys: Vec<&str> = w.as_object().expect("an object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = vec!["executedUsd", "firstSeen", "lastSeen", "maxRatio", "maxUsd", "outcome", "price", "side"];
    if with_symbol {
        want.push("symbol");
        want.sort_unstable();
    }
    assert_eq!(keys, want, "{w}");
    assert!(["bid", "ask"].contains(&w["side"].as_str().unwrap_or("")), "{w}");
    assert!(["open", "filled", "pulled"].contains(&w["outcome"].as_str().unwrap_or("")), "{w}");
    let (first, last) = (w["firstSeen"].as_i64().expect("firstSeen"), w["lastSeen"].as_i64().expect("lastSeen"));
    assert!(first <= last && last > rampart_tests::now_ms() - 86_400_000, "{w}");
    assert!(w["price"].as_f64().is_some_and(|p| p > 0.0), "{w}");
    assert!(w["maxRatio"].as_f64().is_some_and(|r| r >= 10.0), "{w}");
    // A quote asset without a USD price has no USD values; every USDT pair has them.
    let usdt = w.get("symbol").is_none_or(|s| s.as_str().is_some_and(|s| s.ends_with("USDT")));
    let valued = w["maxUsd"].as_f64().is_some_and(|u| u > 0.0) && w["executedUsd"].as_f64().is_some_and(|u| u >= 0.0);
    assert!(valued || (!usdt && w["maxUsd"].is_null() && w["executedUsd"].is_null()), "{w}");
}

/// Newest first: `lastSeen` never rises along the list.
fn newest_first(data: &[Value]) -> bool {
    data.windows(2).all(|p| p[0]["lastSeen"].as_i64() >= p[1]["lastSeen"].as_i64())
}

#[test]
fn walls_pulled_filled_and_standing_with_every_filter() {
    let (sim, server) = live();
    let one = "/v1/walls/BTCUSDT/history";
    // A bid placed, seen, then removed with no trade near it: pulled.
    let bid = place(&sim, "bid");
    let open = wait_entry(&server, one, "bid", &bid, "open");
    check_entry(&open, false);
    remove(&sim, "bid", &bid);
    let pulled = wait_entry(&server, one, "bid", &bid, "pulled");
    check_entry(&pulled, false);
    assert_eq!(pulled["executedUsd"], json!(0), "{pulled}");
    assert_eq!(pulled["firstSeen"], open["firstSeen"], "the same wall: {open} then {pulled}");
    // An ask traded at while it stood, then removed: filled, with the value traded at its price.
    let ask = place(&sim, "ask");
    wait_entry(&server, one, "ask", &ask, "open");
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":ask,"qty":"2"}));
    thread::sleep(Duration::from_millis(300));
    remove(&sim, "ask", &ask);
    let filled = wait_entry(&server, one, "ask", &ask, "filled");
    check_entry(&filled, false);
    let traded = 2.0 * ask.parse::<f64>().expect("price");
    let executed = filled["executedUsd"].as_f64().expect("executedUsd");
    assert!(executed >= traded - 0.01, "2 at {ask} traded at the wall: {filled}");
    // A bid left standing: open, and still open a scan later with a later lastSeen.
    let standing = place(&sim, "bid");
    let first = wait_entry(&server, one, "bid", &standing, "open");
    thread::sleep(Duration::from_millis(2_500));
    let later = wait_entry(&server, one, "bid", &standing, "open");
    assert!(later["lastSeen"].as_i64() > first["lastSeen"].as_i64(), "{first} then {later}");
    assert_eq!(later["firstSeen"], first["firstSeen"]);

    let all = entries(&server, one);
    assert!(newest_first(&all), "{all:?}");
    assert_eq!(all[0]["outcome"], "open", "standing walls come first: {all:?}");
    for w in &all {
        check_entry(w, false);
    }
    // Filters of one pair.
    let asks = entries(&server, &format!("{one}?side=ask"));
    assert!(!asks.is_empty() && asks.iter().all(|w| w["side"] == "ask"), "{asks:?}");
    for outcome in ["open", "filled", "pulled"] {
        let only = entries(&server, &format!("{one}?outcome={outcome}"));
        assert!(!only.is_empty() && only.iter().all(|w| w["outcome"] == outcome), "{outcome}: {only:?}");
    }
    let bid_pulled = entries(&server, &format!("{one}?side=bid&outcome=pulled&exchange=BINANCE"));
    assert!(bid_pulled.iter().any(|w| w["price"] == pulled["price"]), "{bid_pulled:?}");
    assert!(bid_pulled.iter().all(|w| w["side"] == "bid" && w["outcome"] == "pulled"), "{bid_pulled:?}");
    assert_eq!(entries(&server, &format!("{one}?limit=1")).len(), 1);
    let lower = server.get_authed("/v1/walls/btcusdt/history?limit=2");
    assert_eq!(lower.ok("lower case")["symbol"], "BTCUSDT");
    assert_eq!(lower.body["data"].as_array().map(Vec::len), Some(2));

    // The venue: the same walls, each with its pair.
    let venue = server.get_authed("/v1/walls/history");
    let body = venue.ok("venue");
    assert_eq!(body["exchange"], "binance");
    assert!(body["ts"].as_i64().is_some_and(|t| t > 1_000_000_000_000), "{body}");
    let data = body["data"].as_array().cloned().unwrap_or_default();
    assert!(newest_first(&data), "{data:?}");
    for w in &data {
        check_entry(w, true);
    }
    let ours = |w: &Value| w["symbol"] == "BTCUSDT" && w["price"] == filled["price"] && w["side"] == "ask";
    let filled_all = entries(&server, "/v1/walls/history?outcome=filled");
    assert!(filled_all.iter().any(ours), "{filled_all:?}");
    assert!(filled_all.iter().all(|w| w["outcome"] == "filled"), "{filled_all:?}");
    let max_usd = filled["maxUsd"].as_f64().expect("maxUsd");
    let rich = entries(&server, &format!("/v1/walls/history?outcome=filled&min_usd={}", max_usd.floor()));
    assert!(rich.iter().any(ours), "min_usd at its maxUsd keeps it: {rich:?}");
    assert!(rich.iter().all(|w| w["maxUsd"].as_f64().is_some_and(|u| u >= max_usd.floor())), "{rich:?}");
    let richer = entries(&server, &format!("/v1/walls/history?min_usd={}", max_usd.ceil() + 1.0));
    assert!(!richer.iter().any(ours), "min_usd above its maxUsd leaves it out: {richer:?}");
    assert_eq!(entries(&server, "/v1/walls/history?limit=1").len(), 1);
    assert!(entries(&server, "/v1/walls/history?exchange=okx").is_empty(), "okx is not served here");
}

/// Against the simulated market: walls come and go by themselves; the venue-wide history fills,
/// every entry has its shape and the list is newest first.
#[test]
fn the_simulated_market_fills_the_history() {
    let server = Server::start(BIN, FAST);
    // Walls live 5 s to 10 min in the simulator (60 s on average), so some end within a minute.
    let deadline = Instant::now() + Duration::from_secs(60);
    let data = loop {
        let data = entries(&server, "/v1/walls/history?limit=500");
        if data.iter().any(|w| w["outcome"] != "open") {
            break data;
        }
        assert!(Instant::now() < deadline, "no wall ended within 60 s: {data:?}");
        thread::sleep(Duration::from_millis(500));
    };
    assert!(data.len() <= 500);
    assert!(newest_first(&data), "{data:?}");
    for w in &data {
        check_entry(w, true);
    }
    let symbol = data[0]["symbol"].as_str().expect("symbol").to_owned();
    let one = server.get_authed(&format!("/v1/walls/{symbol}/history"));
    let pair = one.ok("one pair");
    assert_eq!(pair["symbol"], json!(symbol));
    assert_eq!(pair.as_object().map(|o| o.len()), Some(2), "{pair}");
    for w in pair["data"].as_array().into_iter().flatten() {
        check_entry(w, false);
    }
    // A quiet pair's history is empty, not a 404 (unlike its densities).
    let symbols = server.get_authed("/v1/exchanges/binance/symbols");
    let listed: Vec<String> = symbols.ok("symbols")["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["symbol"].as_str().map(str::to_owned))
        .collect();
    let with_walls: Vec<&str> = data.iter().filter_map(|w| w["symbol"].as_str()).collect();
    if let Some(quiet) = listed.iter().find(|s| !with_walls.contains(&s.as_str())) {
        let r = server.get_authed(&format!("/v1/walls/{quiet}/history"));
        assert_eq!(r.status, 200, "{quiet}: {}", r.text);
    }
}

#[test]
fn wall_history_errors() {
    let server = Server::start(BIN, FAST);
    let (one, venue) = ("/v1/walls/BTCUSDT/history", "/v1/walls/history");
    let exchange = "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget";
    server.get_authed(&format!("{one}?exchange=kraken")).assert_error(422, exchange, "one: exchange");
    server.get_authed(&format!("{venue}?exchange=kraken")).assert_error(422, exchange, "venue: exchange");
    for (q, message) in [
        ("limit=0", "invalid limit '0'. Allowed: 1 to 500"),
        ("limit=501", "invalid limit '501'. Allowed: 1 to 500"),
        ("limit=ten", "invalid limit 'ten'. Allowed: 1 to 500"),
        ("outcome=gone", "invalid outcome 'gone'. Allowed: open, filled, pulled"),
        ("outcome=OPEN", "invalid outcome 'OPEN'. Allowed: open, filled, pulled"),
    ] {
        server.get_authed(&format!("{one}?{q}")).assert_error(422, message, &format!("one: {q}"));
        server.get_authed(&format!("{venue}?{q}")).assert_error(422, message, &format!("venue: {q}"));
    }
    server.get_authed(&format!("{one}?side=buy")).assert_error(422, "invalid side 'buy'. Allowed: bid, ask", "side");
    for bad in ["-1", "lots", "inf"] {
        let message = format!("invalid min_usd '{bad}'. Allowed: a number of USD from 0");
        server.get_authed(&format!("{venue}?min_usd={bad}")).assert_error(422, &message, "min_usd");
    }
    server.get_authed("/v1/walls/NOPEUSDT/history").assert_error(
        404,
        "unknown symbol 'NOPEUSDT' on binance",
        "unknown",
    );
    server.get(one, None).assert_error(401, "missing API key", "one: no key");
    server.get(venue, None).assert_error(401, "missing API key", "venue: no key");
    let unknown = format!("rk_{}", "Z".repeat(32));
    server.get(one, Some(&unknown)).assert_error(401, "invalid API key", "one: unknown key");
    let free = server.create_key("free", Some("free"));
    server.await_key(&free);
    server.get(venue, Some(&free)).assert_error(403, "API access needs an active Developer plan", "free plan");
    let r = server.request("DELETE", one, Some(&format!("Bearer {}", server.key)), None);
    r.assert_error(405, "method not allowed", "DELETE");
    assert_eq!(r.header("allow"), Some("GET"));
}
