//! Live venues: per-venue REST (instrument listing, candle backfill, depth snapshots) and
//! WebSocket (books, trades) adapters, the WebSocket codec and connection, and the venue
//! settings from configuration.
//!
//! The venue facts (paths, field names, limits, keepalives) follow `venues.md`; each venue module
//! says where it had to choose. The book sync state machines themselves are sans-I/O and live in
//! `rampart_engine::feed`; this module feeds them bytes and carries out what they ask for
//! (snapshot fetches, resubscriptions, reconnects).

pub mod binance;
pub mod bitget;
pub mod bybit;
pub mod conn;
pub mod listing;
pub mod okx;
pub mod pacer;
pub mod perp_funding;
pub mod perp_listing;
pub mod perp_oi;
pub mod perp_refresh;
pub mod perp_session;
pub mod protocol;
pub mod rest;
pub mod session;
pub mod watch;
pub mod ws;

use rampart_engine::candle::{Candle, Timeframe};
use rampart_engine::fixed::{Price, Qty};
use rampart_engine::instrument::{Instrument, Status};
use rampart_engine::Venue;

/// Evaluates `$body` with the type `$P` that speaks `$venue` (its [`protocol::Protocol`] and
/// [`RestApi`]): the one list in `net` of which type is which venue. Adding a venue adds its
/// module and one line here.
#[macro_export]
macro_rules! with_protocol {
    ($venue:expr, $P:ident => $body:expr) => {
        match $venue {
            rampart_engine::Venue::Binance => {
                type $P = $crate::binance::Binance;
                $body
            }
            rampart_engine::Venue::Bybit => {
                type $P = $crate::bybit::Bybit;
                $body
            }
            rampart_engine::Venue::Okx => {
                type $P = $crate::okx::Okx;
                $body
            }
            rampart_engine::Venue::Bitget => {
                type $P = $crate::bitget::Bitget;
                $body
            }
        }
    };
}

/// How to reach and pace one venue (defaults from `venues.md`, overridable in the TOML file).
#[derive(Clone, Debug, PartialEq)]
pub struct VenueSettings {
    /// The venue.
    pub venue: Venue,
    /// REST base URL (`https://api.binance.com`, or `http://127.0.0.1:9100` for the simulator).
    pub rest: String,
    /// WebSocket base URL (`wss://stream.binance.com:9443`, or `ws://127.0.0.1:9100`).
    pub ws: String,
    /// Pairs per WebSocket connection (each pair is two channels: book and trades).
    pub pairs_per_connection: usize,
    /// REST budget: request weight per second (Binance) or requests per second (others).
    pub rest_weight_per_s: f64,
    /// Connection attempts per second, for the whole process (all shards).
    pub connects_per_s: f64,
    /// Listing refresh period, seconds.
    pub refresh_s: u64,
    /// Longest pause a rate-limit answer's `Retry-After` imposes on the venue's REST, seconds
    /// (a longer one is cut to this; the next request then probes, and a venue still limiting
    /// answers 429/418 again).
    pub retry_after_max_s: u64,
    /// REST base URL of the venue's USDT perpetuals (decisions §17: Binance
    /// `https://fapi.binance.com`, Bybit `https://api.bybit.com`, OKX and Bitget their spot one).
    pub perp_rest: String,
    /// WebSocket base URL of the perpetuals (Binance `wss://fstream.binance.com/market`, Bybit
    /// `wss://stream.bybit.com/v5/public/linear`, OKX and Bitget their spot one).
    pub perp_ws: String,
}

impl VenueSettings {
    /// The real venue's endpoints and limits.
    pub fn default_for(venue: Venue) -> VenueSettings {
        // Budgets are about half of each venue's published per-IP limit (venues.md §1.6, §2.6,
        // §3.7, §4.6), leaving room for other clients on the same address.
        let d = with_protocol!(venue, P => <P as protocol::Protocol>::DEFAULTS);
        let (rest, ws, pairs, weight, connects) =
            (d.rest, d.ws, d.pairs_per_connection, d.rest_weight_per_s, d.connects_per_s);
        VenueSettings {
            venue,
            rest: rest.to_owned(),
            ws: ws.to_owned(),
            pairs_per_connection: pairs,
            rest_weight_per_s: weight,
            connects_per_s: connects,
            refresh_s: 300,
            retry_after_max_s: 300,
            perp_rest: perp_default(venue, rest, 0),
            perp_ws: perp_default(venue, ws, 1),
        }
    }
}

/// The perpetuals' WebSocket base beside a spot one `ws` on the same host (a simulator, a
/// proxy): Binance `{ws}/market`, Bybit `{ws}/v5/public/linear`, OKX and Bitget `ws` itself.
pub fn perp_beside(venue: Venue, ws: &str) -> String {
    match venue {
        Venue::Binance => format!("{ws}/market"),
        Venue::Bybit => format!("{ws}/v5/public/linear"),
        Venue::Okx | Venue::Bitget => ws.to_owned(),
    }
}

/// The perpetuals' default base URL (`which` 0: REST, 1: WebSocket) of `venue`, whose spot one
/// is `spot` (decisions §17 "Bounds, configuration, cluster").
pub fn perp_default(venue: Venue, spot: &str, which: usize) -> String {
    match venue {
        Venue::Binance => ["https://fapi.binance.com", "wss://fstream.binance.com/market"][which].to_owned(),
        Venue::Bybit => ["https://api.bybit.com", "wss://stream.bybit.com/v5/public/linear"][which].to_owned(),
        Venue::Okx | Venue::Bitget => spot.to_owned(),
    }
}

/// One instrument as a venue lists it.
#[derive(Clone, Debug)]
pub struct Listed {
    /// The normalised instrument (`BASEQUOTE` from base and quote, uppercase).
    pub instrument: Instrument,
    /// The venue's own name for it (`BTC-USDT` on OKX), used in requests and subscriptions.
    pub native: String,
}

/// Builds a listed instrument from the venue's fields; `None` when a field is unusable (the
/// instrument is skipped and counted by the caller).
pub(crate) fn listed(
    venue: Venue,
    native: &str,
    base: &str,
    quote: &str,
    tick: &str,
    lot: &str,
    status: Status,
) -> Option<Listed> {
    let (base, quote) = (base.trim().to_uppercase(), quote.trim().to_uppercase());
    if base.is_empty() || quote.is_empty() || native.is_empty() {
        return None;
    }
    let tick = Price::parse(tick.as_bytes()).ok().filter(|p| p.0 > 0)?;
    let lot = Qty::parse(lot.as_bytes()).ok().filter(|q| q.0 > 0)?;
    Some(Listed {
        instrument: Instrument { venue, symbol: format!("{base}{quote}"), base, quote, tick, lot, status },
        native: native.to_owned(),
    })
}

/// `10^-decimals` as decimal text (`2` → `"0.01"`), for venues that give precisions.
pub(crate) fn step_from_precision(decimals: &str) -> Option<String> {
    let d: u32 = decimals.trim().parse().ok()?;
    if d > 8 {
        return None;
    }
    Some(if d == 0 { "1".to_owned() } else { format!("0.{}1", "0".repeat(d as usize - 1)) })
}

/// Drops instruments whose `BASEQUOTE` collides with an earlier one of the same venue
/// (`AB`+`CUSDT` vs `ABC`+`USDT`, venues.md §5) and returns how many were dropped.
pub fn drop_collisions(list: &mut Vec<Listed>) -> usize {
    let before = list.len();
    let mut seen = std::collections::HashSet::new();
    list.retain(|l| seen.insert(l.instrument.symbol.clone()));
    before - list.len()
}

/// One candle row as a venue sends it, parsed: prices, the quote volume, and the trade count
/// where the venue gives one. `None` when a price or the volume is not a number.
pub(crate) fn candle(open_ms: i64, [o, h, l, c]: [&str; 4], volume: &str, trades: Option<u32>) -> Option<Candle> {
    let p = |s: &str| Price::parse(s.as_bytes()).ok();
    let volume = volume.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)?;
    Some(Candle { volume, trades, ..Candle::prices(open_ms, p(o)?, p(h)?, p(l)?, p(c)?) })
}

/// A JSON value as text, whether the venue sent a string or a number.
pub(crate) fn text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A JSON value as an integer, whether sent as a string or a number.
pub(crate) fn int(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::String(s) => s.parse().ok(),
        serde_json::Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// Why a venue REST request or its answer could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestError {
    /// The body is not JSON: what was being read, and the parser's message.
    Json {
        /// The answer being read (`klines`, `instruments`...).
        what: &'static str,
        /// The JSON parser's message.
        detail: String,
    },
    /// JSON, but not the documented shape.
    Shape {
        /// The answer being read.
        what: &'static str,
        /// What is missing or wrong.
        detail: &'static str,
    },
    /// The venue's own error envelope.
    Venue {
        /// The answer being read.
        what: &'static str,
        /// The venue's error code.
        code: String,
        /// The venue's message.
        message: String,
    },
    /// An HTTP status other than 200 (the start of its body).
    Status {
        /// The status.
        status: u16,
        /// Up to 200 bytes of the body.
        snippet: String,
    },
    /// The request itself failed: URL, resolve, connect, TLS, HTTP framing, body, time.
    Transport(String),
    /// A whole job (every page and retry of a book's history) ran out of its time.
    TimedOut {
        /// The job.
        what: &'static str,
        /// Its time, seconds.
        secs: u64,
    },
    /// The job's task ended without an answer (it panicked).
    Unanswered,
    /// The book's venue has no settings (not configured).
    NotConfigured,
}

impl RestError {
    /// A body that is not JSON.
    pub fn json(what: &'static str, e: impl std::fmt::Display) -> RestError {
        RestError::Json { what, detail: e.to_string() }
    }

    /// JSON of the wrong shape.
    pub fn shape(what: &'static str, detail: &'static str) -> RestError {
        RestError::Shape { what, detail }
    }
}

impl std::fmt::Display for RestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestError::Json { what, detail } => write!(f, "{what}: not JSON: {detail}"),
            RestError::Shape { what, detail } => write!(f, "{what}: {detail}"),
            RestError::Venue { what, code, message } => write!(f, "{what}: venue error {code} {message}"),
            RestError::Status { status, snippet } => write!(f, "HTTP {status}: {snippet}"),
            RestError::Transport(t) => f.write_str(t),
            RestError::TimedOut { what, secs } => write!(f, "{what} not fetched within {secs} s"),
            RestError::Unanswered => f.write_str("the request task ended without an answer"),
            RestError::NotConfigured => f.write_str("venue not configured"),
        }
    }
}

impl std::error::Error for RestError {}

/// A page of candles as returned by one request, oldest first.
pub type CandlePage = Vec<Candle>;

/// The REST side of a venue: URLs and parsers (pure functions; `rest` does the I/O).
pub trait RestApi {
    /// The instrument listing URL.
    fn listing_url(base: &str) -> String;
    /// Parses the listing; instruments with unusable fields are skipped.
    fn parse_listing(body: &[u8]) -> Result<Vec<Listed>, RestError>;
    /// Candles of `tf` ending before `end_ms` (exclusive; `None` = the latest), at most `limit`.
    fn candles_url(base: &str, native: &str, tf: Timeframe, end_ms: Option<i64>, limit: usize) -> String;
    /// The largest page of the latest candles (`end_ms` = `None`).
    const LATEST_PAGE_MAX: usize;
    /// The largest page of older candles.
    const OLDER_PAGE_MAX: usize;
    /// Parses a candle page, oldest first.
    fn parse_candles(body: &[u8]) -> Result<CandlePage, RestError>;
    /// Request weight of one candle page.
    const CANDLES_WEIGHT: f64 = 1.0;
    /// Request weight of the listing.
    const LISTING_WEIGHT: f64 = 1.0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_to_step() {
        assert_eq!(step_from_precision("2").as_deref(), Some("0.01"));
        assert_eq!(step_from_precision("0").as_deref(), Some("1"));
        assert_eq!(step_from_precision("8").as_deref(), Some("0.00000001"));
        assert_eq!(step_from_precision("9"), None);
        assert_eq!(step_from_precision("x"), None);
    }

    #[test]
    fn collisions_keep_the_first() {
        let mk = |b: &str, q: &str| listed(Venue::Binance, &format!("{b}{q}"), b, q, "0.1", "1", Status::Trading);
        let mut v: Vec<Listed> =
            [mk("AB", "CUSDT"), mk("ABC", "USDT"), mk("BTC", "USDT")].into_iter().flatten().collect();
        assert_eq!(drop_collisions(&mut v), 1);
        assert_eq!(v.iter().map(|l| l.instrument.base.as_str()).collect::<Vec<_>>(), ["AB", "BTC"]);
    }

    #[test]
    fn listed_refuses_unusable_fields() {
        assert!(listed(Venue::Okx, "BTC-USDT", "btc", "usdt", "0.1", "0.0001", Status::Trading)
            .is_some_and(|l| l.instrument.symbol == "BTCUSDT"));
        assert!(listed(Venue::Okx, "X", "", "USDT", "0.1", "1", Status::Trading).is_none());
        assert!(listed(Venue::Okx, "X", "A", "USDT", "0", "1", Status::Trading).is_none());
        assert!(listed(Venue::Okx, "X", "A", "USDT", "0.1", "abc", Status::Trading).is_none());
    }
}
