//! Binance spot in the simulator (venues.md §1): REST `exchangeInfo`, `depth`, `klines`; the
//! streams `<sym>@depth@100ms`, `<sym>@depth` (1000 ms) and `<sym>@trade` on `/ws/...` (raw) and
//! `/stream?streams=` (combined wrapper); live `SUBSCRIBE`, `UNSUBSCRIBE`, `LIST_SUBSCRIPTIONS`,
//! `SET_PROPERTY`/`GET_PROPERTY` `combined`.
//!
//! Update ids: each book message takes one id per level it changes, so `U..u` ranges are
//! contiguous (`U` = previous `u` + 1) unless a gap is injected (`U` = previous `u` + 2). The
//! REST snapshot's `lastUpdateId` is the last id applied to the true book, read under the same
//! lock the stream is produced under, so it is always consistent with the stream. A stale
//! snapshot answers with the id the book had when the simulator started, older than every diff.
//!
//! As on the real venue, subscribing a stream of an unknown symbol succeeds and delivers
//! nothing; a stream kind the simulator does not produce (`aggTrade`, `kline_*`, ...) is refused
//! with error code 2.

use std::fmt::Write as _;

use rampart_engine::book::Side;
use rampart_engine::candle::Timeframe;
use rampart_engine::Venue;

pub(crate) use super::envelope::{binance_error as error, wrap};
use super::market::{
    bar_volume, bars, BookState, Change, Endpoint, FaultKind, Kill, Sides, SlowDiff, State, Topic, TradeRec,
};
use super::perp_binance;
use super::text::{fixed, int_param, json_str, param, push_fixed, push_qty};
use super::{now_ms, Reply, Shared};

/// Streams one connection may hold (more is refused).
pub(crate) const STREAMS_PER_CONNECTION_MAX: usize = 1024;
/// Deepest REST snapshot; larger `limit`s are truncated to it.
const DEPTH_LIMIT_MAX: usize = 5000;
/// Most klines per request.
const KLINES_LIMIT_MAX: usize = 1000;

fn stream_name(book: &BookState, suffix: &str) -> String {
    format!("{}{suffix}", book.symbol.to_ascii_lowercase())
}

/// The streams named in a connection URL: `/ws/<s1>[/<s2>...]` or `/stream?streams=s1/s2`.
pub(crate) fn url_streams(path: &str, query: Option<&str>) -> Result<Vec<String>, String> {
    let list = if path == "/stream" || path == "/market/stream" {
        let pairs = super::text::query_pairs(query);
        param(&pairs, "streams").unwrap_or("").to_owned()
    } else {
        let path = path.strip_prefix("/market").unwrap_or(path);
        path.strip_prefix("/ws").unwrap_or("").trim_start_matches('/').to_owned()
    };
    let streams: Vec<String> = list.split('/').filter(|s| !s.is_empty()).map(str::to_ascii_lowercase).collect();
    if streams.len() > STREAMS_PER_CONNECTION_MAX {
        return Err(format!("too many streams: at most {STREAMS_PER_CONNECTION_MAX} per connection"));
    }
    Ok(streams)
}

/// The topic of a stream name: `Ok(None)` for a known kind on an unknown symbol, `Err` for a
/// kind the simulator does not produce.
fn topic_of(st: &State, id: u64, name: &str) -> Result<Option<Topic>, ()> {
    let futures = st
        .conns
        .get(&id)
        .is_some_and(|c| matches!(c.endpoint, Endpoint::BinanceFuturesRaw | Endpoint::BinanceFuturesCombined));
    if futures {
        return perp_binance::topic_of(st, name);
    }
    if perp_binance::is_perp_stream(name) {
        // The unrouted path: accepted, never fed (the real venue's behaviour).
        return Ok(None);
    }
    let (sym, kind) = name.split_once('@').ok_or(())?;
    let book = st.find(Venue::Binance, sym).map(|b| st.books[b].id);
    let make = |f: fn(rampart_engine::BookId) -> Topic| Ok(book.map(f));
    match kind {
        "depth@100ms" => make(|book| Topic::BinanceDepth { book, slow: false }),
        "depth" | "depth@1000ms" => make(|book| Topic::BinanceDepth { book, slow: true }),
        "trade" => make(Topic::BinanceTrade),
        _ => Err(()),
    }
}

/// Subscribes the streams given in the URL of connection `id` (unknown kinds are skipped).
pub(crate) fn on_open(st: &mut State, id: u64, streams: &[String]) {
    for name in streams {
        if let Ok(topic) = topic_of(st, id, name) {
            add_stream(st, id, name, topic);
        }
    }
}

fn add_stream(st: &mut State, id: u64, name: &str, topic: Option<Topic>) {
    if let Some(conn) = st.conns.get_mut(&id) {
        if !conn.streams.iter().any(|s| s == name) {
            conn.streams.push(name.to_owned());
        }
    }
    if let Some(t) = topic {
        st.subscribe(id, t);
    }
}

fn remove_stream(st: &mut State, id: u64, name: &str, topic: Option<Topic>) {
    if let Some(conn) = st.conns.get_mut(&id) {
        conn.streams.retain(|s| s != name);
    }
    if let Some(t) = topic {
        st.unsubscribe(id, t);
    }
}

/// The `id` of a request as JSON text: an integer, a string of at most 36 characters, or
/// `null`; `None` for anything else.
fn request_id(v: Option<&serde_json::Value>) -> Option<String> {
    match v {
        None | Some(serde_json::Value::Null) => Some("null".into()),
        Some(serde_json::Value::Number(n)) if n.is_i64() => Some(n.to_string()),
        Some(serde_json::Value::String(s)) if s.len() <= 36 => Some(json_str(s)),
        _ => None,
    }
}

fn reply_error(st: &State, id: u64, code: i64, msg: &str, req_id: Option<&str>) {
    let mut out = format!("{{\"code\":{code},\"msg\":{}", json_str(msg));
    if let Some(r) = req_id {
        let _ = write!(out, ",\"id\":{r}");
    }
    out.push('}');
    st.send_to(id, out);
}

/// Handles one text message of connection `id`.
// Long: one `match` over Binance's request methods (subscribe, unsubscribe, list, properties, the
// faults), each arm a few lines; a test tool's protocol table.
pub(crate) fn on_text(shared: &Shared, id: u64, text: &str) -> Option<Kill> {
    let mut st = shared.lock();
    let v: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            reply_error(&st, id, 3, &format!("Invalid JSON: {e}"), None);
            return None;
        }
    };
    let Some(req_id) = request_id(v.get("id")) else {
        reply_error(
            &st,
            id,
            2,
            "Invalid request: 'id' must be an integer, a string of up to 36 characters or null",
            None,
        );
        return None;
    };
    let method = v.get("method").and_then(|m| m.as_str()).unwrap_or("");
    let params: Vec<&serde_json::Value> = match v.get("params") {
        None => Vec::new(),
        Some(serde_json::Value::Array(a)) => a.iter().collect(),
        Some(_) => {
            reply_error(&st, id, 2, "Invalid request: 'params' must be an array", Some(&req_id));
            return None;
        }
    };
    match method {
        "SUBSCRIBE" | "UNSUBSCRIBE" => {
            let mut parsed = Vec::with_capacity(params.len());
            for p in &params {
                let Some(name) = p.as_str().map(str::to_ascii_lowercase) else {
                    reply_error(&st, id, 2, "Invalid request: stream names must be strings", Some(&req_id));
                    return None;
                };
                match topic_of(&st, id, &name) {
                    Ok(t) => parsed.push((name, t)),
                    Err(()) => {
                        reply_error(
                            &st,
                            id,
                            2,
                            &format!("Invalid request: unsupported stream '{name}'"),
                            Some(&req_id),
                        );
                        return None;
                    }
                }
            }
            if method == "SUBSCRIBE" {
                let held = st.conns.get(&id).map_or(0, |c| c.streams.len());
                let new =
                    parsed.iter().filter(|(n, _)| !st.conns.get(&id).is_some_and(|c| c.streams.contains(n))).count();
                if held + new > STREAMS_PER_CONNECTION_MAX {
                    let msg = format!("Invalid request: at most {STREAMS_PER_CONNECTION_MAX} streams per connection");
                    reply_error(&st, id, 2, &msg, Some(&req_id));
                    return None;
                }
                for (name, topic) in parsed {
                    add_stream(&mut st, id, &name, topic);
                }
            } else {
                for (name, topic) in parsed {
                    remove_stream(&mut st, id, &name, topic);
                }
            }
            st.send_to(id, format!("{{\"result\":null,\"id\":{req_id}}}"));
        }
        "LIST_SUBSCRIPTIONS" => {
            let list = st.conns.get(&id).map(|c| c.streams.clone()).unwrap_or_default();
            let names: Vec<String> = list.iter().map(|s| json_str(s)).collect();
            st.send_to(id, format!("{{\"result\":[{}],\"id\":{req_id}}}", names.join(",")));
        }
        "SET_PROPERTY" => match (params.first().and_then(|p| p.as_str()), params.get(1).and_then(|p| p.as_bool())) {
            (Some("combined"), Some(on)) => {
                if let Some(c) = st.conns.get_mut(&id) {
                    c.combined = on;
                }
                st.send_to(id, format!("{{\"result\":null,\"id\":{req_id}}}"));
            }
            _ => reply_error(&st, id, 2, "Invalid request: unknown property", Some(&req_id)),
        },
        "GET_PROPERTY" => match params.first().and_then(|p| p.as_str()) {
            Some("combined") => {
                let on = st.conns.get(&id).is_some_and(|c| c.combined);
                st.send_to(id, format!("{{\"result\":{on},\"id\":{req_id}}}"));
            }
            _ => reply_error(&st, id, 2, "Invalid request: unknown property", Some(&req_id)),
        },
        _ => reply_error(&st, id, 2, "Invalid request: unknown method", Some(&req_id)),
    }
    None
}

fn push_changes(out: &mut String, book: &BookState, changes: &mut dyn Iterator<Item = (i64, u64)>) {
    out.push('[');
    for (i, (p, q)) in changes.enumerate() {
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

fn depth_event(book: &BookState, now: i64, first: u64, last: u64, bids: &[(i64, u64)], asks: &[(i64, u64)]) -> String {
    let mut out = String::with_capacity(128 + 32 * (bids.len() + asks.len()));
    let _ =
        write!(out, "{{\"e\":\"depthUpdate\",\"E\":{now},\"s\":\"{}\",\"U\":{first},\"u\":{last},\"b\":", book.symbol);
    push_changes(&mut out, book, &mut bids.iter().copied());
    out.push_str(",\"a\":");
    push_changes(&mut out, book, &mut asks.iter().copied());
    out.push('}');
    out
}

/// Emits the diff of one market step of book `b`.
pub(crate) fn on_book_step(st: &mut State, b: usize, changes: &[Change], now: i64, gap: bool) {
    let book = &mut st.books[b];
    let first = (book.seq + 1 + i64::from(gap)) as u64;
    let last = first + changes.len() as u64 - 1;
    book.seq = last as i64;
    let id = book.id;
    let fast = Topic::BinanceDepth { book: id, slow: false };
    let slow = Topic::BinanceDepth { book: id, slow: true };
    if st.has_subs(&fast) {
        let book = &st.books[b];
        let sides = Sides::of(changes);
        let make = |us: bool| {
            let mut e = depth_event(book, now, first, last, &sides.bids, &sides.asks);
            if us {
                e = e.replacen(&format!("\"E\":{now},"), &format!("\"E\":{},", crate::SEND_TIME_MARK), 1);
            }
            e
        };
        st.publish_binance(&fast, |raw| wrap(&stream_name(book, "@depth@100ms"), raw), make);
    }
    if st.has_subs(&slow) {
        if gap {
            // Send what was aggregated before the gap, so the gap shows between two events.
            flush_one(st, b, now);
        }
        let book = &mut st.books[b];
        let acc = book.slow.get_or_insert_with(|| SlowDiff { first, last, ..SlowDiff::default() });
        acc.last = last;
        for c in changes {
            acc.levels.insert((c.side == Side::Bid, c.price), c.qty);
        }
    } else {
        st.books[b].slow = None;
    }
}

fn flush_one(st: &mut State, b: usize, now: i64) {
    let Some(acc) = st.books[b].slow.take() else { return };
    if acc.levels.is_empty() {
        return;
    }
    let book = &st.books[b];
    let mut bids: Vec<(i64, u64)> = acc.levels.iter().filter(|(k, _)| k.0).map(|(k, &q)| (k.1, q)).collect();
    bids.reverse();
    let asks: Vec<(i64, u64)> = acc.levels.iter().filter(|(k, _)| !k.0).map(|(k, &q)| (k.1, q)).collect();
    let make = |us: bool| {
        let mut e = depth_event(book, now, acc.first, acc.last, &bids, &asks);
        if us {
            e = e.replacen(&format!("\"E\":{now},"), &format!("\"E\":{},", crate::SEND_TIME_MARK), 1);
        }
        e
    };
    let topic = Topic::BinanceDepth { book: book.id, slow: true };
    st.publish_binance(&topic, |raw| wrap(&stream_name(book, "@depth"), raw), make);
}

/// Sends the aggregated `<sym>@depth` diffs (called every second).
pub(crate) fn flush_slow(st: &mut State, now: i64) {
    let due: Vec<usize> = st.books.iter().enumerate().filter(|(_, b)| b.slow.is_some()).map(|(i, _)| i).collect();
    for b in due {
        flush_one(st, b, now);
    }
}

/// Emits one trade of book `b`.
pub(crate) fn on_trade(st: &State, b: usize, t: &TradeRec) {
    let book = &st.books[b];
    let topic = Topic::BinanceTrade(book.id);
    if !st.has_subs(&topic) {
        return;
    }
    // Microsecond connections get the send time, filled in by the connection's writer: the
    // latency benchmark measures from it.
    let make = |us: bool| {
        format!(
            "{{\"e\":\"trade\",\"E\":{now},\"s\":\"{sym}\",\"t\":{id},\"p\":\"{p}\",\"q\":\"{q}\",\"T\":{now},\"m\":{m},\"M\":true}}",
            now = if us { crate::SEND_TIME_MARK.to_owned() } else { t.ts_ms.to_string() },
            sym = book.symbol,
            id = t.id,
            p = fixed(t.price, book.px_dec),
            q = fixed(i64::try_from(t.qty).unwrap_or(i64::MAX), book.qty_dec),
            m = t.taker_sell,
        )
    };
    st.publish_binance(&topic, |raw| wrap(&stream_name(book, "@trade"), raw), make);
}

/// Sends `serverShutdown` to every Binance connection (raw or wrapped as `!serverShutdown`).
pub(crate) fn server_shutdown(st: &State) {
    let now = now_ms();
    let raw = format!("{{\"e\":\"serverShutdown\",\"E\":{now}}}");
    st.broadcast(Venue::Binance, |c| if c.combined { wrap("!serverShutdown", &raw) } else { raw.clone() });
}

// ---------------------------------------------------------------------------------------------
// REST.

/// Answers a Binance REST route.
pub(crate) fn rest(shared: &Shared, route: &str, q: &[(String, String)]) -> Reply {
    match route {
        "/api/v3/exchangeInfo" => exchange_info(shared, q),
        "/api/v3/depth" => depth(shared, q),
        _ => klines(shared, q),
    }
}

fn missing(name: &str) -> Reply {
    error(400, -1102, &format!("Mandatory parameter '{name}' was not sent, was empty/null, or malformed."))
}

fn bad_param(name: &str) -> Reply {
    error(400, -1100, &format!("Illegal characters found in parameter '{name}'."))
}

fn invalid_symbol() -> Reply {
    error(400, -1121, "Invalid symbol.")
}

fn exchange_info(shared: &Shared, q: &[(String, String)]) -> Reply {
    let st = shared.lock();
    let mut wanted: Option<Vec<String>> = None;
    if let Some(s) = param(q, "symbol") {
        wanted = Some(vec![s.to_ascii_uppercase()]);
    } else if let Some(list) = param(q, "symbols") {
        match serde_json::from_str::<Vec<String>>(list) {
            Ok(v) => wanted = Some(v.iter().map(|s| s.to_ascii_uppercase()).collect()),
            Err(_) => return bad_param("symbols"),
        }
    }
    let books: Vec<&BookState> = match &wanted {
        None => st.registry.venue_books(Venue::Binance).iter().map(|id| &st.books[id.index()]).collect(),
        Some(list) => {
            let mut out = Vec::with_capacity(list.len());
            for s in list {
                match st.find(Venue::Binance, s) {
                    Some(b) => out.push(&st.books[b]),
                    None => return invalid_symbol(),
                }
            }
            out
        }
    };
    let mut out = String::with_capacity(256 + books.len() * 900);
    let _ = write!(
        out,
        "{{\"timezone\":\"UTC\",\"serverTime\":{},\"rateLimits\":[\
         {{\"rateLimitType\":\"REQUEST_WEIGHT\",\"interval\":\"MINUTE\",\"intervalNum\":1,\"limit\":6000}},\
         {{\"rateLimitType\":\"ORDERS\",\"interval\":\"SECOND\",\"intervalNum\":10,\"limit\":100}},\
         {{\"rateLimitType\":\"RAW_REQUESTS\",\"interval\":\"MINUTE\",\"intervalNum\":5,\"limit\":61000}}],\
         \"exchangeFilters\":[],\"symbols\":[",
        now_ms()
    );
    for (i, b) in books.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"symbol\":\"{sym}\",\"status\":\"{status}\",\"baseAsset\":\"{base}\",\"baseAssetPrecision\":8,\
             \"quoteAsset\":\"{quote}\",\"quotePrecision\":8,\"quoteAssetPrecision\":8,\"baseCommissionPrecision\":8,\
             \"quoteCommissionPrecision\":8,\"orderTypes\":[\"LIMIT\",\"LIMIT_MAKER\",\"MARKET\",\"STOP_LOSS_LIMIT\",\
             \"TAKE_PROFIT_LIMIT\"],\"icebergAllowed\":true,\"ocoAllowed\":true,\"otoAllowed\":true,\
             \"quoteOrderQtyMarketAllowed\":true,\"allowTrailingStop\":true,\"cancelReplaceAllowed\":true,\
             \"isSpotTradingAllowed\":true,\"isMarginTradingAllowed\":false,\"filters\":[\
             {{\"filterType\":\"PRICE_FILTER\",\"minPrice\":\"{tick}\",\"maxPrice\":\"1000000.00000000\",\"tickSize\":\"{tick}\"}},\
             {{\"filterType\":\"LOT_SIZE\",\"minQty\":\"{lot}\",\"maxQty\":\"9000000000.00000000\",\"stepSize\":\"{lot}\"}},\
             {{\"filterType\":\"NOTIONAL\",\"minNotional\":\"5.00000000\",\"applyMinToMarket\":true,\
             \"maxNotional\":\"9000000.00000000\",\"applyMaxToMarket\":false,\"avgPriceMins\":5}}],\
             \"permissions\":[],\"permissionSets\":[[\"SPOT\"]],\"defaultSelfTradePreventionMode\":\"EXPIRE_MAKER\",\
             \"allowedSelfTradePreventionModes\":[\"EXPIRE_TAKER\",\"EXPIRE_MAKER\",\"EXPIRE_BOTH\"]}}",
            sym = b.symbol,
            status = if b.listed { "TRADING" } else { "BREAK" },
            base = b.base,
            quote = b.quote,
            tick = fixed(b.tick, 8),
            lot = fixed(b.lot, 8),
        );
    }
    out.push_str("]}");
    Reply::ok(out)
}

fn depth(shared: &Shared, q: &[(String, String)]) -> Reply {
    let Some(symbol) = param(q, "symbol").filter(|s| !s.is_empty()) else { return missing("symbol") };
    let limit = match int_param(q, "limit") {
        Ok(None) => 100,
        Ok(Some(l)) if l >= 1 => (l as usize).min(DEPTH_LIMIT_MAX),
        _ => return bad_param("limit"),
    };
    let mut st = shared.lock();
    let Some(b) = st.find(Venue::Binance, symbol) else { return invalid_symbol() };
    st.depth_requests += 1;
    let every = st.cfg.faults.stale_snapshot_every;
    let stale = st.books[b].pending.stale || (every > 0 && st.depth_requests.is_multiple_of(every));
    st.books[b].pending.stale = false;
    if stale {
        st.stats.fault(Venue::Binance, FaultKind::StaleSnapshot);
    }
    let book = &st.books[b];
    let id = if stale { book.initial_seq } else { book.seq };
    let (bids, asks) = book.top(limit);
    let mut out = String::with_capacity(64 + 40 * (bids.len() + asks.len()));
    let _ = write!(out, "{{\"lastUpdateId\":{id},\"bids\":");
    push_changes(&mut out, book, &mut bids.iter().map(|l| (l.price.0, l.qty.0)));
    out.push_str(",\"asks\":");
    push_changes(&mut out, book, &mut asks.iter().map(|l| (l.price.0, l.qty.0)));
    out.push('}');
    Reply::ok(out)
}

fn klines(shared: &Shared, q: &[(String, String)]) -> Reply {
    let Some(symbol) = param(q, "symbol").filter(|s| !s.is_empty()) else { return missing("symbol") };
    let Some(interval) = param(q, "interval").filter(|s| !s.is_empty()) else { return missing("interval") };
    let Some(tf) = Timeframe::parse(interval) else { return error(400, -1120, "Invalid interval.") };
    let limit = match int_param(q, "limit") {
        Ok(None) => 500,
        Ok(Some(l)) if (1..=KLINES_LIMIT_MAX as i64).contains(&l) => l as usize,
        _ => return error(400, -1100, "Illegal characters found in parameter 'limit'; legal range is '1-1000'."),
    };
    let Ok(start) = int_param(q, "startTime") else { return bad_param("startTime") };
    let Ok(end) = int_param(q, "endTime") else { return bad_param("endTime") };
    let st = shared.lock();
    let Some(b) = st.find(Venue::Binance, symbol) else { return invalid_symbol() };
    let book = &st.books[b];
    let all = bars(book, tf, now_ms());
    let in_range: Vec<_> =
        all.iter().filter(|c| start.is_none_or(|s| c.open_ms >= s) && end.is_none_or(|e| c.open_ms <= e)).collect();
    let picked: &[_] = if start.is_some() {
        &in_range[..limit.min(in_range.len())]
    } else {
        &in_range[in_range.len().saturating_sub(limit)..]
    };
    let d = tf.duration_ms();
    let mut out = String::with_capacity(2 + picked.len() * 200);
    out.push('[');
    for (i, c) in picked.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let v = bar_volume(book, tf, c);
        let _ = write!(
            out,
            "[{},\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",{},\"{}\",{},\"{}\",\"{}\",\"0\"]",
            c.open_ms,
            fixed(c.open.0, book.px_dec),
            fixed(c.high.0, book.px_dec),
            fixed(c.low.0, book.px_dec),
            fixed(c.close.0, book.px_dec),
            fixed(i64::try_from(v.base).unwrap_or(i64::MAX), book.qty_dec),
            c.open_ms + d - 1,
            fixed(v.quote, 8),
            v.trades,
            fixed(i64::try_from(v.taker_base).unwrap_or(i64::MAX), book.qty_dec),
            fixed(v.taker_quote, 8),
        );
    }
    out.push(']');
    Reply::ok(out)
}
