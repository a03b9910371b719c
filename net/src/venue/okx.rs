//! OKX v5 adapter facts: REST instruments and candles (`1Dutc`/`1Wutc` for UTC days and weeks),
//! and the `/ws/v5/public` `books` and `trades` channels (venues.md §3).
//!
//! Choices: at most 14 pairs (28 channels) per connection, under OKX's advice of fewer than 30
//! `books` channels each; the text `ping` after 20 s without a message (the server closes at
//! 30 s). Candles come from `market/candles` (the latest 1,440 rows, enough for 500 bars) and,
//! when a page comes back short, from `market/history-candles`.

use rampart_engine::candle::Timeframe;
use rampart_engine::instrument::Status;
use rampart_engine::Venue;

use super::{candle, int, listed, text, CandlePage, Listed, RestApi, RestError};

/// OKX's REST API.
pub struct Okx;

/// `bar` names (UTC-aligned days and weeks).
pub fn bar(tf: Timeframe) -> &'static str {
    match tf {
        Timeframe::M5 => "5m",
        Timeframe::M15 => "15m",
        Timeframe::H1 => "1H",
        Timeframe::H4 => "4H",
        Timeframe::D1 => "1Dutc",
        Timeframe::W1 => "1Wutc",
    }
}

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
            None => format!("{base}/api/v5/market/candles?instId={native}&bar={}&limit={limit}", bar(tf)),
            Some(end) => format!(
                "{base}/api/v5/market/history-candles?instId={native}&bar={}&after={end}&limit={limit}",
                bar(tf)
            ),
        }
    }

    fn parse_candles(body: &[u8]) -> Result<CandlePage, RestError> {
        let rows = data(body, "candles")?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let row = row
                .as_array()
                .filter(|r| r.len() >= 5)
                .ok_or(RestError::shape("candles", "a row is not an array of 5+"))?;
            let s = |i: usize| text(&row[i]).unwrap_or_default();
            let open = int(&row[0]).ok_or(RestError::shape("candles", "bad ts"))?;
            out.push(candle(open, &s(1), &s(2), &s(3), &s(4)).ok_or(RestError::shape("candles", "bad price"))?);
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
