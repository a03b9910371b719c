//! The outbox: deliveries waiting (webhooks and Telegram messages), read round-robin across
//! accounts, and each attempt's outcome recorded with the schedule the caller hands in.

use std::collections::HashMap;

use super::conn::{unknown, Store};
use super::render::Render;
use crate::db::{vals, Col, Db, Row, StoreError};

/// Due deliveries of one account returned by one [`Store::due_deliveries`] at most (fewer when
/// many accounts share the scan), so one account's backlog cannot fill a scan; its further rows
/// come in later scans, as earlier ones are settled.
pub const DUE_PER_ACCOUNT_MAX: u32 = 256;

/// One webhook delivery (a firing of an alert with a webhook), as the outbox holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxRow {
    /// Delivery id.
    pub id: i64,
    /// The alert.
    pub alert_id: i64,
    /// Target URL (checked again at every attempt).
    pub url: String,
    /// The `alert.triggered` body, the same for every attempt.
    pub body: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Attempts made.
    pub attempts: i64,
    /// When the first attempt failed.
    pub first_failure_ms: Option<i64>,
    /// When the next attempt is due.
    pub next_attempt_ms: i64,
    /// HTTP status of the last answer, if any.
    pub last_status: Option<i64>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// The account that owns the alert (the unit of the sender's fairness).
    pub account_id: i64,
    /// Where it goes: the webhook URL, or the account's Telegram chat (`url` is then the chat id).
    pub channel: Channel,
    /// The firing's trigger time (with `alert_id`, the pair that identifies it: [`message_id`](crate::store::message_id)).
    pub trigger_ms: i64,
}

/// The channel of an outbox row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// A POST of the event body to the alert's `webhook_url`.
    Webhook,
    /// A Bot API `sendMessage` to the account's chat.
    Telegram,
}

impl Channel {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Webhook => "webhook",
            Channel::Telegram => "telegram",
        }
    }
}

/// Queues a Telegram message for `account_id`'s chat, when it has one: an outbox row due at
/// `now_ms`, in the caller's transaction. `text` is only made when a message is queued.
pub(super) fn queue_telegram(
    db: &Db,
    texts: &dyn Render,
    account_id: i64,
    alert_id: i64,
    text: impl FnOnce() -> String,
    now_ms: i64,
) -> Result<(), StoreError> {
    let chat = db.query_opt("SELECT telegram_chat_id FROM channels WHERE account_id = ?1", vals![account_id], |r| {
        r.get::<Option<String>>(0)
    })?;
    let Some(Some(chat)) = chat else { return Ok(()) };
    let body = texts.telegram_body(&chat, &text());
    db.execute(
        "INSERT INTO outbox (alert_id, account_id, url, body, trigger_ms, state, attempts, next_attempt_ms, created_ms, channel)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?5, ?5, 'telegram')",
        vals![alert_id, account_id, &chat, &body, now_ms],
    )?;
    Ok(())
}

/// The channel column back: every stored value is one this build writes.
pub(super) fn channel_column(r: &Row<'_>, col: usize) -> Result<Channel, StoreError> {
    match r.get::<String>(col)?.as_str() {
        "webhook" => Ok(Channel::Webhook),
        "telegram" => Ok(Channel::Telegram),
        other => Err(unknown(format!("outbox channel '{other}'"))),
    }
}

/// What one delivery attempt came to, and when: the unit the sender records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Delivery id.
    pub id: i64,
    /// What the attempt came to.
    pub result: AttemptResult,
    /// When it ended: the schedule is measured from here, however late it is recorded.
    pub at_ms: i64,
    /// How long it took, milliseconds.
    pub latency_ms: i64,
    /// When its delivery was taken to be sent: a worker's fetch of its message, one process's
    /// read of its due row (the delivery log's `pulled_ms`; the storm's "pulled" stage).
    pub pulled_ms: i64,
}

/// What one delivery attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    /// A 2xx answer.
    Delivered {
        /// The status.
        status: u16,
    },
    /// A non-2xx answer, a timeout, a refused address or a connection error.
    Failed {
        /// The status, when an answer came.
        status: Option<u16>,
        /// What went wrong.
        error: String,
        /// Which kind of failure, as the delivery log names it.
        kind: FailKind,
    },
}

/// How an attempt failed, as the delivery log names it (`decisions.md` §13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// An answer that was not 2xx, or one cut short (`failed`).
    Answer,
    /// No full answer within the attempt's time (`timeout`).
    Timeout,
    /// No connection (`refused`).
    Refused,
    /// The public-address check refused the target (`blocked`).
    Blocked,
}

impl FailKind {
    /// Its name in the delivery log.
    pub fn as_str(self) -> &'static str {
        match self {
            FailKind::Answer => "failed",
            FailKind::Timeout => "timeout",
            FailKind::Refused => "refused",
            FailKind::Blocked => "blocked",
        }
    }
}

impl AttemptResult {
    /// Its outcome in the delivery log: `delivered`, or the failure's kind.
    pub fn outcome(&self) -> &'static str {
        match self {
            AttemptResult::Delivered { .. } => "delivered",
            AttemptResult::Failed { kind, .. } => kind.as_str(),
        }
    }
}

/// When the attempt after `attempts_done` failed attempts is due, measured from the first
/// failure (`None`: the delivery has failed for good). The policy is delivery's
/// (`rampart_delivery::schedule::next_attempt_ms`); the store records what it answers.
pub type RetrySchedule = fn(attempts_done: i64, first_failure_ms: i64) -> Option<i64>;

/// Records a delivered attempt: `?1` the row, `?2` the status, `?3` the time.
const DELIVERED_SQL: &str = "UPDATE outbox SET state = 'delivered', attempts = attempts + 1, last_status = ?2,
    last_error = NULL, done_ms = ?3 WHERE id = ?1";

const OUTBOX_COLUMNS: &str = "id, alert_id, url, body, state, attempts, first_failure_ms, next_attempt_ms, \
     last_status, last_error, account_id, channel, trigger_ms";

fn outbox_row(r: &Row<'_>) -> Result<OutboxRow, StoreError> {
    Ok(OutboxRow {
        id: r.get(0)?,
        alert_id: r.get(1)?,
        url: r.get(2)?,
        body: r.get(3)?,
        state: r.get(4)?,
        attempts: r.get(5)?,
        first_failure_ms: r.get(6)?,
        next_attempt_ms: r.get(7)?,
        last_status: r.get(8)?,
        last_error: r.get(9)?,
        account_id: r.get(10)?,
        channel: channel_column(r, 11)?,
        trigger_ms: r.get(12)?,
    })
}

/// A row [`Store::lock_outbox_rows`] locked: its id, attempts and first failure.
pub(super) type HeldRow = (i64, i64, Option<i64>);

/// The columns of [`Store::record_failures_at_once`]'s statement, a failure a row.
struct FailureColumns<'a> {
    ids: Vec<i64>,
    attempts: Vec<i64>,
    first: Vec<i64>,
    next: Vec<Option<i64>>,
    status: Vec<Option<i64>>,
    error: Vec<&'a str>,
    at: Vec<i64>,
}

impl<'a> FailureColumns<'a> {
    fn with_capacity(n: usize) -> Self {
        FailureColumns {
            ids: Vec::with_capacity(n),
            attempts: Vec::with_capacity(n),
            first: Vec::with_capacity(n),
            next: Vec::with_capacity(n),
            status: Vec::with_capacity(n),
            error: Vec::with_capacity(n),
            at: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, o: &Outcome, attempts: i64, first: i64, next: Option<i64>, status: Option<i64>, error: &'a str) {
        self.ids.push(o.id);
        self.attempts.push(attempts);
        self.first.push(first);
        self.next.push(next);
        self.status.push(status);
        self.error.push(error);
        self.at.push(o.at_ms);
    }

    fn columns(self) -> [Col<'a>; 7] {
        [
            Col::I64(self.ids),
            Col::I64(self.attempts),
            Col::I64(self.first),
            Col::OptI64(self.next),
            Col::OptI64(self.status),
            Col::Str(self.error),
            Col::I64(self.at),
        ]
    }
}

/// Takes one item of each queue in turn, then the next of each, until `limit` or all are taken.
fn round_robin<T>(mut queues: Vec<std::vec::IntoIter<T>>, limit: usize) -> Vec<T> {
    let mut out = Vec::new();
    while out.len() < limit && !queues.is_empty() {
        queues.retain(|q| q.len() > 0);
        for q in &mut queues {
            if out.len() >= limit {
                break;
            }
            if let Some(item) = q.next() {
                out.push(item);
            }
        }
    }
    out
}

impl Store {
    /// Pending deliveries due at `now_ms`, round-robin across accounts: every account's soonest
    /// due row first, then every account's second, and so on; at most `limit` rows, at most
    /// [`DUE_PER_ACCOUNT_MAX`] of one account, and at most `limit` accounts looked at (lowest ids
    /// first; the others are looked at in later scans, as earlier ones' rows are settled).
    ///
    /// Rationale: ordering by due time alone let one account's thousands of due rows fill the
    /// whole scan, so another account's row was not even seen until they drained. Each account is
    /// found and read by an index seek (`outbox_pending_account`), so the cost follows the
    /// accounts and rows returned, not the size of the backlog.
    pub fn due_deliveries(&self, now_ms: i64, limit: u32) -> Result<Vec<OutboxRow>, StoreError> {
        self.due_deliveries_past(now_ms, limit, &HashMap::new())
    }

    /// [`Store::due_deliveries`] less the rows `held` (their ids, with their accounts: a sender's
    /// attempts in flight and outcomes not yet written, still pending here): each account's
    /// rows are read past its held ones, so a scan's rows of an account are ones not held, up to
    /// its share.
    ///
    /// Rationale: the held rows are an account's oldest due rows; read among its share they
    /// took it whole, and one account's storm started no more rows per scan than its share less
    /// the rows in flight (issue #59: 54 at the median, the storm's deliveries paced by scans).
    pub fn due_deliveries_past(
        &self,
        now_ms: i64,
        limit: u32,
        held: &HashMap<i64, i64>,
    ) -> Result<Vec<OutboxRow>, StoreError> {
        let accounts = self.pending_accounts(limit as usize)?;
        let per_account = (limit as usize / accounts.len().max(1)).clamp(1, DUE_PER_ACCOUNT_MAX as usize);
        let mut held_of: HashMap<i64, usize> = HashMap::new();
        for account in held.values() {
            *held_of.entry(*account).or_default() += 1;
        }
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE state = 'pending' AND account_id = ?1 AND next_attempt_ms <= ?2
             ORDER BY next_attempt_ms, id LIMIT ?3"
        );
        let mut queues = Vec::with_capacity(accounts.len());
        for account in accounts {
            let read = per_account + held_of.get(&account).copied().unwrap_or(0);
            let rows = self.db.query(&sql, vals![account, now_ms, read as i64], outbox_row)?;
            let rows: Vec<OutboxRow> =
                rows.into_iter().filter(|r| !held.contains_key(&r.id)).take(per_account).collect();
            if !rows.is_empty() {
                queues.push(rows.into_iter());
            }
        }
        Ok(round_robin(queues, limit as usize))
    }

    /// Accounts with pending deliveries (due or not), lowest id first, at most `max`.
    fn pending_accounts(&self, max: usize) -> Result<Vec<i64>, StoreError> {
        let mut accounts = Vec::new();
        let mut after = i64::MIN;
        while accounts.len() < max {
            let next = self.db.query_opt(
                "SELECT account_id FROM outbox WHERE state = 'pending' AND account_id > ?1 ORDER BY account_id LIMIT 1",
                vals![after],
                |r| r.get::<i64>(0),
            )?;
            let Some(next) = next else { break };
            accounts.push(next);
            after = next;
        }
        Ok(accounts)
    }

    /// Records several attempts' outcomes in one transaction, each at its own time: delivered,
    /// rescheduled when `schedule` says when, or failed for good when it says never. For each
    /// outcome, in order, the time its delivery is due again when it was rescheduled. On an
    /// error nothing is recorded.
    pub fn record_attempts(
        &self,
        outcomes: &[Outcome],
        schedule: RetrySchedule,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        self.db.in_transaction_of(|| {
            let held = self.lock_outbox_rows(outcomes.iter().map(|o| o.id))?;
            // Deliveries are one statement for the lot on PostgreSQL (one each on SQLite), and
            // so are failures when each row is there once (`record_failures_at_once`).
            let delivered: Vec<(i64, i64, i64)> = outcomes
                .iter()
                .filter_map(|o| match o.result {
                    AttemptResult::Delivered { status } => Some((o.id, i64::from(status), o.at_ms)),
                    AttemptResult::Failed { .. } => None,
                })
                .collect();
            self.record_delivered(&delivered)?;
            let due = match self.record_failures_at_once(outcomes, &held, schedule)? {
                Some(due) => due,
                None => self.record_failures_one_by_one(outcomes, schedule)?,
            };
            let failed_first = outcomes.iter().filter(|o| matches!(o.result, AttemptResult::Failed { .. }));
            let logged: Vec<&Outcome> = failed_first
                .chain(outcomes.iter().filter(|o| matches!(o.result, AttemptResult::Delivered { .. })))
                .collect();
            self.log_attempts(&logged)?;
            Ok(due)
        })
    }

    /// [`Store::record_attempts`]'s failures one statement a row and a read before each: on
    /// SQLite, and on PostgreSQL when a row is there twice or was not found by the lock.
    fn record_failures_one_by_one(
        &self,
        outcomes: &[Outcome],
        schedule: RetrySchedule,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        let mut due = Vec::with_capacity(outcomes.len());
        for o in outcomes {
            due.push(match &o.result {
                AttemptResult::Failed { status, error, .. } => {
                    self.record_failure(o.id, (*status, error), o.at_ms, schedule)?
                }
                AttemptResult::Delivered { .. } => None,
            });
        }
        Ok(due)
    }

    /// [`Store::record_attempts`]'s failures in one statement whatever their number, each row's
    /// attempts and first failure as its lock read them (`held`), the schedule asked here; `None`
    /// (nothing written) where that cannot be done: on SQLite, or when a row is there twice or
    /// was not found, which the one-by-one way records (or refuses) as it always did.
    ///
    /// Rationale: each failure read its row and then updated it, two round trips a failure, all
    /// inside the transaction that holds the batch's rows locked; a worker thread whose hundreds of
    /// hanging attempts time out together recorded them in hundreds of round trips.
    fn record_failures_at_once(
        &self,
        outcomes: &[Outcome],
        held: &[HeldRow],
        schedule: RetrySchedule,
    ) -> Result<Option<Vec<Option<i64>>>, StoreError> {
        let failed: Vec<&Outcome> =
            outcomes.iter().filter(|o| matches!(o.result, AttemptResult::Failed { .. })).collect();
        if failed.is_empty() {
            return Ok(Some(vec![None; outcomes.len()]));
        }
        if !self.db.is_postgres() || held.len() != outcomes.len() {
            return Ok(None);
        }
        let held: HashMap<i64, (i64, Option<i64>)> = held.iter().map(|&(id, n, first)| (id, (n, first))).collect();
        let mut rows = FailureColumns::with_capacity(failed.len());
        let mut due = Vec::with_capacity(outcomes.len());
        for o in outcomes {
            let AttemptResult::Failed { status, error, .. } = &o.result else {
                due.push(None);
                continue;
            };
            let Some(&(attempts, first)) = held.get(&o.id) else { return Ok(None) };
            let (attempts, first) = (attempts + 1, first.unwrap_or(o.at_ms));
            let next = schedule(attempts, first);
            if next.is_none() {
                tracing::warn!(delivery = o.id, attempts, "webhook failed for good: {error}");
            }
            rows.push(o, attempts, first, next, status.map(i64::from), error);
            due.push(next);
        }
        debug_assert_eq!(rows.ids.len(), failed.len());
        self.db.custom_plans()?;
        // A failure with a next time is rescheduled (its state stays), one without failed for
        // good: the two statements the one-by-one way runs, as one.
        let sql = "UPDATE outbox SET state = CASE WHEN u.next IS NULL THEN 'failed' ELSE outbox.state END,
                attempts = u.n, first_failure_ms = u.first,
                next_attempt_ms = COALESCE(u.next, outbox.next_attempt_ms), last_status = u.st, last_error = u.err,
                done_ms = CASE WHEN u.next IS NULL THEN u.at ELSE outbox.done_ms END
            FROM unnest(?1::bigint[], ?2::bigint[], ?3::bigint[], ?4::bigint[], ?5::bigint[], ?6::text[], ?7::bigint[])
                AS u(uid, n, first, next, st, err, at)
            WHERE outbox.id = u.uid RETURNING outbox.id";
        let updated = self.db.query_columns(sql, &rows.columns(), |r| r.get::<i64>(0))?;
        debug_assert_eq!(updated.len(), failed.len(), "every failed row was held, so updated");
        Ok(Some(due))
    }

    /// Marks deliveries `(id, status, at_ms)` delivered: one statement on PostgreSQL when each
    /// id is there once (an update changes a row once), else one per delivery.
    fn record_delivered(&self, delivered: &[(i64, i64, i64)]) -> Result<(), StoreError> {
        let mut ids: Vec<i64> = delivered.iter().map(|d| d.0).collect();
        ids.sort_unstable();
        ids.dedup();
        if self.db.is_postgres() && ids.len() == delivered.len() && !ids.is_empty() {
            self.db.custom_plans()?;
            let sql = "UPDATE outbox SET state = 'delivered', attempts = attempts + 1, last_status = u.st,
                    last_error = NULL, done_ms = u.at
                FROM unnest(?1::bigint[], ?2::bigint[], ?3::bigint[]) AS u(uid, st, at)
                WHERE outbox.id = u.uid RETURNING outbox.id";
            let cols = [
                Col::I64(delivered.iter().map(|d| d.0).collect()),
                Col::I64(delivered.iter().map(|d| d.1).collect()),
                Col::I64(delivered.iter().map(|d| d.2).collect()),
            ];
            self.db.query_columns(sql, &cols, |_| Ok(()))?;
            return Ok(());
        }
        let sets: Vec<_> = delivered.iter().map(|&(id, status, at)| vals![id, status, at].to_vec()).collect();
        self.db.execute_each(DELIVERED_SQL, &sets)?;
        Ok(())
    }

    /// Locks outbox rows (PostgreSQL; SQLite's write lock serializes every writer) in ascending
    /// id order, as every other multi-row writer of the outbox (the publisher's marks) takes
    /// them: two transactions that both change rows of one batch wait for each other instead of
    /// deadlocking (which aborted one, and a worker's outcomes were then sent again).
    ///
    /// What the lock read: each row found, its attempts and first failure (empty on SQLite).
    pub(super) fn lock_outbox_rows(&self, ids: impl Iterator<Item = i64>) -> Result<Vec<HeldRow>, StoreError> {
        if !self.db.is_postgres() {
            return Ok(Vec::new());
        }
        let mut ids: Vec<i64> = ids.collect();
        ids.sort_unstable();
        ids.dedup();
        // One statement, the rows locked in the order it reads them: ascending ids; planned
        // for its array (`outbox_rows` says why).
        self.db.custom_plans()?;
        let sql =
            "SELECT id, attempts, first_failure_ms FROM outbox WHERE id = ANY(?1::bigint[]) ORDER BY id FOR UPDATE";
        self.db.query_columns(sql, &[Col::I64(ids)], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    }

    /// Records a failed attempt of delivery `id` at `now_ms`: rescheduled (the time it is due
    /// again) or failed for good (`None`).
    fn record_failure(
        &self,
        id: i64,
        (status, error): (Option<u16>, &str),
        now_ms: i64,
        schedule: RetrySchedule,
    ) -> Result<Option<i64>, StoreError> {
        let (attempts, first): (i64, Option<i64>) =
            self.db.query_one("SELECT attempts, first_failure_ms FROM outbox WHERE id = ?1", vals![id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let attempts = attempts + 1;
        let first = first.unwrap_or(now_ms);
        let status = status.map(i64::from);
        match schedule(attempts, first) {
            Some(next) => {
                self.db.execute(
                    "UPDATE outbox SET attempts = ?2, first_failure_ms = ?3, next_attempt_ms = ?4, last_status = ?5,
                        last_error = ?6 WHERE id = ?1",
                    vals![id, attempts, first, next, status, error],
                )?;
                Ok(Some(next))
            }
            None => {
                self.db.execute(
                    "UPDATE outbox SET state = 'failed', attempts = ?2, first_failure_ms = ?3, last_status = ?4,
                        last_error = ?5, done_ms = ?6 WHERE id = ?1",
                    vals![id, attempts, first, status, error, now_ms],
                )?;
                tracing::warn!(delivery = id, attempts, "webhook failed for good: {error}");
                Ok(None)
            }
        }
    }

    /// One outbox row by id.
    pub fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>, StoreError> {
        let sql = format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?1");
        self.db.query_opt(&sql, vals![id], outbox_row)
    }

    /// Several deliveries by id, in order (one statement on PostgreSQL, planned for its array:
    /// [`Db::custom_plans`](crate::db::Db::custom_plans)).
    ///
    /// Rationale: a generic plan made while the outbox was small scans the whole table; it was
    /// kept through a storm's 10 000 rows, 9.8 ms a read of 10 rows, the workers' largest cost in
    /// PostgreSQL (`pg_stat_statements` in the harness's storm, issue #59).
    pub fn outbox_rows(&self, ids: &[i64]) -> Result<Vec<Option<OutboxRow>>, StoreError> {
        if self.db.is_postgres() {
            let sql = format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ANY(?1::bigint[])");
            let read = || {
                self.db.custom_plans()?;
                self.db.query_columns(&sql, &[Col::I64(ids.to_vec())], outbox_row)
            };
            let found: std::collections::HashMap<i64, OutboxRow> =
                self.db.in_transaction_of(read)?.into_iter().map(|r| (r.id, r)).collect();
            return Ok(ids.iter().map(|id| found.get(id).cloned()).collect());
        }
        let sql = format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?1");
        let sets: Vec<_> = ids.iter().map(|id| vals![*id].to_vec()).collect();
        self.db.query_opt_each(&sql, &sets, outbox_row)
    }

    /// Every webhook delivery of an API alert, by id (tests and diagnostics; Telegram rows are
    /// left out: a site alert's id may equal an API alert's).
    pub fn deliveries_of(&self, alert_id: i64) -> Result<Vec<OutboxRow>, StoreError> {
        let sql =
            format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE alert_id = ?1 AND channel = 'webhook' ORDER BY id");
        self.db.query(&sql, vals![alert_id], outbox_row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;
    use crate::store::FiringRecord;
    use crate::text::Texts;

    /// A scan reads past the rows its sender holds: an account's share is of rows not held, and
    /// one account's held rows take nothing from another's.
    #[test]
    fn a_scan_reads_past_the_rows_held() {
        on_each_backend("held", |at| {
            let mut s = at.open();
            let mut fired = Vec::new();
            for name in ["a", "b"] {
                let account = s.create_account_with_key("developer", None, 1).expect(name).account_id;
                let mut hooked = alert(account, "binance", "BTCUSDT");
                hooked.webhook_url = Some("https://example.com/h".into());
                let id = s.insert_alert(&hooked).expect("insert").id;
                let firings: Vec<_> = (0..6).map(|i| FiringRecord::at_price(id, 300, 7_000 + i, false)).collect();
                s.record_firings(&firings, &Texts).expect("record");
                fired.push(account);
            }
            let all = s.due_deliveries(8_000, 100).expect("due");
            let of = |rows: &[OutboxRow], account| -> Vec<i64> {
                rows.iter().filter(|r| r.account_id == account).map(|r| r.id).collect()
            };
            let (a, b) = (of(&all, fired[0]), of(&all, fired[1]));
            assert_eq!((a.len(), b.len()), (6, 6));
            // a's four oldest held: a scan of 4 (2 an account) reads a's next two and b's first two.
            let held: HashMap<i64, i64> = a[..4].iter().map(|&id| (id, fired[0])).collect();
            let past = s.due_deliveries_past(8_000, 4, &held).expect("due");
            assert_eq!(of(&past, fired[0]), a[4..]);
            assert_eq!(of(&past, fired[1]), b[..2]);
            // Without them held, the share is the oldest again.
            let plain = s.due_deliveries(8_000, 4).expect("due");
            assert_eq!(of(&plain, fired[0]), a[..2]);
        });
    }

    /// Three tries, ten seconds apart from the first failure.
    fn three_tries(attempts: i64, first: i64) -> Option<i64> {
        (attempts < 3).then_some(first + 10_000 * attempts)
    }

    /// Rounds of seeded outcomes (deliveries, failures with and without an answer, a row twice),
    /// recorded in batches: PostgreSQL's failures in one statement
    /// (`record_failures_at_once`) leave every row and answer every due time as SQLite's one by
    /// one do.
    #[test]
    fn failures_recorded_at_once_match_those_recorded_one_by_one() {
        type Seen = (Vec<Vec<Option<i64>>>, Vec<(String, i64, Option<i64>, i64, Option<i64>, Option<String>)>);
        let seen: std::sync::Mutex<Vec<Seen>> = std::sync::Mutex::new(Vec::new());
        on_each_backend("failures-at-once", |at| {
            let mut s = at.open();
            let account = s.create_account_with_key("developer", None, 1).expect("account").account_id;
            let mut hooked = alert(account, "binance", "BTCUSDT");
            hooked.webhook_url = Some("https://example.com/h".into());
            let alert_id = s.insert_alert(&hooked).expect("insert").id;
            let firings: Vec<_> = (0..48).map(|i| FiringRecord::at_price(alert_id, 300, 7_000 + i, false)).collect();
            s.record_firings(&firings, &Texts).expect("record");
            let ids: Vec<i64> = s.deliveries_of(alert_id).expect("rows").iter().map(|r| r.id).collect();
            let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
            let mut next = |n: u64| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (seed >> 33) % n
            };
            let mut dues = Vec::new();
            for round in 0..6_i64 {
                let pending: Vec<i64> = ids
                    .iter()
                    .copied()
                    .filter(|&id| s.outbox_row(id).expect("row").is_some_and(|r| r.state == "pending"))
                    .collect();
                let mut outcomes = Vec::new();
                for &id in &pending {
                    if next(3) == 0 {
                        continue;
                    }
                    let result = match next(4) {
                        0 => AttemptResult::Delivered { status: 200 },
                        1 => AttemptResult::Failed { status: None, error: "timeout".into(), kind: FailKind::Timeout },
                        _ => AttemptResult::Failed {
                            status: Some(500 + next(4) as u16),
                            error: format!("status {round}"),
                            kind: FailKind::Answer,
                        },
                    };
                    let at_ms = 10_000 + round * 20_000 + next(1_000) as i64;
                    outcomes.push(Outcome { id, result, at_ms, latency_ms: 5, pulled_ms: at_ms - 5 });
                }
                if round == 3 {
                    // A row twice in one batch: recorded one by one on both.
                    if let Some(first) = outcomes.iter().find(|o| matches!(o.result, AttemptResult::Failed { .. })) {
                        outcomes.push(Outcome { at_ms: first.at_ms + 1, ..first.clone() });
                    }
                }
                dues.push(s.record_attempts(&outcomes, three_tries).expect("recorded"));
            }
            let rows = ids
                .iter()
                .map(|&id| {
                    let r = s.outbox_row(id).expect("row").expect("there");
                    (r.state, r.attempts, r.first_failure_ms, r.next_attempt_ms, r.last_status, r.last_error)
                })
                .collect();
            let failed = dues.iter().flatten().filter(|d| d.is_some()).count();
            assert!(failed > 20, "the rounds rescheduled failures: {failed}");
            seen.lock().expect("seen").push((dues, rows));
        });
        let seen = seen.into_inner().expect("seen");
        assert_eq!(seen.len(), 2);
        assert!(seen[0].1.iter().any(|r| r.0 == "failed"), "some failed for good");
        assert!(seen[0].1.iter().any(|r| r.0 == "delivered"), "some delivered");
        assert_eq!(seen[0], seen[1], "SQLite's rows and due times, then PostgreSQL's");
    }
}
