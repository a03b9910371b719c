//! OKX USDT swaps in the simulator (venues.md §8, decisions §17): on `/ws/v5/public`, the
//! channels `liquidation-orders` (`instType: SWAP`, every swap's; `sz` in contracts, `bkPx`; a
//! seeded share left out and a step's several sent out of order at times, so `partial` is
//! real), `open-interest` (every [`OI_PUSH_MS`] when it changed) and `funding-rate` (every 30 to
//! 90 s, `fundingTime` the next settlement); REST `/api/v5/public/instruments?instType=SWAP`
//! (`ctVal`), `/api/v5/public/open-interest?instType=SWAP` and
//! `/api/v5/public/funding-rate?instId=`. Each subscription gets the channel's current value at
//! once (OKX pushes on subscribing); `liquidation-orders` has none.

use std::fmt::Write as _;

use rampart_engine::fixed::Price;
use rampart_engine::perp_window::PositionSide;
use rampart_engine::sim_perp::PerpId;
use rampart_engine::Venue;

use super::envelope::okx_error as error;
use super::market::{State, Topic};
use super::perp::{self, px, qty, rate, usd, Liq, OKX_OMITTED_SHARE};
use super::text::{decimals_of, fixed, json_str, param};
use super::{Reply, Shared};

/// Open interest is pushed at most this often, when it changed.
pub(crate) const OI_PUSH_MS: i64 = 3_000;
/// Funding pushes are this far apart at least, and at most twice it.
const FUNDING_PUSH_MS_MIN: i64 = 30_000;
/// Chance that a step's several liquidations go out in reverse order.
const REORDER_SHARE: f64 = 0.3;

/// The channels of this module.
pub(crate) fn is_perp_channel(channel: &str) -> bool {
    matches!(channel, "liquidation-orders" | "open-interest" | "funding-rate")
}

/// Subscribes or unsubscribes one argument of a perpetual channel for connection `id`; the
/// acknowledgement (or OKX's error event) and, on a new subscription, the current value.
pub(crate) fn subscribe(st: &mut State, id: u64, op: &str, arg: &serde_json::Value, req_id: Option<&str>, now: i64) {
    let channel = arg.get("channel").and_then(|c| c.as_str()).unwrap_or("");
    let inst = arg.get("instId").and_then(|c| c.as_str()).unwrap_or("");
    let inst_type = arg.get("instType").and_then(|c| c.as_str()).unwrap_or("");
    let (topic, arg_text) = if channel == "liquidation-orders" {
        if inst_type != "SWAP" {
            let msg = format!("Illegal request: {{\"channel\":\"{channel}\",\"instType\":\"{inst_type}\"}}");
            return event_error(st, id, req_id, "60018", &msg);
        }
        (Topic::OkxLiquidations, format!("{{\"channel\":\"{channel}\",\"instType\":\"SWAP\"}}"))
    } else {
        let Some(perp) = st.perps.find_listed(Venue::Okx, inst) else {
            let msg = format!(
                "Wrong URL or channel:{channel},instId:{inst} doesn't exist. Please use the correct URL, channel and \
                 parameters referring to API document."
            );
            return event_error(st, id, req_id, "60018", &msg);
        };
        let topic = if channel == "open-interest" { Topic::OkxOpenInterest(perp) } else { Topic::OkxFunding(perp) };
        (topic, format!("{{\"channel\":\"{channel}\",\"instId\":\"{inst}\"}}"))
    };
    let conn_id = st.conns.get(&id).map(|c| c.conn_id.clone()).unwrap_or_default();
    let mut ack = String::from("{");
    if let Some(r) = req_id {
        let _ = write!(ack, "\"id\":{},", json_str(r));
    }
    let _ = write!(ack, "\"event\":\"{op}\",\"arg\":{arg_text},\"connId\":\"{conn_id}\"}}");
    if op == "unsubscribe" {
        st.unsubscribe(id, topic);
        st.send_to(id, ack);
        return;
    }
    let fresh = st.subscribe(id, topic);
    st.send_to(id, ack);
    let first = match topic {
        Topic::OkxOpenInterest(p) if fresh => oi_message(st, p),
        Topic::OkxFunding(p) if fresh => funding_message(st, p, now),
        _ => None,
    };
    if let Some(text) = first {
        st.stats.venue(Venue::Okx).perp_messages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        st.send_to(id, text);
    }
}

fn event_error(st: &State, id: u64, req_id: Option<&str>, code: &str, msg: &str) {
    let mut out = String::from("{");
    if let Some(r) = req_id {
        let _ = write!(out, "\"id\":{},", json_str(r));
    }
    let conn_id = st.conns.get(&id).map(|c| c.conn_id.clone()).unwrap_or_default();
    let _ = write!(out, "\"event\":\"error\",\"code\":\"{code}\",\"msg\":{},\"connId\":\"{conn_id}\"}}", json_str(msg));
    st.send_to(id, out);
}

fn family(symbol: &str) -> &str {
    symbol.strip_suffix("-SWAP").unwrap_or(symbol)
}

fn oi_row(st: &State, perp: PerpId) -> Option<String> {
    let v = st.perps.wire[perp.index()].view?;
    let c = st.perps.contract(perp);
    Some(format!(
        "{{\"instId\":\"{s}\",\"instType\":\"SWAP\",\"oi\":\"{oi}\",\"oiCcy\":\"{base:.8}\",\"oiUsd\":\"{u}\",\"ts\":\"{t}\"}}",
        s = c.symbol,
        oi = qty(c, v.oi),
        base = v.oi,
        u = usd(v.oi * v.mark.to_f64()),
        t = v.ts_ms,
    ))
}

fn oi_message(st: &State, perp: PerpId) -> Option<String> {
    let row = oi_row(st, perp)?;
    let s = &st.perps.contract(perp).symbol;
    Some(format!("{{\"arg\":{{\"channel\":\"open-interest\",\"instId\":\"{s}\"}},\"data\":[{row}]}}"))
}

/// A `funding-rate` row at `now` (a stale contract's at its frozen values' time: the REST answer
/// of `perp_stale` brings nothing new).
fn funding_row(st: &State, perp: PerpId, now: i64) -> Option<String> {
    let wire = &st.perps.wire[perp.index()];
    let v = wire.view?;
    let now = if wire.stale { v.ts_ms } else { now };
    let c = st.perps.contract(perp);
    let interval_ms = i64::from(v.interval_h) * 3_600_000;
    Some(format!(
        "{{\"formulaType\":\"noRate\",\"fundingRate\":\"{r}\",\"fundingTime\":\"{n}\",\"instId\":\"{s}\",\
         \"instType\":\"SWAP\",\"maxFundingRate\":\"0.0075\",\"method\":\"current_period\",\
         \"minFundingRate\":\"-0.0075\",\"nextFundingRate\":\"\",\"nextFundingTime\":\"{nn}\",\"ts\":\"{now}\"}}",
        r = rate(v.funding_rate),
        n = v.next_ms,
        s = c.symbol,
        nn = v.next_ms + interval_ms,
    ))
}

fn funding_message(st: &State, perp: PerpId, now: i64) -> Option<String> {
    let row = funding_row(st, perp, now)?;
    let s = &st.perps.contract(perp).symbol;
    Some(format!("{{\"arg\":{{\"channel\":\"funding-rate\",\"instId\":\"{s}\"}},\"data\":[{row}]}}"))
}

/// A liquidation stepped: it waits for the end of the contract's step.
pub(crate) fn on_liquidation(st: &mut State, perp: PerpId, liq: Liq) {
    st.perps.wire[perp.index()].batch.push(liq);
}

/// The end of a contract's step (its mark now `mark`): its liquidations go out in one message,
/// the model's less a seeded share, at times in reverse order; an injected one (sent at the
/// mark itself) is always kept.
pub(crate) fn end_of_step(st: &mut State, perp: PerpId, mark: Price) {
    let mut liqs = std::mem::take(&mut st.perps.wire[perp.index()].batch);
    if liqs.is_empty() {
        st.perps.wire[perp.index()].batch = liqs;
        return;
    }
    let rng = &mut st.perps.rng;
    liqs.retain(|l| l.price == mark || !rng.chance(OKX_OMITTED_SHARE));
    if liqs.len() >= 2 && rng.chance(REORDER_SHARE) {
        liqs.reverse();
    }
    let c = st.perps.contract(perp);
    let details: Vec<String> = liqs
        .iter()
        .map(|l| {
            let (side, pos) = match l.side {
                PositionSide::Long => ("sell", "long"),
                PositionSide::Short => ("buy", "short"),
            };
            format!(
                "{{\"bkLoss\":\"0\",\"bkPx\":\"{}\",\"ccy\":\"\",\"posSide\":\"{pos}\",\"side\":\"{side}\",\"sz\":\"{}\",\
                 \"ts\":\"{}\"}}",
                px(c, l.price),
                qty(c, l.qty),
                l.ts_ms
            )
        })
        .collect();
    if !details.is_empty() {
        let f = family(&c.symbol);
        let text = format!(
            "{{\"arg\":{{\"channel\":\"liquidation-orders\",\"instType\":\"SWAP\"}},\"data\":[{{\"details\":[{}],\
             \"instFamily\":\"{f}\",\"instId\":\"{s}\",\"instType\":\"SWAP\",\"uly\":\"{f}\"}}]}}",
            details.join(","),
            s = c.symbol,
        );
        for _ in &details {
            st.count_liquidation(Venue::Okx);
        }
        st.publish_perp(Venue::Okx, &Topic::OkxLiquidations, text);
    }
    liqs.clear();
    st.perps.wire[perp.index()].batch = liqs;
}

/// A contract stepped: open interest pushed when it changed and its last push is
/// [`OI_PUSH_MS`] old.
pub(crate) fn on_perp(st: &mut State, perp: PerpId, now: i64) {
    let w = &st.perps.wire[perp.index()];
    let Some(v) = w.view else { return };
    if w.okx_funding_due_ms == 0 {
        let first = FUNDING_PUSH_MS_MIN + st.perps.rng.below(FUNDING_PUSH_MS_MIN as u64) as i64;
        st.perps.wire[perp.index()].okx_funding_due_ms = now + first;
    }
    let (at, oi) = st.perps.wire[perp.index()].okx_oi_pushed;
    if v.oi == oi || now - at < OI_PUSH_MS {
        return;
    }
    st.perps.wire[perp.index()].okx_oi_pushed = (now, v.oi);
    let topic = Topic::OkxOpenInterest(perp);
    if st.has_subs(&topic) {
        if let Some(text) = oi_message(st, perp) {
            st.publish_perp(Venue::Okx, &topic, text);
        }
    }
}

/// Funding pushes that are due, each contract's next one 30 to 90 s later.
pub(crate) fn funding_due(st: &mut State, now: i64) {
    for perp in st.perps.of_venue(Venue::Okx) {
        let w = &st.perps.wire[perp.index()];
        if w.okx_funding_due_ms == 0 || w.okx_funding_due_ms > now || w.stale || !st.perps.listed(perp) {
            continue;
        }
        let next = FUNDING_PUSH_MS_MIN + st.perps.rng.below(2 * FUNDING_PUSH_MS_MIN as u64) as i64;
        st.perps.wire[perp.index()].okx_funding_due_ms = now + next;
        let topic = Topic::OkxFunding(perp);
        if st.has_subs(&topic) {
            if let Some(text) = funding_message(st, perp, now) {
                st.publish_perp(Venue::Okx, &topic, text);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// REST.

/// True for a request this module answers.
pub(crate) fn is_swap(route: &str, q: &[(String, String)]) -> bool {
    matches!(route, "/api/v5/public/open-interest" | "/api/v5/public/funding-rate")
        || (route == "/api/v5/public/instruments" && param(q, "instType") == Some("SWAP"))
}

/// Answers the swap listing, open interest and funding rate.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    let st = shared.lock();
    let now = super::now_ms();
    let wanted = param(q, "instId").filter(|s| *s != "ANY" && !s.is_empty());
    if route == "/api/v5/public/funding-rate" && param(q, "instId").is_none_or(str::is_empty) {
        return error(400, "50014", "Parameter instId can not be empty.");
    }
    if route != "/api/v5/public/funding-rate" && param(q, "instType") != Some("SWAP") {
        return error(400, "51000", "Parameter instType error (this simulator serves SWAP here)");
    }
    let Some(perps) = st.perps.named(Venue::Okx, wanted) else {
        return error(400, "51001", "Instrument ID does not exist");
    };
    let rows: Vec<String> = match route {
        "/api/v5/public/instruments" => perps.iter().map(|&p| instrument_row(&st, p)).collect(),
        "/api/v5/public/open-interest" => st.perps.listed_rows(&perps, |p| oi_row(&st, p)),
        _ => st.perps.listed_rows(&perps, |p| funding_row(&st, p, now)),
    };
    Reply::ok(format!("{{\"code\":\"0\",\"msg\":\"\",\"data\":[{}]}}", rows.join(",")))
}

fn instrument_row(st: &State, perp: PerpId) -> String {
    let c = st.perps.contract(perp);
    let f = family(&c.symbol);
    format!(
        "{{\"instId\":\"{s}\",\"instType\":\"SWAP\",\"instFamily\":\"{f}\",\"uly\":\"{f}\",\"ctType\":\"linear\",\
         \"settleCcy\":\"USDT\",\"ctVal\":\"{cv}\",\"ctValCcy\":\"{b}\",\"ctMult\":\"1\",\"state\":\"{state}\",\
         \"tickSz\":\"{tick}\",\"lotSz\":\"{lot}\",\"minSz\":\"{lot}\",\"baseCcy\":\"\",\"quoteCcy\":\"\",\
         \"listTime\":\"1611916800000\"}}",
        s = c.symbol,
        cv = fixed(c.ct_val.0 as i64, decimals_of(c.ct_val.0 as i64)),
        b = c.base,
        state = if st.perps.listed(perp) { "live" } else { "suspend" },
        tick = px(c, c.tick),
        lot = perp::lot_text(c),
    )
}
