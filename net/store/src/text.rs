//! One home for every text that leaves the process: the Alert and site alert JSON, the
//! `alert.triggered` event body (webhook and inbox), the delisting notice, the site alerts'
//! inbox bodies and the Telegram messages. The store writes these bytes but makes none of them:
//! it is handed [`Texts`] (as `store::Render`) by whoever asks it to record a
//! firing or a delisting.

pub mod alert;
pub mod chat;
pub mod perp;
pub mod site_alert;
pub mod telegram;
pub mod words;

use crate::store::{AlertRow, FiringRecord, Render, SiteAlertRow, SiteFiringRecord};

/// The texts rampart sends: [`Render`] as the spec and `decisions.md` §10 word them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Texts;

impl Render for Texts {
    fn alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String {
        alert::event_body(row, f)
    }

    fn alert_inbox_entry(&self, row: &AlertRow, f: &FiringRecord) -> Option<String> {
        row.message.as_ref().map(|_| alert::with_text(&alert::event_body(row, f), &chat::text(row, f)))
    }

    fn alert_chat_body(&self, row: &AlertRow, f: &FiringRecord) -> Option<String> {
        chat::chat_body(row.webhook_format, row, f)
    }

    fn alert_paused(&self, row: &AlertRow, at_ms: i64) -> String {
        alert::paused_body(row, at_ms)
    }

    fn telegram_alert_paused(&self, row: &AlertRow) -> String {
        telegram::paused_text(row)
    }

    fn alert_delisted(&self, row: &AlertRow, now_ms: i64, perp: bool) -> String {
        match perp {
            true => alert::perp_delisted_body(row, now_ms),
            false => alert::delisted_body(row, now_ms),
        }
    }

    fn alert_expired(&self, row: &AlertRow, now_ms: i64) -> String {
        alert::expired_body(row, now_ms)
    }

    fn site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> (&'static str, String) {
        site_alert::firing_body(row, f)
    }

    fn telegram_alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String {
        chat::text(row, f)
    }

    fn telegram_alert_delisted(&self, row: &AlertRow, perp: bool) -> String {
        telegram::delisted_text(row, perp)
    }

    fn telegram_alert_expired(&self, row: &AlertRow) -> String {
        telegram::expired_text(row)
    }

    fn telegram_site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> String {
        telegram::site_firing_text(row, f)
    }

    fn telegram_body(&self, chat: &str, text: &str) -> String {
        telegram::message_body(chat, text)
    }
}
