//! One WebSocket connection's venue logic: which URL and subscriptions it opens, how its frames
//! are decoded and applied to the books it carries (through each book's sync state machine),
//! and what it must do next (fetch a snapshot, resubscribe a book, ping, reconnect).
//!
//! Sans-I/O: a [`Session`] takes bytes and the time, and changes the books through a [`Sink`]
//! (the shard). The connection task does the reading and writing; the shard's loop does the
//! REST side. Decoding and applying allocate nothing per message: decoders and sync machines are
//! sized at construction, and symbols are looked up by borrowed bytes.
//!
//! Recovery rules, for every venue: a book whose sync machine breaks (gap, checksum mismatch,
//! crossed book) is marked stale at once (no walls, no alerts) and rebuilt: Binance fetches a new
//! REST snapshot, the others resubscribe the book's channel (unsubscribe + subscribe, which
//! brings a fresh snapshot). Rebuilds of one book are spaced by a backoff that doubles from
//! [`RESYNC_BACKOFF_MIN_MS`] to [`RESYNC_BACKOFF_MAX_MS`] while it keeps breaking, so a broken
//! stream never becomes a resubscribe storm. A venue's hourly subscription budget (OKX 480,
//! Bitget 240 per connection) is respected: past it the session asks for a reconnect instead.
//! A book that resyncs from the venue's own snapshot (a reset) while its rebuild waits needs no
//! rebuild: the rebuild is dropped, and so is a resubscription none of whose messages has gone;
//! a resubscription makes its book stale from the moment it is queued. A new connection starts
//! every book over, its backoff too. (The seeded simulation test, `shard::simulation`, found
//! both races these rules close.)

use std::collections::{HashMap, VecDeque};

use rampart_engine::book::Book;
use rampart_engine::feed::binance::{self as bn, BinanceBookSync, BinanceDecoder, TimeUnit};
use rampart_engine::feed::bitget::{self as bg, BitgetBookSync, BitgetDecoder};
use rampart_engine::feed::bybit::{self as by, BybitBookSync, BybitDecoder};
use rampart_engine::feed::okx::{self as ok, OkxBookSync, OkxDecoder};
use rampart_engine::{BookId, Tick, Venue};

use super::{binance, bitget, bybit, okx};

/// First delay before rebuilding a book that broke.
pub const RESYNC_BACKOFF_MIN_MS: i64 = 500;
/// Longest delay between two rebuilds of one book.
pub const RESYNC_BACKOFF_MAX_MS: i64 = 30_000;
/// A book that stayed live this long resets its backoff.
const RESYNC_BACKOFF_RESET_MS: i64 = 60_000;
/// Control messages waiting to be sent at most; past it the session reconnects instead.
pub const CONTROL_QUEUE_MAX: usize = 256;
/// Binance diffs buffered per book while its snapshot is fetched.
pub const BINANCE_BUFFER_EVENTS_MAX: usize = 512;
/// Levels in those buffered diffs, per book.
pub const BINANCE_BUFFER_LEVELS_MAX: usize = 8_192;
/// Levels per side a decoder accepts in one message.
pub const DECODE_LEVELS_MAX: usize = 5_000;
/// Levels per side whose text a Bitget book keeps for its checksum (Bitget does not document
/// the `books` depth; farther levels are kept in the book without text, as OKX's are).
pub const BITGET_TEXT_LEVELS_MAX: usize = 400;
/// Trades per message a decoder accepts.
pub const DECODE_TRADES_MAX: usize = 1_024;

/// Control messages of one book's resubscription: its unsubscribe, then its subscribe.
const RESUBSCRIBE_MESSAGES: usize = 2;

/// Connections are renewed after this long (Binance cuts at 24 h).
pub const CONNECTION_LIFETIME_MS: i64 = 23 * 3_600_000;

/// Why a session wants its connection replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconnect {
    /// Nothing arrived within the venue's idle limit: the stream is presumed dead.
    Idle,
    /// Renewed before the venue's 24 h cut ([`CONNECTION_LIFETIME_MS`]).
    Renewal,
    /// The venue's hourly subscription budget (OKX 480, Bitget 240) or the control queue is
    /// spent: a new connection rebuilds every book at once.
    Budget,
    /// The venue announced a shutdown or upgrade (Binance `serverShutdown`, OKX 64008).
    Notice,
}

impl Reconnect {
    /// Number of kinds.
    pub const COUNT: usize = 4;
    /// Every kind, in the order `/healthz` reports them.
    pub const ALL: [Reconnect; Reconnect::COUNT] =
        [Reconnect::Idle, Reconnect::Renewal, Reconnect::Budget, Reconnect::Notice];

    /// Its name in logs and `/healthz`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reconnect::Idle => "idle",
            Reconnect::Renewal => "renewal",
            Reconnect::Budget => "budget",
            Reconnect::Notice => "notice",
        }
    }
}

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
}

#[derive(Clone, Copy, Debug, Default)]
struct Rebuild {
    /// A rebuild is wanted at or after `due_ms`.
    wanted: bool,
    due_ms: i64,
    backoff_ms: i64,
    last_break_ms: i64,
    /// Binance: a snapshot request is out.
    in_flight: bool,
}

enum Decoder {
    Binance(BinanceDecoder),
    Bybit(BybitDecoder),
    Okx(OkxDecoder),
    Bitget(BitgetDecoder),
}

enum Syncs {
    Binance(Vec<BinanceBookSync>),
    Bybit(Vec<BybitBookSync>),
    Okx(Vec<OkxBookSync>),
    Bitget(Vec<BitgetBookSync>),
}

/// The venue logic of one connection.
pub struct Session {
    venue: Venue,
    books: Vec<BookId>,
    natives: Vec<String>,
    index: HashMap<Box<[u8]>, usize>,
    decoder: Decoder,
    syncs: Syncs,
    live: Vec<bool>,
    rebuild: Vec<Rebuild>,
    /// Control messages to send, oldest first.
    /// Each with the local book it rebuilds (a resubscription), if any.
    control: VecDeque<(Option<usize>, Vec<u8>)>,
    /// Binance: books whose snapshot should be fetched now.
    snapshots: Vec<BookId>,
    reconnect: Option<Reconnect>,
    /// When the current connection opened.
    opened_ms: i64,
    /// The next control message may go at or after this time.
    next_control_ms: i64,
    req_id: u64,
    /// Times of the subscription requests of the last hour (OKX and Bitget budgets).
    ops: VecDeque<i64>,
    last_ping_ms: i64,
    /// Time of the last frame received.
    pub last_rx_ms: i64,
}

impl Session {
    /// A session for `books` of `venue`, named `natives` by the venue; `verify_checksums` turns
    /// the OKX and Bitget checksum checks on.
    pub fn new(venue: Venue, books: Vec<BookId>, natives: Vec<String>, verify_checksums: bool) -> Session {
        assert_eq!(books.len(), natives.len());
        let n = books.len();
        let index = natives.iter().enumerate().map(|(i, s)| (s.as_bytes().to_vec().into_boxed_slice(), i)).collect();
        let (decoder, syncs) = match venue {
            Venue::Binance => (
                Decoder::Binance(BinanceDecoder::new(TimeUnit::Microsecond, DECODE_LEVELS_MAX)),
                Syncs::Binance(
                    (0..n)
                        .map(|_| BinanceBookSync::new(BINANCE_BUFFER_EVENTS_MAX, BINANCE_BUFFER_LEVELS_MAX))
                        .collect(),
                ),
            ),
            Venue::Bybit => (
                Decoder::Bybit(BybitDecoder::new(DECODE_LEVELS_MAX, DECODE_TRADES_MAX)),
                Syncs::Bybit((0..n).map(|_| BybitBookSync::new()).collect()),
            ),
            Venue::Okx => (
                Decoder::Okx(OkxDecoder::new(DECODE_LEVELS_MAX, DECODE_TRADES_MAX)),
                Syncs::Okx((0..n).map(|_| OkxBookSync::new(ok::BOOKS_LEVELS_PER_SIDE_MAX, verify_checksums)).collect()),
            ),
            Venue::Bitget => (
                Decoder::Bitget(BitgetDecoder::new(DECODE_LEVELS_MAX, DECODE_TRADES_MAX)),
                Syncs::Bitget((0..n).map(|_| BitgetBookSync::new(BITGET_TEXT_LEVELS_MAX, verify_checksums)).collect()),
            ),
        };
        Session {
            venue,
            books,
            natives,
            index,
            decoder,
            syncs,
            live: vec![false; n],
            rebuild: vec![Rebuild::default(); n],
            control: VecDeque::with_capacity(CONTROL_QUEUE_MAX),
            snapshots: Vec::with_capacity(n),
            reconnect: None,
            opened_ms: 0,
            next_control_ms: 0,
            req_id: 0,
            ops: VecDeque::new(),
            last_ping_ms: 0,
            last_rx_ms: 0,
        }
    }

    /// The venue.
    pub fn venue(&self) -> Venue {
        self.venue
    }

    /// The books carried.
    pub fn books(&self) -> &[BookId] {
        &self.books
    }

    /// Books currently live.
    pub fn live_count(&self) -> usize {
        self.live.iter().filter(|l| **l).count()
    }

    /// The URL to open under the venue's WebSocket base.
    pub fn url(&self, ws_base: &str) -> String {
        match self.venue {
            Venue::Binance => {
                let names: Vec<&str> = self.natives.iter().map(String::as_str).collect();
                binance::stream_url(ws_base, &names)
            }
            Venue::Bybit => bybit::stream_url(ws_base),
            Venue::Okx => okx::stream_url(ws_base),
            Venue::Bitget => bitget::stream_url(ws_base),
        }
    }

    /// A new connection is open: every book starts over (stale until its snapshot), and the
    /// subscriptions are queued.
    pub fn on_connected(&mut self, now_ms: i64, sink: &mut dyn Sink) {
        self.reconnect = None;
        self.control.clear();
        self.snapshots.clear();
        self.last_rx_ms = now_ms;
        self.last_ping_ms = now_ms;
        self.opened_ms = now_ms;
        self.next_control_ms = now_ms;
        for k in 0..self.books.len() {
            self.reset_book(k, sink);
            // A new connection starts every book over, its rebuild backoff too: the first
            // snapshot on it is not a rebuild of a broken stream.
            self.rebuild[k] = Rebuild::default();
        }
        let names: Vec<&str> = self.natives.iter().map(String::as_str).collect();
        let msgs = match self.venue {
            // Everything is in the URL.
            Venue::Binance => Vec::new(),
            Venue::Bybit => bybit::requests("subscribe", &names, true, true, &mut self.req_id),
            Venue::Okx => {
                // One request per 20 channels keeps each well under OKX's 64 KB.
                names.chunks(10).map(|c| okx::request("subscribe", c, true, true, &mut self.req_id)).collect()
            }
            Venue::Bitget => bitget::requests("subscribe", &names, true, true),
        };
        for m in msgs {
            self.ops.push_back(now_ms);
            self.control.push_back((None, m.into_bytes()));
        }
    }

    /// The connection is gone: every book it carried is stale.
    pub fn on_disconnected(&mut self, sink: &mut dyn Sink) {
        for k in 0..self.books.len() {
            self.reset_book(k, sink);
        }
    }

    /// The venue lists `book` again after a delisting: it starts over (stale) and is rebuilt
    /// like a book after a gap (Binance: a snapshot; the others: its book channel again; the
    /// trade channel was never left).
    pub fn relisted(&mut self, book: BookId, now_ms: i64, sink: &mut dyn Sink) {
        let Some(k) = self.slot_of(book) else { return };
        self.reset_book(k, sink);
        if !self.rebuild[k].in_flight {
            self.schedule_rebuild(k, now_ms);
        }
    }

    fn reset_book(&mut self, k: usize, sink: &mut dyn Sink) {
        let id = self.books[k];
        if let Some(book) = sink.book(id) {
            match &mut self.syncs {
                Syncs::Binance(s) => s[k].reset(book),
                Syncs::Bybit(s) => s[k].reset(book),
                Syncs::Okx(s) => s[k].reset(book),
                Syncs::Bitget(s) => s[k].reset(book),
            }
        }
        if self.live[k] {
            self.live[k] = false;
        }
        sink.set_live(id, false);
    }

    /// Why the session wants a new connection now, if it does: a venue notice or a spent
    /// budget, a silence past the idle limit, or the renewal age.
    pub fn poll_reconnect(&self, now_ms: i64) -> Option<Reconnect> {
        if let Some(r) = self.reconnect {
            return Some(r);
        }
        if now_ms - self.last_rx_ms > self.idle_limit_ms() {
            return Some(Reconnect::Idle);
        }
        if now_ms - self.opened_ms > CONNECTION_LIFETIME_MS {
            return Some(Reconnect::Renewal);
        }
        None
    }

    /// What to write now: the next control message once the venue's control gap has passed
    /// since the previous one, else a keepalive that is due.
    pub fn poll_transmit(&mut self, now_ms: i64) -> Option<Transmit> {
        if !self.control.is_empty() && now_ms >= self.next_control_ms {
            self.next_control_ms = now_ms + self.control_gap_ms();
            return self.control.pop_front().map(|(_, m)| Transmit::Control(m));
        }
        self.ping_due(now_ms).map(Transmit::Ping)
    }

    /// When the session next has something to do on its own (a paced control message, a
    /// keepalive, the idle limit, the renewal): the I/O task need not wake before.
    pub fn poll_timeout(&self) -> i64 {
        let mut at = (self.last_rx_ms + self.idle_limit_ms() + 1).min(self.opened_ms + CONNECTION_LIFETIME_MS + 1);
        if !self.control.is_empty() {
            at = at.min(self.next_control_ms);
        }
        at.min(self.next_ping_ms())
    }

    /// Time between two control messages: Bitget counts every message (pings too) against 10
    /// per second; the others allow more, 100 ms keeps every venue well inside its limits.
    pub fn control_gap_ms(&self) -> i64 {
        match self.venue {
            Venue::Bitget => 150,
            _ => 100,
        }
    }

    /// Takes the books whose Binance snapshot must be fetched now.
    pub fn take_snapshot_requests(&mut self, out: &mut Vec<BookId>) {
        out.append(&mut self.snapshots);
    }

    /// The snapshot request for `book` could not be queued or failed: ask again after backoff.
    pub fn snapshot_failed(&mut self, book: BookId, now_ms: i64) {
        if let Some(k) = self.slot_of(book) {
            self.rebuild[k].in_flight = false;
            self.schedule_rebuild(k, now_ms);
        }
    }

    fn slot_of(&self, book: BookId) -> Option<usize> {
        self.books.iter().position(|b| *b == book)
    }

    /// How long the connection may stay silent before it is presumed dead.
    pub fn idle_limit_ms(&self) -> i64 {
        match self.venue {
            // The server pings every 20 s; a silent minute means the stream is dead (pitfall 5).
            Venue::Binance => 60_000,
            Venue::Bybit => 60_000,
            Venue::Okx => 40_000,
            Venue::Bitget => 75_000,
        }
    }

    /// When the next keepalive is due (never, for Binance: the server pings).
    fn next_ping_ms(&self) -> i64 {
        match self.venue {
            Venue::Binance => i64::MAX,
            Venue::Bybit => self.last_ping_ms + 20_000,
            Venue::Okx => self.last_rx_ms.max(self.last_ping_ms) + 20_000,
            Venue::Bitget => self.last_ping_ms + 25_000,
        }
    }

    /// The keepalive due now, if any.
    fn ping_due(&mut self, now_ms: i64) -> Option<&'static [u8]> {
        if now_ms < self.next_ping_ms() {
            return None;
        }
        self.last_ping_ms = now_ms;
        match self.venue {
            Venue::Binance => None,
            Venue::Bybit => Some(bybit::PING),
            // Sent when nothing arrived for 20 s (the server closes at 30 s of silence).
            Venue::Okx => Some(okx::PING),
            Venue::Bitget => Some(bitget::PING),
        }
    }

    /// Starts the rebuilds that are due: Binance books get a snapshot request, the others an
    /// unsubscribe + subscribe of their book channel.
    pub fn rebuilds_due(&mut self, now_ms: i64, sink: &mut dyn Sink) {
        while self.ops.front().is_some_and(|t| now_ms - t >= 3_600_000) {
            self.ops.pop_front();
        }
        for k in 0..self.books.len() {
            let r = self.rebuild[k];
            if !r.wanted || r.in_flight || now_ms < r.due_ms {
                continue;
            }
            sink.count(self.venue, Count::Resync);
            self.rebuild[k].wanted = false;
            match self.venue {
                Venue::Binance => {
                    self.rebuild[k].in_flight = true;
                    self.snapshots.push(self.books[k]);
                }
                Venue::Bybit | Venue::Okx | Venue::Bitget => {
                    let budget = match self.venue {
                        Venue::Okx => 480,
                        Venue::Bitget => 240,
                        _ => usize::MAX,
                    };
                    let n = RESUBSCRIBE_MESSAGES;
                    if self.ops.len() + n > budget || self.control.len() + n > CONTROL_QUEUE_MAX {
                        self.reconnect = Some(Reconnect::Budget);
                        return;
                    }
                    // From the unsubscribe until the new snapshot the book gets no updates: it
                    // is stale from now (if the venue resyncs it before the unsubscribe goes, by
                    // a reset snapshot, the resubscription is dropped: see `set_live`).
                    self.reset_book(k, sink);
                    let name = [self.natives[k].as_str()];
                    let msgs = match self.venue {
                        Venue::Bybit => {
                            let mut v = bybit::requests("unsubscribe", &name, true, false, &mut self.req_id);
                            v.extend(bybit::requests("subscribe", &name, true, false, &mut self.req_id));
                            v
                        }
                        Venue::Okx => vec![
                            okx::request("unsubscribe", &name, true, false, &mut self.req_id),
                            okx::request("subscribe", &name, true, false, &mut self.req_id),
                        ],
                        _ => {
                            let mut v = bitget::requests("unsubscribe", &name, true, false);
                            v.extend(bitget::requests("subscribe", &name, true, false));
                            v
                        }
                    };
                    debug_assert_eq!(msgs.len(), RESUBSCRIBE_MESSAGES, "one unsubscribe, one subscribe");
                    for m in msgs {
                        self.ops.push_back(now_ms);
                        self.control.push_back((Some(k), m.into_bytes()));
                    }
                }
            }
        }
    }

    fn schedule_rebuild(&mut self, k: usize, now_ms: i64) {
        let r = &mut self.rebuild[k];
        if now_ms - r.last_break_ms > RESYNC_BACKOFF_RESET_MS {
            r.backoff_ms = 0;
        }
        r.backoff_ms =
            if r.backoff_ms == 0 { RESYNC_BACKOFF_MIN_MS } else { (r.backoff_ms * 2).min(RESYNC_BACKOFF_MAX_MS) };
        // The first rebuild after a quiet spell starts at once; repeated ones wait.
        r.due_ms = if r.backoff_ms == RESYNC_BACKOFF_MIN_MS { now_ms } else { now_ms + r.backoff_ms };
        r.last_break_ms = now_ms;
        r.wanted = true;
    }

    fn set_live(&mut self, k: usize, live: bool, sink: &mut dyn Sink) {
        if self.live[k] != live {
            self.live[k] = live;
            sink.set_live(self.books[k], live);
            if live {
                sink.count(self.venue, Count::Synced);
                // In sync again from the venue's own snapshot (a reset): a rebuild still waiting
                // for its backoff is not needed any more, nor a resubscription not yet begun
                // (one whose unsubscribe went already must finish, or the book stays
                // unsubscribed).
                self.rebuild[k].wanted = false;
                self.cancel_resubscribe(k);
            }
        }
    }

    /// Drops book `k`'s queued resubscription if none of it has been sent (its unsubscribe and
    /// subscribe are both still queued).
    fn cancel_resubscribe(&mut self, k: usize) {
        if self.control.iter().filter(|(b, _)| *b == Some(k)).count() == RESUBSCRIBE_MESSAGES {
            self.control.retain(|(b, _)| *b != Some(k));
        }
    }

    /// Handles one text message.
    pub fn on_text(&mut self, payload: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        self.last_rx_ms = now_ms;
        match self.venue {
            Venue::Binance => self.on_binance(payload, now_ms, sink),
            Venue::Bybit => self.on_bybit(payload, now_ms, sink),
            Venue::Okx => self.on_okx(payload, now_ms, sink),
            Venue::Bitget => self.on_bitget(payload, now_ms, sink),
        }
    }

    /// A frame was received (ping, pong, anything): the connection is alive.
    pub fn on_alive(&mut self, now_ms: i64) {
        self.last_rx_ms = now_ms;
    }

    fn on_binance(&mut self, payload: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        let (Decoder::Binance(dec), Syncs::Binance(syncs)) = (&mut self.decoder, &mut self.syncs) else { return };
        let frame = match dec.decode(payload) {
            Ok(f) => f,
            Err(_) => return sink.count(Venue::Binance, Count::DecodeError),
        };
        let (k, outcome) = match frame.message {
            bn::Message::Depth(diff) => {
                let Some(&k) = self.index.get(diff.symbol) else { return };
                let Some(book) = sink.book(self.books[k]) else { return };
                (k, syncs[k].on_diff(&diff, book))
            }
            bn::Message::Trade(t) => {
                let Some(&k) = self.index.get(t.symbol) else { return };
                sink.count(Venue::Binance, Count::Message);
                sink.trade(&t.tick(self.books[k]));
                return sink.decided(t.event_us);
            }
            bn::Message::ServerShutdown { .. } => {
                self.reconnect = Some(Reconnect::Notice);
                return;
            }
            bn::Message::Error { .. } => return sink.count(Venue::Binance, Count::VenueError),
            _ => return,
        };
        sink.count(Venue::Binance, Count::Message);
        self.binance_outcome(k, outcome, now_ms, sink);
    }

    fn binance_outcome(&mut self, k: usize, outcome: bn::SyncOutcome, now_ms: i64, sink: &mut dyn Sink) {
        match outcome {
            bn::SyncOutcome::Gap { .. } => sink.count(Venue::Binance, Count::Gap),
            bn::SyncOutcome::Crossed => sink.count(Venue::Binance, Count::Crossed),
            bn::SyncOutcome::StaleSnapshot { .. } => sink.count(Venue::Binance, Count::StaleSnapshot),
            _ => {}
        }
        let Syncs::Binance(syncs) = &self.syncs else { return };
        let live = syncs[k].is_live();
        self.set_live(k, live, sink);
        if outcome.wants_snapshot() {
            self.rebuild[k].in_flight = false;
            self.schedule_rebuild(k, now_ms);
        }
    }

    /// A Binance REST snapshot body for `book` arrived.
    pub fn on_snapshot_body(&mut self, book: BookId, body: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        let Some(k) = self.slot_of(book) else { return };
        self.rebuild[k].in_flight = false;
        let (Decoder::Binance(dec), Syncs::Binance(syncs)) = (&mut self.decoder, &mut self.syncs) else { return };
        let outcome = match dec.decode(body) {
            Ok(bn::Frame { message: bn::Message::Snapshot(snap), .. }) => {
                let Some(b) = sink.book(book) else { return };
                syncs[k].on_snapshot(&snap, b)
            }
            _ => {
                sink.count(Venue::Binance, Count::DecodeError);
                return self.schedule_rebuild(k, now_ms);
            }
        };
        self.binance_outcome(k, outcome, now_ms, sink);
    }

    fn on_bybit(&mut self, payload: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        let (Decoder::Bybit(dec), Syncs::Bybit(syncs)) = (&mut self.decoder, &mut self.syncs) else { return };
        let msg = match dec.decode(payload) {
            Ok(m) => m,
            Err(_) => return sink.count(Venue::Bybit, Count::DecodeError),
        };
        match msg {
            by::Message::Book(update) => {
                let Some(&k) = self.index.get(update.symbol) else { return };
                let Some(book) = sink.book(self.books[k]) else { return };
                let outcome = syncs[k].on_book(&update, book);
                // The stream is the top N of the venue's book: levels pushed out of it are not
                // always removed explicitly (venues.md §2.2 rule 5).
                book.truncate(bybit::BOOK_DEPTH);
                let live = syncs[k].is_live();
                sink.count(Venue::Bybit, Count::Message);
                match outcome {
                    by::SyncOutcome::Gap { .. } => sink.count(Venue::Bybit, Count::Gap),
                    by::SyncOutcome::Crossed => sink.count(Venue::Bybit, Count::Crossed),
                    by::SyncOutcome::Reset => sink.count(Venue::Bybit, Count::Reset),
                    _ => {}
                }
                self.set_live(k, live, sink);
                if outcome.wants_resubscribe() {
                    self.schedule_rebuild(k, now_ms);
                }
            }
            by::Message::Trades(trades) => {
                sink.count(Venue::Bybit, Count::Message);
                for t in trades.iter() {
                    if let Some(&k) = self.index.get(t.symbol) {
                        sink.trade(&t.tick(self.books[k]));
                    }
                }
            }
            by::Message::OpReply(r) if r.is_failure() => sink.count(Venue::Bybit, Count::VenueError),
            _ => {}
        }
    }

    fn on_okx(&mut self, payload: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        let (Decoder::Okx(dec), Syncs::Okx(syncs)) = (&mut self.decoder, &mut self.syncs) else { return };
        let msg = match dec.decode(payload) {
            Ok(m) => m,
            Err(_) => return sink.count(Venue::Okx, Count::DecodeError),
        };
        if msg.is_upgrade_notice() {
            self.reconnect = Some(Reconnect::Notice);
            return;
        }
        match msg {
            ok::Message::Book(push) => {
                if push.channel != b"books" {
                    return;
                }
                let Some(&k) = self.index.get(push.inst_id) else { return };
                let Some(book) = sink.book(self.books[k]) else { return };
                let outcome = syncs[k].on_book(&push, book);
                let live = syncs[k].is_live();
                sink.count(Venue::Okx, Count::Message);
                match outcome {
                    ok::SyncOutcome::Gap { .. } => sink.count(Venue::Okx, Count::Gap),
                    ok::SyncOutcome::ChecksumMismatch { .. } => sink.count(Venue::Okx, Count::ChecksumMismatch),
                    ok::SyncOutcome::Crossed => sink.count(Venue::Okx, Count::Crossed),
                    ok::SyncOutcome::Reset { .. } => sink.count(Venue::Okx, Count::Reset),
                    _ => {}
                }
                self.set_live(k, live, sink);
                if outcome.wants_resubscribe() {
                    self.schedule_rebuild(k, now_ms);
                }
            }
            ok::Message::Trades { inst_id, trades, .. } => {
                let Some(&k) = self.index.get(inst_id) else { return };
                sink.count(Venue::Okx, Count::Message);
                for t in trades {
                    sink.trade(&Tick {
                        book: self.books[k],
                        ts_ms: t.ts_ms,
                        kind: rampart_engine::TickKind::Trade { price: t.price, qty: t.qty, taker_sell: t.taker_sell },
                    });
                }
            }
            ok::Message::Error { .. } => sink.count(Venue::Okx, Count::VenueError),
            _ => {}
        }
    }

    fn on_bitget(&mut self, payload: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        let (Decoder::Bitget(dec), Syncs::Bitget(syncs)) = (&mut self.decoder, &mut self.syncs) else { return };
        let msg = match dec.decode(payload) {
            Ok(m) => m,
            Err(_) => return sink.count(Venue::Bitget, Count::DecodeError),
        };
        match msg {
            bg::Message::Book(push) => {
                if push.channel != bg::BookChannel::Books {
                    return;
                }
                let Some(&k) = self.index.get(push.inst_id) else { return };
                let Some(book) = sink.book(self.books[k]) else { return };
                let outcome = syncs[k].on_book(&push, book);
                let live = syncs[k].is_live();
                sink.count(Venue::Bitget, Count::Message);
                match outcome {
                    bg::SyncOutcome::Gap { .. } => sink.count(Venue::Bitget, Count::Gap),
                    bg::SyncOutcome::ChecksumMismatch { .. } => sink.count(Venue::Bitget, Count::ChecksumMismatch),
                    bg::SyncOutcome::Crossed => sink.count(Venue::Bitget, Count::Crossed),
                    bg::SyncOutcome::SequenceRestart { .. } => sink.count(Venue::Bitget, Count::Reset),
                    _ => {}
                }
                self.set_live(k, live, sink);
                if outcome.wants_resubscribe() {
                    self.schedule_rebuild(k, now_ms);
                }
            }
            bg::Message::Trades { inst_id, trades, action } => {
                // The first push after subscribing replays recent trades, which the history
                // already holds: only trades from then on are applied.
                if action == Some(bg::Action::Snapshot) {
                    return;
                }
                let Some(&k) = self.index.get(inst_id) else { return };
                sink.count(Venue::Bitget, Count::Message);
                // The decoder hands them oldest first (newest first on the wire).
                for t in trades {
                    sink.trade(&t.tick(self.books[k]));
                }
            }
            bg::Message::Error { .. } => sink.count(Venue::Bitget, Count::VenueError),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Books by id, nothing else recorded.
    struct Books(Vec<Book>);

    impl Sink for Books {
        fn book(&mut self, id: BookId) -> Option<&mut Book> {
            self.0.get_mut(id.index())
        }
        fn set_live(&mut self, _: BookId, _: bool) {}
        fn trade(&mut self, _: &Tick) {}
        fn count(&mut self, _: Venue, _: Count) {}
        fn decided(&mut self, _: i64) {}
    }

    /// A session of `n` books on `venue`, connected at `t0`, with its subscriptions sent.
    fn session(venue: Venue, n: usize, t0: i64) -> (Session, Books) {
        let ids: Vec<BookId> = (0..n as u32).map(BookId).collect();
        let natives = (0..n).map(|i| format!("P{i}-USDT")).collect();
        let mut s = Session::new(venue, ids, natives, true);
        let mut books = Books((0..n).map(|_| Book::new(16)).collect());
        s.on_connected(t0, &mut books);
        (s, books)
    }

    /// Takes every control message, each at the first time it may go; returns the times.
    fn drain(s: &mut Session, from: i64) -> Vec<i64> {
        let mut at = Vec::new();
        let mut now = from;
        while !s.control.is_empty() {
            now = now.max(s.poll_timeout());
            if let Some(Transmit::Control(_)) = s.poll_transmit(now) {
                at.push(now);
            }
        }
        at
    }

    #[test]
    fn control_messages_are_paced_by_the_venue_gap() {
        // 25 OKX books: three subscribe requests of at most 10 books each.
        let (mut s, _) = session(Venue::Okx, 25, 1_000);
        assert!(matches!(s.poll_transmit(1_000), Some(Transmit::Control(_))));
        assert_eq!(s.poll_transmit(1_050), None, "not before the gap");
        assert_eq!(s.poll_timeout(), 1_100, "the I/O task sleeps until the next one may go");
        assert_eq!(drain(&mut s, 1_050), [1_100, 1_200]);
        let (mut s, _) = session(Venue::Bitget, 300, 0);
        let times = drain(&mut s, 0);
        assert!(times.len() >= 2, "{times:?}");
        assert!(times.windows(2).all(|w| w[1] - w[0] == 150), "Bitget: 150 ms apart: {times:?}");
    }

    #[test]
    fn keepalives_follow_each_venue_rule() {
        let (mut s, _) = session(Venue::Bybit, 1, 0);
        drain(&mut s, 0);
        assert_eq!(s.poll_transmit(19_999), None);
        assert_eq!(s.poll_transmit(20_000), Some(Transmit::Ping(bybit::PING)), "Bybit: every 20 s");
        assert_eq!(s.poll_transmit(20_001), None);
        // OKX: after 20 s without anything received.
        let (mut s, _) = session(Venue::Okx, 1, 0);
        drain(&mut s, 0);
        s.on_alive(15_000);
        assert_eq!(s.poll_transmit(34_999), None, "something arrived at 15 s");
        assert_eq!(s.poll_timeout(), 35_000);
        assert_eq!(s.poll_transmit(35_000), Some(Transmit::Ping(okx::PING)));
        let (mut s, _) = session(Venue::Bitget, 1, 0);
        drain(&mut s, 0);
        assert_eq!(s.poll_transmit(25_000), Some(Transmit::Ping(bitget::PING)), "Bitget: every 25 s");
        // Binance: the server pings, the client never does.
        let (mut s, _) = session(Venue::Binance, 1, 0);
        assert_eq!(s.poll_transmit(10 * 3_600_000), None);
    }

    #[test]
    fn silence_past_the_idle_limit_reconnects() {
        for (venue, limit) in
            [(Venue::Binance, 60_000), (Venue::Bybit, 60_000), (Venue::Okx, 40_000), (Venue::Bitget, 75_000)]
        {
            let (mut s, _) = session(venue, 1, 0);
            assert_eq!(s.poll_reconnect(limit), None, "{venue}");
            assert_eq!(s.poll_reconnect(limit + 1), Some(Reconnect::Idle), "{venue}");
            s.on_alive(limit);
            assert_eq!(s.poll_reconnect(limit + 1), None, "{venue}: a frame arrived");
            assert!(s.poll_timeout() <= 2 * limit + 1, "{venue}: the I/O task wakes to notice");
        }
    }

    #[test]
    fn connections_are_renewed_before_the_24_h_cut() {
        let (mut s, _) = session(Venue::Binance, 1, 0);
        let mut now = 0;
        while now < CONNECTION_LIFETIME_MS {
            now += 30_000;
            s.on_alive(now);
            assert_eq!(s.poll_reconnect(now), None, "at {now}");
        }
        s.on_alive(CONNECTION_LIFETIME_MS + 1);
        assert_eq!(s.poll_reconnect(CONNECTION_LIFETIME_MS + 1), Some(Reconnect::Renewal));
        const { assert!(CONNECTION_LIFETIME_MS < 24 * 3_600_000) };
    }

    #[test]
    fn a_broken_book_is_rebuilt_with_a_doubling_backoff() {
        let (mut s, mut books) = session(Venue::Binance, 1, 0);
        let mut asks = Vec::new();
        // The first break is rebuilt at once; each further one waits twice as long, to 30 s.
        let mut now = 10_000;
        let mut waits = Vec::new();
        for _ in 0..8 {
            s.snapshot_failed(BookId(0), now);
            let due = s.rebuild[0].due_ms;
            s.rebuilds_due(due - 1, &mut books);
            s.take_snapshot_requests(&mut asks);
            assert!(due == now || asks.is_empty(), "not before it is due");
            s.rebuilds_due(due, &mut books);
            s.take_snapshot_requests(&mut asks);
            assert_eq!(std::mem::take(&mut asks), [BookId(0)]);
            waits.push(due - now);
            now = due + 1;
        }
        assert_eq!(waits, [0, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
        // A quiet minute resets it.
        s.snapshot_failed(BookId(0), now + RESYNC_BACKOFF_RESET_MS + 1);
        assert_eq!(s.rebuild[0].due_ms, now + RESYNC_BACKOFF_RESET_MS + 1);
    }

    #[test]
    fn a_spent_subscription_budget_renews_the_connection() {
        // OKX allows 480 subscription requests an hour: each rebuild costs two.
        let (mut s, mut books) = session(Venue::Okx, 10, 0);
        drain(&mut s, 0);
        let mut now = 0;
        let mut rounds = 0;
        while s.poll_reconnect(now).is_none() && rounds < 100 {
            rounds += 1;
            now += 31_000;
            for k in 0..10 {
                s.on_alive(now);
                s.relisted(BookId(k), now, &mut books);
            }
            s.rebuilds_due(now + 30_000, &mut books);
            drain(&mut s, now + 30_000);
        }
        assert_eq!(s.poll_reconnect(now), Some(Reconnect::Budget));
        let ops = 1 + 20 * rounds;
        assert!((460..=500).contains(&ops), "renewed near the budget, after {rounds} rounds ({ops} requests)");
    }

    /// A Bybit book message for book 0 of [`session`].
    fn bybit_book(kind: &str, u: u64) -> Vec<u8> {
        format!(
            r#"{{"topic":"orderbook.200.P0-USDT","ts":1,"type":"{kind}","data":{{"s":"P0-USDT","b":[["1.0","1"]],"a":[["2.0","1"]],"u":{u},"seq":{u}}},"cts":1}}"#
        )
        .into_bytes()
    }

    #[test]
    fn a_venue_reset_snapshot_makes_a_pending_resubscription_unneeded() {
        let (mut s, mut books) = session(Venue::Bybit, 1, 0);
        drain(&mut s, 0);
        s.on_text(&bybit_book("snapshot", 10), 100, &mut books);
        assert!(s.live[0]);
        // A gap: stale, a rebuild due at once; the venue resets the book before it starts.
        s.on_text(&bybit_book("delta", 12), 200, &mut books);
        assert!(!s.live[0] && s.rebuild[0].wanted);
        s.on_text(&bybit_book("snapshot", 1), 210, &mut books);
        assert!(s.live[0] && !s.rebuild[0].wanted, "in sync from the reset: no rebuild");
        s.rebuilds_due(220, &mut books);
        assert!(s.control.is_empty());
        // A gap again; this time the resubscription is queued, then the venue resets the book
        // before the unsubscribe goes: the resubscription is dropped whole.
        s.on_text(&bybit_book("delta", 5), 300, &mut books);
        let due = s.rebuild[0].due_ms;
        s.rebuilds_due(due, &mut books);
        assert_eq!(s.control.len(), RESUBSCRIBE_MESSAGES);
        s.on_text(&bybit_book("snapshot", 1), due + 10, &mut books);
        assert!(s.live[0] && s.control.is_empty());
        // Once the unsubscribe has gone, the subscribe must follow (or the book would stay
        // unsubscribed), and the book is stale until the subscribe's snapshot.
        s.on_text(&bybit_book("delta", 7), due + 20, &mut books);
        let due = s.rebuild[0].due_ms;
        s.rebuilds_due(due, &mut books);
        assert!(
            matches!(s.poll_transmit(due + 1_000), Some(Transmit::Control(m)) if m.windows(11).any(|w| w == b"unsubscribe"))
        );
        assert!(!s.live[0]);
        s.on_text(&bybit_book("snapshot", 1), due + 1_010, &mut books);
        assert_eq!(s.control.len(), 1, "the subscribe still goes");
    }

    #[test]
    fn a_new_connection_starts_the_rebuild_backoff_over() {
        let (mut s, mut books) = session(Venue::Binance, 1, 0);
        let mut now = 1_000;
        for _ in 0..6 {
            s.snapshot_failed(BookId(0), now);
            now = s.rebuild[0].due_ms;
        }
        assert!(s.rebuild[0].backoff_ms >= 16_000, "{:?}", s.rebuild[0]);
        s.on_disconnected(&mut books);
        s.on_connected(now + 100, &mut books);
        s.snapshot_failed(BookId(0), now + 200);
        assert_eq!(s.rebuild[0].due_ms, now + 200, "the first snapshot on a new connection is asked at once");
    }
}
