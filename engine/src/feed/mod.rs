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
//! Each decoder reads a message in one pass. It walks the objects key by key, recognising a key
//! either by comparing the bytes at the cursor with the key that followed the previous one last
//! time (`KeyHints`) or by a `match` on the key's bytes, and reads what it needs as it meets it:
//! the nested objects (`data`, `arg`) key by key too, level arrays straight into the decoder's
//! buffers with prices and sizes parsed while they are scanned (`read_levels`), scalars noted
//! by where they lie and read once the pass is over. It still refuses a message exactly as
//! validating the whole message and then reading its fields would, with the same error: the
//! errors the pass finds inside nested values wait (`Deferred`) until the decoder reaches the
//! check that reads them. Rationale: scanning each byte once, and no second walk over the
//! values it reads, is what made the decoders faster than a general-purpose parser on the
//! venues' frames (perf/README.md).
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
use crate::fixed::{ParseError, Price, Qty, DECIMALS, SCALE};

/// A cursor at the `{` that opens message `frame`. A message that is not a JSON object is
/// [`DecodeError::NotAnObject`] when it is valid JSON, and its JSON error otherwise.
#[inline]
pub(crate) fn object_start(frame: &[u8]) -> Result<Cursor<'_>, DecodeError> {
    let mut cur = Cursor::new(frame, 0);
    cur.skip_ws();
    if cur.peek() != Some(b'{') {
        // Say whether it is JSON at all before saying it is not an object.
        cur.skip_value()?;
        if !cur.at_end() {
            return Err(cur.error(JsonErrorKind::TrailingBytes).into());
        }
        return Err(DecodeError::NotAnObject);
    }
    Ok(cur)
}

/// A decoder's keys, written once: `key_table! { K_ARG = b"arg", ... }` makes an index constant
/// per key (in the order written), `KEYS` (the names by index), `key_index` (the raw key bytes →
/// index `match`), `KEY_SET` (the [`KeySet`] for [`walk_keyed`]) and `name` (a key's name for
/// errors). Matching is on raw key bytes: an escaped key is an unknown key.
///
/// Rationale for the `match`: a jump on the length, then on the bytes, measured faster here than
/// a perfect hash confirmed by a comparison.
macro_rules! key_table {
    ($($konst:ident = $raw:literal),+ $(,)?) => {
        key_table!(@index 0usize; $($konst)+);

        /// The names of the keys the decoder reads, by index.
        const KEYS: [&str; [$(stringify!($konst)),+].len()] = [$(
            match ::core::str::from_utf8($raw) {
                Ok(name) => name,
                Err(_) => panic!("a key is UTF-8"),
            }
        ),+];

        /// [`KEYS`] with their compact-JSON patterns, for [`walk_keyed`].
        static KEY_SET: KeySet<{ KEYS.len() }> = KeySet::new(&KEYS, key_index);

        /// The index in [`KEYS`] of a raw key.
        #[inline]
        fn key_index(raw: &[u8]) -> Option<usize> {
            Some(match raw {
                $($raw => $konst,)+
                _ => return None,
            })
        }

        /// A key's name, for errors.
        fn name(key: usize) -> &'static str {
            KEYS.get(key).copied().unwrap_or("?")
        }
    };
    (@index $n:expr; ) => {};
    (@index $n:expr; $konst:ident $($rest:ident)*) => {
        const $konst: usize = $n;
        key_table!(@index $n + 1; $($rest)*);
    };
}

mod arg_data;
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

/// Bytes a string may hold without a closer look: printable ASCII other than `"` and `\`.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c < 0x80 {
        t[c] = c != b'"' as usize && c != b'\\' as usize;
        c += 1;
    }
    t
};

/// Most digits before the point that [`plain_decimal_prefix`] parses: ten digits times 10^8
/// stays below `i64::MAX`, so no overflow check is needed; longer integer parts go to
/// [`crate::fixed::parse_decimal`], which checks.
const DECIMAL_INT_DIGITS_FAST: usize = 10;

// Ten digits: 9_999_999_999 * 10^8 + 99_999_999 fits an `i64`.
const _: () = assert!(DECIMAL_INT_DIGITS_FAST == 10 && (9_999_999_999 * SCALE).checked_add(SCALE - 1).is_some());

/// 10^0 ..= 10^8: the scale of a fraction of `8 - i` digits.
const POW10: [i64; DECIMALS as usize + 1] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];

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
    #[inline]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Where the cursor is.
    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
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
    #[inline]
    pub(crate) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.bump();
        }
    }

    /// Skips whitespace, then consumes `byte` or fails.
    #[inline]
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
    #[inline]
    pub(crate) fn string(&mut self) -> Result<Span, JsonError> {
        self.expect(b'"')?;
        self.string_content()
    }

    /// Reads the rest of a string whose opening quote has been consumed; returns the span of its
    /// raw content.
    #[inline]
    fn string_content(&mut self) -> Result<Span, JsonError> {
        let start = self.pos;
        // Rationale: nearly every string of a venue frame is plain ASCII, so a tight loop over a
        // table runs to the closing quote and only the rest (escapes, control characters,
        // UTF-8) takes the byte-by-byte path of `string_rest`. Reading eight bytes at a time
        // here measured slower: the strings are short.
        let mut pos = start;
        while let Some(&c) = self.bytes.get(pos) {
            if !PLAIN[usize::from(c)] {
                break;
            }
            pos += 1;
        }
        self.pos = pos;
        if self.peek() == Some(b'"') {
            self.bump();
            return Ok(Span { start, end: pos });
        }
        self.string_rest(start)
    }

    /// The byte-by-byte rest of [`Cursor::string`], from the first byte that is not plain ASCII
    /// (the bytes from `start` to the cursor are).
    #[cold]
    fn string_rest(&mut self, start: usize) -> Result<Span, JsonError> {
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

    /// Reads a level cell on the fast path: a string at the cursor (no whitespace before it)
    /// whose content is a plain decimal (see [`plain_decimal_prefix`]) and nothing else. Returns
    /// its content span and value, with the cursor after the closing quote; `None`, with the
    /// cursor unmoved, for anything else (a sign, an escape, a second point, a long integer
    /// part, a missing quote), which the caller then reads on the general path.
    ///
    /// Rationale: venues send prices and sizes as plain decimals; parsing them while the string
    /// is scanned reads each byte once instead of twice.
    #[inline]
    fn decimal_cell(&mut self) -> Option<(Span, i64)> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.pos + 1;
        let rest = self.bytes.get(start..)?;
        let (len, value) = plain_decimal_prefix(rest)?;
        if rest.get(len) != Some(&b'"') {
            return None;
        }
        self.pos = start + len + 1;
        Some((Span { start, end: start + len }, value))
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
    #[inline]
    fn key(&mut self) -> Result<Span, JsonError> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(self.unexpected());
        }
        self.bump();
        let key = self.string_content()?;
        if self.peek() == Some(b':') {
            self.bump();
        } else {
            self.expect(b':')?;
        }
        Ok(key)
    }

    /// Skips one complete value of any type (after whitespace) and returns its span.
    ///
    /// Iterative: open containers are tracked in a `u64` bit stack (bit set = array), so input
    /// nested deeper than [`NESTING_MAX`] is refused instead of recursing.
    pub(crate) fn skip_value(&mut self) -> Result<Span, JsonError> {
        self.skip_value_at(0)
    }

    /// [`Cursor::skip_value`] for a value that lies inside `depth` containers the caller has
    /// already opened: it may nest [`NESTING_MAX`]` - depth` further.
    ///
    /// Rationale: the decoders read nested objects and level arrays as they scan the message;
    /// counting the containers they opened keeps the nesting bound where skipping the whole
    /// top-level value put it, so the same messages are refused with the same error.
    #[inline]
    pub(crate) fn skip_value_at(&mut self, base: usize) -> Result<Span, JsonError> {
        self.skip_ws();
        let start = self.pos;
        // Scalars, the common case, need none of the container bookkeeping.
        match self.peek() {
            Some(b'"') => {
                self.bump();
                self.string_content()?;
            }
            Some(b'-' | b'0'..=b'9') => self.number()?,
            _ => self.skip_other(base)?,
        }
        Ok(Span { start, end: self.pos })
    }

    /// The rest of [`Cursor::skip_value_at`]: a container or a literal (or an error), at the
    /// cursor.
    fn skip_other(&mut self, base: usize) -> Result<(), JsonError> {
        let mut arrays: u64 = 0;
        let mut depth: usize = base;
        'value: loop {
            // A value starts here.
            self.skip_ws();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if depth >= NESTING_MAX {
                        return Err(self.error(JsonErrorKind::TooDeep));
                    }
                    let is_array = open == b'[';
                    // `depth < NESTING_MAX < 64`: the shifts stay inside the `u64`.
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
                if depth == base {
                    return Ok(());
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
    #[inline]
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
    #[inline]
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

/// A check the single pass could not make yet, or whose error must wait: the first level,
/// trade or duplicate-key error found in a nested value, held until the decoder reaches the
/// point where it reads that value.
///
/// Rationale: the decoders read each message in one pass, but refuse it exactly as reading the
/// whole message first and then its fields would: a JSON syntax error anywhere wins, and among
/// the other errors the first one met in the decoder's order of checks wins. So only syntax
/// errors (and duplicate keys in the top-level object, which that order also met while
/// scanning) end the pass early; the others are kept here.
pub(crate) type Deferred = Result<(), DecodeError>;

/// Where the values of the keys a decoder reads lie in one object.
///
/// `keys` is the decoder's table of the key names it reads; callers name a key by its index in
/// the table, which the decoder's `index` function (a `match` on the key bytes) gives. Matching
/// is on raw key bytes, so an escaped key is an unknown key. Unknown keys are skipped (their
/// values still validated); a known key given twice is refused.
///
/// Rationale: a bit mask says which keys were seen, so a new table is cheap to set up, and the
/// decoders build their tables in place and lend them out rather than moving them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fields<'a, const N: usize> {
    bytes: &'a [u8],
    keys: &'static [&'static str; N],
    /// Bit `k` is set when key `k` was seen; `spans[k]` is then where its value lies.
    seen: u64,
    spans: [Span; N],
}

/// Maps a raw key to its index in a decoder's key table.
pub(crate) type KeyIndex = fn(&[u8]) -> Option<usize>;

impl<'a, const N: usize> Fields<'a, N> {
    /// The `seen` mask has a bit for every key of the table.
    const KEYS_FIT: () = assert!(N <= 64);

    /// No key seen yet.
    #[inline]
    pub(crate) fn new(bytes: &'a [u8], keys: &'static [&'static str; N]) -> Fields<'a, N> {
        let () = Self::KEYS_FIT;
        Fields { bytes, keys, seen: 0, spans: [Span::default(); N] }
    }

    /// Notes that key `k`'s value lies at `span`: [`DecodeError::DuplicateField`] when the
    /// object already had it.
    #[inline]
    pub(crate) fn record(&mut self, k: usize, span: Span) -> Result<(), DecodeError> {
        let Some(slot) = self.spans.get_mut(k) else {
            return Ok(());
        };
        let bit = 1u64 << k;
        if self.seen & bit != 0 {
            return Err(DecodeError::DuplicateField(self.name(k)));
        }
        self.seen |= bit;
        *slot = span;
        Ok(())
    }

    /// Walks the object at the cursor, validating every value and remembering known keys: the
    /// general path, for values the single pass left unread.
    pub(crate) fn scan(
        bytes: &'a [u8],
        cur: &mut Cursor<'a>,
        keys: &'static [&'static str; N],
        index: KeyIndex,
    ) -> Result<Fields<'a, N>, DecodeError> {
        let mut fields = Fields::new(bytes, keys);
        walk_object(cur, |cur, key| {
            let value = cur.skip_value()?;
            match index(key.of(bytes)) {
                Some(k) => fields.record(k, value),
                None => Ok(()),
            }
        })?;
        Ok(fields)
    }

    /// The one object of the array at `span` (a book push's `data`): [`DecodeError::OutOfRange`]
    /// on `field` when the array holds none or more than one element.
    pub(crate) fn single_in_array(
        bytes: &'a [u8],
        span: Span,
        keys: &'static [&'static str; N],
        index: KeyIndex,
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
        let fields = Fields::scan(bytes, &mut cur, keys, index)?;
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
        index: KeyIndex,
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
            each(Fields::scan(bytes, &mut cur, keys, index)?)?;
        }
        Ok(())
    }

    /// The message the fields lie in.
    #[inline]
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The name of key `k`.
    pub(crate) fn name(&self, k: usize) -> &'static str {
        self.keys.get(k).copied().unwrap_or("?")
    }

    /// Where key `k`'s value lies, when present.
    #[inline]
    pub(crate) fn span(&self, k: usize) -> Option<Span> {
        let span = self.spans.get(k).copied()?;
        // `k < N <= 64`: the shift stays inside the mask.
        (self.seen & (1u64 << k) != 0).then_some(span)
    }

    /// True when the object has key `k`.
    #[inline]
    pub(crate) fn has(&self, k: usize) -> bool {
        self.span(k).is_some()
    }

    /// The raw JSON text of key `k`'s value, when present.
    #[inline]
    pub(crate) fn get(&self, k: usize) -> Option<&'a [u8]> {
        self.span(k).map(|s| s.of(self.bytes))
    }

    /// The raw JSON text of key `k`'s value, or [`DecodeError::MissingField`].
    #[inline]
    pub(crate) fn req(&self, k: usize) -> Result<&'a [u8], DecodeError> {
        self.get(k).ok_or(DecodeError::MissingField(self.name(k)))
    }

    /// Where key `k`'s value lies, or [`DecodeError::MissingField`].
    #[inline]
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

/// A nested object read during the single pass: whether it was read, its fields, and its first
/// duplicate key held back (see [`Deferred`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Nested<'a, const N: usize> {
    /// The pass met the object (its value was an object).
    pub(crate) read: bool,
    /// Where its known keys' values lie.
    fields: Fields<'a, N>,
    /// [`DecodeError::DuplicateField`] for the first key it repeats.
    dup: Deferred,
}

impl<'a, const N: usize> Nested<'a, N> {
    /// Not read yet.
    #[inline]
    pub(crate) fn new(bytes: &'a [u8], keys: &'static [&'static str; N]) -> Nested<'a, N> {
        Nested { read: false, fields: Fields::new(bytes, keys), dup: Ok(()) }
    }

    /// Notes that key `k`'s value lies at `span`, keeping the first duplicate.
    #[inline]
    pub(crate) fn record(&mut self, k: usize, span: Span) {
        if self.dup.is_ok() {
            self.dup = self.fields.record(k, span);
        }
    }

    /// The fields, or the duplicate-key error the object was read with.
    #[inline]
    pub(crate) fn fields(&self) -> Result<&Fields<'a, N>, DecodeError> {
        self.dup.map(|()| &self.fields)
    }
}

// ---------------------------------------------------------------------------------------------
// Keys read by prediction.

/// A decoder's key table: the names it reads, each key as it appears in compact JSON
/// (`"name":`) packed into a `u128` for a one-comparison match, and the `match` that maps any
/// other raw key to its index.
pub(crate) struct KeySet<const N: usize> {
    /// The names, by index.
    pub(crate) names: &'static [&'static str; N],
    patterns: [KeyPattern; N],
    /// The raw key → index `match`.
    pub(crate) index: KeyIndex,
}

/// `"name":` as little-endian bytes, the mask of its bytes, and its length (0 when longer than
/// 16 bytes: never predicted).
#[derive(Clone, Copy, Debug)]
struct KeyPattern {
    bytes: u128,
    mask: u128,
    len: usize,
}

impl<const N: usize> KeySet<N> {
    /// The key set of `names`, whose indices `index` gives.
    pub(crate) const fn new(names: &'static [&'static str; N], index: KeyIndex) -> KeySet<N> {
        // A key's hint slot is its index.
        assert!(N <= KEY_HINT_FIRST);
        let mut patterns = [KeyPattern { bytes: 0, mask: 0, len: 0 }; N];
        let mut k = 0;
        while k < N {
            let name = names[k].as_bytes();
            let len = name.len() + 3;
            if len <= 16 {
                let mut bytes: u128 = b'"' as u128;
                let mut i = 0;
                while i < name.len() {
                    bytes |= (name[i] as u128) << (8 * (i + 1));
                    i += 1;
                }
                bytes |= (b'"' as u128) << (8 * (name.len() + 1)) | (b':' as u128) << (8 * (name.len() + 2));
                let mask = if len == 16 { u128::MAX } else { (1u128 << (8 * len)) - 1 };
                patterns[k] = KeyPattern { bytes, mask, len };
            }
            k += 1;
        }
        KeySet { names, patterns, index }
    }

    /// The index of the key at the cursor (at its opening quote), with the cursor after the
    /// colon that follows it; `None` for a key not in the set. Tries the key `hints` predicts
    /// after `slot` first, and notes the key read for `slot`.
    #[inline(always)]
    fn read_key(&self, cur: &mut Cursor<'_>, hints: &mut KeyHints, slot: usize) -> Result<Option<usize>, JsonError> {
        let guess = hints.next.get(slot).copied().unwrap_or(0);
        if let Some(p) = self.patterns.get(usize::from(guess).wrapping_sub(1)) {
            if let Some(chunk) = cur.bytes.get(cur.pos..cur.pos.wrapping_add(16)) {
                let word = u128::from_le_bytes(chunk.try_into().unwrap_or([0; 16]));
                if p.len > 0 && word & p.mask == p.bytes {
                    cur.pos += p.len;
                    return Ok(Some(usize::from(guess) - 1));
                }
            }
        }
        self.read_key_unpredicted(cur, hints, slot)
    }

    /// [`KeySet::read_key`] when the key at the cursor is not the one predicted.
    #[inline(never)]
    fn read_key_unpredicted(
        &self,
        cur: &mut Cursor<'_>,
        hints: &mut KeyHints,
        slot: usize,
    ) -> Result<Option<usize>, JsonError> {
        let key = cur.key()?;
        let k = (self.index)(key.of(cur.bytes));
        if let (Some(k), Some(hint)) = (k, hints.next.get_mut(slot)) {
            // Fits: key tables hold fewer than 255 keys.
            *hint = k as u8 + 1;
        }
        Ok(k)
    }
}

/// Slots of [`KeyHints`]: one per key of a table (what followed it), then one per kind of
/// object a decoder reads (its first key).
pub(crate) const KEY_HINT_SLOTS: usize = 64;

/// The first slot for the first key of an object: `KEY_HINT_FIRST + ` the decoder's tag of the
/// object.
pub(crate) const KEY_HINT_FIRST: usize = 48;

/// What a decoder remembers between messages to read keys fast: for each key of its table, the
/// key that followed it last time, and for each kind of object, its first key (index + 1; 0 for
/// none).
///
/// Rationale: a venue sends the keys of each kind of message in the same order, so the key that
/// followed last time is nearly always the next one, and comparing the bytes at the cursor with
/// it (`"name":`, one masked 16-byte comparison) replaces scanning the key and finding it in the
/// table. A wrong guess only costs that comparison; what is decoded never depends on the hints.
#[derive(Clone, Debug)]
pub(crate) struct KeyHints {
    next: [u8; KEY_HINT_SLOTS],
}

impl Default for KeyHints {
    fn default() -> KeyHints {
        KeyHints { next: [0; KEY_HINT_SLOTS] }
    }
}

/// Walks the members of the object at the cursor (after whitespace), an object of kind `object`
/// (the decoder's tag, below `KEY_HINT_SLOTS - KEY_HINT_FIRST`): `member` gets the index of each
/// key in `keys` (`None` for another key) with the cursor before its value, and the hints (for
/// objects inside the value), and must consume the value. Accepts and refuses exactly what
/// [`walk_object`] does.
#[inline]
pub(crate) fn walk_keyed<'a, E: From<JsonError>, const N: usize>(
    cur: &mut Cursor<'a>,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    mut member: impl FnMut(&mut Cursor<'a>, Option<usize>, &mut KeyHints) -> Result<(), E>,
) -> Result<(), E> {
    cur.expect(b'{')?;
    let mut slot = KEY_HINT_FIRST + object;
    let mut first = true;
    loop {
        cur.skip_ws();
        match cur.peek() {
            Some(b'}') => {
                cur.bump();
                return Ok(());
            }
            Some(b',') if !first => {
                cur.bump();
                cur.skip_ws();
            }
            _ if first => {}
            _ => return Err(cur.unexpected().into()),
        }
        first = false;
        if cur.peek() != Some(b'"') {
            // The error `Cursor::key` gives.
            return Err(cur.unexpected().into());
        }
        let k = keys.read_key(cur, hints, slot)?;
        if let Some(k) = k {
            slot = k;
        }
        member(cur, k, hints)?;
    }
}

/// Reads the object at the cursor (after whitespace), a value inside `depth` open containers,
/// of kind `object` (see [`walk_keyed`]), into `nested` (fresh from [`Nested::new`]), noting
/// where its known keys' values lie: `value` consumes the value of each known key (with the
/// cursor at it, after whitespace); other values are validated and skipped.
#[inline]
pub(crate) fn read_nested<'a, const N: usize>(
    cur: &mut Cursor<'a>,
    depth: usize,
    nested: &mut Nested<'a, N>,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    mut value: impl FnMut(&mut Cursor<'a>, usize) -> Result<(), JsonError>,
) -> Result<(), JsonError> {
    if depth >= NESTING_MAX {
        return Err(cur.error(JsonErrorKind::TooDeep));
    }
    nested.read = true;
    walk_keyed(cur, keys, hints, object, |cur, k, _| {
        match k {
            Some(k) => {
                cur.skip_ws();
                let start = cur.pos;
                value(cur, k)?;
                nested.record(k, Span { start, end: cur.pos });
            }
            None => {
                cur.skip_value_at(depth + 1)?;
            }
        }
        Ok::<(), JsonError>(())
    })?;
    Ok(())
}

/// What the pass read of an array that must hold exactly one object (a book push's `data`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Single<'a, const N: usize> {
    /// The pass met the array.
    pub(crate) read: bool,
    count: usize,
    /// The first element, read when it is an object.
    first: Nested<'a, N>,
}

impl<'a, const N: usize> Single<'a, N> {
    /// Not read yet.
    #[inline]
    pub(crate) fn new(bytes: &'a [u8], keys: &'static [&'static str; N]) -> Single<'a, N> {
        Single { read: false, count: 0, first: Nested::new(bytes, keys) }
    }

    /// The one object's fields, or the error [`Fields::single_in_array`] gives for the same
    /// array (none or more than one element: [`DecodeError::OutOfRange`] on `field`; the
    /// element is not an object: [`DecodeError::WrongType`]; a repeated key).
    pub(crate) fn fields(&self, field: &'static str) -> Result<&Fields<'a, N>, DecodeError> {
        if self.count == 0 {
            return Err(DecodeError::OutOfRange(field));
        }
        if !self.first.read {
            return Err(DecodeError::WrongType(field));
        }
        let fields = self.first.fields()?;
        if self.count > 1 {
            return Err(DecodeError::OutOfRange(field));
        }
        Ok(fields)
    }
}

/// Reads the array at the cursor (at its `[`), a value inside `depth` open containers, that
/// must hold one object, into `single` (fresh from [`Single::new`]): the first element, when an
/// object, is read with [`read_nested`] (with `value`); the others are validated and counted.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_single<'a, const N: usize>(
    cur: &mut Cursor<'a>,
    depth: usize,
    single: &mut Single<'a, N>,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    mut value: impl FnMut(&mut Cursor<'a>, usize) -> Result<(), JsonError>,
) -> Result<(), JsonError> {
    single.read = true;
    walk_array(cur, |cur| {
        cur.skip_ws();
        if single.count == 0 && cur.peek() == Some(b'{') {
            read_nested(cur, depth + 1, &mut single.first, keys, hints, object, &mut value)?;
        } else {
            cur.skip_value_at(depth + 1)?;
        }
        single.count += 1;
        Ok::<(), JsonError>(())
    })?;
    Ok(())
}

/// Reads the array at the cursor (at its `[`), a value inside `depth` open containers, whose
/// elements must be objects (a trade push's `data`): each is read and handed to `each` in turn,
/// until the first error, which goes to `result` (see [`Deferred`]; `Ok` when there is none)
/// exactly as [`Fields::each_in_array`] gives it; the rest is only validated.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_objects<'a, const N: usize>(
    cur: &mut Cursor<'a>,
    depth: usize,
    keys: &KeySet<N>,
    hints: &mut KeyHints,
    object: usize,
    field: &'static str,
    result: &mut Deferred,
    mut each: impl FnMut(&Fields<'a, N>) -> Deferred,
) -> Result<(), JsonError> {
    *result = Ok(());
    walk_array(cur, |cur| {
        cur.skip_ws();
        if result.is_err() || cur.peek() != Some(b'{') {
            if result.is_ok() {
                *result = Err(DecodeError::WrongType(field));
            }
            cur.skip_value_at(depth + 1)?;
            return Ok(());
        }
        let mut element = Nested::new(cur.bytes, keys.names);
        read_nested(cur, depth + 1, &mut element, keys, hints, object, |cur, _| {
            cur.skip_value_at(depth + 2).map(drop)
        })?;
        *result = element.fields().and_then(&mut each);
        Ok::<(), JsonError>(())
    })
}

/// Walks the members of the object at the cursor (after whitespace): `member` gets the raw
/// content span of each key with the cursor before its value, and must consume the value.
#[inline]
pub(crate) fn walk_object<'a, E: From<JsonError>>(
    cur: &mut Cursor<'a>,
    mut member: impl FnMut(&mut Cursor<'a>, Span) -> Result<(), E>,
) -> Result<(), E> {
    cur.expect(b'{')?;
    let mut members = Members::new();
    while let Some(key) = members.next_key(cur)? {
        member(cur, key)?;
    }
    Ok(())
}

/// Walks the elements of the array at the cursor (after whitespace): `element` is called with
/// the cursor before each element, and must consume it.
#[inline]
pub(crate) fn walk_array<'a, E: From<JsonError>>(
    cur: &mut Cursor<'a>,
    mut element: impl FnMut(&mut Cursor<'a>) -> Result<(), E>,
) -> Result<(), E> {
    cur.expect(b'[')?;
    let mut elements = Elements::new();
    while elements.next(cur)? {
        element(cur)?;
    }
    Ok(())
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
#[inline]
pub(crate) fn push_bounded<T>(out: &mut Vec<T>, max: usize, item: T, field: &'static str) -> Result<(), DecodeError> {
    if out.len() >= max {
        return Err(DecodeError::TooManyLevels(field));
    }
    debug_assert!(out.len() < out.capacity());
    out.push(item);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Level arrays.

/// Cells of a level row after price and size that a [`Row`] hands to the decoder (OKX's
/// deprecated field and order count). Later cells are validated and skipped unread.
pub(crate) const LEVEL_EXTRA_CELLS_MAX: usize = 2;

/// One row of a level array, `[price, size, ...]`: the content spans of its two leading
/// strings, their decimal values when the fast path already parsed them, and the value spans of
/// up to [`LEVEL_EXTRA_CELLS_MAX`] further cells.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Row {
    /// Content span of the price string.
    pub(crate) p: Span,
    /// Content span of the size string.
    pub(crate) q: Span,
    /// `p_value` and `q_value` hold the parsed decimals (the fast path read the row).
    parsed: bool,
    p_value: i64,
    q_value: i64,
    extra: [Span; LEVEL_EXTRA_CELLS_MAX],
    extra_len: usize,
}

impl Row {
    /// A row whose decimals are read from their text.
    fn unparsed(p: Span, q: Span) -> Row {
        Row { p, q, ..Row::default() }
    }

    /// Keeps the value span of a cell after the size, if there is room.
    fn push_extra(&mut self, cell: Span) {
        if let Some(slot) = self.extra.get_mut(self.extra_len) {
            *slot = cell;
            self.extra_len += 1;
        }
    }

    /// Value spans of the cells after the size (at most [`LEVEL_EXTRA_CELLS_MAX`]).
    pub(crate) fn extra(&self) -> &[Span] {
        self.extra.get(..self.extra_len).unwrap_or(&[])
    }

    /// The price, as [`price`] reads the price text.
    #[inline]
    pub(crate) fn price(&self, bytes: &[u8], field: &'static str) -> Result<Price, DecodeError> {
        match self.parsed {
            true if self.p_value > 0 => Ok(Price(self.p_value)),
            true => Err(DecodeError::OutOfRange(field)),
            false => price(self.p.of(bytes), field),
        }
    }

    /// The size, as [`qty`] reads the size text.
    #[inline]
    pub(crate) fn qty(&self, bytes: &[u8], field: &'static str) -> Result<Qty, DecodeError> {
        match (self.parsed, u64::try_from(self.q_value)) {
            (true, Ok(v)) => Ok(Qty(v)),
            // The fast path reads no sign, so this is never taken; it keeps the reading total.
            (true, Err(_)) => Err(DecodeError::BadDecimal { field, error: ParseError::Negative }),
            (false, _) => qty(self.q.of(bytes), field),
        }
    }
}

/// Reads the level array at the cursor (after whitespace, at its `[`), a value inside `depth`
/// open containers, in one pass: each row is handed to `make` and the result appended to `out`
/// (at most `max` items, see [`push_bounded`]).
///
/// JSON syntax errors are returned as [`Cursor::skip_value_at`] returns them. The first level
/// error (a row that is not `[price, size, ...]` with two strings first, what `make` refuses,
/// the bound) goes to `result` (see [`Deferred`]; `Ok` when there is none); the rest of the
/// array is then only validated. Rationale for the out-parameter: the nested result read back
/// from memory right after the call cost a store-forwarding stall per array.
///
/// Rationale: a row of the usual shape, two plain decimal strings and maybe a few more cells,
/// is read on a fast path that parses the decimals as it scans them; any other row is read
/// again from its start on the general path (validate, then read its cells), so unusual input
/// costs a little more and gets exactly the answers of the general path.
pub(crate) fn read_levels<T>(
    cur: &mut Cursor<'_>,
    depth: usize,
    field: &'static str,
    max: usize,
    out: &mut Vec<T>,
    result: &mut Deferred,
    mut make: impl FnMut(&Row) -> Result<T, DecodeError>,
) -> Result<(), JsonError> {
    let bytes = cur.bytes;
    if depth + 1 >= NESTING_MAX {
        // The array or its rows are at the nesting bound: the general path knows the errors.
        let span = cur.skip_value_at(depth)?;
        *result = walk_levels(bytes, span, field, max, out, make);
        return Ok(());
    }
    *result = Ok(());
    let mut row = Row::default();
    walk_array(cur, |cur| {
        cur.skip_ws();
        let row_start = cur.pos;
        if result.is_ok() {
            if fast_row(cur, depth + 1, &mut row) {
                *result = make(&row).and_then(|item| push_bounded(out, max, item, field));
                return Ok(());
            }
            cur.pos = row_start;
        }
        cur.skip_value_at(depth + 1)?;
        if result.is_ok() {
            let mut row_cur = Cursor::new(bytes, row_start);
            *result = row_at(&mut row_cur, field)
                .and_then(|row| make(&row))
                .and_then(|item| push_bounded(out, max, item, field));
        }
        Ok::<(), JsonError>(())
    })
}

/// The fast path of [`read_levels`] for the row at the cursor (at its `[`), which opens inside
/// `depth` containers: `[` `"decimal"` `,` `"decimal"` then further cells of any kind, then `]`.
/// Fills `row` and returns true; false, with the cursor anywhere inside the row, for a row of
/// any other shape or with any syntax error: the caller then reads it from its start on the
/// general path.
#[inline]
fn fast_row(cur: &mut Cursor<'_>, depth: usize, row: &mut Row) -> bool {
    if cur.peek() != Some(b'[') {
        return false;
    }
    cur.bump();
    cur.skip_ws();
    let Some((p, p_value)) = cur.decimal_cell() else {
        return false;
    };
    cur.skip_ws();
    if cur.peek() != Some(b',') {
        return false;
    }
    cur.bump();
    cur.skip_ws();
    let Some((q, q_value)) = cur.decimal_cell() else {
        return false;
    };
    *row = Row { p, q, parsed: true, p_value, q_value, extra: row.extra, extra_len: 0 };
    loop {
        cur.skip_ws();
        match cur.peek() {
            Some(b']') => {
                cur.bump();
                return true;
            }
            Some(b',') => {
                cur.bump();
                match cur.skip_value_at(depth + 1) {
                    Ok(cell) => row.push_extra(cell),
                    Err(_) => return false,
                }
            }
            _ => return false,
        }
    }
}

/// Reads the (already validated) row at the cursor on the general path: a row that is not an
/// array, or whose first two cells are not strings, is [`DecodeError::BadLevel`] on `field`.
fn row_at(cur: &mut Cursor<'_>, field: &'static str) -> Result<Row, DecodeError> {
    cur.skip_ws();
    if cur.peek() != Some(b'[') {
        return Err(DecodeError::BadLevel(field));
    }
    cur.expect(b'[')?;
    let mut cells = Elements::new();
    let p = level_cell(cur, &mut cells, field)?;
    let q = level_cell(cur, &mut cells, field)?;
    let mut row = Row::unparsed(p, q);
    while cells.next(cur)? {
        row.push_extra(cur.skip_value()?);
    }
    Ok(row)
}

/// One string cell of a level; its raw content.
fn level_cell(cur: &mut Cursor<'_>, cells: &mut Elements, field: &'static str) -> Result<Span, DecodeError> {
    if !cells.next(cur)? {
        return Err(DecodeError::BadLevel(field));
    }
    cur.skip_ws();
    if cur.peek() != Some(b'"') {
        return Err(DecodeError::BadLevel(field));
    }
    Ok(cur.string()?)
}

/// Walks the (already validated) `[[price, size, ...], ...]` at `span` on the general path: each
/// row is handed to `make` and the result appended to `out` (at most `max` items, see
/// [`push_bounded`]). The value there not being an array is [`DecodeError::WrongType`] on
/// `field`; a bad row is [`DecodeError::BadLevel`].
pub(crate) fn walk_levels<T>(
    bytes: &[u8],
    span: Span,
    field: &'static str,
    max: usize,
    out: &mut Vec<T>,
    mut make: impl FnMut(&Row) -> Result<T, DecodeError>,
) -> Result<(), DecodeError> {
    let mut cur = array_at(bytes, span, field)?;
    let mut rows = Elements::new();
    while rows.next(&mut cur)? {
        let row = row_at(&mut cur, field)?;
        push_bounded(out, max, make(&row)?, field)?;
    }
    Ok(())
}

/// How one side's level buffer was filled during the single pass: from the array of key `key`
/// of the object `object` (a decoder-defined tag), with this outcome.
///
/// Rationale: the pass reads a level array into the side's buffer when it meets it, before the
/// decoder knows which array it will want (Binance's depth diff and snapshot name them
/// differently, and a combined stream's wrapper could carry one too). The first array met
/// claims the buffer; when the decoder then wants another, it is read again from its span.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Claim {
    /// The object the array was read from.
    pub(crate) object: u8,
    /// Its key.
    pub(crate) key: usize,
    /// What reading it gave.
    pub(crate) result: Deferred,
}

// ---------------------------------------------------------------------------------------------
// Value readers shared by the venue decoders.

/// The raw content of a string value (between the quotes), or `None` if it is not a string.
pub(crate) fn str_raw(text: &[u8]) -> Option<&[u8]> {
    text.strip_prefix(b"\"").and_then(|t| t.strip_suffix(b"\""))
}

/// The raw content of a string value, or [`DecodeError::WrongType`] on `field`.
pub(crate) fn str_field<'a>(text: &'a [u8], field: &'static str) -> Result<&'a [u8], DecodeError> {
    str_raw(text).ok_or(DecodeError::WrongType(field))
}

/// A price string: a decimal above zero.
#[inline]
pub(crate) fn price(raw: &[u8], field: &'static str) -> Result<Price, DecodeError> {
    let p = match plain_decimal(raw) {
        Some(v) => Price(v),
        None => Price::parse(raw).map_err(|error| DecodeError::BadDecimal { field, error })?,
    };
    if p.0 <= 0 {
        return Err(DecodeError::OutOfRange(field));
    }
    Ok(p)
}

/// A quantity string: a decimal at or above zero.
#[inline]
pub(crate) fn qty(raw: &[u8], field: &'static str) -> Result<Qty, DecodeError> {
    match plain_decimal(raw).map(u64::try_from) {
        Some(Ok(v)) => Ok(Qty(v)),
        _ => Qty::parse(raw).map_err(|error| DecodeError::BadDecimal { field, error }),
    }
}

/// The longest plain decimal, `digits[.digits]`, at the start of `text`: its length in bytes
/// and its value scaled by 10^8, exactly as [`crate::fixed::parse_decimal`] computes it for
/// that text. `None` when it has no digit or more than ten digits before the point (the
/// caller then uses `parse_decimal`, which checks for overflow).
///
/// Rationale: digits are read byte by byte, except that a fraction of eight digits or more
/// starts with one eight-byte read ([`leading_digits`]); reading every run eight bytes at a
/// time measured slower on the short decimals most venues send, and this faster on Binance's
/// eight-decimal ones.
#[inline]
fn plain_decimal_prefix(text: &[u8]) -> Option<(usize, i64)> {
    let mut i = 0;
    let mut int: u64 = 0;
    while let Some(&c) = text.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        int = int.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    let int_digits = i;
    if int_digits > DECIMAL_INT_DIGITS_FAST {
        return None;
    }
    let mut frac: u64 = 0;
    let mut frac_digits: usize = 0;
    let mut any_digit = int_digits > 0;
    if text.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        // Eight fraction digits at once when there are eight (Binance sends eight decimals);
        // shorter fractions are read byte by byte, which measured faster for them.
        if let Some(w) = chunk8(text, i) {
            if let (8, value) = leading_digits(w) {
                (frac, frac_digits) = (value, 8);
                i += 8;
            }
        }
        while let Some(&c) = text.get(i) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            // Digits past the eighth are truncated, as `parse_decimal` does.
            if frac_digits < DECIMALS as usize {
                frac = frac * 10 + u64::from(d);
                frac_digits += 1;
            }
            i += 1;
        }
        any_digit |= i > frac_start;
    }
    if !any_digit {
        return None;
    }
    let scale = POW10.get(DECIMALS as usize - frac_digits).copied().unwrap_or(1);
    // At most ten integer digits and eight fraction digits: below 10^18, so the casts and the
    // arithmetic are exact (see `DECIMAL_INT_DIGITS_FAST`).
    Some((i, int as i64 * SCALE + frac as i64 * scale))
}

/// The eight bytes of `text` from `at`, little-endian, when there are eight.
#[inline]
fn chunk8(text: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = text.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// How many of the eight bytes of `w` (first byte lowest) are ASCII digits before the first
/// other byte, and the value of those digits.
#[inline]
fn leading_digits(w: u64) -> (usize, u64) {
    // Digits become 0..=9; a byte is flagged (top bit) when it is not one. A carry out of a
    // flagged byte only reaches bytes after it, which do not count.
    let a = w ^ 0x3030_3030_3030_3030;
    let flags = (a.wrapping_add(0x7676_7676_7676_7676) | a) & 0x8080_8080_8080_8080;
    let n = (flags.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // The digits move to the top bytes (the bytes after them fall off the end), zeros below
    // them lead; then pairs, quads and the eight combine.
    let v = a << (8 * (8 - n));
    let v = (v & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(2561) >> 8;
    let v = (v & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601) >> 16;
    let v = (v & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001) >> 32;
    (n, v)
}

/// `text` as a plain decimal (see [`plain_decimal_prefix`]), when that is all it holds.
#[inline]
fn plain_decimal(text: &[u8]) -> Option<i64> {
    match plain_decimal_prefix(text) {
        Some((len, value)) if len == text.len() => Some(value),
        _ => None,
    }
}

/// A string that must be read verbatim: no escapes.
#[inline]
pub(crate) fn plain_str<'a>(text: &'a [u8], field: &'static str) -> Result<&'a [u8], DecodeError> {
    let s = str_field(text, field)?;
    // A plain loop: these strings are short, where `contains` (memchr) costs more to set up.
    for &c in s {
        if c == b'\\' {
            return Err(DecodeError::Escaped(field));
        }
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
#[inline]
pub(crate) fn uint(text: &[u8], field: &'static str) -> Result<u64, DecodeError> {
    match text.first() {
        Some(b'0'..=b'9') => {}
        Some(b'-') => return Err(DecodeError::OutOfRange(field)),
        _ => return Err(DecodeError::WrongType(field)),
    }
    // Rationale: ids and times have at most 19 digits, which cannot overflow a `u64`, so the
    // common case needs no overflow check per digit; anything else takes the checked loop.
    if text.len() <= 19 {
        let mut v: u64 = 0;
        let mut digits = true;
        for &c in text {
            let d = c.wrapping_sub(b'0');
            digits &= d <= 9;
            v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        }
        if digits {
            return Ok(v);
        }
    }
    uint_checked(text, field)
}

/// The checked loop of [`uint`].
#[cold]
fn uint_checked(text: &[u8], field: &'static str) -> Result<u64, DecodeError> {
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

/// A [`Level`] from a row; extra cells (older API versions sent a third, ignored one) are
/// skipped.
#[inline]
pub(crate) fn level(bytes: &[u8], row: &Row, field: &'static str) -> Result<Level, DecodeError> {
    Ok(Level { price: row.price(bytes, field)?, qty: row.qty(bytes, field)? })
}

/// Reads `[[price, qty, ...], ...]` at `span` into `out` (bounded by `max`) on the general path.
pub(crate) fn parse_levels(
    bytes: &[u8],
    span: Span,
    field: &'static str,
    max: usize,
    out: &mut Vec<Level>,
) -> Result<(), DecodeError> {
    walk_levels(bytes, span, field, max, out, |row| level(bytes, row, field))
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
    fn plain_decimals_match_parse_decimal() {
        use crate::fixed::parse_decimal;
        // Every string of up to six bytes over digits, a point and a stop byte, then longer
        // ones from a fixed generator: the fast reading must agree with `parse_decimal`
        // whenever it gives a value, and give one for every plain decimal it is meant to take.
        let alphabet = b"0129.x";
        let check = |s: &[u8]| {
            let want = parse_decimal(s);
            match plain_decimal(s) {
                Some(v) => assert_eq!(Ok(v), want, "{}", String::from_utf8_lossy(s)),
                None => {
                    let plain = s.iter().all(|c| c.is_ascii_digit() || *c == b'.')
                        && s.iter().filter(|&&c| c == b'.').count() <= 1
                        && s.iter().any(u8::is_ascii_digit)
                        && s.iter().take_while(|c| c.is_ascii_digit()).count() <= 10;
                    assert!(!plain, "{} is plain but was not read", String::from_utf8_lossy(s));
                }
            }
            // As a prefix, followed by a quote and more bytes (so the eight-byte reads run).
            for tail in [&b"\""[..], b"\",\"12345678\"]", b"\"\xff9999999"] {
                let mut q = s.to_vec();
                q.extend_from_slice(tail);
                if let Some((len, v)) = plain_decimal_prefix(&q) {
                    if len == s.len() {
                        assert_eq!(Ok(v), want, "{}", String::from_utf8_lossy(s));
                    }
                }
            }
        };
        for len in 0..=6u32 {
            for mut n in 0..alphabet.len().pow(len) {
                let mut s = Vec::new();
                for _ in 0..len {
                    s.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                check(&s);
            }
        }
        let mut x: u64 = 0x5eed;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 24) as usize;
            let s: Vec<u8> = (0..len)
                .map(|i| {
                    let r = (x >> (i % 58)) as usize;
                    if r.is_multiple_of(11) {
                        b'.'
                    } else {
                        b'0' + (r % 10) as u8
                    }
                })
                .collect();
            check(&s);
        }
        assert_eq!(plain_decimal(b"64000.00000000"), Some(6_400_000_000_000));
        assert_eq!(plain_decimal(b"0.123456789"), Some(12_345_678));
        assert_eq!(plain_decimal(b"9999999999.99999999"), Some(999_999_999_999_999_999));
        assert_eq!(plain_decimal(b"99999999999"), None);
    }

    #[test]
    fn uint_reads_like_the_checked_loop() {
        for text in [
            &b"0"[..],
            b"7",
            b"12345678",
            b"123456789",
            b"1672515782136",
            b"18446744073709551615",
            b"18446744073709551616",
            b"9999999999999999999",
            b"99999999999999999999",
            b"00000000000000000001",
            b"1234567a",
            b"12345678.5",
            b"1.5",
            b"1e5",
            b"-1",
            b"",
        ] {
            let checked = match text.first() {
                Some(b'0'..=b'9') => uint_checked(text, "f"),
                Some(b'-') => Err(DecodeError::OutOfRange("f")),
                _ => Err(DecodeError::WrongType("f")),
            };
            assert_eq!(uint(text, "f"), checked, "{}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn eight_digit_reads_match_the_byte_loop() {
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let specials = [b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff, b'0', b'9', b'/', b':', b'.'];
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Digits, with other bytes planted often.
            let mut b = [0u8; 8];
            for (i, c) in b.iter_mut().enumerate() {
                *c = if (x >> (i * 3)) & 7 == 0 {
                    specials[((x >> (i * 5)) as usize) % specials.len()]
                } else {
                    b'0' + ((x >> (i * 4)) % 10) as u8
                };
            }
            let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
            let want = b.iter().take(digits).fold(0u64, |v, &c| v * 10 + u64::from(c - b'0'));
            assert_eq!(leading_digits(u64::from_le_bytes(b)), (digits, want), "{b:?}");
        }
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
