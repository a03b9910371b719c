//! `GET /v1/stream` (`decisions.md` §12): a WebSocket on the API port, or server-sent events
//! for a request with `Accept: text/event-stream` (channels, `since` and `minUsd` in the query,
//! `Last-Event-ID` resuming `alerts`). The request is admitted exactly like every `/v1` request
//! (key, plan, burst and quota: 401/403/429 before any upgrade) and then against the key's open
//! streams (`Plan::stream_connections`: 429 with `Retry-After`). A request that is neither an
//! upgrade nor asks for events is answered 426.
//!
//! One task per connection (on the front's thread) reads the client's ops
//! (`crate::stream::ops`), answers each, and writes what the fan-out queued for it
//! (`super::stream_fanout`: one look per followed book every 2 ms, each change encoded once,
//! `crate::stream::fanout`; and the account's new inbox entries for `alerts`, read once for every
//! connection by the inbox reader at each writer commit) when woken; every [`TICK`] it sends the
//! board and a heartbeat after a second of silence (`crate::stream::session`). An `alerts`
//! subscription's backlog (`since`) is read from storage by the connection itself, and so is
//! everything after it while it catches up (a backlog of `BACKLOG_MAX`, or a subscribe before the
//! inbox reader had started: read when the writer's count of inbox commits moved or every
//! [`ALERTS_RESCAN_MS`]).
//!
//! Bounds (`crate::stream::Bounds`, from the configuration's `[streams]`): a client frame of at
//! most `ops::FRAME_BYTES_MAX` bytes (longer: closed 1009); subscriptions per connection (past
//! them a subscribe is refused whole); `unsent_bytes_max` bytes waiting for a client: queued
//! market events past their share are conflated (a snapshot of each book replaces them), so a
//! client that stops reading holds no more than the bound and delays nobody else; queued
//! `alerts` entries past the same share, a batch that cannot be written within
//! [`MARKET_SEND_WAIT`], and an answer not taken within [`SEND_WAIT`], close the connection 4008
//! ("slow consumer"): an alert entry is then not lost, the client resumes with `since` from the
//! last `id` it read; ten error answers in a minute close it 1008.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ACCEPT, CACHE_CONTROL, CONNECTION, CONTENT_TYPE, COOKIE, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY,
    SEC_WEBSOCKET_VERSION, UPGRADE,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role as WsRole, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::site::events::EventBody;
use super::site::session::cookie_id;
use super::stream_admission::{cursor_refusal, Admission, CLOSE_UNAUTHORISED, KEY_REVOKED};
use super::stream_fanout::Joined;
use super::{error, method_not_allowed, ApiError, Front, Resp};
use crate::api::limit::Usage;
use crate::stream::fanout::{Item, Target};
use crate::stream::ops::{self, Channel, Op};
use crate::stream::session::{Session, BACKLOG_MAX};
use hyper::http::request::Parts;
use rampart_engine::BookId;
use rampart_store::store::{hash_key, KeyRow};

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
const READ_MAX: u32 = 100;
/// A connection's read buffer (a frame longer than it is still read, in more than one go).
const WS_READ_BUFFER_BYTES: usize = 4 << 10;
/// Server-sent events waiting for the client's socket at most (a message waits [`SEND_WAIT`]
/// for room, then the stream ends and the client reconnects with `Last-Event-ID`).
pub const EVENTS_QUEUED_MAX: usize = 64;

/// Open streams per key.
#[derive(Debug, Default)]
pub struct OpenStreams {
    by_key: HashMap<i64, u32>,
}

impl OpenStreams {
    fn open(&mut self, key: i64, max: u32) -> bool {
        let n = self.by_key.entry(key).or_insert(0);
        if *n >= max {
            return false;
        }
        *n += 1;
        true
    }

    fn close(&mut self, key: i64) {
        if let Some(n) = self.by_key.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.by_key.remove(&key);
            }
        }
    }
}

/// A key's place among its open streams, given back when the connection ends.
struct KeyPlace {
    open: Rc<RefCell<OpenStreams>>,
    key: i64,
}

impl Drop for KeyPlace {
    fn drop(&mut self) {
        self.open.borrow_mut().close(self.key);
    }
}

/// A stream's place, held by its task: among its key's streams, or among the site's.
enum Place {
    Key { _held: KeyPlace },
    Site { _held: super::site::events::Place },
}

/// Whether the request asks for server-sent events (`Accept: text/event-stream`).
fn wants_events(headers: &hyper::HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().to_ascii_lowercase().starts_with("text/event-stream")))
}

/// Whether the request asks for a WebSocket (RFC 6455 §4.2.1); its `Sec-WebSocket-Key`.
fn websocket_key(req: &Request<Incoming>) -> Option<HeaderValue> {
    let has = |name, token: &str| {
        req.headers()
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    let version = req.headers().get(SEC_WEBSOCKET_VERSION).is_some_and(|v| v == "13");
    (has(CONNECTION, "upgrade") && has(UPGRADE, "websocket") && version)
        .then(|| req.headers().get(SEC_WEBSOCKET_KEY).cloned())
        .flatten()
}

impl Front {
    /// Answers `GET /v1/stream` and counts the answer (the access log line says the stream was
    /// asked for; its status is in `/metrics`).
    pub(super) async fn stream(
        self: &Rc<Self>,
        req: Request<Incoming>,
        peer: IpAddr,
    ) -> Response<Either<Full<Bytes>, EventBody>> {
        let started = std::time::Instant::now();
        let method = req.method().clone();
        let resp = self.stream_answer(req, peer).await;
        self.observe(&method, "/v1/stream", resp.status(), started);
        resp
    }

    /// 101 and the connection's task, the event stream, or the refusal.
    async fn stream_answer(
        self: &Rc<Self>,
        mut req: Request<Incoming>,
        peer: IpAddr,
    ) -> Response<Either<Full<Bytes>, EventBody>> {
        if req.method() != Method::GET {
            return method_not_allowed("GET").map(Either::Left);
        }
        let now_ms = self.clock.now_ms();
        let (parts, body) = req.into_parts();
        let admitted = self.admit(&parts, peer, now_ms).await;
        req = Request::from_parts(parts, body);
        let (account, usage) = match admitted {
            Ok(k) => k,
            Err(e) => return e.into_response().map(Either::Left),
        };
        let Some(token) = super::bearer_token(req.headers()) else {
            return ApiError::new(StatusCode::UNAUTHORIZED, "invalid API key").into_response().map(Either::Left);
        };
        let admission = Admission::Key { hash: hash_key(token) };
        let query = req.uri().query();
        let numbers = ops::query_numbers(
            super::query_param(query, "since").as_deref(),
            super::query_param(query, "minUsd").as_deref(),
        );
        if let Err(e) = numbers {
            let mut r = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.message).into_response();
            super::with_usage(&mut r, usage);
            return r.map(Either::Left);
        }
        if wants_events(req.headers()) {
            let (parts, _) = req.into_parts();
            let mut r = match self.stream_events(&parts, &account, admission).await {
                Ok(r) => r.map(Either::Right),
                Err(e) => e.into_response().map(Either::Left),
            };
            super::with_usage(&mut r, usage);
            return r;
        }
        self.upgrade(req, &account, usage, admission).map(Either::Left)
    }

    /// The WebSocket upgrade: 101 and the connection's task, or 426 / 429.
    fn upgrade(
        self: &Rc<Self>,
        mut req: Request<Incoming>,
        account: &KeyRow,
        usage: Usage,
        admission: Admission,
    ) -> Resp {
        let Some(key) = websocket_key(&req) else {
            let mut r = error(
                StatusCode::UPGRADE_REQUIRED,
                "GET /v1/stream is a WebSocket: send Connection: Upgrade, Upgrade: websocket and Sec-WebSocket-Version: 13 with a Sec-WebSocket-Key",
            );
            r.headers_mut().insert(UPGRADE, HeaderValue::from_static("websocket"));
            super::with_usage(&mut r, usage);
            return r;
        };
        let place = match self.take_place(account, &admission) {
            Ok(p) => p,
            Err(refused) => {
                let mut r = refused.into_response();
                super::with_usage(&mut r, usage);
                return r;
            }
        };
        let upgrade = hyper::upgrade::on(&mut req);
        let front = self.clone();
        let account_id = account.account_id;
        tokio::task::spawn_local(async move {
            let _place = place;
            let Ok(upgraded) = upgrade.await else { return };
            // Small buffers: a stream's client sends a few small ops, and each message is
            // written out at once (the default 128 KiB for each would be most of an idle
            // connection's memory).
            let config = WebSocketConfig::default()
                .read_buffer_size(WS_READ_BUFFER_BYTES)
                .write_buffer_size(0)
                .max_message_size(Some(ops::FRAME_BYTES_MAX))
                .max_frame_size(Some(ops::FRAME_BYTES_MAX))
                .max_write_buffer_size(front.stream_bounds.socket_bytes_max());
            let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), WsRole::Server, Some(config)).await;
            let session = Session::new(front.clock.now_ms(), front.stream_bounds.subscriptions_max);
            front.run_stream(Out::Ws(Box::new(ws)), session, account_id, (Vec::new(), None), admission).await;
        });
        let accept = derive_accept_key(key.as_bytes());
        let mut r = Resp::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let h = r.headers_mut();
        h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        if let Ok(v) = HeaderValue::from_str(&accept) {
            h.insert(SEC_WEBSOCKET_ACCEPT, v);
        }
        super::with_usage(&mut r, usage);
        r
    }
}

impl Front {
    /// A place for a stream `admission` admitted: among the key's open streams, at most its
    /// plan's `stream_connections`, or among the site's (per session and per account, apart
    /// from the key's); 429 with `Retry-After` at the bound.
    fn take_place(&self, key: &KeyRow, admission: &Admission) -> Result<Place, ApiError> {
        match admission {
            Admission::Key { .. } => {
                let max = self.plans.get(&key.plan).map_or(0, |p| p.stream_connections);
                if !self.streams.borrow_mut().open(key.id, max) {
                    let message = format!("at most {max} open streams per key on this plan; close one");
                    return Err(ApiError::too_many(message, 5));
                }
                Ok(Place::Key { _held: KeyPlace { open: self.streams.clone(), key: key.id } })
            }
            Admission::Session { cookie, account, .. } => {
                let session = super::site::session::hash(cookie);
                let held = super::site::events::Place::take(&self.site_streams, *account, session)?;
                Ok(Place::Site { _held: held })
            }
        }
    }

    /// Refuses (422, naming the newest id) an `alerts` resume point beyond the account's newest
    /// inbox entry: it would mute the channel until the inbox's sequence passed it.
    async fn check_cursor(&self, account: i64, name: &str, since: i64) -> Result<(), ApiError> {
        let newest = self.storage.run(move |store| store.inbox_last_id(account)).await?;
        match cursor_refusal(name, since, newest) {
            Some(message) => Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)),
            None => Ok(()),
        }
    }
}

impl Front {
    /// `GET /v1/stream?channels=…` as server-sent events: the channels, `since` (or the
    /// `Last-Event-ID` a reconnecting browser sends) and `minUsd` checked like a `subscribe`
    /// (422, 404 for an unknown pair), the key's open streams counted (429); then 200 and the
    /// stream's task, which sends each channel's first messages and then every change.
    async fn stream_events(
        self: &Rc<Self>,
        req: &Parts,
        account: &KeyRow,
        admission: Admission,
    ) -> Result<Response<EventBody>, ApiError> {
        let query = req.uri.query();
        let Some(channels) = super::query_param(query, "channels") else {
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "missing query parameter 'channels'"));
        };
        let last = req.headers.get("last-event-id").and_then(|v| super::site::session::last_event_id(v.as_bytes()));
        let since = last.map(|i| i.to_string()).or_else(|| super::query_param(query, "since"));
        let op = ops::from_query(&channels, since.as_deref(), super::query_param(query, "minUsd").as_deref())
            .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.message))?;
        let Op::Subscribe { channels, since, min_usd, .. } = op else {
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "missing query parameter 'channels'"));
        };
        if let Some(unknown) = channels.iter().find_map(|c| self.unknown_channel(c)) {
            return Err(ApiError::new(StatusCode::NOT_FOUND, unknown));
        }
        let now_ms = self.clock.now_ms();
        let mut session = Session::new(now_ms, self.stream_bounds.subscriptions_max);
        let targets = session
            .subscribe(&channels, min_usd)
            .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
        if let (Some(after), true) = (since, channels.contains(&Channel::Alerts)) {
            let name = if last.is_some() { "Last-Event-ID" } else { "since" };
            self.check_cursor(account.account_id, name, after).await?;
        }
        let place = self.take_place(account, &admission)?;
        let (tx, rx) = tokio::sync::mpsc::channel(EVENTS_QUEUED_MAX);
        let (front, account_id) = (self.clone(), account.account_id);
        tokio::task::spawn_local(async move {
            let _place = place;
            front.run_stream(Out::Sse(tx), session, account_id, (targets, since), admission).await;
        });
        let mut r = Response::new(EventBody::new(rx));
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        Ok(r)
    }
}

impl Front {
    /// `GET /site/v1/stream`: the event stream of the site's pages, with their session (its key's
    /// plan and open streams, the site's own request budget); refusals as the site gives them.
    pub(super) async fn site_stream(
        self: &Rc<Self>,
        req: Request<Incoming>,
    ) -> Response<Either<Full<Bytes>, EventBody>> {
        let now_ms = self.clock.now_ms();
        let (parts, _) = req.into_parts();
        let refused = |e: ApiError| super::site::assets::secure(e.into_response()).map(Either::Left);
        if parts.method != Method::GET {
            return super::site::assets::secure(method_not_allowed("GET")).map(Either::Left);
        }
        let session = match self.signed_in(&parts, now_ms).await {
            Ok(s) => s,
            Err(e) => return refused(e),
        };
        let Some(key) = self.keys.get(&session.key_hash) else {
            return refused(ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"));
        };
        if let Err(e) = self.admit_site(session.account_id, now_ms) {
            return refused(e);
        }
        let cookie = parts.headers.get_all(COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(cookie_id);
        let Some(cookie) = cookie.map(str::to_owned) else {
            return refused(ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"));
        };
        let admission = Admission::Session { cookie, account: session.account_id, key_hash: session.key_hash };
        match self.stream_events(&parts, &key, admission).await {
            Ok(r) => r.map(Either::Right),
            Err(e) => refused(e),
        }
    }
}

type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Why a connection ends.
enum End {
    /// The client closed or went away.
    Gone,
    /// Close with this code and reason.
    Close(CloseCode, &'static str),
}

impl Front {
    /// One connection until it ends: `first` are the subscriptions of a server-sent-events
    /// request (their first messages go first) and its `alerts` resume point; it ends early,
    /// closed [`CLOSE_UNAUTHORISED`], once what admitted it no longer stands (whatever it was
    /// doing then, a write waiting for the client included).
    async fn run_stream(
        self: Rc<Self>,
        mut out: Out,
        mut session: Session,
        account: i64,
        first: (Vec<Rc<Target>>, Option<i64>),
        admission: Admission,
    ) {
        let mut cx = Ctx {
            joined: self.join_fanout(),
            account,
            key_hash: admission.key_hash(),
            looked: Looks { inbox_writes: u64::MAX, inbox_ms: 0, catching_up: false },
        };
        let end = tokio::select! {
            end = self.serve_stream(&mut out, &mut session, &mut cx, first) => end,
            reason = self.admission_ends(&admission) => End::Close(CloseCode::from(CLOSE_UNAUTHORISED), reason),
        };
        drop(cx);
        out.end(end, self.clock.now_ms()).await;
    }

    /// The connection's first messages, then its loop: the client's ops, the fan-out's batches
    /// and the periodic look; returns why it ends.
    async fn serve_stream(
        self: &Rc<Self>,
        out: &mut Out,
        session: &mut Session,
        cx: &mut Ctx,
        (initial, since): (Vec<Rc<Target>>, Option<i64>),
    ) -> End {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let now_ms = self.clock.now_ms();
        for t in &initial {
            if let Err(end) = self.first_message(out, session, cx, t, since, now_ms).await {
                return end;
            }
        }
        loop {
            let step = tokio::select! {
                frame = out.next_frame() => match frame {
                    Some(Ok(Message::Text(t))) => self.answer_op(out, session, cx, t.as_bytes()).await,
                    Some(Ok(Message::Binary(b))) => self.answer_op(out, session, cx, &b).await,
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Ok(()),
                    Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(_))) => Err(End::Close(CloseCode::Size, "message too long")),
                    Some(Ok(Message::Close(_)) | Err(_)) | None => Err(End::Gone),
                },
                _ = cx.joined.woken.notified() => self.write_market(out, session, cx).await,
                _ = tick.tick() => self.push_changes(out, session, cx).await,
                _ = self.writer_stats.inbox_written.notified(), if cx.looked.catching_up && session.alerts_after().is_some() => {
                    self.push_alerts(out, session, cx).await
                }
            };
            if let Err(end) = step {
                return end;
            }
        }
    }

    /// Parses and answers one client frame.
    async fn answer_op(self: &Rc<Self>, out: &mut Out, s: &mut Session, cx: &mut Ctx, frame: &[u8]) -> Result<(), End> {
        let now_ms = self.clock.now_ms();
        let op = match ops::parse(frame) {
            Ok(op) => op,
            Err(e) => return refuse(out, s, e.id, &e.message, now_ms).await,
        };
        match op {
            Op::Ping { id } => out.send(s.ack(id, now_ms), None).await,
            Op::Unsubscribe { id, channels } => {
                for t in s.unsubscribe(&channels) {
                    let mut hub = self.fanout.borrow_mut();
                    hub.fanout.unsubscribe(cx.joined.conn, &t);
                    if t.channel == Channel::Alerts {
                        hub.fanout.unsubscribe_alerts(cx.joined.conn);
                    }
                }
                out.send(s.ack(id, now_ms), None).await
            }
            Op::Subscribe { id, channels, since, min_usd } => {
                if let Some(unknown) = channels.iter().find_map(|c| self.unknown_channel(c)) {
                    return refuse(out, s, Some(id), &unknown, now_ms).await;
                }
                if let (Some(after), true) = (since, channels.contains(&Channel::Alerts)) {
                    if let Err(e) = self.check_cursor(cx.account, "since", after).await {
                        return refuse(out, s, Some(id), &e.message, now_ms).await;
                    }
                }
                let fresh = match s.subscribe(&channels, min_usd) {
                    Ok(f) => f,
                    Err(e) => return refuse(out, s, Some(id), &e.to_string(), now_ms).await,
                };
                out.send(s.ack(id, now_ms), None).await?;
                for t in &fresh {
                    self.first_message(out, s, cx, t, since, now_ms).await?;
                }
                Ok(())
            }
        }
    }

    /// Why `c` cannot be subscribed on this server, if it cannot.
    fn unknown_channel(&self, c: &Channel) -> Option<String> {
        match c {
            Channel::Price { venue, symbol }
            | Channel::Levels { venue, symbol: Some(symbol) }
            | Channel::Walls { venue, symbol: Some(symbol) } => self.book(*venue, symbol).err().map(|e| e.message),
            Channel::Levels { venue, symbol: None } | Channel::Walls { venue, symbol: None } => {
                self.venue_or_404(venue.as_str()).err().map(|e| e.message)
            }
            Channel::Board { venue } => self.venue_or_404(venue.as_str()).err().map(|e| e.message),
            Channel::Alerts => None,
        }
    }

    /// The board channels' next messages (a snapshot on the first look, then each new build).
    fn board_look(&self, s: &mut Session, now_ms: i64) -> Vec<String> {
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

    /// The books a price, levels or walls channel covers now (a `*` channel: the venue's listed
    /// pairs; the fan-out follows the venue's listing from then on).
    fn books_of(&self, c: &Channel) -> Vec<BookId> {
        match c {
            Channel::Price { venue, symbol }
            | Channel::Levels { venue, symbol: Some(symbol) }
            | Channel::Walls { venue, symbol: Some(symbol) } => self.book(*venue, symbol).ok().into_iter().collect(),
            Channel::Levels { venue, symbol: None } | Channel::Walls { venue, symbol: None } => {
                self.listed_books(*venue)
            }
            Channel::Board { .. } | Channel::Alerts => Vec::new(),
        }
    }

    /// A new subscription's first message: for a market channel, the fan-out follows it and
    /// queues a snapshot of each of its books (written with the connection's next batch); for
    /// `alerts`, the entries after `since` (oldest first, at most `BACKLOG_MAX`), or nothing but
    /// the cursor at the newest.
    async fn first_message(
        self: &Rc<Self>,
        out: &mut Out,
        s: &mut Session,
        cx: &mut Ctx,
        t: &Rc<Target>,
        since: Option<i64>,
        now_ms: i64,
    ) -> Result<(), End> {
        let (joined, account) = (&cx.joined, cx.account);
        match &t.channel {
            Channel::Board { .. } => {
                for m in self.board_look(s, now_ms) {
                    out.send(m, None).await?;
                }
                Ok(())
            }
            Channel::Levels { .. } | Channel::Walls { .. } | Channel::Price { .. } => {
                let books = self.books_of(&t.channel);
                let mut hub = self.fanout.borrow_mut();
                hub.fanout.subscribe(joined.conn, t, &books);
                self.look_books(&mut hub.fanout, &books, now_ms);
                joined.woken.notify_one();
                Ok(())
            }
            Channel::Alerts => {
                // Followed first, so an entry written from now on is handed to it; the reads
                // below cover what was written before.
                self.fanout.borrow_mut().fanout.subscribe_alerts(joined.conn, account);
                self.start_inbox_reader();
                let reader_ready = self.fanout.borrow().inbox_last.is_some();
                let Some(after) = since else {
                    let last = self.storage.run(move |store| store.inbox_last_id(account)).await;
                    s.start_alerts(last.map_err(|_| End::Close(CloseCode::Again, "storage unavailable; retry later"))?);
                    cx.looked.catching_up = !reader_ready;
                    return Ok(());
                };
                s.start_alerts(after);
                let rows = self.storage.run(move |store| store.inbox_after(account, after, BACKLOG_MAX)).await;
                let rows = rows.map_err(|_| End::Close(CloseCode::Again, "storage unavailable; retry later"))?;
                self.still_standing(cx)?;
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
    async fn write_market(&self, out: &mut Out, s: &mut Session, cx: &Ctx) -> Result<(), End> {
        let now_ms = self.clock.now_ms();
        self.still_standing(cx)?;
        let frames: Vec<(String, Option<i64>)> = {
            let mut hub = self.fanout.borrow_mut();
            if hub.fanout.overflowed(cx.joined.conn) {
                return Err(End::Close(CloseCode::from(4008), "slow consumer"));
            }
            let items = hub.fanout.take(cx.joined.conn);
            let registry = self.shared.registry();
            items
                .into_iter()
                .filter_map(|item| match item {
                    Item::Event { target, kind, data, .. } => {
                        s.message(&target, kind, &data, now_ms).map(|m| (m, None))
                    }
                    Item::Snapshot { target, book } => {
                        let symbol = &registry.get(book).symbol;
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
    async fn push_changes(&self, out: &mut Out, s: &mut Session, cx: &mut Ctx) -> Result<(), End> {
        let now_ms = self.clock.now_ms();
        for m in self.board_look(s, now_ms) {
            out.send(m, None).await?;
        }
        if cx.looked.catching_up {
            self.push_alerts(out, s, cx).await?;
        }
        match s.heartbeat(now_ms) {
            Some(m) => out.send(m, None).await,
            None => Ok(()),
        }
    }
}

impl Front {
    /// While `alerts` catches up (a backlog longer than `BACKLOG_MAX`, or subscribed before the
    /// inbox reader had started): the account's entries after the cursor from storage, read
    /// when the writer's count of inbox commits moved or every [`ALERTS_RESCAN_MS`]. A read
    /// that starts once the inbox reader runs and finds fewer than [`READ_MAX`] ends the
    /// catching up: every later entry comes from the reader.
    async fn push_alerts(&self, out: &mut Out, s: &mut Session, cx: &mut Ctx) -> Result<(), End> {
        let now_ms = self.clock.now_ms();
        let Some(after) = s.alerts_after() else { return Ok(()) };
        self.still_standing(cx)?;
        let looked = &mut cx.looked;
        let writes = self.writer_stats.inbox_writes.load(Ordering::Acquire);
        if writes == looked.inbox_writes && now_ms - looked.inbox_ms < ALERTS_RESCAN_MS {
            return Ok(());
        }
        looked.inbox_writes = writes;
        looked.inbox_ms = now_ms;
        let reader_ready = self.fanout.borrow().inbox_last.is_some();
        let account = cx.account;
        // A failed read is tried again at the next look.
        let Ok(rows) = self.storage.run(move |store| store.inbox_after(account, after, READ_MAX)).await else {
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
struct Ctx {
    joined: Joined,
    account: i64,
    key_hash: [u8; 32],
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
enum Out {
    /// Text frames.
    Ws(Box<Ws>),
    /// Events (`id:` for an `alerts` entry, `data:` the message), read by [`EventBody`].
    Sse(tokio::sync::mpsc::Sender<Bytes>),
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

impl Front {
    /// Ends the connection (closed [`CLOSE_UNAUTHORISED`]) when the key table already knows its
    /// key revoked: checked before each batch, so nothing is written after the table knew, even
    /// between two looks of [`Front::admission_ends`].
    fn still_standing(&self, cx: &Ctx) -> Result<(), End> {
        match self.key_revoked_now(&cx.key_hash) {
            true => Err(End::Close(CloseCode::from(CLOSE_UNAUTHORISED), KEY_REVOKED)),
            false => Ok(()),
        }
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
