//! One WebSocket connection's venue logic: which URL and subscriptions it opens, how its frames
//! are decoded and applied to the books it carries (through each book's sync state machine),
//! and what it must do next (fetch a snapshot, resubscribe a book, ping, reconnect).
//!
//! Sans-I/O, in quinn-proto's shape: a session takes bytes and the time and changes the books
//! through a [`Sink`] (the shard): `handle_text(now, bytes)`, `handle_timeout(now)` (rebuilds
//! that are due), `poll_transmit(now)` (what to write), `poll_timeout()` (when to wake without
//! input), `poll_event()` ([`Event`]: a typed reconnect, a snapshot wanted). Books going live or
//! stale are told to the sink at once (the shard serves them). No wall clock is read here. The
//! connection task does the reading and writing; the shard's loop does the REST side. Decoding
//! and applying allocate nothing per message: decoders and sync machines are sized at
//! construction, and symbols are looked up by borrowed bytes.
//!
//! One session for every venue: [`SessionOf`] is generic over the venue's
//! [`Protocol`], which holds every fact of that venue's protocol; a
//! [`Session`] is one of them behind a trait object (one dynamic call per frame), built by
//! [`Session::new`], the only place that lists the venues.
//!
//! Recovery rules, for every venue: a book whose sync machine breaks (gap, checksum mismatch,
//! crossed book) is marked stale at once (no walls) and rebuilt: a venue with REST snapshots
//! (Binance) fetches a new one, the others resubscribe the book's channel (unsubscribe +
//! subscribe, which brings a fresh snapshot). Rebuilds of one book are spaced by a backoff that
//! doubles from [`RESYNC_BACKOFF_MIN_MS`] to [`RESYNC_BACKOFF_MAX_MS`] while it keeps breaking,
//! so a broken stream never becomes a resubscribe storm. A venue's hourly subscription budget
//! (OKX 480, Bitget 240 per connection) is respected: past it the session asks for a reconnect
//! instead. A book that resyncs from the venue's own snapshot (a reset) while its rebuild waits
//! needs no rebuild: the rebuild is dropped, and so is a resubscription none of whose messages
//! has gone; a resubscription makes its book stale from the moment it is queued. A new
//! connection starts every book over, its backoff too. (The seeded simulation test,
//! `shard::simulation`, found both races these rules close.)

use std::collections::{HashMap, VecDeque};

use rampart_engine::{BookId, Venue};

use super::perp_session::PerpSession;
use super::protocol::{Applied, Ctx, Protocol, SnapshotApplied};
pub use super::protocol::{Count, Sink, Transmit, CONNECTION_LIFETIME_MS};
use super::with_protocol;
use rampart_state::Reconnect;

/// First delay before rebuilding a book that broke.
pub const RESYNC_BACKOFF_MIN_MS: i64 = 500;
/// Longest delay between two rebuilds of one book.
pub const RESYNC_BACKOFF_MAX_MS: i64 = 30_000;
/// A book that stayed live this long resets its backoff.
const RESYNC_BACKOFF_RESET_MS: i64 = 60_000;
/// Control messages waiting to be sent at most; past it the session reconnects instead.
pub const CONTROL_QUEUE_MAX: usize = 256;
/// Levels per side a decoder accepts in one message.
pub const DECODE_LEVELS_MAX: usize = 5_000;
/// Trades per message a decoder accepts.
pub const DECODE_TRADES_MAX: usize = 1_024;
/// Control messages of one book's resubscription: its unsubscribe, then its subscribe.
const RESUBSCRIBE_MESSAGES: usize = 2;
/// The window of a venue's subscription budget.
const BUDGET_WINDOW_MS: i64 = 3_600_000;

/// What the session asks of its driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Replace the connection, for this reason.
    Reconnect(Reconnect),
    /// Fetch this book's REST snapshot and hand it to `handle_snapshot`.
    SnapshotWanted(BookId),
}

#[derive(Clone, Copy, Debug, Default)]
struct Rebuild {
    /// A rebuild is wanted at or after `due_ms`.
    wanted: bool,
    due_ms: i64,
    backoff_ms: i64,
    last_break_ms: i64,
    /// A snapshot request is out.
    in_flight: bool,
}

/// The venue logic of one connection, for venue `P`.
pub struct SessionOf<P: Protocol> {
    books: Vec<BookId>,
    natives: Vec<String>,
    index: HashMap<Box<[u8]>, usize>,
    decoder: P::Decoder,
    syncs: Vec<P::Sync>,
    live: Vec<bool>,
    rebuild: Vec<Rebuild>,
    /// Control messages to send, oldest first, each with the local book it rebuilds (a
    /// resubscription), if any.
    control: VecDeque<(Option<usize>, Vec<u8>)>,
    /// Books whose snapshot should be fetched now.
    snapshots: VecDeque<BookId>,
    reconnect: Option<Reconnect>,
    /// When the current connection opened.
    opened_ms: i64,
    /// The next control message may go at or after this time.
    next_control_ms: i64,
    req_id: u64,
    /// Times of the subscription requests of the last hour (venues with a budget).
    ops: VecDeque<i64>,
    last_ping_ms: i64,
    /// Time of the last frame received.
    last_rx_ms: i64,
}

impl<P: Protocol> SessionOf<P> {
    /// A session for `books`, named `natives` by the venue; `verify_checksums` turns checksum
    /// checks on where the venue has them.
    pub fn new(books: Vec<BookId>, natives: Vec<String>, verify_checksums: bool) -> SessionOf<P> {
        assert_eq!(books.len(), natives.len());
        let n = books.len();
        let index = natives.iter().enumerate().map(|(i, s)| (s.as_bytes().to_vec().into_boxed_slice(), i)).collect();
        SessionOf {
            books,
            natives,
            index,
            decoder: P::decoder(),
            syncs: (0..n).map(|_| P::book_sync(verify_checksums)).collect(),
            live: vec![false; n],
            rebuild: vec![Rebuild::default(); n],
            control: VecDeque::with_capacity(CONTROL_QUEUE_MAX),
            snapshots: VecDeque::with_capacity(n),
            reconnect: None,
            opened_ms: 0,
            next_control_ms: 0,
            req_id: 0,
            ops: VecDeque::new(),
            last_ping_ms: 0,
            last_rx_ms: 0,
        }
    }

    /// A new connection is open: every book starts over (stale until its snapshot), and the
    /// subscriptions are queued.
    pub fn handle_connected(&mut self, now_ms: i64, sink: &mut dyn Sink) {
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
        for m in P::subscribe_all(&names, &mut self.req_id) {
            self.ops.push_back(now_ms);
            self.control.push_back((None, m.into_bytes()));
        }
    }

    /// The connection is gone: every book it carried is stale.
    pub fn handle_disconnected(&mut self, sink: &mut dyn Sink) {
        for k in 0..self.books.len() {
            self.reset_book(k, sink);
        }
    }

    /// The venue lists `book` again after a delisting: it starts over (stale) and is rebuilt
    /// like a book after a gap (a snapshot, or its book channel again; the trade channel was
    /// never left).
    pub fn handle_relisted(&mut self, book: BookId, now_ms: i64, sink: &mut dyn Sink) {
        let Some(k) = self.slot_of(book) else { return };
        self.reset_book(k, sink);
        if !self.rebuild[k].in_flight {
            self.schedule_rebuild(k, now_ms);
        }
    }

    fn reset_book(&mut self, k: usize, sink: &mut dyn Sink) {
        let id = self.books[k];
        if let Some(book) = sink.book(id) {
            P::reset(&mut self.syncs[k], book);
        }
        self.live[k] = false;
        sink.set_live(id, false);
    }

    /// What the driver must do now, if anything: replace the connection (a venue notice, a
    /// spent budget, a silence past the idle limit, the renewal age), then each snapshot wanted
    /// (taken by this call). A reconnect is reported until the next connection opens.
    pub fn poll_event(&mut self, now_ms: i64) -> Option<Event> {
        if let Some(r) = self.poll_reconnect(now_ms) {
            return Some(Event::Reconnect(r));
        }
        self.snapshots.pop_front().map(Event::SnapshotWanted)
    }

    /// Why the session wants a new connection now, if it does (the reconnect of
    /// [`SessionOf::poll_event`], for a driver that leaves snapshots to another: the live
    /// connection task).
    pub fn poll_reconnect(&self, now_ms: i64) -> Option<Reconnect> {
        if let Some(r) = self.reconnect {
            return Some(r);
        }
        if now_ms - self.last_rx_ms > P::IDLE_LIMIT_MS {
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
            self.next_control_ms = now_ms + P::CONTROL_GAP_MS;
            return self.control.pop_front().map(|(_, m)| Transmit::Control(m));
        }
        let keepalive = P::KEEPALIVE?;
        if now_ms < self.next_ping_ms() {
            return None;
        }
        self.last_ping_ms = now_ms;
        Some(Transmit::Ping(keepalive.bytes))
    }

    /// When the session next has something to do on its own (a paced control message, a
    /// keepalive, the idle limit, the renewal, a rebuild): the driver need not wake before.
    pub fn poll_timeout(&self) -> i64 {
        let mut at = (self.last_rx_ms + P::IDLE_LIMIT_MS + 1).min(self.opened_ms + CONNECTION_LIFETIME_MS + 1);
        if !self.control.is_empty() {
            at = at.min(self.next_control_ms);
        }
        if let Some(due) = self.rebuild.iter().filter(|r| r.wanted && !r.in_flight).map(|r| r.due_ms).min() {
            at = at.min(due);
        }
        at.min(self.next_ping_ms())
    }

    /// When the next keepalive is due (never, for a venue without one).
    fn next_ping_ms(&self) -> i64 {
        match P::KEEPALIVE {
            None => i64::MAX,
            Some(k) if k.after_silence => self.last_rx_ms.max(self.last_ping_ms) + k.every_ms,
            Some(k) => self.last_ping_ms + k.every_ms,
        }
    }

    /// The snapshot request for `book` could not be made or failed: ask again after backoff.
    pub fn handle_snapshot_failed(&mut self, book: BookId, now_ms: i64) {
        if let Some(k) = self.slot_of(book) {
            self.rebuild[k].in_flight = false;
            self.schedule_rebuild(k, now_ms);
        }
    }

    fn slot_of(&self, book: BookId) -> Option<usize> {
        self.books.iter().position(|b| *b == book)
    }

    /// Time passes: starts the rebuilds that are due (a snapshot wanted, or an unsubscribe +
    /// subscribe of the book channel) and forgets subscription requests older than the budget's
    /// hour.
    pub fn handle_timeout(&mut self, now_ms: i64, sink: &mut dyn Sink) {
        while self.ops.front().is_some_and(|t| now_ms - t >= BUDGET_WINDOW_MS) {
            self.ops.pop_front();
        }
        for k in 0..self.books.len() {
            let r = self.rebuild[k];
            if !r.wanted || r.in_flight || now_ms < r.due_ms {
                continue;
            }
            sink.count(P::VENUE, Count::Resync);
            self.rebuild[k].wanted = false;
            let mut req_id = self.req_id;
            let Some(msgs) = P::resubscribe(&self.natives[k], &mut req_id) else {
                self.rebuild[k].in_flight = true;
                self.snapshots.push_back(self.books[k]);
                continue;
            };
            let n = RESUBSCRIBE_MESSAGES;
            let budget = P::SUBSCRIBE_OPS_PER_HOUR.unwrap_or(usize::MAX);
            if self.ops.len() + n > budget || self.control.len() + n > CONTROL_QUEUE_MAX {
                self.reconnect = Some(Reconnect::Budget);
                return;
            }
            self.req_id = req_id;
            // From the unsubscribe until the new snapshot the book gets no updates: it is stale
            // from now (if the venue resyncs it before the unsubscribe goes, by a reset
            // snapshot, the resubscription is dropped: see `set_live`).
            self.reset_book(k, sink);
            for m in msgs {
                self.ops.push_back(now_ms);
                self.control.push_back((Some(k), m.into_bytes()));
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
                sink.count(P::VENUE, Count::Synced);
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
    pub fn handle_text(&mut self, now_ms: i64, payload: &[u8], sink: &mut dyn Sink) {
        self.last_rx_ms = now_ms;
        let mut ctx = Ctx { index: &self.index, books: &self.books, sink };
        let applied = P::handle(&mut self.decoder, &mut self.syncs, &mut ctx, payload);
        match applied {
            Applied::Book { k, found, rebuild } => {
                sink.count(P::VENUE, Count::Message);
                self.book_outcome(k, found, rebuild, now_ms, sink);
            }
            Applied::Data => sink.count(P::VENUE, Count::Message),
            Applied::Notice => self.reconnect = Some(Reconnect::Notice),
            Applied::Counted(what) => sink.count(P::VENUE, what),
            Applied::Nothing => {}
        }
    }

    /// What the sync machine of local book `k` found, whether it is live now, and its rebuild.
    fn book_outcome(&mut self, k: usize, found: Option<Count>, rebuild: bool, now_ms: i64, sink: &mut dyn Sink) {
        if let Some(what) = found {
            sink.count(P::VENUE, what);
        }
        let live = P::is_live(&self.syncs[k]);
        self.set_live(k, live, sink);
        if rebuild {
            self.rebuild[k].in_flight = false;
            self.schedule_rebuild(k, now_ms);
        }
    }

    /// A frame was received (ping, pong, anything): the connection is alive.
    pub fn handle_alive(&mut self, now_ms: i64) {
        self.last_rx_ms = now_ms;
    }

    /// A REST snapshot body for `book` arrived.
    pub fn handle_snapshot(&mut self, book: BookId, body: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        let Some(k) = self.slot_of(book) else { return };
        self.rebuild[k].in_flight = false;
        match P::apply_snapshot(&mut self.decoder, &mut self.syncs[k], body, book, sink) {
            SnapshotApplied::Applied { found, rebuild } => self.book_outcome(k, found, rebuild, now_ms, sink),
            SnapshotApplied::Undecodable => {
                sink.count(P::VENUE, Count::DecodeError);
                self.schedule_rebuild(k, now_ms);
            }
            SnapshotApplied::NoBook => {}
        }
    }
}

/// A session of any venue, as the shard holds it: [`SessionOf`] behind one object-safe trait.
trait Driven {
    fn venue(&self) -> Venue;
    fn books(&self) -> &[BookId];
    fn live_count(&self) -> usize;
    fn url(&self, ws_base: &str) -> String;
    fn handle_connected(&mut self, now_ms: i64, sink: &mut dyn Sink);
    fn handle_disconnected(&mut self, sink: &mut dyn Sink);
    fn handle_relisted(&mut self, book: BookId, now_ms: i64, sink: &mut dyn Sink);
    fn handle_text(&mut self, now_ms: i64, payload: &[u8], sink: &mut dyn Sink);
    fn handle_alive(&mut self, now_ms: i64);
    fn handle_timeout(&mut self, now_ms: i64, sink: &mut dyn Sink);
    fn handle_snapshot(&mut self, book: BookId, body: &[u8], now_ms: i64, sink: &mut dyn Sink);
    fn handle_snapshot_failed(&mut self, book: BookId, now_ms: i64);
    fn poll_event(&mut self, now_ms: i64) -> Option<Event>;
    fn poll_reconnect(&self, now_ms: i64) -> Option<Reconnect>;
    fn poll_transmit(&mut self, now_ms: i64) -> Option<Transmit>;
    fn poll_timeout(&self) -> i64;
    fn control_gap_ms(&self) -> i64;
    fn is_perp(&self) -> bool;
}

impl<P: Protocol> Driven for SessionOf<P> {
    fn venue(&self) -> Venue {
        P::VENUE
    }
    fn books(&self) -> &[BookId] {
        &self.books
    }
    fn live_count(&self) -> usize {
        self.live.iter().filter(|l| **l).count()
    }
    fn url(&self, ws_base: &str) -> String {
        let names: Vec<&str> = self.natives.iter().map(String::as_str).collect();
        P::stream_url(ws_base, &names)
    }
    fn handle_connected(&mut self, now_ms: i64, sink: &mut dyn Sink) {
        SessionOf::handle_connected(self, now_ms, sink)
    }
    fn handle_disconnected(&mut self, sink: &mut dyn Sink) {
        SessionOf::handle_disconnected(self, sink)
    }
    fn handle_relisted(&mut self, book: BookId, now_ms: i64, sink: &mut dyn Sink) {
        SessionOf::handle_relisted(self, book, now_ms, sink)
    }
    fn handle_text(&mut self, now_ms: i64, payload: &[u8], sink: &mut dyn Sink) {
        SessionOf::handle_text(self, now_ms, payload, sink)
    }
    fn handle_alive(&mut self, now_ms: i64) {
        SessionOf::handle_alive(self, now_ms)
    }
    fn handle_timeout(&mut self, now_ms: i64, sink: &mut dyn Sink) {
        SessionOf::handle_timeout(self, now_ms, sink)
    }
    fn handle_snapshot(&mut self, book: BookId, body: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        SessionOf::handle_snapshot(self, book, body, now_ms, sink)
    }
    fn handle_snapshot_failed(&mut self, book: BookId, now_ms: i64) {
        SessionOf::handle_snapshot_failed(self, book, now_ms)
    }
    fn poll_event(&mut self, now_ms: i64) -> Option<Event> {
        SessionOf::poll_event(self, now_ms)
    }
    fn poll_reconnect(&self, now_ms: i64) -> Option<Reconnect> {
        SessionOf::poll_reconnect(self, now_ms)
    }
    fn poll_transmit(&mut self, now_ms: i64) -> Option<Transmit> {
        SessionOf::poll_transmit(self, now_ms)
    }
    fn poll_timeout(&self) -> i64 {
        SessionOf::poll_timeout(self)
    }
    fn control_gap_ms(&self) -> i64 {
        P::CONTROL_GAP_MS
    }
    fn is_perp(&self) -> bool {
        false
    }
}

/// A perpetual session, driven as a spot one: it has no book to sync, snapshot or rebuild.
impl Driven for PerpSession {
    fn venue(&self) -> Venue {
        PerpSession::venue(self)
    }
    fn books(&self) -> &[BookId] {
        PerpSession::books(self)
    }
    fn live_count(&self) -> usize {
        0
    }
    fn url(&self, ws_base: &str) -> String {
        PerpSession::url(self, ws_base)
    }
    fn handle_connected(&mut self, now_ms: i64, _: &mut dyn Sink) {
        PerpSession::handle_connected(self, now_ms)
    }
    fn handle_disconnected(&mut self, _: &mut dyn Sink) {}
    fn handle_relisted(&mut self, _: BookId, _: i64, _: &mut dyn Sink) {}
    fn handle_text(&mut self, now_ms: i64, payload: &[u8], sink: &mut dyn Sink) {
        PerpSession::handle_text(self, now_ms, payload, sink)
    }
    fn handle_alive(&mut self, now_ms: i64) {
        PerpSession::handle_alive(self, now_ms)
    }
    fn handle_timeout(&mut self, _: i64, _: &mut dyn Sink) {}
    fn handle_snapshot(&mut self, _: BookId, _: &[u8], _: i64, _: &mut dyn Sink) {}
    fn handle_snapshot_failed(&mut self, _: BookId, _: i64) {}
    fn poll_event(&mut self, now_ms: i64) -> Option<Event> {
        self.poll_reconnect(now_ms).map(Event::Reconnect)
    }
    fn poll_reconnect(&self, now_ms: i64) -> Option<Reconnect> {
        PerpSession::poll_reconnect(self, now_ms)
    }
    fn poll_transmit(&mut self, now_ms: i64) -> Option<Transmit> {
        PerpSession::poll_transmit(self, now_ms)
    }
    fn poll_timeout(&self) -> i64 {
        PerpSession::poll_timeout(self)
    }
    fn control_gap_ms(&self) -> i64 {
        PerpSession::control_gap_ms(self)
    }
    fn is_perp(&self) -> bool {
        true
    }
}

/// The venue logic of one connection, whatever its venue.
pub struct Session(Box<dyn Driven>);

impl Session {
    /// A session for `books` of `venue`, named `natives` by the venue; `verify_checksums` turns
    /// the OKX and Bitget checksum checks on.
    pub fn new(venue: Venue, books: Vec<BookId>, natives: Vec<String>, verify_checksums: bool) -> Session {
        Session(with_protocol!(venue, P => Box::new(SessionOf::<P>::new(books, natives, verify_checksums))))
    }

    /// A session for the perpetuals `pairs` of `books` on `venue` (see [`PerpSession`]).
    pub fn perp(venue: Venue, books: Vec<BookId>, pairs: Vec<super::perp_listing::PerpPair>) -> Session {
        Session(Box::new(PerpSession::new(venue, books, pairs)))
    }

    /// True for a perpetual session.
    pub fn is_perp(&self) -> bool {
        self.0.is_perp()
    }

    /// The venue.
    pub fn venue(&self) -> Venue {
        self.0.venue()
    }

    /// The books carried.
    pub fn books(&self) -> &[BookId] {
        self.0.books()
    }

    /// Books currently live.
    pub fn live_count(&self) -> usize {
        self.0.live_count()
    }

    /// The URL to open under the venue's WebSocket base.
    pub fn url(&self, ws_base: &str) -> String {
        self.0.url(ws_base)
    }

    /// See [`SessionOf::handle_connected`].
    pub fn handle_connected(&mut self, now_ms: i64, sink: &mut dyn Sink) {
        self.0.handle_connected(now_ms, sink)
    }

    /// See [`SessionOf::handle_disconnected`].
    pub fn handle_disconnected(&mut self, sink: &mut dyn Sink) {
        self.0.handle_disconnected(sink)
    }

    /// See [`SessionOf::handle_relisted`].
    pub fn handle_relisted(&mut self, book: BookId, now_ms: i64, sink: &mut dyn Sink) {
        self.0.handle_relisted(book, now_ms, sink)
    }

    /// See [`SessionOf::handle_text`].
    pub fn handle_text(&mut self, now_ms: i64, payload: &[u8], sink: &mut dyn Sink) {
        self.0.handle_text(now_ms, payload, sink)
    }

    /// See [`SessionOf::handle_alive`].
    pub fn handle_alive(&mut self, now_ms: i64) {
        self.0.handle_alive(now_ms)
    }

    /// See [`SessionOf::handle_timeout`].
    pub fn handle_timeout(&mut self, now_ms: i64, sink: &mut dyn Sink) {
        self.0.handle_timeout(now_ms, sink)
    }

    /// See [`SessionOf::handle_snapshot`].
    pub fn handle_snapshot(&mut self, book: BookId, body: &[u8], now_ms: i64, sink: &mut dyn Sink) {
        self.0.handle_snapshot(book, body, now_ms, sink)
    }

    /// See [`SessionOf::handle_snapshot_failed`].
    pub fn handle_snapshot_failed(&mut self, book: BookId, now_ms: i64) {
        self.0.handle_snapshot_failed(book, now_ms)
    }

    /// See [`SessionOf::poll_event`].
    pub fn poll_event(&mut self, now_ms: i64) -> Option<Event> {
        self.0.poll_event(now_ms)
    }

    /// See [`SessionOf::poll_reconnect`].
    pub fn poll_reconnect(&self, now_ms: i64) -> Option<Reconnect> {
        self.0.poll_reconnect(now_ms)
    }

    /// See [`SessionOf::poll_transmit`].
    pub fn poll_transmit(&mut self, now_ms: i64) -> Option<Transmit> {
        self.0.poll_transmit(now_ms)
    }

    /// See [`SessionOf::poll_timeout`].
    pub fn poll_timeout(&self) -> i64 {
        self.0.poll_timeout()
    }

    /// Least time between two control messages on this venue.
    pub fn control_gap_ms(&self) -> i64 {
        self.0.control_gap_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Protocol;
    use crate::{binance, bitget, bybit, okx};
    use rampart_engine::book::Book;
    use rampart_engine::Tick;

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

    /// A session of `n` books on venue `P`, connected at `t0`, with its subscriptions queued.
    fn session<P: Protocol>(n: usize, t0: i64) -> (SessionOf<P>, Books) {
        let ids: Vec<BookId> = (0..n as u32).map(BookId).collect();
        let natives = (0..n).map(|i| format!("P{i}-USDT")).collect();
        let mut s = SessionOf::<P>::new(ids, natives, true);
        let mut books = Books((0..n).map(|_| Book::new(16)).collect());
        s.handle_connected(t0, &mut books);
        (s, books)
    }

    /// Takes every control message, each at the first time it may go; returns the times.
    fn drain<P: Protocol>(s: &mut SessionOf<P>, from: i64) -> Vec<i64> {
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
        let (mut s, _) = session::<okx::Okx>(25, 1_000);
        assert!(matches!(s.poll_transmit(1_000), Some(Transmit::Control(_))));
        assert_eq!(s.poll_transmit(1_050), None, "not before the gap");
        assert_eq!(s.poll_timeout(), 1_100, "the I/O task sleeps until the next one may go");
        assert_eq!(drain(&mut s, 1_050), [1_100, 1_200]);
        let (mut s, _) = session::<bitget::Bitget>(300, 0);
        let times = drain(&mut s, 0);
        assert!(times.len() >= 2, "{times:?}");
        assert!(times.windows(2).all(|w| w[1] - w[0] == 150), "Bitget: 150 ms apart: {times:?}");
    }

    #[test]
    fn keepalives_follow_each_venue_rule() {
        let (mut s, _) = session::<bybit::Bybit>(1, 0);
        drain(&mut s, 0);
        assert_eq!(s.poll_transmit(19_999), None);
        assert_eq!(s.poll_transmit(20_000), Some(Transmit::Ping(bybit::PING)), "Bybit: every 20 s");
        assert_eq!(s.poll_transmit(20_001), None);
        // OKX: after 20 s without anything received.
        let (mut s, _) = session::<okx::Okx>(1, 0);
        drain(&mut s, 0);
        s.handle_alive(15_000);
        assert_eq!(s.poll_transmit(34_999), None, "something arrived at 15 s");
        assert_eq!(s.poll_timeout(), 35_000);
        assert_eq!(s.poll_transmit(35_000), Some(Transmit::Ping(okx::PING)));
        let (mut s, _) = session::<bitget::Bitget>(1, 0);
        drain(&mut s, 0);
        assert_eq!(s.poll_transmit(25_000), Some(Transmit::Ping(bitget::PING)), "Bitget: every 25 s");
        // Binance: the server pings, the client never does.
        let (mut s, _) = session::<binance::Binance>(1, 0);
        assert_eq!(s.poll_transmit(10 * 3_600_000), None);
    }

    fn idle_limit_is<P: Protocol>(limit: i64) {
        let venue = P::VENUE;
        let (mut s, _) = session::<P>(1, 0);
        assert_eq!(s.poll_reconnect(limit), None, "{venue}");
        assert_eq!(s.poll_event(limit + 1), Some(Event::Reconnect(Reconnect::Idle)), "{venue}");
        s.handle_alive(limit);
        assert_eq!(s.poll_reconnect(limit + 1), None, "{venue}: a frame arrived");
        assert!(s.poll_timeout() <= 2 * limit + 1, "{venue}: the I/O task wakes to notice");
    }

    #[test]
    fn silence_past_the_idle_limit_reconnects() {
        idle_limit_is::<binance::Binance>(60_000);
        idle_limit_is::<bybit::Bybit>(60_000);
        idle_limit_is::<okx::Okx>(40_000);
        idle_limit_is::<bitget::Bitget>(75_000);
    }

    #[test]
    fn connections_are_renewed_before_the_24_h_cut() {
        let (mut s, _) = session::<binance::Binance>(1, 0);
        let mut now = 0;
        while now < CONNECTION_LIFETIME_MS {
            now += 30_000;
            s.handle_alive(now);
            assert_eq!(s.poll_reconnect(now), None, "at {now}");
        }
        s.handle_alive(CONNECTION_LIFETIME_MS + 1);
        assert_eq!(s.poll_reconnect(CONNECTION_LIFETIME_MS + 1), Some(Reconnect::Renewal));
        const { assert!(CONNECTION_LIFETIME_MS < 24 * 3_600_000) };
    }

    #[test]
    fn a_broken_book_is_rebuilt_with_a_doubling_backoff() {
        let (mut s, mut books) = session::<binance::Binance>(1, 0);
        // The first break is rebuilt at once; each further one waits twice as long, to 30 s.
        let mut now = 10_000;
        let mut waits = Vec::new();
        for _ in 0..8 {
            s.handle_snapshot_failed(BookId(0), now);
            let due = s.rebuild[0].due_ms;
            s.handle_alive(due - 1);
            s.handle_timeout(due - 1, &mut books);
            let early = s.poll_event(due - 1);
            assert!(due == now || early.is_none(), "not before it is due");
            s.handle_timeout(due, &mut books);
            let event = if due == now { early.or_else(|| s.poll_event(due)) } else { s.poll_event(due) };
            assert_eq!(event, Some(Event::SnapshotWanted(BookId(0))));
            waits.push(due - now);
            now = due + 1;
        }
        assert_eq!(waits, [0, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
        // A quiet minute resets it.
        s.handle_snapshot_failed(BookId(0), now + RESYNC_BACKOFF_RESET_MS + 1);
        assert_eq!(s.rebuild[0].due_ms, now + RESYNC_BACKOFF_RESET_MS + 1);
    }

    #[test]
    fn a_spent_subscription_budget_renews_the_connection() {
        // OKX allows 480 subscription requests an hour: each rebuild costs two.
        let (mut s, mut books) = session::<okx::Okx>(10, 0);
        drain(&mut s, 0);
        let mut now = 0;
        let mut rounds = 0;
        while s.poll_reconnect(now).is_none() && rounds < 100 {
            rounds += 1;
            now += 31_000;
            for k in 0..10 {
                s.handle_alive(now);
                s.handle_relisted(BookId(k), now, &mut books);
            }
            s.handle_timeout(now + 30_000, &mut books);
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
        let (mut s, mut books) = session::<bybit::Bybit>(1, 0);
        drain(&mut s, 0);
        s.handle_text(100, &bybit_book("snapshot", 10), &mut books);
        assert!(s.live[0]);
        // A gap: stale, a rebuild due at once; the venue resets the book before it starts.
        s.handle_text(200, &bybit_book("delta", 12), &mut books);
        assert!(!s.live[0] && s.rebuild[0].wanted);
        s.handle_text(210, &bybit_book("snapshot", 1), &mut books);
        assert!(s.live[0] && !s.rebuild[0].wanted, "in sync from the reset: no rebuild");
        s.handle_timeout(220, &mut books);
        assert!(s.control.is_empty());
        // A gap again; this time the resubscription is queued, then the venue resets the book
        // before the unsubscribe goes: the resubscription is dropped whole.
        s.handle_text(300, &bybit_book("delta", 5), &mut books);
        let due = s.rebuild[0].due_ms;
        s.handle_timeout(due, &mut books);
        assert_eq!(s.control.len(), RESUBSCRIBE_MESSAGES);
        s.handle_text(due + 10, &bybit_book("snapshot", 1), &mut books);
        assert!(s.live[0] && s.control.is_empty());
        // Once the unsubscribe has gone, the subscribe must follow (or the book would stay
        // unsubscribed), and the book is stale until the subscribe's snapshot.
        s.handle_text(due + 20, &bybit_book("delta", 7), &mut books);
        let due = s.rebuild[0].due_ms;
        s.handle_timeout(due, &mut books);
        assert!(
            matches!(s.poll_transmit(due + 1_000), Some(Transmit::Control(m)) if m.windows(11).any(|w| w == b"unsubscribe"))
        );
        assert!(!s.live[0]);
        s.handle_text(due + 1_010, &bybit_book("snapshot", 1), &mut books);
        assert_eq!(s.control.len(), 1, "the subscribe still goes");
    }

    #[test]
    fn a_new_connection_starts_the_rebuild_backoff_over() {
        let (mut s, mut books) = session::<binance::Binance>(1, 0);
        let mut now = 1_000;
        for _ in 0..6 {
            s.handle_snapshot_failed(BookId(0), now);
            now = s.rebuild[0].due_ms;
        }
        assert!(s.rebuild[0].backoff_ms >= 16_000, "{:?}", s.rebuild[0]);
        s.handle_disconnected(&mut books);
        s.handle_connected(now + 100, &mut books);
        s.handle_snapshot_failed(BookId(0), now + 200);
        assert_eq!(s.rebuild[0].due_ms, now + 200, "the first snapshot on a new connection is asked at once");
    }
}
