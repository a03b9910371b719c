//! Order-book walls through the real binary: the bulk and single endpoints, the 404 rule for a
//! pair with no walls, ageing between scans, and the 4xx rules.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{Server, FAST};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// Polls the bulk endpoint until some pair shows walls (the first scans complete within 2 s).
fn bulk_with_walls(server: &Server, query: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = server.get_authed(&format!("/v1/densities{query}"));
        let data = reply.ok("bulk densities")["data"].as_array().cloned().unwrap_or_default();
        if !data.is_empty() {
            return data;
        }
        assert!(Instant::now() < deadline, "no walls anywhere after 20 s: {}", reply.text);
        thread::sleep(Duration::from_millis(500));
    }
}

fn check_snapshot(snap: &Value, what: &str) {
    assert!(snap["price"].as_f64().is_some_and(|p| p > 0.0), "{what}: price in {snap}");
    assert!(snap["ts"].as_i64().is_some_and(|t| t > 1_000_000_000_000), "{what}: ts in {snap}");
    let walls = snap["walls"].as_array().unwrap_or_else(|| panic!("{what}: walls in {snap}"));
    assert!(!walls.is_empty(), "{what}: an empty snapshot is never shown");
    for w in walls {
        let dist = w["dist"].as_f64().unwrap_or(f64::NAN);
        match w["side"].as_str() {
            Some("bid") => assert!(dist < 0.0, "{what}: bid above price: {w}"),
            Some("ask") => assert!(dist > 0.0, "{what}: ask below price: {w}"),
            _ => panic!("{what}: side in {w}"),
        }
        assert!(dist.abs() <= 10.0, "{what}: outside the 10% window: {w}");
        assert!(w["ratio"].as_f64().is_some_and(|r| r >= 10.0), "{what}: ratio in {w}");
        assert!(w["qty"].as_f64().is_some_and(|q| q > 0.0), "{what}: qty in {w}");
        assert!(w["usd"].as_f64().is_some_and(|u| u > 0.0), "{what}: usd in {w}");
        assert!(w["price"].as_f64().is_some_and(|p| p > 0.0), "{what}: price in {w}");
        assert!(w["age"].as_i64().is_some_and(|a| a >= 0), "{what}: age in {w}");
    }
}

#[test]
fn bulk_and_single_densities() {
    let server = Server::start(BIN, FAST);
    let data = bulk_with_walls(&server, "");
    let mut names = Vec::new();
    for e in &data {
        let name = e["symbol"].as_str().expect("symbol").to_owned();
        check_snapshot(&e["data"], &name);
        names.push(name);
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by symbol");
    // A pair shown with walls answers 200 on its own (walls last at least 5 s in the simulator).
    let reply = server.get_authed(&format!("/v1/densities/{}", names[0].to_lowercase()));
    let body = reply.ok("single densities");
    assert_eq!(body["symbol"], Value::String(names[0].clone()));
    check_snapshot(&body["data"], "single");
    // The bulk answer is kept between scans, never past one: after a single answer, the bulk one
    // shows that pair's scan or a later one, across several scans (every 2 s).
    let mut compared = 0;
    for _ in 0..8 {
        let single = server.get_authed(&format!("/v1/densities/{}", names[0]));
        let Some(ts) = (single.status == 200).then(|| single.ok("single")["data"]["ts"].as_i64()).flatten() else {
            break;
        };
        let bulk = server.get_authed("/v1/densities");
        let data = bulk.ok("bulk after single")["data"].as_array().cloned().unwrap_or_default();
        if let Some(e) = data.iter().find(|e| e["symbol"] == Value::String(names[0].clone())) {
            let bulk_ts = e["data"]["ts"].as_i64().unwrap_or(0);
            assert!(bulk_ts >= ts, "{}: bulk shows the scan of {bulk_ts}, single showed {ts} before it", names[0]);
            compared += usize::from(bulk_ts > 0);
        }
        thread::sleep(Duration::from_millis(600));
    }
    assert!(compared > 0, "{} never compared", names[0]);
    // A listed pair with no walls: 404, the only endpoint where emptiness is an error.
    let all = server.get_authed("/v1/exchanges/binance/symbols");
    let quiet: Vec<String> = all.ok("symbols")["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["symbol"].as_str().map(str::to_owned))
        .filter(|s| !names.contains(s))
        .take(5)
        .collect();
    let mut seen_404 = 0;
    for s in &quiet {
        let reply = server.get_authed(&format!("/v1/densities/{s}"));
        match reply.status {
            404 => {
                reply.assert_error(404, &format!("no walls on {s} (binance) at this moment"), "quiet pair");
                seen_404 += 1;
            }
            200 => check_snapshot(&reply.ok("a wall appeared meanwhile")["data"], s),
            other => panic!("{s}: status {other}: {}", reply.text),
        }
    }
    assert!(seen_404 > 0, "no quiet pair answered 404");
}

#[test]
fn walls_age_between_scans() {
    let server = Server::start(BIN, FAST);
    let first = bulk_with_walls(&server, "");
    thread::sleep(Duration::from_secs(5));
    let second = bulk_with_walls(&server, "");
    let mut compared = 0;
    for a in &first {
        let Some(b) = second.iter().find(|b| b["symbol"] == a["symbol"]) else { continue };
        for wa in a["data"]["walls"].as_array().into_iter().flatten() {
            let same = b["data"]["walls"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|wb| wb["price"] == wa["price"] && wb["side"] == wa["side"]);
            if let Some(wb) = same {
                let (x, y) = (wa["age"].as_i64().unwrap_or(0), wb["age"].as_i64().unwrap_or(0));
                assert!(y >= x + 3, "{}: age {x} then {y} after 5 s", a["symbol"]);
                compared += 1;
            }
        }
    }
    assert!(compared > 0, "no wall lasted 5 s: {first:?}");
}

#[test]
fn densities_errors_and_filter() {
    let server = Server::start(BIN, FAST);
    let allowed = "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget";
    server.get_authed("/v1/densities/BTCUSDT?exchange=kraken").assert_error(422, allowed, "single");
    server.get_authed("/v1/densities?exchange=kraken").assert_error(422, allowed, "bulk");
    server.get_authed("/v1/densities/NOPEUSDT").assert_error(404, "unknown symbol 'NOPEUSDT' on binance", "unknown");
    let many: Vec<String> = (0..101).map(|i| format!("S{i}USDT")).collect();
    server.get_authed(&format!("/v1/densities?symbols={}", many.join(","))).assert_error(
        422,
        "symbol list too long (max 100)",
        "101 symbols",
    );
    let data = bulk_with_walls(&server, "");
    let one = data[0]["symbol"].as_str().expect("symbol").to_owned();
    let filtered = bulk_with_walls(&server, &format!("?symbols={},NOPEUSDT", one.to_lowercase()));
    assert!(filtered.iter().all(|e| e["symbol"] == Value::String(one.clone())), "{filtered:?}");
    let okx = bulk_with_walls(&server, "?exchange=okx");
    assert!(!okx.is_empty());
}
