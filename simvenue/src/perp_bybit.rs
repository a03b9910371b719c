//! Bybit linear perpetuals in the simulator (venues.md §8, decisions §17): the WebSocket path
//! `/v5/public/linear` with `tickers.{S}` (a snapshot on subscribing, then deltas carrying only
//! the fields that changed) and `allLiquidation.{S}` (every liquidation, batched every
//! [`BYBIT_BATCH_MS`](super::perp::BYBIT_BATCH_MS), `S: Buy` for a long liquidated), with the
//! spot path's `op` grammar (`bybit::on_text`); REST `/v5/market/instruments-info?category=linear`
//! (`fundingInterval` in minutes) and `/v5/market/tickers?category=linear`.
//!
//! Deltas go with each step of the contract (once a second), not every 100 ms: the model moves
//! once a second, and a delta is only sent when something changed.

use std::fmt::Write as _;

use rampart_engine::perp_window::PositionSide;
use rampart_engine::sim_perp::{PerpId, PerpView};
use rampart_engine::Venue;

use super::envelope::bybit_error as error;
use super::market::{State, Topic};
use super::perp::{self, px, qty, rate, usd, Liq, BYBIT_BATCH_MAX};
use super::text::param;
use super::{now_ms, Reply, Shared};

/// The topic of `tickers.{S}` or `allLiquidation.{S}` on the linear path.
pub(crate) fn topic_of(st: &State, name: &str) -> Option<Topic> {
    if let Some(sym) = name.strip_prefix("tickers.") {
        return st.perps.find_listed(Venue::Bybit, sym).map(Topic::BybitTicker);
    }
    let sym = name.strip_prefix("allLiquidation.")?;
    st.perps.find_listed(Venue::Bybit, sym).map(Topic::BybitLiquidation)
}

/// The topic's name, for Bybit's "already subscribed" refusal.
pub(crate) fn topic_name(st: &State, t: &Topic) -> Option<String> {
    match *t {
        Topic::BybitTicker(p) => Some(format!("tickers.{}", st.perps.contract(p).symbol)),
        Topic::BybitLiquidation(p) => Some(format!("allLiquidation.{}", st.perps.contract(p).symbol)),
        _ => None,
    }
}

/// A subscription made: a ticker's snapshot to connection `id`.
pub(crate) fn on_subscribed(st: &mut State, id: u64, topic: Topic, now: i64) {
    let Topic::BybitTicker(perp) = topic else { return };
    if let Some(text) = ticker_message(st, perp, None, now) {
        st.stats.venue(Venue::Bybit).perp_messages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        st.send_to(id, text);
    }
}

/// The fields of a ticker that differ from `since` (every field when `None`).
fn ticker_fields(st: &State, perp: PerpId, v: &PerpView, since: Option<&PerpView>) -> String {
    let c = st.perps.contract(perp);
    let w = &st.perps.wire[perp.index()];
    let mut out = format!("\"symbol\":\"{}\"", c.symbol);
    let changed = |f: fn(&PerpView) -> f64| since.is_none_or(|s| f(s) != f(v));
    if changed(|x| x.mark.to_f64()) {
        let _ = write!(out, ",\"markPrice\":\"{}\",\"indexPrice\":\"{}\"", px(c, v.mark), px(c, w.index));
    }
    if changed(|x| x.oi) {
        let _ = write!(
            out,
            ",\"openInterest\":\"{}\",\"openInterestValue\":\"{}\"",
            qty(c, v.oi),
            usd(v.oi * v.mark.to_f64())
        );
    }
    if changed(|x| x.funding_rate) {
        let _ = write!(out, ",\"fundingRate\":\"{}\"", rate(v.funding_rate));
    }
    if changed(|x| x.next_ms as f64) {
        let _ = write!(out, ",\"nextFundingTime\":\"{}\"", v.next_ms);
    }
    if changed(|x| f64::from(x.interval_h)) {
        let _ = write!(out, ",\"fundingIntervalHour\":\"{}\"", v.interval_h);
    }
    out
}

/// A `tickers` message: the snapshot (`since` `None`) or the delta since `since`; `None` when
/// the contract has no values or nothing changed.
fn ticker_message(st: &State, perp: PerpId, since: Option<&PerpView>, now: i64) -> Option<String> {
    let v = st.perps.wire[perp.index()].view?;
    if since.is_some_and(|s| *s == v) {
        return None;
    }
    let kind = if since.is_some() { "delta" } else { "snapshot" };
    let fields = ticker_fields(st, perp, &v, since);
    Some(format!(
        "{{\"topic\":\"tickers.{s}\",\"type\":\"{kind}\",\"data\":{{{fields}}},\"cs\":{cs},\"ts\":{now}}}",
        s = st.perps.contract(perp).symbol,
        cs = v.ts_ms,
    ))
}

/// A contract stepped: the delta to the ticker's subscribers.
pub(crate) fn on_perp(st: &mut State, perp: PerpId, now: i64) {
    let topic = Topic::BybitTicker(perp);
    let (sent, view) = {
        let w = &st.perps.wire[perp.index()];
        (w.bybit_sent, w.view)
    };
    st.perps.wire[perp.index()].bybit_sent = view;
    if !st.has_subs(&topic) {
        return;
    }
    // Nothing sent yet (no values when they subscribed): a snapshot.
    if let Some(text) = ticker_message(st, perp, sent.as_ref(), now) {
        st.publish_perp(Venue::Bybit, &topic, text);
    }
}

/// A liquidation stepped: it waits for the contract's next batch.
pub(crate) fn on_liquidation(st: &mut State, perp: PerpId, liq: Liq) {
    let w = &mut st.perps.wire[perp.index()];
    if w.batch.len() == BYBIT_BATCH_MAX {
        st.stats.venue(Venue::Bybit).liquidations_dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    w.batch.push(liq);
}

/// Sends every contract's waiting liquidations, one `allLiquidation` message per contract.
pub(crate) fn flush_liquidations(st: &mut State, now: i64) {
    for perp in st.perps.of_venue(Venue::Bybit) {
        if st.perps.wire[perp.index()].batch.is_empty() {
            continue;
        }
        let liqs = std::mem::take(&mut st.perps.wire[perp.index()].batch);
        let c = st.perps.contract(perp);
        let items: Vec<String> = liqs
            .iter()
            .map(|l| {
                let side = match l.side {
                    PositionSide::Long => "Buy",
                    PositionSide::Short => "Sell",
                };
                format!(
                    "{{\"T\":{},\"s\":\"{}\",\"S\":\"{side}\",\"v\":\"{}\",\"p\":\"{}\"}}",
                    l.ts_ms,
                    c.symbol,
                    qty(c, l.qty),
                    px(c, l.price)
                )
            })
            .collect();
        let text = format!(
            "{{\"topic\":\"allLiquidation.{}\",\"type\":\"snapshot\",\"ts\":{now},\"data\":[{}]}}",
            c.symbol,
            items.join(",")
        );
        for _ in &liqs {
            st.count_liquidation(Venue::Bybit);
        }
        st.publish_perp(Venue::Bybit, &Topic::BybitLiquidation(perp), text);
        let mut liqs = liqs;
        liqs.clear();
        st.perps.wire[perp.index()].batch = liqs;
    }
}

// ---------------------------------------------------------------------------------------------
// REST.

/// True for a request the linear REST answers.
pub(crate) fn is_linear(route: &str, q: &[(String, String)]) -> bool {
    route == "/v5/market/tickers" || (route == "/v5/market/instruments-info" && param(q, "category") == Some("linear"))
}

/// Answers `instruments-info` and `tickers` for `category=linear`.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    match param(q, "category") {
        Some("linear") => {}
        None | Some("") => return error(400, 10001, "params error: category is required"),
        Some(_) => return error(400, 10001, "params error: this simulator serves category=linear tickers only"),
    }
    let st = shared.lock();
    let wanted = param(q, "symbol");
    let Some(perps) = st.perps.named(Venue::Bybit, wanted) else {
        return error(200, 10001, "params error: symbol invalid");
    };
    let items: Vec<String> = if route == "/v5/market/tickers" {
        st.perps.listed_rows(&perps, |p| ticker_row(&st, p))
    } else {
        perps.iter().map(|&p| instrument_row(&st, p)).collect()
    };
    Reply::ok(format!(
        "{{\"retCode\":0,\"retMsg\":\"OK\",\"result\":{{\"category\":\"linear\",\"list\":[{}],\"nextPageCursor\":\"\"}},\
         \"retExtInfo\":{{}},\"time\":{}}}",
        items.join(","),
        now_ms()
    ))
}

fn instrument_row(st: &State, perp: PerpId) -> String {
    let c = st.perps.contract(perp);
    let hours = st.perps.wire[perp.index()].view.map_or(c.funding_interval_h, |v| v.interval_h);
    format!(
        "{{\"symbol\":\"{s}\",\"contractType\":\"LinearPerpetual\",\"status\":\"{status}\",\"baseCoin\":\"{b}\",\
         \"quoteCoin\":\"USDT\",\"settleCoin\":\"USDT\",\"launchTime\":\"1585526400000\",\"priceScale\":\"8\",\
         \"priceFilter\":{{\"tickSize\":\"{tick}\"}},\"lotSizeFilter\":{{\"qtyStep\":\"{lot}\"}},\
         \"fundingInterval\":{mins}}}",
        s = c.symbol,
        status = if st.perps.listed(perp) { "Trading" } else { "Closed" },
        b = c.base,
        tick = px(c, c.tick),
        lot = perp::lot_text(c),
        mins = u32::from(hours) * 60,
    )
}

fn ticker_row(st: &State, perp: PerpId) -> Option<String> {
    let v = st.perps.wire[perp.index()].view?;
    Some(format!("{{{}}}", ticker_fields(st, perp, &v, None)))
}
