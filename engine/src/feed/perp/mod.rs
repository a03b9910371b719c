//! The venues' USDT-perpetual frames (decisions §17, venues.md §8), sans-I/O: one decoder per
//! venue turns one WebSocket text message (or, for Binance open interest, one REST body) into a
//! [`PerpMessage`] of liquidations, contract updates (mark, index, funding, open interest), a
//! control reply or a pong.
//!
//! Every decoder owns two buffers sized at construction, one of liquidations and one of
//! updates; the message it returns borrows them and the frame, so decoding allocates nothing.
//! Malformed input (truncated, wrong types, missing fields, garbage, nesting deeper than
//! [`NESTING_MAX`](super::NESTING_MAX)) is a [`DecodeError`], never a panic; a well-formed
//! message of a kind the decoder does not read is [`PerpMessage::Other`].
//!
//! Output, shared by the four venues:
//! - [`Liquidation`]: the side of the **position** liquidated (`PositionSide::of` maps each
//!   venue's convention: Binance `SELL`, Bybit `Buy`, OKX `sell` are longs), price, quantity and
//!   its unit ([`QtyUnit`]: base units, except OKX, which sends contracts that the caller
//!   multiplies by the instrument's `ctVal`), and the venue's time.
//! - [`Update`]: a partial update of one contract: every value is an `Option`, `Some` when the
//!   message carries it, so the caller merges it into what it holds (a Bybit ticker delta carries
//!   only what changed; Binance's mark-price stream has no open interest; ...). Funding rates are
//!   the venue's **fraction** per its own interval (`0.0001` = 0.01 %), as sent.
//! - Each item comes as an [`Entry`]: the venue's contract id (`BTCUSDT`, `BTC-USDT-SWAP`),
//!   borrowed from the frame, and the value.
//!
//! Numbers are `f64`. Rationale: the values span meme-coin prices of 1e-9 and open interest of
//! 1e13 base units (OKX `oiCcy` of PEPE), beyond the 8 decimals and 9.2e10 range of
//! [`crate::fixed`]; they are never book keys, and every consumer (`perp_window`, `perp_book`)
//! computes in `f64` USD. A value is a JSON string holding `-?digits[.digits][e[+-]digits]`
//! (validated here, then read by the standard library's exactly rounded parser); anything else
//! is refused ([`DecodeError::WrongType`] for a bare number, [`DecodeError::BadDecimal`] for a
//! bad string, [`DecodeError::OutOfRange`] for a price not above zero, a negative quantity or an
//! infinite value).
//!
//! Choices where venues.md is silent, and why:
//! - **Bound on items.** A decoder holds at most `liquidations_max` liquidations and
//!   `updates_max` updates of one message ([`LIQUIDATIONS_PER_MESSAGE_MAX`],
//!   [`UPDATES_PER_MESSAGE_MAX`] in production). At the bound it keeps the first ones, in message
//!   order, and counts the rest ([`Batch::dropped`]); every item is still validated, so a message
//!   is accepted or refused the same whatever the bound. Rationale: refusing a whole cascade's
//!   message would lose the liquidations it could hold; the count lets the caller say so.
//! - **An empty string is an absent value** where the value is optional (Binance `r` of a
//!   delivery contract, Bybit and OKX fields the venue has no value for); a required value that
//!   is an empty string is refused. A zero time (Binance `T` of a delivery contract) is absent.
//! - Decoding reads each object on the general path (`Fields`: one scan that notes where known
//!   keys lie, then reads them); nested objects are scanned again from their span. Rationale:
//!   perpetual frames come at most every 100 ms per contract, so the spot decoders' single-pass
//!   machinery (key hints, deferred errors) would buy nothing here but code.

use super::{object_start, plain_str, str_raw, Cursor, DecodeError, Elements, Fields, JsonErrorKind, Span};
use crate::perp_window::PositionSide;

/// A decoder's key table, written once: `perp_keys! { K_DATA = b"data", ... }` is the feed's
/// `key_table!` without its key set (these decoders scan objects whole), and `Obj`, where the
/// decoder's known keys lie in one object.
macro_rules! perp_keys {
    ($($konst:ident = $raw:literal),+ $(,)?) => {
        key_table!(@plain $($konst = $raw),+);

        /// Where the decoder's known keys lie in one object.
        type Obj<'a> = super::Fields<'a, { KEYS.len() }>;
    };
}

pub mod binance;
pub mod bitget;
mod buffers;
pub mod bybit;
mod number;
pub mod okx;

pub(crate) use buffers::PerpBuffers;
pub(crate) use number::{decimal, non_negative, opt_decimal, opt_price, opt_qty, positive, req_price, req_qty};

/// Liquidations a decoder holds from one message in production. Bybit pushes every liquidation
/// of a contract in 500 ms and OKX every SWAP's in one channel; 256 is far above what either was
/// seen to send at once. At the bound the rest are counted, not kept ([`Batch::dropped`]).
pub const LIQUIDATIONS_PER_MESSAGE_MAX: usize = 256;

/// Updates a decoder holds from one message in production: Binance's `!markPrice@arr@1s` sends
/// one per USDⓈ-M contract (about 600 in 2026), every other venue one per message. At the bound
/// the rest are counted, not kept ([`Batch::dropped`]).
pub const UPDATES_PER_MESSAGE_MAX: usize = 2048;

/// The unit of a liquidation's quantity.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum QtyUnit {
    /// Base-asset units of the contract (Binance, Bybit).
    Base,
    /// Contracts (OKX `sz`): multiply by the instrument's `ctVal` for base units.
    Contracts,
}

/// One liquidation as the venue sent it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Liquidation {
    /// The side of the position liquidated.
    pub side: PositionSide,
    /// The price: Binance the average fill price (`ap`, or the order price `p` before a fill),
    /// Bybit and OKX the bankruptcy price.
    pub price: f64,
    /// The quantity, in `qty_unit`: Binance the filled quantity (`z`, or the order's `q` before a
    /// fill), Bybit `v`, OKX `sz`.
    pub qty: f64,
    /// What `qty` counts.
    pub qty_unit: QtyUnit,
    /// The venue's time of the liquidation, Unix milliseconds.
    pub ts_ms: i64,
}

/// A partial update of one contract: each value is `Some` when the message carries it; the
/// caller keeps what it held for the others.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Update {
    /// The venue's time of the values, Unix milliseconds.
    pub ts_ms: i64,
    /// The mark price.
    pub mark: Option<f64>,
    /// The index price.
    pub index: Option<f64>,
    /// The current (next-settlement) funding rate, a fraction per the contract's interval.
    pub funding_rate: Option<f64>,
    /// The next funding settlement, Unix milliseconds.
    pub next_funding_ms: Option<i64>,
    /// The funding interval, milliseconds, when the message says it (OKX, Bybit
    /// `fundingIntervalHour`).
    pub funding_interval_ms: Option<i64>,
    /// Open interest in base units.
    pub oi_base: Option<f64>,
    /// Open interest in contracts (OKX `oi`).
    pub oi_contracts: Option<f64>,
    /// Open interest in USD, the venue's own figure.
    pub oi_usd: Option<f64>,
}

impl Update {
    /// An update stamped `ts_ms` that carries nothing yet.
    pub fn at(ts_ms: i64) -> Update {
        Update {
            ts_ms,
            mark: None,
            index: None,
            funding_rate: None,
            next_funding_ms: None,
            funding_interval_ms: None,
            oi_base: None,
            oi_contracts: None,
            oi_usd: None,
        }
    }
}

/// One item of a message: the contract it is about and the value.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Entry<'a, T> {
    /// The venue's contract id as sent (`BTCUSDT`, `BTC-USDT-SWAP`), borrowed from the frame.
    pub symbol: &'a [u8],
    /// The value.
    pub value: T,
}

/// An item as a decoder holds it: where its contract id lies in the frame, and its value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row<T> {
    symbol: Span,
    value: T,
}

/// The items of one message, in message order, borrowed from the decoder and the frame.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a, T> {
    frame: &'a [u8],
    rows: &'a [Row<T>],
    dropped: usize,
}

impl<'a, T: Copy> Batch<'a, T> {
    /// Items kept.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when none was kept.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Items of the message beyond the decoder's bound: validated, counted, not kept.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Item `i`, when kept.
    pub fn get(&self, i: usize) -> Option<Entry<'a, T>> {
        self.rows.get(i).map(|r| self.entry(r))
    }

    /// The items kept, in message order.
    pub fn iter(&self) -> impl Iterator<Item = Entry<'a, T>> + '_ {
        self.rows.iter().map(|r| self.entry(r))
    }

    fn entry(&self, r: &Row<T>) -> Entry<'a, T> {
        Entry { symbol: r.symbol.of(self.frame), value: r.value }
    }
}

/// One decoded perpetual message.
#[derive(Clone, Copy, Debug)]
pub enum PerpMessage<'a> {
    /// Liquidations (Binance `forceOrder`, Bybit `allLiquidation`, OKX `liquidation-orders`).
    Liquidations(Batch<'a, Liquidation>),
    /// Contract updates (Binance `markPriceUpdate` and the REST open interest, Bybit `tickers`,
    /// OKX `open-interest` and `funding-rate`, Bitget `ticker`).
    Updates(Batch<'a, Update>),
    /// A reply to a control request (subscribe acknowledgement, error, notice).
    Reply(Reply<'a>),
    /// A pong (Bybit's `op` pong, OKX's and Bitget's text `pong`).
    Pong,
    /// A well-formed message of a kind this decoder does not read.
    Other,
}

/// A reply to a control request. Strings are raw (escapes not decoded).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Reply<'a> {
    /// False when the venue refused the request (an error reply).
    pub ok: bool,
    /// The operation or event the reply names (`subscribe`, `error`, `notice`), when sent.
    pub op: Option<&'a [u8]>,
    /// The venue's code, when sent.
    pub code: Option<i64>,
    /// The venue's message, when sent.
    pub msg: Option<&'a [u8]>,
}

/// Maps a raw key to its index in a decoder's key table.
type KeyIndex = fn(&[u8]) -> Option<usize>;

/// The top-level object of `frame`, scanned: where its known keys lie. Bytes after it are
/// [`JsonErrorKind::TrailingBytes`]; a top-level value that is not an object is
/// [`DecodeError::NotAnObject`] (when valid JSON).
pub(crate) fn message<'a, const N: usize>(
    frame: &'a [u8],
    keys: &'static [&'static str; N],
    index: KeyIndex,
) -> Result<Fields<'a, N>, DecodeError> {
    let mut cur = object_start(frame)?;
    let fields = Fields::scan(frame, &mut cur, keys, index)?;
    if !cur.at_end() {
        return Err(cur.error(JsonErrorKind::TrailingBytes).into());
    }
    Ok(fields)
}

/// The object whose value lies at `span`, scanned; [`DecodeError::WrongType`] on `field` when
/// the value there is not an object.
pub(crate) fn object_at<'a, const N: usize>(
    bytes: &'a [u8],
    span: Span,
    keys: &'static [&'static str; N],
    index: KeyIndex,
    field: &'static str,
) -> Result<Fields<'a, N>, DecodeError> {
    let mut cur = Cursor::new(bytes, span.start);
    if cur.peek() != Some(b'{') {
        return Err(DecodeError::WrongType(field));
    }
    Fields::scan(bytes, &mut cur, keys, index)
}

/// Hands each object of the array at `span` to `each`, in order; [`DecodeError::WrongType`] on
/// `field` when the value is not an array or an element is not an object.
pub(crate) fn each_object<'a, const N: usize>(
    bytes: &'a [u8],
    span: Span,
    keys: &'static [&'static str; N],
    index: KeyIndex,
    field: &'static str,
    mut each: impl FnMut(&Fields<'a, N>) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut cur = Cursor::new(bytes, span.start);
    if cur.peek() != Some(b'[') {
        return Err(DecodeError::WrongType(field));
    }
    cur.expect(b'[')?;
    let mut elements = Elements::new();
    while elements.next(&mut cur)? {
        cur.skip_ws();
        if cur.peek() != Some(b'{') {
            return Err(DecodeError::WrongType(field));
        }
        each(&Fields::scan(bytes, &mut cur, keys, index)?)?;
    }
    Ok(())
}

/// True for the text `pong` (OKX, Bitget), surrounding whitespace allowed.
pub(crate) fn is_text_pong(frame: &[u8]) -> bool {
    frame.trim_ascii() == b"pong"
}

/// The span of a string value's content (between the quotes), when `span` holds a non-empty
/// string without escapes: the contract id of an item. An empty one is
/// [`DecodeError::OutOfRange`].
pub(crate) fn symbol_span(bytes: &[u8], span: Span, field: &'static str) -> Result<Span, DecodeError> {
    if plain_str(span.of(bytes), field)?.is_empty() {
        return Err(DecodeError::OutOfRange(field));
    }
    Ok(Span { start: span.start + 1, end: span.end - 1 })
}

/// Key `k`'s value of `f`, a required contract id: its content span.
pub(crate) fn req_symbol<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<Span, DecodeError> {
    symbol_span(f.bytes(), f.req_span(k)?, f.name(k))
}

/// Key `k`'s value of `f`, an optional time in Unix milliseconds sent as a string of digits:
/// `None` when absent, the empty string or zero.
pub(crate) fn opt_string_ms<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<Option<i64>, DecodeError> {
    match f.get(k) {
        None | Some(b"\"\"") => Ok(None),
        Some(text) => Ok(Some(super::string_ms(text, f.name(k))?).filter(|&t| t > 0)),
    }
}

/// The side of a liquidation as `venue` sends it in key `k` of `f`; another value is
/// [`DecodeError::OutOfRange`].
pub(crate) fn side<const N: usize>(
    f: &Fields<'_, N>,
    k: usize,
    venue: crate::Venue,
) -> Result<PositionSide, DecodeError> {
    let raw = str_raw(f.req(k)?).ok_or(DecodeError::WrongType(f.name(k)))?;
    PositionSide::of(venue, raw).ok_or(DecodeError::OutOfRange(f.name(k)))
}

/// A venue's code sent as a string of digits or a bare number (`"60012"`, `30001`).
pub(crate) fn opt_code<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<Option<i64>, DecodeError> {
    f.get(k).map(|text| super::int_or_string(text, f.name(k))).transpose()
}

/// Key `k`'s value of `f`, an optional string read verbatim.
pub(crate) fn opt_str<'a, const N: usize>(f: &Fields<'a, N>, k: usize) -> Result<Option<&'a [u8]>, DecodeError> {
    f.get(k).map(|text| str_raw(text).ok_or(DecodeError::WrongType(f.name(k)))).transpose()
}
