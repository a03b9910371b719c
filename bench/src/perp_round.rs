//! One shard core's simulated round with the perpetuals of decisions §17 (issue #61): the spot
//! simulator's ticks applied to the books, then the perpetuals due stepped, applied to their
//! `PerpBook`s and handed to their derivatives alerts (`rampart_shard::perp::ShardPerps`), as the
//! shard's loop does on `--feed sim`. Measured three ways in one run: spot only (the baseline),
//! with the perpetuals, and with the perpetuals and `alerts` derivatives alerts held (a thousand of
//! them `*`: on every book of their venue), so the ratio says what §17's alerts cost the tick path.
//!
//! Each variant runs the same simulated seconds from the same seed; the figure is spot ticks
//! applied per second of the core's busy time (the perpetuals' work counted in it), and the
//! per-round time as a histogram.

use std::time::{Duration, Instant};

use rampart_engine::alert::{AlertSpec, Condition};
use rampart_engine::perp_alert::{
    FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection, PerpCondition,
};
use rampart_engine::perp_book::PerpInterval;
use rampart_engine::sim::{self, Rng, Sim, SimConfig};
use rampart_engine::sim_perp_listing::listing;
use rampart_engine::{BookId, Market, Registry, Tick, Venue};
use rampart_shard::perp::ShardPerps;
use rampart_shard::SIM_PAIRS_PER_ROUND_MAX;

use crate::{histogram, Summary};

/// 2026-01-01T00:00:00Z.
pub(crate) const T0: i64 = 1_767_225_600_000;
/// Simulated time per round: a busy shard's loop.
const SIM_ROUND_MS: i64 = 5;
pub(crate) const SEED: u64 = 17;

/// What a variant runs besides the spot ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Perps {
    /// Spot only.
    Off,
    /// The perpetuals, no alert.
    On,
    /// The perpetuals and this many derivatives alerts (1 000 of them `*`).
    WithAlerts(usize),
}

/// A seeded simulated market of `pairs` pairs on the four venues, every pair started at
/// [`T0`], with its simulator and tick buffer (the perpetual benchmarks' common start).
pub(crate) struct Started {
    pub(crate) universe: Vec<sim::PairSpec>,
    pub(crate) registry: Registry,
    pub(crate) ids: Vec<BookId>,
    pub(crate) specs: Vec<usize>,
    pub(crate) market: Market,
    pub(crate) spot: Sim,
    pub(crate) ticks: Vec<Tick>,
}

/// See [`Started`].
pub(crate) fn started(pairs: usize) -> Started {
    let universe = sim::universe(SEED, pairs);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("simulated registry is valid");
    let ids: Vec<BookId> = registry.ids().collect();
    let specs: Vec<usize> = (0..universe.len()).collect();
    let mut market = Market::new(registry.len(), &ids, 1_000, 64);
    let mut spot = Sim::new(SimConfig { seed: SEED, ..SimConfig::default() }, &universe, &registry, &specs);
    let mut ticks: Vec<Tick> = Vec::with_capacity(spot.ticks_per_step_max() * SIM_PAIRS_PER_ROUND_MAX);
    for i in 0..spot.pair_count() {
        spot.start_pair(i, T0, &mut ticks);
        ticks.iter().for_each(|t| {
            market.apply(t);
        });
        ticks.clear();
    }
    Started { universe, registry, ids, specs, market, spot, ticks }
}

/// `seconds` simulated seconds of a `pairs`-pair market (all four venues) on one core.
pub fn perp_round(pairs: usize, seconds: i64, perps: Perps) -> Summary {
    let Started { universe, registry, ids: _, specs, mut market, mut spot, mut ticks } = started(pairs);
    // The books' liquidation feeds, as the shard makes and feeds them.
    let shared = rampart_state::Shared::replica(std::sync::Arc::new(registry.clone()), 1, 0);
    let mut shard_perps = (perps != Perps::Off).then(|| {
        let mut p = ShardPerps::new(SEED, &universe, &listing(SEED, &universe), &registry, &specs, &market, T0);
        p.make_feeds(&shared.slots);
        p.step_all(T0, &market, &shared.slots);
        p
    });
    let held = match (perps, shard_perps.as_mut()) {
        (Perps::WithAlerts(n), Some(p)) => load_alerts(p, &registry, n),
        _ => 0,
    };
    let mut h = histogram();
    let (mut busy, mut applied, mut fired) = (Duration::ZERO, 0u64, 0u64);
    for r in 1..=(seconds * 1_000 / SIM_ROUND_MS) {
        let now = T0 + r * SIM_ROUND_MS;
        let t0 = Instant::now();
        spot.step_due(now, SIM_PAIRS_PER_ROUND_MAX, &mut ticks);
        for t in &ticks {
            std::hint::black_box(market.apply(t));
        }
        market.clear_firings();
        applied += ticks.len() as u64;
        ticks.clear();
        if let Some(p) = shard_perps.as_mut() {
            p.step(now, &market, &shared.slots, &mut |_, f| {
                std::hint::black_box(f);
                fired += 1;
            });
        }
        let took = t0.elapsed();
        busy += took;
        let _ = h.record(took.as_nanos() as u64);
    }
    let rate = applied as f64 / busy.as_secs_f64().max(1e-9);
    let name = match perps {
        Perps::Off => format!("sim round, spot only ({pairs} pairs × 4 venues; rate: spot ticks/s)"),
        Perps::On => format!("sim round with the perpetuals ({} contracts)", shard_perps.map_or(0, |p| p.len())),
        Perps::WithAlerts(_) => format!("sim round with the perpetuals and {held} derivatives alerts ({fired} fired)"),
    };
    Summary::from_hist(&name, &h, Some(rate))
}

/// Puts `n` derivatives alerts on the books with a perpetual: 1 000 `*` alerts (250 a venue, each
/// on every book of its venue) and the rest one-pair, of the four kinds in turn, with thresholds
/// that mostly hold still (as users set them: far from today's values). Returns the alerts held
/// over all books (a `*` alert once per book).
fn load_alerts(perps: &mut ShardPerps, registry: &Registry, n: usize) -> usize {
    let books: Vec<BookId> = registry.ids().filter(|&b| perps.book(b).is_some()).collect();
    let mut rng = Rng::new(SEED);
    let universal = 1_000.min(n);
    for k in 0..n {
        let id = k as u64 + 1;
        let condition = condition(k, &mut rng);
        let spec = AlertSpec { id, condition: Condition::Perp(condition), repeat: true, cooldown_s: 0 };
        if k < universal {
            let venue = Venue::ALL[k % Venue::ALL.len()];
            for &b in books.iter().filter(|&&b| registry.get(b).venue == venue) {
                perps.insert_alert(b, spec);
            }
        } else {
            perps.insert_alert(books[rng.below(books.len() as u64) as usize], spec);
        }
    }
    perps.alert_count()
}

fn condition(k: usize, rng: &mut Rng) -> PerpCondition {
    let windows = [PerpInterval::parse("5m"), PerpInterval::parse("1h"), PerpInterval::parse("1d")];
    let window = windows[rng.below(3) as usize].expect("a window");
    let usd = 10_000 + rng.below(10_000_000);
    match k % 4 {
        0 => PerpCondition::Order(LiqOrder { direction: LiqDirection::Any, min_usd_cents: usd * 100 }),
        1 => PerpCondition::Sum { window, sum: LiqSum { direction: LiqDirection::Long, min_usd_cents: usd * 1_000 } },
        2 => {
            let pct_micro = 1_000_000 + rng.below(20_000_000) as i64;
            PerpCondition::Oi { window, change: OiChange { direction: OiDirection::Any, pct_micro, min_usd: 0 } }
        }
        _ => {
            let pct_micro = 50_000 + rng.below(200_000) as i64;
            PerpCondition::Funding(FundingLevel { direction: FundingDirection::Above, pct_micro })
        }
    }
}
