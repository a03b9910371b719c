//! The Telegram messages (`decisions.md` §10): the text of every firing and delisting notice,
//! and the `sendMessage` body the outbox holds for an account's chat.

use rampart_engine::alert::Condition;
use rampart_engine::level_alert::LevelEvent;

use crate::store::SiteFiringRecord;
use crate::store::{direction_str, AlertRow, FiringRecord, SiteAlertRow, SiteCondition};
use rampart_state::json::Json;

use super::words::usd_words;

/// Longest message text sent, in characters; a longer one (a long note) is cut, with `…`.
/// Telegram's own limit is 4 096.
pub const TEXT_MAX_CHARS: usize = 1_000;

/// The `sendMessage` body: `{"chat_id":…,"text":…}`, the chat id a number when it is one
/// (`-100…` for a group) and a string otherwise (`@channel`).
pub fn message_body(chat: &str, text: &str) -> String {
    let mut j = Json::with_capacity(text.len() + 64);
    j.raw("{\"chat_id\":");
    match chat.parse::<i64>() {
        Ok(n) => j.int(n),
        Err(_) => j.str(chat),
    };
    j.raw(",\"text\":").str(&cut(text)).raw("}");
    j.finish()
}

/// `text` cut to [`TEXT_MAX_CHARS`] characters.
fn cut(text: &str) -> String {
    match text.char_indices().nth(TEXT_MAX_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A fixed-point value (1e-8) as the API prints it.
pub(crate) fn fixed(v: i64) -> String {
    let mut j = Json::with_capacity(24);
    j.fixed(v);
    j.finish()
}

/// `\nNote: …` when there is a note.
fn note_line(note: &str) -> String {
    if note.is_empty() {
        String::new()
    } else {
        format!("\nNote: {note}")
    }
}

/// Pairs a `*` alert's message names one line each; the rest are counted.
pub const UNIVERSE_LINES_MAX: usize = 10;

/// The text of an alert's firing: the pair and venue, then what happened; a `*` alert's names
/// each pair that fired (at most [`UNIVERSE_LINES_MAX`], the rest counted).
pub fn firing_text(row: &AlertRow, f: &FiringRecord) -> String {
    if !f.triggers.is_empty() {
        return universe_text(row, f);
    }
    let head = format!("{} · {}", row.symbol, row.exchange.as_str());
    format!("{head}\n{}{}", what_happened(row, f), note_line(&row.note))
}

/// A `*` alert's body in words: "Every binance pair · level alert #7" and a line per pair.
fn universe_text(row: &AlertRow, f: &FiringRecord) -> String {
    let named = format!("{} alert #{}", row.condition.kind(), row.id);
    let mut text = format!("Every {} pair · {named}", row.exchange.as_str());
    // Each line the pair and what happened there (the alert is named once, above).
    let prefix = format!("{named}: ");
    for t in f.triggers.iter().take(UNIVERSE_LINES_MAX) {
        let what = what_happened(row, t);
        let what = what.strip_prefix(&prefix).unwrap_or(&what);
        text.push_str(&format!("\n{}: {what}", t.symbol.as_deref().unwrap_or("?")));
    }
    if f.triggers.len() > UNIVERSE_LINES_MAX {
        text.push_str(&format!("\n… and {} more pairs", f.triggers.len() - UNIVERSE_LINES_MAX));
    }
    text.push_str(&note_line(&row.note));
    text
}

/// What one firing of `row` says happened.
fn what_happened(row: &AlertRow, f: &FiringRecord) -> String {
    match row.condition {
        Condition::Price { level, .. } => {
            format!(
                "price alert #{}: {} {} — traded at {}",
                row.id,
                row.condition.direction(),
                fixed(level.0),
                fixed(f.price)
            )
        }
        Condition::Pct { millionths, window, .. } => {
            let moved = f.move_hundredths.map(|m| format!(", move {}%", fixed(m * 1_000_000))).unwrap_or_default();
            format!(
                "pct alert #{}: {} {}% within {} — price {}{moved}",
                row.id,
                row.condition.direction(),
                fixed(i64::from(millionths) * 100),
                window.as_str(),
                fixed(f.price)
            )
        }
        Condition::Level(c) => {
            let level = match f.level {
                Some(l) => format!(
                    " {} level at {} ({}, strength {})",
                    if l.side == rampart_engine::level::Formation::High { "resistance" } else { "support" },
                    fixed(l.price.0),
                    l.origin.as_str(),
                    l.strength
                ),
                None => String::new(),
            };
            let done = match c.event {
                LevelEvent::Approach => "approached",
                LevelEvent::Touch => "touched",
                LevelEvent::Break => "broken",
            };
            format!("level alert #{}:{level} {done} — price {}", row.id, fixed(f.price))
        }
        Condition::Wall(_) => wall_text(row, f),
        Condition::Perp(c) => {
            let what = match &f.perp {
                Some(t) => super::perp::sentence(row.exchange, t, &fixed(f.price)),
                None => format!("price {}", fixed(f.price)),
            };
            format!("{} alert #{}: {what}", c.kind(), row.id)
        }
    }
}

/// A wall alert's firing in words: "BTCUSDT on binance: $2.1M bid wall at 61250 pulled after 4
/// min, price 61410".
fn wall_text(row: &AlertRow, f: &FiringRecord) -> String {
    let Some(hit) = &f.wall else { return format!("wall alert #{} — price {}", row.id, fixed(f.price)) };
    let side = if hit.wall.side == rampart_engine::Side::Bid { "bid" } else { "ask" };
    let value = hit.usd.map(|u| format!("{} ", usd_words(u))).unwrap_or_default();
    let what = match hit.gone {
        Some(rampart_engine::wall_life::Gone::Pulled) => format!("pulled after {}", duration_words(hit.wall.age_ms)),
        Some(rampart_engine::wall_life::Gone::Filled) => format!("filled after {}", duration_words(hit.wall.age_ms)),
        None => format!("standing for {}", duration_words(hit.wall.age_ms)),
    };
    format!(
        "wall alert #{}: {}{side} wall at {} {what}, price {}",
        row.id,
        value,
        fixed(hit.wall.price.0),
        fixed(f.price)
    )
}

/// `45 s`, `4 min`, `2 h 5 min`.
fn duration_words(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s} s"),
        60..=3_599 => format!("{} min", s / 60),
        _ => format!("{} h {} min", s / 3_600, s % 3_600 / 60),
    }
}

/// The text of a market alert's firing.
pub fn site_firing_text(row: &SiteAlertRow, f: &SiteFiringRecord) -> String {
    let venue = row.exchange.as_str();
    let value = f.value;
    let what = match &row.condition {
        SiteCondition::Market { number, interval, direction, threshold } => {
            let dir = direction_str(*direction);
            format!(
                "{venue} market\n{} ({}) is {dir} {threshold}: now {value:.1}\nmarket alert #{}",
                number.as_str(),
                interval.as_str(),
                row.id
            )
        }
        SiteCondition::Density { .. } => format!("{venue} market\nnow {value:.1}\nmarket alert #{}", row.id),
    };
    format!("{what}{}", note_line(&row.note))
}

/// The text of a delisting notice; `perp`: only the pair's perpetual was delisted, and the
/// derivatives alert named went with it (`decisions.md` §17).
pub fn delisted_text(row: &AlertRow, perp: bool) -> String {
    let (what, kind) = match perp {
        true => ("perpetual contract", row.condition.kind()),
        false => ("pair", "price"),
    };
    format!(
        "{} · {}\nThe {what} was delisted: {kind} alert #{} was removed.{}",
        row.symbol,
        row.exchange.as_str(),
        row.id,
        note_line(&row.note)
    )
}

/// The text of the flood guard's pause (`decisions.md` §16).
pub fn paused_text(row: &AlertRow) -> String {
    format!(
        "{} · {}\n{} alert #{} paused: it fired more than {} times in {} minutes. It fires again once you resume it (on the site, or PATCH /v1/alerts/{} with {{\"paused\": false}}).{}",
        row.symbol,
        row.exchange.as_str(),
        row.condition.kind(),
        row.id,
        crate::flood_guard::FLOOD_FIRINGS_MAX,
        crate::flood_guard::FLOOD_WINDOW_MS / 60_000,
        row.id,
        note_line(&row.note)
    )
}

/// The text of an expiry notice.
pub fn expired_text(row: &AlertRow) -> String {
    format!(
        "{} · {}\nprice alert #{} expired and was removed.{}",
        row.symbol,
        row.exchange.as_str(),
        row.id,
        note_line(&row.note)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_bodies_carry_the_chat_as_telegram_reads_it() {
        let v: serde_json::Value = serde_json::from_str(&message_body("-1001234", "a \"b\"\n")).expect("json");
        assert_eq!(v, serde_json::json!({"chat_id": -1001234, "text": "a \"b\"\n"}));
        let v: serde_json::Value = serde_json::from_str(&message_body("@chan", "x")).expect("json");
        assert_eq!(v["chat_id"], "@chan");
        let long = "é".repeat(TEXT_MAX_CHARS + 5);
        let v: serde_json::Value = serde_json::from_str(&message_body("1", &long)).expect("json");
        assert_eq!(v["text"].as_str().map(|t| t.chars().count()), Some(TEXT_MAX_CHARS + 1));
    }
}
