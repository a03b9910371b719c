//! A density alert made on the site (`decisions.md` §10) is a wall alert with event `appeared`
//! (§15: one record, one evaluator): stored with the account's alerts, listed by
//! `GET /v1/alerts`, decided by the shards like every wall alert, with no webhook, against the
//! plan's density-alert cap, for every plan (the site works for every plan within its caps).
//!
//! The site's request keeps its fields; they map onto the wall alert's condition: `side` is the
//! direction, `min_usd` and `max_dist_pct` are kept in cents and hundredths (rounded to them),
//! no `symbol` is `*` (every pair of the venue), and the ratio is the detection's threshold.

use rampart_engine::alert::Condition;
use rampart_engine::wall_alert::{WallCondition, WallEvent};
use rampart_engine::Registry;

use super::{clip, Invalid, SiteError};
use crate::alerts::rules::Cap;
use crate::config::Plan;
use rampart_state::partition::UNIVERSE;
use rampart_store::store::{AlertRow, NewAlert, SiteCondition, SiteRequest, Store};

/// The wall alert a density request is; `None` for a market request.
pub fn new_alert(account_id: i64, request: &SiteRequest, created_price: i64, now_ms: i64) -> Option<NewAlert> {
    let SiteCondition::Density { symbol, side, min_usd, max_dist_pct, min_age_s } = &request.condition else {
        return None;
    };
    let condition = Condition::Wall(WallCondition {
        event: WallEvent::Appeared,
        side: *side,
        min_usd_cents: (min_usd * 100.0).round() as u64,
        min_ratio_hundredths: 0,
        max_dist_hundredths: (max_dist_pct * 100.0).round() as u32,
        min_age_s: *min_age_s,
    });
    Some(NewAlert {
        account_id,
        exchange: request.exchange,
        symbol: symbol.clone().unwrap_or_else(|| UNIVERSE.to_owned()),
        condition,
        repeat: request.repeat,
        note: request.note.clone(),
        webhook_url: None,
        created_price,
        created_ms: now_ms,
        expires_ms: None,
        cooldown_s: request.cooldown_s,
        max_fires: None,
        message: None,
        webhook_format: rampart_store::store::WebhookFormat::Json,
    })
}

/// Stores `alert` (a density request's, [`new_alert`]) unless the account holds the plan's cap
/// of density alerts already; the pair must be on the venue's list when a `registry` is given.
/// Counted and inserted in the caller's storage job, so two creates cannot both take the last
/// place.
pub fn create(
    store: &Store,
    plan: &Plan,
    alert: &NewAlert,
    registry: Option<&Registry>,
) -> Result<AlertRow, SiteError> {
    if let Some(r) = registry {
        if alert.symbol != UNIVERSE && r.find(alert.exchange, &alert.symbol).is_none() {
            // Named as the API names it (`POST /v1/alerts`), so the form can say what was typed.
            let message = format!("unknown symbol '{}' on {}", clip(&alert.symbol, 64), alert.exchange);
            return Err(SiteError::Invalid(Invalid { status: 404, message }));
        }
    }
    let counted = store.active_density_alerts(alert.account_id)?;
    if Cap::Density.full(Cap::Density.limit(plan), counted, || Ok::<_, SiteError>(0))? {
        return Err(SiteError::Invalid(Cap::Density.reached(plan)));
    }
    Ok(store.insert_alert(alert)?)
}
