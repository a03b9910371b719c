//! Bybit v5 spot adapter facts: REST instruments and klines (always `category=spot`), and the
//! public spot WebSocket topics (venues.md §2).
//!
//! Choices: `orderbook.200.{SYM}` (100 ms, 200 levels: deep enough for walls, and Bybit's own
//! WS snapshot starts it, so no REST snapshot is needed) and `publicTrade.{SYM}`; at most 10
//! topics per subscribe request (the spot limit). Spot lists only `Trading` instruments, so a
//! pair that vanishes from the list is delisted.

use rampart_engine::candle::Timeframe;
use rampart_engine::feed::intervals::rest_name;
use rampart_engine::instrument::Status;
use rampart_engine::Venue;

use super::{candle, int, listed, text, CandlePage, Listed, RestApi, RestError};
use rampart_engine::book::Book;
use rampart_engine::feed::bybit as by;

use super::protocol::{Applied, Ctx, Defaults, Keepalive, Protocol};
use super::session::{Count, DECODE_LEVELS_MAX, DECODE_TRADES_MAX};

/// Book depth subscribed.
pub const BOOK_DEPTH: usize = 200;
/// Topics per subscribe request at most (spot).
pub const TOPICS_PER_REQUEST_MAX: usize = 10;

/// Bybit's REST API.
pub struct Bybit;

/// The `result` of a v5 envelope, or the venue's error.
pub(crate) fn result(body: &[u8], what: &'static str) -> Result<serde_json::Value, RestError> {
    let mut v: serde_json::Value = serde_json::from_slice(body).map_err(|e| RestError::json(what, e))?;
    let code = v.get("retCode").and_then(int);
    if code != Some(0) {
        let msg = v.get("retMsg").and_then(text).unwrap_or_default();
        return Err(RestError::Venue {
            what,
            code: code.map_or_else(|| "none".to_owned(), |c| c.to_string()),
            message: msg.to_string(),
        });
    }
    Ok(v.get_mut("result").map(serde_json::Value::take).unwrap_or_default())
}

impl RestApi for Bybit {
    fn listing_url(base: &str) -> String {
        format!("{base}/v5/market/instruments-info?category=spot")
    }

    fn parse_listing(body: &[u8]) -> Result<Vec<Listed>, RestError> {
        let r = result(body, "instruments-info")?;
        let list = r.get("list").and_then(|l| l.as_array()).ok_or(RestError::shape("instruments-info", "no 'list'"))?;
        let mut out = Vec::with_capacity(list.len());
        for s in list {
            let f = |k: &str| s.get(k).and_then(text).unwrap_or_default();
            let g = |o: &str, k: &str| s.get(o).and_then(|x| x.get(k)).and_then(text).unwrap_or_default();
            let status = match f("status").as_str() {
                "Trading" => Status::Trading,
                "Closed" => Status::Delisted,
                _ => Status::Halted,
            };
            if let Some(l) = listed(
                Venue::Bybit,
                &f("symbol"),
                &f("baseCoin"),
                &f("quoteCoin"),
                &g("priceFilter", "tickSize"),
                &g("lotSizeFilter", "basePrecision"),
                status,
            ) {
                out.push(l);
            }
        }
        Ok(out)
    }

    const LATEST_PAGE_MAX: usize = 1000;
    const OLDER_PAGE_MAX: usize = 1000;

    fn candles_url(base: &str, native: &str, tf: Timeframe, end_ms: Option<i64>, limit: usize) -> String {
        let mut u = format!(
            "{base}/v5/market/kline?category=spot&symbol={native}&interval={}&limit={limit}",
            rest_name(Venue::Bybit, tf)
        );
        if let Some(end) = end_ms {
            u.push_str(&format!("&end={}", end - 1));
        }
        u
    }

    fn parse_candles(body: &[u8]) -> Result<CandlePage, RestError> {
        let r = result(body, "kline")?;
        let rows = r.get("list").and_then(|l| l.as_array()).ok_or(RestError::shape("kline", "no 'list'"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let row = row
                .as_array()
                .filter(|r| r.len() >= 7)
                .ok_or(RestError::shape("kline", "a row is not an array of 7+"))?;
            let s = |i: usize| text(&row[i]).unwrap_or_default();
            let open = int(&row[0]).ok_or(RestError::shape("kline", "bad start time"))?;
            let bar = candle(open, [&s(1), &s(2), &s(3), &s(4)], &s(6), None);
            out.push(bar.ok_or(RestError::shape("kline", "bad price or volume"))?);
        }
        // Newest first on the wire.
        out.sort_by_key(|c| c.open_ms);
        Ok(out)
    }
}

/// The WebSocket URL of public spot streams.
pub fn stream_url(ws_base: &str) -> String {
    format!("{ws_base}/v5/public/spot")
}

/// Subscribe (or unsubscribe) requests for the book and trade topics of `natives`, at most
/// [`TOPICS_PER_REQUEST_MAX`] topics each.
pub fn requests(op: &str, natives: &[&str], book: bool, trades: bool, req_id: &mut u64) -> Vec<String> {
    let mut topics = Vec::with_capacity(natives.len() * 2);
    for n in natives {
        if book {
            topics.push(format!("\"orderbook.{BOOK_DEPTH}.{n}\""));
        }
        if trades {
            topics.push(format!("\"publicTrade.{n}\""));
        }
    }
    topics
        .chunks(TOPICS_PER_REQUEST_MAX)
        .map(|c| {
            *req_id += 1;
            format!("{{\"req_id\":\"{}\",\"op\":\"{op}\",\"args\":[{}]}}", req_id, c.join(","))
        })
        .collect()
}

/// The application ping (every 20 s).
pub const PING: &[u8] = br#"{"op":"ping"}"#;

impl Protocol for Bybit {
    const VENUE: Venue = Venue::Bybit;
    // 600 requests per 5 s; 500 connections per 5 min.
    const DEFAULTS: Defaults = Defaults {
        rest: "https://api.bybit.com",
        ws: "wss://stream.bybit.com",
        pairs_per_connection: 50,
        rest_weight_per_s: 50.0,
        connects_per_s: 0.8,
    };
    const IDLE_LIMIT_MS: i64 = 60_000;
    const CONTROL_GAP_MS: i64 = 100;
    const SUBSCRIBE_OPS_PER_HOUR: Option<usize> = None;
    const KEEPALIVE: Option<Keepalive> = Some(Keepalive { bytes: PING, every_ms: 20_000, after_silence: false });
    type Decoder = by::BybitDecoder;
    type Sync = by::BybitBookSync;

    fn decoder() -> by::BybitDecoder {
        by::BybitDecoder::new(DECODE_LEVELS_MAX, DECODE_TRADES_MAX)
    }

    fn book_sync(_verify_checksums: bool) -> by::BybitBookSync {
        by::BybitBookSync::new()
    }

    fn reset(sync: &mut by::BybitBookSync, book: &mut Book) {
        sync.reset(book);
    }

    fn is_live(sync: &by::BybitBookSync) -> bool {
        sync.is_live()
    }

    fn stream_url(ws_base: &str, _natives: &[&str]) -> String {
        stream_url(ws_base)
    }

    fn subscribe_all(natives: &[&str], req_id: &mut u64) -> Vec<String> {
        requests("subscribe", natives, true, true, req_id)
    }

    fn resubscribe(native: &str, req_id: &mut u64) -> Option<[String; 2]> {
        let one = |op: &str, req_id: &mut u64| requests(op, &[native], true, false, req_id).pop().unwrap_or_default();
        Some([one("unsubscribe", req_id), one("subscribe", req_id)])
    }

    fn handle(
        dec: &mut by::BybitDecoder,
        syncs: &mut [by::BybitBookSync],
        ctx: &mut Ctx<'_>,
        payload: &[u8],
    ) -> Applied {
        let Ok(msg) = dec.decode(payload) else { return Applied::Counted(Count::DecodeError) };
        match msg {
            by::Message::Book(update) => {
                let Some(k) = ctx.slot(update.symbol) else { return Applied::Nothing };
                let Some(book) = ctx.sink.book(ctx.books[k]) else { return Applied::Nothing };
                let o = syncs[k].on_book(&update, book);
                // The stream is the top N of the venue's book: levels pushed out of it are not
                // always removed explicitly (venues.md §2.2 rule 5).
                book.truncate(BOOK_DEPTH);
                let found = match o {
                    by::SyncOutcome::Gap { .. } => Some(Count::Gap),
                    by::SyncOutcome::Crossed => Some(Count::Crossed),
                    by::SyncOutcome::Reset => Some(Count::Reset),
                    _ => None,
                };
                Applied::Book { k, found, rebuild: o.wants_resubscribe() }
            }
            by::Message::Trades(trades) => {
                for t in trades.iter() {
                    if let Some(k) = ctx.slot(t.symbol) {
                        ctx.sink.trade(&t.tick(ctx.books[k]));
                    }
                }
                Applied::Data
            }
            by::Message::OpReply(r) if r.is_failure() => Applied::Counted(Count::VenueError),
            _ => Applied::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_from_documented_row() {
        let body = br#"{"retCode":0,"retMsg":"OK","result":{"category":"spot","list":[
          {"symbolId":9,"symbol":"BTCUSDT","baseCoin":"BTC","quoteCoin":"USDT","innovation":"0","status":"Trading",
           "lotSizeFilter":{"basePrecision":"0.000001","quotePrecision":"0.0000001","minOrderQty":"0.000011"},
           "priceFilter":{"tickSize":"0.1"}}]},"retExtInfo":{},"time":1}"#;
        let l = Bybit::parse_listing(body).expect("valid");
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].instrument.tick.0, l[0].instrument.lot.0), (10_000_000, 100));
        assert!(Bybit::parse_listing(br#"{"retCode":10001,"retMsg":"bad"}"#).is_err());
    }

    #[test]
    fn klines_newest_first_are_sorted() {
        let body = br#"{"retCode":0,"retMsg":"OK","result":{"list":[["1670608800000","17071","17073","17027","17055.5","268611","15.7"],["1670608500000","17000","17080","16990","17071","1","1"]]}}"#;
        let c = Bybit::parse_candles(body).expect("valid");
        assert_eq!(c.iter().map(|c| c.open_ms).collect::<Vec<_>>(), [1_670_608_500_000, 1_670_608_800_000]);
        assert!(
            Bybit::candles_url("http://h", "X", Timeframe::D1, None, 10).contains("category=spot&symbol=X&interval=D")
        );
    }

    #[test]
    fn subscribe_requests_hold_ten_topics_at_most() {
        let names: Vec<String> = (0..7).map(|i| format!("P{i}USDT")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut id = 0;
        let r = requests("subscribe", &refs, true, true, &mut id);
        assert_eq!(r.len(), 2);
        assert!(
            r[0].starts_with(r#"{"req_id":"1","op":"subscribe","args":["orderbook.200.P0USDT","publicTrade.P0USDT""#)
        );
        let v: serde_json::Value = serde_json::from_str(&r[1]).expect("json");
        assert_eq!(v["args"].as_array().map(Vec::len), Some(4));
    }
}
