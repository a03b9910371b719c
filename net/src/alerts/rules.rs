//! The rules a well-formed alert request must still meet (`decisions.md` §2 and §4): what the
//! plan includes, the side of the current price a price alert must be on, and the plan's cap
//! on active alerts. Pure functions of the request, the plan and the price, each refusal a 422
//! with its exact message.

use rampart_engine::alert::{Condition, Cross};
use rampart_engine::perp_alert::{FundingDirection, PerpCondition};
use rampart_engine::perp_book::Completeness;
use rampart_engine::Venue;
use rampart_state::perp::PerpSnapshot;

use crate::config::Plan;
use crate::request::{invalid, Invalid};

use super::request::CreateRequest;

/// Refuses what the plan does not include: percent-move alerts, level and wall alerts, repeating
/// alerts.
pub fn check_plan(plan: &Plan, req: &CreateRequest) -> Result<(), Invalid> {
    if matches!(req.condition, Condition::Pct { .. }) && !plan.pct_alerts {
        return Err(invalid(format!("percent-move alerts are not included in plan '{}'", plan.name)));
    }
    if matches!(req.condition, Condition::Level(_)) && !plan.structure_alerts {
        return Err(invalid(format!("level alerts are not included in plan '{}'", plan.name)));
    }
    if matches!(req.condition, Condition::Wall(_)) && !plan.structure_alerts {
        return Err(invalid(format!("wall alerts are not included in plan '{}'", plan.name)));
    }
    if matches!(req.condition, Condition::Perp(_)) && !plan.derivatives_alerts {
        return Err(invalid(format!("derivatives alerts are not included in plan '{}'", plan.name)));
    }
    if req.repeat && !plan.repeat {
        // A `*` alert repeats without being asked to: say why the plan refuses it.
        let why = if req.universe() { "alerts on every pair of the venue repeat, and " } else { "" };
        return Err(invalid(format!("{why}repeating alerts are not included in plan '{}'", plan.name)));
    }
    Ok(())
}

/// A price alert must wait on the far side of the current price (fixed-point, > 0): `above`
/// over it, `below` under it. Percent alerts have no side.
pub fn check_side(condition: &Condition, current: i64) -> Result<(), Invalid> {
    let Condition::Price { cross, level } = *condition else { return Ok(()) };
    let mut b = [0u8; 24];
    let shown = rampart_engine::fixed::format_decimal(current, &mut b);
    match cross {
        Cross::Above if level.0 <= current => {
            Err(invalid(format!("price must be above the current price {shown} for an 'above' alert")))
        }
        Cross::Below if level.0 >= current => {
            Err(invalid(format!("price must be below the current price {shown} for a 'below' alert")))
        }
        _ => Ok(()),
    }
}

/// `[derivatives] enabled = false` refuses the three derivatives types (`decisions.md` §17).
pub fn check_derivatives_on(condition: &Condition, on: bool) -> Result<(), Invalid> {
    match condition {
        Condition::Perp(_) if !on => Err(invalid("derivatives are off on this server")),
        _ => Ok(()),
    }
}

/// §17's market rules for a derivatives alert on `venue`: Bitget publishes no liquidations; a
/// one-pair alert (`symbol`) needs the pair's perpetual (`perp`, what its shard publishes; `None`:
/// none); a one-pair `funding` alert must wait on the far side of the pair's `rate8h` when it is
/// known and fresh (else it arms on the first value on the near side). Other types pass.
pub fn check_perp(
    condition: &Condition,
    venue: Venue,
    symbol: Option<&str>,
    perp: Option<&PerpSnapshot>,
) -> Result<(), Invalid> {
    let Condition::Perp(c) = condition else { return Ok(()) };
    if c.kind() == "liquidations" && Completeness::of(venue) == Completeness::Unpublished {
        let v = venue.as_str();
        return Err(invalid(format!("{v} publishes no liquidations; liquidations alerts are not available on {v}")));
    }
    let Some(symbol) = symbol else { return Ok(()) };
    let Some(perp) = perp else {
        return Err(invalid(format!(
            "'{symbol}' has no perpetual contract on {}; {} alerts need one",
            venue.as_str(),
            c.kind()
        )));
    };
    let (PerpCondition::Funding(level), Some(f)) = (c, perp.funding.filter(|f| !f.stale)) else { return Ok(()) };
    if level.on_far_side(f.rate8h) {
        return Ok(());
    }
    let mut j = rampart_state::json::Json::with_capacity(24);
    j.float(f.rate8h, rampart_state::perp_json::RATE_DECIMALS);
    let (side, d) = match level.direction {
        FundingDirection::Above => ("above", "above"),
        FundingDirection::Below => ("below", "below"),
    };
    Err(invalid(format!(
        "funding_pct must be {side} the funding rate now {} (percent per 8 h) for an '{d}' alert",
        j.finish()
    )))
}

/// Shortest time from now an alert may expire at (`decisions.md` §13).
pub const EXPIRY_MIN_MS: i64 = 60_000;
/// Longest: 365 days.
pub const EXPIRY_MAX_MS: i64 = 365 * 86_400_000;

/// `expires_at` must lie 1 minute to 365 days after `now_ms`.
pub fn check_expiry(expires_ms: Option<i64>, now_ms: i64) -> Result<(), Invalid> {
    match expires_ms {
        Some(at) if at < now_ms + EXPIRY_MIN_MS || at > now_ms + EXPIRY_MAX_MS => {
            Err(invalid("expires_at must be between 1 minute and 365 days from now"))
        }
        _ => Ok(()),
    }
}

/// Which of the plan's caps an alert counts against (`decisions.md` §15): a wall alert (and a
/// site density alert) the density-alert cap, every other type the price-alert cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    /// The price-alert cap: price, percent, level and every other non-wall alert.
    Price,
    /// The density-alert cap: API wall alerts and site density alerts together.
    Density,
}

impl Cap {
    /// The cap an alert of `condition` counts against.
    pub fn of(condition: &Condition) -> Cap {
        if matches!(condition, Condition::Wall(_)) {
            Cap::Density
        } else {
            Cap::Price
        }
    }

    /// Its number on `plan`.
    pub fn limit(self, plan: &Plan) -> u64 {
        u64::from(match self {
            Cap::Price => plan.price_alert_cap,
            Cap::Density => plan.density_alert_cap,
        })
    }

    /// Whether an account holds `limit` of this cap already, so that no alert counted against it
    /// may be added (sans-I/O: the store counts, this decides). `counted` is what the store keeps
    /// for it: for `Density` the account's active wall and site density alerts, for `Price` all
    /// its active alerts, walls included; `walls` (its active wall alerts, which the price cap
    /// does not count) is asked only when `counted` reaches the price cap, the rare case.
    pub fn full<E>(self, limit: u64, counted: u64, walls: impl FnOnce() -> Result<u64, E>) -> Result<bool, E> {
        Ok(match self {
            Cap::Density => counted >= limit,
            Cap::Price if counted < limit => false,
            Cap::Price => counted.saturating_sub(walls()?) >= limit,
        })
    }

    /// The refusal when the account holds the cap on `plan` already.
    pub fn reached(self, plan: &Plan) -> Invalid {
        let what = match self {
            Cap::Price => "price",
            Cap::Density => "density",
        };
        invalid(format!("active {what}-alert limit reached ({} on plan {})", self.limit(plan), plan.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Plans;
    use rampart_engine::alert::Move;
    use rampart_engine::{Price, Timeframe};

    fn request(condition: Condition, repeat: bool) -> CreateRequest {
        CreateRequest {
            symbol: "BTCUSDT".into(),
            condition,
            repeat,
            note: String::new(),
            webhook_url: None,
            exchange: None,
            expires_ms: None,
            cooldown_s: 0,
            max_fires: None,
            message: None,
            webhook_format: rampart_store::store::WebhookFormat::Json,
        }
    }

    #[test]
    fn the_plan_decides_pct_and_repeat() {
        let plans = Plans::default();
        let lite = plans.get("developer-lite").expect("built-in plan");
        let full = plans.get("developer").expect("built-in plan");
        let pct = Condition::Pct { dir: Move::Up, millionths: 500_000, window: Timeframe::H1 };
        let price = Condition::Price { cross: Cross::Above, level: Price(1) };
        for (plan, condition, repeat) in [(lite, pct, false), (lite, price, true), (full, pct, true)] {
            let got = check_plan(plan, &request(condition, repeat));
            let allowed = match (condition, repeat) {
                (Condition::Pct { .. }, _) => plan.pct_alerts && (!repeat || plan.repeat),
                _ => !repeat || plan.repeat,
            };
            assert_eq!(got.is_ok(), allowed, "{} {condition:?} repeat={repeat}: {got:?}", plan.name);
            if let Err(e) = got {
                assert_eq!(e.status, 422);
                assert!(e.message.ends_with(&format!("not included in plan '{}'", plan.name)), "{}", e.message);
            }
        }
    }

    #[test]
    fn a_price_alert_waits_on_the_far_side_of_the_price() {
        let at = |cross, level| Condition::Price { cross, level: Price(level) };
        assert!(check_side(&at(Cross::Above, 101), 100).is_ok());
        assert!(check_side(&at(Cross::Below, 99), 100).is_ok());
        let e = check_side(&at(Cross::Above, 100), 100_000_000).expect_err("at the price");
        assert_eq!(e.message, "price must be above the current price 1 for an 'above' alert");
        let e = check_side(&at(Cross::Below, 200_000_000), 150_000_000).expect_err("above the price");
        assert_eq!(e.message, "price must be below the current price 1.5 for a 'below' alert");
        let pct = Condition::Pct { dir: Move::Any, millionths: 100_000, window: Timeframe::M5 };
        assert!(check_side(&pct, 100).is_ok(), "a pct alert has no side");
    }

    #[test]
    fn an_expiry_lies_a_minute_to_a_year_ahead() {
        let now = 1_795_183_387_000;
        assert!(check_expiry(None, now).is_ok());
        assert!(check_expiry(Some(now + EXPIRY_MIN_MS), now).is_ok());
        assert!(check_expiry(Some(now + EXPIRY_MAX_MS), now).is_ok());
        for bad in [now, now + EXPIRY_MIN_MS - 1, now + EXPIRY_MAX_MS + 1, now - 1] {
            let e = check_expiry(Some(bad), now).expect_err("out of range");
            assert_eq!(
                (e.status, e.message.as_str()),
                (422, "expires_at must be between 1 minute and 365 days from now")
            );
        }
    }

    #[test]
    fn the_cap_refusal_names_the_cap_and_plan() {
        let plans = Plans::default();
        let plan = plans.get("developer").expect("built-in plan");
        let e = Cap::Price.reached(plan);
        assert_eq!(
            (e.status, e.message),
            (422, format!("active price-alert limit reached ({} on plan developer)", plan.price_alert_cap))
        );
        let e = Cap::Density.reached(plan);
        assert_eq!(
            e.message,
            format!("active density-alert limit reached ({} on plan developer)", plan.density_alert_cap)
        );
    }

    #[test]
    fn walls_count_against_the_density_cap_and_the_rest_against_the_price_cap() {
        let wall = crate::alerts::request::parse_create(br#"{"type":"wall","symbol":"BTCUSDT","event":"pulled"}"#);
        assert_eq!(Cap::of(&wall.expect("a wall alert").condition), Cap::Density);
        assert_eq!(Cap::of(&Condition::Price { cross: Cross::Above, level: Price(1) }), Cap::Price);
        let never = || -> Result<u64, ()> { panic!("walls are counted only at the price cap") };
        // Density: the count decides, at the limit and past it full.
        assert_eq!(Cap::Density.full(3, 2, never), Ok(false));
        assert_eq!(Cap::Density.full(3, 3, never), Ok(true));
        assert_eq!(Cap::Density.full(0, 0, never), Ok(true), "a plan without density alerts");
        // Price: below the limit, walls are not read; at it, the account's walls are taken out.
        assert_eq!(Cap::Price.full(3, 2, never), Ok(false));
        assert_eq!(Cap::Price.full(3, 3, || Ok::<_, ()>(0)), Ok(true));
        assert_eq!(Cap::Price.full(3, 3, || Ok::<_, ()>(1)), Ok(false), "one of the three is a wall alert");
        assert_eq!(Cap::Price.full(3, 5, || Ok::<_, ()>(2)), Ok(true));
        assert_eq!(Cap::Price.full(3, 5, || Ok::<_, ()>(9)), Ok(false), "more walls than counted: none left");
        assert_eq!(Cap::Price.full(3, 3, || Err::<u64, _>("storage")), Err("storage"), "the store's error");
    }
}
