//! The texts of the site's alerts: their JSON record and the inbox body of a (market) firing.

use crate::store::{direction_str, side_str, SiteAlertRow, SiteCondition, SiteFiringRecord};
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

/// The inbox kind and body of a market alert's firing: `{"event","alert":{…},"value","time"}`.
/// (A density alert's firing is a wall alert's `alert.triggered` since `decisions.md` §15.)
pub fn firing_body(row: &SiteAlertRow, f: &SiteFiringRecord) -> (&'static str, String) {
    const KIND: &str = "market.triggered";
    let mut j = Json::with_capacity(512);
    j.raw("{\"event\":").str(KIND).raw(",\"alert\":");
    write_site_alert(&mut j, row, None);
    j.raw(",\"value\":").float(f.value, 1);
    j.raw(",\"time\":").int(f.ts_ms).raw("}");
    (KIND, j.finish())
}
