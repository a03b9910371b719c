//! The rolling windows of derivatives data (`decisions.md` §17 "Windows"): seven lengths from 1m
//! to 1w, liquidations over all of them and open interest over all but 1m, and their API text.

use crate::candle::{Timeframe, MINUTE_MS};

/// The rolling windows of §17: liquidations over all seven, OI over all but 1m.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PerpInterval {
    /// 1 minute (liquidations only).
    M1 = 0,
    /// 5 minutes.
    M5 = 1,
    /// 15 minutes.
    M15 = 2,
    /// 1 hour.
    H1 = 3,
    /// 4 hours.
    H4 = 4,
    /// 1 day.
    D1 = 5,
    /// 1 week.
    W1 = 6,
}

/// Windows a `sum` or `oi` alert can watch: [`PerpInterval::index`] is a window's place.
pub const WINDOWS: usize = PerpInterval::ALL.len();

impl PerpInterval {
    /// Every window, shortest first; [`PerpInterval::index`] is the position here.
    pub const ALL: [PerpInterval; 7] = [
        PerpInterval::M1,
        PerpInterval::M5,
        PerpInterval::M15,
        PerpInterval::H1,
        PerpInterval::H4,
        PerpInterval::D1,
        PerpInterval::W1,
    ];
    /// The windows OI is kept over.
    pub const OI: [PerpInterval; 6] =
        [PerpInterval::M5, PerpInterval::M15, PerpInterval::H1, PerpInterval::H4, PerpInterval::D1, PerpInterval::W1];

    /// The candle timeframe of the same length (its text is this window's); `None` for 1m.
    pub fn timeframe(self) -> Option<Timeframe> {
        match self {
            PerpInterval::M1 => None,
            PerpInterval::M5 => Some(Timeframe::M5),
            PerpInterval::M15 => Some(Timeframe::M15),
            PerpInterval::H1 => Some(Timeframe::H1),
            PerpInterval::H4 => Some(Timeframe::H4),
            PerpInterval::D1 => Some(Timeframe::D1),
            PerpInterval::W1 => Some(Timeframe::W1),
        }
    }

    /// The window of a metrics `interval` (§9's intervals are all derivatives windows).
    pub fn of(timeframe: Timeframe) -> PerpInterval {
        // `OI` lists the timeframes' windows in `Timeframe::ALL` order.
        PerpInterval::OI[timeframe.index()]
    }

    /// The window's length, ms.
    pub fn duration_ms(self) -> i64 {
        self.timeframe().map_or(MINUTE_MS, Timeframe::duration_ms)
    }

    /// The API identifier (`1m`, then [`Timeframe::as_str`]).
    pub fn as_str(self) -> &'static str {
        self.timeframe().map_or("1m", Timeframe::as_str)
    }

    /// Parses an API identifier.
    pub fn parse(s: &str) -> Option<PerpInterval> {
        PerpInterval::ALL.into_iter().find(|i| i.as_str() == s)
    }

    /// Dense index 0..7.
    pub fn index(self) -> usize {
        self as usize
    }

    /// True when OI is kept over this window.
    pub fn has_oi(self) -> bool {
        self != PerpInterval::M1
    }
}
