//! An alert's condition on the wire (part of an alert command, `super::alert_command`): a tag
//! per type (0 price, 1 pct, 2 level, 3 wall, 4 to 7 the derivatives alerts of `decisions.md`
//! §17), then the type's fields.

use rampart_engine::alert::{Condition, Cross, Move};
use rampart_engine::level_alert::{LevelCondition, LevelDirection, LevelEvent};
use rampart_engine::perp_alert::{
    FundingDirection, FundingLevel, LiqDirection, LiqOrder, LiqSum, OiChange, OiDirection, PerpCondition,
};
use rampart_engine::perp_book::PerpInterval;
use rampart_engine::site_alert::WallSide;
use rampart_engine::wall_alert::{WallCondition, WallEvent};
use rampart_engine::{Price, Timeframe};

use super::{index_of, In, Out, WireError};

const CROSSES: [Cross; 2] = [Cross::Above, Cross::Below];
const MOVES: [Move; 3] = [Move::Up, Move::Down, Move::Any];
const LEVEL_EVENTS: [LevelEvent; 3] = [LevelEvent::Approach, LevelEvent::Touch, LevelEvent::Break];
const LEVEL_DIRECTIONS: [LevelDirection; 3] = [LevelDirection::Above, LevelDirection::Below, LevelDirection::Any];
const WALL_EVENTS: [WallEvent; 3] = [WallEvent::Appeared, WallEvent::Pulled, WallEvent::Filled];
const WALL_SIDES: [WallSide; 3] = [WallSide::Bid, WallSide::Ask, WallSide::Any];

pub(super) fn condition(out: &mut Out, condition: &Condition) {
    match *condition {
        Condition::Price { cross, level } => {
            out.u8(0);
            out.u8(index_of(&CROSSES, &cross));
            out.i64(level.0);
        }
        Condition::Pct { dir, millionths, window } => {
            out.u8(1);
            out.u8(index_of(&MOVES, &dir));
            out.u32(millionths);
            out.u8(window.index() as u8);
        }
        Condition::Level(c) => {
            out.u8(2);
            out.u8(index_of(&LEVEL_EVENTS, &c.event));
            out.u8(index_of(&LEVEL_DIRECTIONS, &c.direction));
            out.u32(c.within_millionths);
            out.u32(c.min_strength);
            out.u32(u32::from(c.timeframes));
        }
        Condition::Wall(c) => {
            out.u8(3);
            out.u8(index_of(&WALL_EVENTS, &c.event));
            out.u8(index_of(&WALL_SIDES, &c.side));
            out.i64(i64::try_from(c.min_usd_cents).unwrap_or(i64::MAX));
            out.u32(c.min_ratio_hundredths);
            out.u32(c.max_dist_hundredths);
            out.u32(c.min_age_s);
        }
        Condition::Perp(p) => perp_condition(out, &p),
    }
}

/// A derivatives alert's condition (`decisions.md` §17), tags 4 to 7.
pub(super) fn perp_condition(out: &mut Out, p: &PerpCondition) {
    let cents = |c: u64| i64::try_from(c).unwrap_or(i64::MAX);
    match *p {
        PerpCondition::Order(o) => {
            out.u8(4);
            out.u8(index_of(LiqDirection::ALL, &o.direction));
            out.i64(cents(o.min_usd_cents));
        }
        PerpCondition::Sum { window, sum } => {
            out.u8(5);
            out.u8(window.index() as u8);
            out.u8(index_of(LiqDirection::ALL, &sum.direction));
            out.i64(cents(sum.min_usd_cents));
        }
        PerpCondition::Oi { window, change } => {
            out.u8(6);
            out.u8(window.index() as u8);
            out.u8(index_of(OiDirection::ALL, &change.direction));
            out.i64(change.pct_micro);
            out.i64(cents(change.min_usd));
        }
        PerpCondition::Funding(f) => {
            out.u8(7);
            out.u8(index_of(FundingDirection::ALL, &f.direction));
            out.i64(f.pct_micro);
        }
    }
}

pub(super) fn read_perp_condition(tag: u8, r: &mut In<'_>) -> Result<PerpCondition, WireError> {
    let unsigned = |v: i64, what| u64::try_from(v).map_err(|_| WireError::Invalid(what));
    Ok(match tag {
        4 => {
            let direction = r.tag(LiqDirection::ALL, "liquidations direction")?;
            PerpCondition::Order(LiqOrder { direction, min_usd_cents: unsigned(r.i64()?, "min_usd_cents")? })
        }
        5 => {
            let window = r.tag(&PerpInterval::ALL, "perp window")?;
            let direction = r.tag(LiqDirection::ALL, "liquidations direction")?;
            let min_usd_cents = unsigned(r.i64()?, "min_usd_cents")?;
            PerpCondition::Sum { window, sum: LiqSum { direction, min_usd_cents } }
        }
        6 => {
            let window = r.tag(&PerpInterval::ALL, "perp window")?;
            let direction = r.tag(OiDirection::ALL, "oi direction")?;
            let pct_micro = r.i64()?;
            let min_usd = unsigned(r.i64()?, "min_usd")?;
            PerpCondition::Oi { window, change: OiChange { direction, pct_micro, min_usd } }
        }
        _ => {
            let direction = r.tag(FundingDirection::ALL, "funding direction")?;
            PerpCondition::Funding(FundingLevel { direction, pct_micro: r.i64()? })
        }
    })
}

pub(super) fn read_condition(r: &mut In<'_>) -> Result<Condition, WireError> {
    Ok(match r.u8()? {
        0 => Condition::Price { cross: r.tag(&CROSSES, "cross")?, level: Price(r.i64()?) },
        1 => {
            let dir = r.tag(&MOVES, "move")?;
            let millionths = r.u32()?;
            Condition::Pct { dir, millionths, window: r.tag(&Timeframe::ALL, "timeframe")? }
        }
        2 => {
            let event = r.tag(&LEVEL_EVENTS, "level event")?;
            let direction = r.tag(&LEVEL_DIRECTIONS, "level direction")?;
            let within_millionths = r.u32()?;
            let min_strength = r.u32()?;
            let timeframes = u16::try_from(r.u32()?).map_err(|_| WireError::Invalid("timeframes"))?;
            Condition::Level(LevelCondition { event, direction, within_millionths, min_strength, timeframes })
        }
        3 => {
            let event = r.tag(&WALL_EVENTS, "wall event")?;
            let side = r.tag(&WALL_SIDES, "wall side")?;
            let min_usd_cents = u64::try_from(r.i64()?).map_err(|_| WireError::Invalid("min_usd_cents"))?;
            let min_ratio_hundredths = r.u32()?;
            let max_dist_hundredths = r.u32()?;
            let min_age_s = r.u32()?;
            Condition::Wall(WallCondition {
                event,
                side,
                min_usd_cents,
                min_ratio_hundredths,
                max_dist_hundredths,
                min_age_s,
            })
        }
        tag @ 4..=7 => Condition::Perp(read_perp_condition(tag, r)?),
        _ => return Err(WireError::Invalid("condition")),
    })
}
