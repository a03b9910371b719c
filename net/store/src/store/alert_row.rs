//! An alert as the store holds it and is handed it: [`AlertRow`] with its one mapping of a
//! condition to columns and back, and [`NewAlert`].

use super::conn::{unknown, UnknownStoredValue};
use crate::db::{Row, StoreError};
use rampart_engine::alert::{AlertSpec, Condition, Cross, Move};
use rampart_engine::level_alert::{LevelCondition, LevelDirection, LevelEvent, TIMEFRAMES_ALL};
use rampart_engine::perp_alert::{
    FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection, PerpCondition,
};
use rampart_engine::perp_book::PerpInterval;
use rampart_engine::site_alert::WallSide;
use rampart_engine::wall_alert::{WallCondition, WallEvent};
use rampart_engine::{Price, Timeframe, Venue};
use rampart_state::{AlertChange, AlertState};

/// An alert row (the API's Alert resource, stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertRow {
    /// Alert id.
    pub id: i64,
    /// Owning account.
    pub account_id: i64,
    /// Venue.
    pub exchange: Venue,
    /// Pair symbol.
    pub symbol: String,
    /// What fires it (type, direction, level or threshold and window).
    pub condition: Condition,
    /// Repeating.
    pub repeat: bool,
    /// Client label.
    pub note: String,
    /// Webhook target.
    pub webhook_url: Option<String>,
    /// Lifecycle status.
    pub status: AlertStatus,
    /// Price at creation (fixed-point).
    pub created_price: i64,
    /// Creation time.
    pub created_ms: i64,
    /// Last firing time.
    pub last_triggered_ms: Option<i64>,
    /// Firings so far.
    pub trigger_count: i64,
    /// When it ends by itself, Unix milliseconds; `None`: never.
    pub expires_ms: Option<i64>,
    /// The least time between two firings (per pair), seconds; 0: none.
    pub cooldown_s: u32,
    /// Paused (not evaluated, fires nothing), and by whom; `None`: running.
    pub paused: Option<PausedBy>,
    /// Firings after which it ends (`status: triggered`); `None`: no limit.
    pub max_fires: Option<u32>,
    /// The template of its text for chat services, Telegram and the inbox (`decisions.md` §16).
    pub message: Option<String>,
    /// The webhook's body: the event JSON, or a chat service's.
    pub webhook_format: WebhookFormat,
    /// The version of the row: 1 at creation, one more at every write of it (`decisions.md`
    /// §16, "One order"); a change reaches the shards with it ([`AlertRow::change`]).
    pub version: u64,
    /// When it was deleted (by its owner, its expiry or its pair's delisting); `None`: kept.
    pub deleted_ms: Option<i64>,
}

impl AlertRow {
    /// The alert as a shard holds it.
    pub fn spec(&self) -> Option<AlertSpec> {
        let id = u64::try_from(self.id).ok()?;
        Some(AlertSpec { id, condition: self.condition, repeat: self.repeat, cooldown_s: self.cooldown_s })
    }

    /// True when the shards evaluate it: active, not paused, not deleted.
    pub fn running(&self) -> bool {
        self.status == AlertStatus::Active && self.paused.is_none() && self.deleted_ms.is_none()
    }

    /// What its shards must hold after a write that turned `before` into this row: its
    /// [`AlertRow::change`], `Resumed` when the write made a stopped alert run again.
    pub fn change_after(&self, before: &AlertRow) -> AlertChange {
        self.change(!before.running() && self.running())
    }

    /// What its shards must hold after the write that made this row (`decisions.md` §16, "One
    /// order"): held as its spec when it runs (`Resumed` when that write ended a pause, so a price
    /// alert past its level waits for the far side), else gone; with the row's version.
    pub fn change(&self, resumed: bool) -> AlertChange {
        let id = u64::try_from(self.id).unwrap_or_default();
        match self.spec().filter(|_| self.running()) {
            Some(spec) if resumed => AlertChange { id, version: self.version, state: AlertState::Resumed(spec) },
            Some(spec) => AlertChange::held(spec, self.version),
            None => AlertChange::gone(id, self.version),
        }
    }
}

/// An alert's lifecycle status, stored and answered as `active` or `triggered`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertStatus {
    /// Evaluated on every trade.
    Active,
    /// Fired (not repeating); no longer evaluated.
    Triggered,
}

impl AlertStatus {
    /// The stored and answered spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertStatus::Active => "active",
            AlertStatus::Triggered => "triggered",
        }
    }

    /// The status stored as `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<AlertStatus> {
        [AlertStatus::Active, AlertStatus::Triggered].into_iter().find(|x| x.as_str() == s)
    }
}

/// Who paused an alert (`decisions.md` §16), stored and answered as `user` or `flood_guard`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausedBy {
    /// Its owner, with `PATCH {"paused": true}`.
    User,
    /// The flood guard (`crate::flood_guard`): more than 15 firings in 3 minutes.
    FloodGuard,
}

impl PausedBy {
    /// The stored and answered spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PausedBy::User => "user",
            PausedBy::FloodGuard => "flood_guard",
        }
    }

    /// The cause stored as `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<PausedBy> {
        [PausedBy::User, PausedBy::FloodGuard].into_iter().find(|x| x.as_str() == s)
    }
}

/// The body of an alert's webhook (`webhook_format`, `decisions.md` §16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WebhookFormat {
    /// The event body of the interface spec, byte for byte.
    #[default]
    Json,
    /// Discord's incoming webhook: `{"content": <text>}`.
    Discord,
    /// Slack's incoming webhook: `{"text": <text>}`.
    Slack,
}

impl WebhookFormat {
    /// Every format, in the order the API lists them.
    pub const ALL: [WebhookFormat; 3] = [WebhookFormat::Json, WebhookFormat::Discord, WebhookFormat::Slack];

    /// The stored and answered spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookFormat::Json => "json",
            WebhookFormat::Discord => "discord",
            WebhookFormat::Slack => "slack",
        }
    }

    /// The format spelled `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<WebhookFormat> {
        WebhookFormat::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// The columns a condition is stored in: `kind`, `direction`, `price`, `pct_millionths`,
/// `window`, and a level alert's `event`, `within_millionths`, `min_strength`, `timeframes`
/// (a bit set of `rampart_engine::level::Origin::bit`); `None` where the type has no such field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConditionColumns {
    /// `price`, `pct` or `level`.
    pub kind: &'static str,
    /// The type's direction.
    pub direction: &'static str,
    /// A price alert's level, fixed-point.
    pub price: Option<i64>,
    /// A pct alert's threshold, millionths of a percent.
    pub pct: Option<i64>,
    /// A pct alert's window.
    pub window: Option<&'static str>,
    /// A level alert's event.
    pub event: Option<&'static str>,
    /// A level `approach` alert's band, millionths of a percent.
    pub within: Option<i64>,
    /// A level alert's least strength.
    pub min_strength: Option<i64>,
    /// A level alert's timeframes, as bits.
    pub timeframes: Option<i64>,
    /// A wall alert's least USD value, cents.
    pub min_usd_cents: Option<i64>,
    /// A wall alert's least ratio, hundredths (0: the detection threshold).
    pub min_ratio_hundredths: Option<i64>,
    /// A wall alert's largest distance, hundredths of a percent.
    pub max_dist_hundredths: Option<i64>,
    /// A wall alert's least age, seconds.
    pub min_age_s: Option<i64>,
    /// A `funding` alert's level, millionths of a percent per 8 h (signed). Stored in the
    /// `pct_millionths` column, which no `funding` alert uses otherwise; see [`ConditionColumns::stored_pct`].
    pub funding: Option<i64>,
}

impl ConditionColumns {
    /// What the `pct_millionths` column holds: a pct or `oi` alert's threshold, or a `funding`
    /// alert's level (a type has one or the other, never both).
    pub fn stored_pct(&self) -> Option<i64> {
        self.pct.or(self.funding)
    }
}

/// The one mapping of a condition to its columns.
pub fn condition_columns(c: &Condition) -> ConditionColumns {
    let base = ConditionColumns { kind: c.kind(), direction: c.direction(), ..ConditionColumns::default() };
    match *c {
        Condition::Price { level, .. } => ConditionColumns { price: Some(level.0), ..base },
        Condition::Pct { millionths, window, .. } => {
            ConditionColumns { pct: Some(i64::from(millionths)), window: Some(window.as_str()), ..base }
        }
        Condition::Level(l) => ConditionColumns {
            event: Some(l.event.as_str()),
            within: (l.event == LevelEvent::Approach).then_some(i64::from(l.within_millionths)),
            min_strength: Some(i64::from(l.min_strength)),
            timeframes: Some(i64::from(l.timeframes)),
            ..base
        },
        Condition::Wall(w) => ConditionColumns {
            event: Some(w.event.as_str()),
            min_usd_cents: Some(i64::try_from(w.min_usd_cents).unwrap_or(i64::MAX)),
            min_ratio_hundredths: Some(i64::from(w.min_ratio_hundredths)),
            max_dist_hundredths: Some(i64::from(w.max_dist_hundredths)),
            min_age_s: Some(i64::from(w.min_age_s)),
            ..base
        },
        Condition::Perp(p) => perp_columns(&p, base),
    }
}

/// A derivatives alert's columns (`decisions.md` §17): `event` (liquidations), `window` (`sum`,
/// `oi`), `pct_millionths` (`oi`'s pct; `funding`'s level, signed), `min_usd_cents`
/// (liquidations; `oi`, whole dollars).
fn perp_columns(p: &PerpCondition, base: ConditionColumns) -> ConditionColumns {
    let cents = p.min_usd_cents().map(|c| i64::try_from(c).unwrap_or(i64::MAX));
    let base =
        ConditionColumns { event: p.event(), window: p.window().map(|w| w.as_str()), min_usd_cents: cents, ..base };
    match *p {
        PerpCondition::Order(_) | PerpCondition::Sum { .. } => base,
        PerpCondition::Oi { change, .. } => ConditionColumns { pct: Some(change.pct_micro), ..base },
        PerpCondition::Funding(f) => ConditionColumns { funding: Some(f.pct_micro), ..base },
    }
}

/// The one mapping back of a derivatives alert's columns; `None` when `kind` is not one.
fn perp_from_columns(c: &StoredCondition) -> Option<Result<Condition, UnknownStoredValue>> {
    let bad = |what: &str| UnknownStoredValue(format!("{what} of a {} alert", c.kind));
    let direction = c.direction.as_str();
    let window = || c.window.as_deref().and_then(PerpInterval::parse).ok_or_else(|| bad("window"));
    let cents = || c.min_usd_cents.and_then(|v| u64::try_from(v).ok()).ok_or_else(|| bad("min_usd_cents"));
    let condition = match c.kind.as_str() {
        "liquidations" => (|| {
            let direction = LiqDirection::parse(direction).ok_or_else(|| bad("direction"))?;
            let min_usd_cents = cents()?;
            match c.event.as_deref() {
                Some("order") => Ok(PerpCondition::Order(LiqOrder { direction, min_usd_cents })),
                Some("sum") => Ok(PerpCondition::Sum { window: window()?, sum: LiqSum { direction, min_usd_cents } }),
                _ => Err(bad("event")),
            }
        })(),
        "oi" => (|| {
            let direction = OiDirection::parse(direction).ok_or_else(|| bad("direction"))?;
            let pct_micro = c.pct.filter(|p| *p > 0).ok_or_else(|| bad("pct_millionths"))?;
            let min_usd = cents().and_then(|c| if c % 100 == 0 { Ok(c / 100) } else { Err(bad("min_usd_cents")) })?;
            Ok(PerpCondition::Oi { window: window()?, change: OiChange { direction, pct_micro, min_usd } })
        })(),
        "funding" => (|| {
            let direction = FundingDirection::parse(direction).ok_or_else(|| bad("direction"))?;
            let pct_micro = c.pct.ok_or_else(|| bad("pct_millionths"))?;
            Ok(PerpCondition::Funding(FundingLevel { direction, pct_micro }))
        })(),
        _ => return None,
    };
    Some(condition.map(Condition::Perp))
}

/// The columns as read back (owned text).
struct StoredCondition {
    kind: String,
    direction: String,
    price: Option<i64>,
    pct: Option<i64>,
    window: Option<String>,
    event: Option<String>,
    within: Option<i64>,
    min_strength: Option<i64>,
    timeframes: Option<i64>,
    min_usd_cents: Option<i64>,
    min_ratio_hundredths: Option<i64>,
    max_dist_hundredths: Option<i64>,
    min_age_s: Option<i64>,
}

/// The one mapping back: every column must hold a value this build writes; anything else is an
/// error naming the column, never a default.
fn condition_from_columns(c: &StoredCondition) -> Result<Condition, UnknownStoredValue> {
    let bad = |what: String| UnknownStoredValue(what);
    let direction = c.direction.as_str();
    match c.kind.as_str() {
        "price" => Ok(Condition::Price {
            cross: Cross::parse(direction).ok_or_else(|| bad(format!("direction '{direction}' of a price alert")))?,
            level: Price(c.price.filter(|p| *p > 0).ok_or_else(|| bad("price of a price alert".into()))?),
        }),
        "pct" => Ok(Condition::Pct {
            dir: Move::parse(direction).ok_or_else(|| bad(format!("direction '{direction}' of a pct alert")))?,
            millionths: c
                .pct
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| bad("pct_millionths of a pct alert".into()))?,
            window: c
                .window
                .as_deref()
                .and_then(Timeframe::parse)
                .ok_or_else(|| bad("window of a pct alert".into()))?,
        }),
        "level" => {
            let event = c.event.as_deref().unwrap_or("");
            let event = LevelEvent::parse(event).ok_or_else(|| bad(format!("event '{event}' of a level alert")))?;
            let direction = LevelDirection::parse(direction)
                .ok_or_else(|| bad(format!("direction '{direction}' of a level alert")))?;
            let within = match event {
                LevelEvent::Approach => {
                    c.within.and_then(|w| u32::try_from(w).ok()).ok_or_else(|| bad("within_millionths".into()))?
                }
                _ => 0,
            };
            let min_strength =
                c.min_strength.and_then(|s| u32::try_from(s).ok()).ok_or_else(|| bad("min_strength".into()))?;
            let timeframes = c
                .timeframes
                .and_then(|t| u16::try_from(t).ok())
                .filter(|t| *t != 0 && *t & !TIMEFRAMES_ALL == 0)
                .ok_or_else(|| bad("timeframes of a level alert".into()))?;
            Ok(Condition::Level(LevelCondition {
                event,
                direction,
                within_millionths: within,
                min_strength,
                timeframes,
            }))
        }
        "wall" => {
            let event = c.event.as_deref().unwrap_or("");
            let event = WallEvent::parse(event).ok_or_else(|| bad(format!("event '{event}' of a wall alert")))?;
            let side =
                WallSide::parse(direction).ok_or_else(|| bad(format!("direction '{direction}' of a wall alert")))?;
            let whole = |v: Option<i64>, what: &str| -> Result<u32, UnknownStoredValue> {
                v.and_then(|v| u32::try_from(v).ok()).ok_or_else(|| bad(format!("{what} of a wall alert")))
            };
            Ok(Condition::Wall(WallCondition {
                event,
                side,
                min_usd_cents: c
                    .min_usd_cents
                    .and_then(|v| u64::try_from(v).ok())
                    .ok_or_else(|| bad("min_usd_cents of a wall alert".into()))?,
                min_ratio_hundredths: whole(c.min_ratio_hundredths, "min_ratio_hundredths")?,
                max_dist_hundredths: whole(c.max_dist_hundredths, "max_dist_hundredths")?,
                min_age_s: whole(c.min_age_s, "min_age_s")?,
            }))
        }
        other => perp_from_columns(c).unwrap_or_else(|| Err(bad(format!("kind '{other}'")))),
    }
}

/// A new alert, validated by the front.
#[derive(Clone, Debug)]
pub struct NewAlert {
    /// Owning account.
    pub account_id: i64,
    /// Venue.
    pub exchange: Venue,
    /// Pair symbol.
    pub symbol: String,
    /// What fires it.
    pub condition: Condition,
    /// Repeating.
    pub repeat: bool,
    /// Label.
    pub note: String,
    /// Webhook target.
    pub webhook_url: Option<String>,
    /// Price at creation.
    pub created_price: i64,
    /// Creation time.
    pub created_ms: i64,
    /// When it ends by itself, Unix milliseconds (`expires_at`); `None`: never.
    pub expires_ms: Option<i64>,
    /// The least time between two firings (per pair), seconds (`cooldown_s`); 0: none.
    pub cooldown_s: u32,
    /// Firings after which it ends (`max_fires`); `None`: no limit.
    pub max_fires: Option<u32>,
    /// Its text's template (`message`).
    pub message: Option<String>,
    /// Its webhook's body (`webhook_format`).
    pub webhook_format: WebhookFormat,
}

/// What `PATCH /v1/alerts/{id}` changes (`decisions.md` §16); `None`: left as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlertChanges {
    /// A new note.
    pub note: Option<String>,
    /// A new webhook target; `Some(None)` removes it.
    pub webhook_url: Option<Option<String>>,
    /// A new end, Unix milliseconds; `Some(None)` removes it.
    pub expires_ms: Option<Option<i64>>,
    /// A new cooldown, seconds.
    pub cooldown_s: Option<u32>,
    /// Paused (`Some(true)`) or resumed (`Some(false)`, which also forgets the flood guard's
    /// count).
    pub paused: Option<bool>,
    /// A new limit of firings; `Some(None)` removes it.
    pub max_fires: Option<Option<u32>>,
    /// A new text template; `Some(None)` removes it.
    pub message: Option<Option<String>>,
    /// A new webhook body format.
    pub webhook_format: Option<WebhookFormat>,
}

/// What an alert create's `Idempotency-Key` was used for before ([`Store::idempotent_alert`](crate::store::Store::idempotent_alert)).
#[derive(Clone, Debug, PartialEq)]
pub enum Idempotent {
    /// Not used (or not within 24 h): create.
    New,
    /// Used with the same body: the alert it made, as it is now.
    Same(Box<AlertRow>),
    /// Used with another body.
    Other,
    /// Used with the same body for this alert, deleted since.
    Deleted(i64),
}

/// Which alerts a listing shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusFilter {
    /// Only active.
    Active,
    /// Only triggered.
    Triggered,
    /// Both.
    All,
}

pub(super) const ALERT_COLUMNS: &str =
    "id, account_id, exchange, symbol, kind, direction, price, pct_millionths, \"window\", repeat, \
     note, webhook_url, status, created_price, created_ms, last_triggered_ms, trigger_count, expires_ms, \
     event, within_millionths, min_strength, timeframes, min_usd_cents, min_ratio_hundredths, \
     max_dist_hundredths, min_age_s, cooldown_s, paused, max_fires, message, webhook_format, version, deleted_ms";

/// How many columns [`ALERT_COLUMNS`] names (a statement that returns more reads them after).
pub(super) const ALERT_COLUMNS_COUNT: usize = 33;

pub(super) fn alert_row(r: &Row<'_>) -> Result<AlertRow, StoreError> {
    let exchange: String = r.get(2)?;
    let stored = StoredCondition {
        kind: r.get(4)?,
        direction: r.get(5)?,
        price: r.get(6)?,
        pct: r.get(7)?,
        window: r.get(8)?,
        event: r.get(18)?,
        within: r.get(19)?,
        min_strength: r.get(20)?,
        timeframes: r.get(21)?,
        min_usd_cents: r.get(22)?,
        min_ratio_hundredths: r.get(23)?,
        max_dist_hundredths: r.get(24)?,
        min_age_s: r.get(25)?,
    };
    let condition = condition_from_columns(&stored).map_err(|e| unknown(e.0))?;
    let status: String = r.get(12)?;
    Ok(AlertRow {
        id: r.get(0)?,
        account_id: r.get(1)?,
        exchange: Venue::ALL
            .into_iter()
            .find(|v| v.as_str() == exchange)
            .ok_or_else(|| unknown(format!("exchange '{exchange}'")))?,
        symbol: r.get(3)?,
        condition,
        repeat: r.get(9)?,
        note: r.get(10)?,
        webhook_url: r.get(11)?,
        status: AlertStatus::parse(&status).ok_or_else(|| unknown(format!("status '{status}'")))?,
        created_price: r.get(13)?,
        created_ms: r.get(14)?,
        last_triggered_ms: r.get(15)?,
        trigger_count: r.get(16)?,
        expires_ms: r.get(17)?,
        cooldown_s: {
            let c: i64 = r.get(26)?;
            u32::try_from(c).map_err(|_| unknown(format!("cooldown_s {c}")))?
        },
        paused: match r.get::<Option<String>>(27)? {
            None => None,
            Some(p) => Some(PausedBy::parse(&p).ok_or_else(|| unknown(format!("paused '{p}'")))?),
        },
        max_fires: match r.get::<Option<i64>>(28)? {
            None => None,
            Some(n) => Some(u32::try_from(n).map_err(|_| unknown(format!("max_fires {n}")))?),
        },
        message: r.get(29)?,
        webhook_format: {
            let f: String = r.get(30)?;
            WebhookFormat::parse(&f).ok_or_else(|| unknown(format!("webhook_format '{f}'")))?
        },
        version: {
            let v: i64 = r.get(31)?;
            u64::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| unknown(format!("version {v}")))?
        },
        deleted_ms: r.get(32)?,
    })
}
