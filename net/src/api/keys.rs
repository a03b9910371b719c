//! The API key table in memory, kept current by a watcher thread, so the front checks a key
//! without touching SQLite on its request path.
//!
//! The watcher asks its own connection every [`KEYS_POLL_MS`] whether any connection has
//! committed (`PRAGMA data_version`) and, if so, whether the key table changed (the `keys`
//! CLI bumps `keys_version` with every create and revoke); only then does it reload the table
//! and publish it whole (`ArcSwap`). Readers take no lock.
//!
//! A change takes effect at once (`decisions.md` §1), not at the next poll: the watcher writes
//! how far it has read (`Store::key_watcher_beat`: the `keys_version` it applied, after every
//! reload and at least every [`BEAT_MS`]), and `rampart keys create|revoke` and the site's key
//! routes return only once every running watcher has applied their change
//! (`Store::wait_keys_seen`). A key the table does not know yet is looked up in storage before
//! it is refused ([`KeyWatcher::learn`] keeps what that finds until the next reload), so a key
//! made by another api node works on its very next request.
//!
//! Bounds: one table of every key (its size is the number of keys issued); one reload at a time
//! on the watcher's thread. A failed poll or reload keeps the last table and is logged once per
//! streak; the table is never emptied by an error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use rampart_state::clock::SharedClock;
use rampart_store::store::{generate_key, KeyRow, Store, StoreError};

/// How often the watcher looks for key changes, milliseconds.
pub const KEYS_POLL_MS: u64 = 20;
/// The watcher writes its beat (the version it applied, and that it is alive) at least this
/// often, milliseconds: well within `rampart_store::store::KEY_WATCHER_ALIVE_MS`, so a running server is always
/// waited for.
pub const BEAT_MS: i64 = 1_000;

/// Every key by the SHA-256 hash of its text.
pub type KeyTable = HashMap<[u8; 32], Arc<KeyRow>>;

/// The published key table and the thread that keeps it current.
pub struct KeyWatcher {
    table: Arc<ArcSwap<KeyTable>>,
    _thread: rampart_state::shutdown::StoppableThread,
}

/// The watcher's name in `key_watchers`, and when it last wrote its beat.
struct Beat {
    id: String,
    written_ms: i64,
    version: i64,
    /// The last write failed (logged once per run of failures: the watcher polls every 20 ms).
    failing: bool,
}

/// What the watcher remembers between polls.
struct Versions {
    data: Option<i64>,
    keys: Option<i64>,
}

/// Loads the table now if the key table changed since `seen`; `None` when it did not.
fn reload_if_changed(store: &Store, seen: &mut Versions) -> Result<Option<KeyTable>, StoreError> {
    let data = store.data_version()?;
    if seen.data == Some(data) {
        return Ok(None);
    }
    let keys = store.keys_version()?;
    if seen.keys == Some(keys) {
        seen.data = Some(data);
        return Ok(None);
    }
    let table = store.load_key_hashes()?.into_iter().map(|(h, row)| (h, Arc::new(row))).collect();
    *seen = Versions { data: Some(data), keys: Some(keys) };
    Ok(Some(table))
}

impl KeyWatcher {
    /// Loads the table from `store` (an error here is the caller's: the server cannot check
    /// keys) and starts the thread that keeps it current.
    pub fn start(store: Store, clock: SharedClock) -> Result<KeyWatcher, StoreError> {
        let mut seen = Versions { data: None, keys: None };
        let first = reload_if_changed(&store, &mut seen)?.unwrap_or_default();
        // Its beats are small writes off every client's path: not waited for on disk.
        store.relax_sync()?;
        let id = format!("kw_{}", generate_key()?.trim_start_matches("rk_"));
        let mut beat = Beat { id, written_ms: i64::MIN, version: 0, failing: false };
        write_beat(&store, &mut beat, seen.keys.unwrap_or(0), clock.now_ms());
        let table = Arc::new(ArcSwap::from_pointee(first));
        let t = table.clone();
        let thread = rampart_state::shutdown::StoppableThread::spawn("key-watch", move |stop| {
            watch(&store, seen, &t, &stop, &mut beat, &clock);
            let _ = store.key_watcher_end(&beat.id, clock.now_ms() - 24 * 3_600_000);
        })
        .map_err(StoreError::Io)?;
        Ok(KeyWatcher { table, _thread: thread })
    }

    /// Adds `row` under `hash` to the published table, as storage had it just now (a key the
    /// table did not know yet, found by a lookup); the next reload replaces the whole table.
    pub fn learn(&self, hash: [u8; 32], row: Arc<KeyRow>) {
        self.table.rcu(|t| {
            let mut t = KeyTable::clone(t);
            t.insert(hash, row.clone());
            t
        });
    }

    /// The key whose text hashes to `hash`, if any (revoked keys included: the caller says 401).
    pub fn get(&self, hash: &[u8; 32]) -> Option<Arc<KeyRow>> {
        self.table.load().get(hash).cloned()
    }

    /// Keys in the table now.
    pub fn len(&self) -> usize {
        self.table.load().len()
    }

    /// True when no key exists.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes the watcher's beat when it applied a newer version or the last is [`BEAT_MS`] old. A
/// failed write is tried again at the next poll (the table itself is unaffected); the first
/// failure of a run is logged, and the write that ends it.
fn write_beat(store: &Store, beat: &mut Beat, version: i64, now_ms: i64) {
    if version == beat.version && now_ms - beat.written_ms < BEAT_MS {
        return;
    }
    match store.key_watcher_beat(&beat.id, version, now_ms) {
        Ok(()) => {
            if beat.failing {
                tracing::info!("keys: the key table's version recorded again");
            }
            *beat = Beat { id: std::mem::take(&mut beat.id), written_ms: now_ms, version, failing: false };
        }
        Err(e) if !beat.failing => {
            tracing::warn!("keys: cannot record the key table's version ({e}); trying again at each poll");
            beat.failing = true;
        }
        Err(_) => {}
    }
}

fn watch(
    store: &Store,
    mut seen: Versions,
    table: &ArcSwap<KeyTable>,
    stop: &AtomicBool,
    beat: &mut Beat,
    clock: &SharedClock,
) {
    let mut failing = false;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(KEYS_POLL_MS));
        match reload_if_changed(store, &mut seen) {
            Ok(Some(t)) => {
                tracing::info!("keys: table reloaded ({} keys)", t.len());
                table.store(Arc::new(t));
                failing = false;
            }
            Ok(None) => failing = false,
            Err(e) => {
                if !failing {
                    tracing::error!("keys: cannot read the key table ({e}); the last one stays in use");
                }
                failing = true;
            }
        }
        write_beat(store, beat, seen.keys.unwrap_or(0), clock.now_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rampart-keys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn reloads_only_when_the_key_table_changed() {
        let dir = temp_dir("reload");
        let mut writer = Store::open(&dir).expect("open");
        let reader = Store::open(&dir).expect("open");
        let mut seen = Versions { data: None, keys: None };
        assert_eq!(reload_if_changed(&reader, &mut seen).expect("first").map(|t| t.len()), Some(0));
        assert!(reload_if_changed(&reader, &mut seen).expect("nothing").is_none(), "no commit: no reload");
        let k = writer.create_account_with_key("developer", None, 1).expect("key");
        let t = reload_if_changed(&reader, &mut seen).expect("after create").expect("reloaded");
        assert!(t.contains_key(&rampart_store::store::hash_key(&k.key)));
        writer.revoke_key(k.id, 2).expect("revoke");
        let t = reload_if_changed(&reader, &mut seen).expect("after revoke").expect("reloaded");
        assert_eq!(t[&rampart_store::store::hash_key(&k.key)].revoked_ms, Some(2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
