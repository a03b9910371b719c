//! The fields of a derivatives alert (`decisions.md` §17, "Alerts"): a `liquidations` alert's
//! `event`, `direction`, `min_usd` and `window`; an `oi` alert's `direction`, `pct`, `window` and
//! `min_usd`; a `funding` alert's `direction` and `funding_pct`; each checked with §17's exact
//! 422, and every other type's field refused on them (as §15).
//!
//! Choice where §17 is silent: an `oi` alert's `min_usd` is a whole number of dollars (it gates
//! on the pair's open interest, in the millions; cents would only be noise), refused otherwise.

use rampart_engine::alert::Condition;
use rampart_engine::perp_alert::{
    FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection, PerpCondition,
};
use rampart_engine::perp_book::PerpInterval;
use serde_json::{Map, Value};

use crate::request::{clip, invalid, number, required_string, Invalid};

use super::decimal::{exact, Fit};
use super::structure::{hundredths, refuse, LEVEL_FIELDS, MIN_USD_MAX, WALL_FIELDS};

/// The derivatives alert types, as `type` spells them.
pub const TYPES: [&str; 3] = ["liquidations", "oi", "funding"];
/// The field only `funding` alerts take.
pub const FUNDING_FIELD: &str = "funding_pct";
/// The least `min_usd` of a `liquidations` alert, dollars (§17: below it a `*` `order` alert is
/// noise).
pub const LIQ_MIN_USD_MIN: i64 = 100;
/// `funding_pct`'s bound either side of zero, percent per 8 h.
const FUNDING_PCT_MAX_MICRO: i64 = 50_000_000;
/// Decimal places of `pct` and `funding_pct`.
const PCT_DECIMALS: u32 = 6;
/// `pct` of an `oi` alert: 0.1 % to 500 %, millionths.
const OI_PCT_MIN_MICRO: i64 = 100_000;
const OI_PCT_MAX_MICRO: i64 = 500_000_000;

/// True for `liquidations`, `oi` and `funding`.
pub fn is_derivatives(kind: &str) -> bool {
    TYPES.contains(&kind)
}

/// A derivatives alert's condition from the body's fields (`kind` one of [`TYPES`], `direction`
/// as given, if given).
pub fn perp_condition(obj: &Map<String, Value>, kind: &str, direction: Option<&str>) -> Result<Condition, Invalid> {
    let others = ["price", "within_pct", "min_strength", "timeframes", "min_ratio", "max_dist_pct", "min_age_s"];
    debug_assert!(LEVEL_FIELDS.iter().chain(&WALL_FIELDS[1..]).all(|f| others.contains(f)));
    let condition = match kind {
        "liquidations" => {
            refuse(obj, kind, others.iter().copied().chain(["pct", FUNDING_FIELD]))?;
            liquidations(obj, direction)?
        }
        "oi" => {
            refuse(obj, kind, others.iter().copied().chain(["event", FUNDING_FIELD]))?;
            oi(obj, direction)?
        }
        _ => {
            refuse(obj, kind, others.iter().copied().chain(["pct", "window", "event", "min_usd"]))?;
            funding(obj, direction)?
        }
    };
    Ok(Condition::Perp(condition))
}

fn liquidations(obj: &Map<String, Value>, direction: Option<&str>) -> Result<PerpCondition, Invalid> {
    let event = required_string(obj, "event")?;
    if event != "order" && event != "sum" {
        return Err(invalid(format!(
            "invalid event '{}' for a liquidations alert. Allowed: order, sum",
            clip(event, 32)
        )));
    }
    let direction = match direction {
        None => LiqDirection::Any,
        Some(d) => LiqDirection::parse(d).ok_or_else(|| {
            invalid(format!("invalid direction '{}' for a liquidations alert. Allowed: long, short, any", clip(d, 32)))
        })?,
    };
    let range = format!("min_usd must be between {LIQ_MIN_USD_MIN} and {MIN_USD_MAX}");
    number(obj, "min_usd")?.ok_or_else(|| invalid("missing field 'min_usd'"))?;
    let cents = hundredths(obj, "min_usd", LIQ_MIN_USD_MIN * 100, MIN_USD_MAX * 100, &range)?;
    let min_usd_cents = u64::try_from(cents).unwrap_or_default();
    let window = match crate::request::string(obj, "window")? {
        Some(_) if event == "order" => return Err(invalid("field 'window' is only allowed with event 'sum'")),
        None if event == "sum" => return Err(invalid("missing field 'window'")),
        w => w,
    };
    Ok(match window {
        None => PerpCondition::Order(LiqOrder { direction, min_usd_cents }),
        Some(w) => {
            let window = PerpInterval::parse(w).ok_or_else(|| {
                invalid(format!("invalid window '{}'. Allowed: 1m, 5m, 15m, 1h, 4h, 1d", clip(w, 32)))
            })?;
            PerpCondition::Sum { window, sum: LiqSum { direction, min_usd_cents } }
        }
    })
}

fn oi(obj: &Map<String, Value>, direction: Option<&str>) -> Result<PerpCondition, Invalid> {
    let d = direction.ok_or_else(|| invalid("missing field 'direction'"))?;
    let direction = OiDirection::parse(d).ok_or_else(|| {
        invalid(format!("invalid direction '{}' for an oi alert. Allowed: up, down, any", clip(d, 32)))
    })?;
    let n = number(obj, "pct")?.ok_or_else(|| invalid("missing field 'pct'"))?;
    let range = || invalid("pct must be between 0.1 and 500");
    let pct_micro = match exact(n, PCT_DECIMALS, OI_PCT_MAX_MICRO) {
        Ok(m) if m >= OI_PCT_MIN_MICRO => m,
        Ok(_) | Err(Fit::NotPositive | Fit::TooLarge) => return Err(range()),
        Err(Fit::TooPrecise) if n.as_f64().is_some_and(|v| v < 0.1) => return Err(range()),
        Err(Fit::TooPrecise) => return Err(invalid("pct has more than 6 decimal places")),
    };
    let w = required_string(obj, "window")?;
    let window = PerpInterval::parse(w)
        .filter(|w| w.has_oi())
        .ok_or_else(|| invalid(format!("invalid window '{}'. Allowed: 5m, 15m, 1h, 4h, 1d", clip(w, 32))))?;
    let range = format!("min_usd must be between 0 and {MIN_USD_MAX}");
    let cents = hundredths(obj, "min_usd", 0, MIN_USD_MAX * 100, &range)?;
    if cents % 100 != 0 {
        return Err(invalid("min_usd must be a whole number of dollars for an oi alert"));
    }
    let min_usd = u64::try_from(cents / 100).unwrap_or_default();
    Ok(PerpCondition::Oi { window, change: OiChange { direction, pct_micro, min_usd } })
}

fn funding(obj: &Map<String, Value>, direction: Option<&str>) -> Result<PerpCondition, Invalid> {
    let d = direction.ok_or_else(|| invalid("missing field 'direction'"))?;
    let direction = FundingDirection::parse(d).ok_or_else(|| {
        invalid(format!("invalid direction '{}' for a funding alert. Allowed: above, below", clip(d, 32)))
    })?;
    let n = number(obj, FUNDING_FIELD)?.ok_or_else(|| invalid("missing field 'funding_pct'"))?;
    Ok(PerpCondition::Funding(FundingLevel { direction, pct_micro: funding_micro(n)? }))
}

/// `funding_pct` in millionths of a percent: −50 to 50, at most 6 decimals, either sign.
fn funding_micro(n: &serde_json::Number) -> Result<i64, Invalid> {
    let range = || invalid("funding_pct must be between -50 and 50");
    let text = n.to_string();
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, text.as_str()),
    };
    let magnitude: serde_json::Number = magnitude.parse().map_err(|_| range())?;
    let micro = match exact(&magnitude, PCT_DECIMALS, FUNDING_PCT_MAX_MICRO) {
        Ok(m) => m,
        Err(Fit::NotPositive) => 0,
        Err(Fit::TooLarge) => return Err(range()),
        Err(Fit::TooPrecise) => return Err(invalid("funding_pct has more than 6 decimal places")),
    };
    Ok(if negative { -micro } else { micro })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(body: &str) -> Result<PerpCondition, Invalid> {
        let obj: Map<String, Value> = serde_json::from_str(body).expect("a JSON object");
        let kind = crate::request::required_string(&obj, "type")?;
        let direction = crate::request::string(&obj, "direction")?;
        match perp_condition(&obj, kind, direction)? {
            Condition::Perp(c) => Ok(c),
            other => panic!("not a derivatives condition: {other:?}"),
        }
    }

    fn refused(body: &str, message: &str) {
        match condition(body) {
            Err(e) => assert_eq!((e.status, e.message.as_str()), (422, message), "{body}"),
            Ok(c) => panic!("{body}: accepted as {c:?}"),
        }
    }

    #[test]
    fn the_three_types_are_read_exactly() {
        let c = condition(r#"{"type":"liquidations","event":"order","min_usd":1000000}"#).expect("order");
        assert_eq!(c, PerpCondition::Order(LiqOrder { direction: LiqDirection::Any, min_usd_cents: 100_000_000 }));
        let c =
            condition(r#"{"type":"liquidations","event":"sum","direction":"long","min_usd":5000000.25,"window":"5m"}"#)
                .expect("sum");
        let sum = LiqSum { direction: LiqDirection::Long, min_usd_cents: 500_000_025 };
        assert_eq!(c, PerpCondition::Sum { window: PerpInterval::parse("5m").expect("5m"), sum });
        let c = condition(r#"{"type":"oi","direction":"up","pct":10,"window":"1h","min_usd":1000000}"#).expect("oi");
        let change = OiChange { direction: OiDirection::Up, pct_micro: 10_000_000, min_usd: 1_000_000 };
        assert_eq!(c, PerpCondition::Oi { window: PerpInterval::parse("1h").expect("1h"), change });
        let c = condition(r#"{"type":"funding","direction":"below","funding_pct":-0.012345}"#).expect("funding");
        assert_eq!(c, PerpCondition::Funding(FundingLevel { direction: FundingDirection::Below, pct_micro: -12_345 }));
        let c = condition(r#"{"type":"funding","direction":"above","funding_pct":0}"#).expect("zero");
        assert_eq!(c, PerpCondition::Funding(FundingLevel { direction: FundingDirection::Above, pct_micro: 0 }));
        let c = condition(r#"{"type":"funding","direction":"above","funding_pct":-50}"#).expect("-50");
        assert!(matches!(c, PerpCondition::Funding(FundingLevel { pct_micro: -50_000_000, .. })));
    }

    #[test]
    fn every_refusal_of_section_17_with_its_text() {
        let liq = r#""type":"liquidations""#;
        refused(&format!("{{{liq},\"min_usd\":1000}}"), "missing field 'event'");
        refused(
            &format!("{{{liq},\"event\":\"all\",\"min_usd\":1000}}"),
            "invalid event 'all' for a liquidations alert. Allowed: order, sum",
        );
        refused(&format!("{{{liq},\"event\":\"order\"}}"), "missing field 'min_usd'");
        refused(&format!("{{{liq},\"event\":\"sum\",\"min_usd\":1000}}"), "missing field 'window'");
        refused(
            &format!("{{{liq},\"event\":\"order\",\"min_usd\":1000,\"window\":\"5m\"}}"),
            "field 'window' is only allowed with event 'sum'",
        );
        refused(
            &format!("{{{liq},\"event\":\"sum\",\"min_usd\":1000,\"window\":\"2h\"}}"),
            "invalid window '2h'. Allowed: 1m, 5m, 15m, 1h, 4h, 1d",
        );
        refused(
            &format!("{{{liq},\"event\":\"order\",\"direction\":\"up\",\"min_usd\":1000}}"),
            "invalid direction 'up' for a liquidations alert. Allowed: long, short, any",
        );
        for bad in ["99.99", "0", "-5", "1000000000000.01"] {
            refused(
                &format!("{{{liq},\"event\":\"order\",\"min_usd\":{bad}}}"),
                "min_usd must be between 100 and 1000000000000",
            );
        }
        refused(
            &format!("{{{liq},\"event\":\"order\",\"min_usd\":100.001}}"),
            "min_usd has more than 2 decimal places",
        );
        refused(
            &format!("{{{liq},\"event\":\"order\",\"min_usd\":100,\"price\":5}}"),
            "field 'price' is not allowed on a liquidations alert",
        );
        refused(
            &format!("{{{liq},\"event\":\"order\",\"min_usd\":100,\"pct\":5}}"),
            "field 'pct' is not allowed on a liquidations alert",
        );
        refused(
            &format!("{{{liq},\"event\":\"order\",\"min_usd\":100,\"funding_pct\":5}}"),
            "field 'funding_pct' is not allowed on a liquidations alert",
        );
        let oi = r#""type":"oi""#;
        refused(&format!("{{{oi},\"pct\":5,\"window\":\"1h\"}}"), "missing field 'direction'");
        refused(
            &format!("{{{oi},\"direction\":\"long\",\"pct\":5,\"window\":\"1h\"}}"),
            "invalid direction 'long' for an oi alert. Allowed: up, down, any",
        );
        refused(&format!("{{{oi},\"direction\":\"up\",\"window\":\"1h\"}}"), "missing field 'pct'");
        refused(&format!("{{{oi},\"direction\":\"up\",\"pct\":5}}"), "missing field 'window'");
        refused(
            &format!("{{{oi},\"direction\":\"up\",\"pct\":5,\"window\":\"1m\"}}"),
            "invalid window '1m'. Allowed: 5m, 15m, 1h, 4h, 1d",
        );
        for bad in ["0.09", "500.000001", "0", "-1"] {
            refused(
                &format!("{{{oi},\"direction\":\"up\",\"pct\":{bad},\"window\":\"1h\"}}"),
                "pct must be between 0.1 and 500",
            );
        }
        refused(
            &format!("{{{oi},\"direction\":\"up\",\"pct\":1.0000001,\"window\":\"1h\"}}"),
            "pct has more than 6 decimal places",
        );
        refused(
            &format!("{{{oi},\"direction\":\"up\",\"pct\":5,\"window\":\"1h\",\"min_usd\":-1}}"),
            "min_usd must be between 0 and 1000000000000",
        );
        refused(
            &format!("{{{oi},\"direction\":\"up\",\"pct\":5,\"window\":\"1h\",\"min_usd\":10.5}}"),
            "min_usd must be a whole number of dollars for an oi alert",
        );
        refused(
            &format!("{{{oi},\"direction\":\"up\",\"pct\":5,\"window\":\"1h\",\"event\":\"sum\"}}"),
            "field 'event' is not allowed on an oi alert",
        );
        let f = r#""type":"funding""#;
        refused(&format!("{{{f},\"funding_pct\":0.05}}"), "missing field 'direction'");
        refused(
            &format!("{{{f},\"direction\":\"up\",\"funding_pct\":0.05}}"),
            "invalid direction 'up' for a funding alert. Allowed: above, below",
        );
        refused(&format!("{{{f},\"direction\":\"above\"}}"), "missing field 'funding_pct'");
        for bad in ["50.000001", "-50.1", "1e3"] {
            refused(
                &format!("{{{f},\"direction\":\"above\",\"funding_pct\":{bad}}}"),
                "funding_pct must be between -50 and 50",
            );
        }
        refused(
            &format!("{{{f},\"direction\":\"above\",\"funding_pct\":0.0000001}}"),
            "funding_pct has more than 6 decimal places",
        );
        refused(
            &format!("{{{f},\"direction\":\"above\",\"funding_pct\":0.01,\"price\":5}}"),
            "field 'price' is not allowed on a funding alert",
        );
        refused(
            &format!("{{{f},\"direction\":\"above\",\"funding_pct\":0.01,\"window\":\"1h\"}}"),
            "field 'window' is not allowed on a funding alert",
        );
    }
}
