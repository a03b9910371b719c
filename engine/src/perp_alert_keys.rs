//! How a derivatives alert's condition maps to its group and its heap keys in
//! [`crate::perp_alert_book`], in integer units (cents, millionths of a percent): every group's
//! update is one number, and an alert fires or re-arms by comparing it with its keys.
//!
//! The layout: [`GROUPS`] groups of two heaps each (armed, disarmed), then two gate heaps per
//! window, [`HEAPS`] in all. Pure functions of the condition; nothing here allocates.

use crate::perp_alert::{Arm, FundingDirection, LiqDirection, LiqOrder, OiDirection, PerpCondition};
use crate::perp_interval::WINDOWS;
use crate::perp_window::PositionSide;

/// `oi` re-arms once the change's size is below this share of `pct`, in tenths (as
/// [`crate::perp_alert`]).
const OI_REARM_TENTHS: i64 = 8;
/// `funding` re-arms once `rate8h` is this far back on the near side, millionths of a percent.
const FUNDING_REARM_MICRO: i64 = 5_000;

/// Groups: `sum` per (window, side), `oi` per (window, direction), `funding` per direction.
const SUM_GROUPS: usize = WINDOWS * 3;
const OI_GROUPS: usize = WINDOWS * 3;
pub(crate) const GROUPS: usize = SUM_GROUPS + OI_GROUPS + 2;
/// Heaps: two per group (armed, disarmed), then two per window for the `oi` gate (gated,
/// qualifying).
pub(crate) const HEAPS: usize = 2 * GROUPS + 2 * WINDOWS;

/// The group of an alert with state.
pub(crate) fn group(c: &PerpCondition) -> usize {
    match *c {
        PerpCondition::Sum { window, sum } => sum_group(window.index(), sum.direction),
        PerpCondition::Oi { window, change } => oi_group(window.index(), change.direction),
        PerpCondition::Funding(f) => funding_group(f.direction),
        PerpCondition::Order(_) => unreachable!("an order alert has no group"),
    }
}

pub(crate) fn sum_group(w: usize, d: LiqDirection) -> usize {
    w * 3 + liq_index(d)
}

pub(crate) fn oi_group(w: usize, d: OiDirection) -> usize {
    SUM_GROUPS
        + w * 3
        + match d {
            OiDirection::Up => 0,
            OiDirection::Down => 1,
            OiDirection::Any => 2,
        }
}

pub(crate) fn funding_group(d: FundingDirection) -> usize {
    SUM_GROUPS
        + OI_GROUPS
        + match d {
            FundingDirection::Above => 0,
            FundingDirection::Below => 1,
        }
}

/// Window `w`'s gate heaps: (gated, by `min_usd`; qualifying, by minus `min_usd`).
pub(crate) fn gate_heaps(w: usize) -> (usize, usize) {
    (2 * GROUPS + 2 * w, 2 * GROUPS + 2 * w + 1)
}

/// The window whose gate an `oi` alert with a `min_usd` sits in.
pub(crate) fn gate_window(c: &PerpCondition) -> Option<usize> {
    match c {
        PerpCondition::Oi { window, change } if change.min_usd > 0 => Some(window.index()),
        _ => None,
    }
}

pub(crate) fn gate_key(c: &PerpCondition) -> i64 {
    match c {
        PerpCondition::Oi { change, .. } => i64::try_from(change.min_usd).unwrap_or(i64::MAX),
        _ => 0,
    }
}

/// The group value at which an armed alert fires (`v >= key`).
pub(crate) fn fire_key(c: &PerpCondition) -> i64 {
    match c {
        PerpCondition::Sum { sum, .. } => i64::try_from(sum.min_usd_cents).unwrap_or(i64::MAX),
        PerpCondition::Oi { change, .. } => change.pct_micro,
        PerpCondition::Funding(f) => funding_value(f.direction, f.pct_micro),
        PerpCondition::Order(o) => order_key(o),
    }
}

/// The group value below which a disarmed alert re-arms (`v < key`): a waiting one once its
/// condition does not hold (`funding`: on the near side), a spent one by its type's rule.
pub(crate) fn rearm_key(c: &PerpCondition, fire: i64, arm: Arm) -> i64 {
    match (arm, c) {
        (Arm::Spent, PerpCondition::Oi { .. }) => fire * OI_REARM_TENTHS / 10,
        // rate8h at least 0.005 back: v <= fire - 5 000, i.e. v < fire - 4 999.
        (Arm::Spent, PerpCondition::Funding(_)) => fire - FUNDING_REARM_MICRO + 1,
        _ => fire,
    }
}

pub(crate) fn order_key(o: &LiqOrder) -> i64 {
    i64::try_from(o.min_usd_cents).unwrap_or(i64::MAX)
}

pub(crate) fn oi_value(d: OiDirection, change_micro: i64) -> i64 {
    match d {
        OiDirection::Up => change_micro,
        OiDirection::Down => change_micro.saturating_neg(),
        OiDirection::Any => change_micro.saturating_abs(),
    }
}

pub(crate) fn funding_value(d: FundingDirection, rate_micro: i64) -> i64 {
    match d {
        FundingDirection::Above => rate_micro,
        FundingDirection::Below => rate_micro.saturating_neg(),
    }
}

pub(crate) fn liq_index(d: LiqDirection) -> usize {
    match d {
        LiqDirection::Long => 0,
        LiqDirection::Short => 1,
        LiqDirection::Any => 2,
    }
}

pub(crate) fn side_index(side: PositionSide) -> usize {
    match side {
        PositionSide::Long => 0,
        PositionSide::Short => 1,
    }
}

pub(crate) fn side_matches(d: LiqDirection, side: PositionSide) -> bool {
    d == LiqDirection::Any || liq_index(d) == side_index(side)
}

/// A USD value in whole cents, rounded (as [`crate::perp_alert`] compares).
pub(crate) fn cents(usd: f64) -> i64 {
    (usd * 100.0).round() as i64
}

/// A percent in whole millionths of a percent, rounded (as [`crate::perp_alert`] compares).
pub(crate) fn micro(pct: f64) -> i64 {
    (pct * 1e6).round() as i64
}
