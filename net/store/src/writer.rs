//! The persistence side of the shards' event queues: one thread that drains every shard's
//! queue (and the board thread's) and writes firings (alert status, count, last time, inbox
//! entry; site alerts' too) to SQLite in batches, off the tick path.
//!
//! Nothing taken from a queue is dropped: a batch that fails to commit (a busy database, a full
//! disk) is retried, with a pause, until it commits; meanwhile the queues fill and the shards
//! apply backpressure (see `shard::EVENTS_MAX`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rampart_engine::Registry;

use crate::collect::Collector;
use crate::db::StoreError;
use crate::handoff::Handed;
use crate::storage::{StorageHealth, Writer as StorageWriter};
use crate::store::{AlertRow, Delisting, FiringRecord, Render, SiteFiringRecord, Store};
use rampart_state::clock::{Clock, SharedClock};
use rampart_state::{EventQueue, QueuedEvent, ShardEvent};

/// Firings written per transaction at most.
pub const BATCH_MAX: usize = 4_096;
/// Longest park when every queue is empty. Producers wake the writer as they push
/// ([`EventQueue::wake`]), so this only bounds the wait for an event whose wake-up was missed
/// (one pushed between the writer's last look and its park is still seen: an unpark before the
/// park makes the park return at once).
const IDLE: Duration = Duration::from_millis(2);
/// Log target of a firing's way to its webhook, one trace line per stage and alert (taken from
/// the shard's queue, committed; the delivery side adds attempt started and answered): off
/// unless asked for (`RUST_LOG=info,rampart::firing=trace`), it times the stages of one firing.
pub const FIRING_TARGET: &str = "rampart::firing";
/// Pause before retrying a batch that failed to commit.
const RETRY: Duration = Duration::from_millis(100);

/// Counters of the writer, readable by anyone.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Firings persisted.
    pub firings: AtomicU64,
    /// Batches committed.
    pub batches: AtomicU64,
    /// Commits that failed and were retried.
    pub retries: AtomicU64,
    /// Site alert firings recorded (density and market; those of alerts no longer active are
    /// not counted).
    pub site_firings: AtomicU64,
    /// Commits that wrote inbox entries (firings of any kind, delistings): live push to the
    /// site's open pages reads the inbox again when this moves.
    pub inbox_writes: AtomicU64,
    /// Those of them whose entries are not in `inbox_feed` (delistings, expiries, site firings):
    /// a stream front reads the database when this moved since its last look.
    pub inbox_unfed: AtomicU64,
    /// Woken at each such commit: a stream's `alerts` waiting on it reads the inbox at once
    /// (one that was not waiting sees `inbox_writes` move at its next look).
    pub inbox_written: tokio::sync::Notify,
    /// The firings' inbox entries, published at their commit before `inbox_written` wakes
    /// anyone: the stream fronts take them from here instead of reading the database.
    pub inbox_feed: crate::inbox_feed::InboxFeed,
}

impl WriterStats {
    /// Counts a commit that wrote inbox entries (not in the feed) and wakes whoever waits for one.
    pub fn note_inbox_write(&self) {
        self.inbox_unfed.fetch_add(1, Ordering::Release);
        self.inbox_writes.fetch_add(1, Ordering::Release);
        self.inbox_written.notify_waiters();
    }

    /// Publishes a commit's inbox entries to `inbox_feed`, counts the commit and wakes whoever
    /// waits for one (the entries are in the feed before anyone is woken).
    pub fn note_inbox_fed(&self, entries: Vec<crate::inbox_feed::FedEntry>) {
        self.inbox_feed.publish(entries);
        self.inbox_writes.fetch_add(1, Ordering::Release);
        self.inbox_written.notify_waiters();
    }
}

/// Called with every committed batch and its webhook deliveries (the delivery side hooks in
/// here: a market node hands the deliveries to its publisher, `crate::handoff`).
pub type OnCommitted = Box<dyn FnMut(&[(AlertRow, FiringRecord)], Vec<Handed>) + Send>;

/// Which alerts this process ends at their expiry ([`WriterHooks::owns`]).
pub type Owns = Box<dyn Fn(&AlertRow) -> bool + Send>;
/// Called with the alerts that must leave their shards ([`WriterHooks::on_ended`]).
pub type OnEnded = Box<dyn FnMut(&[AlertRow]) + Send>;

/// How often the writer looks for alerts whose `expires_at` has passed.
pub const EXPIRY_SCAN_MS: i64 = 1_000;
/// Alerts ended per scan at most; the rest at the next scans.
pub const EXPIRED_PER_SCAN_MAX: u32 = 512;

/// What the writer is handed besides the store and the queues.
pub struct WriterHooks {
    /// Makes the bodies and messages the store writes.
    pub texts: Box<dyn Render + Send>,
    /// Called with every committed batch (the delivery side hooks in here).
    pub on_committed: OnCommitted,
    /// Which alerts this process ends at their expiry: their pair's shard is here (a market
    /// node ends its partition's; a single process every alert).
    pub owns: Owns,
    /// Called, once committed, with the alerts that must leave their shards: ended at their
    /// expiry or by their `max_fires`, a one-shot `*` alert its body ended (its other pairs'
    /// books still hold it), and those the flood guard paused (`decisions.md` §16).
    pub on_ended: OnEnded,
}

impl WriterHooks {
    /// `texts` and `on_committed`; every alert's expiry, with nothing told of it.
    pub fn new(texts: Box<dyn Render + Send>, on_committed: OnCommitted) -> WriterHooks {
        WriterHooks { texts, on_committed, owns: Box::new(|_| true), on_ended: Box::new(|_| {}) }
    }
}

/// The running writer.
pub struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Its counters.
    pub stats: Arc<WriterStats>,
}

impl Writer {
    /// Starts the writer thread over `queues`, writing through `store` the bodies and messages
    /// `hooks.texts` makes; it also ends the alerts whose `expires_at` has passed.
    // Long: the writer thread's body: its wiring and its one loop, whose `match` takes each kind of
    // shard event in one line or two.
    pub fn start(
        mut store: Store,
        queues: Vec<Arc<EventQueue>>,
        registry: Arc<arc_swap::ArcSwap<Registry>>,
        health: Arc<StorageHealth>,
        clock: SharedClock,
        hooks: WriterHooks,
    ) -> std::io::Result<Writer> {
        let WriterHooks { texts, mut on_committed, owns, mut on_ended } = hooks;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(WriterStats::default());
        let (stop2, stats2) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new().name("writer".into()).spawn(move || {
            for q in &queues {
                q.set_reader(std::thread::current());
            }
            let mut batch: Vec<FiringRecord> = Vec::with_capacity(BATCH_MAX);
            let mut site: Vec<SiteFiringRecord> = Vec::new();
            // The number each shard's next event must carry (paired with the shard's own count).
            let mut expiry_scanned_ms = 0;
            let mut expected: Vec<u64> = vec![0; queues.len()];
            let mut collector = Collector::default();
            loop {
                let stopping = stop2.load(Ordering::Acquire);
                for (i, q) in queues.iter().enumerate() {
                    while batch.len() < BATCH_MAX && site.len() < BATCH_MAX {
                        let Some(QueuedEvent { seq, event: ev }) = q.pop() else { break };
                        debug_assert_eq!(seq, expected[i], "shard {i}'s events arrive once each and in order");
                        expected[i] = seq + 1;
                        if let Some(f) = site_firing(&ev) {
                            site.push(f);
                            continue;
                        }
                        match ev {
                            ShardEvent::Fired { firing, book, universe } => {
                                tracing::trace!(target: FIRING_TARGET, alert = firing.id, "taken from its shard's queue");
                                let record = FiringRecord {
                                    alert_id: firing.id as i64,
                                    price: firing.price.0,
                                    move_hundredths: firing.move_hundredths,
                                    ts_ms: firing.ts_ms,
                                    last: firing.last,
                                    level: firing.level(),
                                    wall: firing.wall(),
                                    perp: firing.perp(),
                                    symbol: None,
                                    triggers: Vec::new(),
                                };
                                if universe {
                                    // A `*` alert's: collected with its others into one body.
                                    let symbol = Some(registry.load().get(book).symbol.clone());
                                    collector.add(FiringRecord { symbol, ..record }, clock.now_ms());
                                } else {
                                    batch.push(record);
                                }
                            }
                            ShardEvent::Delisted { book, ref ids } | ShardEvent::PerpDelisted { book, ref ids } => {
                                // Earlier firings first, so nothing is recorded out of order.
                                commit(&mut store, &*texts, &mut batch, &stats2, &health, &*clock, (&mut on_committed, &mut on_ended));
                                let (registry, perp) = (registry.load(), matches!(ev, ShardEvent::PerpDelisted { .. }));
                                delist(&mut store, &*texts, (registry.get(book), perp), ids.len(), &stats2, (&health, &*clock));
                            }
                            ShardEvent::Ready { shard } => tracing::info!("shard {shard} ready"),
                            ShardEvent::MarketFired { .. } => {}
                            ShardEvent::BookCrossed { book, ts_ms } => {
                                let registry = registry.load();
                                let ins = registry.get(book);
                                tracing::warn!(
                                    "book {} {} crossed at {ts_ms}; no walls from it until rebuilt (alerts still fire on its trades)",
                                    ins.venue, ins.symbol
                                );
                            }
                        }
                    }
                }
                let now = clock.now_ms();
                // The `*` alerts' bodies that are due (all of them when stopping).
                collector.take_due(now, stopping, BATCH_MAX, &mut batch);
                if now - expiry_scanned_ms >= EXPIRY_SCAN_MS {
                    expiry_scanned_ms = now;
                    expire_due(&mut store, &*texts, &*owns, &mut *on_ended, &stats2, now);
                }
                if batch.is_empty() && site.is_empty() {
                    if stopping {
                        break;
                    }
                    std::thread::park_timeout(IDLE);
                    continue;
                }
                commit(&mut store, &*texts, &mut batch, &stats2, &health, &*clock, (&mut on_committed, &mut on_ended));
                commit_site(&mut store, &*texts, &mut site, &stats2, &health, &*clock);
            }
        })?;
        Ok(Writer { stop, thread: Some(thread), stats })
    }

    /// Drains what the queues hold, then stops. Call after the shards have stopped.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs `write` until storage takes it: its value once it commits; `None` when this node no
/// longer owns the partition (`StoreError::Fenced`: another node evaluates these alerts now
/// (`decisions.md` §14) and recording them here would record them twice, so the write is
/// dropped). Any other failure is told to `/healthz`, counted, logged with `what` and tried
/// again after [`RETRY`]; meanwhile the writer takes nothing new (its bounded queue holds what
/// the shards send, `docs/design/limits.md`).
fn until_taken<T>(
    what: &dyn Fn() -> String,
    stats: &WriterStats,
    health: &StorageHealth,
    clock: &dyn Clock,
    mut write: impl FnMut() -> Result<T, StoreError>,
) -> Option<T> {
    loop {
        let result = write();
        health.record(StorageWriter::Firings, &result, clock.now_ms());
        match result {
            Ok(v) => return Some(v),
            Err(StoreError::Fenced) => {
                tracing::error!("writer: {} dropped: {}", what(), StoreError::Fenced);
                return None;
            }
            Err(e) => {
                stats.retries.fetch_add(1, Ordering::Relaxed);
                tracing::error!("writer: committing {}: {e}; retrying", what());
                std::thread::sleep(RETRY);
            }
        }
    }
}

/// Removes a delisted pair's alerts, or (`perp`) the derivatives alerts of a pair whose
/// perpetual alone was delisted (retrying until storage takes it, unless this node no longer
/// owns the partition), with a notice to each owner.
fn delist(
    store: &mut Store,
    texts: &dyn Render,
    (ins, perp): (&rampart_engine::Instrument, bool),
    held: usize,
    stats: &WriterStats,
    (health, clock): (&StorageHealth, &dyn Clock),
) {
    let what = || format!("the delisting of {}{}", ins.symbol, if perp { "'s perpetual" } else { "" });
    let what_went = if perp { Delisting::Perp } else { Delisting::Pair };
    let write = || store.delist_of(what_went, ins.venue, &ins.symbol, clock.now_ms(), texts);
    if let Some(done) = until_taken(&what, stats, health, clock, write) {
        stats.note_inbox_write();
        tracing::info!("{}: {} alerts removed (shard held {held})", what(), done.len());
    }
}

/// Ends the owned alerts whose `expires_at` has passed (`decisions.md` §13): removed, their
/// owners told in the inbox (and Telegram), never by webhook; then `on_ended` drops them from
/// their shards. A failure is logged and tried again at the next scan.
fn expire_due(
    store: &mut Store,
    texts: &dyn Render,
    owns: &dyn Fn(&AlertRow) -> bool,
    on_ended: &mut dyn FnMut(&[AlertRow]),
    stats: &WriterStats,
    now: i64,
) {
    let due = match store.expired_alerts(now, EXPIRED_PER_SCAN_MAX) {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!("writer: looking for expired alerts: {e}; trying again");
            return;
        }
    };
    let ids: Vec<i64> = due.iter().filter(|r| owns(r)).map(|r| r.id).collect();
    if ids.is_empty() {
        return;
    }
    match store.expire(&ids, now, texts) {
        Ok(ended) if !ended.is_empty() => {
            stats.note_inbox_write();
            tracing::info!("{} alerts expired", ended.len());
            on_ended(&ended);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("writer: ending {} expired alerts: {e}; trying again", ids.len()),
    }
}

/// The record of a site alert's firing (`None` for every other event).
fn site_firing(ev: &ShardEvent) -> Option<SiteFiringRecord> {
    match *ev {
        ShardEvent::MarketFired { id, value, ts_ms, last } => {
            Some(SiteFiringRecord { alert_id: id as i64, ts_ms, last, value })
        }
        _ => None,
    }
}

/// Commits the site firings, retrying until it succeeds (or this node is fenced: dropped), then
/// empties them.
fn commit_site(
    store: &mut Store,
    texts: &dyn Render,
    site: &mut Vec<SiteFiringRecord>,
    stats: &WriterStats,
    health: &StorageHealth,
    clock: &dyn Clock,
) {
    if site.is_empty() {
        return;
    }
    let what = || format!("{} site alert firings", site.len());
    if let Some(n) = until_taken(&what, stats, health, clock, || store.record_site_firings(site, texts)) {
        stats.site_firings.fetch_add(n as u64, Ordering::Relaxed);
        stats.note_inbox_write();
    }
    site.clear();
}

/// Commits `batch`, retrying until it succeeds, then empties it; tells `on_committed` what it
/// recorded and `on_ended` the alerts that leave their shards.
fn commit(
    store: &mut Store,
    texts: &dyn Render,
    batch: &mut Vec<FiringRecord>,
    stats: &WriterStats,
    health: &StorageHealth,
    clock: &dyn Clock,
    (on_committed, on_ended): (&mut OnCommitted, &mut OnEnded),
) {
    if batch.is_empty() {
        return;
    }
    let what = || format!("{} firings", batch.len());
    if let Some(mut done) = until_taken(&what, stats, health, clock, || store.record_firings(batch, texts)) {
        if tracing::enabled!(target: FIRING_TARGET, tracing::Level::TRACE) {
            for f in batch.iter() {
                tracing::trace!(target: FIRING_TARGET, alert = f.alert_id, "committed");
            }
        }
        stats.firings.fetch_add(batch.len() as u64, Ordering::Relaxed);
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats.note_inbox_fed(std::mem::take(&mut done.inbox));
        on_committed(&done.fired, std::mem::take(&mut done.deliveries));
        let ended = done.leaving();
        if !done.paused.is_empty() {
            tracing::info!("writer: the flood guard paused {} alerts", done.paused.len());
        }
        if !ended.is_empty() {
            on_ended(&ended);
        }
    }
    batch.clear();
}
