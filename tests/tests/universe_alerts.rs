//! `*` alerts through the real binary and the venue simulator (`decisions.md` §15): one alert
//! on every pair of a venue, its firings of one second delivered as one webhook body with
//! `triggers`, a delisting that leaves it standing and a pair listed
//! again that it watches again; and a market-wide move over 500 pairs with a `*` alert of every
//! type: at most one delivery per alert per second, no firing lost or repeated.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rampart_tests::{binance_symbols, hook_receiver, Hit, Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// The live feed from the simulator with `pairs` pairs on Binance, webhooks to loopback allowed.
fn live(pairs: usize) -> (SimVenue, Server) {
    let n = pairs.to_string();
    let sim = SimVenue::start(BIN, &["--sim-pairs", &n, "--venues", "binance"]);
    let config = sim.config(&["binance"], pairs.min(50), "[webhooks]\nallow_private = true\n").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "2", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 120, |h| h["state"] == "ok");
    (sim, server)
}

fn create(server: &Server, body: &Value) -> Value {
    let reply = server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()));
    reply.ok(&format!("create {body}"))["data"].clone()
}

fn price_of(server: &Server, symbol: &str) -> f64 {
    let s = server.get_authed(&format!("/v1/symbols/{symbol}?exchange=binance"));
    s.ok("symbol")["data"]["price"].as_f64().unwrap_or_else(|| panic!("{symbol} has a price: {}", s.text))
}

/// A trade on `symbol` at `factor` times its price now.
fn jump(sim: &SimVenue, server: &Server, symbol: &str, factor: f64) {
    trade(sim, symbol, price_of(server, symbol) * factor);
}

fn trade(sim: &SimVenue, symbol: &str, at: f64) {
    sim.control("trade", &json!({"venue":"binance","symbol":symbol,"price":format!("{at:.8}")}));
}

/// Every Binance pair with its last price, in one request (the key's rate limit is 120 a minute).
fn prices(server: &Server) -> Vec<(String, f64)> {
    let symbols = server.get_authed("/v1/exchanges/binance/symbols");
    let data = symbols.ok("symbols")["data"].as_array().cloned().unwrap_or_default();
    data.iter().filter_map(|s| Some((s["symbol"].as_str()?.to_owned(), s["price"].as_f64()?))).collect()
}

/// The bodies the receiver got for alert `id`, in arrival order, with their arrival times.
fn bodies(hits: &Arc<Mutex<Vec<Hit>>>, id: &Value) -> Vec<(i64, Value)> {
    let hits = hits.lock().unwrap_or_else(|e| e.into_inner()).clone();
    hits.iter()
        .filter_map(|h| serde_json::from_str::<Value>(&h.body).ok().map(|v| (h.at_ms, v)))
        .filter(|(_, v)| v["alert"]["id"] == *id)
        .collect()
}

/// The pairs named in the `triggers` of `bodies`, in order.
fn pairs_fired(bodies: &[(i64, Value)]) -> Vec<String> {
    let triggers = bodies.iter().flat_map(|(_, b)| b["triggers"].as_array().cloned().unwrap_or_default());
    triggers.filter_map(|t| t["symbol"].as_str().map(str::to_owned)).collect()
}

/// Waits until `done` holds for alert `id`'s bodies, at most `secs`.
fn wait_bodies(
    hits: &Arc<Mutex<Vec<Hit>>>,
    id: &Value,
    secs: u64,
    what: &str,
    done: impl Fn(&[(i64, Value)]) -> bool,
) -> Vec<(i64, Value)> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let got = bodies(hits, id);
        if done(&got) {
            return got;
        }
        assert!(Instant::now() < deadline, "{what}: not within {secs} s; bodies {got:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn int(v: &Value, path: &[&str]) -> i64 {
    path.iter().fold(v, |v, k| &v[*k]).as_i64().unwrap_or(-1)
}

#[test]
fn a_venue_wide_alert_collects_a_second_of_pairs_into_one_body_and_follows_listings() {
    let (sim, server) = live(8);
    let (port, hits) = hook_receiver();
    let hook = format!("http://127.0.0.1:{port}/hook");
    let alert = create(
        &server,
        &json!({"symbol":"*","exchange":"binance","type":"pct","direction":"up","pct":5,"window":"5m","webhook_url":hook}),
    );
    // A `*` alert repeats without being asked to (issue #58); `repeat: false` is refused.
    assert_eq!((&alert["symbol"], &alert["cooldownS"], &alert["repeat"]), (&json!("*"), &json!(900), &json!(true)));
    let one_shot = json!({"symbol":"*","exchange":"binance","type":"level","event":"break","repeat":false});
    server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&one_shot.to_string())).assert_error(
        422,
        "an alert on every pair of the venue repeats: repeat false is not allowed (an alert that ends at its first pair is a one-pair alert: name the pair instead)",
        "a one-shot * alert",
    );
    assert_eq!(alert["createdPrice"], Value::Null, "{alert}");
    let id = alert["id"].clone();
    let symbols = binance_symbols(&server, 8);
    let (a, b) = (symbols[0].as_str(), symbols[1].as_str());
    let c = symbols.iter().find(|s| *s != "BTCUSDT" && *s != a && *s != b).cloned().expect("a third pair");

    // Two pairs moving within the same second: one body, two triggers.
    jump(&sim, &server, a, 1.1);
    jump(&sim, &server, b, 1.1);
    wait_bodies(&hits, &id, 10, "the first body", |g| !g.is_empty());
    std::thread::sleep(Duration::from_millis(1_500));
    let got = bodies(&hits, &id);
    assert_eq!(got.len(), 1, "one delivery for both pairs: {got:?}");
    let body = &got[0].1;
    assert_eq!(pairs_fired(&got), [a, b], "{body}");
    assert_eq!(body["trigger"], body["triggers"][0], "trigger is the first: {body}");
    assert_eq!((&body["alert"]["symbol"], &body["trigger"]["symbol"]), (&json!("*"), &json!(a)));
    assert!(body["trigger"]["move"].as_f64().is_some_and(|m| m >= 5.0), "{body}");

    // A delisting takes the pair, not the alert; listed again, the pair is watched again.
    sim.control("delist", &json!({"venue":"binance","symbol":c}));
    server.wait_venue("binance", "a confirmed delisting", 60, |h| int(h, &["rest", "delistings"]) >= 1);
    let listed = server.get_authed("/v1/alerts?status=active");
    let active = listed.ok("alerts")["data"].as_array().cloned().unwrap_or_default();
    assert!(active.iter().any(|x| x["id"] == id), "the * alert survives a delisting: {}", listed.text);
    let inbox = server.get_authed("/v1/inbox").text;
    assert!(!inbox.contains("alert.delisted"), "no delisting notice for a * alert: {inbox}");
    sim.control("relist", &json!({"venue":"binance","symbol":c}));
    server.wait_venue("binance", "the pair listed again", 60, |h| int(h, &["rest", "relistings"]) >= 1);
    server.wait_venue("binance", "state ok", 60, |h| h["state"] == "ok");
    // Served again (its 5-minute candle goes on from its trades); then the move.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.get_authed(&format!("/v1/symbols/{c}?exchange=binance")).status != 200 {
        assert!(Instant::now() < deadline, "{c} served again");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    jump(&sim, &server, &c, 1.1);
    let got = wait_bodies(&hits, &id, 10, "the pair listed again firing", |g| g.len() >= 2);
    assert_eq!(pairs_fired(&got), [a, b, c.as_str()], "{got:?}");
}

/// The market-wide move: 500 pairs, a `*` alert of each type, every pair pushed up 10 %.
#[test]
fn a_market_wide_move_over_500_pairs_delivers_at_most_one_body_per_alert_per_second() {
    let started = Instant::now();
    let (sim, server) = live(500);
    let ready_s = started.elapsed().as_secs_f64();
    let (port, hits) = hook_receiver();
    let hook = format!("http://127.0.0.1:{port}/hook");
    let every = |extra: Value| {
        let mut body = json!({"symbol":"*","exchange":"binance","repeat":true,"webhook_url":hook});
        if let (Some(o), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        create(&server, &body)
    };
    let pct = every(json!({"type":"pct","direction":"up","pct":5,"window":"5m"}));
    let level = every(json!({"type":"level","event":"break","direction":"above"}));
    let wall = every(json!({"type":"wall","event":"appeared"}));
    let quoted = prices(&server);
    assert_eq!(quoted.len(), 500, "every pair has a price");
    let symbols: Vec<String> = quoted.iter().map(|(s, _)| s.clone()).collect();
    let moved = Instant::now();
    for (s, p) in &quoted {
        trade(&sim, s, p * 1.1);
    }
    let move_s = moved.elapsed().as_secs_f64();
    let all: BTreeSet<String> = symbols.iter().cloned().collect();
    let got = wait_bodies(&hits, &pct["id"], 60, "every pair's pct firing", |g| pairs_fired(g).len() >= 500);
    std::thread::sleep(Duration::from_millis(2_000));
    let mut figures = BTreeMap::new();
    for (name, alert) in [("pct", &pct), ("level", &level), ("wall", &wall)] {
        let got = bodies(&hits, &alert["id"]);
        let fired = pairs_fired(&got);
        let distinct: BTreeSet<&String> = fired.iter().collect();
        assert_eq!(distinct.len(), fired.len(), "{name}: no pair twice (900 s cooldown): {fired:?}");
        assert!(got.iter().all(|(_, b)| b["triggers"].as_array().is_some_and(|t| (1..=100).contains(&t.len()))));
        // One body per second at most: bodies leave the writer a second apart, so their arrivals
        // are apart by about that (delivery's own jitter is far below half a second).
        let gaps: Vec<i64> = got.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(gaps.iter().all(|&g| g >= 500), "{name}: bodies closer than a second: gaps {gaps:?} ms");
        figures.insert(name, (got.len(), fired.len(), gaps.iter().min().copied()));
    }
    let pct_pairs: BTreeSet<String> = pairs_fired(&got).into_iter().collect();
    assert_eq!(pct_pairs, all, "every pair's move delivered, none lost");
    assert!(figures["level"].1 > 0 && figures["wall"].1 > 0, "level breaks and walls fired: {figures:?}");
    eprintln!(
        "market-wide move, 500 pairs: ready in {ready_s:.1} s, 500 trades sent in {move_s:.1} s; \
         per alert (bodies, pairs, smallest gap ms): {figures:?}"
    );
}
