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

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rampart_engine::alert::{AlertSpec, Condition, Cross, Move};
use rampart_engine::{Price, Timeframe, Venue};
use sha2::{Digest, Sha256};

pub use super::db::StoreError;
use super::db::{vals, Db, Row};

mod account;
mod owner;
mod session;
mod site;

pub use account::ACCOUNT_KEYS_MAX;
pub use owner::{Fence, Lease};
pub use session::{SessionRecord, SESSION_TOUCH_MS};
pub use site::{
    direction_str, parse_direction, parse_side, side_str, NewSiteAlert, SiteAlertRow, SiteCondition, SiteFiringDetail,
    SiteFiringRecord, SiteRequest,
};

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
const PG_MIGRATIONS: &[&str] = &[
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

/// Due deliveries of one account returned by one [`Store::due_deliveries`] at most (fewer when
/// many accounts share the scan), so one account's backlog cannot fill a scan; its further rows
/// come in later scans, as earlier ones are settled.
pub const DUE_PER_ACCOUNT_MAX: u32 = 256;

/// A key watcher that has not written its beat for this long is taken for stopped: a key change
/// does not wait for it (its server applies the change at its next poll once it runs again).
pub const KEY_WATCHER_ALIVE_MS: i64 = 3_000;

/// One webhook delivery (a firing of an alert with a webhook), as the outbox holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxRow {
    /// Delivery id.
    pub id: i64,
    /// The alert.
    pub alert_id: i64,
    /// Target URL (checked again at every attempt).
    pub url: String,
    /// The `alert.triggered` body, the same for every attempt.
    pub body: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Attempts made.
    pub attempts: i64,
    /// When the first attempt failed.
    pub first_failure_ms: Option<i64>,
    /// When the next attempt is due.
    pub next_attempt_ms: i64,
    /// HTTP status of the last answer, if any.
    pub last_status: Option<i64>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// The account that owns the alert (the unit of the sender's fairness).
    pub account_id: i64,
    /// Where it goes: the webhook URL, or the account's Telegram chat (`url` is then the chat id).
    pub channel: Channel,
    /// The firing's trigger time (with `alert_id`, the pair that identifies it: [`message_id`]).
    pub trigger_ms: i64,
}

/// The texts the store writes but never makes: every body and message that leaves the process
/// is rendered in `crate::text` (`text::Texts`), handed to each write that needs one. A body is
/// made from the row as the same transaction updated it, so the store asks for it there.
pub trait Render {
    /// The `alert.triggered` event body: the webhook's body and the inbox entry.
    fn alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String;
    /// The `alert.delisted` inbox body.
    fn alert_delisted(&self, row: &AlertRow, now_ms: i64) -> String;
    /// The `alert.expired` inbox body.
    fn alert_expired(&self, row: &AlertRow, now_ms: i64) -> String;
    /// A site alert firing's inbox kind and body.
    fn site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> (&'static str, String);
    /// The Telegram text of a price or pct alert's firing.
    fn telegram_alert_fired(&self, row: &AlertRow, f: &FiringRecord) -> String;
    /// The Telegram text of a delisting notice.
    fn telegram_alert_delisted(&self, row: &AlertRow) -> String;
    /// The Telegram text of an expiry notice.
    fn telegram_alert_expired(&self, row: &AlertRow) -> String;
    /// The Telegram text of a site alert's firing.
    fn telegram_site_fired(&self, row: &SiteAlertRow, f: &SiteFiringRecord) -> String;
    /// The `sendMessage` body for `chat`.
    fn telegram_body(&self, chat: &str, text: &str) -> String;
}

/// The channel of an outbox row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// A POST of the event body to the alert's `webhook_url`.
    Webhook,
    /// A Bot API `sendMessage` to the account's chat.
    Telegram,
}

impl Channel {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Webhook => "webhook",
            Channel::Telegram => "telegram",
        }
    }
}

/// Queues a Telegram message for `account_id`'s chat, when it has one: an outbox row due at
/// `now_ms`, in the caller's transaction. `text` is only made when a message is queued.
fn queue_telegram(
    db: &Db,
    texts: &dyn Render,
    account_id: i64,
    alert_id: i64,
    text: impl FnOnce() -> String,
    now_ms: i64,
) -> Result<(), StoreError> {
    let chat = db.query_opt("SELECT telegram_chat_id FROM channels WHERE account_id = ?1", vals![account_id], |r| {
        r.get::<Option<String>>(0)
    })?;
    let Some(Some(chat)) = chat else { return Ok(()) };
    let body = texts.telegram_body(&chat, &text());
    db.execute(
        "INSERT INTO outbox (alert_id, account_id, url, body, trigger_ms, state, attempts, next_attempt_ms, created_ms, channel)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?5, ?5, 'telegram')",
        vals![alert_id, account_id, &chat, &body, now_ms],
    )?;
    Ok(())
}

/// The channel column back: every stored value is one this build writes.
fn channel_column(r: &Row<'_>, col: usize) -> Result<Channel, StoreError> {
    match r.get::<String>(col)?.as_str() {
        "webhook" => Ok(Channel::Webhook),
        "telegram" => Ok(Channel::Telegram),
        other => Err(unknown(format!("outbox channel '{other}'"))),
    }
}

/// The message id of a firing: the pair that identifies it, whoever publishes it how often.
pub fn message_id(alert_id: i64, trigger_ms: i64) -> String {
    format!("{alert_id}:{trigger_ms}")
}

/// An outbox row not yet handed to the cluster's firings stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unpublished {
    /// Delivery id (what the stream carries).
    pub id: i64,
    /// The alert.
    pub alert_id: i64,
    /// The firing's time.
    pub trigger_ms: i64,
    /// Webhook or Telegram.
    pub channel: Channel,
}

impl Unpublished {
    /// The stream's message id: the firing's (alert id, trigger time) for a webhook (the pair
    /// that identifies a firing, [`message_id`]); the row's own id for a Telegram
    /// message (a firing may have both, and site and API alerts have separate id spaces).
    pub fn message_id(&self) -> String {
        match self.channel {
            Channel::Webhook => message_id(self.alert_id, self.trigger_ms),
            Channel::Telegram => format!("telegram:{}", self.id),
        }
    }
}

/// What one delivery attempt came to, and when: the unit the sender records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Delivery id.
    pub id: i64,
    /// What the attempt came to.
    pub result: AttemptResult,
    /// When it ended: the schedule is measured from here, however late it is recorded.
    pub at_ms: i64,
    /// How long it took, milliseconds.
    pub latency_ms: i64,
}

/// What one delivery attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    /// A 2xx answer.
    Delivered {
        /// The status.
        status: u16,
    },
    /// A non-2xx answer, a timeout, a refused address or a connection error.
    Failed {
        /// The status, when an answer came.
        status: Option<u16>,
        /// What went wrong.
        error: String,
        /// Which kind of failure, as the delivery log names it.
        kind: FailKind,
    },
}

/// How an attempt failed, as the delivery log names it (`decisions.md` §13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// An answer that was not 2xx, or one cut short (`failed`).
    Answer,
    /// No full answer within the attempt's time (`timeout`).
    Timeout,
    /// No connection (`refused`).
    Refused,
    /// The public-address check refused the target (`blocked`).
    Blocked,
}

impl FailKind {
    /// Its name in the delivery log.
    pub fn as_str(self) -> &'static str {
        match self {
            FailKind::Answer => "failed",
            FailKind::Timeout => "timeout",
            FailKind::Refused => "refused",
            FailKind::Blocked => "blocked",
        }
    }
}

impl AttemptResult {
    /// Its outcome in the delivery log: `delivered`, or the failure's kind.
    pub fn outcome(&self) -> &'static str {
        match self {
            AttemptResult::Delivered { .. } => "delivered",
            AttemptResult::Failed { kind, .. } => kind.as_str(),
        }
    }
}

/// Delivery log rows kept per alert at most (the oldest go first).
pub const ATTEMPTS_PER_ALERT_MAX: i64 = 100;
/// How long delivery log rows are kept, and how long a firing can be redelivered: 7 days.
pub const DELIVERY_LOG_KEEP_MS: i64 = 7 * 86_400_000;

/// An account's webhook signing, as `GET /v1/webhook-secret` shows it (never the secrets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigningState {
    /// When the current secret was made.
    pub created_ms: i64,
    /// Until when the secret it replaced signs too; `None` when none does any more.
    pub previous_until_ms: Option<i64>,
}

/// One row of an alert's delivery log (`GET /v1/alerts/{id}/deliveries`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryLogRow {
    /// The firing's trigger time, Unix milliseconds.
    pub trigger_ms: i64,
    /// Which attempt (1 to 3; a redelivery starts again at 1); a pending row names the next.
    pub attempt: i64,
    /// When it ended (a pending row: when it is due), Unix milliseconds.
    pub at_ms: i64,
    /// `delivered`, `failed`, `timeout`, `refused`, `blocked` or `pending`.
    pub outcome: String,
    /// The answer's status, when one came.
    pub status: Option<i64>,
    /// How long it took, milliseconds (none for a pending row).
    pub latency_ms: Option<i64>,
    /// What went wrong, when it did.
    pub error: Option<String>,
}

/// What a redelivery request came to ([`Store::redeliver`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redelivery {
    /// Queued again: a new delivery of the same body.
    Queued,
    /// No such firing of this account's alert within the log's 7 days.
    Unknown,
    /// The firing's delivery is still pending.
    Pending,
}

/// When the attempt after `attempts_done` failed attempts is due, measured from the first
/// failure: attempt 2 at +10 s, attempt 3 at +60 s, then none (the delivery has failed).
pub fn next_attempt_ms(attempts_done: i64, first_failure_ms: i64) -> Option<i64> {
    match attempts_done {
        1 => Some(first_failure_ms + 10_000),
        2 => Some(first_failure_ms + 60_000),
        _ => None,
    }
}

/// Records a delivered attempt: `?1` the row, `?2` the status, `?3` the time.
const DELIVERED_SQL: &str = "UPDATE outbox SET state = 'delivered', attempts = attempts + 1, last_status = ?2,
    last_error = NULL, done_ms = ?3 WHERE id = ?1";

const OUTBOX_COLUMNS: &str = "id, alert_id, url, body, state, attempts, first_failure_ms, next_attempt_ms, \
     last_status, last_error, account_id, channel, trigger_ms";

fn outbox_row(r: &Row<'_>) -> Result<OutboxRow, StoreError> {
    Ok(OutboxRow {
        id: r.get(0)?,
        alert_id: r.get(1)?,
        url: r.get(2)?,
        body: r.get(3)?,
        state: r.get(4)?,
        attempts: r.get(5)?,
        first_failure_ms: r.get(6)?,
        next_attempt_ms: r.get(7)?,
        last_status: r.get(8)?,
        last_error: r.get(9)?,
        account_id: r.get(10)?,
        channel: channel_column(r, 11)?,
        trigger_ms: r.get(12)?,
    })
}

/// An alert row (the API's Alert resource, stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertRow {
    /// Alert id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Venue.
    pub exchange: Venue,
    /// Pair symbol.
    pub symbol: String,
    /// What fires it (type, direction, level or threshold and window).
    pub condition: Condition,
    /// Repeating.
    pub repeat: bool,
    /// Client label.
    pub note: String,
    /// Webhook target.
    pub webhook_url: Option<String>,
    /// Lifecycle status.
    pub status: AlertStatus,
    /// Price at creation (fixed-point).
    pub created_price: i64,
    /// Creation time.
    pub created_ms: i64,
    /// Last firing time.
    pub last_triggered_ms: Option<i64>,
    /// Firings so far.
    pub trigger_count: i64,
    /// When it ends by itself, Unix milliseconds; `None`: never.
    pub expires_ms: Option<i64>,
}

impl AlertRow {
    /// The alert as a shard holds it.
    pub fn spec(&self) -> Option<AlertSpec> {
        Some(AlertSpec { id: u64::try_from(self.id).ok()?, condition: self.condition, repeat: self.repeat })
    }
}

/// An alert's lifecycle status, stored and answered as `active` or `triggered`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertStatus {
    /// Evaluated on every trade.
    Active,
    /// Fired (not repeating); no longer evaluated.
    Triggered,
}

impl AlertStatus {
    /// The stored and answered spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertStatus::Active => "active",
            AlertStatus::Triggered => "triggered",
        }
    }

    /// The status stored as `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<AlertStatus> {
        [AlertStatus::Active, AlertStatus::Triggered].into_iter().find(|x| x.as_str() == s)
    }
}

/// The columns a condition is stored in: `kind`, `direction`, `price`, `pct_millionths`, `window`.
pub type ConditionColumns = (&'static str, &'static str, Option<i64>, Option<i64>, Option<&'static str>);

/// The one mapping of a condition to its columns.
pub fn condition_columns(c: &Condition) -> ConditionColumns {
    match *c {
        Condition::Price { level, .. } => (c.kind(), c.direction(), Some(level.0), None, None),
        Condition::Pct { millionths, window, .. } => {
            (c.kind(), c.direction(), None, Some(i64::from(millionths)), Some(window.as_str()))
        }
    }
}

/// The one mapping back: every column must hold a value this build writes; anything else is an
/// error naming the column, never a default.
fn condition_from_columns(
    kind: &str,
    direction: &str,
    price: Option<i64>,
    pct: Option<i64>,
    window: Option<&str>,
) -> Result<Condition, UnknownStoredValue> {
    let bad = |what: String| UnknownStoredValue(what);
    match kind {
        "price" => Ok(Condition::Price {
            cross: Cross::parse(direction).ok_or_else(|| bad(format!("direction '{direction}' of a price alert")))?,
            level: Price(price.filter(|p| *p > 0).ok_or_else(|| bad("price of a price alert".into()))?),
        }),
        "pct" => Ok(Condition::Pct {
            dir: Move::parse(direction).ok_or_else(|| bad(format!("direction '{direction}' of a pct alert")))?,
            millionths: pct
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| bad("pct_millionths of a pct alert".into()))?,
            window: window.and_then(Timeframe::parse).ok_or_else(|| bad("window of a pct alert".into()))?,
        }),
        other => Err(bad(format!("kind '{other}'"))),
    }
}

/// A stored value this build does not write.
#[derive(Debug)]
struct UnknownStoredValue(String);

impl fmt::Display for UnknownStoredValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown stored value: {}", self.0)
    }
}

impl std::error::Error for UnknownStoredValue {}

fn unknown(what: String) -> StoreError {
    StoreError::Corrupt(UnknownStoredValue(what).to_string())
}

/// A new alert, validated by the front.
#[derive(Clone, Debug)]
pub struct NewAlert {
    /// Owning account.
    pub account_id: i64,
    /// Venue.
    pub exchange: Venue,
    /// Pair symbol.
    pub symbol: String,
    /// What fires it.
    pub condition: Condition,
    /// Repeating.
    pub repeat: bool,
    /// Label.
    pub note: String,
    /// Webhook target.
    pub webhook_url: Option<String>,
    /// Price at creation.
    pub created_price: i64,
    /// Creation time.
    pub created_ms: i64,
    /// When it ends by itself, Unix milliseconds (`expires_at`); `None`: never.
    pub expires_ms: Option<i64>,
}

/// One firing to persist.
#[derive(Clone, Copy, Debug)]
pub struct FiringRecord {
    /// Alert id.
    pub alert_id: i64,
    /// Trade price (fixed-point).
    pub price: i64,
    /// Signed move in hundredths of a percent, for pct alerts.
    pub move_hundredths: Option<i64>,
    /// Firing time.
    pub ts_ms: i64,
    /// The alert is done (not repeating): its status becomes `triggered`.
    pub last: bool,
}

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

/// What an alert create's `Idempotency-Key` was used for before ([`Store::idempotent_alert`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Idempotent {
    /// Not used (or not within 24 h): create.
    New,
    /// Used with the same body: the alert it made, as it is now.
    Same(AlertRow),
    /// Used with another body.
    Other,
    /// Used with the same body for this alert, deleted since.
    Deleted(i64),
}

/// Which alerts a listing shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusFilter {
    /// Only active.
    Active,
    /// Only triggered.
    Triggered,
    /// Both.
    All,
}

const ALERT_COLUMNS: &str =
    "id, account_id, exchange, symbol, kind, direction, price, pct_millionths, \"window\", repeat, \
     note, webhook_url, status, created_price, created_ms, last_triggered_ms, trigger_count, expires_ms";

fn alert_row(r: &Row<'_>) -> Result<AlertRow, StoreError> {
    let exchange: String = r.get(2)?;
    let (kind, direction): (String, String) = (r.get(4)?, r.get(5)?);
    let window: Option<String> = r.get(8)?;
    let condition =
        condition_from_columns(&kind, &direction, r.get(6)?, r.get(7)?, window.as_deref()).map_err(|e| unknown(e.0))?;
    let status: String = r.get(12)?;
    Ok(AlertRow {
        id: r.get(0)?,
        account_id: r.get(1)?,
        exchange: Venue::ALL
            .into_iter()
            .find(|v| v.as_str() == exchange)
            .ok_or_else(|| unknown(format!("exchange '{exchange}'")))?,
        symbol: r.get(3)?,
        condition,
        repeat: r.get(9)?,
        note: r.get(10)?,
        webhook_url: r.get(11)?,
        status: AlertStatus::parse(&status).ok_or_else(|| unknown(format!("status '{status}'")))?,
        created_price: r.get(13)?,
        created_ms: r.get(14)?,
        last_triggered_ms: r.get(15)?,
        trigger_count: r.get(16)?,
        expires_ms: r.get(17)?,
    })
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
    db: Db,
    /// The SQLite file, or for PostgreSQL a description without the URL (which may hold a
    /// password).
    path: PathBuf,
    /// Firings and delistings also queue a Telegram message for accounts with a chat
    /// ([`Store::with_telegram`]; the writer's store, when the operator configured the bot).
    telegram: bool,
    /// The partition owner a market node's writer writes for ([`Store::with_fence`]).
    fence: Option<Fence>,
}

/// Waits for a lock held by another connection: 100 µs at a time, for up to 5 s.
///
/// Rationale: SQLite's default busy handler sleeps in growing steps up to 100 ms, so a firing
/// whose commit meets an alert creation's (fsynced) commit could wait hundreds of ms for a lock
/// held for a few; the harness measured such webhook tails.
fn busy(attempt: i32) -> bool {
    std::thread::sleep(Duration::from_micros(100));
    attempt < 50_000
}

/// The lock that makes a server the only one on its data directory, held for the process's
/// life (the operating system releases it when the process exits, however it exits).
///
/// Rationale: two servers on one directory would each load every alert and each deliver every
/// outbox row, so every webhook would be sent twice. The keys CLI does not take the lock: it
/// is meant to run beside the server.
#[derive(Debug)]
pub struct DataDirLock {
    _file: std::fs::File,
    path: PathBuf,
}

/// Why the data directory (or the PostgreSQL database) could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the lock.
    Held(PathBuf),
    /// The lock file could not be created or locked.
    Io(PathBuf, std::io::Error),
    /// Another server holds the PostgreSQL database's server lock (a single process), or
    /// market nodes hold it shared (a single process is refused).
    HeldPostgres,
    /// A market node is refused: a single-process server uses the database.
    SingleServerRunning,
    /// Market nodes that split the pairs into another number of partitions use the database
    /// (two such nodes could own the same book).
    OtherPartitionCount,
    /// The PostgreSQL server could not be asked.
    Store(StoreError),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Held(p) => write!(
                f,
                "another rampart server is using this data directory (it holds {}); stop it or give another --data-dir",
                p.display()
            ),
            LockError::Io(p, e) => write!(f, "locking {}: {e}", p.display()),
            LockError::HeldPostgres => f.write_str(
                "another rampart server is using this PostgreSQL database (a single-process server, or a cluster's \
                 market nodes); stop it first, or start this one as a cluster node (--role)",
            ),
            LockError::SingleServerRunning => f.write_str(
                "a single-process rampart server is using this PostgreSQL database; stop it before starting a \
                 cluster's market nodes on it",
            ),
            LockError::OtherPartitionCount => f.write_str(
                "market nodes with another partition count (the N of --partition I/N) are using this PostgreSQL \
                 database; every market node of a cluster must have the same N",
            ),
            LockError::Store(e) => write!(f, "locking the PostgreSQL database: {e}"),
        }
    }
}

impl std::error::Error for LockError {}

impl DataDirLock {
    /// Takes the exclusive lock on `data_dir/rampart.lock` (creating the directory and the
    /// file if needed) without waiting: `Held` if another server has it.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, LockError> {
        let path = data_dir.join("rampart.lock");
        std::fs::create_dir_all(data_dir).map_err(|e| LockError::Io(path.clone(), e))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| LockError::Io(path.clone(), e))?;
        match file.try_lock() {
            Ok(()) => Ok(DataDirLock { _file: file, path }),
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held(path)),
            Err(std::fs::TryLockError::Error(e)) => Err(LockError::Io(path, e)),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Where the store lives: a SQLite data directory (the default) or a PostgreSQL database.
#[derive(Clone)]
pub enum StoreLocation {
    /// `rampart.db` in this directory.
    Sqlite(PathBuf),
    /// The database at this connection string (never logged: it may hold a password).
    Postgres(String),
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl StoreLocation {
    /// A new connection, the schema brought up to date.
    pub fn open(&self) -> Result<Store, StoreError> {
        match self {
            StoreLocation::Sqlite(dir) => Store::open(dir),
            StoreLocation::Postgres(url) => Store::open_postgres(url),
        }
    }

    /// Whether a database is there already (a PostgreSQL server is taken to hold one: the
    /// operator created it).
    pub fn exists(&self) -> bool {
        match self {
            StoreLocation::Sqlite(dir) => Store::exists(dir),
            StoreLocation::Postgres(_) => true,
        }
    }

    /// For logs and errors: the SQLite file, or `PostgreSQL` (without the connection string).
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Sqlite(dir) => dir.join("rampart.db").display().to_string(),
            StoreLocation::Postgres(_) => "PostgreSQL".to_owned(),
        }
    }
}

/// The lock that makes a server the only one on its store, held for the process's life: the
/// data directory's lock file ([`DataDirLock`]) or, on PostgreSQL, a session advisory lock held
/// by a connection of its own (the server releases it when that connection ends, however the
/// process ends).
///
/// Rationale: a whole server (front, firing writer and delivery in one process) assumes it is
/// the only sender of the outbox; two on one database would deliver every webhook twice.
#[derive(Debug)]
pub enum ServerLock {
    /// The data directory's lock file.
    Dir(DataDirLock),
    /// The connection holding the advisory lock.
    Postgres(PgLockHolder),
}

/// A PostgreSQL connection that holds the server lock.
pub struct PgLockHolder {
    _store: Store,
}

impl fmt::Debug for PgLockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PgLockHolder")
    }
}

/// The advisory lock a whole server holds on a PostgreSQL database: this number (arbitrary;
/// only rampart uses it) with a hash of the schema the store's tables are in, so stores in two
/// schemas of one database are two stores.
const PG_SERVER_LOCK: i32 = 0x7261_6d70;

impl ServerLock {
    /// Takes the lock without waiting: [`LockError::Held`] / [`LockError::HeldPostgres`] when
    /// another server has it.
    pub fn acquire(at: &StoreLocation) -> Result<ServerLock, LockError> {
        match at {
            StoreLocation::Sqlite(dir) => DataDirLock::acquire(dir).map(ServerLock::Dir),
            StoreLocation::Postgres(url) => {
                let store = Store::open_postgres(url).map_err(LockError::Store)?;
                let got = store
                    .db
                    .query_one(
                        &format!("SELECT pg_try_advisory_lock({PG_SERVER_LOCK}, hashtext(current_schema()))"),
                        &[],
                        |r| r.get::<bool>(0),
                    )
                    .map_err(LockError::Store)?;
                if got {
                    Ok(ServerLock::Postgres(PgLockHolder { _store: store }))
                } else {
                    Err(LockError::HeldPostgres)
                }
            }
        }
    }

    /// A market node's lock on the PostgreSQL database at `url` (`serve --role market`): the
    /// server lock shared, so no single-process server runs on the database and any number of
    /// market nodes may ([`LockError::SingleServerRunning`] otherwise). Which node of a
    /// partition owns it is not a lock but a lease (`owner`): a second node of a partition
    /// waits as its standby.
    ///
    /// The partition count is held too (shared, keyed by the schema with the count as the
    /// second key), and a node is refused with [`LockError::OtherPartitionCount`] while any node
    /// holds another count: nodes of `0/2` and `0/3` would own some books twice.
    pub fn acquire_partition(url: &str, count: u16) -> Result<ServerLock, LockError> {
        let store = Store::open_postgres(url).map_err(LockError::Store)?;
        let sql = format!("SELECT pg_try_advisory_lock_shared({PG_SERVER_LOCK}, hashtext(current_schema()))");
        if !store.db.query_one(&sql, &[], |r| r.get::<bool>(0)).map_err(LockError::Store)? {
            return Err(LockError::SingleServerRunning);
        }
        // Taken before looking, so of two nodes starting at once with different counts each
        // sees the other (both are refused, never both admitted).
        let key = "hashtext(current_schema() || ':partitions')";
        store.db.batch(&format!("SELECT pg_advisory_lock_shared({key}, {count})")).map_err(LockError::Store)?;
        let others = format!(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND objsubid = 2 AND classid::bigint = ({key}::bigint & 4294967295) AND objid::bigint <> {count}"
        );
        match store.db.query_one(&others, &[], |r| r.get::<i64>(0)).map_err(LockError::Store)? {
            0 => Ok(ServerLock::Postgres(PgLockHolder { _store: store })),
            _ => Err(LockError::OtherPartitionCount),
        }
    }
}

impl Store {
    /// Whether `data_dir` holds a database.
    pub fn exists(data_dir: &Path) -> bool {
        data_dir.join("rampart.db").is_file()
    }

    /// Opens (creating if needed) `data_dir/rampart.db` and brings the schema up to date.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(StoreError::Io)?;
        let path = data_dir.join("rampart.db");
        let conn = rusqlite::Connection::open(&path)?;
        conn.busy_handler(Some(busy))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut store = Store { db: Db::sqlite(conn), path, telegram: false, fence: None };
        store.migrate()?;
        Ok(store)
    }

    /// Connects to the PostgreSQL database at `url` and brings its schema up to date (nodes
    /// starting at once take turns). Commits wait for the server's durable write
    /// (`synchronous_commit` stays on), and a lock held elsewhere is waited for at most 5 s, as
    /// SQLite's busy handler does.
    pub fn open_postgres(url: &str) -> Result<Store, StoreError> {
        let db = Db::postgres(url)?;
        db.set_session("lock_timeout", "'5s'")?;
        let mut store = Store { db, path: PathBuf::from("postgres"), telegram: false, fence: None };
        store.migrate()?;
        Ok(store)
    }

    /// True when this store is on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.db.is_postgres()
    }

    /// Writes the probe row (`meta.probe_ms`): proof that the database can be written now.
    pub fn probe_write(&mut self, now_ms: i64) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES ('probe_ms', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            vals![now_ms],
        )?;
        Ok(())
    }

    /// Waits at most `d` for a lock held by another connection (replacing the default handler;
    /// on PostgreSQL, the session's `lock_timeout`).
    pub fn set_busy_timeout(&mut self, d: Duration) -> Result<(), StoreError> {
        match self.db.lite() {
            Some(c) => Ok(c.busy_timeout(d)?),
            None => self.db.set_session("lock_timeout", &format!("'{}ms'", d.as_millis().max(1))),
        }
    }

    /// Commits through this connection stop waiting for the disk: SQLite's `synchronous =
    /// NORMAL` in WAL mode (durable against a crash of the process, not a power loss), or
    /// PostgreSQL's `synchronous_commit = off` (durable against a crash of rampart, not of the
    /// database server: its last moments of commits may be lost).
    pub fn relax_sync(&self) -> Result<(), StoreError> {
        match self.db.lite() {
            Some(c) => Ok(c.pragma_update(None, "synchronous", "NORMAL")?),
            None => self.db.set_session("synchronous_commit", "off"),
        }
    }

    /// Tunes this connection for a background writer on the tick-to-webhook path (the firing
    /// writer, webhook delivery): commits are not fsynced (`relax_sync`) and, on
    /// SQLite, never checkpoint (`wal_autocheckpoint = 0`: a [`Checkpointer`](super::storage::Checkpointer) does it on its
    /// own thread).
    ///
    /// Rationale: a commit with fsync costs 6–12 ms on this project's machines, more than the
    /// whole tick-to-webhook budget; alert creation keeps full durability (its 200 promises it).
    pub fn for_background(self) -> Result<Store, StoreError> {
        self.relax_sync()?;
        if let Some(c) = self.db.lite() {
            c.pragma_update(None, "wal_autocheckpoint", 0)?;
        }
        Ok(self)
    }

    /// Makes firings and delistings recorded through this store also queue a Telegram message
    /// (an outbox row of [`Channel::Telegram`]) for every account that has a chat id, in the
    /// same transaction as the inbox entry.
    pub fn with_telegram(mut self, on: bool) -> Store {
        self.telegram = on;
        self
    }

    /// Copies committed WAL content into the database without blocking readers or writers
    /// (`PRAGMA wal_checkpoint(PASSIVE)`); nothing to do on PostgreSQL.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        if let Some(c) = self.db.lite() {
            c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        }
        Ok(())
    }

    /// The database file (`postgres` for a PostgreSQL store: its URL may hold a password).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
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
    fn insert_key(&self, account_id: i64, label: Option<&str>, now_ms: i64) -> Result<CreatedKey, StoreError> {
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

    /// Opens a group of jobs: one write transaction (on SQLite taken at once, `BEGIN
    /// IMMEDIATE`, waiting for the lock up to the busy timeout), so the group's commit pays for
    /// one durable write. Jobs inside must not open transactions of their own.
    pub fn begin_group(&mut self) -> Result<(), StoreError> {
        self.db.begin(true)
    }

    /// [`Store::begin_group`], with every lock wait of the group ending within `wait`: SQLite's
    /// busy timeout (set before `BEGIN IMMEDIATE`, which takes the lock), PostgreSQL's `SET
    /// LOCAL lock_timeout` (sent with the group's first statement, in its round trip).
    pub fn begin_group_within(&mut self, wait: Duration) -> Result<(), StoreError> {
        let ms = wait.as_millis().max(1);
        match self.db.lite() {
            Some(c) => {
                c.busy_timeout(wait)?;
                self.db.begin(true)
            }
            None => {
                self.db.begin(true)?;
                self.db.ahead_of_next(&format!("SET LOCAL lock_timeout = '{ms}ms'"))
            }
        }
    }

    /// Starts one job of the open group.
    pub fn begin_job(&mut self) -> Result<(), StoreError> {
        debug_assert!(self.db.in_transaction(), "a job runs inside a group");
        self.db.savepoint("job")
    }

    /// Ends the current job: its writes are kept when it succeeded, undone when it failed
    /// (the other jobs of the group are not affected).
    pub fn end_job(&mut self, succeeded: bool) -> Result<(), StoreError> {
        self.db.end_savepoint("job", succeeded)
    }

    /// Commits the group (or, when it cannot, rolls it back: nothing of it is kept).
    pub fn commit_group(&mut self) -> Result<(), StoreError> {
        self.db.commit()
    }

    /// Stores a new alert (committed when this returns, or with its group) and returns its row.
    pub fn insert_alert(&self, a: &NewAlert) -> Result<AlertRow, StoreError> {
        let (kind, direction, price, pct, window) = condition_columns(&a.condition);
        let sql = format!(
            "INSERT INTO alerts (account_id, exchange, symbol, kind, direction, price, pct_millionths, \"window\", repeat,
                note, webhook_url, status, created_price, created_ms, trigger_count, expires_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'active', ?12, ?13, 0, ?14) RETURNING {ALERT_COLUMNS}"
        );
        let params = vals![
            a.account_id,
            a.exchange.as_str(),
            &a.symbol,
            kind,
            direction,
            price,
            pct,
            window,
            a.repeat,
            &a.note,
            a.webhook_url.as_deref(),
            a.created_price,
            a.created_ms,
            a.expires_ms
        ];
        // In the insert's round trip (PostgreSQL); the cap's count ([`Store::active_price_alerts`]).
        self.db.ahead_of_next(&format!(
            "UPDATE accounts SET active_alerts = active_alerts + 1 WHERE id = {}",
            a.account_id
        ))?;
        self.db.query_one(&sql, params, alert_row)
    }

    /// One alert by id (deleted ones excluded).
    pub fn alert(&self, id: i64) -> Result<Option<AlertRow>, StoreError> {
        let sql = format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE id = ?1 AND deleted_ms IS NULL");
        self.db.query_opt(&sql, vals![id], alert_row)
    }

    /// Removes an alert row written by [`Store::insert_alert`] that could not be handed to its
    /// shard (never acknowledged to the client).
    pub fn forget_alert(&self, id: i64) -> Result<(), StoreError> {
        let removed: Option<(i64, bool)> = self.db.query_opt(
            "DELETE FROM alerts WHERE id = ?1 RETURNING account_id, status = 'active' AND deleted_ms IS NULL",
            vals![id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        self.release_active(removed.filter(|(_, active)| *active).map(|(account, _)| account))
    }

    /// Active API alerts of an account, price and percent alike (`decisions.md` §2: both count
    /// against the plan's price-alert cap).
    ///
    /// The count is the account's `active_alerts`, kept where an alert starts or stops being
    /// active, in the transaction that changes it ([`Store::insert_alert`] adds one;
    /// [`Store::forget_alert`], [`Store::delete_alert`], a one-shot's firing, expiry and
    /// delisting take theirs off, `release_active`): one row read however many alerts
    /// the account has (counting them made a create's cost grow with them: 9 ms at 9 000 on
    /// PostgreSQL).
    ///
    /// On PostgreSQL the account's row is locked by the same read (until the enclosing
    /// transaction ends), so two api nodes creating alerts for one account count and insert one
    /// after the other and the cap holds across nodes (SQLite's single writer gives that already).
    pub fn active_price_alerts(&self, account_id: i64) -> Result<u64, StoreError> {
        let lock = if self.db.is_postgres() { " FOR UPDATE" } else { "" };
        let sql = format!("SELECT active_alerts FROM accounts WHERE id = ?1{lock}");
        let n: Option<i64> = self.db.query_opt(&sql, vals![account_id], |r| r.get(0))?;
        Ok(n.unwrap_or(0).unsigned_abs())
    }

    /// Takes alerts that stopped being active off their accounts' counts (`ended` holds one
    /// account id per alert), in the caller's transaction; accounts in ascending id order, so
    /// two transactions never wait on each other's account rows in opposite orders.
    fn release_active(&self, ended: impl IntoIterator<Item = i64>) -> Result<(), StoreError> {
        let mut per_account = std::collections::BTreeMap::<i64, i64>::new();
        for account in ended {
            *per_account.entry(account).or_default() += 1;
        }
        if per_account.is_empty() {
            return Ok(());
        }
        let sets: Vec<_> = per_account.iter().map(|(a, n)| vals![*a, *n].to_vec()).collect();
        self.db.execute_each("UPDATE accounts SET active_alerts = active_alerts - ?2 WHERE id = ?1", &sets)?;
        Ok(())
    }

    /// What an earlier create with `key` made, when `account_id` used it since `since_ms`:
    /// [`Idempotent::Same`] with the alert as it is now when `body_hash` matches (or
    /// [`Idempotent::Deleted`] when that alert was deleted since), [`Idempotent::Other`] when it
    /// came with another body, [`Idempotent::New`] when unused (keys older than `since_ms` are
    /// forgotten here).
    pub fn idempotent_alert(
        &self,
        account_id: i64,
        key: &str,
        body_hash: &[u8; 32],
        since_ms: i64,
    ) -> Result<Idempotent, StoreError> {
        self.db.execute("DELETE FROM idempotency WHERE created_ms < ?1", vals![since_ms])?;
        let earlier = self.db.query_opt(
            "SELECT body_hash, alert_id FROM idempotency WHERE account_id = ?1 AND key = ?2",
            vals![account_id, key],
            |r| Ok((r.get::<Vec<u8>>(0)?, r.get::<i64>(1)?)),
        )?;
        let Some((hash, alert_id)) = earlier else { return Ok(Idempotent::New) };
        if hash.as_slice() != body_hash.as_slice() {
            return Ok(Idempotent::Other);
        }
        let sql = format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE id = ?1 AND deleted_ms IS NULL");
        if let Some(row) = self.db.query_opt(&sql, vals![alert_id], alert_row)? {
            return Ok(Idempotent::Same(row));
        }
        // Deleted since (by its owner, expiry or a delisting): a retry must not make it again.
        // No row at all: the create was undone before it was acknowledged.
        let kept = self.db.query_opt("SELECT id FROM alerts WHERE id = ?1", vals![alert_id], |r| r.get::<i64>(0))?;
        Ok(if kept.is_some() { Idempotent::Deleted(alert_id) } else { Idempotent::New })
    }

    /// Remembers that `account_id`'s create with `key` and `body_hash` made `alert_id`.
    pub fn remember_idempotent(
        &self,
        account_id: i64,
        key: &str,
        body_hash: &[u8; 32],
        alert_id: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO idempotency (account_id, key, body_hash, alert_id, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(account_id, key) DO UPDATE SET body_hash = excluded.body_hash, alert_id = excluded.alert_id,
                created_ms = excluded.created_ms",
            vals![account_id, key, &body_hash[..], alert_id, now_ms],
        )?;
        Ok(())
    }

    /// Makes `secret` the account's webhook signing secret (`decisions.md` §13); the one it
    /// replaces, if any, goes on signing until `now_ms + previous_for_ms`.
    pub fn set_webhook_secret(
        &self,
        account_id: i64,
        secret: &str,
        now_ms: i64,
        previous_for_ms: i64,
    ) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO webhook_secrets (account_id, secret, previous, previous_until_ms, created_ms)
             VALUES (?1, ?2, NULL, NULL, ?3)
             ON CONFLICT(account_id) DO UPDATE SET previous = webhook_secrets.secret,
                previous_until_ms = ?4, secret = excluded.secret, created_ms = excluded.created_ms",
            vals![account_id, secret, now_ms, now_ms + previous_for_ms],
        )?;
        Ok(())
    }

    /// Whether the account signs its webhooks, without the secrets: when the current secret was
    /// made, and until when the one it replaced still signs (`None` once that time is past).
    pub fn webhook_signing(&self, account_id: i64, now_ms: i64) -> Result<Option<SigningState>, StoreError> {
        let row = self.db.query_opt(
            "SELECT created_ms, previous_until_ms FROM webhook_secrets WHERE account_id = ?1",
            vals![account_id],
            |r| Ok((r.get::<i64>(0)?, r.get::<Option<i64>>(1)?)),
        )?;
        Ok(row.map(|(created_ms, until)| SigningState { created_ms, previous_until_ms: until.filter(|&u| u > now_ms) }))
    }

    /// Ends signing for the account: its secrets are forgotten. Whether it had one.
    pub fn end_webhook_secret(&self, account_id: i64) -> Result<bool, StoreError> {
        Ok(self.db.execute("DELETE FROM webhook_secrets WHERE account_id = ?1", vals![account_id])? > 0)
    }

    /// The secrets that sign the account's webhooks at `now_ms`: the current one, then the one
    /// it replaced while that still signs. Empty: deliveries are not signed.
    pub fn webhook_secrets(&self, account_id: i64, now_ms: i64) -> Result<Vec<String>, StoreError> {
        Ok(self.webhook_secrets_of(&[account_id], now_ms)?.pop().unwrap_or_default())
    }

    /// [`Store::webhook_secrets`] of several accounts, in order (one pipelined round trip on
    /// PostgreSQL).
    pub fn webhook_secrets_of(&self, account_ids: &[i64], now_ms: i64) -> Result<Vec<Vec<String>>, StoreError> {
        let sets: Vec<_> = account_ids.iter().map(|id| vals![*id].to_vec()).collect();
        let rows = self.db.query_opt_each(
            "SELECT secret, previous, previous_until_ms FROM webhook_secrets WHERE account_id = ?1",
            &sets,
            |r| Ok((r.get::<String>(0)?, r.get::<Option<String>>(1)?, r.get::<Option<i64>>(2)?)),
        )?;
        let secrets = |row: Option<(String, Option<String>, Option<i64>)>| {
            let Some((secret, previous, until)) = row else { return Vec::new() };
            let mut out = vec![secret];
            if let (Some(p), Some(until)) = (previous, until) {
                if until > now_ms {
                    out.push(p);
                }
            }
            out
        };
        Ok(rows.into_iter().map(secrets).collect())
    }

    /// Locks `account_id`'s row until the transaction ends (PostgreSQL; SQLite's write lock
    /// already serializes every writer).
    pub(crate) fn lock_account(&self, account_id: i64) -> Result<(), StoreError> {
        if self.db.is_postgres() {
            // Pipelined with the next statement (the cap's count): that one runs after the lock
            // is granted, with a snapshot of its own, so it sees the previous holder's insert.
            self.db.ahead_of_next(&format!("SELECT id FROM accounts WHERE id = {account_id} FOR UPDATE"))?;
        }
        Ok(())
    }

    /// An account's alerts by id, filtered by status.
    pub fn list_alerts(&self, account_id: i64, filter: StatusFilter) -> Result<Vec<AlertRow>, StoreError> {
        let cond = match filter {
            StatusFilter::Active => "AND status = 'active'",
            StatusFilter::Triggered => "AND status = 'triggered'",
            StatusFilter::All => "",
        };
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE account_id = ?1 AND deleted_ms IS NULL {cond} ORDER BY id"
        );
        self.db.query(&sql, vals![account_id], alert_row)
    }

    /// Deletes an account's alert; `None` when it has no such (undeleted) alert. One
    /// conditional statement, so two deletes racing on different nodes answer one `Some`.
    pub fn delete_alert(&self, account_id: i64, id: i64, now_ms: i64) -> Result<Option<AlertRow>, StoreError> {
        let sql = format!(
            "UPDATE alerts SET deleted_ms = ?3 WHERE id = ?1 AND account_id = ?2 AND deleted_ms IS NULL RETURNING {ALERT_COLUMNS}"
        );
        let row = self.db.query_opt(&sql, vals![id, account_id, now_ms], alert_row)?;
        self.release_active(row.iter().filter(|r| r.status == AlertStatus::Active).map(|r| r.account_id))?;
        Ok(row)
    }

    /// Active alerts created at `since_ms` or later, oldest first.
    pub fn recent_active_alerts(&self, since_ms: i64) -> Result<Vec<AlertRow>, StoreError> {
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE created_ms >= ?1 AND status = 'active' AND deleted_ms IS NULL ORDER BY id"
        );
        self.db.query(&sql, vals![since_ms], alert_row)
    }

    /// Every active alert (loaded onto the shards at start).
    pub fn active_alerts(&self) -> Result<Vec<AlertRow>, StoreError> {
        let sql =
            format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE status = 'active' AND deleted_ms IS NULL ORDER BY id");
        self.db.query(&sql, &[], alert_row)
    }

    /// Persists a batch of firings in one transaction: each alert's count, last time and
    /// status, an `alert.triggered` inbox entry with the event body, the webhook delivery when
    /// the alert has a URL and, with Telegram on, a message to the account's chat. Firings of
    /// deleted alerts are skipped. Returns the rows after the update, for delivery.
    pub fn record_firings(
        &mut self,
        firings: &[FiringRecord],
        texts: &dyn Render,
    ) -> Result<Vec<(AlertRow, FiringRecord)>, StoreError> {
        let (db, telegram) = (&self.db, self.telegram);
        let update = format!(
            "UPDATE alerts SET trigger_count = trigger_count + 1, last_triggered_ms = ?2,
                status = CASE WHEN ?3 THEN 'triggered' ELSE status END
             WHERE id = ?1 AND deleted_ms IS NULL AND (status = 'active' OR NOT ?3) RETURNING {ALERT_COLUMNS}"
        );
        // Each step's statements go as one pipelined batch (one round trip on PostgreSQL).
        db.in_transaction_of(|| {
            self.check_fence()?;
            let sets: Vec<_> = firings.iter().map(|f| vals![f.alert_id, f.ts_ms, f.last].to_vec()).collect();
            let rows = db.query_opt_each(&update, &sets, alert_row)?;
            let done: Vec<(AlertRow, FiringRecord)> =
                rows.into_iter().zip(firings).filter_map(|(row, f)| Some((row?, *f))).collect();
            // A one-shot's firing ends it (and only its first: the update skips one already
            // triggered, so a second firing of it is recorded nowhere).
            self.release_active(done.iter().filter(|(_, f)| f.last).map(|(row, _)| row.account_id))?;
            let bodies: Vec<String> = done.iter().map(|(row, f)| texts.alert_fired(row, f)).collect();
            let inbox: Vec<_> = done
                .iter()
                .zip(&bodies)
                .map(|((row, f), body)| vals![row.account_id, row.id, body, f.ts_ms].to_vec())
                .collect();
            db.execute_each(
                "INSERT INTO inbox (account_id, kind, alert_id, body, created_ms) VALUES (?1, 'alert.triggered', ?2, ?3, ?4)",
                &inbox,
            )?;
            // The webhook is in addition to the inbox, in the same transaction: a firing
            // that is recorded is also queued for delivery (at least once).
            let outbox: Vec<_> = done
                .iter()
                .zip(&bodies)
                .filter_map(|((row, f), body)| {
                    Some(vals![row.id, row.account_id, row.webhook_url.as_ref()?, body, f.ts_ms].to_vec())
                })
                .collect();
            db.execute_each(
                "INSERT INTO outbox (alert_id, account_id, url, body, trigger_ms, state, attempts, next_attempt_ms, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?5, ?5)",
                &outbox,
            )?;
            if telegram {
                for (row, f) in &done {
                    let text = || texts.telegram_alert_fired(row, f);
                    queue_telegram(db, texts, row.account_id, row.id, text, f.ts_ms)?;
                }
            }
            Ok(done)
        })
    }

    /// Pending deliveries due at `now_ms`, round-robin across accounts: every account's soonest
    /// due row first, then every account's second, and so on; at most `limit` rows, at most
    /// [`DUE_PER_ACCOUNT_MAX`] of one account, and at most `limit` accounts looked at (lowest ids
    /// first; the others are looked at in later scans, as earlier ones' rows are settled).
    ///
    /// Rationale: ordering by due time alone let one account's thousands of due rows fill the
    /// whole scan, so another account's row was not even seen until they drained. Each account is
    /// found and read by an index seek (`outbox_pending_account`), so the cost follows the
    /// accounts and rows returned, not the size of the backlog.
    pub fn due_deliveries(&self, now_ms: i64, limit: u32) -> Result<Vec<OutboxRow>, StoreError> {
        let accounts = self.pending_accounts(limit as usize)?;
        let per_account = (limit as usize / accounts.len().max(1)).clamp(1, DUE_PER_ACCOUNT_MAX as usize);
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE state = 'pending' AND account_id = ?1 AND next_attempt_ms <= ?2
             ORDER BY next_attempt_ms, id LIMIT ?3"
        );
        let mut queues = Vec::with_capacity(accounts.len());
        for account in accounts {
            let rows = self.db.query(&sql, vals![account, now_ms, per_account as i64], outbox_row)?;
            if !rows.is_empty() {
                queues.push(rows.into_iter());
            }
        }
        Ok(round_robin(queues, limit as usize))
    }

    /// Accounts with pending deliveries (due or not), lowest id first, at most `max`.
    fn pending_accounts(&self, max: usize) -> Result<Vec<i64>, StoreError> {
        let mut accounts = Vec::new();
        let mut after = i64::MIN;
        while accounts.len() < max {
            let next = self.db.query_opt(
                "SELECT account_id FROM outbox WHERE state = 'pending' AND account_id > ?1 ORDER BY account_id LIMIT 1",
                vals![after],
                |r| r.get::<i64>(0),
            )?;
            let Some(next) = next else { break };
            accounts.push(next);
            after = next;
        }
        Ok(accounts)
    }

    /// The soonest time a pending delivery is due, if any.
    pub fn next_delivery_ms(&self) -> Result<Option<i64>, StoreError> {
        self.db.query_one("SELECT MIN(next_attempt_ms) FROM outbox WHERE state = 'pending'", &[], |r| r.get(0))
    }

    /// Records several attempts' outcomes in one transaction, each at its own time: delivered,
    /// rescheduled per [`next_attempt_ms`], or failed for good after the third attempt. For each
    /// outcome, in order, the time its delivery is due again when it was rescheduled. On an
    /// error nothing is recorded.
    pub fn record_attempts(&self, outcomes: &[Outcome]) -> Result<Vec<Option<i64>>, StoreError> {
        self.db.in_transaction_of(|| {
            self.lock_outbox_rows(outcomes.iter().map(|o| o.id))?;
            // Deliveries are one statement each, sent as one pipelined batch; failures read the
            // row's attempts first, so they go one by one.
            let delivered: Vec<_> = outcomes
                .iter()
                .filter_map(|o| match o.result {
                    AttemptResult::Delivered { status } => Some(vals![o.id, i64::from(status), o.at_ms].to_vec()),
                    AttemptResult::Failed { .. } => None,
                })
                .collect();
            self.db.execute_each(DELIVERED_SQL, &delivered)?;
            let mut due = Vec::with_capacity(outcomes.len());
            for o in outcomes {
                due.push(match &o.result {
                    AttemptResult::Failed { status, error, .. } => {
                        self.record_failure(o.id, *status, error, o.at_ms)?
                    }
                    AttemptResult::Delivered { .. } => None,
                });
            }
            let failed_first = outcomes.iter().filter(|o| matches!(o.result, AttemptResult::Failed { .. }));
            let logged: Vec<&Outcome> = failed_first
                .chain(outcomes.iter().filter(|o| matches!(o.result, AttemptResult::Delivered { .. })))
                .collect();
            self.log_attempts(&logged)?;
            Ok(due)
        })
    }

    /// Locks outbox rows (PostgreSQL; SQLite's write lock serializes every writer) in ascending
    /// id order, as every other multi-row writer of the outbox (the publisher's marks) takes
    /// them: two transactions that both change rows of one batch wait for each other instead of
    /// deadlocking (which aborted one, and a worker's outcomes were then sent again).
    fn lock_outbox_rows(&self, ids: impl Iterator<Item = i64>) -> Result<(), StoreError> {
        if !self.db.is_postgres() {
            return Ok(());
        }
        let mut ids: Vec<i64> = ids.collect();
        ids.sort_unstable();
        ids.dedup();
        let sets: Vec<_> = ids.iter().map(|id| vals![*id].to_vec()).collect();
        self.db.query_opt_each("SELECT id FROM outbox WHERE id = ?1 FOR UPDATE", &sets, |r| r.get::<i64>(0))?;
        Ok(())
    }

    /// Adds attempts of webhook deliveries (each already counted in its delivery's `attempts`)
    /// to their alerts' delivery logs, keeping the newest [`ATTEMPTS_PER_ALERT_MAX`] of each
    /// alert and nothing older than [`DELIVERY_LOG_KEEP_MS`]; each step's statements pipelined
    /// (three round trips for the lot on PostgreSQL). Telegram messages have no log.
    fn log_attempts(&self, outcomes: &[&Outcome]) -> Result<(), StoreError> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let rows: Vec<_> = outcomes
            .iter()
            .map(|o| {
                let (status, error) = match &o.result {
                    AttemptResult::Delivered { status } => (Some(i64::from(*status)), None),
                    AttemptResult::Failed { status, error, .. } => (status.map(i64::from), Some(error.as_str())),
                };
                vals![o.id, o.at_ms, o.result.outcome(), status, o.latency_ms, error].to_vec()
            })
            .collect();
        let added = self.db.execute_each(
            "INSERT INTO attempts (outbox_id, alert_id, trigger_ms, attempt, at_ms, outcome, status, latency_ms, error)
             SELECT id, alert_id, trigger_ms, attempts, ?2, ?3, ?4, ?5, ?6 FROM outbox WHERE id = ?1 AND channel = 'webhook'",
            &rows,
        )?;
        let trims: Vec<_> = outcomes
            .iter()
            .zip(&added)
            .filter(|(_, &n)| n > 0)
            .map(|(o, _)| vals![o.id, ATTEMPTS_PER_ALERT_MAX].to_vec())
            .collect();
        if trims.is_empty() {
            return Ok(());
        }
        self.db.execute_each(
            "DELETE FROM attempts WHERE alert_id = (SELECT alert_id FROM outbox WHERE id = ?1) AND id <= (
                SELECT a.id FROM attempts a WHERE a.alert_id = (SELECT alert_id FROM outbox WHERE id = ?1)
                ORDER BY a.id DESC LIMIT 1 OFFSET ?2)",
            &trims,
        )?;
        let newest = outcomes.iter().map(|o| o.at_ms).max().unwrap_or(0);
        self.db.execute("DELETE FROM attempts WHERE at_ms < ?1", vals![newest - DELIVERY_LOG_KEEP_MS])?;
        Ok(())
    }

    /// The delivery log of `account_id`'s alert `alert_id`, newest first, at most `limit` rows:
    /// every attempt of the last 7 days and every delivery not attempted yet (`pending`, at its
    /// due time). `None` when the account has no such alert (or it was deleted, expired or
    /// delisted: a deleted alert is gone, its log with it).
    pub fn delivery_log(
        &self,
        account_id: i64,
        alert_id: i64,
        limit: u32,
    ) -> Result<Option<Vec<DeliveryLogRow>>, StoreError> {
        let owned = self.db.query_opt(
            "SELECT id FROM alerts WHERE id = ?1 AND account_id = ?2 AND deleted_ms IS NULL",
            vals![alert_id, account_id],
            |r| r.get::<i64>(0),
        )?;
        if owned.is_none() {
            return Ok(None);
        }
        let row = |r: &Row<'_>| {
            Ok(DeliveryLogRow {
                trigger_ms: r.get(0)?,
                attempt: r.get(1)?,
                at_ms: r.get(2)?,
                outcome: r.get(3)?,
                status: r.get(4)?,
                latency_ms: r.get(5)?,
                error: r.get(6)?,
            })
        };
        let mut rows = self.db.query(
            "SELECT trigger_ms, attempts + 1, next_attempt_ms, 'pending', NULL, NULL, NULL FROM outbox
             WHERE alert_id = ?1 AND channel = 'webhook' AND state = 'pending'",
            vals![alert_id],
            row,
        )?;
        rows.extend(self.db.query(
            "SELECT trigger_ms, attempt, at_ms, outcome, status, latency_ms, error FROM attempts
             WHERE alert_id = ?1 ORDER BY id DESC LIMIT ?2",
            vals![alert_id, i64::from(limit)],
            row,
        )?);
        rows.sort_by_key(|r| std::cmp::Reverse(r.at_ms));
        rows.truncate(limit as usize);
        Ok(Some(rows))
    }

    /// Queues the webhook of `account_id`'s alert `alert_id` fired at `trigger_ms` again: a new
    /// delivery with the same body, the same pair and the §6 schedule, when the firing is at
    /// most 7 days old (at `now_ms`) and no delivery of it is still pending.
    pub fn redeliver(
        &self,
        account_id: i64,
        alert_id: i64,
        trigger_ms: i64,
        now_ms: i64,
    ) -> Result<Redelivery, StoreError> {
        let rows = self.db.query(
            "SELECT o.state, o.url, o.body FROM outbox o JOIN alerts a ON a.id = o.alert_id
             WHERE o.alert_id = ?1 AND a.account_id = ?2 AND a.deleted_ms IS NULL AND o.trigger_ms = ?3
                AND o.channel = 'webhook'
             ORDER BY o.id DESC",
            vals![alert_id, account_id, trigger_ms],
            |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.get::<String>(2)?)),
        )?;
        let Some((_, url, body)) = rows.first() else { return Ok(Redelivery::Unknown) };
        if trigger_ms < now_ms - DELIVERY_LOG_KEEP_MS {
            return Ok(Redelivery::Unknown);
        }
        if rows.iter().any(|(state, _, _)| state == "pending") {
            return Ok(Redelivery::Pending);
        }
        self.db.execute(
            "INSERT INTO outbox (alert_id, account_id, url, body, trigger_ms, state, attempts, next_attempt_ms, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, ?6)",
            vals![alert_id, account_id, url, body, trigger_ms, now_ms],
        )?;
        Ok(Redelivery::Queued)
    }

    /// Records a failed attempt of delivery `id` at `now_ms`: rescheduled (the time it is due
    /// again) or failed for good (`None`).
    fn record_failure(
        &self,
        id: i64,
        status: Option<u16>,
        error: &str,
        now_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let (attempts, first): (i64, Option<i64>) =
            self.db.query_one("SELECT attempts, first_failure_ms FROM outbox WHERE id = ?1", vals![id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let attempts = attempts + 1;
        let first = first.unwrap_or(now_ms);
        let status = status.map(i64::from);
        match next_attempt_ms(attempts, first) {
            Some(next) => {
                self.db.execute(
                    "UPDATE outbox SET attempts = ?2, first_failure_ms = ?3, next_attempt_ms = ?4, last_status = ?5,
                        last_error = ?6 WHERE id = ?1",
                    vals![id, attempts, first, next, status, error],
                )?;
                Ok(Some(next))
            }
            None => {
                self.db.execute(
                    "UPDATE outbox SET state = 'failed', attempts = ?2, first_failure_ms = ?3, last_status = ?4,
                        last_error = ?5, done_ms = ?6 WHERE id = ?1",
                    vals![id, attempts, first, status, error, now_ms],
                )?;
                tracing::warn!(delivery = id, attempts, "webhook failed for good: {error}");
                Ok(None)
            }
        }
    }

    /// Pending outbox rows not yet handed to the firings stream, oldest first, at most `limit`.
    pub fn unpublished(&self, limit: u32) -> Result<Vec<Unpublished>, StoreError> {
        self.db.query(
            "SELECT id, alert_id, trigger_ms, channel FROM outbox
             WHERE published_ms IS NULL AND state = 'pending' ORDER BY id LIMIT ?1",
            vals![i64::from(limit)],
            |r| {
                Ok(Unpublished {
                    id: r.get(0)?,
                    alert_id: r.get(1)?,
                    trigger_ms: r.get(2)?,
                    channel: channel_column(r, 3)?,
                })
            },
        )
    }

    /// Marks rows as handed to the firings stream at `now_ms`, in one transaction.
    pub fn mark_published(&mut self, ids: &[i64], now_ms: i64) -> Result<(), StoreError> {
        // One statement per row, pipelined (one round trip for the lot on PostgreSQL), in
        // ascending id order (see `lock_outbox_rows`).
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        let sets: Vec<_> = ids.iter().map(|id| vals![*id, now_ms].to_vec()).collect();
        self.db.in_transaction_of(|| {
            self.db.execute_each("UPDATE outbox SET published_ms = ?2 WHERE id = ?1", &sets)?;
            Ok(())
        })
    }

    /// One outbox row by id.
    pub fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>, StoreError> {
        let sql = format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?1");
        self.db.query_opt(&sql, vals![id], outbox_row)
    }

    /// Several deliveries by id, in order (one pipelined round trip on PostgreSQL).
    pub fn outbox_rows(&self, ids: &[i64]) -> Result<Vec<Option<OutboxRow>>, StoreError> {
        let sql = format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?1");
        let sets: Vec<_> = ids.iter().map(|id| vals![*id].to_vec()).collect();
        self.db.query_opt_each(&sql, &sets, outbox_row)
    }

    /// Every webhook delivery of an API alert, by id (tests and diagnostics; Telegram rows are
    /// left out: a site alert's id may equal an API alert's).
    pub fn deliveries_of(&self, alert_id: i64) -> Result<Vec<OutboxRow>, StoreError> {
        let sql =
            format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE alert_id = ?1 AND channel = 'webhook' ORDER BY id");
        self.db.query(&sql, vals![alert_id], outbox_row)
    }

    /// Active alerts whose `expires_at` has passed at `now_ms`, oldest expiry first, at most
    /// `limit` (the writer ends them with [`Store::expire`]).
    pub fn expired_alerts(&self, now_ms: i64, limit: u32) -> Result<Vec<AlertRow>, StoreError> {
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE expires_ms <= ?1 AND status = 'active' AND deleted_ms IS NULL
             ORDER BY expires_ms, id LIMIT ?2"
        );
        self.db.query(&sql, vals![now_ms, i64::from(limit)], alert_row)
    }

    /// Ends the alerts `ids` that are still active (`decisions.md` §13: removed like a delisted
    /// one) and writes an `alert.expired` notice to each owner's inbox (and, with Telegram on,
    /// their chat), in one transaction; never a webhook. Returns the alerts ended.
    pub fn expire(&mut self, ids: &[i64], now_ms: i64, texts: &dyn Render) -> Result<Vec<AlertRow>, StoreError> {
        let (db, telegram) = (&self.db, self.telegram);
        let sql = format!(
            "UPDATE alerts SET deleted_ms = ?2
             WHERE id = ?1 AND status = 'active' AND deleted_ms IS NULL RETURNING {ALERT_COLUMNS}"
        );
        db.in_transaction_of(|| {
            self.check_fence()?;
            let sets: Vec<_> = ids.iter().map(|id| vals![*id, now_ms].to_vec()).collect();
            let rows: Vec<AlertRow> = db.query_opt_each(&sql, &sets, alert_row)?.into_iter().flatten().collect();
            self.release_active(rows.iter().map(|r| r.account_id))?;
            for row in &rows {
                let body = texts.alert_expired(row, now_ms);
                db.execute(
                    "INSERT INTO inbox (account_id, kind, alert_id, body, created_ms) VALUES (?1, 'alert.expired', ?2, ?3, ?4)",
                    vals![row.account_id, row.id, &body, now_ms],
                )?;
                if telegram {
                    let text = || texts.telegram_alert_expired(row);
                    queue_telegram(db, texts, row.account_id, row.id, text, now_ms)?;
                }
            }
            Ok(rows)
        })
    }

    /// Removes every active alert of a delisted pair and writes an `alert.delisted` notice to
    /// each owner's inbox (and, with Telegram on, their chat), in one transaction. Returns the alert ids removed.
    pub fn delist(
        &mut self,
        exchange: Venue,
        symbol: &str,
        now_ms: i64,
        texts: &dyn Render,
    ) -> Result<Vec<i64>, StoreError> {
        let (db, telegram) = (&self.db, self.telegram);
        let sql = format!(
            "UPDATE alerts SET deleted_ms = ?3
             WHERE exchange = ?1 AND symbol = ?2 AND status = 'active' AND deleted_ms IS NULL RETURNING {ALERT_COLUMNS}"
        );
        db.in_transaction_of(|| {
            self.check_fence()?;
            let mut rows = db.query(&sql, vals![exchange.as_str(), symbol, now_ms], alert_row)?;
            rows.sort_by_key(|r| r.id);
            self.release_active(rows.iter().map(|r| r.account_id))?;
            for row in &rows {
                let body = texts.alert_delisted(row, now_ms);
                db.execute(
                    "INSERT INTO inbox (account_id, kind, alert_id, body, created_ms) VALUES (?1, 'alert.delisted', ?2, ?3, ?4)",
                    vals![row.account_id, row.id, &body, now_ms],
                )?;
                if telegram {
                    let text = || texts.telegram_alert_delisted(row);
                    queue_telegram(db, texts, row.account_id, row.id, text, now_ms)?;
                }
            }
            Ok(rows.iter().map(|r| r.id).collect())
        })
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

fn inbox_row(r: &Row<'_>) -> Result<InboxRow, StoreError> {
    Ok(InboxRow { id: r.get(0)?, kind: r.get(1)?, alert_id: r.get(2)?, body: r.get(3)?, created_ms: r.get(4)? })
}

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

/// Takes one item of each queue in turn, then the next of each, until `limit` or all are taken.
fn round_robin<T>(mut queues: Vec<std::vec::IntoIter<T>>, limit: usize) -> Vec<T> {
    let mut out = Vec::new();
    while out.len() < limit && !queues.is_empty() {
        queues.retain(|q| q.len() > 0);
        for q in &mut queues {
            if out.len() >= limit {
                break;
            }
            if let Some(item) = q.next() {
                out.push(item);
            }
        }
    }
    out
}

fn key_row(r: &Row<'_>) -> Result<KeyRow, StoreError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Texts;

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

    fn alert(account_id: i64, exchange: &str, symbol: &str) -> NewAlert {
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
        }
    }

    #[test]
    fn telegram_messages_are_queued_for_accounts_with_a_chat() {
        on_each_backend("telegram", |at| {
            let mut s = at.open().with_telegram(true);
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let b = s.create_account_with_key("developer", None, 1).expect("b").account_id;
            s.set_telegram_chat(a, Some("-100123")).expect("chat");
            let mut with_hook = alert(a, "binance", "BTCUSDT");
            with_hook.webhook_url = Some("https://example.com/h".into());
            with_hook.note = "breakout".into();
            let ida = s.insert_alert(&with_hook).expect("insert").id;
            let idb = s.insert_alert(&alert(b, "binance", "BTCUSDT")).expect("insert").id;
            let fire = |id| FiringRecord { alert_id: id, price: 300, move_hundredths: None, ts_ms: 7_000, last: false };
            s.record_firings(&[fire(ida), fire(idb)], &Texts).expect("record");
            let due = s.due_deliveries(7_000, 100).expect("due");
            let channels: Vec<(i64, Channel)> = due.iter().map(|r| (r.alert_id, r.channel)).collect();
            assert_eq!(channels, [(ida, Channel::Webhook), (ida, Channel::Telegram)], "b has no chat");
            let tg = &due[1];
            assert_eq!((tg.url.as_str(), tg.account_id, tg.next_attempt_ms), ("-100123", a, 7_000));
            let body: serde_json::Value = serde_json::from_str(&tg.body).expect("json");
            assert_eq!(body["chat_id"], -100_123);
            let text = body["text"].as_str().unwrap_or_default();
            assert!(text.starts_with("BTCUSDT · binance\nprice alert #"), "{text}");
            assert!(text.contains("above 0.000002 — traded at 0.000003") && text.ends_with("Note: breakout"), "{text}");
            // The webhook listing of the alert has its webhook only.
            assert_eq!(s.deliveries_of(ida).expect("rows").len(), 1);
            // A delisting reaches the chat too; b still has none.
            let sol = s.insert_alert(&alert(a, "binance", "SOLUSDT")).expect("insert").id;
            s.insert_alert(&alert(b, "binance", "SOLUSDT")).expect("insert");
            s.delist(Venue::Binance, "SOLUSDT", 8_000, &Texts).expect("delist");
            let due = s.due_deliveries(8_000, 100).expect("due");
            assert_eq!(due.len(), 3);
            assert_eq!((due[2].alert_id, due[2].channel), (sol, Channel::Telegram));
            assert!(due[2].body.contains("The pair was delisted: price alert #"), "{}", due[2].body);
            // Without the bot configured nothing is queued for the chat.
            let mut off = at.open();
            off.record_firings(&[fire(ida)], &Texts).expect("record");
            assert_eq!(off.due_deliveries(9_000, 100).expect("due").len(), 4, "one more webhook, no message");
        });
    }

    /// The cap's count is kept where alerts change, never recounted: after every way an alert
    /// starts or stops being active it equals a count of the rows, per account, on both
    /// backends; a one-shot's second firing is recorded nowhere and takes nothing off.
    #[test]
    fn active_counts_follow_every_change_of_status() {
        on_each_backend("active-count", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let b = s.create_account_with_key("developer", None, 1).expect("b").account_id;
            let counted = |s: &Store, account: i64| -> u64 {
                let n: i64 = s
                    .db
                    .query_one(
                        "SELECT COUNT(*) FROM alerts WHERE account_id = ?1 AND status = 'active' AND deleted_ms IS NULL",
                        vals![account],
                        |r| r.get(0),
                    )
                    .expect("count");
                n.unsigned_abs()
            };
            let check = |s: &Store, step: &str, want: (u64, u64)| {
                let kept = (s.active_price_alerts(a).expect("a"), s.active_price_alerts(b).expect("b"));
                assert_eq!(kept, want, "{step}: kept counts");
                assert_eq!(kept, (counted(s, a), counted(s, b)), "{step}: kept against counted");
            };
            let one_shot = |account| NewAlert { repeat: false, ..alert(account, "binance", "BTCUSDT") };
            let ids: Vec<i64> =
                [a, a, a, a, b, b].iter().map(|&acc| s.insert_alert(&one_shot(acc)).expect("insert").id).collect();
            let repeating = s.insert_alert(&alert(a, "binance", "ETHUSDT")).expect("insert").id;
            let listed_off = s.insert_alert(&alert(b, "okx", "SOLUSDT")).expect("insert").id;
            check(&s, "inserted", (5, 3));
            let fire = |id, last| FiringRecord { alert_id: id, price: 300, move_hundredths: None, ts_ms: 7_000, last };
            let done = s.record_firings(&[fire(ids[0], true), fire(ids[4], true), fire(repeating, false)], &Texts);
            assert_eq!(done.expect("record").len(), 3);
            check(&s, "fired", (4, 2));
            let again = s.record_firings(&[fire(ids[0], true)], &Texts).expect("record");
            assert!(again.is_empty(), "a one-shot fires once: {again:?}");
            check(&s, "fired again", (4, 2));
            assert!(s.delete_alert(a, ids[1], 8_000).expect("delete").is_some());
            assert!(s.delete_alert(a, ids[0], 8_000).expect("delete triggered").is_some());
            assert!(s.delete_alert(a, ids[1], 8_000).expect("delete twice").is_none());
            check(&s, "deleted", (3, 2));
            assert_eq!(s.expire(&[ids[2], ids[0]], 9_000, &Texts).expect("expire").len(), 1);
            check(&s, "expired", (2, 2));
            assert_eq!(s.delist(Venue::Okx, "SOLUSDT", 9_500, &Texts).expect("delist"), [listed_off]);
            check(&s, "delisted", (2, 1));
            s.forget_alert(ids[3]).expect("forget");
            s.forget_alert(ids[4]).expect("forget a triggered one");
            check(&s, "forgotten", (1, 1));
        });
    }

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

    #[test]
    fn delisting_removes_alerts_and_notifies_their_owners() {
        on_each_backend("delist", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let b = s.create_account_with_key("developer", None, 1).expect("b").account_id;
            let gone1 = s.insert_alert(&alert(a, "binance", "SOLUSDT")).expect("insert").id;
            let gone2 = s.insert_alert(&alert(b, "binance", "SOLUSDT")).expect("insert").id;
            let other_venue = s.insert_alert(&alert(a, "okx", "SOLUSDT")).expect("insert").id;
            let other_pair = s.insert_alert(&alert(a, "binance", "ETHUSDT")).expect("insert").id;
            let mut removed = s.delist(Venue::Binance, "SOLUSDT", 5_000, &Texts).expect("delist");
            removed.sort();
            assert_eq!(removed, [gone1, gone2]);
            let left: Vec<i64> = s.list_alerts(a, StatusFilter::All).expect("list").iter().map(|r| r.id).collect();
            assert_eq!(left, [other_venue, other_pair]);
            assert!(s.list_alerts(b, StatusFilter::All).expect("list").is_empty());
            for (account, id) in [(a, gone1), (b, gone2)] {
                let inbox = s.inbox(account, i64::MAX, 10).expect("inbox");
                assert_eq!(inbox.len(), 1);
                assert_eq!(
                    (inbox[0].kind.as_str(), inbox[0].alert_id, inbox[0].created_ms),
                    ("alert.delisted", Some(id), 5_000)
                );
                let body: serde_json::Value = serde_json::from_str(&inbox[0].body).expect("json");
                assert_eq!(body["alert"]["symbol"], "SOLUSDT");
            }
            // A firing that raced the delisting is not recorded.
            let f = FiringRecord { alert_id: gone1, price: 300, move_hundredths: None, ts_ms: 6_000, last: false };
            assert!(s.record_firings(&[f], &Texts).expect("record").is_empty());
        });
    }

    /// Stored fields that need escaping (a quote, a backslash, a control character) still give
    /// a valid `alert.delisted` body that reads back as the same strings.
    #[test]
    fn delisted_body_escapes_every_field() {
        on_each_backend("delist-escape", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let symbol = "EVIL\"},\"x\":\\\u{1}";
            let id = s.insert_alert(&alert(a, "binance", symbol)).expect("insert").id;
            assert_eq!(s.delist(Venue::Binance, symbol, 5_000, &Texts).expect("delist"), [id]);
            let inbox = s.inbox(a, i64::MAX, 10).expect("inbox");
            let body: serde_json::Value = serde_json::from_str(&inbox[0].body).expect("a valid JSON body");
            assert_eq!(body["alert"]["symbol"], symbol);
            assert_eq!(body["alert"]["exchange"], "binance");
            assert_eq!(body["alert"]["id"], id);
            assert_eq!(body["event"], "alert.delisted");
            assert_eq!(body.as_object().map(|o| o.len()), Some(3));
        });
    }

    #[test]
    fn a_data_directory_is_locked_by_one_holder_at_a_time() {
        let dir = temp_dir("lock");
        let first = DataDirLock::acquire(&dir).expect("first lock");
        match DataDirLock::acquire(&dir) {
            Err(LockError::Held(p)) => assert_eq!(p, first.path()),
            other => panic!("a second holder must be refused, got {other:?}"),
        }
        drop(first);
        DataDirLock::acquire(&dir).expect("free again once the first is dropped");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A stored alert reads back as the same typed record; a stored value this build does not
    /// write (a direction, a status, a venue, a missing level) is an error, never a default.
    #[test]
    fn alert_records_map_to_columns_one_way_and_back_strictly() {
        on_each_backend("typed", |at| {
            let mut s = at.open();
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            let pct = Condition::Pct { dir: Move::Down, millionths: 3_004_000, window: Timeframe::H4 };
            let new = NewAlert { condition: pct, exchange: Venue::Okx, ..alert(a, "binance", "ETHUSDT") };
            let row = s.insert_alert(&new).expect("insert");
            assert_eq!((row.condition, row.exchange, row.status), (pct, Venue::Okx, AlertStatus::Active));
            assert_eq!(row.spec().map(|x| x.condition), Some(pct));
            for (column, value) in [
                ("direction", "'sideways'"),
                ("status", "'paused'"),
                ("exchange", "'kraken'"),
                ("\"window\"", "'3h'"),
                ("kind", "'limit'"),
                ("pct_millionths", "NULL"),
            ] {
                let sql = format!("UPDATE alerts SET {column} = {value} WHERE id = ?1");
                type Saved = (String, String, String, Option<String>, String, Option<i64>);
                let saved: Saved = s
                    .db
                    .query_one(
                        "SELECT direction, status, exchange, \"window\", kind, pct_millionths FROM alerts WHERE id = ?1",
                        vals![row.id],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
                    )
                    .expect("read");
                s.db.execute(&sql, vals![row.id]).expect("corrupt one column");
                let read = s.list_alerts(a, StatusFilter::All);
                assert!(read.is_err(), "{column} = {value} must not read back: {read:?}");
                s.db.execute(
                    "UPDATE alerts SET direction = ?2, status = ?3, exchange = ?4, \"window\" = ?5, kind = ?6, pct_millionths = ?7 WHERE id = ?1",
                    vals![row.id, &saved.0, &saved.1, &saved.2, saved.3.as_deref(), &saved.4, saved.5],
                )
                .expect("restore");
                assert_eq!(s.list_alerts(a, StatusFilter::All).expect("restored").len(), 1);
            }
        });
    }

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

    /// Market nodes: any number (a partition's standbys too), all of one partition count, and
    /// never beside a single-process server; each refusal says which it is.
    #[test]
    fn market_nodes_share_the_database_with_one_partition_count() {
        let url = fresh_postgres_schema();
        let refused = |r: Result<ServerLock, LockError>| r.err().map(|e| e.to_string()).unwrap_or_default();
        let _zero = ServerLock::acquire_partition(&url, 2).expect("0/2");
        let _one = ServerLock::acquire_partition(&url, 2).expect("1/2 beside it");
        let _standby = ServerLock::acquire_partition(&url, 2).expect("a standby of 1/2");
        assert!(refused(ServerLock::acquire_partition(&url, 3)).contains("another partition count"));
        assert!(refused(ServerLock::acquire(&StoreLocation::Postgres(url.clone()))).contains("market nodes"));
        drop((_zero, _one, _standby));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let single = loop {
            match ServerLock::acquire(&StoreLocation::Postgres(url.clone())) {
                Ok(l) => break l,
                Err(e) => assert!(std::time::Instant::now() < deadline, "a single process alone: {e}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(refused(ServerLock::acquire_partition(&url, 2)).contains("single-process"));
        drop(single);
        // The server lets go of a closed connection's locks a moment after it closed.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while let Err(e) = ServerLock::acquire_partition(&url, 3) {
            assert!(std::time::Instant::now() < deadline, "a new count once the old nodes are gone: {e}");
            std::thread::sleep(Duration::from_millis(50));
        }
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
        let firing = FiringRecord { alert_id: id, price: 100_000_000, move_hundredths: None, ts_ms: 1, last: false };
        old.record_firings(&[firing], &crate::text::Texts).expect("the owner records");
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(b.claim_partition("0/2", "b", 300).expect("claim"), Some(2), "expired: the next epoch");
        assert!(!a.renew_partition("0/2", "a", 1, 300).expect("renew"), "the old holder learns it lost");
        let refused = old.record_firings(&[FiringRecord { ts_ms: 2, ..firing }], &crate::text::Texts);
        assert!(matches!(refused, Err(StoreError::Fenced)), "{refused:?}");
        b.release_partition("0/2", "b", 2).expect("release");
        assert!(b.partition_lease("0/2").expect("read").expect("a lease").expires_in_ms < 0, "released");
    }

    /// Two api nodes creating for one account at once: the second counts after the first
    /// commits (the account's row lock), so a cap of 1 admits one of them.
    #[test]
    fn a_cap_holds_across_two_postgres_connections() {
        let at = TestDb::Postgres(fresh_postgres_schema());
        let mut first = at.open();
        let a = first.create_account_with_key("developer", None, 1).expect("a").account_id;
        first.begin_group().expect("group");
        first.begin_job().expect("job");
        assert_eq!(first.active_price_alerts(a).expect("count"), 0);
        first.insert_alert(&alert(a, "binance", "BTCUSDT")).expect("insert");
        let url = match &at {
            TestDb::Postgres(url) => url.clone(),
            TestDb::Sqlite(_) => unreachable!(),
        };
        let (counting, counted) = std::sync::mpsc::channel();
        let second = std::thread::spawn(move || {
            let mut s = Store::open_postgres(&url).expect("open");
            s.begin_group().expect("group");
            counting.send(()).expect("signal");
            let n = s.active_price_alerts(a).expect("count");
            s.commit_group().expect("commit");
            n
        });
        counted.recv().expect("the second connection is about to count");
        std::thread::sleep(Duration::from_millis(200));
        first.end_job(true).expect("end");
        first.commit_group().expect("commit");
        assert_eq!(second.join().expect("second"), 1, "counted after the first insert was committed");
    }

    /// The cluster's publisher reads each pending row once: marked rows are not read again.
    #[test]
    fn outbox_rows_are_handed_to_the_stream_once() {
        on_each_backend("publish", |at| {
            let mut s = at.open().with_telegram(true);
            let a = s.create_account_with_key("developer", None, 1).expect("a").account_id;
            s.set_telegram_chat(a, Some("42")).expect("chat");
            let mut hooked = alert(a, "binance", "BTCUSDT");
            hooked.webhook_url = Some("https://example.com/h".into());
            let id = s.insert_alert(&hooked).expect("insert").id;
            let f = FiringRecord { alert_id: id, price: 300, move_hundredths: None, ts_ms: 7_000, last: false };
            s.record_firings(&[f], &Texts).expect("record");
            let rows = s.unpublished(10).expect("unpublished");
            let ids: Vec<String> = rows.iter().map(Unpublished::message_id).collect();
            assert_eq!(ids, [format!("{id}:7000"), format!("telegram:{}", rows[1].id)]);
            s.mark_published(&[rows[0].id], 8_000).expect("mark");
            assert_eq!(s.unpublished(10).expect("unpublished"), [rows[1]]);
            let row = s.outbox_row(rows[0].id).expect("read").expect("the row");
            assert_eq!((row.state.as_str(), row.alert_id, row.channel), ("pending", id, Channel::Webhook));
            assert_eq!(s.outbox_row(rows[1].id + 1).expect("read"), None);
        });
    }

    #[test]
    fn create_lookup_revoke_round_trip() {
        on_each_backend("keys", |at| {
            let mut s = at.open();
            let known = if s.is_postgres() { PG_MIGRATIONS.len() } else { MIGRATIONS.len() };
            assert_eq!(s.schema_version().expect("v"), known as u32);
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
