//! One open stream (`decisions.md` §12) as a value: [`Connection`] holds where its messages go
//! ([`Out`]: a WebSocket or an event stream's body), its channels' state
//! (`crate::stream::session::Session`) and its place in the fan-out with its inbox reads
//! ([`Ctx`]); its methods answer the client's ops, send each subscription's first messages,
//! write what the fan-out queued and look at the board, the heartbeat and (while catching up)
//! the inbox. `stream_api` opens one, races it against its admission and ends it.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use hyper::StatusCode;

use super::answer::ApiError;
use super::stream_admission::{cursor_refusal, Admission, CLOSE_UNAUTHORISED, KEY_REVOKED, SESSION_ENDED};
use super::stream_fanout::{Joined, StreamCore};
use crate::stream::fanout::{Item, Target, VENUE_WIDE};
use crate::stream::ops::{self, Channel, Op};
use crate::stream::session::{Session, BACKLOG_MAX};

/// How often a connection's task looks at the board, its heartbeat and (while catching up) the
/// inbox; market changes and `alerts` entries come from the fan-out when they happen.
pub const TICK: Duration = Duration::from_millis(100);
/// How often `alerts` reads the inbox even when this process's writer committed nothing.
pub const ALERTS_RESCAN_MS: i64 = 1_000;
/// How long one write of an answer or an `alerts` entry may wait for the client to read.
pub const SEND_WAIT: Duration = Duration::from_secs(5);
/// How long a batch of (conflated) market messages may wait for the client to read.
pub const MARKET_SEND_WAIT: Duration = Duration::from_secs(30);
/// Inbox entries read per look.
pub(super) const READ_MAX: u32 = 100;

pub(super) type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Why a connection ends.
pub(super) enum End {
    /// The client closed or went away.
    Gone,
    /// Close with this code and reason.
    Close(CloseCode, &'static str),
}

/// One open stream: where its messages go, its channels' state, and its place in the fan-out.
pub(super) struct Connection {
    out: Out,
    session: Session,
    cx: Ctx,
}

impl Connection {
    /// A connection over `out` with `session`'s state and `cx`'s place.
    pub(super) fn new(out: Out, session: Session, cx: Ctx) -> Connection {
        Connection { out, session, cx }
    }

    /// Ends it as `end` says (its place in the fan-out given back first).
    pub(super) async fn end(self, end: End, now_ms: i64) {
        let Connection { mut out, cx, .. } = self;
        drop(cx);
        out.end(end, now_ms).await;
    }

    /// The connection's first messages, then its loop: the client's ops, the fan-out's batches
    /// and the periodic look; returns why it ends.
    pub(super) async fn serve(
        &mut self,
        front: &Rc<StreamCore>,
        (initial, since): (Vec<Rc<Target>>, Option<i64>),
    ) -> End {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let now_ms = front.clock.now_ms();
        for t in &initial {
            if let Err(end) = self.first_message(front, t, since, now_ms).await {
                return end;
            }
        }
        loop {
            let step = tokio::select! {
                frame = self.out.next_frame() => match frame {
                    Some(Ok(Message::Text(t))) => self.answer_op(front, t.as_bytes()).await,
                    Some(Ok(Message::Binary(b))) => self.answer_op(front, &b).await,
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Ok(()),
                    Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(_))) => Err(End::Close(CloseCode::Size, "message too long")),
                    Some(Ok(Message::Close(_)) | Err(_)) | None => Err(End::Gone),
                },
                _ = self.cx.joined.woken.notified() => self.write_market(front).await,
                _ = tick.tick() => self.push_changes(front).await,
                _ = front.writer_stats.inbox_written.notified(), if self.cx.looked.catching_up && self.session.alerts_after().is_some() => {
                    self.push_alerts(front).await
                }
            };
            if let Err(end) = step {
                return end;
            }
        }
    }

    /// Parses and answers one client frame.
    async fn answer_op(&mut self, front: &Rc<StreamCore>, frame: &[u8]) -> Result<(), End> {
        let Connection { out, session: s, cx } = self;
        let now_ms = front.clock.now_ms();
        let op = match ops::parse(frame) {
            Ok(op) => op,
            Err(e) => return refuse(out, s, e.id, &e.message, now_ms).await,
        };
        match op {
            Op::Ping { id } => out.send(s.ack(id, now_ms), None).await,
            Op::Unsubscribe { id, channels } => {
                for t in s.unsubscribe(&channels) {
                    let mut hub = front.fanout.borrow_mut();
                    hub.fanout.unsubscribe(cx.joined.conn, &t);
                    if t.channel == Channel::Alerts {
                        hub.fanout.unsubscribe_alerts(cx.joined.conn);
                    }
                }
                out.send(s.ack(id, now_ms), None).await
            }
            Op::Subscribe { id, channels, since, min_usd } => {
                if let Some(unknown) = channels.iter().find_map(|c| front.books.unknown_channel(c)) {
                    return refuse(out, s, Some(id), &unknown, now_ms).await;
                }
                if let (Some(after), true) = (since, channels.contains(&Channel::Alerts)) {
                    if let Err(e) = front.check_cursor(cx.account, "since", after).await {
                        return refuse(out, s, Some(id), &e.message, now_ms).await;
                    }
                }
                let fresh = match s.subscribe(&channels, min_usd) {
                    Ok(f) => f,
                    Err(e) => return refuse(out, s, Some(id), &e.to_string(), now_ms).await,
                };
                out.send(s.ack(id, now_ms), None).await?;
                for t in &fresh {
                    self.first_message(front, t, since, now_ms).await?;
                }
                Ok(())
            }
        }
    }

    /// A new subscription's first message: for a market channel, the fan-out follows it and
    /// queues a snapshot of each of its books (written with the connection's next batch); for
    /// `alerts`, the entries after `since` (oldest first, at most `BACKLOG_MAX`), or nothing but
    /// the cursor at the newest.
    async fn first_message(
        &mut self,
        front: &Rc<StreamCore>,
        t: &Rc<Target>,
        since: Option<i64>,
        now_ms: i64,
    ) -> Result<(), End> {
        let Connection { out, session: s, cx } = self;
        let (joined, account) = (&cx.joined, cx.account);
        match &t.channel {
            Channel::Board { .. } => {
                for m in front.board_look(s, now_ms) {
                    out.send(m, None).await?;
                }
                Ok(())
            }
            Channel::Levels { .. }
            | Channel::Walls { .. }
            | Channel::Price { .. }
            | Channel::Liquidations { .. }
            | Channel::Perp { .. } => {
                let books = front.books.books_of(&t.channel);
                let mut hub = front.fanout.borrow_mut();
                hub.fanout.subscribe(joined.conn, t, &books);
                front.look_books(&mut hub.fanout, &books, now_ms);
                joined.woken.notify_one();
                Ok(())
            }
            Channel::Alerts => {
                // Followed first, so an entry written from now on is handed to it; the reads
                // below cover what was written before.
                front.fanout.borrow_mut().fanout.subscribe_alerts(joined.conn, account);
                front.start_inbox_reader();
                let reader_ready = front.fanout.borrow().inbox_last.is_some();
                let Some(after) = since else {
                    let last = front.storage.run(move |store| store.inbox_last_id(account)).await;
                    s.start_alerts(last.map_err(|_| End::Close(CloseCode::Again, "storage unavailable; retry later"))?);
                    cx.looked.catching_up = !reader_ready;
                    return Ok(());
                };
                s.start_alerts(after);
                let rows = front.storage.run(move |store| store.inbox_after(account, after, BACKLOG_MAX)).await;
                let rows = rows.map_err(|_| End::Close(CloseCode::Again, "storage unavailable; retry later"))?;
                still_standing(front, cx)?;
                for r in &rows {
                    if let Some(m) = s.alert_entry(r.id, &r.kind, &r.body, now_ms) {
                        out.send(m, Some(r.id)).await?;
                    }
                }
                cx.looked.catching_up = !reader_ready || rows.len() == BACKLOG_MAX as usize;
                Ok(())
            }
        }
    }

    /// Writes what the fan-out queued for the connection, in one batch (a snapshot marker
    /// becomes the book's newest state now; an `alerts` entry waits while the connection
    /// catches up from storage, which reads it then). A connection whose unsent `alerts` entries
    /// passed the bound is closed 4008.
    async fn write_market(&mut self, front: &Rc<StreamCore>) -> Result<(), End> {
        let Connection { out, session: s, cx } = self;
        let now_ms = front.clock.now_ms();
        still_standing(front, cx)?;
        let frames: Vec<(String, Option<i64>)> = {
            let mut hub = front.fanout.borrow_mut();
            if hub.fanout.overflowed(cx.joined.conn) {
                return Err(End::Close(CloseCode::from(4008), "slow consumer"));
            }
            let items = hub.fanout.take(cx.joined.conn);
            let registry = front.books.shared.registry();
            items
                .into_iter()
                .filter_map(|item| match item {
                    Item::Event { target, kind, data, .. } => {
                        s.message(&target, kind, &data, now_ms).map(|m| (m, None))
                    }
                    Item::Snapshot { target, book } => {
                        // A venue's `liquidations` snapshot names each pair itself.
                        let symbol = if book == VENUE_WIDE { "*" } else { registry.get(book).symbol.as_str() };
                        let data = hub.fanout.snapshot(&target, book, symbol)?;
                        s.message(&target, "snapshot", &data, now_ms).map(|m| (m, None))
                    }
                    Item::Alert { .. } if cx.looked.catching_up => None,
                    Item::Alert { id, kind, body } => s.alert_entry(id, &kind, &body, now_ms).map(|m| (m, Some(id))),
                })
                .collect()
        };
        out.send_market(frames).await
    }

    /// What changed since the last look: the board, inbox entries while catching up, a
    /// heartbeat.
    async fn push_changes(&mut self, front: &Rc<StreamCore>) -> Result<(), End> {
        let now_ms = front.clock.now_ms();
        for m in front.board_look(&mut self.session, now_ms) {
            self.out.send(m, None).await?;
        }
        if self.cx.looked.catching_up {
            self.push_alerts(front).await?;
        }
        match self.session.heartbeat(now_ms) {
            Some(m) => self.out.send(m, None).await,
            None => Ok(()),
        }
    }

    /// While `alerts` catches up (a backlog longer than `BACKLOG_MAX`, or subscribed before the
    /// inbox reader had started): the account's entries after the cursor from storage, read
    /// when the writer's count of inbox commits moved or every [`ALERTS_RESCAN_MS`]. A read
    /// that starts once the inbox reader runs and finds fewer than [`READ_MAX`] ends the
    /// catching up: every later entry comes from the reader.
    async fn push_alerts(&mut self, front: &Rc<StreamCore>) -> Result<(), End> {
        let Connection { out, session: s, cx } = self;
        let now_ms = front.clock.now_ms();
        let Some(after) = s.alerts_after() else { return Ok(()) };
        still_standing(front, cx)?;
        let looked = &mut cx.looked;
        let writes = front.writer_stats.inbox_writes.load(Ordering::Acquire);
        if writes == looked.inbox_writes && now_ms - looked.inbox_ms < ALERTS_RESCAN_MS {
            return Ok(());
        }
        looked.inbox_writes = writes;
        looked.inbox_ms = now_ms;
        let reader_ready = front.fanout.borrow().inbox_last.is_some();
        let account = cx.account;
        // A failed read is tried again at the next look.
        let Ok(rows) = front.storage.run(move |store| store.inbox_after(account, after, READ_MAX)).await else {
            return Ok(());
        };
        if rows.len() == READ_MAX as usize {
            looked.inbox_writes = u64::MAX;
        } else if reader_ready {
            looked.catching_up = false;
        }
        for r in &rows {
            if let Some(m) = s.alert_entry(r.id, &r.kind, &r.body, now_ms) {
                out.send(m, Some(r.id)).await?;
            }
        }
        Ok(())
    }
}

/// A connection's place in the fan-out, its account, the key it stands on and its inbox reads.
pub(super) struct Ctx {
    joined: Joined,
    account: i64,
    /// What admitted it: the key's hash, and a site page's session id's hash.
    admitted: ([u8; 32], Option<[u8; 32]>),
    looked: Looks,
}

/// When a connection last read the inbox, the writer's count it saw, and whether its `alerts`
/// is catching up from storage.
struct Looks {
    inbox_writes: u64,
    inbox_ms: i64,
    catching_up: bool,
}

/// Where a connection's messages go: a WebSocket, or the body of a server-sent-events answer.
pub(super) enum Out {
    /// Text frames.
    Ws(Box<Ws>),
    /// Events (`id:` for an `alerts` entry, `data:` the message), read by [`EventBody`].
    Sse(tokio::sync::mpsc::Sender<Bytes>),
}

impl Ctx {
    /// A connection's context: its place in the fan-out, its account and what admitted it; no
    /// inbox read yet.
    pub(super) fn new(joined: Joined, account: i64, admission: &Admission) -> Ctx {
        let session = match admission {
            Admission::Session { cookie, .. } => Some(super::session::hash(cookie)),
            Admission::Key { .. } => None,
        };
        let looked = Looks { inbox_writes: u64::MAX, inbox_ms: 0, catching_up: false };
        Ctx { joined, account, admitted: (admission.key_hash(), session), looked }
    }
}

impl Out {
    /// Sends one message (`event_id`: the inbox id of an `alerts` entry, for an SSE client's
    /// `Last-Event-ID`); a client that does not take it within [`SEND_WAIT`] ends the connection
    /// (a WebSocket is closed 4008 "slow consumer").
    async fn send(&mut self, text: String, event_id: Option<i64>) -> Result<(), End> {
        match self {
            Out::Ws(ws) => match tokio::time::timeout(SEND_WAIT, ws.send(Message::text(text))).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) => Err(End::Gone),
                Err(_) => Err(End::Close(CloseCode::from(4008), "slow consumer")),
            },
            Out::Sse(tx) => {
                let id = event_id.map(|i| format!("id: {i}\n")).unwrap_or_default();
                let event = Bytes::from(format!("{id}data: {text}\n\n"));
                match tokio::time::timeout(SEND_WAIT, tx.send(event)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(_)) | Err(_) => Err(End::Gone),
                }
            }
        }
    }

    /// Sends a batch of market messages. A market channel is conflated upstream (the fan-out's
    /// outbox), so a slow client only delays its own batches: the batch may wait
    /// [`MARKET_SEND_WAIT`] for the client to read before the connection is closed 4008.
    async fn send_market(&mut self, frames: Vec<(String, Option<i64>)>) -> Result<(), End> {
        match self {
            Out::Ws(ws) => {
                let batch = async {
                    for (f, _) in frames {
                        ws.feed(Message::text(f)).await?;
                    }
                    ws.flush().await
                };
                match tokio::time::timeout(MARKET_SEND_WAIT, batch).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(_)) => Err(End::Gone),
                    Err(_) => Err(End::Close(CloseCode::from(4008), "slow consumer")),
                }
            }
            Out::Sse(tx) => {
                for (f, event_id) in frames {
                    let id = event_id.map(|i| format!("id: {i}\n")).unwrap_or_default();
                    let event = Bytes::from(format!("{id}data: {f}\n\n"));
                    match tokio::time::timeout(MARKET_SEND_WAIT, tx.send(event)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) | Err(_) => return Err(End::Gone),
                    }
                }
                Ok(())
            }
        }
    }

    /// Ends the connection as `end` says: a WebSocket closed with the code and reason (the
    /// frame waits [`SEND_WAIT`] at most); an event stream's last event `{"type":"close",
    /// "code","reason","ts"}` when there is room for it, then its end.
    async fn end(&mut self, end: End, now_ms: i64) {
        let End::Close(code, reason) = end else { return };
        match self {
            Out::Ws(ws) => {
                let frame = CloseFrame { code, reason: reason.into() };
                let _ = tokio::time::timeout(SEND_WAIT, ws.as_mut().close(Some(frame))).await;
            }
            Out::Sse(tx) => {
                let code = u16::from(code);
                debug_assert!(!reason.contains(['"', '\\']), "a close reason is plain text");
                let last =
                    format!("data: {{\"type\":\"close\",\"code\":{code},\"reason\":\"{reason}\",\"ts\":{now_ms}}}\n\n");
                let _ = tx.try_send(Bytes::from(last));
            }
        }
    }

    /// The client's next frame (an SSE client sends none: this waits until it goes).
    async fn next_frame(&mut self) -> Option<Result<Message, tokio_tungstenite::tungstenite::Error>> {
        match self {
            Out::Ws(ws) => ws.next().await,
            Out::Sse(tx) => {
                tx.closed().await;
                None
            }
        }
    }
}

/// Ends the connection (closed [`CLOSE_UNAUTHORISED`]) when the key table already knows its key
/// revoked, or this process saw its session end: checked before each batch, so nothing is
/// written after this process knew, even between two looks of `Gate::admission_ends`.
fn still_standing(front: &StreamCore, cx: &Ctx) -> Result<(), End> {
    let (key, session) = &cx.admitted;
    if front.gate.key_revoked_now(key) {
        return Err(End::Close(CloseCode::from(CLOSE_UNAUTHORISED), KEY_REVOKED));
    }
    match session.is_some_and(|h| front.gate.session_ended_now(&h)) {
        true => Err(End::Close(CloseCode::from(CLOSE_UNAUTHORISED), SESSION_ENDED)),
        false => Ok(()),
    }
}

/// Sends an error answer; past ten in a minute, closes 1008.
async fn refuse(out: &mut Out, s: &mut Session, id: Option<u64>, message: &str, now_ms: i64) -> Result<(), End> {
    let r = s.error(id, message, now_ms);
    out.send(r.frame, None).await?;
    if r.close {
        return Err(End::Close(CloseCode::Policy, "too many errors"));
    }
    Ok(())
}

impl StreamCore {
    /// The board channels' next messages (a snapshot on the first look, then each new build).
    pub(super) fn board_look(&self, s: &mut Session, now_ms: i64) -> Vec<String> {
        let channels = s.board_channels();
        if channels.is_empty() {
            return Vec::new();
        }
        let board = self.board.load();
        channels
            .iter()
            .filter_map(|c| match c {
                Channel::Board { venue } => s.board(c, board.ts_ms, &board.venue(*venue).numbers, now_ms),
                _ => None,
            })
            .collect()
    }

    /// Refuses (422, naming the newest id) an `alerts` resume point beyond the account's newest
    /// inbox entry: it would mute the channel until the inbox's sequence passed it; and one below
    /// what retention has pruned (entries after it may be gone).
    pub(super) async fn check_cursor(&self, account: i64, name: &str, since: i64) -> Result<(), ApiError> {
        let (newest, pruned) =
            self.storage.run(move |store| Ok((store.inbox_last_id(account)?, store.inbox_pruned_through()?))).await?;
        match cursor_refusal(name, since, newest, pruned) {
            Some(message) => Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)),
            None => Ok(()),
        }
    }
}
