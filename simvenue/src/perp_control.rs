//! The control API of the perpetuals (decisions §17, "Control API"), beside `control`'s:
//!
//! - `POST /sim/liquidation` `{"venue","symbol","side":"long"|"short","usd"}`: one liquidation
//!   of that worth at the contract's next step (at once: the contract steps in the next round),
//!   at the mark; `"symbol":"*"` puts one on every listed perpetual of the venue in the same
//!   step. On Binance two in one second send only the larger (the venue's rule). Refused on
//!   Bitget, which publishes none.
//! - `POST /sim/oi` `{"venue","symbol","pct"}`: open interest jumps by `pct` percent.
//! - `POST /sim/funding` `{"venue","symbol","rate","interval_h"?}`: the funding rate (a
//!   fraction per interval, as the venues send it) from the next step, and the interval.
//! - `POST /sim/perp` `{"venue","symbol","listed":false|true}`: delists or relists the
//!   perpetual only (a relisting also ends `perp_stale`).
//! - `/sim/fault` kinds `perp_disconnect` (the venue's connections that carry perpetual data)
//!   and `perp_stale` (one pair: mark, OI and funding stop, liquidations continue).
//!
//! `symbol` is the spot pair (`BTCUSDT`) or the contract as the venue spells it
//! (`1000PEPEUSDT`, `BTC-USDT-SWAP`), any case. Numbers may be JSON numbers or strings.
//! Answers `{"ok":true}` (with `"contracts":n` for `"*"`) or `{"ok":false,"error":..}` 400.

use rampart_engine::perp_window::PositionSide;
use rampart_engine::sim_perp::PerpId;
use rampart_engine::Venue;

use super::control_reply::{done, fail, venue_of};
use super::market::{Endpoint, FaultKind, Kill, Topic};
use super::{Reply, Shared};

fn number(v: &serde_json::Value, key: &str) -> Result<f64, Reply> {
    let x = match v.get(key) {
        Some(serde_json::Value::Number(n)) => n.as_f64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
        None => return Err(fail(400, &format!("'{key}' is required"))),
        _ => None,
    };
    x.filter(|x| x.is_finite()).ok_or_else(|| fail(400, &format!("'{key}' must be a number")))
}

/// The perpetual named by the body's `symbol` on `venue`.
fn perp_of(shared: &Shared, venue: Venue, v: &serde_json::Value) -> Result<PerpId, Reply> {
    let sym = v.get("symbol").and_then(|x| x.as_str()).ok_or_else(|| fail(400, "'symbol' is required"))?;
    let st = shared.lock();
    match st.perps.listing.find(venue, sym) {
        Some(p) if st.perps.sim.is_listed(p).is_some() => Ok(p),
        _ => Err(fail(400, &format!("{sym} has no perpetual on {venue}"))),
    }
}

fn refused(e: rampart_engine::sim_perp::ControlError, venue: Venue) -> Reply {
    fail(400, &format!("{e} ({venue})"))
}

/// `POST /sim/liquidation`.
pub(crate) fn liquidation(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let side = match v.get("side").and_then(|s| s.as_str()) {
        Some("long") => PositionSide::Long,
        Some("short") => PositionSide::Short,
        Some(s) => return fail(400, &format!("invalid side '{s}'. Allowed: long, short")),
        None => return fail(400, "'side' is required"),
    };
    let usd = match number(v, "usd") {
        Ok(x) => x,
        Err(r) => return r,
    };
    if v.get("symbol").and_then(|s| s.as_str()) == Some("*") {
        let n = shared.lock().perps.sim.inject_liquidation_all(venue, side, usd);
        return match n {
            Ok(n) => Reply::ok(format!("{{\"ok\":true,\"contracts\":{n}}}")),
            Err(e) => refused(e, venue),
        };
    }
    let perp = match perp_of(shared, venue, v) {
        Ok(p) => p,
        Err(r) => return r,
    };
    match shared.lock().perps.sim.inject_liquidation(perp, side, usd) {
        Ok(()) => done(),
        Err(e) => refused(e, venue),
    }
}

/// `POST /sim/oi`.
pub(crate) fn oi(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let (perp, pct) = match (perp_of(shared, venue, v), number(v, "pct")) {
        (Ok(p), Ok(x)) => (p, x),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    match shared.lock().perps.sim.inject_oi_jump(perp, pct) {
        Ok(()) => done(),
        Err(e) => refused(e, venue),
    }
}

/// `POST /sim/funding`.
pub(crate) fn funding(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let (perp, rate) = match (perp_of(shared, venue, v), number(v, "rate")) {
        (Ok(p), Ok(x)) => (p, x),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let interval = match v.get("interval_h") {
        None | Some(serde_json::Value::Null) => None,
        Some(x) => match x.as_u64().and_then(|h| u8::try_from(h).ok()) {
            Some(h) => Some(h),
            None => return fail(400, "'interval_h' must be a whole number of hours: 1, 2, 3, 4, 6 or 8"),
        },
    };
    match shared.lock().perps.sim.set_funding(perp, rate, interval) {
        Ok(()) => done(),
        Err(e) => refused(e, venue),
    }
}

/// `POST /sim/perp`.
pub(crate) fn listed(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let perp = match perp_of(shared, venue, v) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let Some(listed) = v.get("listed").and_then(|l| l.as_bool()) else {
        return fail(400, "'listed' (true or false) is required");
    };
    let mut st = shared.lock();
    if listed {
        st.perps.wire[perp.index()].stale = false;
    }
    match st.perps.sim.set_listed(perp, listed) {
        Ok(()) => done(),
        Err(e) => refused(e, venue),
    }
}

/// The perpetual faults of `/sim/fault`; `None` for another kind.
pub(crate) fn fault(shared: &Shared, venue: Venue, kind: &str, v: &serde_json::Value) -> Option<Reply> {
    match kind {
        "perp_disconnect" => {
            let st = shared.lock();
            let mut n = 0;
            for c in st.conns.values().filter(|c| c.endpoint.venue() == venue) {
                let perp_path = matches!(
                    c.endpoint,
                    Endpoint::BinanceFuturesRaw | Endpoint::BinanceFuturesCombined | Endpoint::BybitLinear
                );
                if perp_path || c.topics.iter().any(Topic::is_perp) {
                    c.ctl.kill(Kill::Drop);
                    n += 1;
                }
            }
            if n > 0 {
                st.stats.fault(venue, FaultKind::PerpDisconnect);
            }
            Some(done())
        }
        "perp_stale" => {
            let perp = match perp_of(shared, venue, v) {
                Ok(p) => p,
                Err(r) => return Some(r),
            };
            shared.lock().perps.wire[perp.index()].stale = true;
            shared.stats.fault(venue, FaultKind::PerpStale);
            Some(done())
        }
        _ => None,
    }
}
