//! An alert's own text (`message`, `decisions.md` §16): the template's placeholders, checked
//! when an alert is made or changed and filled at each firing; the chat services' webhook bodies
//! (Discord, Slack) that carry it. Without a template the text is the Telegram sentence of the
//! firing ([`telegram::firing_text`]).

use rampart_engine::alert::Condition;

use super::telegram::{self, fixed};
use super::words::usd_words;
use crate::store::{AlertRow, FiringRecord, WebhookFormat};
use rampart_state::clock;
use rampart_state::json::Json;

/// Longest template, in characters (and longest text sent: a filled one is cut there).
pub const MESSAGE_CHARS_MAX: usize = 1_000;

/// The placeholders a template may use, each written `{{name}}`.
pub const PLACEHOLDERS: [&str; 14] = [
    "exchange",
    "symbol",
    "type",
    "event",
    "direction",
    "price",
    "move",
    "level",
    "wall_usd",
    "liq_usd",
    "oi_change",
    "funding",
    "note",
    "time",
];

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
    fill_with(template, row, f, |v| v)
}

/// [`fill`], each placeholder's value passed through `value_as` (a chat service's escaping).
fn fill_with(template: &str, row: &AlertRow, f: &FiringRecord, value_as: impl Fn(String) -> String) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => {
                out.push_str(&value_as(value(&after[..close], row, f)));
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
            Condition::Perp(c) => c.event().unwrap_or_default().to_owned(),
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
        "liq_usd" => super::perp::liq_usd(f.perp.as_ref()),
        "oi_change" => super::perp::oi_change(f.perp.as_ref()),
        "funding" => super::perp::funding(f.perp.as_ref()),
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
/// Discord's `{"content":<text>,"allowed_mentions":…}`, Slack's `{"text":<text>}`, the text
/// being the alert's template filled (or the default sentence) with every value that came from
/// somewhere else than the template's own words made unable to mention anyone
/// (`decisions.md` §16, "Mentions"): what the user wrote into the template may mention (their
/// intent); a note, a symbol or any other placeholder's value may not.
///
/// Discord: an `@` in a value is followed by a zero-width space (`@everyone`, `@here`, `<@id>`
/// and `<@&id>` no longer parse), and `allowed_mentions` lets through only the mentions written
/// in the template (`@everyone`/`@here` as `everyone`, `<@id>` and `<@!id>` as users, `<@&id>` as
/// roles; none without a template). Slack: `&`, `<` and `>` in a value are written as Slack's
/// `&amp;`, `&lt;`, `&gt;`, so `<!channel>`, `<!here>`, `<!everyone>` and `<@U…>` in a value are
/// shown, not sent as mentions (Slack's incoming webhooks do not link a bare `@channel`).
pub fn chat_body(format: WebhookFormat, row: &AlertRow, f: &FiringRecord) -> Option<String> {
    chat_body_of(format, row, f, "")
}

/// [`chat_body`] of a test send: the text after `prefix` (`[test] `, this service's own words).
pub fn chat_body_of(format: WebhookFormat, row: &AlertRow, f: &FiringRecord, prefix: &str) -> Option<String> {
    let escape: fn(String) -> String = match format {
        WebhookFormat::Json => return None,
        WebhookFormat::Discord => discord_inert,
        WebhookFormat::Slack => slack_escaped,
    };
    let text = match &row.message {
        Some(template) => fill_with(template, row, f, escape),
        // The default sentence is this service's words around values (the note, the symbol).
        None => escape(telegram::firing_text(row, f)),
    };
    let mut j = Json::with_capacity(text.len() + 96);
    match format {
        WebhookFormat::Json => return None,
        WebhookFormat::Discord => {
            j.raw("{\"content\":").str(&format!("{prefix}{text}")).raw(",\"allowed_mentions\":");
            discord_allowed(&mut j, row.message.as_deref().unwrap_or(""));
            j.raw("}");
        }
        WebhookFormat::Slack => {
            j.raw("{\"text\":").str(&format!("{prefix}{text}")).raw("}");
        }
    }
    Some(j.finish())
}

/// A value Discord shows as written but parses no mention in: a zero-width space after each `@`.
fn discord_inert(value: String) -> String {
    if !value.contains('@') {
        return value;
    }
    value.replace('@', "@\u{200B}")
}

/// A value in Slack's escaping of its three control characters.
fn slack_escaped(value: String) -> String {
    if !value.contains(['&', '<', '>']) {
        return value;
    }
    value.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Discord's `allowed_mentions` for a template: the mentions written in it, nothing else.
fn discord_allowed(j: &mut Json, template: &str) {
    let everyone = template.contains("@everyone") || template.contains("@here");
    let (mut users, mut roles) = (Vec::new(), Vec::new());
    let mut rest = template;
    while let Some(at) = rest.find("<@") {
        rest = &rest[at + 2..];
        let (role, digits) = match rest.strip_prefix('&') {
            Some(r) => (true, r),
            None => (false, rest.strip_prefix('!').unwrap_or(rest)),
        };
        let id: String = digits.chars().take_while(char::is_ascii_digit).collect();
        if !id.is_empty() && digits[id.len()..].starts_with('>') {
            let list = if role { &mut roles } else { &mut users };
            if !list.contains(&id) && list.len() < DISCORD_MENTIONS_MAX {
                list.push(id);
            }
        }
    }
    j.raw("{\"parse\":[");
    if everyone {
        j.raw("\"everyone\"");
    }
    for (name, ids) in [("users", &users), ("roles", &roles)] {
        j.raw("],\"").raw(name).raw("\":[");
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            j.str(id);
        }
    }
    j.raw("]}");
}

/// Discord takes at most 100 user ids and 100 role ids in `allowed_mentions`.
const DISCORD_MENTIONS_MAX: usize = 100;

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
            version: 1,
            deleted_ms: None,
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
            chat_body(WebhookFormat::Discord, &r, &f).as_deref(),
            Some(
                r#"{"content":"BTCUSDT on binance above 65000: 65010  — breakout \"A\" 2026-12-01T00:00:00.000+00:00","allowed_mentions":{"parse":[],"users":[],"roles":[]}}"#
            )
        );
        let slack = AlertRow { webhook_format: WebhookFormat::Slack, ..row(Some("a\nb")) };
        assert_eq!(chat_body(WebhookFormat::Slack, &slack, &f).as_deref(), Some(r#"{"text":"a\nb"}"#));
        assert_eq!(chat_body(WebhookFormat::Json, &r, &f), None);
        // No template: the Telegram sentence.
        assert_eq!(super::text(&row(None), &f), telegram::firing_text(&row(None), &f));
    }

    /// A note (or any value) that mentions everyone reaches Discord and Slack as text that
    /// mentions no one; the template's own mentions stay as the user wrote them.
    #[test]
    fn mentions_from_values_are_neutralised_and_the_templates_own_are_kept() {
        let f = FiringRecord::at_price(7, 6_501_000_000_000, 1_796_083_200_000, false);
        let note = "@everyone @here <!channel> <!here> <@123> <@&456> a&b";
        let with = |message: Option<&str>| AlertRow { note: note.into(), ..row(message) };
        let zw = "\u{200B}";
        // Discord, no template: the sentence's note is inert; nothing may be mentioned.
        let body = chat_body(WebhookFormat::Discord, &with(None), &f).expect("discord");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        let content = v["content"].as_str().expect("content");
        assert!(
            content.contains(&format!("@{zw}everyone @{zw}here <!channel> <!here> <@{zw}123> <@{zw}&456>")),
            "{content}"
        );
        assert!(!content.contains("@everyone") && !content.contains("<@1"), "{content}");
        assert_eq!(v["allowed_mentions"], serde_json::json!({"parse":[],"users":[],"roles":[]}));
        // Discord, a template that pings a role and everyone itself: those mentions stay, the
        // note's do not.
        let template = "@everyone <@&42> <@!77> {{note}}";
        let body = chat_body(WebhookFormat::Discord, &with(Some(template)), &f).expect("discord");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        let content = v["content"].as_str().expect("content");
        assert!(content.starts_with("@everyone <@&42> <@!77> @\u{200B}everyone"), "{content}");
        assert_eq!(v["allowed_mentions"], serde_json::json!({"parse":["everyone"],"users":["77"],"roles":["42"]}));
        // Slack: a value's control characters escaped; the template's `<!here>` left as written.
        let slack = |message| AlertRow { webhook_format: WebhookFormat::Slack, ..with(message) };
        let body = chat_body(WebhookFormat::Slack, &slack(Some("<!here> {{note}}")), &f).expect("slack");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(
            v["text"],
            "<!here> @everyone @here &lt;!channel&gt; &lt;!here&gt; &lt;@123&gt; &lt;@&amp;456&gt; a&amp;b"
        );
        let body = chat_body(WebhookFormat::Slack, &slack(None), &f).expect("slack");
        assert!(body.contains("&lt;!channel&gt;") && !body.contains("<!channel>"), "{body}");
        // A test send's prefix is this service's own words, before the neutralised text.
        let body = chat_body_of(WebhookFormat::Slack, &slack(Some("{{note}}")), &f, "[test] ").expect("test");
        assert!(body.starts_with(r#"{"text":"[test] @everyone @here &lt;!channel&gt;"#), "{body}");
    }
}
