//! A pair's perpetual as its owning shard publishes it (decisions §17), for the fronts' reads:
//! `GET /v1/perp…` answers from it without asking the shard (the liquidations lists read the
//! pair's ring, `crate::liq_feed`).
//!
//! The shard replaces it whole once a second with the pair's metrics (`rampart_shard`), so an
//! answer is at most that old; staleness (`stale`) is as of the snapshot's `ts_ms`. A book
//! without a perpetual publishes none (`BookSlot::perp` is empty): "no perpetual contract".

use rampart_engine::perp_book::{Completeness, FundingNow, Liquidation, OiNow};

/// One pair's perpetual, as of `ts_ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct PerpSnapshot {
    /// The venue's name of the contract (`BTCUSDT`, `BTC-USDT-SWAP`, `1000PEPEUSDT`).
    pub contract: String,
    /// Units of the spot base in one unit of the contract's base (1 without a prefix).
    pub multiplier: u32,
    /// How complete the venue's liquidations are (§17 "Completeness of liquidations").
    pub completeness: Completeness,
    /// Mark price per unit of the spot base; `None` until known.
    pub mark: Option<f64>,
    /// Open interest now; `None` until known.
    pub oi: Option<OiNow>,
    /// Funding now; `None` until known.
    pub funding: Option<FundingNow>,
    /// The newest liquidation by the venue's time, however old (`liquidations.last`).
    pub last: Option<Liquidation>,
    /// When the shard took it, Unix ms.
    pub ts_ms: i64,
}
