//! JSON decoding options measured on each venue's real frames: the engine's hand-rolled decoders
//! against simd-json, sonic-rs and serde_json, every one producing the same [`Decoded`] value
//! (fixed-point levels, sequencing ids, trades) so the comparison is of equal work.
//!
//! The frames are the engine's fixtures (Binance, Bybit, OKX) and the Bitget frames documented in
//! venues.md §4.2–4.3 (the engine reads Bitget's two book frames; its Bitget trade message does
//! not carry the push's outer `ts` that [`Decoded`] holds, so the Bitget trade frame is measured
//! with the generic parsers only). [`verify`] checks that every parser gives the same result for
//! every frame before anything is timed; [`parsers`] then times each frame and counts
//! allocations.
//!
//! Rationale for how each generic parser is driven (each in its usual fast form):
//! - the parsers are told the frame's kind (book or trade), as a venue adapter would know it from
//!   the subscription or topic; the engine decoders find the kind in the frame themselves;
//! - every parser extracts what [`Decoded`] holds and skips the rest; skipped values are still
//!   validated by every parser here (the engine, simd-json's tape, serde_json, and sonic-rs's
//!   checked entry points all validate the whole document);
//! - decimals go through the engine's own [`Price::parse`] and [`Qty::parse`], so only the JSON
//!   work differs.

use std::marker::PhantomData;
use std::time::Instant;

use rampart_engine::feed::binance::{self, BinanceDecoder, TimeUnit};
use rampart_engine::feed::{bitget, bybit, okx};
use rampart_engine::{Level, Price, Qty, Venue};
use rampart_testkit::alloc;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};

use super::{histogram, Summary};

// ---------------------------------------------------------------------------------------------
// The common result.

/// One trade of a frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TradeRow {
    /// The trade id: the number for Binance (`t`), OKX and Bitget (`tradeId`); for Bybit, whose
    /// `i` is opaque text, the FNV-1a hash of that text.
    pub id: u64,
    /// Trade time, Unix ms.
    pub ts_ms: i64,
    /// Price.
    pub price: Price,
    /// Quantity.
    pub qty: Qty,
    /// The taker sold.
    pub taker_sell: bool,
    /// The trade's sequence number, where the venue sends one (Bybit `seq`, OKX `seqId`).
    pub seq: Option<i64>,
}

/// What every parser must produce from a frame: the routing key, the time, the sequencing ids
/// and every level or trade, in message order. Buffers are reserved once and reused.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Decoded {
    /// FNV-1a hash of the symbol text (Binance `s`, Bybit `data.s`, OKX and Bitget
    /// `arg.instId`); 0 when the frame has none (Binance REST snapshot).
    pub symbol_hash: u64,
    /// The frame's time, Unix ms: Binance `E`, Bybit `ts`, OKX book `data[0].ts`, Bitget outer
    /// `ts`; 0 where there is none (Binance REST snapshot, OKX trades).
    pub ts_ms: i64,
    /// Sequencing ids: Binance diff `[U, u]`, Binance snapshot `[lastUpdateId, -]`, Bybit book
    /// `[u, seq]`, OKX book `[seqId, prevSeqId]`, Bitget book `[seq, pseq]`.
    pub ids: [Option<i64>; 2],
    /// Bid levels.
    pub bids: Vec<Level>,
    /// Ask levels.
    pub asks: Vec<Level>,
    /// Trades.
    pub trades: Vec<TradeRow>,
}

impl Decoded {
    /// Buffers sized for the deepest frame measured.
    pub fn new() -> Decoded {
        Decoded {
            bids: Vec::with_capacity(PARSER_LEVELS_MAX),
            asks: Vec::with_capacity(PARSER_LEVELS_MAX),
            trades: Vec::with_capacity(TRADES_MAX),
            ..Decoded::default()
        }
    }

    fn clear(&mut self) {
        self.symbol_hash = 0;
        self.ts_ms = 0;
        self.ids = [None; 2];
        self.bids.clear();
        self.asks.clear();
        self.trades.clear();
    }
}

/// Levels per side the parsers' buffers hold (Binance's deepest REST snapshot).
const PARSER_LEVELS_MAX: usize = binance::SNAPSHOT_LEVELS_PER_SIDE_MAX;
/// Trades per frame the buffers hold (Bybit's documented maximum).
const TRADES_MAX: usize = bybit::TRADES_PER_MESSAGE_MAX;
/// Levels per side of the synthetic deep snapshot.
pub const DEEP_SNAPSHOT_LEVELS: usize = 1_000;

/// Why a parser refused a frame (a static message: the error path allocates nothing).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Fail(pub &'static str);

// ---------------------------------------------------------------------------------------------
// The frames.

/// What a frame carries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FrameKind {
    /// A book diff or update.
    BookDiff,
    /// A full book snapshot.
    BookSnapshot,
    /// A trade push.
    Trade,
}

impl FrameKind {
    /// Short name for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameKind::BookDiff => "book diff",
            FrameKind::BookSnapshot => "book snapshot",
            FrameKind::Trade => "trade",
        }
    }
}

/// One frame to decode.
#[derive(Clone, Debug)]
pub struct Case {
    /// The venue that sends it.
    pub venue: Venue,
    /// Its kind.
    pub kind: FrameKind,
    /// Where it comes from (fixture file or venues.md section).
    pub source: &'static str,
    /// The bytes of the WebSocket message (or REST body).
    pub bytes: Vec<u8>,
}

/// Bitget `books5` snapshot, the real recording of venues.md §4.2 (Aug 2026), on one line.
const BITGET_BOOKS5_RECORDED: &str = concat!(
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"books5","instId":"BTCUSDT"},"#,
    r#""data":[{"asks":[["64024.38","1.753445"],["64024.44","0.01"],["64025","0.02"],"#,
    r#"["64025.58","0.058251"],["64026.18","0.069907"]],"#,
    r#""bids":[["64024.37","0.178298"],["64024.36","0.01"],["64022.95","0.004874"],"#,
    r#"["64022.67","0.007817"],["64022.3","0.029133"]],"#,
    r#""ts":"1786538865366","seq":711330212481,"pseq":0}],"ts":1786538865369}"#
);

/// Bitget book push, the documented shape of venues.md §4.2 (with `checksum`), on one line.
const BITGET_BOOKS5_DOC: &str = concat!(
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"books5","instId":"BTCUSDT"},"#,
    r#""data":[{"asks":[["26274.9","0.0009"],["26275.0","0.0500"]],"#,
    r#""bids":[["26274.8","0.0009"],["26274.7","0.0027"]],"#,
    r#""checksum":0,"seq":123,"ts":"1695710946294"}],"ts":1695710946294}"#
);

/// Bitget `trade` push, venues.md §4.3.
const BITGET_TRADE_DOC: &str = concat!(
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"trade","instId":"BTCUSDT"},"#,
    r#""data":[{"ts":"1695709835822","price":"26293.4","size":"0.0013","side":"buy","tradeId":"1000000000"}],"#,
    r#""ts":1695711090682}"#
);

/// A Binance REST depth snapshot of `levels` levels a side, in Binance's format (8 decimals),
/// around 64 000: the shape of `snapshot_rest.json` at a realistic depth.
pub fn deep_binance_snapshot(levels: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut s = String::with_capacity(64 + levels * 2 * 34);
    s.push_str(r#"{"lastUpdateId":71823645012,"bids":["#);
    for side in 0..2 {
        for i in 0..levels {
            let cents = if side == 0 { 6_400_000 - i as u64 } else { 6_400_001 + i as u64 };
            let qty = 100_000 + (i as u64 * 7_919_131) % 900_000_000;
            let comma = if i + 1 < levels { "," } else { "" };
            let _ = write!(
                s,
                r#"["{}.{:02}000000","{}.{:08}"]{comma}"#,
                cents / 100,
                cents % 100,
                qty / 100_000_000,
                qty % 100_000_000
            );
        }
        s.push_str(if side == 0 { r#"],"asks":["# } else { "]}" });
    }
    s.into_bytes()
}

/// The frames measured: per venue a book diff, a book snapshot and a trade (Bitget documents no
/// `books` update frame: its two documented book pushes are both snapshots), plus one synthetic
/// deep Binance snapshot.
pub fn cases() -> Vec<Case> {
    macro_rules! fixture {
        ($venue:ident, $kind:ident, $file:literal) => {
            Case {
                venue: Venue::$venue,
                kind: FrameKind::$kind,
                source: $file,
                bytes: include_bytes!(concat!("../../engine/tests/fixtures/", $file)).to_vec(),
            }
        };
    }
    vec![
        fixture!(Binance, BookDiff, "binance/depth_update_combined.json"),
        fixture!(Binance, BookSnapshot, "binance/snapshot_rest.json"),
        fixture!(Binance, Trade, "binance/trade_combined.json"),
        Case {
            venue: Venue::Binance,
            kind: FrameKind::BookSnapshot,
            source: "synthetic REST snapshot, 1000 levels a side",
            bytes: deep_binance_snapshot(DEEP_SNAPSHOT_LEVELS),
        },
        fixture!(Bybit, BookDiff, "bybit/orderbook_delta.json"),
        fixture!(Bybit, BookSnapshot, "bybit/orderbook_snapshot.json"),
        fixture!(Bybit, Trade, "bybit/public_trade.json"),
        fixture!(Okx, BookDiff, "okx/books_update.json"),
        fixture!(Okx, BookSnapshot, "okx/books_snapshot.json"),
        fixture!(Okx, Trade, "okx/trades.json"),
        Case {
            venue: Venue::Bitget,
            kind: FrameKind::BookSnapshot,
            source: "venues.md §4.2 books5 recording",
            bytes: BITGET_BOOKS5_RECORDED.as_bytes().to_vec(),
        },
        Case {
            venue: Venue::Bitget,
            kind: FrameKind::BookSnapshot,
            source: "venues.md §4.2 documented push",
            bytes: BITGET_BOOKS5_DOC.as_bytes().to_vec(),
        },
        Case {
            venue: Venue::Bitget,
            kind: FrameKind::Trade,
            source: "venues.md §4.3",
            bytes: BITGET_TRADE_DOC.as_bytes().to_vec(),
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// Value helpers shared by the generic parsers: the same checks the engine decoders make.

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A price string: a decimal above zero.
fn price(s: &str) -> Result<Price, Fail> {
    let p = Price::parse(s.as_bytes()).map_err(|_| Fail("price is not a decimal"))?;
    if p.0 <= 0 {
        return Err(Fail("price is not above zero"));
    }
    Ok(p)
}

/// A quantity string: a decimal at or above zero.
fn qty(s: &str) -> Result<Qty, Fail> {
    Qty::parse(s.as_bytes()).map_err(|_| Fail("quantity is not a decimal at or above zero"))
}

/// Decimal digits only, as a `u64`.
fn digits(s: &str) -> Result<u64, Fail> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(Fail("not a decimal integer string"));
    }
    s.parse().map_err(|_| Fail("integer out of range"))
}

fn i64_of(v: u64) -> Result<i64, Fail> {
    i64::try_from(v).map_err(|_| Fail("integer out of range"))
}

fn side_lower(s: &str) -> Result<bool, Fail> {
    match s {
        "buy" => Ok(false),
        "sell" => Ok(true),
        _ => Err(Fail("side is not buy or sell")),
    }
}

fn push_level(out: &mut Vec<Level>, p: &str, q: &str) -> Result<(), Fail> {
    if out.len() >= PARSER_LEVELS_MAX {
        return Err(Fail("too many levels"));
    }
    out.push(Level { price: price(p)?, qty: qty(q)? });
    Ok(())
}

fn push_trade(out: &mut Decoded, t: TradeRow) -> Result<(), Fail> {
    if out.trades.len() >= TRADES_MAX {
        return Err(Fail("too many trades"));
    }
    out.trades.push(t);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The parsers.

/// A way of decoding a venue frame into [`Decoded`].
pub trait FrameParser {
    /// Name for tables.
    fn name(&self) -> &'static str;
    /// Whether this parser reads `venue`'s frames of kind `kind`.
    fn supports(&self, venue: Venue, kind: FrameKind) -> bool {
        let _ = (venue, kind);
        true
    }
    /// Decodes `frame`, a `kind` frame of `venue`, into `out` (cleared first).
    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail>;
}

/// The engine's decoders (`engine::feed`), their borrowed result copied into [`Decoded`].
pub struct Engine {
    binance: BinanceDecoder,
    bybit: bybit::BybitDecoder,
    okx: okx::OkxDecoder,
    bitget: bitget::BitgetDecoder,
}

impl Engine {
    /// Decoders that accept the deepest frame of each venue.
    pub fn new() -> Engine {
        Engine {
            binance: BinanceDecoder::new(TimeUnit::Millisecond, binance::SNAPSHOT_LEVELS_PER_SIDE_MAX),
            bybit: bybit::BybitDecoder::new(bybit::BOOK_LEVELS_PER_SIDE_MAX, bybit::TRADES_PER_MESSAGE_MAX),
            okx: okx::OkxDecoder::new(okx::BOOKS_LEVELS_PER_SIDE_MAX, TRADES_MAX),
            bitget: bitget::BitgetDecoder::new(bitget::BOOKS_LEVELS_PER_SIDE_MAX, bitget::TRADES_PER_PUSH_MAX),
        }
    }
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::new()
    }
}

impl FrameParser for Engine {
    fn name(&self) -> &'static str {
        "engine (hand-rolled)"
    }

    fn supports(&self, venue: Venue, kind: FrameKind) -> bool {
        // Bitget's trade message has no push time (the outer `ts` of `Decoded`).
        venue != Venue::Bitget || kind != FrameKind::Trade
    }

    fn parse(&mut self, venue: Venue, _kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        out.clear();
        match venue {
            Venue::Binance => {
                let decoded = self.binance.decode(frame).map_err(|_| Fail("engine refused the frame"))?;
                match decoded.message {
                    binance::Message::Depth(d) => {
                        out.symbol_hash = fnv1a(d.symbol);
                        out.ts_ms = d.event_ms;
                        out.ids = [Some(i64_of(d.first_update_id)?), Some(i64_of(d.final_update_id)?)];
                        out.bids.extend_from_slice(d.bids);
                        out.asks.extend_from_slice(d.asks);
                    }
                    binance::Message::Snapshot(s) => {
                        out.ids = [Some(i64_of(s.last_update_id)?), None];
                        out.bids.extend_from_slice(s.bids);
                        out.asks.extend_from_slice(s.asks);
                    }
                    binance::Message::Trade(t) => {
                        out.symbol_hash = fnv1a(t.symbol);
                        out.ts_ms = t.event_ms;
                        let row = TradeRow {
                            id: t.trade_id,
                            ts_ms: t.trade_ms,
                            price: t.price,
                            qty: t.qty,
                            taker_sell: t.taker_sell(),
                            seq: None,
                        };
                        push_trade(out, row)?;
                    }
                    _ => return Err(Fail("not a book or trade frame")),
                }
            }
            Venue::Bybit => match self.bybit.decode(frame).map_err(|_| Fail("engine refused the frame"))? {
                bybit::Message::Book(b) => {
                    out.symbol_hash = fnv1a(b.symbol);
                    out.ts_ms = b.ts_ms;
                    out.ids = [Some(i64_of(b.update_id)?), b.seq.map(i64_of).transpose()?];
                    out.bids.extend_from_slice(b.bids);
                    out.asks.extend_from_slice(b.asks);
                }
                bybit::Message::Trades(ts) => {
                    out.ts_ms = ts.ts_ms;
                    for t in ts.iter() {
                        out.symbol_hash = fnv1a(t.symbol);
                        let row = TradeRow {
                            id: fnv1a(t.trade_id),
                            ts_ms: t.trade_ms,
                            price: t.price,
                            qty: t.qty,
                            taker_sell: t.taker_sell,
                            seq: t.seq.map(i64_of).transpose()?,
                        };
                        push_trade(out, row)?;
                    }
                }
                _ => return Err(Fail("not a book or trade frame")),
            },
            Venue::Okx => match self.okx.decode(frame).map_err(|_| Fail("engine refused the frame"))? {
                okx::Message::Book(b) => {
                    out.symbol_hash = fnv1a(b.inst_id);
                    out.ts_ms = b.ts_ms;
                    out.ids = [b.seq_id, b.prev_seq_id];
                    out.bids.extend(b.bids.iter().map(|l| Level { price: l.price, qty: l.qty }));
                    out.asks.extend(b.asks.iter().map(|l| Level { price: l.price, qty: l.qty }));
                }
                okx::Message::Trades { inst_id, trades, .. } => {
                    out.symbol_hash = fnv1a(inst_id);
                    for t in trades {
                        let row = TradeRow {
                            id: t.trade_id,
                            ts_ms: t.ts_ms,
                            price: t.price,
                            qty: t.qty,
                            taker_sell: t.taker_sell,
                            seq: t.seq_id,
                        };
                        push_trade(out, row)?;
                    }
                }
                _ => return Err(Fail("not a book or trade frame")),
            },
            Venue::Bitget => match self.bitget.decode(frame).map_err(|_| Fail("engine refused the frame"))? {
                bitget::Message::Book(b) => {
                    out.symbol_hash = fnv1a(b.inst_id);
                    out.ts_ms = b.push_ts_ms.unwrap_or(0);
                    out.ids = [Some(i64_of(b.seq)?), b.pseq];
                    out.bids.extend(b.bids.iter().map(|l| Level { price: l.price, qty: l.qty }));
                    out.asks.extend(b.asks.iter().map(|l| Level { price: l.price, qty: l.qty }));
                }
                _ => return Err(Fail("not a book frame")),
            },
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// simd-json's tape.

/// simd-json's tape (`fill_tape_padded`): the frame is copied into a reused padded buffer
/// (simd-json parses in place), the tape and `Buffers` are reused, and the tape is walked.
pub struct SimdTape {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
    tape: Option<simd_json::Tape<'static>>,
}

impl SimdTape {
    /// Buffers for frames up to `frame_len_max` bytes (they grow if a frame is longer).
    pub fn new(frame_len_max: usize) -> SimdTape {
        SimdTape {
            input: Vec::with_capacity(frame_len_max + simd_json::INPUT_PADDING),
            buffers: simd_json::Buffers::new(frame_len_max),
            tape: Some(simd_json::Tape::null().reset()),
        }
    }
}

type TapeValue<'t, 'i> = simd_json::tape::Value<'t, 'i>;

mod tape {
    //! Readers over simd-json tape values that fail with [`Fail`] instead of panicking.
    use simd_json::prelude::{ValueAsScalar, ValueIntoArray, ValueIntoObject, ValueIntoString};
    use simd_json::tape::{Array, Object};

    use super::{push_level, Fail, TapeValue};

    pub(super) fn obj<'t, 'i>(v: TapeValue<'t, 'i>) -> Result<Object<'t, 'i>, Fail> {
        v.into_object().ok_or(Fail("expected an object"))
    }

    pub(super) fn arr<'t, 'i>(v: TapeValue<'t, 'i>) -> Result<Array<'t, 'i>, Fail> {
        v.into_array().ok_or(Fail("expected an array"))
    }

    pub(super) fn str<'i>(v: TapeValue<'_, 'i>) -> Result<&'i str, Fail> {
        v.into_string().ok_or(Fail("expected a string"))
    }

    pub(super) fn u64(v: TapeValue<'_, '_>) -> Result<u64, Fail> {
        v.as_u64().ok_or(Fail("expected a non-negative integer"))
    }

    pub(super) fn i64(v: TapeValue<'_, '_>) -> Result<i64, Fail> {
        v.as_i64().ok_or(Fail("expected an integer"))
    }

    pub(super) fn bool(v: TapeValue<'_, '_>) -> Result<bool, Fail> {
        v.as_bool().ok_or(Fail("expected a boolean"))
    }

    /// `[[price, qty, ...], ...]` into `out`.
    pub(super) fn levels(v: TapeValue<'_, '_>, out: &mut Vec<rampart_engine::Level>) -> Result<(), Fail> {
        for row in arr(v)?.iter() {
            let cells = arr(row)?;
            let mut it = cells.iter();
            let (Some(p), Some(q)) = (it.next(), it.next()) else {
                return Err(Fail("a level is not [price, qty]"));
            };
            push_level(out, str(p)?, str(q)?)?;
        }
        Ok(())
    }

    /// The one object of a `data` array.
    pub(super) fn single<'t, 'i>(v: TapeValue<'t, 'i>) -> Result<Object<'t, 'i>, Fail> {
        let a = arr(v)?;
        if a.len() != 1 {
            return Err(Fail("data does not hold exactly one object"));
        }
        a.iter().next().ok_or(Fail("data is empty")).and_then(obj)
    }
}

impl FrameParser for SimdTape {
    fn name(&self) -> &'static str {
        "simd-json (tape)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        out.clear();
        let SimdTape { input, buffers, tape } = self;
        input.clear();
        input.extend_from_slice(frame);
        input.resize(frame.len() + simd_json::INPUT_PADDING, 0);
        let mut t = tape.take().unwrap_or_else(simd_json::Tape::null).reset();
        let r = match simd_json::fill_tape_padded(input, frame.len(), buffers, &mut t) {
            Ok(()) => walk_tape(venue, kind, t.as_value(), out),
            Err(_) => Err(Fail("simd-json refused the frame")),
        };
        *tape = Some(t.reset());
        r
    }
}

fn walk_tape(venue: Venue, kind: FrameKind, root: TapeValue<'_, '_>, out: &mut Decoded) -> Result<(), Fail> {
    let top = tape::obj(root)?;
    match (venue, kind) {
        (Venue::Binance, FrameKind::BookSnapshot) => {
            for (k, v) in top.iter() {
                match k {
                    "lastUpdateId" => out.ids[0] = Some(i64_of(tape::u64(v)?)?),
                    "bids" => tape::levels(v, &mut out.bids)?,
                    "asks" => tape::levels(v, &mut out.asks)?,
                    _ => {}
                }
            }
        }
        (Venue::Binance, _) => {
            let data = tape::obj(top.get("data").ok_or(Fail("missing data"))?)?;
            let mut t = TradeRow { id: 0, ts_ms: 0, price: Price(0), qty: Qty(0), taker_sell: false, seq: None };
            for (k, v) in data.iter() {
                match k {
                    "s" => out.symbol_hash = fnv1a(tape::str(v)?.as_bytes()),
                    "E" => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "U" => out.ids[0] = Some(i64_of(tape::u64(v)?)?),
                    "u" => out.ids[1] = Some(i64_of(tape::u64(v)?)?),
                    "b" => tape::levels(v, &mut out.bids)?,
                    "a" => tape::levels(v, &mut out.asks)?,
                    "t" => t.id = tape::u64(v)?,
                    "T" => t.ts_ms = i64_of(tape::u64(v)?)?,
                    "p" => t.price = price(tape::str(v)?)?,
                    "q" => t.qty = qty(tape::str(v)?)?,
                    "m" => t.taker_sell = tape::bool(v)?,
                    _ => {}
                }
            }
            if kind == FrameKind::Trade {
                push_trade(out, t)?;
            }
        }
        (Venue::Bybit, FrameKind::Trade) => {
            for (k, v) in top.iter() {
                match k {
                    "ts" => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "data" => {
                        for item in tape::arr(v)?.iter() {
                            let mut t = TradeRow {
                                id: 0,
                                ts_ms: 0,
                                price: Price(0),
                                qty: Qty(0),
                                taker_sell: false,
                                seq: None,
                            };
                            for (k, v) in tape::obj(item)?.iter() {
                                match k {
                                    "s" => out.symbol_hash = fnv1a(tape::str(v)?.as_bytes()),
                                    "i" => t.id = fnv1a(tape::str(v)?.as_bytes()),
                                    "T" => t.ts_ms = i64_of(tape::u64(v)?)?,
                                    "p" => t.price = price(tape::str(v)?)?,
                                    "v" => t.qty = qty(tape::str(v)?)?,
                                    "S" => t.taker_sell = side_bybit(tape::str(v)?)?,
                                    "seq" => t.seq = Some(i64_of(tape::u64(v)?)?),
                                    _ => {}
                                }
                            }
                            push_trade(out, t)?;
                        }
                    }
                    _ => {}
                }
            }
        }
        (Venue::Bybit, _) => {
            for (k, v) in top.iter() {
                match k {
                    "ts" => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "type" => book_type_bybit(tape::str(v)?)?,
                    "data" => {
                        for (k, v) in tape::obj(v)?.iter() {
                            match k {
                                "s" => out.symbol_hash = fnv1a(tape::str(v)?.as_bytes()),
                                "u" => out.ids[0] = Some(i64_of(tape::u64(v)?)?),
                                "seq" => out.ids[1] = Some(i64_of(tape::u64(v)?)?),
                                "b" => tape::levels(v, &mut out.bids)?,
                                "a" => tape::levels(v, &mut out.asks)?,
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        (Venue::Okx | Venue::Bitget, _) => {
            for (k, v) in top.iter() {
                match k {
                    "arg" => {
                        let inst = tape::obj(v)?.get("instId").ok_or(Fail("missing instId"))?;
                        out.symbol_hash = fnv1a(tape::str(inst)?.as_bytes());
                    }
                    "ts" if venue == Venue::Bitget => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "data" if kind == FrameKind::Trade => {
                        for item in tape::arr(v)?.iter() {
                            let mut t = TradeRow {
                                id: 0,
                                ts_ms: 0,
                                price: Price(0),
                                qty: Qty(0),
                                taker_sell: false,
                                seq: None,
                            };
                            for (k, v) in tape::obj(item)?.iter() {
                                match k {
                                    "tradeId" => t.id = digits(tape::str(v)?)?,
                                    "ts" => t.ts_ms = i64_of(digits(tape::str(v)?)?)?,
                                    "px" | "price" => t.price = price(tape::str(v)?)?,
                                    "sz" | "size" => t.qty = qty(tape::str(v)?)?,
                                    "side" => t.taker_sell = side_lower(tape::str(v)?)?,
                                    "seqId" => t.seq = Some(tape::i64(v)?),
                                    _ => {}
                                }
                            }
                            push_trade(out, t)?;
                        }
                    }
                    "data" => {
                        for (k, v) in tape::single(v)?.iter() {
                            match k {
                                "ts" if venue == Venue::Okx => out.ts_ms = i64_of(digits(tape::str(v)?)?)?,
                                "seqId" | "seq" => out.ids[0] = Some(tape::i64(v)?),
                                "prevSeqId" | "pseq" => out.ids[1] = Some(tape::i64(v)?),
                                "bids" => tape::levels(v, &mut out.bids)?,
                                "asks" => tape::levels(v, &mut out.asks)?,
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

fn side_bybit(s: &str) -> Result<bool, Fail> {
    match s {
        "Buy" => Ok(false),
        "Sell" => Ok(true),
        _ => Err(Fail("side is not Buy or Sell")),
    }
}

fn book_type_bybit(s: &str) -> Result<(), Fail> {
    match s {
        "snapshot" | "delta" => Ok(()),
        _ => Err(Fail("type is not snapshot or delta")),
    }
}

// ---------------------------------------------------------------------------------------------
// serde: borrowed structs shared by serde_json, sonic-rs and simd-json's serde front.

/// `[price, qty, ...]` with the two strings borrowed; further cells are skipped.
struct RawLevel<'a> {
    price: &'a str,
    qty: &'a str,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawLevel<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawLevel<'a>, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawLevel<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a level [price, qty, ...]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawLevel<'a>, A::Error> {
                let price: &'a str = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let qty: &'a str = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(RawLevel { price, qty })
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

fn serde_levels(rows: &[RawLevel<'_>], out: &mut Vec<Level>) -> Result<(), Fail> {
    rows.iter().try_for_each(|l| push_level(out, l.price, l.qty))
}

#[derive(serde::Deserialize)]
struct BnCombined<T> {
    data: T,
}

#[derive(serde::Deserialize)]
struct BnDepth<'a> {
    s: &'a str,
    #[serde(rename = "E")]
    event_ms: u64,
    #[serde(rename = "U")]
    first: u64,
    #[serde(rename = "u")]
    last: u64,
    #[serde(borrow)]
    b: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    a: Vec<RawLevel<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BnSnapshot<'a> {
    last_update_id: u64,
    #[serde(borrow)]
    bids: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    asks: Vec<RawLevel<'a>>,
}

#[derive(serde::Deserialize)]
struct BnTrade<'a> {
    s: &'a str,
    #[serde(rename = "E")]
    event_ms: u64,
    t: u64,
    p: &'a str,
    q: &'a str,
    #[serde(rename = "T")]
    trade_ms: u64,
    m: bool,
}

#[derive(serde::Deserialize)]
struct ByBook<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    ts: u64,
    #[serde(borrow)]
    data: ByBookData<'a>,
}

#[derive(serde::Deserialize)]
struct ByBookData<'a> {
    s: &'a str,
    u: u64,
    seq: Option<u64>,
    #[serde(borrow)]
    b: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    a: Vec<RawLevel<'a>>,
}

#[derive(serde::Deserialize)]
struct ByTrades<'a> {
    ts: u64,
    #[serde(borrow)]
    data: Vec<ByTrade<'a>>,
}

#[derive(serde::Deserialize)]
struct ByTrade<'a> {
    #[serde(rename = "T")]
    trade_ms: u64,
    s: &'a str,
    #[serde(rename = "S")]
    side: &'a str,
    v: &'a str,
    p: &'a str,
    i: &'a str,
    seq: Option<u64>,
}

#[derive(serde::Deserialize)]
struct Arg<'a> {
    #[serde(rename = "instId")]
    inst_id: &'a str,
}

/// OKX and Bitget book pushes (the field names differ only for the sequence ids).
#[derive(serde::Deserialize)]
struct BookPush<'a> {
    #[serde(borrow)]
    arg: Arg<'a>,
    /// Bitget's outer push time (OKX has none).
    ts: Option<u64>,
    #[serde(borrow)]
    data: [BookData<'a>; 1],
}

#[derive(serde::Deserialize)]
struct BookData<'a> {
    #[serde(borrow)]
    asks: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    bids: Vec<RawLevel<'a>>,
    ts: &'a str,
    #[serde(rename = "seqId", alias = "seq")]
    seq: Option<i64>,
    #[serde(rename = "prevSeqId", alias = "pseq")]
    prev: Option<i64>,
}

/// OKX and Bitget trade pushes.
#[derive(serde::Deserialize)]
struct TradePush<'a> {
    #[serde(borrow)]
    arg: Arg<'a>,
    ts: Option<u64>,
    #[serde(borrow)]
    data: Vec<PushTrade<'a>>,
}

#[derive(serde::Deserialize)]
struct PushTrade<'a> {
    #[serde(rename = "tradeId")]
    trade_id: &'a str,
    #[serde(alias = "price")]
    px: &'a str,
    #[serde(alias = "size")]
    sz: &'a str,
    side: &'a str,
    ts: &'a str,
    #[serde(rename = "seqId")]
    seq: Option<i64>,
}

/// A serde entry point: deserializes `T`, borrowing from `frame` or from the backend's buffer.
trait SerdeFront {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail>;
}

fn serde_parse<B: SerdeFront>(
    b: &mut B,
    venue: Venue,
    kind: FrameKind,
    frame: &[u8],
    out: &mut Decoded,
) -> Result<(), Fail> {
    out.clear();
    match (venue, kind) {
        (Venue::Binance, FrameKind::BookDiff) => {
            let m: BnCombined<BnDepth<'_>> = b.deserialize(frame)?;
            let d = m.data;
            out.symbol_hash = fnv1a(d.s.as_bytes());
            out.ts_ms = i64_of(d.event_ms)?;
            out.ids = [Some(i64_of(d.first)?), Some(i64_of(d.last)?)];
            serde_levels(&d.b, &mut out.bids)?;
            serde_levels(&d.a, &mut out.asks)?;
        }
        (Venue::Binance, FrameKind::BookSnapshot) => {
            let s: BnSnapshot<'_> = b.deserialize(frame)?;
            out.ids = [Some(i64_of(s.last_update_id)?), None];
            serde_levels(&s.bids, &mut out.bids)?;
            serde_levels(&s.asks, &mut out.asks)?;
        }
        (Venue::Binance, FrameKind::Trade) => {
            let m: BnCombined<BnTrade<'_>> = b.deserialize(frame)?;
            let t = m.data;
            out.symbol_hash = fnv1a(t.s.as_bytes());
            out.ts_ms = i64_of(t.event_ms)?;
            let row = TradeRow {
                id: t.t,
                ts_ms: i64_of(t.trade_ms)?,
                price: price(t.p)?,
                qty: qty(t.q)?,
                taker_sell: t.m,
                seq: None,
            };
            push_trade(out, row)?;
        }
        (Venue::Bybit, FrameKind::Trade) => {
            let m: ByTrades<'_> = b.deserialize(frame)?;
            out.ts_ms = i64_of(m.ts)?;
            for t in &m.data {
                out.symbol_hash = fnv1a(t.s.as_bytes());
                let row = TradeRow {
                    id: fnv1a(t.i.as_bytes()),
                    ts_ms: i64_of(t.trade_ms)?,
                    price: price(t.p)?,
                    qty: qty(t.v)?,
                    taker_sell: side_bybit(t.side)?,
                    seq: t.seq.map(i64_of).transpose()?,
                };
                push_trade(out, row)?;
            }
        }
        (Venue::Bybit, _) => {
            let m: ByBook<'_> = b.deserialize(frame)?;
            book_type_bybit(m.kind)?;
            out.symbol_hash = fnv1a(m.data.s.as_bytes());
            out.ts_ms = i64_of(m.ts)?;
            out.ids = [Some(i64_of(m.data.u)?), m.data.seq.map(i64_of).transpose()?];
            serde_levels(&m.data.b, &mut out.bids)?;
            serde_levels(&m.data.a, &mut out.asks)?;
        }
        (Venue::Okx | Venue::Bitget, FrameKind::Trade) => {
            let m: TradePush<'_> = b.deserialize(frame)?;
            out.symbol_hash = fnv1a(m.arg.inst_id.as_bytes());
            if venue == Venue::Bitget {
                out.ts_ms = i64_of(m.ts.ok_or(Fail("missing ts"))?)?;
            }
            for t in &m.data {
                let row = TradeRow {
                    id: digits(t.trade_id)?,
                    ts_ms: i64_of(digits(t.ts)?)?,
                    price: price(t.px)?,
                    qty: qty(t.sz)?,
                    taker_sell: side_lower(t.side)?,
                    seq: t.seq,
                };
                push_trade(out, row)?;
            }
        }
        (Venue::Okx | Venue::Bitget, _) => {
            let m: BookPush<'_> = b.deserialize(frame)?;
            let [d] = &m.data;
            out.symbol_hash = fnv1a(m.arg.inst_id.as_bytes());
            out.ts_ms =
                if venue == Venue::Bitget { i64_of(m.ts.ok_or(Fail("missing ts"))?)? } else { i64_of(digits(d.ts)?)? };
            out.ids = [d.seq, d.prev];
            serde_levels(&d.bids, &mut out.bids)?;
            serde_levels(&d.asks, &mut out.asks)?;
        }
    }
    Ok(())
}

/// serde_json (`from_slice`) into borrowed structs (`&str` fields, `Vec` level arrays): the
/// reference.
#[derive(Default)]
pub struct SerdeJson;

impl SerdeFront for SerdeJson {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail> {
        serde_json::from_slice(frame).map_err(|_| Fail("serde_json refused the frame"))
    }
}

impl FrameParser for SerdeJson {
    fn name(&self) -> &'static str {
        "serde_json (borrowed structs)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        serde_parse(self, venue, kind, frame, out)
    }
}

/// sonic-rs (`from_slice`) into the same borrowed structs.
#[derive(Default)]
pub struct SonicSerde;

impl SerdeFront for SonicSerde {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail> {
        sonic_rs::from_slice(frame).map_err(|_| Fail("sonic-rs refused the frame"))
    }
}

impl FrameParser for SonicSerde {
    fn name(&self) -> &'static str {
        "sonic-rs (borrowed structs)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        serde_parse(self, venue, kind, frame, out)
    }
}

/// simd-json's serde front (`from_slice_with_buffers`) into the same borrowed structs, the frame
/// copied into a reused buffer and simd-json's `Buffers` reused.
pub struct SimdSerde {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
}

impl SimdSerde {
    /// Buffers for frames up to `frame_len_max` bytes (they grow if a frame is longer).
    pub fn new(frame_len_max: usize) -> SimdSerde {
        SimdSerde { input: Vec::with_capacity(frame_len_max), buffers: simd_json::Buffers::new(frame_len_max) }
    }
}

impl SerdeFront for SimdSerde {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail> {
        self.input.clear();
        self.input.extend_from_slice(frame);
        simd_json::serde::from_slice_with_buffers(&mut self.input, &mut self.buffers)
            .map_err(|_| Fail("simd-json refused the frame"))
    }
}

impl FrameParser for SimdSerde {
    fn name(&self) -> &'static str {
        "simd-json (borrowed structs)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        serde_parse(self, venue, kind, frame, out)
    }
}

// ---------------------------------------------------------------------------------------------
// sonic-rs lazy iteration.

/// sonic-rs's lazy iterators (`to_object_iter`, `LazyValue::into_array_iter`, ...): no structs,
/// no level `Vec`s; the frame is walked once, key by key.
#[derive(Default)]
pub struct SonicLazy;

mod lazy {
    //! Readers over sonic-rs lazy values that fail with [`Fail`] instead of panicking.
    use sonic_rs::{JsonValueTrait, LazyValue};

    use super::{push_level, Fail};

    pub(super) fn str<'v>(v: &'v LazyValue<'_>) -> Result<&'v str, Fail> {
        v.as_str().ok_or(Fail("expected a string"))
    }

    pub(super) fn u64(v: &LazyValue<'_>) -> Result<u64, Fail> {
        v.as_u64().ok_or(Fail("expected a non-negative integer"))
    }

    pub(super) fn i64(v: &LazyValue<'_>) -> Result<i64, Fail> {
        v.as_i64().ok_or(Fail("expected an integer"))
    }

    pub(super) fn bool(v: &LazyValue<'_>) -> Result<bool, Fail> {
        v.as_bool().ok_or(Fail("expected a boolean"))
    }

    pub(super) fn object<'a>(v: LazyValue<'a>) -> Result<sonic_rs::ObjectJsonIter<'a>, Fail> {
        v.into_object_iter().ok_or(Fail("expected an object"))
    }

    pub(super) fn array<'a>(v: LazyValue<'a>) -> Result<sonic_rs::ArrayJsonIter<'a>, Fail> {
        v.into_array_iter().ok_or(Fail("expected an array"))
    }

    /// `[[price, qty, ...], ...]` into `out`.
    pub(super) fn levels(v: LazyValue<'_>, out: &mut Vec<rampart_engine::Level>) -> Result<(), Fail> {
        for row in array(v)? {
            let mut cells = array(row.map_err(|_| Fail("bad level row"))?)?;
            let (Some(Ok(p)), Some(Ok(q))) = (cells.next(), cells.next()) else {
                return Err(Fail("a level is not [price, qty]"));
            };
            push_level(out, str(&p)?, str(&q)?)?;
            for rest in cells {
                rest.map_err(|_| Fail("bad level cell"))?;
            }
        }
        Ok(())
    }
}

fn lazy_entry<'a, K>(e: sonic_rs::Result<(K, sonic_rs::LazyValue<'a>)>) -> Result<(K, sonic_rs::LazyValue<'a>), Fail> {
    e.map_err(|_| Fail("sonic-rs refused the frame"))
}

impl FrameParser for SonicLazy {
    fn name(&self) -> &'static str {
        "sonic-rs (lazy iterators)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        out.clear();
        match (venue, kind) {
            (Venue::Binance, FrameKind::BookSnapshot) => {
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    match &*k {
                        "lastUpdateId" => out.ids[0] = Some(i64_of(lazy::u64(&v)?)?),
                        "bids" => lazy::levels(v, &mut out.bids)?,
                        "asks" => lazy::levels(v, &mut out.asks)?,
                        _ => {}
                    }
                }
            }
            (Venue::Binance, _) => {
                let mut t = TradeRow { id: 0, ts_ms: 0, price: Price(0), qty: Qty(0), taker_sell: false, seq: None };
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    if &*k != "data" {
                        continue;
                    }
                    for e in lazy::object(v)? {
                        let (k, v) = lazy_entry(e)?;
                        match &*k {
                            "s" => out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes()),
                            "E" => out.ts_ms = i64_of(lazy::u64(&v)?)?,
                            "U" => out.ids[0] = Some(i64_of(lazy::u64(&v)?)?),
                            "u" => out.ids[1] = Some(i64_of(lazy::u64(&v)?)?),
                            "b" => lazy::levels(v, &mut out.bids)?,
                            "a" => lazy::levels(v, &mut out.asks)?,
                            "t" => t.id = lazy::u64(&v)?,
                            "T" => t.ts_ms = i64_of(lazy::u64(&v)?)?,
                            "p" => t.price = price(lazy::str(&v)?)?,
                            "q" => t.qty = qty(lazy::str(&v)?)?,
                            "m" => t.taker_sell = lazy::bool(&v)?,
                            _ => {}
                        }
                    }
                }
                if kind == FrameKind::Trade {
                    push_trade(out, t)?;
                }
            }
            (Venue::Bybit, _) => {
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    match &*k {
                        "ts" => out.ts_ms = i64_of(lazy::u64(&v)?)?,
                        "type" if kind != FrameKind::Trade => book_type_bybit(lazy::str(&v)?)?,
                        "data" if kind == FrameKind::Trade => {
                            for item in lazy::array(v)? {
                                let item = item.map_err(|_| Fail("bad trade"))?;
                                let mut t = TradeRow {
                                    id: 0,
                                    ts_ms: 0,
                                    price: Price(0),
                                    qty: Qty(0),
                                    taker_sell: false,
                                    seq: None,
                                };
                                for e in lazy::object(item)? {
                                    let (k, v) = lazy_entry(e)?;
                                    match &*k {
                                        "s" => out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes()),
                                        "i" => t.id = fnv1a(lazy::str(&v)?.as_bytes()),
                                        "T" => t.ts_ms = i64_of(lazy::u64(&v)?)?,
                                        "p" => t.price = price(lazy::str(&v)?)?,
                                        "v" => t.qty = qty(lazy::str(&v)?)?,
                                        "S" => t.taker_sell = side_bybit(lazy::str(&v)?)?,
                                        "seq" => t.seq = Some(i64_of(lazy::u64(&v)?)?),
                                        _ => {}
                                    }
                                }
                                push_trade(out, t)?;
                            }
                        }
                        "data" => {
                            for e in lazy::object(v)? {
                                let (k, v) = lazy_entry(e)?;
                                match &*k {
                                    "s" => out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes()),
                                    "u" => out.ids[0] = Some(i64_of(lazy::u64(&v)?)?),
                                    "seq" => out.ids[1] = Some(i64_of(lazy::u64(&v)?)?),
                                    "b" => lazy::levels(v, &mut out.bids)?,
                                    "a" => lazy::levels(v, &mut out.asks)?,
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            (Venue::Okx | Venue::Bitget, _) => {
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    match &*k {
                        "arg" => {
                            for e in lazy::object(v)? {
                                let (k, v) = lazy_entry(e)?;
                                if &*k == "instId" {
                                    out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes());
                                }
                            }
                        }
                        "ts" if venue == Venue::Bitget => out.ts_ms = i64_of(lazy::u64(&v)?)?,
                        "data" if kind == FrameKind::Trade => {
                            for item in lazy::array(v)? {
                                let item = item.map_err(|_| Fail("bad trade"))?;
                                let mut t = TradeRow {
                                    id: 0,
                                    ts_ms: 0,
                                    price: Price(0),
                                    qty: Qty(0),
                                    taker_sell: false,
                                    seq: None,
                                };
                                for e in lazy::object(item)? {
                                    let (k, v) = lazy_entry(e)?;
                                    match &*k {
                                        "tradeId" => t.id = digits(lazy::str(&v)?)?,
                                        "ts" => t.ts_ms = i64_of(digits(lazy::str(&v)?)?)?,
                                        "px" | "price" => t.price = price(lazy::str(&v)?)?,
                                        "sz" | "size" => t.qty = qty(lazy::str(&v)?)?,
                                        "side" => t.taker_sell = side_lower(lazy::str(&v)?)?,
                                        "seqId" => t.seq = Some(lazy::i64(&v)?),
                                        _ => {}
                                    }
                                }
                                push_trade(out, t)?;
                            }
                        }
                        "data" => {
                            let mut items = lazy::array(v)?;
                            let book = match (items.next(), items.next()) {
                                (Some(Ok(book)), None) => book,
                                _ => return Err(Fail("data does not hold exactly one object")),
                            };
                            for e in lazy::object(book)? {
                                let (k, v) = lazy_entry(e)?;
                                match &*k {
                                    "ts" if venue == Venue::Okx => out.ts_ms = i64_of(digits(lazy::str(&v)?)?)?,
                                    "seqId" | "seq" => out.ids[0] = Some(lazy::i64(&v)?),
                                    "prevSeqId" | "pseq" => out.ids[1] = Some(lazy::i64(&v)?),
                                    "bids" => lazy::levels(v, &mut out.bids)?,
                                    "asks" => lazy::levels(v, &mut out.asks)?,
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Verification and measurement.

/// Every parser measured, in table order.
pub fn all_parsers() -> Vec<Box<dyn FrameParser>> {
    let frame_len_max = 64 * 1024;
    vec![
        Box::new(Engine::new()),
        Box::new(SimdTape::new(frame_len_max)),
        Box::new(SimdSerde::new(frame_len_max)),
        Box::new(SonicLazy),
        Box::new(SonicSerde),
        Box::new(SerdeJson),
    ]
}

/// Decodes every case with every parser that reads its venue and checks that all results are
/// equal (the first parser's, the engine's where it reads the venue, is the reference and must not
/// be empty). Returns the number of (case, parser) pairs checked, or what differed.
pub fn verify() -> Result<usize, String> {
    let mut parsers = all_parsers();
    let mut reference = Decoded::new();
    let mut got = Decoded::new();
    let mut checked = 0;
    for case in cases() {
        let label = format!("{} {} ({})", case.venue.as_str(), case.kind.as_str(), case.source);
        let mut have_reference = false;
        for p in parsers.iter_mut().filter(|p| p.supports(case.venue, case.kind)) {
            p.parse(case.venue, case.kind, &case.bytes, &mut got)
                .map_err(|e| format!("{label}: {}: {e:?}", p.name()))?;
            if !have_reference {
                let empty = match case.kind {
                    FrameKind::Trade => got.trades.is_empty(),
                    _ => got.bids.is_empty() && got.asks.is_empty(),
                };
                if empty || got.ts_ms == 0 && got.ids[0].is_none() && got.symbol_hash == 0 {
                    return Err(format!("{label}: {} decoded nothing: {got:?}", p.name()));
                }
                std::mem::swap(&mut reference, &mut got);
                have_reference = true;
            } else if got != reference {
                return Err(format!("{label}: {} differs:\n  got       {got:?}\n  reference {reference:?}", p.name()));
            }
            checked += 1;
        }
    }
    Ok(checked)
}

/// One (frame, parser) measurement.
#[derive(Clone, Debug)]
pub struct ParserRow {
    /// Venue.
    pub venue: Venue,
    /// Frame kind.
    pub kind: FrameKind,
    /// Where the frame comes from.
    pub source: &'static str,
    /// Frame size, bytes.
    pub bytes: usize,
    /// Parser name.
    pub parser: &'static str,
    /// Per-frame latency.
    pub summary: Summary,
    /// Allocations per frame in the steady state, when the counting allocator is installed.
    pub allocs_per_frame: Option<f64>,
}

/// How many times a frame of `len` bytes is decoded when small frames are decoded `frames`
/// times: fewer for frames above 512 bytes (in proportion), but at least `frames / 40` (and at
/// least 10).
pub fn frames_for(frames: usize, len: usize) -> usize {
    let frames = frames.max(1);
    let scaled = frames.saturating_mul(512) / len.max(512);
    scaled.clamp((frames / 40).max(frames.min(10)), frames)
}

/// Verifies the parsers ([`verify`]), then decodes each frame [`frames_for`]`(frames, len)` times
/// with each parser, timing every decode (including ~20 ns of clock reads) and counting
/// allocations over up to 1 000 decodes after a warm-up. Also times an empty operation (parser
/// "clock only") `frames` times.
pub fn parsers(frames: usize) -> Result<Vec<ParserRow>, String> {
    verify()?;
    let frames = frames.max(1);
    let mut parsers = all_parsers();
    let mut out = Decoded::new();
    let mut rows = Vec::new();
    let mut clock = histogram();
    for _ in 0..frames {
        let t0 = Instant::now();
        std::hint::black_box(&mut out);
        let _ = clock.record(t0.elapsed().as_nanos() as u64);
    }
    for case in cases() {
        let frames = frames_for(frames, case.bytes.len());
        for p in parsers.iter_mut().filter(|p| p.supports(case.venue, case.kind)) {
            let (venue, kind, bytes) = (case.venue, case.kind, case.bytes.as_slice());
            let mut failed = 0u64;
            for _ in 0..(frames / 10).clamp(10, 10_000) {
                failed += u64::from(p.parse(venue, kind, bytes, &mut out).is_err());
            }
            let counted = frames.min(1_000);
            let ((), allocs) = alloc::count(|| {
                for _ in 0..counted {
                    failed += u64::from(p.parse(venue, kind, std::hint::black_box(bytes), &mut out).is_err());
                }
            });
            let mut h = histogram();
            let started = Instant::now();
            for _ in 0..frames {
                let t0 = Instant::now();
                let r = p.parse(venue, kind, std::hint::black_box(bytes), &mut out);
                std::hint::black_box(&out);
                let _ = h.record(t0.elapsed().as_nanos() as u64);
                failed += u64::from(r.is_err());
            }
            let rate = frames as f64 / started.elapsed().as_secs_f64().max(1e-9);
            if failed > 0 {
                return Err(format!("{} failed {failed} times on {} {}", p.name(), venue.as_str(), case.source));
            }
            let name =
                format!("{} {} ({}, {} B) [{}]", venue.as_str(), kind.as_str(), case.source, bytes.len(), p.name());
            rows.push(ParserRow {
                venue,
                kind,
                source: case.source,
                bytes: bytes.len(),
                parser: p.name(),
                summary: Summary::from_hist(&name, &h, Some(rate)),
                allocs_per_frame: allocs.map(|n| n as f64 / counted as f64),
            });
        }
    }
    rows.push(ParserRow {
        venue: Venue::Binance,
        kind: FrameKind::Trade,
        source: "-",
        bytes: 0,
        parser: "clock only",
        summary: Summary::from_hist("clock only (two Instant reads, no work)", &clock, None),
        allocs_per_frame: None,
    });
    Ok(rows)
}

/// Which SIMD code the two SIMD parsers run in this build on this machine: simd-json picks its
/// stage-1 implementation at run time; sonic-rs picks its code at compile time (AVX2 only when the
/// build targets it, e.g. `-C target-cpu=native`).
pub fn simd_notes() -> String {
    format!(
        "simd-json implementation: {:?}; sonic-rs built for AVX2 and PCLMULQDQ: {}",
        simd_json::Deserializer::algorithm(),
        cfg!(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "pclmulqdq"))
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The Markdown table of medians over `runs` (each the rows of one [`parsers`] call, in the same
/// order): per frame and parser, the median p50, p99 and p99.9, allocations per frame, and the
/// median p50 against the engine's on the same frame.
pub fn parsers_table(runs: &[Vec<ParserRow>]) -> String {
    let Some(first) = runs.first() else {
        return String::new();
    };
    let mut s = String::from(
        "| venue | frame | source | bytes | parser | p50 ns | p99 ns | p99.9 ns | allocs/frame | p50 / engine p50 |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let med = |i: usize, f: &dyn Fn(&ParserRow) -> f64| median(runs.iter().filter_map(|r| r.get(i)).map(f).collect());
    let mut engine_p50 = None;
    for (i, row) in first.iter().enumerate() {
        let p50 = med(i, &|r| r.summary.p50_ns as f64);
        if row.parser.starts_with("engine") {
            engine_p50 = Some(p50);
        } else if i > 0 && first[i - 1].source != row.source {
            engine_p50 = None;
        }
        let allocs = row.allocs_per_frame.map_or_else(
            || "-".to_owned(),
            |_| {
                let a = med(i, &|r| r.allocs_per_frame.unwrap_or(0.0));
                if a.fract() == 0.0 {
                    format!("{a:.0}")
                } else {
                    format!("{a:.2}")
                }
            },
        );
        let ratio = engine_p50.filter(|e| *e > 0.0).map_or_else(|| "-".to_owned(), |e| format!("{:.2}", p50 / e));
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} |\n",
            row.venue.as_str(),
            row.kind.as_str(),
            row.source,
            row.bytes,
            row.parser,
            p50,
            med(i, &|r| r.summary.p99_ns as f64),
            med(i, &|r| r.summary.p999_ns as f64),
            allocs,
            ratio
        ));
    }
    s
}
