//! Prometheus metrics at `GET /metrics`: request and webhook instruments, and a collector that
//! reads the counters the shards, venues and storage already keep, at scrape time.
//!
//! The exposition is OpenMetrics text (`prometheus-client`'s encoder; Prometheus scrapes it
//! natively). Counters carry the `_total` suffix. Labels are bounded: routes are the API's
//! path templates (anything else is `other`), methods a fixed set, statuses what the front
//! answers, venues and shards what the process runs. Nothing here runs on the tick path: the
//! shards keep their plain atomics and the collector reads them when scraped.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rampart_engine::Venue;

use rampart_delivery::metrics::{duration_buckets, WebhookMetrics};
use rampart_delivery::DeliveryStats;
use rampart_state::{Command, Shared};
use rampart_store::storage::StorageHealth;

/// One HTTP request's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The route's path template (`/v1/levels/{symbol}`), `other` when none matched.
    pub route: &'static str,
    /// `GET`, `HEAD`, `POST`, `DELETE` or `other`.
    pub method: &'static str,
    /// The status answered.
    pub status: u16,
}

/// A route's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route's path template.
    pub route: &'static str,
}

/// The HTTP front's instruments (updated on the front's thread, once per request, and by the
/// stream fan-out every 100 ms).
#[derive(Clone, Debug)]
pub struct HttpMetrics {
    requests: Family<HttpLabels, Counter>,
    duration: Family<RouteLabels, Histogram>,
    /// `GET /v1/stream` connections open (WebSocket and server-sent events).
    pub streams_open: Gauge,
    /// Bytes of market events queued for stream clients, all connections.
    pub stream_queued_bytes: Gauge,
    /// Times a slow stream client's queued market events were conflated into snapshots.
    pub stream_conflations: Counter,
    /// Market changes the fan-out handed to stream connections.
    pub stream_handed: Counter,
}

impl HttpMetrics {
    fn new() -> HttpMetrics {
        HttpMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(duration_buckets())),
            streams_open: Gauge::default(),
            stream_queued_bytes: Gauge::default(),
            stream_conflations: Counter::default(),
            stream_handed: Counter::default(),
        }
    }

    /// Counts one answered request.
    pub fn observe(&self, labels: HttpLabels, seconds: f64) {
        self.duration.get_or_create(&RouteLabels { route: labels.route }).observe(seconds);
        self.requests.get_or_create(&labels).inc();
    }
}

/// What the collector reads at scrape time.
pub struct Sources {
    /// The shards' published state and counters.
    pub shared: Arc<Shared>,
    /// The venues served.
    pub venues: Vec<Venue>,
    /// Each shard's command queue.
    pub commands: Vec<Arc<ArrayQueue<Command>>>,
    /// Each shard's event queue (firings and notices toward storage).
    pub events: Vec<Arc<rampart_state::EventQueue>>,
    /// The webhook sender's counters.
    pub delivery: Arc<DeliveryStats>,
    /// Whether storage can be written.
    pub storage: Arc<StorageHealth>,
    /// When the process started, Unix milliseconds.
    pub started_ms: i64,
    /// The process's clock.
    pub clock: rampart_state::clock::SharedClock,
    /// A cluster node's links (`rampart_cluster_*`); `None` for the single process.
    pub cluster: Option<Arc<rampart_cluster::node::NodeHealth>>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources").field("venues", &self.venues).field("shards", &self.commands.len()).finish()
    }
}

/// Every metric of the process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// The front's instruments.
    pub http: HttpMetrics,
}

impl Metrics {
    /// The registry over `sources`, with the webhook sender's `webhooks` instruments.
    pub fn new(sources: Sources, webhooks: &WebhookMetrics) -> Metrics {
        let mut registry = Registry::with_prefix("rampart");
        let http = HttpMetrics::new();
        registry.register("http_requests", "HTTP requests answered", http.requests.clone());
        registry.register("http_request_duration_seconds", "Time to answer a request", http.duration.clone());
        registry.register("streams_open", "GET /v1/stream connections open", http.streams_open.clone());
        registry.register(
            "stream_queued_bytes",
            "Bytes of market events queued for stream clients",
            http.stream_queued_bytes.clone(),
        );
        registry.register(
            "stream_conflations",
            "Slow stream clients' queued market events conflated into snapshots",
            http.stream_conflations.clone(),
        );
        registry.register("stream_handed", "Market changes handed to stream connections", http.stream_handed.clone());
        webhooks.register(&mut registry);
        registry.register_collector(Box::new(State(sources)));
        Metrics { registry, http }
    }

    /// The exposition text, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing into a String cannot fail; a collector error would be a bug, shown in the body.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            out.push_str(&format!("# encoding failed: {e}\n"));
        }
        out
    }
}

/// The collector over [`Sources`].
#[derive(Debug)]
struct State(Sources);

/// Writes one metric family of labelled constant samples (nothing when there are none).
fn family<M: EncodeMetric, L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, M)>,
) -> Result<(), std::fmt::Error> {
    let mut samples = samples.into_iter().peekable();
    let Some((_, first)) = samples.peek() else { return Ok(()) };
    let mut metric = encoder.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, m) in samples {
        m.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Writes one unlabelled gauge.
fn gauge(encoder: &mut DescriptorEncoder<'_>, name: &str, help: &str, v: i64) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(v);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

type ShardLabel = [(&'static str, String); 1];
type VenueLabel = [(&'static str, &'static str); 1];

impl State {
    fn shard_label(i: usize) -> ShardLabel {
        [("shard", i.to_string())]
    }

    fn shards(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let stats = &self.0.shared.stats;
        let counter = |f: fn(&rampart_state::ShardStats) -> u64| {
            stats.iter().enumerate().map(move |(i, s)| (State::shard_label(i), ConstCounter::new(f(s))))
        };
        let gauge = |f: fn(&rampart_state::ShardStats) -> u64| {
            stats.iter().enumerate().map(move |(i, s)| (State::shard_label(i), ConstGauge::new(f(s) as i64)))
        };
        family(e, "shard_ticks", "Ticks applied", counter(|s| s.ticks.load(Relaxed)))?;
        family(e, "shard_firings", "Alert firings emitted", counter(|s| s.firings.load(Relaxed)))?;
        family(
            e,
            "shard_backpressure_rounds",
            "Loop rounds that took no ticks because firings waited for the event queue",
            counter(|s| s.backpressure_rounds.load(Relaxed)),
        )?;
        family(e, "shard_level_recomputes", "Level sets recomputed", counter(|s| s.level_recomputes.load(Relaxed)))?;
        family(e, "shard_wall_scans", "Wall scans done", counter(|s| s.wall_scans.load(Relaxed)))?;
        family(e, "shard_books", "Books owned", gauge(|s| s.books.load(Relaxed)))?;
        family(e, "shard_alerts_held", "Active alerts held on the shard", gauge(|s| s.alerts.load(Relaxed)))?;
        family(e, "shard_crossed_books", "Books crossed now", gauge(|s| s.crossed_books.load(Relaxed)))?;
        family(
            e,
            "shard_ready",
            "1 once the shard has its books and history",
            gauge(|s| u64::from(s.ready.load(Relaxed))),
        )?;
        let depth = |qs: &[usize]| {
            qs.iter().enumerate().map(|(i, n)| (State::shard_label(i), ConstGauge::new(*n as i64))).collect::<Vec<_>>()
        };
        let commands: Vec<usize> = self.0.commands.iter().map(|q| q.len()).collect();
        let events: Vec<usize> = self.0.events.iter().map(|q| q.len()).collect();
        family(e, "shard_command_queue_depth", "Commands waiting for the shard", depth(&commands))?;
        family(e, "shard_event_queue_depth", "Firings and notices waiting for storage", depth(&events))
    }

    fn venue_counter(
        &self,
        e: &mut DescriptorEncoder<'_>,
        c: rampart_state::VenueCounter,
    ) -> Result<(), std::fmt::Error> {
        let shared = &self.0.shared;
        let sum = |v: &Venue| shared.venue_sum(*v, |s| (c.field)(s).load(Relaxed));
        let samples = self.0.venues.iter().map(|v| ([("venue", v.as_str())], ConstCounter::new(sum(v))));
        family::<_, VenueLabel>(e, c.metric, c.help, samples)
    }

    fn venues(&self, e: &mut DescriptorEncoder<'_>, now_ms: i64) -> Result<(), std::fmt::Error> {
        for c in rampart_state::VENUE_COUNTERS {
            self.venue_counter(e, c)?;
        }
        let health: Vec<_> = self.0.venues.iter().map(|v| (*v, self.0.shared.venue_health(*v))).collect();
        let gauge = |f: &dyn Fn(&rampart_state::VenueHealth) -> i64| {
            health.iter().map(|(v, h)| ([("venue", v.as_str())], ConstGauge::new(f(h)))).collect::<Vec<_>>()
        };
        let down = |h: &rampart_state::VenueHealth| i64::from(h.state == rampart_state::VenueState::Down);
        family::<_, VenueLabel>(e, "venue_down", "1 while the venue has no live data", gauge(&down))?;
        family::<_, VenueLabel>(e, "venue_books_live", "Books in sync now", gauge(&|h| h.live))?;
        family::<_, VenueLabel>(e, "venue_connections_open", "Connections open now", gauge(&|h| h.open))?;
        let lag = health.iter().filter(|(_, h)| h.last_message_ms > 0).map(|(v, h)| {
            ([("venue", v.as_str())], ConstGauge::new((now_ms - h.last_message_ms).max(0) as f64 / 1000.0))
        });
        family::<_, VenueLabel>(e, "venue_last_message_age_seconds", "Time since the venue's last message", lag)
    }

    fn rest(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(rest) = &self.0.shared.rest_stats else { return Ok(()) };
        type F = fn(&rampart_state::RestStats) -> u64;
        let table: [(&str, &str, F); 5] = [
            ("venue_rest_requests", "REST requests sent", |r| r.requests.load(Relaxed)),
            ("venue_rest_errors", "REST requests that failed", |r| r.errors.load(Relaxed)),
            ("venue_rest_rate_limited", "REST rate-limit answers", |r| r.rate_limited.load(Relaxed)),
            ("venue_backfill_failures", "Candle backfills that failed (retried)", |r| r.backfill_failed.load(Relaxed)),
            ("venue_listing_faults", "Listings refused as implausible", |r| r.listing_faults.load(Relaxed)),
        ];
        for (name, help, f) in table {
            let samples =
                self.0.venues.iter().map(|v| ([("venue", v.as_str())], ConstCounter::new(f(&rest[v.index()]))));
            family::<_, VenueLabel>(e, name, help, samples)?;
        }
        Ok(())
    }

    fn cluster(
        e: &mut DescriptorEncoder<'_>,
        c: &rampart_cluster::node::NodeHealth,
        now_ms: i64,
    ) -> Result<(), std::fmt::Error> {
        let up = c.snapshots_connected.load(Relaxed) && c.commands_connected.load(Relaxed);
        gauge(e, "cluster_nats_connected", "1 while both of the node's NATS connections are up", i64::from(up))?;
        let role = || [("role", c.role.as_str())];
        let sent = [(role(), ConstCounter::new(c.commands.load(Relaxed)))];
        family::<_, VenueLabel>(e, "cluster_commands", "Alert commands sent (api) or applied (market)", sent)?;
        let failed = [(role(), ConstCounter::new(c.commands_failed.load(Relaxed)))];
        family::<_, VenueLabel>(e, "cluster_commands_failed", "Alert commands not sent or not applied", failed)?;
        let label = |i: usize| [("partition", i.to_string())];
        let per = |f: fn(&rampart_cluster::node::PartitionSeen) -> u64| {
            c.partitions.iter().enumerate().map(move |(i, p)| (label(i), ConstCounter::new(f(p))))
        };
        family::<_, ShardLabel>(
            e,
            "cluster_snapshot_messages",
            "Snapshot messages applied",
            per(|p| p.messages.load(Relaxed)),
        )?;
        let refused = per(|p| p.refused.load(Relaxed));
        family::<_, ShardLabel>(
            e,
            "cluster_snapshot_messages_refused",
            "Snapshot messages dropped as malformed",
            refused,
        )?;
        let ages =
            (0..c.partitions.len()).filter_map(|i| c.age_ms(i, now_ms).map(|a| (label(i), ConstGauge::new(a / 1000))));
        family::<_, ShardLabel>(e, "cluster_snapshot_age_seconds", "Seconds since the partition's last snapshot", ages)
    }

    fn process(&self, e: &mut DescriptorEncoder<'_>, now_ms: i64) -> Result<(), std::fmt::Error> {
        let d = &self.0.delivery;
        gauge(e, "webhooks_in_flight", "Webhook attempts in flight", d.in_flight.load(Relaxed) as i64)?;
        gauge(
            e,
            "webhook_outcomes_unrecorded",
            "Webhook outcomes kept in memory because storage refused them",
            d.unrecorded.load(Relaxed) as i64,
        )?;
        let writable = i64::from(self.0.storage.report(now_ms).is_none());
        gauge(e, "storage_writable", "1 while every storage writer can commit", writable)?;
        let sizes = self.0.storage.sizes();
        if !sizes.rows.is_empty() {
            let rows = sizes.rows.iter().map(|(t, n)| ([("table", *t)], ConstGauge::new(*n)));
            family::<_, [(&'static str, &'static str); 1]>(
                e,
                "storage_rows",
                "Rows per table (counted every 30 s)",
                rows,
            )?;
            gauge(
                e,
                "storage_bytes",
                "The database's size: SQLite's file and WAL, or PostgreSQL's database",
                sizes.bytes,
            )?;
        }
        gauge(e, "uptime_seconds", "Seconds since the process started", (now_ms - self.0.started_ms) / 1000)
    }
}

impl Collector for State {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let now_ms = self.0.clock.now_ms();
        self.shards(&mut e)?;
        if self.0.shared.live {
            self.venues(&mut e, now_ms)?;
            self.rest(&mut e)?;
        }
        if let Some(c) = &self.0.cluster {
            State::cluster(&mut e, c, now_ms)?;
        }
        self.process(&mut e, now_ms)
    }
}

/// Counts an answer in `/metrics` (`rampart_http_requests`, by route template).
pub fn observe(
    metrics: Option<&Metrics>,
    method: &hyper::Method,
    path: &str,
    status: hyper::StatusCode,
    started: std::time::Instant,
) {
    if let Some(m) = metrics {
        let labels = HttpLabels { route: route(path), method: self::method(method), status: status.as_u16() };
        m.http.observe(labels, started.elapsed().as_secs_f64());
    }
}

/// The route template of a request path, for labels (bounded: unknown paths are `other`): the
/// route table's (`api::route::template`, the site's `/site/…` routes too), else the site's pages.
pub fn route(path: &str) -> &'static str {
    if let Some(template) = crate::api::route::template(path) {
        return template;
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        [""] | ["index.html"] => "/",
        ["assets", ..] => "/assets/{file}",
        _ => "other",
    }
}

/// A method's label (bounded).
pub fn method(m: &hyper::Method) -> &'static str {
    match *m {
        hyper::Method::GET => "GET",
        hyper::Method::HEAD => "HEAD",
        hyper::Method::POST => "POST",
        hyper::Method::PATCH => "PATCH",
        hyper::Method::DELETE => "DELETE",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the front serves, as path templates (the `route` label's values besides `other`;
    /// `docs/openapi.json` documents exactly these paths).
    const ROUTES: [&str; 35] = [
        "/healthz",
        "/livez",
        "/readyz",
        "/metrics",
        "/version",
        "/openapi.json",
        "/v1/exchanges",
        "/v1/exchanges/{exchange}/symbols",
        "/v1/symbols/{symbol}",
        "/v1/stream",
        "/v1/levels",
        "/v1/levels/{symbol}",
        "/v1/densities",
        "/v1/densities/{symbol}",
        "/v1/walls/history",
        "/v1/walls/{symbol}/history",
        "/v1/alerts",
        "/v1/alerts/{id}",
        "/v1/inbox",
        "/v1/debug/latency",
        "/v1/metrics",
        "/v1/metrics/{symbol}",
        "/v1/rankings/{category}",
        "/v1/market",
        "/v1/perp",
        "/v1/perp/{symbol}",
        "/v1/perp/{symbol}/history",
        "/v1/liquidations",
        "/v1/liquidations/{symbol}",
        "/v1/candles/{symbol}",
        "/v1/book/{symbol}",
        "/v1/webhook-secret",
        "/v1/alerts/{id}/deliveries",
        "/v1/alerts/{id}/deliveries/{triggerTime}/redeliver",
        "/v1/alerts/{id}/test",
    ];

    /// The site's routes and pages (the site's own, not in `docs/openapi.json`).
    const SITE_ROUTES: [&str; 12] = [
        "/",
        "/assets/{file}",
        "/site/signin",
        "/site/session",
        "/site/signout",
        "/site/site-alerts",
        "/site/site-alerts/{id}",
        "/site/keys",
        "/site/keys/{id}",
        "/site/channels",
        "/site/v1/*",
        "/site/events",
    ];

    #[test]
    fn routes_are_templates_and_unknown_paths_one_label() {
        assert_eq!(route("/v1/levels/BTCUSDT"), "/v1/levels/{symbol}");
        assert_eq!(route("/v1/exchanges/okx/symbols"), "/v1/exchanges/{exchange}/symbols");
        assert_eq!(route("/v1/alerts/123"), "/v1/alerts/{id}");
        assert_eq!(route("/v1/levels/a/b"), "other");
        assert_eq!(route("/wp-admin"), "other");
    }

    #[test]
    fn every_route_is_documented_and_labelled_by_its_template() {
        let doc: serde_json::Value =
            serde_json::from_str(crate::api::front::OPENAPI).expect("docs/openapi.json parses");
        let mut documented: Vec<&str> = doc["paths"].as_object().expect("paths").keys().map(String::as_str).collect();
        documented.sort_unstable();
        let mut routes = ROUTES.to_vec();
        routes.sort_unstable();
        assert_eq!(documented, routes, "docs/openapi.json documents exactly the routes served");
        for r in ROUTES.into_iter().chain(SITE_ROUTES) {
            let sample = r
                .replace("{symbol}", "BTCUSDT")
                .replace("{exchange}", "okx")
                .replace("{id}", "7")
                .replace("{category}", "usdt")
                .replace("{file}", "app.js");
            assert_eq!(route(&sample), r, "{sample}");
        }
    }

    #[test]
    fn instruments_encode_with_their_labels() {
        let http = HttpMetrics::new();
        http.observe(HttpLabels { route: "/v1/levels", method: "GET", status: 200 }, 0.001);
        let mut registry = Registry::with_prefix("rampart");
        registry.register("http_requests", "HTTP requests answered", http.requests.clone());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encodes");
        assert!(
            out.contains("rampart_http_requests_total{route=\"/v1/levels\",method=\"GET\",status=\"200\"} 1"),
            "{out}"
        );
        assert!(out.ends_with("# EOF\n"));
    }
}
