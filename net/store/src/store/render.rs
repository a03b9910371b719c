//! The texts the store writes but never makes: [`Render`], implemented by `crate::text`.

use super::alert_row::AlertRow;
use super::firing_record::FiringRecord;
use super::site_row::{SiteAlertRow, SiteFiringRecord};

/// The texts the store writes but never makes: every body and message that leaves the process
/// is rendered in `crate::text` (`text::Texts`), handed to each write that needs one. A body is
/// made from the row as the same transaction updated it, so the store asks for it there.
pub trait Render {
    /// The `alert.triggered` event body: the webhook's body and the inbox entry.
    fn alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String;
    /// The inbox entry of a firing when it is not the event body (the alert has a `message`:
    /// the body with its `text`); `None`: the event body.
    fn alert_inbox_entry(&self, row: &AlertRow, f: &FiringRecord) -> Option<String>;
    /// The webhook body of a firing for a chat service (`webhook_format` `discord`, `slack`);
    /// `None`: the event body.
    fn alert_chat_body(&self, row: &AlertRow, f: &FiringRecord) -> Option<String>;
    /// The `alert.paused` inbox body: the flood guard paused the alert at `at_ms`.
    fn alert_paused(&self, row: &AlertRow, at_ms: i64) -> String;
    /// The Telegram text of the flood guard's pause.
    fn telegram_alert_paused(&self, row: &AlertRow) -> String;
    /// The `alert.delisted` inbox body; `perp`: only the pair's perpetual was delisted
    /// (`decisions.md` §17: the body says `"reason":"perp"`).
    fn alert_delisted(&self, row: &AlertRow, now_ms: i64, perp: bool) -> String;
    /// The `alert.expired` inbox body.
    fn alert_expired(&self, row: &AlertRow, now_ms: i64) -> String;
    /// A site alert firing's inbox kind and body.
    fn site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> (&'static str, String);
    /// The Telegram text of a price or pct alert's firing.
    fn telegram_alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String;
    /// The Telegram text of a delisting notice (`perp`: of the pair's perpetual only).
    fn telegram_alert_delisted(&self, row: &AlertRow, perp: bool) -> String;
    /// The Telegram text of an expiry notice.
    fn telegram_alert_expired(&self, row: &AlertRow) -> String;
    /// The Telegram text of a site alert's firing.
    fn telegram_site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> String;
    /// The `sendMessage` body for `chat`.
    fn telegram_body(&self, chat: &str, text: &str) -> String;
}
