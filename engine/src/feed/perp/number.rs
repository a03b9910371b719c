//! The numbers of the perpetual frames: a value is a JSON string holding
//! `-?digits[.digits][(e|E)[+-]digits]`, validated here, then read as an `f64` by the standard
//! library's exactly rounded parser (see the module doc of [`super`] for why `f64`).
//!
//! Accepted: `"0.0001"`, `"-0.00012"`, `"43511.70"`, `"1.5e-5"`, `"7"`; an empty string where
//! the value is optional reads as absent. Refused:
//! - a bare JSON number or any other non-string value: [`DecodeError::WrongType`];
//! - a string that does not follow the grammar (empty where required, a lone `-`, `.5`, `1.`,
//!   `1e`, `+1`, `NaN`, `inf`, `0x10`, surrounding spaces, an escape): [`DecodeError::BadDecimal`];
//! - a value beyond `f64` (`1e999`), a price not above zero or a negative quantity or open
//!   interest: [`DecodeError::OutOfRange`].

use crate::feed::{str_raw, DecodeError, Fields};
use crate::fixed::ParseError;

/// A number sent as a string (see the module doc): its value.
pub(crate) fn decimal(text: &[u8], field: &'static str) -> Result<f64, DecodeError> {
    let s = str_raw(text).ok_or(DecodeError::WrongType(field))?;
    parse_number(s, field)
}

/// The content of a number string: `-?digits[.digits][(e|E)[+-]digits]`.
fn parse_number(s: &[u8], field: &'static str) -> Result<f64, DecodeError> {
    let bad = |error| DecodeError::BadDecimal { field, error };
    if s.is_empty() {
        return Err(bad(ParseError::Empty));
    }
    let mut i = usize::from(s.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return Err(bad(if i == s.len() { ParseError::Empty } else { ParseError::BadByte }));
    }
    if s.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return Err(bad(ParseError::BadByte));
        }
    }
    if let Some(b'e' | b'E') = s.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = s.get(i) {
            i += 1;
        }
        if !digits(&mut i) {
            return Err(bad(ParseError::BadByte));
        }
    }
    if i != s.len() {
        return Err(bad(ParseError::BadByte));
    }
    // Only ASCII digits, signs, a point and an exponent mark were let through.
    let v: f64 = core::str::from_utf8(s).ok().and_then(|t| t.parse().ok()).ok_or(bad(ParseError::BadByte))?;
    if !v.is_finite() {
        return Err(DecodeError::OutOfRange(field));
    }
    Ok(v)
}

/// Key `k`'s value of `f`, a number string: `None` when absent or the empty string.
pub(crate) fn opt_decimal<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<Option<f64>, DecodeError> {
    match f.get(k) {
        None | Some(b"\"\"") => Ok(None),
        Some(text) => decimal(text, f.name(k)).map(Some),
    }
}

/// A price: above zero, else [`DecodeError::OutOfRange`].
pub(crate) fn positive(v: f64, field: &'static str) -> Result<f64, DecodeError> {
    if v > 0.0 {
        Ok(v)
    } else {
        Err(DecodeError::OutOfRange(field))
    }
}

/// A quantity or open interest: at or above zero, else [`DecodeError::OutOfRange`].
pub(crate) fn non_negative(v: f64, field: &'static str) -> Result<f64, DecodeError> {
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(DecodeError::OutOfRange(field))
    }
}

/// Key `k`'s value of `f`, a required price string.
pub(crate) fn req_price<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<f64, DecodeError> {
    positive(decimal(f.req(k)?, f.name(k))?, f.name(k))
}

/// Key `k`'s value of `f`, a required quantity string.
pub(crate) fn req_qty<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<f64, DecodeError> {
    non_negative(decimal(f.req(k)?, f.name(k))?, f.name(k))
}

/// Key `k`'s value of `f`, an optional price string.
pub(crate) fn opt_price<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<Option<f64>, DecodeError> {
    opt_decimal(f, k)?.map(|v| positive(v, f.name(k))).transpose()
}

/// Key `k`'s value of `f`, an optional quantity string.
pub(crate) fn opt_qty<const N: usize>(f: &Fields<'_, N>, k: usize) -> Result<Option<f64>, DecodeError> {
    opt_decimal(f, k)?.map(|v| non_negative(v, f.name(k))).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_the_grammar() {
        assert_eq!(parse_number(b"0.0001", "f"), Ok(0.0001));
        assert_eq!(parse_number(b"-0.00012", "f"), Ok(-0.00012));
        assert_eq!(parse_number(b"43511.70", "f"), Ok(43511.7));
        assert_eq!(parse_number(b"1.5e-5", "f"), Ok(1.5e-5));
        assert_eq!(parse_number(b"7", "f"), Ok(7.0));
        let bad = |error| Err(DecodeError::BadDecimal { field: "f", error });
        assert_eq!(parse_number(b"", "f"), bad(ParseError::Empty));
        assert_eq!(parse_number(b"-", "f"), bad(ParseError::Empty));
        for s in [&b"."[..], b".5", b"1.", b"1e", b"+1", b"1.2.3", b"NaN", b"inf", b"0x10", b" 1", b"1 ", b"1e+"] {
            assert_eq!(parse_number(s, "f"), bad(ParseError::BadByte), "{}", String::from_utf8_lossy(s));
        }
        assert_eq!(parse_number(b"1e999", "f"), Err(DecodeError::OutOfRange("f")));
    }
}
