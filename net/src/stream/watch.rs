//! What changed in one book's published levels and walls since a stream last looked (sans-I/O):
//! the surviving levels a trade went through (`level.broken`), a recompute that changed the set
//! (a new snapshot), and per wall scan the walls that appeared, changed (quantity or ratio moved
//! by [`WALL_CHANGE`] or more) or went, each gone wall `filled` when a trade reached its price
//! since the scan before, `pulled` otherwise.
//!
//! Trades reached: the stream notes, at every look, the pair's last price and the shard's
//! trade watermarks (the highest and lowest trade since the levels were computed); the range
//! between two scans is the span of both. A trade between two looks that neither moved the
//! watermarks nor stayed the last price is not seen (the watermarks are reset with each level
//! recompute, once a minute), so a wall can be called `pulled` that a trade touched in that
//! instant; never the other way round.

use rampart_engine::level::Level;
use rampart_engine::Side;
use rampart_state::shared::{DensitySnapshot, LevelSnapshot, PublishedWall};

/// A wall is `changed` when its quantity or its ratio moved by this fraction since last sent.
pub const WALL_CHANGE: f64 = 0.10;

/// The levels last sent for one book.
#[derive(Clone, Debug, Default)]
pub struct LevelsSeen {
    computed_ms: i64,
    alive: Vec<Level>,
}

impl LevelsSeen {
    /// The levels as last sent, without those broken since.
    pub fn alive(&self) -> &[Level] {
        &self.alive
    }
}

/// What one look at a book's levels found.
#[derive(Clone, Debug, PartialEq)]
pub enum LevelsChange {
    /// The whole set (first look, or a recompute that changed it).
    Snapshot(Vec<Level>),
    /// Levels a trade went through since the last look.
    Broken(Vec<Level>),
}

/// Looks at `snap` under the watermarks `high`/`low`; `seen` is `None` before the first look.
pub fn look_levels(seen: &mut Option<LevelsSeen>, snap: &LevelSnapshot, high: i64, low: i64) -> Option<LevelsChange> {
    // The common look: the same computation, nothing newly broken; it allocates nothing.
    if let Some(s) = seen.as_mut().filter(|s| s.computed_ms == snap.computed_ms) {
        if s.alive.iter().all(|l| l.survives(high, low)) {
            return None;
        }
        let broken: Vec<Level> = s.alive.iter().filter(|l| !l.survives(high, low)).copied().collect();
        s.alive.retain(|l| l.survives(high, low));
        return Some(LevelsChange::Broken(broken));
    }
    let alive: Vec<Level> = snap.levels.iter().filter(|l| l.survives(high, low)).copied().collect();
    match seen {
        Some(s) if s.alive == alive => {
            s.computed_ms = snap.computed_ms;
            None
        }
        _ => {
            *seen = Some(LevelsSeen { computed_ms: snap.computed_ms, alive: alive.clone() });
            Some(LevelsChange::Snapshot(alive))
        }
    }
}

/// Why a wall went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gone {
    /// A trade reached its price since the scan before.
    Filled,
    /// No trade reached it.
    Pulled,
}

impl Gone {
    /// The `reason` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Gone::Filled => "filled",
            Gone::Pulled => "pulled",
        }
    }
}

/// One wall's change between two scans.
#[derive(Clone, Debug, PartialEq)]
pub enum WallEvent {
    /// New at this scan.
    Appeared(PublishedWall),
    /// Its quantity or ratio moved by [`WALL_CHANGE`] or more since last sent.
    Changed(PublishedWall),
    /// Missing at this scan (as last sent).
    Gone(PublishedWall, Gone),
}

/// The walls last sent for one book, and the trades reached since that scan.
#[derive(Clone, Debug)]
pub struct WallsSeen {
    scan_ms: i64,
    walls: Vec<PublishedWall>,
    reached: (i64, i64),
    marks: (i64, i64, i64),
}

impl WallsSeen {
    /// Notes the last price and the trade watermarks (`high`, `low` since the levels computed
    /// at `computed_ms`) seen at a look.
    pub fn note_trades(&mut self, price: i64, high: i64, low: i64, computed_ms: i64) {
        let (lo, hi) = &mut self.reached;
        if price > 0 {
            *lo = (*lo).min(price);
            *hi = (*hi).max(price);
        }
        let (old_high, old_low, old_ms) = self.marks;
        // Watermarks that moved (or were reset with a recompute) are trades since the last look.
        if high != i64::MIN && (high > old_high || computed_ms != old_ms) {
            *hi = (*hi).max(high);
        }
        if low != i64::MAX && (low < old_low || computed_ms != old_ms) {
            *lo = (*lo).min(low);
        }
        self.marks = (high, low, computed_ms);
    }
}

/// Whether `w` passes the subscription's `minUsd` (a wall without a USD value does not).
pub fn passes(w: &PublishedWall, min_usd: Option<f64>) -> bool {
    min_usd.is_none_or(|m| w.usd.is_some_and(|u| u >= m))
}

/// Looks at a book's wall scan: `None` when it is the scan last looked at; the first scan gives
/// no events (the caller sends it as the snapshot).
pub fn look_walls(
    seen: &mut Option<WallsSeen>,
    snap: &DensitySnapshot,
    min_usd: Option<f64>,
) -> Option<Vec<WallEvent>> {
    if seen.as_ref().is_some_and(|s| s.scan_ms == snap.ts_ms) {
        return None;
    }
    let walls: Vec<PublishedWall> = snap.walls.iter().filter(|w| passes(w, min_usd)).cloned().collect();
    let Some(s) = seen else {
        let fresh = (snap.price, snap.price);
        *seen = Some(WallsSeen { scan_ms: snap.ts_ms, walls, reached: fresh, marks: (i64::MIN, i64::MAX, 0) });
        return Some(Vec::new());
    };
    let same = |a: &PublishedWall, b: &PublishedWall| a.wall.side == b.wall.side && a.wall.price == b.wall.price;
    let mut events = Vec::new();
    for old in &s.walls {
        if !walls.iter().any(|w| same(w, old)) {
            events.push(WallEvent::Gone(*old, reason(old, s.reached)));
        }
    }
    let mut kept = Vec::with_capacity(walls.len());
    for w in walls {
        match s.walls.iter().find(|old| same(old, &w)) {
            None => {
                events.push(WallEvent::Appeared(w));
                kept.push(w);
            }
            Some(old) if moved(old, &w) => {
                events.push(WallEvent::Changed(w));
                kept.push(w);
            }
            // Below the change threshold the wall as last sent stays the reference, so a slow
            // drift is reported once it adds up.
            Some(old) => kept.push(PublishedWall {
                usd: w.usd,
                wall: rampart_engine::wall::Wall { age_ms: w.wall.age_ms, dist_pct: w.wall.dist_pct, ..old.wall },
            }),
        }
    }
    s.scan_ms = snap.ts_ms;
    s.walls = kept;
    s.reached = (snap.price, snap.price);
    Some(events)
}

fn moved(old: &PublishedWall, new: &PublishedWall) -> bool {
    let rel = |a: f64, b: f64| if a == 0.0 { b != 0.0 } else { ((b - a) / a).abs() >= WALL_CHANGE };
    rel(old.wall.qty.0 as f64, new.wall.qty.0 as f64) || rel(old.wall.ratio, new.wall.ratio)
}

fn reason(w: &PublishedWall, (low, high): (i64, i64)) -> Gone {
    let reached = match w.wall.side {
        Side::Ask => high >= w.wall.price.0,
        Side::Bid => low <= w.wall.price.0,
    };
    if reached {
        Gone::Filled
    } else {
        Gone::Pulled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::level::{Formation, Origin};
    use rampart_engine::wall::Wall;
    use rampart_engine::{Price, Qty};

    fn level(price: i64, side: Formation) -> Level {
        Level { price: Price(price), side, origin: Origin::H1, time_ms: 1, strength: 1 }
    }

    fn wall(side: Side, price: i64, qty: u64) -> PublishedWall {
        let wall = Wall { side, price: Price(price), qty: Qty(qty), ratio: 5.0, dist_pct: 1.0, age_ms: 0 };
        PublishedWall { wall, usd: Some(qty as f64) }
    }

    #[test]
    fn levels_snapshot_then_broken_once_then_a_changed_recompute() {
        let snap =
            LevelSnapshot { computed_ms: 60_000, levels: vec![level(110, Formation::High), level(90, Formation::Low)] };
        let mut seen = None;
        let first = look_levels(&mut seen, &snap, i64::MIN, i64::MAX);
        assert_eq!(first, Some(LevelsChange::Snapshot(snap.levels.clone())));
        assert_eq!(look_levels(&mut seen, &snap, 105, 95), None, "nothing went through");
        assert_eq!(
            look_levels(&mut seen, &snap, 111, 95),
            Some(LevelsChange::Broken(vec![level(110, Formation::High)]))
        );
        assert_eq!(look_levels(&mut seen, &snap, 112, 95), None, "broken once");
        // A recompute with the same surviving set says nothing; a different one is a snapshot.
        let same = LevelSnapshot { computed_ms: 120_000, levels: vec![level(90, Formation::Low)] };
        assert_eq!(look_levels(&mut seen, &same, i64::MIN, i64::MAX), None);
        let other = LevelSnapshot { computed_ms: 180_000, levels: vec![level(95, Formation::Low)] };
        assert_eq!(
            look_levels(&mut seen, &other, i64::MIN, i64::MAX),
            Some(LevelsChange::Snapshot(other.levels.clone()))
        );
    }

    #[test]
    fn walls_appear_change_and_go_filled_or_pulled() {
        let scan = |ts_ms, price, walls: Vec<PublishedWall>| DensitySnapshot { ts_ms, price, walls };
        let mut seen = None;
        let ask = wall(Side::Ask, 110, 1_000);
        let bid = wall(Side::Bid, 90, 1_000);
        assert_eq!(look_walls(&mut seen, &scan(2_000, 100, vec![ask, bid]), None), Some(vec![]));
        assert_eq!(look_walls(&mut seen, &scan(2_000, 100, vec![]), None), None, "the same scan");
        // Quantity +5 %: no event; then +12 % against what was sent: changed.
        let drift = wall(Side::Ask, 110, 1_050);
        assert_eq!(look_walls(&mut seen, &scan(4_000, 100, vec![drift, bid]), None), Some(vec![]));
        let grown = wall(Side::Ask, 110, 1_120);
        assert_eq!(
            look_walls(&mut seen, &scan(6_000, 100, vec![grown, bid]), None),
            Some(vec![WallEvent::Changed(grown)])
        );
        // A trade reaches the ask between scans; the bid is pulled; a new bid appears.
        seen.as_mut().expect("seen").note_trades(110, 110, 99, 60_000);
        let new_bid = wall(Side::Bid, 95, 2_000);
        let events = look_walls(&mut seen, &scan(8_000, 104, vec![new_bid]), None).expect("a new scan");
        assert_eq!(
            events,
            vec![
                WallEvent::Gone(grown, Gone::Filled),
                WallEvent::Gone(bid, Gone::Pulled),
                WallEvent::Appeared(new_bid)
            ]
        );
        // Watermarks that did not move since the last look are no new trade.
        seen.as_mut().expect("seen").note_trades(104, 110, 99, 60_000);
        let events = look_walls(&mut seen, &scan(10_000, 104, vec![]), None).expect("a new scan");
        assert_eq!(events, vec![WallEvent::Gone(new_bid, Gone::Pulled)]);
    }

    #[test]
    fn min_usd_filters_walls_without_a_value_too() {
        let mut unpriced = wall(Side::Bid, 90, 10);
        unpriced.usd = None;
        assert!(passes(&unpriced, None) && !passes(&unpriced, Some(1.0)));
        assert!(passes(&wall(Side::Bid, 90, 500), Some(500.0)) && !passes(&wall(Side::Bid, 90, 499), Some(500.0)));
    }
}
