//! The API's Level, Wall, wall history and board objects as JSON, written in one place for every
//! answer that carries them: `GET /v1/levels`, `GET /v1/densities`, `GET /v1/walls/…/history`,
//! `GET /v1/market` and the streams' snapshots and events.

use rampart_engine::level::Level;
use rampart_engine::wall::Wall;
use rampart_engine::wall_life::WallRecord;

use crate::board::Numbers;
use crate::json::Json;
use crate::shared::{DensitySnapshot, PublishedWall};

/// Writes a Density snapshot: `{"price","ts","walls":[Wall…]}`.
pub fn write_density(j: &mut Json, snap: &DensitySnapshot) {
    j.raw("{\"price\":").fixed(snap.price).raw(",\"ts\":").int(snap.ts_ms).raw(",\"walls\":[");
    for (i, w) in snap.walls.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        write_wall(j, w);
    }
    j.raw("]}");
}

/// Writes one Wall: `{"side","price","qty","usd","dist","ratio","age"}`.
pub fn write_wall(j: &mut Json, w: &PublishedWall) {
    write_wall_open(j, w);
    j.raw("}");
}

/// Writes one Wall's fields, the object left open for more (a firing's `reason`, `lifetimeS`).
pub fn write_wall_open(j: &mut Json, w: &PublishedWall) {
    let Wall { side, price, qty, ratio, dist_pct, age_ms } = w.wall;
    j.raw("{\"side\":").str(side.as_str());
    j.raw(",\"price\":").fixed(price.0);
    j.raw(",\"qty\":").fixed(i64::try_from(qty.0).unwrap_or(i64::MAX));
    j.raw(",\"usd\":");
    match w.usd {
        Some(usd) => j.float(usd, 2),
        None => j.raw("null"),
    };
    j.raw(",\"dist\":").float(dist_pct, 4);
    j.raw(",\"ratio\":").float(ratio, 2);
    j.raw(",\"age\":").int(age_ms / 1000);
}

/// Writes one wall of the history: `{"symbol"?,"side","price","firstSeen","lastSeen","maxUsd",
/// "maxRatio","executedUsd","outcome"}`, with `symbol` first when given (the venue-wide answer);
/// the USD values are `null` when the quote asset has no USD price.
pub fn write_wall_record(j: &mut Json, r: &WallRecord, symbol: Option<&str>) {
    j.raw("{");
    if let Some(s) = symbol {
        j.raw("\"symbol\":").str(s).raw(",");
    }
    j.raw("\"side\":").str(r.side.as_str());
    j.raw(",\"price\":").fixed(r.price.0);
    j.raw(",\"firstSeen\":").int(r.first_seen_ms).raw(",\"lastSeen\":").int(r.last_seen_ms);
    j.raw(",\"maxUsd\":");
    match r.max_usd {
        Some(usd) => j.float(usd, 2),
        None => j.raw("null"),
    };
    j.raw(",\"maxRatio\":").float(r.max_ratio, 2);
    j.raw(",\"executedUsd\":");
    match r.executed_usd {
        Some(usd) => j.float(usd, 2),
        None => j.raw("null"),
    };
    j.raw(",\"outcome\":").str(r.outcome.as_str()).raw("}");
}

/// Writes levels as the API's Level array, nearest to `current` first, `type` against it.
pub fn write_levels(j: &mut Json, levels: &mut [Level], current: i64) {
    levels.sort_by_key(|l| l.price.0.abs_diff(current));
    j.raw("[");
    for (i, l) in levels.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        write_level(j, l, current);
    }
    j.raw("]");
}

/// Writes one Level, `type` against `current`.
pub fn write_level(j: &mut Json, l: &Level, current: i64) {
    let kind = if l.is_resistance(rampart_engine::Price(current)) { "resistance" } else { "support" };
    write_level_typed(j, l, kind);
}

/// Writes one Level with its `type` given (`resistance` or `support`).
pub fn write_level_typed(j: &mut Json, l: &Level, kind: &str) {
    j.raw("{\"price\":").fixed(l.price.0);
    j.raw(",\"type\":").str(kind);
    j.raw(",\"side\":").str(l.side.as_str());
    j.raw(",\"timeframe\":").str(l.origin.as_str());
    j.raw(",\"time\":").int(l.time_ms);
    j.raw(",\"strength\":").int(i64::from(l.strength)).raw("}");
}

/// Writes a venue's board numbers over one interval (the `data` of `GET /v1/market`).
pub fn write_board_numbers(j: &mut Json, n: &Numbers) {
    j.raw("{\"pairs\":").int(i64::from(n.pairs));
    j.raw(",\"advancing\":").int(i64::from(n.advancing)).raw(",\"declining\":").int(i64::from(n.declining));
    j.raw(",\"unchanged\":").int(i64::from(n.unchanged)).raw(",\"up5\":").int(i64::from(n.up5));
    j.raw(",\"down5\":").int(i64::from(n.down5)).raw(",\"walls\":").int(i64::from(n.walls));
    j.raw(",\"atLevel\":").int(i64::from(n.at_level)).raw(",\"sentiment\":").float(n.sentiment, 1);
    write_perp_numbers(j, &n.perp);
    j.raw("}");
}

/// The derivatives numbers of §17 after the others: `,"perps",…,"fundingLow"`.
fn write_perp_numbers(j: &mut Json, p: &crate::board::PerpNumbers) {
    use crate::perp_json::{opt, RATE_DECIMALS, USD_DECIMALS};
    j.raw(",\"perps\":").int(i64::from(p.perps)).raw(",\"liqLongUsd\":");
    opt(j, p.liq_long_usd, USD_DECIMALS).raw(",\"liqShortUsd\":");
    opt(j, p.liq_short_usd, USD_DECIMALS).raw(",\"oiUsd\":");
    opt(j, p.oi_usd, USD_DECIMALS).raw(",\"oiChange\":");
    opt(j, p.oi_change, 4).raw(",\"funding\":");
    opt(j, p.funding, RATE_DECIMALS);
    j.raw(",\"fundingHigh\":").int(i64::from(p.funding_high));
    j.raw(",\"fundingLow\":").int(i64::from(p.funding_low));
}
