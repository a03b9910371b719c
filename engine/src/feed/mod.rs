//! Venue feeds, sans-I/O: decoders that turn one WebSocket text message (or one REST body) into
//! typed values, and the state machines that keep a local book in sync with a venue.
//!
//! Nothing here opens a socket or reads a clock: the `net` side hands in bytes and gets values
//! back, and decides on its own when to fetch a snapshot or reconnect. Decoding and syncing
//! allocate nothing per message: buffers are sized at construction (`*_max`) and never grow; the
//! doc of each bound says what happens there (a decoder refuses the message, a sync buffer drops
//! its oldest diffs).
//!
//! The venues speak JSON. The engine has no dependencies, so this module carries a small
//! hand-rolled scanner (`Cursor`, crate-private) shared by the venue decoders. It validates full
//! JSON syntax (strings with escapes and UTF-8, numbers, literals, nesting) without building a
//! tree and without recursion: nested values are skipped with a fixed-size bit stack, bounded by
//! [`NESTING_MAX`]. Every byte access is bounds-checked; malformed input is an error value,
//! never a panic.
//!
//! Venue modules:
//! - [`binance`]: Binance spot frames (depth diffs, trades, control replies, REST depth
//!   snapshot) and the diff-plus-snapshot book sync of venues.md §1.2.
//! - [`bybit`]: Bybit v5 spot frames and the snapshot-plus-delta book sync of venues.md §2.2.
//! - [`okx`]: OKX v5 frames and the `seqId`/`prevSeqId` book sync of venues.md §3.2.
//! - [`bitget`]: Bitget v2 spot frames and the `seq`/`pseq` book sync of venues.md §4.2.
//! - [`checksum`]: the CRC-32 book checksum OKX and Bitget share (venues.md §3.3) and the store of
//!   the venue's level text it is computed over.

use core::fmt;

use crate::book::Level;
use crate::fixed::{ParseError, Price, Qty};

pub mod binance;
pub mod bitget;
pub mod bybit;
pub mod checksum;
pub mod okx;

/// Deepest nesting of arrays and objects a skipped JSON value may have.
///
/// At the limit the message is refused with [`JsonErrorKind::TooDeep`]. Binance frames nest at
/// most four deep (wrapper, data, level array, level); 32 leaves room for unknown nested fields.
pub const NESTING_MAX: usize = 32;

// The skipper keeps one bit per open container in a `u64`.
const _: () = assert!(NESTING_MAX < 64);

/// What was wrong with the JSON syntax of a message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum JsonErrorKind {
    /// The input ended inside a value (a truncated message).
    UnexpectedEnd,
    /// A byte that cannot appear at this point.
    UnexpectedByte,
    /// A backslash escape other than `\" \\ \/ \b \f \n \r \t \uXXXX`.
    BadEscape,
    /// A raw control character (below 0x20) inside a string.
    ControlChar,
    /// String bytes that are not valid UTF-8.
    NotUtf8,
    /// A number that does not follow the JSON grammar (leading zero, lone sign, bare point).
    BadNumber,
    /// Arrays and objects nested deeper than [`NESTING_MAX`].
    TooDeep,
    /// Bytes other than whitespace after the top-level value.
    TrailingBytes,
}

/// A JSON syntax error and the byte offset where it was found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct JsonError {
    /// What was wrong.
    pub kind: JsonErrorKind,
    /// Offset of the offending byte in the message (the length of the input for an early end).
    pub offset: usize,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            JsonErrorKind::UnexpectedEnd => "unexpected end of input",
            JsonErrorKind::UnexpectedByte => "unexpected byte",
            JsonErrorKind::BadEscape => "invalid escape in string",
            JsonErrorKind::ControlChar => "control character in string",
            JsonErrorKind::NotUtf8 => "string is not valid UTF-8",
            JsonErrorKind::BadNumber => "invalid number",
            JsonErrorKind::TooDeep => "nesting too deep",
            JsonErrorKind::TrailingBytes => "trailing bytes after the value",
        };
        write!(f, "{what} at byte {}", self.offset)
    }
}

impl std::error::Error for JsonError {}

/// Why a venue message was refused. Field names are the venue's own (`"U"`, `"bids"`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DecodeError {
    /// The bytes are not valid JSON.
    Json(JsonError),
    /// Valid JSON whose top-level value is not an object (e.g. a text `pong`, an array).
    NotAnObject,
    /// A field this kind of message requires is absent.
    MissingField(&'static str),
    /// A field the decoder reads appears twice in one object (ambiguous, refused).
    DuplicateField(&'static str),
    /// A field has the wrong JSON type (e.g. a number where a string is expected, or a
    /// fraction where an integer is expected).
    WrongType(&'static str),
    /// An integer that does not fit its type, a negative id or time, or a price that is not
    /// above zero.
    OutOfRange(&'static str),
    /// A string field that must be read verbatim (symbol, stream, event type) contains a
    /// backslash escape; venues never send one there.
    Escaped(&'static str),
    /// A price or quantity string that is not a decimal the fixed-point types accept.
    BadDecimal {
        /// The field holding the number.
        field: &'static str,
        /// Why the decimal was refused.
        error: ParseError,
    },
    /// An element of a level array that is not `[price, qty, ...]` with two strings first.
    BadLevel(&'static str),
    /// More levels on one side than the decoder's `levels_max`; nothing was kept.
    TooManyLevels(&'static str),
    /// A depth event whose first update id is above its final update id.
    UpdateIdsReversed {
        /// `U`, first update id.
        first: u64,
        /// `u`, final update id.
        last: u64,
    },
}

impl From<JsonError> for DecodeError {
    fn from(e: JsonError) -> DecodeError {
        DecodeError::Json(e)
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Json(e) => write!(f, "malformed JSON: {e}"),
            DecodeError::NotAnObject => f.write_str("message is not a JSON object"),
            DecodeError::MissingField(k) => write!(f, "missing field `{k}`"),
            DecodeError::DuplicateField(k) => write!(f, "duplicate field `{k}`"),
            DecodeError::WrongType(k) => write!(f, "field `{k}` has the wrong type"),
            DecodeError::OutOfRange(k) => write!(f, "field `{k}` is out of range"),
            DecodeError::Escaped(k) => write!(f, "field `{k}` contains an escape sequence"),
            DecodeError::BadDecimal { field, error } => write!(f, "field `{field}`: {error}"),
            DecodeError::BadLevel(k) => write!(f, "field `{k}`: a level is not [price, qty]"),
            DecodeError::TooManyLevels(k) => write!(f, "field `{k}`: more levels than the decoder holds"),
            DecodeError::UpdateIdsReversed { first, last } => {
                write!(f, "first update id {first} is above final update id {last}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// A byte range `start..end` of the message.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Span {
    /// The bytes of the span, or nothing if it does not lie inside `bytes` (never the case for
    /// spans the cursor produced; the fallback keeps this total).
    pub(crate) fn of(self, bytes: &[u8]) -> &[u8] {
        bytes.get(self.start..self.end).unwrap_or(&[])
    }
}

/// A position in a JSON message, with readers that validate as they go.
///
/// Rationale: callers walk objects key by key ([`Members`]) and skip what they do not read with
/// [`Cursor::skip_value`], so key order does not matter and unknown fields cost one scan.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at `pos` in `bytes`.
    pub(crate) fn new(bytes: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { bytes, pos }
    }

    /// The byte at the cursor.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos += 1;
    }

    pub(crate) fn error(&self, kind: JsonErrorKind) -> JsonError {
        JsonError { kind, offset: self.pos }
    }

    /// The error for the byte at the cursor: an early end, or an unexpected byte.
    fn unexpected(&self) -> JsonError {
        match self.peek() {
            None => self.error(JsonErrorKind::UnexpectedEnd),
            Some(_) => self.error(JsonErrorKind::UnexpectedByte),
        }
    }

    /// Skips JSON whitespace.
    pub(crate) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.bump();
        }
    }

    /// Skips whitespace, then consumes `byte` or fails.
    pub(crate) fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.bump();
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    /// Skips whitespace and reports whether the input is exhausted.
    pub(crate) fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos >= self.bytes.len()
    }

    /// Reads a string at the cursor (after whitespace) and returns the span of its raw content,
    /// between the quotes, escapes not decoded. Escapes, control characters and UTF-8 are
    /// validated.
    pub(crate) fn string(&mut self) -> Result<Span, JsonError> {
        self.expect(b'"')?;
        let start = self.pos;
        let mut high = false;
        loop {
            match self.peek() {
                None => return Err(self.error(JsonErrorKind::UnexpectedEnd)),
                Some(b'"') => {
                    let span = Span { start, end: self.pos };
                    if high {
                        if let Err(e) = core::str::from_utf8(span.of(self.bytes)) {
                            return Err(JsonError { kind: JsonErrorKind::NotUtf8, offset: start + e.valid_up_to() });
                        }
                    }
                    self.bump();
                    return Ok(span);
                }
                Some(b'\\') => {
                    self.bump();
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.bump(),
                        Some(b'u') => {
                            self.bump();
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(c) if c.is_ascii_hexdigit() => self.bump(),
                                    None => return Err(self.error(JsonErrorKind::UnexpectedEnd)),
                                    Some(_) => return Err(self.error(JsonErrorKind::BadEscape)),
                                }
                            }
                        }
                        None => return Err(self.error(JsonErrorKind::UnexpectedEnd)),
                        Some(_) => return Err(self.error(JsonErrorKind::BadEscape)),
                    }
                }
                Some(c) if c < 0x20 => return Err(self.error(JsonErrorKind::ControlChar)),
                Some(c) => {
                    high |= c >= 0x80;
                    self.bump();
                }
            }
        }
    }

    /// Consumes the literal `word` (`true`, `false`, `null`).
    fn literal(&mut self, word: &[u8]) -> Result<(), JsonError> {
        for &w in word {
            match self.peek() {
                Some(c) if c == w => self.bump(),
                _ => return Err(self.unexpected()),
            }
        }
        Ok(())
    }

    /// Consumes one or more digits.
    fn digits(&mut self) -> Result<(), JsonError> {
        match self.peek() {
            Some(b'0'..=b'9') => {}
            None => return Err(self.error(JsonErrorKind::UnexpectedEnd)),
            Some(_) => return Err(self.error(JsonErrorKind::BadNumber)),
        }
        while let Some(b'0'..=b'9') = self.peek() {
            self.bump();
        }
        Ok(())
    }

    /// Consumes a number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Result<(), JsonError> {
        if self.peek() == Some(b'-') {
            self.bump();
        }
        match self.peek() {
            Some(b'0') => self.bump(),
            _ => self.digits()?,
        }
        if self.peek() == Some(b'.') {
            self.bump();
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.bump();
            if let Some(b'+' | b'-') = self.peek() {
                self.bump();
            }
            self.digits()?;
        }
        Ok(())
    }

    /// Reads an object key and the colon after it.
    fn key(&mut self) -> Result<Span, JsonError> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(self.unexpected());
        }
        let key = self.string()?;
        self.expect(b':')?;
        Ok(key)
    }

    /// Skips one complete value of any type (after whitespace) and returns its span.
    ///
    /// Iterative: open containers are tracked in a `u64` bit stack (bit set = array), so input
    /// nested deeper than [`NESTING_MAX`] is refused instead of recursing.
    pub(crate) fn skip_value(&mut self) -> Result<Span, JsonError> {
        self.skip_ws();
        let start = self.pos;
        let mut arrays: u64 = 0;
        let mut depth: usize = 0;
        'value: loop {
            // A value starts here.
            self.skip_ws();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if depth == NESTING_MAX {
                        return Err(self.error(JsonErrorKind::TooDeep));
                    }
                    let is_array = open == b'[';
                    if is_array {
                        arrays |= 1 << depth;
                    } else {
                        arrays &= !(1 << depth);
                    }
                    depth += 1;
                    self.bump();
                    self.skip_ws();
                    let close = if is_array { b']' } else { b'}' };
                    if self.peek() == Some(close) {
                        self.bump();
                        depth -= 1;
                    } else {
                        if !is_array {
                            self.key()?;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                _ => return Err(self.unexpected()),
            }
            // A value ended: close containers until one continues with a comma.
            loop {
                if depth == 0 {
                    return Ok(Span { start, end: self.pos });
                }
                self.skip_ws();
                let in_array = arrays & (1 << (depth - 1)) != 0;
                match self.peek() {
                    Some(b',') => {
                        self.bump();
                        if !in_array {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    Some(b']') if in_array => {
                        self.bump();
                        depth -= 1;
                    }
                    Some(b'}') if !in_array => {
                        self.bump();
                        depth -= 1;
                    }
                    _ => return Err(self.unexpected()),
                }
            }
        }
    }
}

/// Walks the members of an object whose `{` has been consumed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Members {
    first: bool,
}

impl Members {
    /// Before the first member.
    pub(crate) fn new() -> Members {
        Members { first: true }
    }

    /// The next key (its raw content span), with the cursor left before its value; `None`
    /// after the closing `}` has been consumed. The caller must consume the value before
    /// asking for the next key.
    pub(crate) fn next_key(&mut self, cur: &mut Cursor<'_>) -> Result<Option<Span>, JsonError> {
        cur.skip_ws();
        match cur.peek() {
            Some(b'}') => {
                cur.bump();
                return Ok(None);
            }
            Some(b',') if !self.first => cur.bump(),
            _ if self.first => {}
            _ => return Err(cur.unexpected()),
        }
        self.first = false;
        cur.key().map(Some)
    }
}

/// Walks the elements of an array whose `[` has been consumed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Elements {
    first: bool,
}

impl Elements {
    /// Before the first element.
    pub(crate) fn new() -> Elements {
        Elements { first: true }
    }

    /// True when an element follows (the cursor is before it; the caller must consume it);
    /// false after the closing `]` has been consumed.
    pub(crate) fn next(&mut self, cur: &mut Cursor<'_>) -> Result<bool, JsonError> {
        cur.skip_ws();
        match cur.peek() {
            Some(b']') => {
                cur.bump();
                return Ok(false);
            }
            Some(b',') if !self.first => cur.bump(),
            _ if self.first => {}
            _ => return Err(cur.unexpected()),
        }
        self.first = false;
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// Objects read by key.

/// Where the values of the keys a decoder reads lie in one object.
///
/// `keys` is the decoder's table of the key names it reads; callers name a key by its index in
/// the table. Matching is on raw key bytes, so an escaped key is an unknown key. Unknown keys are
/// skipped (their values still validated); a known key given twice is refused.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fields<'a, const N: usize> {
    bytes: &'a [u8],
    keys: &'static [&'static str; N],
    spans: [Option<Span>; N],
}

impl<'a, const N: usize> Fields<'a, N> {
    /// Walks the object at the cursor, validating every value and remembering known keys.
    pub(crate) fn scan(
        bytes: &'a [u8],
        cur: &mut Cursor<'a>,
        keys: &'static [&'static str; N],
    ) -> Result<Fields<'a, N>, DecodeError> {
        cur.expect(b'{')?;
        let mut fields = Fields { bytes, keys, spans: [None; N] };
        let mut members = Members::new();
        while let Some(key) = members.next_key(cur)? {
            let value = cur.skip_value()?;
            let raw = key.of(bytes);
            if let Some(k) = keys.iter().position(|name| name.as_bytes() == raw) {
                if let Some(slot) = fields.spans.get_mut(k) {
                    if slot.replace(value).is_some() {
                        return Err(DecodeError::DuplicateField(fields.name(k)));
                    }
                }
            }
        }
        Ok(fields)
    }

    /// The object whose (already validated) value lies at `span`; `field` names it in errors.
    pub(crate) fn object_at(
        bytes: &'a [u8],
        span: Span,
        keys: &'static [&'static str; N],
        field: &'static str,
    ) -> Result<Fields<'a, N>, DecodeError> {
        let mut cur = Cursor::new(bytes, span.start);
        if cur.peek() != Some(b'{') {
            return Err(DecodeError::WrongType(field));
        }
        Fields::scan(bytes, &mut cur, keys)
    }

    /// The one object of the array at `span` (a book push's `data`): [`DecodeError::OutOfRange`]
    /// on `field` when the array holds none or more than one element.
    pub(crate) fn single_in_array(
        bytes: &'a [u8],
        span: Span,
        keys: &'static [&'static str; N],
        field: &'static str,
    ) -> Result<Fields<'a, N>, DecodeError> {
        let mut cur = array_at(bytes, span, field)?;
        let mut elements = Elements::new();
        if !elements.next(&mut cur)? {
            return Err(DecodeError::OutOfRange(field));
        }
        cur.skip_ws();
        if cur.peek() != Some(b'{') {
            return Err(DecodeError::WrongType(field));
        }
        let fields = Fields::scan(bytes, &mut cur, keys)?;
        if elements.next(&mut cur)? {
            return Err(DecodeError::OutOfRange(field));
        }
        Ok(fields)
    }

    /// Hands each object of the array at `span` to `each`, in order; an element that is not an
    /// object is [`DecodeError::WrongType`] on `field`.
    pub(crate) fn each_in_array(
        bytes: &'a [u8],
        span: Span,
        keys: &'static [&'static str; N],
        field: &'static str,
        mut each: impl FnMut(Fields<'a, N>) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let mut cur = array_at(bytes, span, field)?;
        let mut elements = Elements::new();
        while elements.next(&mut cur)? {
            cur.skip_ws();
            if cur.peek() != Some(b'{') {
                return Err(DecodeError::WrongType(field));
            }
            each(Fields::scan(bytes, &mut cur, keys)?)?;
        }
        Ok(())
    }

    /// The name of key `k`.
    pub(crate) fn name(&self, k: usize) -> &'static str {
        self.keys.get(k).copied().unwrap_or("?")
    }

    /// Where key `k`'s value lies, when present.
    pub(crate) fn span(&self, k: usize) -> Option<Span> {
        self.spans.get(k).copied().flatten()
    }

    /// The raw JSON text of key `k`'s value, when present.
    pub(crate) fn get(&self, k: usize) -> Option<&'a [u8]> {
        self.span(k).map(|s| s.of(self.bytes))
    }

    /// The raw JSON text of key `k`'s value, or [`DecodeError::MissingField`].
    pub(crate) fn req(&self, k: usize) -> Result<&'a [u8], DecodeError> {
        self.get(k).ok_or(DecodeError::MissingField(self.name(k)))
    }

    /// Where key `k`'s value lies, or [`DecodeError::MissingField`].
    pub(crate) fn req_span(&self, k: usize) -> Result<Span, DecodeError> {
        self.span(k).ok_or(DecodeError::MissingField(self.name(k)))
    }

    /// Key `k`'s value, a required price string (a decimal above zero).
    pub(crate) fn req_price(&self, k: usize) -> Result<Price, DecodeError> {
        price(str_field(self.req(k)?, self.name(k))?, self.name(k))
    }

    /// Key `k`'s value, a required quantity string (a decimal at or above zero).
    pub(crate) fn req_qty(&self, k: usize) -> Result<Qty, DecodeError> {
        qty(str_field(self.req(k)?, self.name(k))?, self.name(k))
    }
}

/// A cursor inside the array at `span`, after its `[`; [`DecodeError::WrongType`] on `field` if
/// the value there is not an array.
pub(crate) fn array_at<'a>(bytes: &'a [u8], span: Span, field: &'static str) -> Result<Cursor<'a>, DecodeError> {
    let mut cur = Cursor::new(bytes, span.start);
    if cur.peek() != Some(b'[') {
        return Err(DecodeError::WrongType(field));
    }
    cur.expect(b'[')?;
    Ok(cur)
}

/// Appends `item` to `out`, which holds at most `max` items: at the bound the message is refused
/// with [`DecodeError::TooManyLevels`] on `field`. `out` was sized to `max` at construction, so
/// this never allocates.
pub(crate) fn push_bounded<T>(out: &mut Vec<T>, max: usize, item: T, field: &'static str) -> Result<(), DecodeError> {
    if out.len() >= max {
        return Err(DecodeError::TooManyLevels(field));
    }
    debug_assert!(out.len() < out.capacity());
    out.push(item);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Value readers shared by the venue decoders.

/// One string cell of a level; its raw content.
pub(crate) fn level_cell(cur: &mut Cursor<'_>, cells: &mut Elements, field: &'static str) -> Result<Span, DecodeError> {
    if !cells.next(cur)? {
        return Err(DecodeError::BadLevel(field));
    }
    cur.skip_ws();
    if cur.peek() != Some(b'"') {
        return Err(DecodeError::BadLevel(field));
    }
    Ok(cur.string()?)
}

/// Cells of a level row after price and size that [`walk_levels`] hands to its caller (OKX's
/// deprecated field and order count). Later cells are validated and skipped unread.
pub(crate) const LEVEL_EXTRA_CELLS_MAX: usize = 2;

/// Walks `[[price, size, ...], ...]` at `span`: for each row, `make` gets the content spans of the
/// two leading strings and the value spans of up to [`LEVEL_EXTRA_CELLS_MAX`] further cells, and
/// its result is appended to `out` (at most `max` items, see [`push_bounded`]).
///
/// A row that is not an array, or whose first two cells are not strings, is
/// [`DecodeError::BadLevel`] on `field`.
pub(crate) fn walk_levels<T>(
    bytes: &[u8],
    span: Span,
    field: &'static str,
    max: usize,
    out: &mut Vec<T>,
    mut make: impl FnMut(Span, Span, &[Span]) -> Result<T, DecodeError>,
) -> Result<(), DecodeError> {
    let mut cur = array_at(bytes, span, field)?;
    let mut rows = Elements::new();
    while rows.next(&mut cur)? {
        cur.skip_ws();
        if cur.peek() != Some(b'[') {
            return Err(DecodeError::BadLevel(field));
        }
        cur.expect(b'[')?;
        let mut cells = Elements::new();
        let p = level_cell(&mut cur, &mut cells, field)?;
        let q = level_cell(&mut cur, &mut cells, field)?;
        let mut extra = [Span::default(); LEVEL_EXTRA_CELLS_MAX];
        let mut extra_len = 0;
        while cells.next(&mut cur)? {
            let cell = cur.skip_value()?;
            if let Some(slot) = extra.get_mut(extra_len) {
                *slot = cell;
                extra_len += 1;
            }
        }
        let item = make(p, q, extra.get(..extra_len).unwrap_or(&[]))?;
        push_bounded(out, max, item, field)?;
    }
    Ok(())
}

/// The raw content of a string value (between the quotes), or `None` if it is not a string.
pub(crate) fn str_raw(text: &[u8]) -> Option<&[u8]> {
    text.strip_prefix(b"\"").and_then(|t| t.strip_suffix(b"\""))
}

/// The raw content of a string value, or [`DecodeError::WrongType`] on `field`.
pub(crate) fn str_field<'a>(text: &'a [u8], field: &'static str) -> Result<&'a [u8], DecodeError> {
    str_raw(text).ok_or(DecodeError::WrongType(field))
}

/// A price string: a decimal above zero.
pub(crate) fn price(raw: &[u8], field: &'static str) -> Result<Price, DecodeError> {
    let p = Price::parse(raw).map_err(|error| DecodeError::BadDecimal { field, error })?;
    if p.0 <= 0 {
        return Err(DecodeError::OutOfRange(field));
    }
    Ok(p)
}

/// A quantity string: a decimal at or above zero.
pub(crate) fn qty(raw: &[u8], field: &'static str) -> Result<Qty, DecodeError> {
    Qty::parse(raw).map_err(|error| DecodeError::BadDecimal { field, error })
}

/// A string that must be read verbatim: no escapes.
pub(crate) fn plain_str<'a>(text: &'a [u8], field: &'static str) -> Result<&'a [u8], DecodeError> {
    let s = str_field(text, field)?;
    if s.contains(&b'\\') {
        return Err(DecodeError::Escaped(field));
    }
    Ok(s)
}

/// A taker side sent as `"buy"` or `"sell"` (OKX, Bitget): true when the taker sold. Any other
/// value is [`DecodeError::OutOfRange`] on `field`.
pub(crate) fn taker_sell(text: &[u8], field: &'static str) -> Result<bool, DecodeError> {
    match str_field(text, field)? {
        b"buy" => Ok(false),
        b"sell" => Ok(true),
        _ => Err(DecodeError::OutOfRange(field)),
    }
}

/// A non-negative integer value.
pub(crate) fn uint(text: &[u8], field: &'static str) -> Result<u64, DecodeError> {
    match text.first() {
        Some(b'0'..=b'9') => {}
        Some(b'-') => return Err(DecodeError::OutOfRange(field)),
        _ => return Err(DecodeError::WrongType(field)),
    }
    let mut v: u64 = 0;
    for &c in text {
        if !c.is_ascii_digit() {
            // A fraction or an exponent.
            return Err(DecodeError::WrongType(field));
        }
        v = v.checked_mul(10).and_then(|v| v.checked_add(u64::from(c - b'0'))).ok_or(DecodeError::OutOfRange(field))?;
    }
    Ok(v)
}

/// A signed 64-bit integer value.
pub(crate) fn int(text: &[u8], field: &'static str) -> Result<i64, DecodeError> {
    match text.split_first() {
        Some((b'-', rest)) => {
            let magnitude = uint(rest, field)?;
            0_i64.checked_sub_unsigned(magnitude).ok_or(DecodeError::OutOfRange(field))
        }
        _ => i64::try_from(uint(text, field)?).map_err(|_| DecodeError::OutOfRange(field)),
    }
}

/// A time in Unix milliseconds: a non-negative integer value that fits `i64`.
pub(crate) fn ms(text: &[u8], field: &'static str) -> Result<i64, DecodeError> {
    i64::try_from(uint(text, field)?).map_err(|_| DecodeError::OutOfRange(field))
}

/// A non-negative integer sent as a string of digits (`"1040968613"`).
pub(crate) fn string_uint(text: &[u8], field: &'static str) -> Result<u64, DecodeError> {
    uint(str_field(text, field)?, field)
}

/// A time in Unix milliseconds sent as a string of digits.
pub(crate) fn string_ms(text: &[u8], field: &'static str) -> Result<i64, DecodeError> {
    ms(str_field(text, field)?, field)
}

/// An integer sent as a string of digits (`"60012"`, as documented for event codes) or as a bare
/// number (as some replies send it).
pub(crate) fn int_or_string(text: &[u8], field: &'static str) -> Result<i64, DecodeError> {
    int(str_raw(text).unwrap_or(text), field)
}

/// Reads `[[price, qty, ...], ...]` at `span` into `out` (bounded by `max`); extra cells (older
/// API versions sent a third, ignored one) are skipped.
pub(crate) fn parse_levels(
    bytes: &[u8],
    span: Span,
    field: &'static str,
    max: usize,
    out: &mut Vec<Level>,
) -> Result<(), DecodeError> {
    walk_levels(bytes, span, field, max, out, |p, q, _| {
        Ok(Level { price: price(p.of(bytes), field)?, qty: qty(q.of(bytes), field)? })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(s: &[u8]) -> Result<Span, JsonError> {
        let mut c = Cursor::new(s, 0);
        let span = c.skip_value()?;
        if c.at_end() {
            Ok(span)
        } else {
            Err(c.error(JsonErrorKind::TrailingBytes))
        }
    }

    fn kind(s: &[u8]) -> Option<JsonErrorKind> {
        skip(s).err().map(|e| e.kind)
    }

    #[test]
    fn skips_every_value_type() {
        for ok in [
            &b"0"[..],
            b"-0",
            b"12.5e-3",
            b"1E+9",
            b"true",
            b"false",
            b"null",
            br#""a\"b\\c\/\b\f\n\r\t\u00e9""#,
            "\"\u{e9}t\u{e9} \u{1f600}\"".as_bytes(),
            b"[]",
            b"{}",
            b" [ 1 , [ ] , { } , { \"k\" : [ null ] } ] ",
            br#"{"a":{"b":{"c":[1,2,{"d":"e"}]}},"f":false}"#,
        ] {
            assert!(skip(ok).is_ok(), "{}", String::from_utf8_lossy(ok));
        }
        assert_eq!(skip(b"  [1,2]  "), Ok(Span { start: 2, end: 7 }));
    }

    #[test]
    fn refuses_malformed_values() {
        use JsonErrorKind::*;
        assert_eq!(kind(b""), Some(UnexpectedEnd));
        assert_eq!(kind(b"01"), Some(TrailingBytes));
        assert_eq!(kind(b"-"), Some(UnexpectedEnd));
        assert_eq!(kind(b"-a"), Some(BadNumber));
        assert_eq!(kind(b"1."), Some(UnexpectedEnd));
        assert_eq!(kind(b"1.e5"), Some(BadNumber));
        assert_eq!(kind(b".5"), Some(UnexpectedByte));
        assert_eq!(kind(b"tru"), Some(UnexpectedEnd));
        assert_eq!(kind(b"trux"), Some(UnexpectedByte));
        assert_eq!(kind(b"\"a"), Some(UnexpectedEnd));
        assert_eq!(kind(b"\"\\x\""), Some(BadEscape));
        assert_eq!(kind(b"\"\\u12g4\""), Some(BadEscape));
        assert_eq!(kind(b"\"a\nb\""), Some(ControlChar));
        assert_eq!(kind(b"\"\xff\""), Some(NotUtf8));
        assert_eq!(kind(b"\"\xc3\""), Some(NotUtf8));
        assert_eq!(kind(b"[1,]"), Some(UnexpectedByte));
        assert_eq!(kind(b"[,1]"), Some(UnexpectedByte));
        assert_eq!(kind(b"{\"a\":1,}"), Some(UnexpectedByte));
        assert_eq!(kind(b"{\"a\" 1}"), Some(UnexpectedByte));
        assert_eq!(kind(b"{1:1}"), Some(UnexpectedByte));
        assert_eq!(kind(b"[1}"), Some(UnexpectedByte));
        assert_eq!(kind(b"{\"a\":1]"), Some(UnexpectedByte));
        assert_eq!(kind(b"[1 2]"), Some(UnexpectedByte));
        assert_eq!(kind(b"\xff"), Some(UnexpectedByte));
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = format!("{}{}", "[".repeat(NESTING_MAX), "]".repeat(NESTING_MAX));
        assert!(skip(ok.as_bytes()).is_ok());
        let deep = format!("{}{}", "[".repeat(NESTING_MAX + 1), "]".repeat(NESTING_MAX + 1));
        assert_eq!(kind(deep.as_bytes()), Some(JsonErrorKind::TooDeep));
        let huge = "[{\"a\":".repeat(100_000);
        assert_eq!(kind(huge.as_bytes()), Some(JsonErrorKind::TooDeep));
    }

    #[test]
    fn members_and_elements_walk_in_order() {
        let s = br#"{ "x" : [ 1 , 2 ] , "y" : "z" }"#;
        let mut c = Cursor::new(s, 0);
        c.expect(b'{').expect("open");
        let mut m = Members::new();
        let mut keys = Vec::new();
        while let Some(k) = m.next_key(&mut c).expect("key") {
            keys.push(k.of(s).to_vec());
            c.skip_value().expect("value");
        }
        assert_eq!(keys, [b"x".to_vec(), b"y".to_vec()]);
        assert!(c.at_end());

        let s = b"[ 1 ,2, 3 ]";
        let mut c = Cursor::new(s, 0);
        c.expect(b'[').expect("open");
        let mut e = Elements::new();
        let mut n = 0;
        while e.next(&mut c).expect("element") {
            c.skip_value().expect("value");
            n += 1;
        }
        assert_eq!(n, 3);
        assert!(c.at_end());
    }
}
