//! Proves the tick path allocates nothing: simulated ticks are generated and applied to a
//! market (books, candles, level consumption, alert evaluation) under a counting global
//! allocator, after a warm-up, and the count must stay zero. The same is proved for the Bitget
//! feed: decoding frames, syncing a book from them and turning trades into ticks.

use rampart_engine::alert::{AlertSpec, Condition, Cross, Move};
use rampart_engine::feed::bitget::{
    BitgetBookSync, BitgetDecoder, Message, BOOKS_LEVELS_PER_SIDE_MAX, TRADES_PER_PUSH_MAX,
};
use rampart_engine::level::{compute_from_set, LevelScratch};
use rampart_engine::level_alert::{LevelCondition, LevelDirection, LevelEvent, TIMEFRAMES_ALL};
use rampart_engine::sim::{self, Sim, SimConfig};
use rampart_engine::Book;
use rampart_engine::{BookId, Market, Price, Registry, Timeframe, Venue};
use rampart_testkit::alloc::{self, Counting};

// The count is per thread, so the tests of this file may run side by side.
#[global_allocator]
static GLOBAL: Counting = Counting;

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
    // Every book's levels computed, as the shard does once a minute (not counted: not a tick).
    let mut bars: [Vec<rampart_engine::Candle>; 5] = std::array::from_fn(|_| Vec::with_capacity(512));
    let mut scratch = LevelScratch::default();
    for id in registry.ids() {
        if let Some(state) = market.get_mut(id) {
            let price = state.last_price;
            compute_from_set(&state.candles, now, price, &mut bars, &mut scratch, &mut state.levels);
            state.alerts.on_levels(state.levels.levels(), price);
        }
    }
    // Alerts on every book, close to the price so they fire, re-arm and fire again: repeating
    // and one-shot price alerts on both sides, percent alerts on every window, and level alerts
    // of every event on both sides.
    let mut next_id = 0u64;
    let mut level_alerts = 0;
    for id in registry.ids() {
        let p = market.get(id).map(|s| s.book.mid().unwrap_or_default().0).unwrap_or(0);
        for k in 1..=20i64 {
            for (cross, level) in [(Cross::Above, p + p * k / 20_000), (Cross::Below, p - p * k / 20_000)] {
                next_id += 1;
                let condition = Condition::Price { cross, level: Price(level) };
                market.insert_alert(id, AlertSpec { id: next_id, condition, repeat: k % 4 != 0, cooldown_s: 0 });
            }
        }
        for window in Timeframe::ALL {
            for dir in [Move::Up, Move::Down, Move::Any] {
                next_id += 1;
                let condition = Condition::Pct { dir, millionths: 100_000, window };
                market.insert_alert(id, AlertSpec { id: next_id, condition, repeat: true, cooldown_s: 0 });
            }
        }
        for (event, within) in [
            (LevelEvent::Approach, 50_000),
            (LevelEvent::Approach, 2_000_000),
            (LevelEvent::Touch, 0),
            (LevelEvent::Break, 0),
        ] {
            for direction in [LevelDirection::Above, LevelDirection::Below, LevelDirection::Any] {
                next_id += 1;
                level_alerts += 1;
                let c = LevelCondition {
                    event,
                    direction,
                    within_millionths: within,
                    min_strength: 1,
                    timeframes: TIMEFRAMES_ALL,
                };
                market.insert_alert(
                    id,
                    AlertSpec { id: next_id, condition: Condition::Level(c), repeat: true, cooldown_s: 0 },
                );
            }
        }
    }
    assert!(level_alerts > 1_000, "level alerts on every book");
    // Warm up, then count: candle roll-overs, wall churn, book moves and alert firings all
    // happen in both.
    let mut firings = 0u64;
    let mut level_firings = 0u64;
    let mut run = |from: i64, rounds: i64| -> u64 {
        let mut applied = 0;
        for r in 0..rounds {
            let t = from + r * 50;
            sim.step_due(t, PAIRS_PER_ROUND_MAX, &mut ticks);
            for tick in &ticks {
                market.apply(tick);
                firings += market.firings().len() as u64;
                level_firings += market.firings().iter().filter(|f| f.level().is_some()).count() as u64;
                market.clear_firings();
            }
            applied += ticks.len() as u64;
            ticks.clear();
        }
        applied
    };
    run(now, 200);
    // The counter itself works: one deliberate allocation is seen.
    let ((), one) = alloc::count(|| drop(std::hint::black_box(Vec::<u8>::with_capacity(16))));
    assert_eq!(one, Some(1));
    // 20 000 rounds of 50 ms: about 17 minutes of simulated market, crossing many 5m buckets.
    let (applied, allocations) = alloc::count(|| run(now + 10_000, 20_000));
    assert!(applied > 100_000, "only {applied} ticks applied");
    assert!(firings > 10_000, "only {firings} alert firings: the evaluation path was not exercised");
    assert!(level_firings > 100, "only {level_firings} level alert firings: their path was not exercised");
    assert_eq!(allocations, Some(0), "allocations on the tick path over {applied} ticks");
}

/// Bitget frames after the fixtures: a snapshot with a wrong checksum, then a snapshot, an
/// update that crosses the book and one that arrives after the discard.
const BITGET_EXTRA: [&str; 4] = [
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"books","instId":"BTCUSDT"},"data":[{"asks":[["101","1"]],"bids":[["100","1"]],"checksum":1,"seq":1,"ts":"1"}]}"#,
    r#"{"action":"snapshot","arg":{"instType":"SPOT","channel":"books","instId":"BTCUSDT"},"data":[{"asks":[["101","1"]],"bids":[["100","1"]],"seq":1,"ts":"1"}]}"#,
    r#"{"action":"update","arg":{"instType":"SPOT","channel":"books","instId":"BTCUSDT"},"data":[{"asks":[],"bids":[["102","1"]],"seq":2,"pseq":1,"ts":"1"}]}"#,
    r#"{"action":"update","arg":{"instType":"SPOT","channel":"books","instId":"BTCUSDT"},"data":[{"asks":[],"bids":[["99","1"]],"seq":3,"pseq":2,"ts":"1"}]}"#,
];

#[test]
fn decoding_and_syncing_bitget_frames_allocates_nothing() {
    let dir = format!("{}/tests/fixtures/bitget", env!("CARGO_MANIFEST_DIR"));
    let mut paths: Vec<_> = std::fs::read_dir(&dir).expect("fixture dir").map(|e| e.expect("entry").path()).collect();
    paths.sort();
    let mut frames: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).expect("fixture")).collect();
    frames.extend(BITGET_EXTRA.iter().map(|f| f.as_bytes().to_vec()));
    let mut decoder = BitgetDecoder::new(BOOKS_LEVELS_PER_SIDE_MAX, TRADES_PER_PUSH_MAX);
    // One sync verifies checksums, one does not.
    let mut syncs = [BitgetBookSync::new(400, true), BitgetBookSync::new(400, false)];
    let mut book = Book::new(400);
    let mut run = |rounds: usize| -> (u64, u64) {
        let (mut decoded, mut ticks) = (0, 0);
        for _ in 0..rounds {
            for sync in &mut syncs {
                for f in &frames {
                    match decoder.decode(f) {
                        Ok(Message::Book(push)) => {
                            sync.on_book(&push, &mut book);
                            decoded += 1;
                        }
                        Ok(Message::Trades { trades, .. }) => {
                            for t in trades {
                                std::hint::black_box(t.tick(BookId(0)));
                                ticks += 1;
                            }
                            decoded += 1;
                        }
                        Ok(_) => decoded += 1,
                        Err(e) => {
                            std::hint::black_box(e);
                        }
                    }
                }
                sync.reset(&mut book);
            }
        }
        (decoded, ticks)
    };
    run(2);
    let ((decoded, ticks), allocations) = alloc::count(|| run(50));
    assert!(decoded > 2_000 && ticks > 300, "only {decoded} frames decoded and {ticks} ticks");
    let (v, u) = (syncs[0].counters(), syncs[1].counters());
    assert!(v.snapshot_count > 0 && v.update_count > 0 && v.gap_count > 0 && v.crossed_count > 0);
    assert!(v.checksum_mismatch_count > 0 && v.checksum_checked_count > v.checksum_mismatch_count);
    assert!(v.awaiting_count > 0 && u.checksum_checked_count == 0);
    assert_eq!(allocations, Some(0), "allocations while decoding and syncing Bitget frames");
}

#[test]
fn a_perpetuals_windows_allocate_nothing() {
    use rampart_engine::perp_window::{PerpWindow, PositionSide, SLOTS};
    let mut windows: Vec<PerpWindow> = [60_000, 300_000, 3_600_000].iter().map(|&w| PerpWindow::new(w, 0)).collect();
    let mut run = |from: i64, n: i64| {
        let mut seen = 0.0;
        for i in 0..n {
            let now = from + i * 700;
            for w in windows.iter_mut() {
                let side = if i % 3 == 0 { PositionSide::Short } else { PositionSide::Long };
                w.add_liquidation(now, now - 1_500, side, 1_000.0 + i as f64);
                if i % 5 == 0 {
                    w.note_oi(now, 10_000.0 + i as f64);
                }
                seen += w.liquidations(now).map_or(0.0, |l| l.long_usd);
                seen += w.oi_change_pct(now).unwrap_or(0.0);
                if i % 50 == 0 {
                    seen += w.slots(now).filter_map(|s| s.oi_base).sum::<f64>();
                }
            }
        }
        seen
    };
    run(0, 2_000);
    // 5 000 updates 0.7 s apart: about an hour, every slot of the three windows reused.
    let (seen, allocations) = alloc::count(|| run(1_400_000, 5_000));
    assert!(seen > 0.0 && SLOTS == 60, "windows were read");
    assert_eq!(allocations, Some(0), "liquidations, OI samples and reads allocated");
}
