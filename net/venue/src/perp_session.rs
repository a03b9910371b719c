//! One WebSocket connection's perpetual logic (decisions §17, venues.md §8): which URL and
//! subscriptions carry the liquidations, mark, open interest and funding of a shard's
//! perpetuals on one venue, how each frame is decoded (`rampart_engine::feed::perp`), turned into
//! the spot pair's units ([`PerpPair`]) and handed to the shard ([`Sink::perp_liquidation`],
//! [`Sink::perp_values`]), and when to ping or reconnect. Sans-I/O like the spot session
//! (`session`), and driven by the same connection task through [`super::session::Session`].
//!
//! Per venue (the real venues' channels, `perp_ws` from the configuration):
//! - Binance: `{perp_ws}/stream?streams=<sym>@forceOrder/<sym>@markPrice@1s/...` (no
//!   subscription message; the venue pings). Open interest is polled over REST, not here.
//! - Bybit: `{perp_ws}` (`/v5/public/linear`), `tickers.{S}` and `allLiquidation.{S}`, ten
//!   topics a request, `{"op":"ping"}` every 20 s.
//! - OKX: `{perp_ws}/ws/v5/public`, `liquidation-orders` of every swap (the shard keeps its own)
//!   and per contract `open-interest` and `funding-rate`, `ping` after 20 s of silence.
//! - Bitget: `{perp_ws}/v2/ws/public`, `ticker` of `USDT-FUTURES`, `ping` every 25 s.
//!
//! Funding needs its rate, interval and next settlement together; a venue's delta may carry one,
//! so each contract keeps what it last heard of each (`Merged`) and a message hands the merged
//! triple once all three are known. The interval comes from the message when it says it (OKX,
//! Bybit), else the listing, else 8 h. No allocation per frame: decoders are sized at
//! construction and symbols are looked up by borrowed bytes.

use std::collections::{HashMap, VecDeque};

use rampart_engine::feed::perp::binance::BinancePerpDecoder;
use rampart_engine::feed::perp::bitget::BitgetPerpDecoder;
use rampart_engine::feed::perp::bybit::BybitPerpDecoder;
use rampart_engine::feed::perp::okx::OkxPerpDecoder;
use rampart_engine::feed::perp::{
    Liquidation, PerpMessage, Update, LIQUIDATIONS_PER_MESSAGE_MAX, UPDATES_PER_MESSAGE_MAX,
};
use rampart_engine::feed::DecodeError;
use rampart_engine::{BookId, Venue};
use rampart_state::Reconnect;

use super::perp_listing::PerpPair;
use super::protocol::{Count, Keepalive, PerpLiq, PerpValues, Sink, Transmit, CONNECTION_LIFETIME_MS};

/// Updates one message of a venue other than Binance holds at most (one contract's, or OKX's
/// few): past it the rest are counted by the decoder, not kept.
pub const PERP_UPDATES_PER_MESSAGE_MAX: usize = 64;
/// Topics (Bybit) or arguments (OKX, Bitget) per subscription request.
const ARGS_PER_REQUEST: [usize; Venue::COUNT] = [0, 10, 20, 20];
/// The funding interval assumed when neither the message nor the listing says it.
const DEFAULT_INTERVAL_H: u32 = 8;

/// One venue's facts for its perpetual stream.
#[derive(Clone, Copy, Debug)]
struct Facts {
    idle_limit_ms: i64,
    control_gap_ms: i64,
    keepalive: Option<Keepalive>,
}

fn facts(venue: Venue) -> Facts {
    let ka = |bytes: &'static [u8], every_ms, after_silence| Some(Keepalive { bytes, every_ms, after_silence });
    match venue {
        Venue::Binance => Facts { idle_limit_ms: 60_000, control_gap_ms: 100, keepalive: None },
        Venue::Bybit => {
            Facts { idle_limit_ms: 60_000, control_gap_ms: 100, keepalive: ka(br#"{"op":"ping"}"#, 20_000, false) }
        }
        Venue::Okx => Facts { idle_limit_ms: 40_000, control_gap_ms: 100, keepalive: ka(b"ping", 20_000, true) },
        Venue::Bitget => Facts { idle_limit_ms: 75_000, control_gap_ms: 150, keepalive: ka(b"ping", 25_000, false) },
    }
}

/// The perpetual frame decoder of one venue, sized for a session (also what a test reads a
/// venue's frames with).
pub enum PerpDecoder {
    /// Binance.
    Binance(BinancePerpDecoder),
    /// Bybit.
    Bybit(BybitPerpDecoder),
    /// OKX.
    Okx(OkxPerpDecoder),
    /// Bitget.
    Bitget(BitgetPerpDecoder),
}

impl PerpDecoder {
    /// `venue`'s decoder, with the session's bounds.
    pub fn of(venue: Venue) -> PerpDecoder {
        let (liqs, updates) = (LIQUIDATIONS_PER_MESSAGE_MAX, PERP_UPDATES_PER_MESSAGE_MAX);
        match venue {
            Venue::Binance => PerpDecoder::Binance(BinancePerpDecoder::new(liqs, UPDATES_PER_MESSAGE_MAX)),
            Venue::Bybit => PerpDecoder::Bybit(BybitPerpDecoder::new(liqs, updates)),
            Venue::Okx => PerpDecoder::Okx(OkxPerpDecoder::new(liqs, updates)),
            Venue::Bitget => PerpDecoder::Bitget(BitgetPerpDecoder::new(updates)),
        }
    }

    /// Decodes one frame (see `rampart_engine::feed::perp`).
    pub fn decode<'a>(&'a mut self, frame: &'a [u8]) -> Result<PerpMessage<'a>, DecodeError> {
        match self {
            PerpDecoder::Binance(d) => d.decode(frame),
            PerpDecoder::Bybit(d) => d.decode(frame),
            PerpDecoder::Okx(d) => d.decode(frame),
            PerpDecoder::Bitget(d) => d.decode(frame),
        }
    }
}

/// What a contract last heard of its funding.
#[derive(Clone, Copy, Debug, Default)]
struct Merged {
    rate: Option<f64>,
    next_ms: Option<i64>,
    interval_h: Option<u32>,
}

/// The perpetual logic of one connection: see the module documentation.
pub struct PerpSession {
    venue: Venue,
    books: Vec<BookId>,
    pairs: Vec<PerpPair>,
    index: HashMap<Box<[u8]>, usize>,
    merged: Vec<Merged>,
    decoder: PerpDecoder,
    facts: Facts,
    control: VecDeque<Vec<u8>>,
    next_control_ms: i64,
    opened_ms: i64,
    last_ping_ms: i64,
    last_rx_ms: i64,
    req_id: u64,
}

impl PerpSession {
    /// A session for the perpetuals `pairs` of `books` (one each, in order) on `venue`.
    pub fn new(venue: Venue, books: Vec<BookId>, pairs: Vec<PerpPair>) -> PerpSession {
        assert_eq!(books.len(), pairs.len(), "one perpetual per book");
        let index = pairs.iter().enumerate().map(|(k, p)| (p.contract.as_bytes().into(), k)).collect();
        PerpSession {
            venue,
            merged: vec![Merged::default(); pairs.len()],
            books,
            pairs,
            index,
            decoder: PerpDecoder::of(venue),
            facts: facts(venue),
            control: VecDeque::new(),
            next_control_ms: 0,
            opened_ms: 0,
            last_ping_ms: 0,
            last_rx_ms: 0,
            req_id: 0,
        }
    }

    /// The venue.
    pub fn venue(&self) -> Venue {
        self.venue
    }

    /// The books whose perpetuals this session carries.
    pub fn books(&self) -> &[BookId] {
        &self.books
    }

    /// The URL to open under the venue's perpetual WebSocket base.
    pub fn url(&self, perp_ws: &str) -> String {
        let base = perp_ws.trim_end_matches('/');
        match self.venue {
            Venue::Binance => {
                let streams: Vec<String> = self
                    .pairs
                    .iter()
                    .map(|p| {
                        let s = p.contract.to_ascii_lowercase();
                        format!("{s}@forceOrder/{s}@markPrice@1s")
                    })
                    .collect();
                format!("{base}/stream?streams={}", streams.join("/"))
            }
            Venue::Bybit => base.to_owned(),
            Venue::Okx => format!("{base}/ws/v5/public"),
            Venue::Bitget => format!("{base}/v2/ws/public"),
        }
    }

    /// A new connection is open: its subscriptions are queued.
    pub fn handle_connected(&mut self, now_ms: i64) {
        self.control.clear();
        self.opened_ms = now_ms;
        self.last_rx_ms = now_ms;
        self.last_ping_ms = now_ms;
        self.next_control_ms = now_ms;
        self.merged.iter_mut().for_each(|m| *m = Merged::default());
        let args: Vec<String> = match self.venue {
            Venue::Binance => Vec::new(),
            Venue::Bybit => self
                .pairs
                .iter()
                .flat_map(|p| [format!("\"tickers.{}\"", p.contract), format!("\"allLiquidation.{}\"", p.contract)])
                .collect(),
            Venue::Okx => std::iter::once(r#"{"channel":"liquidation-orders","instType":"SWAP"}"#.to_owned())
                .chain(self.pairs.iter().flat_map(|p| {
                    [
                        format!(r#"{{"channel":"open-interest","instId":"{}"}}"#, p.contract),
                        format!(r#"{{"channel":"funding-rate","instId":"{}"}}"#, p.contract),
                    ]
                }))
                .collect(),
            Venue::Bitget => self
                .pairs
                .iter()
                .map(|p| format!(r#"{{"instType":"USDT-FUTURES","channel":"ticker","instId":"{}"}}"#, p.contract))
                .collect(),
        };
        for batch in args.chunks(ARGS_PER_REQUEST[self.venue.index()].max(1)) {
            self.req_id += 1;
            let list = batch.join(",");
            let msg = match self.venue {
                Venue::Bybit => format!(r#"{{"op":"subscribe","req_id":"p{}","args":[{list}]}}"#, self.req_id),
                Venue::Okx => format!(r#"{{"id":"p{}","op":"subscribe","args":[{list}]}}"#, self.req_id),
                _ => format!(r#"{{"op":"subscribe","args":[{list}]}}"#),
            };
            self.control.push_back(msg.into_bytes());
        }
    }

    /// A frame or keepalive answer arrived: the stream is alive.
    pub fn handle_alive(&mut self, now_ms: i64) {
        self.last_rx_ms = now_ms;
    }

    /// Decodes one text frame and hands what it says to `sink`.
    pub fn handle_text(&mut self, now_ms: i64, payload: &[u8], sink: &mut dyn Sink) {
        self.last_rx_ms = now_ms;
        let venue = self.venue;
        let msg = match self.decoder.decode(payload) {
            Ok(m) => m,
            Err(_) => {
                sink.count(venue, Count::PerpDecodeError);
                return;
            }
        };
        match msg {
            PerpMessage::Liquidations(batch) => {
                for e in batch.iter() {
                    if let Some(&k) = self.index.get(e.symbol) {
                        let liq = liquidation(&self.pairs[k], &e.value);
                        sink.perp_liquidation(self.books[k], &liq);
                    }
                }
                sink.count(venue, Count::PerpMessage);
            }
            PerpMessage::Updates(batch) => {
                for e in batch.iter() {
                    if let Some(&k) = self.index.get(e.symbol) {
                        let values = values(venue, &self.pairs[k], &mut self.merged[k], &e.value);
                        sink.perp_values(self.books[k], &values);
                    }
                }
                sink.count(venue, Count::PerpMessage);
            }
            PerpMessage::Reply(r) if !r.ok => sink.count(venue, Count::VenueError),
            PerpMessage::Reply(_) | PerpMessage::Pong | PerpMessage::Other => {}
        }
    }

    /// Why the session wants a new connection now, if it does: silence past the venue's idle
    /// limit, or the renewal age.
    pub fn poll_reconnect(&self, now_ms: i64) -> Option<Reconnect> {
        if now_ms - self.last_rx_ms > self.facts.idle_limit_ms {
            return Some(Reconnect::Idle);
        }
        (now_ms - self.opened_ms > CONNECTION_LIFETIME_MS).then_some(Reconnect::Renewal)
    }

    /// What to write now: the next subscription once the venue's control gap has passed, else a
    /// keepalive that is due.
    pub fn poll_transmit(&mut self, now_ms: i64) -> Option<Transmit> {
        if !self.control.is_empty() && now_ms >= self.next_control_ms {
            self.next_control_ms = now_ms + self.facts.control_gap_ms;
            return self.control.pop_front().map(Transmit::Control);
        }
        let keepalive = self.facts.keepalive?;
        if now_ms < self.next_ping_ms() {
            return None;
        }
        self.last_ping_ms = now_ms;
        Some(Transmit::Ping(keepalive.bytes))
    }

    /// When the session next has something to do on its own.
    pub fn poll_timeout(&self) -> i64 {
        let mut at = (self.last_rx_ms + self.facts.idle_limit_ms + 1).min(self.opened_ms + CONNECTION_LIFETIME_MS + 1);
        if !self.control.is_empty() {
            at = at.min(self.next_control_ms);
        }
        at.min(self.next_ping_ms())
    }

    fn next_ping_ms(&self) -> i64 {
        match self.facts.keepalive {
            None => i64::MAX,
            Some(k) if k.after_silence => self.last_rx_ms.max(self.last_ping_ms) + k.every_ms,
            Some(k) => self.last_ping_ms + k.every_ms,
        }
    }

    /// Least time between two control messages on this venue.
    pub fn control_gap_ms(&self) -> i64 {
        self.facts.control_gap_ms
    }
}

/// A venue's liquidation in its spot pair's units.
fn liquidation(pair: &PerpPair, l: &Liquidation) -> PerpLiq {
    PerpLiq { side: l.side, price: pair.base_price(l.price), qty: pair.base_qty(l.qty), ts_ms: l.ts_ms }
}

/// An OKX funding row (a push's or the REST answer's: `crate::perp_funding`) in its spot pair's
/// units, whole in itself (rate, next settlement and the interval when it says it).
pub(crate) fn okx_funding_values(pair: &PerpPair, u: &Update) -> PerpValues {
    values(Venue::Okx, pair, &mut Merged::default(), u)
}

/// A venue's partial update in its spot pair's units, funding merged with what came before.
fn values(venue: Venue, pair: &PerpPair, merged: &mut Merged, u: &Update) -> PerpValues {
    let oi_base = match (u.oi_contracts, u.oi_base) {
        (Some(contracts), _) => Some(pair.base_qty(contracts)),
        // OKX's `oiCcy` is already in the base currency; the others count the contract's base.
        (None, Some(base)) if venue == Venue::Okx => Some(base),
        (None, Some(base)) => Some(pair.base_qty(base)),
        (None, None) => None,
    };
    let touched = u.funding_rate.is_some() || u.next_funding_ms.is_some() || u.funding_interval_ms.is_some();
    merged.rate = u.funding_rate.or(merged.rate);
    merged.next_ms = u.next_funding_ms.or(merged.next_ms);
    let hours = u.funding_interval_ms.map(|ms| (ms / 3_600_000) as u32).filter(|h| *h > 0);
    merged.interval_h = hours.or(merged.interval_h);
    let interval = merged.interval_h.or(pair.interval_h).unwrap_or(DEFAULT_INTERVAL_H);
    let funding = match (touched, merged.rate, merged.next_ms) {
        (true, Some(rate), Some(next)) => Some((rate * 100.0, interval, next)),
        _ => None,
    };
    PerpValues { ts_ms: u.ts_ms, mark: u.mark.map(|m| pair.base_price(m)), oi: oi_base.map(|b| (b, u.oi_usd)), funding }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::book::Book;
    use rampart_engine::perp_window::PositionSide;
    use rampart_engine::Tick;

    /// What the session handed over.
    #[derive(Default)]
    struct Seen {
        liqs: Vec<(BookId, PerpLiq)>,
        values: Vec<(BookId, PerpValues)>,
        counts: Vec<Count>,
    }

    impl Sink for Seen {
        fn book(&mut self, _: BookId) -> Option<&mut Book> {
            None
        }
        fn set_live(&mut self, _: BookId, _: bool) {}
        fn trade(&mut self, _: &Tick) {}
        fn count(&mut self, _: Venue, what: Count) {
            self.counts.push(what);
        }
        fn decided(&mut self, _: i64) {}
        fn perp_liquidation(&mut self, book: BookId, liq: &PerpLiq) {
            self.liqs.push((book, *liq));
        }
        fn perp_values(&mut self, book: BookId, values: &PerpValues) {
            self.values.push((book, *values));
        }
    }

    fn pair(symbol: &str, contract: &str, multiplier: u32, size: f64, interval_h: Option<u32>) -> PerpPair {
        PerpPair { symbol: symbol.into(), contract: contract.into(), multiplier, contract_size: size, interval_h }
    }

    fn texts(s: &mut PerpSession, now: i64) -> Vec<String> {
        let mut out = Vec::new();
        let mut t = now;
        while let Some(Transmit::Control(m)) = s.poll_transmit(t) {
            out.push(String::from_utf8(m).expect("utf-8"));
            t += s.control_gap_ms();
        }
        out
    }

    #[test]
    fn each_venue_opens_its_url_and_subscribes_its_channels_in_batches() {
        let pairs = || (0..6).map(|i| pair("XUSDT", &format!("C{i}USDT"), 1, 1.0, None)).collect::<Vec<_>>();
        let books = || (0..6).map(BookId).collect::<Vec<_>>();
        let mut b = PerpSession::new(Venue::Binance, books(), pairs());
        assert!(b
            .url("ws://h/market")
            .starts_with("ws://h/market/stream?streams=c0usdt@forceOrder/c0usdt@markPrice@1s/"));
        b.handle_connected(0);
        assert!(texts(&mut b, 0).is_empty(), "Binance subscribes in the URL");
        let mut y = PerpSession::new(Venue::Bybit, books(), pairs());
        assert_eq!(y.url("wss://stream.bybit.com/v5/public/linear/"), "wss://stream.bybit.com/v5/public/linear");
        y.handle_connected(0);
        let sent = texts(&mut y, 0);
        assert_eq!(sent.len(), 2, "12 topics at 10 a request: {sent:?}");
        assert!(sent[0].contains("\"tickers.C0USDT\",\"allLiquidation.C0USDT\""), "{}", sent[0]);
        let mut o = PerpSession::new(Venue::Okx, books(), pairs());
        assert_eq!(o.url("wss://ws.okx.com:8443"), "wss://ws.okx.com:8443/ws/v5/public");
        o.handle_connected(0);
        let sent = texts(&mut o, 0);
        assert!(sent[0].contains(r#"{"channel":"liquidation-orders","instType":"SWAP"}"#), "{}", sent[0]);
        assert_eq!(sent.len(), 1, "13 arguments in one request of 20: {sent:?}");
        let mut g = PerpSession::new(Venue::Bitget, books(), pairs());
        assert_eq!(g.url("wss://ws.bitget.com"), "wss://ws.bitget.com/v2/ws/public");
        g.handle_connected(0);
        assert!(texts(&mut g, 0)[0].contains(r#""instType":"USDT-FUTURES","channel":"ticker","instId":"C0USDT""#));
    }

    #[test]
    fn binance_units_are_the_spot_pairs_and_unknown_contracts_are_ignored() {
        let mut s = PerpSession::new(
            Venue::Binance,
            vec![BookId(7)],
            vec![pair("PEPEUSDT", "1000PEPEUSDT", 1000, 1.0, Some(4))],
        );
        let mut seen = Seen::default();
        let liq = br#"{"stream":"1000pepeusdt@forceOrder","data":{"e":"forceOrder","E":2,"o":{"s":"1000PEPEUSDT","S":"SELL","q":"5","p":"0.012","ap":"0.012","z":"5","T":1}}}"#;
        s.handle_text(10, liq, &mut seen);
        let (book, l) = seen.liqs[0];
        assert_eq!((book, l.side, l.qty, l.ts_ms), (BookId(7), PositionSide::Long, 5_000.0, 1));
        assert!((l.price - 0.000012).abs() < 1e-15, "{l:?}");
        let mark = br#"{"e":"markPriceUpdate","E":5,"s":"1000PEPEUSDT","p":"0.01200000","i":"0.01","P":"0.012","r":"0.00010000","T":1700000000000}"#;
        s.handle_text(11, mark, &mut seen);
        let v = seen.values[0].1;
        assert_eq!(v.funding, Some((0.01, 4, 1_700_000_000_000)), "percent, the listing's interval");
        let other = br#"{"e":"markPriceUpdate","E":5,"s":"BTCUSDT","p":"1","i":"1","P":"1","r":"0","T":1}"#;
        s.handle_text(12, other, &mut seen);
        assert_eq!(seen.values.len(), 1, "a contract this session does not carry");
        s.handle_text(13, b"{\"e\":", &mut seen);
        assert_eq!(seen.counts, [Count::PerpMessage, Count::PerpMessage, Count::PerpMessage, Count::PerpDecodeError]);
    }

    #[test]
    fn a_bybit_delta_merges_funding_with_what_came_before() {
        let mut s = PerpSession::new(Venue::Bybit, vec![BookId(1)], vec![pair("BTCUSDT", "BTCUSDT", 1, 1.0, Some(8))]);
        let mut seen = Seen::default();
        let delta =
            br#"{"topic":"tickers.BTCUSDT","type":"delta","data":{"symbol":"BTCUSDT","fundingRate":"0.0002"},"ts":3}"#;
        s.handle_text(1, delta, &mut seen);
        assert_eq!(seen.values[0].1.funding, None, "no next settlement known yet");
        let snap = br#"{"topic":"tickers.BTCUSDT","type":"snapshot","data":{"symbol":"BTCUSDT","markPrice":"100","openInterest":"5","openInterestValue":"500","nextFundingTime":"1000","fundingRate":"0.0001"},"ts":4}"#;
        s.handle_text(2, snap, &mut seen);
        assert_eq!(seen.values[1].1.oi, Some((5.0, Some(500.0))));
        let delta =
            br#"{"topic":"tickers.BTCUSDT","type":"delta","data":{"symbol":"BTCUSDT","fundingRate":"0.0003"},"ts":5}"#;
        s.handle_text(3, delta, &mut seen);
        let v = seen.values[2].1;
        assert_eq!((v.mark, v.oi), (None, None), "a delta carries only what changed");
        let (rate, interval, next) = v.funding.expect("merged with the snapshot's next settlement");
        assert!((rate - 0.03).abs() < 1e-12 && (interval, next) == (8, 1000), "{v:?}");
        let liq = br#"{"topic":"allLiquidation.BTCUSDT","type":"snapshot","ts":6,"data":[{"T":6,"s":"BTCUSDT","S":"Sell","v":"2","p":"99"}]}"#;
        s.handle_text(4, liq, &mut seen);
        assert_eq!(seen.liqs[0].1.side, PositionSide::Short, "Bybit Sell: a short liquidated");
    }

    #[test]
    fn okx_counts_contracts_and_takes_the_interval_from_the_message() {
        let mut s =
            PerpSession::new(Venue::Okx, vec![BookId(2)], vec![pair("BTCUSDT", "BTC-USDT-SWAP", 1, 0.01, None)]);
        let mut seen = Seen::default();
        let liq = br#"{"arg":{"channel":"liquidation-orders","instType":"SWAP"},"data":[{"details":[{"bkPx":"100","side":"sell","sz":"30","ts":"7"}],"instId":"BTC-USDT-SWAP"},{"details":[{"bkPx":"1","side":"buy","sz":"1","ts":"7"}],"instId":"ETH-USDT-SWAP"}]}"#;
        s.handle_text(1, liq, &mut seen);
        assert_eq!(seen.liqs.len(), 1, "another shard's swap is left to it");
        assert!((seen.liqs[0].1.qty - 0.3).abs() < 1e-12, "30 contracts of 0.01 BTC");
        let oi = br#"{"arg":{"channel":"open-interest","instId":"BTC-USDT-SWAP"},"data":[{"instId":"BTC-USDT-SWAP","oi":"200","oiCcy":"2","oiUsd":"200","ts":"8"}]}"#;
        s.handle_text(2, oi, &mut seen);
        assert_eq!(seen.values[0].1.oi, Some((2.0, Some(200.0))));
        let f = br#"{"arg":{"channel":"funding-rate","instId":"BTC-USDT-SWAP"},"data":[{"fundingRate":"0.0001","fundingTime":"14400000","instId":"BTC-USDT-SWAP","nextFundingTime":"28800000","ts":"9"}]}"#;
        s.handle_text(3, f, &mut seen);
        assert_eq!(seen.values[1].1.funding.map(|f| (f.1, f.2)), Some((4, 14_400_000)), "4 h from the message");
    }

    #[test]
    fn keepalives_and_the_idle_limit_follow_the_venue() {
        let mut s = PerpSession::new(Venue::Bybit, vec![BookId(1)], vec![pair("BTCUSDT", "BTCUSDT", 1, 1.0, None)]);
        s.handle_connected(0);
        let _ = texts(&mut s, 0);
        assert_eq!(s.poll_transmit(19_999), None);
        assert_eq!(s.poll_transmit(20_000), Some(Transmit::Ping(br#"{"op":"ping"}"#)));
        s.handle_alive(30_000);
        assert_eq!(s.poll_reconnect(90_000), None);
        assert_eq!(s.poll_reconnect(90_001), Some(Reconnect::Idle));
        assert!(s.poll_timeout() <= 40_000, "woken for the next ping");
    }
}
