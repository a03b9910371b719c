//! What the shards publish for every other thread: per book slots (price, levels, walls,
//! metrics, listing status) and per shard and venue counters, atomics written only by the
//! owning shard (or, on an api node, by the cluster's replica).
//!
//! Rationale: a published snapshot costs the reader one atomic load, where a request/response
//! over the command queue costs a hop to the shard and back (measured in `perf/front-hop.md`).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rampart_engine::level::Level;
use rampart_engine::wall::Wall;
use rampart_engine::{BookId, Registry};

use super::pair_metrics;

/// One wall as published: the engine's wall plus its USD value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PublishedWall {
    /// The wall.
    pub wall: Wall,
    /// USD value; `None` when the quote asset has no USD price on any venue.
    pub usd: Option<f64>,
}

/// A book's last wall scan, published for readers.
#[derive(Clone, Debug, Default)]
pub struct DensitySnapshot {
    /// Scan time, Unix milliseconds.
    pub ts_ms: i64,
    /// The price the scan measured against.
    pub price: i64,
    /// Walls, nearest first.
    pub walls: Vec<PublishedWall>,
}

/// A book's level set as last computed, published for readers.
#[derive(Clone, Debug, Default)]
pub struct LevelSnapshot {
    /// When it was computed, Unix milliseconds.
    pub computed_ms: i64,
    /// Zones, nearest to the price at computation first.
    pub levels: Vec<Level>,
}

/// Per-shard counters, written by the shard, read by anyone.
#[derive(Debug, Default)]
pub struct ShardStats {
    /// Ticks applied.
    pub ticks: AtomicU64,
    /// Books currently crossed.
    pub crossed_books: AtomicU64,
    /// Books owned.
    pub books: AtomicU64,
    /// Alerts held.
    pub alerts: AtomicU64,
    /// Alert firings emitted.
    pub firings: AtomicU64,
    /// Loop rounds that took no ticks because events were waiting for the queue.
    pub backpressure_rounds: AtomicU64,
    /// True once the shard has its books and history.
    pub ready: AtomicBool,
    /// Level sets recomputed.
    pub level_recomputes: AtomicU64,
    /// Level zones consumed live by trades.
    pub levels_consumed: AtomicU64,
    /// Wall scans done.
    pub wall_scans: AtomicU64,
}

/// What the owning shard publishes about one book, for readers on other threads. Only that
/// shard writes it (except `shard` and `status` of a book added after start, which
/// [`Shared::grow`] sets before any shard owns it).
#[derive(Debug)]
pub struct BookSlot {
    /// Last price (fixed-point): the last trade, else the best price known before it; zero
    /// when none.
    pub price: AtomicI64,
    /// Time of that price, Unix milliseconds.
    pub price_ts: AtomicI64,
    /// Owning shard.
    pub shard: std::sync::atomic::AtomicU16,
    /// Level set, replaced whole at each recomputation.
    pub levels: ArcSwap<LevelSnapshot>,
    /// Highest trade since the level snapshot was computed (`i64::MIN` if none).
    pub trade_high: AtomicI64,
    /// Lowest trade since the level snapshot was computed (`i64::MAX` if none).
    pub trade_low: AtomicI64,
    /// Last wall scan.
    pub densities: ArcSwap<DensitySnapshot>,
    /// The walls of the last 24 h, replaced at a scan that changed them (in memory only).
    pub wall_history: ArcSwap<super::wall_history::WallHistory>,
    /// Last metrics computation.
    pub metrics: ArcSwap<pair_metrics::PairMetrics>,
    /// Listing status: [`STATUS_TRADING`], [`STATUS_PENDING`] or [`STATUS_DELISTED`].
    pub status: std::sync::atomic::AtomicU8,
    /// The pair's perpetual, replaced whole each second by the owning shard; empty when the
    /// pair has none on its venue (decisions §17).
    pub perp: arc_swap::ArcSwapOption<super::perp::PerpSnapshot>,
    /// The pair's newest liquidations as the owning shard takes them, the one list the
    /// `liquidations` stream, `GET /v1/liquidations…` and a cluster's relay read (`decisions.md`
    /// §17); made when the pair gains a perpetual (an api node's: at the first relay).
    pub liquidations: std::sync::OnceLock<super::liq_feed::LiqFeed>,
}

impl BookSlot {
    fn new(shard: usize, status: u8) -> BookSlot {
        BookSlot {
            price: AtomicI64::new(0),
            price_ts: AtomicI64::new(0),
            shard: std::sync::atomic::AtomicU16::new(shard as u16),
            levels: ArcSwap::from_pointee(LevelSnapshot::default()),
            trade_high: AtomicI64::new(i64::MIN),
            trade_low: AtomicI64::new(i64::MAX),
            densities: ArcSwap::from_pointee(DensitySnapshot::default()),
            wall_history: ArcSwap::from_pointee(super::wall_history::WallHistory::default()),
            metrics: ArcSwap::from_pointee(pair_metrics::PairMetrics::default()),
            status: std::sync::atomic::AtomicU8::new(status),
            perp: arc_swap::ArcSwapOption::empty(),
            liquidations: std::sync::OnceLock::new(),
        }
    }
}

/// What shards publish for readers: per book slots, and counters.
#[derive(Debug)]
pub struct Shared {
    /// Every book: replaced whole (ids kept) when a venue lists pairs after start
    /// ([`Shared::grow`]); read it with [`Shared::registry`].
    pub books: Arc<ArcSwap<Registry>>,
    /// Books the per-book arrays below have room for: the registry at start plus
    /// [`BOOKS_ADDED_MAX`] on the live feed. Listings beyond it are not served (reported).
    pub capacity: usize,
    /// What the shards publish per book, by `BookId` index (room for [`Shared::capacity`]).
    pub slots: Box<[BookSlot]>,
    /// One per shard.
    pub stats: Box<[ShardStats]>,
    /// Live feed counters per (shard, venue): index `shard * Venue::COUNT + venue.index()`.
    pub venue_stats: Box<[VenueStats]>,
    /// The live feed's REST counters, by venue (`None` on the simulated feed).
    pub rest_stats: Option<Arc<[RestStats; rampart_engine::Venue::COUNT]>>,
    /// True when the feed is live (venue connections), false for the simulator.
    pub live: bool,
    /// Per shard: tick-to-decision latencies, merged in by the shard every
    /// [`LATENCY_PUBLISH_MS`] (the lock is never taken on the tick path).
    pub latency: Box<[std::sync::Mutex<Latency>]>,
    /// The active site alerts, published by the site alerts' watcher: the
    /// shards evaluate the density alerts at their wall scans, the board thread the market ones.
    pub site_alerts: ArcSwap<super::site_alerts::SiteAlertSet>,
    /// Bumped (release) after every change of a book's densities or listing status, so a reader
    /// that saw a value (acquire) sees every change made before it: the front keeps a bulk
    /// densities answer while this has not moved.
    pub densities_generation: AtomicU64,
    /// False when `[derivatives] enabled = false` (`decisions.md` §17): no perpetual runs, and
    /// the derivatives alert types are refused. Set once at start, before the fronts serve.
    pub derivatives: std::sync::atomic::AtomicBool,
}

/// How often a shard merges its latency histogram into [`Shared::latency`].
pub const LATENCY_PUBLISH_MS: i64 = 200;
/// Largest latency recorded, microseconds; larger values are recorded as this.
pub const LATENCY_US_MAX: u64 = 60_000_000;

/// An empty latency histogram: 1 µs to [`LATENCY_US_MAX`], 3 significant digits.
pub fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    // Constant, valid bounds: construction cannot fail.
    hdrhistogram::Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid constant histogram bounds")
}

/// Latency histograms of one shard.
#[derive(Debug)]
pub struct Latency {
    /// Venue send time (Binance `timeUnit=MICROSECOND` event time) to the alert decision on the
    /// shard, microseconds, one sample per trade.
    pub tick_to_decision_us: hdrhistogram::Histogram<u64>,
    /// The part of it spent inside rampart: from the socket read that brought the trade to the
    /// alert decision, microseconds.
    pub read_to_decision_us: hdrhistogram::Histogram<u64>,
}

impl Latency {
    /// Empty histograms (1 µs to [`LATENCY_US_MAX`], 3 significant digits).
    pub fn new() -> Latency {
        Latency { tick_to_decision_us: latency_histogram(), read_to_decision_us: latency_histogram() }
    }
}

impl Default for Latency {
    fn default() -> Latency {
        Latency::new()
    }
}

/// One shard's counters for one venue of the live feed.
#[derive(Debug, Default)]
pub struct VenueStats {
    /// Books whose candle history has been loaded (the others build theirs from live trades
    /// while their backfill is retried).
    pub books_history: AtomicU64,
    /// Connections open now.
    pub connections_open: AtomicU64,
    /// Connections the session chose to replace, by [`Reconnect`] kind
    /// (its discriminant indexes this array).
    pub reconnects: [AtomicU64; Reconnect::COUNT],
    /// Connections planned (each carries a share of the pairs).
    pub connections_planned: AtomicU64,
    /// Connection attempts.
    pub connects: AtomicU64,
    /// Connection attempts that failed.
    pub connect_failures: AtomicU64,
    /// Connections lost or closed (reconnected after a backoff).
    pub disconnects: AtomicU64,
    /// Data messages applied.
    pub messages: AtomicU64,
    /// Frames that did not decode.
    pub decode_errors: AtomicU64,
    /// Sequence gaps.
    pub gaps: AtomicU64,
    /// Checksum mismatches.
    pub checksum_mismatches: AtomicU64,
    /// Books found crossed.
    pub crossed: AtomicU64,
    /// Binance snapshots refused as stale.
    pub stale_snapshots: AtomicU64,
    /// Book rebuilds started.
    pub resyncs: AtomicU64,
    /// Venue resets accepted.
    pub resets: AtomicU64,
    /// Error answers from the venue.
    pub venue_errors: AtomicU64,
    /// Books that went live (initial syncs and rebuilds).
    pub syncs: AtomicU64,
    /// Books live now.
    pub books_live: AtomicU64,
    /// Books carried.
    pub books: AtomicU64,
    /// Time of the last message, Unix milliseconds.
    pub last_message_ms: AtomicI64,
    /// Perpetual connections planned (decisions §17; none: the venue has no perpetual here).
    pub perp_connections_planned: AtomicU64,
    /// Perpetual connections open now.
    pub perp_connections_open: AtomicU64,
    /// Perpetual data messages applied.
    pub perp_messages: AtomicU64,
    /// Perpetual frames that did not decode.
    pub perp_decode_errors: AtomicU64,
    /// Time of the last perpetual message, Unix milliseconds.
    pub perp_last_message_ms: AtomicI64,
}

/// One counter of [`VenueStats`] as the operator sees it, per venue: its name in `/healthz`'s
/// venue object, its `/metrics` family (`rampart_` and `_total` added there) and help text.
#[derive(Clone, Copy, Debug)]
pub struct VenueCounter {
    /// The key in `/healthz`.
    pub health: &'static str,
    /// The metric family.
    pub metric: &'static str,
    /// The metric's help text.
    pub help: &'static str,
    /// The counter.
    pub field: fn(&VenueStats) -> &AtomicU64,
}

impl VenueCounter {
    const fn new(
        health: &'static str,
        metric: &'static str,
        help: &'static str,
        field: fn(&VenueStats) -> &AtomicU64,
    ) -> VenueCounter {
        VenueCounter { health, metric, help, field }
    }
}

/// The live feed's per-venue counters, in `/healthz`'s order: written once for both readers.
#[rustfmt::skip]
pub const VENUE_COUNTERS: [VenueCounter; 13] = [
    VenueCounter::new("connects", "venue_connects", "Connection attempts", |s| &s.connects),
    VenueCounter::new("connectFailures", "venue_connect_failures", "Connection attempts that failed", |s| &s.connect_failures),
    VenueCounter::new("disconnects", "venue_disconnects", "Connections lost or closed", |s| &s.disconnects),
    VenueCounter::new("messages", "venue_messages", "Data messages applied", |s| &s.messages),
    VenueCounter::new("decodeErrors", "venue_decode_errors", "Frames that did not decode", |s| &s.decode_errors),
    VenueCounter::new("gaps", "venue_gaps", "Sequence gaps found", |s| &s.gaps),
    VenueCounter::new("checksumMismatches", "venue_checksum_mismatches", "Book checksum mismatches", |s| &s.checksum_mismatches),
    VenueCounter::new("crossedBooks", "venue_crossed_books", "Books found crossed", |s| &s.crossed),
    VenueCounter::new("staleSnapshots", "venue_stale_snapshots", "Snapshots refused as stale", |s| &s.stale_snapshots),
    VenueCounter::new("resyncs", "venue_resyncs", "Book rebuilds started", |s| &s.resyncs),
    VenueCounter::new("resets", "venue_resets", "Venue book resets accepted", |s| &s.resets),
    VenueCounter::new("syncs", "venue_syncs", "Books that went live", |s| &s.syncs),
    VenueCounter::new("venueErrors", "venue_errors", "Error answers from the venue", |s| &s.venue_errors),
];

impl Shared {
    /// Publishing state for the registry's books over `shards` shards, with room for
    /// `capacity` books in all.
    pub fn new(books_now: Arc<ArcSwap<Registry>>, capacity: usize, shards: usize, live: bool) -> Shared {
        let registry = books_now.load_full();
        let len = registry.len();
        assert!(capacity >= len, "room for the registry's own books");
        let slots = (0..capacity)
            .map(|i| match i < len {
                true => BookSlot::new(shard_of_symbol(&registry.get(BookId(i as u32)).symbol, shards), STATUS_TRADING),
                false => BookSlot::new(0, STATUS_PENDING),
            })
            .collect();
        Shared {
            books: books_now,
            capacity,
            slots,
            stats: (0..shards).map(|_| ShardStats::default()).collect(),
            venue_stats: (0..shards * rampart_engine::Venue::COUNT).map(|_| VenueStats::default()).collect(),
            rest_stats: None,
            live,
            latency: (0..shards).map(|_| std::sync::Mutex::new(Latency::new())).collect(),
            site_alerts: ArcSwap::from_pointee(super::site_alerts::SiteAlertSet::default()),
            densities_generation: AtomicU64::new(0),
            derivatives: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// An api node's copy of the market's state (`serve --role api`): no shard writes it; the
    /// cluster's snapshot replica does (its snapshot replica). A book's
    /// `shard` is its partition, so [`Commands`](super::Commands) route to the owning market node's queue, and
    /// `stats` has one entry per partition (ready once its first whole snapshot arrived).
    pub fn replica(registry: Arc<Registry>, partitions: u16, room: usize) -> Shared {
        let books = Arc::new(ArcSwap::new(registry.clone()));
        let mut shared = Shared::new(books, registry.len() + room, usize::from(partitions.max(1)), false);
        // The slots past the registry wait for books listed later (`grow_replica`).
        for (i, slot) in shared.slots.iter_mut().enumerate().take(registry.len()) {
            let symbol = &registry.get(BookId(i as u32)).symbol;
            *slot.shard.get_mut() = super::partition::of_symbol(symbol, partitions);
        }
        shared
    }

    /// One venue's counters summed over the shards: `f` picks the counter.
    pub fn venue_sum(&self, venue: rampart_engine::Venue, f: impl Fn(&VenueStats) -> u64) -> u64 {
        self.venue_stats.iter().skip(venue.index()).step_by(rampart_engine::Venue::COUNT).map(f).sum()
    }
}

/// A live venue's state, from its shards' counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VenueState {
    /// Every connection open and every book in sync.
    Ok,
    /// Serving, but some books are being rebuilt or some connections are down.
    Degraded,
    /// No live data: nothing listed, no connection open, or no book in sync.
    Down,
}

impl VenueState {
    /// Its name in `/healthz` and the log.
    pub fn as_str(self) -> &'static str {
        match self {
            VenueState::Ok => "ok",
            VenueState::Degraded => "degraded",
            VenueState::Down => "down",
        }
    }
}

/// A live venue's health: its state, why, and the counters it was decided from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VenueHealth {
    /// The state.
    pub state: VenueState,
    /// Why it is not `Ok` (empty when it is).
    pub why: &'static str,
    /// Pairs served.
    pub pairs: i64,
    /// Connections open / planned.
    pub open: i64,
    /// Connections planned.
    pub planned: i64,
    /// Books in sync.
    pub live: i64,
    /// Time of the last message from the venue, Unix ms (0: none yet).
    pub last_message_ms: i64,
}

/// Why [`Shared::grow`] refused a registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrowError {
    /// More books than the per-book arrays have room for.
    NoRoom {
        /// Books there is room for.
        room: usize,
        /// Books the new registry has.
        wanted: usize,
    },
    /// The new registry does not keep every current book under its id.
    NotAnExtension,
}

impl std::fmt::Display for GrowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrowError::NoRoom { room, wanted } => write!(f, "room for {room} books, {wanted} wanted"),
            GrowError::NotAnExtension => f.write_str("the new registry does not extend the current one"),
        }
    }
}

impl std::error::Error for GrowError {}

/// [`BookSlot::status`]: listed and trading.
pub const STATUS_TRADING: u8 = 0;
/// [`BookSlot::status`]: a room for a book not (yet) served: beyond the registry, or added to it
/// and not yet taken by its shard.
pub const STATUS_PENDING: u8 = 1;
/// Books a live feed can add after start (pairs listed later, venues that join late).
pub const BOOKS_ADDED_MAX: usize = 4_096;
/// [`BookSlot::status`]: the venue no longer lists the pair.
pub const STATUS_DELISTED: u8 = 2;

impl Shared {
    /// True once every shard is ready.
    pub fn ready(&self) -> bool {
        self.stats.iter().all(|s| s.ready.load(Ordering::Acquire))
    }

    /// True once the venue has delisted the book.
    pub fn delisted(&self, id: BookId) -> bool {
        self.slots[id.index()].status.load(Ordering::Acquire) == STATUS_DELISTED
    }

    /// Pairs of `venue` served now (listed and taken by their shard).
    pub fn listed_count(&self, venue: rampart_engine::Venue) -> usize {
        self.registry().venue_books(venue).iter().filter(|b| self.listed(**b)).count()
    }

    /// The health of a live venue, from its shards' counters. A silent venue is caught by its
    /// sessions' idle limits (the connection is replaced, and counts as down until it is back).
    pub fn venue_health(&self, venue: rampart_engine::Venue) -> VenueHealth {
        let sum = |f: fn(&VenueStats) -> &AtomicU64| self.venue_sum(venue, |s| f(s).load(Ordering::Relaxed)) as i64;
        let (open, planned, live) =
            (sum(|s| &s.connections_open), sum(|s| &s.connections_planned), sum(|s| &s.books_live));
        let last_message_ms = self
            .venue_stats
            .iter()
            .skip(venue.index())
            .step_by(rampart_engine::Venue::COUNT)
            .map(|s| s.last_message_ms.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        let pairs = self.listed_count(venue) as i64;
        let (state, why) = if pairs == 0 {
            (VenueState::Down, "no pair listed")
        } else if open == 0 {
            (VenueState::Down, "no connection open")
        } else if live == 0 {
            (VenueState::Down, "no book in sync")
        } else if open < planned {
            (VenueState::Degraded, "some connections are down")
        } else if live < pairs {
            (VenueState::Degraded, "some books are being rebuilt")
        } else {
            (VenueState::Ok, "")
        };
        VenueHealth { state, why, pairs, open, planned, live, last_message_ms }
    }

    /// True when the book is served: listed, and taken by its shard.
    pub fn listed(&self, id: BookId) -> bool {
        self.slots.get(id.index()).is_some_and(|s| s.status.load(Ordering::Acquire) == STATUS_TRADING)
    }

    /// Publishes `book`'s last wall scan.
    pub fn publish_densities(&self, book: BookId, snapshot: DensitySnapshot) {
        self.slots[book.index()].densities.store(Arc::new(snapshot));
        self.densities_generation.fetch_add(1, Ordering::Release);
    }

    /// Publishes `book`'s wall history.
    pub fn publish_wall_history(&self, book: BookId, history: super::wall_history::WallHistory) {
        self.slots[book.index()].wall_history.store(Arc::new(history));
    }

    /// Sets `book`'s listing status ([`STATUS_TRADING`], [`STATUS_PENDING`], [`STATUS_DELISTED`]).
    pub fn set_status(&self, book: BookId, status: u8) {
        self.slots[book.index()].status.store(status, Ordering::Release);
        self.densities_generation.fetch_add(1, Ordering::Release);
    }

    /// The registry now.
    pub fn registry(&self) -> Arc<Registry> {
        self.books.load_full()
    }

    /// Replaces the registry by `grown` (the current one with books added after it): the new
    /// books get their shard and stay [`STATUS_PENDING`] until their shard takes them
    /// ([`Command::AddBook`](super::Command::AddBook)). Returns the new ids; refused beyond [`Shared::capacity`].
    pub fn grow(&self, grown: Registry) -> Result<Vec<BookId>, GrowError> {
        let shards = self.stats.len();
        self.grow_with(grown, |symbol| shard_of_symbol(symbol, shards) as u16)
    }

    /// [`Shared::grow`] for an api node's replica ([`Shared::replica`]): a new book's "shard" is
    /// the partition that owns it, whose snapshots will carry it.
    pub fn grow_replica(&self, grown: Registry, partitions: u16) -> Result<Vec<BookId>, GrowError> {
        self.grow_with(grown, |symbol| super::partition::of_symbol(symbol, partitions))
    }

    fn grow_with(&self, grown: Registry, shard_of: impl Fn(&str) -> u16) -> Result<Vec<BookId>, GrowError> {
        let now = self.registry();
        if grown.len() > self.capacity {
            return Err(GrowError::NoRoom { room: self.capacity, wanted: grown.len() });
        }
        if grown.len() < now.len() || now.ids().any(|id| grown.get(id).symbol != now.get(id).symbol) {
            return Err(GrowError::NotAnExtension);
        }
        let added: Vec<BookId> = (now.len()..grown.len()).map(|i| BookId(i as u32)).collect();
        for id in &added {
            self.slots[id.index()].shard.store(shard_of(&grown.get(*id).symbol), Ordering::Release);
        }
        self.books.store(Arc::new(grown));
        Ok(added)
    }

    /// Last price and its time for a book.
    pub fn price(&self, id: BookId) -> (i64, i64) {
        let slot = &self.slots[id.index()];
        (slot.price.load(Ordering::Relaxed), slot.price_ts.load(Ordering::Relaxed))
    }

    /// What the book's current levels are made of: its last snapshot and the trade watermarks
    /// that filter out the zones trades have gone through since ([`Level::survives`]).
    pub fn levels_view(&self, id: BookId) -> (Arc<LevelSnapshot>, i64, i64) {
        // Watermarks first: a reset watermark (Release) implies its snapshot is visible.
        let slot = &self.slots[id.index()];
        let high = slot.trade_high.load(Ordering::Acquire);
        let low = slot.trade_low.load(Ordering::Acquire);
        (slot.levels.load_full(), high, low)
    }

    /// The book's current levels: its last snapshot without the zones that trades have gone
    /// through since (the live consumption the shard applies on every trade).
    pub fn levels(&self, id: BookId) -> Vec<Level> {
        // Watermarks first: a reset watermark (Release) implies its snapshot is visible.
        let slot = &self.slots[id.index()];
        let high = slot.trade_high.load(Ordering::Acquire);
        let low = slot.trade_low.load(Ordering::Acquire);
        let snap = slot.levels.load();
        snap.levels.iter().filter(|l| l.survives(high, low)).copied().collect()
    }
}

/// Shard of a pair: a stable hash of `BASEQUOTE`, so every venue of a pair lands on the same
/// shard whatever the feed or venue set.
pub fn shard_of_symbol(symbol: &str, shards: usize) -> usize {
    (symbol_hash(symbol) % shards.max(1) as u64) as usize
}

/// The FNV-1a hash of a pair's `BASEQUOTE`: its low half picks the shard, its high half the
/// cluster partition ([`super::partition`]).
pub fn symbol_hash(symbol: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in symbol.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// REST counters per venue.
#[derive(Debug, Default)]
pub struct RestStats {
    /// Requests sent.
    pub requests: AtomicU64,
    /// Requests that failed (transport, status or body).
    pub errors: AtomicU64,
    /// Rate-limit answers (429, 418, 403).
    pub rate_limited: AtomicU64,
    /// Books whose backfill completed.
    pub backfilled: AtomicU64,
    /// Books whose backfill failed.
    pub backfill_failed: AtomicU64,
    /// Listing refreshes that succeeded.
    pub listings: AtomicU64,
    /// Pairs found delisted by a refresh (confirmed by a second one).
    pub delistings: AtomicU64,
    /// Delisted pairs listed again and served again.
    pub relistings: AtomicU64,
    /// Pairs listed after start (or of a venue that joined late) and served since.
    pub added: AtomicU64,
    /// Pairs the last refresh missed, waiting for confirmation.
    pub delistings_suspected: AtomicU64,
    /// Refreshes refused as venue faults (empty, or dropping an implausible share of pairs).
    pub listing_faults: AtomicU64,
    /// Job tasks that ended without an answer (a panic); each was answered as a failure.
    pub tasks_lost: AtomicU64,
    /// Pairs listed by the venue since start that this process could not serve (no room left
    /// for more books); zero normally, as new pairs are added.
    pub new_listings: AtomicU64,
}

/// Why a session wants its connection replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconnect {
    /// Nothing arrived within the venue's idle limit: the stream is presumed dead.
    Idle,
    /// Renewed before the venue's 24 h cut ((the session's `CONNECTION_LIFETIME_MS`)).
    Renewal,
    /// The venue's hourly subscription budget (OKX 480, Bitget 240) or the control queue is
    /// spent: a new connection rebuilds every book at once.
    Budget,
    /// The venue announced a shutdown or upgrade (Binance `serverShutdown`, OKX 64008).
    Notice,
}

impl Reconnect {
    /// Number of kinds.
    pub const COUNT: usize = 4;
    /// Every kind, in the order `/healthz` reports them.
    pub const ALL: [Reconnect; Reconnect::COUNT] =
        [Reconnect::Idle, Reconnect::Renewal, Reconnect::Budget, Reconnect::Notice];

    /// Its name in logs and `/healthz`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reconnect::Idle => "idle",
            Reconnect::Renewal => "renewal",
            Reconnect::Budget => "budget",
            Reconnect::Notice => "notice",
        }
    }
}
