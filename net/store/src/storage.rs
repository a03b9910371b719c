//! The front's storage thread and the process-wide record of whether storage can be written.
//!
//! The HTTP front runs on one thread; a SQLite call that meets a lock held by another process
//! (or a full disk, or a slow fsync) would stall every request behind it. So every query the
//! front makes for a client (alert create, list, delete; the inbox) runs here, on a thread with
//! its own connection, and the front awaits the answer. Each job carries a deadline: a job that
//! has not started by its deadline is not run, and one that starts waits for a lock only until
//! the deadline, so a request that cannot be served answers 503 within
//! [`STORAGE_REQUEST_TIMEOUT`] and its outcome is always known (an alert the client was told
//! failed was not stored).
//!
//! Group commit: the thread takes every job queued (up to [`GROUP_JOBS_MAX`]) and runs them in
//! one transaction, each inside its own savepoint (a failed job's writes are undone without
//! touching the others), then commits once (one fsync) and only then answers each client. An
//! acknowledged alert is therefore on disk, as before; under load many creates share one fsync.
//! If the commit fails, every job of the group is answered with the failure (503) and nothing
//! of the group is kept.
//!
//! Key lookups never reach storage on the request path: the front reads the in-memory table
//! that the front's key watcher (`api::keys`) keeps current from its own thread.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::db::DISK_FULL;
use crate::store::{Store, StoreError};

/// Longest a client request waits for storage, queueing included; past it the answer is 503.
pub const STORAGE_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Storage jobs queued for the thread at most; past it a request is answered 503 at once.
pub const STORAGE_JOBS_MAX: usize = 1_024;
/// Jobs committed together at most: whatever is queued when the thread takes work, up to this,
/// is one transaction and one fsync (the rest waits for the next group).
pub const GROUP_JOBS_MAX: usize = 64;

/// The parts of the process that write to the database, each reporting its last outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// The front's storage thread (alert create and delete).
    Front,
    /// The firing writer.
    Firings,
    /// Webhook delivery recording its attempts.
    Delivery,
    /// The checkpoint thread's once-a-second probe write.
    Probe,
}

impl Writer {
    /// Every writer.
    pub const ALL: [Writer; 4] = [Writer::Front, Writer::Firings, Writer::Delivery, Writer::Probe];

    /// The name `/healthz` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Writer::Front => "api",
            Writer::Firings => "firings",
            Writer::Delivery => "delivery",
            Writer::Probe => "probe",
        }
    }
}

/// How long a failed write counts once nothing has renewed it: the writers that retry (firings,
/// delivery, the probe) renew a lasting failure well within it, while one refused request does
/// not mark storage failing for ever.
pub const FAILURE_MEMORY_MS: i64 = 10_000;

/// Whether storage can be written: each writer's last failure, whether its latest outcome was a
/// failure (the order of outcomes decides, not their times: a success recorded in the same
/// millisecond as a failure clears it), and the last error seen.
#[derive(Debug, Default)]
pub struct StorageHealth {
    last_ok_ms: [AtomicI64; 4],
    last_fail_ms: [AtomicI64; 4],
    failed_last: [AtomicBool; 4],
    since_ms: [AtomicI64; 4],
    last_error: Mutex<String>,
    /// The last error was a write refused for lack of space.
    last_full: AtomicBool,
    /// Where the database lives, for the full disk's reason (`StoreLocation::describe`).
    location: String,
    /// The checkpoint thread's last count of rows per table and bytes, for `/metrics`.
    sizes: Mutex<crate::store::Sizes>,
}

impl StorageHealth {
    /// Health of the database at `location` (named in the full disk's reason).
    pub fn at(location: String) -> StorageHealth {
        StorageHealth { location, ..StorageHealth::default() }
    }

    /// Records the outcome of a write by `who` at `now_ms`.
    pub fn record<T>(&self, who: Writer, result: &Result<T, StoreError>, now_ms: i64) {
        let i = who as usize;
        match result {
            Ok(_) => {
                self.last_ok_ms[i].store(now_ms.max(1), Ordering::Release);
                self.failed_last[i].store(false, Ordering::Release);
            }
            Err(e) => {
                if !self.failing_one(i, now_ms) {
                    self.since_ms[i].store(now_ms, Ordering::Release);
                }
                self.last_fail_ms[i].store(now_ms.max(1), Ordering::Release);
                self.failed_last[i].store(true, Ordering::Release);
                self.last_full.store(e.is_full(), Ordering::Release);
                if let Ok(mut last) = self.last_error.lock() {
                    *last = format!("{}: {e}", who.as_str());
                }
            }
        }
    }

    /// True when a writer other than `who` recorded a successful write at or after `since_ms`.
    pub fn written_by_others_since(&self, who: Writer, since_ms: i64) -> bool {
        Writer::ALL
            .into_iter()
            .filter(|w| *w != who)
            .any(|w| self.last_ok_ms[w as usize].load(Ordering::Acquire) >= since_ms)
    }

    fn failing_one(&self, i: usize, now_ms: i64) -> bool {
        let fail = self.last_fail_ms[i].load(Ordering::Acquire);
        self.failed_last[i].load(Ordering::Acquire) && now_ms - fail < FAILURE_MEMORY_MS
    }

    /// True while any writer's last write failed (within [`FAILURE_MEMORY_MS`]).
    pub fn failing(&self, now_ms: i64) -> bool {
        (0..Writer::ALL.len()).any(|i| self.failing_one(i, now_ms))
    }

    /// The last count of rows per table and the database's bytes (empty before the first).
    pub fn sizes(&self) -> crate::store::Sizes {
        self.sizes.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// While storage cannot be written and the last failure was for lack of space: what
    /// `/healthz` says (the cause and where).
    pub fn full_reason(&self, now_ms: i64) -> Option<String> {
        if !self.failing(now_ms) || !self.last_full.load(Ordering::Acquire) {
            return None;
        }
        let at = if self.location.is_empty() { "the database" } else { &self.location };
        Some(format!("storage cannot be written: the disk is full (no space left for {at})"))
    }

    /// The writers failing at `now_ms`, when the earliest of their failures began, and the last
    /// error; `None` when storage can be written.
    pub fn report(&self, now_ms: i64) -> Option<(Vec<Writer>, i64, String)> {
        let who: Vec<Writer> = Writer::ALL.into_iter().filter(|w| self.failing_one(*w as usize, now_ms)).collect();
        let since = who.iter().map(|w| self.since_ms[*w as usize].load(Ordering::Acquire)).min()?;
        let last = self.last_error.lock().map(|s| s.clone()).unwrap_or_default();
        Some((who, since, last))
    }
}

/// What a job leaves to do once its group has ended: answer its client, with its own result
/// when the group committed, else with the commit's failure.
type Answer = Box<dyn FnOnce(Result<(), &'static str>) + Send>;
/// A client's storage work: runs inside its group's transaction and says whether it succeeded
/// (a failed job's writes are undone).
type Job = Box<dyn FnOnce(&mut Store) -> (bool, Answer) + Send>;

/// The front's handle on the storage thread.
#[derive(Clone)]
pub struct StorageThread {
    jobs: SyncSender<(Instant, Job)>,
    groups: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
}

/// The running thread; dropping every [`StorageThread`] handle ends it.
pub struct StorageJoin {
    thread: Option<JoinHandle<()>>,
}

impl StorageJoin {
    /// Waits for the thread to finish its queue (call after the front has stopped).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl StorageThread {
    /// Starts the thread over `store`, committing up to [`GROUP_JOBS_MAX`] jobs together.
    pub fn start(store: Store) -> std::io::Result<(StorageThread, StorageJoin)> {
        StorageThread::start_grouped(store, GROUP_JOBS_MAX)
    }

    /// Starts the thread over `store`, committing up to `group_max` jobs together (1: every job
    /// its own commit, the baseline `rampart-bench storage` compares against).
    pub fn start_grouped(mut store: Store, group_max: usize) -> std::io::Result<(StorageThread, StorageJoin)> {
        let group_max = group_max.clamp(1, GROUP_JOBS_MAX);
        let (tx, rx) = sync_channel::<(Instant, Job)>(STORAGE_JOBS_MAX);
        let groups = Arc::new(AtomicU64::new(0));
        let counted = groups.clone();
        let thread = std::thread::Builder::new().name("storage".into()).spawn(move || {
            let mut group = Vec::with_capacity(group_max);
            while let Ok(first) = rx.recv() {
                group.push(first);
                while group.len() < group_max {
                    match rx.try_recv() {
                        Ok(job) => group.push(job),
                        Err(_) => break,
                    }
                }
                run_group(&mut store, &mut group, &counted);
            }
        })?;
        let sent = Arc::new(AtomicU64::new(0));
        Ok((StorageThread { jobs: tx, groups, sent }, StorageJoin { thread: Some(thread) }))
    }

    /// Groups committed so far (each is one transaction and one fsync).
    pub fn groups(&self) -> u64 {
        self.groups.load(Ordering::Relaxed)
    }

    /// Jobs taken onto the queue so far.
    pub fn jobs_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Runs `f` on the storage thread and returns its result, or `Unavailable` if the queue is
    /// full or the answer does not come within [`STORAGE_REQUEST_TIMEOUT`].
    pub async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |store| {
            // A write refused for lack of space says so (the cause an operator must act on).
            let result = f(store).map_err(|e| if e.is_full() { StoreError::Unavailable(DISK_FULL) } else { e });
            let succeeded = result.is_ok();
            let answer: Answer = Box::new(move |commit| {
                let _ = reply.send(match commit {
                    Ok(()) => result,
                    Err(why) => Err(StoreError::Unavailable(why)),
                });
            });
            (succeeded, answer)
        });
        match self.jobs.try_send((Instant::now() + STORAGE_REQUEST_TIMEOUT, job)) {
            Ok(()) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) => return Err(StoreError::Unavailable("storage queue full")),
            Err(TrySendError::Disconnected(_)) => return Err(StoreError::Unavailable("storage stopped")),
        }
        // The thread answers by the deadline (it waits for locks only until then); the extra
        // second covers a job that is mid-statement at the deadline.
        match tokio::time::timeout(STORAGE_REQUEST_TIMEOUT + Duration::from_secs(1), answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) | Err(_) => Err(StoreError::Unavailable("storage did not answer in time")),
        }
    }
}

/// Runs one group: the jobs still within their deadline, each in its own savepoint, inside one
/// transaction, then answers every one of them once the commit is known. A job past its
/// deadline is dropped unrun (its client has been answered 503; dropping its reply sender is
/// read as a time-out). The lock is waited for until the earliest deadline of the group.
/// Runs one group and counts it in `groups` (before answering, so a client that has its answer
/// sees its group counted).
fn run_group(store: &mut Store, group: &mut Vec<(Instant, Job)>, groups: &AtomicU64) {
    let now = Instant::now();
    group.retain(|(deadline, _)| *deadline > now);
    let Some(earliest) = group.iter().map(|(d, _)| *d).min() else {
        groups.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let mut answers: Vec<Answer> = Vec::with_capacity(group.len());
    let began = store.begin_group_within(earliest.saturating_duration_since(now));
    let outcome = match began {
        Ok(()) => {
            for (_, job) in group.drain(..) {
                if store.begin_job().is_err() {
                    break;
                }
                let (succeeded, answer) = job(store);
                answers.push(answer);
                if store.end_job(succeeded).is_err() {
                    break;
                }
            }
            store.commit_group().map_err(|e| if e.is_full() { DISK_FULL } else { "storage could not commit" })
        }
        Err(_) => Err("storage is locked or cannot be written"),
    };
    // Jobs left unrun (a savepoint failed) drop their reply senders: a time-out to their clients.
    group.clear();
    groups.fetch_add(1, Ordering::Relaxed);
    for answer in answers {
        answer(outcome);
    }
}

/// Longest the checkpoint thread's probe write waits for a lock held elsewhere: as long as
/// every other writer waits (see [`busy`]), so the probe calls storage unwritable only when a
/// write would fail. A storm's commit of thousands of firings holds the lock for about a
/// second; with a shorter wait the probe called that an outage.
const PROBE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Pruning by age (`store::Retention`) on the checkpoint thread: every [`PRUNE_EVERY`], batches
/// of [`store::PRUNE_BATCH`](crate::store::PRUNE_BATCH) rows while a batch comes back full, at
/// most [`PRUNE_BATCHES_MAX`] a round, [`PRUNE_PAUSE`] apart, so a writer waits at most for one
/// batch's commit.
#[derive(Clone, Debug)]
pub struct Pruning {
    /// What is kept.
    pub keep: crate::store::Retention,
    /// Prune only while this is true (a cluster's api node holding the `retention` lock: one
    /// node at a time); `None`: always (the single process).
    pub gate: Option<Arc<AtomicBool>>,
}

/// How often the checkpoint thread prunes.
pub const PRUNE_EVERY: Duration = Duration::from_secs(10);
/// Batches of each kind one prune round removes at most (the rest at the next round).
pub const PRUNE_BATCHES_MAX: usize = 20;
/// The pause between two batches, so writers take the lock in between.
pub const PRUNE_PAUSE: Duration = Duration::from_millis(20);
/// The pause after a batch is at least this many times the batch's own time (pruning takes at
/// most a fifth of the thread's time and of the write lock's).
pub const PRUNE_IDLE_PER_BUSY: u32 = 4;

/// A thread that checkpoints the WAL every `period`, so the writers on the tick-to-webhook path
/// never do it themselves (see [`Store::for_background`]), and prunes what is no longer kept.
/// Stopped on drop.
pub struct Checkpointer {
    _thread: rampart_state::shutdown::StoppableThread,
}

impl Checkpointer {
    /// Starts checkpointing through `store` every `period`. Each round also writes one small
    /// probe row, so `health` knows whether storage can be written even when nothing else
    /// writes (a quiet market with a full disk).
    pub fn start(
        mut store: Store,
        period: Duration,
        health: std::sync::Arc<StorageHealth>,
        clock: rampart_state::clock::SharedClock,
        pruning: Option<Pruning>,
    ) -> std::io::Result<Checkpointer> {
        let thread = rampart_state::shutdown::StoppableThread::spawn("checkpoint", move |s| {
            // The probe must not hold the write lock for long: it waits for a lock at most
            // PROBE_BUSY_TIMEOUT, and it is not fsynced (like the firing writer's commits).
            let _ = store.set_busy_timeout(PROBE_BUSY_TIMEOUT);
            let _ = store.relax_sync();
            let mut counted = None;
            let mut pruned: Option<Instant> = None;
            while !s.load(std::sync::atomic::Ordering::Acquire) {
                // Short sleeps, so a stop is seen quickly.
                let mut slept = Duration::ZERO;
                while slept < period && !s.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                    slept += Duration::from_millis(50);
                }
                probe(&mut store, &health, clock.now_ms());
                if let Err(e) = store.checkpoint() {
                    tracing::error!("WAL checkpoint: {e}");
                }
                if counted.is_none_or(|at: std::time::Instant| at.elapsed() >= crate::store::SIZES_EVERY) {
                    counted = Some(std::time::Instant::now());
                    match store.sizes() {
                        Ok(sizes) => *health.sizes.lock().unwrap_or_else(|p| p.into_inner()) = sizes,
                        Err(e) => tracing::warn!("counting the database's rows: {e}"),
                    }
                }
                if let Some(p) = &pruning {
                    if pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY)
                        && p.gate.as_ref().is_none_or(|g| g.load(std::sync::atomic::Ordering::Acquire))
                    {
                        pruned = Some(Instant::now());
                        let total = prune_round(&store, &p.keep, || clock.now_ms(), &s);
                        if total != crate::store::Pruned::default() {
                            tracing::info!(
                                inbox = total.inbox,
                                outbox = total.outbox,
                                alerts = total.alerts,
                                site_alerts = total.site_alerts,
                                "pruned what retention no longer keeps"
                            );
                        }
                    }
                }
            }
        })?;
        Ok(Checkpointer { _thread: thread })
    }
}

/// One prune round, as the checkpoint thread runs it every [`PRUNE_EVERY`]: batches while one
/// comes back full, at most [`PRUNE_BATCHES_MAX`], [`PRUNE_PAUSE`] between them; stops early on
/// `stop`. A failure is logged and tried at the next round. What it removed.
pub fn prune_round(
    store: &Store,
    keep: &crate::store::Retention,
    now_ms: impl Fn() -> i64,
    stop: &AtomicBool,
) -> crate::store::Pruned {
    let mut total = crate::store::Pruned::default();
    for _ in 0..PRUNE_BATCHES_MAX {
        let began = Instant::now();
        match store.prune_batch(now_ms(), keep) {
            Ok(p) => {
                total.inbox += p.inbox;
                total.outbox += p.outbox;
                total.alerts += p.alerts;
                total.site_alerts += p.site_alerts;
                if !p.full() || stop.load(Ordering::Acquire) {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!("pruning: {e}; tried again in {} s", PRUNE_EVERY.as_secs());
                break;
            }
        }
        // At most a fifth of the time goes to pruning, whatever a batch costs on this machine.
        std::thread::sleep(PRUNE_PAUSE.max(began.elapsed() * PRUNE_IDLE_PER_BUSY));
    }
    total
}

/// Writes the probe row and records the outcome in `health`.
///
/// A probe that finds the database locked for its whole wait while other writers commit (a
/// sustained burst of alert creates or firings can take the lock back after every commit, and
/// SQLite's waiting is not fair) counts as a success: storage was written meanwhile. The probe
/// is there to notice storage that cannot be written when nothing else writes.
fn probe(store: &mut Store, health: &StorageHealth, now: i64) {
    let mut probe = store.probe_write(now);
    if probe.as_ref().is_err_and(StoreError::is_busy) && health.written_by_others_since(Writer::Probe, now) {
        probe = Ok(());
    }
    if let Err(e) = &probe {
        if !health.failing(now) {
            tracing::error!("storage cannot be written: {e}");
        }
    }
    health.record(Writer::Probe, &probe, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{on_each_backend, NewAlert, TestDb};
    use rampart_engine::alert::{Condition, Cross};
    use rampart_engine::{Price, Venue};

    #[test]
    fn a_probe_waits_out_a_lock_held_for_a_storm_commit() {
        let dir = std::env::temp_dir().join(format!("rampart-storage-probe-busy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut prober = Store::open(&dir).expect("open");
        prober.set_busy_timeout(PROBE_BUSY_TIMEOUT).expect("timeout");
        let health = StorageHealth::default();
        let (locked, wait) = std::sync::mpsc::channel();
        let d = dir.clone();
        let holder = std::thread::spawn(move || {
            let holder = Store::open(&d).expect("open");
            holder.lite().execute_batch("BEGIN IMMEDIATE").expect("lock");
            locked.send(()).expect("signal");
            // Longer than the probe used to wait (500 ms); a large firing commit takes as long.
            std::thread::sleep(Duration::from_millis(800));
            holder.lite().execute_batch("COMMIT").expect("unlock");
        });
        wait.recv().expect("the lock is held");
        probe(&mut prober, &health, 1_000);
        assert!(!health.failing(1_000), "a lock held for a commit is not an outage");
        holder.join().expect("holder");
        // A lock held past the probe's whole wait: an outage, unless another writer committed
        // meanwhile (a sustained burst that keeps taking the lock back after each commit).
        prober.set_busy_timeout(Duration::from_millis(30)).expect("timeout");
        let conn = Store::open(&dir).expect("open");
        conn.lite().execute_batch("BEGIN IMMEDIATE").expect("lock");
        probe(&mut prober, &health, 2_000);
        assert!(health.failing(2_000), "locked out and nobody else wrote");
        health.record(Writer::Front, &Ok::<(), StoreError>(()), 2_100);
        probe(&mut prober, &health, 2_050);
        assert!(!health.failing(2_100), "locked out while the front committed: storage is being written");
        conn.lite().execute_batch("COMMIT").expect("unlock");
        // A real failure is still recorded: a read-only connection refuses the probe.
        prober.lite().execute_batch("PRAGMA query_only = ON").expect("read only");
        probe(&mut prober, &health, 3_000);
        assert!(health.failing(3_000));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn storage_health_follows_the_order_of_outcomes_and_forgets_an_old_failure() {
        let h = StorageHealth::default();
        let refused: Result<(), StoreError> = Err(StoreError::TooNew { found: 9, known: 1 });
        h.record(Writer::Firings, &refused, 1_000);
        assert!(h.failing(1_000));
        let report = h.report(1_500).expect("failing");
        assert_eq!((report.0, report.1), (vec![Writer::Firings], 1_000));
        // A success in the same millisecond as the failure clears it: the later outcome counts.
        h.record(Writer::Firings, &Ok::<(), StoreError>(()), 1_000);
        assert!(!h.failing(1_000));
        h.record(Writer::Firings, &refused, 2_000);
        assert!(h.failing(2_000 + FAILURE_MEMORY_MS - 1));
        assert!(!h.failing(2_000 + FAILURE_MEMORY_MS), "a failure nothing renews is forgotten");
    }

    fn account_store(at: &TestDb) -> (Store, i64) {
        let mut store = at.open();
        let account = store.create_account_with_key("free", None, 1).expect("account").account_id;
        (store, account)
    }

    fn alert(account_id: i64, price: i64) -> NewAlert {
        NewAlert {
            account_id,
            exchange: Venue::Binance,
            symbol: "BTCUSDT".into(),
            condition: Condition::Price { cross: Cross::Above, level: Price(price) },
            repeat: false,
            note: String::new(),
            webhook_url: None,
            created_price: 1,
            created_ms: 1,
            expires_ms: None,
            cooldown_s: 0,
            max_fires: None,
            message: None,
            webhook_format: crate::store::WebhookFormat::Json,
        }
    }

    /// Holds the storage thread busy until the returned sender is used (or 10 s pass), so that
    /// jobs sent meanwhile queue up and run as one group; awaits the hold's start.
    async fn hold(thread: &StorageThread) -> std::sync::mpsc::Sender<()> {
        let (started, running) = tokio::sync::oneshot::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let t = thread.clone();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        std::thread::spawn(move || {
            runtime.block_on(async {
                let _ = t
                    .run(move |_| {
                        let _ = started.send(());
                        let _ = released.recv_timeout(Duration::from_secs(10));
                        Ok(())
                    })
                    .await;
            })
        });
        running.await.expect("the hold started");
        release
    }

    /// Waits until `n` jobs in all were queued, then ends the hold.
    async fn release_after(thread: &StorageThread, n: u64, release: std::sync::mpsc::Sender<()>) {
        while thread.jobs_sent() < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let _ = release.send(());
    }

    #[test]
    fn queued_jobs_commit_together_and_are_answered_after_the_commit() {
        on_each_backend("storage-group", |at| {
            let (store, account) = account_store(at);
            let (thread, join) = StorageThread::start(store).expect("start");
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let ids = runtime.block_on(async {
                let release = hold(&thread).await;
                let mut set = tokio::task::JoinSet::new();
                for i in 1..=40 {
                    let (t, a) = (thread.clone(), alert(account, 1_000 + i));
                    set.spawn(async move { t.run(move |s| s.insert_alert(&a)).await });
                }
                release_after(&thread, 41, release).await;
                let mut ids = Vec::new();
                while let Some(r) = set.join_next().await {
                    ids.push(r.expect("task").expect("inserted").id);
                }
                ids
            });
            assert_eq!(ids.len(), 40);
            // The hold, then the 40 inserts: two groups, so 40 creates paid for one commit.
            assert_eq!(thread.groups(), 2);
            // Answered after the commit: another connection sees every row at once.
            let other = at.open();
            for id in ids {
                assert!(other.alert(id).expect("read").is_some(), "alert {id} acknowledged but not committed");
            }
            drop(thread);
            join.join();
        });
    }

    #[test]
    fn a_failed_job_is_undone_alone() {
        on_each_backend("storage-undo", |at| {
            let (store, account) = account_store(at);
            let (thread, join) = StorageThread::start(store).expect("start");
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let (a, b, c) = runtime.block_on(async {
                let release = hold(&thread).await;
                let (a1, b1, c1) = (alert(account, 10), alert(account, 20), alert(account, 30));
                let a = thread.run(move |s| s.insert_alert(&a1));
                let b = thread.run(move |s| {
                    let row = s.insert_alert(&b1)?;
                    Err::<(), _>(StoreError::Unavailable(if row.id > 0 { "refused after writing" } else { "" }))
                });
                let c = thread.run(move |s| s.insert_alert(&c1));
                let (a, b, c, ()) = tokio::join!(a, b, c, release_after(&thread, 4, release));
                (a, b, c)
            });
            let (a, c) = (a.expect("a").id, c.expect("c").id);
            assert!(matches!(b, Err(StoreError::Unavailable("refused after writing"))), "{b:?}");
            assert_eq!(thread.groups(), 2, "the three jobs ran as one group");
            let other = at.open();
            let prices: Vec<i64> = other
                .list_alerts(account, crate::store::StatusFilter::All)
                .expect("list")
                .iter()
                .map(|r| match r.condition {
                    Condition::Price { level, .. } => level.0,
                    _ => 0,
                })
                .collect();
            assert_eq!(prices, [10, 30], "the failed job's row is gone, the others stay (ids {a}, {c})");
            drop(thread);
            join.join();
        });
    }

    #[test]
    fn health_is_failing_while_any_writer_last_failed() {
        let h = StorageHealth::default();
        assert!(!h.failing(0) && h.report(0).is_none());
        let err: Result<(), StoreError> = Err(StoreError::Unavailable("x"));
        h.record(Writer::Firings, &err, 1_000);
        h.record(Writer::Probe, &err, 2_000);
        let (who, since, last) = h.report(2_000).expect("failing");
        assert_eq!((who, since), (vec![Writer::Firings, Writer::Probe], 1_000));
        assert!(last.starts_with("probe: "), "{last}");
        h.record(Writer::Firings, &Ok(()), 3_000);
        assert!(h.failing(3_000), "the probe still fails");
        h.record(Writer::Probe, &Ok(()), 4_000);
        assert!(!h.failing(4_000) && h.report(4_000).is_none());
        h.record(Writer::Front, &err, 5_000);
        assert_eq!(h.report(5_000).map(|r| r.1), Some(5_000), "a new failure starts a new period");
        assert!(h.failing(5_000 + FAILURE_MEMORY_MS - 1));
        assert!(!h.failing(5_000 + FAILURE_MEMORY_MS), "a failure nothing renews is forgotten");
        h.record(Writer::Delivery, &err, 6_000);
        h.record(Writer::Delivery, &err, 6_100);
        assert_eq!(h.report(6_100).map(|r| r.1), Some(5_000), "renewed failures keep their start");
    }

    #[test]
    fn a_write_refused_for_lack_of_space_is_named_with_where() {
        // SQLite's own refusal: a database that may not grow past its pages.
        let conn = rusqlite::Connection::open_in_memory().expect("sqlite");
        conn.execute_batch("CREATE TABLE t (b BLOB); PRAGMA max_page_count = 2;").expect("schema");
        let full = conn.execute("INSERT INTO t VALUES (zeroblob(100000))", []).map_err(StoreError::from);
        let full = full.expect_err("no room");
        assert!(full.is_full(), "{full}");
        assert!(StoreError::Unavailable(DISK_FULL).is_full() && !StoreError::Unavailable("x").is_full());
        let h = StorageHealth::at("/srv/rampart/rampart.db".into());
        h.record(Writer::Probe, &Err::<(), _>(StoreError::Unavailable("locked")), 1_000);
        assert_eq!(h.full_reason(1_000), None, "another failure is not a full disk");
        h.record(Writer::Probe, &Err::<(), _>(full), 2_000);
        let said = h.full_reason(2_000).expect("full");
        assert_eq!(said, "storage cannot be written: the disk is full (no space left for /srv/rampart/rampart.db)");
        h.record(Writer::Probe, &Ok(()), 3_000);
        assert_eq!(h.full_reason(3_000), None, "space again");
    }
}
