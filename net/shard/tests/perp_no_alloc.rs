//! The simulated feed's perpetuals allocate nothing while the shard steps them
//! (`rampart_shard::perp`): the spot simulator's ticks applied to a market, the mids read from
//! it, the perpetuals due stepped and their ticks applied to the pairs' books, round after round
//! under a counting global allocator, after start-up; with derivatives alerts of the four kinds
//! on every book, firing as they go (`decisions.md` §17: "no allocation").

use rampart_engine::alert::{AlertSpec, Condition};
use rampart_engine::perp_alert::{
    FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection, PerpCondition,
};
use rampart_engine::perp_book::PerpInterval;
use rampart_engine::sim::{self, Sim, SimConfig};
use rampart_engine::sim_perp::listing;
use rampart_engine::{BookId, Market, Registry, Tick, Venue};
use rampart_shard::perp::{ShardPerps, PERP_CONTRACTS_PER_ROUND_MAX};
use rampart_shard::SIM_PAIRS_PER_ROUND_MAX;
use rampart_testkit::alloc::{self, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
/// Simulated time per round, as a busy shard's loop goes.
const ROUND_MS: i64 = 5;
const SEED: u64 = 3;

#[test]
fn stepping_the_perpetuals_allocates_nothing() {
    let universe = sim::universe(SEED, 150);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("registry");
    let ids: Vec<BookId> = registry.ids().collect();
    let specs: Vec<usize> = (0..universe.len()).collect();
    let mut market = Market::new(registry.len(), &ids, 300, 16);
    let mut spot = Sim::new(SimConfig { seed: SEED, ..SimConfig::default() }, &universe, &registry, &specs);
    let mut ticks: Vec<Tick> = Vec::with_capacity(spot.ticks_per_step_max() * SIM_PAIRS_PER_ROUND_MAX);
    for i in 0..spot.pair_count() {
        spot.start_pair(i, T0, &mut ticks);
        for t in &ticks {
            market.apply(t);
        }
        ticks.clear();
    }
    let listing = listing(SEED, &universe);
    let mut perps = ShardPerps::new(SEED, &universe, &listing, &registry, &specs, &market, T0);
    assert!(perps.len() > 400, "only {} books with a perpetual", perps.len());
    // The books' liquidation feeds, as the shard makes them: fed on every liquidation below.
    let shared = rampart_state::Shared::replica(std::sync::Arc::new(registry.clone()), 1, 0);
    perps.make_feeds(&shared.slots);
    let started = perps.step_all(T0, &market, &shared.slots);
    assert_eq!(started, perps.len(), "every perpetual steps at start-up");
    let mut id = 0;
    let mut alert = |perps: &mut ShardPerps, book: BookId, condition: PerpCondition| {
        id += 1;
        perps.insert_alert(book, AlertSpec { id, condition: Condition::Perp(condition), repeat: true, cooldown_s: 0 })
    };
    let m1 = PerpInterval::parse("1m").expect("1m");
    let m5 = PerpInterval::parse("5m").expect("5m");
    for &book in &ids {
        let order = LiqOrder { direction: LiqDirection::Any, min_usd_cents: 10_000 };
        if !alert(&mut perps, book, PerpCondition::Order(order)) {
            continue;
        }
        let sum = LiqSum { direction: LiqDirection::Long, min_usd_cents: 100_000 };
        assert!(alert(&mut perps, book, PerpCondition::Sum { window: m1, sum }));
        let change = OiChange { direction: OiDirection::Any, pct_micro: 100_000, min_usd: 0 };
        assert!(alert(&mut perps, book, PerpCondition::Oi { window: m5, change }));
        let level = FundingLevel { direction: FundingDirection::Above, pct_micro: 0 };
        assert!(alert(&mut perps, book, PerpCondition::Funding(level)));
    }
    assert_eq!(perps.alert_count(), perps.len() * 4);
    let mut stepped = 0;
    let mut fired = 0usize;
    let mut round = |market: &mut Market, perps: &mut ShardPerps, now: i64| {
        spot.step_due(now, SIM_PAIRS_PER_ROUND_MAX, &mut ticks);
        for t in &ticks {
            market.apply(t);
        }
        ticks.clear();
        let n = perps.step(now, market, &shared.slots, &mut |_, f| {
            assert!(f.perp().is_some(), "{f:?}");
            fired += 1;
        });
        assert!(n <= PERP_CONTRACTS_PER_ROUND_MAX);
        stepped += n;
    };
    let ((), allocations) = alloc::count(|| {
        for r in 1..=4_000 {
            round(&mut market, &mut perps, T0 + r * ROUND_MS);
        }
    });
    assert_eq!(allocations, Some(0), "allocations while stepping the perpetuals");
    assert!(fired > 20, "only {fired} firings of {} alerts in 20 s", perps.alert_count());
    // 20 simulated seconds: every contract about once a second.
    assert!(stepped >= perps.len() * 18, "{stepped} steps of {} contracts in 20 s", perps.len());
    let btc = registry.find(Venue::Okx, "BTCUSDT").expect("BTCUSDT on OKX");
    let book = perps.book(btc).expect("BTCUSDT's perpetual on OKX");
    assert_eq!(book.contract(), "BTC-USDT-SWAP");
    let now = T0 + 4_000 * ROUND_MS;
    assert!(book.mark().is_some() && book.oi(now).is_some_and(|o| !o.stale));
    assert!(book.funding(now).is_some_and(|f| !f.stale));
}
