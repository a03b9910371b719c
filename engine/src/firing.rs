//! What a decided alert leaves its shard as: one firing of one alert on one trade.

use crate::fixed::Price;
use crate::level::Level;
use crate::perp_alert::LiqDirection;
use crate::perp_interval::PerpInterval;
use crate::perp_liquidation::Liquidation;
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
    /// What a derivatives alert fired on (`decisions.md` §17, "Firing body").
    Perp(PerpTrigger),
}

/// The numbers of a derivatives alert's firing, as its body gives them (`decisions.md` §17):
/// taken from the pair's perpetual on the shard when it fires.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum PerpTrigger {
    /// `liquidations`, event `order`: the message's largest liquidation of the alert's side,
    /// and how many of that message's qualified.
    Order {
        /// The liquidation.
        liquidation: Liquidation,
        /// How many of the message's liquidations of the alert's side were worth its `min_usd`.
        count: u32,
    },
    /// `liquidations`, event `sum`: the window's sum of the alert's side after the update.
    Sum {
        /// The alert's side (`Any`: long + short).
        side: LiqDirection,
        /// The sum, USD.
        sum_usd: f64,
        /// Liquidations in it.
        count: u32,
        /// The window.
        window: PerpInterval,
        /// The start of the window's first slot, Unix ms.
        from_ms: i64,
        /// The pair's newest liquidation (`None` only if the book kept none).
        last: Option<Liquidation>,
    },
    /// `oi`: open interest now and its change over the window.
    Oi {
        /// Base units.
        base: f64,
        /// USD (`None` when not known).
        usd: Option<f64>,
        /// `oiChange` over the window, percent.
        change_pct: f64,
        /// The window.
        window: PerpInterval,
        /// OI (base units) the change is from.
        from_base: f64,
        /// Its time, Unix ms.
        from_ms: i64,
    },
    /// `funding`: the pair's funding after the update.
    Funding {
        /// Percent per `interval_h`.
        rate: f64,
        /// Percent per 8 h.
        rate8h: f64,
        /// The funding interval, hours.
        interval_h: u32,
        /// The next settlement, Unix ms.
        next_ms: i64,
    },
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

    /// What a derivatives alert fired on.
    pub fn perp(&self) -> Option<PerpTrigger> {
        match self.detail {
            Detail::Perp(p) => Some(p),
            _ => None,
        }
    }
}
