//! OKX v5 in the simulator (venues.md §3): REST `public/instruments`, `market/candles` and
//! `market/history-candles`; WebSocket `/ws/v5/public` (`books`, `books5`, `trades`) and
//! `/ws/v5/business` (`candle*`), text `ping`/`pong`, `connId` in acks, `notice` 64008.
//!
//! `books`: a snapshot (`prevSeqId = -1`, up to 400 levels) on subscribe, then one update per
//! market step with `prevSeqId` = the previous `seqId` and `seqId` increased by a random step (the
//! chain is not contiguous, as on the venue). Levels are `["px","sz","0","n"]`. Every message
//! carries the CRC-32 checksum of venues.md §3.3 over the top 25 levels of the true book after
//! the message, computed on the exact text sent (`rampart_engine::feed::okx::book_checksum`), or
//! 0 with `--okx-checksum-zero`. A book that did not change for `okx_heartbeat_s` gets an idle
//! heartbeat (`[]`, `[]`, `prevSeqId == seqId`). A reset is an update with `seqId < prevSeqId`
//! (legal; the chain continues from it); a gap is an update whose `prevSeqId` is not the previous
//! `seqId`.

use std::fmt::Write as _;

use rampart_engine::book::Level;
use rampart_engine::candle::{Candle, Timeframe};
use rampart_engine::feed::intervals::{rest_timeframe, ws_channel, ws_timeframe};
use rampart_engine::feed::okx::{book_checksum, CHECKSUM_LEVELS};
use rampart_engine::Venue;

pub(crate) use super::envelope::okx_error as error;
use super::market::{bar_volume, bars, BookState, Change, Endpoint, FaultKind, Kill, Sides, State, Topic, TradeRec};
use super::perp_okx;
use super::text::{fixed, int_param, json_str, param, push_fixed, push_qty};
use super::{now_ms, Reply, Shared};

/// Most levels per side in a `books` snapshot.
const SNAPSHOT_LEVELS_MAX: usize = 400;
/// Most candles per request.
const CANDLES_LIMIT_MAX: i64 = 300;
/// Longest `id` of a request (alphanumeric).
const REQUEST_ID_LEN_MAX: usize = 32;

fn inst_id(book: &BookState) -> String {
    format!("{}-{}", book.base, book.quote)
}

/// The listed OKX book of `BASE-QUOTE`.
fn find_inst(st: &State, inst: &str) -> Option<usize> {
    let (base, quote) = inst.split_once('-')?;
    let b = st.find_listed(Venue::Okx, &format!("{base}{quote}"))?;
    let book = &st.books[b];
    (book.base == base && book.quote == quote).then_some(b)
}

/// Answers an OKX REST route.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    match route {
        "/api/v5/public/instruments" => instruments(shared, q),
        _ => candles(shared, q),
    }
}

fn instruments(shared: &Shared, q: &[(String, String)]) -> Reply {
    match param(q, "instType") {
        Some("SPOT") => {}
        None | Some("") => return error(400, "50014", "Parameter instType can not be empty."),
        Some(_) => return error(400, "51000", "Parameter instType error (this simulator serves SPOT)"),
    }
    let st = shared.lock();
    let books: Vec<&BookState> = match param(q, "instId") {
        Some(inst) => match find_inst(&st, inst) {
            Some(b) => vec![&st.books[b]],
            None => return error(400, "51001", "Instrument ID does not exist"),
        },
        None => {
            st.registry.venue_books(Venue::Okx).iter().map(|id| &st.books[id.index()]).filter(|b| b.listed).collect()
        }
    };
    let mut out = String::with_capacity(32 + books.len() * 700);
    out.push_str("{\"code\":\"0\",\"msg\":\"\",\"data\":[");
    for (i, b) in books.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"alias\":\"\",\"auctionEndTime\":\"\",\"baseCcy\":\"{base}\",\"category\":\"1\",\"ctMult\":\"\",\"ctType\":\"\",\
             \"ctVal\":\"\",\"ctValCcy\":\"\",\"expTime\":\"\",\"instFamily\":\"\",\"instId\":\"{inst}\",\"instIdCode\":{code},\
             \"instType\":\"SPOT\",\"lever\":\"\",\"listTime\":\"1611907686000\",\"lotSz\":\"{lot}\",\"maxIcebergSz\":\"9999999999\",\
             \"maxLmtAmt\":\"20000000\",\"maxLmtSz\":\"9999999999\",\"maxMktAmt\":\"1000000\",\"maxMktSz\":\"1000000\",\
             \"maxStopSz\":\"1000000\",\"maxTriggerSz\":\"9999999999\",\"maxTwapSz\":\"9999999999\",\"minSz\":\"{lot}\",\
             \"optType\":\"\",\"quoteCcy\":\"{quote}\",\"ruleType\":\"normal\",\"settleCcy\":\"\",\"state\":\"live\",\
             \"stk\":\"\",\"tickSz\":\"{tick}\",\"uly\":\"\"}}",
            base = b.base,
            inst = inst_id(b),
            code = 100_000 + b.id.0,
            lot = fixed(b.lot, b.qty_dec),
            quote = b.quote,
            tick = fixed(b.tick, b.px_dec),
        );
    }
    out.push_str("]}");
    Reply::ok(out)
}

fn candles(shared: &Shared, q: &[(String, String)]) -> Reply {
    let Some(inst) = param(q, "instId").filter(|s| !s.is_empty()) else {
        return error(400, "50014", "Parameter instId can not be empty.");
    };
    let Some(tf) = rest_timeframe(Venue::Okx, param(q, "bar").unwrap_or("1m")) else {
        return error(400, "51000", "Parameter bar error (5m, 15m, 1H, 4H, 1Dutc, 1Wutc)");
    };
    let limit = match int_param(q, "limit") {
        Ok(None) => 100,
        Ok(Some(l)) if (1..=CANDLES_LIMIT_MAX).contains(&l) => l as usize,
        _ => return error(400, "51000", "Parameter limit error"),
    };
    let (Ok(after), Ok(before)) = (int_param(q, "after"), int_param(q, "before")) else {
        return error(400, "51000", "Parameter after or before error");
    };
    let st = shared.lock();
    let Some(b) = find_inst(&st, inst) else { return error(400, "51001", "Instrument ID does not exist") };
    let book = &st.books[b];
    let now = now_ms();
    let all = bars(book, tf, now);
    let current = tf.bucket_start(now);
    let mut out = String::with_capacity(32 + limit * 130);
    out.push_str("{\"code\":\"0\",\"msg\":\"\",\"data\":[");
    let rows = all
        .iter()
        .rev()
        .filter(|c| after.is_none_or(|a| c.open_ms < a) && before.is_none_or(|x| c.open_ms > x))
        .take(limit);
    for (i, c) in rows.enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_row(&mut out, book, tf, c, c.open_ms < current);
    }
    out.push_str("]}");
    Reply::ok(out)
}

/// `["ts","o","h","l","c","vol","volCcy","volCcyQuote","confirm"]`.
fn push_row(out: &mut String, book: &BookState, tf: Timeframe, c: &Candle, confirmed: bool) {
    let v = bar_volume(book, tf, c);
    let quote = fixed(v.quote, 8);
    let _ = write!(
        out,
        "[\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{quote}\",\"{quote}\",\"{}\"]",
        c.open_ms,
        fixed(c.open.0, book.px_dec),
        fixed(c.high.0, book.px_dec),
        fixed(c.low.0, book.px_dec),
        fixed(c.close.0, book.px_dec),
        fixed(i64::try_from(v.base).unwrap_or(i64::MAX), book.qty_dec),
        if confirmed { "1" } else { "0" },
    );
}

/// A `candle{bar}` push of one bar.
pub(crate) fn candle_push(book: &BookState, tf: Timeframe, bar: &Candle, confirmed: bool) -> String {
    let mut out =
        format!("{{\"arg\":{{\"channel\":\"{}\",\"instId\":\"{}\"}},\"data\":[", ws_channel(tf), inst_id(book));
    push_row(&mut out, book, tf, bar, confirmed);
    out.push_str("]}");
    out
}

// ---------------------------------------------------------------------------------------------
// Books and trades.

/// Number of orders shown at a level (synthetic, stable per price).
fn orders(book: &BookState, price: i64, qty: u64) -> u64 {
    if qty == 0 {
        0
    } else {
        1 + (price / book.tick.max(1)).unsigned_abs() % 9
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
        let _ = write!(out, "\",\"0\",\"{}\"]", orders(book, p, q));
    }
    out.push(']');
}

/// The checksum of the top 25 levels of the true book, over the text this simulator sends.
pub(crate) fn checksum_of(book: &BookState) -> i32 {
    let (bids, asks) = book.top(CHECKSUM_LEVELS);
    let text = |l: &Level| {
        (super::text::fixed(l.price.0, book.px_dec), {
            let mut s = String::new();
            push_qty(&mut s, l.qty.0, book.qty_dec);
            s
        })
    };
    let bids: Vec<(String, String)> = bids.iter().map(text).collect();
    let asks: Vec<(String, String)> = asks.iter().map(text).collect();
    book_checksum(
        bids.iter().map(|(p, s)| (p.as_bytes(), s.as_bytes())),
        asks.iter().map(|(p, s)| (p.as_bytes(), s.as_bytes())),
    )
}

/// A wrong checksum: never the right one, never zero.
fn wrong(c: i32) -> i32 {
    match c ^ 0x5A5A_5A5A {
        0 => 1,
        w => w,
    }
}

#[allow(clippy::too_many_arguments)]
fn books_message(
    book: &BookState,
    snapshot: bool,
    prev: i64,
    seq: i64,
    checksum: i32,
    now: i64,
    bids: &mut dyn Iterator<Item = (i64, u64)>,
    asks: &mut dyn Iterator<Item = (i64, u64)>,
) -> String {
    let mut out = String::with_capacity(256);
    let _ = write!(
        out,
        "{{\"arg\":{{\"channel\":\"books\",\"instId\":\"{}\"}},\"action\":\"{}\",\"data\":[{{\"asks\":",
        inst_id(book),
        if snapshot { "snapshot" } else { "update" },
    );
    push_levels(&mut out, book, asks);
    out.push_str(",\"bids\":");
    push_levels(&mut out, book, bids);
    let _ = write!(out, ",\"ts\":\"{now}\",\"checksum\":{checksum},\"prevSeqId\":{prev},\"seqId\":{seq}}}]}}");
    out
}

fn checksum_for(st: &State, book: &BookState, fault: bool) -> i32 {
    if fault {
        wrong(checksum_of(book))
    } else if st.cfg.okx_checksum_zero {
        0
    } else {
        checksum_of(book)
    }
}

/// Emits one market step of book `b`: the `books` update and, when the top five changed, the
/// `books5` push.
#[allow(clippy::too_many_arguments)]
pub(crate) fn on_book_step(
    st: &mut State,
    b: usize,
    changes: &[Change],
    now: i64,
    gap: bool,
    checksum: bool,
    reset: bool,
) {
    let prev = st.books[b].seq;
    let step = 1 + st.rng.below(5) as i64;
    let (prev_sent, seq) = if reset {
        (prev, 1 + st.rng.below(100) as i64)
    } else if gap {
        (prev + 1, prev + 1 + step)
    } else {
        (prev, prev + step)
    };
    st.books[b].seq = seq;
    let book = &st.books[b];
    let id = book.id;
    let topic = Topic::OkxBooks(id);
    if st.has_subs(&topic) {
        let c = checksum_for(st, book, checksum);
        let Sides { bids, asks } = Sides::of(changes);
        let text = books_message(book, false, prev_sent, seq, c, now, &mut bids.into_iter(), &mut asks.into_iter());
        st.publish(&topic, text);
    }
    let topic5 = Topic::OkxBooks5(id);
    if st.has_subs(&topic5) {
        let (tb, ta) = book.top(5);
        if book.top5.0 != tb || book.top5.1 != ta {
            let top5 = (tb.to_vec(), ta.to_vec());
            let text = books5_message(book, now);
            st.publish(&topic5, text);
            st.books[b].top5 = top5;
        }
    }
}

fn books5_message(book: &BookState, now: i64) -> String {
    let (tb, ta) = book.top(5);
    let inst = inst_id(book);
    let mut out = format!("{{\"arg\":{{\"channel\":\"books5\",\"instId\":\"{inst}\"}},\"data\":[{{\"asks\":");
    push_levels(&mut out, book, &mut ta.iter().map(|l| (l.price.0, l.qty.0)));
    out.push_str(",\"bids\":");
    push_levels(&mut out, book, &mut tb.iter().map(|l| (l.price.0, l.qty.0)));
    let _ = write!(out, ",\"instId\":\"{inst}\",\"ts\":\"{now}\",\"seqId\":{}}}]}}", book.seq);
    out
}

/// Pushes an idle heartbeat on book `b` now (`[]`, `[]`, `prevSeqId == seqId`).
pub(crate) fn heartbeat(st: &mut State, b: usize, now: i64) {
    st.books[b].last_heartbeat_ms = now;
    let book = &st.books[b];
    let c = checksum_for(st, book, false);
    let text = books_message(book, false, book.seq, book.seq, c, now, &mut std::iter::empty(), &mut std::iter::empty());
    st.publish(&Topic::OkxBooks(book.id), text);
}

/// Pushes heartbeats on subscribed books idle for `okx_heartbeat_s` (called every second).
pub(crate) fn heartbeats(st: &mut State, now: i64) {
    let idle_ms = st.cfg.okx_heartbeat_s as i64 * 1000;
    let due: Vec<usize> = st
        .subs
        .keys()
        .filter_map(|t| match *t {
            Topic::OkxBooks(id) => Some(id.index()),
            _ => None,
        })
        .filter(|&b| {
            let book = &st.books[b];
            book.listed && now - book.last_change_ms >= idle_ms && now - book.last_heartbeat_ms >= idle_ms
        })
        .collect();
    for b in due {
        heartbeat(st, b, now);
    }
}

/// Emits one trade of book `b`.
pub(crate) fn on_trade(st: &State, b: usize, t: &TradeRec) {
    let book = &st.books[b];
    let topic = Topic::OkxTrades(book.id);
    if !st.has_subs(&topic) {
        return;
    }
    let inst = inst_id(book);
    let text = format!(
        "{{\"arg\":{{\"channel\":\"trades\",\"instId\":\"{inst}\"}},\"data\":[{{\"instId\":\"{inst}\",\"tradeId\":\"{id}\",\
         \"px\":\"{p}\",\"sz\":\"{q}\",\"side\":\"{side}\",\"ts\":\"{ts}\",\"count\":\"1\",\"source\":\"0\",\"seqId\":{seq}}}]}}",
        id = t.id,
        p = fixed(t.price, book.px_dec),
        q = fixed(i64::try_from(t.qty).unwrap_or(i64::MAX), book.qty_dec),
        side = if t.taker_sell { "sell" } else { "buy" },
        ts = t.ts_ms,
        seq = book.seq,
    );
    st.publish(&topic, text);
}

/// Sends `notice` 64008 to every OKX connection.
pub(crate) fn notice(st: &State) {
    st.broadcast(Venue::Okx, |c| {
        format!(
            "{{\"event\":\"notice\",\"code\":\"64008\",\"msg\":\"The connection will soon be closed for a service upgrade. \
             Please reconnect.\",\"connId\":\"{}\"}}",
            c.conn_id
        )
    });
}

// ---------------------------------------------------------------------------------------------
// WebSocket requests.

fn event_error(st: &State, id: u64, req_id: Option<&str>, code: &str, msg: &str) {
    let conn_id = st.conns.get(&id).map(|c| c.conn_id.clone()).unwrap_or_default();
    let mut out = String::from("{");
    if let Some(r) = req_id {
        let _ = write!(out, "\"id\":{},", json_str(r));
    }
    let _ = write!(out, "\"event\":\"error\",\"code\":\"{code}\",\"msg\":{},\"connId\":\"{conn_id}\"}}", json_str(msg));
    st.send_to(id, out);
}

/// Handles one text message of connection `id` on `endpoint` (public or business).
// Long: the venue's request grammar (ping, subscribe, unsubscribe, errors per
// argument) answered in one match, as the real venue documents it.
pub(crate) fn on_text(shared: &Shared, id: u64, endpoint: Endpoint, text: &str) -> Option<Kill> {
    let mut st = shared.lock();
    if text == "ping" {
        st.send_to(id, "pong");
        return None;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        event_error(&st, id, None, "60012", &format!("Invalid request: {text}"));
        return None;
    };
    let req_id = match v.get("id") {
        None => None,
        Some(serde_json::Value::String(s))
            if s.len() <= REQUEST_ID_LEN_MAX && s.bytes().all(|c| c.is_ascii_alphanumeric()) =>
        {
            Some(s.clone())
        }
        Some(_) => {
            event_error(&st, id, None, "60012", &format!("Invalid request: {text}"));
            return None;
        }
    };
    let req_id = req_id.as_deref();
    let op = v.get("op").and_then(|o| o.as_str()).unwrap_or("");
    let Some(args) = v.get("args").and_then(|a| a.as_array()).filter(|_| op == "subscribe" || op == "unsubscribe")
    else {
        event_error(&st, id, req_id, "60012", &format!("Invalid request: {text}"));
        return None;
    };
    let now = now_ms();
    for arg in args {
        let channel = arg.get("channel").and_then(|c| c.as_str()).unwrap_or("");
        let inst = arg.get("instId").and_then(|c| c.as_str()).unwrap_or("");
        let wrong_url = || {
            format!(
                "Wrong URL or channel:{channel},instId:{inst} doesn't exist. Please use the correct URL, channel and \
                 parameters referring to API document."
            )
        };
        let business = endpoint == Endpoint::OkxBusiness;
        if perp_okx::is_perp_channel(channel) && !business {
            perp_okx::subscribe(&mut st, id, op, arg, req_id, now);
            continue;
        }
        let candle = ws_timeframe(channel);
        let known = matches!(channel, "books" | "books5" | "trades") || candle.is_some();
        if !known {
            event_error(&st, id, req_id, "60018", &wrong_url());
            continue;
        }
        if candle.is_some() && !business {
            let msg = "channel:".to_owned()
                + channel
                + " has been migrated to the '/business' URL. Please subscribe using the new URL.";
            event_error(&st, id, req_id, "64001", &msg);
            continue;
        }
        if candle.is_none() && business {
            event_error(&st, id, req_id, "60018", &wrong_url());
            continue;
        }
        let Some(b) = find_inst(&st, inst) else {
            event_error(&st, id, req_id, "60018", &wrong_url());
            continue;
        };
        let book_id = st.books[b].id;
        let topic = match (channel, candle) {
            ("books", _) => Topic::OkxBooks(book_id),
            ("books5", _) => Topic::OkxBooks5(book_id),
            ("trades", _) => Topic::OkxTrades(book_id),
            (_, Some(tf)) => Topic::OkxCandle(book_id, tf),
            _ => continue,
        };
        let conn_id = st.conns.get(&id).map(|c| c.conn_id.clone()).unwrap_or_default();
        let mut ack = String::from("{");
        if let Some(r) = req_id {
            let _ = write!(ack, "\"id\":{},", json_str(r));
        }
        let _ = write!(
            ack,
            "\"event\":\"{op}\",\"arg\":{{\"channel\":\"{channel}\",\"instId\":\"{inst}\"}},\"connId\":\"{conn_id}\"}}"
        );
        if op == "unsubscribe" {
            st.unsubscribe(id, topic);
            st.send_to(id, ack);
            continue;
        }
        if !st.subscribe(id, topic) {
            // Already subscribed: acknowledged again, no new snapshot.
            st.send_to(id, ack);
            continue;
        }
        st.send_to(id, ack);
        let book = &st.books[b];
        match topic {
            Topic::OkxBooks(_) => {
                let (bids, asks) = book.top(SNAPSHOT_LEVELS_MAX);
                let c = checksum_for(&st, book, false);
                let text = books_message(
                    book,
                    true,
                    -1,
                    book.seq,
                    c,
                    now,
                    &mut bids.iter().map(|l| (l.price.0, l.qty.0)),
                    &mut asks.iter().map(|l| (l.price.0, l.qty.0)),
                );
                st.send_to(id, text);
            }
            Topic::OkxBooks5(_) => {
                let text = books5_message(book, now);
                let (tb, ta) = book.top(5);
                let top5 = (tb.to_vec(), ta.to_vec());
                st.send_to(id, text);
                st.books[b].top5 = top5;
            }
            Topic::OkxCandle(_, tf) => {
                if let Some(bar) = bars(book, tf, now).last() {
                    let text = candle_push(book, tf, bar, false);
                    st.send_to(id, text);
                }
            }
            _ => {}
        }
    }
    None
}

/// Applies a `/sim/fault` `heartbeat` to book `b` (counted as a fault).
pub(crate) fn heartbeat_now(st: &mut State, b: usize) {
    heartbeat(st, b, now_ms());
    st.stats.fault(Venue::Okx, FaultKind::Heartbeat);
}
