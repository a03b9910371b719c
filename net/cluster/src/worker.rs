//! A delivery worker (`rampart deliver`): takes firings from the stream's shared consumer, up to
//! [`IN_FLIGHT_MAX`] at a time (a receiver that never answers holds one attempt for its timeout,
//! not the worker), sends each with the same attempt as the single server's sender
//! (`delivery::attempt`: SSRF guard, timeout, kept connections, Telegram), records the outcome
//! in the shared database, and only then answers the stream: acknowledged when the row is
//! settled (delivered, or failed for good), asked again after the schedule's delay when it is
//! rescheduled.
//!
//! A worker that dies mid-attempt leaves its firing unanswered; the stream gives it to another
//! worker after [`ACK_WAIT`] (at least once). A worker given a row that is already settled (an
//! outcome recorded just before a crash) acknowledges it without sending.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::health::WorkerStats;
use super::{BusNames, Firing, FiringBus, FiringWorker};
use rampart_delivery::pool::Pool;
use rampart_delivery::{attempt, DeliveryConfig, Target};
use rampart_outbound::tls_config;
use rampart_state::clock::SharedClock;
use rampart_state::shutdown::StoppableThread;
use rampart_store::store::Store;

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
    let target = Rc::new(Target {
        allow_private: config.allow_private,
        timeout: config.attempt_timeout,
        tls: tls_config(&config.extra_roots_der),
        pool: Pool::default(),
        telegram: config.telegram.clone(),
    });
    let store = Rc::new(store);
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
                for firing in firings {
                    let Some(p) = permit.take().or_else(|| slots.clone().try_acquire_owned().ok()) else { break };
                    let (store, target, clock, stats) = (store.clone(), target.clone(), clock.clone(), stats.clone());
                    stats.in_hand.inc();
                    tokio::task::spawn_local(async move {
                        handle(&store, &target, firing, &clock, &stats).await;
                        stats.in_hand.dec();
                        drop(p);
                    });
                }
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

/// Sends one firing and answers the stream once its outcome is recorded.
async fn handle(store: &Store, target: &Target, firing: Firing, clock: &SharedClock, stats: &WorkerStats) {
    let Some(id) = std::str::from_utf8(firing.body()).ok().and_then(|s| s.parse::<i64>().ok()) else {
        tracing::error!(firing = firing.id, "deliver: a firing without a delivery id; dropped");
        answer(firing.done().await);
        return;
    };
    let read = store.outbox_row(id);
    stats.storage(read.is_ok(), clock.now_ms());
    let row = match read {
        Ok(Some(row)) if row.state == "pending" => row,
        Ok(_) => return answer(firing.done().await),
        Err(e) => {
            tracing::warn!(delivery = id, "deliver: reading the outbox: {e}");
            return answer(firing.retry_in(STORAGE_RETRY).await);
        }
    };
    let now = clock.now_ms();
    let secrets = match row.channel {
        rampart_store::store::Channel::Webhook => store.webhook_secrets(row.account_id, now),
        rampart_store::store::Channel::Telegram => Ok(Vec::new()),
    };
    let Ok(secrets) =
        secrets.inspect_err(|e| tracing::warn!(delivery = id, "deliver: reading the signing secret: {e}"))
    else {
        return answer(firing.retry_in(STORAGE_RETRY).await);
    };
    let started = std::time::Instant::now();
    let result = attempt(&row, target, &secrets, now).await;
    let now = clock.now_ms();
    let recorded = store.record_attempt(id, &result, now, started.elapsed().as_millis() as i64);
    stats.storage(recorded.is_ok(), now);
    if let Err(e) = recorded {
        // Not recorded: sent again (at least once), after a short wait.
        tracing::warn!(delivery = id, "deliver: recording the outcome: {e}");
        return answer(firing.retry_in(STORAGE_RETRY).await);
    }
    match store.outbox_row(id) {
        Ok(Some(r)) if r.state == "pending" => {
            stats.rescheduled.inc();
            let delay = Duration::from_millis(u64::try_from(r.next_attempt_ms - now).unwrap_or(0));
            answer(firing.retry_in(delay).await);
        }
        _ => {
            match result {
                rampart_store::store::AttemptResult::Delivered { .. } => stats.delivered.inc(),
                rampart_store::store::AttemptResult::Failed { .. } => stats.failed.inc(),
            };
            answer(firing.done().await);
        }
    }
}

/// An answer the stream did not take leaves the firing to be redelivered after the ack wait.
fn answer(done: Result<(), super::BusError>) {
    if let Err(e) = done {
        tracing::warn!("deliver: {e} (the firing will be delivered again)");
    }
}
