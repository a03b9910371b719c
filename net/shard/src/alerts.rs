//! The alerts a shard holds, brought to the state storage gave them: each change
//! ([`AlertChange`]) applied to the shard's books only when it is newer than the last applied
//! for its alert ([`AlertVersions`]), one-pair alerts on their book, `*` alerts on every book of
//! their venue the shard owns (and on each it takes later). A command, not a tick: it may
//! allocate (an alert book's heaps grow to hold a new alert).

use rampart_engine::market::Market;
use rampart_engine::{BookId, Registry, Venue};
use rampart_state::{AlertChange, AlertState, Command};

use super::universe::{StartAlerts, UniverseAlerts};
use super::versions::AlertVersions;

/// A shard's alerts: the versions applied and the `*` alerts held.
#[derive(Debug, Default)]
pub struct ShardAlerts {
    versions: AlertVersions,
    universe: UniverseAlerts,
}

impl ShardAlerts {
    /// The alerts a shard starts with, put on `market`'s books: those of `start` on the books it
    /// owns, and every `*` alert on each owned book of its venue.
    pub fn starting(market: &mut Market, registry: &Registry, start: &StartAlerts) -> ShardAlerts {
        let mut alerts = ShardAlerts::default();
        for &(book, change) in &start.books {
            if market.get(book).is_some() {
                alerts.on_book(market, book, change);
            }
        }
        for &(venue, change) in &start.universe {
            alerts.on_universe(market, registry, venue, change);
        }
        alerts
    }

    /// Carries out `cmd` when it is an alert's change (`Some`: true when books now hold more
    /// alerts than before, so the event backlog needs more room); `None` for any other command.
    pub fn apply(&mut self, market: &mut Market, registry: &Registry, cmd: &Command) -> Option<bool> {
        match *cmd {
            Command::Alert { book, change } => Some(self.on_book(market, book, change)),
            Command::Universe { venue, change } => Some(self.on_universe(market, registry, venue, change)),
            _ => None,
        }
    }

    /// Applies `change` of a one-pair alert on `book` when it is the newest; true when the book
    /// now holds more alerts than before (the shard's event backlog needs more room).
    pub fn on_book(&mut self, market: &mut Market, book: BookId, change: AlertChange) -> bool {
        if !self.versions.admit(change.id, change.version, change.spec().is_some()) {
            return false;
        }
        match change.state {
            AlertState::Held(spec) => market.insert_alert(book, spec),
            AlertState::Resumed(spec) => market.resume_alert(book, spec),
            AlertState::Gone => {
                market.remove_alert(book, change.id);
                false
            }
        }
    }

    /// Applies `change` of a `*` alert of `venue` when it is the newest: held, it is put on (or
    /// retuned on) every owned, listed book of the venue; gone, taken off every book. True when
    /// books now hold more alerts than before.
    pub fn on_universe(&mut self, market: &mut Market, registry: &Registry, venue: Venue, change: AlertChange) -> bool {
        if !self.versions.admit(change.id, change.version, change.spec().is_some()) {
            return false;
        }
        let Some(spec) = change.spec() else {
            if self.universe.remove(change.id) {
                let books: Vec<BookId> =
                    market.books().iter().filter(|b| registry.get(b.id).venue == venue).map(|b| b.id).collect();
                for book in books {
                    market.remove_alert(book, change.id);
                }
            }
            return false;
        };
        self.universe.add(venue, spec);
        let books: Vec<BookId> =
            market.books().iter().filter(|b| !b.delisted && registry.get(b.id).venue == venue).map(|b| b.id).collect();
        // `*` alerts are percent, level and wall alerts: they resume as created (§16).
        let mut grew = false;
        for book in books {
            grew |= market.insert_alert(book, spec);
        }
        grew
    }

    /// A book taken after start or listed again: its venue's `*` alerts go on it. True when it
    /// now holds alerts.
    pub fn on_book_taken(&self, market: &mut Market, registry: &Registry, book: BookId) -> bool {
        let venue = registry.get(book).venue;
        let mut grew = false;
        for spec in self.universe.of(venue) {
            grew |= market.insert_alert(book, spec);
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
