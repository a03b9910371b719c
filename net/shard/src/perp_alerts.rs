//! The derivatives alerts of one book's perpetual, decided on the shard (`decisions.md` §17,
//! "Decided where the data is"): after each update the book takes, its [`PerpAlertBook`] is
//! handed what changed, and each of its firings leaves as a [`Firing`] whose
//! [`PerpTrigger`] carries the numbers of the body, read from the book at that moment.
//!
//! What each update hands the alerts:
//! - a liquidation: the `order` alerts (that one liquidation, as the simulator sends one a
//!   message), then every window's sums for the `sum` alerts;
//! - a mark/OI/funding update (once a second per contract): every OI window's change with the
//!   pair's `oiUsd` for the `oi` alerts, `rate8h` for the `funding` alerts, and every window's
//!   sums again, so that a sum that fell below an alert's `min_usd` as its window moved re-arms
//!   it within a second (§17: "re-arms once the sum is below `min_usd` again").
//!
//! A stale value evaluates nothing (§17): OI or funding marked stale by the book is not handed.
//!
//! Bounds: at most [`PERP_ALERTS_PER_BOOK_MAX`] derivatives alerts per book (an insert beyond is
//! refused and logged; the plans' caps keep an account far below it). Allocates nothing: the
//! firings go to a buffer with room for the book's most firings, reserved at insert.

use rampart_engine::firing::{Detail, Firing, PerpTrigger};
use rampart_engine::perp_alert::{LiqDirection, PerpCondition};
use rampart_engine::perp_alert_book::{PerpAlertBook, PerpFiring, PerpHit};
use rampart_engine::perp_book::{Liquidation, PerpBook, PerpInterval};
use rampart_engine::perp_window::PositionSide;
use rampart_engine::Price;

/// Derivatives alerts one book holds at most.
pub const PERP_ALERTS_PER_BOOK_MAX: usize = 100_000;

/// What a book just took.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Update {
    /// One liquidation.
    Liquidation(Liquidation),
    /// A mark, OI and funding update.
    Figures,
}

/// Hands `alerts` what `update` changed in `book` (taken at `now_ms`, stamped `ts_ms` by the
/// venue); firings go to `out`, which has room for `alerts.firings_max()` more per call of the
/// alert book. Allocates nothing.
pub(crate) fn evaluate(
    book: &PerpBook,
    alerts: &mut PerpAlertBook,
    now_ms: i64,
    ts_ms: i64,
    update: Update,
    out: &mut Vec<PerpFiring>,
) {
    if alerts.is_empty() {
        return;
    }
    match update {
        Update::Liquidation(l) => alerts.on_liquidations(std::slice::from_ref(&l), out),
        Update::Figures => {
            if let Some(oi) = book.oi(now_ms).filter(|o| !o.stale) {
                for w in PerpInterval::OI {
                    let change = book.oi_change(now_ms, w).map(|c| c.pct);
                    alerts.on_oi(w, ts_ms, change, oi.usd, out);
                }
            }
            if let Some(f) = book.funding(now_ms).filter(|f| !f.stale) {
                alerts.on_funding(ts_ms, f.rate8h, out);
            }
        }
    }
    for w in PerpInterval::ALL {
        alerts.on_sums(w, ts_ms, book.liquidations(now_ms, w), out);
    }
}

/// Hands an alert book that holds no alert the book's values now, so that the first alert put
/// on it is armed "as if made now" (§17) from them rather than waiting for the next update
/// (an empty alert book is not handed updates: [`evaluate`] returns at once). Fires nothing:
/// the book is empty.
pub(crate) fn prime(book: &PerpBook, alerts: &mut PerpAlertBook, now_ms: i64) {
    debug_assert!(alerts.is_empty());
    let mut none = Vec::new();
    if let Some(oi) = book.oi(now_ms).filter(|o| !o.stale) {
        for w in PerpInterval::OI {
            alerts.on_oi(w, oi.time_ms, book.oi_change(now_ms, w).map(|c| c.pct), oi.usd, &mut none);
        }
    }
    if let Some(f) = book.funding(now_ms).filter(|f| !f.stale) {
        alerts.on_funding(f.time_ms, f.rate8h, &mut none);
    }
    for w in PerpInterval::ALL {
        alerts.on_sums(w, now_ms, book.liquidations(now_ms, w), &mut none);
    }
    debug_assert!(none.is_empty());
}

/// A derivatives alert's firing as it leaves the shard: `price` the spot pair's last trade, its
/// trigger's numbers read from `book` at `now_ms`.
pub(crate) fn firing(book: &PerpBook, now_ms: i64, price: Price, f: &PerpFiring) -> Firing {
    let trigger = trigger(book, now_ms, f.hit);
    Firing { id: f.id, price, move_hundredths: None, ts_ms: f.ts_ms, last: f.last, detail: Detail::Perp(trigger) }
}

/// What a test send of an alert of `condition` shows (`POST /v1/alerts/{id}/test`, §16): the
/// trigger object a firing would carry now, read from `book` at `now_ms` whether or not the
/// condition holds; `None` while the book lacks the value (no liquidation of the alert's side in
/// 24 h, a window not yet watched, no OI or funding yet).
pub(crate) fn test_trigger(book: &PerpBook, condition: &PerpCondition, now_ms: i64) -> Option<PerpTrigger> {
    let side = |d: LiqDirection| match d {
        LiqDirection::Long => Some(PositionSide::Long),
        LiqDirection::Short => Some(PositionSide::Short),
        LiqDirection::Any => None,
    };
    let hit = match *condition {
        PerpCondition::Order(o) => {
            let liquidation = book.newest_of(side(o.direction), now_ms)?;
            PerpHit::Order { index: 0, liquidation, count: 1 }
        }
        PerpCondition::Sum { window, sum } => {
            let s = book.liquidations(now_ms, window)?;
            let sum_usd = match sum.direction {
                LiqDirection::Long => s.long_usd,
                LiqDirection::Short => s.short_usd,
                LiqDirection::Any => s.long_usd + s.short_usd,
            };
            PerpHit::Sum { window, side: sum.direction, sum_usd }
        }
        PerpCondition::Oi { window, .. } => {
            let oi = book.oi(now_ms)?;
            let change_pct = book.oi_change(now_ms, window)?.pct;
            PerpHit::Oi { window, change_pct, oi_usd: oi.usd.unwrap_or(0.0) }
        }
        PerpCondition::Funding(_) => PerpHit::Funding { rate8h: book.funding(now_ms)?.rate8h },
    };
    Some(trigger(book, now_ms, hit))
}

/// The trigger object of `hit`, its numbers read from `book` at `now_ms`.
fn trigger(book: &PerpBook, now_ms: i64, hit: PerpHit) -> PerpTrigger {
    match hit {
        PerpHit::Order { liquidation, count, .. } => PerpTrigger::Order { liquidation, count },
        PerpHit::Sum { window, side, sum_usd } => {
            let sums = book.liquidations(now_ms, window).unwrap_or_default();
            let count = match side {
                LiqDirection::Long => sums.long_count,
                LiqDirection::Short => sums.short_count,
                LiqDirection::Any => sums.long_count + sums.short_count,
            };
            let from_ms = book.window_from_ms(now_ms, window);
            PerpTrigger::Sum { side, sum_usd, count, window, from_ms, last: book.last_liquidation() }
        }
        PerpHit::Oi { window, change_pct, .. } => {
            let oi = book.oi(now_ms);
            let from = book.oi_change(now_ms, window);
            PerpTrigger::Oi {
                base: oi.map_or(0.0, |o| o.base),
                usd: oi.and_then(|o| o.usd),
                change_pct,
                window,
                from_base: from.map_or(0.0, |c| c.from_base),
                from_ms: from.map_or(0, |c| c.from_ms),
            }
        }
        PerpHit::Funding { rate8h } => {
            let now = book.funding(now_ms);
            PerpTrigger::Funding {
                rate: now.map_or(0.0, |n| n.rate),
                rate8h,
                interval_h: now.map_or(8, |n| n.interval_h),
                next_ms: now.map_or(0, |n| n.next_ms),
            }
        }
    }
}
