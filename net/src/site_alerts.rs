//! The site's own alert kinds (`decisions.md` §10): density alerts (a wall appears) and market
//! alerts (a board number crosses a threshold). They have no `/v1` endpoint and never a
//! webhook; a firing goes to the account's inbox. This module is their internal interface:
//! request parsing with the API's messages, and create, list and delete over the store with the
//! plan's caps. The site's pages and `rampart site-alerts` call it; the running service learns
//! of every change through [`watch::SiteAlertWatcher`], which publishes the active set that the
//! shards (density) and the board thread (market) evaluate.
//!
//! Choices where §10 is silent: the request uses the API's spelling (snake_case fields, a field
//! of the other kind refused when present and not null, an unknown field refused naming the
//! allowed ones); `exchange` is required (a board number is a venue's); a density alert without
//! `symbol` watches every pair of the venue; `repeat` is open to every plan (the site works for
//! every plan within its caps); a non-repeating alert is `triggered` after its one firing, like
//! an API alert; a repeating one may take `cooldown_s`, a quiet time after each firing (the
//! store drops a firing inside it, `Store::record_site_firings`).

pub mod density;
pub mod market;
pub mod watch;

use rampart_engine::site_alert::{market_reached, Direction, WallSide};
use rampart_engine::{Timeframe, Venue};
use serde_json::Value;

use crate::config::Plan;
use crate::request::{
    body_object, clip, invalid, number, present, repeat_and_note, required_string, string, symbol_syntax, Invalid,
    UNIVERSE_REPEATS,
};
use rampart_state::board::{Board, BoardNumber};
use rampart_store::store::{
    parse_direction, parse_side, AlertStatus, NewSiteAlert, SiteAlertRow, SiteCondition, SiteRequest,
};
use rampart_store::store::{Store, StoreError};

/// Largest `min_usd` accepted.
pub const MIN_USD_MAX: f64 = 1e12;
/// Largest `max_dist_pct` accepted (and its default, [`MAX_DIST_PCT_DEFAULT`]).
pub const MAX_DIST_PCT_MAX: f64 = 100.0;
/// `max_dist_pct` when absent.
pub const MAX_DIST_PCT_DEFAULT: f64 = 5.0;
/// Largest `min_age_s` accepted: one day.
pub const MIN_AGE_S_MAX: u64 = 86_400;
pub use crate::request::COOLDOWN_S_MAX;
/// Largest threshold of a count on the board (no venue lists more pairs or walls than this), and
/// of the open interest's percent change.
pub const COUNT_THRESHOLD_MAX: f64 = 1e6;
/// Largest threshold of a board number in USD (liquidations, open interest; decisions.md §17).
pub const USD_THRESHOLD_MAX: f64 = 1e15;
/// The funding threshold's bound either side of 0, percent per 8 h (§17).
pub const FUNDING_THRESHOLD_MAX: f64 = 50.0;

/// The fields a site alert body may have, in the order the 422 lists them.
pub const SITE_FIELDS: [&str; 14] = [
    "type",
    "exchange",
    "symbol",
    "side",
    "min_usd",
    "max_dist_pct",
    "min_age_s",
    "number",
    "interval",
    "direction",
    "threshold",
    "repeat",
    "note",
    "cooldown_s",
];
const DENSITY_ONLY: [&str; 5] = ["symbol", "side", "min_usd", "max_dist_pct", "min_age_s"];
const MARKET_ONLY: [&str; 4] = ["number", "interval", "direction", "threshold"];

type Obj = serde_json::Map<String, Value>;

/// Parses and checks a site alert body (JSON object).
pub fn parse_request(body: &[u8]) -> Result<SiteRequest, Invalid> {
    let obj = body_object(body, &SITE_FIELDS)?;
    let kind = required_string(&obj, "type")?;
    let (own, other) = match kind {
        "density" => ("density", MARKET_ONLY.as_slice()),
        "market" => ("market", DENSITY_ONLY.as_slice()),
        _ => return Err(invalid(format!("invalid type '{}'. Allowed: density, market", clip(kind, 32)))),
    };
    if let Some(f) = other.iter().find(|f| present(&obj, f).is_some()) {
        return Err(invalid(format!("field '{f}' is not allowed on a {own} alert")));
    }
    let exchange = required_string(&obj, "exchange")?;
    let exchange = Venue::parse(exchange)
        .ok_or_else(|| invalid(format!("invalid exchange '{}'. Allowed: {}", clip(exchange, 32), Venue::ALLOWED)))?;
    let condition = if own == "density" { density(&obj)? } else { market(&obj)? };
    let (mut repeat, note) = repeat_and_note(&obj)?;
    if let SiteCondition::Density { symbol: None, .. } = condition {
        // Every pair of the venue: a `*` wall alert, which repeats.
        if present(&obj, "repeat") == Some(&Value::Bool(false)) {
            return Err(invalid(UNIVERSE_REPEATS));
        }
        repeat = true;
    }
    let cooldown_s = match number(&obj, "cooldown_s")? {
        None => 0,
        Some(n) => match n.as_u64().filter(|&s| s <= COOLDOWN_S_MAX) {
            Some(s) => s as u32,
            None => {
                return Err(invalid(format!("cooldown_s must be a whole number of seconds from 0 to {COOLDOWN_S_MAX}")))
            }
        },
    };
    if cooldown_s > 0 && !repeat {
        return Err(invalid("cooldown_s is for a repeating alert (repeat: true): one that does not repeat fires once"));
    }
    Ok(SiteRequest { exchange, condition, repeat, note, cooldown_s })
}

fn density(obj: &Obj) -> Result<SiteCondition, Invalid> {
    let symbol = match string(obj, "symbol")? {
        None => None,
        Some(s) => {
            symbol_syntax(s)?;
            Some(s.to_ascii_uppercase())
        }
    };
    let side = match string(obj, "side")? {
        None => WallSide::Any,
        Some(s) => {
            parse_side(s).ok_or_else(|| invalid(format!("invalid side '{}'. Allowed: bid, ask, any", clip(s, 32))))?
        }
    };
    let min_usd = float(obj, "min_usd")?.ok_or_else(|| invalid("missing field 'min_usd'"))?;
    if !(min_usd > 0.0 && min_usd <= MIN_USD_MAX) {
        return Err(invalid(format!("min_usd must be above 0 and at most {MIN_USD_MAX:.0}")));
    }
    let max_dist_pct = float(obj, "max_dist_pct")?.unwrap_or(MAX_DIST_PCT_DEFAULT);
    if !(max_dist_pct > 0.0 && max_dist_pct <= MAX_DIST_PCT_MAX) {
        return Err(invalid(format!("max_dist_pct must be above 0 and at most {MAX_DIST_PCT_MAX:.0}")));
    }
    let min_age_s = match number(obj, "min_age_s")? {
        None => 0,
        Some(n) => match n.as_u64().filter(|&s| s <= MIN_AGE_S_MAX) {
            Some(s) => s as u32,
            None => {
                return Err(invalid(format!("min_age_s must be a whole number of seconds from 0 to {MIN_AGE_S_MAX}")))
            }
        },
    };
    Ok(SiteCondition::Density { symbol, side, min_usd, max_dist_pct, min_age_s })
}

fn market(obj: &Obj) -> Result<SiteCondition, Invalid> {
    let name = required_string(obj, "number")?;
    let number = BoardNumber::parse(name)
        .ok_or_else(|| invalid(format!("invalid number '{}'. Allowed: {}", clip(name, 32), BoardNumber::ALLOWED)))?;
    let interval = match string(obj, "interval")? {
        None => Timeframe::D1,
        Some(s) => Timeframe::parse(s)
            .ok_or_else(|| invalid(format!("invalid interval '{}'. Allowed: {}", clip(s, 32), Timeframe::ALLOWED)))?,
    };
    let direction = required_string(obj, "direction")?;
    let direction = parse_direction(direction).ok_or_else(|| {
        invalid(format!("invalid direction '{}' for a market alert. Allowed: above, below", clip(direction, 32)))
    })?;
    let threshold = float(obj, "threshold")?.ok_or_else(|| invalid("missing field 'threshold'"))?;
    let (min, max) = threshold_range(number);
    if !(min..=max).contains(&threshold) {
        return Err(invalid(format!("threshold for {} must be from {min:.0} to {max:.0}", number.as_str())));
    }
    Ok(SiteCondition::Market { number, interval, direction, threshold })
}

/// The thresholds a market alert on `number` may have (§10; the perpetuals' numbers §17).
fn threshold_range(number: BoardNumber) -> (f64, f64) {
    match number {
        BoardNumber::Sentiment => (0.0, 100.0),
        BoardNumber::LiqLongUsd | BoardNumber::LiqShortUsd | BoardNumber::OiUsd => (0.0, USD_THRESHOLD_MAX),
        BoardNumber::OiChange => (-100.0, COUNT_THRESHOLD_MAX),
        BoardNumber::Funding => (-FUNDING_THRESHOLD_MAX, FUNDING_THRESHOLD_MAX),
        BoardNumber::Advancing
        | BoardNumber::Declining
        | BoardNumber::Up5
        | BoardNumber::Down5
        | BoardNumber::Walls
        | BoardNumber::AtLevel
        | BoardNumber::Perps
        | BoardNumber::FundingHigh
        | BoardNumber::FundingLow => (0.0, COUNT_THRESHOLD_MAX),
    }
}

fn float(obj: &Obj, name: &str) -> Result<Option<f64>, Invalid> {
    Ok(number(obj, name)?.and_then(serde_json::Number::as_f64).filter(|v| v.is_finite()))
}

/// Why a site alert could not be created or deleted.
#[derive(Debug)]
pub enum SiteError {
    /// The request is refused (422, or 404 for an unknown pair or alert).
    Invalid(Invalid),
    /// Storage failed (503).
    Store(StoreError),
}

impl std::fmt::Display for SiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SiteError::Invalid(i) => write!(f, "{} {}", i.status, i.message),
            SiteError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SiteError {}

impl From<StoreError> for SiteError {
    fn from(e: StoreError) -> SiteError {
        SiteError::Store(e)
    }
}

/// The plan's cap for alerts of `condition`'s kind.
pub fn cap(plan: &Plan, condition: &SiteCondition) -> u32 {
    match condition {
        SiteCondition::Density { .. } => plan.density_alert_cap,
        SiteCondition::Market { .. } => plan.market_alert_cap,
    }
}

/// Stores a market alert for `account_id` on `plan`: the plan's cap must have room (counted and
/// inserted in one statement group, so two creates cannot both take the last place). A density
/// request is refused here: it is a wall alert, made by [`density::create`].
pub fn create(
    store: &Store,
    account_id: i64,
    plan: &Plan,
    request: SiteRequest,
    now_ms: i64,
) -> Result<SiteAlertRow, SiteError> {
    if let SiteCondition::Density { .. } = request.condition {
        // A running server learns of an API alert as it is created through it (`density`).
        return Err(SiteError::Invalid(invalid(
            "density alerts are wall alerts (type wall, event appeared) since schema 17 (decisions.md §15): \
             create one on the site or with POST /v1/alerts",
        )));
    }
    let cap = cap(plan, &request.condition);
    let kind = request.condition.kind();
    let new = NewSiteAlert { account_id, request, created_ms: now_ms };
    match store.insert_site_alert(&new, cap)? {
        Some(row) => Ok(row),
        None => {
            Err(SiteError::Invalid(invalid(format!("active {kind}-alert limit reached ({cap} on plan {})", plan.name))))
        }
    }
}

/// Refuses a market alert whose number has already reached its threshold on `board` (a complete
/// build; before the first one nothing is known and nothing is refused): such an alert would
/// wait for the number to go back first, and "a count at or above 0" never does. The message
/// names the number's value now and which thresholds can fire.
pub fn refuse_reached(request: &SiteRequest, board: &Board) -> Result<(), Invalid> {
    let SiteCondition::Market { number, interval, direction, threshold } = request.condition else {
        return Ok(());
    };
    if !board.complete {
        return Ok(());
    }
    let now = market::value(&board.venue(request.exchange).numbers[interval.index()], number);
    if !now.is_finite() || !market_reached(direction, threshold, now) {
        return Ok(());
    }
    // Funding is a rate of a few hundredths of a percent: it keeps the API's 6 decimals.
    let scale = if number == BoardNumber::Funding { 1e6 } else { 10.0 };
    let now = (now * scale).round() / scale;
    let (meets, choose) = match direction {
        Direction::Above => ("at or above", "above"),
        Direction::Below => ("at or below", "below"),
    };
    Err(Invalid {
        status: 422,
        message: format!(
            "{} on {} ({}) is {now} now, already {meets} {threshold}: a market alert fires when the number reaches \
             its threshold from the other side, so this one could not fire until the number had gone back. \
             Choose a threshold {choose} {now}.",
            number_words(number),
            request.exchange.as_str(),
            interval.as_str()
        ),
    })
}

/// Whether an active market alert waits to re-arm: its number on `board` has reached its
/// threshold (it fired there, or the number moved there while it was being handed over), so it
/// fires again only after the number has gone back. `None` for other alerts and before the
/// first complete board.
pub fn waiting(row: &SiteAlertRow, board: &Board) -> Option<bool> {
    let SiteCondition::Market { number, interval, direction, threshold } = row.condition else {
        return None;
    };
    if row.status != AlertStatus::Active || !board.complete {
        return None;
    }
    let now = market::value(&board.venue(row.exchange).numbers[interval.index()], number);
    Some(now.is_finite() && market_reached(direction, threshold, now))
}

/// A board number in words, for messages.
fn number_words(n: BoardNumber) -> &'static str {
    match n {
        BoardNumber::Sentiment => "The sentiment index",
        BoardNumber::Advancing => "The count of advancing pairs",
        BoardNumber::Declining => "The count of declining pairs",
        BoardNumber::Up5 => "The count of pairs up 5 % or more",
        BoardNumber::Down5 => "The count of pairs down 5 % or more",
        BoardNumber::Walls => "The count of walls",
        BoardNumber::AtLevel => "The count of pairs at a level",
        BoardNumber::Perps => "The count of pairs with a perpetual",
        BoardNumber::LiqLongUsd => "The USD of longs liquidated",
        BoardNumber::LiqShortUsd => "The USD of shorts liquidated",
        BoardNumber::OiUsd => "The open interest in USD",
        BoardNumber::OiChange => "The open interest's change in percent",
        BoardNumber::Funding => "The funding rate per 8 h in percent",
        BoardNumber::FundingHigh => "The count of pairs with funding at 0.05 % or more",
        BoardNumber::FundingLow => "The count of pairs with funding at -0.05 % or less",
    }
}

/// Deletes an account's site alert; 404 when it has no such alert.
pub fn delete(store: &Store, account_id: i64, id: i64, now_ms: i64) -> Result<SiteAlertRow, SiteError> {
    store
        .delete_site_alert(account_id, id, now_ms)?
        .ok_or_else(|| SiteError::Invalid(Invalid { status: 404, message: "unknown alert".into() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::site_alert::Direction;

    fn refused(body: &str) -> Invalid {
        match parse_request(body.as_bytes()) {
            Err(e) => e,
            Ok(r) => panic!("{body} was accepted: {r:?}"),
        }
    }

    /// Without a pair, a density alert is on every pair of the venue: it repeats (issue #58).
    #[test]
    fn a_venue_wide_density_body_repeats() {
        let r = parse_request(br#"{"type":"density","exchange":"okx","min_usd":5,"cooldown_s":60}"#).expect("valid");
        assert!(r.repeat && r.cooldown_s == 60, "{r:?}");
        assert!(parse_request(br#"{"type":"density","exchange":"okx","min_usd":5,"repeat":true}"#).expect("ok").repeat);
    }

    #[test]
    fn a_density_body_takes_its_defaults() {
        let r = parse_request(br#"{"type":"density","exchange":"Binance","symbol":"btcusdt","min_usd":250000}"#)
            .expect("valid");
        assert_eq!(r.exchange, Venue::Binance);
        assert_eq!(
            r.condition,
            SiteCondition::Density {
                symbol: Some("BTCUSDT".into()),
                side: WallSide::Any,
                min_usd: 250_000.0,
                max_dist_pct: 5.0,
                min_age_s: 0
            }
        );
        assert!(!r.repeat && r.note.is_empty());
        let every = parse_request(br#"{"type":"density","exchange":"okx","side":"ask","min_usd":1,"symbol":null}"#)
            .expect("valid");
        assert!(matches!(every.condition, SiteCondition::Density { symbol: None, side: WallSide::Ask, .. }));
    }

    #[test]
    fn a_market_body_takes_its_defaults() {
        let r = parse_request(
            br#"{"type":"market","exchange":"bybit","number":"atLevel","direction":"above","threshold":3,"repeat":true}"#,
        )
        .expect("valid");
        assert_eq!(
            r.condition,
            SiteCondition::Market {
                number: BoardNumber::AtLevel,
                interval: Timeframe::D1,
                direction: Direction::Above,
                threshold: 3.0
            }
        );
        assert!(r.repeat);
        assert_eq!(r.cooldown_s, 0, "no quiet time unless asked");
        let quiet = parse_request(
            br#"{"type":"market","exchange":"bybit","number":"walls","direction":"above","threshold":3,"repeat":true,"cooldown_s":900}"#,
        )
        .expect("valid");
        assert_eq!(quiet.cooldown_s, 900);
    }

    #[test]
    fn a_market_alert_takes_the_perpetuals_numbers_with_a_negative_threshold_where_they_go_below_0() {
        for (number, threshold) in [("funding", -0.05), ("oiChange", -12.5), ("liqLongUsd", 5e6), ("perps", 10.0)] {
            let body = format!(
                r#"{{"type":"market","exchange":"binance","number":"{number}","interval":"1h","direction":"below","threshold":{threshold}}}"#
            );
            let r = parse_request(body.as_bytes()).expect("valid");
            let SiteCondition::Market { number: n, threshold: t, .. } = r.condition else { panic!("{body}") };
            assert_eq!((n.as_str(), t), (number, threshold));
        }
    }

    #[test]
    fn every_bad_body_is_refused_with_its_message() {
        let cases: [(&str, &str); 26] = [
            (r#"{"type":"density""#, "malformed JSON"),
            (r#"[1]"#, "request body must be a JSON object"),
            (r#"{"type":"density","minUsd":1}"#, "unknown field 'minUsd'. Allowed: type, exchange, symbol, side"),
            (r#"{"exchange":"okx"}"#, "missing field 'type'"),
            (r#"{"type":"price","exchange":"okx"}"#, "invalid type 'price'. Allowed: density, market"),
            (
                r#"{"type":"density","exchange":"okx","min_usd":1,"threshold":2}"#,
                "field 'threshold' is not allowed on a density alert",
            ),
            (r#"{"type":"market","exchange":"okx","side":"bid"}"#, "field 'side' is not allowed on a market alert"),
            (r#"{"type":"density","min_usd":1}"#, "missing field 'exchange'"),
            (r#"{"type":"density","exchange":"kraken","min_usd":1}"#, "invalid exchange 'kraken'. Allowed: binance"),
            (
                r#"{"type":"density","exchange":"okx","symbol":"BTC-USDT","min_usd":1}"#,
                "field 'symbol' must be a pair symbol",
            ),
            (
                r#"{"type":"density","exchange":"okx","side":"both","min_usd":1}"#,
                "invalid side 'both'. Allowed: bid, ask, any",
            ),
            (r#"{"type":"density","exchange":"okx","min_usd":0}"#, "min_usd must be above 0"),
            (
                r#"{"type":"density","exchange":"okx","min_usd":1,"max_dist_pct":101}"#,
                "max_dist_pct must be above 0 and at most 100",
            ),
            (r#"{"type":"density","exchange":"okx","min_usd":1,"min_age_s":1.5}"#, "min_age_s must be a whole number"),
            (
                r#"{"type":"market","exchange":"okx","number":"breadth","direction":"above","threshold":1}"#,
                "invalid number 'breadth'. Allowed: sentiment",
            ),
            (
                r#"{"type":"market","exchange":"okx","number":"up5","interval":"2h","direction":"above","threshold":1}"#,
                "invalid interval '2h'. Allowed: 5m",
            ),
            (
                r#"{"type":"market","exchange":"okx","number":"up5","direction":"up","threshold":1}"#,
                "invalid direction 'up' for a market alert. Allowed: above, below",
            ),
            (
                r#"{"type":"market","exchange":"okx","number":"sentiment","direction":"above","threshold":101}"#,
                "threshold for sentiment must be from 0 to 100",
            ),
            // The perpetuals' numbers of decisions.md §17 and their ranges.
            (
                r#"{"type":"market","exchange":"okx","number":"funding","direction":"above","threshold":50.5}"#,
                "threshold for funding must be from -50 to 50",
            ),
            (
                r#"{"type":"market","exchange":"okx","number":"oiChange","direction":"below","threshold":-101}"#,
                "threshold for oiChange must be from -100 to 1000000",
            ),
            (
                r#"{"type":"market","exchange":"okx","number":"oiUsd","direction":"above","threshold":2e15}"#,
                "threshold for oiUsd must be from 0 to 1000000000000000",
            ),
            (
                r#"{"type":"market","exchange":"okx","number":"fundingHigh","direction":"above","threshold":-1}"#,
                "threshold for fundingHigh must be from 0 to 1000000",
            ),
            (
                r#"{"type":"density","exchange":"okx","min_usd":1,"repeat":true,"cooldown_s":86401}"#,
                "cooldown_s must be a whole number of seconds from 0 to 86400",
            ),
            (
                r#"{"type":"density","exchange":"okx","min_usd":1,"repeat":true,"cooldown_s":-1}"#,
                "cooldown_s must be a whole number of seconds from 0 to 86400",
            ),
            (
                r#"{"type":"density","exchange":"okx","symbol":"BTCUSDT","min_usd":1,"cooldown_s":60}"#,
                "cooldown_s is for a repeating alert (repeat: true)",
            ),
            (r#"{"type":"density","exchange":"okx","min_usd":1,"repeat":false}"#, UNIVERSE_REPEATS),
        ];
        for (body, message) in cases {
            let e = refused(body);
            assert!(e.message.starts_with(message), "{body}: {e:?}");
            assert_eq!(e.status, if message == "malformed JSON" { 400 } else { 422 }, "{body}");
        }
        let long = format!(r#"{{"type":"density","exchange":"okx","min_usd":1,"note":"{}"}}"#, "é".repeat(501));
        assert_eq!(refused(&long).message, "note is longer than 500 characters");
        assert_eq!(
            refused(r#"{"type":"market","exchange":"okx","number":"up5","direction":"above"}"#).message,
            "missing field 'threshold'"
        );
        assert_eq!(
            refused(r#"{"type":"density","exchange":"okx","repeat":1,"min_usd":1}"#).message,
            "field 'repeat' must be a boolean"
        );
    }
}
