//! A pair's newest liquidations as its owning shard takes them, for the `liquidations` stream
//! (`decisions.md` §17 "Streams"): a ring of [`LIQ_FEED_LEN`] entries the shard writes and any
//! front thread reads, without a lock and without allocating on either side.
//!
//! The pair's [`crate::perp::PerpSnapshot`] is replaced once a second; a stream hands each
//! liquidation within its 2 ms round, so it reads this ring between two snapshots. Each
//! liquidation has a number (1, 2, …, [`LiqFeed::head`] the newest); a snapshot carries the
//! number of the newest it holds (`PerpSnapshot::liq_seq`), so snapshot plus the ring's entries
//! after it is every liquidation once.
//!
//! One writer (the owning shard), many readers: each entry is a seqlock (its `stamp` is odd
//! while written, then the entry's number times two). A reader that finds an entry overwritten
//! (it asked for one more than [`LIQ_FEED_LEN`] behind the head) gets [`Gap`] and starts again
//! from a snapshot. Bound: the ring holds the newest [`LIQ_FEED_LEN`]; older ones are in the
//! snapshot's list only.
//!
//! In a cluster an api node's replica keeps a feed per pair too, written by its one snapshot
//! thread ([`LiqFeed::relay`]): the market node sends each pair's new entries with every
//! snapshot round (every 100 ms, not only with the pair's snapshot each second), numbered by its
//! own feed, and the replica takes them under numbers of its own, so its streams read the ring
//! as the market node's do. [`LiqFeed::local_of`] turns a snapshot's `liq_seq` into the
//! replica's numbering.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use rampart_engine::perp_book::Liquidation;
use rampart_engine::perp_window::PositionSide;

/// Liquidations the ring holds: more than the 50 of a stream's snapshot, so a reader that lost
/// its place can make one from the ring alone.
pub const LIQ_FEED_LEN: usize = 64;

/// One entry: the seqlock stamp and the liquidation's fields as bits.
#[derive(Debug, Default)]
struct Entry {
    /// `2 n` once liquidation `n` is written; odd while it is being written.
    stamp: AtomicU64,
    /// 0 long, 1 short.
    side: AtomicU64,
    price: AtomicU64,
    qty: AtomicU64,
    time_ms: AtomicU64,
}

/// The ring (see the module documentation).
#[derive(Debug)]
pub struct LiqFeed {
    /// The number of the newest liquidation written (0: none yet).
    head: AtomicU64,
    entries: Box<[Entry]>,
    /// A replica's feed: which market node's numbering it relays ([`LiqFeed::relay`]; 0: none).
    origin: AtomicU64,
    /// A replica's feed: the origin's number of the newest liquidation relayed.
    relayed: AtomicU64,
}

/// The entry asked for was overwritten: more than [`LIQ_FEED_LEN`] came after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap;

impl Default for LiqFeed {
    fn default() -> LiqFeed {
        LiqFeed::new()
    }
}

impl LiqFeed {
    /// An empty ring (its one allocation).
    pub fn new() -> LiqFeed {
        LiqFeed {
            head: AtomicU64::new(0),
            entries: (0..LIQ_FEED_LEN).map(|_| Entry::default()).collect(),
            origin: AtomicU64::new(0),
            relayed: AtomicU64::new(0),
        }
    }

    /// A replica's side: takes `entries`, liquidations numbered by the feed of the market node
    /// `origin` (a number that node's snapshot publisher draws at its start), oldest first, each
    /// once under this feed's next number: one at or below the newest relayed before is skipped
    /// (a round sent again). Numbers the origin skipped (its ring no longer held them when it
    /// sent) are left unwritten here too, so a reader that asks for them gets [`Gap`] and starts
    /// again from a snapshot, as on the market node. Another origin (a standby took the partition
    /// over, its numbering begun again) restarts the count past the whole ring: every reader
    /// starts again from the new owner's snapshot. The replica's one writer only; no allocation,
    /// no lock.
    pub fn relay(&self, origin: u64, entries: &[(u64, Liquidation)]) {
        let before = self.origin.load(Ordering::Relaxed);
        if before != origin {
            if before != 0 {
                self.skip(LIQ_FEED_LEN as u64);
            }
            self.relayed.store(0, Ordering::Relaxed);
            self.origin.store(origin, Ordering::Release);
        }
        for (n, l) in entries {
            let relayed = self.relayed.load(Ordering::Relaxed);
            if *n <= relayed {
                continue;
            }
            if relayed != 0 {
                self.skip(n - relayed - 1);
            }
            self.push(l);
            self.relayed.store(*n, Ordering::Release);
        }
    }

    /// Moves the head past `k` numbers left unwritten (their entries hold older numbers' stamps).
    fn skip(&self, k: u64) {
        if k > 0 {
            self.head.store(self.head.load(Ordering::Relaxed) + k, Ordering::Release);
        }
    }

    /// A replica's side: the origin whose numbering it relays (0: none yet).
    pub fn origin(&self) -> u64 {
        self.origin.load(Ordering::Acquire)
    }

    /// A replica's side: this feed's number for liquidation `n` of `origin`'s numbering (a
    /// snapshot's `liq_seq` as the market node sent it). A number not relayed yet, or another
    /// origin's, is taken as the head: what the ring holds after it comes later.
    pub fn local_of(&self, origin: u64, n: u64) -> u64 {
        let head = self.head();
        if self.origin.load(Ordering::Acquire) != origin {
            return head;
        }
        head.saturating_sub(self.relayed.load(Ordering::Acquire).saturating_sub(n))
    }

    /// The number of the newest liquidation written (0: none).
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// Writes the next liquidation; its number. The owning shard only (one writer). No
    /// allocation, no lock.
    pub fn push(&self, l: &Liquidation) -> u64 {
        let n = self.head.load(Ordering::Relaxed) + 1;
        let e = &self.entries[(n % LIQ_FEED_LEN as u64) as usize];
        e.stamp.store(2 * n - 1, Ordering::Relaxed);
        fence(Ordering::Release);
        e.side.store(u64::from(l.side == PositionSide::Short), Ordering::Relaxed);
        e.price.store(l.price.to_bits(), Ordering::Relaxed);
        e.qty.store(l.qty.to_bits(), Ordering::Relaxed);
        e.time_ms.store(l.time_ms as u64, Ordering::Relaxed);
        e.stamp.store(2 * n, Ordering::Release);
        self.head.store(n, Ordering::Release);
        n
    }

    /// Liquidation `n` (1 ≤ `n` ≤ [`LiqFeed::head`]), or [`Gap`] when it was overwritten (or is
    /// being overwritten now).
    pub fn get(&self, n: u64) -> Result<Liquidation, Gap> {
        debug_assert!(n >= 1);
        let e = &self.entries[(n % LIQ_FEED_LEN as u64) as usize];
        if e.stamp.load(Ordering::Acquire) != 2 * n {
            return Err(Gap);
        }
        let side = if e.side.load(Ordering::Relaxed) == 1 { PositionSide::Short } else { PositionSide::Long };
        let l = Liquidation {
            side,
            price: f64::from_bits(e.price.load(Ordering::Relaxed)),
            qty: f64::from_bits(e.qty.load(Ordering::Relaxed)),
            time_ms: e.time_ms.load(Ordering::Relaxed) as i64,
        };
        fence(Ordering::Acquire);
        if e.stamp.load(Ordering::Relaxed) != 2 * n {
            return Err(Gap);
        }
        Ok(l)
    }

    /// Calls `each` with every liquidation after number `after` up to the head, oldest first;
    /// the number of the last one read (`after` when none is new), or [`Gap`] when one of them
    /// was overwritten (then `each` may have seen some: the caller starts again from a snapshot).
    pub fn read_after(&self, after: u64, mut each: impl FnMut(u64, Liquidation)) -> Result<u64, Gap> {
        let head = self.head();
        if head.saturating_sub(after) > LIQ_FEED_LEN as u64 {
            return Err(Gap);
        }
        for n in after + 1..=head {
            each(n, self.get(n)?);
        }
        Ok(head.max(after))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn liq(usd: f64, time_ms: i64, side: PositionSide) -> Liquidation {
        Liquidation { side, price: 2.0, qty: usd / 2.0, time_ms }
    }

    fn read(feed: &LiqFeed, after: u64) -> Result<(u64, Vec<(u64, f64)>), Gap> {
        let mut got = Vec::new();
        let last = feed.read_after(after, |n, l| got.push((n, l.usd())))?;
        Ok((last, got))
    }

    #[test]
    fn every_liquidation_after_a_number_once_in_order() {
        let feed = LiqFeed::new();
        assert_eq!(feed.head(), 0);
        assert_eq!(read(&feed, 0), Ok((0, vec![])));
        assert_eq!(feed.push(&liq(10.0, 1, PositionSide::Long)), 1);
        assert_eq!(feed.push(&liq(20.0, 2, PositionSide::Short)), 2);
        assert_eq!(read(&feed, 0), Ok((2, vec![(1, 10.0), (2, 20.0)])));
        assert_eq!(read(&feed, 1), Ok((2, vec![(2, 20.0)])));
        assert_eq!(read(&feed, 2), Ok((2, vec![])));
        let l = feed.get(2).expect("held");
        assert_eq!(l, liq(20.0, 2, PositionSide::Short), "every field as written");
    }

    #[test]
    fn a_reader_too_far_behind_is_told_so() {
        let feed = LiqFeed::new();
        for k in 1..=(LIQ_FEED_LEN as u64 + 1) {
            feed.push(&liq(k as f64, k as i64, PositionSide::Long));
        }
        assert_eq!(read(&feed, 0), Err(Gap), "the first was overwritten");
        assert_eq!(feed.get(1), Err(Gap));
        let (last, got) = read(&feed, 1).expect("the newest LEN are held");
        assert_eq!((last, got.len()), (LIQ_FEED_LEN as u64 + 1, LIQ_FEED_LEN));
        assert_eq!(got.first(), Some(&(2, 2.0)));
    }

    #[test]
    fn a_replica_relays_each_liquidation_once_under_its_own_numbers() {
        let feed = LiqFeed::new();
        let at = |n: u64| (n, liq(n as f64, n as i64, PositionSide::Long));
        feed.relay(7, &[at(41), at(42)]);
        assert_eq!(read(&feed, 0), Ok((2, vec![(1, 41.0), (2, 42.0)])));
        feed.relay(7, &[at(42), at(43)]);
        assert_eq!(read(&feed, 2), Ok((3, vec![(3, 43.0)])), "the repeat skipped");
        assert_eq!((feed.local_of(7, 43), feed.local_of(7, 42), feed.local_of(7, 41)), (3, 2, 1));
        assert_eq!(feed.local_of(7, 44), 3, "not relayed yet: the head");
        // Numbers the origin's ring no longer held: a reader of them is told so.
        feed.relay(7, &[at(46)]);
        assert_eq!((feed.head(), feed.get(4), feed.get(5)), (6, Err(Gap), Err(Gap)));
        assert_eq!(read(&feed, 3), Err(Gap));
        assert_eq!(read(&feed, 5), Ok((6, vec![(6, 46.0)])));
        assert_eq!(feed.local_of(7, 43), 3, "numbers keep their place");
        // A standby's publisher, its numbers begun again: every reader starts again.
        feed.relay(9, &[at(1), at(2)]);
        let skipped = 6 + LIQ_FEED_LEN as u64;
        assert_eq!(read(&feed, 6), Err(Gap));
        assert_eq!(read(&feed, skipped), Ok((skipped + 2, vec![(skipped + 1, 1.0), (skipped + 2, 2.0)])));
        assert_eq!(
            (feed.local_of(9, 2), feed.local_of(9, 1), feed.local_of(7, 43)),
            (skipped + 2, skipped + 1, skipped + 2)
        );
    }

    #[test]
    fn readers_on_other_threads_see_whole_entries_or_a_gap() {
        let feed = std::sync::Arc::new(LiqFeed::new());
        let writer = {
            let feed = feed.clone();
            std::thread::spawn(move || {
                for k in 1..=20_000u64 {
                    feed.push(&liq(k as f64, k as i64, PositionSide::Long));
                }
            })
        };
        let mut after = 0;
        let mut seen = 0u64;
        while after < 20_000 {
            match feed.read_after(after, |n, l| {
                assert_eq!((l.usd(), l.time_ms, l.qty), (n as f64, n as i64, n as f64 / 2.0), "a torn entry");
                seen += 1;
            }) {
                Ok(last) => after = last,
                Err(Gap) => after = feed.head().saturating_sub(LIQ_FEED_LEN as u64 / 2),
            }
        }
        writer.join().expect("writer");
        assert!(seen > 0);
    }
}
