//! `/healthz`, `/version`, `/metrics` on the API listener, and the operator's latency
//! histograms (`/v1/debug/latency`): what operators and load balancers read.

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::StatusCode;
use rampart_engine::Venue;

use std::rc::Rc;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http_body_util::Full;
use hyper::http::request::Parts;
use hyper::{Method, Response};

use super::answer::{error, method_not_allowed, respond, Resp};
use super::books::Books;
use crate::api::metrics::Metrics;
use rampart_cluster::node::NodeHealth;
use rampart_state::board::Board;
use rampart_state::clock;
use rampart_state::json::Json;
use rampart_store::storage::StorageHealth;
use rampart_store::storage::Writer;

/// `"cluster"` in `/healthz`: the node's role and links, and (api) each partition's snapshots.
pub(super) fn write_cluster_health(j: &mut Json, c: &rampart_cluster::node::NodeHealth, now_ms: i64) {
    use std::sync::atomic::Ordering::Acquire;
    j.raw(",\"cluster\":{\"role\":").str(c.role.as_str());
    j.raw(",\"natsConnected\":").bool(c.snapshots_connected.load(Acquire) && c.commands_connected.load(Acquire));
    match c.role {
        rampart_cluster::node::Role::Market => {
            j.raw(",\"partition\":").str(&c.partition.to_string());
            if let Some(o) = &c.ownership {
                j.raw(",\"owner\":{\"epoch\":").int(o.epoch).raw(",\"holder\":").str(&o.holder);
                j.raw(",\"current\":").bool(o.is_owner(now_ms)).raw("}");
            }
        }
        rampart_cluster::node::Role::Api => {
            j.raw(",\"marketAlerts\":").bool(c.market_alerts.load(Acquire));
        }
    }
    j.raw(",\"partitions\":[");
    for (i, p) in c.partitions.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        j.raw("{\"partition\":").int(i as i64).raw(",\"complete\":").bool(p.complete.load(Acquire));
        match c.age_ms(i, now_ms) {
            Some(age) => j.raw(",\"snapshotAgeMs\":").int(age),
            None => j.raw(",\"snapshotAgeMs\":null"),
        };
        j.raw("}");
    }
    j.raw("]}");
}

/// Writes `"storage":{"writable":true}`, or what fails, since when and the last error.
pub(super) fn write_storage_health(j: &mut Json, failing: Option<&(Vec<Writer>, i64, String)>) {
    let Some((who, since_ms, error)) = failing else {
        j.raw(",\"storage\":{\"writable\":true}");
        return;
    };
    j.raw(",\"storage\":{\"writable\":false,\"failing\":[");
    for (i, w) in who.iter().enumerate() {
        if i > 0 {
            j.raw(",");
        }
        j.str(w.as_str());
    }
    j.raw("],\"since\":").str(&clock::iso8601(*since_ms)).raw(",\"error\":").str(error).raw("}");
}

/// What a node's health is decided from ([`HealthApi::verdict`]).
pub(super) struct Verdict {
    pub started: bool,
    pub ready: bool,
    /// Why it is not ready or what is degraded, as `/healthz`'s `error` says it.
    pub reason: Option<String>,
    storage: Option<(Vec<Writer>, i64, String)>,
    venue_health: Vec<rampart_state::VenueHealth>,
    /// The only thing wrong is that some venue (not every one) has no live data.
    only_some_down: bool,
}

/// What `/healthz`, `/version`, `/metrics` and the latency histograms read.
pub struct HealthApi {
    books: Rc<Books>,
    board: Arc<ArcSwap<Board>>,
    storage_health: Arc<StorageHealth>,
    /// A cluster node's links (`serve --role market|api`); `None` for the single process.
    pub(super) cluster: Option<Arc<NodeHealth>>,
    feed: &'static str,
    pub(super) started_ms: i64,
    /// The package version and the git revision it was built from, for `/version`.
    build: (&'static str, &'static str),
    /// `/metrics`, when measured.
    metrics: Option<Arc<Metrics>>,
}

/// What [`HealthApi`] reports besides the books and the board.
pub(super) struct HealthParts {
    pub storage_health: Arc<StorageHealth>,
    pub cluster: Option<Arc<NodeHealth>>,
    pub feed: &'static str,
    pub started_ms: i64,
    pub build: (&'static str, &'static str),
    pub metrics: Option<Arc<Metrics>>,
}

impl HealthApi {
    /// Reports on `books`, `board` and `parts`.
    pub(super) fn new(books: Rc<Books>, board: Arc<ArcSwap<Board>>, parts: HealthParts) -> HealthApi {
        let HealthParts { storage_health, cluster, feed, started_ms, build, metrics } = parts;
        HealthApi { books, board, storage_health, cluster, feed, started_ms, build, metrics }
    }

    /// `GET /version` (no key): what is running.
    pub(super) fn version(&self) -> Resp {
        let mut j = Json::with_capacity(96);
        j.raw("{\"version\":").str(self.build.0).raw(",\"revision\":").str(self.build.1).raw("}");
        respond(StatusCode::OK, j.finish())
    }

    /// `GET /metrics` (no key: scrapers carry none; bind it apart with `metrics.listen` to keep
    /// it private); every other path 404.
    pub(super) fn metrics_only(&self, req: &Parts) -> Resp {
        let Some(m) = self.metrics.as_ref().filter(|_| req.uri.path() == "/metrics") else {
            return error(StatusCode::NOT_FOUND, "not found");
        };
        if !matches!(req.method, Method::GET | Method::HEAD) {
            return method_not_allowed("GET");
        }
        let mut r = Response::new(Full::new(Bytes::from(m.encode())));
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(rampart_delivery::metrics::CONTENT_TYPE));
        r
    }

    /// The listed pairs of `venue` this process serves: a market node counts only its
    /// partition's (the registry lists every pair on every node).
    pub(super) fn served_pairs(&self, venue: Venue) -> i64 {
        let books = self.books.listed_books(venue);
        match self.cluster.as_deref() {
            Some(c) if c.role == rampart_cluster::node::Role::Market => {
                let registry = self.books.shared.registry();
                books.iter().filter(|&&b| c.partition.owns(&registry.get(b).symbol)).count() as i64
            }
            _ => books.len() as i64,
        }
    }

    /// What `/healthz`, `/readyz` and `/livez` decide from: started (the shards have their books
    /// and the board has been built from them, so the first rankings a client reads cover the
    /// whole market), storage, the venues and the cluster's links.
    pub(super) fn verdict(&self, now_ms: i64) -> Verdict {
        let started = self.books.shared.ready() && self.board.load().complete;
        let storage = self.storage_health.report(now_ms);
        // Live feed: the data is dead when no venue has any; degraded when one has none.
        let venue_health: Vec<rampart_state::VenueHealth> =
            self.books.venues.iter().map(|v| self.books.shared.venue_health(*v)).collect();
        let down = |h: &rampart_state::VenueHealth| h.state == rampart_state::VenueState::Down;
        let all_down = self.books.shared.live && venue_health.iter().all(down);
        let some_down = self.books.shared.live && venue_health.iter().any(down);
        let cluster = self.cluster.as_ref().and_then(|c| c.problem(now_ms));
        let cluster_down = cluster.as_ref().is_some_and(|p| !p.serving);
        let ready = started && storage.is_none() && !all_down && !cluster_down;
        let reason = if !started {
            Some("starting".to_owned())
        } else if let Some(p) = &cluster {
            Some(p.why.clone())
        } else if storage.is_some() {
            let full = self.storage_health.full_reason(now_ms);
            Some(full.unwrap_or_else(|| "storage cannot be written".to_owned()))
        } else if all_down {
            Some("no venue has live data".to_owned())
        } else if some_down {
            Some("a venue has no live data".to_owned())
        } else {
            None
        };
        let only_some_down = started && cluster.is_none() && storage.is_none() && !all_down && some_down;
        Verdict { started, ready, reason, storage, venue_health, only_some_down }
    }

    // Long: one JSON document written field by field in its documented order (shards, then each
    // venue's state and counters); splitting it would scatter the shape across functions.
    pub(super) fn healthz(&self, now_ms: i64) -> Resp {
        let Verdict { started, ready, reason, storage, venue_health, only_some_down } = self.verdict(now_ms);
        let mut j = Json::with_capacity(512);
        match (started, &reason) {
            (false, _) => j.raw("{\"error\":\"starting\",\"status\":\"starting\""),
            // One venue down of several: degraded, without an error (the venues say which).
            (true, Some(_)) if only_some_down => j.raw("{\"status\":\"degraded\""),
            (true, Some(why)) => j.raw("{\"error\":").str(why).raw(",\"status\":\"degraded\""),
            (true, None) => j.raw("{\"status\":\"ok\""),
        };
        j.raw(",\"feed\":").str(self.feed).raw(",\"uptimeS\":").int((now_ms - self.started_ms) / 1000);
        write_storage_health(&mut j, storage.as_ref());
        if let Some(c) = &self.cluster {
            write_cluster_health(&mut j, c, now_ms);
        }
        j.raw(",\"shards\":[");
        for (i, s) in self.books.shared.stats.iter().enumerate() {
            use std::sync::atomic::Ordering::Relaxed;
            if i > 0 {
                j.raw(",");
            }
            j.raw("{\"shard\":").int(i as i64);
            j.raw(",\"ready\":").bool(s.ready.load(Relaxed));
            j.raw(",\"books\":").int(s.books.load(Relaxed) as i64);
            j.raw(",\"ticks\":").int(s.ticks.load(Relaxed) as i64);
            j.raw(",\"crossedBooks\":").int(s.crossed_books.load(Relaxed) as i64);
            j.raw("}");
        }
        j.raw("],\"exchanges\":[");
        for (i, v) in self.books.venues.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            let pairs = self.served_pairs(*v);
            if !self.books.shared.live {
                j.raw("{\"exchange\":").str(v.as_str()).raw(",\"state\":").str(if started { "ok" } else { "starting" });
                j.raw(",\"pairs\":").int(pairs).raw(",\"perp\":").str(self.perp_state(*v, started, now_ms)).raw("}");
                continue;
            }
            use std::sync::atomic::Ordering::Relaxed;
            let sum = |f: fn(&rampart_state::VenueStats) -> &std::sync::atomic::AtomicU64| {
                self.books.shared.venue_sum(*v, |s| f(s).load(Relaxed)) as i64
            };
            let h = &venue_health[i];
            let (open, planned, live, last) = (h.open, h.planned, h.live, h.last_message_ms);
            j.raw("{\"exchange\":").str(v.as_str()).raw(",\"state\":").str(h.state.as_str());
            if !h.why.is_empty() {
                j.raw(",\"reason\":").str(h.why);
            }
            j.raw(",\"pairs\":").int(pairs).raw(",\"perp\":").str(self.perp_state(*v, started, now_ms));
            j.raw(",\"booksLive\":").int(live);
            j.raw(",\"booksWithHistory\":").int(sum(|s| &s.books_history));
            j.raw(",\"connections\":").int(open);
            j.raw(",\"connectionsPlanned\":").int(planned);
            j.raw(",\"lastMessageAgeMs\":");
            if last > 0 {
                j.int((now_ms - last).max(0));
            } else {
                j.raw("null");
            }
            for c in rampart_state::VENUE_COUNTERS {
                j.raw(",\"").raw(c.health).raw("\":").int(sum(c.field));
            }
            j.raw(",\"reconnects\":{");
            for (i, r) in rampart_state::Reconnect::ALL.iter().enumerate() {
                if i > 0 {
                    j.raw(",");
                }
                let n = self.books.shared.venue_sum(*v, |s| s.reconnects[*r as usize].load(Relaxed));
                j.raw("\"").raw(r.as_str()).raw("\":").int(n as i64);
            }
            j.raw("}");
            if let Some(rs) = &self.books.shared.rest_stats {
                let r = &rs[v.index()];
                j.raw(",\"rest\":{\"requests\":").int(r.requests.load(Relaxed) as i64);
                j.raw(",\"errors\":").int(r.errors.load(Relaxed) as i64);
                j.raw(",\"rateLimited\":").int(r.rate_limited.load(Relaxed) as i64);
                j.raw(",\"backfilled\":").int(r.backfilled.load(Relaxed) as i64);
                j.raw(",\"backfillFailed\":").int(r.backfill_failed.load(Relaxed) as i64);
                j.raw(",\"listings\":").int(r.listings.load(Relaxed) as i64);
                j.raw(",\"delistings\":").int(r.delistings.load(Relaxed) as i64);
                j.raw(",\"delistingsSuspected\":").int(r.delistings_suspected.load(Relaxed) as i64);
                j.raw(",\"relistings\":").int(r.relistings.load(Relaxed) as i64);
                j.raw(",\"added\":").int(r.added.load(Relaxed) as i64);
                j.raw(",\"listingFaults\":").int(r.listing_faults.load(Relaxed) as i64);
                j.raw(",\"tasksLost\":").int(r.tasks_lost.load(Relaxed) as i64);
                j.raw(",\"newListings\":").int(r.new_listings.load(Relaxed) as i64).raw("}");
            }
            j.raw("}");
        }
        j.raw("]}");
        respond(if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, j.finish())
    }

    /// A venue's perpetual feed as `/healthz` says it (`decisions.md` §17: it never makes the
    /// server unready): `off` when `[derivatives] enabled = false`; on the simulated feed
    /// `connecting` until the shards are ready, then `up` (the simulator does not go down). On
    /// the live feed ([`live_perp_state`]): `off` when the venue has no perpetual here (its
    /// listing failed or matched none), `up` while every perpetual connection is open and one
    /// brought a message within [`PERP_UP_SILENCE_MS`], `down` when none is open after one was,
    /// else `connecting`. A cluster's api node reads no feed: it says `up` once its market nodes'
    /// snapshots have brought it a perpetual of the venue, `off` while none has.
    fn perp_state(&self, venue: rampart_engine::Venue, started: bool, now_ms: i64) -> &'static str {
        if self.cluster.as_deref().is_some_and(|c| c.role == rampart_cluster::node::Role::Api) {
            let shared = &self.books.shared;
            let relayed = self.books.listed_books(venue).iter().any(|b| shared.slots[b.index()].perp.load().is_some());
            return if relayed { "up" } else { "off" };
        }
        let shared = &self.books.shared;
        let on = shared.derivatives.load(std::sync::atomic::Ordering::Relaxed);
        match (on, shared.live, started) {
            (false, _, _) => "off",
            (true, true, _) => live_perp_state(shared, venue, now_ms),
            (true, false, false) => "connecting",
            (true, false, true) => "up",
        }
    }

    /// `GET /v1/debug/latency`: the tick-to-decision histogram over every shard (live feed:
    /// Binance microsecond event time to the alert decision), for the latency benchmark.
    pub(super) fn latency(&self) -> Resp {
        let mut all = rampart_state::latency_histogram();
        let mut inside = rampart_state::latency_histogram();
        for l in self.books.shared.latency.iter() {
            if let Ok(l) = l.lock() {
                let _ = all.add(&l.tick_to_decision_us);
                let _ = inside.add(&l.read_to_decision_us);
            }
        }
        let mut j = Json::with_capacity(256);
        for (i, (key, h)) in [("tickToDecisionUs", &all), ("readToDecisionUs", &inside)].into_iter().enumerate() {
            j.raw(if i == 0 { "{\"" } else { ",\"" }).raw(key).raw("\":{\"count\":").int(h.len() as i64);
            for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
                j.raw(",\"").raw(name).raw("\":").int(h.value_at_quantile(q) as i64);
            }
            j.raw(",\"max\":").int(h.max() as i64).raw("}");
        }
        j.raw("}");
        respond(StatusCode::OK, j.finish())
    }

    /// `DELETE /v1/debug/latency` (operators): empties the histograms (the start of a
    /// measurement).
    pub(super) fn latency_reset(&self) -> Resp {
        for l in self.books.shared.latency.iter() {
            if let Ok(mut l) = l.lock() {
                l.tick_to_decision_us.reset();
                l.read_to_decision_us.reset();
            }
        }
        respond(StatusCode::OK, "{\"reset\":true}".to_owned())
    }
}

/// A live perpetual feed is `up` only if a message came within this long (Bybit and Binance push
/// every second, OKX open interest every 3 s).
pub(crate) const PERP_UP_SILENCE_MS: i64 = 60_000;

/// The live feed's perpetual state of `venue` over every shard at `now_ms` (see
/// `HealthApi::perp_state`).
fn live_perp_state(shared: &rampart_state::Shared, venue: rampart_engine::Venue, now_ms: i64) -> &'static str {
    use std::sync::atomic::Ordering::Relaxed;
    let planned = shared.venue_sum(venue, |s| s.perp_connections_planned.load(Relaxed));
    let open = shared.venue_sum(venue, |s| s.perp_connections_open.load(Relaxed));
    let messages = shared.venue_sum(venue, |s| s.perp_messages.load(Relaxed));
    let each = shared.venue_stats.iter().skip(venue.index()).step_by(rampart_engine::Venue::COUNT);
    let last = each.map(|s| s.perp_last_message_ms.load(Relaxed)).max().unwrap_or(0);
    match (planned, open) {
        (0, _) => "off",
        (p, o) if o >= p && messages > 0 && now_ms - last < PERP_UP_SILENCE_MS => "up",
        (_, 0) if messages > 0 => "down",
        _ => "connecting",
    }
}
