//! The simulated market's perpetuals (`engine/src/sim_perp.rs`, decisions §17 "The simulator"):
//! the listing's properties, determinism from the seed, the funding and premium bounds, a move
//! that liquidates longs, the control events, delisting, and that stepping allocates nothing.
//! Every test uses fixed seeds and names them in its failure messages.

use std::collections::{BTreeSet, HashMap};

use rampart_engine::perp_window::PositionSide;
use rampart_engine::sim::{self, PairSpec, Sim, SimConfig};
use rampart_engine::sim_perp::{
    listing, ControlError, PerpId, PerpListing, PerpTick, PerpTickKind, SimPerp, SimPerpConfig, FUNDING_INTEREST,
    FUNDING_RATE_MAX, PREMIUM_MAX,
};
use rampart_engine::{BookId, Market, Price, Registry, Tick, Venue};
use rampart_testkit::alloc::{self, Counting};

// The count is per thread, so the tests of this file may run side by side.
#[global_allocator]
static GLOBAL: Counting = Counting;

/// A Unix time just before a UTC midnight, so runs cross 1 h, 4 h and 8 h settlements.
const NOW: i64 = 1_795_219_000_000;
const HOUR_MS: i64 = 3_600_000;

struct World {
    universe: Vec<PairSpec>,
    registry: Registry,
    listing: PerpListing,
}

fn world(seed: u64, pairs: usize) -> World {
    let universe = sim::universe(seed, pairs);
    let registry = Registry::new(sim::instruments(&universe, &Venue::ALL)).expect("registry");
    let listing = listing(seed, &universe);
    World { universe, registry, listing }
}

/// Every book's mid at its pair's configured price (a flat market).
fn flat_mids(w: &World) -> Vec<Price> {
    w.registry
        .ids()
        .map(|id| {
            let ins = w.registry.get(id);
            let spec = w.universe.iter().find(|s| s.base == ins.base && s.quote == ins.quote).expect("spec");
            Price::from_f64(spec.price)
        })
        .collect()
}

fn sim_perp(w: &World, seed: u64, orphans: bool, pairs: &[usize]) -> SimPerp {
    SimPerp::new(&SimPerpConfig { seed, orphans }, &w.universe, &w.listing, &w.registry, pairs)
}

/// Steps `perp` once a second for `secs` seconds from `from` at fixed mids, collecting the ticks.
fn run_flat(perp: &mut SimPerp, mids: &[Price], from: i64, secs: i64) -> Vec<PerpTick> {
    let mut all = Vec::new();
    let mut out = Vec::with_capacity(perp.contract_count() * perp.ticks_per_step_max());
    for s in 0..secs {
        perp.step_due(from + s * 1_000, mids, usize::MAX, &mut out);
        all.extend_from_slice(&out);
        out.clear();
    }
    all
}

/// The embedded feed's path: the spot simulator's ticks applied to a market, the mids read from
/// it, the perpetuals stepped. `rounds` rounds of 100 ms.
fn run_real(seed: u64, rounds: i64) -> Vec<PerpTick> {
    let w = world(7, 80);
    let ids: Vec<BookId> = w.registry.ids().collect();
    let pairs: Vec<usize> = (0..w.universe.len()).collect();
    let mut market = Market::new(w.registry.len(), &ids, 300, 16);
    let mut spot = Sim::new(SimConfig { seed, ..SimConfig::default() }, &w.universe, &w.registry, &pairs);
    let mut ticks: Vec<Tick> = Vec::new();
    for i in 0..spot.pair_count() {
        spot.start_pair(i, NOW, &mut ticks);
    }
    for t in ticks.drain(..) {
        market.apply(&t);
    }
    let listing = listing(seed, &w.universe);
    let mut perp = SimPerp::new(&SimPerpConfig { seed, orphans: true }, &w.universe, &listing, &w.registry, &pairs);
    let mut mids = vec![Price::ZERO; w.registry.len()];
    let mut out = Vec::new();
    let mut all = Vec::new();
    for r in 0..rounds {
        let now = NOW + r * 100;
        spot.step_due(now, usize::MAX, &mut ticks);
        for t in ticks.drain(..) {
            market.apply(&t);
        }
        perp.read_mids(&market, &mut mids);
        perp.step_due(now, &mids, usize::MAX, &mut out);
        all.append(&mut out);
    }
    all
}

#[test]
fn same_seed_same_ticks_another_seed_others() {
    let a = run_real(11, 1_200);
    let b = run_real(11, 1_200);
    assert!(a.len() > 10_000, "seed 11: only {} ticks", a.len());
    assert_eq!(a, b, "seed 11 twice");
    let c = run_real(12, 1_200);
    assert_ne!(a, c, "seeds 11 and 12");
    // Every perpetual steps about once a second (120 s), mark near the spot mid.
    let mut per: HashMap<PerpId, usize> = HashMap::new();
    for t in &a {
        if let PerpTickKind::Perp { mark, .. } = t.kind {
            *per.entry(t.perp).or_default() += 1;
            assert!(mark.0 > 0);
        }
    }
    assert!(per.values().all(|&n| (119..=122).contains(&n)), "seed 11: steps per perp {:?}", per.values());
    assert!(a.iter().any(|t| t.book.is_none()), "the orphan perpetuals tick too");
}

#[test]
fn splitting_the_pairs_over_shards_changes_no_contract() {
    let w = world(7, 60);
    let mids = flat_mids(&w);
    let all: Vec<usize> = (0..w.universe.len()).collect();
    let (even, odd): (Vec<usize>, Vec<usize>) = all.iter().partition(|&&i| i % 2 == 0);
    let whole = run_flat(&mut sim_perp(&w, 21, true, &all), &mids, NOW, 120);
    let mut split = run_flat(&mut sim_perp(&w, 21, true, &even), &mids, NOW, 120);
    split.extend(run_flat(&mut sim_perp(&w, 21, false, &odd), &mids, NOW, 120));
    let key = |t: &PerpTick| (t.perp, t.ts_ms);
    let (mut a, mut b) = (whole, split);
    a.sort_by_key(key);
    b.sort_by_key(key);
    assert_eq!(a, b, "seed 21");
}

#[test]
fn the_listing_has_the_shapes_a_consumer_must_handle() {
    for seed in [7u64, 8, 9] {
        let w = world(seed, 500);
        let l = &w.listing;
        assert_eq!(*l, listing(seed, &w.universe), "seed {seed}: deterministic");
        for venue in Venue::ALL {
            let contracts: Vec<_> = l.venue(venue).map(|(_, c)| c).collect();
            // Every contract is a USDT perpetual of a USDT pair listed on the venue, but one.
            let orphans: Vec<_> = contracts.iter().filter(|c| c.spot_symbol.is_none()).collect();
            assert_eq!(orphans.len(), 1, "seed {seed} {venue}: one perpetual without a spot pair");
            let o = orphans[0];
            assert!(o.spec.is_none());
            assert!(w.universe.iter().all(|s| s.base != o.base), "seed {seed}: orphan base {} is a pair", o.base);
            for c in &contracts {
                assert_eq!(c.quote, "USDT");
                match venue {
                    Venue::Okx => assert_eq!(c.symbol, format!("{}-USDT-SWAP", c.base), "seed {seed}"),
                    _ => assert_eq!(c.symbol, format!("{}USDT", c.base), "seed {seed}"),
                }
                if venue == Venue::Okx {
                    assert_eq!(c.multiplier, 1, "OKX expresses size in ctVal");
                } else {
                    assert_eq!(c.ct_val.to_f64(), 1.0);
                }
                if let Some(spot) = &c.spot_symbol {
                    let spec = &w.universe[c.spec.expect("spec")];
                    assert_eq!(*spot, spec.symbol());
                    assert_eq!(spec.quote, "USDT");
                    assert!(w.registry.find(venue, spot).is_some(), "seed {seed} {venue}: {spot} not on spot");
                    let expected_base =
                        if c.multiplier == 1 { c.base.clone() } else { format!("{}{}", c.multiplier, spec.base) };
                    assert_eq!(c.base, expected_base);
                    if venue == Venue::Okx {
                        let value = c.ct_val.to_f64() * spec.price;
                        assert!((100.0..1_000.0).contains(&value), "seed {seed}: {} ctVal worth {value}", c.symbol);
                    }
                }
            }
            // Some USDT pairs of the venue have no perpetual; no other quote has one.
            let with: BTreeSet<usize> = contracts.iter().filter_map(|c| c.spec).collect();
            let without = (0..w.universe.len())
                .filter(|&i| w.universe[i].venues[venue.index()] && w.universe[i].quote == "USDT" && !with.contains(&i))
                .count();
            assert!((1..30).contains(&without), "seed {seed} {venue}: {without} USDT pairs without a perpetual");
            assert!(with.iter().all(|&i| w.universe[i].quote == "USDT"));
            // Funding every 8, 4 and 1 hours.
            let intervals: BTreeSet<u8> = contracts.iter().map(|c| c.funding_interval_h).collect();
            assert_eq!(intervals, BTreeSet::from([1, 4, 8]), "seed {seed} {venue}");
            assert!(contracts.iter().filter(|c| c.funding_interval_h == 8).count() > contracts.len() * 3 / 4);
        }
        // A multiplier contract on Binance, Bybit and Bitget; the same one on OKX by ctVal.
        let multiplied: Vec<_> = l.venue(Venue::Binance).map(|(_, c)| c).filter(|c| c.multiplier == 1_000).collect();
        assert!((1..=2).contains(&multiplied.len()), "seed {seed}: {} multiplier contracts", multiplied.len());
        for m in &multiplied {
            let spec = &w.universe[m.spec.expect("spec")];
            assert!(
                spec.price < 1e-3
                    && m.base == format!("1000{}", spec.base)
                    && m.symbol == format!("1000{}USDT", spec.base)
            );
            for venue in [Venue::Bybit, Venue::Bitget] {
                let id = l.find(venue, &m.symbol).expect("same contract");
                assert_eq!(l.get(id).multiplier, 1_000);
            }
            let okx = l.get(l.of_spec(Venue::Okx, m.spec.expect("spec")).expect("OKX lists it"));
            assert_eq!(okx.symbol, format!("{}-USDT-SWAP", spec.base));
            assert!(okx.ct_val.to_f64() >= 1e6);
            // Units: the wire quotes per 1000 and counts in 1000s (OKX in contracts).
            assert_eq!(m.venue_price(Price(12)), Price(12_000));
            assert_eq!(m.venue_qty(5_000.0), 5.0);
            assert!((okx.venue_qty(okx.ct_val.to_f64() * 3.0) - 3.0).abs() < 1e-9);
        }
        // Lookups by the venue's spelling and by the spot pair.
        let btc = l.find(Venue::Okx, "btc-usdt-swap").expect("OKX BTC");
        assert_eq!(l.find(Venue::Okx, "BTCUSDT"), Some(btc));
        assert_eq!(l.get(btc).ct_val.to_f64(), 0.01);
        assert_eq!(l.find(Venue::Binance, "ETHBTC"), None, "no perpetual for a BTC-quoted pair");
    }
    let u = sim::universe(7, 500);
    assert_ne!(listing(7, &u), listing(8, &u), "another seed, another listing");
}

#[test]
fn funding_is_clamped_and_settles_on_the_utc_grid() {
    let w = world(7, 120);
    let pairs: Vec<usize> = (0..w.universe.len()).collect();
    let mut perp = sim_perp(&w, 5, true, &pairs);
    let mids = flat_mids(&w);
    // Two hours crossing midnight: every rate bounded, every next time on the grid.
    let ticks = run_flat(&mut perp, &mids, NOW, 2 * 3_600);
    let mut seen_intervals = BTreeSet::new();
    let mut perps = 0;
    for t in &ticks {
        if let PerpTickKind::Perp { funding_rate, interval_h, next_ms, .. } = t.kind {
            perps += 1;
            let iv = i64::from(interval_h) * HOUR_MS;
            seen_intervals.insert(interval_h);
            assert!(funding_rate.abs() <= FUNDING_RATE_MAX, "seed 5: {funding_rate}");
            assert!((funding_rate - FUNDING_INTEREST).abs() <= PREMIUM_MAX + 1e-8, "seed 5: rate {funding_rate}");
            assert!(((funding_rate * 1e8).round() - funding_rate * 1e8).abs() < 1e-6, "8 decimals: {funding_rate}");
            assert_eq!(next_ms % iv, 0, "seed 5: next {next_ms} off the {interval_h} h grid");
            assert!(next_ms > t.ts_ms && next_ms <= t.ts_ms + iv, "seed 5: next {next_ms} at {}", t.ts_ms);
        }
    }
    assert!(perps > 1_000_000, "{perps}");
    assert_eq!(seen_intervals, BTreeSet::from([1, 4, 8]));
    // Injected rates beyond the bound are clamped; an injected interval moves the grid.
    let btc = w.listing.find(Venue::Bybit, "BTCUSDT").expect("bybit btc");
    let mut now = NOW + 2 * 3_600_000;
    let mut out = Vec::with_capacity(perp.contract_count() * perp.ticks_per_step_max());
    let mut funding_of = |perp: &mut SimPerp, now: i64| {
        out.clear();
        perp.step_due(now, &mids, usize::MAX, &mut out);
        out.iter()
            .find_map(|t| match t.kind {
                PerpTickKind::Perp { funding_rate, interval_h, next_ms, .. } if t.perp == btc => {
                    Some((funding_rate, interval_h, next_ms))
                }
                _ => None,
            })
            .expect("btc stepped")
    };
    perp.set_funding(btc, 0.02, None).expect("set");
    assert_eq!(funding_of(&mut perp, now).0, FUNDING_RATE_MAX);
    perp.set_funding(btc, -1.0, None).expect("set");
    now += 1;
    assert_eq!(funding_of(&mut perp, now).0, -FUNDING_RATE_MAX, "taken at the very next call");
    perp.set_funding(btc, 0.003, Some(4)).expect("set");
    now += 1;
    let (rate, interval_h, next_ms) = funding_of(&mut perp, now);
    assert!((rate - 0.003).abs() < 1e-8 && interval_h == 4 && next_ms % (4 * HOUR_MS) == 0, "{rate} {interval_h}");
    assert_eq!(perp.view(btc).map(|v| v.interval_h), Some(4));
    // It moves with the premium until its settlement, then the model's rate returns.
    let (later, _, _) = funding_of(&mut perp, now + 1_000);
    assert!((later - 0.003).abs() < 2.0 * PREMIUM_MAX, "{later}");
    let (after, _, _) = funding_of(&mut perp, next_ms + 500);
    assert!((after - FUNDING_INTEREST).abs() <= PREMIUM_MAX + 1e-8, "after the settlement: {after}");
    assert_eq!(perp.set_funding(btc, 0.001, Some(5)), Err(ControlError::OutOfRange));
    assert_eq!(perp.set_funding(btc, f64::NAN, None), Err(ControlError::OutOfRange));
}

#[test]
fn the_premium_stays_within_its_bound_and_moves() {
    let w = world(9, 60);
    let mut perp = sim_perp(&w, 9, false, &(0..w.universe.len()).collect::<Vec<_>>());
    let mids = flat_mids(&w);
    let ticks = run_flat(&mut perp, &mids, NOW, 3 * 3_600);
    let mut premiums = Vec::new();
    for t in &ticks {
        if let PerpTickKind::Perp { mark, .. } = t.kind {
            let c = w.listing.get(t.perp);
            let mid = mids[t.book.expect("book").index()].to_f64();
            let premium = mark.to_f64() / mid - 1.0;
            let rounding = c.tick.to_f64() / mid;
            assert!(premium.abs() <= PREMIUM_MAX + rounding, "seed 9: {} premium {premium}", c.symbol);
            if rounding < 1e-5 {
                premiums.push(premium);
            }
        }
    }
    let n = premiums.len() as f64;
    let mean = premiums.iter().sum::<f64>() / n;
    let std = (premiums.iter().map(|p| (p - mean) * (p - mean)).sum::<f64>() / n).sqrt();
    assert!(mean.abs() < 0.00005, "seed 9: mean premium {mean}");
    assert!((0.0001..0.0004).contains(&std), "seed 9: premium spread {std}");
}

/// Liquidations of `perp` in `ticks`: (longs, shorts, USD).
fn liquidations(ticks: &[PerpTick], perp: PerpId) -> (usize, usize, f64) {
    let mut r = (0, 0, 0.0);
    for t in ticks.iter().filter(|t| t.perp == perp) {
        if let PerpTickKind::Liquidation { side, price, qty } = t.kind {
            match side {
                PositionSide::Long => r.0 += 1,
                PositionSide::Short => r.1 += 1,
            }
            r.2 += price.to_f64() * qty;
        }
    }
    r
}

#[test]
fn a_one_percent_drop_in_a_minute_liquidates_longs() {
    let w = world(7, 60);
    let mut perp = sim_perp(&w, 3, false, &[0, 1]);
    let mut mids = flat_mids(&w);
    let quiet = run_flat(&mut perp, &mids, NOW, 600);
    // Both BTC and ETH fall 1 % over a minute on every venue, then stay there for 30 s.
    let books: Vec<BookId> = ["BTCUSDT", "ETHUSDT"]
        .iter()
        .flat_map(|s| Venue::ALL.into_iter().filter_map(|v| w.registry.find(v, s)))
        .collect();
    let start: Vec<Price> = books.iter().map(|b| mids[b.index()]).collect();
    let mut out = Vec::new();
    let mut burst = Vec::new();
    for s in 1..=90 {
        let f = 1.0 - 0.01 * (s.min(60) as f64 / 60.0);
        for (b, p) in books.iter().zip(&start) {
            mids[b.index()] = Price::from_f64(p.to_f64() * f);
        }
        perp.step_due(NOW + 600_000 + s * 1_000, &mids, usize::MAX, &mut out);
        burst.append(&mut out);
    }
    let (mut quiet_n, mut longs, mut shorts) = (0, 0, 0);
    for venue in [Venue::Binance, Venue::Bybit, Venue::Okx] {
        for sym in ["BTCUSDT", "ETHUSDT"] {
            let id = w.listing.find(venue, sym).expect("perp");
            let q = liquidations(&quiet, id);
            quiet_n += q.0 + q.1;
            let b = liquidations(&burst, id);
            longs += b.0;
            shorts += b.1;
        }
    }
    // Six perpetuals: quiet, about one liquidation each per 3 minutes; the drop brings ~20 each.
    assert!(quiet_n < 40, "seed 3: {quiet_n} liquidations in 10 quiet minutes");
    assert!(longs >= 60, "seed 3: {longs} long liquidations in the 1 % drop");
    assert!(longs >= 10 * shorts.max(1), "seed 3: {longs} longs, {shorts} shorts");
    assert!(
        longs as f64 / 1.5 > 10.0 * quiet_n as f64 / 10.0,
        "seed 3: per minute, burst {longs}/1.5 vs quiet {quiet_n}/10"
    );
    // Bitget publishes none, though its OI drops with them.
    assert!(
        quiet
            .iter()
            .chain(&burst)
            .all(|t| { w.listing.get(t.perp).venue != Venue::Bitget || matches!(t.kind, PerpTickKind::Perp { .. }) }),
        "a Bitget liquidation was emitted"
    );
}

#[test]
fn control_events_appear_at_the_next_step() {
    let w = world(7, 60);
    let pairs: Vec<usize> = (0..w.universe.len()).collect();
    let mut perp = sim_perp(&w, 4, false, &pairs);
    let mids = flat_mids(&w);
    run_flat(&mut perp, &mids, NOW, 10);
    // The time of the last step: no contract is due again yet.
    let now = NOW + 9_000;
    let btc = w.listing.find(Venue::Binance, "BTCUSDT").expect("btc");
    let eth = w.listing.find(Venue::Okx, "ETHUSDT").expect("eth");
    let oi_before = perp.view(eth).expect("stepped").oi;
    perp.inject_liquidation(btc, PositionSide::Long, 250_000.0).expect("liq");
    perp.inject_oi_jump(eth, 20.0).expect("oi");
    let mut out = Vec::with_capacity(perp.contract_count() * perp.ticks_per_step_max());
    // `now` is before every contract's next scheduled step: only the two with events step.
    assert_eq!(perp.step_due(now, &mids, usize::MAX, &mut out), 2);
    let liq = out
        .iter()
        .find_map(|t| match t.kind {
            PerpTickKind::Liquidation { side, price, qty } if t.perp == btc => Some((side, price, qty)),
            _ => None,
        })
        .expect("the injected liquidation");
    let mark = perp.view(btc).expect("view").mark;
    assert_eq!(liq.0, PositionSide::Long);
    assert_eq!(liq.1, mark, "at the current (mark) price");
    assert!((liq.1.to_f64() * liq.2 / 250_000.0 - 1.0).abs() < 0.001, "{liq:?}");
    let oi_after = perp.view(eth).expect("view").oi;
    assert!((oi_after / oi_before - 1.2).abs() < 0.01, "OI {oi_before} -> {oi_after}");
    // `*`: one on every Binance contract here, in the same step.
    let n = perp.inject_liquidation_all(Venue::Binance, PositionSide::Short, 5_000.0).expect("all");
    assert_eq!(n, w.listing.venue(Venue::Binance).filter(|(_, c)| c.spec.is_some()).count());
    out.clear();
    perp.step_due(now + 1, &mids, usize::MAX, &mut out);
    let shorts =
        out.iter().filter(|t| matches!(t.kind, PerpTickKind::Liquidation { side: PositionSide::Short, .. })).count();
    assert!(shorts >= n, "{shorts} of {n}");
    // Refusals.
    let bitget = w.listing.find(Venue::Bitget, "BTCUSDT").expect("bitget btc");
    assert_eq!(perp.inject_liquidation(bitget, PositionSide::Long, 1.0), Err(ControlError::NoLiquidations));
    assert_eq!(perp.inject_liquidation_all(Venue::Bitget, PositionSide::Long, 1.0), Err(ControlError::NoLiquidations));
    assert_eq!(perp.inject_liquidation(btc, PositionSide::Long, 0.0), Err(ControlError::OutOfRange));
    assert_eq!(perp.inject_oi_jump(btc, -100.0), Err(ControlError::OutOfRange));
    let orphan = w.listing.venue(Venue::Binance).find(|(_, c)| c.spec.is_none()).expect("orphan").0;
    assert_eq!(perp.inject_oi_jump(orphan, 5.0), Err(ControlError::NotHere));
    for _ in 0..8 {
        perp.inject_liquidation(btc, PositionSide::Short, 100.0).expect("room");
    }
    assert_eq!(perp.inject_liquidation(btc, PositionSide::Short, 100.0), Err(ControlError::Full));
    perp.set_listed(btc, false).expect("delist");
    assert_eq!(perp.inject_oi_jump(btc, 5.0), Err(ControlError::Delisted));
}

#[test]
fn a_delisted_perpetual_stops_ticking_and_a_relisted_one_resumes() {
    let w = world(7, 60);
    let pairs: Vec<usize> = (0..w.universe.len()).collect();
    let mut perp = sim_perp(&w, 6, true, &pairs);
    let mids = flat_mids(&w);
    let sol = w.listing.find(Venue::Bybit, "SOLUSDT").expect("sol");
    run_flat(&mut perp, &mids, NOW, 5);
    perp.inject_liquidation(sol, PositionSide::Long, 1_000.0).expect("liq");
    perp.set_listed(sol, false).expect("delist");
    assert_eq!(perp.is_listed(sol), Some(false));
    let during = run_flat(&mut perp, &mids, NOW + 5_000, 60);
    assert!(during.iter().all(|t| t.perp != sol), "a delisted perpetual ticked");
    assert!(during.len() > 60 * (perp.contract_count() - 1), "the others go on");
    perp.set_listed(sol, true).expect("relist");
    let mut out = Vec::new();
    perp.step_due(NOW + 65_000, &mids, usize::MAX, &mut out);
    assert!(out.iter().any(|t| t.perp == sol && matches!(t.kind, PerpTickKind::Perp { .. })), "relisted");
    assert!(
        !out.iter().any(|t| t.perp == sol && matches!(t.kind, PerpTickKind::Liquidation { .. })),
        "events pending at the delisting were dropped"
    );
}

#[test]
fn a_bounded_call_steps_at_most_its_share_and_starves_none() {
    let w = world(7, 60);
    let pairs: Vec<usize> = (0..w.universe.len()).collect();
    let mut perp = sim_perp(&w, 2, true, &pairs);
    let mids = flat_mids(&w);
    let n = perp.contract_count();
    let mut out = Vec::new();
    let mut stepped = BTreeSet::new();
    let mut calls = 0;
    while stepped.len() < n {
        assert_eq!(perp.step_due(NOW, &mids, 16, &mut out), 16.min(n - stepped.len()));
        stepped.extend(out.drain(..).map(|t| t.perp));
        calls += 1;
    }
    assert_eq!(calls, n.div_ceil(16));
    assert_eq!(perp.step_due(NOW, &mids, 16, &mut out), 0, "nothing due twice in one millisecond");
}

#[test]
fn stepping_allocates_nothing() {
    let w = world(3, 120);
    let ids: Vec<BookId> = w.registry.ids().collect();
    let pairs: Vec<usize> = (0..w.universe.len()).collect();
    let mut market = Market::new(w.registry.len(), &ids, 300, 16);
    let mut spot = Sim::new(SimConfig::default(), &w.universe, &w.registry, &pairs);
    let mut ticks = Vec::with_capacity(spot.ticks_per_step_max() * pairs.len());
    for i in 0..spot.pair_count() {
        spot.start_pair(i, NOW, &mut ticks);
        for t in &ticks {
            market.apply(t);
        }
        ticks.clear();
    }
    let mut perp = sim_perp(&w, 3, true, &pairs);
    let mut mids = vec![Price::ZERO; w.registry.len()];
    let mut out = Vec::with_capacity(perp.contract_count() * perp.ticks_per_step_max());
    let btc = w.listing.find(Venue::Binance, "BTCUSDT").expect("btc");
    let eth = w.listing.find(Venue::Bybit, "ETHUSDT").expect("eth");
    let mut emitted = 0usize;
    let mut run = |market: &mut Market, perp: &mut SimPerp, from: i64, rounds: i64| {
        for r in 0..rounds {
            let now = from + r * 100;
            spot.step_due(now, usize::MAX, &mut ticks);
            for t in &ticks {
                market.apply(t);
            }
            ticks.clear();
            if r % 50 == 0 {
                perp.inject_liquidation(btc, PositionSide::Long, 10_000.0).expect("liq");
                perp.inject_liquidation_all(Venue::Okx, PositionSide::Short, 1_000.0).expect("all");
                if perp.is_listed(eth) == Some(true) {
                    perp.inject_oi_jump(eth, -10.0).expect("oi");
                    perp.set_funding(eth, 0.001, Some(1)).expect("funding");
                }
            }
            if r % 300 == 0 {
                perp.set_listed(eth, r % 600 != 0).expect("listing");
            }
            perp.read_mids(market, &mut mids);
            perp.step_due(now, &mids, usize::MAX, &mut out);
            emitted += out.len();
            out.clear();
        }
    };
    run(&mut market, &mut perp, NOW, 50);
    let ((), allocations) = alloc::count(|| run(&mut market, &mut perp, NOW + 5_000, 3_000));
    assert!(emitted > 50_000, "only {emitted} perpetual ticks");
    assert_eq!(allocations, Some(0), "allocations while stepping the perpetuals");
}
