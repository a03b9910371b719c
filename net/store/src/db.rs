//! One database connection, embedded SQLite or a PostgreSQL server, behind the few calls the
//! store makes: statements with typed parameters, rows read by column, transactions and
//! savepoints. The store's SQL is written once, in the dialect both accept; `?N` parameters
//! become `$N` for PostgreSQL when a statement is first prepared.
//!
//! Rationale: the store's semantics (what a firing writes, what a cap counts) must not fork by
//! backend, so the SQL and the row mappings are shared and only this file knows which server
//! runs them. What does differ (schema DDL, `PRAGMA`s, locks) is chosen by [`Db::is_postgres`]
//! in the store.
//!
//! PostgreSQL hazard handled here: after a failed statement a PostgreSQL transaction is
//! aborted, and a later `COMMIT` ends it *without an error*, keeping nothing. This connection
//! remembers the failure and turns that `COMMIT` into a rollback and an error, so no caller can
//! report a write as kept when it was not.

use std::cell::RefCell;
use std::collections::HashMap;

use std::fmt;

/// A statement parameter: the types the store binds, on both backends.
#[derive(Clone, Copy, Debug)]
pub enum Val<'a> {
    /// A 64-bit integer (`INTEGER` in SQLite, `BIGINT` in PostgreSQL).
    I64(i64),
    /// A nullable integer.
    OptI64(Option<i64>),
    /// Text.
    Str(&'a str),
    /// Nullable text.
    OptStr(Option<&'a str>),
    /// A double (`REAL` / `DOUBLE PRECISION`).
    F64(f64),
    /// A nullable double.
    OptF64(Option<f64>),
    /// A flag (`INTEGER` 0/1 in SQLite, `BOOLEAN` in PostgreSQL).
    Bool(bool),
    /// Bytes (`BLOB` / `BYTEA`).
    Bytes(&'a [u8]),
}

macro_rules! val_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl<'a> From<$t> for Val<'a> {
            fn from(x: $t) -> Val<'a> {
                Val::$v(x)
            }
        })*
    };
}

val_from!(i64 => I64, Option<i64> => OptI64, &'a str => Str, Option<&'a str> => OptStr, f64 => F64,
    Option<f64> => OptF64, bool => Bool, &'a [u8] => Bytes);

impl<'a> From<&'a String> for Val<'a> {
    fn from(s: &'a String) -> Val<'a> {
        Val::Str(s)
    }
}

/// Statement parameters: `vals![a, b]` is `&[Val::from(a), Val::from(b)]`.
macro_rules! vals {
    ($($v:expr),* $(,)?) => { &[$($crate::db::Val::from($v)),*][..] };
}
pub(crate) use vals;

impl Val<'_> {
    fn lite(&self) -> &dyn rusqlite::ToSql {
        match self {
            Val::I64(x) => x,
            Val::OptI64(x) => x,
            Val::Str(x) => x,
            Val::OptStr(x) => x,
            Val::F64(x) => x,
            Val::OptF64(x) => x,
            Val::Bool(x) => x,
            Val::Bytes(x) => x,
        }
    }

    fn pg(&self) -> &(dyn tokio_postgres::types::ToSql + Sync) {
        match self {
            Val::I64(x) => x,
            Val::OptI64(x) => x,
            Val::Str(x) => x,
            Val::OptStr(x) => x,
            Val::F64(x) => x,
            Val::OptF64(x) => x,
            Val::Bool(x) => x,
            Val::Bytes(x) => x,
        }
    }
}

/// One column of a batch's rows ([`Db::insert_rows`], [`Db::query_columns`]): on PostgreSQL one
/// array parameter, so a batch is one statement whatever its size; on SQLite a value per row.
#[derive(Clone, Debug)]
pub enum Col<'a> {
    /// 64-bit integers (`bigint[]`).
    I64(Vec<i64>),
    /// Nullable integers.
    OptI64(Vec<Option<i64>>),
    /// Texts (`text[]`).
    Str(Vec<&'a str>),
    /// Nullable texts.
    OptStr(Vec<Option<&'a str>>),
    /// Flags (`boolean[]`).
    Bool(Vec<bool>),
}

impl<'a> Col<'a> {
    /// Rows in the column.
    pub fn len(&self) -> usize {
        match self {
            Col::I64(v) => v.len(),
            Col::OptI64(v) => v.len(),
            Col::Str(v) => v.len(),
            Col::OptStr(v) => v.len(),
            Col::Bool(v) => v.len(),
        }
    }

    /// True when it holds no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`'s value.
    fn val(&self, i: usize) -> Val<'a> {
        match self {
            Col::I64(v) => Val::I64(v[i]),
            Col::OptI64(v) => Val::OptI64(v[i]),
            Col::Str(v) => Val::Str(v[i]),
            Col::OptStr(v) => Val::OptStr(v[i]),
            Col::Bool(v) => Val::Bool(v[i]),
        }
    }

    fn pg(&self) -> &(dyn tokio_postgres::types::ToSql + Sync) {
        match self {
            Col::I64(v) => v,
            Col::OptI64(v) => v,
            Col::Str(v) => v,
            Col::OptStr(v) => v,
            Col::Bool(v) => v,
        }
    }

    /// Its PostgreSQL array type.
    fn pg_array(&self) -> &'static str {
        match self {
            Col::I64(_) | Col::OptI64(_) => "bigint[]",
            Col::Str(_) | Col::OptStr(_) => "text[]",
            Col::Bool(_) => "boolean[]",
        }
    }
}

/// A column type the store reads: only types whose meaning is the same on both backends
/// (PostgreSQL maps `u32` to `oid`, so unsigned types are read as `i64` and converted).
pub trait Column: rusqlite::types::FromSql + for<'b> tokio_postgres::types::FromSql<'b> + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! column {
    ($($t:ty),*) => { $(impl sealed::Sealed for $t {} impl Column for $t {})* };
}
column!(i64, Option<i64>, String, Option<String>, f64, Option<f64>, bool, Vec<u8>);

/// One result row.
pub enum Row<'a> {
    /// From SQLite.
    Lite(&'a rusqlite::Row<'a>),
    /// From PostgreSQL.
    Pg(&'a tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `i` (0-based) as `T`.
    pub fn get<T: Column>(&self, i: usize) -> Result<T, StoreError> {
        match self {
            Row::Lite(r) => Ok(r.get(i)?),
            Row::Pg(r) => Ok(r.try_get(i)?),
        }
    }
}

/// Least time between two attempts to reconnect a lost PostgreSQL connection: calls in between
/// fail at once, so an unreachable server costs each caller one failed call, not a connect
/// timeout every time.
const RECONNECT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// A PostgreSQL connection's state.
struct Pg {
    client: tokio_postgres::Client,
    /// How to connect again when the connection is lost.
    config: tokio_postgres::Config,
    /// Session settings (`SET name = value`) by name, replayed on a new connection. Bound: one
    /// entry per setting the store makes (a handful of fixed names).
    session: std::collections::BTreeMap<&'static str, String>,
    /// When a reconnect was last tried.
    reconnected_at: Option<std::time::Instant>,
    /// Prepared statements by their SQL text. Bound: the store's SQL is fixed text (no client
    /// bytes are ever part of it), so this holds at most one entry per statement in the store.
    stmts: HashMap<String, tokio_postgres::Statement>,
    /// A transaction is open.
    in_tx: bool,
    /// A statement failed inside the open transaction: it can only be rolled back.
    poisoned: bool,
    /// Open savepoints, innermost last: `true` for one that opened the transaction itself
    /// (PostgreSQL has no savepoint outside a transaction).
    savepoints: Vec<bool>,
    /// Statements without parameters or answers (`BEGIN`, `SAVEPOINT`, `RELEASE`, a row lock)
    /// not sent yet: they go ahead of the next statement, pipelined with it (one round trip for
    /// both), or with the commit. Bound: what one transaction queues between two round trips
    /// (a few short statements).
    pending: String,
    /// Something of the open transaction has been sent to the server: until then it can move
    /// to a new connection whole (it is all in `pending`).
    tx_sent: bool,
}

impl Pg {
    fn statement(&mut self, sql: &str) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = wait(self.client.prepare(&dollar_params(sql)))?;
        self.stmts.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    /// Runs `f` and marks the open transaction poisoned when it fails. A lost connection is
    /// replaced first, but only outside a transaction: a transaction's statements must not go on
    /// on another connection (its writes so far are gone; it fails and is rolled back).
    fn run<T>(&mut self, f: impl FnOnce(&mut Pg) -> Result<T, tokio_postgres::Error>) -> Result<T, StoreError> {
        if self.client.is_closed() {
            if self.in_tx && self.tx_sent {
                self.poisoned = true;
                return Err(StoreError::Unavailable("the PostgreSQL connection was lost mid-transaction"));
            }
            // Nothing of an open transaction was sent yet: it moves to the new connection.
            let kept = (std::mem::take(&mut self.pending), self.in_tx, std::mem::take(&mut self.savepoints));
            let connected = self.reconnect();
            (self.pending, self.in_tx, self.savepoints) = kept;
            if let Err(e) = connected {
                self.poisoned |= self.in_tx;
                return Err(e);
            }
        }
        self.tx_sent |= self.in_tx;
        let out = f(self);
        if out.is_err() && self.in_tx {
            self.poisoned = true;
        }
        Ok(out?)
    }

    /// Connects again (at most once per [`RECONNECT_EVERY`]) and replays the session settings.
    fn reconnect(&mut self) -> Result<(), StoreError> {
        let now = std::time::Instant::now();
        if self.reconnected_at.is_some_and(|t| now.duration_since(t) < RECONNECT_EVERY) {
            return Err(StoreError::Unavailable("PostgreSQL is unreachable (reconnecting)"));
        }
        self.reconnected_at = Some(now);
        self.client = connect(&self.config)?;
        self.stmts.clear();
        (self.in_tx, self.poisoned, self.tx_sent) = (false, false, false);
        self.savepoints.clear();
        self.pending.clear();
        for (name, value) in &self.session {
            wait(self.client.batch_execute(&format!("SET {name} = {value}")))?;
        }
        tracing::info!("PostgreSQL: connected again");
        Ok(())
    }
}

/// A new connection at `config`, its socket driven by a thread of its own.
fn connect(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, StoreError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let config = config.clone();
    std::thread::Builder::new()
        .name("pg-conn".into())
        .spawn(move || drive_connection(&config, &tx))
        .map_err(StoreError::Io)?;
    rx.recv().map_err(|_| StoreError::Unavailable("the PostgreSQL connection thread ended"))?
}

/// Connects, hands the client back through `tx`, then drives the socket until the client is
/// dropped (or the server goes away: the client's calls then fail).
fn drive_connection(
    config: &tokio_postgres::Config,
    tx: &std::sync::mpsc::SyncSender<Result<tokio_postgres::Client, StoreError>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Err(StoreError::Io(e)));
            return;
        }
    };
    runtime.block_on(async {
        match config.connect(tokio_postgres::NoTls).await {
            Ok((client, connection)) => {
                let _ = tx.send(Ok(client));
                if let Err(e) = connection.await {
                    tracing::warn!("PostgreSQL connection ended: {e}");
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e.into()));
            }
        }
    });
}

/// Blocks this thread on `f`, without entering a tokio runtime (the client's futures only talk
/// to the connection's thread through channels).
fn wait<F: std::future::Future>(f: F) -> F::Output {
    futures_lite::future::block_on(f)
}

/// `main` with the statements queued in `pending` sent ahead of it on the same connection, in
/// one round trip (both requests are written before either answer is read; the server runs
/// them in order). An error of the queued statements is the answer, else `main`'s.
async fn ahead<T>(
    client: &tokio_postgres::Client,
    pending: &str,
    main: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, tokio_postgres::Error> {
    if pending.is_empty() {
        return main.await;
    }
    let (queued, out) = futures_lite::future::zip(client.batch_execute(pending), main).await;
    queued?;
    out
}

/// `?N` parameters as PostgreSQL's `$N`. The store's SQL has no `?` anywhere else (no string
/// literal in it holds one).
fn dollar_params(sql: &str) -> String {
    sql.replace('?', "$")
}

enum Conn {
    Lite(rusqlite::Connection),
    Pg(Box<RefCell<Pg>>),
}

/// A connection (owned by one thread at a time: `Send`, not `Sync`).
pub struct Db {
    conn: Conn,
}

impl Db {
    /// Wraps an open SQLite connection.
    pub fn sqlite(conn: rusqlite::Connection) -> Db {
        conn.set_prepared_statement_cache_capacity(64);
        Db { conn: Conn::Lite(conn) }
    }

    /// Connects to PostgreSQL at `url` (a `postgres://` URL or a `key=value` string; without
    /// TLS: the server is expected on a trusted network or loopback). Connecting gives up
    /// after 5 s unless the URL sets `connect_timeout`.
    ///
    /// The connection's socket is driven by a thread of its own ("pg-conn", a current-thread
    /// tokio runtime), which ends when this connection is dropped; the calls here block the
    /// calling thread on their answers without entering a runtime, so they work on any thread,
    /// a tokio runtime's included (the delivery thread's).
    pub fn postgres(url: &str) -> Result<Db, StoreError> {
        let mut config: tokio_postgres::Config = url.parse()?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(5));
        }
        let client = connect(&config)?;
        let pg = Pg {
            client,
            config,
            session: std::collections::BTreeMap::new(),
            reconnected_at: None,
            stmts: HashMap::new(),
            in_tx: false,
            poisoned: false,
            savepoints: Vec::new(),
            pending: String::new(),
            tx_sent: false,
        };
        let db = Db { conn: Conn::Pg(Box::new(RefCell::new(pg))) };
        db.set_session("client_min_messages", "warning")?;
        Ok(db)
    }

    /// Sets a PostgreSQL session setting (`SET name = value`), kept across reconnects; does
    /// nothing on SQLite.
    pub fn set_session(&self, name: &'static str, value: &str) -> Result<(), StoreError> {
        let Conn::Pg(p) = &self.conn else { return Ok(()) };
        let mut p = p.borrow_mut();
        p.session.insert(name, value.to_owned());
        p.run(|p| wait(p.client.batch_execute(&format!("SET {name} = {value}"))))
    }

    /// True on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.conn, Conn::Pg(_))
    }

    /// The SQLite connection (for what only SQLite has: `PRAGMA`s, tests' fault injection).
    pub fn lite(&self) -> Option<&rusqlite::Connection> {
        match &self.conn {
            Conn::Lite(c) => Some(c),
            Conn::Pg(_) => None,
        }
    }

    /// Runs one statement; the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[Val<'_>]) -> Result<u64, StoreError> {
        match &self.conn {
            Conn::Lite(c) => {
                let n = c.prepare_cached(sql)?.execute(rusqlite::params_from_iter(params.iter().map(Val::lite)))?;
                Ok(n as u64)
            }
            Conn::Pg(p) => p.borrow_mut().run(|p| {
                let s = p.statement(sql)?;
                let ps: Vec<_> = params.iter().map(Val::pg).collect();
                let queued = std::mem::take(&mut p.pending);
                wait(ahead(&p.client, &queued, p.client.execute(&s, &ps)))
            }),
        }
    }

    /// Inserts the rows `cols` hold (column by column, all as long) into `table`'s columns
    /// `names`, in the caller's transaction: on PostgreSQL one statement however many rows
    /// (`INSERT … SELECT * FROM unnest(…)`, pipelined ahead like every statement), on SQLite one
    /// cached statement per row. Returns the rows inserted.
    pub fn insert_rows(&self, table: &str, names: &[&str], cols: &[Col<'_>]) -> Result<u64, StoreError> {
        let n = cols.first().map_or(0, Col::len);
        assert!(cols.len() == names.len() && cols.iter().all(|c| c.len() == n), "one column per name, each as long");
        if n == 0 {
            return Ok(0);
        }
        let names = names.join(", ");
        match &self.conn {
            Conn::Lite(_) => {
                let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
                let sql = format!("INSERT INTO {table} ({names}) VALUES ({})", marks.join(", "));
                let mut inserted = 0;
                for i in 0..n {
                    let row: Vec<Val<'_>> = cols.iter().map(|c| c.val(i)).collect();
                    inserted += self.execute(&sql, &row)?;
                }
                Ok(inserted)
            }
            Conn::Pg(p) => {
                let arrays: Vec<String> =
                    cols.iter().enumerate().map(|(i, c)| format!("?{}::{}", i + 1, c.pg_array())).collect();
                let sql = format!("INSERT INTO {table} ({names}) SELECT * FROM unnest({})", arrays.join(", "));
                p.borrow_mut().run(|p| {
                    let s = p.statement(&sql)?;
                    let ps: Vec<_> = cols.iter().map(Col::pg).collect();
                    let queued = std::mem::take(&mut p.pending);
                    wait(ahead(&p.client, &queued, p.client.execute(&s, &ps)))
                })
            }
        }
    }

    /// Every row of `sql` (PostgreSQL only), which reads `cols` as the array parameters `?1`,
    /// `?2`, … (a batch's rows through `unnest`), each mapped by `f`. On SQLite an error: the
    /// caller runs its statement per row there.
    pub fn query_columns<T>(
        &self,
        sql: &str,
        cols: &[Col<'_>],
        f: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let Conn::Pg(p) = &self.conn else {
            return Err(StoreError::Unavailable("array parameters are PostgreSQL's"));
        };
        let rows = p.borrow_mut().run(|p| {
            let s = p.statement(sql)?;
            let ps: Vec<_> = cols.iter().map(Col::pg).collect();
            let queued = std::mem::take(&mut p.pending);
            wait(ahead(&p.client, &queued, p.client.query(&s, &ps)))
        })?;
        let mut f = f;
        rows.iter().map(|r| f(&Row::Pg(r))).collect()
    }

    /// Every row of a query, each mapped by `f`.
    pub fn query<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        f: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        self.rows(sql, params, usize::MAX, f)
    }

    /// The first row of a query, if any (the store's lookups by key return one at most).
    pub fn query_opt<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let mut f = Some(f);
        let mut rows = self.rows(sql, params, 1, |r| f.take().map(|f| f(r)).transpose())?;
        Ok(rows.pop().flatten())
    }

    /// At most `max` rows of a query, each mapped by `f`.
    fn rows<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        max: usize,
        mut f: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        match &self.conn {
            Conn::Lite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(params.iter().map(Val::lite)))?;
                let mut out = Vec::new();
                while out.len() < max {
                    let Some(r) = rows.next()? else { break };
                    out.push(f(&Row::Lite(r))?);
                }
                Ok(out)
            }
            Conn::Pg(p) => {
                let rows = p.borrow_mut().run(|p| {
                    let s = p.statement(sql)?;
                    let ps: Vec<_> = params.iter().map(Val::pg).collect();
                    let queued = std::mem::take(&mut p.pending);
                    wait(ahead(&p.client, &queued, p.client.query(&s, &ps)))
                })?;
                rows.iter().take(max).map(|r| f(&Row::Pg(r))).collect()
            }
        }
    }

    /// Runs `sql` once for each parameter set and maps each one's first row (if any) by `f`,
    /// in order. On PostgreSQL every statement is sent before the first answer is awaited (the
    /// connection pipelines them: one round trip for the batch instead of one each); they still
    /// run in order, in the open transaction if there is one. SQLite runs them one by one.
    pub fn query_opt_each<T>(
        &self,
        sql: &str,
        sets: &[Vec<Val<'_>>],
        mut f: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<Option<T>>, StoreError> {
        match &self.conn {
            Conn::Lite(_) => sets.iter().map(|set| self.query_opt(sql, set, &mut f)).collect(),
            Conn::Pg(p) => {
                let rows = p.borrow_mut().run(|p| {
                    let s = p.statement(sql)?;
                    let params: Vec<Vec<_>> = sets.iter().map(|set| set.iter().map(Val::pg).collect()).collect();
                    let queued = std::mem::take(&mut p.pending);
                    let client = &p.client;
                    let calls = params.iter().map(|ps| client.query_opt(&s, ps));
                    wait(ahead(client, &queued, futures_util::future::try_join_all(calls)))
                })?;
                rows.iter().map(|r| r.as_ref().map(|r| f(&Row::Pg(r))).transpose()).collect()
            }
        }
    }

    /// Runs `sql` once for each parameter set, pipelined on PostgreSQL as
    /// [`Db::query_opt_each`]; the rows each one changed.
    pub fn execute_each(&self, sql: &str, sets: &[Vec<Val<'_>>]) -> Result<Vec<u64>, StoreError> {
        match &self.conn {
            Conn::Lite(_) => sets.iter().map(|set| self.execute(sql, set)).collect(),
            Conn::Pg(p) => p.borrow_mut().run(|p| {
                let s = p.statement(sql)?;
                let params: Vec<Vec<_>> = sets.iter().map(|set| set.iter().map(Val::pg).collect()).collect();
                let queued = std::mem::take(&mut p.pending);
                let client = &p.client;
                let calls = params.iter().map(|ps| client.execute(&s, ps));
                wait(ahead(client, &queued, futures_util::future::try_join_all(calls)))
            }),
        }
    }

    /// The first row of a query that always returns one (an aggregate, a seeded meta row).
    pub fn query_one<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.query_opt(sql, params, f)?.ok_or(StoreError::Corrupt(format!("no row from: {sql}")))
    }

    /// Queues `sql` (a statement without parameters whose answer is not needed, such as a row
    /// lock) to run, on PostgreSQL, ahead of the next statement in the same round trip; it
    /// must not fail but for the reasons the next statement would. Runs it now on SQLite.
    pub fn ahead_of_next(&self, sql: &str) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(c) => Ok(c.execute_batch(sql)?),
            Conn::Pg(p) => {
                let mut p = p.borrow_mut();
                p.pending.push_str(sql);
                p.pending.push(';');
                Ok(())
            }
        }
    }

    /// Has the rest of the open transaction plan each statement for its own parameters
    /// (PostgreSQL's `SET LOCAL plan_cache_mode = force_custom_plan`, sent ahead of the next
    /// statement; nothing on SQLite): for the statements that join a batch's arrays
    /// (`… FROM unnest(…)`).
    ///
    /// Rationale: after five executions of a prepared statement PostgreSQL may keep a generic
    /// plan, made without the arrays' sizes; it did for the writer's batches: a commit of 256
    /// firings took 390–450 ms with it and 29–35 ms planned each time (`rampart-bench firings`,
    /// issue #59). Set for the whole session instead, every one-row statement paid the planning
    /// too (a commit of one firing: 1.6 ms → 2–5 ms).
    pub fn custom_plans(&self) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(_) => Ok(()),
            Conn::Pg(_) => self.ahead_of_next("SET LOCAL plan_cache_mode = force_custom_plan"),
        }
    }

    /// Runs statements without parameters (DDL, `PRAGMA`s).
    pub fn batch(&self, sql: &str) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(c) => Ok(c.execute_batch(sql)?),
            Conn::Pg(p) => p.borrow_mut().run(|p| {
                let queued = std::mem::take(&mut p.pending) + sql;
                wait(p.client.batch_execute(&queued))
            }),
        }
    }

    /// Opens a transaction. `immediate` takes SQLite's write lock at once (`BEGIN IMMEDIATE`);
    /// PostgreSQL takes row locks as it writes.
    pub fn begin(&self, immediate: bool) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(c) => Ok(c.execute_batch(if immediate { "BEGIN IMMEDIATE" } else { "BEGIN" })?),
            Conn::Pg(p) => {
                // Sent with the transaction's first statement, in its round trip.
                let mut p = p.borrow_mut();
                debug_assert!(!p.in_tx, "no nested transactions");
                debug_assert!(p.pending.is_empty(), "nothing queued outside a transaction");
                p.pending.push_str("BEGIN;");
                (p.in_tx, p.poisoned, p.tx_sent) = (true, false, false);
                Ok(())
            }
        }
    }

    /// Commits the open transaction. When it cannot be committed (on PostgreSQL: a statement
    /// in it failed) it is rolled back and the answer is an error: nothing of it was kept.
    pub fn commit(&self) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(c) => match c.execute_batch("COMMIT") {
                Ok(()) => Ok(()),
                Err(e) => {
                    if !c.is_autocommit() {
                        let _ = c.execute_batch("ROLLBACK");
                    }
                    Err(e.into())
                }
            },
            Conn::Pg(p) => {
                let mut p = p.borrow_mut();
                let (poisoned, sent) = (p.poisoned, p.tx_sent);
                let queued = std::mem::take(&mut p.pending);
                (p.in_tx, p.poisoned, p.tx_sent) = (false, false, false);
                p.savepoints.clear();
                if !sent && !poisoned {
                    // Nothing was sent: there is nothing to commit.
                    return Ok(());
                }
                let sql = if poisoned { "ROLLBACK".to_owned() } else { queued + "COMMIT" };
                let done = wait(p.client.batch_execute(&sql));
                if poisoned {
                    return Err(StoreError::Unavailable(
                        "a statement of the transaction failed: nothing of it was kept",
                    ));
                }
                if done.is_err() {
                    let _ = wait(p.client.batch_execute("ROLLBACK"));
                }
                Ok(done?)
            }
        }
    }

    /// Rolls the open transaction back.
    pub fn rollback(&self) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(c) => Ok(c.execute_batch("ROLLBACK")?),
            Conn::Pg(p) => {
                let mut p = p.borrow_mut();
                let sent = p.tx_sent;
                (p.in_tx, p.poisoned, p.tx_sent) = (false, false, false);
                p.savepoints.clear();
                p.pending.clear();
                if !sent {
                    return Ok(());
                }
                Ok(wait(p.client.batch_execute("ROLLBACK"))?)
            }
        }
    }

    /// True while a transaction is open.
    pub fn in_transaction(&self) -> bool {
        match &self.conn {
            Conn::Lite(c) => !c.is_autocommit(),
            Conn::Pg(p) => p.borrow().in_tx,
        }
    }

    /// Opens savepoint `name` (outside a transaction it opens one, on both backends).
    pub fn savepoint(&self, name: &str) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(c) => Ok(c.execute_batch(&format!("SAVEPOINT {name}"))?),
            Conn::Pg(p) => {
                let opens = !p.borrow().in_tx;
                if opens {
                    self.begin(false)?;
                }
                let mut p = p.borrow_mut();
                p.pending.push_str(&format!("SAVEPOINT {name};"));
                p.savepoints.push(opens);
                Ok(())
            }
        }
    }

    /// Ends savepoint `name`: its writes are kept (`keep`) or undone. A savepoint that opened
    /// the transaction commits it or rolls it back.
    pub fn end_savepoint(&self, name: &str, keep: bool) -> Result<(), StoreError> {
        match &self.conn {
            Conn::Lite(c) => {
                let sql = if keep { format!("RELEASE {name}") } else { format!("ROLLBACK TO {name}; RELEASE {name}") };
                Ok(c.execute_batch(&sql)?)
            }
            Conn::Pg(p) => {
                let opened = p.borrow_mut().savepoints.pop().unwrap_or(false);
                match (opened, keep) {
                    (true, true) => self.commit(),
                    (true, false) => self.rollback(),
                    (false, true) => {
                        p.borrow_mut().pending.push_str(&format!("RELEASE {name};"));
                        Ok(())
                    }
                    (false, false) => {
                        // Sent ahead of the next statement (or the commit): it ends the failed
                        // statement's abort of the transaction.
                        let mut p = p.borrow_mut();
                        p.pending.push_str(&format!("ROLLBACK TO {name}; RELEASE {name};"));
                        p.poisoned = false;
                        Ok(())
                    }
                }
            }
        }
    }

    /// Runs `f` in savepoint `name`: all of its writes are kept or none (committed when this
    /// returns, or with the enclosing transaction).
    pub fn in_savepoint<T>(&self, name: &str, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.savepoint(name)?;
        let done = f();
        self.end_savepoint(name, done.is_ok())?;
        done
    }

    /// Runs `f`, a write, in a transaction of its own: committed when it succeeds, rolled back
    /// when it fails. Not for use inside another transaction.
    ///
    /// Rationale: on SQLite it takes the write lock first (`BEGIN IMMEDIATE`, waited for by the
    /// busy handler). A deferred transaction that reads before it writes (the flood guard's read
    /// in `record_firings`, the outbox rows' in `record_attempts`) fails with `SQLITE_BUSY`,
    /// without the busy handler, when another connection commits between its read and its first
    /// write; the writer then retried 100 ms later (issue #58's simulation found 442 such
    /// retries in 300 000 operations).
    pub fn in_transaction_of<T>(&self, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.begin(true)?;
        match f() {
            Ok(v) => {
                self.commit()?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.rollback();
                Err(e)
            }
        }
    }

    /// The PostgreSQL error's SQLSTATE class, when this error came from PostgreSQL.
    pub fn sqlstate(e: &tokio_postgres::Error) -> Option<&str> {
        e.code().map(tokio_postgres::error::SqlState::code)
    }
}

/// A storage failure.
#[derive(Debug)]
pub enum StoreError {
    /// SQLite refused an operation.
    Sqlite(rusqlite::Error),
    /// PostgreSQL refused an operation, or its server could not be reached.
    Postgres(tokio_postgres::Error),
    /// A stored value this build does not write (a column is named in the text).
    Corrupt(String),
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
    /// Storage could not take the request in time (a lock held elsewhere, a full queue).
    Unavailable(&'static str),
    /// The write was for a market partition this node no longer owns (`store::Fence`): another
    /// node claimed it, and the write must not be retried.
    Fenced,
}

/// What a write refused for lack of space answers (`StoreError::is_full`): the cause, without
/// the server's paths (those are the operator's: `/healthz` and the log name the file).
pub const DISK_FULL: &str = "storage full: the disk holding the database has no space left; retry later";

impl StoreError {
    /// True when a write failed for lack of space: SQLite's `SQLITE_FULL` (a full disk, or
    /// `max_page_count` reached), PostgreSQL's `disk_full` (53100), or a group whose commit
    /// failed so ([`DISK_FULL`]).
    pub fn is_full(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => e.code == rusqlite::ErrorCode::DiskFull,
            StoreError::Postgres(e) => Db::sqlstate(e) == Some("53100"),
            StoreError::Unavailable(why) => *why == DISK_FULL,
            _ => false,
        }
    }

    /// True when the database gave up waiting for a lock another connection held (SQLite's
    /// busy or locked; PostgreSQL's lock or statement timeout, a deadlock, a serialization
    /// failure).
    pub fn is_busy(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            }
            StoreError::Postgres(e) => {
                matches!(Db::sqlstate(e), Some("55P03" | "57014" | "40P01" | "40001"))
            }
            _ => false,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Sqlite(e) => write!(f, "database: {e}"),
            StoreError::Postgres(e) => write!(f, "postgres: {e}"),
            StoreError::Corrupt(what) => write!(f, "database: {what}"),
            StoreError::Io(e) => write!(f, "data directory: {e}"),
            StoreError::TooNew { found, known } => {
                write!(f, "database schema version {found} is newer than this build ({known})")
            }
            StoreError::Random => f.write_str("random source unavailable"),
            StoreError::Unavailable(why) => f.write_str(why),
            StoreError::Fenced => f.write_str("this node no longer owns its partition (another node claimed it)"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(e)
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> StoreError {
        StoreError::Postgres(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_mark_parameters_become_dollar_parameters() {
        assert_eq!(
            dollar_params("UPDATE t SET a = ?2 WHERE id = ?1 AND b = ?2"),
            "UPDATE t SET a = $2 WHERE id = $1 AND b = $2"
        );
    }
}
