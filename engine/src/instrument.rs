//! The instrument registry: every (venue, pair) book rampart follows, fixed at start-up.
//!
//! Each book gets a dense [`BookId`]; shards, price tables and snapshots index by it. Pairs
//! (base, quote) get a dense pair index too, so all venues of one pair can live on one shard.

use std::collections::HashMap;

use crate::fixed::{Price, Qty};
use crate::venue::Venue;

/// Dense identifier of one (venue, pair) book.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct BookId(pub u32);

impl BookId {
    /// As an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Listing status of an instrument on its venue.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Status {
    /// Trading normally.
    Trading,
    /// Listed but not trading (halt, break, pre-listing).
    Halted,
    /// No longer listed.
    Delisted,
}

impl Status {
    /// API identifier.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Trading => "trading",
            Status::Halted => "halted",
            Status::Delisted => "delisted",
        }
    }
}

/// One instrument on one venue.
#[derive(Clone, Debug)]
pub struct Instrument {
    /// Venue.
    pub venue: Venue,
    /// Normalised symbol, uppercase `BASEQUOTE`.
    pub symbol: String,
    /// Base asset, uppercase.
    pub base: String,
    /// Quote asset, uppercase.
    pub quote: String,
    /// Price increment.
    pub tick: Price,
    /// Quantity increment.
    pub lot: Qty,
    /// Listing status.
    pub status: Status,
}

/// Why a registry could not be built.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RegistryError {
    /// The same (venue, symbol) twice.
    Duplicate(Venue, String),
    /// A symbol that is not uppercase `BASEQUOTE` of its own base and quote.
    BadSymbol(String),
    /// More books than a `BookId` can name.
    TooMany,
}

/// Every book, dense ids, lookups by (venue, symbol).
#[derive(Clone, Debug, Default)]
pub struct Registry {
    instruments: Vec<Instrument>,
    pair_of: Vec<u32>,
    pairs: Vec<(String, String)>,
    by_venue: [Vec<BookId>; Venue::COUNT],
    index: HashMap<(Venue, String), BookId>,
}

impl Registry {
    /// Builds the registry; ids follow the order of `instruments`.
    pub fn new(instruments: Vec<Instrument>) -> Result<Registry, RegistryError> {
        if instruments.len() >= u32::MAX as usize {
            return Err(RegistryError::TooMany);
        }
        let mut r = Registry::default();
        let mut pair_index: HashMap<(String, String), u32> = HashMap::new();
        for (i, ins) in instruments.iter().enumerate() {
            let expected = format!("{}{}", ins.base, ins.quote);
            if ins.symbol != expected || ins.symbol.is_empty() || ins.symbol != ins.symbol.to_ascii_uppercase() {
                return Err(RegistryError::BadSymbol(ins.symbol.clone()));
            }
            let id = BookId(i as u32);
            if r.index.insert((ins.venue, ins.symbol.clone()), id).is_some() {
                return Err(RegistryError::Duplicate(ins.venue, ins.symbol.clone()));
            }
            let key = (ins.base.clone(), ins.quote.clone());
            let next = r.pairs.len() as u32;
            let pair = *pair_index.entry(key.clone()).or_insert_with(|| {
                r.pairs.push(key);
                next
            });
            r.pair_of.push(pair);
            r.by_venue[ins.venue.index()].push(id);
        }
        r.instruments = instruments;
        for list in &mut r.by_venue {
            let ins = &r.instruments;
            list.sort_by(|a, b| ins[a.index()].symbol.cmp(&ins[b.index()].symbol));
        }
        Ok(r)
    }

    /// Number of books.
    pub fn len(&self) -> usize {
        self.instruments.len()
    }

    /// True when there are no books.
    pub fn is_empty(&self) -> bool {
        self.instruments.is_empty()
    }

    /// Number of distinct (base, quote) pairs over all venues.
    pub fn pair_count(&self) -> usize {
        self.pairs.len()
    }

    /// The instrument of a book.
    pub fn get(&self, id: BookId) -> &Instrument {
        &self.instruments[id.index()]
    }

    /// The dense pair index of a book (equal for the same pair on every venue).
    pub fn pair_of(&self, id: BookId) -> u32 {
        self.pair_of[id.index()]
    }

    /// Books of one venue, sorted by symbol.
    pub fn venue_books(&self, venue: Venue) -> &[BookId] {
        &self.by_venue[venue.index()]
    }

    /// Finds a book by venue and symbol, case-insensitively.
    pub fn find(&self, venue: Venue, symbol: &str) -> Option<BookId> {
        if symbol.len() > 64 {
            return None;
        }
        self.index.get(&(venue, symbol.to_ascii_uppercase())).copied()
    }

    /// Every book id.
    pub fn ids(&self) -> impl Iterator<Item = BookId> {
        (0..self.instruments.len() as u32).map(BookId)
    }

    /// This registry with `more` instruments after its own: every existing id, pair index and
    /// venue list stays valid (ids are dense and follow the order of addition). For pairs a
    /// venue lists after start.
    pub fn with_added(&self, more: Vec<Instrument>) -> Result<Registry, RegistryError> {
        let mut all = Vec::with_capacity(self.instruments.len() + more.len());
        all.extend_from_slice(&self.instruments);
        all.extend(more);
        Registry::new(all)
    }

    /// Sets the listing status of a book.
    pub fn set_status(&mut self, id: BookId, status: Status) {
        self.instruments[id.index()].status = status;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(venue: Venue, base: &str, quote: &str) -> Instrument {
        Instrument {
            venue,
            symbol: format!("{base}{quote}"),
            base: base.into(),
            quote: quote.into(),
            tick: Price(1),
            lot: Qty(1),
            status: Status::Trading,
        }
    }

    #[test]
    fn ids_pairs_and_lookup() {
        let r = Registry::new(vec![
            ins(Venue::Binance, "ETH", "USDT"),
            ins(Venue::Binance, "BTC", "USDT"),
            ins(Venue::Okx, "BTC", "USDT"),
        ])
        .expect("registry");
        assert_eq!(r.len(), 3);
        assert_eq!(r.pair_count(), 2);
        assert_eq!(r.find(Venue::Binance, "btcusdt"), Some(BookId(1)));
        assert_eq!(r.find(Venue::Bybit, "BTCUSDT"), None);
        assert_eq!(r.pair_of(BookId(1)), r.pair_of(BookId(2)));
        let names: Vec<_> = r.venue_books(Venue::Binance).iter().map(|&b| r.get(b).symbol.as_str()).collect();
        assert_eq!(names, ["BTCUSDT", "ETHUSDT"]);
    }

    #[test]
    fn refuses_duplicates_and_bad_symbols() {
        let dup = Registry::new(vec![ins(Venue::Okx, "A", "B"), ins(Venue::Okx, "A", "B")]);
        assert!(matches!(dup, Err(RegistryError::Duplicate(Venue::Okx, _))));
        let mut bad = ins(Venue::Okx, "A", "B");
        bad.symbol = "A-B".into();
        assert!(matches!(Registry::new(vec![bad]), Err(RegistryError::BadSymbol(_))));
    }

    #[test]
    fn added_instruments_keep_every_existing_id() {
        let r = Registry::new(vec![ins(Venue::Binance, "ETH", "USDT"), ins(Venue::Okx, "BTC", "USDT")]).expect("r");
        let grown =
            r.with_added(vec![ins(Venue::Binance, "BTC", "USDT"), ins(Venue::Bybit, "SOL", "USDT")]).expect("grown");
        assert_eq!(grown.len(), 4);
        for id in r.ids() {
            assert_eq!(grown.get(id).symbol, r.get(id).symbol);
            assert_eq!(grown.pair_of(id), r.pair_of(id));
        }
        assert_eq!(grown.find(Venue::Binance, "BTCUSDT"), Some(BookId(2)));
        assert_eq!(grown.pair_of(BookId(2)), grown.pair_of(BookId(1)), "BTCUSDT on two venues is one pair");
        let names: Vec<_> = grown.venue_books(Venue::Binance).iter().map(|&b| grown.get(b).symbol.as_str()).collect();
        assert_eq!(names, ["BTCUSDT", "ETHUSDT"], "venue lists stay sorted");
        assert!(matches!(r.with_added(vec![ins(Venue::Okx, "BTC", "USDT")]), Err(RegistryError::Duplicate(..))));
    }
}
