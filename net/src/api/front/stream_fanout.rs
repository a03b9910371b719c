//! The front's stream fan-out task (issue #34): every [`ROUND`] it looks once at each book some
//! `GET /v1/stream` connection follows (`crate::stream::fanout`), reading what the shards
//! published (atomics and `ArcSwap` loads: the shards do nothing per subscriber), and wakes the
//! connections it handed something. Beside it the inbox reader takes every account's new inbox
//! entries at each writer commit (from the writer's feed, else one query; and once a second:
//! commits of a cluster's other nodes) and hands each to its account's `alerts` connections, so
//! a firing costs no query however many streams and front threads follow `alerts`. Both run on
//! the front's thread while any stream is open.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rampart_engine::{BookId, Venue};
use tokio::sync::Notify;

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::books::Books;
use super::gate::Gate;
use crate::api::metrics::Metrics;
use crate::stream::fanout::{ConnId, Fanout, View};
use crate::stream::Bounds;
use rampart_state::board::Board;
use rampart_state::clock::SharedClock;
use rampart_store::inbox_feed::{FedEntry, Took};
use rampart_store::storage::StorageThread;
use rampart_store::writer::WriterStats;

/// How often the fan-out looks at the followed books: a publication reaches a connection's
/// outbox within it.
pub const ROUND: Duration = Duration::from_millis(2);
/// Inbox entries the inbox reader reads at once (more: it reads again at once).
const INBOX_READ_MAX: u32 = 1_000;
/// The inbox reader reads at least this often (entries a cluster's other nodes wrote, when
/// their announcement was lost).
const INBOX_RESCAN: Duration = Duration::from_secs(1);
/// How often the `/metrics` stream instruments are set.
const FIGURES_EVERY_MS: i64 = 100;
/// How often the books of a `*` channel (its venue's listed pairs) are listed again.
const STARS_REFRESH_MS: i64 = 1_000;

/// What one front thread's stream connections read (`stream_conn::Connection` takes it): the
/// gate they stand on, the books and board their channels cover, storage for `alerts`, and the
/// fan-out they join (`Hub`, with the tasks below).
pub struct StreamCore {
    pub(super) gate: Arc<Gate>,
    pub(super) books: Rc<Books>,
    /// The board channels' numbers.
    pub(super) board: Arc<ArcSwap<Board>>,
    /// `alerts` backlogs and the inbox reader's reads.
    pub(super) storage: StorageThread,
    pub(super) clock: SharedClock,
    /// The writer's counters: `alerts` looks at its count of inbox commits.
    pub(super) writer_stats: Arc<WriterStats>,
    /// The fan-out: market subscriptions and outboxes of every connection.
    pub(super) fanout: Rc<RefCell<Hub>>,
    /// `[streams]`: subscriptions and unsent bytes per connection.
    pub(super) bounds: Bounds,
    /// The stream instruments of `/metrics`, when measured.
    pub(super) metrics: Option<Arc<Metrics>>,
}

/// The fan-out and the wakers of the connections it hands to.
pub struct Hub {
    /// Subscriptions, per-book state and outboxes.
    pub fanout: Fanout,
    wakers: HashMap<ConnId, Rc<Notify>>,
    running: bool,
    /// When the `/metrics` instruments were last moved, and this hub's figures then.
    shown: Shown,
    /// The newest inbox id the inbox reader has handed out (`None`: it is not reading: no
    /// `alerts` connection, or not started yet).
    pub inbox_last: Option<i64>,
    inbox_running: bool,
}

/// What a hub last added to the `/metrics` stream instruments, and when.
#[derive(Clone, Copy, Debug, Default)]
struct Shown {
    ms: i64,
    conflations: u64,
    handed: u64,
    connections: i64,
    queued_bytes: i64,
}

/// A connection's place in the hub, given back when it ends.
pub struct Joined {
    hub: Rc<RefCell<Hub>>,
    /// The connection's id.
    pub conn: ConnId,
    /// Woken when its outbox has something.
    pub woken: Rc<Notify>,
}

impl Drop for Joined {
    fn drop(&mut self) {
        let mut hub = self.hub.borrow_mut();
        hub.fanout.close(self.conn);
        hub.wakers.remove(&self.conn);
    }
}

impl Hub {
    /// No connection yet; outboxes bounded as `bounds` say.
    pub fn new(bounds: &Bounds) -> Hub {
        Hub {
            fanout: Fanout::new(bounds.outbox_bytes_max()),
            wakers: HashMap::new(),
            running: false,
            shown: Shown::default(),
            inbox_last: None,
            inbox_running: false,
        }
    }

    /// Wakes the connections the fan-out handed something.
    fn wake(&mut self, woken: &mut Vec<ConnId>) {
        self.fanout.woken(woken);
        for c in woken.iter() {
            if let Some(w) = self.wakers.get(c) {
                w.notify_one();
            }
        }
    }
}

impl StreamCore {
    /// Opens a connection in the hub, starting the fan-out task if it is not running.
    pub(super) fn join_fanout(self: &Rc<Self>) -> Joined {
        let woken = Rc::new(Notify::new());
        let mut hub = self.fanout.borrow_mut();
        let conn = hub.fanout.open();
        hub.wakers.insert(conn, woken.clone());
        if !hub.running {
            hub.running = true;
            tokio::task::spawn_local(self.clone().run_fanout());
        }
        Joined { hub: self.fanout.clone(), conn, woken }
    }

    /// The fan-out task: a round every [`ROUND`] until no connection is left.
    async fn run_fanout(self: Rc<Self>) {
        let mut tick = tokio::time::interval(ROUND);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let (mut books, mut woken) = (Vec::new(), Vec::new());
        let mut stars = Stars::default();
        loop {
            tick.tick().await;
            let now_ms = self.clock.now_ms();
            let mut hub = self.fanout.borrow_mut();
            if hub.wakers.is_empty() {
                hub.running = false;
                hub.shown = self.show_figures(&hub.fanout, now_ms, hub.shown);
                return;
            }
            hub.fanout.books(&mut books);
            stars.refresh(&self, &hub.fanout, now_ms);
            books.extend_from_slice(&stars.books);
            books.sort_unstable();
            books.dedup();
            self.look_books(&mut hub.fanout, &books, now_ms);
            hub.wake(&mut woken);
            if now_ms - hub.shown.ms >= FIGURES_EVERY_MS {
                hub.shown = self.show_figures(&hub.fanout, now_ms, hub.shown);
            }
        }
    }

    /// Moves the stream instruments of `/metrics` by what changed in this hub since `shown`:
    /// every front thread's hub adds its own, so the gauges are the process's sums.
    fn show_figures(&self, fanout: &Fanout, now_ms: i64, shown: Shown) -> Shown {
        let f = fanout.figures();
        let now = Shown {
            ms: now_ms,
            conflations: f.conflations,
            handed: f.handed,
            connections: f.connections as i64,
            queued_bytes: f.queued_bytes as i64,
        };
        if let Some(m) = &self.metrics {
            m.http.streams_open.inc_by(now.connections - shown.connections);
            m.http.stream_queued_bytes.inc_by(now.queued_bytes - shown.queued_bytes);
            m.http.stream_conflations.inc_by(now.conflations - shown.conflations);
            m.http.stream_handed.inc_by(now.handed - shown.handed);
        }
        now
    }

    /// Starts the inbox reader if it is not running (an `alerts` subscription).
    pub(super) fn start_inbox_reader(self: &Rc<Self>) {
        let mut hub = self.fanout.borrow_mut();
        if !hub.inbox_running {
            hub.inbox_running = true;
            tokio::task::spawn_local(self.clone().run_inbox());
        }
    }

    /// The inbox reader: from the newest entry at its start, every entry written since, handed
    /// to its account's `alerts` connections; it looks when the writer commits inbox entries
    /// (`WriterStats::inbox_written`, or its count moved) and once a second, and stops when no
    /// connection follows `alerts`. A firings commit's entries are taken from the writer's feed
    /// (`rampart_store::inbox_feed`: no query); the database is read once a second, after a
    /// commit whose entries the feed does not hold, and when the feed has a gap.
    async fn run_inbox(self: Rc<Self>) {
        let mut woken = Vec::new();
        let mut last = loop {
            match self.storage.run(|store| store.inbox_max_id()).await {
                Ok(id) => break id,
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        };
        self.fanout.borrow_mut().inbox_last = Some(last);
        let (mut seen, mut unfed_seen, mut fed) = (u64::MAX, u64::MAX, Vec::new());
        loop {
            // Listening before the count is read: a commit in between still wakes the wait.
            let written = self.writer_stats.inbox_written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            let mut rescan = false;
            if self.writer_stats.inbox_writes.load(Ordering::Acquire) == seen {
                // Nothing committed since the last look: wait for a commit, or a second.
                rescan = tokio::time::timeout(INBOX_RESCAN, written).await.is_err();
            }
            seen = self.writer_stats.inbox_writes.load(Ordering::Acquire);
            let unfed = self.writer_stats.inbox_unfed.load(Ordering::Acquire);
            if !self.fanout.borrow().fanout.wants_alerts() {
                let mut hub = self.fanout.borrow_mut();
                hub.inbox_last = None;
                hub.inbox_running = false;
                return;
            }
            fed.clear();
            let from_feed = !rescan && unfed == unfed_seen;
            if from_feed && self.writer_stats.inbox_feed.after(last, &mut fed) != Took::Gap {
                last = self.hand_fed(&fed, last, &mut woken);
                continue;
            }
            let after = last;
            let Ok(rows) = self.storage.run(move |store| store.inbox_all_after(after, INBOX_READ_MAX)).await else {
                continue;
            };
            unfed_seen = unfed;
            let mut hub = self.fanout.borrow_mut();
            for (account, r) in rows.iter() {
                debug_assert!(r.id > last, "ids rise");
                hub.fanout.hand_alert(*account, r.id, &Rc::from(r.kind.as_str()), &Rc::from(r.body.as_str()));
                last = r.id;
            }
            hub.inbox_last = Some(last);
            hub.wake(&mut woken);
            if rows.len() == INBOX_READ_MAX as usize {
                seen = u64::MAX;
            }
        }
    }

    /// Hands the feed's entries (the run right after `last`) to their accounts' `alerts`
    /// connections and wakes them; the new last id.
    fn hand_fed(&self, fed: &[FedEntry], mut last: i64, woken: &mut Vec<ConnId>) -> i64 {
        let mut hub = self.fanout.borrow_mut();
        for e in fed {
            debug_assert_eq!(e.id, last + 1, "the run right after the last id");
            hub.fanout.hand_alert(e.account_id, e.id, &Rc::from(e.kind), &Rc::from(&*e.body));
            last = e.id;
        }
        hub.inbox_last = Some(last);
        hub.wake(woken);
        last
    }

    /// One look at each of `books` whose published state moved since its last look (a book no
    /// longer in the registry is skipped).
    pub(super) fn look_books(&self, fanout: &mut Fanout, books: &[BookId], now_ms: i64) {
        let registry = self.books.shared.registry();
        for &book in books {
            if book.index() >= registry.len() || book.index() >= self.books.shared.slots.len() {
                continue;
            }
            let slot = &self.books.shared.slots[book.index()];
            let (price, price_ts) = self.books.shared.price(book);
            let (high, low) = (slot.trade_high.load(Ordering::Acquire), slot.trade_low.load(Ordering::Acquire));
            let perp_ms = slot.perp.load().as_ref().map_or(0, |p| p.ts_ms);
            let liq_feed = slot.liquidations.get();
            let liq_head = liq_feed.map_or(0, |f| f.head() as i64);
            let levels_ms = slot.levels.load().computed_ms;
            let stamp = [price, price_ts, high, low, levels_ms, slot.densities.load().ts_ms, perp_ms, liq_head];
            if fanout.unchanged(book, &stamp) {
                continue;
            }
            let info = registry.get(book);
            let (levels, high, low) = self.books.shared.levels_view(book);
            // The scan first: its shard publishes the wall history (how walls went) before it.
            let walls = slot.densities.load_full();
            let history = slot.wall_history.load_full();
            let perp = slot.perp.load_full();
            let view = View { price, price_ts, high, low, levels, walls, history, perp, liq_feed };
            fanout.look(book, info.venue, &info.symbol, &view, stamp, now_ms);
        }
    }
}

/// The listed books of the venues followed with a `*` channel, listed again every
/// [`STARS_REFRESH_MS`] or when that set of venues changes.
#[derive(Default)]
struct Stars {
    venues: [bool; Venue::COUNT],
    books: Vec<BookId>,
    listed_ms: i64,
}

impl Stars {
    fn refresh(&mut self, front: &StreamCore, fanout: &Fanout, now_ms: i64) {
        let mut venues = [false; Venue::COUNT];
        for v in fanout.star_venues() {
            venues[v.index()] = true;
        }
        if venues == self.venues && now_ms - self.listed_ms < STARS_REFRESH_MS {
            return;
        }
        self.venues = venues;
        self.listed_ms = now_ms;
        self.books.clear();
        for v in Venue::ALL.into_iter().filter(|v| venues[v.index()]) {
            self.books.extend(front.books.listed_books(v));
        }
    }
}
