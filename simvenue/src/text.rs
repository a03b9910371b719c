//! Text helpers of the venue simulator: fixed-point numbers as venue strings, JSON escaping and
//! query strings.
//!
//! Every price is written with its pair's tick decimals and every quantity with its lot
//! decimals, padded with zeros, so the same level always has the same text on every message
//! (the OKX and Bitget checksums are computed over that text).

use std::fmt::Write as _;

use rampart_engine::fixed::{DECIMALS, SCALE};

/// Decimals needed to write multiples of `step` (a fixed-point value scaled by 10^8) exactly:
/// 2 for a tick of 0.01, 0 for a lot of 1.
pub(crate) fn decimals_of(step: i64) -> u32 {
    let mut d = DECIMALS;
    let mut s = step.max(1);
    while d > 0 && s % 10 == 0 {
        s /= 10;
        d -= 1;
    }
    d
}

/// Appends `v / 10^8` with exactly `dec` decimals (digits past `dec` are cut; callers pass
/// multiples of the step `dec` came from, so nothing is lost).
pub(crate) fn push_fixed(out: &mut String, v: i64, dec: u32) {
    let dec = dec.min(DECIMALS);
    if v < 0 {
        out.push('-');
    }
    let u = v.unsigned_abs();
    let scale = SCALE as u64;
    let _ = write!(out, "{}", u / scale);
    if dec > 0 {
        let frac = (u % scale) / 10u64.pow(DECIMALS - dec);
        let _ = write!(out, ".{:0width$}", frac, width = dec as usize);
    }
}

/// `v / 10^8` with exactly `dec` decimals.
pub(crate) fn fixed(v: i64, dec: u32) -> String {
    let mut s = String::with_capacity(24);
    push_fixed(&mut s, v, dec);
    s
}

/// A quantity (unsigned, saturating at `i64::MAX`) with exactly `dec` decimals.
pub(crate) fn push_qty(out: &mut String, q: u64, dec: u32) {
    push_fixed(out, i64::try_from(q).unwrap_or(i64::MAX), dec);
}

/// Appends `s` as a JSON string (quoted, escaped).
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `s` as a JSON string.
pub(crate) fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_str(&mut out, s);
    out
}

/// Longest query string read, in bytes; longer ones are cut there (their tail is ignored). The
/// whole request head is bounded at 64 KiB by the server, so this never cuts a head it accepted.
const QUERY_BYTES_MAX: usize = 64 * 1024;
/// Most query parameters read; the rest are ignored.
const QUERY_PARAMS_MAX: usize = 32;

/// The parameters of a query string, percent-decoded (`+` is a space); bounded by
/// `QUERY_BYTES_MAX` and `QUERY_PARAMS_MAX`.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = query else { return Vec::new() };
    let q = match q.char_indices().nth(QUERY_BYTES_MAX) {
        Some((i, _)) => &q[..i],
        None => q,
    };
    form_urlencoded::parse(q.as_bytes()).take(QUERY_PARAMS_MAX).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

/// The first value of `key` in decoded query pairs.
pub(crate) fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// A non-negative integer parameter: `Ok(None)` when absent, `Err` when present and not a
/// number.
pub(crate) fn int_param(pairs: &[(String, String)], key: &str) -> Result<Option<i64>, ()> {
    match param(pairs, key) {
        None => Ok(None),
        Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_text_keeps_the_step_decimals() {
        assert_eq!(decimals_of(1_000_000), 2);
        assert_eq!(decimals_of(100_000_000), 0);
        assert_eq!(decimals_of(1), 8);
        assert_eq!(decimals_of(1_000_000_000), 0);
        assert_eq!(fixed(9_500_010_000_000, 2), "95000.10");
        assert_eq!(fixed(0, 2), "0.00");
        assert_eq!(fixed(5, 8), "0.00000005");
        assert_eq!(fixed(300_000_000, 0), "3");
        assert_eq!(fixed(-150_000_000, 1), "-1.5");
    }

    #[test]
    fn query_is_decoded() {
        let q = query_pairs(Some("symbol=BTCUSDT&symbols=%5B%22A%22%5D&x=a+b&bad=%zz&end=%4"));
        assert_eq!(param(&q, "symbol"), Some("BTCUSDT"));
        assert_eq!(param(&q, "symbols"), Some("[\"A\"]"));
        assert_eq!(param(&q, "x"), Some("a b"));
        assert_eq!(param(&q, "bad"), Some("%zz"));
        assert_eq!(param(&q, "end"), Some("%4"));
        assert_eq!(int_param(&q, "symbol"), Err(()));
        assert_eq!(int_param(&q, "none"), Ok(None));
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
