//! Alerts: price-cross and percent-move conditions, evaluated on every trade of their book
//! (`decisions.md` §5). Pure and allocation-free on the tick path.
//!
//! Price alerts live in heaps ordered by level, so a trade costs O(log n + fired): `above`
//! alerts in a min-heap (everything at or under the price fires), `below` alerts in a max-heap.
//! A repeating alert that fired waits in a re-arm heap until the price retreats 0.1% past its
//! level. Percent alerts live in one heap per (window, direction) ordered by threshold; one that
//! fired waits until its window's candle bucket rolls over. Deletion is lazy: the heaps hold
//! (id, generation) and an entry whose generation is stale is dropped when it surfaces; heaps are
//! compacted when more than half of an alert book's entries are stale.
//!
//! No allocation on the tick path: every heap reserves room for every alert of its book when the
//! alert is inserted (a command, not a tick), so moving an alert between heaps never grows one.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::candle::{CandleSet, Timeframe};
use crate::cooldown::retune_cooldown;
use crate::firing::Detail;
pub use crate::firing::Firing;
use crate::fixed::Price;
use crate::level::Level;
use crate::level_alert::{LevelAlerts, LevelCondition};
use crate::perp_alert::PerpCondition;
use crate::wall::Wall;
use crate::wall_alert::{WallAlerts, WallCondition};
use crate::wall_life::WallEnded;

/// Percent thresholds are kept in millionths of a percent, exactly as a client gives them up to
/// six decimals: 0.1% is 100 000, 500% is 500 000 000.
pub const PCT_MILLIONTHS_MIN: u32 = 100_000;
/// Largest percent threshold, in millionths.
pub const PCT_MILLIONTHS_MAX: u32 = 500_000_000;

/// Direction of a price alert.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cross {
    /// Fires at the first trade with price >= level.
    Above,
    /// Fires at the first trade with price <= level.
    Below,
}

/// Direction of a percent-move alert.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Move {
    /// Fires when the move from the candle open is at least +pct.
    Up,
    /// Fires when the move is at most -pct.
    Down,
    /// Fires when the absolute move is at least pct.
    Any,
}

impl Cross {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Cross::Above => "above",
            Cross::Below => "below",
        }
    }

    /// The direction the API spells `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Cross> {
        [Cross::Above, Cross::Below].into_iter().find(|c| c.as_str() == s)
    }
}

impl Move {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Move::Up => "up",
            Move::Down => "down",
            Move::Any => "any",
        }
    }

    /// The direction the API spells `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Move> {
        [Move::Up, Move::Down, Move::Any].into_iter().find(|m| m.as_str() == s)
    }

    fn index(self) -> usize {
        match self {
            Move::Up => 0,
            Move::Down => 1,
            Move::Any => 2,
        }
    }
}

/// An alert's condition.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Condition {
    /// Price crosses a level.
    Price {
        /// Direction.
        cross: Cross,
        /// The level.
        level: Price,
    },
    /// Price moves from the open of the current candle of `window`.
    Pct {
        /// Direction.
        dir: Move,
        /// Threshold in millionths of a percent.
        millionths: u32,
        /// Candle timeframe measured from.
        window: Timeframe,
    },
    /// A level of the book approached, touched or broken (`decisions.md` §15).
    Level(LevelCondition),
    /// A wall of the book appeared, pulled or filled (`decisions.md` §15).
    Wall(WallCondition),
    /// A derivatives alert: liquidations, open interest or funding (`decisions.md` §17),
    /// decided by the book's perpetual, never by its trades (the shard holds it apart).
    Perp(PerpCondition),
}

impl Condition {
    /// The alert type as the API spells it: `price` or `pct`.
    pub fn kind(&self) -> &'static str {
        match self {
            Condition::Price { .. } => "price",
            Condition::Pct { .. } => "pct",
            Condition::Level(_) => "level",
            Condition::Wall(_) => "wall",
            Condition::Perp(c) => c.kind(),
        }
    }

    /// The direction as the API spells it.
    pub fn direction(&self) -> &'static str {
        match self {
            Condition::Price { cross, .. } => cross.as_str(),
            Condition::Pct { dir, .. } => dir.as_str(),
            Condition::Level(c) => c.direction.as_str(),
            Condition::Wall(c) => c.side.as_str(),
            Condition::Perp(c) => c.direction(),
        }
    }
}

/// An alert as a shard holds it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AlertSpec {
    /// Alert id (the database row id).
    pub id: u64,
    /// Condition.
    pub condition: Condition,
    /// Re-arms after firing instead of becoming `triggered`.
    pub repeat: bool,
    /// The least time between two firings on this book, seconds (`decisions.md` §15, §16): a
    /// firing decided sooner is not made (the alert moves on as if it had fired: it re-arms as
    /// after a firing). 0: none.
    pub cooldown_s: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Entry {
    key: i64,
    id: u64,
    gen: u32,
}

#[derive(Clone, Copy, Debug)]
struct State {
    spec: AlertSpec,
    gen: u32,
    /// For percent alerts: the bucket it last fired in.
    fired_bucket: i64,
    /// No firing before this (its cooldown after the last one), Unix milliseconds.
    quiet_until_ms: i64,
}

/// The alerts of one book.
#[derive(Clone, Debug, Default)]
pub struct AlertBook {
    states: HashMap<u64, State>,
    above: BinaryHeap<Reverse<Entry>>,
    below: BinaryHeap<Entry>,
    above_rearm: BinaryHeap<Entry>,
    below_rearm: BinaryHeap<Reverse<Entry>>,
    /// Per window, per direction: armed percent alerts by threshold (smallest first).
    pct: [[BinaryHeap<Reverse<Entry>>; 3]; 6],
    /// Per window: percent alerts that fired in the current bucket, waiting for the roll-over.
    pct_waiting: [Vec<Entry>; 6],
    /// Per window: the bucket the waiting list belongs to.
    pct_bucket: [i64; 6],
    /// Per window: the prices between which no armed percent alert of it can fire in its
    /// current bucket, so that a trade there reads neither the window's candle nor its heaps.
    pct_gate: [PctGate; 6],
    stale: usize,
    next_gen: u32,
    /// The level alerts, decided apart (their own pairs and heaps).
    levels: LevelAlerts,
    /// The wall alerts, decided on the book's wall scans.
    walls: WallAlerts,
}

/// While the window's bucket is `bucket` and a trade's price is strictly between `low` and
/// `high`, none of its armed percent alerts is reached (the nearest thresholds, from the bucket's
/// open). The default (all zero) lets no trade through unevaluated; so does a gate made stale
/// by a new alert or a new open ([`AlertBook::candles_changed`]).
#[derive(Clone, Copy, Debug, Default)]
struct PctGate {
    bucket: i64,
    low: i64,
    high: i64,
}

fn rearm_below_level(level: i64) -> i64 {
    // price <= level * 0.999, for integer prices.
    ((i128::from(level) * 999).div_euclid(1000)) as i64
}

fn rearm_above_level(level: i64) -> i64 {
    // price >= level * 1.001, for integer prices.
    (-((-i128::from(level) * 1001).div_euclid(1000))) as i64
}

impl AlertBook {
    /// Number of alerts held.
    pub fn len(&self) -> usize {
        self.states.len() + self.levels.len() + self.walls.len()
    }

    /// True when no alert is held.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty() && self.levels.is_empty() && self.walls.is_empty()
    }

    /// The most firings one trade or one wall scan of this book can make (the firing buffer's
    /// room).
    pub fn firings_max(&self) -> usize {
        (self.states.len() + self.levels.firings_max()).max(self.walls.firings_max())
    }

    /// Takes one wall scan of the book at `now_ms` (`price`: the book's price then) for the wall
    /// alerts: the walls standing (valued with `quote_usd`) and the walls it found gone. Firings go
    /// to `out`, with room for [`AlertBook::firings_max`] more. Allocates nothing.
    pub fn on_scan(
        &mut self,
        now_ms: i64,
        price: Price,
        walls: &[Wall],
        quote_usd: Option<f64>,
        ended: &[WallEnded],
        out: &mut Vec<Firing>,
    ) {
        self.walls.on_scan(now_ms, price, (walls, quote_usd), ended, out);
    }

    /// Takes the book's newly computed levels (`price`: the last trade) for the level alerts.
    /// Not the tick path.
    pub fn on_levels(&mut self, levels: &[Level], price: Price) {
        self.levels.on_levels(levels, price);
    }

    /// Entries in all heaps, stale ones included (for tests and compaction).
    fn entries(&self) -> usize {
        self.above.len()
            + self.below.len()
            + self.above_rearm.len()
            + self.below_rearm.len()
            + self.pct.iter().flatten().map(BinaryHeap::len).sum::<usize>()
            + self.pct_waiting.iter().map(Vec::len).sum::<usize>()
    }

    /// Reserves room for one more alert of `condition`'s kind in every heap such an alert can
    /// move between, so ticks never grow one: entries of one kind only move between its armed
    /// heap and its waiting heap, so each needs room for both heaps' entries together.
    fn reserve_for(&mut self, condition: Condition) {
        fn room<T: Ord>(h: &mut BinaryHeap<T>, total: usize) {
            h.reserve(total.saturating_sub(h.len()));
        }
        match condition {
            Condition::Price { cross: Cross::Above, .. } => {
                let total = self.above.len() + self.above_rearm.len() + 1;
                room(&mut self.above, total);
                room(&mut self.above_rearm, total);
            }
            Condition::Price { cross: Cross::Below, .. } => {
                let total = self.below.len() + self.below_rearm.len() + 1;
                room(&mut self.below, total);
                room(&mut self.below_rearm, total);
            }
            Condition::Pct { window, .. } => {
                let w = window.index();
                let waiting = self.pct_waiting[w].len();
                let armed: usize = self.pct[w].iter().map(BinaryHeap::len).sum();
                let total = armed + waiting + 1;
                for h in &mut self.pct[w] {
                    room(h, total);
                }
                self.pct_waiting[w].reserve(total.saturating_sub(waiting));
            }
            Condition::Level(_) | Condition::Wall(_) | Condition::Perp(_) => {}
        }
    }

    /// Adds (or replaces) an alert. Adding an alert already held with the same condition and
    /// repeat flag changes nothing but its cooldown (a repeating alert keeps its armed state and
    /// firing bucket; `PATCH` changes a cooldown so, `decisions.md` §16): a cluster's market node
    /// may be told of one alert more than once (its command, then storage). Not on the tick
    /// path: it may allocate.
    pub fn insert(&mut self, spec: AlertSpec) {
        match spec.condition {
            Condition::Level(c) => {
                if !self.levels.retune(spec.id, &c, spec.repeat, spec.cooldown_s) {
                    self.remove(spec.id);
                    self.levels.insert(spec.id, c, spec.repeat, spec.cooldown_s);
                }
                return;
            }
            Condition::Wall(c) => {
                if !self.walls.retune(spec.id, &c, spec.repeat, spec.cooldown_s) {
                    self.remove(spec.id);
                    self.walls.insert(spec.id, c, spec.repeat, spec.cooldown_s);
                }
                return;
            }
            Condition::Perp(_) => {
                // Decided by the book's perpetual (the shard's `PerpAlertBook`), not here.
                debug_assert!(false, "a derivatives alert handed to a book's trade alerts");
                self.remove(spec.id);
                return;
            }
            Condition::Price { .. } | Condition::Pct { .. } => {}
        }
        self.levels.remove(spec.id);
        self.walls.remove(spec.id);
        match self.states.get_mut(&spec.id) {
            Some(held) if AlertSpec { cooldown_s: spec.cooldown_s, ..held.spec } == spec => {
                let mut cooldown_ms = i64::from(held.spec.cooldown_s) * 1_000;
                retune_cooldown(&mut cooldown_ms, &mut held.quiet_until_ms, spec.cooldown_s);
                held.spec.cooldown_s = spec.cooldown_s;
                return;
            }
            Some(_) => {
                self.remove(spec.id);
            }
            None => {}
        }
        self.reserve_for(spec.condition);
        self.next_gen = self.next_gen.wrapping_add(1);
        let gen = self.next_gen;
        self.states.insert(spec.id, State { spec, gen, fired_bucket: i64::MIN, quiet_until_ms: i64::MIN });
        self.arm(spec, gen);
    }

    /// Adds an alert its owner resumed (`decisions.md` §16). One already held is only retuned,
    /// as [`AlertBook::insert`]. A price alert starts disarmed: it arms at the first trade on
    /// the far side of its level (strictly below for `above`, above for `below`) and fires at a
    /// crossing after that, so resuming while price is past its level fires nothing.
    pub fn resume(&mut self, spec: AlertSpec) {
        let held = self.states.contains_key(&spec.id);
        self.insert(spec);
        let Condition::Price { cross, level } = spec.condition else { return };
        if held {
            return;
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let gen = self.next_gen;
        let Some(state) = self.states.get_mut(&spec.id) else { return };
        // The armed entry `insert` pushed goes stale.
        state.gen = gen;
        self.stale += 1;
        match cross {
            Cross::Above => self.above_rearm.push(Entry { key: level.0.saturating_sub(1), id: spec.id, gen }),
            Cross::Below => self.below_rearm.push(Reverse(Entry { key: level.0.saturating_add(1), id: spec.id, gen })),
        }
        self.reserve_for(spec.condition);
    }

    fn arm(&mut self, spec: AlertSpec, gen: u32) {
        match spec.condition {
            Condition::Price { cross: Cross::Above, level } => {
                self.above.push(Reverse(Entry { key: level.0, id: spec.id, gen }));
            }
            Condition::Price { cross: Cross::Below, level } => {
                self.below.push(Entry { key: level.0, id: spec.id, gen });
            }
            Condition::Pct { dir, millionths, window } => {
                self.pct_gate[window.index()] = PctGate::default();
                self.pct[window.index()][dir.index()].push(Reverse(Entry {
                    key: i64::from(millionths),
                    id: spec.id,
                    gen,
                }));
            }
            Condition::Level(_) | Condition::Wall(_) | Condition::Perp(_) => {}
        }
    }

    /// Removes an alert; true if it was held. Its heap entries become stale.
    pub fn remove(&mut self, id: u64) -> bool {
        if self.states.remove(&id).is_none() {
            return self.levels.remove(id) || self.walls.remove(id);
        }
        self.stale += 1;
        if self.stale > 64 && self.stale * 2 > self.entries() {
            self.compact();
        }
        true
    }

    /// The price or percent alert `id` as held (its spec); `None` when not held (or a level or
    /// wall alert, held apart).
    pub fn spec(&self, id: u64) -> Option<AlertSpec> {
        self.states.get(&id).map(|s| s.spec)
    }

    /// Every alert id held.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.states.keys().copied().chain(self.levels.ids()).chain(self.walls.ids())
    }

    fn live(&self, e: &Entry) -> bool {
        self.states.get(&e.id).is_some_and(|s| s.gen == e.gen)
    }

    fn compact(&mut self) {
        let states = &self.states;
        let keep = |e: &Entry| states.get(&e.id).is_some_and(|s| s.gen == e.gen);
        self.above.retain(|Reverse(e)| keep(e));
        self.below.retain(|e| keep(e));
        self.above_rearm.retain(|e| keep(e));
        self.below_rearm.retain(|Reverse(e)| keep(e));
        for dirs in &mut self.pct {
            for h in dirs.iter_mut() {
                h.retain(|Reverse(e)| keep(e));
            }
        }
        for w in &mut self.pct_waiting {
            w.retain(|e| keep(e));
        }
        self.stale = 0;
    }

    /// Evaluates every alert of the book against a trade at `price`, `ts_ms`, with the book's
    /// candles (already updated with this trade) for percent alerts, then the level alerts.
    /// Firings are appended to `out`, which must have room for [`AlertBook::firings_max`] more
    /// (the market reserves it).
    pub fn on_trade(&mut self, price: Price, ts_ms: i64, candles: &CandleSet, out: &mut Vec<Firing>) {
        self.levels.on_trade(price, ts_ms, out);
        if self.states.is_empty() {
            return;
        }
        self.rearm_price_alerts(price.0);
        self.fire_price_alerts(price, ts_ms, out);
        for (w, tf) in Timeframe::ALL.into_iter().enumerate() {
            self.fire_pct_alerts(w, tf, price, ts_ms, candles, out);
        }
    }

    /// Re-arms repeating price alerts whose price has retreated 0.1% past the level: `p` is the
    /// trade's price.
    fn rearm_price_alerts(&mut self, p: i64) {
        while let Some(&top) = self.above_rearm.peek() {
            if top.key < p {
                break;
            }
            self.above_rearm.pop();
            if let Some(s) = self.states.get(&top.id).filter(|s| s.gen == top.gen) {
                if let Condition::Price { level, .. } = s.spec.condition {
                    self.above.push(Reverse(Entry { key: level.0, ..top }));
                }
            }
        }
        while let Some(&Reverse(top)) = self.below_rearm.peek() {
            if top.key > p {
                break;
            }
            self.below_rearm.pop();
            if let Some(s) = self.states.get(&top.id).filter(|s| s.gen == top.gen) {
                if let Condition::Price { level, .. } = s.spec.condition {
                    self.below.push(Entry { key: level.0, ..top });
                }
            }
        }
    }

    /// Fires the armed price alerts a trade at `price` crosses.
    fn fire_price_alerts(&mut self, price: Price, ts_ms: i64, out: &mut Vec<Firing>) {
        let p = price.0;
        while let Some(&Reverse(top)) = self.above.peek() {
            if top.key > p {
                break;
            }
            self.above.pop();
            if self.live(&top) {
                self.fire(top, price, None, ts_ms, out, |b, e| {
                    b.above_rearm.push(Entry { key: rearm_below_level(e.key), ..e })
                });
            }
        }
        while let Some(&top) = self.below.peek() {
            if top.key < p {
                break;
            }
            self.below.pop();
            if self.live(&top) {
                self.fire(top, price, None, ts_ms, out, |b, e| {
                    b.below_rearm.push(Reverse(Entry { key: rearm_above_level(e.key), ..e }))
                });
            }
        }
    }

    /// Fires the percent alerts of window `w` (timeframe `tf`) that a trade at `price` reaches,
    /// the move measured from the open of the window's current candle.
    fn fire_pct_alerts(
        &mut self,
        w: usize,
        tf: Timeframe,
        price: Price,
        ts_ms: i64,
        candles: &CandleSet,
        out: &mut Vec<Firing>,
    ) {
        if self.pct[w].iter().all(BinaryHeap::is_empty) && self.pct_waiting[w].is_empty() {
            return;
        }
        let bucket = tf.bucket_start(ts_ms);
        let gate = self.pct_gate[w];
        if gate.bucket == bucket && price.0 > gate.low && price.0 < gate.high {
            return;
        }
        if bucket != self.pct_bucket[w] {
            self.roll_pct_bucket(w, bucket);
        }
        let Some(open) = candles.ring(tf).newest().filter(|c| c.open_ms == bucket).map(|c| c.open.0) else {
            return;
        };
        if open <= 0 {
            return;
        }
        let p = price.0;
        // The move, reported in hundredths of a percent: (p - open) / open * 10_000.
        let diff = i128::from(p) - i128::from(open);
        let move_h = (diff * 10_000 / i128::from(open)) as i64;
        // Compared exactly: move% >= key / 10^6 <=> diff * 10^8 >= key * open.
        let scaled = diff * 100_000_000;
        for d in [Move::Up, Move::Down, Move::Any] {
            while let Some(&Reverse(top)) = self.pct[w][d.index()].peek() {
                let t = i128::from(top.key) * i128::from(open);
                let reached = match d {
                    Move::Up => scaled >= t,
                    Move::Down => -scaled >= t,
                    Move::Any => scaled.abs() >= t,
                };
                if !reached {
                    break;
                }
                self.pct[w][d.index()].pop();
                if !self.live(&top) {
                    continue;
                }
                if let Some(s) = self.states.get_mut(&top.id) {
                    s.fired_bucket = bucket;
                }
                self.fire(top, price, Some(move_h), ts_ms, out, |b, e| b.pct_waiting[w].push(e));
            }
        }
        self.pct_gate[w] = self.pct_gate_of(w, bucket, open);
    }

    /// The gate of window `w` in `bucket` whose candle opened at `open` (> 0): the nearest
    /// thresholds still armed, as prices. A threshold of `key` millionths of a percent is reached
    /// up at `open + ceil(key × open / 10^8)` and down at `open - ceil(…)`.
    fn pct_gate_of(&self, w: usize, bucket: i64, open: i64) -> PctGate {
        let top = |d: Move| self.pct[w][d.index()].peek().map(|Reverse(e)| e.key);
        let reach = |key: i64| -> i64 {
            let num = i128::from(key) * i128::from(open);
            let delta = (num + 99_999_999) / 100_000_000;
            i64::try_from(delta).unwrap_or(i64::MAX)
        };
        let nearest = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        let up = nearest(top(Move::Up), top(Move::Any));
        let down = nearest(top(Move::Down), top(Move::Any));
        PctGate {
            bucket,
            high: up.map_or(i64::MAX, |k| open.saturating_add(reach(k))),
            low: down.map_or(i64::MIN, |k| open.saturating_sub(reach(k))),
        }
    }

    /// The book's candles were replaced or merged (history loaded): the opens the percent
    /// gates were computed from may have changed, so the next trade evaluates every window.
    pub fn candles_changed(&mut self) {
        self.pct_gate = [PctGate::default(); 6];
    }

    /// A new candle in window `w`, starting at `bucket`: the alerts that fired in the previous
    /// bucket are armed again.
    fn roll_pct_bucket(&mut self, w: usize, bucket: i64) {
        self.pct_bucket[w] = bucket;
        let mut waiting = core::mem::take(&mut self.pct_waiting[w]);
        for e in waiting.drain(..) {
            if let Some(s) = self.states.get(&e.id).filter(|s| s.gen == e.gen) {
                if let Condition::Pct { dir, .. } = s.spec.condition {
                    self.pct[w][dir.index()].push(Reverse(e));
                }
            }
        }
        self.pct_waiting[w] = waiting;
    }

    /// Records a firing; a repeating alert goes where `requeue` puts it, a one-shot one leaves.
    /// A firing within the alert's cooldown after its last one is not made; the alert goes where
    /// `requeue` puts it all the same.
    fn fire(
        &mut self,
        e: Entry,
        price: Price,
        move_h: Option<i64>,
        ts_ms: i64,
        out: &mut Vec<Firing>,
        requeue: impl FnOnce(&mut AlertBook, Entry),
    ) {
        let Some(state) = self.states.get_mut(&e.id) else { return };
        let repeat = state.spec.repeat;
        if ts_ms >= state.quiet_until_ms {
            state.quiet_until_ms = ts_ms.saturating_add(i64::from(state.spec.cooldown_s) * 1_000);
            debug_assert!(out.len() < out.capacity(), "firing buffer must be reserved");
            out.push(Firing { id: e.id, price, move_hundredths: move_h, ts_ms, last: !repeat, detail: Detail::None });
        } else {
            debug_assert!(repeat, "a one-shot alert fires once: it has no cooldown to be in");
        }
        if repeat {
            requeue(self, e);
        } else {
            self.states.remove(&e.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candle::MINUTE_MS;

    const T0: i64 = 1_794_787_200_000;

    fn price(id: u64, cross: Cross, level: i64, repeat: bool) -> AlertSpec {
        AlertSpec { id, condition: Condition::Price { cross, level: Price(level) }, repeat, cooldown_s: 0 }
    }

    fn pct(id: u64, dir: Move, hundredths: u32, window: Timeframe, repeat: bool) -> AlertSpec {
        AlertSpec {
            id,
            condition: Condition::Pct { dir, millionths: hundredths * 10_000, window },
            repeat,
            cooldown_s: 0,
        }
    }

    /// Feeds trades through candles and alerts like the shard does; returns the ids fired per trade.
    struct Rig {
        book: AlertBook,
        candles: CandleSet,
        out: Vec<Firing>,
    }

    impl Rig {
        fn new(specs: &[AlertSpec]) -> Rig {
            let mut book = AlertBook::default();
            for s in specs {
                book.insert(*s);
            }
            Rig { book, candles: CandleSet::new(16), out: Vec::with_capacity(1024) }
        }

        fn trade(&mut self, ts: i64, p: i64) -> Vec<u64> {
            self.candles.trade(ts, Price(p), crate::fixed::Qty(1));
            self.out.clear();
            self.book.on_trade(Price(p), ts, &self.candles, &mut self.out);
            self.out.iter().map(|f| f.id).collect()
        }
    }

    #[test]
    fn crossing_and_touching_fire_once() {
        let mut r = Rig::new(&[price(1, Cross::Above, 100, false), price(2, Cross::Below, 90, false)]);
        assert!(r.trade(T0, 95).is_empty());
        assert!(r.trade(T0 + 1, 99).is_empty());
        assert_eq!(r.trade(T0 + 2, 100), [1], "touching the level fires");
        assert!(r.trade(T0 + 3, 101).is_empty(), "a one-shot alert fires once");
        assert!(r.out.is_empty());
        assert_eq!(r.trade(T0 + 4, 85), [2], "a gap through the level fires");
        assert!(r.book.is_empty());
    }

    /// A resumed price alert past its level waits for the far side: nothing at resume, a
    /// crossing after that fires; one already held is left as it is.
    #[test]
    fn a_resumed_price_alert_waits_for_the_far_side() {
        let mut r = Rig::new(&[]);
        r.book.resume(price(1, Cross::Above, 100, true));
        r.book.resume(price(2, Cross::Below, 90, true));
        assert!(r.trade(T0, 105).is_empty(), "above its level at resume: no firing");
        assert!(r.trade(T0 + 1, 100).is_empty(), "on the level is not the far side");
        assert!(r.trade(T0 + 2, 99).is_empty(), "below: armed");
        assert_eq!(r.trade(T0 + 3, 100), [1]);
        assert_eq!(r.trade(T0 + 4, 89), [2], "below's far side was the price at resume's side");
        let mut r = Rig::new(&[]);
        r.book.resume(price(3, Cross::Above, 200, false));
        r.book.resume(price(3, Cross::Above, 200, false));
        assert!(r.trade(T0 + 5, 150).is_empty());
        assert_eq!(r.trade(T0 + 6, 201), [3], "resumed below its level: fires at the crossing");
    }

    #[test]
    fn a_gap_that_jumps_over_several_levels_fires_them_all() {
        let specs: Vec<_> = (0..10).map(|i| price(i, Cross::Above, 100 + i as i64, false)).collect();
        let mut r = Rig::new(&specs);
        let mut fired = r.trade(T0, 105);
        fired.sort();
        assert_eq!(fired, [0, 1, 2, 3, 4, 5]);
        let f = r.out[0];
        assert_eq!((f.price, f.move_hundredths, f.ts_ms, f.last), (Price(105), None, T0, true));
        assert_eq!(r.trade(T0 + 1, 200).len(), 4);
    }

    #[test]
    fn repeating_alerts_rearm_after_a_tenth_of_a_percent() {
        let mut r = Rig::new(&[price(1, Cross::Above, 100_000, true), price(2, Cross::Below, 50_000, true)]);
        assert_eq!(r.trade(T0, 100_000), [1]);
        assert!(!r.out[0].last);
        assert!(r.trade(T0 + 1, 100_500).is_empty());
        assert!(r.trade(T0 + 2, 99_901).is_empty(), "not yet 0.1% under");
        assert!(r.trade(T0 + 3, 100_000).is_empty(), "still not re-armed");
        assert!(r.trade(T0 + 4, 99_900).is_empty(), "re-armed at level x 0.999");
        assert_eq!(r.trade(T0 + 5, 100_000), [1], "fires again");
        assert_eq!(r.trade(T0 + 6, 50_000), [2]);
        assert!(r.trade(T0 + 7, 50_049).is_empty());
        assert!(r.trade(T0 + 8, 50_000).is_empty(), "not re-armed: 50_049 < 50_050");
        assert!(r.trade(T0 + 9, 50_050).is_empty(), "re-armed at level x 1.001");
        assert_eq!(r.trade(T0 + 10, 49_000), [2]);
        assert_eq!(r.book.len(), 2);
    }

    #[test]
    fn adding_an_alert_held_already_changes_nothing_and_a_new_spec_replaces_it() {
        let mut r = Rig::new(&[price(1, Cross::Above, 100_000, true)]);
        assert_eq!(r.trade(T0, 100_000), [1]);
        r.book.insert(price(1, Cross::Above, 100_000, true));
        assert!(r.trade(T0 + 1, 100_500).is_empty(), "still waiting for the retreat: not re-armed by the repeat add");
        assert_eq!(r.book.len(), 1);
        r.book.insert(price(1, Cross::Above, 100_400, true));
        assert_eq!(r.trade(T0 + 2, 100_500), [1], "a changed spec is a new alert, armed at once");
    }

    /// A new cooldown for an alert held (`PATCH`, §16) neither re-arms it nor forgets what it
    /// fired for; it counts from the alert's last firing. Every type.
    #[test]
    fn a_new_cooldown_changes_nothing_else() {
        let mut r = Rig::new(&[price(1, Cross::Above, 100_000, true)]);
        assert_eq!(r.trade(T0, 100_000), [1]);
        r.book.insert(AlertSpec { cooldown_s: 3_600, ..price(1, Cross::Above, 100_000, true) });
        assert!(r.trade(T0 + 1, 100_500).is_empty(), "not re-armed by the new cooldown");
        assert!(r.trade(T0 + 2, 99_900).is_empty(), "re-armed by the retreat");
        assert!(r.trade(T0 + 3, 100_000).is_empty(), "crossed again within the new cooldown: held back");
        r.book.insert(price(1, Cross::Above, 100_000, true));
        assert!(r.trade(T0 + 4, 99_900).is_empty());
        assert_eq!(r.trade(T0 + 5, 100_000), [1], "no cooldown again: fires");
        let level = LevelCondition {
            event: crate::level_alert::LevelEvent::Break,
            direction: crate::level_alert::LevelDirection::Any,
            within_millionths: 0,
            min_strength: 1,
            timeframes: crate::level_alert::TIMEFRAMES_ALL,
        };
        let spec = AlertSpec { id: 2, condition: Condition::Level(level), repeat: true, cooldown_s: 0 };
        r.book.insert(spec);
        assert!(r.book.levels.retune(2, &level, true, 60), "held with that condition");
        assert!(!r.book.levels.retune(2, &level, false, 60), "not with another repeat flag");
        r.book.insert(AlertSpec { cooldown_s: 60, ..spec });
        assert_eq!(r.book.len(), 2, "retuned in place, not added twice");
    }

    #[test]
    fn pct_alerts_fire_once_per_bucket_and_again_after_roll_over() {
        let w = Timeframe::M5;
        let b0 = w.bucket_start(T0);
        let mut r = Rig::new(&[
            pct(1, Move::Up, 100, w, true),
            pct(2, Move::Down, 200, w, false),
            pct(3, Move::Any, 150, w, true),
        ]);
        assert!(r.trade(b0, 10_000).is_empty(), "the open");
        assert!(r.trade(b0 + 1_000, 10_099).is_empty(), "+0.99%");
        assert_eq!(r.trade(b0 + 2_000, 10_100), [1], "+1.00% fires up");
        assert_eq!(r.out[0].move_hundredths, Some(100));
        assert_eq!(r.trade(b0 + 3_000, 10_160), [3], "+1.6% fires any");
        assert!(r.trade(b0 + 4_000, 10_300).is_empty(), "once per bucket");
        assert_eq!(r.trade(b0 + 5_000, 9_800), [2], "-2% fires down, measured from the open");
        assert_eq!(r.out[0].move_hundredths, Some(-200));
        assert!(r.out[0].last);
        // Next bucket: the open is the first trade in it.
        let b1 = b0 + 5 * MINUTE_MS;
        assert!(r.trade(b1, 9_800).is_empty());
        let mut fired = r.trade(b1 + 1, 9_950);
        fired.sort();
        assert_eq!(fired, [1, 3], "repeating ones fire again in the new bucket");
        assert_eq!(r.book.len(), 2);
    }

    #[test]
    fn pct_uses_its_own_window() {
        let mut r = Rig::new(&[pct(1, Move::Up, 100, Timeframe::H1, false)]);
        let h = Timeframe::H1.bucket_start(T0);
        r.trade(h, 10_000);
        // Across a 5m roll-over the 1h open stays 10_000.
        assert!(r.trade(h + 10 * MINUTE_MS, 10_050).is_empty());
        assert_eq!(r.trade(h + 20 * MINUTE_MS, 10_100), [1]);
    }

    /// A threshold finer than a hundredth is compared exactly: 3.004% does not fire on a
    /// 3.002% move and fires on 3.004%, and 2.125% is not 2.13%.
    #[test]
    fn a_cooldown_holds_back_a_repeating_alerts_firings_within_it() {
        let spec = AlertSpec { cooldown_s: 60, ..price(1, Cross::Above, 100, true) };
        let mut r = Rig::new(&[spec]);
        assert_eq!(r.trade(T0, 100), vec![1]);
        assert_eq!(r.trade(T0 + 1_000, 99), vec![], "re-armed");
        assert_eq!(r.trade(T0 + 2_000, 100), vec![], "crossed again within the minute: held back");
        assert_eq!(r.trade(T0 + 3_000, 99), vec![]);
        assert_eq!(r.trade(T0 + 60_000, 100), vec![1], "the minute is over");
    }

    /// The gate skips a window's trades only while no armed threshold is reached: a threshold
    /// is still met exactly at its price on both sides, a new alert or a new open (history
    /// loaded) makes the next trade evaluate again.
    #[test]
    fn the_pct_gate_never_hides_a_reached_threshold() {
        let h = Timeframe::H1.bucket_start(T0);
        let mut r =
            Rig::new(&[pct(1, Move::Up, 200, Timeframe::H1, false), pct(2, Move::Down, 300, Timeframe::H1, false)]);
        r.trade(h, 1_000_000);
        let g = r.book.pct_gate[Timeframe::H1.index()];
        assert_eq!((g.bucket, g.low, g.high), (h, 970_000, 1_020_000), "the nearest thresholds as prices");
        assert!(r.trade(h + 1, 1_019_999).is_empty());
        assert_eq!(r.trade(h + 2, 1_020_000), [1], "exactly +2%");
        assert!(r.trade(h + 3, 970_001).is_empty());
        assert_eq!(r.trade(h + 4, 970_000), [2], "exactly -3%");
        // A new alert nearer than the gate knew: evaluated at once.
        r.book.insert(pct(3, Move::Any, 50, Timeframe::H1, false));
        assert_eq!(r.trade(h + 5, 1_005_000), [3]);
        // History replaces the open: the gate is dropped.
        r.book.insert(pct(4, Move::Up, 100, Timeframe::H1, false));
        assert!(r.trade(h + 6, 1_005_000).is_empty(), "+0.5% from the open, under 1%");
        assert!(r.book.pct_gate[Timeframe::H1.index()].high > 1_005_000);
        // The backfilled bar opened at 990 000: the next trade is +1.01 % from it.
        let mut history = CandleSet::new(16);
        history.trade(h, Price(990_000), crate::fixed::Qty(1));
        r.candles = history;
        r.book.candles_changed();
        assert_eq!(r.trade(h + 7, 1_000_000), [4], "+1.01% from the new open");
    }

    #[test]
    fn pct_thresholds_are_compared_exactly() {
        let spec = |id, millionths| AlertSpec {
            id,
            condition: Condition::Pct { dir: Move::Up, millionths, window: Timeframe::H1 },
            repeat: false,
            cooldown_s: 0,
        };
        let mut r = Rig::new(&[spec(1, 3_004_000), spec(2, 2_125_000)]);
        let h = Timeframe::H1.bucket_start(T0);
        r.trade(h, 100_000_000);
        assert_eq!(r.trade(h + 1, 102_124_999), Vec::<u64>::new(), "2.124999% is under 2.125%");
        assert_eq!(r.trade(h + 2, 102_125_000), [2], "2.125% exactly");
        assert_eq!(r.trade(h + 3, 103_002_000), Vec::<u64>::new(), "3.002% is under 3.004%");
        assert_eq!(r.trade(h + 4, 103_004_000), [1], "3.004% exactly");
    }

    #[test]
    fn deleted_alerts_never_fire_and_heaps_compact() {
        let specs: Vec<_> = (0..1_000).map(|i| price(i, Cross::Above, 1_000 + i as i64, false)).collect();
        let mut r = Rig::new(&specs);
        for i in 0..900 {
            assert!(r.book.remove(i));
        }
        assert!(!r.book.remove(5));
        assert!(r.book.entries() < 400, "compacted: {}", r.book.entries());
        let fired = r.trade(T0, 10_000);
        assert_eq!(fired.len(), 100);
        assert!(fired.iter().all(|&id| id >= 900));
    }

    #[test]
    fn many_alerts_on_one_pair_fire_in_level_order() {
        let n = 100_000u64;
        let specs: Vec<_> = (0..n).map(|i| price(i, Cross::Below, 1_000_000 - i as i64 * 7, i % 2 == 0)).collect();
        let mut r = Rig::new(&specs);
        assert!(r.trade(T0, 1_000_001).is_empty());
        // A small dip fires only the few alerts above it.
        let fired = r.trade(T0 + 1, 999_990);
        assert_eq!(fired, [0, 1]);
        let fired = r.trade(T0 + 2, 1_000_000 - 7 * 1_000);
        assert_eq!(fired.len(), 999);
        assert_eq!(r.book.len() as u64, n - 500);
    }

    #[test]
    fn reinserting_an_id_replaces_it() {
        let mut r = Rig::new(&[price(1, Cross::Above, 100, false)]);
        r.book.insert(price(1, Cross::Above, 200, false));
        assert!(r.trade(T0, 150).is_empty());
        assert_eq!(r.trade(T0 + 1, 200), [1]);
    }

    #[test]
    fn rearm_thresholds_round_the_right_way() {
        assert_eq!(rearm_below_level(100_000), 99_900);
        assert_eq!(rearm_below_level(100_001), 99_900);
        assert_eq!(rearm_above_level(50_000), 50_050);
        // 50_001 x 1.001 = 50_051.001: the first integer price at or above it is 50_052.
        assert_eq!(rearm_above_level(50_001), 50_052);
    }
}
