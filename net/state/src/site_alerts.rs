//! The active site alerts as the board thread (market alerts, at each build) evaluates them:
//! published whole in [`super::Shared::site_alerts`]. (The site's density alerts are wall alerts
//! since `decisions.md` §15, held by the shards like every API alert.)

use rampart_engine::site_alert::MarketSpec;
use rampart_engine::{Timeframe, Venue};

use super::board::BoardNumber;

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
    /// Market alerts.
    pub market: Vec<MarketEntry>,
}
