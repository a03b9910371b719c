//! Binance spot adapter facts: REST listing (`exchangeInfo`), klines, depth snapshots, and the
//! combined-stream WebSocket URL for depth diffs and trades (venues.md §1).
//!
//! Choices: streams go in the URL of a combined stream (`/stream?streams=a/b/...`), so a
//! connection needs no control message at all (Binance counts pongs and control messages
//! against 5 per second); `@depth@100ms` for diffs; the depth snapshot asks `limit=1000`
//! (weight 50), deep enough for walls and far cheaper than 5000 (weight 250). `BREAK` (no market
//! data is generated) is treated as delisted, `HALT`/`CANCEL_ONLY`/`END_OF_DAY` as halted.

use rampart_engine::candle::Timeframe;
use rampart_engine::feed::intervals::rest_name;
use rampart_engine::instrument::Status;
use rampart_engine::Venue;

use super::{candle, int, listed, text, CandlePage, Listed, RestApi, RestError};
use rampart_engine::book::Book;
use rampart_engine::feed::binance as bn;
use rampart_engine::BookId;

use super::protocol::{Applied, Ctx, Defaults, Keepalive, Protocol, SnapshotApplied};
use super::session::{Count, Sink, DECODE_LEVELS_MAX};

/// Levels per side asked of a REST depth snapshot.
pub const SNAPSHOT_LIMIT: usize = 1000;
/// Request weight of that snapshot (venues.md §1.2: 501–1000 → 50).
pub const SNAPSHOT_WEIGHT: f64 = 50.0;

/// Binance's REST API.
pub struct Binance;

impl RestApi for Binance {
    // `exchangeInfo` weighs 20.
    const LISTING_WEIGHT: f64 = 20.0;

    fn listing_url(base: &str) -> String {
        format!("{base}/api/v3/exchangeInfo?permissions=SPOT")
    }

    fn parse_listing(body: &[u8]) -> Result<Vec<Listed>, RestError> {
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| RestError::json("exchangeInfo", e))?;
        let symbols = v
            .get("symbols")
            .and_then(|s| s.as_array())
            .ok_or(RestError::shape("exchangeInfo", "no 'symbols' array"))?;
        let mut out = Vec::with_capacity(symbols.len());
        for s in symbols {
            let f = |k: &str| s.get(k).and_then(text).unwrap_or_default();
            let status = match f("status").as_str() {
                "TRADING" => Status::Trading,
                "BREAK" => Status::Delisted,
                _ => Status::Halted,
            };
            if s.get("isSpotTradingAllowed").and_then(|b| b.as_bool()) == Some(false) {
                continue;
            }
            let filter = |kind: &str, key: &str| {
                s.get("filters")
                    .and_then(|f| f.as_array())
                    .and_then(|fs| fs.iter().find(|x| x.get("filterType").and_then(|t| t.as_str()) == Some(kind)))
                    .and_then(|x| x.get(key))
                    .and_then(text)
                    .unwrap_or_default()
            };
            if let Some(l) = listed(
                Venue::Binance,
                &f("symbol"),
                &f("baseAsset"),
                &f("quoteAsset"),
                &filter("PRICE_FILTER", "tickSize"),
                &filter("LOT_SIZE", "stepSize"),
                status,
            ) {
                out.push(l);
            }
        }
        Ok(out)
    }

    const LATEST_PAGE_MAX: usize = 1000;
    const OLDER_PAGE_MAX: usize = 1000;
    const CANDLES_WEIGHT: f64 = 2.0;

    fn candles_url(base: &str, native: &str, tf: Timeframe, end_ms: Option<i64>, limit: usize) -> String {
        let mut u =
            format!("{base}/api/v3/klines?symbol={native}&interval={}&limit={limit}", rest_name(Venue::Binance, tf));
        if let Some(end) = end_ms {
            u.push_str(&format!("&endTime={}", end - 1));
        }
        u
    }

    fn parse_candles(body: &[u8]) -> Result<CandlePage, RestError> {
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| RestError::json("klines", e))?;
        let rows = v.as_array().ok_or(RestError::shape("klines", "not an array"))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let r = r
                .as_array()
                .filter(|r| r.len() >= 9)
                .ok_or(RestError::shape("klines", "a row is not an array of 9+"))?;
            let s = |i: usize| text(&r[i]).unwrap_or_default();
            let open = int(&r[0]).ok_or(RestError::shape("klines", "bad open time"))?;
            let bar = candle(open, [&s(1), &s(2), &s(3), &s(4)], &s(7), int(&r[8]).and_then(|n| u32::try_from(n).ok()));
            out.push(bar.ok_or(RestError::shape("klines", "bad price or volume"))?);
        }
        out.sort_by_key(|c| c.open_ms);
        Ok(out)
    }
}

/// `GET /api/v3/depth` for a symbol.
pub fn snapshot_url(base: &str, native: &str) -> String {
    format!("{base}/api/v3/depth?symbol={native}&limit={SNAPSHOT_LIMIT}")
}

/// The combined-stream URL for the depth diffs and trades of `natives`.
pub fn stream_url(ws_base: &str, natives: &[&str]) -> String {
    // Microsecond time fields: exact venue timestamps for latency measurement.
    let mut u = format!("{ws_base}/stream?timeUnit=MICROSECOND&streams=");
    for (i, n) in natives.iter().enumerate() {
        let n = n.to_lowercase();
        if i > 0 {
            u.push('/');
        }
        u.push_str(&format!("{n}@depth@100ms/{n}@trade"));
    }
    u
}

/// Diffs buffered per book while its snapshot is fetched.
pub const BUFFER_EVENTS_MAX: usize = 512;
/// Levels in those buffered diffs, per book.
pub const BUFFER_LEVELS_MAX: usize = 8_192;

impl Protocol for Binance {
    const VENUE: Venue = Venue::Binance;
    // 6000 weight/min; 300 connection attempts per 5 min; 1024 streams per connection.
    const DEFAULTS: Defaults = Defaults {
        rest: "https://api.binance.com",
        ws: "wss://stream.binance.com:9443",
        pairs_per_connection: 100,
        rest_weight_per_s: 50.0,
        connects_per_s: 0.5,
    };
    // The server pings every 20 s; a silent minute means the stream is dead.
    const IDLE_LIMIT_MS: i64 = 60_000;
    // Nothing is sent but the rare close: the streams are in the URL.
    const CONTROL_GAP_MS: i64 = 100;
    const SUBSCRIBE_OPS_PER_HOUR: Option<usize> = None;
    // The server pings; the client only answers.
    const KEEPALIVE: Option<Keepalive> = None;
    type Decoder = bn::BinanceDecoder;
    type Sync = bn::BinanceBookSync;

    fn decoder() -> bn::BinanceDecoder {
        bn::BinanceDecoder::new(bn::TimeUnit::Microsecond, DECODE_LEVELS_MAX)
    }

    fn book_sync(_verify_checksums: bool) -> bn::BinanceBookSync {
        bn::BinanceBookSync::new(BUFFER_EVENTS_MAX, BUFFER_LEVELS_MAX)
    }

    fn reset(sync: &mut bn::BinanceBookSync, book: &mut Book) {
        sync.reset(book);
    }

    fn is_live(sync: &bn::BinanceBookSync) -> bool {
        sync.is_live()
    }

    fn stream_url(ws_base: &str, natives: &[&str]) -> String {
        stream_url(ws_base, natives)
    }

    fn subscribe_all(_natives: &[&str], _req_id: &mut u64) -> Vec<String> {
        // Everything is in the URL.
        Vec::new()
    }

    fn resubscribe(_native: &str, _req_id: &mut u64) -> Option<[String; 2]> {
        // A broken book is rebuilt from a REST snapshot and the buffered diffs.
        None
    }

    fn handle(
        dec: &mut bn::BinanceDecoder,
        syncs: &mut [bn::BinanceBookSync],
        ctx: &mut Ctx<'_>,
        payload: &[u8],
    ) -> Applied {
        let Ok(frame) = dec.decode(payload) else { return Applied::Counted(Count::DecodeError) };
        match frame.message {
            bn::Message::Depth(diff) => {
                let Some(k) = ctx.slot(diff.symbol) else { return Applied::Nothing };
                let Some(book) = ctx.sink.book(ctx.books[k]) else { return Applied::Nothing };
                outcome(k, syncs[k].on_diff(&diff, book))
            }
            bn::Message::Trade(t) => {
                let Some(k) = ctx.slot(t.symbol) else { return Applied::Nothing };
                ctx.sink.trade(&t.tick(ctx.books[k]));
                ctx.sink.decided(t.event_us);
                Applied::Data
            }
            bn::Message::ServerShutdown { .. } => Applied::Notice,
            bn::Message::Error { .. } => Applied::Counted(Count::VenueError),
            _ => Applied::Nothing,
        }
    }

    fn apply_snapshot(
        dec: &mut bn::BinanceDecoder,
        sync: &mut bn::BinanceBookSync,
        body: &[u8],
        id: BookId,
        sink: &mut dyn Sink,
    ) -> SnapshotApplied {
        match dec.decode(body) {
            Ok(bn::Frame { message: bn::Message::Snapshot(snap), .. }) => {
                let Some(book) = sink.book(id) else { return SnapshotApplied::NoBook };
                match outcome(0, sync.on_snapshot(&snap, book)) {
                    Applied::Book { found, rebuild, .. } => SnapshotApplied::Applied { found, rebuild },
                    _ => SnapshotApplied::Applied { found: None, rebuild: false },
                }
            }
            _ => SnapshotApplied::Undecodable,
        }
    }
}

/// What a sync outcome of local book `k` means to the session.
fn outcome(k: usize, o: bn::SyncOutcome) -> Applied {
    let found = match o {
        bn::SyncOutcome::Gap { .. } => Some(Count::Gap),
        bn::SyncOutcome::Crossed => Some(Count::Crossed),
        bn::SyncOutcome::StaleSnapshot { .. } => Some(Count::StaleSnapshot),
        _ => None,
    };
    Applied::Book { k, found, rebuild: o.wants_snapshot() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_from_documented_fields() {
        let body = br#"{"timezone":"UTC","symbols":[
          {"symbol":"ETHBTC","status":"TRADING","baseAsset":"ETH","quoteAsset":"BTC","isSpotTradingAllowed":true,
           "filters":[{"filterType":"PRICE_FILTER","minPrice":"0.00000100","maxPrice":"100000.00000000","tickSize":"0.00000100"},
                      {"filterType":"LOT_SIZE","minQty":"0.00100000","maxQty":"100000.00000000","stepSize":"0.00100000"}]},
          {"symbol":"OLDUSDT","status":"BREAK","baseAsset":"OLD","quoteAsset":"USDT",
           "filters":[{"filterType":"PRICE_FILTER","tickSize":"0.01"},{"filterType":"LOT_SIZE","stepSize":"1"}]},
          {"symbol":"NOFILTER","status":"TRADING","baseAsset":"NO","quoteAsset":"FILTER","filters":[]}]}"#;
        let l = Binance::parse_listing(body).expect("valid");
        assert_eq!(l.len(), 2, "the one without filters is skipped");
        assert_eq!(l[0].instrument.symbol, "ETHBTC");
        assert_eq!(l[0].instrument.tick.0, 100);
        assert_eq!(l[0].instrument.lot.0, 100_000);
        assert_eq!(l[1].instrument.status, Status::Delisted);
        assert!(Binance::parse_listing(b"{}").is_err());
        assert!(Binance::parse_listing(b"[").is_err());
    }

    #[test]
    fn klines_rows_of_mixed_types() {
        let body = br#"[[1499040000000,"0.01634790","0.80000000","0.01575800","0.01577100","148976.11427815",1499644799999,"2434.19055334",308,"1756.87402397","28.46694368","0"]]"#;
        let c = Binance::parse_candles(body).expect("valid");
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].open_ms, c[0].high.0), (1_499_040_000_000, 80_000_000));
        // The quote volume (column 7) and the trade count (column 8) are kept.
        assert!((c[0].volume - 2434.19055334).abs() < 1e-9, "{}", c[0].volume);
        assert_eq!(c[0].trades, Some(308));
        assert!(Binance::parse_candles(br#"[[1,"a","b","c","d"]]"#).is_err());
        // A row without its volume, or with one that is not a non-negative number, is refused.
        assert!(Binance::parse_candles(br#"[[1,"1","2","0.5","1.5"]]"#).is_err());
        for bad in ["\"x\"", "\"-1\"", "\"NaN\"", "\"inf\"", "null"] {
            let body = format!(r#"[[1,"1","2","0.5","1.5","10",2,{bad},3]]"#);
            assert!(Binance::parse_candles(body.as_bytes()).is_err(), "{bad}");
        }
        // A trade count that is not a count leaves the count unknown, not the bar refused.
        let c = Binance::parse_candles(br#"[[1,"1","2","0.5","1.5","10",2,"15.5","x"]]"#).expect("valid");
        assert_eq!((c[0].volume, c[0].trades), (15.5, None));
        assert!(Binance::parse_candles(br#"{"code":-1121}"#).is_err());
        assert_eq!(
            Binance::candles_url("http://h", "BTCUSDT", Timeframe::H4, Some(1000), 500),
            "http://h/api/v3/klines?symbol=BTCUSDT&interval=4h&limit=500&endTime=999"
        );
    }

    #[test]
    fn stream_url_lowercases() {
        assert_eq!(
            stream_url("ws://h", &["BTCUSDT", "ETHBTC"]),
            "ws://h/stream?timeUnit=MICROSECOND&streams=btcusdt@depth@100ms/btcusdt@trade/ethbtc@depth@100ms/ethbtc@trade"
        );
    }
}
