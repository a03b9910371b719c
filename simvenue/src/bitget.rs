//! Bitget v2 spot in the simulator (venues.md §4): REST `public/symbols`, `market/candles` and
//! `market/history-candles`; WebSocket `/v2/ws/public` with `instType: SPOT` args, text
//! `ping`/`pong`, and the channels `books`, `trade` and `candle*`.
//!
//! `books`: a snapshot on subscribe (`pseq` 0), then one update per market step with `seq`
//! increased by a random step and `pseq` = the previous `seq`; a gap is an update whose `pseq` is
//! not the previous `seq`. With checksums on (the default; `--bitget-no-checksum` drops the field,
//! as in the 2026 recordings) every message carries the OKX-construction CRC-32 over the top 25
//! levels after it, on the exact text sent. `trade`: the first push is a snapshot of the recent
//! trades, newest first, then one update per trade. Candle rows have no closed flag; the first
//! push is a snapshot of the recent bars.

use std::fmt::Write as _;

use rampart_engine::candle::{Candle, Timeframe};
use rampart_engine::feed::intervals::{rest_timeframe, ws_channel, ws_timeframe};
use rampart_engine::Venue;

pub(crate) use super::envelope::bitget_error as error;
use super::market::{bar_volume, bars, BookState, Change, Kill, Sides, State, Topic, TradeRec};
use super::okx::checksum_of;
use super::perp_bitget;
use super::text::{fixed, int_param, json_str, param, push_fixed, push_qty};
use super::{now_ms, Reply, Shared};

/// Most candles per `candles` request.
const CANDLES_LIMIT_MAX: i64 = 1000;
/// Most candles per `history-candles` request.
const HISTORY_LIMIT_MAX: i64 = 200;
/// Bars in the first (snapshot) push of a candle channel.
const CANDLE_SNAPSHOT_BARS: usize = 100;
/// Largest subscribe request, in bytes; larger ones are refused.
const REQUEST_BYTES_MAX: usize = 4096;

fn ok(data: &str) -> Reply {
    Reply::ok(format!("{{\"code\":\"00000\",\"msg\":\"success\",\"requestTime\":{},\"data\":{data}}}", now_ms()))
}

/// Answers a Bitget REST route.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    match route {
        "/api/v2/spot/public/symbols" => symbols(shared, q),
        "/api/v2/spot/market/candles" => candles(shared, q, false),
        _ => candles(shared, q, true),
    }
}

fn symbols(shared: &Shared, q: &[(String, String)]) -> Reply {
    let st = shared.lock();
    let books: Vec<&BookState> = match param(q, "symbol") {
        Some(s) => match st.find(Venue::Bitget, s).filter(|&b| st.books[b].symbol == s) {
            Some(b) => vec![&st.books[b]],
            None => return error(400, "40034", "Parameter symbol does not exist"),
        },
        None => st.registry.venue_books(Venue::Bitget).iter().map(|id| &st.books[id.index()]).collect(),
    };
    let mut out = String::with_capacity(2 + books.len() * 500);
    out.push('[');
    for (i, b) in books.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"symbol\":\"{sym}\",\"baseCoin\":\"{base}\",\"quoteCoin\":\"{quote}\",\"minTradeAmount\":\"0\",\
             \"maxTradeAmount\":\"900000000000000000000\",\"takerFeeRate\":\"0.002\",\"makerFeeRate\":\"0.002\",\
             \"pricePrecision\":\"{pp}\",\"quantityPrecision\":\"{qp}\",\"quotePrecision\":\"8\",\"status\":\"{status}\",\
             \"minTradeUSDT\":\"1\",\"buyLimitPriceRatio\":\"0.05\",\"sellLimitPriceRatio\":\"0.05\",\"areaSymbol\":\"no\",\
             \"orderQuantity\":\"200\",\"openTime\":\"1532454360000\",\"offTime\":\"\"}}",
            sym = b.symbol,
            base = b.base,
            quote = b.quote,
            pp = b.px_dec,
            qp = b.qty_dec,
            status = if b.listed { "online" } else { "offline" },
        );
    }
    out.push(']');
    ok(&out)
}

fn candles(shared: &Shared, q: &[(String, String)], history: bool) -> Reply {
    let Some(symbol) = param(q, "symbol").filter(|s| !s.is_empty()) else {
        return error(400, "400172", "Parameter verification failed: symbol is required");
    };
    let Some(tf) = param(q, "granularity").and_then(|s| rest_timeframe(Venue::Bitget, s)) else {
        return error(400, "400172", "Parameter verification failed: granularity (5min, 15min, 1h, 4h, 1Dutc, 1Wutc)");
    };
    let max = if history { HISTORY_LIMIT_MAX } else { CANDLES_LIMIT_MAX };
    let limit = match int_param(q, "limit") {
        Ok(None) => 100,
        Ok(Some(l)) if (1..=max).contains(&l) => l as usize,
        _ => return error(400, "400172", &format!("Parameter verification failed: limit must be 1-{max}")),
    };
    let (Ok(start), Ok(end)) = (int_param(q, "startTime"), int_param(q, "endTime")) else {
        return error(400, "400172", "Parameter verification failed: startTime and endTime must be integers (ms)");
    };
    if history && end.is_none() {
        return error(400, "400172", "Parameter verification failed: endTime is required");
    }
    let st = shared.lock();
    let Some(b) = st.find(Venue::Bitget, symbol).filter(|&b| st.books[b].symbol == symbol) else {
        return error(400, "40034", "Parameter symbol does not exist");
    };
    let book = &st.books[b];
    let all = bars(book, tf, now_ms());
    let in_range: Vec<&Candle> = all
        .iter()
        .filter(|c| start.is_none_or(|s| c.open_ms >= s))
        .filter(|c| end.is_none_or(|e| if history { c.open_ms < e } else { c.open_ms <= e }))
        .collect();
    let picked = &in_range[in_range.len().saturating_sub(limit)..];
    let mut out = String::with_capacity(2 + picked.len() * 130);
    out.push('[');
    for (i, c) in picked.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_row(&mut out, book, tf, c);
    }
    out.push(']');
    ok(&out)
}

/// `["ts","open","high","low","close","baseVolume","usdtVolume","quoteVolume"]`, no closed flag.
fn push_row(out: &mut String, book: &BookState, tf: Timeframe, c: &Candle) {
    let v = bar_volume(book, tf, c);
    let quote = fixed(v.quote, 8);
    let _ = write!(
        out,
        "[\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{quote}\",\"{quote}\"]",
        c.open_ms,
        fixed(c.open.0, book.px_dec),
        fixed(c.high.0, book.px_dec),
        fixed(c.low.0, book.px_dec),
        fixed(c.close.0, book.px_dec),
        fixed(i64::try_from(v.base).unwrap_or(i64::MAX), book.qty_dec),
    );
}

fn arg(book: &BookState, channel: &str) -> String {
    format!("{{\"instType\":\"SPOT\",\"channel\":\"{channel}\",\"instId\":\"{}\"}}", book.symbol)
}

/// A candle channel push of `rows` (oldest first): `snapshot` for the first push.
pub(crate) fn candle_push(book: &BookState, tf: Timeframe, rows: &[Candle], snapshot: bool, now: i64) -> String {
    let mut out = format!(
        "{{\"action\":\"{}\",\"arg\":{},\"data\":[",
        if snapshot { "snapshot" } else { "update" },
        arg(book, ws_channel(tf))
    );
    for (i, c) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_row(&mut out, book, tf, c);
    }
    let _ = write!(out, "],\"ts\":{now}}}");
    out
}

// ---------------------------------------------------------------------------------------------
// Books and trades.

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
fn books_message(
    st: &State,
    book: &BookState,
    snapshot: bool,
    pseq: i64,
    seq: i64,
    checksum_fault: bool,
    now: i64,
    bids: &mut dyn Iterator<Item = (i64, u64)>,
    asks: &mut dyn Iterator<Item = (i64, u64)>,
) -> String {
    let mut out = String::with_capacity(256);
    let _ = write!(
        out,
        "{{\"action\":\"{}\",\"arg\":{},\"data\":[{{\"asks\":",
        if snapshot { "snapshot" } else { "update" },
        arg(book, "books")
    );
    push_levels(&mut out, book, asks);
    out.push_str(",\"bids\":");
    push_levels(&mut out, book, bids);
    if st.cfg.bitget_checksum {
        let c = checksum_of(book);
        let c = if checksum_fault {
            match c ^ 0x5A5A_5A5A {
                0 => 1,
                w => w,
            }
        } else {
            c
        };
        let _ = write!(out, ",\"checksum\":{c}");
    }
    let _ = write!(out, ",\"seq\":{seq},\"pseq\":{pseq},\"ts\":\"{now}\"}}],\"ts\":{now}}}");
    out
}

/// Emits one market step of book `b`.
pub(crate) fn on_book_step(st: &mut State, b: usize, changes: &[Change], now: i64, gap: bool, checksum: bool) {
    let prev = st.books[b].seq;
    let step = 1 + st.rng.below(3) as i64;
    let (pseq, seq) = if gap { (prev + 1, prev + 1 + step) } else { (prev, prev + step) };
    st.books[b].seq = seq;
    let book = &st.books[b];
    let topic = Topic::BitgetBooks(book.id);
    if !st.has_subs(&topic) {
        return;
    }
    let Sides { bids, asks } = Sides::of(changes);
    let text = books_message(st, book, false, pseq, seq, checksum, now, &mut bids.into_iter(), &mut asks.into_iter());
    st.publish(&topic, text);
}

fn trade_json(out: &mut String, book: &BookState, t: &TradeRec) {
    let _ = write!(
        out,
        "{{\"ts\":\"{}\",\"price\":\"{}\",\"size\":\"{}\",\"side\":\"{}\",\"tradeId\":\"{}\"}}",
        t.ts_ms,
        fixed(t.price, book.px_dec),
        fixed(i64::try_from(t.qty).unwrap_or(i64::MAX), book.qty_dec),
        if t.taker_sell { "sell" } else { "buy" },
        t.id
    );
}

/// Emits one trade of book `b`.
pub(crate) fn on_trade(st: &State, b: usize, t: &TradeRec) {
    let book = &st.books[b];
    let topic = Topic::BitgetTrade(book.id);
    if !st.has_subs(&topic) {
        return;
    }
    let mut out = format!("{{\"action\":\"update\",\"arg\":{},\"data\":[", arg(book, "trade"));
    trade_json(&mut out, book, t);
    let _ = write!(out, "],\"ts\":{}}}", t.ts_ms);
    st.publish(&topic, out);
}

// ---------------------------------------------------------------------------------------------
// WebSocket requests.

/// Handles one text message of connection `id`.
// Long: the venue's request grammar (ping, subscribe, unsubscribe, errors) answered in one match,
// as the real venue documents it.
pub(crate) fn on_text(shared: &Shared, id: u64, text: &str) -> Option<Kill> {
    let mut st = shared.lock();
    if text == "ping" {
        st.send_to(id, "pong");
        return None;
    }
    let error = |st: &State, arg: Option<&serde_json::Value>, op: &str, code: u32, msg: &str| {
        let mut out = String::from("{\"event\":\"error\",");
        if let Some(a) = arg {
            let _ = write!(out, "\"arg\":{a},");
        }
        let _ = write!(out, "\"code\":{code},\"msg\":{},\"op\":{}}}", json_str(msg), json_str(op));
        st.send_to(id, out);
    };
    if text.len() > REQUEST_BYTES_MAX {
        error(&st, None, "", 30004, "request too large: at most 4096 bytes");
        return None;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        error(&st, None, "", 30012, "param error: not JSON");
        return None;
    };
    let op = v.get("op").and_then(|o| o.as_str()).unwrap_or("");
    let Some(args) = v.get("args").and_then(|a| a.as_array()).filter(|_| op == "subscribe" || op == "unsubscribe")
    else {
        error(&st, None, op, 30012, "param error: op must be subscribe or unsubscribe with args");
        return None;
    };
    let now = now_ms();
    for a in args {
        let inst_type = a.get("instType").and_then(|x| x.as_str()).unwrap_or("");
        let channel = a.get("channel").and_then(|x| x.as_str()).unwrap_or("");
        let inst = a.get("instId").and_then(|x| x.as_str()).unwrap_or("");
        if inst_type == perp_bitget::INST_TYPE {
            perp_bitget::subscribe(&mut st, id, op, a);
            continue;
        }
        let missing = format!("instType:{inst_type},channel:{channel},instId:{inst} doesn't exist");
        let b = st.find_listed(Venue::Bitget, inst).filter(|&b| st.books[b].symbol == inst);
        let (Some(b), "SPOT") = (b, inst_type) else {
            error(&st, Some(a), op, 30001, &missing);
            continue;
        };
        let book_id = st.books[b].id;
        let topic = match channel {
            "books" => Topic::BitgetBooks(book_id),
            "trade" => Topic::BitgetTrade(book_id),
            c => match ws_timeframe(c) {
                Some(tf) => Topic::BitgetCandle(book_id, tf),
                None => {
                    error(&st, Some(a), op, 30001, &missing);
                    continue;
                }
            },
        };
        let ack = format!(
            "{{\"event\":\"{op}\",\"arg\":{{\"instType\":\"SPOT\",\"channel\":\"{channel}\",\"instId\":\"{inst}\"}}}}"
        );
        if op == "unsubscribe" {
            st.unsubscribe(id, topic);
            st.send_to(id, ack);
            continue;
        }
        let fresh = st.subscribe(id, topic);
        st.send_to(id, ack);
        if !fresh {
            continue;
        }
        let book = &st.books[b];
        let text = match topic {
            Topic::BitgetBooks(_) => {
                let (bids, asks) = book.top(usize::MAX);
                books_message(
                    &st,
                    book,
                    true,
                    0,
                    book.seq,
                    false,
                    now,
                    &mut bids.iter().map(|l| (l.price.0, l.qty.0)),
                    &mut asks.iter().map(|l| (l.price.0, l.qty.0)),
                )
            }
            Topic::BitgetTrade(_) => {
                let mut out = format!("{{\"action\":\"snapshot\",\"arg\":{},\"data\":[", arg(book, "trade"));
                for (i, t) in book.recent_trades.iter().rev().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    trade_json(&mut out, book, t);
                }
                let _ = write!(out, "],\"ts\":{now}}}");
                out
            }
            Topic::BitgetCandle(_, tf) => {
                let all = bars(book, tf, now);
                let rows = &all[all.len().saturating_sub(CANDLE_SNAPSHOT_BARS)..];
                candle_push(book, tf, rows, true, now)
            }
            _ => continue,
        };
        st.send_to(id, text);
    }
    None
}
