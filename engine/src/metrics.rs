//! Metrics of one book: change, volatility, volume and trades over rolling windows, and the
//! spread, depth and level distances now. Computed from what a shard already holds (candles,
//! the book, the level set); time is an argument.
//!
//! A window over an interval runs from the open of the bar that starts one interval before
//! the current bar (the bucket holding `now`) to the last trade, read from 5-minute bars up to
//! a day and from hourly bars for a week. A window the book's history does not reach back to
//! (a young listing) has no value: a metric is never computed over less than its interval.

use crate::book::Book;
use crate::candle::{CandleSet, Timeframe};
use crate::fixed::Price;
use crate::level::Level;

/// The intervals metrics are taken over, in [`Timeframe::ALL`] order.
pub const INTERVALS: [Timeframe; 6] = Timeframe::ALL;

/// Depth is the resting value within this fraction of the mid on each side (±1 %).
pub const DEPTH_BAND: f64 = 0.01;

/// What one window holds.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct Window {
    /// The window's open (the first bar's open).
    pub open: Price,
    /// Highest price in the window.
    pub high: Price,
    /// Lowest price in the window.
    pub low: Price,
    /// Last price (the last trade, else the newest bar's close).
    pub last: Price,
    /// Quote volume of the window's trades.
    pub volume: f64,
    /// Trades in the window; `None` when a bar of it came from a history without counts.
    pub trades: Option<u64>,
}

impl Window {
    /// Percent from the open to the last price.
    pub fn change_pct(&self) -> f64 {
        (self.last.0 - self.open.0) as f64 / self.open.0 as f64 * 100.0
    }

    /// (high − low) / open, in percent.
    pub fn volatility_pct(&self) -> f64 {
        (self.high.0 - self.low.0) as f64 / self.open.0 as f64 * 100.0
    }
}

/// The bars a window over `interval` is read from.
pub fn bar_timeframe(interval: Timeframe) -> Timeframe {
    if interval == Timeframe::W1 {
        Timeframe::H1
    } else {
        Timeframe::M5
    }
}

/// The window over `interval` ending at `now_ms`, with `last` the last trade price (zero: the
/// newest bar's close). `None` when the history does not reach the window's start or holds
/// no positive open there.
pub fn window(candles: &CandleSet, interval: Timeframe, now_ms: i64, last: Price) -> Option<Window> {
    let ring = candles.ring(bar_timeframe(interval));
    let start = ring.timeframe().bucket_start(now_ms) - interval.duration_ms();
    let oldest = ring.iter().next()?;
    if oldest.open_ms > start {
        return None;
    }
    let newest = ring.newest()?;
    let last = if last.0 > 0 { last } else { newest.close };
    let mut w = Window { open: newest.close, high: last, low: last, last, volume: 0.0, trades: Some(0) };
    for bar in ring.iter().rev().take_while(|b| b.open_ms >= start) {
        w.open = bar.open;
        w.high = w.high.max(bar.high);
        w.low = w.low.min(bar.low);
        w.volume += bar.volume;
        w.trades = w.trades.zip(bar.trades).map(|(a, b)| a + u64::from(b));
    }
    // No bar since the start: nothing traded in the window, whose open is the last close.
    if newest.open_ms < start {
        w.open = newest.close;
        w.high = w.high.max(newest.close);
        w.low = w.low.min(newest.close);
    }
    (w.open.0 > 0).then_some(w)
}

/// (best ask − best bid) / mid in basis points; `None` without both sides.
pub fn spread_bps(book: &Book) -> Option<f64> {
    let (bid, ask) = (book.best_bid()?, book.best_ask()?);
    let mid = (bid.price.0 as f64 + ask.price.0 as f64) / 2.0;
    Some((ask.price.0 - bid.price.0) as f64 / mid * 10_000.0)
}

/// Resting value (price × quantity, in the quote asset) of the bids at or above
/// `mid × (1 − DEPTH_BAND)` and of the asks at or below `mid × (1 + DEPTH_BAND)`; `None`
/// without both sides.
pub fn depth_quote(book: &Book) -> Option<(f64, f64)> {
    let mid = book.mid()?.0 as f64;
    let (lo, hi) = (mid * (1.0 - DEPTH_BAND), mid * (1.0 + DEPTH_BAND));
    let value = |l: &crate::book::Level| l.price.to_f64() * l.qty.to_f64();
    // Each side is stored best first; the walk stops at the band's edge.
    let bid = book.bids().iter().take_while(|l| l.price.0 as f64 >= lo).map(value).sum();
    let ask = book.asks().iter().take_while(|l| l.price.0 as f64 <= hi).map(value).sum();
    Some((bid, ask))
}

/// Imbalance of a depth: (bid − ask) / (bid + ask), zero when both are zero.
pub fn imbalance(bid: f64, ask: f64) -> f64 {
    if bid + ask > 0.0 {
        (bid - ask) / (bid + ask)
    } else {
        0.0
    }
}

/// Signed percent distance from `price` to the nearest support and to the nearest resistance,
/// typed as the API types levels ([`Level::is_resistance`]); `None` for a side with no level.
pub fn level_distances(levels: &[Level], price: Price) -> (Option<f64>, Option<f64>) {
    let mut support: Option<Price> = None;
    let mut resistance: Option<Price> = None;
    for l in levels {
        if l.is_resistance(price) {
            resistance = Some(resistance.map_or(l.price, |r| r.min(l.price)));
        } else {
            support = Some(support.map_or(l.price, |s| s.max(l.price)));
        }
    }
    let pct = |p: Price| (p.0 - price.0) as f64 / price.0 as f64 * 100.0;
    (support.map(pct), resistance.map(pct))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::Side;
    use crate::candle::{Candle, HOUR_MS, MINUTE_MS};
    use crate::fixed::Qty;
    use crate::level::{Formation, Origin};

    /// 2026-11-16 00:00 UTC.
    const T0: i64 = 1_794_787_200_000;
    const ONE: u64 = crate::fixed::SCALE as u64;

    fn bar(open_ms: i64, o: i64, h: i64, l: i64, c: i64, volume: f64, trades: Option<u32>) -> Candle {
        Candle { volume, trades, ..Candle::prices(open_ms, Price(o), Price(h), Price(l), Price(c)) }
    }

    /// Twenty 5-minute bars from T0, bar k opening at 100 + k and trading 10 × k.
    fn set() -> CandleSet {
        let mut s = CandleSet::new(64);
        for k in 0..20 {
            let p = 100 + k;
            s.absorb(
                Timeframe::M5,
                bar(T0 + k * 5 * MINUTE_MS, p, p + 3, p - 2, p + 1, 10.0 * k as f64, Some(k as u32)),
            );
        }
        s
    }

    #[test]
    fn a_window_runs_from_the_bar_one_interval_before_the_current_one() {
        let s = set();
        // Now is inside bar 19; the 1h window starts at bar 7 (12 bars before 19).
        let now = T0 + 19 * 5 * MINUTE_MS + 60_000;
        let w = window(&s, Timeframe::H1, now, Price(125)).expect("covered");
        assert_eq!((w.open, w.last), (Price(107), Price(125)));
        assert_eq!((w.high, w.low), (Price(125), Price(105)));
        assert_eq!(w.volume, (7..20).map(|k| 10.0 * k as f64).sum::<f64>());
        assert_eq!(w.trades, Some((7..20).sum::<u64>()));
        assert!((w.change_pct() - (125.0 - 107.0) / 107.0 * 100.0).abs() < 1e-12);
        assert!((w.volatility_pct() - 20.0 / 107.0 * 100.0).abs() < 1e-12);
        // 5m: the current bar and the one before it.
        let w = window(&s, Timeframe::M5, now, Price(0)).expect("covered");
        assert_eq!((w.open, w.last, w.trades), (Price(118), Price(120), Some(37)));
    }

    #[test]
    fn a_window_the_history_does_not_reach_has_no_value() {
        let s = set();
        let now = T0 + 19 * 5 * MINUTE_MS;
        assert!(window(&s, Timeframe::H4, now, Price(120)).is_none(), "4h needs 48 bars back, 20 are held");
        assert!(window(&s, Timeframe::W1, now, Price(120)).is_none(), "the hourly ring holds 2 hours");
        assert!(window(&CandleSet::new(8), Timeframe::M5, now, Price(1)).is_none(), "no bar at all");
    }

    #[test]
    fn a_quiet_window_is_flat_at_the_last_close() {
        let s = set();
        // Two hours after the last bar: no bar in the 1h window.
        let now = T0 + 19 * 5 * MINUTE_MS + 2 * HOUR_MS;
        let w = window(&s, Timeframe::H1, now, Price(0)).expect("covered");
        assert_eq!((w.open, w.high, w.low, w.last), (Price(120), Price(120), Price(120), Price(120)));
        assert_eq!((w.volume, w.trades, w.change_pct()), (0.0, Some(0), 0.0));
    }

    #[test]
    fn trades_are_unknown_when_a_bar_of_the_window_has_no_count() {
        let mut s = set();
        s.absorb(Timeframe::M5, bar(T0 + 20 * 5 * MINUTE_MS, 120, 121, 119, 120, 1.0, None));
        let now = T0 + 20 * 5 * MINUTE_MS;
        let w = window(&s, Timeframe::M15, now, Price(120)).expect("covered");
        assert_eq!(w.trades, None);
        assert_eq!(w.volume, 1.0 + 190.0 + 180.0 + 170.0, "volumes are known all the same");
    }

    #[test]
    fn spread_and_depth_read_the_book_within_the_band() {
        let mut b = Book::new(64);
        let p = |x: f64| Price::from_f64(x);
        for (side, price, qty) in [
            (Side::Bid, 99.9, 2),
            (Side::Bid, 99.0, 1),
            (Side::Bid, 98.9, 50),
            (Side::Ask, 100.1, 3),
            (Side::Ask, 101.0, 1),
            (Side::Ask, 101.2, 70),
        ] {
            b.apply(side, p(price), Qty(qty * ONE));
        }
        let bps = spread_bps(&b).expect("both sides");
        assert!((bps - 0.2 / 100.0 * 10_000.0).abs() < 1e-9, "{bps}");
        let (bid, ask) = depth_quote(&b).expect("both sides");
        assert!((bid - (99.9 * 2.0 + 99.0)).abs() < 1e-9, "98.9 is outside 1 % of 100: {bid}");
        assert!((ask - (100.1 * 3.0 + 101.0)).abs() < 1e-9, "101.2 is outside: {ask}");
        assert!((imbalance(bid, ask) - (bid - ask) / (bid + ask)).abs() < 1e-15);
        assert_eq!(imbalance(0.0, 0.0), 0.0);
        assert!(spread_bps(&Book::new(4)).is_none() && depth_quote(&Book::new(4)).is_none());
    }

    #[test]
    fn level_distances_are_signed_to_the_nearest_of_each_type() {
        let l = |price: i64, side| Level { price: Price(price), side, origin: Origin::H1, time_ms: 0, strength: 1 };
        let levels = [l(90, Formation::Low), l(95, Formation::Low), l(110, Formation::High), l(104, Formation::High)];
        let (s, r) = level_distances(&levels, Price(100));
        assert_eq!((s, r), (Some(-5.0), Some(4.0)));
        assert_eq!(level_distances(&levels[..2], Price(100)), (Some(-5.0), None));
        assert_eq!(level_distances(&[], Price(100)), (None, None));
    }
}
