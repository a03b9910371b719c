//! Firings of price and pct alerts, recorded in one transaction per batch: each alert's count
//! and status, its inbox entry, its webhook delivery and its Telegram message.

use super::alert_row::{alert_row, AlertRow, ALERT_COLUMNS};
use super::conn::Store;
use super::firing_record::FiringRecord;
use super::outbox::queue_telegram;
use super::render::Render;
use crate::db::{vals, StoreError};

impl Store {
    /// Persists a batch of firings in one transaction: each alert's count, last time and
    /// status, an `alert.triggered` inbox entry with the event body, the webhook delivery when
    /// the alert has a URL and, with Telegram on, a message to the account's chat. Firings of
    /// deleted alerts are skipped. Returns the rows after the update, for delivery.
    pub fn record_firings(
        &mut self,
        firings: &[FiringRecord],
        texts: &dyn Render,
    ) -> Result<Vec<(AlertRow, FiringRecord)>, StoreError> {
        let (db, telegram) = (&self.db, self.telegram);
        let update = format!(
            "UPDATE alerts SET trigger_count = trigger_count + 1, last_triggered_ms = ?2,
                status = CASE WHEN ?3 THEN 'triggered' ELSE status END
             WHERE id = ?1 AND deleted_ms IS NULL AND (status = 'active' OR NOT ?3) RETURNING {ALERT_COLUMNS}"
        );
        // Each step's statements go as one pipelined batch (one round trip on PostgreSQL).
        db.in_transaction_of(|| {
            self.check_fence()?;
            let sets: Vec<_> = firings.iter().map(|f| vals![f.alert_id, f.ts_ms, f.last].to_vec()).collect();
            let rows = db.query_opt_each(&update, &sets, alert_row)?;
            let done: Vec<(AlertRow, FiringRecord)> =
                rows.into_iter().zip(firings).filter_map(|(row, f)| Some((row?, f.clone()))).collect();
            // A one-shot's firing ends it (and only its first: the update skips one already
            // triggered, so a second firing of it is recorded nowhere).
            self.release_active(done.iter().filter(|(_, f)| f.last).map(|(row, _)| row.account_id))?;
            let bodies: Vec<String> = done.iter().map(|(row, f)| texts.alert_fired(row, f)).collect();
            let inbox: Vec<_> = done
                .iter()
                .zip(&bodies)
                .map(|((row, f), body)| vals![row.account_id, row.id, body, f.ts_ms].to_vec())
                .collect();
            db.execute_each(
                "INSERT INTO inbox (account_id, kind, alert_id, body, created_ms) VALUES (?1, 'alert.triggered', ?2, ?3, ?4)",
                &inbox,
            )?;
            // The webhook is in addition to the inbox, in the same transaction: a firing
            // that is recorded is also queued for delivery (at least once).
            let outbox: Vec<_> = done
                .iter()
                .zip(&bodies)
                .filter_map(|((row, f), body)| {
                    Some(vals![row.id, row.account_id, row.webhook_url.as_ref()?, body, f.ts_ms].to_vec())
                })
                .collect();
            db.execute_each(
                "INSERT INTO outbox (alert_id, account_id, url, body, trigger_ms, state, attempts, next_attempt_ms, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?5, ?5)",
                &outbox,
            )?;
            if telegram {
                for (row, f) in &done {
                    let text = || texts.telegram_alert_fired(row, f);
                    queue_telegram(db, texts, row.account_id, row.id, text, f.ts_ms)?;
                }
            }
            Ok(done)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;

    #[test]
    fn telegram_messages_are_queued_for_accounts_with_a_chat() {
        on_each_backend("telegram", |at| {
            let mut s = at.open().with_telegram(true);
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let b = s.create_account_with_key("developer", None, 1).expect("b").account_id;
            s.set_telegram_chat(a, Some("-100123")).expect("chat");
            let mut with_hook = alert(a, "binance", "BTCUSDT");
            with_hook.webhook_url = Some("https://example.com/h".into());
            with_hook.note = "breakout".into();
            let ida = s.insert_alert(&with_hook).expect("insert").id;
            let idb = s.insert_alert(&alert(b, "binance", "BTCUSDT")).expect("insert").id;
            let fire = |id| FiringRecord::at_price(id, 300, 7_000, false);
            s.record_firings(&[fire(ida), fire(idb)], &Texts).expect("record");
            let due = s.due_deliveries(7_000, 100).expect("due");
            let channels: Vec<(i64, Channel)> = due.iter().map(|r| (r.alert_id, r.channel)).collect();
            assert_eq!(channels, [(ida, Channel::Webhook), (ida, Channel::Telegram)], "b has no chat");
            let tg = &due[1];
            assert_eq!((tg.url.as_str(), tg.account_id, tg.next_attempt_ms), ("-100123", a, 7_000));
            let body: serde_json::Value = serde_json::from_str(&tg.body).expect("json");
            assert_eq!(body["chat_id"], -100_123);
            let text = body["text"].as_str().unwrap_or_default();
            assert!(text.starts_with("BTCUSDT · binance\nprice alert #"), "{text}");
            assert!(text.contains("above 0.000002 — traded at 0.000003") && text.ends_with("Note: breakout"), "{text}");
            // The webhook listing of the alert has its webhook only.
            assert_eq!(s.deliveries_of(ida).expect("rows").len(), 1);
            // A delisting reaches the chat too; b still has none.
            let sol = s.insert_alert(&alert(a, "binance", "SOLUSDT")).expect("insert").id;
            s.insert_alert(&alert(b, "binance", "SOLUSDT")).expect("insert");
            s.delist(Venue::Binance, "SOLUSDT", 8_000, &Texts).expect("delist");
            let due = s.due_deliveries(8_000, 100).expect("due");
            assert_eq!(due.len(), 3);
            assert_eq!((due[2].alert_id, due[2].channel), (sol, Channel::Telegram));
            assert!(due[2].body.contains("The pair was delisted: price alert #"), "{}", due[2].body);
            // Without the bot configured nothing is queued for the chat.
            let mut off = at.open();
            off.record_firings(&[fire(ida)], &Texts).expect("record");
            assert_eq!(off.due_deliveries(9_000, 100).expect("due").len(), 4, "one more webhook, no message");
        });
    }
}
