//! How much the database holds: rows per table and its size on disk, for `/metrics`
//! (issue #62). Counted by the checkpoint thread every [`SIZES_EVERY`], off every client's path
//! (a count reads a whole table: tens of milliseconds for a million rows on SQLite).

use std::time::Duration;

use super::conn::Store;
use crate::db::StoreError;

/// The tables counted, each with its rows in `rampart_storage_rows{table}`.
pub const COUNTED_TABLES: [&str; 12] = [
    "accounts",
    "api_keys",
    "alerts",
    "inbox",
    "outbox",
    "attempts",
    "idempotency",
    "site_alerts",
    "site_sessions",
    "webhook_secrets",
    "channels",
    "key_watchers",
];

/// How often the checkpoint thread counts.
pub const SIZES_EVERY: Duration = Duration::from_secs(30);

/// Rows per table (in [`COUNTED_TABLES`]' order) and the database's bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    /// Rows of each counted table.
    pub rows: Vec<(&'static str, i64)>,
    /// SQLite: the file's pages and its WAL; PostgreSQL: `pg_database_size` of the database.
    pub bytes: i64,
}

impl Store {
    /// Counts every table's rows and measures the database.
    pub fn sizes(&self) -> Result<Sizes, StoreError> {
        let mut rows = Vec::with_capacity(COUNTED_TABLES.len());
        for table in COUNTED_TABLES {
            let n = self.db.query_one(&format!("SELECT count(*) FROM {table}"), &[], |r| r.get::<i64>(0))?;
            rows.push((table, n));
        }
        let bytes = if self.is_postgres() {
            self.db.query_one("SELECT pg_database_size(current_database())", &[], |r| r.get::<i64>(0))?
        } else {
            let pages = self.db.query_one(
                "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
                &[],
                |r| r.get::<i64>(0),
            )?;
            let mut wal = self.path.as_os_str().to_owned();
            wal.push("-wal");
            pages + std::fs::metadata(&wal).map_or(0, |m| m.len() as i64)
        };
        Ok(Sizes { rows, bytes })
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{on_each_backend, test_support::*};

    #[test]
    fn sizes_count_every_table_and_measure_the_database() {
        on_each_backend("sizes", |at| {
            let mut store = at.open();
            let before = store.sizes().expect("sizes");
            assert_eq!(before.rows.len(), super::COUNTED_TABLES.len());
            assert!(before.bytes > 0, "{before:?}");
            let account = store.create_account_with_key("developer", None, 1).expect("account").account_id;
            store.insert_alert(&alert(account, "binance", "BTCUSDT")).expect("alert");
            let after = store.sizes().expect("sizes");
            let rows = |s: &super::Sizes, t: &str| s.rows.iter().find(|(n, _)| *n == t).map(|(_, r)| *r);
            assert_eq!(rows(&after, "alerts"), rows(&before, "alerts").map(|n| n + 1));
            assert_eq!(rows(&after, "accounts"), rows(&before, "accounts").map(|n| n + 1));
        });
    }
}
