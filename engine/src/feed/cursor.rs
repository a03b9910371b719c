//! The JSON scanner the venue decoders share: a [`Cursor`] that validates full JSON syntax as
//! it reads (strings with escapes and UTF-8, numbers, literals, nesting up to [`NESTING_MAX`])
//! without building a tree and without recursion, and the walks over an object's members and an
//! array's elements built on it.

use super::error::{DecodeError, JsonError, JsonErrorKind};
use super::scalar::plain_decimal_prefix;

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
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
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
    pub(super) fn bump(&mut self) {
        self.pos += 1;
    }

    pub(crate) fn error(&self, kind: JsonErrorKind) -> JsonError {
        JsonError { kind, offset: self.pos }
    }

    /// The error for the byte at the cursor: an early end, or an unexpected byte.
    pub(super) fn unexpected(&self) -> JsonError {
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
    pub(super) fn decimal_cell(&mut self) -> Option<(Span, i64)> {
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
    pub(super) fn key(&mut self) -> Result<Span, JsonError> {
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
