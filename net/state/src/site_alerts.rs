//! The active site alerts as the shards (density, at each wall scan) and the board thread
//! (market, at each build) evaluate them: published whole in [`super::Shared::site_alerts`].

use rampart_engine::site_alert::{DensitySpec, MarketSpec};
use rampart_engine::{BookId, Timeframe, Venue};

use super::board::BoardNumber;

/// A density alert as the shards evaluate it.
#[derive(Clone, Debug, PartialEq)]
pub struct DensityEntry {
    /// The venue.
    pub venue: Venue,
    /// The book; `None`: every book of the venue.
    pub book: Option<BookId>,
    /// The condition (id included).
    pub spec: DensitySpec,
}

/// A market alert as the board thread evaluates it.
#[derive(Clone, Debug, PartialEq)]
pub struct MarketEntry {
    /// The venue.
    pub venue: Venue,
    /// The number.
    pub number: BoardNumber,
    /// Its interval.
    pub interval: Timeframe,
    /// The condition (id included).
    pub spec: MarketSpec,
}

/// Every active site alert, by id; published whole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteAlertSet {
    /// The store's `site_alerts_version` it was loaded at (0: nothing loaded yet).
    pub version: i64,
    /// Density alerts.
    pub density: Vec<DensityEntry>,
    /// Market alerts.
    pub market: Vec<MarketEntry>,
    /// Active density alerts on a pair the venue does not list now: kept in storage, not
    /// evaluated until it does.
    pub unlisted: usize,
}
