//! Order books: two sorted arrays of fixed-point levels, preallocated at start-up.
//!
//! Rationale: books of a few hundred to a few thousand levels change near the touch; a
//! sorted array with binary search and a short `memmove` beats a tree there and keeps the
//! levels contiguous for the wall scan. Capacity is fixed at construction, so applying a
//! delta never allocates.

use crate::fixed::{Price, Qty};

/// Which side of the book.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Side {
    /// Buy orders, below the price.
    Bid,
    /// Sell orders, above the price.
    Ask,
}

/// One price level.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Level {
    /// Level price.
    pub price: Price,
    /// Resting size in base units.
    pub qty: Qty,
}

/// What applying one level update did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Applied {
    /// A new level.
    Inserted,
    /// An existing level got a new size.
    Updated,
    /// A level was removed (size zero).
    Removed,
    /// A removal for a level the book does not hold; normal on every venue, ignored.
    AbsentRemoval,
    /// The side is full at `depth_levels_max` and the level is farther from the touch than
    /// every level held, so it was not stored (the book keeps its nearest levels).
    BeyondDepth,
}

/// An order book with a bounded number of levels per side.
#[derive(Clone, Debug)]
pub struct Book {
    /// Bids, best (highest) first.
    bids: Vec<Level>,
    /// Asks, best (lowest) first.
    asks: Vec<Level>,
    depth_levels_max: usize,
    /// Levels not stored or evicted because a side was full.
    pub beyond_depth_count: u64,
}

impl Book {
    /// A book holding at most `depth_levels_max` levels per side.
    ///
    /// At the bound, a new level nearer the touch evicts the farthest level; a level farther
    /// than every held level is dropped (`Applied::BeyondDepth`).
    pub fn new(depth_levels_max: usize) -> Book {
        assert!(depth_levels_max > 0);
        Book {
            bids: Vec::with_capacity(depth_levels_max),
            asks: Vec::with_capacity(depth_levels_max),
            depth_levels_max,
            beyond_depth_count: 0,
        }
    }

    /// The per-side capacity.
    pub fn depth_levels_max(&self) -> usize {
        self.depth_levels_max
    }

    /// Sets the size at `price` on `side` to `qty` (absolute, as every venue sends it);
    /// zero removes the level.
    pub fn apply(&mut self, side: Side, price: Price, qty: Qty) -> Applied {
        let levels = match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        };
        // Bids are kept descending, asks ascending: search on a key that is ascending.
        let found = match side {
            Side::Bid => levels.binary_search_by(|l| price.cmp(&l.price)),
            Side::Ask => levels.binary_search_by(|l| l.price.cmp(&price)),
        };
        match found {
            Ok(i) => {
                if qty.0 == 0 {
                    levels.remove(i);
                    Applied::Removed
                } else {
                    levels[i].qty = qty;
                    Applied::Updated
                }
            }
            Err(i) => {
                if qty.0 == 0 {
                    return Applied::AbsentRemoval;
                }
                if levels.len() == self.depth_levels_max {
                    if i == levels.len() {
                        self.beyond_depth_count += 1;
                        return Applied::BeyondDepth;
                    }
                    levels.pop();
                    self.beyond_depth_count += 1;
                }
                debug_assert!(levels.len() < levels.capacity());
                levels.insert(i, Level { price, qty });
                debug_assert!(levels.len() <= self.depth_levels_max, "a side grew past its depth");
                debug_assert!(ordered_at(levels, i, side), "an inserted level broke the side's order");
                Applied::Inserted
            }
        }
    }

    /// Keeps only the best `levels` levels of each side (a venue that streams the top N of its
    /// book does not always remove the levels that leave it).
    pub fn truncate(&mut self, levels: usize) {
        self.bids.truncate(levels);
        self.asks.truncate(levels);
    }

    /// Removes every level (before a snapshot is loaded).
    pub fn clear(&mut self) {
        self.bids.clear();
        self.asks.clear();
    }

    /// Bids, best first.
    pub fn bids(&self) -> &[Level] {
        &self.bids
    }

    /// Asks, best first.
    pub fn asks(&self) -> &[Level] {
        &self.asks
    }

    /// Highest bid.
    pub fn best_bid(&self) -> Option<Level> {
        self.bids.first().copied()
    }

    /// Lowest ask.
    pub fn best_ask(&self) -> Option<Level> {
        self.asks.first().copied()
    }

    /// Midpoint of the touch, if both sides have levels.
    pub fn mid(&self) -> Option<Price> {
        match (self.best_bid(), self.best_ask()) {
            (Some(b), Some(a)) => Some(Price((b.price.0 + a.price.0) / 2)),
            _ => None,
        }
    }

    /// True when the best bid is at or above the best ask: the book is corrupt and must not
    /// be served until it is rebuilt.
    pub fn is_crossed(&self) -> bool {
        match (self.best_bid(), self.best_ask()) {
            (Some(b), Some(a)) => b.price >= a.price,
            _ => false,
        }
    }

    /// Checks the sort invariants (tests and debug assertions).
    pub fn check_invariants(&self) -> bool {
        self.bids.windows(2).all(|w| w[0].price > w[1].price)
            && self.asks.windows(2).all(|w| w[0].price < w[1].price)
            && self.bids.iter().chain(&self.asks).all(|l| l.qty.0 > 0)
            && self.bids.len() <= self.depth_levels_max
            && self.asks.len() <= self.depth_levels_max
    }
}

/// Whether the level at `i` sits strictly between its neighbours in `side`'s order (bids
/// descending, asks ascending): with the side ordered before an insert, this makes it ordered
/// after, so debug builds check the invariant at O(1) per insert.
fn ordered_at(levels: &[Level], i: usize, side: Side) -> bool {
    let better = |a: &Level, b: &Level| match side {
        Side::Bid => a.price > b.price,
        Side::Ask => a.price < b.price,
    };
    let after_prev = i == 0 || better(&levels[i - 1], &levels[i]);
    let before_next = i + 1 >= levels.len() || better(&levels[i], &levels[i + 1]);
    after_prev && before_next && levels[i].qty.0 > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: i64) -> Price {
        Price(v)
    }
    fn q(v: u64) -> Qty {
        Qty(v)
    }

    #[test]
    fn insert_update_remove() {
        let mut b = Book::new(8);
        assert_eq!(b.apply(Side::Bid, p(100), q(5)), Applied::Inserted);
        assert_eq!(b.apply(Side::Bid, p(102), q(1)), Applied::Inserted);
        assert_eq!(b.apply(Side::Bid, p(101), q(2)), Applied::Inserted);
        assert_eq!(b.bids().iter().map(|l| l.price.0).collect::<Vec<_>>(), [102, 101, 100]);
        assert_eq!(b.apply(Side::Bid, p(101), q(9)), Applied::Updated);
        assert_eq!(b.bids()[1].qty, q(9));
        assert_eq!(b.apply(Side::Bid, p(102), q(0)), Applied::Removed);
        assert_eq!(b.best_bid().map(|l| l.price), Some(p(101)));
        assert_eq!(b.apply(Side::Ask, p(105), q(1)), Applied::Inserted);
        assert_eq!(b.apply(Side::Ask, p(103), q(1)), Applied::Inserted);
        assert_eq!(b.asks().iter().map(|l| l.price.0).collect::<Vec<_>>(), [103, 105]);
        assert_eq!(b.mid(), Some(p(102)));
        assert!(b.check_invariants());
    }

    #[test]
    fn removal_of_absent_level_is_ignored() {
        let mut b = Book::new(4);
        b.apply(Side::Ask, p(10), q(1));
        assert_eq!(b.apply(Side::Ask, p(11), q(0)), Applied::AbsentRemoval);
        assert_eq!(b.apply(Side::Bid, p(9), q(0)), Applied::AbsentRemoval);
        assert_eq!(b.asks().len(), 1);
        assert!(b.bids().is_empty());
    }

    #[test]
    fn crossed_book_is_detected() {
        let mut b = Book::new(4);
        b.apply(Side::Bid, p(100), q(1));
        b.apply(Side::Ask, p(101), q(1));
        assert!(!b.is_crossed());
        b.apply(Side::Bid, p(101), q(1));
        assert!(b.is_crossed(), "bid equal to ask is crossed");
        b.apply(Side::Bid, p(101), q(0));
        assert!(!b.is_crossed());
        b.apply(Side::Ask, p(99), q(1));
        assert!(b.is_crossed());
    }

    #[test]
    fn full_side_keeps_nearest_levels() {
        let mut b = Book::new(3);
        for v in [100, 99, 98] {
            b.apply(Side::Bid, p(v), q(1));
        }
        assert_eq!(b.apply(Side::Bid, p(97), q(1)), Applied::BeyondDepth);
        assert_eq!(b.apply(Side::Bid, p(101), q(1)), Applied::Inserted);
        assert_eq!(b.bids().iter().map(|l| l.price.0).collect::<Vec<_>>(), [101, 100, 99]);
        assert_eq!(b.beyond_depth_count, 2);
        assert!(b.check_invariants());
    }

    #[test]
    fn apply_never_grows_capacity() {
        let mut b = Book::new(16);
        let cap = (b.bids.capacity(), b.asks.capacity());
        for i in 0..1000_i64 {
            b.apply(Side::Bid, p(1000 - (i * 7919) % 100), q((i % 5) as u64));
            b.apply(Side::Ask, p(2000 + (i * 104_729) % 100), q((i % 3) as u64));
        }
        assert_eq!((b.bids.capacity(), b.asks.capacity()), cap);
        assert!(b.check_invariants());
    }
}
