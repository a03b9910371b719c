//! Price and pct alerts (the API's Alert resource): one mapping of a condition to its columns and
//! back, creation with the plan's cap and `Idempotency-Key`, listing, deletion, and the ends an
//! alert comes to by itself (expiry, delisting).

use super::alert_row::{
    alert_row, condition_columns, AlertChanges, AlertRow, AlertStatus, Idempotent, NewAlert, StatusFilter,
    ALERT_COLUMNS,
};
use super::conn::Store;
use super::inbox::NewEntry;
use super::outbox::queue_telegram;
use super::render::Render;
use crate::db::{vals, StoreError, Val};
use rampart_engine::Venue;

/// What a venue delisted ([`Store::delist_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delisting {
    /// The pair: every alert of it goes.
    Pair,
    /// Only its perpetual, the spot pair staying (`decisions.md` §17 "Listings"): its
    /// `liquidations`, `oi` and `funding` alerts go, the notice saying `"reason":"perp"`.
    Perp,
}

/// The columns a new alert's insert sets, and their values (`?1`–`?26`: [`new_alert_params`]).
const NEW_ALERT_COLUMNS: &str =
    "account_id, exchange, symbol, kind, direction, price, pct_millionths, \"window\", repeat,
    note, webhook_url, status, created_price, created_ms, trigger_count, expires_ms,
    event, within_millionths, min_strength, timeframes,
    min_usd_cents, min_ratio_hundredths, max_dist_hundredths, min_age_s, cooldown_s,
    max_fires, message, webhook_format";
const NEW_ALERT_VALUES: &str =
    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'active', ?12, ?13, 0, ?14, ?15, ?16, ?17, ?18,
    ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26";

/// A new alert's values, in [`NEW_ALERT_VALUES`]'s order.
fn new_alert_params(a: &NewAlert) -> Vec<Val<'_>> {
    let c = condition_columns(&a.condition);
    vals![
        a.account_id,
        a.exchange.as_str(),
        &a.symbol,
        c.kind,
        c.direction,
        c.price,
        c.stored_pct(),
        c.window,
        a.repeat,
        &a.note,
        a.webhook_url.as_deref(),
        a.created_price,
        a.created_ms,
        a.expires_ms,
        c.event,
        c.within,
        c.min_strength,
        c.timeframes,
        c.min_usd_cents,
        c.min_ratio_hundredths,
        c.max_dist_hundredths,
        c.min_age_s,
        i64::from(a.cooldown_s),
        a.max_fires.map(i64::from),
        a.message.as_deref(),
        a.webhook_format.as_str()
    ]
    .to_vec()
}

impl Store {
    /// Stores a new alert (committed when this returns, or with its group) and returns its row.
    pub fn insert_alert(&self, a: &NewAlert) -> Result<AlertRow, StoreError> {
        let sql =
            format!("INSERT INTO alerts ({NEW_ALERT_COLUMNS}) VALUES ({NEW_ALERT_VALUES}) RETURNING {ALERT_COLUMNS}");
        // In the insert's round trip (PostgreSQL); the cap's count ([`Store::active_price_alerts`]).
        self.db.ahead_of_next(&format!(
            "UPDATE accounts SET active_alerts = active_alerts + 1 WHERE id = {}",
            a.account_id
        ))?;
        self.db.query_one(&sql, &new_alert_params(a), alert_row)
    }

    /// Stores a new alert, as [`Store::insert_alert`] does, when its account holds fewer than
    /// `below` active alerts ([`Store::active_price_alerts`]'s count); else nothing (`None`),
    /// and the caller counts as the cap's rule says (the price cap leaves wall alerts out).
    ///
    /// On PostgreSQL one statement: the account's row counted, locked and added to, and the
    /// alert inserted only when it was; two api nodes' creates for one account still go one
    /// after the other (the second's update waits for the first's commit and counts again).
    ///
    /// Rationale: a create through a cluster's api node is one client's round trips in a row
    /// (the storm's creates, issue #59): lock and count, then insert, then commit; this takes the
    /// first away.
    pub fn insert_alert_below(&self, a: &NewAlert, below: u64) -> Result<Option<AlertRow>, StoreError> {
        if !self.db.is_postgres() {
            if self.active_price_alerts(a.account_id)? >= below {
                return Ok(None);
            }
            return self.insert_alert(a).map(Some);
        }
        let below = i64::try_from(below).unwrap_or(i64::MAX);
        let sql = format!(
            "WITH counted AS (UPDATE accounts SET active_alerts = active_alerts + 1
                WHERE id = ?1 AND active_alerts < ?27 RETURNING id)
             INSERT INTO alerts ({NEW_ALERT_COLUMNS}) SELECT {NEW_ALERT_VALUES} FROM counted RETURNING {ALERT_COLUMNS}"
        );
        let mut params = new_alert_params(a);
        params.push(below.into());
        self.db.query_opt(&sql, &params, alert_row)
    }

    /// One alert by id (deleted ones excluded).
    pub fn alert(&self, id: i64) -> Result<Option<AlertRow>, StoreError> {
        let sql = format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE id = ?1 AND deleted_ms IS NULL");
        self.db.query_opt(&sql, vals![id], alert_row)
    }

    /// Removes an alert row written by [`Store::insert_alert`] that could not be handed to its
    /// shard (never acknowledged to the client).
    pub fn forget_alert(&self, id: i64) -> Result<(), StoreError> {
        let removed: Option<(i64, bool)> = self.db.query_opt(
            "DELETE FROM alerts WHERE id = ?1 RETURNING account_id, status = 'active' AND deleted_ms IS NULL",
            vals![id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        self.release_active(removed.filter(|(_, active)| *active).map(|(account, _)| account))
    }

    /// Active API alerts of an account, price and percent alike (`decisions.md` §2: both count
    /// against the plan's price-alert cap).
    ///
    /// The count is the account's `active_alerts`, kept where an alert starts or stops being
    /// active, in the transaction that changes it ([`Store::insert_alert`] adds one;
    /// [`Store::forget_alert`], [`Store::delete_alert`], a one-shot's firing, expiry and
    /// delisting take theirs off, `release_active`): one row read however many alerts
    /// the account has (counting them made a create's cost grow with them: 9 ms at 9 000 on
    /// PostgreSQL).
    ///
    /// On PostgreSQL the account's row is locked by the same read (until the enclosing
    /// transaction ends), so two api nodes creating alerts for one account count and insert one
    /// after the other and the cap holds across nodes (SQLite's single writer gives that already).
    pub fn active_price_alerts(&self, account_id: i64) -> Result<u64, StoreError> {
        let lock = if self.db.is_postgres() { " FOR UPDATE" } else { "" };
        let sql = format!("SELECT active_alerts FROM accounts WHERE id = ?1{lock}");
        let n: Option<i64> = self.db.query_opt(&sql, vals![account_id], |r| r.get(0))?;
        Ok(n.unwrap_or(0).unsigned_abs())
    }

    /// The account's active wall alerts (`decisions.md` §15: they count against the density-alert
    /// cap, not the price-alert cap), counted.
    pub fn active_wall_alerts(&self, account_id: i64) -> Result<u64, StoreError> {
        let n: i64 = self.db.query_one(
            "SELECT COUNT(*) FROM alerts WHERE account_id = ?1 AND kind = 'wall' AND status = 'active' AND deleted_ms IS NULL",
            vals![account_id],
            |r| r.get(0),
        )?;
        Ok(n.unsigned_abs())
    }

    /// The account's active density alerts: its API wall alerts and its site density alerts, the
    /// two kinds the density-alert cap counts.
    pub fn active_density_alerts(&self, account_id: i64) -> Result<u64, StoreError> {
        let n: i64 = self.db.query_one(
            "SELECT COUNT(*) FROM site_alerts WHERE account_id = ?1 AND kind = 'density' AND status = 'active' AND deleted_ms IS NULL",
            vals![account_id],
            |r| r.get(0),
        )?;
        Ok(n.unsigned_abs() + self.active_wall_alerts(account_id)?)
    }

    /// Takes alerts that stopped being active off their accounts' counts (`ended` holds one
    /// account id per alert), in the caller's transaction; accounts in ascending id order, so
    /// two transactions never wait on each other's account rows in opposite orders.
    pub(super) fn release_active(&self, ended: impl IntoIterator<Item = i64>) -> Result<(), StoreError> {
        let mut per_account = std::collections::BTreeMap::<i64, i64>::new();
        for account in ended {
            *per_account.entry(account).or_default() += 1;
        }
        if per_account.is_empty() {
            return Ok(());
        }
        let sets: Vec<_> = per_account.iter().map(|(a, n)| vals![*a, *n].to_vec()).collect();
        self.db.execute_each("UPDATE accounts SET active_alerts = active_alerts - ?2 WHERE id = ?1", &sets)?;
        Ok(())
    }

    /// What an earlier create with `key` made, when `account_id` used it since `since_ms`:
    /// [`Idempotent::Same`] with the alert as it is now when `body_hash` matches (or
    /// [`Idempotent::Deleted`] when that alert was deleted since), [`Idempotent::Other`] when it
    /// came with another body, [`Idempotent::New`] when unused (keys older than `since_ms` are
    /// forgotten here).
    pub fn idempotent_alert(
        &self,
        account_id: i64,
        key: &str,
        body_hash: &[u8; 32],
        since_ms: i64,
    ) -> Result<Idempotent, StoreError> {
        self.db.execute("DELETE FROM idempotency WHERE created_ms < ?1", vals![since_ms])?;
        let earlier = self.db.query_opt(
            "SELECT body_hash, alert_id FROM idempotency WHERE account_id = ?1 AND key = ?2",
            vals![account_id, key],
            |r| Ok((r.get::<Vec<u8>>(0)?, r.get::<i64>(1)?)),
        )?;
        let Some((hash, alert_id)) = earlier else { return Ok(Idempotent::New) };
        if hash.as_slice() != body_hash.as_slice() {
            return Ok(Idempotent::Other);
        }
        let sql = format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE id = ?1 AND deleted_ms IS NULL");
        if let Some(row) = self.db.query_opt(&sql, vals![alert_id], alert_row)? {
            return Ok(Idempotent::Same(Box::new(row)));
        }
        // Deleted since (by its owner, expiry or a delisting): a retry must not make it again.
        // No row at all: the create was undone before it was acknowledged.
        let kept = self.db.query_opt("SELECT id FROM alerts WHERE id = ?1", vals![alert_id], |r| r.get::<i64>(0))?;
        Ok(if kept.is_some() { Idempotent::Deleted(alert_id) } else { Idempotent::New })
    }

    /// Remembers that `account_id`'s create with `key` and `body_hash` made `alert_id`.
    pub fn remember_idempotent(
        &self,
        account_id: i64,
        key: &str,
        body_hash: &[u8; 32],
        alert_id: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO idempotency (account_id, key, body_hash, alert_id, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(account_id, key) DO UPDATE SET body_hash = excluded.body_hash, alert_id = excluded.alert_id,
                created_ms = excluded.created_ms",
            vals![account_id, key, &body_hash[..], alert_id, now_ms],
        )?;
        Ok(())
    }

    /// Locks `account_id`'s row until the transaction ends (PostgreSQL; SQLite's write lock
    /// already serializes every writer).
    pub(crate) fn lock_account(&self, account_id: i64) -> Result<(), StoreError> {
        if self.db.is_postgres() {
            // Pipelined with the next statement (the cap's count): that one runs after the lock
            // is granted, with a snapshot of its own, so it sees the previous holder's insert.
            self.db.ahead_of_next(&format!("SELECT id FROM accounts WHERE id = {account_id} FOR UPDATE"))?;
        }
        Ok(())
    }

    /// An account's alerts by id, filtered by status.
    pub fn list_alerts(&self, account_id: i64, filter: StatusFilter) -> Result<Vec<AlertRow>, StoreError> {
        let cond = match filter {
            StatusFilter::Active => "AND status = 'active'",
            StatusFilter::Triggered => "AND status = 'triggered'",
            StatusFilter::All => "",
        };
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE account_id = ?1 AND deleted_ms IS NULL {cond} ORDER BY id"
        );
        self.db.query(&sql, vals![account_id], alert_row)
    }

    /// Deletes an account's alert; `None` when it has no such (undeleted) alert. One
    /// conditional statement, so two deletes racing on different nodes answer one `Some`.
    pub fn delete_alert(&self, account_id: i64, id: i64, now_ms: i64) -> Result<Option<AlertRow>, StoreError> {
        let sql = format!(
            "UPDATE alerts SET deleted_ms = ?3, version = version + 1 WHERE id = ?1 AND account_id = ?2 AND deleted_ms IS NULL RETURNING {ALERT_COLUMNS}"
        );
        let row = self.db.query_opt(&sql, vals![id, account_id, now_ms], alert_row)?;
        self.release_active(row.iter().filter(|r| r.status == AlertStatus::Active).map(|r| r.account_id))?;
        Ok(row)
    }

    /// Applies `changes` to the account's alert `id` unless it is deleted; the row after, or
    /// `None` when the account has no such alert. Resuming a paused alert forgets the flood
    /// guard's count (`decisions.md` §16); no other change does, `paused: false` on a running
    /// alert included.
    pub fn update_alert(
        &self,
        account_id: i64,
        id: i64,
        changes: &AlertChanges,
    ) -> Result<Option<AlertRow>, StoreError> {
        let sql = format!(
            "UPDATE alerts SET note = COALESCE(?3, note),
                webhook_url = CASE WHEN ?4 THEN ?5 ELSE webhook_url END,
                expires_ms = CASE WHEN ?6 THEN ?7 ELSE expires_ms END,
                cooldown_s = COALESCE(?8, cooldown_s),
                paused = CASE WHEN ?9 THEN 'user' WHEN ?10 THEN NULL ELSE paused END,
                recent_fires = CASE WHEN ?10 AND paused IS NOT NULL THEN '' ELSE recent_fires END,
                max_fires = CASE WHEN ?11 THEN ?12 ELSE max_fires END,
                message = CASE WHEN ?13 THEN ?14 ELSE message END,
                webhook_format = COALESCE(?15, webhook_format),
                version = version + 1
             WHERE id = ?1 AND account_id = ?2 AND deleted_ms IS NULL RETURNING {ALERT_COLUMNS}"
        );
        let webhook = changes.webhook_url.as_ref().and_then(|w| w.as_deref());
        let expires = changes.expires_ms.flatten();
        let cooldown = changes.cooldown_s.map(i64::from);
        let max_fires = changes.max_fires.flatten().map(i64::from);
        let message = changes.message.as_ref().and_then(|m| m.as_deref());
        let params = vals![
            id,
            account_id,
            changes.note.as_deref(),
            changes.webhook_url.is_some(),
            webhook,
            changes.expires_ms.is_some(),
            expires,
            cooldown,
            changes.paused == Some(true),
            changes.paused == Some(false),
            changes.max_fires.is_some(),
            max_fires,
            changes.message.is_some(),
            message,
            changes.webhook_format.map(|f| f.as_str())
        ];
        self.db.query_opt(&sql, params, alert_row)
    }

    /// The ids and symbols of the active alerts (not paused) created since `since_ms`, by id: a
    /// cluster's market node compares them with the commands it has seen and reads whole only
    /// the alerts whose command it missed ([`Store::active_alerts_among`]).
    ///
    /// Rationale: it looks every second over the last 30 s of creations; read whole, every such
    /// alert was read and decoded each second by each market node (issue #59: 153 893 rows in
    /// one storm's run, 1.6 s of PostgreSQL, while 10 000 alerts were created and fired; their
    /// ids, 4.5 µs a row instead of 10.6: perf/README.md).
    pub fn recent_active_alert_ids(&self, since_ms: i64) -> Result<Vec<(i64, String)>, StoreError> {
        self.db.query(
            "SELECT id, symbol FROM alerts WHERE created_ms >= ?1 AND status = 'active' AND deleted_ms IS NULL
                AND paused IS NULL ORDER BY id",
            vals![since_ms],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// The alerts among `ids` still active and not paused, by id.
    pub fn active_alerts_among(&self, ids: &[i64]) -> Result<Vec<AlertRow>, StoreError> {
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE id = ?1 AND status = 'active' AND deleted_ms IS NULL AND paused IS NULL"
        );
        let sets: Vec<_> = ids.iter().map(|id| vals![*id].to_vec()).collect();
        let mut rows: Vec<AlertRow> = self.db.query_opt_each(&sql, &sets, alert_row)?.into_iter().flatten().collect();
        rows.sort_unstable_by_key(|r| r.id);
        Ok(rows)
    }

    /// Every active alert not paused (loaded onto the shards at start).
    pub fn active_alerts(&self) -> Result<Vec<AlertRow>, StoreError> {
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE status = 'active' AND deleted_ms IS NULL AND paused IS NULL ORDER BY id"
        );
        self.db.query(&sql, &[], alert_row)
    }

    /// Active alerts whose `expires_at` has passed at `now_ms`, oldest expiry first, at most
    /// `limit` (the writer ends them with [`Store::expire`]).
    pub fn expired_alerts(&self, now_ms: i64, limit: u32) -> Result<Vec<AlertRow>, StoreError> {
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE expires_ms <= ?1 AND status = 'active' AND deleted_ms IS NULL
             ORDER BY expires_ms, id LIMIT ?2"
        );
        self.db.query(&sql, vals![now_ms, i64::from(limit)], alert_row)
    }

    /// Ends the alerts `ids` that are still active (`decisions.md` §13: removed like a delisted
    /// one) and writes an `alert.expired` notice to each owner's inbox (and, with Telegram on,
    /// their chat), in one transaction; never a webhook. Returns the alerts ended.
    pub fn expire(&mut self, ids: &[i64], now_ms: i64, texts: &dyn Render) -> Result<Vec<AlertRow>, StoreError> {
        let (db, telegram) = (&self.db, self.telegram);
        let sql = format!(
            "UPDATE alerts SET deleted_ms = ?2, version = version + 1
             WHERE id = ?1 AND status = 'active' AND deleted_ms IS NULL RETURNING {ALERT_COLUMNS}"
        );
        db.in_transaction_of(|| {
            let sets: Vec<_> = ids.iter().map(|id| vals![*id, now_ms].to_vec()).collect();
            let rows: Vec<AlertRow> = db.query_opt_each(&sql, &sets, alert_row)?.into_iter().flatten().collect();
            self.release_active(rows.iter().map(|r| r.account_id))?;
            let notice = |row: &AlertRow| NewEntry {
                account_id: row.account_id,
                kind: "alert.expired",
                alert_id: row.id,
                body: texts.alert_expired(row, now_ms),
                created_ms: now_ms,
            };
            self.write_inbox(&rows.iter().map(notice).collect::<Vec<_>>())?;
            for row in &rows {
                if telegram {
                    let text = || texts.telegram_alert_expired(row);
                    queue_telegram(db, texts, row.account_id, row.id, text, now_ms)?;
                }
            }
            self.check_fence()?;
            Ok(rows)
        })
    }

    /// Removes every active alert of a delisted pair and writes an `alert.delisted` notice to
    /// each owner's inbox (and, with Telegram on, their chat), in one transaction. Returns the alert ids removed.
    pub fn delist(
        &mut self,
        exchange: Venue,
        symbol: &str,
        now_ms: i64,
        texts: &dyn Render,
    ) -> Result<Vec<i64>, StoreError> {
        self.delist_of(Delisting::Pair, exchange, symbol, now_ms, texts)
    }

    /// A delisting ([`Delisting`]): the pair's active alerts, or those of its perpetual, removed
    /// with a notice to each owner as [`Store::delist`] says. Returns the alert ids removed.
    pub fn delist_of(
        &mut self,
        what: Delisting,
        exchange: Venue,
        symbol: &str,
        now_ms: i64,
        texts: &dyn Render,
    ) -> Result<Vec<i64>, StoreError> {
        let (db, telegram, perp) = (&self.db, self.telegram, what == Delisting::Perp);
        let kinds = if perp { " AND kind IN ('liquidations', 'oi', 'funding')" } else { "" };
        let sql = format!(
            "UPDATE alerts SET deleted_ms = ?3, version = version + 1
             WHERE exchange = ?1 AND symbol = ?2 AND status = 'active' AND deleted_ms IS NULL{kinds}
             RETURNING {ALERT_COLUMNS}"
        );
        db.in_transaction_of(|| {
            let mut rows = db.query(&sql, vals![exchange.as_str(), symbol, now_ms], alert_row)?;
            rows.sort_by_key(|r| r.id);
            self.release_active(rows.iter().map(|r| r.account_id))?;
            let notice = |row: &AlertRow| NewEntry {
                account_id: row.account_id,
                kind: "alert.delisted",
                alert_id: row.id,
                body: texts.alert_delisted(row, now_ms, perp),
                created_ms: now_ms,
            };
            self.write_inbox(&rows.iter().map(notice).collect::<Vec<_>>())?;
            for row in &rows {
                if telegram {
                    let text = || texts.telegram_alert_delisted(row, perp);
                    queue_telegram(db, texts, row.account_id, row.id, text, now_ms)?;
                }
            }
            self.check_fence()?;
            Ok(rows.iter().map(|r| r.id).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;

    /// The cap's count is kept where alerts change, never recounted: after every way an alert
    /// starts or stops being active it equals a count of the rows, per account, on both
    /// backends; a one-shot's second firing is recorded nowhere and takes nothing off.
    #[test]
    fn active_counts_follow_every_change_of_status() {
        on_each_backend("active-count", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let b = s.create_account_with_key("developer", None, 1).expect("b").account_id;
            let counted = |s: &Store, account: i64| -> u64 {
                let n: i64 = s
                    .db
                    .query_one(
                        "SELECT COUNT(*) FROM alerts WHERE account_id = ?1 AND status = 'active' AND deleted_ms IS NULL",
                        vals![account],
                        |r| r.get(0),
                    )
                    .expect("count");
                n.unsigned_abs()
            };
            let check = |s: &Store, step: &str, want: (u64, u64)| {
                let kept = (s.active_price_alerts(a).expect("a"), s.active_price_alerts(b).expect("b"));
                assert_eq!(kept, want, "{step}: kept counts");
                assert_eq!(kept, (counted(s, a), counted(s, b)), "{step}: kept against counted");
            };
            let one_shot = |account| NewAlert { repeat: false, ..alert(account, "binance", "BTCUSDT") };
            let ids: Vec<i64> =
                [a, a, a, a, b, b].iter().map(|&acc| s.insert_alert(&one_shot(acc)).expect("insert").id).collect();
            let repeating = s.insert_alert(&alert(a, "binance", "ETHUSDT")).expect("insert").id;
            let listed_off = s.insert_alert(&alert(b, "okx", "SOLUSDT")).expect("insert").id;
            check(&s, "inserted", (5, 3));
            let fire = |id, last| FiringRecord::at_price(id, 300, 7_000, last);
            let done = s.record_firings(&[fire(ids[0], true), fire(ids[4], true), fire(repeating, false)], &Texts);
            assert_eq!(done.expect("record").fired.len(), 3);
            check(&s, "fired", (4, 2));
            let again = s.record_firings(&[fire(ids[0], true)], &Texts).expect("record");
            assert!(again.fired.is_empty(), "a one-shot fires once: {again:?}");
            check(&s, "fired again", (4, 2));
            assert!(s.delete_alert(a, ids[1], 8_000).expect("delete").is_some());
            assert!(s.delete_alert(a, ids[0], 8_000).expect("delete triggered").is_some());
            assert!(s.delete_alert(a, ids[1], 8_000).expect("delete twice").is_none());
            check(&s, "deleted", (3, 2));
            assert_eq!(s.expire(&[ids[2], ids[0]], 9_000, &Texts).expect("expire").len(), 1);
            check(&s, "expired", (2, 2));
            assert_eq!(s.delist(Venue::Okx, "SOLUSDT", 9_500, &Texts).expect("delist"), [listed_off]);
            check(&s, "delisted", (2, 1));
            s.forget_alert(ids[3]).expect("forget");
            s.forget_alert(ids[4]).expect("forget a triggered one");
            check(&s, "forgotten", (1, 1));
        });
    }

    /// A market node's catch-up reads the ids and symbols of the recent active alerts, then whole
    /// only those asked for that are still active and not paused: a deleted, paused, triggered or
    /// older alert is in neither.
    #[test]
    fn the_catch_up_reads_ids_first_then_the_alerts_asked_for() {
        on_each_backend("catch-up", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let at_ms = |created_ms, symbol: &str| NewAlert { created_ms, ..alert(a, "binance", symbol) };
            let old = s.insert_alert(&at_ms(1_000, "BTCUSDT")).expect("old").id;
            let ids: Vec<i64> = ["BTCUSDT", "ETHUSDT", "SOLUSDT", "XRPUSDT"]
                .iter()
                .map(|symbol| s.insert_alert(&at_ms(5_000, symbol)).expect("insert").id)
                .collect();
            let (kept, deleted, paused, fired) = (ids[0], ids[1], ids[2], ids[3]);
            assert!(s.delete_alert(a, deleted, 6_000).expect("delete").is_some());
            let pause = AlertChanges { paused: Some(true), ..Default::default() };
            assert!(s.update_alert(a, paused, &pause).expect("pause").is_some());
            let one_shot = FiringRecord::at_price(fired, 300, 7_000, true);
            assert_eq!(s.record_firings(&[one_shot], &Texts).expect("fire").fired.len(), 1);
            let recent = s.recent_active_alert_ids(4_000).expect("ids");
            assert_eq!(recent, [(kept, "BTCUSDT".to_owned())]);
            let whole = s.active_alerts_among(&[fired, paused, deleted, kept, old]).expect("rows");
            let got: Vec<(i64, String)> = whole.into_iter().map(|r| (r.id, r.symbol)).collect();
            assert_eq!(got, [(old, "BTCUSDT".to_owned()), (kept, "BTCUSDT".to_owned())]);
            assert!(s.active_alerts_among(&[]).expect("none").is_empty());
        });
    }

    /// Every write of an alert's row gives it a higher version, carried by the change it hands
    /// the shards (issue #58, `decisions.md` §16 "One order"); no change but the resume of a paused
    /// alert forgets the flood guard's firing times (a `paused: false` on a running alert
    /// included); a removal hands over `Gone`.
    #[test]
    fn every_write_raises_an_alerts_version_and_only_a_resume_forgets_its_firings() {
        use rampart_state::{AlertChange, AlertState};
        on_each_backend("versions", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let row = s.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert");
            assert_eq!((row.version, row.change(false).state), (1, AlertState::Held(row.spec().expect("spec"))));
            let id = row.id;
            let recent = |s: &Store| -> String {
                s.db.query_one("SELECT recent_fires FROM alerts WHERE id = ?1", vals![id], |r| r.get(0)).expect("read")
            };
            let fire = |ts| FiringRecord::at_price(id, 300, ts, false);
            let r = s.record_firings(&[fire(10), fire(20), fire(30)], &Texts).expect("record");
            assert_eq!(r.fired.last().map(|(row, _)| row.version), Some(4), "one more per firing");
            assert_eq!(recent(&s), "10,20,30");
            let mut version = 4;
            let changes = [
                AlertChanges { paused: Some(false), ..Default::default() },
                AlertChanges { note: Some("n".into()), ..Default::default() },
                AlertChanges { webhook_url: Some(Some("https://example.com/h".into())), ..Default::default() },
                AlertChanges { expires_ms: Some(Some(1_000_000)), ..Default::default() },
                AlertChanges { cooldown_s: Some(60), ..Default::default() },
                AlertChanges { max_fires: Some(Some(100)), ..Default::default() },
                AlertChanges { message: Some(Some("{{symbol}}".into())), ..Default::default() },
                AlertChanges { webhook_format: Some(WebhookFormat::Slack), ..Default::default() },
            ];
            for change in &changes {
                let after = s.update_alert(a, id, change).expect("update").expect("the alert");
                version += 1;
                assert_eq!(after.version, version, "{change:?}");
                assert_eq!(recent(&s), "10,20,30", "{change:?} keeps the flood guard's count");
            }
            let paused = s.update_alert(a, id, &AlertChanges { paused: Some(true), ..Default::default() });
            let paused = paused.expect("pause").expect("the alert");
            assert_eq!((paused.version, paused.change(false).state), (version + 1, AlertState::Gone));
            assert_eq!(recent(&s), "10,20,30", "a pause keeps it");
            let before = paused.clone();
            let resumed = s.update_alert(a, id, &AlertChanges { paused: Some(false), ..Default::default() });
            let resumed = resumed.expect("resume").expect("the alert");
            assert_eq!(resumed.version, version + 2);
            assert!(matches!(resumed.change_after(&before).state, AlertState::Resumed(_)), "{resumed:?}");
            assert_eq!(recent(&s), "", "a resume forgets the firings");
            let expired = s.expire(&[id], 2_000_000, &Texts).expect("expire");
            assert_eq!(expired.len(), 1);
            assert_eq!(
                (expired[0].version, expired[0].change(false)),
                (version + 3, AlertChange::gone(id as u64, version + 3))
            );
            // Deleted and delisted rows are newer still.
            let other = s.insert_alert(&alert(a, "okx", "SOLUSDT")).expect("insert");
            let deleted = s.delete_alert(a, other.id, 5).expect("delete").expect("the alert");
            assert_eq!((deleted.version, deleted.change(false).state), (2, AlertState::Gone));
            let third = s.insert_alert(&alert(a, "okx", "ETHUSDT")).expect("insert").id;
            assert_eq!(s.delist(Venue::Okx, "ETHUSDT", 6, &Texts).expect("delist"), [third]);
            let v: i64 =
                s.db.query_one("SELECT version FROM alerts WHERE id = ?1", vals![third], |r| r.get(0)).expect("v");
            assert_eq!(v, 2);
        });
    }

    #[test]
    fn delisting_removes_alerts_and_notifies_their_owners() {
        on_each_backend("delist", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let b = s.create_account_with_key("developer", None, 1).expect("b").account_id;
            let gone1 = s.insert_alert(&alert(a, "binance", "SOLUSDT")).expect("insert").id;
            let gone2 = s.insert_alert(&alert(b, "binance", "SOLUSDT")).expect("insert").id;
            let other_venue = s.insert_alert(&alert(a, "okx", "SOLUSDT")).expect("insert").id;
            let other_pair = s.insert_alert(&alert(a, "binance", "ETHUSDT")).expect("insert").id;
            let mut removed = s.delist(Venue::Binance, "SOLUSDT", 5_000, &Texts).expect("delist");
            removed.sort();
            assert_eq!(removed, [gone1, gone2]);
            let left: Vec<i64> = s.list_alerts(a, StatusFilter::All).expect("list").iter().map(|r| r.id).collect();
            assert_eq!(left, [other_venue, other_pair]);
            assert!(s.list_alerts(b, StatusFilter::All).expect("list").is_empty());
            for (account, id) in [(a, gone1), (b, gone2)] {
                let inbox = s.inbox(account, i64::MAX, 10).expect("inbox");
                assert_eq!(inbox.len(), 1);
                assert_eq!(
                    (inbox[0].kind.as_str(), inbox[0].alert_id, inbox[0].created_ms),
                    ("alert.delisted", Some(id), 5_000)
                );
                let body: serde_json::Value = serde_json::from_str(&inbox[0].body).expect("json");
                assert_eq!(body["alert"]["symbol"], "SOLUSDT");
            }
            // A firing that raced the delisting is not recorded.
            let f = FiringRecord::at_price(gone1, 300, 6_000, false);
            assert!(s.record_firings(&[f], &Texts).expect("record").fired.is_empty());
        });
    }

    /// A perpetual delisted while its spot pair stays (`decisions.md` §17): the pair's
    /// derivatives alerts are removed with an `alert.delisted` notice saying `"reason":"perp"`;
    /// its price alerts, and another venue's derivatives alerts, stay.
    #[test]
    fn a_perpetuals_delisting_removes_only_its_derivatives_alerts() {
        use rampart_engine::perp_alert::{LiqDirection, LiqOrder, PerpCondition};
        on_each_backend("delist-perp", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let order = Condition::Perp(PerpCondition::Order(LiqOrder {
                direction: LiqDirection::Long,
                min_usd_cents: 100_000_000,
            }));
            let perp = |exchange| NewAlert { condition: order, ..alert(a, exchange, "SOLUSDT") };
            let gone = s.insert_alert(&perp("binance")).expect("insert").id;
            let price = s.insert_alert(&alert(a, "binance", "SOLUSDT")).expect("insert").id;
            let other_venue = s.insert_alert(&perp("okx")).expect("insert").id;
            assert_eq!(s.delist_of(Delisting::Perp, Venue::Binance, "SOLUSDT", 5_000, &Texts).expect("delist"), [gone]);
            let left: Vec<i64> = s.list_alerts(a, StatusFilter::All).expect("list").iter().map(|r| r.id).collect();
            assert_eq!(left, [price, other_venue]);
            let inbox = s.inbox(a, i64::MAX, 10).expect("inbox");
            assert_eq!((inbox.len(), inbox[0].kind.as_str(), inbox[0].alert_id), (1, "alert.delisted", Some(gone)));
            let body: serde_json::Value = serde_json::from_str(&inbox[0].body).expect("json");
            assert_eq!(body["reason"], "perp");
            assert_eq!((body["alert"]["symbol"].as_str(), body["time"].as_i64()), (Some("SOLUSDT"), Some(5_000)));
        });
    }

    /// Stored fields that need escaping (a quote, a backslash, a control character) still give
    /// a valid `alert.delisted` body that reads back as the same strings.
    #[test]
    fn delisted_body_escapes_every_field() {
        on_each_backend("delist-escape", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let symbol = "EVIL\"},\"x\":\\\u{1}";
            let id = s.insert_alert(&alert(a, "binance", symbol)).expect("insert").id;
            assert_eq!(s.delist(Venue::Binance, symbol, 5_000, &Texts).expect("delist"), [id]);
            let inbox = s.inbox(a, i64::MAX, 10).expect("inbox");
            let body: serde_json::Value = serde_json::from_str(&inbox[0].body).expect("a valid JSON body");
            assert_eq!(body["alert"]["symbol"], symbol);
            assert_eq!(body["alert"]["exchange"], "binance");
            assert_eq!(body["alert"]["id"], id);
            assert_eq!(body["event"], "alert.delisted");
            assert_eq!(body.as_object().map(|o| o.len()), Some(3));
        });
    }

    /// A stored alert reads back as the same typed record; a stored value this build does not
    /// write (a direction, a status, a venue, a missing level) is an error, never a default.
    #[test]
    fn alert_records_map_to_columns_one_way_and_back_strictly() {
        on_each_backend("typed", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let pct = Condition::Pct { dir: Move::Down, millionths: 3_004_000, window: Timeframe::H4 };
            let new = NewAlert { condition: pct, exchange: Venue::Okx, ..alert(a, "binance", "ETHUSDT") };
            let row = s.insert_alert(&new).expect("insert");
            assert_eq!((row.condition, row.exchange, row.status), (pct, Venue::Okx, AlertStatus::Active));
            assert_eq!(row.spec().map(|x| x.condition), Some(pct));
            for (column, value) in [
                ("direction", "'sideways'"),
                ("status", "'paused'"),
                ("exchange", "'kraken'"),
                ("\"window\"", "'3h'"),
                ("kind", "'limit'"),
                ("pct_millionths", "NULL"),
            ] {
                let sql = format!("UPDATE alerts SET {column} = {value} WHERE id = ?1");
                type Saved = (String, String, String, Option<String>, String, Option<i64>);
                let saved: Saved = s
                    .db
                    .query_one(
                        "SELECT direction, status, exchange, \"window\", kind, pct_millionths FROM alerts WHERE id = ?1",
                        vals![row.id],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
                    )
                    .expect("read");
                s.db.execute(&sql, vals![row.id]).expect("corrupt one column");
                let read = s.list_alerts(a, StatusFilter::All);
                assert!(read.is_err(), "{column} = {value} must not read back: {read:?}");
                s.db.execute(
                    "UPDATE alerts SET direction = ?2, status = ?3, exchange = ?4, \"window\" = ?5, kind = ?6, pct_millionths = ?7 WHERE id = ?1",
                    vals![row.id, &saved.0, &saved.1, &saved.2, saved.3.as_deref(), &saved.4, saved.5],
                )
                .expect("restore");
                assert_eq!(s.list_alerts(a, StatusFilter::All).expect("restored").len(), 1);
            }
        });
    }

    /// Two api nodes creating for one account at once: the second counts after the first
    /// commits (the account's row lock), so a cap of 1 admits one of them.
    #[test]
    fn a_cap_holds_across_two_postgres_connections() {
        let at = TestDb::Postgres(fresh_postgres_schema());
        let mut first = at.open();
        let a = first.create_account_with_key("developer", None, 1).expect("a").account_id;
        first.begin_group().expect("group");
        first.begin_job().expect("job");
        assert_eq!(first.active_price_alerts(a).expect("count"), 0);
        first.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert");
        let url = match &at {
            TestDb::Postgres(url) => url.clone(),
            TestDb::Sqlite(_) => unreachable!(),
        };
        let (counting, counted) = std::sync::mpsc::channel();
        let second = std::thread::spawn(move || {
            let mut s = Store::open_postgres(&url).expect("open");
            s.begin_group().expect("group");
            counting.send(()).expect("signal");
            let n = s.active_price_alerts(a).expect("count");
            s.commit_group().expect("commit");
            n
        });
        counted.recv().expect("the second connection is about to count");
        std::thread::sleep(Duration::from_millis(200));
        first.end_job(true).expect("end");
        first.commit_group().expect("commit");
        assert_eq!(second.join().expect("second"), 1, "counted after the first insert was committed");
    }

    /// One statement's create (`insert_alert_below`) inserts and counts while the account is
    /// below the number, and at it inserts nothing and counts nothing, on both backends; its row
    /// is the one `insert_alert` makes.
    #[test]
    fn a_create_below_the_cap_inserts_and_counts_and_at_it_does_nothing() {
        on_each_backend("below-cap", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let mut hooked = alert(a, "binance", "BTCUSDT");
            hooked.webhook_url = Some("https://example.com/h".into());
            hooked.note = "below".into();
            hooked.max_fires = Some(3);
            let first = s.insert_alert_below(&hooked, 2).expect("insert").expect("below the cap");
            let plain = s.insert_alert(&hooked).expect("insert");
            assert_eq!(AlertRow { id: plain.id, ..first.clone() }, plain, "the same row as insert_alert's");
            assert_eq!(s.alert(first.id).expect("read"), Some(first));
            assert_eq!(s.active_price_alerts(a).expect("count"), 2);
            assert_eq!(s.insert_alert_below(&hooked, 2).expect("at the cap"), None);
            assert_eq!(s.active_price_alerts(a).expect("count"), 2, "nothing counted at the cap");
            assert_eq!(s.list_alerts(a, StatusFilter::All).expect("list").len(), 2, "nothing inserted");
            assert!(s.insert_alert_below(&hooked, 3).expect("insert").is_some());
            assert_eq!(s.active_price_alerts(a).expect("count"), 3);
        });
    }
}
