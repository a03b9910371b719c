//! Wall alerts (`decisions.md` §15): a matching wall appeared (reached `min_age_s`), was pulled,
//! or was filled, decided on the shard's wall scan of the book. Pure; time is an argument.
//!
//! `appeared` fires once per appearance of a wall (its side, price and the time its continuous
//! presence began): a wall that vanishes and comes back fires again. `pulled` and `filled` fire
//! on the scan that finds gone a wall that matched when last seen, with the reason the wall's
//! life gives (`filled` when a trade reached its price since the scan before, else `pulled`;
//! [`crate::wall_life`]). Bounds: each alert remembers at most [`WALLS_MAX`] appearances (the
//! walls of one scan), reserved when it is inserted, so a scan allocates nothing.

use crate::book::Side;
use crate::firing::{Detail, Firing, WallHit};
use crate::fixed::Price;
use crate::site_alert::WallSide;
use crate::wall::{usd_value, Wall, WALLS_MAX};
use crate::wall_life::WallEnded;

/// `max_dist_pct` in hundredths of a percent: 0 to 50 %, default 5 %.
pub const MAX_DIST_HUNDREDTHS_MAX: u32 = 5_000;
/// Default `max_dist_pct`, hundredths of a percent.
pub const MAX_DIST_HUNDREDTHS_DEFAULT: u32 = 500;
/// Largest `min_age_s`.
pub const WALL_MIN_AGE_S_MAX: u32 = 3_600;
/// Largest `min_ratio`, in hundredths.
pub const MIN_RATIO_HUNDREDTHS_MAX: u32 = 100_000;

/// What a wall alert waits for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WallEvent {
    /// A matching wall reaches `min_age_s`.
    Appeared,
    /// A matching wall is gone and no trade reached its price.
    Pulled,
    /// A matching wall is gone after a trade reached its price.
    Filled,
}

impl WallEvent {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            WallEvent::Appeared => "appeared",
            WallEvent::Pulled => "pulled",
            WallEvent::Filled => "filled",
        }
    }

    /// The event the API spells `s`.
    pub fn parse(s: &str) -> Option<WallEvent> {
        [WallEvent::Appeared, WallEvent::Pulled, WallEvent::Filled].into_iter().find(|e| e.as_str() == s)
    }
}

/// A wall alert's condition, fixed at create; whole units so that it compares exactly.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WallCondition {
    /// What it waits for.
    pub event: WallEvent,
    /// Which side's walls.
    pub side: WallSide,
    /// Least USD value, cents (0: any wall, also one whose quote has no USD price).
    pub min_usd_cents: u64,
    /// Least ratio to the median level size, hundredths; 0: the detection threshold (every wall).
    pub min_ratio_hundredths: u32,
    /// Largest distance from the price, hundredths of a percent.
    pub max_dist_hundredths: u32,
    /// Least continuous presence, seconds.
    pub min_age_s: u32,
}

impl WallCondition {
    /// True when `wall`, worth `usd` (`None`: no USD price), matches.
    pub fn admits(&self, wall: &Wall, usd: Option<f64>) -> bool {
        let usd_ok = self.min_usd_cents == 0 || usd.is_some_and(|u| u * 100.0 >= self.min_usd_cents as f64);
        self.side.admits(wall.side)
            && usd_ok
            && wall.ratio * 100.0 >= f64::from(self.min_ratio_hundredths)
            && wall.dist_pct.abs() * 100.0 <= f64::from(self.max_dist_hundredths)
            && wall.age_ms >= i64::from(self.min_age_s) * 1_000
    }
}

/// One appearance: side, price and when its continuous presence began.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Appearance {
    side: Side,
    price: Price,
    since_ms: i64,
}

#[derive(Clone, Debug)]
struct Watch {
    id: u64,
    condition: WallCondition,
    repeat: bool,
    fired: Vec<Appearance>,
    /// The least time between two firings, ms; none is made before `quiet_until_ms`.
    cooldown_ms: i64,
    quiet_until_ms: i64,
}

/// The wall alerts of one book.
#[derive(Clone, Debug, Default)]
pub struct WallAlerts {
    watches: Vec<Watch>,
}

impl WallAlerts {
    /// Alerts held.
    pub fn len(&self) -> usize {
        self.watches.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.watches.is_empty()
    }

    /// The ids held.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.watches.iter().map(|w| w.id)
    }

    /// When alert `id` is held with this condition and repeat flag, gives it `cooldown_s`
    /// (counted from its last firing) and is true; false when it is not held so. It keeps the
    /// appearances it fired for.
    pub fn retune(&mut self, id: u64, condition: &WallCondition, repeat: bool, cooldown_s: u32) -> bool {
        match self.watches.iter_mut().find(|w| w.id == id && w.condition == *condition && w.repeat == repeat) {
            Some(w) => {
                crate::cooldown::retune_cooldown(&mut w.cooldown_ms, &mut w.quiet_until_ms, cooldown_s);
                true
            }
            None => false,
        }
    }

    /// Adds a wall alert (the caller removed any alert of the same id first). Not a scan: it
    /// allocates its memory of appearances.
    pub fn insert(&mut self, id: u64, condition: WallCondition, repeat: bool, cooldown_s: u32) {
        let cooldown_ms = i64::from(cooldown_s) * 1_000;
        let fired = Vec::with_capacity(WALLS_MAX);
        self.watches.push(Watch { id, condition, repeat, fired, cooldown_ms, quiet_until_ms: i64::MIN });
    }

    /// Removes alert `id`; true if it was held.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.watches.len();
        self.watches.retain(|w| w.id != id);
        self.watches.len() != before
    }

    /// The most firings one scan can make: every alert on every wall of the scan and every wall
    /// it ended.
    pub fn firings_max(&self) -> usize {
        self.watches.len() * 2 * WALLS_MAX
    }

    /// Takes one scan at `now_ms` (the book's price then: the firing's price): the walls standing (each with its USD value) and the walls it
    /// found gone. Firings go to `out`, which must have room for [`WallAlerts::firings_max`]
    /// more. A one-shot alert that fires is removed. Allocates nothing.
    pub fn on_scan(
        &mut self,
        now_ms: i64,
        price: Price,
        walls: (&[Wall], Option<f64>),
        ended: &[WallEnded],
        out: &mut Vec<Firing>,
    ) {
        let mut i = 0;
        while i < self.watches.len() {
            let done = Self::scan_one(&mut self.watches[i], (now_ms, price), walls, ended, out);
            if done {
                self.watches.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// One alert against one scan; true when it fired and is done.
    fn scan_one(
        w: &mut Watch,
        (now_ms, price): (i64, Price),
        (walls, quote_usd): (&[Wall], Option<f64>),
        ended: &[WallEnded],
        out: &mut Vec<Firing>,
    ) -> bool {
        let appearance =
            |wall: &Wall| Appearance { side: wall.side, price: wall.price, since_ms: now_ms - wall.age_ms };
        // Appearances no longer standing are forgotten, so a wall that comes back fires again.
        w.fired.retain(|a| walls.iter().any(|wall| appearance(wall) == *a));
        let (id, repeat, cooldown_ms) = (w.id, w.repeat, w.cooldown_ms);
        // Within its cooldown a firing is not made (what it would have fired for counts as
        // fired: an appearance does not fire later).
        let quiet_until = &mut w.quiet_until_ms;
        let mut fire = |hit: WallHit, out: &mut Vec<Firing>| {
            if now_ms < *quiet_until {
                return false;
            }
            *quiet_until = now_ms.saturating_add(cooldown_ms);
            debug_assert!(out.len() < out.capacity(), "the firing buffer must be reserved");
            let last = !repeat;
            out.push(Firing { id, price, move_hundredths: None, ts_ms: now_ms, last, detail: Detail::Wall(hit) });
            last
        };
        match w.condition.event {
            WallEvent::Appeared => {
                for wall in walls {
                    let usd = quote_usd.map(|q| usd_value(wall.qty, wall.price, q));
                    let a = appearance(wall);
                    if !w.condition.admits(wall, usd) || w.fired.contains(&a) || w.fired.len() == WALLS_MAX {
                        continue;
                    }
                    w.fired.push(a);
                    let hit = WallHit { wall: *wall, usd, gone: None };
                    if fire(hit, out) {
                        return true;
                    }
                }
            }
            WallEvent::Pulled | WallEvent::Filled => {
                let want = if w.condition.event == WallEvent::Filled {
                    crate::wall_life::Gone::Filled
                } else {
                    crate::wall_life::Gone::Pulled
                };
                for e in ended.iter().filter(|e| e.gone == want && w.condition.admits(&e.wall, e.usd)) {
                    let hit = WallHit { wall: e.wall, usd: e.usd, gone: Some(e.gone) };
                    if fire(hit, out) {
                        return true;
                    }
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed::Qty;
    use crate::wall_life::{Gone, WallLife};

    fn wall(side: Side, price: i64, age_ms: i64) -> Wall {
        Wall { side, price: Price(price), qty: Qty(100), ratio: 20.0, dist_pct: -1.0, age_ms }
    }

    fn cond(event: WallEvent, side: WallSide) -> WallCondition {
        WallCondition {
            event,
            side,
            min_usd_cents: 0,
            min_ratio_hundredths: 0,
            max_dist_hundredths: MAX_DIST_HUNDREDTHS_DEFAULT,
            min_age_s: 0,
        }
    }

    /// One book: its walls' lives and its wall alerts, scanned together as the shard does.
    struct Rig {
        life: WallLife,
        alerts: WallAlerts,
        out: Vec<Firing>,
    }

    impl Rig {
        fn new(specs: &[(u64, WallCondition, bool)]) -> Rig {
            let mut alerts = WallAlerts::default();
            for (id, c, repeat) in specs {
                alerts.insert(*id, *c, *repeat, 0);
            }
            let out = Vec::with_capacity(alerts.firings_max());
            Rig { life: WallLife::new(), alerts, out }
        }

        fn scan(&mut self, now: i64, walls: &[Wall]) -> Vec<(u64, i64, Option<Gone>)> {
            let ended = self.life.on_scan(now, walls, Some(1.0)).to_vec();
            self.out.clear();
            self.alerts.on_scan(now, Price(1_000), (walls, Some(1.0)), &ended, &mut self.out);
            self.out.iter().filter_map(|f| f.wall().map(|w| (f.id, w.wall.price.0, w.gone))).collect()
        }
    }

    #[test]
    fn appeared_fires_once_per_appearance_at_its_age() {
        let aged = WallCondition { min_age_s: 60, ..cond(WallEvent::Appeared, WallSide::Bid) };
        let mut r = Rig::new(&[(1, aged, true), (2, cond(WallEvent::Appeared, WallSide::Ask), true)]);
        assert_eq!(r.scan(0, &[wall(Side::Bid, 900, 0)]), vec![], "too young; a bid");
        assert_eq!(r.scan(60_000, &[wall(Side::Bid, 900, 60_000)]), vec![(1, 900, None)]);
        assert_eq!(r.scan(62_000, &[wall(Side::Bid, 900, 62_000)]), vec![], "once per appearance");
        assert_eq!(r.scan(64_000, &[]), vec![]);
        assert_eq!(r.scan(130_000, &[wall(Side::Bid, 900, 61_000)]), vec![(1, 900, None)], "it came back");
    }

    #[test]
    fn pulled_and_filled_fire_on_the_scan_that_finds_the_wall_gone() {
        let specs = [
            (1, cond(WallEvent::Pulled, WallSide::Any), true),
            (2, cond(WallEvent::Filled, WallSide::Any), true),
            (3, WallCondition { min_usd_cents: 10_000_000_000_000, ..cond(WallEvent::Pulled, WallSide::Any) }, true),
        ];
        let mut r = Rig::new(&specs);
        assert_eq!(r.scan(0, &[wall(Side::Bid, 900, 0), wall(Side::Ask, 1_100, 0)]), vec![]);
        // A trade reaches the ask's price; then both are gone.
        r.life.on_trade(Price(1_100), Qty(5));
        let fired = r.scan(2_000, &[]);
        assert_eq!(fired.len(), 2, "{fired:?}");
        assert!(fired.contains(&(1, 900, Some(Gone::Pulled))), "{fired:?}");
        assert!(fired.contains(&(2, 1_100, Some(Gone::Filled))), "{fired:?}");
    }

    #[test]
    fn a_one_shot_alert_fires_once_and_leaves() {
        let mut r = Rig::new(&[(1, cond(WallEvent::Appeared, WallSide::Any), false)]);
        assert_eq!(r.scan(0, &[wall(Side::Bid, 900, 0), wall(Side::Bid, 800, 0)]).len(), 1);
        assert!(r.alerts.is_empty());
        assert_eq!(r.scan(2_000, &[wall(Side::Bid, 700, 0)]), vec![]);
    }

    #[test]
    fn a_cooldown_holds_back_the_firings_within_it() {
        let mut r = Rig::new(&[]);
        r.alerts.insert(1, cond(WallEvent::Appeared, WallSide::Any), true, 60);
        r.out = Vec::with_capacity(r.alerts.firings_max());
        assert_eq!(r.scan(0, &[wall(Side::Bid, 900, 0)]).len(), 1);
        let both = [wall(Side::Bid, 900, 2_000), wall(Side::Bid, 800, 0)];
        assert_eq!(r.scan(2_000, &both), vec![], "a new wall within the minute: held back");
        let three = [wall(Side::Bid, 900, 61_000), wall(Side::Bid, 800, 59_000), wall(Side::Bid, 700, 0)];
        assert_eq!(r.scan(61_000, &three), vec![(1, 700, None)], "after it, only a wall not yet counted");
    }

    #[test]
    fn filters_compare_exactly() {
        let w = Wall { side: Side::Ask, price: Price(1_000), qty: Qty(1), ratio: 12.5, dist_pct: 3.0, age_ms: 5_000 };
        let c = WallCondition {
            event: WallEvent::Appeared,
            side: WallSide::Ask,
            min_usd_cents: 250_000,
            min_ratio_hundredths: 1_250,
            max_dist_hundredths: 300,
            min_age_s: 5,
        };
        assert!(c.admits(&w, Some(2_500.0)));
        assert!(!c.admits(&w, Some(2_499.99)), "below min_usd");
        assert!(!c.admits(&w, None), "no USD price and a min_usd");
        assert!(WallCondition { min_usd_cents: 0, ..c }.admits(&w, None), "no min_usd: any");
        assert!(!WallCondition { min_ratio_hundredths: 1_251, ..c }.admits(&w, Some(1e9)));
        assert!(!WallCondition { max_dist_hundredths: 299, ..c }.admits(&w, Some(1e9)));
        assert!(!WallCondition { min_age_s: 6, ..c }.admits(&w, Some(1e9)));
        assert!(!WallCondition { side: WallSide::Bid, ..c }.admits(&w, Some(1e9)));
    }
}
