//! Numbers as clients write them, held exactly: a JSON number's spelling read as a decimal and
//! fitted to a fixed-point field (so `price`, `pct` and `within_pct` are never rounded).

/// A decimal number held exactly: `mantissa × 10^exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Decimal {
    mantissa: i128,
    exp: i32,
}

/// Why a number does not fit a fixed-point field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fit {
    /// Zero or negative.
    NotPositive,
    /// More decimal places than the field keeps.
    TooPrecise,
    /// Over `max_units`.
    TooLarge,
}

/// Reads a JSON number's spelling (`12`, `-0.5`, `2.69804e-5`, `1E+3`) exactly; `None` for
/// anything else or more than 30 significant digits.
pub(super) fn decimal(text: &str) -> Option<Decimal> {
    let (body, exp) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (neg, body) = match body.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, body),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 || exp.abs() > 400 {
        return None;
    }
    let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let exp = exp - i32::try_from(frac.len()).ok()?;
    Some(Decimal { mantissa: if neg { -mantissa } else { mantissa }, exp })
}

/// `d` in units of 10^-`decimals`, if it is positive, has at most `decimals` decimal places and
/// is at most `max_units`.
pub(super) fn fixed_units(d: Decimal, decimals: u32, max_units: i64) -> Result<i64, Fit> {
    if d.mantissa <= 0 {
        return Err(Fit::NotPositive);
    }
    let mut m = d.mantissa;
    let mut shift = d.exp + decimals as i32;
    while shift < 0 {
        if m % 10 != 0 {
            return Err(Fit::TooPrecise);
        }
        m /= 10;
        shift += 1;
    }
    while shift > 0 {
        m = m.checked_mul(10).filter(|v| *v <= i128::from(max_units)).ok_or(Fit::TooLarge)?;
        shift -= 1;
    }
    i64::try_from(m).ok().filter(|v| *v <= max_units).ok_or(Fit::TooLarge)
}

/// The exact fixed-point value of a JSON number, in units of 10^-`decimals`.
pub(super) fn exact(n: &serde_json::Number, decimals: u32, max_units: i64) -> Result<i64, Fit> {
    // serde_json keeps integers as integers and spells a float by its shortest round trip.
    let d = decimal(&n.to_string()).ok_or(Fit::TooLarge)?;
    fixed_units(d, decimals, max_units)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_read_exactly() {
        assert_eq!(decimal("12"), Some(Decimal { mantissa: 12, exp: 0 }));
        assert_eq!(decimal("-0.50"), Some(Decimal { mantissa: -50, exp: -2 }));
        assert_eq!(decimal("2.69804e-5"), Some(Decimal { mantissa: 269_804, exp: -10 }));
        assert_eq!(decimal("0"), Some(Decimal { mantissa: 0, exp: 0 }));
        for bad in ["", ".5", "1.2.3", "1e", "abc", "1e999", "-", "1x"] {
            assert_eq!(decimal(bad), None, "{bad:?}");
        }
        assert_eq!(fixed_units(Decimal { mantissa: 5, exp: -9 }, 8, i64::MAX), Err(Fit::TooPrecise));
        assert_eq!(fixed_units(Decimal { mantissa: 50, exp: -9 }, 8, i64::MAX), Ok(5));
        assert_eq!(fixed_units(Decimal { mantissa: 1, exp: 30 }, 8, i64::MAX), Err(Fit::TooLarge));
        assert_eq!(fixed_units(Decimal { mantissa: 0, exp: 0 }, 8, i64::MAX), Err(Fit::NotPositive));
    }
}
