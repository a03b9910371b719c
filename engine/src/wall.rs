//! Walls: resting orders that are very large against their own book's median level size
//! (`decisions.md` §8). Pure functions over a book; time is an argument.
//!
//! The median is taken over the level sizes of both sides within [`WINDOW_BP`] of the price,
//! by selection (`select_nth_unstable`, O(n)) over a copy bounded by the book's depth, never a
//! sort of the book. For an even count the upper median is used. A window with fewer than
//! [`WINDOW_LEVELS_MIN`] levels yields no walls (not enough book to compare against).
//! Walls are reported nearest to the price first.

use crate::book::{Book, Level, Side};
use crate::fixed::{Price, Qty};

/// Scan window around the price, in basis points (10%).
pub const WINDOW_BP: i128 = 1_000;
/// Fewest levels in the window for a meaningful median.
pub const WINDOW_LEVELS_MIN: usize = 5;
/// Walls reported and tracked per book at most; past it the farthest from the price are dropped.
pub const WALLS_MAX: usize = 32;
/// Default `walls.min_ratio`.
pub const MIN_RATIO_DEFAULT: u32 = 10;

/// One detected wall.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Wall {
    /// Book side: bids are buy walls, asks sell walls.
    pub side: Side,
    /// Level price.
    pub price: Price,
    /// Resting size, base units.
    pub qty: Qty,
    /// Size over the window's median level size.
    pub ratio: f64,
    /// Signed distance from the price in percent (negative below).
    pub dist_pct: f64,
    /// Continuous presence at this price, in milliseconds.
    pub age_ms: i64,
}

#[derive(Clone, Copy, Debug)]
struct Seen {
    side: Side,
    price: Price,
    first_ms: i64,
}

/// Per-book memory of the walls seen at the last scan, for their age.
#[derive(Clone, Debug)]
pub struct WallTracker {
    seen: Vec<Seen>,
    next: Vec<Seen>,
}

impl Default for WallTracker {
    fn default() -> WallTracker {
        WallTracker { seen: Vec::with_capacity(WALLS_MAX), next: Vec::with_capacity(WALLS_MAX) }
    }
}

/// Working memory for [`scan`], allocated once per shard.
#[derive(Debug)]
pub struct WallScratch {
    sizes: Vec<u64>,
}

impl WallScratch {
    /// Room for books of `depth_levels_max` levels per side.
    pub fn new(depth_levels_max: usize) -> WallScratch {
        WallScratch { sizes: Vec::with_capacity(2 * depth_levels_max) }
    }
}

fn in_window(p: Price, price: Price) -> bool {
    (i128::from(p.0) - i128::from(price.0)).abs() * 10_000 <= WINDOW_BP * i128::from(price.0)
}

/// Scans `book` around `price` at `now_ms`: walls (at least `min_ratio` × the median) into
/// `out`, nearest first, with ages carried over from the previous scan through `tracker`. A
/// wall missing from one scan ends; if it returns it starts again at age 0.
pub fn scan(
    book: &Book,
    price: Price,
    now_ms: i64,
    min_ratio: f64,
    tracker: &mut WallTracker,
    scratch: &mut WallScratch,
    out: &mut Vec<Wall>,
) {
    out.clear();
    tracker.next.clear();
    if price.0 > 0 {
        scan_into(book, price, now_ms, min_ratio, tracker, scratch, out);
    }
    core::mem::swap(&mut tracker.seen, &mut tracker.next);
}

fn scan_into(
    book: &Book,
    price: Price,
    now_ms: i64,
    min_ratio: f64,
    tracker: &mut WallTracker,
    scratch: &mut WallScratch,
    out: &mut Vec<Wall>,
) {
    let window = |levels: &[Level]| -> usize { levels.iter().take_while(|l| in_window(l.price, price)).count() };
    // Levels beyond the touch on the far side of the price still count if inside the window.
    let bids: &[Level] = book.bids();
    let asks: &[Level] = book.asks();
    let bid_skip = bids.iter().take_while(|l| !in_window(l.price, price)).count();
    let ask_skip = asks.iter().take_while(|l| !in_window(l.price, price)).count();
    let bids = &bids[bid_skip..bid_skip + window(&bids[bid_skip..])];
    let asks = &asks[ask_skip..ask_skip + window(&asks[ask_skip..])];
    scratch.sizes.clear();
    scratch.sizes.extend(bids.iter().chain(asks).map(|l| l.qty.0));
    let n = scratch.sizes.len();
    if n < WINDOW_LEVELS_MIN {
        return;
    }
    let (_, median, _) = scratch.sizes.select_nth_unstable(n / 2);
    let median = *median;
    if median == 0 {
        return;
    }
    let threshold = min_ratio * median as f64;
    for (side, levels) in [(Side::Bid, bids), (Side::Ask, asks)] {
        for l in levels {
            if (l.qty.0 as f64) < threshold {
                continue;
            }
            let first_ms =
                tracker.seen.iter().find(|s| s.side == side && s.price == l.price).map_or(now_ms, |s| s.first_ms);
            let wall = Wall {
                side,
                price: l.price,
                qty: l.qty,
                ratio: l.qty.0 as f64 / median as f64,
                dist_pct: (l.price.0 - price.0) as f64 / price.0 as f64 * 100.0,
                age_ms: now_ms - first_ms,
            };
            if out.len() < WALLS_MAX {
                out.push(wall);
                tracker.next.push(Seen { side, price: l.price, first_ms });
            } else if let Some((i, far)) =
                out.iter().enumerate().max_by(|a, b| a.1.dist_pct.abs().total_cmp(&b.1.dist_pct.abs()))
            {
                // At the bound, a nearer wall replaces the farthest.
                if far.dist_pct.abs() > wall.dist_pct.abs() {
                    out[i] = wall;
                    tracker.next[i] = Seen { side, price: l.price, first_ms };
                }
            }
        }
    }
    out.sort_unstable_by(|a, b| a.dist_pct.abs().total_cmp(&b.dist_pct.abs()));
}

/// True for quote assets worth one US dollar.
pub fn is_usd_quote(quote: &str) -> bool {
    matches!(quote, "USDT" | "USDC" | "FDUSD" | "BUSD" | "TUSD" | "USD" | "DAI" | "USDE" | "PYUSD")
}

/// USD value of `qty` at `price`, given the quote asset's USD price.
pub fn usd_value(qty: Qty, price: Price, quote_usd: f64) -> f64 {
    qty.to_f64() * price.to_f64() * quote_usd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A book around 100.00 with `n` levels per side 0.01 apart, all of size `q`.
    fn uniform(n: i64, q: u64) -> Book {
        let mut b = Book::new(1_000);
        for i in 1..=n {
            b.apply(Side::Bid, Price(10_000 - i), Qty(q));
            b.apply(Side::Ask, Price(10_000 + i), Qty(q));
        }
        b
    }

    fn run(book: &Book, now: i64, tracker: &mut WallTracker) -> Vec<Wall> {
        let mut out = Vec::with_capacity(WALLS_MAX);
        scan(book, Price(10_000), now, 10.0, tracker, &mut WallScratch::new(1_000), &mut out);
        out
    }

    #[test]
    fn one_wall_at_sixty_times_the_median() {
        let mut b = uniform(200, 100);
        b.apply(Side::Ask, Price(10_050), Qty(6_000));
        let walls = run(&b, 1_000, &mut WallTracker::default());
        assert_eq!(walls.len(), 1);
        let w = walls[0];
        assert_eq!((w.side, w.price, w.qty, w.age_ms), (Side::Ask, Price(10_050), Qty(6_000), 0));
        assert!((w.ratio - 60.0).abs() < 1e-9);
        assert!((w.dist_pct - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_uniform_book_has_no_walls() {
        assert!(run(&uniform(200, 100), 0, &mut WallTracker::default()).is_empty());
        // Just under the ratio is not a wall either.
        let mut b = uniform(200, 100);
        b.apply(Side::Bid, Price(9_990), Qty(999));
        assert!(run(&b, 0, &mut WallTracker::default()).is_empty());
        b.apply(Side::Bid, Price(9_990), Qty(1_000));
        assert_eq!(run(&b, 0, &mut WallTracker::default()).len(), 1);
    }

    #[test]
    fn age_grows_and_restarts_after_a_break() {
        let mut t = WallTracker::default();
        let mut b = uniform(200, 100);
        b.apply(Side::Bid, Price(9_900), Qty(5_000));
        assert_eq!(run(&b, 10_000, &mut t)[0].age_ms, 0);
        assert_eq!(run(&b, 12_000, &mut t)[0].age_ms, 2_000);
        assert_eq!(run(&b, 14_000, &mut t)[0].age_ms, 4_000);
        // Pulled for one scan, then replaced at the same price: age restarts.
        b.apply(Side::Bid, Price(9_900), Qty(100));
        assert!(run(&b, 16_000, &mut t).is_empty());
        b.apply(Side::Bid, Price(9_900), Qty(5_000));
        assert_eq!(run(&b, 18_000, &mut t)[0].age_ms, 0);
        // Moved to another price: a new wall.
        b.apply(Side::Bid, Price(9_900), Qty(100));
        b.apply(Side::Bid, Price(9_899), Qty(5_000));
        let w = run(&b, 20_000, &mut t);
        assert_eq!((w[0].price, w[0].age_ms), (Price(9_899), 0));
    }

    #[test]
    fn bids_below_asks_above_nearest_first() {
        let mut b = uniform(300, 100);
        b.apply(Side::Bid, Price(9_800), Qty(3_000));
        b.apply(Side::Ask, Price(10_100), Qty(2_000));
        b.apply(Side::Bid, Price(9_950), Qty(4_000));
        let w = run(&b, 0, &mut WallTracker::default());
        let got: Vec<_> = w.iter().map(|w| (w.side, w.price.0)).collect();
        assert_eq!(got, [(Side::Bid, 9_950), (Side::Ask, 10_100), (Side::Bid, 9_800)]);
        for w in &w {
            match w.side {
                Side::Bid => assert!(w.dist_pct < 0.0),
                Side::Ask => assert!(w.dist_pct > 0.0),
            }
        }
        assert!((w[2].dist_pct + 2.0).abs() < 1e-9);
    }

    #[test]
    fn levels_outside_the_window_do_not_count() {
        let mut b = uniform(100, 100);
        // 20% away: outside the 10% window, however large.
        b.apply(Side::Ask, Price(12_000), Qty(1_000_000));
        assert!(run(&b, 0, &mut WallTracker::default()).is_empty());
        // A thin book has no median to compare against.
        let mut thin = Book::new(10);
        thin.apply(Side::Bid, Price(9_999), Qty(1));
        thin.apply(Side::Ask, Price(10_001), Qty(1_000));
        assert!(run(&thin, 0, &mut WallTracker::default()).is_empty());
    }

    #[test]
    fn usd_value_converts_non_usd_quotes() {
        assert!(is_usd_quote("USDT") && is_usd_quote("USDC") && !is_usd_quote("BTC"));
        // 2 ETH at 0.05 BTC each, BTC at 95 000 USD: 9 500 USD.
        let usd = usd_value(Qty::from_f64(2.0), Price::from_f64(0.05), 95_000.0);
        assert!((usd - 9_500.0).abs() < 1e-6);
        assert!((usd_value(Qty::from_f64(3.0), Price::from_f64(10.0), 1.0) - 30.0).abs() < 1e-9);
    }

    #[test]
    fn never_more_than_the_bound() {
        let mut b = uniform(300, 1);
        for i in 1..=100 {
            b.apply(Side::Bid, Price(10_000 - i), Qty(1_000));
        }
        // Most bid levels are now "large": the median moves, so use a book where few are.
        let mut c = uniform(300, 100);
        for i in 1..=40 {
            c.apply(Side::Ask, Price(10_000 + i), Qty(10_000));
        }
        let w = run(&c, 0, &mut WallTracker::default());
        assert_eq!(w.len(), WALLS_MAX);
        assert!(w.iter().all(|w| w.price.0 <= 10_000 + WALLS_MAX as i64), "the nearest are kept");
        assert!(run(&b, 0, &mut WallTracker::default()).len() <= WALLS_MAX);
    }
}
