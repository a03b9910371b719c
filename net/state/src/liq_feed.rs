//! A pair's newest liquidations as its owning shard takes them (`decisions.md` §17): a ring of
//! [`LIQ_FEED_LEN`] entries the shard writes and any front thread reads, without a lock and
//! without allocating on the writer's side. It is the pair's one list: the `liquidations` stream
//! reads it within its 2 ms round, and `GET /v1/liquidations…` copies it ([`LiqFeed::held`]);
//! neither the book nor its published snapshot holds another (§17's memory of a pair). Each
//! liquidation has a number (1, 2, …, [`LiqFeed::head`] the newest), so a reader that remembers
//! the last number it read gets every later one once.
//!
//! One writer (the owning shard), many readers: each entry is a seqlock (its `stamp` is odd
//! while written, then the entry's number times two). A reader that finds an entry overwritten
//! (it asked for one more than [`LIQ_FEED_LEN`] behind the head) gets [`Gap`] and starts again
//! from the ring's newest. Bound: the ring holds the newest [`LIQ_FEED_LEN`] taken (in the order
//! taken: an OKX push older than those held still takes the oldest's place); an older one is
//! gone (it still counts in the book's windows).
//!
//! In a cluster an api node's replica keeps a feed per pair too, written by its one snapshot
//! thread ([`LiqFeed::relay`]): the market node sends each pair's new entries with every
//! snapshot round (every 100 ms, not only with the pair's snapshot each second), numbered by its
//! own feed, and the replica takes them under numbers of its own, so its streams and lists read
//! the ring as the market node's do (a full snapshot sends the whole ring).

use std::sync::atomic::{fence, AtomicU64, Ordering};

use rampart_engine::perp_book::{Liquidation, RECENT_MAX};
use rampart_engine::perp_window::PositionSide;

/// Liquidations the ring holds: the newest 128 of §17 (about 5 KiB a pair: 40 bytes an entry).
pub const LIQ_FEED_LEN: usize = RECENT_MAX;

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
    /// sent, or it was cleared, up to `head`, the origin's head when it sent) are left unwritten
    /// here too, so a reader that asks for them gets [`Gap`] and starts again, as on the market
    /// node. Another origin (a standby took the partition over, its numbering begun again)
    /// restarts the count past the whole ring: every reader starts again, and the lists show only
    /// what the new owner sends. So does a `full` relay (the origin's whole ring, sent with its
    /// full snapshots) carrying one this ring should hold and does not (a message lost, or rounds
    /// taken before the first full snapshot): the ring is then written again from it, the
    /// repair of a lost message. A skip is at most [`LIQ_FEED_LEN`] numbers (every reader is
    /// past the ring then), so untrusted numbers cannot run the local ones away. The replica's
    /// one writer only; no allocation, no lock.
    pub fn relay(&self, origin: u64, head: u64, entries: &[(u64, Liquidation)], full: bool) {
        let before = self.origin.load(Ordering::Relaxed);
        let missing = full && before == origin && entries.iter().any(|(n, _)| !self.holds_relayed(*n));
        if before != origin || missing {
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
        let relayed = self.relayed.load(Ordering::Relaxed);
        if head > relayed {
            if relayed != 0 {
                self.skip(head - relayed);
            }
            self.relayed.store(head, Ordering::Release);
        }
    }

    /// Empties the ring (its pair lost its perpetual, or its spot listing): the numbers of all it
    /// held are skipped, so a reader gets [`Gap`] and a list nothing until the next liquidation.
    /// The owning shard only (the ring's one writer).
    pub fn clear(&self) {
        self.skip(LIQ_FEED_LEN as u64);
    }

    /// Whether the origin's liquidation `n` is held here: relayed and not overwritten (one not
    /// relayed yet is not missing: it comes now). Every origin number relayed took one local
    /// number (written or skipped), so `n` is local `head − (relayed − n)`.
    fn holds_relayed(&self, n: u64) -> bool {
        let relayed = self.relayed.load(Ordering::Relaxed);
        if n > relayed {
            return true;
        }
        let local = self.head().checked_sub(relayed - n).filter(|l| *l >= 1);
        local.is_some_and(|l| self.get(l).is_ok())
    }

    /// Moves the head past `k` numbers left unwritten (their entries hold older numbers' stamps),
    /// at most [`LIQ_FEED_LEN`] (past the whole ring every older number is a [`Gap`] already).
    fn skip(&self, k: u64) {
        let k = k.min(LIQ_FEED_LEN as u64);
        if k > 0 {
            self.head.store(self.head.load(Ordering::Relaxed) + k, Ordering::Release);
        }
    }

    /// A replica's side: the origin whose numbering it relays (0: none yet).
    #[cfg(test)]
    fn origin(&self) -> u64 {
        self.origin.load(Ordering::Acquire)
    }

    /// Bytes the ring takes (its entries on the heap and itself).
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<LiqFeed>() + core::mem::size_of_val(&*self.entries)
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

    /// The liquidations the ring holds, newest first by the venue's time (of two with the same
    /// time, the one taken later first), with their numbers: what a list answer filters
    /// ([`rampart_engine::perp_book::LiqFilter`]). An entry being overwritten while read is left
    /// out (it is older than every other held). Allocates the copy (a front's read, at most
    /// [`LIQ_FEED_LEN`]).
    pub fn held(&self) -> Vec<(u64, Liquidation)> {
        self.held_where(|_| true)
    }

    /// [`LiqFeed::held`], only those `keep` takes (a list's filter, before the copy is sorted).
    pub fn held_where(&self, keep: impl Fn(&Liquidation) -> bool) -> Vec<(u64, Liquidation)> {
        let head = self.head();
        let from = head.saturating_sub(LIQ_FEED_LEN as u64) + 1;
        let entry = |n: u64| self.get(n).ok().filter(|l| keep(l)).map(|l| (n, l));
        let mut all: Vec<(u64, Liquidation)> = (from..=head).filter_map(entry).collect();
        all.sort_by(|(na, a), (nb, b)| b.time_ms.cmp(&a.time_ms).then(nb.cmp(na)));
        all
    }

    /// Calls `each` with every liquidation after number `after` up to the head, oldest first;
    /// the number of the last one read (`after` when none is new), or [`Gap`] when one of them
    /// was overwritten (then `each` may have seen some: the caller starts again from what the ring
    /// holds).
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
    use rampart_engine::perp_book::LiqFilter;

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
    fn the_copy_for_a_list_is_the_newest_held_newest_first_by_the_venues_time() {
        let feed = LiqFeed::new();
        assert!(feed.held().is_empty());
        let n = LIQ_FEED_LEN as i64 + 72;
        for k in 0..n {
            let side = if k % 2 == 0 { PositionSide::Long } else { PositionSide::Short };
            feed.push(&liq(10.0 * (k as f64 + 1.0), 1_000 * k, side));
        }
        let times = |held: &[(u64, Liquidation)]| held.iter().map(|(_, l)| l.time_ms).collect::<Vec<_>>();
        let want: Vec<i64> = (n - LIQ_FEED_LEN as i64..n).rev().map(|k| 1_000 * k).collect();
        assert_eq!(times(&feed.held()), want, "the newest 128 taken, newest first");
        // An OKX push out of order: in its place by the venue's time, the oldest taken gone.
        let late = 1_000 * (n - 3) + 500;
        feed.push(&liq(1.0, late, PositionSide::Short));
        let held = times(&feed.held());
        assert_eq!((held.len(), held[1], held[2], held[3]), (LIQ_FEED_LEN, 1_000 * (n - 2), late, 1_000 * (n - 3)));
        assert_eq!(held[LIQ_FEED_LEN - 1], 1_000 * (n - LIQ_FEED_LEN as i64 + 1), "the oldest taken made room");
        // Two of one time: the one taken later first.
        feed.push(&liq(2.0, 1_000 * (n - 1), PositionSide::Long));
        let top: Vec<f64> = feed.held().iter().take(2).map(|(_, l)| l.usd()).collect();
        assert_eq!(top, [2.0, 10.0 * n as f64]);
        // The filters of a list read it as they read any newest-first list.
        let all = LiqFilter { side: None, min_usd: 0.0, limit: usize::MAX };
        let copy: Vec<Liquidation> = feed.held().into_iter().map(|(_, l)| l).collect();
        let longs = LiqFilter { side: Some(PositionSide::Long), ..all };
        assert!(longs.apply(1_000 * n, copy.iter()).all(|l| l.side == PositionSide::Long));
        assert_eq!(LiqFilter { limit: 3, ..all }.apply(1_000 * n, copy.iter()).count(), 3);
        // Cleared (the pair delisted): nothing held, a reader told it lost its place.
        let head = feed.head();
        feed.clear();
        assert_eq!((feed.held().len(), read(&feed, head)), (0, Err(Gap)));
        feed.push(&liq(5.0, 1_000 * n, PositionSide::Long));
        assert_eq!(feed.held().len(), 1);
        let day = rampart_engine::perp_book::RECENT_KEEP_MS;
        assert_eq!(all.apply(day + 1_000 * (n - 2), copy.iter()).count(), 3, "exactly 24 h old is listed");
    }

    #[test]
    fn a_replica_relays_each_liquidation_once_under_its_own_numbers() {
        let feed = LiqFeed::new();
        let at = |n: u64| (n, liq(n as f64, n as i64, PositionSide::Long));
        feed.relay(7, 42, &[at(41), at(42)], false);
        assert_eq!(read(&feed, 0), Ok((2, vec![(1, 41.0), (2, 42.0)])));
        feed.relay(7, 43, &[at(42), at(43)], false);
        assert_eq!(read(&feed, 2), Ok((3, vec![(3, 43.0)])), "the repeat skipped");
        // Numbers the origin's ring no longer held: a reader of them is told so.
        feed.relay(7, 46, &[at(46)], false);
        assert_eq!((feed.head(), feed.get(4), feed.get(5)), (6, Err(Gap), Err(Gap)));
        assert_eq!(read(&feed, 3), Err(Gap));
        assert_eq!(read(&feed, 5), Ok((6, vec![(6, 46.0)])));
        // The origin cleared its ring (its pair delisted): nothing sent, the numbers skipped.
        feed.relay(7, 46 + LIQ_FEED_LEN as u64, &[], false);
        assert_eq!((feed.head(), feed.held().len()), (6 + LIQ_FEED_LEN as u64, 0));
        feed.relay(7, 47 + LIQ_FEED_LEN as u64, &[at(47 + LIQ_FEED_LEN as u64)], false);
        assert_eq!(feed.held().len(), 1, "what came after the clearing");
        // A standby's publisher, its numbers begun again: every reader starts again.
        feed.relay(9, 2, &[at(1), at(2)], false);
        let skipped = 7 + 2 * LIQ_FEED_LEN as u64;
        assert_eq!(read(&feed, 7 + LIQ_FEED_LEN as u64), Err(Gap));
        assert_eq!(read(&feed, skipped), Ok((skipped + 2, vec![(skipped + 1, 1.0), (skipped + 2, 2.0)])));
        assert_eq!(feed.origin(), 9);
    }

    /// A lost message, or rounds taken before the first full snapshot: the next full relay
    /// writes the ring again from the origin's; a full relay the ring already holds changes
    /// nothing; a number far ahead moves the head by one ring at most.
    #[test]
    fn a_full_relay_repairs_what_the_replica_missed() {
        let at = |n: u64| (n, liq(n as f64, n as i64, PositionSide::Long));
        let feed = LiqFeed::new();
        // The first round the replica takes is a busy pair's newest only.
        feed.relay(7, 50, &[at(50)], false);
        let whole: Vec<_> = (1..=50).map(at).collect();
        feed.relay(7, 50, &whole, true);
        assert_eq!(feed.held().len(), 50, "the whole ring after the full relay");
        let head = feed.head();
        feed.relay(7, 50, &whole, true);
        assert_eq!(feed.head(), head, "held already: nothing written again");
        // A round lost (51, 52), then the next (53): the full relay puts 51 and 52 back.
        feed.relay(7, 53, &[at(53)], false);
        assert_eq!(feed.held().len(), 51);
        let again: Vec<_> = (4..=53).map(at).collect();
        feed.relay(7, 53, &again, true);
        let usd: Vec<f64> = feed.held().iter().take(3).map(|(_, l)| l.usd()).collect();
        assert_eq!((feed.held().len(), usd), (50, vec![53.0, 52.0, 51.0]));
        // Numbers from the wire far ahead: the head moves one ring, not to them.
        let before = feed.head();
        feed.relay(7, u64::MAX / 4, &[at(u64::MAX / 8)], false);
        assert!(feed.head() <= before + 2 * LIQ_FEED_LEN as u64 + 1, "{} after {before}", feed.head());
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
