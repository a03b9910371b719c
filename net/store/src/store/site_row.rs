//! A site alert as the store holds it and is handed it (`decisions.md` §10): its condition,
//! the request that makes one, its row and a firing's record, each with its one mapping to
//! columns and back.

use super::alert_row::AlertStatus;
use super::conn::unknown;
use crate::db::{Column, Row, StoreError};
use rampart_engine::site_alert::{Direction, WallSide};
use rampart_engine::{Timeframe, Venue};
use rampart_state::board::BoardNumber;

/// The stored spelling of a wall side.
pub fn side_str(side: WallSide) -> &'static str {
    match side {
        WallSide::Bid => "bid",
        WallSide::Ask => "ask",
        WallSide::Any => "any",
    }
}

/// The side spelled `s`.
pub fn parse_side(s: &str) -> Option<WallSide> {
    [WallSide::Bid, WallSide::Ask, WallSide::Any].into_iter().find(|w| side_str(*w) == s)
}

/// The stored spelling of a direction.
pub fn direction_str(d: Direction) -> &'static str {
    match d {
        Direction::Above => "above",
        Direction::Below => "below",
    }
}

/// The direction spelled `s`.
pub fn parse_direction(s: &str) -> Option<Direction> {
    [Direction::Above, Direction::Below].into_iter().find(|d| direction_str(*d) == s)
}

/// What a site alert watches.
#[derive(Clone, Debug, PartialEq)]
pub enum SiteCondition {
    /// A wall appears.
    Density {
        /// The pair; `None`: every pair of the venue.
        symbol: Option<String>,
        /// Sides watched.
        side: WallSide,
        /// Smallest wall value, USD.
        min_usd: f64,
        /// Largest distance from the price, percent.
        max_dist_pct: f64,
        /// Youngest wall that counts, seconds.
        min_age_s: u32,
    },
    /// A board number crosses a threshold.
    Market {
        /// The number.
        number: BoardNumber,
        /// Its interval.
        interval: Timeframe,
        /// Which way.
        direction: Direction,
        /// The threshold.
        threshold: f64,
    },
}

impl SiteCondition {
    /// `density` or `market`, as stored and answered.
    pub fn kind(&self) -> &'static str {
        match self {
            SiteCondition::Density { .. } => "density",
            SiteCondition::Market { .. } => "market",
        }
    }
}

/// A create request whose fields are well-formed (the pair and the caps are checked after).
#[derive(Clone, Debug, PartialEq)]
pub struct SiteRequest {
    /// The venue.
    pub exchange: Venue,
    /// The condition.
    pub condition: SiteCondition,
    /// Fire again (density: for each new appearance; market: after crossing back).
    pub repeat: bool,
    /// Label (empty when absent).
    pub note: String,
    /// Quiet time after a firing, seconds: a firing less than this after the previous recorded
    /// one is dropped (0: none).
    pub cooldown_s: u32,
}

/// A new site alert, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSiteAlert {
    /// Owning account.
    pub account_id: i64,
    /// The request.
    pub request: SiteRequest,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
}

/// A stored site alert.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteAlertRow {
    /// Id (its own sequence, apart from the API's alerts).
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// The venue.
    pub exchange: Venue,
    /// The condition.
    pub condition: SiteCondition,
    /// Repeating.
    pub repeat: bool,
    /// Label.
    pub note: String,
    /// Active, or triggered (a non-repeating alert that fired).
    pub status: AlertStatus,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Last firing, Unix milliseconds.
    pub last_triggered_ms: Option<i64>,
    /// Firings so far.
    pub trigger_count: i64,
    /// Quiet time after a firing, seconds (0: none).
    pub cooldown_s: u32,
}

pub(super) const SITE_COLUMNS: &str =
    "id, account_id, kind, exchange, symbol, side, min_usd, max_dist_pct, min_age_s, number, \
     interval, direction, threshold, repeat, note, status, trigger_count, last_triggered_ms, created_ms, cooldown_s";

/// One firing of a site (market) alert, as the writer records it.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteFiringRecord {
    /// Alert id.
    pub alert_id: i64,
    /// When, Unix milliseconds.
    pub ts_ms: i64,
    /// The alert does not repeat: this was its only firing.
    pub last: bool,
    /// The board number's value that fired it.
    pub value: f64,
}

pub(super) fn site_row(r: &Row<'_>) -> Result<SiteAlertRow, StoreError> {
    let kind: String = r.get(2)?;
    let exchange: String = r.get(3)?;
    let exchange = Venue::ALL
        .into_iter()
        .find(|v| v.as_str() == exchange)
        .ok_or_else(|| unknown(format!("exchange '{exchange}'")))?;
    let condition = match kind.as_str() {
        "density" => density_condition(r)?,
        "market" => market_condition(r)?,
        other => return Err(unknown(format!("kind '{other}'"))),
    };
    let status: String = r.get(15)?;
    Ok(SiteAlertRow {
        id: r.get(0)?,
        account_id: r.get(1)?,
        exchange,
        condition,
        repeat: r.get(13)?,
        note: r.get(14)?,
        status: AlertStatus::parse(&status).ok_or_else(|| unknown(format!("status '{status}'")))?,
        trigger_count: r.get(16)?,
        last_triggered_ms: r.get(17)?,
        created_ms: r.get(18)?,
        cooldown_s: {
            let c: i64 = r.get(19)?;
            u32::try_from(c).map_err(|_| unknown(format!("cooldown_s {c}")))?
        },
    })
}

/// A required column of one kind: NULL is an error naming it.
fn need<T>(r: &Row<'_>, col: usize, name: &str) -> Result<T, StoreError>
where
    Option<T>: Column,
{
    r.get::<Option<T>>(col)?.ok_or_else(|| unknown(format!("{name} NULL")))
}

fn density_condition(r: &Row<'_>) -> Result<SiteCondition, StoreError> {
    let side: String = need(r, 5, "side")?;
    let min_age: i64 = need(r, 8, "min_age_s")?;
    Ok(SiteCondition::Density {
        symbol: r.get(4)?,
        side: parse_side(&side).ok_or_else(|| unknown(format!("side '{side}'")))?,
        min_usd: need(r, 6, "min_usd")?,
        max_dist_pct: need(r, 7, "max_dist_pct")?,
        min_age_s: u32::try_from(min_age).map_err(|_| unknown(format!("min_age_s {min_age}")))?,
    })
}

fn market_condition(r: &Row<'_>) -> Result<SiteCondition, StoreError> {
    let (number, interval, direction): (String, String, String) =
        (need(r, 9, "number")?, need(r, 10, "interval")?, need(r, 11, "direction")?);
    Ok(SiteCondition::Market {
        number: BoardNumber::parse(&number).ok_or_else(|| unknown(format!("number '{number}'")))?,
        interval: Timeframe::parse(&interval).ok_or_else(|| unknown(format!("interval '{interval}'")))?,
        direction: parse_direction(&direction).ok_or_else(|| unknown(format!("direction '{direction}'")))?,
        threshold: need(r, 12, "threshold")?,
    })
}
