//! Outbox rows handed to a cluster's firings stream (`cluster::publisher`): which are not yet,
//! and marking them.

use super::conn::Store;
use super::outbox::{channel_column, Channel};
use crate::db::{vals, Col, StoreError};

/// The message id of a firing: the pair that identifies it, whoever publishes it how often.
pub fn message_id(alert_id: i64, trigger_ms: i64) -> String {
    format!("{alert_id}:{trigger_ms}")
}

/// An outbox row not yet handed to the cluster's firings stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unpublished {
    /// Delivery id (what the stream carries).
    pub id: i64,
    /// The alert.
    pub alert_id: i64,
    /// The firing's time.
    pub trigger_ms: i64,
    /// Webhook or Telegram.
    pub channel: Channel,
}

impl Unpublished {
    /// The stream's message id: the firing's (alert id, trigger time) for a webhook (the pair
    /// that identifies a firing, [`message_id`]); the row's own id for a Telegram
    /// message (a firing may have both, and site and API alerts have separate id spaces).
    pub fn message_id(&self) -> String {
        match self.channel {
            Channel::Webhook => message_id(self.alert_id, self.trigger_ms),
            Channel::Telegram => format!("telegram:{}", self.id),
        }
    }
}

impl Store {
    /// Pending outbox rows not yet handed to the firings stream, oldest first, at most `limit`.
    pub fn unpublished(&self, limit: u32) -> Result<Vec<Unpublished>, StoreError> {
        self.db.query(
            "SELECT id, alert_id, trigger_ms, channel FROM outbox
             WHERE published_ms IS NULL AND state = 'pending' ORDER BY id LIMIT ?1",
            vals![i64::from(limit)],
            |r| {
                Ok(Unpublished {
                    id: r.get(0)?,
                    alert_id: r.get(1)?,
                    trigger_ms: r.get(2)?,
                    channel: channel_column(r, 3)?,
                })
            },
        )
    }

    /// Marks rows as handed to the firings stream at `now_ms`, in one transaction: on
    /// PostgreSQL two statements whatever their number (the rows locked in ascending id order,
    /// as every multi-row writer of the outbox takes them, then one update), on SQLite one per
    /// row.
    pub fn mark_published(&mut self, ids: &[i64], now_ms: i64) -> Result<(), StoreError> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        self.db.in_transaction_of(|| {
            if self.db.is_postgres() {
                self.lock_outbox_rows(ids.iter().copied())?;
                self.db.custom_plans()?;
                let sql = "UPDATE outbox SET published_ms = u.at FROM unnest(?1::bigint[], ?2::bigint[]) AS u(uid, at)
                    WHERE outbox.id = u.uid RETURNING outbox.id";
                let cols = [Col::I64(ids.clone()), Col::I64(vec![now_ms; ids.len()])];
                self.db.query_columns(sql, &cols, |_| Ok(()))?;
                return Ok(());
            }
            let sets: Vec<_> = ids.iter().map(|id| vals![*id, now_ms].to_vec()).collect();
            self.db.execute_each("UPDATE outbox SET published_ms = ?2 WHERE id = ?1", &sets)?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;

    /// The cluster's publisher reads each pending row once: marked rows are not read again.
    #[test]
    fn outbox_rows_are_handed_to_the_stream_once() {
        on_each_backend("publish", |at| {
            let mut s = at.open().with_telegram(true);
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            s.set_telegram_chat(a, Some("42")).expect("chat");
            let mut hooked = alert(a, "binance", "BTCUSDT");
            hooked.webhook_url = Some("https://example.com/h".into());
            let id = s.insert_alert(&hooked).expect("insert").id;
            let f = FiringRecord::at_price(id, 300, 7_000, false);
            s.record_firings(&[f], &Texts).expect("record");
            let rows = s.unpublished(10).expect("unpublished");
            let ids: Vec<String> = rows.iter().map(Unpublished::message_id).collect();
            assert_eq!(ids, [format!("{id}:7000"), format!("telegram:{}", rows[1].id)]);
            s.mark_published(&[rows[0].id], 8_000).expect("mark");
            assert_eq!(s.unpublished(10).expect("unpublished"), [rows[1]]);
            let row = s.outbox_row(rows[0].id).expect("read").expect("the row");
            assert_eq!((row.state.as_str(), row.alert_id, row.channel), ("pending", id, Channel::Webhook));
            assert_eq!(s.outbox_row(rows[1].id + 1).expect("read"), None);
        });
    }
}
