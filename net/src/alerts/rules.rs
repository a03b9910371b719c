//! The rules a well-formed alert request must still meet (`decisions.md` §2 and §4): what the
//! plan includes, the side of the current price a price alert must be on, and the plan's cap
//! on active alerts. Pure functions of the request, the plan and the price, each refusal a 422
//! with its exact message.

use rampart_engine::alert::{Condition, Cross};

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

/// The refusal when the account already holds the plan's cap of active price and percent
/// alerts (one cap for both).
pub fn cap_reached(plan: &Plan) -> Invalid {
    invalid(format!("active price-alert limit reached ({} on plan {})", plan.price_alert_cap, plan.name))
}

/// The refusal when the account already holds the plan's cap of active density alerts (its API
/// wall alerts and its site density alerts together).
pub fn density_cap_reached(plan: &Plan) -> Invalid {
    invalid(format!("active density-alert limit reached ({} on plan {})", plan.density_alert_cap, plan.name))
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
        let e = cap_reached(plan);
        assert_eq!(
            (e.status, e.message),
            (422, format!("active price-alert limit reached ({} on plan developer)", plan.price_alert_cap))
        );
    }
}
