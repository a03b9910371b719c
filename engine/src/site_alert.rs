//! The site's own alert kind (decisions §10), evaluated where its data is: market alerts against
//! each board number; and the wall side a wall alert (the site's density alert since §15)
//! watches. Pure logic; time is an argument.
//!
//! A market alert fires when a board number reaches its threshold from the other side; a
//! repeating one re-arms once the number is back on the near side.

use crate::book::Side;

/// Which walls a wall alert watches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WallSide {
    /// Bids only.
    Bid,
    /// Asks only.
    Ask,
    /// Either.
    Any,
}

impl WallSide {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            WallSide::Bid => "bid",
            WallSide::Ask => "ask",
            WallSide::Any => "any",
        }
    }

    /// The side the API spells `s`.
    pub fn parse(s: &str) -> Option<WallSide> {
        [WallSide::Bid, WallSide::Ask, WallSide::Any].into_iter().find(|w| w.as_str() == s)
    }

    /// True when a wall of `side` is one this watches.
    pub fn admits(self, side: Side) -> bool {
        matches!((self, side), (WallSide::Any, _) | (WallSide::Bid, Side::Bid) | (WallSide::Ask, Side::Ask))
    }
}

/// Which way a market alert's number must go.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    /// Reach the threshold from below.
    Above,
    /// Reach it from above.
    Below,
}

/// A market alert's condition.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct MarketSpec {
    /// Alert id.
    pub id: u64,
    /// Direction.
    pub direction: Direction,
    /// Threshold.
    pub threshold: f64,
    /// Re-arm after the number is back on the near side.
    pub repeat: bool,
}

/// Whether a board number at `value` has reached a market alert's threshold: at or above it for
/// `Above`, at or below it for `Below`. The one place this rule is written: the alert fires on
/// reaching it from the near side, a new alert is refused when its number has already reached it,
/// and the site shows an active alert whose number has reached it as waiting to re-arm.
pub fn market_reached(direction: Direction, threshold: f64, value: f64) -> bool {
    match direction {
        Direction::Above => value >= threshold,
        Direction::Below => value <= threshold,
    }
}

/// A market alert and whether it is armed.
#[derive(Clone, Debug)]
pub struct MarketAlert {
    spec: MarketSpec,
    armed: bool,
    done: bool,
}

/// What one value did to a market alert.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MarketOutcome {
    /// Nothing.
    Quiet,
    /// It fired; `last` when it does not repeat.
    Fired {
        /// This was its only firing.
        last: bool,
    },
}

impl MarketAlert {
    /// A new alert, armed only if `value` (the number when it is created) is on the near side:
    /// one created already past its threshold waits for the number to come back first. Without a
    /// value (NaN: a perpetuals' number no pair has yet) it takes its side from the first value.
    pub fn new(spec: MarketSpec, value: f64) -> MarketAlert {
        let mut a = MarketAlert { spec, armed: false, done: false };
        a.armed = value.is_finite() && !a.reached(value);
        a
    }

    /// Its condition.
    pub fn spec(&self) -> &MarketSpec {
        &self.spec
    }

    fn reached(&self, value: f64) -> bool {
        market_reached(self.spec.direction, self.spec.threshold, value)
    }

    /// Takes the number's new value.
    pub fn on_value(&mut self, value: f64) -> MarketOutcome {
        if self.done || !value.is_finite() {
            return MarketOutcome::Quiet;
        }
        if !self.reached(value) {
            self.armed = true;
            return MarketOutcome::Quiet;
        }
        if !self.armed {
            return MarketOutcome::Quiet;
        }
        self.armed = false;
        self.done = !self.spec.repeat;
        MarketOutcome::Fired { last: self.done }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn market(direction: Direction, repeat: bool, created_at: f64) -> MarketAlert {
        MarketAlert::new(MarketSpec { id: 3, direction, threshold: 60.0, repeat }, created_at)
    }

    #[test]
    fn a_market_alert_fires_on_reaching_its_threshold_and_rearms_on_crossing_back() {
        let mut a = market(Direction::Above, true, 50.0);
        assert_eq!(a.on_value(59.9), MarketOutcome::Quiet);
        assert_eq!(a.on_value(60.0), MarketOutcome::Fired { last: false });
        assert_eq!(a.on_value(65.0), MarketOutcome::Quiet, "still above: once");
        assert_eq!(a.on_value(59.0), MarketOutcome::Quiet);
        assert_eq!(a.on_value(61.0), MarketOutcome::Fired { last: false }, "re-armed below");
        let mut b = market(Direction::Below, false, 70.0);
        assert_eq!(b.on_value(55.0), MarketOutcome::Fired { last: true });
        assert_eq!(b.on_value(70.0), MarketOutcome::Quiet);
        assert_eq!(b.on_value(50.0), MarketOutcome::Quiet, "a non-repeating alert fires once");
    }

    #[test]
    fn a_market_alert_created_past_its_threshold_waits_for_the_number_to_come_back() {
        let mut a = market(Direction::Above, true, 65.0);
        assert_eq!(a.on_value(66.0), MarketOutcome::Quiet);
        assert_eq!(a.on_value(f64::NAN), MarketOutcome::Quiet, "no number: nothing");
        assert_eq!(a.on_value(58.0), MarketOutcome::Quiet);
        assert_eq!(a.on_value(60.5), MarketOutcome::Fired { last: false });
    }

    #[test]
    fn a_market_alert_created_without_a_value_takes_its_side_from_the_first_one() {
        // Past the threshold at the first value: waits for it to come back, as if created there.
        let mut a = market(Direction::Above, true, f64::NAN);
        assert_eq!(a.on_value(f64::NAN), MarketOutcome::Quiet);
        assert_eq!(a.on_value(70.0), MarketOutcome::Quiet, "no crossing seen");
        assert_eq!(a.on_value(55.0), MarketOutcome::Quiet);
        assert_eq!(a.on_value(61.0), MarketOutcome::Fired { last: false });
        // On the near side at the first value: armed, fires on reaching it.
        let mut b = market(Direction::Below, false, f64::NAN);
        assert_eq!(b.on_value(80.0), MarketOutcome::Quiet);
        assert_eq!(b.on_value(60.0), MarketOutcome::Fired { last: true });
    }
}
