//! The fields of a structure alert (`decisions.md` §15): a level alert's `event`, `direction`,
//! `within_pct`, `min_strength` and `timeframes`; a wall alert's `event`, `direction`, `min_usd`,
//! `min_ratio`, `max_dist_pct` and `min_age_s`; each checked with its exact 422; and the refusal
//! of one type's fields on another.
//!
//! Choices where §15 is silent: `min_strength` is a whole number from 1 to
//! [`MIN_STRENGTH_MAX`]; `timeframes` is a non-empty list without repeats; `within_pct` keeps up
//! to 6 decimals, like `pct`; `min_usd`, `min_ratio` and `max_dist_pct` keep up to 2 decimals;
//! `min_usd` is at most [`MIN_USD_MAX`]; `min_ratio` lies from 1 to 1 000 (absent: every wall the
//! detection shows).

use rampart_engine::alert::Condition;
use rampart_engine::level::Origin;
use rampart_engine::level_alert::{
    LevelCondition, LevelDirection, LevelEvent, TIMEFRAMES_ALL, WITHIN_MILLIONTHS_DEFAULT, WITHIN_MILLIONTHS_MAX,
    WITHIN_MILLIONTHS_MIN,
};
use rampart_engine::site_alert::WallSide;
use rampart_engine::wall_alert::{
    WallCondition, WallEvent, MAX_DIST_HUNDREDTHS_DEFAULT, MAX_DIST_HUNDREDTHS_MAX, MIN_RATIO_HUNDREDTHS_MAX,
    WALL_MIN_AGE_S_MAX,
};
use serde_json::{Map, Value};

use crate::request::{clip, invalid, number, present, required_string, Invalid};

use super::decimal::{exact, Fit};

/// Largest `min_strength` taken.
pub const MIN_STRENGTH_MAX: u32 = 1_000;

/// Largest `min_usd`: a trillion dollars.
pub const MIN_USD_MAX: i64 = 1_000_000_000_000;

/// The fields only level alerts take.
pub const LEVEL_FIELDS: [&str; 3] = ["within_pct", "min_strength", "timeframes"];
/// The fields only wall alerts take.
pub const WALL_FIELDS: [&str; 4] = ["min_usd", "min_ratio", "max_dist_pct", "min_age_s"];

/// A price or pct alert (`kind`) must not carry a structure alert's field.
pub fn refuse_structure_fields(obj: &Map<String, Value>, kind: &str) -> Result<(), Invalid> {
    refuse(obj, kind, std::iter::once("event").chain(LEVEL_FIELDS).chain(WALL_FIELDS).chain(["funding_pct"]))
}

/// The first of `fields` present is refused on an alert of `kind` ("on a wall alert", "on an oi
/// alert").
pub(super) fn refuse<'a>(
    obj: &Map<String, Value>,
    kind: &str,
    mut fields: impl Iterator<Item = &'a str>,
) -> Result<(), Invalid> {
    let article = if kind == "oi" { "an" } else { "a" };
    match fields.find(|f| present(obj, f).is_some()) {
        Some(f) => Err(invalid(format!("field '{f}' is not allowed on {article} {kind} alert"))),
        None => Ok(()),
    }
}

/// A wall alert's condition from the body's fields (`direction` as given, if given).
pub fn wall_condition(obj: &Map<String, Value>, direction: Option<&str>) -> Result<Condition, Invalid> {
    refuse(obj, "wall", ["price", "pct", "window"].into_iter().chain(LEVEL_FIELDS).chain(["funding_pct"]))?;
    let event = required_string(obj, "event")?;
    let event = WallEvent::parse(event).ok_or_else(|| {
        invalid(format!("invalid event '{}' for a wall alert. Allowed: appeared, pulled, filled", clip(event, 32)))
    })?;
    let side = match direction {
        None => WallSide::Any,
        Some(d) => WallSide::parse(d).ok_or_else(|| {
            invalid(format!("invalid direction '{}' for a wall alert. Allowed: bid, ask, any", clip(d, 32)))
        })?,
    };
    let min_usd_cents =
        hundredths(obj, "min_usd", 0, MIN_USD_MAX * 100, "min_usd must be between 0 and 1000000000000")?;
    let min_ratio_hundredths = match number(obj, "min_ratio")? {
        None => 0,
        Some(_) => hundredths(
            obj,
            "min_ratio",
            100,
            i64::from(MIN_RATIO_HUNDREDTHS_MAX),
            "min_ratio must be between 1 and 1000",
        )?,
    };
    let max_dist = match number(obj, "max_dist_pct")? {
        None => i64::from(MAX_DIST_HUNDREDTHS_DEFAULT),
        Some(_) => hundredths(
            obj,
            "max_dist_pct",
            0,
            i64::from(MAX_DIST_HUNDREDTHS_MAX),
            "max_dist_pct must be between 0 and 50",
        )?,
    };
    let min_age_s = match number(obj, "min_age_s")? {
        None => 0,
        Some(n) => n
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v <= WALL_MIN_AGE_S_MAX)
            .ok_or_else(|| invalid(format!("min_age_s must be a whole number from 0 to {WALL_MIN_AGE_S_MAX}")))?,
    };
    Ok(Condition::Wall(WallCondition {
        event,
        side,
        min_usd_cents: u64::try_from(min_usd_cents).unwrap_or_default(),
        min_ratio_hundredths: u32::try_from(min_ratio_hundredths).unwrap_or_default(),
        max_dist_hundredths: u32::try_from(max_dist).unwrap_or_default(),
        min_age_s,
    }))
}

/// The number field `name` in hundredths (absent: 0), from `min` to `max` hundredths with at
/// most 2 decimals; `range` is the refusal when it is outside.
pub(super) fn hundredths(
    obj: &Map<String, Value>,
    name: &str,
    min: i64,
    max: i64,
    range: &str,
) -> Result<i64, Invalid> {
    let Some(n) = number(obj, name)? else { return Ok(0) };
    if n.as_f64() == Some(0.0) {
        return if min == 0 { Ok(0) } else { Err(invalid(range)) };
    }
    match exact(n, 2, max) {
        Ok(h) if h >= min => Ok(h),
        Ok(_) | Err(Fit::NotPositive | Fit::TooLarge) => Err(invalid(range)),
        Err(Fit::TooPrecise) => Err(invalid(format!("{name} has more than 2 decimal places"))),
    }
}

/// A level alert's condition from the body's fields (`direction` as given, if given).
pub fn level_condition(obj: &Map<String, Value>, direction: Option<&str>) -> Result<Condition, Invalid> {
    refuse(obj, "level", ["price", "pct", "window"].into_iter().chain(WALL_FIELDS).chain(["funding_pct"]))?;
    let event = required_string(obj, "event")?;
    let event = LevelEvent::parse(event).ok_or_else(|| {
        invalid(format!("invalid event '{}' for a level alert. Allowed: approach, touch, break", clip(event, 32)))
    })?;
    let direction = match direction {
        None => LevelDirection::Any,
        Some(d) => LevelDirection::parse(d).ok_or_else(|| {
            invalid(format!("invalid direction '{}' for a level alert. Allowed: above, below, any", clip(d, 32)))
        })?,
    };
    let within_millionths = match (event, number(obj, "within_pct")?) {
        (LevelEvent::Approach, None) => WITHIN_MILLIONTHS_DEFAULT,
        (LevelEvent::Approach, Some(n)) => within(n)?,
        (_, Some(_)) => return Err(invalid("field 'within_pct' is only allowed with event 'approach'")),
        (_, None) => 0,
    };
    Ok(Condition::Level(LevelCondition {
        event,
        direction,
        within_millionths,
        min_strength: min_strength(obj)?,
        timeframes: timeframes(obj)?,
    }))
}

/// `within_pct`: 0.05 to 10, up to 6 decimals, in millionths of a percent.
fn within(n: &serde_json::Number) -> Result<u32, Invalid> {
    let range = || invalid("within_pct must be between 0.05 and 10");
    match exact(n, 6, i64::from(WITHIN_MILLIONTHS_MAX)) {
        Ok(m) if m >= i64::from(WITHIN_MILLIONTHS_MIN) => u32::try_from(m).map_err(|_| range()),
        Ok(_) | Err(Fit::NotPositive | Fit::TooLarge) => Err(range()),
        Err(Fit::TooPrecise) if n.as_f64().is_some_and(|v| v < 0.05) => Err(range()),
        Err(Fit::TooPrecise) => Err(invalid("within_pct has more than 6 decimal places")),
    }
}

/// `min_strength`: a whole number from 1 to [`MIN_STRENGTH_MAX`], default 1.
fn min_strength(obj: &Map<String, Value>) -> Result<u32, Invalid> {
    let Some(n) = number(obj, "min_strength")? else { return Ok(1) };
    n.as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| (1..=MIN_STRENGTH_MAX).contains(v))
        .ok_or_else(|| invalid(format!("min_strength must be a whole number from 1 to {MIN_STRENGTH_MAX}")))
}

/// `timeframes`: a non-empty list of level timeframes without repeats, default all.
fn timeframes(obj: &Map<String, Value>) -> Result<u16, Invalid> {
    let must = || invalid(format!("timeframes must be a non-empty list of: {}", Origin::ALLOWED));
    let list = match present(obj, "timeframes") {
        None => return Ok(TIMEFRAMES_ALL),
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(_) => return Err(must()),
    };
    let mut bits = 0u16;
    for item in list {
        let Value::String(name) = item else { return Err(must()) };
        let origin = Origin::parse(name)
            .ok_or_else(|| invalid(format!("invalid timeframe '{}'. Allowed: {}", clip(name, 32), Origin::ALLOWED)))?;
        if bits & origin.bit() != 0 {
            return Err(invalid(format!("timeframe '{name}' is listed twice")));
        }
        bits |= origin.bit();
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(body: &str) -> Map<String, Value> {
        serde_json::from_str(body).expect("a JSON object")
    }

    fn level(fields: &str) -> Result<LevelCondition, Invalid> {
        let obj = object(&format!(r#"{{"type":"level","symbol":"BTCUSDT"{fields}}}"#));
        let direction = crate::request::string(&obj, "direction")?;
        match level_condition(&obj, direction)? {
            Condition::Level(c) => Ok(c),
            other => panic!("{fields}: {other:?}"),
        }
    }

    fn refused(fields: &str, message: &str) {
        let e = level(fields).expect_err(fields);
        assert_eq!((e.status, e.message.as_str()), (422, message), "{fields}");
    }

    #[test]
    fn a_level_alert_takes_its_fields_with_their_defaults() {
        let c = level(r#","event":"approach""#).expect("defaults");
        let want = LevelCondition {
            event: LevelEvent::Approach,
            direction: LevelDirection::Any,
            within_millionths: 500_000,
            min_strength: 1,
            timeframes: TIMEFRAMES_ALL,
        };
        assert_eq!(c, want);
        let c = level(
            r#","event":"approach","direction":"above","within_pct":0.25,"min_strength":2,"timeframes":["4h","1d"]"#,
        )
        .expect("all fields");
        let want = LevelCondition {
            direction: LevelDirection::Above,
            within_millionths: 250_000,
            min_strength: 2,
            timeframes: Origin::H4.bit() | Origin::D1.bit(),
            ..want
        };
        assert_eq!(c, want);
        let c = level(r#","event":"break","direction":"below""#).expect("a break");
        assert_eq!((c.event, c.direction, c.within_millionths), (LevelEvent::Break, LevelDirection::Below, 0));
        assert_eq!(level(r#","event":"approach","within_pct":0.05"#).map(|c| c.within_millionths), Ok(50_000));
        assert_eq!(level(r#","event":"approach","within_pct":10"#).map(|c| c.within_millionths), Ok(10_000_000));
    }

    #[test]
    fn every_wrong_field_is_named() {
        refused("", "missing field 'event'");
        refused(r#","event":"cross""#, "invalid event 'cross' for a level alert. Allowed: approach, touch, break");
        refused(
            r#","event":"touch","direction":"up""#,
            "invalid direction 'up' for a level alert. Allowed: above, below, any",
        );
        refused(r#","event":"touch","within_pct":1"#, "field 'within_pct' is only allowed with event 'approach'");
        for w in ["0.04", "10.5", "0", "-1"] {
            refused(&format!(r#","event":"approach","within_pct":{w}"#), "within_pct must be between 0.05 and 10");
        }
        refused(r#","event":"approach","within_pct":1.0000001"#, "within_pct has more than 6 decimal places");
        refused(r#","event":"approach","within_pct":"1""#, "field 'within_pct' must be a number");
        for s in ["0", "1.5", "1001", "-2"] {
            refused(
                &format!(r#","event":"break","min_strength":{s}"#),
                "min_strength must be a whole number from 1 to 1000",
            );
        }
        let list = "timeframes must be a non-empty list of: 15m, 1h, 4h, 1d, 1w, dmax, dmin, wmax, wmin";
        for t in ["[]", "\"4h\"", "[4]"] {
            refused(&format!(r#","event":"break","timeframes":{t}"#), list);
        }
        refused(
            r#","event":"break","timeframes":["4h","5m"]"#,
            "invalid timeframe '5m'. Allowed: 15m, 1h, 4h, 1d, 1w, dmax, dmin, wmax, wmin",
        );
        refused(r#","event":"break","timeframes":["4h","4h"]"#, "timeframe '4h' is listed twice");
        for (f, v) in [("price", "1"), ("pct", "1"), ("window", "\"1h\"")] {
            refused(&format!(r#","event":"break","{f}":{v}"#), &format!("field '{f}' is not allowed on a level alert"));
        }
    }

    fn wall(fields: &str) -> Result<WallCondition, Invalid> {
        let obj = object(&format!(r#"{{"type":"wall","symbol":"BTCUSDT"{fields}}}"#));
        let direction = crate::request::string(&obj, "direction")?;
        match wall_condition(&obj, direction)? {
            Condition::Wall(c) => Ok(c),
            other => panic!("{fields}: {other:?}"),
        }
    }

    #[test]
    fn a_wall_alert_takes_its_fields_with_their_defaults() {
        let c = wall(r#","event":"pulled""#).expect("defaults");
        let want = WallCondition {
            event: WallEvent::Pulled,
            side: WallSide::Any,
            min_usd_cents: 0,
            min_ratio_hundredths: 0,
            max_dist_hundredths: 500,
            min_age_s: 0,
        };
        assert_eq!(c, want);
        let c = wall(
            r#","event":"appeared","direction":"bid","min_usd":2000000.5,"min_ratio":12.25,"max_dist_pct":0,"min_age_s":3600"#,
        );
        let want = WallCondition {
            event: WallEvent::Appeared,
            side: WallSide::Bid,
            min_usd_cents: 200_000_050,
            min_ratio_hundredths: 1_225,
            max_dist_hundredths: 0,
            min_age_s: 3_600,
        };
        assert_eq!(c, Ok(want));
    }

    #[test]
    fn every_wrong_wall_field_is_named() {
        let refused = |fields: &str, message: &str| {
            let e = wall(fields).expect_err(fields);
            assert_eq!((e.status, e.message.as_str()), (422, message), "{fields}");
        };
        refused("", "missing field 'event'");
        refused(r#","event":"gone""#, "invalid event 'gone' for a wall alert. Allowed: appeared, pulled, filled");
        refused(
            r#","event":"filled","direction":"above""#,
            "invalid direction 'above' for a wall alert. Allowed: bid, ask, any",
        );
        for v in ["-1", "1000000000000.01"] {
            refused(&format!(r#","event":"filled","min_usd":{v}"#), "min_usd must be between 0 and 1000000000000");
        }
        refused(r#","event":"filled","min_usd":1.005"#, "min_usd has more than 2 decimal places");
        for v in ["0", "0.99", "1000.01"] {
            refused(&format!(r#","event":"filled","min_ratio":{v}"#), "min_ratio must be between 1 and 1000");
        }
        for v in ["-0.5", "50.01"] {
            refused(&format!(r#","event":"filled","max_dist_pct":{v}"#), "max_dist_pct must be between 0 and 50");
        }
        for v in ["-1", "1.5", "3601"] {
            refused(
                &format!(r#","event":"appeared","min_age_s":{v}"#),
                "min_age_s must be a whole number from 0 to 3600",
            );
        }
        refused(r#","event":"pulled","within_pct":1"#, "field 'within_pct' is not allowed on a wall alert");
        refused(r#","event":"pulled","price":1"#, "field 'price' is not allowed on a wall alert");
        let e = level(r#","event":"break","min_usd":5"#).expect_err("a wall field on a level alert");
        assert_eq!(e.message, "field 'min_usd' is not allowed on a level alert");
    }

    #[test]
    fn price_and_pct_alerts_refuse_the_structure_fields() {
        let fields = [
            ("event", "\"break\""),
            ("within_pct", "1"),
            ("min_strength", "2"),
            ("timeframes", "[\"4h\"]"),
            ("min_usd", "1"),
            ("min_ratio", "2"),
            ("max_dist_pct", "1"),
            ("min_age_s", "5"),
        ];
        for (f, v) in fields {
            let obj = object(&format!(r#"{{"type":"price","direction":"above","price":1,"symbol":"A","{f}":{v}}}"#));
            let e = refuse_structure_fields(&obj, "price").expect_err(f);
            assert_eq!((e.status, e.message), (422, format!("field '{f}' is not allowed on a price alert")));
            let e = refuse_structure_fields(&obj, "pct").expect_err(f);
            assert_eq!((e.status, e.message), (422, format!("field '{f}' is not allowed on a pct alert")));
        }
        let plain = object(r#"{"type":"price","direction":"above","price":1,"symbol":"A","event":null}"#);
        assert_eq!(refuse_structure_fields(&plain, "price"), Ok(()), "a null field is absent");
    }
}
