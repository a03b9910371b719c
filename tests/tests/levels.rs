//! Support and resistance levels through the real binary: shapes, ordering, the bulk endpoint
//! and its filter, young listings, and the 4xx rules.

use rampart_tests::{Server, FAST};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

const TIMEFRAMES: [&str; 9] = ["15m", "1h", "4h", "1d", "1w", "dmax", "dmin", "wmax", "wmin"];

fn number(v: &Value, what: &str) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{what}: {v} is not a number"))
}

/// Checks every field of every level and returns (price, type) pairs.
fn check_levels(data: &Value, what: &str) -> Vec<(f64, String)> {
    let levels = data.as_array().unwrap_or_else(|| panic!("{what}: data is not an array: {data}"));
    levels
        .iter()
        .map(|l| {
            let price = number(&l["price"], what);
            assert!(price > 0.0, "{what}: {l}");
            let kind = l["type"].as_str().unwrap_or("").to_owned();
            assert!(kind == "support" || kind == "resistance", "{what}: type in {l}");
            assert!(matches!(l["side"].as_str(), Some("high" | "low")), "{what}: side in {l}");
            assert!(TIMEFRAMES.contains(&l["timeframe"].as_str().unwrap_or("")), "{what}: timeframe in {l}");
            assert!(l["time"].as_i64().is_some_and(|t| t > 1_000_000_000_000), "{what}: time in {l}");
            assert!(l["strength"].as_i64().is_some_and(|s| s >= 1), "{what}: strength in {l}");
            (price, kind)
        })
        .collect()
}

fn price_of(server: &Server, symbol: &str) -> f64 {
    let reply = server.get_authed(&format!("/v1/symbols/{symbol}"));
    number(&reply.ok("symbol")["data"]["price"], "symbol price")
}

#[test]
fn single_pair_levels_are_typed_and_nearest_first() {
    let server = Server::start(BIN, FAST);
    let current = price_of(&server, "BTCUSDT");
    let reply = server.get_authed("/v1/levels/btcusdt");
    let body = reply.ok("levels BTCUSDT");
    assert_eq!(body["symbol"], "BTCUSDT");
    let levels = check_levels(&body["data"], "BTCUSDT");
    assert!(levels.len() >= 4, "a handful at least: {}", reply.text);
    // Supports below, resistances above; the price can move a little between the two calls.
    let slack = current * 0.003;
    for (p, kind) in &levels {
        match kind.as_str() {
            "support" => assert!(*p <= current + slack, "support {p} above price {current}"),
            _ => assert!(*p >= current - slack, "resistance {p} below price {current}"),
        }
    }
    assert!(levels.iter().any(|l| l.1 == "support") && levels.iter().any(|l| l.1 == "resistance"));
    for w in levels.windows(2) {
        assert!((w[0].0 - current).abs() <= (w[1].0 - current).abs() + 2.0 * slack, "not nearest first: {:?}", levels);
    }
    let okx = server.get_authed("/v1/levels/BTCUSDT?exchange=okx");
    check_levels(&okx.ok("okx levels")["data"], "okx BTCUSDT");
}

#[test]
fn bulk_levels_cover_the_venue_and_young_listings_are_empty() {
    let server = Server::start(BIN, FAST);
    let exchanges = server.get_authed("/v1/exchanges");
    let pairs = exchanges.ok("exchanges")["data"][0]["pairs"].as_u64().expect("pairs");
    let reply = server.get_authed("/v1/levels");
    let body = reply.ok("bulk levels");
    assert_eq!(body["exchange"], "binance");
    assert!(body["ts"].as_i64().is_some());
    let data = body["data"].as_array().expect("data array");
    assert_eq!(data.len() as u64, pairs, "every listed pair, with or without levels");
    let symbols: Vec<&str> = data.iter().map(|e| e["symbol"].as_str().expect("symbol")).collect();
    let mut sorted = symbols.clone();
    sorted.sort();
    assert_eq!(symbols, sorted, "sorted by symbol");
    let mut both_sides = 0;
    let mut empty = Vec::new();
    for e in data {
        let levels = check_levels(&e["data"], e["symbol"].as_str().unwrap_or("?"));
        if levels.is_empty() {
            empty.push(e["symbol"].as_str().unwrap_or("").to_owned());
        }
        if levels.iter().any(|l| l.1 == "support") && levels.iter().any(|l| l.1 == "resistance") {
            both_sides += 1;
        }
    }
    assert!(both_sides * 10 >= data.len() * 8, "most pairs have both sides: {both_sides} of {}", data.len());
    // The simulator lists two young pairs with minutes of history: no levels, and 200 [] alone.
    assert!(!empty.is_empty() && empty.len() <= 4, "young listings: {empty:?}");
    let young = server.get_authed(&format!("/v1/levels/{}", empty[0]));
    let body = young.ok("young listing");
    assert_eq!(body["data"], Value::Array(Vec::new()), "{}", young.text);
}

#[test]
fn bulk_filter_and_its_cap() {
    let server = Server::start(BIN, FAST);
    let reply = server.get_authed("/v1/levels?symbols=ethusdt,BTCUSDT,NOPEUSDT,BTCUSDT&exchange=bybit");
    let body = reply.ok("filtered");
    assert_eq!(body["exchange"], "bybit");
    let names: Vec<&str> = body["data"].as_array().expect("data").iter().filter_map(|e| e["symbol"].as_str()).collect();
    assert_eq!(names, ["BTCUSDT", "ETHUSDT"], "unknown symbols are left out, duplicates once, sorted");
    let hundred: Vec<String> = (0..100).map(|i| format!("S{i}USDT")).collect();
    let reply = server.get_authed(&format!("/v1/levels?symbols={}", hundred.join(",")));
    assert_eq!(reply.ok("100 symbols")["data"].as_array().map(Vec::len), Some(0));
    let reply = server.get_authed(&format!("/v1/levels?symbols={},BTCUSDT", hundred.join(",")));
    reply.assert_error(422, "symbol list too long (max 100)", "101 symbols");
}

#[test]
fn levels_errors() {
    let server = Server::start(BIN, FAST);
    let allowed = "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget";
    server.get_authed("/v1/levels/BTCUSDT?exchange=kraken").assert_error(422, allowed, "single, bad exchange");
    server.get_authed("/v1/levels?exchange=kraken").assert_error(422, allowed, "bulk, bad exchange");
    server.get_authed("/v1/levels/NOPEUSDT").assert_error(404, "unknown symbol 'NOPEUSDT' on binance", "unknown");
    // A pair binance lists but another venue does not.
    let bulk = server.get_authed("/v1/levels?exchange=binance");
    let binance: Vec<String> = bulk.ok("binance")["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["symbol"].as_str().map(str::to_owned))
        .collect();
    let okx = server.get_authed("/v1/exchanges/okx/symbols");
    let listed: Vec<String> = okx.ok("okx")["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["symbol"].as_str().map(str::to_owned))
        .collect();
    let missing = binance.iter().find(|s| !listed.contains(s)).expect("a pair okx does not list");
    server.get_authed(&format!("/v1/levels/{missing}?exchange=okx")).assert_error(
        404,
        &format!("unknown symbol '{missing}' on okx"),
        "not listed on okx",
    );
    let reply = server.request("POST", "/v1/levels", Some(&format!("Bearer {}", server.key)), None);
    assert_eq!(reply.status, 405, "{}", reply.text);
}
