//! Proves the tick path allocates nothing: simulated ticks are generated and applied to a
//! market (books, candles, level consumption, alert evaluation) under a counting global
//! allocator, after a warm-up, and the count must stay zero.

mod common;

use common::{ALLOCATIONS, COUNTING};

use std::sync::atomic::Ordering;

use rampart_engine::alert::{AlertSpec, Condition, Cross, Move};
use rampart_engine::sim::{self, Sim, SimConfig};
use rampart_engine::{BookId, Market, Price, Registry, Timeframe, Venue};

#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

/// Pairs stepped per round, as the shard bounds it.
const PAIRS_PER_ROUND_MAX: usize = 64;

#[test]
fn generating_and_applying_ticks_allocates_nothing() {
    let now = 1_795_183_387_000_i64;
    let universe = sim::universe(3, 120);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("registry");
    let ids: Vec<BookId> = registry.ids().collect();
    let mut market = Market::new(registry.len(), &ids, 1_000, 512);
    let pairs: Vec<usize> = (0..universe.len()).collect();
    let config = SimConfig { wall_spawn_chance: 0.02, ..SimConfig::default() };
    let mut sim = Sim::new(config, &universe, &registry, &pairs);
    let mut ticks = Vec::with_capacity(sim.ticks_per_step_max() * PAIRS_PER_ROUND_MAX);
    for i in 0..sim.pair_count() {
        let history = sim.history(i, now, 512);
        for id in sim.pair_books(i).collect::<Vec<_>>() {
            if let Some(state) = market.get_mut(id) {
                state.candles = history.clone();
            }
        }
        sim.start_pair(i, now, &mut ticks);
        for t in &ticks {
            market.apply(t);
        }
        ticks.clear();
    }
    // Alerts on every book, close to the price so they fire, re-arm and fire again: repeating
    // and one-shot price alerts on both sides, and percent alerts on every window.
    let mut next_id = 0u64;
    for id in registry.ids() {
        let p = market.get(id).map(|s| s.book.mid().unwrap_or_default().0).unwrap_or(0);
        for k in 1..=20i64 {
            for (cross, level) in [(Cross::Above, p + p * k / 20_000), (Cross::Below, p - p * k / 20_000)] {
                next_id += 1;
                let condition = Condition::Price { cross, level: Price(level) };
                market.insert_alert(id, AlertSpec { id: next_id, condition, repeat: k % 4 != 0 });
            }
        }
        for window in Timeframe::ALL {
            for dir in [Move::Up, Move::Down, Move::Any] {
                next_id += 1;
                let condition = Condition::Pct { dir, hundredths: 10, window };
                market.insert_alert(id, AlertSpec { id: next_id, condition, repeat: true });
            }
        }
    }
    // Warm up, then count: candle roll-overs, wall churn, book moves and alert firings all
    // happen in both.
    let mut firings = 0u64;
    let mut run = |from: i64, rounds: i64| -> u64 {
        let mut applied = 0;
        for r in 0..rounds {
            let t = from + r * 50;
            sim.step_due(t, PAIRS_PER_ROUND_MAX, &mut ticks);
            for tick in &ticks {
                market.apply(tick);
                firings += market.firings().len() as u64;
                market.clear_firings();
            }
            applied += ticks.len() as u64;
            ticks.clear();
        }
        applied
    };
    run(now, 200);
    // The counter itself works: one deliberate allocation is seen.
    COUNTING.with(|c| c.set(true));
    drop(std::hint::black_box(Vec::<u8>::with_capacity(16)));
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCATIONS.swap(0, Ordering::Relaxed), 1);
    COUNTING.with(|c| c.set(true));
    // 20 000 rounds of 50 ms: about 17 minutes of simulated market, crossing many 5m buckets.
    let applied = run(now + 10_000, 20_000);
    COUNTING.with(|c| c.set(false));
    assert!(applied > 100_000, "only {applied} ticks applied");
    assert!(firings > 10_000, "only {firings} alert firings: the evaluation path was not exercised");
    assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0, "allocations on the tick path over {applied} ticks");
}
