//! One liquidation as a pair's perpetual holds it (§17's Liquidation), and how many of a pair's
//! newest are held for the lists and the `liquidations` channel ([`RECENT_MAX`]: the ring the
//! owning shard writes, `rampart_state::liq_feed`; the book itself keeps only the newest of each
//! side, [`crate::perp_book::PerpBook::last_liquidation`]).

use crate::perp_window::PositionSide;

/// Liquidations held per pair for the lists and the `liquidations` channel (the newest taken). At
/// the bound the oldest taken is dropped.
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
