//! The texts of the API's price and percent alerts: the Alert resource's JSON, the
//! `alert.triggered` event body (the webhook's body and the inbox entry, byte for byte) and the
//! `alert.delisted` notice.

use rampart_engine::alert::Condition;

use crate::store::{condition_columns, AlertRow, FiringRecord};
use rampart_state::clock;
use rampart_state::json::Json;

/// Writes one Alert resource exactly as the spec names its fields.
pub fn write_alert(j: &mut Json, a: &AlertRow) {
    j.raw("{\"id\":").int(a.id);
    j.raw(",\"exchange\":").str(a.exchange.as_str()).raw(",\"symbol\":").str(&a.symbol);
    write_condition(j, &a.condition);
    write_structure_fields(j, &a.condition);
    j.raw(",\"cooldownS\":").int(i64::from(a.cooldown_s));
    write_lifecycle_fields(j, a);
    j.raw(",\"repeat\":").bool(a.repeat).raw(",\"note\":").str(&a.note);
    j.raw(",\"webhookUrl\":");
    match &a.webhook_url {
        Some(u) => j.str(u),
        None => j.raw("null"),
    };
    j.raw(",\"status\":").str(a.status.as_str()).raw(",\"createdPrice\":");
    // Not known (0): a `*` alert has no one price, a density alert moved by migration 17 kept none.
    match a.created_price {
        p if p > 0 => j.fixed(p),
        _ => j.raw("null"),
    };
    write_firing_fields(j, a.last_triggered_ms, a.trigger_count, a.created_ms);
    j.raw(",\"expiresAt\":");
    match a.expires_ms {
        Some(ms) => j.str(&clock::iso8601(ms)),
        None => j.raw("null"),
    };
    j.raw("}");
}

/// The fields `decisions.md` §16 adds: `,"paused","pausedBy","maxFires","message","webhookFormat"`.
fn write_lifecycle_fields(j: &mut Json, a: &AlertRow) {
    j.raw(",\"paused\":").bool(a.paused.is_some()).raw(",\"pausedBy\":");
    match a.paused {
        Some(by) => j.str(by.as_str()),
        None => j.raw("null"),
    };
    j.raw(",\"maxFires\":");
    match (a.max_fires, a.repeat) {
        (Some(n), _) => j.int(i64::from(n)),
        // `repeat: false` is `max_fires: 1`.
        (None, false) => j.int(1),
        (None, true) => j.raw("null"),
    };
    j.raw(",\"message\":");
    match &a.message {
        Some(m) => j.str(m),
        None => j.raw("null"),
    };
    j.raw(",\"webhookFormat\":").str(a.webhook_format.as_str());
}

/// The fields every alert record ends with, and its closing brace:
/// `,"lastTriggeredAt","triggerCount","createdAt"}`.
pub fn write_firing_tail(j: &mut Json, last_triggered_ms: Option<i64>, trigger_count: i64, created_ms: i64) {
    write_firing_fields(j, last_triggered_ms, trigger_count, created_ms);
    j.raw("}");
}

/// `,"lastTriggeredAt","triggerCount","createdAt"`, the record left open.
fn write_firing_fields(j: &mut Json, last_triggered_ms: Option<i64>, trigger_count: i64, created_ms: i64) {
    j.raw(",\"lastTriggeredAt\":");
    match last_triggered_ms {
        Some(ms) => j.str(&clock::iso8601(ms)),
        None => j.raw("null"),
    };
    j.raw(",\"triggerCount\":").int(trigger_count);
    j.raw(",\"createdAt\":").str(&clock::iso8601(created_ms));
}

/// The `alert.triggered` event body (interface spec, "Body"), exactly those fields for a
/// one-pair price or pct alert; a level or wall alert's, and any `*` alert's, adds the structure
/// fields to `alert` and `symbol` and `level` or `wall` to `trigger`; a `*` alert's adds
/// `triggers`, every firing the body carries, `trigger` being the first (`decisions.md` §15).
pub fn event_body(row: &AlertRow, f: &FiringRecord) -> String {
    event_body_as("alert.triggered", row, f)
}

/// The body of a test send (`POST /v1/alerts/{id}/test`, `decisions.md` §16): a firing's body
/// with `event` `alert.test`.
pub fn test_body(row: &AlertRow, f: &FiringRecord) -> String {
    event_body_as("alert.test", row, f)
}

/// `body` (a JSON object) with `"text"` added last: an inbox entry of an alert with a `message`.
pub fn with_text(body: &str, text: &str) -> String {
    let open = body.strip_suffix('}').unwrap_or(body);
    let mut j = Json::with_capacity(body.len() + text.len() + 16);
    j.raw(open).raw(",\"text\":").str(text).raw("}");
    j.finish()
}

/// The `alert.paused` inbox body (`decisions.md` §16): `{"event","alert":{"id","exchange",
/// "symbol"},"reason":"flood_guard","firings","windowS","time"}`; `firings` is the one the guard
/// refused (16).
pub fn paused_body(row: &AlertRow, at_ms: i64) -> String {
    let mut j = Json::with_capacity(192);
    j.raw("{\"event\":\"alert.paused\",\"alert\":{\"id\":").int(row.id);
    j.raw(",\"exchange\":").str(row.exchange.as_str()).raw(",\"symbol\":").str(&row.symbol);
    j.raw("},\"reason\":\"flood_guard\",\"firings\":").int(crate::flood_guard::FLOOD_FIRINGS_MAX as i64 + 1);
    j.raw(",\"windowS\":").int(crate::flood_guard::FLOOD_WINDOW_MS / 1000);
    j.raw(",\"time\":").int(at_ms).raw("}");
    j.finish()
}

fn event_body_as(event: &str, row: &AlertRow, f: &FiringRecord) -> String {
    let universe = !f.triggers.is_empty();
    let structure = universe || matches!(row.condition, Condition::Level(_) | Condition::Wall(_) | Condition::Perp(_));
    let mut j = Json::with_capacity(if structure { 768 + 384 * f.triggers.len() } else { 384 });
    j.raw("{\"event\":").str(event).raw(",\"alert\":{\"id\":").int(row.id);
    j.raw(",\"exchange\":").str(row.exchange.as_str()).raw(",\"symbol\":").str(&row.symbol);
    write_condition(&mut j, &row.condition);
    if structure {
        write_structure_fields(&mut j, &row.condition);
    }
    j.raw(",\"repeat\":").bool(row.repeat).raw(",\"note\":").str(&row.note);
    j.raw("},\"trigger\":");
    write_trigger(&mut j, row, f, structure);
    if universe {
        j.raw(",\"triggers\":[");
        for (i, t) in f.triggers.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            write_trigger(&mut j, row, t, true);
        }
        j.raw("]");
    }
    j.raw("}");
    j.finish()
}

/// One firing as the body's `trigger`: `{"price","move","time"}`, and with `structure` the
/// pair that fired and its level or wall.
fn write_trigger(j: &mut Json, row: &AlertRow, f: &FiringRecord, structure: bool) {
    j.raw("{\"price\":").fixed(f.price).raw(",\"move\":");
    match f.move_hundredths {
        Some(m) => j.fixed(m * 1_000_000),
        None => j.raw("null"),
    };
    j.raw(",\"time\":").int(f.ts_ms);
    if structure {
        j.raw(",\"symbol\":").str(f.symbol.as_deref().unwrap_or(&row.symbol));
        match (&f.level, &f.wall) {
            (Some(l), _) => {
                j.raw(",\"level\":");
                write_level_as_held(j, l);
            }
            (None, Some(w)) => {
                j.raw(",\"wall\":");
                write_wall_hit(j, w);
            }
            (None, None) => {
                if let Some(p) = &f.perp {
                    super::perp::write_trigger(j, row.exchange, p);
                }
            }
        }
    }
    j.raw("}");
}

/// The Wall of a firing as `GET /v1/densities` shows it, with `reason` (`pulled`/`filled`, null
/// for `appeared`) and `lifetimeS` (how long it stood, seconds).
fn write_wall_hit(j: &mut Json, w: &rampart_engine::firing::WallHit) {
    let published = rampart_state::shared::PublishedWall { wall: w.wall, usd: w.usd };
    rampart_state::market_json::write_wall_open(j, &published);
    j.raw(",\"reason\":");
    match w.gone {
        Some(gone) => j.str(gone.as_str()),
        None => j.raw("null"),
    };
    j.raw(",\"lifetimeS\":").int(w.wall.age_ms / 1000).raw("}");
}

/// The Level of a firing as `GET /v1/levels` showed it before the trade: its `type` from its
/// formation (a resistance is formed by highs and stands above the price, a support by lows).
fn write_level_as_held(j: &mut Json, l: &rampart_engine::level::Level) {
    let kind = match l.side {
        rampart_engine::level::Formation::High => "resistance",
        rampart_engine::level::Formation::Low => "support",
    };
    rampart_state::market_json::write_level_typed(j, l, kind);
}

/// The `alert.delisted` inbox body: `{"event","alert":{"id","exchange","symbol"},"time"}`,
/// written with the same escaping JSON writer as every other stored body.
pub fn delisted_body(row: &AlertRow, now_ms: i64) -> String {
    notice_body("alert.delisted", row, now_ms)
}

/// The `alert.delisted` inbox body of a derivatives alert whose pair's perpetual was delisted
/// while the spot pair stays (`decisions.md` §17): `{"event","alert":{"id","exchange","symbol"},
/// "reason":"perp","time"}` (the pair's own delisting says no `reason`, as it always has).
pub fn perp_delisted_body(row: &AlertRow, now_ms: i64) -> String {
    let mut j = Json::with_capacity(144);
    j.raw("{\"event\":").str("alert.delisted").raw(",\"alert\":{\"id\":").int(row.id);
    j.raw(",\"exchange\":").str(row.exchange.as_str()).raw(",\"symbol\":").str(&row.symbol);
    j.raw("},\"reason\":\"perp\",\"time\":").int(now_ms).raw("}");
    j.finish()
}

/// The `alert.expired` inbox body (`decisions.md` §13), shaped as the delisting notice:
/// `{"event","alert":{"id","exchange","symbol"},"time"}`.
pub fn expired_body(row: &AlertRow, now_ms: i64) -> String {
    notice_body("alert.expired", row, now_ms)
}

/// A notice that an alert ended without firing: `event`, the alert named, and when.
fn notice_body(event: &str, row: &AlertRow, now_ms: i64) -> String {
    let mut j = Json::with_capacity(128);
    j.raw("{\"event\":").str(event).raw(",\"alert\":{\"id\":").int(row.id);
    j.raw(",\"exchange\":").str(row.exchange.as_str()).raw(",\"symbol\":").str(&row.symbol);
    j.raw("},\"time\":").int(now_ms).raw("}");
    j.finish()
}

/// Writes a condition's fields the way every body spells them:
/// `,"type","direction","price","pct","window"` (null for the other type's fields).
pub fn write_condition(j: &mut Json, c: &Condition) {
    let cols = condition_columns(c);
    j.raw(",\"type\":").str(cols.kind).raw(",\"direction\":").str(cols.direction);
    j.raw(",\"price\":");
    match cols.price {
        Some(p) => j.fixed(p),
        None => j.raw("null"),
    };
    // Millionths of a percent, written through the 10^-8 writer.
    j.raw(",\"pct\":");
    match cols.pct {
        Some(m) => j.fixed(m * 100),
        None => j.raw("null"),
    };
    j.raw(",\"window\":");
    match cols.window {
        Some(w) => j.str(w),
        None => j.raw("null"),
    };
}

/// Writes the fields structure alerts add (`decisions.md` §15), null where the type has none
/// (a wall alert's `minRatio` is null when it takes every wall the detection shows):
/// `,"event","withinPct","minStrength","timeframes","minUsd","minRatio","maxDistPct","minAgeS"`.
pub fn write_structure_fields(j: &mut Json, c: &Condition) {
    let cols = condition_columns(c);
    j.raw(",\"event\":");
    match cols.event {
        Some(e) => j.str(e),
        None => j.raw("null"),
    };
    j.raw(",\"withinPct\":");
    match cols.within {
        Some(m) => j.fixed(m * 100),
        None => j.raw("null"),
    };
    j.raw(",\"minStrength\":");
    match cols.min_strength {
        Some(s) => j.int(s),
        None => j.raw("null"),
    };
    j.raw(",\"timeframes\":");
    match c {
        Condition::Level(l) => {
            j.raw("[");
            for (i, name) in l.timeframe_names().enumerate() {
                if i > 0 {
                    j.raw(",");
                }
                j.str(name);
            }
            j.raw("]")
        }
        _ => j.raw("null"),
    };
    // Hundredths written as a decimal without trailing zeros (`2000000.5`), exactly and without
    // overflow (a trillion dollars is 10^14 cents).
    let hundredths = |j: &mut Json, v: Option<i64>| {
        match v {
            Some(h) => {
                let (whole, frac) = (h.div_euclid(100), h.rem_euclid(100));
                match frac {
                    0 => j.raw(&whole.to_string()),
                    f if f % 10 == 0 => j.raw(&format!("{whole}.{}", f / 10)),
                    f => j.raw(&format!("{whole}.{f:02}")),
                }
            }
            None => j.raw("null"),
        };
    };
    j.raw(",\"minUsd\":");
    hundredths(j, cols.min_usd_cents);
    // 0 is the detection threshold (every wall the service shows): null, as when not a wall alert.
    j.raw(",\"minRatio\":");
    hundredths(j, cols.min_ratio_hundredths.filter(|r| *r > 0));
    j.raw(",\"maxDistPct\":");
    hundredths(j, cols.max_dist_hundredths);
    j.raw(",\"minAgeS\":");
    match cols.min_age_s {
        Some(s) => j.int(s),
        None => j.raw("null"),
    };
    // Millionths of a percent, signed (`decisions.md` §17), through the 10^-8 writer.
    j.raw(",\"fundingPct\":");
    match cols.funding {
        Some(m) => j.fixed(m * 100),
        None => j.raw("null"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::alert::Move;
    use rampart_engine::{Timeframe, Venue};
    use serde_json::Value;

    #[test]
    fn alert_json_has_the_spec_field_names() {
        let row = AlertRow {
            id: 7,
            account_id: 1,
            exchange: Venue::Binance,
            symbol: "BTCUSDT".into(),
            condition: Condition::Pct { dir: Move::Up, millionths: 2_500_000, window: Timeframe::H1 },
            repeat: true,
            note: "n".into(),
            webhook_url: None,
            status: crate::store::AlertStatus::Active,
            created_price: 9_500_012_000_000,
            created_ms: 1_795_183_387_123,
            last_triggered_ms: None,
            trigger_count: 0,
            expires_ms: None,
            cooldown_s: 0,
            paused: None,
            max_fires: None,
            message: None,
            webhook_format: crate::store::WebhookFormat::Json,
            version: 1,
            deleted_ms: None,
        };
        let mut j = Json::default();
        write_alert(&mut j, &row);
        let v: Value = serde_json::from_str(&j.finish()).expect("json");
        let keys: Vec<&str> = v.as_object().expect("object").keys().map(String::as_str).collect();
        for k in [
            "id",
            "exchange",
            "symbol",
            "type",
            "direction",
            "price",
            "pct",
            "window",
            "repeat",
            "note",
            "webhookUrl",
            "status",
            "createdPrice",
            "lastTriggeredAt",
            "triggerCount",
            "createdAt",
            "expiresAt",
        ] {
            assert!(keys.contains(&k), "{k} missing");
        }
        assert_eq!(v["pct"], 2.5);
        assert_eq!(v["price"], Value::Null);
        assert_eq!(v["createdPrice"], 95000.12);
        assert_eq!(v["createdAt"], "2026-11-20T14:03:07.123+00:00");
        assert_eq!(v["lastTriggeredAt"], Value::Null);
        assert_eq!(v["expiresAt"], Value::Null);
    }

    fn universe_row() -> AlertRow {
        AlertRow {
            id: 9,
            account_id: 1,
            exchange: Venue::Binance,
            symbol: rampart_state::partition::UNIVERSE.into(),
            condition: Condition::Pct { dir: Move::Up, millionths: 5_000_000, window: Timeframe::M15 },
            repeat: true,
            note: String::new(),
            webhook_url: None,
            status: crate::store::AlertStatus::Active,
            created_price: 0,
            created_ms: 1_795_183_387_123,
            last_triggered_ms: None,
            trigger_count: 0,
            expires_ms: None,
            cooldown_s: 900,
            paused: None,
            max_fires: None,
            message: None,
            webhook_format: crate::store::WebhookFormat::Json,
            version: 1,
            deleted_ms: None,
        }
    }

    #[test]
    fn a_universe_body_carries_its_triggers_and_the_first_as_trigger() {
        let row = universe_row();
        let pair = |symbol: &str, price: i64, ts_ms: i64| FiringRecord {
            symbol: Some(symbol.into()),
            move_hundredths: Some(612),
            ..FiringRecord::at_price(9, price, ts_ms, false)
        };
        let body =
            FiringRecord::collected(vec![pair("BTCUSDT", 100_00000000, 5_000), pair("ETHUSDT", 2_00000000, 5_300)]);
        let v: Value = serde_json::from_str(&event_body(&row, &body)).expect("json");
        assert_eq!((&v["alert"]["symbol"], &v["alert"]["event"]), (&Value::from("*"), &Value::Null));
        assert_eq!(v["trigger"], v["triggers"][0], "trigger is the first of triggers");
        assert_eq!(v["triggers"].as_array().map(Vec::len), Some(2));
        let t = &v["triggers"][1];
        assert_eq!(
            (&t["symbol"], &t["price"], &t["move"], &t["time"]),
            (&"ETHUSDT".into(), &2.into(), &6.12.into(), &5_300.into())
        );
        // The Alert of a `*` alert has no one price.
        let mut j = Json::default();
        write_alert(&mut j, &row);
        let a: Value = serde_json::from_str(&j.finish()).expect("json");
        assert_eq!((&a["createdPrice"], &a["cooldownS"], &a["symbol"]), (&Value::Null, &900.into(), &"*".into()));
        // In words: every pair that fired, named.
        let text = crate::text::telegram::firing_text(&row, &body);
        assert!(text.starts_with("Every binance pair · pct alert #9\nBTCUSDT: up 5% within 15m"), "{text}");
        assert!(text.contains("\nETHUSDT: "), "{text}");
    }
}
