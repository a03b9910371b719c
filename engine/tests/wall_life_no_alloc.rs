//! Proves the walls' lives allocate nothing once built: the simulated market's ticks are applied
//! (each trade reaching its book's `WallLife`), every book is scanned for walls every 2 s of
//! simulated time and the scan handed to `WallLife::on_scan`, under a counting global allocator,
//! after a warm-up; walls open, age and end (filled and pulled) in the counted part and the count
//! stays zero. A second part fills one book's ring past its bound under the same count.

use rampart_engine::sim::{self, Sim, SimConfig};
use rampart_engine::wall::{self, Wall, WallScratch, WALLS_MAX};
use rampart_engine::wall_life::{Gone, WallLife, WALL_HISTORY_MAX};
use rampart_engine::{BookId, Market, Price, Qty, Registry, Side, Venue};
use rampart_testkit::alloc::{self, Counting};

// The count is per thread, so the tests of this file may run side by side.
#[global_allocator]
static GLOBAL: Counting = Counting;

/// Pairs stepped per round, as the shard bounds it.
const PAIRS_PER_ROUND_MAX: usize = 64;

#[test]
fn scans_and_trades_through_the_walls_lives_allocate_nothing() {
    let now = 1_795_183_387_000_i64;
    let universe = sim::universe(3, 40);
    let registry = Registry::new(sim::instruments(&universe, &[Venue::Binance])).expect("registry");
    let ids: Vec<BookId> = registry.ids().collect();
    let mut market = Market::new(registry.len(), &ids, 1_000, 64);
    let pairs: Vec<usize> = (0..universe.len()).collect();
    let config = SimConfig { wall_spawn_chance: 0.05, ..SimConfig::default() };
    let mut sim = Sim::new(config, &universe, &registry, &pairs);
    let mut ticks = Vec::with_capacity(sim.ticks_per_step_max() * PAIRS_PER_ROUND_MAX);
    for i in 0..sim.pair_count() {
        drop(sim.history(i, now, 64));
        sim.start_pair(i, now, &mut ticks);
        for t in &ticks {
            market.apply(t);
        }
        ticks.clear();
    }
    let mut scratch = WallScratch::new(1_000);
    let mut out: Vec<Wall> = Vec::with_capacity(WALLS_MAX);
    let (mut filled, mut pulled) = (0u64, 0u64);
    let mut run = |from: i64, rounds: i64| {
        for r in 0..rounds {
            let t = from + r * 50;
            sim.step_due(t, PAIRS_PER_ROUND_MAX, &mut ticks);
            for tick in &ticks {
                market.apply(tick);
            }
            ticks.clear();
            // Every 2 s, every book: its scan into its walls' lives.
            if r % 40 != 0 {
                continue;
            }
            for state in market.books_mut() {
                let price =
                    if state.last_price.0 > 0 { state.last_price } else { state.book.mid().unwrap_or_default() };
                wall::scan(&state.book, price, t, 10.0, &mut state.walls, &mut scratch, &mut out);
                for e in state.wall_life.on_scan(t, &out, Some(1.0)) {
                    match e.gone {
                        Gone::Filled => filled += 1,
                        Gone::Pulled => pulled += 1,
                    }
                }
            }
        }
    };
    run(now, 2_000);
    // 12 000 rounds of 50 ms: 10 minutes of simulated market, 300 scans of every book.
    let ((), allocations) = alloc::count(|| run(now + 200_000, 12_000));
    assert!(filled + pulled > 50, "only {filled} filled and {pulled} pulled: walls did not come and go");
    assert_eq!(allocations, Some(0), "allocations over the scans and trades");
}

#[test]
fn the_ring_past_its_bound_allocates_nothing() {
    let mut life = WallLife::new();
    let wall = |k: i64| Wall {
        side: if k % 2 == 0 { Side::Bid } else { Side::Ask },
        price: Price(1_000_000 + k),
        qty: Qty(1_000),
        ratio: 20.0,
        dist_pct: 1.0,
        age_ms: 0,
    };
    let ((), allocations) = alloc::count(|| {
        for k in 0..(3 * WALL_HISTORY_MAX as i64) {
            let t = k * 4_000;
            let walls = [wall(k)];
            life.on_scan(t, &walls, Some(1.0));
            life.on_trade(Price(1_000_000 + k), Qty(10));
            life.on_scan(t + 2_000, &[], Some(1.0));
        }
    });
    assert_eq!(allocations, Some(0));
    assert_eq!(life.ended().count(), WALL_HISTORY_MAX);
    assert_eq!(life.ended_total(), 3 * WALL_HISTORY_MAX as u64);
}
