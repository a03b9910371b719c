//! A book's wall history as its shard publishes it for the front (`GET /v1/walls/{symbol}/history`,
//! `GET /v1/walls/history`): the walls open at its last scan and the ended walls its
//! [`WallLife`] keeps, newest first. Held in memory only: a restart starts with none.
//!
//! Bound: per book, the walls open at a scan (at most `wall::WALLS_MAX`) and the ended walls of
//! its ring (`wall_life::WALL_HISTORY_MAX`, the oldest dropped first); readers show those last
//! seen within `wall_life::WALL_HISTORY_MS`.

use std::sync::Arc;

use rampart_engine::wall_life::{WallLife, WallRecord};

/// One book's wall history, replaced whole by its shard.
#[derive(Clone, Debug)]
pub struct WallHistory {
    /// The scan it was taken at, Unix milliseconds (0: none yet).
    pub ts_ms: i64,
    /// The walls seen at that scan, the most recently first seen first.
    pub open: Vec<WallRecord>,
    /// The ended walls kept, the last ended first; shared by the snapshots until another ends.
    pub ended: Arc<[WallRecord]>,
    /// `WallLife::ended_total` when `ended` was taken.
    pub ended_total: u64,
}

impl Default for WallHistory {
    fn default() -> WallHistory {
        WallHistory { ts_ms: 0, open: Vec::new(), ended: Arc::from(Vec::new()), ended_total: 0 }
    }
}

impl WallHistory {
    /// The history of `life` after its scan at `ts_ms`; `ended` is `previous`'s (no copy) while
    /// no wall ended since it was taken.
    pub fn of(life: &WallLife, ts_ms: i64, previous: &WallHistory) -> WallHistory {
        let mut open: Vec<WallRecord> = life.open().collect();
        open.sort_unstable_by(|a, b| b.first_seen_ms.cmp(&a.first_seen_ms).then(a.price.cmp(&b.price)));
        let ended = if previous.ended_total == life.ended_total() {
            previous.ended.clone()
        } else {
            life.ended().copied().collect()
        };
        WallHistory { ts_ms, open, ended, ended_total: life.ended_total() }
    }

    /// The walls a reader at `now_ms` is shown, newest first (by last seen; the open walls,
    /// seen at the last scan, before every ended one): those last seen within the last 24 h.
    pub fn newest_first(&self, now_ms: i64) -> impl Iterator<Item = &WallRecord> + '_ {
        self.open.iter().chain(self.ended.iter()).filter(move |r| r.shown(now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::wall::Wall;
    use rampart_engine::wall_life::{WallOutcome, WALL_HISTORY_MS};
    use rampart_engine::{Price, Qty, Side};

    fn wall(price: i64, age_ms: i64) -> Wall {
        Wall { side: Side::Bid, price: Price(price), qty: Qty(1_000), ratio: 20.0, dist_pct: -1.0, age_ms }
    }

    #[test]
    fn open_walls_come_first_and_the_ended_are_shared_until_one_more_ends() {
        let mut life = WallLife::new();
        life.on_scan(0, &[wall(90, 0)], Some(1.0));
        life.on_scan(2_000, &[wall(80, 0)], Some(1.0));
        let first = WallHistory::of(&life, 2_000, &WallHistory::default());
        life.on_scan(4_000, &[wall(80, 2_000), wall(85, 0)], Some(1.0));
        let second = WallHistory::of(&life, 4_000, &first);
        assert!(Arc::ptr_eq(&first.ended, &second.ended), "nothing ended: the same ended walls");
        let shown: Vec<(i64, WallOutcome)> = second.newest_first(4_000).map(|r| (r.price.0, r.outcome)).collect();
        assert_eq!(shown, [(85, WallOutcome::Open), (80, WallOutcome::Open), (90, WallOutcome::Pulled)]);
        life.on_scan(6_000, &[wall(85, 2_000)], Some(1.0));
        let third = WallHistory::of(&life, 6_000, &second);
        assert!(!Arc::ptr_eq(&second.ended, &third.ended));
        let ended: Vec<i64> = third.ended.iter().map(|r| r.price.0).collect();
        assert_eq!(ended, [80, 90], "the last ended first");
        assert_eq!(third.newest_first(WALL_HISTORY_MS + 1).count(), 2, "the wall last seen at 0 is a day old");
    }
}
