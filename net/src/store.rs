//! Durable storage in embedded SQLite: accounts, API keys (as SHA-256 hashes), migrations.
//!
//! One database file, `rampart.db`, in the data directory, in WAL mode so the keys CLI can
//! write while the server reads. The schema is versioned with `PRAGMA user_version`; each
//! migration runs once, in order, in its own transaction. Nothing here runs on a shard.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

/// Schema migrations, in order; index + 1 is the `user_version` after each.
const MIGRATIONS: &[&str] = &[
    // 1: accounts and keys.
    "CREATE TABLE accounts (
        id INTEGER PRIMARY KEY,
        plan TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE api_keys (
        id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts(id),
        key_hash BLOB NOT NULL UNIQUE,
        label TEXT,
        created_ms INTEGER NOT NULL,
        revoked_ms INTEGER
    );",
];

/// A storage failure.
#[derive(Debug)]
pub enum StoreError {
    /// SQLite refused an operation.
    Sqlite(rusqlite::Error),
    /// The data directory could not be created.
    Io(std::io::Error),
    /// The database was written by a newer rampart.
    TooNew {
        /// Version found on disk.
        found: u32,
        /// Newest version this build knows.
        known: u32,
    },
    /// The operating system's random source failed.
    Random,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Sqlite(e) => write!(f, "database: {e}"),
            StoreError::Io(e) => write!(f, "data directory: {e}"),
            StoreError::TooNew { found, known } => {
                write!(f, "database schema version {found} is newer than this build ({known})")
            }
            StoreError::Random => f.write_str("random source unavailable"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(e)
    }
}

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

/// A connection to the database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) `data_dir/rampart.db` and brings the schema up to date.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(StoreError::Io)?;
        let path = data_dir.join("rampart.db");
        let conn = Connection::open(&path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut store = Store { conn, path };
        store.migrate()?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let known = MIGRATIONS.len() as u32;
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let found: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if found > known {
            return Err(StoreError::TooNew { found, known });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", i as u32 + 1)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The schema version on disk.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        Ok(self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
    }

    /// Number of accounts (zero on a fresh data directory).
    pub fn account_count(&self) -> Result<u64, StoreError> {
        Ok(self.conn.query_row("SELECT COUNT(*) FROM accounts", [], |r| r.get(0))?)
    }

    /// Creates an account on `plan` with one key, in one transaction.
    pub fn create_account_with_key(
        &mut self,
        plan: &str,
        label: Option<&str>,
        now_ms: i64,
    ) -> Result<CreatedKey, StoreError> {
        let key = generate_key()?;
        let hash = hash_key(&key);
        let tx = self.conn.transaction()?;
        tx.execute("INSERT INTO accounts (plan, created_ms) VALUES (?1, ?2)", params![plan, now_ms])?;
        let account_id = tx.last_insert_rowid();
        tx.execute(
            "INSERT INTO api_keys (account_id, key_hash, label, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![account_id, &hash[..], label, now_ms],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(CreatedKey { id, account_id, key })
    }

    /// Every key, by id.
    pub fn list_keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms
             FROM api_keys k JOIN accounts a ON a.id = k.account_id ORDER BY k.id",
        )?;
        let rows = stmt.query_map([], key_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Every key with its hash (the server's in-memory key table).
    pub fn load_key_hashes(&self) -> Result<Vec<([u8; 32], KeyRow)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms, k.key_hash
             FROM api_keys k JOIN accounts a ON a.id = k.account_id",
        )?;
        let rows = stmt.query_map([], |r| {
            let blob: Vec<u8> = r.get(6)?;
            let mut h = [0u8; 32];
            if blob.len() == 32 {
                h.copy_from_slice(&blob);
            }
            Ok((h, key_row(r)?))
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Finds the key whose hash matches `key`.
    pub fn lookup_key(&self, key: &str) -> Result<Option<KeyRow>, StoreError> {
        let hash = hash_key(key);
        Ok(self
            .conn
            .query_row(
                "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms
                 FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ?1",
                params![&hash[..]],
                key_row,
            )
            .optional()?)
    }

    /// Revokes key `id` at `now_ms`.
    pub fn revoke_key(&self, id: i64, now_ms: i64) -> Result<Revoked, StoreError> {
        let n = self
            .conn
            .execute("UPDATE api_keys SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms IS NULL", params![id, now_ms])?;
        if n == 1 {
            return Ok(Revoked::Now);
        }
        let exists: Option<i64> =
            self.conn.query_row("SELECT id FROM api_keys WHERE id = ?1", params![id], |r| r.get(0)).optional()?;
        Ok(if exists.is_some() { Revoked::Already } else { Revoked::NotFound })
    }

    /// SQLite's `data_version`: changes whenever another connection commits, so a reader can
    /// tell cheaply that its cached view is stale.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        Ok(self.conn.pragma_query_value(None, "data_version", |r| r.get(0))?)
    }
}

fn key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KeyRow> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rampart-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

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
        let dir = temp_dir("keys");
        let mut s = Store::open(&dir).expect("open");
        assert_eq!(s.schema_version().expect("v"), MIGRATIONS.len() as u32);
        assert_eq!(s.account_count().expect("n"), 0);
        let k = s.create_account_with_key("developer", Some("ci"), 1_000).expect("create");
        let row = s.lookup_key(&k.key).expect("lookup").expect("found");
        assert_eq!((row.plan.as_str(), row.label.as_deref(), row.revoked_ms), ("developer", Some("ci"), None));
        assert_eq!(s.lookup_key("rk_00000000000000000000000000000000").expect("lookup"), None);
        // A second connection (the CLI) revokes; the first sees data_version move.
        let v0 = s.data_version().expect("dv");
        let other = Store::open(&dir).expect("open again");
        assert_eq!(other.revoke_key(k.id, 2_000).expect("revoke"), Revoked::Now);
        assert_eq!(other.revoke_key(k.id, 3_000).expect("revoke"), Revoked::Already);
        assert_eq!(other.revoke_key(999, 3_000).expect("revoke"), Revoked::NotFound);
        assert_ne!(s.data_version().expect("dv"), v0);
        assert_eq!(s.lookup_key(&k.key).expect("lookup").and_then(|r| r.revoked_ms), Some(2_000));
        assert_eq!(s.list_keys().expect("list").len(), 1);
        let hashes = s.load_key_hashes().expect("hashes");
        assert_eq!(hashes[0].0, hash_key(&k.key));
        // Reopening does not re-run migrations.
        drop(s);
        let s = Store::open(&dir).expect("reopen");
        assert_eq!(s.account_count().expect("n"), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
