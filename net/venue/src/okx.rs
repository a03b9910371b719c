//! OKX v5 adapter facts: REST instruments and candles (`1Dutc`/`1Wutc` for UTC days and weeks),
//! and the `/ws/v5/public` `books` and `trades` channels (venues.md §3).
//!
//! Choices: at most 14 pairs (28 channels) per connection, under OKX's advice of fewer than 30
//! `books` channels each; the text `ping` after 20 s without a message (the server closes at
//! 30 s). Candles come from `market/candles` (the latest 1,440 rows, enough for 500 bars) and,
//! when a page comes back short, from `market/history-candles`.

use rampart_engine::candle::Timeframe;
use rampart_engine::feed::intervals::rest_name;
use rampart_engine::instrument::Status;
use rampart_engine::Venue;

use super::{candle, int, listed, text, CandlePage, Listed, RestApi, RestError};
use rampart_engine::book::Book;
use rampart_engine::feed::okx as ok;
use rampart_engine::{Tick, TickKind};

use super::protocol::{Applied, Ctx, Defaults, Keepalive, Protocol};
use super::session::{Count, DECODE_LEVELS_MAX, DECODE_TRADES_MAX};

/// OKX's REST API.
pub struct Okx;

/// The `data` array of an OKX envelope, or the venue's error.
fn data(body: &[u8], what: &'static str) -> Result<Vec<serde_json::Value>, RestError> {
    let mut v: serde_json::Value = serde_json::from_slice(body).map_err(|e| RestError::json(what, e))?;
    let code = v.get("code").and_then(text).unwrap_or_default();
    if code != "0" {
        let msg = v.get("msg").and_then(text).unwrap_or_default();
        return Err(RestError::Venue { what, code: code.to_string(), message: msg.to_string() });
    }
    match v.get_mut("data").map(serde_json::Value::take) {
        Some(serde_json::Value::Array(a)) => Ok(a),
        _ => Err(RestError::shape(what, "no 'data' array")),
    }
}

impl RestApi for Okx {
    fn listing_url(base: &str) -> String {
        format!("{base}/api/v5/public/instruments?instType=SPOT")
    }

    fn parse_listing(body: &[u8]) -> Result<Vec<Listed>, RestError> {
        let rows = data(body, "instruments")?;
        let mut out = Vec::with_capacity(rows.len());
        for s in &rows {
            let f = |k: &str| s.get(k).and_then(text).unwrap_or_default();
            let status = match f("state").as_str() {
                "live" => Status::Trading,
                _ => Status::Halted,
            };
            if let Some(l) =
                listed(Venue::Okx, &f("instId"), &f("baseCcy"), &f("quoteCcy"), &f("tickSz"), &f("lotSz"), status)
            {
                out.push(l);
            }
        }
        Ok(out)
    }

    const LATEST_PAGE_MAX: usize = 300;
    const OLDER_PAGE_MAX: usize = 300;

    fn candles_url(base: &str, native: &str, tf: Timeframe, end_ms: Option<i64>, limit: usize) -> String {
        // `after` = rows older than that time; the first page is the latest.
        match end_ms {
            None => {
                format!("{base}/api/v5/market/candles?instId={native}&bar={}&limit={limit}", rest_name(Venue::Okx, tf))
            }
            Some(end) => format!(
                "{base}/api/v5/market/history-candles?instId={native}&bar={}&after={end}&limit={limit}",
                rest_name(Venue::Okx, tf)
            ),
        }
    }

    fn parse_candles(body: &[u8]) -> Result<CandlePage, RestError> {
        let rows = data(body, "candles")?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let row = row
                .as_array()
                .filter(|r| r.len() >= 8)
                .ok_or(RestError::shape("candles", "a row is not an array of 8+"))?;
            let s = |i: usize| text(&row[i]).unwrap_or_default();
            let open = int(&row[0]).ok_or(RestError::shape("candles", "bad ts"))?;
            let bar = candle(open, [&s(1), &s(2), &s(3), &s(4)], &s(7), None);
            out.push(bar.ok_or(RestError::shape("candles", "bad price or volume"))?);
        }
        out.sort_by_key(|c| c.open_ms);
        Ok(out)
    }
}

/// The public WebSocket URL (books, trades).
pub fn stream_url(ws_base: &str) -> String {
    format!("{ws_base}/ws/v5/public")
}

/// One (un)subscribe request for the given channels of `natives` (OKX takes up to 64 KB).
pub fn request(op: &str, natives: &[&str], book: bool, trades: bool, id: &mut u64) -> String {
    let mut args = Vec::with_capacity(natives.len() * 2);
    for n in natives {
        if book {
            args.push(format!("{{\"channel\":\"books\",\"instId\":\"{n}\"}}"));
        }
        if trades {
            args.push(format!("{{\"channel\":\"trades\",\"instId\":\"{n}\"}}"));
        }
    }
    *id += 1;
    format!("{{\"id\":\"{id}\",\"op\":\"{op}\",\"args\":[{}]}}", args.join(","))
}

/// The keepalive: the plain text `ping`.
pub const PING: &[u8] = b"ping";

/// Subscription requests an OKX connection may make per hour (venues.md §3).
pub const SUBSCRIBE_OPS_PER_HOUR: usize = 480;
/// Books per subscribe request at most: 20 channels keep each request well under OKX's 64 KB.
pub const BOOKS_PER_REQUEST_MAX: usize = 10;

impl Protocol for Okx {
    const VENUE: Venue = Venue::Okx;
    // market/candles 40 per 2 s; 3 connections per s; fewer than 30 channels per connection.
    const DEFAULTS: Defaults = Defaults {
        rest: "https://www.okx.com",
        ws: "wss://ws.okx.com:8443",
        pairs_per_connection: 14,
        rest_weight_per_s: 10.0,
        connects_per_s: 2.0,
    };
    const IDLE_LIMIT_MS: i64 = 40_000;
    const CONTROL_GAP_MS: i64 = 100;
    const SUBSCRIBE_OPS_PER_HOUR: Option<usize> = Some(SUBSCRIBE_OPS_PER_HOUR);
    // Sent when nothing arrived for 20 s (the server closes at 30 s of silence).
    const KEEPALIVE: Option<Keepalive> = Some(Keepalive { bytes: PING, every_ms: 20_000, after_silence: true });
    type Decoder = ok::OkxDecoder;
    type Sync = ok::OkxBookSync;

    fn decoder() -> ok::OkxDecoder {
        ok::OkxDecoder::new(DECODE_LEVELS_MAX, DECODE_TRADES_MAX)
    }

    fn book_sync(verify_checksums: bool) -> ok::OkxBookSync {
        ok::OkxBookSync::new(ok::BOOKS_LEVELS_PER_SIDE_MAX, verify_checksums)
    }

    fn reset(sync: &mut ok::OkxBookSync, book: &mut Book) {
        sync.reset(book);
    }

    fn is_live(sync: &ok::OkxBookSync) -> bool {
        sync.is_live()
    }

    fn stream_url(ws_base: &str, _natives: &[&str]) -> String {
        stream_url(ws_base)
    }

    fn subscribe_all(natives: &[&str], req_id: &mut u64) -> Vec<String> {
        natives.chunks(BOOKS_PER_REQUEST_MAX).map(|c| request("subscribe", c, true, true, req_id)).collect()
    }

    fn resubscribe(native: &str, req_id: &mut u64) -> Option<[String; 2]> {
        Some([
            request("unsubscribe", &[native], true, false, req_id),
            request("subscribe", &[native], true, false, req_id),
        ])
    }

    fn handle(dec: &mut ok::OkxDecoder, syncs: &mut [ok::OkxBookSync], ctx: &mut Ctx<'_>, payload: &[u8]) -> Applied {
        let Ok(msg) = dec.decode(payload) else { return Applied::Counted(Count::DecodeError) };
        if msg.is_upgrade_notice() {
            return Applied::Notice;
        }
        match msg {
            ok::Message::Book(push) => {
                if push.channel != b"books" {
                    return Applied::Nothing;
                }
                let Some(k) = ctx.slot(push.inst_id) else { return Applied::Nothing };
                let Some(book) = ctx.sink.book(ctx.books[k]) else { return Applied::Nothing };
                let o = syncs[k].on_book(&push, book);
                let found = match o {
                    ok::SyncOutcome::Gap { .. } => Some(Count::Gap),
                    ok::SyncOutcome::ChecksumMismatch { .. } => Some(Count::ChecksumMismatch),
                    ok::SyncOutcome::Crossed => Some(Count::Crossed),
                    ok::SyncOutcome::Reset { .. } => Some(Count::Reset),
                    _ => None,
                };
                Applied::Book { k, found, rebuild: o.wants_resubscribe() }
            }
            ok::Message::Trades { inst_id, trades, .. } => {
                let Some(k) = ctx.slot(inst_id) else { return Applied::Nothing };
                for t in trades {
                    ctx.sink.trade(&Tick {
                        book: ctx.books[k],
                        ts_ms: t.ts_ms,
                        kind: TickKind::Trade { price: t.price, qty: t.qty, taker_sell: t.taker_sell },
                    });
                }
                Applied::Data
            }
            ok::Message::Error { .. } => Applied::Counted(Count::VenueError),
            _ => Applied::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_and_candles() {
        let body = br#"{"code":"0","msg":"","data":[
          {"instId":"BTC-USDT","baseCcy":"BTC","quoteCcy":"USDT","tickSz":"0.1","lotSz":"0.00000001","minSz":"0.00001","state":"live"},
          {"instId":"NEW-USDT","baseCcy":"","quoteCcy":"","tickSz":"","lotSz":"","state":"preopen"}]}"#;
        let l = Okx::parse_listing(body).expect("valid");
        assert_eq!(l.len(), 1, "an early listing with empty fields is skipped");
        assert_eq!((l[0].native.as_str(), l[0].instrument.symbol.as_str()), ("BTC-USDT", "BTCUSDT"));
        assert!(Okx::parse_listing(br#"{"code":"50011","msg":"Too Many Requests","data":[]}"#).is_err());
        let c = br#"{"code":"0","msg":"","data":[["1597026383085","8533.02","8553.74","8527.17","8548.26","45247","529.5858061","5529.5858061","0"],["1597026083085","8500","8540","8490","8533.02","1","1","1","1"]]}"#;
        let c = Okx::parse_candles(c).expect("valid");
        assert_eq!(c.len(), 2);
        assert!(c[0].open_ms < c[1].open_ms);
        assert!(Okx::candles_url("http://h", "BTC-USDT", Timeframe::W1, None, 300).ends_with("bar=1Wutc&limit=300"));
        assert!(Okx::candles_url("http://h", "BTC-USDT", Timeframe::D1, Some(5), 300).contains("history-candles"));
    }

    #[test]
    fn subscribe_request_shape() {
        let mut id = 0;
        let r = request("subscribe", &["BTC-USDT"], true, true, &mut id);
        assert_eq!(
            r,
            r#"{"id":"1","op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"},{"channel":"trades","instId":"BTC-USDT"}]}"#
        );
    }
}
