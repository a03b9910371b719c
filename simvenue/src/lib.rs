//! `rampart sim-venue`: a local venue simulator speaking the real REST and WebSocket protocols of
//! Binance spot, Bybit v5 spot, OKX v5 and Bitget v2 spot (venues.md §1–§4) on one loopback
//! listener, over the same simulated market as `--feed sim`.
//!
//! It exists so that feed adapters, their sync machines and the latency benchmark can be tested
//! end to end against real sockets without the network, and so that every failure venues.md §6
//! lists (gaps, stale snapshots, wrong checksums, resets, crossed books, disconnects, notices,
//! delistings, slow-consumer closes, idle closes) can be caused on demand: at start-up with the
//! fault flags of [`Faults`], or at any moment through the control API under `/sim/`.
//!
//! Layout: `market` holds the state (books, sequences, candles, subscriptions) behind one lock
//! and steps the simulation; `binance`, `bybit`, `okx` and `bitget` encode each venue's messages
//! and answer its REST and WebSocket requests; `server` is the hyper listener, routing and the
//! WebSocket upgrade; `ws` runs one WebSocket connection; `control` is the `/sim/` API;
//! `inproc` drives the same market, handlers and control API on the caller's thread under
//! simulated time, without sockets (the seeded simulation test).
//!
//! Choices where venues.md leaves room, and why:
//! - Numbers are strings with the pair's tick decimals (prices) and lot decimals (sizes, volumes),
//!   zero-padded, on every venue, so a level always has the same text (checksums).
//! - Volumes in candles are synthetic (deterministic per bar): the simulated market has prices and
//!   books, not volumes.
//! - Bybit `GET /v5/market/kline` without `category` answers `retCode 0` with
//!   `"category":"linear"` and an empty list: the real venue silently serves linear futures then
//!   (venues.md §6 item 13); an empty list makes the mistake visible without inventing futures.
//! - `disconnect` (and `--fault-disconnect-every-s`) drops the TCP connection without a close
//!   frame, like a network failure; venue-down does the same.
//! - One message per trade on every venue (the venues batch several fills at times).

mod binance;
mod bitget;
mod bybit;
mod control;
mod control_reply;
mod drive;
mod envelope;
pub mod inproc;
mod market;
mod okx;
mod perp;
mod perp_binance;
mod perp_bitget;
mod perp_bybit;
mod perp_control;
mod perp_drive;
mod perp_okx;
mod server;
mod text;
mod ws;

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use rampart_engine::Venue;
use tokio::sync::oneshot;

use market::{State, Stats};

/// Faults injected on a schedule, on every venue where the fault applies. Zero turns one off.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// One book message in every `gap_every` per venue skips an update id (Binance `U`, Bybit
    /// `u`) or breaks the chain (OKX `prevSeqId`, Bitget `pseq`).
    pub gap_every: u64,
    /// One OKX or Bitget book update in every `checksum_every` per venue carries a wrong
    /// checksum.
    pub checksum_every: u64,
    /// One Binance REST depth answer in every `stale_snapshot_every` carries an old
    /// `lastUpdateId` (older than every diff sent since start).
    pub stale_snapshot_every: u64,
    /// Every WebSocket connection is dropped every `disconnect_every_s` seconds.
    pub disconnect_every_s: u64,
}

/// A scheduled delisting: `[venue:]SYMBOL@SECONDS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelistPlan {
    /// The venue, or every venue listing the pair.
    pub venue: Option<Venue>,
    /// `BASEQUOTE`, uppercase.
    pub symbol: String,
    /// Seconds after start.
    pub after_s: u64,
}

impl DelistPlan {
    /// Parses `[venue:]SYMBOL@SECONDS`.
    pub fn parse(s: &str) -> Result<DelistPlan, String> {
        let bad = || format!("--delist takes [venue:]SYMBOL@SECONDS, not '{s}'");
        let (target, secs) = s.split_once('@').ok_or_else(bad)?;
        let after_s = secs.trim().parse::<u64>().map_err(|_| bad())?;
        let (venue, symbol) = match target.split_once(':') {
            Some((v, sym)) => {
                let venue = Venue::parse(v.trim())
                    .ok_or_else(|| format!("invalid venue '{v}' in --delist. Allowed: {}", Venue::ALLOWED))?;
                (Some(venue), sym)
            }
            None => (None, target),
        };
        let symbol = symbol.trim().to_ascii_uppercase();
        if symbol.is_empty() || !symbol.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(bad());
        }
        Ok(DelistPlan { venue, symbol, after_s })
    }
}

/// Settings of one simulator run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: String,
    /// Seed of the simulated market.
    pub seed: u64,
    /// Pairs in the simulated market.
    pub sim_pairs: usize,
    /// Venues served; the others answer 404.
    pub venues: Vec<Venue>,
    /// Scheduled faults.
    pub faults: Faults,
    /// Scheduled delistings.
    pub delist: Vec<DelistPlan>,
    /// OKX `books` messages carry `"checksum":0` (venues.md §3.3 caveat).
    pub okx_checksum_zero: bool,
    /// Bitget `books` messages carry a `checksum` field (off: no field, as in 2026 recordings).
    pub bitget_checksum: bool,
    /// Binance server ping frames every this many seconds.
    pub ping_interval_s: u64,
    /// OKX closes a connection (4004) after this many seconds without a client message or a
    /// data push.
    pub idle_close_s: u64,
    /// OKX pushes an idle heartbeat on `books` when a book did not change for this many seconds.
    pub okx_heartbeat_s: u64,
    /// Messages each WebSocket connection may have queued; more makes it a slow consumer
    /// (closed and counted).
    pub queue_messages_max: usize,
    /// Open TCP connections at most (HTTP and WebSocket); more are refused at accept (closed at
    /// once).
    pub connections_max: usize,
    /// Mean time between two steps of one pair, ms (`None`: the simulator's default, 500).
    pub step_ms: Option<i64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: "127.0.0.1:0".into(),
            seed: 42,
            sim_pairs: 500,
            venues: Venue::ALL.to_vec(),
            faults: Faults::default(),
            delist: Vec::new(),
            okx_checksum_zero: false,
            bitget_checksum: true,
            ping_interval_s: 20,
            idle_close_s: 30,
            okx_heartbeat_s: 60,
            queue_messages_max: 8_192,
            connections_max: 4_096,
            step_ms: None,
        }
    }
}

/// The state every task of one simulator shares.
pub(crate) struct Shared {
    /// The market and subscriptions.
    pub state: Mutex<State>,
    /// Counters, readable without the lock.
    pub stats: Arc<Stats>,
    /// Settings.
    pub cfg: Config,
    /// Open TCP connections (HTTP and WebSocket), bounded by `Config::connections_max`.
    pub open: AtomicUsize,
    /// REST faults set through `POST /sim/rest`, per venue and [`RestRoute`].
    pub rest_faults: Mutex<[[RestFault; 4]; Venue::COUNT]>,
}

/// The REST routes a fault can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RestRoute {
    /// The instrument listing.
    Listing = 0,
    /// Candle history.
    Candles = 1,
    /// Depth snapshots (Binance).
    Depth = 2,
    /// Every perpetual route (listing, open interest, funding, tickers).
    Perp = 3,
}

/// How the simulator answers a REST route (`POST /sim/rest`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum RestFault {
    /// Normally.
    #[default]
    None,
    /// Never: the request is held open until the client gives up.
    Hang,
    /// A valid listing with no instruments (listing only).
    Empty,
    /// This status with this `Retry-After` header text (when given).
    Status(u16, Option<u64>),
}

impl Shared {
    /// The market of `config` built at `now_ms`, with no connection and no REST fault.
    pub(crate) fn new(config: Config, now_ms: i64) -> Result<Shared, StartError> {
        let stats = Arc::new(Stats::default());
        let state = State::new(config.clone(), stats.clone(), now_ms).map_err(StartError::Market)?;
        Ok(Shared {
            state: Mutex::new(state),
            stats,
            cfg: config,
            open: AtomicUsize::new(0),
            rest_faults: Mutex::new(Default::default()),
        })
    }

    /// Locks the state (a poisoned lock is taken over: the state stays usable).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fault set on a venue's route.
    pub(crate) fn rest_fault(&self, venue: Venue, route: RestRoute) -> RestFault {
        self.rest_faults.lock().unwrap_or_else(|e| e.into_inner())[venue.index()][route as usize]
    }

    /// True when `venue` is served and up.
    pub(crate) fn venue_up(&self, venue: Venue) -> bool {
        self.cfg.venues.contains(&venue) && self.lock().venue_up[venue.index()]
    }
}

/// A running simulator: its address, and a way to stop it.
pub struct Handle {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Handle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `ws://127.0.0.1:PORT`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Stops the simulator: the listener closes, every connection is dropped, the thread ends.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// Placeholder for the send time in microsecond Binance payloads: a valid 16-digit JSON number
/// that each connection's writer replaces with the wall clock as it writes the frame, so the
/// stamp is the moment the message leaves the simulator (the latency benchmark's origin), not
/// the moment its market round built it.
pub(crate) const SEND_TIME_MARK: &str = "1000000000000000";

/// The wall clock in Unix microseconds (Binance `timeUnit=MICROSECOND` streams).
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

thread_local! {
    /// The simulated time of an [`inproc::InProcess`] driving the simulator on this thread;
    /// `None` (every thread of the socket simulator): the wall clock.
    static SIMULATED_MS: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// The simulator's clock, Unix milliseconds: the wall clock, or on a thread that drives the
/// simulator in process, the simulated time it set.
pub(crate) fn now_ms() -> i64 {
    if let Some(ms) = SIMULATED_MS.with(|c| c.get()) {
        return ms;
    }
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Why the simulator could not start.
#[derive(Debug)]
pub enum StartError {
    /// A setting out of its range (the message names it).
    Config(String),
    /// The listen address could not be bound.
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The simulated market could not be built (e.g. a `--delist` pair that is not listed).
    Market(String),
    /// The runtime or the thread could not be started.
    Io(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(m) | StartError::Market(m) => f.write_str(m),
            StartError::Bind { addr, error } => write!(f, "binding {addr}: {error}"),
            StartError::Io(e) => write!(f, "starting: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<std::io::Error> for StartError {
    fn from(e: std::io::Error) -> StartError {
        StartError::Io(e)
    }
}

/// Refuses settings out of their ranges.
fn validate(config: &Config) -> Result<(), StartError> {
    let bad = |m: &str| Err(StartError::Config(m.to_owned()));
    if config.venues.is_empty() {
        return Err(StartError::Config(format!("no venues given. Allowed: {}", Venue::ALLOWED)));
    }
    if !(1..=5_000).contains(&config.sim_pairs) {
        return bad("--sim-pairs must be between 1 and 5000");
    }
    if config.queue_messages_max == 0 || config.connections_max == 0 {
        return bad("queue and connection bounds must be above zero");
    }
    if config.ping_interval_s == 0 || config.idle_close_s == 0 || config.okx_heartbeat_s == 0 {
        return bad("--ping-interval-s and --idle-close-s must be above zero");
    }
    Ok(())
}

/// Binds the listener, builds the market (history of every pair, initial books) and starts the
/// simulator on its own thread (a single-threaded tokio runtime); returns once it accepts
/// connections.
pub fn start(config: Config) -> Result<Handle, StartError> {
    validate(&config)?;
    let listener = std::net::TcpListener::bind(&config.listen)
        .map_err(|error| StartError::Bind { addr: config.listen.clone(), error })?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared::new(config, now_ms())?);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (tx, rx) = oneshot::channel();
    let thread = std::thread::Builder::new().name("sim-venue".into()).spawn(move || {
        runtime.block_on(server::run(listener, shared, rx));
    })?;
    Ok(Handle { addr, shutdown: Some(tx), thread: Some(thread) })
}

/// An HTTP answer: status and JSON body.
pub(crate) struct Reply {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: String,
}

impl Reply {
    /// 200 with `body`.
    pub(crate) fn ok(body: String) -> Reply {
        Reply { status: 200, body }
    }

    /// `status` with `body`.
    pub(crate) fn status(status: u16, body: String) -> Reply {
        Reply { status, body }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delist_plans_parse() {
        assert_eq!(
            DelistPlan::parse("okx:btcusdt@5"),
            Ok(DelistPlan { venue: Some(Venue::Okx), symbol: "BTCUSDT".into(), after_s: 5 })
        );
        assert_eq!(
            DelistPlan::parse("ETHUSDT@0"),
            Ok(DelistPlan { venue: None, symbol: "ETHUSDT".into(), after_s: 0 })
        );
        assert!(DelistPlan::parse("kraken:BTCUSDT@5").is_err());
        assert!(DelistPlan::parse("BTCUSDT").is_err());
        assert!(DelistPlan::parse("BTC-USDT@1").is_err());
        assert!(DelistPlan::parse("@1").is_err());
    }
}
