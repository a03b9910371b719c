//! OKX v5 spot: a decoder for public WebSocket messages and the `books` sync state machine
//! (`seqId`/`prevSeqId` chain plus CRC-32 checksum) of venues.md §3.2 and §3.3.
//!
//! Decoding: [`OkxDecoder::decode`] takes the bytes of one WebSocket text message received on
//! the public URL (`wss://ws.okx.com:8443/ws/v5/public`) and returns a [`Message`]: a book push
//! (`books`, `books5`, `bbo-tbt`, `books-l2-tbt`, `books50-l2-tbt`, `books-elp`), a `trades`
//! push, an `event` reply (`subscribe`, `unsubscribe`, `error`, `notice`) or the text `pong`.
//! Prices and sizes arrive as JSON strings and are parsed once into [`Price`] and [`Qty`]; each
//! level also keeps where its price and size text lie in the message ([`TextSpan`]), because the
//! checksum is computed over the venue's own text, never over re-formatted numbers. Levels and
//! trades go into buffers owned by the decoder and sized at construction, so decoding allocates
//! nothing. Key order does not matter; unknown keys are skipped.
//!
//! Syncing: [`OkxBookSync`] drives a [`Book`] from decoded `books` pushes. It never subscribes:
//! when the chain breaks it says so ([`SyncOutcome::wants_resubscribe`]) and the caller sends
//! `unsubscribe` + `subscribe` (which returns a fresh snapshot) or reconnects.
//!
//! Choices where venues.md is silent or ambiguous, and why:
//! - A message is a snapshot when `action` is `"snapshot"`; its `prevSeqId` is not checked
//!   (the doc says it is `-1`). An `update` carrying `prevSeqId = -1` is not a snapshot: it
//!   fails the chain check (no `seqId` is ever `-1`) and is a gap. Rationale: `action` is the
//!   explicit signal, and `-1` must stay distinct from `0` (venues.md §6 item 15).
//! - The idle heartbeat (`prevSeqId == seqId ==` last, both sides empty) is a no-op reported as
//!   [`SyncOutcome::Heartbeat`]; its checksum, when present and non-zero, is still verified.
//! - A reset (`seqId < prevSeqId`) is accepted when its `prevSeqId` chains; it is applied and
//!   reported as [`SyncOutcome::Reset`]. A reset that does not chain is a gap like any other.
//! - A push without `action`, `seqId` or `prevSeqId` (`books5`, `bbo-tbt`) cannot be chained;
//!   the sync refuses it ([`SyncOutcome::Unsequenced`]) without touching the book.
//! - The checksum is checked after the whole message is applied; a checksum of `0` or an absent
//!   one is skipped (venues.md §3.3 caveat). Then a crossed book is corrupt; both discard it.
//!   Rationale: venues.md notes a call auction can cross the book; the brief treats a crossed
//!   book as corrupt, so a resubscribe is asked for.
//! - A book push whose `data` does not hold exactly one object is refused
//!   ([`DecodeError::OutOfRange`] on `data`); OKX sends one book per push.

use super::arg_data::{side, walk, ArgData, Buffers, ChannelKind, Walked};
use super::checksum::{text_level, Check, TextBook};
use super::{
    int, int_or_string, plain_str, str_field, string_ms, string_uint, taker_sell, DecodeBuffers, DecodeError, KeySet,
    Row,
};
use crate::book::{Book, Side};
use crate::fixed::{Price, Qty};

pub use super::checksum::{book_checksum, crc32, Crc32, TextSpan, CHECKSUM_LEVELS, LEVEL_TEXT_LEN_MAX};

/// Depth of the `books` channel: the snapshot holds up to 400 levels per side, and updates keep
/// the venue's book at that depth. A sync built with this `text_levels_max` checks every
/// checksum exactly.
pub const BOOKS_LEVELS_PER_SIDE_MAX: usize = 400;

/// Longest canonical symbol [`CanonicalSymbol::from_inst_id`] produces, in bytes.
pub const SYMBOL_LEN_MAX: usize = 32;

// ---------------------------------------------------------------------------------------------
// Decoded values.

/// One book level: `[price, size, "0", orders]`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OkxLevel {
    /// Index 0, the price.
    pub price: Price,
    /// Index 1, the size (base currency for spot); zero removes the level.
    pub qty: Qty,
    /// Index 3, the number of orders at the level, when sent. Index 2 is deprecated (always
    /// `"0"`) and is never read as a count (venues.md §3.2).
    pub orders: Option<u64>,
    /// Where the price string's content lies in the message.
    pub price_text: TextSpan,
    /// Where the size string's content lies in the message.
    pub size_text: TextSpan,
}

/// `action` of a book push.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BookAction {
    /// `"snapshot"`: the full book.
    Snapshot,
    /// `"update"`: changed levels only.
    Update,
}

/// A book push (`data[0]` of a `books*` / `bbo-tbt` channel message).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BookPush<'a> {
    /// `arg.channel`, raw (`books`, `books5`, ...).
    pub channel: &'a [u8],
    /// `arg.instId`, raw (`BTC-USDT`).
    pub inst_id: &'a [u8],
    /// `action`; absent on `books5` and `bbo-tbt`.
    pub action: Option<BookAction>,
    /// `ts`, Unix milliseconds.
    pub ts_ms: i64,
    /// `checksum`, the venue's signed CRC-32; absent on `books5` and `bbo-tbt`.
    pub checksum: Option<i32>,
    /// `seqId`.
    pub seq_id: Option<i64>,
    /// `prevSeqId` (`-1` on a snapshot).
    pub prev_seq_id: Option<i64>,
    /// `bids`, in message order (best first on a snapshot).
    pub bids: &'a [OkxLevel],
    /// `asks`, in message order (best first on a snapshot).
    pub asks: &'a [OkxLevel],
    /// The whole message, which the levels' [`TextSpan`]s index.
    pub frame: &'a [u8],
}

impl<'a> BookPush<'a> {
    /// The original price text of a level of this push.
    pub fn price_text(&self, level: &OkxLevel) -> &'a [u8] {
        level.price_text.of(self.frame)
    }

    /// The original size text of a level of this push.
    pub fn size_text(&self, level: &OkxLevel) -> &'a [u8] {
        level.size_text.of(self.frame)
    }
}

/// One element of a `trades` push: an aggregation of fills of one taker order at one price.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OkxTrade {
    /// `tradeId`, the **last** trade id of the aggregation.
    pub trade_id: u64,
    /// `px`.
    pub price: Price,
    /// `sz`, base currency for spot.
    pub qty: Qty,
    /// `side` is `"sell"`: the taker sold.
    pub taker_sell: bool,
    /// `ts`, Unix milliseconds.
    pub ts_ms: i64,
    /// `count`, fills aggregated (absent on `trades-all`).
    pub count: Option<u64>,
    /// `seqId` (absent on `trades-all`).
    pub seq_id: Option<i64>,
}

/// One decoded message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Message<'a> {
    /// A book push.
    Book(BookPush<'a>),
    /// A `trades` (or `trades-all`) push.
    Trades {
        /// `arg.channel`, raw.
        channel: &'a [u8],
        /// `arg.instId`, raw.
        inst_id: &'a [u8],
        /// The trades, in message order.
        trades: &'a [OkxTrade],
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
    /// `event: "error"`, e.g. code 60012 (invalid request) or 64001 (wrong URL).
    Error {
        /// `code` (a string on the wire).
        code: i64,
        /// `msg`, raw string content (escapes not decoded).
        msg: &'a [u8],
    },
    /// `event: "notice"`; code 64008 means the connection closes in about 60 s for a service
    /// upgrade: reconnect.
    Notice {
        /// `code`.
        code: i64,
        /// `msg`, raw.
        msg: &'a [u8],
    },
    /// The text `pong`, the reply to the text `ping`.
    Pong,
    /// A well-formed object of a kind this decoder does not read (another event, a candle or
    /// ticker push); `event` and `channel` are given when present.
    Other {
        /// `event`, raw.
        event: Option<&'a [u8]>,
        /// `arg.channel`, raw.
        channel: Option<&'a [u8]>,
    },
}

impl Message<'_> {
    /// True for a `notice` with code 64008 (service upgrade: reconnect within 60 s).
    pub fn is_upgrade_notice(&self) -> bool {
        matches!(self, Message::Notice { code: 64008, .. })
    }
}

/// A canonical `BASEQUOTE` symbol built from an OKX `instId` (venues.md §5), held inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CanonicalSymbol {
    bytes: [u8; SYMBOL_LEN_MAX],
    len: usize,
}

impl CanonicalSymbol {
    /// `BTC-USDT` → `BTCUSDT`: removes the one `-` between base and quote.
    ///
    /// `None` unless `inst_id` is `BASE-QUOTE` with exactly one `-`, a non-empty base and quote
    /// of ASCII letters and digits, and at most [`SYMBOL_LEN_MAX`] bytes once joined.
    /// Rationale: spot instIds have this shape; anything else (a swap `BTC-USDT-SWAP`, an
    /// escape) is not a spot pair and must not be guessed at.
    pub fn from_inst_id(inst_id: &[u8]) -> Option<CanonicalSymbol> {
        let dash = inst_id.iter().position(|&b| b == b'-')?;
        let (base, quote) = (inst_id.get(..dash)?, inst_id.get(dash + 1..)?);
        if base.is_empty() || quote.is_empty() || base.len() + quote.len() > SYMBOL_LEN_MAX {
            return None;
        }
        if !base.iter().chain(quote).all(u8::is_ascii_alphanumeric) {
            return None;
        }
        let mut out = CanonicalSymbol { bytes: [0; SYMBOL_LEN_MAX], len: 0 };
        for &b in base.iter().chain(quote) {
            *out.bytes.get_mut(out.len)? = b;
            out.len += 1;
        }
        Some(out)
    }

    /// The symbol's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

// ---------------------------------------------------------------------------------------------
// Decoder.

/// Decodes OKX v5 public messages into borrowed values, reusing its level and trade buffers.
#[derive(Clone, Debug)]
pub struct OkxDecoder {
    buffers: DecodeBuffers<OkxLevel, OkxTrade>,
}

impl OkxDecoder {
    /// A decoder holding at most `levels_max` levels per side and `trades_max` trades per push.
    ///
    /// At either bound a message is refused with [`DecodeError::TooManyLevels`] (on `bids`,
    /// `asks`, or `data` for trades). Use [`BOOKS_LEVELS_PER_SIDE_MAX`] for `books`.
    pub fn new(levels_max: usize, trades_max: usize) -> OkxDecoder {
        OkxDecoder { buffers: DecodeBuffers::new(levels_max, trades_max) }
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
        if frame.trim_ascii() == b"pong" {
            return Ok(Message::Pong);
        }
        let DecodeBuffers { levels_max, trades_max, bids, asks, trades, hints } = &mut self.buffers;
        let buffers = Buffers { levels_max: *levels_max, trades_max: *trades_max, bids, asks, trades };
        let mut walked = Walked::<Wire, { KEYS.len() }>::new(frame);
        walk(&mut walked, buffers, hints)?;
        let (outer, arg) = (&walked.outer, walked.arg()?);
        if let Some(event) = outer.get(K_EVENT) {
            let event = plain_str(event, name(K_EVENT))?;
            return match event {
                b"subscribe" | b"unsubscribe" => {
                    let arg = arg.ok_or(DecodeError::MissingField(name(K_ARG)))?;
                    let channel = plain_str(arg.req(K_CHANNEL)?, name(K_CHANNEL))?;
                    let inst_id = arg.get(K_INST_ID).map(|v| plain_str(v, name(K_INST_ID))).transpose()?.unwrap_or(b"");
                    Ok(Message::Subscribed { subscribed: event == b"subscribe", channel, inst_id })
                }
                b"error" | b"notice" => {
                    let code = int_or_string(outer.req(K_CODE)?, name(K_CODE))?;
                    let msg = str_field(outer.req(K_MSG)?, name(K_MSG))?;
                    Ok(if event == b"error" { Message::Error { code, msg } } else { Message::Notice { code, msg } })
                }
                _ => {
                    let channel =
                        arg.and_then(|a| a.get(K_CHANNEL)).map(|v| plain_str(v, name(K_CHANNEL))).transpose()?;
                    Ok(Message::Other { event: Some(event), channel })
                }
            };
        }
        let Some(arg) = arg else {
            return Ok(Message::Other { event: None, channel: None });
        };
        let channel = plain_str(arg.req(K_CHANNEL)?, name(K_CHANNEL))?;
        let Some(kind) = channel_kind(channel) else {
            return Ok(Message::Other { event: None, channel: Some(channel) });
        };
        let inst_id = plain_str(arg.req(K_INST_ID)?, name(K_INST_ID))?;
        let data = outer.req_span(K_DATA)?;
        if kind == ChannelKind::Trades {
            walked.trades(data, *trades_max, trades)?;
            let trades: &'a Vec<OkxTrade> = trades;
            return Ok(Message::Trades { channel, inst_id, trades });
        }
        let mut lazy = None;
        let (book, bids_read, asks_read) = walked.book(data, &mut lazy)?;
        let action = match outer.get(K_ACTION) {
            None => None,
            Some(a) => match plain_str(a, name(K_ACTION))? {
                b"snapshot" => Some(BookAction::Snapshot),
                b"update" => Some(BookAction::Update),
                _ => return Err(DecodeError::OutOfRange(name(K_ACTION))),
            },
        };
        let ts_ms = string_ms(book.req(K_TS)?, name(K_TS))?;
        let checksum = match book.get(K_CHECKSUM) {
            None => None,
            Some(v) => {
                Some(i32::try_from(int(v, name(K_CHECKSUM))?).map_err(|_| DecodeError::OutOfRange(name(K_CHECKSUM)))?)
            }
        };
        let seq_id = book.get(K_SEQ_ID).map(|v| int(v, name(K_SEQ_ID))).transpose()?;
        let prev_seq_id = book.get(K_PREV_SEQ_ID).map(|v| int(v, name(K_PREV_SEQ_ID))).transpose()?;
        side::<Wire, { KEYS.len() }>(book, K_BIDS, bids_read, *levels_max, bids)?;
        side::<Wire, { KEYS.len() }>(book, K_ASKS, asks_read, *levels_max, asks)?;
        let bids: &'a Vec<OkxLevel> = bids;
        let asks: &'a Vec<OkxLevel> = asks;
        Ok(Message::Book(BookPush {
            channel,
            inst_id,
            action,
            ts_ms,
            checksum,
            seq_id,
            prev_seq_id,
            bids,
            asks,
            frame,
        }))
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
    K_SEQ_ID = b"seqId",
    K_PREV_SEQ_ID = b"prevSeqId",
    K_TRADE_ID = b"tradeId",
    K_PX = b"px",
    K_SZ = b"sz",
    K_SIDE = b"side",
    K_COUNT = b"count",
}

/// Where each key of [`KEYS`] lies in one object.
type Fields<'a> = super::Fields<'a, { KEYS.len() }>;

fn channel_kind(channel: &[u8]) -> Option<ChannelKind> {
    match channel {
        b"books" | b"books5" | b"bbo-tbt" | b"books-l2-tbt" | b"books50-l2-tbt" | b"books-elp" => {
            Some(ChannelKind::Book)
        }
        b"trades" | b"trades-all" => Some(ChannelKind::Trades),
        _ => None,
    }
}

/// OKX's pushes in the shared `{arg, data}` shape.
enum Wire {}

impl ArgData<{ KEYS.len() }> for Wire {
    type Level = OkxLevel;
    type Trade = OkxTrade;
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
        channel_kind(channel)
    }

    #[inline]
    fn level(bytes: &[u8], row: &Row, field: &'static str) -> Result<OkxLevel, DecodeError> {
        okx_level(bytes, row, field)
    }

    #[inline]
    fn trade(f: &Fields<'_>) -> Result<OkxTrade, DecodeError> {
        trade(f)
    }
}

/// One element of a trades push's `data`.
fn trade(f: &Fields<'_>) -> Result<OkxTrade, DecodeError> {
    let trade_id = string_uint(f.req(K_TRADE_ID)?, name(K_TRADE_ID))?;
    let price = f.req_price(K_PX)?;
    let qty = f.req_qty(K_SZ)?;
    let taker_sell = taker_sell(f.req(K_SIDE)?, name(K_SIDE))?;
    let ts_ms = string_ms(f.req(K_TS)?, name(K_TS))?;
    let count = f.get(K_COUNT).map(|v| string_uint(v, name(K_COUNT))).transpose()?;
    let seq_id = f.get(K_SEQ_ID).map(|v| int(v, name(K_SEQ_ID))).transpose()?;
    Ok(OkxTrade { trade_id, price, qty, taker_sell, ts_ms, count, seq_id })
}

/// A level row `[price, size, "0", orders]`. Index 2 is deprecated: skipped, never read as a
/// count.
#[inline]
fn okx_level(bytes: &[u8], row: &Row, field: &'static str) -> Result<OkxLevel, DecodeError> {
    let orders = match row.extra().get(1) {
        Some(cell) => Some(string_uint(cell.of(bytes), name(K_COUNT)).map_err(|_| DecodeError::BadLevel(field))?),
        None => None,
    };
    let (price, qty) = text_level(bytes, row, field)?;
    Ok(OkxLevel { price, qty, orders, price_text: row.p.into(), size_text: row.q.into() })
}

// ---------------------------------------------------------------------------------------------
// Book sync.

/// What [`OkxBookSync`] did with a book push.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SyncOutcome {
    /// A snapshot was loaded: the book is live at `seq_id`.
    Loaded {
        /// The snapshot's `seqId`.
        seq_id: i64,
    },
    /// An update chained and was applied.
    Applied {
        /// The new last `seqId`.
        seq_id: i64,
    },
    /// The idle heartbeat (`prevSeqId == seqId ==` last, no levels): nothing changed.
    Heartbeat {
        /// The unchanged last `seqId`.
        seq_id: i64,
    },
    /// A maintenance reset (`seqId < prevSeqId`) chained and was applied; the chain continues
    /// from the new, lower `seq_id`.
    Reset {
        /// The update's `prevSeqId` (the old last `seqId`).
        prev_seq_id: i64,
        /// The new last `seqId`.
        seq_id: i64,
    },
    /// An update arrived while no book is loaded (before the first snapshot or after a
    /// discard): ignored, a snapshot is awaited.
    AwaitingSnapshot,
    /// The update's `prevSeqId` is not the last `seqId`: the book was discarded. Resubscribe.
    Gap {
        /// The last `seqId` held.
        expected_prev_seq_id: i64,
        /// The update's `prevSeqId`.
        prev_seq_id: i64,
    },
    /// A push without `action`, `seqId` or `prevSeqId` (e.g. `books5`): it cannot be chained
    /// and was not applied. The book is unchanged.
    Unsequenced,
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
    /// True when the book was discarded and the caller must resubscribe (`unsubscribe` +
    /// `subscribe`) or reconnect to get a fresh snapshot.
    pub fn wants_resubscribe(&self) -> bool {
        matches!(self, SyncOutcome::Gap { .. } | SyncOutcome::ChecksumMismatch { .. } | SyncOutcome::Crossed)
    }
}

/// Event counts of one [`OkxBookSync`], for metrics.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SyncCounters {
    /// Snapshots loaded.
    pub snapshot_count: u64,
    /// Updates applied (resets included, heartbeats excluded).
    pub update_count: u64,
    /// Idle heartbeats seen.
    pub heartbeat_count: u64,
    /// Sequence resets accepted.
    pub reset_count: u64,
    /// Gaps in the `prevSeqId` chain.
    pub gap_count: u64,
    /// Checksums compared.
    pub checksum_checked_count: u64,
    /// Checksums that did not match.
    pub checksum_mismatch_count: u64,
    /// Checksums skipped because the level text store had dropped levels and holds fewer than
    /// [`CHECKSUM_LEVELS`] on a side (see [`OkxBookSync::new`]).
    pub checksum_unverifiable_count: u64,
    /// Books found crossed.
    pub crossed_count: u64,
    /// Updates ignored while awaiting a snapshot.
    pub awaiting_count: u64,
    /// Pushes refused as unsequenced.
    pub unsequenced_count: u64,
}

/// Keeps one [`Book`] in sync with an OKX `books` (or `books-l2-tbt`, `books50-l2-tbt`) channel,
/// following venues.md §3.2 "Adapter algorithm" and §3.3.
///
/// Sans-I/O: pushes come in as values, outcomes go out; the caller subscribes and reconnects.
/// The same `Book` must be passed to every call. Whenever the machine stops being live it
/// clears the book, so a book that is not live is never served half-built.
///
/// Bounds: besides the `Book`, the sync keeps each level's original price and size text for the
/// checksum, for the best `text_levels_max` levels per side, in slots of
/// [`LEVEL_TEXT_LEN_MAX`] bytes allocated in [`OkxBookSync::new`]; no call allocates after
/// that. At the bound the farthest level is dropped (like [`Book`]). With
/// `text_levels_max >= `[`BOOKS_LEVELS_PER_SIDE_MAX`] nothing is ever dropped on `books`. With
/// less, once a side has dropped levels and then holds fewer than [`CHECKSUM_LEVELS`], its
/// checksum cannot be computed (deeper levels are unknown, venues.md §6 item 14): the check is
/// skipped and counted in [`SyncCounters::checksum_unverifiable_count`] until the next snapshot.
#[derive(Clone, Debug)]
pub struct OkxBookSync {
    /// The last `seqId` applied, when a book is loaded.
    last_seq_id: Option<i64>,
    verify_checksum: bool,
    texts: TextBook,
    counters: SyncCounters,
}

impl OkxBookSync {
    /// A sync keeping the text of the best `text_levels_max` levels per side (at least
    /// [`CHECKSUM_LEVELS`]); checksums are verified when `verify_checksum` is true.
    pub fn new(text_levels_max: usize, verify_checksum: bool) -> OkxBookSync {
        OkxBookSync {
            last_seq_id: None,
            verify_checksum,
            texts: TextBook::new(text_levels_max),
            counters: SyncCounters::default(),
        }
    }

    /// True when a book is loaded and in sync.
    pub fn is_live(&self) -> bool {
        self.last_seq_id.is_some()
    }

    /// The last `seqId` applied, when live.
    pub fn last_seq_id(&self) -> Option<i64> {
        self.last_seq_id
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
    }

    /// Handles one decoded book push.
    pub fn on_book(&mut self, push: &BookPush<'_>, book: &mut Book) -> SyncOutcome {
        let (Some(action), Some(seq_id), Some(prev_seq_id)) = (push.action, push.seq_id, push.prev_seq_id) else {
            self.counters.unsequenced_count += 1;
            return SyncOutcome::Unsequenced;
        };
        let outcome = match action {
            BookAction::Snapshot => {
                book.clear();
                self.texts.clear();
                self.apply(push, book);
                self.counters.snapshot_count += 1;
                SyncOutcome::Loaded { seq_id }
            }
            BookAction::Update => {
                let Some(last) = self.last_seq_id else {
                    self.counters.awaiting_count += 1;
                    return SyncOutcome::AwaitingSnapshot;
                };
                if prev_seq_id != last {
                    self.counters.gap_count += 1;
                    self.discard(book);
                    return SyncOutcome::Gap { expected_prev_seq_id: last, prev_seq_id };
                }
                if seq_id == prev_seq_id && push.bids.is_empty() && push.asks.is_empty() {
                    self.counters.heartbeat_count += 1;
                    SyncOutcome::Heartbeat { seq_id }
                } else {
                    self.apply(push, book);
                    self.counters.update_count += 1;
                    if seq_id < prev_seq_id {
                        self.counters.reset_count += 1;
                        SyncOutcome::Reset { prev_seq_id, seq_id }
                    } else {
                        SyncOutcome::Applied { seq_id }
                    }
                }
            }
        };
        self.last_seq_id = Some(seq_id);
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
        for l in push.bids {
            book.apply(Side::Bid, l.price, l.qty);
            self.texts.apply(Side::Bid, l.price, l.qty, push.price_text(l), push.size_text(l));
        }
        for l in push.asks {
            book.apply(Side::Ask, l.price, l.qty);
            self.texts.apply(Side::Ask, l.price, l.qty, push.price_text(l), push.size_text(l));
        }
    }

    /// Leaves the live state: clears the book and the text store.
    fn discard(&mut self, book: &mut Book) {
        self.last_seq_id = None;
        self.texts.clear();
        book.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_symbol_removes_the_dash() {
        let s = CanonicalSymbol::from_inst_id(b"BTC-USDT").expect("spot pair");
        assert_eq!(s.as_bytes(), b"BTCUSDT");
        for bad in [&b"BTCUSDT"[..], b"-USDT", b"BTC-", b"BTC-USDT-SWAP", b"BT\\C-USDT", b""] {
            assert_eq!(CanonicalSymbol::from_inst_id(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        let long = [b'A'; SYMBOL_LEN_MAX];
        let mut id = long.to_vec();
        id.extend_from_slice(b"-B");
        assert_eq!(CanonicalSymbol::from_inst_id(&id), None);
    }
}
