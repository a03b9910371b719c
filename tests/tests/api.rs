//! The market-data HTTP API (exchanges, symbols, errors, readiness, shutdown) through the real
//! binary.

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use rampart_tests::{now_ms, Reply, Server, FAST, VENUES};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// The 422 message for a bad `exchange` parameter value.
const INVALID_KRAKEN: &str = "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget";

/// A small, quick server.
fn start() -> Server {
    Server::start(BIN, FAST)
}

/// Asserts `ts` is a Unix-millisecond time within a minute of now.
fn assert_recent_ms(ts: &Value, what: &str) {
    let ts = ts.as_i64().unwrap_or_else(|| panic!("{what}: ts {ts} is not an integer"));
    let now = now_ms();
    assert!((now - 60_000..=now + 60_000).contains(&ts), "{what}: ts {ts} is not within a minute of now ({now})");
}

/// The `data` array of an exchange's symbol list, with its shape checked.
fn symbols(server: &Server, exchange: &str) -> Vec<Value> {
    let reply = server.get_authed(&format!("/v1/exchanges/{exchange}/symbols"));
    let body = reply.ok(&format!("{exchange} symbols"));
    assert_eq!(body["exchange"], json!(exchange), "exchange field");
    assert_recent_ms(&body["ts"], &format!("{exchange} symbols"));
    let data = body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{exchange} symbols: data is not an array: {}", reply.text))
        .clone();
    let mut trading = 0;
    for row in &data {
        let symbol = row["symbol"].as_str().unwrap_or("");
        let base = row["base"].as_str().unwrap_or("");
        let quote = row["quote"].as_str().unwrap_or("");
        assert!(!base.is_empty() && !quote.is_empty(), "{exchange}: base and quote: {row}");
        assert_eq!(symbol, format!("{base}{quote}"), "{exchange}: symbol is BASEQUOTE: {row}");
        assert_eq!(symbol, symbol.to_uppercase(), "{exchange}: symbol is uppercase: {row}");
        let price = row["price"].as_f64().unwrap_or(-1.0);
        assert!(price > 0.0, "{exchange}: price is a positive number: {row}");
        let status = row["status"].as_str().unwrap_or_else(|| panic!("{exchange}: status is a string: {row}"));
        if status == "trading" {
            trading += 1;
        }
    }
    assert!(
        trading * 10 >= data.len() * 9,
        "{exchange}: at least 90% of pairs are trading ({trading} of {})",
        data.len()
    );
    let names: Vec<&str> = data.iter().filter_map(|r| r["symbol"].as_str()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{exchange}: symbols sorted and unique: {names:?}");
    data
}

/// Price per symbol.
fn prices(rows: &[Value]) -> HashMap<String, f64> {
    rows.iter().filter_map(|r| Some((r["symbol"].as_str()?.to_owned(), r["price"].as_f64()?))).collect()
}

/// `{"exchange": name, "pairs": n}` rows of `GET /v1/exchanges`.
fn exchanges(server: &Server) -> Vec<(String, u64)> {
    let reply = server.get_authed("/v1/exchanges");
    let body = reply.ok("exchanges");
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("exchanges: data is not an array: {}", reply.text))
        .iter()
        .map(|row| {
            let name = row["exchange"].as_str().unwrap_or_else(|| panic!("exchange name: {row}"));
            let pairs = row["pairs"].as_u64().unwrap_or_else(|| panic!("pairs count: {row}"));
            (name.to_owned(), pairs)
        })
        .collect()
}

#[test]
fn exchanges_list_every_venue_in_fixed_order_with_pair_counts() {
    let server = start();
    let list = exchanges(&server);
    let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, VENUES, "all four venues, in order");
    // Binance lists every simulated pair; the others a subset.
    assert_eq!(list[0].1, 60, "binance lists all --sim-pairs 60: {list:?}");
    for (name, pairs) in &list {
        assert!((1..=60).contains(pairs), "{name} pair count {pairs} in 1..=60");
        let rows = symbols(&server, name);
        assert_eq!(rows.len() as u64, *pairs, "{name}: symbols list length matches the exchanges count");
    }
}

#[test]
fn venues_flag_selects_exchanges_listed_in_fixed_order() {
    let mut args = FAST.to_vec();
    args.extend(["--venues", "okx,binance"]);
    let server = Server::start(BIN, &args);
    let list = exchanges(&server);
    let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["binance", "okx"], "only enabled venues, in the fixed order");
    let okx = symbols(&server, "okx");
    assert_eq!(okx.len() as u64, list[1].1, "okx count");
}

#[test]
fn default_sim_has_about_500_sorted_pairs_whose_prices_move() {
    let server = Server::start(BIN, &[]);
    if let Some(reply) = &server.startup_not_ready {
        assert_eq!(reply.status, 503, "not-ready healthz status: {reply:?}");
        reply.assert_json("not-ready healthz");
        // Rationale: the readiness body may carry diagnostics beside the two fields the
        // contract names, as the 200 body does.
        assert_eq!(
            (&reply.body["error"], &reply.body["status"]),
            (&json!("starting"), &json!("starting")),
            "not-ready healthz body: {}",
            reply.text
        );
    } else {
        eprintln!("note: the server was ready on the first /healthz poll; 503 body not checked");
    }

    let list = exchanges(&server);
    let binance_pairs =
        list.iter().find(|(n, _)| n == "binance").map(|(_, p)| *p).unwrap_or_else(|| panic!("binance in {list:?}"));
    assert!((450..=550).contains(&binance_pairs), "about 500 binance pairs, got {binance_pairs}");
    let first = symbols(&server, "binance");
    assert_eq!(first.len() as u64, binance_pairs, "symbols length");
    assert!(first.iter().any(|r| r["symbol"] == "BTCUSDT"), "BTCUSDT listed");

    thread::sleep(Duration::from_millis(2500));
    let second = symbols(&server, "binance");
    let (before, after) = (prices(&first), prices(&second));
    let changed = before.iter().filter(|(symbol, price)| after.get(*symbol).is_some_and(|p| p != *price)).count();
    assert!(changed * 2 > before.len(), "prices move: only {changed} of {} changed in 2.5 s", before.len());
}

#[test]
fn unknown_exchange_in_path_is_404() {
    let server = start();
    server.get_authed("/v1/exchanges/kraken/symbols").assert_error(
        404,
        "unknown exchange 'kraken'. Allowed: binance, bybit, okx, bitget",
        "kraken symbols",
    );
}

#[test]
fn symbol_detail_defaults_to_binance_and_matches_case_insensitively() {
    let server = start();
    let list = prices(&symbols(&server, "binance"));

    for path in [
        "/v1/symbols/BTCUSDT",
        "/v1/symbols/btcusdt",
        "/v1/symbols/BtcUsdt?exchange=binance",
        "/v1/symbols/BTCUSDT?foo=bar&exchange=binance&x=",
    ] {
        let reply = server.get_authed(path);
        let body = reply.ok(path);
        assert_eq!(body["symbol"], "BTCUSDT", "{path}: symbol answered uppercase");
        assert_eq!(body["exchange"], "binance", "{path}: exchange");
        let data = &body["data"];
        assert_eq!(data["base"], "BTC", "{path}: base");
        assert_eq!(data["quote"], "USDT", "{path}: quote");
        assert_eq!(data["status"], "trading", "{path}: status");
        for field in ["price", "tickSize", "lotSize"] {
            let value = data[field].as_f64().unwrap_or(-1.0);
            assert!(value > 0.0, "{path}: {field} is a positive number: {data}");
        }
        assert_recent_ms(&data["ts"], path);
        let price = data["price"].as_f64().unwrap_or(0.0);
        let listed = list.get("BTCUSDT").copied().unwrap_or(0.0);
        assert!((price / listed - 1.0).abs() < 0.05, "{path}: price {price} is near the listed price {listed}");
    }

    for venue in VENUES {
        let path = format!("/v1/symbols/ethusdt?exchange={venue}");
        let reply = server.get_authed(&path);
        let body = reply.ok(&path);
        assert_eq!(body["symbol"], "ETHUSDT", "{path}");
        assert_eq!(body["exchange"], venue, "{path}");
    }
}

#[test]
fn symbol_errors_404_and_422() {
    let server = start();
    server.get_authed("/v1/symbols/FOOBAR").assert_error(404, "unknown symbol 'FOOBAR' on binance", "unknown symbol");
    server.get_authed("/v1/symbols/FOOBAR?exchange=okx").assert_error(
        404,
        "unknown symbol 'FOOBAR' on okx",
        "unknown symbol on okx",
    );
    server.get_authed("/v1/symbols/BTCUSDT?exchange=kraken").assert_error(
        422,
        INVALID_KRAKEN,
        "bad exchange parameter",
    );
    server.get_authed("/v1/symbols/FOOBAR?exchange=kraken").assert_error(
        422,
        INVALID_KRAKEN,
        "bad exchange beats unknown symbol",
    );
    // 4xx is deterministic: an identical retry fails identically.
    server.get_authed("/v1/symbols/BTCUSDT?exchange=kraken").assert_error(
        422,
        INVALID_KRAKEN,
        "bad exchange parameter, again",
    );
}

#[test]
fn unknown_routes_are_404_and_wrong_methods_405() {
    let server = start();
    for path in ["/v1/nope", "/v1/exchanges/binance/symbols/extra", "/v1/exchanges/binance", "/v1/symbols"] {
        server.get_authed(path).assert_error(404, "not found", &format!("GET {path}"));
    }
    let auth = format!("Bearer {}", server.key);
    for (method, path, body) in [
        ("POST", "/v1/exchanges", Some("{}")),
        ("DELETE", "/v1/exchanges", None),
        ("PUT", "/v1/exchanges/binance/symbols", Some("{}")),
        ("DELETE", "/v1/symbols/BTCUSDT", None),
        ("PATCH", "/v1/symbols/BTCUSDT", Some("{}")),
    ] {
        server.request(method, path, Some(&auth), body).assert_some_error(405, &format!("{method} {path}"));
    }
}

#[test]
fn every_response_is_json() {
    let server = start();
    let free = server.create_key("free", None);
    let auth = format!("Bearer {}", server.key);
    let replies: Vec<(&str, u16, Reply)> = vec![
        ("healthz", 200, server.get("/healthz", None)),
        ("exchanges", 200, server.get_authed("/v1/exchanges")),
        ("symbols", 200, server.get_authed("/v1/exchanges/bybit/symbols")),
        ("symbol", 200, server.get_authed("/v1/symbols/SOLUSDT")),
        ("no key", 401, server.get("/v1/exchanges", None)),
        ("free key", 403, server.get("/v1/exchanges", Some(&free))),
        ("unknown exchange", 404, server.get_authed("/v1/exchanges/kraken/symbols")),
        ("unknown route", 404, server.get_authed("/v1/whatever")),
        ("wrong method", 405, server.request("POST", "/v1/exchanges", Some(&auth), Some("{}"))),
        ("bad parameter", 422, server.get_authed("/v1/symbols/BTCUSDT?exchange=kraken")),
    ];
    for (what, status, reply) in &replies {
        assert_eq!(reply.status, *status, "{what}: status; {reply:?}");
        reply.assert_json(what);
        if *status >= 400 {
            reply.assert_some_error(*status, what);
        }
    }
}

#[test]
fn healthz_is_ok_without_a_key() {
    let server = start();
    let reply = server.get("/healthz", None);
    let body = reply.ok("healthz");
    assert_eq!(body["status"], "ok", "healthz body: {}", reply.text);
    // A bad key does not matter to the readiness probe.
    let reply = server.get("/healthz", Some("rk_bogus"));
    assert_eq!(reply.ok("healthz with a bad key")["status"], "ok");
    // The orchestrators' probes (issue #50), without a key.
    let live = server.get("/livez", None);
    let l = live.ok("livez");
    assert_eq!((&l["status"], &l["role"], &l["state"]), (&json!("live"), &json!("single"), &json!("serving")));
    let ready = server.get("/readyz", Some("rk_bogus"));
    let r = ready.ok("readyz");
    assert_eq!(
        (&r["status"], &r["role"], &r["state"], &r["reason"]),
        (&json!("ready"), &json!("single"), &json!("serving"), &Value::Null)
    );
    server.request("POST", "/readyz", None, None).assert_some_error(405, "POST /readyz");
}

#[test]
fn sigterm_shuts_down_gracefully_with_status_0() {
    let server = start();
    server.get_authed("/v1/exchanges").ok("before SIGTERM");
    let status = server.terminate();
    assert_eq!(status.code(), Some(0), "exit status after SIGTERM: {status:?}\n{}", server.diagnostics());
    assert!(!server.alive(), "process gone after SIGTERM");
}

/// `exchange` is matched case-insensitively and answered in lowercase; a request body field the
/// endpoint does not know (the response's `webhookUrl` spelling, say) is refused, naming it,
/// and creates nothing (decisions.md §11).
#[test]
fn exchange_is_case_insensitive_and_unknown_fields_are_refused() {
    let server = start();
    for path in ["/v1/symbols/btcusdt?exchange=OKX", "/v1/levels/BTCUSDT?exchange=Okx", "/v1/exchanges/OKX/symbols"] {
        let reply = server.get_authed(path);
        let body = reply.ok(path);
        let exchange = body.get("exchange").cloned().unwrap_or(Value::Null);
        assert!(exchange == json!("okx") || exchange.is_null(), "{path}: {}", reply.text);
    }
    let auth = format!("Bearer {}", server.key);
    let body = json!({"symbol":"BTCUSDT","type":"price","direction":"below","price":1,"exchange":"OKX",
                      "webhookUrl":"https://hooks.example.com/x"});
    server.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string())).assert_error(
        422,
        "unknown field 'webhookUrl'. Allowed: symbol, exchange, type, direction, price, pct, window, event, within_pct, min_strength, timeframes, min_usd, min_ratio, max_dist_pct, min_age_s, funding_pct, repeat, note, webhook_url, expires_at, cooldown_s, max_fires, message, webhook_format",
        "the response's spelling in a request",
    );
    let listed = server.get("/v1/alerts?status=all", Some(&server.key));
    assert_eq!(listed.ok("list")["data"].as_array().map(Vec::len), Some(0), "nothing was created");
    let body = json!({"symbol":"BTCUSDT","type":"price","direction":"below","price":1,"exchange":"OKX"});
    let created = server.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string()));
    assert_eq!(created.ok("exchange OKX")["data"]["exchange"], json!("okx"));
}

/// SIGHUP does not stop the server: it logs that there is nothing to reload and keeps serving.
#[test]
fn sighup_is_logged_and_the_server_keeps_serving() {
    let server = start();
    let sent = std::process::Command::new("kill").arg("-HUP").arg(server.pid.to_string()).status().expect("kill -HUP");
    assert!(sent.success());
    thread::sleep(Duration::from_millis(300));
    server.assert_serving("SIGHUP");
    let logged = server.stderr_tail().iter().any(|l| l.contains("SIGHUP: settings are read only at start"));
    assert!(logged, "{}", server.diagnostics());
    assert_eq!(server.terminate().code(), Some(0), "SIGTERM still stops it");
}
