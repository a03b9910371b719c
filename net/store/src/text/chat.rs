//! An alert's own text (`message`, `decisions.md` §16): the template's placeholders, checked
//! when an alert is made or changed and filled at each firing; the chat services' webhook bodies
//! (Discord, Slack) that carry it. Without a template the text is the Telegram sentence of the
//! firing ([`telegram::firing_text`]).

use rampart_engine::alert::Condition;

use super::telegram::{self, fixed, usd_words};
use crate::store::{AlertRow, FiringRecord, WebhookFormat};
use rampart_state::clock;
use rampart_state::json::Json;

/// Longest template, in characters (and longest text sent: a filled one is cut there).
pub const MESSAGE_CHARS_MAX: usize = 1_000;

/// The placeholders a template may use, each written `{{name}}`.
pub const PLACEHOLDERS: [&str; 11] =
    ["exchange", "symbol", "type", "event", "direction", "price", "move", "level", "wall_usd", "note", "time"];

/// Why a template is refused, in the words the API answers with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

/// Checks a template: at most [`MESSAGE_CHARS_MAX`] characters, not blank, and every `{{…}}`
/// one of [`PLACEHOLDERS`].
pub fn check_template(template: &str) -> Result<(), TemplateError> {
    if template.chars().count() > MESSAGE_CHARS_MAX {
        return Err(TemplateError(format!("message is longer than {MESSAGE_CHARS_MAX} characters")));
    }
    if template.trim().is_empty() {
        return Err(TemplateError("message is empty: send null to use the default text".into()));
    }
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(TemplateError("message has a '{{' without its '}}'".into()));
        };
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(TemplateError(format!(
                "unknown placeholder '{{{{{name}}}}}' in message; known: {}",
                PLACEHOLDERS.map(|p| format!("{{{{{p}}}}}")).join(" ")
            )));
        }
        rest = &after[close + 2..];
    }
    Ok(())
}

/// The template filled with one firing's values (a `*` alert's body: its first firing's), cut
/// to [`MESSAGE_CHARS_MAX`] characters. A placeholder with no value for the alert's type (a
/// price alert's `{{wall_usd}}`) is left empty.
pub fn fill(template: &str, row: &AlertRow, f: &FiringRecord) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => {
                out.push_str(&value(&after[..close], row, f));
                rest = &after[close + 2..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    match out.char_indices().nth(MESSAGE_CHARS_MAX) {
        Some((at, _)) => out[..at].to_owned(),
        None => out,
    }
}

/// One placeholder's value.
fn value(name: &str, row: &AlertRow, f: &FiringRecord) -> String {
    match name {
        "exchange" => row.exchange.as_str().to_owned(),
        "symbol" => f.symbol.clone().unwrap_or_else(|| row.symbol.clone()),
        "type" => row.condition.kind().to_owned(),
        "event" => match row.condition {
            Condition::Level(c) => c.event.as_str().to_owned(),
            Condition::Wall(c) => c.event.as_str().to_owned(),
            Condition::Price { .. } | Condition::Pct { .. } => String::new(),
        },
        "direction" => row.condition.direction().to_owned(),
        "price" => fixed(f.price),
        "move" => f.move_hundredths.map(|m| fixed(m * 1_000_000)).unwrap_or_default(),
        "level" => match (row.condition, &f.level) {
            (Condition::Price { level, .. }, _) => fixed(level.0),
            (_, Some(l)) => fixed(l.price.0),
            _ => String::new(),
        },
        "wall_usd" => f.wall.as_ref().and_then(|w| w.usd).map(usd_words).unwrap_or_default(),
        "note" => row.note.clone(),
        "time" => clock::iso8601(f.ts_ms),
        _ => String::new(),
    }
}

/// The text of a firing: the alert's template filled, or the default sentence.
pub fn text(row: &AlertRow, f: &FiringRecord) -> String {
    match &row.message {
        Some(template) => fill(template, row, f),
        None => telegram::firing_text(row, f),
    }
}

/// The webhook body a chat service reads, `None` for the `json` format (the event body):
/// Discord's `{"content":<text>}`, Slack's `{"text":<text>}`.
pub fn chat_body(format: WebhookFormat, text: &str) -> Option<String> {
    let field = match format {
        WebhookFormat::Json => return None,
        WebhookFormat::Discord => "content",
        WebhookFormat::Slack => "text",
    };
    let mut j = Json::with_capacity(text.len() + 16);
    j.raw("{\"").raw(field).raw("\":").str(text).raw("}");
    Some(j.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AlertStatus, PausedBy};
    use rampart_engine::alert::Cross;
    use rampart_engine::{Price, Venue};

    fn row(message: Option<&str>) -> AlertRow {
        AlertRow {
            id: 7,
            account_id: 1,
            exchange: Venue::Binance,
            symbol: "BTCUSDT".into(),
            condition: Condition::Price { cross: Cross::Above, level: Price(6_500_000_000_000) },
            repeat: true,
            note: "breakout \"A\"".into(),
            webhook_url: None,
            status: AlertStatus::Active,
            created_price: 1,
            created_ms: 0,
            last_triggered_ms: None,
            trigger_count: 0,
            expires_ms: None,
            cooldown_s: 0,
            paused: None::<PausedBy>,
            max_fires: None,
            message: message.map(str::to_owned),
            webhook_format: WebhookFormat::Discord,
        }
    }

    #[test]
    fn templates_name_only_known_placeholders() {
        assert_eq!(check_template("{{symbol}} crossed {{level}} at {{price}} ({{time}})"), Ok(()));
        assert_eq!(check_template("no placeholder at all { } }}"), Ok(()));
        let err = check_template("{{symbol}} {{prize}}").expect_err("unknown");
        assert!(
            err.0.starts_with("unknown placeholder '{{prize}}' in message; known: {{exchange}} {{symbol}}"),
            "{}",
            err.0
        );
        assert_eq!(check_template("{{symbol").expect_err("open").0, "message has a '{{' without its '}}'");
        assert_eq!(check_template("  ").expect_err("blank").0, "message is empty: send null to use the default text");
        let long = "x".repeat(MESSAGE_CHARS_MAX + 1);
        assert_eq!(check_template(&long).expect_err("long").0, "message is longer than 1000 characters");
    }

    #[test]
    fn a_template_is_filled_and_the_chat_bodies_are_exact() {
        let f = FiringRecord::at_price(7, 6_501_000_000_000, 1_796_083_200_000, false);
        let r = row(Some(
            "{{symbol}} on {{exchange}} {{direction}} {{level}}: {{price}} {{move}}{{wall_usd}} — {{note}} {{time}}",
        ));
        let text = text(&r, &f);
        assert_eq!(text, "BTCUSDT on binance above 65000: 65010  — breakout \"A\" 2026-12-01T00:00:00.000+00:00");
        assert_eq!(
            chat_body(WebhookFormat::Discord, &text).as_deref(),
            Some(
                r#"{"content":"BTCUSDT on binance above 65000: 65010  — breakout \"A\" 2026-12-01T00:00:00.000+00:00"}"#
            )
        );
        assert_eq!(chat_body(WebhookFormat::Slack, "a\nb").as_deref(), Some(r#"{"text":"a\nb"}"#));
        assert_eq!(chat_body(WebhookFormat::Json, "a"), None);
        // No template: the Telegram sentence.
        assert_eq!(super::text(&row(None), &f), telegram::firing_text(&row(None), &f));
    }
}
