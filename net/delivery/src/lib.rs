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
//! each round, with the time they happened; their rows are not picked up again meanwhile, so a
//! receiver is never sent the same delivery again because its outcome could not be written.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::Method;
use tokio::sync::Notify;

use rampart_outbound::http;
use rampart_outbound::ssrf::{self, WebhookUrl};
use rampart_outbound::tls_config;
use rampart_state::clock::Clock;

pub mod fair;
mod holdings;
mod lanes;
pub mod metrics;
pub mod pool;
pub mod schedule;
pub mod signing;
pub mod telegram;
pub use holdings::{victim, Bound, Demand, Holdings, Plan, Slot, Width};
pub use lanes::LANES_MAX;
use pool::{Conn, Key, Pool};
use rampart_store::store::{message_id, AttemptResult, Channel, FailKind, OutboxRow, Outcome, Store};
use rampart_store::writer::FIRING_TARGET;
use telegram::TelegramChannel;

/// Time allowed for one attempt: resolve, connect, TLS, send and the full answer.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a receiver's answer read at most; the rest is not read (the status decides). An
/// answer that ends early within this bound is a failure.
pub const RESPONSE_BYTES_MAX: usize = 64 * 1024;
/// Due deliveries looked at per round at most; the rest are looked at in later rounds.
const DUE_SCAN_MAX: usize = 4_096;
/// Due deliveries looked at per round per free slot, beyond the rows in flight (at least
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

/// Threads that make the attempts unless configured (`[webhooks] delivery_threads`): chosen by
/// the storm's measurement (`perf/README.md`, issue #59).
pub const DELIVERY_THREADS: usize = 2;

/// Delivery settings.
#[derive(Clone, Debug)]
pub struct DeliveryConfig {
    /// Permit private and loopback targets (`webhooks.allow_private`; local testing only).
    pub allow_private: bool,
    /// Attempts in flight at once, over all hosts.
    pub in_flight_max: usize,
    /// Attempts in flight at once for one account's alerts.
    pub per_account_max: usize,
    /// Attempts in flight at once to one host name or IP literal, whatever the port.
    pub per_address_max: usize,
    /// Attempts in flight at once to one host and port.
    pub per_host_max: usize,
    /// Threads that make the attempts (1 ..= [`LANES_MAX`]); the bounds above are over all of
    /// them together (`lanes`).
    pub threads: usize,
    /// Time allowed per attempt.
    pub attempt_timeout: Duration,
    /// How often the outbox is checked when nothing wakes the sender.
    pub poll_interval: Duration,
    /// Root certificates (DER) trusted in addition to the bundled web roots, for receivers
    /// behind a private CA (and for tests).
    pub extra_roots_der: Vec<Vec<u8>>,
    /// Where recording outcomes is reported, for `/healthz` (`None`: not reported).
    pub health: Option<Arc<rampart_store::storage::StorageHealth>>,
    /// Attempt outcomes and durations, for `/metrics` (`None`: not measured).
    pub metrics: Option<metrics::WebhookMetrics>,
    /// The operator's Telegram bot (`None`: Telegram rows fail with "not configured").
    pub telegram: Option<TelegramChannel>,
}

impl Default for DeliveryConfig {
    fn default() -> DeliveryConfig {
        DeliveryConfig {
            allow_private: false,
            in_flight_max: 256,
            per_account_max: 32,
            per_address_max: 128,
            per_host_max: 8,
            threads: DELIVERY_THREADS,
            attempt_timeout: ATTEMPT_TIMEOUT,
            poll_interval: Duration::from_millis(20),
            extra_roots_der: Vec::new(),
            health: None,
            metrics: None,
            telegram: None,
        }
    }
}

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
    /// Starts the sender thread over `store`'s outbox, and its `config.threads` lanes.
    pub fn start(store: Store, config: DeliveryConfig, clock: Arc<dyn Clock>) -> std::io::Result<Delivery> {
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
            let sender = Sender::new(config, st, tx, lanes);
            runtime.block_on(run(sender, rx, store, clock, s, w));
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

/// An attempt's result on its way back to the sender: the delivery, which attempt of it (a cut
/// attempt's token is gone from `in_flight`), the result and how long it took (ms).
type Answered = (i64, u64, AttemptResult, i64);

/// An attempt in flight.
struct Flight {
    slot: Slot,
    /// Which attempt this is (the sender's count of attempts started).
    token: u64,
    started: std::time::Instant,
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
    /// Outcomes not yet recorded, and their ids (rows not to pick up again meanwhile).
    unrecorded: Vec<Outcome>,
    unrecorded_ids: HashSet<i64>,
    /// The last recording failed (logged once per streak, not every round).
    record_failing: bool,
}

impl Sender {
    /// A sender with nothing in flight, handing attempts to `lanes`.
    fn new(
        config: DeliveryConfig,
        stats: Arc<DeliveryStats>,
        tx: tokio::sync::mpsc::UnboundedSender<Answered>,
        lanes: lanes::Lanes,
    ) -> Sender {
        // The lanes hold their own senders of results; the sender needs none.
        drop(tx);
        Sender {
            config,
            lanes,
            stats,
            in_flight: HashMap::new(),
            held: Holdings::default(),
            started: 0,
            full_scanned: std::time::Instant::now(),
            unrecorded: Vec::new(),
            unrecorded_ids: HashSet::new(),
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
        if let Some(f) = self.in_flight.remove(&id) {
            self.held.hold(&f.slot, false);
            self.lanes.ended(f.handle.lane);
        }
        match &result {
            AttemptResult::Delivered { .. } => self.stats.delivered.fetch_add(1, Ordering::Relaxed),
            AttemptResult::Failed { .. } => self.stats.failed_attempts.fetch_add(1, Ordering::Relaxed),
        };
        debug_assert!(!self.unrecorded_ids.contains(&id), "an attempt was made while its last outcome was unrecorded");
        self.unrecorded_ids.insert(id);
        self.unrecorded.push(Outcome { id, result, at_ms: now_ms, latency_ms });
    }

    /// Records the waiting outcomes in one transaction; on failure keeps them for the next round.
    fn record(&mut self, store: &mut Store, now_ms: i64) {
        if !self.unrecorded.is_empty() {
            let result = store.record_attempts(&self.unrecorded, schedule::next_attempt_ms).map(|_| ());
            self.recorded(result, now_ms);
        }
        self.stats.unrecorded.store(self.unrecorded.len() as u64, Ordering::Relaxed);
    }

    /// Takes the outcome of recording `self.unrecorded` (all of them, in one transaction).
    fn recorded(&mut self, result: Result<(), rampart_store::store::StoreError>, now_ms: i64) {
        {
            if let Some(health) = &self.config.health {
                health.record(rampart_store::storage::Writer::Delivery, &result, now_ms);
            }
            match result {
                Ok(_) => {
                    if self.record_failing {
                        tracing::info!("delivery: recording works again ({} outcomes)", self.unrecorded.len());
                    }
                    self.record_failing = false;
                    self.unrecorded.clear();
                    self.unrecorded_ids.clear();
                }
                Err(e) => {
                    self.stats.record_failures.fetch_add(1, Ordering::Relaxed);
                    if !self.record_failing {
                        tracing::error!(
                            "delivery: recording {} outcomes: {e}; kept in memory and retried, not re-sent",
                            self.unrecorded.len()
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
        // Rows in flight are still pending in the outbox and come back in the scan: read past
        // them.
        let free = self.config.in_flight_max.saturating_sub(self.in_flight.len());
        Some((self.in_flight.len() + free * DUE_SCAN_PER_FREE_SLOT).clamp(DUE_SCAN_MIN, DUE_SCAN_MAX))
    }

    /// Starts attempts for the `due` rows read this round that fit their bounds, round-robin across accounts; then,
    /// with the slots the other accounts left idle this round (less the reserve), rows held back
    /// only by their own account's bound: one account's storm uses the sender's whole width when
    /// nobody else is waiting, and never the reserve kept for the others. Rows held back by a
    /// full bound go to [`Sender::share_contended`].
    fn start_rows(&mut self, due: Vec<OutboxRow>, mut secrets: Secrets, now_ms: i64) {
        let (mut held_by_account, mut waiting) = (Vec::new(), Vec::new());
        for row in due {
            if self.in_flight.contains_key(&row.id) || self.unrecorded_ids.contains(&row.id) {
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
        let flight = Flight { slot, token, started: std::time::Instant::now(), handle };
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

/// An attempt's outcome as a metrics label.
fn outcome_label(result: &AttemptResult) -> &'static str {
    match result {
        AttemptResult::Delivered { .. } => "delivered",
        // A 2xx whose answer ended early is no full answer: an error, not a rejection.
        AttemptResult::Failed { status: Some(s), .. } if !(200..300).contains(s) => "rejected",
        AttemptResult::Failed { .. } => "error",
    }
}

// Long: the sender's one loop: recording outcomes, scanning the due rows, starting attempts and
// waiting, in that order each round, over state the loop owns.
async fn run(
    mut sender: Sender,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Answered>,
    store: Store,
    clock: Arc<dyn Clock>,
    stop: Arc<AtomicBool>,
    wake: Arc<Notify>,
) {
    let mut store = store;
    let poll = sender.config.poll_interval;
    while !stop.load(Ordering::Acquire) {
        // Results that have arrived are recorded together, in one transaction.
        while let Ok(answered) = rx.try_recv() {
            sender.settle(answered, clock.now_ms());
        }
        // The round's storage work (the outcomes' records, the outbox's due rows, their
        // accounts' secrets) runs off this thread, so the attempts in flight go on meanwhile.
        let now_ms = clock.now_ms();
        let scan = sender.scan_size();
        let outcomes = (!sender.unrecorded.is_empty()).then(|| sender.unrecorded.clone());
        if outcomes.is_some() || scan.is_some() {
            let job = tokio::task::spawn_blocking(move || storage_round(store, outcomes, scan, now_ms));
            let Ok((back, round)) = job.await else {
                tracing::error!("delivery: the storage round panicked; delivery stops");
                return;
            };
            store = back;
            if let Some(result) = round.recorded {
                sender.recorded(result, now_ms);
            }
            sender.stats.unrecorded.store(sender.unrecorded.len() as u64, Ordering::Relaxed);
            if let Some(due) = round.due {
                sender.start_rows(due, round.secrets, now_ms);
            }
        }
        // Wait for a result, a wake-up (new deliveries) or the poll interval; a result that
        // wakes us is recorded in the next round with any others.
        tokio::select! {
            Some(answered) = rx.recv() => sender.settle(answered, clock.now_ms()),
            _ = wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
        }
    }
    // A last try, so a stop does not resend what was already delivered.
    sender.record(&mut store, clock.now_ms());
    sender.lanes.stop();
}

/// What one round's storage work found.
struct StorageRound {
    /// The outcome of recording the round's outcomes, when there were any.
    recorded: Option<Result<(), rampart_store::store::StoreError>>,
    /// The due rows, when a scan was asked for and read.
    due: Option<Vec<OutboxRow>>,
    /// The signing secrets of their accounts.
    secrets: Secrets,
}

/// Records `outcomes` (in one transaction), then reads up to `scan` due rows and their accounts'
/// secrets: the delivery thread's storage work, run on a blocking thread and handing `store` back.
fn storage_round(
    store: Store,
    outcomes: Option<Vec<Outcome>>,
    scan: Option<usize>,
    now_ms: i64,
) -> (Store, StorageRound) {
    let recorded = outcomes.map(|o| store.record_attempts(&o, schedule::next_attempt_ms).map(|_| ()));
    let due = scan.and_then(|n| match store.due_deliveries(now_ms, n as u32) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::error!("delivery: reading the outbox: {e}");
            None
        }
    });
    let secrets = Secrets::read(&store, due.as_deref().unwrap_or_default(), now_ms);
    (store, StorageRound { recorded, due, secrets })
}

/// What an attempt needs besides the delivery itself.
#[derive(Clone)]
pub struct Target {
    /// Permit private addresses.
    pub allow_private: bool,
    /// Time allowed for the whole attempt.
    pub timeout: Duration,
    /// Client TLS configuration (`None`: https deliveries fail).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Keep-alive connections kept between attempts.
    pub pool: Pool,
    /// The operator's Telegram bot, for Telegram rows.
    pub telegram: Option<TelegramChannel>,
}

/// Where `row` is sent: its webhook URL, or the bot's `sendMessage` URL for a Telegram row
/// (`None` when Telegram is not configured).
pub(crate) fn destination(row: &OutboxRow, telegram: Option<&TelegramChannel>) -> Option<String> {
    match row.channel {
        Channel::Webhook => Some(row.url.clone()),
        Channel::Telegram => telegram.map(TelegramChannel::send_url),
    }
}

/// What one request says besides its body: the event header of webhooks, and whether private
/// addresses may be used (the operator's bot may be a local Bot API server; a client's webhook
/// only with `webhooks.allow_private`).
struct Sending {
    event: Option<&'static str>,
    allow_private: bool,
    /// The Standard Webhooks headers, when the account signs its webhooks.
    signature: Option<signing::Signature>,
}

/// One attempt of one delivery at `now_ms`, bounded by `target.timeout` as a whole; a webhook is
/// signed with `secrets` (the account's, current first; none: unsigned, byte for byte as before).
pub async fn attempt(row: &OutboxRow, target: &Target, secrets: &[String], now_ms: i64) -> AttemptResult {
    attempt_as("alert.triggered", row, target, secrets, now_ms).await
}

/// A test send of an alert's webhook (`POST /v1/alerts/{id}/test`, `decisions.md` §16): one
/// attempt as [`attempt`] makes, the same address check and signing, with the event header
/// `alert.test`.
pub async fn test_attempt(row: &OutboxRow, target: &Target, secrets: &[String], now_ms: i64) -> AttemptResult {
    attempt_as("alert.test", row, target, secrets, now_ms).await
}

async fn attempt_as(
    event: &'static str,
    row: &OutboxRow,
    target: &Target,
    secrets: &[String],
    now_ms: i64,
) -> AttemptResult {
    let Some(url) = destination(row, target.telegram.as_ref()) else {
        return failed(FailKind::Refused, "the Telegram channel is not configured ([channels.telegram])");
    };
    let how = match row.channel {
        Channel::Webhook => Sending {
            event: Some(event),
            allow_private: target.allow_private,
            signature: signing::sign(secrets, &message_id(row.alert_id, row.trigger_ms), now_ms / 1000, &row.body),
        },
        Channel::Telegram => Sending { event: None, allow_private: true, signature: None },
    };
    match tokio::time::timeout(target.timeout, send(&url, row.body.clone(), &how, target)).await {
        Ok(r) => r,
        Err(_) => AttemptResult::Failed {
            status: None,
            error: format!("no full answer within {} s", target.timeout.as_secs()),
            kind: FailKind::Timeout,
        },
    }
}

fn failed(kind: FailKind, error: impl Into<String>) -> AttemptResult {
    AttemptResult::Failed { status: None, error: error.into(), kind }
}

async fn send(url: &str, body: String, how: &Sending, target: &Target) -> AttemptResult {
    let parsed = match ssrf::parse(url) {
        Ok(p) => p,
        Err(e) => return failed(FailKind::Blocked, e.to_string()),
    };
    // Resolved and checked now, at every attempt: a name that has come to point at a private
    // address since creation (DNS rebinding) is refused, and only a checked address is used,
    // whether by a kept connection or a new one.
    let addrs = match ssrf::resolve_checked(&parsed, how.allow_private).await {
        Ok(a) => a,
        Err(e @ ssrf::SsrfError::NotPublic(_)) => return failed(FailKind::Blocked, e.to_string()),
        Err(e) => return failed(FailKind::Refused, e.to_string()),
    };
    let key = |addr| Key { https: parsed.https, authority: parsed.authority.to_ascii_lowercase(), addr };
    for addr in &addrs {
        let Some(conn) = target.pool.take(&key(*addr)) else { continue };
        match exchange(conn, &parsed, body.clone(), how).await {
            // The receiver closed the kept connection before answering: try a new one.
            Exchanged::NotSent(_) => break,
            Exchanged::Answered(result, kept) => return keep(target, key(*addr), result, kept),
        }
    }
    let (addr, conn) = match http::open(&addrs, &parsed, target.tls.clone()).await {
        Ok(x) => x,
        Err(http::NoConnection(why)) => return failed(FailKind::Refused, why),
    };
    match exchange(conn, &parsed, body, how).await {
        Exchanged::NotSent(e) => failed(FailKind::Refused, e),
        Exchanged::Answered(result, kept) => keep(target, key(addr), result, kept),
    }
}

/// Returns a connection that answered in full to the pool; passes the result on.
fn keep(target: &Target, key: Key, result: AttemptResult, kept: Option<Conn>) -> AttemptResult {
    if let Some(conn) = kept {
        target.pool.put(key, conn);
    }
    result
}

/// How one request on a connection ended.
enum Exchanged {
    /// No answer began: the request may not have reached the receiver (on a kept connection,
    /// the receiver had closed it). Why.
    NotSent(String),
    /// An answer came (whole or not): the result, and the connection when it can be kept (the
    /// answer was read in full and the receiver keeps the connection open).
    Answered(AttemptResult, Option<Conn>),
}

async fn exchange(mut conn: Conn, url: &WebhookUrl, body: String, how: &Sending) -> Exchanged {
    let mut request = match http::request(Method::POST, url, Bytes::from(body)) {
        Ok(r) => r,
        Err(e) => return Exchanged::Answered(failed(FailKind::Blocked, e.to_string()), None),
    };
    let headers = request.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(event) = how.event {
        headers.insert("x-service-event", HeaderValue::from_static(event));
    }
    if let Some(s) = &how.signature {
        // Base64, digits, ':' and ',' only: valid header values.
        for (name, value) in [
            ("webhook-id", s.id.clone()),
            ("webhook-timestamp", s.timestamp_s.to_string()),
            ("webhook-signature", s.signature.clone()),
        ] {
            match HeaderValue::from_str(&value) {
                Ok(v) => headers.insert(name, v),
                Err(_) => return Exchanged::Answered(failed(FailKind::Refused, "invalid signature header"), None),
            };
        }
    }
    let response = match conn.sender.send_request(request).await {
        Ok(r) => r,
        Err(e) => return Exchanged::NotSent(format!("HTTP: {e}")),
    };
    let status = response.status().as_u16();
    // Read the whole answer (bounded) so the attempt ends only when it has arrived.
    let whole = match read_answer(response.into_body()).await {
        Ok(whole) => whole,
        Err(error) => {
            let kind = FailKind::Answer;
            return Exchanged::Answered(
                AttemptResult::Failed { status: Some(status), error: error.to_string(), kind },
                None,
            );
        }
    };
    let result = if (200..300).contains(&status) {
        AttemptResult::Delivered { status }
    } else {
        AttemptResult::Failed { status: Some(status), error: format!("HTTP {status}"), kind: FailKind::Answer }
    };
    // An answer not read to its end leaves bytes on the connection: it is not kept.
    Exchanged::Answered(result, whole.then_some(conn))
}

/// Reads an answer's body to its end, or until [`RESPONSE_BYTES_MAX`] bytes have come (the rest
/// is not read: the status decides). An answer that ends early (the connection closed before
/// the declared length, a broken chunked body) is an error: no full answer is a failure.
/// `Ok(true)` when the body was read to its end, `Ok(false)` when the bound stopped the reading.
async fn read_answer(mut body: hyper::body::Incoming) -> Result<bool, IncompleteAnswer> {
    let mut read = 0usize;
    while read <= RESPONSE_BYTES_MAX {
        match body.frame().await {
            None => return Ok(true),
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
            Some(Err(e)) => return Err(IncompleteAnswer { read, cause: e.to_string() }),
        }
    }
    Ok(false)
}

/// An answer whose body ended before it was whole.
#[derive(Debug)]
struct IncompleteAnswer {
    /// Bytes of the body that came.
    read: usize,
    /// What hyper said.
    cause: String,
}

impl std::fmt::Display for IncompleteAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "incomplete answer after {} bytes: {}", self.read, self.cause)
    }
}
