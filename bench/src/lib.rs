//! rampart's benchmarks as library functions, so the `rampart-bench` binary runs them in full
//! and the test suite runs them in a cheap mode that keeps them compiling and working.
//!
//! Every latency is recorded in an HDR histogram (nanoseconds) and reported as p50, p99,
//! p99.9 and max.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rampart_engine::sim::{self, Sim, SimConfig};
use rampart_engine::{BookId, Market, Registry, Venue};
use rampart_net::shard::{Command, ShardConfig, ShardSet};

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
