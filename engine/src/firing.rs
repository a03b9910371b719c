//! What a decided alert leaves its shard as: one firing of one alert on one trade.

use crate::fixed::Price;
use crate::level::Level;

/// One firing, as it leaves the shard.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Firing {
    /// Alert id.
    pub id: u64,
    /// Trade price that fired it.
    pub price: Price,
    /// For percent alerts, the signed move in hundredths of a percent (rounded toward zero).
    pub move_hundredths: Option<i64>,
    /// Trade time, Unix milliseconds.
    pub ts_ms: i64,
    /// True when the alert is done (not repeating) and leaves the shard.
    pub last: bool,
    /// For level alerts, the level approached, touched or broken, as held when the trade came.
    pub level: Option<Level>,
}
