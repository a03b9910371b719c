//! Outbox rows handed to a cluster's firings stream (`cluster::publisher`): which are not yet,
//! marking them, and unmarking the pending ones when the stream they were handed to is lost.

use super::conn::Store;
use super::outbox::{channel_column, Channel};
use crate::db::{vals, Col, StoreError};

/// The `meta` key holding the creation time (ns) of the firings stream the outbox's marks refer to.
const STREAM_KEY: &str = "firings_stream_created_ns";

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
    /// With `mine` (a market node's partition), the rows its own writer committed, those of no
    /// partition, and another partition's only once committed before `others_before_ms` (their
    /// own node's publisher has had the time to hand them over: what is left is a dead node's, or
    /// a node cut from the stream); without, every row.
    pub fn unpublished(
        &self,
        limit: u32,
        mine: Option<&str>,
        others_before_ms: i64,
    ) -> Result<Vec<Unpublished>, StoreError> {
        let row = |r: &crate::db::Row<'_>| {
            Ok(Unpublished {
                id: r.get(0)?,
                alert_id: r.get(1)?,
                trigger_ms: r.get(2)?,
                channel: channel_column(r, 3)?,
            })
        };
        let Some(mine) = mine else {
            return self.db.query(
                "SELECT id, alert_id, trigger_ms, channel FROM outbox
                 WHERE published_ms IS NULL AND state = 'pending' ORDER BY id LIMIT ?1",
                vals![i64::from(limit)],
                row,
            );
        };
        self.db.query(
            "SELECT id, alert_id, trigger_ms, channel FROM outbox
             WHERE published_ms IS NULL AND state = 'pending'
                AND (publisher IS NULL OR publisher = ?2 OR committed_ms IS NULL OR committed_ms < ?3)
             ORDER BY id LIMIT ?1",
            vals![i64::from(limit), mine, others_before_ms],
            row,
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

    /// The firings stream now is the one created at `created_ns`. When the outbox's marks refer
    /// to another (a NATS server that came back without its store, the stream deleted), what the
    /// old one held unanswered is gone with it: the pending rows marked published are unmarked,
    /// in the transaction that records the new stream, so they are published to it. The first
    /// stream ever told is only recorded. How many rows were unmarked.
    ///
    /// Two publishers that see a new stream together may both unmark; the repeats they publish
    /// are dropped by the stream's duplicate window, or acknowledged unsent by a worker that
    /// finds the row settled.
    pub fn firings_stream_is(&mut self, created_ns: i64) -> Result<usize, StoreError> {
        self.db.in_transaction_of(|| {
            let seen: Option<i64> =
                self.db.query_opt("SELECT value FROM meta WHERE key = ?1", vals![STREAM_KEY], |r| r.get(0))?;
            if seen == Some(created_ns) {
                return Ok(0);
            }
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                vals![STREAM_KEY, created_ns],
            )?;
            if seen.is_none() {
                return Ok(0);
            }
            let ids: Vec<i64> = self.db.query(
                "SELECT id FROM outbox WHERE state = 'pending' AND published_ms IS NOT NULL ORDER BY id",
                &[],
                |r| r.get(0),
            )?;
            if !self.db.is_postgres() {
                self.db.execute("UPDATE outbox SET published_ms = NULL WHERE state = 'pending'", &[])?;
                return Ok(ids.len());
            }
            // The rows locked in ascending id order, as every multi-row writer of the outbox
            // takes them, and only those: a row marked meanwhile stays as it is.
            self.lock_outbox_rows(ids.iter().copied())?;
            let sql = "UPDATE outbox SET published_ms = NULL FROM unnest(?1::bigint[]) AS u(uid)
                WHERE outbox.id = u.uid AND outbox.state = 'pending' RETURNING outbox.id";
            Ok(self.db.query_columns(sql, &[Col::I64(ids)], |_| Ok(()))?.len())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::outbox::{AttemptResult, Outcome};
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
            let rows = s.unpublished(10, None, 0).expect("unpublished");
            let ids: Vec<String> = rows.iter().map(Unpublished::message_id).collect();
            assert_eq!(ids, [format!("{id}:7000"), format!("telegram:{}", rows[1].id)]);
            s.mark_published(&[rows[0].id], 8_000).expect("mark");
            assert_eq!(s.unpublished(10, None, 0).expect("unpublished"), [rows[1]]);
            let row = s.outbox_row(rows[0].id).expect("read").expect("the row");
            assert_eq!((row.state.as_str(), row.alert_id, row.channel), ("pending", id, Channel::Webhook));
            assert_eq!(s.outbox_row(rows[1].id + 1).expect("read"), None);
        });
    }

    /// Pending rows marked for a stream that is no longer the stream are handed over again;
    /// settled rows, unpublished rows and the first stream ever seen change nothing.
    #[test]
    fn a_new_stream_gets_the_pending_rows_the_old_one_held() {
        on_each_backend("restream", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let mut hooked = alert(a, "binance", "BTCUSDT");
            hooked.webhook_url = Some("https://example.com/h".into());
            let id = s.insert_alert(&hooked).expect("insert").id;
            let firings: Vec<_> = (0..3).map(|i| FiringRecord::at_price(id, 300, 7_000 + i, false)).collect();
            s.record_firings(&firings, &Texts).expect("record");
            let rows = s.unpublished(10, None, 0).expect("unpublished");
            assert_eq!(s.firings_stream_is(111).expect("first"), 0, "the first stream is only recorded");
            s.mark_published(&[rows[0].id, rows[1].id], 8_000).expect("mark");
            let delivered = Outcome {
                id: rows[1].id,
                result: AttemptResult::Delivered { status: 200 },
                at_ms: 8_100,
                latency_ms: 5,
                pulled_ms: 8_050,
            };
            s.record_attempts(&[delivered], |_, _| None).expect("delivered");
            assert_eq!(s.firings_stream_is(111).expect("same"), 0, "the same stream");
            assert_eq!(s.unpublished(10, None, 0).expect("unpublished"), [rows[2]]);
            assert_eq!(s.firings_stream_is(222).expect("new"), 1, "only the pending marked row");
            assert_eq!(s.unpublished(10, None, 0).expect("unpublished"), [rows[0], rows[2]]);
            assert_eq!(s.firings_stream_is(222).expect("again"), 0, "recorded");
        });
    }
}
