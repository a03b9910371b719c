//! The two alert kinds of the site (decisions §10), evaluated where their data is: density
//! alerts against each wall scan of a book, market alerts against each board number. Pure
//! logic; time is an argument.
//!
//! A density alert fires once per wall appearance: a wall is its book, side and price level,
//! and an appearance is its continuous presence (the scan's age says when it began). It fires
//! again for that wall only after the wall vanished and came back. A market alert fires when a
//! board number reaches its threshold from the other side; a repeating one re-arms once the
//! number is back on the near side.

use crate::book::Side;
use crate::fixed::Price;
use crate::instrument::BookId;
use crate::wall::Wall;

/// Which walls a density alert watches.
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

/// A density alert's condition.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct DensitySpec {
    /// Alert id.
    pub id: u64,
    /// Sides watched.
    pub side: WallSide,
    /// Smallest wall value, USD.
    pub min_usd: f64,
    /// Largest distance from the price, percent (absolute).
    pub max_dist_pct: f64,
    /// Youngest wall that counts, milliseconds of continuous presence.
    pub min_age_ms: i64,
    /// Fire for every appearance; otherwise fire once and stop.
    pub repeat: bool,
}

impl DensitySpec {
    /// Whether a wall worth `usd` (unknown: never) meets the condition.
    pub fn admits(&self, wall: &Wall, usd: Option<f64>) -> bool {
        self.side.admits(wall.side)
            && usd.is_some_and(|u| u >= self.min_usd)
            && wall.dist_pct.abs() <= self.max_dist_pct
            && wall.age_ms >= self.min_age_ms
    }
}

/// One wall appearance: book, side, price and when its continuous presence began.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Appearance {
    book: BookId,
    side: Side,
    price: Price,
    since_ms: i64,
}

/// A density alert firing.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct DensityFiring {
    /// Alert id.
    pub id: u64,
    /// The book the wall stands in.
    pub book: BookId,
    /// The wall.
    pub wall: Wall,
    /// Its USD value.
    pub usd: f64,
    /// Scan time, Unix milliseconds.
    pub ts_ms: i64,
    /// The alert does not repeat: this was its only firing.
    pub last: bool,
}

/// A density alert and the appearances it has fired for that still stand.
#[derive(Clone, Debug)]
pub struct DensityAlert {
    spec: DensitySpec,
    fired: Vec<Appearance>,
    done: bool,
}

impl DensityAlert {
    /// A new alert; it has fired for nothing yet.
    pub fn new(spec: DensitySpec) -> DensityAlert {
        DensityAlert { spec, fired: Vec::new(), done: false }
    }

    /// Its condition.
    pub fn spec(&self) -> &DensitySpec {
        &self.spec
    }

    /// A non-repeating alert that has fired.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Takes one scan of `book` at `now_ms` (its walls with their USD values, as published) and
    /// pushes a firing for each wall appearance that meets the condition and has not fired yet.
    /// Appearances of `book` that are no longer in the scan are forgotten, so a wall that comes
    /// back fires again. Bound: the remembered appearances are at most the walls of the latest
    /// scan of each book the alert watches.
    pub fn on_scan<I>(&mut self, book: BookId, walls: I, now_ms: i64, out: &mut Vec<DensityFiring>)
    where
        I: IntoIterator<Item = (Wall, Option<f64>)>,
        I::IntoIter: Clone,
    {
        let walls = walls.into_iter();
        let appearance = |w: &Wall| Appearance { book, side: w.side, price: w.price, since_ms: now_ms - w.age_ms };
        self.fired.retain(|a| a.book != book || walls.clone().any(|(w, _)| appearance(&w) == *a));
        if self.done {
            return;
        }
        for (wall, usd) in walls {
            let a = appearance(&wall);
            if !self.spec.admits(&wall, usd) || self.fired.contains(&a) {
                continue;
            }
            self.fired.push(a);
            self.done = !self.spec.repeat;
            let usd = usd.unwrap_or_default();
            out.push(DensityFiring { id: self.spec.id, book, wall, usd, ts_ms: now_ms, last: self.done });
            if self.done {
                return;
            }
        }
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
    /// one created already past its threshold waits for the number to come back first.
    pub fn new(spec: MarketSpec, value: f64) -> MarketAlert {
        let mut a = MarketAlert { spec, armed: false, done: false };
        a.armed = !a.reached(value);
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
    use crate::fixed::Qty;

    fn wall(side: Side, price: i64, dist_pct: f64, age_ms: i64) -> Wall {
        Wall { side, price: Price(price), qty: Qty(1), ratio: 20.0, dist_pct, age_ms }
    }

    fn spec(repeat: bool) -> DensitySpec {
        DensitySpec { id: 7, side: WallSide::Any, min_usd: 1_000.0, max_dist_pct: 5.0, min_age_ms: 0, repeat }
    }

    #[test]
    fn a_wall_fires_once_per_appearance_and_again_after_it_came_back() {
        let mut a = DensityAlert::new(spec(true));
        let mut out = Vec::new();
        let w = wall(Side::Bid, 100, -1.0, 0);
        a.on_scan(BookId(1), [(w, Some(5_000.0))], 1_000, &mut out);
        assert_eq!(out.len(), 1);
        // Still standing two seconds later (its age grew with it): no new firing.
        let aged = Wall { age_ms: 2_000, ..w };
        a.on_scan(BookId(1), [(aged, Some(5_000.0))], 3_000, &mut out);
        assert_eq!(out.len(), 1, "the same appearance");
        // Another book's scan does not forget this book's wall.
        a.on_scan(BookId(2), [], 3_500, &mut out);
        a.on_scan(BookId(1), [(Wall { age_ms: 3_000, ..w }, Some(5_000.0))], 4_000, &mut out);
        assert_eq!(out.len(), 1);
        // Gone, then back: a new appearance.
        a.on_scan(BookId(1), [], 5_000, &mut out);
        a.on_scan(BookId(1), [(w, Some(5_000.0))], 7_000, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[1].id, out[1].book, out[1].ts_ms, out[1].last), (7, BookId(1), 7_000, false));
    }

    #[test]
    fn the_condition_filters_side_value_distance_and_age() {
        let s = DensitySpec { side: WallSide::Ask, min_age_ms: 60_000, ..spec(true) };
        let ask = wall(Side::Ask, 100, 1.0, 60_000);
        assert!(s.admits(&ask, Some(1_000.0)));
        assert!(!s.admits(&wall(Side::Bid, 100, -1.0, 60_000), Some(1_000.0)), "side");
        assert!(!s.admits(&ask, Some(999.0)), "value");
        assert!(!s.admits(&ask, None), "no USD price: never");
        assert!(!s.admits(&wall(Side::Ask, 100, 5.1, 60_000), Some(1e9)), "distance");
        assert!(!s.admits(&wall(Side::Ask, 100, 1.0, 59_999), Some(1e9)), "age");
        // A wall too young fires once it is old enough, and only then.
        let mut a = DensityAlert::new(s);
        let mut out = Vec::new();
        a.on_scan(BookId(1), [(wall(Side::Ask, 100, 1.0, 58_000), Some(2e3))], 60_000, &mut out);
        assert!(out.is_empty());
        a.on_scan(BookId(1), [(wall(Side::Ask, 100, 1.0, 60_000), Some(2e3))], 62_000, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn a_non_repeating_density_alert_fires_once_in_all() {
        let mut a = DensityAlert::new(spec(false));
        let mut out = Vec::new();
        let walls = [(wall(Side::Bid, 100, -1.0, 0), Some(5e3)), (wall(Side::Ask, 110, 1.0, 0), Some(5e3))];
        a.on_scan(BookId(1), walls, 1_000, &mut out);
        assert_eq!(out.len(), 1, "one firing, not one per wall");
        assert!(out[0].last && a.is_done());
        a.on_scan(BookId(1), [], 2_000, &mut out);
        a.on_scan(BookId(1), walls, 3_000, &mut out);
        assert_eq!(out.len(), 1);
    }

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
}
