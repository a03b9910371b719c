//! The live feed on a shard: its WebSocket connections to the venues (one task each on the
//! shard's executor), the REST replies (history, Binance snapshots) and the shard's periodic
//! work, all sharing the shard's state on one thread.
//!
//! A frame is decoded and applied where it is read: the connection task borrows the shard's
//! state for the span of one message (no await while borrowed), so books, candles and alerts
//! change inline, in arrival order, with no queue between the socket and the book.
//!
//! Connections: each venue's pairs of this shard are split into connections of at most
//! `pairs_per_connection` pairs. A connection reconnects after a jittered backoff that doubles
//! from [`RECONNECT_BACKOFF_MIN_MS`] to [`RECONNECT_BACKOFF_MAX_MS`] (reset once a connection
//! has lasted [`RECONNECT_BACKOFF_RESET_MS`]); attempts of a venue are spaced process-wide by its
//! `connects_per_s` ([`ConnectPacer`]). A venue that is down only holds its own connections.
//! While the shard's event backlog is not empty the tasks stop reading (backpressure: the
//! socket's buffer fills, nothing is dropped here).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rampart_engine::book::Book;
use rampart_engine::{BookId, Tick, Venue};

use super::perp_polls::PerpPolls;
use super::Shard;
use rampart_state::{DensitySnapshot, Reconnect, RestStats, ShardEvent, VenueStats, LATENCY_US_MAX};
use rampart_venue::conn;
use rampart_venue::perp_listing::PerpPair;
use rampart_venue::protocol::{PerpLiq, PerpValues};
use rampart_venue::rest::{RestHandle, RestJob, RestReply};
use rampart_venue::session::{Count, Event as SessionEvent, Session, Sink, Transmit};
use rampart_venue::ws::{Event, WsCodec, WsUrl};
use rampart_venue::VenueSettings;

/// First reconnect delay.
pub const RECONNECT_BACKOFF_MIN_MS: u64 = 1_000;
/// Longest reconnect delay.
pub const RECONNECT_BACKOFF_MAX_MS: u64 = 60_000;
/// A connection that lasted this long resets the backoff.
pub const RECONNECT_BACKOFF_RESET_MS: i64 = 60_000;
/// Bytes of one WebSocket message at most (an OKX 400-level snapshot is about 30 KB).
pub const WS_MESSAGE_BYTES_MAX: usize = 4 << 20;
/// A read waits at most this long before the task looks at its timers.
const READ_SLICE: Duration = Duration::from_millis(250);
/// The shard reports ready once every book has its first history answer (loaded or failed),
/// or after this long, whichever comes first: a venue whose history endpoint hangs does not
/// hold readiness. Books whose history arrives later get their levels then.
pub const READY_WAIT_MS: i64 = 20_000;
/// First wait before a failed history backfill is asked again; it doubles per failure.
pub const BACKFILL_RETRY_MIN_MS: i64 = 30_000;
/// Longest wait between two history attempts of one book (retried forever).
pub const BACKFILL_RETRY_MAX_MS: i64 = 30 * 60_000;

/// Spaces the connection attempts of one venue across every shard.
#[derive(Debug, Default)]
pub struct ConnectPacer {
    next_ms: AtomicI64,
}

impl ConnectPacer {
    /// Reserves the next attempt slot at `per_s` attempts per second; returns its time.
    pub fn reserve(&self, now_ms: i64, per_s: f64) -> i64 {
        let gap = (1000.0 / per_s.max(0.001)) as i64;
        let mut slot = now_ms;
        let _ = self.next_ms.fetch_update(Ordering::AcqRel, Ordering::Acquire, |next| {
            slot = next.max(now_ms);
            Some(slot + gap)
        });
        slot
    }
}

/// What every shard of a live feed shares.
pub struct LiveFeed {
    /// Venues to connect, with their URLs and limits.
    pub venues: Vec<VenueSettings>,
    /// The venue's own symbol per book (grown with the registry).
    pub natives: Arc<arc_swap::ArcSwap<Vec<String>>>,
    /// TLS client configuration for `wss://`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Per shard, its handle on the REST thread.
    pub rest: Vec<RestHandle>,
    /// REST counters.
    pub rest_stats: Arc<[RestStats; Venue::COUNT]>,
    /// Verify OKX and Bitget checksums when sent and non-zero.
    pub verify_checksums: bool,
    /// Attempt pacing per venue.
    pub pacers: Arc<[ConnectPacer; Venue::COUNT]>,
    /// Each book with a USDT perpetual and its contract (decisions §17), in registry order;
    /// empty when `[derivatives]` is off or no venue listed one.
    pub perps: Vec<(BookId, PerpPair)>,
    /// Milliseconds between two open-interest polls of one Binance perpetual
    /// (`binance_oi_poll_s`).
    pub binance_oi_poll_ms: i64,
    /// Milliseconds between two polls of OKX's funding (`okx_funding_poll_s`).
    pub okx_funding_poll_ms: i64,
}

/// How often a shard logs books of one venue that lost sync (each one is counted in `/healthz`
/// and `/metrics` whatever the log says).
pub(crate) const DESYNC_LOG_PERIOD_MS: i64 = 10_000;

/// Log lines for books that lost sync: one line per venue and period, naming the pair, with the
/// count of the others since the last line, so a venue that breaks every book cannot flood
/// the log.
#[derive(Debug, Default)]
pub(crate) struct DesyncLog {
    last_ms: [i64; Venue::COUNT],
    unlogged: [u64; Venue::COUNT],
}

impl DesyncLog {
    /// A book of `venue` lost sync at `now_ms` (its rebuild starts).
    pub(crate) fn note(&mut self, venue: Venue, symbol: &str, now_ms: i64) {
        let v = venue.index();
        if now_ms - self.last_ms[v] < DESYNC_LOG_PERIOD_MS {
            self.unlogged[v] += 1;
            return;
        }
        tracing::warn!(
            "{}: {symbol} book out of sync, rebuilding ({} other books since the last line)",
            venue.as_str(),
            self.unlogged[v]
        );
        self.last_ms[v] = now_ms;
        self.unlogged[v] = 0;
    }
}

struct Live {
    shard: Shard,
    sessions: Vec<Session>,
    stopping: bool,
}

impl Sink for Shard {
    fn book(&mut self, id: BookId) -> Option<&mut Book> {
        self.market.get_mut(id).filter(|s| !s.delisted).map(|s| &mut s.book)
    }

    fn set_live(&mut self, id: BookId, live: bool) {
        let venue = self.shared.registry().get(id).venue;
        let Some(state) = self.market.get_mut(id) else { return };
        if state.stale != live {
            return;
        }
        state.stale = !live;
        if live && state.last_price.0 == 0 {
            // No trade and no history yet: the book's mid is the best price known.
            if let Some(mid) = state.book.mid() {
                state.last_price = mid;
                self.shared.slots[id.index()].price.store(mid.0, Ordering::Relaxed);
                self.shared.slots[id.index()].price_ts.store(self.config.clock.now_ms(), Ordering::Relaxed);
            }
        }
        let stats = &self.shared.venue_stats[self.index * Venue::COUNT + venue.index()];
        if live {
            stats.books_live.fetch_add(1, Ordering::Relaxed);
        } else {
            stats.books_live.fetch_sub(1, Ordering::Relaxed);
            // Stop serving its walls now rather than at the next scan.
            self.shared.publish_densities(id, DensitySnapshot::default());
            let registry = self.shared.registry();
            self.desyncs.note(venue, &registry.get(id).symbol, self.config.clock.now_ms());
        }
    }

    fn trade(&mut self, tick: &Tick) {
        self.apply_tick(tick);
    }

    fn perp_liquidation(&mut self, book: BookId, liq: &PerpLiq) {
        let now = self.config.clock.now_ms();
        let Shard { perps, events, alerts, shared, index, market, .. } = self;
        let Some(perps) = perps.as_mut() else { return };
        let mut n = 0u64;
        perps.take_liquidation(book, liq, now, market, &shared.slots, &mut |book, firing| {
            n += 1;
            events.enqueue(ShardEvent::Fired { book, firing, universe: alerts.is_universe(firing.id) });
        });
        fired(shared, *index, events, n);
    }

    fn perp_values(&mut self, book: BookId, values: &PerpValues) {
        let now = self.config.clock.now_ms();
        let Shard { perps, events, alerts, shared, index, market, .. } = self;
        let Some(perps) = perps.as_mut() else { return };
        let mut n = 0u64;
        perps.take_values(book, values, now, market, &mut |book, firing| {
            n += 1;
            events.enqueue(ShardEvent::Fired { book, firing, universe: alerts.is_universe(firing.id) });
        });
        fired(shared, *index, events, n);
    }

    fn decided(&mut self, sent_us: i64) {
        let now = self.config.clock.now_us();
        let max = LATENCY_US_MAX as i64;
        self.latency.tick_to_decision_us.saturating_record((now - sent_us).clamp(1, max) as u64);
        self.latency.read_to_decision_us.saturating_record((now - self.read_at_us).clamp(1, max) as u64);
    }

    fn count(&mut self, venue: Venue, what: Count) {
        let s = &self.shared.venue_stats[self.index * Venue::COUNT + venue.index()];
        let c = match what {
            Count::Message => {
                s.last_message_ms.store(self.config.clock.now_ms(), Ordering::Relaxed);
                &s.messages
            }
            Count::DecodeError => &s.decode_errors,
            Count::Gap => &s.gaps,
            Count::ChecksumMismatch => &s.checksum_mismatches,
            Count::Crossed => &s.crossed,
            Count::StaleSnapshot => &s.stale_snapshots,
            Count::Resync => &s.resyncs,
            Count::Reset => &s.resets,
            Count::VenueError => &s.venue_errors,
            Count::Synced => &s.syncs,
            Count::PerpMessage => {
                s.perp_last_message_ms.store(self.config.clock.now_ms(), Ordering::Relaxed);
                &s.perp_messages
            }
            Count::PerpDecodeError => &s.perp_decode_errors,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts `n` firings of shard `index` and wakes the writer, if any.
fn fired(shared: &rampart_state::Shared, index: usize, events: &crate::EventSender, n: u64) {
    if n > 0 {
        shared.stats[index].firings.fetch_add(n, Ordering::Relaxed);
        events.wake();
    }
}

fn stats(shard: &Shard, venue: Venue) -> &VenueStats {
    &shard.shared.venue_stats[shard.index * Venue::COUNT + venue.index()]
}

/// Runs a shard on the live feed until it is told to stop.
// Long: a live shard's one loop: frames, commands, REST replies, schedules and readiness in turn
// each round, over the shard it owns.
pub(crate) async fn run(mut shard: Shard, feed: Arc<LiveFeed>) {
    let index = shard.index;
    let clock = shard.config.clock.clone();
    let rest = feed.rest[index].clone();
    let n = shard.market.books().len();
    shard.shared.stats[index].books.store(n as u64, Ordering::Relaxed);
    // No book is live before its venue's snapshot.
    for state in shard.market.books_mut() {
        state.stale = true;
    }
    // Connections: per venue, the shard's books in registry order, in groups.
    let mut sessions = Vec::new();
    let natives = feed.natives.load_full();
    let mine: Vec<(BookId, String)> =
        shard.market.books().iter().map(|b| (b.id, natives.get(b.id.index()).cloned().unwrap_or_default())).collect();
    plan_sessions(&shard, &feed, &mine, &mut sessions);
    let mut polls = None;
    if shard.config.derivatives {
        let registry = shard.shared.registry();
        let now = clock.now_ms();
        let perps = crate::perp::ShardPerps::live(&registry, &feed.perps, &shard.market, feed.binance_oi_poll_ms, now);
        plan_perp_sessions(&shard, &feed, &perps, &mut sessions);
        let held: Vec<(BookId, PerpPair)> =
            feed.perps.iter().filter(|(b, _)| perps.book(*b).is_some()).cloned().collect();
        let every = (feed.binance_oi_poll_ms, feed.okx_funding_poll_ms);
        polls = Some(PerpPolls::new(&held, &registry, every, now));
        shard = shard.with_perps(perps);
    }
    let mut history = Backfills::new(shard.market.books().iter().map(|b| b.id));
    let live = Rc::new(RefCell::new(Live { shard, sessions, stopping: false }));
    let count = live.borrow().sessions.len();
    connect(&live, &feed, 0..count);
    let started = clock.now_ms();
    let mut ready = false;
    let mut snapshots = Vec::new();
    loop {
        let mut new_sessions = 0..0;
        {
            let mut guard = live.borrow_mut();
            let Live { shard, sessions, stopping } = &mut *guard;
            if *stopping || shard.take_commands() {
                *stopping = true;
                break;
            }
            let now = clock.now_ms();
            // Books listed since start: their own connections, and their history.
            if !shard.added.is_empty() {
                let added = std::mem::take(&mut shard.added);
                let before = sessions.len();
                plan_sessions(shard, &feed, &added, sessions);
                new_sessions = before..sessions.len();
                added.iter().for_each(|(book, _)| history.add(*book));
            }
            // Perpetuals gained since start: their own connections; their polls.
            if let Some(changes) = shard.perps.as_mut().map(crate::perp::ShardPerps::take_feed_changes) {
                let before = sessions.len();
                perp_feed_changes(shard, &feed, changes, sessions, polls.as_mut());
                let start = if new_sessions.is_empty() { before } else { new_sessions.start };
                new_sessions = start..sessions.len();
            }
            // Books listed again: a fresh book from the venue and their history again.
            while let Some(book) = shard.relisted.pop() {
                if let Some(sess) = session_of(sessions, book) {
                    sess.handle_relisted(book, now, shard);
                }
                history.queue.push_back(book);
            }
            history.ask(&rest, now);
            if let Some(p) = polls.as_mut() {
                p.ask(&rest, now);
            }
            while let Some(reply) = rest.reply() {
                let reply = match polls.as_mut() {
                    Some(p) => p.take(shard, reply),
                    None => Some(reply),
                };
                if let Some(reply) = reply {
                    take_reply(shard, sessions, &mut history, reply, now);
                }
            }
            rebuilds(shard, sessions, &rest, &mut snapshots, now);
            if !ready && (now - started >= READY_WAIT_MS || history.all_answered()) {
                ready = true;
                shard.levels_epoch_ms = now;
                // Every book's metrics are published before the shard says it is ready.
                for k in 0..shard.market.books().len() {
                    shard.publish_metrics(k, now);
                }
                shard.shared.stats[index].ready.store(true, Ordering::Release);
                shard.emit(ShardEvent::Ready { shard: index });
                shard.reserve_backlog();
                let (loaded, all) = (history.loaded_count(), history.loaded.len());
                tracing::info!(
                    "shard {index}: ready after {} ms; history of {loaded} of {all} books loaded",
                    now - started
                );
            }
            shard.levels_soon_due(now);
            shard.flush_backlog();
            if ready {
                shard.levels_due(now);
                shard.walls_due(now);
                shard.metrics_due(now);
            }
            shard.publish_counters();
            shard.merge_latency(now);
            shard.shared.stats[index].ticks.store(shard.applied, Ordering::Relaxed);
        }
        connect(&live, &feed, new_sessions);
        let poll = live.borrow().shard.config.poll_interval;
        glommio::timer::sleep(poll).await;
    }
}

/// The session carrying `book`.
fn session_of(sessions: &mut [Session], book: BookId) -> Option<&mut Session> {
    sessions.iter_mut().find(|s| s.books().contains(&book))
}

/// A shard's history requests: the queue, failed ones waiting for their next attempt, and per
/// local book whether its history is loaded and how many attempts failed in a row.
struct Backfills {
    queue: VecDeque<BookId>,
    /// (due, book); at most one entry per book.
    retry: Vec<(i64, BookId)>,
    failures: Vec<u32>,
    loaded: Vec<bool>,
}

impl Backfills {
    fn new(books: impl Iterator<Item = BookId>) -> Backfills {
        let queue: VecDeque<BookId> = books.collect();
        let n = queue.len();
        Backfills { queue, retry: Vec::with_capacity(n), failures: vec![0; n], loaded: vec![false; n] }
    }

    /// A book the shard took after start (its local index is the next one).
    fn add(&mut self, book: BookId) {
        self.failures.push(0);
        self.loaded.push(false);
        self.queue.push_back(book);
    }

    /// Failed books whose wait is over go back in line; the line goes to the REST thread as far
    /// as its queue takes it.
    fn ask(&mut self, rest: &RestHandle, now: i64) {
        let mut j = 0;
        while j < self.retry.len() {
            if self.retry[j].0 <= now {
                self.queue.push_back(self.retry.swap_remove(j).1);
            } else {
                j += 1;
            }
        }
        while let Some(&book) = self.queue.front() {
            if rest.ask(RestJob::Backfill { book }).is_err() {
                break;
            }
            self.queue.pop_front();
        }
    }

    /// Local book `k` got its history; true the first time.
    fn loaded(&mut self, k: usize) -> bool {
        self.failures[k] = 0;
        !std::mem::replace(&mut self.loaded[k], true)
    }

    /// Local book `k` did not: it is asked again later; returns (failures in a row, wait ms).
    fn failed(&mut self, k: usize, book: BookId, now: i64) -> (u32, i64) {
        self.failures[k] = self.failures[k].saturating_add(1);
        let wait = backfill_retry_ms(self.failures[k]);
        debug_assert!(self.retry.len() < self.failures.len(), "one retry per book at most");
        self.retry.push((now + wait, book));
        (self.failures[k], wait)
    }

    /// Every book has had its first answer (loaded or failed).
    fn all_answered(&self) -> bool {
        self.loaded.iter().zip(&self.failures).all(|(l, f)| *l || *f > 0)
    }

    fn loaded_count(&self) -> usize {
        self.loaded.iter().filter(|l| **l).count()
    }
}

/// Acts on one REST reply: history installed or asked again later, a snapshot handed to its
/// session, a failed snapshot rescheduled by it.
fn take_reply(shard: &mut Shard, sessions: &mut [Session], history: &mut Backfills, reply: RestReply, now: i64) {
    let local = |shard: &Shard, book: BookId| shard.market.books().iter().position(|b| b.id == book);
    match reply {
        RestReply::Backfill { book, candles } => {
            let Some(k) = local(shard, book) else { return };
            if history.loaded(k) {
                let venue = shard.shared.registry().get(book).venue;
                stats(shard, venue).books_history.fetch_add(1, Ordering::Relaxed);
            }
            history_loaded(shard, k, candles, now);
        }
        RestReply::BackfillFailed { book, error } => {
            let Some(k) = local(shard, book) else { return };
            let (failures, wait) = history.failed(k, book, now);
            if failures <= 2 || failures.is_power_of_two() {
                let registry = shard.shared.registry();
                let ins = registry.get(book);
                tracing::warn!(
                    "{} {}: no history ({error}); levels build from live trades; asking again in {} s \
                     (failure {failures})",
                    ins.venue.as_str(),
                    ins.symbol,
                    wait / 1000,
                );
            }
        }
        RestReply::Snapshot { book, body } => {
            if let Some(sess) = session_of(sessions, book) {
                sess.handle_snapshot(book, &body, now, shard);
            }
        }
        RestReply::SnapshotFailed { book, error } => {
            tracing::warn!("snapshot of {}: {error}", shard.shared.registry().get(book).symbol);
            if let Some(sess) = session_of(sessions, book) {
                sess.handle_snapshot_failed(book, now);
            }
        }
        // The polls' answers (taken by `PerpPolls` when the shard has perpetuals).
        RestReply::PerpOi { .. }
        | RestReply::PerpOiFailed { .. }
        | RestReply::PerpFunding { .. }
        | RestReply::PerpFundingFailed { .. } => {}
    }
}

/// Starts the book rebuilds that are due and queues the snapshots they want; a snapshot the
/// REST queue cannot take is a failure its session reschedules.
fn rebuilds(shard: &mut Shard, sessions: &mut [Session], rest: &RestHandle, asks: &mut Vec<BookId>, now: i64) {
    for sess in sessions.iter_mut() {
        sess.handle_timeout(now, shard);
        // A reconnect is the connection task's to act on; it stays reported until then.
        while let Some(SessionEvent::SnapshotWanted(book)) = sess.poll_event(now) {
            asks.push(book);
        }
    }
    for book in asks.drain(..) {
        if rest.ask(RestJob::Snapshot { book }).is_err() {
            if let Some(sess) = session_of(sessions, book) {
                sess.handle_snapshot_failed(book, now);
            }
        }
    }
}

/// Installs a book's fetched history: the bars, then (before its first trade) the last close
/// as its price, and its levels computed against it. The close wins over a price taken from
/// the book's mid before the history came: which of the two arrives first is timing, and the
/// price before the first trade is the backfilled close either way.
fn history_loaded(shard: &mut Shard, k: usize, mut candles: Box<rampart_engine::candle::CandleSet>, now: i64) {
    let state = &mut shard.market.books_mut()[k];
    candles.merge_live(&state.candles);
    state.candles = *candles;
    state.alerts.candles_changed();
    if state.last_trade_ms == 0 {
        let newest = rampart_engine::Timeframe::ALL.iter().find_map(|tf| state.candles.ring(*tf).newest());
        if let Some(c) = newest.filter(|c| c.close.0 > 0) {
            state.last_price = c.close;
            let i = state.id.index();
            shard.shared.slots[i].price.store(c.close.0, Ordering::Relaxed);
            shard.shared.slots[i].price_ts.store(c.open_ms, Ordering::Relaxed);
        }
    }
    shard.recompute_levels(k, now);
}

/// The wait before the next history attempt after `failures` failures in a row.
fn backfill_retry_ms(failures: u32) -> i64 {
    let doublings = failures.saturating_sub(1).min(16);
    (BACKFILL_RETRY_MIN_MS << doublings).min(BACKFILL_RETRY_MAX_MS)
}

/// Groups `books` (with their venue names) per venue into sessions of at most the venue's
/// `pairs_per_connection`, appended to `sessions`.
fn plan_sessions(shard: &Shard, feed: &LiveFeed, books: &[(BookId, String)], sessions: &mut Vec<Session>) {
    let registry = shard.shared.registry();
    for s in &feed.venues {
        let mine: Vec<&(BookId, String)> = books.iter().filter(|(id, _)| registry.get(*id).venue == s.venue).collect();
        stats(shard, s.venue).books.fetch_add(mine.len() as u64, Ordering::Relaxed);
        for group in mine.chunks(s.pairs_per_connection.max(1)) {
            let ids = group.iter().map(|(id, _)| *id).collect();
            let natives = group.iter().map(|(_, n)| n.clone()).collect();
            sessions.push(Session::new(s.venue, ids, natives, feed.verify_checksums));
            stats(shard, s.venue).connections_planned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Groups the shard's books with a perpetual per venue into perpetual sessions of at most the
/// venue's `pairs_per_connection`, appended to `sessions`.
fn plan_perp_sessions(shard: &Shard, feed: &LiveFeed, perps: &crate::perp::ShardPerps, sessions: &mut Vec<Session>) {
    let held: Vec<&(BookId, PerpPair)> = feed.perps.iter().filter(|(b, _)| perps.book(*b).is_some()).collect();
    push_perp_sessions(shard, feed, &held, sessions);
}

/// Appends perpetual sessions for `pairs`, per venue in groups of its `pairs_per_connection`.
fn push_perp_sessions(shard: &Shard, feed: &LiveFeed, pairs: &[&(BookId, PerpPair)], sessions: &mut Vec<Session>) {
    let registry = shard.shared.registry();
    for s in &feed.venues {
        let mine: Vec<&&(BookId, PerpPair)> = pairs.iter().filter(|(b, _)| registry.get(*b).venue == s.venue).collect();
        for group in mine.chunks(s.pairs_per_connection.max(1)) {
            let books = group.iter().map(|(b, _)| *b).collect();
            let pairs = group.iter().map(|(_, p)| p.clone()).collect();
            sessions.push(Session::perp(s.venue, books, pairs));
            stats(shard, s.venue).perp_connections_planned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Acts on the perpetuals' listing changes the shard took (`crate::perp::FeedChange`): a
/// perpetual gained gets a connection of its own (appended to `sessions`) and, on Binance, its
/// OI polled; a delisted one's OI is no longer polled, a relisted one's again. (A delisted
/// perpetual's connection stays: the venue sends nothing for it, and what it sends is dropped.)
fn perp_feed_changes(
    shard: &Shard,
    feed: &LiveFeed,
    changes: Vec<crate::perp::FeedChange>,
    sessions: &mut Vec<Session>,
    mut polls: Option<&mut PerpPolls>,
) {
    use crate::perp::FeedChange;
    let registry = shard.shared.registry();
    let mut added: Vec<(BookId, PerpPair)> = Vec::new();
    for change in changes {
        match change {
            FeedChange::Added(book, c) => {
                let pair = PerpPair {
                    symbol: registry.get(book).symbol.clone(),
                    contract: c.contract,
                    multiplier: c.multiplier,
                    contract_size: c.contract_size,
                    interval_h: c.interval_h,
                };
                if let Some(p) = polls.as_deref_mut() {
                    p.add(registry.get(book).venue, book, &pair);
                }
                added.push((book, pair));
            }
            FeedChange::Delisted(book) => polls.as_deref_mut().into_iter().for_each(|p| p.park(book, true)),
            FeedChange::Relisted(book) => polls.as_deref_mut().into_iter().for_each(|p| p.park(book, false)),
        }
    }
    push_perp_sessions(shard, feed, &added.iter().collect::<Vec<_>>(), sessions);
}

/// Starts the connection tasks of sessions `range`.
fn connect(live: &Rc<RefCell<Live>>, feed: &Arc<LiveFeed>, range: std::ops::Range<usize>) {
    for c in range {
        let venue = live.borrow().sessions[c].venue();
        let Some(settings) = feed.venues.iter().find(|v| v.venue == venue).cloned() else { continue };
        glommio::spawn_local(connection(live.clone(), c, settings, feed.clone())).detach();
    }
}

/// The open-connections gauge of a venue's spot or perpetual connections: a perpetual
/// connection's life is kept out of the spot feed's counters (`/healthz` judges the spot feed by
/// them; decisions §17: the perpetuals never make it unready).
fn open_count(s: &VenueStats, perp: bool) -> &std::sync::atomic::AtomicU64 {
    if perp {
        &s.perp_connections_open
    } else {
        &s.connections_open
    }
}

fn jitter(ms: u64, now_ms: i64) -> u64 {
    // Up to ±25 %, from the clock's low bits: enough to spread reconnects of many connections.
    let noise = (now_ms as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    let span = ms / 2;
    ms - ms / 4 + if span > 0 { noise % span } else { 0 }
}

/// One connection's life: connect, stream, and reconnect after a backoff, until the shard stops.
// Long: one connection's life as one loop: connect, subscribe, stream, back off, each a few lines
// over the same connection state.
async fn connection(live: Rc<RefCell<Live>>, c: usize, settings: VenueSettings, feed: Arc<LiveFeed>) {
    let venue = settings.venue;
    let clock = live.borrow().shard.config.clock.clone();
    let mut seed = [0u8; 8];
    let _ = getrandom::getrandom(&mut seed);
    let mut codec = WsCodec::new(WS_MESSAGE_BYTES_MAX, u64::from_le_bytes(seed));
    let mut backoff_ms = 0u64;
    let perp = live.borrow().sessions[c].is_perp();
    // Logs name a perpetual connection as such ("binance perpetuals").
    let name = if perp { format!("{} perpetuals", venue.as_str()) } else { venue.as_str().to_owned() };
    let url = live.borrow().sessions[c].url(if perp { &settings.perp_ws } else { &settings.ws });
    let parsed = match WsUrl::parse(&url) {
        Ok(u) => u,
        Err(e) => {
            tracing::error!("{name}: {e}");
            return;
        }
    };
    loop {
        if live.borrow().stopping {
            return;
        }
        let now = clock.now_ms();
        let slot = feed.pacers[venue.index()].reserve(now, settings.connects_per_s);
        if slot > now {
            glommio::timer::sleep(Duration::from_millis((slot - now) as u64)).await;
        }
        if !perp {
            stats(&live.borrow().shard, venue).connects.fetch_add(1, Ordering::Relaxed);
        }
        let opened = conn::connect(&parsed, feed.tls.clone(), &mut codec).await;
        let mut io = match opened {
            Ok(io) => io,
            Err(e) => {
                if !perp {
                    stats(&live.borrow().shard, venue).connect_failures.fetch_add(1, Ordering::Relaxed);
                }
                backoff_ms = (backoff_ms * 2).clamp(RECONNECT_BACKOFF_MIN_MS, RECONNECT_BACKOFF_MAX_MS);
                if backoff_ms <= 2 * RECONNECT_BACKOFF_MIN_MS {
                    tracing::warn!("{name}: connection failed: {e}");
                }
                glommio::timer::sleep(Duration::from_millis(jitter(backoff_ms, clock.now_ms()))).await;
                continue;
            }
        };
        let opened_ms = clock.now_ms();
        {
            let mut guard = live.borrow_mut();
            let Live { shard, sessions, .. } = &mut *guard;
            sessions[c].handle_connected(opened_ms, shard);
            open_count(stats(shard, venue), perp).fetch_add(1, Ordering::Relaxed);
        }
        let ended = stream(&live, c, &mut io, &mut codec).await;
        io.close().await;
        {
            let mut guard = live.borrow_mut();
            let Live { shard, sessions, stopping } = &mut *guard;
            sessions[c].handle_disconnected(shard);
            let s = stats(shard, venue);
            open_count(s, perp).fetch_sub(1, Ordering::Relaxed);
            if !perp {
                s.disconnects.fetch_add(1, Ordering::Relaxed);
                if let Ended::Reconnect(r) = ended {
                    s.reconnects[r as usize].fetch_add(1, Ordering::Relaxed);
                }
            }
            if *stopping || matches!(ended, Ended::Stopping) {
                return;
            }
        }
        let why = match &ended {
            Ended::Reconnect(r) => format!("reconnecting ({})", r.as_str()),
            Ended::Io(why) => why.clone(),
            Ended::Stopping => "stopping".to_owned(),
        };
        tracing::info!("{name}: connection {c} ended: {why}");
        if clock.now_ms() - opened_ms >= RECONNECT_BACKOFF_RESET_MS {
            backoff_ms = 0;
        }
        backoff_ms = (backoff_ms * 2).clamp(RECONNECT_BACKOFF_MIN_MS, RECONNECT_BACKOFF_MAX_MS);
        glommio::timer::sleep(Duration::from_millis(jitter(backoff_ms, clock.now_ms()))).await;
    }
}

/// Why a connection's stream ended.
enum Ended {
    /// The shard is stopping.
    Stopping,
    /// The session wanted a new connection.
    Reconnect(Reconnect),
    /// The venue closed it, or reading, writing or decoding failed.
    Io(String),
}

/// Streams one open connection until it must end; returns why.
// Long: the I/O loop of one connection (write what the session asks, read, split frames, answer
// pings); every timing rule is the session's, this only does the I/O in one place.
async fn stream(live: &Rc<RefCell<Live>>, c: usize, io: &mut conn::Io, codec: &mut WsCodec) -> Ended {
    let mut ping = [0u8; 125];
    let clock = live.borrow().shard.config.clock.clone();
    loop {
        let now = clock.now_ms();
        // What the session wants written now (paced control, keepalive), then whether it wants
        // a new connection; the session decides both from `now`.
        let (transmit, reconnect, wake_at, backpressure) = {
            let mut g = live.borrow_mut();
            if g.stopping {
                return Ended::Stopping;
            }
            let s = &mut g.sessions[c];
            let transmit = s.poll_transmit(now);
            let (reconnect, wake_at) = (s.poll_reconnect(now), s.poll_timeout());
            (transmit, reconnect, wake_at, g.shard.has_backlog())
        };
        let sent = match &transmit {
            Some(Transmit::Control(msg)) => Some(io.write_all(codec.text(msg)).await),
            Some(Transmit::Ping(p)) => Some(io.write_all(codec.text(p)).await),
            None => None,
        };
        if let Some(Err(e)) = sent {
            return Ended::Io(format!("send: {e}"));
        }
        if transmit.is_some() {
            continue;
        }
        if let Some(r) = reconnect {
            if r != Reconnect::Idle {
                let _ = io.write_all(codec.close(1000)).await;
            }
            return Ended::Reconnect(r);
        }
        if backpressure {
            glommio::timer::sleep(Duration::from_millis(1)).await;
            continue;
        }
        let wait = Duration::from_millis(wake_at.saturating_sub(now).clamp(1, READ_SLICE.as_millis() as i64) as u64);
        match io.read_within(codec.read_space(), wait).await {
            None => continue,
            Some(Ok(0)) => return Ended::Io("closed by the venue".into()),
            Some(Err(e)) => return Ended::Io(format!("read: {e}")),
            Some(Ok(n)) => {
                codec.filled(n);
                let mut g = live.borrow_mut();
                g.shard.read_at_us = clock.now_us();
                // Commands queued before these bytes arrived take effect before they are applied:
                // an alert whose creation was answered before a trade was sent sees that trade.
                if g.shard.take_commands() {
                    g.stopping = true;
                }
            }
        }
        loop {
            let now = clock.now_ms();
            let pong_len = match codec.next_event() {
                Ok(None) => break,
                Err(e) => {
                    let code = if matches!(e, rampart_venue::ws::WsError::TooBig { .. }) { 1009 } else { 1002 };
                    let _ = io.write_all(codec.close(code)).await;
                    return Ended::Io(e.to_string());
                }
                Ok(Some(Event::Text(t))) => {
                    let mut g = live.borrow_mut();
                    let Live { shard, sessions, .. } = &mut *g;
                    sessions[c].handle_text(now, t, shard);
                    None
                }
                Ok(Some(Event::Ping(p))) => {
                    ping[..p.len()].copy_from_slice(p);
                    Some(p.len())
                }
                Ok(Some(Event::Pong | Event::Binary(_))) => {
                    live.borrow_mut().sessions[c].handle_alive(now);
                    None
                }
                Ok(Some(Event::Close { code, reason })) => {
                    let why = format!("closed by the venue: {code} {}", String::from_utf8_lossy(reason));
                    let _ = io.write_all(codec.close(1000)).await;
                    return Ended::Io(why);
                }
            };
            if let Some(n) = pong_len {
                live.borrow_mut().sessions[c].handle_alive(now);
                if let Err(e) = io.write_all(codec.pong(&ping[..n])).await {
                    return Ended::Io(format!("send: {e}"));
                }
            }
        }
    }
}
