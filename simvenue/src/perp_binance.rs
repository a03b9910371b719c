//! Binance USDⓈ-M perpetuals in the simulator (venues.md §8, decisions §17): the streams
//! `<sym>@forceOrder`, `!forceOrder@arr`, `<sym>@markPrice@1s` and `!markPrice@arr@1s` on the
//! routed paths `/market/ws/…` (raw) and `/market/stream?streams=` (combined), with the same
//! `SUBSCRIBE` grammar as spot (`binance::on_text`); REST `/fapi/v1/exchangeInfo`,
//! `/fapi/v1/openInterest`, `/fapi/v1/premiumIndex` and `/fapi/v1/fundingInfo`.
//!
//! The venue's rules kept: **at most one liquidation per contract per second, the largest**
//! (`perp::Wire::binance_held`); these streams subscribed on the spot path `/ws/…` (the unrouted
//! one) are accepted and stay silent; no open-interest stream (REST only).
//!
//! Not served: `/futures/data/openInterestHist` (§17 keeps no backfill, so no consumer reads
//! it), and no REST weight is counted (`POST /sim/rest` with route `perp` causes a 429 or 418 on
//! demand instead).

use std::fmt::Write as _;

use rampart_engine::perp_window::PositionSide;
use rampart_engine::sim_perp::PerpId;
use rampart_engine::Venue;

use super::envelope::{binance_error as error, wrap};
use super::market::{State, Topic};
use super::perp::{self, px, qty, rate, Liq};
use super::text::param;
use super::{now_ms, Reply, Shared};

/// The perpetual stream kinds, which the spot path accepts and never feeds.
pub(crate) fn is_perp_stream(name: &str) -> bool {
    matches!(name, "!forceorder@arr" | "!markprice@arr@1s" | "!markprice@arr")
        || name.ends_with("@forceorder")
        || name.ends_with("@markprice@1s")
        || name.ends_with("@markprice")
}

/// The topic of a stream name on the futures paths: `Ok(None)` for a known kind on an unknown
/// symbol, `Err` for a kind the simulator does not produce there.
pub(crate) fn topic_of(st: &State, name: &str) -> Result<Option<Topic>, ()> {
    match name {
        "!forceorder@arr" => return Ok(Some(Topic::BinanceForceOrderAll)),
        "!markprice@arr@1s" | "!markprice@arr" => return Ok(Some(Topic::BinanceMarkPriceAll)),
        _ => {}
    }
    let (sym, kind) = name.split_once('@').ok_or(())?;
    let perp = st.perps.find_listed(Venue::Binance, &sym.to_ascii_uppercase());
    match kind {
        "forceorder" => Ok(perp.map(Topic::BinanceForceOrder)),
        "markprice@1s" | "markprice" => Ok(perp.map(Topic::BinanceMarkPrice)),
        _ => Err(()),
    }
}

fn stream(st: &State, perp: PerpId, suffix: &str) -> String {
    format!("{}{suffix}", st.perps.contract(perp).symbol.to_ascii_lowercase())
}

/// A liquidation stepped: held as its second's largest.
pub(crate) fn on_liquidation(st: &mut State, perp: PerpId, liq: Liq) {
    let held = &mut st.perps.wire[perp.index()].binance_held;
    match held {
        Some(h) if h.ts_ms.div_euclid(1000) == liq.ts_ms.div_euclid(1000) => {
            if liq.usd() > h.usd() {
                *h = liq;
            }
        }
        Some(_) => {
            // A new second: the held one goes first.
            let old = held.replace(liq);
            if let Some(old) = old {
                send_liquidation(st, perp, &old);
            }
        }
        None => *held = Some(liq),
    }
}

/// Sends each held liquidation whose second has ended.
pub(crate) fn flush_held(st: &mut State, now: i64) {
    let second = now.div_euclid(1000);
    for perp in st.perps.of_venue(Venue::Binance) {
        let w = &mut st.perps.wire[perp.index()];
        if w.binance_held.is_some_and(|h| h.ts_ms.div_euclid(1000) < second) {
            if let Some(h) = w.binance_held.take() {
                send_liquidation(st, perp, &h);
            }
        }
    }
}

fn send_liquidation(st: &State, perp: PerpId, l: &Liq) {
    st.count_liquidation(Venue::Binance);
    let c = st.perps.contract(perp);
    let side = match l.side {
        PositionSide::Long => "SELL",
        PositionSide::Short => "BUY",
    };
    let (p, q) = (px(c, l.price), qty(c, l.qty));
    let raw = format!(
        "{{\"e\":\"forceOrder\",\"E\":{e},\"o\":{{\"s\":\"{s}\",\"S\":\"{side}\",\"o\":\"LIMIT\",\"f\":\"IOC\",\
         \"q\":\"{q}\",\"p\":\"{p}\",\"ap\":\"{p}\",\"X\":\"FILLED\",\"l\":\"{q}\",\"z\":\"{q}\",\"T\":{t}}}}}",
        e = l.ts_ms.div_euclid(1000) * 1000 + 999,
        s = c.symbol,
        t = l.ts_ms,
    );
    let one = Topic::BinanceForceOrder(perp);
    for (topic, name) in
        [(one, stream(st, perp, "@forceOrder")), (Topic::BinanceForceOrderAll, "!forceOrder@arr".into())]
    {
        if st.has_subs(&topic) {
            st.stats.venue(Venue::Binance).perp_messages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            st.publish_binance(&topic, |raw| wrap(&name, raw), |_| raw.clone());
        }
    }
}

/// The `markPriceUpdate` payload of contract `perp`, if it has values.
fn mark_price(st: &State, perp: PerpId, event_ms: i64) -> Option<String> {
    let w = &st.perps.wire[perp.index()];
    let v = w.view?;
    let c = st.perps.contract(perp);
    Some(format!(
        "{{\"e\":\"markPriceUpdate\",\"E\":{event_ms},\"s\":\"{s}\",\"p\":\"{p}\",\"i\":\"{i}\",\"P\":\"{p}\",\
         \"r\":\"{r}\",\"T\":{t}}}",
        s = c.symbol,
        p = px(c, v.mark),
        i = px(c, w.index),
        r = rate(v.funding_rate),
        t = v.next_ms,
    ))
}

/// A contract stepped: its `<sym>@markPrice@1s` push.
pub(crate) fn on_perp(st: &mut State, perp: PerpId, now: i64) {
    let topic = Topic::BinanceMarkPrice(perp);
    if !st.has_subs(&topic) {
        return;
    }
    let Some(raw) = mark_price(st, perp, now) else { return };
    let name = stream(st, perp, "@markPrice@1s");
    st.stats.venue(Venue::Binance).perp_messages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    st.publish_binance(&topic, |r| wrap(&name, r), |_| raw.clone());
}

/// `!markPrice@arr@1s`: every listed contract not stale, once a second.
pub(crate) fn mark_price_arr(st: &State, now: i64) {
    let topic = Topic::BinanceMarkPriceAll;
    if !st.has_subs(&topic) {
        return;
    }
    let items: Vec<String> = st
        .perps
        .of_venue(Venue::Binance)
        .into_iter()
        .filter(|&p| st.perps.listed(p) && !st.perps.wire[p.index()].stale)
        .filter_map(|p| mark_price(st, p, now))
        .collect();
    if items.is_empty() {
        return;
    }
    let raw = format!("[{}]", items.join(","));
    st.stats.venue(Venue::Binance).perp_messages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    st.publish_binance(&topic, |r| wrap("!markPrice@arr@1s", r), |_| raw.clone());
}

// ---------------------------------------------------------------------------------------------
// REST.

/// Answers a `/fapi/v1/…` route.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    let st = shared.lock();
    match route {
        "/fapi/v1/exchangeInfo" => exchange_info(&st),
        "/fapi/v1/openInterest" => open_interest(&st, q),
        "/fapi/v1/premiumIndex" => premium_index(&st, q),
        _ => funding_info(&st),
    }
}

fn exchange_info(st: &State) -> Reply {
    let mut out = format!(
        "{{\"timezone\":\"UTC\",\"serverTime\":{},\"futuresType\":\"U_MARGINED\",\"rateLimits\":[\
         {{\"rateLimitType\":\"REQUEST_WEIGHT\",\"interval\":\"MINUTE\",\"intervalNum\":1,\"limit\":2400}}],\
         \"assets\":[],\"symbols\":[",
        now_ms()
    );
    for (k, perp) in st.perps.of_venue(Venue::Binance).into_iter().enumerate() {
        let c = st.perps.contract(perp);
        if k > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"symbol\":\"{s}\",\"pair\":\"{s}\",\"contractType\":\"PERPETUAL\",\"deliveryDate\":4133404800000,\
             \"onboardDate\":1569398400000,\"status\":\"{status}\",\"baseAsset\":\"{b}\",\"quoteAsset\":\"USDT\",\
             \"marginAsset\":\"USDT\",\"pricePrecision\":8,\"quantityPrecision\":8,\"underlyingType\":\"COIN\",\
             \"filters\":[{{\"filterType\":\"PRICE_FILTER\",\"tickSize\":\"{tick}\"}},\
             {{\"filterType\":\"LOT_SIZE\",\"stepSize\":\"{lot}\"}}]}}",
            s = c.symbol,
            status = if st.perps.listed(perp) { "TRADING" } else { "SETTLING" },
            b = c.base,
            tick = px(c, c.tick),
            lot = perp::lot_text(c),
        );
        if k == 0 {
            // A quarterly contract beside the perpetuals, as the real listing has.
            let _ = write!(
                out,
                ",{{\"symbol\":\"{s}_261225\",\"pair\":\"{s}\",\"contractType\":\"CURRENT_QUARTER\",\
                 \"status\":\"TRADING\",\"baseAsset\":\"{b}\",\"quoteAsset\":\"USDT\",\"marginAsset\":\"USDT\"}}",
                s = c.symbol,
                b = c.base,
            );
        }
    }
    out.push_str("]}");
    Reply::ok(out)
}

/// The contract named by `symbol`, or Binance's refusal.
fn symbol_param(st: &State, q: &[(String, String)]) -> Result<Option<PerpId>, Reply> {
    match param(q, "symbol") {
        None => Ok(None),
        Some("") => Err(error(400, -1102, "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.")),
        Some(s) => {
            st.perps.find_listed(Venue::Binance, s).map(Some).ok_or_else(|| error(400, -1121, "Invalid symbol."))
        }
    }
}

fn open_interest(st: &State, q: &[(String, String)]) -> Reply {
    let perp = match symbol_param(st, q) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return error(400, -1102, "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.")
        }
        Err(r) => return r,
    };
    let c = st.perps.contract(perp);
    let Some(v) = st.perps.wire[perp.index()].view else { return error(400, -1121, "Invalid symbol.") };
    Reply::ok(format!("{{\"openInterest\":\"{}\",\"symbol\":\"{}\",\"time\":{}}}", qty(c, v.oi), c.symbol, v.ts_ms))
}

fn premium_one(st: &State, perp: PerpId) -> Option<String> {
    let w = &st.perps.wire[perp.index()];
    let v = w.view?;
    let c = st.perps.contract(perp);
    Some(format!(
        "{{\"symbol\":\"{s}\",\"markPrice\":\"{p}\",\"indexPrice\":\"{i}\",\"estimatedSettlePrice\":\"{p}\",\
         \"lastFundingRate\":\"{r}\",\"interestRate\":\"0.00010000\",\"nextFundingTime\":{n},\"time\":{t}}}",
        s = c.symbol,
        p = px(c, v.mark),
        i = px(c, w.index),
        r = rate(v.funding_rate),
        n = v.next_ms,
        t = v.ts_ms,
    ))
}

fn premium_index(st: &State, q: &[(String, String)]) -> Reply {
    match symbol_param(st, q) {
        Err(r) => r,
        Ok(Some(p)) => match premium_one(st, p) {
            Some(one) => Reply::ok(one),
            None => error(400, -1121, "Invalid symbol."),
        },
        Ok(None) => {
            let all: Vec<String> = st
                .perps
                .of_venue(Venue::Binance)
                .into_iter()
                .filter(|&p| st.perps.listed(p))
                .filter_map(|p| premium_one(st, p))
                .collect();
            Reply::ok(format!("[{}]", all.join(",")))
        }
    }
}

/// The contracts whose funding interval is not the default 8 h (the venue lists only those).
fn funding_info(st: &State) -> Reply {
    let mut items = Vec::new();
    for perp in st.perps.of_venue(Venue::Binance).into_iter().filter(|&p| st.perps.listed(p)) {
        let c = st.perps.contract(perp);
        let hours = st.perps.wire[perp.index()].view.map_or(c.funding_interval_h, |v| v.interval_h);
        if hours != 8 {
            items.push(format!(
                "{{\"symbol\":\"{}\",\"adjustedFundingRateCap\":\"0.02000000\",\
                 \"adjustedFundingRateFloor\":\"-0.02000000\",\"fundingIntervalHours\":{hours},\"disclaimer\":false}}",
                c.symbol
            ));
        }
    }
    Reply::ok(format!("[{}]", items.join(",")))
}
