//! The simulator's control API under `/sim/`: faults, trades, delistings and venue outages on
//! demand, counters, and the true books (for tests and the latency benchmark).
//!
//! - `POST /sim/fault` `{"venue":..,"symbol":..,"kind":..}`: `gap`, `stale_snapshot` (Binance),
//!   `checksum` (OKX, Bitget), `reset` (Bybit, OKX), `crossed`, `heartbeat` (OKX) act on one
//!   pair; `disconnect` and `notice` (OKX, Binance) on the whole venue (`symbol` not needed).
//! - `POST /sim/trade` `{"venue":..,"symbol":..,"price":"123.45","qty":"1"}` (`qty` optional);
//!   answers the traded price and `publishedUs`, when the trade was queued for the subscribers.
//! - `POST /sim/delist` `{"venue":..,"symbol":..}`; `POST /sim/relist` (the same body) lists a
//!   delisted pair again.
//! - `POST /sim/rest` `{"venue":..,"route":"listing"|"candles"|"depth","fault":..}` sets how a
//!   REST route answers from now on: `none`, `hang` (never), `empty` (a valid listing with no
//!   instruments; listing only), or `status` with `"status":429` and optionally
//!   `"retry_after":"<seconds>"` (any u64, to test absurd values).
//! - `POST /sim/venue` `{"venue":..,"up":false|true}`.
//! - The perpetuals' routes (`/sim/liquidation`, `/sim/oi`, `/sim/funding`, `/sim/perp`) and
//!   fault kinds (`perp_disconnect`, `perp_stale`): `perp_control`. `POST /sim/rest` takes
//!   `"route":"perp"` for every perpetual REST route of the venue.
//! - `GET /sim/stats`, `GET /sim/book?venue=&symbol=`.
//!
//! Answers are `{"ok":true}` (200) or `{"ok":false,"error":".."}` with 400 (bad body or a fault
//! that does not apply to the venue), 404 (unknown path) or 405 (wrong method).

use std::fmt::Write as _;

use hyper::Method;
use rampart_engine::fixed::Price;
use rampart_engine::Venue;

use super::control_reply::{done, fail, venue_of};
use super::market::{FaultKind, Kill};
use super::text::{json_str, param, push_fixed, push_qty, query_pairs};
use super::{binance, now_ms, okx, perp_control, Reply, RestFault, RestRoute, Shared};

/// Levels per side `GET /sim/book` returns.
const BOOK_LEVELS: usize = 20;

/// Answers one control request.
pub(crate) fn handle(shared: &Shared, method: &Method, path: &str, query: Option<&str>, body: &[u8]) -> Reply {
    let post = |f: fn(&Shared, &serde_json::Value) -> Reply| {
        if method != Method::POST {
            return fail(405, "use POST");
        }
        match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(v) if v.is_object() => f(shared, &v),
            Ok(_) => fail(400, "the body must be a JSON object"),
            Err(e) => fail(400, &format!("the body is not JSON: {e}")),
        }
    };
    match path {
        "/sim/fault" => post(fault),
        "/sim/trade" => post(trade),
        "/sim/delist" => post(delist),
        "/sim/relist" => post(relist),
        "/sim/rest" => post(rest),
        "/sim/venue" => post(venue),
        "/sim/level" => post(level),
        "/sim/speed" => post(speed),
        "/sim/liquidation" => post(perp_control::liquidation),
        "/sim/oi" => post(perp_control::oi),
        "/sim/funding" => post(perp_control::funding),
        "/sim/perp" => post(perp_control::listed),
        "/sim/stats" | "/sim/book" if method != Method::GET => fail(405, "use GET"),
        "/sim/stats" => Reply::ok(shared.stats.to_json(&shared.cfg.venues)),
        "/sim/book" => book(shared, query),
        _ => fail(404, "no such control path"),
    }
}

/// The listed book named by the body's `symbol` on `venue`.
fn book_of(shared: &Shared, venue: Venue, v: &serde_json::Value) -> Result<usize, Reply> {
    let sym = v.get("symbol").and_then(|x| x.as_str()).ok_or_else(|| fail(400, "'symbol' is required"))?;
    let st = shared.lock();
    match st.find(venue, sym) {
        Some(b) if st.books[b].listed => Ok(b),
        Some(_) => Err(fail(400, &format!("{sym} is delisted on {venue}"))),
        None => Err(fail(400, &format!("{sym} is not listed on {venue}"))),
    }
}

fn fault(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(name) = v.get("kind").and_then(|k| k.as_str()) else { return fail(400, "'kind' is required") };
    if let Some(reply) = perp_control::fault(shared, venue, name, v) {
        return reply;
    }
    let allowed =
        "gap, stale_snapshot, checksum, reset, disconnect, notice, crossed, heartbeat, perp_disconnect, perp_stale";
    let kind = match FaultKind::parse(name) {
        Some(FaultKind::Delist | FaultKind::PerpDisconnect | FaultKind::PerpStale) | None => {
            return fail(400, &format!("invalid kind '{name}'. Allowed: {allowed}"))
        }
        Some(k) => k,
    };
    let applies = match kind {
        FaultKind::StaleSnapshot => venue == Venue::Binance,
        FaultKind::Checksum => matches!(venue, Venue::Okx | Venue::Bitget),
        FaultKind::Reset => matches!(venue, Venue::Bybit | Venue::Okx),
        FaultKind::Notice => matches!(venue, Venue::Okx | Venue::Binance),
        FaultKind::Heartbeat => venue == Venue::Okx,
        _ => true,
    };
    if !applies {
        return fail(400, &format!("fault '{name}' does not apply to {venue}"));
    }
    match kind {
        FaultKind::Disconnect => {
            shared.lock().kill_venue(venue, &Kill::Drop);
            shared.stats.fault(venue, FaultKind::Disconnect);
            return done();
        }
        FaultKind::Notice => {
            let st = shared.lock();
            if venue == Venue::Okx {
                okx::notice(&st);
            } else {
                binance::server_shutdown(&st);
            }
            shared.stats.fault(venue, FaultKind::Notice);
            return done();
        }
        _ => {}
    }
    let b = match book_of(shared, venue, v) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut st = shared.lock();
    match kind {
        FaultKind::Gap => st.books[b].pending.gap = true,
        FaultKind::Checksum => st.books[b].pending.checksum = true,
        FaultKind::Reset => st.books[b].pending.reset = true,
        FaultKind::StaleSnapshot => st.books[b].pending.stale = true,
        FaultKind::Crossed => {
            if !st.cross(b, now_ms()) {
                return fail(400, "the book has no ask to cross");
            }
        }
        FaultKind::Heartbeat => okx::heartbeat_now(&mut st, b),
        FaultKind::Disconnect
        | FaultKind::Notice
        | FaultKind::Delist
        | FaultKind::PerpDisconnect
        | FaultKind::PerpStale => {}
    }
    done()
}

/// A decimal given as a JSON string or number.
fn decimal(v: &serde_json::Value, key: &str) -> Result<Option<i64>, Reply> {
    let text = match v.get(key) {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(_) => return Err(fail(400, &format!("'{key}' must be a decimal string"))),
    };
    match Price::parse(text.as_bytes()) {
        Ok(p) if p.0 > 0 => Ok(Some(p.0)),
        _ => Err(fail(400, &format!("'{key}' must be a decimal above zero, not '{text}'"))),
    }
}

fn trade(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let b = match book_of(shared, venue, v) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let price = match decimal(v, "price") {
        Ok(Some(p)) => p,
        Ok(None) => return fail(400, "'price' is required"),
        Err(r) => return r,
    };
    let qty = match decimal(v, "qty") {
        Ok(q) => q.map(|q| q as u64),
        Err(r) => return r,
    };
    match shared.lock().inject_trade(b, price, qty, now_ms()) {
        Ok((text, published_us)) => {
            Reply::ok(format!("{{\"ok\":true,\"price\":{},\"publishedUs\":{published_us}}}", json_str(&text)))
        }
        Err(msg) => fail(400, &msg),
    }
}

/// `POST /sim/level {"venue","symbol","side":"bid"|"ask","depth":N,"qty"}`: places a level of
/// `qty` strictly between the true book's `depth`-th and next level on that side (a price the
/// simulated market does not use, so it stays until removed), and answers its price text; with
/// `"price"` instead of `"depth"`, sets that exact level (qty 0 removes it).
fn level(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let b = match book_of(shared, venue, v) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let side = match v.get("side").and_then(|s| s.as_str()) {
        Some("bid") => rampart_engine::book::Side::Bid,
        Some("ask") => rampart_engine::book::Side::Ask,
        _ => return fail(400, "'side' must be \"bid\" or \"ask\""),
    };
    let qty = match v.get("qty") {
        Some(serde_json::Value::String(t)) if t == "0" => 0,
        Some(serde_json::Value::Number(n)) if n.as_f64() == Some(0.0) => 0,
        _ => match decimal(v, "qty") {
            Ok(Some(q)) => q as u64,
            Ok(None) => return fail(400, "'qty' is required"),
            Err(r) => return r,
        },
    };
    let price = match decimal(v, "price") {
        Ok(p) => p,
        Err(r) => return r,
    };
    let depth = v.get("depth").and_then(|d| d.as_u64()).map(|d| d as usize);
    match shared.lock().place_level(b, side, price, depth, qty, now_ms()) {
        Ok(text) => Reply::ok(format!("{{\"ok\":true,\"price\":{}}}", json_str(&text))),
        Err(msg) => fail(400, &msg),
    }
}

/// `POST /sim/speed {"step_ms": N}`: every pair steps every N ms on average from now on (the
/// default is 500; smaller is faster). The latency benchmark's bursts use it.
fn speed(shared: &Shared, v: &serde_json::Value) -> Reply {
    match v.get("step_ms").and_then(|s| s.as_i64()) {
        Some(ms) if (1..=600_000).contains(&ms) => {
            shared.lock().set_step_ms(ms);
            done()
        }
        _ => fail(400, "'step_ms' must be an integer from 1 to 600000"),
    }
}

fn delist(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let b = match book_of(shared, venue, v) {
        Ok(b) => b,
        Err(r) => return r,
    };
    shared.lock().delist(b, now_ms());
    done()
}

fn relist(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(sym) = v.get("symbol").and_then(|x| x.as_str()) else { return fail(400, "'symbol' is required") };
    let mut st = shared.lock();
    let Some(b) = st.find(venue, sym) else { return fail(400, &format!("{sym} is not a pair of {venue}")) };
    if st.books[b].listed {
        return fail(400, &format!("{sym} is listed on {venue}"));
    }
    st.relist(b);
    done()
}

fn rest(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let route = match v.get("route").and_then(|r| r.as_str()) {
        Some("listing") => RestRoute::Listing,
        Some("candles") => RestRoute::Candles,
        Some("depth") if venue == Venue::Binance => RestRoute::Depth,
        Some("perp") => RestRoute::Perp,
        _ => return fail(400, "'route' must be \"listing\", \"candles\", \"depth\" (Binance) or \"perp\""),
    };
    let fault = match v.get("fault").and_then(|f| f.as_str()) {
        Some("none") => RestFault::None,
        Some("hang") => RestFault::Hang,
        Some("empty") if route == RestRoute::Listing => RestFault::Empty,
        Some("status") => {
            let status = v.get("status").and_then(|s| s.as_u64()).filter(|s| (400..600).contains(s));
            let Some(status) = status else { return fail(400, "'status' must be from 400 to 599") };
            let retry_after = match v.get("retry_after") {
                None => None,
                Some(r) => match r.as_str().and_then(|t| t.parse::<u64>().ok()) {
                    Some(secs) => Some(secs),
                    None => return fail(400, "'retry_after' must be a string of decimal seconds"),
                },
            };
            RestFault::Status(status as u16, retry_after)
        }
        _ => return fail(400, "'fault' must be \"none\", \"hang\", \"empty\" (listing) or \"status\""),
    };
    shared.rest_faults.lock().unwrap_or_else(|e| e.into_inner())[venue.index()][route as usize] = fault;
    eprintln!("sim-venue: {venue} REST {route:?}: {fault:?}");
    done()
}

fn venue(shared: &Shared, v: &serde_json::Value) -> Reply {
    let venue = match venue_of(shared, v) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(up) = v.get("up").and_then(|u| u.as_bool()) else { return fail(400, "'up' must be true or false") };
    let mut st = shared.lock();
    st.venue_up[venue.index()] = up;
    if !up {
        st.kill_venue(venue, &Kill::Drop);
    }
    eprintln!("sim-venue: {venue} is {}", if up { "up" } else { "down" });
    done()
}

fn book(shared: &Shared, query: Option<&str>) -> Reply {
    let q = query_pairs(query);
    let Some(venue) = param(&q, "venue").and_then(Venue::parse) else {
        return fail(400, &format!("'venue' is required. Allowed: {}", Venue::ALLOWED));
    };
    let Some(sym) = param(&q, "symbol") else { return fail(400, "'symbol' is required") };
    let st = shared.lock();
    let Some(b) = st.find(venue, sym) else { return fail(404, &format!("{sym} is not listed on {venue}")) };
    let book = &st.books[b];
    let (bids, asks) = book.top(BOOK_LEVELS);
    let mut out = format!(
        "{{\"venue\":\"{venue}\",\"symbol\":\"{}\",\"listed\":{},\"seq\":{},\"views\":[",
        book.symbol, book.listed, book.seq
    );
    for (i, view) in book.views.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{\"depth\":{},\"u\":{}}}", view.depth, view.u);
    }
    out.push_str("],\"bids\":[");
    for (side, levels) in [("bids", bids), ("asks", asks)] {
        if side == "asks" {
            out.push_str("],\"asks\":[");
        }
        for (i, l) in levels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("[\"");
            push_fixed(&mut out, l.price.0, book.px_dec);
            out.push_str("\",\"");
            push_qty(&mut out, l.qty.0, book.qty_dec);
            out.push_str("\"]");
        }
    }
    out.push_str("]}");
    Reply::ok(out)
}
