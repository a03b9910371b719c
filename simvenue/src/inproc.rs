//! The simulator driven in process: the same market, venue handlers, REST routes and control API
//! as the socket simulator, stepped on the caller's thread under simulated time, without sockets
//! or a runtime. The seeded simulation test (`rampart-net`'s `shard::simulation`) runs every venue's
//! real wire format through it into the product's sessions.
//!
//! What it leaves out, because it lives in the socket layer (`ws`, `server`) and is tested there:
//! Binance ping frames and its incoming-message rate limit, OKX's idle close, request and body
//! size bounds, the connection bound. Everything the market does (sequence numbers, faults on a
//! schedule or on request, slow-consumer closes when a connection's queue is full, delistings,
//! venue outages) is the same code.
//!
//! Time: [`InProcess::advance_to`] sets the simulated time, which every handler called through
//! this driver reads instead of the wall clock (a per-thread setting, so drivers on other test
//! threads and socket simulators are not affected). Nothing here reads the wall clock: a run is
//! a function of its configuration, its seed and the calls made.

use std::collections::HashMap;
use std::sync::Arc;

use hyper::Method;
use rampart_engine::book::Level;
use rampart_engine::Venue;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Utf8Bytes;

use super::market::{ConnCtl, Endpoint, Kill};
use super::server::{answer, ws_endpoint, Answer};
use super::{binance, bitget, bybit, okx, Config, Faults, Shared, StartError, SIMULATED_MS};

/// A connection opened through [`InProcess::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId(u64);

/// What a connection yields to its client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// A text message.
    Text(String),
    /// The venue ended the connection: a close frame with this code and reason, or `None` for
    /// a dropped connection (no close frame). Nothing more comes from it.
    Closed(Option<(u16, String)>),
}

/// Why a connection could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// The path is not one of the venues' stream paths.
    NotAStreamPath(String),
    /// The venue is not served, or is down (`/sim/venue`).
    VenueUnavailable(Venue),
    /// A Binance stream list the venue refuses (the message says why).
    BadStreams(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NotAStreamPath(p) => write!(f, "{p} is not a stream path"),
            OpenError::VenueUnavailable(v) => write!(f, "{} is not served or is down", v.as_str()),
            OpenError::BadStreams(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for OpenError {}

struct Link {
    endpoint: Endpoint,
    rx: mpsc::Receiver<Utf8Bytes>,
    ctl: Arc<ConnCtl>,
}

/// The simulator on the caller's thread.
pub struct InProcess {
    shared: Arc<Shared>,
    links: HashMap<u64, Link>,
    now_ms: i64,
}

impl InProcess {
    /// The market of `config` (its seed, pairs, venues and scheduled faults) at `now_ms`.
    pub fn new(config: Config, now_ms: i64) -> Result<InProcess, StartError> {
        super::validate(&config)?;
        let shared = Arc::new(Shared::new(config, now_ms)?);
        Ok(InProcess { shared, links: HashMap::new(), now_ms })
    }

    /// The simulated time.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    fn enter(&self) {
        SIMULATED_MS.with(|c| c.set(Some(self.now_ms)));
    }

    /// Moves time to `now_ms` (never backwards) and runs one market round: the pairs that are
    /// due step, their messages are queued to subscribers, timers fire.
    pub fn advance_to(&mut self, now_ms: i64) {
        self.now_ms = self.now_ms.max(now_ms);
        self.enter();
        self.shared.lock().round(self.now_ms);
    }

    /// Replaces the scheduled faults (zero turns one off) from now on, and drops the faults
    /// asked for single books (`/sim/fault`) that have not happened yet.
    pub fn set_faults(&mut self, faults: Faults) {
        let mut st = self.shared.lock();
        st.cfg.faults = faults;
        for book in &mut st.books {
            book.pending = Default::default();
        }
    }

    /// Opens a WebSocket connection to `url` (`ws://host/path?query`; the host is ignored).
    pub fn open(&mut self, url: &str) -> Result<ConnId, OpenError> {
        self.enter();
        let (path, query) = split_url(url);
        let endpoint = ws_endpoint(path).ok_or_else(|| OpenError::NotAStreamPath(path.to_owned()))?;
        let venue = endpoint.venue();
        if !self.shared.venue_up(venue) {
            return Err(OpenError::VenueUnavailable(venue));
        }
        let streams = match endpoint {
            Endpoint::BinanceRaw | Endpoint::BinanceCombined => {
                binance::url_streams(path, query).map_err(OpenError::BadStreams)?
            }
            _ => Vec::new(),
        };
        let micros = venue == Venue::Binance
            && query.is_some_and(|q| q.split('&').any(|kv| kv.eq_ignore_ascii_case("timeUnit=MICROSECOND")));
        let (tx, rx) = mpsc::channel(self.shared.cfg.queue_messages_max);
        let ctl = Arc::new(ConnCtl::default());
        let id = {
            let mut st = self.shared.lock();
            let id = st.register(endpoint, tx, ctl.clone(), micros);
            if venue == Venue::Binance {
                binance::on_open(&mut st, id, &streams);
            }
            id
        };
        self.links.insert(id, Link { endpoint, rx, ctl });
        Ok(ConnId(id))
    }

    /// The client sends a text message on `conn`; the venue answers on the connection (or ends
    /// it). A message to a connection that is gone is lost, as on a socket.
    pub fn send(&mut self, conn: ConnId, text: &str) {
        self.enter();
        let Some(link) = self.links.get(&conn.0) else { return };
        if link.ctl.is_dead() {
            return;
        }
        let kill = match link.endpoint.venue() {
            Venue::Binance => binance::on_text(&self.shared, conn.0, text),
            Venue::Bybit => bybit::on_text(&self.shared, conn.0, text),
            Venue::Okx => okx::on_text(&self.shared, conn.0, link.endpoint, text),
            Venue::Bitget => bitget::on_text(&self.shared, conn.0, text),
        };
        if let Some(k) = kill {
            link.ctl.kill(k);
        }
    }

    /// The next thing `conn` yields, if any: queued messages in order, or its end. A connection
    /// the venue ended (slow consumer, disconnect fault, venue down) ends at once, as the socket
    /// simulator's writer does: messages still queued are lost. `None` for a connection that
    /// has nothing now or is unknown (ended and already reported).
    pub fn recv(&mut self, conn: ConnId) -> Option<Received> {
        let link = self.links.get_mut(&conn.0)?;
        if link.ctl.is_dead() {
            let kill = link.ctl.take();
            self.close(conn);
            return Some(Received::Closed(match kill {
                Some(Kill::Close(code, reason)) => Some((code, reason)),
                Some(Kill::Drop) | None => None,
            }));
        }
        link.rx.try_recv().ok().map(|t| Received::Text(t.as_str().to_owned()))
    }

    /// The client closes `conn` (or its network fails): the venue forgets it and every
    /// subscription it held.
    pub fn close(&mut self, conn: ConnId) {
        if self.links.remove(&conn.0).is_some() {
            self.shared.lock().unregister(conn.0);
        }
    }

    /// A REST or control request (`http://host/path?query`, the host ignored): `(status, body)`,
    /// or `None` when the route is set to hang (`/sim/rest`) and never answers.
    pub fn request(&mut self, method: &str, url: &str, body: &str) -> Option<(u16, String)> {
        self.enter();
        let (path, query) = split_url(url);
        let method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
        match answer(&self.shared, &method, path, query, body.as_bytes()) {
            Answer::Reply(r) | Answer::RetryAfter(r, _) => Some((r.status, r.body)),
            Answer::Hang => None,
        }
    }

    /// The venue's true book of `symbol` (`BASEQUOTE`), every level: (bids best first, asks
    /// best first).
    pub fn true_book(&self, venue: Venue, symbol: &str) -> Option<(Vec<Level>, Vec<Level>)> {
        let st = self.shared.lock();
        let b = st.find(venue, symbol)?;
        let book = &st.books[b].truth;
        Some((book.bids().to_vec(), book.asks().to_vec()))
    }

    /// Trades the venue has produced for `symbol` so far (its last trade id minus its first).
    pub fn trade_count(&self, venue: Venue, symbol: &str) -> Option<u64> {
        let st = self.shared.lock();
        let b = st.find(venue, symbol)?;
        Some(st.books[b].trades_made)
    }
}

/// `(path, query)` of a URL with or without scheme and host.
fn split_url(url: &str) -> (&str, Option<&str>) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path_and_query = match rest.find('/') {
        Some(i) if url.contains("://") => &rest[i..],
        Some(_) => rest,
        None => "/",
    };
    match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_path_and_query() {
        assert_eq!(split_url("ws://sim/stream?streams=a@trade"), ("/stream", Some("streams=a@trade")));
        assert_eq!(split_url("http://127.0.0.1:1/api/v3/depth"), ("/api/v3/depth", None));
        assert_eq!(split_url("/v5/public/spot"), ("/v5/public/spot", None));
        assert_eq!(split_url("ws://sim"), ("/", None));
    }
}
