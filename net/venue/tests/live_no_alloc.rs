//! The live tick path allocates nothing: WebSocket frame bytes in, the codec, the venue session
//! (decode, symbol lookup, book sync), the book, and trades through `Market::apply` with alerts
//! held, for each venue's stream shape, after warm-up, under a counting global allocator.

use rampart_engine::alert::{AlertSpec, Condition, Cross};
use rampart_engine::book::Book;
use rampart_engine::{BookId, Market, Price, Tick, Venue};
use rampart_testkit::alloc::{self, Counting};
use rampart_venue::session::{Count, Session, Sink};
use rampart_venue::ws::{Event, WsCodec};

// The count is per thread, so the venues' tests may run side by side.
#[global_allocator]
static ALLOC: Counting = Counting;

/// A real market behind the session, as the shard holds it.
struct MarketSink {
    market: Market,
    live: bool,
    messages: u64,
    trades: u64,
    breaks: u64,
}

impl Sink for MarketSink {
    fn book(&mut self, id: BookId) -> Option<&mut Book> {
        self.market.get_mut(id).map(|s| &mut s.book)
    }
    fn set_live(&mut self, _id: BookId, live: bool) {
        self.live = live;
    }
    fn trade(&mut self, tick: &Tick) {
        self.market.apply(tick);
        self.market.clear_firings();
        self.trades += 1;
    }
    fn decided(&mut self, sent_us: i64) {
        assert!(sent_us > 0);
    }
    fn count(&mut self, _venue: Venue, what: Count) {
        match what {
            Count::Message => self.messages += 1,
            Count::Gap | Count::ChecksumMismatch | Count::Crossed | Count::DecodeError => self.breaks += 1,
            _ => {}
        }
    }
}

/// An unmasked server text frame.
fn frame(payload: &str, out: &mut Vec<u8>) {
    let p = payload.as_bytes();
    out.push(0x81);
    if p.len() < 126 {
        out.push(p.len() as u8);
    } else {
        out.push(126);
        out.extend_from_slice(&(p.len() as u16).to_be_bytes());
    }
    out.extend_from_slice(p);
}

/// Book message `k` (1-based) and a trade, in the venue's own shape; prices move inside a band so
/// the book never crosses.
fn messages(venue: Venue, k: u64) -> [String; 2] {
    let bid = 100 + (k % 7);
    let ask = 120 + (k % 5);
    let px = 110 + (k % 9);
    match venue {
        Venue::Binance => [
            format!(
                r#"{{"stream":"btcusdt@depth@100ms","data":{{"e":"depthUpdate","E":{k},"s":"BTCUSDT","U":{k},"u":{k},"b":[["{bid}.5","{k}"]],"a":[["{ask}.5","2"]]}}}}"#
            ),
            format!(
                r#"{{"stream":"btcusdt@trade","data":{{"e":"trade","E":{k},"s":"BTCUSDT","t":{k},"p":"{px}.1","q":"0.5","T":{k},"m":true,"M":true}}}}"#
            ),
        ],
        Venue::Bybit => [
            format!(
                r#"{{"topic":"orderbook.200.BTCUSDT","ts":{k},"type":"{}","data":{{"s":"BTCUSDT","b":[["{bid}.5","{k}"]],"a":[["{ask}.5","2"]],"u":{},"seq":{k}}},"cts":{k}}}"#,
                if k == 1 { "snapshot" } else { "delta" },
                k + 1
            ),
            format!(
                r#"{{"topic":"publicTrade.BTCUSDT","type":"snapshot","ts":{k},"data":[{{"T":{k},"s":"BTCUSDT","S":"Buy","v":"0.5","p":"{px}.1","i":"x{k}","BT":false,"seq":{k}}}]}}"#
            ),
        ],
        Venue::Okx => [
            format!(
                r#"{{"arg":{{"channel":"books","instId":"BTC-USDT"}},"action":"{}","data":[{{"asks":[["{ask}.5","2","0","1"]],"bids":[["{bid}.5","{k}","0","1"]],"ts":"{k}","prevSeqId":{},"seqId":{}}}]}}"#,
                if k == 1 { "snapshot" } else { "update" },
                if k == 1 { -1 } else { 10 * (k as i64 - 1) },
                10 * k
            ),
            format!(
                r#"{{"arg":{{"channel":"trades","instId":"BTC-USDT"}},"data":[{{"instId":"BTC-USDT","tradeId":"{k}","px":"{px}.1","sz":"0.5","side":"buy","ts":"{k}","count":"1","source":"0","seqId":{k}}}]}}"#
            ),
        ],
        Venue::Bitget => [
            format!(
                r#"{{"action":"{}","arg":{{"instType":"SPOT","channel":"books","instId":"BTCUSDT"}},"data":[{{"asks":[["{ask}.5","2"]],"bids":[["{bid}.5","{k}"]],"ts":"{k}","seq":{},"pseq":{}}}],"ts":{k}}}"#,
                if k == 1 { "snapshot" } else { "update" },
                10 * k,
                if k == 1 { 0 } else { 10 * (k - 1) }
            ),
            format!(
                r#"{{"action":"update","arg":{{"instType":"SPOT","channel":"trade","instId":"BTCUSDT"}},"data":[{{"ts":"{k}","price":"{px}.1","size":"0.5","side":"buy","tradeId":"{k}"}}],"ts":{k}}}"#
            ),
        ],
    }
}

fn run(venue: Venue) {
    let native = if venue == Venue::Okx { "BTC-USDT" } else { "BTCUSDT" };
    let book = BookId(0);
    let mut market = Market::new(1, &[book], 1_000, 64);
    for i in 0..1_000u64 {
        // Alerts far from the price: evaluated on every trade, never fired.
        let level = Price::from_f64(if i % 2 == 0 { 10_000.0 + i as f64 } else { 1.0 + i as f64 / 1e4 });
        let cross = if i % 2 == 0 { Cross::Above } else { Cross::Below };
        market.insert_alert(
            book,
            AlertSpec { id: i + 1, condition: Condition::Price { cross, level }, repeat: false, cooldown_s: 0 },
        );
    }
    let mut sink = MarketSink { market, live: false, messages: 0, trades: 0, breaks: 0 };
    let mut session = Session::new(venue, vec![book], vec![native.to_owned()], true);
    session.handle_connected(0, &mut sink);
    // Every subscription request, each at the first time the session lets it go.
    let mut now = 0;
    while let Some(rampart_venue::session::Transmit::Control(_)) = session.poll_transmit(now) {
        now += session.control_gap_ms();
    }
    if venue == Venue::Binance {
        // The REST snapshot the first diff asks for.
        session.handle_snapshot(
            book,
            br#"{"lastUpdateId":0,"bids":[["99.5","1"]],"asks":[["130.5","1"]]}"#,
            0,
            &mut sink,
        );
    }
    let mut codec = WsCodec::new(1 << 20, 1);
    let rounds = 4_000u64;
    // The counter counts here: one allocation is seen.
    let ((), one) = alloc::count(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(16))));
    assert_eq!(one, Some(1), "the counting allocator is installed");
    let mut wire = Vec::with_capacity(1 << 20);
    let feed = |codec: &mut WsCodec, session: &mut Session, sink: &mut MarketSink, wire: &[u8]| {
        let mut off = 0;
        while off < wire.len() {
            let space = codec.read_space();
            let n = space.len().min(wire.len() - off).min(4096);
            space[..n].copy_from_slice(&wire[off..off + n]);
            codec.filled(n);
            off += n;
            while let Ok(Some(ev)) = codec.next_event() {
                if let Event::Text(t) = ev {
                    session.handle_text(1, t, sink);
                }
            }
        }
    };
    // Warm-up: the first half; then the second half is counted.
    for k in 1..=rounds / 2 {
        for m in messages(venue, k) {
            frame(&m, &mut wire);
        }
    }
    feed(&mut codec, &mut session, &mut sink, &wire);
    assert!(sink.live, "{venue:?}: the book is live after warm-up");
    wire.clear();
    for k in rounds / 2 + 1..=rounds {
        for m in messages(venue, k) {
            frame(&m, &mut wire);
        }
    }
    let before_messages = sink.messages;
    let ((), allocations) = alloc::count(|| feed(&mut codec, &mut session, &mut sink, &wire));
    assert_eq!(sink.breaks, 0, "{venue:?}: no gap, checksum or decode error in a clean stream");
    assert_eq!(sink.messages - before_messages, rounds, "{venue:?}: every message applied");
    assert!(sink.live, "{venue:?}");
    assert_eq!(allocations, Some(0), "{venue:?}: {rounds} book messages and {rounds} trades allocated");
    let top = sink.market.get(book).and_then(|s| s.book.best_bid()).map(|l| l.price);
    assert!(top.is_some(), "{venue:?}: the book holds levels");
}

#[test]
fn binance_path_allocates_nothing() {
    run(Venue::Binance);
}

#[test]
fn bybit_path_allocates_nothing() {
    run(Venue::Bybit);
}

#[test]
fn okx_path_allocates_nothing() {
    run(Venue::Okx);
}

#[test]
fn bitget_path_allocates_nothing() {
    run(Venue::Bitget);
}

/// The perpetual frames' path (decisions §17): a perpetual session decodes each venue's
/// liquidations and contract updates, converts them to the spot pair's units and hands them to
/// a real `PerpBook` (its windows, recent ring, OI and funding), without allocating.
struct PerpSink {
    book: Box<rampart_engine::perp_book::PerpBook>,
    taken: u64,
}

impl Sink for PerpSink {
    fn book(&mut self, _: BookId) -> Option<&mut Book> {
        None
    }
    fn set_live(&mut self, _: BookId, _: bool) {}
    fn trade(&mut self, _: &Tick) {}
    fn decided(&mut self, _: i64) {}
    fn count(&mut self, _: Venue, what: Count) {
        assert_ne!(what, Count::PerpDecodeError, "a clean stream decodes");
    }
    fn perp_liquidation(&mut self, _: BookId, l: &rampart_venue::protocol::PerpLiq) {
        let now = l.ts_ms;
        self.taken += u64::from(self.book.on_liquidation(now, l.ts_ms, l.side, l.price, l.qty).is_ok());
    }
    fn perp_values(&mut self, _: BookId, v: &rampart_venue::protocol::PerpValues) {
        let now = v.ts_ms;
        if let Some(m) = v.mark {
            self.taken += u64::from(self.book.on_mark(now, v.ts_ms, m).is_ok());
        }
        if let Some((base, usd)) = v.oi {
            self.taken += u64::from(self.book.on_oi(now, v.ts_ms, base, usd).is_ok());
        }
        if let Some((rate, hours, next)) = v.funding {
            self.taken += u64::from(self.book.on_funding(now, v.ts_ms, rate, hours, next).is_ok());
        }
    }
}

/// Message `k` of a venue's perpetual: a liquidation, then the contract's values.
fn perp_messages(venue: Venue, k: u64) -> Vec<String> {
    let t = 1_700_000_000_000 + k * 1_000;
    let px = 100 + k % 7;
    match venue {
        Venue::Binance => vec![
            format!(
                r#"{{"stream":"btcusdt@forceOrder","data":{{"e":"forceOrder","E":{t},"o":{{"s":"BTCUSDT","S":"SELL","q":"0.5","p":"{px}.5","ap":"{px}.5","z":"0.5","T":{t}}}}}}}"#
            ),
            format!(
                r#"{{"stream":"btcusdt@markPrice@1s","data":{{"e":"markPriceUpdate","E":{t},"s":"BTCUSDT","p":"{px}.1","i":"{px}","P":"{px}","r":"0.0001","T":{}}}}}"#,
                t + 3_600_000
            ),
        ],
        Venue::Bybit => vec![
            format!(
                r#"{{"topic":"allLiquidation.BTCUSDT","type":"snapshot","ts":{t},"data":[{{"T":{t},"s":"BTCUSDT","S":"Buy","v":"0.5","p":"{px}.5"}}]}}"#
            ),
            format!(
                r#"{{"topic":"tickers.BTCUSDT","type":"delta","data":{{"symbol":"BTCUSDT","markPrice":"{px}.1","openInterest":"{k}","fundingRate":"0.0001","nextFundingTime":"{}"}},"ts":{t}}}"#,
                t + 3_600_000
            ),
        ],
        Venue::Okx => vec![
            format!(
                r#"{{"arg":{{"channel":"liquidation-orders","instType":"SWAP"}},"data":[{{"details":[{{"bkPx":"{px}.5","side":"sell","sz":"3","ts":"{t}"}}],"instId":"BTC-USDT-SWAP"}}]}}"#
            ),
            format!(
                r#"{{"arg":{{"channel":"open-interest","instId":"BTC-USDT-SWAP"}},"data":[{{"instId":"BTC-USDT-SWAP","oi":"{k}","oiCcy":"{k}","oiUsd":"{k}","ts":"{t}"}}]}}"#
            ),
            format!(
                r#"{{"arg":{{"channel":"funding-rate","instId":"BTC-USDT-SWAP"}},"data":[{{"fundingRate":"0.0001","fundingTime":"{}","instId":"BTC-USDT-SWAP","nextFundingTime":"{}","ts":"{t}"}}]}}"#,
                t + 3_600_000,
                t + 7_200_000
            ),
        ],
        Venue::Bitget => vec![format!(
            r#"{{"action":"snapshot","arg":{{"instType":"USDT-FUTURES","channel":"ticker","instId":"BTCUSDT"}},"data":[{{"instId":"BTCUSDT","markPrice":"{px}.1","fundingRate":"0.0001","nextFundingTime":"{}","holdingAmount":"{k}","ts":"{t}"}}],"ts":{t}}}"#,
            t + 3_600_000
        )],
    }
}

fn run_perp(venue: Venue) {
    let contract = if venue == Venue::Okx { "BTC-USDT-SWAP" } else { "BTCUSDT" };
    let pair = rampart_venue::perp_listing::PerpPair {
        symbol: "BTCUSDT".into(),
        contract: contract.into(),
        multiplier: 1,
        contract_size: if venue == Venue::Okx { 0.01 } else { 1.0 },
        interval_h: Some(8),
    };
    let spec = rampart_engine::perp_book::PerpSpec { venue, contract, multiplier: 1, binance_oi_poll_ms: 30_000 };
    let book = rampart_engine::perp_book::PerpBook::new(spec, 0).expect("a perpetual book");
    let mut sink = PerpSink { book, taken: 0 };
    let mut session = Session::perp(venue, vec![BookId(0)], vec![pair]);
    session.handle_connected(0, &mut sink);
    let mut now = 0;
    while let Some(rampart_venue::session::Transmit::Control(_)) = session.poll_transmit(now) {
        now += session.control_gap_ms();
    }
    let frames = |from: u64, to: u64| -> Vec<String> { (from..to).flat_map(|k| perp_messages(venue, k)).collect() };
    // Warm-up (the recent ring fills to its 128), then counted.
    for f in frames(1, 300) {
        session.handle_text(1, f.as_bytes(), &mut sink);
    }
    let counted = frames(300, 2_300);
    let before = sink.taken;
    let ((), allocations) = alloc::count(|| {
        for f in &counted {
            session.handle_text(1, f.as_bytes(), &mut sink);
        }
    });
    assert!(sink.taken - before >= 2_000, "{venue:?}: every message taken ({})", sink.taken - before);
    assert_eq!(allocations, Some(0), "{venue:?}: {} perpetual frames allocated", counted.len());
}

#[test]
fn the_perpetual_paths_allocate_nothing() {
    for venue in Venue::ALL {
        run_perp(venue);
    }
}
