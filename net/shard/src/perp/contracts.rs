//! A pair's perpetual delisted, listed again or gained while its spot pair stays listed
//! (`decisions.md` §17 "Listings"), as the live feed's listing refresh finds it
//! (`Command::Perp`). Commands, not ticks: each may allocate.
//!
//! - Delisted: the perpetual is no longer watched or served (its slot emptied: every read then
//!   answers "no perpetual contract"), and its derivatives alerts leave the book (the caller
//!   keeps the `*` ones on the venue and reports the one-pair ones, which storage removes).
//! - Listed again: a fresh book watched from then (its windows start empty, as after a start).
//! - Gained: a book made for it (the shard's perpetuals grow by one), watched from then.
//!
//! The live feed's own part (a connection for a gained perpetual, the Binance OI polls) is left
//! in [`FeedChange`]s for the feed's loop to take ([`ShardPerps::take_feed_changes`]).

use rampart_engine::perp_book::{PerpBook, PerpSpec};
use rampart_engine::{BookId, Venue};
use rampart_state::{BookSlot, PerpContract};

use super::{Held, ShardPerps};

/// What the live feed's loop must do after a listing change of a perpetual.
#[derive(Clone, Debug, PartialEq)]
pub enum FeedChange {
    /// A perpetual the shard did not watch: connect for it (and poll its OI on Binance).
    Added(BookId, PerpContract),
    /// Delisted: its OI is no longer polled.
    Delisted(BookId),
    /// Listed again: its OI is polled again.
    Relisted(BookId),
}

impl ShardPerps {
    /// `book`'s perpetual is delisted while its spot pair stays: not watched from now, `slot`
    /// emptied, its derivatives alerts taken off. Returns their ids (`*` alerts among them);
    /// `None` when it had no listed perpetual here.
    pub fn delist_contract(&mut self, book: BookId, slot: &BookSlot) -> Option<Vec<u64>> {
        let h = self.held.get_mut(book.index())?.as_mut().filter(|h| h.contract_listed)?;
        h.contract_listed = false;
        let ids = h.stop(self.sim.as_mut(), slot);
        self.feed_change(FeedChange::Delisted(book));
        Some(ids)
    }

    /// `book`'s perpetual, delisted before, is listed again: a fresh book watched from `now_ms`.
    /// False when it was not delisted.
    pub fn relist_contract(&mut self, book: BookId, now_ms: i64) -> bool {
        let poll_ms = self.binance_oi_poll_ms;
        let Some(h) = self.held.get_mut(book.index()).and_then(Option::as_mut).filter(|h| !h.contract_listed) else {
            return false;
        };
        h.renew(book, poll_ms, now_ms);
        h.contract_listed = true;
        if let (Some(sim), Some(perp)) = (self.sim.as_mut(), h.perp) {
            let _ = sim.set_listed(perp, h.listed);
        }
        self.feed_change(FeedChange::Relisted(book));
        true
    }

    /// `book` (of `venue`, its spot pair `listed` or not) gains perpetual `contract`, watched
    /// from `now_ms`. True when it is watched anew: added, or (it had this perpetual, delisted)
    /// listed again; false when it is watched already or the contract is refused (logged).
    pub fn add_contract(
        &mut self,
        book: BookId,
        venue: Venue,
        contract: &PerpContract,
        listed: bool,
        now_ms: i64,
    ) -> bool {
        if self.held.get(book.index()).is_some_and(Option::is_some) {
            return self.relist_contract(book, now_ms);
        }
        let spec = PerpSpec {
            venue,
            contract: &contract.contract,
            multiplier: contract.multiplier,
            binance_oi_poll_ms: self.binance_oi_poll_ms,
        };
        let made = match PerpBook::new(spec, now_ms) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("perpetual {} not kept: {e}", contract.contract);
                return false;
            }
        };
        if self.held.len() <= book.index() {
            self.held.resize_with(book.index() + 1, || None);
        }
        self.held[book.index()] =
            Some(Held { perp: None, venue, book: made, listed, contract_listed: true, alerts: None });
        self.count += 1;
        self.feed_change(FeedChange::Added(book, contract.clone()));
        true
    }

    /// The live feed's part of the listing changes since the last call, oldest first.
    pub fn take_feed_changes(&mut self) -> Vec<FeedChange> {
        std::mem::take(&mut self.feed_changes)
    }

    /// Leaves `change` for the live feed's loop (the simulated feed has none: nothing is kept).
    fn feed_change(&mut self, change: FeedChange) {
        if self.sim.is_none() {
            self.feed_changes.push(change);
        }
    }
}
