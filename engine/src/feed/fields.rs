//! Objects read by key on the general path: [`Fields`] notes where the values of the keys a
//! decoder reads lie in one object, refuses a repeated key, and reads them when asked.

use super::cursor::{array_at, walk_object, Cursor, Elements, Span};
use super::error::DecodeError;
use super::scalar::{price, qty, str_field};
use crate::fixed::{Price, Qty};

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
