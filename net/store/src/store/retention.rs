//! What the database keeps, by age (issue #62, `docs/decisions.md` "Retention"), and the pruning
//! that holds it there: inbox entries (the API's firings and notices and the site's, and so the
//! `alerts` stream's resume window), settled outbox rows with their bodies, and alerts deleted or
//! ended (API and site). A pending delivery is never pruned, nor an alert one waits for.
//!
//! Pruning is a few small transactions ([`PRUNE_BATCH`] rows of one table each) run by the
//! checkpoint thread, so no writer waits for more than one batch's delete. The rows are found by
//! a read first, outside any write: inbox entries and outbox rows as the run of old ones from
//! the lowest id (ids follow time), alerts through partial indexes of the removed and the fired
//! ones; each read is bounded by the batch, so a round costs the same whatever the table's size. Inbox ids only grow (`meta.inbox_next`), so the highest pruned id is a watermark:
//! a resume point below it may have lost entries and is refused ([`Store::inbox_pruned_through`]).

use rampart_engine::candle::DAY_MS;

use super::conn::Store;
use crate::db::{vals, StoreError};

/// Rows one prune statement removes at most (one transaction).
pub const PRUNE_BATCH: i64 = 500;

/// How long each kind of row is kept, milliseconds after the time named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Inbox entries, after they were written (default 90 days).
    pub inbox_ms: i64,
    /// Delivered or failed outbox rows, after they were settled (default 30 days).
    pub outbox_ms: i64,
    /// Deleted, expired or delisted alerts after their removal, and fired one-shot alerts after
    /// their firing (API and site alike; default 90 days).
    pub alerts_ms: i64,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention { inbox_ms: 90 * DAY_MS, outbox_ms: 30 * DAY_MS, alerts_ms: 90 * DAY_MS }
    }
}

/// Rows one round of [`Store::prune_batch`] removed, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Inbox entries.
    pub inbox: i64,
    /// Settled outbox rows.
    pub outbox: i64,
    /// API alerts.
    pub alerts: i64,
    /// Site alerts.
    pub site_alerts: i64,
}

impl Pruned {
    /// Whether any statement met its batch's bound (more may be waiting).
    pub fn full(&self) -> bool {
        [self.inbox, self.outbox, self.alerts, self.site_alerts].iter().any(|n| *n >= PRUNE_BATCH)
    }
}

impl Store {
    /// Removes at most [`PRUNE_BATCH`] rows of each kind that `keep` no longer keeps at
    /// `now_ms`: a row is kept while `now_ms - its time <= keep`, so one millisecond past it goes.
    /// Each kind in its own short transaction: its rows are found by a read first (no lock
    /// held: in WAL mode a read never blocks the writers), then deleted by id, their condition
    /// checked again.
    pub fn prune_batch(&self, now_ms: i64, keep: &Retention) -> Result<Pruned, StoreError> {
        let inbox = self.prune_inbox(now_ms - keep.inbox_ms)?;
        let outbox = self.prune_outbox(now_ms - keep.outbox_ms)?;
        let before = now_ms - keep.alerts_ms;
        let alerts = self.prune_alerts(before)?;
        let site = self.db.query(
            "SELECT id FROM site_alerts WHERE deleted_ms < ?1 ORDER BY deleted_ms LIMIT ?2",
            vals![before, PRUNE_BATCH],
            |r| r.get(0),
        )?;
        let site_alerts = match id_list(&site) {
            None => 0,
            Some(ids) => self
                .db
                .execute(&format!("DELETE FROM site_alerts WHERE id IN ({ids}) AND deleted_ms < ?1"), vals![before])?
                as i64,
        };
        Ok(Pruned { inbox, outbox, alerts, site_alerts })
    }

    /// One batch of inbox entries written before `before_ms`, and the watermark raised to the
    /// highest id removed, in one transaction. Ids follow time, so the oldest entries are the
    /// lowest ids: the batch is the run of those, from the lowest, written before `before_ms`.
    fn prune_inbox(&self, before_ms: i64) -> Result<i64, StoreError> {
        let rows: Vec<(i64, i64)> =
            self.db.query("SELECT id, created_ms FROM inbox ORDER BY id LIMIT ?1", vals![PRUNE_BATCH], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let old: Vec<i64> = rows.iter().take_while(|(_, at)| *at < before_ms).map(|(id, _)| *id).collect();
        let (Some(ids), Some(highest)) = (id_list(&old), old.last().copied()) else { return Ok(0) };
        let db = &self.db;
        db.in_transaction_of(|| {
            let n =
                db.execute(&format!("DELETE FROM inbox WHERE id IN ({ids}) AND created_ms < ?1"), vals![before_ms])?;
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('inbox_pruned_through', ?1) \
                 ON CONFLICT(key) DO UPDATE SET value = CASE WHEN excluded.value > meta.value \
                 THEN excluded.value ELSE meta.value END",
                vals![highest],
            )?;
            Ok(n as i64)
        })
    }

    /// One batch of outbox rows settled before `before_ms`: the run of settled, old rows from the
    /// lowest id (rows settle in about the order they were written; a pending or younger row ends
    /// the run, and the rows behind it wait for it to settle and age).
    fn prune_outbox(&self, before_ms: i64) -> Result<i64, StoreError> {
        let rows: Vec<(i64, String, Option<i64>)> =
            self.db.query("SELECT id, state, done_ms FROM outbox ORDER BY id LIMIT ?1", vals![PRUNE_BATCH], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
        let settled = |state: &str, done: Option<i64>| state != "pending" && done.is_some_and(|d| d < before_ms);
        let old: Vec<i64> = rows.iter().take_while(|(_, s, d)| settled(s, *d)).map(|(id, _, _)| *id).collect();
        let Some(ids) = id_list(&old) else { return Ok(0) };
        let sql =
            format!("DELETE FROM outbox WHERE id IN ({ids}) AND state IN ('delivered', 'failed') AND done_ms < ?1");
        Ok(self.db.execute(&sql, vals![before_ms])? as i64)
    }

    /// One batch of alerts removed, or fired for good, before `before_ms` (the partial indexes
    /// of schema step 22), none with a pending delivery.
    fn prune_alerts(&self, before_ms: i64) -> Result<i64, StoreError> {
        let pending = "NOT EXISTS (SELECT 1 FROM outbox o WHERE o.alert_id = alerts.id AND o.state = 'pending')";
        let mut ids: Vec<i64> = self.db.query(
            &format!("SELECT id FROM alerts WHERE deleted_ms < ?1 AND {pending} ORDER BY deleted_ms LIMIT ?2"),
            vals![before_ms, PRUNE_BATCH],
            |r| r.get(0),
        )?;
        ids.extend(self.db.query::<i64>(
            &format!(
                "SELECT id FROM alerts WHERE status = 'triggered' AND deleted_ms IS NULL AND last_triggered_ms < ?1 \
                 AND {pending} ORDER BY last_triggered_ms LIMIT ?2"
            ),
            vals![before_ms, PRUNE_BATCH - ids.len() as i64],
            |r| r.get(0),
        )?);
        let Some(list) = id_list(&ids) else { return Ok(0) };
        let sql = format!(
            "DELETE FROM alerts WHERE id IN ({list}) AND (deleted_ms < ?1 OR (deleted_ms IS NULL \
             AND status = 'triggered' AND last_triggered_ms < ?1)) AND {pending}"
        );
        Ok(self.db.execute(&sql, vals![before_ms])? as i64)
    }

    /// The highest inbox id pruned so far (0 before any): a resume point below it may have lost
    /// entries after it.
    pub fn inbox_pruned_through(&self) -> Result<i64, StoreError> {
        let v = self.db.query_opt("SELECT value FROM meta WHERE key = 'inbox_pruned_through'", &[], |r| r.get(0))?;
        Ok(v.unwrap_or(0))
    }
}

/// Ids as a SQL list (`1,2,3`: integers the database gave, so nothing to escape); `None` when
/// there are none.
fn id_list(ids: &[i64]) -> Option<String> {
    (!ids.is_empty()).then(|| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
}

#[cfg(test)]
mod tests {
    use super::{Retention, PRUNE_BATCH};
    use crate::db::vals;
    use crate::store::test_support::*;
    use crate::store::{on_each_backend, Store};

    const KEEP: Retention = Retention { inbox_ms: 1_000, outbox_ms: 2_000, alerts_ms: 3_000 };

    fn count(s: &Store, sql: &str) -> i64 {
        s.db.query_one(sql, &[], |r| r.get(0)).expect("count")
    }

    /// An inbox entry written at `at_ms`; its id.
    fn inbox_at(s: &Store, account: i64, at_ms: i64) -> i64 {
        s.db.query_one(
            "INSERT INTO inbox (account_id, kind, body, created_ms) VALUES (?1, 'alert.triggered', '{}', ?2) RETURNING id",
            vals![account, at_ms],
            |r| r.get(0),
        )
        .expect("inbox entry")
    }

    /// An outbox row of `alert` in `state`, settled at `done_ms`.
    fn outbox_at(s: &Store, account: i64, alert: i64, state: &str, done_ms: Option<i64>) {
        s.db.execute(
            "INSERT INTO outbox (alert_id, account_id, url, body, trigger_ms, state, next_attempt_ms, created_ms, done_ms) \
             VALUES (?1, ?2, 'https://example.com/', '{}', 0, ?3, 0, 0, ?4)",
            vals![alert, account, state, done_ms],
        )
        .expect("outbox row");
    }

    #[test]
    fn each_kind_is_kept_to_its_last_millisecond_and_gone_one_after() {
        on_each_backend("retention-boundary", |at| {
            let mut s = at.open();
            let account = s.create_account_with_key("developer", None, 1).expect("account").account_id;
            // Inbox: written at 10 000, kept 1 000 ms.
            let entry = inbox_at(&s, account, 10_000);
            assert_eq!(s.prune_batch(11_000, &KEEP).expect("prune").inbox, 0, "kept at exactly its age");
            assert_eq!(s.inbox_pruned_through().expect("mark"), 0);
            assert_eq!(s.prune_batch(11_001, &KEEP).expect("prune").inbox, 1, "gone one millisecond after");
            assert_eq!(s.inbox_pruned_through().expect("mark"), entry, "the watermark is its id");
            // Outbox: settled at 10 000, kept 2 000 ms; a pending row is never pruned.
            let gone = s.insert_alert(&alert(account, "binance", "BTCUSDT")).expect("alert").id;
            outbox_at(&s, account, gone, "delivered", Some(10_000));
            outbox_at(&s, account, gone, "failed", Some(10_000));
            outbox_at(&s, account, gone, "pending", None);
            assert_eq!(s.prune_batch(12_000, &KEEP).expect("prune").outbox, 0);
            assert_eq!(s.prune_batch(12_001, &KEEP).expect("prune").outbox, 2);
            assert_eq!(s.prune_batch(i64::MAX / 2, &KEEP).expect("prune").outbox, 0, "pending stays for ever");
            assert_eq!(count(&s, "SELECT count(*) FROM outbox WHERE state = 'pending'"), 1);
            // Alerts: deleted at 10 000, kept 3 000 ms; not while a delivery of it is pending.
            s.db.execute("UPDATE alerts SET deleted_ms = 10000 WHERE id = ?1", vals![gone]).expect("delete");
            assert_eq!(s.prune_batch(i64::MAX / 2, &KEEP).expect("prune").alerts, 0, "its delivery is pending");
            s.db.execute("UPDATE outbox SET state = 'delivered', done_ms = 20000", &[]).expect("settle");
            assert_eq!(s.prune_batch(13_000, &KEEP).expect("prune").alerts, 0);
            assert_eq!(s.prune_batch(13_001, &KEEP).expect("prune").alerts, 1);
            // A fired one-shot alert, from its firing; an active one never.
            let fired = s.insert_alert(&alert(account, "binance", "ETHUSDT")).expect("alert").id;
            let active = s.insert_alert(&alert(account, "binance", "SOLUSDT")).expect("alert").id;
            s.db.execute(
                "UPDATE alerts SET status = 'triggered', last_triggered_ms = 10000 WHERE id = ?1",
                vals![fired],
            )
            .expect("fired");
            s.db.execute("UPDATE alerts SET last_triggered_ms = 10000 WHERE id = ?1", vals![active])
                .expect("repeating");
            assert_eq!(s.prune_batch(13_000, &KEEP).expect("prune").alerts, 0);
            assert_eq!(s.prune_batch(13_001, &KEEP).expect("prune").alerts, 1);
            assert!(s.alert(active).expect("read").is_some(), "an active alert is never pruned");
            // Site alerts: deleted at 10 000, kept as alerts are.
            s.db.execute(
                "INSERT INTO site_alerts (account_id, kind, exchange, repeat, note, status, created_ms, deleted_ms) \
                 VALUES (?1, 'market', 'binance', false, '', 'active', 0, 10000)",
                vals![account],
            )
            .expect("site alert");
            assert_eq!(s.prune_batch(13_000, &KEEP).expect("prune").site_alerts, 0);
            assert_eq!(s.prune_batch(13_001, &KEEP).expect("prune").site_alerts, 1);
        });
    }

    #[test]
    fn a_round_removes_one_batch_and_says_more_may_wait() {
        on_each_backend("retention-batch", |at| {
            let mut s = at.open();
            let account = s.create_account_with_key("developer", None, 1).expect("account").account_id;
            let last = (0..PRUNE_BATCH + 3).map(|_| inbox_at(&s, account, 0)).max();
            let first = s.prune_batch(10_000, &KEEP).expect("prune");
            assert_eq!(first.inbox, PRUNE_BATCH);
            assert!(first.full());
            let second = s.prune_batch(10_000, &KEEP).expect("prune");
            assert_eq!(second.inbox, 3);
            assert!(!second.full());
            assert_eq!(Some(s.inbox_pruned_through().expect("mark")), last, "the watermark is the last id pruned");
        });
    }
}
