//! The alert API's request parsing and validation (`decisions.md` §4), kept apart from HTTP so
//! every rule is unit-tested with its exact message.
//!
//! Choices where the spec is silent: values are kept exactly as sent, never rounded: `price`
//! with up to 8 decimal places (the finest tick any of the four venues lists is 0.00000001) and
//! `pct` with up to 6; a value with more decimals, or outside the range, is refused with a
//! message that says which (values are read from the JSON number's shortest round-trip
//! spelling, so up to 15 significant digits arrive exactly); a field of the other alert type is
//! refused only when present and not null; a field the endpoint does not know is refused with
//! 422 naming it (`decisions.md` §11: `webhookUrl`, the response's spelling, must not silently
//! create an alert without a webhook); `note` counts characters, not bytes.

use rampart_engine::alert::{Condition, Cross, Move, PCT_MILLIONTHS_MAX, PCT_MILLIONTHS_MIN};
use rampart_engine::{Price, Timeframe, Venue};

use crate::request::{body_object, clip, invalid, number, present, repeat_and_note, required_string, string};
use crate::request::{symbol_syntax, Invalid, COOLDOWN_S_MAX, UNIVERSE_REPEATS};
use serde_json::{Map, Value};

use super::decimal::{exact, Fit};
use super::{derivatives, lifecycle, structure};
use rampart_store::store::WebhookFormat;

/// Longest `webhook_url`, in characters.
pub const WEBHOOK_URL_CHARS_MAX: usize = 500;
/// Prices above this are refused (fixed-point prices are `i64` in units of 10^-8).
const PRICE_MAX_UNITS: i64 = 9_000_000_000_000_000_000;
/// Decimal places a price level may have.
const PRICE_DECIMALS: u32 = 8;
/// Decimal places a pct threshold may have.
const PCT_DECIMALS: u32 = 6;

/// A create request whose fields are well-formed (market and plan rules come after).
#[derive(Clone, Debug, PartialEq)]
pub struct CreateRequest {
    /// Symbol as given, uppercased.
    pub symbol: String,
    /// The condition.
    pub condition: Condition,
    /// Repeating.
    pub repeat: bool,
    /// Label (empty when absent).
    pub note: String,
    /// Webhook target, syntax-checked.
    pub webhook_url: Option<String>,
    /// Venue, when given.
    pub exchange: Option<Venue>,
    /// When it ends by itself (`expires_at`), Unix milliseconds; its range is a rule
    /// (`rules::check_expiry`).
    pub expires_ms: Option<i64>,
    /// The least time between two firings (`cooldown_s`), seconds; 0 unless given, or
    /// [`UNIVERSE_COOLDOWN_S`] for a `*` alert.
    pub cooldown_s: u32,
    /// Firings after which it ends (`max_fires`); `None`: no limit.
    pub max_fires: Option<u32>,
    /// Its text's template (`message`), placeholders checked.
    pub message: Option<String>,
    /// Its webhook's body (`webhook_format`; `json` unless given).
    pub webhook_format: WebhookFormat,
}

pub use rampart_state::partition::UNIVERSE;
/// A `*` alert's cooldown per pair when none is given, seconds (`decisions.md` §15).
pub const UNIVERSE_COOLDOWN_S: u32 = 900;

impl CreateRequest {
    /// True for a `*` alert: every pair of its venue.
    pub fn universe(&self) -> bool {
        self.symbol == UNIVERSE
    }

    /// `price` or `pct`.
    pub fn kind(&self) -> &'static str {
        self.condition.kind()
    }

    /// The direction as the API spells it.
    pub fn direction(&self) -> &'static str {
        self.condition.direction()
    }
}

/// The price level, exactly as sent, in units of 10^-8.
fn price_level(n: &serde_json::Number) -> Result<Price, Invalid> {
    match exact(n, PRICE_DECIMALS, PRICE_MAX_UNITS) {
        Ok(units) => Ok(Price(units)),
        Err(Fit::NotPositive) => Err(invalid("price must be a positive number")),
        Err(Fit::TooLarge) => Err(invalid("price must be at most 90000000000")),
        Err(Fit::TooPrecise) if n.as_f64().is_some_and(|v| v < 1e-8) => {
            Err(invalid("price must be at least 0.00000001"))
        }
        Err(Fit::TooPrecise) => {
            Err(invalid("price has more than 8 decimal places (the finest price step on any venue is 0.00000001)"))
        }
    }
}

/// The pct threshold, exactly as sent, in millionths of a percent.
fn pct_threshold(n: &serde_json::Number) -> Result<u32, Invalid> {
    let range = || invalid("pct must be between 0.1 and 500");
    match exact(n, PCT_DECIMALS, i64::from(PCT_MILLIONTHS_MAX)) {
        Ok(m) if m >= i64::from(PCT_MILLIONTHS_MIN) => u32::try_from(m).map_err(|_| range()),
        Ok(_) | Err(Fit::NotPositive | Fit::TooLarge) => Err(range()),
        Err(Fit::TooPrecise) if n.as_f64().is_some_and(|v| v < 0.1) => Err(range()),
        Err(Fit::TooPrecise) => Err(invalid("pct has more than 6 decimal places")),
    }
}

/// The fields a `POST /v1/alerts` body may have, in the order the 422 lists them.
pub const CREATE_FIELDS: [&str; 24] = [
    "symbol",
    "exchange",
    "type",
    "direction",
    "price",
    "pct",
    "window",
    "event",
    "within_pct",
    "min_strength",
    "timeframes",
    "min_usd",
    "min_ratio",
    "max_dist_pct",
    "min_age_s",
    "funding_pct",
    "repeat",
    "note",
    "webhook_url",
    "expires_at",
    "cooldown_s",
    "max_fires",
    "message",
    "webhook_format",
];

/// The alert types `POST /v1/alerts` takes.
pub const TYPES_ALLOWED: &str = "price, pct, level, wall, liquidations, oi, funding";

/// Parses and checks a `POST /v1/alerts` body.
pub fn parse_create(body: &[u8]) -> Result<CreateRequest, Invalid> {
    let obj = body_object(body, &CREATE_FIELDS)?;
    let kind = required_string(&obj, "type")?;
    if !["price", "pct", "level", "wall"].contains(&kind) && !derivatives::is_derivatives(kind) {
        return Err(invalid(format!("invalid type '{}'. Allowed: {TYPES_ALLOWED}", clip(kind, 32))));
    }
    // A structure alert's direction is optional (`any`), and a liquidations alert's; the spec's
    // types require theirs, and `oi` and `funding` (checked with their fields).
    let structure = kind == "level" || kind == "wall" || derivatives::is_derivatives(kind);
    let direction = if structure { string(&obj, "direction")? } else { Some(required_string(&obj, "direction")?) };
    let symbol = required_string(&obj, "symbol")?;
    let universe = symbol == UNIVERSE;
    if !universe {
        symbol_syntax(symbol)?;
    }
    let condition = if kind == "level" {
        structure::level_condition(&obj, direction)?
    } else if kind == "wall" {
        structure::wall_condition(&obj, direction)?
    } else if derivatives::is_derivatives(kind) {
        derivatives::perp_condition(&obj, kind, direction)?
    } else {
        structure::refuse_structure_fields(&obj, kind)?;
        spec_condition(&obj, kind, direction.unwrap_or_default())?
    };
    let (mut repeat, note) = repeat_and_note(&obj)?;
    if universe {
        universe_rules(&obj, kind)?;
        repeat = true;
    }
    let webhook_url = webhook_url(&obj)?;
    let exchange = match string(&obj, "exchange")? {
        None => None,
        Some(e) => Some(
            Venue::parse(e)
                .ok_or_else(|| invalid(format!("invalid exchange '{}'. Allowed: {}", clip(e, 32), Venue::ALLOWED)))?,
        ),
    };
    let expires_ms = expires_at(&obj)?;
    let cooldown_s = match cooldown(&obj)? {
        None if universe => UNIVERSE_COOLDOWN_S,
        None => 0,
        Some(c) => c,
    };
    let max_fires = lifecycle::max_fires(&obj)?;
    lifecycle::check_max_fires_of_one_shot(repeat, max_fires)?;
    Ok(CreateRequest {
        cooldown_s,
        max_fires,
        message: lifecycle::message(&obj)?,
        webhook_format: lifecycle::webhook_format(&obj)?.unwrap_or_default(),
        symbol: symbol.to_ascii_uppercase(),
        condition,
        repeat,
        note,
        webhook_url,
        exchange,
        expires_ms,
    })
}

/// `webhook_url`, syntax-checked; `None` when absent (or null).
pub fn webhook_url(obj: &Map<String, Value>) -> Result<Option<String>, Invalid> {
    let Some(url) = string(obj, "webhook_url")? else { return Ok(None) };
    if url.chars().count() > WEBHOOK_URL_CHARS_MAX {
        return Err(invalid(format!("webhook_url is longer than {WEBHOOK_URL_CHARS_MAX} characters")));
    }
    check_url_syntax(url)?;
    Ok(Some(url.to_owned()))
}

/// `expires_at` as Unix milliseconds; `None` when absent (or null). Its range is a rule
/// (`rules::check_expiry`).
pub fn expires_at(obj: &Map<String, Value>) -> Result<Option<i64>, Invalid> {
    let Some(t) = string(obj, "expires_at")? else { return Ok(None) };
    let at = rampart_state::clock::parse_iso8601(t).ok_or_else(|| {
        invalid(format!(
            "invalid expires_at '{}': an ISO 8601 date-time with its offset, such as 2026-12-01T00:00:00Z",
            clip(t, 40)
        ))
    })?;
    Ok(Some(at))
}

/// `cooldown_s`, 0 to [`COOLDOWN_S_MAX`]; `None` when absent (or null).
pub fn cooldown(obj: &Map<String, Value>) -> Result<Option<u32>, Invalid> {
    let Some(n) = number(obj, "cooldown_s")? else { return Ok(None) };
    let c = n.as_u64().filter(|v| *v <= COOLDOWN_S_MAX).and_then(|v| u32::try_from(v).ok());
    c.map(Some)
        .ok_or_else(|| invalid(format!("cooldown_s must be a whole number of seconds from 0 to {COOLDOWN_S_MAX}")))
}

/// What a `*` alert must be (`decisions.md` §15): of a type that is not tied to one pair's
/// price, on one named venue.
fn universe_rules(obj: &Map<String, Value>, kind: &str) -> Result<(), Invalid> {
    if kind == "price" {
        return Err(invalid(
            "symbol '*' (every pair of the venue) is allowed for pct, level, wall, liquidations, oi and funding alerts, not price",
        ));
    }
    if string(obj, "exchange")?.is_none() {
        return Err(invalid("symbol '*' (every pair of the venue) needs field 'exchange'"));
    }
    // A `*` alert repeats (`decisions.md` §15's choices): one that ended at its first pair
    // would be a one-pair alert.
    if present(obj, "repeat") == Some(&Value::Bool(false)) {
        return Err(invalid(UNIVERSE_REPEATS));
    }
    Ok(())
}

/// A price or pct alert's condition (the interface spec's types).
fn spec_condition(obj: &Map<String, Value>, kind: &str, direction: &str) -> Result<Condition, Invalid> {
    let condition = if kind == "price" {
        let cross = Cross::parse(direction).ok_or_else(|| {
            invalid(format!("invalid direction '{}' for a price alert. Allowed: above, below", clip(direction, 32)))
        })?;
        for other in ["pct", "window"] {
            if present(obj, other).is_some() {
                return Err(invalid(format!("field '{other}' is not allowed on a price alert")));
            }
        }
        let level = price_level(number(obj, "price")?.ok_or_else(|| invalid("missing field 'price'"))?)?;
        Condition::Price { cross, level }
    } else {
        let dir = Move::parse(direction).ok_or_else(|| {
            invalid(format!("invalid direction '{}' for a pct alert. Allowed: up, down, any", clip(direction, 32)))
        })?;
        if present(obj, "price").is_some() {
            return Err(invalid("field 'price' is not allowed on a pct alert"));
        }
        let millionths = pct_threshold(number(obj, "pct")?.ok_or_else(|| invalid("missing field 'pct'"))?)?;
        let window = required_string(obj, "window")?;
        let window = Timeframe::parse(window).ok_or_else(|| {
            invalid(format!("invalid window '{}'. Allowed: {}", clip(window, 32), Timeframe::ALLOWED))
        })?;
        Condition::Pct { dir, millionths, window }
    };
    Ok(condition)
}

/// The URL must be absolute `http` or `https` with a host and no whitespace or control bytes.
fn check_url_syntax(url: &str) -> Result<(), Invalid> {
    let bad = || invalid("webhook_url must be an absolute http or https URL");
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| {
            let lower = url.get(..8).map(str::to_ascii_lowercase);
            match lower.as_deref() {
                Some("https://") => url.get(8..),
                _ => match url.get(..7).map(str::to_ascii_lowercase).as_deref() {
                    Some("http://") => url.get(7..),
                    _ => None,
                },
            }
        })
        .ok_or_else(bad)?;
    if url.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad());
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(bad());
    }
    Ok(())
}

/// Parses the `status` filter of `GET /v1/alerts`.
pub fn parse_status(value: Option<&str>) -> Result<rampart_store::store::StatusFilter, Invalid> {
    use rampart_store::store::StatusFilter;
    match value {
        None | Some("active") => Ok(StatusFilter::Active),
        Some("triggered") => Ok(StatusFilter::Triggered),
        Some("all") => Ok(StatusFilter::All),
        Some(other) => Err(invalid(format!("invalid status '{}'. Allowed: active, triggered, all", clip(other, 32)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> (u16, String) {
        match parse_create(body.as_bytes()) {
            Ok(r) => panic!("accepted {body}: {r:?}"),
            Err(e) => (e.status, e.message),
        }
    }

    fn e422(body: &str, message: &str) {
        assert_eq!(err(body), (422, message.to_owned()), "{body}");
    }

    /// Values arrive exactly as the client wrote them, in every spelling JSON allows.
    #[test]
    fn values_are_kept_exactly() {
        let level = |text: &str| {
            let body = format!(r#"{{"type":"price","direction":"above","price":{text},"symbol":"A"}}"#);
            match parse_create(body.as_bytes()).map(|r| r.condition) {
                Ok(Condition::Price { level, .. }) => level.0,
                other => panic!("{text}: {other:?}"),
            }
        };
        assert_eq!(level("0.00002698"), 2_698);
        assert_eq!(level("2.698e-5"), 2_698);
        assert_eq!(level("0.00000001"), 1);
        assert_eq!(level("1E+3"), 100_000_000_000);
        assert_eq!(level("90000000000"), 9_000_000_000_000_000_000);
        assert_eq!(level("0.1"), 10_000_000);
        assert_eq!(level("64321.12345678"), 6_432_112_345_678);
        let pct = |text: &str| {
            let body = format!(r#"{{"type":"pct","direction":"up","pct":{text},"window":"1h","symbol":"A"}}"#);
            match parse_create(body.as_bytes()).map(|r| r.condition) {
                Ok(Condition::Pct { millionths, .. }) => millionths,
                other => panic!("{text}: {other:?}"),
            }
        };
        assert_eq!(pct("2.125"), 2_125_000);
        assert_eq!(pct("3.004"), 3_004_000);
        assert_eq!(pct("0.1"), 100_000);
        assert_eq!(pct("500"), 500_000_000);
        assert_eq!(pct("1.234567"), 1_234_567);
    }

    #[test]
    fn valid_requests() {
        let r =
            parse_create(br#"{"symbol":"btcusdt","type":"price","direction":"above","price":100000.5}"#).expect("ok");
        assert_eq!(r.symbol, "BTCUSDT");
        assert_eq!(r.condition, Condition::Price { cross: Cross::Above, level: Price(10_000_050_000_000) });
        assert!(!r.repeat && r.note.is_empty() && r.webhook_url.is_none() && r.exchange.is_none());
        let r = parse_create(
            br#"{"symbol":"ETHUSDT","type":"pct","direction":"any","pct":2.5,"window":"1h","repeat":true,"note":"n","webhook_url":"https://example.com/h?s=1","exchange":"okx"}"#,
        )
        .expect("ok");
        assert_eq!(r.condition, Condition::Pct { dir: Move::Any, millionths: 2_500_000, window: Timeframe::H1 });
        assert_eq!((r.repeat, r.exchange, r.kind(), r.direction()), (true, Some(Venue::Okx), "pct", "any"));
        // Nulls count as absent.
        parse_create(br#"{"symbol":"A","type":"price","direction":"below","price":1,"pct":null,"window":null,"note":null,"webhook_url":null}"#)
            .expect("nulls");
    }

    #[test]
    fn malformed_json_is_400() {
        assert_eq!(err("{").0, 400);
        assert!(err("{").1.starts_with("malformed JSON: "));
        assert_eq!(err("").0, 400);
        assert_eq!(err("[1,2]"), (422, "request body must be a JSON object".into()));
    }

    #[test]
    fn the_validation_matrix() {
        e422(
            r#"{"type":"price","direction":"above","price":1,"symbol":"A","webhookUrl":"https://x.example.com/h"}"#,
            "unknown field 'webhookUrl'. Allowed: symbol, exchange, type, direction, price, pct, window, event, within_pct, min_strength, timeframes, min_usd, min_ratio, max_dist_pct, min_age_s, funding_pct, repeat, note, webhook_url, expires_at, cooldown_s, max_fires, message, webhook_format",
        );
        e422(
            r#"{"type":"price","direction":"above","price":1,"symbol":"A","extra":null}"#,
            "unknown field 'extra'. Allowed: symbol, exchange, type, direction, price, pct, window, event, within_pct, min_strength, timeframes, min_usd, min_ratio, max_dist_pct, min_age_s, funding_pct, repeat, note, webhook_url, expires_at, cooldown_s, max_fires, message, webhook_format",
        );
        let r = parse_create(br#"{"type":"price","direction":"above","price":1,"symbol":"a","exchange":"OKX"}"#);
        assert_eq!(r.map(|r| r.exchange), Ok(Some(Venue::Okx)), "exchange is case-insensitive");
        e422(r#"{"direction":"above","price":1,"symbol":"A"}"#, "missing field 'type'");
        e422(
            r#"{"type":"limit","direction":"above","price":1,"symbol":"A"}"#,
            "invalid type 'limit'. Allowed: price, pct, level, wall, liquidations, oi, funding",
        );
        e422(r#"{"type":5,"direction":"above","price":1,"symbol":"A"}"#, "field 'type' must be a string");
        e422(r#"{"type":"price","price":1,"symbol":"A"}"#, "missing field 'direction'");
        e422(
            r#"{"type":"price","direction":"up","price":1,"symbol":"A"}"#,
            "invalid direction 'up' for a price alert. Allowed: above, below",
        );
        e422(
            r#"{"type":"pct","direction":"above","pct":1,"window":"1h","symbol":"A"}"#,
            "invalid direction 'above' for a pct alert. Allowed: up, down, any",
        );
        e422(r#"{"type":"price","direction":"above","price":1}"#, "missing field 'symbol'");
        e422(r#"{"type":"price","direction":"above","price":1,"symbol":7}"#, "field 'symbol' must be a string");
        e422(
            r#"{"type":"price","direction":"above","price":1,"symbol":"BTC-USDT"}"#,
            "field 'symbol' must be a pair symbol such as BTCUSDT",
        );
        e422(r#"{"type":"price","direction":"above","symbol":"A"}"#, "missing field 'price'");
        e422(r#"{"type":"price","direction":"above","price":"1","symbol":"A"}"#, "field 'price' must be a number");
        e422(r#"{"type":"price","direction":"above","price":0,"symbol":"A"}"#, "price must be a positive number");
        e422(r#"{"type":"price","direction":"above","price":-3,"symbol":"A"}"#, "price must be a positive number");
        e422(r#"{"type":"price","direction":"above","price":1e300,"symbol":"A"}"#, "price must be at most 90000000000");
        e422(
            r#"{"type":"price","direction":"above","price":90000000001,"symbol":"A"}"#,
            "price must be at most 90000000000",
        );
        e422(r#"{"type":"price","direction":"above","price":1e-9,"symbol":"A"}"#, "price must be at least 0.00000001");
        e422(
            r#"{"type":"price","direction":"above","price":0.0000269804,"symbol":"A"}"#,
            "price has more than 8 decimal places (the finest price step on any venue is 0.00000001)",
        );
        e422(
            r#"{"type":"pct","direction":"up","pct":2.1234567,"window":"1h","symbol":"A"}"#,
            "pct has more than 6 decimal places",
        );
        e422(
            r#"{"type":"pct","direction":"up","pct":0.0999999,"window":"1h","symbol":"A"}"#,
            "pct must be between 0.1 and 500",
        );
        e422(
            r#"{"type":"pct","direction":"up","pct":500.000001,"window":"1h","symbol":"A"}"#,
            "pct must be between 0.1 and 500",
        );
        e422(
            r#"{"type":"price","direction":"above","price":1,"pct":2,"symbol":"A"}"#,
            "field 'pct' is not allowed on a price alert",
        );
        e422(
            r#"{"type":"price","direction":"above","price":1,"window":"1h","symbol":"A"}"#,
            "field 'window' is not allowed on a price alert",
        );
        e422(
            r#"{"type":"pct","direction":"up","price":1,"pct":1,"window":"1h","symbol":"A"}"#,
            "field 'price' is not allowed on a pct alert",
        );
        e422(r#"{"type":"pct","direction":"up","window":"1h","symbol":"A"}"#, "missing field 'pct'");
        e422(
            r#"{"type":"pct","direction":"up","pct":0.09,"window":"1h","symbol":"A"}"#,
            "pct must be between 0.1 and 500",
        );
        e422(
            r#"{"type":"pct","direction":"up","pct":500.01,"window":"1h","symbol":"A"}"#,
            "pct must be between 0.1 and 500",
        );
        e422(
            r#"{"type":"pct","direction":"up","pct":true,"window":"1h","symbol":"A"}"#,
            "field 'pct' must be a number",
        );
        e422(r#"{"type":"pct","direction":"up","pct":1,"symbol":"A"}"#, "missing field 'window'");
        e422(
            r#"{"type":"pct","direction":"up","pct":1,"window":"2h","symbol":"A"}"#,
            "invalid window '2h'. Allowed: 5m, 15m, 1h, 4h, 1d, 1w",
        );
        e422(
            r#"{"type":"price","direction":"above","price":1,"symbol":"A","repeat":"yes"}"#,
            "field 'repeat' must be a boolean",
        );
        e422(
            r#"{"type":"price","direction":"above","price":1,"symbol":"A","note":5}"#,
            "field 'note' must be a string",
        );
        let long = "x".repeat(501);
        e422(
            &format!(r#"{{"type":"price","direction":"above","price":1,"symbol":"A","note":"{long}"}}"#),
            "note is longer than 500 characters",
        );
        let ok = "é".repeat(500);
        parse_create(
            format!(r#"{{"type":"price","direction":"above","price":1,"symbol":"A","note":"{ok}"}}"#).as_bytes(),
        )
        .expect("500 characters are fine");
        e422(
            r#"{"type":"price","direction":"above","price":1,"symbol":"A","webhook_url":3}"#,
            "field 'webhook_url' must be a string",
        );
        let url = format!("https://example.com/{}", "a".repeat(481));
        e422(
            &format!(r#"{{"type":"price","direction":"above","price":1,"symbol":"A","webhook_url":"{url}"}}"#),
            "webhook_url is longer than 500 characters",
        );
        for bad in [
            "ftp://example.com/x",
            "example.com/hook",
            "https://",
            "http:///path",
            "https://exa mple.com/",
            "javascript:alert(1)",
        ] {
            e422(
                &format!(r#"{{"type":"price","direction":"above","price":1,"symbol":"A","webhook_url":"{bad}"}}"#),
                "webhook_url must be an absolute http or https URL",
            );
        }
        e422(
            r#"{"type":"price","direction":"above","price":1,"symbol":"A","exchange":"kraken"}"#,
            "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget",
        );
    }

    #[test]
    fn status_filter() {
        use rampart_store::store::StatusFilter;
        assert_eq!(parse_status(None), Ok(StatusFilter::Active));
        assert_eq!(parse_status(Some("all")), Ok(StatusFilter::All));
        assert_eq!(
            parse_status(Some("done")),
            Err(Invalid { status: 422, message: "invalid status 'done'. Allowed: active, triggered, all".into() })
        );
    }

    #[test]
    fn a_universe_alert_is_pct_level_or_wall_on_a_named_venue() {
        let ok =
            parse_create(br#"{"symbol":"*","exchange":"binance","type":"pct","direction":"up","pct":3,"window":"1h"}"#)
                .expect("pct *");
        assert!(ok.universe() && ok.repeat, "a `*` alert repeats without being told");
        assert_eq!(ok.cooldown_s, UNIVERSE_COOLDOWN_S, "the default cooldown of a * alert");
        let own = parse_create(br#"{"symbol":"*","exchange":"okx","type":"level","event":"break","cooldown_s":0}"#)
            .expect("level *");
        assert_eq!((own.cooldown_s, own.exchange), (0, Some(Venue::Okx)));
        let one = parse_create(br#"{"symbol":"BTCUSDT","type":"level","event":"break"}"#).expect("one pair");
        assert_eq!((one.universe(), one.cooldown_s, one.repeat), (false, 0, false));
        for (body, message) in [
            (
                r#"{"symbol":"*","exchange":"binance","type":"price","direction":"above","price":1}"#,
                "symbol '*' (every pair of the venue) is allowed for pct, level, wall, liquidations, oi and funding alerts, not price",
            ),
            (
                r#"{"symbol":"*","type":"wall","event":"pulled"}"#,
                "symbol '*' (every pair of the venue) needs field 'exchange'",
            ),
            (
                r#"{"symbol":"**","type":"wall","event":"pulled"}"#,
                "field 'symbol' must be a pair symbol such as BTCUSDT",
            ),
            (r#"{"symbol":"*","exchange":"okx","type":"level","event":"break","repeat":false}"#, UNIVERSE_REPEATS),
        ] {
            assert_eq!(err(body), (422, message.to_owned()), "{body}");
        }
    }
}
