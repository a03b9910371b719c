//! The schema, in both dialects: SQLite's migrations (`PRAGMA user_version`) and PostgreSQL's
//! (`meta.schema_version`), each run once, in order, in one transaction.

use super::conn::{unknown, Store};
use crate::db::{vals, Db, StoreError};

/// Schema migrations, in order; index + 1 is the `user_version` after each.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 2: alerts, the account inbox, and a version counter for the key table.
    "CREATE TABLE alerts (
        id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts(id),
        exchange TEXT NOT NULL,
        symbol TEXT NOT NULL,
        kind TEXT NOT NULL,
        direction TEXT NOT NULL,
        price INTEGER,
        pct_hundredths INTEGER,
        window TEXT,
        repeat INTEGER NOT NULL,
        note TEXT NOT NULL,
        webhook_url TEXT,
        status TEXT NOT NULL,
        created_price INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        last_triggered_ms INTEGER,
        trigger_count INTEGER NOT NULL DEFAULT 0,
        deleted_ms INTEGER
    );
    CREATE INDEX alerts_account ON alerts(account_id, id);
    CREATE INDEX alerts_live ON alerts(status) WHERE deleted_ms IS NULL;
    CREATE TABLE inbox (
        id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts(id),
        kind TEXT NOT NULL,
        alert_id INTEGER,
        body TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE INDEX inbox_account ON inbox(account_id, id);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO meta (key, value) VALUES ('keys_version', 1);",
    // 3: the webhook outbox.
    "CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        alert_id INTEGER NOT NULL,
        account_id INTEGER NOT NULL,
        url TEXT NOT NULL,
        body TEXT NOT NULL,
        trigger_ms INTEGER NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        first_failure_ms INTEGER,
        next_attempt_ms INTEGER NOT NULL,
        last_status INTEGER,
        last_error TEXT,
        created_ms INTEGER NOT NULL,
        done_ms INTEGER
    );
    CREATE INDEX outbox_due ON outbox(next_attempt_ms) WHERE state = 'pending';
    CREATE INDEX outbox_alert ON outbox(alert_id);",
    // 4: pct thresholds kept exactly as sent, in millionths of a percent (`pct_hundredths`, the
    // rounded form of earlier versions, is no longer written or read).
    "ALTER TABLE alerts ADD COLUMN pct_millionths INTEGER;
    UPDATE alerts SET pct_millionths = pct_hundredths * 10000 WHERE pct_hundredths IS NOT NULL;",
    // 5: pending deliveries by account, for the sender's round-robin scan.
    "CREATE INDEX outbox_pending_account ON outbox(account_id, next_attempt_ms) WHERE state = 'pending';",
    // 6: the site's density and market alerts (`site::SiteCondition`), their own ids and caps,
    // and a version counter the running service watches.
    "CREATE TABLE site_alerts (
        id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts(id),
        kind TEXT NOT NULL,
        exchange TEXT NOT NULL,
        symbol TEXT,
        side TEXT,
        min_usd REAL,
        max_dist_pct REAL,
        min_age_s INTEGER,
        number TEXT,
        interval TEXT,
        direction TEXT,
        threshold REAL,
        repeat INTEGER NOT NULL,
        note TEXT NOT NULL,
        status TEXT NOT NULL,
        trigger_count INTEGER NOT NULL DEFAULT 0,
        last_triggered_ms INTEGER,
        created_ms INTEGER NOT NULL,
        deleted_ms INTEGER
    );
    CREATE INDEX site_alerts_account ON site_alerts(account_id, id);
    CREATE INDEX site_alerts_live ON site_alerts(status) WHERE deleted_ms IS NULL;
    INSERT INTO meta (key, value) VALUES ('site_alerts_version', 1);",
    // 7: an account's channels besides the inbox (`decisions.md` §10): its Telegram chat.
    "CREATE TABLE channels (
        account_id INTEGER PRIMARY KEY REFERENCES accounts(id),
        telegram_chat_id TEXT
    );",
    // 8: the outbox carries Telegram messages besides webhooks (`delivery::telegram`): for a
    // Telegram row `url` holds the chat id and `body` the `sendMessage` body; the URL with the
    // bot token is made at each attempt, never stored.
    "ALTER TABLE outbox ADD COLUMN channel TEXT NOT NULL DEFAULT 'webhook';",
    // 9: when a row was handed to the cluster's firings stream (`cluster::publisher`; rows of a
    // single server are never published).
    "ALTER TABLE outbox ADD COLUMN published_ms INTEGER;
    CREATE INDEX outbox_unpublished ON outbox(id) WHERE published_ms IS NULL AND state = 'pending';",
    // 10: alerts by creation time, for a cluster's market nodes, which look for recent alerts
    // whose command they may have missed ([`Store::recent_active_alerts`]).
    "CREATE INDEX alerts_recent ON alerts(created_ms) WHERE deleted_ms IS NULL;",
    // 11: the key tables of running servers and how far each has read (`Store::key_watcher_beat`):
    // `rampart keys create|revoke` returns once every running server applied its change; and the
    // `Idempotency-Key`s of alert creates, kept 24 h (`decisions.md` §13).
    "CREATE TABLE key_watchers (id TEXT PRIMARY KEY, seen_version INTEGER NOT NULL, beat_ms INTEGER NOT NULL);
    CREATE TABLE idempotency (
        account_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        body_hash BLOB NOT NULL,
        alert_id INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (account_id, key)
    );
    CREATE INDEX idempotency_age ON idempotency(created_ms);
    ALTER TABLE alerts ADD COLUMN expires_ms INTEGER;
    CREATE INDEX alerts_expiry ON alerts(expires_ms) WHERE deleted_ms IS NULL AND expires_ms IS NOT NULL;
    CREATE TABLE webhook_secrets (
        account_id INTEGER PRIMARY KEY REFERENCES accounts(id),
        secret TEXT NOT NULL,
        previous TEXT,
        previous_until_ms INTEGER,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        outbox_id INTEGER NOT NULL,
        alert_id INTEGER NOT NULL,
        trigger_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        status INTEGER,
        latency_ms INTEGER,
        error TEXT
    );
    CREATE INDEX attempts_alert ON attempts(alert_id, id);
    CREATE INDEX attempts_age ON attempts(at_ms);",
    // 12: the site's sign-in sessions, so any server on the database serves any session and a
    // restart signs nobody out (`store::session`).
    "CREATE TABLE site_sessions (
        id_hash BLOB PRIMARY KEY,
        account_id INTEGER NOT NULL,
        key_id INTEGER NOT NULL,
        key_hash BLOB NOT NULL,
        csrf TEXT NOT NULL,
        opened_ms INTEGER NOT NULL,
        used_ms INTEGER NOT NULL
    );
    CREATE INDEX site_sessions_used ON site_sessions(used_ms);",
    // 13: each account's active alerts counted where they change (`Store::active_price_alerts`),
    // so the plan's cap is checked without counting the account's alerts on every create.
    "ALTER TABLE accounts ADD COLUMN active_alerts INTEGER NOT NULL DEFAULT 0;
    UPDATE accounts SET active_alerts = (SELECT COUNT(*) FROM alerts
        WHERE alerts.account_id = accounts.id AND status = 'active' AND deleted_ms IS NULL);",
    // 14: a site alert's quiet time after a firing (`SiteRequest::cooldown_s`).
    "ALTER TABLE site_alerts ADD COLUMN cooldown_s INTEGER NOT NULL DEFAULT 0;",
];

/// The PostgreSQL schema, in order; index + 1 is the `meta.schema_version` after each. Its
/// version 1 is SQLite's version 8 in PostgreSQL's types: `BIGINT` for every integer (its
/// `INTEGER` is 32-bit), `DOUBLE PRECISION` for SQLite's 8-byte `REAL`, `BOOLEAN` flags,
/// `BYTEA` hashes, identity ids, and `"window"` quoted (a reserved word there). The `meta`
/// table itself is made before the first migration, so the version can be read.
pub(super) const PG_MIGRATIONS: &[&str] = &[
    // 1: everything of SQLite's versions 1 to 8.
    "CREATE TABLE accounts (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        plan TEXT NOT NULL,
        created_ms BIGINT NOT NULL
    );
    CREATE TABLE api_keys (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        account_id BIGINT NOT NULL REFERENCES accounts(id),
        key_hash BYTEA NOT NULL UNIQUE,
        label TEXT,
        created_ms BIGINT NOT NULL,
        revoked_ms BIGINT
    );
    CREATE TABLE alerts (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        account_id BIGINT NOT NULL REFERENCES accounts(id),
        exchange TEXT NOT NULL,
        symbol TEXT NOT NULL,
        kind TEXT NOT NULL,
        direction TEXT NOT NULL,
        price BIGINT,
        pct_millionths BIGINT,
        \"window\" TEXT,
        repeat BOOLEAN NOT NULL,
        note TEXT NOT NULL,
        webhook_url TEXT,
        status TEXT NOT NULL,
        created_price BIGINT NOT NULL,
        created_ms BIGINT NOT NULL,
        last_triggered_ms BIGINT,
        trigger_count BIGINT NOT NULL DEFAULT 0,
        deleted_ms BIGINT
    );
    CREATE INDEX alerts_account ON alerts(account_id, id);
    CREATE INDEX alerts_live ON alerts(status) WHERE deleted_ms IS NULL;
    CREATE TABLE inbox (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        account_id BIGINT NOT NULL REFERENCES accounts(id),
        kind TEXT NOT NULL,
        alert_id BIGINT,
        body TEXT NOT NULL,
        created_ms BIGINT NOT NULL
    );
    CREATE INDEX inbox_account ON inbox(account_id, id);
    CREATE TABLE outbox (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        alert_id BIGINT NOT NULL,
        account_id BIGINT NOT NULL,
        url TEXT NOT NULL,
        body TEXT NOT NULL,
        trigger_ms BIGINT NOT NULL,
        state TEXT NOT NULL,
        attempts BIGINT NOT NULL DEFAULT 0,
        first_failure_ms BIGINT,
        next_attempt_ms BIGINT NOT NULL,
        last_status BIGINT,
        last_error TEXT,
        created_ms BIGINT NOT NULL,
        done_ms BIGINT,
        channel TEXT NOT NULL DEFAULT 'webhook'
    );
    CREATE INDEX outbox_due ON outbox(next_attempt_ms) WHERE state = 'pending';
    CREATE INDEX outbox_alert ON outbox(alert_id);
    CREATE INDEX outbox_pending_account ON outbox(account_id, next_attempt_ms) WHERE state = 'pending';
    CREATE TABLE site_alerts (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        account_id BIGINT NOT NULL REFERENCES accounts(id),
        kind TEXT NOT NULL,
        exchange TEXT NOT NULL,
        symbol TEXT,
        side TEXT,
        min_usd DOUBLE PRECISION,
        max_dist_pct DOUBLE PRECISION,
        min_age_s BIGINT,
        number TEXT,
        interval TEXT,
        direction TEXT,
        threshold DOUBLE PRECISION,
        repeat BOOLEAN NOT NULL,
        note TEXT NOT NULL,
        status TEXT NOT NULL,
        trigger_count BIGINT NOT NULL DEFAULT 0,
        last_triggered_ms BIGINT,
        created_ms BIGINT NOT NULL,
        deleted_ms BIGINT
    );
    CREATE INDEX site_alerts_account ON site_alerts(account_id, id);
    CREATE INDEX site_alerts_live ON site_alerts(status) WHERE deleted_ms IS NULL;
    CREATE TABLE channels (
        account_id BIGINT PRIMARY KEY REFERENCES accounts(id),
        telegram_chat_id TEXT
    );
    INSERT INTO meta (key, value) VALUES ('keys_version', 1), ('site_alerts_version', 1);",
    // 2: SQLite's version 9 (rows handed to the firings stream).
    "ALTER TABLE outbox ADD COLUMN published_ms BIGINT;
    CREATE INDEX outbox_unpublished ON outbox(id) WHERE published_ms IS NULL AND state = 'pending';",
    // 3: SQLite's version 10 (alerts by creation time).
    "CREATE INDEX alerts_recent ON alerts(created_ms) WHERE deleted_ms IS NULL;",
    // 4: SQLite's version 11 (the key watchers of running servers; idempotency keys).
    "CREATE TABLE key_watchers (id TEXT PRIMARY KEY, seen_version BIGINT NOT NULL, beat_ms BIGINT NOT NULL);
    CREATE TABLE idempotency (
        account_id BIGINT NOT NULL,
        key TEXT NOT NULL,
        body_hash BYTEA NOT NULL,
        alert_id BIGINT NOT NULL,
        created_ms BIGINT NOT NULL,
        PRIMARY KEY (account_id, key)
    );
    CREATE INDEX idempotency_age ON idempotency(created_ms);
    ALTER TABLE alerts ADD COLUMN expires_ms BIGINT;
    CREATE INDEX alerts_expiry ON alerts(expires_ms) WHERE deleted_ms IS NULL AND expires_ms IS NOT NULL;
    CREATE TABLE webhook_secrets (
        account_id BIGINT PRIMARY KEY REFERENCES accounts(id),
        secret TEXT NOT NULL,
        previous TEXT,
        previous_until_ms BIGINT,
        created_ms BIGINT NOT NULL
    );
    CREATE TABLE attempts (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        outbox_id BIGINT NOT NULL,
        alert_id BIGINT NOT NULL,
        trigger_ms BIGINT NOT NULL,
        attempt BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        outcome TEXT NOT NULL,
        status BIGINT,
        latency_ms BIGINT,
        error TEXT
    );
    CREATE INDEX attempts_alert ON attempts(alert_id, id);
    CREATE INDEX attempts_age ON attempts(at_ms);",
    // 5: market partitions' owners (leases with epochs; PostgreSQL only, see `owner`).
    "CREATE TABLE partition_owners (
        partition TEXT PRIMARY KEY,
        epoch BIGINT NOT NULL,
        holder TEXT NOT NULL,
        expires_ms BIGINT NOT NULL
    );",
    // 6: SQLite's version 12 (the site's sign-in sessions).
    "CREATE TABLE site_sessions (
        id_hash BYTEA PRIMARY KEY,
        account_id BIGINT NOT NULL,
        key_id BIGINT NOT NULL,
        key_hash BYTEA NOT NULL,
        csrf TEXT NOT NULL,
        opened_ms BIGINT NOT NULL,
        used_ms BIGINT NOT NULL
    );
    CREATE INDEX site_sessions_used ON site_sessions(used_ms);",
    // 7: SQLite's version 13 (each account's active alerts counted).
    "ALTER TABLE accounts ADD COLUMN active_alerts BIGINT NOT NULL DEFAULT 0;
    UPDATE accounts SET active_alerts = (SELECT COUNT(*) FROM alerts
        WHERE alerts.account_id = accounts.id AND status = 'active' AND deleted_ms IS NULL);",
    // 8: SQLite's version 14 (a site alert's quiet time after a firing).
    "ALTER TABLE site_alerts ADD COLUMN cooldown_s BIGINT NOT NULL DEFAULT 0;",
];

/// The advisory lock every PostgreSQL migration takes, so nodes starting at once migrate one
/// at a time (the number is arbitrary; only rampart uses it).
const PG_MIGRATION_LOCK: i64 = 0x7261_6d70_6d69_6772;

/// SQLite's migrations, tracked in `PRAGMA user_version`, under the write lock.
fn migrate_sqlite(c: &rusqlite::Connection) -> Result<(), StoreError> {
    let known = MIGRATIONS.len() as u32;
    c.execute_batch("BEGIN IMMEDIATE")?;
    let done = (|| {
        let found: u32 = c.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if found > known {
            return Err(StoreError::TooNew { found, known });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            c.execute_batch(sql)?;
            c.pragma_update(None, "user_version", i as u32 + 1)?;
        }
        Ok(())
    })();
    match done {
        Ok(()) => Ok(c.execute_batch("COMMIT")?),
        Err(e) => {
            let _ = c.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// PostgreSQL's migrations, tracked in `meta.schema_version`, in the caller's transaction
/// under [`PG_MIGRATION_LOCK`] (PostgreSQL's DDL is transactional: a failed migration leaves
/// nothing behind).
fn migrate_postgres(db: &Db) -> Result<(), StoreError> {
    let known = PG_MIGRATIONS.len() as u32;
    db.batch(&format!("SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK})"))?;
    db.batch("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)")?;
    let found = db.query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[], |r| r.get::<i64>(0))?;
    let found = u32::try_from(found.unwrap_or(0)).map_err(|_| unknown("schema_version out of range".into()))?;
    if found > known {
        return Err(StoreError::TooNew { found, known });
    }
    for (i, sql) in PG_MIGRATIONS.iter().enumerate().skip(found as usize) {
        db.batch(sql)?;
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            vals![i as i64 + 1],
        )?;
    }
    Ok(())
}

impl Store {
    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
        match self.db.lite() {
            Some(c) => migrate_sqlite(c),
            None => self.db.in_transaction_of(|| migrate_postgres(&self.db)),
        }
    }

    /// The schema version in the database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        match self.db.lite() {
            Some(c) => Ok(c.pragma_query_value(None, "user_version", |r| r.get(0))?),
            None => {
                let v = self
                    .db
                    .query_one("SELECT value FROM meta WHERE key = 'schema_version'", &[], |r| r.get::<i64>(0))?;
                u32::try_from(v).map_err(|_| unknown(format!("schema_version {v}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made before the counts were kept gets them from its rows when it migrates.
    #[test]
    fn migrating_counts_the_active_alerts_already_stored() {
        let dir = std::env::temp_dir().join(format!("rampart-db-count-migration-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        // Every migration before the one that counts them (version 13).
        let before =
            MIGRATIONS.iter().position(|m| m.contains("ADD COLUMN active_alerts")).expect("the count's migration");
        {
            let c = rusqlite::Connection::open(dir.join("rampart.db")).expect("open");
            for sql in &MIGRATIONS[..before] {
                c.execute_batch(sql).expect("an earlier migration");
            }
            c.pragma_update(None, "user_version", before as u32).expect("version");
            c.execute_batch(
                "INSERT INTO accounts (id, plan, created_ms) VALUES (1, 'developer', 1), (2, 'developer', 1);
                 INSERT INTO alerts (account_id, exchange, symbol, kind, direction, price, repeat, note, status,
                     created_price, created_ms, trigger_count, deleted_ms)
                 VALUES (1, 'binance', 'BTCUSDT', 'price', 'above', 200, 0, '', 'active', 100, 1, 0, NULL),
                        (1, 'binance', 'BTCUSDT', 'price', 'above', 200, 0, '', 'active', 100, 1, 0, NULL),
                        (1, 'binance', 'BTCUSDT', 'price', 'above', 200, 0, '', 'triggered', 100, 1, 1, NULL),
                        (1, 'binance', 'BTCUSDT', 'price', 'above', 200, 0, '', 'active', 100, 1, 0, 5),
                        (2, 'binance', 'BTCUSDT', 'price', 'above', 200, 0, '', 'active', 100, 1, 0, NULL);",
            )
            .expect("rows of the earlier schema");
        }
        let s = Store::open(&dir).expect("migrate");
        assert_eq!((s.active_price_alerts(1).expect("1"), s.active_price_alerts(2).expect("2")), (2, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
