//! Level alerts (`decisions.md` §15): a book's unbroken levels approached, touched or broken,
//! decided on the trade in the same call as the price alerts. Pure and allocation-free on the
//! tick path.
//!
//! Each (alert, qualifying level) is a *pair* holding one threshold at a time, as a price alert
//! does: an armed pair waits for the price to enter its band (`approach`: within `within_pct` of
//! the level; `touch`: within 0.05 % on the level's own side), a spent one for the price to move
//! 0.1 % beyond the band, when it is armed again (the price alerts' hysteresis, per level). The
//! thresholds sit in two heaps (reached from below, reached from above), so a trade costs
//! O(log n + reached). A level a trade goes through is `break`: found by comparing the trade with
//! the nearest high and low levels held (O(1) when none is broken), then every break alert is
//! asked. A broken level's pairs are dropped when they surface (the trade watermarks since the
//! levels were taken say which levels still stand).
//!
//! Pairs are made when the book's levels are recomputed ([`LevelAlerts::on_levels`], once a
//! minute, not a tick) and for one alert when it is inserted; an alert removed is dropped lazily
//! and the pairs compacted at the next recompute. A pair keeps its armed state across
//! recomputes while its level (price and side) stays. Bounds: pairs ≤ alerts × [`LEVELS_MAX`];
//! both heaps reserve room for every pair when pairs are made, so a tick never grows one.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::firing::{Detail, Firing};
use crate::fixed::Price;
use crate::level::{Formation, Level, Origin, LEVELS_MAX};

/// `within_pct` in millionths of a percent: 0.05 % to 10 %, default 0.5 %.
pub const WITHIN_MILLIONTHS_MIN: u32 = 50_000;
/// Largest `within_pct`, in millionths of a percent.
pub const WITHIN_MILLIONTHS_MAX: u32 = 10_000_000;
/// Default `within_pct`, in millionths of a percent.
pub const WITHIN_MILLIONTHS_DEFAULT: u32 = 500_000;
/// A touch is a trade within this of the level (0.05 %), in millionths of a percent.
pub const TOUCH_MILLIONTHS: u32 = 50_000;
/// A spent pair re-arms once the price is this far beyond its band (0.1 %).
pub const REARM_MILLIONTHS: u32 = 100_000;
/// Every timeframe (the default of `timeframes`).
pub const TIMEFRAMES_ALL: u16 = (1 << 9) - 1;

const HUNDRED_PCT: i128 = 100_000_000;

/// What a level alert waits for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LevelEvent {
    /// The price comes within `within_pct` of the level from farther away.
    Approach,
    /// A trade at the level's price (within 0.05 %) that leaves it standing.
    Touch,
    /// The trade that goes through the level.
    Break,
}

impl LevelEvent {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LevelEvent::Approach => "approach",
            LevelEvent::Touch => "touch",
            LevelEvent::Break => "break",
        }
    }

    /// The event the API spells `s`.
    pub fn parse(s: &str) -> Option<LevelEvent> {
        [LevelEvent::Approach, LevelEvent::Touch, LevelEvent::Break].into_iter().find(|e| e.as_str() == s)
    }
}

/// Which levels a level alert watches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LevelDirection {
    /// Levels above the price: resistance (formed by highs).
    Above,
    /// Levels below the price: support (formed by lows).
    Below,
    /// Both.
    Any,
}

impl LevelDirection {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LevelDirection::Above => "above",
            LevelDirection::Below => "below",
            LevelDirection::Any => "any",
        }
    }

    /// The direction the API spells `s`.
    pub fn parse(s: &str) -> Option<LevelDirection> {
        [LevelDirection::Above, LevelDirection::Below, LevelDirection::Any].into_iter().find(|d| d.as_str() == s)
    }
}

/// A level alert's condition, fixed at create.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LevelCondition {
    /// What it waits for.
    pub event: LevelEvent,
    /// Which side's levels.
    pub direction: LevelDirection,
    /// `approach`: the band, in millionths of a percent of the level's price; 0 otherwise.
    pub within_millionths: u32,
    /// Levels of at least this strength.
    pub min_strength: u32,
    /// Levels of these origins ([`Origin::bit`]s); [`TIMEFRAMES_ALL`] by default.
    pub timeframes: u16,
}

impl LevelCondition {
    /// True when `level` is one this alert watches.
    pub fn admits(&self, level: &Level) -> bool {
        let side = match self.direction {
            LevelDirection::Above => level.side == Formation::High,
            LevelDirection::Below => level.side == Formation::Low,
            LevelDirection::Any => true,
        };
        side && level.strength >= self.min_strength && self.timeframes & level.origin.bit() != 0
    }

    /// The timeframes' API spellings, in [`Origin::ALL`]'s order.
    pub fn timeframe_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        Origin::ALL.into_iter().filter(|o| self.timeframes & o.bit() != 0).map(Origin::as_str)
    }

    /// The band an `approach` or `touch` pair fires in, millionths of a percent.
    fn band(&self) -> u32 {
        match self.event {
            LevelEvent::Approach => self.within_millionths,
            LevelEvent::Touch | LevelEvent::Break => TOUCH_MILLIONTHS,
        }
    }
}

/// One level alert held.
#[derive(Clone, Copy, Debug)]
struct Watch {
    id: u64,
    condition: LevelCondition,
    repeat: bool,
    live: bool,
    /// The least time between two firings, ms; none is made before `quiet_until_ms`.
    cooldown_ms: i64,
    quiet_until_ms: i64,
}

/// One (alert, level): indices into the held watches and levels, and whether it waits to fire.
#[derive(Clone, Copy, Debug)]
struct Pair {
    watch: u32,
    level: u8,
    armed: bool,
}

/// A threshold in a heap: the price it is reached at and the pair it belongs to.
type Entry = (i64, u32);

/// The level alerts of one book.
#[derive(Clone, Debug, Default)]
pub struct LevelAlerts {
    watches: Vec<Watch>,
    live: usize,
    breaks: usize,
    levels: Vec<Level>,
    pairs: Vec<Pair>,
    /// Thresholds reached when the price is at or above them (smallest first).
    up: BinaryHeap<Reverse<Entry>>,
    /// Thresholds reached when the price is at or under them (largest first).
    down: BinaryHeap<Entry>,
    /// The tops of `up` and `down` (`i64::MAX` / `i64::MIN` when empty), kept here so that a
    /// trade that reaches nothing reads only this struct, not the heaps' buffers.
    up_next: i64,
    down_next: i64,
    /// Highest and lowest trade since the levels were taken.
    high: i64,
    low: i64,
    /// The last trade's price (or the price the levels were taken at).
    price: i64,
    /// Lowest high-formed and highest low-formed level still standing.
    high_floor: i64,
    low_ceiling: i64,
    /// The armed state of the pairs before a recompute, by (alert, price, side).
    carried: Vec<(u64, i64, bool, bool)>,
}

/// `level × (1 + signed_millionths / 10^8)`, rounded toward `up` (true: ceiling).
fn scaled(level: i64, signed_millionths: i64, up: bool) -> i64 {
    let num = i128::from(level) * (HUNDRED_PCT + i128::from(signed_millionths));
    let q = if up { -((-num).div_euclid(HUNDRED_PCT)) } else { num.div_euclid(HUNDRED_PCT) };
    i64::try_from(q).unwrap_or(if up { i64::MAX } else { i64::MIN })
}

impl LevelAlerts {
    /// Alerts held.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The ids held.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.watches.iter().filter(|w| w.live).map(|w| w.id)
    }

    /// When alert `id` is held with this condition and repeat flag, gives it `cooldown_s`
    /// (counted from its last firing) and is true; false when it is not held so. Its pairs keep
    /// their state.
    pub fn retune(&mut self, id: u64, condition: &LevelCondition, repeat: bool, cooldown_s: u32) -> bool {
        let held =
            self.watches.iter_mut().find(|w| w.live && w.id == id && w.condition == *condition && w.repeat == repeat);
        match held {
            Some(w) => {
                crate::cooldown::retune_cooldown(&mut w.cooldown_ms, &mut w.quiet_until_ms, cooldown_s);
                true
            }
            None => false,
        }
    }

    /// Adds a level alert (the caller removed any alert of the same id first), armed on each
    /// level the last price is outside the band of. Not the tick path: it may allocate (pairs for
    /// the levels held, room in both heaps).
    pub fn insert(&mut self, id: u64, condition: LevelCondition, repeat: bool, cooldown_s: u32) {
        let w = u32::try_from(self.watches.len()).unwrap_or(u32::MAX);
        let cooldown_ms = i64::from(cooldown_s) * 1_000;
        self.watches.push(Watch { id, condition, repeat, live: true, cooldown_ms, quiet_until_ms: i64::MIN });
        self.live += 1;
        if condition.event == LevelEvent::Break {
            self.breaks += 1;
        }
        self.pairs.reserve(self.levels.len());
        for l in 0..self.levels.len() {
            self.add_pair(w, l, None, self.price);
        }
        self.reserve_heaps();
    }

    /// Removes alert `id`; true if it was held. Its pairs are dropped when they surface.
    pub fn remove(&mut self, id: u64) -> bool {
        let Some(w) = self.watches.iter_mut().find(|w| w.live && w.id == id) else { return false };
        w.live = false;
        self.live -= 1;
        if w.condition.event == LevelEvent::Break {
            self.breaks -= 1;
        }
        true
    }

    /// Takes the book's newly computed levels, `price` the last trade: pairs are made again for
    /// every alert held (keeping each pair's armed state while its level stays), removed alerts
    /// are dropped. Not the tick path (once a minute per book): it may allocate.
    pub fn on_levels(&mut self, levels: &[Level], price: Price) {
        debug_assert!(levels.len() <= LEVELS_MAX, "a level set holds at most LEVELS_MAX levels");
        self.carried.clear();
        for p in &self.pairs {
            let (w, l) = (&self.watches[p.watch as usize], &self.levels[p.level as usize]);
            if w.live {
                self.carried.push((w.id, l.price.0, l.side == Formation::High, p.armed));
            }
        }
        self.carried.sort_unstable_by_key(|c| (c.0, c.1, c.2));
        self.watches.retain(|w| w.live);
        self.levels.clear();
        self.levels.extend_from_slice(levels);
        self.price = price.0;
        self.high = i64::MIN;
        self.low = i64::MAX;
        self.refresh_bounds();
        self.pairs.clear();
        self.up.clear();
        self.down.clear();
        if self.watches.is_empty() {
            self.refresh_tops();
            return;
        }
        for w in 0..self.watches.len() {
            for l in 0..self.levels.len() {
                let (id, level) = (self.watches[w].id, self.levels[l]);
                let key = (id, level.price.0, level.side == Formation::High);
                let carried = self.carried.binary_search_by_key(&key, |c| (c.0, c.1, c.2)).ok();
                let armed = carried.map(|i| self.carried[i].3);
                self.add_pair(w as u32, l, armed, price.0);
            }
        }
        self.reserve_heaps();
    }

    fn reserve_heaps(&mut self) {
        self.refresh_tops();
        let n = self.pairs.len();
        self.up.reserve(n.saturating_sub(self.up.len()));
        self.down.reserve(n.saturating_sub(self.down.len()));
    }

    fn refresh_bounds(&mut self) {
        let (high, low) = (self.high, self.low);
        let standing = self.levels.iter().filter(|l| l.survives(high, low));
        let (mut floor, mut ceiling) = (i64::MAX, i64::MIN);
        for l in standing {
            match l.side {
                Formation::High => floor = floor.min(l.price.0),
                Formation::Low => ceiling = ceiling.max(l.price.0),
            }
        }
        (self.high_floor, self.low_ceiling) = (floor, ceiling);
    }

    /// A pair of watch `w` and level `l` if the alert watches that level (`approach` and `touch`
    /// only), armed as carried or, new, when the price is outside its band.
    fn add_pair(&mut self, w: u32, l: usize, carried: Option<bool>, price: i64) {
        let (watch, level) = (&self.watches[w as usize], &self.levels[l]);
        let standing = level.survives(self.high, self.low);
        if watch.condition.event == LevelEvent::Break || !watch.condition.admits(level) || !standing {
            return;
        }
        let fire_at = Self::threshold(level, watch.condition.band(), false);
        let inside = match level.side {
            Formation::High => price >= fire_at,
            Formation::Low => price <= fire_at,
        };
        let armed = carried.unwrap_or(true) && !inside;
        let i = u32::try_from(self.pairs.len()).unwrap_or(u32::MAX);
        self.pairs.push(Pair { watch: w, level: l as u8, armed });
        self.queue(i);
    }

    /// The price at which a pair's band starts (`rearm`: false) or where a spent pair re-arms,
    /// 0.1 % beyond it: below a high-formed level, above a low-formed one.
    fn threshold(level: &Level, band: u32, rearm: bool) -> i64 {
        let m = i64::from(band) + if rearm { i64::from(REARM_MILLIONTHS) } else { 0 };
        match (level.side, rearm) {
            (Formation::High, false) => scaled(level.price.0, -m, true),
            (Formation::High, true) => scaled(level.price.0, -m, false),
            (Formation::Low, false) => scaled(level.price.0, m, false),
            (Formation::Low, true) => scaled(level.price.0, m, true),
        }
    }

    /// Puts pair `i`'s next threshold in its heap: an armed pair's band start, a spent one's
    /// re-arm price. Never grows a heap on a tick (both hold room for every pair).
    fn queue(&mut self, i: u32) {
        let p = self.pairs[i as usize];
        let (watch, level) = (&self.watches[p.watch as usize], &self.levels[p.level as usize]);
        let at = Self::threshold(level, watch.condition.band(), !p.armed);
        // A high-formed level is approached from below: its band is reached going up, its
        // re-arm going down; a low-formed one the other way round.
        let going_up = (level.side == Formation::High) == p.armed;
        if going_up {
            self.up.push(Reverse((at, i)));
        } else {
            self.down.push((at, i));
        }
    }

    /// The most firings one trade can make: every alert on every level held.
    pub fn firings_max(&self) -> usize {
        self.live * LEVELS_MAX
    }

    /// Evaluates a trade at `price`, `ts_ms`: breaks first (the levels it goes through), then the
    /// pairs whose threshold it reached. Firings are appended to `out`, which must have room for
    /// [`LevelAlerts::firings_max`] more (the market reserves it). Allocates nothing.
    pub fn on_trade(&mut self, price: Price, ts_ms: i64, out: &mut Vec<Firing>) {
        let p = price.0;
        self.price = p;
        if self.levels.is_empty() {
            return;
        }
        // The watermarks move even without alerts: one inserted later must not see a level a
        // trade has gone through as standing.
        if p > self.high_floor || p < self.low_ceiling {
            self.fire_breaks(price, ts_ms, out);
            self.high = self.high.max(p);
            self.low = self.low.min(p);
            self.refresh_bounds();
        }
        if self.live == 0 || (p < self.up_next && p > self.down_next) {
            return;
        }
        while let Some(&Reverse((at, i))) = self.up.peek() {
            if at > p {
                break;
            }
            self.up.pop();
            self.reached(i, price, ts_ms, out);
        }
        while let Some(&(at, i)) = self.down.peek() {
            if at < p {
                break;
            }
            self.down.pop();
            self.reached(i, price, ts_ms, out);
        }
        self.refresh_tops();
    }

    /// Caches the heaps' tops after they changed.
    fn refresh_tops(&mut self) {
        self.up_next = self.up.peek().map_or(i64::MAX, |Reverse((at, _))| *at);
        self.down_next = self.down.peek().map_or(i64::MIN, |(at, _)| *at);
    }

    /// Every break alert that watches a level the trade at `p` goes through fires.
    fn fire_breaks(&mut self, price: Price, ts_ms: i64, out: &mut Vec<Firing>) {
        if self.breaks == 0 || self.live == 0 {
            return;
        }
        let (high, low) = (self.high, self.low);
        for l in 0..self.levels.len() {
            let level = self.levels[l];
            if !level.survives(high, low) || !level.consumed_by(price) {
                continue;
            }
            for w in 0..self.watches.len() {
                let watch = self.watches[w];
                if watch.live && watch.condition.event == LevelEvent::Break && watch.condition.admits(&level) {
                    self.fire(w, level, price, ts_ms, out);
                }
            }
        }
    }

    /// Pair `i`'s threshold was reached: an armed pair fires and waits to re-arm; a spent one is
    /// armed again. A pair of a removed alert or a broken level is dropped.
    fn reached(&mut self, i: u32, price: Price, ts_ms: i64, out: &mut Vec<Firing>) {
        let p = self.pairs[i as usize];
        let level = self.levels[p.level as usize];
        if !self.watches[p.watch as usize].live || !level.survives(self.high, self.low) {
            return;
        }
        if p.armed {
            self.fire(p.watch as usize, level, price, ts_ms, out);
        }
        self.pairs[i as usize].armed = !p.armed;
        if self.watches[p.watch as usize].live {
            self.queue(i);
        }
    }

    fn fire(&mut self, w: usize, level: Level, price: Price, ts_ms: i64, out: &mut Vec<Firing>) {
        let watch = &mut self.watches[w];
        if ts_ms < watch.quiet_until_ms {
            return; // within its cooldown: not made (the pair moves on as if it had fired)
        }
        watch.quiet_until_ms = ts_ms.saturating_add(watch.cooldown_ms);
        let watch = *watch;
        debug_assert!(out.len() < out.capacity(), "the firing buffer must be reserved");
        let last = !watch.repeat;
        out.push(Firing { id: watch.id, price, move_hundredths: None, ts_ms, last, detail: Detail::Level(level) });
        if !watch.repeat {
            self.remove(watch.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn high(price: i64, strength: u32, origin: Origin) -> Level {
        Level { price: Price(price), side: Formation::High, origin, time_ms: 0, strength }
    }

    fn low(price: i64, strength: u32, origin: Origin) -> Level {
        Level { price: Price(price), side: Formation::Low, origin, time_ms: 0, strength }
    }

    fn cond(event: LevelEvent, direction: LevelDirection, within: u32) -> LevelCondition {
        LevelCondition { event, direction, within_millionths: within, min_strength: 1, timeframes: TIMEFRAMES_ALL }
    }

    struct Rig {
        alerts: LevelAlerts,
        out: Vec<Firing>,
    }

    impl Rig {
        fn new(levels: &[Level], price: i64, specs: &[(u64, LevelCondition, bool)]) -> Rig {
            let mut alerts = LevelAlerts::default();
            alerts.on_levels(levels, Price(price));
            for (id, c, repeat) in specs {
                alerts.insert(*id, *c, *repeat, 0);
            }
            Rig { alerts, out: Vec::with_capacity(256) }
        }

        fn trade(&mut self, p: i64) -> Vec<(u64, i64)> {
            self.out.clear();
            self.alerts.on_trade(Price(p), 0, &mut self.out);
            self.out.iter().map(|f| (f.id, f.level().map_or(0, |l| l.price.0))).collect()
        }
    }

    #[test]
    fn an_approach_fires_entering_the_band_and_rearms_past_it() {
        // Resistance at 10 000; 1 % band starts at 9 900, re-arms at 9 890 (1.1 % under).
        let mut r = Rig::new(
            &[high(10_000, 1, Origin::H4)],
            9_000,
            &[(1, cond(LevelEvent::Approach, LevelDirection::Any, 1_000_000), true)],
        );
        assert_eq!(r.trade(9_899), vec![]);
        assert_eq!(r.trade(9_900), vec![(1, 10_000)]);
        assert_eq!(r.trade(9_950), vec![], "inside the band: once");
        assert_eq!(r.trade(9_895), vec![], "out of the band but not 0.1 % beyond");
        assert_eq!(r.trade(9_901), vec![], "not re-armed");
        assert_eq!(r.trade(9_890), vec![], "re-armed");
        assert_eq!(r.trade(9_900), vec![(1, 10_000)]);
    }

    #[test]
    fn a_one_shot_approach_fires_once_and_is_gone() {
        let mut r = Rig::new(
            &[low(9_000, 1, Origin::D1)],
            10_000,
            &[(7, cond(LevelEvent::Approach, LevelDirection::Below, 500_000), false)],
        );
        assert_eq!(r.trade(9_046), vec![]);
        assert_eq!(r.trade(9_045), vec![(7, 9_000)]);
        assert!(r.alerts.is_empty());
        assert_eq!(r.trade(10_000), vec![]);
        assert_eq!(r.trade(9_040), vec![]);
    }

    #[test]
    fn a_touch_trades_at_the_level_and_leaves_it_standing() {
        // 0.05 % under 100 000 is 99 950.
        let mut r = Rig::new(
            &[high(100_000, 1, Origin::H1)],
            99_000,
            &[(1, cond(LevelEvent::Touch, LevelDirection::Any, 0), true)],
        );
        assert_eq!(r.trade(99_949), vec![]);
        assert_eq!(r.trade(99_950), vec![(1, 100_000)]);
        assert_eq!(r.trade(100_000), vec![], "spent until 0.15 % under");
        assert_eq!(r.trade(99_850), vec![]);
        assert_eq!(r.trade(100_000), vec![(1, 100_000)]);
    }

    #[test]
    fn a_break_fires_on_the_trade_through_the_level_and_ends_its_pairs() {
        let specs = [
            (1, cond(LevelEvent::Break, LevelDirection::Any, 0), true),
            (2, cond(LevelEvent::Approach, LevelDirection::Any, 1_000_000), true),
        ];
        let mut r = Rig::new(
            &[high(10_000, 1, Origin::H4), high(10_500, 1, Origin::D1), low(9_000, 1, Origin::H4)],
            9_500,
            &specs,
        );
        assert_eq!(r.trade(10_000), vec![(2, 10_000)], "at the level: approached, not broken");
        assert_eq!(
            r.trade(10_600),
            vec![(1, 10_000), (1, 10_500)],
            "a jump through two: both broken, no approach of a broken level"
        );
        assert_eq!(r.trade(9_800), vec![], "broken levels are gone");
        assert_eq!(r.trade(10_600), vec![]);
        assert_eq!(r.trade(8_999), vec![(1, 9_000)]);
    }

    #[test]
    fn filters_that_exclude_do_not_fire() {
        let levels = [high(10_000, 1, Origin::M15), high(10_100, 3, Origin::H4), low(9_000, 2, Origin::Dmin)];
        let strong = LevelCondition { min_strength: 2, ..cond(LevelEvent::Break, LevelDirection::Any, 0) };
        let four_hour =
            LevelCondition { timeframes: Origin::H4.bit(), ..cond(LevelEvent::Break, LevelDirection::Any, 0) };
        let support = cond(LevelEvent::Break, LevelDirection::Below, 0);
        let mut r = Rig::new(&levels, 9_500, &[(1, strong, true), (2, four_hour, true), (3, support, true)]);
        assert_eq!(r.trade(10_050), vec![], "a 15m strength-1 resistance broken: none wants it");
        assert_eq!(r.trade(10_200), vec![(1, 10_100), (2, 10_100)]);
        assert_eq!(r.trade(8_900), vec![(1, 9_000), (3, 9_000)]);
    }

    #[test]
    fn an_alert_made_inside_the_band_waits_to_leave_it() {
        let mut r = Rig::new(
            &[high(10_000, 1, Origin::H4)],
            9_950,
            &[(1, cond(LevelEvent::Approach, LevelDirection::Any, 1_000_000), true)],
        );
        assert_eq!(r.trade(9_960), vec![]);
        assert_eq!(r.trade(9_890), vec![]);
        assert_eq!(r.trade(9_900), vec![(1, 10_000)]);
    }

    #[test]
    fn a_recompute_keeps_a_spent_pair_spent_and_drops_removed_alerts() {
        let levels = [high(10_000, 1, Origin::H4)];
        let c = cond(LevelEvent::Approach, LevelDirection::Any, 1_000_000);
        let mut r = Rig::new(&levels, 9_000, &[(1, c, true), (2, c, true)]);
        assert_eq!(r.trade(9_900), vec![(1, 10_000), (2, 10_000)]);
        assert!(r.alerts.remove(2));
        assert_eq!(r.trade(9_895), vec![]);
        r.alerts.on_levels(&levels, Price(9_895));
        assert_eq!(r.trade(9_900), vec![], "still spent: it has not left by 0.1 %");
        assert_eq!(r.trade(9_800), vec![]);
        assert_eq!(r.trade(9_900), vec![(1, 10_000)], "alert 2 removed");
        assert_eq!(r.alerts.ids().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_cooldown_holds_back_the_firings_within_it() {
        let mut alerts = LevelAlerts::default();
        alerts.on_levels(&[high(10_000, 1, Origin::H4)], Price(9_000));
        alerts.insert(1, cond(LevelEvent::Approach, LevelDirection::Any, 1_000_000), true, 60);
        let mut out = Vec::with_capacity(64);
        let mut at = |ts: i64, p: i64, out: &mut Vec<Firing>| {
            out.clear();
            alerts.on_trade(Price(p), ts, out);
            out.len()
        };
        assert_eq!(at(0, 9_900, &mut out), 1);
        assert_eq!(at(1_000, 9_800, &mut out), 0, "re-armed");
        assert_eq!(at(2_000, 9_900, &mut out), 0, "within the minute: held back");
        assert_eq!(at(3_000, 9_800, &mut out), 0);
        assert_eq!(at(60_000, 9_900, &mut out), 1, "the minute is over");
    }

    #[test]
    fn thresholds_round_toward_the_band() {
        let l = high(999, 1, Origin::H4);
        // 999 × 0.99 = 989.01: the band starts at the first whole unit inside it.
        assert_eq!(LevelAlerts::threshold(&l, 1_000_000, false), 990);
        assert_eq!(LevelAlerts::threshold(&l, 1_000_000, true), 988);
        let l = low(999, 1, Origin::H4);
        assert_eq!(LevelAlerts::threshold(&l, 1_000_000, false), 1_008);
        assert_eq!(LevelAlerts::threshold(&l, 1_000_000, true), 1_010);
    }
}
