//! Scalar values of the venues' messages: strings read verbatim, prices and quantities (plain
//! decimals parsed on a fast path, anything else by [`crate::fixed`]), integers, times and
//! taker sides.

use super::error::DecodeError;
use crate::fixed::{Price, Qty, DECIMALS, SCALE};

/// Most digits before the point that [`plain_decimal_prefix`] parses: ten digits times 10^8
/// stays below `i64::MAX`, so no overflow check is needed; longer integer parts go to
/// [`crate::fixed::parse_decimal`], which checks.
const DECIMAL_INT_DIGITS_FAST: usize = 10;

// Ten digits: 9_999_999_999 * 10^8 + 99_999_999 fits an `i64`.
const _: () = assert!(DECIMAL_INT_DIGITS_FAST == 10 && (9_999_999_999 * SCALE).checked_add(SCALE - 1).is_some());

/// 10^0 ..= 10^8: the scale of a fraction of `8 - i` digits.
const POW10: [i64; DECIMALS as usize + 1] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];

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
pub(super) fn plain_decimal_prefix(text: &[u8]) -> Option<(usize, i64)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
