//! A delivery worker (`rampart deliver`): takes firings from the stream's shared consumer, up to
//! [`IN_FLIGHT_MAX`] at a time (a receiver that never answers holds one attempt for its timeout,
//! not the worker), sends each with the same attempt as the single server's sender
//! (`delivery::attempt`: SSRF guard, timeout, kept connections, Telegram), records the outcome
//! in the shared database, and only then answers the stream: acknowledged when the row is
//! settled (delivered, or failed for good), asked again after the schedule's delay when it is
//! rescheduled.
//!
//! Storage in groups: a fetched batch's deliveries and their accounts' signing secrets are read
//! in one pipelined round trip each; the outcomes that have arrived are recorded together in
//! one transaction by the thread's recorder task (as the single server's sender records its
//! outcomes), so a delivery costs a share of a few round trips, not several of its own.
//!
//! A worker that dies mid-attempt leaves its firing unanswered; the stream gives it to another
//! worker after [`ACK_WAIT`] (at least once). A worker given a row that is already settled (an
//! outcome recorded just before a crash) acknowledges it without sending.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::health::WorkerStats;
use super::{BusNames, Firing, FiringBus, FiringWorker};
use rampart_delivery::pool::Pool;
use rampart_delivery::{attempt, DeliveryConfig, Target};
use rampart_outbound::tls_config;
use rampart_state::clock::SharedClock;
use rampart_state::shutdown::StoppableThread;
use rampart_store::store::{AttemptResult, Channel, Outcome, Store};

/// How long a worker may hold a firing unanswered before the stream gives it to another: one
/// attempt's timeout and the recording of its outcome, with room.
pub const ACK_WAIT: Duration = Duration::from_secs(30);

/// How long a fetch waits for a firing (the worker checks its stop flag in between).
const FETCH_WAIT: Duration = Duration::from_millis(500);

/// Firings one worker thread holds at once (attempts in flight). At the bound it fetches no
/// more until one is answered; the stream keeps the rest for the other workers.
pub const IN_FLIGHT_MAX: usize = 64;

/// How often an idle worker makes sure its consumer still exists on the server.
const CHECK_EVERY: Duration = Duration::from_secs(2);

/// How soon a firing is asked again when storage could not read or record it.
const STORAGE_RETRY: Duration = Duration::from_secs(1);

/// One worker thread; stopped on drop (a firing in hand is left unanswered: redelivered).
pub struct DeliveryWorker {
    _thread: StoppableThread,
}

impl DeliveryWorker {
    /// Starts a worker on the stream at `url`, recording outcomes through `store` and what it
    /// does in `stats`.
    pub fn start(
        store: Store,
        url: String,
        names: BusNames,
        config: DeliveryConfig,
        clock: SharedClock,
        stats: Arc<WorkerStats>,
    ) -> std::io::Result<DeliveryWorker> {
        // The connection pool is per thread (`Rc`): the attempts run on this thread's set.
        let thread = super::spawn_async("deliver", move |stop| async move {
            run(store, &url, names, &config, &clock, &stop, &stats).await;
        })?;
        Ok(DeliveryWorker { _thread: thread })
    }
}

async fn run(
    store: Store,
    url: &str,
    names: BusNames,
    config: &DeliveryConfig,
    clock: &SharedClock,
    stop: &Arc<AtomicBool>,
    stats: &Arc<WorkerStats>,
) {
    let target = Target {
        allow_private: config.allow_private,
        timeout: config.attempt_timeout,
        tls: tls_config(&config.extra_roots_der),
        pool: Pool::default(),
        telegram: config.telegram.clone(),
    };
    let (attempted, arrived) = mpsc::channel(IN_FLIGHT_MAX);
    let (clock, stats) = (clock.clone(), stats.clone());
    let shared = Rc::new(Worker { store, target, clock, stats: stats.clone(), attempted });
    tokio::task::spawn_local(record(shared.clone(), arrived));
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT_MAX));
    let mut worker: Option<FiringWorker> = None;
    let mut failing = false;
    let mut checked = std::time::Instant::now();
    // The worker's link counted in `stats.connected`.
    let mut linked = false;
    while !stop.load(Ordering::Acquire) {
        let Some(w) = &mut worker else {
            match connect(url, &names).await {
                Ok(w) => {
                    stats.connected.inc();
                    linked = true;
                    worker = Some(w);
                }
                Err(e) => {
                    if !failing {
                        tracing::error!("deliver: {e}; trying again");
                    }
                    failing = true;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
            continue;
        };
        // `/healthz` counts a worker connected only while its NATS link is up.
        let up = w.connected();
        if up != linked {
            linked = up;
            if up {
                stats.connected.inc();
            } else {
                tracing::warn!("deliver: NATS is unreachable; the client reconnects");
                stats.connected.dec();
            }
        }
        // Wait for room, then take as many firings as there is room for.
        let Ok(first) = slots.clone().acquire_owned().await else { return };
        let room = slots.available_permits() + 1;
        match w.next_batch(room, FETCH_WAIT).await {
            // Nothing due: every few seconds, make sure the consumer is still there.
            Ok(firings) if firings.is_empty() && checked.elapsed() > CHECK_EVERY => {
                checked = std::time::Instant::now();
                if let Err(e) = w.check().await {
                    tracing::warn!("deliver: {e}; reconnecting");
                    if std::mem::take(&mut linked) {
                        stats.connected.dec();
                    }
                    worker = None;
                }
            }
            Ok(firings) => {
                failing = false;
                let mut permit = Some(first);
                let mut taken = Vec::with_capacity(firings.len());
                for firing in firings {
                    let Some(p) = permit.take().or_else(|| slots.clone().try_acquire_owned().ok()) else { break };
                    stats.in_hand.inc();
                    taken.push((firing, p));
                }
                start_batch(&shared, taken);
            }
            Err(e) => {
                tracing::warn!("deliver: {e}; reconnecting");
                if std::mem::take(&mut linked) {
                    stats.connected.dec();
                }
                worker = None;
            }
        }
    }
}

async fn connect(url: &str, names: &BusNames) -> Result<FiringWorker, super::BusError> {
    FiringBus::connect(url, names.clone()).await?.worker(ACK_WAIT).await
}

/// A firing whose attempt has ended, on its way to the recorder: the slot it holds is freed
/// once the stream has its answer.
struct Attempted {
    firing: Firing,
    slot: OwnedSemaphorePermit,
    outcome: Outcome,
}

/// What a worker thread shares among its tasks.
struct Worker {
    store: Store,
    target: Target,
    clock: SharedClock,
    stats: Arc<WorkerStats>,
    /// To the recorder; bounded by the slots (at most [`IN_FLIGHT_MAX`] attempts exist).
    attempted: mpsc::Sender<Attempted>,
}

/// The delivery id a firing carries (its body).
fn delivery_id(firing: &Firing) -> Option<i64> {
    std::str::from_utf8(firing.body()).ok().and_then(|s| s.parse::<i64>().ok())
}

/// Answers `firing` (acknowledged, or asked again after `retry`) on a task of its own, then
/// frees its slot.
fn answer_later(w: &Rc<Worker>, firing: Firing, slot: OwnedSemaphorePermit, retry: Option<Duration>) {
    let w = w.clone();
    tokio::task::spawn_local(async move {
        answer(match retry {
            Some(delay) => firing.retry_in(delay).await,
            None => firing.done().await,
        });
        w.stats.in_hand.dec();
        drop(slot);
    });
}

/// Starts a fetched batch: its deliveries and their accounts' signing secrets read in one
/// round trip each, then an attempt task per pending delivery (whose outcome goes to the
/// recorder); a delivery already settled, or gone, is acknowledged without sending.
fn start_batch(w: &Rc<Worker>, taken: Vec<(Firing, OwnedSemaphorePermit)>) {
    let ids: Vec<i64> = taken.iter().filter_map(|(f, _)| delivery_id(f)).collect();
    let now = w.clock.now_ms();
    let read = w.store.outbox_rows(&ids).and_then(|rows| {
        let mut accounts: Vec<i64> =
            rows.iter().flatten().filter(|r| r.channel == Channel::Webhook).map(|r| r.account_id).collect();
        accounts.sort_unstable();
        accounts.dedup();
        let secrets = w.store.webhook_secrets_of(&accounts, now)?;
        Ok((rows, accounts.into_iter().zip(secrets).collect::<HashMap<i64, Vec<String>>>()))
    });
    w.stats.storage(read.is_ok(), now);
    let (rows, secrets) = match read {
        Ok(read) => read,
        Err(e) => {
            tracing::warn!("deliver: reading the outbox: {e}");
            return taken.into_iter().for_each(|(f, slot)| answer_later(w, f, slot, Some(STORAGE_RETRY)));
        }
    };
    let mut rows = rows.into_iter();
    for (firing, slot) in taken {
        if delivery_id(&firing).is_none() {
            tracing::error!(firing = firing.id, "deliver: a firing without a delivery id; dropped");
            answer_later(w, firing, slot, None);
            continue;
        }
        let row = match rows.next().flatten() {
            Some(row) if row.state == "pending" => row,
            _ => {
                answer_later(w, firing, slot, None);
                continue;
            }
        };
        let secrets = secrets.get(&row.account_id).cloned().unwrap_or_default();
        let w = w.clone();
        tokio::task::spawn_local(async move {
            let started = std::time::Instant::now();
            let result = attempt(&row, &w.target, &secrets, w.clock.now_ms()).await;
            let latency_ms = started.elapsed().as_millis() as i64;
            let outcome = Outcome { id: row.id, result, at_ms: w.clock.now_ms(), latency_ms };
            // The recorder outlives every attempt task of its thread.
            let _ = w.attempted.send(Attempted { firing, slot, outcome }).await;
        });
    }
}

/// The recorder: takes the outcomes that have arrived (up to [`IN_FLIGHT_MAX`]), records them in
/// one transaction, then answers each firing: acknowledged when settled, asked again at the
/// schedule's time when rescheduled, and (storage failed) asked again after
/// [`STORAGE_RETRY`], so it is sent again (at least once).
async fn record(w: Rc<Worker>, mut arrived: mpsc::Receiver<Attempted>) {
    let mut group = Vec::with_capacity(IN_FLIGHT_MAX);
    while arrived.recv_many(&mut group, IN_FLIGHT_MAX).await > 0 {
        let outcomes: Vec<Outcome> = group.iter().map(|a| a.outcome.clone()).collect();
        let recorded = w.store.record_attempts(&outcomes);
        let now = w.clock.now_ms();
        w.stats.storage(recorded.is_ok(), now);
        let due = match recorded {
            Ok(due) => due.into_iter().map(Ok).collect(),
            Err(e) => {
                tracing::warn!("deliver: recording {} outcomes: {e}", group.len());
                vec![Err(()); group.len()]
            }
        };
        debug_assert_eq!(due.len(), group.len(), "an answer per outcome");
        for (a, due) in group.drain(..).zip(due) {
            let retry = match due {
                Err(()) => Some(STORAGE_RETRY),
                Ok(Some(next)) => {
                    w.stats.rescheduled.inc();
                    Some(Duration::from_millis(u64::try_from(next - now).unwrap_or(0)))
                }
                Ok(None) => {
                    match a.outcome.result {
                        AttemptResult::Delivered { .. } => w.stats.delivered.inc(),
                        AttemptResult::Failed { .. } => w.stats.failed.inc(),
                    };
                    None
                }
            };
            answer_later(&w, a.firing, a.slot, retry);
        }
    }
}

/// An answer the stream did not take leaves the firing to be redelivered after the ack wait.
fn answer(done: Result<(), super::BusError>) {
    if let Err(e) = done {
        tracing::warn!("deliver: {e} (the firing will be delivered again)");
    }
}
