//! Webhook delivery: a thread with its own single-threaded executor that decides which of the
//! outbox's due deliveries to send and when (`decisions.md` §6), off the tick path, and hands the
//! attempts to `threads` lanes that send them (`lanes`).
//!
//! The outbox in SQLite is the queue: the writer inserts a delivery in the same transaction that
//! records the firing, so a recorded firing is delivered at least once, across restarts. Each
//! attempt re-checks the URL with the SSRF guard (resolve, check every address, connect only to a
//! checked one), then POSTs the stored body with `Content-Type: application/json`,
//! `X-Service-Event: alert.triggered` and `User-Agent: rampart/<version>`, over http or https
//! (rustls with the bundled web roots), within [`ATTEMPT_TIMEOUT`] for connect, send and the
//! whole answer. 2xx with a complete answer is success; anything else (3xx included: redirects
//! are not followed), an answer that ends before its declared length or a broken chunked body,
//! a timeout or a connection error is a failure, retried at first failure + 10 s and + 60 s.
//!
//! Telegram messages (`telegram`) are outbox rows too and go through everything here the same
//! way (bounds, timeout, schedule, keep-alive); only their URL is made at each attempt from the
//! operator's configuration, they carry no `X-Service-Event`, and the bot's address may be
//! private (it is the operator's, not a client's).
//!
//! Connections are kept alive between attempts ([`pool`]): an attempt reuses an idle connection
//! to an address its own SSRF check returned, and a connection the receiver closed while it was
//! idle costs a retry on a new one within the same attempt (so the receiver may, rarely, see a
//! delivery twice, which at-least-once allows). An answer not read in full, or a receiver that
//! closes the connection, leaves nothing to keep.
//!
//! Fairness and bounds. An attempt holds a slot under four bounds at once: `in_flight_max` in
//! all, `per_account_max` for the alert's account, `per_address_max` for the URL's host (any
//! port) and `per_host_max` for the host and port. At a bound the due deliveries simply stay
//! pending in the outbox and start when a slot frees. The account bound is work-conserving: an
//! account past it may borrow the global slots the others left idle in a round, all but a
//! quarter of `in_flight_max`, which stays free for the other accounts (so a storm of one
//! account's firings is sent at the sender's full width, and another account's delivery still
//! finds a slot at once; the destination bounds are never borrowed past). Each destination's
//! bound (host name; host and port) is shared fairly across accounts ([`fair`]): an account
//! holding nothing there takes any free slot, one holding some leaves a quarter free and keeps to
//! an equal share of the rest; a full bound (the whole width too) is shared by demand, an
//! account under its part getting the slot of a cut attempt of the account furthest over its
//! part ([`Holdings::plan`], `Sender::share_contended`), so accounts sharing a host (a relay, a
//! chat service's webhook endpoint; loopback in tests) never wait behind other accounts' hanging
//! receivers there. Due
//! rows are read round-robin across
//! accounts (every account's first due row, then every account's second, ...), so one account's
//! hundreds of due rows can neither fill the scan nor the global slots: a healthy receiver of
//! another account is sent to on time whatever that account's receivers do.
//!
//! Rationale for keying the destination bound by host name rather than resolved IP: the slot
//! must be taken before the attempt starts, and resolution happens inside the attempt (under its
//! timeout, again at every attempt, possibly to several addresses). A name with any number of
//! ports is one destination; an account that spreads dead receivers over many names is still
//! held by its account bound.
//!
//! Outcomes that cannot be recorded (a full disk, a locked or broken database) are kept in
//! memory, at most [`UNRECORDED_MAX`] together with the attempts in flight, and recorded again
//! at the next result, wake-up or poll interval, with the time they happened; their rows are not
//! picked up again meanwhile, so a receiver is never sent the same delivery again because its
//! outcome could not be written. Outcomes are recorded on one connection and due rows read on
//! another, each at its own pace (`settled` keeps a scan that raced a record from resending).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::Notify;

use rampart_outbound::tls_config;
use rampart_state::clock::Clock;

mod attempt;
mod config;
pub mod fair;
mod holdings;
mod lanes;
pub mod metrics;
pub mod pool;
pub mod schedule;
mod settled;
pub mod signing;
pub mod telegram;
pub use attempt::{attempt, test_attempt, Target, ATTEMPT_TIMEOUT, RESPONSE_BYTES_MAX};
pub use config::{DeliveryConfig, DELIVERY_THREADS, IN_FLIGHT_MAX, IN_FLIGHT_RANGE};
pub use holdings::{victim, Bound, Demand, Holdings, Plan, Slot, Width};
use lanes::Answered;
pub use lanes::LANES_MAX;
use rampart_store::store::{AttemptResult, Channel, OutboxRow, Outcome, Store};
use rampart_store::writer::FIRING_TARGET;

/// Due deliveries looked at per round at most; the rest are looked at in later rounds.
const DUE_SCAN_MAX: usize = 4_096;
/// Due deliveries looked at per round per free slot, past the rows the sender holds (at least
/// [`DUE_SCAN_MIN`]): enough candidates when some are held back by their destination's bound,
/// without reading thousands of rows to fill a few slots.
const DUE_SCAN_PER_FREE_SLOT: usize = 4;
/// Due deliveries looked at per round, at least.
const DUE_SCAN_MIN: usize = 64;
/// The share of `in_flight_max` an account past its own bound may never borrow: these slots stay
/// free for the other accounts (a quarter).
const ACCOUNT_RESERVE_DIVISOR: usize = 4;
/// Attempts in flight plus outcomes waiting to be recorded, at most. At the bound no new attempt
/// starts (backpressure) until outcomes are recorded again; since every outcome comes from an
/// attempt in flight, the bound is never exceeded and no outcome is dropped. A stop with
/// outcomes still unrecorded leaves their rows pending: they are sent again after the next
/// start (at least once).
pub const UNRECORDED_MAX: usize = 4_096;

/// Counters of the sender.
#[derive(Debug, Default)]
pub struct DeliveryStats {
    /// Attempts made.
    pub attempts: AtomicU64,
    /// Deliveries that succeeded.
    pub delivered: AtomicU64,
    /// Attempts that failed.
    pub failed_attempts: AtomicU64,
    /// Attempts in flight now.
    pub in_flight: AtomicU64,
    /// Outcomes waiting to be recorded now (the database refused them).
    pub unrecorded: AtomicU64,
    /// Times recording outcomes failed.
    pub record_failures: AtomicU64,
    /// Attempts cut to give their slot to an account under its part of a full bound ([`fair`]).
    pub cut: AtomicU64,
}

/// The running sender.
pub struct Delivery {
    stop: Arc<AtomicBool>,
    wake: Arc<Notify>,
    thread: Option<JoinHandle<()>>,
    /// Its counters.
    pub stats: Arc<DeliveryStats>,
}

impl Delivery {
    /// Starts the sender thread over an outbox, and its `config.threads` lanes: `stores` are two
    /// connections to it, the first to record outcomes, the second to read due rows (each at its
    /// own pace: a scan never waits for a record's write lock).
    pub fn start(stores: (Store, Store), config: DeliveryConfig, clock: Arc<dyn Clock>) -> std::io::Result<Delivery> {
        if !(1..=LANES_MAX).contains(&config.threads) {
            let why = format!("delivery threads must be 1 to {LANES_MAX}, not {}", config.threads);
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, why));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Notify::new());
        let stats = Arc::new(DeliveryStats::default());
        let tls = tls_config(&config.extra_roots_der);
        if tls.is_none() {
            tracing::error!("delivery: TLS configuration failed; https webhooks will fail");
        }
        let parts = lanes::TargetParts {
            allow_private: config.allow_private,
            timeout: config.attempt_timeout,
            tls,
            telegram: config.telegram.clone(),
        };
        // One result per attempt in flight: bounded by `in_flight_max`.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Answered>();
        let lanes = lanes::Lanes::start(config.threads, &parts, config.metrics.clone(), &tx)?;
        let (s, w, st) = (stop.clone(), wake.clone(), stats.clone());
        let thread = std::thread::Builder::new().name("delivery".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("delivery: no runtime: {e}");
                    return;
                }
            };
            let sender = Sender::new(config, st, lanes);
            runtime.block_on(run(sender, rx, stores, clock, s, w));
        })?;
        Ok(Delivery { stop, wake, thread: Some(thread), stats })
    }

    /// A handle that wakes the sender at once (the writer calls it after queueing deliveries).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Stops the sender. Attempts in flight are abandoned; their deliveries are still pending
    /// in the outbox and are sent again after the next start (at least once).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An attempt in flight.
struct Flight {
    slot: Slot,
    /// Which attempt this is (the sender's count of attempts started).
    token: u64,
    started: std::time::Instant,
    /// When the round that started it read its row (the delivery log's `pulled_ms`).
    pulled_ms: i64,
    /// Cuts the attempt (its lane's task ends at its next await; its result is never sent).
    handle: lanes::Handle,
}

/// The sender's state: slots held, outcomes waiting to be recorded.
struct Sender {
    config: DeliveryConfig,
    /// The lanes that make the attempts.
    lanes: lanes::Lanes,
    stats: Arc<DeliveryStats>,
    in_flight: HashMap<i64, Flight>,
    held: Holdings,
    /// Attempts started, the token of the next.
    started: u64,
    /// When a round last scanned the outbox with the width full.
    full_scanned: std::time::Instant,
    /// Outcomes not yet recorded, and their ids with their accounts (rows not to pick up again
    /// meanwhile).
    unrecorded: Vec<Outcome>,
    unrecorded_ids: HashMap<i64, i64>,
    /// How many of `unrecorded`'s first outcomes the record in progress writes (0: none runs).
    recording: usize,
    /// What the records that ended wrote, until every scan sees it.
    settled: settled::Settled,
    /// The last recording failed (logged once per streak, not every round).
    record_failing: bool,
}

impl Sender {
    /// A sender with nothing in flight, handing attempts to `lanes`.
    fn new(config: DeliveryConfig, stats: Arc<DeliveryStats>, lanes: lanes::Lanes) -> Sender {
        Sender {
            config,
            lanes,
            stats,
            in_flight: HashMap::new(),
            held: Holdings::default(),
            started: 0,
            full_scanned: std::time::Instant::now(),
            unrecorded: Vec::new(),
            unrecorded_ids: HashMap::new(),
            recording: 0,
            settled: settled::Settled::default(),
            record_failing: false,
        }
    }

    /// Whether `slot` fits under its account's bound.
    fn account_fits(&self, slot: &Slot) -> bool {
        self.held.account_fits(slot, &self.config)
    }

    /// Whether `slot` fits under its destination's bounds (see [`Holdings::destination_fits`]).
    fn destination_fits(&self, slot: &Slot) -> bool {
        self.held.destination_fits(slot, &self.config)
    }

    /// Whether an account past its own bound may borrow one more idle slot: all but the
    /// reserve ([`ACCOUNT_RESERVE_DIVISOR`]) of `in_flight_max`.
    fn may_borrow(&self) -> bool {
        let max = self.config.in_flight_max;
        self.room() && self.in_flight.len() + max / ACCOUNT_RESERVE_DIVISOR < max
    }

    /// Room for another attempt in all: the global bound and the unrecorded backpressure.
    fn room(&self) -> bool {
        self.in_flight.len() < self.config.in_flight_max
            && self.in_flight.len() + self.unrecorded.len() < UNRECORDED_MAX
    }

    /// The width as [`Holdings::plan`] sees it for `slot`.
    fn width(&self, slot: &Slot) -> Width {
        let account_fits = self.account_fits(slot);
        Width {
            max: self.config.in_flight_max,
            admits: self.room() && (account_fits || self.may_borrow()),
            cut_helps: account_fits && self.in_flight.len() + self.unrecorded.len() <= UNRECORDED_MAX,
        }
    }

    /// Frees an attempt's slots and keeps its outcome for the next batch write. A result of an
    /// attempt that was cut (its token no longer in flight) is dropped: nothing was decided.
    fn settle(&mut self, answered: Answered, now_ms: i64) {
        let (id, token, result, latency_ms) = answered;
        match self.in_flight.get(&id) {
            Some(f) if f.token == token => {}
            _ => {
                debug_assert!(false, "a cut attempt's result arrived (a cut takes the attempt's claim first)");
                return;
            }
        }
        let Some(f) = self.in_flight.remove(&id) else { return };
        self.held.hold(&f.slot, false);
        self.lanes.ended(f.handle.lane);
        match &result {
            AttemptResult::Delivered { .. } => self.stats.delivered.fetch_add(1, Ordering::Relaxed),
            AttemptResult::Failed { .. } => self.stats.failed_attempts.fetch_add(1, Ordering::Relaxed),
        };
        debug_assert!(
            !self.unrecorded_ids.contains_key(&id),
            "an attempt was made while its last outcome was unrecorded"
        );
        self.unrecorded_ids.insert(id, f.slot.account);
        self.unrecorded.push(Outcome { id, result, at_ms: now_ms, latency_ms, pulled_ms: f.pulled_ms });
    }

    /// Records the waiting outcomes in one transaction; on failure keeps them for the next round.
    fn record(&mut self, store: &mut Store, now_ms: i64) {
        if !self.unrecorded.is_empty() {
            let result = store.record_attempts(&self.unrecorded, schedule::next_attempt_ms).map(|_| ());
            self.recording = self.unrecorded.len();
            self.recorded(result, now_ms);
        }
        self.stats.unrecorded.store(self.unrecorded.len() as u64, Ordering::Relaxed);
    }

    /// The outcomes a record starts with now (every one waiting), counted as being recorded.
    fn begin_record(&mut self) -> Option<Vec<Outcome>> {
        debug_assert_eq!(self.recording, 0, "one record at a time");
        if self.unrecorded.is_empty() {
            return None;
        }
        self.recording = self.unrecorded.len();
        Some(self.unrecorded.clone())
    }

    /// Takes the outcome of recording the first `self.recording` outcomes (in one transaction):
    /// gone from memory when written, their ids kept from scans read meanwhile ([`settled`]).
    fn recorded(&mut self, result: Result<(), rampart_store::store::StoreError>, now_ms: i64) {
        let written = std::mem::take(&mut self.recording);
        debug_assert!(written <= self.unrecorded.len(), "a record of outcomes that are not waiting");
        {
            if let Some(health) = &self.config.health {
                health.record(rampart_store::storage::Writer::Delivery, &result, now_ms);
            }
            match result {
                Ok(_) => {
                    if self.record_failing {
                        tracing::info!("delivery: recording works again ({written} outcomes)");
                    }
                    self.record_failing = false;
                    let ids: Vec<i64> = self.unrecorded.drain(..written).map(|o| o.id).collect();
                    for id in &ids {
                        self.unrecorded_ids.remove(id);
                    }
                    self.settled.wrote(ids);
                }
                Err(e) => {
                    self.stats.record_failures.fetch_add(1, Ordering::Relaxed);
                    if !self.record_failing {
                        tracing::error!(
                            "delivery: recording {written} outcomes: {e}; kept in memory and retried, not re-sent"
                        );
                    }
                    self.record_failing = true;
                }
            }
        }
    }

    /// How many due rows to read this round; `None`: no scan now (the unrecorded outcomes are at
    /// their bound, or the width is full and was scanned within the poll interval).
    fn scan_size(&mut self) -> Option<usize> {
        if self.in_flight.len() + self.unrecorded.len() >= UNRECORDED_MAX {
            return None;
        }
        // A full width is scanned once per poll interval, for accounts waiting under their part
        // of it (a cut may start them); not at every result (one account's storm fills it often).
        if !self.room() {
            if self.full_scanned.elapsed() < self.config.poll_interval {
                return None;
            }
            self.full_scanned = std::time::Instant::now();
        }
        // Rows in flight are still pending in the outbox: the scan reads past them ([`Sender::held`]).
        let free = self.config.in_flight_max.saturating_sub(self.in_flight.len());
        Some((free * DUE_SCAN_PER_FREE_SLOT).clamp(DUE_SCAN_MIN, DUE_SCAN_MAX))
    }

    /// The rows this sender holds, still pending in the outbox, with their accounts: attempts in
    /// flight and outcomes not yet written (at most [`UNRECORDED_MAX`]).
    fn held(&self) -> HashMap<i64, i64> {
        let flying = self.in_flight.iter().map(|(&id, f)| (id, f.slot.account));
        flying.chain(self.unrecorded_ids.iter().map(|(&id, &account)| (id, account))).collect()
    }

    /// Starts attempts for the `due` rows read this round that fit their bounds, round-robin across accounts; then,
    /// with the slots the other accounts left idle this round (less the reserve), rows held back
    /// only by their own account's bound: one account's storm uses the sender's whole width when
    /// nobody else is waiting, and never the reserve kept for the others. Rows held back by a
    /// full bound go to [`Sender::share_contended`].
    fn start_rows(&mut self, due: Vec<OutboxRow>, mut secrets: Secrets, now_ms: i64) {
        let (mut held_by_account, mut waiting) = (Vec::new(), Vec::new());
        for row in due {
            if self.in_flight.contains_key(&row.id) || self.unrecorded_ids.contains_key(&row.id) {
                continue;
            }
            if !self.room() {
                // Its slot is made only if more than one account has demand (`share_contended`).
                waiting.push((row, None));
                continue;
            }
            let slot = Slot::of(&row, self.config.telegram.as_ref());
            if !self.destination_fits(&slot) {
                waiting.push((row, Some(slot)));
            } else if !self.account_fits(&slot) {
                held_by_account.push((row, slot));
            } else {
                let signing = secrets.of(&row);
                self.start(row, slot, signing, now_ms);
            }
        }
        for (row, slot) in held_by_account {
            if self.may_borrow() && self.destination_fits(&slot) {
                let signing = secrets.of(&row);
                self.start(row, slot, signing, now_ms);
            }
        }
        self.share_contended(waiting, &mut secrets, now_ms);
        self.stats.in_flight.store(self.in_flight.len() as u64, Ordering::Relaxed);
    }

    /// Rows a full bound held back this round, in the scan's order (round-robin across
    /// accounts): each account with demand at a bound has an equal part of it ([`fair`]); a row
    /// of an account under its part starts if there is room, or in the place of a cut attempt of
    /// the account furthest over its part there ([`Holdings::plan`]).
    fn share_contended(&mut self, waiting: Vec<(OutboxRow, Option<Slot>)>, secrets: &mut Secrets, now_ms: i64) {
        if !self.held.contended(waiting.iter().map(|(row, _)| row.account_id)) {
            return;
        }
        let telegram = self.config.telegram.as_ref();
        let waiting: Vec<(OutboxRow, Slot)> = waiting
            .into_iter()
            .map(|(row, slot)| {
                let slot = slot.unwrap_or_else(|| Slot::of(&row, telegram));
                (row, slot)
            })
            .collect();
        let mut demand = Demand::default();
        waiting.iter().for_each(|(_, slot)| demand.wait(slot));
        for (row, slot) in waiting {
            // A cut frees one slot under every bound it is counted at: three at most.
            for _ in 0..3 {
                match self.held.plan(&slot, &demand, &self.config, self.width(&slot)) {
                    Plan::Start => {
                        let signing = secrets.of(&row);
                        self.start(row, slot, signing, now_ms);
                        break;
                    }
                    Plan::Cut { bound, account } if self.cut(&slot, bound, account) => {}
                    Plan::Cut { .. } | Plan::Wait => break,
                }
            }
        }
    }

    /// Cuts `account`'s youngest attempt under `bound` where `waiting` waits, among those that
    /// have run [`fair::CUT_AFTER`]; its row stays pending (no attempt spent) and is sent again
    /// when it fits. Whether one was cut.
    fn cut(&mut self, waiting: &Slot, bound: Bound, account: i64) -> bool {
        let flights = self.in_flight.iter().map(|(&id, f)| (id, &f.slot, f.started));
        let Some(id) = holdings::victim(flights, waiting, bound, account) else { return false };
        // Its answer may have taken the claim already: then it is recorded, not cut.
        if !self.in_flight.get_mut(&id).is_some_and(|f| f.handle.cut()) {
            return false;
        }
        let Some(f) = self.in_flight.remove(&id) else { return false };
        self.held.hold(&f.slot, false);
        self.lanes.ended(f.handle.lane);
        self.stats.cut.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.config.metrics {
            m.observe_cut();
        }
        tracing::debug!(account, bound = ?bound, "delivery: an attempt beyond its account's part cut for another account");
        true
    }

    /// Takes `slot` and hands the attempt for `row`, signed with `signing`, to a lane.
    fn start(&mut self, row: OutboxRow, slot: Slot, signing: Vec<String>, now_ms: i64) {
        debug_assert!(!self.in_flight.contains_key(&row.id), "one attempt of a delivery at a time");
        self.held.hold(&slot, true);
        self.stats.attempts.fetch_add(1, Ordering::Relaxed);
        self.started += 1;
        let (id, token) = (row.id, self.started);
        tracing::trace!(target: FIRING_TARGET, alert = row.alert_id, delivery = row.id, "attempt started");
        let handle = self.lanes.send(row, signing, now_ms, token);
        let flight = Flight { slot, token, started: std::time::Instant::now(), pulled_ms: now_ms, handle };
        self.in_flight.insert(id, flight);
    }
}

/// The signing secrets of the accounts in one scan, each read once (`decisions.md` §13), read
/// with the scan. A failed read sends that account's webhooks unsigned this round, logged.
struct Secrets {
    by_account: HashMap<i64, Vec<String>>,
}

impl Secrets {
    /// The secrets of every account with a webhook among `due`.
    fn read(store: &Store, due: &[OutboxRow], now_ms: i64) -> Secrets {
        let mut by_account = HashMap::new();
        for row in due.iter().filter(|r| r.channel == Channel::Webhook) {
            by_account.entry(row.account_id).or_insert_with(|| {
                store.webhook_secrets(row.account_id, now_ms).unwrap_or_else(|e| {
                    tracing::error!("delivery: reading account {}'s signing secret: {e}", row.account_id);
                    Vec::new()
                })
            });
        }
        Secrets { by_account }
    }

    /// The secrets that sign `row` (none for a Telegram message).
    fn of(&mut self, row: &OutboxRow) -> Vec<String> {
        match row.channel {
            Channel::Webhook => self.by_account.get(&row.account_id).cloned().unwrap_or_default(),
            Channel::Telegram => Vec::new(),
        }
    }
}

// Long: the sender's one loop: taking results, starting a record and a scan when none runs,
// starting the attempts a scan found and waiting, over state the loop owns.
async fn run(
    mut sender: Sender,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Answered>,
    (recorder, reader): (Store, Store),
    clock: Arc<dyn Clock>,
    stop: Arc<AtomicBool>,
    wake: Arc<Notify>,
) {
    let poll = sender.config.poll_interval;
    // The storage work runs off this thread, a record (the writing connection) and a scan (the
    // reading one) at once, so neither waits for the other nor for the attempts, which go on
    // meanwhile; an idle connection waits here.
    let (mut recorder, mut reader) = (Some(recorder), Some(reader));
    let mut recording: Option<tokio::task::JoinHandle<Recorded>> = None;
    let mut scanning: Option<tokio::task::JoinHandle<Scanned>> = None;
    // A scan is due after a result (a slot freed), a record (room under the unrecorded bound), a
    // wake-up or the poll interval; not after a scan alone.
    let mut scan_due = true;
    // A record is due whenever outcomes wait, except after a failed one: then at the next result,
    // wake-up or poll interval (a full disk is tried again at that pace, not in a loop).
    let mut record_due = true;
    while !stop.load(Ordering::Acquire) {
        while let Ok(answered) = rx.try_recv() {
            sender.settle(answered, clock.now_ms());
        }
        if recording.is_none() && record_due {
            if let Some(outcomes) = sender.begin_record() {
                let store = recorder.take().expect("the recorder is idle when no record runs");
                let now_ms = clock.now_ms();
                recording = Some(tokio::task::spawn_blocking(move || record(store, outcomes, now_ms)));
            }
        }
        if scanning.is_none() && std::mem::take(&mut scan_due) {
            if let Some(n) = sender.scan_size() {
                let store = reader.take().expect("the reader is idle when no scan runs");
                let (now_ms, seen, held) = (clock.now_ms(), sender.settled.done(), sender.held());
                scanning = Some(tokio::task::spawn_blocking(move || scan(store, (n, &held), now_ms, seen)));
            }
        }
        // Wait for a record or a scan to end, a result, a wake-up (new deliveries) or the poll
        // interval; a result that wakes us is recorded with any others.
        tokio::select! {
            done = async { recording.as_mut().expect("a record runs").await }, if recording.is_some() => {
                recording = None;
                let Ok(done) = done else {
                    tracing::error!("delivery: a record panicked; delivery stops");
                    return;
                };
                recorder = Some(done.store);
                record_due = done.result.is_ok();
                sender.recorded(done.result, done.now_ms);
                sender.stats.unrecorded.store(sender.unrecorded.len() as u64, Ordering::Relaxed);
                scan_due = true;
            }
            done = async { scanning.as_mut().expect("a scan runs").await }, if scanning.is_some() => {
                scanning = None;
                let Ok(done) = done else {
                    tracing::error!("delivery: a scan panicked; delivery stops");
                    return;
                };
                reader = Some(done.store);
                if let Some(due) = done.due {
                    let due = sender.settled.fresh(due, done.seen, |row| row.id);
                    sender.start_rows(due, done.secrets, done.now_ms);
                }
            }
            Some(answered) = rx.recv() => {
                sender.settle(answered, clock.now_ms());
                (scan_due, record_due) = (true, true);
            }
            _ = wake.notified() => (scan_due, record_due) = (true, true),
            _ = tokio::time::sleep(poll) => (scan_due, record_due) = (true, true),
        }
    }
    // A last try, so a stop does not resend what was already delivered.
    if let Some(job) = recording.take() {
        if let Ok(done) = job.await {
            recorder = Some(done.store);
            sender.recorded(done.result, done.now_ms);
        }
    }
    if let Some(mut store) = recorder {
        sender.record(&mut store, clock.now_ms());
    }
    sender.lanes.stop();
}

/// What a record came to, and its connection back.
struct Recorded {
    store: Store,
    result: Result<(), rampart_store::store::StoreError>,
    now_ms: i64,
}

/// Records `outcomes` in one transaction: the delivery thread's writes, on a blocking thread.
fn record(store: Store, outcomes: Vec<Outcome>, now_ms: i64) -> Recorded {
    let result = store.record_attempts(&outcomes, schedule::next_attempt_ms).map(|_| ());
    Recorded { store, result, now_ms }
}

/// What a scan found, and its connection back.
struct Scanned {
    store: Store,
    /// The due rows, when they could be read.
    due: Option<Vec<OutboxRow>>,
    /// The signing secrets of their accounts.
    secrets: Secrets,
    /// When it read them.
    now_ms: i64,
    /// How many records had ended when it started ([`settled::Settled::fresh`]).
    seen: u64,
}

/// Reads up to `n` due rows not `held` and their accounts' secrets: the delivery thread's reads,
/// on a blocking thread.
fn scan(store: Store, (n, held): (usize, &HashMap<i64, i64>), now_ms: i64, seen: u64) -> Scanned {
    let due = match store.due_deliveries_past(now_ms, n as u32, held) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::error!("delivery: reading the outbox: {e}");
            None
        }
    };
    let secrets = Secrets::read(&store, due.as_deref().unwrap_or_default(), now_ms);
    Scanned { store, due, secrets, now_ms, seen }
}
