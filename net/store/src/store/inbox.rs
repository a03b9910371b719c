//! The account inbox: every firing and notice of an account, read newest first or after an id
//! (live push and streams).

use super::conn::Store;
use crate::db::{vals, Row, StoreError};

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

fn inbox_row(r: &Row<'_>) -> Result<InboxRow, StoreError> {
    Ok(InboxRow { id: r.get(0)?, kind: r.get(1)?, alert_id: r.get(2)?, body: r.get(3)?, created_ms: r.get(4)? })
}

impl Store {
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
