//! Durable storage: accounts, API keys (as SHA-256 hashes), alerts, the inbox and the outbox,
//! with migrations, in embedded SQLite (the default) or on a PostgreSQL server (a cluster's
//! shared store, `--postgres`).
//!
//! SQLite: one database file, `rampart.db`, in the data directory, in WAL mode so the keys CLI
//! can write while the server reads; the schema is versioned with `PRAGMA user_version`.
//! PostgreSQL: the same tables (`BIGINT` ids, `BOOLEAN` flags, `BYTEA` hashes), versioned in the
//! `meta` row `schema_version`. Either way each migration runs once, in order, in one
//! transaction, and every query is the same SQL text ([`db`](super::db) adapts parameters).
//! Nothing here runs on a shard.
//!
//! This file holds the connection ([`Store`], [`StoreLocation`]) and its transactions (groups
//! of jobs); each table family has its own file with its `impl Store` block and its tests:
//! `schema` (migrations), `locks` (who may use a database), `keys`, `account` (what an account
//! manages on the site), `session` (site sessions), `alerts`, `signing` (webhook secrets),
//! `firings`, `outbox` (deliveries and their outcomes; the retry schedule is the caller's),
//! `delivery_log`, `published` (the cluster's firings stream), `inbox`, `site` (the site's
//! alerts) and `owner` (partition leases); `render` is the [`Render`] seam through which every
//! body the store writes is made elsewhere.

#[cfg(test)]
use std::path::PathBuf;

#[cfg(test)]
use super::db::Db;
pub use super::db::StoreError;

mod account;
mod alert_row;
mod alerts;
mod backup;
mod conn;
mod delivery_log;
mod firing_record;
mod firings;
mod inbox;
mod keys;
mod locks;
mod outbox;
mod owner;
mod published;
mod render;
mod retention;
mod schema;
mod session;
mod signing;
mod site;
mod site_row;
mod sizes;

pub use account::ACCOUNT_KEYS_MAX;
pub use alert_row::{
    condition_columns, AlertChanges, AlertRow, AlertStatus, ConditionColumns, Idempotent, NewAlert, PausedBy,
    StatusFilter, WebhookFormat,
};
pub use alerts::Delisting;
pub use backup::Backup;
pub use conn::{Fence, Store, StoreLocation};
pub use delivery_log::{DeliveryLogRow, Redelivery, ATTEMPTS_PER_ALERT_MAX, DELIVERY_LOG_KEEP_MS};
pub use firing_record::FiringRecord;
pub use firings::Recorded;
pub use inbox::InboxRow;
pub use keys::{generate_key, hash_key, is_key_shaped, CreatedKey, KeyRow, Revoked, KEY_WATCHER_ALIVE_MS};
pub use locks::{DataDirLock, LockError, PgLockHolder, ServerLock};
pub use outbox::{AttemptResult, Channel, FailKind, OutboxRow, Outcome, RetrySchedule, DUE_PER_ACCOUNT_MAX};
pub use owner::Lease;
pub use published::{message_id, Unpublished};
pub use render::Render;
pub use retention::{Pruned, Retention, PRUNE_BATCH};
pub use session::{SessionRecord, SESSION_TOUCH_MS};
pub use signing::SigningState;
pub use site_row::{
    direction_str, parse_direction, parse_side, side_str, NewSiteAlert, SiteAlertRow, SiteCondition, SiteFiringRecord,
    SiteRequest,
};
pub use sizes::{Sizes, COUNTED_TABLES, SIZES_EVERY};

#[cfg(test)]
impl Store {
    /// The SQLite connection under a test's store (for fault injection).
    pub(crate) fn lite(&self) -> &rusqlite::Connection {
        self.db.lite().expect("a SQLite store")
    }
}

/// Where a test's database lives: the behaviour tests run once on each backend.
#[cfg(test)]
pub(crate) enum TestDb {
    /// A SQLite data directory.
    Sqlite(PathBuf),
    /// A schema of the test process's PostgreSQL server (`rampart_testkit::pg`).
    Postgres(String),
}

#[cfg(test)]
impl TestDb {
    /// A new connection to it (migrating it on first open).
    pub(crate) fn open(&self) -> Store {
        match self {
            TestDb::Sqlite(dir) => Store::open(dir).expect("open SQLite"),
            TestDb::Postgres(url) => Store::open_postgres(url).expect("open PostgreSQL"),
        }
    }
}

/// Runs `f` on a fresh SQLite database, then on a fresh PostgreSQL schema (named after the
/// test, so a failure says which backend it was on).
#[cfg(test)]
pub(crate) fn on_each_backend(name: &str, f: impl Fn(&TestDb)) {
    let dir = std::env::temp_dir().join(format!("rampart-db-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{name}: on SQLite");
    f(&TestDb::Sqlite(dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{name}: on PostgreSQL");
    f(&TestDb::Postgres(fresh_postgres_schema()));
}

/// A new, empty schema on the test process's PostgreSQL server; its connection string.
#[cfg(test)]
pub(crate) fn fresh_postgres_schema() -> String {
    let server = rampart_testkit::pg::server();
    let schema = server.fresh_schema_name();
    let admin = Db::postgres(&server.admin_url()).expect("connect as admin");
    admin.batch(&format!("CREATE SCHEMA {schema}")).expect("create the schema");
    server.url_in_schema(&schema)
}

/// Helpers of the store's tests, shared by every table family's tests.
#[cfg(test)]
pub(crate) mod test_support {
    pub(crate) use super::*;
    pub(crate) use crate::text::Texts;
    pub(crate) use rampart_engine::alert::{Condition, Cross, Move};
    pub(crate) use rampart_engine::{Price, Timeframe, Venue};
    pub(crate) use rampart_state::board::BoardNumber;
    pub(crate) use std::path::PathBuf;
    pub(crate) use std::time::Duration;

    pub(crate) fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rampart-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    pub(crate) fn alert(account_id: i64, exchange: &str, symbol: &str) -> NewAlert {
        NewAlert {
            account_id,
            exchange: Venue::parse(exchange).expect("a venue"),
            symbol: symbol.into(),
            condition: Condition::Price { cross: Cross::Above, level: Price(200) },
            repeat: true,
            note: String::new(),
            webhook_url: None,
            created_price: 100,
            created_ms: 1,
            expires_ms: None,
            cooldown_s: 0,
            max_fires: None,
            message: None,
            webhook_format: crate::store::WebhookFormat::Json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;

    /// On PostgreSQL a group's `BEGIN`, savepoints and releases go with the next statement (one
    /// round trip): a failed job in the middle is still undone alone, the jobs around it kept.
    #[test]
    fn a_postgres_group_undoes_a_failed_job_alone_with_its_statements_pipelined() {
        let at = TestDb::Postgres(fresh_postgres_schema());
        let mut s = at.open();
        let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
        s.begin_group_within(Duration::from_secs(2)).expect("group");
        let mut kept = Vec::new();
        for job in 0..3 {
            s.begin_job().expect("job");
            let id = s.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert").id;
            let failed = job == 1 && s.db.execute("INSERT INTO no_such_table (x) VALUES (1)", &[]).is_err();
            if !failed {
                kept.push(id);
            }
            s.end_job(!failed).expect("end");
        }
        s.commit_group().expect("commit");
        let ids: Vec<i64> = at.open().list_alerts(a, StatusFilter::All).expect("list").iter().map(|r| r.id).collect();
        assert_eq!(ids, kept, "the first and the third job");
        assert_eq!(kept.len(), 2);
    }

    /// A transaction that has sent nothing yet (its `BEGIN` waits for its first statement)
    /// moves whole to a new connection when the old one was lost.
    #[test]
    fn a_postgres_transaction_not_yet_sent_survives_a_lost_connection() {
        let at = TestDb::Postgres(fresh_postgres_schema());
        let mut s = at.open();
        let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
        let pid: i64 = s.db.query_one("SELECT pg_backend_pid()::bigint", &[], |r| r.get(0)).expect("pid");
        let admin = Db::postgres(&rampart_testkit::pg::server().admin_url()).expect("admin");
        admin.query_one(&format!("SELECT pg_terminate_backend({pid})"), &[], |r| r.get::<bool>(0)).expect("end it");
        std::thread::sleep(Duration::from_millis(300));
        s.begin_group().expect("group");
        s.begin_job().expect("job");
        let id = s.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert on a new connection").id;
        s.end_job(true).expect("end");
        s.commit_group().expect("commit");
        assert_eq!(at.open().alert(id).expect("read").map(|r| r.id), Some(id));
    }

    /// PostgreSQL keeps nothing of a transaction after a failed statement, and its `COMMIT`
    /// then says nothing: a job that swallowed such an error must not be answered as kept.
    #[test]
    fn a_postgres_group_with_a_swallowed_error_is_not_reported_kept() {
        let at = TestDb::Postgres(fresh_postgres_schema());
        let mut s = at.open();
        let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
        s.begin_group().expect("group");
        s.begin_job().expect("job");
        s.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert");
        assert!(s.db.execute("INSERT INTO no_such_table (x) VALUES (1)", &[]).is_err());
        // The job reports success anyway; the storage thread ends it (which may fail) and
        // commits the group (run_group), which must fail.
        let _ = s.end_job(true);
        assert!(s.commit_group().is_err(), "an aborted transaction was reported committed");
        assert!(!s.db.in_transaction());
        assert!(at.open().list_alerts(a, StatusFilter::All).expect("list").is_empty(), "nothing was kept");
        // The connection is usable again.
        s.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert after the failed group");
    }

    /// Each market node's publisher takes its own writer's outbox rows and rows of no
    /// partition at once, another partition's only once they waited (issue #59); without a
    /// partition, every row.
    #[test]
    fn a_publisher_takes_its_own_partitions_rows_first() {
        let url = fresh_postgres_schema();
        let clock: rampart_state::clock::SharedClock =
            std::sync::Arc::new(rampart_state::clock::ManualClock::new(10_000));
        let claim = Store::open_postgres(&url).expect("claims");
        let mut rows = Vec::new();
        for p in ["0/2", "1/2"] {
            assert_eq!(claim.claim_partition(p, "n", 60_000).expect("claim"), Some(1));
            let fence = Fence { partition: p.into(), epoch: 1 };
            let mut w = Store::open_postgres(&url).expect("writer").with_fence(fence).with_clock(clock.clone());
            let acc = w.create_account_with_key("developer", None, 1).expect("account").account_id;
            let mut hooked = alert(acc, "binance", "BTCUSDT");
            hooked.webhook_url = Some("https://example.com/h".into());
            let id = w.insert_alert(&hooked).expect("insert").id;
            w.record_firings(&[FiringRecord::at_price(id, 300, 7_000, false)], &crate::text::Texts).expect("record");
            rows.push(id);
        }
        let r = Store::open_postgres(&url).expect("reader");
        let alerts = |got: Vec<Unpublished>| got.iter().map(|u| u.alert_id).collect::<Vec<_>>();
        assert_eq!(alerts(r.unpublished(10, Some("0/2"), 10_000).expect("read")), [rows[0]], "its own only");
        assert_eq!(alerts(r.unpublished(10, Some("1/2"), 10_000).expect("read")), [rows[1]]);
        assert_eq!(alerts(r.unpublished(10, Some("0/2"), 10_001).expect("read")), rows, "the other's once waited");
        assert_eq!(alerts(r.unpublished(10, None, 0).expect("read")), rows, "no partition: every row");
    }

    /// A partition's lease: one holder at a time, renewed by it, claimed by another only once
    /// expired (with the next epoch), and the old holder's writes fenced from then on.
    #[test]
    fn a_partition_lease_has_one_holder_and_fences_the_one_it_replaced() {
        let url = fresh_postgres_schema();
        let (a, b) = (Store::open_postgres(&url).expect("a"), Store::open_postgres(&url).expect("b"));
        assert_eq!(a.claim_partition("0/2", "a", 300).expect("claim"), Some(1));
        assert_eq!(b.claim_partition("0/2", "b", 300).expect("claim"), None, "held");
        assert_eq!(b.claim_partition("1/2", "b", 300).expect("claim"), Some(1), "another partition");
        assert!(a.renew_partition("0/2", "a", 1, 300).expect("renew"));
        let lease = b.partition_lease("0/2").expect("read").expect("a lease");
        assert!(lease.epoch == 1 && lease.holder == "a" && lease.expires_in_ms > 0, "{lease:?}");
        let mut old =
            Store::open_postgres(&url).expect("writer").with_fence(Fence { partition: "0/2".into(), epoch: 1 });
        let acc = old.create_account_with_key("developer", None, 1).expect("account").account_id;
        let id = old.insert_alert(&alert(acc, "binance", "BTCUSDT")).expect("insert").id;
        let firing = FiringRecord::at_price(id, 100_000_000, 1, false);
        old.record_firings(std::slice::from_ref(&firing), &crate::text::Texts).expect("the owner records");
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(b.claim_partition("0/2", "b", 300).expect("claim"), Some(2), "expired: the next epoch");
        assert!(!a.renew_partition("0/2", "a", 1, 300).expect("renew"), "the old holder learns it lost");
        let refused = old.record_firings(&[FiringRecord { ts_ms: 2, ..firing }], &crate::text::Texts);
        assert!(matches!(refused, Err(StoreError::Fenced)), "{refused:?}");
        b.release_partition("0/2", "b", 2).expect("release");
        assert!(b.partition_lease("0/2").expect("read").expect("a lease").expires_in_ms < 0, "released");
    }
}
