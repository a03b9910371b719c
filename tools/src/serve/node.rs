//! `serve --role market|api`: the two roles of a cluster node (issue #18). A market node is
//! today's server restricted to its partition of the books, with snapshot publishing and the
//! command server added and the API left to the api nodes; an api node is a front over a
//! replica of every partition's snapshots, writing through to PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use arc_swap::ArcSwap;
use rampart_cluster::commands::{CommandServer, Forwarder};
use rampart_cluster::inbox::{Beacon, Listener};
use rampart_cluster::node::{NamedLock, NodeHealth, Role};
use rampart_cluster::snapshots::{Replica, SnapshotPublisher};
use rampart_delivery::metrics::WebhookMetrics;
use rampart_engine::sim;
use rampart_engine::Registry;
use rampart_net::api::front::{Front, FrontConfig, FrontStorage};
use rampart_net::api::keys::KeyWatcher;
use rampart_net::api::metrics::{Metrics, Sources as MetricsSources};
use rampart_net::board::BoardThread;
use rampart_net::site_alerts::market::MarketAlerts;
use rampart_net::site_alerts::watch::SiteAlertWatcher;
use rampart_shard::ShardSet;
use rampart_state::board::Board;
use rampart_state::clock::{self, SharedClock};
use rampart_state::partition::Partition;
use rampart_state::{EventQueue, Shared};
use rampart_store::storage::{Checkpointer, Pruning};
use rampart_store::storage::{StorageHealth, StorageThread};
use rampart_store::text::Texts;
use rampart_store::writer::{Writer, WriterHooks};

use crate::role::Owner;
use crate::serve::feed::list_live;
use crate::serve::process::{announce, bind, configured, serve_until_stopped};
use crate::serve::settings::ServeSettings;

/// A market node's cluster threads: snapshots out, commands in.
pub(crate) struct MarketLinks {
    pub(crate) health: Arc<NodeHealth>,
    snapshots: SnapshotPublisher,
    commands: CommandServer,
    /// Announces the writer's inbox commits to the api nodes' streams.
    inbox: Beacon,
}

impl MarketLinks {
    /// Starts publishing `shards`' books and serving partition `p`'s commands.
    pub(crate) fn start(
        s: &ServeSettings,
        p: Partition,
        shards: &ShardSet,
        clock: &SharedClock,
        owner: Option<&Owner>,
        writer_stats: Arc<rampart_store::writer::WriterStats>,
    ) -> Result<MarketLinks> {
        let Some(url) = s.nats.clone() else { bail!("--role market needs --nats") };
        let health = NodeHealth::new(Role::Market, p);
        let health = Arc::new(match owner {
            Some(o) => health.with_ownership(o.ownership.clone()),
            None => health,
        });
        let shared = shards.shared().clone();
        let snapshots = SnapshotPublisher::start(shared.clone(), p, url.clone(), clock.clone(), health.clone())?;
        let store = s.store.open()?;
        let inbox = Beacon::start(url.clone(), writer_stats)?;
        let commands = CommandServer::start(shared, shards.commands(), p, store, url, clock.clone(), health.clone())?;
        tracing::info!("market node of partition {p}: snapshots and commands on NATS");
        Ok(MarketLinks { health, snapshots, commands, inbox })
    }

    /// Stops both threads (before the shards).
    pub(crate) fn stop(self) {
        drop(self.commands);
        drop(self.snapshots);
        drop(self.inbox);
    }
}

/// The books an api node serves: the simulated market's from the same seed, pairs and venues as
/// its market nodes', or (live) the venues' listings, read once at start like a market node
/// does. Books are named by venue and symbol on the wire, so the nodes' registries need not be
/// the same list; a pair listed after an api node started is not served by it until it restarts.
fn registry(s: &ServeSettings) -> Result<Arc<Registry>> {
    if let Some(venues) = &s.live {
        let (registry, _) = list_live(venues, rampart_outbound::tls_config(&[]))?;
        return Ok(Arc::new(registry));
    }
    let universe = sim::universe(s.seed, s.sim_pairs);
    Ok(Arc::new(Registry::new(sim::instruments(&universe, &s.venues)).map_err(|e| anyhow::anyhow!("registry: {e:?}"))?))
}

/// A live api node's watch of the venues' listings: every venue's refresh period (as the
/// market nodes refresh theirs), the pairs listed since are added to the replica's registry, so
/// the snapshots that carry them (their market node adds them too) are applied and the API
/// serves them without a restart. Delistings need nothing here: a book's status comes with its
/// snapshots. Beyond `BOOKS_ADDED_MAX` added books, new pairs are logged and not served.
struct ListingWatch {
    _thread: Option<rampart_state::shutdown::StoppableThread>,
}

impl ListingWatch {
    fn start(s: &ServeSettings, shared: &Arc<Shared>, partitions: u16) -> Result<ListingWatch> {
        let Some(venues) = s.live.clone() else { return Ok(ListingWatch { _thread: None }) };
        let period = Duration::from_secs(venues.iter().map(|v| v.refresh_s.max(10)).min().unwrap_or(300));
        let shared = shared.clone();
        let thread = rampart_state::shutdown::StoppableThread::spawn("listings", move |stop| {
            let tls = rampart_outbound::tls_config(&[]);
            let mut next = std::time::Instant::now() + period;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                if std::time::Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
                next = std::time::Instant::now() + period;
                add_listed(&shared, &venues, tls.clone(), partitions);
            }
        })?;
        Ok(ListingWatch { _thread: Some(thread) })
    }
}

/// Adds to `shared`'s registry the trading pairs `venues` list that it does not have.
fn add_listed(
    shared: &Shared,
    venues: &[rampart_venue::VenueSettings],
    tls: Option<Arc<rustls::ClientConfig>>,
    partitions: u16,
) {
    let registry = shared.registry();
    let mut new = Vec::new();
    for (v, listed) in venues.iter().zip(rampart_venue::rest::list_venues(venues, tls)) {
        match listed {
            Ok(list) => new.extend(
                list.into_iter()
                    .map(|l| l.instrument)
                    .filter(|i| i.status == rampart_engine::instrument::Status::Trading)
                    .filter(|i| registry.find(i.venue, &i.symbol).is_none()),
            ),
            Err(e) => tracing::warn!("{}: refreshing the listing: {e}", v.venue.as_str()),
        }
    }
    if new.is_empty() {
        return;
    }
    let count = new.len();
    let grown = match registry.with_added(new) {
        Ok(r) => r,
        Err(e) => return tracing::warn!("{count} new pairs not served: {e:?}"),
    };
    match shared.grow_replica(grown, partitions) {
        Ok(ids) => tracing::info!("{} pairs listed since start, now served", ids.len()),
        Err(e) => tracing::warn!("{count} new pairs not served: {e}"),
    }
}

/// The site's market alerts on an api node: evaluated by its board thread while it holds the
/// `site-market-alerts` lock (one api node of the cluster at a time), their firings written by
/// a writer of its own.
struct MarketAlertsHere {
    events: Arc<EventQueue>,
    lock: NamedLock,
    writer: Writer,
    _watcher: SiteAlertWatcher,
}

impl MarketAlertsHere {
    fn start(
        s: &ServeSettings,
        shared: &Arc<Shared>,
        health: &Arc<StorageHealth>,
        clock: &SharedClock,
        node: &NodeHealth,
    ) -> Result<Self> {
        let events = Arc::new(EventQueue::new(rampart_state::EVENTS_MAX));
        let store = s.store.open()?.for_background()?.with_telegram(s.telegram.is_some());
        let (books, queues) = (shared.books.clone(), vec![events.clone()]);
        // This writer records the site's market alert firings only: alerts expire on the
        // market nodes, where their shards run.
        let hooks = WriterHooks { owns: Box::new(|_| false), ..WriterHooks::new(Box::new(Texts), Box::new(|_, _| {})) };
        let writer = Writer::start(store, queues, books, health.clone(), clock.clone(), hooks)?;
        let watcher = SiteAlertWatcher::start(s.store.open()?, shared.clone())?;
        let lock = NamedLock::start(s.store.open()?, "site-market-alerts", node.market_alerts.clone(), clock.clone())?;
        Ok(MarketAlertsHere { events, lock, writer, _watcher: watcher })
    }

    /// Its writer's counters (the beacon announces its inbox commits).
    fn writer_stats(&self) -> Arc<rampart_store::writer::WriterStats> {
        self.writer.stats.clone()
    }

    fn alerts(&self) -> MarketAlerts {
        MarketAlerts::new(self.events.clone()).with_gate(self.lock.held.clone())
    }

    fn stop(self) {
        self.writer.stop();
    }
}

/// `serve --role api`: the front over every partition's snapshots.
// Long: an api node's start-up in the order its parts depend on each other; wiring only.
pub(crate) fn serve_api(s: ServeSettings, partitions: u16) -> Result<()> {
    let Some(url) = s.nats.clone() else { bail!("--role api needs --nats") };
    let clock = clock::system();
    let (front_config, _) = FrontConfig::default().fit_descriptors();
    let mut store = s.store.open().with_context(|| format!("opening {}", s.store.describe()))?;
    let listener = bind(&s.listen, s.reuseport).with_context(|| format!("binding {}", s.listen))?;
    let metrics_listener = match &s.metrics_listen {
        Some(a) => Some(bind(a, false).with_context(|| format!("binding the metrics address {a}"))?),
        None => None,
    };
    let registry = registry(&s)?;
    announce(&mut store, &listener, metrics_listener.as_ref(), clock.now_ms(), true)?;
    let shared = Arc::new(Shared::replica(registry, partitions, rampart_state::BOOKS_ADDED_MAX));
    let listings = ListingWatch::start(&s, &shared, partitions)?;
    let health = Arc::new(NodeHealth::new(Role::Api, Partition { index: 0, count: partitions }));
    let replica = Replica::start(shared.clone(), url.clone(), clock.clone(), health.clone())?;
    let forwarder = Forwarder::start(shared.clone(), url.clone(), health.clone())?;
    tracing::info!("api node over {partitions} partitions, {} books", shared.registry().len());
    let storage_health = Arc::new(StorageHealth::at(s.store.describe()));
    // One api node at a time prunes the shared database (the lock's holder).
    let pruner = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let retention_lock = NamedLock::start(s.store.open()?, "retention", pruner.clone(), clock.clone())?;
    let pruning = Pruning { keep: s.retention, gate: Some(pruner) };
    let checkpointer = Checkpointer::start(
        s.store.open()?,
        Duration::from_secs(1),
        storage_health.clone(),
        clock.clone(),
        Some(pruning),
    )?;
    let sources = MetricsSources {
        shared: shared.clone(),
        venues: s.venues.clone(),
        commands: forwarder.queues(),
        events: Vec::new(),
        delivery: Arc::default(),
        storage: storage_health.clone(),
        started_ms: clock.now_ms(),
        clock: clock.clone(),
        cluster: Some(health.clone()),
    };
    let metrics = Arc::new(Metrics::new(sources, &WebhookMetrics::default()));
    let (storage_thread, storage_join) = StorageThread::start(s.store.open()?)?;
    let market = MarketAlertsHere::start(&s, &shared, &storage_health, &clock, &health)?;
    let board = Arc::new(ArcSwap::from_pointee(Board::empty()));
    let board_thread = BoardThread::start(shared.clone(), board.clone(), clock.clone(), Some(market.alerts()))?;
    // Streams wake on every node's inbox commits, announced on NATS (this node's site market
    // alerts' writer among them); the front's count is the listener's alone, so an announcement
    // heard is never announced again.
    let inbox_beacon = Beacon::start(url.clone(), market.writer_stats())?;
    let heard = Arc::new(rampart_store::writer::WriterStats::default());
    let inbox_listener = Listener::start(url.clone(), heard.clone())?;
    let front = Front::builder(
        shared.clone(),
        forwarder.commands(shared.clone()),
        s.venues.clone(),
        if s.live.is_some() { "live" } else { "sim" },
        s.plans.clone(),
        FrontStorage { keys: KeyWatcher::start(store, clock.clone())?, thread: storage_thread, health: storage_health },
        s.allow_private,
    )
    .with_writer_stats(heard);
    let fronts = Arc::new(
        configured(front, &s, metrics, metrics_listener.is_some(), &clock, board).with_cluster(health).build(),
    );
    let (served, watch) =
        serve_until_stopped(listener, metrics_listener, fronts, s.fronts, s.reuseport, front_config, board_thread)?;
    watch.stage("stopping the storage thread");
    storage_join.join();
    watch.stage("stopping the market alerts' writer");
    market.stop();
    watch.stage("stopping the cluster threads");
    drop(inbox_listener);
    drop(inbox_beacon);
    drop(forwarder);
    drop(replica);
    // A listing in flight to a venue that hangs could hold this past the stop's bound, which
    // then ends the process anyway.
    watch.stage("stopping the listing watch");
    drop(listings);
    watch.stage("stopping the checkpoint thread");
    drop(checkpointer);
    drop(retention_lock);
    watch.finish();
    served
}
