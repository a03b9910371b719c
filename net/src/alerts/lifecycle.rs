//! The fields of an alert's lifecycle and destinations (`decisions.md` §16) as a create or a
//! change reads them: `paused`, `max_fires`, `message` (a template whose placeholders are
//! checked here) and `webhook_format`. `null` is "none" for `max_fires` and `message`.

use serde_json::{Map, Value};

use crate::request::{invalid, number, string, Invalid};
use rampart_store::store::{AlertChanges, AlertRow, AlertStatus, WebhookFormat};
use rampart_store::text::chat::check_template;

/// Largest `max_fires`.
pub const MAX_FIRES_MAX: u32 = 1_000;

/// `paused`: `None` when absent; a 422 when null or not a boolean.
pub fn paused(obj: &Map<String, Value>) -> Result<Option<bool>, Invalid> {
    match obj.get("paused") {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(invalid("field 'paused' must be true or false")),
    }
}

/// `max_fires`, 1 to [`MAX_FIRES_MAX`]; `None` when absent or null (no limit).
pub fn max_fires(obj: &Map<String, Value>) -> Result<Option<u32>, Invalid> {
    let Some(n) = number(obj, "max_fires")? else { return Ok(None) };
    let m = n.as_u64().filter(|v| (1..=u64::from(MAX_FIRES_MAX)).contains(v)).and_then(|v| u32::try_from(v).ok());
    m.map(Some).ok_or_else(|| invalid(format!("max_fires must be a whole number from 1 to {MAX_FIRES_MAX}, or null")))
}

/// `message`, its placeholders checked; `None` when absent or null (the default text).
pub fn message(obj: &Map<String, Value>) -> Result<Option<String>, Invalid> {
    let Some(m) = string(obj, "message")? else { return Ok(None) };
    check_template(m).map_err(|e| invalid(e.0))?;
    Ok(Some(m.to_owned()))
}

/// `webhook_format`; `None` when absent (a 422 when null: `json` is the default's name).
pub fn webhook_format(obj: &Map<String, Value>) -> Result<Option<WebhookFormat>, Invalid> {
    let allowed = || WebhookFormat::ALL.map(WebhookFormat::as_str).join(", ");
    match (obj.contains_key("webhook_format"), string(obj, "webhook_format")?) {
        (false, _) => Ok(None),
        (true, None) => Err(invalid(format!("webhook_format cannot be null. Allowed: {}", allowed()))),
        (true, Some(f)) => WebhookFormat::parse(f).map(Some).ok_or_else(|| {
            invalid(format!("invalid webhook_format '{}'. Allowed: {}", crate::request::clip(f, 32), allowed()))
        }),
    }
}

/// A limit of firings a one-shot alert cannot take: `repeat: false` is `max_fires: 1`.
pub fn check_max_fires_of_one_shot(repeat: bool, max_fires: Option<u32>) -> Result<(), Invalid> {
    match max_fires {
        Some(n) if !repeat && n > 1 => {
            Err(invalid("max_fires above 1 needs repeat: true (an alert with repeat: false fires once)"))
        }
        _ => Ok(()),
    }
}

/// The rules of a change that depend on the alert as it is: a limit above its firings so far
/// and not above 1 for a one-shot; no pause or resume of an alert that has ended.
pub fn check_change(alert: &AlertRow, changes: &AlertChanges) -> Result<(), Invalid> {
    if let Some(Some(n)) = changes.max_fires {
        check_max_fires_of_one_shot(alert.repeat, Some(n))?;
        if i64::from(n) <= alert.trigger_count {
            return Err(invalid(format!(
                "max_fires {n} is not above the {} firings the alert has made",
                alert.trigger_count
            )));
        }
    }
    if changes.paused.is_some() && alert.status == AlertStatus::Triggered {
        return Err(invalid("the alert has ended (status triggered): it cannot be paused or resumed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).expect("object")
    }

    #[test]
    fn each_field_reads_its_values_and_names_each_bad_one() {
        assert_eq!(paused(&obj(r#"{"paused":true}"#)), Ok(Some(true)));
        assert_eq!(paused(&obj("{}")), Ok(None));
        assert_eq!(
            paused(&obj(r#"{"paused":null}"#)).map_err(|e| e.message),
            Err("field 'paused' must be true or false".into())
        );
        assert_eq!(max_fires(&obj(r#"{"max_fires":2}"#)), Ok(Some(2)));
        assert_eq!(max_fires(&obj(r#"{"max_fires":null}"#)), Ok(None));
        for bad in ["0", "1001", "1.5", "-1"] {
            let e = max_fires(&obj(&format!(r#"{{"max_fires":{bad}}}"#))).expect_err(bad);
            assert_eq!(e.message, "max_fires must be a whole number from 1 to 1000, or null");
        }
        assert_eq!(message(&obj(r#"{"message":"{{symbol}} up"}"#)), Ok(Some("{{symbol}} up".into())));
        let e = message(&obj(r#"{"message":"{{sym}}"}"#)).expect_err("placeholder");
        assert!(e.message.starts_with("unknown placeholder '{{sym}}' in message"), "{}", e.message);
        assert_eq!(webhook_format(&obj(r#"{"webhook_format":"slack"}"#)), Ok(Some(WebhookFormat::Slack)));
        assert_eq!(
            webhook_format(&obj(r#"{"webhook_format":"teams"}"#)).map_err(|e| e.message),
            Err("invalid webhook_format 'teams'. Allowed: json, discord, slack".into())
        );
        assert_eq!(
            webhook_format(&obj(r#"{"webhook_format":null}"#)).map_err(|e| e.message),
            Err("webhook_format cannot be null. Allowed: json, discord, slack".into())
        );
        assert!(check_max_fires_of_one_shot(false, Some(1)).is_ok());
        assert!(check_max_fires_of_one_shot(false, Some(2)).is_err());
        assert!(check_max_fires_of_one_shot(true, Some(2)).is_ok());
    }
}
