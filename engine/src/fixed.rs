//! Fixed-point prices and quantities: integers scaled by 10^8, parsed once at the edge.
//!
//! Rationale: integer arithmetic is exact, cheap and totally ordered, so books can be kept
//! sorted by plain integer comparison and level sums never drift. Eight decimals cover every
//! tick and lot size the four venues use (the finest is 1e-8).

use core::fmt;

/// Number of decimal places carried by [`Price`] and [`Qty`].
pub const DECIMALS: u32 = 8;
/// The integer that represents 1.0.
pub const SCALE: i64 = 100_000_000;

/// A price in units of 10^-8 of the quote asset.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Price(pub i64);

/// A quantity in units of 10^-8 of the base asset.
///
/// The largest representable quantity is about 1.8e11 units; parsing saturates there.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Qty(pub u64);

impl Price {
    /// Zero.
    pub const ZERO: Price = Price(0);

    /// Nearest fixed-point value to `f` (used by the simulator and tests, never on decode).
    pub fn from_f64(f: f64) -> Price {
        Price((f * SCALE as f64).round() as i64)
    }

    /// The value as a float (for statistics and formatting only).
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / SCALE as f64
    }

    /// Parses a venue decimal string such as `"0.00120000"`.
    pub fn parse(bytes: &[u8]) -> Result<Price, ParseError> {
        parse_decimal(bytes).map(Price)
    }
}

impl Qty {
    /// Zero.
    pub const ZERO: Qty = Qty(0);

    /// Nearest fixed-point value to `f`, saturating at the bounds.
    pub fn from_f64(f: f64) -> Qty {
        let v = (f * SCALE as f64).round();
        if v <= 0.0 {
            Qty(0)
        } else if v >= u64::MAX as f64 {
            Qty(u64::MAX)
        } else {
            Qty(v as u64)
        }
    }

    /// The value as a float (for statistics and formatting only).
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / SCALE as f64
    }

    /// Parses a venue decimal string; a negative quantity is an error.
    pub fn parse(bytes: &[u8]) -> Result<Qty, ParseError> {
        let v = parse_decimal(bytes)?;
        if v < 0 {
            return Err(ParseError::Negative);
        }
        Ok(Qty(v as u64))
    }
}

/// Why a decimal string was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ParseError {
    /// Empty input, or a sign or point with no digits.
    Empty,
    /// A byte that is not a digit, sign or a single decimal point.
    BadByte,
    /// The value does not fit in 64 bits at eight decimals.
    Overflow,
    /// A quantity below zero.
    Negative,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParseError::Empty => "empty number",
            ParseError::BadByte => "invalid character in number",
            ParseError::Overflow => "number out of range",
            ParseError::Negative => "negative quantity",
        })
    }
}

/// Parses `[-]digits[.digits]` into an integer scaled by 10^8.
///
/// Digits past the eighth decimal are truncated (no venue sends non-zero digits there).
pub fn parse_decimal(bytes: &[u8]) -> Result<i64, ParseError> {
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        Some(_) => (false, bytes),
        None => return Err(ParseError::Empty),
    };
    let mut int: i64 = 0;
    let mut frac: i64 = 0;
    let mut frac_digits: u32 = 0;
    let mut seen_point = false;
    let mut seen_digit = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                seen_digit = true;
                let d = i64::from(b - b'0');
                if seen_point {
                    if frac_digits < DECIMALS {
                        frac = frac * 10 + d;
                        frac_digits += 1;
                    }
                } else {
                    int = int.checked_mul(10).and_then(|v| v.checked_add(d)).ok_or(ParseError::Overflow)?;
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => return Err(ParseError::BadByte),
        }
    }
    if !seen_digit {
        return Err(ParseError::Empty);
    }
    let frac = frac * 10_i64.pow(DECIMALS - frac_digits);
    let v = int.checked_mul(SCALE).and_then(|v| v.checked_add(frac)).ok_or(ParseError::Overflow)?;
    Ok(if negative { -v } else { v })
}

/// Writes `v / 10^8` as a plain decimal with no trailing zeros into `buf`, returning the text.
///
/// Used for JSON numbers: the output never has an exponent, so every client parses it exactly.
pub fn format_decimal(v: i64, buf: &mut [u8; 24]) -> &str {
    let mut tmp = [0u8; 24];
    let mut n = 0;
    let negative = v < 0;
    let mut u = v.unsigned_abs();
    let scale = SCALE as u64;
    let mut frac = u % scale;
    u /= scale;
    // Fractional part, without trailing zeros.
    let mut frac_len = DECIMALS as usize;
    while frac_len > 0 && frac.is_multiple_of(10) {
        frac /= 10;
        frac_len -= 1;
    }
    for _ in 0..frac_len {
        tmp[n] = b'0' + (frac % 10) as u8;
        frac /= 10;
        n += 1;
    }
    if frac_len > 0 {
        tmp[n] = b'.';
        n += 1;
    }
    loop {
        tmp[n] = b'0' + (u % 10) as u8;
        u /= 10;
        n += 1;
        if u == 0 {
            break;
        }
    }
    if negative {
        tmp[n] = b'-';
        n += 1;
    }
    for i in 0..n {
        buf[i] = tmp[n - 1 - i];
    }
    // Only ASCII digits, '.' and '-' were written.
    core::str::from_utf8(&buf[..n]).unwrap_or("0")
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 24];
        f.write_str(format_decimal(self.0, &mut buf))
    }
}

impl fmt::Display for Qty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 24];
        let v = i64::try_from(self.0).unwrap_or(i64::MAX);
        f.write_str(format_decimal(v, &mut buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_venue_decimals() {
        assert_eq!(parse_decimal(b"0.00120000"), Ok(120_000));
        assert_eq!(parse_decimal(b"95000.12"), Ok(9_500_012_000_000));
        assert_eq!(parse_decimal(b"7"), Ok(700_000_000));
        assert_eq!(parse_decimal(b"-1.5"), Ok(-150_000_000));
        assert_eq!(parse_decimal(b".5"), Ok(50_000_000));
        assert_eq!(parse_decimal(b"0.123456789"), Ok(12_345_678));
    }

    #[test]
    fn refuses_malformed_decimals() {
        assert_eq!(parse_decimal(b""), Err(ParseError::Empty));
        assert_eq!(parse_decimal(b"-"), Err(ParseError::Empty));
        assert_eq!(parse_decimal(b"."), Err(ParseError::Empty));
        assert_eq!(parse_decimal(b"1.2.3"), Err(ParseError::BadByte));
        assert_eq!(parse_decimal(b"1e5"), Err(ParseError::BadByte));
        assert_eq!(parse_decimal(b" 1"), Err(ParseError::BadByte));
        assert_eq!(parse_decimal(b"99999999999999999999"), Err(ParseError::Overflow));
        assert_eq!(Qty::parse(b"-1"), Err(ParseError::Negative));
    }

    #[test]
    fn formats_without_trailing_zeros() {
        let mut b = [0u8; 24];
        assert_eq!(format_decimal(9_500_012_000_000, &mut b), "95000.12");
        assert_eq!(format_decimal(0, &mut b), "0");
        assert_eq!(format_decimal(1, &mut b), "0.00000001");
        assert_eq!(format_decimal(-150_000_000, &mut b), "-1.5");
        assert_eq!(format_decimal(i64::MIN, &mut b), "-92233720368.54775808");
    }

    #[test]
    fn round_trips() {
        for v in [0_i64, 1, 99, 100_000_000, 123_456_789_012, -5, i64::MAX] {
            let mut b = [0u8; 24];
            let s = format_decimal(v, &mut b).to_owned();
            assert_eq!(parse_decimal(s.as_bytes()), Ok(v), "{s}");
        }
    }
}
