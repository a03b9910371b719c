//! Bitget USDT-M futures in the simulator (venues.md §8, decisions §17): on `/v2/ws/public`,
//! `ticker` with `instType: USDT-FUTURES` (`fundingRate`, `nextFundingTime`, `markPrice`,
//! `holdingAmount`), a snapshot on subscribing and one each step (once a second); REST
//! `/api/v2/mix/market/contracts`, `/api/v2/mix/market/tickers` and
//! `/api/v2/mix/market/current-fund-rate` (`productType=USDT-FUTURES`). No liquidations
//! anywhere: Bitget publishes none.

use std::fmt::Write as _;

use rampart_engine::sim_perp::PerpId;
use rampart_engine::Venue;

use super::envelope::bitget_error as error;
use super::market::{State, Topic};
use super::perp::{self, px, qty, rate};
use super::text::{json_str, param};
use super::{now_ms, Reply, Shared};

/// The instrument type of these contracts.
pub(crate) const INST_TYPE: &str = "USDT-FUTURES";

/// Subscribes or unsubscribes one `USDT-FUTURES` argument for connection `id`.
pub(crate) fn subscribe(st: &mut State, id: u64, op: &str, arg: &serde_json::Value) {
    let channel = arg.get("channel").and_then(|x| x.as_str()).unwrap_or("");
    let inst = arg.get("instId").and_then(|x| x.as_str()).unwrap_or("");
    let perp = st.perps.find_listed(Venue::Bitget, inst);
    let (Some(perp), "ticker") = (perp, channel) else {
        let msg = format!("instType:{INST_TYPE},channel:{channel},instId:{inst} doesn't exist");
        let out = format!(
            "{{\"event\":\"error\",\"arg\":{arg},\"code\":30001,\"msg\":{},\"op\":{}}}",
            json_str(&msg),
            json_str(op)
        );
        st.send_to(id, out);
        return;
    };
    let topic = Topic::BitgetPerpTicker(perp);
    let ack = format!(
        "{{\"event\":\"{op}\",\"arg\":{{\"instType\":\"{INST_TYPE}\",\"channel\":\"ticker\",\"instId\":\"{inst}\"}}}}"
    );
    if op == "unsubscribe" {
        st.unsubscribe(id, topic);
        st.send_to(id, ack);
        return;
    }
    let fresh = st.subscribe(id, topic);
    st.send_to(id, ack);
    if fresh {
        if let Some(text) = ticker_message(st, perp, now_ms()) {
            st.stats.venue(Venue::Bitget).perp_messages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            st.send_to(id, text);
        }
    }
}

fn ticker_row(st: &State, perp: PerpId) -> Option<String> {
    let w = &st.perps.wire[perp.index()];
    let v = w.view?;
    let c = st.perps.contract(perp);
    let mark = px(c, v.mark);
    Some(format!(
        "{{\"instId\":\"{s}\",\"lastPr\":\"{mark}\",\"bidPr\":\"{mark}\",\"askPr\":\"{mark}\",\"markPrice\":\"{mark}\",\
         \"indexPrice\":\"{i}\",\"fundingRate\":\"{r}\",\"nextFundingTime\":\"{n}\",\"holdingAmount\":\"{oi}\",\
         \"symbolType\":1,\"symbol\":\"{s}\",\"deliveryPrice\":\"0\",\"ts\":\"{t}\"}}",
        s = c.symbol,
        i = px(c, w.index),
        r = rate(v.funding_rate),
        n = v.next_ms,
        oi = qty(c, v.oi),
        t = v.ts_ms,
    ))
}

fn ticker_message(st: &State, perp: PerpId, now: i64) -> Option<String> {
    let row = ticker_row(st, perp)?;
    let s = &st.perps.contract(perp).symbol;
    Some(format!(
        "{{\"action\":\"snapshot\",\"arg\":{{\"instType\":\"{INST_TYPE}\",\"channel\":\"ticker\",\"instId\":\"{s}\"}},\
         \"data\":[{row}],\"ts\":{now}}}"
    ))
}

/// A contract stepped: its ticker to the subscribers.
pub(crate) fn on_perp(st: &mut State, perp: PerpId, now: i64) {
    let topic = Topic::BitgetPerpTicker(perp);
    if !st.has_subs(&topic) {
        return;
    }
    if let Some(text) = ticker_message(st, perp, now) {
        st.publish_perp(Venue::Bitget, &topic, text);
    }
}

// ---------------------------------------------------------------------------------------------
// REST.

/// True for a route this module answers.
pub(crate) fn is_mix(route: &str) -> bool {
    route.starts_with("/api/v2/mix/")
}

/// Answers the contracts, tickers and current funding rate of `USDT-FUTURES`.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    match param(q, "productType") {
        Some(p) if p.eq_ignore_ascii_case(INST_TYPE) => {}
        _ => return error(400, "40034", "Parameter productType does not exist (this simulator serves USDT-FUTURES)"),
    }
    let st = shared.lock();
    let wanted = param(q, "symbol").filter(|s| !s.is_empty());
    if route.ends_with("current-fund-rate") && wanted.is_none() {
        return error(400, "40017", "Parameter symbol can not be empty");
    }
    let Some(perps) = st.perps.named(Venue::Bitget, wanted) else {
        return error(400, "40034", "Parameter symbol does not exist");
    };
    let rows: Vec<String> = match route {
        "/api/v2/mix/market/contracts" => perps.iter().map(|&p| contract_row(&st, p)).collect(),
        "/api/v2/mix/market/tickers" => st.perps.listed_rows(&perps, |p| ticker_row(&st, p)),
        _ => st.perps.listed_rows(&perps, |p| fund_rate_row(&st, p)),
    };
    let mut out = String::with_capacity(64 + rows.iter().map(String::len).sum::<usize>());
    let _ = write!(out, "{{\"code\":\"00000\",\"msg\":\"success\",\"requestTime\":{},\"data\":[", now_ms());
    out.push_str(&rows.join(","));
    out.push_str("]}");
    Reply::ok(out)
}

fn contract_row(st: &State, perp: PerpId) -> String {
    let c = st.perps.contract(perp);
    let hours = st.perps.wire[perp.index()].view.map_or(c.funding_interval_h, |v| v.interval_h);
    format!(
        "{{\"symbol\":\"{s}\",\"baseCoin\":\"{b}\",\"quoteCoin\":\"USDT\",\"symbolType\":\"perpetual\",\
         \"symbolStatus\":\"{status}\",\"fundInterval\":\"{hours}\",\"priceEndStep\":\"1\",\"sizeMultiplier\":\"{lot}\",\
         \"supportMarginCoins\":[\"USDT\"]}}",
        s = c.symbol,
        b = c.base,
        status = if st.perps.listed(perp) { "normal" } else { "offline" },
        lot = perp::lot_text(c),
    )
}

fn fund_rate_row(st: &State, perp: PerpId) -> Option<String> {
    let v = st.perps.wire[perp.index()].view?;
    let c = st.perps.contract(perp);
    Some(format!(
        "{{\"symbol\":\"{s}\",\"fundingRate\":\"{r}\",\"fundingRateInterval\":\"{h}\",\"nextUpdate\":\"{n}\",\
         \"minFundingRate\":\"-0.0075\",\"maxFundingRate\":\"0.0075\"}}",
        s = c.symbol,
        r = rate(v.funding_rate),
        h = v.interval_h,
        n = v.next_ms,
    ))
}
