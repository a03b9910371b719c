//! The threads that make the attempts: the sender decides which delivery starts and when (every
//! bound and every account's share in one place: `Holdings`), and hands each attempt to one of
//! `threads` lanes, each a thread with its own single-threaded executor and its own keep-alive
//! pool, which sends it and hands the result back (`decisions.md` §6, issue #59 item 4).
//!
//! An attempt goes to the lane with the fewest attempts in flight (the lowest index among
//! equals): the decisions need no partition, so one account's storm is spread over every lane.
//! A cut (`fair`) and an answer race for the attempt's claim: whichever takes it first decides,
//! so a cut attempt's result is never recorded and a result that was on its way is never cut.
//!
//! Bounds: a lane's queue holds only attempts the sender started, so it is bounded by the
//! sender's `in_flight_max`; lanes are at most [`LANES_MAX`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use rampart_store::store::{AttemptResult, Channel, OutboxRow};
use rampart_store::writer::FIRING_TARGET;
use tokio::sync::{mpsc, oneshot};

use crate::attempt::{attempt, outcome_label, Target};
use crate::metrics::WebhookMetrics;
use crate::pool::Pool;

/// An attempt's result on its way back to the sender: the delivery, which attempt of it (a cut
/// attempt's token is gone from the sender's `in_flight`), the result and how long it took (ms).
pub(crate) type Answered = (i64, u64, AttemptResult, i64);

/// Lanes at most (a setting beyond it is refused at start-up).
pub const LANES_MAX: usize = 64;

/// What a lane needs to build its [`Target`] (the pool is the lane's own).
#[derive(Clone)]
pub(crate) struct TargetParts {
    pub(crate) allow_private: bool,
    pub(crate) timeout: std::time::Duration,
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    pub(crate) telegram: Option<crate::telegram::TelegramChannel>,
}

/// One attempt handed to a lane.
pub(crate) struct Job {
    pub(crate) row: OutboxRow,
    /// The secrets that sign it (none for a Telegram message or an unsigned account).
    pub(crate) signing: Vec<String>,
    pub(crate) now_ms: i64,
    /// Which attempt this is (the sender's count).
    pub(crate) token: u64,
    /// Taken by the answer or by a cut, whichever comes first.
    pub(crate) claim: Arc<AtomicBool>,
    /// Resolves when the sender cuts the attempt (or drops it at stop).
    pub(crate) cancel: oneshot::Receiver<()>,
}

/// The attempt as the sender holds it while it is in flight: how to cut it.
pub(crate) struct Handle {
    /// Which lane runs it.
    pub(crate) lane: usize,
    claim: Arc<AtomicBool>,
    cancel: Option<oneshot::Sender<()>>,
}

impl Handle {
    /// Cuts the attempt unless its answer took the claim first. Whether it was cut.
    pub(crate) fn cut(&mut self) -> bool {
        if self.claim.swap(true, Ordering::AcqRel) {
            return false;
        }
        if let Some(cancel) = self.cancel.take() {
            let _ = cancel.send(());
        }
        true
    }
}

/// The running lanes and the attempts each has in flight.
pub(crate) struct Lanes {
    queues: Vec<mpsc::UnboundedSender<Job>>,
    busy: Vec<usize>,
    threads: Vec<JoinHandle<()>>,
}

impl Lanes {
    /// Starts `n` lanes (1 ..= [`LANES_MAX`]); each sends its attempts' results to `results`.
    pub(crate) fn start(
        n: usize,
        parts: &TargetParts,
        metrics: Option<WebhookMetrics>,
        results: &mpsc::UnboundedSender<Answered>,
    ) -> std::io::Result<Lanes> {
        assert!((1..=LANES_MAX).contains(&n), "delivery threads: 1 to {LANES_MAX}");
        let mut lanes = Lanes { queues: Vec::with_capacity(n), busy: vec![0; n], threads: Vec::with_capacity(n) };
        for i in 0..n {
            let (tx, rx) = mpsc::unbounded_channel();
            let (parts, metrics, results) = (parts.clone(), metrics.clone(), results.clone());
            let thread = std::thread::Builder::new()
                .name(format!("delivery-{i}"))
                .spawn(move || lane(rx, parts, metrics, results))?;
            lanes.queues.push(tx);
            lanes.threads.push(thread);
        }
        Ok(lanes)
    }

    /// Hands an attempt to the least busy lane; the handle that can cut it.
    pub(crate) fn send(&mut self, row: OutboxRow, signing: Vec<String>, now_ms: i64, token: u64) -> Handle {
        let lane = (0..self.busy.len()).min_by_key(|&i| self.busy[i]).unwrap_or(0);
        let claim = Arc::new(AtomicBool::new(false));
        let (cancel, cancelled) = oneshot::channel();
        let job = Job { row, signing, now_ms, token, claim: claim.clone(), cancel: cancelled };
        // A lane ends only when this sender drops its queue: the send cannot fail before.
        let sent = self.queues[lane].send(job).is_ok();
        debug_assert!(sent, "a lane ended while the sender runs");
        self.busy[lane] += 1;
        Handle { lane, claim, cancel: Some(cancel) }
    }

    /// An attempt of `lane` ended (answered or cut).
    pub(crate) fn ended(&mut self, lane: usize) {
        debug_assert!(self.busy[lane] > 0, "a lane's count of attempts went below zero");
        self.busy[lane] = self.busy[lane].saturating_sub(1);
    }

    /// Stops the lanes: attempts in flight are abandoned (their rows stay pending).
    pub(crate) fn stop(self) {
        drop(self.queues);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// A lane's thread: runs each job it is handed until the sender drops its queue.
fn lane(
    mut jobs: mpsc::UnboundedReceiver<Job>,
    parts: TargetParts,
    metrics: Option<WebhookMetrics>,
    results: mpsc::UnboundedSender<Answered>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("delivery: a lane has no runtime: {e}");
            return;
        }
    };
    let target = Target {
        allow_private: parts.allow_private,
        timeout: parts.timeout,
        tls: parts.tls,
        pool: Pool::default(),
        telegram: parts.telegram,
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        while let Some(job) = jobs.recv().await {
            let (target, metrics, results) = (target.clone(), metrics.clone(), results.clone());
            tokio::task::spawn_local(run_job(job, target, metrics, results));
        }
    });
}

/// One attempt on a lane; its result goes back unless a cut took the claim first.
async fn run_job(job: Job, target: Target, metrics: Option<WebhookMetrics>, results: mpsc::UnboundedSender<Answered>) {
    let Job { row, signing, now_ms, token, claim, cancel } = job;
    let started = std::time::Instant::now();
    let result = tokio::select! {
        r = attempt(&row, &target, &signing, now_ms) => r,
        _ = cancel => return,
    };
    if claim.swap(true, Ordering::AcqRel) {
        return;
    }
    tracing::trace!(target: FIRING_TARGET, alert = row.alert_id, outcome = outcome_label(&result), "attempt answered");
    match (metrics, row.channel) {
        (Some(m), Channel::Webhook) => m.observe(outcome_label(&result), started.elapsed().as_secs_f64()),
        (Some(m), Channel::Telegram) => m.observe_telegram(outcome_label(&result)),
        (None, _) => {}
    }
    let _ = results.send((row.id, token, result, started.elapsed().as_millis() as i64));
}
