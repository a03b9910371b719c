//! The control API's answers (`{"ok":true}`, `{"ok":false,"error":..}`) and the body's venue:
//! shared by `control` and `perp_control` (a floor below both).

use rampart_engine::Venue;

use super::text::json_str;
use super::{Reply, Shared};

/// A refusal `{"ok":false,"error":..}` with `status`.
pub(crate) fn fail(status: u16, msg: &str) -> Reply {
    Reply::status(status, format!("{{\"ok\":false,\"error\":{}}}", json_str(msg)))
}

/// `{"ok":true}`.
pub(crate) fn done() -> Reply {
    Reply::ok("{\"ok\":true}".into())
}

/// The body's `venue`, served by this simulator.
pub(crate) fn venue_of(shared: &Shared, v: &serde_json::Value) -> Result<Venue, Reply> {
    let name = v.get("venue").and_then(|x| x.as_str()).ok_or_else(|| fail(400, "'venue' is required"))?;
    let venue =
        Venue::parse(name).ok_or_else(|| fail(400, &format!("invalid venue '{name}'. Allowed: {}", Venue::ALLOWED)))?;
    if !shared.cfg.venues.contains(&venue) {
        return Err(fail(400, &format!("venue '{name}' is not served by this simulator")));
    }
    Ok(venue)
}
