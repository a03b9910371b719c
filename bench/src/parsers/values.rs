//! Value helpers shared by the generic parsers: the same checks the engine decoders make
//! (decimals through the engine's own [`Price::parse`] and [`Qty::parse`], integer strings, sides,
//! Bybit's book type), and the bounded pushes into [`Decoded`].

use rampart_engine::{Level, Price, Qty};

use super::frame::{Decoded, Fail, TradeRow, PARSER_LEVELS_MAX, TRADES_MAX};

pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A price string: a decimal above zero.
pub(super) fn price(s: &str) -> Result<Price, Fail> {
    let p = Price::parse(s.as_bytes()).map_err(|_| Fail("price is not a decimal"))?;
    if p.0 <= 0 {
        return Err(Fail("price is not above zero"));
    }
    Ok(p)
}

/// A quantity string: a decimal at or above zero.
pub(super) fn qty(s: &str) -> Result<Qty, Fail> {
    Qty::parse(s.as_bytes()).map_err(|_| Fail("quantity is not a decimal at or above zero"))
}

/// Decimal digits only, as a `u64`.
pub(super) fn digits(s: &str) -> Result<u64, Fail> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(Fail("not a decimal integer string"));
    }
    s.parse().map_err(|_| Fail("integer out of range"))
}

pub(super) fn i64_of(v: u64) -> Result<i64, Fail> {
    i64::try_from(v).map_err(|_| Fail("integer out of range"))
}

pub(super) fn side_lower(s: &str) -> Result<bool, Fail> {
    match s {
        "buy" => Ok(false),
        "sell" => Ok(true),
        _ => Err(Fail("side is not buy or sell")),
    }
}

pub(super) fn push_level(out: &mut Vec<Level>, p: &str, q: &str) -> Result<(), Fail> {
    if out.len() >= PARSER_LEVELS_MAX {
        return Err(Fail("too many levels"));
    }
    out.push(Level { price: price(p)?, qty: qty(q)? });
    Ok(())
}

pub(super) fn push_trade(out: &mut Decoded, t: TradeRow) -> Result<(), Fail> {
    if out.trades.len() >= TRADES_MAX {
        return Err(Fail("too many trades"));
    }
    out.trades.push(t);
    Ok(())
}

pub(super) fn side_bybit(s: &str) -> Result<bool, Fail> {
    match s {
        "Buy" => Ok(false),
        "Sell" => Ok(true),
        _ => Err(Fail("side is not Buy or Sell")),
    }
}

pub(super) fn book_type_bybit(s: &str) -> Result<(), Fail> {
    match s {
        "snapshot" | "delta" => Ok(()),
        _ => Err(Fail("type is not snapshot or delta")),
    }
}
