//! The ring of a pair's newest [`RECENT_MAX`] liquidations that [`crate::perp_book::PerpBook`]
//! keeps, in the venue's time order; inline, so it never allocates.

use crate::perp_window::PositionSide;

/// Liquidations kept per pair for the lists and the `liquidations` channel's snapshot. At the
/// bound the oldest is dropped.
pub const RECENT_MAX: usize = 128;

/// One liquidation (§17's Liquidation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Liquidation {
    /// The side of the position liquidated.
    pub side: PositionSide,
    /// Price per unit of base.
    pub price: f64,
    /// Quantity, base units.
    pub qty: f64,
    /// The venue's time, Unix ms.
    pub time_ms: i64,
}

impl Liquidation {
    /// Value in USD: `price × qty` (computed, not held: 32 bytes a liquidation, not 40).
    pub fn usd(&self) -> f64 {
        self.price * self.qty
    }
}

const NO_LIQUIDATION: Liquidation = Liquidation { side: PositionSide::Long, price: 0.0, qty: 0.0, time_ms: i64::MIN };

/// The newest [`RECENT_MAX`] liquidations, in the venue's time order.
#[derive(Clone, Debug)]
pub(crate) struct Recent {
    items: [Liquidation; RECENT_MAX],
    /// Physical index of the oldest.
    head: usize,
    len: usize,
}

impl Recent {
    /// An empty ring.
    pub(crate) fn new() -> Recent {
        Recent { items: [NO_LIQUIDATION; RECENT_MAX], head: 0, len: 0 }
    }

    fn at(&self, i: usize) -> &Liquidation {
        &self.items[(self.head + i) % RECENT_MAX]
    }

    fn at_mut(&mut self, i: usize) -> &mut Liquidation {
        &mut self.items[(self.head + i) % RECENT_MAX]
    }

    /// Inserts `l` after every one held at or before its time; false when the ring is full and
    /// `l` is older than all of them.
    pub(crate) fn insert(&mut self, l: Liquidation) -> bool {
        let mut at = self.len;
        while at > 0 && self.at(at - 1).time_ms > l.time_ms {
            at -= 1;
        }
        if self.len == RECENT_MAX {
            if at == 0 {
                return false;
            }
            self.head = (self.head + 1) % RECENT_MAX;
            self.len -= 1;
            at -= 1;
        }
        let mut i = self.len;
        while i > at {
            *self.at_mut(i) = *self.at(i - 1);
            i -= 1;
        }
        *self.at_mut(at) = l;
        self.len += 1;
        true
    }

    /// Newest first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &Liquidation> + '_ {
        (0..self.len).rev().map(|i| self.at(i))
    }
}
