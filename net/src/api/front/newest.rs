//! The newest `limit` items of many newest-first lists (a venue-wide answer: walls of every
//! book, liquidations of every pair): a bounded min-heap by rank, so what it holds is the
//! answer's size whatever the venue holds.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// An item with its rank; ordered by the rank alone (greater is newer).
struct Ranked<R, T> {
    rank: R,
    item: T,
}

impl<R: Ord, T> PartialEq for Ranked<R, T> {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank
    }
}

impl<R: Ord, T> Eq for Ranked<R, T> {}

impl<R: Ord, T> PartialOrd for Ranked<R, T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<R: Ord, T> Ord for Ranked<R, T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank.cmp(&other.rank)
    }
}

/// The `limit` greatest-ranked items offered so far.
pub(super) struct Newest<R, T> {
    kept: BinaryHeap<Reverse<Ranked<R, T>>>,
    limit: usize,
}

impl<R: Ord, T> Newest<R, T> {
    /// Room for `limit` items (the answer's limit, validated by the caller).
    pub(super) fn new(limit: usize) -> Newest<R, T> {
        Newest { kept: BinaryHeap::with_capacity(limit + 1), limit }
    }

    /// The lowest rank kept, once `limit` items are kept: an item ranked at or below it would
    /// not be kept.
    pub(super) fn floor(&self) -> Option<&R> {
        (self.kept.len() == self.limit).then(|| self.kept.peek().map(|Reverse(e)| &e.rank)).flatten()
    }

    /// Offers an item; `false` when it was not kept (it ranks at or below every kept one of a
    /// full answer, or the limit is 0).
    pub(super) fn offer(&mut self, rank: R, item: T) -> bool {
        if self.limit == 0 || self.floor().is_some_and(|lowest| rank <= *lowest) {
            return false;
        }
        if self.kept.len() == self.limit {
            self.kept.pop();
        }
        self.kept.push(Reverse(Ranked { rank, item }));
        true
    }

    /// What was kept, newest first.
    pub(super) fn newest_first(self) -> Vec<(R, T)> {
        let mut out: Vec<Ranked<R, T>> = self.kept.into_iter().map(|Reverse(e)| e).collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.into_iter().map(|e| (e.rank, e.item)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Newest;

    #[test]
    fn keeps_the_greatest_ranks_newest_first() {
        let mut n = Newest::new(3);
        for (rank, item) in [(5, 'a'), (1, 'b'), (9, 'c'), (7, 'd'), (3, 'e')] {
            n.offer(rank, item);
        }
        assert_eq!(n.floor(), Some(&5));
        assert!(!n.offer(5, 'f'), "a tie with the lowest kept is not kept");
        assert_eq!(n.newest_first(), [(9, 'c'), (7, 'd'), (5, 'a')]);
        let mut none = Newest::new(0);
        assert!(!none.offer(1, 'x'));
        assert!(none.newest_first().is_empty());
    }
}
