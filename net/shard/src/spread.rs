//! Periodic work spread evenly over its period (sans-I/O): each of a shard's `n` books once per
//! period, book `k` at `k/n` of it, a bounded number per loop round. The level recomputes, the
//! wall scans and the metrics all follow it.
//!
//! Bound: at most `per_round_max` books per call; a shard that falls behind (a slow round, a
//! stall) catches up over the following calls instead of stalling its ticks, in the same order.

/// One kind of periodic work's schedule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spread {
    period_ms: i64,
    per_round_max: u64,
    /// Books taken since the epoch, over every period.
    done: u64,
}

impl Spread {
    /// Each book once per `period_ms`, at most `per_round_max` per call.
    pub(crate) const fn new(period_ms: i64, per_round_max: usize) -> Spread {
        assert!(period_ms > 0 && per_round_max > 0);
        Spread { period_ms, per_round_max: per_round_max as u64, done: 0 }
    }

    /// The local indexes of the books due `elapsed_ms` after the epoch among `n` books, in
    /// order (each taken: the next call goes on after them).
    pub(crate) fn due(&mut self, n: usize, elapsed_ms: i64) -> Due {
        let n = n as u64;
        if n == 0 {
            return Due { next: 0, end: 0, n: 1 };
        }
        let target = (elapsed_ms.max(0) as u128 * u128::from(n) / self.period_ms as u128) as u64;
        let end = target.min(self.done + self.per_round_max).max(self.done);
        let due = Due { next: self.done, end, n };
        self.done = end;
        due
    }
}

/// Books due, as local indexes.
#[derive(Debug)]
pub(crate) struct Due {
    next: u64,
    end: u64,
    n: u64,
}

impl Iterator for Due {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        (self.next < self.end).then(|| {
            self.next += 1;
            ((self.next - 1) % self.n) as usize
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_book_once_per_period_evenly_and_bounded_per_round() {
        let mut s = Spread::new(1_000, 3);
        assert_eq!(s.due(4, 0).count(), 0, "nothing at the epoch");
        assert_eq!(s.due(4, 250).collect::<Vec<_>>(), [0], "book 0 at 1/4 of the period");
        assert_eq!(s.due(4, 500).collect::<Vec<_>>(), [1]);
        assert_eq!(s.due(4, 500).count(), 0, "taken once");
        // Behind by a period and a half: three per call, in order, round the books.
        assert_eq!(s.due(4, 2_000).collect::<Vec<_>>(), [2, 3, 0]);
        assert_eq!(s.due(4, 2_000).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(s.due(4, 2_000).count(), 0, "caught up");
        assert_eq!(s.due(4, 2_250).collect::<Vec<_>>(), [0], "and on as before");
        assert_eq!(s.due(0, 9_000).count(), 0, "no books");
    }
}
