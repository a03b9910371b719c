//! What a venue's listing refresh changes, decided without I/O: delistings confirmed over two
//! refreshes, pairs listed again, and listings implausible enough to be a venue fault.
//!
//! A venue's instrument listing is untrusted input like any other venue message. An empty or
//! truncated listing must not delete every alert on the venue, so a refresh is judged before it
//! is acted on:
//! - a listing that is empty, or that drops more than [`DELIST_SHARE_MAX_PERCENT`] % of the
//!   served pairs (and more than [`DELIST_BATCH_MIN`]) at once, is a venue fault: nothing
//!   changes, the fault is counted and reported;
//! - a pair is delisted only once [`DELIST_CONFIRMATIONS`] refreshes in a row found it absent or
//!   marked delisted (a pair seen again in between starts over);
//! - a delisted pair that a refresh lists again (not marked delisted) is served again.

use std::collections::HashMap;

use rampart_engine::instrument::Status;
use rampart_engine::{BookId, Registry, Venue};

/// Refreshes in a row that must find a pair gone before it is delisted.
pub const DELIST_CONFIRMATIONS: u8 = 2;
/// Pairs one refresh may drop at once whatever their share.
pub const DELIST_BATCH_MIN: usize = 3;
/// Share of a venue's served pairs one refresh may drop at once, in percent; more is a fault.
pub const DELIST_SHARE_MAX_PERCENT: usize = 10;

/// A change a refresh makes to the served pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListingChange {
    /// The venue no longer lists the pair (confirmed): remove it and its alerts.
    Delisted(BookId),
    /// The venue lists a delisted pair again: serve it again.
    Relisted(BookId),
    /// A pair listed for the first time since start (or of a venue that joined late), added
    /// to the registry: serve it.
    Added(BookId),
}

/// A refresh that was not acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListingFault {
    /// Served pairs the listing dropped.
    pub dropped: usize,
    /// Pairs served before the refresh.
    pub served: usize,
}

impl std::fmt::Display for ListingFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the listing drops {} of {} served pairs at once: taken for a venue fault, nothing changed",
            self.dropped, self.served
        )
    }
}

/// Per book of the registry: refreshes in a row that missed it, and whether it is delisted.
#[derive(Debug)]
pub struct ListingWatch {
    misses: Vec<u8>,
    delisted: Vec<bool>,
}

impl ListingWatch {
    /// A watch over every book of a registry of `books` books, all listed.
    pub fn new(books: usize) -> ListingWatch {
        ListingWatch { misses: vec![0; books], delisted: vec![false; books] }
    }

    /// Judges `venue`'s fresh listing (symbol → status) against the served books; pushes the
    /// changes onto `out`, or refuses the whole refresh as a venue fault.
    pub fn review(
        &mut self,
        registry: &Registry,
        venue: Venue,
        listed: &HashMap<&str, Status>,
        out: &mut Vec<ListingChange>,
    ) -> Result<(), ListingFault> {
        self.grow(registry.len());
        let books = registry.venue_books(venue);
        let gone = |id: BookId| {
            let status = listed.get(registry.get(id).symbol.as_str());
            matches!(status, None | Some(Status::Delisted))
        };
        let served = books.iter().filter(|id| !self.delisted[id.index()]).count();
        let dropped = books.iter().filter(|id| !self.delisted[id.index()] && gone(**id)).count();
        let allowed = DELIST_BATCH_MIN.max(served * DELIST_SHARE_MAX_PERCENT / 100);
        if served > 0 && (listed.is_empty() || dropped > allowed) {
            return Err(ListingFault { dropped, served });
        }
        for &id in books {
            let i = id.index();
            match (self.delisted[i], gone(id)) {
                (false, true) => {
                    self.misses[i] = self.misses[i].saturating_add(1);
                    if self.misses[i] >= DELIST_CONFIRMATIONS {
                        self.delisted[i] = true;
                        out.push(ListingChange::Delisted(id));
                    }
                }
                (false, false) => self.misses[i] = 0,
                (true, false) => {
                    self.delisted[i] = false;
                    self.misses[i] = 0;
                    out.push(ListingChange::Relisted(id));
                }
                (true, true) => {}
            }
        }
        Ok(())
    }

    /// Makes room for a registry grown to `books` books (the new ones listed).
    pub fn grow(&mut self, books: usize) {
        if books > self.misses.len() {
            self.misses.resize(books, 0);
            self.delisted.resize(books, false);
        }
    }

    /// Books of `venue` that the last refresh missed but are not delisted yet.
    pub fn suspected(&self, registry: &Registry, venue: Venue) -> usize {
        registry
            .venue_books(venue)
            .iter()
            .filter(|id| self.misses[id.index()] > 0 && !self.delisted[id.index()])
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::fixed::{Price, Qty};
    use rampart_engine::instrument::Instrument;

    fn registry(n: usize) -> Registry {
        let ins = (0..n)
            .map(|i| Instrument {
                venue: Venue::Binance,
                symbol: format!("P{i}USDT"),
                base: format!("P{i}"),
                quote: "USDT".into(),
                tick: Price(1),
                lot: Qty(1),
                status: Status::Trading,
            })
            .collect();
        Registry::new(ins).expect("registry")
    }

    /// The venue's pairs, those at `skip` absent (`mark` None) or marked `mark`.
    fn listing<'a>(r: &'a Registry, skip: &[usize], mark: Option<Status>) -> HashMap<&'a str, Status> {
        let mut m = HashMap::new();
        for (i, id) in r.venue_books(Venue::Binance).iter().enumerate() {
            let status = if skip.contains(&i) { mark } else { Some(Status::Trading) };
            if let Some(st) = status {
                m.insert(r.get(*id).symbol.as_str(), st);
            }
        }
        m
    }

    #[test]
    fn a_delisting_is_confirmed_by_a_second_refresh() {
        let r = registry(40);
        let mut w = ListingWatch::new(r.len());
        let mut out = Vec::new();
        let book = r.venue_books(Venue::Binance)[5];
        // Absent once, then back: nothing happens.
        assert_eq!(w.review(&r, Venue::Binance, &listing(&r, &[5], None), &mut out), Ok(()));
        assert!(out.is_empty());
        assert_eq!(w.suspected(&r, Venue::Binance), 1);
        assert_eq!(w.review(&r, Venue::Binance, &listing(&r, &[], None), &mut out), Ok(()));
        assert!(out.is_empty());
        assert_eq!(w.suspected(&r, Venue::Binance), 0);
        // Marked delisted twice in a row: delisted, once.
        for _ in 0..3 {
            assert_eq!(w.review(&r, Venue::Binance, &listing(&r, &[5], Some(Status::Delisted)), &mut out), Ok(()));
        }
        assert_eq!(out, vec![ListingChange::Delisted(book)]);
        // Listed again: served again.
        out.clear();
        assert_eq!(w.review(&r, Venue::Binance, &listing(&r, &[], None), &mut out), Ok(()));
        assert_eq!(out, vec![ListingChange::Relisted(book)]);
    }

    #[test]
    fn an_empty_or_implausible_listing_is_a_fault_and_changes_nothing() {
        let r = registry(40);
        let mut w = ListingWatch::new(r.len());
        let mut out = Vec::new();
        for _ in 0..3 {
            let empty = HashMap::new();
            assert_eq!(w.review(&r, Venue::Binance, &empty, &mut out), Err(ListingFault { dropped: 40, served: 40 }));
            // 5 of 40 is above both 3 pairs and 10 %.
            let five = listing(&r, &[1, 2, 3, 4, 5], None);
            assert_eq!(w.review(&r, Venue::Binance, &five, &mut out), Err(ListingFault { dropped: 5, served: 40 }));
        }
        assert!(out.is_empty());
        assert_eq!(w.suspected(&r, Venue::Binance), 0, "a refused refresh counts for nothing");
        // 4 of 40 is within 10 %: a plausible batch, confirmed over two refreshes.
        for _ in 0..2 {
            let four = listing(&r, &[1, 2, 3, 4], None);
            assert_eq!(w.review(&r, Venue::Binance, &four, &mut out), Ok(()));
        }
        assert_eq!(out.len(), 4);
        // A small venue may lose up to 3 pairs at once.
        let small = registry(4);
        let mut w = ListingWatch::new(small.len());
        let three = listing(&small, &[0, 1, 2], None);
        assert_eq!(w.review(&small, Venue::Binance, &three, &mut out), Ok(()));
        let all = listing(&small, &[0, 1, 2, 3], None);
        assert!(w.review(&small, Venue::Binance, &all, &mut out).is_err());
    }
}
