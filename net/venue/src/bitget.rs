//! Bitget v2 spot adapter facts: REST symbols and candles (`1Dutc`/`1Wutc`), and the
//! `/v2/ws/public` `books` and `trade` channels (venues.md §4).
//!
//! Choices: at most 24 pairs (48 channels) per connection, under Bitget's advice of fewer than
//! 50; subscribe requests kept under the 4096-byte payload bound; the text `ping` every 25 s
//! (the server wants one within 30 s... at most every 2 minutes). Tick and lot sizes are derived
//! from `pricePrecision` and `quantityPrecision` (venues.md marks this UNCONFIRMED as an exact
//! rule); `offline` is delisted, `halt` and `gray` are halted.

use rampart_engine::candle::Timeframe;
use rampart_engine::feed::intervals::rest_name;
use rampart_engine::instrument::Status;
use rampart_engine::Venue;

use super::{candle, int, listed, step_from_precision, text, CandlePage, Listed, RestApi, RestError};
use rampart_engine::book::Book;
use rampart_engine::feed::bitget as bg;

use super::protocol::{Applied, Ctx, Defaults, Keepalive, Protocol};
use super::session::{Count, DECODE_LEVELS_MAX, DECODE_TRADES_MAX};

/// Bytes of one subscribe request at most (Bitget's bound is 4096).
pub const SUBSCRIBE_BYTES_MAX: usize = 4000;

/// Bitget's REST API.
pub struct Bitget;

fn data(body: &[u8], what: &'static str) -> Result<serde_json::Value, RestError> {
    let mut v: serde_json::Value = serde_json::from_slice(body).map_err(|e| RestError::json(what, e))?;
    let code = v.get("code").and_then(text).unwrap_or_default();
    if code != "00000" {
        let msg = v.get("msg").and_then(text).unwrap_or_default();
        return Err(RestError::Venue { what, code: code.to_string(), message: msg.to_string() });
    }
    Ok(v.get_mut("data").map(serde_json::Value::take).unwrap_or_default())
}

impl RestApi for Bitget {
    fn listing_url(base: &str) -> String {
        format!("{base}/api/v2/spot/public/symbols")
    }

    fn parse_listing(body: &[u8]) -> Result<Vec<Listed>, RestError> {
        let d = data(body, "symbols")?;
        let rows = d.as_array().ok_or(RestError::shape("symbols", "'data' is not an array"))?;
        let mut out = Vec::with_capacity(rows.len());
        for s in rows {
            let f = |k: &str| s.get(k).and_then(text).unwrap_or_default();
            let status = match f("status").as_str() {
                "online" => Status::Trading,
                "offline" => Status::Delisted,
                _ => Status::Halted,
            };
            let (Some(tick), Some(lot)) =
                (step_from_precision(&f("pricePrecision")), step_from_precision(&f("quantityPrecision")))
            else {
                continue;
            };
            if let Some(l) = listed(Venue::Bitget, &f("symbol"), &f("baseCoin"), &f("quoteCoin"), &tick, &lot, status) {
                out.push(l);
            }
        }
        Ok(out)
    }

    const LATEST_PAGE_MAX: usize = 1000;
    const OLDER_PAGE_MAX: usize = 200;

    fn candles_url(base: &str, native: &str, tf: Timeframe, end_ms: Option<i64>, limit: usize) -> String {
        match end_ms {
            // The latest page from `candles` (up to 1000 rows).
            None => format!(
                "{base}/api/v2/spot/market/candles?symbol={native}&granularity={}&limit={}",
                rest_name(Venue::Bitget, tf),
                limit.clamp(1, 1000)
            ),
            // Older pages from `history-candles` (`endTime` required, 200 rows at most).
            Some(end) => format!(
                "{base}/api/v2/spot/market/history-candles?symbol={native}&granularity={}&endTime={}&limit={}",
                rest_name(Venue::Bitget, tf),
                end - 1,
                limit.min(200)
            ),
        }
    }

    fn parse_candles(body: &[u8]) -> Result<CandlePage, RestError> {
        let d = data(body, "candles")?;
        let rows = d.as_array().ok_or(RestError::shape("candles", "'data' is not an array"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let row = row
                .as_array()
                .filter(|r| r.len() >= 8)
                .ok_or(RestError::shape("candles", "a row is not an array of 8+"))?;
            let s = |i: usize| text(&row[i]).unwrap_or_default();
            let open = int(&row[0]).ok_or(RestError::shape("candles", "bad ts"))?;
            let bar = candle(open, [&s(1), &s(2), &s(3), &s(4)], &s(7), None);
            out.push(bar.ok_or(RestError::shape("candles", "bad price or volume"))?);
        }
        // Documented oldest first, not guaranteed: sort.
        out.sort_by_key(|c| c.open_ms);
        Ok(out)
    }
}

/// The public WebSocket URL.
pub fn stream_url(ws_base: &str) -> String {
    format!("{ws_base}/v2/ws/public")
}

/// (Un)subscribe requests for the given channels of `natives`, each under
/// [`SUBSCRIBE_BYTES_MAX`] bytes.
pub fn requests(op: &str, natives: &[&str], book: bool, trades: bool) -> Vec<String> {
    let mut args = Vec::with_capacity(natives.len() * 2);
    for n in natives {
        if book {
            args.push(format!("{{\"instType\":\"SPOT\",\"channel\":\"books\",\"instId\":\"{n}\"}}"));
        }
        if trades {
            args.push(format!("{{\"instType\":\"SPOT\",\"channel\":\"trade\",\"instId\":\"{n}\"}}"));
        }
    }
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut len = 0;
    let overhead = op.len() + 24;
    for a in args {
        if !cur.is_empty() && overhead + len + a.len() + 1 > SUBSCRIBE_BYTES_MAX {
            out.push(format!("{{\"op\":\"{op}\",\"args\":[{}]}}", cur.join(",")));
            cur.clear();
            len = 0;
        }
        len += a.len() + 1;
        cur.push(a);
    }
    if !cur.is_empty() {
        out.push(format!("{{\"op\":\"{op}\",\"args\":[{}]}}", cur.join(",")));
    }
    out
}

/// The keepalive: the plain text `ping`.
pub const PING: &[u8] = b"ping";

/// Subscription requests a Bitget connection may make per hour (venues.md §4).
pub const SUBSCRIBE_OPS_PER_HOUR: usize = 240;
/// Levels per side whose text a book keeps for its checksum (Bitget does not document the
/// `books` depth; farther levels are kept in the book without text, as OKX's are).
pub const TEXT_LEVELS_MAX: usize = 400;

impl Protocol for Bitget {
    const VENUE: Venue = Venue::Bitget;
    // 20 requests per s per endpoint; 300 connections per 5 min; < 50 channels per connection.
    const DEFAULTS: Defaults = Defaults {
        rest: "https://api.bitget.com",
        ws: "wss://ws.bitget.com",
        pairs_per_connection: 24,
        rest_weight_per_s: 10.0,
        connects_per_s: 0.5,
    };
    const IDLE_LIMIT_MS: i64 = 75_000;
    // Bitget counts every message (pings too) against 10 per second.
    const CONTROL_GAP_MS: i64 = 150;
    const SUBSCRIBE_OPS_PER_HOUR: Option<usize> = Some(SUBSCRIBE_OPS_PER_HOUR);
    const KEEPALIVE: Option<Keepalive> = Some(Keepalive { bytes: PING, every_ms: 25_000, after_silence: false });
    type Decoder = bg::BitgetDecoder;
    type Sync = bg::BitgetBookSync;

    fn decoder() -> bg::BitgetDecoder {
        bg::BitgetDecoder::new(DECODE_LEVELS_MAX, DECODE_TRADES_MAX)
    }

    fn book_sync(verify_checksums: bool) -> bg::BitgetBookSync {
        bg::BitgetBookSync::new(TEXT_LEVELS_MAX, verify_checksums)
    }

    fn reset(sync: &mut bg::BitgetBookSync, book: &mut Book) {
        sync.reset(book);
    }

    fn is_live(sync: &bg::BitgetBookSync) -> bool {
        sync.is_live()
    }

    fn stream_url(ws_base: &str, _natives: &[&str]) -> String {
        stream_url(ws_base)
    }

    fn subscribe_all(natives: &[&str], _req_id: &mut u64) -> Vec<String> {
        requests("subscribe", natives, true, true)
    }

    fn resubscribe(native: &str, _req_id: &mut u64) -> Option<[String; 2]> {
        let one = |op: &str| requests(op, &[native], true, false).pop().unwrap_or_default();
        Some([one("unsubscribe"), one("subscribe")])
    }

    fn handle(
        dec: &mut bg::BitgetDecoder,
        syncs: &mut [bg::BitgetBookSync],
        ctx: &mut Ctx<'_>,
        payload: &[u8],
    ) -> Applied {
        let Ok(msg) = dec.decode(payload) else { return Applied::Counted(Count::DecodeError) };
        match msg {
            bg::Message::Book(push) => {
                if push.channel != bg::BookChannel::Books {
                    return Applied::Nothing;
                }
                let Some(k) = ctx.slot(push.inst_id) else { return Applied::Nothing };
                let Some(book) = ctx.sink.book(ctx.books[k]) else { return Applied::Nothing };
                let o = syncs[k].on_book(&push, book);
                let found = match o {
                    bg::SyncOutcome::Gap { .. } => Some(Count::Gap),
                    bg::SyncOutcome::ChecksumMismatch { .. } => Some(Count::ChecksumMismatch),
                    bg::SyncOutcome::Crossed => Some(Count::Crossed),
                    bg::SyncOutcome::SequenceRestart { .. } => Some(Count::Reset),
                    _ => None,
                };
                Applied::Book { k, found, rebuild: o.wants_resubscribe() }
            }
            bg::Message::Trades { inst_id, trades, action } => {
                // The first push after subscribing replays recent trades, which the history
                // already holds: only trades from then on are applied.
                if action == Some(bg::Action::Snapshot) {
                    return Applied::Nothing;
                }
                let Some(k) = ctx.slot(inst_id) else { return Applied::Nothing };
                // The decoder hands them oldest first (newest first on the wire).
                for t in trades {
                    ctx.sink.trade(&t.tick(ctx.books[k]));
                }
                Applied::Data
            }
            bg::Message::Error { .. } => Applied::Counted(Count::VenueError),
            _ => Applied::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_from_documented_row() {
        let body = br#"{"code":"00000","msg":"success","requestTime":1,"data":[
          {"symbol":"BTCUSDT","baseCoin":"BTC","quoteCoin":"USDT","pricePrecision":"2","quantityPrecision":"6","status":"online","offTime":""},
          {"symbol":"OLDUSDT","baseCoin":"OLD","quoteCoin":"USDT","pricePrecision":"4","quantityPrecision":"2","status":"offline"},
          {"symbol":"BADUSDT","baseCoin":"BAD","quoteCoin":"USDT","pricePrecision":"x","quantityPrecision":"2","status":"online"}]}"#;
        let l = Bitget::parse_listing(body).expect("valid");
        assert_eq!(l.len(), 2);
        assert_eq!((l[0].instrument.tick.0, l[0].instrument.lot.0), (1_000_000, 100));
        assert_eq!(l[1].instrument.status, Status::Delisted);
        assert!(Bitget::parse_listing(br#"{"code":"40034","msg":"x"}"#).is_err());
    }

    #[test]
    fn candles_and_requests() {
        let body = br#"{"code":"00000","msg":"success","data":[["1786539600000","64118.21","64155.1","64118.2","64155.1","1.135141","72812.97","72812.97"]]}"#;
        assert_eq!(Bitget::parse_candles(body).expect("valid").len(), 1);
        let names: Vec<String> = (0..60).map(|i| format!("PAIR{i}USDT")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let r = requests("subscribe", &refs, true, true);
        assert!(r.len() > 1);
        let mut n = 0;
        for x in &r {
            assert!(x.len() <= SUBSCRIBE_BYTES_MAX);
            let v: serde_json::Value = serde_json::from_str(x).expect("json");
            n += v["args"].as_array().map_or(0, Vec::len);
        }
        assert_eq!(n, 120);
    }
}
