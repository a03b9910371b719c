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
//! Key lookups never reach storage on the request path: the front reads the in-memory table
//! that [`crate::keys::KeyWatcher`] keeps current from its own thread.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::store::{Store, StoreError};

/// Longest a client request waits for storage, queueing included; past it the answer is 503.
pub const STORAGE_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Storage jobs queued for the thread at most; past it a request is answered 503 at once.
pub const STORAGE_JOBS_MAX: usize = 1_024;

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

/// Whether storage can be written: each writer's last failure and last success, and the last
/// error seen.
#[derive(Debug, Default)]
pub struct StorageHealth {
    last_fail_ms: [AtomicI64; 4],
    last_ok_ms: [AtomicI64; 4],
    since_ms: [AtomicI64; 4],
    last_error: Mutex<String>,
}

impl StorageHealth {
    /// Records the outcome of a write by `who` at `now_ms`.
    pub fn record<T>(&self, who: Writer, result: &Result<T, StoreError>, now_ms: i64) {
        let i = who as usize;
        match result {
            Ok(_) => self.last_ok_ms[i].store(now_ms, Ordering::Release),
            Err(e) => {
                if !self.failing_one(i, now_ms) {
                    self.since_ms[i].store(now_ms, Ordering::Release);
                }
                self.last_fail_ms[i].store(now_ms.max(1), Ordering::Release);
                if let Ok(mut last) = self.last_error.lock() {
                    *last = format!("{}: {e}", who.as_str());
                }
            }
        }
    }

    fn failing_one(&self, i: usize, now_ms: i64) -> bool {
        let fail = self.last_fail_ms[i].load(Ordering::Acquire);
        fail > 0 && fail >= self.last_ok_ms[i].load(Ordering::Acquire) && now_ms - fail < FAILURE_MEMORY_MS
    }

    /// True while any writer's last write failed (within [`FAILURE_MEMORY_MS`]).
    pub fn failing(&self, now_ms: i64) -> bool {
        (0..Writer::ALL.len()).any(|i| self.failing_one(i, now_ms))
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

type Job = Box<dyn FnOnce(&mut Store) + Send>;

/// The front's handle on the storage thread.
#[derive(Clone)]
pub struct StorageThread {
    jobs: SyncSender<(Instant, Job)>,
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
    /// Starts the thread over `store`.
    pub fn start(mut store: Store) -> std::io::Result<(StorageThread, StorageJoin)> {
        let (tx, rx) = sync_channel::<(Instant, Job)>(STORAGE_JOBS_MAX);
        let thread = std::thread::Builder::new().name("storage".into()).spawn(move || {
            while let Ok((deadline, job)) = rx.recv() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    // Not started in time: the request has been answered 503 already. Dropping
                    // the job drops its reply sender, which the front reads as a time-out.
                    continue;
                }
                // A lock is waited for until the deadline at most.
                if store.set_busy_timeout(left).is_err() {
                    continue;
                }
                job(&mut store);
            }
        })?;
        Ok((StorageThread { jobs: tx }, StorageJoin { thread: Some(thread) }))
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
            let _ = reply.send(f(store));
        });
        match self.jobs.try_send((Instant::now() + STORAGE_REQUEST_TIMEOUT, job)) {
            Ok(()) => {}
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
