//! Bybit v5 spot: a decoder for public WebSocket messages and the snapshot-plus-delta book sync
//! of venues.md §2.2.
//!
//! Decoding: [`BybitDecoder::decode`] takes the bytes of one text message of
//! `wss://stream.bybit.com/v5/public/spot` and returns a [`Message`]: an `orderbook.{depth}.{SYMBOL}`
//! snapshot or delta ([`BookUpdate`]), a `publicTrade.{SYMBOL}` batch ([`Trades`]), an `op`
//! reply (subscribe ack, pong), or [`Message::Other`] for a well-formed message of a kind this
//! decoder does not read (`kline.*`, `tickers.*`, ...). Prices and sizes arrive as JSON strings
//! and are parsed once into [`Price`] and [`Qty`]. Levels and trades go into buffers owned by
//! the decoder and sized at construction; the returned message borrows them and the input, so
//! decoding allocates nothing. Key order does not matter (spot sends `ts` before `type`,
//! venues.md §6 item 12); unknown keys are skipped whatever their value.
//!
//! Syncing: [`BybitBookSync`] drives a [`Book`] from decoded book messages. Bybit sends its own
//! snapshot on the socket, so the machine never asks for a REST fetch: when the stream breaks
//! (a gap in `u`, a crossed book) it clears the book and says so in its [`SyncOutcome`]
//! ([`SyncOutcome::wants_resubscribe`]); the caller unsubscribes and resubscribes the topic (or
//! reconnects) to get a fresh snapshot.
//!
//! Choices where venues.md is silent or unconfirmed, and why:
//! - `cts` and `seq` (book) and `seq`, `BT`, `RPI` (trades) are read when present and tolerated
//!   when absent. Rationale: the sync needs only `u`; refusing a whole book message over a
//!   timestamp the sync does not use would turn a venue change into a gap.
//! - A `u = 1` message resets the book whatever its `type` (venues.md §2.2: "snapshot data after
//!   a service restart"), and is counted in [`SyncCounters::reset_count`].
//! - A snapshot always replaces the book, even with the same or an older `u` than the book
//!   (depth 1 re-sends the same `u` every 3 s; "any new snapshot replaces the local book").
//! - Pong shapes differ per product (venues.md §2.1); every `op` reply decodes to [`OpReply`],
//!   and [`OpReply::is_pong`] accepts both the spot (`"op":"ping","ret_msg":"pong"`) and the
//!   option (`"op":"pong"`) shapes.
//! - An unknown `type` on a book message, or an `S` other than `Buy`/`Sell`, is refused as
//!   [`DecodeError::WrongType`] (the shared error enum has no "unknown value" variant).
//! - The trade id `i` is documented as a string and is required to be one (raw, opaque).

use super::{
    level, object_start, parse_levels, plain_str, price, qty, read_levels, read_nested, read_objects, str_raw, uint,
    walk_keyed, Cursor, DecodeBuffers, DecodeError, Deferred, JsonError, JsonErrorKind, KeyHints, KeySet, Nested, Span,
};
use crate::book::{Book, Level, Side};
use crate::fixed::{Price, Qty};
use crate::instrument::BookId;
use crate::market::{Tick, TickKind};

/// Most trades one `publicTrade` message may hold (venues.md §2.3); a decoder built with this
/// `trades_max` accepts every trade message.
pub const TRADES_PER_MESSAGE_MAX: usize = 1024;

/// Deepest spot book topic (`orderbook.1000.{symbol}`); a decoder built with this `levels_max`
/// accepts every snapshot of every spot depth.
pub const BOOK_LEVELS_PER_SIDE_MAX: usize = 1000;

/// The `type` of a book message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BookKind {
    /// `"snapshot"`: the full book at the subscribed depth; replaces the local book.
    Snapshot,
    /// `"delta"`: only the changed levels.
    Delta,
}

/// An `orderbook.{depth}.{symbol}` message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BookUpdate<'a> {
    /// `topic`, e.g. `orderbook.50.BTCUSDT`, borrowed from the message.
    pub topic: &'a [u8],
    /// The depth part of the topic (`1`, `50`, `200`, `1000`), or `None` when it is not a
    /// number (e.g. `orderbook.full.*`).
    pub depth: Option<u32>,
    /// `type`.
    pub kind: BookKind,
    /// `ts`, system generation time in Unix milliseconds.
    pub ts_ms: i64,
    /// `cts`, matching-engine time in Unix milliseconds, when sent.
    pub cts_ms: Option<i64>,
    /// `data.s`, the symbol as sent.
    pub symbol: &'a [u8],
    /// `data.u`, the update id; `1` means the venue reset the book.
    pub update_id: u64,
    /// `data.seq`, the cross sequence (monotonic, not consecutive), when sent.
    pub seq: Option<u64>,
    /// `data.b`, bid levels in message order; a zero quantity removes the level.
    pub bids: &'a [Level],
    /// `data.a`, ask levels in message order; a zero quantity removes the level.
    pub asks: &'a [Level],
}

impl BookUpdate<'_> {
    /// True when this message replaces the book: a `snapshot`, or any message with `u = 1`.
    pub fn replaces_book(&self) -> bool {
        self.kind == BookKind::Snapshot || self.update_id == 1
    }
}

/// One fill of a `publicTrade` message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Trade<'a> {
    /// `s`, the symbol as sent.
    pub symbol: &'a [u8],
    /// `i`, the trade id, raw and opaque.
    pub trade_id: &'a [u8],
    /// `T`, fill time in Unix milliseconds.
    pub trade_ms: i64,
    /// `p`, price.
    pub price: Price,
    /// `v`, size.
    pub qty: Qty,
    /// `S`, true when the taker sold (`"Sell"`), false for `"Buy"`.
    pub taker_sell: bool,
    /// `BT`, block trade (false when absent).
    pub block_trade: bool,
    /// `RPI`, RPI trade (false when absent).
    pub rpi: bool,
    /// `seq`, the cross sequence, when sent.
    pub seq: Option<u64>,
}

impl Trade<'_> {
    /// The trade as a market tick for `book`, stamped with the fill time.
    pub fn tick(&self, book: BookId) -> Tick {
        Tick {
            book,
            ts_ms: self.trade_ms,
            kind: TickKind::Trade { price: self.price, qty: self.qty, taker_sell: self.taker_sell },
        }
    }
}

/// A decoded trade, with its strings as spans of the message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct RawTrade {
    symbol: Span,
    trade_id: Span,
    trade_ms: i64,
    price: Price,
    qty: Qty,
    taker_sell: bool,
    block_trade: bool,
    rpi: bool,
    seq: Option<u64>,
}

/// A `publicTrade.{symbol}` message: trades in match-time order, as sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Trades<'a> {
    /// `topic`, e.g. `publicTrade.BTCUSDT`.
    pub topic: &'a [u8],
    /// `ts`, system generation time in Unix milliseconds.
    pub ts_ms: i64,
    frame: &'a [u8],
    raw: &'a [RawTrade],
}

impl<'a> Trades<'a> {
    /// Number of trades in the message.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// True when the message holds no trade.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The trade at `index`.
    pub fn get(&self, index: usize) -> Option<Trade<'a>> {
        self.raw.get(index).map(|r| self.trade(r))
    }

    /// The trades in message order.
    pub fn iter(&self) -> impl Iterator<Item = Trade<'a>> + 'a {
        let frame = self.frame;
        self.raw.iter().map(move |r| expand(frame, r))
    }

    fn trade(&self, r: &RawTrade) -> Trade<'a> {
        expand(self.frame, r)
    }
}

fn expand<'a>(frame: &'a [u8], r: &RawTrade) -> Trade<'a> {
    Trade {
        symbol: r.symbol.of(frame),
        trade_id: r.trade_id.of(frame),
        trade_ms: r.trade_ms,
        price: r.price,
        qty: r.qty,
        taker_sell: r.taker_sell,
        block_trade: r.block_trade,
        rpi: r.rpi,
        seq: r.seq,
    }
}

/// A reply to an `op` request (subscribe ack, pong, error), or any other object with an `op`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OpReply<'a> {
    /// `op`: `subscribe`, `unsubscribe`, `ping` (spot pong), `pong` (option pong), ...
    pub op: &'a [u8],
    /// `success`, when sent (the option pong has none).
    pub success: Option<bool>,
    /// `ret_msg`, raw string content (escapes not decoded), when sent.
    pub ret_msg: Option<&'a [u8]>,
    /// `conn_id`, raw, when sent.
    pub conn_id: Option<&'a [u8]>,
    /// `req_id` echoed back, raw, when sent.
    pub req_id: Option<&'a [u8]>,
}

impl OpReply<'_> {
    /// True for a pong in any of the documented shapes: spot and linear `"op":"ping"` with
    /// `"ret_msg":"pong"`, or option `"op":"pong"`. The client's own ping request (no
    /// `ret_msg`) is not a pong.
    pub fn is_pong(&self) -> bool {
        self.op == b"pong" || (self.op == b"ping" && self.ret_msg == Some(b"pong".as_slice()))
    }

    /// True when the venue refused the request (`"success":false`).
    pub fn is_failure(&self) -> bool {
        self.success == Some(false)
    }
}

/// One decoded message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Message<'a> {
    /// An `orderbook.*` snapshot or delta.
    Book(BookUpdate<'a>),
    /// A `publicTrade.*` batch.
    Trades(Trades<'a>),
    /// A reply to an `op` request.
    OpReply(OpReply<'a>),
    /// A well-formed object of a kind this decoder does not read; `topic` is its topic when it
    /// has one.
    Other {
        /// `topic`, raw.
        topic: Option<&'a [u8]>,
    },
}

/// Decodes Bybit v5 spot public messages into borrowed values, reusing its buffers.
#[derive(Clone, Debug)]
pub struct BybitDecoder {
    buffers: DecodeBuffers<Level, RawTrade>,
}

impl BybitDecoder {
    /// A decoder holding at most `levels_max` levels per side and `trades_max` trades.
    ///
    /// At a bound the message is refused with [`DecodeError::TooManyLevels`] (`"b"`, `"a"` or
    /// `"data"` for trades). Use [`BOOK_LEVELS_PER_SIDE_MAX`] and [`TRADES_PER_MESSAGE_MAX`] to
    /// accept everything the venue documents, or the subscribed depth.
    pub fn new(levels_max: usize, trades_max: usize) -> BybitDecoder {
        BybitDecoder { buffers: DecodeBuffers::new(levels_max, trades_max) }
    }

    /// The per-side level bound.
    pub fn levels_max(&self) -> usize {
        self.buffers.levels_max
    }

    /// The per-message trade bound.
    pub fn trades_max(&self) -> usize {
        self.buffers.trades_max
    }

    /// Decodes the bytes of one message. Never allocates and never panics; malformed input,
    /// truncated input and missing or mistyped fields are errors.
    pub fn decode<'a>(&'a mut self, frame: &'a [u8]) -> Result<Message<'a>, DecodeError> {
        let DecodeBuffers { levels_max, trades_max, bids, asks, trades, hints } = &mut self.buffers;
        bids.clear();
        asks.clear();
        trades.clear();
        let mut cur = object_start(frame)?;
        let mut f = Fields::new(frame, &KEYS);
        let mut data = Nested::new(frame, &KEYS);
        let mut pass = Pass {
            bytes: frame,
            levels_max: *levels_max,
            trades_max: *trades_max,
            bids,
            asks,
            trades,
            bids_read: None,
            asks_read: None,
            trades_read: None,
        };
        pass.outer(&mut cur, hints, &mut f, &mut data)?;
        if !cur.at_end() {
            return Err(cur.error(JsonErrorKind::TrailingBytes).into());
        }
        let Pass { bids, asks, trades, bids_read, asks_read, trades_read, .. } = pass;
        if let Some(topic) = f.get(K_TOPIC) {
            let topic = plain_str(topic, name(K_TOPIC))?;
            if let Some(rest) = topic.strip_prefix(b"orderbook.") {
                let read = BookRead { data: &data, bids: bids_read, asks: asks_read };
                return book(&f, topic, rest, read, *levels_max, bids, asks);
            }
            if topic.starts_with(b"publicTrade.") {
                return trade_batch(&f, topic, trades_read, trades);
            }
            return Ok(Message::Other { topic: Some(topic) });
        }
        if let Some(op) = f.get(K_OP) {
            let op = plain_str(op, name(K_OP))?;
            let success = f.get(K_SUCCESS).map(|v| boolean(v, K_SUCCESS)).transpose()?;
            let ret_msg = f.get(K_RET_MSG).map(|v| str_or_type(v, K_RET_MSG)).transpose()?;
            let conn_id = f.get(K_CONN_ID).map(|v| str_or_type(v, K_CONN_ID)).transpose()?;
            let req_id = f.get(K_REQ_ID).map(|v| str_or_type(v, K_REQ_ID)).transpose()?;
            return Ok(Message::OpReply(OpReply { op, success, ret_msg, conn_id, req_id }));
        }
        Ok(Message::Other { topic: None })
    }
}

/// What the pass read of a book message's `data`: the object, when `data` is one, and the
/// outcome of reading its `b` and `a` arrays into the buffers, when they are arrays.
struct BookRead<'a, 'r> {
    data: &'r Nested<'a, { KEYS.len() }>,
    bids: Option<Deferred>,
    asks: Option<Deferred>,
}

fn book<'a>(
    f: &Fields<'a>,
    topic: &'a [u8],
    topic_rest: &[u8],
    read: BookRead<'a, '_>,
    levels_max: usize,
    bids: &'a mut Vec<Level>,
    asks: &'a mut Vec<Level>,
) -> Result<Message<'a>, DecodeError> {
    let depth = topic_rest.iter().position(|&c| c == b'.').and_then(|dot| {
        let digits = topic_rest.get(..dot)?;
        let v = uint(digits, "topic").ok()?;
        u32::try_from(v).ok()
    });
    let kind = match str_or_type(f.req(K_TYPE)?, K_TYPE)? {
        b"snapshot" => BookKind::Snapshot,
        b"delta" => BookKind::Delta,
        _ => return Err(DecodeError::WrongType(name(K_TYPE))),
    };
    let ts_ms = time(f.req(K_TS)?, K_TS)?;
    let cts_ms = f.get(K_CTS).map(|v| time(v, K_CTS)).transpose()?;
    f.req_span(K_DATA)?;
    // `data` was read as an object during the pass exactly when it is one.
    if !read.data.read {
        return Err(DecodeError::WrongType(name(K_DATA)));
    }
    let d = read.data.fields()?;
    let symbol = plain_str(d.req(K_SYMBOL)?, name(K_SYMBOL))?;
    let update_id = uint(d.req(K_UPDATE_ID)?, name(K_UPDATE_ID))?;
    let seq = d.get(K_SEQ).map(|v| uint(v, name(K_SEQ))).transpose()?;
    side(d, K_BIDS, read.bids, levels_max, bids)?;
    side(d, K_ASKS, read.asks, levels_max, asks)?;
    let bids: &'a Vec<Level> = bids;
    let asks: &'a Vec<Level> = asks;
    Ok(Message::Book(BookUpdate { topic, depth, kind, ts_ms, cts_ms, symbol, update_id, seq, bids, asks }))
}

/// The level array of key `key` of the book's `data`: from the buffer when the pass read it
/// there, else read now (the general path reports what is wrong with it).
fn side(
    d: &Fields<'_>,
    key: usize,
    read: Option<Deferred>,
    max: usize,
    out: &mut Vec<Level>,
) -> Result<(), DecodeError> {
    let span = d.req_span(key)?;
    match read {
        Some(result) => result,
        None => {
            out.clear();
            parse_levels(d.bytes(), span, name(key), max, out)
        }
    }
}

fn trade_batch<'a>(
    f: &Fields<'a>,
    topic: &'a [u8],
    read: Option<Deferred>,
    out: &'a mut Vec<RawTrade>,
) -> Result<Message<'a>, DecodeError> {
    let ts_ms = time(f.req(K_TS)?, K_TS)?;
    f.req_span(K_DATA)?;
    // The trades were read during the pass exactly when `data` is an array.
    read.ok_or(DecodeError::WrongType(name(K_DATA)))??;
    let raw: &'a Vec<RawTrade> = out;
    Ok(Message::Trades(Trades { topic, ts_ms, frame: f.bytes(), raw }))
}

/// One trade of a `publicTrade` message's `data`.
fn trade(t: &Fields<'_>) -> Result<RawTrade, DecodeError> {
    let symbol = plain_span(t, K_SYMBOL)?;
    let trade_id = plain_span(t, K_TRADE_ID)?;
    let trade_ms = time(t.req(K_TRADE_TIME)?, K_TRADE_TIME)?;
    let taker_sell = match str_or_type(t.req(K_SIDE)?, K_SIDE)? {
        b"Buy" => false,
        b"Sell" => true,
        _ => return Err(DecodeError::WrongType(name(K_SIDE))),
    };
    let price = price(str_or_type(t.req(K_PRICE)?, K_PRICE)?, name(K_PRICE))?;
    let qty = qty(str_or_type(t.req(K_VOLUME)?, K_VOLUME)?, name(K_VOLUME))?;
    let block_trade = t.get(K_BLOCK).map(|v| boolean(v, K_BLOCK)).transpose()?.unwrap_or(false);
    let rpi = t.get(K_RPI).map(|v| boolean(v, K_RPI)).transpose()?.unwrap_or(false);
    let seq = t.get(K_SEQ).map(|v| uint(v, name(K_SEQ))).transpose()?;
    Ok(RawTrade { symbol, trade_id, trade_ms, price, qty, taker_sell, block_trade, rpi, seq })
}

/// The kinds of object the pass reads (for [`KeyHints`]): the message, a book's `data`, a
/// trade of a trade batch's `data`.
const OBJ_OUTER: usize = 0;
const OBJ_BOOK: usize = 1;
const OBJ_TRADE: usize = 2;

/// One pass over a message: validates all of it and notes where known keys' values lie; reads
/// its `data` as it meets it: a book's object (its `b` and `a` arrays straight into the level
/// buffers) or a trade batch's array (each trade into the trade buffer). What is wrong inside
/// `data` is held (see [`Deferred`]) until the decoder, knowing the topic, reads `data`.
struct Pass<'a, 'b> {
    bytes: &'a [u8],
    levels_max: usize,
    trades_max: usize,
    bids: &'b mut Vec<Level>,
    asks: &'b mut Vec<Level>,
    trades: &'b mut Vec<RawTrade>,
    /// The outcome of reading `data.b` into `bids`, when it is an array.
    bids_read: Option<Deferred>,
    /// The outcome of reading `data.a` into `asks`, when it is an array.
    asks_read: Option<Deferred>,
    /// The outcome of reading `data` into `trades`, when it is an array.
    trades_read: Option<Deferred>,
}

impl<'a> Pass<'a, '_> {
    /// Reads the message's object at the cursor into `f`, and its `data` into `data` when that
    /// is an object. A repeated key of the message is refused here, as the two-pass reading
    /// refused it while scanning.
    fn outer(
        &mut self,
        cur: &mut Cursor<'a>,
        hints: &mut KeyHints,
        f: &mut Fields<'a>,
        data: &mut Nested<'a, { KEYS.len() }>,
    ) -> Result<(), DecodeError> {
        walk_keyed(cur, &KEY_SET, hints, OBJ_OUTER, |cur, k, hints| {
            let Some(k) = k else {
                cur.skip_value()?;
                return Ok(());
            };
            cur.skip_ws();
            let start = cur.pos();
            match (k, cur.peek()) {
                (K_DATA, Some(b'{')) => self.book_data(cur, hints, data)?,
                (K_DATA, Some(b'[')) => self.trade_data(cur, hints)?,
                _ => {
                    cur.skip_value()?;
                }
            }
            f.record(k, Span { start, end: cur.pos() })
        })
    }

    /// Reads a book's `data` object at the cursor (a value of the message) into `data`.
    fn book_data(
        &mut self,
        cur: &mut Cursor<'a>,
        hints: &mut KeyHints,
        data: &mut Nested<'a, { KEYS.len() }>,
    ) -> Result<(), JsonError> {
        let bytes = self.bytes;
        read_nested(cur, 0, data, &KEY_SET, hints, OBJ_BOOK, |cur, k| {
            let side = match k {
                K_BIDS if self.bids_read.is_none() => Some((&mut *self.bids, &mut self.bids_read)),
                K_ASKS if self.asks_read.is_none() => Some((&mut *self.asks, &mut self.asks_read)),
                _ => None,
            };
            match side {
                Some((out, read)) if cur.peek() == Some(b'[') => {
                    let field = name(k);
                    let read = read.insert(Ok(()));
                    read_levels(cur, 1, field, self.levels_max, out, read, |row| level(bytes, row, field))?;
                }
                _ => {
                    cur.skip_value_at(1)?;
                }
            }
            Ok(())
        })
    }

    /// Reads a trade batch's `data` array at the cursor (a value of the message): each object
    /// into the trade buffer, until the first error, which is kept; the rest is only validated.
    fn trade_data(&mut self, cur: &mut Cursor<'a>, hints: &mut KeyHints) -> Result<(), JsonError> {
        let (trades, max) = (&mut *self.trades, self.trades_max);
        let read = self.trades_read.insert(Ok(()));
        read_objects(cur, 0, &KEY_SET, hints, OBJ_TRADE, name(K_DATA), read, |t| {
            let raw = trade(t)?;
            if trades.len() >= max {
                return Err(DecodeError::TooManyLevels(name(K_DATA)));
            }
            debug_assert!(trades.len() < trades.capacity());
            trades.push(raw);
            Ok(())
        })
    }
}

// The keys the decoder reads, in one table (see `key_table!`).
key_table! {
    K_TOPIC = b"topic",
    K_TYPE = b"type",
    K_TS = b"ts",
    K_DATA = b"data",
    K_CTS = b"cts",
    K_SYMBOL = b"s",
    K_BIDS = b"b",
    K_ASKS = b"a",
    K_UPDATE_ID = b"u",
    K_SEQ = b"seq",
    K_TRADE_TIME = b"T",
    K_SIDE = b"S",
    K_VOLUME = b"v",
    K_PRICE = b"p",
    K_TRADE_ID = b"i",
    K_BLOCK = b"BT",
    K_RPI = b"RPI",
    K_OP = b"op",
    K_SUCCESS = b"success",
    K_RET_MSG = b"ret_msg",
    K_CONN_ID = b"conn_id",
    K_REQ_ID = b"req_id",
}

/// Where each known key's value lies in one object.
type Fields<'a> = super::Fields<'a, { KEYS.len() }>;

fn str_or_type(text: &[u8], key: usize) -> Result<&[u8], DecodeError> {
    str_raw(text).ok_or(DecodeError::WrongType(name(key)))
}

/// The span of a required verbatim string's content.
fn plain_span(f: &Fields<'_>, key: usize) -> Result<Span, DecodeError> {
    let span = f.req_span(key)?;
    plain_str(span.of(f.bytes()), name(key))?;
    // The value span includes the quotes; the content lies one byte inside each end.
    Ok(Span { start: span.start + 1, end: span.end.saturating_sub(1) })
}

fn boolean(text: &[u8], key: usize) -> Result<bool, DecodeError> {
    match text {
        b"true" => Ok(true),
        b"false" => Ok(false),
        _ => Err(DecodeError::WrongType(name(key))),
    }
}

/// A time in Unix milliseconds: a non-negative integer that fits `i64`.
fn time(text: &[u8], key: usize) -> Result<i64, DecodeError> {
    i64::try_from(uint(text, name(key))?).map_err(|_| DecodeError::OutOfRange(name(key)))
}

// ---------------------------------------------------------------------------------------------
// Book sync.

/// What [`BybitBookSync`] did with a book message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SyncOutcome {
    /// A `snapshot` replaced the book: live at its `u`.
    Snapshot {
        /// The snapshot's `u`.
        update_id: u64,
    },
    /// A message with `u = 1` (the venue reset the book) replaced it: live at 1.
    Reset,
    /// Live: the delta (`u` = last `u` + 1) was applied.
    Applied {
        /// The delta's `u`, now the book's.
        update_id: u64,
    },
    /// Live: a delta with `u` at or below the book's (duplicate or out of order) was dropped.
    IgnoredStale {
        /// The delta's `u`.
        update_id: u64,
        /// The book's `u`.
        local_id: u64,
    },
    /// Not live: a delta arrived before any snapshot (or while a resubscribe is out) and was
    /// dropped.
    Dropped,
    /// A delta skipped update ids: the book was cleared and is not live. Resubscribe the topic.
    Gap {
        /// The book's `u` plus one.
        expected_id: u64,
        /// The delta's `u`.
        update_id: u64,
    },
    /// The book was crossed after the message: it is corrupt, was cleared and is not live.
    /// Resubscribe the topic.
    Crossed,
}

impl SyncOutcome {
    /// True when the caller must now unsubscribe and resubscribe the topic (or reconnect) to get
    /// a fresh snapshot. Each break asks once; deltas after it say [`SyncOutcome::Dropped`].
    pub fn wants_resubscribe(&self) -> bool {
        matches!(self, SyncOutcome::Gap { .. } | SyncOutcome::Crossed)
    }
}

/// Event counts of one [`BybitBookSync`], for metrics.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SyncCounters {
    /// Snapshots loaded (`type` snapshot with `u` other than 1).
    pub snapshot_count: u64,
    /// Resets: messages with `u = 1` that replaced the book.
    pub reset_count: u64,
    /// Deltas applied.
    pub applied_count: u64,
    /// Deltas dropped as stale (`u` at or below the book's).
    pub stale_count: u64,
    /// Deltas dropped because the book was not live.
    pub dropped_count: u64,
    /// Gaps in `u`.
    pub gap_count: u64,
    /// Books found crossed.
    pub crossed_count: u64,
}

/// Keeps one [`Book`] in sync with a Bybit `orderbook.{depth}.{symbol}` topic, following the
/// state machine of venues.md §2.2.
///
/// Sans-I/O: book messages come in as values, outcomes go out; the caller subscribes and
/// resubscribes. The same `Book` must be passed to every call; size it to the subscribed depth
/// (the book keeps its nearest levels at its bound, which trims levels pushed out of the top N).
/// Whenever the machine stops being live it clears the book, so a book that is not live is never
/// served. Nothing is buffered, so no call allocates.
#[derive(Clone, Debug, Default)]
pub struct BybitBookSync {
    /// The book's `u` when live.
    local_id: Option<u64>,
    counters: SyncCounters,
}

impl BybitBookSync {
    /// A machine waiting for its first snapshot.
    pub fn new() -> BybitBookSync {
        BybitBookSync::default()
    }

    /// True when the book is in sync and may be served.
    pub fn is_live(&self) -> bool {
        self.local_id.is_some()
    }

    /// The `u` the book reflects, when live.
    pub fn local_id(&self) -> Option<u64> {
        self.local_id
    }

    /// Event counts so far.
    pub fn counters(&self) -> &SyncCounters {
        &self.counters
    }

    /// Back to the start (a new connection or subscription): clears the book and waits for a
    /// snapshot.
    pub fn reset(&mut self, book: &mut Book) {
        self.local_id = None;
        book.clear();
    }

    /// Handles one book message of the topic.
    pub fn on_book(&mut self, update: &BookUpdate<'_>, book: &mut Book) -> SyncOutcome {
        let u = update.update_id;
        let outcome = if update.replaces_book() {
            // Rules 1 and `u = 1`: replace, whatever the book held.
            book.clear();
            if u == 1 {
                self.counters.reset_count += 1;
                SyncOutcome::Reset
            } else {
                self.counters.snapshot_count += 1;
                SyncOutcome::Snapshot { update_id: u }
            }
        } else {
            let Some(local_id) = self.local_id else {
                // Rule 2: no snapshot yet (or a resubscribe is out).
                self.counters.dropped_count += 1;
                return SyncOutcome::Dropped;
            };
            if u <= local_id {
                // Rule 3.
                self.counters.stale_count += 1;
                return SyncOutcome::IgnoredStale { update_id: u, local_id };
            }
            let expected_id = local_id.saturating_add(1);
            if u != expected_id {
                // Rule 4.
                self.counters.gap_count += 1;
                self.reset(book);
                return SyncOutcome::Gap { expected_id, update_id: u };
            }
            self.counters.applied_count += 1;
            SyncOutcome::Applied { update_id: u }
        };
        // Rule 5, and the snapshot load.
        for l in update.bids {
            book.apply(Side::Bid, l.price, l.qty);
        }
        for l in update.asks {
            book.apply(Side::Ask, l.price, l.qty);
        }
        if book.is_crossed() {
            self.counters.crossed_count += 1;
            self.reset(book);
            return SyncOutcome::Crossed;
        }
        self.local_id = Some(u);
        outcome
    }
}
