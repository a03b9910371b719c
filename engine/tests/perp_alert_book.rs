//! The derivatives alerts of one book (`decisions.md` §17), through `PerpAlertBook`'s public
//! entry points: each rule at its boundary (`order` at $1M, one message firing once with its
//! count and largest, `sum` once per passing, `oi` at `pct` and re-armed below 0.8 × `pct`, the
//! `min_usd` gate, `funding` crossing and re-armed 0.005 back, no firing at creation), pause,
//! re-arm, removal, cooldown and the bound; that an update visits only what it changes (counted);
//! that updates allocate nothing (a counting allocator); and, seeded, that the book decides
//! exactly what the one-alert rules of `perp_alert` decide for every alert on its own.

use rampart_engine::perp_alert::{
    Arm, FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection,
};
use rampart_engine::perp_alert_book::{
    InsertError, PerpAlertBook, PerpAlertSpec, PerpCondition, PerpFiring, PerpHit, LIQS_PER_MESSAGE_MAX,
};
use rampart_engine::perp_book::{Liquidation, PerpInterval};
use rampart_engine::perp_window::{LiqSums, PositionSide};
use rampart_testkit::alloc::{self, Counting};
use rampart_testkit::rng::Rng;
use std::sync::atomic::{AtomicUsize, Ordering};

// The count is per thread, so the tests of this file may run side by side.
#[global_allocator]
static GLOBAL: Counting = Counting;

const T0: i64 = 1_795_183_387_000;
const M5: PerpInterval = PerpInterval::M5;
const H1: PerpInterval = PerpInterval::H1;

fn spec(id: u64, condition: PerpCondition) -> PerpAlertSpec {
    PerpAlertSpec { id, condition, repeat: true, cooldown_s: 0 }
}

fn order(id: u64, direction: LiqDirection, min_usd: f64) -> PerpAlertSpec {
    spec(id, PerpCondition::Order(LiqOrder { direction, min_usd_cents: (min_usd * 100.0).round() as u64 }))
}

fn sum(id: u64, window: PerpInterval, direction: LiqDirection, min_usd: f64) -> PerpAlertSpec {
    let sum = LiqSum { direction, min_usd_cents: (min_usd * 100.0).round() as u64 };
    spec(id, PerpCondition::Sum { window, sum })
}

fn oi(id: u64, window: PerpInterval, direction: OiDirection, pct: f64, min_usd: u64) -> PerpAlertSpec {
    let change = OiChange { direction, pct_micro: (pct * 1e6).round() as i64, min_usd };
    spec(id, PerpCondition::Oi { window, change })
}

fn funding(id: u64, direction: FundingDirection, pct: f64) -> PerpAlertSpec {
    spec(id, PerpCondition::Funding(FundingLevel { direction, pct_micro: (pct * 1e6).round() as i64 }))
}

fn liq(side: PositionSide, usd: f64, time_ms: i64) -> Liquidation {
    Liquidation { side, price: 100.0, qty: usd / 100.0, time_ms }
}

fn sums(long_usd: f64, short_usd: f64) -> Option<LiqSums> {
    Some(LiqSums { long_usd, short_usd, long_count: 1, short_count: 1 })
}

/// A book and its firing buffer; each update returns the ids fired, sorted.
struct Rig {
    book: PerpAlertBook,
    out: Vec<PerpFiring>,
    t: i64,
}

impl Rig {
    fn new(specs: &[PerpAlertSpec]) -> Rig {
        let mut book = PerpAlertBook::new(100_000);
        for s in specs {
            book.insert(*s).expect("room");
        }
        Rig { book, out: Vec::with_capacity(100_000), t: T0 }
    }

    fn ids(&mut self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.out.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        ids
    }

    fn message(&mut self, liqs: &[Liquidation]) -> Vec<u64> {
        self.out.clear();
        self.book.on_liquidations(liqs, &mut self.out);
        self.ids()
    }

    fn liq(&mut self, side: PositionSide, usd: f64) -> Vec<u64> {
        self.t += 1_000;
        self.message(&[liq(side, usd, self.t)])
    }

    fn sums(&mut self, window: PerpInterval, long_usd: f64, short_usd: f64) -> Vec<u64> {
        self.t += 1_000;
        self.out.clear();
        self.book.on_sums(window, self.t, sums(long_usd, short_usd), &mut self.out);
        self.ids()
    }

    fn oi(&mut self, window: PerpInterval, change: f64, usd: f64) -> Vec<u64> {
        self.t += 1_000;
        self.out.clear();
        self.book.on_oi(window, self.t, Some(change), Some(usd), &mut self.out);
        self.ids()
    }

    fn funding(&mut self, rate8h: f64) -> Vec<u64> {
        self.t += 1_000;
        self.out.clear();
        self.book.on_funding(self.t, rate8h, &mut self.out);
        self.ids()
    }
}

const NONE: [u64; 0] = [];

#[test]
fn an_order_alert_fires_at_its_minimum_and_not_a_cent_under() {
    let mut r = Rig::new(&[
        order(1, LiqDirection::Long, 1_000_000.0),
        order(2, LiqDirection::Short, 1_000_000.0),
        order(3, LiqDirection::Any, 1_000_000.0),
    ]);
    assert_eq!(r.liq(PositionSide::Long, 999_999.99), NONE, "$999 999.99");
    assert_eq!(r.liq(PositionSide::Long, 1_000_000.0), [1, 3], "$1M long: long and any");
    assert_eq!(r.liq(PositionSide::Short, 1_000_000.0), [2, 3], "$1M short: short and any");
    let f = r.out[0];
    assert_eq!((f.ts_ms, f.last), (r.t, false), "the liquidation's time; repeating");
    assert_eq!(r.liq(PositionSide::Short, 5_000_000.0), [2, 3], "no state: every qualifying one fires");
}

#[test]
fn one_message_fires_each_alert_once_for_its_largest_with_the_count() {
    let mut r = Rig::new(&[
        order(1, LiqDirection::Long, 100_000.0),
        order(2, LiqDirection::Any, 100_000.0),
        order(3, LiqDirection::Long, 250_000.0),
        order(4, LiqDirection::Short, 100_000.0),
    ]);
    let message = [
        liq(PositionSide::Long, 150_000.0, T0 + 1),
        liq(PositionSide::Long, 99_999.99, T0 + 2),
        liq(PositionSide::Long, 300_000.0, T0 + 3),
        liq(PositionSide::Short, 120_000.0, T0 + 4),
        liq(PositionSide::Long, 100_000.0, T0 + 5),
    ];
    assert_eq!(r.message(&message), [1, 2, 3, 4]);
    let by_id = |id: u64| r.out.iter().find(|f| f.id == id).copied().expect("fired");
    let PerpHit::Order { index, liquidation, count } = by_id(1).hit else { panic!("an order hit") };
    assert_eq!((index, liquidation.usd(), count), (2, 300_000.0, 3), "three longs qualified, the largest is the third");
    assert_eq!(by_id(1).ts_ms, T0 + 3, "the largest's time");
    let PerpHit::Order { index, count, .. } = by_id(2).hit else { panic!("an order hit") };
    assert_eq!((index, count), (2, 4), "any: three longs and the short");
    let PerpHit::Order { count, .. } = by_id(3).hit else { panic!("an order hit") };
    assert_eq!(count, 1, "only the $300k is worth $250k");
    let PerpHit::Order { index, count, .. } = by_id(4).hit else { panic!("an order hit") };
    assert_eq!((index, count), (3, 1), "the short side's own largest");
    assert_eq!(by_id(4).ts_ms, T0 + 4);
    assert_eq!(r.message(&[liq(PositionSide::Short, 99_999.99, T0 + 9)]), NONE);
}

#[test]
fn a_message_longer_than_the_sorted_bound_is_counted_as_exactly() {
    let mut r = Rig::new(&[order(1, LiqDirection::Any, 1_000.0), order(2, LiqDirection::Short, 5_000.0)]);
    let n = LIQS_PER_MESSAGE_MAX + 44;
    let message: Vec<Liquidation> = (0..n)
        .map(|i| {
            let side = if i % 3 == 0 { PositionSide::Short } else { PositionSide::Long };
            liq(side, (i as f64) * 37.5, T0 + i as i64)
        })
        .collect();
    let expected = |min: f64, short_only: bool| {
        message.iter().filter(|l| l.usd() >= min && (!short_only || l.side == PositionSide::Short)).count() as u32
    };
    assert_eq!(r.message(&message), [1, 2]);
    for (id, min, short_only) in [(1, 1_000.0, false), (2, 5_000.0, true)] {
        let f = r.out.iter().find(|f| f.id == id).copied().expect("fired");
        let PerpHit::Order { count, index, .. } = f.hit else { panic!("an order hit") };
        assert_eq!(count, expected(min, short_only), "alert {id}");
        assert_eq!(
            message[index].usd(),
            if short_only { ((n - 1) / 3 * 3) as f64 * 37.5 } else { (n - 1) as f64 * 37.5 }
        );
    }
}

#[test]
fn a_sum_alert_fires_once_per_passing() {
    let mut r = Rig::new(&[]);
    r.sums(M5, 0.0, 0.0);
    r.book.insert(sum(1, M5, LiqDirection::Long, 10_000.0)).expect("room");
    r.book.insert(sum(2, M5, LiqDirection::Any, 10_000.0)).expect("room");
    assert_eq!(r.sums(M5, 9_999.99, 0.0), NONE);
    assert_eq!(r.sums(M5, 10_000.0, 0.0), [1, 2], "the update that brings it to the minimum");
    assert!(matches!(r.out[0].hit, PerpHit::Sum { window: M5, sum_usd, .. } if sum_usd == 10_000.0));
    assert_eq!(r.sums(M5, 15_000.0, 0.0), NONE, "once");
    assert_eq!(r.sums(M5, 10_000.0, 0.0), NONE, "at the minimum is not below it");
    assert_eq!(r.sums(M5, 9_999.99, 1.0), NONE, "below (long): 1 re-armed; any is at 10 000.99");
    assert_eq!(r.book.arm(1), Some(Arm::Armed));
    assert_eq!(r.book.arm(2), Some(Arm::Spent));
    assert_eq!(r.sums(M5, 10_000.0, 1.0), [1], "passing again");
    assert_eq!(r.sums(H1, 50_000.0, 50_000.0), NONE, "another window");
}

#[test]
fn a_sum_alert_made_while_its_sum_holds_waits_until_it_no_longer_does() {
    let mut r = Rig::new(&[]);
    r.sums(M5, 20_000.0, 0.0);
    r.book.insert(sum(1, M5, LiqDirection::Long, 10_000.0)).expect("room");
    assert_eq!(r.book.arm(1), Some(Arm::Waiting));
    assert_eq!(r.sums(M5, 25_000.0, 0.0), NONE, "made while above: no firing");
    assert_eq!(r.sums(M5, 9_000.0, 0.0), NONE);
    assert_eq!(r.sums(M5, 10_000.0, 0.0), [1]);
    // Made before the window is known: it waits for a value below too.
    let mut r = Rig::new(&[sum(2, H1, LiqDirection::Short, 10_000.0)]);
    assert_eq!(r.book.arm(2), Some(Arm::Waiting));
    assert_eq!(r.sums(H1, 0.0, 12_000.0), NONE, "first value, already above");
    assert_eq!(r.sums(H1, 0.0, 5_000.0), NONE);
    assert_eq!(r.sums(H1, 0.0, 12_000.0), [2]);
    // Made while below: armed at once.
    r.book.insert(sum(3, H1, LiqDirection::Short, 20_000.0)).expect("room");
    assert_eq!(r.book.arm(3), Some(Arm::Armed));
    assert_eq!(r.sums(H1, 0.0, 20_000.0), [3]);
}

#[test]
fn an_oi_alert_fires_at_its_pct_and_rearms_below_four_fifths() {
    let mut r = Rig::new(&[]);
    r.oi(H1, 0.0, 1e9);
    for s in [
        oi(1, H1, OiDirection::Up, 10.0, 0),
        oi(2, H1, OiDirection::Down, 10.0, 0),
        oi(3, H1, OiDirection::Any, 10.0, 0),
    ] {
        r.book.insert(s).expect("room");
    }
    assert_eq!(r.oi(H1, 9.999999, 1e9), NONE);
    assert_eq!(r.oi(H1, 10.0, 1e9), [1, 3], "+10 %: up and any");
    assert!(
        matches!(r.out[0].hit, PerpHit::Oi { window: H1, change_pct, oi_usd } if change_pct == 10.0 && oi_usd == 1e9)
    );
    assert_eq!(r.oi(H1, 12.0, 1e9), NONE, "once");
    assert_eq!(r.oi(H1, 8.0, 1e9), NONE, "at 0.8 × pct: not below it");
    assert_eq!(r.oi(H1, 10.0, 1e9), NONE, "so not re-armed");
    assert_eq!(r.oi(H1, 7.999999, 1e9), NONE, "below 8 %: re-armed");
    assert_eq!(r.book.arm(1), Some(Arm::Armed));
    assert_eq!(r.oi(H1, 10.0, 1e9), [1, 3]);
    assert_eq!(r.oi(H1, -10.0, 1e9), [2], "-10 %: down; any is spent (its size was 10 %)");
    assert_eq!(r.oi(H1, -7.0, 1e9), NONE, "all re-armed");
    assert_eq!(r.oi(H1, -10.5, 1e9), [2, 3], "any takes either way");
    assert_eq!(r.oi(PerpInterval::H4, 50.0, 1e9), NONE, "another window");
}

#[test]
fn the_min_usd_gate_neither_fires_nor_arms_under_it() {
    let mut r = Rig::new(&[]);
    r.oi(M5, 0.0, 1e6);
    r.book.insert(oi(1, M5, OiDirection::Up, 5.0, 2_000_000)).expect("room");
    r.book.insert(oi(2, M5, OiDirection::Up, 5.0, 0)).expect("room");
    assert_eq!(r.book.arm(1), Some(Arm::Waiting), "made under its min_usd: gated, waiting");
    assert_eq!(r.oi(M5, 6.0, 1_999_999.0), [2], "a dollar under: gated");
    assert_eq!(r.oi(M5, 1.0, 1_999_999.0), NONE);
    assert_eq!(r.book.arm(1), Some(Arm::Waiting), "gated: not armed by the fall");
    assert_eq!(r.oi(M5, 6.0, 2_000_000.0), [2], "at min_usd 1 qualifies, but it was waiting and 6 % holds");
    assert_eq!(r.oi(M5, 1.0, 2_000_000.0), NONE, "armed now");
    assert_eq!(r.oi(M5, 5.0, 2_000_001.0), [1, 2]);
    assert_eq!(r.oi(M5, 1.0, 10.0), NONE, "gated again while spent: stays spent");
    assert_eq!(r.book.arm(1), Some(Arm::Spent));
    assert_eq!(r.oi(M5, 5.0, 3e6), [2], "qualifies again, still spent: the fall came while gated");
}

#[test]
fn a_funding_alert_crosses_once_and_rearms_half_a_hundredth_back() {
    let mut r = Rig::new(&[]);
    r.funding(0.01);
    let above = FundingLevel { direction: FundingDirection::Above, pct_micro: 50_000 };
    assert!(r.book.funding_may_create(&above));
    assert!(!r.book.funding_may_create(&FundingLevel { pct_micro: 10_000, ..above }), "at the rate: 422");
    r.book.insert(funding(1, FundingDirection::Above, 0.05)).expect("room");
    r.book.insert(funding(2, FundingDirection::Below, -0.01)).expect("room");
    assert_eq!(r.book.arm(1), Some(Arm::Armed));
    assert_eq!(r.funding(0.049999), NONE);
    assert_eq!(r.funding(0.05), [1], "reaches the level");
    assert!(matches!(r.out[0].hit, PerpHit::Funding { rate8h } if rate8h == 0.05));
    assert_eq!(r.funding(0.046), NONE, "back, but not by 0.005");
    assert_eq!(r.funding(0.0451), NONE);
    assert_eq!(r.funding(0.06), NONE, "not re-armed");
    assert_eq!(r.funding(0.045), NONE, "0.005 back: re-armed");
    assert_eq!(r.book.arm(1), Some(Arm::Armed));
    assert_eq!(r.funding(0.051), [1]);
    assert_eq!(r.funding(-0.01), [2], "below: reaches −0.01");
    assert_eq!(r.funding(-0.006), NONE);
    assert_eq!(r.book.arm(2), Some(Arm::Spent));
    assert_eq!(r.funding(-0.005), NONE, "0.005 above the level: re-armed");
    assert_eq!(r.book.arm(2), Some(Arm::Armed));
}

#[test]
fn a_funding_alert_made_before_funding_is_known_arms_on_the_near_side() {
    let mut r = Rig::new(&[]);
    let above = FundingLevel { direction: FundingDirection::Above, pct_micro: 50_000 };
    assert!(r.book.funding_may_create(&above), "not known: accepted");
    r.book.insert(funding(1, FundingDirection::Above, 0.05)).expect("room");
    r.book.insert(funding(2, FundingDirection::Below, 0.05)).expect("room");
    assert_eq!(r.book.arm(1), Some(Arm::Waiting));
    assert_eq!(r.funding(0.06), NONE, "first value on the far side: 1 waits; 2's near side is above");
    assert_eq!(r.book.arm(1), Some(Arm::Waiting));
    assert_eq!(r.book.arm(2), Some(Arm::Armed));
    assert_eq!(r.funding(0.049999), [2], "1 arms on the near side (no margin); 2 reaches its level");
    assert_eq!(r.book.arm(1), Some(Arm::Armed));
    assert_eq!(r.funding(0.05), [1]);
}

#[test]
fn pause_rearm_and_remove() {
    let mut r = Rig::new(&[order(1, LiqDirection::Long, 100.0), sum(2, M5, LiqDirection::Long, 1_000.0)]);
    r.sums(M5, 0.0, 0.0);
    assert!(r.book.pause(1) && r.book.pause(2));
    assert!(r.book.is_paused(1));
    assert_eq!(r.liq(PositionSide::Long, 500.0), NONE, "paused: not evaluated");
    assert_eq!(r.sums(M5, 2_000.0, 0.0), NONE);
    assert!(r.book.rearm(1) && r.book.rearm(2));
    assert!(!r.book.is_paused(2));
    assert_eq!(r.book.arm(2), Some(Arm::Waiting), "resumed while its sum holds: it waits");
    assert_eq!(r.liq(PositionSide::Long, 500.0), [1]);
    assert_eq!(r.sums(M5, 3_000.0, 0.0), NONE);
    assert_eq!(r.sums(M5, 500.0, 0.0), NONE);
    assert_eq!(r.sums(M5, 1_500.0, 0.0), [2]);
    // Re-armed as if made (a cooldown's end): waiting while its sum holds, armed once below.
    assert!(r.book.rearm(2));
    assert_eq!(r.book.arm(2), Some(Arm::Waiting), "its sum holds: waiting");
    assert_eq!(r.sums(M5, 1_200.0, 0.0), NONE);
    r.sums(M5, 1_500.0, 0.0);
    r.sums(M5, 500.0, 0.0);
    assert_eq!(r.book.arm(2), Some(Arm::Armed));
    r.sums(M5, 1_500.0, 0.0);
    assert_eq!(r.book.arm(2), Some(Arm::Spent));
    r.sums(M5, 500.0, 0.0);
    r.book.pause(2);
    r.sums(M5, 5_000.0, 0.0);
    r.sums(M5, 700.0, 0.0);
    assert!(r.book.rearm(2));
    assert_eq!(r.book.arm(2), Some(Arm::Armed), "resumed below its minimum: armed at once");
    assert_eq!(r.sums(M5, 1_000.0, 0.0), [2]);
    assert!(r.book.remove(1) && r.book.remove(2));
    assert!(!r.book.remove(1) && !r.book.pause(1) && !r.book.rearm(1));
    assert_eq!(r.liq(PositionSide::Long, 500.0), NONE);
    assert_eq!(r.sums(M5, 0.0, 0.0), NONE);
    assert_eq!(r.sums(M5, 5_000.0, 0.0), NONE);
    assert!(r.book.is_empty());
}

#[test]
fn a_one_shot_alert_fires_once_and_leaves() {
    let specs = [
        PerpAlertSpec { repeat: false, ..order(1, LiqDirection::Any, 100.0) },
        PerpAlertSpec { repeat: false, ..order(2, LiqDirection::Any, 200.0) },
        PerpAlertSpec { repeat: false, ..oi(3, H1, OiDirection::Up, 1.0, 5) },
        PerpAlertSpec { repeat: false, ..funding(4, FundingDirection::Below, 0.0) },
    ];
    let mut r = Rig::new(&specs);
    r.oi(H1, 0.0, 10.0);
    r.funding(0.01);
    assert_eq!(r.liq(PositionSide::Short, 150.0), [1]);
    assert!(r.out[0].last);
    assert_eq!(r.liq(PositionSide::Short, 250.0), [2]);
    assert_eq!(r.oi(H1, 1.0, 10.0), [3]);
    assert_eq!(r.funding(0.0), [4]);
    assert!(r.out[0].last);
    assert!(r.book.is_empty());
    assert_eq!(r.liq(PositionSide::Short, 250.0), NONE);
    // The slots are reused.
    r.book.insert(order(5, LiqDirection::Any, 100.0)).expect("room");
    assert_eq!(r.liq(PositionSide::Long, 100.0), [5]);
}

#[test]
fn a_cooldown_holds_back_firings_and_the_alert_moves_on_as_if_it_fired() {
    let mut r = Rig::new(&[PerpAlertSpec { cooldown_s: 60, ..sum(1, M5, LiqDirection::Long, 1_000.0) }]);
    r.sums(M5, 0.0, 0.0);
    assert_eq!(r.sums(M5, 1_000.0, 0.0), [1]);
    r.sums(M5, 0.0, 0.0);
    assert_eq!(r.sums(M5, 1_000.0, 0.0), NONE, "within the minute: held back");
    assert_eq!(r.book.arm(1), Some(Arm::Spent), "as if it had fired");
    r.t += 60_000;
    assert_eq!(r.sums(M5, 2_000.0, 0.0), NONE, "spent: the minute is over but it has not re-armed");
    r.sums(M5, 0.0, 0.0);
    assert_eq!(r.sums(M5, 1_000.0, 0.0), [1]);
    // A new cooldown counts from the last firing and changes nothing else.
    r.book.insert(sum(1, M5, LiqDirection::Long, 1_000.0)).expect("retuned");
    assert_eq!(r.book.arm(1), Some(Arm::Spent));
    r.sums(M5, 0.0, 0.0);
    assert_eq!(r.sums(M5, 1_000.0, 0.0), [1], "no cooldown now");
}

#[test]
fn firings_of_one_alert_are_at_least_a_millisecond_apart() {
    let mut r = Rig::new(&[order(1, LiqDirection::Any, 100.0)]);
    assert_eq!(r.message(&[liq(PositionSide::Long, 100.0, T0)]), [1]);
    assert_eq!(r.message(&[liq(PositionSide::Long, 100.0, T0)]), [1]);
    assert_eq!(r.out[0].ts_ms, T0 + 1, "the same millisecond takes the next");
    assert_eq!(r.message(&[liq(PositionSide::Long, 100.0, T0 - 5)]), [1]);
    assert_eq!(r.out[0].ts_ms, T0 + 2, "an older one too");
}

#[test]
fn the_bound_refuses_an_insert_and_a_replacement_is_not_one_more() {
    let mut book = PerpAlertBook::new(2);
    assert_eq!(book.alerts_max(), 2);
    book.insert(order(1, LiqDirection::Long, 100.0)).expect("room");
    book.insert(funding(2, FundingDirection::Above, 0.05)).expect("room");
    assert_eq!(book.insert(order(3, LiqDirection::Long, 100.0)), Err(InsertError::Full { alerts_max: 2 }));
    assert_eq!(book.len(), 2);
    book.insert(order(2, LiqDirection::Short, 300.0)).expect("a new spec for 2 replaces it");
    assert_eq!(book.spec(2).map(|s| s.condition), Some(order(2, LiqDirection::Short, 300.0).condition));
    assert!(book.remove(1));
    book.insert(order(3, LiqDirection::Long, 100.0)).expect("room again");
    assert_eq!(
        book.insert(oi(4, PerpInterval::M1, OiDirection::Up, 1.0, 0)),
        Err(InsertError::Window(PerpInterval::M1))
    );
    assert!(book.remove(3));
    assert_eq!(book.insert(oi(4, H1, OiDirection::Up, 0.0, 0)), Err(InsertError::Pct(0)));
    assert!(!book.contains(4));
}

/// An update visits what it fires or re-arms, not the rest: 10 000 alerts per kind, counted.
#[test]
fn an_update_visits_only_what_it_changes() {
    let n = 10_000u64;
    let mut specs = Vec::new();
    for i in 0..n {
        specs.push(order(i, LiqDirection::Long, 1_000.0 * (i + 1) as f64));
        specs.push(sum(n + i, M5, LiqDirection::Long, 1_000.0 * (i + 1) as f64));
        specs.push(oi(2 * n + i, H1, OiDirection::Up, 0.1 * (i + 1) as f64, 1 + i));
    }
    let mut r = Rig::new(&[]);
    r.sums(M5, 0.0, 0.0);
    r.oi(H1, 0.0, 1e12);
    for s in &specs {
        r.book.insert(*s).expect("room");
    }
    fn visits(r: &mut Rig, update: &dyn Fn(&mut Rig) -> Vec<u64>) -> (u64, u64) {
        let before = r.book.visits();
        let fired = update(r).len() as u64;
        (fired, r.book.visits() - before)
    }
    assert_eq!(visits(&mut r, &|r| r.liq(PositionSide::Long, 3_500.0)), (3, 3), "three of 10 000 order alerts");
    assert_eq!(visits(&mut r, &|r| r.liq(PositionSide::Short, 1e9)), (0, 0), "the other side's list");
    assert_eq!(visits(&mut r, &|r| r.sums(M5, 2_500.0, 0.0)), (2, 2));
    assert_eq!(visits(&mut r, &|r| r.sums(M5, 2_600.0, 0.0)), (0, 0), "nothing changes: nothing visited");
    assert_eq!(visits(&mut r, &|r| r.sums(M5, 0.0, 0.0)), (0, 2), "two re-armed");
    assert_eq!(visits(&mut r, &|r| r.oi(H1, 0.3, 1e12)), (3, 3));
    assert_eq!(visits(&mut r, &|r| r.oi(H1, 0.25, 1e12)), (0, 0), "0.8 × 0.3 = 0.24: none re-armed");
    assert_eq!(visits(&mut r, &|r| r.oi(H1, 0.0, 5.5)), (0, 3 + (n - 5)), "re-armed three, gated those over $5.5");
    assert_eq!(visits(&mut r, &|r| r.oi(H1, 0.0, 6.0)), (0, 1), "one through the gate");
    assert_eq!(visits(&mut r, &|r| r.oi(H1, 0.6, 6.0)), (6, 6), "the six that qualify");
}

#[test]
fn updates_pause_rearm_and_remove_allocate_nothing() {
    let mut rng = Rng::new(7);
    let mut book = PerpAlertBook::new(4_000);
    let windows = [PerpInterval::M5, PerpInterval::H1, PerpInterval::D1];
    for id in 0..3_000u64 {
        let k = rng.below(100) as f64;
        let w = windows[rng.below(3)];
        let s = match id % 4 {
            0 => order(id, LIQ_DIRS[rng.below(3)], 1_000.0 + k * 500.0),
            1 => sum(id, w, LIQ_DIRS[rng.below(3)], 1_000.0 + k * 1_000.0),
            2 => oi(id, w, OI_DIRS[rng.below(3)], 0.5 + k * 0.1, rng.below(3) as u64 * 1_000_000),
            _ => funding(id, FUNDING_DIRS[rng.below(2)], -0.05 + k * 0.001),
        };
        book.insert(PerpAlertSpec { repeat: id % 7 != 0, cooldown_s: (id % 3) as u32, ..s }).expect("room");
    }
    let message: Vec<Liquidation> = (0..LIQS_PER_MESSAGE_MAX + 10)
        .map(|i| liq(if i % 2 == 0 { PositionSide::Long } else { PositionSide::Short }, i as f64 * 300.0, T0))
        .collect();
    let mut out = Vec::with_capacity(book.firings_max());
    let ((), n) = alloc::count(|| {
        for step in 0..2_000i64 {
            let t = T0 + step * 1_000;
            let x = rng.below(200) as f64;
            out.clear();
            match step % 5 {
                0 => book.on_liquidations(&message[..rng.below(40) + 1], &mut out),
                1 => book.on_liquidations(&message, &mut out),
                2 => book.on_sums(windows[rng.below(3)], t, sums(x * 600.0, x * 400.0), &mut out),
                3 => book.on_oi(windows[rng.below(3)], t, Some(x * 0.1 - 10.0), Some(x * 15_000.0), &mut out),
                _ => book.on_funding(t, x * 0.001 - 0.1, &mut out),
            }
            let id = rng.below(3_000) as u64;
            match rng.below(10) {
                0 => {
                    book.pause(id);
                }
                1 | 2 => {
                    book.rearm(id);
                }
                3 => {
                    book.remove(id);
                }
                _ => {}
            }
        }
    });
    assert_eq!(n, Some(0), "updates, pause, re-arm and removal allocate nothing");
    assert!(book.len() < 3_000, "some left (one-shots fired, removals)");
}

const LIQ_DIRS: [LiqDirection; 3] = [LiqDirection::Long, LiqDirection::Short, LiqDirection::Any];
const OI_DIRS: [OiDirection; 3] = [OiDirection::Up, OiDirection::Down, OiDirection::Any];
const FUNDING_DIRS: [FundingDirection; 2] = [FundingDirection::Above, FundingDirection::Below];

/// One alert as the model holds it: the one-alert rules of `perp_alert`, with the cooldown,
/// one-shot and millisecond rules as the book states them.
struct ModelAlert {
    spec: PerpAlertSpec,
    arm: Arm,
    paused: bool,
    quiet_until_ms: i64,
    last_ms: i64,
}

/// Every alert decided on its own, and the last values handed (for "as if made").
#[derive(Default)]
struct Model {
    alerts: Vec<ModelAlert>,
    sums: [Option<LiqSums>; 7],
    oi: [Option<(f64, f64)>; 7],
    rate8h: Option<f64>,
}

impl Model {
    /// Arm of an alert made now: waiting, then handed the last value (which never fires it).
    fn made(&self, c: &PerpCondition) -> Arm {
        let mut arm = Arm::Waiting;
        let fired = match *c {
            PerpCondition::Order(_) => false,
            PerpCondition::Sum { window, sum } => {
                self.sums[window.index()].is_some_and(|s| sum.on_sum(&mut arm, sum.sum(s.long_usd, s.short_usd)))
            }
            PerpCondition::Oi { window, change } => {
                self.oi[window.index()].is_some_and(|(c, u)| change.on_change(&mut arm, c, u))
            }
            PerpCondition::Funding(f) => self.rate8h.is_some_and(|r| f.on_rate(&mut arm, r)),
        };
        assert!(!fired, "no firing at creation");
        arm
    }

    /// Applies `decide` to every alert not paused; returns the firings sorted by id.
    fn update(&mut self, ts_ms: i64, decide: impl Fn(&PerpAlertSpec, &mut Arm) -> Option<PerpHit>) -> Vec<PerpFiring> {
        let mut out = Vec::new();
        for a in self.alerts.iter_mut().filter(|a| !a.paused) {
            let Some(hit) = decide(&a.spec, &mut a.arm) else { continue };
            let ts = match hit {
                PerpHit::Order { liquidation, .. } => liquidation.time_ms,
                _ => ts_ms,
            };
            let t = if a.last_ms == i64::MIN { ts } else { ts.max(a.last_ms + 1) };
            if t >= a.quiet_until_ms {
                a.quiet_until_ms = t + i64::from(a.spec.cooldown_s) * 1_000;
                a.last_ms = t;
                out.push(PerpFiring { id: a.spec.id, ts_ms: t, last: !a.spec.repeat, hit });
            }
            if !a.spec.repeat {
                a.paused = true;
                a.spec.id = u64::MAX; // gone: never fires again, never found by id
            }
        }
        self.alerts.retain(|a| a.spec.id != u64::MAX);
        out.sort_by_key(|f| f.id);
        out
    }

    fn find(&mut self, id: u64) -> Option<&mut ModelAlert> {
        self.alerts.iter_mut().find(|a| a.spec.id == id)
    }
}

fn random_alert(rng: &mut Rng, id: u64) -> PerpAlertSpec {
    let windows = [PerpInterval::M5, PerpInterval::H1];
    let w = windows[rng.below(2)];
    let s = match rng.below(4) {
        0 => order(id, LIQ_DIRS[rng.below(3)], 1_000.0 * (1 + rng.below(8)) as f64),
        1 => sum(id, w, LIQ_DIRS[rng.below(3)], 1_000.0 * (1 + rng.below(8)) as f64),
        2 => oi(id, w, OI_DIRS[rng.below(3)], [1.0, 2.0, 5.0, 10.0][rng.below(4)], [0, 1_000_000][rng.below(2)]),
        _ => funding(id, FUNDING_DIRS[rng.below(2)], 0.01 * (rng.below(7) as f64 - 3.0)),
    };
    PerpAlertSpec { repeat: rng.chance(80), cooldown_s: [0, 0, 3][rng.below(3)], ..s }
}

/// Seeded: random alerts, pauses, re-arms, removals and updates of every kind, on values that
/// land on the thresholds (sums in $500 steps, OI in 0.5 % steps, funding in 0.0025 steps); the
/// book's firings equal the one-alert rules' after every update, and so do the arms.
#[test]
fn the_book_decides_what_each_alert_decides_on_its_own() {
    let mut rng = Rng::from_env(0x05ee_d017);
    let mut rearmed = 0;
    for round in 0..20 {
        let mut book = PerpAlertBook::new(64);
        let mut model = Model::default();
        let mut out = Vec::with_capacity(64);
        let mut next_id = 0u64;
        let windows = [PerpInterval::M5, PerpInterval::H1];
        for step in 0..600i64 {
            let t = T0 + step * 700;
            match rng.below(12) {
                0 | 1 if book.len() < 64 => {
                    next_id += 1;
                    let s = random_alert(&mut rng, next_id);
                    book.insert(s).expect("room");
                    let arm = model.made(&s.condition);
                    model.alerts.push(ModelAlert {
                        spec: s,
                        arm,
                        paused: false,
                        quiet_until_ms: i64::MIN,
                        last_ms: i64::MIN,
                    });
                }
                2 => {
                    let id = 1 + rng.below(next_id.max(1) as usize) as u64;
                    let op = rng.below(3);
                    let held = match op {
                        0 => book.pause(id),
                        1 => book.rearm(id),
                        _ => book.remove(id),
                    };
                    let made = model.find(id).map(|a| a.spec.condition).map(|c| model.made(&c));
                    let Some(a) = model.find(id) else {
                        assert!(!held, "{id} is not held");
                        continue;
                    };
                    assert!(held);
                    match op {
                        0 => a.paused = true,
                        1 => (a.paused, a.arm) = (false, made.expect("held")),
                        _ => model.alerts.retain(|a| a.spec.id != id),
                    }
                }
                3..=5 => {
                    let k = rng.below(6) + 1;
                    let message: Vec<Liquidation> = (0..k)
                        .map(|i| {
                            let side = if rng.chance(50) { PositionSide::Long } else { PositionSide::Short };
                            liq(side, 500.0 * rng.below(12) as f64, t + i as i64 * (rng.below(3) as i64 - 1))
                        })
                        .collect();
                    out.clear();
                    book.on_liquidations(&message, &mut out);
                    let expected = model.update(t, |s, _| {
                        let PerpCondition::Order(o) = s.condition else { return None };
                        let mut best: Option<usize> = None;
                        let mut count = 0;
                        for (i, l) in message.iter().enumerate() {
                            if o.fires(l.side, l.usd()) {
                                count += 1;
                                if best.is_none_or(|b| l.usd() > message[b].usd()) {
                                    best = Some(i);
                                }
                            }
                        }
                        best.map(|index| PerpHit::Order { index, liquidation: message[index], count })
                    });
                    compare(&mut out, &expected, round, step);
                }
                6 | 7 => {
                    let w = windows[rng.below(2)];
                    let s = if rng.chance(5) {
                        None
                    } else {
                        sums(500.0 * rng.below(12) as f64, 500.0 * rng.below(8) as f64)
                    };
                    model.sums[w.index()] = s;
                    out.clear();
                    book.on_sums(w, t, s, &mut out);
                    let expected = model.update(t, |spec, arm| {
                        let PerpCondition::Sum { window, sum } = spec.condition else { return None };
                        let s = s.filter(|_| window == w)?;
                        let sum_usd = sum.sum(s.long_usd, s.short_usd);
                        sum.on_sum(arm, sum_usd).then_some(PerpHit::Sum { window, side: sum.direction, sum_usd })
                    });
                    compare(&mut out, &expected, round, step);
                }
                8 | 9 => {
                    let w = windows[rng.below(2)];
                    let change = 0.5 * (rng.below(41) as f64 - 20.0);
                    let usd = [0.0, 999_999.0, 1_000_000.0, 5e6][rng.below(4)];
                    model.oi[w.index()] = Some((change, usd));
                    out.clear();
                    book.on_oi(w, t, Some(change), Some(usd), &mut out);
                    let expected = model.update(t, |spec, arm| {
                        let PerpCondition::Oi { window, change: c } = spec.condition else { return None };
                        if window != w {
                            return None;
                        }
                        c.on_change(arm, change, usd).then_some(PerpHit::Oi { window, change_pct: change, oi_usd: usd })
                    });
                    compare(&mut out, &expected, round, step);
                }
                _ => {
                    let rate8h = 0.0025 * (rng.below(41) as f64 - 20.0);
                    model.rate8h = Some(rate8h);
                    out.clear();
                    book.on_funding(t, rate8h, &mut out);
                    let expected = model.update(t, |spec, arm| {
                        let PerpCondition::Funding(f) = spec.condition else { return None };
                        f.on_rate(arm, rate8h).then_some(PerpHit::Funding { rate8h })
                    });
                    compare(&mut out, &expected, round, step);
                }
            }
            assert_eq!(book.len(), model.alerts.len(), "round {round} step {step}: alerts held");
            rearmed += model.alerts.iter().filter(|a| a.arm == Arm::Armed).count();
            for a in &model.alerts {
                assert_eq!(book.is_paused(a.spec.id), a.paused, "round {round} step {step}: alert {}", a.spec.id);
                if !matches!(a.spec.condition, PerpCondition::Order(_)) {
                    assert_eq!(book.arm(a.spec.id), Some(a.arm), "round {round} step {step}: {:?}", a.spec);
                }
            }
        }
    }
    let fired: Vec<usize> = FIRED.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    eprintln!("firings by kind (order, sum, oi, funding): {fired:?}");
    assert!(fired.iter().all(|&n| n > 100) && rearmed > 1_000, "every rule exercised: {fired:?}");
}

/// Firings of each kind the seeded test saw (order, sum, oi, funding), so that it shows it
/// exercised every rule.
static FIRED: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

fn compare(out: &mut [PerpFiring], expected: &[PerpFiring], round: usize, step: i64) {
    out.sort_by_key(|f| f.id);
    assert_eq!(out, expected, "round {round} step {step}");
    for f in out.iter() {
        let kind = match f.hit {
            PerpHit::Order { .. } => 0,
            PerpHit::Sum { .. } => 1,
            PerpHit::Oi { .. } => 2,
            PerpHit::Funding { .. } => 3,
        };
        FIRED[kind].fetch_add(1, Ordering::Relaxed);
    }
}
