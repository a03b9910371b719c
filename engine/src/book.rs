//! Order books: each side a sorted run of fixed-point levels inside a buffer preallocated at
//! start-up, with free room on both ends.
//!
//! Rationale: books of a few hundred to a few thousand levels change near the touch. A sorted
//! array keeps the levels contiguous for the wall scan and the depth sums, but inserting or
//! removing near the touch of a best-first array shifts every level behind it (a new best bid
//! moved the whole side). Here a side is a window `[start, start + len)` of its buffer, best
//! first, with room before and after it: an insert or removal shifts whichever part of the
//! window is shorter, so a new best level costs one write and a change at depth `d` of `n`
//! moves at most `min(d, n - d)` levels. When the end that should move has no room left, the
//! window is re-centred in its buffer (one move of the side, after at least
//! [`SLACK_LEVELS`]` / 2` edits at that end). Lookups gallop from the touch, so an update near
//! the touch reads only the first cache lines of the side. Capacity is fixed at construction:
//! applying a delta never allocates.

use crate::fixed::{Price, Qty};

/// Free room a side's buffer has beyond `depth_levels_max`, shared between its two ends. At
/// the bound of an end a re-centre moves the side, so this sets how rarely that happens.
pub const SLACK_LEVELS: usize = 64;

/// Which side of the book.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Side {
    /// Buy orders, below the price.
    Bid,
    /// Sell orders, above the price.
    Ask,
}

impl Side {
    /// The values the API takes, for its 422 messages.
    pub const ALLOWED: &'static str = "bid, ask";

    /// Its name in the API (a Wall's `side`).
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Bid => "bid",
            Side::Ask => "ask",
        }
    }

    /// The side named `s` (exactly as the API spells it), if any.
    pub fn parse(s: &str) -> Option<Side> {
        [Side::Bid, Side::Ask].into_iter().find(|side| side.as_str() == s)
    }
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

/// One side's levels, best first, as the window `[start, start + len)` of `buf`.
///
/// `buf` is a `Vec` whose capacity (`depth_levels_max + SLACK_LEVELS`) is reserved at
/// construction and never grows; its length is only how far the window has ever reached, so
/// pages a side never used are never touched.
#[derive(Clone, Debug)]
struct Run {
    buf: Vec<Level>,
    start: usize,
    len: usize,
}

impl Run {
    fn new(room: usize) -> Run {
        let mut buf = Vec::with_capacity(room);
        // Begin in the middle of the room a side usually uses, so the first levels can arrive
        // in either order without a re-centre.
        let start = SLACK_LEVELS.min(room) / 2;
        buf.resize(start, Level::default());
        Run { buf, start, len: 0 }
    }

    fn levels(&self) -> &[Level] {
        &self.buf[self.start..self.start + self.len]
    }

    fn room(&self) -> usize {
        self.buf.capacity()
    }

    /// Makes `buf` reach index `end` (exclusive) without reallocating.
    fn reach(&mut self, end: usize) {
        assert!(end <= self.buf.capacity(), "a side's window left its buffer");
        if self.buf.len() < end {
            self.buf.resize(end, Level::default());
        }
    }

    /// Moves the window to the middle of the buffer's free room.
    fn recentre(&mut self) {
        let start = (self.room() - self.len) / 2;
        self.reach(start + self.len);
        self.buf.copy_within(self.start..self.start + self.len, start);
        self.start = start;
    }

    /// Inserts `level` at window index `i`, shifting the shorter part. The caller keeps `len`
    /// below the room.
    fn insert(&mut self, i: usize, level: Level) {
        debug_assert!(i <= self.len && self.len < self.room());
        let front = i < self.len - i;
        if front && self.start == 0 || !front && self.start + self.len == self.room() {
            self.recentre();
        }
        if front {
            self.buf.copy_within(self.start..self.start + i, self.start - 1);
            self.start -= 1;
        } else {
            self.reach(self.start + self.len + 1);
            self.buf.copy_within(self.start + i..self.start + self.len, self.start + i + 1);
        }
        self.buf[self.start + i] = level;
        self.len += 1;
    }

    /// Removes window index `i`, shifting the shorter part.
    fn remove(&mut self, i: usize) {
        debug_assert!(i < self.len);
        if i < self.len - 1 - i {
            self.buf.copy_within(self.start..self.start + i, self.start + 1);
            self.start += 1;
        } else {
            self.buf.copy_within(self.start + i + 1..self.start + self.len, self.start + i);
        }
        self.len -= 1;
    }

    /// Where `price` is or would go: `Ok(i)` if held at `i`, else `Err(i)`, the index it would
    /// take. Gallops from the touch (indices 0, 1, 3, 7, ...), then bisects the last step.
    fn find(&self, side: Side, price: Price) -> Result<usize, usize> {
        let levels = self.levels();
        let nearer = |l: &Level| match side {
            Side::Bid => l.price > price,
            Side::Ask => l.price < price,
        };
        // Invariant: every index below `lo` is nearer the touch than `price`.
        let (mut lo, mut step) = (0, 1);
        while lo + step <= levels.len() && nearer(&levels[lo + step - 1]) {
            lo += step;
            step *= 2;
        }
        let hi = (lo + step - 1).min(levels.len());
        let i = lo + levels[lo..hi].partition_point(nearer);
        match levels.get(i) {
            Some(l) if l.price == price => Ok(i),
            _ => Err(i),
        }
    }
}

/// An order book with a bounded number of levels per side.
#[derive(Clone, Debug)]
pub struct Book {
    bids: Run,
    asks: Run,
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
        let room = depth_levels_max + SLACK_LEVELS;
        Book { bids: Run::new(room), asks: Run::new(room), depth_levels_max, beyond_depth_count: 0 }
    }

    /// The per-side capacity.
    pub fn depth_levels_max(&self) -> usize {
        self.depth_levels_max
    }

    /// Sets the size at `price` on `side` to `qty` (absolute, as every venue sends it);
    /// zero removes the level.
    pub fn apply(&mut self, side: Side, price: Price, qty: Qty) -> Applied {
        let run = match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        };
        match run.find(side, price) {
            Ok(i) => {
                if qty.0 == 0 {
                    run.remove(i);
                    Applied::Removed
                } else {
                    let at = run.start + i;
                    run.buf[at].qty = qty;
                    Applied::Updated
                }
            }
            Err(i) => {
                if qty.0 == 0 {
                    return Applied::AbsentRemoval;
                }
                if run.len == self.depth_levels_max {
                    self.beyond_depth_count += 1;
                    if i == run.len {
                        return Applied::BeyondDepth;
                    }
                    run.len -= 1;
                }
                run.insert(i, Level { price, qty });
                debug_assert!(run.len <= self.depth_levels_max, "a side grew past its depth");
                debug_assert!(ordered_at(run.levels(), i, side), "an inserted level broke the side's order");
                Applied::Inserted
            }
        }
    }

    /// Keeps only the best `levels` levels of each side (a venue that streams the top N of its
    /// book does not always remove the levels that leave it).
    pub fn truncate(&mut self, levels: usize) {
        self.bids.len = self.bids.len.min(levels);
        self.asks.len = self.asks.len.min(levels);
    }

    /// Removes every level (before a snapshot is loaded).
    pub fn clear(&mut self) {
        for run in [&mut self.bids, &mut self.asks] {
            run.len = 0;
            run.start = run.start.min(SLACK_LEVELS / 2);
        }
    }

    /// Bids, best first.
    pub fn bids(&self) -> &[Level] {
        self.bids.levels()
    }

    /// Asks, best first.
    pub fn asks(&self) -> &[Level] {
        self.asks.levels()
    }

    /// Highest bid.
    pub fn best_bid(&self) -> Option<Level> {
        self.bids().first().copied()
    }

    /// Lowest ask.
    pub fn best_ask(&self) -> Option<Level> {
        self.asks().first().copied()
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
        let (bids, asks) = (self.bids(), self.asks());
        bids.windows(2).all(|w| w[0].price > w[1].price)
            && asks.windows(2).all(|w| w[0].price < w[1].price)
            && bids.iter().chain(asks).all(|l| l.qty.0 > 0)
            && bids.len() <= self.depth_levels_max
            && asks.len() <= self.depth_levels_max
            && [&self.bids, &self.asks].iter().all(|r| r.buf.capacity() == self.depth_levels_max + SLACK_LEVELS)
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
        let cap = (b.bids.buf.capacity(), b.asks.buf.capacity());
        for i in 0..1000_i64 {
            b.apply(Side::Bid, p(1000 - (i * 7919) % 100), q((i % 5) as u64));
            b.apply(Side::Ask, p(2000 + (i * 104_729) % 100), q((i % 3) as u64));
        }
        assert_eq!((b.bids.buf.capacity(), b.asks.buf.capacity()), cap);
        assert!(b.check_invariants());
    }

    /// The levels a plain sorted model holds for `side`, best first, capped like the book.
    fn model_side(model: &std::collections::BTreeMap<i64, u64>, side: Side) -> Vec<(i64, u64)> {
        let all = model.iter().map(|(&p, &q)| (p, q));
        match side {
            Side::Bid => all.rev().collect(),
            Side::Ask => all.collect(),
        }
    }

    fn book_side(b: &Book, side: Side) -> Vec<(i64, u64)> {
        let levels = if side == Side::Bid { b.bids() } else { b.asks() };
        levels.iter().map(|l| (l.price.0, l.qty.0)).collect()
    }

    /// Applies one edit to the model as the book must: absolute sizes, zero removes, and at the
    /// bound the farthest level goes (or the new level is not kept when it is the farthest).
    fn model_apply(model: &mut std::collections::BTreeMap<i64, u64>, side: Side, price: i64, qty: u64, max: usize) {
        if qty == 0 {
            model.remove(&price);
            return;
        }
        model.insert(price, qty);
        if model.len() > max {
            let farthest = match side {
                Side::Bid => model.keys().next().copied(),
                Side::Ask => model.keys().next_back().copied(),
            };
            farthest.map(|f| model.remove(&f));
        }
    }

    /// Random edits in several shapes (touch-heavy, deep, one end only, full sides, truncations
    /// and clears) against a `BTreeMap` model: the window moves and re-centres in its buffer
    /// many times and always holds exactly the model's levels in order.
    #[test]
    fn the_book_matches_a_sorted_model_under_random_edits() {
        let mut rng = rampart_testkit::rng::Rng::new(7);
        for (round, max) in [8_usize, 40, 300, 1].into_iter().cycle().take(16).enumerate() {
            let mut b = Book::new(max);
            let mut models = [std::collections::BTreeMap::new(), std::collections::BTreeMap::new()];
            for step in 0..4_000 {
                let side = if rng.below(2) == 0 { Side::Bid } else { Side::Ask };
                let model = &mut models[side as usize];
                let touch = match side {
                    Side::Bid => model.keys().next_back().copied().unwrap_or(10_000),
                    Side::Ask => model.keys().next().copied().unwrap_or(10_001),
                };
                let away = |d: i64| if side == Side::Bid { touch - d } else { touch + d };
                // Shapes: new best levels, edits near the touch, anywhere, far away, and a touch
                // walking away (the best removed, a level added behind the farthest).
                let held = model.len() as i64;
                let mut qty = if rng.below(4) == 0 { 0 } else { rng.below(9) as u64 + 1 };
                let price = match (round + step / 500) % 5 {
                    0 => away(-(rng.below(2) as i64)),
                    1 => away(rng.below(6) as i64),
                    2 => away(rng.below(400) as i64 - 20),
                    3 => away(rng.below(3) as i64 + 200),
                    _ if step % 2 == 0 => {
                        qty = 0;
                        touch
                    }
                    _ => away(held + rng.below(3) as i64),
                };
                b.apply(side, p(price), q(qty));
                model_apply(model, side, price, qty, max);
                if rng.below(1_000) == 0 {
                    let keep = rng.below(max + 1);
                    b.truncate(keep);
                    for (s, m) in [Side::Bid, Side::Ask].into_iter().zip(models.iter_mut()) {
                        let kept = model_side(m, s).into_iter().take(keep).collect();
                        *m = kept;
                    }
                }
                if rng.below(2_000) == 0 {
                    b.clear();
                    models.iter_mut().for_each(|m| m.clear());
                }
                assert!(b.check_invariants(), "round {round} step {step}");
            }
            for (s, m) in [Side::Bid, Side::Ask].into_iter().zip(&models) {
                assert_eq!(book_side(&b, s), model_side(m, s), "round {round}: {s:?}");
            }
        }
    }

    #[test]
    fn a_new_best_level_and_a_touch_removal_move_nothing_else() {
        let mut b = Book::new(100);
        for v in 0..50 {
            b.apply(Side::Ask, p(1_000 + v), q(1));
        }
        let before = b.asks.start;
        b.apply(Side::Ask, p(999), q(1));
        assert_eq!(b.asks.start, before - 1, "a new best ask takes the free slot before the run");
        b.apply(Side::Ask, p(999), q(0));
        assert_eq!(b.asks.start, before, "removing the best ask moves only the window start");
        assert_eq!(b.asks().len(), 50);
        assert_eq!(b.asks.find(Side::Ask, p(1_049)), Ok(49));
        assert_eq!(b.asks.find(Side::Ask, p(1_050)), Err(50));
        assert_eq!(b.asks.find(Side::Ask, p(998)), Err(0));
    }
}
