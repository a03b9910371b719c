//! The derivatives alerts' conditions and when each fires and re-arms (`decisions.md` §17,
//! "Alerts"), sans-I/O and one alert at a time: a `liquidations` alert (`order` on one
//! liquidation, `sum` over a window), an `oi` alert (the change of open interest over a window)
//! and a `funding` alert (`rate8h` crossing a level). The shard's index over many alerts (sorted
//! thresholds per book, window and side) is built on these rules; it is not written yet.
//!
//! Thresholds are whole units (cents, millionths of a percent), fixed at create, and each value
//! is rounded to the same unit before it is compared (`cents`, `micro`), so that a value at a
//! threshold compares as written (`0.045` is 45 000 millionths, not a float a hair above).
//!
//! Arming (§17, and §15's rule that an alert never fires at its creation): a `sum`, `oi` or
//! `funding` alert starts [`Arm::Waiting`] and arms once its condition does not hold (`funding`:
//! once `rate8h` is on the near side of the level); armed, it fires on the update that makes the
//! condition hold and is [`Arm::Spent`] until the re-arm rule frees it: `sum` once the sum is below
//! `min_usd` again, `oi` once the change's size is below 0.8 × `pct`, `funding` once `rate8h` is
//! 0.005 percentage points back on the near side. An `order` alert has no state: every
//! liquidation of its side worth `min_usd` fires it (its cooldown and the rest are §15's, applied
//! above this).

use crate::perp_interval::PerpInterval;
use crate::perp_window::PositionSide;

/// The side of a `liquidations` alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiqDirection {
    /// Long positions liquidated.
    Long,
    /// Short positions liquidated.
    Short,
    /// Either.
    Any,
}

/// The direction of an `oi` alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OiDirection {
    /// OI rising by `pct`.
    Up,
    /// OI falling by `pct`.
    Down,
    /// Either.
    Any,
}

/// The side of a `funding` alert's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FundingDirection {
    /// `rate8h` reaching the level from below.
    Above,
    /// `rate8h` reaching the level from above.
    Below,
}

/// The API's spellings of the three directions (`decisions.md` §17's tables), and back.
macro_rules! spelled {
    ($t:ident { $($v:ident => $s:literal),+ }) => {
        impl $t {
            /// Every value, in the order the refusals list them.
            pub const ALL: &'static [$t] = &[$($t::$v),+];

            /// The API's spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($t::$v => $s),+
                }
            }

            /// The value spelled `s`; `None` for anything else.
            pub fn parse(s: &str) -> Option<$t> {
                $t::ALL.iter().copied().find(|x| x.as_str() == s)
            }
        }
    };
}

spelled!(LiqDirection { Long => "long", Short => "short", Any => "any" });
spelled!(OiDirection { Up => "up", Down => "down", Any => "any" });
spelled!(FundingDirection { Above => "above", Below => "below" });

/// Where an alert with state stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    /// Made while its condition may hold: it arms once it does not.
    Waiting,
    /// Fires on the update that makes its condition hold.
    Armed,
    /// Fired: it re-arms by its re-arm rule.
    Spent,
}

/// `oi` re-arms once the change's size is below this share of `pct`, in tenths.
const OI_REARM_TENTHS: i64 = 8;
/// `funding` re-arms once `rate8h` is this far back on the near side, in millionths of a percent
/// (0.005 percentage points).
const FUNDING_REARM_MICRO: i64 = 5_000;

/// A `liquidations` alert of event `order`: fires on one liquidation of its side worth
/// `min_usd_cents` or more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiqOrder {
    /// Which side.
    pub direction: LiqDirection,
    /// Least value, cents.
    pub min_usd_cents: u64,
}

impl LiqOrder {
    /// True when a liquidation of `side` worth `usd` fires it.
    pub fn fires(&self, side: PositionSide, usd: f64) -> bool {
        side_matches(self.direction, side) && cents(usd) >= self.min_usd_cents as i64
    }
}

/// A `liquidations` alert of event `sum` (its window is the caller's: which window's sums it is
/// handed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiqSum {
    /// Which side's sum (`Any`: long + short).
    pub direction: LiqDirection,
    /// Least sum, cents.
    pub min_usd_cents: u64,
}

impl LiqSum {
    /// The sum it watches out of a window's long and short sums.
    pub fn sum(&self, long_usd: f64, short_usd: f64) -> f64 {
        match self.direction {
            LiqDirection::Long => long_usd,
            LiqDirection::Short => short_usd,
            LiqDirection::Any => long_usd + short_usd,
        }
    }

    /// Takes the window's sum after an update; true when it fires.
    pub fn on_sum(&self, arm: &mut Arm, sum_usd: f64) -> bool {
        let holds = cents(sum_usd) >= self.min_usd_cents as i64;
        step(arm, holds, !holds)
    }
}

/// An `oi` alert (its window is the caller's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OiChange {
    /// Which way.
    pub direction: OiDirection,
    /// The change it waits for, millionths of a percent (0.1 % to 500 %).
    pub pct_micro: i64,
    /// The pair's least OI in USD to qualify.
    pub min_usd: u64,
}

impl OiChange {
    /// Takes the window's `oiChange` (percent) and the pair's OI in USD after an OI update; true
    /// when it fires. A pair under `min_usd` neither fires nor arms.
    pub fn on_change(&self, arm: &mut Arm, change_pct: f64, oi_usd: f64) -> bool {
        if oi_usd < self.min_usd as f64 {
            return false;
        }
        let (change, pct) = (micro(change_pct), self.pct_micro);
        let rearm = pct * OI_REARM_TENTHS / 10;
        let (holds, below) = match self.direction {
            OiDirection::Up => (change >= pct, change < rearm),
            OiDirection::Down => (change <= -pct, change > -rearm),
            OiDirection::Any => (change.abs() >= pct, change.abs() < rearm),
        };
        step(arm, holds, below)
    }
}

/// A `funding` alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FundingLevel {
    /// Which side of the level it waits for.
    pub direction: FundingDirection,
    /// The level, millionths of a percent per 8 h (compared with `rate8h`).
    pub pct_micro: i64,
}

impl FundingLevel {
    /// Takes the pair's `rate8h` (percent per 8 h) after a funding update; true when it fires.
    pub fn on_rate(&self, arm: &mut Arm, rate8h: f64) -> bool {
        let (rate, level) = (micro(rate8h), self.pct_micro);
        let (holds, near, back) = match self.direction {
            FundingDirection::Above => (rate >= level, rate < level, rate <= level - FUNDING_REARM_MICRO),
            FundingDirection::Below => (rate <= level, rate > level, rate >= level + FUNDING_REARM_MICRO),
        };
        match arm {
            // A new alert arms on the first value on the near side, without the margin.
            Arm::Waiting if near => {
                *arm = Arm::Armed;
                false
            }
            _ => step(arm, holds, back),
        }
    }

    /// True when a one-pair alert may be made at `rate8h`: its level on the far side (§4's rule
    /// for price alerts; 422 otherwise).
    pub fn on_far_side(&self, rate8h: f64) -> bool {
        let (rate, level) = (micro(rate8h), self.pct_micro);
        match self.direction {
            FundingDirection::Above => level > rate,
            FundingDirection::Below => level < rate,
        }
    }
}

/// One update of an alert with state: `holds`, its condition now; `free`, its re-arm rule (for a
/// waiting one, that the condition does not hold). True when it fires.
fn step(arm: &mut Arm, holds: bool, free: bool) -> bool {
    match *arm {
        Arm::Armed if holds => {
            *arm = Arm::Spent;
            true
        }
        Arm::Waiting if !holds => {
            *arm = Arm::Armed;
            false
        }
        Arm::Spent if free => {
            *arm = Arm::Armed;
            false
        }
        _ => false,
    }
}

/// A USD value in whole cents (rounded).
fn cents(usd: f64) -> i64 {
    (usd * 100.0).round() as i64
}

/// A percent in whole millionths of a percent (rounded; `rate` and `funding_pct` have 6 decimals).
fn micro(pct: f64) -> i64 {
    (pct * 1e6).round() as i64
}

fn side_matches(direction: LiqDirection, side: PositionSide) -> bool {
    matches!(
        (direction, side),
        (LiqDirection::Any, _) | (LiqDirection::Long, PositionSide::Long) | (LiqDirection::Short, PositionSide::Short)
    )
}

/// A derivatives alert's condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerpCondition {
    /// `liquidations` with `event: order`.
    Order(LiqOrder),
    /// `liquidations` with `event: sum`, over `window`.
    Sum {
        /// The window summed over.
        window: PerpInterval,
        /// Side and least sum.
        sum: LiqSum,
    },
    /// `oi`, the change over `window`.
    Oi {
        /// The window of the change (not 1m: §17 keeps no 1m OI).
        window: PerpInterval,
        /// Direction, `pct` and `min_usd`.
        change: OiChange,
    },
    /// `funding`, on `rate8h`.
    Funding(FundingLevel),
}

impl PerpCondition {
    /// The alert type as the API spells it: `liquidations`, `oi` or `funding`.
    pub fn kind(&self) -> &'static str {
        match self {
            PerpCondition::Order(_) | PerpCondition::Sum { .. } => "liquidations",
            PerpCondition::Oi { .. } => "oi",
            PerpCondition::Funding(_) => "funding",
        }
    }

    /// The direction as the API spells it.
    pub fn direction(&self) -> &'static str {
        match self {
            PerpCondition::Order(o) => o.direction.as_str(),
            PerpCondition::Sum { sum, .. } => sum.direction.as_str(),
            PerpCondition::Oi { change, .. } => change.direction.as_str(),
            PerpCondition::Funding(f) => f.direction.as_str(),
        }
    }

    /// A `liquidations` alert's event (`order`, `sum`); `None` for the others.
    pub fn event(&self) -> Option<&'static str> {
        match self {
            PerpCondition::Order(_) => Some("order"),
            PerpCondition::Sum { .. } => Some("sum"),
            PerpCondition::Oi { .. } | PerpCondition::Funding(_) => None,
        }
    }

    /// The window of a `sum` or `oi` alert.
    pub fn window(&self) -> Option<PerpInterval> {
        match *self {
            PerpCondition::Sum { window, .. } | PerpCondition::Oi { window, .. } => Some(window),
            PerpCondition::Order(_) | PerpCondition::Funding(_) => None,
        }
    }

    /// `min_usd` in cents: a `liquidations` alert's least value, an `oi` alert's least `oiUsd`
    /// (whole dollars for `oi`).
    pub fn min_usd_cents(&self) -> Option<u64> {
        match *self {
            PerpCondition::Order(o) => Some(o.min_usd_cents),
            PerpCondition::Sum { sum, .. } => Some(sum.min_usd_cents),
            PerpCondition::Oi { change, .. } => Some(change.min_usd.saturating_mul(100)),
            PerpCondition::Funding(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_alert_fires_on_a_liquidation_of_its_side_worth_its_minimum() {
        let a = LiqOrder { direction: LiqDirection::Long, min_usd_cents: 100_000_000 };
        assert!(a.fires(PositionSide::Long, 1_000_000.0), "$1M long");
        assert!(!a.fires(PositionSide::Long, 999_999.99), "$999 999.99");
        assert!(!a.fires(PositionSide::Short, 5_000_000.0), "the other side");
        let any = LiqOrder { direction: LiqDirection::Any, min_usd_cents: 10_000 };
        assert!(any.fires(PositionSide::Short, 100.0) && any.fires(PositionSide::Long, 100.0));
    }

    #[test]
    fn a_sum_alert_fires_once_and_again_only_after_the_sum_fell_below() {
        let a = LiqSum { direction: LiqDirection::Any, min_usd_cents: 1_000_000 };
        assert_eq!(a.sum(6_000.0, 5_000.0), 11_000.0);
        assert_eq!(LiqSum { direction: LiqDirection::Short, ..a }.sum(6_000.0, 5_000.0), 5_000.0);
        let mut arm = Arm::Waiting;
        // Made while the sum already holds: it waits until it no longer does.
        assert!(!a.on_sum(&mut arm, 20_000.0));
        assert_eq!(arm, Arm::Waiting);
        assert!(!a.on_sum(&mut arm, 9_999.99));
        assert_eq!(arm, Arm::Armed);
        assert!(a.on_sum(&mut arm, 10_000.0), "the liquidation that brings it to the minimum");
        assert!(!a.on_sum(&mut arm, 15_000.0), "once");
        assert!(!a.on_sum(&mut arm, 12_000.0));
        assert!(!a.on_sum(&mut arm, 9_000.0), "below again: re-armed");
        assert_eq!(arm, Arm::Armed);
        assert!(a.on_sum(&mut arm, 10_500.0), "and again");
    }

    #[test]
    fn an_oi_alert_fires_on_its_change_and_rearms_below_four_fifths() {
        let up = OiChange { direction: OiDirection::Up, pct_micro: 10_000_000, min_usd: 0 };
        let mut arm = Arm::Waiting;
        assert!(!up.on_change(&mut arm, 1.0, 1e9));
        assert_eq!(arm, Arm::Armed);
        assert!(up.on_change(&mut arm, 10.0, 1e9), "+10 %");
        assert!(!up.on_change(&mut arm, 12.0, 1e9), "once");
        assert!(!up.on_change(&mut arm, 8.0, 1e9), "at 0.8 × pct: not yet below");
        assert_eq!(arm, Arm::Spent);
        assert!(!up.on_change(&mut arm, 7.99, 1e9));
        assert_eq!(arm, Arm::Armed);
        assert!(!up.on_change(&mut arm, -30.0, 1e9), "a fall is not an up move");
        assert!(up.on_change(&mut arm, 10.5, 1e9));
        let down = OiChange { direction: OiDirection::Down, ..up };
        let mut arm = Arm::Armed;
        assert!(!down.on_change(&mut arm, 20.0, 1e9) && down.on_change(&mut arm, -10.0, 1e9));
        assert!(!down.on_change(&mut arm, -7.0, 1e9) && arm == Arm::Armed);
        let any = OiChange { direction: OiDirection::Any, min_usd: 1_000_000, ..up };
        let mut arm = Arm::Armed;
        assert!(!any.on_change(&mut arm, -15.0, 999_999.0), "under min_usd");
        assert!(any.on_change(&mut arm, -15.0, 1_000_000.0));
    }

    #[test]
    fn a_funding_alert_crosses_once_and_rearms_half_a_hundredth_back() {
        let above = FundingLevel { direction: FundingDirection::Above, pct_micro: 50_000 };
        assert!(above.on_far_side(0.01) && !above.on_far_side(0.05) && !above.on_far_side(0.06));
        let mut arm = Arm::Waiting;
        // Not known at create: arms on the first value on the near side.
        assert!(!above.on_rate(&mut arm, 0.06));
        assert_eq!(arm, Arm::Waiting, "the far side: it waits");
        assert!(!above.on_rate(&mut arm, 0.049));
        assert_eq!(arm, Arm::Armed);
        assert!(above.on_rate(&mut arm, 0.05), "reaches the level");
        assert!(!above.on_rate(&mut arm, 0.048), "back, but not by 0.005");
        assert!(!above.on_rate(&mut arm, 0.05));
        assert!(!above.on_rate(&mut arm, 0.045), "0.005 back: re-armed");
        assert_eq!(arm, Arm::Armed);
        assert!(above.on_rate(&mut arm, 0.051));
        let below = FundingLevel { direction: FundingDirection::Below, pct_micro: -10_000 };
        assert!(below.on_far_side(0.0) && !below.on_far_side(-0.02));
        let mut arm = Arm::Armed;
        assert!(!below.on_rate(&mut arm, 0.0) && below.on_rate(&mut arm, -0.01));
        assert!(!below.on_rate(&mut arm, -0.006) && arm == Arm::Spent);
        assert!(!below.on_rate(&mut arm, -0.005) && arm == Arm::Armed);
    }
}
