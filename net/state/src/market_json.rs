//! The API's Level, Wall and board objects as JSON, written in one place for every answer that
//! carries them: `GET /v1/levels`, `GET /v1/densities`, `GET /v1/market` and the streams'
//! snapshots and events.

use rampart_engine::level::Level;
use rampart_engine::wall::Wall;

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
    let side = match side {
        rampart_engine::Side::Bid => "bid",
        rampart_engine::Side::Ask => "ask",
    };
    j.raw("{\"side\":").str(side);
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
    j.raw("}");
}
