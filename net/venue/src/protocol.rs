//! What a venue's stream protocol is, as one trait: every fact the session needs about a venue
//! (its stream URL, how it subscribes and in what batches, how a broken book is rebuilt, its
//! subscription budget, idle limit, keepalive and control pacing, its decoder and book sync
//! machine, and what each of its messages means) sits in that venue's module as an
//! `impl Protocol`, so the session is written once ([`super::session::SessionOf`]).
//!
//! A venue's `handle` decodes one frame and applies it (books through their sync machines,
//! trades to the sink) and reports what happened as an [`Applied`]; the session does the rest the
//! same way for every venue (counts, live flags, rebuild scheduling). No allocation per frame:
//! decoders and sync machines are sized at construction, and symbols are looked up by borrowed
//! bytes in the session's index.

use std::collections::HashMap;

use rampart_engine::book::Book;
use rampart_engine::{BookId, Tick, Venue};

/// Connections are renewed after this long (Binance cuts at 24 h).
pub const CONNECTION_LIFETIME_MS: i64 = 23 * 3_600_000;

/// What the session wants written now.
#[derive(Debug, PartialEq, Eq)]
pub enum Transmit {
    /// A subscription request (paced by the venue's control gap).
    Control(Vec<u8>),
    /// The venue's keepalive.
    Ping(&'static [u8]),
}

/// What the session counts, per venue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// A data message was applied.
    Message,
    /// A frame did not decode.
    DecodeError,
    /// A sequence gap broke a book.
    Gap,
    /// A checksum mismatch broke a book.
    ChecksumMismatch,
    /// A book was found crossed.
    Crossed,
    /// A Binance snapshot was older than the buffered diffs.
    StaleSnapshot,
    /// A book rebuild was started (snapshot fetch or resubscribe).
    Resync,
    /// The venue reset a book (Bybit `u=1`, OKX `seqId < prevSeqId`).
    Reset,
    /// The venue answered a request with an error.
    VenueError,
    /// A book went live (synced).
    Synced,
    /// A perpetual's data message was applied.
    PerpMessage,
    /// A perpetual frame did not decode.
    PerpDecodeError,
}

/// One liquidation of a perpetual, in its spot pair's units (decisions §17 "Units"): the side of
/// the position liquidated, the price per spot base unit, the quantity in spot base units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerpLiq {
    /// The side of the position liquidated.
    pub side: rampart_engine::perp_window::PositionSide,
    /// Price per spot base unit.
    pub price: f64,
    /// Quantity in spot base units.
    pub qty: f64,
    /// The venue's time, Unix milliseconds.
    pub ts_ms: i64,
}

/// What one message said of a perpetual, in its spot pair's units, each value merged with what
/// earlier messages said (a venue's delta carries only what changed): `None` where nothing is
/// known yet or this message did not touch it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerpValues {
    /// The venue's time of the message, Unix milliseconds.
    pub ts_ms: i64,
    /// Mark price per spot base unit, when this message carried one.
    pub mark: Option<f64>,
    /// Open interest in spot base units, with the venue's USD figure when it sent one, when this
    /// message carried it.
    pub oi: Option<(f64, Option<f64>)>,
    /// Funding: percent per interval, the interval in hours, the next settlement; when this
    /// message touched any of them and all three are known.
    pub funding: Option<(f64, u32, i64)>,
}

/// The shard side of a session.
pub trait Sink {
    /// The book to sync; `None` when it is not owned here or is delisted.
    fn book(&mut self, id: BookId) -> Option<&mut Book>;
    /// The book became live (in sync) or stale.
    fn set_live(&mut self, id: BookId, live: bool);
    /// A trade for the alert path.
    fn trade(&mut self, tick: &Tick);
    /// Counts an event of `venue`.
    fn count(&mut self, venue: Venue, what: Count);
    /// The alert decision for a trade the venue sent at `sent_us` (Unix microseconds) is made.
    fn decided(&mut self, sent_us: i64);
    /// A liquidation of `book`'s perpetual (a perpetual session only).
    fn perp_liquidation(&mut self, book: BookId, liq: &PerpLiq) {
        let _ = (book, liq);
    }
    /// Values of `book`'s perpetual (a perpetual session only).
    fn perp_values(&mut self, book: BookId, values: &PerpValues) {
        let _ = (book, values);
    }
}

/// A venue's keepalive: `bytes` every `every_ms` since the last one, or (when `after_silence`)
/// after `every_ms` without anything received or sent.
#[derive(Clone, Copy, Debug)]
pub struct Keepalive {
    /// The message.
    pub bytes: &'static [u8],
    /// Its period.
    pub every_ms: i64,
    /// Counted from the later of the last frame received and the last keepalive sent.
    pub after_silence: bool,
}

/// What one frame did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// A book message went through local book `k`'s sync machine: what it found that is worth
    /// counting (a gap, a checksum mismatch, a crossed book, a reset), and whether the book must
    /// be rebuilt.
    Book {
        /// Local index of the book in the session.
        k: usize,
        /// The event to count, if any.
        found: Option<Count>,
        /// The book must be rebuilt (snapshot or resubscription).
        rebuild: bool,
    },
    /// Data other than a book update (trades) was passed on.
    Data,
    /// The venue announced a shutdown or upgrade: the connection must be replaced.
    Notice,
    /// Something to count and nothing else (an undecodable frame, a venue error).
    Counted(Count),
    /// Nothing to do (acknowledgements, pongs, a symbol this session does not carry).
    Nothing,
}

/// What a REST snapshot body did (venues that rebuild by snapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotApplied {
    /// Applied to the book's sync machine (see [`Applied::Book`]).
    Applied {
        /// The event to count, if any.
        found: Option<Count>,
        /// The book must be rebuilt again.
        rebuild: bool,
    },
    /// The body did not decode as a snapshot.
    Undecodable,
    /// The book is not served here (not owned, or delisted).
    NoBook,
}

/// The session's side of a frame: the symbol index, the books in local order, and the shard.
pub struct Ctx<'a> {
    /// Local index of each venue name.
    pub index: &'a HashMap<Box<[u8]>, usize>,
    /// The books, in local order.
    pub books: &'a [BookId],
    /// The shard.
    pub sink: &'a mut dyn Sink,
}

impl Ctx<'_> {
    /// The local index of the venue name `name`, if the session carries it.
    pub fn slot(&self, name: &[u8]) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// A venue's endpoints and the budgets rampart uses against them by default (about half of each
/// published per-IP limit, leaving room for other clients on the same address); the TOML file
/// and the environment override them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    /// REST base URL.
    pub rest: &'static str,
    /// WebSocket base URL.
    pub ws: &'static str,
    /// Pairs per WebSocket connection.
    pub pairs_per_connection: usize,
    /// REST budget: request weight per second (Binance) or requests per second (others).
    pub rest_weight_per_s: f64,
    /// Connection attempts per second, for the whole process.
    pub connects_per_s: f64,
}

/// One venue's stream protocol.
pub trait Protocol: 'static {
    /// The venue.
    const VENUE: Venue;
    /// The real venue's endpoints and the budgets used against them.
    const DEFAULTS: Defaults;
    /// Silence longer than this means the stream is dead.
    const IDLE_LIMIT_MS: i64;
    /// Least time between two control messages.
    const CONTROL_GAP_MS: i64;
    /// Subscription requests allowed per connection and hour, if the venue limits them.
    const SUBSCRIBE_OPS_PER_HOUR: Option<usize>;
    /// The client's keepalive, if the venue wants one (Binance pings the client instead).
    const KEEPALIVE: Option<Keepalive>;
    /// The venue's frame decoder.
    type Decoder;
    /// One book's sync machine.
    type Sync;

    /// A decoder sized for the session's bounds.
    fn decoder() -> Self::Decoder;
    /// A book's sync machine; `verify_checksums` turns checksum checks on where the venue has
    /// them.
    fn book_sync(verify_checksums: bool) -> Self::Sync;
    /// Starts a book over: stale, waiting for a snapshot.
    fn reset(sync: &mut Self::Sync, book: &mut Book);
    /// True while the book is in sync.
    fn is_live(sync: &Self::Sync) -> bool;

    /// The stream URL under `ws_base` for books named `natives`.
    fn stream_url(ws_base: &str, natives: &[&str]) -> String;
    /// The requests that subscribe every book of a new connection, in batches the venue takes.
    fn subscribe_all(natives: &[&str], req_id: &mut u64) -> Vec<String>;
    /// The unsubscribe and subscribe that rebuild one book; `None` for a venue that rebuilds a
    /// book from a REST snapshot instead ([`Protocol::apply_snapshot`]).
    fn resubscribe(native: &str, req_id: &mut u64) -> Option<[String; 2]>;

    /// Decodes one text frame and applies it.
    fn handle(dec: &mut Self::Decoder, syncs: &mut [Self::Sync], ctx: &mut Ctx<'_>, payload: &[u8]) -> Applied;

    /// Applies a REST snapshot body to book `id` (local `sync`). Venues that rebuild by
    /// resubscribing never get one.
    fn apply_snapshot(
        dec: &mut Self::Decoder,
        sync: &mut Self::Sync,
        body: &[u8],
        id: BookId,
        sink: &mut dyn Sink,
    ) -> SnapshotApplied {
        let _ = (dec, sync, body, id, sink);
        SnapshotApplied::Undecodable
    }
}
