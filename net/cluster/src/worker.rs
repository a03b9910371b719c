//! A delivery worker (`rampart deliver`): takes firings from the stream's shared consumer, up to
//! [`IN_FLIGHT_MAX`] at a time (a receiver that never answers holds one attempt for its timeout,
//! not the worker), sends each with the same attempt as the single server's sender
//! (`delivery::attempt`: SSRF guard, timeout, kept connections, Telegram), records the outcome
//! in the shared database, and only then answers the stream: acknowledged when the row is
//! settled (delivered, or failed for good), asked again after the schedule's delay when it is
//! rescheduled.
//!
//! Storage in groups: a fetched batch's deliveries and their accounts' signing secrets are read
//! in one pipelined round trip each (a first delivery whose message carries its delivery is not
//! read: `carried_row`, issue #59); the outcomes that have arrived are recorded together in
//! one transaction by the thread's recorder task (as the single server's sender records its
//! outcomes), so a delivery costs a share of a few round trips, not several of its own. Both
//! run on blocking threads, each through its own connection (`WorkerStores`): the thread's
//! attempts, its NATS connection and the other of the two go on meanwhile (issue #59: with the
//! storage calls on the thread itself, its first attempts trailed the publishing by 2.3–2.7 s in
//! a storm; off it, by 0.0–0.3 s).
//!
//! A worker that dies mid-attempt leaves its firing unanswered; the stream gives it to another
//! worker after [`ACK_WAIT`] (at least once). A worker given a row that is already settled (an
//! outcome recorded just before a crash) acknowledges it without sending.
//!
//! Fairness (issue #36): each worker thread keeps the single sender's bounds and its rule
//! (`rampart_delivery::Holdings`): `per_account_max` per account, `per_address_max` per host name
//! and `per_host_max` per host and port, each destination's shared fairly across accounts. A
//! firing whose row does not fit waits in the thread (queued by slot: `line`), at most
//! [`WAITING_MAX`] of them, oldest first, and starts as soon as it fits; a waiting firing is
//! answered "in progress" every [`PROGRESS_EVERY`], so the stream neither gives it to another
//! worker nor spends one of its `DELIVERIES_MAX` deliveries. The thread's own [`IN_FLIGHT_MAX`] slots are shared by the same
//! rule (`rampart_delivery::fair::fair_fits`: a quarter kept for accounts holding none). A full bound is shared by
//! demand every [`SHARE_EVERY`] while more than one account has demand in the thread
//! (`Holdings::plan`): a waiting firing of an account under its part starts in the place of a cut
//! attempt of the account furthest over its part there, whose firing goes back to the head of the
//! line (no outcome recorded, no attempt spent). So one account's hanging receivers hold their
//! share of a host's slots and of the thread's and no more, and another account's firing to the
//! same host, even the same host and port, starts at once. While firings wait that cannot start
//! and none has started for [`LINE_STUCK`], a thread with a free slot reads on past them
//! ([`FETCH_BEHIND_MAX`] at a time, up to [`WAITING_MAX`]), so one account's thousands of held-back firings ahead in the stream do not
//! keep another account's firing behind them unread (issue #50). The bounds are per worker
//! thread: a cluster of N delivery threads sends at most N × `per_host_max` to one host and port
//! at once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

mod line;

use self::line::{InLine, Line, Scope, Step};
use super::health::WorkerStats;
use super::{BusNames, Firing, FiringBus, FiringWorker, Link};
use rampart_delivery::pool::Pool;
use rampart_delivery::{attempt, victim, Bound, DeliveryConfig, Demand, Holdings, Plan, Slot, Target, Width};
use rampart_outbound::tls_config;
use rampart_state::clock::SharedClock;
use rampart_state::shutdown::StoppableThread;
use rampart_store::store::{AttemptResult, Channel, OutboxRow, Outcome, Store, StoreError};

/// How long a worker may hold a firing unanswered before the stream gives it to another: one
/// attempt's timeout and the recording of its outcome, with room.
pub const ACK_WAIT: Duration = Duration::from_secs(30);

/// How long a fetch waits for a firing (the worker checks its stop flag in between).
const FETCH_WAIT: Duration = Duration::from_millis(500);

/// Firings one worker thread holds at once (attempts in flight). At the bound it fetches no
/// more until one is answered; the stream keeps the rest for the other workers.
///
/// Rationale: a firing holds its place from the fetch until its outcome is recorded and the
/// stream confirms the acknowledgement, about a tenth of a second in a storm, while the attempt
/// itself is a few milliseconds; at 64 that bounded a thread to a few hundred deliveries a
/// second with its CPU mostly idle (the storm through the cluster: 1 200/s at 64, 1 855/s at 256,
/// 1 559/s at 512, one run each, perf/README.md, issue #59). Each holds its row, about 1.5 KB.
pub const IN_FLIGHT_MAX: usize = 256;

/// How often an idle worker makes sure its consumer still exists on the server.
const CHECK_EVERY: Duration = Duration::from_secs(2);

/// How soon a firing is asked again when storage could not read or record it.
const STORAGE_RETRY: Duration = Duration::from_secs(1);

/// How early a retry may be given to a worker and still be sent ([`not_due_yet`]): the stream's
/// own delay, measured on the recording worker's clock, may end a little before the row's time
/// on another's.
const EARLY_SLACK_MS: i64 = 1_000;

/// Firings one worker thread fetches to wait for room under their bounds, besides those in
/// flight. While it is full the thread fetches nothing (the stream keeps the rest for the other
/// workers) until one starts. (Cut attempts' firings come back to the line beyond it: at most
/// [`IN_FLIGHT_MAX`] more.) Each holds its delivery row, about 1.5 KB: 12 MB per thread at the
/// bound. Large, so that one account's thousands of firings held back by its bounds do not stop
/// the thread reading the stream past them to another account's (issue #50: 5 000 of one
/// account fit in two threads' lines).
pub const WAITING_MAX: usize = 8_192;

/// Firings a thread reads ahead per fetch while its line is stuck (firings wait that cannot
/// start, none has started for [`LINE_STUCK`]) and an attempt slot is free: it reads on past
/// them, a batch at a time, for firings that can start at once (another account's, another
/// destination's).
pub const FETCH_BEHIND_MAX: usize = 256;

/// How long a line that holds firings must have started none before its thread reads on past
/// them. A line that moves (attempts ending, even failing, in milliseconds) is left to fetch only
/// what its free slots take, so the other threads share a storm's work.
pub const LINE_STUCK: Duration = Duration::from_millis(100);

/// How often a waiting firing is answered "in progress" (a third of [`ACK_WAIT`]).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// How often a thread whose line holds firings of more than one account shares its full bounds
/// by demand (the single sender's poll interval).
pub const SHARE_EVERY: Duration = Duration::from_millis(20);

/// A worker thread's two connections: one reads each fetched batch's rows, the other records
/// outcomes, so neither waits for the other, and neither blocks the thread's attempts.
pub struct WorkerStores {
    /// Reads the fetched batches' deliveries and secrets.
    pub reader: Store,
    /// Records the attempts' outcomes.
    pub recorder: Store,
}

/// One worker thread; stopped on drop (a firing in hand is left unanswered: redelivered).
pub struct DeliveryWorker {
    _thread: StoppableThread,
}

impl DeliveryWorker {
    /// Starts a worker on the stream at `url`, reading and recording through `stores` and
    /// counting what it does in `stats`.
    pub fn start(
        stores: WorkerStores,
        url: String,
        names: BusNames,
        config: DeliveryConfig,
        clock: SharedClock,
        stats: Arc<WorkerStats>,
    ) -> std::io::Result<DeliveryWorker> {
        // The connection pool is per thread (`Rc`): the attempts run on this thread's set.
        let thread = super::spawn_async("deliver", move |stop| async move {
            run(stores, &url, names, &config, &clock, &stop, &stats).await;
        })?;
        Ok(DeliveryWorker { _thread: thread })
    }
}

// Long: the worker's one loop: pull a batch, read its rows, attempt, record, in that order each
// round.
async fn run(
    stores: WorkerStores,
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
    let shared = Rc::new(Worker::new(stores.reader, target, config, clock, stats, attempted));
    tokio::task::spawn_local(record(shared.clone(), stores.recorder, arrived));
    tokio::task::spawn_local(keep_waiting_alive(shared.clone()));
    tokio::task::spawn_local(share_slots(shared.clone()));
    let mut worker: Option<FiringWorker> = None;
    let mut failing = false;
    let mut checked = std::time::Instant::now();
    // The worker's link, watched by a task of its own every `LINK_LOOK` (the loop below may
    // wait on a fetch while NATS is gone: `/healthz` must not wait with it).
    let link: Rc<RefCell<Option<Link>>> = Rc::new(RefCell::new(None));
    tokio::task::spawn_local(watch_link(link.clone(), stats.clone()));
    while !stop.load(Ordering::Acquire) {
        let Some(w) = &mut worker else {
            match connect(url, &names).await {
                Ok(w) => {
                    *link.borrow_mut() = Some(w.link());
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
        // Wait for room (an attempt slot free, and room to wait), then take as many firings as
        // there are slots free.
        let room = shared.room();
        if room == 0 {
            let _ = tokio::time::timeout(FETCH_WAIT, shared.freed.notified()).await;
            continue;
        }
        match w.next_batch(room, FETCH_WAIT).await {
            // Nothing due: every few seconds, make sure the consumer is still there.
            Ok(firings) if firings.is_empty() && checked.elapsed() > CHECK_EVERY => {
                checked = std::time::Instant::now();
                if let Err(e) = w.check().await {
                    tracing::warn!("deliver: {e}; reconnecting");
                    *link.borrow_mut() = None;
                    worker = None;
                }
            }
            Ok(firings) => {
                failing = false;
                stats.in_hand.inc_by(firings.len() as i64);
                if start_batch(&shared, firings).await.is_err() {
                    tracing::error!("deliver: the outbox read panicked; this worker thread stops");
                    return;
                }
            }
            Err(e) => {
                tracing::warn!("deliver: {e}; reconnecting");
                *link.borrow_mut() = None;
                worker = None;
            }
        }
    }
}

/// How often a worker's link is looked at for `/healthz`.
const LINK_LOOK: Duration = Duration::from_millis(250);

/// Counts the worker in `stats.connected` exactly while its NATS link is up, looking every
/// [`LINK_LOOK`]: a server gone is told within that of the client's noticing (a closed
/// connection at once; a silent one at the client's missed pings).
async fn watch_link(link: Rc<RefCell<Option<Link>>>, stats: Arc<WorkerStats>) {
    let mut counted = false;
    loop {
        let up = link.borrow().as_ref().is_some_and(Link::up);
        if up != counted {
            counted = up;
            if up {
                stats.connected.inc();
            } else {
                tracing::warn!("deliver: NATS is unreachable; the client reconnects");
                stats.connected.dec();
            }
        }
        tokio::time::sleep(LINK_LOOK).await;
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
    /// The fetch loop's connection, lent to a blocking thread for each batch's read (`None`
    /// only while lent).
    reader: RefCell<Option<Store>>,
    target: Target,
    clock: SharedClock,
    stats: Arc<WorkerStats>,
    /// To the recorder; bounded by the slots (at most [`IN_FLIGHT_MAX`] attempts exist).
    attempted: mpsc::Sender<Attempted>,
    /// The bounds (`per_account_max`, `per_address_max`, `per_host_max`).
    config: DeliveryConfig,
    /// Attempt slots: [`IN_FLIGHT_MAX`] firings started and not yet answered.
    slots: Arc<Semaphore>,
    /// Attempts in flight under the account and destination bounds, and the thread's
    /// [`IN_FLIGHT_MAX`] attempt slots, each shared fairly across accounts (an account holding
    /// none takes any free one, so other accounts' hanging attempts cannot fill the thread).
    held: RefCell<Holdings>,
    /// Attempts in flight, by token: what a cut gives back to the waiting line.
    flights: RefCell<HashMap<u64, Flight>>,
    /// The token of the next attempt.
    started: std::cell::Cell<u64>,
    /// Firings read whose row does not fit yet, oldest first; at most [`WAITING_MAX`].
    waiting: RefCell<Line<Waiting>>,
    /// Told when a slot frees or a waiting firing starts (the fetch loop may have room again).
    freed: Notify,
    /// When a firing last started from the line (or the line was last empty).
    moved: std::cell::Cell<std::time::Instant>,
}

/// An attempt in flight.
struct Flight {
    waiting: Waiting,
    permit: OwnedSemaphorePermit,
    started: std::time::Instant,
    /// Cuts the attempt (its task ends at its next await and answers nothing).
    abort: tokio::task::AbortHandle,
}

/// A firing whose delivery waits for room under its bounds.
struct Waiting {
    firing: Firing,
    row: OutboxRow,
    secrets: Vec<String>,
    slot: Slot,
    /// When it was last answered "in progress" (or fetched).
    progressed: std::time::Instant,
    /// When its batch was fetched (the delivery log's `pulled_ms`).
    pulled_ms: i64,
}

impl InLine for Waiting {
    fn slot(&self) -> &Slot {
        &self.slot
    }
}

impl Worker {
    fn new(
        reader: Store,
        target: Target,
        config: &DeliveryConfig,
        clock: &SharedClock,
        stats: &Arc<WorkerStats>,
        attempted: mpsc::Sender<Attempted>,
    ) -> Worker {
        Worker {
            reader: RefCell::new(Some(reader)),
            target,
            clock: clock.clone(),
            stats: stats.clone(),
            attempted,
            config: config.clone(),
            slots: Arc::new(Semaphore::new(IN_FLIGHT_MAX)),
            held: RefCell::new(Holdings::default()),
            flights: RefCell::new(HashMap::new()),
            started: std::cell::Cell::new(0),
            waiting: RefCell::new(Line::default()),
            freed: Notify::new(),
            moved: std::cell::Cell::new(std::time::Instant::now()),
        }
    }

    /// The thread's width as [`Holdings::plan`] sees it for `slot`: its slots are shared fairly
    /// across accounts, and the account bound is work-conserving as the single sender's (past it
    /// an account may borrow idle slots, all but a quarter of them, kept for the other accounts).
    fn width(&self, held: &Holdings, slot: &Slot) -> Width {
        let free = self.slots.available_permits();
        let may_borrow = IN_FLIGHT_MAX - free + IN_FLIGHT_MAX / 4 < IN_FLIGHT_MAX;
        let account_fits = held.account_fits(slot, &self.config);
        Width {
            max: IN_FLIGHT_MAX,
            admits: free > 0 && held.width_fits(slot, IN_FLIGHT_MAX) && (account_fits || may_borrow),
            cut_helps: account_fits,
        }
    }

    /// How many firings the fetch loop may take now: attempt slots free, and room to wait.
    fn room(&self) -> usize {
        let waiting = self.waiting.borrow().len();
        // Fetched firings stay within the bound; cut ones come back from the attempts in flight.
        debug_assert!(waiting <= WAITING_MAX + IN_FLIGHT_MAX, "the waiting firings stay within their bound");
        let (free, slots) = (WAITING_MAX.saturating_sub(waiting), self.slots.available_permits());
        if waiting == 0 {
            self.moved.set(std::time::Instant::now());
        }
        // What waits has not started for a while (its bounds are full): read past it.
        if waiting > 0 && slots > 0 && self.moved.get().elapsed() >= LINE_STUCK {
            return free.min(FETCH_BEHIND_MAX);
        }
        slots.min(free)
    }
}

/// The delivery id a firing carries (its body).
fn delivery_id(firing: &Firing) -> Option<i64> {
    std::str::from_utf8(firing.body()).ok().and_then(|s| s.parse::<i64>().ok())
}

/// Answers `firing` (acknowledged, or asked again after `retry`) on a task of its own, then
/// frees its attempt slot (if it held one) and starts what waits.
fn answer_later(w: &Rc<Worker>, firing: Firing, slot: Option<OwnedSemaphorePermit>, retry: Option<Duration>) {
    let w = w.clone();
    tokio::task::spawn_local(async move {
        answer(match retry {
            Some(delay) => firing.retry_in(delay).await,
            None => firing.done().await,
        });
        w.stats.in_hand.dec();
        if slot.is_some() {
            drop(slot);
            start_waiting(&w);
            w.freed.notify_one();
        }
    });
}

/// Starts a fetched batch: its deliveries and their accounts' signing secrets read in one
/// round trip each, on a blocking thread (the attempts, the recorder and the NATS connection go
/// on meanwhile on this one); a delivery already settled, or gone, is acknowledged without
/// sending; the others wait in line and start as their bounds allow ([`start_waiting`]).
/// `Err` when the read panicked (the connection is lost with it).
async fn start_batch(w: &Rc<Worker>, taken: Vec<Firing>) -> Result<(), tokio::task::JoinError> {
    let carried: Vec<Option<OutboxRow>> = taken.iter().map(carried_row).collect();
    let unread = taken.iter().zip(&carried).filter(|(_, c)| c.is_none());
    let ids: Vec<i64> = unread.filter_map(|(f, _)| delivery_id(f)).collect();
    let accounts: Vec<i64> = carried.iter().flatten().map(|row| row.account_id).collect();
    w.stats.carried.inc_by(accounts.len() as u64);
    let now = w.clock.now_ms();
    let store = w.reader.borrow_mut().take().expect("the reader is lent to one read at a time");
    let (store, read) = tokio::task::spawn_blocking(move || {
        let read = read_batch(&store, &ids, &accounts, now);
        (store, read)
    })
    .await?;
    *w.reader.borrow_mut() = Some(store);
    w.stats.storage(read.is_ok(), now);
    let (rows, secrets) = match read {
        Ok(read) => read,
        Err(e) => {
            tracing::warn!("deliver: reading the outbox: {e}");
            taken.into_iter().for_each(|f| answer_later(w, f, None, Some(STORAGE_RETRY)));
            return Ok(());
        }
    };
    let mut rows = rows.into_iter();
    for (firing, carried) in taken.into_iter().zip(carried) {
        if delivery_id(&firing).is_none() {
            tracing::error!(firing = firing.id, "deliver: a firing without a delivery id; dropped");
            answer_later(w, firing, None, None);
            continue;
        }
        let row = match carried.or_else(|| rows.next().flatten()) {
            Some(row) if row.state == "pending" => row,
            _ => {
                answer_later(w, firing, None, None);
                continue;
            }
        };
        if let Some(wait) = not_due_yet(&row, now) {
            answer_later(w, firing, None, Some(wait));
            continue;
        }
        let secrets = secrets.get(&row.account_id).cloned().unwrap_or_default();
        let slot = Slot::of(&row, w.target.telegram.as_ref());
        let progressed = std::time::Instant::now();
        w.waiting.borrow_mut().push_back(Waiting { firing, row, secrets, slot, progressed, pulled_ms: now });
    }
    start_waiting(w);
    Ok(())
}

/// A batch's rows (by delivery id, in order) and the signing secrets of their webhooks'
/// accounts.
type BatchRead = (Vec<Option<OutboxRow>>, HashMap<i64, Vec<String>>);

/// Reads the rows of `ids`, then the signing secrets of their webhooks' accounts and of
/// `carried` (the accounts of the deliveries the batch's messages carried): two statements, one
/// when every row was carried.
fn read_batch(store: &Store, ids: &[i64], carried: &[i64], now: i64) -> Result<BatchRead, StoreError> {
    let rows = if ids.is_empty() { Vec::new() } else { store.outbox_rows(ids)? };
    let webhooks = rows.iter().flatten().filter(|r| r.channel == Channel::Webhook);
    let mut accounts: Vec<i64> = webhooks.map(|r| r.account_id).chain(carried.iter().copied()).collect();
    accounts.sort_unstable();
    accounts.dedup();
    let secrets = store.webhook_secrets_of(&accounts, now)?;
    Ok((rows, accounts.into_iter().zip(secrets).collect()))
}

/// The row a first delivery's message carries ([`crate::DELIVERY_HEADER`]), to send without
/// reading it; `None` (read the row) for a message without one, a malformed one (logged), or a
/// redelivery.
fn carried_row(firing: &Firing) -> Option<OutboxRow> {
    let carried = match firing.delivery()? {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(firing = firing.id, "deliver: the delivery in the message: {e}; reading the row");
            return None;
        }
    };
    first_delivery(firing.attempt, delivery_id(firing)?, carried)
}

/// The outbox row as committed, from the delivery a message carried, when it can be sent from
/// it: only at the firing's first delivery (a redelivery follows an attempt, a worker's death or a
/// storage error: the row may have moved on since) and only when it is the row the message
/// names. The publisher sends a delivery only with a row's first publish from the node that
/// committed it, sooner than another node takes the row (`rampart_store::handoff`): such a
/// message is the row's first, or falls in the stream's duplicate window of the other and is
/// dropped, so its first delivery is the firing's first. Nothing changes a row before its first
/// attempt is recorded, so the message's copy is the row.
fn first_delivery(attempt: i64, id: i64, d: super::wire::Delivery) -> Option<OutboxRow> {
    (attempt == 1 && d.id == id).then(|| OutboxRow {
        id,
        alert_id: d.alert_id,
        url: d.url,
        body: d.body,
        state: "pending".to_owned(),
        attempts: 0,
        first_failure_ms: None,
        next_attempt_ms: d.trigger_ms,
        last_status: None,
        last_error: None,
        account_id: d.account_id,
        channel: Channel::Webhook,
        trigger_ms: d.trigger_ms,
    })
}

/// How long a retry published before its time must still wait: a row the publisher handed over
/// again (its stream was lost, `publisher`) keeps the schedule of its next attempt. A first
/// attempt is always due (another node's clock may be ahead), and a retry less than
/// [`EARLY_SLACK_MS`] early is sent.
fn not_due_yet(row: &OutboxRow, now: i64) -> Option<Duration> {
    let early = row.next_attempt_ms - now;
    (row.attempts > 0 && early > EARLY_SLACK_MS).then(|| Duration::from_millis(early.unsigned_abs()))
}

/// Starts every waiting firing that fits now, oldest first: an attempt slot free, and room under
/// its account's and its destination's bounds (shared fairly across accounts). One that does not
/// fit stays in line; a later one of another account or destination may start before it. (The
/// firings a full bound holds back are shared by demand every [`SHARE_EVERY`]:
/// [`share_slots`].)
fn start_waiting(w: &Rc<Worker>) {
    let starting = {
        let (mut waiting, mut held) = (w.waiting.borrow_mut(), w.held.borrow_mut());
        let mut permits = Vec::new();
        // Each slot's oldest firing, oldest first, left at its first refusal (`line`).
        let started = waiting.start_fitting(|x| {
            if w.slots.available_permits() == 0 {
                return Step::Stop;
            }
            if !w.width(&held, &x.slot).admits {
                return Step::Keep(Scope::Account);
            }
            match held.destination_refusal(&x.slot, &w.config) {
                Some(Bound::Address) => return Step::Keep(Scope::HostName),
                Some(_) => return Step::Keep(Scope::Slot),
                None => {}
            }
            let Ok(permit) = w.slots.clone().try_acquire_owned() else { return Step::Stop };
            held.hold(&x.slot, true);
            permits.push(permit);
            Step::Take
        });
        debug_assert_eq!(started.len(), permits.len(), "a permit for every firing started");
        started.into_iter().zip(permits).collect::<Vec<_>>()
    };
    start_all(w, starting);
}

/// Starts the attempts of `starting` (the fetch loop may have room again).
fn start_all(w: &Rc<Worker>, starting: Vec<(Waiting, OwnedSemaphorePermit)>) {
    if !starting.is_empty() {
        w.moved.set(std::time::Instant::now());
        w.freed.notify_one();
    }
    for (next, permit) in starting {
        start_attempt(w, next, permit);
    }
}

/// Every [`SHARE_EVERY`], while more than one account has demand in the thread, shares the full
/// bounds by demand ([`share_contended`]). (Not at every attempt's end: the line may hold a
/// thousand firings, and an attempt that may be cut has run [`rampart_delivery::fair::CUT_AFTER`] anyway.)
async fn share_slots(w: Rc<Worker>) {
    loop {
        tokio::time::sleep(SHARE_EVERY).await;
        let contended = {
            let (waiting, held) = (w.waiting.borrow(), w.held.borrow());
            held.contended(waiting.iter().map(|x| x.slot.account))
        };
        if contended {
            let mut starting = Vec::new();
            share_contended(&w, &mut starting);
            start_all(&w, starting);
        }
    }
}

/// The firings still waiting, oldest first: each account with demand at a bound (firings in
/// this thread's line or attempts in flight there) has an equal part of it; a firing of an
/// account under its part starts in the place of a cut attempt of the account furthest over its
/// part ([`Holdings::plan`]). A cut attempt's firing goes back to the head of the line.
fn share_contended(w: &Rc<Worker>, starting: &mut Vec<(Waiting, OwnedSemaphorePermit)>) {
    let mut cut = Vec::new();
    {
        let (mut waiting, mut held) = (w.waiting.borrow_mut(), w.held.borrow_mut());
        if waiting.is_empty() {
            return;
        }
        let mut demand = Demand::default();
        waiting.iter().for_each(|x| demand.wait(&x.slot));
        let mut permits = Vec::new();
        let started = waiting.take_in_order(|x| {
            // A cut frees one slot under every bound it is counted at: three at most.
            for _ in 0..3 {
                match held.plan(&x.slot, &demand, &w.config, w.width(&held, &x.slot)) {
                    Plan::Start => {
                        let Ok(permit) = w.slots.clone().try_acquire_owned() else { return Step::Stop };
                        held.hold(&x.slot, true);
                        permits.push(permit);
                        return Step::Take;
                    }
                    Plan::Cut { bound, account } => match cut_one(w, &mut held, &x.slot, bound, account) {
                        Some(back) => cut.push(back),
                        None => break,
                    },
                    Plan::Wait => break,
                }
            }
            Step::Keep(Scope::Slot)
        });
        debug_assert_eq!(started.len(), permits.len(), "a permit for every firing started");
        starting.extend(started.into_iter().zip(permits));
    }
    let mut waiting = w.waiting.borrow_mut();
    cut.into_iter().for_each(|back| waiting.push_front(back));
}

/// Cuts `account`'s youngest attempt under `bound` where `slot` waits, among those that have run
/// [`rampart_delivery::fair::CUT_AFTER`]: its slots and attempt slot are freed and its firing is handed back (no
/// outcome: the delivery spends no attempt and is sent again).
fn cut_one(w: &Worker, held: &mut Holdings, slot: &Slot, bound: Bound, account: i64) -> Option<Waiting> {
    let mut flights = w.flights.borrow_mut();
    let token = victim(flights.iter().map(|(&t, f)| (t, &f.waiting.slot, f.started)), slot, bound, account)?;
    let f = flights.remove(&token)?;
    f.abort.abort();
    held.hold(&f.waiting.slot, false);
    drop(f.permit);
    w.stats.cut.inc();
    tracing::debug!(account, bound = ?bound, "deliver: an attempt beyond its account's part cut for another account");
    Some(f.waiting)
}

/// One attempt on a task of its own; its bounds' slots are freed when it ends, its outcome goes
/// to the recorder (which answers the firing and frees the attempt slot). A cut attempt's task is
/// aborted and answers nothing.
fn start_attempt(w: &Rc<Worker>, next: Waiting, permit: OwnedSemaphorePermit) {
    let token = w.started.get() + 1;
    w.started.set(token);
    let (row, secrets, pulled_ms) = (next.row.clone(), next.secrets.clone(), next.pulled_ms);
    let task = {
        let w = w.clone();
        tokio::task::spawn_local(async move {
            let started = std::time::Instant::now();
            let result = attempt(&row, &w.target, &secrets, w.clock.now_ms()).await;
            let latency_ms = started.elapsed().as_millis() as i64;
            // Gone: cut as the attempt ended (it answers nothing; the firing waits again).
            let Some(f) = w.flights.borrow_mut().remove(&token) else { return };
            w.held.borrow_mut().hold(&f.waiting.slot, false);
            start_waiting(&w);
            let outcome = Outcome { id: row.id, result, at_ms: w.clock.now_ms(), latency_ms, pulled_ms };
            // The recorder outlives every attempt task of its thread.
            let _ = w.attempted.send(Attempted { firing: f.waiting.firing, slot: f.permit, outcome }).await;
        })
    };
    let flight = Flight { waiting: next, permit, started: std::time::Instant::now(), abort: task.abort_handle() };
    w.flights.borrow_mut().insert(token, flight);
}

/// Answers every firing that has waited [`PROGRESS_EVERY`] "in progress", so the stream keeps it
/// with this worker without spending a delivery.
async fn keep_waiting_alive(w: Rc<Worker>) {
    loop {
        tokio::time::sleep(PROGRESS_EVERY / 4).await;
        let now = std::time::Instant::now();
        let due: Vec<_> = w
            .waiting
            .borrow_mut()
            .iter_mut()
            .filter(|x| now.duration_since(x.progressed) >= PROGRESS_EVERY)
            .map(|x| {
                x.progressed = now;
                x.firing.progress()
            })
            .collect();
        for progress in due {
            answer(progress.await);
        }
    }
}

/// The recorder: takes the outcomes that have arrived (up to [`IN_FLIGHT_MAX`]), records them in
/// one transaction through its own connection on a blocking thread (the attempts and the fetch
/// loop go on meanwhile), then answers each firing: acknowledged when settled, asked again at the
/// schedule's time when rescheduled, and (storage failed) asked again after [`STORAGE_RETRY`], so
/// it is sent again (at least once). A record that panicked ends it (the firings it held are
/// delivered again after the ack wait).
async fn record(w: Rc<Worker>, mut store: Store, mut arrived: mpsc::Receiver<Attempted>) {
    let mut group = Vec::with_capacity(IN_FLIGHT_MAX);
    while arrived.recv_many(&mut group, IN_FLIGHT_MAX).await > 0 {
        let outcomes: Vec<Outcome> = group.iter().map(|a| a.outcome.clone()).collect();
        let job = tokio::task::spawn_blocking(move || {
            let recorded = store.record_attempts(&outcomes, rampart_delivery::schedule::next_attempt_ms);
            (store, recorded)
        });
        let Ok((back, recorded)) = job.await else {
            tracing::error!("deliver: recording outcomes panicked; this worker thread records no more");
            w.stats.storage(false, w.clock.now_ms());
            return;
        };
        store = back;
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
            answer_later(&w, a.firing, Some(a.slot), retry);
        }
    }
}

/// An answer the stream did not take leaves the firing to be redelivered after the ack wait.
fn answer(done: Result<(), super::BusError>) {
    if let Err(e) = done {
        tracing::warn!("deliver: {e} (the firing will be delivered again)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(attempts: i64, next_attempt_ms: i64) -> OutboxRow {
        OutboxRow {
            id: 1,
            alert_id: 2,
            url: "http://127.0.0.1:1/h".into(),
            body: "{}".into(),
            state: "pending".into(),
            attempts,
            first_failure_ms: (attempts > 0).then_some(1_000),
            next_attempt_ms,
            last_status: None,
            last_error: None,
            account_id: 3,
            channel: Channel::Webhook,
            trigger_ms: 1_000,
        }
    }

    /// A retry handed over before its time waits for it; a first attempt, and a retry within
    /// the slack, are sent at once.
    #[test]
    fn a_retry_published_early_keeps_its_schedule() {
        assert_eq!(not_due_yet(&row(1, 71_000), 11_000), Some(Duration::from_secs(60)));
        assert_eq!(not_due_yet(&row(1, 11_000 + EARLY_SLACK_MS), 11_000), None);
        assert_eq!(not_due_yet(&row(2, 5_000), 11_000), None, "late is due");
        assert_eq!(not_due_yet(&row(0, 99_000), 11_000), None, "a first attempt is always due");
    }

    /// A first delivery is sent from the delivery its message carries, as the row was
    /// committed; a redelivery, or a delivery of another row, reads the row.
    #[test]
    fn only_a_first_delivery_is_sent_from_its_message() {
        let d = crate::wire::Delivery {
            id: 1,
            account_id: 3,
            alert_id: 2,
            trigger_ms: 1_000,
            url: "http://127.0.0.1:1/h".into(),
            body: "{}".into(),
        };
        let committed = OutboxRow { first_failure_ms: None, ..row(0, 1_000) };
        assert_eq!(first_delivery(1, 1, d.clone()), Some(committed));
        assert_eq!(first_delivery(2, 1, d.clone()), None, "a redelivery reads the row");
        assert_eq!(first_delivery(1, 9, d), None, "another row's delivery");
    }
}
