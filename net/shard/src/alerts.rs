//! The alerts a shard holds, brought to the state storage gave them: each change
//! ([`AlertChange`]) applied to the shard's books only when it is newer than the last applied
//! for its alert ([`AlertVersions`]), one-pair alerts on their book, `*` alerts on every book of
//! their venue the shard owns (and on each it takes later). A command, not a tick: it may
//! allocate (an alert book's heaps grow to hold a new alert).
//!
//! Derivatives alerts (`decisions.md` §17) go to the book's perpetual ([`ShardPerps`]) rather
//! than its trade alerts; a shard without perpetuals (the live feed, for now) holds them nowhere,
//! and the API refuses them there (no pair of it has a perpetual). The one-pair ones a shard
//! starts with wait in [`ShardAlerts::attach_perps`]'s list until its perpetuals exist, and
//! those of a book without one until it gains one ([`ShardAlerts::on_perp_taken`]).

use rampart_engine::alert::{AlertSpec, Condition};
use rampart_engine::market::Market;
use rampart_engine::{BookId, Registry, Venue};
use rampart_state::{AlertChange, AlertState, Command};

use super::perp::ShardPerps;
use super::universe::{StartAlerts, UniverseAlerts};
use super::versions::AlertVersions;

/// A shard's alerts: the versions applied and the `*` alerts held.
#[derive(Debug, Default)]
pub struct ShardAlerts {
    versions: AlertVersions,
    universe: UniverseAlerts,
    /// One-pair derivatives alerts waiting for their book's perpetual: taken before the shard's
    /// perpetuals were made (at start), or for a book without one (its venue's perpetual listing
    /// failed at start); put on it when the book gains it ([`ShardAlerts::on_perp_taken`]). At
    /// most the one-pair derivatives alerts storage holds for this shard's books.
    perp_waiting: Vec<(BookId, AlertSpec)>,
}

fn is_perp(spec: &AlertSpec) -> bool {
    matches!(spec.condition, Condition::Perp(_))
}

impl ShardAlerts {
    /// The alerts a shard starts with, put on `market`'s books: those of `start` on the books it
    /// owns, and every `*` alert on each owned book of its venue.
    pub fn starting(market: &mut Market, registry: &Registry, start: &StartAlerts) -> ShardAlerts {
        let mut alerts = ShardAlerts::default();
        for &(book, change) in &start.books {
            if market.get(book).is_some() {
                alerts.on_book(market, None, book, change);
            }
        }
        for &(venue, change) in &start.universe {
            alerts.on_universe(market, None, registry, venue, change);
        }
        alerts
    }

    /// Puts the derivatives alerts the shard started with on `perps`, made after
    /// [`ShardAlerts::starting`]: the one-pair ones on their book, the `*` ones on every listed
    /// book of their venue.
    pub fn attach_perps(&mut self, market: &Market, registry: &Registry, perps: &mut ShardPerps) {
        for (book, spec) in std::mem::take(&mut self.perp_waiting) {
            self.on_perp_alert(perps, book, spec);
        }
        for venue in Venue::ALL {
            let specs: Vec<AlertSpec> = self.universe.of(venue).filter(is_perp).collect();
            for spec in specs {
                for book in listed_books(market, registry, venue) {
                    perps.insert_alert(book, spec);
                }
            }
        }
    }

    /// Carries out `cmd` when it is an alert's change (`Some`: true when books now hold more
    /// alerts than before, so the event backlog needs more room); `None` for any other command.
    pub fn apply(
        &mut self,
        market: &mut Market,
        perps: Option<&mut ShardPerps>,
        registry: &Registry,
        cmd: &Command,
    ) -> Option<bool> {
        match *cmd {
            Command::Alert { book, change } => Some(self.on_book(market, perps, book, change)),
            Command::Universe { venue, change } => Some(self.on_universe(market, perps, registry, venue, change)),
            _ => None,
        }
    }

    /// Applies `change` of a one-pair alert on `book` when it is the newest; true when the book
    /// now holds more alerts than before (the shard's event backlog needs more room).
    pub fn on_book(
        &mut self,
        market: &mut Market,
        perps: Option<&mut ShardPerps>,
        book: BookId,
        change: AlertChange,
    ) -> bool {
        if !self.versions.admit(change.id, change.version, change.spec().is_some()) {
            return false;
        }
        match (change.state, perps) {
            // A derivatives alert resumes as made (§17: armed as if made now).
            (AlertState::Held(spec) | AlertState::Resumed(spec), Some(perps)) if is_perp(&spec) => {
                self.on_perp_alert(perps, book, spec)
            }
            (AlertState::Held(spec) | AlertState::Resumed(spec), None) if is_perp(&spec) => {
                self.wait_for_perp(book, spec);
                false
            }
            (AlertState::Held(spec), _) => market.insert_alert(book, spec),
            (AlertState::Resumed(spec), _) => market.resume_alert(book, spec),
            (AlertState::Gone, perps) => {
                market.remove_alert(book, change.id);
                if let Some(perps) = perps {
                    perps.remove_alert(book, change.id);
                }
                self.perp_waiting.retain(|(_, s)| s.id != change.id);
                false
            }
        }
    }

    /// Puts one-pair derivatives alert `spec` on `book`'s perpetual, or, when the book has none
    /// (or its pair is delisted), keeps it waiting for one. True when the book now holds it.
    fn on_perp_alert(&mut self, perps: &mut ShardPerps, book: BookId, spec: AlertSpec) -> bool {
        if !perps.has_live(book) {
            self.wait_for_perp(book, spec);
            return false;
        }
        self.perp_waiting.retain(|(_, s)| s.id != spec.id);
        perps.insert_alert(book, spec)
    }

    /// Keeps one-pair derivatives alert `spec` (its newest version only) until `book` has a
    /// perpetual.
    fn wait_for_perp(&mut self, book: BookId, spec: AlertSpec) {
        self.perp_waiting.retain(|(_, s)| s.id != spec.id);
        self.perp_waiting.push((book, spec));
    }

    /// Applies `change` of a `*` alert of `venue` when it is the newest: held, it is put on (or
    /// retuned on) every owned, listed book of the venue; gone, taken off every book. True when
    /// books now hold more alerts than before.
    pub fn on_universe(
        &mut self,
        market: &mut Market,
        mut perps: Option<&mut ShardPerps>,
        registry: &Registry,
        venue: Venue,
        change: AlertChange,
    ) -> bool {
        if !self.versions.admit(change.id, change.version, change.spec().is_some()) {
            return false;
        }
        let Some(spec) = change.spec() else {
            if self.universe.remove(change.id) {
                let books: Vec<BookId> =
                    market.books().iter().filter(|b| registry.get(b.id).venue == venue).map(|b| b.id).collect();
                for book in books {
                    market.remove_alert(book, change.id);
                    if let Some(perps) = perps.as_deref_mut() {
                        perps.remove_alert(book, change.id);
                    }
                }
            }
            return false;
        };
        self.universe.add(venue, spec);
        // `*` alerts are percent, level, wall and derivatives alerts: they resume as created (§16).
        let mut grew = false;
        for book in listed_books(market, registry, venue) {
            grew |= match perps.as_deref_mut() {
                Some(perps) if is_perp(&spec) => perps.insert_alert(book, spec),
                // Without perpetuals (yet): `attach_perps` puts it on them.
                None if is_perp(&spec) => false,
                _ => market.insert_alert(book, spec),
            };
        }
        grew
    }

    /// A book taken after start or listed again: its venue's `*` alerts go on it. True when it
    /// now holds alerts.
    pub fn on_book_taken(
        &self,
        market: &mut Market,
        mut perps: Option<&mut ShardPerps>,
        registry: &Registry,
        book: BookId,
    ) -> bool {
        let venue = registry.get(book).venue;
        let mut grew = false;
        for spec in self.universe.of(venue) {
            grew |= match perps.as_deref_mut() {
                Some(perps) if is_perp(&spec) => perps.insert_alert(book, spec),
                None if is_perp(&spec) => false,
                _ => market.insert_alert(book, spec),
            };
        }
        grew
    }

    /// A book's perpetual gained or listed again while its spot pair stays: its venue's `*`
    /// derivatives alerts go on it, and the one-pair ones that waited for it. True when it now
    /// holds alerts.
    pub fn on_perp_taken(&mut self, perps: &mut ShardPerps, registry: &Registry, book: BookId) -> bool {
        let venue = registry.get(book).venue;
        let mut grew = false;
        for spec in self.universe.of(venue).filter(is_perp) {
            grew |= perps.insert_alert(book, spec);
        }
        let (now, later) = std::mem::take(&mut self.perp_waiting).into_iter().partition(|(b, _)| *b == book);
        self.perp_waiting = later;
        for (_, spec) in now {
            grew |= perps.insert_alert(book, spec);
        }
        grew
    }

    /// A book's alerts `ids` left it with its delisting: its one-pair alerts are gone from the
    /// shard (remembered so, [`AlertVersions::left`]); its `*` alerts stay on the venue's other
    /// books. Returns the one-pair ones (the writer removes them from storage).
    pub fn on_delisted(&mut self, mut ids: Vec<u64>) -> Vec<u64> {
        ids.retain(|&id| !self.universe.contains(id));
        for &id in &ids {
            self.versions.left(id);
        }
        ids
    }

    /// True when alert `id` is a `*` alert held here. Allocates nothing.
    pub fn is_universe(&self, id: u64) -> bool {
        self.universe.contains(id)
    }

    /// The version last applied for alert `id`, and whether it left the alert held.
    pub fn version(&self, id: u64) -> Option<(u64, bool)> {
        self.versions.last(id)
    }
}

/// The books of `venue` `market` owns and that are listed, in the market's order.
fn listed_books(market: &Market, registry: &Registry, venue: Venue) -> Vec<BookId> {
    market.books().iter().filter(|b| !b.delisted && registry.get(b.id).venue == venue).map(|b| b.id).collect()
}
