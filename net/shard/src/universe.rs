//! A shard's `*` alerts (`decisions.md` §15): alerts on every pair of a venue. Each is held
//! here once and put on every book of its venue the shard owns, and on each book it takes later
//! (listed after start, listed again), so that it is decided in the book like a one-pair alert:
//! on the tick, per pair, with the per-pair cooldown. A delisting removes it from that book only.

use rampart_engine::alert::AlertSpec;
use rampart_engine::{BookId, Venue};
use rampart_state::AlertChange;

/// The `*` alerts one shard holds, sorted by id (a firing's lookup is a binary search). Bound:
/// the accounts' caps on active alerts; a command, not a tick, adds one (it allocates).
#[derive(Debug, Default)]
pub(crate) struct UniverseAlerts {
    held: Vec<(u64, Venue, AlertSpec)>,
}

/// The stored alerts a shard set starts with, each held at its stored version: those on one
/// book, and the `*` alerts with their venue.
#[derive(Clone, Debug, Default)]
pub struct StartAlerts {
    /// Alerts on one book each.
    pub books: Vec<(BookId, AlertChange)>,
    /// `*` alerts: every book of the venue.
    pub universe: Vec<(Venue, AlertChange)>,
}

impl From<Vec<(BookId, AlertSpec)>> for StartAlerts {
    /// Alerts made for a benchmark or a test, each at version 1.
    fn from(books: Vec<(BookId, AlertSpec)>) -> StartAlerts {
        let books = books.into_iter().map(|(book, spec)| (book, AlertChange::held(spec, 1))).collect();
        StartAlerts { books, universe: Vec::new() }
    }
}

impl UniverseAlerts {
    /// Holds `spec` for `venue` (replacing one of the same id).
    pub(crate) fn add(&mut self, venue: Venue, spec: AlertSpec) {
        match self.held.binary_search_by_key(&spec.id, |h| h.0) {
            Ok(i) => self.held[i] = (spec.id, venue, spec),
            Err(i) => self.held.insert(i, (spec.id, venue, spec)),
        }
    }

    /// Forgets alert `id`; true if it was held.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        match self.held.binary_search_by_key(&id, |h| h.0) {
            Ok(i) => {
                self.held.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// True when alert `id` is a `*` alert held here. Allocates nothing.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.held.binary_search_by_key(&id, |h| h.0).is_ok()
    }

    /// The `*` alerts of `venue`.
    pub(crate) fn of(&self, venue: Venue) -> impl Iterator<Item = AlertSpec> + '_ {
        self.held.iter().filter(move |h| h.1 == venue).map(|h| h.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::alert::{Condition, Move};
    use rampart_engine::Timeframe;

    fn spec(id: u64) -> AlertSpec {
        let condition = Condition::Pct { dir: Move::Up, millionths: 1_000_000, window: Timeframe::H1 };
        AlertSpec { id, condition, repeat: true, cooldown_s: 900 }
    }

    #[test]
    fn held_by_id_per_venue() {
        let mut u = UniverseAlerts::default();
        u.add(Venue::Okx, spec(9));
        u.add(Venue::Binance, spec(3));
        u.add(Venue::Binance, spec(5));
        assert!(u.contains(3) && u.contains(9) && !u.contains(4));
        assert_eq!(u.of(Venue::Binance).map(|s| s.id).collect::<Vec<_>>(), [3, 5]);
        // Added again (a reload): held once, the newer spec.
        u.add(Venue::Binance, AlertSpec { cooldown_s: 0, ..spec(5) });
        assert_eq!(u.of(Venue::Binance).map(|s| s.cooldown_s).collect::<Vec<_>>(), [900, 0]);
        assert!(u.remove(3) && !u.remove(3));
        assert_eq!(u.of(Venue::Binance).count(), 1);
        assert_eq!(u.of(Venue::Okx).count(), 1);
    }
}
