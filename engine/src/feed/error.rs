//! Why a venue message is refused: the JSON syntax errors the scanner finds ([`JsonError`]),
//! the decoders' errors ([`DecodeError`]), and the error a single pass holds back until the
//! decoder reaches the check that reads it (`Deferred`).

use core::fmt;

use crate::fixed::ParseError;

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
    /// Arrays and objects nested deeper than [`NESTING_MAX`](super::NESTING_MAX).
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
