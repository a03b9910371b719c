//! What changed in one book's published levels and walls since a stream last looked (sans-I/O):
//! the surviving levels a trade went through (`level.broken`), a recompute that changed the set
//! (a new snapshot), and per wall scan the walls that appeared, changed (quantity or ratio moved
//! by [`WALL_CHANGE`] or more) or went.
//!
//! How a wall went is not decided here: it is what the shard's wall lives decided
//! (`rampart_engine::wall_life`, from every trade of the book), read from the wall history the
//! shard publishes before the scan ([`WallHistory`]), so the `walls` stream, the wall history
//! (`GET /v1/walls/{symbol}/history`) and the wall alerts say the same of the same wall, with the
//! same lifetime. A wall the stream stops showing while the shard still holds it open (it no
//! longer passes the subscription's `minUsd`, or its book is crossed or stale and shows no walls)
//! goes as `pulled`, with its life so far: no trade ended it.

use rampart_engine::level::Level;
use rampart_engine::wall_life::{Gone, WallOutcome, WallRecord};
use rampart_state::shared::{DensitySnapshot, LevelSnapshot, PublishedWall};
use rampart_state::wall_history::WallHistory;

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

/// One wall's change between two scans.
#[derive(Clone, Debug, PartialEq)]
pub enum WallEvent {
    /// New at this scan.
    Appeared(PublishedWall),
    /// Its quantity or ratio moved by [`WALL_CHANGE`] or more since last sent.
    Changed(PublishedWall),
    /// Missing at this scan (as last sent): how it went and how long it stood (ms), as the
    /// shard's wall lives decided.
    Gone(PublishedWall, Gone, i64),
}

/// The walls last sent for one book.
#[derive(Clone, Debug)]
pub struct WallsSeen {
    scan_ms: i64,
    walls: Vec<PublishedWall>,
}

/// Whether `w` passes the subscription's `minUsd` (a wall without a USD value does not).
pub fn passes(w: &PublishedWall, min_usd: Option<f64>) -> bool {
    min_usd.is_none_or(|m| w.usd.is_some_and(|u| u >= m))
}

/// Looks at a book's wall scan, with the wall history its shard published before it (or after:
/// a later one): `None` when it is the scan last looked at; the first scan gives no events (the
/// caller sends it as the snapshot).
pub fn look_walls(
    seen: &mut Option<WallsSeen>,
    snap: &DensitySnapshot,
    history: &WallHistory,
    min_usd: Option<f64>,
) -> Option<Vec<WallEvent>> {
    if seen.as_ref().is_some_and(|s| s.scan_ms == snap.ts_ms) {
        return None;
    }
    let walls: Vec<PublishedWall> = snap.walls.iter().filter(|w| passes(w, min_usd)).cloned().collect();
    let Some(s) = seen else {
        *seen = Some(WallsSeen { scan_ms: snap.ts_ms, walls });
        return Some(Vec::new());
    };
    let same = |a: &PublishedWall, b: &PublishedWall| a.wall.side == b.wall.side && a.wall.price == b.wall.price;
    let mut events = Vec::new();
    for old in &s.walls {
        if !walls.iter().any(|w| same(w, old)) {
            let (gone, lifetime_ms) = outcome(history, old, s.scan_ms);
            events.push(WallEvent::Gone(*old, gone, lifetime_ms));
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
    Some(events)
}

fn moved(old: &PublishedWall, new: &PublishedWall) -> bool {
    let rel = |a: f64, b: f64| if a == 0.0 { b != 0.0 } else { ((b - a) / a).abs() >= WALL_CHANGE };
    rel(old.wall.qty.0 as f64, new.wall.qty.0 as f64) || rel(old.wall.ratio, new.wall.ratio)
}

/// How the shard's wall lives say `w` went, and how long it stood: the newest ended wall of its
/// side and price last seen at or after `seen_ms` (the scan this stream last saw it at); a wall
/// the shard still holds open is `pulled`, with its life so far (the module's header says when).
fn outcome(history: &WallHistory, w: &PublishedWall, seen_ms: i64) -> (Gone, i64) {
    let same = |r: &&WallRecord| r.side == w.wall.side && r.price == w.wall.price;
    let life = |r: &WallRecord| r.last_seen_ms - r.first_seen_ms;
    if let Some(r) = history.ended.iter().filter(same).find(|r| r.last_seen_ms >= seen_ms) {
        let gone = if r.outcome == WallOutcome::Filled { Gone::Filled } else { Gone::Pulled };
        return (gone, life(r));
    }
    (Gone::Pulled, history.open.iter().find(same).map_or(w.wall.age_ms, life))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::level::{Formation, Origin};
    use rampart_engine::wall::Wall;
    use rampart_engine::{Price, Qty, Side};

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

    /// The history entry of `w`: first seen at 0, last seen at `last_ms`, with `outcome`.
    fn record(w: &PublishedWall, last_ms: i64, outcome: WallOutcome) -> WallRecord {
        WallRecord {
            side: w.wall.side,
            price: w.wall.price,
            first_seen_ms: 0,
            last_seen_ms: last_ms,
            max_usd: w.usd,
            max_ratio: w.wall.ratio,
            executed_usd: Some(0.0),
            outcome,
        }
    }

    fn history(ts_ms: i64, open: Vec<WallRecord>, ended: Vec<WallRecord>) -> WallHistory {
        WallHistory { ts_ms, open, ended: std::sync::Arc::from(ended), ended_total: 0 }
    }

    #[test]
    fn walls_appear_change_and_go_as_the_shard_decided() {
        let scan = |ts_ms, price, walls: Vec<PublishedWall>| DensitySnapshot { ts_ms, price, walls };
        let none = WallHistory::default();
        let mut seen = None;
        let ask = wall(Side::Ask, 110, 1_000);
        let bid = wall(Side::Bid, 90, 1_000);
        assert_eq!(look_walls(&mut seen, &scan(2_000, 100, vec![ask, bid]), &none, None), Some(vec![]));
        assert_eq!(look_walls(&mut seen, &scan(2_000, 100, vec![]), &none, None), None, "the same scan");
        // Quantity +5 %: no event; then +12 % against what was sent: changed.
        let drift = wall(Side::Ask, 110, 1_050);
        assert_eq!(look_walls(&mut seen, &scan(4_000, 100, vec![drift, bid]), &none, None), Some(vec![]));
        let grown = wall(Side::Ask, 110, 1_120);
        assert_eq!(
            look_walls(&mut seen, &scan(6_000, 100, vec![grown, bid]), &none, None),
            Some(vec![WallEvent::Changed(grown)])
        );
        // Both end at the next scan: the ask filled, the bid pulled, whatever the price says; an
        // older ended wall at the bid's price (last seen before this stream saw the bid) is
        // another wall. A new bid appears.
        let ended = vec![
            record(&grown, 6_000, WallOutcome::Filled),
            record(&bid, 6_000, WallOutcome::Pulled),
            record(&bid, 1_000, WallOutcome::Filled),
        ];
        let new_bid = wall(Side::Bid, 95, 2_000);
        let h = history(8_000, vec![record(&new_bid, 8_000, WallOutcome::Open)], ended);
        let events = look_walls(&mut seen, &scan(8_000, 100, vec![new_bid]), &h, None).expect("a new scan");
        assert_eq!(
            events,
            vec![
                WallEvent::Gone(grown, Gone::Filled, 6_000),
                WallEvent::Gone(bid, Gone::Pulled, 6_000),
                WallEvent::Appeared(new_bid)
            ]
        );
        // Still open in the shard (a book not served shows no walls): pulled, with its life so far.
        let events = look_walls(&mut seen, &scan(10_000, 100, vec![]), &h, None).expect("a new scan");
        assert_eq!(events, vec![WallEvent::Gone(new_bid, Gone::Pulled, 8_000)]);
    }

    #[test]
    fn a_wall_below_min_usd_goes_pulled_while_it_stands() {
        let scan = |ts_ms, walls: Vec<PublishedWall>| DensitySnapshot { ts_ms, price: 100, walls };
        let mut seen = None;
        let big = wall(Side::Ask, 110, 1_000);
        let none = WallHistory::default();
        assert_eq!(look_walls(&mut seen, &scan(2_000, vec![big]), &none, Some(900.0)), Some(vec![]));
        let small = wall(Side::Ask, 110, 800);
        let h = history(4_000, vec![record(&small, 4_000, WallOutcome::Open)], vec![]);
        let events = look_walls(&mut seen, &scan(4_000, vec![small]), &h, Some(900.0)).expect("a new scan");
        assert_eq!(events, vec![WallEvent::Gone(big, Gone::Pulled, 4_000)]);
    }

    #[test]
    fn min_usd_filters_walls_without_a_value_too() {
        let mut unpriced = wall(Side::Bid, 90, 10);
        unpriced.usd = None;
        assert!(passes(&unpriced, None) && !passes(&unpriced, Some(1.0)));
        assert!(passes(&wall(Side::Bid, 90, 500), Some(500.0)) && !passes(&wall(Side::Bid, 90, 499), Some(500.0)));
    }
}
