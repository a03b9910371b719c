//! The site's sign-in sessions (`decisions.md` §10, SQLite schema version 12, PostgreSQL 6):
//! each by the SHA-256 of its id (the id itself is kept nowhere), with the account, the key it
//! was opened with, its CSRF token and when it was last used. Kept in the database so that any
//! server on it (a cluster's api nodes) serves any session, and a restart signs nobody out; the
//! front keeps a short-lived copy (`rampart_net::api::front::session`).
//!
//! Bound: at most `max` sessions (the caller's); opening one more ends the least recently used.
//! Idle ones are removed when a session is opened.

use super::conn::Store;
use crate::db::{vals, Row, StoreError};

/// One stored session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// SHA-256 of the session's id.
    pub id_hash: [u8; 32],
    /// The account.
    pub account_id: i64,
    /// The key it was opened with.
    pub key_id: i64,
    /// That key's SHA-256.
    pub key_hash: [u8; 32],
    /// The token state-changing requests must echo.
    pub csrf: String,
    /// When it was opened, Unix ms.
    pub opened_ms: i64,
    /// When it was last used, Unix ms (written at most once a [`SESSION_TOUCH_MS`]).
    pub used_ms: i64,
}

/// A session's last use is written at most this often (its idle time is exact to within it).
pub const SESSION_TOUCH_MS: i64 = 60_000;

const COLUMNS: &str = "id_hash, account_id, key_id, key_hash, csrf, opened_ms, used_ms";

fn hash32(v: Vec<u8>, column: &str) -> Result<[u8; 32], StoreError> {
    v.try_into().map_err(|_| StoreError::Corrupt(format!("site_sessions.{column} is not 32 bytes")))
}

fn session_row(r: &Row) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        id_hash: hash32(r.get(0)?, "id_hash")?,
        account_id: r.get(1)?,
        key_id: r.get(2)?,
        key_hash: hash32(r.get(3)?, "key_hash")?,
        csrf: r.get(4)?,
        opened_ms: r.get(5)?,
        used_ms: r.get(6)?,
    })
}

impl Store {
    /// Stores a new session; first removes those idle for `idle_ms` at `s.opened_ms`, then, at
    /// `max`, the least recently used. Run it in a transaction (the storage thread's jobs are).
    pub fn open_site_session(&self, s: &SessionRecord, idle_ms: i64, max: i64) -> Result<(), StoreError> {
        // Storage thread jobs run inside its group's transaction: these statements commit together.
        self.db.execute("DELETE FROM site_sessions WHERE used_ms < ?1", vals![s.opened_ms - idle_ms])?;
        let n: i64 = self.db.query_one("SELECT COUNT(*) FROM site_sessions", &[], |r| r.get(0))?;
        if n >= max {
            self.db.execute(
                "DELETE FROM site_sessions WHERE id_hash IN (SELECT id_hash FROM site_sessions ORDER BY used_ms LIMIT ?1)",
                vals![n - max + 1],
            )?;
        }
        self.db.execute(
            &format!("INSERT INTO site_sessions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            vals![&s.id_hash[..], s.account_id, s.key_id, &s.key_hash[..], s.csrf.as_str(), s.opened_ms, s.used_ms],
        )?;
        Ok(())
    }

    /// The session whose id hashes to `id_hash` at `now_ms`, its use recorded; `None` when
    /// there is none or it was idle for `idle_ms` (then it is removed).
    pub fn site_session(
        &self,
        id_hash: &[u8; 32],
        now_ms: i64,
        idle_ms: i64,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM site_sessions WHERE id_hash = ?1");
        let Some(mut s) = self.db.query_opt(&sql, vals![&id_hash[..]], session_row)? else { return Ok(None) };
        if now_ms - s.used_ms > idle_ms {
            self.close_site_session(id_hash)?;
            return Ok(None);
        }
        if now_ms - s.used_ms >= SESSION_TOUCH_MS {
            self.db.execute("UPDATE site_sessions SET used_ms = ?2 WHERE id_hash = ?1", vals![&id_hash[..], now_ms])?;
            s.used_ms = now_ms;
        }
        Ok(Some(s))
    }

    /// Ends a session (signing out); whether there was one.
    pub fn close_site_session(&self, id_hash: &[u8; 32]) -> Result<bool, StoreError> {
        Ok(self.db.execute("DELETE FROM site_sessions WHERE id_hash = ?1", vals![&id_hash[..]])? > 0)
    }
}
