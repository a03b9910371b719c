//! `rampart serve`, a single process or a cluster's market node (an api node is
//! [`node`]'s): the settings, then the store, the bound port and the first key, the
//! market and its shards, the threads that write, the board and the HTTP front, served until
//! SIGTERM or SIGINT and then stopped in order within the shutdown grace.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use arc_swap::ArcSwap;
use rampart_net::api::front::{Front, FrontConfig, FrontStorage};
use rampart_net::api::keys::KeyWatcher;
use rampart_net::board::BoardThread;
use rampart_net::site_alerts::market::MarketAlerts;
use rampart_shard::ShardSet;
use rampart_state::board::Board;
use rampart_state::clock::{self, SharedClock};
use rampart_state::EventQueue;
use rampart_store::storage::StorageThread;
use rampart_store::store::Store;

use crate::cli::ServeArgs;
use crate::role::NodeRole;
use feed::{start_feed, start_sim_delistings};
use persistence::Persistence;
use process::{announce, bind, configured, serve_until_stopped};
use settings::ServeSettings;

pub(crate) mod feed;
mod node;
mod persistence;
pub(crate) mod process;
pub(crate) mod settings;

/// `rampart serve`: an api node is handed to [`node::serve_api`]; a single process or a market
/// node starts here, serves until SIGTERM or SIGINT, then stops its parts in order.
// Long: the start-up of one process in the order its parts depend on each other, then the stop in
// reverse; wiring only.
pub(crate) fn run(args: ServeArgs) -> Result<()> {
    let s = settings::settings(args)?;
    if let NodeRole::Api(partitions) = s.role {
        return node::serve_api(s, partitions);
    }
    // The shards' io_uring needs locked memory: refused here, before anything is printed.
    rampart_shard::ensure_memlock(s.shards)?;
    // One server per data directory (or PostgreSQL database; a market node: one per
    // partition), checked before anything is printed or opened.
    let _lock = s.role.lock(&s.store)?;
    // The one clock every part of the process reads.
    let clock = clock::system();
    let (front_config, descriptors) = FrontConfig::default().fit_descriptors();
    tracing::info!(
        "descriptor limit {descriptors}: up to {} HTTP connections, {} per address",
        front_config.connections_max,
        front_config.connections_per_address_max
    );
    let mut store = s.store.open().with_context(|| format!("opening {}", s.store.describe()))?;
    // The port is bound before the first key is made: a start that cannot bind loses no key.
    // While the venues are listed it answers 503 "starting".
    let listener = bind(&s.listen, s.reuseport).with_context(|| format!("binding {}", s.listen))?;
    let metrics_listener = match &s.metrics_listen {
        Some(a) => Some(bind(a, false).with_context(|| format!("binding the metrics address {a}"))?),
        None => None,
    };
    announce(&mut store, &listener, metrics_listener.as_ref(), clock.now_ms(), s.role == NodeRole::Single)?;
    let claims = claim_cpus(&s);
    // A market node on PostgreSQL starts as its partition's hot standby (issue #50): its books
    // live (venues connected, ticks applied, levels and walls computed) but no alert on them,
    // nothing recorded or published, its port answering `/livez` 200 and everything else 503
    // with the owner's lease, until it owns the partition; then only the alerts are handed over.
    let standby = s.role.may_wait(&s.store);
    let alerts_on = Arc::new(std::sync::atomic::AtomicBool::new(!standby));
    let (shards, rest) = start_feed(&s, &store, &listener, &claims.cpus, &clock, &alerts_on)?;
    log_feed(&s, &shards, &store);
    let owner = if standby { take_over(&s, &store, &listener, &shards, &clock, &alerts_on)? } else { None };
    let persistence = Persistence::start(&s, &shards, &clock, owner.as_ref().map(|o| o.ownership.fence()))?;
    start_sim_delistings(&s, &shards)?;
    let watch_venues = match s.live.is_some() {
        true => Some(rampart_venue::watch::VenueWatch::start(shards.shared().clone(), s.venues.clone())?),
        false => None,
    };
    let links = match s.role {
        NodeRole::Market(p) => {
            let stats = persistence.writer.stats.clone();
            Some(node::MarketLinks::start(&s, p, &shards, &clock, owner.as_ref(), stats)?)
        }
        _ => None,
    };
    let metrics = persistence.metrics(&s, &shards, &clock, links.as_ref().map(|l| l.health.clone()));
    let (storage_thread, storage_join) = StorageThread::start(s.store.open()?)?;
    let market_alerts = (s.role == NodeRole::Single).then(|| persistence.market_events.clone());
    let (board, board_thread) = start_board(&shards, &clock, market_alerts)?;
    let front = Front::builder(
        shards.shared().clone(),
        shards.commands(),
        s.venues.clone(),
        if s.live.is_some() { "live" } else { "sim" },
        s.plans.clone(),
        FrontStorage {
            keys: KeyWatcher::start(store, clock.clone())?,
            thread: storage_thread,
            health: persistence.health.clone(),
        },
        s.allow_private,
    )
    .with_writer_stats(persistence.writer.stats.clone());
    let mut front = configured(front, &s, metrics, metrics_listener.is_some(), &clock, board);
    if let Some(l) = &links {
        front = front.with_cluster(l.health.clone());
    }
    let fronts = Arc::new(front.build());
    let (served, watch) =
        serve_until_stopped(listener, metrics_listener, fronts, s.fronts, s.reuseport, front_config, board_thread)?;
    if let Some(rest) = rest {
        watch.stage("stopping the venue REST thread");
        rest.stop();
    }
    if let Some(w) = watch_venues {
        watch.stage("stopping the venue watch");
        w.stop();
    }
    watch.stage("stopping the storage thread");
    storage_join.join();
    if let Some(l) = links {
        watch.stage("stopping the cluster threads");
        l.stop();
    }
    watch.stage("stopping the shards");
    shards.stop();
    persistence.stop(&watch);
    if let Some(o) = owner {
        // Last: every firing of this node is committed before a standby takes over.
        watch.stage("releasing the partition");
        drop(o);
    }
    watch.finish();
    served
}

/// A hot standby's wait: its port says so while [`NodeRole::own`] waits for the lease; once it
/// owns the partition, every active alert goes onto the running shards.
fn take_over(
    s: &ServeSettings,
    store: &Store,
    listener: &std::net::TcpListener,
    shards: &ShardSet,
    clock: &SharedClock,
    alerts_on: &std::sync::atomic::AtomicBool,
) -> Result<Option<crate::role::Owner>> {
    let (not_ready, live) = crate::role::standby_bodies(&s.role.partition().to_string(), None, false);
    let phase = crate::starting::Phase::new(not_ready, live);
    let waiting = crate::starting::Starting::start_as(listener.try_clone()?, phase.clone())?;
    let shared = shards.shared().clone();
    let owner = s.role.own(&s.store, clock, &phase, &|| shared.ready())?;
    let claimed_ms = clock.now_ms();
    let n = feed::hand_alerts(store, shards, s.role.partition(), alerts_on)?;
    waiting.finish()?;
    tracing::info!("partition owned: {n} alerts handed to the running shards in {} ms", clock.now_ms() - claimed_ms);
    Ok(owner)
}

/// Logs what the server serves, once started.
fn log_feed(s: &ServeSettings, shards: &ShardSet, store: &Store) {
    tracing::info!(
        "feed {}, {} books on {} venues, {} shards, data in {}",
        if s.live.is_some() { "live" } else { "sim" },
        shards.shared().registry().len(),
        s.venues.len(),
        shards.len(),
        if store.is_postgres() { s.store.describe() } else { store.path().display().to_string() }
    );
}

/// The shards' CPUs, claimed for the life of the process (the claims are kept in the returned
/// value), logged.
fn claim_cpus(s: &ServeSettings) -> rampart_shard::cpus::CpuClaims {
    let lock_dir = std::env::var_os("XDG_RUNTIME_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let claims = rampart_shard::cpus::choose(&s.cpus, s.shards, &rampart_shard::cpus::allowed(), &lock_dir);
    log_cpus(s, &claims.cpus);
    claims
}

/// Logs where each shard runs.
fn log_cpus(s: &ServeSettings, cpus: &[Option<usize>]) {
    for (i, cpu) in cpus.iter().enumerate() {
        match cpu {
            Some(c) => tracing::info!("shard {i} on CPU {c}"),
            None => tracing::info!(
                "shard {i} unpinned ({})",
                match s.cpus {
                    rampart_shard::cpus::CpuPolicy::None => "--cpus none",
                    _ => "every allowed CPU is taken by another rampart process",
                }
            ),
        }
    }
}

/// The board the front answers metrics, rankings and `/v1/market` from, and the thread that
/// rebuilds it every second.
/// The site's market alerts run on each build and leave on `market_events`.
/// A market node evaluates no market alert: its board holds only its partition's books.
fn start_board(
    shards: &ShardSet,
    clock: &SharedClock,
    market_events: Option<Arc<EventQueue>>,
) -> Result<(Arc<ArcSwap<Board>>, BoardThread)> {
    let board = Arc::new(ArcSwap::from_pointee(Board::empty()));
    let market = market_events.map(MarketAlerts::new);
    let thread = BoardThread::start(shards.shared().clone(), board.clone(), clock.clone(), market)?;
    Ok((board, thread))
}
