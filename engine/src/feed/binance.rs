//! Binance spot: a decoder for WebSocket messages and REST depth snapshots, and the book sync
//! state machine (diff stream plus REST snapshot) of venues.md §1.2.
//!
//! Decoding: [`BinanceDecoder::decode`] takes the bytes of one WebSocket text message, raw
//! (`/ws/<stream>`) or combined (`{"stream":..,"data":{..}}`), or one `GET /api/v3/depth` body,
//! and returns a [`Frame`]. Prices and sizes arrive as JSON strings and are parsed once into
//! [`Price`] and [`Qty`]. Levels go into two buffers owned by the decoder and sized at
//! construction; the returned message borrows them and the input, so decoding allocates nothing.
//! Key order does not matter; unknown keys are skipped whatever their value. Messages of a kind
//! this decoder does not read (`aggTrade`, `kline`, `bookTicker`, ...) are a value,
//! [`Message::Other`], not an error.
//!
//! Syncing: [`BinanceBookSync`] drives a [`Book`] from decoded diffs and snapshots. It never
//! fetches anything: when it needs a snapshot it says so in its [`SyncOutcome`]
//! ([`SyncOutcome::wants_snapshot`]) and the caller fetches one (rate-limited: snapshots cost
//! request weight, venues.md §1.6) and hands it to [`BinanceBookSync::on_snapshot`].
//!
//! Choices where venues.md is silent, and why:
//! - A snapshot that arrives while nothing is buffered is loaded: step 3 has no first `U` to
//!   compare with, and the per-event rule of step 6 still catches a snapshot that is too old
//!   (the first event after it is then a gap). Rationale: a quiet pair may send no diff for a
//!   long time; waiting for one would leave its book empty.
//! - At the buffer bound the **oldest** buffered events are dropped and buffering goes on.
//!   Rationale: the first buffered `U` only moves forward, so a snapshot already in flight
//!   stays usable if it is fresh enough, and no extra snapshot (request weight) is asked for.
//! - While live, a snapshot newer than the book reloads it; an older or equal one is ignored.
//! - Buffering survives refused (stale) snapshots, as venues.md §6 item 2 asks.

use std::collections::VecDeque;

use super::{
    level, object_start, parse_levels, plain_str, price, qty, read_levels, read_nested, str_raw, uint, walk_keyed,
    Claim, Cursor, DecodeError, JsonError, JsonErrorKind, KeyHints, KeySet, Nested, Span,
};
use crate::book::{Book, Level, Side};
use crate::fixed::{Price, Qty};
use crate::instrument::BookId;
use crate::market::{Tick, TickKind};

/// Levels per side of the deepest REST snapshot Binance serves (`limit` above 5000 is
/// truncated to 5000); a decoder built with this `levels_max` accepts every snapshot.
pub const SNAPSHOT_LEVELS_PER_SIDE_MAX: usize = 5000;

/// Unit of the time fields on the wire: milliseconds by default, microseconds when the stream
/// was opened with `timeUnit=MICROSECOND`. Decoded times are always milliseconds.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum TimeUnit {
    /// Time fields are Unix milliseconds (the default).
    #[default]
    Millisecond,
    /// Time fields are Unix microseconds; they are truncated to milliseconds.
    Microsecond,
}

/// A `depthUpdate` event: absolute sizes for the levels that changed between update ids
/// `first_update_id` (`U`) and `final_update_id` (`u`), both included.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DepthDiff<'a> {
    /// `s`, the symbol as sent (uppercase, may hold UTF-8), borrowed from the message.
    pub symbol: &'a [u8],
    /// `E`, event time in Unix milliseconds.
    pub event_ms: i64,
    /// `U`, first update id in the event.
    pub first_update_id: u64,
    /// `u`, final update id in the event.
    pub final_update_id: u64,
    /// `b`, bid levels in message order; a zero quantity removes the level.
    pub bids: &'a [Level],
    /// `a`, ask levels in message order; a zero quantity removes the level.
    pub asks: &'a [Level],
}

/// A `trade` event: one fill.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Trade<'a> {
    /// `s`, the symbol as sent, borrowed from the message.
    pub symbol: &'a [u8],
    /// `E`, event time in Unix milliseconds.
    pub event_ms: i64,
    /// `E` in Unix microseconds: exact on a `timeUnit=MICROSECOND` stream, the milliseconds
    /// times 1000 otherwise (the latency benchmark measures from it).
    pub event_us: i64,
    /// `t`, trade id.
    pub trade_id: u64,
    /// `p`, price.
    pub price: Price,
    /// `q`, quantity.
    pub qty: Qty,
    /// `T`, trade time in Unix milliseconds.
    pub trade_ms: i64,
    /// `m`, true when the buyer was the maker, i.e. the taker sold.
    pub buyer_is_maker: bool,
}

impl Trade<'_> {
    /// True when the aggressor sold (`m == true`).
    pub fn taker_sell(&self) -> bool {
        self.buyer_is_maker
    }

    /// The trade as a market tick for `book`, stamped with the trade time.
    pub fn tick(&self, book: BookId) -> Tick {
        Tick {
            book,
            ts_ms: self.trade_ms,
            kind: TickKind::Trade { price: self.price, qty: self.qty, taker_sell: self.taker_sell() },
        }
    }
}

/// A depth snapshot: the REST `GET /api/v3/depth` body, or a partial-depth stream payload
/// (`<symbol>@depth<levels>`, same shape, no symbol: route it by [`Frame::stream`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Snapshot<'a> {
    /// `lastUpdateId`, the last update id the snapshot includes.
    pub last_update_id: u64,
    /// `bids`, best first as sent.
    pub bids: &'a [Level],
    /// `asks`, best first as sent.
    pub asks: &'a [Level],
}

/// The `id` of a request the venue answers: a signed 64-bit integer, a string, or `null`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RequestId<'a> {
    /// `null`.
    Null,
    /// An integer id.
    Int(i64),
    /// A string id, raw (escapes not decoded).
    Str(&'a [u8]),
}

/// One decoded message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Message<'a> {
    /// A diff depth event (`"e":"depthUpdate"`).
    Depth(DepthDiff<'a>),
    /// A trade event (`"e":"trade"`).
    Trade(Trade<'a>),
    /// The venue will close the connection for maintenance: open a new one promptly.
    ServerShutdown {
        /// `E`, event time in Unix milliseconds.
        event_ms: i64,
    },
    /// A depth snapshot (REST body or partial-depth stream payload).
    Snapshot(Snapshot<'a>),
    /// The reply to a control request: `{"result":null,"id":1}` acknowledges a (un)subscribe;
    /// `LIST_SUBSCRIPTIONS` and `GET_PROPERTY` carry a value.
    Response {
        /// The request's `id`.
        id: RequestId<'a>,
        /// Raw JSON text of `result` (`null` for a successful (un)subscribe).
        result: &'a [u8],
    },
    /// An error reply, e.g. `{"code":2,"msg":"Invalid request: ..."}`.
    Error {
        /// `code`.
        code: i64,
        /// `msg`, raw string content (escapes not decoded).
        msg: &'a [u8],
        /// `id` of the failed request, when the venue sent one.
        id: Option<RequestId<'a>>,
    },
    /// A well-formed object of a kind this decoder does not read (`aggTrade`, `kline`,
    /// `bookTicker`, ...); `event_type` is its `e` when it has one.
    Other {
        /// `e`, raw.
        event_type: Option<&'a [u8]>,
    },
}

/// One decoded WebSocket message (or REST body).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Frame<'a> {
    /// The combined-stream name (`btcusdt@depth@100ms`), or `None` for a raw-stream message.
    pub stream: Option<&'a [u8]>,
    /// The payload.
    pub message: Message<'a>,
}

/// Decodes Binance spot messages into borrowed values, reusing its level buffers.
#[derive(Clone, Debug)]
pub struct BinanceDecoder {
    time_unit: TimeUnit,
    levels_max: usize,
    bids: Vec<Level>,
    asks: Vec<Level>,
    hints: KeyHints,
}

impl BinanceDecoder {
    /// A decoder for streams in `time_unit` holding at most `levels_max` levels per side.
    ///
    /// At the bound a message is refused with [`DecodeError::TooManyLevels`]; use
    /// [`SNAPSHOT_LEVELS_PER_SIDE_MAX`] to accept the deepest REST snapshot.
    pub fn new(time_unit: TimeUnit, levels_max: usize) -> BinanceDecoder {
        assert!(levels_max > 0, "a decoder must hold at least one level per side");
        BinanceDecoder {
            time_unit,
            levels_max,
            bids: Vec::with_capacity(levels_max),
            asks: Vec::with_capacity(levels_max),
            hints: KeyHints::default(),
        }
    }

    /// The time unit the decoder expects on the wire.
    pub fn time_unit(&self) -> TimeUnit {
        self.time_unit
    }

    /// The per-side level bound.
    pub fn levels_max(&self) -> usize {
        self.levels_max
    }

    /// Decodes the bytes of one message. Never allocates and never panics; malformed input,
    /// truncated input and missing or mistyped fields are errors.
    pub fn decode<'a>(&'a mut self, frame: &'a [u8]) -> Result<Frame<'a>, DecodeError> {
        let BinanceDecoder { time_unit, levels_max, bids, asks, hints } = self;
        bids.clear();
        asks.clear();
        let mut cur = object_start(frame)?;
        let mut outer = Fields::new(frame, &KEYS);
        let mut data = Nested::new(frame, &KEYS);
        let mut pass = Pass { bytes: frame, levels_max: *levels_max, bids, asks, bids_claim: None, asks_claim: None };
        pass.outer(&mut cur, hints, &mut outer, &mut data)?;
        if !cur.at_end() {
            return Err(cur.error(JsonErrorKind::TrailingBytes).into());
        }
        let Pass { bids, asks, bids_claim, asks_claim, .. } = pass;
        let out = Out { unit: *time_unit, levels_max: *levels_max, bids, asks, bids_claim, asks_claim };
        match outer.get(K_STREAM) {
            None => Ok(Frame { stream: None, message: out.message(OBJ_OUTER, &outer)? }),
            Some(stream) => {
                let stream = plain_str(stream, name(K_STREAM))?;
                outer.req_span(K_DATA)?;
                // `data` was read as an object during the pass exactly when it is one.
                if !data.read {
                    return Err(DecodeError::WrongType(name(K_DATA)));
                }
                Ok(Frame { stream: Some(stream), message: out.message(OBJ_DATA, data.fields()?)? })
            }
        }
    }
}

// The keys the decoder reads, in one table (see `key_table!`).
key_table! {
    K_EVENT = b"e",
    K_EVENT_TIME = b"E",
    K_SYMBOL = b"s",
    K_FIRST_ID = b"U",
    K_FINAL_ID = b"u",
    K_BIDS = b"b",
    K_ASKS = b"a",
    K_TRADE_ID = b"t",
    K_PRICE = b"p",
    K_QTY = b"q",
    K_TRADE_TIME = b"T",
    K_BUYER_MAKER = b"m",
    K_LAST_UPDATE_ID = b"lastUpdateId",
    K_SNAP_BIDS = b"bids",
    K_SNAP_ASKS = b"asks",
    K_RESULT = b"result",
    K_ID = b"id",
    K_CODE = b"code",
    K_MSG = b"msg",
    K_STREAM = b"stream",
    K_DATA = b"data",
}

/// Where each known key's value lies in one object.
type Fields<'a> = super::Fields<'a, { KEYS.len() }>;

/// The object a level buffer was filled from during the pass: the message itself, or the
/// `data` object of a combined-stream message.
const OBJ_OUTER: u8 = 0;
const OBJ_DATA: u8 = 1;

/// One pass over a message: validates all of it, notes where known keys' values lie in the
/// message and in its `data` object, and reads the first bid and ask arrays met into the level
/// buffers (see [`Claim`]).
struct Pass<'a, 'b> {
    bytes: &'a [u8],
    levels_max: usize,
    bids: &'b mut Vec<Level>,
    asks: &'b mut Vec<Level>,
    bids_claim: Option<Claim>,
    asks_claim: Option<Claim>,
}

impl<'a> Pass<'a, '_> {
    /// Reads the message's object at the cursor into `outer`, and its `data` value into `data`
    /// when that is an object. A repeated key of the message is refused here, as the two-pass
    /// reading refused it while scanning; one of `data` is held in the [`Nested`].
    fn outer(
        &mut self,
        cur: &mut Cursor<'a>,
        hints: &mut KeyHints,
        outer: &mut Fields<'a>,
        data: &mut Nested<'a, { KEYS.len() }>,
    ) -> Result<(), DecodeError> {
        walk_keyed(cur, &KEY_SET, hints, OBJ_OUTER.into(), |cur, k, hints| {
            let Some(k) = k else {
                cur.skip_value()?;
                return Ok(());
            };
            cur.skip_ws();
            let start = cur.pos();
            if k == K_DATA && cur.peek() == Some(b'{') {
                // A second `data` is refused just below; what it read is then never looked at.
                read_nested(cur, 0, data, &KEY_SET, hints, OBJ_DATA.into(), |cur, k| self.value(cur, k, OBJ_DATA, 1))?;
            } else {
                self.value(cur, k, OBJ_OUTER, 0)?;
            }
            outer.record(k, Span { start, end: cur.pos() })
        })
    }

    /// Consumes the value of known key `k` of `object`, a value inside `depth` containers: a
    /// level array goes into its side's buffer when no other array has claimed it.
    fn value(&mut self, cur: &mut Cursor<'a>, k: usize, object: u8, depth: usize) -> Result<(), JsonError> {
        let bytes = self.bytes;
        let (out, claim) = match k {
            K_BIDS | K_SNAP_BIDS if self.bids_claim.is_none() => (&mut *self.bids, &mut self.bids_claim),
            K_ASKS | K_SNAP_ASKS if self.asks_claim.is_none() => (&mut *self.asks, &mut self.asks_claim),
            _ => {
                cur.skip_value_at(depth)?;
                return Ok(());
            }
        };
        if cur.peek() != Some(b'[') {
            cur.skip_value_at(depth)?;
            return Ok(());
        }
        let field = name(k);
        let claim = claim.insert(Claim { object, key: k, result: Ok(()) });
        read_levels(cur, depth, field, self.levels_max, out, &mut claim.result, |row| level(bytes, row, field))
    }
}

/// The decoder's settings and level buffers, lent to one decode, and how the pass filled the
/// buffers.
struct Out<'a> {
    unit: TimeUnit,
    levels_max: usize,
    bids: &'a mut Vec<Level>,
    asks: &'a mut Vec<Level>,
    bids_claim: Option<Claim>,
    asks_claim: Option<Claim>,
}

impl<'a> Out<'a> {
    /// The message read from object `object` (the message or its `data`), whose fields are `f`.
    fn message(self, object: u8, f: &Fields<'a>) -> Result<Message<'a>, DecodeError> {
        if let Some(e) = f.get(K_EVENT) {
            let event_type = str_raw(e).ok_or(DecodeError::WrongType(name(K_EVENT)))?;
            return match event_type {
                b"depthUpdate" => self.depth(object, f),
                b"trade" => self.trade(f),
                b"serverShutdown" => Ok(Message::ServerShutdown { event_ms: self.time(f, K_EVENT_TIME)? }),
                _ => Ok(Message::Other { event_type: Some(event_type) }),
            };
        }
        if f.has(K_LAST_UPDATE_ID) {
            return self.snapshot(object, f);
        }
        if f.has(K_CODE) {
            let code = int(f.req(K_CODE)?, name(K_CODE))?;
            let msg = str_raw(f.req(K_MSG)?).ok_or(DecodeError::WrongType(name(K_MSG)))?;
            let id = f.get(K_ID).map(request_id).transpose()?;
            return Ok(Message::Error { code, msg, id });
        }
        if let Some(result) = f.get(K_RESULT) {
            let id = request_id(f.req(K_ID)?)?;
            return Ok(Message::Response { id, result });
        }
        Ok(Message::Other { event_type: None })
    }

    fn depth(self, object: u8, f: &Fields<'a>) -> Result<Message<'a>, DecodeError> {
        let symbol = plain_str(f.req(K_SYMBOL)?, name(K_SYMBOL))?;
        let event_ms = self.time(f, K_EVENT_TIME)?;
        let first = uint(f.req(K_FIRST_ID)?, name(K_FIRST_ID))?;
        let last = uint(f.req(K_FINAL_ID)?, name(K_FINAL_ID))?;
        if first > last {
            return Err(DecodeError::UpdateIdsReversed { first, last });
        }
        let (bids, asks) = self.levels(object, f, K_BIDS, K_ASKS)?;
        Ok(Message::Depth(DepthDiff { symbol, event_ms, first_update_id: first, final_update_id: last, bids, asks }))
    }

    fn snapshot(self, object: u8, f: &Fields<'a>) -> Result<Message<'a>, DecodeError> {
        let last_update_id = uint(f.req(K_LAST_UPDATE_ID)?, name(K_LAST_UPDATE_ID))?;
        let (bids, asks) = self.levels(object, f, K_SNAP_BIDS, K_SNAP_ASKS)?;
        Ok(Message::Snapshot(Snapshot { last_update_id, bids, asks }))
    }

    fn trade(self, f: &Fields<'a>) -> Result<Message<'a>, DecodeError> {
        let symbol = plain_str(f.req(K_SYMBOL)?, name(K_SYMBOL))?;
        let event_ms = self.time(f, K_EVENT_TIME)?;
        let event_us = self.time_us(f, K_EVENT_TIME)?;
        let trade_id = uint(f.req(K_TRADE_ID)?, name(K_TRADE_ID))?;
        let price = price(str_or_type(f.req(K_PRICE)?, K_PRICE)?, name(K_PRICE))?;
        let qty = qty(str_or_type(f.req(K_QTY)?, K_QTY)?, name(K_QTY))?;
        let trade_ms = self.time(f, K_TRADE_TIME)?;
        let buyer_is_maker = match f.req(K_BUYER_MAKER)? {
            b"true" => true,
            b"false" => false,
            _ => return Err(DecodeError::WrongType(name(K_BUYER_MAKER))),
        };
        Ok(Message::Trade(Trade { symbol, event_ms, event_us, trade_id, price, qty, trade_ms, buyer_is_maker }))
    }

    /// A time field, converted to milliseconds.
    fn time(&self, f: &Fields<'a>, key: usize) -> Result<i64, DecodeError> {
        let v = uint(f.req(key)?, name(key))?;
        let ms = match self.unit {
            TimeUnit::Millisecond => v,
            TimeUnit::Microsecond => v / 1_000,
        };
        i64::try_from(ms).map_err(|_| DecodeError::OutOfRange(name(key)))
    }

    /// A time field, converted to microseconds.
    fn time_us(&self, f: &Fields<'a>, key: usize) -> Result<i64, DecodeError> {
        let v = uint(f.req(key)?, name(key))?;
        let us = match self.unit {
            TimeUnit::Millisecond => v.saturating_mul(1_000),
            TimeUnit::Microsecond => v,
        };
        // The millisecond value was checked by `time`; the microsecond one saturates.
        Ok(i64::try_from(us).unwrap_or(i64::MAX))
    }

    /// The two level arrays of object `object`, from the buffers when the pass read them there,
    /// else read now; lends the buffers out.
    fn levels(
        self,
        object: u8,
        f: &Fields<'a>,
        bid_key: usize,
        ask_key: usize,
    ) -> Result<(&'a [Level], &'a [Level]), DecodeError> {
        let bid_span = f.req_span(bid_key)?;
        let ask_span = f.req_span(ask_key)?;
        let bytes = f.bytes();
        side(bytes, self.bids_claim, object, bid_key, bid_span, self.levels_max, self.bids)?;
        side(bytes, self.asks_claim, object, ask_key, ask_span, self.levels_max, self.asks)?;
        let bids: &'a Vec<Level> = self.bids;
        let asks: &'a Vec<Level> = self.asks;
        Ok((bids, asks))
    }
}

/// Fills `out` with the level array of key `key` of `object`, at `span`: what the pass read
/// when it claimed the buffer for that array, else the array read now.
fn side(
    bytes: &[u8],
    claim: Option<Claim>,
    object: u8,
    key: usize,
    span: Span,
    max: usize,
    out: &mut Vec<Level>,
) -> Result<(), DecodeError> {
    match claim {
        Some(c) if c.object == object && c.key == key => c.result,
        _ => {
            out.clear();
            parse_levels(bytes, span, name(key), max, out)
        }
    }
}

fn str_or_type(text: &[u8], key: usize) -> Result<&[u8], DecodeError> {
    str_raw(text).ok_or(DecodeError::WrongType(name(key)))
}

/// A signed 64-bit integer value.
fn int(text: &[u8], field: &'static str) -> Result<i64, DecodeError> {
    match text.split_first() {
        Some((b'-', digits)) => {
            let magnitude = uint(digits, field)?;
            0_i64.checked_sub_unsigned(magnitude).ok_or(DecodeError::OutOfRange(field))
        }
        _ => i64::try_from(uint(text, field)?).map_err(|_| DecodeError::OutOfRange(field)),
    }
}

fn request_id(text: &[u8]) -> Result<RequestId<'_>, DecodeError> {
    if text == b"null" {
        return Ok(RequestId::Null);
    }
    if let Some(s) = str_raw(text) {
        return Ok(RequestId::Str(s));
    }
    Ok(RequestId::Int(int(text, name(K_ID))?))
}

// ---------------------------------------------------------------------------------------------
// Book sync.

/// What [`BinanceBookSync`] did with a diff or a snapshot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SyncOutcome {
    /// Live: the diff's levels were applied and the local update id moved to its `u`.
    Applied,
    /// Not live: the diff was buffered; a snapshot has already been asked for.
    Buffered,
    /// Not live: the diff was buffered and no snapshot has been asked for yet: fetch one now.
    NeedSnapshot,
    /// The diff (`u` below the local id, or below the last buffered `u`), or a snapshot that
    /// arrived while live and is not newer than the book, is older than what is held: nothing
    /// changed.
    IgnoredStale,
    /// A diff starts after the next expected id. The book was cleared, the diff starts a new
    /// buffer (it is not applied): fetch a snapshot.
    Gap {
        /// The local id plus one: the `U` the diff should not exceed.
        expected_first_id: u64,
        /// The diff's `U`.
        first_id: u64,
    },
    /// The book was crossed after applying a diff or loading a snapshot: it is corrupt and was
    /// cleared. Diffs buffered behind the offending one are kept: fetch a snapshot.
    Crossed,
    /// The snapshot was loaded and the buffered diffs replayed: the book is live.
    Synced {
        /// The local update id after the replay.
        update_id: u64,
        /// Buffered diffs applied on top of the snapshot.
        replayed: usize,
    },
    /// The snapshot's `lastUpdateId` is below the first buffered `U`: it is too old. Nothing
    /// changed and the buffer is kept: fetch another.
    StaleSnapshot {
        /// The snapshot's `lastUpdateId`.
        last_update_id: u64,
        /// `U` of the first buffered diff.
        first_buffered_id: u64,
    },
}

impl SyncOutcome {
    /// True when the caller must now fetch a REST snapshot and hand it to
    /// [`BinanceBookSync::on_snapshot`]. Each such outcome asks once: while the fetch is out,
    /// further diffs say [`SyncOutcome::Buffered`].
    pub fn wants_snapshot(&self) -> bool {
        matches!(
            self,
            SyncOutcome::NeedSnapshot
                | SyncOutcome::Gap { .. }
                | SyncOutcome::Crossed
                | SyncOutcome::StaleSnapshot { .. }
        )
    }
}

/// Event counts of one [`BinanceBookSync`], for metrics.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SyncCounters {
    /// Snapshots loaded (the book went live or was reloaded).
    pub sync_count: u64,
    /// Snapshots refused as older than the first buffered diff.
    pub stale_snapshot_count: u64,
    /// Diffs (and live snapshots) ignored as older than what was held.
    pub stale_event_count: u64,
    /// Gaps in the update ids.
    pub gap_count: u64,
    /// Books found crossed.
    pub crossed_count: u64,
    /// Times a loaded book was discarded (gap or crossed) and a new snapshot asked for.
    pub resync_count: u64,
    /// Buffered diffs dropped at the buffer bound (oldest first).
    pub buffer_dropped_count: u64,
}

/// A buffered diff; its levels follow the previous diff's in the level buffer, bids first.
#[derive(Clone, Copy, Debug)]
struct Buffered {
    first_id: u64,
    final_id: u64,
    bid_count: usize,
    ask_count: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// No book: diffs are buffered until a snapshot arrives.
    Buffering,
    /// The book is in sync up to `local_id`.
    Live { local_id: u64 },
}

/// Keeps one [`Book`] in sync with a Binance spot diff stream plus REST snapshots, following
/// venues.md §1.2 "Sync algorithm (current official wording)".
///
/// Sans-I/O: diffs and snapshots come in as values, outcomes go out; the caller subscribes,
/// fetches and reconnects. The same `Book` must be passed to every call. Whenever the machine
/// stops being live it clears the book, so a book that is not live is never served half-built.
///
/// Bounds: at most `buffer_events_max` diffs and `buffer_levels_max` levels (both sides) are
/// buffered while waiting for a snapshot. At either bound the oldest buffered diffs are
/// dropped (counted in [`SyncCounters::buffer_dropped_count`]); a single diff with more levels
/// than the whole buffer empties it and is dropped too. The first buffered `U` then moves
/// forward, and a snapshot older than it is refused as stale, so correctness holds. Both
/// buffers are allocated in [`BinanceBookSync::new`]; no call allocates after that.
#[derive(Clone, Debug)]
pub struct BinanceBookSync {
    state: State,
    /// An outcome has asked for a snapshot and none has arrived since.
    snapshot_asked: bool,
    events: VecDeque<Buffered>,
    levels: VecDeque<Level>,
    buffer_events_max: usize,
    buffer_levels_max: usize,
    counters: SyncCounters,
}

impl BinanceBookSync {
    /// A machine buffering at most `buffer_events_max` diffs holding at most
    /// `buffer_levels_max` levels in all, before the first snapshot.
    ///
    /// Size the buffer for the snapshot round trip: at 10 diffs/s (`@100ms`) a 30 s old
    /// snapshot (venues.md §6 item 2) needs 300 diffs.
    pub fn new(buffer_events_max: usize, buffer_levels_max: usize) -> BinanceBookSync {
        assert!(buffer_events_max > 0 && buffer_levels_max > 0, "the diff buffer must hold something");
        BinanceBookSync {
            state: State::Buffering,
            snapshot_asked: false,
            events: VecDeque::with_capacity(buffer_events_max),
            levels: VecDeque::with_capacity(buffer_levels_max),
            buffer_events_max,
            buffer_levels_max,
            counters: SyncCounters::default(),
        }
    }

    /// True when the book is in sync and may be served.
    pub fn is_live(&self) -> bool {
        matches!(self.state, State::Live { .. })
    }

    /// The update id the book reflects, when live.
    pub fn local_id(&self) -> Option<u64> {
        match self.state {
            State::Live { local_id } => Some(local_id),
            State::Buffering => None,
        }
    }

    /// Number of diffs waiting for a snapshot.
    pub fn buffered_len(&self) -> usize {
        self.events.len()
    }

    /// `U` of the first buffered diff: a snapshot must reach at least this id.
    pub fn first_buffered_id(&self) -> Option<u64> {
        self.events.front().map(|e| e.first_id)
    }

    /// Event counts so far.
    pub fn counters(&self) -> &SyncCounters {
        &self.counters
    }

    /// Back to the start (a new connection): drops the buffer and clears the book. The next
    /// diff says [`SyncOutcome::NeedSnapshot`].
    pub fn reset(&mut self, book: &mut Book) {
        self.state = State::Buffering;
        self.snapshot_asked = false;
        self.events.clear();
        self.levels.clear();
        book.clear();
    }

    /// Handles one diff of the stream (steps 1 and 6).
    pub fn on_diff(&mut self, diff: &DepthDiff<'_>, book: &mut Book) -> SyncOutcome {
        match self.state {
            State::Live { local_id } => {
                if diff.final_update_id < local_id {
                    self.counters.stale_event_count += 1;
                    return SyncOutcome::IgnoredStale;
                }
                let expected_first_id = local_id.saturating_add(1);
                if diff.first_update_id > expected_first_id {
                    self.counters.gap_count += 1;
                    self.discard_book(book);
                    self.push(diff);
                    return SyncOutcome::Gap { expected_first_id, first_id: diff.first_update_id };
                }
                apply(book, diff.bids.iter().copied(), diff.asks.iter().copied());
                self.state = State::Live { local_id: diff.final_update_id };
                if book.is_crossed() {
                    self.counters.crossed_count += 1;
                    self.discard_book(book);
                    return SyncOutcome::Crossed;
                }
                SyncOutcome::Applied
            }
            State::Buffering => {
                if self.events.back().is_some_and(|last| diff.final_update_id < last.final_id) {
                    // Replay would ignore it anyway (its `u` is below the local id by then).
                    self.counters.stale_event_count += 1;
                    return SyncOutcome::IgnoredStale;
                }
                self.push(diff);
                if self.snapshot_asked {
                    SyncOutcome::Buffered
                } else {
                    self.snapshot_asked = true;
                    SyncOutcome::NeedSnapshot
                }
            }
        }
    }

    /// Handles a REST snapshot (steps 3 to 6).
    pub fn on_snapshot(&mut self, snap: &Snapshot<'_>, book: &mut Book) -> SyncOutcome {
        self.snapshot_asked = false;
        let last_update_id = snap.last_update_id;
        if let State::Live { local_id } = self.state {
            if last_update_id <= local_id {
                self.counters.stale_event_count += 1;
                return SyncOutcome::IgnoredStale;
            }
            // Newer than the book: authoritative. Nothing is buffered while live.
            debug_assert!(self.events.is_empty());
        }
        // Step 3: the snapshot must not predate the first buffered diff.
        if let Some(first) = self.events.front() {
            if last_update_id < first.first_id {
                self.counters.stale_snapshot_count += 1;
                self.snapshot_asked = true;
                return SyncOutcome::StaleSnapshot { last_update_id, first_buffered_id: first.first_id };
            }
        }
        // Step 4: drop what the snapshot already holds.
        while self.events.front().is_some_and(|e| e.final_id <= last_update_id) {
            self.pop_front(None);
        }
        // Step 5: load the snapshot.
        book.clear();
        apply(book, snap.bids.iter().copied(), snap.asks.iter().copied());
        let mut local_id = last_update_id;
        self.state = State::Live { local_id };
        if book.is_crossed() {
            self.counters.crossed_count += 1;
            self.discard_book(book);
            return SyncOutcome::Crossed;
        }
        // Step 6 over the buffer.
        let mut replayed = 0;
        while let Some(&event) = self.events.front() {
            if event.final_id < local_id {
                self.counters.stale_event_count += 1;
                self.pop_front(None);
                continue;
            }
            let expected_first_id = local_id.saturating_add(1);
            if event.first_id > expected_first_id {
                // The diff stays buffered: it starts the next attempt.
                self.counters.gap_count += 1;
                self.discard_book(book);
                return SyncOutcome::Gap { expected_first_id, first_id: event.first_id };
            }
            self.pop_front(Some(book));
            local_id = event.final_id;
            replayed += 1;
            if book.is_crossed() {
                self.counters.crossed_count += 1;
                self.discard_book(book);
                return SyncOutcome::Crossed;
            }
        }
        self.state = State::Live { local_id };
        self.counters.sync_count += 1;
        SyncOutcome::Synced { update_id: local_id, replayed }
    }

    /// Leaves the live (or loading) state: clears the book and asks for a snapshot.
    fn discard_book(&mut self, book: &mut Book) {
        self.counters.resync_count += 1;
        self.state = State::Buffering;
        self.snapshot_asked = true;
        book.clear();
    }

    /// Buffers a diff, dropping the oldest at the bounds.
    fn push(&mut self, diff: &DepthDiff<'_>) {
        let n = diff.bids.len() + diff.asks.len();
        if n > self.buffer_levels_max {
            self.counters.buffer_dropped_count += self.events.len() as u64 + 1;
            self.events.clear();
            self.levels.clear();
            return;
        }
        while self.events.len() >= self.buffer_events_max || self.levels.len() + n > self.buffer_levels_max {
            self.counters.buffer_dropped_count += 1;
            self.pop_front(None);
        }
        self.events.push_back(Buffered {
            first_id: diff.first_update_id,
            final_id: diff.final_update_id,
            bid_count: diff.bids.len(),
            ask_count: diff.asks.len(),
        });
        self.levels.extend(diff.bids.iter().chain(diff.asks));
        debug_assert!(self.levels.len() <= self.buffer_levels_max);
    }

    /// Removes the first buffered diff, applying it to `book` when given.
    fn pop_front(&mut self, book: Option<&mut Book>) {
        let Some(event) = self.events.pop_front() else {
            // Levels always belong to a buffered diff; keep that true even if it were not.
            self.levels.clear();
            return;
        };
        let bid_count = event.bid_count.min(self.levels.len());
        let ask_count = event.ask_count.min(self.levels.len() - bid_count);
        let mut levels = self.levels.drain(..bid_count + ask_count);
        if let Some(book) = book {
            let bids = levels.by_ref().take(bid_count);
            for l in bids {
                book.apply(Side::Bid, l.price, l.qty);
            }
            for l in levels {
                book.apply(Side::Ask, l.price, l.qty);
            }
        }
    }
}

/// Applies levels to a book; a zero quantity removes, a removal of an absent level is a no-op.
fn apply(book: &mut Book, bids: impl Iterator<Item = Level>, asks: impl Iterator<Item = Level>) {
    for l in bids {
        book.apply(Side::Bid, l.price, l.qty);
    }
    for l in asks {
        book.apply(Side::Ask, l.price, l.qty);
    }
}
