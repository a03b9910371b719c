//! The CRC-32 book checksum OKX and Bitget share (venues.md §3.3; Bitget's §4.2 says its
//! construction is identical), and the store of the venue's own level text it is computed over.
//!
//! The checksum hashes the best [`CHECKSUM_LEVELS`] bids and asks interleaved as
//! `bid1.price:bid1.size:ask1.price:ask1.size:bid2...`, using the exact strings the venue sent
//! (`"0.5000"`, never `"0.5"`), read as a signed 32-bit integer. A sync therefore keeps, per
//! level, the latest price and size text received (`TextBook`, crate-private), in fixed-size
//! slots allocated once, next to the [`crate::book::Book`] it drives.

use super::{DecodeError, Row, Span};
use crate::book::Side;
use crate::fixed::{Price, Qty};

/// Levels per side that enter the checksum (venues.md §3.3 step 2).
pub const CHECKSUM_LEVELS: usize = 25;

/// Longest price or size text a checksumming decoder accepts, in bytes. Longer text is refused
/// with [`DecodeError::OutOfRange`] on the side's field (`bids`/`asks`). Rationale: the sync keeps
/// each level's text in a fixed-size slot; OKX and Bitget numbers are at most about 20 bytes.
pub const LEVEL_TEXT_LEN_MAX: usize = 32;

/// A byte range `start..end` of the decoded message: where a level's original text lies.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct TextSpan {
    /// Offset of the first byte.
    pub start: usize,
    /// Offset one past the last byte.
    pub end: usize,
}

impl TextSpan {
    /// The bytes of the span in `frame` (the message it was decoded from); empty if the span does
    /// not lie inside `frame`.
    pub fn of(self, frame: &[u8]) -> &[u8] {
        frame.get(self.start..self.end).unwrap_or(&[])
    }
}

impl From<Span> for TextSpan {
    fn from(s: Span) -> TextSpan {
        TextSpan { start: s.start, end: s.end }
    }
}

/// Checks that a level's price and size text (in `bytes`) fit the text store, and parses them.
/// `field` names the side in errors.
#[inline]
pub(crate) fn text_level(bytes: &[u8], row: &Row, field: &'static str) -> Result<(Price, Qty), DecodeError> {
    if row.p.of(bytes).len() > LEVEL_TEXT_LEN_MAX || row.q.of(bytes).len() > LEVEL_TEXT_LEN_MAX {
        return Err(DecodeError::OutOfRange(field));
    }
    Ok((row.price(bytes, field)?, row.qty(bytes, field)?))
}

// ---------------------------------------------------------------------------------------------
// CRC-32.

/// The CRC-32 table (IEEE polynomial, reflected: 0xEDB88320), built at compile time.
const CRC_TABLE: [u32; 256] = crc_table();

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// A running CRC-32 (IEEE / zlib, as `crc32fast::hash`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Crc32(u32);

impl Default for Crc32 {
    fn default() -> Crc32 {
        Crc32::new()
    }
}

impl Crc32 {
    /// An empty CRC.
    pub const fn new() -> Crc32 {
        Crc32(0xFFFF_FFFF)
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut c = self.0;
        for &b in bytes {
            c = CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
        }
        self.0 = c;
    }

    /// The CRC of everything fed.
    pub fn finish(self) -> u32 {
        !self.0
    }
}

/// CRC-32 of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.finish()
}

/// The book checksum (venues.md §3.3): CRC-32 of
/// `bid1.price:bid1.size:ask1.price:ask1.size:bid2...` over the best [`CHECKSUM_LEVELS`] levels
/// of each side given best first as `(price text, size text)`, entries of a shorter side simply
/// skipped, read as a signed 32-bit integer. Computed without building the string.
pub fn book_checksum<'t>(
    bids: impl IntoIterator<Item = (&'t [u8], &'t [u8])>,
    asks: impl IntoIterator<Item = (&'t [u8], &'t [u8])>,
) -> i32 {
    let mut crc = Crc32::new();
    let mut first = true;
    let mut put = |(p, s): (&[u8], &[u8])| {
        if !first {
            crc.update(b":");
        }
        first = false;
        crc.update(p);
        crc.update(b":");
        crc.update(s);
    };
    let mut bids = bids.into_iter().take(CHECKSUM_LEVELS);
    let mut asks = asks.into_iter().take(CHECKSUM_LEVELS);
    loop {
        let (b, a) = (bids.next(), asks.next());
        if b.is_none() && a.is_none() {
            break;
        }
        if let Some(b) = b {
            put(b);
        }
        if let Some(a) = a {
            put(a);
        }
    }
    crc.finish() as i32
}

// ---------------------------------------------------------------------------------------------
// The level text store.

/// One level's original text, kept for the checksum.
#[derive(Clone, Copy, Debug)]
struct TextLevel {
    price: Price,
    price_len: u8,
    size_len: u8,
    price_text: [u8; LEVEL_TEXT_LEN_MAX],
    size_text: [u8; LEVEL_TEXT_LEN_MAX],
}

impl TextLevel {
    fn price_text(&self) -> &[u8] {
        self.price_text.get(..usize::from(self.price_len)).unwrap_or(&[])
    }

    fn size_text(&self) -> &[u8] {
        self.size_text.get(..usize::from(self.size_len)).unwrap_or(&[])
    }
}

/// The best `levels_max` levels of one side with their text, best first.
#[derive(Clone, Debug)]
struct TextSide {
    levels: Vec<TextLevel>,
    levels_max: usize,
    /// A level was evicted or not stored since the last snapshot: deeper levels are unknown.
    lossy: bool,
}

impl TextSide {
    fn new(levels_max: usize) -> TextSide {
        TextSide { levels: Vec::with_capacity(levels_max), levels_max, lossy: false }
    }

    fn clear(&mut self) {
        self.levels.clear();
        self.lossy = false;
    }

    fn apply(&mut self, side: Side, price: Price, qty: Qty, price_text: &[u8], size_text: &[u8]) {
        let found = match side {
            Side::Bid => self.levels.binary_search_by(|l| price.cmp(&l.price)),
            Side::Ask => self.levels.binary_search_by(|l| l.price.cmp(&price)),
        };
        let mut level = TextLevel {
            price,
            price_len: 0,
            size_len: 0,
            price_text: [0; LEVEL_TEXT_LEN_MAX],
            size_text: [0; LEVEL_TEXT_LEN_MAX],
        };
        // The decoder refuses longer text; cut defensively rather than index out of bounds.
        let pn = price_text.len().min(LEVEL_TEXT_LEN_MAX);
        let sn = size_text.len().min(LEVEL_TEXT_LEN_MAX);
        if let (Some(pd), Some(ps), Some(sd), Some(ss)) =
            (level.price_text.get_mut(..pn), price_text.get(..pn), level.size_text.get_mut(..sn), size_text.get(..sn))
        {
            pd.copy_from_slice(ps);
            sd.copy_from_slice(ss);
        }
        level.price_len = pn as u8;
        level.size_len = sn as u8;
        match found {
            Ok(i) => {
                if qty.0 == 0 {
                    self.levels.remove(i);
                } else if let Some(slot) = self.levels.get_mut(i) {
                    *slot = level;
                }
            }
            Err(i) => {
                if qty.0 == 0 {
                    return;
                }
                if self.levels.len() == self.levels_max {
                    self.lossy = true;
                    if i == self.levels.len() {
                        return;
                    }
                    self.levels.pop();
                }
                debug_assert!(self.levels.len() < self.levels.capacity());
                self.levels.insert(i, level);
            }
        }
    }

    /// The checksum cannot be trusted: levels were dropped and fewer than 25 remain.
    fn unverifiable(&self) -> bool {
        self.lossy && self.levels.len() < CHECKSUM_LEVELS
    }

    fn texts(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.levels.iter().map(|l| (l.price_text(), l.size_text()))
    }
}

/// The result of [`TextBook::check`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Check {
    /// No checksum to compare: absent, `0`, or verification is off.
    Skipped,
    /// The store dropped levels and holds fewer than [`CHECKSUM_LEVELS`] on a side: the
    /// checksum cannot be computed (venues.md §6 item 14), so it was not compared.
    Unverifiable,
    /// The local checksum equals the venue's.
    Match,
    /// The local checksum differs from the venue's.
    Mismatch {
        /// The venue's checksum.
        expected: i32,
        /// The local book's.
        computed: i32,
    },
}

/// Both sides' level text, best `levels_max` per side, in slots allocated in [`TextBook::new`].
///
/// At the bound the farthest level is dropped (like [`crate::book::Book`]) and the side is marked
/// lossy until the next [`TextBook::clear`]; a lossy side holding fewer than [`CHECKSUM_LEVELS`]
/// levels makes the checksum unverifiable ([`Check::Unverifiable`]).
#[derive(Clone, Debug)]
pub(crate) struct TextBook {
    bids: TextSide,
    asks: TextSide,
}

impl TextBook {
    /// A store of the best `levels_max` levels per side (at least [`CHECKSUM_LEVELS`]).
    pub(crate) fn new(levels_max: usize) -> TextBook {
        assert!(levels_max >= CHECKSUM_LEVELS, "the checksum needs {CHECKSUM_LEVELS} levels per side");
        TextBook { bids: TextSide::new(levels_max), asks: TextSide::new(levels_max) }
    }

    /// Forgets every level.
    pub(crate) fn clear(&mut self) {
        self.bids.clear();
        self.asks.clear();
    }

    /// Sets the level at `price` on `side`, keeping its text; size zero removes it, and removal
    /// of an absent level is a no-op.
    pub(crate) fn apply(&mut self, side: Side, price: Price, qty: Qty, price_text: &[u8], size_text: &[u8]) {
        match side {
            Side::Bid => self.bids.apply(side, price, qty, price_text, size_text),
            Side::Ask => self.asks.apply(side, price, qty, price_text, size_text),
        }
    }

    /// The checksum of the stored levels as the venue computes it.
    pub(crate) fn checksum(&self) -> i32 {
        book_checksum(self.bids.texts(), self.asks.texts())
    }

    /// Compares the venue's `expected` checksum with the store's, when it is present, non-zero
    /// (a venue that dropped the checksum sends `0` or nothing, venues.md §3.3 and §6 item 24)
    /// and `enabled`.
    pub(crate) fn check(&self, expected: Option<i32>, enabled: bool) -> Check {
        let Some(expected) = expected.filter(|&c| c != 0 && enabled) else {
            return Check::Skipped;
        };
        if self.bids.unverifiable() || self.asks.unverifiable() {
            return Check::Unverifiable;
        }
        let computed = self.checksum();
        if computed == expected {
            Check::Match
        } else {
            Check::Mismatch { expected, computed }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn text_book_checks_only_a_present_non_zero_checksum_when_enabled() {
        let mut t = TextBook::new(CHECKSUM_LEVELS);
        t.apply(Side::Bid, Price(100), Qty(1), b"0.000001", b"0.00000001");
        let c = t.checksum();
        assert_eq!(c, crc32(b"0.000001:0.00000001") as i32);
        assert_eq!(t.check(None, true), Check::Skipped);
        assert_eq!(t.check(Some(0), true), Check::Skipped);
        assert_eq!(t.check(Some(c), false), Check::Skipped);
        assert_eq!(t.check(Some(c), true), Check::Match);
        assert_eq!(t.check(Some(c ^ 1), true), Check::Mismatch { expected: c ^ 1, computed: c });
    }
}
