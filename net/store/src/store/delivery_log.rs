//! The delivery log of an alert's webhooks (`decisions.md` §13): each attempt, kept 7 days and
//! at most [`ATTEMPTS_PER_ALERT_MAX`] per alert, and redelivery of a firing.

use super::conn::Store;
use super::outbox::{AttemptResult, Outcome};
use crate::db::{vals, Col, Row, StoreError};

/// Delivery log rows kept per alert at most (the oldest go first).
pub const ATTEMPTS_PER_ALERT_MAX: i64 = 100;

/// How long delivery log rows are kept, and how long a firing can be redelivered: 7 days.
pub const DELIVERY_LOG_KEEP_MS: i64 = 7 * 86_400_000;

/// One row of an alert's delivery log (`GET /v1/alerts/{id}/deliveries`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryLogRow {
    /// The firing's trigger time, Unix milliseconds.
    pub trigger_ms: i64,
    /// Which attempt (1 to 3; a redelivery starts again at 1); a pending row names the next.
    pub attempt: i64,
    /// When it ended (a pending row: when it is due), Unix milliseconds.
    pub at_ms: i64,
    /// `delivered`, `failed`, `timeout`, `refused`, `blocked` or `pending`.
    pub outcome: String,
    /// The answer's status, when one came.
    pub status: Option<i64>,
    /// How long it took, milliseconds (none for a pending row).
    pub latency_ms: Option<i64>,
    /// What went wrong, when it did.
    pub error: Option<String>,
    /// A test send's (`POST /v1/alerts/{id}/test`), not a firing's.
    pub test: bool,
}

/// What a redelivery request came to ([`Store::redeliver`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redelivery {
    /// Queued again: a new delivery of the same body.
    Queued,
    /// No such firing of this account's alert within the log's 7 days.
    Unknown,
    /// The firing's delivery is still pending.
    Pending,
}

impl Store {
    /// Adds attempts of webhook deliveries (each already counted in its delivery's `attempts`)
    /// to their alerts' delivery logs, keeping the newest [`ATTEMPTS_PER_ALERT_MAX`] of each
    /// alert and nothing older than [`DELIVERY_LOG_KEEP_MS`]; each step's statements pipelined
    /// (three round trips for the lot on PostgreSQL). Telegram messages have no log.
    pub(super) fn log_attempts(&self, outcomes: &[&Outcome]) -> Result<(), StoreError> {
        if outcomes.is_empty() {
            return Ok(());
        }
        if self.db.is_postgres() {
            return self.log_attempts_at_once(outcomes);
        }
        let rows: Vec<_> = outcomes
            .iter()
            .map(|o| {
                let (status, error) = match &o.result {
                    AttemptResult::Delivered { status } => (Some(i64::from(*status)), None),
                    AttemptResult::Failed { status, error, .. } => (status.map(i64::from), Some(error.as_str())),
                };
                vals![o.id, o.at_ms, o.result.outcome(), status, o.latency_ms, error, o.pulled_ms].to_vec()
            })
            .collect();
        let added = self.db.execute_each(
            "INSERT INTO attempts (outbox_id, alert_id, trigger_ms, attempt, at_ms, outcome, status, latency_ms, error, pulled_ms)
             SELECT id, alert_id, trigger_ms, attempts, ?2, ?3, ?4, ?5, ?6, ?7 FROM outbox WHERE id = ?1 AND channel = 'webhook'",
            &rows,
        )?;
        let trims: Vec<_> = outcomes
            .iter()
            .zip(&added)
            .filter(|(_, &n)| n > 0)
            .map(|(o, _)| vals![o.id, ATTEMPTS_PER_ALERT_MAX].to_vec())
            .collect();
        if trims.is_empty() {
            return Ok(());
        }
        self.db.execute_each(
            "DELETE FROM attempts WHERE alert_id = (SELECT alert_id FROM outbox WHERE id = ?1) AND id <= (
                SELECT a.id FROM attempts a WHERE a.alert_id = (SELECT alert_id FROM outbox WHERE id = ?1)
                ORDER BY a.id DESC LIMIT 1 OFFSET ?2)",
            &trims,
        )?;
        let newest = outcomes.iter().map(|o| o.at_ms).max().unwrap_or(0);
        self.db.execute("DELETE FROM attempts WHERE at_ms < ?1", vals![newest - DELIVERY_LOG_KEEP_MS])?;
        Ok(())
    }

    /// [`Store::log_attempts`] on PostgreSQL: one statement for the inserts, one for the trims
    /// of the alerts it took over their bound, one for the old rows, whatever the batch's size.
    fn log_attempts_at_once(&self, outcomes: &[&Outcome]) -> Result<(), StoreError> {
        self.db.custom_plans()?;
        let (status, error): (Vec<Option<i64>>, Vec<Option<&str>>) = outcomes
            .iter()
            .map(|o| match &o.result {
                AttemptResult::Delivered { status } => (Some(i64::from(*status)), None),
                AttemptResult::Failed { status, error, .. } => (status.map(i64::from), Some(error.as_str())),
            })
            .unzip();
        let cols = [
            Col::I64(outcomes.iter().map(|o| o.id).collect()),
            Col::I64(outcomes.iter().map(|o| o.at_ms).collect()),
            Col::Str(outcomes.iter().map(|o| o.result.outcome()).collect()),
            Col::OptI64(status),
            Col::I64(outcomes.iter().map(|o| o.latency_ms).collect()),
            Col::OptStr(error),
            Col::I64((0..outcomes.len() as i64).collect()),
            Col::I64(outcomes.iter().map(|o| o.pulled_ms).collect()),
        ];
        // In the outcomes' order, so the log's ids follow it as one statement a row did.
        let added = self.db.query_columns(
            "INSERT INTO attempts (outbox_id, alert_id, trigger_ms, attempt, at_ms, outcome, status, latency_ms, error, pulled_ms)
             SELECT o.id, o.alert_id, o.trigger_ms, o.attempts, u.at, u.outcome, u.st, u.lat, u.err, u.pulled
             FROM unnest(?1::bigint[], ?2::bigint[], ?3::text[], ?4::bigint[], ?5::bigint[], ?6::text[], ?7::bigint[],
                ?8::bigint[]) AS u(uid, at, outcome, st, lat, err, k, pulled)
             JOIN outbox o ON o.id = u.uid WHERE o.channel = 'webhook' ORDER BY u.k RETURNING alert_id",
            &cols,
            |r| r.get::<i64>(0),
        )?;
        if !added.is_empty() {
            let mut alerts = added;
            alerts.sort_unstable();
            alerts.dedup();
            let trim = format!(
                "DELETE FROM attempts WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY alert_id
                    ORDER BY id DESC) AS n FROM attempts WHERE alert_id = ANY(?1::bigint[])) r
                 WHERE r.n > {ATTEMPTS_PER_ALERT_MAX}) RETURNING id"
            );
            self.db.query_columns(&trim, &[Col::I64(alerts)], |_| Ok(()))?;
        }
        let newest = outcomes.iter().map(|o| o.at_ms).max().unwrap_or(0);
        self.db.execute("DELETE FROM attempts WHERE at_ms < ?1", vals![newest - DELIVERY_LOG_KEEP_MS])?;
        Ok(())
    }

    /// Adds a test send of alert `alert_id`'s webhook at `at_ms` to its delivery log (`test`,
    /// attempt 1, the send's time as its trigger time), keeping the log's bounds.
    pub fn log_test_attempt(
        &self,
        alert_id: i64,
        at_ms: i64,
        result: &AttemptResult,
        latency_ms: i64,
    ) -> Result<(), StoreError> {
        let (status, error) = match result {
            AttemptResult::Delivered { status } => (Some(i64::from(*status)), None),
            AttemptResult::Failed { status, error, .. } => (status.map(i64::from), Some(error.as_str())),
        };
        self.db.execute(
            "INSERT INTO attempts (outbox_id, alert_id, trigger_ms, attempt, at_ms, outcome, status, latency_ms, error, test)
             VALUES (0, ?1, ?2, 1, ?2, ?3, ?4, ?5, ?6, TRUE)",
            vals![alert_id, at_ms, result.outcome(), status, latency_ms, error],
        )?;
        self.db.execute(
            "DELETE FROM attempts WHERE alert_id = ?1 AND id <= (
                SELECT a.id FROM attempts a WHERE a.alert_id = ?1 ORDER BY a.id DESC LIMIT 1 OFFSET ?2)",
            vals![alert_id, ATTEMPTS_PER_ALERT_MAX],
        )?;
        Ok(())
    }

    /// The delivery log of `account_id`'s alert `alert_id`, newest first, at most `limit` rows:
    /// every attempt of the last 7 days and every delivery not attempted yet (`pending`, at its
    /// due time). `None` when the account has no such alert (or it was deleted, expired or
    /// delisted: a deleted alert is gone, its log with it).
    pub fn delivery_log(
        &self,
        account_id: i64,
        alert_id: i64,
        limit: u32,
    ) -> Result<Option<Vec<DeliveryLogRow>>, StoreError> {
        let owned = self.db.query_opt(
            "SELECT id FROM alerts WHERE id = ?1 AND account_id = ?2 AND deleted_ms IS NULL",
            vals![alert_id, account_id],
            |r| r.get::<i64>(0),
        )?;
        if owned.is_none() {
            return Ok(None);
        }
        let row = |r: &Row<'_>| {
            Ok(DeliveryLogRow {
                trigger_ms: r.get(0)?,
                attempt: r.get(1)?,
                at_ms: r.get(2)?,
                outcome: r.get(3)?,
                status: r.get(4)?,
                latency_ms: r.get(5)?,
                error: r.get(6)?,
                test: r.get(7)?,
            })
        };
        let mut rows = self.db.query(
            "SELECT trigger_ms, attempts + 1, next_attempt_ms, 'pending', NULL, NULL, NULL, FALSE FROM outbox
             WHERE alert_id = ?1 AND channel = 'webhook' AND state = 'pending'",
            vals![alert_id],
            row,
        )?;
        rows.extend(self.db.query(
            "SELECT trigger_ms, attempt, at_ms, outcome, status, latency_ms, error, test FROM attempts
             WHERE alert_id = ?1 ORDER BY id DESC LIMIT ?2",
            vals![alert_id, i64::from(limit)],
            row,
        )?);
        rows.sort_by_key(|r| std::cmp::Reverse(r.at_ms));
        rows.truncate(limit as usize);
        Ok(Some(rows))
    }

    /// Queues the webhook of `account_id`'s alert `alert_id` fired at `trigger_ms` again: a new
    /// delivery with the same body, the same pair and the §6 schedule, when the firing is at
    /// most 7 days old (at `now_ms`) and no delivery of it is still pending.
    pub fn redeliver(
        &self,
        account_id: i64,
        alert_id: i64,
        trigger_ms: i64,
        now_ms: i64,
    ) -> Result<Redelivery, StoreError> {
        let rows = self.db.query(
            "SELECT o.state, o.url, o.body FROM outbox o JOIN alerts a ON a.id = o.alert_id
             WHERE o.alert_id = ?1 AND a.account_id = ?2 AND a.deleted_ms IS NULL AND o.trigger_ms = ?3
                AND o.channel = 'webhook'
             ORDER BY o.id DESC",
            vals![alert_id, account_id, trigger_ms],
            |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get::<String>(2)?)),
        )?;
        let Some((_, url, body)) = rows.first() else { return Ok(Redelivery::Unknown) };
        if trigger_ms < now_ms - DELIVERY_LOG_KEEP_MS {
            return Ok(Redelivery::Unknown);
        }
        if rows.iter().any(|(state, _, _)| state == "pending") {
            return Ok(Redelivery::Pending);
        }
        self.db.execute(
            "INSERT INTO outbox (alert_id, account_id, url, body, trigger_ms, state, attempts, next_attempt_ms, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, ?6)",
            vals![alert_id, account_id, url, body, trigger_ms, now_ms],
        )?;
        Ok(Redelivery::Queued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;
    use crate::store::FiringRecord;
    use crate::text::Texts;

    /// Each attempt keeps when its delivery was taken to be sent (`pulled_ms`, the storm's
    /// "pulled" stage), one batch of outcomes written at once (PostgreSQL) or row by row (SQLite).
    #[test]
    fn an_attempt_keeps_when_its_delivery_was_pulled() {
        on_each_backend("pulled", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let mut hooked = alert(a, "binance", "BTCUSDT");
            hooked.webhook_url = Some("https://example.com/h".into());
            let id = s.insert_alert(&hooked).expect("insert").id;
            let firings: Vec<_> = (0..2).map(|i| FiringRecord::at_price(id, 300, 7_000 + i, false)).collect();
            s.record_firings(&firings, &Texts).expect("record");
            let due = s.due_deliveries(7_500, 10).expect("due");
            assert_eq!(due.len(), 2);
            let outcomes: Vec<Outcome> = due
                .iter()
                .enumerate()
                .map(|(i, r)| Outcome {
                    id: r.id,
                    result: AttemptResult::Delivered { status: 200 },
                    at_ms: 8_000 + i as i64,
                    latency_ms: 3,
                    pulled_ms: 7_600 + i as i64,
                })
                .collect();
            s.record_attempts(&outcomes, |_, _| None).expect("recorded");
            let logged =
                s.db.query("SELECT outbox_id, pulled_ms FROM attempts ORDER BY id", &[], |r| {
                    Ok((r.get::<i64>(0)?, r.get::<Option<i64>>(1)?))
                })
                .expect("the log");
            assert_eq!(logged, [(due[0].id, Some(7_600)), (due[1].id, Some(7_601))]);
        });
    }
}
