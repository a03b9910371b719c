//! The shard's side of a perpetual's listing change while its spot pair stays (`decisions.md`
//! §17 "Listings", `Command::Perp`): its derivatives data and alerts leave the pair at a
//! delisting (the one-pair alerts reported, `ShardEvent::PerpDelisted`, for storage to remove
//! and tell their owners), and come back (the venue's `*` derivatives alerts) at a relisting or
//! when the pair gains a perpetual.

use rampart_engine::BookId;
use rampart_state::{PerpListingChange, ShardEvent};

use crate::Shard;

impl Shard {
    /// Carries out one listing change of `book`'s perpetual; nothing for a book this shard does
    /// not hold, or with `[derivatives]` off.
    pub(crate) fn perp_listing(&mut self, book: BookId, change: PerpListingChange) {
        let Some(spot) = self.market.get(book) else { return };
        let listed = !spot.delisted;
        let Some(perps) = self.perps.as_mut() else { return };
        let registry = self.shared.registry();
        let now = self.config.clock.now_ms();
        let taken = match change {
            PerpListingChange::Delisted => {
                if let Some(ids) = perps.delist_contract(book, &self.shared.slots[book.index()]) {
                    let ids = self.alerts.on_delisted(ids);
                    tracing::info!("{} {}: perpetual delisted", registry.get(book).venue, registry.get(book).symbol);
                    self.emit(ShardEvent::PerpDelisted { book, ids });
                }
                false
            }
            PerpListingChange::Relisted => perps.relist_contract(book, now),
            PerpListingChange::Added(contract) => {
                let venue = registry.get(book).venue;
                let added = perps.add_contract(book, venue, &contract, listed, now);
                if added {
                    let slot = &self.shared.slots[book.index()];
                    slot.liquidations.get_or_init(rampart_state::liq_feed::LiqFeed::new);
                }
                added
            }
        };
        let grew = match self.perps.as_mut() {
            Some(perps) if taken => self.alerts.on_perp_taken(perps, &registry, book),
            _ => false,
        };
        if grew {
            self.reserve_backlog();
        }
    }
}
