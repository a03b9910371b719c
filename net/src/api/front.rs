//! The HTTP front: hyper (HTTP/1.1) on its own single-threaded tokio executor. It parses and
//! authenticates requests, applies the limits, and answers reads from what the shards publish.
//!
//! Rationale: may_minihttp, the first choice, cannot be made robust from outside its API (see
//! docs/design/why-hyper.md). hyper bounds header size and count,
//! times out slow or idle clients, decodes chunked bodies and refuses malformed framing.

use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW};
use hyper::{Method, StatusCode};
use rampart_engine::Venue;

mod alerts_api;
mod answer;
mod board_api;
mod bodies;
mod books;
pub mod encoding;
mod gate;
mod health;
mod json_errors;
mod listen;
mod market_api;
mod newest;
mod perp;
mod perp_json;
mod probes;
mod request_body;
pub mod session;
pub mod site;
mod stream_admission;
mod stream_api;
mod stream_conn;
mod stream_fanout;
mod wall_history;
mod webhooks_api;

pub use answer::{query_param, SHARD_ANSWER_TIMEOUT, SYMBOLS_FILTER_MAX};
pub use json_errors::JsonErrors;
pub use listen::serve;

use crate::alerts::request as alerts;
use crate::api::keys::KeyWatcher;
use crate::api::route::{self, Family, NotRouted, Route};
use crate::config::Plans;
use answer::{error, exchange_param, respond_bytes, symbols_param, with_usage, ApiError, Resp};
use hyper::http::request::Parts;
use rampart_state::clock::{self, SharedClock};
use rampart_state::{Commands, Shared};
use rampart_store::storage::{StorageHealth, StorageThread};
use rampart_store::store::KeyRow;
use request_body::read_body;

/// Front limits; every one has a documented behaviour at the bound.
#[derive(Clone, Debug)]
pub struct FrontConfig {
    /// Open connections at once; past it a new connection is closed at once, unanswered.
    pub connections_max: usize,
    /// A request head must arrive within this time, and an idle keep-alive connection is
    /// closed after it.
    pub header_read_timeout: Duration,
    /// Read buffer bound, which bounds the request head; past it hyper answers 431.
    pub read_buffer_bytes_max: usize,
    /// Header count bound; past it hyper answers 431.
    pub headers_max: usize,
    /// Open connections from one address at once; past it a new connection from that address is
    /// closed at once, unanswered. [`FrontConfig::fit_descriptors`] holds it to a quarter of
    /// `connections_max`, so one client can never take every slot.
    pub connections_per_address_max: usize,
}

/// Descriptors kept back from the front's connections for everything else the process opens:
/// webhook deliveries (256 in flight at most), venue connections, REST calls, the database
/// files and the shards' rings.
pub const DESCRIPTORS_RESERVED: u64 = 512;

impl FrontConfig {
    /// Raises the soft descriptor limit to the hard limit where allowed, then holds
    /// `connections_max` under it with [`DESCRIPTORS_RESERVED`] to spare (half the limit when
    /// the limit is too low for that) and `connections_per_address_max` to a quarter of
    /// `connections_max`. Returns the descriptor limit in force.
    pub fn fit_descriptors(mut self) -> (FrontConfig, u64) {
        let soft = rlimit::increase_nofile_limit(u64::MAX)
            .or_else(|_| rlimit::getrlimit(rlimit::Resource::NOFILE).map(|(soft, _)| soft))
            .unwrap_or(1_024);
        let room = if soft >= 2 * DESCRIPTORS_RESERVED { soft - DESCRIPTORS_RESERVED } else { soft / 2 };
        self.connections_max = self.connections_max.min(usize::try_from(room).unwrap_or(usize::MAX)).max(1);
        self.connections_per_address_max = self.connections_per_address_max.min(self.connections_max / 4).max(1);
        (self, soft)
    }
}

impl Default for FrontConfig {
    fn default() -> FrontConfig {
        FrontConfig {
            connections_max: 10_000,
            header_read_timeout: Duration::from_secs(10),
            read_buffer_bytes_max: 64 * 1024,
            headers_max: 64,
            connections_per_address_max: 10_000,
        }
    }
}

/// The API port's router: the gate every request passes, and one resource per family of
/// routes, each holding only what it reads. `Front::answer` turns a request into its
/// [`Route`] and hands it to the resource that answers it.
pub struct Front {
    /// Keys, limits and sessions (every front thread's).
    gate: Arc<gate::Gate>,
    /// The API port's connection slots (every front thread's).
    slots: Arc<listen::Slots>,
    /// `/v1/exchanges`, `/v1/symbols`, `/v1/levels`, `/v1/densities`, `/v1/walls/…/history`,
    /// `/v1/perp`, `/v1/liquidations`.
    market: market_api::MarketApi,
    /// `/v1/metrics`, `/v1/rankings`, `/v1/market`, `/v1/candles`, `/v1/book`.
    board: board_api::BoardApi,
    /// `/v1/alerts`, `/v1/inbox`.
    alerts: alerts_api::AlertsApi,
    /// `/v1/webhook-secret`.
    webhooks: webhooks_api::WebhooksApi,
    /// `/healthz`, `/version`, `/metrics`, `/v1/debug/latency`.
    health: health::HealthApi,
    /// The site's routes under `/site/`.
    site: site::routes::SiteApi,
    /// `/v1/stream`, `/site/v1/stream`, `/site/events`.
    streams: Rc<stream_api::StreamApi>,
    /// `/metrics`, when measured: every answer is counted there.
    metrics: Option<Arc<crate::api::metrics::Metrics>>,
    /// `/metrics` is served on its own listener only ([`Role::Metrics`]), not on the API's.
    metrics_apart: bool,
    /// A cluster's market node, which serves no API.
    market_node: bool,
    /// The process's clock.
    clock: SharedClock,
    /// Which front thread this is (0 is the first), in the access log.
    index: usize,
}

/// What a [`Front`] is made of, set before it serves ([`FrontBuilder::build`]).
pub struct FrontBuilder {
    /// The key table, which the gate takes.
    keys: KeyWatcher,
    unauthenticated_per_min: Option<usize>,
    parts: Makings,
}

/// What each front thread's resources are made from.
struct Makings {
    allow_private: bool,
    shared: Arc<Shared>,
    commands: Commands,
    venues: Vec<Venue>,
    feed: &'static str,
    plans: Plans,
    storage: StorageThread,
    storage_health: Arc<StorageHealth>,
    clock: SharedClock,
    metrics: Option<Arc<crate::api::metrics::Metrics>>,
    metrics_apart: bool,
    build: (&'static str, &'static str),
    board: Arc<arc_swap::ArcSwap<rampart_state::board::Board>>,
    writer_stats: Arc<rampart_store::writer::WriterStats>,
    telegram_on: bool,
    stream_bounds: crate::stream::Bounds,
    cluster: Option<Arc<rampart_cluster::node::NodeHealth>>,
    previous_secret_ms: i64,
}

/// What a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The API, `/healthz`, and `/metrics` unless it has its own address.
    Api,
    /// `/metrics` alone (`metrics.listen`).
    Metrics,
}

/// What the front reads and writes storage through.
pub struct FrontStorage {
    /// The key table (checked on the request path without storage).
    pub keys: KeyWatcher,
    /// The storage thread for every other query.
    pub thread: StorageThread,
    /// Whether storage can be written, for `/healthz`.
    pub health: Arc<StorageHealth>,
}

impl Front {
    /// A front over the shards' published state, authenticating against `storage.keys`; the
    /// `with_*` calls of the builder set the rest, [`FrontBuilder::build`] makes it.
    pub fn builder(
        shared: Arc<Shared>,
        commands: Commands,
        venues: Vec<Venue>,
        feed: &'static str,
        plans: Plans,
        storage: FrontStorage,
        allow_private: bool,
    ) -> FrontBuilder {
        let FrontStorage { keys, thread, health } = storage;
        let parts = Makings {
            allow_private,
            shared,
            commands,
            venues,
            feed,
            plans,
            storage: thread,
            storage_health: health,
            clock: clock::system(),
            metrics: None,
            metrics_apart: false,
            build: (env!("CARGO_PKG_VERSION"), "unknown"),
            board: Arc::new(arc_swap::ArcSwap::from_pointee(rampart_state::board::Board::empty())),
            writer_stats: Arc::new(rampart_store::writer::WriterStats::default()),
            telegram_on: false,
            stream_bounds: crate::stream::Bounds::default(),
            cluster: None,
            previous_secret_ms: i64::from(crate::config::PREVIOUS_SECRET_S) * 1000,
        };
        FrontBuilder { keys, unauthenticated_per_min: None, parts }
    }
}

impl FrontBuilder {
    /// Serves as a cluster node: `/healthz` reports the node's NATS links (and, on an api
    /// node, each partition's snapshot age); a market node answers `/healthz`, `/version` and
    /// `/metrics` only (its books are served by the api nodes).
    pub fn with_cluster(mut self, health: Arc<rampart_cluster::node::NodeHealth>) -> FrontBuilder {
        self.parts.cluster = Some(health);
        self
    }

    /// Pushes inbox entries to open streams when `stats` (the running writer's) counts an inbox
    /// commit; without it they are read every second.
    pub fn with_writer_stats(mut self, stats: Arc<rampart_store::writer::WriterStats>) -> FrontBuilder {
        self.parts.writer_stats = stats;
        self
    }

    /// A rotated-out webhook signing secret signs for `ms` more (default 24 h).
    pub fn with_previous_secret_ms(mut self, ms: i64) -> FrontBuilder {
        self.parts.previous_secret_ms = ms;
        self
    }

    /// Tells the site that firings are sent to Telegram chats (`[channels.telegram]` is set).
    pub fn with_telegram(mut self, on: bool) -> FrontBuilder {
        self.parts.telegram_on = on;
        self
    }

    /// Answers metrics, rankings and the board from `board` (kept current by a
    /// [`crate::board::BoardThread`]); without it they answer an empty board.
    pub fn with_board(mut self, board: Arc<arc_swap::ArcSwap<rampart_state::board::Board>>) -> FrontBuilder {
        self.parts.board = board;
        self
    }

    /// Admits `n` requests without a valid key per client address in any 60 s (default 60).
    pub fn with_unauthenticated_per_min(mut self, n: usize) -> FrontBuilder {
        self.unauthenticated_per_min = Some(n);
        self
    }

    /// Bounds every stream connection as `bounds` says (the configuration's `[streams]`).
    pub fn with_stream_bounds(mut self, bounds: crate::stream::Bounds) -> FrontBuilder {
        self.parts.stream_bounds = bounds;
        self
    }

    /// Reads the time from `clock` (the process's; the wall clock unless told).
    pub fn with_clock(mut self, clock: SharedClock) -> FrontBuilder {
        self.parts.clock = clock;
        self
    }

    /// Answers `/version` with `version` and the git `revision` the binary was built from.
    pub fn with_build(mut self, version: &'static str, revision: &'static str) -> FrontBuilder {
        self.parts.build = (version, revision);
        self
    }

    /// Serves `metrics` at `/metrics`: on the API's listener, or only on a listener of its own
    /// when `apart` (the API's then answers 404 there).
    pub fn with_metrics(mut self, metrics: Arc<crate::api::metrics::Metrics>, apart: bool) -> FrontBuilder {
        self.parts.metrics = Some(metrics);
        self.parts.metrics_apart = apart;
        self
    }

    /// What every front thread shares; [`Fronts::front`] makes each thread's [`Front`].
    pub fn build(self) -> Fronts {
        let p = &self.parts;
        let gate = gate::Gate::new(
            self.keys,
            p.storage.clone(),
            p.plans.clone(),
            p.clock.clone(),
            self.unauthenticated_per_min,
        );
        Fronts {
            gate: Arc::new(gate),
            places: stream_api::Places::new(),
            slots: Arc::new(listen::Slots::default()),
            started_ms: p.clock.now_ms(),
            parts: self.parts,
        }
    }
}

/// What the front threads share: the gate (keys, limits, sessions), the streams' places and the
/// API port's connection slots, which stay exact whichever thread a request or a stream is on;
/// and what each thread's resources read (the shards' published state, the board, storage).
/// Each thread makes its own [`Front`] from it ([`Fronts::front`]): its own body caches and
/// stream fan-out, on its own runtime.
pub struct Fronts {
    gate: Arc<gate::Gate>,
    places: stream_api::Places,
    slots: Arc<listen::Slots>,
    started_ms: i64,
    parts: Makings,
}

impl Fronts {
    /// Front thread `index`'s router: the shared gate, places and slots, and each resource with
    /// what it reads (its caches and fan-out its own).
    pub fn front(&self, index: usize) -> Front {
        let p = &self.parts;
        let books = Rc::new(
            books::Books::new(p.shared.clone(), p.venues.clone(), p.commands.clone())
                .with_cluster(p.cluster.clone(), p.clock.clone()),
        );
        let (storage, health, clock) = (&p.storage, &p.storage_health, &p.clock);
        let health_parts = health::HealthParts {
            storage_health: health.clone(),
            cluster: p.cluster.clone(),
            feed: p.feed,
            started_ms: self.started_ms,
            build: p.build,
            metrics: p.metrics.clone(),
        };
        let stream_parts = stream_api::StreamParts {
            board: p.board.clone(),
            storage: storage.clone(),
            clock: clock.clone(),
            writer_stats: p.writer_stats.clone(),
            bounds: p.stream_bounds,
            metrics: p.metrics.clone(),
            places: self.places.clone(),
        };
        let site_parts = site::routes::SiteParts {
            board: p.board.clone(),
            storage: storage.clone(),
            health: health.clone(),
            telegram_on: p.telegram_on,
        };
        let market_node = p.cluster.as_ref().is_some_and(|c| c.role == rampart_cluster::node::Role::Market);
        let alerts = alerts_api::AlertsApi::new(
            books.clone(),
            storage.clone(),
            health.clone(),
            p.plans.clone(),
            p.allow_private,
        );
        Front {
            market: market_api::MarketApi::new(books.clone(), clock.clone()),
            board: board_api::BoardApi::new(books.clone(), p.board.clone()),
            alerts,
            webhooks: webhooks_api::WebhooksApi::new(storage.clone(), health.clone(), p.previous_secret_ms),
            health: health::HealthApi::new(books.clone(), p.board.clone(), health_parts),
            site: site::routes::SiteApi::new(self.gate.clone(), books.clone(), site_parts),
            streams: Rc::new(stream_api::StreamApi::new(self.gate.clone(), books, stream_parts)),
            gate: self.gate.clone(),
            slots: self.slots.clone(),
            metrics: p.metrics.clone(),
            metrics_apart: p.metrics_apart,
            market_node,
            clock: clock.clone(),
            index,
        }
    }
}

impl Front {
    /// A cluster's market node, which serves no API.
    fn is_market_node(&self) -> bool {
        self.market_node
    }

    /// Answers one request and writes its access log line (target [`ACCESS_LOG_TARGET`]: method,
    /// path without the query, status, duration, the key's id, never the key).
    pub async fn serve_request(&self, req: Parts, body: Incoming, peer: IpAddr, role: Role) -> Resp {
        let started = std::time::Instant::now();
        let key = std::cell::Cell::new(None);
        let resp = match role {
            Role::Api => self.answer(&req, body, peer, &key).await,
            Role::Metrics => self.health.metrics_only(&req),
        };
        crate::api::metrics::observe(self.metrics.as_deref(), &req.method, req.uri.path(), resp.status(), started);
        tracing::info!(
            target: ACCESS_LOG_TARGET,
            method = %req.method,
            path = req.uri.path(),
            status = resp.status().as_u16(),
            us = started.elapsed().as_micros() as u64,
            key = key.get().map_or_else(|| "-".to_owned(), |k: i64| k.to_string()),
            peer = %peer,
            front = self.index,
            "request"
        );
        resp
    }

    /// Routes and authenticates on the head alone, and only then reads the body, so a client
    /// without a valid key never has a body read (nor a `100 Continue` sent) and a declared
    /// body over the bound is refused before any of it is read. The admitted key's id goes to
    /// `key`.
    async fn answer(&self, req: &Parts, body: Incoming, peer: IpAddr, key: &std::cell::Cell<Option<i64>>) -> Resp {
        let now_ms = self.clock.now_ms();
        let path = req.uri.path();
        let family = match (route::family(path), self.metrics_apart) {
            // `/metrics` has a listener of its own: here it is nothing.
            (Family::Public, true) if path == "/metrics" => Family::Other,
            (f, _) => f,
        };
        if family == Family::Public {
            return match Route::parse(&req.method, path) {
                Ok(Route::Healthz) => self.health.healthz(now_ms),
                Ok(Route::Livez) => self.health.livez(now_ms),
                Ok(Route::Readyz) => self.health.readyz(now_ms),
                Ok(Route::OpenApi) => respond_bytes(StatusCode::OK, Bytes::from_static(OPENAPI.as_bytes())),
                Ok(Route::Version) => self.health.version(),
                // `/metrics` answers 404 itself when nothing is measured, whatever the method.
                _ if path == "/metrics" => self.health.metrics_only(req),
                Ok(_) => error(StatusCode::NOT_FOUND, "not found"),
                Err(refused) => not_routed(refused),
            };
        }
        if self.is_market_node() {
            return error(
                StatusCode::NOT_FOUND,
                "not found: this is a market node (serve --role market), which serves /healthz, /version and /metrics; the API is served by the api nodes",
            );
        }
        match family {
            Family::Site => return self.site(req, body, peer, now_ms).await,
            Family::Other if site::assets::is_asset_path(path) => return site::assets::serve(req),
            Family::Other => return error(StatusCode::NOT_FOUND, "not found"),
            Family::Public | Family::Keyed => {}
        }
        let has_body = matches!(req.method, Method::POST | Method::PUT | Method::PATCH);
        let waits_for_continue =
            req.headers.get(hyper::header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        // Without a valid key nothing more is read: hyper has only the head (and whatever
        // arrived with it in its first read), and the connection is closed after the answer.
        // A client sending a large body with a bad key may see a reset instead of the 401;
        // an ordinary body arrives with the head and is unaffected.
        let (account, usage) = match self.gate.admit(req, peer, now_ms).await {
            Ok(k) => k,
            Err(e) => return e.into_response(),
        };
        key.set(Some(account.id));
        let bytes = if has_body {
            match read_body(body, waits_for_continue).await {
                Ok(b) => b,
                Err(e) => {
                    let mut r = e.into_response();
                    with_usage(&mut r, usage);
                    return r;
                }
            }
        } else {
            Bytes::new()
        };
        let resp = self.handle(req, path, &bytes, &account, now_ms).await;
        let mut resp = encoding::negotiate(resp, encoding::accepts_gzip(&req.headers)).await;
        with_usage(&mut resp, usage);
        resp
    }

    /// Answers one authenticated `/v1` request whose body has been read (the site's
    /// `/site/v1/` requests too, with the path's `/site` taken off).
    // Long: the one dispatch of the `/v1` routes, one arm per route, each a call to its resource.
    async fn handle(&self, req: &Parts, path: &str, body: &[u8], account: &Arc<KeyRow>, now_ms: i64) -> Resp {
        let query = req.uri.query();
        let route = match Route::parse(&req.method, path) {
            Ok(r) => r,
            Err(refused) => return not_routed(refused),
        };
        let in_venue = |answer: &dyn Fn(Venue) -> Resp| match exchange_param(query) {
            Ok(venue) => answer(venue),
            Err(e) => e.into_response(),
        };
        let bulk =
            |answer: &dyn Fn(Venue, Option<&[String]>) -> Resp| match (exchange_param(query), symbols_param(query)) {
                (Ok(venue), Ok(filter)) => answer(venue, filter.as_deref()),
                (Err(e), _) | (_, Err(e)) => e.into_response(),
            };
        match route {
            Route::CreateAlert => {
                let idempotency = req.headers.get("idempotency-key");
                self.alerts.create(account, body, idempotency, now_ms).await.unwrap_or_else(ApiError::into_response)
            }
            Route::WebhookSigning => self.webhooks.signing(account, now_ms).await,
            Route::RotateWebhookSecret => self.webhooks.rotate(account, now_ms).await,
            Route::EndWebhookSecret => self.webhooks.end(account, now_ms).await,
            Route::Exchanges => self.market.exchanges(),
            Route::ExchangeSymbols(ex) => self.market.symbols(ex, now_ms),
            Route::Symbol(symbol) => in_venue(&|venue| self.market.symbol(venue, symbol)),
            Route::LevelsBulk => bulk(&|venue, filter| self.market.levels_bulk(venue, filter, now_ms)),
            Route::Levels(symbol) => in_venue(&|venue| self.market.levels_one(venue, symbol)),
            Route::DensitiesBulk => bulk(&|venue, filter| self.market.densities_bulk(venue, filter, now_ms)),
            Route::Densities(symbol) => in_venue(&|venue| self.market.densities_one(venue, symbol)),
            Route::WallHistoryBulk => in_venue(&|venue| self.market.wall_history_bulk(venue, query, now_ms)),
            Route::WallHistory(symbol) => in_venue(&|venue| self.market.wall_history_one(venue, symbol, query, now_ms)),
            Route::MetricsBulk => self.board.metrics_bulk(query),
            Route::MetricsOne(symbol) => self.board.metrics_one(symbol, query),
            Route::Candles(symbol) => self.board.candles(symbol, query).await,
            Route::Book(symbol) => self.board.depth(symbol, query).await,
            Route::Rankings(category) => self.board.rankings(category, query),
            Route::Market => self.board.market(query),
            Route::PerpBulk => self.market.perp_bulk(query, now_ms),
            Route::Perp(symbol) => self.market.perp_one(symbol, query),
            Route::PerpHistory(symbol) => self.market.perp_history(symbol, query).await,
            Route::LiquidationsBulk => self.market.liquidations_bulk(query, now_ms),
            Route::Liquidations(symbol) => self.market.liquidations_one(symbol, query, now_ms),
            Route::ListAlerts => match alerts::parse_status(query_param(query, "status").as_deref()) {
                Ok(filter) => self.alerts.list(account, filter).await,
                Err(e) => ApiError::from(e).into_response(),
            },
            Route::UpdateAlert(id) => {
                self.alerts.update(account, id, body, now_ms).await.unwrap_or_else(ApiError::into_response)
            }
            Route::DeleteAlert(id) => self.alerts.delete(account, id, now_ms).await,
            Route::DeliveryLog(id) => self.alerts.delivery_log(account, id, query).await,
            Route::Redeliver(id, at) => self.alerts.redeliver(account, id, at, now_ms).await,
            Route::TestAlert(id) => self.alerts.test(account, id, now_ms).await.unwrap_or_else(ApiError::into_response),
            Route::Inbox => self.alerts.inbox(account, query).await,
            Route::Latency => self.health.latency(),
            Route::LatencyReset => {
                self.gate.operator(account).map_or_else(ApiError::into_response, |()| self.health.latency_reset())
            }
            // Not under `/v1`: answered by the front before a key is asked for.
            Route::Healthz
            | Route::Livez
            | Route::Readyz
            | Route::OpenApi
            | Route::Version
            | Route::Metrics
            | Route::Stream
            | Route::SiteStream
            | Route::SiteEvents
            | Route::SignIn
            | Route::SignOut
            | Route::Session
            | Route::ListSiteAlerts
            | Route::CreateSiteAlert
            | Route::DeleteSiteAlert(_)
            | Route::SiteV1
            | Route::ListKeys
            | Route::AddKey
            | Route::RevokeKey(_)
            | Route::Channels
            | Route::SetChannels => error(StatusCode::NOT_FOUND, "not found"),
        }
    }
}

impl Front {
    /// Answers one `/site/` request: its route from the table (404 and 405 from there too), the
    /// answer with the site's headers (`Cache-Control: no-store` and the security headers).
    async fn site(&self, req: &Parts, body: Incoming, peer: IpAddr, now_ms: i64) -> Resp {
        let answer = match Route::parse(&req.method, req.uri.path()) {
            Ok(route) => self.site_route(route, req, body, peer, now_ms).await,
            Err(refused) => Ok(not_routed(refused)),
        };
        site::assets::secure(site::routes::no_store(answer.unwrap_or_else(ApiError::into_response)))
    }

    async fn site_route(
        &self,
        route: Route<'_>,
        req: &Parts,
        body: Incoming,
        peer: IpAddr,
        now_ms: i64,
    ) -> Result<Resp, ApiError> {
        let site = &self.site;
        match route {
            Route::SignIn => site.signin(req, body, peer, now_ms).await,
            Route::SignOut => site.signout(req, now_ms).await,
            Route::Session => site.session(req, now_ms).await,
            Route::ListSiteAlerts => site.list_site_alerts(req, now_ms).await,
            Route::CreateSiteAlert => site.create_site_alert(req, body, now_ms).await,
            Route::DeleteSiteAlert(id) => site.delete_site_alert(req, id, now_ms).await,
            Route::ListKeys => site.list_keys(req, now_ms).await,
            Route::AddKey => site.add_key(req, body, now_ms).await,
            Route::RevokeKey(id) => site.revoke_key(req, id, now_ms).await,
            Route::Channels => site.channels(req, now_ms).await,
            Route::SetChannels => site.set_channels(req, body, now_ms).await,
            // A `/site/v1/stream` that is no upgrade nor an event stream: the `/v1` route says.
            Route::SiteV1 | Route::SiteStream => self.site_v1(req, body, now_ms).await,
            // `GET /site/events` is taken by the listener before the router (`listen`).
            _ => Err(ApiError::new(StatusCode::NOT_FOUND, "not found")),
        }
    }

    /// `/site/v1/...`: the `/v1` route with the session's key, on the site's own budget.
    async fn site_v1(&self, req: &Parts, body: Incoming, now_ms: i64) -> Result<Resp, ApiError> {
        let reading = matches!(req.method, Method::GET | Method::HEAD);
        let s = if reading { self.gate.signed_in(req, now_ms).await? } else { self.gate.changing(req, now_ms).await? };
        let path = req.uri.path().strip_prefix("/site").unwrap_or("/");
        if path.starts_with("/v1/debug") {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "not found"));
        }
        let key =
            self.gate.keys.get(&s.key_hash).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "not signed in"))?;
        self.gate.admit_site(s.account_id, now_ms)?;
        let bytes = match req.method {
            Method::POST | Method::PUT | Method::PATCH => read_body(body, false).await?,
            _ => Bytes::new(),
        };
        let alert_write = (req.method == Method::POST && path == "/v1/alerts")
            || (req.method == Method::PATCH && path.starts_with("/v1/alerts/"));
        if alert_write && site::routes::has_webhook_url(&bytes) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "an alert created on the site has no webhook URL; create one with a webhook_url through the API",
            ));
        }
        let resp = self.handle(req, path, &bytes, &key, now_ms).await;
        Ok(encoding::negotiate(resp, encoding::accepts_gzip(&req.headers)).await)
    }
}

/// The refusal [`Route::parse`] gave: 404, or 405 with its `Allow`.
fn not_routed(refused: NotRouted) -> Resp {
    match refused {
        NotRouted::NotFound => error(StatusCode::NOT_FOUND, "not found"),
        NotRouted::MethodNotAllowed(allow) => {
            let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            if let Ok(v) = HeaderValue::from_str(&allow) {
                r.headers_mut().insert(ALLOW, v);
            }
            r
        }
    }
}

/// The OpenAPI 3.1 document of every endpoint (`docs/openapi.json`), served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("../../../docs/openapi.json");

/// The `tracing` target of the access log (`RUST_LOG=info,rampart::access=off` silences it).
pub const ACCESS_LOG_TARGET: &str = "rampart::access";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_bounds_fit_the_descriptor_limit() {
        let (config, limit) = FrontConfig::default().fit_descriptors();
        assert!(limit >= 1, "a limit");
        assert!(config.connections_max as u64 <= limit.saturating_sub(DESCRIPTORS_RESERVED).max(limit / 2));
        assert!(config.connections_per_address_max <= (config.connections_max / 4).max(1));
    }
}
