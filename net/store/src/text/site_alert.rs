//! The texts of the site's density and market alerts: their JSON record and the inbox body of
//! a firing.

use rampart_engine::book::Side;

use crate::store::{direction_str, side_str, SiteAlertRow, SiteCondition};
use crate::store::{SiteFiringDetail, SiteFiringRecord};
use rampart_state::json::Json;

use super::alert::write_firing_tail;

/// Writes one site alert as the site and `rampart site-alerts` show it (the API's camelCase).
/// `waiting`, when known (the site's list, which reads the board), is written as `"waiting"`:
/// an active market alert whose number has reached its threshold, so it fires again only after
/// the number has gone back.
pub fn write_site_alert(j: &mut Json, a: &SiteAlertRow, waiting: Option<bool>) {
    j.raw("{\"id\":").int(a.id).raw(",\"type\":").str(a.condition.kind());
    j.raw(",\"exchange\":").str(a.exchange.as_str());
    match &a.condition {
        SiteCondition::Density { symbol, side, min_usd, max_dist_pct, min_age_s } => {
            j.raw(",\"symbol\":");
            match symbol {
                Some(s) => j.str(s),
                None => j.raw("null"),
            };
            j.raw(",\"side\":").str(side_str(*side)).raw(",\"minUsd\":").float(*min_usd, 2);
            j.raw(",\"maxDistPct\":").float(*max_dist_pct, 4).raw(",\"minAgeS\":").int(i64::from(*min_age_s));
        }
        SiteCondition::Market { number, interval, direction, threshold } => {
            j.raw(",\"number\":").str(number.as_str()).raw(",\"interval\":").str(interval.as_str());
            j.raw(",\"direction\":").str(direction_str(*direction)).raw(",\"threshold\":").float(*threshold, 4);
        }
    }
    j.raw(",\"repeat\":").bool(a.repeat).raw(",\"cooldownS\":").int(i64::from(a.cooldown_s));
    j.raw(",\"note\":").str(&a.note);
    j.raw(",\"status\":").str(a.status.as_str());
    if let Some(w) = waiting {
        j.raw(",\"waiting\":").bool(w);
    }
    write_firing_tail(j, a.last_triggered_ms, a.trigger_count, a.created_ms);
}

/// The inbox kind and body of a site firing: `{"event","alert":{…},"wall":{…},"time"}` for a
/// density alert, `{"event","alert":{…},"value","time"}` for a market alert.
pub fn firing_body(row: &SiteAlertRow, f: &SiteFiringRecord) -> (&'static str, String) {
    let mut j = Json::with_capacity(512);
    let kind = match f.detail {
        SiteFiringDetail::Density { .. } => "density.triggered",
        SiteFiringDetail::Market { .. } => "market.triggered",
    };
    j.raw("{\"event\":").str(kind).raw(",\"alert\":");
    write_site_alert(&mut j, row, None);
    match &f.detail {
        SiteFiringDetail::Density { symbol, side, price, qty, usd, dist_pct, age_ms } => {
            let side = if *side == Side::Bid { "bid" } else { "ask" };
            j.raw(",\"wall\":{\"symbol\":").str(symbol).raw(",\"side\":").str(side);
            j.raw(",\"price\":").fixed(*price).raw(",\"qty\":").fixed(i64::try_from(*qty).unwrap_or(i64::MAX));
            j.raw(",\"usd\":").float(*usd, 2).raw(",\"dist\":").float(*dist_pct, 4);
            j.raw(",\"ageS\":").int(age_ms / 1000).raw("}");
        }
        SiteFiringDetail::Market { value } => {
            j.raw(",\"value\":").float(*value, 1);
        }
    }
    j.raw(",\"time\":").int(f.ts_ms).raw("}");
    (kind, j.finish())
}
