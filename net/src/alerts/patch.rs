//! `PATCH /v1/alerts/{id}` (`decisions.md` §16): what may change on an alert and how a change is
//! read. The condition (and every field it was made with besides these) is fixed: a field of
//! the create body that is not here is refused naming it (delete the alert and create another).
//! A body that changes nothing is refused too.

use serde_json::Value;

use crate::request::{body_object_fixed, invalid, present, string, Invalid, NOTE_CHARS_MAX};
use rampart_store::store::AlertChanges;

use super::lifecycle;
use super::request::{cooldown, expires_at, webhook_url, CREATE_FIELDS};

/// The fields a `PATCH /v1/alerts/{id}` body may have, in the order the 422 lists them.
pub const PATCH_FIELDS: [&str; 8] =
    ["note", "webhook_url", "paused", "expires_at", "cooldown_s", "max_fires", "message", "webhook_format"];

/// Parses and checks a change (the expiry's range and the webhook's address are rules, checked
/// after, as at create).
pub fn parse_patch(body: &[u8]) -> Result<AlertChanges, Invalid> {
    let fixed: Vec<&str> = CREATE_FIELDS.iter().copied().filter(|f| !PATCH_FIELDS.contains(f)).collect();
    let obj = body_object_fixed(body, &PATCH_FIELDS, &fixed)?;
    if obj.is_empty() {
        return Err(invalid(format!("the body changes nothing: send any of {}", PATCH_FIELDS.join(", "))));
    }
    let note = match obj.get("note") {
        None => None,
        Some(Value::Null) => Some(String::new()),
        Some(_) => {
            let note = string(&obj, "note")?.unwrap_or_default();
            if note.chars().count() > NOTE_CHARS_MAX {
                return Err(invalid(format!("note is longer than {NOTE_CHARS_MAX} characters")));
            }
            Some(note.to_owned())
        }
    };
    // `null` removes the webhook or the end; absent leaves it.
    let webhook_url = obj.contains_key("webhook_url").then(|| webhook_url(&obj)).transpose()?;
    let expires_ms = obj.contains_key("expires_at").then(|| expires_at(&obj)).transpose()?;
    let cooldown_s = match (obj.contains_key("cooldown_s"), present(&obj, "cooldown_s")) {
        (true, None) => return Err(invalid("cooldown_s cannot be null: 0 is no cooldown")),
        _ => cooldown(&obj)?,
    };
    // `null` removes the limit or the template.
    let max_fires = obj.contains_key("max_fires").then(|| lifecycle::max_fires(&obj)).transpose()?;
    let message = obj.contains_key("message").then(|| lifecycle::message(&obj)).transpose()?;
    Ok(AlertChanges {
        note,
        webhook_url,
        expires_ms,
        cooldown_s,
        paused: lifecycle::paused(&obj)?,
        max_fires,
        message,
        webhook_format: lifecycle::webhook_format(&obj)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> (u16, String) {
        match parse_patch(body.as_bytes()) {
            Ok(c) => panic!("accepted {body}: {c:?}"),
            Err(e) => (e.status, e.message),
        }
    }

    #[test]
    fn each_field_changes_alone_and_null_removes() {
        let c = parse_patch(br#"{"note":"new"}"#).expect("note");
        assert_eq!(c, AlertChanges { note: Some("new".into()), ..AlertChanges::default() });
        let c = parse_patch(br#"{"webhook_url":null,"expires_at":null,"note":null}"#).expect("nulls");
        assert_eq!((c.webhook_url, c.expires_ms, c.note), (Some(None), Some(None), Some(String::new())));
        let c = parse_patch(
            br#"{"webhook_url":"https://example.com/h","cooldown_s":60,"expires_at":"2026-12-01T00:00:00Z"}"#,
        )
        .expect("all");
        assert_eq!(c.webhook_url, Some(Some("https://example.com/h".into())));
        assert_eq!((c.cooldown_s, c.expires_ms), (Some(60), Some(Some(1_796_083_200_000))));
        let c = parse_patch(br#"{"paused":true,"max_fires":null,"message":"{{symbol}}","webhook_format":"discord"}"#)
            .expect("lifecycle");
        assert_eq!((c.paused, c.max_fires), (Some(true), Some(None)));
        assert_eq!(c.message, Some(Some("{{symbol}}".into())));
        assert_eq!(c.webhook_format, Some(rampart_store::store::WebhookFormat::Discord));
        let c = parse_patch(br#"{"message":null,"max_fires":3}"#).expect("remove the template");
        assert_eq!((c.message, c.max_fires), (Some(None), Some(Some(3))));
    }

    #[test]
    fn conditions_are_fixed_and_every_bad_value_is_named() {
        for (body, message) in [
            (r#"{"price":5}"#, "field 'price' cannot change: delete the alert and create another"),
            (r#"{"type":"pct"}"#, "field 'type' cannot change: delete the alert and create another"),
            (r#"{"symbol":"ETHUSDT","note":"x"}"#, "field 'symbol' cannot change: delete the alert and create another"),
            (r#"{"repeat":true}"#, "field 'repeat' cannot change: delete the alert and create another"),
            (
                r#"{"pause":true}"#,
                "unknown field 'pause'. Allowed: note, webhook_url, paused, expires_at, cooldown_s, max_fires, message, webhook_format",
            ),
            (
                r#"{}"#,
                "the body changes nothing: send any of note, webhook_url, paused, expires_at, cooldown_s, max_fires, message, webhook_format",
            ),
            (r#"{"paused":"yes"}"#, "field 'paused' must be true or false"),
            (r#"{"max_fires":0}"#, "max_fires must be a whole number from 1 to 1000, or null"),
            (r#"{"webhook_format":"xml"}"#, "invalid webhook_format 'xml'. Allowed: json, discord, slack"),
            (r#"{"cooldown_s":null}"#, "cooldown_s cannot be null: 0 is no cooldown"),
            (r#"{"cooldown_s":86401}"#, "cooldown_s must be a whole number of seconds from 0 to 86400"),
            (r#"{"note":7}"#, "field 'note' must be a string"),
            (r#"{"webhook_url":"ftp://x"}"#, "webhook_url must be an absolute http or https URL"),
            (
                r#"{"expires_at":"soon"}"#,
                "invalid expires_at 'soon': an ISO 8601 date-time with its offset, such as 2026-12-01T00:00:00Z",
            ),
            ("[1]", "request body must be a JSON object"),
        ] {
            assert_eq!(refused(body), (422, message.to_owned()), "{body}");
        }
        assert_eq!(refused("{").0, 400);
        let long = format!(r#"{{"note":"{}"}}"#, "x".repeat(NOTE_CHARS_MAX + 1));
        assert_eq!(refused(&long).1, format!("note is longer than {NOTE_CHARS_MAX} characters"));
    }
}
