//! Levels: market-structure support and resistance zones from candle series, exactly as
//! `decisions.md` §7 reads the interface spec's level rules. Pure functions over candle slices.
//!
//! Choices where §7 is silent (each is tested):
//! - A pivot needs its two neighbours on each side inside the scanned window of the last
//!   [`PIVOT_BARS`] completed bars.
//! - A level exactly at the current price belongs to the side its origin says: a high-side
//!   level there is a resistance, a low-side one a support (neither has been traded through).
//! - Minor chains are built nearest-to-price first: the nearest unassigned minor starts a chain
//!   and takes every unassigned minor within 0.4% of it.
//! - "Within 0.4%" is measured relative to the zone's (or chain head's) price.
//! - Day and week extremes need the whole previous period traded: a pair listed during it has
//!   none yet (the bar before the previous period must exist).
//! - At most [`LEVELS_MAX`] zones are kept per book; past it the farthest are dropped.

use crate::candle::{Candle, Timeframe};
use crate::fixed::Price;

/// Bars each side a pivot must beat.
pub const PIVOT_WIDTH: usize = 2;
/// Completed bars scanned per timeframe.
pub const PIVOT_BARS: usize = 500;
/// Zone merge distance, in basis points (0.4%).
pub const MERGE_BP: i128 = 40;
/// Window for minor zones, in basis points (8%).
pub const MINOR_WINDOW_BP: i128 = 800;
/// Budget of minor zones near the price.
pub const MINOR_BUDGET: usize = 8;
/// Zones each side of the price always keeps.
pub const NEAREST_PER_SIDE: usize = 2;
/// Zones kept per book at most; the farthest are dropped past it.
pub const LEVELS_MAX: usize = 64;
/// Raw levels considered per book at most (pivots and extremes); the oldest are ignored past it.
pub const RAW_MAX: usize = 2_048;

/// Where a level comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Origin {
    /// A 15m swing pivot (minor).
    M15,
    /// A 1h swing pivot (minor).
    H1,
    /// A 4h swing pivot (major).
    H4,
    /// A 1d swing pivot (major).
    D1,
    /// A 1w swing pivot (major).
    W1,
    /// Previous completed UTC day's high (major).
    Dmax,
    /// Previous completed UTC day's low (major).
    Dmin,
    /// Previous completed week's high (major).
    Wmax,
    /// Previous completed week's low (major).
    Wmin,
}

impl Origin {
    /// Every origin, in the order of their bits ([`Origin::bit`]).
    pub const ALL: [Origin; 9] = [
        Origin::M15,
        Origin::H1,
        Origin::H4,
        Origin::D1,
        Origin::W1,
        Origin::Dmax,
        Origin::Dmin,
        Origin::Wmax,
        Origin::Wmin,
    ];
    /// The API's spellings, for refusals.
    pub const ALLOWED: &'static str = "15m, 1h, 4h, 1d, 1w, dmax, dmin, wmax, wmin";

    /// This origin's bit in a set of timeframes (a level alert's `timeframes`).
    pub fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// The origin the API spells `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Origin> {
        Origin::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// The `timeframe` field of the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::M15 => "15m",
            Origin::H1 => "1h",
            Origin::H4 => "4h",
            Origin::D1 => "1d",
            Origin::W1 => "1w",
            Origin::Dmax => "dmax",
            Origin::Dmin => "dmin",
            Origin::Wmax => "wmax",
            Origin::Wmin => "wmin",
        }
    }

    /// Significance: 1w = wmax = wmin > 1d = dmax = dmin > 4h > 1h > 15m.
    pub fn rank(self) -> u8 {
        match self {
            Origin::W1 | Origin::Wmax | Origin::Wmin => 5,
            Origin::D1 | Origin::Dmax | Origin::Dmin => 4,
            Origin::H4 => 3,
            Origin::H1 => 2,
            Origin::M15 => 1,
        }
    }

    /// Majors keep their own price; minors collapse into chains.
    pub fn is_major(self) -> bool {
        self.rank() >= 3
    }

    fn pivot(tf: Timeframe) -> Option<Origin> {
        match tf {
            Timeframe::M15 => Some(Origin::M15),
            Timeframe::H1 => Some(Origin::H1),
            Timeframe::H4 => Some(Origin::H4),
            Timeframe::D1 => Some(Origin::D1),
            Timeframe::W1 => Some(Origin::W1),
            Timeframe::M5 => None,
        }
    }
}

/// Formation side: swing high (or day/week high) or swing low.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Formation {
    /// Formed by a high; consumed when a later high exceeds it.
    High,
    /// Formed by a low; consumed when a later low goes under it.
    Low,
}

impl Formation {
    /// The `side` field of the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Formation::High => "high",
            Formation::Low => "low",
        }
    }
}

/// One level or zone.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Level {
    /// Zone price.
    pub price: Price,
    /// Formation side of the representative.
    pub side: Formation,
    /// Origin of the representative.
    pub origin: Origin,
    /// Open time of the representative's bar, Unix milliseconds.
    pub time_ms: i64,
    /// Raw levels merged into the zone.
    pub strength: u32,
}

impl Level {
    /// True when a trade at `price` trades through this level.
    pub fn consumed_by(&self, price: Price) -> bool {
        match self.side {
            Formation::High => price > self.price,
            Formation::Low => price < self.price,
        }
    }

    /// True when neither the highest nor the lowest trade since the level was computed went
    /// through it (`trade_high = i64::MIN` / `trade_low = i64::MAX` mean no trade).
    pub fn survives(&self, trade_high: i64, trade_low: i64) -> bool {
        match self.side {
            Formation::High => trade_high <= self.price.0,
            Formation::Low => trade_low >= self.price.0,
        }
    }

    /// `resistance` above the price, `support` below; at the price, by formation side.
    pub fn is_resistance(&self, current: Price) -> bool {
        self.price > current || (self.price == current && self.side == Formation::High)
    }
}

/// `|a - b| <= bp/10_000 * base`.
fn within(a: Price, b: Price, bp: i128, base: Price) -> bool {
    (i128::from(a.0) - i128::from(b.0)).abs() * 10_000 <= bp * i128::from(base.0)
}

fn distance(a: Price, b: Price) -> u64 {
    a.0.abs_diff(b.0)
}

/// The zones of one book, kept in a fixed-capacity array.
#[derive(Clone, Debug)]
pub struct LevelSet {
    levels: Vec<Level>,
    /// Lowest high-side price held (`i64::MAX` if none): a trade above it consumes something.
    high_floor: i64,
    /// Highest low-side price held (`i64::MIN` if none): a trade below it consumes something.
    low_ceiling: i64,
    /// When the set was computed.
    pub computed_ms: i64,
}

impl Default for LevelSet {
    fn default() -> LevelSet {
        LevelSet::new()
    }
}

impl LevelSet {
    /// An empty set with room for [`LEVELS_MAX`] zones.
    pub fn new() -> LevelSet {
        LevelSet { levels: Vec::with_capacity(LEVELS_MAX), high_floor: i64::MAX, low_ceiling: i64::MIN, computed_ms: 0 }
    }

    /// The zones, nearest to the price at computation first.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    fn refresh_bounds(&mut self) {
        self.high_floor = i64::MAX;
        self.low_ceiling = i64::MIN;
        for l in &self.levels {
            match l.side {
                Formation::High => self.high_floor = self.high_floor.min(l.price.0),
                Formation::Low => self.low_ceiling = self.low_ceiling.max(l.price.0),
            }
        }
    }

    /// The live consumption check on a trade: removes every zone the trade traded through and
    /// returns how many. O(1) when nothing is consumed; never allocates.
    pub fn on_trade(&mut self, price: Price) -> usize {
        if price.0 <= self.high_floor && price.0 >= self.low_ceiling {
            return 0;
        }
        let before = self.levels.len();
        self.levels.retain(|l| !l.consumed_by(price));
        self.refresh_bounds();
        before - self.levels.len()
    }

    /// Replaces the contents with a copy of `other` (no allocation: both have the same capacity).
    pub fn copy_from(&mut self, other: &LevelSet) {
        self.levels.clear();
        self.levels.extend_from_slice(&other.levels);
        self.high_floor = other.high_floor;
        self.low_ceiling = other.low_ceiling;
        self.computed_ms = other.computed_ms;
    }
}

#[derive(Clone, Copy, Debug)]
struct Zone {
    rep: Level,
    strength: u32,
    major: bool,
    above: bool,
    keep: bool,
}

/// Working memory for [`compute`], allocated once per shard.
#[derive(Debug)]
pub struct LevelScratch {
    raw: Vec<Level>,
    suffix: Vec<(i64, i64)>,
    zones: Vec<Zone>,
    minors: Vec<Level>,
    order: Vec<usize>,
}

impl Default for LevelScratch {
    fn default() -> LevelScratch {
        LevelScratch {
            raw: Vec::with_capacity(RAW_MAX),
            suffix: Vec::with_capacity(PIVOT_BARS + 64),
            zones: Vec::with_capacity(RAW_MAX),
            minors: Vec::with_capacity(RAW_MAX),
            order: Vec::with_capacity(RAW_MAX),
        }
    }
}

/// One timeframe's bars, oldest first; the newest may be the live (still open) bar.
#[derive(Clone, Copy, Debug)]
pub struct Series<'a> {
    /// Timeframe of the bars.
    pub tf: Timeframe,
    /// Contiguous bars, oldest first.
    pub bars: &'a [Candle],
}

impl Series<'_> {
    /// Number of completed bars at `now_ms` (all but a still-open newest bar).
    fn completed(&self, now_ms: i64) -> usize {
        match self.bars.last() {
            Some(last) if last.open_ms + self.tf.duration_ms() > now_ms => self.bars.len() - 1,
            _ => self.bars.len(),
        }
    }
}

fn push_raw(raw: &mut Vec<Level>, l: Level) {
    if raw.len() < RAW_MAX {
        raw.push(l);
    }
}

/// Collects the unbroken swing pivots of one series into `raw`.
fn pivots(s: &Series<'_>, now_ms: i64, suffix: &mut Vec<(i64, i64)>, raw: &mut Vec<Level>) {
    let Some(origin) = Origin::pivot(s.tf) else { return };
    let bars = s.bars;
    let completed = s.completed(now_ms);
    let start = completed.saturating_sub(PIVOT_BARS);
    // suffix[i] = (max high, min low) over bars[i..], the live bar included.
    suffix.clear();
    suffix.resize(bars.len() + 1, (i64::MIN, i64::MAX));
    for i in (0..bars.len()).rev() {
        let (h, l) = suffix[i + 1];
        suffix[i] = (h.max(bars[i].high.0), l.min(bars[i].low.0));
    }
    if completed < start + 2 * PIVOT_WIDTH + 1 {
        return;
    }
    for i in start + PIVOT_WIDTH..completed - PIVOT_WIDTH {
        let b = &bars[i];
        let neighbours = (i - PIVOT_WIDTH..=i + PIVOT_WIDTH).filter(|&j| j != i);
        if neighbours.clone().all(|j| b.high > bars[j].high) && suffix[i + 1].0 <= b.high.0 {
            push_raw(raw, Level { price: b.high, side: Formation::High, origin, time_ms: b.open_ms, strength: 1 });
        }
        if neighbours.clone().all(|j| b.low < bars[j].low) && suffix[i + 1].1 >= b.low.0 {
            push_raw(raw, Level { price: b.low, side: Formation::Low, origin, time_ms: b.open_ms, strength: 1 });
        }
    }
}

/// Adds the previous completed period's high and low of a 1d or 1w series, unless a later bar
/// has traded through them.
fn extremes(s: &Series<'_>, now_ms: i64, raw: &mut Vec<Level>) {
    let (hi, lo) = match s.tf {
        Timeframe::D1 => (Origin::Dmax, Origin::Dmin),
        Timeframe::W1 => (Origin::Wmax, Origin::Wmin),
        _ => return,
    };
    let previous = s.tf.bucket_start(now_ms) - s.tf.duration_ms();
    // The previous period must have been traded in full: a listing younger than it (no bar
    // before it) has no extremes yet.
    let Some(i) = s.bars.iter().rposition(|b| b.open_ms == previous).filter(|&i| i > 0) else { return };
    let b = &s.bars[i];
    let later = &s.bars[i + 1..];
    if later.iter().all(|c| c.high <= b.high) {
        push_raw(raw, Level { price: b.high, side: Formation::High, origin: hi, time_ms: b.open_ms, strength: 1 });
    }
    if later.iter().all(|c| c.low >= b.low) {
        push_raw(raw, Level { price: b.low, side: Formation::Low, origin: lo, time_ms: b.open_ms, strength: 1 });
    }
}

/// Computes the level set of one book from its candle series at `now_ms`, with the current
/// price `price`, into `out`.
// Long: the level computation's steps in the order `docs/design/levels-and-walls.md` gives them,
// over one scratch; each step is a few lines that share the candidates being built.
pub fn compute(series: &[Series<'_>], now_ms: i64, price: Price, scratch: &mut LevelScratch, out: &mut LevelSet) {
    let LevelScratch { raw, suffix, zones, minors, order } = scratch;
    raw.clear();
    for s in series {
        pivots(s, now_ms, suffix, raw);
        extremes(s, now_ms, raw);
    }
    zones.clear();
    for above in [true, false] {
        let side_of = |l: &Level| l.is_resistance(price) == above;
        // Majors: highest rank first, ties most recent first.
        order.clear();
        order.extend((0..raw.len()).filter(|&i| side_of(&raw[i]) && raw[i].origin.is_major()));
        order.sort_unstable_by(|&a, &b| {
            (raw[b].origin.rank(), raw[b].time_ms).cmp(&(raw[a].origin.rank(), raw[a].time_ms))
        });
        let first_zone = zones.len();
        for &i in order.iter() {
            let m = raw[i];
            let nearest = zones[first_zone..]
                .iter_mut()
                .filter(|z| within(m.price, z.rep.price, MERGE_BP, z.rep.price))
                .min_by_key(|z| distance(m.price, z.rep.price));
            match nearest {
                Some(z) => z.strength += 1,
                None => zones.push(Zone { rep: m, strength: 1, major: true, above, keep: false }),
            }
        }
        let majors_end = zones.len();
        // Minors: onto the nearest major zone within 0.4%, else into chains.
        minors.clear();
        for m in raw.iter().filter(|l| side_of(l) && !l.origin.is_major()) {
            let nearest = zones[first_zone..majors_end]
                .iter_mut()
                .filter(|z| within(m.price, z.rep.price, MERGE_BP, z.rep.price))
                .min_by_key(|z| distance(m.price, z.rep.price));
            match nearest {
                Some(z) => z.strength += 1,
                None => minors.push(*m),
            }
        }
        minors.sort_unstable_by_key(|l| (distance(l.price, price), l.time_ms));
        let mut taken = 0usize;
        while taken < minors.len() {
            let head = minors[taken];
            // Move every member within 0.4% of the head to the front of the untaken part.
            let mut end = taken + 1;
            for j in taken + 1..minors.len() {
                if within(minors[j].price, head.price, MERGE_BP, head.price) {
                    minors.swap(end, j);
                    end += 1;
                }
            }
            let members = &minors[taken..end];
            let outer = members.iter().copied().max_by_key(|l| (distance(l.price, price), l.time_ms)).unwrap_or(head);
            zones.push(Zone { rep: outer, strength: members.len() as u32, major: false, above, keep: false });
            taken = end;
            // Keep the untaken rest ordered nearest first for the next chain head.
            minors[taken..].sort_unstable_by_key(|l| (distance(l.price, price), l.time_ms));
        }
    }
    // Selection.
    for z in zones.iter_mut() {
        z.keep = z.major;
    }
    order.clear();
    order.extend((0..zones.len()).filter(|&i| !zones[i].major));
    order.sort_unstable_by_key(|&i| distance(zones[i].rep.price, price));
    let mut budget = MINOR_BUDGET;
    for &i in order.iter() {
        if budget == 0 {
            break;
        }
        if within(zones[i].rep.price, price, MINOR_WINDOW_BP, price) {
            zones[i].keep = true;
            budget -= 1;
        }
    }
    for above in [true, false] {
        order.clear();
        order.extend((0..zones.len()).filter(|&i| zones[i].above == above));
        order.sort_unstable_by_key(|&i| distance(zones[i].rep.price, price));
        for &i in order.iter().take(NEAREST_PER_SIDE) {
            zones[i].keep = true;
        }
    }
    zones.retain(|z| z.keep);
    zones.sort_unstable_by_key(|z| distance(z.rep.price, price));
    out.levels.clear();
    for z in zones.iter().take(LEVELS_MAX) {
        out.levels.push(Level { strength: z.strength, ..z.rep });
    }
    out.computed_ms = now_ms;
    out.refresh_bounds();
}

/// Convenience over a candle set: copies each ring once into `bars` (reused) and computes.
pub fn compute_from_set(
    set: &crate::candle::CandleSet,
    now_ms: i64,
    price: Price,
    bars: &mut [Vec<Candle>; 5],
    scratch: &mut LevelScratch,
    out: &mut LevelSet,
) {
    const TFS: [Timeframe; 5] = [Timeframe::M15, Timeframe::H1, Timeframe::H4, Timeframe::D1, Timeframe::W1];
    for (k, tf) in TFS.into_iter().enumerate() {
        set.ring(tf).copy_into(&mut bars[k]);
    }
    let series = [
        Series { tf: TFS[0], bars: &bars[0] },
        Series { tf: TFS[1], bars: &bars[1] },
        Series { tf: TFS[2], bars: &bars[2] },
        Series { tf: TFS[3], bars: &bars[3] },
        Series { tf: TFS[4], bars: &bars[4] },
    ];
    compute(&series, now_ms, price, scratch, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candle::{DAY_MS, HOUR_MS};

    /// 2026-11-16 00:00 UTC, a Monday.
    const T0: i64 = 1_794_787_200_000;
    const FAR: i64 = T0 + 400 * DAY_MS;

    /// Bars of `tf` from `T0` with the given (high, low); open and close at the middle.
    fn bars(tf: Timeframe, hl: &[(i64, i64)]) -> Vec<Candle> {
        bars_from(tf, T0, hl)
    }

    fn bars_from(tf: Timeframe, start: i64, hl: &[(i64, i64)]) -> Vec<Candle> {
        hl.iter()
            .enumerate()
            .map(|(i, &(h, l))| {
                let mid = Price((h + l) / 2);
                Candle::prices(start + i as i64 * tf.duration_ms(), mid, Price(h), Price(l), mid)
            })
            .collect()
    }

    /// Highs with lows 50 under them.
    fn highs(h: &[i64]) -> Vec<(i64, i64)> {
        h.iter().map(|&h| (h, h - 50)).collect()
    }

    fn run(series: &[Series<'_>], now: i64, price: i64) -> Vec<Level> {
        let mut scratch = LevelScratch::default();
        let mut out = LevelSet::new();
        compute(series, now, Price(price), &mut scratch, &mut out);
        out.levels().to_vec()
    }

    fn prices(levels: &[Level]) -> Vec<i64> {
        levels.iter().map(|l| l.price.0).collect()
    }

    #[test]
    fn a_pivot_that_a_later_wick_breaks_is_gone() {
        let b =
            bars(Timeframe::H1, &highs(&[9_900, 9_950, 10_000, 10_200, 10_050, 9_950, 9_900, 10_250, 9_800, 9_700]));
        let out = run(&[Series { tf: Timeframe::H1, bars: &b }], FAR, 9_600);
        let highs: Vec<_> = out.iter().filter(|l| l.side == Formation::High).map(|l| l.price.0).collect();
        assert_eq!(highs, [10_250], "10_200 was traded through by the 10_250 wick");
    }

    #[test]
    fn a_pivot_broken_only_by_the_live_candle_is_gone() {
        let hl = highs(&[9_900, 9_950, 10_200, 10_050, 9_950, 9_900, 9_850]);
        let mut live = bars(Timeframe::H1, &hl);
        // The newest bar is still open at `now`; its high goes through the pivot.
        let now = live[6].open_ms + HOUR_MS / 2;
        let kept = run(&[Series { tf: Timeframe::H1, bars: &live }], now, 9_800);
        assert!(prices(&kept).contains(&10_200));
        live[6].high = Price(10_201);
        let out = run(&[Series { tf: Timeframe::H1, bars: &live }], now, 10_100);
        assert!(!prices(&out).contains(&10_200));
    }

    #[test]
    fn equal_highs_are_not_a_pivot() {
        let b = bars(Timeframe::H1, &highs(&[9_900, 9_950, 10_200, 10_200, 9_950, 9_900, 9_850]));
        let out = run(&[Series { tf: Timeframe::H1, bars: &b }], FAR, 9_700);
        assert!(out.iter().all(|l| l.side == Formation::Low), "{out:?}");
    }

    #[test]
    fn overlapping_majors_keep_the_higher_timeframe_with_strength_two() {
        let h4 = bars(Timeframe::H4, &highs(&[9_000, 9_100, 10_000, 9_100, 9_000, 8_900, 8_800]));
        let d1 = bars(Timeframe::D1, &highs(&[9_000, 9_100, 10_030, 9_100, 9_000, 8_900, 8_800]));
        let out = run(&[Series { tf: Timeframe::H4, bars: &h4 }, Series { tf: Timeframe::D1, bars: &d1 }], FAR, 8_700);
        let z = out.iter().find(|l| l.side == Formation::High && l.price.0 > 9_500).expect("zone above");
        assert_eq!((z.price.0, z.origin, z.strength), (10_030, Origin::D1, 2));
        assert_eq!(out.iter().filter(|l| l.price.0 > 9_500).count(), 1);
    }

    #[test]
    fn a_minor_chain_takes_its_outer_member() {
        let b = bars(
            Timeframe::H1,
            &highs(&[
                9_900, 9_950, 10_035, 9_950, 9_900, 9_950, 10_020, 9_950, 9_900, 9_950, 10_000, 9_950, 9_900, 9_850,
            ]),
        );
        let out = run(&[Series { tf: Timeframe::H1, bars: &b }], FAR, 9_800);
        let above: Vec<_> = out.iter().filter(|l| l.price.0 > 9_800).collect();
        assert_eq!(above.len(), 1, "{out:?}");
        assert_eq!((above[0].price.0, above[0].strength, above[0].origin), (10_035, 3, Origin::H1));
        assert_eq!(above[0].time_ms, b[2].open_ms);
    }

    #[test]
    fn a_minor_on_a_major_merges_into_it() {
        let h4 = bars(Timeframe::H4, &highs(&[9_000, 9_100, 10_000, 9_100, 9_000, 8_900, 8_800]));
        let h1 = bars(Timeframe::H1, &highs(&[9_000, 9_100, 10_030, 9_100, 9_000, 8_900, 8_800]));
        let out = run(&[Series { tf: Timeframe::H1, bars: &h1 }, Series { tf: Timeframe::H4, bars: &h4 }], FAR, 8_700);
        let z = out.iter().find(|l| l.price.0 > 9_500).expect("zone");
        assert_eq!((z.price.0, z.origin, z.strength), (10_000, Origin::H4, 2));
    }

    #[test]
    fn a_far_minor_is_kept_only_as_one_of_the_two_nearest() {
        // Above: minors at +1%, +2% and +10%; below: one minor at -10%.
        let h1 = bars(
            Timeframe::H1,
            &highs(&[
                10_000, 10_500, 11_000, 10_500, 10_150, 10_180, 10_200, 10_050, 10_040, 10_100, 10_050, 10_030, 10_020,
            ]),
        );
        let m15 = bars(
            Timeframe::M15,
            &[(9_500, 9_100), (9_500, 9_050), (9_400, 9_000), (9_500, 9_050), (9_600, 9_100), (9_900, 9_500)],
        );
        let out =
            run(&[Series { tf: Timeframe::M15, bars: &m15 }, Series { tf: Timeframe::H1, bars: &h1 }], FAR, 10_000);
        let p = prices(&out);
        assert!(p.contains(&9_000), "far support kept as one of the 2 nearest below: {p:?}");
        assert!(p.contains(&10_100) && p.contains(&10_200), "{p:?}");
        assert!(!p.contains(&11_000), "far resistance dropped: two nearer zones above: {p:?}");
    }

    #[test]
    fn dmax_is_removed_when_today_trades_above_it() {
        let now = T0 + 10 * DAY_MS + 3 * HOUR_MS;
        let start = Timeframe::D1.bucket_start(now) - DAY_MS;
        let quiet = bars_from(Timeframe::D1, start - DAY_MS, &[(12_000, 8_000), (10_100, 9_900), (10_050, 9_950)]);
        let out = run(&[Series { tf: Timeframe::D1, bars: &quiet }], now, 10_000);
        let origins: Vec<_> = out.iter().map(|l| l.origin).collect();
        assert!(origins.contains(&Origin::Dmax) && origins.contains(&Origin::Dmin), "{out:?}");
        assert_eq!(out.iter().find(|l| l.origin == Origin::Dmax).map(|l| l.time_ms), Some(start));
        let broken = bars_from(Timeframe::D1, start - DAY_MS, &[(12_000, 8_000), (10_100, 9_900), (10_150, 9_950)]);
        let out = run(&[Series { tf: Timeframe::D1, bars: &broken }], now, 10_000);
        let origins: Vec<_> = out.iter().map(|l| l.origin).collect();
        assert!(!origins.contains(&Origin::Dmax) && origins.contains(&Origin::Dmin), "{out:?}");
    }

    #[test]
    fn week_extremes_use_the_monday_week() {
        let now = T0 + 7 * DAY_MS + 2 * DAY_MS;
        let w = bars_from(Timeframe::W1, T0 - 7 * DAY_MS, &[(12_000, 8_000), (11_000, 9_000), (10_500, 9_500)]);
        let out = run(&[Series { tf: Timeframe::W1, bars: &w }], now, 10_000);
        let wmax = out.iter().find(|l| l.origin == Origin::Wmax).expect("wmax");
        assert_eq!((wmax.price.0, wmax.time_ms, wmax.side), (11_000, T0, Formation::High));
        assert!(out.iter().any(|l| l.origin == Origin::Wmin && l.price.0 == 9_000));
    }

    #[test]
    fn survival_against_trade_watermarks() {
        let hi = Level { price: Price(100), side: Formation::High, origin: Origin::H4, time_ms: 0, strength: 1 };
        let lo = Level { side: Formation::Low, ..hi };
        // No trade since computation.
        assert!(hi.survives(i64::MIN, i64::MAX) && lo.survives(i64::MIN, i64::MAX));
        assert!(hi.survives(100, 50) && !hi.survives(101, 50));
        assert!(lo.survives(150, 100) && !lo.survives(150, 99));
    }

    #[test]
    fn live_consumption_removes_traded_through_levels() {
        let b = bars(Timeframe::H4, &highs(&[9_000, 9_100, 10_000, 9_100, 9_000, 9_050, 8_000, 7_000, 7_100, 7_500]));
        let mut scratch = LevelScratch::default();
        let mut set = LevelSet::new();
        compute(&[Series { tf: Timeframe::H4, bars: &b }], FAR, Price(8_500), &mut scratch, &mut set);
        assert!(prices(set.levels()).contains(&10_000));
        let n = set.levels().len();
        assert_eq!(set.on_trade(Price(9_999)), 0);
        assert_eq!(set.on_trade(Price(10_001)), 1);
        assert_eq!(set.levels().len(), n - 1);
        assert!(!prices(set.levels()).contains(&10_000));
    }

    #[test]
    fn a_young_listing_has_no_levels() {
        use crate::instrument::Registry;
        use crate::sim::{instruments, universe, Sim, SimConfig};
        use crate::venue::Venue;
        let u = universe(5, 100);
        let r = Registry::new(instruments(&u, &[Venue::Binance])).expect("registry");
        let young = u.iter().position(|p| p.young).expect("a young pair");
        let mut sim = Sim::new(SimConfig::default(), &u, &r, &[young]);
        let set = sim.history(0, FAR, 512);
        assert_eq!(set.ring(Timeframe::M5).len(), 8);
        let mut cols: [Vec<Candle>; 5] = Default::default();
        let mut out = LevelSet::new();
        let price = set.ring(Timeframe::M5).newest().map(|c| c.close).expect("bars");
        compute_from_set(&set, FAR, price, &mut cols, &mut LevelScratch::default(), &mut out);
        assert!(out.levels().is_empty(), "{:?}", out.levels());
    }

    /// Independent, brute-force list of every unbroken pivot and extreme.
    fn brute_raw(series: &[Series<'_>], now: i64) -> Vec<Level> {
        let mut out = Vec::new();
        for s in series {
            let completed = s.completed(now);
            let start = completed.saturating_sub(PIVOT_BARS);
            if let Some(origin) = Origin::pivot(s.tf) {
                for i in start + 2..completed.saturating_sub(2) {
                    let b = s.bars[i];
                    let around = [i - 2, i - 1, i + 1, i + 2];
                    if around.iter().all(|&j| b.high > s.bars[j].high)
                        && s.bars[i + 1..].iter().all(|c| c.high <= b.high)
                    {
                        out.push(Level {
                            price: b.high,
                            side: Formation::High,
                            origin,
                            time_ms: b.open_ms,
                            strength: 1,
                        });
                    }
                    if around.iter().all(|&j| b.low < s.bars[j].low) && s.bars[i + 1..].iter().all(|c| c.low >= b.low) {
                        out.push(Level { price: b.low, side: Formation::Low, origin, time_ms: b.open_ms, strength: 1 });
                    }
                }
            }
            extremes(s, now, &mut out);
        }
        out
    }

    #[test]
    fn properties_over_random_series() {
        use crate::instrument::Registry;
        use crate::sim::{instruments, universe, Sim, SimConfig};
        use crate::venue::Venue;
        let u = universe(11, 40);
        let r = Registry::new(instruments(&u, &[Venue::Binance])).expect("registry");
        for seed in 0..24u64 {
            let mut sim = Sim::new(SimConfig { seed, ..SimConfig::default() }, &u, &r, &[(seed % 40) as usize]);
            let now = T0 + (seed as i64) * 7_777_777;
            let set = sim.history(0, now, 512);
            // The live price: the close of the newest 5m bar, nudged so both sides exist.
            let price = set.ring(Timeframe::M5).newest().map(|c| c.close).expect("bars");
            let mut cols: [Vec<Candle>; 5] = Default::default();
            let mut scratch = LevelScratch::default();
            let mut out = LevelSet::new();
            compute_from_set(&set, now, price, &mut cols, &mut scratch, &mut out);
            let tfs = [Timeframe::M15, Timeframe::H1, Timeframe::H4, Timeframe::D1, Timeframe::W1];
            let series: Vec<Series<'_>> = tfs.iter().zip(cols.iter()).map(|(&tf, b)| Series { tf, bars: b }).collect();
            let raw = brute_raw(&series, now);
            let levels = out.levels();
            assert!(!levels.is_empty() && levels.len() < LEVELS_MAX, "seed {seed}: {} levels", levels.len());
            for l in levels {
                assert!(
                    raw.iter().any(|x| x.price == l.price
                        && x.origin == l.origin
                        && x.side == l.side
                        && x.time_ms == l.time_ms),
                    "seed {seed}: {l:?} is not an unbroken pivot or extreme"
                );
                if l.is_resistance(price) {
                    assert!(l.price >= price, "seed {seed}: resistance below price: {l:?}");
                } else {
                    assert!(l.price <= price, "seed {seed}: support above price: {l:?}");
                }
                assert!(l.strength >= 1);
            }
            let d: Vec<_> = levels.iter().map(|l| l.price.0.abs_diff(price.0)).collect();
            assert!(d.windows(2).all(|w| w[0] <= w[1]), "seed {seed}: not nearest first");
            for m in raw.iter().filter(|x| x.origin.is_major()) {
                assert!(
                    levels.iter().any(|z| within(m.price, z.price, MERGE_BP, z.price)),
                    "seed {seed}: unbroken major {m:?} has no zone within 0.4%"
                );
            }
            let strength: u32 = levels.iter().map(|l| l.strength).sum();
            assert!(strength as usize <= raw.len());
        }
    }
}
