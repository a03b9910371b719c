//! Level arrays, `[[price, size, ...], ...]`: a [`Row`] per level, read in one pass with the
//! decimals parsed as they are scanned ([`read_levels`]) or on the general path
//! ([`walk_levels`]), into buffers bounded at construction ([`push_bounded`]).

use super::cursor::{array_at, walk_array, Cursor, Elements, Span, NESTING_MAX};
use super::error::{DecodeError, Deferred, JsonError};
use super::scalar::{price, qty};
use crate::book::Level;
use crate::fixed::{ParseError, Price, Qty};

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
