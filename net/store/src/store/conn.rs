//! The connection: [`Store`] on SQLite or PostgreSQL, where it lives ([`StoreLocation`]),
//! opening it (the schema brought up to date), and its transactions: groups of jobs, each job
//! kept or undone alone, the group committed once. The table families' files add their own
//! `impl Store` blocks.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::db::{vals, Db, StoreError};

/// A stored value this build does not write.
#[derive(Debug)]
pub(super) struct UnknownStoredValue(pub(super) String);

impl fmt::Display for UnknownStoredValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown stored value: {}", self.0)
    }
}

impl std::error::Error for UnknownStoredValue {}

pub(super) fn unknown(what: String) -> StoreError {
    StoreError::Corrupt(UnknownStoredValue(what).to_string())
}

/// The owner a writer's store writes for: a write is refused with [`StoreError::Fenced`] (`owner`) once
/// the partition's row has another epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    /// The partition, as `index/count`.
    pub partition: String,
    /// The epoch this node claimed.
    pub epoch: i64,
}

/// A connection to the database.
pub struct Store {
    pub(super) db: Db,
    /// The SQLite file, or for PostgreSQL a description without the URL (which may hold a
    /// password).
    pub(super) path: PathBuf,
    /// Firings and delistings also queue a Telegram message for accounts with a chat
    /// ([`Store::with_telegram`]; the writer's store, when the operator configured the bot).
    pub(super) telegram: bool,
    /// The partition owner a market node's writer writes for ([`Store::with_fence`]).
    pub(super) fence: Option<Fence>,
    /// Stamps the outbox rows of the firings it records with when it commits them
    /// ([`Store::with_clock`]: the writer's store), for the storm's stage figures.
    pub(super) clock: Option<rampart_state::clock::SharedClock>,
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
        let mut store = Store { db: Db::sqlite(conn), path, telegram: false, fence: None, clock: None };
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
        let mut store = Store { db, path: PathBuf::from("postgres"), telegram: false, fence: None, clock: None };
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
    /// SQLite, never checkpoint (`wal_autocheckpoint = 0`: a [`Checkpointer`](crate::storage::Checkpointer) does it on its
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
    /// (an outbox row of [`Channel::Telegram`](crate::store::Channel::Telegram)) for every account that has a chat id, in the
    /// same transaction as the inbox entry.
    pub fn with_telegram(mut self, on: bool) -> Store {
        self.telegram = on;
        self
    }

    /// The store stamps each firing's outbox row with `clock`'s time as it records it
    /// (`committed_ms`, issue #59: the harness's "trade → committed" stage); without one the
    /// column stays empty.
    pub fn with_clock(mut self, clock: rampart_state::clock::SharedClock) -> Store {
        self.clock = Some(clock);
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
}
