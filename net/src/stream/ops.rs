//! A stream client's messages (`decisions.md` §12): one JSON text frame is one op, parsed here
//! into [`Op`] or refused with the [`OpError`] whose text the connection sends back. Untrusted
//! bytes: nothing here panics, every refusal names what was wrong (§3, §11: a fixed set is
//! answered with its `Allowed:` list), and sizes are bounded before anything is kept.

use rampart_engine::Venue;
use serde_json::{Map, Value};

use crate::request::{body_object, clip};

/// Longest frame a client may send, in bytes (a subscribe of [`CHANNELS_PER_OP_MAX`] channels
/// fits with room).
pub const FRAME_BYTES_MAX: usize = 64 * 1024;
/// Channels one op may name.
pub const CHANNELS_PER_OP_MAX: usize = 500;

/// The ops a client may send.
pub const OPS: [&str; 3] = ["subscribe", "unsubscribe", "ping"];
/// The fields an op may carry.
const FIELDS: [&str; 5] = ["op", "id", "channels", "since", "minUsd"];
/// The channels served, as a client spells them.
pub const CHANNEL_FORMS: &str = "price:<exchange>:<symbol>, levels:<exchange>:<symbol|*>, \
    walls:<exchange>:<symbol|*>, board:<exchange>, alerts, liquidations:<exchange>:<symbol|*>, perp:<exchange>:<symbol|*>";

/// A channel a client can subscribe to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// `price:<venue>:<symbol>`: the pair's last price (symbol in uppercase).
    Price {
        /// The venue.
        venue: Venue,
        /// The pair, uppercase.
        symbol: String,
    },
    /// `levels:<venue>:<symbol|*>`: the pair's levels (`None`: every pair of the venue).
    Levels {
        /// The venue.
        venue: Venue,
        /// The pair, uppercase; `None` for `*`.
        symbol: Option<String>,
    },
    /// `walls:<venue>:<symbol|*>`: the pair's walls (`None`: every pair of the venue).
    Walls {
        /// The venue.
        venue: Venue,
        /// The pair, uppercase; `None` for `*`.
        symbol: Option<String>,
    },
    /// `board:<venue>`: the venue's board numbers, every interval.
    Board {
        /// The venue.
        venue: Venue,
    },
    /// `alerts`: the key's account's firings and notices.
    Alerts,
    /// `liquidations:<venue>:<symbol|*>`: the pair's liquidations as they arrive (`None`: every
    /// pair of the venue), `decisions.md` §17.
    Liquidations {
        /// The venue.
        venue: Venue,
        /// The pair, uppercase; `None` for `*`.
        symbol: Option<String>,
    },
    /// `perp:<venue>:<symbol|*>`: the pair's perpetual (mark, OI, funding, the newest
    /// liquidation), at most once a second (`None`: every pair of the venue with one).
    Perp {
        /// The venue.
        venue: Venue,
        /// The pair, uppercase; `None` for `*`.
        symbol: Option<String>,
    },
}

impl Channel {
    /// The channel's name in messages (`price:binance:BTCUSDT`, `alerts`).
    pub fn name(&self) -> String {
        match self {
            Channel::Price { venue, symbol } => format!("price:{venue}:{symbol}"),
            Channel::Levels { venue, symbol } => format!("levels:{venue}:{}", symbol.as_deref().unwrap_or("*")),
            Channel::Walls { venue, symbol } => format!("walls:{venue}:{}", symbol.as_deref().unwrap_or("*")),
            Channel::Board { venue } => format!("board:{venue}"),
            Channel::Alerts => "alerts".to_owned(),
            Channel::Liquidations { venue, symbol } => {
                format!("liquidations:{venue}:{}", symbol.as_deref().unwrap_or("*"))
            }
            Channel::Perp { venue, symbol } => format!("perp:{venue}:{}", symbol.as_deref().unwrap_or("*")),
        }
    }

    /// Whether the subscription's `minUsd` applies to this channel (`walls`, `liquidations`).
    pub fn takes_min_usd(&self) -> bool {
        matches!(self, Channel::Walls { .. } | Channel::Liquidations { .. })
    }
}

/// One client message.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Start the channels (each answers its first message); `since` resumes `alerts` after an
    /// inbox id.
    Subscribe {
        /// The client's id, echoed in the answer.
        id: u64,
        /// The channels, in the order named, without repeats.
        channels: Vec<Channel>,
        /// `alerts` only: the inbox id after which entries are sent first.
        since: Option<i64>,
        /// `walls` only: walls worth less than this many USD are left out.
        min_usd: Option<f64>,
    },
    /// Stop the channels.
    Unsubscribe {
        /// The client's id, echoed in the answer.
        id: u64,
        /// The channels.
        channels: Vec<Channel>,
    },
    /// Answered with an ack, nothing else.
    Ping {
        /// The client's id, echoed in the answer.
        id: u64,
    },
}

/// A refused message: the id to answer (when the frame had a usable one) and the error text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpError {
    /// The frame's `id`, if it had a valid one.
    pub id: Option<u64>,
    /// The `error` text.
    pub message: String,
}

fn refuse(id: Option<u64>, message: impl Into<String>) -> OpError {
    OpError { id, message: message.into() }
}

/// Parses one text frame.
pub fn parse(frame: &[u8]) -> Result<Op, OpError> {
    if frame.len() > FRAME_BYTES_MAX {
        return Err(refuse(None, format!("message longer than {FRAME_BYTES_MAX} bytes")));
    }
    let obj = body_object(frame, &FIELDS).map_err(|e| refuse(None, e.message))?;
    let id = match obj.get("id") {
        Some(Value::Number(n)) => {
            n.as_u64().ok_or_else(|| refuse(None, "field 'id' must be a non-negative integer"))?
        }
        Some(_) => return Err(refuse(None, "field 'id' must be a non-negative integer")),
        None => return Err(refuse(None, "missing field 'id'")),
    };
    let op = match obj.get("op") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(refuse(Some(id), "field 'op' must be a string")),
        None => return Err(refuse(Some(id), "missing field 'op'")),
    };
    let only = |allowed: &[&str]| -> Result<(), OpError> {
        match FIELDS.iter().find(|f| !allowed.contains(f) && obj.contains_key(**f)) {
            Some(f) => Err(refuse(Some(id), format!("field '{f}' does not apply to op '{op}'"))),
            None => Ok(()),
        }
    };
    match op {
        "ping" => {
            only(&["op", "id"])?;
            Ok(Op::Ping { id })
        }
        "subscribe" => {
            let channels = channels(&obj, id)?;
            let since = since(&obj, id)?;
            if since.is_some() && !channels.contains(&Channel::Alerts) {
                return Err(refuse(Some(id), "field 'since' applies to the 'alerts' channel only"));
            }
            let min_usd = min_usd(&obj, id)?;
            if min_usd.is_some() && !channels.iter().any(Channel::takes_min_usd) {
                return Err(refuse(Some(id), "field 'minUsd' applies to 'walls' and 'liquidations' channels only"));
            }
            Ok(Op::Subscribe { id, channels, since, min_usd })
        }
        "unsubscribe" => {
            only(&["op", "id", "channels"])?;
            Ok(Op::Unsubscribe { id, channels: channels(&obj, id)? })
        }
        other => Err(refuse(Some(id), format!("unknown op '{}'. Allowed: {}", clip(other, 32), OPS.join(", ")))),
    }
}

/// The subscription of a server-sent-events request (`GET /v1/stream?channels=a,b&since=N&minUsd=X`,
/// channels fixed at connect): the same rules and errors as a `subscribe` op.
pub fn from_query(channels: &str, since: Option<&str>, min_usd: Option<&str>) -> Result<Op, OpError> {
    let mut obj = Map::new();
    obj.insert("op".into(), Value::from("subscribe"));
    obj.insert("id".into(), Value::from(0));
    let names: Vec<Value> = channels.split(',').map(|c| Value::from(c.trim())).collect();
    obj.insert("channels".into(), Value::Array(names));
    let (since, min_usd) = query_numbers(since, min_usd)?;
    if let Some(n) = since {
        obj.insert("since".into(), Value::from(n));
    }
    if let Some(x) = min_usd.and_then(serde_json::Number::from_f64) {
        obj.insert("minUsd".into(), Value::Number(x));
    }
    parse(Value::Object(obj).to_string().as_bytes())
}

/// The query's `since` (a non-negative inbox id) and `minUsd` (a positive number of USD), when
/// present; refused whichever form the request asks for.
pub fn query_numbers(since: Option<&str>, min_usd: Option<&str>) -> Result<(Option<i64>, Option<f64>), OpError> {
    let since = since
        .map(|t| t.trim().parse::<i64>().ok().filter(|n| *n >= 0))
        .map(|n| n.ok_or_else(|| refuse(None, "'since' must be a non-negative integer (an inbox id)")))
        .transpose()?;
    let min_usd = min_usd
        .map(|t| t.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0))
        .map(|x| x.ok_or_else(|| refuse(None, "'minUsd' must be a positive number of USD")))
        .transpose()?;
    Ok((since, min_usd))
}

/// `channels`: a non-empty array of channel names, at most [`CHANNELS_PER_OP_MAX`], repeats
/// dropped.
fn channels(obj: &Map<String, Value>, id: u64) -> Result<Vec<Channel>, OpError> {
    let list = match obj.get("channels") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err(refuse(Some(id), "field 'channels' must be an array of channel names")),
        None => return Err(refuse(Some(id), "missing field 'channels'")),
    };
    if list.is_empty() {
        return Err(refuse(Some(id), "field 'channels' must name at least one channel"));
    }
    if list.len() > CHANNELS_PER_OP_MAX {
        return Err(refuse(Some(id), format!("too many channels in one message (max {CHANNELS_PER_OP_MAX})")));
    }
    let mut out = Vec::with_capacity(list.len());
    for v in list {
        let Value::String(name) = v else {
            return Err(refuse(Some(id), "field 'channels' must be an array of channel names"));
        };
        let c = channel(name).map_err(|e| OpError { id: Some(id), ..e })?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// One channel name (the error's `id` is the caller's to set).
fn channel(name: &str) -> Result<Channel, OpError> {
    if name == "alerts" {
        return Ok(Channel::Alerts);
    }
    if let Some(venue) = name.strip_prefix("board:") {
        return venue_of(venue).map(|venue| Channel::Board { venue });
    }
    let mut parts = name.splitn(3, ':');
    let (kind, venue, symbol) = (parts.next().unwrap_or(""), parts.next(), parts.next());
    let unknown = || refuse(None, format!("unknown channel '{}'. Allowed: {CHANNEL_FORMS}", clip(name, 64)));
    if !matches!(kind, "price" | "levels" | "walls" | "liquidations" | "perp") {
        return Err(unknown());
    }
    let (Some(venue), Some(symbol)) = (venue, symbol) else { return Err(unknown()) };
    let venue = venue_of(venue)?;
    if symbol == "*" && kind != "price" {
        return Ok(pair_channel(kind, venue, None));
    }
    if symbol.is_empty() || symbol.len() > 64 || !symbol.bytes().all(|b| b.is_ascii_alphanumeric()) {
        let message = format!("channel '{}': the symbol must be a pair symbol such as BTCUSDT", clip(name, 64));
        return Err(refuse(None, message));
    }
    let symbol = symbol.to_ascii_uppercase();
    Ok(match kind {
        "price" => Channel::Price { venue, symbol },
        _ => pair_channel(kind, venue, Some(symbol)),
    })
}

/// The channel of `kind` (one that takes `*`) on `venue`'s `symbol` (`None`: `*`).
fn pair_channel(kind: &str, venue: Venue, symbol: Option<String>) -> Channel {
    match kind {
        "levels" => Channel::Levels { venue, symbol },
        "walls" => Channel::Walls { venue, symbol },
        "liquidations" => Channel::Liquidations { venue, symbol },
        _ => Channel::Perp { venue, symbol },
    }
}

/// An exchange as a channel names it.
fn venue_of(name: &str) -> Result<Venue, OpError> {
    Venue::parse(name).ok_or_else(|| {
        let all: Vec<&str> = Venue::ALL.iter().map(|v| v.as_str()).collect();
        refuse(None, format!("invalid exchange '{}'. Allowed: {}", clip(name, 32), all.join(", ")))
    })
}

/// `minUsd`: a positive number of USD, if present.
fn min_usd(obj: &Map<String, Value>, id: u64) -> Result<Option<f64>, OpError> {
    match obj.get("minUsd") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .map(Some)
            .ok_or_else(|| refuse(Some(id), "field 'minUsd' must be a positive number of USD")),
        Some(_) => Err(refuse(Some(id), "field 'minUsd' must be a positive number of USD")),
    }
}

/// `since`: a non-negative inbox id, if present.
fn since(obj: &Map<String, Value>, id: u64) -> Result<Option<i64>, OpError> {
    match obj.get("since") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .filter(|s| *s >= 0)
            .map(Some)
            .ok_or_else(|| refuse(Some(id), "field 'since' must be a non-negative integer (an inbox id)")),
        Some(_) => Err(refuse(Some(id), "field 'since' must be a non-negative integer (an inbox id)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(frame: &str) -> OpError {
        match parse(frame.as_bytes()) {
            Err(e) => e,
            Ok(op) => panic!("{frame} was taken as {op:?}"),
        }
    }

    #[test]
    fn the_derivatives_channels_parse_with_min_usd_on_liquidations() {
        let sub =
            parse(br#"{"op":"subscribe","id":4,"channels":["liquidations:bybit:ethusdt","perp:okx:*"],"minUsd":1e6}"#);
        let liq = Channel::Liquidations { venue: Venue::Bybit, symbol: Some("ETHUSDT".into()) };
        let perp = Channel::Perp { venue: Venue::Okx, symbol: None };
        assert_eq!(
            sub,
            Ok(Op::Subscribe { id: 4, channels: vec![liq.clone(), perp.clone()], since: None, min_usd: Some(1e6) })
        );
        assert_eq!((liq.name(), perp.name()), ("liquidations:bybit:ETHUSDT".to_owned(), "perp:okx:*".to_owned()));
        assert!(liq.takes_min_usd() && !perp.takes_min_usd());
        let e = err(r#"{"op":"subscribe","id":5,"channels":["perp:okx:*"],"minUsd":5}"#);
        assert_eq!(e, refuse(Some(5), "field 'minUsd' applies to 'walls' and 'liquidations' channels only"));
        let e = err(r#"{"op":"subscribe","id":6,"channels":["liquidations:okx:btc-usdt"]}"#);
        assert_eq!(e.message, "channel 'liquidations:okx:btc-usdt': the symbol must be a pair symbol such as BTCUSDT");
        assert_eq!(
            err(r#"{"op":"subscribe","id":7,"channels":["perp:okx"]}"#).message.split('.').next(),
            Some("unknown channel 'perp:okx'")
        );
    }

    #[test]
    fn the_three_ops_parse() {
        let sub =
            parse(br#"{"op":"subscribe","id":1,"channels":["price:BINANCE:btcusdt","alerts","alerts"],"since":7}"#);
        let price = Channel::Price { venue: Venue::Binance, symbol: "BTCUSDT".into() };
        assert_eq!(
            sub,
            Ok(Op::Subscribe { id: 1, channels: vec![price.clone(), Channel::Alerts], since: Some(7), min_usd: None })
        );
        let walls =
            parse(br#"{"op":"subscribe","id":2,"channels":["walls:okx:*","levels:bybit:ethusdt"],"minUsd":50000}"#);
        let (all_okx, eth) = (
            Channel::Walls { venue: Venue::Okx, symbol: None },
            Channel::Levels { venue: Venue::Bybit, symbol: Some("ETHUSDT".into()) },
        );
        assert_eq!(
            walls,
            Ok(Op::Subscribe {
                id: 2,
                channels: vec![all_okx.clone(), eth.clone()],
                since: None,
                min_usd: Some(50_000.0)
            })
        );
        assert_eq!((all_okx.name(), eth.name()), ("walls:okx:*".to_owned(), "levels:bybit:ETHUSDT".to_owned()));
        let board = parse(br#"{"op":"unsubscribe","id":3,"channels":["board:OKX"]}"#);
        assert_eq!(board, Ok(Op::Unsubscribe { id: 3, channels: vec![Channel::Board { venue: Venue::Okx }] }));
        assert_eq!(price.name(), "price:binance:BTCUSDT");
        let unsub = parse(br#"{"op":"unsubscribe","id":2,"channels":["alerts"]}"#);
        assert_eq!(unsub, Ok(Op::Unsubscribe { id: 2, channels: vec![Channel::Alerts] }));
        assert_eq!(parse(br#"{"op":"ping","id":0}"#), Ok(Op::Ping { id: 0 }));
    }

    /// Every malformed frame gets its own error, with the id when the frame had one.
    #[test]
    fn malformed_frames_are_refused_with_what_was_wrong() {
        let cases: &[(&str, Option<u64>, &str)] = &[
            ("", None, "malformed JSON"),
            ("{", None, "malformed JSON"),
            ("[1]", None, "request body must be a JSON object"),
            ("\"ping\"", None, "request body must be a JSON object"),
            (r#"{"op":"ping"}"#, None, "missing field 'id'"),
            (r#"{"op":"ping","id":-1}"#, None, "field 'id' must be a non-negative integer"),
            (r#"{"op":"ping","id":1.5}"#, None, "field 'id' must be a non-negative integer"),
            (r#"{"op":"ping","id":"1"}"#, None, "field 'id' must be a non-negative integer"),
            (r#"{"id":3}"#, Some(3), "missing field 'op'"),
            (r#"{"op":5,"id":3}"#, Some(3), "field 'op' must be a string"),
            (r#"{"op":"PING","id":3}"#, Some(3), "unknown op 'PING'. Allowed: subscribe, unsubscribe, ping"),
            (r#"{"op":"ping","id":3,"extra":1}"#, None, "unknown field 'extra'. Allowed: op, id, channels, since, minUsd"),
            (r#"{"op":"ping","id":3,"channels":["alerts"]}"#, Some(3), "field 'channels' does not apply to op 'ping'"),
            (r#"{"op":"subscribe","id":3}"#, Some(3), "missing field 'channels'"),
            (r#"{"op":"subscribe","id":3,"channels":"alerts"}"#, Some(3), "field 'channels' must be an array"),
            (r#"{"op":"subscribe","id":3,"channels":[]}"#, Some(3), "must name at least one channel"),
            (r#"{"op":"subscribe","id":3,"channels":[1]}"#, Some(3), "field 'channels' must be an array"),
            (r#"{"op":"subscribe","id":3,"channels":["news"]}"#, Some(3), "unknown channel 'news'. Allowed: price:<exchange>:<symbol>, levels:<exchange>:<symbol|*>, walls:<exchange>:<symbol|*>, board:<exchange>, alerts, liquidations:<exchange>:<symbol|*>, perp:<exchange>:<symbol|*>"),
            (r#"{"op":"subscribe","id":3,"channels":["price:binance"]}"#, Some(3), "unknown channel 'price:binance'"),
            (r#"{"op":"subscribe","id":3,"channels":["price:kraken:BTCUSD"]}"#, Some(3), "invalid exchange 'kraken'. Allowed: binance, bybit, okx, bitget"),
            (r#"{"op":"subscribe","id":3,"channels":["price:okx:BTC-USDT"]}"#, Some(3), "the symbol must be a pair symbol"),
            (r#"{"op":"subscribe","id":3,"channels":["price:okx:"]}"#, Some(3), "the symbol must be a pair symbol"),
            (r#"{"op":"subscribe","id":3,"channels":["price:binance:BTCUSDT"],"since":1}"#, Some(3), "field 'since' applies to the 'alerts' channel only"),
            (r#"{"op":"subscribe","id":3,"channels":["alerts"],"since":-2}"#, Some(3), "field 'since' must be a non-negative integer"),
            (r#"{"op":"subscribe","id":3,"channels":["alerts"],"since":"x"}"#, Some(3), "field 'since' must be a non-negative integer"),
            (r#"{"op":"subscribe","id":3,"channels":["alerts"],"minUsd":5}"#, Some(3), "field 'minUsd' applies to 'walls' and 'liquidations' channels only"),
            (r#"{"op":"subscribe","id":3,"channels":["walls:okx:*"],"minUsd":0}"#, Some(3), "field 'minUsd' must be a positive number"),
            (r#"{"op":"subscribe","id":3,"channels":["walls:okx:*"],"minUsd":"5"}"#, Some(3), "field 'minUsd' must be a positive number"),
            (r#"{"op":"subscribe","id":3,"channels":["price:okx:*"]}"#, Some(3), "the symbol must be a pair symbol"),
            (r#"{"op":"subscribe","id":3,"channels":["board:kraken"]}"#, Some(3), "invalid exchange 'kraken'"),
            (r#"{"op":"subscribe","id":3,"channels":["boards:okx"]}"#, Some(3), "unknown channel 'boards:okx'"),
            (r#"{"op":"unsubscribe","id":3,"channels":["walls:okx:*"],"minUsd":1}"#, Some(3), "field 'minUsd' does not apply to op 'unsubscribe'"),
            (r#"{"op":"unsubscribe","id":3,"channels":["alerts"],"since":1}"#, Some(3), "field 'since' does not apply to op 'unsubscribe'"),
        ];
        for (frame, id, text) in cases {
            let e = err(frame);
            assert_eq!(e.id, *id, "{frame}: {e:?}");
            assert!(e.message.contains(text), "{frame}: {:?} lacks {text:?}", e.message);
        }
    }

    #[test]
    fn a_query_subscribes_by_the_same_rules() {
        let alerts = from_query("alerts,price:okx:btcusdt", Some("12"), None);
        let price = Channel::Price { venue: Venue::Okx, symbol: "BTCUSDT".into() };
        assert_eq!(
            alerts,
            Ok(Op::Subscribe { id: 0, channels: vec![Channel::Alerts, price], since: Some(12), min_usd: None })
        );
        let walls = from_query("walls:binance:*", None, Some("250000"));
        assert!(matches!(walls, Ok(Op::Subscribe { min_usd: Some(m), .. }) if m == 250_000.0), "{walls:?}");
        for (channels, since, min_usd, text) in [
            ("", None, None, "unknown channel ''"),
            ("alerts", Some("x"), None, "'since' must be a non-negative integer"),
            ("alerts", Some("-1"), None, "'since' must be a non-negative integer"),
            ("walls:okx:*", None, Some("NaN"), "'minUsd' must be a positive number"),
            ("walls:okx:*", None, Some("-5"), "'minUsd' must be a positive number"),
            ("price:okx:BTCUSDT", Some("1"), None, "field 'since' applies to the 'alerts' channel only"),
        ] {
            let e = from_query(channels, since, min_usd).expect_err(channels);
            assert!(e.message.contains(text), "{channels}: {e:?}");
        }
    }

    #[test]
    fn sizes_are_bounded_before_parsing() {
        let long = format!(r#"{{"op":"ping","id":1,"pad":"{}"}}"#, "x".repeat(FRAME_BYTES_MAX));
        assert!(err(&long).message.starts_with("message longer than"));
        let names: Vec<String> = (0..=CHANNELS_PER_OP_MAX).map(|i| format!("\"price:okx:P{i}\"")).collect();
        let many = format!(r#"{{"op":"subscribe","id":9,"channels":[{}]}}"#, names.join(","));
        assert!(err(&many).message.starts_with("too many channels"), "{:?}", err(&many));
    }

    /// Bytes that are not UTF-8, deep nesting and huge numbers are refused, never a panic.
    #[test]
    fn hostile_bytes_are_refused() {
        for frame in
            [&b"\xff\xfe"[..], b"{\"op\":\"ping\",\"id\":1e999}", &[b'['; 4096][..], b"{\"id\":18446744073709551616}"]
        {
            assert!(parse(frame).is_err());
        }
    }
}
