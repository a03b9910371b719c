//! A perpetual's rolling windows of liquidations and open interest (`decisions.md` §17,
//! "Windows"), sans-I/O: time is an argument, everything is allocated at construction, and a
//! liquidation, an OI sample or a read allocates nothing.
//!
//! A window W is 60 slots of W/60 (1m → 1 s, 5m → 5 s, …, 1w → 168 min), aligned to UTC multiples
//! of the slot length; its value at `now` uses the slot holding `now` and the 59 before it, so it
//! covers between 59/60 and the whole of W. Liquidations add into their slot (by the venue's
//! time, clamped into the window); an OI slot holds the last value known in it, carried forward
//! into the slots after it that saw none, so `oiChange` = (OI now − OI at the end of the first
//! slot) / that × 100, in base units. A window not watched in full (it began before the watch
//! did: after a start, or a new listing) has no value (`None`), never a value over less.
//!
//! Choices where §17 is silent, and why:
//! - "Clamped into the window": a liquidation stamped before the window's first slot counts in
//!   the first slot, one stamped after `now` (a venue clock ahead of ours) in the current slot;
//!   a late message still counts once, where the window can hold it.
//! - An OI sample stamped before the latest one is ignored (OKX and Bybit pushes may cross): the
//!   value now is the venue's newest.
//! - A window is watched in full when the watch began at or before its first slot's start.
//!
//! Bound: 60 slots per window, whatever the traffic; a slot is reused for a later time once the
//! window has moved past it.

/// Slots of a window.
pub const SLOTS: usize = 60;

/// The side of the position a liquidation closed (§17 "Sides").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PositionSide {
    /// A long position (a forced sell).
    Long,
    /// A short position (a forced buy).
    Short,
}

impl PositionSide {
    /// The position side of a liquidation as `venue` sends it (`venues.md` §8.3, pitfall 2):
    /// Binance's `S` is the forced order's side (`SELL`: a long liquidated), Bybit's `S` the
    /// position's (`Buy`: a long), OKX's `side` the order's (`sell`: a long); Bitget publishes
    /// none. `None` for any other value.
    pub fn of(venue: crate::Venue, raw: &[u8]) -> Option<PositionSide> {
        use crate::Venue;
        use PositionSide::{Long, Short};
        match (venue, raw) {
            (Venue::Binance, b"SELL") | (Venue::Bybit, b"Buy") | (Venue::Okx, b"sell") => Some(Long),
            (Venue::Binance, b"BUY") | (Venue::Bybit, b"Sell") | (Venue::Okx, b"buy") => Some(Short),
            _ => None,
        }
    }
}

/// Liquidations summed over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LiqSums {
    /// USD value of the long positions liquidated.
    pub long_usd: f64,
    /// USD value of the short positions liquidated.
    pub short_usd: f64,
    /// Long liquidations counted.
    pub long_count: u32,
    /// Short liquidations counted.
    pub short_count: u32,
}

impl LiqSums {
    fn add(&mut self, side: PositionSide, usd: f64) {
        match side {
            PositionSide::Long => {
                self.long_usd += usd;
                self.long_count += 1;
            }
            PositionSide::Short => {
                self.short_usd += usd;
                self.short_count += 1;
            }
        }
    }

    fn merge(&mut self, other: &LiqSums) {
        self.long_usd += other.long_usd;
        self.short_usd += other.short_usd;
        self.long_count += other.long_count;
        self.short_count += other.short_count;
    }
}

/// One slot of the history (`GET /v1/perp/{symbol}/history`): `None` before the watch began.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlotView {
    /// The slot's start, Unix milliseconds.
    pub start_ms: i64,
    /// The OI (base units) at its end, carried forward; `None` when not known by then.
    pub oi_base: Option<f64>,
    /// Its liquidations; `None` before the watch began.
    pub liquidations: Option<LiqSums>,
}

/// One slot; which time it holds is the ring's (`PerpWindow::newest_start`), not its own, so a
/// slot is 32 bytes.
#[derive(Clone, Copy, Debug)]
struct Slot {
    liq: LiqSums,
    /// The last OI known at its end (its own last sample, or carried into it); NaN while none
    /// is (a sample is finite: `PerpBook::on_oi` refuses others), so it needs no flag.
    oi_base: f64,
}

impl Slot {
    /// The OI at its end, if known.
    fn oi(&self) -> Option<f64> {
        (!self.oi_base.is_nan()).then_some(self.oi_base)
    }
}

const EMPTY: Slot =
    Slot { liq: LiqSums { long_usd: 0.0, short_usd: 0.0, long_count: 0, short_count: 0 }, oi_base: f64::NAN };

/// One window of one perpetual.
#[derive(Clone, Debug)]
pub struct PerpWindow {
    slot_ms: i64,
    /// The ring: slot start `t` at `index(t)`, holding the 60 starts up to `newest_start`; the
    /// others are empty (cleared as the ring moves on).
    slots: [Slot; SLOTS],
    /// The start of the newest slot the ring holds (`i64::MIN`: none yet).
    newest_start: i64,
    /// When the watch began.
    watched_from_ms: i64,
    /// The newest OI sample: its time and value (base units).
    oi_latest: Option<(i64, f64)>,
}

impl PerpWindow {
    /// A window of `window_ms` (a multiple of 60 ms), watched from `watched_from_ms`.
    pub fn new(window_ms: i64, watched_from_ms: i64) -> PerpWindow {
        assert!(window_ms > 0 && window_ms % SLOTS as i64 == 0, "a window is 60 whole slots");
        PerpWindow {
            slot_ms: window_ms / SLOTS as i64,
            slots: [EMPTY; SLOTS],
            newest_start: i64::MIN,
            watched_from_ms,
            oi_latest: None,
        }
    }

    /// The slot length, ms.
    pub fn slot_ms(&self) -> i64 {
        self.slot_ms
    }

    fn start_of(&self, t: i64) -> i64 {
        t.div_euclid(self.slot_ms) * self.slot_ms
    }

    /// The window's first slot's start at `now_ms`.
    fn first_start(&self, now_ms: i64) -> i64 {
        self.start_of(now_ms) - (SLOTS as i64 - 1) * self.slot_ms
    }

    fn index(&self, start: i64) -> usize {
        (start.div_euclid(self.slot_ms)).rem_euclid(SLOTS as i64) as usize
    }

    /// Whether the ring holds the slot starting at `start`: one of the 60 up to the newest.
    fn holds(&self, start: i64) -> bool {
        self.newest_start != i64::MIN
            && start <= self.newest_start
            && start > self.newest_start - SLOTS as i64 * self.slot_ms
    }

    /// The slot for `start`, as held (`None`: the ring holds another time there).
    fn slot(&self, start: i64) -> Option<&Slot> {
        self.holds(start).then(|| &self.slots[self.index(start)])
    }

    /// The slot for `start`; a later one than the newest moves the ring on to it first, emptying
    /// the slots it passes. `None` for one older than the ring holds (a window's worth before the
    /// newest: nothing to add it to).
    fn slot_mut(&mut self, start: i64) -> Option<&mut Slot> {
        if self.newest_start == i64::MIN || start > self.newest_start {
            self.move_to(start);
        }
        if !self.holds(start) {
            return None;
        }
        let i = self.index(start);
        Some(&mut self.slots[i])
    }

    /// Makes `start` the newest slot, emptying the ones after the previous newest (all of them
    /// when that is a window's worth or more before, or there was none).
    fn move_to(&mut self, start: i64) {
        let passed = if self.newest_start == i64::MIN {
            SLOTS as i64
        } else {
            ((start - self.newest_start) / self.slot_ms).min(SLOTS as i64)
        };
        for k in 0..passed {
            let i = self.index(start - k * self.slot_ms);
            self.slots[i] = EMPTY;
        }
        self.newest_start = start;
    }

    /// Counts a liquidation of `side` worth `usd`, stamped `ts_ms` by the venue, at `now_ms`.
    pub fn add_liquidation(&mut self, now_ms: i64, ts_ms: i64, side: PositionSide, usd: f64) {
        let at = ts_ms.clamp(self.first_start(now_ms), now_ms);
        let start = self.start_of(at);
        if let Some(slot) = self.slot_mut(start) {
            slot.liq.add(side, usd);
        }
    }

    /// Takes an OI sample of `base` units stamped `ts_ms` (an older one than the newest taken is
    /// left out). The slots between the newest sample's and this one's get the older value
    /// carried into them (at most a window's worth).
    pub fn note_oi(&mut self, ts_ms: i64, base: f64) {
        if self.oi_latest.is_some_and(|(t, _)| ts_ms < t) {
            return;
        }
        let start = self.start_of(ts_ms);
        if let Some((t, previous)) = self.oi_latest {
            let from = self.start_of(t).max(start - (SLOTS as i64 - 1) * self.slot_ms);
            let mut s = from;
            while s < start {
                if let Some(slot) = self.slot_mut(s).filter(|slot| slot.oi_base.is_nan()) {
                    slot.oi_base = previous;
                }
                s += self.slot_ms;
            }
        }
        debug_assert!(base.is_finite(), "OI samples are finite");
        if let Some(slot) = self.slot_mut(start) {
            slot.oi_base = base;
        }
        self.oi_latest = Some((ts_ms, base));
    }

    /// True when the window at `now_ms` began no earlier than the watch.
    fn watched_in_full(&self, now_ms: i64) -> bool {
        self.watched_from_ms <= self.first_start(now_ms)
    }

    /// The window's liquidations at `now_ms`; `None` when it is not watched in full.
    pub fn liquidations(&self, now_ms: i64) -> Option<LiqSums> {
        if !self.watched_in_full(now_ms) {
            return None;
        }
        let first = self.first_start(now_ms);
        let mut sum = LiqSums::default();
        for k in 0..SLOTS as i64 {
            if let Some(s) = self.slot(first + k * self.slot_ms) {
                sum.merge(&s.liq);
            }
        }
        Some(sum)
    }

    /// The OI (base units) known at `t_ms`: the last sample at or before it that the window
    /// still holds, or the newest sample when that is no later.
    fn oi_at(&self, t_ms: i64) -> Option<f64> {
        if let Some((_, base)) = self.oi_latest.filter(|(ts, _)| *ts <= t_ms) {
            return Some(base);
        }
        let mut s = self.start_of(t_ms);
        let oldest = s - (SLOTS as i64 - 1) * self.slot_ms;
        while s >= oldest {
            if let Some(v) = self.slot(s).and_then(Slot::oi) {
                return Some(v);
            }
            s -= self.slot_ms;
        }
        None
    }

    /// `oiChange` at `now_ms`: the percent change in base units from the end of the window's
    /// first slot to now; `None` when the window is not watched in full, an end is not known, or
    /// the OI it starts from is zero.
    pub fn oi_change_pct(&self, now_ms: i64) -> Option<f64> {
        if !self.watched_in_full(now_ms) {
            return None;
        }
        let first_end = self.first_start(now_ms) + self.slot_ms - 1;
        let from = self.oi_at(first_end).filter(|v| *v > 0.0)?;
        let now = self.oi_latest.filter(|(ts, _)| *ts <= now_ms).map(|(_, v)| v)?;
        Some((now - from) / from * 100.0)
    }

    /// The window's 60 slots at `now_ms`, oldest first.
    pub fn slots(&self, now_ms: i64) -> impl Iterator<Item = SlotView> + '_ {
        let first = self.first_start(now_ms);
        (0..SLOTS as i64).map(move |k| {
            let start = first + k * self.slot_ms;
            let watched = start >= self.start_of(self.watched_from_ms);
            let liq = self.slot(start).map(|s| s.liq).unwrap_or_default();
            SlotView {
                start_ms: start,
                oi_base: if watched { self.oi_at(start + self.slot_ms - 1) } else { None },
                liquidations: watched.then_some(liq),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    #[test]
    fn each_venues_side_convention_names_the_position_liquidated() {
        use crate::Venue;
        assert_eq!(PositionSide::of(Venue::Binance, b"SELL"), Some(PositionSide::Long), "a forced sell");
        assert_eq!(PositionSide::of(Venue::Binance, b"BUY"), Some(PositionSide::Short));
        assert_eq!(PositionSide::of(Venue::Bybit, b"Buy"), Some(PositionSide::Long), "the position's side");
        assert_eq!(PositionSide::of(Venue::Bybit, b"Sell"), Some(PositionSide::Short));
        assert_eq!(PositionSide::of(Venue::Okx, b"sell"), Some(PositionSide::Long));
        assert_eq!(PositionSide::of(Venue::Okx, b"buy"), Some(PositionSide::Short));
        for (venue, raw) in
            [(Venue::Binance, &b"sell"[..]), (Venue::Bybit, b"BUY"), (Venue::Bitget, b"sell"), (Venue::Okx, b"")]
        {
            assert_eq!(PositionSide::of(venue, raw), None, "{venue:?} {raw:?}");
        }
    }

    #[test]
    fn liquidations_sum_over_sixty_slots_and_only_once_watched_in_full() {
        // 5m: slots of 5 s. Watched from 1 000 s; the first full window at t has its first slot
        // at or after 1 000 s, i.e. t's slot starts at 1 000 + 59 × 5 s.
        let mut w = PerpWindow::new(5 * MIN, 1_000_000);
        assert_eq!(w.slot_ms(), 5_000);
        let full = 1_000_000 + 59 * 5_000;
        w.add_liquidation(full - 1, 1_000_000, PositionSide::Long, 100.0);
        assert_eq!(w.liquidations(full - 1), None, "not watched in full yet");
        w.add_liquidation(full, full, PositionSide::Short, 40.0);
        let sums = w.liquidations(full).expect("watched in full");
        assert_eq!((sums.long_usd, sums.long_count, sums.short_usd, sums.short_count), (100.0, 1, 40.0, 1));
        // One slot later the first one (holding the 100) is out of the window.
        let later = full + 5_000;
        assert_eq!(w.liquidations(later).map(|s| (s.long_usd, s.short_usd)), Some((0.0, 40.0)));
    }

    #[test]
    fn the_ring_moving_on_empties_the_slots_it_passes_and_keeps_the_ones_it_holds() {
        // 1m: slots of a second, watched from 0.
        let mut w = PerpWindow::new(MIN, 0);
        for k in 0..60 {
            w.add_liquidation(k * 1_000, k * 1_000, PositionSide::Long, 1.0);
        }
        assert_eq!(w.liquidations(59_500).map(|l| l.long_count), Some(60));
        // 30 s on: the 30 oldest left the window; a late one for a slot still held counts.
        w.add_liquidation(89_000, 89_000, PositionSide::Short, 2.0);
        w.add_liquidation(89_500, 45_000, PositionSide::Long, 1.0);
        let l = w.liquidations(89_500).expect("watched");
        assert_eq!((l.long_count, l.short_count), (31, 1), "slots 30–59 s, the late one, the new one");
        // More than a window on: nothing of before is held, whatever sat in the ring.
        w.add_liquidation(300_000, 300_000, PositionSide::Short, 4.0);
        let l = w.liquidations(300_000).expect("watched");
        assert_eq!((l.long_count, l.short_count, l.short_usd), (0, 1, 4.0));
        // An OI sample stamped a window ahead moves the ring there; a liquidation now, older than
        // all it holds, is left out rather than put over a newer slot.
        w.note_oi(400_000, 10.0);
        w.add_liquidation(320_000, 320_000, PositionSide::Long, 8.0);
        assert_eq!(w.slots(400_000).filter_map(|s| s.liquidations).map(|l| l.long_count).sum::<u32>(), 0);
    }

    #[test]
    fn a_liquidation_is_clamped_into_the_window() {
        let mut w = PerpWindow::new(MIN, 0);
        let now = 10 * MIN + 500;
        // Stamped before the window: its first slot; after now: the current slot.
        w.add_liquidation(now, now - 5 * MIN, PositionSide::Long, 7.0);
        w.add_liquidation(now, now + 30_000, PositionSide::Short, 3.0);
        let slots: Vec<SlotView> = w.slots(now).collect();
        assert_eq!(slots.len(), SLOTS);
        assert_eq!(slots[0].liquidations.map(|l| l.long_usd), Some(7.0));
        assert_eq!(slots[SLOTS - 1].liquidations.map(|l| l.short_usd), Some(3.0));
        assert_eq!(slots[SLOTS - 1].start_ms, 10 * MIN, "aligned to the second");
        assert_eq!(w.liquidations(now).map(|l| l.long_count + l.short_count), Some(2));
    }

    #[test]
    fn oi_change_is_from_the_end_of_the_first_slot_with_values_carried_forward() {
        // 1h: slots of a minute, watched from 0.
        let mut w = PerpWindow::new(60 * MIN, 0);
        w.note_oi(30_000, 1_000.0);
        w.note_oi(90 * MIN, 1_100.0);
        // At 90 min + 1 s the window's first slot is minute 31: nothing sampled in it, carried: 1 000.
        assert_eq!(w.oi_change_pct(90 * MIN + 1_000).map(|p| (p * 1e6).round() / 1e6), Some(10.0));
        // A sample in the first slot wins over the carried value; the last in it counts.
        let mut w = PerpWindow::new(60 * MIN, 0);
        w.note_oi(31 * MIN + 1_000, 900.0);
        w.note_oi(31 * MIN + 2_000, 800.0);
        w.note_oi(90 * MIN, 1_000.0);
        assert_eq!(w.oi_change_pct(90 * MIN + 1_000), Some(25.0));
        // An older sample than the newest is left out.
        w.note_oi(89 * MIN, 5.0);
        assert_eq!(w.oi_change_pct(90 * MIN + 1_000), Some(25.0));
    }

    #[test]
    fn oi_change_needs_a_full_watch_and_a_start_value() {
        let mut w = PerpWindow::new(60 * MIN, 10 * MIN);
        w.note_oi(10 * MIN, 100.0);
        w.note_oi(60 * MIN, 150.0);
        assert_eq!(w.oi_change_pct(60 * MIN), None, "the window began before the watch");
        assert!(w.oi_change_pct(69 * MIN).is_some(), "its first slot starts at 10 min");
        let mut zero = PerpWindow::new(60 * MIN, 0);
        zero.note_oi(0, 0.0);
        zero.note_oi(70 * MIN, 5.0);
        assert_eq!(zero.oi_change_pct(70 * MIN), None, "no change from zero");
        let none = PerpWindow::new(60 * MIN, 0);
        assert_eq!(none.oi_change_pct(70 * MIN), None, "no sample");
    }

    #[test]
    fn the_history_shows_sixty_slots_with_nothing_before_the_watch() {
        let mut w = PerpWindow::new(5 * MIN, 200_000);
        w.note_oi(200_000, 10.0);
        w.add_liquidation(260_000, 255_000, PositionSide::Long, 5.0);
        w.note_oi(258_000, 12.0);
        let slots: Vec<SlotView> = w.slots(260_000).collect();
        assert_eq!(slots.len(), SLOTS);
        assert!(slots.windows(2).all(|p| p[1].start_ms - p[0].start_ms == 5_000), "oldest first");
        let before: Vec<&SlotView> = slots.iter().filter(|s| s.start_ms < 200_000).collect();
        assert!(before.iter().all(|s| s.oi_base.is_none() && s.liquidations.is_none()), "not watched");
        let at = |t: i64| slots.iter().find(|s| s.start_ms == t).copied().expect("a slot");
        assert_eq!(at(200_000).oi_base, Some(10.0));
        assert_eq!(at(250_000).oi_base, Some(10.0), "carried");
        assert_eq!(at(255_000).oi_base, Some(12.0));
        assert_eq!(at(255_000).liquidations.map(|l| l.long_usd), Some(5.0));
        assert_eq!(at(260_000).oi_base, Some(12.0));
    }
}
