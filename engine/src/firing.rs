//! What a decided alert leaves its shard as: one firing of one alert on one trade.

use crate::fixed::Price;
use crate::level::Level;
use crate::wall::Wall;
use crate::wall_life::Gone;

/// The wall a wall alert fired on.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct WallHit {
    /// The wall as the scan saw it (`appeared`) or as the last scan that saw it did.
    pub wall: Wall,
    /// Its USD value then; `None` when the quote asset has no USD price.
    pub usd: Option<f64>,
    /// `pulled` or `filled`: why it is gone; `None` for `appeared`. How long it stood is the
    /// wall's age (as the last scan that saw it had it).
    pub gone: Option<Gone>,
}

/// One firing, as it leaves the shard.
#[derive(Clone, Copy, PartialEq, Debug)]
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
    /// What a level or wall alert fired on.
    pub detail: Detail,
}

/// What a structure alert fired on: one of the two at most, so that a firing, which waits in the
/// shard's bounded event queue, stays small.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Detail {
    /// A price or pct alert: the trade is the whole story.
    None,
    /// The level approached, touched or broken, as held when the trade came.
    Level(Level),
    /// The wall.
    Wall(WallHit),
}

impl Firing {
    /// The level a level alert fired on.
    pub fn level(&self) -> Option<Level> {
        match self.detail {
            Detail::Level(l) => Some(l),
            _ => None,
        }
    }

    /// The wall a wall alert fired on.
    pub fn wall(&self) -> Option<WallHit> {
        match self.detail {
            Detail::Wall(w) => Some(w),
            _ => None,
        }
    }
}
