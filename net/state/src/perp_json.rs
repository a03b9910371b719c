//! The derivatives numbers as every text of rampart writes them (`decisions.md` §17): a
//! Liquidation object and the side of a liquidated position, shared by the data endpoints and
//! the alerts' firing bodies, so that a liquidation reads the same in both.
//!
//! Numbers as §17 gives them: USD with 2 decimals, base quantities with 8, `rate` and `rate8h`
//! with 6, times as Unix milliseconds. Choice where §17 is silent: prices (`markPrice`, a
//! liquidation's `price`) with 8 decimals, as every spot price of the API is written (the
//! engine's 10⁻⁸ fixed point), so a pair's spot and perpetual prices read alike.

use rampart_engine::perp_book::{FundingNow, Liquidation, OiNow};

use crate::perp::PerpSnapshot;
use rampart_engine::perp_window::PositionSide;

use crate::json::Json;

/// Decimals of a USD value.
pub const USD_DECIMALS: usize = 2;
/// Decimals of a quantity in base units.
pub const BASE_DECIMALS: usize = 8;
/// Decimals of a price per unit of base.
pub const PRICE_DECIMALS: usize = 8;
/// Decimals of a funding rate (percent).
pub const RATE_DECIMALS: usize = 6;

/// The API text of a liquidated position's side; the one mapping of [`PositionSide`] to text
/// (the `side` field, the `side` query parameter, a firing's `side`).
pub fn side_text(side: PositionSide) -> &'static str {
    match side {
        PositionSide::Long => "long",
        PositionSide::Short => "short",
    }
}

/// The side `text` names (`long`, `short`), as [`side_text`] writes it; `None` for anything else.
pub fn side_of_text(text: &str) -> Option<PositionSide> {
    [PositionSide::Long, PositionSide::Short].into_iter().find(|&s| side_text(s) == text)
}

/// `v` with `decimals`, or `null`.
pub fn opt(j: &mut Json, v: Option<f64>, decimals: usize) -> &mut Json {
    match v {
        Some(v) => j.float(v, decimals),
        None => j.raw("null"),
    }
}

/// A Liquidation, `{"side","price","qty","usd","time"}`, with `"symbol"` first when given (the
/// venue-wide list).
pub fn write_liquidation(j: &mut Json, l: &Liquidation, symbol: Option<&str>) {
    write_liquidation_open(j, l, symbol);
    j.raw("}");
}

/// [`write_liquidation`] without its closing brace, for a firing's fields after it.
pub fn write_liquidation_open(j: &mut Json, l: &Liquidation, symbol: Option<&str>) {
    j.raw("{");
    if let Some(s) = symbol {
        j.raw("\"symbol\":").str(s).raw(",");
    }
    j.raw("\"side\":").str(side_text(l.side));
    j.raw(",\"price\":").float(l.price, PRICE_DECIMALS);
    j.raw(",\"qty\":").float(l.qty, BASE_DECIMALS);
    j.raw(",\"usd\":").float(l.usd(), USD_DECIMALS);
    j.raw(",\"time\":").int(l.time_ms);
}

fn write_oi(j: &mut Json, oi: Option<&OiNow>) {
    let Some(oi) = oi else {
        j.raw("null");
        return;
    };
    j.raw("{\"base\":").float(oi.base, BASE_DECIMALS).raw(",\"usd\":");
    opt(j, oi.usd, USD_DECIMALS);
    j.raw(",\"time\":").int(oi.time_ms).raw(",\"stale\":").bool(oi.stale).raw("}");
}

fn write_funding(j: &mut Json, funding: Option<&FundingNow>) {
    let Some(f) = funding else {
        j.raw("null");
        return;
    };
    j.raw("{\"rate\":").float(f.rate, RATE_DECIMALS).raw(",\"rate8h\":").float(f.rate8h, RATE_DECIMALS);
    j.raw(",\"intervalH\":").int(i64::from(f.interval_h)).raw(",\"nextTime\":").int(f.next_ms);
    j.raw(",\"time\":").int(f.time_ms).raw(",\"stale\":").bool(f.stale).raw("}");
}

/// The fields of a pair's perpetual, without braces: `"contract":..,…,"liquidations":{..}`
/// (`data` of `GET /v1/perp/{symbol}`; one entry of `GET /v1/perp`'s and the `perp` stream's
/// `data`, after its `symbol`).
pub fn write_perp_fields(j: &mut Json, p: &PerpSnapshot) {
    j.raw("\"contract\":").str(&p.contract).raw(",\"multiplier\":").int(i64::from(p.multiplier));
    j.raw(",\"markPrice\":");
    opt(j, p.mark, PRICE_DECIMALS);
    j.raw(",\"oi\":");
    write_oi(j, p.oi.as_ref());
    j.raw(",\"funding\":");
    write_funding(j, p.funding.as_ref());
    j.raw(",\"liquidations\":{\"completeness\":").str(p.completeness.as_str()).raw(",\"last\":");
    match &p.last {
        Some(l) => write_liquidation(j, l, None),
        None => {
            j.raw("null");
        }
    }
    j.raw("}");
}
