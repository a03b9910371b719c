//! Hands committed outbox rows to the firings stream (`serve --nats`): a thread reads the
//! pending rows not yet published, publishes each (the row id as the body, the firing's id as
//! the message id), waits for the stream's acknowledgements, then marks them published.
//!
//! Nothing is lost between the commit and the stream: a row is marked only after the stream
//! stored it, so a crash or a NATS outage in between leaves it unpublished and it is published
//! again; a repeat within the stream's duplicate window is dropped by the stream, and a worker
//! that gets a row already settled acknowledges it without sending (`worker`).
//!
//! A row its own writer committed goes with the whole webhook delivery in its message
//! (`rampart_store::handoff`: the first time this node publishes it, within 3 s of the commit),
//! so a worker sends its first delivery without reading the row (issue #59); any other publish
//! of a row carries its id alone.
//!
//! Nor between the stream and a worker when the stream itself is lost (a NATS server that came
//! back without its store, a stream deleted by hand): every [`STREAM_CHECK`] and at every
//! connect the thread reads the stream's creation time, and when it is not the one the outbox's
//! marks refer to (`Store::firings_stream_is`), the rows still pending are unmarked and
//! published again to the stream as it is now.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{wire, BusNames, FiringBus, Outgoing};
use rampart_state::clock::SharedClock;
use rampart_state::shutdown::StoppableThread;
use rampart_store::handoff::Handoff;
use rampart_store::store::{Channel, Store, Unpublished};

/// Rows read and published per round at most: a writer's whole batch
/// (`rampart_store::writer::BATCH_MAX`), published with every acknowledgement awaited together
/// and marked in two statements (issue #59).
pub const PUBLISH_BATCH_MAX: u32 = 4_096;

/// How long the thread waits, when nothing is waiting, before it looks again without being
/// woken: the latency it adds, at most, to rows another process wrote (another market node's,
/// an api node's site market alerts). This process's writer wakes it at each commit of rows
/// to deliver, so its own firings wait for no poll.
pub const IDLE_POLL: Duration = Duration::from_millis(50);

/// How long another partition's rows wait before this node's publisher hands them over
/// (`Store::unpublished`): each market node publishes its own writer's rows, so a storm's rows
/// go to the stream once, not once per node (issue #59: two publishers handing the same 4 096
/// rows took 0.5–1.1 s a round each, one alone 0.12–0.43 s); a row its own node has not handed
/// over by then (the node died, or is cut from the stream; its standby takes its rows at once) is
/// taken by any publisher. At the bound a row may be published twice: the stream drops the repeat
/// by its message id.
pub const OTHERS_AFTER: Duration = Duration::from_secs(5);

/// How often, at most, the thread reads which stream it publishes to (besides at every connect):
/// a stream lost with what it held is found, and its pending rows published again, within it.
pub const STREAM_CHECK: Duration = Duration::from_secs(2);

/// The status the process exits with when the fault injection of [`Publisher::start`] fires.
pub const FAULT_EXIT_CODE: i32 = 86;

/// How long it waits after NATS or the database refused, before trying again.
const FAILURE_SLEEP: Duration = Duration::from_millis(200);

/// The publishing thread; stopped on drop.
pub struct Publisher {
    _thread: StoppableThread,
}

impl Publisher {
    /// Starts publishing `store`'s outbox to the stream at `url`; `wake` is notified by the
    /// process's writer when it has committed rows to deliver. `abort_after` is fault injection
    /// for the publisher's crash test (never set in production): in the first round of more than
    /// that many rows, the process exits ([`FAULT_EXIT_CODE`]) once the stream has stored that
    /// many of them, the rest of the round unpublished and none of it marked. `partition`: the
    /// market node's (its writer's rows first, others' after [`OTHERS_AFTER`]); `None`, every row.
    /// `handed`: the deliveries its writer committed, sent in their messages.
    pub fn start(
        (store, partition, handed): (Store, Option<String>, Arc<Handoff>),
        url: String,
        names: BusNames,
        clock: SharedClock,
        wake: Arc<tokio::sync::Notify>,
        abort_after: Option<u32>,
    ) -> std::io::Result<Publisher> {
        let thread = super::spawn_async("publisher", move |stop| async move {
            let whose = Whose { partition, clock: &clock, handed: &handed };
            run(store, &url, names, (whose, abort_after), &stop, &wake).await;
        })?;
        Ok(Publisher { _thread: thread })
    }
}

/// Whose rows a publisher takes, its clock, and the deliveries its writer handed it.
struct Whose<'a> {
    partition: Option<String>,
    clock: &'a SharedClock,
    handed: &'a Handoff,
}

async fn run(
    mut store: Store,
    url: &str,
    names: BusNames,
    (whose, abort_after): (Whose<'_>, Option<u32>),
    stop: &Arc<AtomicBool>,
    wake: &tokio::sync::Notify,
) {
    let mut bus: Option<FiringBus> = None;
    let mut failing = false;
    // The fault injection: the first round of more than this many rows ends the process.
    let fault = abort_after.map(|n| n.max(1) as usize);
    // When the stream was last checked (`None`: at the next round).
    let mut checked: Option<i64> = None;
    while !stop.load(Ordering::Acquire) {
        let round = match &bus {
            Some(b) => match check_stream(&mut store, b, whose.clock, &mut checked).await {
                Ok(()) => publish_round(&mut store, b, &whose, fault).await,
                Err(e) => Err(e),
            },
            None => match FiringBus::connect(url, names.clone()).await {
                Ok(b) => {
                    tracing::info!("publisher: connected to the firings stream");
                    bus = Some(b);
                    checked = None;
                    continue;
                }
                Err(e) => Err(RoundError::Bus(e)),
            },
        };
        match round {
            Ok(0) => futures_lite::future::or(wake.notified(), tokio::time::sleep(IDLE_POLL)).await,
            Ok(_) => failing = false,
            Err(e) => {
                if !failing {
                    tracing::error!("publisher: {e}; the rows stay unpublished and are tried again");
                }
                failing = true;
                // The stream may be gone with its server (a NATS restarted without its store):
                // connect again, which makes it again, unless only the database refused.
                if !matches!(e, RoundError::Store(_)) {
                    bus = None;
                }
                tokio::time::sleep(FAILURE_SLEEP).await;
            }
        }
    }
}

/// Why a round stopped.
#[derive(Debug)]
enum RoundError {
    /// The database refused.
    Store(rampart_store::store::StoreError),
    /// NATS could not be reached.
    Bus(super::BusError),
    /// The stream did not store some rows (they stay unpublished).
    Refused(String),
}

impl std::fmt::Display for RoundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RoundError::Store(e) => write!(f, "the outbox: {e}"),
            RoundError::Bus(e) => e.fmt(f),
            RoundError::Refused(what) => write!(f, "the firings stream: {what}"),
        }
    }
}

/// Every [`STREAM_CHECK`] (and first after a connect): the stream's creation time told to the
/// outbox, which unmarks its pending rows when they were marked for another stream.
async fn check_stream(
    store: &mut Store,
    bus: &FiringBus,
    clock: &SharedClock,
    checked: &mut Option<i64>,
) -> Result<(), RoundError> {
    let now = clock.now_ms();
    let every = STREAM_CHECK.as_millis() as i64;
    if checked.is_some_and(|at| (at..at + every).contains(&now)) {
        return Ok(());
    }
    let created = bus.stream_created_ns().await.map_err(RoundError::Bus)?;
    let unmarked = store.firings_stream_is(created).map_err(RoundError::Store)?;
    if unmarked > 0 {
        tracing::warn!(
            unmarked,
            "publisher: the firings stream is not the one its rows were published to; publishing them again"
        );
    }
    *checked = Some(now);
    Ok(())
}

/// Publishes one batch; how many rows were published.
async fn publish_round(
    store: &mut Store,
    bus: &FiringBus,
    whose: &Whose<'_>,
    fault: Option<usize>,
) -> Result<usize, RoundError> {
    let clock = whose.clock;
    let others_before = clock.now_ms() - OTHERS_AFTER.as_millis() as i64;
    let rows =
        store.unpublished(PUBLISH_BATCH_MAX, whose.partition.as_deref(), others_before).map_err(RoundError::Store)?;
    let now = clock.now_ms();
    if let Some(n) = fault.filter(|&n| rows.len() > n) {
        let stored = bus.publish_batch(outgoing(&rows[..n], whose.handed, now)).await;
        let count = stored.iter().filter(|ok| **ok).count();
        tracing::error!(
            "publisher: fault injection: exiting with {count} of this round's {} rows stored, none marked",
            rows.len()
        );
        // At once, as a crash would: no row of the round is marked, no destructor runs.
        std::process::exit(FAULT_EXIT_CODE);
    }
    let stored = bus.publish_batch(outgoing(&rows, whose.handed, now)).await;
    let done: Vec<i64> = rows.iter().zip(&stored).filter(|(_, ok)| **ok).map(|(r, _)| r.id).collect();
    if !done.is_empty() {
        store.mark_published(&done, clock.now_ms()).map_err(RoundError::Store)?;
    }
    let refused =
        (done.len() < rows.len()).then(|| format!("{} of {} rows not stored", rows.len() - done.len(), rows.len()));
    match refused {
        Some(e) => Err(RoundError::Refused(e)),
        None => Ok(done.len()),
    }
}

/// Each row's message: the row's id, with the whole webhook delivery when this node's writer
/// handed it and it is taken now (its first publish from here; `rampart_store::handoff`).
fn outgoing<'r>(rows: &'r [Unpublished], handed: &Handoff, now_ms: i64) -> Vec<Outgoing<'r>> {
    let message = |r: &'r Unpublished| {
        let held = (r.channel == Channel::Webhook).then(|| handed.take(r.alert_id, r.trigger_ms, now_ms)).flatten();
        let delivery = held.and_then(|h| {
            let (account_id, alert_id, trigger_ms) = (h.account_id, h.alert_id, h.trigger_ms);
            wire::delivery(&wire::Delivery { id: r.id, account_id, alert_id, trigger_ms, url: h.url, body: h.body })
        });
        Outgoing { leaf: r.channel.as_str(), id: r.message_id(), body: r.id.to_string().into_bytes(), delivery }
    };
    rows.iter().map(message).collect()
}
