//! Bybit v5 spot in the simulator (venues.md §2): REST `instruments-info` and `kline`; the
//! public spot WebSocket `/v5/public/spot` with `op` `subscribe`/`unsubscribe`/`ping` and the
//! topics `orderbook.{1,50,200,1000}.{SYM}` and `publicTrade.{SYM}`.
//!
//! Books: each subscribed depth is a view of the true book with its own `u`. Subscribing sends
//! the view's snapshot; every market step then sends one delta with `u + 1` carrying the levels
//! that entered, changed or left the top N (leaving = size `"0"`), or nothing when the top N did
//! not change. Depth 1 sends snapshots only, and re-sends the same snapshot with the same `u`
//! after [`BYBIT_DEPTH1_REPEAT_MS`] without a change. A reset sends a `u=1` snapshot; a
//! delisting sends `u=1` with empty sides and then nothing. `seq` (cross sequence) increases by
//! a random step per message, as on the venue it is monotonic but not consecutive.
//!
//! Limits: at most [`ARGS_PER_REQUEST_MAX`] args per request (more is refused with
//! `success:false`, nothing subscribed).

use std::fmt::Write as _;

use rampart_engine::book::Level;
use rampart_engine::feed::intervals::rest_timeframe;
use rampart_engine::Venue;

pub(crate) use super::envelope::bybit_error as error;
use super::market::{
    bar_volume, bars, BookState, BybitView, Endpoint, Kill, State, Topic, TradeRec, BYBIT_DEPTH1_REPEAT_MS,
};
use super::perp_bybit;
use super::text::{fixed, int_param, json_str, param, push_fixed, push_qty};
use super::{now_ms, Reply, Shared};

/// Args one subscribe request may carry (spot).
pub(crate) const ARGS_PER_REQUEST_MAX: usize = 10;
/// The spot book depths.
const DEPTHS: [u16; 4] = [1, 50, 200, 1000];
/// Most klines per request.
const KLINE_LIMIT_MAX: i64 = 1000;

fn ok(result: &str) -> Reply {
    Reply::ok(format!(
        "{{\"retCode\":0,\"retMsg\":\"OK\",\"result\":{result},\"retExtInfo\":{{}},\"time\":{}}}",
        now_ms()
    ))
}

/// Answers a Bybit REST route.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    if route == "/v5/market/instruments-info" {
        instruments(shared, q)
    } else {
        kline(shared, q)
    }
}

fn instruments(shared: &Shared, q: &[(String, String)]) -> Reply {
    match param(q, "category") {
        Some("spot") => {}
        None | Some("") => return error(400, 10001, "params error: category is required"),
        Some(_) => return error(400, 10001, "params error: this simulator serves category=spot only"),
    }
    let st = shared.lock();
    let books: Vec<&BookState> = match param(q, "symbol") {
        Some(s) => match st.find_listed(Venue::Bybit, s).filter(|&b| st.books[b].symbol == s) {
            Some(b) => vec![&st.books[b]],
            None => return error(400, 10001, "params error: symbol invalid"),
        },
        None => {
            st.registry.venue_books(Venue::Bybit).iter().map(|id| &st.books[id.index()]).filter(|b| b.listed).collect()
        }
    };
    let mut out = String::with_capacity(64 + books.len() * 700);
    out.push_str("{\"category\":\"spot\",\"list\":[");
    for (i, b) in books.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"symbolId\":{id},\"symbol\":\"{sym}\",\"baseCoin\":\"{base}\",\"quoteCoin\":\"{quote}\",\"innovation\":\"0\",\
             \"status\":\"Trading\",\"marginTrading\":\"none\",\"stTag\":\"0\",\"lotSizeFilter\":{{\"basePrecision\":\"{lot}\",\
             \"quotePrecision\":\"0.00000001\",\"minOrderQty\":\"{lot}\",\"maxOrderQty\":\"9000000000\",\"minOrderAmt\":\"5\",\
             \"maxOrderAmt\":\"8000000\",\"maxLimitOrderQty\":\"9000000000\",\"maxMarketOrderQty\":\"4500000000\",\
             \"postOnlyMaxLimitOrderSize\":\"60000\"}},\"priceFilter\":{{\"tickSize\":\"{tick}\"}},\
             \"riskParameters\":{{\"priceLimitRatioX\":\"0.005\",\"priceLimitRatioY\":\"0.01\"}},\"symbolType\":\"\"}}",
            id = b.id.0 + 1,
            sym = b.symbol,
            base = b.base,
            quote = b.quote,
            lot = fixed(b.lot, b.qty_dec),
            tick = fixed(b.tick, b.px_dec),
        );
    }
    out.push_str("]}");
    ok(&out)
}

fn kline(shared: &Shared, q: &[(String, String)]) -> Reply {
    match param(q, "category") {
        Some("spot") => {}
        // Rationale: Bybit defaults to linear and silently serves futures (venues.md §6 item 13);
        // an empty linear answer keeps the mistake visible without inventing futures data.
        None => return ok("{\"symbol\":\"\",\"category\":\"linear\",\"list\":[]}"),
        Some(_) => return error(400, 10001, "params error: this simulator serves category=spot only"),
    }
    let Some(symbol) = param(q, "symbol").filter(|s| !s.is_empty()) else {
        return error(400, 10001, "params error: symbol is required");
    };
    let Some(tf) = param(q, "interval").and_then(|s| rest_timeframe(Venue::Bybit, s)) else {
        return error(400, 10001, "params error: interval invalid (5, 15, 60, 240, D, W)");
    };
    let limit = match int_param(q, "limit") {
        Ok(None) => 200,
        Ok(Some(l)) if (1..=KLINE_LIMIT_MAX).contains(&l) => l as usize,
        _ => return error(400, 10001, "params error: limit must be 1-1000"),
    };
    let (Ok(start), Ok(end)) = (int_param(q, "start"), int_param(q, "end")) else {
        return error(400, 10001, "params error: start and end must be integers (ms)");
    };
    let st = shared.lock();
    let Some(b) = st.find_listed(Venue::Bybit, symbol).filter(|&b| st.books[b].symbol == symbol) else {
        return error(400, 10001, "Not supported symbols");
    };
    let book = &st.books[b];
    let all = bars(book, tf, now_ms());
    let in_range: Vec<_> =
        all.iter().filter(|c| start.is_none_or(|s| c.open_ms >= s) && end.is_none_or(|e| c.open_ms <= e)).collect();
    // With only `start`, the bars right after it; otherwise the newest in range. Newest first.
    let picked: Vec<_> = if start.is_some() && end.is_none() {
        in_range.iter().take(limit).rev().collect()
    } else {
        in_range.iter().rev().take(limit).collect()
    };
    let mut out = String::with_capacity(64 + picked.len() * 120);
    let _ = write!(out, "{{\"symbol\":\"{}\",\"category\":\"spot\",\"list\":[", book.symbol);
    for (i, c) in picked.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let v = bar_volume(book, tf, c);
        let _ = write!(
            out,
            "[\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\"]",
            c.open_ms,
            fixed(c.open.0, book.px_dec),
            fixed(c.high.0, book.px_dec),
            fixed(c.low.0, book.px_dec),
            fixed(c.close.0, book.px_dec),
            fixed(i64::try_from(v.base).unwrap_or(i64::MAX), book.qty_dec),
            fixed(v.quote, 8),
        );
    }
    out.push_str("]}");
    ok(&out)
}

// ---------------------------------------------------------------------------------------------
// WebSocket.

/// The topic of a topic string; `None` when it is not one this simulator serves for a listed
/// pair (the symbol must be uppercase, as on the venue).
fn topic_of(st: &State, s: &str) -> Option<Topic> {
    if let Some(rest) = s.strip_prefix("orderbook.") {
        let (depth, sym) = rest.split_once('.')?;
        let depth: u16 = depth.parse().ok().filter(|d| DEPTHS.contains(d))?;
        let b = st.find_listed(Venue::Bybit, sym).filter(|&b| st.books[b].symbol == sym)?;
        return Some(Topic::BybitBook { book: st.books[b].id, depth });
    }
    let sym = s.strip_prefix("publicTrade.")?;
    let b = st.find_listed(Venue::Bybit, sym).filter(|&b| st.books[b].symbol == sym)?;
    Some(Topic::BybitTrade(st.books[b].id))
}

fn op_reply(st: &State, id: u64, success: bool, ret_msg: &str, req_id: Option<&str>, op: &str) {
    let conn_id = st.conns.get(&id).map(|c| c.conn_id.clone()).unwrap_or_default();
    let mut out = format!("{{\"success\":{success},\"ret_msg\":{},\"conn_id\":\"{conn_id}\"", json_str(ret_msg));
    if let Some(r) = req_id {
        let _ = write!(out, ",\"req_id\":{}", json_str(r));
    }
    let _ = write!(out, ",\"op\":{}}}", json_str(op));
    st.send_to(id, out);
}

/// Handles one text message of connection `id`.
pub(crate) fn on_text(shared: &Shared, id: u64, text: &str) -> Option<Kill> {
    let mut st = shared.lock();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        op_reply(&st, id, false, "Invalid JSON", None, "");
        return None;
    };
    let req_id = v.get("req_id").and_then(|r| r.as_str()).map(str::to_owned);
    let req_id = req_id.as_deref();
    let op = v.get("op").and_then(|o| o.as_str()).unwrap_or("");
    match op {
        "ping" => {
            // The spot pong has no req_id (venues.md §2.1).
            op_reply(&st, id, true, "pong", None, "ping");
        }
        "subscribe" | "unsubscribe" => {
            let Some(args) = v.get("args").and_then(|a| a.as_array()) else {
                op_reply(&st, id, false, "Invalid args: an array of topics is required", req_id, op);
                return None;
            };
            if args.len() > ARGS_PER_REQUEST_MAX {
                let msg = format!("args size >{ARGS_PER_REQUEST_MAX}: at most {ARGS_PER_REQUEST_MAX} args per request");
                op_reply(&st, id, false, &msg, req_id, op);
                return None;
            }
            let mut topics = Vec::with_capacity(args.len());
            for a in args {
                let name = a.as_str().unwrap_or("");
                let linear = st.conns.get(&id).is_some_and(|c| c.endpoint == Endpoint::BybitLinear);
                let topic = if linear { perp_bybit::topic_of(&st, name) } else { topic_of(&st, name) };
                match topic {
                    Some(t) => topics.push(t),
                    None => {
                        op_reply(&st, id, false, &format!("Invalid symbol :[{name}]"), req_id, op);
                        return None;
                    }
                }
            }
            if op == "subscribe" {
                let held = st.conns.get(&id).map(|c| c.topics.clone()).unwrap_or_default();
                if let Some(dup) = topics.iter().find(|t| held.contains(t)) {
                    let name = topic_name(&st, dup);
                    op_reply(&st, id, false, &format!("already subscribed,topic:{name}"), req_id, op);
                    return None;
                }
                op_reply(&st, id, true, "subscribe", req_id, op);
                let now = now_ms();
                for t in topics {
                    // A topic repeated in one request is subscribed (and snapshotted) once.
                    if !st.subscribe(id, t) {
                        continue;
                    }
                    if let Topic::BybitBook { book, depth } = t {
                        snapshot_to(&mut st, id, book.index(), depth, now);
                    }
                    perp_bybit::on_subscribed(&mut st, id, t, now);
                }
            } else {
                for t in topics {
                    st.unsubscribe(id, t);
                }
                op_reply(&st, id, true, "unsubscribe", req_id, op);
            }
        }
        _ => op_reply(&st, id, false, &format!("Invalid op: {op}"), req_id, op),
    }
    None
}

fn topic_name(st: &State, t: &Topic) -> String {
    match *t {
        Topic::BybitBook { book, depth } => format!("orderbook.{depth}.{}", st.books[book.index()].symbol),
        Topic::BybitTrade(book) => format!("publicTrade.{}", st.books[book.index()].symbol),
        t => perp_bybit::topic_name(st, &t).unwrap_or_default(),
    }
}

fn push_levels(out: &mut String, book: &BookState, levels: &mut dyn Iterator<Item = (i64, u64)>) {
    out.push('[');
    for (i, (p, q)) in levels.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("[\"");
        push_fixed(out, p, book.px_dec);
        out.push_str("\",\"");
        push_qty(out, q, book.qty_dec);
        out.push_str("\"]");
    }
    out.push(']');
}

#[allow(clippy::too_many_arguments)]
fn book_message(
    book: &BookState,
    depth: u16,
    snapshot: bool,
    u: u64,
    seq: i64,
    now: i64,
    bids: &mut dyn Iterator<Item = (i64, u64)>,
    asks: &mut dyn Iterator<Item = (i64, u64)>,
) -> String {
    let mut out = String::with_capacity(256);
    // Spot sends `ts` before `type` (venues.md §6 item 12).
    let _ = write!(
        out,
        "{{\"topic\":\"orderbook.{depth}.{sym}\",\"ts\":{now},\"type\":\"{kind}\",\"data\":{{\"s\":\"{sym}\",\"b\":",
        sym = book.symbol,
        kind = if snapshot { "snapshot" } else { "delta" },
    );
    push_levels(&mut out, book, bids);
    out.push_str(",\"a\":");
    push_levels(&mut out, book, asks);
    let _ = write!(out, ",\"u\":{u},\"seq\":{seq}}},\"cts\":{}}}", now - 1);
    out
}

fn pairs(levels: &[Level]) -> impl Iterator<Item = (i64, u64)> + '_ {
    levels.iter().map(|l| (l.price.0, l.qty.0))
}

/// Sends connection `id` the snapshot of view `depth` of book `b`, creating the view if it is
/// the first subscriber.
fn snapshot_to(st: &mut State, id: u64, b: usize, depth: u16, now: i64) {
    if !st.books[b].views.iter().any(|v| v.depth == depth) {
        let u = 10_000_000 + st.rng.below(90_000_000);
        let book = &mut st.books[b];
        let (bids, asks) = book.top(depth as usize);
        let view = BybitView { depth, u, bids: bids.to_vec(), asks: asks.to_vec(), last_sent_ms: now };
        book.views.push(view);
    }
    let book = &st.books[b];
    let Some(view) = book.views.iter().find(|v| v.depth == depth) else { return };
    let text = book_message(book, depth, true, view.u, book.seq, now, &mut pairs(&view.bids), &mut pairs(&view.asks));
    st.send_to(id, text);
}

/// The levels that differ between two best-first sides: changed or new levels with their new
/// size, levels gone with size zero.
fn diff(old: &[Level], new: &[Level], bids: bool) -> Vec<(i64, u64)> {
    let first = |a: i64, b: i64| if bids { a > b } else { a < b };
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    loop {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.price == n.price => {
                if o.qty != n.qty {
                    out.push((n.price.0, n.qty.0));
                }
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if first(o.price.0, n.price.0) => {
                out.push((o.price.0, 0));
                i += 1;
            }
            (Some(_), Some(n)) | (None, Some(n)) => {
                out.push((n.price.0, n.qty.0));
                j += 1;
            }
            (Some(o), None) => {
                out.push((o.price.0, 0));
                i += 1;
            }
            (None, None) => break,
        }
    }
    out
}

/// Emits one market step of book `b` on every depth view.
pub(crate) fn on_book_step(st: &mut State, b: usize, now: i64, gap: bool, reset: bool) {
    let step = 1 + st.rng.below(40) as i64;
    st.books[b].seq += step;
    for vi in 0..st.books[b].views.len() {
        let book = &mut st.books[b];
        let seq = book.seq;
        let depth = book.views[vi].depth;
        let (nb, na) = book.top(depth as usize);
        let (nb, na) = (nb.to_vec(), na.to_vec());
        let view = &mut book.views[vi];
        let text = if reset {
            view.u = 1;
            Some((true, Vec::new(), Vec::new()))
        } else if depth == 1 {
            if view.bids == nb && view.asks == na {
                None
            } else {
                view.u += 1 + u64::from(gap);
                Some((true, Vec::new(), Vec::new()))
            }
        } else {
            let db = diff(&view.bids, &nb, true);
            let da = diff(&view.asks, &na, false);
            if db.is_empty() && da.is_empty() {
                None
            } else {
                view.u += 1 + u64::from(gap);
                Some((false, db, da))
            }
        };
        let Some((snapshot, db, da)) = text else { continue };
        let u = view.u;
        view.bids = nb;
        view.asks = na;
        view.last_sent_ms = now;
        let book = &st.books[b];
        let view = &book.views[vi];
        let text = if snapshot {
            book_message(book, depth, true, u, seq, now, &mut pairs(&view.bids), &mut pairs(&view.asks))
        } else {
            book_message(book, depth, false, u, seq, now, &mut db.iter().copied(), &mut da.iter().copied())
        };
        st.publish(&Topic::BybitBook { book: book.id, depth }, text);
    }
}

/// Re-sends every depth-1 snapshot unchanged for [`BYBIT_DEPTH1_REPEAT_MS`], with the same `u`.
pub(crate) fn repeat_depth1(st: &mut State, now: i64) {
    let due: Vec<usize> = st
        .subs
        .keys()
        .filter_map(|t| match *t {
            Topic::BybitBook { book, depth: 1 } => Some(book.index()),
            _ => None,
        })
        .filter(|&b| {
            st.books[b].listed
                && st.books[b].views.iter().any(|v| v.depth == 1 && now - v.last_sent_ms >= BYBIT_DEPTH1_REPEAT_MS)
        })
        .collect();
    for b in due {
        let book = &mut st.books[b];
        let Some(view) = book.views.iter_mut().find(|v| v.depth == 1) else { continue };
        view.last_sent_ms = now;
        let book = &st.books[b];
        let Some(view) = book.views.iter().find(|v| v.depth == 1) else { continue };
        let text = book_message(book, 1, true, view.u, book.seq, now, &mut pairs(&view.bids), &mut pairs(&view.asks));
        st.publish(&Topic::BybitBook { book: book.id, depth: 1 }, text);
    }
}

/// Sends `u=1` with empty sides on every view of delisted book `b`.
pub(crate) fn on_delist(st: &mut State, b: usize, now: i64) {
    for vi in 0..st.books[b].views.len() {
        let book = &mut st.books[b];
        let view = &mut book.views[vi];
        view.u = 1;
        view.bids.clear();
        view.asks.clear();
        let depth = view.depth;
        let book = &st.books[b];
        let text = book_message(book, depth, true, 1, book.seq, now, &mut std::iter::empty(), &mut std::iter::empty());
        st.publish(&Topic::BybitBook { book: book.id, depth }, text);
    }
}

/// Emits one trade of book `b`.
pub(crate) fn on_trade(st: &State, b: usize, t: &TradeRec) {
    let book = &st.books[b];
    let topic = Topic::BybitTrade(book.id);
    if !st.has_subs(&topic) {
        return;
    }
    let text = format!(
        "{{\"topic\":\"publicTrade.{sym}\",\"ts\":{ts},\"type\":\"snapshot\",\"data\":[{{\"i\":\"{id}\",\"T\":{ts},\
         \"p\":\"{p}\",\"v\":\"{v}\",\"S\":\"{side}\",\"seq\":{seq},\"s\":\"{sym}\",\"BT\":false,\"RPI\":false}}]}}",
        sym = book.symbol,
        ts = t.ts_ms,
        id = t.id,
        p = fixed(t.price, book.px_dec),
        v = fixed(i64::try_from(t.qty).unwrap_or(i64::MAX), book.qty_dec),
        side = if t.taker_sell { "Sell" } else { "Buy" },
        seq = book.seq,
    );
    st.publish(&topic, text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::{Price, Qty};

    fn l(p: i64, q: u64) -> Level {
        Level { price: Price(p), qty: Qty(q) }
    }

    #[test]
    fn diff_reports_entering_changing_and_leaving_levels() {
        let old = [l(10, 1), l(9, 1), l(8, 1)];
        let new = [l(11, 2), l(10, 1), l(9, 3)];
        assert_eq!(diff(&old, &new, true), vec![(11, 2), (9, 3), (8, 0)]);
        let old = [l(1, 1), l(2, 1)];
        let new = [l(2, 1), l(3, 5)];
        assert_eq!(diff(&old, &new, false), vec![(1, 0), (3, 5)]);
        assert!(diff(&new, &new, false).is_empty());
    }
}
