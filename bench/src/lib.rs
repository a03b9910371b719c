//! rampart's benchmarks as library functions, so the `rampart-bench` binary runs them in full
//! and the test suite runs them in a cheap mode that keeps them compiling and working.
//!
//! Every latency is recorded in an HDR histogram (nanoseconds) and reported as p50, p99,
//! p99.9 and max.

use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod baseline_http;
pub mod book_baseline;
pub mod curve;
pub mod env;
pub mod harness;
pub mod http_load;
pub mod ingest;
pub mod liq_storm;
pub mod parsers;
pub mod perp_load;
pub mod perp_memory;
pub mod perp_round;
pub mod records;
pub mod scenarios;
pub mod soak;
pub mod streams;

pub use parsers::{parsers, parsers_table, ParserRow};

use hdrhistogram::Histogram;
use rampart_engine::alert::{Condition, Cross};
use rampart_engine::sim::{self, Sim, SimConfig};
use rampart_engine::{BookId, Market, Registry, Venue};
use rampart_shard::{ShardConfig, ShardSet};
use rampart_state::Command;

/// Percentiles of one measured quantity.
#[derive(Clone, Debug)]
pub struct Summary {
    /// What was measured.
    pub name: String,
    /// Samples.
    pub count: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// 99.9th percentile, ns.
    pub p999_ns: u64,
    /// Largest sample, ns.
    pub max_ns: u64,
    /// Operations per second over the whole run, where meaningful.
    pub rate_per_s: Option<f64>,
}

impl Summary {
    fn from_hist(name: &str, h: &Histogram<u64>, rate_per_s: Option<f64>) -> Summary {
        Summary {
            name: name.to_owned(),
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            rate_per_s,
        }
    }

    /// One Markdown table row.
    pub fn row(&self) -> String {
        let rate = self.rate_per_s.map_or_else(|| "-".to_owned(), |r| format!("{r:.0}"));
        format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            self.name, self.count, self.p50_ns, self.p99_ns, self.p999_ns, self.max_ns, rate
        )
    }

    /// The Markdown table header matching [`Summary::row`].
    pub fn header() -> &'static str {
        "| measure | samples | p50 ns | p99 ns | p99.9 ns | max ns | ops/s |\n|---|---|---|---|---|---|---|"
    }
}

const WALLS_MIN_RATIO: f64 = rampart_engine::wall::MIN_RATIO_DEFAULT as f64;

fn histogram() -> Histogram<u64> {
    // 1 ns .. 100 s at 3 significant digits; construction cannot fail for these bounds.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Applies simulated ticks (book updates and trades mixed as the simulator makes them) to a
/// market of `pairs` pairs on all four venues for `rounds` rounds of 50 simulated ms, timing
/// each tick's `Market::apply` alone. Returns the per-tick latency and the apply throughput.
pub fn tick_apply(pairs: usize, rounds: usize) -> Summary {
    let now = 1_795_183_387_000_i64;
    let (mut market, mut sim) = simulated_market(pairs, now);
    let mut ticks = Vec::with_capacity(sim.ticks_per_step_max() * 64);
    let mut h = histogram();
    let mut busy = Duration::ZERO;
    for r in 0..rounds as i64 {
        sim.step_due(now + 1_000 + r * 50, 64, &mut ticks);
        let batch = Instant::now();
        for t in &ticks {
            let t0 = Instant::now();
            std::hint::black_box(market.apply(std::hint::black_box(t)));
            let _ = h.record(t0.elapsed().as_nanos() as u64);
        }
        busy += batch.elapsed();
        ticks.clear();
    }
    let rate = h.len() as f64 / busy.as_secs_f64().max(1e-9);
    Summary::from_hist("tick apply (book or trade, incl. ~20 ns timer)", &h, Some(rate))
}

/// A simulated market of `pairs` pairs on all four venues at `now`: every book with a full
/// history (512 bars per timeframe) and its initial levels applied.
fn simulated_market(pairs: usize, now: i64) -> (Market, Sim) {
    let universe = sim::universe(42, pairs);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("simulated registry is valid");
    let ids: Vec<BookId> = registry.ids().collect();
    let mut market = Market::new(registry.len(), &ids, 1_000, 512);
    let mut sim = Sim::new(SimConfig::default(), &universe, &registry, &(0..universe.len()).collect::<Vec<_>>());
    let mut ticks = Vec::with_capacity(sim.ticks_per_step_max() * 64);
    for i in 0..sim.pair_count() {
        let history = sim.history(i, now, 512);
        for id in sim.pair_books(i).collect::<Vec<_>>() {
            if let Some(s) = market.get_mut(id) {
                s.candles = history.clone();
            }
        }
        sim.start_pair(i, now, &mut ticks);
        ticks.iter().for_each(|t| {
            market.apply(t);
        });
        ticks.clear();
    }
    (market, sim)
}

/// Recomputes the level set of every book of a `pairs`-pair market on all four venues from
/// full histories (512 bars per timeframe), timing each book. Returns the per-book latency and,
/// as the rate, books per second on one core; the whole market's time is `count / rate`.
pub fn levels_recompute(pairs: usize, passes: usize) -> Summary {
    use rampart_engine::candle::{Candle, Timeframe};
    use rampart_engine::level::{compute_from_set, LevelScratch, LevelSet};
    let now = 1_795_183_387_000_i64;
    let universe = sim::universe(42, pairs);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("simulated registry is valid");
    let mut sim = Sim::new(SimConfig::default(), &universe, &registry, &(0..universe.len()).collect::<Vec<_>>());
    let mut sets = Vec::new();
    for i in 0..sim.pair_count() {
        let set = sim.history(i, now, 512);
        for _ in sim.pair_books(i) {
            sets.push(set.clone());
        }
    }
    let mut bars: [Vec<Candle>; 5] = std::array::from_fn(|_| Vec::with_capacity(512));
    let mut scratch = LevelScratch::default();
    let mut out = LevelSet::new();
    let mut h = histogram();
    let started = Instant::now();
    for _ in 0..passes.max(1) {
        for set in &sets {
            let price = set.ring(Timeframe::M5).newest().map_or(rampart_engine::Price(1), |c| c.close);
            let t0 = Instant::now();
            compute_from_set(set, now, price, &mut bars, &mut scratch, &mut out);
            std::hint::black_box(out.levels().len());
            let _ = h.record(t0.elapsed().as_nanos() as u64);
        }
    }
    let rate = h.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Summary::from_hist(&format!("level recompute per book ({} books)", sets.len()), &h, Some(rate))
}

/// One book's metrics refresh (`PairMetrics::compute`: six rolling windows from the 5-minute
/// and hourly rings of a full 512-bar history, spread and ±1 % depth from the book, level
/// distances), over every book of a simulated market with its books and levels, `passes`
/// times. Its baseline in the same run is the wall scan of the same books, another per-book
/// periodic job (every 2 s).
pub fn metrics_refresh(pairs: usize, passes: usize) -> Vec<Summary> {
    use rampart_engine::level::{compute_from_set, LevelScratch};
    use rampart_state::pair_metrics::PairMetrics;
    use rampart_state::DensitySnapshot;
    let now = 1_795_183_387_000_i64;
    let (mut market, mut sim) = simulated_market(pairs, now);
    let mut ticks = Vec::with_capacity(sim.ticks_per_step_max() * 64);
    for r in 0..200 {
        sim.step_due(now + r * 50, usize::MAX, &mut ticks);
        ticks.iter().for_each(|t| {
            market.apply(t);
        });
        ticks.clear();
    }
    let mut bars: [Vec<rampart_engine::Candle>; 5] = std::array::from_fn(|_| Vec::with_capacity(512));
    let mut scratch = LevelScratch::default();
    for state in market.books_mut() {
        let price = state.last_price;
        compute_from_set(&state.candles, now, price, &mut bars, &mut scratch, &mut state.levels);
    }
    let walls = DensitySnapshot::default();
    let mut h = histogram();
    let started = Instant::now();
    for pass in 0..passes.max(1) as i64 {
        for state in market.books() {
            let t0 = Instant::now();
            let m = PairMetrics::compute(state, state.last_price, now + 10_000 + pass * 1_000, &walls, Some(1.0));
            std::hint::black_box(&m);
            let _ = h.record(t0.elapsed().as_nanos() as u64);
        }
    }
    let rate = h.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
    let books = market.books().len();
    let metrics = Summary::from_hist(&format!("metrics refresh per book ({books} books)"), &h, Some(rate));
    vec![metrics, wall_scan(pairs, passes)]
}

/// The per-tick live consumption check: `LevelSet::on_trade` with trade prices around the
/// current price (most trades consume nothing; some go through the nearest zone).
pub fn levels_consumption_check(trades: usize) -> Summary {
    use rampart_engine::candle::Timeframe;
    use rampart_engine::level::{compute_from_set, LevelScratch, LevelSet};
    let now = 1_795_183_387_000_i64;
    let universe = sim::universe(42, 50);
    let registry = Registry::new(sim::instruments(&universe, &[Venue::Binance])).expect("simulated registry is valid");
    let mut sim = Sim::new(SimConfig::default(), &universe, &registry, &[0]);
    let set = sim.history(0, now, 512);
    let price = set.ring(Timeframe::M5).newest().map_or(rampart_engine::Price(1), |c| c.close);
    let mut bars = std::array::from_fn(|_| Vec::with_capacity(512));
    let mut scratch = LevelScratch::default();
    let mut fresh = LevelSet::new();
    compute_from_set(&set, now, price, &mut bars, &mut scratch, &mut fresh);
    let mut live = LevelSet::new();
    live.copy_from(&fresh);
    let mut rng = sim::Rng::new(7);
    let mut h = histogram();
    for i in 0..trades {
        if i % 1_000 == 0 {
            live.copy_from(&fresh);
        }
        let p = rampart_engine::Price((price.0 as f64 * (1.0 + 0.004 * rng.normal())) as i64);
        let t0 = Instant::now();
        std::hint::black_box(live.on_trade(std::hint::black_box(p)));
        let _ = h.record(t0.elapsed().as_nanos() as u64);
    }
    Summary::from_hist("level consumption check per trade (incl. ~20 ns timer)", &h, None)
}

/// Scans every book of a `pairs`-pair market on all four venues for walls (books of 250 levels a
/// side from the simulator, after some churn), timing each scan. The rate is scans per second
/// on one core; every book is scanned every 2 s in service.
pub fn wall_scan(pairs: usize, passes: usize) -> Summary {
    use rampart_engine::wall::{self, WallScratch, WallTracker};
    let now = 1_795_183_387_000_i64;
    let universe = sim::universe(42, pairs);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("simulated registry is valid");
    let ids: Vec<BookId> = registry.ids().collect();
    let mut market = Market::new(registry.len(), &ids, 1_000, 16);
    let mut sim = Sim::new(SimConfig::default(), &universe, &registry, &(0..universe.len()).collect::<Vec<_>>());
    let mut ticks = Vec::with_capacity(sim.ticks_per_step_max() * 64);
    for i in 0..sim.pair_count() {
        sim.history(i, now, 16);
        sim.start_pair(i, now, &mut ticks);
        ticks.iter().for_each(|t| {
            market.apply(t);
        });
        ticks.clear();
    }
    for r in 0..200 {
        sim.step_due(now + r * 50, usize::MAX, &mut ticks);
        ticks.iter().for_each(|t| {
            market.apply(t);
        });
        ticks.clear();
    }
    let mut scratch = WallScratch::new(1_000);
    let mut out = Vec::with_capacity(wall::WALLS_MAX);
    let mut trackers: Vec<WallTracker> = ids.iter().map(|_| WallTracker::default()).collect();
    let mut h = histogram();
    let started = Instant::now();
    for pass in 0..passes.max(1) as i64 {
        for (k, state) in market.books().iter().enumerate() {
            let price = state.book.mid().unwrap_or_default();
            let t0 = Instant::now();
            wall::scan(&state.book, price, now + pass * 2_000, 10.0, &mut trackers[k], &mut scratch, &mut out);
            std::hint::black_box(out.len());
            let _ = h.record(t0.elapsed().as_nanos() as u64);
        }
    }
    let rate = h.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Summary::from_hist(&format!("wall scan per book ({} books)", ids.len()), &h, Some(rate))
}

/// Starts real shards over a simulated market of `pairs` pairs and compares the two ways the
/// front can read shard state: a request/response round trip over the shard's command queue
/// (`pings` of them, from a single-threaded tokio runtime like the front's), and a read of the
/// published snapshot (an atomic load of the last price plus formatting it as JSON).
pub fn front_hop(pairs: usize, shards: usize, pings: usize) -> Vec<Summary> {
    let universe = Arc::new(sim::universe(42, pairs));
    let registry =
        Arc::new(Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("simulated registry is valid"));
    let config = ShardConfig {
        shards,
        depth_levels_max: 1_000,
        bars_max: 512,
        sim: SimConfig::default(),
        poll_interval: Duration::from_millis(1),
        walls_min_ratio: WALLS_MIN_RATIO,
        fault_hang_on_stop: false,
        events_max: rampart_state::EVENTS_MAX,
        cpus: (0..shards).map(|i| Some(i % std::thread::available_parallelism().map_or(1, |c| c.get()))).collect(),
        clock: rampart_state::clock::system(),
        partition: Default::default(),
        spin_before_park: rampart_shard::LIVE_SPIN_BEFORE_PARK,
        derivatives: true,
    };
    let set = ShardSet::start_sim(&config, registry.clone(), universe, Vec::new()).expect("shards start");
    let shared = set.shared().clone();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !shared.ready() {
        assert!(Instant::now() < deadline, "shards not ready in 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let mut hop = histogram();
    runtime.block_on(async {
        for i in 0..pings {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let t0 = Instant::now();
            if set.send(i % set.len(), Command::Ping { reply: tx }).is_err() {
                continue;
            }
            if rx.await.is_ok() {
                let _ = hop.record(t0.elapsed().as_nanos() as u64);
            }
            // Spread the pings so each one meets the shard in a random phase of its loop.
            tokio::time::sleep(Duration::from_micros(200 + (i as u64 * 7919) % 800)).await;
        }
    });
    let mut snap = histogram();
    let ids: Vec<BookId> = registry.ids().collect();
    let mut buf = String::with_capacity(64);
    for i in 0..pings.max(1) * 10 {
        let id = ids[i % ids.len()];
        let t0 = Instant::now();
        let (price, _) = shared.price(id);
        buf.clear();
        let mut b = [0u8; 24];
        buf.push_str(rampart_engine::fixed::format_decimal(price, &mut b));
        std::hint::black_box(&buf);
        let _ = snap.record(t0.elapsed().as_nanos() as u64);
    }
    set.stop();
    vec![
        Summary::from_hist("front→shard→front round trip over the command queue", &hop, None),
        Summary::from_hist("published snapshot read (atomic load + format)", &snap, None),
    ]
}

/// Tick-to-decision: the time `Market::apply` takes for a trade on a pair holding
/// `alerts_on_pair` alerts (repeating price alerts spread ±5% around the price, so trades fire
/// and re-arm some of them, plus a few percent alerts), in a market holding `alerts_market` alerts
/// over all books. The trade walk is a random walk of 0.02% steps.
pub fn alert_decision(alerts_on_pair: usize, alerts_market: usize, trades: usize) -> Summary {
    use rampart_engine::alert::{AlertSpec, Condition, Cross, Move};
    use rampart_engine::{Price, Qty, Tick, TickKind, Timeframe};
    let universe = sim::universe(42, 500);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("simulated registry is valid");
    let ids: Vec<BookId> = registry.ids().collect();
    let mut market = Market::new(registry.len(), &ids, 64, 16);
    let pair = registry.find(Venue::Binance, "BTCUSDT").expect("BTCUSDT");
    let base = 9_500_000_000_000_i64;
    let mut rng = sim::Rng::new(9);
    let mut next = 0u64;
    let mut add = |market: &mut Market, book: BookId, rng: &mut sim::Rng, repeat: bool| {
        next += 1;
        let condition = if next.is_multiple_of(50) {
            Condition::Pct { dir: Move::Any, millionths: (10 + rng.below(200) as u32) * 10_000, window: Timeframe::M5 }
        } else {
            let off = rng.range(-0.05, 0.05);
            let level = Price((base as f64 * (1.0 + off)) as i64);
            Condition::Price { cross: if off > 0.0 { Cross::Above } else { Cross::Below }, level }
        };
        market.insert_alert(book, AlertSpec { id: next, condition, repeat, cooldown_s: 0 });
    };
    for _ in 0..alerts_on_pair {
        add(&mut market, pair, &mut rng, true);
    }
    let others = alerts_market.saturating_sub(alerts_on_pair);
    for k in 0..others {
        let book = ids[k % ids.len()];
        if book != pair {
            add(&mut market, book, &mut rng, true);
        }
    }
    let mut h = histogram();
    let mut price = base;
    let mut fired = 0u64;
    let t0_ms = 1_795_183_387_000_i64;
    for i in 0..trades {
        price = (price as f64 * (1.0 + 0.0002 * rng.normal())) as i64;
        price = price.clamp(base * 97 / 100, base * 103 / 100);
        let tick = Tick {
            book: pair,
            ts_ms: t0_ms + i as i64,
            kind: TickKind::Trade { price: Price(price), qty: Qty(1), taker_sell: false },
        };
        let t0 = Instant::now();
        std::hint::black_box(market.apply(std::hint::black_box(&tick)));
        let ns = t0.elapsed().as_nanos() as u64;
        fired += market.firings().len() as u64;
        market.clear_firings();
        let _ = h.record(ns);
    }
    let name = format!(
        "trade → alert decision, {alerts_on_pair} alerts on the pair, {} in the market ({fired} firings)",
        market.alert_count()
    );
    Summary::from_hist(&name, &h, None)
}

/// Which database a storage benchmark runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// SQLite in a fresh directory under the temp dir.
    Sqlite,
    /// A fresh schema on a throwaway PostgreSQL server on loopback
    /// (`rampart_testkit::pg::durable_server`, Debian's binaries, default durability: a commit
    /// waits for its WAL flush, as SQLite's `FULL` does).
    Postgres,
}

/// A fresh database on `backend` named `name`; the directory to remove afterwards (SQLite).
fn bench_store(backend: Backend, name: &str) -> (rampart_store::store::StoreLocation, Option<std::path::PathBuf>) {
    use rampart_store::store::StoreLocation;
    match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(format!("rampart-bench-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            (StoreLocation::Sqlite(dir.clone()), Some(dir))
        }
        Backend::Postgres => {
            let server = rampart_testkit::pg::durable_server();
            let schema = server.fresh_schema_name();
            let admin = rampart_store::db::Db::postgres(&server.admin_url()).expect("connect as admin");
            admin.batch(&format!("CREATE SCHEMA {schema}")).expect("a schema");
            (StoreLocation::Postgres(server.url_in_schema(&schema)), None)
        }
    }
}

/// Alert creates through the front's storage thread: `clients` concurrent clients, each creating
/// alerts one after another (each awaited, as a request is), `creates` in all, on a fresh
/// database with the front's durability (SQLite: WAL, `synchronous = FULL`). Latency is per
/// create, from sending the job to its answer (which comes after the commit); `group_max` 1 is
/// the baseline of one commit per create.
pub fn storage_creates(backend: Backend, clients: usize, creates: usize, group_max: usize) -> Summary {
    use rampart_store::storage::StorageThread;
    use rampart_store::store::NewAlert;

    let (at, dir) = bench_store(backend, &format!("storage-{group_max}"));
    let mut store = at.open().expect("open a store");
    let account = store.create_account_with_key("free", None, 1).expect("an account").account_id;
    let (thread, join) = StorageThread::start_grouped(store, group_max).expect("start the storage thread");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let per_client = creates / clients.max(1);
    let started = Instant::now();
    let hist = runtime.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for c in 0..clients {
            let thread = thread.clone();
            set.spawn(async move {
                let mut h = histogram();
                for i in 0..per_client {
                    let alert = NewAlert {
                        account_id: account,
                        exchange: Venue::Binance,
                        symbol: "BTCUSDT".into(),
                        condition: Condition::Price {
                            cross: Cross::Above,
                            level: rampart_engine::Price((c * per_client + i + 1) as i64),
                        },
                        repeat: false,
                        note: String::new(),
                        webhook_url: None,
                        created_price: 1,
                        created_ms: 1,
                        expires_ms: None,
                        cooldown_s: 0,
                        max_fires: None,
                        message: None,
                        webhook_format: rampart_store::store::WebhookFormat::Json,
                    };
                    let t = Instant::now();
                    thread.run(move |s| s.insert_alert(&alert)).await.expect("an insert");
                    h.saturating_record(t.elapsed().as_nanos() as u64);
                }
                h
            });
        }
        let mut all = histogram();
        while let Some(h) = set.join_next().await {
            let _ = all.add(h.expect("a client"));
        }
        all
    });
    let rate = hist.len() as f64 / started.elapsed().as_secs_f64();
    let groups = thread.groups();
    drop(thread);
    join.join();
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let name = format!(
        "alert create via storage thread ({backend:?}), {clients} clients, groups of ≤ {group_max} ({groups} commits)"
    );
    Summary::from_hist(&name, &hist, Some(rate))
}

/// A price alert of `account` on Binance's BTCUSDT above 1 (fired by any trade the benchmark
/// records for it), with a webhook to `url`.
fn webhook_alert(account: i64, repeat: bool, url: String) -> rampart_store::store::NewAlert {
    rampart_store::store::NewAlert {
        account_id: account,
        exchange: rampart_engine::Venue::Binance,
        symbol: "BTCUSDT".into(),
        condition: Condition::Price { cross: Cross::Above, level: rampart_engine::Price(1) },
        repeat,
        note: String::new(),
        webhook_url: Some(url),
        created_price: 0,
        created_ms: 0,
        expires_ms: None,
        cooldown_s: 0,
        max_fires: None,
        message: None,
        webhook_format: rampart_store::store::WebhookFormat::Json,
    }
}

/// Issue #59: the writer's commit of a storm's firings, `batch` at a time: `firings` one-shot
/// alerts with webhooks (made beforehand) recorded through `Store::record_firings` (each alert's
/// count and status, its inbox entry, its outbox row, in one transaction per batch). Latency is
/// per commit; the rate is firings per second of the whole run.
pub fn firing_commits(backend: Backend, batch: usize, firings: usize) -> Summary {
    use rampart_store::store::FiringRecord;
    let (at, dir) = bench_store(backend, &format!("firings-{batch}"));
    let mut store = at.open().expect("store").for_background().expect("tuned");
    let account = store.create_account_with_key("developer", None, 0).expect("account").account_id;
    store.begin_group().expect("a group");
    let ids: Vec<i64> = (0..firings)
        .map(|i| {
            let new = webhook_alert(account, false, format!("http://127.0.0.1:9/a/{}", i + 1));
            store.insert_alert(&new).expect("alert").id
        })
        .collect();
    store.commit_group().expect("the alerts");
    let mut h = histogram();
    let started = Instant::now();
    for chunk in ids.chunks(batch.max(1)) {
        let batch: Vec<FiringRecord> = chunk.iter().map(|&id| FiringRecord::at_price(id, 2, 1_000, true)).collect();
        let t = Instant::now();
        let done = store.record_firings(&batch, &rampart_store::text::Texts).expect("record");
        assert_eq!(done.fired.len(), batch.len(), "every firing recorded");
        let _ = h.record(t.elapsed().as_nanos() as u64);
    }
    let took = started.elapsed();
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Summary::from_hist(
        &format!("writer commit of {batch} firings ({backend:?}; {firings} in all)"),
        &h,
        Some(firings as f64 / took.as_secs_f64()),
    )
}

/// The writer's commits while retention prunes (issue #62): `backlog` one-shot alerts fired and
/// delivered first (their inbox entries, outbox rows and fired alerts are what the pruner
/// removes), then `firings` more committed `batch` at a time, timed, with `prune` a second
/// connection running the checkpoint thread's prune rounds back to back
/// (`storage::prune_round` with a one-second retention: 20 batches a round, 20 ms apart; the
/// real thread runs one round every 10 s, so this is the storm meeting pruning all along).
/// SQLite, whose one write lock the pruner shares with the writer.
pub fn firing_commits_while_pruning(batch: usize, firings: usize, backlog: usize, prune: bool) -> Summary {
    use rampart_store::store::{FiringRecord, Retention};
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    let (at, dir) = bench_store(Backend::Sqlite, &format!("prune-{prune}"));
    let mut store = at.open().expect("store").for_background().expect("tuned");
    let account = store.create_account_with_key("developer", None, 0).expect("account").account_id;
    let mut alerts = |n: usize, from: usize| -> Vec<i64> {
        store.begin_group().expect("a group");
        let ids = (from..from + n)
            .map(|i| {
                store
                    .insert_alert(&webhook_alert(account, false, format!("http://127.0.0.1:9/a/{i}")))
                    .expect("alert")
                    .id
            })
            .collect();
        store.commit_group().expect("the alerts");
        ids
    };
    let old = alerts(backlog, 0);
    let ids = alerts(firings, backlog);
    for chunk in old.chunks(4_096) {
        let b: Vec<FiringRecord> = chunk.iter().map(|&id| FiringRecord::at_price(id, 2, 1_000, true)).collect();
        store.record_firings(&b, &rampart_store::text::Texts).expect("the backlog");
    }
    // The backlog's deliveries delivered, as a day's old firings' are.
    loop {
        let due = store.due_deliveries(2_000, 4_096).expect("due");
        if due.is_empty() {
            break;
        }
        let delivered = rampart_store::store::AttemptResult::Delivered { status: 200 };
        let outcomes: Vec<rampart_store::store::Outcome> = due
            .iter()
            .map(|r| rampart_store::store::Outcome {
                id: r.id,
                result: delivered.clone(),
                at_ms: 1_500,
                latency_ms: 1,
                pulled_ms: 1_499,
            })
            .collect();
        store.record_attempts(&outcomes, rampart_delivery::schedule::next_attempt_ms).expect("settled");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let pruned = Arc::new(AtomicI64::new(0));
    let pruner = prune.then(|| {
        let (stop, pruned, pruner) =
            (stop.clone(), pruned.clone(), at.open().expect("store").for_background().expect("tuned"));
        std::thread::spawn(move || {
            let keep = Retention { inbox_ms: 1_000, outbox_ms: 1_000, alerts_ms: 1_000 };
            while !stop.load(Ordering::Acquire) {
                let p = rampart_store::storage::prune_round(&pruner, &keep, || 10_000_000, &stop);
                pruned.fetch_add(p.inbox + p.outbox + p.alerts, Ordering::Relaxed);
            }
        })
    });
    let mut h = histogram();
    let started = Instant::now();
    for chunk in ids.chunks(batch.max(1)) {
        // Now's firings: younger than the retention (the pruner's clock reads 10 000 000).
        let b: Vec<FiringRecord> = chunk.iter().map(|&id| FiringRecord::at_price(id, 2, 9_999_500, true)).collect();
        let t = Instant::now();
        let done = store.record_firings(&b, &rampart_store::text::Texts).expect("record");
        assert_eq!(done.fired.len(), b.len(), "every firing recorded");
        let _ = h.record(t.elapsed().as_nanos() as u64);
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Release);
    if let Some(t) = pruner {
        let _ = t.join();
    }
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let removed = pruned.load(Ordering::Relaxed);
    assert!(!prune || removed > 0, "the pruner removed nothing");
    Summary::from_hist(
        &format!(
            "writer commit of {batch} firings, {} (SQLite; {firings} in all; {removed} rows pruned meanwhile)",
            if prune { "pruning" } else { "no pruning" }
        ),
        &h,
        Some(firings as f64 / took.as_secs_f64()),
    )
}

/// Webhook delivery on loopback: `firings` firings recorded through the real storage path in
/// batches of 100 (every 50 ms), each with a webhook to one of `hosts` fast receivers, except
/// one in a hundred that goes to a receiver that never answers. Returns the latency from the
/// firing's commit to the POST's arrival at a fast receiver, and the fast deliveries per second.
pub fn delivery(backend: Backend, firings: usize, hosts: usize) -> Summary {
    use rampart_delivery::{Delivery, DeliveryConfig};
    use rampart_state::clock::SystemClock;
    use rampart_store::store::FiringRecord;
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::Mutex;

    let (at, dir) = bench_store(backend, "delivery");
    let sent: Arc<Mutex<HashMap<i64, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let hist = Arc::new(Mutex::new(histogram()));
    let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut ports = Vec::new();
    for h in 0..=hosts {
        let hang = h == hosts;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a receiver");
        ports.push(listener.local_addr().expect("addr").port());
        let (sent, hist, received) = (sent.clone(), hist.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (sent, hist, received) = (sent.clone(), hist.clone(), received.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    let mut line = String::new();
                    let _ = reader.read_line(&mut line);
                    let mut len = 0usize;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length: ") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; len];
                    let _ = reader.read_exact(&mut body);
                    if hang {
                        std::thread::sleep(Duration::from_secs(30));
                        return;
                    }
                    let id: i64 = line
                        .split('/')
                        .nth(2)
                        .and_then(|s| s.split(' ').next())
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    if let Some(t0) = sent.lock().ok().and_then(|m| m.get(&id).copied()) {
                        if let Ok(mut h) = hist.lock() {
                            let _ = h.record(t0.elapsed().as_nanos() as u64);
                        }
                    }
                    received.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                });
            }
        });
    }
    let mut store = at.open().expect("store").for_background().expect("tuned");
    let account = store.create_account_with_key("developer", None, 0).expect("account").account_id;
    let mut ids = Vec::with_capacity(firings);
    for i in 0..firings {
        let port = if i % 100 == 99 { ports[hosts] } else { ports[i % hosts] };
        let row = store
            .insert_alert(&webhook_alert(account, true, format!("http://127.0.0.1:{port}/a/{}", i + 1)))
            .expect("alert");
        ids.push(row.id);
    }
    let config = DeliveryConfig { allow_private: true, ..DeliveryConfig::default() };
    let sender = at.open().expect("store").for_background().expect("tuned");
    let reader = at.open().expect("store").for_background().expect("tuned");
    let d = Delivery::start((sender, reader), config, Arc::new(SystemClock)).expect("delivery");
    let wake = d.waker();
    let started = Instant::now();
    for chunk in ids.chunks(100) {
        let now = rampart_state::clock::wall_ms();
        let batch: Vec<FiringRecord> = chunk.iter().map(|&id| FiringRecord::at_price(id, 2, now, false)).collect();
        let t = Instant::now();
        if let Ok(mut m) = sent.lock() {
            for &id in chunk {
                m.insert(id, t);
            }
        }
        store.record_firings(&batch, &rampart_store::text::Texts).expect("record");
        wake.notify_one();
        std::thread::sleep(Duration::from_millis(50));
    }
    let fast = firings - firings / 100;
    let deadline = Instant::now() + Duration::from_secs(60);
    while (received.load(std::sync::atomic::Ordering::Relaxed) as usize) < fast && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    d.stop();
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let n = received.load(std::sync::atomic::Ordering::Relaxed);
    let h = hist.lock().map(|h| h.clone()).unwrap_or_else(|_| histogram());
    Summary::from_hist(
        &format!(
            "firing commit → POST received ({backend:?}; {n} of {fast} fast deliveries, 1% to a hanging receiver)"
        ),
        &h,
        Some(n as f64 / took.as_secs_f64()),
    )
}

/// Decoding one Binance frame with the engine's scanner (no allocation): a combined-stream depth
/// diff and a trade, the documented frames from venues.md. Returns one summary per frame kind.
pub fn binance_decode(frames: usize) -> Vec<Summary> {
    use rampart_engine::feed::binance::{BinanceDecoder, TimeUnit};
    let depth: &[u8] = include_bytes!("../../engine/tests/fixtures/binance/depth_update_combined.json");
    let trade: &[u8] = include_bytes!("../../engine/tests/fixtures/binance/trade.json");
    let mut decoder = BinanceDecoder::new(TimeUnit::Millisecond, 1_000);
    let mut out = Vec::new();
    for (name, frame) in [("binance depth diff (combined stream)", depth), ("binance trade", trade)] {
        let mut h = histogram();
        let started = Instant::now();
        for _ in 0..frames {
            let t0 = Instant::now();
            let ok = decoder.decode(std::hint::black_box(frame)).is_ok();
            let _ = h.record(t0.elapsed().as_nanos() as u64);
            assert!(ok, "documented frame must decode");
        }
        let rate = frames as f64 / started.elapsed().as_secs_f64().max(1e-9);
        out.push(Summary::from_hist(&format!("decode {name}, {} bytes", frame.len()), &h, Some(rate)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_render() {
        let mut h = histogram();
        for v in 1..=1000 {
            h.record(v).expect("in range");
        }
        let s = Summary::from_hist("x", &h, Some(10.0));
        assert_eq!(s.count, 1000);
        assert!(s.p50_ns <= s.p99_ns && s.p99_ns <= s.p999_ns && s.p999_ns <= s.max_ns);
        assert!(s.row().starts_with("| x | 1000 |"));
    }
}
