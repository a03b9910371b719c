//! What an account manages itself on the site (`decisions.md` §10): its own keys (list, add,
//! revoke; never another account's) and its channels (`channels`, schema version 7: the
//! Telegram chat id). Key changes bump `keys_version`, which the running service's key table
//! follows (`api::keys`).

use rusqlite::{params, OptionalExtension};

use super::{generate_key, hash_key, key_row, CreatedKey, KeyRow, Revoked, Store, StoreError};

/// Keys an account may hold unrevoked at once; one more is refused.
pub const ACCOUNT_KEYS_MAX: u64 = 20;

impl Store {
    /// `account_id`'s keys, by id (revoked ones too, with their time).
    pub fn account_keys(&self, account_id: i64) -> Result<Vec<KeyRow>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms
             FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.account_id = ?1 ORDER BY k.id",
        )?;
        let rows = stmt.query_map(params![account_id], key_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Runs `f` in a savepoint: all of it is kept or none (committed when this returns, or
    /// with the storage thread's group, inside which no transaction may be opened).
    fn in_savepoint<T>(&self, f: impl FnOnce(&Store) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.conn.execute_batch("SAVEPOINT account_change")?;
        let done = f(self);
        let end =
            if done.is_ok() { "RELEASE account_change" } else { "ROLLBACK TO account_change; RELEASE account_change" };
        self.conn.execute_batch(end)?;
        done
    }

    /// Adds a key to `account_id`, unless it already holds [`ACCOUNT_KEYS_MAX`] unrevoked
    /// (`None`); count, insert and the key table's version bump are one savepoint.
    pub fn add_account_key(
        &self,
        account_id: i64,
        label: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<CreatedKey>, StoreError> {
        let key = generate_key()?;
        let hash = hash_key(&key);
        self.in_savepoint(|s| {
            let live: u64 = s.conn.query_row(
                "SELECT COUNT(*) FROM api_keys WHERE account_id = ?1 AND revoked_ms IS NULL",
                params![account_id],
                |r| r.get(0),
            )?;
            if live >= ACCOUNT_KEYS_MAX {
                return Ok(None);
            }
            s.conn.execute(
                "INSERT INTO api_keys (account_id, key_hash, label, created_ms) VALUES (?1, ?2, ?3, ?4)",
                params![account_id, &hash[..], label, now_ms],
            )?;
            let id = s.conn.last_insert_rowid();
            s.conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'keys_version'", [])?;
            Ok(Some(CreatedKey { id, account_id, key }))
        })
    }

    /// Revokes key `id` if it is `account_id`'s (another account's key is `NotFound`); the
    /// revocation and the version bump are one savepoint.
    pub fn revoke_account_key(&self, account_id: i64, id: i64, now_ms: i64) -> Result<Revoked, StoreError> {
        self.in_savepoint(|s| {
            let revoked: Option<Option<i64>> = s
                .conn
                .query_row(
                    "SELECT revoked_ms FROM api_keys WHERE id = ?1 AND account_id = ?2",
                    params![id, account_id],
                    |r| r.get(0),
                )
                .optional()?;
            match revoked {
                None => Ok(Revoked::NotFound),
                Some(Some(_)) => Ok(Revoked::Already),
                Some(None) => {
                    s.conn.execute("UPDATE api_keys SET revoked_ms = ?2 WHERE id = ?1", params![id, now_ms])?;
                    s.conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'keys_version'", [])?;
                    Ok(Revoked::Now)
                }
            }
        })
    }

    /// `account_id`'s Telegram chat id, if it gave one.
    pub fn telegram_chat(&self, account_id: i64) -> Result<Option<String>, StoreError> {
        let chat: Option<Option<String>> = self
            .conn
            .query_row("SELECT telegram_chat_id FROM channels WHERE account_id = ?1", params![account_id], |r| r.get(0))
            .optional()?;
        Ok(chat.flatten())
    }

    /// Sets (or with `None` clears) `account_id`'s Telegram chat id.
    pub fn set_telegram_chat(&self, account_id: i64, chat: Option<&str>) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO channels (account_id, telegram_chat_id) VALUES (?1, ?2)
             ON CONFLICT(account_id) DO UPDATE SET telegram_chat_id = excluded.telegram_chat_id",
            params![account_id, chat],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a fresh directory named after the test.
    fn store(name: &str) -> Store {
        let d = std::env::temp_dir().join(format!("rampart-account-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Store::open(&d).expect("open")
    }

    #[test]
    fn an_account_adds_lists_and_revokes_only_its_own_keys() {
        let mut s = store("own");
        let a = s.create_account_with_key("free", None, 1).expect("a");
        let b = s.create_account_with_key("free", None, 1).expect("b");
        let before = s.keys_version().expect("v");
        // As the storage thread runs it: a job inside a group's transaction.
        s.begin_group().expect("group");
        s.begin_job().expect("job");
        let added = s.add_account_key(a.account_id, Some("bot"), 2).expect("add").expect("room");
        s.end_job(true).expect("end");
        s.commit_group().expect("commit");
        assert!(s.keys_version().expect("v") > before, "the key table learns of it");
        assert_eq!(s.lookup_key(&added.key).expect("lookup").map(|k| k.account_id), Some(a.account_id));
        let mine = s.account_keys(a.account_id).expect("list");
        assert_eq!(mine.iter().map(|k| k.id).collect::<Vec<_>>(), vec![a.id, added.id]);
        assert_eq!(mine[1].label.as_deref(), Some("bot"));
        assert!(matches!(s.revoke_account_key(b.account_id, added.id, 3), Ok(Revoked::NotFound)));
        assert_eq!(s.account_keys(a.account_id).expect("list")[1].revoked_ms, None, "untouched by b");
        s.begin_group().expect("group");
        s.begin_job().expect("job");
        assert!(matches!(s.revoke_account_key(a.account_id, added.id, 3), Ok(Revoked::Now)));
        s.end_job(true).expect("end");
        s.commit_group().expect("commit");
        assert!(s.lookup_key(&added.key).expect("lookup").and_then(|k| k.revoked_ms).is_some());
        assert!(matches!(s.revoke_account_key(a.account_id, added.id, 4), Ok(Revoked::Already)));
        assert!(matches!(s.revoke_account_key(a.account_id, 999, 4), Ok(Revoked::NotFound)));
    }

    #[test]
    fn unrevoked_keys_are_capped_per_account() {
        let mut s = store("cap");
        let a = s.create_account_with_key("free", None, 1).expect("a");
        for _ in 1..ACCOUNT_KEYS_MAX {
            assert!(s.add_account_key(a.account_id, None, 2).expect("add").is_some());
        }
        assert!(s.add_account_key(a.account_id, None, 2).expect("add").is_none(), "one more is refused");
        s.revoke_account_key(a.account_id, a.id, 3).expect("revoke");
        assert!(s.add_account_key(a.account_id, None, 4).expect("add").is_some(), "room again after a revoke");
    }

    #[test]
    fn the_telegram_chat_is_set_changed_and_cleared() {
        let mut s = store("telegram");
        for _ in 0..2 {
            s.create_account_with_key("free", None, 1).expect("account");
        }
        assert_eq!(s.telegram_chat(1).expect("none"), None);
        s.set_telegram_chat(1, Some("12345")).expect("set");
        s.set_telegram_chat(2, Some("@other_chat")).expect("set");
        s.set_telegram_chat(1, Some("-100200")).expect("change");
        assert_eq!(s.telegram_chat(1).expect("get").as_deref(), Some("-100200"));
        s.set_telegram_chat(1, None).expect("clear");
        assert_eq!(s.telegram_chat(1).expect("get"), None);
        assert_eq!(s.telegram_chat(2).expect("get").as_deref(), Some("@other_chat"));
    }
}
