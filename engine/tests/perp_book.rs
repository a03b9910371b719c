//! One pair's perpetual state (`decisions.md` §17): each reader at its boundaries (windows not
//! watched in full, OI change in base units, `rate8h`, staleness, the recent liquidations and
//! their 24 h cut, the history against the window's metric), the bytes per pair, and a
//! counting-allocator proof that updates and reads allocate nothing after construction.

use rampart_engine::candle::{DAY_MS, MINUTE_MS};
use rampart_engine::perp_book::{
    Completeness, HistorySlot, LiqFilter, Liquidation, PerpBook, PerpBookError, PerpInterval, PerpReject, PerpSpec,
    BINANCE_OI_STALE_POLLS, PERP_BOOK_BYTES, PERP_BOOK_BYTES_MAX, RECENT_KEEP_MS, RECENT_MAX, STALE_AFTER_MS,
};
use rampart_engine::perp_window::{LiqSums, PositionSide, SLOTS};
use rampart_engine::{Timeframe, Venue};
use rampart_testkit::alloc::{self, Counting};
use rampart_testkit::rng::Rng;

// The count is per thread, so the tests of this file may run side by side.
#[global_allocator]
static GLOBAL: Counting = Counting;

/// A start on a multiple of every window's slot (the 1w slot, 168 min, is a multiple of the
/// others), so a window is watched in full exactly 59 slots after it.
const T0: i64 = 10_080_000 * 178_000;
const POLL_MS: i64 = 30_000;

fn book(venue: Venue, now_ms: i64) -> Box<PerpBook> {
    let spec = PerpSpec { venue, contract: "BTCUSDT", multiplier: 1, binance_oi_poll_ms: POLL_MS };
    PerpBook::new(spec, now_ms).expect("a valid perpetual")
}

fn slot_ms(interval: PerpInterval) -> i64 {
    interval.duration_ms() / SLOTS as i64
}

/// The first time the window is watched in full, for a book made at [`T0`].
fn full_at(interval: PerpInterval) -> i64 {
    T0 + (SLOTS as i64 - 1) * slot_ms(interval)
}

fn round(v: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (v * k).round() / k
}

#[test]
fn the_contract_facts_and_the_venues_completeness() {
    let spec = PerpSpec { venue: Venue::Okx, contract: "1000PEPE-USDT-SWAP", multiplier: 1000, binance_oi_poll_ms: 1 };
    let b = PerpBook::new(spec, T0).expect("valid");
    assert_eq!((b.contract(), b.multiplier(), b.completeness()), ("1000PEPE-USDT-SWAP", 1000, Completeness::Partial));
    let texts: Vec<&str> = Venue::ALL.iter().map(|v| Completeness::of(*v).as_str()).collect();
    assert_eq!(texts, ["largest_per_second", "all", "partial", "none"]);
    let long = "X".repeat(33);
    for (contract, multiplier, poll, err) in [
        ("", 1, 1, PerpBookError::Contract),
        (long.as_str(), 1, 1, PerpBookError::Contract),
        ("BTCUSDTé", 1, 1, PerpBookError::Contract),
        ("BTCUSDT", 0, 1, PerpBookError::Multiplier),
        ("BTCUSDT", 1, 0, PerpBookError::PollInterval),
    ] {
        let spec = PerpSpec { venue: Venue::Binance, contract, multiplier, binance_oi_poll_ms: poll };
        assert_eq!(PerpBook::new(spec, T0).err(), Some(err), "{contract:?}");
    }
    let spec = PerpSpec { venue: Venue::Binance, contract: &long[..32], multiplier: 1, binance_oi_poll_ms: 1 };
    assert_eq!(PerpBook::new(spec, T0).map(|b| b.contract().len()).ok(), Some(32), "32 bytes fit");
}

#[test]
fn the_windows_are_named_as_the_api_names_them() {
    let names: Vec<&str> = PerpInterval::ALL.iter().map(|i| i.as_str()).collect();
    assert_eq!(names, ["1m", "5m", "15m", "1h", "4h", "1d", "1w"]);
    for (k, i) in PerpInterval::ALL.into_iter().enumerate() {
        assert_eq!((PerpInterval::parse(i.as_str()), i.index()), (Some(i), k));
        assert_eq!(i.duration_ms() % SLOTS as i64, 0);
    }
    for tf in Timeframe::ALL {
        assert_eq!(PerpInterval::of(tf).as_str(), tf.as_str());
    }
    assert_eq!((PerpInterval::M1.duration_ms(), PerpInterval::W1.duration_ms()), (MINUTE_MS, 7 * DAY_MS));
    assert_eq!(PerpInterval::parse("2h"), None);
    assert!(PerpInterval::OI.iter().all(|i| i.has_oi()) && !PerpInterval::M1.has_oi());
}

#[test]
fn liquidation_sums_only_once_each_window_is_watched_in_full() {
    let mut b = book(Venue::Bybit, T0);
    let l = b.on_liquidation(T0, T0, PositionSide::Long, 100.0, 2.5).expect("taken");
    assert_eq!((l.usd(), l.qty, l.time_ms), (250.0, 2.5, T0));
    b.on_liquidation(T0 + 10, T0 + 10, PositionSide::Short, 50.0, 1.0).expect("taken");
    for i in PerpInterval::ALL {
        let full = full_at(i);
        assert_eq!(b.liquidations(full - 1, i), None, "{}: not watched in full", i.as_str());
        let sums = b.liquidations(full, i).expect("watched in full");
        let want = LiqSums { long_usd: 250.0, short_usd: 50.0, long_count: 1, short_count: 1 };
        assert_eq!(sums, want, "{}", i.as_str());
        assert_eq!(b.window_from_ms(full, i), T0, "{}: the first slot starts at the watch", i.as_str());
        // One slot later the first slot, holding both, has left the window.
        assert_eq!(b.liquidations(full + slot_ms(i), i), Some(LiqSums::default()), "{}", i.as_str());
    }
}

#[test]
fn bad_liquidations_are_refused_and_bitget_has_none() {
    let mut b = book(Venue::Binance, T0);
    for (price, qty) in [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0), (f64::NAN, 1.0), (1.0, f64::INFINITY)] {
        assert_eq!(b.on_liquidation(T0, T0, PositionSide::Long, price, qty), Err(PerpReject::Invalid));
    }
    assert_eq!(b.last_liquidation(), None);
    let mut g = book(Venue::Bitget, T0);
    assert_eq!(g.on_liquidation(T0, T0, PositionSide::Long, 1.0, 1.0), Err(PerpReject::Unpublished));
    let full = full_at(PerpInterval::M5);
    assert_eq!(g.liquidations(full, PerpInterval::M5), None, "Bitget has no liquidations metric");
    assert!(g.history(full, PerpInterval::M5).all(|s| s.liquidations.is_none()));
    g.on_oi(full, full, 10.0, None).expect("Bitget still has OI");
    assert_eq!(g.history(full, PerpInterval::M5).last().and_then(|s| s.oi_base), Some(10.0));
}

#[test]
fn oi_change_is_in_base_units_while_the_price_moves() {
    let mut b = book(Venue::Binance, T0);
    assert_eq!(b.oi(T0), None);
    b.on_mark(T0, T0, 100.0).expect("mark");
    let now = b.on_oi(T0, T0, 1_000.0, None).expect("sample");
    assert_eq!((now.base, now.usd, now.time_ms, now.stale), (1_000.0, Some(100_000.0), T0, false));
    // The price doubles while OI grows 10 %: the change is 10 %, not the 120 % of its USD value.
    let i = PerpInterval::M5;
    let full = full_at(i);
    b.on_mark(full - 1, full - 1, 200.0).expect("mark");
    b.on_oi(full - 1, full - 1, 1_100.0, None).expect("sample");
    assert_eq!(b.oi(full).and_then(|o| o.usd), Some(220_000.0), "OI × the newest mark");
    assert_eq!(b.oi_change(full - 1, i), None, "not watched in full");
    let change = b.oi_change(full, i).expect("watched in full");
    assert_eq!((round(change.pct, 9), change.from_base, change.from_ms), (10.0, 1_000.0, T0));
    assert_eq!(b.oi_change(full, PerpInterval::M1), None, "no 1m OI window");
    assert_eq!(b.oi_change(full, PerpInterval::H1), None, "1h not watched in full");
    // An older sample is refused; the value now stays the newest.
    assert_eq!(b.on_oi(full, full - 2, 5.0, None), Err(PerpReject::Older));
    assert_eq!(b.on_oi(full, full, -1.0, None), Err(PerpReject::Invalid));
    assert_eq!(b.oi(full).map(|o| o.base), Some(1_100.0));
}

#[test]
fn oi_usd_is_the_venues_figure_when_it_sends_one() {
    let mut b = book(Venue::Bybit, T0);
    let now = b.on_oi(T0, T0, 10.0, None).expect("sample");
    assert_eq!(now.usd, None, "no mark and no venue figure yet");
    b.on_mark(T0, T0, 50.0).expect("mark");
    assert_eq!(b.oi(T0).and_then(|o| o.usd), Some(500.0));
    let now = b.on_oi(T0 + 1, T0 + 1, 10.0, Some(512.5)).expect("sample");
    assert_eq!(now.usd, Some(512.5));
    // A sample stamped ahead of our clock is noted at now: the change is known at once.
    let full = full_at(PerpInterval::M5);
    b.on_oi(full, full + 5_000, 20.0, Some(1_000.0)).expect("sample");
    assert_eq!(b.oi_change(full, PerpInterval::M5).map(|c| round(c.pct, 9)), Some(100.0));
}

#[test]
fn rate8h_is_the_rate_per_eight_hours() {
    let mut b = book(Venue::Okx, T0);
    assert_eq!(b.funding(T0), None);
    for (interval_h, rate8h) in [(1, 0.08), (4, 0.02), (8, 0.01)] {
        let t = T0 + i64::from(interval_h);
        let f = b.on_funding(t, t, 0.01, interval_h, T0 + 3_600_000).expect("taken");
        assert_eq!(
            (round(f.rate8h, 12), f.rate, f.interval_h, f.next_ms, f.time_ms),
            (rate8h, 0.01, interval_h, T0 + 3_600_000, t)
        );
        assert_eq!(b.funding(t), Some(f));
    }
    let f = b.on_funding(T0 + 10, T0 + 10, -0.0375, 4, 0).expect("negative rates too");
    assert_eq!(round(f.rate8h, 12), -0.075);
    for interval_h in [0, 25] {
        assert_eq!(b.on_funding(T0 + 20, T0 + 20, 0.01, interval_h, 0), Err(PerpReject::Invalid));
    }
    assert_eq!(b.on_funding(T0 + 20, T0 + 20, f64::NAN, 8, 0), Err(PerpReject::Invalid));
    assert_eq!(b.on_funding(T0 + 20, T0 + 9, 0.5, 8, 0), Err(PerpReject::Older));
    assert_eq!(b.funding(T0 + 20).map(|f| f.rate), Some(-0.0375));
}

#[test]
fn oi_and_funding_go_stale_after_60_s_and_binance_oi_after_three_polls() {
    let mut b = book(Venue::Bybit, T0);
    b.on_oi(T0, T0, 1.0, Some(1.0)).expect("sample");
    b.on_funding(T0, T0, 0.01, 8, 0).expect("funding");
    let at = |b: &PerpBook, t: i64| (b.oi(t).map(|o| o.stale), b.funding(t).map(|f| f.stale));
    assert_eq!(at(&b, T0 + STALE_AFTER_MS - 1), (Some(false), Some(false)));
    assert_eq!(at(&b, T0 + STALE_AFTER_MS), (Some(true), Some(true)), "exactly 60 s: stale, still readable");
    // A new sample (by our clock, whatever the venue's time) makes it fresh again.
    b.on_oi(T0 + STALE_AFTER_MS, T0 + 1, 1.0, Some(1.0)).expect("sample");
    assert_eq!(at(&b, T0 + STALE_AFTER_MS), (Some(false), Some(true)));

    let mut n = book(Venue::Binance, T0);
    n.on_oi(T0, T0, 1.0, None).expect("sample");
    n.on_funding(T0, T0, 0.01, 8, 0).expect("funding");
    let polls = BINANCE_OI_STALE_POLLS * POLL_MS;
    assert_eq!(at(&n, T0 + STALE_AFTER_MS), (Some(false), Some(true)), "Binance OI: polls, not 60 s");
    assert_eq!(at(&n, T0 + polls - 1).0, Some(false));
    assert_eq!(at(&n, T0 + polls).0, Some(true), "exactly 3 poll intervals");
}

#[test]
fn the_book_keeps_the_newest_of_each_side_by_the_venues_time() {
    let mut b = book(Venue::Okx, T0);
    assert_eq!((b.last_liquidation(), b.newest_of(None, T0)), (None, None));
    let n = 200;
    for k in 0..n {
        let side = if k % 2 == 0 { PositionSide::Long } else { PositionSide::Short };
        let t = T0 + 1_000 * k;
        b.on_liquidation(t, t, side, 10.0 * (k as f64 + 1.0), 1.0).expect("taken");
    }
    let now = T0 + 1_000 * n;
    let time = |l: Option<Liquidation>| l.map(|l| l.time_ms);
    assert_eq!(time(b.last_liquidation()), Some(T0 + 1_000 * (n - 1)));
    assert_eq!(time(b.newest_of(None, now)), Some(T0 + 1_000 * (n - 1)));
    assert_eq!(time(b.newest_of(Some(PositionSide::Long), now)), Some(T0 + 1_000 * (n - 2)));
    assert_eq!(time(b.newest_of(Some(PositionSide::Short), now)), Some(T0 + 1_000 * (n - 1)));
    // A push out of the venue's order is not the newest; one of the same time, taken later, is.
    b.on_liquidation(now, T0, PositionSide::Long, 1.0, 1.0).expect("counted in the windows");
    assert_eq!(time(b.newest_of(Some(PositionSide::Long), now)), Some(T0 + 1_000 * (n - 2)));
    let same = T0 + 1_000 * (n - 1);
    b.on_liquidation(now, same, PositionSide::Long, 7.0, 1.0).expect("taken");
    assert_eq!(b.last_liquidation().map(|l| (l.side, l.usd())), Some((PositionSide::Long, 7.0)));
    assert_eq!(time(b.newest_of(Some(PositionSide::Short), now)), Some(same));
}

/// The history's `oiUsd`: each slot's OI at its end valued at the price then (the slot in
/// progress: now), `null` without OI or without a price.
#[test]
fn a_history_slot_is_valued_at_the_price_at_its_end() {
    let slot = |oi_base| HistorySlot { time_ms: 60_000, oi_base, oi_usd: None, liquidations: None };
    let asked = std::cell::Cell::new(0);
    let price_at = |t: i64| {
        asked.set(t);
        Some(2.5)
    };
    assert_eq!(slot(Some(4.0)).valued(60_000, 1_000_000, price_at).oi_usd, Some(10.0));
    assert_eq!(asked.get(), 119_999, "the slot's last millisecond");
    assert_eq!(slot(Some(4.0)).valued(60_000, 90_000, price_at).oi_usd, Some(10.0));
    assert_eq!(asked.get(), 90_000, "the slot in progress: now");
    assert_eq!(slot(None).valued(60_000, 1_000_000, price_at).oi_usd, None, "no OI");
    assert_eq!(slot(Some(4.0)).valued(60_000, 1_000_000, |_| None).oi_usd, None, "no price");
}

#[test]
fn a_test_send_reads_the_last_24_hours_and_last_however_old() {
    let mut b = book(Venue::Bybit, T0);
    let now = T0 + 2 * DAY_MS;
    b.on_liquidation(now, now - RECENT_KEEP_MS, PositionSide::Long, 1.0, 1.0).expect("taken");
    let time = |l: Option<Liquidation>| l.map(|l| l.time_ms);
    assert_eq!(time(b.newest_of(None, now)), Some(now - RECENT_KEEP_MS), "exactly 24 h old is listed");
    assert_eq!(b.newest_of(None, now + 1), None);
    assert_eq!(b.newest_of(Some(PositionSide::Short), now), None, "none of that side");
    assert_eq!(time(b.last_liquidation()), Some(now - RECENT_KEEP_MS), "`last` however old");
    let filter = LiqFilter { side: None, min_usd: 0.0, limit: RECENT_MAX };
    let held = [b.last_liquidation().expect("held")];
    assert_eq!(filter.apply(now, held.iter()).count(), 1, "the lists' filter reads it the same way");
    assert_eq!(filter.apply(now + 1, held.iter()).count(), 0);
    assert!(filter.passes(now, &held[0]) && !filter.passes(now + 1, &held[0]), "one by one the same");
    let shorts = LiqFilter { side: Some(PositionSide::Short), ..filter };
    let big = LiqFilter { min_usd: 1.5, ..filter };
    assert!(!shorts.passes(now, &held[0]) && !big.passes(now, &held[0]), "side and value");
}

fn add(sum: &mut LiqSums, s: &LiqSums) {
    sum.long_usd += s.long_usd;
    sum.short_usd += s.short_usd;
    sum.long_count += s.long_count;
    sum.short_count += s.short_count;
}

#[test]
fn the_history_is_sixty_slots_that_sum_to_the_window() {
    let mut rng = Rng::from_env(17);
    // Made a little after T0, so the first slots of a window seen early are not watched.
    let start = T0 + 90 * MINUTE_MS;
    let mut b = book(Venue::Bybit, start);
    b.on_mark(start, start, 100.0).expect("mark");
    let i = PerpInterval::H1;
    let mut t = start;
    let end = start + 3 * i.duration_ms();
    let mut first_oi = None;
    while t < end {
        t += 1 + rng.below(20_000) as i64;
        let side = if rng.chance(50) { PositionSide::Long } else { PositionSide::Short };
        b.on_liquidation(t, t - rng.below(3_000) as i64, side, 100.0, 0.01 * (1 + rng.below(500)) as f64)
            .expect("taken");
        if rng.chance(20) {
            let base = 1_000.0 + rng.below(100) as f64;
            b.on_oi(t, t, base, None).expect("sample");
            first_oi.get_or_insert(base);
        }
        if t < start + 30 * MINUTE_MS {
            let slots: Vec<_> = b.history(t, i).collect();
            assert_eq!(slots.len(), SLOTS);
            assert!(slots
                .iter()
                .filter(|s| s.time_ms < start)
                .all(|s| s.liquidations.is_none() && s.oi_base.is_none()));
            continue;
        }
        let slots: Vec<_> = b.history(t, i).collect();
        assert_eq!(slots.len(), SLOTS);
        assert!(slots.windows(2).all(|p| p[1].time_ms - p[0].time_ms == slot_ms(i)), "oldest first");
        assert_eq!(slots[0].time_ms, b.window_from_ms(t, i));
        assert!(slots.iter().all(|s| s.oi_usd.is_none()), "PerpWindow keeps base units only");
        let Some(window) = b.liquidations(t, i) else { continue };
        let mut sum = LiqSums::default();
        slots.iter().for_each(|s| add(&mut sum, &s.liquidations.expect("watched")));
        assert_eq!(sum, window, "at {t}");
        if let Some(change) = b.oi_change(t, i) {
            assert_eq!(slots[0].oi_base, Some(change.from_base));
        }
    }
    assert!(first_oi.is_some());
    assert!(b.liquidations(end, i).is_some_and(|s| s.long_count + s.short_count > 100), "the window was filled");
}

#[test]
fn one_pairs_book_leaves_room_for_its_ring_within_21_kib() {
    // §17: "about 21 KiB" per pair; everything is inline (no heap beyond the one box).
    let (b, n) = alloc::count(|| book(Venue::Binance, T0));
    assert_eq!(n, Some(1), "one allocation: the box");
    let bytes = b.bytes();
    eprintln!("PerpBook: {bytes} bytes ({:.1} KiB)", bytes as f64 / 1024.0);
    assert_eq!(bytes, PERP_BOOK_BYTES);
    // 7 windows × 60 slots (liquidations of both sides and OI) at least.
    assert!(bytes >= 7 * 60 * 32, "{bytes} bytes: less than the windows need?");
    assert!(bytes <= PERP_BOOK_BYTES_MAX, "{bytes} bytes: over §17's about 21 KiB less the ring beside it");
    assert_eq!(PERP_BOOK_BYTES_MAX, 21_504 - 128 * 40 - 1_024);
}

#[test]
fn updates_and_reads_allocate_nothing_after_construction() {
    let mut rng = Rng::new(5);
    let mut b = book(Venue::Binance, T0);
    let mut run = |b: &mut PerpBook, from: i64, steps: i64| {
        let mut seen = 0usize;
        for k in 0..steps {
            let now = from + 700 * k;
            let side = if rng.chance(50) { PositionSide::Long } else { PositionSide::Short };
            let _ = b.on_liquidation(now, now - 300, side, 100.0 + rng.below(10) as f64, 0.5);
            let _ = b.on_mark(now, now, 100.0 + rng.below(10) as f64);
            let _ = b.on_funding(now, now, 0.01, 8, now + 3_600_000);
            if k % 40 == 0 {
                let _ = b.on_oi(now, now - 100, 1_000.0 + rng.below(100) as f64, None);
            }
            for i in PerpInterval::ALL {
                seen += usize::from(b.liquidations(now, i).is_some());
                seen += usize::from(b.oi_change(now, i).is_some());
                seen += b.history(now, i).filter(|s| s.oi_base.is_some()).count();
            }
            seen += usize::from(b.newest_of(Some(PositionSide::Short), now).is_some());
            seen += usize::from(b.oi(now).is_some() && b.funding(now).is_some() && b.last_liquidation().is_some());
        }
        seen
    };
    run(&mut b, T0, 100);
    // 20 000 updates 0.7 s apart: about four hours, every slot of the shorter windows reused.
    let (seen, allocations) = alloc::count(|| run(&mut b, T0 + 100_000, 20_000));
    assert!(seen > 100_000, "only {seen} values read");
    assert_eq!(allocations, Some(0), "allocations while updating and reading a perpetual");
}
