//! `GET /v1/stream` (`decisions.md` §12): a WebSocket on the API port, or server-sent events
//! for a request with `Accept: text/event-stream` (channels, `since` and `minUsd` in the query,
//! `Last-Event-ID` resuming `alerts`). The request is admitted exactly like every `/v1` request
//! (key, plan, burst and quota: 401/403/429 before any upgrade) and then against the key's open
//! streams (`Plan::stream_connections`: 429 with `Retry-After`). A request that is neither an
//! upgrade nor asks for events is answered 426. The site's pages open the same streams as server-
//! sent events with their session (`GET /site/v1/stream`, on the site's own places), and `GET
//! /site/events` is `/site/v1/stream?channels=alerts` (the account's live inbox, pushed one way).
//!
//! One task per connection (on the front's thread), a `stream_conn::Connection`, reads the client's ops
//! (`crate::stream::ops`), answers each, and writes what the fan-out queued for it
//! (`super::stream_fanout`: one look per followed book every 2 ms, each change encoded once,
//! `crate::stream::fanout`; and the account's new inbox entries for `alerts`, read once for every
//! connection by the inbox reader at each writer commit) when woken; every `stream_conn::TICK` it sends the
//! board and a heartbeat after a second of silence (`crate::stream::session`). An `alerts`
//! subscription's backlog (`since`) is read from storage by the connection itself, and so is
//! everything after it while it catches up (a backlog of `BACKLOG_MAX`, or a subscribe before the
//! inbox reader had started: read when the writer's count of inbox commits moved or every
//! `ALERTS_RESCAN_MS`).
//!
//! Bounds (`crate::stream::Bounds`, from the configuration's `[streams]`): a client frame of at
//! most `ops::FRAME_BYTES_MAX` bytes (longer: closed 1009); subscriptions per connection (past
//! them a subscribe is refused whole); `unsent_bytes_max` bytes waiting for a client: queued
//! market events past their share are conflated (a snapshot of each book replaces them), so a
//! client that stops reading holds no more than the bound and delays nobody else; queued
//! `alerts` entries past the same share, a batch that cannot be written within
//! `MARKET_SEND_WAIT`, and an answer not taken within `SEND_WAIT`, close the connection 4008
//! ("slow consumer"): an alert entry is then not lost, the client resumes with `since` from the
//! last `id` it read; ten error answers in a minute close it 1008.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ACCEPT, CACHE_CONTROL, CONNECTION, CONTENT_TYPE, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY,
    SEC_WEBSOCKET_VERSION, UPGRADE,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role as WsRole, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use super::answer::{error, method_not_allowed, ApiError, Resp};
use super::books::Books;
use super::gate::{bearer_token, lock, session_cookie, Gate};
use super::site::events::EventBody;
use super::stream_admission::{Admission, CLOSE_UNAUTHORISED};
use super::stream_conn::{Connection, Ctx, End, Out};
use super::stream_fanout::{Hub, StreamCore};
use crate::api::limit::Usage;
use crate::api::metrics::Metrics;
use crate::stream::fanout::Target;
use crate::stream::ops::{self, Channel, Op};
use crate::stream::session::Session;
use crate::stream::Bounds;
use hyper::http::request::Parts;
use rampart_state::board::Board;
use rampart_state::clock::SharedClock;
use rampart_store::storage::StorageThread;
use rampart_store::store::{hash_key, KeyRow};
use rampart_store::writer::WriterStats;

/// A connection's read buffer (a frame longer than it is still read, in more than one go).
const WS_READ_BUFFER_BYTES: usize = 4 << 10;
/// Server-sent events waiting for the client's socket at most (a message waits `SEND_WAIT`
/// for room, then the stream ends and the client reconnects with `Last-Event-ID`).
pub const EVENTS_QUEUED_MAX: usize = 64;

/// `GET /v1/stream` and the site pages' `/site/v1/stream` (and `/site/events`): the HTTP side of
/// the streams (their admission, places and upgrade) over what their connections read
/// ([`StreamCore`]: the fan-out, the board, the inbox).
pub struct StreamApi {
    /// What every connection of this thread reads, and its fan-out.
    core: Rc<StreamCore>,
    /// The open `GET /v1/stream` connections, per key.
    open: Arc<Mutex<OpenStreams>>,
    /// The site's open streams, per session and account.
    site_open: Arc<Mutex<super::site::events::Streams>>,
}

/// What a [`StreamApi`] reads besides the gate and the books.
pub(super) struct StreamParts {
    pub board: Arc<ArcSwap<Board>>,
    pub storage: StorageThread,
    pub clock: SharedClock,
    pub writer_stats: Arc<WriterStats>,
    pub bounds: Bounds,
    pub metrics: Option<Arc<Metrics>>,
    pub places: Places,
}

/// Where the streams of every front thread hold their places: exact per key and per site
/// session and account, whichever thread a stream is on.
#[derive(Clone)]
pub(super) struct Places {
    open: Arc<Mutex<OpenStreams>>,
    site: Arc<Mutex<super::site::events::Streams>>,
}

impl Places {
    /// None taken.
    pub(super) fn new() -> Places {
        let site = super::site::events::Streams::new(
            super::stream_admission::SITE_STREAMS_PER_ACCOUNT_MAX,
            super::stream_admission::SITE_STREAMS_PER_SESSION_MAX,
        );
        Places { open: Arc::new(Mutex::new(OpenStreams::default())), site: Arc::new(Mutex::new(site)) }
    }
}

impl StreamApi {
    /// Streams admitted by `gate` over `books`, no connection open yet.
    pub(super) fn new(gate: Arc<Gate>, books: Rc<Books>, parts: StreamParts) -> StreamApi {
        let StreamParts { board, storage, clock, writer_stats, bounds, metrics, places } = parts;
        let fanout = Rc::new(RefCell::new(Hub::new(&bounds)));
        let core = StreamCore { gate, books, board, storage, clock, writer_stats, fanout, bounds, metrics };
        StreamApi { core: Rc::new(core), open: places.open, site_open: places.site }
    }
}

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
    open: Arc<Mutex<OpenStreams>>,
    key: i64,
}

impl Drop for KeyPlace {
    fn drop(&mut self) {
        lock(&self.open).close(self.key);
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

impl StreamApi {
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
        crate::api::metrics::observe(self.core.metrics.as_deref(), &method, "/v1/stream", resp.status(), started);
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
        let now_ms = self.core.clock.now_ms();
        let (parts, body) = req.into_parts();
        let admitted = self.core.gate.admit(&parts, peer, now_ms).await;
        req = Request::from_parts(parts, body);
        let (account, usage) = match admitted {
            Ok(k) => k,
            Err(e) => return e.into_response().map(Either::Left),
        };
        let Some(token) = bearer_token(req.headers()) else {
            return ApiError::new(StatusCode::UNAUTHORIZED, "invalid API key").into_response().map(Either::Left);
        };
        let admission = Admission::Key { hash: hash_key(token) };
        let query = req.uri().query();
        let numbers = ops::query_numbers(
            super::answer::query_param(query, "since").as_deref(),
            super::answer::query_param(query, "minUsd").as_deref(),
        );
        if let Err(e) = numbers {
            let mut r = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.message).into_response();
            super::answer::with_usage(&mut r, usage);
            return r.map(Either::Left);
        }
        if wants_events(req.headers()) {
            let (parts, _) = req.into_parts();
            let mut r = match self.stream_events(&parts, &account, admission, None).await {
                Ok(r) => r.map(Either::Right),
                Err(e) => e.into_response().map(Either::Left),
            };
            super::answer::with_usage(&mut r, usage);
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
            super::answer::with_usage(&mut r, usage);
            return r;
        };
        let place = match self.take_place(account, &admission) {
            Ok(p) => p,
            Err(refused) => {
                let mut r = refused.into_response();
                super::answer::with_usage(&mut r, usage);
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
                .max_write_buffer_size(front.core.bounds.socket_bytes_max());
            let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), WsRole::Server, Some(config)).await;
            let session = Session::new(front.core.clock.now_ms(), front.core.bounds.subscriptions_max);
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
        super::answer::with_usage(&mut r, usage);
        r
    }
}

impl StreamApi {
    /// A place for a stream `admission` admitted: among the key's open streams, at most its
    /// plan's `stream_connections`, or among the site's (per session and per account, apart
    /// from the key's); 429 with `Retry-After` at the bound.
    fn take_place(&self, key: &KeyRow, admission: &Admission) -> Result<Place, ApiError> {
        match admission {
            Admission::Key { .. } => {
                let max = self.core.gate.plans.get(&key.plan).map_or(0, |p| p.stream_connections);
                let opened = lock(&self.open).open(key.id, max);
                if !opened {
                    let message = format!("at most {max} open streams per key on this plan; close one");
                    return Err(ApiError::too_many(message, 5));
                }
                Ok(Place::Key { _held: KeyPlace { open: self.open.clone(), key: key.id } })
            }
            Admission::Session { cookie, account, .. } => {
                let session = super::session::hash(cookie);
                let held = super::site::events::Place::take(&self.site_open, *account, session)?;
                Ok(Place::Site { _held: held })
            }
        }
    }
}

impl StreamApi {
    /// `GET /v1/stream?channels=…` as server-sent events: the channels, `since` (or the
    /// `Last-Event-ID` a reconnecting browser sends) and `minUsd` checked like a `subscribe`
    /// (422, 404 for an unknown pair), the key's open streams counted (429); then 200 and the
    /// stream's task, which sends each channel's first messages and then every change.
    async fn stream_events(
        self: &Rc<Self>,
        req: &Parts,
        account: &KeyRow,
        admission: Admission,
        channels: Option<&str>,
    ) -> Result<Response<EventBody>, ApiError> {
        let query = req.uri.query();
        let Some(channels) = channels.map(str::to_owned).or_else(|| super::answer::query_param(query, "channels"))
        else {
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "missing query parameter 'channels'"));
        };
        let last = req.headers.get("last-event-id").and_then(|v| super::session::last_event_id(v.as_bytes()));
        let since = last.map(|i| i.to_string()).or_else(|| super::answer::query_param(query, "since"));
        let op = ops::from_query(&channels, since.as_deref(), super::answer::query_param(query, "minUsd").as_deref())
            .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.message))?;
        let Op::Subscribe { channels, since, min_usd, .. } = op else {
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "missing query parameter 'channels'"));
        };
        if let Some(unknown) = channels.iter().find_map(|c| self.core.books.unknown_channel(c)) {
            return Err(ApiError::new(StatusCode::NOT_FOUND, unknown));
        }
        let now_ms = self.core.clock.now_ms();
        let mut session = Session::new(now_ms, self.core.bounds.subscriptions_max);
        let targets = session
            .subscribe(&channels, min_usd)
            .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
        if let (Some(after), true) = (since, channels.contains(&Channel::Alerts)) {
            let name = if last.is_some() { "Last-Event-ID" } else { "since" };
            self.core.check_cursor(account.account_id, name, after).await?;
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

impl StreamApi {
    /// `GET /site/v1/stream`: the event stream of the site's pages, with their session (its key's
    /// plan and open streams, the site's own request budget); refusals as the site gives them.
    pub(super) async fn site_stream(
        self: &Rc<Self>,
        req: Request<Incoming>,
    ) -> Response<Either<Full<Bytes>, EventBody>> {
        self.site_stream_of(req, None).await
    }

    /// `GET /site/events`, the site's live inbox as it was first offered: an alias of
    /// `/site/v1/stream?channels=alerts` (the same admission, places, messages and resume by
    /// `Last-Event-ID`), so the account's inbox is pushed one way only.
    pub(super) async fn site_events(
        self: &Rc<Self>,
        req: Request<Incoming>,
    ) -> Response<Either<Full<Bytes>, EventBody>> {
        self.site_stream_of(req, Some("alerts")).await
    }

    /// A site stream of `channels` (else the query's).
    async fn site_stream_of(
        self: &Rc<Self>,
        req: Request<Incoming>,
        channels: Option<&str>,
    ) -> Response<Either<Full<Bytes>, EventBody>> {
        let now_ms = self.core.clock.now_ms();
        let (parts, _) = req.into_parts();
        let refused = |e: ApiError| super::site::assets::secure(e.into_response()).map(Either::Left);
        if parts.method != Method::GET {
            return super::site::assets::secure(method_not_allowed("GET")).map(Either::Left);
        }
        let session = match self.core.gate.signed_in(&parts, now_ms).await {
            Ok(s) => s,
            Err(e) => return refused(e),
        };
        let Some(key) = self.core.gate.keys.get(&session.key_hash) else {
            return refused(ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"));
        };
        if let Err(e) = self.core.gate.admit_site(session.account_id, now_ms) {
            return refused(e);
        }
        let Some(cookie) = session_cookie(&parts).map(str::to_owned) else {
            return refused(ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"));
        };
        let admission = Admission::Session { cookie, account: session.account_id, key_hash: session.key_hash };
        match self.stream_events(&parts, &key, admission, channels).await {
            Ok(r) => r.map(Either::Right),
            Err(e) => refused(e),
        }
    }
}

impl StreamApi {
    /// One connection until it ends: `first` are the subscriptions of a server-sent-events
    /// request (their first messages go first) and its `alerts` resume point; it ends early,
    /// closed [`CLOSE_UNAUTHORISED`], once what admitted it no longer stands (whatever it was
    /// doing then, a write waiting for the client included).
    async fn run_stream(
        self: Rc<Self>,
        out: Out,
        session: Session,
        account: i64,
        first: (Vec<Rc<Target>>, Option<i64>),
        admission: Admission,
    ) {
        let cx = Ctx::new(self.core.join_fanout(), account, &admission);
        let mut conn = Connection::new(out, session, cx);
        let end = tokio::select! {
            end = conn.serve(&self.core, first) => end,
            reason = self.core.gate.admission_ends(&admission) => End::Close(CloseCode::from(CLOSE_UNAUTHORISED), reason),
        };
        conn.end(end, self.core.clock.now_ms()).await;
    }
}
