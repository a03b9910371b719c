//! Candles: per-pair ring buffers for 5m, 15m, 1h, 4h, 1d and 1w, UTC-aligned, built from trades.
//!
//! Buckets are aligned to UTC; days start at 00:00 UTC and weeks on Monday 00:00 UTC. A ring
//! holds a fixed number of bars (`bars_max`); when full, the oldest bar is overwritten. Bars are
//! contiguous in time: a bucket with no trade gets a flat bar at the previous close, so bar
//! `k` back from the live bar is always `k` buckets earlier.

use crate::fixed::Price;

/// Milliseconds in a minute.
pub const MINUTE_MS: i64 = 60_000;
/// Milliseconds in an hour.
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
/// Milliseconds in a day.
pub const DAY_MS: i64 = 24 * HOUR_MS;
/// Milliseconds in a week.
pub const WEEK_MS: i64 = 7 * DAY_MS;
/// 1970-01-01 was a Thursday; the first Monday 00:00 UTC is four days later.
const MONDAY_OFFSET_MS: i64 = 4 * DAY_MS;

/// A candle timeframe.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Timeframe {
    /// 5 minutes.
    M5 = 0,
    /// 15 minutes.
    M15 = 1,
    /// 1 hour.
    H1 = 2,
    /// 4 hours.
    H4 = 3,
    /// 1 day (UTC).
    D1 = 4,
    /// 1 week (Monday 00:00 UTC).
    W1 = 5,
}

impl Timeframe {
    /// Every timeframe, finest first.
    pub const ALL: [Timeframe; 6] =
        [Timeframe::M5, Timeframe::M15, Timeframe::H1, Timeframe::H4, Timeframe::D1, Timeframe::W1];
    /// The allowed identifiers as a 422 message lists them.
    pub const ALLOWED: &'static str = "5m, 15m, 1h, 4h, 1d, 1w";

    /// Bucket length.
    pub fn duration_ms(self) -> i64 {
        match self {
            Timeframe::M5 => 5 * MINUTE_MS,
            Timeframe::M15 => 15 * MINUTE_MS,
            Timeframe::H1 => HOUR_MS,
            Timeframe::H4 => 4 * HOUR_MS,
            Timeframe::D1 => DAY_MS,
            Timeframe::W1 => WEEK_MS,
        }
    }

    /// API identifier.
    pub fn as_str(self) -> &'static str {
        match self {
            Timeframe::M5 => "5m",
            Timeframe::M15 => "15m",
            Timeframe::H1 => "1h",
            Timeframe::H4 => "4h",
            Timeframe::D1 => "1d",
            Timeframe::W1 => "1w",
        }
    }

    /// Parses an API identifier.
    pub fn parse(s: &str) -> Option<Timeframe> {
        Timeframe::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Open time of the bucket holding `ts_ms`.
    pub fn bucket_start(self, ts_ms: i64) -> i64 {
        let d = self.duration_ms();
        match self {
            Timeframe::W1 => (ts_ms - MONDAY_OFFSET_MS).div_euclid(d) * d + MONDAY_OFFSET_MS,
            _ => ts_ms.div_euclid(d) * d,
        }
    }

    /// Dense index 0..6.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One bar; prices are fixed-point.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct Candle {
    /// Bucket open time, Unix milliseconds.
    pub open_ms: i64,
    /// First price.
    pub open: Price,
    /// Highest price.
    pub high: Price,
    /// Lowest price.
    pub low: Price,
    /// Last price.
    pub close: Price,
    /// Quote volume: the sum of price × quantity of the bar's trades.
    pub volume: f64,
    /// Number of trades; `None` when a venue's history does not say (only Binance's does).
    pub trades: Option<u32>,
}

impl Candle {
    /// A bar of one price and no trade.
    pub fn flat(open_ms: i64, p: Price) -> Candle {
        Candle { open_ms, open: p, high: p, low: p, close: p, volume: 0.0, trades: Some(0) }
    }

    /// A bar of prices with no volume information (tests, level fixtures).
    pub fn prices(open_ms: i64, open: Price, high: Price, low: Price, close: Price) -> Candle {
        Candle { open_ms, open, high, low, close, volume: 0.0, trades: Some(0) }
    }

    /// A bar of one trade.
    pub fn trade(open_ms: i64, price: Price, qty: crate::fixed::Qty) -> Candle {
        let volume = price.to_f64() * qty.to_f64();
        Candle { open_ms, open: price, high: price, low: price, close: price, volume, trades: Some(1) }
    }
}

/// How a merged bar's volume and trade count combine with the bar already held.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Sums {
    /// Disjoint observations (trades, finer bars): add.
    Add,
    /// Two observations of the same bar that overlap in time (a backfilled bar in progress and
    /// the trades streamed since before the backfill): keep the larger, an undercount by the
    /// trades of the overlap at most, never a double count.
    Max,
}

fn add_trades(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    Some(a?.saturating_add(b?))
}

/// A fixed-capacity ring of contiguous bars of one timeframe; the newest bar is the live one.
///
/// Rationale: every trade updates the live bar of six rings, and the rings' bars sit in six
/// heap buffers. The live bar is kept in the ring itself (so in the book's own state, next to
/// the other five) and written to the buffer when the next bucket opens: a trade on a book
/// whose buffers are out of cache touches no buffer at all.
#[derive(Clone, Debug)]
pub struct CandleRing {
    tf: Timeframe,
    /// The newest bar while `len > 0`; `bars[head]` is stale until the ring rolls over.
    live: Candle,
    bars: Box<[Candle]>,
    /// Index of the newest bar's slot.
    head: usize,
    len: usize,
    /// Trades older than the oldest bar held, ignored.
    pub too_old_count: u64,
}

impl CandleRing {
    /// An empty ring of `bars_max` bars.
    pub fn new(tf: Timeframe, bars_max: usize) -> CandleRing {
        assert!(bars_max >= 2);
        CandleRing {
            tf,
            live: Candle::default(),
            bars: vec![Candle::default(); bars_max].into_boxed_slice(),
            head: 0,
            len: 0,
            too_old_count: 0,
        }
    }

    /// The ring's timeframe.
    pub fn timeframe(&self) -> Timeframe {
        self.tf
    }

    /// Bars held (live one included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no bar is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Capacity.
    pub fn bars_max(&self) -> usize {
        self.bars.len()
    }

    /// The newest bar (the live one while its bucket is open).
    pub fn newest(&self) -> Option<&Candle> {
        (self.len > 0).then_some(&self.live)
    }

    /// The close of the bar holding `t_ms` (a time at or after the newest bar's start: the newest
    /// bar's close, the last price since); `None` before the oldest bar held or before any.
    pub fn close_at(&self, t_ms: i64) -> Option<Price> {
        let newest = self.newest()?;
        let bucket = self.tf.bucket_start(t_ms);
        if bucket >= newest.open_ms {
            return Some(newest.close);
        }
        let k = (newest.open_ms - bucket) / self.tf.duration_ms();
        self.back(usize::try_from(k).ok()?).filter(|c| c.open_ms == bucket).map(|c| c.close)
    }

    /// Bar `k` back from the newest (0 = newest).
    pub fn back(&self, k: usize) -> Option<&Candle> {
        (k < self.len).then(|| self.slot(k))
    }

    /// Bars oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Candle> + ExactSizeIterator + '_ {
        (0..self.len).rev().map(move |k| self.slot(k))
    }

    /// Bar `k` back from the newest, `k < len`.
    fn slot(&self, k: usize) -> &Candle {
        match k {
            0 => &self.live,
            _ => &self.bars[(self.head + self.bars.len() - k) % self.bars.len()],
        }
    }

    /// Copies the bars, oldest first, into `out` (cleared first; no allocation while `out`
    /// has the ring's capacity).
    pub fn copy_into(&self, out: &mut Vec<Candle>) {
        out.clear();
        out.extend(self.iter().copied());
    }

    fn push(&mut self, c: Candle) {
        if self.len > 0 {
            self.bars[self.head] = self.live;
            self.head = (self.head + 1) % self.bars.len();
        }
        self.live = c;
        self.len = (self.len + 1).min(self.bars.len());
    }

    /// Merges a bar observed inside the bucket opening at `bucket_ms` (which must be aligned to
    /// this ring's timeframe): a trade is [`Candle::trade`], a finer bar is itself. Later
    /// buckets roll the ring over; skipped buckets get flat bars at the previous close (at most
    /// `bars_max` of them). The bar's own `open_ms` is not read.
    pub fn merge(&mut self, bucket_ms: i64, bar: &Candle, sums: Sums) {
        debug_assert_eq!(self.tf.bucket_start(bucket_ms), bucket_ms);
        let d = self.tf.duration_ms();
        let Some(&live) = self.newest() else {
            self.push(Candle { open_ms: bucket_ms, ..*bar });
            return;
        };
        if bucket_ms == live.open_ms {
            let held = &mut self.live;
            widen(held, bar, sums);
            held.close = bar.close;
        } else if bucket_ms > live.open_ms {
            let gap = ((bucket_ms - live.open_ms) / d - 1) as usize;
            let fill = gap.min(self.bars.len());
            let first_fill = bucket_ms - fill as i64 * d;
            for k in 0..fill {
                self.push(Candle::flat(first_fill + k as i64 * d, live.close));
            }
            self.push(Candle { open_ms: bucket_ms, ..*bar });
        } else {
            // A late observation for an earlier bucket: widen that bar's range and add its
            // volume if the bar is held; its open and close stay as they were.
            let k = ((live.open_ms - bucket_ms) / d) as usize;
            if k < self.len {
                let i = (self.head + self.bars.len() - k) % self.bars.len();
                widen(&mut self.bars[i], bar, sums);
            } else {
                self.too_old_count += 1;
            }
        }
    }
}

/// Widens `held`'s range by `bar`'s and combines their volumes and trade counts.
fn widen(held: &mut Candle, bar: &Candle, sums: Sums) {
    held.high = held.high.max(bar.high);
    held.low = held.low.min(bar.low);
    match sums {
        Sums::Add => {
            held.volume += bar.volume;
            held.trades = add_trades(held.trades, bar.trades);
        }
        Sums::Max => {
            held.volume = held.volume.max(bar.volume);
            held.trades = match (held.trades, bar.trades) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
    }
}

/// The six rings of one (venue, pair) book.
#[derive(Clone, Debug)]
pub struct CandleSet {
    rings: [CandleRing; 6],
}

impl CandleSet {
    /// Six empty rings of `bars_max` bars each.
    pub fn new(bars_max: usize) -> CandleSet {
        CandleSet { rings: Timeframe::ALL.map(|tf| CandleRing::new(tf, bars_max)) }
    }

    /// The ring of one timeframe.
    pub fn ring(&self, tf: Timeframe) -> &CandleRing {
        &self.rings[tf.index()]
    }

    /// Applies a trade at `ts_ms` to every timeframe.
    pub fn trade(&mut self, ts_ms: i64, price: Price, qty: crate::fixed::Qty) {
        let bar = Candle::trade(ts_ms, price, qty);
        for ring in &mut self.rings {
            let b = ring.tf.bucket_start(ts_ms);
            ring.merge(b, &bar, Sums::Add);
        }
    }

    /// Adds a bar of `tf` fetched from the venue (oldest first) to that ring only: each
    /// timeframe is backfilled from the venue's own bars, which are UTC-aligned there too.
    pub fn load(&mut self, tf: Timeframe, bar: Candle) {
        let ring = &mut self.rings[tf.index()];
        let b = ring.tf.bucket_start(bar.open_ms);
        ring.merge(b, &bar, Sums::Add);
    }

    /// Folds into `self` (a backfill) the bars of `live` (built from trades since the stream
    /// started) that are not older than `self`'s newest bar of the same timeframe, so the bar
    /// in progress keeps the trades seen before the backfill arrived. That bar was observed by
    /// both, over overlapping times: its volume and trade count are the larger of the two.
    pub fn merge_live(&mut self, live: &CandleSet) {
        for (ring, live_ring) in self.rings.iter_mut().zip(live.rings.iter()) {
            let from = ring.newest().map_or(i64::MIN, |c| c.open_ms);
            for bar in live_ring.iter().filter(|c| c.open_ms >= from) {
                let sums = if bar.open_ms == from { Sums::Max } else { Sums::Add };
                ring.merge(bar.open_ms, bar, sums);
            }
        }
    }

    /// Adds a completed bar of `tf` (history) to its own ring and aggregates it into every
    /// coarser ring, so coarser bars are the aggregates of the finer bars they cover.
    pub fn absorb(&mut self, tf: Timeframe, bar: Candle) {
        for ring in &mut self.rings[tf.index()..] {
            let b = ring.tf.bucket_start(bar.open_ms);
            ring.merge(b, &bar, Sums::Add);
        }
    }

    /// The last price at `t_ms` as the bars say it: the close of the finest bar held that holds
    /// `t_ms` (so within that bar's length of the price then); `None` before every ring's oldest
    /// bar. Values a past open-interest sample in USD (`GET /v1/perp/{symbol}/history`).
    pub fn close_at(&self, t_ms: i64) -> Option<Price> {
        self.rings.iter().find_map(|r| r.close_at(t_ms))
    }

    /// Open time of the oldest bar held on any timeframe (how far back the pair's history
    /// goes); `None` before any bar.
    pub fn history_start_ms(&self) -> Option<i64> {
        self.rings.iter().filter_map(|r| r.iter().next().map(|c| c.open_ms)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-16 00:00 UTC, a Monday.
    const MONDAY: i64 = 1_794_787_200_000;
    /// A quantity of 1.
    const SCALE_QTY: u64 = crate::fixed::SCALE as u64;

    #[test]
    fn buckets_are_utc_aligned_and_weeks_start_monday() {
        assert_eq!(Timeframe::W1.bucket_start(MONDAY), MONDAY);
        assert_eq!(Timeframe::W1.bucket_start(MONDAY - 1), MONDAY - WEEK_MS);
        assert_eq!(Timeframe::W1.bucket_start(MONDAY + 6 * DAY_MS + 5), MONDAY);
        assert_eq!(Timeframe::D1.bucket_start(MONDAY + 13 * HOUR_MS), MONDAY);
        assert_eq!(Timeframe::H4.bucket_start(MONDAY + 5 * HOUR_MS), MONDAY + 4 * HOUR_MS);
        assert_eq!(Timeframe::M5.bucket_start(MONDAY + 299_999), MONDAY);
        assert_eq!(Timeframe::M5.bucket_start(MONDAY + 300_000), MONDAY + 300_000);
        // The epoch week: 1969-12-29 (Monday) .. 1970-01-05.
        assert_eq!(Timeframe::W1.bucket_start(0), -3 * DAY_MS);
    }

    #[test]
    fn roll_over_at_bucket_edge() {
        let mut r = CandleRing::new(Timeframe::M5, 8);
        let t0 = MONDAY;
        let tr = |r: &mut CandleRing, ts: i64, p: i64| {
            let b = r.timeframe().bucket_start(ts);
            r.merge(b, &Candle::trade(ts, Price(p), crate::fixed::Qty(SCALE_QTY)), Sums::Add);
        };
        tr(&mut r, t0, 100);
        tr(&mut r, t0 + 1000, 105);
        tr(&mut r, t0 + 299_999, 98);
        assert_eq!(r.len(), 1);
        let bar = *r.newest().expect("bar");
        assert_eq!(
            bar,
            Candle {
                volume: bar.volume,
                trades: Some(3),
                ..Candle::prices(t0, Price(100), Price(105), Price(98), Price(98))
            }
        );
        // Quote volume: Σ price × qty of the three trades (prices are fixed-point, qty 1).
        let expect = (100.0 + 105.0 + 98.0) / crate::fixed::SCALE as f64;
        assert!((bar.volume - expect).abs() < 1e-15, "{}", bar.volume);
        // The first millisecond of the next bucket opens a new bar.
        tr(&mut r, t0 + 300_000, 101);
        assert_eq!(r.len(), 2);
        assert_eq!(r.newest().map(|c| (c.open_ms, c.open)), Some((t0 + 300_000, Price(101))));
        assert_eq!(r.back(1).map(|c| c.close), Some(Price(98)));
    }

    #[test]
    fn gaps_get_flat_bars_and_ring_wraps() {
        let mut r = CandleRing::new(Timeframe::M5, 4);
        r.merge(MONDAY, &Candle::prices(0, Price(10), Price(12), Price(9), Price(11)), Sums::Add);
        r.merge(MONDAY + 3 * 300_000, &Candle::prices(0, Price(20), Price(20), Price(20), Price(20)), Sums::Add);
        let opens: Vec<_> = r.iter().map(|c| (c.open_ms - MONDAY) / 300_000).collect();
        assert_eq!(opens, [0, 1, 2, 3]);
        assert_eq!(r.back(1).map(|c| (c.open, c.close)), Some((Price(11), Price(11))));
        r.merge(MONDAY + 4 * 300_000, &Candle::prices(0, Price(21), Price(21), Price(21), Price(21)), Sums::Add);
        assert_eq!(r.len(), 4);
        assert_eq!(r.iter().next().map(|c| c.open_ms), Some(MONDAY + 300_000));
        // A gap longer than the ring fills at most the ring.
        r.merge(MONDAY + 1000 * 300_000, &Candle::prices(0, Price(5), Price(5), Price(5), Price(5)), Sums::Add);
        assert_eq!(r.len(), 4);
        let opens: Vec<_> = r.iter().map(|c| (c.open_ms - MONDAY) / 300_000).collect();
        assert_eq!(opens, [997, 998, 999, 1000]);
    }

    /// A past time's price: the close of the finest bar holding it, the newest bar's close after
    /// it, a coarser ring's before the finer one's oldest bar, nothing before every ring's.
    #[test]
    fn the_price_at_a_time_is_the_close_of_the_finest_bar_holding_it() {
        let one = crate::fixed::Qty(SCALE_QTY);
        let mut s = CandleSet::new(4);
        assert_eq!(s.close_at(MONDAY), None, "no bar yet");
        for k in 0..8 {
            s.trade(MONDAY + k * 300_000 + 1_000, Price(100 + k), one);
        }
        let m5 = |k: i64| MONDAY + k * 300_000;
        assert_eq!(s.close_at(m5(7) + 5), Some(Price(107)), "the bar in progress");
        assert_eq!(s.close_at(m5(9)), Some(Price(107)), "after the newest bar: the last price since");
        assert_eq!(s.close_at(m5(5) + 299_999), Some(Price(105)));
        assert_eq!(s.close_at(m5(4)), Some(Price(104)), "the 5m ring's oldest bar of four");
        assert_eq!(s.close_at(m5(3)), Some(Price(105)), "before it: the 15m bar holding it (5m bars 3..5)");
        assert_eq!(s.close_at(m5(0)), Some(Price(102)), "the first 15m bar");
        assert_eq!(s.close_at(MONDAY - 1), None, "before every ring's oldest bar");
        // A gap: the flat bars hold the previous close.
        s.trade(m5(11) + 1, Price(200), one);
        assert_eq!(s.close_at(m5(9) + 7), Some(Price(107)), "a flat bar of the gap");
    }

    /// The bar in progress when a backfill arrives was seen by both sources over overlapping
    /// times: its volume and count are the larger, never the sum; later bars add.
    #[test]
    fn a_backfill_and_the_stream_overlap_only_in_the_bar_in_progress() {
        let one = crate::fixed::Qty(SCALE_QTY);
        let mut backfill = CandleSet::new(8);
        backfill.load(Timeframe::M5, Candle { volume: 50.0, trades: Some(5), ..Candle::flat(MONDAY, Price(10)) });
        let mut live = CandleSet::new(8);
        live.trade(MONDAY + 1_000, Price(10), one);
        live.trade(MONDAY + 2_000, Price(12), one);
        live.trade(MONDAY + 300_000, Price(11), one);
        backfill.merge_live(&live);
        let ring = backfill.ring(Timeframe::M5);
        let first = *ring.back(1).expect("the backfilled bar");
        assert_eq!((first.high, first.close, first.trades, first.volume), (Price(12), Price(12), Some(5), 50.0));
        let next = *ring.newest().expect("a bar after it");
        assert_eq!((next.open, next.trades), (Price(11), Some(1)));
        // Without a count in the backfill, the count of that bar stays unknown.
        let mut uncounted = CandleSet::new(8);
        uncounted.load(Timeframe::M5, Candle { trades: None, ..Candle::flat(MONDAY, Price(10)) });
        uncounted.merge_live(&live);
        assert_eq!(uncounted.ring(Timeframe::M5).back(1).map(|c| c.trades), Some(None));
        assert_eq!(uncounted.history_start_ms(), Some(MONDAY));
    }

    #[test]
    fn late_trade_widens_its_bar_only() {
        let mut r = CandleRing::new(Timeframe::M5, 4);
        r.merge(MONDAY, &Candle::prices(0, Price(10), Price(10), Price(10), Price(10)), Sums::Add);
        r.merge(MONDAY + 300_000, &Candle::prices(0, Price(11), Price(11), Price(11), Price(11)), Sums::Add);
        r.merge(MONDAY, &Candle::prices(0, Price(15), Price(15), Price(15), Price(15)), Sums::Add);
        assert_eq!(r.back(1).map(|c| (c.high, c.close)), Some((Price(15), Price(10))));
        r.merge(MONDAY - 10 * 300_000, &Candle::prices(0, Price(1), Price(1), Price(1), Price(1)), Sums::Add);
        assert_eq!(r.too_old_count, 1);
    }

    #[test]
    fn trades_update_every_timeframe_and_history_aggregates() {
        let mut s = CandleSet::new(16);
        for k in 0..12 {
            let p = 100 + k;
            s.absorb(
                Timeframe::M5,
                Candle {
                    volume: 10.0,
                    trades: Some(2),
                    ..Candle::prices(MONDAY + k * 300_000, Price(p), Price(p + 5), Price(p - 5), Price(p + 1))
                },
            );
        }
        let h1 = s.ring(Timeframe::H1).newest().copied().expect("bar");
        assert_eq!(
            h1,
            Candle {
                volume: 120.0,
                trades: Some(24),
                ..Candle::prices(MONDAY, Price(100), Price(116), Price(95), Price(112))
            }
        );
        assert_eq!(s.ring(Timeframe::M15).len(), 4);
        s.trade(MONDAY + HOUR_MS, Price(200), crate::fixed::Qty(SCALE_QTY));
        assert_eq!(s.ring(Timeframe::H1).len(), 2);
        assert_eq!(s.ring(Timeframe::D1).newest().map(|c| c.high), Some(Price(200)));
        assert_eq!(s.ring(Timeframe::W1).len(), 1);
    }
}
