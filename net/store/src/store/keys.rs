//! API keys (stored as SHA-256 hashes, never the key): accounts with their first key, lookups,
//! revocation, and the running servers' key watchers that make a key change take effect at once.

use super::conn::Store;
use crate::db::{vals, Row, StoreError};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// A key watcher that has not written its beat for this long is taken for stopped: a key change
/// does not wait for it (its server applies the change at its next poll once it runs again).
pub const KEY_WATCHER_ALIVE_MS: i64 = 3_000;

/// One API key row (never the key itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRow {
    /// Key id (for `keys revoke`).
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Free-text label.
    pub label: Option<String>,
    /// The account's plan name.
    pub plan: String,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Revocation time, if revoked.
    pub revoked_ms: Option<i64>,
}

/// A freshly created key: the only moment the plain key exists.
#[derive(Clone, Debug)]
pub struct CreatedKey {
    /// Key id.
    pub id: i64,
    /// Account id.
    pub account_id: i64,
    /// The key, `rk_` + 32 base62 characters.
    pub key: String,
}

/// Result of a revocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revoked {
    /// Revoked now.
    Now,
    /// Was revoked before.
    Already,
    /// No such key.
    NotFound,
}

pub(super) fn key_row(r: &Row<'_>) -> Result<KeyRow, StoreError> {
    Ok(KeyRow {
        id: r.get(0)?,
        account_id: r.get(1)?,
        label: r.get(2)?,
        plan: r.get(3)?,
        created_ms: r.get(4)?,
        revoked_ms: r.get(5)?,
    })
}

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A new key: `rk_` followed by 32 uniformly random base62 characters (about 190 bits).
pub fn generate_key() -> Result<String, StoreError> {
    let mut key = String::with_capacity(35);
    key.push_str("rk_");
    while key.len() < 35 {
        let mut buf = [0u8; 64];
        getrandom::getrandom(&mut buf).map_err(|_| StoreError::Random)?;
        // Rejection sampling keeps the distribution uniform: 248 = 4 * 62.
        for b in buf {
            if b < 248 && key.len() < 35 {
                key.push(BASE62[(b % 62) as usize] as char);
            }
        }
    }
    Ok(key)
}

/// SHA-256 of a key; only this is stored.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// True when `s` has the shape of a key (`rk_` + 32 base62 characters).
pub fn is_key_shaped(s: &str) -> bool {
    s.len() == 35 && s.starts_with("rk_") && s.as_bytes()[3..].iter().all(|b| b.is_ascii_alphanumeric())
}

impl Store {
    /// Number of accounts (zero on a fresh data directory).
    pub fn account_count(&self) -> Result<u64, StoreError> {
        let n: i64 = self.db.query_one("SELECT COUNT(*) FROM accounts", &[], |r| r.get(0))?;
        Ok(n.unsigned_abs())
    }

    /// Creates an account on `plan` with one key, in one transaction.
    pub fn create_account_with_key(
        &mut self,
        plan: &str,
        label: Option<&str>,
        now_ms: i64,
    ) -> Result<CreatedKey, StoreError> {
        let db = &self.db;
        db.in_transaction_of(|| {
            let account_id = db.query_one(
                "INSERT INTO accounts (plan, created_ms) VALUES (?1, ?2) RETURNING id",
                vals![plan, now_ms],
                |r| r.get(0),
            )?;
            self.insert_key(account_id, label, now_ms)
        })
    }

    /// Makes a key for `account_id` and bumps the key table's version, in the caller's
    /// transaction or savepoint.
    pub(super) fn insert_key(
        &self,
        account_id: i64,
        label: Option<&str>,
        now_ms: i64,
    ) -> Result<CreatedKey, StoreError> {
        let key = generate_key()?;
        let hash = hash_key(&key);
        let id = self.db.query_one(
            "INSERT INTO api_keys (account_id, key_hash, label, created_ms) VALUES (?1, ?2, ?3, ?4) RETURNING id",
            vals![account_id, &hash[..], label, now_ms],
            |r| r.get(0),
        )?;
        self.db.execute("UPDATE meta SET value = value + 1 WHERE key = 'keys_version'", &[])?;
        Ok(CreatedKey { id, account_id, key })
    }

    /// Every key, by id.
    pub fn list_keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        self.db.query(
            "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms
             FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id",
            &[],
            key_row,
        )
    }

    /// Every key with its hash (the server's in-memory key table).
    pub fn load_key_hashes(&self) -> Result<Vec<([u8; 32], KeyRow)>, StoreError> {
        self.db.query(
            "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms, k.key_hash
             FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id",
            &[],
            |r| {
                // A hash of another length (never written) matches no key.
                let blob: Vec<u8> = r.get(6)?;
                let h = <[u8; 32]>::try_from(blob.as_slice()).unwrap_or([0; 32]);
                Ok((h, key_row(r)?))
            },
        )
    }

    /// Finds the key whose hash matches `key`.
    pub fn lookup_key(&self, key: &str) -> Result<Option<KeyRow>, StoreError> {
        self.lookup_key_hash(&hash_key(key))
    }

    /// Finds the key whose text hashes to `hash` (an open stream asking whether its key still
    /// stands, `decisions.md` §12).
    pub fn lookup_key_hash(&self, hash: &[u8; 32]) -> Result<Option<KeyRow>, StoreError> {
        self.db.query_opt(
            "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms
             FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ?1",
            vals![&hash[..]],
            key_row,
        )
    }

    /// Revokes key `id` at `now_ms`.
    pub fn revoke_key(&self, id: i64, now_ms: i64) -> Result<Revoked, StoreError> {
        let db = &self.db;
        let revoked = db.in_transaction_of(|| {
            let n = db.execute(
                "UPDATE api_keys SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms IS NULL",
                vals![id, now_ms],
            )?;
            if n == 1 {
                db.execute("UPDATE meta SET value = value + 1 WHERE key = 'keys_version'", &[])?;
            }
            Ok(n == 1)
        })?;
        if revoked {
            return Ok(Revoked::Now);
        }
        let exists = db.query_opt("SELECT id FROM api_keys WHERE id = ?1", vals![id], |r| r.get::<i64>(0))?;
        Ok(if exists.is_some() { Revoked::Already } else { Revoked::NotFound })
    }

    /// Records that the key watcher `id` has applied the key table up to `version` and is alive
    /// at `now_ms` (its server's front checks keys against that table).
    pub fn key_watcher_beat(&self, id: &str, version: i64, now_ms: i64) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO key_watchers (id, seen_version, beat_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(id) DO UPDATE SET seen_version = excluded.seen_version, beat_ms = excluded.beat_ms",
            vals![id, version, now_ms],
        )?;
        Ok(())
    }

    /// Forgets the key watcher `id` (its server stops) and every watcher not heard from since
    /// `stale_before_ms`.
    pub fn key_watcher_end(&self, id: &str, stale_before_ms: i64) -> Result<(), StoreError> {
        self.db.execute("DELETE FROM key_watchers WHERE id = ?1 OR beat_ms < ?2", vals![id, stale_before_ms])?;
        Ok(())
    }

    /// Key watchers heard from since `alive_since_ms` that have not yet applied `version`.
    pub fn key_watchers_behind(&self, version: i64, alive_since_ms: i64) -> Result<i64, StoreError> {
        self.db.query_one(
            "SELECT COUNT(*) FROM key_watchers WHERE beat_ms >= ?1 AND seen_version < ?2",
            vals![alive_since_ms, version],
            |r| r.get(0),
        )
    }

    /// Waits until every running server's key table holds `version` (a key created or revoked
    /// at it): every key watcher heard from in the last [`KEY_WATCHER_ALIVE_MS`] has applied
    /// it, polling every 5 ms for at most `wait`. Returns how many still had not when it gave up
    /// (0: all have). `now_ms` reads the caller's clock.
    pub fn wait_keys_seen(&self, version: i64, wait: Duration, now_ms: &dyn Fn() -> i64) -> Result<i64, StoreError> {
        let deadline = now_ms() + wait.as_millis() as i64;
        loop {
            let now = now_ms();
            let behind = self.key_watchers_behind(version, now - KEY_WATCHER_ALIVE_MS)?;
            if behind == 0 || now >= deadline {
                return Ok(behind);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A counter bumped by every key creation and revocation, so a server can tell cheaply
    /// whether its cached key table is stale.
    pub fn keys_version(&self) -> Result<i64, StoreError> {
        self.db.query_one("SELECT value FROM meta WHERE key = 'keys_version'", &[], |r| r.get(0))
    }

    /// A number that changes whenever another connection commits, so a reader can tell
    /// cheaply that its cached view may be stale: SQLite's `data_version`. PostgreSQL has no
    /// such counter; there the key table's own version stands in (the one thing the key
    /// watcher, its reader, follows).
    pub fn data_version(&self) -> Result<i64, StoreError> {
        match self.db.lite() {
            // A cached statement: the key watcher runs this every poll.
            Some(c) => Ok(c.prepare_cached("PRAGMA data_version")?.query_row([], |r| r.get(0))?),
            None => self.keys_version(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema;
    use crate::store::test_support::*;

    #[test]
    fn keys_are_well_formed_and_distinct() {
        let a = generate_key().expect("key");
        let b = generate_key().expect("key");
        assert!(is_key_shaped(&a), "{a}");
        assert_ne!(a, b);
        assert!(!is_key_shaped("rk_short"));
        assert!(!is_key_shaped("xx_0123456789abcdef0123456789abcdef"));
    }

    #[test]
    fn create_lookup_revoke_round_trip() {
        on_each_backend("keys", |at| {
            let mut s = at.open();
            let dialect = if s.is_postgres() { schema::Dialect::Postgres } else { schema::Dialect::Sqlite };
            assert_eq!(s.schema_version().expect("v"), dialect.latest());
            assert_eq!(s.account_count().expect("n"), 0);
            let k = s.create_account_with_key("developer", Some("ci"), 1_000).expect("create");
            let row = s.lookup_key(&k.key).expect("lookup").expect("found");
            assert_eq!((row.plan.as_str(), row.label.as_deref(), row.revoked_ms), ("developer", Some("ci"), None));
            assert_eq!(s.lookup_key("rk_00000000000000000000000000000000").expect("lookup"), None);
            // A second connection (the CLI) revokes; the first sees data_version move.
            let v0 = s.data_version().expect("dv");
            let mut other = at.open();
            assert_eq!(other.revoke_key(k.id, 2_000).expect("revoke"), Revoked::Now);
            assert_eq!(other.revoke_key(k.id, 3_000).expect("revoke"), Revoked::Already);
            assert_eq!(other.revoke_key(999, 3_000).expect("revoke"), Revoked::NotFound);
            assert_ne!(s.data_version().expect("dv"), v0);
            let k0 = s.keys_version().expect("kv");
            let k2 = other.create_account_with_key("free", None, 4_000).expect("create");
            assert_eq!(s.keys_version().expect("kv"), k0 + 1, "creation bumps the key table version");
            assert_eq!(other.revoke_key(k2.id, 5_000).expect("revoke"), Revoked::Now);
            assert_eq!(s.keys_version().expect("kv"), k0 + 2, "revocation bumps it");
            assert_eq!(s.lookup_key(&k.key).expect("lookup").and_then(|r| r.revoked_ms), Some(2_000));
            assert_eq!(s.list_keys().expect("list").len(), 2);
            let hashes = s.load_key_hashes().expect("hashes");
            assert_eq!(hashes[0].0, hash_key(&k.key));
            // Reopening does not re-run migrations.
            drop(s);
            let s = at.open();
            assert_eq!(s.account_count().expect("n"), 2);
        });
    }
}
