//! Bitget v2 spot: a decoder for public WebSocket messages and the `books` sync state machine
//! (`seq` order, `pseq` link and CRC-32 checksum when sent) of venues.md §4.2.
//!
//! Decoding: [`BitgetDecoder::decode`] takes the bytes of one WebSocket text message received on
//! the public URL (`wss://ws.bitget.com/v2/ws/public`) and returns a [`Message`]: a book push
//! (`books`, `books1`, `books5`, `books15`), a `trade` push, a `candle*` push (read only enough to
//! be recognised: rampart builds its candles from trades), an `event` reply (`subscribe`,
//! `unsubscribe`, `error`) or the text `pong`. Prices and sizes arrive as JSON strings and are
//! parsed once into [`Price`] and [`Qty`]; each level also keeps where its price and size text lie
//! in the message ([`TextSpan`]), because the checksum is computed over the venue's own text,
//! never over re-formatted numbers. Levels and trades go into buffers owned by the decoder and
//! sized at construction, so decoding allocates nothing. Key order does not matter; unknown keys
//! are skipped.
//!
//! Syncing: [`BitgetBookSync`] drives a [`Book`] from decoded book pushes. It never subscribes:
//! when the stream breaks it clears the book and says so ([`SyncOutcome::wants_resubscribe`]);
//! the caller sends `unsubscribe` + `subscribe` (which returns a fresh snapshot) or reconnects.
//! On every reconnect the caller must call [`BitgetBookSync::reset`]: a book kept across a
//! reconnect is what caused ccxt's hours-long checksum storms (venues.md §6 item 20).
//!
//! Choices where venues.md is silent, ambiguous or UNCONFIRMED, and why:
//! - `checksum` (UNCONFIRMED: probably dropped in 2026, venues.md §6 item 24) is optional. Both
//!   readings are tolerated: absent or `0` means "no checksum" and is skipped; a non-zero value is
//!   verified (when the sync is built to verify). It is read as a signed 32-bit integer, and a
//!   value in `i32::MAX + 1 ..= u32::MAX` as the unsigned form of the same CRC.
//! - `pseq` (UNCONFIRMED semantics: undocumented, `0` on the recorded `books5` snapshot) is
//!   optional and read as a signed integer. The sync treats a positive `pseq` as the `seq` of the
//!   previous update (a gap when it differs from the last `seq`) and ignores `0`, a negative
//!   value or its absence, so it works whether or not `pseq` turns out to be such a link.
//! - `seq` is required on book pushes and only its order is checked: contiguity is not promised.
//!   An update at or below the last `seq` is dropped as out of order; the venue says `seq` grows
//!   "except during symbol maintenance", so [`OUT_OF_ORDER_RUN_MAX`] updates in a row below the
//!   last `seq` are taken as a restarted sequence and the book is discarded. Rationale: dropping
//!   every later update would freeze the book silently.
//! - `books1`/`books5`/`books15` push a full snapshot every time: such a push replaces the book
//!   whatever its `action` says, and `action` may be absent. On `books`, `action` is required
//!   ([`DecodeError::MissingField`]); an `action` other than `snapshot`/`update` is
//!   [`DecodeError::OutOfRange`] on any channel.
//! - Trades are exposed oldest first, sorted by (`ts`, `tradeId`). The venue lists them newest
//!   first (venues.md §4.3, §6 item 22); sorting rather than reversing gives the same order
//!   whichever way a message lists them. `tradeId` is a string of digits read as a `u64` (ids
//!   exceed 2^53). `side` is taken as the taker's side (UNCONFIRMED: documented only as
//!   "transaction direction").
//! - Candle rows (`[ts, open, high, low, close, baseVolume, usdtVolume, quoteVolume]`, no closed
//!   flag) are validated as arrays whose first cell is a start time in a string; the other cells
//!   are skipped, so a venue that adds or drops a column does not break the feed.
//! - The text `pong` is recognised only as exactly those four bytes (it is not JSON); anything
//!   else goes to the JSON parser.
//! - An event `code` is a string of digits in the docs and a bare number in some recorded
//!   replies; both are accepted.
//! - A book push whose `data` does not hold exactly one object is refused
//!   ([`DecodeError::OutOfRange`] on `data`); Bitget sends one book per push.

use super::arg_data::{side, walk, ArgData, Buffers, ChannelKind, Walked};
use super::checksum::{text_level, Check, TextBook, TextSpan};
use super::{
    array_at, int, int_or_string, ms, plain_str, str_field, string_ms, string_uint, taker_sell, uint, DecodeBuffers,
    DecodeError, Elements, KeySet, Row, Span,
};
use crate::book::{Book, Side};
use crate::fixed::{Price, Qty};
use crate::instrument::BookId;
use crate::market::{Tick, TickKind};

/// A decoder built with this `levels_max` accepts `books` snapshots of up to 5000 levels per side
/// and refuses larger ones ([`DecodeError::TooManyLevels`]).
///
/// Bitget does not document the depth of the `books` snapshot ("all levels"; its doc page
/// mentions 400 in passing, UNCONFIRMED, venues.md §4.2), so the bound leaves room for both
/// readings: the decoder's buffers are per connection and cost about 0.5 MB at this size.
pub const BOOKS_LEVELS_PER_SIDE_MAX: usize = 5000;

/// A decoder built with this `trades_max` accepts `trade` pushes of up to 1024 trades and refuses
/// larger ones ([`DecodeError::TooManyLevels`] on `data`). The size of the first push (recent
/// trades) is not documented; updates carry a few trades.
pub const TRADES_PER_PUSH_MAX: usize = 1024;

/// Out-of-order updates in a row (`seq` strictly below the last `seq`) after which the sync takes
/// the venue's sequence as restarted (symbol maintenance, venues.md §4.2), discards the book and
/// asks for a resubscribe ([`SyncOutcome::SequenceRestart`]). Updates with `seq` equal to the
/// last are dropped without counting towards the run, so an idle repeat can never trigger it.
pub const OUT_OF_ORDER_RUN_MAX: u32 = 5;

// ---------------------------------------------------------------------------------------------
// Decoded values.

/// A book channel.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum BookChannel {
    /// `books`: all levels, a snapshot then updates.
    Books,
    /// `books1`: the best level, a snapshot every push.
    Books1,
    /// `books5`: the best 5 levels, a snapshot every push.
    Books5,
    /// `books15`: the best 15 levels, a snapshot every push.
    Books15,
}

impl BookChannel {
    /// The channel named `name` on the wire, if it is a book channel.
    pub fn from_name(name: &[u8]) -> Option<BookChannel> {
        match name {
            b"books" => Some(BookChannel::Books),
            b"books1" => Some(BookChannel::Books1),
            b"books5" => Some(BookChannel::Books5),
            b"books15" => Some(BookChannel::Books15),
            _ => None,
        }
    }

    /// The channel's name on the wire (for the `subscribe` request).
    pub fn name(self) -> &'static str {
        match self {
            BookChannel::Books => "books",
            BookChannel::Books1 => "books1",
            BookChannel::Books5 => "books5",
            BookChannel::Books15 => "books15",
        }
    }

    /// Levels per side the channel carries; `None` for `books` (all levels).
    pub fn depth(self) -> Option<usize> {
        match self {
            BookChannel::Books => None,
            BookChannel::Books1 => Some(1),
            BookChannel::Books5 => Some(5),
            BookChannel::Books15 => Some(15),
        }
    }
}

/// `action` of a push.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Action {
    /// `"snapshot"`: a full book, or the recent trades / candles sent first after subscribing.
    Snapshot,
    /// `"update"`: changed levels only, or new trades / candle rows.
    Update,
}

/// One book level: `[price, size]`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BitgetLevel {
    /// Index 0, the price.
    pub price: Price,
    /// Index 1, the size (base currency); zero removes the level.
    pub qty: Qty,
    /// Where the price string's content lies in the message.
    pub price_text: TextSpan,
    /// Where the size string's content lies in the message.
    pub size_text: TextSpan,
}

/// A book push (`data[0]` of a `books*` channel message).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BookPush<'a> {
    /// `arg.channel`.
    pub channel: BookChannel,
    /// `arg.instId`, raw (`BTCUSDT`, already the canonical `BASEQUOTE` form, venues.md §5).
    pub inst_id: &'a [u8],
    /// `action` as sent; always present on `books`.
    pub action: Option<Action>,
    /// `data[0].ts`, matching-engine time in Unix milliseconds.
    pub ts_ms: i64,
    /// The outer `ts`, push time in Unix milliseconds, when sent.
    pub push_ts_ms: Option<i64>,
    /// `checksum`, the venue's signed CRC-32, when sent; `0` means none.
    pub checksum: Option<i32>,
    /// `seq`: grows when the book changes (not necessarily by one).
    pub seq: u64,
    /// `pseq`, when sent (UNCONFIRMED semantics, see the module doc).
    pub pseq: Option<i64>,
    /// `bids`, in message order (best first on a snapshot).
    pub bids: &'a [BitgetLevel],
    /// `asks`, in message order (best first on a snapshot).
    pub asks: &'a [BitgetLevel],
    /// The whole message, which the levels' [`TextSpan`]s index.
    pub frame: &'a [u8],
}

impl<'a> BookPush<'a> {
    /// True when this push replaces the book: a `books` snapshot, or any `books1`/`books5`/
    /// `books15` push.
    pub fn replaces_book(&self) -> bool {
        self.channel != BookChannel::Books || self.action == Some(Action::Snapshot)
    }

    /// The original price text of a level of this push.
    pub fn price_text(&self, level: &BitgetLevel) -> &'a [u8] {
        level.price_text.of(self.frame)
    }

    /// The original size text of a level of this push.
    pub fn size_text(&self, level: &BitgetLevel) -> &'a [u8] {
        level.size_text.of(self.frame)
    }
}

/// One element of a `trade` push: one fill.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BitgetTrade {
    /// `tradeId` (above 2^53: never read it as a float).
    pub trade_id: u64,
    /// `price`.
    pub price: Price,
    /// `size`, base currency.
    pub qty: Qty,
    /// `side` is `"sell"`: the taker sold.
    pub taker_sell: bool,
    /// `ts`, Unix milliseconds.
    pub ts_ms: i64,
}

impl BitgetTrade {
    /// The trade as a market tick for `book`, stamped with the fill time.
    pub fn tick(&self, book: BookId) -> Tick {
        let kind = TickKind::Trade { price: self.price, qty: self.qty, taker_sell: self.taker_sell };
        Tick { book, ts_ms: self.ts_ms, kind }
    }
}

/// One decoded message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Message<'a> {
    /// A book push.
    Book(BookPush<'a>),
    /// A `trade` push.
    Trades {
        /// `arg.instId`, raw.
        inst_id: &'a [u8],
        /// `action`: the first push after subscribing is a `snapshot` of recent trades, which
        /// may overlap trades already seen (dedupe on `trade_id`).
        action: Option<Action>,
        /// The trades, **oldest first** (the venue sends them newest first).
        trades: &'a [BitgetTrade],
    },
    /// A `candle*` push, read only enough to be recognised.
    Candles {
        /// `arg.channel`, raw (`candle1m`, `candle1H`, `candle1Dutc`, ...).
        channel: &'a [u8],
        /// `arg.instId`, raw.
        inst_id: &'a [u8],
        /// `action` (`snapshot` first, then `update`).
        action: Option<Action>,
        /// Rows in `data`.
        row_count: usize,
        /// The latest start time among the rows, Unix milliseconds; `None` when there are no
        /// rows. A row with a later start than seen before closes the previous candle.
        newest_start_ms: Option<i64>,
    },
    /// `event: "subscribe"` (or `"unsubscribe"`): the channel is (un)subscribed.
    Subscribed {
        /// True for `"subscribe"`, false for `"unsubscribe"`.
        subscribed: bool,
        /// `arg.channel`, raw.
        channel: &'a [u8],
        /// `arg.instId`, raw; empty when the argument has none.
        inst_id: &'a [u8],
    },
    /// `event: "error"`: a request was refused.
    Error {
        /// `code` (a string on the wire in the docs, a number in some replies).
        code: i64,
        /// `msg`, raw string content (escapes not decoded).
        msg: &'a [u8],
        /// `arg.channel`, raw, when the reply names the refused subscription.
        channel: Option<&'a [u8]>,
        /// `arg.instId`, raw, when the reply names the refused subscription.
        inst_id: Option<&'a [u8]>,
    },
    /// The text `pong`, the reply to the text `ping`.
    Pong,
    /// A well-formed object of a kind this decoder does not read (another event such as
    /// `login`, a channel such as `ticker`, our own request echoed); `event` and `channel` are
    /// given when present.
    Other {
        /// `event`, raw.
        event: Option<&'a [u8]>,
        /// `arg.channel`, raw.
        channel: Option<&'a [u8]>,
    },
}

// ---------------------------------------------------------------------------------------------
// Decoder.

/// Decodes Bitget v2 public messages into borrowed values, reusing its level and trade buffers.
#[derive(Clone, Debug)]
pub struct BitgetDecoder {
    buffers: DecodeBuffers<BitgetLevel, BitgetTrade>,
}

impl BitgetDecoder {
    /// A decoder holding at most `levels_max` levels per side and `trades_max` trades per push.
    ///
    /// At either bound a message is refused with [`DecodeError::TooManyLevels`] (on `bids`,
    /// `asks`, or `data` for trades). Use [`BOOKS_LEVELS_PER_SIDE_MAX`] for `books` and
    /// [`TRADES_PER_PUSH_MAX`] for `trade`.
    pub fn new(levels_max: usize, trades_max: usize) -> BitgetDecoder {
        BitgetDecoder { buffers: DecodeBuffers::new(levels_max, trades_max) }
    }

    /// The per-side level bound.
    pub fn levels_max(&self) -> usize {
        self.buffers.levels_max
    }

    /// The per-push trade bound.
    pub fn trades_max(&self) -> usize {
        self.buffers.trades_max
    }

    /// Decodes the bytes of one text message. Never allocates and never panics; malformed
    /// input, truncated input and missing or mistyped fields are errors.
    // Long: one pass over the frame, then one `match` over the message kinds it may be, each arm a
    // few lines; split, every piece would take the decoder's borrowed buffers and the walk's state
    // (hot path, no allocation).
    pub fn decode<'a>(&'a mut self, frame: &'a [u8]) -> Result<Message<'a>, DecodeError> {
        if frame == b"pong" {
            return Ok(Message::Pong);
        }
        let DecodeBuffers { levels_max, trades_max, bids, asks, trades, hints } = &mut self.buffers;
        let buffers = Buffers { levels_max: *levels_max, trades_max: *trades_max, bids, asks, trades };
        let mut walked = Walked::<Wire, { KEYS.len() }>::new(frame);
        walk(&mut walked, buffers, hints)?;
        let (outer, arg) = (&walked.outer, walked.arg()?);
        let arg_str = |k: usize| arg.and_then(|a| a.get(k)).map(|v| plain_str(v, name(k))).transpose();
        if let Some(event) = outer.get(K_EVENT) {
            let event = plain_str(event, name(K_EVENT))?;
            return match event {
                b"subscribe" | b"unsubscribe" => {
                    let arg = arg.ok_or(DecodeError::MissingField(name(K_ARG)))?;
                    let channel = plain_str(arg.req(K_CHANNEL)?, name(K_CHANNEL))?;
                    let inst_id = arg_str(K_INST_ID)?.unwrap_or(b"");
                    Ok(Message::Subscribed { subscribed: event == b"subscribe", channel, inst_id })
                }
                b"error" => {
                    let code = int_or_string(outer.req(K_CODE)?, name(K_CODE))?;
                    let msg = str_field(outer.req(K_MSG)?, name(K_MSG))?;
                    Ok(Message::Error { code, msg, channel: arg_str(K_CHANNEL)?, inst_id: arg_str(K_INST_ID)? })
                }
                _ => Ok(Message::Other { event: Some(event), channel: arg_str(K_CHANNEL)? }),
            };
        }
        let Some(arg) = arg else {
            return Ok(Message::Other { event: None, channel: None });
        };
        let channel = plain_str(arg.req(K_CHANNEL)?, name(K_CHANNEL))?;
        let book_channel = BookChannel::from_name(channel);
        let is_trade = channel == b"trade";
        let is_candle = channel.starts_with(b"candle");
        if book_channel.is_none() && !is_trade && !is_candle {
            return Ok(Message::Other { event: None, channel: Some(channel) });
        }
        let inst_id = plain_str(arg.req(K_INST_ID)?, name(K_INST_ID))?;
        let action = outer.get(K_ACTION).map(action).transpose()?;
        let push_ts_ms = outer.get(K_TS).map(|v| ms(v, name(K_TS))).transpose()?;
        let data = outer.req_span(K_DATA)?;
        if let Some(channel) = book_channel {
            if channel == BookChannel::Books && action.is_none() {
                return Err(DecodeError::MissingField(name(K_ACTION)));
            }
            let mut lazy = None;
            let (d, bids_read, asks_read) = walked.book(data, &mut lazy)?;
            let ts_ms = string_ms(d.req(K_TS)?, name(K_TS))?;
            let checksum = d.get(K_CHECKSUM).map(checksum).transpose()?;
            let seq = uint(d.req(K_SEQ)?, name(K_SEQ))?;
            let pseq = d.get(K_PSEQ).map(|v| int(v, name(K_PSEQ))).transpose()?;
            side::<Wire, { KEYS.len() }>(d, K_BIDS, bids_read, *levels_max, bids)?;
            side::<Wire, { KEYS.len() }>(d, K_ASKS, asks_read, *levels_max, asks)?;
            let bids: &'a Vec<BitgetLevel> = bids;
            let asks: &'a Vec<BitgetLevel> = asks;
            return Ok(Message::Book(BookPush {
                channel,
                inst_id,
                action,
                ts_ms,
                push_ts_ms,
                checksum,
                seq,
                pseq,
                bids,
                asks,
                frame,
            }));
        }
        if is_trade {
            walked.trades(data, *trades_max, trades)?;
            // In place and without allocating.
            trades.sort_unstable_by_key(|t| (t.ts_ms, t.trade_id));
            let trades: &'a Vec<BitgetTrade> = trades;
            return Ok(Message::Trades { inst_id, action, trades });
        }
        let (row_count, newest_start_ms) = candle_rows(frame, data)?;
        Ok(Message::Candles { channel, inst_id, action, row_count, newest_start_ms })
    }
}

// The keys the decoder reads, in one table (see `key_table!`).
key_table! {
    K_ARG = b"arg",
    K_ACTION = b"action",
    K_DATA = b"data",
    K_EVENT = b"event",
    K_CODE = b"code",
    K_MSG = b"msg",
    K_CHANNEL = b"channel",
    K_INST_ID = b"instId",
    K_ASKS = b"asks",
    K_BIDS = b"bids",
    K_TS = b"ts",
    K_CHECKSUM = b"checksum",
    K_SEQ = b"seq",
    K_PSEQ = b"pseq",
    K_TRADE_ID = b"tradeId",
    K_PRICE = b"price",
    K_SIZE = b"size",
    K_SIDE = b"side",
}

/// Where each key of [`KEYS`] lies in one object.
type Fields<'a> = super::Fields<'a, { KEYS.len() }>;

/// Bitget's pushes in the shared `{arg, data}` shape.
enum Wire {}

impl ArgData<{ KEYS.len() }> for Wire {
    type Level = BitgetLevel;
    type Trade = BitgetTrade;
    const ARG: usize = K_ARG;
    const DATA: usize = K_DATA;
    const CHANNEL: usize = K_CHANNEL;
    const BIDS: usize = K_BIDS;
    const ASKS: usize = K_ASKS;

    fn keys() -> &'static KeySet<{ KEYS.len() }> {
        &KEY_SET
    }

    #[inline]
    fn channel_kind(channel: &[u8]) -> Option<ChannelKind> {
        if BookChannel::from_name(channel).is_some() {
            Some(ChannelKind::Book)
        } else if channel == b"trade" {
            Some(ChannelKind::Trades)
        } else {
            None
        }
    }

    #[inline]
    fn level(bytes: &[u8], row: &Row, field: &'static str) -> Result<BitgetLevel, DecodeError> {
        bitget_level(bytes, row, field)
    }

    #[inline]
    fn trade(f: &Fields<'_>) -> Result<BitgetTrade, DecodeError> {
        trade(f)
    }
}

/// `action`: `"snapshot"` or `"update"`.
fn action(text: &[u8]) -> Result<Action, DecodeError> {
    match plain_str(text, name(K_ACTION))? {
        b"snapshot" => Ok(Action::Snapshot),
        b"update" => Ok(Action::Update),
        _ => Err(DecodeError::OutOfRange(name(K_ACTION))),
    }
}

/// `checksum`: a signed 32-bit integer, or the unsigned form of one.
fn checksum(text: &[u8]) -> Result<i32, DecodeError> {
    let v = int(text, name(K_CHECKSUM))?;
    i32::try_from(v)
        .or_else(|_| u32::try_from(v).map(|u| u as i32))
        .map_err(|_| DecodeError::OutOfRange(name(K_CHECKSUM)))
}

/// A level row `[price, size]`; cells after the size are skipped.
#[inline]
fn bitget_level(bytes: &[u8], row: &Row, field: &'static str) -> Result<BitgetLevel, DecodeError> {
    let (price, qty) = text_level(bytes, row, field)?;
    Ok(BitgetLevel { price, qty, price_text: row.p.into(), size_text: row.q.into() })
}

/// One element of a trade push's `data`.
fn trade(t: &Fields<'_>) -> Result<BitgetTrade, DecodeError> {
    let trade_id = string_uint(t.req(K_TRADE_ID)?, name(K_TRADE_ID))?;
    let price = t.req_price(K_PRICE)?;
    let qty = t.req_qty(K_SIZE)?;
    let taker_sell = taker_sell(t.req(K_SIDE)?, name(K_SIDE))?;
    let ts_ms = string_ms(t.req(K_TS)?, name(K_TS))?;
    Ok(BitgetTrade { trade_id, price, qty, taker_sell, ts_ms })
}

/// Reads the rows of a candle push: each an array whose first cell is the start time as a
/// string; the other cells are skipped. Returns the row count and the latest start time.
fn candle_rows(bytes: &[u8], data: Span) -> Result<(usize, Option<i64>), DecodeError> {
    let field = name(K_DATA);
    let mut cur = array_at(bytes, data, field)?;
    let mut rows = Elements::new();
    let (mut row_count, mut newest_start_ms) = (0, None);
    while rows.next(&mut cur)? {
        cur.skip_ws();
        if cur.peek() != Some(b'[') {
            return Err(DecodeError::WrongType(field));
        }
        cur.expect(b'[')?;
        let mut cells = Elements::new();
        if !cells.next(&mut cur)? {
            return Err(DecodeError::WrongType(field));
        }
        let start_ms = string_ms(cur.skip_value()?.of(bytes), field)?;
        while cells.next(&mut cur)? {
            cur.skip_value()?;
        }
        row_count += 1;
        newest_start_ms = newest_start_ms.max(Some(start_ms));
    }
    Ok((row_count, newest_start_ms))
}

// ---------------------------------------------------------------------------------------------
// Book sync.

/// What [`BitgetBookSync`] did with a book push.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SyncOutcome {
    /// A snapshot replaced the book (whatever it held): the book is live at `seq`.
    Loaded {
        /// The snapshot's `seq`.
        seq: u64,
    },
    /// An update followed the last `seq` and was applied.
    Applied {
        /// The new last `seq`.
        seq: u64,
    },
    /// An update at or below the last `seq` (a duplicate or a late packet) was dropped; the book
    /// is unchanged and stays live.
    OutOfOrder {
        /// The update's `seq`.
        seq: u64,
        /// The last `seq` applied.
        last_seq: u64,
    },
    /// The first update since [`BitgetBookSync::new`] or [`BitgetBookSync::reset`] arrived before
    /// any snapshot: ignored. The venue sends a snapshot first, so one is asked for (once):
    /// resubscribe.
    UpdateBeforeSnapshot,
    /// An update arrived while a resubscribe is out (after a discard or
    /// [`SyncOutcome::UpdateBeforeSnapshot`]): ignored, the snapshot is awaited.
    AwaitingSnapshot,
    /// The update's positive `pseq` is not the last `seq`: the book was discarded. Resubscribe.
    Gap {
        /// The last `seq` applied.
        last_seq: u64,
        /// The update's `pseq`.
        pseq: i64,
    },
    /// The [`OUT_OF_ORDER_RUN_MAX`]-th update in a row below the last `seq`: the venue
    /// restarted its sequence. The book was discarded. Resubscribe.
    SequenceRestart {
        /// The last `seq` applied.
        last_seq: u64,
        /// The update's `seq`.
        seq: u64,
    },
    /// The checksum after applying differs from the venue's: the book was discarded.
    /// Resubscribe.
    ChecksumMismatch {
        /// The venue's `checksum`.
        expected: i32,
        /// The checksum of the local book.
        computed: i32,
    },
    /// The book was crossed after applying: it is corrupt and was discarded. Resubscribe.
    Crossed,
}

impl SyncOutcome {
    /// True when the book is not live and the caller must resubscribe (`unsubscribe` +
    /// `subscribe`) or reconnect to get a fresh snapshot. Each break asks once; updates after it
    /// say [`SyncOutcome::AwaitingSnapshot`].
    ///
    /// On `books1`/`books5`/`books15` every push is a snapshot, so the next push repairs the book
    /// by itself and a caller may skip the resubscribe there.
    pub fn wants_resubscribe(&self) -> bool {
        matches!(
            self,
            SyncOutcome::UpdateBeforeSnapshot
                | SyncOutcome::Gap { .. }
                | SyncOutcome::SequenceRestart { .. }
                | SyncOutcome::ChecksumMismatch { .. }
                | SyncOutcome::Crossed
        )
    }
}

/// Event counts of one [`BitgetBookSync`], for metrics.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SyncCounters {
    /// Snapshots loaded.
    pub snapshot_count: u64,
    /// Updates applied.
    pub update_count: u64,
    /// Updates dropped as out of order (`seq` at or below the last), the one that ended a run
    /// included.
    pub out_of_order_count: u64,
    /// Runs of out-of-order updates taken as a restarted sequence.
    pub sequence_restart_count: u64,
    /// Gaps in the `pseq` link.
    pub gap_count: u64,
    /// Checksums compared.
    pub checksum_checked_count: u64,
    /// Checksums that did not match.
    pub checksum_mismatch_count: u64,
    /// Checksums skipped because the level text store had dropped levels and holds fewer than
    /// [`CHECKSUM_LEVELS`](super::checksum::CHECKSUM_LEVELS) on a side (see
    /// [`BitgetBookSync::new`]).
    pub checksum_unverifiable_count: u64,
    /// Books found crossed.
    pub crossed_count: u64,
    /// Updates ignored because no book was loaded.
    pub awaiting_count: u64,
}

/// Where the sync stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// No book and no resubscribe asked for: after construction or a reset.
    Idle,
    /// No book; a resubscribe was asked for.
    Awaiting,
    /// A book is loaded; `last_seq` is the last `seq` applied.
    Live { last_seq: u64 },
}

/// Keeps one [`Book`] in sync with a Bitget book channel (`books`, or one of
/// `books1`/`books5`/`books15`), following venues.md §4.2 "Adapter algorithm".
///
/// Sans-I/O: pushes come in as values, outcomes go out; the caller subscribes, resubscribes and
/// reconnects, and calls [`BitgetBookSync::reset`] on every reconnect. The same `Book` must be
/// passed to every call. Whenever the machine stops being live it clears the book, so a book that
/// is not live is never served half-built.
///
/// Per push: a snapshot always replaces the book (venues.md §6 item 21). An update is ignored
/// without a book; dropped when its `seq` is at or below the last; a gap when its `pseq` is
/// positive and not the last `seq`; otherwise applied (size zero removes a level, removing an
/// absent level is a no-op) and its `seq` becomes the last. Then the checksum is verified when
/// present, non-zero and enabled, and a crossed book is corrupt; both discard the book.
///
/// Bounds: besides the `Book`, the sync keeps each level's original price and size text for the
/// checksum, for the best `text_levels_max` levels per side, in slots of
/// [`LEVEL_TEXT_LEN_MAX`](super::checksum::LEVEL_TEXT_LEN_MAX) bytes allocated in
/// [`BitgetBookSync::new`]; no call allocates after that. At the bound the farthest level is
/// dropped (like [`Book`]); once a side has dropped levels and then holds fewer than
/// [`CHECKSUM_LEVELS`](super::checksum::CHECKSUM_LEVELS), its checksum cannot be computed: the
/// check is skipped and counted in [`SyncCounters::checksum_unverifiable_count`] until the next
/// snapshot.
#[derive(Clone, Debug)]
pub struct BitgetBookSync {
    state: State,
    /// Updates in a row with `seq` below the last.
    out_of_order_run: u32,
    verify_checksum: bool,
    texts: TextBook,
    counters: SyncCounters,
}

impl BitgetBookSync {
    /// A sync keeping the text of the best `text_levels_max` levels per side (at least
    /// [`CHECKSUM_LEVELS`](super::checksum::CHECKSUM_LEVELS)); non-zero checksums are verified
    /// when `verify_checksum` is true.
    pub fn new(text_levels_max: usize, verify_checksum: bool) -> BitgetBookSync {
        BitgetBookSync {
            state: State::Idle,
            out_of_order_run: 0,
            verify_checksum,
            texts: TextBook::new(text_levels_max),
            counters: SyncCounters::default(),
        }
    }

    /// True when a book is loaded and in sync.
    pub fn is_live(&self) -> bool {
        matches!(self.state, State::Live { .. })
    }

    /// The last `seq` applied, when live.
    pub fn last_seq(&self) -> Option<u64> {
        match self.state {
            State::Live { last_seq } => Some(last_seq),
            State::Idle | State::Awaiting => None,
        }
    }

    /// Event counts so far.
    pub fn counters(&self) -> &SyncCounters {
        &self.counters
    }

    /// The checksum of the local book as the venue computes it (venues.md §3.3).
    pub fn checksum(&self) -> i32 {
        self.texts.checksum()
    }

    /// Back to the start (a new connection): clears the book; updates are ignored until a
    /// snapshot arrives.
    pub fn reset(&mut self, book: &mut Book) {
        self.discard(book);
        self.state = State::Idle;
    }

    /// Handles one decoded book push of the channel.
    pub fn on_book(&mut self, push: &BookPush<'_>, book: &mut Book) -> SyncOutcome {
        let seq = push.seq;
        let outcome = if push.replaces_book() {
            book.clear();
            self.texts.clear();
            self.apply(push, book);
            self.counters.snapshot_count += 1;
            SyncOutcome::Loaded { seq }
        } else {
            let last_seq = match self.state {
                State::Live { last_seq } => last_seq,
                State::Idle => {
                    self.counters.awaiting_count += 1;
                    self.state = State::Awaiting;
                    return SyncOutcome::UpdateBeforeSnapshot;
                }
                State::Awaiting => {
                    self.counters.awaiting_count += 1;
                    return SyncOutcome::AwaitingSnapshot;
                }
            };
            if seq <= last_seq {
                self.counters.out_of_order_count += 1;
                if seq < last_seq {
                    self.out_of_order_run += 1;
                    if self.out_of_order_run >= OUT_OF_ORDER_RUN_MAX {
                        self.counters.sequence_restart_count += 1;
                        self.discard(book);
                        return SyncOutcome::SequenceRestart { last_seq, seq };
                    }
                }
                return SyncOutcome::OutOfOrder { seq, last_seq };
            }
            if let Some(pseq) = push.pseq.filter(|&p| p > 0) {
                if u64::try_from(pseq) != Ok(last_seq) {
                    self.counters.gap_count += 1;
                    self.discard(book);
                    return SyncOutcome::Gap { last_seq, pseq };
                }
            }
            self.apply(push, book);
            self.counters.update_count += 1;
            SyncOutcome::Applied { seq }
        };
        self.state = State::Live { last_seq: seq };
        self.out_of_order_run = 0;
        match self.texts.check(push.checksum, self.verify_checksum) {
            Check::Skipped => {}
            Check::Unverifiable => self.counters.checksum_unverifiable_count += 1,
            Check::Match => self.counters.checksum_checked_count += 1,
            Check::Mismatch { expected, computed } => {
                self.counters.checksum_checked_count += 1;
                self.counters.checksum_mismatch_count += 1;
                self.discard(book);
                return SyncOutcome::ChecksumMismatch { expected, computed };
            }
        }
        if book.is_crossed() {
            self.counters.crossed_count += 1;
            self.discard(book);
            return SyncOutcome::Crossed;
        }
        outcome
    }

    /// Applies the push's levels to the book and the text store; size zero removes, removal of
    /// an absent level is a no-op.
    fn apply(&mut self, push: &BookPush<'_>, book: &mut Book) {
        for (side, levels) in [(Side::Bid, push.bids), (Side::Ask, push.asks)] {
            for l in levels {
                book.apply(side, l.price, l.qty);
                self.texts.apply(side, l.price, l.qty, push.price_text(l), push.size_text(l));
            }
        }
    }

    /// Leaves the live state with a resubscribe asked for: clears the book and the text store.
    fn discard(&mut self, book: &mut Book) {
        self.state = State::Awaiting;
        self.out_of_order_run = 0;
        self.texts.clear();
        book.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn book_channels_round_trip_their_names() {
        for c in [BookChannel::Books, BookChannel::Books1, BookChannel::Books5, BookChannel::Books15] {
            assert_eq!(BookChannel::from_name(c.name().as_bytes()), Some(c));
        }
        assert_eq!(BookChannel::from_name(b"books50"), None);
        assert_eq!(BookChannel::Books5.depth(), Some(5));
        assert_eq!(BookChannel::Books.depth(), None);
    }

    #[test]
    fn checksum_reads_the_signed_and_the_unsigned_form() {
        assert_eq!(checksum(b"-1504501796"), Ok(-1_504_501_796));
        assert_eq!(checksum(b"2790465500"), Ok(-1_504_501_796));
        assert_eq!(checksum(b"0"), Ok(0));
        assert_eq!(checksum(b"4294967296"), Err(DecodeError::OutOfRange("checksum")));
        assert_eq!(checksum(b"-2147483649"), Err(DecodeError::OutOfRange("checksum")));
        assert_eq!(checksum(b"1.5"), Err(DecodeError::WrongType("checksum")));
    }

    #[test]
    fn sequence_restart_needs_a_run_of_lower_seqs() {
        let frame = br#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"books","instId":"BTCUSDT"},"data":[{"asks":[["2","1"]],"bids":[["1","1"]],"seq":100,"ts":"1"}]}"#;
        let mut d = BitgetDecoder::new(4, 1);
        let mut s = BitgetBookSync::new(super::super::checksum::CHECKSUM_LEVELS, true);
        let mut book = Book::new(8);
        let Ok(Message::Book(snapshot)) = d.decode(frame) else { panic!("snapshot") };
        assert_eq!(s.on_book(&snapshot, &mut book), SyncOutcome::Loaded { seq: 100 });
        let update = |seq| BookPush { action: Some(Action::Update), seq, bids: &[], asks: &[], ..snapshot };
        for i in 1..OUT_OF_ORDER_RUN_MAX {
            // A repeat of the last seq between them neither counts nor breaks the run.
            assert_eq!(s.on_book(&update(100), &mut book), SyncOutcome::OutOfOrder { seq: 100, last_seq: 100 });
            assert_eq!(
                s.on_book(&update(u64::from(i)), &mut book),
                SyncOutcome::OutOfOrder { seq: u64::from(i), last_seq: 100 }
            );
        }
        let out = s.on_book(&update(7), &mut book);
        assert_eq!(out, SyncOutcome::SequenceRestart { last_seq: 100, seq: 7 });
        assert!(out.wants_resubscribe() && !s.is_live() && book.bids().is_empty());
        assert_eq!(s.counters().sequence_restart_count, 1);
    }
}
