//! The perpetuals' listing refresh (`decisions.md` §17 "Listings"): at each spot listing refresh
//! of a venue the REST thread reads its perpetual listing too, matches it onto the served pairs
//! and [`PerpWatch`] decides, without I/O, what changed: a pair whose perpetual is gone while the
//! spot pair stays, one listed again, one that gained a perpetual. [`PerpRefresh`] hands each
//! change to the hook (the shards act on it: `Command::Perp`).
//!
//! The listing is untrusted like the spot one and judged by the same rules
//! (`listing::ListingWatch`): a perpetual is delisted only once [`DELIST_CONFIRMATIONS`]
//! refreshes in a row found it gone, and a listing that is empty or drops more than
//! [`DELIST_SHARE_MAX_PERCENT`] % of the served perpetuals (and more than [`DELIST_BATCH_MIN`])
//! at once is a venue fault: nothing changes. A listing that could not be read changes nothing.

use std::collections::{BTreeMap, HashSet};

use rampart_engine::{BookId, Registry, Venue};

use super::listing::{ListingFault, DELIST_BATCH_MIN, DELIST_CONFIRMATIONS, DELIST_SHARE_MAX_PERCENT};
use super::perp_listing::{match_spot, PerpListing, PerpPair};
use super::RestError;

/// A change a refresh makes to the served perpetuals.
#[derive(Clone, Debug, PartialEq)]
pub enum PerpChange {
    /// The venue no longer lists the pair's perpetual (confirmed), the spot pair served on.
    Delisted(BookId),
    /// The venue lists a delisted perpetual again.
    Relisted(BookId),
    /// The pair gained a perpetual it had not had since start.
    Added(BookId, PerpPair),
}

/// One served perpetual as the refreshes saw it.
#[derive(Debug)]
struct Seen {
    venue: Venue,
    /// Refreshes in a row that missed it.
    misses: u8,
    delisted: bool,
}

/// The served perpetuals, by book, and how the refreshes saw each.
#[derive(Debug, Default)]
pub struct PerpWatch {
    seen: BTreeMap<BookId, Seen>,
}

impl PerpWatch {
    /// A watch over the perpetuals served from start: `served` (a book and its contract), of
    /// `registry`'s books.
    pub fn new(registry: &Registry, served: &[(BookId, PerpPair)]) -> PerpWatch {
        let seen = served.iter().map(|(b, _)| (*b, Seen { venue: registry.get(*b).venue, misses: 0, delisted: false }));
        PerpWatch { seen: seen.collect() }
    }

    /// Judges `venue`'s fresh perpetuals (`fresh`: matched onto its pairs, by book) against the
    /// served ones; pushes the changes onto `out`, or refuses the whole refresh as a venue fault.
    pub fn review(
        &mut self,
        venue: Venue,
        fresh: &BTreeMap<BookId, PerpPair>,
        out: &mut Vec<PerpChange>,
    ) -> Result<(), ListingFault> {
        let mine = || self.seen.iter().filter(|(_, s)| s.venue == venue && !s.delisted);
        let served = mine().count();
        let dropped = mine().filter(|(b, _)| !fresh.contains_key(b)).count();
        let allowed = DELIST_BATCH_MIN.max(served * DELIST_SHARE_MAX_PERCENT / 100);
        if served > 0 && (fresh.is_empty() || dropped > allowed) {
            return Err(ListingFault { dropped, served });
        }
        for (book, s) in self.seen.iter_mut().filter(|(_, s)| s.venue == venue) {
            match (s.delisted, fresh.contains_key(book)) {
                (false, false) => {
                    s.misses = s.misses.saturating_add(1);
                    if s.misses >= DELIST_CONFIRMATIONS {
                        s.delisted = true;
                        out.push(PerpChange::Delisted(*book));
                    }
                }
                (false, true) => s.misses = 0,
                (true, true) => {
                    (s.delisted, s.misses) = (false, 0);
                    out.push(PerpChange::Relisted(*book));
                }
                (true, false) => {}
            }
        }
        for (book, pair) in fresh {
            if !self.seen.contains_key(book) {
                self.seen.insert(*book, Seen { venue, misses: 0, delisted: false });
                out.push(PerpChange::Added(*book, pair.clone()));
            }
        }
        Ok(())
    }
}

/// Called with each change a perpetual listing refresh makes.
pub type OnPerpListing = Box<dyn Fn(PerpChange) + Send>;

/// The REST thread's part: the watch and the hook that acts on its changes.
pub struct PerpRefresh {
    /// The served perpetuals.
    pub watch: PerpWatch,
    /// Acts on each change.
    pub on_change: OnPerpListing,
}

impl PerpRefresh {
    /// Takes `venue`'s perpetual listing as the refresh read it (`result`), matched onto the
    /// pairs `registry` serves now: each change to the hook, logged.
    pub fn refreshed(&mut self, venue: Venue, registry: &Registry, result: Result<PerpListing, RestError>) {
        let listing = match result {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("{}: perpetual listing refresh failed: {e}", venue.as_str());
                return;
            }
        };
        let spot: HashSet<&str> =
            registry.venue_books(venue).iter().map(|b| registry.get(*b).symbol.as_str()).collect();
        let (pairs, _) = match_spot(&listing, &spot);
        let fresh: BTreeMap<BookId, PerpPair> =
            pairs.into_iter().filter_map(|p| Some((registry.find(venue, &p.symbol)?, p))).collect();
        let mut changes = Vec::new();
        if let Err(fault) = self.watch.review(venue, &fresh, &mut changes) {
            tracing::warn!("{}: perpetual listing refresh refused: {fault}", venue.as_str());
            return;
        }
        for change in changes {
            let (what, book) = match &change {
                PerpChange::Delisted(b) => ("delisted", b),
                PerpChange::Relisted(b) => ("listed again", b),
                PerpChange::Added(b, _) => ("added", b),
            };
            tracing::info!("{}: the perpetual of {} {what}", venue.as_str(), registry.get(*book).symbol);
            (self.on_change)(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::instrument::{Instrument, Status};
    use rampart_engine::{Price, Qty};

    fn registry() -> Registry {
        let ins = |venue, k: u32| Instrument {
            venue,
            symbol: format!("P{k}USDT"),
            base: format!("P{k}"),
            quote: "USDT".into(),
            tick: Price(1),
            lot: Qty(1),
            status: Status::Trading,
        };
        let mut list: Vec<Instrument> = (0..40).map(|k| ins(Venue::Binance, k)).collect();
        list.push(ins(Venue::Okx, 0));
        Registry::new(list).expect("registry")
    }

    fn pair(r: &Registry, b: BookId) -> PerpPair {
        let symbol = r.get(b).symbol.clone();
        PerpPair { contract: symbol.clone(), symbol, multiplier: 1, contract_size: 1.0, interval_h: None }
    }

    fn fresh(r: &Registry, books: impl Iterator<Item = u32>) -> BTreeMap<BookId, PerpPair> {
        books.map(|b| (BookId(b), pair(r, BookId(b)))).collect()
    }

    /// Delisted after two refreshes in a row miss it, listed again when seen again, gained when
    /// new; another venue's perpetuals untouched; an empty or gutted listing changes nothing.
    #[test]
    fn perpetuals_are_delisted_on_confirmation_listed_again_and_gained() {
        let r = registry();
        let start: Vec<(BookId, PerpPair)> = (0..30).map(|b| (BookId(b), pair(&r, BookId(b)))).collect();
        let okx = r.find(Venue::Okx, "P0USDT").expect("okx book");
        let mut w = PerpWatch::new(&r, &[start.clone(), vec![(okx, pair(&r, okx))]].concat());
        let mut out = Vec::new();
        let without_3 = fresh(&r, (0..30).filter(|b| *b != 3));
        assert_eq!(w.review(Venue::Binance, &without_3, &mut out), Ok(()));
        assert!(out.is_empty(), "one miss is not a delisting: {out:?}");
        assert_eq!(w.review(Venue::Binance, &without_3, &mut out), Ok(()));
        assert_eq!(out, [PerpChange::Delisted(BookId(3))]);
        out.clear();
        let with_new = fresh(&r, (0..31).filter(|b| *b != 3));
        assert_eq!(w.review(Venue::Binance, &with_new, &mut out), Ok(()));
        assert_eq!(out, [PerpChange::Added(BookId(30), pair(&r, BookId(30)))]);
        out.clear();
        assert_eq!(w.review(Venue::Binance, &fresh(&r, 0..31), &mut out), Ok(()));
        assert_eq!(out, [PerpChange::Relisted(BookId(3))]);
        out.clear();
        assert!(w.review(Venue::Binance, &BTreeMap::new(), &mut out).is_err(), "empty: a fault");
        assert!(w.review(Venue::Binance, &fresh(&r, 0..20), &mut out).is_err(), "a third gone at once: a fault");
        assert!(out.is_empty());
        assert_eq!(w.review(Venue::Okx, &fresh(&r, std::iter::once(okx.0)), &mut out), Ok(()));
        assert!(out.is_empty(), "the other venue's perpetual stays: {out:?}");
    }
}
