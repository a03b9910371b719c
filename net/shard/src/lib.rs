//! The shard runtime: one pinned glommio executor per shard, each owning a fixed partition of
//! the (venue, pair) books, applying their ticks inline and talking to the rest only through
//! bounded queues wired once at start-up.
//!
//! Reads do not go through a shard: each shard publishes what readers need (last prices,
//! readiness, counters) into [`Shared`] (`rampart_state`), plain atomics written only by the
//! owning shard.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_queue::ArrayQueue;
use glommio::{LocalExecutorBuilder, Placement};
use rampart_engine::candle::Candle;
use rampart_engine::level::{compute_from_set, LevelScratch};
use rampart_engine::market::Outcome;
use rampart_engine::sim::{PairSpec, Sim, SimConfig};
use rampart_engine::sim_perp_listing::listing;
use rampart_engine::wall::{self, Wall, WallScratch};
use rampart_engine::{BookId, Market, Registry, Tick};

use rampart_state::clock::SharedClock;
use rampart_state::pair_metrics;
use rampart_state::partition::Partition;
use rampart_state::wall_history::WallHistory;
use rampart_state::{
    shard_of_symbol, Command, Commands, DensitySnapshot, EventQueue, EventSender, Latency, LevelSnapshot, Pong,
    PublishedWall, ShardEvent, Shared, BOOKS_ADDED_MAX, COMMANDS_MAX, LATENCY_PUBLISH_MS, STATUS_DELISTED,
    STATUS_TRADING,
};

pub mod alerts;
pub mod cpus;
pub mod live;
pub mod nudge;
pub mod perp;
pub mod perp_alerts;
mod perp_listing;
mod perp_polls;
mod queries;
#[cfg(test)]
mod simulation;
mod spread;
mod universe;
pub mod versions;

pub use alerts::ShardAlerts;
use spread::Spread;
pub use universe::StartAlerts;

/// Pairs stepped by the simulator per loop round; bounds the work between two polls.
pub const SIM_PAIRS_PER_ROUND_MAX: usize = 64;
/// How long a live shard spins for work before it parks its thread unless told
/// (`--shard-spin-us`): the wake-up of a parked thread is saved when the next frame is
/// microseconds away, at the cost of up to this much CPU after each burst of work.
pub const LIVE_SPIN_BEFORE_PARK: Duration = Duration::from_micros(200);
/// The most `--shard-spin-us` takes: one second, which on a venue feed (frames every few
/// milliseconds) keeps the shard's core busy for good, i.e. busy-polling.
pub const SPIN_BEFORE_PARK_MAX: Duration = Duration::from_secs(1);
/// Every book's level set is recomputed once per period, the books spread evenly over it.
pub const LEVELS_PERIOD_MS: i64 = 60_000;
/// Level recomputations per loop round at most; a shard that falls behind catches up over the
/// following rounds instead of stalling its ticks.
pub const LEVEL_RECOMPUTES_PER_ROUND_MAX: usize = 8;

/// Every book is rescanned for walls once per period, the books spread evenly over it.
pub const WALLS_PERIOD_MS: i64 = 2_000;
/// Wall scans per loop round at most; a shard that falls behind catches up over the following
/// rounds.
pub const WALL_SCANS_PER_ROUND_MAX: usize = 32;

/// How the shards are set up.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    /// Number of shards (executors).
    pub shards: usize,
    /// Book capacity per side.
    pub depth_levels_max: usize,
    /// Candle ring capacity per timeframe.
    pub bars_max: usize,
    /// Simulated market tuning.
    pub sim: SimConfig,
    /// Sleep between two loop rounds when idle.
    pub poll_interval: Duration,
    /// A level is a wall at this multiple of the median level size (`walls.min_ratio`).
    pub walls_min_ratio: f64,
    /// Fault injection for the shutdown test: a shard told to stop blocks its thread for ever
    /// instead (`serve --fault-hang-shard-stop`, hidden). Never set in production.
    pub fault_hang_on_stop: bool,
    /// Capacity of each shard's event queue ([`rampart_state::EVENTS_MAX`] in production; tests shrink it to
    /// drive the backlog and backpressure path).
    pub events_max: usize,
    /// Per shard: the CPU its executor is pinned to, or `None` (unpinned; also for shards past
    /// the list). [`cpus::choose`] decides it.
    pub cpus: Vec<Option<usize>>,
    /// The process's clock (the wall clock in production).
    pub clock: SharedClock,
    /// The pairs this process owns (`serve --role market --partition I/N`); the whole market
    /// by default. Books of other parts get no shard: their slots stay empty here.
    pub partition: Partition,
    /// How long a live shard spins for work before it parks its thread (zero: parks at once);
    /// at most [`SPIN_BEFORE_PARK_MAX`]. [`LIVE_SPIN_BEFORE_PARK`] unless told.
    pub spin_before_park: Duration,
    /// Runs the perpetuals of `decisions.md` §17 (`[derivatives] enabled`; the simulated feed's
    /// only, for now).
    pub derivatives: bool,
}

/// Locked memory glommio requires before it starts an executor (its own check, in bytes).
pub const MEMLOCK_MIN_BYTES: u64 = 512 * 1024;
/// Locked memory each shard's io_uring registers (`io_memory`), asked for on top of the minimum.
const MEMLOCK_PER_SHARD_BYTES: u64 = 1 << 20;

/// The locked-memory limit is below what the shards need, and the hard limit forbids raising it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemlockTooLow {
    /// The soft limit in force, bytes.
    pub limit: u64,
    /// What glommio requires at least, bytes.
    pub need: u64,
}

impl std::fmt::Display for MemlockTooLow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the locked-memory limit (RLIMIT_MEMLOCK) is {} KiB and io_uring needs at least {} KiB; raise it: \
             `ulimit -l 65536` in the shell, LimitMEMLOCK=infinity in a systemd unit, --ulimit memlock=-1 for docker",
            self.limit / 1024,
            self.need / 1024
        )
    }
}

impl std::error::Error for MemlockTooLow {}

/// Raises the soft locked-memory limit toward what `shards` executors register (as far as the
/// hard limit allows) and refuses when it stays under glommio's minimum, so a server that cannot
/// start its shards says so before it prints or binds anything. Returns the limit in force.
pub fn ensure_memlock(shards: usize) -> Result<u64, MemlockTooLow> {
    use rlimit::Resource;
    let want = MEMLOCK_MIN_BYTES + MEMLOCK_PER_SHARD_BYTES * shards as u64;
    let (soft, hard) = Resource::MEMLOCK.get().unwrap_or((0, 0));
    let target = want.min(hard).max(soft);
    if target > soft {
        let _ = Resource::MEMLOCK.set(target, hard);
    }
    let (soft, _) = Resource::MEMLOCK.get().unwrap_or((soft, hard));
    if soft < MEMLOCK_MIN_BYTES {
        return Err(MemlockTooLow { limit: soft, need: MEMLOCK_MIN_BYTES });
    }
    Ok(soft)
}

/// The running shards.
pub struct ShardSet {
    shared: Arc<Shared>,
    commands: Vec<Arc<ArrayQueue<Command>>>,
    events: Vec<Arc<EventQueue>>,
    threads: Vec<JoinHandle<()>>,
    /// Wakes every executor from outside (see [`nudge`]).
    nudger: Option<nudge::Nudger>,
}

impl ShardSet {
    /// Starts `config.shards` executors pinned to cores 0.., each owning the books of the pairs
    /// that hash to it, fed by the simulated market over `universe`.
    pub fn start_sim(
        config: &ShardConfig,
        registry: Arc<Registry>,
        universe: Arc<Vec<PairSpec>>,
        alerts: impl Into<StartAlerts>,
    ) -> std::io::Result<ShardSet> {
        let alerts = alerts.into();
        let n = config.shards.max(1);
        let books = Arc::new(ArcSwap::new(registry.clone()));
        let shared = Arc::new(Shared::new(books, registry.len(), n, false));
        shared.derivatives.store(config.derivatives, Ordering::Relaxed);
        let perp_listing = Arc::new(listing(config.sim.seed, &universe));
        ShardSet::start_each(config, &registry, shared, &alerts, None, |index| {
            let pairs: Vec<usize> = (0..universe.len())
                .filter(|&i| shard_of_symbol(&universe[i].symbol(), n) == index)
                .filter(|&i| config.partition.owns(&universe[i].symbol()))
                .filter(|&i| venue_listed(&registry, &universe[i]))
                .collect();
            let (universe, registry, perp_listing) = (universe.clone(), registry.clone(), perp_listing.clone());
            move |p: ShardParts| async move {
                let sim = Sim::new(p.config.sim.clone(), &universe, &registry, &pairs);
                let (seed, now) = (p.config.sim.seed, p.config.clock.now_ms());
                let perps = p
                    .config
                    .derivatives
                    .then(|| perp::ShardPerps::new(seed, &universe, &perp_listing, &registry, &pairs, &p.market, now));
                drop((universe, perp_listing));
                let mut shard = Shard::new(p.index, p.config, p.market, Some(sim), p.commands, p.events, p.shared)
                    .with_alerts(p.alerts);
                if let Some(perps) = perps {
                    shard = shard.with_perps(perps);
                }
                shard.run().await;
            }
        })
    }

    /// Starts `config.shards` executors pinned to cores 0.., each owning the books of the pairs
    /// that hash to it, fed by the live venues: each shard opens its own WebSocket connections
    /// for its books and asks the REST thread (`feed.rest`) for their history and snapshots.
    pub fn start_live(
        config: &ShardConfig,
        books: Arc<ArcSwap<Registry>>,
        feed: live::LiveFeed,
        alerts: impl Into<StartAlerts>,
    ) -> std::io::Result<ShardSet> {
        let alerts = alerts.into();
        let n = config.shards.max(1);
        let registry = books.load_full();
        let mut shared = Shared::new(books, registry.len() + BOOKS_ADDED_MAX, n, true);
        shared.rest_stats = Some(feed.rest_stats.clone());
        let shared = Arc::new(shared);
        let feed = Arc::new(feed);
        // Spinning before parking saves the wake-up latency of a parked thread when the next
        // frame is near (measured by the latency harness; `docs/design/front-threads.md`).
        let spin = config.spin_before_park.min(SPIN_BEFORE_PARK_MAX);
        let spin = (!spin.is_zero()).then_some(spin);
        ShardSet::start_each(config, &registry, shared, &alerts, spin, |_| {
            let feed = feed.clone();
            move |p: ShardParts| async move {
                let shard =
                    Shard::new(p.index, p.config, p.market, None, p.commands, p.events, p.shared).with_alerts(p.alerts);
                live::run(shard, feed).await;
            }
        })
    }

    /// Starts one pinned executor per shard: its queues, its books (with their alerts) in a new
    /// `Market`, and the shard's life given by `make(index)`.
    // Long: the wiring of one pinned executor per shard, in the order the queues and books must be
    // made; nothing in it decides anything.
    fn start_each<F, Fut>(
        config: &ShardConfig,
        registry: &Arc<Registry>,
        shared: Arc<Shared>,
        alerts: &StartAlerts,
        spin_before_park: Option<Duration>,
        mut make: impl FnMut(usize) -> F,
    ) -> std::io::Result<ShardSet>
    where
        F: FnOnce(ShardParts) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        let n = shared.stats.len();
        let mut set = ShardSet {
            shared: shared.clone(),
            commands: Vec::new(),
            events: Vec::new(),
            threads: Vec::new(),
            nudger: None,
        };
        let mut nudges = Vec::with_capacity(n);
        for index in 0..n {
            let commands = Arc::new(ArrayQueue::new(COMMANDS_MAX));
            let events = Arc::new(EventQueue::new(config.events_max));
            set.commands.push(commands.clone());
            set.events.push(events.clone());
            let owner = |b: &BookId| shared.slots[b.index()].shard.load(Ordering::Relaxed) as usize;
            let owned = |b: &BookId| owner(b) == index && config.partition.owns(&registry.get(*b).symbol);
            let ids: Vec<BookId> = registry.ids().filter(owned).collect();
            // Its books' alerts, and every `*` alert (put on each owned book of its venue, and
            // held for the books it takes later).
            let start = StartAlerts {
                books: alerts.books.iter().filter(|(b, _)| owned(b)).copied().collect(),
                universe: alerts.universe.clone(),
            };
            let registry = registry.clone();
            let (config, shared, books) = (config.clone(), shared.clone(), shared.capacity);
            let life = make(index);
            let nudge = Arc::new(nudge::Nudge::default());
            nudges.push(nudge.clone());
            let placement = match config.cpus.get(index).copied().flatten() {
                Some(cpu) => Placement::Fixed(cpu),
                None => Placement::Unbound,
            };
            let mut builder = LocalExecutorBuilder::new(placement)
                .name(&format!("shard-{index}"))
                .io_memory(1 << 20)
                .detect_stalls(Some(Box::new(glommio::DefaultStallDetectionHandler {})));
            if let Some(spin) = spin_before_park {
                builder = builder.spin_before_park(spin);
            }
            let handle = builder
                .spawn(move || async move {
                    glommio::spawn_local(nudge.serve()).detach();
                    let mut market = Market::new(books, &ids, config.depth_levels_max, config.bars_max);
                    let alerts = ShardAlerts::starting(&mut market, &registry, &start);
                    drop(registry);
                    life(ShardParts { index, config, market, commands, events, shared, alerts }).await;
                })
                .map_err(|e| std::io::Error::other(format!("shard {index}: {e}")))?;
            set.threads.push(std::thread::spawn(move || {
                // glommio reports some set-up failures (a too-low memlock limit) only here. A
                // shard that dies takes its books with it, so the process stops rather than
                // serve a partial market.
                if let Err(e) = handle.join() {
                    tracing::error!("shard {index} failed: {e}");
                    std::process::exit(1);
                }
            }));
        }
        set.nudger = Some(nudge::Nudger::start(nudges)?);
        Ok(set)
    }

    /// What the shards publish.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// True when there are no shards.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Queues a command for a shard; at the bound the command is handed back.
    pub fn send(&self, shard: usize, cmd: Command) -> Result<(), Command> {
        self.commands[shard].push(cmd)
    }

    /// A command handle for the front.
    pub fn commands(&self) -> Commands {
        Commands::new(self.commands.clone(), self.shared.clone())
    }

    /// The command queues, one per shard (their depth is a metric).
    pub fn command_queues(&self) -> Vec<Arc<ArrayQueue<Command>>> {
        self.commands.clone()
    }

    /// The event queues, one per shard, for the persistence side.
    pub fn event_queues(&self) -> Vec<Arc<EventQueue>> {
        self.events.clone()
    }

    /// Stops every shard and waits for its executor to exit.
    pub fn stop(self) {
        for q in &self.commands {
            // A full queue still gets the stop: spin until it is taken.
            let mut cmd = Command::Stop;
            while let Err(back) = q.push(cmd) {
                cmd = back;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Woken now, and every NUDGE_PERIOD until they have exited, so no parked executor can
        // miss its stop.
        if let Some(n) = &self.nudger {
            n.wake_all();
        }
        for t in self.threads {
            let _ = t.join();
        }
        if let Some(n) = self.nudger {
            n.stop();
        }
    }
}

fn venue_listed(registry: &Registry, spec: &PairSpec) -> bool {
    rampart_engine::Venue::ALL.iter().any(|&v| registry.find(v, &spec.symbol()).is_some())
}

/// What a shard is built from, on its own executor.
struct ShardParts {
    index: usize,
    config: ShardConfig,
    market: Market,
    commands: Arc<ArrayQueue<Command>>,
    events: Arc<EventQueue>,
    shared: Arc<Shared>,
    alerts: ShardAlerts,
}

/// The most events the backlog keeps room for on account of derivatives alerts (see
/// `Shard::reserve_backlog`).
pub const PERP_BACKLOG_RESERVED_MAX: usize = 65_536;

/// One shard's state, owned by its executor.
pub(crate) struct Shard {
    index: usize,
    config: ShardConfig,
    market: Market,
    sim: Option<Sim>,
    /// The simulated perpetuals of its books (`--feed sim` only).
    perps: Option<perp::ShardPerps>,
    ticks: Vec<Tick>,
    commands: Arc<ArrayQueue<Command>>,
    events: EventSender,
    /// Ticks of the current batch already applied (the rest wait while the backlog drains).
    ticks_done: usize,
    shared: Arc<Shared>,
    applied: u64,
    level_scratch: LevelScratch,
    level_bars: [Vec<Candle>; 5],
    /// When the spread periodic work (levels, walls, metrics) counts from.
    levels_epoch_ms: i64,
    levels_spread: Spread,
    wall_scratch: WallScratch,
    wall_out: Vec<Wall>,
    walls_spread: Spread,
    metrics_spread: Spread,
    /// Per local book: the book whose last price converts its quote to USD (`None` for USD
    /// quotes and quotes with no USDT pair on any venue).
    quote_usd: Vec<QuoteUsd>,
    /// Latencies recorded since the last merge into [`Shared::latency`].
    latency: Latency,
    latency_merged_ms: i64,
    /// When the connection task's last socket read completed, Unix microseconds.
    pub(crate) read_at_us: i64,
    /// Books whose levels are due for a recompute at the next round (their first trade since
    /// start or relisting). Capacity: the shard's book count; at the bound a book waits for its
    /// turn in the periodic recompute (at most [`LEVELS_PERIOD_MS`]).
    levels_soon: Vec<BookId>,
    /// Books listed again by their venue, for the live feed to rebuild and backfill. Capacity:
    /// the shard's book count (a book is in it at most once: it must be delisted again first).
    pub(crate) relisted: Vec<BookId>,
    /// Books added after start, with their venue's names, for the live feed to connect and
    /// backfill (taken at its next round).
    pub(crate) added: Vec<(BookId, String)>,
    /// Books that lost sync, logged at most once per [`live::DESYNC_LOG_PERIOD_MS`] per venue.
    pub(crate) desyncs: live::DesyncLog,
    /// Its alerts' versions and the `*` alerts of the venues it serves.
    alerts: ShardAlerts,
}

/// How a book's quote asset converts to USD.
#[derive(Clone, Copy, Debug)]
enum QuoteUsd {
    /// A USD stablecoin.
    One,
    /// Through this `QUOTEUSDT` book's last price (the same venue's when it lists one).
    Via(BookId),
    /// No conversion known.
    Unknown,
}

impl QuoteUsd {
    fn of(registry: &Registry, id: BookId) -> QuoteUsd {
        let ins = registry.get(id);
        if wall::is_usd_quote(&ins.quote) {
            return QuoteUsd::One;
        }
        let pair = format!("{}USDT", ins.quote);
        let same = registry.find(ins.venue, &pair);
        let any = rampart_engine::Venue::ALL.iter().find_map(|&v| registry.find(v, &pair));
        same.or(any).map_or(QuoteUsd::Unknown, QuoteUsd::Via)
    }
}

impl Shard {
    pub(crate) fn new(
        index: usize,
        config: ShardConfig,
        market: Market,
        sim: Option<Sim>,
        commands: Arc<ArrayQueue<Command>>,
        events: Arc<EventQueue>,
        shared: Arc<Shared>,
    ) -> Shard {
        let books = market.books().len();
        let ticks_max = sim.as_ref().map_or(1024, |s| s.ticks_per_step_max() * SIM_PAIRS_PER_ROUND_MAX);
        let level_bars = std::array::from_fn(|_| Vec::with_capacity(config.bars_max));
        let registry = shared.registry();
        let quote_usd = market.books().iter().map(|b| QuoteUsd::of(&registry, b.id)).collect();
        Shard {
            wall_scratch: WallScratch::new(config.depth_levels_max),
            wall_out: Vec::with_capacity(wall::WALLS_MAX),
            walls_spread: Spread::new(WALLS_PERIOD_MS, WALL_SCANS_PER_ROUND_MAX),
            metrics_spread: Spread::new(pair_metrics::METRICS_PERIOD_MS, pair_metrics::METRICS_PER_ROUND_MAX),
            quote_usd,
            level_bars,
            index,
            config,
            market,
            sim,
            perps: None,
            ticks: Vec::with_capacity(ticks_max),
            commands,
            events: EventSender::new(events, 64),
            ticks_done: 0,
            shared,
            applied: 0,
            level_scratch: LevelScratch::default(),
            levels_epoch_ms: 0,
            levels_spread: Spread::new(LEVELS_PERIOD_MS, LEVEL_RECOMPUTES_PER_ROUND_MAX),
            latency: Latency::new(),
            latency_merged_ms: 0,
            read_at_us: 0,
            levels_soon: Vec::with_capacity(books),
            relisted: Vec::with_capacity(books),
            added: Vec::new(),
            desyncs: live::DesyncLog::default(),
            alerts: ShardAlerts::default(),
        }
    }

    /// The shard with the alerts it starts with (already on its books).
    fn with_alerts(mut self, alerts: ShardAlerts) -> Shard {
        self.alerts = alerts;
        self
    }

    /// The shard with the simulated perpetuals of its books, the derivatives alerts it started
    /// with put on them.
    fn with_perps(mut self, mut perps: perp::ShardPerps) -> Shard {
        let registry = self.shared.registry();
        self.alerts.attach_perps(&self.market, &registry, &mut perps);
        perps.make_feeds(&self.shared.slots);
        self.perps = Some(perps);
        self
    }

    async fn run(&mut self) {
        self.shared.stats[self.index].books.store(self.market.books().len() as u64, Ordering::Relaxed);
        self.load_sim().await;
        let now = self.config.clock.now_ms();
        if let Some(perps) = self.perps.as_mut() {
            // Every perpetual has its mark, OI and funding before the shard says it is ready.
            perps.step_all(now, &self.market, &self.shared.slots);
        }
        for k in 0..self.market.books().len() {
            self.recompute_levels(k, now);
            if k % 32 == 0 {
                glommio::yield_if_needed().await;
            }
        }
        self.levels_epoch_ms = self.config.clock.now_ms();
        // Every book's metrics are published before the shard says it is ready.
        for k in 0..self.market.books().len() {
            self.publish_metrics(k, self.levels_epoch_ms);
        }
        self.shared.stats[self.index].ready.store(true, Ordering::Release);
        self.emit(ShardEvent::Ready { shard: self.index });
        self.reserve_backlog();
        loop {
            if self.take_commands() {
                return;
            }
            self.sim_round(self.config.clock.now_ms());
            glommio::timer::sleep(self.config.poll_interval).await;
        }
    }

    /// One round of the simulated feed at `now`: the spot ticks due (while no backlog waits),
    /// the perpetuals due, then the periodic work. No allocation on the ticks' path.
    fn sim_round(&mut self, now: i64) {
        self.flush_backlog();
        if !self.events.has_backlog() {
            // Take new ticks only when the previous batch is fully applied.
            if self.ticks_done == self.ticks.len() {
                self.ticks.clear();
                self.ticks_done = 0;
                if let Some(sim) = self.sim.as_mut() {
                    sim.step_due(now, SIM_PAIRS_PER_ROUND_MAX, &mut self.ticks);
                }
            }
            self.apply_ticks();
        } else {
            self.shared.stats[self.index].backpressure_rounds.fetch_add(1, Ordering::Relaxed);
        }
        // The perpetuals' alerts fire too: they wait for the backlog as the spot ticks do.
        if !self.events.has_backlog() {
            self.step_perps(now);
        }
        self.levels_soon_due(now);
        self.levels_due(now);
        self.walls_due(now);
        self.metrics_due(now);
        self.publish_counters();
    }

    /// Steps the perpetuals due at `now`; their alerts' firings go to the writer as the trades'
    /// do. No allocation (the backlog's room is reserved for the largest book's alerts).
    fn step_perps(&mut self, now: i64) {
        let Shard { perps, events, alerts, shared, index, .. } = self;
        let Some(perps) = perps.as_mut() else { return };
        let mut n = 0u64;
        perps.step(now, &self.market, &shared.slots, &mut |book, firing| {
            n += 1;
            events.enqueue(ShardEvent::Fired { book, firing, universe: alerts.is_universe(firing.id) });
        });
        if n > 0 {
            shared.stats[*index].firings.fetch_add(n, Ordering::Relaxed);
            events.wake();
        }
    }

    /// Carries out the queued commands; true when told to stop.
    pub(crate) fn take_commands(&mut self) -> bool {
        while let Some(cmd) = self.commands.pop() {
            match cmd {
                Command::Stop => {
                    if self.config.fault_hang_on_stop {
                        // Fault injection: this thread never finishes stopping.
                        loop {
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                    return true;
                }
                Command::Ping { reply } => {
                    let _ = reply.send(Pong { shard: self.index, ticks: self.applied });
                }
                Command::Candles { .. }
                | Command::Depth { .. }
                | Command::PerpHistory { .. }
                | Command::PerpTrigger { .. } => self.answer(cmd),
                Command::Alert { .. } | Command::Universe { .. } => {
                    let registry = self.shared.registry();
                    if self.alerts.apply(&mut self.market, self.perps.as_mut(), &registry, &cmd) == Some(true) {
                        self.reserve_backlog();
                    }
                }
                Command::Delist { book } => {
                    if self.market.get(book).is_some_and(|b| !b.delisted) {
                        // A `*` alert leaves the book, not the venue: it is not reported.
                        let mut ids = self.market.delist(book);
                        if let Some(perps) = self.perps.as_mut() {
                            ids.extend(perps.delist(book, &self.shared.slots[book.index()]));
                        }
                        let ids = self.alerts.on_delisted(ids);
                        self.shared.set_status(book, STATUS_DELISTED);
                        self.emit(ShardEvent::Delisted { book, ids });
                    }
                }
                Command::AddBook { book, native } => self.add_book(book, native),
                Command::Perp { book, change } => self.perp_listing(book, change),
                Command::Relist { book } => {
                    if self.market.relist(book) {
                        if let Some(perps) = self.perps.as_mut() {
                            perps.relist(book, self.config.clock.now_ms());
                        }
                        self.universe_on_book(book);
                        self.shared.set_status(book, STATUS_TRADING);
                        debug_assert!(self.relisted.len() < self.relisted.capacity());
                        self.relisted.push(book);
                    }
                }
            }
            self.shared.stats[self.index].alerts.store(self.market.alert_count() as u64, Ordering::Relaxed);
        }
        false
    }

    /// Takes a book listed after start: allocates it (a command, not a tick), serves it, and
    /// hands it to the live feed. A book this shard cannot own (beyond the capacity, owned
    /// already) is left out and reported.
    fn add_book(&mut self, book: BookId, native: String) {
        if !self.market.add_book(book, self.config.depth_levels_max, self.config.bars_max) {
            tracing::error!("shard {}: book {} cannot be added here", self.index, book.0);
            return;
        }
        let registry = self.shared.registry();
        self.quote_usd.push(QuoteUsd::of(&registry, book));
        self.levels_soon.reserve_exact(1);
        self.relisted.reserve_exact(1);
        if let Some(state) = self.market.get_mut(book) {
            state.stale = true;
        }
        self.shared.stats[self.index].books.fetch_add(1, Ordering::Relaxed);
        self.shared.set_status(book, STATUS_TRADING);
        self.universe_on_book(book);
        self.added.push((book, native));
    }

    /// A book taken after start or listed again: its venue's `*` alerts go on it.
    fn universe_on_book(&mut self, book: BookId) {
        let registry = self.shared.registry();
        if self.alerts.on_book_taken(&mut self.market, self.perps.as_mut(), &registry, book) {
            self.reserve_backlog();
        }
    }

    /// Loads history and initial books for every simulated pair, yielding between pairs.
    async fn load_sim(&mut self) {
        let Some(mut sim) = self.sim.take() else {
            return;
        };
        let now = self.config.clock.now_ms();
        let started = Instant::now();
        for i in 0..sim.pair_count() {
            let set = sim.history(i, now, self.config.bars_max);
            let close = set.ring(rampart_engine::Timeframe::M5).newest().map_or(0, |c| c.close.0);
            let ids: Vec<BookId> = sim.pair_books(i).collect();
            for id in ids {
                if let Some(state) = self.market.get_mut(id) {
                    state.candles = set.clone();
                    state.alerts.candles_changed();
                    state.last_price = rampart_engine::Price(close);
                }
                self.shared.slots[id.index()].price.store(close, Ordering::Relaxed);
                self.shared.slots[id.index()].price_ts.store(now, Ordering::Relaxed);
            }
            sim.start_pair(i, now, &mut self.ticks);
            self.apply_ticks();
            // No alert is evaluated against the initial books (they hold no trades), so the
            // whole batch was applied.
            debug_assert_eq!(self.ticks_done, self.ticks.len());
            self.ticks.clear();
            self.ticks_done = 0;
            glommio::yield_if_needed().await;
        }
        tracing::info!(
            "shard {}: {} books, {} pairs loaded in {} ms",
            self.index,
            self.market.books().len(),
            sim.pair_count(),
            started.elapsed().as_millis()
        );
        self.sim = Some(sim);
    }

    /// Recomputes the level sets that are due, each once per [`LEVELS_PERIOD_MS`], spread.
    pub(crate) fn levels_due(&mut self, now: i64) {
        for k in self.levels_spread.due(self.market.books().len(), now - self.levels_epoch_ms) {
            self.recompute_levels(k, now);
        }
    }

    /// Recomputes the levels of books that saw their first trade, a few per round.
    pub(crate) fn levels_soon_due(&mut self, now: i64) {
        let take = self.levels_soon.len().min(LEVEL_RECOMPUTES_PER_ROUND_MAX);
        for j in 0..take {
            let id = self.levels_soon[j];
            if let Some(k) = self.market.books().iter().position(|b| b.id == id) {
                self.recompute_levels(k, now);
            }
        }
        self.levels_soon.drain(..take);
    }

    /// The price a book's levels and walls are measured against: its last trade, else (before
    /// the first trade) the backfilled close it was given, else the book's mid; zero when none
    /// is known yet.
    fn reference_price(state: &rampart_engine::market::BookState) -> rampart_engine::Price {
        if state.last_price.0 > 0 {
            return state.last_price;
        }
        state.book.mid().unwrap_or_default()
    }

    /// Rescans the books that are due for walls, each once per [`WALLS_PERIOD_MS`], spread.
    pub(crate) fn walls_due(&mut self, now: i64) {
        for k in self.walls_spread.due(self.market.books().len(), now - self.levels_epoch_ms) {
            self.scan_walls(k, now);
        }
    }

    /// Recomputes the metrics of the books that are due, each once per
    /// [`pair_metrics::METRICS_PERIOD_MS`], spread over the period.
    pub(crate) fn metrics_due(&mut self, now: i64) {
        for k in self.metrics_spread.due(self.market.books().len(), now - self.levels_epoch_ms) {
            self.publish_metrics(k, now);
        }
    }

    /// The USD price of local book `k`'s quote asset, when known.
    fn quote_usd(&self, k: usize) -> Option<f64> {
        match self.quote_usd[k] {
            QuoteUsd::One => Some(1.0),
            QuoteUsd::Via(book) => {
                let p = self.shared.slots[book.index()].price.load(Ordering::Relaxed);
                (p > 0).then(|| rampart_engine::Price(p).to_f64())
            }
            QuoteUsd::Unknown => None,
        }
    }

    /// Computes one book's metrics and publishes them, with its perpetual when it has one. Not
    /// on the tick path: one small allocation per book per period (a few more with a perpetual:
    /// the snapshot, its name and its liquidations), like the wall scans.
    pub(crate) fn publish_metrics(&mut self, k: usize, now: i64) {
        let quote_usd = self.quote_usd(k);
        let state = &self.market.books()[k];
        let slot = &self.shared.slots[state.id.index()];
        let walls = slot.densities.load();
        let mut m = pair_metrics::PairMetrics::compute(state, Self::reference_price(state), now, &walls, quote_usd);
        m.perp = self.perps.as_ref().and_then(|p| p.metrics(state.id, now));
        slot.metrics.store(Arc::new(m));
        if let Some(perps) = &self.perps {
            perps.publish(state.id, now, slot);
        }
    }

    /// Scans one book for walls against its last price and publishes the result. A crossed
    /// book publishes no walls until it is rebuilt.
    pub(crate) fn scan_walls(&mut self, k: usize, now: i64) {
        let min_ratio = self.config.walls_min_ratio;
        let quote_usd = self.quote_usd(k);
        let state = &mut self.market.books_mut()[k];
        let price = Self::reference_price(state);
        let usable = !(state.crossed || state.stale);
        if !usable {
            self.wall_out.clear();
        } else {
            wall::scan(
                &state.book,
                price,
                now,
                min_ratio,
                &mut state.walls,
                &mut self.wall_scratch,
                &mut self.wall_out,
            );
        }
        let id = state.id;
        // A book not served (crossed, stale) says nothing about its walls: its walls' lives
        // neither end nor age, and the wall alerts neither fire nor forget what they fired
        // for, until it is served again. The history goes out before the scan, so a stream that
        // reads the scan finds how its walls went (`rampart_net::stream::watch`).
        if usable {
            self.track_wall_lives(k, price, quote_usd, now);
        }
        let walls = self
            .wall_out
            .iter()
            .map(|w| PublishedWall { wall: *w, usd: quote_usd.map(|q| wall::usd_value(w.qty, w.price, q)) })
            .collect();
        self.shared.publish_densities(id, DensitySnapshot { ts_ms: now, price: price.0, walls });
        self.shared.stats[self.index].wall_scans.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs the scan just made of local book `k` through its walls' lives and its wall alerts
    /// (firings go to the event queue as a trade's do), then publishes its wall history when the
    /// scan changed it: a wall ended, or walls stand (their last seen moved). A book without
    /// walls publishes nothing. The walls this scan ended stay in `wall_life.ended_last_scan()`
    /// until the book's next scan.
    fn track_wall_lives(&mut self, k: usize, price: rampart_engine::Price, quote_usd: Option<f64>, now: i64) {
        let book = self.market.books()[k].id;
        self.market.on_wall_scan(book, now, price, &self.wall_out, quote_usd);
        if !self.market.firings().is_empty() {
            self.forward_firings(book);
        }
        let state = &self.market.books()[k];
        if state.wall_life.ended_last_scan().is_empty() && state.wall_life.is_quiet() {
            return;
        }
        let previous = self.shared.slots[state.id.index()].wall_history.load();
        let history = WallHistory::of(&state.wall_life, now, &previous);
        self.shared.publish_wall_history(state.id, history);
    }

    /// Recomputes one book's levels from its candles and publishes them, then resets the
    /// book's trade watermarks (after the snapshot, so readers never pair a new watermark with
    /// an old snapshot).
    /// Without any price (no trade, no history, no book yet) nothing is computed: levels typed
    /// against zero would all be resistance; the first trade or the history brings a recompute.
    pub(crate) fn recompute_levels(&mut self, k: usize, now: i64) {
        let state = &mut self.market.books_mut()[k];
        let price = Self::reference_price(state);
        if price.0 <= 0 {
            return;
        }
        compute_from_set(&state.candles, now, price, &mut self.level_bars, &mut self.level_scratch, &mut state.levels);
        state.alerts.on_levels(state.levels.levels(), state.last_price);
        let i = state.id.index();
        let snapshot = LevelSnapshot { computed_ms: now, levels: state.levels.levels().to_vec() };
        let slot = &self.shared.slots[i];
        slot.levels.store(Arc::new(snapshot));
        slot.trade_high.store(i64::MIN, Ordering::Release);
        slot.trade_low.store(i64::MAX, Ordering::Release);
        self.shared.stats[self.index].level_recomputes.fetch_add(1, Ordering::Relaxed);
    }

    /// The hot path: applies buffered ticks and publishes what changed. No allocation. Stops
    /// early when an alert firing could not be queued (backpressure): the remaining ticks wait
    /// until the backlog has drained.
    fn apply_ticks(&mut self) {
        while self.ticks_done < self.ticks.len() {
            let tick = self.ticks[self.ticks_done];
            self.ticks_done += 1;
            self.apply_tick(&tick);
            if self.events.has_backlog() {
                break;
            }
        }
        self.shared.stats[self.index].ticks.store(self.applied, Ordering::Relaxed);
    }

    /// Applies one tick and publishes what it changed; firings the queue cannot take go to the
    /// backlog (the caller stops taking ticks while it is not empty). No allocation.
    pub(crate) fn apply_tick(&mut self, tick: &Tick) {
        let tick = *tick;
        self.applied += 1;
        {
            match self.market.apply(&tick) {
                Outcome::Trade { price, levels_consumed, first } => {
                    if first && self.levels_soon.len() < self.levels_soon.capacity() {
                        self.levels_soon.push(tick.book);
                    }
                    let slot = &self.shared.slots[tick.book.index()];
                    slot.price.store(price.0, Ordering::Relaxed);
                    slot.price_ts.store(tick.ts_ms, Ordering::Relaxed);
                    if price.0 > slot.trade_high.load(Ordering::Relaxed) {
                        slot.trade_high.store(price.0, Ordering::Relaxed);
                    }
                    if price.0 < slot.trade_low.load(Ordering::Relaxed) {
                        slot.trade_low.store(price.0, Ordering::Relaxed);
                    }
                    if levels_consumed > 0 {
                        self.shared.stats[self.index]
                            .levels_consumed
                            .fetch_add(levels_consumed as u64, Ordering::Relaxed);
                    }
                    if !self.market.firings().is_empty() {
                        self.forward_firings(tick.book);
                    }
                }
                Outcome::Crossed => self.emit(ShardEvent::BookCrossed { book: tick.book, ts_ms: tick.ts_ms }),
                Outcome::Level(_) => {}
                Outcome::NotOwned => debug_assert!(false, "tick routed to the wrong shard"),
                Outcome::Delisted => {}
            }
        }
    }

    /// Sends the last tick's firings to the persistence side, in order; what the queue cannot
    /// take goes to the backlog (whose room is reserved, so this does not allocate).
    fn forward_firings(&mut self, book: BookId) {
        let n = self.market.firings().len();
        for k in 0..n {
            let firing = self.market.firings()[k];
            let ev = ShardEvent::Fired { book, firing, universe: self.alerts.is_universe(firing.id) };
            self.events.enqueue(ev);
        }
        self.shared.stats[self.index].firings.fetch_add(n as u64, Ordering::Relaxed);
        self.market.clear_firings();
        self.events.wake();
    }

    /// Keeps room in the backlog for one tick's firings on the largest alert book, or one round
    /// of perpetual updates ([`perp::PERP_CONTRACTS_PER_ROUND_MAX`] contracts) on the largest
    /// derivatives alert book up to [`PERP_BACKLOG_RESERVED_MAX`] events, plus slack. Past that
    /// bound (a market-wide liquidation storm over thousands of `*` derivatives alerts at once)
    /// the backlog grows: it allocates, and no tick is taken until it has drained.
    pub(crate) fn reserve_backlog(&mut self) {
        let spot = self.market.books().iter().map(|b| b.alerts.len()).max().unwrap_or(0);
        let per_round = |p: &perp::ShardPerps| p.alerts_per_book_max() * perp::PERP_CONTRACTS_PER_ROUND_MAX;
        let perp = self.perps.as_ref().map_or(0, |p| per_round(p).min(PERP_BACKLOG_RESERVED_MAX));
        let want = spot.max(perp) + 64;
        self.events.reserve(want);
    }

    /// Queues an event for the persistence side, behind anything already waiting, and wakes it.
    pub(crate) fn emit(&mut self, ev: ShardEvent) {
        self.events.send(ev);
    }

    /// Merges the latencies recorded since the last call into [`Shared::latency`], at most every
    /// [`LATENCY_PUBLISH_MS`] (the only place the lock is taken, never on the tick path).
    pub(crate) fn merge_latency(&mut self, now_ms: i64) {
        if now_ms - self.latency_merged_ms < LATENCY_PUBLISH_MS || self.latency.tick_to_decision_us.is_empty() {
            return;
        }
        self.latency_merged_ms = now_ms;
        if let Ok(mut shared) = self.shared.latency[self.index].lock() {
            let _ = shared.tick_to_decision_us.add(&self.latency.tick_to_decision_us);
            let _ = shared.read_to_decision_us.add(&self.latency.read_to_decision_us);
        }
        self.latency.tick_to_decision_us.reset();
        self.latency.read_to_decision_us.reset();
    }

    pub(crate) fn publish_counters(&mut self) {
        let crossed = self.market.books().iter().filter(|b| b.crossed).count() as u64;
        self.shared.stats[self.index].crossed_books.store(crossed, Ordering::Relaxed);
    }

    /// True while events wait for room on the queue to the writer (no new tick is taken).
    pub(crate) fn has_backlog(&self) -> bool {
        self.events.has_backlog()
    }

    pub(crate) fn flush_backlog(&mut self) {
        self.events.flush();
    }
}
