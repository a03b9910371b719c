//! The market a server serves: the simulated market, or the venues listed live (the port
//! answers 503 "starting" meanwhile) with the REST thread's listing refreshes; the stored alerts
//! loaded onto their books; the shards started over it; simulated delistings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use rampart_engine::sim::{self, SimConfig};
use rampart_engine::{Registry, Venue};
use rampart_shard::live::LiveFeed;
use rampart_shard::{ShardConfig, ShardSet};
use rampart_state::clock::SharedClock;
use rampart_state::Command as ShardCommand;
use rampart_store::store::Store;
use rampart_venue::listing::ListingChange;
use rampart_venue::perp_refresh::{OnPerpListing, PerpChange, PerpRefresh, PerpWatch};
use rampart_venue::rest::{self, Rest, RestBooks};
use rampart_venue::VenueSettings;

use super::settings::ServeSettings;
use crate::starting;

/// The shards' settings of a `serve` run.
fn shard_config(s: &ServeSettings, cpus: &[Option<usize>], clock: &SharedClock) -> ShardConfig {
    ShardConfig {
        shards: s.shards,
        depth_levels_max: 1_000,
        bars_max: 512,
        sim: SimConfig { seed: s.seed, step_interval_ms: s.sim_step_ms, ..SimConfig::default() },
        poll_interval: Duration::from_millis(1),
        walls_min_ratio: s.walls_min_ratio,
        fault_hang_on_stop: s.faults.hang_shard_stop,
        events_max: s.events_max,
        cpus: cpus.to_vec(),
        clock: clock.clone(),
        partition: s.role.partition(),
        spin_before_park: Duration::from_micros(u64::from(s.shard_spin_us)),
        derivatives: s.derivatives,
    }
}

/// Lists the venues (live; the port answers 503 "starting" meanwhile) or builds the simulated
/// market, loads every active alert onto its book, and starts the shards (and, live, the REST
/// thread). While `alerts_on` is false (a hot standby, issue #50) no alert is loaded, not even
/// onto a book listed meanwhile: [`hand_alerts`] hands them over once the node owns its
/// partition.
pub(super) fn start_feed(
    s: &ServeSettings,
    store: &Store,
    listener: &std::net::TcpListener,
    cpus: &[Option<usize>],
    clock: &SharedClock,
    alerts_on: &Arc<AtomicBool>,
) -> Result<(ShardSet, Option<Rest>)> {
    let load = |registry: &Registry| -> Result<rampart_shard::StartAlerts> {
        match alerts_on.load(Ordering::Acquire) {
            true => load_alerts(store, registry, s.role.partition()),
            false => Ok(rampart_shard::StartAlerts::default()),
        }
    };
    let shard_config = shard_config(s, cpus, clock);
    let Some(venues) = &s.live else {
        let universe = Arc::new(sim::universe(s.seed, s.sim_pairs));
        let registry = Arc::new(
            Registry::new(sim::instruments(&universe, &s.venues)).map_err(|e| anyhow::anyhow!("registry: {e:?}"))?,
        );
        let alerts = load(&registry)?;
        return Ok((ShardSet::start_sim(&shard_config, registry, universe, alerts)?, None));
    };
    let tls = rampart_outbound::tls_config(&[]);
    let starting = starting::Starting::start(listener.try_clone()?)?;
    let listed = list_pairs_and_perps(venues, tls.clone(), s.derivatives);
    starting.finish()?;
    let (registry, natives, perps) = listed?;
    let registry = Arc::new(registry);
    let alerts = load(&registry)?;
    let natives = Arc::new(arc_swap::ArcSwap::from_pointee(natives));
    let perp_watch = s.derivatives.then(|| PerpWatch::new(&registry, &perps));
    let n = shard_config.shards.max(1);
    let mut rest = Rest::new(n);
    let feed = LiveFeed {
        venues: venues.clone(),
        natives: natives.clone(),
        tls: tls.clone(),
        rest: (0..n).map(|i| rest.handle(i)).collect(),
        rest_stats: rest.stats.clone(),
        verify_checksums: s.verify_checksums,
        pacers: Arc::new(Default::default()),
        perps,
        binance_oi_poll_ms: s.binance_oi_poll_s as i64 * 1000,
        okx_funding_poll_ms: s.okx_funding_poll_s as i64 * 1000,
    };
    let books_now = Arc::new(arc_swap::ArcSwap::new(registry));
    let shards = ShardSet::start_live(&shard_config, books_now.clone(), feed, alerts)?;
    let on_listing =
        listing_hook(shards.commands(), shards.shared().clone(), natives.clone(), s.store.open()?, alerts_on.clone());
    let shared = shards.shared().clone();
    let grow = Box::new(move |grown| shared.grow(grown));
    let books = RestBooks { registry: books_now, natives, bars_max: shard_config.bars_max };
    let perps = perp_watch.map(|watch| PerpRefresh { watch, on_change: perp_listing_hook(shards.commands()) });
    rest.start(venues.clone(), books, tls, on_listing, grow, perps)?;
    Ok((shards, Some(rest)))
}

/// A hot standby that now owns its partition (issue #50): every active alert of the partition
/// handed to the shards that run, then alerts on for books listed from now on. A book listed
/// between the two gets its alerts from this read (it is in the registry) or the next listing.
pub(super) fn hand_alerts(
    store: &Store,
    shards: &ShardSet,
    partition: rampart_state::partition::Partition,
    alerts_on: &AtomicBool,
) -> Result<usize> {
    let registry = shards.shared().registry();
    let alerts = load_alerts(store, &registry, partition)?;
    let commands = shards.commands();
    let n = alerts.books.len() + alerts.universe.len();
    for (book, change) in alerts.books {
        send_waiting(&commands, book, ShardCommand::Alert { book, change });
    }
    for (venue, change) in alerts.universe {
        while commands.broadcast(|| ShardCommand::Universe { venue, change }).is_err() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    alerts_on.store(true, Ordering::Release);
    Ok(n)
}

/// Every active alert on a served book, and every `*` alert, to go onto the shards before they
/// report ready; the others stay in storage (evaluated once their venue lists the pair).
fn load_alerts(
    store: &Store,
    registry: &Registry,
    partition: rampart_state::partition::Partition,
) -> Result<rampart_shard::StartAlerts> {
    let mut alerts = rampart_shard::StartAlerts::default();
    let mut orphaned = 0;
    for row in store.active_alerts()?.into_iter().filter(|r| partition.owns_alert(&r.symbol)) {
        if row.spec().is_none() {
            orphaned += 1;
            continue;
        }
        let change = row.change(false);
        if row.symbol == rampart_state::partition::UNIVERSE {
            alerts.universe.push((row.exchange, change));
            continue;
        }
        match registry.find(row.exchange, &row.symbol) {
            Some(book) => alerts.books.push((book, change)),
            None => orphaned += 1,
        }
    }
    if orphaned > 0 {
        tracing::warn!(
            "{orphaned} active alerts are on pairs or venues not served now; kept in storage, evaluated once \
             their venue lists the pair"
        );
    }
    tracing::info!(
        "{} active alerts loaded ({} of them on every pair of a venue)",
        alerts.books.len() + alerts.universe.len(),
        alerts.universe.len()
    );
    Ok(alerts)
}

/// What the REST thread's listing refreshes do to the shards: delist, list again, or add a
/// book (with the stored active alerts on it, e.g. those of a venue that joined late). Runs on
/// the REST thread; a full command queue is waited out (it drains every millisecond).
fn listing_hook(
    commands: rampart_state::Commands,
    shared: Arc<rampart_state::Shared>,
    natives: Arc<arc_swap::ArcSwap<Vec<String>>>,
    store: Store,
    alerts_on: Arc<AtomicBool>,
) -> rest::OnListing {
    let store = std::sync::Mutex::new(store);
    let send = move |book, cmd| send_waiting(&commands, book, cmd);
    Box::new(move |change| match change {
        ListingChange::Delisted(book) => send(book, ShardCommand::Delist { book }),
        ListingChange::Relisted(book) => send(book, ShardCommand::Relist { book }),
        ListingChange::Added(book) => {
            let registry = shared.registry();
            let ins = registry.get(book);
            // Read while the book is still pending (no client can add an alert to it yet), so
            // no alert is handed over twice. A hot standby reads none: the claim hands every one.
            let wanted = alerts_on.load(Ordering::Acquire);
            let read = store.lock().map_err(|_| ()).and_then(|s| match wanted {
                true => s.active_alerts().map_err(|_| ()),
                false => Ok(Vec::new()),
            });
            let rows = match read {
                Ok(rows) => rows,
                Err(()) => {
                    tracing::error!("{} {}: stored alerts could not be read", ins.venue, ins.symbol);
                    Vec::new()
                }
            };
            let native = natives.load().get(book.index()).cloned().unwrap_or_default();
            send(book, ShardCommand::AddBook { book, native });
            for row in rows.iter().filter(|r| r.exchange == ins.venue && r.symbol == ins.symbol) {
                send(book, ShardCommand::Alert { book, change: row.change(false) });
            }
        }
    })
}

/// What the REST thread's perpetual listing refreshes do to the shards (`decisions.md` §17
/// "Listings"): the book's shard drops, takes again or gains its perpetual. Runs on the REST
/// thread; a full command queue is waited out.
fn perp_listing_hook(commands: rampart_state::Commands) -> OnPerpListing {
    use rampart_state::{PerpContract, PerpListingChange};
    Box::new(move |change| {
        let (book, change) = match change {
            PerpChange::Delisted(book) => (book, PerpListingChange::Delisted),
            PerpChange::Relisted(book) => (book, PerpListingChange::Relisted),
            PerpChange::Added(book, p) => {
                let contract = PerpContract {
                    contract: p.contract,
                    multiplier: p.multiplier,
                    contract_size: p.contract_size,
                    interval_h: p.interval_h,
                };
                (book, PerpListingChange::Added(contract))
            }
        };
        send_waiting(&commands, book, ShardCommand::Perp { book, change });
    })
}

/// Lists the venues' instruments for the live feed: the registry of every listed, not delisted
/// instrument, and each book's native name. A venue that does not answer within
/// [`rest::LISTING_START_TIMEOUT`] (or lists nothing) is left out and reported; while no venue
/// at all could be listed, every venue is asked again (the port answers 503 "starting").
pub(crate) fn list_live(
    venues: &[VenueSettings],
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<(Registry, Vec<String>)> {
    let mut instruments = Vec::new();
    let mut natives = Vec::new();
    for round in 1u64.. {
        for (v, list) in venues.iter().zip(rest::list_venues(venues, tls.clone())) {
            let served = list.map(|l| {
                l.into_iter()
                    .filter(|l| l.instrument.status != rampart_engine::instrument::Status::Delisted)
                    .collect::<Vec<_>>()
            });
            match served {
                Ok(list) if !list.is_empty() => {
                    tracing::info!("{}: {} pairs listed", v.venue.as_str(), list.len());
                    for l in list {
                        instruments.push(l.instrument);
                        natives.push(l.native);
                    }
                }
                Ok(_) => {
                    tracing::warn!("{}: the listing has no pairs; venue not served until restart", v.venue.as_str())
                }
                Err(e) => {
                    tracing::warn!("{}: listing failed, venue not served until restart: {e}", v.venue.as_str())
                }
            }
        }
        if !instruments.is_empty() {
            break;
        }
        tracing::warn!("--feed live: no venue could be listed (round {round}); asking again");
    }
    let registry = Registry::new(instruments).map_err(|e| anyhow::anyhow!("registry: {e:?}"))?;
    Ok((registry, natives))
}

/// The venues' pairs and, with `[derivatives]` on, their perpetuals (both while the port still
/// answers "starting").
#[allow(clippy::type_complexity)]
fn list_pairs_and_perps(
    venues: &[VenueSettings],
    tls: Option<Arc<rustls::ClientConfig>>,
    derivatives: bool,
) -> Result<(Registry, Vec<String>, Vec<(rampart_engine::BookId, rampart_venue::perp_listing::PerpPair)>)> {
    let (registry, natives) = list_live(venues, tls.clone())?;
    let perps = if derivatives { list_perps(venues, tls, &registry) } else { Vec::new() };
    Ok((registry, natives, perps))
}

/// Every venue's USDT perpetuals (decisions §17), matched onto the pairs `registry` serves: each
/// book with a perpetual and its contract, in registry order. A venue whose perpetual listing
/// fails runs without perpetuals (logged; `/healthz` says `perp: off`).
fn list_perps(
    venues: &[VenueSettings],
    tls: Option<Arc<rustls::ClientConfig>>,
    registry: &Registry,
) -> Vec<(rampart_engine::BookId, rampart_venue::perp_listing::PerpPair)> {
    let mut out = Vec::new();
    for (v, listing) in venues.iter().zip(rest::list_perps(venues, tls)) {
        let listing = match listing {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(
                    "{}: perpetual listing failed, no perpetual served until restart: {e}",
                    v.venue.as_str()
                );
                continue;
            }
        };
        let books = registry.venue_books(v.venue);
        let spot: std::collections::HashSet<&str> = books.iter().map(|b| registry.get(*b).symbol.as_str()).collect();
        let (pairs, unmatched) = rampart_venue::perp_listing::match_spot(&listing, &spot);
        tracing::info!(
            "{}: {} perpetuals matched to pairs ({unmatched} without a spot pair here, {} unusable)",
            v.venue.as_str(),
            pairs.len(),
            listing.skipped
        );
        out.extend(pairs.into_iter().filter_map(|p| registry.find(v.venue, &p.symbol).map(|b| (b, p))));
    }
    out.sort_by_key(|(b, _)| *b);
    out
}

/// `--sim-delist SYMBOL@SECONDS`: a thread per delisting that waits for readiness, then the
/// given time, then delists the pair on every venue.
pub(super) fn start_sim_delistings(s: &ServeSettings, shards: &ShardSet) -> Result<()> {
    for (symbol, after_s) in s.sim_delist.clone() {
        let (shared, commands) = (shards.shared().clone(), shards.commands());
        std::thread::Builder::new().name("sim-delist".into()).spawn(move || {
            while !shared.ready() {
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(Duration::from_secs(after_s));
            for venue in Venue::ALL {
                let Some(book) = shared.registry().find(venue, &symbol) else { continue };
                send_waiting(&commands, book, ShardCommand::Delist { book });
                tracing::info!("simulated delisting of {symbol} on {venue}");
            }
        })?;
    }
    Ok(())
}

/// Queues a command for a book's shard, waiting out a full queue (it drains every millisecond).
fn send_waiting(commands: &rampart_state::Commands, book: rampart_engine::BookId, mut cmd: ShardCommand) {
    while let Err(back) = commands.send(book, cmd) {
        cmd = back;
        std::thread::sleep(Duration::from_millis(5));
    }
}
