//! The density alerts a shard evaluates (`decisions.md` §10): taken from the published
//! [`SiteAlertSet`] whenever its version moves, and run against each wall scan of a book this
//! shard owns. An alert on one pair lives on the shard owning it; an alert on every pair of a
//! venue lives on every shard, each watching its own books (a non-repeating one may so fire on
//! two shards at once: the store records the first and skips the other).
//!
//! Bound: the alerts held are at most the active density alerts (each account's plan caps
//! them); each remembers the walls it fired for that still stand.

use rampart_engine::site_alert::{DensityAlert, DensityFiring};
use rampart_engine::wall::{self, Wall};
use rampart_engine::{BookId, Venue};

use rampart_state::site_alerts::SiteAlertSet;

struct Watched {
    venue: Venue,
    book: Option<BookId>,
    alert: DensityAlert,
}

/// One shard's density alerts.
pub(crate) struct DensityAlerts {
    version: i64,
    alerts: Vec<Watched>,
    out: Vec<DensityFiring>,
}

impl DensityAlerts {
    /// None yet.
    pub(crate) fn new() -> DensityAlerts {
        DensityAlerts { version: 0, alerts: Vec::new(), out: Vec::new() }
    }

    /// True when there is nothing to evaluate.
    pub(crate) fn is_empty(&self) -> bool {
        self.alerts.is_empty()
    }

    /// Takes `set` if it is newer than what is held: alerts still in it keep what they fired
    /// for (unless their condition changed), new ones start fresh, the rest are dropped.
    /// `owns` says whether a book is this shard's.
    pub(crate) fn sync(&mut self, set: &SiteAlertSet, owns: impl Fn(BookId) -> bool) {
        if set.version == self.version {
            return;
        }
        let mut old = std::mem::take(&mut self.alerts);
        for e in set.density.iter().filter(|e| e.book.is_none_or(&owns)) {
            let kept = old.iter().position(|w| w.alert.spec() == &e.spec && w.book == e.book && w.venue == e.venue);
            let alert = match kept {
                Some(i) => old.swap_remove(i).alert,
                None => DensityAlert::new(e.spec),
            };
            self.alerts.push(Watched { venue: e.venue, book: e.book, alert });
        }
        self.version = set.version;
    }

    /// Runs one scan of `book` (on `venue`; its walls and the quote asset's USD price) through
    /// every alert watching it and returns the firings.
    pub(crate) fn on_scan(
        &mut self,
        venue: Venue,
        book: BookId,
        walls: &[Wall],
        quote_usd: Option<f64>,
        now_ms: i64,
    ) -> &[DensityFiring] {
        self.out.clear();
        let valued = walls.iter().map(|w| (*w, quote_usd.map(|q| wall::usd_value(w.qty, w.price, q))));
        for w in self.alerts.iter_mut().filter(|w| w.venue == venue && w.book.is_none_or(|b| b == book)) {
            w.alert.on_scan(book, valued.clone(), now_ms, &mut self.out);
        }
        &self.out
    }

    /// The `i`th firing of the last scan.
    pub(crate) fn fired(&self, i: usize) -> DensityFiring {
        self.out[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::site_alert::{DensitySpec, WallSide};
    use rampart_engine::{Price, Qty, Side};
    use rampart_state::site_alerts::DensityEntry;

    fn entry(id: u64, book: Option<u32>) -> DensityEntry {
        let spec =
            DensitySpec { id, side: WallSide::Any, min_usd: 100.0, max_dist_pct: 5.0, min_age_ms: 0, repeat: true };
        DensityEntry { venue: Venue::Binance, book: book.map(BookId), spec }
    }

    /// A wall standing since t = 1 000 ms, seen at `now`.
    fn wall(now: i64) -> [Wall; 1] {
        let (price, qty) = (Price(100 * 100_000_000), Qty(1_000 * 100_000_000));
        [Wall { side: Side::Bid, price, qty, ratio: 20.0, dist_pct: -1.0, age_ms: now - 1_000 }]
    }

    #[test]
    fn alerts_follow_the_published_set_and_keep_what_they_fired_for() {
        let mut d = DensityAlerts::new();
        let owns = |b: BookId| b.0 != 9;
        let set = SiteAlertSet {
            version: 2,
            density: vec![entry(1, Some(3)), entry(2, None), entry(3, Some(9))],
            ..Default::default()
        };
        d.sync(&set, owns);
        assert_eq!(d.alerts.len(), 2, "the alert on a book another shard owns is not held");
        let walls = wall(1_000);
        let fired: Vec<u64> =
            d.on_scan(Venue::Binance, BookId(3), &walls, Some(1.0), 1_000).iter().map(|f| f.id).collect();
        assert_eq!(fired, [1, 2], "the pair's alert and the venue-wide one");
        assert!(d.on_scan(Venue::Bybit, BookId(3), &walls, Some(1.0), 1_000).is_empty(), "another venue");
        assert_eq!(d.on_scan(Venue::Binance, BookId(4), &walls, Some(1.0), 1_000).len(), 1, "venue-wide only");
        // A new version without alert 1: alert 2 keeps its memory (no second firing), 4 is new.
        let set = SiteAlertSet { version: 3, density: vec![entry(2, None), entry(4, Some(3))], ..Default::default() };
        d.sync(&set, owns);
        let fired: Vec<u64> =
            d.on_scan(Venue::Binance, BookId(3), &wall(2_000), Some(1.0), 2_000).iter().map(|f| f.id).collect();
        assert_eq!(fired, [4]);
        let set = SiteAlertSet { version: 4, density: vec![entry(5, Some(3))], ..Default::default() };
        d.sync(&set, owns);
        assert!(d.on_scan(Venue::Binance, BookId(3), &wall(3_000), None, 3_000).is_empty(), "no USD price: no value");
    }
}
