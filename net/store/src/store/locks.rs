//! Who may use a database: the data directory's lock (one server per SQLite directory) and
//! PostgreSQL's advisory locks (one single process, or market nodes of one partition count).

use super::conn::{Store, StoreLocation};
use crate::db::StoreError;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// How long a server waits for the PostgreSQL server lock before it is refused: a server that
/// just ended (killed, then started again at once) holds it until PostgreSQL notices its session
/// closed, a moment after its process (under load, up to a second or so).
pub const PG_LOCK_WAIT: Duration = Duration::from_secs(3);

/// Takes the advisory lock `call` names (`pg_advisory_lock…(…)`) on `store`'s session, waiting
/// at most [`PG_LOCK_WAIT`]: false when another session kept it that long.
fn advisory_within(store: &mut Store, call: &str) -> Result<bool, StoreError> {
    store.set_busy_timeout(PG_LOCK_WAIT)?;
    match store.db.query_one(&format!("SELECT 1::bigint FROM (SELECT {call}) AS taken"), &[], |r| r.get::<i64>(0)) {
        Ok(_) => Ok(true),
        Err(e) if e.is_busy() => Ok(false),
        Err(e) => Err(e),
    }
}

impl ServerLock {
    /// Takes the lock: [`LockError::Held`] at once when another process holds the data
    /// directory's; [`LockError::HeldPostgres`] when another server keeps PostgreSQL's for
    /// `PG_LOCK_WAIT` (3 s).
    pub fn acquire(at: &StoreLocation) -> Result<ServerLock, LockError> {
        match at {
            StoreLocation::Sqlite(dir) => DataDirLock::acquire(dir).map(ServerLock::Dir),
            StoreLocation::Postgres(url) => {
                let mut store = Store::open_postgres(url).map_err(LockError::Store)?;
                let call = format!("pg_advisory_lock({PG_SERVER_LOCK}, hashtext(current_schema()))");
                match advisory_within(&mut store, &call).map_err(LockError::Store)? {
                    true => Ok(ServerLock::Postgres(PgLockHolder { _store: store })),
                    false => Err(LockError::HeldPostgres),
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
        let mut store = Store::open_postgres(url).map_err(LockError::Store)?;
        let call = format!("pg_advisory_lock_shared({PG_SERVER_LOCK}, hashtext(current_schema()))");
        if !advisory_within(&mut store, &call).map_err(LockError::Store)? {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::*;

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

    /// A server started again at once after it was killed finds the lock held until PostgreSQL
    /// notices the old session closed: it waits that moment (at most [`PG_LOCK_WAIT`]) rather
    /// than being refused; a server that keeps the lock still refuses it.
    #[test]
    fn a_server_waits_a_moment_for_the_lock_of_one_that_just_ended() {
        let url = fresh_postgres_schema();
        let at = StoreLocation::Postgres(url.clone());
        let old = ServerLock::acquire(&at).expect("the first server");
        let ending = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(old);
        });
        let started = std::time::Instant::now();
        let new = ServerLock::acquire(&at).expect("the lock, once the old session ended");
        assert!(started.elapsed() >= Duration::from_millis(250), "it was held meanwhile");
        ending.join().expect("the old server's end");
        let refused = ServerLock::acquire(&at).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(refused.contains("another rampart server"), "{refused}");
        drop(new);
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
}
