//! Who owns a market partition (`decisions.md` §14, PostgreSQL schema version 5): a lease row
//! per partition with an epoch that grows at every change of owner. A market node claims the
//! partition when the lease has expired, renews it while it runs, and every write of its
//! firing writer checks, inside the write's transaction, that its epoch is still the row's
//! (fencing): a node that lost the partition can no longer record anything, whatever it
//! believes. Lease times are the database server's clock, so nodes' clocks need not agree.
//!
//! Rationale: the session advisory lock this replaces vanished silently when PostgreSQL
//! restarted, and a second node was then admitted for a running partition (both fired). A row
//! survives a restart; an epoch checked on every write makes a stale owner harmless even before
//! it notices.

use super::conn::{Fence, Store};
use crate::db::{vals, StoreError};

/// The database server's clock in Unix milliseconds (one clock for every node).
const DB_NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// A partition's lease as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Grows by one at every claim.
    pub epoch: i64,
    /// The holding process's id (random per process).
    pub holder: String,
    /// Milliseconds until it expires by the database's clock (negative: expired).
    pub expires_in_ms: i64,
}

impl Store {
    /// This store's writes of firings, delistings and expiries refused once `fence` no longer
    /// owns its partition (a market node's writer).
    pub fn with_fence(mut self, fence: Fence) -> Store {
        self.fence = Some(fence);
        self
    }

    /// Inside a transaction: fails with [`StoreError::Fenced`] when this store writes for an
    /// owner that is no longer the partition's. The row is read `FOR SHARE`, so a claim by
    /// another node waits for this transaction, and a write never lands after a claim.
    ///
    /// Each writing transaction calls it last, after its statements: the row is then locked only
    /// from there to the commit, and the owner's renewal (an update of the same row) never waits
    /// behind a batch's statements (issue #59: read first, it held storms' renewals up to 0.4 s
    /// on the 2-core VM, the lease being 2 s; a 4 096-firing batch has taken 0.6–2 s there). A
    /// claim that commits before the check fences the whole transaction, as one that came before
    /// its first statement did.
    pub(crate) fn check_fence(&self) -> Result<(), StoreError> {
        let Some(f) = &self.fence else { return Ok(()) };
        let sql = "SELECT epoch FROM partition_owners WHERE partition = ?1 FOR SHARE";
        match self.db.query_opt(sql, vals![f.partition.as_str()], |r| r.get::<i64>(0))? {
            Some(e) if e == f.epoch => Ok(()),
            _ => Err(StoreError::Fenced),
        }
    }

    /// Claims `partition` for `holder` for `lease_ms` when nobody holds it or its lease had
    /// expired by the database's clock: the new epoch, or `None` while another holds it.
    pub fn claim_partition(&self, partition: &str, holder: &str, lease_ms: i64) -> Result<Option<i64>, StoreError> {
        let sql = format!(
            "INSERT INTO partition_owners (partition, epoch, holder, expires_ms) VALUES (?1, 1, ?2, {DB_NOW_MS} + ?3)
             ON CONFLICT (partition) DO UPDATE SET epoch = partition_owners.epoch + 1, holder = excluded.holder,
                expires_ms = excluded.expires_ms
             WHERE partition_owners.expires_ms < {DB_NOW_MS}
             RETURNING epoch"
        );
        self.db.query_opt(&sql, vals![partition, holder, lease_ms], |r| r.get::<i64>(0))
    }

    /// Extends `holder`'s lease of `epoch` by `lease_ms` from now; false when the partition has
    /// another epoch (another node claimed it: this one must stop). An expired lease nobody
    /// claimed is extended: its owner simply goes on.
    pub fn renew_partition(
        &self,
        partition: &str,
        holder: &str,
        epoch: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE partition_owners SET expires_ms = {DB_NOW_MS} + ?4 WHERE partition = ?1 AND holder = ?2 AND epoch = ?3"
        );
        Ok(self.db.execute(&sql, vals![partition, holder, epoch, lease_ms])? == 1)
    }

    /// Ends `holder`'s lease of `epoch` now (a clean stop), so a standby claims at once.
    pub fn release_partition(&self, partition: &str, holder: &str, epoch: i64) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE partition_owners SET expires_ms = 0 WHERE partition = ?1 AND holder = ?2 AND epoch = ?3",
            vals![partition, holder, epoch],
        )?;
        Ok(())
    }

    /// The partition's lease, if it was ever claimed.
    pub fn partition_lease(&self, partition: &str) -> Result<Option<Lease>, StoreError> {
        let sql = format!("SELECT epoch, holder, expires_ms - {DB_NOW_MS} FROM partition_owners WHERE partition = ?1");
        self.db.query_opt(&sql, vals![partition], |r| {
            Ok(Lease { epoch: r.get(0)?, holder: r.get(1)?, expires_in_ms: r.get(2)? })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;
    use crate::store::{AlertRow, FiringRecord, Render, SiteAlertRow, SiteFiringRecord};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Mutex};

    /// Renders as [`Texts`] does, but holds the transaction it renders in: the first body
    /// asked for tells `inside` and waits for `go` (the firing writer's statements before its
    /// bodies have run; its transaction is open).
    struct Holding {
        inside: Mutex<mpsc::Sender<()>>,
        go: Mutex<mpsc::Receiver<()>>,
        held: AtomicBool,
    }

    impl Holding {
        fn new() -> (Holding, mpsc::Receiver<()>, mpsc::Sender<()>) {
            let ((inside, told), (go_tx, go)) = (mpsc::channel(), mpsc::channel());
            let h = Holding { inside: Mutex::new(inside), go: Mutex::new(go), held: AtomicBool::new(false) };
            (h, told, go_tx)
        }
    }

    impl Render for Holding {
        fn alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String {
            if !self.held.swap(true, Ordering::AcqRel) {
                self.inside.lock().expect("inside").send(()).expect("the test waits");
                // Bounded, so a failed test ends instead of hanging here.
                let _ = self.go.lock().expect("go").recv_timeout(Duration::from_secs(30));
            }
            Texts.alert_fired(row, f)
        }
        fn alert_inbox_entry(&self, row: &AlertRow, f: &FiringRecord) -> Option<String> {
            Texts.alert_inbox_entry(row, f)
        }
        fn alert_chat_body(&self, row: &AlertRow, f: &FiringRecord) -> Option<String> {
            Texts.alert_chat_body(row, f)
        }
        fn alert_paused(&self, row: &AlertRow, at_ms: i64) -> String {
            Texts.alert_paused(row, at_ms)
        }
        fn telegram_alert_paused(&self, row: &AlertRow) -> String {
            Texts.telegram_alert_paused(row)
        }
        fn alert_delisted(&self, row: &AlertRow, now_ms: i64, perp: bool) -> String {
            Texts.alert_delisted(row, now_ms, perp)
        }
        fn alert_expired(&self, row: &AlertRow, now_ms: i64) -> String {
            Texts.alert_expired(row, now_ms)
        }
        fn site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> (&'static str, String) {
            Texts.site_fired(row, f)
        }
        fn telegram_alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String {
            Texts.telegram_alert_fired(row, f)
        }
        fn telegram_alert_delisted(&self, row: &AlertRow, perp: bool) -> String {
            Texts.telegram_alert_delisted(row, perp)
        }
        fn telegram_alert_expired(&self, row: &AlertRow) -> String {
            Texts.telegram_alert_expired(row)
        }
        fn telegram_site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> String {
            Texts.telegram_site_fired(row, f)
        }
        fn telegram_body(&self, chat: &str, text: &str) -> String {
            Texts.telegram_body(chat, text)
        }
    }

    /// Records `firing` through `writer` on a thread, held inside its transaction until `step`
    /// has run (after the alerts' update, before the inbox and the outbox); what it came to.
    fn record_around(
        mut writer: Store,
        firing: FiringRecord,
        step: impl FnOnce(),
    ) -> Result<crate::store::Recorded, StoreError> {
        let (texts, inside, go) = Holding::new();
        let recording = std::thread::spawn(move || writer.record_firings(&[firing], &texts));
        inside.recv_timeout(Duration::from_secs(30)).expect("the writer is inside its transaction");
        step();
        go.send(()).expect("the writer waits");
        recording.join().expect("the writer's thread")
    }

    /// The owner's renewal does not wait for its writer's batch, since the fence is checked as
    /// the batch's last statement (issue #59: a storm's batch holds its transaction 0.6–2 s,
    /// the lease is 2 s); and a claim that lands while a batch of the replaced owner runs still
    /// refuses all of it. With the fence read first, both the renewal and the claim waited for
    /// the batch: each runs here with a 1 s lock timeout, so waiting fails the test.
    #[test]
    fn a_renewal_does_not_wait_for_the_writers_batch_and_a_claim_during_one_fences_it() {
        let url = fresh_postgres_schema();
        let (mut a, mut b) = (Store::open_postgres(&url).expect("a"), Store::open_postgres(&url).expect("b"));
        a.set_busy_timeout(Duration::from_secs(1)).expect("a's lock timeout");
        b.set_busy_timeout(Duration::from_secs(1)).expect("b's lock timeout");
        assert_eq!(a.claim_partition("0/2", "a", 60_000).expect("claim"), Some(1));
        let fenced = || {
            let w = Store::open_postgres(&url).expect("writer");
            w.with_fence(Fence { partition: "0/2".into(), epoch: 1 })
        };
        let mut setup = fenced();
        let acc = setup.create_account_with_key("developer", None, 1).expect("account").account_id;
        let one_shot = |s: &mut Store| {
            let hooked =
                NewAlert { webhook_url: Some("https://example.com/h".into()), ..alert(acc, "binance", "BTCUSDT") };
            s.insert_alert(&hooked).expect("insert").id
        };
        let (first, second) = (one_shot(&mut setup), one_shot(&mut setup));

        let firing = FiringRecord::at_price(first, 100_000_000, 1, false);
        let recorded = record_around(fenced(), firing, || {
            assert!(a.renew_partition("0/2", "a", 1, 300).expect("renewed while the batch runs"), "still a's");
        });
        assert_eq!(recorded.expect("the owner records").fired.len(), 1);

        std::thread::sleep(Duration::from_millis(400));
        let firing = FiringRecord::at_price(second, 100_000_000, 2, false);
        let refused = record_around(fenced(), firing, || {
            assert_eq!(b.claim_partition("0/2", "b", 60_000).expect("claimed while the batch runs"), Some(2));
        });
        assert!(matches!(refused, Err(StoreError::Fenced)), "{refused:?}");
        let rows = b.list_alerts(acc, StatusFilter::All).expect("list");
        let count = |id: i64| rows.iter().find(|r| r.id == id).map(|r| r.trigger_count);
        assert_eq!((count(first), count(second)), (Some(1), Some(0)), "the fenced batch left nothing");
        let queued: Vec<i64> = b.unpublished(10, None, 0).expect("outbox").iter().map(|u| u.alert_id).collect();
        assert_eq!(queued, [first], "one delivery queued, the owner's");
    }
}
