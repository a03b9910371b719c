//! Black-box tests of the venue simulator (`rampart sim-venue`): real loopback sockets, a real
//! WebSocket client (tungstenite) and HTTP client (ureq), and the engine's own decoders and book
//! sync machines on the client side, so that what the simulator sends is checked the way rampart
//! will read it.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rampart_engine::book::{Book, Level};
use rampart_engine::feed::binance::{self, BinanceBookSync, BinanceDecoder, RequestId, TimeUnit};
use rampart_engine::feed::bybit::{self, BybitBookSync, BybitDecoder};
use rampart_engine::feed::okx::{self, book_checksum, OkxBookSync, OkxDecoder};
use rampart_engine::{Price, Qty, Venue};
use rampart_simvenue::{self as simvenue, Config, DelistPlan, Handle};
use serde_json::Value;
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

const DAY_MS: i64 = 86_400_000;
const WEEK_MS: i64 = 7 * DAY_MS;
/// How long any single expectation may take before the test fails.
const WAIT: Duration = Duration::from_secs(8);

fn start(cfg: Config) -> Handle {
    simvenue::start(Config { sim_pairs: 8, ..cfg }).expect("simulator starts")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64
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

fn get(h: &Handle, path: &str) -> (u16, Value) {
    let (s, body) = http("GET", &format!("{}{path}", h.url()), None);
    (s, serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}")))
}

fn get_text(h: &Handle, path: &str) -> String {
    let (s, body) = http("GET", &format!("{}{path}", h.url()), None);
    assert_eq!(s, 200, "GET {path}: {body}");
    body
}

fn post(h: &Handle, path: &str, body: &str) -> (u16, Value) {
    let (s, text) = http("POST", &format!("{}{path}", h.url()), Some(body));
    (s, serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}")))
}

fn fault(h: &Handle, venue: &str, symbol: &str, kind: &str) {
    let body = format!("{{\"venue\":\"{venue}\",\"symbol\":\"{symbol}\",\"kind\":\"{kind}\"}}");
    let (s, v) = post(h, "/sim/fault", &body);
    assert_eq!((s, &v["ok"]), (200, &Value::Bool(true)), "{kind}: {v}");
}

type Ws = WebSocket<TcpStream>;

fn connect(h: &Handle, path: &str) -> Ws {
    let stream = TcpStream::connect(h.addr()).expect("tcp connect");
    stream.set_read_timeout(Some(Duration::from_millis(100))).expect("read timeout");
    let (ws, _) = tungstenite::client(format!("{}{path}", h.ws_url()), stream).expect("WebSocket handshake");
    ws
}

/// The HTTP status of a refused WebSocket handshake.
fn refused(h: &Handle, path: &str) -> u16 {
    let stream = TcpStream::connect(h.addr()).expect("tcp connect");
    let short: String = path.chars().take(60).collect();
    match tungstenite::client(format!("{}{path}", h.ws_url()), stream) {
        Ok(_) => panic!("{short}...: handshake accepted"),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(resp))) => resp.status().as_u16(),
        Err(e) => panic!("{short}...: {e}"),
    }
}

#[derive(Debug, PartialEq)]
enum Event {
    Text(String),
    Ping,
    /// A close frame's code, or `None` when the connection ended without one.
    Closed(Option<u16>),
}

fn event(ws: &mut Ws) -> Event {
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "no message within {WAIT:?}");
        match ws.read() {
            Ok(Message::Text(t)) => return Event::Text(t.to_string()),
            Ok(Message::Ping(_)) => return Event::Ping,
            Ok(Message::Close(f)) => return Event::Closed(f.map(|f| u16::from(f.code))),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e)) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Event::Closed(None),
        }
    }
}

/// The next text message (pings skipped); panics when the connection closes.
fn text(ws: &mut Ws) -> String {
    loop {
        match event(ws) {
            Event::Text(t) => return t,
            Event::Ping => {}
            Event::Closed(c) => panic!("connection closed ({c:?})"),
        }
    }
}

/// Reads until the connection ends; returns the close code.
fn closed(ws: &mut Ws) -> Option<u16> {
    loop {
        if let Event::Closed(c) = event(ws) {
            return c;
        }
    }
}

fn send(ws: &mut Ws, s: &str) {
    ws.send(Message::text(s.to_owned())).expect("send");
}

fn json(t: &str) -> Value {
    serde_json::from_str(t).unwrap_or_else(|e| panic!("not JSON ({e}): {t}"))
}

/// A millisecond time sent as a string.
fn ms(v: &Value) -> i64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not a time: {v}"))
}

fn dec(s: &str) -> i64 {
    Price::parse(s.as_bytes()).unwrap_or_else(|e| panic!("'{s}' is not a decimal: {e}")).0
}

/// The true book as `/sim/book` gives it.
struct Truth {
    seq: i64,
    views: Vec<(u64, u64)>,
    bids: Vec<Level>,
    asks: Vec<Level>,
}

fn truth(h: &Handle, venue: &str, symbol: &str) -> Truth {
    let (s, v) = get(h, &format!("/sim/book?venue={venue}&symbol={symbol}"));
    assert_eq!(s, 200, "{v}");
    let side = |k: &str| -> Vec<Level> {
        v[k].as_array()
            .expect("levels")
            .iter()
            .map(|l| Level {
                price: Price(dec(l[0].as_str().expect("px"))),
                qty: Qty(dec(l[1].as_str().expect("sz")) as u64),
            })
            .collect()
    };
    let views = v["views"]
        .as_array()
        .expect("views")
        .iter()
        .map(|x| (x["depth"].as_u64().expect("depth"), x["u"].as_u64().expect("u")))
        .collect();
    Truth { seq: v["seq"].as_i64().expect("seq"), views, bids: side("bids"), asks: side("asks") }
}

fn assert_top_matches(book: &Book, t: &Truth, what: &str) {
    assert!(t.bids.len() == 20 && t.asks.len() == 20, "{what}: the truth has 20 levels per side");
    assert_eq!(&book.bids()[..20], &t.bids[..], "{what}: bids");
    assert_eq!(&book.asks()[..20], &t.asks[..], "{what}: asks");
}

/// Checks candle open times (oldest first): at least 500 completed bars plus the current one,
/// contiguous, UTC-aligned (weeks on Monday).
fn check_bars(opens: &[i64], tf_ms: i64, what: &str) {
    let now = now_ms();
    let completed = opens.iter().filter(|&&o| o + tf_ms <= now).count();
    assert!(completed >= 500, "{what}: {completed} completed bars");
    for w in opens.windows(2) {
        assert_eq!(w[1] - w[0], tf_ms, "{what}: bars not contiguous");
    }
    for &o in opens {
        let aligned = if tf_ms == WEEK_MS { (o - 4 * DAY_MS).rem_euclid(WEEK_MS) == 0 } else { o % tf_ms == 0 };
        assert!(aligned, "{what}: bar at {o} is not UTC-aligned");
    }
    let last = *opens.last().expect("bars");
    assert!(last <= now && now < last + tf_ms, "{what}: the current bar is missing");
}

const TIMEFRAMES_MS: [i64; 6] = [300_000, 900_000, 3_600_000, 14_400_000, DAY_MS, WEEK_MS];

// ---------------------------------------------------------------------------------------------
// Binance.

/// A Binance client keeping BTCUSDT in sync from `btcusdt@depth@100ms` and REST snapshots.
struct BinanceClient<'h> {
    h: &'h Handle,
    ws: Ws,
    dec: BinanceDecoder,
    rest_dec: BinanceDecoder,
    sync: BinanceBookSync,
    book: Book,
    trades: usize,
    shutdown: bool,
    responses: Vec<(i64, String)>,
    /// `(U, u, event ms)` of every ETHUSDT diff (the 1000 ms `ethusdt@depth` stream).
    eth: Vec<(u64, u64, i64)>,
}

impl<'h> BinanceClient<'h> {
    fn new(h: &'h Handle, path: &str) -> BinanceClient<'h> {
        BinanceClient {
            h,
            ws: connect(h, path),
            dec: BinanceDecoder::new(TimeUnit::Millisecond, 1000),
            rest_dec: BinanceDecoder::new(TimeUnit::Millisecond, binance::SNAPSHOT_LEVELS_PER_SIDE_MAX),
            sync: BinanceBookSync::new(1000, 1_000_000),
            book: Book::new(1000),
            trades: 0,
            shutdown: false,
            responses: Vec::new(),
            eth: Vec::new(),
        }
    }

    /// Reads one message; returns the sync outcomes it caused (the diff's, then the snapshot's).
    fn pump(&mut self) -> Vec<binance::SyncOutcome> {
        let t = text(&mut self.ws);
        let frame = self.dec.decode(t.as_bytes()).unwrap_or_else(|e| panic!("decode: {e}: {t}"));
        let mut out = Vec::new();
        match frame.message {
            binance::Message::Depth(d) if d.symbol == b"BTCUSDT" => {
                assert!(d.event_ms > 0);
                let mut o = self.sync.on_diff(&d, &mut self.book);
                out.push(o);
                // Fetch snapshots as the machine asks (a stale one asks again).
                for _ in 0..3 {
                    if !o.wants_snapshot() {
                        break;
                    }
                    let body = get_text(self.h, "/api/v3/depth?symbol=BTCUSDT&limit=1000");
                    let snap = self.rest_dec.decode(body.as_bytes()).expect("snapshot decodes");
                    let binance::Message::Snapshot(s) = snap.message else { panic!("not a snapshot: {body}") };
                    o = self.sync.on_snapshot(&s, &mut self.book);
                    out.push(o);
                }
            }
            binance::Message::Depth(d) if d.symbol == b"ETHUSDT" => {
                assert_eq!(frame.stream, Some(&b"ethusdt@depth"[..]));
                self.eth.push((d.first_update_id, d.final_update_id, d.event_ms));
            }
            binance::Message::Trade(tr) => {
                assert!(tr.price.0 > 0 && tr.qty.0 > 0 && tr.trade_ms > 0);
                self.trades += 1;
            }
            binance::Message::ServerShutdown { .. } => self.shutdown = true,
            binance::Message::Response { id: RequestId::Int(id), result } => {
                self.responses.push((id, String::from_utf8_lossy(result).into_owned()));
            }
            binance::Message::Error { code, msg, .. } => panic!("error {code}: {}", String::from_utf8_lossy(msg)),
            _ => {}
        }
        out
    }

    /// Pumps until an outcome matches `want`.
    fn until(&mut self, what: &str, want: impl Fn(&binance::SyncOutcome) -> bool) -> binance::SyncOutcome {
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < deadline, "no {what} within {WAIT:?}");
            if let Some(o) = self.pump().into_iter().find(|o| want(o)) {
                return o;
            }
        }
    }

    fn live(&mut self) {
        if !self.sync.is_live() {
            self.until("sync", |o| matches!(o, binance::SyncOutcome::Synced { .. }));
        }
        self.until("applied diff", |o| *o == binance::SyncOutcome::Applied);
    }

    /// Compares the local book with the truth at the same update id.
    fn matches_truth(&mut self) {
        for _ in 0..20 {
            let t = truth(self.h, "binance", "BTCUSDT");
            let deadline = Instant::now() + WAIT;
            while self.sync.local_id().is_some_and(|id| (id as i64) < t.seq) {
                assert!(Instant::now() < deadline, "the stream does not reach the truth");
                self.pump();
            }
            if self.sync.local_id() == Some(t.seq as u64) {
                assert_top_matches(&self.book, &t, "binance");
                return;
            }
        }
        panic!("never caught the truth at the same update id");
    }
}

#[test]
fn binance_listing_klines_and_synced_book() {
    let h = start(Config::default());
    let (s, info) = get(&h, "/api/v3/exchangeInfo");
    assert_eq!(s, 200);
    let symbols = info["symbols"].as_array().expect("symbols");
    assert_eq!(symbols.len(), 8, "Binance lists every simulated pair");
    for sym in symbols {
        let name = sym["symbol"].as_str().expect("symbol");
        let joined =
            format!("{}{}", sym["baseAsset"].as_str().expect("base"), sym["quoteAsset"].as_str().expect("quote"));
        assert_eq!(name, joined);
        assert_eq!(sym["status"], "TRADING");
        let filter =
            |t: &str| sym["filters"].as_array().expect("filters").iter().find(|f| f["filterType"] == t).cloned();
        let pf = filter("PRICE_FILTER").expect("PRICE_FILTER");
        let lot = filter("LOT_SIZE").expect("LOT_SIZE");
        assert!(dec(pf["tickSize"].as_str().expect("tickSize")) > 0);
        assert!(dec(lot["stepSize"].as_str().expect("stepSize")) > 0);
    }
    for (name, tf) in ["5m", "15m", "1h", "4h", "1d", "1w"].iter().zip(TIMEFRAMES_MS) {
        let (s, rows) = get(&h, &format!("/api/v3/klines?symbol=BTCUSDT&interval={name}&limit=1000"));
        assert_eq!(s, 200);
        let rows = rows.as_array().expect("rows");
        let opens: Vec<i64> = rows.iter().map(|r| r[0].as_i64().expect("open time")).collect();
        check_bars(&opens, tf, &format!("binance {name}"));
        for r in rows {
            assert_eq!(r.as_array().map(Vec::len), Some(12));
            assert_eq!(r[6].as_i64(), Some(r[0].as_i64().expect("open") + tf - 1), "close time");
            let (o, hi, lo, c) = (
                dec(r[1].as_str().expect("o")),
                dec(r[2].as_str().expect("h")),
                dec(r[3].as_str().expect("l")),
                dec(r[4].as_str().expect("c")),
            );
            assert!(lo <= o.min(c) && hi >= o.max(c) && lo > 0);
        }
    }
    let (_, two) = get(&h, "/api/v3/klines?symbol=BTCUSDT&interval=1h&limit=2");
    assert_eq!(two.as_array().map(Vec::len), Some(2));
    // Errors in Binance's shape.
    let (s, e) = get(&h, "/api/v3/depth?symbol=NOPEUSDT");
    assert_eq!((s, e["code"].as_i64()), (400, Some(-1121)));
    let (s, e) = get(&h, "/api/v3/klines?symbol=BTCUSDT&interval=1m");
    assert_eq!((s, e["code"].as_i64()), (400, Some(-1120)));
    let (s, e) = get(&h, "/api/v3/depth");
    assert_eq!((s, e["code"].as_i64()), (400, Some(-1102)));

    // Combined stream, live subscribe, list, and a synced book that equals the truth.
    let mut c = BinanceClient::new(&h, "/stream?streams=btcusdt@depth@100ms/btcusdt@trade");
    send(&mut c.ws, r#"{"method":"SUBSCRIBE","params":["ethusdt@depth","ethusdt@trade"],"id":1}"#);
    send(&mut c.ws, r#"{"method":"LIST_SUBSCRIPTIONS","id":2}"#);
    c.live();
    c.matches_truth();
    let deadline = Instant::now() + WAIT;
    while c.trades == 0 || c.responses.len() < 2 || c.eth.len() < 2 {
        assert!(Instant::now() < deadline, "no trade, no replies or no 1000 ms diffs");
        c.pump();
    }
    // The 1000 ms stream aggregates: contiguous ids, about a second apart.
    let (a, b) = (c.eth[0], c.eth[1]);
    assert_eq!(b.0, a.1 + 1, "ethusdt@depth ids are contiguous");
    assert!(b.1 > b.0 && b.2 - a.2 >= 900, "aggregated over a second: {a:?} {b:?}");
    assert_eq!(c.responses[0], (1, "null".to_owned()));
    let list: Vec<String> = serde_json::from_str(&c.responses[1].1).expect("list");
    assert_eq!(list, ["btcusdt@depth@100ms", "btcusdt@trade", "ethusdt@depth", "ethusdt@trade"]);
    // The raw endpoint sends unwrapped payloads.
    let mut raw = connect(&h, "/ws/btcusdt@trade");
    let t = json(&text(&mut raw));
    assert_eq!((t["e"].as_str(), t["s"].as_str()), (Some("trade"), Some("BTCUSDT")));
    h.stop();
}

#[test]
fn binance_faults_reach_the_sync_machine() {
    let h = start(Config { ping_interval_s: 1, ..Config::default() });
    let mut c = BinanceClient::new(&h, "/ws/btcusdt@depth@100ms");
    c.live();
    fault(&h, "binance", "BTCUSDT", "gap");
    c.until("gap", |o| matches!(o, binance::SyncOutcome::Gap { .. }));
    c.live();
    // After a gap the machine buffers and fetches a snapshot: make that one stale.
    fault(&h, "binance", "BTCUSDT", "stale_snapshot");
    fault(&h, "binance", "BTCUSDT", "gap");
    c.until("stale snapshot", |o| matches!(o, binance::SyncOutcome::StaleSnapshot { .. }));
    c.live();
    c.matches_truth();
    fault(&h, "binance", "BTCUSDT", "crossed");
    c.until("crossed", |o| *o == binance::SyncOutcome::Crossed);
    c.live();
    c.matches_truth();
    fault(&h, "binance", "", "notice");
    let deadline = Instant::now() + WAIT;
    while !c.shutdown {
        assert!(Instant::now() < deadline, "no serverShutdown");
        c.pump();
    }
    // Server ping frames at the configured interval.
    let mut pinged = connect(&h, "/ws/ethusdt@trade");
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "no ping frame");
        if event(&mut pinged) == Event::Ping {
            break;
        }
    }
    // Six incoming messages within a second close the connection.
    let mut chatty = connect(&h, "/ws");
    for i in 0..6 {
        let _ = chatty.send(Message::text(format!(r#"{{"method":"LIST_SUBSCRIPTIONS","id":{i}}}"#)));
    }
    assert_eq!(closed(&mut chatty), Some(1008));
    // At most 1024 streams per connection.
    let many: Vec<String> = (0..1025).map(|i| format!("s{i}usdt@trade")).collect();
    assert_eq!(refused(&h, &format!("/stream?streams={}", many.join("/"))), 400);
    // A disconnect drops every connection without a close frame.
    fault(&h, "binance", "", "disconnect");
    assert_eq!(closed(&mut c.ws), None);
    let (_, stats) = get(&h, "/sim/stats");
    let f = &stats["binance"]["faults"];
    assert!(
        f["gap"].as_u64() >= Some(2) && f["stale_snapshot"].as_u64() >= Some(1) && f["crossed"].as_u64() >= Some(1)
    );
    assert_eq!(f["notice"].as_u64(), Some(1));
    h.stop();
}

// ---------------------------------------------------------------------------------------------
// Bybit.

struct BybitClient {
    ws: Ws,
    dec: BybitDecoder,
    sync: BybitBookSync,
    book: Book,
    pongs: usize,
    trades: usize,
    replies: Vec<Value>,
}

impl BybitClient {
    fn new(h: &Handle) -> BybitClient {
        BybitClient {
            ws: connect(h, "/v5/public/spot"),
            dec: BybitDecoder::new(bybit::BOOK_LEVELS_PER_SIDE_MAX, bybit::TRADES_PER_MESSAGE_MAX),
            sync: BybitBookSync::new(),
            book: Book::new(50),
            pongs: 0,
            trades: 0,
            replies: Vec::new(),
        }
    }

    /// Reads one message; returns the sync outcome of an `orderbook.50.BTCUSDT` message.
    fn pump(&mut self) -> Option<bybit::SyncOutcome> {
        let t = text(&mut self.ws);
        match self.dec.decode(t.as_bytes()).unwrap_or_else(|e| panic!("decode: {e}: {t}")) {
            bybit::Message::Book(u) if u.topic == b"orderbook.50.BTCUSDT" => {
                assert!(u.ts_ms > 0 && u.seq.is_some());
                Some(self.sync.on_book(&u, &mut self.book))
            }
            bybit::Message::Trades(tr) => {
                assert!(tr.iter().all(|x| x.price.0 > 0 && x.symbol == b"BTCUSDT"));
                self.trades += tr.len();
                None
            }
            bybit::Message::OpReply(r) => {
                if r.is_pong() {
                    self.pongs += 1;
                } else {
                    self.replies.push(json(&t));
                }
                None
            }
            _ => None,
        }
    }

    fn until(&mut self, what: &str, want: impl Fn(&bybit::SyncOutcome) -> bool) -> bybit::SyncOutcome {
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < deadline, "no {what} within {WAIT:?}");
            if let Some(o) = self.pump().filter(|o| want(o)) {
                return o;
            }
        }
    }

    fn resubscribe(&mut self) {
        send(&mut self.ws, r#"{"op":"unsubscribe","args":["orderbook.50.BTCUSDT"],"req_id":"u"}"#);
        send(&mut self.ws, r#"{"op":"subscribe","args":["orderbook.50.BTCUSDT"],"req_id":"s"}"#);
        self.until("snapshot", |o| matches!(o, bybit::SyncOutcome::Snapshot { .. }));
    }
}

#[test]
fn bybit_listing_klines_and_synced_book() {
    let h = start(Config::default());
    let (s, v) = get(&h, "/v5/market/instruments-info?category=spot");
    assert_eq!((s, v["retCode"].as_i64()), (200, Some(0)));
    let list = v["result"]["list"].as_array().expect("list");
    assert!(!list.is_empty());
    for row in list {
        let joined =
            format!("{}{}", row["baseCoin"].as_str().expect("base"), row["quoteCoin"].as_str().expect("quote"));
        assert_eq!(row["symbol"].as_str(), Some(joined.as_str()));
        assert!(dec(row["priceFilter"]["tickSize"].as_str().expect("tick")) > 0);
        assert!(dec(row["lotSizeFilter"]["basePrecision"].as_str().expect("lot")) > 0);
        assert_eq!(row["status"], "Trading");
    }
    let (s, v) = get(&h, "/v5/market/instruments-info");
    assert_eq!((s, v["retCode"].as_i64()), (400, Some(10001)));
    for (name, tf) in ["5", "15", "60", "240", "D", "W"].iter().zip(TIMEFRAMES_MS) {
        let (s, v) = get(&h, &format!("/v5/market/kline?category=spot&symbol=BTCUSDT&interval={name}&limit=1000"));
        assert_eq!((s, v["retCode"].as_i64()), (200, Some(0)));
        let rows = v["result"]["list"].as_array().expect("list");
        let mut opens: Vec<i64> = rows.iter().map(|r| ms(&r[0])).collect();
        assert!(opens.windows(2).all(|w| w[0] > w[1]), "bybit {name}: newest first");
        assert!(rows.iter().all(|r| r.as_array().map(Vec::len) == Some(7)));
        opens.reverse();
        check_bars(&opens, tf, &format!("bybit {name}"));
    }
    // Without category: the venue's linear default, here an empty linear answer.
    let (s, v) = get(&h, "/v5/market/kline?symbol=BTCUSDT&interval=60");
    assert_eq!((s, v["result"]["category"].as_str()), (200, Some("linear")));
    assert_eq!(v["result"]["list"].as_array().map(Vec::len), Some(0));

    let mut c = BybitClient::new(&h);
    let eleven: Vec<String> = (0..11).map(|_| "\"publicTrade.BTCUSDT\"".to_owned()).collect();
    send(&mut c.ws, &format!(r#"{{"op":"subscribe","args":[{}],"req_id":"big"}}"#, eleven.join(",")));
    send(
        &mut c.ws,
        r#"{"op":"subscribe","args":["orderbook.50.BTCUSDT","publicTrade.BTCUSDT","orderbook.1.BTCUSDT"],"req_id":"1"}"#,
    );
    send(&mut c.ws, r#"{"req_id":"p","op":"ping"}"#);
    c.until("snapshot", |o| matches!(o, bybit::SyncOutcome::Snapshot { .. }));
    let big = &c.replies[0];
    assert_eq!((big["success"].as_bool(), big["req_id"].as_str()), (Some(false), Some("big")), "{big}");
    let ack = &c.replies[1];
    assert_eq!(
        (ack["success"].as_bool(), ack["op"].as_str(), ack["req_id"].as_str()),
        (Some(true), Some("subscribe"), Some("1"))
    );
    assert!(ack["conn_id"].as_str().is_some_and(|s| !s.is_empty()));
    for _ in 0..3 {
        c.until("delta", |o| matches!(o, bybit::SyncOutcome::Applied { .. }));
    }
    // The local 50-level view equals the truth at the view's `u`.
    let mut matched = false;
    for _ in 0..20 {
        let t = truth(&h, "bybit", "BTCUSDT");
        let u = t.views.iter().find(|v| v.0 == 50).expect("the depth-50 view").1;
        let deadline = Instant::now() + WAIT;
        while c.sync.local_id().is_some_and(|id| id < u) {
            assert!(Instant::now() < deadline);
            c.pump();
        }
        if c.sync.local_id() == Some(u) {
            assert_top_matches(&c.book, &t, "bybit");
            matched = true;
            break;
        }
    }
    assert!(matched, "never caught the truth at the same u");
    assert!(c.pongs >= 1, "no pong");
    let deadline = Instant::now() + WAIT;
    while c.trades == 0 {
        assert!(Instant::now() < deadline, "no trade");
        c.pump();
    }
    h.stop();
}

#[test]
fn bybit_faults_depth1_and_delisting() {
    let h = start(Config::default());
    let mut c = BybitClient::new(&h);
    send(&mut c.ws, r#"{"op":"subscribe","args":["orderbook.50.BTCUSDT"],"req_id":"1"}"#);
    c.until("snapshot", |o| matches!(o, bybit::SyncOutcome::Snapshot { .. }));
    c.until("delta", |o| matches!(o, bybit::SyncOutcome::Applied { .. }));
    fault(&h, "bybit", "BTCUSDT", "gap");
    c.until("gap", |o| matches!(o, bybit::SyncOutcome::Gap { .. }));
    c.resubscribe();
    fault(&h, "bybit", "BTCUSDT", "reset");
    c.until("reset", |o| *o == bybit::SyncOutcome::Reset);
    c.until("delta after reset", |o| *o == bybit::SyncOutcome::Applied { update_id: 2 });
    fault(&h, "bybit", "BTCUSDT", "crossed");
    c.until("crossed", |o| *o == bybit::SyncOutcome::Crossed);
    c.resubscribe();

    // Depth 1: snapshots only, `u` never skips.
    let mut d1 = connect(&h, "/v5/public/spot");
    send(&mut d1, r#"{"op":"subscribe","args":["orderbook.1.ETHUSDT"]}"#);
    let mut last_u: Option<u64> = None;
    let mut seen = 0;
    while seen < 4 {
        let v = json(&text(&mut d1));
        if v["topic"] != "orderbook.1.ETHUSDT" {
            continue;
        }
        assert_eq!(v["type"], "snapshot");
        let u = v["data"]["u"].as_u64().expect("u");
        assert!(v["data"]["b"].as_array().is_some_and(|b| b.len() == 1));
        if let Some(l) = last_u {
            assert!(u == l || u == l + 1, "depth 1 u {l} -> {u}");
        }
        last_u = Some(u);
        seen += 1;
    }

    // Delisting: `u=1` with empty sides, then the pair leaves the listing.
    let (s, _) = post(&h, "/sim/delist", r#"{"venue":"bybit","symbol":"BTCUSDT"}"#);
    assert_eq!(s, 200);
    c.until("delist reset", |o| *o == bybit::SyncOutcome::Reset);
    assert!(c.book.bids().is_empty() && c.book.asks().is_empty());
    let (_, v) = get(&h, "/v5/market/instruments-info?category=spot");
    let listed: Vec<&str> =
        v["result"]["list"].as_array().expect("list").iter().filter_map(|r| r["symbol"].as_str()).collect();
    assert!(!listed.contains(&"BTCUSDT") && listed.contains(&"ETHUSDT"));
    send(&mut c.ws, r#"{"op":"subscribe","args":["orderbook.50.BTCUSDT"],"req_id":"again"}"#);
    let deadline = Instant::now() + WAIT;
    while !c.replies.iter().any(|r| r["req_id"] == "again") {
        assert!(Instant::now() < deadline);
        c.pump();
    }
    assert!(c.replies.iter().any(|r| r["req_id"] == "again" && r["success"] == false));
    h.stop();
}

// ---------------------------------------------------------------------------------------------
// OKX.

struct OkxClient {
    ws: Ws,
    dec: OkxDecoder,
    sync: OkxBookSync,
    book: Book,
    events: Vec<Value>,
    pongs: usize,
    notices: usize,
    trades: usize,
    books5: usize,
}

impl OkxClient {
    fn new(h: &Handle, path: &str) -> OkxClient {
        OkxClient {
            ws: connect(h, path),
            dec: OkxDecoder::new(okx::BOOKS_LEVELS_PER_SIDE_MAX, 64),
            sync: OkxBookSync::new(okx::BOOKS_LEVELS_PER_SIDE_MAX, true),
            book: Book::new(okx::BOOKS_LEVELS_PER_SIDE_MAX),
            events: Vec::new(),
            pongs: 0,
            notices: 0,
            trades: 0,
            books5: 0,
        }
    }

    fn pump(&mut self) -> Option<okx::SyncOutcome> {
        let t = text(&mut self.ws);
        match self.dec.decode(t.as_bytes()).unwrap_or_else(|e| panic!("decode: {e}: {t}")) {
            okx::Message::Book(p) if p.channel == b"books" && p.inst_id == b"BTC-USDT" => {
                Some(self.sync.on_book(&p, &mut self.book))
            }
            okx::Message::Book(p) if p.channel == b"books5" => {
                assert!(p.action.is_none() && p.checksum.is_none() && p.prev_seq_id.is_none() && p.seq_id.is_some());
                assert!(p.bids.len() == 5 && p.asks.len() == 5 && p.bids[0].price < p.asks[0].price);
                self.books5 += 1;
                None
            }
            okx::Message::Pong => {
                self.pongs += 1;
                None
            }
            okx::Message::Trades { trades, .. } => {
                self.trades += trades.len();
                None
            }
            m => {
                if m.is_upgrade_notice() {
                    self.notices += 1;
                }
                if t.starts_with('{') && json(&t).get("event").is_some() {
                    self.events.push(json(&t));
                }
                None
            }
        }
    }

    fn until(&mut self, what: &str, want: impl Fn(&okx::SyncOutcome) -> bool) -> okx::SyncOutcome {
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < deadline, "no {what} within {WAIT:?}");
            if let Some(o) = self.pump().filter(|o| want(o)) {
                return o;
            }
        }
    }

    fn resubscribe(&mut self) {
        send(&mut self.ws, r#"{"op":"unsubscribe","args":[{"channel":"books","instId":"BTC-USDT"}]}"#);
        send(&mut self.ws, r#"{"op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"}]}"#);
        self.until("snapshot", |o| matches!(o, okx::SyncOutcome::Loaded { .. }));
    }
}

#[test]
fn okx_listing_candles_and_checksummed_book() {
    let h = start(Config::default());
    let (s, v) = get(&h, "/api/v5/public/instruments?instType=SPOT");
    assert_eq!((s, v["code"].as_str()), (200, Some("0")));
    for row in v["data"].as_array().expect("data") {
        let inst = format!("{}-{}", row["baseCcy"].as_str().expect("base"), row["quoteCcy"].as_str().expect("quote"));
        assert_eq!(row["instId"].as_str(), Some(inst.as_str()));
        assert_eq!(row["state"], "live");
        assert!(dec(row["tickSz"].as_str().expect("tickSz")) > 0 && dec(row["lotSz"].as_str().expect("lotSz")) > 0);
    }
    let (s, v) = get(&h, "/api/v5/public/instruments?instType=SPOT&instId=NOPE-USDT");
    assert_eq!((s, v["code"].as_str()), (400, Some("51001")));
    for (bar, tf) in ["5m", "15m", "1H", "4H", "1Dutc", "1Wutc"].iter().zip(TIMEFRAMES_MS) {
        let (s, v) = get(&h, &format!("/api/v5/market/candles?instId=BTC-USDT&bar={bar}&limit=300"));
        assert_eq!((s, v["code"].as_str()), (200, Some("0")));
        let mut rows = v["data"].as_array().expect("data").clone();
        assert_eq!(rows.len(), 300);
        assert_eq!(rows[0][8], "0", "the current bar is not confirmed");
        assert_eq!(rows[1][8], "1");
        let oldest = rows.last().and_then(|r| r[0].as_str()).expect("ts").to_owned();
        let (_, older) =
            get(&h, &format!("/api/v5/market/history-candles?instId=BTC-USDT&bar={bar}&after={oldest}&limit=300"));
        rows.extend(older["data"].as_array().expect("data").iter().cloned());
        assert!(rows.iter().all(|r| r.as_array().map(Vec::len) == Some(9)));
        let mut opens: Vec<i64> = rows.iter().map(|r| ms(&r[0])).collect();
        assert!(opens.windows(2).all(|w| w[0] > w[1]), "okx {bar}: newest first");
        opens.reverse();
        check_bars(&opens, tf, &format!("okx {bar}"));
    }
    let (s, v) = get(&h, "/api/v5/market/candles?instId=BTC-USDT&bar=1D");
    assert_eq!((s, v["code"].as_str()), (400, Some("51000")));

    // Candles live on /business only.
    let mut public = OkxClient::new(&h, "/ws/v5/public");
    send(&mut public.ws, r#"{"id":"c1","op":"subscribe","args":[{"channel":"candle1H","instId":"BTC-USDT"}]}"#);
    send(
        &mut public.ws,
        r#"{"id":"7","op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"},{"channel":"trades","instId":"BTC-USDT"},{"channel":"books5","instId":"ETH-USDT"}]}"#,
    );
    public.until("snapshot", |o| matches!(o, okx::SyncOutcome::Loaded { .. }));
    let err = &public.events[0];
    assert_eq!(
        (err["event"].as_str(), err["code"].as_str(), err["id"].as_str()),
        (Some("error"), Some("64001"), Some("c1"))
    );
    let ack = &public.events[1];
    assert_eq!(
        (ack["event"].as_str(), ack["id"].as_str(), ack["arg"]["channel"].as_str()),
        (Some("subscribe"), Some("7"), Some("books"))
    );
    assert!(ack["connId"].as_str().is_some_and(|s| !s.is_empty()));
    for _ in 0..3 {
        public.until("update", |o| matches!(o, okx::SyncOutcome::Applied { .. }));
    }
    assert!(public.sync.counters().checksum_checked_count >= 4, "every message's checksum was verified");
    let mut matched = false;
    for _ in 0..20 {
        let t = truth(&h, "okx", "BTCUSDT");
        let deadline = Instant::now() + WAIT;
        while public.sync.last_seq_id().is_some_and(|s| s < t.seq) {
            assert!(Instant::now() < deadline);
            public.pump();
        }
        if public.sync.last_seq_id() == Some(t.seq) {
            assert_top_matches(&public.book, &t, "okx");
            matched = true;
            break;
        }
    }
    assert!(matched, "never caught the truth at the same seqId");
    send(&mut public.ws, "ping");
    let deadline = Instant::now() + WAIT;
    while public.pongs == 0 || public.trades == 0 || public.books5 < 2 {
        assert!(Instant::now() < deadline, "no pong, no trade or no books5");
        public.pump();
    }
    let mut business = connect(&h, "/ws/v5/business");
    send(
        &mut business,
        r#"{"op":"subscribe","args":[{"channel":"candle1H","instId":"BTC-USDT"},{"channel":"books","instId":"BTC-USDT"}]}"#,
    );
    let ack = json(&text(&mut business));
    assert_eq!((ack["event"].as_str(), ack["arg"]["channel"].as_str()), (Some("subscribe"), Some("candle1H")));
    let mut candle = false;
    let mut wrong_url = false;
    while !(candle && wrong_url) {
        let v = json(&text(&mut business));
        if v["arg"]["channel"] == "candle1H" && v["data"][0].as_array().is_some_and(|r| r.len() == 9) {
            candle = true;
        }
        if v["event"] == "error" && v["code"] == "60018" {
            wrong_url = true;
        }
    }
    h.stop();
}

#[test]
fn okx_faults_reach_the_sync_machine() {
    let h = start(Config::default());
    let mut c = OkxClient::new(&h, "/ws/v5/public");
    send(&mut c.ws, r#"{"op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"}]}"#);
    c.until("snapshot", |o| matches!(o, okx::SyncOutcome::Loaded { .. }));
    fault(&h, "okx", "BTCUSDT", "gap");
    c.until("gap", |o| matches!(o, okx::SyncOutcome::Gap { .. }));
    c.resubscribe();
    fault(&h, "okx", "BTCUSDT", "checksum");
    c.until("checksum mismatch", |o| matches!(o, okx::SyncOutcome::ChecksumMismatch { .. }));
    c.resubscribe();
    fault(&h, "okx", "BTCUSDT", "reset");
    c.until("reset", |o| matches!(o, okx::SyncOutcome::Reset { .. }));
    c.until("update after reset", |o| matches!(o, okx::SyncOutcome::Applied { .. }));
    assert!(c.sync.is_live(), "a reset is legal and keeps the book");
    fault(&h, "okx", "BTCUSDT", "heartbeat");
    c.until("heartbeat", |o| matches!(o, okx::SyncOutcome::Heartbeat { .. }));
    fault(&h, "okx", "BTCUSDT", "crossed");
    c.until("crossed", |o| *o == okx::SyncOutcome::Crossed);
    c.resubscribe();
    fault(&h, "okx", "", "notice");
    let deadline = Instant::now() + WAIT;
    while c.notices == 0 {
        assert!(Instant::now() < deadline, "no notice");
        c.pump();
    }
    let (s, v) = post(&h, "/sim/fault", r#"{"venue":"okx","symbol":"BTCUSDT","kind":"stale_snapshot"}"#);
    assert_eq!((s, v["ok"].as_bool()), (400, Some(false)));
    h.stop();
}

#[test]
fn okx_idle_close_and_checksum_zero() {
    let h = start(Config { idle_close_s: 1, okx_checksum_zero: true, ..Config::default() });
    let started = Instant::now();
    let mut idle = connect(&h, "/ws/v5/public");
    let mut busy = OkxClient::new(&h, "/ws/v5/public");
    send(&mut busy.ws, r#"{"op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"}]}"#);
    assert_eq!(closed(&mut idle), Some(4004));
    assert!(started.elapsed() < Duration::from_secs(3));
    // The subscribed connection gets data and stays open; its checksums are 0 (skipped).
    for _ in 0..4 {
        busy.until("book", |o| matches!(o, okx::SyncOutcome::Loaded { .. } | okx::SyncOutcome::Applied { .. }));
    }
    assert_eq!(busy.sync.counters().checksum_checked_count, 0);
    let raw = json(&text(&mut busy.ws));
    if raw["arg"]["channel"] == "books" {
        assert_eq!(raw["data"][0]["checksum"], 0);
    }
    h.stop();
}

// ---------------------------------------------------------------------------------------------
// Bitget.

/// A minimal Bitget `books` client: snapshot/update with the `seq`/`pseq` chain and the
/// OKX-construction checksum over the received text.
#[derive(Default)]
struct BitgetBook {
    seq: Option<i64>,
    bids: BTreeMap<i64, (String, String)>,
    asks: BTreeMap<i64, (String, String)>,
}

#[derive(Debug, PartialEq)]
enum BitgetOutcome {
    /// An update while no snapshot is held (after a break, until the resubscribe's snapshot).
    Waiting,
    Loaded,
    Applied,
    Gap,
    ChecksumMismatch,
}

impl BitgetBook {
    fn on_push(&mut self, v: &Value) -> BitgetOutcome {
        let d = &v["data"][0];
        let seq = d["seq"].as_i64().expect("seq");
        let pseq = d["pseq"].as_i64().expect("pseq");
        if v["action"] == "snapshot" {
            self.bids.clear();
            self.asks.clear();
        } else if self.seq.is_none() {
            return BitgetOutcome::Waiting;
        } else if self.seq != Some(pseq) || seq <= pseq {
            self.seq = None;
            return BitgetOutcome::Gap;
        }
        for (key, side) in [("bids", &mut self.bids), ("asks", &mut self.asks)] {
            for l in d[key].as_array().expect("levels") {
                let (p, s) = (l[0].as_str().expect("px"), l[1].as_str().expect("sz"));
                if dec(s) == 0 {
                    side.remove(&dec(p));
                } else {
                    side.insert(dec(p), (p.to_owned(), s.to_owned()));
                }
            }
        }
        self.seq = Some(seq);
        let bids = self.bids.values().rev().map(|(p, s)| (p.as_bytes(), s.as_bytes()));
        let asks = self.asks.values().map(|(p, s)| (p.as_bytes(), s.as_bytes()));
        if d["checksum"].as_i64().expect("checksum") != i64::from(book_checksum(bids, asks)) {
            self.seq = None;
            return BitgetOutcome::ChecksumMismatch;
        }
        if v["action"] == "snapshot" {
            BitgetOutcome::Loaded
        } else {
            BitgetOutcome::Applied
        }
    }
}

#[test]
fn bitget_listing_candles_book_trades() {
    let h = start(Config::default());
    let (s, v) = get(&h, "/api/v2/spot/public/symbols");
    assert_eq!((s, v["code"].as_str()), (200, Some("00000")));
    for row in v["data"].as_array().expect("data") {
        let joined =
            format!("{}{}", row["baseCoin"].as_str().expect("base"), row["quoteCoin"].as_str().expect("quote"));
        assert_eq!(row["symbol"].as_str(), Some(joined.as_str()));
        assert_eq!(row["status"], "online");
        assert!(row["pricePrecision"].as_str().and_then(|p| p.parse::<u32>().ok()).is_some());
        assert!(row["quantityPrecision"].as_str().and_then(|p| p.parse::<u32>().ok()).is_some());
    }
    for (g, tf) in ["5min", "15min", "1h", "4h", "1Dutc", "1Wutc"].iter().zip(TIMEFRAMES_MS) {
        let (s, v) = get(&h, &format!("/api/v2/spot/market/candles?symbol=BTCUSDT&granularity={g}&limit=1000"));
        assert_eq!((s, v["code"].as_str()), (200, Some("00000")));
        let rows = v["data"].as_array().expect("data");
        assert!(rows.iter().all(|r| r.as_array().map(Vec::len) == Some(8)));
        let opens: Vec<i64> = rows.iter().map(|r| ms(&r[0])).collect();
        check_bars(&opens, tf, &format!("bitget {g}"));
    }
    let (s, _) = get(&h, "/api/v2/spot/market/history-candles?symbol=BTCUSDT&granularity=1h");
    assert_eq!(s, 400, "history-candles needs endTime");
    let end = now_ms() - 10 * 3_600_000;
    let (s, v) =
        get(&h, &format!("/api/v2/spot/market/history-candles?symbol=BTCUSDT&granularity=1h&endTime={end}&limit=200"));
    assert_eq!(s, 200);
    let rows = v["data"].as_array().expect("data");
    assert_eq!(rows.len(), 200);
    assert!(rows.iter().all(|r| ms(&r[0]) < end));
    let (s, _) =
        get(&h, &format!("/api/v2/spot/market/history-candles?symbol=BTCUSDT&granularity=1h&endTime={end}&limit=201"));
    assert_eq!(s, 400);

    let mut ws = connect(&h, "/v2/ws/public");
    send(
        &mut ws,
        r#"{"op":"subscribe","args":[{"instType":"SPOT","channel":"books","instId":"BTCUSDT"},{"instType":"SPOT","channel":"trade","instId":"BTCUSDT"},{"instType":"SPOT","channel":"candle1H","instId":"BTCUSDT"},{"instType":"SPOT","channel":"books","instId":"NOPEUSDT"}]}"#,
    );
    send(&mut ws, "ping");
    let mut book = BitgetBook::default();
    let (mut acks, mut pong, mut error, mut applied, mut trade_updates) = (0, false, false, 0, 0);
    let (mut trade_snapshot, mut candle_snapshot, mut gap_done, mut checksum_done) = (false, false, false, false);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(acks == 3
        && pong
        && error
        && applied >= 3
        && trade_snapshot
        && candle_snapshot
        && trade_updates > 0
        && gap_done
        && checksum_done)
    {
        assert!(Instant::now() < deadline, "bitget: acks {acks} pong {pong} error {error} applied {applied} trades {trade_updates} gap {gap_done} checksum {checksum_done}");
        let t = text(&mut ws);
        if t == "pong" {
            pong = true;
            continue;
        }
        let v = json(&t);
        match (v["event"].as_str(), v["arg"]["channel"].as_str(), v["action"].as_str()) {
            (Some("subscribe"), _, _) => acks += 1,
            (Some("error"), _, _) => {
                assert_eq!(v["code"], 30001);
                error = true;
            }
            (None, Some("books"), Some(action)) => match book.on_push(&v) {
                BitgetOutcome::Waiting => {}
                BitgetOutcome::Loaded => {
                    assert_eq!(action, "snapshot");
                    if gap_done {
                        fault(&h, "bitget", "BTCUSDT", "checksum");
                    }
                }
                BitgetOutcome::Applied => {
                    applied += 1;
                    if applied == 3 {
                        fault(&h, "bitget", "BTCUSDT", "gap");
                    }
                }
                BitgetOutcome::Gap => {
                    assert!(!gap_done, "one gap asked");
                    gap_done = true;
                    send(
                        &mut ws,
                        r#"{"op":"unsubscribe","args":[{"instType":"SPOT","channel":"books","instId":"BTCUSDT"}]}"#,
                    );
                    send(
                        &mut ws,
                        r#"{"op":"subscribe","args":[{"instType":"SPOT","channel":"books","instId":"BTCUSDT"}]}"#,
                    );
                    acks -= 1;
                }
                BitgetOutcome::ChecksumMismatch => checksum_done = true,
            },
            (None, Some("trade"), Some("snapshot")) => {
                let ids: Vec<u64> = v["data"]
                    .as_array()
                    .expect("data")
                    .iter()
                    .map(|x| x["tradeId"].as_str().expect("id").parse().expect("u64 id"))
                    .collect();
                assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first");
                trade_snapshot = true;
            }
            (None, Some("trade"), Some("update")) => {
                let ids: Vec<u64> = v["data"]
                    .as_array()
                    .expect("data")
                    .iter()
                    .map(|x| x["tradeId"].as_str().expect("id").parse().expect("u64 id"))
                    .collect();
                assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first");
                trade_updates += 1;
            }
            (None, Some("candle1H"), Some("snapshot")) => {
                let rows = v["data"].as_array().expect("rows");
                assert!(rows.len() > 1 && rows.iter().all(|r| r.as_array().map(Vec::len) == Some(8)));
                candle_snapshot = true;
            }
            _ => {}
        }
    }
    h.stop();
}

// ---------------------------------------------------------------------------------------------
// Scheduled faults.

#[test]
fn scheduled_faults_fire_on_every_venue() {
    let faults = simvenue::Faults { gap_every: 3, checksum_every: 4, stale_snapshot_every: 2, disconnect_every_s: 2 };
    let h = start(Config { faults, ..Config::default() });
    let started = Instant::now();
    let mut ws = connect(&h, "/ws/btcusdt@trade");
    // Every second depth request is stale: its id is older than the live one.
    let id = |h: &Handle| get(h, "/api/v3/depth?symbol=BTCUSDT&limit=5").1["lastUpdateId"].as_i64().expect("id");
    // Let the book move away from its starting id first.
    std::thread::sleep(Duration::from_millis(1200));
    let (first, second) = (id(&h), id(&h));
    assert!(second < first, "the second snapshot is stale: {first} then {second}");
    assert_eq!(closed(&mut ws), None, "dropped by the scheduled disconnect");
    assert!(started.elapsed() < Duration::from_secs(4));
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, stats) = get(&h, "/sim/stats");
        let n = |v: &str, k: &str| stats[v]["faults"][k].as_u64().unwrap_or(0);
        let done = ["binance", "bybit", "okx", "bitget"].iter().all(|v| n(v, "gap") >= 1)
            && n("okx", "checksum") >= 1
            && n("bitget", "checksum") >= 1
            && n("binance", "stale_snapshot") == 1
            && n("binance", "disconnect") >= 1;
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "scheduled faults missing: {stats}");
        std::thread::sleep(Duration::from_millis(100));
    }
    h.stop();
}

// ---------------------------------------------------------------------------------------------
// Control API.

#[test]
fn control_api_trades_outages_delistings_and_slow_consumers() {
    let h = start(Config {
        queue_messages_max: 4,
        delist: vec![DelistPlan { venue: Some(Venue::Okx), symbol: "ETHUSDT".into(), after_s: 1 }],
        ..Config::default()
    });
    // Bad requests.
    for (body, want) in [
        ("nope", 400),
        (r#"{"venue":"kraken","symbol":"BTCUSDT","kind":"gap"}"#, 400),
        (r#"{"venue":"binance","symbol":"BTCUSDT","kind":"melt"}"#, 400),
        (r#"{"venue":"bybit","symbol":"BTCUSDT","kind":"checksum"}"#, 400),
        (r#"{"venue":"binance","symbol":"NOPEUSDT","kind":"gap"}"#, 400),
    ] {
        let (s, v) = post(&h, "/sim/fault", body);
        assert_eq!(s, want, "{body}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    for price in ["\"-1\"", "\"92233720368.54775807\"", "\"1e5\"", "0.0001"] {
        let (s, v) = post(&h, "/sim/trade", &format!(r#"{{"venue":"binance","symbol":"BTCUSDT","price":{price}}}"#));
        assert_eq!(s, 400, "{price}: {v}");
    }
    let (s, _) = get(&h, "/sim/nothing");
    assert_eq!(s, 404);
    for body in [
        r#"{"venue":"binance","symbol":"BTCUSDT","side":"up","depth":5,"qty":"1"}"#,
        r#"{"venue":"binance","symbol":"BTCUSDT","side":"bid","depth":5}"#,
        r#"{"venue":"binance","symbol":"BTCUSDT","side":"bid","qty":"1"}"#,
        r#"{"venue":"binance","symbol":"BTCUSDT","side":"bid","depth":100000,"qty":"1"}"#,
        r#"{"venue":"binance","symbol":"BTCUSDT","side":"bid","price":"0.000000001","qty":"1"}"#,
    ] {
        let (s, v) = post(&h, "/sim/level", body);
        assert_eq!(s, 400, "{body}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    }
    for body in [r#"{"step_ms":0}"#, r#"{"step_ms":"fast"}"#, r#"{}"#] {
        let (s, v) = post(&h, "/sim/speed", body);
        assert_eq!(s, 400, "{body}: {v}");
    }
    let (s, v) = post(&h, "/sim/speed", r#"{"step_ms":250}"#);
    assert_eq!((s, v["ok"].as_bool()), (200, Some(true)));
    // A level placed between two true levels shows in the true book at its answered price.
    let (s, v) = post(&h, "/sim/level", r#"{"venue":"binance","symbol":"BTCUSDT","side":"bid","depth":2,"qty":"777"}"#);
    assert_eq!((s, v["ok"].as_bool()), (200, Some(true)), "{v}");
    let placed = v["price"].as_str().map(dec).expect("placed price");
    let bids = truth(&h, "binance", "BTCUSDT").bids;
    assert!(bids.iter().any(|l| l.price.0 == placed && l.qty.0 == dec("777") as u64), "{bids:?}");

    // An injected trade arrives at that price, and the book moves there.
    let mut trades = connect(&h, "/ws/btcusdt@trade");
    let (s, v) = post(&h, "/sim/trade", r#"{"venue":"binance","symbol":"BTCUSDT","price":"123456","qty":"0.5"}"#);
    assert_eq!((s, v["ok"].as_bool()), (200, Some(true)));
    assert_eq!(v["price"].as_str().map(dec), Some(dec("123456")), "the answer names the traded price");
    loop {
        let t = json(&text(&mut trades));
        if t["p"].as_str().map(dec) == Some(dec("123456")) {
            assert_eq!(t["q"].as_str().map(dec), Some(dec("0.5")));
            break;
        }
    }
    let t = truth(&h, "binance", "BTCUSDT");
    let mid = (t.bids[0].price.0 + t.asks[0].price.0) / 2;
    assert!((mid - dec("123456")).abs() < dec("123456") / 100, "the book moved to the trade: mid {mid}");
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "the market did not continue from the injected price");
        let p = json(&text(&mut trades))["p"].as_str().map(dec).expect("price");
        if p != dec("123456") {
            assert!((p - dec("123456")).abs() < dec("123456") / 50, "continues near the injected price: {p}");
            break;
        }
    }

    // Venue down: REST 503, upgrades refused, connections dropped; up again: normal.
    let mut okx_ws = connect(&h, "/ws/v5/public");
    let (s, _) = post(&h, "/sim/venue", r#"{"venue":"okx","up":false}"#);
    assert_eq!(s, 200);
    assert_eq!(closed(&mut okx_ws), None);
    let (s, v) = get(&h, "/api/v5/public/instruments?instType=SPOT");
    assert_eq!((s, v["code"].as_str().is_some()), (503, true));
    assert_eq!(refused(&h, "/ws/v5/public"), 503);
    let (s, _) = post(&h, "/sim/venue", r#"{"venue":"okx","up":true}"#);
    assert_eq!(s, 200);
    let (s, _) = get(&h, "/api/v5/public/instruments?instType=SPOT");
    assert_eq!(s, 200);

    // A connection whose queue overflows is a slow consumer: OKX closes it with 4005.
    let mut slow = connect(&h, "/ws/v5/public");
    let args: Vec<String> = ["BTC", "ETH", "SOL", "XRP", "DOGE", "ADA"]
        .iter()
        .map(|b| format!(r#"{{"channel":"books","instId":"{b}-USDT"}}"#))
        .collect();
    send(&mut slow, &format!(r#"{{"op":"subscribe","args":[{}]}}"#, args.join(",")));
    assert_eq!(closed(&mut slow), Some(4005));

    // Delisting: the scheduled OKX one (vanishes), and Binance (BREAK) and Bitget (offline) now.
    for (venue, sym) in [("binance", "SOLUSDT"), ("bitget", "SOLUSDT")] {
        let (s, _) = post(&h, "/sim/delist", &format!(r#"{{"venue":"{venue}","symbol":"{sym}"}}"#));
        assert_eq!(s, 200);
    }
    let (_, info) = get(&h, "/api/v3/exchangeInfo?symbol=SOLUSDT");
    assert_eq!(info["symbols"][0]["status"], "BREAK");
    let (_, syms) = get(&h, "/api/v2/spot/public/symbols?symbol=SOLUSDT");
    assert_eq!(syms["data"][0]["status"], "offline");
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, v) = get(&h, "/api/v5/public/instruments?instType=SPOT");
        let ids: Vec<&str> = v["data"].as_array().expect("data").iter().filter_map(|r| r["instId"].as_str()).collect();
        if !ids.contains(&"ETH-USDT") {
            assert!(ids.contains(&"BTC-USDT"));
            break;
        }
        assert!(Instant::now() < deadline, "ETH-USDT still listed on okx");
        std::thread::sleep(Duration::from_millis(100));
    }

    let (s, stats) = get(&h, "/sim/stats");
    assert_eq!(s, 200);
    let okx = &stats["okx"];
    assert_eq!(okx["slow_consumer_closes"].as_u64(), Some(1));
    assert!(okx["connections_accepted"].as_u64() >= Some(2));
    assert_eq!(okx["faults"]["delist"].as_u64(), Some(1));
    assert!(okx["rest_requests"]["/api/v5/public/instruments"].as_u64() >= Some(3));
    assert!(stats["binance"]["trades"].as_u64() > Some(0) && stats["binance"]["book_messages"].as_u64() > Some(0));
    assert_eq!(stats["binance"]["connections_open"].as_u64(), Some(1));
    h.stop();
}
