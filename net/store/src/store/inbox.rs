//! The account inbox: every firing and notice of an account, read newest first or after an id
//! (live push and streams).

use super::conn::Store;
use crate::db::{vals, Col, Row, StoreError};

/// One inbox entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxRow {
    /// Entry id.
    pub id: i64,
    /// `alert.triggered` or `alert.delisted`.
    pub kind: String,
    /// The alert concerned.
    pub alert_id: Option<i64>,
    /// JSON body.
    pub body: String,
    /// Time written.
    pub created_ms: i64,
}

/// An inbox entry to write ([`Store::write_inbox`]).
pub(super) struct NewEntry {
    pub account_id: i64,
    pub kind: &'static str,
    pub alert_id: i64,
    pub body: String,
    pub created_ms: i64,
}

fn inbox_row(r: &Row<'_>) -> Result<InboxRow, StoreError> {
    Ok(InboxRow { id: r.get(0)?, kind: r.get(1)?, alert_id: r.get(2)?, body: r.get(3)?, created_ms: r.get(4)? })
}

impl Store {
    /// Writes `entries` in the caller's transaction, with ids in commit order (issue #50): the
    /// ids come from the counter row `inbox_next`, whose lock the transaction holds until it
    /// ends, so a transaction that took lower ids has committed before a later one can take
    /// any: an entry is never visible before one with a lower id, and a stream resuming after
    /// an id it saw misses nothing, however many nodes write. Called last among a
    /// transaction's row locks (only inserts follow), so the counter's wait is never part of a
    /// cycle. Returns the first entry's id (the others follow it).
    pub(super) fn write_inbox(&self, entries: &[NewEntry]) -> Result<i64, StoreError> {
        if entries.is_empty() {
            return Ok(0);
        }
        let n = entries.len() as i64;
        let last: i64 = self.db.query_one(
            "UPDATE meta SET value = value + ?1 WHERE key = 'inbox_next' RETURNING value",
            vals![n],
            |r| r.get(0),
        )?;
        // One statement for the batch on PostgreSQL, one a row on SQLite (`Db::insert_rows`).
        let cols = [
            Col::I64((last - n + 1..=last).collect()),
            Col::I64(entries.iter().map(|e| e.account_id).collect()),
            Col::Str(entries.iter().map(|e| e.kind).collect()),
            Col::I64(entries.iter().map(|e| e.alert_id).collect()),
            Col::Str(entries.iter().map(|e| e.body.as_str()).collect()),
            Col::I64(entries.iter().map(|e| e.created_ms).collect()),
        ];
        let names = ["id", "account_id", "kind", "alert_id", "body", "created_ms"];
        self.db.insert_rows("inbox", &names, &cols)?;
        Ok(last - n + 1)
    }

    /// An account's inbox entries after id `after`, oldest first, at most `limit` (live push
    /// reads on from the last entry it sent).
    pub fn inbox_after(&self, account_id: i64, after: i64, limit: u32) -> Result<Vec<InboxRow>, StoreError> {
        self.db.query(
            "SELECT id, kind, alert_id, body, created_ms FROM inbox WHERE account_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
            vals![account_id, after, i64::from(limit)],
            inbox_row,
        )
    }

    /// Every account's inbox entries with an id above `after`, oldest first, at most `limit`, each
    /// with its account (the streams' one reader of new entries, `decisions.md` §12).
    pub fn inbox_all_after(&self, after: i64, limit: u32) -> Result<Vec<(i64, InboxRow)>, StoreError> {
        self.db.query(
            "SELECT id, kind, alert_id, body, created_ms, account_id FROM inbox WHERE id > ?1 ORDER BY id LIMIT ?2",
            vals![after, i64::from(limit)],
            |r| Ok((r.get(5)?, inbox_row(r)?)),
        )
    }

    /// The id of the newest inbox entry of any account (0 when there is none).
    pub fn inbox_max_id(&self) -> Result<i64, StoreError> {
        self.db.query_one("SELECT COALESCE(MAX(id), 0) FROM inbox", vals![], |r| r.get(0))
    }

    /// The id of an account's newest inbox entry (0 when it has none).
    pub fn inbox_last_id(&self, account_id: i64) -> Result<i64, StoreError> {
        self.db
            .query_one("SELECT COALESCE(MAX(id), 0) FROM inbox WHERE account_id = ?1", vals![account_id], |r| r.get(0))
    }

    /// An account's newest inbox entries with an id below `before` (`i64::MAX`: all), newest first.
    pub fn inbox(&self, account_id: i64, before: i64, limit: u32) -> Result<Vec<InboxRow>, StoreError> {
        self.db.query(
            "SELECT id, kind, alert_id, body, created_ms FROM inbox WHERE account_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3",
            vals![account_id, before, i64::from(limit)],
            inbox_row,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;

    /// Two writers on PostgreSQL: the one that took its ids first commits first, and the other
    /// waits for it; a reader never sees a later id before an earlier one, so resuming after
    /// any id it saw misses nothing (issue #50). SQLite's single writer gives this already.
    #[test]
    fn inbox_ids_are_in_commit_order_across_writers() {
        let at = TestDb::Postgres(fresh_postgres_schema());
        let url = match &at {
            TestDb::Postgres(url) => url.clone(),
            TestDb::Sqlite(_) => unreachable!(),
        };
        let mut first = at.open();
        let a = first.create_account_with_key("developer", None, 1).expect("a").account_id;
        let entry = |body: &str| NewEntry {
            account_id: a,
            kind: "alert.triggered",
            alert_id: 1,
            body: body.into(),
            created_ms: 5,
        };
        first.begin_group().expect("group");
        first.begin_job().expect("job");
        first.write_inbox(&[entry("{\"n\":1}"), entry("{\"n\":2}")]).expect("first");
        let (started, waiting) = std::sync::mpsc::channel();
        let second = std::thread::spawn(move || {
            let mut s = Store::open_postgres(&url).expect("open");
            s.begin_group().expect("group");
            started.send(()).expect("signal");
            s.write_inbox(&[NewEntry {
                account_id: a,
                kind: "alert.triggered",
                alert_id: 1,
                body: "{\"n\":3}".into(),
                created_ms: 6,
            }])
            .expect("second");
            s.commit_group().expect("commit");
        });
        waiting.recv().expect("the second writer started");
        std::thread::sleep(Duration::from_millis(300));
        let reader = at.open();
        assert!(reader.inbox_after(a, 0, 10).expect("read").is_empty(), "nothing is visible before the first commits");
        assert!(!second.is_finished(), "the second writer waits for the first");
        first.end_job(true).expect("end");
        first.commit_group().expect("commit");
        second.join().expect("second");
        let seen: Vec<(i64, String)> =
            reader.inbox_after(a, 0, 10).expect("read").into_iter().map(|r| (r.id, r.body)).collect();
        let bodies: Vec<&str> = seen.iter().map(|(_, b)| b.as_str()).collect();
        assert_eq!(bodies, ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}"], "ids follow the commits: {seen:?}");
        assert!(seen.windows(2).all(|w| w[1].0 == w[0].0 + 1), "dense: {seen:?}");
    }
}
