//! Firings of price and pct alerts, recorded in one transaction per batch: each alert's count
//! and status, its inbox entry, its webhook delivery and its Telegram message.

use std::collections::BTreeMap;

use super::alert_row::{alert_row, AlertRow, AlertStatus, ALERT_COLUMNS, ALERT_COLUMNS_COUNT};
use super::conn::Store;
use super::firing_record::FiringRecord;
use super::inbox::NewEntry;
use super::outbox::queue_telegram;
use super::render::Render;
use crate::db::{vals, Col, StoreError};
use crate::flood_guard::FloodWindow;
use crate::handoff::Handed;
use crate::inbox_feed::FedEntry;
use std::sync::Arc;

/// What a batch of firings came to ([`Store::record_firings`]).
#[derive(Debug, Default)]
pub struct Recorded {
    /// Each firing recorded, with its alert's row after it.
    pub fired: Vec<(AlertRow, FiringRecord)>,
    /// The alerts the flood guard paused instead of recording a firing (`decisions.md` §16).
    pub paused: Vec<AlertRow>,
    /// The inbox entries written, in id order (for the streams: `crate::inbox_feed`).
    pub inbox: Vec<FedEntry>,
    /// The webhook deliveries queued, as sent (for a market node's publisher: `crate::handoff`).
    pub deliveries: Vec<Handed>,
}

impl Recorded {
    /// The alerts that must leave their shards: paused by the flood guard, or ended (by their
    /// `max_fires`, or a one-shot's firing). A one-pair one-shot has left its book as it fired;
    /// it is told again at the ended row's version, so that a change its shard received after
    /// that firing (a cooldown retuned in between) does not leave it held there.
    pub fn leaving(&self) -> Vec<AlertRow> {
        let ended = self.fired.iter().map(|(row, _)| row).filter(|row| row.status == AlertStatus::Triggered);
        ended.chain(&self.paused).cloned().collect()
    }
}

/// The webhook deliveries of the firings `done`, with the bodies made for them (`sent`, a chat
/// format's, else the event body), moved.
fn delivered(done: &[(AlertRow, FiringRecord)], bodies: Vec<String>, sent: Vec<Option<String>>) -> Vec<Handed> {
    let made = done.iter().zip(bodies.into_iter().zip(sent));
    made.filter_map(|((row, f), (body, sent))| {
        Some(Handed {
            account_id: row.account_id,
            alert_id: row.id,
            trigger_ms: f.ts_ms,
            url: row.webhook_url.clone()?,
            body: sent.unwrap_or(body),
        })
    })
    .collect()
}

impl Store {
    /// Persists a batch of firings in one transaction: each alert's count, last time and
    /// status, an `alert.triggered` inbox entry with the event body, the webhook delivery when
    /// the alert has a URL and, with Telegram on, a message to the account's chat. Firings of
    /// deleted, ended or paused alerts are skipped; one past an alert's `max_fires` too. A
    /// repeating alert's firing that would be its 16th in 3 minutes pauses it instead, with an
    /// `alert.paused` notice to its account (`decisions.md` §16).
    // Long: one transaction's statements in the order they must run (flood guard, counts, pauses,
    // inbox, outbox, Telegram); each is one call, split they would pass the transaction's state
    // along.
    pub fn record_firings(&mut self, firings: &[FiringRecord], texts: &dyn Render) -> Result<Recorded, StoreError> {
        let (db, telegram) = (&self.db, self.telegram);
        // On PostgreSQL each step is one statement for the whole batch (array parameters,
        // `unnest`), so a batch costs a few statements whatever its size; on SQLite one cached
        // statement per row (issue #59).
        db.in_transaction_of(|| {
            let (admitted, flooded) = self.flood_guard(firings)?;
            let rows = self.count_firings(&admitted)?;
            let done: Vec<(AlertRow, FiringRecord)> =
                rows.into_iter().zip(&admitted).filter_map(|(row, (f, _))| Some((row?, (*f).clone()))).collect();
            // An alert ends with a one-shot's firing (only its first: the update skips one
            // already triggered, so a second firing of it is recorded nowhere) or its last allowed.
            self.release_active(
                done.iter().filter(|(row, _)| row.status == AlertStatus::Triggered).map(|(row, _)| row.account_id),
            )?;
            let bodies: Vec<String> = done.iter().map(|(row, f)| texts.alert_fired(row, f)).collect();
            // An alert with a `message` has its text in the inbox entry; a chat format, its
            // service's body in the webhook (`None`: the event body).
            let entries: Vec<Option<String>> = done.iter().map(|(row, f)| texts.alert_inbox_entry(row, f)).collect();
            let sent: Vec<Option<String>> = done.iter().map(|(row, f)| texts.alert_chat_body(row, f)).collect();
            // The flood guard's pauses take their rows (already locked by `flood_guard`); the
            // inbox comes last among the row locks (`Store::write_inbox`), notices included.
            let paused = self.pause_flooded(&flooded)?;
            let mut inbox: Vec<NewEntry> = done
                .iter()
                .zip(bodies.iter().zip(entries))
                .map(|((row, f), (body, entry))| NewEntry {
                    account_id: row.account_id,
                    kind: "alert.triggered",
                    alert_id: row.id,
                    body: entry.unwrap_or_else(|| body.clone()),
                    created_ms: f.ts_ms,
                })
                .collect();
            inbox.extend(paused.iter().map(|(row, at)| NewEntry {
                account_id: row.account_id,
                kind: "alert.paused",
                alert_id: row.id,
                body: texts.alert_paused(row, *at),
                created_ms: *at,
            }));
            let first = self.write_inbox(&inbox)?;
            let fed = inbox.iter().zip(first..).map(|(e, id)| FedEntry {
                account_id: e.account_id,
                id,
                kind: e.kind,
                body: Arc::from(e.body.as_str()),
            });
            let fed: Vec<FedEntry> = fed.collect();
            // The webhook is in addition to the inbox, in the same transaction: a firing
            // that is recorded is also queued for delivery (at least once).
            let hooked: Vec<(&AlertRow, &FiringRecord, &str, &str)> = done
                .iter()
                .zip(bodies.iter().zip(&sent))
                .filter_map(|((row, f), (body, sent))| {
                    Some((row, f, row.webhook_url.as_deref()?, sent.as_deref().unwrap_or(body)))
                })
                .collect();
            let at = Col::I64(hooked.iter().map(|h| h.1.ts_ms).collect());
            let cols = [
                Col::I64(hooked.iter().map(|h| h.0.id).collect()),
                Col::I64(hooked.iter().map(|h| h.0.account_id).collect()),
                Col::Str(hooked.iter().map(|h| h.2).collect()),
                Col::Str(hooked.iter().map(|h| h.3).collect()),
                at.clone(),
                Col::Str(vec!["pending"; hooked.len()]),
                Col::I64(vec![0; hooked.len()]),
                at.clone(),
                at,
                Col::OptI64(vec![self.clock.as_ref().map(|c| c.now_ms()); hooked.len()]),
                Col::OptStr(vec![self.fence.as_ref().map(|f| f.partition.as_str()); hooked.len()]),
            ];
            let names = [
                "alert_id",
                "account_id",
                "url",
                "body",
                "trigger_ms",
                "state",
                "attempts",
                "next_attempt_ms",
                "created_ms",
                "committed_ms",
                "publisher",
            ];
            db.insert_rows("outbox", &names, &cols)?;
            let deliveries = delivered(&done, bodies, sent);
            if telegram {
                for (row, f) in &done {
                    let text = || texts.telegram_alert_fired(row, f);
                    queue_telegram(db, texts, row.account_id, row.id, text, f.ts_ms)?;
                }
                for (row, at) in &paused {
                    let text = || texts.telegram_alert_paused(row);
                    queue_telegram(db, texts, row.account_id, row.id, text, *at)?;
                }
            }
            let paused = paused.into_iter().map(|(row, _)| row).collect();
            // Last, so the lease's row is locked only for the commit (`Store::check_fence`).
            self.check_fence()?;
            Ok(Recorded { fired: done, paused, inbox: fed, deliveries })
        })
    }

    /// Counts the admitted firings on their alerts (each with the flood guard's times it is
    /// stored with): each alert's row after its firing, `None` for a firing recorded nowhere (a
    /// deleted, paused or ended alert's, one past `max_fires`), in order.
    fn count_firings(&self, admitted: &[(&FiringRecord, String)]) -> Result<Vec<Option<AlertRow>>, StoreError> {
        if !self.db.is_postgres() {
            let sets: Vec<_> = admitted
                .iter()
                .map(|(f, recent)| vals![f.alert_id, f.ts_ms, f.last, recent.as_str()].to_vec())
                .collect();
            let update = format!(
                "UPDATE alerts SET trigger_count = trigger_count + 1, last_triggered_ms = ?2, recent_fires = ?4,
                    version = version + 1,
                    status = CASE WHEN ?3 OR trigger_count + 1 >= COALESCE(max_fires, trigger_count + 2)
                        THEN 'triggered' ELSE status END
                 WHERE id = ?1 AND deleted_ms IS NULL AND paused IS NULL AND (status = 'active' OR NOT ?3)
                    AND (max_fires IS NULL OR trigger_count < max_fires) RETURNING {ALERT_COLUMNS}"
            );
            return self.db.query_opt_each(&update, &sets, alert_row);
        }
        // One statement per round; an UPDATE changes a row once, so an alert fired twice in the
        // batch has its second firing in the next round (a storm: one round).
        let update = format!(
            "UPDATE alerts SET trigger_count = trigger_count + 1, last_triggered_ms = u.u_ts, recent_fires = u.u_recent,
                version = version + 1,
                status = CASE WHEN u.u_last OR trigger_count + 1 >= COALESCE(max_fires, trigger_count + 2)
                    THEN 'triggered' ELSE status END
             FROM unnest(?1::bigint[], ?2::bigint[], ?3::boolean[], ?4::text[], ?5::bigint[])
                AS u(u_id, u_ts, u_last, u_recent, u_k)
             WHERE alerts.id = u.u_id AND deleted_ms IS NULL AND paused IS NULL AND (status = 'active' OR NOT u.u_last)
                AND (max_fires IS NULL OR trigger_count < max_fires) RETURNING {ALERT_COLUMNS}, u.u_k"
        );
        self.db.custom_plans()?;
        let mut out: Vec<Option<AlertRow>> = vec![None; admitted.len()];
        let mut left: Vec<usize> = (0..admitted.len()).collect();
        while !left.is_empty() {
            let mut seen = std::collections::HashSet::new();
            let (round, later): (Vec<usize>, Vec<usize>) =
                left.iter().partition(|&&k| seen.insert(admitted[k].0.alert_id));
            let cols = [
                Col::I64(round.iter().map(|&k| admitted[k].0.alert_id).collect()),
                Col::I64(round.iter().map(|&k| admitted[k].0.ts_ms).collect()),
                Col::Bool(round.iter().map(|&k| admitted[k].0.last).collect()),
                Col::Str(round.iter().map(|&k| admitted[k].1.as_str()).collect()),
                Col::I64(round.iter().map(|&k| k as i64).collect()),
            ];
            for (k, row) in
                self.db.query_columns(&update, &cols, |r| Ok((r.get::<i64>(ALERT_COLUMNS_COUNT)?, alert_row(r)?)))?
            {
                if let Some(slot) = usize::try_from(k).ok().and_then(|k| out.get_mut(k)) {
                    *slot = Some(row);
                }
            }
            left = later;
        }
        Ok(out)
    }

    /// The flood guard over a batch: each firing that may be recorded, with its alert's latest
    /// firing times after it (stored with it), and the alerts (id, time) a firing would flood.
    /// Reads the batch's repeating alerts once each, in id order (locked on PostgreSQL until
    /// the transaction ends: two market nodes recording one `*` alert count one after the other).
    #[allow(clippy::type_complexity)]
    fn flood_guard<'f>(
        &self,
        firings: &'f [FiringRecord],
    ) -> Result<(Vec<(&'f FiringRecord, String)>, BTreeMap<i64, i64>), StoreError> {
        let ids: std::collections::BTreeSet<i64> = firings.iter().filter(|f| !f.last).map(|f| f.alert_id).collect();
        let mut windows: BTreeMap<i64, FloodWindow> = if self.db.is_postgres() {
            // One statement, the rows locked in id order.
            let sql = "SELECT id, recent_fires FROM alerts WHERE id = ANY(?1::bigint[]) AND repeat AND paused IS NULL
                AND deleted_ms IS NULL ORDER BY id FOR UPDATE";
            let read = self.db.query_columns(sql, &[Col::I64(ids.iter().copied().collect())], |r| {
                Ok((r.get::<i64>(0)?, r.get::<String>(1)?))
            })?;
            read.into_iter().map(|(id, w)| (id, FloodWindow::parse(&w))).collect()
        } else {
            let sql =
                "SELECT recent_fires FROM alerts WHERE id = ?1 AND repeat AND paused IS NULL AND deleted_ms IS NULL";
            let sets: Vec<_> = ids.iter().map(|id| vals![*id].to_vec()).collect();
            let read = self.db.query_opt_each(sql, &sets, |r| r.get::<String>(0))?;
            ids.iter().zip(read).filter_map(|(id, w)| Some((*id, FloodWindow::parse(&w?)))).collect()
        };
        let mut flooded = BTreeMap::new();
        let mut admitted = Vec::with_capacity(firings.len());
        for f in firings {
            if flooded.contains_key(&f.alert_id) {
                continue;
            }
            let Some(w) = windows.get_mut(&f.alert_id) else {
                admitted.push((f, String::new()));
                continue;
            };
            if w.admit(f.ts_ms) {
                admitted.push((f, w.stored()));
            } else {
                flooded.insert(f.alert_id, f.ts_ms);
            }
        }
        Ok((admitted, flooded))
    }

    /// Pauses the alerts `flooded` names (id, the time of the firing that flooded it); the rows
    /// paused, each with that time (their notices are the caller's).
    fn pause_flooded(&self, flooded: &BTreeMap<i64, i64>) -> Result<Vec<(AlertRow, i64)>, StoreError> {
        let sql = format!(
            "UPDATE alerts SET paused = 'flood_guard', version = version + 1 WHERE id = ?1 AND paused IS NULL AND deleted_ms IS NULL
             RETURNING {ALERT_COLUMNS}"
        );
        let sets: Vec<_> = flooded.keys().map(|id| vals![*id].to_vec()).collect();
        let rows = self.db.query_opt_each(&sql, &sets, alert_row)?.into_iter().flatten();
        Ok(rows
            .map(|row| {
                let at = flooded.get(&row.id).copied().unwrap_or_default();
                (row, at)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flood_guard::FLOOD_WINDOW_MS;
    use crate::store::test_support::*;
    use crate::store::{AlertChanges, NewAlert, PausedBy, WebhookFormat};

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

    /// `decisions.md` §16 where firings are recorded: more than 15 firings in 3 minutes pause a
    /// repeating alert (across batches, with a notice), a resume forgets the count, `max_fires`
    /// ends an alert after its last, a paused alert's firing is recorded nowhere; an alert with
    /// a message and a chat format has its text in the inbox and its service's body queued.
    #[test]
    fn the_flood_guard_and_the_limits_hold_where_firings_are_recorded() {
        on_each_backend("limits", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let busy = s.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert").id;
            let fire = |id, i: i64| FiringRecord::at_price(id, 300, 10_000 + i * 1_000, false);
            let first: Vec<_> = (0..10).map(|i| fire(busy, i)).collect();
            assert_eq!(s.record_firings(&first, &Texts).expect("record").fired.len(), 10);
            let more: Vec<_> = (10..17).map(|i| fire(busy, i)).collect();
            let r = s.record_firings(&more, &Texts).expect("record");
            assert_eq!(r.fired.len(), 5, "15 in all");
            assert_eq!(
                r.paused.iter().map(|p| (p.id, p.paused)).collect::<Vec<_>>(),
                [(busy, Some(PausedBy::FloodGuard))]
            );
            assert_eq!(r.leaving().len(), 1, "a paused alert leaves its shards");
            let inbox = s.inbox(a, i64::MAX, 100).expect("inbox");
            assert_eq!((inbox.len(), inbox[0].kind.as_str(), inbox[0].created_ms), (16, "alert.paused", 25_000));
            let notice: serde_json::Value = serde_json::from_str(&inbox[0].body).expect("json");
            assert_eq!(
                (&notice["reason"], &notice["firings"], &notice["windowS"]),
                (&"flood_guard".into(), &16.into(), &180.into())
            );
            assert!(s.record_firings(&[fire(busy, 18)], &Texts).expect("record").fired.is_empty(), "paused");
            // Resumed: counted afresh; a firing 3 minutes after the 15th's window is its own.
            let resume = AlertChanges { paused: Some(false), ..AlertChanges::default() };
            assert_eq!(s.update_alert(a, busy, &resume).expect("resume").map(|r| r.paused), Some(None));
            let again: Vec<_> = (19..34).map(|i| fire(busy, i)).collect();
            assert_eq!(s.record_firings(&again, &Texts).expect("record").fired.len(), 15);
            let later = FiringRecord::at_price(busy, 300, 10_000 + 19_000 + FLOOD_WINDOW_MS, false);
            let r = s.record_firings(&[later], &Texts).expect("record");
            assert_eq!((r.fired.len(), r.paused.len()), (1, 0), "the window slides");
            // max_fires 2: the second firing ends it; a third is recorded nowhere.
            let two = NewAlert { max_fires: Some(2), ..alert(a, "binance", "ETHUSDT") };
            let two = s.insert_alert(&two).expect("insert").id;
            let r = s.record_firings(&[fire(two, 0), fire(two, 1), fire(two, 2)], &Texts).expect("record");
            assert_eq!(r.fired.len(), 2);
            assert_eq!((r.fired[1].0.status, r.fired[1].0.trigger_count), (AlertStatus::Triggered, 2));
            assert_eq!(r.leaving().iter().map(|x| x.id).collect::<Vec<_>>(), [two]);
            // A message and Discord: the inbox entry has the text, the webhook the service's body.
            let chat = NewAlert {
                webhook_url: Some("https://example.com/h".into()),
                message: Some("{{symbol}} at {{price}}".into()),
                webhook_format: WebhookFormat::Discord,
                ..alert(a, "okx", "SOLUSDT")
            };
            let chat = s.insert_alert(&chat).expect("insert").id;
            s.record_firings(&[fire(chat, 0)], &Texts).expect("record");
            let entry = &s.inbox(a, i64::MAX, 1).expect("inbox")[0];
            let body: serde_json::Value = serde_json::from_str(&entry.body).expect("json");
            assert_eq!((&body["event"], &body["text"]), (&"alert.triggered".into(), &"SOLUSDT at 0.000003".into()));
            let due = s.due_deliveries(i64::MAX, 100).expect("due");
            let sent: Vec<&str> = due.iter().filter(|d| d.alert_id == chat).map(|d| d.body.as_str()).collect();
            assert_eq!(
                sent,
                [r#"{"content":"SOLUSDT at 0.000003","allowed_mentions":{"parse":[],"users":[],"roles":[]}}"#]
            );
        });
    }
}
