//! The site's density and market alerts (`site_alerts`, SQLite schema version 6): typed
//! rows with a strict mapping (an unknown stored value is an error naming its column), the
//! per-kind caps counted in the same statement group as the insert, and the firings the writer
//! records (inbox entry, count, status). Every change bumps `site_alerts_version`, which the
//! running service watches (`site_alerts::watch`).

use super::conn::Store;
use super::inbox::NewEntry;
use super::outbox::queue_telegram;
use super::render::Render;
use super::site_row::{
    direction_str, side_str, site_row, NewSiteAlert, SiteAlertRow, SiteCondition, SiteFiringRecord, SITE_COLUMNS,
};
use crate::db::{vals, Db, StoreError};

fn bump(db: &Db) -> Result<(), StoreError> {
    db.execute("UPDATE meta SET value = value + 1 WHERE key = 'site_alerts_version'", &[])?;
    Ok(())
}

impl Store {
    /// Stores a site alert unless the account already has `cap` active ones of its kind, and
    /// returns its row (`None` at the cap). Count, insert and version bump are one savepoint
    /// (committed when this returns, or with the storage thread's group), under the account's
    /// lock on PostgreSQL so the cap holds across nodes.
    pub fn insert_site_alert(&self, a: &NewSiteAlert, cap: u32) -> Result<Option<SiteAlertRow>, StoreError> {
        self.db.in_savepoint("site_insert", || self.insert_site_alert_inner(a, cap))
    }

    fn insert_site_alert_inner(&self, a: &NewSiteAlert, cap: u32) -> Result<Option<SiteAlertRow>, StoreError> {
        let req = &a.request;
        let kind = req.condition.kind();
        self.lock_account(a.account_id)?;
        let mut active: i64 = self.db.query_one(
            "SELECT COUNT(*) FROM site_alerts WHERE account_id = ?1 AND kind = ?2 AND status = 'active' AND deleted_ms IS NULL",
            vals![a.account_id, kind],
            |r| r.get(0),
        )?;
        // The API's wall alerts share the density-alert cap (decisions.md §15).
        if kind == "density" {
            active += i64::try_from(self.active_wall_alerts(a.account_id)?).unwrap_or(i64::MAX);
        }
        if active >= i64::from(cap) {
            return Ok(None);
        }
        let (symbol, side, min_usd, max_dist, min_age) = match &req.condition {
            SiteCondition::Density { symbol, side, min_usd, max_dist_pct, min_age_s } => (
                symbol.as_deref(),
                Some(side_str(*side)),
                Some(*min_usd),
                Some(*max_dist_pct),
                Some(i64::from(*min_age_s)),
            ),
            SiteCondition::Market { .. } => (None, None, None, None, None),
        };
        let (number, interval, direction, threshold) = match &req.condition {
            SiteCondition::Market { number, interval, direction, threshold } => {
                (Some(number.as_str()), Some(interval.as_str()), Some(direction_str(*direction)), Some(*threshold))
            }
            SiteCondition::Density { .. } => (None, None, None, None),
        };
        let sql = format!(
            "INSERT INTO site_alerts (account_id, kind, exchange, symbol, side, min_usd, max_dist_pct, min_age_s, number,
                interval, direction, threshold, repeat, note, status, created_ms, cooldown_s)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 'active', ?15, ?16) RETURNING {SITE_COLUMNS}"
        );
        let params = vals![
            a.account_id,
            kind,
            req.exchange.as_str(),
            symbol,
            side,
            min_usd,
            max_dist,
            min_age,
            number,
            interval,
            direction,
            threshold,
            req.repeat,
            &req.note,
            a.created_ms,
            i64::from(req.cooldown_s)
        ];
        let row = self.db.query_one(&sql, params, site_row)?;
        bump(&self.db)?;
        Ok(Some(row))
    }

    /// One site alert by id (deleted ones excluded).
    pub fn site_alert(&self, id: i64) -> Result<Option<SiteAlertRow>, StoreError> {
        let sql = format!("SELECT {SITE_COLUMNS} FROM site_alerts WHERE id = ?1 AND deleted_ms IS NULL");
        self.db.query_opt(&sql, vals![id], site_row)
    }

    /// An account's site alerts (active and triggered), by id.
    pub fn list_site_alerts(&self, account_id: i64) -> Result<Vec<SiteAlertRow>, StoreError> {
        let sql =
            format!("SELECT {SITE_COLUMNS} FROM site_alerts WHERE account_id = ?1 AND deleted_ms IS NULL ORDER BY id");
        self.db.query(&sql, vals![account_id], site_row)
    }

    /// Every active site alert, by id (what the running service evaluates).
    pub fn active_site_alerts(&self) -> Result<Vec<SiteAlertRow>, StoreError> {
        let sql = format!(
            "SELECT {SITE_COLUMNS} FROM site_alerts WHERE status = 'active' AND deleted_ms IS NULL ORDER BY id"
        );
        self.db.query(&sql, &[], site_row)
    }

    /// Deletes an account's site alert; `None` when it has no such (undeleted) alert. The
    /// conditional update and the version bump are one savepoint.
    pub fn delete_site_alert(&self, account_id: i64, id: i64, now_ms: i64) -> Result<Option<SiteAlertRow>, StoreError> {
        let sql = format!(
            "UPDATE site_alerts SET deleted_ms = ?3 WHERE id = ?1 AND account_id = ?2 AND deleted_ms IS NULL
             RETURNING {SITE_COLUMNS}"
        );
        self.db.in_savepoint("site_delete", || {
            let row = self.db.query_opt(&sql, vals![id, account_id, now_ms], site_row)?;
            if row.is_some() {
                bump(&self.db)?;
            }
            Ok(row)
        })
    }

    /// The counter every site-alert change bumps.
    pub fn site_alerts_version(&self) -> Result<i64, StoreError> {
        self.db.query_one("SELECT value FROM meta WHERE key = 'site_alerts_version'", &[], |r| r.get(0))
    }

    /// Records site firings in one transaction: each alert's count, last time and status, and
    /// a `density.triggered` or `market.triggered` inbox entry. Firings of alerts no longer
    /// active (deleted, or a non-repeating one that already fired on another shard) are
    /// skipped: the count and status change in one conditional statement, so of two firings
    /// racing to end an alert one is recorded. So is a firing less than the alert's cooldown
    /// after its last recorded one (the same statement: every shard's and every node's firings
    /// meet there, so one alert fires at most once per cooldown whoever evaluates it; the
    /// dropped firing writes nothing). A firing that ends an alert bumps the version,
    /// so every evaluator drops it. With Telegram on, each recorded firing also queues a
    /// message to the account's chat. Returns how many were recorded.
    pub fn record_site_firings(
        &mut self,
        firings: &[SiteFiringRecord],
        texts: &dyn Render,
    ) -> Result<usize, StoreError> {
        let (db, telegram) = (&self.db, self.telegram);
        let update = format!(
            "UPDATE site_alerts SET trigger_count = trigger_count + 1, last_triggered_ms = ?2,
                status = CASE WHEN ?3 THEN 'triggered' ELSE status END
             WHERE id = ?1 AND status = 'active' AND deleted_ms IS NULL
                AND (last_triggered_ms IS NULL OR ?2 >= last_triggered_ms + cooldown_s * 1000)
             RETURNING {SITE_COLUMNS}"
        );
        db.in_transaction_of(|| {
            let mut fired = Vec::with_capacity(firings.len());
            for f in firings {
                if let Some(row) = db.query_opt(&update, vals![f.alert_id, f.ts_ms, f.last], site_row)? {
                    fired.push((row, f));
                }
            }
            if fired.iter().any(|(_, f)| f.last) {
                bump(db)?;
            }
            // The inbox last among the row locks (`Store::write_inbox`).
            let entries: Vec<NewEntry> = fired
                .iter()
                .map(|(row, f)| {
                    let (kind, body) = texts.site_fired(row, f);
                    NewEntry { account_id: row.account_id, kind, alert_id: row.id, body, created_ms: f.ts_ms }
                })
                .collect();
            self.write_inbox(&entries)?;
            if telegram {
                for (row, f) in &fired {
                    let text = || texts.telegram_site_fired(row, f);
                    queue_telegram(db, texts, row.account_id, row.id, text, f.ts_ms)?;
                }
            }
            self.check_fence()?;
            Ok(fired.len())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;
    use rampart_engine::site_alert::WallSide;

    fn density(account_id: i64, repeat: bool) -> NewSiteAlert {
        let condition = SiteCondition::Density {
            symbol: None,
            side: WallSide::Bid,
            min_usd: 1_000.5,
            max_dist_pct: 2.0,
            min_age_s: 30,
        };
        NewSiteAlert {
            account_id,
            request: SiteRequest { exchange: Venue::Okx, condition, repeat, note: "n".into(), cooldown_s: 0 },
            created_ms: 5,
        }
    }

    fn market(account_id: i64) -> NewSiteAlert {
        let condition = SiteCondition::Market {
            number: BoardNumber::Up5,
            interval: Timeframe::H4,
            direction: rampart_engine::site_alert::Direction::Below,
            threshold: 2.5,
        };
        NewSiteAlert {
            account_id,
            request: SiteRequest {
                exchange: Venue::Bitget,
                condition,
                repeat: true,
                note: String::new(),
                cooldown_s: 0,
            },
            created_ms: 6,
        }
    }

    #[test]
    fn rows_round_trip_and_caps_are_per_kind() {
        on_each_backend("site-caps", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("free", None, 1).expect("key").account_id;
            let v0 = s.site_alerts_version().expect("version");
            let d = s.insert_site_alert(&density(a, false), 1).expect("insert").expect("room");
            assert_eq!(
                (d.exchange, &d.condition, d.repeat, d.status),
                (Venue::Okx, &density(a, false).request.condition, false, AlertStatus::Active)
            );
            assert!(s.insert_site_alert(&density(a, false), 1).expect("insert").is_none(), "density cap 1 reached");
            let m = s.insert_site_alert(&market(a), 1).expect("insert").expect("the market cap is its own");
            assert_eq!(m.condition, market(a).request.condition);
            assert_eq!(s.site_alerts_version().expect("version"), v0 + 2);
            assert_eq!(s.list_site_alerts(a).expect("list").len(), 2);
            assert_eq!(s.active_site_alerts().expect("active").len(), 2);
            // Another account cannot delete it; its owner can, and it is gone from every list.
            assert!(s.delete_site_alert(a + 1, d.id, 9).expect("delete").is_none());
            assert!(s.delete_site_alert(a, d.id, 9).expect("delete").is_some());
            assert!(s.delete_site_alert(a, d.id, 9).expect("delete").is_none(), "already deleted");
            assert_eq!(s.list_site_alerts(a).expect("list").len(), 1);
            assert_eq!(s.site_alerts_version().expect("version"), v0 + 3);
            assert!(s.insert_site_alert(&density(a, false), 1).expect("insert").is_some(), "room again");
            // A stored value this build does not know is an error naming its column.
            s.db.execute("UPDATE site_alerts SET side = 'middle' WHERE id = ?1", vals![d.id]).expect("corrupt");
            s.db.execute("UPDATE site_alerts SET deleted_ms = NULL WHERE id = ?1", vals![d.id]).expect("undelete");
            let e = s.list_site_alerts(a).expect_err("unknown side");
            assert!(e.to_string().contains("side 'middle'"), "{e}");
        });
    }

    #[test]
    fn firings_reach_the_inbox_once_and_end_a_non_repeating_alert() {
        on_each_backend("site-firings", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("key").account_id;
            let mut one_shot = market(a);
            one_shot.request.repeat = false;
            one_shot.request.note = "once".into();
            let once = s.insert_site_alert(&one_shot, 10).expect("insert").expect("room");
            let rep = s.insert_site_alert(&market(a), 10).expect("insert").expect("room");
            let f = |id, ts_ms, last, value| SiteFiringRecord { alert_id: id, ts_ms, last, value };
            let v0 = s.site_alerts_version().expect("version");
            // The same non-repeating alert firing on two shards at once: the first is recorded.
            let n = s
                .record_site_firings(
                    &[f(once.id, 100, true, 1.5), f(once.id, 101, true, 1.4), f(rep.id, 102, false, 2.0)],
                    &Texts,
                )
                .expect("record");
            assert_eq!(n, 2);
            assert_eq!(s.site_alerts_version().expect("version"), v0 + 1, "an alert ended");
            let rows = s.list_site_alerts(a).expect("list");
            assert_eq!(
                (rows[0].status, rows[0].trigger_count, rows[0].last_triggered_ms),
                (AlertStatus::Triggered, 1, Some(100))
            );
            assert_eq!((rows[1].status, rows[1].trigger_count), (AlertStatus::Active, 1));
            assert_eq!(s.active_site_alerts().expect("active").len(), 1);
            let inbox = s.inbox(a, i64::MAX, 10).expect("inbox");
            assert_eq!(
                inbox.iter().map(|e| (e.kind.as_str(), e.alert_id)).collect::<Vec<_>>(),
                [("market.triggered", Some(rep.id)), ("market.triggered", Some(once.id))]
            );
            let body: serde_json::Value = serde_json::from_str(&inbox[1].body).expect("json");
            assert_eq!((body["value"].as_f64(), body["time"].as_i64()), (Some(1.5), Some(100)), "the first firing");
            assert_eq!(body["alert"]["status"], "triggered");
            assert_eq!(body["alert"]["note"], "once");
            let body: serde_json::Value = serde_json::from_str(&inbox[0].body).expect("json");
            assert_eq!((body["value"].as_f64(), body["alert"]["interval"].as_str()), (Some(2.0), Some("4h")));
            // A deleted alert's firing is not recorded.
            s.delete_site_alert(a, rep.id, 200).expect("delete");
            assert_eq!(s.record_site_firings(&[f(rep.id, 201, false, 1.0)], &Texts).expect("record"), 0);
        });
    }

    #[test]
    fn a_firing_inside_the_cooldown_is_dropped_whichever_shard_sent_it() {
        on_each_backend("site-cooldown", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("key").account_id;
            let mut quiet = market(a);
            quiet.request.cooldown_s = 60;
            let rep = s.insert_site_alert(&quiet, 10).expect("insert").expect("room");
            assert_eq!(rep.cooldown_s, 60);
            let f = |ts_ms| SiteFiringRecord { alert_id: rep.id, ts_ms, last: false, value: 2.0 };
            // 1 000 fires; 30 000 (shard 1) and 60 999 (shard 2) are inside its minute; 61 000 is not.
            let n = s.record_site_firings(&[f(1_000), f(30_000), f(60_999), f(61_000)], &Texts).expect("record");
            assert_eq!(n, 2);
            let row = &s.list_site_alerts(a).expect("list")[0];
            assert_eq!((row.trigger_count, row.last_triggered_ms), (2, Some(61_000)));
            let times: Vec<i64> = s.inbox(a, i64::MAX, 10).expect("inbox").iter().map(|e| e.created_ms).collect();
            assert_eq!(times, [61_000, 1_000], "a dropped firing writes nothing");
            let body: serde_json::Value =
                serde_json::from_str(&s.inbox(a, i64::MAX, 1).expect("inbox")[0].body).expect("json");
            assert_eq!(body["alert"]["cooldownS"], 60);
        });
    }

    #[test]
    fn site_firings_reach_the_accounts_telegram_chat() {
        on_each_backend("site-telegram", |at| {
            let mut s = at.open().with_telegram(true);
            let a = s.create_account_with_key("developer", None, 1).expect("key").account_id;
            let b = s.create_account_with_key("developer", None, 1).expect("key").account_id;
            s.set_telegram_chat(a, Some("@desk_alerts")).expect("chat");
            let mut noted = market(a);
            noted.request.note = "n".into();
            let first = s.insert_site_alert(&noted, 10).expect("insert").expect("room");
            let mark = s.insert_site_alert(&market(a), 10).expect("insert").expect("room");
            let other = s.insert_site_alert(&market(b), 10).expect("insert").expect("room");
            let f = |id| SiteFiringRecord { alert_id: id, ts_ms: 50, last: false, value: 2.0 };
            let n = s.record_site_firings(&[f(first.id), f(mark.id), f(other.id)], &Texts);
            assert_eq!(n.expect("record"), 3);
            let due = s.due_deliveries(50, 100).expect("due");
            assert_eq!(due.len(), 2, "b has no chat: {due:?}");
            let texts: Vec<String> = due
                .iter()
                .map(|r| {
                    assert_eq!(
                        (r.channel, r.url.as_str(), r.account_id),
                        (super::super::Channel::Telegram, "@desk_alerts", a)
                    );
                    let v: serde_json::Value = serde_json::from_str(&r.body).expect("json");
                    assert_eq!(v["chat_id"], "@desk_alerts");
                    v["text"].as_str().unwrap_or_default().to_owned()
                })
                .collect();
            assert_eq!(
                texts[0],
                format!("bitget market\nup5 (4h) is below 2.5: now 2.0\nmarket alert #{}\nNote: n", first.id)
            );
            assert_eq!(texts[1], format!("bitget market\nup5 (4h) is below 2.5: now 2.0\nmarket alert #{}", mark.id));
        });
    }
}
