//! What an account manages itself on the site (`decisions.md` §10): its own keys (list, add,
//! revoke; never another account's) and its channels (`channels`, schema version 7: the
//! Telegram chat id). Key changes bump `keys_version`, which the running service's key table
//! follows (`api::keys`).

use super::conn::Store;
use super::keys::{key_row, CreatedKey, KeyRow, Revoked};
use crate::db::{vals, StoreError};

/// Keys an account may hold unrevoked at once; one more is refused.
pub const ACCOUNT_KEYS_MAX: u64 = 20;

impl Store {
    /// `account_id`'s keys, by id (revoked ones too, with their time).
    pub fn account_keys(&self, account_id: i64) -> Result<Vec<KeyRow>, StoreError> {
        self.db.query(
            "SELECT k.id, k.account_id, k.label, a.plan, k.created_ms, k.revoked_ms
             FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.account_id = ?1 ORDER BY k.id",
            vals![account_id],
            key_row,
        )
    }

    /// Adds a key to `account_id`, unless it already holds [`ACCOUNT_KEYS_MAX`] unrevoked
    /// (`None`); count, insert and the key table's version bump are one savepoint (committed
    /// when this returns, or with the storage thread's group), taken under the account's lock
    /// on PostgreSQL so the cap holds across nodes.
    pub fn add_account_key(
        &self,
        account_id: i64,
        label: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<CreatedKey>, StoreError> {
        let db = &self.db;
        db.in_savepoint("account_change", || {
            self.lock_account(account_id)?;
            let live: i64 = db.query_one(
                "SELECT COUNT(*) FROM api_keys WHERE account_id = ?1 AND revoked_ms IS NULL",
                vals![account_id],
                |r| r.get(0),
            )?;
            if live.unsigned_abs() >= ACCOUNT_KEYS_MAX {
                return Ok(None);
            }
            self.insert_key(account_id, label, now_ms).map(Some)
        })
    }

    /// Revokes key `id` if it is `account_id`'s (another account's key is `NotFound`); the
    /// revocation and the version bump are one savepoint.
    pub fn revoke_account_key(&self, account_id: i64, id: i64, now_ms: i64) -> Result<Revoked, StoreError> {
        let db = &self.db;
        db.in_savepoint("account_change", || {
            let n = db.execute(
                "UPDATE api_keys SET revoked_ms = ?3 WHERE id = ?1 AND account_id = ?2 AND revoked_ms IS NULL",
                vals![id, account_id, now_ms],
            )?;
            if n == 1 {
                db.execute("UPDATE meta SET value = value + 1 WHERE key = 'keys_version'", &[])?;
                return Ok(Revoked::Now);
            }
            let exists = db.query_opt(
                "SELECT id FROM api_keys WHERE id = ?1 AND account_id = ?2",
                vals![id, account_id],
                |_| Ok(()),
            )?;
            Ok(if exists.is_some() { Revoked::Already } else { Revoked::NotFound })
        })
    }

    /// `account_id`'s Telegram chat id, if it gave one.
    pub fn telegram_chat(&self, account_id: i64) -> Result<Option<String>, StoreError> {
        let chat = self.db.query_opt(
            "SELECT telegram_chat_id FROM channels WHERE account_id = ?1",
            vals![account_id],
            |r| r.get::<Option<String>>(0),
        )?;
        Ok(chat.flatten())
    }

    /// Sets (or with `None` clears) `account_id`'s Telegram chat id.
    pub fn set_telegram_chat(&self, account_id: i64, chat: Option<&str>) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO channels (account_id, telegram_chat_id) VALUES (?1, ?2)
             ON CONFLICT(account_id) DO UPDATE SET telegram_chat_id = excluded.telegram_chat_id",
            vals![account_id, chat],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::on_each_backend;

    #[test]
    fn an_account_adds_lists_and_revokes_only_its_own_keys() {
        on_each_backend("account-own", |at| {
            let mut s = at.open();
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
        });
    }

    #[test]
    fn unrevoked_keys_are_capped_per_account() {
        on_each_backend("account-cap", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("free", None, 1).expect("a");
            for _ in 1..ACCOUNT_KEYS_MAX {
                assert!(s.add_account_key(a.account_id, None, 2).expect("add").is_some());
            }
            assert!(s.add_account_key(a.account_id, None, 2).expect("add").is_none(), "one more is refused");
            s.revoke_account_key(a.account_id, a.id, 3).expect("revoke");
            assert!(s.add_account_key(a.account_id, None, 4).expect("add").is_some(), "room again after a revoke");
        });
    }

    #[test]
    fn the_telegram_chat_is_set_changed_and_cleared() {
        on_each_backend("account-telegram", |at| {
            let mut s = at.open();
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
        });
    }
}
