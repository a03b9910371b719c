//! Metrics, rankings and the market board through the real binary (decisions §9): each metric
//! of a pair recomputed from the pair's own served candles, book, levels and walls; rankings
//! equal to sorting the served metrics; board numbers equal to counting them; every 4xx.
//!
//! The simulated market runs slowly here (`--sim-step-ms 60000`: a pair moves about once a
//! minute), so a pair is often unchanged for the few seconds a comparison needs; a comparison
//! is made only when what it reads did not change around the metrics' computation.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{now_ms, Server, FAST};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// A plan without a practical request limit, for tests that read a lot.
const CONFIG: &str = "[plans.big]\napi = true\nprice_alert_cap = 10\npct_alerts = true\nrepeat = true\n\
burst_per_min = 1000000\ndaily_quota = 100000000\n";

const INTERVALS: [(&str, i64); 6] =
    [("5m", 300_000), ("15m", 900_000), ("1h", 3_600_000), ("4h", 14_400_000), ("1d", 86_400_000), ("1w", 604_800_000)];

struct Rig {
    server: Server,
    key: String,
    _config: tempfile_path::Temp,
}

/// A tiny temporary file, removed on drop.
mod tempfile_path {
    pub struct Temp(pub std::path::PathBuf);
    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn start(name: &str) -> Rig {
    let path = std::env::temp_dir().join(format!("rampart-board-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, CONFIG).expect("write config");
    let config = path.display().to_string();
    let server = Server::start(BIN, &[FAST, &["--config", config.as_str(), "--sim-step-ms", "60000"]].concat());
    let out = server.keys(&["create", "--plan", "big", "--config", config.as_str()]);
    assert!(out.status.success(), "{out:?}");
    let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
    server.await_key(&key);
    Rig { server, key, _config: tempfile_path::Temp(path) }
}

impl Rig {
    fn get(&self, path: &str) -> Value {
        self.server.get(path, Some(&self.key)).ok(path).clone()
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

/// `a` equals `b` written with `decimals` decimals.
fn close(a: f64, b: f64, decimals: i32, what: &str) {
    let tol = 0.5 * 10f64.powi(-decimals) + 1e-9 * b.abs().max(1.0);
    assert!((a - b).abs() <= tol, "{what}: served {a}, recomputed {b}");
}

/// What one comparison reads besides the metrics.
#[derive(PartialEq)]
struct Inputs {
    bars_5m: Value,
    bars_1h: Value,
    book: (Value, Value),
    levels: Value,
    walls: Value,
}

fn inputs(rig: &Rig, symbol: &str) -> Inputs {
    let book = rig.get(&format!("/v1/book/{symbol}?limit=1000"));
    let walls = rig.server.get(&format!("/v1/densities/{symbol}"), Some(&rig.key));
    Inputs {
        bars_5m: rig.get(&format!("/v1/candles/{symbol}?interval=5m&limit=1000"))["data"].clone(),
        bars_1h: rig.get(&format!("/v1/candles/{symbol}?interval=1h&limit=1000"))["data"].clone(),
        book: (book["bids"].clone(), book["asks"].clone()),
        levels: rig.get(&format!("/v1/levels/{symbol}"))["data"].clone(),
        walls: if walls.status == 404 { Value::Null } else { walls.ok("densities")["data"]["walls"].clone() },
    }
}

/// The bulk row of `symbol` computed after `after_ms`.
fn metrics_after(rig: &Rig, symbol: &str, after_ms: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let bulk = rig.get(&format!("/v1/metrics?symbols={symbol}"));
        let row = bulk["data"][0].clone();
        if row["computedAt"].as_i64().is_some_and(|t| t > after_ms) {
            return row;
        }
        assert!(Instant::now() < deadline, "no computation after {after_ms}: {bulk}");
        thread::sleep(Duration::from_millis(200));
    }
}

/// Checks every metric of `row` against `inp`; returns how many intervals the history covers.
fn check_pair(row: &Value, inp: &Inputs, symbol: &str) -> usize {
    let mut covered_intervals = 0;
    let now = row["computedAt"].as_i64().expect("computedAt");
    let price = num(&row["price"]);
    let data = &row["data"];
    for (name, len) in INTERVALS {
        let bars = if name == "1w" { &inp.bars_1h } else { &inp.bars_5m };
        let bars = bars.as_array().expect("bars");
        let tf = if name == "1w" { 3_600_000 } else { 300_000 };
        let start = now.div_euclid(tf) * tf - len;
        let what = format!("{symbol} {name}");
        let served = &row["byInterval"][name];
        let covered = bars.first().is_some_and(|b| b["openTime"].as_i64().is_some_and(|t| t <= start));
        if !covered {
            for metric in ["change", "volatility", "volume", "trades"] {
                assert!(served.get(metric).is_none(), "{what}: the history does not reach the window: {served}");
            }
            continue;
        }
        covered_intervals += 1;
        let window: Vec<&Value> = bars.iter().filter(|b| b["openTime"].as_i64().is_some_and(|t| t >= start)).collect();
        let newest = bars.last().expect("a bar");
        let open = window.first().map_or(num(&newest["close"]), |b| num(&b["open"]));
        let (mut high, mut low) = (price, price);
        if window.is_empty() {
            (high, low) = (high.max(num(&newest["close"])), low.min(num(&newest["close"])));
        }
        let (mut volume, mut trades) = (0.0, Some(0i64));
        for b in &window {
            high = high.max(num(&b["high"]));
            low = low.min(num(&b["low"]));
            volume += num(&b["volume"]);
            trades = trades.zip(b["trades"].as_i64()).map(|(a, n)| a + n);
        }
        let expect = [
            ("change", (price - open) / open * 100.0, 4),
            ("volatility", (high - low) / open * 100.0, 4),
            ("volume", volume, 2),
        ];
        for (metric, value, decimals) in expect {
            close(num(&served[metric]), value, decimals, &format!("{what} {metric}"));
        }
        assert_eq!(served["trades"].as_i64(), trades, "{what} trades");
    }
    let (bids, asks) = (inp.book.0.as_array().expect("bids"), inp.book.1.as_array().expect("asks"));
    let (bid, ask) = (num(&bids[0][0]), num(&asks[0][0]));
    let mid = (bid + ask) / 2.0;
    close(num(&data["spread"]), (ask - bid) / mid * 10_000.0, 2, &format!("{symbol} spread"));
    let value = |side: &[Value], keep: &dyn Fn(f64) -> bool| -> f64 {
        side.iter().filter(|l| keep(num(&l[0]))).map(|l| num(&l[0]) * num(&l[1])).sum()
    };
    let bid_usd = value(bids, &|p| p >= mid * 0.99);
    let ask_usd = value(asks, &|p| p <= mid * 1.01);
    assert!(bids.len() < 1000 && asks.len() < 1000, "the whole band was served");
    close(num(&data["depth"]["bidUsd"]), bid_usd, 2, &format!("{symbol} depth bid"));
    close(num(&data["depth"]["askUsd"]), ask_usd, 2, &format!("{symbol} depth ask"));
    close(num(&data["depth"]["imbalance"]), (bid_usd - ask_usd) / (bid_usd + ask_usd), 4, "imbalance");
    let walls = inp.walls.as_array().cloned().unwrap_or_default();
    assert_eq!(data["walls"]["count"].as_u64(), Some(walls.len() as u64), "{symbol} wall count");
    let usd: f64 = walls.iter().map(|w| num(&w["usd"])).sum();
    close(num(&data["walls"]["usd"]), usd, 2, &format!("{symbol} wall usd"));
    let levels = inp.levels.as_array().expect("levels");
    let nearest = |kind: &str| -> Option<f64> {
        let prices = levels.iter().filter(|l| l["type"] == kind).map(|l| num(&l["price"]));
        let p = if kind == "support" { prices.reduce(f64::max) } else { prices.reduce(f64::min) };
        p.map(|p| (p - price) / price * 100.0)
    };
    if levels.is_empty() {
        assert!(data.get("levels").is_none(), "{symbol}: no level, no levels metric");
    } else {
        for kind in ["support", "resistance"] {
            match nearest(kind) {
                Some(d) => close(num(&data["levels"][kind]), d, 4, &format!("{symbol} {kind}")),
                None => assert!(data["levels"][kind].is_null(), "{symbol} {kind} null"),
            }
        }
    }
    covered_intervals
}

/// Every metric of a pair equals the same figure recomputed from what the service serves for
/// that pair at that time: its candles (5m and 1h), its book, its levels and its walls.
#[test]
fn a_pairs_metrics_equal_its_served_candles_book_levels_and_walls() {
    let rig = start("pair");
    let mut checked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    for symbol in ["BTCUSDT", "ETHUSDT", "SOLUSDT", "XRPUSDT"].iter().cycle() {
        if checked.len() == 3 || Instant::now() > deadline {
            break;
        }
        if checked.contains(symbol) {
            continue;
        }
        let before = inputs(&rig, symbol);
        let fetched = now_ms();
        // The interval metrics of each interval, all from the same computation.
        let mut row = metrics_after(&rig, symbol, fetched);
        let mut by = serde_json::Map::new();
        for (name, _) in INTERVALS {
            let r = rig.get(&format!("/v1/metrics?symbols={symbol}&interval={name}"));
            if r["data"][0]["computedAt"] != row["computedAt"] {
                break;
            }
            by.insert(name.to_owned(), r["data"][0]["data"].clone());
        }
        let after = inputs(&rig, symbol);
        if by.len() < INTERVALS.len() || before != after {
            continue; // the pair moved or was recomputed meanwhile: try again
        }
        row["byInterval"] = Value::Object(by);
        let covered = check_pair(&row, &after, symbol);
        assert_eq!(covered, INTERVALS.len(), "{symbol} has years of history: every window is covered");
        checked.push(*symbol);
    }
    assert_eq!(checked.len(), 3, "three pairs checked within 2 minutes: {checked:?}");
}

/// The bulk metrics and a ranking read from the same board (same `ts`).
fn same_board(rig: &Rig, bulk_query: &str, ranking: &str) -> (Value, Value) {
    for _ in 0..50 {
        let bulk = rig.get(&format!("/v1/metrics?{bulk_query}"));
        let ranked = rig.get(ranking);
        if bulk["ts"] == ranked["ts"] {
            return (bulk, ranked);
        }
    }
    panic!("no two reads of the same board in 50 tries");
}

/// The value a ranking by `metric` sorts by, from a bulk row's data.
fn rank_value(data: &Value, metric: &str) -> Option<f64> {
    let v = data.get(metric)?;
    match metric {
        "depth" => Some(num(&v["bidUsd"]) + num(&v["askUsd"])),
        "walls" => v["usd"].as_f64(),
        "levels" => {
            [v["support"].as_f64(), v["resistance"].as_f64()].into_iter().flatten().map(f64::abs).reduce(f64::min)
        }
        _ => v.as_f64(),
    }
}

/// Every ranking is the served metrics sorted: its rows carry the pair's served value and
/// price, in order, and no pair left out of a full page ranks above its last row.
#[test]
fn rankings_are_the_served_metrics_sorted() {
    let rig = start("rankings");
    let cases = [
        ("all", "change", "1d", None),
        ("all", "change", "1h", Some("asc")),
        ("usdt", "volume", "4h", None),
        ("btc", "volatility", "1w", None),
        ("all", "trades", "15m", None),
        ("all", "spread", "1d", None),
        ("all", "depth", "1d", None),
        ("all", "walls", "1d", None),
        ("usdt", "levels", "1d", None),
    ];
    for (category, metric, interval, order) in cases {
        let limit = 10;
        let order_q = order.map_or(String::new(), |o| format!("&order={o}"));
        let ranking = format!("/v1/rankings/{category}?metric={metric}&interval={interval}&limit={limit}{order_q}");
        let (bulk, ranked) = same_board(&rig, &format!("interval={interval}"), &ranking);
        let what = format!("{category} by {metric} over {interval}");
        let asc = order.unwrap_or(if matches!(metric, "levels" | "spread") { "asc" } else { "desc" }) == "asc";
        assert_eq!(ranked["order"], if asc { "asc" } else { "desc" }, "{what}");
        let in_category = |symbol: &str| match category {
            "usdt" => symbol.ends_with("USDT"),
            "btc" => symbol.ends_with("BTC"),
            _ => true,
        };
        let mut served: Vec<(String, f64, f64)> = bulk["data"]
            .as_array()
            .expect("rows")
            .iter()
            .filter(|r| in_category(r["symbol"].as_str().unwrap_or("")))
            .filter_map(|r| {
                let v = rank_value(&r["data"], metric)?;
                Some((r["symbol"].as_str()?.to_owned(), v, num(&r["price"])))
            })
            .collect();
        served.sort_by(|a, b| if asc { a.1.total_cmp(&b.1) } else { b.1.total_cmp(&a.1) });
        let rows = ranked["data"].as_array().expect("data");
        assert_eq!(rows.len(), served.len().min(limit), "{what}: {ranked}");
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row["rank"].as_u64(), Some(i as u64 + 1), "{what}");
            let symbol = row["symbol"].as_str().expect("symbol");
            let (_, value, price) = served
                .iter()
                .find(|s| s.0 == symbol)
                .unwrap_or_else(|| panic!("{what}: {symbol} is not served with the metric"));
            // Written with the metric's decimals; depth's is the sum of two written values.
            let tol = match metric {
                "trades" => 0.0,
                "volume" | "spread" | "depth" | "walls" => 0.01,
                _ => 0.0001,
            } + 1e-9 * value.abs();
            assert!(
                (num(&row["value"]) - value).abs() <= tol,
                "{what} {symbol}: ranked {}, served {value}",
                row["value"]
            );
            assert_eq!(num(&row["price"]), *price, "{what} {symbol} price");
            // Rows are sorted by the served values; within the written precision ties may go either way.
            assert!(
                (served[i].1 - value).abs() <= tol,
                "{what}: row {i} is {symbol} ({value}), the sort says {:?}",
                served[i]
            );
        }
    }
}

/// The board numbers are counts over the served metrics of the same board.
#[test]
fn board_numbers_count_the_served_metrics() {
    let rig = start("market");
    for interval in ["1h", "1d"] {
        let (bulk, market) =
            same_board(&rig, &format!("interval={interval}"), &format!("/v1/market?interval={interval}"));
        let rows = bulk["data"].as_array().expect("rows");
        let changes: Vec<f64> = rows.iter().filter_map(|r| r["data"]["change"].as_f64()).collect();
        let d = &market["data"];
        let count = |f: &dyn Fn(f64) -> bool| changes.iter().filter(|&&c| f(c)).count() as u64;
        assert_eq!(d["pairs"].as_u64(), Some(changes.len() as u64), "{interval} pairs");
        assert_eq!(d["advancing"].as_u64(), Some(count(&|c| c > 0.0)), "{interval} advancing");
        assert_eq!(d["declining"].as_u64(), Some(count(&|c| c < 0.0)), "{interval} declining");
        assert_eq!(d["unchanged"].as_u64(), Some(count(&|c| c == 0.0)), "{interval} unchanged");
        assert_eq!(d["up5"].as_u64(), Some(count(&|c| c >= 5.0)), "{interval} up5");
        assert_eq!(d["down5"].as_u64(), Some(count(&|c| c <= -5.0)), "{interval} down5");
        let walls: u64 = rows.iter().filter_map(|r| r["data"]["walls"]["count"].as_u64()).sum();
        assert_eq!(d["walls"].as_u64(), Some(walls), "{interval} walls");
        let at_level = rows.iter().filter(|r| rank_value(&r["data"], "levels").is_some_and(|v| v <= 0.5)).count();
        assert_eq!(d["atLevel"].as_u64(), Some(at_level as u64), "{interval} atLevel");
        // Sentiment weighs by USD volume; on the USD-quoted pairs the quote is the dollar.
        let usd = |r: &&Value| r["symbol"].as_str().is_some_and(|s| s.ends_with("USDT") || s.ends_with("USDC"));
        let (up, all) = rows.iter().filter(usd).fold((0.0, 0.0), |(up, all), r| {
            let (c, v) = (r["data"]["change"].as_f64(), r["data"]["volume"].as_f64().unwrap_or(0.0));
            match c {
                Some(c) => (if c > 0.0 { up + v } else { up }, all + v),
                None => (up, all),
            }
        });
        let s = num(&d["sentiment"]);
        assert!((0.0..=100.0).contains(&s), "{s}");
        assert!(changes.len() > 40 && d["advancing"].as_u64() > Some(0), "a market with moves: {market}");
        // Non-USD pairs weigh by their quote's dollar price at their own computation time, so
        // they are left out of this bound: their share of the volume bounds the difference.
        let other: f64 = rows.iter().filter(|r| !usd(r)).count() as f64 / rows.len() as f64;
        assert!(
            (s - up / all * 100.0).abs() <= 100.0 * other + 0.05,
            "{interval} sentiment {s} vs {}",
            up / all * 100.0
        );
    }
}

/// Young listings have only the metrics their history allows (200, possibly `{}`); they are the
/// `new` universe; every bad parameter is a 422 naming the allowed values, an unknown category
/// or symbol a 404.
#[test]
fn young_listings_new_category_and_errors() {
    let rig = start("errors");
    let new = rig.get("/v1/rankings/new?metric=volume&interval=5m&limit=100");
    let young: Vec<String> =
        new["data"].as_array().expect("rows").iter().filter_map(|r| r["symbol"].as_str().map(str::to_owned)).collect();
    assert!(!young.is_empty(), "the simulated market lists young pairs: {new}");
    for symbol in &young {
        let bars = rig.get(&format!("/v1/candles/{symbol}?interval=1d&limit=1000"));
        let first = bars["data"][0]["openTime"].as_i64().expect("a bar");
        assert!(now_ms() - first < 30 * 86_400_000, "{symbol} in `new` has history from {first}");
        let m = rig.get(&format!("/v1/metrics/{symbol}?interval=1d"));
        assert!(m["data"].get("change").is_none(), "{symbol}: no 1d window yet: {m}");
        let m = rig.get(&format!("/v1/metrics/{symbol}?interval=1d&metric=change,trades"));
        assert_eq!(m["data"], serde_json::json!({}), "{symbol}: 200 with empty data");
    }
    let all = rig.get("/v1/rankings/all?metric=volume&interval=5m&limit=100");
    for row in all["data"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| !young.iter().any(|y| r["symbol"] == y.as_str()))
        .take(3)
    {
        let symbol = row["symbol"].as_str().expect("symbol");
        let bars = rig.get(&format!("/v1/candles/{symbol}?interval=1d&limit=1000"));
        let first = bars["data"][0]["openTime"].as_i64().expect("a bar");
        assert!(now_ms() - first >= 30 * 86_400_000, "{symbol} is not new");
    }
    let key = Some(rig.key.as_str());
    let e = |path: &str, status: u16, message: &str| rig.server.get(path, key).assert_error(status, message, path);
    e("/v1/rankings/gainers", 404, "unknown ranking category");
    e("/v1/metrics/NOPEUSDT", 404, "unknown symbol 'NOPEUSDT' on binance");
    e("/v1/candles/NOPEUSDT", 404, "unknown symbol 'NOPEUSDT' on binance");
    e("/v1/book/NOPEUSDT", 404, "unknown symbol 'NOPEUSDT' on binance");
    let interval = "invalid interval '2h'. Allowed: 5m, 15m, 1h, 4h, 1d, 1w";
    let metric = "invalid metric 'rsi'. Allowed: change, volatility, volume, trades, spread, depth, walls, levels, liquidations, oi, oiChange, funding";
    e("/v1/metrics/BTCUSDT?interval=2h", 422, interval);
    e("/v1/metrics?interval=2h", 422, interval);
    e("/v1/rankings/all?interval=2h", 422, interval);
    e("/v1/market?interval=2h", 422, interval);
    e("/v1/candles/BTCUSDT?interval=2h", 422, interval);
    e("/v1/metrics/BTCUSDT?metric=change,rsi", 422, metric);
    e("/v1/metrics?metric=rsi", 422, metric);
    let empty = "invalid metric ''. Allowed: change, volatility, volume, trades, spread, depth, walls, levels, liquidations, oi, oiChange, funding";
    e("/v1/metrics/BTCUSDT?metric=", 422, empty);
    e("/v1/metrics?metric=change,,volume", 422, empty);
    e("/v1/rankings/all?metric=rsi", 422, metric);
    e("/v1/rankings/all?order=up", 422, "invalid order 'up'. Allowed: asc, desc");
    e("/v1/rankings/all?limit=0", 422, "invalid limit '0'. Allowed: 1 to 100");
    e("/v1/rankings/all?limit=101", 422, "invalid limit '101'. Allowed: 1 to 100");
    e("/v1/candles/BTCUSDT?limit=1001", 422, "invalid limit '1001'. Allowed: 1 to 1000");
    e("/v1/book/BTCUSDT?limit=x", 422, "invalid limit 'x'. Allowed: 1 to 1000");
    e("/v1/market?exchange=kraken", 422, "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget");
    e("/v1/rankings/all?exchange=kraken", 422, "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget");
    e("/v1/metrics?usd=yes", 422, "invalid usd 'yes'. Allowed: true, false");
    e("/v1/metrics/BTCUSDT?usd=1", 422, "invalid usd '1'. Allowed: true, false");
    // `usd=true` adds each pair's quote USD price (1 for a USD stablecoin, decisions.md §8);
    // without it the answer is as it always was.
    let plain = rig.get("/v1/metrics");
    let usd = rig.get("/v1/metrics?usd=true");
    let rows = usd["data"].as_array().cloned().unwrap_or_default();
    assert!(!rows.is_empty(), "{usd}");
    for row in &rows {
        let quote = &row["quoteUsd"];
        let computed = row["computedAt"].as_i64().is_some_and(|t| t > 0);
        if computed && row["symbol"].as_str().is_some_and(|s| s.ends_with("USDT") || s.ends_with("USDC")) {
            assert_eq!(quote.as_f64(), Some(1.0), "{row}");
        } else {
            assert!(quote.is_null() || quote.as_f64().is_some_and(|q| q > 0.0), "{row}");
        }
    }
    assert!(plain["data"].as_array().is_some_and(|a| a.iter().all(|r| r.get("quoteUsd").is_none())), "{plain}");
    let one = rig.get("/v1/metrics/BTCUSDT?usd=true");
    let expected = if one["computedAt"].as_i64().is_some_and(|t| t > 0) { Some(1.0) } else { None };
    assert_eq!(one["quoteUsd"].as_f64(), expected, "{one}");
    assert!(one.get("quoteUsd").is_some(), "{one}");
    let many = (0..101).map(|i| format!("S{i}")).collect::<Vec<_>>().join(",");
    e(&format!("/v1/metrics?symbols={many}"), 422, "symbol list too long (max 100)");
    for path in ["/v1/metrics/BTCUSDT", "/v1/rankings/all", "/v1/market", "/v1/candles/BTCUSDT", "/v1/book/BTCUSDT"] {
        let r = rig.server.request("POST", path, Some(&format!("Bearer {}", rig.key)), Some("{}"));
        assert_eq!(r.status, 405, "{path}: {}", r.text);
    }
}
