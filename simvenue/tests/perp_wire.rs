//! `rampart sim-venue`'s perpetuals (decisions §17, "The simulator") read over real sockets the
//! way the service reads them: each venue's listing through `rampart_venue::perp_listing` and
//! matched onto the spot pairs, each frame through the engine's perpetual decoders, units
//! through `PerpPair`; the control routes' liquidations, OI jumps, funding changes, delistings
//! and faults seen on the wire, and their refusals.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rampart_engine::feed::perp::{Liquidation, PerpMessage, QtyUnit, Update};
use rampart_engine::perp_window::PositionSide;
use rampart_engine::Venue;
use rampart_simvenue::{self as simvenue, Config, Handle};
use rampart_venue::perp_listing::{self, PerpPair};
use rampart_venue::perp_session::PerpDecoder;
use serde_json::Value;
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

/// How long any single expectation may take before the test fails.
const WAIT: Duration = Duration::from_secs(8);

fn start() -> Handle {
    simvenue::start(Config { sim_pairs: 12, ..Config::default() }).expect("simulator starts")
}

fn http(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    let req = ureq::request(method, url).timeout(Duration::from_secs(5));
    let res = match body {
        Some(b) => req.set("Content-Type", "application/json").send_string(b),
        None => req.call(),
    };
    match res {
        Ok(r) => (r.status(), r.into_string().expect("body")),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().expect("body")),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

fn get(h: &Handle, path: &str) -> String {
    let (s, body) = http("GET", &format!("{}{path}", h.url()), None);
    assert_eq!(s, 200, "GET {path}: {body}");
    body
}

fn post(h: &Handle, path: &str, body: &str) -> (u16, Value) {
    let (s, text) = http("POST", &format!("{}{path}", h.url()), Some(body));
    (s, serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}")))
}

fn ok(h: &Handle, path: &str, body: &str) -> Value {
    let (s, v) = post(h, path, body);
    assert_eq!((s, &v["ok"]), (200, &Value::Bool(true)), "POST {path} {body}: {v}");
    v
}

fn refused(h: &Handle, path: &str, body: &str, want: &str) {
    let (s, v) = post(h, path, body);
    assert_eq!(s, 400, "POST {path} {body}: {v}");
    let error = v["error"].as_str().unwrap_or("");
    assert!(error.contains(want), "POST {path} {body}: '{error}' does not say '{want}'");
}

type Ws = WebSocket<TcpStream>;

fn connect(h: &Handle, path: &str) -> Ws {
    let stream = TcpStream::connect(h.addr()).expect("tcp connect");
    stream.set_read_timeout(Some(Duration::from_millis(100))).expect("read timeout");
    let (ws, _) = tungstenite::client(format!("{}{path}", h.ws_url()), stream).expect("WebSocket handshake");
    ws
}

/// The next text message within `within`; `None` when none came; panics when the connection
/// closed (unless `closed_ok`).
fn next_text(ws: &mut Ws, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(t)) => return Some(t.to_string()),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("connection ended: {e}"),
        }
    }
    None
}

/// True when the connection ends within `within`.
fn ends(ws: &mut Ws, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Close(_)) => return true,
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

fn send(ws: &mut Ws, s: &str) {
    ws.send(Message::text(s.to_owned())).expect("send");
}

/// What one frame decoded to, owned.
#[derive(Debug, Default)]
struct Decoded {
    liquidations: Vec<(String, Liquidation)>,
    updates: Vec<(String, Update)>,
}

/// The service's decoder of a venue's perpetual frames, owning what it decoded.
struct Decoder(PerpDecoder);

impl Decoder {
    fn of(venue: Venue) -> Decoder {
        Decoder(PerpDecoder::of(venue))
    }

    fn decode(&mut self, frame: &str) -> Decoded {
        let msg = self.0.decode(frame.as_bytes());
        let name = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
        let mut out = Decoded::default();
        match msg.unwrap_or_else(|e| panic!("the service's decoder refuses {frame}: {e:?}")) {
            PerpMessage::Liquidations(b) => out.liquidations = b.iter().map(|e| (name(e.symbol), e.value)).collect(),
            PerpMessage::Updates(b) => out.updates = b.iter().map(|e| (name(e.symbol), e.value)).collect(),
            PerpMessage::Reply(r) => assert!(r.ok, "a refusal: {frame}"),
            PerpMessage::Pong | PerpMessage::Other => {}
        }
        out
    }
}

/// Reads frames until `want` holds of one decoded frame; returns it.
fn until(ws: &mut Ws, dec: &mut Decoder, what: &str, want: impl Fn(&Decoded) -> bool) -> Decoded {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(t) = next_text(ws, Duration::from_millis(200)) {
            let d = dec.decode(&t);
            if want(&d) {
                return d;
            }
        }
    }
    panic!("{what}: not seen within {WAIT:?}");
}

/// The venue's perpetual listing parsed by the service's parser and matched to its spot pairs.
fn matched(h: &Handle, venue: Venue, listing_path: &str, spot: &[&str]) -> Vec<PerpPair> {
    let body = get(h, listing_path);
    let listing = perp_listing::parse(venue, body.as_bytes()).unwrap_or_else(|e| panic!("{venue}: {e:?}: {body}"));
    assert_eq!(listing.skipped, 0, "{venue}: every contract listed is usable");
    let spot: HashSet<&str> = spot.iter().copied().collect();
    let (pairs, unmatched) = perp_listing::match_spot(&listing, &spot);
    assert!(unmatched >= 1, "{venue}: the perpetual without a spot pair is left out");
    pairs
}

/// The venue's spot symbols as its spot listing names them (`BASEQUOTE`).
fn spot_symbols(h: &Handle) -> Vec<String> {
    let body = get(h, "/api/v3/exchangeInfo");
    let v: Value = serde_json::from_str(&body).expect("json");
    v["symbols"].as_array().expect("symbols").iter().filter_map(|s| s["symbol"].as_str().map(str::to_owned)).collect()
}

fn pair<'a>(pairs: &'a [PerpPair], symbol: &str) -> &'a PerpPair {
    pairs.iter().find(|p| p.symbol == symbol).unwrap_or_else(|| panic!("{symbol} has no perpetual: {pairs:?}"))
}

fn usd(p: &PerpPair, l: &Liquidation) -> f64 {
    p.base_qty(l.qty) * p.base_price(l.price)
}

#[test]
fn binance_holds_one_liquidation_a_second_and_its_unrouted_path_stays_silent() {
    let h = start();
    let spot = spot_symbols(&h);
    let spot: Vec<&str> = spot.iter().map(String::as_str).collect();
    let pairs = matched(&h, Venue::Binance, "/fapi/v1/exchangeInfo", &spot);
    let btc = pair(&pairs, "BTCUSDT").clone();

    let mut ws = connect(&h, "/market/stream?streams=btcusdt@forceOrder/btcusdt@markPrice@1s");
    let mut unrouted = connect(&h, "/ws/btcusdt@forceOrder");
    let mut dec = Decoder::of(Venue::Binance);
    let d = until(&mut ws, &mut dec, "a mark price", |d| !d.updates.is_empty());
    let (sym, u) = &d.updates[0];
    assert_eq!(sym, "BTCUSDT");
    assert!(u.mark.is_some_and(|m| m > 0.0) && u.funding_rate.is_some() && u.next_funding_ms.is_some(), "{u:?}");

    // Two at once: the venue sends at most one a second, the larger of a second's.
    ok(&h, "/sim/liquidation", r#"{"venue":"binance","symbol":"BTCUSDT","side":"long","usd":1000000}"#);
    ok(&h, "/sim/liquidation", r#"{"venue":"binance","symbol":"btcusdt","side":"long","usd":"2500000"}"#);
    let mut sent: Vec<Liquidation> = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(3_000);
    while Instant::now() < deadline {
        if let Some(t) = next_text(&mut ws, Duration::from_millis(100)) {
            sent.extend(dec.decode(&t).liquidations.into_iter().map(|(s, l)| {
                assert_eq!((s.as_str(), l.side, l.qty_unit), ("BTCUSDT", PositionSide::Long, QtyUnit::Base));
                l
            }));
        }
    }
    let seconds: HashSet<i64> = sent.iter().map(|l| l.ts_ms.div_euclid(1000)).collect();
    assert_eq!(seconds.len(), sent.len(), "one forced order a second at most: {sent:?}");
    let big = sent.iter().find(|l| usd(&btc, l) >= 2_500_000.0).expect("the larger is sent");
    assert!(usd(&btc, big) < 2_520_000.0, "{big:?}");
    let small = sent.iter().find(|l| (1_000_000.0..1_010_000.0).contains(&usd(&btc, l)));
    if let Some(small) = small {
        assert_ne!(small.ts_ms.div_euclid(1000), big.ts_ms.div_euclid(1000), "both went in one second");
    }
    // The spot path took the subscription and sent nothing.
    while let Some(t) = next_text(&mut unrouted, Duration::from_millis(100)) {
        assert!(!t.contains("forceOrder"), "the unrouted path fed a liquidation: {t}");
    }

    // Open interest is REST only, read by the same decoder.
    let body = get(&h, "/fapi/v1/openInterest?symbol=BTCUSDT");
    let d = dec.decode(&body);
    assert!(d.updates.first().is_some_and(|(s, u)| s == "BTCUSDT" && u.oi_base.is_some_and(|x| x > 0.0)), "{body}");

    // A delisted perpetual leaves the listing the service reads.
    ok(&h, "/sim/perp", r#"{"venue":"binance","symbol":"BTCUSDT","listed":false}"#);
    let pairs = matched(&h, Venue::Binance, "/fapi/v1/exchangeInfo", &spot);
    assert!(pairs.iter().all(|p| p.symbol != "BTCUSDT"), "delisted: {pairs:?}");
    ok(&h, "/sim/perp", r#"{"venue":"binance","symbol":"BTCUSDT","listed":true}"#);
    let pairs = matched(&h, Venue::Binance, "/fapi/v1/exchangeInfo", &spot);
    pair(&pairs, "BTCUSDT");
    h.stop();
}

#[test]
fn bybit_sends_a_ticker_snapshot_then_deltas_and_batched_liquidations() {
    let h = start();
    let body = get(&h, "/v5/market/instruments-info?category=spot");
    let v: Value = serde_json::from_str(&body).expect("json");
    let spot: Vec<String> = v["result"]["list"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|s| s["symbol"].as_str().map(str::to_owned))
        .collect();
    let spot: Vec<&str> = spot.iter().map(String::as_str).collect();
    let pairs = matched(&h, Venue::Bybit, "/v5/market/instruments-info?category=linear", &spot);
    let btc = pair(&pairs, "BTCUSDT").clone();
    assert!(pairs.iter().all(|p| p.interval_h.is_some()), "Bybit lists each funding interval");

    let mut ws = connect(&h, "/v5/public/linear");
    let mut dec = Decoder::of(Venue::Bybit);
    send(&mut ws, r#"{"op":"subscribe","req_id":"1","args":["tickers.BTCUSDT","allLiquidation.BTCUSDT"]}"#);
    let first = until(&mut ws, &mut dec, "the ticker's snapshot", |d| !d.updates.is_empty());
    let u = first.updates[0].1;
    let oi = u.oi_base.expect("the snapshot carries open interest");
    assert!(u.mark.is_some() && u.funding_rate.is_some() && u.next_funding_ms.is_some(), "{u:?}");

    ok(&h, "/sim/oi", r#"{"venue":"bybit","symbol":"BTCUSDT","pct":10}"#);
    let d = until(&mut ws, &mut dec, "the jump's delta", |d| d.updates.iter().any(|(_, u)| u.oi_base.is_some()));
    let jumped = d.updates[0].1.oi_base.unwrap_or(0.0);
    assert!((1.07..1.13).contains(&(jumped / oi)), "OI {oi} then {jumped}");

    ok(&h, "/sim/liquidation", r#"{"venue":"bybit","symbol":"BTCUSDT","side":"short","usd":500000}"#);
    let d = until(&mut ws, &mut dec, "the batch", |d| !d.liquidations.is_empty());
    let l = d.liquidations.iter().map(|(_, l)| *l).find(|l| usd(&btc, l) >= 500_000.0).expect("the injected one");
    assert_eq!(l.side, PositionSide::Short);
    assert!(usd(&btc, &l) < 505_000.0, "{l:?}");
    h.stop();
}

#[test]
fn okx_pushes_on_subscribing_and_sends_liquidations_in_contracts() {
    let h = start();
    let body = get(&h, "/api/v5/public/instruments?instType=SPOT");
    let v: Value = serde_json::from_str(&body).expect("json");
    let spot: Vec<String> = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|s| s["instId"].as_str().map(|x| x.replace('-', "")))
        .collect();
    let spot: Vec<&str> = spot.iter().map(String::as_str).collect();
    let pairs = matched(&h, Venue::Okx, "/api/v5/public/instruments?instType=SWAP", &spot);
    let btc = pair(&pairs, "BTCUSDT").clone();
    assert_eq!(btc.contract, "BTC-USDT-SWAP");
    assert!(btc.contract_size < 1.0, "BTC's ctVal is a fraction: {btc:?}");

    let mut ws = connect(&h, "/ws/v5/public");
    let mut dec = Decoder::of(Venue::Okx);
    send(
        &mut ws,
        r#"{"op":"subscribe","args":[{"channel":"liquidation-orders","instType":"SWAP"},
            {"channel":"open-interest","instId":"BTC-USDT-SWAP"},{"channel":"funding-rate","instId":"BTC-USDT-SWAP"}]}"#,
    );
    until(&mut ws, &mut dec, "the open interest", |d| d.updates.iter().any(|(_, u)| u.oi_contracts.is_some()));
    let d = until(&mut ws, &mut dec, "the funding", |d| d.updates.iter().any(|(_, u)| u.funding_rate.is_some()));
    assert_eq!(d.updates[0].1.funding_interval_ms, Some(8 * 3_600_000), "BTC settles every 8 h");

    ok(&h, "/sim/liquidation", r#"{"venue":"okx","symbol":"BTC-USDT-SWAP","side":"long","usd":1000000}"#);
    let d = until(&mut ws, &mut dec, "the liquidation", |d| {
        d.liquidations.iter().any(|(s, l)| s == "BTC-USDT-SWAP" && usd(&btc, l) >= 1_000_000.0)
    });
    let l = d.liquidations.iter().map(|(_, l)| *l).find(|l| usd(&btc, l) >= 1_000_000.0).expect("kept");
    assert_eq!((l.side, l.qty_unit), (PositionSide::Long, QtyUnit::Contracts));
    assert!(usd(&btc, &l) < 1_010_000.0, "{l:?}");

    ok(&h, "/sim/funding", r#"{"venue":"okx","symbol":"BTCUSDT","rate":0.001,"interval_h":4}"#);
    let deadline = Instant::now() + WAIT;
    loop {
        let body = get(&h, "/api/v5/public/funding-rate?instId=BTC-USDT-SWAP");
        let v: Value = serde_json::from_str(&body).expect("json");
        let row = &v["data"][0];
        let time = |k: &str| row[k].as_str().and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
        let rate: f64 = row["fundingRate"].as_str().and_then(|x| x.parse().ok()).unwrap_or(0.0);
        if time("nextFundingTime") - time("fundingTime") == 4 * 3_600_000 {
            assert!((0.0009..0.0011).contains(&rate), "the injected rate, moving with the premium: {body}");
            break;
        }
        assert!(Instant::now() < deadline, "the funding change never showed: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    h.stop();
}

#[test]
fn bitget_sends_tickers_and_no_liquidation() {
    let h = start();
    let body = get(&h, "/api/v2/spot/public/symbols");
    let v: Value = serde_json::from_str(&body).expect("json");
    let spot: Vec<String> =
        v["data"].as_array().expect("data").iter().filter_map(|s| s["symbol"].as_str().map(str::to_owned)).collect();
    let spot: Vec<&str> = spot.iter().map(String::as_str).collect();
    let pairs = matched(&h, Venue::Bitget, "/api/v2/mix/market/contracts?productType=USDT-FUTURES", &spot);
    pair(&pairs, "BTCUSDT");

    let mut ws = connect(&h, "/v2/ws/public");
    let mut dec = Decoder::of(Venue::Bitget);
    send(&mut ws, r#"{"op":"subscribe","args":[{"instType":"USDT-FUTURES","channel":"ticker","instId":"BTCUSDT"}]}"#);
    let d = until(&mut ws, &mut dec, "the ticker", |d| !d.updates.is_empty());
    let u = d.updates[0].1;
    assert!(u.oi_base.is_some() && u.mark.is_some() && u.funding_rate.is_some(), "{u:?}");
    refused(
        &h,
        "/sim/liquidation",
        r#"{"venue":"bitget","symbol":"BTCUSDT","side":"long","usd":1000}"#,
        "publishes no liquidations",
    );
    h.stop();
}

#[test]
fn control_routes_refuse_bad_bodies_and_faults_reach_the_wire() {
    let h = start();
    let liq = "/sim/liquidation";
    refused(&h, liq, r#"{"venue":"binance","symbol":"NOPEUSDT","side":"long","usd":1}"#, "has no perpetual");
    refused(&h, liq, r#"{"venue":"binance","symbol":"BTCUSDT","side":"up","usd":1}"#, "invalid side");
    refused(&h, liq, r#"{"venue":"binance","symbol":"BTCUSDT","side":"long"}"#, "'usd' is required");
    refused(&h, liq, r#"{"venue":"binance","symbol":"BTCUSDT","side":"long","usd":-5}"#, "out of range");
    refused(&h, "/sim/oi", r#"{"venue":"okx","symbol":"BTCUSDT","pct":"x"}"#, "'pct' must be a number");
    refused(&h, "/sim/funding", r#"{"venue":"okx","symbol":"BTCUSDT","rate":0.001,"interval_h":5}"#, "out of range");
    refused(&h, "/sim/perp", r#"{"venue":"okx","symbol":"BTCUSDT"}"#, "'listed'");
    refused(&h, "/sim/fault", r#"{"venue":"okx","symbol":"NOPE","kind":"perp_stale"}"#, "has no perpetual");

    // `*`: one on every perpetual of the venue, counted on the wire.
    let mut ws = connect(&h, "/market/ws/!forceOrder@arr");
    let v = ok(&h, liq, r#"{"venue":"binance","symbol":"*","side":"short","usd":250000}"#);
    let n = v["contracts"].as_u64().unwrap_or(0) as usize;
    assert!(n >= 5, "{v}");
    let mut dec = Decoder::of(Venue::Binance);
    let mut seen = HashSet::new();
    let deadline = Instant::now() + WAIT;
    while seen.len() < n && Instant::now() < deadline {
        if let Some(t) = next_text(&mut ws, Duration::from_millis(200)) {
            seen.extend(dec.decode(&t).liquidations.into_iter().map(|(s, _)| s));
        }
    }
    assert_eq!(seen.len(), n, "one forced order per perpetual on !forceOrder@arr: {seen:?}");
    let stats: Value = serde_json::from_str(&get(&h, "/sim/stats")).expect("json");
    assert!(stats["binance"]["liquidations"].as_u64().unwrap_or(0) >= n as u64, "{stats}");
    assert!(stats["binance"]["perp_messages"].as_u64().unwrap_or(0) >= n as u64, "{stats}");

    // perp_stale: the values freeze (REST answers the old time) while the feed runs on.
    ok(&h, "/sim/fault", r#"{"venue":"binance","symbol":"ETHUSDT","kind":"perp_stale"}"#);
    let time = |h: &Handle| {
        let v: Value = serde_json::from_str(&get(h, "/fapi/v1/premiumIndex?symbol=ETHUSDT")).expect("json");
        v["time"].as_i64().unwrap_or(0)
    };
    let frozen = time(&h);
    std::thread::sleep(Duration::from_millis(2_200));
    assert_eq!(time(&h), frozen, "a stale perpetual's values stop");
    ok(&h, "/sim/perp", r#"{"venue":"binance","symbol":"ETHUSDT","listed":true}"#);
    // OKX's funding answer too keeps a stale contract's old time (its live ones are stamped now).
    let okx_time = |h: &Handle| {
        let v: Value = serde_json::from_str(&get(h, "/api/v5/public/funding-rate?instId=ETH-USDT-SWAP")).expect("json");
        v["data"][0]["ts"].as_str().and_then(|t| t.parse::<i64>().ok()).unwrap_or(0)
    };
    let before = okx_time(&h);
    std::thread::sleep(Duration::from_millis(20));
    assert!(okx_time(&h) > before, "a live contract's answer is stamped at the answer");
    ok(&h, "/sim/fault", r#"{"venue":"okx","symbol":"ETHUSDT","kind":"perp_stale"}"#);
    let frozen = okx_time(&h);
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(okx_time(&h), frozen, "a stale contract's funding answer keeps its time");
    ok(&h, "/sim/perp", r#"{"venue":"okx","symbol":"ETHUSDT","listed":true}"#);

    // perp_disconnect drops the perpetual connections only.
    let mut spot = connect(&h, "/ws/btcusdt@trade");
    ok(&h, "/sim/fault", r#"{"venue":"binance","kind":"perp_disconnect"}"#);
    assert!(ends(&mut ws, WAIT), "the futures connection is dropped");
    assert!(!ends(&mut spot, Duration::from_millis(500)), "the spot connection stays");
    let stats: Value = serde_json::from_str(&get(&h, "/sim/stats")).expect("json");
    assert_eq!(stats["binance"]["faults"]["perp_disconnect"], 1, "{stats}");
    assert_eq!(stats["binance"]["faults"]["perp_stale"], 1, "{stats}");
    h.stop();
}
