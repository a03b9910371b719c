//! The alert API's request parsing and validation (`decisions.md` §4) and the Alert resource's
//! JSON, kept apart from HTTP so every rule is unit-tested with its exact message.
//!
//! Choices where the spec is silent: `pct` is kept to two decimals (0.125 becomes 0.13); a
//! field of the other alert type is refused only when present and not null; unknown fields are
//! ignored; `note` counts characters, not bytes.

use rampart_engine::alert::{Condition, Cross, Move, PCT_HUNDREDTHS_MAX, PCT_HUNDREDTHS_MIN};
use rampart_engine::{Price, Timeframe, Venue};
use serde_json::{Map, Value};

use crate::clock;
use crate::json::Json;
use crate::store::AlertRow;

/// Longest `note`, in characters.
pub const NOTE_CHARS_MAX: usize = 500;
/// Longest `webhook_url`, in characters.
pub const WEBHOOK_URL_CHARS_MAX: usize = 500;
/// Largest accepted price level.
const PRICE_MAX: f64 = 9.0e10;

/// A refused request: HTTP status and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// HTTP status (400 or 422).
    pub status: u16,
    /// The `error` message.
    pub message: String,
}

fn invalid(message: impl Into<String>) -> Invalid {
    Invalid { status: 422, message: message.into() }
}

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
}

impl CreateRequest {
    /// `price` or `pct`.
    pub fn kind(&self) -> &'static str {
        match self.condition {
            Condition::Price { .. } => "price",
            Condition::Pct { .. } => "pct",
        }
    }

    /// The direction as the API spells it.
    pub fn direction(&self) -> &'static str {
        match self.condition {
            Condition::Price { cross: Cross::Above, .. } => "above",
            Condition::Price { cross: Cross::Below, .. } => "below",
            Condition::Pct { dir: Move::Up, .. } => "up",
            Condition::Pct { dir: Move::Down, .. } => "down",
            Condition::Pct { dir: Move::Any, .. } => "any",
        }
    }
}

fn present<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

fn string<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, Invalid> {
    match present(obj, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("field '{name}' must be a string"))),
    }
}

fn required_string<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a str, Invalid> {
    string(obj, name)?.ok_or_else(|| invalid(format!("missing field '{name}'")))
}

fn number(obj: &Map<String, Value>, name: &str) -> Result<Option<f64>, Invalid> {
    match present(obj, name) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            n.as_f64().map(Some).ok_or_else(|| invalid(format!("field '{name}' must be a number")))
        }
        Some(_) => Err(invalid(format!("field '{name}' must be a number"))),
    }
}

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Parses and checks a `POST /v1/alerts` body.
pub fn parse_create(body: &[u8]) -> Result<CreateRequest, Invalid> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| Invalid { status: 400, message: format!("malformed JSON: {e}") })?;
    let Value::Object(obj) = value else {
        return Err(invalid("request body must be a JSON object"));
    };
    let kind = required_string(&obj, "type")?;
    if kind != "price" && kind != "pct" {
        return Err(invalid(format!("invalid type '{}'. Allowed: price, pct", clip(kind, 32))));
    }
    let direction = required_string(&obj, "direction")?;
    let symbol = required_string(&obj, "symbol")?;
    if symbol.is_empty() || symbol.len() > 64 || !symbol.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(invalid("field 'symbol' must be a pair symbol such as BTCUSDT"));
    }
    let condition = if kind == "price" {
        let cross = match direction {
            "above" => Cross::Above,
            "below" => Cross::Below,
            other => {
                return Err(invalid(format!(
                    "invalid direction '{}' for a price alert. Allowed: above, below",
                    clip(other, 32)
                )))
            }
        };
        for other in ["pct", "window"] {
            if present(&obj, other).is_some() {
                return Err(invalid(format!("field '{other}' is not allowed on a price alert")));
            }
        }
        let level = number(&obj, "price")?.ok_or_else(|| invalid("missing field 'price'"))?;
        if !(level > 0.0 && level < PRICE_MAX) {
            return Err(invalid("price must be a positive number"));
        }
        let level = Price::from_f64(level);
        if level.0 <= 0 {
            return Err(invalid("price must be a positive number"));
        }
        Condition::Price { cross, level }
    } else {
        let dir = match direction {
            "up" => Move::Up,
            "down" => Move::Down,
            "any" => Move::Any,
            other => {
                return Err(invalid(format!(
                    "invalid direction '{}' for a pct alert. Allowed: up, down, any",
                    clip(other, 32)
                )))
            }
        };
        if present(&obj, "price").is_some() {
            return Err(invalid("field 'price' is not allowed on a pct alert"));
        }
        let pct = number(&obj, "pct")?.ok_or_else(|| invalid("missing field 'pct'"))?;
        let hundredths = (pct * 100.0).round();
        if !(0.1..=500.0).contains(&pct)
            || hundredths < f64::from(PCT_HUNDREDTHS_MIN)
            || hundredths > f64::from(PCT_HUNDREDTHS_MAX)
        {
            return Err(invalid("pct must be between 0.1 and 500"));
        }
        let window = required_string(&obj, "window")?;
        let window = Timeframe::parse(window).ok_or_else(|| {
            invalid(format!("invalid window '{}'. Allowed: {}", clip(window, 32), Timeframe::ALLOWED))
        })?;
        Condition::Pct { dir, hundredths: hundredths as u32, window }
    };
    let repeat = match present(&obj, "repeat") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("field 'repeat' must be a boolean")),
    };
    let note = string(&obj, "note")?.unwrap_or("");
    if note.chars().count() > NOTE_CHARS_MAX {
        return Err(invalid(format!("note is longer than {NOTE_CHARS_MAX} characters")));
    }
    let webhook_url = match string(&obj, "webhook_url")? {
        None => None,
        Some(url) => {
            if url.chars().count() > WEBHOOK_URL_CHARS_MAX {
                return Err(invalid(format!("webhook_url is longer than {WEBHOOK_URL_CHARS_MAX} characters")));
            }
            check_url_syntax(url)?;
            Some(url.to_owned())
        }
    };
    let exchange = match string(&obj, "exchange")? {
        None => None,
        Some(e) => Some(
            Venue::parse(e)
                .ok_or_else(|| invalid(format!("invalid exchange '{}'. Allowed: {}", clip(e, 32), Venue::ALLOWED)))?,
        ),
    };
    Ok(CreateRequest {
        symbol: symbol.to_ascii_uppercase(),
        condition,
        repeat,
        note: note.to_owned(),
        webhook_url,
        exchange,
    })
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
pub fn parse_status(value: Option<&str>) -> Result<crate::store::StatusFilter, Invalid> {
    use crate::store::StatusFilter;
    match value {
        None | Some("active") => Ok(StatusFilter::Active),
        Some("triggered") => Ok(StatusFilter::Triggered),
        Some("all") => Ok(StatusFilter::All),
        Some(other) => Err(invalid(format!("invalid status '{}'. Allowed: active, triggered, all", clip(other, 32)))),
    }
}

/// Writes one Alert resource exactly as the spec names its fields.
pub fn write_alert(j: &mut Json, a: &AlertRow) {
    j.raw("{\"id\":").int(a.id);
    j.raw(",\"exchange\":").str(&a.exchange).raw(",\"symbol\":").str(&a.symbol);
    j.raw(",\"type\":").str(&a.kind).raw(",\"direction\":").str(&a.direction);
    j.raw(",\"price\":");
    match a.price {
        Some(p) => j.fixed(p),
        None => j.raw("null"),
    };
    j.raw(",\"pct\":");
    match a.pct_hundredths {
        Some(h) => j.fixed(h * 1_000_000),
        None => j.raw("null"),
    };
    j.raw(",\"window\":");
    match &a.window {
        Some(w) => j.str(w),
        None => j.raw("null"),
    };
    j.raw(",\"repeat\":").bool(a.repeat).raw(",\"note\":").str(&a.note);
    j.raw(",\"webhookUrl\":");
    match &a.webhook_url {
        Some(u) => j.str(u),
        None => j.raw("null"),
    };
    j.raw(",\"status\":").str(&a.status).raw(",\"createdPrice\":").fixed(a.created_price);
    j.raw(",\"lastTriggeredAt\":");
    match a.last_triggered_ms {
        Some(ms) => j.str(&clock::iso8601(ms)),
        None => j.raw("null"),
    };
    j.raw(",\"triggerCount\":").int(a.trigger_count);
    j.raw(",\"createdAt\":").str(&clock::iso8601(a.created_ms)).raw("}");
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

    #[test]
    fn valid_requests() {
        let r =
            parse_create(br#"{"symbol":"btcusdt","type":"price","direction":"above","price":100000.5}"#).expect("ok");
        assert_eq!(r.symbol, "BTCUSDT");
        assert_eq!(r.condition, Condition::Price { cross: Cross::Above, level: Price(10_000_050_000_000) });
        assert!(!r.repeat && r.note.is_empty() && r.webhook_url.is_none() && r.exchange.is_none());
        let r = parse_create(
            br#"{"symbol":"ETHUSDT","type":"pct","direction":"any","pct":2.5,"window":"1h","repeat":true,"note":"n","webhook_url":"https://example.com/h?s=1","exchange":"okx","extra":1}"#,
        )
        .expect("ok");
        assert_eq!(r.condition, Condition::Pct { dir: Move::Any, hundredths: 250, window: Timeframe::H1 });
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
        e422(r#"{"direction":"above","price":1,"symbol":"A"}"#, "missing field 'type'");
        e422(
            r#"{"type":"limit","direction":"above","price":1,"symbol":"A"}"#,
            "invalid type 'limit'. Allowed: price, pct",
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
        e422(r#"{"type":"price","direction":"above","price":1e300,"symbol":"A"}"#, "price must be a positive number");
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
        use crate::store::StatusFilter;
        assert_eq!(parse_status(None), Ok(StatusFilter::Active));
        assert_eq!(parse_status(Some("all")), Ok(StatusFilter::All));
        assert_eq!(
            parse_status(Some("done")),
            Err(Invalid { status: 422, message: "invalid status 'done'. Allowed: active, triggered, all".into() })
        );
    }

    #[test]
    fn alert_json_has_the_spec_field_names() {
        let row = AlertRow {
            id: 7,
            account_id: 1,
            exchange: "binance".into(),
            symbol: "BTCUSDT".into(),
            kind: "pct".into(),
            direction: "up".into(),
            price: None,
            pct_hundredths: Some(250),
            window: Some("1h".into()),
            repeat: true,
            note: "n".into(),
            webhook_url: None,
            status: "active".into(),
            created_price: 9_500_012_000_000,
            created_ms: 1_795_183_387_123,
            last_triggered_ms: None,
            trigger_count: 0,
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
        ] {
            assert!(keys.contains(&k), "{k} missing");
        }
        assert_eq!(v["pct"], 2.5);
        assert_eq!(v["price"], Value::Null);
        assert_eq!(v["createdPrice"], 95000.12);
        assert_eq!(v["createdAt"], "2026-11-20T14:03:07.123+00:00");
        assert_eq!(v["lastTriggeredAt"], Value::Null);
    }
}
